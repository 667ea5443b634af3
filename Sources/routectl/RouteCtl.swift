import Engine
import Glibc
import Pulse
import Routing
import Store

/// The entry point: parse, run one command, render, choose the exit status.
enum RouteCtl {
    static func run(_ args: [String]) -> ExitStatus {
        // A closed stdout must end routectl with an error status, not a signal.
        signal(SIGPIPE, SIG_IGN)
        do throws(Failure) {
            let invocation = try ArgumentParser.parse(args)
            let status = try execute(invocation)
            if let signal = Interrupts.arrived, !invocation.options.quiet {
                Console.err("routectl: note: \(Interrupts.name(signal)) came while the change was being made; it was carried through\n")
            }
            // A full disk or a broken terminal is said and fails the command, whatever it was.
            if let failure = Console.outputFailure {
                Console.err("routectl: \(failure)\n")
                return .failed
            }
            return status
        } catch {
            Console.err("routectl: \(error.message)\n")
            return error.status
        }
    }

    static func execute(_ invocation: Invocation) throws(Failure) -> ExitStatus {
        let options = invocation.options
        // A command waits its turn behind another that holds a lock (the route lock, a `set` reading
        // back) as long as the watcher would, then fails (exit 1) naming it: one stopped with Ctrl-Z
        // must not hang the next in silence. The watcher bounds its own waits.
        if case .watch = invocation.command {} else { LockWait.limit = Watch.lockPatience(timeout: options.timeout) }
        switch invocation.command {
        case let .help(topic):
            return write(options.json ? Help.json(for: topic).text + "\n" : Help.text(for: topic))
        case let .completions(shell):
            return write(Completions.script(shell))
        case let .completionIds(kind):
            // For the completion scripts: quietly nothing when no server answers.
            guard let snapshot = try? ServerAccess.snapshot(options) else { return .ok }
            let status = Status(snapshot: snapshot)
            let ids = kind == .outputs ? status.outputs.map(\.id) : status.inputs.map(\.id)
            return write(ids.map { $0 + "\n" }.joined())
        case .version:
            return write(options.json
                ? JSON.object([("routectl", .string(Help.version)), ("libpulse_compiled", .string(PulseLibrary.headersVersion)),
                               ("libpulse_linked", .string(PulseLibrary.libraryVersion))]).text + "\n"
                : Help.versionText)
        case let .query(field):
            // Only what the answer is made of is fetched (`parts`; a dump is read whole). An output
            // that appears meanwhile is not checked against a partial view: the next command checks it.
            let store = State.store()
            let parts = field.map { $0.parts(overrideOnDisk: options.snapshot != nil || State.overrideOnDisk(store)) }
                ?? QueryField.statusParts
            if options.snapshot == nil, let field, field.isOwnState {
                // routectl's own state needs no server; with one, an override a device change made
                // stale is cleared first, as for the full status.
                let live = parts.isEmpty ? nil : try? ServerAccess.snapshot(options, parts: parts)
                let status = live.map { Status(snapshot: $0) }
                let preferences = try State.preferences(store, current: status, quiet: options.quiet)
                return write(QueryCommand.render(status ?? Status(snapshot: Snapshot(server: ServerInfo(name: "", version: ""))),
                                                 preferences: preferences, field: field, json: options.json))
            }
            let snapshot = try ServerAccess.snapshot(options, parts: parts)
            let status = Status(snapshot: snapshot)
            // Without every sink there is nothing to check an override against, and none is on disk.
            // The light fields do not show the preferences; they are read anyway, so that a state file
            // that does not read fails a field as it fails the full status.
            let preferences = parts.contains(.sinks)
                ? try preferences(for: snapshot, status: status, options)
                : try State.preferences(store, current: nil, quiet: options.quiet)
            return write(QueryCommand.render(status, preferences: preferences, field: field, json: options.json))
        case let .set(request):
            try requireServer(options, "set")
            return try RouteCommands.set(request, options)
        case .clear:
            try requireServer(options, "clear")
            return try RouteCommands.clear(options)
        case let .default(target):
            if target != nil { try requireServer(options, "default \(target!.rawValue)") }
            return try RouteCommands.setDefault(target, options)
        case .inputList:
            return try RouteCommands.inputList(options)
        case let .inputSet(id):
            try requireServer(options, "input set")
            return try RouteCommands.inputSet(id, options)
        case .inputClear:
            try requireServer(options, "input clear")
            return try RouteCommands.inputClear(options)
        case let .inputMute(change):
            if let change { try requireServer(options, "input mute \(change.rawValue)") }
            return try RouteCommands.inputMute(change, options)
        case .why:
            return try WhyCommand.run(options)
        case .priorityList:
            return try PriorityCommand.list(options)
        case let .prioritySet(ids):
            try requireServer(options, "priority set")
            return try PriorityCommand.set(ids, options)
        case .priorityClear:
            try requireServer(options, "priority clear")
            return try PriorityCommand.set([], options)
        case let .call(verb, speaker):
            if verb != .status { try requireServer(options, "call \(verb.rawValue)") }
            return try CallCommand.run(verb, speaker: speaker, options)
        case let .watch(watch):
            try requireServer(options, "watch", follows: true)
            return try WatchCommand.run(options, watch)
        case let .wait(route, timeout):
            try requireServer(options, "wait", follows: true)
            return try WaitCommand.run(route, timeout: timeout, options)
        case .devices:
            let snapshot = try ServerAccess.snapshot(options)
            return write(DevicesCommand.render(Status(snapshot: snapshot), json: options.json))
        case .dump:
            // A bug report is one file: the server's state and routectl's own (DESIGN.md §4).
            var snapshot = try ServerAccess.snapshot(options)
            // As stored: a dump changes nothing, not even an override a device change made stale.
            if options.snapshot == nil {
                let store = State.store()
                snapshot.routectl = try State.preferences(store, current: nil, quiet: true)
                snapshot.decision = store.loadDecision()
                snapshot.lastMove = store.loadIntent()
                snapshot.owedProfiles = store.loadOwedProfiles()
                // State.preferences read them already: a corrupt one was said there.
                let record = store.overrideFile == nil ? nil : try? store.loadOverride()
                snapshot.overrideSetAt = record.flatMap { r in snapshot.routectl?.override == nil ? nil : WhyCommand.milliseconds(r) }
                snapshot.callStartedAt = (store.call == nil ? nil : try? store.loadCall())?.startedAt
                if let connection = try? ServerAccess.connect(options) {
                    snapshot.policies = WhyCommand.otherPolicies(connection, snapshot, store, options)
                }
            }
            return write(snapshot.json.text + "\n")
        }
    }

