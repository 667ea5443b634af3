import Routing
import Testing

/// A server of null sinks with the properties of DESIGN.md §6, as the end-to-end tests make them.
func simulated(_ sinks: [(String, String)], default defaultSink: String?) -> Snapshot {
    let props: [String: [String: String]] = [
        "speaker": ["device.form_factor": "speaker", "device.bus": "pci"],
        "earpiece": ["device.form_factor": "handset", "device.bus": "platform"],
        "headset": ["device.form_factor": "headphone", "device.bus": "usb"],
        "bluetooth": ["device.form_factor": "headset", "device.bus": "bluetooth", "device.api": "bluez5"],
        "hdmi": ["device.form_factor": "tv", "device.bus": "pci"],
    ]
    return Snapshot(
        server: ServerInfo(name: "pulseaudio", version: "16.1", defaultSinkName: defaultSink),
        sinks: sinks.enumerated().map { i, s in
            Sink(index: UInt32(i), name: s.0, description: s.0, driver: "module-null-sink.c",
                 properties: props[s.1]!.merging(["device.class": "abstract"]) { a, _ in a })
        })
}

/// Runs snapshots through the policy as `watch --apply` does, applying each decision's route.
struct PolicyRun {
    var snapshot: Snapshot
    var state: PolicyState
    var preferences: Preferences

    init(_ snapshot: Snapshot, preferences: Preferences = Preferences()) {
        self.snapshot = snapshot
        self.state = PolicyState(status: Status(snapshot: snapshot))
        self.preferences = preferences
    }

    /// Feeds the next server state; returns the decision and the default sink routectl would then set.
    mutating func next(_ s: Snapshot) throws -> (Decision, String?) {
        let decision = Policy.decide(Change(previous: snapshot, current: s), state: &state, preferences: preferences,
                                     muteOnFallback: false)
        snapshot = s
        if decision.clearOverride != nil { preferences.override = nil }
        guard let request = decision.request else { return (decision, nil) }
        let plan = try Planner.plan(s, request)
        for case let .setDefaultSink(name) in plan.actions { snapshot.server.defaultSinkName = name }
        return (decision, snapshot.server.defaultSinkName)
    }
}

@Suite struct PolicyTests {
    let spk = ("spk", "speaker")
    let bt = ("bt", "bluetooth")
    let hs = ("hs", "headset")

    @Test func plugBluetoothThenHeadsetUnplugHeadsetThenBluetooth() throws {
        var run = PolicyRun(simulated([spk], default: "spk"), preferences: Preferences(override: .speaker))
        var (d, sink) = try run.next(simulated([spk, bt], default: "spk"))
        #expect(sink == "bt")
        #expect(d.reason == .newDeviceAvailable)
        #expect(d.clearOverride == "'bt' was connected")
        (d, sink) = try run.next(simulated([spk, bt, hs], default: "bt"))
        #expect(sink == "hs", "the most recently connected wins")
        (d, sink) = try run.next(simulated([spk, bt], default: "spk"))
        #expect(sink == "bt", "unplugging the headset falls back to the Bluetooth device")
        #expect(d.reason == .oldDeviceUnavailable)
        (d, sink) = try run.next(simulated([spk], default: "spk"))
        #expect(d.request == RouteRequest(target: .speaker, force: true), "then to the default target")
        #expect(sink == "spk")
    }

    @Test func unplugFallsBackToAnEarpieceDefaultOnAPhone() throws {
        let ear = ("ear", "earpiece")
        var run = PolicyRun(simulated([spk, ear, bt], default: "bt"), preferences: Preferences(defaultTarget: .earpiece))
        let (d, sink) = try run.next(simulated([spk, ear], default: "spk"))
        #expect(d.request?.target == .earpiece)
        #expect(sink == "ear")
    }

