/// What the orchestration (the Engine) needs from a sound server. `Pulse.PulseConnection` conforms;
/// unit tests drive the Engine with an in-memory fake, the way swift-nio tests pipelines on
/// `EmbeddedChannel`. Errors are the server's own; the Engine asks them `ServerFailure` questions.
public protocol AudioServer: AnyObject {
    /// Everything routectl knows about the server now, fetched in one pipelined round.
    func snapshot(timeout: Double) throws -> Snapshot
    /// Asks for change notifications (sinks, sources, streams, cards, the server's defaults).
    func subscribe(timeout: Double) throws
    /// Carries the actions out, then reads the server back until `settled` holds or the time runs out;
    /// returns the last snapshot either way (the caller reports what it is).
    func apply(_ actions: [Action], timeout: Double, settled: (Snapshot) -> Bool) throws -> Snapshot
    /// Blocks until a change notification arrives (true), or a stop request or the timeout (false).
    func waitForChanges(timeout: Double?) throws -> Bool
    /// A snapshot taken after a change notification, past a server's brief no-default transient.
    func snapshotAfterChange(timeout: Double) throws -> Snapshot
    /// A snapshot once the server has stopped changing for `quiet` seconds (at most `limit`).
    func snapshotWhenQuiet(timeout: Double, quiet: Double, limit: Double) throws -> Snapshot
    /// A fresh connection after the old one died.
    func reconnect(timeout: Double) throws
    /// Sleeps on the server's main loop; false when a stop was requested.
    func pause(seconds: Double) -> Bool
    var isConnected: Bool { get }
    var shouldStop: Bool { get }
}

/// What the Engine asks of a server's error.
public protocol ServerFailure: Error, CustomStringConvertible {
    /// No server could be reached (exit 4), as opposed to one that refused (exit 1).
    var isUnreachable: Bool { get }
}
