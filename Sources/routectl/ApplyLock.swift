import Glibc
import Routing
import Store

/// One `watch --apply` per user session: an flock on a file in the runtime dir that holds the pid.
enum ApplyLock {
    /// Whether a `watch --apply` holds the lock now: its pid, recorded in the lock file, is a live
    /// routectl. Asking flock would take the lock for a moment and could turn a starting watcher away.
    /// A watcher that has died but is not yet reaped (a zombie, until its parent waits for it) still
    /// answers `kill(pid, 0)` and keeps its /proc entry, but its lock went with its files.
    static func isHeld(_ store: StateStore) -> Bool {
        guard let path = store.overrideFile?.replacingSuffix("override.json", with: "apply.lock"),
              let bytes = try? FileIO.read(path), let pid = Int32(String(decoding: bytes, as: UTF8.self).trimmingNewline),
              pid > 0, kill(pid, 0) == 0 || errno == EPERM,
              let stat = try? FileIO.read("/proc/\(pid)/stat") else { return false }
        return isLiveRoutectl(stat: stat)
    }

    /// `/proc/PID/stat` names a routectl that runs: its command name (in parentheses, as
    /// /proc/PID/comm has it; it may itself hold a parenthesis) begins with routectl, and its state
    /// (the field after it) is not Z (zombie) or X (dead).
    static func isLiveRoutectl(stat: [UInt8]) -> Bool {
        guard let open = stat.firstIndex(of: UInt8(ascii: "(")), let close = stat.lastIndex(of: UInt8(ascii: ")")), open < close,
              let state = stat[(close + 1)...].first(where: { $0 != UInt8(ascii: " ") }) else { return false }
        return String(decoding: stat[(open + 1)..<close], as: UTF8.self).hasPrefix("routectl")
            && state != UInt8(ascii: "Z") && state != UInt8(ascii: "X")
    }

    static func acquire(_ store: StateStore) throws(Failure) -> FileLock {
        guard let overrideFile = store.overrideFile else {
            throw Failure(status: .stateFile, message: "$XDG_RUNTIME_DIR: not set, or not an absolute path; 'watch --apply' keeps its lock in the runtime directory")
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
