internal import CPulse
import Glibc
import Routing

/// A connection to one sound server over libpulse, driven synchronously on the calling thread.
///
/// The thread that creates the connection owns the `pa_mainloop` and makes every `pa_*` call: a
/// request is sent, then the loop is iterated until its callbacks have run or the deadline passes.
/// Several requests can be outstanding at once, which is how a snapshot is fetched in one round trip.
public final class PulseConnection {
    let mainloop: OpaquePointer
    var context: OpaquePointer?
    var state = PA_CONTEXT_UNCONNECTED
    /// Server change notifications received so far (SINK, SOURCE, streams, CARD, SERVER).
    var changes = 0
    /// Clients that connected to the server since a command's read-back subscribed (each new one opens
    /// pipewire-pulse's window in which a change of the defaults is not passed on: `refreshStaleDefaults`);
    /// a watcher's subscription does not count them.
    var clientsCounted = 0
    /// The subscription counts clients (`sendSubscribe`).
    var countsClients = false
    public var clientsArrived: Int? { countsClients ? clientsCounted : nil }
    /// `changes` as it was when the last snapshot's requests were sent: a notification after that
    /// may not be in the snapshot, so it is still owed a refetch, even if it arrived during one.
    /// (`snapshotWhenQuiet` also moves it on while it waits, and reads the server once after.)
    var consumed = 0
    var subscribed = false
    /// The last whole snapshot, while nothing has changed since (`latestSnapshot`).
    var latest = LatestSnapshot()
    /// The server as this subscribed connection last read it whole, and the objects changed since:
    /// what its next whole read asks for (`Mirror`).
    var mirror = Mirror()

    /// Set once libpulse's signal handling is installed on this loop (`stopOnSignalsAndClosedOutput`).
    var signalsInstalled = false
    /// The main loop's watch on stdout for a reader that went away, if one was made.
    var stdoutEvent: OpaquePointer?
    /// Other things polled on this main loop (the D-Bus service), once one is attached (LoopSources.swift).
    var loopSources: AttachedSources?

    /// The reverse-DNS id routectl's clients carry in `application.id` (`pactl list clients`).
    public static let applicationID = "io.github.routectl"

    /// Connects by libpulse's rules: `server` if given, else `PULSE_SERVER`, client.conf, the runtime dir.
    /// Never autospawns a server. The client is named as desktop clients name themselves
    /// (`application.name`, `.id`, `.icon_name` and, if given, `.version`).
    /// The corresponding C function is `pa_context_connect`.
    public init(server: String?, clientName: String = "routectl", version: String? = nil, timeout: Double) throws(PulseError) {
        guard let loop = pa_mainloop_new() else { throw PulseError(code: Int32(PA_ERR_INTERNAL.rawValue), operation: PulseError.connecting) }
        mainloop = loop
        self.server = server
        self.clientName = clientName
        self.version = version
        try connectContext(until: Deadline(seconds: timeout))
    }

    let server: String?
    let clientName: String
    let version: String?

    /// The client's properties. The corresponding C function is `pa_proplist_sets`.
    /// routectl never streams audio, so it asks libpulse for no shared memory: no memfd pool to
    /// create and hand over, and on PulseAudio no shared ring buffer for the connection, which its
    /// replies would otherwise come through (about 0.2 ms of a one-shot command against PulseAudio).
    static func clientProperties(name: String, version: String?) -> [(String, String)] {
        var list = [("application.name", name), ("application.id", applicationID), ("application.icon_name", "audio-card"),
                    ("context.force.disable.shm", "yes")]
        if let version { list.append(("application.version", version)) }
        return list
    }

    /// A dead context cannot be revived: it is released and a new one connects on the same main loop.
    public func reconnect(timeout: Double) throws(PulseError) {
        disconnect()
        subscribed = false
        try connectContext(until: Deadline(seconds: timeout))
    }

