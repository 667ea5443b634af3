import Glibc
import Routing

/// routectl's state files (DESIGN.md §4): `state.json` under `$XDG_STATE_HOME/routectl`, the runtime
/// files (`override.json`, `intent.json`, and later `call.json`, `decision.json`) under
/// `$XDG_RUNTIME_DIR/routectl`. Every change is made under the file's lock, read fresh, and written
/// atomically; a file that cannot be parsed, or of a newer version, is reported and never overwritten.
public struct StateStore: Sendable {
    public let persistent: StateFile<PersistentState>
    /// nil when there is no runtime directory; commands that need the override then fail.
    public let override: StateFile<OverrideRecord>?
    public let intent: StateFile<RouteIntent>?
    let stateDirectory: StateDirectory
    let runtimeDirectory: StateDirectory?

    /// - Parameters: stateHome is `$XDG_STATE_HOME` (else `~/.local/state`), runtimeDir `$XDG_RUNTIME_DIR`.
    public init(stateHome: String, runtimeDir: String?) {
        stateDirectory = StateDirectory(path: "\(stateHome)/routectl", runtimeParent: nil)
        runtimeDirectory = runtimeDir.map { StateDirectory(path: "\($0)/routectl", runtimeParent: $0) }
        persistent = StateFile("state.json", in: stateDirectory)
        override = runtimeDirectory.map { StateFile("override.json", in: $0) }
        intent = runtimeDirectory.map { StateFile("intent.json", in: $0) }
    }

    /// The store the XDG variables name, read through `environment`. A relative or empty
    /// `XDG_STATE_HOME`/`XDG_RUNTIME_DIR` is ignored, as the XDG Base Directory spec says.
    public init(environment: (String) -> String?, home: () -> String?) {
        func absolute(_ name: String) -> String? { environment(name).flatMap { $0.hasPrefix("/") ? $0 : nil } }
        let stateHome = absolute("XDG_STATE_HOME") ?? "\(absolute("HOME") ?? home() ?? "")/.local/state"
        self.init(stateHome: stateHome, runtimeDir: absolute("XDG_RUNTIME_DIR"))
    }

    /// The store of the user running routectl, from the process environment (the password entry's
    /// home when `HOME` is unset).
    public static func forCurrentUser() -> StateStore {
        StateStore(environment: { name in getenv(name).map { String(cString: $0) } },
                   home: { getpwuid(getuid()).flatMap { $0.pointee.pw_dir }.map { String(cString: $0) } })
    }

    /// A runtime file of another record type (`call.json`, `decision.json`); nil without a runtime dir.
    public func runtimeFile<Record: StateRecord>(_ name: String, of _: Record.Type = Record.self) -> StateFile<Record>? {
        runtimeDirectory.map { StateFile(name, in: $0) }
    }

    public var stateFile: String { persistent.path }
    public var overrideFile: String? { override?.path }
    /// `$XDG_RUNTIME_DIR/routectl`, where the runtime files live (nil without a runtime dir).
    public var runtimeDirectoryPath: String? { runtimeDirectory?.path }

    /// `$XDG_STATE_HOME/routectl`, made 0700 when missing (with its parents); nil when it cannot be
    /// made or trusted (every command that reads it says why).
    public func preparedStateDirectory() -> String? {
        do { try stateDirectory.prepare() } catch { return nil }
        return stateDirectory.path
    }
    /// Where `watch --apply` holds its lock (one per session).
    public var applyLockFile: String? { runtimeDirectory.map { "\($0.path)/apply.lock" } }

    /// Reads every state file that must be sound (the directories, `state.json`, `override.json`), so
    /// that a long-running command fails at start rather than at its first change.
    public func validate() throws(StateError) {
        _ = try persistent.load()
        _ = try override?.load()
        _ = try call?.load()
    }

    // MARK: Persistent state

    public func loadPersistent() throws(StateError) -> PersistentState {
        try persistent.load() ?? PersistentState()
    }

    public func savePersistent(_ state: PersistentState) throws(StateError) {
        try persistent.save(state)
    }

    /// Changes the persistent state under its lock, read fresh, so concurrent writers of different
    /// fields lose nothing; returns what was written.
    @discardableResult
    public func updatePersistent(_ change: (inout PersistentState) -> Void) throws(StateError) -> PersistentState {
        try persistent.update(default: PersistentState(), change)
    }

    /// Holds the persistent file's lock: read, change and write under it.
    public func lockPersistent() throws(StateError) -> FileLock {
        try persistent.lock()
    }

    @discardableResult
    public func withPersistentLock<T>(_ body: () throws(StateError) -> T) throws(StateError) -> T {
        try persistent.withLock(body)
    }

    // MARK: Override

