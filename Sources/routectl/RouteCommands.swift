import Engine
import Pulse
import Routing

/// `set`, `clear`, `default` and `input`: the commands that change routing.
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
                      timeout: Double, from initial: Snapshot? = nil, reason: RouteChangeReason = .override,
                      lightReadBack: Bool = false) throws(Failure) -> Result {
        let applier = RouteApplier(server: connection, store: StatePreferences(State.store()), clocks: .system)
        do {
            return try applier.route(request, preferredInput: preferredInput, timeout: timeout, from: initial, reason: reason,
                                     lightReadBack: lightReadBack)
        } catch {
            throw Failure.from(error)
        }
    }

    // MARK: set

    static func set(_ request: RouteRequest, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        // Concurrent `set`s run one after another and the last one's override stands.
        let (lock, persistent, previous) = try lockedState(store)
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connect(options)
        // Without a microphone to choose, an output route needs no sources (hundreds of monitors).
        let light = persistent.preferredInput == nil && !request.target.route.isExternal
        let before = try onServer { try connection.snapshot(timeout: options.timeout, parts: light ? .outputs : .all) }
        // The intent is recorded before acting, so a watcher that sees the switch knows it is routectl's
        // own (reason `override`); a failure puts the previous override back.
        var record = OverrideRecord(target: request.target, device: request.device, setAt: State.now(),
                                    externals: Status(snapshot: before).externalKeys)
        do { try store.saveOverride(record) } catch { throw State.failure(error) }
        let result: Result
        do {
            result = try route(connection, request, preferredInput: persistent.preferredInput, timeout: options.timeout,
                               from: before, lightReadBack: light)
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
                ["output", status.output.map { $0.id } ?? "none"],
            ]))
        }
        return exit
    }

    // MARK: default

    static func setDefault(_ target: RouteTarget?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let shown: RouteTarget
        if target == nil, let path = options.snapshot {
            shown = try ServerAccess.read(snapshotFile: path).routectl?.defaultTarget ?? .speaker
            return RouteCtl.write(options.json ? JSON.object([("default", .string(shown.rawValue))]).text + "\n" : shown.rawValue + "\n")
        }
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
        let preferences = try RouteCtl.preferences(for: snapshot, options)
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
