import Engine
import Routing
import Testing

@Suite struct RouteApplierTests {
    let laptop = "alsa_output.sim-laptop.analog-stereo"

    @Test func forceOntoTheSpeakerBehindThePluggedHeadphones() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop-headphones"))
        let store = FakeStore()
        let clock = ManualClock()
        let result = try RouteApplier(server: server, store: store, clocks: clock.clocks)
            .route(RouteRequest(target: .speaker, force: true), preferredInput: nil, timeout: 1)
        #expect(server.applied == [[.setSinkPort(sink: laptop, port: "analog-output-speaker")]])
        #expect(result.status.route == .speaker)
        try RouteApplier.verify(result)
        #expect(store.intents.map(\.output) == ["alsa_card.sim-laptop:analog-output-speaker", "alsa_card.sim-laptop:analog-output-speaker"])
        #expect(store.intents.map(\.done) == [false, true], "announced before acting, done after")
        #expect(store.intents.allSatisfy { $0.reason == .override })
    }

    /// The laptop's card is off with headphones in its jack: `set speaker` turns the card on, and the
    /// headphones take the sound and keep it (rule 2: the speaker is there, behind the jack), as the
    /// same command says once they have it; not rule 4's "no speaker here" (exit 3).
    @Test func aSpeakerBehindTheJackOfACardThatWasOffIsThere() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged.turnedOff("alsa_card.sim-laptop"))
        // The card on again, the server's default not on it yet (it was on auto_null).
        var switched = plugged
        switched.server.defaultSinkName = nil
        for profile in plugged.cards[0].profiles.map(\.name) { server.profiles["alsa_card.sim-laptop/\(profile)"] = switched }
        let applier = RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
        let phones = try #require(Status(snapshot: plugged).output)
        for _ in 0..<2 {
            let result = try applier.route(RouteRequest(target: .speaker), preferredInput: nil, timeout: 1)
            guard case let .externalKeepsPriority(keeper) = result.plan.outcome else {
                Issue.record("outcome \(result.plan.outcome)")
                continue
            }
            #expect(keeper.id == phones.id)
            #expect(result.status.route == .headset)
        }
    }

    /// The headset `set bluetooth` chose disconnects as it is made the default: the read-back stops
    /// waiting there (nothing more will come), and the route lock is not held for the whole timeout
    /// while `watch --apply` waits on it to fall back.
    @Test func aReadBackStopsWaitingWhenThePlannedOutputGoes() throws {
        var connected = try fixture("sim/pulseaudio-bluetooth-a2dp")
        connected.server.defaultSinkName = laptop
        let server = FakeServer(connected)
        server.whileApplying = { _ in
            server.current.cards.removeAll { $0.name.hasPrefix("bluez_card.") }
            server.current.sinks.removeAll { $0.name.hasPrefix("bluez_") }
        }
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .bluetooth), preferredInput: nil, timeout: 1)
        #expect(server.applied.count == 1)
        #expect(server.unsettled.isEmpty, "no wait for a state that cannot come: \(server.unsettled)")
        #expect(result.status.route != .bluetooth)
    }

    @Test func nothingToDoAnnouncesNothing() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        let store = FakeStore()
        _ = try RouteApplier(server: server, store: store, clocks: ManualClock().clocks)
            .route(RouteRequest(target: .speaker), preferredInput: nil, timeout: 1)
        #expect(server.applied.isEmpty)
        #expect(store.intents.isEmpty)
    }

    /// Rule 7 through the whole orchestration: the switch to Voice Call makes the server park the
    /// default on an idle Bluetooth headset; the replan still reaches the earpiece.
    @Test func replanAfterTheProfileSwitchIgnoresTheServersTransient() throws {
        let server = FakeServer(try fixture("sim/pipewire-phone"))
        var call = try fixture("sim/pipewire-phone-voicecall")
        call.sinks.append(Sink(index: 900, name: "bluez_output.00_11_22_33_44_55.1", description: "Headset",
                               properties: ["device.bus": "bluetooth", "device.api": "bluez5"]))
        server.profiles["alsa_card.sim-phone/Voice Call"] = call
        server.afterProfileSwitch = { $0.server.defaultSinkName = "bluez_output.00_11_22_33_44_55.1" }
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .earpiece), preferredInput: nil, timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: "alsa_card.sim-phone", profile: "Voice Call")])
        #expect(result.status.route == .receiver)
        #expect(result.status.output?.id == "alsa_card.sim-phone:[Out] Earpiece")
        try RouteApplier.verify(result)
    }

    /// WirePlumber made the headset's sink the default while another client was connecting, and this
    /// connection never heard of it (issue 15); naming it again changes nothing it would hear either.
    /// The read-back asks a fresh connection instead of waiting for a change that will not come.
    @Test func aDefaultChangeThisConnectionMissedIsReadThroughAFreshOne() throws {
        let server = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
        server.missed = .init(shown: laptop)
        #expect(Status(snapshot: try server.snapshot(timeout: 1)).route == .speaker)
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
        #expect(server.applied.first?.first == .setDefaultSink("bluez_output.00_11_22_33_44_55.1"))
        #expect(server.refreshes == 1)
        #expect(result.status.output?.id == "bluez_card.00_11_22_33_44_55")
        try RouteApplier.verify(result)
    }

    /// While no client connects, this connection cannot miss the new default (a slow WirePlumber among
    /// 500 sinks takes a second): it waits on, in slices, and asks a fresh connection only at the end
    /// (a fresh connection would itself keep the change from every other client). A client that
    /// connected meanwhile opens the window in which it can be missed: the fresh connection is asked
    /// at the end of that slice.
    @Test func aFreshConnectionIsAskedOnlyOnceAClientConnected() throws {
        for clientAt in [nil, 2] as [Int?] {
            let server = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
            server.missed = .init(shown: laptop)
            server.whileApplying = { [unowned server] _ in
                if let clientAt, server.applied.count == clientAt { server.clientsArrived = (server.clientsArrived ?? 0) + 1 }
            }
            _ = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
                .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
            // The request, then read-backs of 0.5 s each over the 3 s a change may take to settle.
            let slices = Int(RouteApplier.settleSeconds / RouteApplier.staleAfter)
            #expect(server.refreshedAfter == [clientAt ?? 1 + slices], "a client after \(clientAt.map(String.init) ?? "none")")
        }
        // A watcher's connection does not count clients: it asks after the first slice.
        let server = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
        server.missed = .init(shown: laptop)
        server.clientsArrived = nil
        _ = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
        #expect(server.refreshedAfter == [2])
    }

    /// The bench's `set` among 500 sinks on PipeWire failed with "Timeout" within a second: a read
    /// waiting for the default to show ran out of its 0.5 s slice while WirePlumber kept
    /// pipewire-pulse busy. Such a slice is waited, not a failure; the default shows in a later one.
    @Test func aReadBackTheServerAnswersLateIsASliceWaited() throws {
        let server = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
        server.missed = .init(shown: laptop)
        server.clientsArrived = 0
        server.lateReadBacks = 2
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
        #expect(server.lateReadBacks == 0)
        #expect(result.status.output?.id == "bluez_card.00_11_22_33_44_55")
        try RouteApplier.verify(result)
        // A server that answers none of them in the whole wait: the command fails with its timeout.
        let silent = FakeServer(try fixture("sim/pipewire-bluetooth-a2dp"))
        silent.missed = .init(shown: laptop)
        silent.lateReadBacks = 100
        #expect(throws: EngineError.self) {
            _ = try RouteApplier(server: silent, store: FakeStore(), clocks: ManualClock().clocks)
                .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
        }
    }

    /// A Bluetooth card appears in profile "off" and WirePlumber gives it A2DP a few milliseconds later:
    /// routectl's own switch is settled once the headset's sink is there, and with one port on that
    /// sink there is no route WirePlumber could restore over routectl's: no quiet wait (50 ms of the
    /// connect-to-route latency, issue 15). A phone's multi-port sink still gets it.
    @Test func aSinglePortSinkNeedsNoQuietAfterTheProfileSwitch() throws {
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp")
        var off = a2dp
        off.sinks.removeAll { $0.name.hasPrefix("bluez_") }
        off.server.defaultSinkName = laptop
        if let i = off.cards.firstIndex(where: { $0.name == "bluez_card.00_11_22_33_44_55" }) { off.cards[i].activeProfile = "off" }
        let server = FakeServer(off)
        server.profiles["bluez_card.00_11_22_33_44_55/a2dp-sink-sbc"] = a2dp
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .bluetooth, device: "bluez_card.00_11_22_33_44_55"), preferredInput: nil, timeout: 1)
        #expect(server.applied.first == [.setCardProfile(card: "bluez_card.00_11_22_33_44_55", profile: "a2dp-sink-sbc")])
        #expect(result.status.route == .bluetooth)
        #expect(server.quietWaits == 0)

        let phone = FakeServer(try fixture("sim/pipewire-phone"))
        phone.profiles["alsa_card.sim-phone/Voice Call"] = try fixture("sim/pipewire-phone-voicecall")
        _ = try RouteApplier(server: phone, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .earpiece), preferredInput: nil, timeout: 1)
        #expect(phone.quietWaits == 1)
    }

    @Test func theStreamsOfThePreviousDefaultFollowTheRoute() throws {
        var s = try fixture("sim/pulseaudio-laptop-headphones")
        s.sinkInputs = [SinkInput(index: 7, sink: s.sinks[0].index)]
        s.sinks.append(Sink(index: 50, name: "dock", description: "Dock", properties: ["device.form_factor": "speaker"]))
        let server = FakeServer(s)
        let result = try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
            .route(RouteRequest(target: .speaker, device: "dock", force: true), preferredInput: nil, timeout: 1)
        #expect(server.applied == [[.setDefaultSink("dock"), .moveSinkInput(index: 7, sink: "dock")]])
        #expect(result.status.output?.sink == "dock")
    }

    @Test func aServerThatGoesAwayMidApplyIsUnreachable() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop-headphones"))
        server.dieDuringApply = true
        let store = FakeStore()
        #expect {
            try RouteApplier(server: server, store: store, clocks: ManualClock().clocks)
                .route(RouteRequest(target: .speaker, force: true), preferredInput: nil, timeout: 1)
        } throws: { error in
            (error as? EngineError)?.isUnreachable == true
        }
        #expect(store.intents.last?.done == true, "the intent is closed even when the apply failed")
    }

    @Test func aRefusalIsAFailureNotUnreachable() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop-headphones"))
        server.refuse = { if case .setSinkPort = $0 { return true } else { return false } }
        #expect {
            try RouteApplier(server: server, store: FakeStore(), clocks: ManualClock().clocks)
                .route(RouteRequest(target: .speaker, force: true), preferredInput: nil, timeout: 1)
        } throws: { error in
            guard let e = error as? EngineError, case .server = e else { return false }
            return !e.isUnreachable
        }
    }

    @Test func microphonePortsAreReachedByTheirIds() throws {
        var s = try fixture("sim/pulseaudio-laptop-headphones")
        for i in s.sources.indices { for j in s.sources[i].ports.indices { s.sources[i].ports[j].availability = .available } }
        let server = FakeServer(s)
        let status = Status(snapshot: s)
        let mic = try #require(status.inputs.first { $0.id == "alsa_card.sim-laptop:analog-input-mic" })
        let after = try server.apply(Planner.sourceActions(mic, s), timeout: 1) { _ in true }
        #expect(Status(snapshot: after).inputs.first { $0.isDefault }?.id == mic.id)
    }
}

@Suite struct WatchTests {
    let laptop = "alsa_output.sim-laptop.analog-stereo"

    func run(_ server: FakeServer, _ store: FakeStore, apply: Bool, clock: ManualClock = ManualClock()) throws -> [Event] {
        var events: [Event] = []
        var warnings: [String] = []
        var watch = Watch(server: server, store: store, clocks: clock.clocks, apply: apply, muteOnFallback: false, timeout: 1,
                          snapshot: try server.snapshot(timeout: 1),
                          sink: { events.append($0); return true }, warn: { warnings.append($0) })
        try watch.run()
        return events
    }

    /// A command's move (`set`) as watchers see it: its intent, written before it acts...
    func begins(_ store: FakeStore, _ output: String, at: Int64) -> FakeServer.Step {
        .run { store.intents.append(RouteIntent(output: output, reason: .override, at: at)) }
    }

    /// ...and marked done once it has read the route back.
    func ends(_ store: FakeStore, _ output: String, at: Int64) -> FakeServer.Step {
        .run { store.intents.append(RouteIntent(output: output, reason: .override, at: at, done: true)) }
    }

    /// A command moving the route from `start` to `output`, watched: its intent, the changes `during`
    /// it, its end, then the changes `after` (the server's own clock runs with `.pass`).
    func command(from start: Snapshot, to output: String, during: [FakeServer.Step], after: [FakeServer.Step],
                 apply: Bool) throws -> [Event] {
        let clock = ManualClock()
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        let server = FakeServer(start)
        server.clock = clock
        server.script = [begins(store, output, at: at)] + during + [ends(store, output, at: at)] + after
        return try run(server, store, apply: apply, clock: clock)
    }

