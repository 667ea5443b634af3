import Routing

/// The Engine drives a live server through this conformance; every method is PulseConnection's own.
extension PulseConnection: AudioServer {
    public func snapshotAfterChange(timeout: Double) throws -> Snapshot {
        try snapshotAfterChange(timeout: timeout, settle: 0.5)
    }
}
