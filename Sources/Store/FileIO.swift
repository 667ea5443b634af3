import CThread
import Glibc

/// A failed file operation: the path, the system's errno, and what went wrong in words.
public struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var errno: Int32
    /// Set when the words say more than strerror would (a symlink refused, a FIFO, a size limit).
    public var problem: String?

    public init(path: String, errno: Int32, problem: String? = nil) {
        self.path = path
        self.errno = errno
        self.problem = problem
    }

    public var description: String { problem ?? String(cString: strerror(errno)) }

    /// The error for the current errno after `open` with O_NOFOLLOW: ELOOP there means a symlink.
    static func opening(_ path: String, followLinks: Bool) -> FileError {
        let code = Glibc.errno
        if code == ELOOP && !followLinks {
            return FileError(path: path, errno: code, problem: "is a symbolic link; routectl does not follow links for its state")
        }
        return FileError(path: path, errno: code)
    }
}

/// Whole-file reads and writes over the C library, so that routectl starts without Foundation.
/// Every read is bounded and refuses what is not a regular file, so a FIFO, a device or a huge file
/// in a file's place is an error, never a hang or unbounded memory.
public enum FileIO {
    /// The most a state file may hold; routectl's own are a few hundred bytes.
    public static let stateLimit = 1 << 20
    /// The most a `--snapshot` dump may hold (500 sinks dump to about 2 MiB).
    public static let snapshotLimit = 64 << 20

    /// The file's bytes, at most `limit` of them. Without `followLinks` a symlink is refused
    /// (ELOOP). The corresponding C functions are `open`, `fstat` and `read`.
    public static func read(_ path: String, limit: Int = stateLimit, followLinks: Bool = false) throws(FileError) -> [UInt8] {
        // O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one.
        let flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW)
        let fd = Syscall.retrying { open(path, flags) }
        guard fd >= 0 else { throw FileError.opening(path, followLinks: followLinks) }
        defer { close(fd) }
        let size = try requireRegularFile(fd, path)
        guard size <= limit else { throw tooLarge(path, limit) }
        // Read into a buffer of the size fstat gave, one byte past it: a read that fills that byte is a
        // file that grew or a /proc file (size 0), read on in larger steps, one byte past the limit at most.
        var bytes = [UInt8](repeating: 0, count: min(size, limit) + 1)
        var count = 0
        while true {
            if count == bytes.count {
                guard count <= limit else { throw tooLarge(path, limit) }
                bytes += repeatElement(0, count: min(max(count, 4096), limit + 1 - count))
            }
            let n = bytes.withUnsafeMutableBytes { buffer in
                Syscall.retrying { Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count) }
            }
            if n < 0 { throw FileError(path: path, errno: errno) }
            if n == 0 {
                bytes.removeSubrange(count...)
                return bytes
            }
            count += n
        }
    }

    /// The size of the open file; anything but a regular file (a FIFO, a device, a directory) is an error.
    static func requireRegularFile(_ fd: Int32, _ path: String) throws(FileError) -> Int {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileError(path: path, errno: errno) }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw FileError(path: path, errno: EINVAL, problem: "not a regular file (\(kind(of: st.st_mode)))")
        }
        return Int(st.st_size)
    }

    static func tooLarge(_ path: String, _ limit: Int) -> FileError {
        FileError(path: path, errno: EFBIG, problem: "too large: more than \(limit >> 10) KiB")
    }

    static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFDIR: return "a directory"
        case S_IFSOCK: return "a socket"
        case S_IFLNK: return "a symbolic link"
        default: return "mode \(String(mode, radix: 8))"
        }
    }
}