    /// PipeWire with every card: as it is (the speaker), with HDMI picked by the server (a transient
    /// on the way, or another client's choice), and with the USB headset the default (a command's
    /// target, whose id comes last).
    func hdmiPickThenUSB() throws -> (Snapshot, Snapshot, Snapshot, String) {
        let all = try fixture("sim/pipewire-all")
        var picked = all, usb = all
        picked.server.defaultSinkName = "alsa_output.sim-hdmi.hdmi-stereo"
        usb.server.defaultSinkName = "alsa_output.sim-usb-headset.analog-stereo"
        return (all, picked, usb, try #require(Status(snapshot: usb).output?.id))
    }

    func routes(_ events: [Event]) -> [String] {
        events.compactMap { e in
            guard case let .route(route, previous, reason, _) = e else { return nil }
            return "\(route.rawValue)\(previous.map { " (was \($0.rawValue))" } ?? "") \(reason.rawValue)"
        }
    }

    /// `call start` saves `call.json` before it moves the route: a watcher woken by that file reports
    /// the call only once the record says the route is applied, so the event carries the call's route.
    @Test func theCallEventWaitsUntilTheCallIsApplied() throws {
        let clock = ManualClock()
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        let store = FakeStore()
        var record = CallRecord(startedAt: clock.clocks.wallMilliseconds(), speaker: false, applied: false)
        var seen: [Int] = []
        var events: [Event] = []
        server.script = [.run { store.call = record }, .timeout, .run { seen.append(events.count) },
                         .run { record.applied = true; store.call = record }, .timeout, .run { store.call = nil }, .timeout]
        var watch = Watch(server: server, store: store, clocks: clock.clocks, apply: false, muteOnFallback: false, timeout: 1,
                          snapshot: try server.snapshot(timeout: 1), sink: { events.append($0); return true }, warn: { _ in })
        try watch.run()
        #expect(seen == [1], "only the initial route while the call is being applied")
        #expect(events.dropFirst() == [.call(active: true, route: .speaker), .call(active: false, route: .speaker)])
    }

    /// A watcher slow under load reads `call.json` applied, and the call's move done, while the
    /// notifications of its profile switch are still on their way (its refetch shows the old profile's
    /// source gone, the route not moved yet): the call event waits for the route event, and carries
    /// the call's route.
    @Test(arguments: [false, true]) func theCallEventWaitsForTheCallsRouteEvent(apply: Bool) throws {
        let before = try fixture("sim/pulseaudio-phone17")
        let call = try fixture("sim/pulseaudio-phone17-voicecall")
        var mid = before
        mid.sources.removeAll { !$0.isMonitor }
        let earpiece = try #require(Status(snapshot: call).output?.id)
        let clock = ManualClock()
        let server = FakeServer(before)
        server.clock = clock
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        server.script = [
            .run {
                store.intents += [RouteIntent(output: earpiece, reason: .call, at: at), RouteIntent(output: earpiece, reason: .call, at: at, done: true)]
                store.call = CallRecord(startedAt: at, speaker: false)
            },
            .change(mid), .change(call), .pass(0.3),
        ]
        let events = try run(server, store, apply: apply, clock: clock)
        let order = events.filter { $0.type == "route" || $0.type == "call" }.dropFirst()
        #expect(Array(order) == [.route(route: .receiver, previous: .speaker, reason: .call, output: Status(snapshot: call).output),
                                 .call(active: true, route: .receiver)], "apply: \(apply)")
        // The route never shows up here (another client moved it at once): the call event comes once
        // a finished move no longer explains what a watcher sees (1 s after it began), with the route
        // as it is.
        let later = FakeServer(before)
        later.clock = clock
        let began = clock.clocks.wallMilliseconds()
        later.script = [
            .run {
                store.intents += [RouteIntent(output: earpiece, reason: .call, at: began), RouteIntent(output: earpiece, reason: .call, at: began, done: true)]
                store.call = CallRecord(startedAt: began, speaker: false)
            },
            .change(mid), .pass(0.5), .pass(0.4), .pass(0.2), .pass(0.1),
        ]
        store.call = nil
        var waited: [String] = []
        var watch = Watch(server: later, store: store, clocks: clock.clocks, apply: apply, muteOnFallback: false, timeout: 1,
                          snapshot: before, sink: { event in
                              if case .call = event { waited.append("\(event) after \(clock.clocks.wallMilliseconds() - began) ms") }
                              return true
                          }, warn: { _ in })
        try watch.run()
        #expect(waited == ["\(Event.call(active: true, route: .speaker)) after 1100 ms"], "apply: \(apply)")
    }

    /// A `call start` that died before applying the call left its record: after a minute it is a call.
    @Test func anUnappliedCallRecordCountsOnceItIsOld() {
        let record = CallRecord(startedAt: 10_000, speaker: false, applied: false)
        #expect(!record.isBegun(now: 40_000), "a slow start is still starting")
        #expect(record.isBegun(now: 70_001))
        #expect(CallRecord(startedAt: 10_000, speaker: false).isBegun(now: 10_000))
    }

    @Test func aJackPluggedIsOneArrivalInBothModes() throws {
        for apply in [false, true] {
            let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
            server.script = [.change(try fixture("sim/pulseaudio-laptop-headphones"))]
            let events = try run(server, FakeStore(), apply: apply)
            #expect(routes(events) == ["speaker initial", "headset (was speaker) new-device-available"], "apply: \(apply)")
            #expect(events.filter { $0.type == "device-removed" }.isEmpty)
        }
    }

    /// Another client turns the laptop's card off (pavucontrol's "Off" profile): its sink goes, and
    /// `watch --apply` leaves the card off (rule 5) instead of switching it back on for the speaker;
    /// plain watch beside it says the same. Turned on again, its speaker appears and has the route.
    @Test func aCardAnotherClientTurnedOffStaysOff() throws {
        let on = try fixture("sim/pulseaudio-laptop")
        let off = on.turnedOff("alsa_card.sim-laptop")
        for apply in [false, true] {
            let server = FakeServer(on)
            let clock = ManualClock()
            server.clock = clock
            server.script = [.change(off), .pass(2), .change(on), .pass(2)]
            let store = FakeStore()
            store.policyRunning = true
            let events = try run(server, store, apply: apply, clock: clock)
            #expect(server.applied.allSatisfy { !$0.contains { if case .setCardProfile = $0 { true } else { false } } },
                    "apply: \(apply): \(server.applied)")
            #expect(routes(events) == ["speaker initial", "unknown (was speaker) no-suitable-route",
                                       "speaker (was unknown) new-device-available"], "apply: \(apply)")
        }
    }

    /// `call end` puts back a card that was off before the call, on its way to the HDMI output the
    /// call took the sound from: the card going off is routectl's own step, not a departure to answer.
    @Test func aCardCallEndTurnsOffIsItsOwnStep() throws {
        let (on, off) = try laptopAndHDMI()
        let hdmi = "alsa_card.sim-hdmi:hdmi-output-0"
        for apply in [false, true] {
            let clock = ManualClock()
            let store = FakeStore()
            store.policyRunning = true
            // call.json goes only once call end is done: the watchers are still in the call meanwhile.
            store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
            let at = clock.clocks.wallMilliseconds()
            let server = FakeServer(on)
            server.clock = clock
            server.script = [.run { store.intents.append(RouteIntent(output: hdmi, reason: .call, at: at)) }, .change(off),
                             .run { store.intents.append(RouteIntent(output: hdmi, reason: .call, at: at, done: true)) },
                             .change(off), .pass(0.5)]
            let events = try run(server, store, apply: apply, clock: clock)
            #expect(server.applied.isEmpty, "apply: \(apply): \(server.applied)")
            #expect(routes(events) == ["speaker initial", "unknown (was speaker) call"], "apply: \(apply)")
        }
    }

    /// WirePlumber, with an HDMI output present, passes through it for a millisecond when a jack of
    /// the laptop is plugged or pulled, before it switches the laptop's port: plain watch reports the
    /// one change the user made, at once, with its reason (not the transient, not 300 ms late as
    /// another client's pick).
    @Test func theServersPassThroughHDMIOnAJackIsNoRouteOfItsOwn() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let speaker = try laptopAndHDMI().on
        let plugged = speaker.jack(laptop, "analog-output-headphones", .available)
        let phones = plugged.routed(to: laptop, port: "analog-output-headphones")
        let pulled = phones.jack(laptop, "analog-output-headphones", .unavailable)
        let cases: [(start: Snapshot, steps: [Snapshot], pass: Double, expected: [String])] = [
            (speaker, [plugged, plugged.routed(to: hdmi), phones], 0.01, ["speaker initial", "headset (was speaker) new-device-available"]),
            (phones, [pulled, pulled.routed(to: hdmi), pulled.routed(to: laptop, port: "analog-output-speaker")], 0.01,
             ["headset initial", "speaker (was headset) old-device-unavailable"]),
            // Where the server stays on HDMI, that is where the sound went.
            (phones, [pulled, pulled.routed(to: hdmi)], 0.07, ["headset initial", "unknown (was headset) old-device-unavailable"]),
            // A device plugged and made the route in one notification while a move off the speaker is
            // held: its arrival, then the route event.
            (speaker, [speaker.routed(to: hdmi), phones], 0.01, ["speaker initial", "headset (was speaker) new-device-available"]),
        ]
        for (n, c) in cases.enumerated() {
            let clock = ManualClock()
            let server = FakeServer(c.start)
            server.clock = clock
            server.script = c.steps.map { .change($0) } + [.pass(c.pass), .pass(1)]
            var events: [Event] = []
            var times: [Double] = []
            var watch = Watch(server: server, store: FakeStore(), clocks: clock.clocks, apply: false, muteOnFallback: false, timeout: 1,
                              snapshot: try server.snapshot(timeout: 1),
                              sink: { events.append($0); times.append(clock.clocks.monotonic()); return true }, warn: { _ in })
            try watch.run()
            #expect(routes(events) == c.expected, "case \(n)")
            #expect(events.map(\.type) == ["route", n == 0 || n == 3 ? "device-added" : "device-removed", "route"],
                    "case \(n): the device event, then the route event")
            if let last = events.indices.last(where: { events[$0].type == "route" }) {
                #expect(times[last] - times[0] < 0.1, "case \(n): the route event at once, not after a hold: \(times)")
            }
        }
    }

    /// pipewire-pulse may not pass the move on from HDMI to the speaker to this connection (a client
    /// connecting at that moment, issue 15): before the fallback onto HDMI is reported, a fresh
    /// connection is asked, and the one move is reported where it went.
    @Test func aMissedMoveOnFromTheServersPassThroughHDMIIsAskedAbout() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        var on = try laptopAndHDMI().on
        on.server.name = "PulseAudio (on PipeWire 0.3.65)"
        let phones = on.jack(laptop, "analog-output-headphones", .available).routed(to: laptop, port: "analog-output-headphones")
        let pulled = phones.jack(laptop, "analog-output-headphones", .unavailable)
        let clock = ManualClock()
        let server = FakeServer(phones)
        server.clock = clock
        server.script = [.change(pulled), .change(pulled.routed(to: hdmi)),
                         .change(pulled.routed(to: laptop, port: "analog-output-speaker"), defaultSeen: false), .pass(0.07), .pass(1)]
        let events = try run(server, FakeStore(), apply: false, clock: clock)
        #expect(server.refreshes == 1)
        #expect(routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable"])
    }

    /// The same on a plug (a fresh-clone CI run, on PipeWire): the headphones come, the server passes
    /// through HDMI, and its move on to the headphones is missed. A fresh connection is asked before
    /// the pass through HDMI is called another client's pick.
    @Test func aMissedMoveOnToAPluggedJackIsAskedAbout() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        var on = try laptopAndHDMI().on
        on.server.name = "PulseAudio (on PipeWire 0.3.65)"
        let speaker = on.routed(to: laptop, port: "analog-output-speaker")
        let plugged = speaker.jack(laptop, "analog-output-headphones", .available)
        let clock = ManualClock()
        let server = FakeServer(speaker)
        server.clock = clock
        server.script = [.change(plugged), .change(plugged.routed(to: hdmi)),
                         .change(plugged.routed(to: laptop, port: "analog-output-headphones"), defaultSeen: false),
                         .pass(RouteHold.departureWindow + 0.05), .pass(1)]
        let events = try run(server, FakeStore(), apply: false, clock: clock)
        #expect(server.refreshes == 1)
        #expect(routes(events) == ["speaker initial", "headset (was speaker) new-device-available"])
    }

    /// A command (`set speaker`, say, from a script that reacts to `device-removed`) moves the route
    /// while it stands on the HDMI output the server passed through: that move is the command's, with
    /// its reason, after the fallback as it stood.
    @Test func aCommandsMoveOutOfTheServersPassThroughHDMIKeepsItsReason() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let phones = try laptopAndHDMI().on.jack(laptop, "analog-output-headphones", .available)
            .routed(to: laptop, port: "analog-output-headphones")
        let pulled = phones.jack(laptop, "analog-output-headphones", .unavailable)
        let speaker = pulled.routed(to: laptop, port: "analog-output-speaker")
        let speakerID = try #require(Status(snapshot: speaker).output?.id)
        let clock = ManualClock()
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        let server = FakeServer(phones)
        server.clock = clock
        server.script = [.change(pulled), .change(pulled.routed(to: hdmi)), begins(store, speakerID, at: at), .change(speaker),
                         ends(store, speakerID, at: at), .pass(0.01), .pass(1)]
        let events = try run(server, store, apply: false, clock: clock)
        #expect(routes(events) == ["headset initial", "unknown (was headset) old-device-unavailable", "speaker (was unknown) override"])
    }

    /// PipeWire drops a card's sink a notification before it shows the card `off`, the server on HDMI
    /// meanwhile: one route event, with the departure's reason, in both watchers.
    @Test func aCardTurnedOffInTwoNotificationsIsOneDeparture() throws {
        let (on, off) = try laptopAndHDMI()
        var sinkGone = off
        sinkGone.cards = on.cards
        for apply in [false, true] {
            let clock = ManualClock()
            let server = FakeServer(on)
            server.clock = clock
            server.script = [.change(sinkGone), .change(off), .pass(1)]
            let store = FakeStore()
            store.policyRunning = true
            let events = try run(server, store, apply: apply, clock: clock)
            #expect(server.applied.isEmpty, "apply: \(apply): \(server.applied)")
            #expect(routes(events) == ["speaker initial", "unknown (was speaker) old-device-unavailable"], "apply: \(apply)")
        }
    }

    /// `set speaker` switched on a card that was off, the headphones in its jack, and was over before
    /// this watcher looked: the headphones coming with the card are `set`'s step (reason override),
    /// not an arrival plain watch should expect `watch --apply` to answer.
    @Test func aCardACommandSwitchedOnBringsNoArrival() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let phones = try #require(Status(snapshot: plugged).output?.id)
        for apply in [false, true] {
            let clock = ManualClock()
            let store = FakeStore()
            store.policyRunning = true
            let at = clock.clocks.wallMilliseconds()
            let server = FakeServer(plugged.turnedOff("alsa_card.sim-laptop"))
            server.clock = clock
            server.script = [.run { store.intents = [RouteIntent(output: phones, reason: .override, at: at, done: true)] },
                             .change(plugged), .pass(0.5)]
            let events = try run(server, store, apply: apply, clock: clock)
            #expect(routes(events) == ["unknown initial", "headset (was unknown) override"], "apply: \(apply)")
            #expect(server.applied.isEmpty, "apply: \(apply): \(server.applied)")
        }
    }

    /// pipewire-pulse drops the last sink (its card going off), shows no default for a moment, then
    /// its auto_null: one route event with the departure's reason in both watchers, as PulseAudio's
    /// one notification gives it, whichever refetches the watchers happen to make.
    @Test func noSinkThenTheServersPlaceholderIsOneDeparture() throws {
        let on = try fixture("sim/pulseaudio-laptop")
        let off = on.turnedOff("alsa_card.sim-laptop")
        var sinkGone = off
        sinkGone.cards = on.cards
        var placeholder = off
        placeholder.sinks.append(Sink(index: 99, name: "auto_null", description: "Dummy Output", driver: "module-null-sink.c",
                                      properties: ["device.class": "abstract"]))
        placeholder.server.defaultSinkName = "auto_null"
        for steps in [[sinkGone, placeholder], [sinkGone, off, placeholder], [placeholder]] {
            for apply in [false, true] {
                let clock = ManualClock()
                let server = FakeServer(on)
                server.clock = clock
                server.script = steps.map { .change($0) } + [.pass(1)]
                let store = FakeStore()
                store.policyRunning = true
                let events = try run(server, store, apply: apply, clock: clock)
                #expect(routes(events) == ["speaker initial", "unknown (was speaker) old-device-unavailable"],
                        "apply: \(apply), \(steps.count) steps")
            }
        }
    }

    /// A headset that disconnects a moment after `call start` chose it (its card goes `off` first, on
    /// PulseAudio) is a departure the rules answer, not routectl's own card switch.
    @Test func aHeadsetCardGoingOffJustAfterACommandChoseItIsADeparture() throws {
        let hfp = try fixture("sim/pulseaudio-bluetooth-hfp")
        let headset = try #require(hfp.cards.first { $0.name.hasPrefix("bluez_card.") }?.name)
        var leaving = hfp.turnedOff(headset)
        leaving.server.defaultSinkName = "alsa_output.sim-laptop.analog-stereo"
        let clock = ManualClock()
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        store.intents = [RouteIntent(output: headset, reason: .call, at: clock.clocks.wallMilliseconds(), done: true)]
        let server = FakeServer(hfp)
        server.clock = clock
        server.script = [.pass(0.3), .change(leaving), .pass(0.5)]
        let events = try run(server, store, apply: true, clock: clock)
        #expect(!server.applied.isEmpty, "the rules answer the departure")
        #expect(store.decisions.last?.reason == .oldDeviceUnavailable)
        #expect(routes(events).last == "speaker (was bluetooth) old-device-unavailable")
    }

    /// In a call the call must be heard: the headset goes, and the call's target is reached on the
    /// card a user had turned off (rule 8 before rule 5's leave-it-off).
    @Test func aCallLosingItsHeadsetReachesItsTargetOnACardTurnedOff() throws {
        let card = "alsa_card.sim-laptop"
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp").turnedOff(card)
        var gone = inCall
        let headset = try #require(gone.cards.first { $0.name.hasPrefix("bluez_card.") }?.index)
        gone.sinks.removeAll { $0.card == headset }
        gone.sources.removeAll { $0.card == headset }
        gone.cards.removeAll { $0.index == headset }
        gone.server.defaultSinkName = nil
        let server = FakeServer(inCall)
        let laptopOn = try fixture("sim/pulseaudio-laptop")
        for profile in laptopOn.cards[0].profiles.map(\.name) { server.profiles["\(card)/\(profile)"] = laptopOn }
        server.script = [.change(gone), .pass(2)]
        let clock = ManualClock()
        server.clock = clock
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        let events = try run(server, store, apply: true, clock: clock)
        #expect(server.applied.first?.first == .setCardProfile(card: card, profile: "output:analog-stereo+input:analog-stereo"))
        #expect(routes(events).last == "speaker (was bluetooth) old-device-unavailable")
    }

    @Test func applyFallsBackWhenTheHeadphonesGo() throws {
        var plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        // The jack is pulled and the server has not switched yet: the headphones are selected but gone.
        for i in plugged.sinks[0].ports.indices where plugged.sinks[0].ports[i].name == "analog-output-headphones" {
            plugged.sinks[0].ports[i].availability = .unavailable
        }
        for i in plugged.cards[0].ports.indices where plugged.cards[0].ports[i].name == "analog-output-headphones" {
            plugged.cards[0].ports[i].port.availability = .unavailable
        }
        server.script = [.change(plugged)]
        let store = FakeStore()
        store.record = OverrideRecord(target: .speaker, setAt: 0, externals: ["alsa_card.sim-laptop:analog-output-headphones"])
        let events = try run(server, store, apply: true)
        #expect(server.applied.first?.first == .setSinkPort(sink: laptop, port: "analog-output-speaker"))
        #expect(routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable"])
        #expect(events.contains(.overrideCleared(override: .speaker, cause: "'alsa_card.sim-laptop:analog-output-headphones' was disconnected")))
        #expect(store.intents.first?.reason == .oldDeviceUnavailable, "the policy's own move carries its reason")
    }

    /// The server moved the route itself (the headphones went, it picked HDMI) and routectl's answer
    /// (back to the speaker) is refused: the route change is still reported, and the watch goes on.
    @Test func aRouteChangeIsReportedEvenWhenTheAnswerToItFails() throws {
        var before = try fixture("sim/pipewire-all").jack(laptop, "analog-output-headphones", .available)
        before.server.defaultSinkName = laptop
        if let i = before.sinks.firstIndex(where: { $0.name == laptop }) { before.sinks[i].activePort = "analog-output-headphones" }
        var after = before.jack(laptop, "analog-output-headphones", .unavailable)
        after.server.defaultSinkName = "alsa_output.sim-hdmi.hdmi-stereo"
        let server = FakeServer(before)
        server.script = [.change(after)]
        server.refuse = { _ in true }
        let events = try run(server, FakeStore(), apply: true)
        #expect(!server.applied.isEmpty, "routectl tried to answer")
        #expect(routes(events) == ["headset initial", "unknown (was headset) old-device-unavailable"])
    }

    @Test func recoveredOnlyOnceTheRulesAreBack() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        server.script = [.disconnect]
        server.reconnectFailures = 2
        let events = try run(server, FakeStore(), apply: true)
        #expect(events.map(\.type) == ["route", "interrupted", "recovered"])
    }

    /// In a call on a Bluetooth headset with an override set during it (`set speaker --force`), the
    /// server restarts and shows the headset again A2DP first: its HFP coming back is the same
    /// connection, not an arrival, and leaves the override (and the call on the speaker) alone.
    @Test func aHeadsetBackAfterARestartIsNoNewArrivalForTheCall() throws {
        let headset = "bluez_card.00_11_22_33_44_55"
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp")
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        let server = FakeServer(inCall)
        server.profiles["\(headset)/handsfree_head_unit"] = inCall
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
        let standing = OverrideRecord(target: .speaker, setAt: 0, externals: [headset])
        server.script = [.run { store.record = standing }, .run { server.current = a2dp.headsetProfile(of: headset, available: false) },
                         .disconnect, .pass(0.5), .change(a2dp), .pass(0.5)]
        let events = try run(server, store, apply: true)
        #expect(events.map(\.type).contains("recovered"))
        #expect(store.record == standing, "\(events)")
        #expect(!events.contains { $0.type == "override-cleared" })
        #expect(server.current.server.defaultSinkName == laptop, "\(server.applied)")
    }

    /// The server comes back from a restart with the microphone unmuted, where the last `input` event
    /// said muted (PipeWire saves a mute a moment after it is made): an `input` event after
    /// `recovered` says so. Back as it was printed, nothing more is said. (Before, a reader kept the
    /// mute it last read: hostile test.)
    @Test func theMicrophoneAsTheServerCameBackIsSaidAfterRecovered() throws {
        let unmuted = try fixture("sim/pulseaudio-laptop")
        let mic = try #require(unmuted.server.defaultSourceName)
        var muted = unmuted
        muted.sources[try #require(muted.sources.firstIndex { $0.name == mic })].mute = true
        for (back, said) in [(unmuted, ["input"]), (muted, [])] {
            let server = FakeServer(unmuted)
            server.script = [.change(muted), .run { server.current = back }, .disconnect]
            let events = try run(server, FakeStore(), apply: true)
            #expect(events.map(\.type) == ["route", "input", "interrupted", "recovered"] + said, "\(events)")
            if let last = events.last, case let .input(source, previous, changed, micMuted) = last, !said.isEmpty {
                #expect(source == mic && previous == nil && !changed && micMuted == false)
            }
        }
    }

    /// A call muted through routectl, the server back from a restart with the microphone unmuted:
    /// watch --apply mutes it again (the call's mute) as soon as it is connected, and what it prints
    /// after `recovered` is the input as it left it, muted: no `mic_muted=no` for a moment. (Review:
    /// the snapshot kept the server's unmute. Hostile test: the microphone was live for 1.2–1.7 s
    /// after the server was back.)
    @Test func aMutedCallIsNotShownUnmutedAfterARestart() throws {
        var muted = try fixture("sim/pulseaudio-laptop")
        let mic = try #require(muted.server.defaultSourceName)
        let index = try #require(muted.sources.firstIndex { $0.name == mic })
        var unmuted = muted
        muted.sources[index].mute = true
        unmuted.sources[index].mute = false
        let server = FakeServer(muted)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: true, callMute: CallRecord.Mute(muted: true, at: 1))
        server.script = [.run { server.current = unmuted }, .disconnect]
        server.reconnectFailures = 5
        let events = try run(server, store, apply: true)
        #expect(server.applied.first == [.setSourceMute(source: mic, mute: true)], "\(server.applied)")
        #expect(server.current.sources[index].mute)
        #expect(!events.contains { if case .input = $0 { return true } else { return false } }, "\(events)")
        // Muted as soon as the server is back, before the rules wait for it to settle; and during a
        // call the server is looked for every quarter second at most, not every 2.
        #expect(server.appliedAtQuietWaits.first == 1, "\(server.appliedAtQuietWaits)")
        #expect(server.pauses == [0.1, 0.2, 0.25, 0.25, 0.25, 0.25], "\(server.pauses)")
        let outside = FakeServer(muted)
        outside.script = [.disconnect]
        outside.reconnectFailures = 5
        _ = try run(outside, FakeStore(), apply: true)
        #expect(outside.pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0], "\(outside.pauses)")
    }

    /// While the server is away, D-Bus clients (`watch --apply --dbus`) are shown no route rather than
    /// the last one read: an unknown route, no output, no microphone; the route read back once it
    /// is back. (Before, a status bar kept showing the speaker through a server restart.)
    @Test func remoteClientsSeeNoRouteWhileTheServerIsAway() throws {
        final class Shown: RemoteControl {
            var updates: [(route: Route, output: String?, micMuted: Bool?)] = []
            func serve(lockWait: Double) -> Bool? { nil }
            func update(_ status: Status, _ preferences: Preferences) { updates.append((status.route, status.output?.id, status.micMuted)) }
            func routeChanged(route: Route, previous: Route, reason: RouteChangeReason) {}
        }
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        server.script = [.disconnect]
        server.reconnectFailures = 2
        let shown = Shown()
        var events: [Event] = []
        var watch = Watch(server: server, store: FakeStore(), clocks: ManualClock().clocks, apply: true, muteOnFallback: false, timeout: 1,
                          snapshot: try server.snapshot(timeout: 1), sink: { events.append($0); return true }, warn: { _ in })
        watch.remote = shown
        try watch.run()
        #expect(events.map(\.type) == ["route", "interrupted", "recovered"])
        let away = try #require(shown.updates.firstIndex { $0.route == .unknown }, "\(shown.updates)")
        #expect(shown.updates[away].output == nil && shown.updates[away].micMuted == nil)
        #expect(shown.updates[..<away].allSatisfy { $0.route == .speaker }, "the speaker before: \(shown.updates)")
        #expect(shown.updates.last?.route == .speaker, "read back once the server is back: \(shown.updates)")
    }

    /// The server restarted during a call on a Bluetooth headset and came back with it in A2DP, the
    /// route on the same device (its id is the card's, whatever the profile): the call gets its
    /// headset profile back, as the route before the restart had it.
    @Test func aCallOnAHeadsetGetsItsProfileBackAfterARestart() throws {
        let hfp = try fixture("sim/pipewire-bluetooth-hfp")
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp")
        let card = "bluez_card.00_11_22_33_44_55"
        let server = FakeServer(hfp)
        server.profiles["\(card)/headset-head-unit"] = hfp
        server.script = [.run { server.current = a2dp }, .disconnect]
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        _ = try run(server, store, apply: true)
        #expect(server.applied.first?.first == .setCardProfile(card: card, profile: "headset-head-unit"), "\(server.applied)")
        #expect(server.current.cards.first { $0.name == card }?.activeProfile == "headset-head-unit-cvsd")
    }

    /// A headset connected while no watcher ran makes the override set before it stale: watch --apply,
    /// starting, clears it and applies the rules as `clear` does (it said the override was cleared
    /// and left the route on the speaker). With no override, the route as it finds it stays.
    @Test func aStaleOverrideClearedAtStartIsFollowedByTheRules() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo"
        let headset = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        let server = FakeServer(headset)
        server.script = [.timeout]
        let store = FakeStore()
        store.record = OverrideRecord(target: .speaker, setAt: 0, externals: [])
        let events = try run(server, store, apply: true)
        #expect(store.record == nil)
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override"])
        #expect(events.map(\.type).prefix(3) == ["route", "override-cleared", "route"])
        #expect(store.decisions.last?.cause == "watch --apply started")

        let untouched = FakeServer(headset)
        untouched.script = [.timeout]
        let left = try run(untouched, FakeStore(), apply: true)
        #expect(untouched.applied.isEmpty, "maybe the user's pick: \(untouched.applied)")
        #expect(routes(left) == ["speaker initial"])
    }

    /// Headphones plugged during a call while no watcher ran, the server leaving the call on the
    /// earpiece: watch --apply, starting, gives them the call (rule 8).
    @Test func aHeadsetThatCameDuringACallTakesItWhenTheWatcherStarts() throws {
        let sink = "alsa_output.sim-phone.Voice_Call__hw_Phone__sink"
        let plugged = try fixture("sim/pipewire-phone-voicecall").jack(sink, "[Out] Headphones", .available)
        let server = FakeServer(plugged)
        server.script = [.timeout]
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        let events = try run(server, store, apply: true)
        #expect(server.current.sinks.first { $0.name == sink }?.activePort == "[Out] Headphones", "\(server.applied)")
        #expect(routes(events) == ["receiver initial", "headset (was receiver) call"])
    }

    /// A call put on the speaker by another client (pavucontrol's port), respected by a watcher that
    /// then stopped: the next watcher leaves it there (rule 5), while the same devices are present.
    /// Headphones plugged since, or a pick made before this call began, are no reason to: rule 8.
    @Test func aPickDuringTheCallOutlivesTheWatcherThatRespectedIt() throws {
        let sink = "alsa_output.sim-phone.Voice_Call__hw_Phone__sink"
        let onSpeaker = try fixture("sim/pipewire-phone-voicecall").routed(to: sink, port: "[Out] Speaker")
        let speaker = try #require(Status(snapshot: onSpeaker).output)
        #expect(speaker.route == .speaker)
        func watcher(_ snapshot: Snapshot, pickedAt: Int64, externals: [String], override: OverrideRecord? = nil) throws -> (FakeServer, [Event]) {
            let server = FakeServer(snapshot)
            server.script = [.timeout]
            let store = FakeStore()
            store.record = override
            store.call = CallRecord(startedAt: 1_000, speaker: false, applied: true)
            store.decisions = [DecisionRecord(reason: .routeConfigurationChange, cause: "another client's pick", output: speaker.id,
                                              at: pickedAt, externals: externals)]
            return (server, try run(server, store, apply: true))
        }
        let (kept, events) = try watcher(onSpeaker, pickedAt: 2_000, externals: [])
        #expect(kept.applied.isEmpty, "\(kept.applied)")
        #expect(routes(events) == ["speaker initial"])

        let (older, _) = try watcher(onSpeaker, pickedAt: 500, externals: [])
        #expect(older.current.sinks.first { $0.name == sink }?.activePort == "[Out] Earpiece", "a pick before the call: \(older.applied)")

        let plugged = onSpeaker.jack(sink, "[Out] Headphones", .available)
        let (since, _) = try watcher(plugged, pickedAt: 2_000, externals: [])
        #expect(since.current.sinks.first { $0.name == sink }?.activePort == "[Out] Headphones", "plugged since: \(since.applied)")

        // `set earpiece` after the pick: the user's later word is applied.
        let (overridden, _) = try watcher(onSpeaker, pickedAt: 2_000, externals: [],
                                          override: OverrideRecord(target: .earpiece, setAt: 3, externals: []))
        #expect(overridden.current.sinks.first { $0.name == sink }?.activePort == "[Out] Earpiece", "\(overridden.applied)")
    }

    /// In a call on a Bluetooth headset, headphones plugged while no watcher ran: watch --apply,
    /// starting, gives them the call (rule 1: they came after the headset, which call.json's devices
    /// at the call's start tell; the sink numbers say the opposite). Headphones that were there at the
    /// call's start leave the call on the headset (rule 2). (Hostile test: the call stayed on the headset.)
    @Test func headphonesPluggedInACallWhileNoWatcherRanTakeTheCallWhenItStarts() throws {
        let headset = "bluez_card.00_11_22_33_44_55", phones = "alsa_card.sim-laptop:analog-output-headphones"
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp").jack(laptop, "analog-output-headphones", .available)
        #expect(Status(snapshot: inCall).route == .bluetooth)
        for (atStart, moves) in [([headset], true), ([headset, phones], false)] {
            let server = FakeServer(inCall)
            server.script = [.timeout]
            let store = FakeStore()
            store.call = CallRecord(startedAt: 1_000, speaker: false, output: headset, externals: atStart, applied: true)
            let events = try run(server, store, apply: true)
            if moves {
                #expect(server.current.server.defaultSinkName == laptop, "\(server.applied)")
                #expect(server.current.sinks.first { $0.name == laptop }?.activePort == "analog-output-headphones", "\(server.applied)")
                #expect(routes(events) == ["bluetooth initial", "headset (was bluetooth) call"])
            } else {
                #expect(server.applied.isEmpty, "\(server.applied)")
                #expect(routes(events) == ["bluetooth initial"])
            }
        }
    }

    /// Headphones plugged in a call while no watcher ran, and the server (PulseAudio's
    /// switch-on-port-available) switched the phone to HiFi for them: the same output, but out of the
    /// call profile. watch --apply, starting, puts the card back in Voice Call (rule 8).
    @Test func aCallsHeadphonesInTheMusicProfileGoBackToTheCallProfileWhenTheWatcherStarts() throws {
        let card = "alsa_card.sim-phone"
        let hifi = "alsa_output.sim-phone.HiFi__hw_Phone__sink", call = "alsa_output.sim-phone.Voice_Call__hw_Phone__sink"
        let inHiFi = try fixture("sim/pulseaudio-phone").jack(hifi, "[Out] Headphones", .available).routed(to: hifi, port: "[Out] Headphones")
        #expect(Status(snapshot: inHiFi).route == .headset)
        let server = FakeServer(inHiFi)
        server.profiles["\(card)/Voice Call"] = try fixture("sim/pulseaudio-phone-voicecall").jack(call, "[Out] Headphones", .available)
            .routed(to: call, port: "[Out] Headphones")
        server.script = [.timeout]
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        let events = try run(server, store, apply: true)
        #expect(server.applied.first == [.setCardProfile(card: card, profile: "Voice Call")], "\(server.applied)")
        #expect(server.current.cards.first { $0.name == card }?.activeProfile == "Voice Call")
        #expect(Status(snapshot: server.current).route == .headset, "\(events)")
    }

    /// Another client's pick of the HDMI output, respected, is where the server comes back after a
    /// restart (both servers remember their default): it stays. A server that comes back elsewhere,
    /// with the same devices, has the route put back where it was, the pick included, and `why` is
    /// told (the watcher's decision).
    @Test func aRespectedPickOutlivesARestart() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let onSpeaker = try fixture("sim/pulseaudio-all").without(["alsa_card.sim-phone", "alsa_card.sim-usb-headset"]).routed(to: laptop)
        let picked = onSpeaker.routed(to: hdmi)
        let server = FakeServer(onSpeaker)
        server.script = [.change(picked), .pass(1), .timeout, .disconnect]
        let store = FakeStore()
        let events = try run(server, store, apply: true)
        #expect(server.applied.isEmpty, "\(server.applied)")
        #expect(server.current.server.defaultSinkName == hdmi)
        #expect(routes(events) == ["speaker initial", "unknown (was speaker) route-configuration-change"], "\(events)")
        #expect(events.map(\.type).suffix(2) == ["interrupted", "recovered"])
        #expect(store.decisions.map(\.reason) == [.routeConfigurationChange], "the pick, recorded for why; no move of routectl's")

        let elsewhere = FakeServer(onSpeaker)
        elsewhere.script = [.change(picked), .pass(1), .timeout, .run { elsewhere.current = onSpeaker }, .disconnect]
        let moved = FakeStore()
        _ = try run(elsewhere, moved, apply: true)
        #expect(elsewhere.current.server.defaultSinkName == hdmi, "\(elsewhere.applied)")
        #expect(moved.decisions.last?.cause == "the sound server came back")
        #expect(moved.decisions.last?.output == "alsa_card.sim-hdmi:hdmi-output-0")
    }

    /// A `call start` the server left during leaves the phone owed HiFi (`CallMode.abandon`); the server
    /// comes back with it in Voice Call (PulseAudio's card-restore remembers a switch it made just
    /// before it went): watch --apply gives HiFi back as it recovers, with no call on.
    @Test func aProfileOwedAsTheServerWentIsPaidWhenItComesBack() throws {
        let voiceCall = try fixture("sim/pulseaudio-phone-voicecall")
        let hifi = try fixture("sim/pulseaudio-phone")
        let server = FakeServer(hifi)
        server.profiles["alsa_card.sim-phone/HiFi"] = hifi
        let store = FakeStore()
        // Owed once the watcher has looked at what was owed as it started (nothing), as the failed
        // start leaves it: the watcher need not have seen its call.json come and go.
        server.script = [.timeout, .run {
            store.owed = [CallRecord.CardProfile(card: "alsa_card.sim-phone", profile: "HiFi")]
            server.current = voiceCall
        }, .disconnect]
        let events = try run(server, store, apply: true)
        #expect(server.applied.contains([.setCardProfile(card: "alsa_card.sim-phone", profile: "HiFi")]))
        #expect(server.current.cards.first?.activeProfile == "HiFi")
        #expect(store.owed.isEmpty)
        #expect(events.map(\.type).prefix(3) == ["route", "interrupted", "recovered"])
    }

    /// The server restarted during a call and came back with the phone in HiFi: watch --apply puts the
    /// call's route back, and its intent says `call`, so that plain `watch` beside it reports the move
    /// with the reason the call has (not `override`).
    @Test func aCallPutBackAfterTheServerCameBackIsTheCallsMove() throws {
        let voiceCall = try fixture("sim/pulseaudio-phone-voicecall")
        let hifi = try fixture("sim/pulseaudio-phone")
        let server = FakeServer(voiceCall)
        server.profiles["alsa_card.sim-phone/Voice Call"] = voiceCall
        server.script = [.run { server.current = hifi }, .disconnect]
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        let events = try run(server, store, apply: true)
        #expect(server.applied.first?.first == .setCardProfile(card: "alsa_card.sim-phone", profile: "Voice Call"))
        #expect(events.map(\.type) == ["route", "call", "interrupted", "recovered"])
        #expect(store.intents.map(\.reason) == [.call, .call], "announced as the call's move, and done")
    }

    /// The server came back while a state file could not be read: connected once (not again and again,
    /// each a new client), `recovered` said, and the call's route put back once the file reads, as the
    /// call's move.
    @Test func aServerBackWhileAStateFileCannotBeReadIsConnectedOnceAndTheRulesWait() throws {
        let voiceCall = try fixture("sim/pulseaudio-phone-voicecall")
        let hifi = try fixture("sim/pulseaudio-phone")
        let server = FakeServer(voiceCall)
        server.profiles["alsa_card.sim-phone/Voice Call"] = voiceCall
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, applied: true)
        server.script = [.run { server.current = hifi; store.corrupt = true }, .disconnect]
        let (events, warnings) = try runRepaired(afterPauses: 4, server, store)
        #expect(server.reconnects == 1)
        #expect(warnings.count == 1, "\(warnings)")
        #expect(server.applied.first?.first == .setCardProfile(card: "alsa_card.sim-phone", profile: "Voice Call"))
        // (The input the server came back with, HiFi's microphone, is said after `recovered`; the
        // call's, back with the call's route, after its route event.)
        #expect(events.map(\.type) == ["route", "call", "interrupted", "recovered", "input", "route", "input"])
        #expect(routes(events).last == "receiver (was speaker) call")
    }

    /// A state file that becomes unreadable while `watch --apply` runs does not end it (the D-Bus
    /// service a phone shell uses lives in it): said once, tried again each second, and the change
    /// that came meanwhile is handled once the file reads again.
    @Test func aStateFileThatCannotBeReadIsSaidOnceAndTheChangeHandledOnceItReads() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        server.script = [.change(try fixture("sim/pulseaudio-laptop-headphones"))]
        let store = FakeStore()
        store.corrupt = true
        let (events, warnings) = try runRepaired(afterPauses: 3, server, store)
        #expect(warnings.count == 1, "said once, not at each try: \(warnings)")
        #expect(routes(events) == ["speaker initial", "headset (was speaker) new-device-available"])
    }

    /// `watch --apply` with `store`'s files repaired at the `afterPauses`th one-second retry: its
    /// events and its warnings.
    func runRepaired(afterPauses wanted: Int, _ server: FakeServer, _ store: FakeStore) throws -> ([Event], [String]) {
        var pauses = 0
        server.onPause = {
            pauses += 1
            if pauses == wanted { store.corrupt = false }
        }
        var events: [Event] = []
        var warnings: [String] = []
        var watch = Watch(server: server, store: store, clocks: ManualClock().clocks, apply: true, muteOnFallback: false, timeout: 1,
                          snapshot: try server.snapshot(timeout: 1),
                          sink: { events.append($0); return true }, warn: { warnings.append($0) })
        try watch.run()
        #expect(pauses >= wanted, "repaired only after that many retries")
        return (events, warnings)
    }

    /// Plain `watch` beside a `set bluetooth` (another process): the set's intent holds the route
    /// event; WirePlumber's default change is one this connection misses (issue 15), so when the set
    /// says it is done the route has not moved here. A fresh connection shows that it has.
    @Test func aSetWhoseDefaultChangeThisConnectionMissedIsStillReported() throws {
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp")
        var before = a2dp
        before.server.defaultSinkName = laptop
        let clock = ManualClock()
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        store.intents = [RouteIntent(output: "bluez_card.00_11_22_33_44_55", reason: .override, at: at)]
        let server = FakeServer(before)
        server.clock = clock
        // After the set is over, a moment for its own notifications (RouteHold.lag), then a fresh connection.
        server.script = [.change(before), .change(a2dp, defaultSeen: false),
                         ends(store, "bluez_card.00_11_22_33_44_55", at: at),
                         .change(a2dp), .pass(0.2)]
        let events = try run(server, store, apply: false, clock: clock)
        #expect(server.refreshes == 1)
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override"])
    }

    /// Another client's pick is held for the departure window; a `set` that begins meanwhile does not
    /// swallow it: the pick is reported, then the set's move.
    @Test func aChangeStillHeldWhenACommandBeginsIsReportedFirst() throws {
        let all = try fixture("sim/pipewire-all")
        var picked = all
        picked.server.defaultSinkName = "alsa_output.sim-hdmi.hdmi-stereo"
        let clock = ManualClock()
        let store = FakeStore()
        let speaker = try #require(Status(snapshot: all).output?.id)
        let at = clock.clocks.wallMilliseconds()
        let server = FakeServer(all)
        server.script = [.change(picked), begins(store, speaker, at: at),
                         .change(all), ends(store, speaker, at: at),
                         .change(all)]
        let events = try run(server, store, apply: false, clock: clock)
        #expect(routes(events) == ["speaker initial", "unknown (was speaker) route-configuration-change",
                                   "speaker (was unknown) override"])
    }

    /// A command's intent is done, but this connection still shows the server's transient pick (its
    /// notifications trail the command's read-back): the watcher waits a moment for them and reports
    /// one route event, to where the command went.
    @Test func aFinishedCommandWhoseNotificationsLagIsOneRouteEvent() throws {
        let (all, transient, usb, target) = try hdmiPickThenUSB()
        for apply in [false, true] {
            let events = try command(from: all, to: target, during: [.change(transient)],
                                     after: [.change(transient), .pass(0.01), .change(usb), .pass(0.2)], apply: apply)
            #expect(routes(events) == ["speaker initial", "headset (was speaker) override"], "apply: \(apply)")
        }
    }

    /// This watcher, slow under load, reads the command's intent only once the command is done, and
    /// its first refetch shows the server's transient pick (a profile switch's sink gone) with more
    /// notifications already queued: that step of the move is not a route change of its own. One
    /// route event, to where the command went, as when the watcher kept up.
    @Test func aWatcherLateForAFinishedCommandReportsWhereTheMoveEnded() throws {
        let (all, transient, usb, target) = try hdmiPickThenUSB()
        for apply in [false, true] {
            let events = try command(from: all, to: target, during: [], after: [.change(transient), .change(usb), .pass(0.2)],
                                     apply: apply)
            #expect(routes(events) == ["speaker initial", "headset (was speaker) override"], "apply: \(apply)")
        }
    }

    /// The same late watcher, when the pick is where the server stays: reported, whether nothing more
    /// is queued or what is queued only repeats it (a notification the refetch already showed).
    @Test func aLateWatcherStillReportsWhereTheServerStays() throws {
        let (all, picked, _, target) = try hdmiPickThenUSB()
        for after: [FakeServer.Step] in [[.change(picked), .pass(0.2)], [.change(picked), .change(picked), .pass(0.2)]] {
            for apply in [false, true] {
                let events = try command(from: all, to: target, during: [], after: after, apply: apply)
                #expect(routes(events) == ["speaker initial", "unknown (was speaker) route-configuration-change"],
                        "\(after.count) steps, apply: \(apply)")
            }
        }
    }

    /// A command's move reported, then within the second its device goes with more notifications
    /// queued: the fallback is still one route event, with the departure as its reason.
    @Test func aDeviceLeavingJustAfterACommandIsStillReported() throws {
        let (all, _, usb, target) = try hdmiPickThenUSB()
        var unplugged = all
        let card = try #require(usb.defaultSink?.card)
        unplugged.sinks.removeAll { $0.card == card }
        unplugged.sources.removeAll { $0.card == card }
        unplugged.cards.removeAll { $0.index == card }
        for apply in [false, true] {
            let events = try command(from: all, to: target, during: [],
                                     after: [.change(usb), .change(unplugged), .change(unplugged), .pass(0.2)], apply: apply)
            #expect(routes(events) == ["speaker initial", "headset (was speaker) override", "speaker (was headset) old-device-unavailable"],
                    "apply: \(apply)")
            #expect(events.filter { $0.type == "device-removed" }.count == 1, "the departure said once, apply: \(apply)")
        }
    }

    /// A command's end seen in a change that also brings a device: the device event, then the route.
    @Test func aCommandsRouteEventFollowsTheDeviceEventsOfItsChange() throws {
        let laptop = try fixture("sim/pipewire-laptop")
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp")
        let headset = "bluez_card.00_11_22_33_44_55"
        for apply in [false, true] {
            let events = try command(from: laptop, to: headset, during: [.change(laptop)], after: [.change(a2dp), .pass(0.2)],
                                     apply: apply)
            let kinds = events.map(\.type).filter { $0 == "route" || $0.hasPrefix("device-") }
            #expect(kinds == ["route", "device-added", "route"], "apply: \(apply)")
            // The reason is the command's, or (watch --apply) the policy's answer to the arrival.
            #expect(routes(events).last?.hasPrefix("bluetooth (was speaker) ") == true, "apply: \(apply)")
        }
    }

    /// The laptop's speaker with the Bluetooth headset connected, the same with the headset the
    /// default, and the laptop alone; the headset's output id and the speaker's.
    func headsetAndSpeaker() throws -> (connected: Snapshot, moved: Snapshot, gone: Snapshot, headset: String, speaker: String) {
        let laptop = try fixture("sim/pipewire-laptop")
        var connected = try fixture("sim/pipewire-bluetooth-a2dp")
        connected.server.defaultSinkName = laptop.server.defaultSinkName
        var moved = connected
        moved.server.defaultSinkName = try #require(connected.sinks.first { $0.name.hasPrefix("bluez_") }?.name)
        return (connected, moved, laptop, "bluez_card.00_11_22_33_44_55", try #require(Status(snapshot: laptop).output?.id))
    }

    /// An intent written (as `set`, `clear` or `watch --apply` write theirs) by a script step.
    func intent(_ store: FakeStore, _ output: String, _ reason: RouteChangeReason, at: Int64, done: Bool = false) -> FakeServer.Step {
        .run { store.intents.append(RouteIntent(output: output, reason: reason, at: at, done: done)) }
    }

    /// Plain `watch` from `start` through the steps `script` makes from the store and the time (ms)
    /// the watch starts at.
    func watchScript(from start: Snapshot, policyRunning: Bool = false,
                     _ script: (FakeStore, Int64) -> [FakeServer.Step]) throws -> [Event] {
        let clock = ManualClock()
        let store = FakeStore()
        store.policyRunning = policyRunning
        let server = FakeServer(start)
        server.clock = clock
        server.script = script(store, clock.clocks.wallMilliseconds())
        return try run(server, store, apply: false, clock: clock)
    }

    /// A headset connected moments ago; `set bluetooth` moves to it, and it disconnects as the set
    /// ends. `watch --apply` announces (and finishes) its fallback before this plain watcher has
    /// handled the set's move: the move is still the set's (override), not the headset's arrival, and
    /// the fallback is the departure's. When the disconnect is already queued, the watcher sees the
    /// whole of it as one change: no route event. The headset then comes back and the server moves to
    /// it: its arrival, which the set's move does not explain.
    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func aCommandsMoveOverwrittenByTheFallbackKeepsItsReason(policyRunning: Bool, queued: Bool) throws {
        let (connected, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: gone, policyRunning: policyRunning) { store, t in [
            // The headset connects; watch --apply moves to it (rule 3).
            .change(connected), intent(store, headset, .newDeviceAvailable, at: t), .change(moved),
            intent(store, headset, .newDeviceAvailable, at: t, done: true), .pass(0.1),
            // `set speaker --force`.
            intent(store, speaker, .override, at: t + 100), .change(connected), intent(store, speaker, .override, at: t + 100, done: true),
            .pass(0.1),
            // `set bluetooth`; the headset disconnects as it ends and watch --apply falls back, all
            // before this watcher has taken the set's move in.
            intent(store, headset, .override, at: t + 200), intent(store, headset, .override, at: t + 200, done: true), .pass(0.01),
            intent(store, speaker, .oldDeviceUnavailable, at: t + 210), intent(store, speaker, .oldDeviceUnavailable, at: t + 210, done: true),
        ] + (queued ? [.change(moved), .change(gone)] : [.change(moved), .pass(0.01), .change(gone)]) + [
            .pass(0.3), .change(moved), .pass(0.3),
        ] }
        let before = ["speaker initial", "bluetooth (was speaker) new-device-available", "speaker (was bluetooth) override"]
        let race = queued ? [] : ["bluetooth (was speaker) override", "speaker (was bluetooth) old-device-unavailable"]
        #expect(routes(events) == before + race + ["bluetooth (was speaker) new-device-available"],
                "watch --apply running: \(policyRunning), the disconnect queued: \(queued)")
    }

    /// A phone's headphones pulled, and under a second later `clear` moves the route from the speaker
    /// to the earpiece in the call profile (the persistent default, set meanwhile). This watcher,
    /// slower than the command, sees the card's profile switch first (its sinks not yet replaced),
    /// then the earpiece: a move to another port of the card moments after one of its jacks was
    /// pulled, which the rules alone would take for the server's answer to the departure. The clear
    /// announced it: its route event is the clear's (override). (e2e-cards on PulseAudio, plain watch,
    /// when `clear` finished before this watcher's first refetch.)
    @Test(arguments: [false, true])
    func aCommandsPortMoveJustAfterAJackWasPulledKeepsItsReason(policyRunning: Bool) throws {
        let pulled = try fixture("sim/pulseaudio-phone")
        let voiceCall = try fixture("sim/pulseaudio-phone-voicecall")
        let hifi = "alsa_output.sim-phone.HiFi__hw_Phone__sink"
        let plugged = pulled.jack(hifi, "[Out] Headphones", .available).routed(to: hifi, port: "[Out] Headphones")
        var switched = pulled
        switched.cards[0].activeProfile = "Voice Call"
        let speaker = "alsa_card.sim-phone:[Out] Speaker", earpiece = "alsa_card.sim-phone:[Out] Earpiece"
        let events = try watchScript(from: plugged, policyRunning: policyRunning) { store, t in [
            // The jack pulled: the server takes the speaker, and watch --apply's answer is where it is.
            intent(store, speaker, .oldDeviceUnavailable, at: t), .change(pulled),
            intent(store, speaker, .oldDeviceUnavailable, at: t, done: true), .pass(0.8),
            // `default earpiece`, then `clear`, done before this watcher's refetch: the profile switch,
            // then the earpiece port.
            .run { store.preferencesValue.defaultTarget = .earpiece },
            intent(store, earpiece, .override, at: t + 800), intent(store, earpiece, .override, at: t + 800, done: true),
            .change(switched), .pass(0.001), .change(voiceCall), .pass(0.3),
        ] }
        #expect(routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable", "receiver (was speaker) override"],
                "watch --apply running: \(policyRunning)")
    }

    /// `clear` moves the route from the speaker (an override) to the plugged headphones, and a USB
    /// headset arrives in the same refetch, the server's default staying on the headphones: the rules
    /// move on to the headset (rule 1). `watch --apply`, waiting on the route lock for the clear, sees
    /// both in one change and reports one move; so does plain watch, whose prediction of that move
    /// holds the clear's route event although the clear announced it.
    @Test(arguments: [false, true])
    func aCommandsMoveTheRulesMoveOnFromIsOneRouteEvent(apply: Bool) throws {
        let usbCard = "alsa_card.sim-usb-headset", usb = "alsa_output.sim-usb-headset.analog-stereo"
        let base = try fixture("sim/pulseaudio-all").without(["alsa_card.sim-phone", "alsa_card.sim-hdmi"])
            .jack(laptop, "analog-output-headphones", .available)
        let start = base.without([usbCard]).routed(to: laptop, port: "analog-output-speaker")
        let cleared = base.routed(to: laptop, port: "analog-output-headphones")
        let phones = try #require(Status(snapshot: cleared).output?.id)
        let headset = try #require(Status(snapshot: cleared.routed(to: usb)).output?.id)
        let clock = ManualClock()
        let store = FakeStore()
        store.record = OverrideRecord(target: .speaker, setAt: 0, externals: [phones])
        store.policyRunning = !apply
        let server = FakeServer(start)
        server.clock = clock
        let t = clock.clocks.wallMilliseconds()
        // The clear, finished before the watchers' refetch.
        server.script = [intent(store, phones, .override, at: t), .run { store.record = nil },
                         intent(store, phones, .override, at: t, done: true), .change(cleared)]
            // Plain watch: watch --apply's answer, as another process makes it.
            + (apply ? [] : [intent(store, headset, .newDeviceAvailable, at: t + 10), .change(cleared.routed(to: usb)),
                             intent(store, headset, .newDeviceAvailable, at: t + 10, done: true)])
            + [.pass(0.3)]
        let events = try run(server, store, apply: apply, clock: clock)
        #expect(routes(events) == ["speaker initial", "headset (was speaker) new-device-available"], "apply: \(apply)")
        #expect(Status(snapshot: server.current).output?.id == headset, "apply: \(apply)")
    }

    /// pipewire-pulse forwards no default change to a connected client while a new client connects
    /// (`refreshStaleDefaults`): this watcher sees the headset come but neither `watch --apply`'s move
    /// to it nor `set speaker --force`'s back, and nothing wakes it meanwhile. Then `set bluetooth`
    /// moves to the headset, and it disconnects. The arrival's move, held and never seen, was over
    /// once a later command announced its own: the set's move is the set's (override), not the
    /// arrival's. (Once in e2e-bluetooth on PipeWire, plain watch named it new-device-available.)
    @Test func aHeldMoveALaterCommandReplacedLendsItNoReason() throws {
        let (connected, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let clock = ManualClock()
        let store = FakeStore()
        store.policyRunning = true
        let server = FakeServer(gone)
        server.clock = clock
        let t = clock.clocks.wallMilliseconds()
        server.script = [
            intent(store, headset, .newDeviceAvailable, at: t), .change(connected),
            .change(moved, defaultSeen: false), intent(store, headset, .newDeviceAvailable, at: t, done: true),
            intent(store, speaker, .override, at: t + 600), .run { server.current = connected; server.missed = nil },
            intent(store, speaker, .override, at: t + 600, done: true),
            intent(store, headset, .override, at: t + 1200), intent(store, headset, .override, at: t + 1200, done: true),
            .change(moved), .pass(0.02), .change(gone), .pass(0.5),
        ]
        let events = try run(server, store, apply: false, clock: clock)
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override", "speaker (was bluetooth) old-device-unavailable"])
    }

    /// `call end` on a phone (PipeWire): it announces the speaker, switches the card back to HiFi
    /// (the server passes through the headphones port), and its move to the speaker announces the
    /// speaker again. The first announcement, never seen reached, hands the route events over to the
    /// second, still in progress: one route event, to the speaker, not the port on the way. (Once in
    /// e2e-calls on PipeWire.)
    @Test func aMoveAnnouncedAgainByItsOwnCommandIsOneRouteEvent() throws {
        let call = try fixture("sim/pipewire-phone17-voicecall")
        let hifi = try fixture("sim/pipewire-phone17")
        var passing = hifi
        passing.sinks[0].activePort = "[Out] Headphones"
        let speaker = "alsa_card.sim-phone17:[Out] Speaker"
        let events = try watchScript(from: call, policyRunning: true) { store, t in [
            intent(store, speaker, .call, at: t), .change(passing), intent(store, speaker, .call, at: t + 5), .change(hifi),
            intent(store, speaker, .call, at: t + 5, done: true), .pass(0.1), intent(store, speaker, .call, at: t, done: true), .pass(0.5),
        ] }
        #expect(routes(events) == ["receiver initial", "speaker (was receiver) call"])
    }

    /// `set bluetooth --device` moves to a headset, and this watcher sees it get there; moments later
    /// another client switches the headset to HFP (PipeWire: the A2DP sink goes, the default parks
    /// on the laptop, the HFP sink comes under the same name): the flip's, not the set's. (Once in
    /// e2e-bluetooth on PipeWire, plain watch named it override.) A watcher's refetch may also show
    /// the flip whole, the headset's new sink the default.
    @Test(arguments: [true, false])
    func aFinishedMoveSeenArrivingExplainsNoFlipOfItsDevice(parked: Bool) throws {
        let (connected, moved, _, headset, _) = try headsetAndSpeaker()
        let laptop = "alsa_output.sim-laptop.analog-stereo"
        let hfp = try fixture("sim/pipewire-bluetooth-hfp")
        var gone = moved
        gone.sinks.removeAll { $0.name.hasPrefix("bluez_") }
        gone.server.defaultSinkName = laptop
        let events = try watchScript(from: connected) { store, t in [
            intent(store, headset, .override, at: t), .change(moved), intent(store, headset, .override, at: t, done: true),
            .pass(0.2)] + (parked ? [.change(gone), .pass(0.01)] : []) + [.change(hfp), .pass(0.5),
        ] }
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override", "bluetooth (was bluetooth) category-change"],
                "parked on the laptop: \(parked)")
    }

    /// A move this watcher has seen reach its output explains no later return there: another client
    /// putting the route back on the headset after a `set speaker` is that client's choice.
    @Test func aMoveSeenAlreadyExplainsNoLaterReturn() throws {
        let (connected, moved, _, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: connected) { store, t in [
            intent(store, headset, .override, at: t), .change(moved), intent(store, headset, .override, at: t, done: true), .pass(0.05),
            intent(store, speaker, .override, at: t + 50), .change(connected), intent(store, speaker, .override, at: t + 50, done: true),
            .pass(0.05), .change(moved), .pass(0.3),
        ] }
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override", "speaker (was bluetooth) override",
                                   "bluetooth (was speaker) route-configuration-change"])
    }

    /// `set speaker` then `set bluetooth`, both missed by a watcher slow under load (the route is back
    /// where it was); then the headset goes and the server falls back to the speaker: the departure,
    /// not the replaced `set speaker`.
    @Test func aReplacedMoveDoesNotExplainADeparturesFallback() throws {
        let (_, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: moved) { store, t in [
            intent(store, speaker, .override, at: t), intent(store, speaker, .override, at: t, done: true), .pass(0.05),
            intent(store, headset, .override, at: t + 50), intent(store, headset, .override, at: t + 50, done: true), .change(moved),
            .pass(0.1), .change(gone), .pass(0.3),
        ] }
        #expect(routes(events) == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable"])
    }

    /// A `set bluetooth` whose move this watcher saw only merged with the headset's departure (the
    /// disconnect queued behind it); the headset comes back within the second, the server reporting
    /// it and then moving to it in two notifications: its arrival, not the set's move.
    @Test func aHeadsetBackInTwoNotificationsIsItsArrival() throws {
        let (connected, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: connected) { store, t in [
            intent(store, headset, .override, at: t), intent(store, headset, .override, at: t, done: true), .pass(0.01),
            intent(store, speaker, .oldDeviceUnavailable, at: t + 10), intent(store, speaker, .oldDeviceUnavailable, at: t + 10, done: true),
            .change(moved), .change(gone), .pass(0.2),
            .change(connected), .pass(0.01), .change(moved), .pass(0.3),
        ] }
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) new-device-available"])
    }

    /// `set speaker` then `set bluetooth`, whose moves this watcher saw as one (the route stayed on
    /// the headset); then the headset goes, the server moving to the speaker a notification before it
    /// reports the headset gone: the departure, not the replaced `set speaker`.
    @Test func aFallbackBeforeItsDepartureIsNotAReplacedMove() throws {
        let (connected, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: moved) { store, t in [
            intent(store, speaker, .override, at: t), intent(store, speaker, .override, at: t, done: true), .pass(0.05),
            intent(store, headset, .override, at: t + 50), intent(store, headset, .override, at: t + 50, done: true), .change(moved),
            .pass(0.1), .change(connected), .pass(0.01), .change(gone), .pass(0.5),
        ] }
        #expect(routes(events) == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable"])
    }

    /// A watcher started just after `set bluetooth` and `watch --apply`'s fallback from the headset
    /// (it has seen neither move): the headset comes back and the server moves to it in one
    /// notification. An output the change adds is its arrival, not the replaced set's move.
    @Test func anOutputTheChangeAddsIsItsArrivalNotAReplacedMove() throws {
        let (_, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: gone) { store, t in [
            intent(store, headset, .override, at: t - 300), intent(store, headset, .override, at: t - 300, done: true),
            intent(store, speaker, .oldDeviceUnavailable, at: t - 290), intent(store, speaker, .oldDeviceUnavailable, at: t - 290, done: true),
            .change(moved), .pass(0.3),
        ] }
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) new-device-available"])
    }

    /// A watcher started just after `set speaker` then `set bluetooth` (it has seen neither move):
    /// the headset goes and the server falls back to the speaker in one notification. Leaving an
    /// output that went is the departure, not the replaced `set speaker`.
    @Test func leavingAnOutputThatWentIsTheDepartureNotAReplacedMove() throws {
        let (_, moved, gone, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: moved) { store, t in [
            intent(store, speaker, .override, at: t - 300), intent(store, speaker, .override, at: t - 300, done: true),
            intent(store, headset, .override, at: t - 250), intent(store, headset, .override, at: t - 250, done: true),
            .change(gone), .pass(0.3),
        ] }
        #expect(routes(events) == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable"])
    }

    /// A move replaced while still in progress explains only the second after it began, as a finished
    /// one: a command that died before its done-write does not name a change seconds later.
    @Test func aMoveReplacedInProgressExplainsOnlyTheSecondAfterIt() throws {
        let (connected, moved, _, headset, speaker) = try headsetAndSpeaker()
        let events = try watchScript(from: connected) { store, t in [
            intent(store, headset, .override, at: t - 1500),
            intent(store, speaker, .override, at: t), intent(store, speaker, .override, at: t, done: true),
            .change(moved), .pass(0.3),
        ] }
        #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) route-configuration-change"])
    }

    /// An HDMI monitor wakes and the server makes it the default; `watch --apply` puts the route back
    /// (its intent says `restored`). Plain watch reports the steal and the restore whether a refetch
    /// showed the steal or none did (the monitor seen arriving with the restore, or before the steal):
    /// the same lines as `watch --apply`.
    @Test func aStealUndoneBeforeThisWatchersRefetchIsStillReported() throws {
        let hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let all = try fixture("sim/pipewire-all")
        let card = try #require(all.sinks.first { $0.name == hdmi }?.card)
        var asleep = all
        asleep.sinks.removeAll { $0.card == card }
        asleep.sources.removeAll { $0.card == card }
        asleep.cards.removeAll { $0.index == card }
        var stolen = all
        stolen.server.defaultSinkName = hdmi
        let speaker = try #require(Status(snapshot: all).output?.id)
        let expected = ["speaker initial", "unknown (was speaker) new-device-available", "speaker (was unknown) restored"]
        for (seenStolen, seenArriving) in [(true, false), (false, false), (false, true)] {
            let clock = ManualClock()
            let store = FakeStore()
            let at = clock.clocks.wallMilliseconds()
            let restore: [FakeServer.Step] = [.run { store.intents.append(RouteIntent(output: speaker, reason: .restored, at: at)) },
                                              .run { store.intents.append(RouteIntent(output: speaker, reason: .restored, at: at, done: true)) }]
            let server = FakeServer(asleep)
            server.clock = clock
            let arriving: [FakeServer.Step] = seenArriving ? [.change(all)] : []
            server.script = arriving + (seenStolen ? [.change(stolen)] + restore : restore) + [.change(all), .pass(0.2)]
            let events = try run(server, store, apply: false, clock: clock)
            #expect(routes(events) == expected, "the steal seen: \(seenStolen), the monitor arriving: \(seenArriving)")
            #expect(events.filter { $0.type == "device-added" }.count == 1)
        }
        // A refetch taken before the steal, the restore's intent read after it was announced: the
        // steal and the restore are reported then, and the later refetches that show them add nothing.
        let clock = ManualClock()
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        let server = FakeServer(asleep)
        server.clock = clock
        server.script = [.run { store.intents.append(RouteIntent(output: speaker, reason: .restored, at: at)) }, .change(all),
                         .change(stolen), .run { store.intents.append(RouteIntent(output: speaker, reason: .restored, at: at, done: true)) },
                         .change(all), .pass(1.5), .change(stolen), .pass(0.5)]
        // A user's pick of the monitor later on is reported as any pick is.
        #expect(routes(try run(server, store, apply: false, clock: clock))
                == expected + ["unknown (was speaker) route-configuration-change"], "the steal reported once")
    }

    /// The same, with the speaker forced behind plugged headphones: the restore cannot go back to it
    /// and gives the headphones the sound (rule 7). Both moves between two refetches of plain watch
    /// (a busy machine): the steal and the restore onto the headphones are still two route events.
    @Test func aStealUndoneOntoTheHeadphonesBeforeThisWatchersRefetchIsStillReported() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let all = try fixture("sim/pipewire-all").jack(laptop, "analog-output-headphones", .available)
        let card = try #require(all.sinks.first { $0.name == hdmi }?.card)
        var asleep = all.routed(to: laptop, port: "analog-output-speaker")
        asleep.sinks.removeAll { $0.card == card }
        asleep.sources.removeAll { $0.card == card }
        asleep.cards.removeAll { $0.index == card }
        let restored = all.routed(to: laptop, port: "analog-output-headphones")
        let phones = "alsa_card.sim-laptop:analog-output-headphones"
        let clock = ManualClock()
        let store = FakeStore()
        let at = clock.clocks.wallMilliseconds()
        let server = FakeServer(asleep)
        server.clock = clock
        server.script = [.run { store.intents.append(RouteIntent(output: phones, reason: .restored, at: at)) },
                         .run { store.intents.append(RouteIntent(output: phones, reason: .restored, at: at, done: true)) },
                         .change(restored), .pass(0.2)]
        let events = try run(server, store, apply: false, clock: clock)
        #expect(routes(events) == ["speaker initial", "unknown (was speaker) new-device-available", "headset (was unknown) restored"])
    }

    /// Plain `watch` beside `watch --apply`: a Bluetooth headset connects, and the watcher holds its
    /// prediction of the policy's move there. The policy's move and a `set speaker --force` back fall
    /// between two of this watcher's refetches (no route change seen), then `set bluetooth` begins
    /// and ends before the next: the arrival is that set's (override), not the prediction's.
    @Test func aCommandOverBetweenRefetchesSupersedesAHeldPrediction() throws {
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp")
        let headset = try #require(Status(snapshot: a2dp).output?.id)
        let card = try #require(a2dp.defaultSink?.card)
        var before = a2dp
        before.sinks.removeAll { $0.card == card }
        before.sources.removeAll { $0.card == card }
        before.cards.removeAll { $0.index == card }
        before.server.defaultSinkName = laptop
        before.server.defaultSourceName = before.sources.first { $0.monitorOfSink == nil }?.name
        var connected = before
        connected.sinks = a2dp.sinks.filter { $0.card == card } + before.sinks
        connected.sources = a2dp.sources.filter { $0.card == card } + before.sources
        connected.cards = a2dp.cards
        // Over before the refetch that shows the arrival, or still under way at it.
        for overFirst in [true, false] {
            let clock = ManualClock()
            let store = FakeStore()
            store.policyRunning = true
            let at = clock.clocks.wallMilliseconds() + 300
            let set = [begins(store, headset, at: at), ends(store, headset, at: at)]
            let script = overFirst ? set + [.change(a2dp)] : [set[0], .change(a2dp), set[1]]
            let server = FakeServer(before)
            server.clock = clock
            server.script = [.change(connected), .pass(0.3)] + script + [.pass(2)]
            let events = try run(server, store, apply: false, clock: clock)
            #expect(routes(events) == ["speaker initial", "bluetooth (was speaker) override"], "over first: \(overFirst)")
        }
    }

    /// A muted call stays muted when its input moves: the server gives the new port (or source) the
    /// mute it remembers for it, and `watch --apply` mutes it again when the call's mute (the one
    /// routectl set in `call.json`, or one another tool set since on the input) is on; within a
    /// second of the move, only routectl's own unmute is told from the server's. It never unmutes by
    /// itself. No call, nothing is touched.
    @Test func theCallsMuteStaysAsItsInputMoves() throws {
        let laptop = try fixture("sim/pulseaudio-laptop")
        let source = try #require(laptop.defaultSource?.name)
        func input(_ port: String, muted: Bool) -> Snapshot {
            var s = laptop
            if let i = s.sources.firstIndex(where: { $0.name == source }) {
                s.sources[i].activePort = port
                s.sources[i].mute = muted
            }
            return s
        }
        let builtIn = "analog-input-internal-mic", jack = "analog-input-mic"
        func mutes(start: Snapshot, recorded: Bool?, _ steps: (FakeStore) -> [FakeServer.Step]) throws -> [Bool] {
            let clock = ManualClock()
            let store = FakeStore()
            store.call = recorded.map { CallRecord(startedAt: 10_000, speaker: false, callMute: CallRecord.Mute(muted: $0, at: 10_000)) }
            let server = FakeServer(start)
            server.clock = clock
            server.script = steps(store) + [.pass(2)]
            _ = try run(server, store, apply: true, clock: clock)
            return server.applied.flatMap { $0 }.compactMap { action in
                if case let .setSourceMute(name, mute) = action, name == source { return mute } else { return nil }
            }
        }
        // Muted with routectl; the jack's port comes live: muted again.
        #expect(try mutes(start: input(builtIn, muted: true), recorded: true) { _ in [.change(input(jack, muted: false))] } == [true])
        // Muted with another tool during the call (no move): that is the call's mute when the input moves.
        #expect(try mutes(start: input(builtIn, muted: false), recorded: false) { _ in
            [.change(input(builtIn, muted: true)), .pass(2), .change(input(jack, muted: false))]
        } == [true])
        // routectl's own unmute within the second after the move stands.
        #expect(try mutes(start: input(builtIn, muted: true), recorded: true) { store in
            [.change(input(jack, muted: false)),
             .run { store.call?.callMute = CallRecord.Mute(muted: false, at: 1_000_100) }, .change(input(jack, muted: false))]
        } == [true])
        // Another tool's unmute past that second stands too.
        #expect(try mutes(start: input(builtIn, muted: true), recorded: true) { _ in
            [.change(input(jack, muted: false)), .pass(2), .change(input(jack, muted: false)), .pass(2), .change(input(builtIn, muted: false))]
        } == [true])
        // An unmute of the moved input within that second, not routectl's, cannot be told from the
        // server's restore: the call stays muted.
        #expect(try mutes(start: input(builtIn, muted: true), recorded: true) { _ in
            [.change(input(jack, muted: true)), .pass(0.2), .change(input(jack, muted: false))]
        } == [true])
        // routectl never unmutes by itself: unmuted in the call, a port the server remembers muted stays so.
        #expect(try mutes(start: input(builtIn, muted: false), recorded: false) { _ in [.change(input(jack, muted: true))] }.isEmpty)
        // No call: the server's mutes are its own.
        #expect(try mutes(start: input(builtIn, muted: true), recorded: nil) { _ in [.change(input(jack, muted: false))] }.isEmpty)
    }

    /// A playing stream the server moves (its sink gone, the route changed) shows on no sink for a
    /// few milliseconds: no `engaged no`/`other-audio stopped` for that. A real stop is reported once
    /// the moment has passed; both modes.
    @Test func aStreamMovedIsNoStopButAStopIs() throws {
        var playing = try fixture("sim/pulseaudio-laptop")
        let sink = try #require(playing.defaultSink?.index)
        playing.sinkInputs = [SinkInput(index: 7, sink: sink)]
        var none = playing
        none.sinkInputs = []
        func stops(_ script: [FakeServer.Step], apply: Bool) throws -> [String] {
            let clock = ManualClock()
            let server = FakeServer(playing)
            server.clock = clock
            server.script = script
            return try run(server, FakeStore(), apply: apply, clock: clock).compactMap { event in
                switch event {
                case let .engaged(on): return "engaged \(on)"
                case let .otherAudio(on): return "other-audio \(on)"
                default: return nil
                }
            }
        }
        for apply in [false, true] {
            #expect(try stops([.change(none), .pass(0.01), .change(playing), .pass(0.2)], apply: apply).isEmpty, "apply: \(apply)")
            #expect(try stops([.change(none), .pass(0.2), .change(playing), .pass(0.2)], apply: apply)
                    == ["engaged false", "other-audio false", "engaged true", "other-audio true"], "apply: \(apply)")
        }
    }

    @Test func anotherClientsPickIsReportedAndRespected() throws {
        let hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let all = try fixture("sim/pipewire-all")
        let server = FakeServer(all)
        var picked = all
        picked.server.defaultSinkName = hdmi
        server.script = [.change(picked)]
        let events = try run(server, FakeStore(), apply: true)
        #expect(server.applied.isEmpty, "rule 5: routectl does not undo another client's choice")
        #expect(routes(events).last == "unknown (was speaker) route-configuration-change")
    }
}

