import Routing

/// What the Engine needs of routectl's state (DESIGN.md §4), so unit tests can hand it an in-memory
/// one. The state files behind the real one live in the Store.
public protocol PreferenceStore: AnyObject {
    /// The persistent default, the override and the preferred input, read fresh.
    func preferences() throws -> Preferences
    /// The stored override record, if any.
    func overrideRecord() throws -> OverrideRecord?
    /// Removes the override under its lock; false when there was none (or it could not be removed).
    func clearOverride() -> Bool
    /// Records what routectl is about to do to the route (advisory: failures are ignored).
    func saveIntent(_ intent: RouteIntent)
    func loadIntent() -> RouteIntent?
    /// Whether a `watch --apply` in another process keeps the rules now.
    var policyRunning: Bool { get }
    /// The sink `--mute-on-fallback` muted, so that only it is unmuted later (nil: none).
    var mutedByRoutectl: String? { get set }
    /// Holds the lock that serialises the commands changing the route (`set`, `clear`, `call`) until
    /// the returned token is released. One process may take it again while it holds it.
    func lockRoute() throws -> AnyObject
    /// The same lock, waited for at most `seconds`: nil when another process kept it that long.
    func lockRoute(within seconds: Double) throws -> AnyObject?
    /// The call in progress (`call.json`), if any.
    func callRecord() throws -> CallRecord?
    func saveCall(_ record: CallRecord) throws
    func removeCall() throws
    /// The profiles owed to cards that left during a call (rule 8: HFP for the call only), one per
    /// card: the profile each had before the call, put back when it returns. Advisory.
    func owedProfiles() -> [CallRecord.CardProfile]
    /// Changes them under their lock, read fresh (advisory: a failure is said, never thrown).
    func updateOwedProfiles(_ change: ([CallRecord.CardProfile]) -> [CallRecord.CardProfile])
    /// Replaces the stored override (nil removes it): a call sets it aside and puts it back.
    func replaceOverride(_ record: OverrideRecord?) throws
    /// Records what `watch --apply` last did, for `why` (advisory: failures are ignored).
    func saveDecision(_ record: DecisionRecord)
    /// What `watch --apply` last did (nil when none, or unreadable: advisory).
    func loadDecision() -> DecisionRecord?
}

/// The clocks the Engine reads, injectable so tests can run time forward.
public struct Clocks: Sendable {
    /// Seconds on a monotonic clock.
    public var monotonic: @Sendable () -> Double
    /// Milliseconds of real (wall) time, for what other processes read (intents).
    public var wallMilliseconds: @Sendable () -> Int64

    public init(monotonic: @escaping @Sendable () -> Double, wallMilliseconds: @escaping @Sendable () -> Int64) {
        self.monotonic = monotonic
        self.wallMilliseconds = wallMilliseconds
    }
}

/// Why orchestration failed, for the front end to word and give an exit status.
public enum EngineError: Error, CustomStringConvertible {
    /// The server refused, failed or went away (`ServerFailure.isUnreachable` says which).
    case server(any Error)
    /// The request cannot be planned here (an unknown device, a jack-hidden output).
    case planning(PlanningError)
    /// The server acknowledged but the read-back shows another output.
    case notSwitched(wanted: String, route: Route, actual: String?)
    /// A card profile switch did not bring the wanted output up.
    case profileSwitch(Route)
    /// routectl's own state could not be read or written.
    case state(any Error)

    public var description: String {
        switch self {
        case let .server(error): return "\(error)"
        case let .planning(error): return "\(error)"
        case let .notSwitched(wanted, route, actual):
            return "The server did not switch to '\(wanted)'; the route is \(route.rawValue) ('\(actual ?? "none")')"
        case let .profileSwitch(route): return "The card profile switch did not bring up the \(route.rawValue) output"
        case let .state(error): return "\(error)"
        }
    }

    /// True when the server could not be reached at all.
    public var isUnreachable: Bool {
        if case let .server(error) = self { return (error as? any ServerFailure)?.isUnreachable ?? false }
        return false
    }
}

/// A remote control served beside `watch` (D-Bus, for status bars and phone shells): the watch lets
/// it carry out what its clients asked whenever the loop wakes, and tells it what the server shows.
public protocol RemoteControl: AnyObject {
    /// Carries out the requests received since the last call, answering each; errors are the clients'.
    /// A state file's lock is waited for at most `lockWait` seconds. True when one was held that long,
    /// false when every lock the requests needed was taken, nil when they needed none.
    func serve(lockWait: Double) -> Bool?
    /// The state read back from the server after a change, with the preferences then.
    func update(_ status: Status, _ preferences: Preferences)
    /// A route event the watch printed.
    func routeChanged(route: Route, previous: Route, reason: RouteChangeReason)
}
