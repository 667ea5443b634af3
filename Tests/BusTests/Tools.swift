import Bus
import Foundation
import Glibc
import Testing

/// The real D-Bus clients the service is driven with, each a program with its exit status and output.
enum Tools {
    /// A program on PATH; missing is a failure (never a skip): `make deps` installs them all.
    static func path(_ name: String) throws -> URL {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(dir)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw ToolError("\(name) is not installed (make deps installs it)")
    }
}

struct ToolResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// A client started in the background, its output going to files (so one that prints a lot
/// cannot block on a full pipe while the test waits for it).
final class Client {
    private let process = Process()
    private let scratch: URL
    private let name: String

    init(_ tool: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        name = ([tool] + arguments).joined(separator: " ")
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("routectl-tool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: scratch.appendingPathComponent("out").path, contents: nil)
        _ = FileManager.default.createFile(atPath: scratch.appendingPathComponent("err").path, contents: nil)
        process.executableURL = try Tools.path(tool)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: scratch.appendingPathComponent("out"))
        process.standardError = try FileHandle(forWritingTo: scratch.appendingPathComponent("err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// Waits for the end (at most `timeout` seconds, then kills it and throws).
    func wait(timeout: Double = 15, while pumping: () -> Void = { usleep(10_000) }) throws -> ToolResult {
        let end = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > end {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw ToolError("\(name) did not end within \(timeout) s")
            }
            pumping()
        }
        process.waitUntilExit()
        return ToolResult(status: process.terminationStatus,
                          stdout: String(decoding: try Data(contentsOf: scratch.appendingPathComponent("out")), as: UTF8.self),
                          stderr: String(decoding: try Data(contentsOf: scratch.appendingPathComponent("err")), as: UTF8.self))
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: scratch)
    }
}

/// Runs a client to its end while serving `service` (if given) the way the watch loop does: poll its
/// descriptor, `process`, and hand each queued call to `answer`.
func run(_ tool: String, _ arguments: [String], environment: [String: String] = [:], serving service: BusService? = nil,
         timeout: Double = 15, answer: (PendingCall) -> Void = { _ in }) throws -> ToolResult {
    let client = try Client(tool, arguments, environment: environment)
    guard let service else { return try client.wait(timeout: timeout) }
    return try client.wait(timeout: timeout) {
        pump(service, milliseconds: 20)
        for call in service.takeRequests() { answer(call) }
    }
}

/// One turn of the loop the watch command runs: wait for the service's descriptor (or its timeout,
/// or `milliseconds`), then let it process.
@discardableResult
func pump(_ service: BusService, milliseconds: Int32) -> Bool {
    var wait = milliseconds
    if let at = service.timeoutMicroseconds {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        wait = at <= nowMicroseconds ? 0 : Int32(min(UInt64(milliseconds), (at - nowMicroseconds) / 1000))
    }
    var entry = pollfd(fd: service.fd, events: service.pollEvents, revents: 0)
    _ = poll(&entry, 1, wait)
    return service.process()
}