    /// The corresponding C function is `pa_context_new_with_proplist`.
    func connectContext(until deadline: Deadline) throws(PulseError) {
        guard let proplist = pa_proplist_new() else {
            throw PulseError(code: Int32(PA_ERR_INTERNAL.rawValue), operation: PulseError.connecting)
        }
        for (key, value) in PulseConnection.clientProperties(name: clientName, version: version) {
            pa_proplist_sets(proplist, key, value)
        }
        let made = pa_context_new_with_proplist(pa_mainloop_get_api(mainloop), clientName, proplist)
        pa_proplist_free(proplist)
        guard let ctx = made else {
            throw PulseError(code: Int32(PA_ERR_INTERNAL.rawValue), operation: PulseError.connecting)
        }
        context = ctx
        state = PA_CONTEXT_UNCONNECTED
        pa_context_set_state_callback(ctx, { ctx, userdata in
            let me = Unmanaged<PulseConnection>.fromOpaque(userdata!).takeUnretainedValue()
            me.state = pa_context_get_state(ctx)
        }, Unmanaged.passUnretained(self).toOpaque())
        if pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            throw PulseError(code: pa_context_errno(ctx), operation: PulseError.connecting)
        }
        try run(until: { $0.state == PA_CONTEXT_READY }, deadline: deadline, operation: PulseError.connecting)
    }

    deinit {
        if let context {
            pa_context_set_state_callback(context, nil, nil)
            pa_context_disconnect(context)
            pa_context_unref(context)
        }
        if let stdoutEvent, let api = pa_mainloop_get_api(mainloop) { api.pointee.io_free(stdoutEvent) }
        loopSources?.detachAll()
        // Frees the signal events and restores the handlers; before the loop they live on goes.
        if signalsInstalled {
            pa_signal_done()
            signalSubsystemInUse = false
        }
        pa_mainloop_free(mainloop)
    }

    /// Leaves the connection open until the process exits, and libpulse's teardown never run: for a
    /// command that ends with its process. The server sees the socket close at exit as it would
    /// after `pa_context_disconnect` (the native protocol has no goodbye message). The teardown
    /// frees piece by piece what the exit frees at once. (With shared memory, which routectl no
    /// longer asks for, it first copied the server's ring buffer into ~30 fresh pages: 0.2 ms.)
    /// Not for a connection that has D-Bus sources attached or outlives its command.
    public func keepUntilExit() {
        _ = Unmanaged.passRetained(self)
    }

    /// Ends the connection now; later calls fail as if the server had gone.
    public func disconnect() {
        guard let context else { return }
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        self.context = nil
        state = PA_CONTEXT_TERMINATED
        latest.forget()
        mirror.forget()
    }

    /// The address actually connected to. The corresponding C function is `pa_context_get_server`.
    public var serverString: String? {
        guard let context, let s = pa_context_get_server(context) else { return nil }
        return String(cString: s)
    }

    /// Iterates the main loop until `done` holds, the context dies, or the deadline passes (with no
    /// deadline it waits as long as it takes: no timer wakes it while nothing happens).
    func run(until done: (PulseConnection) -> Bool, deadline: Deadline?, operation: String) throws(PulseError) {
        while !done(self) {
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED || context == nil {
                let code = context.map { pa_context_errno($0) } ?? Int32(PA_ERR_CONNECTIONTERMINATED.rawValue)
                throw PulseError(code: code == 0 ? Int32(PA_ERR_CONNECTIONTERMINATED.rawValue) : code, operation: operation)
            }
            var remaining: Int64 = -1
            if let deadline {
                remaining = deadline.remainingMicroseconds
                if remaining <= 0 { throw PulseError.deadline(operation) }
            }
            if pa_mainloop_prepare(mainloop, Int32(clamping: remaining)) < 0 || pa_mainloop_poll(mainloop) < 0
                || pa_mainloop_dispatch(mainloop) < 0 {
                throw PulseError(code: Int32(PA_ERR_INTERNAL.rawValue), operation: operation)
            }
        }
    }

    /// The live context, or the error a dead one left.
    func liveContext(_ operation: String) throws(PulseError) -> OpaquePointer {
        guard let context, state == PA_CONTEXT_READY else {
            throw PulseError(code: Int32(PA_ERR_CONNECTIONTERMINATED.rawValue), operation: operation)
        }
        return context
    }
}

@available(*, unavailable)
extension PulseConnection: Sendable {}

/// A point on the monotonic clock after which a wait gives up.
struct Deadline {
    let microseconds: Int64

    init(seconds: Double) {
        microseconds = Deadline.now() + Int64(max(0, seconds) * 1_000_000)
    }

    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    var remainingMicroseconds: Int64 { microseconds - Deadline.now() }
}
