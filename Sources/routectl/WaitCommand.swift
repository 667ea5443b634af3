import Glibc
import Pulse
import Routing

/// `routectl wait ROUTE [--timeout S]`: exit 0 as soon as the route is ROUTE, 1 at the timeout, 130 when interrupted.
enum WaitCommand {
    /// Exit 0 as soon as the route is `route`; 1 at the timeout.
    static func run(_ route: Route, timeout: Double?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let connection = try ServerAccess.connect(options)
        connection.stopOnSignalsAndClosedOutput()
        var deadline: Double?
        if let timeout { deadline = monotonic() + timeout }
        do {
            try connection.subscribe(timeout: options.timeout)
            while true {
                let status = Status(snapshot: try connection.snapshot(timeout: options.timeout))
                if status.route == route {
                    if !options.quiet { Console.out("\(route.rawValue)\n") }
                    return .ok
                }
                let remaining = deadline.map { $0 - monotonic() }
                if let remaining, remaining <= 0 { return .failed }
                guard try connection.waitForChanges(timeout: remaining) else {
                    return connection.shouldStop ? .interrupted : .failed
                }
            }
        } catch {
            throw ServerAccess.failure(error)
        }
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
