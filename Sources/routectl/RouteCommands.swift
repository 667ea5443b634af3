import Pulse
import Routing
import Store

/// `set`, `clear`, `default` and `input`: the commands that change routing.
enum RouteCommands {
    /// How long a change may take to show on the server before routectl reports what it sees instead.
    static let settleSeconds = 3.0

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

    struct Result {
        var snapshot: Snapshot
        var plan: Plan
        var status: Status { Status(snapshot: snapshot) }
    }

    /// Plans `request` on the server and carries it out, switching a card profile first when the
    /// target exists only under another one; returns the route read back.
    static func route(_ connection: PulseConnection, _ request: RouteRequest, preferredInput: String?,
                      timeout: Double, from initial: Snapshot? = nil, reason: RouteChangeReason = .override) throws(Failure) -> Result {
        try onServer {
            var snapshot = try initial ?? connection.snapshot(timeout: timeout)
            // Watchers hold their route events while the intent is in progress: say when it is over.
            var announced: RouteIntent?
            defer {
                if var intent = announced {
                    intent.done = true
                    try? State.store().saveIntent(intent)
                }
            }
            // Every step is judged against the route before the command (rule 7), and only the
            // streams of the default sink before it follow (rule 5).
            let context = PlanContext(preferredInput: preferredInput, before: Status(snapshot: snapshot).output,
                                      previousDefaultSink: snapshot.server.defaultSinkName)
            for _ in 0..<3 {
                let plan: Plan
                do {
                    plan = try Planner.plan(snapshot, request, context)
                } catch {
                    throw Failure(status: .failed, message: "\(error)")
                }
                guard !plan.actions.isEmpty else { return Result(snapshot: snapshot, plan: plan) }
                if let output = plan.output, announced?.output != output.id {
                    // Advisory: a watcher that cannot read it calls the switch another client's.
                    announced = RouteIntent(output: output.id, reason: reason, at: State.nowMilliseconds())
                    try? State.store().saveIntent(announced!)
                }
                snapshot = try connection.apply(plan.actions, timeout: max(timeout, settleSeconds)) { s in
                    settled(s, plan)
                }
                if !plan.needsReplan { return Result(snapshot: snapshot, plan: plan) }
                if snapshot.server.isPipeWire {
                    // WirePlumber restores the card's routes for the new profile just after the switch:
                    // choose the port once that burst is over, or WirePlumber undoes it.
                    snapshot = try connection.snapshotWhenQuiet(timeout: timeout, quiet: 0.05, limit: 1)
                }
            }
            throw Failure(status: .failed, message: "The card profile switch did not bring up the \(request.target.route.rawValue) output")
        }
    }

    /// The server shows the plan carried out: after a profile switch, the wanted port on a sink of
    /// that card; otherwise the default sink with the wanted port.
    static func settled(_ snapshot: Snapshot, _ plan: Plan) -> Bool {
        guard let output = plan.output else { return true }
        if plan.needsReplan {
            return snapshot.sinks.contains { sink in
                snapshot.card(of: sink)?.name == output.cardName && sink.ports.contains { $0.name == output.port }
            }
        }
        guard let sink = snapshot.defaultSink, sink.name == output.sink else { return false }
        return output.port == nil || sink.activePort == output.port
    }

    // MARK: set

    static func set(_ request: RouteRequest, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        // Concurrent `set`s run one after another and the last one's override stands.
        let (lock, persistent, previous) = try lockedState(store)
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connect(options)
        let before = try onServer { try connection.snapshot(timeout: options.timeout) }
        // The intent is recorded before acting, so a watcher that sees the switch knows it is routectl's
        // own (reason `override`); a failure puts the previous override back.
        var record = OverrideRecord(target: request.target, device: request.device, setAt: State.now(),
                                    externals: Status(snapshot: before).externalKeys)
        do { try store.saveOverride(record) } catch { throw State.failure(error) }
        let result: Result
        do {
            result = try route(connection, request, preferredInput: persistent.preferredInput, timeout: options.timeout, from: before)
        } catch {
            do {
                if let previous { try store.saveOverride(previous) } else { try store.removeOverride() }
            } catch let stateError {
                throw State.failure(stateError)
            }
            throw error
        }
        if result.status.externalKeys != record.externals {
            record.externals = result.status.externalKeys
            do { try store.saveOverride(record) } catch { throw State.failure(error) }
        }
        let preferences = Preferences(defaultTarget: persistent.defaultTarget, override: request.target,
                                      preferredInput: persistent.preferredInput)
        return try report(result, preferences, options, command: "set")
    }

    // MARK: clear

