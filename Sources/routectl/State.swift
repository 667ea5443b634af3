import Glibc
import Routing

/// Where routectl's state lives for this user, and the preferences read from it.
enum State {
    static func store() -> StateStore {
        let env = { (name: String) -> String? in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        var home = env("HOME")
        if home == nil, let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir { home = String(cString: dir) }
        let stateHome = env("XDG_STATE_HOME") ?? "\(home ?? "/")/.local/state"
        return StateStore(stateHome: stateHome, runtimeDir: env("XDG_RUNTIME_DIR"))
    }

    static func failure(_ error: StateError) -> Failure {
        Failure(status: .stateFile, message: error.description)
    }

    /// The preferences, with an override that a plug or unplug made stale cleared (and said so once).
    /// Without a status (a snapshot from elsewhere) the override is shown as stored.
    static func preferences(_ store: StateStore, current status: Status?, quiet: Bool) throws(Failure) -> Preferences {
        do {
            let persistent = try store.loadPersistent()
            var preferences = Preferences(defaultTarget: persistent.defaultTarget, preferredInput: persistent.preferredInput)
            guard store.overrideFile != nil else { return preferences }
            preferences.override = try currentOverride(store, status, quiet: quiet)?.target
            return preferences
        } catch {
            throw failure(error)
        }
    }

    /// The override record still in force: one whose external devices have changed is removed.
    static func currentOverride(_ store: StateStore, _ status: Status?, quiet: Bool) throws(StateError) -> OverrideRecord? {
        guard let record = try store.loadOverride() else { return nil }
        guard let status, let cause = record.staleness(currentExternals: status.externalKeys) else { return record }
        let lock = try store.lockOverride()
        defer { withExtendedLifetime(lock) {} }
        // Another routectl may have replaced or cleared it meanwhile: decide on what is there now.
        guard let fresh = try store.loadOverride(), fresh == record else { return try store.loadOverride() }
        try store.removeOverride()
        if !quiet { Console.err("routectl: note: override '\(record.target.rawValue)' cleared: \(cause)\n") }
        return nil
    }

    static func now() -> Int64 { Int64(time(nil)) }

    static func nowMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
