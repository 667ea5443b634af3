import Engine
import Pulse
import Glibc
import Routing
import Store

/// The Engine's view of routectl's state files.
final class StatePreferences: PreferenceStore {
    let store: StateStore

    init(_ store: StateStore) { self.store = store }

    func preferences() throws -> Preferences {
        let persistent = try store.loadPersistent()
        let record = store.overrideFile == nil ? nil : try store.loadOverride()
        return Preferences(defaultTarget: persistent.defaultTarget, override: record?.target, preferredInput: persistent.preferredInput,
                           callTarget: try callRecord()?.target, priority: persistent.priority)
    }

    /// The route lock as this process holds it, shared by nested holders (`clearOverride` under a
    /// policy move): flock is per open file, and a second open of the lock file in one process
    /// would wait on the first for ever.
    private var heldRouteLock: FileLock?
    private var routeLockDepth = 0

    private final class RouteLockToken {
        let release: () -> Void
        init(_ release: @escaping () -> Void) { self.release = release }
        deinit { release() }
    }

    private func holdRouteLock(_ take: () throws(StateError) -> FileLock?) throws(StateError) -> AnyObject? {
        if routeLockDepth == 0 {
            guard let lock = try take() else { return nil }
            heldRouteLock = lock
        }
        routeLockDepth += 1
        return RouteLockToken { [self] in
            routeLockDepth -= 1
            if routeLockDepth == 0 { heldRouteLock = nil }
        }
    }

    func lockRoute() throws -> AnyObject {
        guard let token = try holdRouteLock({ () throws(StateError) in try store.lockOverride() }) else {
            throw StateError(path: "override.json.lock", problem: "cannot lock")
        }
        return token
    }

    func lockRoute(within seconds: Double) throws -> AnyObject? {
        try holdRouteLock { () throws(StateError) in try store.lockOverride(within: seconds) }
    }

    func saveDecision(_ record: DecisionRecord) { try? store.saveDecision(record) }

    func loadDecision() -> DecisionRecord? { store.loadDecision() }

    func callRecord() throws -> CallRecord? { store.call == nil ? nil : try store.loadCall() }

    func saveCall(_ record: CallRecord) throws { try store.saveCall(record) }

    func removeCall() throws { try store.removeCall() }

    func owedProfiles() -> [CallRecord.CardProfile] { store.loadOwedProfiles() }

    /// Advisory, but said when it fails: what is not recorded, `watch --apply` cannot put back.
    func updateOwedProfiles(_ change: ([CallRecord.CardProfile]) -> [CallRecord.CardProfile]) {
        do {
            try store.updateOwedProfiles(change)
        } catch {
            Console.err("routectl: cannot record the profiles owed to cards that left during a call (\(error)); "
                        + "a headset that left may come back in its call profile\n")
        }
    }

    func replaceOverride(_ record: OverrideRecord?) throws {
        if let record { try store.saveOverride(record) } else { try store.removeOverride() }
    }

    func overrideRecord() throws -> OverrideRecord? {
        store.overrideFile == nil ? nil : try store.loadOverride()
    }

    func clearOverride() -> Bool {
        let remove = { [store] () throws(StateError) -> Bool in
            guard try store.loadOverride() != nil else { return false }
            try store.removeOverride()
            return true
        }
        // Under the route lock this process holds already, or under its own take of it, waited for
        // a moment at most: a holder that keeps it (a command stopped with Ctrl-Z) does not stop the
        // watcher, which clears without it, as it acts without it then (`Watch.lockForMove`).
        if routeLockDepth > 0 { return (try? remove()) ?? false }
        let lock = try? store.lockOverride(within: 1)
        return withExtendedLifetime(lock) { (try? remove()) ?? false }
    }

    func saveIntent(_ intent: RouteIntent) { try? store.saveIntent(intent) }

    func loadIntent() -> RouteIntent? { store.loadIntent() }

    var policyRunning: Bool { ApplyLock.isHeld(store) }

    /// Kept in the runtime dir (`muted.json`): gone at logout, like the mute it remembers.
    var mutedByRoutectl: String? {
        get { store.loadMuted() }
        set { try? store.saveMuted(newValue) }
    }
}

@available(*, unavailable)
extension StatePreferences: Sendable {}

extension Clocks {
    /// CLOCK_MONOTONIC and CLOCK_REALTIME.
    static let system = Clocks(monotonic: { Clock.monotonicSeconds() }, wallMilliseconds: { Clock.realtimeMilliseconds() })
}

extension Failure {
    /// The front end's words and exit status for an Engine failure.
    static func from(_ error: EngineError) -> Failure {
        switch error {
        case let .server(cause as PulseError): return ServerAccess.failure(cause)
        case let .state(cause as StateError): return State.failure(cause)
        case let .state(cause): return Failure(status: .stateFile, message: "\(cause)")
        default: return Failure(status: .failed, message: error.description)
        }
    }
}
