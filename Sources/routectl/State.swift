import Routing
import Store

/// Where routectl's state lives for this user, and the preferences read from it.
enum State {
    static func store() -> StateStore { StateStore.forCurrentUser() }

    static func failure(_ error: StateError) -> Failure {
        // A lock another routectl kept too long is not the file's fault: exit 1, the file is fine.
        Failure(status: error.heldElsewhere ? .failed : .stateFile, message: error.description)
    }

    /// Fails (exit 5, naming the path) unless every state file a long-running command relies on
    /// reads, so `watch --apply` stops at start instead of at its first change.
    static func validate(_ store: StateStore = store()) throws(Failure) {
        do { try store.validate() } catch { throw failure(error) }
    }

    /// The preferences, with an override that a plug or unplug made stale cleared (and said so once).
    /// Without a status (a snapshot from elsewhere) the override is shown as stored.
    static func preferences(_ store: StateStore, current status: Status?, quiet: Bool) throws(Failure) -> Preferences {
        do {
            let persistent = try store.loadPersistent()
            var preferences = Preferences(defaultTarget: persistent.defaultTarget, preferredInput: persistent.preferredInput,
                                          callTarget: try store.call?.load()?.target, priority: persistent.priority)
            guard store.overrideFile != nil else { return preferences }
            preferences.override = try currentOverride(store, status, quiet: quiet)?.target
            return preferences
        } catch {
            throw failure(error)
        }
    }

    /// Whether an override is on disk, to be checked against the server before an answer: a file
    /// that does not read counts, so that what reads it says what is wrong with it. None without a
    /// runtime dir.
    static func overrideOnDisk(_ store: StateStore) -> Bool {
        guard store.overrideFile != nil else { return false }
        do { return try store.loadOverride() != nil } catch { return true }
    }

    /// The override record still in force: one whose external devices have changed is removed.
    static func currentOverride(_ store: StateStore, _ status: Status?, quiet: Bool) throws(StateError) -> OverrideRecord? {
        guard let record = try store.loadOverride() else { return nil }
        guard let status, let cause = record.staleness(currentExternals: status.externalKeys) else { return record }
        // A running `watch --apply` alone clears it then: a device gone may come back within its hold-down.
        if ApplyLock.isHeld(store) { return record }
        return try store.withOverrideLock { () throws(StateError) -> OverrideRecord? in
            // Another routectl may have replaced or cleared it meanwhile: decide on what is there now.
            guard let fresh = try store.loadOverride(), fresh == record else { return try store.loadOverride() }
            try store.removeOverride()
            if !quiet { Console.err("routectl: note: override '\(record.target.rawValue)' cleared: \(cause)\n") }
            return nil
        }
    }

    /// The call in progress (`call.json`), if any; none without a runtime dir.
    static func call(_ store: StateStore) throws(Failure) -> CallRecord? {
        guard store.call != nil else { return nil }
        do { return try store.loadCall() } catch { throw failure(error) }
    }

    /// Seconds since the epoch (when an override was set).
    static func now() -> Int64 { Clock.realtimeSeconds() }

    /// Milliseconds since the epoch (an intent's time, compared across processes).
    static func nowMilliseconds() -> Int64 { Clock.realtimeMilliseconds() }
}