    /// Commands that change the server or routectl's state, or follow a live server, cannot run on a
    /// snapshot: `--snapshot` never reads or writes live state.
    static func requireServer(_ options: GlobalOptions, _ command: String, follows: Bool = false) throws(Failure) {
        if options.snapshot != nil {
            throw Failure.usage(follows ? "'\(command)' follows a live server; --snapshot is a file, read once."
                : "'\(command)' changes the server or routectl's state; --snapshot is for read-only commands.")
        }
    }

    /// The preferences a reading command shows: from the dump with `--snapshot` (the defaults when it
    /// has none), else the live state, with an override that a device change made stale cleared.
    static func preferences(for snapshot: Snapshot, status: Status? = nil, _ options: GlobalOptions) throws(Failure) -> Preferences {
        if options.snapshot != nil { return snapshot.routectl ?? Preferences() }
        return try State.preferences(State.store(), current: status ?? Status(snapshot: snapshot), quiet: options.quiet)
    }

    static func write(_ text: String) -> ExitStatus {
        Console.out(text) ? .ok : .failed
    }
}

/// Where a read-only command gets its snapshot: a dump file, or the server.
enum ServerAccess {
    /// `parts` is what is fetched from a server; a dump file is read whole.
    static func snapshot(_ options: GlobalOptions, parts: SnapshotParts = .all) throws(Failure) -> Snapshot {
        if let path = options.snapshot { return try read(snapshotFile: path) }
        let connection = try connect(options)
        do {
            return try connection.snapshot(timeout: options.timeout, parts: parts)
        } catch {
            throw failure(error)
        }
    }

    /// A command's connection. It stays open until routectl exits (`keepUntilExit`), unless
    /// `endsWithCommand`: `watch`, whose D-Bus service and signal handlers are torn down in order.
    static func connect(_ options: GlobalOptions, endsWithCommand: Bool = false) throws(Failure) -> PulseConnection {
        do {
            let connection = try PulseConnection(server: options.server, version: Help.version, timeout: options.timeout)
            if !endsWithCommand { connection.keepUntilExit() }
            return connection
        } catch {
            throw failure(error, timeout: options.timeout)
        }
    }

    /// The connection of a one-shot command that changes the route or a call: from here it carries
    /// its change through, a signal held until it is done (`Interrupts`).
    static func connectToChange(_ options: GlobalOptions) throws(Failure) -> PulseConnection {
        let connection = try connect(options)
        Interrupts.hold()
        return connection
    }

    /// `timeout`: the one a connection ran out of, when it did. A server that is there but slow (or a
    /// --timeout too short for any) is told apart from none.
    static func failure(_ error: PulseError, timeout: Double? = nil) -> Failure {
        if error.isUnreachable {
            let hint = "Is a PulseAudio or PipeWire server running? (try --server or PULSE_SERVER"
            if let timeout, error.isDeadline {
                return Failure(status: .noServer, message: "\(error): no answer within \(JSON.number(timeout)) s. \(hint), or a longer --timeout)")
            }
            return Failure(status: .noServer, message: "\(error). \(hint))")
        }
        return Failure(status: .failed, message: error.description)
    }

    static func read(snapshotFile path: String) throws(Failure) -> Snapshot {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, limit: FileIO.snapshotLimit, followLinks: true)
        } catch {
            throw Failure(status: .failed, message: "Cannot read snapshot '\(path)': \(error)")
        }
        do {
            return try Snapshot(json: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw Failure(status: .failed, message: "'\(path)' is not a routectl snapshot: \(error)")
        }
    }
}
