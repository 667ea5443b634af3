import Glibc

/// The one place a system call is retried when a signal interrupts it.
public enum Syscall {
    /// Calls `body` until it does not fail with EINTR; returns its result, with `errno` still
    /// holding the failure's code when it is -1. For calls that report failure as -1 (`read`,
    /// `write`, `open`, `flock`, `fsync`, ...).
    @inline(__always)
    public static func retrying<Result: SignedInteger>(_ body: () -> Result) -> Result {
        while true {
            let result = body()
            if result != -1 || errno != EINTR { return result }
        }
    }
}

/// The clocks routectl reads: monotonic for waits and hold-downs (never jumps), real time for what
/// is stored or printed (when an override was set, an intent's age between processes).
public enum Clock {
    /// Milliseconds of the monotonic clock (an arbitrary start). The corresponding C function is
    /// `clock_gettime(CLOCK_MONOTONIC)`.
    public static func monotonicMilliseconds() -> Int64 { read(CLOCK_MONOTONIC) / 1_000_000 }

    /// Seconds of the monotonic clock, with a fraction: for deadlines given in seconds.
    public static func monotonicSeconds() -> Double { Double(read(CLOCK_MONOTONIC)) / 1e9 }

    /// Milliseconds since the Unix epoch. The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
    public static func realtimeMilliseconds() -> Int64 { read(CLOCK_REALTIME) / 1_000_000 }

    /// Whole seconds since the Unix epoch.
    public static func realtimeSeconds() -> Int64 { read(CLOCK_REALTIME) / 1_000_000_000 }

    static func read(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