    public func loadOverride() throws(StateError) -> OverrideRecord? {
        try requireOverride().load()
    }

    public func saveOverride(_ record: OverrideRecord) throws(StateError) {
        try requireOverride().save(record)
    }

    public func removeOverride() throws(StateError) {
        try requireOverride().remove()
    }

    /// The override's lock, which also serialises the commands that change the route.
    public func lockOverride() throws(StateError) -> FileLock {
        try requireOverride().lock(isRouteLock: true)
    }

    /// The override's lock, waited for at most `seconds`; nil when another holder kept it that long.
    public func lockOverride(within seconds: Double) throws(StateError) -> FileLock? {
        try requireOverride().lock(within: seconds)
    }

    @discardableResult
    public func withOverrideLock<T>(_ body: () throws(StateError) -> T) throws(StateError) -> T {
        try lockOverride().hold(body)
    }

    // MARK: Intent

    /// Writes `intent` over the one on disk, keeping the other recent moves (`RouteIntent.superseding`),
    /// under the file's lock: `set` and `watch --apply` write it at the same moments.
    public func saveIntent(_ intent: RouteIntent) throws(StateError) {
        try saveAdvisory(intent, in: self.intent) { $0.superseding($1) }
    }

    /// Writes an advisory file (intent, decision, muted): one that cannot be read or is of a newer
    /// routectl is replaced, since keeping it would silence every later record. With `merge`, what is
    /// written depends on what is there: read and written under the file's lock.
    func saveAdvisory<Record: StateRecord>(_ record: Record, in file: StateFile<Record>?,
                                           merging merge: ((Record, Record?) -> Record)? = nil) throws(StateError) {
        guard let file else { return }
        let save = { () throws(StateError) in
            do throws(StateError) {
                try file.save(record, merging: merge)
            } catch {
                // What cannot be removed (a directory in its place) is reported as what could not be written.
                let unwritable = error
                do { try file.remove() } catch _ { throw unwritable }
                try file.save(record, merging: merge)
            }
        }
        // A lock that cannot be taken (a bad lock file) costs the merge's safety, not the record.
        guard merge != nil, let lock = try? file.lock() else { return try save() }
        try lock.hold(save)
    }

    // MARK: Call

    /// `call.json`: the call in progress, if any (rule 8). Unlike the intent it is not advisory: it
    /// holds what `call end` restores, so a corrupt one is an error (exit 5), never overwritten.
    public var call: StateFile<CallRecord>? { runtimeFile("call.json") }

    public func loadCall() throws(StateError) -> CallRecord? {
        try requireCall().load()
    }

    public func saveCall(_ record: CallRecord) throws(StateError) {
        try requireCall().save(record)
    }

    public func removeCall() throws(StateError) {
        try requireCall().remove()
    }

    func requireCall() throws(StateError) -> StateFile<CallRecord> {
        guard let call else {
            throw StateError(path: "$XDG_RUNTIME_DIR", problem: "not set, or not an absolute path; call state lives in the runtime directory")
        }
        return call
    }

    // MARK: Profiles owed

    /// `profiles.json`: the profile each card that left during a call had before it (rule 8). `call
    /// end` cannot put back a card that is gone, and the server gives it the call's profile when it
    /// returns (pipewire-pulse saves every profile set through it). Advisory, like the intent: an
    /// unreadable one owes nothing, and is replaced.
    public var owedProfiles: StateFile<OwedProfiles>? { runtimeFile("profiles.json") }

    public func loadOwedProfiles() -> [CallRecord.CardProfile] {
        ((try? owedProfiles?.load()) ?? nil)?.cards ?? []
    }

    /// Changes the owed profiles under the file's lock, read fresh (`call end` adds while a watcher
    /// pays); none left removes the file.
    public func updateOwedProfiles(_ change: ([CallRecord.CardProfile]) -> [CallRecord.CardProfile]) throws(StateError) {
        guard let file = owedProfiles else { return }
        try file.withLock { () throws(StateError) in
            let cards = change(((try? file.load()) ?? nil)?.cards ?? [])
            guard !cards.isEmpty else { return try file.remove() }
            try saveAdvisory(OwedProfiles(cards: cards), in: file)
        }
    }

    // MARK: The watcher's last decision

    /// `decision.json`: advisory, like the intent (an unreadable one is no decision, and is replaced).
    public var decision: StateFile<DecisionRecord>? { runtimeFile("decision.json") }

    public func loadDecision() -> DecisionRecord? { (try? decision?.load()) ?? nil }

    public func saveDecision(_ record: DecisionRecord) throws(StateError) {
        try saveAdvisory(record, in: decision)
    }

    // MARK: Muted by routectl

