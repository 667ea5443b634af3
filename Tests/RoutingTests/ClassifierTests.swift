import Routing
import Testing

@Suite struct ClassifierTests {
    let laptopSink = "alsa_output.pci-0000_00_1f.3.analog-stereo"

    /// Output ids name their card: a second card of the same kind is another card.
    @Test func anOutputIdNamesItsCard() throws {
        let status = Status(snapshot: try fixture("laptop"))
        let speaker = try #require(status.outputs.first { $0.port == "analog-output-speaker" })
        let card = try #require(speaker.cardName)
        #expect(Output.id(speaker.id, isOn: card))
        #expect(Output.id(card, isOn: card))
        #expect(!Output.id(speaker.id, isOn: String(card.dropLast())))
        #expect(!Output.id(card + "-2:analog-output-speaker", isOn: card))
        #expect(!Output.id(laptopSink, isOn: card))
    }

    @Test func laptopSpeakerWithHeadphoneJackEmpty() throws {
        let s = try fixture("laptop")
        let status = Status(snapshot: s)
        #expect(status.route == .speaker)
        #expect(status.output?.port == "analog-output-speaker")
        #expect(status.isAvailable(.speaker))
        #expect(!status.isAvailable(.headset), "the headphone jack is empty")
        #expect(!status.route.isExternal)
    }

    @Test func laptopHeadphonesPlugged() throws {
        let s = try fixture("laptop")
            .jack(laptopSink, "analog-output-headphones", .available)
            .routed(to: laptopSink, port: "analog-output-headphones")
        let status = Status(snapshot: s)
        #expect(status.route == .headset)
        #expect(status.isAvailable(.headset))
        #expect(status.route.isExternal)
    }

    @Test func laptopHDMIIsUnknown() throws {
        #expect(try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo").route == .unknown)
    }

    @Test func engagedFollowsTheStreamsOnTheRoute() throws {
        let s = try fixture("laptop")
        #expect(Status(snapshot: s).engaged, "Firefox plays on the default sink")
        #expect(!Status(snapshot: s.routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")).engaged)
        #expect(Status(snapshot: s.routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")).otherAudioPlaying)
        var corked = s
        corked.sinkInputs[0].corked = true
        #expect(!Status(snapshot: corked).engaged)
        #expect(!Status(snapshot: corked).otherAudioPlaying)
    }

    @Test func phoneUCMPorts() throws {
        let s = try fixture("phone-ucm")
        let sink = "alsa_output.platform-sound.HiFi__hw_PinePhone_0__sink"
        #expect(s.route == .speaker)
        #expect(s.jack(sink, "[Out] Headphones", .available).routed(to: sink, port: "[Out] Headphones").route == .headset)
        let status = Status(snapshot: s)
        let earpiece = try #require(status.outputs.first { $0.port == "[Out] Earpiece" })
        #expect(earpiece.route == .receiver)
        #expect(earpiece.sink == nil, "the earpiece exists only under another profile")
        #expect(earpiece.profiles == ["Voice Call"])
        #expect(status.isAvailable(.receiver))
    }

    @Test func phoneEarpieceActiveUnderVoiceCall() throws {
        var s = try fixture("phone-ucm")
        s.sinks[0].ports.append(Port(name: "[Out] Earpiece", description: "Earpiece", type: .earpiece))
        s.sinks[0].activePort = "[Out] Earpiece"
        s.cards[0].activeProfile = "Voice Call"
        #expect(s.route == .receiver)
    }

    @Test(arguments: ["bluetooth-pulseaudio", "bluetooth-pipewire"])
    func bluetoothEverywhere(name: String) throws {
        let s = try fixture(name)
        #expect(s.sinks.count == 3)
        for sink in s.sinks {
            #expect(s.routed(to: sink.name).route == .bluetooth, "\(sink.name)")
        }
        let status = Status(snapshot: s)
        #expect(status.isAvailable(.bluetooth))
        #expect(!status.isAvailable(.speaker), "a Bluetooth speaker is not the built-in speaker")
    }

    @Test func bluetoothSpeakerPortTypedSpeakerIsStillBluetooth() throws {
        let s = try fixture("bluetooth-pulseaudio")
        let jbl = try #require(s.sinks.first { $0.description == "JBL Flip 5" })
        #expect(jbl.activePortInfo?.type == .speaker)
        #expect(s.routed(to: jbl.name).route == .bluetooth)
    }