@Suite struct DepartureTests {
    /// WirePlumber moves the default off a sleeping monitor a notification before pipewire-pulse
    /// reports its port gone: still the monitor's departure, not another client's pick. Plain watch
    /// reports the server's fallback; watch --apply answers the departure by rule 3 as when both come
    /// in one notification: the USB headset, the external device connected.
    @Test func aMonitorReportedGoneJustAfterTheDefaultLeftIt() throws {
        let hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        var onHDMI = try fixture("sim/pipewire-all")
        onHDMI.server.defaultSinkName = hdmi
        var moved = onHDMI
        moved.server.defaultSinkName = "alsa_output.sim-laptop.analog-stereo"
        let gone = moved.jack(hdmi, "hdmi-output-0", .unavailable)
        let watching = FakeServer(onHDMI)
        watching.script = [.change(moved), .change(gone)]
        #expect(WatchTests().routes(try WatchTests().run(watching, FakeStore(), apply: false))
            == ["unknown initial", "speaker (was unknown) old-device-unavailable"])
        #expect(watching.applied.isEmpty)
        var answers: [[[Action]]] = []
        for script: [FakeServer.Step] in [[.change(moved), .change(gone)], [.change(gone)]] {
            let server = FakeServer(onHDMI)
            server.script = script
            let events = try WatchTests().run(server, FakeStore(), apply: true)
            #expect(WatchTests().routes(events) == ["unknown initial", "headset (was unknown) old-device-unavailable"])
            answers.append(server.applied)
        }
        #expect(answers[0] == answers[1], "the move a notification early changes nothing")
        #expect(answers[0].first?.first == .setDefaultSink("alsa_output.sim-usb-headset.analog-stereo"))
    }
}

