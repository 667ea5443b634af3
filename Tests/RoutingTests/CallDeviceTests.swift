import Testing
import Routing

/// Rule 8: a connected headset takes the call; a Bluetooth device without a headset profile (an
/// A2DP-only speaker) has no microphone path and is no call device.
@Suite struct CallDeviceTests {
    /// The fixture's headset with its HFP profile taken away: a Bluetooth speaker.
    func a2dpOnly(_ snapshot: Snapshot) -> Snapshot {
        var s = snapshot
        for i in s.cards.indices where s.cards[i].name.hasPrefix("bluez_card.") {
            s.cards[i].profiles.removeAll { Planner.isBluetoothHeadsetProfile($0.name) }
            for j in s.cards[i].ports.indices { s.cards[i].ports[j].profiles.removeAll(where: Planner.isBluetoothHeadsetProfile) }
            s.cards[i].ports.removeAll { $0.profiles.isEmpty }
        }
        return s
    }

    @Test(arguments: ["pulseaudio", "pipewire"])
    func anA2DPOnlySpeakerDoesNotTakeTheCall(server: String) throws {
        let headset = Status(snapshot: try fixture("sim/\(server)-bluetooth-a2dp"))
        let speaker = Status(snapshot: a2dpOnly(try fixture("sim/\(server)-bluetooth-a2dp")))
        let card = "bluez_card.00_11_22_33_44_55"
        #expect(try #require(headset.outputs.first { $0.id == card }).takesCalls)
        #expect(try !#require(speaker.outputs.first { $0.id == card }).takesCalls)
        let inCall = Preferences(callTarget: .earpiece)
        // In use when the call starts: the headset keeps the sound for the call, the speaker does not.
        #expect(Policy.ruling(headset, inCall) == RouteRequest(target: .bluetooth, device: card))
        #expect(Policy.ruling(speaker, inCall) == RouteRequest(target: .earpiece))
        #expect(Policy.ranked(speaker, PolicyState(status: speaker), priority: ["bluetooth"], inCall: true).isEmpty,
                "not even listed first")
        // Outside a call it is a Bluetooth device like any other (rule 1).
        #expect(Policy.ranked(speaker, PolicyState(status: speaker), priority: []).map(\.id) == [card])
    }
}

/// `set` during a call (rule 8 over rule 4): an A2DP-only speaker is asked for only with --force, and
/// a headset that is not there leaves the call where it is rather than on the loudspeaker.
@Suite struct SetDuringACallTests {
    let card = "bluez_card.00_11_22_33_44_55"

    @Test(arguments: ["pulseaudio", "pipewire"])
    func anA2DPOnlySpeakerIsNoBluetoothOutputForACall(server: String) throws {
        var speaker = CallDeviceTests().a2dpOnly(try fixture("sim/\(server)-bluetooth-a2dp"))
        speaker.server.defaultSinkName = "alsa_output.sim-laptop.analog-stereo"
        let inCall = PlanContext(inCall: true)
        let plan = try Planner.plan(speaker, RouteRequest(target: .bluetooth), inCall)
        #expect(plan.outcome == .fellBack(from: .bluetooth))
        #expect(plan.output?.route == .speaker, "the laptop's speaker, not the A2DP one: \(String(describing: plan.output?.id))")
        #expect(throws: PlanningError.cannotCarryCall(card)) {
            try Planner.plan(speaker, RouteRequest(target: .bluetooth, device: self.card), inCall)
        }
        let forced = try Planner.plan(speaker, RouteRequest(target: .bluetooth, device: card, force: true), inCall)
        #expect(forced.outcome == .switchTo)
        #expect(forced.output?.id == card)
        // Forced but by kind (`set bluetooth --force`, the policy's forced fallback to a `bluetooth`
        // override): never the speaker.
        let byKind = try Planner.plan(speaker, RouteRequest(target: .bluetooth, force: true), inCall)
        #expect(byKind.outcome == .fellBack(from: .bluetooth))
        #expect(byKind.output?.id != card)
        // Outside a call it is a Bluetooth output like any other.
        #expect(try Planner.plan(speaker, RouteRequest(target: .bluetooth), PlanContext()).output?.id == card)
        // Named for another kind: the kind is what is wrong, as outside a call.
        #expect(throws: PlanningError.deviceOfAnotherKind(card, .speaker, .bluetooth)) {
            try Planner.plan(speaker, RouteRequest(target: .speaker, device: self.card, force: true), inCall)
        }
        #expect(throws: PlanningError.deviceOfAnotherKind(card, .headset, .bluetooth)) {
            try Planner.plan(speaker, RouteRequest(target: .headset, device: self.card), inCall)
        }
    }

    /// A call the user put on the A2DP-only speaker (named, forced) stays there when a headset that
    /// is not there is asked for: not the loudspeaker.
    @Test(arguments: ["pulseaudio", "pipewire"])
    func aCallForcedOntoAnA2DPSpeakerStaysThere(server: String) throws {
        let speaker = CallDeviceTests().a2dpOnly(try fixture("sim/\(server)-bluetooth-a2dp"))
        #expect(Status(snapshot: speaker).output?.id == card)
        for request in [RouteRequest(target: .headset), RouteRequest(target: .bluetooth), RouteRequest(target: .bluetooth, force: true)] {
            let plan = try Planner.plan(speaker, request, PlanContext(inCall: true))
            #expect(plan.outcome == .fellBack(from: request.target))
            #expect(plan.callStays)
            #expect(plan.output?.id == card, "\(request)")
            #expect(!plan.movesRoute, "\(request): \(plan.actions)")
        }
        // A built-in target (call start's earpiece on a laptop, clear, set earpiece) never keeps the
        // call on it: no microphone. The laptop's speaker stands in (rule 4).
        for request in [RouteRequest(target: .earpiece), RouteRequest(target: .earpiece, force: true), RouteRequest(target: .speaker)] {
            let plan = try Planner.plan(speaker, request, PlanContext(inCall: true))
            #expect(plan.output?.route == .speaker, "\(request): \(String(describing: plan.output?.id))")
            #expect(!plan.callStays)
        }
    }

    @Test(arguments: ["pulseaudio-phone-voicecall", "pipewire-phone-voicecall", "pulseaudio-phone17-voicecall", "pipewire-phone17-voicecall"])
    func aHeadsetThatIsNotThereLeavesTheCallOnTheEarpiece(phone: String) throws {
        let call = try fixture("sim/\(phone)")
        #expect(Status(snapshot: call).route == .receiver)
        for target in [RouteTarget.headset, .bluetooth] {
            let plan = try Planner.plan(call, RouteRequest(target: target), PlanContext(inCall: true))
            #expect(plan.outcome == .fellBack(from: target))
            #expect(plan.output?.route == .receiver, "\(target): \(String(describing: plan.output?.id))")
            #expect(!plan.movesRoute, "\(target): \(plan.actions)")
        }
        // Outside a call the same request degrades to the speaker (rule 4).
        let music = try Planner.plan(call, RouteRequest(target: .headset), PlanContext())
        #expect(music.output?.route == .speaker)
    }
}

