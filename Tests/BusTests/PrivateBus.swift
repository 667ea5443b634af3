import Foundation
import Glibc

/// A dbus-daemon of the test's own. Its configuration names no service directory: Debian's callaudiod
/// package installs a D-Bus service file, and a standard session bus would start the real callaudiod
/// for a call to org.mobian_project.CallAudio and make a test pass for the wrong program.
final class PrivateBus {
    let directory: URL
    let address: String
    private let daemon: Process

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("routectl-bus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config = directory.appendingPathComponent("bus.conf")
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory.path)/socket</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.write(to: config, atomically: true, encoding: .utf8)
        daemon = Process()
        daemon.executableURL = try Tools.path("dbus-daemon")
        daemon.arguments = ["--config-file=\(config.path)", "--nofork", "--print-address=1"]
        let out = Pipe()
        daemon.standardOutput = out
        // Its complaints (a raised fd limit refused, without root) go to a file, quoted if it fails.
        let log = directory.appendingPathComponent("dbus-daemon.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        daemon.standardError = try FileHandle(forWritingTo: log)
        try daemon.run()
        // The address is printed once the daemon listens: the bus is usable from then on.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty {
                let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw ToolError("dbus-daemon ended before printing its address: \(said)")
            }
            printed.append(chunk)
        }
        address = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Ends the daemon now (the service then loses its connection). SIGKILL, because a child of
    /// Foundation's Process on Linux starts with the spawning thread's signal mask, SIGTERM blocked.
    func stop() {
        guard daemon.isRunning else { return }
        kill(daemon.processIdentifier, SIGKILL)
        daemon.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

struct ToolError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
