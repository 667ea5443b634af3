import Engine
import Glibc
import Pulse
import Routing
import Store

/// `routectl call start [--speaker] | end | status`: call mode (DESIGN.md rule 8), carried out by
/// Engine.CallMode under the lock `set` and `clear` take, so two `call start` run one after the other.
enum CallCommand {
    static func run(_ verb: CallVerb, speaker: Bool, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        switch verb {
        case .start: return try start(speaker: speaker, options)
        case .end: return try end(options)
        case .status: return try status(options)
        }
    }

    static func start(speaker: Bool, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let preferences = StatePreferences(store)
        let lock = try locked(preferences)
        defer { withExtendedLifetime(lock) {} }
        // The override a new call sets aside must be readable (a corrupt one is never removed).
        try checkOverride(preferences)
        let connection = try ServerAccess.connectToChange(options)
        let started: CallMode.Started
        do {
            started = try CallMode(server: connection, store: preferences, clocks: .system).start(speaker: speaker, timeout: options.timeout)
        } catch {
            throw Failure.from(error)
        }
        let status = started.result.status
        if !options.quiet {
            if !started.isNew { Console.err("routectl: note: a call was already in progress; its route is applied again\n") }
            if case let .fellBack(from) = started.result.plan.outcome, from == .earpiece {
                Console.err("routectl: note: no receiver here; the call is on the \(status.route.rawValue)\n")
            }
        }
        return RouteCtl.write(render(active: true, record: started.record, status, options))
    }

    static func end(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let preferences = StatePreferences(store)
        let lock = try locked(preferences)
        defer { withExtendedLifetime(lock) {} }
        // No call: nothing to restore, and no server needed to say so.
        guard try State.call(store) != nil else {
            if !options.quiet, !options.json { Console.err("routectl: note: no call in progress\n") }
            return RouteCtl.write(options.json ? JSON.object([("call", .bool(false)), ("ended", .bool(false))]).text + "\n"
                                               : Console.table([["call", "no"]]))
        }
        // call end removes an override set during the call: a corrupt one is an error, never removed.
        try checkOverride(preferences)
        let connection = try ServerAccess.connectToChange(options)
        let result: RouteApplier.Result?
        do {
            result = try CallMode(server: connection, store: preferences, clocks: .system).end(timeout: options.timeout)
        } catch {
            throw Failure.from(error)
        }
        guard let status = result?.status else { return .ok }
        if options.json {
            return RouteCtl.write(JSON.object([
                ("call", .bool(false)), ("ended", .bool(true)), ("route", .string(status.route.rawValue)),
                ("mic_muted", status.micMuted.map(JSON.bool) ?? .null), ("output", status.output.map(DevicesCommand.object) ?? .null),
            ]).text + "\n")
        }
        return RouteCtl.write(Console.table([
            ["call", "ended"], ["route", status.route.rawValue], ["output", status.output?.id ?? "none"],
            ["mic_muted", QueryCommand.text(status.micMuted.map(JSON.bool) ?? .null)],
        ]))
    }

    /// The truth, read back: whether `call.json` says a call is on, and the route the server has now.
    static func status(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let snapshot = try ServerAccess.snapshot(options)
        let status = Status(snapshot: snapshot)
        if options.snapshot != nil {
            let preferences = snapshot.routectl ?? Preferences()
            let record = preferences.callTarget.map { CallRecord(startedAt: snapshot.callStartedAt ?? 0, speaker: $0 == .speaker) }
            return RouteCtl.write(render(active: record != nil, record: record, status, options, since: snapshot.callStartedAt != nil))
        }
        let record = try State.call(State.store())
        return RouteCtl.write(render(active: record != nil, record: record, status, options))
    }

    static func render(active: Bool, record: CallRecord?, _ status: Status, _ options: GlobalOptions, since: Bool = true) -> String {
        let target: JSON = record.map { .string($0.target.rawValue) } ?? .null
        let started: JSON = since ? record.map { .string(EventRenderer.iso8601(timespecOf(milliseconds: $0.startedAt))) } ?? .null : .null
        if options.json {
            return JSON.object([
                ("call", .bool(active)), ("target", target), ("since", started), ("route", .string(status.route.rawValue)),
                ("mic_muted", status.micMuted.map(JSON.bool) ?? .null), ("output", status.output.map(DevicesCommand.object) ?? .null),
            ]).text + "\n"
        }
        var rows = [["call", active ? "yes" : "no"]]
        if active {
            rows.append(["target", target.stringValue ?? "none"])
            if let since = started.stringValue { rows.append(["since", since]) }
        }
        rows += [["route", status.route.rawValue], ["output", status.output?.id ?? "none"],
                 ["mic_muted", QueryCommand.text(status.micMuted.map(JSON.bool) ?? .null)]]
        return Console.table(rows)
    }

    /// Floored: a time before 1970 (a hand-edited file) is still a valid one, its milliseconds 0–999.
    static func timespecOf(milliseconds: Int64) -> timespec {
        let (seconds, rest) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        return rest < 0 ? timespec(tv_sec: Int(seconds - 1), tv_nsec: Int(rest + 1000) * 1_000_000)
                        : timespec(tv_sec: Int(seconds), tv_nsec: Int(rest) * 1_000_000)
    }

    /// `override.json` readable (exit 5 otherwise), before a call changes anything.
    static func checkOverride(_ preferences: StatePreferences) throws(Failure) {
        do { _ = try preferences.overrideRecord() } catch let error as StateError { throw State.failure(error) } catch {
            throw Failure(status: .stateFile, message: "\(error)")
        }
    }

    /// The route lock `set` and `clear` take, with `call.json` and `state.json` checked readable first.
    static func locked(_ preferences: StatePreferences) throws(Failure) -> AnyObject {
        do {
            let lock = try preferences.lockRoute()
            _ = try preferences.callRecord()
            _ = try preferences.store.loadPersistent()
            return lock
        } catch let error as StateError {
            throw State.failure(error)
        } catch {
            throw Failure(status: .stateFile, message: "\(error)")
        }
    }
}