    /// The sink `--mute-on-fallback` muted (runtime `muted.json`), if any. Advisory like the intent.
    public func loadMuted() -> String? {
        ((try? runtimeFile("muted.json", of: MutedSink.self)?.load()) ?? nil)?.sink
    }

    public func saveMuted(_ sink: String?) throws(StateError) {
        guard let file = runtimeFile("muted.json", of: MutedSink.self) else { return }
        guard let sink else { return try file.remove() }
        try saveAdvisory(MutedSink(sink: sink), in: file)
    }

    /// The last intent, if any. Advisory: an unreadable one is no intent (it only names a reason).
    public func loadIntent() -> RouteIntent? {
        (try? intent?.load()) ?? nil
    }

    func requireOverride() throws(StateError) -> StateFile<OverrideRecord> {
        guard let override else {
            throw StateError(path: "$XDG_RUNTIME_DIR", problem: "not set, or not an absolute path; the temporary override lives in the runtime directory")
        }
        return override
    }
}

// MARK: - The records' files

extension PersistentState: StateRecord {
    public static let fileKind = "state"

    public init(fields: Fields) throws(FieldError) {
        let word = try fields.optionalString("default") ?? "speaker"
        guard let target = RouteTarget(rawValue: word), target.isBuiltIn else {
            throw FieldError(key: "default", problem: "'\(word)' is not speaker or earpiece")
        }
        let priority = try fields.strings("priority")
        // Only hand edits can break the rule `priority set` keeps.
        if let bad = priority.firstIndex(where: { !Self.isWellFormed(id: $0) }) {
            throw FieldError(key: "priority[\(bad)]", problem: "a malformed id (\(Self.idRule))")
        }
        self.init(defaultTarget: target, preferredInput: try fields.optionalString("preferred_input"), priority: priority)
    }

    public var fields: [(String, JSON)] {
        [("default", .string(defaultTarget.rawValue)), ("preferred_input", preferredInput.map(JSON.string) ?? .null),
         ("priority", .array(priority.map(JSON.string)))]
    }
}

extension OverrideRecord: StateRecord {
    public static let fileKind = "override"

    public init(fields: Fields) throws(FieldError) {
        let word = try fields.string("override")
        guard let target = RouteTarget(rawValue: word) else { throw FieldError(key: "override", problem: "unknown target '\(word)'") }
        self.init(target: target, device: try fields.optionalString("device"), setAt: try fields.optionalInt("set_at") ?? 0,
                  externals: try fields.strings("externals"))
    }

    public var fields: [(String, JSON)] {
        [("override", .string(target.rawValue)), ("device", device.map(JSON.string) ?? .null), ("set_at", .int(setAt)),
         ("externals", .array(externals.map(JSON.string)))]
    }
}

extension RouteIntent: StateRecord {
    public static let fileKind = "intent"

    public init(fields: Fields) throws(FieldError) {
        let word = try fields.string("reason")
        guard let reason = RouteChangeReason(rawValue: word) else { throw FieldError(key: "reason", problem: "unknown reason '\(word)'") }
        guard let at = try fields.optionalInt("at") else { throw FieldError(key: "at", problem: "missing") }
        self.init(output: try fields.string("output"), reason: reason, at: at, done: try fields.optionalBool("done") ?? true)
        // Advisory history: an entry this routectl cannot read is left out, not an error.
        earlier = (fields.json["earlier"]?.arrayValue ?? []).compactMap { item in
            guard item.objectValue != nil, var move = try? RouteIntent(fields: Fields(json: item)) else { return nil }
            move.earlier = []
            return move
        }
    }

    public var fields: [(String, JSON)] {
        Self.move(self) + [("earlier", .array(earlier.map { .object(Self.move($0)) }))]
    }

    static func move(_ intent: RouteIntent) -> [(String, JSON)] {
        [("output", .string(intent.output)), ("reason", .string(intent.reason.rawValue)), ("at", .int(intent.at)),
         ("done", .bool(intent.done))]
    }
}

extension CallRecord: StateRecord {
    public static let fileKind = "call"

    public init(fields: Fields) throws(FieldError) {
        guard let startedAt = try fields.optionalInt("started_at") else { throw FieldError(key: "started_at", problem: "missing") }
        let profiles = try CardProfile.list(fields, "profiles")
        var override: OverrideRecord?
        if let saved = fields.json["override"], !saved.isNull {
            guard saved.objectValue != nil else { throw FieldError(key: "override", problem: "expected an object") }
            do { override = try OverrideRecord(fields: Fields(json: saved)) } catch {
                throw FieldError(key: "override.\(error.key)", problem: error.problem)
            }
        }
        self.init(startedAt: startedAt, speaker: try fields.optionalBool("speaker") ?? false, profiles: profiles,
                  output: try fields.optionalString("output"), defaultSink: try fields.optionalString("default_sink"),
                  defaultSource: try fields.optionalString("default_source"), micMuted: try fields.optionalBool("mic_muted"),
                  callSource: try fields.optionalString("call_source"), callSourceMuted: try fields.optionalBool("call_source_muted"),
                  callMute: try Self.mute(fields), override: override, externals: try fields.strings("externals"),
                  inputs: try fields.optionalStrings("inputs"),
                  applied: try fields.optionalBool("applied") ?? true)
    }

