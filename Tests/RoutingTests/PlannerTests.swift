import Routing
import Testing

@Suite struct PlannerTests {
    let laptopSink = "alsa_output.pci-0000_00_1f.3.analog-stereo"

    @Test func laptopJackPluggedHeadsetIsAPortOnTheSameSink() throws {
        let s = try fixture("laptop").jack(laptopSink, "analog-output-headphones", .available)
        let plan = try Planner.plan(s, RouteRequest(target: .headset))
        #expect(plan.outcome == .switchTo)
        #expect(plan.actions == [.setSinkPort(sink: laptopSink, port: "analog-output-headphones")])
        #expect(plan.expectedRoute == .headset)
    }

    @Test func laptopJackEmptyHeadsetFallsBackToSpeaker() throws {
        let s = try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")
        let plan = try Planner.plan(s, RouteRequest(target: .headset))
        #expect(plan.outcome == .fellBack(from: .headset))
        #expect(plan.expectedRoute == .speaker)
        #expect(plan.actions.first == .setDefaultSink(laptopSink))
    }

    @Test func speakerFromHDMIMovesTheDefaultSinkAndTheStreams() throws {
        var s = try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")
        s.sinkInputs[0].sink = 2
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(plan.actions == [.setDefaultSink(laptopSink), .moveSinkInput(index: 12, sink: laptopSink)])
    }

    @Test func alreadyThereNeedsNothing() throws {
        let plan = try Planner.plan(try fixture("laptop"), RouteRequest(target: .speaker))
        #expect(plan.actions.isEmpty)
        #expect(plan.outcome == .switchTo)
    }

    /// The server may have made the sink the default only as a stand-in for the one it remembers: the
    /// policy names it anyway, so that it becomes the remembered one.
    @Test func aClaimNamesTheDefaultEvenWhenItAlreadyIs() throws {
        let s = try fixture("sim/pipewire-bluetooth-a2dp")
        let bluez = "bluez_output.00_11_22_33_44_55.1"
        #expect(s.server.defaultSinkName == bluez)
        let request = RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55")
        #expect(try Planner.plan(s, request, PlanContext()).actions.isEmpty)
        #expect(try Planner.plan(s, request, PlanContext(claimDefault: true)).actions == [.setDefaultSink(bluez)])
    }

    @Test func phoneEarpieceNeedsTheVoiceCallProfile() throws {
        let plan = try Planner.plan(try fixture("phone-ucm"), RouteRequest(target: .earpiece))
        #expect(plan.actions == [.setCardProfile(card: "alsa_card.platform-sound", profile: "Voice Call")])
        #expect(plan.needsReplan)
        #expect(plan.expectedRoute == .receiver)
    }

