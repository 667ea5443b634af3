import Glibc
import Routing
import Testing

@Suite struct StateStoreTests {
    /// A fresh private directory standing in for XDG_STATE_HOME and XDG_RUNTIME_DIR.
    func scratch() throws -> String {
        var template = Array("/tmp/routectl-store.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil)
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test func writesReadBackAndStartFromDefaults() throws {
        let dir = try scratch()
        let store = StateStore(stateHome: "\(dir)/state", runtimeDir: dir)
        #expect(try store.loadPersistent() == PersistentState())
        #expect(try store.loadOverride() == nil)
        _ = try store.lockPersistent()
        try store.savePersistent(PersistentState(defaultTarget: .earpiece, preferredInput: "mic"))
        #expect(try store.loadPersistent() == PersistentState(defaultTarget: .earpiece, preferredInput: "mic"))
        _ = try store.lockOverride()
        let record = OverrideRecord(target: .bluetooth, device: "bt", setAt: 42, externals: ["b", "a"])
        try store.saveOverride(record)
        #expect(try store.loadOverride() == record)
        #expect(record.externals == ["a", "b"], "stored sorted, so staleness does not depend on order")
        try store.removeOverride()
        #expect(try store.loadOverride() == nil)
        try store.removeOverride()
    }

    @Test func aCorruptFileIsAnErrorNamingItAndIsLeftAlone() throws {
        let dir = try scratch()
        let store = StateStore(stateHome: dir, runtimeDir: dir)
        _ = try store.lockPersistent()
        let garbage = Array(#"{"default": "loud"}"#.utf8)
        try FileIO.writeAtomically(store.stateFile, garbage)
        #expect(throws: StateError.self) { try store.loadPersistent() }
        do {
            _ = try store.loadPersistent()
        } catch {
            #expect(error.path == store.stateFile)
            #expect(error.problem.contains("'loud' is not speaker or earpiece"))
        }
        #expect(try FileIO.read(store.stateFile) == garbage)
    }

    @Test func noRuntimeDirMeansNoOverride() throws {
        let store = StateStore(stateHome: try scratch(), runtimeDir: nil)
        #expect(store.overrideFile == nil)
        #expect(throws: StateError(path: "$XDG_RUNTIME_DIR", problem: "not set; the temporary override lives in the runtime directory")) {
            try store.loadOverride()
        }
    }

    @Test func directoriesArePrivate() throws {
        let dir = try scratch()
        let store = StateStore(stateHome: "\(dir)/a/b", runtimeDir: dir)
        _ = try store.lockPersistent()
        var st = stat()
        #expect(stat("\(dir)/a/b/routectl", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
    }
}
