import Foundation
import Glibc
import Routing
import Store
import Testing

/// A fresh private directory standing in for XDG_STATE_HOME and XDG_RUNTIME_DIR, removed afterwards.
func withScratch(_ body: (String) throws -> Void) throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("routectl-store-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    try body(dir)
}

func bytes(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { Array($0) } }

func write(_ text: String, to path: String) throws {
    let parent = (path as NSString).deletingLastPathComponent
    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
}

/// The StateError `body` throws; nil when it returns or throws anything else.
func stateError<T>(_ body: () throws -> T) -> StateError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? StateError
    }
}

@Suite struct StateStoreTests {
    @Test func writesReadBackAndStartFromDefaults() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: "\(dir)/state", runtimeDir: dir)
            #expect(try store.loadPersistent() == PersistentState())
            #expect(try store.loadOverride() == nil)
            try store.savePersistent(PersistentState(defaultTarget: .earpiece, preferredInput: "mic"))
            #expect(try store.loadPersistent() == PersistentState(defaultTarget: .earpiece, preferredInput: "mic"))
            let record = OverrideRecord(target: .bluetooth, device: "bt", setAt: 42, externals: ["b", "a"])
            try store.saveOverride(record)
            #expect(try store.loadOverride() == record)
            #expect(record.externals == ["a", "b"], "stored sorted, so staleness does not depend on order")
            try store.removeOverride()
            #expect(try store.loadOverride() == nil)
            try store.removeOverride()
            let intent = RouteIntent(output: "sink", reason: .override, at: 7)
            try store.saveIntent(intent)
            #expect(store.loadIntent() == intent)
        }
    }

    /// Each intent written keeps the moves it supersedes from the last 5 s, at most three, newest
    /// first; marking a move done keeps them; an entry this routectl cannot read is left out.
    @Test func anIntentKeepsTheMovesItSupersedes() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let set = RouteIntent(output: "headset", reason: .override, at: 10_000)
            try store.saveIntent(set)
            try store.saveIntent(RouteIntent(output: "headset", reason: .override, at: 10_000, done: true))
            let fallback = RouteIntent(output: "speaker", reason: .oldDeviceUnavailable, at: 10_020)
            try store.saveIntent(fallback)
            var done = fallback
            done.done = true
            try store.saveIntent(done)
            let setDone = RouteIntent(output: "headset", reason: .override, at: 10_000, done: true)
            #expect(store.loadIntent() == RouteIntent(output: "speaker", reason: .oldDeviceUnavailable, at: 10_020, done: true,
                                                      earlier: [setDone]))
            let text = String(decoding: try #require(bytes("\(dir)/routectl/intent.json")), as: UTF8.self)
            #expect(text.contains(#""earlier":[{"output":"headset","reason":"override","at":10000,"done":true}]"#), "\(text)")
            for (i, at) in [11_000, 12_000, 13_000].enumerated() {
                try store.saveIntent(RouteIntent(output: "o\(i)", reason: .override, at: Int64(at), done: true))
            }
            #expect(store.loadIntent()?.earlier.map(\.at) == [12_000, 11_000, 10_020], "three kept, newest first")
            try store.saveIntent(RouteIntent(output: "late", reason: .override, at: 16_500))
            #expect(store.loadIntent()?.earlier.map(\.at) == [13_000, 12_000], "older than 5 s: gone")
            try write(#"{"version": 1, "output": "x", "reason": "override", "at": 20000, "done": true, "earlier": [{"output": 1}, 7, {"output": "y", "reason": "override", "at": 19000}]}"#,
                      to: "\(dir)/routectl/intent.json")
            #expect(store.loadIntent()?.earlier == [RouteIntent(output: "y", reason: .override, at: 19_000, done: true)])
            // A command marks its move done after another one was announced: its record is the
            // latest written, and the newer move is kept.
            let newer = RouteIntent(output: "speaker", reason: .oldDeviceUnavailable, at: 30_010)
            try store.saveIntent(RouteIntent(output: "headset", reason: .override, at: 30_000))
            try store.saveIntent(newer)
            try store.saveIntent(RouteIntent(output: "headset", reason: .override, at: 30_000, done: true))
            #expect(store.loadIntent() == RouteIntent(output: "headset", reason: .override, at: 30_000, done: true, earlier: [newer]))
            #expect(FileManager.default.fileExists(atPath: "\(dir)/routectl/intent.json.lock"), "written under its lock")
        }
    }

    @Test func aCorruptFileIsAnErrorNamingItAndIsLeftAlone() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            try write(#"{"default": "loud"}"#, to: store.stateFile)
            let error = stateError { try store.loadPersistent() }
            #expect(error?.path == store.stateFile)
            #expect(error?.problem.contains("'loud' is not speaker or earpiece") == true)
            #expect(stateError { try store.updatePersistent { $0.defaultTarget = .earpiece } }?.path == store.stateFile)
            #expect(bytes(store.stateFile) == Array(#"{"default": "loud"}"#.utf8))
        }
    }

    @Test func noRuntimeDirMeansNoOverride() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: nil)
            #expect(store.overrideFile == nil)
            #expect(store.runtimeFile("call.json", of: PersistentState.self) == nil)
            #expect(stateError { try store.loadOverride() }
                == StateError(path: "$XDG_RUNTIME_DIR", problem: "not set, or not an absolute path; the temporary override lives in the runtime directory"))
        }
    }

    @Test func directoriesArePrivate() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: "\(dir)/a/b", runtimeDir: dir)
            try store.savePersistent(PersistentState())
            var st = stat()
            #expect(stat("\(dir)/a/b/routectl", &st) == 0)
            #expect(st.st_mode & 0o777 == 0o700)
            #expect(stat(store.stateFile, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600)
        }
    }

    // MARK: Hostile files (DESIGN.md §4)

    @Test func aSymlinkedStateFileIsRefusedAndItsTargetUntouched() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: "\(dir)/state", runtimeDir: dir)
            let target = "\(dir)/elsewhere.json"
            try write(#"{"version":1,"default":"speaker"}"#, to: target)
            try write("", to: "\(dir)/state/routectl/placeholder")
            #expect(symlink(target, store.stateFile) == 0)
            let read = stateError { try store.loadPersistent() }
            #expect(read?.path == store.stateFile)
            #expect(read?.problem.contains("symbolic link") == true)
            #expect(stateError { try store.savePersistent(PersistentState(defaultTarget: .earpiece)) }?.path == store.stateFile)
            #expect(bytes(target) == Array(#"{"version":1,"default":"speaker"}"#.utf8))
        }
    }

    @Test func aSymlinkedOrFIFOLockIsRefused() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: "\(dir)/state", runtimeDir: dir)
            try write("", to: "\(dir)/state/routectl/placeholder")
            #expect(symlink("\(dir)/lock-target", store.stateFile + ".lock") == 0)
            #expect(stateError { try store.lockPersistent() }?.path == store.stateFile + ".lock")
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/lock-target"))
            let overrideFile = try #require(store.overrideFile)
            try store.saveOverride(OverrideRecord(target: .speaker, setAt: 0, externals: []))
            #expect(mkfifo(overrideFile + ".lock", 0o600) == 0)
            #expect(stateError { try store.lockOverride() }?.problem.contains("FIFO") == true)
        }
    }

    @Test func aFIFOInPlaceOfAStateFileFailsAtOnce() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let overrideFile = try #require(store.overrideFile)
            try write("", to: "\(dir)/routectl/placeholder")
            #expect(mkfifo(overrideFile, 0o600) == 0)
            let error = stateError { try store.loadOverride() }
            #expect(error?.path == overrideFile)
            #expect(error?.problem.contains("not a regular file (a FIFO)") == true)
        }
    }

    @Test func devZeroAndHugeFilesAreRefusedWithinTheLimit() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            try write("", to: "\(dir)/routectl/placeholder")
            #expect(symlink("/dev/zero", store.stateFile) == 0)
            #expect(stateError { try store.loadPersistent() }?.path == store.stateFile)
            #expect(throws: FileError.self) { try FileIO.read("/dev/zero", followLinks: true) }
            try FileManager.default.removeItem(atPath: store.stateFile)
            try write(#"{"pad":""# + String(repeating: "x", count: 2 << 20) + #""}"#, to: store.stateFile)
            #expect(stateError { try store.loadPersistent() }?.problem.contains("too large") == true)
            // A /proc file reports size 0 and is read to its end all the same, past one 4 KiB step too.
            #expect(try FileIO.read("/proc/self/comm").isEmpty == false)
            let maps = try FileIO.read("/proc/self/maps", limit: 1 << 20)
            #expect(maps.count > 4096 && maps.last == UInt8(ascii: "\n"))
            #expect(throws: FileError.self) { try FileIO.read("/proc/self/maps", limit: 4096) }
            // A regular file is read whole up to the limit, to the byte, and refused one byte past it.
            let exact = "\(dir)/exact"
            try write(String(repeating: "y", count: 5000), to: exact)
            #expect(try FileIO.read(exact, limit: 5000) == Array(repeating: UInt8(ascii: "y"), count: 5000))
            #expect(try FileIO.read(exact).count == 5000)
            #expect(throws: FileError(path: exact, errno: EFBIG, problem: "too large: more than 4 KiB")) { try FileIO.read(exact, limit: 4999) }
        }
    }

    @Test func aRuntimeDirOthersCanWriteOrSomeoneElseOwnsIsRefusedEvenForReading() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let runtime = "\(dir)/routectl"
            try write("", to: "\(runtime)/placeholder")
            #expect(chmod(runtime, 0o777) == 0)
            #expect(stateError { try store.loadOverride() }?.path == runtime)
            #expect(stateError { try store.saveOverride(OverrideRecord(target: .speaker, setAt: 0, externals: [])) }?.path == runtime)
            #expect(chmod(runtime, 0o700) == 0)
            #expect(try store.loadOverride() == nil)
            if getuid() == 0 {
                #expect(chown(runtime, 65_534, 65_534) == 0)
                #expect(stateError { try store.loadOverride() }?.problem.contains("belongs to uid 65534") == true)
            }
        }
    }

    @Test func relativeXDGDirectoriesAreIgnored() {
        let env = ["HOME": "/home/me", "XDG_STATE_HOME": "relative/state", "XDG_RUNTIME_DIR": "run"]
        let store = StateStore(environment: { env[$0] }, home: { "/from/passwd" })
        #expect(store.stateFile == "/home/me/.local/state/routectl/state.json")
        #expect(store.overrideFile == nil)
        let absolute = ["XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/r"]
        let other = StateStore(environment: { absolute[$0] }, home: { "/from/passwd" })
        #expect(other.stateFile == "/s/routectl/state.json")
        #expect(other.overrideFile == "/r/routectl/override.json")
        #expect(StateStore(environment: { _ in nil }, home: { "/from/passwd" }).stateFile == "/from/passwd/.local/state/routectl/state.json")
    }

    // MARK: Versions and keys of other routectl releases

    @Test func aNewerVersionIsRefusedAndNeverOverwritten() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let text = #"{"version":99,"default":"speaker","future":true}"#
            try write(text, to: store.stateFile)
            #expect(stateError { try store.loadPersistent() }?.problem.contains("version 99 is newer") == true)
            #expect(stateError { try store.savePersistent(PersistentState(defaultTarget: .earpiece)) }?.path == store.stateFile)
            #expect(stateError { try store.updatePersistent { $0.defaultTarget = .earpiece } }?.path == store.stateFile)
            #expect(bytes(store.stateFile) == Array(text.utf8))
        }
    }

    /// A hand-edited file routectl did not write: a member given twice (parsers disagree on which
    /// counts) or a version that is not a number, or not one (0 or less), is an error naming the file,
    /// and the file is kept.
    @Test func aMemberGivenTwiceOrAVersionInQuotesIsAnError() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            for (text, problem) in [(#"{"version":1,"default":"earpiece","default":"speaker"}"#, "member 'default' is given twice"),
                                    (#"{"version":1,"priority":[{"a":1,"a":2}]}"#, "member 'a' is given twice"),
                                    (#"{"version":1,"later":{"b":1,"c":2,"b":3}}"#, "member 'b' is given twice"),
                                    // Past 32 members the names go into a set: the same answer.
                                    ("{\"version\":1," + (0..<40).map { "\"k\($0)\":\($0)," }.joined() + "\"k7\":0}",
                                     "member 'k7' is given twice"),
                                    (#"{"version":"1","default":"earpiece"}"#, "version: expected an integer"),
                                    (#"{"version":1.0,"default":"earpiece"}"#, "version: expected an integer"),
                                    (#"{"version":0,"default":"earpiece"}"#, "version: 0 is no version"),
                                    (#"{"version":-1,"default":"earpiece"}"#, "version: -1 is no version"),
                                    (#"{"version":1,"priority":["bt",""]}"#, "priority[1]: a malformed id"),
                                    (#"{"version":1,"priority":["a\u0007b"]}"#, "priority[0]: a malformed id")] {
                try write(text, to: store.stateFile)
                let error = stateError { try store.loadPersistent() }
                #expect(error?.path == store.stateFile, "\(text)")
                #expect(error?.problem.contains(problem) == true, "\(text): \(error?.problem ?? "no error")")
                #expect(stateError { try store.updatePersistent { $0.defaultTarget = .speaker } }?.path == store.stateFile)
                #expect(bytes(store.stateFile) == Array(text.utf8))
            }
        }
    }

    @Test func keysANewerRoutectlWroteSurviveARewrite() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            try write(#"{"version":1,"default":"speaker","priority":["bluez_card.x","headset"],"later":{"a":1}}"#, to: store.stateFile)
            try store.updatePersistent { $0.defaultTarget = .earpiece }
            let text = String(decoding: try #require(bytes(store.stateFile)), as: UTF8.self)
            #expect(text == #"{"version":1,"default":"earpiece","preferred_input":null,"priority":["bluez_card.x","headset"],"later":{"a":1}}"# + "\n")
        }
    }

    @Test func validateReadsEveryFileAWatcherNeeds() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            try store.validate()
            let overrideFile = try #require(store.overrideFile)
            try write("nonsense", to: overrideFile)
            #expect(stateError { try store.validate() }?.path == overrideFile)
        }
    }

    // MARK: The typed file, locks, syscalls, clocks

    /// A record of the kind later issues add (call.json): it gets load, save, locks and versions for free.
    struct CallRecord: StateRecord, Equatable {
        static let fileKind = "call"
        var route: String
        init(route: String) { self.route = route }
        init(fields: Fields) throws(FieldError) { route = try fields.string("route") }
        var fields: [(String, JSON)] { [("route", .string(route))] }
    }

    @Test func anyRecordGetsItsOwnFile() throws {
        try withScratch { dir in
            let file = try #require(StateStore(stateHome: dir, runtimeDir: dir).runtimeFile("call.json", of: CallRecord.self))
            #expect(file.path == "\(dir)/routectl/call.json")
            #expect(try file.load() == nil)
            try file.update(default: CallRecord(route: "speaker")) { $0.route = "receiver" }
            #expect(try file.load() == CallRecord(route: "receiver"))
            try write(#"{"version":1}"#, to: file.path)
            #expect(stateError { try file.load() }?.problem == "not a routectl call file (route: missing); fix or remove it")
        }
    }

    /// `call.json` says whether `call start` got as far as applying the call; one written before the
    /// key existed is a call in progress.
    @Test func theCallRecordKeepsWhetherItIsApplied() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            try store.saveCall(Routing.CallRecord(startedAt: 5, speaker: true, applied: false))
            #expect(try store.loadCall()?.applied == false)
            let file = try #require(store.call)
            try write(#"{"version":1,"started_at":5,"speaker":false,"externals":[]}"#, to: file.path)
            #expect(try store.loadCall() == Routing.CallRecord(startedAt: 5, speaker: false))
            #expect(try store.loadCall()?.applied == true)
        }
    }

    /// `decision.json` keeps the devices present at another client's pick; one written before the key
    /// existed, or by a decision of routectl's own, has none.
    @Test func theDecisionKeepsTheDevicesOfAPick() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let pick = DecisionRecord(reason: .routeConfigurationChange, cause: "another client's pick", output: "a:b", at: 9,
                                      externals: ["z", "bluez_card.1"])
            try store.saveDecision(pick)
            #expect(store.loadDecision() == pick)
            #expect(store.loadDecision()?.externals == ["bluez_card.1", "z"])
            let file = try #require(store.decision)
            try write(#"{"version":1,"reason":"override","at":3}"#, to: file.path)
            #expect(store.loadDecision() == DecisionRecord(reason: .override, at: 3))
            #expect(store.loadDecision()?.externals == nil)
            // Another pick's devices, kept by an older routectl that rewrote the file: not this one's.
            try write(#"{"version":1,"reason":"route-configuration-change","at":5,"externals":["x"],"externals_at":4}"#, to: file.path)
            #expect(store.loadDecision()?.at == 5)
            #expect(store.loadDecision()?.externals == nil)
        }
    }

    /// `call.json` keeps the call's mute with its time; half of the pair is a broken file.
    @Test func theCallRecordKeepsTheCallsMuteWithItsTime() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let record = Routing.CallRecord(startedAt: 5, speaker: false, callMute: .init(muted: true, at: 7))
            try store.saveCall(record)
            #expect(try store.loadCall() == record)
            let file = try #require(store.call)
            try write(#"{"version":1,"started_at":5,"speaker":false,"externals":[],"call_mic_muted":true}"#, to: file.path)
            #expect(stateError { try store.loadCall() }?.problem.contains("call_mic_muted_at: missing") == true)
        }
    }

    /// `profiles.json`, the profiles owed to cards that left during a call: changed read fresh under
    /// its lock, gone when nothing is owed; advisory, so an unreadable one owes nothing and is replaced.
    @Test func owedProfilesAreAdvisoryAndGoWhenPaid() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let path = try #require(store.owedProfiles).path
            #expect(path == "\(dir)/routectl/profiles.json")
            let headset = Routing.CallRecord.CardProfile(card: "bluez_card.A", profile: "a2dp-sink")
            let other = Routing.CallRecord.CardProfile(card: "bluez_card.B", profile: "a2dp-sink-sbc")
            try store.updateOwedProfiles { $0 + [headset] }
            try store.updateOwedProfiles { $0 + [other] }
            #expect(store.loadOwedProfiles() == [headset, other])
            try store.updateOwedProfiles { $0.filter { $0.card != headset.card } }
            #expect(store.loadOwedProfiles() == [other])
            try store.updateOwedProfiles { _ in [] }
            #expect(bytes(path) == nil, "nothing owed: no file")
            try write("{not json", to: path)
            #expect(store.loadOwedProfiles() == [])
            try store.updateOwedProfiles { $0 + [headset] }
            #expect(store.loadOwedProfiles() == [headset])
        }
    }

    @Test func withLockHoldsTheLockForItsBodyOnly() throws {
        try withScratch { dir in
            let store = StateStore(stateHome: dir, runtimeDir: dir)
            let lockFile = try #require(store.overrideFile) + ".lock"
            try store.withOverrideLock { () throws(StateError) in
                #expect(throws: FileError(path: lockFile, errno: EWOULDBLOCK)) { _ = try FileLock(lockFile, wait: false) }
            }
            _ = try FileLock(lockFile, wait: false)
        }
    }

    /// A bounded wait for a lock held elsewhere (here another open of the file: flock(2) locks are
    /// the open's): nil once the time is up, not sooner and not much later; the lock at once when
    /// free; its SIGALRM handler gone after (a stray SIGALRM ends a process, as it should).
    @Test func aBoundedLockWaitEndsOnTimeAndLeavesNoTimer() throws {
        try withScratch { dir in
            let path = dir + "/x.lock"
            var holder: FileLock? = try FileLock(path)
            let began = Clock.monotonicSeconds()
            #expect(try FileLock.take(path, within: 0.3) == nil)
            let waited = Clock.monotonicSeconds() - began
            #expect(waited >= 0.3 && waited < 1, "\(waited) s")
            var action = sigaction()
            sigaction(SIGALRM, nil, &action)
            #expect(action.__sigaction_handler.sa_handler == nil, "SIGALRM back to its default")
            #expect(try FileLock.take(path, within: 0) == nil, "no wait: tried once")
            #expect(holder != nil)
            holder = nil
            let free = Clock.monotonicSeconds()
            #expect(try FileLock.take(path, within: 5) != nil)
            #expect(Clock.monotonicSeconds() - free < 0.1)
        }
    }

    @Test func retryingRepeatsOnlyInterruptedCalls() {
        var calls = 0
        let result = Syscall.retrying { () -> Int32 in
            calls += 1
            if calls < 3 { errno = EINTR; return -1 }
            return 7
        }
        #expect(result == 7 && calls == 3)
        calls = 0
        let failed = Syscall.retrying { () -> Int in
            calls += 1
            errno = EBADF
            return -1
        }
        #expect(failed == -1 && errno == EBADF && calls == 1)
    }

    @Test func clocksAgreeWithTheSystem() {
        let a = Clock.monotonicMilliseconds(), b = Clock.monotonicMilliseconds()
        #expect(b >= a)
        #expect(abs(Clock.monotonicSeconds() * 1000 - Double(b)) < 1000)
        #expect(abs(Clock.realtimeMilliseconds() / 1000 - Int64(time(nil))) <= 1)
        #expect(abs(Clock.realtimeSeconds() - Int64(time(nil))) <= 1)
    }
}
