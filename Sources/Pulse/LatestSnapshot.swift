import Routing

/// The last whole snapshot a subscribed connection read, for as long as it still shows the server:
/// no change notification has come since its requests went out, and routectl has not acted since
/// (an acknowledged action's notifications may still be on their way). A long-lived client then
/// answers a request from what it already knows: `watch --apply --dbus` starts a call without first
/// asking the server again what it has just told it.
struct LatestSnapshot {
    private var kept: (snapshot: Snapshot, changes: Int)?

    /// Keeps `snapshot`, whose requests were sent when `changes` notifications had come.
    mutating func keep(_ snapshot: Snapshot, requestedAt changes: Int) {
        kept = (snapshot, changes)
    }

    /// Routectl acted, or the connection was replaced: what was kept may no longer be the server.
    mutating func forget() {
        kept = nil
    }

    /// The kept snapshot, if no notification has come since it was requested.
    func current(changes: Int) -> Snapshot? {
        guard let kept, kept.changes == changes else { return nil }
        return kept.snapshot
    }
}
