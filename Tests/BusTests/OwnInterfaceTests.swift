import Bus
import Foundation
import Testing

/// routectl's own interface on a private bus, through busctl and gdbus as a status bar would use it.
@Suite(.serialized) struct OwnInterfaceTests {
    static let speakerState = BusState(route: "speaker", target: "speaker", override: "", call: false, micMuted: false,
                                       audioMode: 0, speakerState: 1, micState: 1)

    @Test func introspectionShowsTheDocumentedInterface() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let result = try run("busctl", ["--address=\(bus.address)", "introspect", "--xml-interface",
                                        BusService.name, BusService.objectPath], serving: service)
        #expect(result.status == 0, "\(result.stderr)")
        let served = try InterfaceShape(xml: result.stdout, interface: "io.github.routectl")
        let documented = try InterfaceShape(xml: """
            <node><interface name="io.github.routectl">
              <property name="Route" type="s" access="read"/>
              <property name="Target" type="s" access="read"/>
              <property name="Override" type="s" access="read"/>
              <property name="Call" type="b" access="read"/>
              <property name="MicMuted" type="b" access="read"/>
              <signal name="RouteChanged">
                <arg type="s" name="route"/><arg type="s" name="previous"/><arg type="s" name="reason"/>
              </signal>
              <method name="Set">
                <arg type="s" name="target" direction="in"/><arg type="b" name="force" direction="in"/>
                <arg type="s" name="route" direction="out"/>
              </method>
              <method name="Clear"><arg type="s" name="route" direction="out"/></method>
              <method name="CallStart">
                <arg type="b" name="speaker" direction="in"/><arg type="s" name="route" direction="out"/>
              </method>
              <method name="CallEnd"><arg type="s" name="route" direction="out"/></method>
            </interface></node>
            """, interface: "io.github.routectl")
        #expect(served == documented, "served:\n\(served)\ndocumented:\n\(documented)")
    }

    @Test func propertiesReadWhatWasPublishedAndUnknownBefore() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        #expect(try properties(bus, service) == ["s \"unknown\"", "s \"unknown\"", "s \"\"", "b false", "b false"])
        service.publish(BusState(route: "receiver", target: "earpiece", override: "earpiece", call: true, micMuted: true,
                                 audioMode: 1, speakerState: 0, micState: 0))
        #expect(try properties(bus, service) == ["s \"receiver\"", "s \"earpiece\"", "s \"earpiece\"", "b true", "b true"])
        service.publish(OwnInterfaceTests.speakerState)
        #expect(try properties(bus, service) == ["s \"speaker\"", "s \"speaker\"", "s \"\"", "b false", "b false"])
    }

    private func properties(_ bus: PrivateBus, _ service: BusService) throws -> [String] {
        let result = try run("busctl", ["--address=\(bus.address)", "get-property", BusService.name, BusService.objectPath,
                                        BusService.interface, "Route", "Target", "Override", "Call", "MicMuted"],
                             serving: service)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func propertiesChangedNamesOnlyWhatChangedAndTheFirstPublishIsSilent() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let monitor = try BusMonitor(bus)
        service.publish(OwnInterfaceTests.speakerState)
        #expect(try monitor.messagesSinceLastMark(serving: service).signals("PropertiesChanged").isEmpty)

        var next = OwnInterfaceTests.speakerState
        next.route = "headset"
        next.micState = 0
        service.publish(next)
        service.publish(next)  // the same again: nothing to say
        let changed = try monitor.messagesSinceLastMark(serving: service).signals("PropertiesChanged")
        #expect(changed.count == 2)
        let own = changed.first { $0.path == BusService.objectPath }
        #expect(own?.data.first as? String == "io.github.routectl")
        #expect(own.map { changedValues($0.data) } == ["Route": "headset"])
        let callAudio = changed.first { $0.path == BusService.callAudioPath }
        #expect(callAudio?.data.first as? String == "org.mobian_project.CallAudio")
        #expect(callAudio.map { changedValues($0.data) } == ["MicState": "0"])
    }

    /// PropertiesChanged's changed properties as name → value text.
    private func changedValues(_ data: [Any]) -> [String: String] {
        guard data.count == 3, let changed = data[1] as? [String: Any] else { return [:] }
        return changed.mapValues { variant in "\((variant as? [String: Any])?["data"] ?? "?")" }
    }

    @Test func routeChangedCarriesRoutePreviousAndReason() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: false)
        let monitor = try BusMonitor(bus)
        service.routeChanged(route: "headset", previous: "speaker", reason: "device-connected")
        let signals = try monitor.messagesSinceLastMark(serving: service).signals("RouteChanged")
        #expect(signals.count == 1)
        #expect(signals.first?.path == BusService.objectPath)
        #expect(signals.first?.interface == BusService.interface)
        #expect(signals.first?.data as? [String] == ["headset", "speaker", "device-connected"])
    }

    @Test func methodsAreHeldUntilAnsweredWithTheRouteReadBack() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let cases: [([String], BusRequest, String)] = [
            (["Set", "sb", "earpiece", "true"], .set(target: "earpiece", force: true), "receiver"),
            (["Set", "sb", "bluetooth", "false"], .set(target: "bluetooth", force: false), "bluetooth"),
            (["Clear"], .clear, "speaker"),
            (["CallStart", "b", "true"], .callStart(speaker: true), "speaker"),
            (["CallStart", "b", "false"], .callStart(speaker: false), "receiver"),
            (["CallEnd"], .callEnd, "headset"),
        ]
        for (arguments, request, route) in cases {
            var received: [BusRequest] = []
            let result = try run("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                            BusService.interface] + arguments, serving: service) { call in
                received.append(call.request)
                call.reply(route: route)
            }
            #expect(received == [request])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "s \"\(route)\"\n")
        }
    }

    @Test func aFailureIsTheErrorTheOwnerNames() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: false)
        let result = try run("gdbus", ["call", "--address", bus.address, "--dest", BusService.name, "--object-path",
                                       BusService.objectPath, "--method", "io.github.routectl.Set", "bluetooth", "false"],
                             serving: service) { call in
            call.fail(name: "io.github.routectl.Error.Failed", message: "no Bluetooth output")
        }
        #expect(result.status == 1)
        #expect(result.stderr.contains("GDBus.Error:io.github.routectl.Error.Failed: no Bluetooth output"), "\(result.stderr)")
    }

    @Test func badArgumentsAreInvalidArgsAndQueueNothing() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let calls: [(String, [String])] = [
            ("io.github.routectl.Set", ["loud", "false"]),
            ("io.github.routectl.Set", ["Speaker", "false"]),  // words are lower case, as the Route property spells them
            ("org.mobian_project.CallAudio.SelectMode", ["2"]),
        ]
        for (method, arguments) in calls {
            let path = method.hasPrefix("io.") ? BusService.objectPath : BusService.callAudioPath
            let name = method.hasPrefix("io.") ? BusService.name : BusService.callAudioName
            var queued = 0
            let result = try run("gdbus", ["call", "--address", bus.address, "--dest", name, "--object-path", path,
                                           "--method", method] + arguments, serving: service) { call in
                queued += 1
                call.fail(name: "org.freedesktop.DBus.Error.Failed", message: "queued")
            }
            #expect(queued == 0)
            #expect(result.status == 1)
            #expect(result.stderr.contains("GDBus.Error:org.freedesktop.DBus.Error.InvalidArgs: "), "\(method): \(result.stderr)")
        }
        // A wrong signature never reaches routectl: sd-bus checks it against the vtable.
        let result = try run("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                        BusService.interface, "Set", "s", "speaker"], serving: service) { _ in
            Issue.record("a call with a wrong signature was queued")
        }
        #expect(result.status == 1)
    }
}
