import Bus
import Foundation
import Glibc
import Testing

/// Who owns which name, and what happens to calls and the service when things go away.
@Suite(.serialized) struct OwnershipTests {
    @Test func callaudiodRunningLeavesTheOwnInterfaceServed() throws {
        let bus = try PrivateBus()
        let holder = try NameHolder(bus, name: BusService.callAudioName)
        let service = try BusService(address: bus.address, callAudio: true)
        #expect(!service.ownsCallAudio)
        #expect(service.callAudioOwner == holder.uniqueName)
        #expect(try owner(of: BusService.callAudioName, bus) == holder.uniqueName)

        // routectl's own interface works as ever.
        let result = try run("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                        BusService.interface, "Clear"], serving: service) { $0.reply(route: "speaker") }
        #expect(result.status == 0 && result.stdout == "s \"speaker\"\n", "\(result)")

        // The drop-in's object is not served, and its properties never change on the bus.
        let introspected = try run("busctl", ["--address=\(bus.address)", "introspect", "--xml-interface", BusService.name,
                                              BusService.callAudioPath], serving: service)
        #expect(!introspected.stdout.contains("org.mobian_project.CallAudio"), "\(introspected)")
        let monitor = try BusMonitor(bus)
        service.publish(.unknown)
        service.publish(BusState(route: "speaker", target: "speaker", override: "", call: true, micMuted: false,
                                 audioMode: 1, speakerState: 1, micState: 1))
        let changed = try monitor.messagesSinceLastMark(serving: service).signals("PropertiesChanged")
        #expect(changed.map(\.path) == [BusService.objectPath])
    }

    @Test func withoutTheDropInOnlyTheOwnNameIsTaken() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: false)
        #expect(!service.ownsCallAudio)
        #expect(service.callAudioOwner == nil)
        #expect(try owner(of: BusService.callAudioName, bus) == nil)
        #expect(try owner(of: BusService.name, bus) != nil)
    }

    @Test func aSecondRoutectlOnTheBusIsTheClearError() throws {
        let bus = try PrivateBus()
        let first = try BusService(address: bus.address, callAudio: true)
        let error = #expect(throws: BusError.self) { _ = try BusService(address: bus.address, callAudio: true) }
        #expect(error?.isNameTaken == true)
        #expect(error?.description == "D-Bus: the name io.github.routectl is already owned (another routectl watch --dbus runs)")
        // The first keeps both names and still answers.
        #expect(first.ownsCallAudio)
        #expect(try owner(of: BusService.callAudioName, bus) == owner(of: BusService.name, bus))
        let result = try run("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                        BusService.interface, "CallEnd"], serving: first) { $0.reply(route: "speaker") }
        #expect(result.stdout == "s \"speaker\"\n", "\(result)")
    }

    @Test func noBusIsAnErrorThatNamesTheAddress() {
        let error = #expect(throws: BusError.self) {
            _ = try BusService(address: "unix:path=/nonexistent/routectl-test-bus", callAudio: true)
        }
        #expect(error?.isNameTaken == false)
        #expect(error?.description.hasPrefix("D-Bus: cannot connect to the bus at unix:path=/nonexistent/routectl-test-bus: ") == true,
                "\(String(describing: error))")
    }

    @Test func aCallDroppedUnansweredGetsAnError() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let result = try run("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                        BusService.interface, "Clear"], serving: service) { call in
            #expect(!call.isAnswered)
        }
        #expect(result.status == 1)
        #expect(result.stderr == "Call failed: routectl stopped before answering\n", "\(result.stderr)")
    }

    @Test func callsStillQueuedWhenTheServiceGoesGetAnError() throws {
        let bus = try PrivateBus()
        var service: BusService? = try BusService(address: bus.address, callAudio: true)
        let client = try Client("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                           BusService.interface, "CallStart", "b", "true"])
        let deadline = Date().addingTimeInterval(10)
        while let live = service, !pump(live, milliseconds: 20) {
            #expect(Date() < deadline, "the call never arrived")
            if Date() > deadline { break }
        }
        service = nil
        let result = try client.wait()
        #expect(result.status == 1)
        #expect(result.stderr == "Call failed: routectl stopped before answering\n", "\(result.stderr)")
    }

    @Test func theBusGoingAwayIsReportedOnceAndStopsThePolling() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        service.publish(.unknown)
        #expect(service.fd >= 0)
        bus.stop()
        let deadline = Date().addingTimeInterval(5)
        while !pump(service, milliseconds: 50), Date() < deadline {}
        #expect(service.lostError?.description.hasPrefix("D-Bus: the connection to the bus was lost") == true,
                "\(String(describing: service.lostError))")
        #expect(service.fd == -1)
        #expect(service.pollEvents == 0)
        #expect(service.timeoutMicroseconds == nil)
        #expect(!service.process())
        // Nothing to send to any more: no crash, no error.
        service.publish(OwnInterfaceTests.speakerState)
        service.routeChanged(route: "speaker", previous: "unknown", reason: "test")
    }

    /// The bus's GetNameOwner, nil when the name has no owner.
    private func owner(of name: String, _ bus: PrivateBus) throws -> String? {
        let result = try run("busctl", ["--address=\(bus.address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                        "org.freedesktop.DBus", "GetNameOwner", "s", name])
        guard result.status == 0 else { return nil }
        // s ":1.4"
        return result.stdout.split(separator: "\"").dropFirst().first.map(String.init)
    }
}

/// Another program owning a name: the system's python3 with python3-dbus (a pyenv or venv python
/// lacks it), holding the name until its stdin closes. Stands in for a running callaudiod.
final class NameHolder {
    private let process: Process
    private let input = Pipe()
    let uniqueName: String

    init(_ bus: PrivateBus, name: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import dbus, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            if bus.request_name(sys.argv[2], dbus.bus.NAME_FLAG_DO_NOT_QUEUE) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
                sys.exit("could not own " + sys.argv[2])
            print(bus.get_unique_name(), flush=True)
            sys.stdin.read()
            """, bus.address, name]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw ToolError("python3 could not own \(name)") }
            printed.append(chunk)
        }
        uniqueName = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
