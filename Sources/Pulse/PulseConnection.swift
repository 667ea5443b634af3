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
    /// `changes` as it was when the last snapshot's requests were sent: a notification after that
    /// may not be in the snapshot, so it is still owed a refetch, even if it arrived during one.
    var consumed = 0
    var subscribed = false

    /// Connects by libpulse's rules: `server` if given, else `PULSE_SERVER`, client.conf, the runtime dir.
    /// Never autospawns a server. The corresponding C function is `pa_context_connect`.
    public init(server: String?, clientName: String = "routectl", timeout: Double) throws(PulseError) {
        guard let loop = pa_mainloop_new() else { throw PulseError(code: Int32(PA_ERR_INTERNAL.rawValue), operation: PulseError.connecting) }
        mainloop = loop
        self.server = server
        self.clientName = clientName
        try connectContext(timeout: timeout)
    }

    let server: String?
    let clientName: String

    /// A dead context cannot be revived: it is released and a new one connects on the same main loop.
    public func reconnect(timeout: Double) throws(PulseError) {
        disconnect()
        subscribed = false
        try connectContext(timeout: timeout)
    }

    func connectContext(timeout: Double) throws(PulseError) {
        let deadline = Deadline(seconds: timeout)
        guard let ctx = pa_context_new(pa_mainloop_get_api(mainloop), clientName) else {
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
        pa_mainloop_free(mainloop)
    }

    /// Ends the connection now; later calls fail as if the server had gone.
    public func disconnect() {
        guard let context else { return }
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        self.context = nil
        state = PA_CONTEXT_TERMINATED
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
                if remaining <= 0 { throw PulseError.timeout(operation) }
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

    /// Takes a just-sent request: a null operation means it was not sent. Otherwise `owner` (the
    /// object the request's callbacks get as userdata) is retained until the operation is done or
    /// cancelled, which its state callback sees even when the data callback never runs (a timeout,
    /// a context that died); then the operation itself is released at once, as pactl does.
    func sent(_ op: OpaquePointer?, _ operation: String, owner: AnyObject) throws(PulseError) {
        guard let op else { throw PulseError(code: pa_context_errno(context), operation: operation) }
        pa_operation_set_state_callback(op, { op, ud in
            if pa_operation_get_state(op) != PA_OPERATION_RUNNING {
                Unmanaged<AnyObject>.fromOpaque(ud!).release()
            }
        }, Unmanaged<AnyObject>.passRetained(owner).toOpaque())
        pa_operation_unref(op)
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