    @Test func earpieceDefaultOnThePhoneFixtureSwitchesProfile() throws {
        var phone = try fixture("phone-ucm")
        let jack = "alsa_output.platform-sound.HiFi__hw_PinePhone_0__sink"
        let plugged = phone.jack(jack, "[Out] Headphones", .available).routed(to: jack, port: "[Out] Headphones")
        var run = PolicyRun(plugged, preferences: Preferences(defaultTarget: .earpiece))
        phone = phone.routed(to: jack, port: "[Out] Headphones")
        let decision = Policy.decide(Change(previous: plugged, current: phone), state: &run.state,
                                     preferences: run.preferences, muteOnFallback: true)
        #expect(decision.reason == .oldDeviceUnavailable)
        #expect(decision.muteFallback)
        let plan = try Planner.plan(phone, try #require(decision.request))
        #expect(plan.actions == [.setCardProfile(card: "alsa_card.platform-sound", profile: "Voice Call")])
    }

    @Test func headphoneJackOnTheSameSink() throws {
        let laptop = "alsa_output.pci-0000_00_1f.3.analog-stereo"
        let empty = try fixture("laptop")
        let plugged = empty.jack(laptop, "analog-output-headphones", .available)
        let change = Change(previous: empty, current: plugged)
        #expect(change.added.map(\.id) == ["alsa_card.pci-0000_00_1f.3:analog-output-headphones"])
        var state = PolicyState(status: Status(snapshot: empty))
        let d = Policy.decide(change, state: &state, preferences: Preferences(), muteOnFallback: false)
        let plan = try Planner.plan(plugged, try #require(d.request))
        #expect(plan.actions == [.setSinkPort(sink: laptop, port: "analog-output-headphones")])
        let events = Events.diff(change)
        #expect(events.map(\.type) == ["device-added"])
        // PulseAudio switches the port itself: that route change is reported as the new device's.
        let switched = plugged.routed(to: laptop, port: "analog-output-headphones")
        #expect(Events.diff(Change(previous: empty, current: switched)).contains {
            $0 == .route(route: .headset, previous: .speaker, reason: .newDeviceAvailable, output: Status(snapshot: switched).output)
        })
    }

