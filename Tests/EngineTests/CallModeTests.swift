import Engine
import Routing
import Testing

/// Call mode (rule 8) on the fake server: what `call start` records and switches, and what `call end`
/// puts back, on the simulated cards' own dumps.
@Suite struct CallModeTests {
    let phone = "alsa_card.sim-phone"
    let headset = "bluez_card.00_11_22_33_44_55"

    func phoneServer() throws -> FakeServer {
        let server = FakeServer(try fixture("sim/pulseaudio-phone"))
        server.profiles["\(phone)/Voice Call"] = try fixture("sim/pulseaudio-phone-voicecall")
        server.profiles["\(phone)/HiFi"] = try fixture("sim/pulseaudio-phone")
        return server
    }

    /// The laptop and a Bluetooth headset (`start`: as it is now, A2DP by default), whose profile
    /// switches turn the server into the simulator's dumps.
    func headsetServer(_ start: Snapshot? = nil) throws -> FakeServer {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp")
        let server = FakeServer(start ?? a2dp)
        server.profiles["\(headset)/handsfree_head_unit"] = try fixture("sim/pulseaudio-bluetooth-hfp")
        server.profiles["\(headset)/a2dp_sink"] = a2dp
        return server
    }

    @Test func callStartRecordsTheCardsThenEntersVoiceCallOnTheEarpiece() throws {
        let server = try phoneServer()
        let store = FakeStore()
        let started = try CallMode(server: server, store: store, clocks: ManualClock().clocks).start(speaker: false, timeout: 1)
        #expect(started.isNew)
        #expect(store.call?.profiles == [CallRecord.CardProfile(card: phone, profile: "HiFi")])
        #expect(store.call?.output == "\(phone):[Out] Speaker")
        #expect(server.applied.first == [.setCardProfile(card: phone, profile: "Voice Call")])
        #expect(started.result.status.route == .receiver)
        #expect(started.result.status.output?.cardProfile == "Voice Call")
        #expect(store.intents.allSatisfy { $0.reason == .call })
        // Saved before anything changed, then once more when the route was there: watchers report
        // the call after its route event, with the route it reached.
        #expect(store.callSaves.map(\.applied) == [false, true])
        #expect(store.call?.applied == true)
    }

