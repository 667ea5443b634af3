import Engine
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
        var changed = false
        var subscribed = false
        while true {
            do {
                if !subscribed {
                    try connection.subscribe(timeout: options.timeout)
                    subscribed = true
                }
                return try waitOnServer(connection, route, deadline: deadline, changed: &changed, options)
            } catch {
                // The server went away (a restart): `wait` waits on, as `watch` does, reconnecting with
                // its backoff until the server is back; exit 4 only when it is not back by the deadline.
                guard !connection.isConnected, !connection.shouldStop else { throw ServerAccess.failure(error) }
                var delay = 0.1
                while true {
                    if let deadline, Clock.monotonicSeconds() + delay >= deadline {
                        throw Failure(status: .noServer, message: "the server went away and was not back "
                                      + "within the --timeout of wait (\(error)); the route was not seen to be \(route.rawValue)")
                    }
                    guard connection.pause(seconds: delay) else { return .interrupted }
                    delay = min(delay * 2, 2)
                    do {
                        try connection.reconnect(timeout: min(options.timeout, 2))
                        break
                    } catch {
                        continue
                    }
                }
                subscribed = false
                changed = true
            }
        }
    }

    /// Follows the server until the route is `route` (exit 0), the deadline (exit 1) or a signal.
    static func waitOnServer(_ connection: PulseConnection, _ route: Route, deadline: Double?, changed: inout Bool,
                             _ options: GlobalOptions) throws(PulseError) -> ExitStatus {
        while true {
            var status = Status(snapshot: try connection.snapshot(timeout: options.timeout))
            if status.route == route, changed {
                // A server may pass through a route on its way to another (WirePlumber through an
                // HDMI output for a millisecond, on a jack of the laptop): the route counts once
                // the server has been quiet on it a moment, as `watch` reports it.
                let limit = min(RouteHold.departureWindow, deadline.map { max(0, $0 - Clock.monotonicSeconds()) } ?? .infinity)
                do {
                    status = Status(snapshot: try connection.snapshotWhenQuiet(timeout: options.timeout, quiet: RouteHold.quiet, limit: limit))
                } catch where connection.shouldStop {
                    // Interrupted while it waited: its read of the server after is not the answer.
                    return .interrupted
                }
                if connection.shouldStop { return .interrupted }
                // pipewire-pulse may not have passed the move on to this connection (a client
                // connecting at that moment): a fresh one is asked before the route counts.
                if status.route == route, status.server.isPipeWire, try connection.refreshStaleDefaults(timeout: options.timeout) {
                    continue
                }
            }
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
            changed = true
        }
    }
}