    static func clear(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let (lock, persistent, _) = try lockedState(store)
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connect(options)
        // Without the override the rules decide: an external device in use keeps the sound (rule 2);
        // else the most recently connected one (headphones a forced speaker was playing over), else the default.
        let before = try onServer { try connection.snapshot(timeout: options.timeout) }
        let status = Status(snapshot: before)
        var request = RouteRequest(target: persistent.defaultTarget)
        if status.output.map({ !$0.route.isExternal || !$0.isAvailable }) ?? true {
            let choice = Policy.choice(status, PolicyState(status: status), defaultTarget: persistent.defaultTarget)
            request = RouteRequest(target: choice.target, device: choice.device)
        }
        let result = try route(connection, request,
                               preferredInput: persistent.preferredInput, timeout: options.timeout, from: before)
        do { try store.removeOverride() } catch { throw State.failure(error) }
        let preferences = Preferences(defaultTarget: persistent.defaultTarget, preferredInput: persistent.preferredInput)
        return try report(result, preferences, options, command: "clear")
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
            note = "\(output.route.rawValue) output '\(output.id)' keeps priority; the \(target.rawValue) target applies when it is disconnected (--force switches now)"
        case let .fellBack(from):
            reason = "no-\(from.route.rawValue)-output"
            exit = .fellBack
            if status.route == .speaker {
                note = "no \(from.route.rawValue) output here; fell back to the speaker (the preference is recorded)"
            } else if status.route.isExternal, let output = status.output {
                note = "no \(from.route.rawValue) output here; \(output.route.rawValue) output '\(output.id)' keeps the sound (the preference is recorded)"
            } else {
                note = "no \(from.route.rawValue) output here and no speaker to fall back to (the preference is recorded)"
            }
        case .switchTo:
            // Honest reporting: the read-back, not the acknowledgement, says whether it worked.
            if let wanted = result.plan.output,
               status.output?.sink != wanted.sink || (wanted.port != nil && status.output?.port != wanted.port) {
                throw Failure(status: .failed, message: "The server did not switch to '\(wanted.id)'; the route is \(status.route.rawValue) ('\(status.output?.id ?? "none")')")
            }
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
                ["output", status.output.map { $0.id } ?? "none"],
            ]))
        }
        return exit
    }

    // MARK: default

    static func setDefault(_ target: RouteTarget?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let shown: RouteTarget
        do {
            if let target {
                shown = try store.updatePersistent { $0.defaultTarget = target }.defaultTarget
            } else {
                shown = try store.loadPersistent().defaultTarget
            }
        } catch {
            throw State.failure(error)
        }
        return RouteCtl.write(options.json ? JSON.object([("default", .string(shown.rawValue))]).text + "\n" : shown.rawValue + "\n")
    }

    // MARK: input

    static func inputList(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let snapshot = try ServerAccess.snapshot(options)
        let preferences = try State.preferences(State.store(), current: nil, quiet: options.quiet)
        let status = Status(snapshot: snapshot)
        if options.json {
            return RouteCtl.write(JSON.object([
                ("preferred", preferences.preferredInput.map(JSON.string) ?? .null),
                ("inputs", .array(status.inputs.map(DevicesCommand.object))),
            ]).text + "\n")
        }
        let rows = status.inputs.map { i in
            [(i.isDefault ? "*" : " ") + (i.id == preferences.preferredInput || i.source == preferences.preferredInput ? "P" : " "),
             i.kind.rawValue, i.availability.isUsable ? "yes" : "no", i.id, i.description]
        }
        var out = rows.isEmpty ? "no inputs\n" : Console.table([["", "KIND", "AVAILABLE", "ID", "DESCRIPTION"]] + rows)
        if let preferred = preferences.preferredInput, !status.inputs.contains(where: { $0.id == preferred || $0.source == preferred }) {
            out += "preferred input '\(preferred)' is not connected; it is used again when it returns\n"
        }
        return RouteCtl.write(out)
    }

    static func inputSet(_ id: String, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let lock: FileLock
        var persistent: PersistentState
        do {
            lock = try store.lockPersistent()
            persistent = try store.loadPersistent()
        } catch {
            throw State.failure(error)
        }
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connect(options)
        let (snapshot, input): (Snapshot, Input) = try onServer {
            let before = try connection.snapshot(timeout: options.timeout)
            let status = Status(snapshot: before)
            guard let input = status.inputs.first(where: { $0.id == id }) ?? status.inputs.first(where: { $0.source == id }) else {
                let names = status.inputs.map(\.id)
                throw Failure(status: .failed, message: "No input named '\(id)'.\(ArgumentParser.suggestion(id, names)) See 'routectl input list'.")
            }
            let after = try connection.apply(Planner.sourceActions(input, before), timeout: max(options.timeout, settleSeconds)) {
                Status(snapshot: $0).inputs.contains { $0.id == input.id && $0.isDefault }
            }
            return (after, input)
        }
        guard Status(snapshot: snapshot).inputs.contains(where: { $0.id == input.id && $0.isDefault }) else {
            throw Failure(status: .failed, message: "The server did not make '\(input.id)' the default input; it is '\(snapshot.server.defaultSourceName ?? "none")'")
        }
        persistent.preferredInput = input.id
        do { try store.savePersistent(persistent) } catch { throw State.failure(error) }
        return RouteCtl.write(options.json ? JSON.object([("preferred", .string(input.id))]).text + "\n" : "preferred    \(input.id)\n")
    }

    static func inputClear(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        do {
            try State.store().updatePersistent { $0.preferredInput = nil }
        } catch {
            throw State.failure(error)
        }
        return RouteCtl.write(options.json ? #"{"preferred":null}"# + "\n" : "preferred    none\n")
    }
}