    @Test func a2dpToHFPIsACategoryChange() throws {
        let a2dp = try fixture("bluetooth-pulseaudio")
        var hfp = a2dp
        hfp.cards[0].activeProfile = "handsfree_head_unit"
        hfp.sinks[0].name = "bluez_sink.00_1B_66_A1_B2_C3.handsfree_head_unit"
        hfp.sinks[0].ports = [Port(name: "headphone-output", description: "Headphone", type: .headphones)]
        hfp.server.defaultSinkName = hfp.sinks[0].name
        let change = Change(previous: a2dp, current: hfp)
        let routeEvents = Events.diff(change).compactMap { e -> RouteChangeReason? in
            if case let .route(_, _, reason, _) = e { return reason } else { return nil }
        }
        #expect(routeEvents == [.categoryChange])
        var state = PolicyState(status: Status(snapshot: a2dp))
        #expect(Policy.decide(change, state: &state, preferences: Preferences(), muteOnFallback: false).request == nil,
                "the same device under another profile is not a new device to switch to")
    }

    @Test func anotherClientChangingTheDefaultIsReportedAndRespected() throws {
        let before = simulated([spk, bt], default: "bt")
        let after = simulated([spk, bt], default: "spk")
        let change = Change(previous: before, current: after)
        #expect(Events.diff(change) == [.route(route: .speaker, previous: .bluetooth, reason: .routeConfigurationChange,
                                               output: Status(snapshot: after).output)])
        var state = PolicyState(status: Status(snapshot: before))
        #expect(Policy.decide(change, state: &state, preferences: Preferences(override: .speaker), muteOnFallback: false).isEmpty)
    }

    @Test func aBurstIsOneEvent() throws {
        let before = simulated([spk, bt], default: "spk")
        var after = simulated([spk, bt], default: "bt")
        // What one user action does: the default moves, the stream follows, both sinks change state.
        after.sinkInputs = [SinkInput(index: 7, sink: 1)]
        after.sinks[0].state = "SUSPENDED"
        after.sinks[1].state = "RUNNING"
        var prior = before
        prior.sinkInputs = [SinkInput(index: 7, sink: 0)]
        let events = Events.diff(Change(previous: prior, current: after))
        #expect(events.filter { $0.type == "route" }.count == 1)
        #expect(Events.diff(Change(previous: after, current: after)).isEmpty, "a refetch that finds nothing new says nothing")
    }

    @Test func ownChangesCarryTheirReason() {
        let before = simulated([spk, bt], default: "bt")
        let after = simulated([spk, bt], default: "spk")
        #expect(Events.diff(Change(previous: before, current: after), own: ("spk", .override)).first
            == .route(route: .speaker, previous: .bluetooth, reason: .override, output: Status(snapshot: after).output))
    }

    @Test func theRouteSinkVanishingWithNoReplacement() {
        let before = simulated([spk, ("tv", "hdmi")], default: "tv")
        let after = simulated([spk], default: nil)
        let events = Events.diff(Change(previous: before, current: after))
        #expect(events.contains(.route(route: .unknown, previous: .unknown, reason: .noSuitableRoute, output: nil)))
        var state = PolicyState(status: Status(snapshot: before))
        let d = Policy.decide(Change(previous: before, current: after), state: &state, preferences: Preferences(), muteOnFallback: false)
        #expect(d.request?.target == .speaker)
    }

    @Test func preferredInputReturns() {
        var before = simulated([spk], default: "spk")
        var after = before
        after.sources = [Source(index: 3, name: "usb-mic", description: "USB mic")]
        before.sources = []
        var state = PolicyState(status: Status(snapshot: before))
        let d = Policy.decide(Change(previous: before, current: after), state: &state,
                              preferences: Preferences(preferredInput: "usb-mic"), muteOnFallback: false)
        #expect(d.restoreInput?.id == "usb-mic")
    }

    /// A preferred microphone port is back when its jack is plugged, and not while it is empty (the
    /// server would move the default input on to a monitor).
    @Test func aPreferredMicrophoneReturnsWithItsJack() throws {
        let empty = try fixture("sim/pulseaudio-laptop")
        var plugged = empty
        let source = try #require(plugged.sources.firstIndex { $0.name == "alsa_input.sim-laptop.analog-stereo" })
        let port = try #require(plugged.sources[source].ports.firstIndex { $0.name == "analog-input-mic" })
        plugged.sources[source].ports[port].availability = .available
        let preferences = Preferences(preferredInput: "alsa_card.sim-laptop:analog-input-mic")
        var state = PolicyState(status: Status(snapshot: empty))
        let plug = Policy.decide(Change(previous: empty, current: plugged), state: &state, preferences: preferences, muteOnFallback: false)
        #expect(plug.restoreInput?.id == "alsa_card.sim-laptop:analog-input-mic")
        var gone = empty
        gone.sources.removeAll { $0.name == "alsa_input.sim-laptop.analog-stereo" }
        let back = Policy.decide(Change(previous: gone, current: empty), state: &state, preferences: preferences, muteOnFallback: false)
        #expect(back.restoreInput == nil, "appeared with its jack empty")
    }

    @Test func aDescriptionCannotForgeAnEventLine() {
        let forged = "x\" reason=initial\n00:00:00.000 route speaker\u{1b}[2J\\"
        let line = Events.escapedForLine(forged)
        #expect(!line.contains("\n") && !line.contains("\u{1b}"))
        #expect(line == #"x\" reason=initial\n00:00:00.000 route speaker\x1b[2J\\"#)
        #expect(Events.escapedForLine("Écouteurs WH-1000XM4") == "Écouteurs WH-1000XM4", "printable text is left alone")
    }

    /// Tables and `query` values print a device's description as it is but for its control characters:
    /// a terminal would act on them (hostile test: colour and bell from a sink's description).
    @Test func aDescriptionInATableCannotDriveTheTerminal() {
        #expect(Events.printable("Evil\u{1b}[31mRED\u{07}\"q\"\\\u{85}") == #"Evil\x1b[31mRED\x07"q"\\x85"#)
        #expect(Events.printable("Écouteurs \"WH-1000XM4\"") == "Écouteurs \"WH-1000XM4\"", "printable text is left alone")
        #expect(Events.printable("a\u{9B}31mb") == #"a\x9b31mb"#, "a C1 control alone (CSI) is found too")
    }
}

/// The desktop policy of DESIGN.md §1: the priority list and no stealing by unlisted HDMI outputs.
@Suite struct DesktopPolicyTests {
    let spk = ("spk", "speaker")
    let bt = ("bt", "bluetooth")
    let hs = ("hs", "headset")
    let tv = ("tv", "hdmi")

