import Routing
import Testing

/// What real cards do that null sinks never showed: jacks that hide built-in outputs, profiles that
/// hold some ports only, several cards at once (the real-cards issue).
@Suite struct RealCardTests {
    let laptopSink = "alsa_output.pci-0000_00_1f.3.analog-stereo"
    let laptopCard = "alsa_card.pci-0000_00_1f.3"
    let phoneCard = "alsa_card.platform-sound"
    let hifiSink = "alsa_output.platform-sound.HiFi__hw_PinePhone_0__sink"

    /// The laptop with the headphones plugged: the server switched the port, and jack detection marks
    /// the speaker "not available". Its HDMI monitor is asleep.
    func headphonesIn() throws -> Snapshot {
        try fixture("laptop")
            .jack("alsa_output.pci-0000_00_1f.3.hdmi-stereo", "hdmi-output-0", .unavailable)
            .jack(laptopSink, "analog-output-headphones", .available)
            .jack(laptopSink, "analog-output-speaker", .unavailable)
            .routed(to: laptopSink, port: "analog-output-headphones")
    }

    @Test func aSpeakerHiddenByAJackIsStillThere() throws {
        let status = Status(snapshot: try headphonesIn())
        #expect(status.route == .headset)
        #expect(status.isAvailable(.speaker), "speaker: yes with the headphones in")
        let speaker = try #require(status.outputs.first { $0.port == "analog-output-speaker" })
        #expect(speaker.isHiddenByJack)
        #expect(speaker.id == "\(laptopCard):analog-output-speaker")
    }