/// The phone's headset pulled in a call whose target is the speaker (callaudiod's EnableSpeaker):
/// WirePlumber selects the best port left (the earpiece) at times a notification before it reports
/// the headphones unplugged. The rules answer the headset's departure all the same: the speaker.
@Suite struct ServerMoveBeforeDepartureTests {
    let phone = "alsa_output.sim-phone.Voice_Call__hw_Phone__sink"

    func scenario(gap: Double) throws -> (FakeServer, [Event]) {
        var plugged = try fixture("sim/pipewire-phone-voicecall").jack(phone, "[Out] Headphones", .available)
        plugged.sinks[0].activePort = "[Out] Headphones"
        var moved = plugged
        moved.sinks[0].activePort = "[Out] Earpiece"
        let pulled = moved.jack(phone, "[Out] Headphones", .unavailable)
        let clock = ManualClock()
        let store = FakeStore()
        store.call = CallRecord(startedAt: clock.clocks.wallMilliseconds(), speaker: true)
        let server = FakeServer(plugged)
        server.script = [.change(moved), .run { clock.seconds += gap }, .timeout, .change(pulled)]
        return (server, try WatchTests().run(server, store, apply: true, clock: clock))
    }

    @Test func theMoveThenTheDepartureIsTheDeparture() throws {
        let (server, events) = try scenario(gap: 0.05)
        #expect(server.applied.first?.first == .setSinkPort(sink: phone, port: "[Out] Speaker"))
        #expect(WatchTests().routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable"])
    }

