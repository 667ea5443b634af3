internal import CPulse
import Glibc
import Routing

extension PulseConnection {
    /// Polls `source` on this connection's main loop from now on, so a D-Bus service is served while
    /// routectl waits for the sound server, in the same thread. The connection holds the source
    /// until `detach` or its own end; a `reconnect` keeps it (the main loop stays, only the context
    /// is replaced). When the source's `process` queues work, `waitForChanges` returns true.
    /// The corresponding C calls are the main loop API's `io_new` and `time_new`.
    public func attach(_ source: LoopSource) {
        let sources = loopSources ?? AttachedSources(api: pa_mainloop_get_api(mainloop))
        loopSources = sources
        sources.attach(source)
    }

    /// Stops polling `source` and lets it go.
    public func detach(_ source: LoopSource) {
        loopSources?.detach(source)
    }

    /// True when an attached source has queued work that no `waitForChanges` has returned for yet.
    public var hasPendingWork: Bool {
        guard let loopSources else { return false }
        return loopSources.work != loopSources.workTaken
    }

    /// `waitForChanges`' question before each poll (`AttachedSources.takeWork`).
    func takeSourceWork() -> Bool {
        loopSources?.takeWork() ?? false
    }
}

/// The sources attached to one main loop, each with its io event and timer. Lives as long as the
/// connection, whose end frees the events (`detachAll`) before the main loop goes.
final class AttachedSources {
    let api: UnsafeMutablePointer<pa_mainloop_api>?
    var entries: [Entry] = []
    /// How many times a source's `process` queued work, and how many of those a wait has taken.
    var work = 0
    var workTaken = 0

    init(api: UnsafeMutablePointer<pa_mainloop_api>?) {
        self.api = api
    }

    /// One source and the main loop events that poll it for it.
    final class Entry {
        let source: LoopSource
        /// The events call back into the list that owns them; it outlives them (`detach` frees them).
        unowned let list: AttachedSources
        var io: OpaquePointer?
        var ioFd: Int32 = -1
        var timer: OpaquePointer?

        init(source: LoopSource, list: AttachedSources) {
            self.source = source
            self.list = list
        }
    }

    func attach(_ source: LoopSource) {
        guard !entries.contains(where: { $0.source === source }) else { return }
        let entry = Entry(source: source, list: self)
        entries.append(entry)
        // Whatever the source already holds (a message read while it was set up) is taken at once.
        dispatch(entry)
    }

    func detach(_ source: LoopSource) {
        guard let index = entries.firstIndex(where: { $0.source === source }) else { return }
        free(entries.remove(at: index))
    }

    func detachAll() {
        for entry in entries { free(entry) }
        entries = []
    }

    func rearmAll() {
        for entry in entries { arm(entry) }
    }

    /// Re-arms every source for what it waits for now (a D-Bus reply sent since the last poll may
    /// need `POLLOUT`, a call it made a timer), then takes the work queued since the last time, if
    /// any: true once per batch, so each batch wakes one wait.
    func takeWork() -> Bool {
        rearmAll()
        guard work != workTaken else { return false }
        workTaken = work
        return true
    }

    /// Lets the source work, counts what it queued, and polls for what it waits for next.
    func dispatch(_ entry: Entry) {
        if entry.source.process() { work += 1 }
        arm(entry)
    }

    /// Points the entry's events at what its source asks for now: the descriptor (a new one, or
    /// none once the source is dead, which must not be polled again: a closed descriptor would
    /// report POLLNVAL forever), its events, and its timer.
    func arm(_ entry: Entry) {
        guard let api else { return }
        let fd = entry.source.fd
        let flags = fd >= 0 ? AttachedSources.ioFlags(entry.source.pollEvents) : PA_IO_EVENT_NULL
        if fd != entry.ioFd, let io = entry.io {
            api.pointee.io_free(io)
            entry.io = nil
        }
        entry.ioFd = fd
        if let io = entry.io {
            api.pointee.io_enable(io, flags)
        } else if fd >= 0 {
            entry.io = api.pointee.io_new(api, fd, flags, { _, _, _, _, userdata in
                let entry = Unmanaged<Entry>.fromOpaque(userdata!).takeUnretainedValue()
                entry.list.dispatch(entry)
            }, Unmanaged.passUnretained(entry).toOpaque())
        }
        var when = timeval()
        let at = fd >= 0 ? entry.source.timeoutMicroseconds.map { AttachedSources.wallClock(monotonic: $0) } : nil
        if let at { when = at }
        if let timer = entry.timer {
            if at != nil { api.pointee.time_restart(timer, &when) } else { api.pointee.time_restart(timer, nil) }
        } else if at != nil {
            entry.timer = api.pointee.time_new(api, &when, { _, _, _, userdata in
                let entry = Unmanaged<Entry>.fromOpaque(userdata!).takeUnretainedValue()
                entry.list.dispatch(entry)
            }, Unmanaged.passUnretained(entry).toOpaque())
        }
    }

    func free(_ entry: Entry) {
        guard let api else { return }
        if let io = entry.io { api.pointee.io_free(io) }
        if let timer = entry.timer { api.pointee.time_free(timer) }
        entry.io = nil
        entry.timer = nil
        entry.ioFd = -1
    }

    /// poll(2)'s events in the main loop's words.
    static func ioFlags(_ events: Int16) -> pa_io_event_flags_t {
        var raw = PA_IO_EVENT_NULL.rawValue
        if events & Int16(POLLIN) != 0 { raw |= PA_IO_EVENT_INPUT.rawValue }
        if events & Int16(POLLOUT) != 0 { raw |= PA_IO_EVENT_OUTPUT.rawValue }
        return pa_io_event_flags_t(rawValue: raw)
    }

    /// The main loop API takes wall-clock times (its monotonic flag is libpulse-internal), and sd-bus
    /// gives monotonic ones: the same moment, as far from now on the wall clock.
    static func wallClock(monotonic: UInt64) -> timeval {
        let now = Deadline.now()
        let delay = monotonic > UInt64(now) ? Int64(clamping: monotonic - UInt64(now)) : 0
        var wall = timeval()
        gettimeofday(&wall, nil)
        let usec = Int64(wall.tv_usec) + delay % 1_000_000
        wall.tv_sec += Int(delay / 1_000_000 + usec / 1_000_000)
        wall.tv_usec = Int(usec % 1_000_000)
        return wall
    }
}

@available(*, unavailable)
extension AttachedSources: Sendable {}
