import Glibc
import Routing

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

    /// Pads columns to the widest cell of each, two spaces apart, by display width (a CJK character
    /// takes two columns, a combining mark none); the last column is not padded and, on a terminal,
    /// is cut to its width with an ellipsis.
    static func table(_ rows: [[String]], indent: String = "") -> String {
        // Descriptions come from devices: their control characters are escaped, as watch does.
        let rows = rows.map { $0.map(Events.printable) }
        // A closure, not the key path `\.count`: that is built at run time (~40,000 instructions).
        guard let width = rows.map({ $0.count }).max() else { return "" }
        let cellWidths = rows.map { $0.map(displayWidth) }
        var widths = [Int](repeating: 0, count: width)
        for row in cellWidths { for (i, w) in row.enumerated() { widths[i] = max(widths[i], w) } }
        let limit = terminalColumns()
        let indentWidth = displayWidth(indent)
        // Written into one string sized up front: line by line, the appends regrew it ~75 times.
        var out = ""
        out.reserveCapacity(rows.count * (indent.utf8.count + widths.reduce(0, +) + 2 * width + 1))
        for (row, cells) in rows.enumerated() {
            out += indent
            var used = indentWidth
            for (i, cell) in cells.enumerated() {
                if i == cells.count - 1 {
                    out += limit.map { truncated(cell, to: max(8, $0 - used)) } ?? cell
                } else {
                    let pad = widths[i] - cellWidths[row][i] + 2
                    out += cell
                    out += String(repeating: " ", count: pad)
                    used += cellWidths[row][i] + pad
                }
            }
            while out.hasSuffix(" ") { out.removeLast() }
            out += "\n"
        }
        return out
    }

    /// Columns a string takes on a terminal: wide East Asian characters two, combining marks and
    /// zero-width characters none, the rest one.
    static func displayWidth(_ text: String) -> Int {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text.utf8.count }
        return text.unicodeScalars.reduce(0) { $0 + width(of: $1) }
    }

    static func width(of scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v == 0x200B || (0x0300...0x036F).contains(v) || (0x1AB0...0x1AFF).contains(v) || (0x20D0...0x20FF).contains(v)
            || (0xFE00...0xFE0F).contains(v) || v == 0xFEFF {
            return 0
        }
        if (0x1100...0x115F).contains(v) || (0x2E80...0xA4CF).contains(v) || (0xAC00...0xD7A3).contains(v)
            || (0xF900...0xFAFF).contains(v) || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
            || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1F64F).contains(v) || (0x1F900...0x1F9FF).contains(v)
            || (0x20000...0x3FFFD).contains(v) {
            return 2
        }
        return 1
    }

    /// `text` cut to `columns` display columns, ending in an ellipsis when it was longer.
    static func truncated(_ text: String, to columns: Int) -> String {
        guard displayWidth(text) > columns else { return text }
        var out = ""
        var used = 0
        for character in text {
            let w = displayWidth(String(character))
            if used + w > columns - 1 { break }
            out.append(character)
            used += w
        }
        return out + "…"
    }

    /// The terminal's width when stdout is one; nil for pipes and files (scripts get whole lines).
    static func terminalColumns() -> Int? {
        guard isatty(1) == 1 else { return nil }
        var size = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}