    /// The jack's removal reaches routectl first: it selects the speaker, and WirePlumber, answering the
    /// same jack, selects the earpiece just after. routectl carries its plan out once more.
    @Test func aPortTheServerChoseJustAfterRoutectlsIsChosenAgain() throws {
        var plugged = try fixture("sim/pipewire-phone-voicecall").jack(phone, "[Out] Headphones", .available)
        plugged.sinks[0].activePort = "[Out] Headphones"
        let pulled = plugged.jack(phone, "[Out] Headphones", .unavailable)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 0, speaker: true)
        let server = FakeServer(plugged)
        server.overruleOnce = { $0.sinks[0].activePort = "[Out] Earpiece" }
        server.script = [.change(pulled)]
        let events = try WatchTests().run(server, store, apply: true)
        let ports = server.applied.flatMap { $0 }.filter { if case .setSinkPort = $0 { return true } else { return false } }
        #expect(ports == [.setSinkPort(sink: phone, port: "[Out] Speaker"), .setSinkPort(sink: phone, port: "[Out] Speaker")])
        #expect(server.current.sinks[0].activePort == "[Out] Speaker")
        #expect(WatchTests().routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable"])
        #expect(server.refreshes == 0, "not a default this connection missed")
    }

    /// A Bluetooth headset disconnecting: WirePlumber makes the laptop's sink the default a
    /// notification before the headset's sink goes. Rule 3 still picks the next device, the headphones.
    @Test func aHeadsetReportedGoneJustAfterTheServerMovedTheRouteToAnotherCard() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", bluez = "bluez_output.00_11_22_33_44_55.1"
        var onHeadset = try fixture("sim/pipewire-bluetooth-a2dp").jack(laptop, "analog-output-headphones", .available)
        onHeadset.server.defaultSinkName = bluez
        if let i = onHeadset.sinks.firstIndex(where: { $0.name == laptop }) { onHeadset.sinks[i].activePort = "analog-output-speaker" }
        var moved = onHeadset
        moved.server.defaultSinkName = laptop
        var gone = moved
        gone.sinks.removeAll { $0.name == bluez }
        gone.cards.removeAll { $0.name.hasPrefix("bluez_card.") }
        let server = FakeServer(onHeadset)
        server.script = [.change(moved), .change(gone)]
        let events = try WatchTests().run(server, FakeStore(), apply: true)
        #expect(server.applied.flatMap { $0 }.contains(.setSinkPort(sink: laptop, port: "analog-output-headphones")))
        #expect(WatchTests().routes(events) == ["bluetooth initial", "headset (was bluetooth) old-device-unavailable"])
    }

    @Test func aDepartureLongAfterTheMoveLeavesTheMoveStanding() throws {
        let (server, events) = try scenario(gap: 2)
        #expect(server.applied.isEmpty, "the port picked a while before is another client's pick, respected")
        #expect(WatchTests().routes(events).last == "receiver (was headset) route-configuration-change")
    }
}

/// `set earpiece` on a phone switches the card's profile: its sink goes and the new one comes, at
/// times a notification apart. A watch --apply that sees the moment between leaves it to the command.
@Suite struct OwnProfileSwitchTests {
    @Test func theSinkGoneDuringRoutectlsOwnSwitchIsNotARouteLost() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo"
        let before = try fixture("sim/pipewire-all")
        var between = before
        between.sinks.removeAll { $0.name == laptop }
        between.server.defaultSinkName = nil
        let clock = ManualClock()
        for own in [true, false] {
            let server = FakeServer(before)
            let store = FakeStore()
            if own {
                server.script = [.run { store.saveIntent(RouteIntent(output: "alsa_card.sim-laptop:analog-output-headphones",
                                                                     reason: .override, at: clock.clocks.wallMilliseconds())) },
                                 .change(between)]
            } else {
                server.script = [.change(between)]
            }
            let events = try WatchTests().run(server, store, apply: true, clock: clock)
            let lost = WatchTests().routes(events).contains { $0.hasSuffix("no-suitable-route") }
            #expect(lost == !own, own ? "routectl's own switch: left to it" : "a route lost: the rules answer")
        }
    }
}

@Suite struct ServerFallbackTests {
    /// WirePlumber on a pulled headphone jack with an idle headset connected (phone17, issue 15): one
    /// burst marks the headphones unavailable and makes the headset's sink the default, its stand-in
    /// while the default it remembers (the phone's sink, set by an earlier `set speaker`) is unusable;
    /// moments later it selects the speaker port and goes back to the phone's sink. The policy wants the
    /// headset (rule 3) and must name it, though it is the default already, or WirePlumber undoes it.
    @Test func theFallbackTheServerAlreadyPickedIsClaimed() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo", bluez = "bluez_output.00_11_22_33_44_55.1"
        var plugged = try fixture("sim/pipewire-bluetooth-a2dp").jack(laptop, "analog-output-headphones", .available)
        plugged.server.defaultSinkName = laptop
        if let i = plugged.sinks.firstIndex(where: { $0.name == laptop }) { plugged.sinks[i].activePort = "analog-output-headphones" }
        var pulled = plugged.jack(laptop, "analog-output-headphones", .unavailable)
        pulled.server.defaultSinkName = bluez
        let server = FakeServer(plugged)
        server.script = [.change(pulled)]
        let events = try WatchTests().run(server, FakeStore(), apply: true)
        #expect(server.applied == [[.setDefaultSink(bluez)]])
        #expect(WatchTests().routes(events) == ["headset initial", "bluetooth (was headset) old-device-unavailable"])
    }
}

@Suite struct ProfileFlipTests {
    /// Another client switches the headset to HFP; its A2DP sink vanishes and the server parks the
    /// default on the laptop meanwhile: one category-change, and the same headset keeps the sound.
    /// A2DP -> HFP by another client on PipeWire, as WirePlumber and pipewire-pulse report it: the A2DP
    /// sink goes and the default falls to the laptop; the card is in HFP and its new sink, under the
    /// same name, is the default; WirePlumber's late pick of the laptop arrives; then WirePlumber makes
    /// the headset's sink the default again, a change this connection misses (issue 15). At the end of
    /// the window the route is not back on the headset here: a fresh connection says it is.
    @Test func aFlipWhoseReturnThisConnectionMissedIsStillOneCategoryChange() throws {
        let laptop = "alsa_output.sim-laptop.analog-stereo"
        let a2dp = try fixture("sim/pipewire-bluetooth-a2dp"), hfp = try fixture("sim/pipewire-bluetooth-hfp")
        var gone = a2dp
        gone.sinks.removeAll { $0.name.hasPrefix("bluez_") }
        gone.server.defaultSinkName = laptop
        var parked = hfp
        parked.server.defaultSinkName = laptop
        for apply in [false, true] {
            let clock = ManualClock()
            let server = FakeServer(a2dp)
            server.script = [.change(gone), .change(hfp), .change(parked), .change(hfp, defaultSeen: false),
                             .run { clock.seconds += 1 }, .timeout, .timeout]
            let events = try WatchTests().run(server, FakeStore(), apply: apply, clock: clock)
            #expect(server.refreshes == 1, "apply: \(apply)")
            #expect(WatchTests().routes(events) == ["bluetooth initial", "bluetooth (was bluetooth) category-change"], "apply: \(apply)")
        }
    }

