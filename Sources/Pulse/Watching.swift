internal import CPulse
import Glibc
import Routing

/// Set from SIGINT/SIGTERM (through libpulse's signal pipe, so a signal wakes the main loop), or
/// when stdout's reader goes away.
nonisolated(unsafe) var stopRequested = false

/// libpulse's signal subsystem is one per process (`pa_signal_init` on one main loop at a time).
nonisolated(unsafe) var signalSubsystemInUse = false

extension PulseConnection {
    /// SIGINT and SIGTERM, and a hang-up on stdout, stop `waitForChanges` and `pause` instead of killing
    /// the process; the connection's end undoes it (`pa_signal_done`). The corresponding C functions
    /// are `pa_signal_init` and `pa_signal_new`.
    public func stopOnSignalsAndClosedOutput() {
        guard !signalsInstalled, !signalSubsystemInUse else { return }
        let api = pa_mainloop_get_api(mainloop)
        guard pa_signal_init(api) == 0 else { return }
        signalsInstalled = true
        signalSubsystemInUse = true
        for sig in [SIGINT, SIGTERM] {
            pa_signal_new(sig, { _, _, _, _ in stopRequested = true }, nil)
        }
        // SIGHUP (a closed terminal, `systemctl reload`) must not kill the policy: the state files are
        // read afresh at every change anyway, so there is nothing else to reload.
        pa_signal_new(SIGHUP, { _, _, _, _ in }, nil)
        // A pipe whose reader closed reports POLLERR on its write end: end quietly, as promised.
        var st = stat()
        if fstat(1, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO || (st.st_mode & S_IFMT) == S_IFSOCK {
            let flags = pa_io_event_flags_t(rawValue: PA_IO_EVENT_HANGUP.rawValue | PA_IO_EVENT_ERROR.rawValue)
            stdoutEvent = api?.pointee.io_new(api, 1, flags, { _, _, _, _, _ in stopRequested = true }, nil)
        }
    }

    public var shouldStop: Bool { stopRequested }

    /// Dispatches what is already queued without blocking, so a burst is taken whole; bounded, so a
    /// server that never stops talking (or a stdout hang-up that stays readable) cannot spin us.
    func drainQueuedEvents() {
        var rounds = 0
        while !stopRequested, rounds < 64, pa_mainloop_iterate(mainloop, 0, nil) > 0 { rounds += 1 }
    }

    public func hasPendingChanges() -> Bool {
        drainQueuedEvents()
        return changes != consumed
    }

    /// Waits for server change notifications not yet covered by a snapshot: true once some arrived
    /// (the whole burst already queued is taken with them), false on a stop request or at the timeout.
    /// Throws when the server goes away.
    public func waitForChanges(timeout: Double?) throws(PulseError) -> Bool {
        try waitForChanges(until: timeout.map { Deadline(seconds: $0) })
    }

    func waitForChanges(until deadline: Deadline?) throws(PulseError) -> Bool {
        do {
            try run(until: { $0.takeSourceWork() || $0.changes != $0.consumed || stopRequested }, deadline: deadline,
                    operation: "Waiting for the server")
        } catch {
            if error.isDeadline { return false }
            throw error
        }
        drainQueuedEvents()
        return !stopRequested
    }

    /// A snapshot taken after a change notification. When the default sink has just vanished,
    /// pipewire-pulse reports no default until WirePlumber picks the next one a little later, where
    /// PulseAudio picks it in the same step; so while sinks exist but none is the default, wait for
    /// the next notification (bounded by `settle` seconds) rather than report a route that never was.
    public func snapshotAfterChange(timeout: Double, settle: Double = 0.5) throws(PulseError) -> Snapshot {
        var snapshot = try self.snapshot(timeout: timeout)
        let deadline = Deadline(seconds: settle)
        while snapshot.defaultSink == nil, !snapshot.sinks.isEmpty, deadline.remainingMicroseconds > 0 {
            guard try waitForChanges(timeout: Double(deadline.remainingMicroseconds) / 1e6) else { break }
            snapshot = try self.snapshot(timeout: timeout)
        }
        return snapshot
    }

    /// A snapshot of a server that has stopped changing: after a (re)start PipeWire brings its devices
    /// and WirePlumber its defaults up over a second or so, and re-applying the route in the middle of
    /// that would be undone. Waits without reading the server until `quiet` seconds pass with no
    /// notification (nor work of an attached loop source), `limit` runs out or a stop is requested;
    /// then reads it once. A refetch on each burst on the way would be the server's time too, taken
    /// from the very burst being waited out (pipewire-pulse answers requests on the thread that takes
    /// WirePlumber's changes in, a phone's call profile among them).
    public func snapshotWhenQuiet(timeout: Double, quiet: Double = 0.3, limit: Double = 3) throws(PulseError) -> Snapshot {
        let end = Deadline(seconds: limit)
        while end.remainingMicroseconds > 0 {
            consumed = changes
            let window = min(quiet, Double(end.remainingMicroseconds) / 1e6)
            guard try waitForChanges(timeout: window) else { break }
        }
        return try snapshot(timeout: timeout)
    }

    /// pipewire-pulse keeps one copy of PipeWire's default metadata per client, and PipeWire 0.3.65
    /// forwards a change of that metadata only to the client whose binding of it is pending while one
    /// is (module-metadata holds the others' events until the owner, WirePlumber, answers its ping):
    /// every new pulse client opens such a window, and a default WirePlumber changes in it is never
    /// seen by the clients already connected; their server information keeps the old default until
    /// the next change. A fresh connection reads the truth. This one is replaced (subscribed again if
    /// it was), and `changes` counts one so that the caller refetches what the gap may have hidden.
    public func refreshStaleDefaults(timeout: Double) throws(PulseError) -> Bool {
        let deadline = Deadline(seconds: timeout)
        let before = try snapshot(until: deadline, parts: []).server
        let wasSubscribed = subscribed
        disconnect()
        subscribed = false
        try connectContext(until: deadline)
        if wasSubscribed {
            let batch = RequestBatch()
            try sendSubscribe(in: batch, clients: countsClients)
            try wait(for: batch, until: deadline)
        }
        let after = try snapshot(until: deadline, parts: []).server
        changes += 1
        return before.defaultSinkName != after.defaultSinkName || before.defaultSourceName != after.defaultSourceName
    }

    /// Sleeps on the main loop (a signal still ends it early). False when a stop was requested.
    public func pause(seconds: Double) -> Bool {
        let deadline = Deadline(seconds: seconds)
        while !stopRequested, deadline.remainingMicroseconds > 0 {
            if pa_mainloop_prepare(mainloop, Int32(clamping: deadline.remainingMicroseconds)) < 0
                || pa_mainloop_poll(mainloop) < 0 || pa_mainloop_dispatch(mainloop) < 0 {
                break
            }
        }
        return !stopRequested
    }

    public var isConnected: Bool { context != nil && state == PA_CONTEXT_READY }
}

/// Calls back when a file descriptor takes more output, while enabled: `watch` writes what a slow
/// reader left queued as soon as the reader is back, with no polling. The corresponding C calls are
/// the main loop API's `io_new` and `io_enable`.
public final class WritableWatch {
    fileprivate var event: OpaquePointer?
    fileprivate let api: UnsafeMutablePointer<pa_mainloop_api>?
    fileprivate let body: () -> Void
    /// The connection whose main loop holds the event: it must outlive the event.
    fileprivate let owner: PulseConnection

    fileprivate init(api: UnsafeMutablePointer<pa_mainloop_api>?, owner: PulseConnection, body: @escaping () -> Void) {
        self.api = api
        self.owner = owner
        self.body = body
    }

    /// Whether to be told that the descriptor is writable.
    public func enable(_ on: Bool) {
        guard let event, let api else { return }
        api.pointee.io_enable(event, on ? PA_IO_EVENT_OUTPUT : PA_IO_EVENT_NULL)
    }

    deinit {
        if let event, let api { api.pointee.io_free(event) }
    }
}

@available(*, unavailable)
extension WritableWatch: Sendable {}

extension PulseConnection {
    /// A watch on `fd` that calls `body` from the main loop whenever it is enabled and writable.
    public func watchWritable(fd: Int32, _ body: @escaping () -> Void) -> WritableWatch {
        let api = pa_mainloop_get_api(mainloop)
        let watch = WritableWatch(api: api, owner: self, body: body)
        watch.event = api?.pointee.io_new(api, fd, PA_IO_EVENT_NULL, { _, _, _, _, ud in
            Unmanaged<WritableWatch>.fromOpaque(ud!).takeUnretainedValue().body()
        }, Unmanaged.passUnretained(watch).toOpaque())
        return watch
    }
}
