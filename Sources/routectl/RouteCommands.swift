import Engine
import Pulse
import Routing
import Store

/// What `set`, `clear`, `default`, `input` and `watch` share: server errors as failures, the locked
/// state, and the route applied through the Engine. Each command lives in its own file.
enum RouteCommands {
    /// How long a change may take to show on the server before routectl reports what it sees instead.
    static let settleSeconds = RouteApplier.settleSeconds

    /// Runs server work that may fail as libpulse (PulseError) or as routectl (Failure), as a Failure.
    static func onServer<T>(_ body: () throws -> T) throws(Failure) -> T {
        do {
            return try body()
        } catch let error as PulseError {
            throw ServerAccess.failure(error)
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(status: .failed, message: "\(error)")
        }
    }

    /// Takes the override's lock (held by the caller to its end, so concurrent commands run one after
    /// another) and reads both layers, failing on a corrupt file before anything is changed.
    static func lockedState(_ store: StateStore) throws(Failure) -> (FileLock, PersistentState, OverrideRecord?) {
        do {
            let lock = try store.lockOverride()
            let persistent = try store.loadPersistent()
            let record = try store.loadOverride()
            return (lock, persistent, record)
        } catch {
            throw State.failure(error)
        }
    }

    typealias Result = RouteApplier.Result

    /// Plans `request` on the server and carries it out (Engine.RouteApplier), as a Failure when it fails.
    static func route(_ connection: PulseConnection, _ request: RouteRequest, preferredInput: String?,
                      timeout: Double, from initial: Snapshot? = nil, status: Status? = nil, reason: RouteChangeReason = .override,
                      lightReadBack: Bool = false, inCall: Bool = false) throws(Failure) -> Result {
        let applier = RouteApplier(server: connection, store: StatePreferences(State.store()), clocks: .system)
        do {
            return try applier.route(request, preferredInput: preferredInput, timeout: timeout, from: initial, status: status,
                                     reason: reason, lightReadBack: lightReadBack, inCall: inCall)
        } catch {
            throw Failure.from(error)
        }
    }
}