    @Test func aListedDeviceKeepsTheSoundWhenAnUnlistedOneArrives() throws {
        var run = PolicyRun(simulated([spk, bt], default: "bt"), preferences: Preferences(override: .speaker, priority: ["bt"]))
        var (d, sink) = try run.next(simulated([spk, bt, hs], default: "bt"))
        #expect(d.request == nil && sink == nil, "the unlisted headset ranks below the listed one: nothing to do")
        #expect(d.clearOverride == nil, "it does not change what the rules would pick: the override stays")
        (d, sink) = try run.next(simulated([spk, hs], default: "spk"))
        #expect(sink == "hs", "the listed one goes: the next ranked")
        #expect(d.clearOverride == "'bt' was disconnected")
        (d, sink) = try run.next(simulated([spk, hs, bt], default: "hs"))
        #expect(sink == "bt", "the listed one returns and wins again")
    }

    @Test func kindsRankDevicesOfThatKindMostRecentFirst() {
        let status = Status(snapshot: simulated([spk, hs, bt, ("bt2", "bluetooth")], default: "spk"))
        let state = PolicyState(status: status)
        #expect(Policy.ranked(status, state, priority: ["headset", "bluetooth"]).map(\.id) == ["hs", "bt2", "bt"])
        #expect(Policy.ranked(status, state, priority: []).map(\.id) == ["bt2", "bt", "hs"])
        #expect(Policy.ranked(status, state, priority: ["spk"]).first?.id == "spk", "a listed built-in output ranks too")
        #expect(!Policy.ranked(status, state, priority: ["gone"]).contains { $0.id == "gone" }, "an absent id is skipped")
    }

    @Test func anUnlistedMonitorMadeTheDefaultAsItAppearsIsPutBack() throws {
        var monitor = simulated([spk, tv], default: "tv")
        monitor.sinks[1].properties["device.class"] = "sound"
        var run = PolicyRun(simulated([spk], default: "spk"))
        let (d, sink) = try run.next(monitor)
        #expect(d.reason == .restored)
        #expect(sink == "spk")
        // Listed, it is the user's wish.
        var listed = PolicyRun(simulated([spk], default: "spk"), preferences: Preferences(priority: ["tv"]))
        let (l, s) = try listed.next(monitor)
        #expect(l.reason == .newDeviceAvailable && s == "tv")
    }

    /// `set speaker --force` with headphones plugged puts the sound on the speaker behind the jack; a
    /// monitor waking then is made the default by the server, which will not keep a default whose port
    /// the jack hides beside it. Not left on the monitor: the headphones get the sound, and the
    /// override that cannot be kept goes, saying why.
    @Test func aMonitorWakingBesideASpeakerForcedBehindTheJackGivesTheSoundToTheHeadphones() throws {
        var forced = try fixture("sim/pulseaudio-laptop-headphones")
        forced.sinks[0].activePort = "analog-output-speaker"
        let hdmi = try fixture("sim/pulseaudio-hdmi")
        var woken = forced
        var card = hdmi.cards[0], sink = hdmi.sinks[0]
        card.index = 90
        sink.index = 91
        sink.card = 90
        woken.cards.append(card)
        woken.sinks.append(sink)
        woken.server.defaultSinkName = sink.name
        let before = Status(snapshot: forced)
        #expect(before.output?.route == .speaker && before.output?.isHiddenByJack == true)
        var state = PolicyState(status: before)
        let d = Policy.decide(Change(previous: forced, current: woken), state: &state, preferences: Preferences(override: .speaker),
                              muteOnFallback: false)
        #expect(d.reason == .restored)
        #expect(try Planner.plan(woken, #require(d.request)).output?.route == .headset)
        #expect(d.clearOverride == "'alsa_card.sim-hdmi:hdmi-output-0' appeared; the speaker behind the plugged jack cannot keep the sound beside it")
        // Not hidden, the speaker is where the route goes back to, the override standing.
        var plain = try fixture("sim/pulseaudio-laptop")
        plain.cards.append(card)
        plain.sinks.append(sink)
        plain.server.defaultSinkName = sink.name
        var fresh = PolicyState(status: Status(snapshot: try fixture("sim/pulseaudio-laptop")))
        let back = Policy.decide(Change(previous: try fixture("sim/pulseaudio-laptop"), current: plain), state: &fresh,
                                 preferences: Preferences(override: .speaker), muteOnFallback: false)
        let speaker = try #require(Status(snapshot: plain).outputs.first { $0.route == .speaker })
        #expect(back.reason == .restored && back.request == .output(speaker))
        #expect(back.clearOverride == nil)
    }