/// LE Audio (PipeWire's BAP profiles): the duplex profile carries the microphone, so it is the
/// headset profile a call switches to, and the playback one is music's.
@Suite struct LEAudioTests {
    /// The fixture's headset as an LE Audio one: A2DP becomes `bap-sink`, HFP `bap-duplex`.
    func leAudio(_ snapshot: Snapshot) -> Snapshot {
        func renamed(_ name: String) -> String {
            name.hasPrefix("a2dp-sink") ? "bap-sink" : name.hasPrefix("headset-head-unit") ? "bap-duplex" : name
        }
        var s = snapshot
        for i in s.cards.indices where s.cards[i].name.hasPrefix("bluez_card.") {
            var seen = Set<String>()
            s.cards[i].profiles = s.cards[i].profiles.compactMap { p in
                var p = p
                p.name = renamed(p.name)
                return seen.insert(p.name).inserted ? p : nil
            }
            s.cards[i].activeProfile = s.cards[i].activeProfile.map(renamed)
            for j in s.cards[i].ports.indices {
                s.cards[i].ports[j].profiles = s.cards[i].ports[j].profiles.map(renamed).reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
            }
        }
        return s
    }

    @Test func theDuplexProfileTakesTheCall() throws {
        let le = leAudio(try fixture("sim/pipewire-bluetooth-a2dp"))
        let card = "bluez_card.00_11_22_33_44_55"
        #expect(le.cards.first { $0.name == card }?.activeProfile == "bap-sink")
        let output = try #require(Status(snapshot: le).outputs.first { $0.id == card })
        #expect(output.takesCalls)
        let request = RouteRequest(target: .bluetooth, device: card)
        #expect(try Planner.plan(le, request, PlanContext(inCall: true)).actions == [.setCardProfile(card: card, profile: "bap-duplex")])
        #expect(try Planner.plan(le, request, PlanContext(inCall: false)).actions.isEmpty, "bap-sink serves music")
    }
}

/// A headset whose HFP connects a moment after its A2DP (so after its card appeared) is a call
/// device from then on: during a call it takes the call, as a headset arriving does (rule 8).
@Suite struct HeadsetProfileLateTests {
    let laptop = "alsa_output.sim-laptop.analog-stereo", card = "bluez_card.00_11_22_33_44_55"

    /// The fixture's headset with its headset profile not available yet, as PulseAudio shows it
    /// before HFP connects.
    func hfpUnavailable(_ snapshot: Snapshot) -> Snapshot {
        var s = snapshot
        for i in s.cards.indices where s.cards[i].name == card {
            for j in s.cards[i].profiles.indices where Planner.isBluetoothHeadsetProfile(s.cards[i].profiles[j].name) {
                s.cards[i].profiles[j].available = false
            }
        }
        return s
    }

