import Glibc
import Engine
import Routing
import Testing

/// An in-memory sound server: it carries actions out on its snapshot, switches card profiles to
/// prepared snapshots, and plays a script of changes to a watcher.
final class FakeServer: AudioServer {
    struct Failure: ServerFailure {
        var description: String
        var isUnreachable: Bool
        var isDeadline = false
    }

    enum Step {
        /// The server's state changes (a plug, another client) and it notifies. With `defaultSeen`
        /// false this connection misses the change of the default sink (pipewire-pulse, issue 15).
        case change(Snapshot, defaultSeen: Bool = true)
        /// Something outside the server happens (another routectl's intent); no notification.
        case run(() -> Void)
        /// The wait ends with no notification (its timeout).
        case timeout
        /// The connection dies.
        case disconnect
        /// Nothing happens for this long (the watcher's timers run), on `clock`.
        case pass(Double)
    }
    /// The clock `.pass` runs forward.
    var clock: ManualClock?

    /// The default sink this connection shows while it has missed the server's change of it.
    struct Missed {
        var shown: String?
    }

    /// The server's true state; snapshots show it, but for a missed default.
    var current: Snapshot
    var missed: Missed?
    /// Fresh connections asked (`refreshStaleDefaults`), and whether one owes its refetch.
    var refreshes = 0
    /// How many `apply` calls (empty read-backs too) came before each fresh connection.
    var refreshedAfter: [Int] = []
    /// Clients seen connecting (`AudioServer.clientsArrived`).
    var clientsArrived: Int? = 0
    var owed = false
    /// Waits for the server to be quiet (`snapshotWhenQuiet`).
    var quietWaits = 0
    /// What a card profile switch turns the server into, by "card/profile".
    var profiles: [String: Snapshot] = [:]
    /// Applied right after a profile switch, as the server's own reaction (a transient default).
    var afterProfileSwitch: ((inout Snapshot) -> Void)?
    /// The server's own reaction to the next actions carried out, once (WirePlumber choosing a port
    /// of its own just after routectl's).
    var overruleOnce: ((inout Snapshot) -> Void)?
    /// Actions the server refuses.
    var refuse: (Action) -> Bool = { _ in false }
    /// Dies in the middle of the next apply.
    var dieDuringApply = false
    /// Refuses every reconnect until this many have been tried.
    var reconnectFailures = 0
    /// Every reconnection asked for.
    var reconnects = 0
    var script: [Step] = []
    var applied: [[Action]] = []
    /// Told the actions of each apply as it begins.
    var whileApplying: (([Action]) -> Void)?
    /// Actions whose result the engine's `settled` rejected: on a server, a wait for the whole timeout.
    var unsettled: [[Action]] = []
    /// Read-backs with no actions (the waits for a default to show) the server answers too late:
    /// each runs out of its deadline (pipewire-pulse busy with WirePlumber's changes).
    var lateReadBacks = 0
    private(set) var isConnected = true
    private(set) var shouldStop = false

    init(_ snapshot: Snapshot) { current = snapshot }

    func snapshot(timeout: Double, parts: SnapshotParts) throws -> Snapshot {
        guard isConnected else { throw Failure(description: "Connection terminated", isUnreachable: true) }
        var shown = current
        if let missed { shown.server.defaultSinkName = missed.shown }
        return shown
    }

    /// Always the server now: the fake keeps nothing between requests.
    func latestSnapshot(timeout: Double, parts: SnapshotParts) throws -> Snapshot {
        try snapshot(timeout: timeout, parts: parts)
    }

    func subscribe(timeout: Double) throws {}

