import Engine
import Pulse
import Routing
import Store

/// `routectl clear`: drop the override and let the rules decide; the report `set` and `clear` share.
extension RouteCommands {
    // MARK: clear

    static func clear(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let (result, preferences) = try performClear(options)
        return try report(result, preferences, options, command: "clear")
    }

    /// `clear` without its report (D-Bus's Clear), on `connection` when one is open.
    static func performClear(_ options: GlobalOptions, on open: PulseConnection? = nil) throws(Failure) -> (Result, Preferences) {
        let store = State.store()
        let lock: FileLock
        let persistent: PersistentState
        do {
            lock = try store.lockOverride()
            persistent = try store.loadPersistent()
            // An override file that cannot be read is what `clear` removes: say so, do not refuse.
            if case .failure(let error) = Swift.Result(catching: { () throws(StateError) in try store.loadOverride() }) {
                try store.removeOverride()
                if !options.quiet { Console.err("routectl: note: removed an unreadable override (\(error))\n") }
            }
        } catch {
            throw State.failure(error)
        }
        defer { withExtendedLifetime(lock) {} }
        let connection: PulseConnection
        if let open { connection = open } else { connection = try ServerAccess.connectToChange(options) }
        // Without the override the rules decide: an external device in use keeps the sound (rule 2);
        // else the most recently connected one (headphones a forced speaker was playing over), else the default.
        let before = try onServer { try connection.latestSnapshot(timeout: options.timeout) }
        // During a call the call's target stands in for the default (rule 8).
        let call = try State.call(store)
        let preferences = Preferences(defaultTarget: persistent.defaultTarget, preferredInput: persistent.preferredInput,
                                      callTarget: call?.target, priority: persistent.priority)
        let status = Status(snapshot: before)
        let request = Policy.ruling(status, preferences)
        let result = try route(connection, request, preferredInput: persistent.preferredInput, timeout: options.timeout,
                               from: before, status: status, inCall: call != nil)
        do { try store.removeOverride() } catch { throw State.failure(error) }
        return (result, preferences)
    }

    /// Prints the route read back and the notes the rules call for; picks the exit status.
    static func report(_ result: Result, _ preferences: Preferences, _ options: GlobalOptions, command: String) throws(Failure) -> ExitStatus {
        let status = result.status
        let target = preferences.effectiveTarget
        var applied = true
        var reason: String?
        var note: String?
        var exit = ExitStatus.ok
        switch result.plan.outcome {
        case let .externalKeepsPriority(output):
            applied = false
            reason = "external-device-active"
            // `clear` takes no --force: name the command that switches now.
            let force = command == "set" ? "--force" : "'routectl set \(target.rawValue) --force'"
            note = "\(output.route.rawValue) output '\(output.id)' keeps priority; the \(target.rawValue) target applies when it is disconnected (\(force) switches now)"
        case let .fellBack(from):
            reason = "no-\(from.route.rawValue)-output"
            exit = .fellBack
            // `set` records the override; `clear` only falls back to the default it finds.
            let recorded = command == "set" ? " (the preference is recorded)" : ""
            // In a call, a Bluetooth output counts only with a headset profile (rule 8).
            let none = preferences.inCall && from == .bluetooth ? "no bluetooth output with a headset profile (HFP/HSP or LE Audio duplex) here"
                : "no \(from.route.rawValue) output here"
            if result.plan.callStays, let output = result.plan.output {
                let on = output.route.isExternal ? "\(output.route.rawValue) output '\(output.id)'" : "the \(output.route.rawValue)"
                note = "\(none); the call stays on \(on)\(recorded)"
            } else if status.route == .speaker {
                note = "\(none); fell back to the speaker\(recorded)"
            } else if status.route.isExternal, let output = status.output {
                note = "\(none); \(output.route.rawValue) output '\(output.id)' keeps the sound\(recorded)"
            } else {
                note = "\(none) and no speaker to fall back to\(recorded)"
            }
        case .switchTo:
            // Honest reporting: the read-back, not the acknowledgement, says whether it worked.
            do { try RouteApplier.verify(result) } catch { throw Failure.from(error) }
        }
        if let note, !options.quiet { Console.err("routectl: note: \(note)\n") }
        if options.json {
            let object = JSON.object([
                ("route", .string(status.route.rawValue)),
                ("target", .string(target.rawValue)),
                ("override", preferences.override.map { .string($0.rawValue) } ?? .null),
                ("default", .string(preferences.defaultTarget.rawValue)),
                ("applied", .bool(applied)),
                ("fell_back", .bool(exit == .fellBack)),
                ("reason", reason.map(JSON.string) ?? .null),
                ("output", status.output.map(DevicesCommand.object) ?? .null),
            ])
            Console.out(object.text + "\n")
        } else {
            Console.out(Console.table([
                ["route", status.route.rawValue],
                ["target", target.rawValue],
                ["override", preferences.override?.rawValue ?? "none"],
                ["default", preferences.defaultTarget.rawValue],
                ["output", status.output.map { $0.id } ?? "none"],
            ]))
        }
        return exit
    }
}