    @Test func usbHeadsetWithGenericAnalogPortIsAHeadsetByItsCardName() throws {
        let s = try fixture("usb-and-others")
        #expect(s.route == .headset)
        #expect(s.routed(to: "alsa_output.usb-Plantronics_Blackwire_3220-00.analog-stereo").route == .headset)
    }

    @Test(arguments: [
        "alsa_output.pci-0000_01_00.1.hdmi-stereo", "alsa_output.pci-0000_00_1b.0.iec958-stereo",
        "alsa_output.pci-0000_00_1b.0.analog-stereo", "null", "combined",
    ])
    func nonPersonalOutputsAreUnknown(sink: String) throws {
        #expect(try fixture("usb-and-others").routed(to: sink).route == .unknown)
    }

    @Test func oldServerWithoutPortTypes() throws {
        let s = try fixture("old-server")
        #expect(s.sinks.allSatisfy { $0.ports.allSatisfy { $0.type == .unknown } })
        let laptop = "alsa_output.pci-0000_00_1f.3.analog-stereo"
        #expect(s.route == .headset)
        #expect(s.routed(to: laptop, port: "analog-output-speaker").route == .speaker)
        #expect(s.routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo").route == .unknown)
        #expect(s.routed(to: "bluez_sink.30_21_4C_55_66_77.a2dp_sink").route == .bluetooth)
        let phone = "alsa_output.platform-sound.HiFi__hw_Librem5__sink"
        #expect(s.routed(to: phone).route == .receiver)
        #expect(s.routed(to: phone, port: "[Out] Speaker").route == .speaker)
        #expect(s.routed(to: phone, port: "[Out] Headphones").route == .headset)
    }

    @Test func noDefaultSinkIsUnknown() throws {
        var s = try fixture("laptop")
        s.server.defaultSinkName = nil
        #expect(s.route == .unknown)
        #expect(Status(snapshot: s).output == nil)
        s.sinks = []
        #expect(s.route == .unknown)
    }

    @Test func unknownPortTypeNumbersAreTolerated() {
        #expect(PortType(number: 2) == .speaker)
        #expect(PortType(number: 22) == .analog)
        #expect(PortType(number: 999) == .unknown)
        let facts = OutputFacts(sinkName: "x", properties: ["device.form_factor": "headphone"],
                                port: Port(name: "p", description: "", type: PortType(rawValue: "Hologram")))
        #expect(Classifier.route(of: facts) == .headset, "an unknown type falls through to the properties")
    }

    @Test(arguments: [
        ("speaker", "device.form_factor=speaker device.bus=pci", Route.speaker),
        ("earpiece", "device.form_factor=handset device.bus=platform", .receiver),
        ("headset", "device.form_factor=headphone device.bus=usb", .headset),
        ("bluetooth", "device.form_factor=headset device.bus=bluetooth device.api=bluez5", .bluetooth),
        ("hdmi", "device.form_factor=tv device.bus=pci", .unknown),
    ])
    func simulatedDevicesOfTheEndToEndTests(name: String, props: String, route: Route) {
        var properties: [String: String] = ["device.class": "abstract"]
        for pair in props.split(separator: " ") {
            let kv = pair.split(separator: "=")
            properties[String(kv[0])] = String(kv[1])
        }
        let facts = OutputFacts(sinkName: name, driver: "module-null-sink.c", properties: properties)
        #expect(Classifier.route(of: facts) == route)
    }

    @Test(arguments: ["pulseaudio", "pipewire"])
    func realPactlListDecodes(server: String) throws {
        let s = try fixture("pactl-list-\(server)")
        #expect(s.server.isPipeWire == (server == "pipewire"))
        let names = Set(s.sinks.map(\.name))
        #expect(names.isSuperset(of: ["speaker", "earpiece", "headset", "bluetooth", "hdmi"]))
        #expect(s.route == .bluetooth)
        let routes = Dictionary(uniqueKeysWithValues: Status(snapshot: s).outputs.map { ($0.sink!, $0.route) })
        #expect(routes["speaker"] == .speaker)
        #expect(routes["earpiece"] == .receiver)
        #expect(routes["headset"] == .headset)
        #expect(routes["hdmi"] == .unknown)
        #expect(Status(snapshot: s).inputs.isEmpty, "null sinks have only monitor sources")
    }
}
