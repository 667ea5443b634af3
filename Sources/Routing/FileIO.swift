import Glibc

/// A failed file operation: the path, and the system's text for errno.
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var errno: Int32
    public var description: String { String(cString: strerror(errno)) }
}

/// Whole-file reads and writes over the C library, so that routectl starts without Foundation.
public enum FileIO {
    /// The file's bytes. The corresponding C functions are `open` and `read`.
    public static func read(_ path: String) throws(FileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(path: path, errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, errno: errno)
            }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }
}

extension FileIO {
    /// Replaces `path` with `bytes` atomically: a temporary file in the same directory, fsync, rename,
    /// fsync of the directory. Readers see the old file or the new one, never a mix.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(FileError) {
        let dir = directory(of: path)
        var template = Array("\(dir)/.\(basename(of: path)).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw FileError(path: path, errno: errno) }
        let temp = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(temp) }
        }
        fchmod(fd, mode)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, errno: errno)
            }
            offset += n
        }
        guard fsync(fd) == 0 else { throw FileError(path: path, errno: errno) }
        guard rename(temp, path) == 0 else { throw FileError(path: path, errno: errno) }
        ok = true
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { fsync(dfd); close(dfd) }
    }

    /// Removes `path`; a file that is already gone is not an error.
    public static func remove(_ path: String) throws(FileError) {
        if unlink(path) != 0 && errno != ENOENT { throw FileError(path: path, errno: errno) }
    }

    /// Creates `path` and missing parents with mode 0700.
    public static func makeDirectories(_ path: String) throws(FileError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/\(part)"
            if mkdir(current, 0o700) != 0 && errno != EEXIST { throw FileError(path: current, errno: errno) }
        }
    }

    /// The owner's uid of `path`, or nil when it does not exist.
    public static func owner(_ path: String) throws(FileError) -> uid_t? {
        var st = stat()
        if stat(path, &st) != 0 {
            if errno == ENOENT { return nil }
            throw FileError(path: path, errno: errno)
        }
        return st.st_uid
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func basename(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}

/// An exclusive advisory lock on a file, held until `unlock` or the process ends.
/// The corresponding C function is `flock`.
public final class FileLock {
    let fd: Int32

    /// With `wait` false, a lock held elsewhere fails at once with EWOULDBLOCK.
    public init(_ path: String, wait: Bool = true) throws(FileError) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError(path: path, errno: errno) }
        while flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let e = errno
            close(fd)
            throw FileError(path: path, errno: e)
        }
    }

    deinit { close(fd) }

    /// Replaces the lock file's text (say, the holder's pid, for whoever finds it locked).
    public func record(_ text: String) {
        ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
    }
}

@available(*, unavailable)
extension FileLock: Sendable {}
