import Glibc
import Pulse
import Routing
import Store

/// `routectl wait ROUTE [--timeout S]`: exit 0 as soon as the route is ROUTE, 1 at the timeout, 130 when interrupted.
enum WaitCommand {
    /// Exit 0 as soon as the route is `route`; 1 at the timeout.
    static func run(_ route: Route, timeout: Double?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let connection = try ServerAccess.connect(options)
        connection.stopOnSignalsAndClosedOutput()
        var deadline: Double?
        if let timeout { deadline = Clock.monotonicSeconds() + timeout }
        do {
            try connection.subscribe(timeout: options.timeout)
            while true {
                let status = Status(snapshot: try connection.snapshot(timeout: options.timeout))
                if status.route == route {
                    if options.json {
                        Console.out(JSON.object([("route", .string(route.rawValue))]).text + "\n")
                    } else if !options.quiet {
                        Console.out("\(route.rawValue)\n")
                    }
                    return .ok
                }
                let remaining = deadline.map { $0 - Clock.monotonicSeconds() }
                if let remaining, remaining <= 0 { return .failed }
                guard try connection.waitForChanges(timeout: remaining) else {
                    return connection.shouldStop ? .interrupted : .failed
                }
            }
        } catch {
            throw ServerAccess.failure(error)
        }
    }
}
