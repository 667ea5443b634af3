/// What the orchestration (the Engine) needs from a sound server. `Pulse.PulseConnection` conforms;
/// unit tests drive the Engine with an in-memory fake, the way swift-nio tests pipelines on
/// `EmbeddedChannel`. Errors are the server's own; the Engine asks them `ServerFailure` questions.
public protocol AudioServer: AnyObject {
    /// What routectl knows about the server now (these parts), fetched in one pipelined round.
    func snapshot(timeout: Double, parts: SnapshotParts) throws -> Snapshot
    /// The state a request starts from: what this client last read whole, while that is still the
    /// server (subscribed, no notification since, no action since), else a fresh snapshot of `parts`.
    func latestSnapshot(timeout: Double, parts: SnapshotParts) throws -> Snapshot
    /// Asks for change notifications (sinks, sources, streams, cards, the server's defaults).
    func subscribe(timeout: Double) throws
    /// Carries the actions out, then reads the server back until `settled` holds or the time runs out;
    /// returns the last snapshot either way (the caller reports what it is).
    func apply(_ actions: [Action], timeout: Double, readBack: ReadBack, settled: (Snapshot) -> Bool) throws -> Snapshot
    /// Blocks until a change notification arrives (true), or a stop request or the timeout (false).
    func waitForChanges(timeout: Double?) throws -> Bool
    /// Notifications have come since the last snapshot's requests went out (those already queued are
    /// taken first, without blocking): what it shows may be outdated, and a refetch is owed.
    func hasPendingChanges() -> Bool
    /// A snapshot taken after a change notification, past a server's brief no-default transient.
    func snapshotAfterChange(timeout: Double) throws -> Snapshot
    /// A snapshot once the server has stopped changing for `quiet` seconds (at most `limit`).
    func snapshotWhenQuiet(timeout: Double, quiet: Double, limit: Double) throws -> Snapshot
    /// A fresh connection after the old one died.
    func reconnect(timeout: Double) throws
    /// A connection may show a default sink or source the server has since changed: pipewire-pulse
    /// keeps each client's own copy of PipeWire's defaults, and PipeWire (0.3.65) does not pass a
    /// change of them on to clients already there while another client is connecting. Reads the
    /// server again through a fresh connection and goes on with that one; true when its defaults
    /// differ from the old connection's. A change notification follows either way.
    func refreshStaleDefaults(timeout: Double) throws -> Bool
    /// How many clients this connection has seen connect to the server while subscribed: a default
    /// changed while none did cannot have been kept from it (`refreshStaleDefaults`). Nil when its
    /// subscription does not count them (a watcher's): any change may have been kept from it.
    var clientsArrived: Int? { get }
    /// Sleeps on the server's main loop; false when a stop was requested.
    func pause(seconds: Double) -> Bool
    var isConnected: Bool { get }
    var shouldStop: Bool { get }
}

extension AudioServer {
    /// Everything: sinks, sources, cards and streams.
    public func snapshot(timeout: Double) throws -> Snapshot { try snapshot(timeout: timeout, parts: .all) }

    public func latestSnapshot(timeout: Double) throws -> Snapshot { try latestSnapshot(timeout: timeout, parts: .all) }

    public func apply(_ actions: [Action], timeout: Double, settled: (Snapshot) -> Bool) throws -> Snapshot {
        try apply(actions, timeout: timeout, readBack: .snapshot(.all), settled: settled)
    }

    /// Makes `input` the default input (its source, and its port) from `snapshot`, and reads the server
    /// back until it is.
    public func makeDefault(_ input: Input, from snapshot: Snapshot, timeout: Double) throws -> Snapshot {
        try apply(Planner.sourceActions(input, snapshot), timeout: timeout) {
            Status(snapshot: $0).inputs.contains { $0.id == input.id && $0.isDefault }
        }
    }
}

/// Which parts of the server state a snapshot fetches; a part left out is empty in the snapshot.
/// Server information is always fetched (it names the defaults and the server).
public struct SnapshotParts: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let sinks = SnapshotParts(rawValue: 1 << 0)
    public static let sources = SnapshotParts(rawValue: 1 << 1)
    public static let cards = SnapshotParts(rawValue: 1 << 2)
    public static let sinkInputs = SnapshotParts(rawValue: 1 << 3)
    public static let sourceOutputs = SnapshotParts(rawValue: 1 << 4)
    /// The default source alone (by the server's `@DEFAULT_SOURCE@`), when `sources` is not asked
    /// for: the status shows only its mute, and every sink adds a monitor to the list of sources.
    public static let defaultSource = SnapshotParts(rawValue: 1 << 5)
    /// The default sink alone (by the server's `@DEFAULT_SINK@`), when `sinks` is not asked for: what
    /// a field of the route alone needs when no override waits to be checked against every output.
    public static let defaultSink = SnapshotParts(rawValue: 1 << 6)

    public static let all: SnapshotParts = [.sinks, .sources, .cards, .sinkInputs, .sourceOutputs]
    /// What planning an output route needs when no input changes with it: sinks, their cards and
    /// the streams that may follow. Not the sources (every sink has a monitor source: with hundreds
    /// of sinks they cost more than the sinks) nor the recording streams.
    public static let outputs: SnapshotParts = [.sinks, .cards, .sinkInputs]
}

/// What `apply` reads back after acting.
public enum ReadBack {
    /// A fresh snapshot of these parts.
    case snapshot(SnapshotParts)
    /// Only the server information and these sinks (by name), laid over `base`: what settles a
    /// plan whose outcome is a default sink, without refetching hundreds of others.
    case sinks([String], over: Snapshot)
}

/// What the Engine asks of a server's error.
public protocol ServerFailure: Error, CustomStringConvertible {
    /// No server could be reached (exit 4), as opposed to one that refused (exit 1).
    var isUnreachable: Bool { get }
    /// routectl's own deadline passed before the server answered (not an error the server sent).
    var isDeadline: Bool { get }
}
