internal import CSystemd
import Glibc
import Routing

/// The connection as the main loop polls it, in sd-bus's own terms.
extension BusService: LoopSource {
    /// The corresponding C function is `sd_bus_get_fd`; -1 once the connection is lost.
    public var fd: Int32 {
        guard lostError == nil else { return -1 }
        return max(-1, sd_bus_get_fd(bus))
    }

    /// `POLLIN`, plus `POLLOUT` while output is queued. The corresponding C function is `sd_bus_get_events`.
    public var pollEvents: Int16 {
        guard lostError == nil else { return 0 }
        return Int16(truncatingIfNeeded: max(0, sd_bus_get_events(bus)))
    }

    /// When a method call's reply times out or queued input waits (0: now). The corresponding C
    /// function is `sd_bus_get_timeout`, whose `UINT64_MAX` (none) is nil here.
    public var timeoutMicroseconds: UInt64? {
        guard lostError == nil else { return nil }
        var usec: UInt64 = 0
        guard sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max else { return nil }
        return usec
    }

    /// Reads, dispatches and writes until nothing is left; true when a method call was queued for
    /// the owner, or the connection was lost (`lostError` says why). The corresponding C function is
    /// `sd_bus_process`.
    public func process() -> Bool {
        guard lostError == nil else { return false }
        queuedWork = false
        while true {
            let r = sd_bus_process(bus, nil)
            if r == 0 { break }
            if r < 0 {
                lostError = BusError(operation: "the connection to the bus was lost", code: r)
                sd_bus_close(bus)
                return true
            }
        }
        if sd_bus_is_open(bus) <= 0 {
            lostError = BusError(operation: "the connection to the bus was lost", code: 0)
            return true
        }
        return queuedWork
    }
}
