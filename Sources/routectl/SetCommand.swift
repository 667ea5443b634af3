import Engine
import Pulse
import Routing

/// `routectl set TARGET [--force] [--device ID]`: the temporary override, applied and read back.
extension RouteCommands {
    // MARK: set

    static func set(_ request: RouteRequest, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let (result, preferences) = try performSet(request, options)
        return try report(result, preferences, options, command: "set")
    }

    /// `set` without its report: what D-Bus's Set and EnableSpeaker share with the command, on
    /// `connection` when one is open (the watcher's).
    static func performSet(_ request: RouteRequest, _ options: GlobalOptions,
                           on open: PulseConnection? = nil) throws(Failure) -> (Result, Preferences) {
        let store = State.store()
        // Concurrent `set`s run one after another and the last one's override stands.
        let (lock, persistent, previous) = try lockedState(store)
        defer { withExtendedLifetime(lock) {} }
        // During a call, the call's profiles and microphone (rule 8).
        let call = try State.call(store)
        let connection: PulseConnection
        if let open { connection = open } else { connection = try ServerAccess.connectToChange(options) }
        // Without a microphone to choose, an output route needs no sources (hundreds of monitors).
        let light = persistent.preferredInput == nil && !request.target.route.isExternal && call == nil
        let before = try onServer { try connection.latestSnapshot(timeout: options.timeout, parts: light ? .outputs : .all) }
        let statusBefore = Status(snapshot: before)
        // The intent is recorded before acting, so a watcher that sees the switch knows it is routectl's
        // own (reason `override`); a failure puts the previous override back.
        var record = OverrideRecord(target: request.target, device: request.device, setAt: State.now(),
                                    externals: statusBefore.externalKeys)
        do { try store.saveOverride(record) } catch { throw State.failure(error) }
        var result: Result
        do {
            result = try route(connection, request, preferredInput: persistent.preferredInput, timeout: options.timeout,
                               from: before, status: statusBefore, lightReadBack: light, inCall: call != nil)
        } catch {
            do {
                if let previous { try store.saveOverride(previous) } else { try store.removeOverride() }
            } catch let stateError {
                throw State.failure(stateError)
            }
            throw error
        }
        if case .switchTo = result.plan.outcome, let muted = store.loadMuted(), request.force || result.status.output?.sink == muted {
            // The user forced a route, or put it on the sink --mute-on-fallback muted: what it muted is
            // unmuted (only that).
            let unmuted = try onServer {
                try RouteApplier.unmuteWhatRoutectlMuted(connection, StatePreferences(store), result.snapshot, timeout: options.timeout)
            }
            result = RouteApplier.Result(snapshot: unmuted, plan: result.plan)
        }
        if result.status.externalKeys != record.externals {
            record.externals = result.status.externalKeys
            do { try store.saveOverride(record) } catch { throw State.failure(error) }
        }
        let preferences = Preferences(defaultTarget: persistent.defaultTarget, override: request.target,
                                      preferredInput: persistent.preferredInput, callTarget: call?.target)
        return (result, preferences)
    }
}
