import Bus
import Engine
import Pulse
import Routing
import Store

/// `watch --apply --dbus`: routectl's own D-Bus interface and the callaudiod drop-in, served from the
/// watch's main loop (DESIGN.md §5). Requests are carried out by the same code as the commands, on
/// the watch's connection, and answered with what the server reads back; properties only ever show
/// the state the watch read from the server.
final class DBusControl: RemoteControl {
    let bus: BusService
    let connection: PulseConnection
    let options: GlobalOptions
    /// The bus went away and that was said (once).
    var lostSaid = false

    init(bus: BusService, connection: PulseConnection, options: GlobalOptions) {
        self.bus = bus
        self.connection = connection
        var quiet = options
        quiet.quiet = true
        quiet.json = false
        self.options = quiet
    }

    /// Opens the session bus and takes routectl's name, and callaudiod's unless another program has
    /// it (then says so once and serves routectl's own interface only).
    static func start(_ connection: PulseConnection, _ options: GlobalOptions) throws(Failure) -> DBusControl {
        let bus: BusService
        do {
            bus = try BusService(address: nil, callAudio: true)
        } catch {
            throw Failure(status: .failed, message: error.description)
        }
        if !bus.ownsCallAudio {
            Console.err("routectl: note: \(BusService.callAudioName) is owned by \(bus.callAudioOwner ?? "another program") (callaudiod?); serving \(BusService.name) only\n")
        }
        connection.attach(bus)
        return DBusControl(bus: bus, connection: connection, options: options)
    }

    func serve(lockWait: Double) -> Bool? {
        if let lost = bus.lostError, !lostSaid {
            // The rules go on without D-Bus; the unit's log says why the names are gone.
            Console.err("routectl: \(lost)\n")
            lostSaid = true
        }
        // Requests that arrive while one is carried out (its read-back runs the loop) are served too.
        var calls = bus.takeRequests()
        guard !calls.isEmpty else { return nil }
        // A command holding the route lock goes first, for as long as the watcher would wait on it
        // itself; one that keeps it longer (stopped with Ctrl-Z) fails the request, not the watcher.
        LockWait.limit = lockWait
        (LockWait.ranOut, LockWait.took) = (false, false)
        defer { LockWait.limit = nil }
        while !calls.isEmpty {
            for call in calls {
                do throws(Failure) {
                    try carryOut(call)
                } catch {
                    if call.request.returnsRoute {
                        call.fail(name: "io.github.routectl.Error.Failed", message: error.message)
                    } else {
                        call.reply(success: false)
                    }
                }
                // Once the lock was held that long, the requests after it only try it.
                if LockWait.ranOut { LockWait.limit = 0 }
            }
            calls = bus.takeRequests()
        }
        return LockWait.ranOut ? true : LockWait.took ? false : nil
    }

    func carryOut(_ call: PendingCall) throws(Failure) {
        switch call.request {
        case let .set(word, force):
            guard let target = RouteTarget(word: word) else { throw Failure(status: .usage, message: "unknown target '\(word)'") }
            let (result, _) = try RouteCommands.performSet(RouteRequest(target: target, force: force), options, on: connection)
            call.reply(route: result.status.route.rawValue)
        case .clear:
            let (result, _) = try RouteCommands.performClear(options, on: connection)
            call.reply(route: result.status.route.rawValue)
        case let .callStart(speaker):
            call.reply(route: try startCall(speaker: speaker).rawValue)
        case .callEnd:
            call.reply(route: try endCall().rawValue)
        case let .selectMode(mode):
            if mode == 1 { _ = try startCall(speaker: false) } else { _ = try endCall() }
            call.reply(success: true)
        case let .enableSpeaker(on):
            // The phone UI's speaker button: now, like `set speaker --force` within the call; off
            // gives the route back to the rules (a headset, else the call's receiver).
            // The call's own target: on, set once the server did what the button asked; off, set
            // first (clear falls back to it), and put back if the server refused.
            let was = on ? nil : try setCallSpeaker(false)
            let result: RouteCommands.Result
            do {
                (result, _) = on ? try RouteCommands.performSet(RouteRequest(target: .speaker, force: true), options, on: connection)
                                 : try RouteCommands.performClear(options, on: connection)
            } catch {
                if let was { _ = try? setCallSpeaker(was) }
                throw error
            }
            let done = (result.status.route == .speaker) == on
            if on, done { _ = try setCallSpeaker(true) }
            call.reply(success: done)
        case let .muteMic(mute):
            let after = try RouteCommands.setMicMute(mute, on: connection, options)
            call.reply(success: Status(snapshot: after).micMuted == mute)
        }
    }

    func startCall(speaker: Bool) throws(Failure) -> Route {
        let store = StatePreferences(State.store())
        let lock = try CallCommand.locked(store)
        defer { withExtendedLifetime(lock) {} }
        do {
            return try CallMode(server: connection, store: store, clocks: .system).start(speaker: speaker, timeout: options.timeout)
                .result.status.route
        } catch {
            throw Failure.from(error)
        }
    }

    func endCall() throws(Failure) -> Route {
        let store = StatePreferences(State.store())
        let lock = try CallCommand.locked(store)
        defer { withExtendedLifetime(lock) {} }
        let result: RouteApplier.Result?
        do {
            result = try CallMode(server: connection, store: store, clocks: .system).end(timeout: options.timeout)
        } catch {
            throw Failure.from(error)
        }
        if let result { return result.status.route }
        return Status(snapshot: try RouteCommands.onServer { try connection.snapshot(timeout: options.timeout) }).route
    }

    /// In a call, the speaker button also sets the call's own target (what a headset leaving falls
    /// back to). Returns what it was (nil: no call).
    func setCallSpeaker(_ on: Bool) throws(Failure) -> Bool? {
        let store = State.store()
        do {
            return try store.withOverrideLock { () throws(StateError) -> Bool? in
                guard var record = try store.loadCall() else { return nil }
                let was = record.speaker
                if was != on {
                    record.speaker = on
                    try store.saveCall(record)
                }
                return was
            }
        } catch {
            throw State.failure(error)
        }
    }

    func update(_ status: Status, _ preferences: Preferences) {
        let mic: UInt32 = status.micMuted.map { $0 ? 0 : 1 } ?? 255
        bus.publish(BusState(route: status.route.rawValue, target: preferences.effectiveTarget.rawValue,
                             override: preferences.override?.rawValue ?? "", call: preferences.inCall,
                             micMuted: status.micMuted ?? false, audioMode: preferences.inCall ? 1 : 0,
                             speakerState: status.output == nil ? 255 : status.route == .speaker ? 1 : 0, micState: mic))
    }

    func routeChanged(route: Route, previous: Route, reason: RouteChangeReason) {
        bus.routeChanged(route: route.rawValue, previous: previous.rawValue, reason: reason.rawValue)
    }
}
