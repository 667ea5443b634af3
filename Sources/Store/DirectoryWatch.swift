import Glibc
import Routing

/// Wakes the watch loop when routectl's own files in the runtime directory change (`call.json`
/// created or removed by `call start|end` in another process, `intent.json` as a move is announced
/// and ends), through inotify: a call that moves no route still gets its `call` event at once, and
/// a move this connection was not told of is asked about at once, with no polling.
public final class DirectoryWatch: LoopSource {
    let descriptor: Int32
    let names: Set<String>
    var pending = false

    /// Nil when inotify cannot watch the directory (it does not exist yet): the loop then learns of
    /// the files at its next server change, as before.
    public init?(directory: String, names: Set<String>) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
        self.names = names
    }

    deinit { close(descriptor) }

    /// A watched name changed since the last call: what the loop's owner asks between its rounds.
    public func takeChange() -> Bool {
        defer { pending = false }
        return pending
    }

    public var fd: Int32 { descriptor }
    public var pollEvents: Int16 { Int16(POLLIN) }
    public var timeoutMicroseconds: UInt64? { nil }

    /// Reads what is queued; true when one of the watched names changed.
    public func process() -> Bool {
        var changed = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { bytes in Syscall.retrying { read(descriptor, bytes.baseAddress, bytes.count) } }
            guard n > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let (length, name) = buffer.withUnsafeBytes { raw -> (Int, String) in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    let start = offset + MemoryLayout<inotify_event>.size
                    let bytes = raw[start..<min(start + Int(event.len), n)].prefix { $0 != 0 }
                    return (Int(event.len), String(decoding: bytes, as: UTF8.self))
                }
                if names.contains(name) { changed = true; pending = true }
                offset += MemoryLayout<inotify_event>.size + length
            }
        }
        return changed
    }
}
