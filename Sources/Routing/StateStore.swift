import Glibc

/// A state file that cannot be read, parsed or written (routectl's exit status 5). It names the path.
public struct StateError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String
    public var description: String { "\(path): \(problem)" }

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }
}

/// The temporary override as stored: the target, when it was set, and the external outputs present
/// then, so that a plug or unplug since then clears it even when nothing was watching.
public struct OverrideRecord: Equatable, Sendable {
    public var target: RouteTarget
    public var device: String?
    public var setAt: Int64
    public var externals: [String]

    public init(target: RouteTarget, device: String? = nil, setAt: Int64, externals: [String]) {
        self.target = target
        self.device = device
        self.setAt = setAt
        self.externals = externals.sorted()
    }

    /// Why the override no longer holds, or nil while the same external outputs are present.
    public func staleness(currentExternals: [String]) -> String? {
        let then = Set(externals), now = Set(currentExternals)
        if then == now { return nil }
        if let added = now.subtracting(then).sorted().first { return "'\(added)' was connected" }
        return "'\(then.subtracting(now).sorted().first!)' was disconnected"
    }
}

/// What routectl itself is about to do to the route, written before it acts, so that a watcher that
/// sees the switch reports routectl's reason (`override`, or the device change `watch --apply`
/// answered) instead of taking it for another client's (`route-configuration-change`).
public struct RouteIntent: Equatable, Sendable {
    /// The id of the output the route is being moved to.
    public var output: String
    public var reason: RouteChangeReason
    /// When, in milliseconds of the real-time clock.
    public var at: Int64
    /// The command has finished (read the route back, or given up).
    public var done: Bool

    public init(output: String, reason: RouteChangeReason, at: Int64, done: Bool = false) {
        self.output = output
        self.reason = reason
        self.at = at
        self.done = done
    }
}

/// The persistent layer: kept across reboots.
public struct PersistentState: Equatable, Sendable {
    public var defaultTarget: RouteTarget
    public var preferredInput: String?

    public init(defaultTarget: RouteTarget = .speaker, preferredInput: String? = nil) {
        self.defaultTarget = defaultTarget
        self.preferredInput = preferredInput
    }
}

/// routectl's two state files (DESIGN.md §4). Every change is made under the file's lock, read
/// fresh, and written atomically; a file that cannot be parsed is reported and never overwritten.
public struct StateStore: Sendable {
    public let stateFile: String
    /// nil when there is no runtime directory; commands that need the override then fail.
    public let overrideFile: String?
    let runtimeDir: String?

    /// - Parameters: stateHome is `$XDG_STATE_HOME` (else `~/.local/state`), runtimeDir `$XDG_RUNTIME_DIR`.
    public init(stateHome: String, runtimeDir: String?) {
        stateFile = "\(stateHome)/routectl/state.json"
        self.runtimeDir = runtimeDir
        overrideFile = runtimeDir.map { "\($0)/routectl/override.json" }
    }

    // MARK: Persistent state

    public func loadPersistent() throws(StateError) -> PersistentState {
        guard let json = try readJSON(stateFile) else { return PersistentState() }
        let r = Reader(value: json, path: "")
        do {
            guard json.objectValue != nil else { throw r.error("expected an object") }
            let word = try r.optionalString("default") ?? "speaker"
            guard let target = RouteTarget(rawValue: word), target.isBuiltIn else {
                throw Reader(value: json, path: "default").error("'\(word)' is not speaker or earpiece")
            }
            return PersistentState(defaultTarget: target, preferredInput: try r.optionalString("preferred_input"))
        } catch {
            throw StateError(path: stateFile, problem: "not a routectl state file (\(error)); fix or remove it")
        }
    }

    public func savePersistent(_ state: PersistentState) throws(StateError) {
        let json = JSON.object([
            ("version", .int(1)),
            ("default", .string(state.defaultTarget.rawValue)),
            ("preferred_input", state.preferredInput.map(JSON.string) ?? .null),
        ])
        try write(stateFile, json)
    }

    /// Changes the persistent state under its lock, read fresh, so concurrent writers of different
    /// fields lose nothing; returns what was written.
    @discardableResult
    public func updatePersistent(_ change: (inout PersistentState) -> Void) throws(StateError) -> PersistentState {
        let lock = try lockPersistent()
        defer { withExtendedLifetime(lock) {} }
        var state = try loadPersistent()
        change(&state)
        try savePersistent(state)
        return state
    }

    /// Holds the persistent file's lock: read, change and write under it.
    public func lockPersistent() throws(StateError) -> FileLock {
        try prepareDirectory(FileIO.directory(of: stateFile), isRuntime: false)
        return try lock(stateFile)
    }

    // MARK: Override

    public func loadOverride() throws(StateError) -> OverrideRecord? {
        let path = try requireOverridePath()
        guard let json = try readJSON(path) else { return nil }
        let r = Reader(value: json, path: "")
        do {
            let word = try r.string("override")
            guard let target = RouteTarget(rawValue: word) else { throw Reader(value: json, path: "override").error("unknown target '\(word)'") }
            var externals: [String] = []
            for item in try r.list("externals") {
                guard let s = item.value.stringValue else { throw item.error("expected a string") }
                externals.append(s)
            }
            let setAt = r.optional("set_at")?.value.intValue ?? 0
            return OverrideRecord(target: target, device: try r.optionalString("device"), setAt: setAt, externals: externals)
        } catch {
            throw StateError(path: path, problem: "not a routectl override file (\(error)); fix or remove it")
        }
    }

