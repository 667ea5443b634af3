import CPulse
import Glibc
@testable import Pulse
import Routing
import Testing

/// A source over a pipe: readable input is work for the owner, as a D-Bus method call is.
private final class PipeSource: LoopSource {
    let readEnd: Int32
    var writeEnd: Int32
    var fd: Int32
    var pollEvents = Int16(POLLIN)
    var timeoutMicroseconds: UInt64?
    var processed = 0
    var received = 0

    init() {
        var ends: [Int32] = [0, 0]
        _ = pipe(&ends)
        _ = fcntl(ends[0], F_SETFL, O_NONBLOCK)
        readEnd = ends[0]
        writeEnd = ends[1]
        fd = readEnd
    }

    /// Reads what is there; a timeout that is due is spent, as sd-bus's is once processed.
    func process() -> Bool {
        processed += 1
        if let due = timeoutMicroseconds, due <= UInt64(Deadline.now()) { timeoutMicroseconds = nil }
        var buffer = [UInt8](repeating: 0, count: 64)
        var got = 0
        while true {
            let n = read(readEnd, &buffer, buffer.count)
            if n <= 0 { break }
            got += n
        }
        received += got
        return got > 0
    }

    func send() { _ = write(writeEnd, "x", 1) }

    /// The writer goes: the read end then reports a hang-up for ever, whatever it is polled for.
    func closeWriter() {
        close(writeEnd)
        writeEnd = -1
    }

    deinit {
        close(readEnd)
        if writeEnd >= 0 { close(writeEnd) }
    }
}

/// The main loop's side of `PulseConnection.attach`, on a bare `pa_mainloop` (no server needed).
@Suite struct LoopSourceTests {
    /// Runs the loop until `done` holds or `seconds` pass; true when `done` held.
    private func iterate(_ loop: OpaquePointer, seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = Deadline(seconds: seconds)
        while !done() {
            guard deadline.remainingMicroseconds > 0 else { return false }
            _ = pa_mainloop_prepare(loop, Int32(clamping: min(deadline.remainingMicroseconds, 20_000)))
            _ = pa_mainloop_poll(loop)
            _ = pa_mainloop_dispatch(loop)
        }
        return true
    }

    @Test func inputIsProcessedAndCountedAsWork() {
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        defer { sources.detachAll() }
        let source = PipeSource()
        sources.attach(source)
        sources.attach(source)  // once is enough
        #expect(sources.entries.count == 1)
        #expect(source.processed == 1)  // what it held already is taken at once
        #expect(sources.work == 0)

        source.send()
        #expect(iterate(loop, seconds: 5) { sources.work == 1 })
        #expect(source.received == 1)
        source.send()
        source.send()
        #expect(iterate(loop, seconds: 5) { source.received == 3 })
        #expect(sources.work == 2)

        // Nothing readable: the loop sleeps, it does not call the source.
        let calls = source.processed
        #expect(!iterate(loop, seconds: 0.1) { source.processed > calls })
    }

    @Test func theTimerCallsTheSourceWhenItIsDueAndIsRearmedAfterwards() {
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        defer { sources.detachAll() }
        let source = PipeSource()
        let start = Deadline.now()
        source.timeoutMicroseconds = UInt64(start + 50_000)
        sources.attach(source)
        let calls = source.processed
        #expect(iterate(loop, seconds: 5) { source.processed > calls })
        #expect(Deadline.now() - start >= 45_000)  // not before (the wall-clock conversion's slack)
        #expect(sources.work == 0)

        // After `process` the timer is what the source says then: none, so no more calls.
        #expect(source.timeoutMicroseconds == nil)
        let after = source.processed
        #expect(!iterate(loop, seconds: 0.15) { source.processed > after })
    }

    /// What `waitForChanges` asks before each poll: each batch of work wakes it once, and a source
    /// that changed its mind outside `process` (a reply queued, a timer set) is polled for that now.
    @Test func workIsTakenOnceAndTheSourcesAreRearmedFirst() {
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        defer { sources.detachAll() }
        let source = PipeSource()
        sources.attach(source)
        #expect(!sources.takeWork())
        source.send()
        #expect(iterate(loop, seconds: 5) { sources.work == 1 })
        #expect(sources.takeWork())
        #expect(!sources.takeWork())

        source.timeoutMicroseconds = UInt64(Deadline.now())
        let calls = source.processed
        #expect(!iterate(loop, seconds: 0.05) { source.processed > calls })  // the loop does not know yet
        #expect(!sources.takeWork())
        #expect(iterate(loop, seconds: 5) { source.processed > calls })
    }

    @Test func aDeadSourceIsNoLongerPolled() {
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        defer { sources.detachAll() }
        let source = PipeSource()
        sources.attach(source)
        source.closeWriter()
        source.fd = -1
        sources.rearmAll()
        let calls = source.processed
        #expect(!iterate(loop, seconds: 0.1) { source.processed > calls })
        #expect(sources.entries.first?.io == nil)
    }

    @Test func detachingStopsTheCalls() {
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        let source = PipeSource()
        sources.attach(source)
        sources.detach(source)
        #expect(sources.entries.isEmpty)
        source.send()
        let calls = source.processed
        #expect(!iterate(loop, seconds: 0.1) { source.processed > calls })
    }

    @Test func pollEventsMapToTheMainLoopsFlags() {
        #expect(AttachedSources.ioFlags(Int16(POLLIN)) == PA_IO_EVENT_INPUT)
        #expect(AttachedSources.ioFlags(Int16(POLLOUT)) == PA_IO_EVENT_OUTPUT)
        #expect(AttachedSources.ioFlags(Int16(POLLIN | POLLOUT)).rawValue
                == PA_IO_EVENT_INPUT.rawValue | PA_IO_EVENT_OUTPUT.rawValue)
        #expect(AttachedSources.ioFlags(0) == PA_IO_EVENT_NULL)
    }
}