    /// A headset owed A2DP (it left during a call) that the server brings back in HFP with no call gets
    /// A2DP back as it arrives, from `watch --apply` alone: one arrival. In a call it keeps HFP and
    /// stays owed; at the start of `watch --apply`, one already here is paid, reported as the tail of
    /// the call's end.
    @Test func aHeadsetOwedItsProfileGetsItBackAsItArrives() throws {
        let headset = "bluez_card.00_11_22_33_44_55"
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp"), hfp = try fixture("sim/pulseaudio-bluetooth-hfp")
        let away = a2dp.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo")
        let owed = [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")]
        for (apply, inCall) in [(false, false), (true, false), (true, true)] {
            let server = FakeServer(away)
            server.profiles["\(headset)/a2dp_sink"] = a2dp
            server.script = [.change(hfp)]
            let store = FakeStore()
            store.owed = owed
            if inCall { store.call = CallRecord(startedAt: 0, speaker: false) }
            let events = try WatchTests().run(server, store, apply: apply)
            let paid = apply && !inCall
            let switches = server.applied.joined().filter { if case .setCardProfile = $0 { true } else { false } }
            #expect(switches == (paid ? [.setCardProfile(card: headset, profile: "a2dp_sink")] : []), "apply: \(apply), in a call: \(inCall)")
            #expect(store.owed == (paid ? [] : owed), "apply: \(apply), in a call: \(inCall)")
            if paid {
                #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
                #expect(events.filter { $0.type == "device-added" }.count == 1)
                #expect(WatchTests().routes(events) == ["speaker initial", "bluetooth (was speaker) new-device-available"])
            }
        }
        let server = FakeServer(hfp)
        server.profiles["\(headset)/a2dp_sink"] = a2dp
        let store = FakeStore()
        store.owed = owed
        let events = try WatchTests().run(server, store, apply: true)
        #expect(server.applied.first == [.setCardProfile(card: headset, profile: "a2dp_sink")])
        #expect(store.owed.isEmpty)
        #expect(WatchTests().routes(events) == ["bluetooth initial", "bluetooth (was bluetooth) call"])
        guard case let .route(_, _, _, output)? = events.last(where: { $0.type == "route" }) else { Issue.record("no route"); return }
        #expect(output?.sink == "bluez_sink.00_11_22_33_44_55.a2dp_sink")
    }

    /// Paying is done under the route lock `call start` takes to read what is owed: whether a call is
    /// on, and the switch, are under it, so a call starting meanwhile waits and then finds nothing owed.
    @Test func anOwedProfileIsPaidUnderTheRouteLock() throws {
        let headset = "bluez_card.00_11_22_33_44_55"
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp"), hfp = try fixture("sim/pulseaudio-bluetooth-hfp")
        let server = FakeServer(a2dp.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo"))
        server.profiles["\(headset)/a2dp_sink"] = a2dp
        server.script = [.change(hfp)]
        let store = FakeStore()
        store.owed = [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")]
        var switchesLocked: [Bool] = []
        server.whileApplying = { actions in
            if actions.contains(where: { if case .setCardProfile = $0 { true } else { false } }) {
                switchesLocked.append(store.routeLockHolders > 0)
            }
        }
        _ = try WatchTests().run(server, store, apply: true)
        #expect(server.current.cards.first { $0.name == headset }?.activeProfile == "a2dp_sink")
        #expect(switchesLocked == [true])
        #expect(store.callReadsLocked.contains(true), "whether a call is on, read under the lock")
        #expect(store.routeLockHolders == 0, "and the lock let go")
    }

    /// What the server gave the card decides (hostile tests on PipeWire): a card that first shows no
    /// profile (`off`, as PipeWire brings a headset) is paid once it shows HFP, not dropped; one back in another profile than the call's (a
    /// user's, or PulseAudio's own A2DP) owes nothing; one that came back while `call end` ran is paid
    /// when the watcher sees the call end; a switch the server does not show stays owed.
    @Test func anOwedProfileIsPaidOnlyWhileTheCardIsInTheCallsProfile() throws {
        let headset = "bluez_card.00_11_22_33_44_55"
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp"), hfp = try fixture("sim/pulseaudio-bluetooth-hfp")
        let away = a2dp.without([headset]).defaulting("alsa_output.sim-laptop.analog-stereo")
        let owed = [CallRecord.CardProfile(card: headset, profile: "a2dp_sink")]
        var noProfile = away
        noProfile.cards += hfp.cards.filter { $0.name == headset }.map { card in
            var card = card
            card.activeProfile = "off"
            return card
        }
        func watched(call: Bool = false, refuse: Bool = false, paid: Snapshot = a2dp,
                     _ script: (FakeStore) -> [FakeServer.Step]) throws -> (FakeServer, FakeStore, [Event]) {
            let server = FakeServer(away)
            server.profiles["\(headset)/a2dp_sink"] = paid
            if refuse { server.refuse = { if case .setCardProfile = $0 { true } else { false } } }
            let store = FakeStore()
            store.owed = owed
            if call { store.call = CallRecord(startedAt: 0, speaker: false) }
            server.script = script(store)
            return (server, store, try WatchTests().run(server, store, apply: true))
        }
        func profile(_ server: FakeServer) -> String? { server.current.cards.first { $0.name == headset }?.activeProfile }
        // WirePlumber leaves the default where it was: the watcher's rules take the route to the headset.
        var (server, store, events) = try watched(paid: a2dp.defaulting("alsa_output.sim-laptop.analog-stereo")) { _ in
            [.change(noProfile), .change(hfp.defaulting("alsa_output.sim-laptop.analog-stereo"))]
        }
        #expect(profile(server) == "a2dp_sink", "paid once it showed HFP")
        #expect(store.owed.isEmpty)
        #expect(WatchTests().routes(events) == ["speaker initial", "bluetooth (was speaker) new-device-available"],
                "the arrival is answered as any: the switch is no card of routectl's coming on")
        (server, store, _) = try watched { _ in [.change(a2dp)] }
        #expect(server.applied.joined().allSatisfy { if case .setCardProfile = $0 { false } else { true } }, "back in A2DP: nothing to pay")
        #expect(store.owed.isEmpty, "and nothing owed any more")
        (server, store, events) = try watched(call: true) { store in [.change(hfp), .run { store.call = nil }, .timeout] }
        #expect(profile(server) == "a2dp_sink", "paid once the call was seen over")
        #expect(store.owed.isEmpty)
        #expect(events.compactMap { if case let .call(active, _) = $0 { active } else { nil } } == [true, false])
        #expect(WatchTests().routes(events).last == "bluetooth (was bluetooth) call")
        // Refused: the arrival is answered all the same, and the profile stays owed.
        (server, store, events) = try watched(refuse: true) { _ in [.change(hfp.defaulting("alsa_output.sim-laptop.analog-stereo"))] }
        #expect(profile(server) == "handsfree_head_unit")
        #expect(store.owed == owed, "a switch the server refused stays owed")
        #expect(WatchTests().routes(events) == ["speaker initial", "bluetooth (was speaker) new-device-available"])
        // A switch the server does not show stays owed too.
        (server, store, _) = try watched(paid: hfp) { _ in [.change(hfp)] }
        #expect(store.owed == owed)
        // PipeWire offers a headset's A2DP only once its transport is up: owed, not yet payable, kept.
        var hfpOnly = hfp
        for i in hfpOnly.cards.indices where hfpOnly.cards[i].name == headset {
            hfpOnly.cards[i].profiles.removeAll { $0.name == "a2dp_sink" }
        }
        (server, store, _) = try watched { _ in [.change(hfpOnly)] }
        #expect(store.owed == owed)
        (server, store, _) = try watched { _ in [.change(hfpOnly), .change(hfp)] }
        #expect(profile(server) == "a2dp_sink", "paid once offered")
        #expect(store.owed.isEmpty)
        // A call that began and ended before the watcher saw it applied (a call rejected at once): the
        // headset came back while it was on, and is paid once the watcher finds it over.
        (server, store, _) = try watched { store in
            [.run { store.call = CallRecord(startedAt: 1_000_000, speaker: false, applied: false) }, .change(hfp),
             .run { store.call = nil }, .timeout]
        }
        #expect(profile(server) == "a2dp_sink")
        #expect(store.owed.isEmpty)
    }

    @Test func aProfileFlipIsNotAPlugAndTheSameHeadsetKeepsTheSound() throws {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp")
        var parked = try fixture("sim/pulseaudio-bluetooth-hfp")
        parked.server.defaultSinkName = "alsa_output.sim-laptop.analog-stereo"
        for apply in [false, true] {
            let server = FakeServer(a2dp)
            server.script = [.change(parked)]
            let store = FakeStore()
            store.record = OverrideRecord(target: .speaker, setAt: 0, externals: ["bluez_card.00_11_22_33_44_55"])
            let events = try WatchTests().run(server, store, apply: apply)
            #expect(events.filter { $0.type.hasPrefix("device-") }.isEmpty, "apply: \(apply)")
            #expect(store.record != nil, "a profile flip never clears the override")
            if apply {
                #expect(server.applied.first == [.setDefaultSink("bluez_sink.00_11_22_33_44_55.handsfree_head_unit")])
                #expect(WatchTests().routes(events) == ["bluetooth initial", "bluetooth (was bluetooth) category-change"])
            }
        }
    }
}

/// A laptop and an HDMI monitor: the laptop's card on, its speaker the route; and the card turned
/// off, the route on HDMI.
func laptopAndHDMI() throws -> (on: Snapshot, off: Snapshot) {
    var on = try fixture("sim/pulseaudio-all").without(["alsa_card.sim-phone", "alsa_card.sim-usb-headset"])
    on.server.defaultSinkName = "alsa_output.sim-laptop.analog-stereo"
    var off = on.turnedOff("alsa_card.sim-laptop")
    off.server.defaultSinkName = "alsa_output.sim-hdmi.hdmi-stereo"
    return (on, off)
}

extension Snapshot {
    /// This snapshot without these cards, their sinks and sources (unplugged).
    func without(_ cards: [String]) -> Snapshot {
        var left = self
        let gone = Set(left.cards.filter { cards.contains($0.name) }.map(\.index))
        left.sinks.removeAll { $0.card.map(gone.contains) ?? false }
        left.sources.removeAll { $0.card.map(gone.contains) ?? false }
        left.cards.removeAll { gone.contains($0.index) }
        return left
    }

    /// This snapshot with `sink` the default sink.
    func defaulting(_ sink: String) -> Snapshot {
        var s = self
        s.server.defaultSinkName = sink
        return s
    }

    /// This snapshot with a card switched to its `off` profile: its sinks and sources gone.
    func turnedOff(_ card: String) -> Snapshot {
        var off = self
        guard let i = off.cards.firstIndex(where: { $0.name == card }) else { return off }
        off.cards[i].activeProfile = "off"
        let index = off.cards[i].index
        if off.defaultSink?.card == index { off.server.defaultSinkName = nil }
        if off.defaultSource?.card == index { off.server.defaultSourceName = nil }
        off.sinks.removeAll { $0.card == index }
        off.sources.removeAll { $0.card == index }
        return off
    }

    /// This snapshot with `sink` the default, on `port` when given (another client's or the server's pick).
    func routed(to sink: String, port: String? = nil) -> Snapshot {
        var s = self
        s.server.defaultSinkName = sink
        if let port, let i = s.sinks.firstIndex(where: { $0.name == sink }) { s.sinks[i].activePort = port }
        return s
    }

    /// This snapshot with a Bluetooth card's headset profile (HFP) available or not: PulseAudio shows
    /// a headset's card once A2DP is up, HFP unavailable until its connection follows.
    func headsetProfile(of card: String, available: Bool) -> Snapshot {
        var s = self
        for i in s.cards.indices where s.cards[i].name == card {
            for j in s.cards[i].profiles.indices where Planner.isBluetoothHeadsetProfile(s.cards[i].profiles[j].name) {
                s.cards[i].profiles[j].available = available
            }
        }
        return s
    }

    func jack(_ sink: String, _ port: String, _ availability: PortAvailability) -> Snapshot {
        var s = self
        guard let i = s.sinks.firstIndex(where: { $0.name == sink }) else { return s }
        if let j = s.sinks[i].ports.firstIndex(where: { $0.name == port }) { s.sinks[i].ports[j].availability = availability }
        if let c = s.cards.firstIndex(where: { $0.index == s.sinks[i].card }),
           let j = s.cards[c].ports.firstIndex(where: { $0.name == port }) {
            s.cards[c].ports[j].port.availability = availability
        }
        return s
    }
}

/// The hold-down (DESIGN.md §1): a jack pulled and plugged back within it is one flicker.
@Suite struct HoldDownTests {
    let laptop = "alsa_output.sim-laptop.analog-stereo"
    let headset = "bluez_card.00_11_22_33_44_55"
    let phones = "alsa_card.sim-laptop:analog-output-headphones"

    func run(_ server: FakeServer, _ store: FakeStore, holdDown: Double, muteOnFallback: Bool = false, warned: @escaping (String) -> Void = { _ in },
             remote: RemoteControl? = nil, rulesChanged: (() -> Bool)? = nil) throws -> [Event] {
        let clock = ManualClock()
        server.clock = clock
        var events: [Event] = []
        var watch = Watch(server: server, store: store, clocks: clock.clocks, apply: true, muteOnFallback: muteOnFallback, holdDown: holdDown,
                          timeout: 1, snapshot: try server.snapshot(timeout: 1), sink: { events.append($0); return true }, warn: warned)
        watch.remote = remote
        watch.rulesMayHaveChanged = rulesChanged
        try watch.run()
        return events
    }

    /// The headphones pulled (still selected, now unavailable) and plugged back.
    func pulled(_ plugged: Snapshot) -> Snapshot { plugged.jack(laptop, "analog-output-headphones", .unavailable) }

    @Test func aReturnWithinTheHoldDownIsAFlickerAndKeepsTheOverride() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        server.script = [.change(pulled(plugged)), .pass(0.5), .change(plugged)]
        let store = FakeStore()
        store.record = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        let events = try run(server, store, holdDown: 2)
        #expect(store.record != nil, "the override stays")
        #expect(!events.contains { $0.type == "override-cleared" })
        #expect(events.contains { if case let .flicker(o, away) = $0 { return o.id == phones && away == 500 } else { return false } })
        #expect(WatchTests().routes(events) == ["headset initial", "speaker (was headset) old-device-unavailable",
                                                "headset (was speaker) new-device-available"], "the route falls back at once, then returns")
        #expect(server.applied.count == 1, "the fallback only: back on the same sink and port, nothing to do: \(server.applied)")
        #expect(typesAfterTheFallback(events) == ["device-added", "flicker", "route"], "the server's return, as routectl's move is printed")
    }

    /// An override set while the headphones were away is newer than their leaving: their return within
    /// the hold-down is an arrival (rule 1), which clears that override and takes the route, with no
    /// flicker. (Before, `flicker` was printed beside `override-cleared … was connected`: hostile test.)
    /// One standing since before they left is kept, as any flicker keeps it.
    @Test func aReturnUnderAnOverrideSetMeanwhileIsAnArrival() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        let store = FakeStore()
        let since = OverrideRecord(target: .speaker, setAt: 5, externals: [])
        server.script = [.change(pulled(plugged)), .pass(0.5), .run { store.record = since }, .change(plugged)]
        let events = try run(server, store, holdDown: 2)
        #expect(!events.contains { $0.type == "flicker" }, "\(events)")
        #expect(events.contains(.overrideCleared(override: .speaker, cause: "'\(phones)' was connected")))
        #expect(store.record == nil)
        #expect(WatchTests().routes(events).last == "headset (was speaker) new-device-available")

        let kept = FakeServer(plugged)
        let before = FakeStore()
        let standing = OverrideRecord(target: .speaker, setAt: 5, externals: [phones])
        before.record = standing
        kept.script = [.change(pulled(plugged)), .pass(0.5), .change(plugged)]
        let flicker = try run(kept, before, holdDown: 2)
        #expect(flicker.contains { $0.type == "flicker" }, "\(flicker)")
        #expect(before.record == standing)
    }

    /// The events after the route's fallback, in order: a return prints its device events, the flicker,
    /// then the route back (`routectl help watch`), whether the server or routectl put it back.
    func typesAfterTheFallback(_ events: [Event]) -> [String] {
        guard let fallback = events.lastIndex(where: {
            if case let .route(_, _, reason, _) = $0 { return reason == .oldDeviceUnavailable } else { return false }
        }) else { return [] }
        return events[(fallback + 1)...].map(\.type)
    }

    /// With --mute-on-fallback, the speaker routectl muted as the headphones went is unmuted when they
    /// come back within the hold-down onto that same sink, where the server already switched the port.
    @Test func aFlickerUnmutesWhatTheFallbackMuted() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        var back = plugged
        back.sinks[0].mute = true  // the sink routectl muted, now with the headphones port selected again
        let server = FakeServer(plugged)
        server.script = [.change(pulled(plugged)), .pass(0.5), .change(back), .pass(0.5)]
        let store = FakeStore()
        let events = try run(server, store, holdDown: 2, muteOnFallback: true)
        #expect(events.contains { $0.type == "flicker" })
        #expect(server.applied.joined().contains(.setSinkMute(sink: laptop, mute: true)), "the fallback muted: \(server.applied)")
        #expect(server.current.sinks[0].mute == false, "\(server.applied)")
        #expect(store.mutedByRoutectl == nil)
    }

    /// A speaker the user muted before the route fell back to it stays muted when the headphones come
    /// back: routectl did not mute it, so it does not unmute it (it unmuted it, noting its own mute).
    @Test func aSpeakerTheUserMutedStaysMuted() throws {
        var plugged = try fixture("sim/pulseaudio-laptop-headphones")
        plugged.sinks[0].mute = true
        let server = FakeServer(plugged)
        server.script = [.change(pulled(plugged)), .pass(3), .change(plugged), .pass(0.5)]
        let store = FakeStore()
        let events = try run(server, store, holdDown: 2, muteOnFallback: true)
        #expect(WatchTests().routes(events).last == "headset (was speaker) new-device-available")
        #expect(!server.applied.joined().contains { if case .setSinkMute = $0 { return true } else { return false } }, "\(server.applied)")
        #expect(server.current.sinks[0].mute == true)
        #expect(store.mutedByRoutectl == nil)
    }

    /// The headphones, connected before a USB headset that carries the sound, are pulled and plugged
    /// back within the hold-down, no override standing: one flicker, and the route ends where it was,
    /// on the USB headset. (Taken as a plug, the return moved the sound to the headphones, and a
    /// `clear` just after put it back on the USB headset, the most recent by the rules.)
    @Test func aFlickerOfADeviceThatDidNotCarryTheSoundMovesNothing() throws {
        let usb = "alsa_output.sim-usb-headset.analog-stereo"
        var plugged = try fixture("sim/pulseaudio-all").without(["alsa_card.sim-hdmi", "alsa_card.sim-phone"])
            .jack(laptop, "analog-output-headphones", .available).routed(to: usb)
        plugged.sinks[0].activePort = "analog-output-headphones"
        let server = FakeServer(plugged)
        server.script = [.change(plugged.jack(laptop, "analog-output-headphones", .unavailable)), .pass(0.5), .change(plugged)]
        let store = FakeStore()
        let events = try run(server, store, holdDown: 2)
        #expect(events.contains { if case let .flicker(o, _) = $0 { return o.id == phones } else { return false } })
        #expect(server.applied.isEmpty, "\(server.applied)")
        #expect(server.current.server.defaultSinkName == usb)
        #expect(WatchTests().routes(events) == ["headset initial"])
        // Nor are they a newer connection for coming back (rule 3's recency): with the phone's
        // headphones plugged after them, the USB headset's going leaves the sound to the phone's.
        let phoneSink = "alsa_output.sim-phone.HiFi__hw_Phone__sink"
        var three = try fixture("sim/pulseaudio-all").without(["alsa_card.sim-hdmi"])
            .jack(laptop, "analog-output-headphones", .available).jack(phoneSink, "[Out] Headphones", .available)
            .routed(to: "alsa_output.sim-usb-headset.analog-stereo")
        for (sink, port) in [(laptop, "analog-output-headphones"), (phoneSink, "[Out] Headphones")] {
            three.sinks[try #require(three.sinks.firstIndex { $0.name == sink })].activePort = port
        }
        let later = FakeServer(three)
        later.script = [.change(three.jack(laptop, "analog-output-headphones", .unavailable)), .pass(0.5), .change(three), .pass(3),
                        .change(three.without(["alsa_card.sim-usb-headset"]).routed(to: laptop))]
        let laterEvents = try run(later, FakeStore(), holdDown: 2)
        #expect(WatchTests().routes(laterEvents).last == "headset (was headset) old-device-unavailable")
        #expect(later.current.server.defaultSinkName == phoneSink, "\(WatchTests().routes(laterEvents))")
    }

    /// Every move watch --apply makes is made under the route lock `set` takes: a headset's arrival
    /// (rule 1), the fallback as the headphones go, their return within the hold-down, and the
    /// override's clear when the hold-down ends. (A `set` planned before the plug, carried out over the
    /// watcher's move, left the sound on the speaker with the headphones in.)
    @Test func everyPolicyMoveIsMadeUnderTheRouteLock() throws {
        var arrived = try fixture("sim/pulseaudio-bluetooth-a2dp")
        arrived.server.defaultSinkName = laptop
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        let store = FakeStore()
        var locked: [Bool] = []
        server.whileApplying = { _ in locked.append(store.routeLockHolders > 0) }
        server.script = [.change(arrived), .pass(0.1)]
        let events = try run(server, store, holdDown: 0)
        #expect(WatchTests().routes(events).last == "bluetooth (was speaker) new-device-available")
        #expect(locked == [true], "\(locked)")

        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let again = FakeServer(plugged)
        again.script = [.change(pulled(plugged)), .pass(0.5), .change(plugged), .change(pulled(plugged)), .pass(3)]
        let held = FakeStore()
        held.record = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        locked = []
        again.whileApplying = { _ in locked.append(held.routeLockHolders > 0) }
        let events2 = try run(again, held, holdDown: 2)
        #expect(held.record == nil, "the override went once the hold-down passed")
        #expect(locked.count >= 2 && locked.allSatisfy { $0 }, "\(locked) \(WatchTests().routes(events2))")
        #expect(held.routeLockHolders == 0, "and the lock let go")
    }

    /// A `set speaker --force` holds the route lock as a headset arrives: the rules decide once it is
    /// done, on the override it recorded, which the arrival clears (rule 1). Decided before the wait,
    /// the move left that override standing under the headset. And a lock held past the timeout (a
    /// command stopped with Ctrl-Z) does not stop the policy: the move is made, and that is said once.
    @Test func theRulesDecideOnWhatACommandHoldingTheLockLeft() throws {
        var arrived = try fixture("sim/pulseaudio-bluetooth-a2dp")
        arrived.server.defaultSinkName = laptop
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        let store = FakeStore()
        store.beforeRouteLockFree = { store.record = OverrideRecord(target: .speaker, setAt: 0, externals: []) }
        server.script = [.change(arrived), .pass(0.1)]
        let events = try run(server, store, holdDown: 0)
        #expect(store.record == nil, "the override the set recorded is cleared by the arrival")
        #expect(events.contains { if case .overrideCleared(.speaker, _) = $0 { return true } else { return false } })
        #expect(WatchTests().routes(events).last == "bluetooth (was speaker) new-device-available")

        let stuck = FakeServer(try fixture("sim/pulseaudio-laptop"))
        stuck.script = [.change(arrived), .pass(0.1), .change(try fixture("sim/pulseaudio-laptop")), .pass(0.1)]
        let held = FakeStore()
        held.routeLockHeldElsewhere = true
        var warnings: [String] = []
        let moved = try run(stuck, held, holdDown: 0, warned: { warnings.append($0) })
        #expect(WatchTests().routes(moved).contains("bluetooth (was speaker) new-device-available"), "the move made without the lock")
        #expect(warnings == ["another routectl has held the route lock for over 6 s (stopped with Ctrl-Z?); watch --apply acts without it until it is free"])
        #expect(held.routeLockWaits.first == 6, "twice the timeout, at least 6 s")
        #expect(held.routeLockWaits.dropFirst().allSatisfy { $0 == 0 } && held.routeLockWaits.count > 1,
                "once overdue, only tried: \(held.routeLockWaits)")
    }

    /// A D-Bus request served inside the watcher waits for the route lock as the watcher would (at
    /// most 20 s); one that ran out of it makes the lock overdue, said once: the policy's next move
    /// only tries it, and so do the requests after it, until a take succeeds (here a request's).
    @Test func aRequestThatFindsTheLockStuckMakesItOverdue() throws {
        final class Requests: RemoteControl {
            var waits: [Double] = []
            var stuck = true
            func serve(lockWait: Double) -> Bool? {
                waits.append(lockWait)
                return stuck
            }
            func update(_ status: Status, _ preferences: Preferences) {}
            func routeChanged(route: Route, previous: Route, reason: RouteChangeReason) {}
        }
        var arrived = try fixture("sim/pulseaudio-bluetooth-a2dp")
        arrived.server.defaultSinkName = laptop
        let server = FakeServer(try fixture("sim/pulseaudio-laptop"))
        let store = FakeStore()
        store.routeLockHeldElsewhere = true
        let requests = Requests()
        var freed = 0
        server.script = [.pass(0.1), .change(arrived), .pass(0.1),
                         .run { store.routeLockHeldElsewhere = false; requests.stuck = false; freed = store.routeLockWaits.count },
                         .change(try fixture("sim/pulseaudio-laptop")), .pass(0.1)]
        var warnings: [String] = []
        let events = try run(server, store, holdDown: 0, warned: { warnings.append($0) }, remote: requests)
        #expect(requests.waits.first == 6, "twice the timeout, at least 6 s: \(requests.waits)")
        #expect(warnings == ["another routectl has held the route lock for over 6 s (stopped with Ctrl-Z?); watch --apply acts without it until it is free"])
        #expect(store.routeLockWaits.first == 0, "the policy's move after it only tries the lock: \(store.routeLockWaits)")
        #expect(WatchTests().routes(events).contains("bluetooth (was speaker) new-device-available"), "the move made without the lock")
        #expect(store.routeLockWaits.count > freed && store.routeLockWaits[freed] == 6 && requests.waits.last == 6,
                "a request's take that succeeds ends it, before the policy's next move: \(store.routeLockWaits), \(requests.waits)")
    }

    /// Headphones in, their card turned off by another client (they go), then `call start` switches
    /// the card on: the headphones coming back are routectl's own step, not a flicker or a plug.
    @Test func outputsACommandSwitchesBackOnAreNoFlicker() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let off = plugged.turnedOff("alsa_card.sim-laptop")
        let server = FakeServer(plugged)
        let store = FakeStore()
        store.policyRunning = true
        let at: Int64 = 1_001_000  // the manual clock's start, plus the second passed
        server.script = [.change(off), .pass(1.0),
                         .run { store.intents.append(RouteIntent(output: phones, reason: .call, at: at)) },
                         .change(plugged),
                         .run { store.intents.append(RouteIntent(output: phones, reason: .call, at: at, done: true)) },
                         .change(plugged), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(!events.contains { $0.type == "flicker" })
        #expect(WatchTests().routes(events).last == "headset (was unknown) call")
    }

    /// The server selected the speaker a notification before it reported the headphones unplugged;
    /// they come back within the hold-down: the route goes back to them, the output that carried the
    /// sound when they left, not the speaker the server picked on the way.
    @Test func aFlickerAfterTheServersEarlyMoveReturnsToTheDevice() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        var moved = plugged
        moved.sinks[0].activePort = "analog-output-speaker"
        let server = FakeServer(plugged)
        server.script = [.change(moved), .change(moved.jack(laptop, "analog-output-headphones", .unavailable)), .pass(0.5), .change(moved)]
        let store = FakeStore()
        store.record = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        let events = try run(server, store, holdDown: 2)
        #expect(events.contains { if case let .flicker(o, _) = $0 { return o.id == phones } else { return false } })
        #expect(server.current.sinks[0].activePort == "analog-output-headphones")
        #expect(WatchTests().routes(events).last == "headset (was speaker) new-device-available")
        #expect(store.record != nil, "the override stays")
    }

    /// A phone with the earpiece the default: its headphones, on the HiFi profile, are pulled (the
    /// route falls back to the earpiece, in Voice Call) and plugged back within the hold-down, where
    /// the server (PipeWire's ACP) already switched Voice Call's own port to them. The route ends
    /// where it was, on the headphones in HiFi (the route needed Voice Call only for the earpiece,
    /// which has no other profile), though the device is the same output by its id. (Left on Voice
    /// Call, plain watch, which predicts the switch to HiFi, waited 1.5 s for it before reporting the
    /// route.) Headphones that left from Voice Call (another program's call) and come back there stay.
    @Test func aFlickerBackOntoTheCallProfilesPortEndsWhereItWas() throws {
        let phone = "alsa_card.sim-phone", hifiSink = "alsa_output.sim-phone.HiFi__hw_Phone__sink"
        let callSink = "alsa_output.sim-phone.Voice_Call__hw_Phone__sink", headphones = "\(phone):[Out] Headphones"
        let hifi = try fixture("sim/pipewire-phone").jack(hifiSink, "[Out] Headphones", .available).routed(to: hifiSink, port: "[Out] Headphones")
        let call = try fixture("sim/pipewire-phone-voicecall")
        let server = FakeServer(hifi)
        server.profiles["\(phone)/Voice Call"] = call
        server.profiles["\(phone)/HiFi"] = hifi
        let store = FakeStore()
        store.preferencesValue.defaultTarget = .earpiece
        var pulled = hifi.jack(hifiSink, "[Out] Headphones", .unavailable)
        pulled.sinks[0].activePort = "[Out] Speaker"
        server.script = [.change(pulled), .pass(0.5),
                         .change(call.jack(callSink, "[Out] Headphones", .available).routed(to: callSink, port: "[Out] Headphones")),
                         .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(events.contains { if case let .flicker(o, _) = $0 { return o.id == headphones } else { return false } })
        #expect(server.current.cards.first { $0.name == phone }?.activeProfile == "HiFi", "\(server.applied)")
        #expect(WatchTests().routes(events) == ["headset initial", "receiver (was headset) old-device-unavailable",
                                                "headset (was receiver) new-device-available"])

        let inCall = call.jack(callSink, "[Out] Headphones", .available).routed(to: callSink, port: "[Out] Headphones")
        var earpiece = call
        earpiece.sinks[0].activePort = "[Out] Earpiece"
        let stays = FakeServer(inCall)
        stays.profiles["\(phone)/HiFi"] = hifi
        stays.script = [.change(earpiece), .pass(0.5), .change(inCall), .pass(0.5)]
        let stayed = try run(stays, store, holdDown: 2)
        #expect(stayed.contains { $0.type == "flicker" })
        #expect(!stays.applied.joined().contains { if case .setCardProfile = $0 { return true } else { return false } }, "\(stays.applied)")
        #expect(stays.current.cards.first { $0.name == phone }?.activeProfile == "Voice Call")
    }

    /// A Bluetooth headset that carried the sound leaves (the route falls back to the speaker, which
    /// watch --apply makes the server's default) and comes back within the hold-down, where the server
    /// already put the default on it: watch --apply still names it the default. Left to the server,
    /// WirePlumber went back to the speaker it remembered a moment later (after the headset's profile
    /// switch), with the route reported on the headset.
    @Test func aFlickerOntoWhereTheServerAlreadyIsClaimsTheDefault() throws {
        let headset = try fixture("sim/pipewire-bluetooth-a2dp")
        let bluetoothSink = "bluez_output.00_11_22_33_44_55.1"
        let server = FakeServer(headset)
        server.script = [.change(try fixture("sim/pipewire-laptop")), .pass(0.8), .change(headset), .pass(0.5)]
        let store = FakeStore()
        let events = try run(server, store, holdDown: 2)
        #expect(events.contains { if case let .flicker(o, _) = $0 { return o.id == "bluez_card.00_11_22_33_44_55" } else { return false } })
        #expect(server.applied.last?.contains(.setDefaultSink(bluetoothSink)) == true, "\(server.applied)")
        #expect(typesAfterTheFallback(events) == ["device-added", "flicker", "route"], "routectl's move, as the server's return is printed")
        #expect(WatchTests().routes(events) == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable",
                                                "bluetooth (was speaker) new-device-available"])
    }

    /// In a call on a Bluetooth headset, with `set speaker` recorded (the headset kept the call, rule
    /// 2), the headset leaves (the call falls back to the speaker, the override standing) and comes back
    /// within the hold-down with A2DP only, as PulseAudio shows it before HFP connects. Once its HFP is
    /// up, the call goes back to it, as to a headset back with HFP at once; the override stays (a
    /// flicker). Before, the call stayed on the speaker: the headset profile coming up under an
    /// override was taken for a flap.
    @Test func aHeadsetBackBeforeItsHFPTakesBackTheCallItCarried() throws {
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp")
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        for secondChoice in [false, true] {
            let server = FakeServer(inCall)
            server.profiles["\(headset)/handsfree_head_unit"] = inCall
            let store = FakeStore()
            store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
            let standing = OverrideRecord(target: .speaker, setAt: 0, externals: [headset])
            let other = OverrideRecord(target: .earpiece, setAt: 1, externals: [headset])
            // Recorded once the watcher runs (as `set speaker` does beside it), not applied by its start.
            server.script = [.run { store.record = standing }, .change(try fixture("sim/pulseaudio-laptop")), .pass(0.5), .change(a2dp.headsetProfile(of: headset, available: false)), .pass(0.5)]
                + (secondChoice ? [.run { store.record = other }] : [])
                + [.change(a2dp), .pass(0.5)]
            let events = try run(server, store, holdDown: 2)
            let routes = WatchTests().routes(events)
            #expect(events.contains { $0.type == "flicker" })
            #expect(!events.contains { $0.type == "override-cleared" }, "\(events)")
            if secondChoice {
                // A choice made since the return (`set earpiece --force`) is not undone by HFP coming up.
                #expect(store.record == other)
                #expect(server.current.server.defaultSinkName == laptop, "\(server.applied)")
                #expect(routes == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable"])
            } else {
                #expect(store.record == standing)
                #expect(server.current.server.defaultSinkName == "bluez_sink.00_11_22_33_44_55.handsfree_head_unit", "\(server.applied)")
                #expect(routes == ["bluetooth initial", "speaker (was bluetooth) old-device-unavailable",
                                   "bluetooth (was speaker) new-device-available"])
            }
        }
    }

    /// The same headset back before its HFP with no override standing: the rules take it back once it
    /// can carry the call, ranked among the devices plugged meanwhile. Headphones plugged after its
    /// return keep the call (rule 1: the most recent) when its HFP comes up.
    @Test func aHeadsetBackBeforeItsHFPLeavesTheCallToHeadphonesPluggedSince() throws {
        let phones = "analog-output-headphones"
        let inCall = try fixture("sim/pulseaudio-bluetooth-hfp")
        let back = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        let plugged = back.jack(laptop, phones, .available).routed(to: laptop, port: phones)
        let server = FakeServer(inCall)
        server.profiles["\(headset)/handsfree_head_unit"] = inCall
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
        server.script = [.change(try fixture("sim/pulseaudio-laptop")), .pass(0.5), .change(back.headsetProfile(of: headset, available: false)),
                         .pass(0.3), .change(plugged.headsetProfile(of: headset, available: false)), .pass(0.3), .change(plugged), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(server.current.server.defaultSinkName == laptop, "\(server.applied)")
        #expect(server.current.sinks.first { $0.name == laptop }?.activePort == phones, "\(server.applied)")
        #expect(WatchTests().routes(events).last == "headset (was speaker) new-device-available", "\(WatchTests().routes(events))")
    }

    /// The headset back before its HFP, an override standing, and another client puts the call on the
    /// HDMI output meanwhile (respected, rule 5): its HFP coming up does not take the call from there.
    @Test func aHeadsetBackBeforeItsHFPLeavesAnotherClientsPickSince() throws {
        let hdmi = "alsa_output.sim-hdmi.hdmi-stereo"
        let all = try fixture("sim/pulseaudio-all")
        func withHDMI(_ snapshot: Snapshot) throws -> Snapshot {
            var s = snapshot
            var card = try #require(all.cards.first { $0.name == "alsa_card.sim-hdmi" })
            var sink = try #require(all.sinks.first { $0.name == hdmi })
            card.index = 90
            sink.index = 90
            sink.card = 90
            s.cards.append(card)
            s.sinks.append(sink)
            return s
        }
        let inCall = try withHDMI(try fixture("sim/pulseaudio-bluetooth-hfp"))
        let back = try withHDMI(try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop))
        let server = FakeServer(inCall)
        server.profiles["\(headset)/handsfree_head_unit"] = inCall
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
        let standing = OverrideRecord(target: .speaker, setAt: 0, externals: [headset])
        server.script = [.run { store.record = standing }, .change(try withHDMI(try fixture("sim/pulseaudio-laptop"))), .pass(0.5),
                         .change(back.headsetProfile(of: headset, available: false)), .pass(0.3),
                         .change(back.headsetProfile(of: headset, available: false).routed(to: hdmi)), .pass(1.5),
                         .change(back.routed(to: hdmi)), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(server.current.server.defaultSinkName == hdmi, "\(server.applied)")
        #expect(WatchTests().routes(events).last == "unknown (was speaker) route-configuration-change", "\(WatchTests().routes(events))")
        #expect(store.record == standing)
    }

    @Test func noReturnClearsTheOverrideWhenTheHoldDownPasses() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        server.script = [.change(pulled(plugged)), .pass(1), .pass(1.5)]
        let store = FakeStore()
        store.record = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        let events = try run(server, store, holdDown: 2)
        #expect(store.record == nil)
        #expect(events.filter { $0.type == "override-cleared" }.count == 1)
        #expect(events.last == .overrideCleared(override: .headset, cause: "'\(phones)' was disconnected"),
                "cleared only after the hold-down, with nothing else since")
        #expect(!events.contains { $0.type == "flicker" })
    }

    @Test func withoutAHoldDownTheClearIsImmediate() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        server.script = [.change(pulled(plugged))]
        let store = FakeStore()
        store.record = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        let events = try run(server, store, holdDown: 0)
        #expect(events.contains(.overrideCleared(override: .headset, cause: "'\(phones)' was disconnected")))
    }

    /// The server restarts and comes back before a Bluetooth headset the override was set beside
    /// (PulseAudio makes its card a few seconds after A2DP connects again): the headset missing at
    /// `recovered` is a departure under the hold-down. Back within it, it is a flicker and the
    /// override stands; not back, the override goes when the hold-down passes. (Before, the override
    /// was cleared at once as stale, hold-down or not: hostile test.)
    @Test func aHeadsetLateBackFromARestartIsAFlicker() throws {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        let standing = OverrideRecord(target: .speaker, setAt: 0, externals: [headset])
        let server = FakeServer(a2dp)
        server.script = [.run { server.current = a2dp.without([headset]) }, .disconnect, .pass(1), .change(a2dp), .pass(3)]
        let store = FakeStore()
        store.record = standing
        let events = try run(server, store, holdDown: 2)
        #expect(store.record == standing, "\(events)")
        #expect(!events.contains { $0.type == "override-cleared" })
        let types = events.map(\.type)
        // It left at `recovered` (said after it, with what else changed while the server was away).
        #expect(Array(types.drop { $0 != "recovered" }) == ["recovered", "device-removed", "device-added", "flicker"], "\(events)")
        #expect(server.current.server.defaultSinkName == laptop)

        let gone = FakeServer(a2dp)
        gone.script = [.run { gone.current = a2dp.without([headset]) }, .disconnect, .pass(1), .pass(1.5)]
        let alone = FakeStore()
        alone.record = standing
        let later = try run(gone, alone, holdDown: 2)
        #expect(later.map(\.type) == ["route", "interrupted", "recovered", "device-removed", "override-cleared"], "\(later)")
        #expect(later.contains(.overrideCleared(override: .speaker, cause: "'\(headset)' was disconnected")))
        #expect(alone.record == nil)
    }

    /// An override set while the headphones were away (their departure under the hold-down), then a
    /// server restart: the override is not stale for a device it was not set beside, and stands.
    /// (Review: every pending departure counted as a device present, so it was cleared as "'…' was
    /// connected", the headphones still out.)
    @Test func anOverrideSetWhileADeviceWasAwayOutlivesARestart() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        let store = FakeStore()
        let since = OverrideRecord(target: .speaker, setAt: 5, externals: [])
        server.script = [.change(pulled(plugged)), .pass(0.5), .run { store.record = since }, .disconnect]
        let events = try run(server, store, holdDown: 10)
        #expect(store.record == since, "\(events)")
        #expect(!events.contains { $0.type == "override-cleared" })
    }

    /// The headphones pulled (their departure holds the override's clear) and back by the time the
    /// server returns from a restart: no change shows them coming back, and the hold-down passing
    /// clears nothing. (Review: the override went as "'…' was disconnected" with them plugged in.)
    @Test func aDeviceBackWithTheServerEndsItsDeparture() throws {
        let plugged = try fixture("sim/pulseaudio-laptop-headphones")
        let server = FakeServer(plugged)
        let store = FakeStore()
        let standing = OverrideRecord(target: .headset, setAt: 0, externals: [phones])
        store.record = standing
        server.script = [.change(pulled(plugged)), .pass(0.5), .run { server.current = plugged }, .disconnect, .pass(3)]
        let events = try run(server, store, holdDown: 2)
        #expect(store.record == standing, "\(events)")
        #expect(!events.contains { $0.type == "override-cleared" })
        #expect(Array(events.map(\.type).drop { $0 != "recovered" }) == ["recovered", "device-added"], "\(events)")
    }

    /// An override set while the server was away (the watcher not reconnected yet), beside no
    /// headset: the headset missing at `recovered` left under the override before it, so its return
    /// within the hold-down is an arrival, which clears the newer one; no flicker. (Hostile test: both
    /// `flicker` and `override-cleared … was connected` were printed.)
    @Test func aHeadsetBackAfterAnOverrideSetDuringTheOutageIsAnArrival() throws {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp")
        let server = FakeServer(a2dp)
        let store = FakeStore()
        let during = OverrideRecord(target: .speaker, setAt: 5, externals: [])
        server.script = [.run { server.current = a2dp.without([headset]).routed(to: laptop) }, .disconnect, .pass(1),
                         .change(a2dp.routed(to: laptop)), .pass(0.5)]
        // `set speaker` while the watcher waits to reconnect.
        server.onPause = { store.record = during; server.onPause = nil }
        let events = try run(server, store, holdDown: 10)
        #expect(!events.contains { $0.type == "flicker" }, "\(events)")
        #expect(events.contains(.overrideCleared(override: .speaker, cause: "'\(headset)' was connected")))
        #expect(store.record == nil)
        #expect(server.current.server.defaultSinkName != laptop, "the headset takes the route: \(server.applied)")
    }

    /// In a call moved to the speaker (`set speaker --force`) from a headset, the headset flickers and
    /// comes back in HFP with its microphone made the default by the server (WirePlumber): the route
    /// stays on the speaker and the call's microphone goes back to the built-in one (rule 8: the
    /// microphone follows the output). (Hostile test, PipeWire: the headset's mic stayed.)
    @Test func aFlickerInACallLeavesTheMicrophoneWithTheRoute() throws {
        let builtIn = "alsa_input.sim-laptop.analog-stereo"
        var onSpeaker = try fixture("sim/pipewire-bluetooth-hfp").routed(to: laptop)
        onSpeaker.server.defaultSourceName = builtIn
        var back = onSpeaker
        back.server.defaultSourceName = "bluez_input.00_11_22_33_44_55.0"
        let server = FakeServer(onSpeaker)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset])
        let standing = OverrideRecord(target: .speaker, setAt: 2, externals: [headset])
        store.record = standing
        server.script = [.change(onSpeaker.without([headset])), .pass(0.5), .change(back), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(events.contains { $0.type == "flicker" }, "\(events)")
        #expect(store.record == standing)
        #expect(server.current.server.defaultSinkName == laptop)
        #expect(server.current.server.defaultSourceName == builtIn, "\(server.applied)")
    }

    /// In a call on the headset, another client puts the sound on the laptop's speaker (respected,
    /// rule 5): the call's microphone goes with it (rule 8), after the route event. A microphone that
    /// client picked itself stands. (Hostile test: the call kept the headset's microphone.)
    @Test func anotherClientsPickInACallTakesTheMicrophoneWithIt() throws {
        let builtIn = "alsa_input.sim-laptop.analog-stereo"
        let inCall = try fixture("sim/pipewire-bluetooth-hfp")
        for picksTheMicToo in [false, true] {
            var picked = inCall.routed(to: laptop)
            if picksTheMicToo { picked.server.defaultSourceName = "alsa_output.sim-laptop.analog-stereo.monitor" }
            let server = FakeServer(inCall)
            let store = FakeStore()
            store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
            server.script = [.change(picked), .pass(0.5)]
            let events = try run(server, store, holdDown: 2)
            #expect(server.current.server.defaultSinkName == laptop, "the pick stands: \(server.applied)")
            #expect(WatchTests().routes(events) == ["bluetooth initial", "speaker (was bluetooth) route-configuration-change"])
            if picksTheMicToo {
                #expect(server.current.server.defaultSourceName == picked.server.defaultSourceName, "\(server.applied)")
                #expect(server.applied.isEmpty, "\(server.applied)")
            } else {
                #expect(server.current.server.defaultSourceName == builtIn, "\(server.applied)")
                #expect(events.last.map { if case let .input(source, _, _, _) = $0 { source == builtIn } else { false } } == true, "\(events)")
                #expect(events.suffix(2).map(\.type) == ["route", "input"], "after the route event: \(events)")
            }
        }
    }

    /// The microphone follows the pick as the server is under the route lock (review): a `set
    /// bluetooth` that held it and put the call back on the headset leaves the headset's microphone
    /// where it is, and the route back on the headset is reported.
    @Test func aMoveSinceThePickLeavesTheMicrophoneToIt() throws {
        let inCall = try fixture("sim/pipewire-bluetooth-hfp")
        let server = FakeServer(inCall)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
        // (The command's own change notification comes after it, as the server sends it.)
        server.script = [.change(inCall.routed(to: laptop)), .run { store.beforeRouteLockFree = { server.current = inCall } }, .pass(0.5),
                         .change(inCall), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(server.applied.isEmpty, "\(server.applied)")
        #expect(server.current.server.defaultSourceName == inCall.server.defaultSourceName)
        #expect(WatchTests().routes(events).last == "bluetooth (was speaker) route-configuration-change", "\(events)")
    }

    /// A microphone another client picks with the output (`pactl set-default-sink X; pactl
    /// set-default-source Y`: the source's change comes before the route's is reported) stands, even
    /// when it is the one the call had on the output left (hostile test: it was moved to the headset's).
    @Test func aMicrophonePickedWithTheOutputStands() throws {
        let builtIn = "alsa_input.sim-laptop.analog-stereo"
        let inCall = try fixture("sim/pipewire-bluetooth-hfp")
        let onSpeaker = inCall.routed(to: laptop)  // the headset's microphone still the default
        var picked = inCall
        picked.server.defaultSourceName = builtIn
        let server = FakeServer(onSpeaker)
        let store = FakeStore()
        store.call = CallRecord(startedAt: 1, speaker: false, output: headset, externals: [headset], applied: true)
        store.record = OverrideRecord(target: .speaker, setAt: 2, externals: [headset])
        server.script = [.change(inCall), .change(picked), .pass(0.5)]
        let events = try run(server, store, holdDown: 2)
        #expect(WatchTests().routes(events).last == "bluetooth (was speaker) route-configuration-change", "\(events)")
        #expect(server.current.server.defaultSourceName == builtIn, "\(server.applied)")
        #expect(server.applied.isEmpty, "\(server.applied)")
    }

    /// A muted call stays muted on the microphone it follows to (routectl never unmutes by itself).
    /// An output whose card has no microphone (a virtual sink, HDMI) takes the built-in one (rule 8).
    @Test func theFollowedMicrophoneKeepsTheCallsMuteAndIsBuiltInWithoutOne() throws {
        let builtIn = "alsa_input.sim-laptop.analog-stereo"
        var inCall = try fixture("sim/pipewire-bluetooth-hfp")
        for i in inCall.sources.indices where inCall.sources[i].name.hasPrefix("bluez_input") { inCall.sources[i].mute = true }
        var virtual = try #require(inCall.sinks.first { $0.name == laptop })
        virtual.name = "virtual"
        virtual.index = 99
        virtual.card = nil
        virtual.ports = []
        virtual.activePort = nil
        virtual.properties = ["device.class": "abstract"]
        for onVirtual in [false, true] {
            var withVirtual = inCall
            withVirtual.sinks.append(virtual)
            let server = FakeServer(withVirtual)
            let store = FakeStore()
            store.call = CallRecord(startedAt: 1, speaker: false, output: headset, callMute: .init(muted: true, at: 1), externals: [headset],
                                    applied: true)
            server.script = [.change(withVirtual.routed(to: onVirtual ? "virtual" : laptop)), .pass(0.5), .pass(0.5)]
            let events = try run(server, store, holdDown: 2)
            #expect(server.current.server.defaultSourceName == builtIn, "\(server.applied)")
            #expect(server.current.sources.first { $0.name == builtIn }?.mute == true, "\(server.applied)")
            let inputs = events.compactMap { if case let .input(source, _, _, muted) = $0 { (source, muted) } else { nil } }
            #expect(inputs.last.map { $0.0 == builtIn && $0.1 == true } == true, "the watcher says the call is muted: \(events)")
        }
    }

    /// With no hold-down, the override set beside a headset not back with the server is stale at once,
    /// said after `recovered` and the headset's leaving (not while the server still reads as away).
    @Test func withoutAHoldDownAHeadsetMissingAfterARestartClearsAtOnce() throws {
        let a2dp = try fixture("sim/pulseaudio-bluetooth-a2dp").routed(to: laptop)
        let server = FakeServer(a2dp)
        server.script = [.run { server.current = a2dp.without([headset]) }, .disconnect]
        let store = FakeStore()
        store.record = OverrideRecord(target: .speaker, setAt: 0, externals: [headset])
        let events = try run(server, store, holdDown: 0)
        #expect(events.map(\.type) == ["route", "interrupted", "recovered", "device-removed", "override-cleared"], "\(events)")
    }
}