    /// `clear` and `call end` ask the rules with no device change to react to: a listed output ranked
    /// above the headphones in use gets the sound there, as `watch --apply` gives it.
    @Test func theRulingPutsTheSoundOnAListedOutputAboveTheHeadphonesInUse() throws {
        let onHeadphones = simulated([spk, hs, tv], default: "hs")
        for listed in ["tv", "spk"] {
            let request = Policy.ruling(Status(snapshot: onHeadphones), Preferences(priority: [listed, "hs"]))
            #expect(try Planner.plan(onHeadphones, request).output?.id == listed)
        }
        let unlisted = Policy.ruling(Status(snapshot: onHeadphones), Preferences(override: .speaker))
        #expect(try Planner.plan(onHeadphones, unlisted).output?.id == "hs", "no list: the headphones keep it (rule 2)")
    }

    @Test func aVirtualSinkOrALaterPickIsRespected() throws {
        // A null sink a client made (device.class=abstract) is not covered.
        var run = PolicyRun(simulated([spk], default: "spk"))
        let (d, _) = try run.next(simulated([spk, tv], default: "tv"))
        #expect(d.request == nil)
        // A hardware one picked after the window (not added now, not recently added) stands.
        var monitor = simulated([spk, tv], default: "spk")
        monitor.sinks[1].properties["device.class"] = "sound"
        var later = PolicyRun(monitor)
        var picked = monitor
        picked.server.defaultSinkName = "tv"
        let change = Change(previous: monitor, current: picked)
        #expect(Policy.decide(change, state: &later.state, preferences: Preferences(), muteOnFallback: false).request == nil)
        #expect(Policy.decide(change, state: &later.state, preferences: Preferences(), muteOnFallback: false,
                              recentlyAdded: ["tv"]).reason == .restored, "within the window it is the server's")
    }
}

@Suite struct DepartureReactionTests {
    /// The headphones of a phone in a call were pulled with the speaker forced; WirePlumber then picks
    /// the best port left (the earpiece): its reaction to the departure, so the rules put it back.
    @Test func aPortPickedMomentsAfterAJackOfTheSameCardWasPulledIsTheServers() throws {
        var onSpeaker = try fixture("sim/pipewire-phone-voicecall")
        onSpeaker.sinks[0].activePort = "[Out] Speaker"
        let onEarpiece = try fixture("sim/pipewire-phone-voicecall")
        let change = Change(previous: onSpeaker, current: onEarpiece)
        var state = PolicyState(status: change.previous)
        let preferences = Preferences(override: .speaker, callTarget: .earpiece)
        let pulled = ["alsa_card.sim-phone:[Out] Headphones"]
        let decision = Policy.decide(change, state: &state, preferences: preferences, muteOnFallback: false, recentlyRemoved: Set(pulled))
        #expect(decision.request == RouteRequest(target: .speaker, force: true))
        #expect(decision.reason == .oldDeviceUnavailable)
        #expect(Policy.decide(change, state: &state, preferences: preferences, muteOnFallback: false).request == nil,
                "with no departure just before, it is another client's pick, respected")
        #expect(Policy.decide(change, state: &state, preferences: preferences, muteOnFallback: false,
                              recentlyRemoved: ["bluez_card.00_11_22_33_44_55"]).request == nil, "a departure elsewhere says nothing")
    }
}

@Suite struct BluetoothIdentityTests {
    /// A headset disconnecting: its card goes a notification before its sink. The sink is still that
    /// device (its card's id), not a new output to route to.
    @Test(arguments: ["pulseaudio", "pipewire"])
    func aSinkThatOutlivesItsCardIsStillTheDevice(server: String) throws {
        var s = try fixture("sim/\(server)-bluetooth-a2dp")
        s.cards.removeAll { $0.name.hasPrefix("bluez_card.") }
        let outputs = Status(snapshot: s).outputs.filter { $0.route == .bluetooth }
        #expect(outputs.map(\.id) == ["bluez_card.00_11_22_33_44_55"])
    }
}