    @Test func phonePulseAudio17NamingIsChosenByPortsNotNames() throws {
        var s = try fixture("phone-ucm-pa17")
        var plan = try Planner.plan(s, RouteRequest(target: .earpiece))
        #expect(plan.actions == [.setCardProfile(card: "alsa_card.platform-sound", profile: "HiFi (Earpiece, Mic1)")],
                "the best-priority profile whose ports include the earpiece")
        // Only a profile called neither "HiFi" nor "Voice Call" offers it: still found.
        s.cards[0].ports = s.cards[0].ports.map { p in
            var p = p
            if p.name == "[Out] Earpiece" { p.profiles = ["Voice Call (Earpiece, Headset)"] }
            return p
        }
        plan = try Planner.plan(s, RouteRequest(target: .earpiece))
        #expect(plan.actions == [.setCardProfile(card: "alsa_card.platform-sound", profile: "Voice Call (Earpiece, Headset)")])
    }

    @Test func afterTheProfileSwitchThePortIsSetOnTheNewSink() throws {
        var s = try fixture("phone-ucm")
        s.cards[0].activeProfile = "Voice Call"
        s.sinks[0].name = "alsa_output.platform-sound.VoiceCall__hw_PinePhone_0__sink"
        s.server.defaultSinkName = s.sinks[0].name
        s.sinks[0].ports = [Port(name: "[Out] Earpiece", description: "Earpiece", type: .earpiece),
                            Port(name: "[Out] Headphones", description: "Headphones", type: .headphones, availability: .unavailable)]
        s.sinks[0].activePort = "[Out] Headphones"
        let plan = try Planner.plan(s, RouteRequest(target: .earpiece))
        #expect(plan.actions == [.setSinkPort(sink: s.sinks[0].name, port: "[Out] Earpiece")])
        #expect(!plan.needsReplan)
    }

    @Test func builtInTargetDoesNotFightAnExternalDevice() throws {
        var s = try fixture("laptop")
        let bt = try fixture("bluetooth-pulseaudio")
        s.sinks += bt.sinks
        s.cards += bt.cards
        s.server.defaultSinkName = "bluez_sink.00_1B_66_A1_B2_C3.a2dp_sink"
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        guard case let .externalKeepsPriority(output) = plan.outcome else { Issue.record("\(plan.outcome)"); return }
        #expect(output.sink == "bluez_sink.00_1B_66_A1_B2_C3.a2dp_sink")
        #expect(plan.actions.isEmpty)
        // Bluetooth alone, no speaker to apply once it goes: rule 4's fallback, the headset keeping the sound.
        var alone = bt
        alone.server.defaultSinkName = "bluez_sink.00_1B_66_A1_B2_C3.a2dp_sink"
        let none = try Planner.plan(alone, RouteRequest(target: .speaker))
        #expect(none.outcome == .fellBack(from: .speaker))
        #expect(none.output?.sink == "bluez_sink.00_1B_66_A1_B2_C3.a2dp_sink")
    }

    @Test func forceSwitchesAnyway() throws {
        var s = try fixture("laptop")
        s.server.defaultSinkName = nil
        let bt = try fixture("bluetooth-pulseaudio")
        s.sinks += bt.sinks
        s.cards += bt.cards
        s.server.defaultSinkName = bt.sinks[0].name
        let plan = try Planner.plan(s, RouteRequest(target: .speaker, force: true))
        #expect(plan.outcome == .switchTo)
        #expect(plan.actions.contains(.setDefaultSink(laptopSink)))
        #expect(plan.expectedRoute == .speaker)
    }

    @Test func bluetoothInA2DPAndHFP() throws {
        for name in ["bluetooth-pulseaudio", "bluetooth-pipewire"] {
            var s = try fixture(name)
            s.server.defaultSinkName = nil
            let plan = try Planner.plan(s, RouteRequest(target: .bluetooth))
            // The JBL speaker was connected last (highest index): most recent wins.
            #expect(plan.actions.first == .setDefaultSink(s.sinks[2].name), "\(name)")
            let hfp = try Planner.plan(s, RouteRequest(target: .bluetooth, device: s.sinks[1].name))
            #expect(hfp.actions.first == .setDefaultSink(s.sinks[1].name), "\(name): --device picks the HFP headset")
        }
    }

    @Test func bluetoothHeadsetBringsItsMicrophone() throws {
        var s = try fixture("bluetooth-pulseaudio")
        s.server.defaultSinkName = nil
        let plan = try Planner.plan(s, RouteRequest(target: .bluetooth, device: "bluez_sink.F4_4E_FD_11_22_33.handsfree_head_unit"))
        #expect(plan.actions.contains(.setDefaultSource("bluez_source.F4_4E_FD_11_22_33.handsfree_head_unit")))
        // A preferred input that is present beats the headset's own microphone.
        s.sources.append(Source(index: 20, name: "alsa_input.usb-Blue_Yeti-00.analog-stereo", description: "Yeti"))
        let preferred = try Planner.plan(s, RouteRequest(target: .bluetooth, device: "bluez_sink.F4_4E_FD_11_22_33.handsfree_head_unit"),
                                         preferredInput: "alsa_input.usb-Blue_Yeti-00.analog-stereo")
        #expect(preferred.actions.contains(.setDefaultSource("alsa_input.usb-Blue_Yeti-00.analog-stereo")))
        #expect(!preferred.actions.contains(.setDefaultSource("bluez_source.F4_4E_FD_11_22_33.handsfree_head_unit")))
        // An absent preferred input leaves the headset's microphone.
        let absent = try Planner.plan(s, RouteRequest(target: .bluetooth, device: "bluez_sink.F4_4E_FD_11_22_33.handsfree_head_unit"),
                                      preferredInput: "gone")
        #expect(absent.actions.contains(.setDefaultSource("bluez_source.F4_4E_FD_11_22_33.handsfree_head_unit")))
    }

    /// A preferred microphone whose jack is empty is not present (hostile test): switching its source
    /// to that port would have the server move the default input on to a monitor. The route's move
    /// leaves the server's choice (the internal microphone); with the jack in, the preference is applied.
    @Test func aPreferredMicrophoneWhoseJackIsEmptyIsLeftAlone() throws {
        let laptop = try fixture("sim/pulseaudio-laptop")
        let speaker = try #require(Status(snapshot: laptop).outputs.first { $0.route == .speaker })
        let preferred = "alsa_card.sim-laptop:analog-input-mic"
        #expect(Status(snapshot: laptop).inputs.first { $0.id == preferred }?.availability == .unavailable)
        var away = laptop
        away.server.defaultSinkName = nil
        let plan = try Planner.plan(away, .output(speaker), preferredInput: preferred)
        #expect(!plan.actions.contains { if case .setSourcePort = $0 { true } else { false } })
        #expect(!plan.actions.contains { if case .setDefaultSource = $0 { true } else { false } })
        var plugged = away
        let source = try #require(plugged.sources.firstIndex { $0.name == "alsa_input.sim-laptop.analog-stereo" })
        let mic = try #require(plugged.sources[source].ports.firstIndex { $0.name == "analog-input-mic" })
        plugged.sources[source].ports[mic].availability = .available
        let wanted = try Planner.plan(plugged, .output(speaker), preferredInput: preferred)
        #expect(wanted.actions.contains(.setSourcePort(source: "alsa_input.sim-laptop.analog-stereo", port: "analog-input-mic")))
    }

    @Test func twoExternalsConnectedAtDifferentTimesTheLaterWins() throws {
        let usb = try fixture("usb-and-others")
        var s = usb.routed(to: "alsa_output.pci-0000_01_00.1.hdmi-stereo")
        var plan = try Planner.plan(s, RouteRequest(target: .headset))
        #expect(plan.actions.first == .setDefaultSink("alsa_output.usb-Plantronics_Blackwire_3220-00.analog-stereo"),
                "index 16 appeared after index 10")
        s.sinks.removeAll { $0.index == 16 }
        plan = try Planner.plan(s, RouteRequest(target: .headset))
        #expect(plan.actions.first == .setDefaultSink("alsa_output.usb-Logitech_G930_Headset-00.analog-stereo"))
    }

    @Test func noReceiverAtAllDegradesToTheSpeaker() throws {
        let s = try fixture("laptop")
        let plan = try Planner.plan(s, RouteRequest(target: .earpiece))
        #expect(plan.outcome == .fellBack(from: .earpiece))
        #expect(plan.expectedRoute == .speaker)
        #expect(plan.actions.isEmpty, "already on the speaker")
    }

    @Test func anAbsentExternalKindLeavesAnExternalRouteAlone() throws {
        let s = try fixture("bluetooth-pulseaudio")
        let plan = try Planner.plan(s, RouteRequest(target: .headset, device: nil))
        // Every output here is Bluetooth: no wired headset, and the Bluetooth route keeps the sound.
        #expect(plan.outcome == .fellBack(from: .headset))
        #expect(plan.actions.isEmpty)
        #expect(plan.expectedRoute == .bluetooth)
    }

    @Test func unknownDeviceIsAnError() throws {
        #expect(throws: PlanningError.noSuchDevice("nope", .bluetooth)) {
            try Planner.plan(try fixture("bluetooth-pipewire"), RouteRequest(target: .bluetooth, device: "nope"))
        }
    }

    /// An output `devices` lists, named to a target of another kind: said as such, not "no such".
    @Test func aDeviceOfAnotherKindIsSaidToBeOne() throws {
        let hdmi = "alsa_card.sim-hdmi:hdmi-output-0"
        let error = PlanningError.deviceOfAnotherKind(hdmi, .headset, .unknown)
        #expect(throws: error) {
            try Planner.plan(try fixture("sim/pulseaudio-hdmi"), RouteRequest(target: .headset, device: hdmi))
        }
        #expect(error.description == "'\(hdmi)' is an unknown output, not a headset one; set headset --device takes a headset output ('routectl devices' shows each output's kind)")
    }

    @Test func overrideGoesStaleWhenExternalsChange() throws {
        let s = try fixture("bluetooth-pipewire")
        let keys = Status(snapshot: s).externalKeys
        #expect(keys == ["bluez_card.00_1B_66_A1_B2_C3", "bluez_card.30_21_4C_55_66_77", "bluez_card.F4_4E_FD_11_22_33"])
        let record = OverrideRecord(target: .speaker, setAt: 0, externals: keys)
        #expect(record.staleness(currentExternals: keys) == nil)
        #expect(record.staleness(currentExternals: Array(keys.dropLast())) == "'bluez_card.F4_4E_FD_11_22_33' was disconnected")
        #expect(record.staleness(currentExternals: keys + ["usb"]) == "'usb' was connected")
    }
}
