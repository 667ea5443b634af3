import Bus
import Foundation
import Glibc

/// `busctl monitor` on the private bus, its messages read as JSON. A marker call (the bus's
/// NameHasOwner with a name of our own) brackets a stretch: the monitor sees messages in the order
/// the bus routes them, so what the service sent before the marker's call is in the stretch.
final class BusMonitor {
    private let process: Process
    private let file: URL
    private let address: String
    private var markers = 0

    init(_ bus: PrivateBus) throws {
        address = bus.address
        file = bus.directory.appendingPathComponent("monitor-\(UUID().uuidString).json")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        process = Process()
        process.executableURL = try Tools.path("busctl")
        process.arguments = ["--address=\(bus.address)", "monitor", "--json=short"]
        process.standardOutput = try FileHandle(forWritingTo: file)
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Monitoring starts once busctl's BecomeMonitor went through: wait until it sees a marker.
        _ = try mark()
    }

    /// Sends a marker and waits until the monitor has seen it; returns its name.
    @discardableResult
    func mark(serving service: BusService? = nil) throws -> String {
        markers += 1
        let name = "routectl.test.mark\(markers)"
        let deadline = Date().addingTimeInterval(10)
        while true {
            _ = try run("busctl", ["--address=\(address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                   "org.freedesktop.DBus", "NameHasOwner", "s", name], serving: service)
            if try lines().contains(where: { isMarker($0, name) }) { return name }
            if Date() > deadline { throw ToolError("busctl monitor did not see \(name)") }
            usleep(50_000)
        }
    }

    /// The messages routed after the last marker and before a new one.
    func messagesSinceLastMark(serving service: BusService? = nil) throws -> [[String: Any]] {
        let start = "routectl.test.mark\(markers)"
        let end = try mark(serving: service)
        var inside = false
        var stretch: [[String: Any]] = []
        for message in try lines() {
            if isMarker(message, start) { inside = true; continue }
            if isMarker(message, end) { break }
            if inside { stretch.append(message) }
        }
        return stretch
    }

    private func isMarker(_ message: [String: Any], _ name: String) -> Bool {
        guard message["member"] as? String == "NameHasOwner", let payload = message["payload"] as? [String: Any],
              let data = payload["data"] as? [Any] else { return false }
        return data.first as? String == name
    }

    private func lines() throws -> [[String: Any]] {
        let text = String(decoding: try Data(contentsOf: file), as: UTF8.self)
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

extension [[String: Any]] {
    /// The signals in the stretch named `member`, as (path, interface, payload data).
    func signals(_ member: String) -> [(path: String, interface: String, data: [Any])] {
        compactMap { message in
            guard message["type"] as? String == "signal", message["member"] as? String == member,
                  let path = message["path"] as? String, let interface = message["interface"] as? String,
                  let payload = message["payload"] as? [String: Any], let data = payload["data"] as? [Any] else { return nil }
            return (path, interface, data)
        }
    }
}