    public func saveOverride(_ record: OverrideRecord) throws(StateError) {
        let path = try requireOverridePath()
        let json = JSON.object([
            ("version", .int(1)),
            ("override", .string(record.target.rawValue)),
            ("device", record.device.map(JSON.string) ?? .null),
            ("set_at", .int(record.setAt)),
            ("externals", .array(record.externals.map(JSON.string))),
        ])
        try write(path, json)
    }

    public func removeOverride() throws(StateError) {
        let path = try requireOverridePath()
        do { try FileIO.remove(path) } catch { throw StateError(path: path, problem: "cannot remove: \(error)") }
    }

    // MARK: Muted by routectl

    var mutedFile: String? { runtimeDir.map { "\($0)/routectl/muted.json" } }

    /// The sink `--mute-on-fallback` muted, if any. Advisory like the intent: unreadable is none.
    public func loadMuted() -> String? {
        guard let path = mutedFile, let json = try? readJSON(path) else { return nil }
        return try? Reader(value: json, path: "").optionalString("sink")
    }

    public func saveMuted(_ sink: String?) throws(StateError) {
        guard let path = mutedFile else { return }
        guard let sink else {
            do { try FileIO.remove(path) } catch where error.errno == ENOENT {} catch { throw StateError(path: path, problem: "cannot remove: \(error)") }
            return
        }
        try prepareDirectory(FileIO.directory(of: path), isRuntime: true)
        try write(path, JSON.object([("version", .int(1)), ("sink", .string(sink))]))
    }

    // MARK: Intent

    var intentFile: String? { runtimeDir.map { "\($0)/routectl/intent.json" } }

    public func saveIntent(_ intent: RouteIntent) throws(StateError) {
        guard let path = intentFile else { return }
        try prepareDirectory(FileIO.directory(of: path), isRuntime: true)
        try write(path, JSON.object([
            ("version", .int(1)), ("output", .string(intent.output)), ("reason", .string(intent.reason.rawValue)),
            ("at", .int(intent.at)), ("done", .bool(intent.done)),
        ]))
    }

    /// The last intent, if any. Advisory: an unreadable one is no intent (it only names a reason).
    public func loadIntent() -> RouteIntent? {
        guard let path = intentFile, let json = try? readJSON(path) else { return nil }
        let r = Reader(value: json, path: "")
        guard let output = try? r.string("output"), let word = try? r.string("reason"),
              let reason = RouteChangeReason(rawValue: word), let at = r.optional("at")?.value.intValue else { return nil }
        return RouteIntent(output: output, reason: reason, at: at, done: r.optional("done")?.value.boolValue ?? true)
    }

    public func lockOverride() throws(StateError) -> FileLock {
        let path = try requireOverridePath()
        try prepareDirectory(FileIO.directory(of: path), isRuntime: true)
        return try lock(path)
    }

    // MARK: Plumbing

    func requireOverridePath() throws(StateError) -> String {
        guard let overrideFile else {
            throw StateError(path: "$XDG_RUNTIME_DIR", problem: "not set; the temporary override lives in the runtime directory")
        }
        return overrideFile
    }

    func readJSON(_ path: String) throws(StateError) -> JSON? {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path)
        } catch {
            if error.errno == ENOENT { return nil }
            throw StateError(path: path, problem: "cannot read: \(error)")
        }
        do {
            return try JSON.parse(bytes: bytes)
        } catch {
            throw StateError(path: path, problem: "not valid JSON (\(error)); fix or remove it")
        }
    }

    func write(_ path: String, _ json: JSON) throws(StateError) {
        do {
            try FileIO.writeAtomically(path, Array((json.text + "\n").utf8))
        } catch {
            throw StateError(path: path, problem: "cannot write: \(error)")
        }
    }

    func lock(_ path: String) throws(StateError) -> FileLock {
        do { return try FileLock(path + ".lock") } catch { throw StateError(path: path + ".lock", problem: "cannot lock: \(error)") }
    }

    /// Creates routectl's directory 0700; refuses a runtime directory that belongs to someone else.
    func prepareDirectory(_ dir: String, isRuntime: Bool) throws(StateError) {
        if isRuntime, let runtimeDir {
            switch Result(catching: { () throws(FileError) in try FileIO.owner(runtimeDir) }) {
            case .failure(let error): throw StateError(path: runtimeDir, problem: "\(error)")
            case .success(nil): throw StateError(path: runtimeDir, problem: "the runtime directory does not exist")
            case .success(let owner?) where owner != getuid():
                throw StateError(path: runtimeDir, problem: "the runtime directory belongs to uid \(owner), not to you (uid \(getuid()))")
            default: break
            }
        }
        do {
            try FileIO.makeDirectories(dir)
        } catch {
            throw StateError(path: error.path, problem: "cannot create: \(error)")
        }
        if case .success(let owner?) = Result(catching: { () throws(FileError) in try FileIO.owner(dir) }), owner != getuid() {
            throw StateError(path: dir, problem: "belongs to uid \(owner), not to you (uid \(getuid()))")
        }
    }
}
