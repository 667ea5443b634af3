/// Something else that lives on the sound server's main loop: a file descriptor to poll and a
/// timer, in the shape sd-bus gives them (`sd_bus_get_fd`, `sd_bus_get_events`, `sd_bus_get_timeout`).
///
/// One thread owns the main loop, so a source's work (answering a D-Bus call needs the sound server)
/// cannot be done inside its callback: `process` only queues it, says so, and the loop's owner is
/// woken to take it. The loop asks for `fd`, `pollEvents` and `timeoutMicroseconds` afresh after
/// every `process`, since what a source waits for changes as it reads and writes.
public protocol LoopSource: AnyObject {
    /// The descriptor to poll; negative once the source is dead (the loop then stops polling it).
    var fd: Int32 { get }
    /// What to poll `fd` for: `POLLIN`, `POLLOUT` or both.
    var pollEvents: Int16 { get }
    /// When `process` must run even if `fd` stays quiet: an absolute `CLOCK_MONOTONIC` time in
    /// microseconds (0 is now), or nil for never.
    var timeoutMicroseconds: UInt64? { get }
    /// Does what is ready without blocking. True when it queued work for the loop's owner.
    func process() -> Bool
}
