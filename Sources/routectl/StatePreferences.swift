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

    func lockRoute() throws -> AnyObject { try store.lockOverride() }

    func saveDecision(_ record: DecisionRecord) { try? store.saveDecision(record) }

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
        let removed = try? store.withOverrideLock { () throws(StateError) -> Bool in
            guard try store.loadOverride() != nil else { return false }
            try store.removeOverride()
            return true
        }
        return removed ?? false
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