/// `priority set|clear` and `default` in another shell, under `watch --apply` (hostile test: nothing
/// moved until the next `clear` or plug, and `why` then blamed another client for routectl's pick).
@Suite struct ChangedRulesTests {
    let hdmi = "alsa_card.sim-hdmi:hdmi-output-0"
    let usb = "alsa_output.sim-usb-headset.analog-stereo"
    /// The file watch's word: state.json changed since the watcher last asked.
    final class Changed: @unchecked Sendable { var value = false }
    let changed = Changed()

    /// The watcher as `watch --apply` runs it, told the persistent state changed once after each `rules`.
    func run(_ server: FakeServer, _ store: FakeStore) throws -> [Event] {
        var events: [Event] = []
        let clock = ManualClock()
        server.clock = clock
        var watch = Watch(server: server, store: store, clocks: clock.clocks, apply: true, muteOnFallback: false,
                          timeout: 1, snapshot: try server.snapshot(timeout: 1), sink: { events.append($0); return true }, warn: { _ in })
        watch.rulesMayHaveChanged = { [changed] in
            defer { changed.value = false }
            return changed.value
        }
        try watch.run()
        return events
    }

    func rules(_ store: FakeStore, priority: [String], default target: RouteTarget = .speaker) -> [FakeServer.Step] {
        [.run { [changed] in
            store.preferencesValue.priority = priority
            store.preferencesValue.defaultTarget = target
            changed.value = true
        }, .timeout]
    }

