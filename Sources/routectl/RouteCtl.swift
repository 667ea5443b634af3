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
            return try execute(invocation)
        } catch {
            Console.err("routectl: \(error.message)\n")
            return error.status
        }
    }

    static func execute(_ invocation: Invocation) throws(Failure) -> ExitStatus {
        let options = invocation.options
        switch invocation.command {
        case let .help(topic):
            return write(Help.text(for: topic))
        case .version:
            return write(options.json
                ? JSON.object([("routectl", .string(Help.version)), ("libpulse_compiled", .string(PulseLibrary.headersVersion)),
                               ("libpulse_linked", .string(PulseLibrary.libraryVersion))]).text + "\n"
                : Help.versionText)
        case let .query(field):
            let snapshot = try ServerAccess.snapshot(options)
            let status = Status(snapshot: snapshot)
            let preferences = try State.preferences(State.store(), current: options.snapshot == nil ? status : nil, quiet: options.quiet)
            return write(QueryCommand.render(status, preferences: preferences, field: field, json: options.json))
        case let .set(request):
            try requireServer(options, "set")
            return try RouteCommands.set(request, options)
        case .clear:
            try requireServer(options, "clear")
            return try RouteCommands.clear(options)
        case let .default(target):
            return try RouteCommands.setDefault(target, options)
        case .inputList:
            return try RouteCommands.inputList(options)
        case let .inputSet(id):
            try requireServer(options, "input set")
            return try RouteCommands.inputSet(id, options)
        case .inputClear:
            return try RouteCommands.inputClear(options)
        case let .watch(apply, muteOnFallback):
            try requireServer(options, "watch")
            return try Watcher.run(options, apply: apply, muteOnFallback: muteOnFallback)
        case let .wait(route, timeout):
            try requireServer(options, "wait")
            return try WaitCommand.run(route, timeout: timeout, options)
        case .devices:
            let snapshot = try ServerAccess.snapshot(options)
            return write(DevicesCommand.render(Status(snapshot: snapshot), json: options.json))
        case .dump:
            let snapshot = try ServerAccess.snapshot(options)
            return write(snapshot.json.text + "\n")
        }
    }

    /// Commands that change the server cannot run on a snapshot.
    static func requireServer(_ options: GlobalOptions, _ command: String) throws(Failure) {
        if options.snapshot != nil { throw Failure.usage("'\(command)' changes the server; --snapshot is for read-only commands.") }
    }

    static func write(_ text: String) -> ExitStatus {
        Console.out(text) ? .ok : .failed
    }
}

/// Where a read-only command gets its snapshot: a dump file, or the server.
enum ServerAccess {
    static func snapshot(_ options: GlobalOptions) throws(Failure) -> Snapshot {
        if let path = options.snapshot { return try read(snapshotFile: path) }
        let connection = try connect(options)
        do {
            return try connection.snapshot(timeout: options.timeout)
        } catch {
            throw failure(error)
        }
    }

    static func connect(_ options: GlobalOptions) throws(Failure) -> PulseConnection {
        do {
            return try PulseConnection(server: options.server, timeout: options.timeout)
        } catch {
            throw failure(error)
        }
    }

    static func failure(_ error: PulseError) -> Failure {
        if error.isUnreachable {
            return Failure(status: .noServer, message: "\(error). Is a PulseAudio or PipeWire server running? (try --server or PULSE_SERVER)")
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
