import Routing
import Testing

/// The corpus: `routectl dump` of every kind the card simulator makes (sim/make-dumps.sh), on both
/// servers, with the route each must classify to and the plans the real-cards issue fixed.
@Suite struct SimulatedCardTests {
    static let servers = ["pulseaudio", "pipewire"]

    static let expected: [(String, Route)] = [
        ("laptop", .speaker), ("laptop-headphones", .headset), ("desktop", .unknown), ("hdmi", .unknown),
        ("usb-headset", .headset), ("phone", .speaker), ("phone-voicecall", .receiver), ("phone17", .speaker),
        ("phone17-voicecall", .receiver),
    ]

    @Test(arguments: servers)
    func everyKindClassifies(server: String) throws {
        for (kind, route) in Self.expected {
            let status = Status(snapshot: try fixture("sim/\(server)-\(kind)"))
            #expect(status.route == route, "\(server)-\(kind)")
        }
    }

    /// A snapshot put together from `pactl -f json list` and `pactl -f json info` has no card index on
    /// its sinks and sources: each is matched to its card by its properties, and reads as the dump does
    /// (ids, kinds, descriptions). PulseAudio's Bluetooth sinks carry their address in
    /// `device.string` only.
    @Test(arguments: servers)
    func aSnapshotWithoutCardIndexesReadsAsTheDump(server: String) throws {
        for kind in Self.expected.map(\.0) + ["all", "bluetooth-a2dp", "bluetooth-hfp"] {
            let dump = try fixture("sim/\(server)-\(kind)")
            var pactl = dump
            for i in pactl.sinks.indices { pactl.sinks[i].card = nil }
            for i in pactl.sources.indices { pactl.sources[i].card = nil }
            #expect(Status(snapshot: pactl) == Status(snapshot: dump), "\(server)-\(kind)")
        }
    }

    @Test(arguments: servers)
    func theLaptopsSpeakerBehindTheHeadphones(server: String) throws {
        let s = try fixture("sim/\(server)-laptop-headphones")
        let status = Status(snapshot: s)
        #expect(status.isAvailable(.speaker))
        let speaker = try #require(status.outputs.first { $0.id == "alsa_card.sim-laptop:analog-output-speaker" })
        #expect(speaker.isHiddenByJack)
        let plan = try Planner.plan(s, RouteRequest(target: .speaker, force: true))
        #expect(plan.actions == [.setSinkPort(sink: "alsa_output.sim-laptop.analog-stereo", port: "analog-output-speaker")])
    }

    /// With the headphones in, the speaker applies once they are pulled; an earpiece never will on a
    /// laptop, so that is rule 4's fallback (exit 3), the headphones keeping the sound.
    @Test(arguments: servers)
    func aBuiltInTargetUnderTheHeadphonesWaitsOnlyWhenItExists(server: String) throws {
        let s = try fixture("sim/\(server)-laptop-headphones")
        let speaker = try Planner.plan(s, RouteRequest(target: .speaker))
        guard case .externalKeepsPriority = speaker.outcome else { Issue.record("speaker: \(speaker.outcome)"); return }
        let earpiece = try Planner.plan(s, RouteRequest(target: .earpiece))
        #expect(earpiece.outcome == .fellBack(from: .earpiece))
        #expect(earpiece.output?.id == "alsa_card.sim-laptop:analog-output-headphones")
        #expect(earpiece.actions.isEmpty)
        #expect(throws: PlanningError.noSuchDevice("nonexistent-thing", .speaker), "a typo is no preference") {
            try Planner.plan(s, RouteRequest(target: .speaker, device: "nonexistent-thing"))
        }
    }

    @Test(arguments: servers)
    func theDesktopsLineOutIsNoSpeaker(server: String) throws {
        let status = Status(snapshot: try fixture("sim/\(server)-desktop"))
        #expect(!status.isAvailable(.speaker), "device.form_factor=internal and a line-out")
    }

    @Test(arguments: servers)
    func olderNamedPhoneEntersVoiceCallForTheEarpieceAndLeavesItForTheSpeaker(server: String) throws {
        let hifi = try fixture("sim/\(server)-phone")
        #expect(try Planner.plan(hifi, RouteRequest(target: .earpiece)).actions
            == [.setCardProfile(card: "alsa_card.sim-phone", profile: "Voice Call")])
        let call = try fixture("sim/\(server)-phone-voicecall")
        #expect(try Planner.plan(call, RouteRequest(target: .speaker)).actions
            == [.setCardProfile(card: "alsa_card.sim-phone", profile: "HiFi")])
        // In the call the earpiece outranks the speaker (as in real phones' UCM): the server is there already.
        #expect(try Planner.plan(call, RouteRequest(target: .earpiece)).actions.isEmpty)
        #expect(try Planner.plan(call, RouteRequest(target: .speaker), PlanContext(inCall: true)).actions
            == [.setSinkPort(sink: "alsa_output.sim-phone.Voice_Call__hw_Phone__sink", port: "[Out] Speaker")],
                "the speakerphone stays in the call profile")
    }

    @Test(arguments: servers)
    func newerNamedPhoneStaysOutOfTheCallProfiles(server: String) throws {
        let hifi = try fixture("sim/\(server)-phone17")
        #expect(try Planner.plan(hifi, RouteRequest(target: .earpiece)).actions
            == [.setCardProfile(card: "alsa_card.sim-phone17", profile: "HiFi (Earpiece, Mic)")])
        let call = try fixture("sim/\(server)-phone17-voicecall")
        #expect(try Planner.plan(call, RouteRequest(target: .speaker)).actions
            == [.setCardProfile(card: "alsa_card.sim-phone17", profile: "HiFi (Headphones, Mic, Speaker)")])
    }

    @Test(arguments: servers)
    func idsAreTheSameOnBothServers(server: String) throws {
        let ids = Set(Status(snapshot: try fixture("sim/\(server)-all")).outputs.map(\.id))
        #expect(ids.isSuperset(of: ["alsa_card.sim-laptop:analog-output-speaker", "alsa_card.sim-laptop:analog-output-headphones",
                                    "alsa_card.sim-hdmi:hdmi-output-0", "alsa_card.sim-phone:[Out] Earpiece",
                                    "alsa_card.sim-usb-headset:analog-output"]))
    }
}