    /// The server remembers each source's mute: a Voice Call microphone an earlier call left muted is
    /// live in the next call when the microphone was live before it; a call in progress keeps its mute;
    /// call end gives the call's microphone back the mute the call found it with.
    @Test func aNewCallDoesNotInheritAnEarlierCallsMute() throws {
        let server = try phoneServer()
        var voiceCall = try fixture("sim/pulseaudio-phone-voicecall")
        let callSource = try #require(voiceCall.server.defaultSourceName)
        let i = try #require(voiceCall.sources.firstIndex { $0.name == callSource })
        voiceCall.sources[i].mute = true
        server.profiles["\(phone)/Voice Call"] = voiceCall
        let store = FakeStore()
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        let started = try mode.start(speaker: false, timeout: 1)
        #expect(store.call?.micMuted == false)
        #expect(server.applied.contains([.setSourceMute(source: callSource, mute: false)]))
        #expect(started.result.snapshot.defaultSource?.mute == false)
        #expect(store.call?.callSource == callSource)
        #expect(store.call?.callSourceMuted == true, "the mute the call found, for call end")
        #expect(store.call?.callMute?.muted == false, "the call's own mute, kept as its input moves")
        server.applied = []
        server.current.sources[i].mute = true
        _ = try mode.start(speaker: true, timeout: 1)
        #expect(!server.applied.contains([.setSourceMute(source: callSource, mute: false)]), "a re-apply keeps the call's mute")
        server.current.sources[i].mute = false
        server.applied = []
        _ = try mode.end(timeout: 1)
        #expect(server.applied.first == [.setSourceMute(source: callSource, mute: true)],
                "call end gives the call's microphone back the mute it found, before its profile goes")
    }

    /// PulseAudio 17 names: the earpiece is in `HiFi (Earpiece, Mic)` and `Voice Call (Earpiece, Mic)`;
    /// a call takes the Voice Call one that holds the earpiece, not the first Voice Call profile.
    @Test func theCallProfileIsChosenByItsPortsInTheNewNaming() throws {
        let card = "alsa_card.sim-phone17"
        let server = FakeServer(try fixture("sim/pulseaudio-phone17"))
        server.profiles["\(card)/Voice Call (Earpiece, Mic)"] = try fixture("sim/pulseaudio-phone17-voicecall")
        let started = try CallMode(server: server, store: FakeStore(), clocks: ManualClock().clocks).start(speaker: false, timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: card, profile: "Voice Call (Earpiece, Mic)")])
        #expect(started.result.status.route == .receiver)
    }

    @Test func callEndPutsTheProfileTheRouteAndTheMicrophoneBack() throws {
        let server = try phoneServer()
        server.current.sources = server.current.sources.map { var s = $0; s.mute = !s.isMonitor; return s }
        server.profiles["\(phone)/HiFi"] = server.current
        let store = FakeStore()
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        _ = try mode.start(speaker: false, timeout: 1)
        #expect(Status(snapshot: server.current).micMuted == false, "the call's source, as the server gives it")
        server.applied = []
        let ended = try #require(try mode.end(timeout: 1))
        #expect(server.applied.first == [.setCardProfile(card: phone, profile: "HiFi")])
        #expect(ended.status.route == .speaker)
        #expect(ended.status.micMuted == true, "muted before the call, muted after it")
        #expect(store.call == nil)
        #expect(try mode.end(timeout: 1) == nil, "no call: nothing to end")
    }

    @Test func aRefusedCallStartLeavesNothingHalfApplied() throws {
        let server = try phoneServer()
        // The card switched to Voice Call, then the server refuses the microphone's step.
        server.refuse = { if case .setDefaultSource = $0 { return true } else { return false } }
        server.afterProfileSwitch = { s in
            if s.cards.first?.activeProfile == "Voice Call" { s.server.defaultSourceName = s.sources.first { $0.isMonitor }?.name }
        }
        let store = FakeStore()
        #expect(throws: EngineError.self) {
            _ = try CallMode(server: server, store: store, clocks: ManualClock().clocks).start(speaker: false, timeout: 1)
        }
        #expect(store.call == nil)
        #expect(server.current.cards.first?.activeProfile == "HiFi")
    }

    /// The server goes away during `call start` (its profile switch), so the failure cannot be undone
    /// either: the call failed, and none stays on record. The phone is owed its profile from before
    /// (the returning server may give it back Voice Call; `watch --apply` puts HiFi back then), and
    /// the override the call set aside is back. A later `call end` has nothing to end.
    @Test func aCallStartTheServerLeftDuringLeavesNoCallBehind() throws {
        let server = try phoneServer()
        server.dieDuringApply = true
        let store = FakeStore()
        let override = OverrideRecord(target: .speaker, setAt: 5, externals: [])
        store.record = override
        store.owed = [CallRecord.CardProfile(card: "bluez_card.AA", profile: "a2dp_sink")]
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        #expect(throws: EngineError.self) { _ = try mode.start(speaker: false, timeout: 1) }
        #expect(store.callSaves.map(\.applied) == [false], "recorded before the switch, as always")
        #expect(store.call == nil)
        #expect(store.owed == [CallRecord.CardProfile(card: phone, profile: "HiFi"),
                               CallRecord.CardProfile(card: "bluez_card.AA", profile: "a2dp_sink")])
        #expect(store.record == override)
        try server.reconnect(timeout: 1)
        #expect(try mode.end(timeout: 1) == nil)
    }

    /// Headphones plugged during a call on a Bluetooth headset took the call; at its end the headset
    /// goes back to A2DP and the server makes it the default again. The call's device, the headphones,
    /// keeps the sound (rule 1: the most recent; rule 7: the server's pick after routectl's own
    /// profile switch is no reason), and the step is announced as where it ends.
    @Test func callEndKeepsTheDeviceTheCallWasOnNotTheServersPickAfterTheRestore() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", phones = "analog-output-headphones"
        let headset = "bluez_card.00_11_22_33_44_55"
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp").jack(laptop, phones, .available).routed(to: laptop, port: phones)
        #expect(Status(snapshot: inCall).route == .headset)
        let server = FakeServer(inCall)
        // Restoring A2DP, the server makes the headset's new sink the default (its remembered one).
        server.profiles["\(headset)/a2dp_sink"] = try fixture("sim/pulseaudio-bluetooth-a2dp").jack(laptop, phones, .available)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, profiles: [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")],
                                output: headset, externals: [headset], applied: true)
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        let ended = try #require(try mode.end(timeout: 1))
        #expect(server.current.server.defaultSinkName == laptop, "\(server.applied)")
        #expect(ended.status.output?.id == "alsa_card.sim-laptop:\(phones)")
        #expect(store.intents.first?.output == "alsa_card.sim-laptop:\(phones)", "announced where it ends")
    }

    /// The user picked the laptop's microphone over the preferred USB headset's (with pactl): the call
    /// takes the headset's, and its end gives the laptop's back, as it was. A device that came or went
    /// during the call lets the preferred one stand, as the route goes by the rules then.
    @Test func callEndPutsBackTheMicrophoneChosenOverThePreferredOne() throws {
        let laptopMic = "alsa_input.sim-laptop.analog-stereo", usbMic = "alsa_input.sim-usb-headset.analog-stereo"
        var all = try fixture("sim/pulseaudio-all")
        all.server.defaultSourceName = laptopMic
        for cameOrWent in [false, true] {
            let server = FakeServer(all)
            let store = FakeStore()
            store.preferencesValue.preferredInput = usbMic
            let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
            let started = try mode.start(speaker: false, timeout: 1)
            #expect(started.result.snapshot.server.defaultSourceName == usbMic, "the headset's microphone for the call")
            if cameOrWent { store.call?.externals = [] }
            let ended = try #require(try mode.end(timeout: 1))
            #expect(ended.snapshot.server.defaultSourceName == (cameOrWent ? usbMic : laptopMic), "came or went: \(cameOrWent)")
        }
        // A preferred microphone of its own (no output) plugged during the call stands after it, as
        // it does whenever it returns.
        let server = FakeServer(all)
        let store = FakeStore()
        store.preferencesValue.preferredInput = "alsa_input.usb-mic"
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        _ = try mode.start(speaker: false, timeout: 1)
        #expect(store.call?.inputs?.contains("alsa_input.usb-mic") == false)
        server.current.sources.append(Source(index: 90, name: "alsa_input.usb-mic", description: "USB microphone"))
        let ended = try #require(try mode.end(timeout: 1))
        #expect(ended.snapshot.server.defaultSourceName == "alsa_input.usb-mic", "the preferred microphone that came during the call")
    }

    @Test func theOverrideStepsAsideForTheCallAndComesBack() throws {
        let server = try phoneServer()
        let store = FakeStore()
        let before = OverrideRecord(target: .speaker, setAt: 5, externals: [])
        store.record = before
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        let started = try mode.start(speaker: false, timeout: 1)
        #expect(store.record == nil)
        #expect(started.result.status.route == .receiver, "the call's receiver, not the override's speaker")
        _ = try mode.end(timeout: 1)
        #expect(store.record == before)
    }

    @Test func aBluetoothHeadsetTakesTheCallInHFPAndReturnsToA2DP() throws {
        let server = try headsetServer()
        let store = FakeStore()
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        let started = try mode.start(speaker: false, timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "handsfree_head_unit")])
        #expect(started.result.status.route == .bluetooth)
        #expect(started.result.snapshot.server.defaultSourceName == "bluez_source.00_11_22_33_44_55.handsfree_head_unit",
                "the microphone follows the output")
        server.applied = []
        let ended = try #require(try mode.end(timeout: 1))
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "a2dp_sink")])
        #expect(ended.status.route == .bluetooth)
    }

    /// The profile a headset had before the call is not offered at its end (a codec's profile the
    /// headset no longer has): it still leaves HFP, for its best other profile that plays (A2DP), and
    /// is owed nothing. Rule 8: the headset profile is for the call only.
    @Test func aHeadsetWhoseProfileIsNotOfferedAtCallEndGetsItsBestOtherOne() throws {
        let server = try headsetServer()
        let store = FakeStore()
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        _ = try mode.start(speaker: false, timeout: 1)
        var record = try #require(store.call)
        let index = try #require(record.profiles.firstIndex { $0.card == headset })
        #expect(record.profiles[index].profile == "a2dp_sink")
        record.profiles[index].profile = "a2dp_sink_aac"
        store.call = record
        server.applied = []
        let ended = try #require(try mode.end(timeout: 1))
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "a2dp_sink")])
        #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
        #expect(ended.status.route == .bluetooth)
        #expect(store.owed.isEmpty)
        #expect(store.call == nil)
    }

    /// The server gives a headset back the profile last set through it (pipewire-pulse saves every
    /// one): a headset that left during the call returns in HFP. Call end owes it A2DP; the next call
    /// records A2DP as its profile before the call, and ends there.
    @Test func aHeadsetThatLeftDuringTheCallIsOwedItsA2DP() throws {
        let server = try headsetServer()
        let store = FakeStore()
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        _ = try mode.start(speaker: false, timeout: 1)
        #expect(store.owed.isEmpty, "the call's record names the headset")
        server.current = server.current.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo")
        _ = try mode.end(timeout: 1)
        #expect(store.owed == [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")])
        server.current = try fixture("sim/pulseaudio-bluetooth-hfp")
        _ = try mode.start(speaker: false, timeout: 1)
        #expect(store.call?.profiles.first { $0.card == headset }?.profile == "a2dp_sink")
        #expect(store.owed.isEmpty, "the new call's record holds it now")
        server.applied = []
        _ = try mode.end(timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "a2dp_sink")])
        #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
    }

    /// An owed profile stands only while the card is in the profile the server gave it back (a call's):
    /// owed a softphone's HFP, the headset is in A2DP now (its user moved it there since it came back,
    /// as a hostile test did on PipeWire): it had A2DP before this call, and gets it back at its end.
    @Test func anOwedProfileGivesWayToTheOneAUserChoseSince() throws {
        let server = try headsetServer()
        let store = FakeStore()
        store.owed = [CallRecord.CardProfile(card: headset, profile: "handsfree_head_unit")]
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        _ = try mode.start(speaker: false, timeout: 1)
        #expect(store.call?.profiles.first { $0.card == headset }?.profile == "a2dp_sink")
        #expect(store.owed.isEmpty)
        _ = try mode.end(timeout: 1)
        #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
    }

    /// A headset that joined the call was put in HFP by the move that gave it the call (the watcher's):
    /// it is owed the profile it came with, paid at call end while it is there, owed on if it left.
    @Test func aHeadsetThatJoinedTheCallIsOwedTheProfileItCameWith() throws {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp")
        for leaves in [false, true] {
            let server = try headsetServer(a2dp.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo"))
            let store = FakeStore()
            let clocks = ManualClock().clocks
            let mode = CallMode(server: server, store: store, clocks: clocks)
            _ = try mode.start(speaker: false, timeout: 1)
            server.current = a2dp
            let output = try #require(Status(snapshot: a2dp).outputs.first { $0.route == .bluetooth })
            let joined = try RouteApplier(server: server, store: store, clocks: clocks)
                .route(.output(output), preferredInput: nil, timeout: 1, inCall: true)
            #expect(joined.snapshot.cards.first { $0.name == headset }?.activeProfile == "handsfree_head_unit")
            #expect(store.owed == [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")])
            if leaves { server.current = server.current.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo") }
            _ = try mode.end(timeout: 1)
            if leaves {
                #expect(store.owed == [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")])
            } else {
                #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
                #expect(store.owed.isEmpty)
            }
        }
    }

    /// `set speaker` under the headset only recorded the override (rule 2): call end gives the sound
    /// back to the headset it was on, with the override recorded as before, not forced to the speaker.
    @Test func anOverrideTheHeadsetOverruledStaysOnlyRecordedAfterTheCall() throws {
        let server = try headsetServer()
        let a2dp = server.current
        let store = FakeStore()
        let before = OverrideRecord(target: .speaker, setAt: 5, externals: Status(snapshot: a2dp).externalKeys)
        store.record = before
        let mode = CallMode(server: server, store: store, clocks: ManualClock().clocks)
        #expect(try mode.start(speaker: false, timeout: 1).result.status.route == .bluetooth)
        let ended = try #require(try mode.end(timeout: 1))
        #expect(ended.status.route == .bluetooth)
        #expect(ended.status.output?.id == headset)
        #expect(store.record == before)
    }

    /// Rule 8: a connected headset takes the call, the priority list choosing among headsets only: a
    /// listed HDMI output, which `watch --apply` gives the music, does not take the call from it. The
    /// HDMI output in use before the call gets the sound back at its end.
    @Test func aListedHDMIOutputNeitherTakesTheCallNorLosesItsPlaceAfter() throws {
        let hdmi = "alsa_card.sim-hdmi:hdmi-output-0"
        var all = try fixture("sim/pulseaudio-all")
        let store = FakeStore()
        store.preferencesValue = Preferences(priority: [hdmi])
        let mode = CallMode(server: FakeServer(all), store: store, clocks: ManualClock().clocks)
        #expect(try mode.start(speaker: false, timeout: 1).result.status.route == .headset)
        all.server.defaultSinkName = "alsa_output.sim-hdmi.hdmi-stereo"
        let onHDMI = CallMode(server: FakeServer(all), store: FakeStore(), clocks: ManualClock().clocks)
        #expect(try onHDMI.start(speaker: false, timeout: 1).result.status.route == .headset, "the USB headset takes the call")
        let ended = try #require(try onHDMI.end(timeout: 1))
        #expect(ended.status.output?.id == hdmi)
    }

    /// A card that was off before the call is switched on for the call's speaker, and call end puts
    /// it back off and the sound on the HDMI output it was on: it does not switch the card on again.
    @Test func aCardOffBeforeTheCallIsOffAfterIt() throws {
        let laptop = "alsa_card.sim-laptop"
        let (on, off) = try laptopAndHDMI()
        let server = FakeServer(off)
        for profile in on.cards.first(where: { $0.name == laptop })!.profiles.map(\.name) where profile != "off" {
            server.profiles["\(laptop)/\(profile)"] = on
        }
        server.profiles["\(laptop)/off"] = off
        let mode = CallMode(server: server, store: FakeStore(), clocks: ManualClock().clocks)
        #expect(try mode.start(speaker: false, timeout: 1).result.status.route == .speaker, "a command switches it on")
        server.applied = []
        let ended = try #require(try mode.end(timeout: 1))
        #expect(server.applied.first == [.setCardProfile(card: laptop, profile: "off")])
        #expect(server.current.cards.first { $0.name == laptop }?.activeProfile == "off")
        #expect(ended.status.output?.id == "alsa_card.sim-hdmi:hdmi-output-0")
    }

    /// PipeWire gives HFP a port of its own (`headset-hf-output`, not A2DP's `headset-output`): the
    /// sink the switch brings settles the call at once, not at the end of the timeout.
    @Test func aBluetoothCallOnPipeWireSettlesOnTheHFPPort() throws {
        let server = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
        server.profiles["\(headset)/headset-head-unit"] = try fixture("sim/pipewire-bluetooth-hfp")
        let mode = CallMode(server: server, store: FakeStore(), clocks: ManualClock().clocks)
        let started = try mode.start(speaker: false, timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "headset-head-unit")])
        #expect(server.unsettled.isEmpty, "waited out: \(server.unsettled)")
        #expect(started.result.status.route == .bluetooth)
        #expect(started.result.status.output?.port == "headset-hf-output")
    }

    /// A switch is settled by the sink it brings, not by the one it replaces: PipeWire acknowledges
    /// before it switches, and the old-named phone's HiFi sink has ports Voice Call lists too.
    @Test(arguments: ["pulseaudio", "pipewire"])
    func aProfileSwitchIsNotSettledByTheSinkItReplaces(server: String) throws {
        let hifi = try fixture("sim/\(server)-phone")
        let plan = try Planner.plan(hifi, RouteRequest(target: .earpiece), PlanContext(inCall: true))
        #expect(plan.needsReplan)
        #expect(!RouteApplier.settled(hifi, plan), "the HiFi sink, before the switch")
        #expect(RouteApplier.settled(try fixture("sim/\(server)-phone-voicecall"), plan))
        let a2dp = try fixture("sim/\(server)-bluetooth-a2dp")
        let call = try Planner.plan(a2dp, RouteRequest(target: .bluetooth, device: headset), PlanContext(inCall: true))
        #expect(!RouteApplier.settled(a2dp, call), "the A2DP sink, before the switch")
        #expect(RouteApplier.settled(try fixture("sim/\(server)-bluetooth-hfp"), call))
    }

    /// Outside a call a headset another client put in HFP (a softphone) stays there; in a call routectl
    /// switches it (rule 8).
    @Test func bluetoothProfilesAreTheCallsOnlyInACall() throws {
        let hfp = try fixture("sim/pulseaudio-bluetooth-hfp")
        let request = RouteRequest(target: .bluetooth, device: headset)
        #expect(try Planner.plan(hfp, request, PlanContext(inCall: false)).actions.isEmpty)
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp")
        #expect(try Planner.plan(a2dp, request, PlanContext(inCall: false)).actions.isEmpty)
        #expect(try Planner.plan(a2dp, request, PlanContext(inCall: true)).actions
            == [.setCardProfile(card: headset, profile: "handsfree_head_unit")])
        let pipewire = try fixture("sim/pipewire-bluetooth-a2dp")
        #expect(try Planner.plan(pipewire, request, PlanContext(inCall: true)).actions
            == [.setCardProfile(card: headset, profile: "headset-head-unit")], "PipeWire's HFP is on another port of the card")
    }
}
