import Glibc
import Engine
import Pulse
import Routing

/// `routectl watch [--apply [--mute-on-fallback]]`: the front end of `Engine.Watch`: the lock, the
/// connection, signals, and the rendering of each event as one flushed line.
enum WatchCommand {
    static func run(_ options: GlobalOptions, apply: Bool, muteOnFallback: Bool) throws(Failure) -> ExitStatus {
        let store = State.store()
        let lock = apply ? try ApplyLock.acquire(store) : nil
        defer { withExtendedLifetime(lock) {} }
        let preferences = StatePreferences(store)
        // A state file that cannot be read ends --apply at once (exit 5), not at the first change.
        if apply { do { _ = try preferences.preferences() } catch { throw Failure.from(.state(error)) } }
        let connection = try ServerAccess.connect(options)
        connection.stopOnSignalsAndClosedOutput()
        let snapshot: Snapshot
        do {
            try connection.subscribe(timeout: options.timeout)
            snapshot = try connection.snapshot(timeout: options.timeout)
        } catch {
            throw ServerAccess.failure(error)
        }
        let output = EventOutput(json: options.json)
        let writable = connection.watchWritable(fd: 1) { output.flush() }
        output.wantWritable = { writable.enable($0) }
        defer {
            output.wantWritable = nil
            writable.enable(false)
            output.finish()
        }
        var watch = Watch(server: connection, store: preferences, clocks: .system, apply: apply, muteOnFallback: muteOnFallback,
                          timeout: options.timeout, snapshot: snapshot, sink: output.send,
                          warn: { Console.err("routectl: \($0)\n") })
        do { try watch.run() } catch { throw Failure.from(error) }
        return .ok
    }
}

/// One `watch --apply` per user session: an flock on a file in the runtime dir that holds the pid.
enum ApplyLock {
    /// Whether a `watch --apply` holds the lock now: its pid, recorded in the lock file, is a live
    /// routectl. Asking flock would take the lock for a moment and could turn a starting watcher away.
    static func isHeld(_ store: StateStore) -> Bool {
        guard let path = store.overrideFile?.replacingSuffix("override.json", with: "apply.lock"),
              let bytes = try? FileIO.read(path), let pid = Int32(String(decoding: bytes, as: UTF8.self).trimmingNewline),
              pid > 0, kill(pid, 0) == 0 || errno == EPERM,
              let comm = try? FileIO.read("/proc/\(pid)/comm") else { return false }
        return String(decoding: comm, as: UTF8.self).hasPrefix("routectl")
    }

    static func acquire(_ store: StateStore) throws(Failure) -> FileLock {
        guard let overrideFile = store.overrideFile else {
            throw Failure(status: .stateFile, message: "$XDG_RUNTIME_DIR: not set; 'watch --apply' keeps its lock in the runtime directory")
        }
        // Taking (and dropping) the override's lock creates routectl's runtime dir and checks its owner.
        do { _ = try store.lockOverride() } catch { throw State.failure(error) }
        let path = overrideFile.replacingSuffix("override.json", with: "apply.lock")
        do {
            let lock = try FileLock(path, wait: false)
            lock.record("\(getpid())\n")
            return lock
        } catch where error.errno == EWOULDBLOCK {
            let pid = (try? FileIO.read(path)).map { String(decoding: $0, as: UTF8.self).trimmingNewline } ?? ""
            throw Failure(status: .failed, message: "Another 'routectl watch --apply' is running (pid \(pid.isEmpty ? "unknown" : pid)); one per session.")
        } catch {
            throw Failure(status: .stateFile, message: "\(path): cannot lock: \(error)")
        }
    }
}

extension String {
    func replacingSuffix(_ suffix: String, with replacement: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) + replacement : self
    }

    var trimmingNewline: String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }
}

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
