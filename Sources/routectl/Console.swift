import Glibc

/// stdout and stderr without Foundation: whole lines, written at once and flushed, so a reader sees
/// each line as soon as it is complete and a closed pipe is an error, not a crash.
enum Console {
    /// The errno of the first write to stdout that failed, 0 while none has.
    nonisolated(unsafe) static var outputErrno: Int32 = 0

    /// Writes `text` to stdout; false when it could not (a closed pipe, a full disk).
    @discardableResult
    static func out(_ text: String) -> Bool {
        let ok = write(text, to: 1)
        if !ok, outputErrno == 0 { outputErrno = errno }
        return ok
    }

    /// Why stdout failed, to be said on stderr (exit 1); nil when it did not, or when its reader
    /// simply went away (`| head`), which ends routectl quietly.
    static var outputFailure: String? {
        guard outputErrno != 0, outputErrno != EPIPE else { return nil }
        return "cannot write to standard output: \(String(cString: strerror(outputErrno)))"
    }

    static func err(_ text: String) { _ = write(text, to: 2) }

    private static func write(_ text: String, to fd: Int32) -> Bool {
        var text = text
        return text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    // A non-blocking stdout that is full is not closed: wait until it drains.
                    if errno == EAGAIN || errno == EWOULDBLOCK {
                        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                        if poll(&ready, 1, -1) >= 0 || errno == EINTR { continue }
                    }
                    return false
                }
                offset += n
            }
            return true
        }
    }

    /// Pads columns to the widest cell of each, two spaces apart; the last column is not padded.
    static func table(_ rows: [[String]], indent: String = "") -> String {
        guard let width = rows.map(\.count).max() else { return "" }
        var widths = [Int](repeating: 0, count: width)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        var out = ""
        for row in rows {
            var line = indent
            for (i, cell) in row.enumerated() {
                line += cell
                if i < row.count - 1 { line += String(repeating: " ", count: widths[i] - cell.count + 2) }
            }
            while line.hasSuffix(" ") { line.removeLast() }
            out += line + "\n"
        }
        return out
    }
}