    /// The USB headset has the route (rule 3); listing HDMI first moves it there, as routectl's own
    /// move, and clearing the list gives it back to the headset.
    @Test func aNewListMovesTheRouteWhereTheRulesNowPutIt() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-all"))
        let store = FakeStore()
        server.script = rules(store, priority: [hdmi]) + rules(store, priority: [])
        let events = try run(server, store)
        #expect(WatchTests().routes(events) == ["headset initial", "unknown (was headset) override", "headset (was unknown) override"])
        #expect(server.current.server.defaultSinkName == usb)
        #expect(store.intents.map(\.reason).allSatisfy { $0 == .override }, "plain watch reports the same reason")
        #expect(store.decisions.map(\.cause) == ["the priority list changed", "the priority list changed"], "why names it")
        #expect(store.decisions.last?.output == "alsa_card.sim-usb-headset:analog-output")
    }

    /// A list set under an override is noted: once `clear` has applied it, clearing the list moves the
    /// route again (hostile test: the watcher kept comparing with the list before the override).
    /// Each move is made under the route lock `set` takes.
    @Test func aListNotedUnderAnOverrideIsTheOneTheNextChangeLeaves() throws {
        let all = try fixture("sim/pulseaudio-all")
        let server = FakeServer(all)
        let store = FakeStore()
        store.record = OverrideRecord(target: .speaker, setAt: 0, externals: Status(snapshot: all).externalKeys)
        var locked: [Bool] = []
        server.whileApplying = { _ in locked.append(store.routeLockHolders > 0) }
        // `clear`: the override gone, the route on the listed HDMI output (as the command leaves it).
        let cleared = FakeServer.Step.run { store.record = nil }
        server.script = rules(store, priority: [hdmi]) + [cleared, .change(all.routed(to: "alsa_output.sim-hdmi.hdmi-stereo")), .pass(1)]
            + rules(store, priority: [])
        let events = try run(server, store)
        #expect(WatchTests().routes(events).last == "headset (was unknown) override")
        #expect(server.current.server.defaultSinkName == usb)
        #expect(!locked.isEmpty && locked.allSatisfy { $0 }, "\(locked)")
    }

    /// A list changed during a call applies once the call is over, to the route it left.
    @Test func aListChangedInACallAppliesAtItsEnd() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-all"))
        let store = FakeStore()
        store.call = CallRecord(startedAt: 0, speaker: false)
        server.script = rules(store, priority: [hdmi]) + [.run { store.call = nil }, .timeout]
        let events = try run(server, store)
        #expect(WatchTests().routes(events).last == "unknown (was headset) override")
        #expect(server.current.server.defaultSinkName == "alsa_output.sim-hdmi.hdmi-stereo")
    }

    /// The persistent default changed on a phone on its speaker: the route goes to the earpiece.
    @Test func aNewDefaultMovesTheRouteThatWasTheOldDefaults() throws {
        let server = FakeServer(try fixture("sim/pulseaudio-phone"))
        server.profiles["alsa_card.sim-phone/Voice Call"] = try fixture("sim/pulseaudio-phone-voicecall")
        let store = FakeStore()
        server.script = rules(store, priority: [], default: .earpiece)
        let events = try run(server, store)
        #expect(WatchTests().routes(events) == ["speaker initial", "receiver (was speaker) override"])
        #expect(Status(snapshot: server.current).route == .receiver)
    }

    /// What the change does not move stays: a route another client put elsewhere, a list whose first
    /// entry is the route already, an override in force, a call.
    @Test func aChangeTheRouteWasNotUnderMovesNothing() throws {
        let all = try fixture("sim/pulseaudio-all")
        let picked = all.routed(to: "alsa_output.sim-hdmi.hdmi-stereo")
        let externals = Status(snapshot: all).externalKeys
        let cases: [(Snapshot, (FakeStore) -> Void, [[String]])] = [
            (picked, { _ in }, [["headset"], [usb, hdmi]]),
            (all, { $0.record = OverrideRecord(target: .speaker, setAt: 0, externals: externals) }, [[hdmi]]),
            (all, { $0.call = CallRecord(startedAt: 0, speaker: false) }, [[hdmi]]),
        ]
        for (start, setUp, lists) in cases {
            let server = FakeServer(start)
            let store = FakeStore()
            setUp(store)
            server.script = lists.flatMap { rules(store, priority: $0, default: .earpiece) }
            let events = try run(server, store)
            #expect(server.applied.allSatisfy { $0.isEmpty }, "\(server.applied)")
            #expect(WatchTests().routes(events).count == 1)
        }
    }
}

/// A microphone's port switch on PipeWire: WirePlumber makes a monitor the default source for a
/// millisecond or two (hostile test: every mic jack printed `input none`, then the same input again).
@Suite struct InputStepTests {
    let mic = "alsa_input.sim-laptop.analog-stereo"

    func inputs(_ events: [Event]) -> [String] {
        events.compactMap { e in
            guard case let .input(source, previous, changed, muted) = e else { return nil }
            return "\(source ?? "none")\(changed ? " (was \(previous ?? "none"))" : "") muted=\(muted.map { "\($0)" } ?? "none")"
        }
    }

    /// Each script run from `start`, in plain watch and in watch --apply: the input events it prints.
    func expectInputs(from start: Snapshot, _ cases: [([FakeServer.Step], [String])],
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        for apply in [false, true] {
            let clock = ManualClock()
            for (script, expected) in cases {
                let server = FakeServer(start)
                server.clock = clock
                server.script = script
                let events = try WatchTests().run(server, FakeStore(), apply: apply, clock: clock)
                #expect(inputs(events) == expected, "apply: \(apply)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func aStepThroughAMonitorIsNoInputEvent() throws {
        let laptop = try fixture("sim/pulseaudio-laptop")
        var monitor = laptop
        monitor.server.defaultSourceName = "alsa_output.sim-laptop.analog-stereo.monitor"
        var muted = laptop
        muted.sources = muted.sources.map { var s = $0; if s.name == mic { s.mute = true }; return s }
        // Back within the moment: nothing. Back muted: the mute alone. A monitor kept while the
        // microphone could be used: said once the server has had its time to come back, and its
        // return says it came from none (not a change of the mute alone).
        try expectInputs(from: laptop, [([.change(monitor), .change(laptop)], []),
                                        ([.change(monitor), .change(muted)], ["\(mic) muted=true"]),
                                        ([.change(monitor), .pass(1.9), .change(laptop)], []),
                                        ([.change(monitor), .pass(2.1), .change(laptop)],
                                         ["none (was \(mic)) muted=none", "\(mic) (was none) muted=false"])])
    }

    /// A microphone jack pulled: its port's jack empties, the server steps through the monitor, switches
    /// the source to the internal microphone's port, and makes it the default again. However long the
    /// steps take (a busy machine), no input event; a microphone lost for good is said after the moment.
    @Test func aPortSwitchIsNoInputEventHoweverLongItTakes() throws {
        let laptop = try fixture("sim/pulseaudio-laptop")
        func with(active: String, mic: PortAvailability, internalMic: PortAvailability, default name: String) -> Snapshot {
            var s = laptop
            s.server.defaultSourceName = name
            s.sources = s.sources.map { source in
                guard source.name == self.mic else { return source }
                var source = source
                source.activePort = active
                source.ports = source.ports.map { var p = $0; p.availability = p.name == "analog-input-mic" ? mic : internalMic; return p }
                return source
            }
            return s
        }
        let monitor = "alsa_output.sim-laptop.analog-stereo.monitor"
        let plugged = with(active: "analog-input-mic", mic: .available, internalMic: .unavailable, default: mic)
        let pulled = with(active: "analog-input-mic", mic: .unavailable, internalMic: .unknown, default: monitor)
        let switched = with(active: "analog-input-internal-mic", mic: .unavailable, internalMic: .unknown, default: monitor)
        let back = with(active: "analog-input-internal-mic", mic: .unavailable, internalMic: .unknown, default: mic)
        let lost = with(active: "analog-input-mic", mic: .unavailable, internalMic: .unavailable, default: monitor)
        try expectInputs(from: plugged, [([.change(pulled), .pass(0.5), .change(switched), .pass(0.5), .change(back)], []),
                                         ([.change(lost), .pass(0.1)], ["none (was \(mic)) muted=none"]),
                                         ([.change(pulled), .pass(2.1)], ["none (was \(mic)) muted=none"])])
    }

    /// Headphones with a microphone in one combo jack: the route moves while the microphone's port
    /// steps through the monitor; the route event goes out, the step does not.
    @Test func aComboJacksRouteEventLeavesTheStepUnprinted() throws {
        let laptop = try fixture("sim/pulseaudio-laptop"), phones = try fixture("sim/pulseaudio-laptop-headphones")
        var step = phones
        step.server.defaultSourceName = "alsa_output.sim-laptop.analog-stereo.monitor"
        for apply in [false, true] {
            let server = FakeServer(laptop)
            server.script = [.change(step), .change(phones)]
            let events = try WatchTests().run(server, FakeStore(), apply: apply)
            #expect(WatchTests().routes(events) == ["speaker initial", "headset (was speaker) new-device-available"], "apply: \(apply)")
            #expect(inputs(events).isEmpty, "apply: \(apply)")
        }
    }

    /// The server passing through another microphone (a headset jack pulled on a phone with a USB
    /// microphone beside it): nothing; one that stays is printed once the moment has passed.
    @Test func aStepThroughAnotherMicrophoneIsNoInputEvent() throws {
        var laptop = try fixture("sim/pulseaudio-laptop")
        laptop.sources.append(Source(index: 20, name: "alsa_input.usb-mic", description: "USB mic"))
        var usb = laptop
        usb.server.defaultSourceName = "alsa_input.usb-mic"
        try expectInputs(from: laptop, [([.change(usb), .change(laptop)], []),
                                        ([.change(usb), .pass(0.1)], ["alsa_input.usb-mic (was \(mic)) muted=false"])])
    }
}