    public var fields: [(String, JSON)] {
        func optional(_ s: String?) -> JSON { s.map(JSON.string) ?? .null }
        return [("started_at", .int(startedAt)), ("speaker", .bool(speaker)),
                ("profiles", CardProfile.json(profiles)),
                ("output", optional(output)), ("default_sink", optional(defaultSink)), ("default_source", optional(defaultSource)),
                ("mic_muted", micMuted.map(JSON.bool) ?? .null), ("call_source", optional(callSource)),
                ("call_source_muted", callSourceMuted.map(JSON.bool) ?? .null),
                ("call_mic_muted", callMute.map { .bool($0.muted) } ?? .null), ("call_mic_muted_at", callMute.map { .int($0.at) } ?? .null),
                ("override", override.map { .object($0.fields) } ?? .null),
                ("externals", .array(externals.map(JSON.string))), ("inputs", inputs.map { .array($0.map(JSON.string)) } ?? .null),
                ("applied", .bool(applied))]
    }
}

extension CallRecord {
    /// `call_mic_muted` with its `call_mic_muted_at`: both or neither.
    static func mute(_ fields: Fields) throws(FieldError) -> Mute? {
        let muted = try fields.optionalBool("call_mic_muted"), at = try fields.optionalInt("call_mic_muted_at")
        guard let muted, let at else {
            if muted != nil { throw FieldError(key: "call_mic_muted_at", problem: "missing") }
            return nil
        }
        return Mute(muted: muted, at: at)
    }
}

extension CallRecord.CardProfile {
    /// A list of `{"card": ..., "profile": ...}` under `key` (none when absent or null).
    static func list(_ fields: Fields, _ key: String) throws(FieldError) -> [Self] {
        guard let list = fields.json[key], !list.isNull else { return [] }
        guard let items = list.arrayValue else { throw FieldError(key: key, problem: "expected an array") }
        var profiles: [Self] = []
        for (i, item) in items.enumerated() {
            guard let card = item["card"]?.stringValue, let profile = item["profile"]?.stringValue else {
                throw FieldError(key: "\(key)[\(i)]", problem: "expected {\"card\": ..., \"profile\": ...}")
            }
            profiles.append(Self(card: card, profile: profile))
        }
        return profiles
    }
}

extension DecisionRecord: StateRecord {
    public static let fileKind = "decision"

    public init(fields: Fields) throws(FieldError) {
        let word = try fields.string("reason")
        guard let reason = RouteChangeReason(rawValue: word) else { throw FieldError(key: "reason", problem: "unknown reason '\(word)'") }
        guard let at = try fields.optionalInt("at") else { throw FieldError(key: "at", problem: "missing") }
        // The devices of this decision's own pick: an older routectl rewriting the file keeps a key it
        // does not know, so `externals_at` says which pick they belong to.
        let externals = try fields.optionalInt("externals_at") == at ? try fields.optionalStrings("externals") : nil
        self.init(reason: reason, cause: try fields.optionalString("cause"), output: try fields.optionalString("output"), at: at,
                  externals: externals)
    }

    public var fields: [(String, JSON)] {
        [("reason", .string(reason.rawValue)), ("cause", cause.map(JSON.string) ?? .null),
         ("output", output.map(JSON.string) ?? .null), ("at", .int(at)),
         ("externals", externals.map { .array($0.map(JSON.string)) } ?? .null), ("externals_at", externals == nil ? .null : .int(at))]
    }
}

/// The profiles owed to cards that left during a call (`profiles.json`), one per card.
public struct OwedProfiles: StateRecord {
    public static let fileKind = "profiles"
    public var cards: [CallRecord.CardProfile]

    init(cards: [CallRecord.CardProfile]) { self.cards = cards }

    public init(fields: Fields) throws(FieldError) {
        cards = try CallRecord.CardProfile.list(fields, "cards")
    }

    public var fields: [(String, JSON)] { [("cards", CallRecord.CardProfile.json(cards))] }
}

/// What `--mute-on-fallback` muted, so that only it is unmuted later.
struct MutedSink: StateRecord {
    static let fileKind = "muted"
    var sink: String

    init(sink: String) { self.sink = sink }

    init(fields: Fields) throws(FieldError) { sink = try fields.string("sink") }

    var fields: [(String, JSON)] { [("sink", .string(sink))] }
}