    @Test(arguments: ["pulseaudio", "pipewire"])
    func aHeadsetWhoseHFPComesLateTakesTheCall(server: String) throws {
        var withHFP = try fixture("sim/\(server)-bluetooth-a2dp")
        withHFP.server.defaultSinkName = laptop
        let early = hfpUnavailable(withHFP)
        #expect(Status(snapshot: early).outputs.first { $0.id == card }?.takesCalls == false)
        let change = Change(previous: early, current: withHFP)
        #expect(change.added.isEmpty, "the same device, already there")
        var state = PolicyState(status: change.previous)
        let inCall = Policy.decide(change, state: &state, preferences: Preferences(callTarget: .earpiece), muteOnFallback: false)
        #expect(inCall.request == RouteRequest(target: .bluetooth, device: card))
        #expect(inCall.reason == .newDeviceAvailable)
        // Outside a call nothing arrived: the device was already a Bluetooth output like any other.
        var music = PolicyState(status: change.previous)
        #expect(Policy.decide(change, state: &music, preferences: Preferences(), muteOnFallback: false).request == nil)
        // Over an override set in the call (`set speaker --force`) too: a headset arriving clears it (rule 8).
        var overridden = PolicyState(status: change.previous)
        let chosen = Preferences(override: .speaker, callTarget: .earpiece)
        let first = Policy.decide(change, state: &overridden, preferences: chosen, muteOnFallback: false)
        #expect(first.request == RouteRequest(target: .bluetooth, device: card))
        #expect(first.reason == .newDeviceAvailable)
        #expect(first.clearOverride == "'\(card)' was connected")
        // But only the first time: its headset profile going and coming back on the same connection
        // leaves a choice the user made since (`set speaker --force` again) where it is.
        var afterFirst = overridden
        let lost = Policy.decide(Change(previous: withHFP, current: early), state: &afterFirst, preferences: chosen, muteOnFallback: false)
        #expect(lost.clearOverride == nil)
        let flap = Policy.decide(change, state: &afterFirst, preferences: chosen, muteOnFallback: false)
        #expect(flap.request == nil)
        #expect(flap.clearOverride == nil)
        // Without an override it takes the call back each time (the rules pick it).
        var unchosen = overridden
        #expect(Policy.decide(change, state: &unchosen, preferences: Preferences(callTarget: .earpiece), muteOnFallback: false).request
                == RouteRequest(target: .bluetooth, device: card))
        // A new connection is a new arrival: gone, back with A2DP only, then HFP up.
        var reconnected = afterFirst
        var gone = early
        let cardIndex = try #require(gone.cards.first { $0.name == card }?.index)
        gone.sinks.removeAll { $0.card == cardIndex }
        gone.sources.removeAll { $0.card == cardIndex }
        gone.cards.removeAll { $0.index == cardIndex }
        _ = Policy.decide(Change(previous: early, current: gone), state: &reconnected, preferences: chosen, muteOnFallback: false)
        _ = Policy.decide(Change(previous: gone, current: early), state: &reconnected, preferences: chosen, muteOnFallback: false)
        #expect(Policy.decide(change, state: &reconnected, preferences: chosen, muteOnFallback: false).clearOverride != nil)
    }

    /// A server that makes an A2DP-only speaker the default as it connects (a switch-on-connect
    /// policy) during a call: the call is put back (rule 8), as an HDMI output's steal is.
    @Test(arguments: ["pulseaudio", "pipewire"])
    func anA2DPSpeakerTheServerSwitchesToInACallIsUndone(server: String) throws {
        let speaker = CallDeviceTests().a2dpOnly(try fixture("sim/\(server)-bluetooth-a2dp"))
        var before = speaker
        let gone = Set(before.cards.filter { $0.name == card }.map(\.index))
        before.sinks.removeAll { $0.card.map(gone.contains) ?? false }
        before.sources.removeAll { $0.card.map(gone.contains) ?? false }
        before.cards.removeAll { gone.contains($0.index) }
        before.server.defaultSinkName = laptop
        let change = Change(previous: before, current: speaker)
        #expect(change.current.output?.id == card)
        var state = PolicyState(status: change.previous)
        let decision = Policy.decide(change, state: &state, preferences: Preferences(callTarget: .earpiece), muteOnFallback: false)
        #expect(decision.reason == .restored)
        #expect(decision.request?.device == change.previous.output?.id)
        var music = PolicyState(status: change.previous)
        let rule1 = Policy.decide(change, state: &music, preferences: Preferences(), muteOnFallback: false)
        #expect(rule1.reason == .newDeviceAvailable, "outside a call a speaker connecting wins (rule 1)")
        #expect(rule1.request?.device == card)
    }
}