extension FileIO {
    /// Replaces `path` with `bytes` atomically: a temporary file in the same directory, fsync, rename,
    /// fsync of the directory. Readers see the old file or the new one, never a mix. A symlink at
    /// `path` is replaced, never followed (rename does not follow it). `durable` false skips the two
    /// fsyncs, for files that cannot outlive a reboot anyway (the runtime directory): the rename
    /// alone keeps them atomic, and a crash of routectl loses nothing the page cache holds.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], durable: Bool = true) throws(FileError) {
        let dir = directory(of: path)
        var template = Array("\(dir)/.\(basename(of: path)).XXXXXX".utf8CString)
        // mkstemp creates the file 0600 with O_EXCL: nothing of another's is opened.
        let fd = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return -1 }
            return Syscall.retrying { mkstemp(base) }
        }
        guard fd >= 0 else { throw FileError(path: path, errno: errno) }
        let temp = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(temp) }
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                Syscall.retrying { Glibc.write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset) }
            }
            if n < 0 { throw FileError(path: path, errno: errno) }
            offset += n
        }
        guard !durable || Syscall.retrying({ fsync(fd) }) == 0 else { throw FileError(path: path, errno: errno) }
        guard rename(temp, path) == 0 else { throw FileError(path: path, errno: errno) }
        ok = true
        guard durable else { return }
        let dfd = Syscall.retrying { open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if dfd >= 0 {
            _ = Syscall.retrying { fsync(dfd) }
            close(dfd)
        }
    }

    /// Removes `path` (a symlink itself, never its target); a file that is already gone is not an error.
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
    public static func owner(_ path: String) throws(FileError) -> UInt32? {
        try status(path, followLinks: true).map { $0.st_uid }
    }

    /// `stat` (or `lstat` without `followLinks`) of `path`, nil when it does not exist.
    static func status(_ path: String, followLinks: Bool) throws(FileError) -> stat? {
        var st = stat()
        if (followLinks ? stat(path, &st) : lstat(path, &st)) != 0 {
            if errno == ENOENT { return nil }
            throw FileError(path: path, errno: errno)
        }
        return st
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

/// An exclusive advisory lock on a file, held until the value is released or the process ends.
/// The lock file is opened without following a symlink and must be a regular file.
/// The corresponding C function is `flock`.
public final class FileLock {
    let fd: Int32

    /// With `wait` false, a lock held elsewhere fails at once with EWOULDBLOCK.
    public init(_ path: String, wait: Bool = true) throws(FileError) {
        fd = try Self.open(path)
        guard Syscall.retrying({ flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) }) == 0 else {
            let e = errno
            close(fd)
            throw FileError(path: path, errno: e)
        }
    }

    private init(locked fd: Int32) { self.fd = fd }

    /// The lock file, opened without following a link, and a regular file.
    private static func open(_ path: String) throws(FileError) -> Int32 {
        let fd = Syscall.retrying { Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600) }
        guard fd >= 0 else { throw FileError.opening(path, followLinks: false) }
        do {
            _ = try FileIO.requireRegularFile(fd, path)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// The lock, waited for at most `seconds`; nil when another holder kept it that long. The wait
    /// is a blocked flock(2), not a poll (a waiting command or watcher costs no wakeups, and goes the
    /// moment the holder lets go): a timer of this thread's own (SIGEV_THREAD_ID) sends it SIGALRM,
    /// caught by a handler that does nothing, which ends the wait; it ticks again every 50 ms should
    /// the first come before the wait began.
    public static func take(_ path: String, within seconds: Double) throws(FileError) -> FileLock? {
        let fd = try open(path)
        var result = Syscall.retrying { flock(fd, LOCK_EX | LOCK_NB) }
        if result != 0, errno == EWOULDBLOCK, seconds > 0 {
            let deadline = Clock.monotonicSeconds() + seconds
            var handler = sigaction()
            handler.__sigaction_handler.sa_handler = { _ in }
            sigemptyset(&handler.sa_mask)
            handler.sa_flags = 0  // no SA_RESTART: the tick ends the wait with EINTR
            var previous = sigaction()
            sigaction(SIGALRM, &handler, &previous)
            // A thread that blocks signals (a Dispatch worker's) would never see the tick.
            var alarm = sigset_t(), mask = sigset_t()
            sigemptyset(&alarm)
            sigaddset(&alarm, SIGALRM)
            pthread_sigmask(SIG_UNBLOCK, &alarm, &mask)
            var event = sigevent()
            event.sigev_notify = Int32(SIGEV_THREAD_ID)
            event.sigev_signo = SIGALRM
            var timer: timer_t?
            event._sigev_un._tid = routectl_gettid()
            if timer_create(CLOCK_MONOTONIC, &event, &timer) == 0 {
                let whole = Int(seconds), nanos = Int((seconds - Double(whole)) * 1e9)
                var when = itimerspec(it_interval: timespec(tv_sec: 0, tv_nsec: 50_000_000),
                                      it_value: timespec(tv_sec: whole, tv_nsec: max(nanos, whole == 0 ? 1 : 0)))
                timer_settime(timer, 0, &when, nil)
                repeat {
                    result = flock(fd, LOCK_EX)
                } while result != 0 && errno == EINTR && Clock.monotonicSeconds() < deadline
                if result != 0, errno == EINTR { errno = EWOULDBLOCK }
                timer_delete(timer)
            } else {
                // No timer to be had: tried again every 2 ms until the deadline.
                repeat {
                    var pause = timespec(tv_sec: 0, tv_nsec: 2_000_000)
                    _ = nanosleep(&pause, nil)
                    result = Syscall.retrying { flock(fd, LOCK_EX | LOCK_NB) }
                } while result != 0 && errno == EWOULDBLOCK && Clock.monotonicSeconds() < deadline
            }
            let saved = errno
            pthread_sigmask(SIG_SETMASK, &mask, nil)
            sigaction(SIGALRM, &previous, nil)
            errno = saved
        }
        guard result == 0 else {
            let e = errno
            close(fd)
            if e == EWOULDBLOCK { return nil }
            throw FileError(path: path, errno: e)
        }
        return FileLock(locked: fd)
    }

    deinit { close(fd) }

    /// Runs `body` while this lock is held: the lock lives at least until `body` returns, so a caller
    /// needs no `withExtendedLifetime` of its own.
    @discardableResult
    public func hold<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        defer { withExtendedLifetime(self) {} }
        return try body()
    }

    /// Replaces the lock file's text (say, the holder's pid, for whoever finds it locked).
    public func record(_ text: String) {
        ftruncate(fd, 0)
        _ = text.withCString { s in Syscall.retrying { pwrite(fd, s, strlen(s), 0) } }
    }
}

@available(*, unavailable)
extension FileLock: Sendable {}