    @Test func pluggingHeadphonesRemovesNoSpeaker() throws {
        let asleep = try fixture("laptop").jack("alsa_output.pci-0000_00_1f.3.hdmi-stereo", "hdmi-output-0", .unavailable)
        let change = Change(previous: asleep, current: try headphonesIn())
        #expect(change.added.map(\.id) == ["\(laptopCard):analog-output-headphones"])
        #expect(change.removed.isEmpty, "a jack that hides a built-in output is not a device-removed")
        let unplug = Change(previous: try headphonesIn(), current: asleep)
        #expect(unplug.added.isEmpty)
        #expect(unplug.removed.map(\.id) == ["\(laptopCard):analog-output-headphones"])
        #expect(Events.diff(unplug).contains(.route(route: .speaker, previous: .headset, reason: .oldDeviceUnavailable,
                                                    output: unplug.current.output)))
    }

    /// Servers mark the jack in one notification and switch the port in the next: still one arrival,
    /// and the reverse still one departure, whoever switched.
    @Test func aJackMarkedThenSwitchedIsOneArrivalOrDeparture() throws {
        let headphones = "\(laptopCard):analog-output-headphones"
        let empty = try fixture("laptop")
        let marked = empty.jack(laptopSink, "analog-output-headphones", .available).jack(laptopSink, "analog-output-speaker", .unavailable)
        let first = Events.diff(Change(previous: empty, current: marked))
        #expect(first.map(\.type) == ["device-added"])
        let switched = marked.routed(to: laptopSink, port: "analog-output-headphones")
        let second = Change(previous: marked, current: switched)
        #expect(Events.diff(second, recentlyAdded: [headphones]).contains(
            .route(route: .headset, previous: .speaker, reason: .newDeviceAvailable, output: second.current.output)))
        #expect(Events.reason(second, own: nil) == .routeConfigurationChange, "long after the plug it is another client's pick")
        let unmarked = switched.jack(laptopSink, "analog-output-headphones", .unavailable).jack(laptopSink, "analog-output-speaker", .unknown)
        let back = Change(previous: unmarked, current: unmarked.routed(to: laptopSink, port: "analog-output-speaker"))
        #expect(Events.reason(back, own: nil) == .oldDeviceUnavailable)
    }

    @Test func forceReachesTheSpeakerBehindThePluggedJack() throws {
        let s = try headphonesIn()
        let polite = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(polite.actions.isEmpty)
        guard case .externalKeepsPriority = polite.outcome else { Issue.record("\(polite.outcome)"); return }
        let forced = try Planner.plan(s, RouteRequest(target: .speaker, force: true))
        #expect(forced.outcome == .switchTo)
        #expect(forced.actions == [.setSinkPort(sink: laptopSink, port: "analog-output-speaker")])
    }

    @Test func internalAloneSaysNothing() {
        func route(_ name: String, port: Port) -> Route {
            Classifier.route(of: OutputFacts(sinkName: name, driver: "module-alsa-card.c",
                                             properties: ["device.form_factor": "internal", "device.class": "sound"], port: port))
        }
        #expect(route("alsa_output.pci-0000_00_1b.0.analog-stereo",
                      port: Port(name: "analog-output-lineout", description: "Line Out", type: .line)) == .unknown)
        #expect(route("alsa_output.platform-snd_aloop.0.analog-stereo",
                      port: Port(name: "analog-output", description: "Analog Output", type: .analog)) == .unknown)
        #expect(route("alsa_output.pci-0000_00_1f.3.analog-stereo",
                      port: Port(name: "analog-output-speaker", description: "Speakers", type: .unknown)) == .speaker)
    }

    /// A laptop card (the default on its HDMI sink) and a second card with a speaker of its own.
    func twoCards(_ base: Snapshot) -> Snapshot {
        var s = base
        let other = Card(index: 9, name: "alsa_card.usb-dock", driver: "module-alsa-card.c",
                         properties: ["device.description": "Dock"],
                         profiles: [Profile(name: "output:analog-stereo", description: "Analog", sinks: 1, priority: 6500)],
                         activeProfile: "output:analog-stereo",
                         ports: [CardPort(port: Port(name: "analog-output-speaker", description: "Speakers", type: .speaker, priority: 20000),
                                          direction: .output, profiles: ["output:analog-stereo"])])
        s.cards.append(other)
        s.sinks.append(Sink(index: 40, name: "alsa_output.usb-dock.analog-stereo", description: "Dock", card: 9,
                            ports: [Port(name: "analog-output-speaker", description: "Speakers", type: .speaker, priority: 20000)],
                            activePort: "analog-output-speaker"))
        return s
    }

    @Test func theSameCardFirstEvenAgainstABetterPriority() throws {
        let s = twoCards(try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo"))
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(plan.actions.first == .setDefaultSink(laptopSink))
    }

    @Test func anotherCardWhenTheCurrentOneHasNone() throws {
        var s = twoCards(try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo"))
        s.sinks[0].ports.removeAll { $0.name == "analog-output-speaker" }
        s.cards[0].ports.removeAll { $0.name == "analog-output-speaker" }
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(plan.actions.first == .setDefaultSink("alsa_output.usb-dock.analog-stereo"))
    }

    /// Both servers move the default off a sink whose active port a jack marks unavailable while
    /// another sink is usable: forcing the hidden speaker then would only flap, so it is refused.
    @Test func aHiddenSpeakerWithAnAvailableRivalIsRefused() throws {
        let s = twoCards(try headphonesIn())
        #expect(throws: PlanningError.hiddenByJack(output: "\(laptopCard):analog-output-speaker",
                                                   rival: "alsa_card.usb-dock:analog-output-speaker")) {
            try Planner.plan(s, RouteRequest(target: .speaker, device: "\(laptopCard):analog-output-speaker", force: true))
        }
    }

    /// The older-named phone in Voice Call with the earpiece active; the speaker exists in both verbs.
    func phoneInVoiceCall() throws -> Snapshot {
        var s = try fixture("phone-ucm")
        s.cards[0].activeProfile = "Voice Call"
        for i in s.cards[0].ports.indices where s.cards[0].ports[i].name == "[Out] Speaker" {
            s.cards[0].ports[i].profiles = ["HiFi", "Voice Call"]
        }
        s.sinks[0].name = "alsa_output.platform-sound.VoiceCall__hw_PinePhone_0__sink"
        s.sinks[0].ports = [Port(name: "[Out] Earpiece", description: "Earpiece", type: .earpiece, priority: 100),
                            Port(name: "[Out] Speaker", description: "Speaker", type: .speaker, priority: 100)]
        s.sinks[0].activePort = "[Out] Earpiece"
        s.server.defaultSinkName = s.sinks[0].name
        return s
    }

    @Test func speakerAfterTheEarpieceReturnsAnOlderNamedPhoneToHiFi() throws {
        let s = try phoneInVoiceCall()
        #expect(s.route == .receiver)
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(plan.actions == [.setCardProfile(card: phoneCard, profile: "HiFi")], "outside a call a non-call profile")
        #expect(plan.needsReplan)
        let inCall = try Planner.plan(s, RouteRequest(target: .speaker), PlanContext(inCall: true))
        #expect(inCall.actions == [.setSinkPort(sink: s.sinks[0].name, port: "[Out] Speaker")], "speakerphone stays in the call")
    }

    @Test func callProfilesByTheirVerbInBothNamings() {
        #expect(Planner.isCallProfile("Voice Call"))
        #expect(Planner.isCallProfile("Voice Call (Earpiece, Mic)"))
        #expect(Planner.isCallProfile("Voice Call IP"))
        #expect(!Planner.isCallProfile("HiFi (Earpiece, Mic)"))
        #expect(!Planner.isCallProfile("Voice Call(Earpiece)"), "a verb is the name before ' ('")
        #expect(!Planner.isCallProfile("HiFi"))
    }

    /// PulseAudio 17 names: the earpiece active in `HiFi (Earpiece, Mic1)`, the headphones only under
    /// the other HiFi profile, and their jack just plugged.
    @Test func aHeadsetBehindAnotherProfileIsReachedByRuleOne() throws {
        var before = try fixture("phone-ucm-pa17")
        before.cards[0].activeProfile = "HiFi (Earpiece, Mic1)"
        before.sinks[0].name = "alsa_output.platform-sound.HiFi__Earpiece__sink"
        before.sinks[0].ports = [Port(name: "[Out] Earpiece", description: "Earpiece", type: .earpiece, priority: 100)]
        before.sinks[0].activePort = "[Out] Earpiece"
        before.server.defaultSinkName = before.sinks[0].name
        var after = before
        for i in after.cards[0].ports.indices where after.cards[0].ports[i].name == "[Out] Headphones" {
            after.cards[0].ports[i].port.availability = .available
        }
        let change = Change(previous: before, current: after)
        #expect(change.added.map(\.id) == ["\(phoneCard):[Out] Headphones"])
        var state = PolicyState(status: change.previous)
        let decision = Policy.decide(change, state: &state, preferences: Preferences(), muteOnFallback: false)
        let request = try #require(decision.request)
        #expect(request.target == .headset)
        let plan = try Planner.plan(after, request)
        #expect(plan.actions == [.setCardProfile(card: phoneCard, profile: "HiFi (Headphones, Mic1, Mic2, Speaker)")])
        #expect(plan.needsReplan)
    }

    /// Rule 7: routectl's own switch to Voice Call made the HiFi sink vanish and the server put the
    /// default on an idle Bluetooth headset; the replan is judged against the speaker before it.
    @Test func theServersReactionToOwnStepsIsNotTheUsersChoice() throws {
        var s = try phoneInVoiceCall()
        s.sinks[0].activePort = "[Out] Speaker"
        let speakerBefore = try #require(Status(snapshot: try fixture("phone-ucm")).output)
        s.cards.append(Card(index: 60, name: "bluez_card.00_11_22_33_44_55", driver: "module-bluez5-device.c",
                            properties: ["device.bus": "bluetooth"],
                            profiles: [Profile(name: "a2dp_sink", description: "A2DP", sinks: 1, priority: 40)],
                            activeProfile: "a2dp_sink"))
        s.sinks.append(Sink(index: 61, name: "bluez_sink.00_11_22_33_44_55.a2dp_sink", description: "Headset", card: 60,
                            properties: ["device.bus": "bluetooth"]))
        s.server.defaultSinkName = "bluez_sink.00_11_22_33_44_55.a2dp_sink"
        #expect(s.route == .bluetooth)
        let naive = try Planner.plan(s, RouteRequest(target: .earpiece))
        guard case .externalKeepsPriority = naive.outcome else { Issue.record("without context: \(naive.outcome)"); return }
        let plan = try Planner.plan(s, RouteRequest(target: .earpiece), PlanContext(before: speakerBefore))
        #expect(plan.outcome == .switchTo)
        #expect(plan.actions.prefix(2) == [.setSinkPort(sink: s.sinks[0].name, port: "[Out] Earpiece"),
                                            .setDefaultSink(s.sinks[0].name)])
    }

    @Test func onlyTheStreamsOfThePreviousDefaultFollow() throws {
        var s = try fixture("laptop").routed(to: "alsa_output.pci-0000_00_1f.3.hdmi-stereo")
        s.sinkInputs = [SinkInput(index: 12, sink: 2), SinkInput(index: 13, sink: 1, properties: ["media.name": "placed by the user"])]
        let plan = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(plan.actions == [.setDefaultSink(laptopSink), .moveSinkInput(index: 12, sink: laptopSink)],
                "stream 12 follows the route from HDMI; 13 was on the speaker's sink already")
        s.sinkInputs[1].sink = 2
        s.sinkInputs[0].sink = 3
        let moved = try Planner.plan(s, RouteRequest(target: .speaker))
        #expect(moved.actions == [.setDefaultSink(laptopSink), .moveSinkInput(index: 13, sink: laptopSink)],
                "stream 12, placed on another sink by the user, stays there")
    }

    @Test func theHDMIMonitorSleepingFallsBackToTheTarget() throws {
        let hdmi = "alsa_output.pci-0000_00_1f.3.hdmi-stereo"
        let awake = try fixture("laptop").routed(to: hdmi)
        let asleep = awake.jack(hdmi, "hdmi-output-0", .unavailable)
        let change = Change(previous: awake, current: asleep)
        #expect(change.removed.map(\.id) == ["\(laptopCard):hdmi-output-0"])
        var state = PolicyState(status: change.previous)
        let decision = Policy.decide(change, state: &state, preferences: Preferences(defaultTarget: .speaker, override: .speaker),
                                     muteOnFallback: false)
        #expect(decision.request?.target == .speaker)
        #expect(decision.reason == .oldDeviceUnavailable)
        #expect(decision.clearOverride == nil, "HDMI is no external device: the override stands")
    }

    @Test func inputIdsAreCardPorts() throws {
        let status = Status(snapshot: try fixture("phone-ucm-pa17"))
        #expect(status.inputs.map(\.id) == ["\(phoneCard):[In] Mic1", "\(phoneCard):[In] Mic2"])
        let mic2 = try #require(status.inputs.last)
        #expect(Planner.sourceActions(mic2, try fixture("phone-ucm-pa17"))
            == [.setSourcePort(source: "alsa_input.platform-sound.HiFi__hw_PinePhone_0__source", port: "[In] Mic2")])
    }
}