    func apply(_ actions: [Action], timeout: Double, readBack: ReadBack, settled: (Snapshot) -> Bool) throws -> Snapshot {
        guard isConnected else { throw Failure(description: "Connection terminated", isUnreachable: true) }
        applied.append(actions)
        whileApplying?(actions)
        if actions.isEmpty, lateReadBacks > 0 {
            lateReadBacks -= 1
            throw Failure(description: "Failed to get server information: Timeout", isUnreachable: false, isDeadline: true)
        }
        if dieDuringApply {
            isConnected = false
            throw Failure(description: "Connection terminated", isUnreachable: true)
        }
        for action in actions {
            if refuse(action) { throw Failure(description: "Failed: \(action): Access denied", isUnreachable: false) }
            carryOut(action)
        }
        if !actions.isEmpty, let overrule = overruleOnce {
            overruleOnce = nil
            overrule(&current)
        }
        let result = try snapshot(timeout: timeout)
        // A real server would be waited on until the timeout: nothing more comes to settle it.
        if !actions.isEmpty, !settled(result) { unsettled.append(actions) }
        return result
    }

    func carryOut(_ action: Action) {
        switch action {
        case let .setDefaultSink(name):
            // Naming the default the server already has changes nothing a missed connection would see.
            if missed != nil, current.server.defaultSinkName == name { return }
            current.server.defaultSinkName = name
            missed = nil
        case let .setDefaultSource(name): current.server.defaultSourceName = name
        case let .setSinkPort(sink, port):
            if let i = current.sinks.firstIndex(where: { $0.name == sink }) { current.sinks[i].activePort = port }
        case let .setSourcePort(source, port):
            if let i = current.sources.firstIndex(where: { $0.name == source }) { current.sources[i].activePort = port }
        case let .setSinkMute(sink, mute):
            if let i = current.sinks.firstIndex(where: { $0.name == sink }) { current.sinks[i].mute = mute }
        case let .setSourceMute(source, mute):
            if let i = current.sources.firstIndex(where: { $0.name == source }) { current.sources[i].mute = mute }
        case let .moveSinkInput(index, sink):
            if let i = current.sinkInputs.firstIndex(where: { $0.index == index }),
               let target = current.sinks.first(where: { $0.name == sink }) {
                current.sinkInputs[i].sink = target.index
            }
        case let .setCardProfile(card, profile):
            if let next = profiles["\(card)/\(profile)"] { current = next }
            afterProfileSwitch?(&current)
        }
    }

    func waitForChanges(timeout: Double?) throws -> Bool {
        if owed {
            owed = false
            return true
        }
        while !script.isEmpty {
            switch script.removeFirst() {
            case let .change(snapshot, defaultSeen):
                if !defaultSeen, missed == nil { missed = Missed(shown: current.server.defaultSinkName) }
                current = snapshot
                return true
            case let .run(body):
                body()
            case .timeout:
                return false
            case .disconnect:
                isConnected = false
                throw Failure(description: "Connection terminated", isUnreachable: true)
            case let .pass(seconds):
                clock?.seconds += seconds
                return false
            }
        }
        shouldStop = true
        return false
    }

    /// A change is next in the script, with nothing before it: its notification is already here.
    func hasPendingChanges() -> Bool {
        if owed { return true }
        if case .change = script.first { return true }
        return false
    }

    func refreshStaleDefaults(timeout: Double) throws -> Bool {
        guard isConnected else { throw Failure(description: "Connection terminated", isUnreachable: true) }
        refreshes += 1
        refreshedAfter.append(applied.count)
        owed = true
        defer { missed = nil }
        return missed != nil
    }

    func snapshotAfterChange(timeout: Double) throws -> Snapshot { try snapshot(timeout: timeout) }

    /// How many action batches had been applied at each quiet wait.
    var appliedAtQuietWaits: [Int] = []
    /// The seconds of each pause asked for (the reconnection backoff).
    var pauses: [Double] = []

    func snapshotWhenQuiet(timeout: Double, quiet: Double, limit: Double) throws -> Snapshot {
        quietWaits += 1
        appliedAtQuietWaits.append(applied.count)
        return try snapshot(timeout: timeout)
    }

    func reconnect(timeout: Double) throws {
        reconnects += 1
        if reconnectFailures > 0 {
            reconnectFailures -= 1
            throw Failure(description: "Connection refused", isUnreachable: true)
        }
        isConnected = true
    }

    /// Runs at each pause (a state file repaired meanwhile).
    var onPause: (() -> Void)?

