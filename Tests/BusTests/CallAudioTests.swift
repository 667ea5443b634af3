import Bus
import Foundation
import Testing

/// The callaudiod drop-in, driven by callaudiod's own client: `callaudiocli` (libcallaudio, a gdbus
/// proxy that reads the properties with GetAll when it starts and waits for each method's reply).
@Suite(.serialized) struct CallAudioTests {
    /// callaudiod's interface as it ships it (data/org.mobian_project.CallAudio.xml, installed by the
    /// callaudiod package): the drop-in serves exactly that, argument names included.
    @Test func introspectionMatchesCallaudiodsXML() throws {
        let installed = "/usr/share/dbus-1/interfaces/org.mobian_project.CallAudio.xml"
        let xml = try String(contentsOfFile: installed, encoding: .utf8)  // missing: make deps installs callaudiod
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        #expect(service.ownsCallAudio)
        #expect(service.callAudioOwner == nil)
        let result = try run("busctl", ["--address=\(bus.address)", "introspect", "--xml-interface",
                                        BusService.callAudioName, BusService.callAudioPath], serving: service)
        #expect(result.status == 0, "\(result.stderr)")
        let served = try InterfaceShape(xml: result.stdout, interface: "org.mobian_project.CallAudio")
        let shipped = try InterfaceShape(xml: xml, interface: "org.mobian_project.CallAudio")
        #expect(served == shipped, "served:\n\(served)\nshipped:\n\(shipped)")
        #expect(shipped.members.count == 6)
    }

    @Test func statusPrintsThePublishedStateAndUnknownBefore() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        #expect(try status(bus, service) == """
            Selected mode: CALL_AUDIO_MODE_UNKNOWN
            Speaker enabled: CALL_AUDIO_SPEAKER_UNKNOWN
            Mic muted: CALL_AUDIO_MIC_UNKNOWN

            """)
        service.publish(BusState(route: "speaker", target: "speaker", override: "speaker", call: true, micMuted: false,
                                 audioMode: 1, speakerState: 1, micState: 1))
        // "Mic muted" prints MicState, whose ON means the mic is live: callaudiocli's label, not ours.
        #expect(try status(bus, service) == """
            Selected mode: CALL_AUDIO_MODE_CALL
            Speaker enabled: CALL_AUDIO_SPEAKER_ON
            Mic muted: CALL_AUDIO_MIC_ON

            """)
        service.publish(BusState(route: "receiver", target: "earpiece", override: "", call: false, micMuted: true,
                                 audioMode: 0, speakerState: 0, micState: 0))
        #expect(try status(bus, service) == """
            Selected mode: CALL_AUDIO_MODE_DEFAULT
            Speaker enabled: CALL_AUDIO_SPEAKER_OFF
            Mic muted: CALL_AUDIO_MIC_OFF

            """)
    }

    private func status(_ bus: PrivateBus, _ service: BusService) throws -> String {
        let result = try run("callaudiocli", ["-S"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address], serving: service)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    @Test func eachOptionIsOneCallAnsweredBySuccess() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let cases: [([String], BusRequest)] = [
            (["-m", "1"], .selectMode(1)), (["-m", "0"], .selectMode(0)),
            (["-s", "1"], .enableSpeaker(true)), (["-s", "0"], .enableSpeaker(false)),
            (["-u", "1"], .muteMic(true)), (["-u", "0"], .muteMic(false)),
        ]
        for (options, request) in cases {
            var received: [BusRequest] = []
            let result = try callaudiocli(options, bus, service) { call in
                received.append(call.request)
                call.reply(success: true)
            }
            #expect(received == [request], "\(options)")
            #expect(result.status == 0, "\(options): \(result.stderr)")
            #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(options): \(result)")
        }
        // A mode other than 0 or 1 is not sent at all, and nothing is printed.
        let result = try callaudiocli(["-m", "2"], bus, service) { call in
            Issue.record("callaudiocli -m 2 sent \(call.request)")
            call.reply(success: false)
        }
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result)")
    }

    @Test func unsuccessfulOrFailedCallsExitOneWithLibcallaudiosWarning() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        var result = try callaudiocli(["-s", "0"], bus, service) { $0.reply(success: false) }
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("libcallaudio-WARNING **: "), "\(result.stderr)")
        #expect(result.stderr.contains(": EnableSpeaker (disable) unsuccessful\n"), "\(result.stderr)")

        result = try callaudiocli(["-u", "1"], bus, service) {
            $0.fail(name: "io.github.routectl.Error.Failed", message: "no microphone")
        }
        #expect(result.status == 1)
        #expect(result.stderr.contains(
            ": MuteMic DBus method invocation failed: GDBus.Error:io.github.routectl.Error.Failed: no microphone\n"),
                "\(result.stderr)")

        result = try callaudiocli(["-m", "1"], bus, service) { $0.reply(success: false) }
        #expect(result.status == 1)
        #expect(result.stderr.contains(": SelectMode (1) unsuccessful\n"), "\(result.stderr)")
    }

    /// With an action, `-S` prints what the proxy read when callaudiocli started: it never runs a main
    /// loop, so the PropertiesChanged the action caused is not seen. The status is one call behind.
    @Test func statusWithAnActionIsTheStateBeforeIt() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        let before = BusState(route: "speaker", target: "speaker", override: "", call: false, micMuted: false,
                              audioMode: 0, speakerState: 1, micState: 1)
        service.publish(before)
        let result = try callaudiocli(["-m", "1", "-S"], bus, service) { call in
            var after = before
            after.audioMode = 1
            service.publish(after)
            call.reply(success: true)
        }
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("Selected mode: CALL_AUDIO_MODE_DEFAULT\n"), "\(result.stdout)")
        #expect(try callaudiocli(["-S"], bus, service) { _ in }.stdout.hasPrefix("Selected mode: CALL_AUDIO_MODE_CALL\n"))
    }

    private func callaudiocli(_ options: [String], _ bus: PrivateBus, _ service: BusService,
                              answer: (PendingCall) -> Void) throws -> ToolResult {
        try run("callaudiocli", options, environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address], serving: service,
                answer: answer)
    }
}
