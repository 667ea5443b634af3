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