    func pause(seconds: Double) -> Bool {
        pauses.append(seconds)
        onPause?()
        return !shouldStop
    }
}

/// routectl's state in memory, recording the intents it is told.
final class FakeStore: PreferenceStore {
    var preferencesValue = Preferences()
    var record: OverrideRecord?
    var intents: [RouteIntent] = []
    /// Every `call.json` written, in order.
    var callSaves: [CallRecord] = []
    var policyRunning = false
    var mutedByRoutectl: String?
    var corrupt = false

    struct Corrupt: Error {}

    func preferences() throws -> Preferences {
        if corrupt { throw Corrupt() }
        var p = preferencesValue
        p.override = record?.target
        p.callTarget = call?.target
        return p
    }

    func overrideRecord() throws -> OverrideRecord? { record }

    func clearOverride() -> Bool {
        defer { record = nil }
        return record != nil
    }

    var call: CallRecord?
    var decisions: [DecisionRecord] = []

    func saveDecision(_ record: DecisionRecord) { decisions.append(record) }

    func loadDecision() -> DecisionRecord? { decisions.last }

    /// How many hold the route lock now, and whether each `call.json` read was made under it.
    private(set) var routeLockHolders = 0
    private(set) var callReadsLocked: [Bool] = []

    final class RouteLock {
        let store: FakeStore
        init(_ store: FakeStore) {
            self.store = store
            store.routeLockHolders += 1
        }
        deinit { store.routeLockHolders -= 1 }
    }

    func lockRoute() throws -> AnyObject { RouteLock(self) }

    /// Another process holding the route lock: `lockRoute(within:)` gives up.
    var routeLockHeldElsewhere = false
    /// What another process holding the route lock does before it lets go (a `set` that records its
    /// override), once, at the next `lockRoute(within:)`.
    var beforeRouteLockFree: (() -> Void)?
    /// How long each `lockRoute(within:)` was willing to wait.
    private(set) var routeLockWaits: [Double] = []
    func lockRoute(within seconds: Double) throws -> AnyObject? {
        routeLockWaits.append(seconds)
        if let other = beforeRouteLockFree {
            beforeRouteLockFree = nil
            other()
        }
        return routeLockHeldElsewhere ? nil : RouteLock(self)
    }

    func callRecord() throws -> CallRecord? {
        callReadsLocked.append(routeLockHolders > 0)
        if corrupt { throw Corrupt() }
        return call
    }

    func saveCall(_ record: CallRecord) throws {
        call = record
        callSaves.append(record)
    }

    func removeCall() throws { call = nil }

    func replaceOverride(_ record: OverrideRecord?) throws { self.record = record }

    var owed: [CallRecord.CardProfile] = []

    func owedProfiles() -> [CallRecord.CardProfile] { owed }

    func updateOwedProfiles(_ change: ([CallRecord.CardProfile]) -> [CallRecord.CardProfile]) { owed = change(owed) }

    func saveIntent(_ intent: RouteIntent) { intents.append(intent) }

    /// The last intent, written over the ones before it as the state store writes it.
    func loadIntent() -> RouteIntent? { intents.reduce(nil) { $1.superseding($0) } }
}

/// A clock that only moves when told.
final class ManualClock: @unchecked Sendable {
    var seconds = 1000.0
    var clocks: Clocks {
        Clocks(monotonic: { [self] in seconds }, wallMilliseconds: { [self] in Int64(seconds * 1000) })
    }
}

/// Loads one of the Routing fixtures (the simulator's corpus and the hand-made ones).
func fixture(_ name: String) throws -> Snapshot {
    let dir = #filePath.split(separator: "/").dropLast(2).joined(separator: "/")
    var bytes: [UInt8] = []
    let path = "/\(dir)/RoutingTests/Fixtures/\(name).json"
    guard let file = fopen(path, "r") else { throw FakeStore.Corrupt() }
    defer { fclose(file) }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buffer, 1, buffer.count, file)
        if n <= 0 { break }
        bytes += buffer[0..<n]
    }
    return try Snapshot(json: String(decoding: bytes, as: UTF8.self))
}
