import Glibc
import Routing

/// Where `watch` writes its events: one flushed line each, never blocking the policy on a slow reader
/// (DESIGN.md §2). On a pipe or socket stdout is made non-blocking; lines that do not fit wait in a
/// bounded queue, and what overflows it is counted and reported as one `lost` event once the reader
/// catches up.
final class EventOutput {
    /// Lines kept for a slow reader before events are dropped.
    static let limit = 1024

    let json: Bool
    private var queue: [[UInt8]] = []
    /// How much of the first queued line is already written.
    private var offset = 0
    private var lost = 0
    private var savedFlags: Int32?
    /// The reader went away or stdout failed: watch ends.
    private(set) var gone = false
    /// Tells the main loop whether to wake us when stdout takes more (while lines wait).
    var wantWritable: ((Bool) -> Void)?

    init(json: Bool) {
        self.json = json
        var st = stat()
        if fstat(1, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO || (st.st_mode & S_IFMT) == S_IFSOCK {
            let flags = fcntl(1, F_GETFL)
            if flags >= 0, fcntl(1, F_SETFL, flags | O_NONBLOCK) == 0 { savedFlags = flags }
        }
    }

    /// Gives the pipe its blocking mode back and writes what is still queued (stdout is shared with
    /// the shell that started routectl).
    func finish() {
        if let savedFlags { _ = fcntl(1, F_SETFL, savedFlags) }
        savedFlags = nil
        flush()
    }

    /// Queues one event and writes what the reader takes now; false once stdout is gone.
    func send(_ event: Event) -> Bool {
        flush()
        guard !gone else { return false }
        if queue.count < Self.limit {
            queue.append(Array(EventRenderer.line(event, json: json).utf8))
        } else {
            lost += 1
        }
        flush()
        return !gone
    }

    /// Writes what the reader takes now (also called when stdout becomes writable).
    func flush() {
        defer { wantWritable?(!gone && (!queue.isEmpty || lost > 0)) }
        while !gone {
            if queue.isEmpty {
                guard lost > 0 else { return }
                queue.append(Array(EventRenderer.line(.lost(count: lost), json: json).utf8))
                lost = 0
            }
            let line = queue[0]
            let n = line.withUnsafeBytes { write(1, $0.baseAddress! + offset, line.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { return }
                if Console.outputErrno == 0 { Console.outputErrno = errno }
                gone = true
                return
            }
            offset += n
            if offset == line.count {
                queue.removeFirst()
                offset = 0
            }
        }
    }
}

@available(*, unavailable)
extension EventOutput: Sendable {}
