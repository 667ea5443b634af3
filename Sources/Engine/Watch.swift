import Routing

/// `routectl watch [--apply]`: follows the server and reports its events; with `apply`, keeps the
/// rules (DESIGN.md §1) by acting on device changes.
///
/// The loop blocks until the server notifies a change (no polling; a timer only while a route move is
/// held), refetches once per burst, derives events by diffing against the previous snapshot, and
/// with `apply` lets the policy decide and carries its decision out.
public struct Watch {
    let server: any AudioServer
    let store: any PreferenceStore
    let clocks: Clocks
    let apply: Bool
    let muteOnFallback: Bool
    let timeout: Double
    /// Where events go; false when they cannot (stdout is gone), which ends the watch.
    let sink: (Event) -> Bool
    /// Where a refusal the watch survives is said (one line, no prefix).
    let warn: (String) -> Void
    var applier: RouteApplier { RouteApplier(server: server, store: store, clocks: clocks) }
    var snapshot: Snapshot
    var policy: PolicyState
    /// The route last printed, which the next route event says it was.
    var reported: (route: Route, output: Output?)
    /// A route move in progress whose route event waits until it is done, so that one user action is
    /// one route event in both modes and the server's transients on the way are not reported.
    var hold: RouteHold?
    /// A steal plain `watch` reported from the restore's intent (`stealUndone`): the restore's time
    /// and the output it took the route back from.
    var stealReported: (intent: Int64, output: String)?
    /// The intent (by its time) already turned into a hold: each is adopted once.
    var adoptedIntent: Int64?
    /// Announced moves (by their time) this watcher has seen over (`noteMovesReached`): each explains
    /// one arrival, and none after a later one was seen (`externalSet`).
    var reachedMoves: Set<Int64> = []
    /// Announced moves whose arrival this watcher saw: the route changed to their output.
    var arrivedMoves: Set<Int64> = []
    /// The intent as read once for the change being handled, so that every decision about that change
    /// sees the same one: a command can finish between two reads (a watcher slow under load saw its
    /// intent in progress, then done, and held nothing).
    var intentThisChange: RouteIntent??
    /// The announced move that explains the change being handled (`externalSet`), found once: seeing
    /// the route reach a move's output spends it, so a second search would answer differently.
    var ownThisChange: (outputID: String, reason: RouteChangeReason)??
    /// Outputs that appeared in the last second, by id, with the monotonic time they did: a switch to
    /// one within that window is the server's reaction to its arrival (DESIGN.md's 1 s window).
    var recentlyAdded: [String: Double] = [:]
    /// Outputs that went in the last second: a route change moments after is the server's reaction.
    var recentlyRemoved: [String: Double] = [:]
    /// Whether the last `call` event (or the start) found a call in progress.
    var callActive = false
    /// With --apply: the owed profiles are to be looked at on every card here at the next round (at
    /// the start, and when a call ended), not only on cards that change.
    var owedCheck: Bool
    /// A call record was seen since the owed profiles were last looked at: its going is a call ended,
    /// also one that began and ended between two rounds of this watcher.
    var callRecordSeen = false
    /// When (monotonic) a call event that waits for its route event is due anyway (`reportCall`).
    var callEventDue: Double?
    /// The route lock was overdue when last asked for (`lockForMove`): said once, until it is taken again.
    var lockOverdue = false
    /// The state file error last said, while the files cannot be read: said once, not each round.
    var stateTrouble: String?
    /// The rules are owed a re-apply once the state files read again (the server came back meanwhile).
    var reapplyOwed = false
    /// The route and devices as they were when the server went away, for the re-apply once it is back.
    var beforeInterruption: Status?
    /// What the D-Bus service last showed of routectl's own state.
    var shownPreferences = Preferences()
    /// With --apply: the server moved the route off a card's output, the output still there, and
    /// nothing answered (it looked like another client's pick). WirePlumber does this at times a
    /// notification before it reports the output gone: another port of the card for a pulled jack,
    /// another card's sink for a Bluetooth headset disconnecting. If that output is reported gone
    /// within the departure window, the rules answer its departure from the snapshot before the
    /// move, as when the two come in one notification.
    var serverMove: ServerMove?

    struct ServerMove {
        var left: String
        var before: Snapshot
        var at: Double
    }
    /// With --apply: seconds a departed device has to come back before its override clear happens
    /// (0: at once).
    let holdDown: Double
    /// Devices gone within the hold-down, by id: when they left and what carried the sound then.
    var departures: [String: Departure] = [:]
    /// Headsets back within the hold-down during a call (a flicker that kept the override), which
    /// carried the call when they left but came back before their headset profile (A2DP first): the
    /// call goes back to them once it is up (`AwaitedCarrier`).
    var carriersAwaitingHeadsetProfile: [String: AwaitedCarrier] = [:]
    /// Served on this loop (`watch --apply --dbus`), told what the server shows.
    public var remote: RemoteControl?
    /// With --apply: true once the persistent state may have changed since it was last asked (another
    /// shell's `priority set|clear` or `default`); the loop then applies the rules it now holds.
    public var rulesMayHaveChanged: (() -> Bool)?
    /// An `input` event to another input or none, held for a moment (`heldInputQuiet`), and for as
    /// long as the server is on its way back to the input last printed (`Snapshot.isReturning`, at
    /// most `RouteHold.limit`): while it switches a microphone's port, the server makes a monitor or
    /// another microphone the default source for a few milliseconds, longer on a busy machine
    /// (WirePlumber, on a mic or headset jack). Back on the input last printed by then, nothing is
    /// printed; otherwise one event from it, then (other events meanwhile are not held for it). A
    /// change of the mute alone is printed at once.
    var heldInput: (event: Event, since: Double, until: Double)?
    /// The input last printed, and its mute.
    var reportedInput: (source: String?, muted: Bool?) = (nil, nil)
    /// `engaged no` and `other-audio stopped` (by event type), held until (monotonic) a moment has
    /// passed (`heldInputQuiet`): while the server moves a playing stream to another sink (the route
    /// changed, a device went), a snapshot can show it on no sink or corked for a few milliseconds.
    /// Playing again by then, nothing is printed.
    var heldStops: [String: (event: Event, until: Double)] = [:]
    static let heldInputQuiet = RouteHold.quiet
    /// With --apply, in a call: the call's microphone mute as this watcher knows it (`keepCallMute`),
    /// the call's input (its source and port) with the mute last seen on it, and when (monotonic) the
    /// input last moved.
    var callMute: CallRecord.Mute?
    var callInput: (key: String, muted: Bool)?
    var callInputMovedAt: Double?
    /// How long after the call's input moves the server's restore of its own mute may come (WirePlumber
    /// restores a port's a moment after the port switch), in seconds.
    static let callMuteWindow = 1.0
    /// The priority list and persistent default the rules were last applied with.
    var rulesSeen: (priority: [String], defaultTarget: RouteTarget)?
    var rulesCheckOwed = false
    /// With --apply: the output the route left when another client picked another one (respected,
    /// rule 5), and the one picked. In a call the microphone follows the output (rule 8), once the pick
    /// is reported (`followCallInput`).
    var callInputFollow: (left: Output, picked: String, inputThen: String?)?
    /// The default input (its id) as the route last left the output last reported: what the
    /// microphone was before a pick that moved it.
    var inputAsRouteLeft: String?

    /// A headset the call goes back to once its headset profile is up, while nothing else was chosen
    /// meanwhile: the override the flicker kept still stands, and the route is where it fell back to
    /// (not moved since by a plug, a `set` or another client).
    struct AwaitedCarrier {
        var override: OverrideRecord
        var fallback: String?
    }

    struct Departure {
        /// The override clear it holds back, if its leaving would clear one.
        var clear: DeferredClear?
        var leftAt: Double
        /// The output the route was on when the device left: a return puts the route back there.
        var carried: String?
        /// That output's card profile then.
        var carriedProfile: String?
        var deadline: Double
        /// The connection order when it left (rule 3's recency): a return takes its place back.
        var order: [String] = []
        /// Whether it could carry a call before it left (`PolicyState.callCapable`): a return is the
        /// same connection to the rules, whose headset profile coming back is no new arrival.
        var callCapable = false
        /// The override standing when it left, whether or not it would clear it. One set while it was
        /// away is newer than the device: its return is an arrival (rule 1), no flicker.
        var overrideThen: OverrideRecord?

        /// The override the departure would clear: a return or the deadline acts only while it stands
        /// (a `clear` or another `set` meanwhile ends the hold-down).
        var override: OverrideRecord? { clear == nil ? nil : overrideThen }

        func isFlicker(under standing: OverrideRecord?) -> Bool { standing == nil || standing == overrideThen }
    }

    public init(server: any AudioServer, store: any PreferenceStore, clocks: Clocks, apply: Bool, muteOnFallback: Bool,
                holdDown: Double = 0, timeout: Double, snapshot: Snapshot, sink: @escaping (Event) -> Bool,
                warn: @escaping (String) -> Void) {
        self.holdDown = holdDown
        owedCheck = apply
        self.server = server
        self.store = store
        self.clocks = clocks
        self.apply = apply
        self.muteOnFallback = muteOnFallback
        self.timeout = timeout
        self.sink = sink
        self.warn = warn
        self.snapshot = snapshot
        let status = Status(snapshot: snapshot)
        policy = PolicyState(status: status)
        reported = (status.route, status.output)
    }

    /// Prints the initial route, then follows the server until asked to stop or the sink fails.
    public mutating func run() throws(EngineError) {
        let status = Status(snapshot: snapshot)
        reportedInput = (status.defaultInput, status.micMuted)
        guard emit(.route(route: status.route, previous: nil, reason: .initial, output: status.output)) else { return }
        guard reportCall() else { return }
        if apply {
            let cleared = clearStaleOverride(status)
            if let cleared { guard emit(cleared) else { return } }
            if let preferences = try? store.preferences() { rulesSeen = (preferences.priority, preferences.defaultTarget) }
            do {
                guard try applyRulesOnStart(clearedOverride: cleared != nil) else { return }
            } catch {
                // Said, and left to the next change: the watcher is for what comes.
                warn("\(error)")
            }
            // A call on already: its input as it stands now.
            _ = try? keepCallMute()
        }
        while !server.shouldStop {
            // Call mode began or ended since the last round (after its route event, once no move is held).
            guard reportCall() else { break }
            if let remote {
                // While a state file cannot be read, the last preferences that could: not the defaults
                // (a phone shell would take `AudioMode` 0 for the call's end).
                if let read = try? store.preferences() { shownPreferences = read }
                remote.update(Status(snapshot: snapshot), shownToRemote)
            }
            do {
                // Requests that came while the last round was busy (an inner wait took their wake-up),
                // and hold-downs that passed meanwhile, are handled before waiting again.
                serveRemote()
                if stateTrouble != nil {
                    // The state files read again: the rules are applied again if the server came back
                    // meanwhile, and what changed while they could not be read is handled now, as one
                    // change against the last state handled. (Still unreadable: caught below, tried again.)
                    _ = try preferences()
                    stateTrouble = nil
                    if reapplyOwed {
                        reapplyOwed = false
                        let before = snapshot
                        let reason = try reapplyRules()
                        // The route event, then the steps' other events (the microphone back with it).
                        guard reportRoute(Status(snapshot: snapshot), reason: reason),
                              emitSteps(Change(previous: before, current: snapshot)) else { break }
                    }
                    let next = try server.snapshot(timeout: timeout)
                    guard try handle(Change(previous: snapshot, current: next), next) else { break }
                    continue
                }
                guard try holdDownsPassed() else { break }
                if owedCheck {
                    // A card owed its profile that came back while no policy ran, or during the call
                    // that just ended, gets it now: the tail of `call end`, reported as such.
                    owedCheck = false
                    if let paid = try payOwedProfiles(snapshot, cards: nil, reason: .call) {
                        guard try handle(Change(previous: snapshot, current: paid), paid) else { break }
                        continue
                    }
                }
                guard try followCallInput() else { break }
                if apply, hold == nil, rulesCheckOwed || rulesMayHaveChanged?() == true {
                    // Owed until done: a state file that cannot be read now is looked at again.
                    rulesCheckOwed = true
                    guard try applyChangedRules() else { break }
                    rulesCheckOwed = false
                }
                guard releaseHeldEvents(dueOnly: true) else { break }
                let wake = ([hold?.wakeAt, callEventDue, heldInput?.until, heldStops.values.map(\.until).min()] + departures.values.map(\.deadline))
                    .compactMap { $0 }.min()
                let wait = wake.map { max(0, $0 - clocks.monotonic()) }
                let changed = try server.waitForChanges(timeout: wait)
                // What remote clients asked is carried out between rounds, never inside their callbacks.
                serveRemote()
                guard changed else {
                    if server.shouldStop { break }
                    guard releaseHeldEvents(dueOnly: true) else { break }
                    guard try holdDownsPassed() else { break }
                    // Done and quiet, or out of time: report where the route is now.
                    adoptIntent(snapshot)
                    guard let held = hold, held.wakeAt <= clocks.monotonic() else { continue }
                    if missedTheMove(snapshot) { continue }
                    hold = nil
                    guard reportRoute(Status(snapshot: snapshot), reason: held.reason) else { break }
                    continue
                }
                // watch --apply handles each change under the route lock, from its refetch to its
                // answer: a command holding it (set, clear, call) finishes first, and the change is
                // read and decided on as the command left the server.
                let routeLock = apply ? lockForMove() : nil
                let next = try server.snapshotAfterChange(timeout: timeout)
                let goOn = try handle(Change(previous: snapshot, current: next), next)
                if goOn, apply { try keepCallMute() }
                withExtendedLifetime(routeLock) {}
                guard goOn else { break }
            } catch let error as EngineError {
                if case .state = error {
                    // A state file that became unreadable while watching (one that cannot be read at the
                    // start ends watch --apply, exit 5): said once, and tried again each second. The
                    // events wait (what changes meanwhile is reported as one change once it reads); the
                    // D-Bus service goes on answering. Ending here would take the phone shell's call
                    // audio service down with it.
                    sayStateTrouble(error)
                    guard releaseHeldEvents(dueOnly: false), server.pause(seconds: 1) else { break }
                    continue
                }
                guard server.isConnected else {
                    guard try recover(from: "\(error)") else { break }
                    continue
                }
                warn("\(error)")
            } catch {
                guard server.isConnected else {
                    // The server went away, while waiting or while acting on a change.
                    guard try recover(from: "\(error)") else { break }
                    continue
                }
                // A connected server refused one step (a stream that would not move, a device that
                // vanished meanwhile): say so and keep watching; the next change is handled afresh.
                warn("\(error)")
            }
        }
        _ = releaseHeldEvents(dueOnly: false)
        // A move still held when the watch ends is reported as it stands.
        if let held = hold {
            hold = nil
            _ = reportRoute(Status(snapshot: snapshot), reason: held.reason)
        }
    }

    /// Reports one change and, with --apply, acts on it. False when stdout is gone.
    mutating func handle(_ change: Change, _ next: Snapshot) throws -> Bool {
        intentThisChange = .some(store.loadIntent())
        defer {
            intentThisChange = nil
            ownThisChange = nil
        }
        if change.previous.output?.id == reported.output?.id {
            inputAsRouteLeft = change.previous.inputs.first(where: \.isDefault)?.id
        }
        if hold == nil, lateForFinishedCommand(change), server.hasPendingChanges() {
            // Late for a command that has finished (a watcher slow under load): this refetch shows a
            // step of its move (the route is not where the command left it) and newer notifications
            // are queued. The whole change waits for the refetch they bring, diffed against the
            // snapshot before it: nothing is lost or said twice, the move is one route event, and
            // the rules (watch --apply) decide on where the server ended, not on a step on the way.
            return true
        }
        var change = change, next = next
        // Cards that came or changed (a profile, the profiles offered): one owed its profile gets it
        // (`payOwedProfiles`). Come with an output, it is one arrival, as if it came so.
        let cards = Set(next.cards.filter { !snapshot.cards.contains($0) }.map(\.name))
        if apply, !cards.isEmpty {
            let arriving = change.added.contains { output in output.cardName.map(cards.contains) ?? false }
            do {
                if let paid = try payOwedProfiles(next, cards: cards, reason: arriving ? .newDeviceAvailable : .call) {
                    // (The switch's own intent is not this change's: the arrival is not routectl
                    // switching a card on, and the rules answer it as any arrival.)
                    next = paid
                    change = Change(previous: snapshot, current: paid)
                }
            } catch {
                // The profile is owed still; the change is answered as it is.
                warn("\(error)")
            }
        }
        let clock = clocks.monotonic()
        recentlyAdded = recentlyAdded.filter { clock - $0.value < 1 }
        for output in change.added { recentlyAdded[output.id] = clock }
        recentlyRemoved = recentlyRemoved.filter { clock - $0.value < Policy.noStealWindow }
        for output in change.removed { recentlyRemoved[output.id] = clock }
        let own = externalSet(change)
        ownThisChange = .some(own)
        let events = Events.diff(change, own: own, recentlyAdded: Set(recentlyAdded.keys))
        let undone = apply ? nil : stealUndone(change)
        guard endSupersededHold() else { return false }
        noteMovesReached(change)
        if let held = hold, let reached = held.reached, let target = held.target,
           change.removed.contains(where: { $0.id == target }) {
            // The move got there, then its device went (a headset disconnecting as it was chosen):
            // both happened, and each is reported.
            hold = nil
            guard reportRoute(reached, reason: held.reason) else { return false }
        }
        // The server's step on the way is over: it passed through an HDMI output (WirePlumber, on a jack
        // of the laptop) or moved on to a device just plugged. One route event, after this change's
        // device events, from where the user was to where the route went: the arrival's reason, else
        // the departure's. (A move routectl announced is its command's, reported as such.)
        var endedHold: RouteChangeReason?
        if !apply, own == nil, let held = hold, held.intent == nil, held.departed != nil || held.transient, change.routeChanged,
           let now = change.current.output, now.id != held.target {
            let reason = Events.reason(change, own: nil, recentlyAdded: Set(recentlyAdded.keys))
            if held.transient || reason == .newDeviceAvailable {
                hold = nil
                endedHold = reason == .newDeviceAvailable ? reason : held.reason
            }
        }
        if var held = hold {
            let arrived = held.isDone(next)
            held.note(arrived: arrived, at: clock)
            if arrived { held.reached = Status(snapshot: next) }
            // The output the route left went away after all: that was why the route moved; or its
            // card switched profile (PipeWire drops the old sink a notification before it says so).
            if let departed = held.departed, change.removed.contains(where: { $0.id == departed }) {
                held.reason = .oldDeviceUnavailable
            } else if let card = held.departedCard, change.profileChanged.contains(card) {
                held.reason = .categoryChange
            } else if held.reason == .noSuitableRoute, let departed = held.departed, change.current.output != nil,
                      !change.current.outputs.contains(where: { $0.id == departed && $0.isConnected }) {
                // The server put a sink in place of the one that went (pipewire-pulse's auto_null a
                // moment after the last sink): as if both came in one notification.
                held.reason = .oldDeviceUnavailable
            }
            hold = held
        }
        adoptIntent(next, reportNow: change.added.isEmpty && change.removed.isEmpty)
        guard apply else { return follow(change, next, events, stealUndone: undone, endedHold: endedHold) }
        // The rules decide and act under the route lock (`lockForMove`).
        let routeLock = lockForMove()
        defer { withExtendedLifetime(routeLock) {} }
        let preferences = try preferences()
        // Devices back within the hold-down, with no override set since they left: flickers. The
        // override stays and the route goes back to where it was when they left. (Back under an
        // override set meanwhile, a device is newer than it: an arrival, as rule 1 answers it.)
        // The override record, read only when a hold-down has something to time or to match.
        let timing = holdDown > 0 && (!departures.isEmpty || change.removed.contains { $0.route.isExternal })
        let standing = timing ? try? store.overrideRecord() : nil
        let now = clocks.monotonic()
        // routectl's own command switching a card off or on (call end putting back a card that was
        // off, call start or set switching one on): its outputs going or coming are that step. So is
        // a change that brings the route to the output a command just announced (call end leaving the
        // earpiece for a device on another card, and its card for HiFi): not a card flipping by itself.
        let ownStep = hold?.intent != nil || ownStepSeen(change)
        let ownCardSwitch = ownCardSwitch(change)
        let returns = change.added.compactMap { output in departures.removeValue(forKey: output.id).map { (output, $0) } }
            .filter { $0.1.deadline > now && !ownCardSwitch && $0.1.isFlicker(under: standing) }
        // The override waits on a flicker only when it is the one the device left under.
        // (Returns are under the override they left under, or none: `isFlicker`.)
        let flickers = returns.filter { standing != nil && $0.1.overrideThen == standing }
        let early = departureAfterServerMove(change, next, at: now)
        let decided = early ?? change
        let orderBefore = policy.connected
        let callCapableBefore = policy.callCapable
        var decision = Policy.decide(decided, state: &policy, preferences: preferences, muteOnFallback: muteOnFallback,
                                     recentlyAdded: Set(recentlyAdded.keys), recentlyRemoved: recentlyRemoved.isEmpty ? [] : departedNow(change),
                                     holdDown: holdDown > 0)
        noteServerMove(change, decision, at: now)
        if !flickers.isEmpty { decision.clearOverride = nil }
        if !carriersAwaitingHeadsetProfile.isEmpty {
            if !preferences.inCall { carriersAwaitingHeadsetProfile = [:] }
            for output in change.removed { carriersAwaitingHeadsetProfile[output.id] = nil }
        }
        if !returns.isEmpty {
            // One flicker, not an unplug and a plug: the route ends where it was when the device left,
            // on the device if it carried the sound, else where it stayed; and the device is no newer
            // a connection for coming back (rule 3, here and when the rules are applied again later).
            for (output, departure) in returns {
                if departure.callCapable { policy.callCapable.insert(output.id) }
                guard let place = departure.order.firstIndex(of: output.id) else { continue }
                let earlier = Set(departure.order[..<place])
                policy.connected.removeAll { $0 == output.id }
                let after = policy.connected.lastIndex(where: earlier.contains).map { $0 + 1 } ?? 0
                policy.connected.insert(output.id, at: after)
            }
            let status = Status(snapshot: next)
            // In a call, a headset back before its headset profile (A2DP first) cannot carry the call
            // yet: the rules decide, and it takes the call once its HFP is up (Policy.decide).
            if let carried = returns.lazy.compactMap(\.1.carried).first,
               let back = status.outputs.first(where: { $0.id == carried && $0.isAvailable && (!preferences.inCall || $0.takesCalls) }) {
                // A device that carried the sound and came back may need a step even where the server
                // already put the route back on it:
                // - on a sink other than the one the route fell back to (a Bluetooth headset's), it is
                //   named the default again: the fallback made that other sink the server's remembered
                //   default, which WirePlumber goes back to a moment later;
                // - on another profile than the one it left from, and one the rules would not choose
                //   (PipeWire's ACP selects a phone's headphones port in Voice Call, where the route
                //   had fallen back to the earpiece), the rules' profile is taken;
                // - what --mute-on-fallback muted as it left is unmuted.
                // An output that stayed while the device was away is left as it is.
                // (Cheapest first: the mute is a file, the profile a plan.)
                func takesAStep(_ left: Departure) -> Bool {
                    back.sink != change.previous.server.defaultSinkName
                        || store.mutedByRoutectl != nil
                        || back.cardProfile != left.carriedProfile
                            && Self.policyPlan(next, .output(back), preferences, status: status)?.movesRoute == true
                }
                // In a call, the microphone goes with the route: the server may have made the returning
                // headset's the default as it came back (WirePlumber, HFP) with the route elsewhere.
                let callInputAstray = preferences.inCall
                    && Planner.callInput(for: back, next, status).map { !Planner.sourceActions($0, next).isEmpty } == true
                let left = returns.first { $0.0.id == back.id }?.1
                let there = status.output?.id == back.id && !callInputAstray && !(left.map { takesAStep($0) } ?? false)
                decision.request = there ? nil : .output(back)
                decision.reason = .newDeviceAvailable
            } else if preferences.inCall, let carried = returns.lazy.compactMap(\.1.carried).first,
                      flickers.contains(where: { $0.0.id == carried }), let standing,
                      status.outputs.contains(where: { $0.id == carried && $0.isConnected && !$0.takesCalls }) {
                // Without an override the rules take it back themselves once it can carry the call
                // (Policy.decide), ranked among the devices plugged meanwhile. (The route it fell back
                // to is the one before this return: a server's switch to the A2DP-only device as it
                // appears is undone as `restored`.)
                carriersAwaitingHeadsetProfile[carried] = AwaitedCarrier(override: standing, fallback: change.previous.output?.id)
            }
        } else if !carriersAwaitingHeadsetProfile.isEmpty {
            // A headset back for the call it carried (above), its headset profile up now: the call goes
            // back to it, as to a headset back with it at once, and the override that stood stands.
            let status = Status(snapshot: next)
            if let ready = status.outputs.first(where: { carriersAwaitingHeadsetProfile[$0.id] != nil && $0.isAvailable && $0.takesCalls }),
               let awaited = carriersAwaitingHeadsetProfile.removeValue(forKey: ready.id),
               decision.request == nil, change.previous.output?.id == awaited.fallback,
               (try? store.overrideRecord()) == awaited.override {
                decision.request = status.output?.id == ready.id ? nil : .output(ready)
                decision.reason = .newDeviceAvailable
            }
        }
        // Every external device leaving is timed, so that its return within the hold-down is a flicker;
        // only one that would clear the override holds that clear.
        if holdDown > 0 {
            for output in change.removed where output.route.isExternal {
                let clear = decision.deferredClear.flatMap { $0.device.id == output.id ? $0 : nil }
                departures[output.id] = Departure(clear: clear, leftAt: now,
                                                  carried: decided.previous.output?.id, carriedProfile: decided.previous.output?.cardProfile,
                                                  deadline: now + holdDown, order: orderBefore,
                                                  callCapable: callCapableBefore.contains(output.id), overrideThen: standing)
            }
        }
        if ownCardSwitch || (decision.reason == .categoryChange || decision.reason == .noSuitableRoute) && ownStep {
            // routectl's own profile switch is under way (set, clear, call start or end): the card is
            // not flipping by itself, and its sink gone for a moment (pipewire-pulse can report the
            // new one a notification later) is that switch, not a route lost.
            decision.request = nil
            decision.reason = nil
        }
        // A flicker comes after its device events and before the route event that puts the route back,
        // whether the server already did (printed here) or routectl's move does (printed after it).
        var unreported = returns[...]
        func emitFlickers() -> Bool {
            while let (output, departure) = unreported.popFirst() {
                let away = Int(((clocks.monotonic() - departure.leftAt) * 1000).rounded())
                guard emit(.flicker(output, awayMilliseconds: away)) else { return false }
            }
            return true
        }
        // The route event waits for routectl's own move, so that one user action is one route change.
        // The server's steal by an HDMI output is reported, then routectl's putting it back.
        for event in events where decision.request == nil || decision.reason == .restored || event.type != "route" {
            if case let .route(_, _, reason, _) = event {
                guard emitFlickers(), reportOrHold(Status(snapshot: next), reason: reason) else { return false }
                continue
            }
            guard emit(event) else { return false }
        }
        snapshot = next
        guard emitFlickers() else { return false }
        guard !decision.isEmpty else { return true }

        if let cause = decision.clearOverride, let target = preferences.override, clearOverride() {
            guard emit(.overrideCleared(override: target, cause: cause)) else { return false }
        }
        var after = next
        var reason = decision.reason ?? .override
        // The server's move off an output, held for its departure window, stays held when the rules
        // find nowhere to go: its route event comes when the window ends, as in plain watch.
        var leftHeld = false
        if let request = decision.request {
            let result: RouteApplier.Result
            do {
                // The policy's choice becomes the server's own default, also when the server already
                // fell back to it: WirePlumber returns to the default it remembers as soon as that is
                // usable again (a phone's sink once its speaker port replaces the pulled headphones).
                result = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout,
                                           reason: decision.reason ?? .override, inCall: preferences.inCall, claimDefault: true,
                                           keepCardsOff: true)
            } catch {
                // The change happened even if routectl's answer to it failed: report the route as it is.
                _ = reportRoute(Status(snapshot: next), reason: Events.reason(change, own: nil, recentlyAdded: Set(recentlyAdded.keys)))
                throw error
            }
            after = result.snapshot
            if result.plan.output == nil, result.plan.actions.isEmpty {
                // The rules found nowhere to go (the only card turned off, its sink gone): the change
                // speaks for itself, as plain watch says it, or the server's move held for it.
                if let held = hold, held.departed != nil, held.intent == nil {
                    leftHeld = true
                } else {
                    reason = Events.reason(change, own: own, recentlyAdded: Set(recentlyAdded.keys))
                }
            }
            if decision.muteFallback, result.status.route == .speaker, let sink = result.status.output?.sink {
                // A speaker the user had muted is theirs: routectl neither mutes it nor, later, unmutes it.
                if result.snapshot.sinks.first(where: { $0.name == sink })?.mute == false {
                    after = try server.apply([.setSinkMute(sink: sink, mute: true)], timeout: timeout) { s in
                        s.sinks.first { $0.name == sink }?.mute == true
                    }
                    store.mutedByRoutectl = sink
                }
            } else if result.status.route.isExternal {
                // The device came back: what --mute-on-fallback muted is unmuted (only that).
                after = try RouteApplier.unmuteWhatRoutectlMuted(server, store, after, timeout: timeout)
            }
        }
        if let input = decision.restoreInput {
            after = try server.makeDefault(input, from: after, timeout: timeout)
        }
        // One route event from where the user was to where the rules put the sound; the other events
        // of routectl's own steps (the microphone that followed, say) after it.
        let steps = Change(previous: next, current: after)
        if decision.request != nil || decision.clearOverride != nil {
            store.saveDecision(DecisionRecord(reason: decision.reason ?? .override, cause: Self.cause(of: change),
                                              output: steps.current.output?.id, at: clocks.wallMilliseconds()))
        }
        if early != nil, decision.request != nil, hold?.intent == nil, !leftHeld {
            // The server's move, held in its departure window, is answered and reported here, as one change.
            hold = nil
        }
        if decision.request == nil {
            // No move of routectl's (a preferred microphone put back alone, an override cleared where
            // the route already was): the change's route events went out above, or are held there (a
            // profile switch's). The server moving the route during that step is its own change.
            let moved = Events.reason(steps, own: nil, recentlyAdded: Set(recentlyAdded.keys))
            guard reportOrHold(Status(snapshot: after), reason: moved) else { return false }
        } else {
            guard leftHeld || reportRoute(steps.current, reason: reason) else { return false }
        }
        guard emitSteps(steps) else { return false }
        snapshot = after
        return true
    }

    /// In a call, another client's pick of another output (respected, rule 5) takes the call's
    /// microphone with it (rule 8: the input follows the output): the headset's own, else the built-in
    /// one. Decided under the route lock on the server as it is then, once the changes since the pick
    /// are handled (a `set`, a `call start` or a D-Bus request may have moved the route on: then there
    /// is nothing to follow), and only while the microphone is the one the call had as the route left
    /// (one picked since, by that client or the user, stands). Its events after the route event, with
    /// the call's mute kept. False when stdout is gone.
    mutating func followCallInput() throws -> Bool {
        guard let pick = callInputFollow else { return true }
        // (A state file that cannot be read leaves it owed, for when it can.)
        guard try preferences().inCall else {
            callInputFollow = nil
            return true
        }
        let routeLock = lockForMove()
        defer { withExtendedLifetime(routeLock) {} }
        // Again under the lock: `call end` may have ended the call meanwhile, its microphone put back.
        guard try preferences().inCall else {
            callInputFollow = nil
            return true
        }
        // (Read leaving the notifications it covers owed: whatever moved the route or the microphone
        // since is still the main loop's next change to handle and report.)
        let now = try server.latestSnapshot(timeout: timeout)
        let status = Status(snapshot: now)
        guard let output = status.output, output.id == pick.picked else {
            callInputFollow = nil
            return true
        }
        // Something changed since the last change handled: that change is handled first (its
        // notifications are on their way), and the follow is looked at again after it.
        guard now == snapshot else { return true }
        callInputFollow = nil
        guard status.inputs.first(where: \.isDefault)?.id == pick.inputThen,
              let was = Planner.callInput(for: pick.left, now, status), was.isDefault,
              let mic = Planner.callInput(for: output, now, status) ?? status.builtInMicrophone else { return true }
        guard !mic.isDefault else { return true }
        snapshot = try server.makeDefault(mic, from: now, timeout: timeout)
        if let muted = try keepCallMute() { snapshot = muted }
        return emitSteps(Change(previous: now, current: snapshot))
    }

    /// The call's microphone mute stays the call's as its input moves (a headset plugged, Bluetooth
    /// taking or leaving the call, a mic jack, the server restarting): the server gives each source,
    /// or each port, the mute it remembers for it, so a caller who muted would otherwise be heard.
    /// Within `callMuteWindow` of a move, an input that comes live while the call is muted is muted
    /// again. The call's mute is the one routectl last set (`call.json`: `call start`, `input mute`,
    /// D-Bus MuteMic) or a change seen on the call's input since, whichever is newer; within the
    /// window a change seen is taken only when it mutes (the server's restore cannot be told from the
    /// user's there, and a mute is never wrong to keep). routectl never unmutes a microphone by itself.
    /// Under the route lock, after the change is handled; a step on the way (more notifications
    /// queued) is left for the change that ends it.
    @discardableResult
    mutating func keepCallMute() throws -> Snapshot? {
        let record = try? store.callRecord()
        guard let record, record.applied else {
            callMute = nil
            callInput = nil
            callInputMovedAt = nil
            return nil
        }
        guard let source = snapshot.defaultSource, !source.isMonitor else { return nil }
        adoptCallMute(asked: record)
        let key = source.name + "\u{0}" + (source.activePort ?? "")
        let now = clocks.monotonic()
        let seen = callInput
        if let seen, seen.key != key { callInputMovedAt = now }
        callInput = (key, source.mute)
        let moving = callInputMovedAt.map { now - $0 < Self.callMuteWindow } ?? false
        let observed = CallRecord.Mute(muted: source.mute, at: clocks.wallMilliseconds())
        if seen == nil, !moving {
            // The input as this watcher first finds it in the call.
            if callMute == nil { callMute = observed }
            return nil
        }
        if let seen, seen.key == key, seen.muted != source.mute, !moving || source.mute {
            // The user's own change, with any tool.
            callMute = observed
            return nil
        }
        guard moving, callMute?.muted == true, !source.mute, !server.hasPendingChanges() else { return nil }
        let muted = try CallMode(server: server, store: store, clocks: clocks).setMute(of: source.name, to: true, timeout: timeout)
        callInput = (key, true)
        return muted
    }

    /// The call's mute as routectl last set it (`call.json`), when that is newer than the one this
    /// watcher knows (`callMute`: one seen on the call's input since).
    mutating func adoptCallMute(asked record: CallRecord) {
        if let asked = record.callMute, asked.at > callMute?.at ?? .min { callMute = asked }
    }

    /// Rule 8's "for the call only" for a card that left during a call (`owedProfiles`): outside a
    /// call, a card the server gave back the call's profile gets its profile from before the call
    /// (`isDue`), once it shows a profile at all. `cards` are the cards to look at, by name (nil:
    /// every one here); `reason` is what watchers report for the switch. An entry is settled once its
    /// card shows a profile outside a call: paid, or in another profile (a user's, the server's). One
    /// whose switch did not show stays for the card's next change. Returns the snapshot after the
    /// switch, or nil when there was none to make.
    mutating func payOwedProfiles(_ snapshot: Snapshot, cards: Set<String>?, reason: RouteChangeReason) throws(EngineError) -> Snapshot? {
        let owed = store.owedProfiles()
        guard !owed.isEmpty, cards.map({ names in owed.contains { names.contains($0.card) } }) ?? true else { return nil }
        // Under the route lock, as `call start` reads them: a call starting now waits for the switch
        // (and then finds nothing owed), and one that started first is seen.
        let lock = lockForMove()
        defer { withExtendedLifetime(lock) {} }
        do {
            guard try store.callRecord() == nil else {
                // The call's end owes or restores it; this watcher looks again once the call is over.
                callRecordSeen = true
                return nil
            }
        } catch {
            return nil
        }
        var settled: [String] = [], due: [CallRecord.CardProfile] = []
        for entry in owed {
            guard cards?.contains(entry.card) ?? true, let card = snapshot.cards.first(where: { $0.name == entry.card }),
                  let active = card.activeProfile, active != "off" else { continue }
            if entry.isDue(on: card) {
                due.append(entry)
            } else if !entry.isStillOwed(by: card) {
                settled.append(card.name)
            }
        }
        if !settled.isEmpty { store.updateOwedProfiles { $0.filter { !settled.contains($0.card) } } }
        guard !due.isEmpty else { return nil }
        // Plain watch holds its route event for the switch when the route is on the card, as for any
        // of routectl's own moves; elsewhere the switch moves no route.
        let route = Status(snapshot: snapshot).output
        let intent = route.flatMap { output in due.contains { $0.card == output.cardName } ? output.id : nil }
            .map { RouteIntent(output: $0, reason: reason, at: clocks.wallMilliseconds()) }
        if let intent { store.saveIntent(intent) }
        defer {
            if var done = intent {
                done.done = true
                store.saveIntent(done)
            }
        }
        let after = try applier.switchProfiles(due.map { .setCardProfile(card: $0.card, profile: $0.profile) }, timeout: timeout)
        let paid = due.filter { entry in after.cards.contains { $0.name == entry.card && $0.activeProfile == entry.profile } }.map(\.card)
        if !paid.isEmpty { store.updateOwedProfiles { $0.filter { !paid.contains($0.card) } } }
        return after
    }

    /// The change to decide on when `change` reports gone the output the server just moved the route
    /// off (`serverMove`): from the snapshot before that move to now. Nil otherwise; a device arriving
    /// or a profile switch meanwhile ends the wait.
    mutating func departureAfterServerMove(_ change: Change, _ next: Snapshot, at now: Double) -> Change? {
        guard let move = serverMove else { return nil }
        guard now - move.at <= RouteHold.departureWindow, change.added.isEmpty, change.profileChanged.isEmpty else {
            serverMove = nil
            return nil
        }
        guard change.removed.contains(where: { $0.id == move.left }) else { return nil }
        serverMove = nil
        return Change(previous: move.before, current: next)
    }

    /// Remembers a move of the route off a card's output that nothing answered, the output still
    /// there: neither routectl's (no intent explains it) nor the rules'. (Called before `snapshot` moves
    /// on to the change's new one.)
    mutating func noteServerMove(_ change: Change, _ decision: Decision, at now: Double) {
        guard change.routeChanged, decision.isEmpty, change.added.isEmpty, change.removed.isEmpty,
              hold?.intent == nil, externalSet(change) == nil,
              let left = change.previous.output, left.cardName != nil,
              change.current.outputs.contains(where: { $0.id == left.id && $0.isAvailable }),
              !ownMoveJustNow(away: left) else { return }
        serverMove = ServerMove(left: left.id, before: snapshot, at: now)
    }

    /// Departures whose hold-down passed without the device coming back: the override they would
    /// have cleared goes now, and when that changes where the rules put the sound, the route moves.
    /// False when stdout is gone.
    mutating func holdDownsPassed() throws -> Bool {
        let now = clocks.monotonic()
        let passed = departures.filter { $0.value.deadline <= now }
        guard !passed.isEmpty else { return true }
        let routeLock = lockForMove()
        defer { withExtendedLifetime(routeLock) {} }
        // The rules need the state files: an override is not cleared while the move it makes owed
        // cannot be made (they are tried again; the departures wait for them).
        _ = try preferences()
        for id in passed.keys { departures[id] = nil }
        // Only the override the devices left under; one set since then is the user's newer wish. (A
        // device there again clears nothing: `dropReturnedDepartures`.)
        let standing = try? store.overrideRecord()
        let present = Set(Status(snapshot: snapshot).externalKeys)
        let due = passed.filter { !present.contains($0.key) }.values.filter { $0.clear != nil && $0.override != nil && $0.override == standing }
        guard let target = standing?.target, !due.isEmpty, clearOverride() else { return true }
        for departure in due.sorted(by: { $0.leftAt < $1.leftAt }) {
            guard emit(.overrideCleared(override: target, cause: departure.clear?.cause ?? "")) else { return false }
        }
        let preferences = try self.preferences()
        let status = Status(snapshot: snapshot)
        let request = Policy.choice(status, policy, defaultTarget: preferences.effectiveTarget, priority: preferences.priority,
                                    inCall: preferences.inCall)
        guard Self.policyPlan(snapshot, request, preferences, status: status)?.movesRoute == true else { return true }
        let result = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout,
                                       reason: .oldDeviceUnavailable, inCall: preferences.inCall, claimDefault: true,
                                       keepCardsOff: true)
        snapshot = try unmuteIfBackOnADevice(result.snapshot)
        store.saveDecision(DecisionRecord(reason: .oldDeviceUnavailable, cause: due.first?.clear?.cause,
                                          output: result.status.output?.id, at: clocks.wallMilliseconds()))
        return reportRoute(Status(snapshot: snapshot), reason: .oldDeviceUnavailable)
    }

    /// A move of the watcher's own that ends on an external device: what --mute-on-fallback muted is
    /// unmuted (only that), as when a device takes the route back in `handle`.
    mutating func unmuteIfBackOnADevice(_ after: Snapshot) throws(EngineError) -> Snapshot {
        guard Status(snapshot: after).route.isExternal else { return after }
        do { return try RouteApplier.unmuteWhatRoutectlMuted(server, store, after, timeout: timeout) } catch { throw .server(error) }
    }

    /// The outputs gone in the last second, except those this very change removed (the policy
    /// answers those as departures).
    func departedNow(_ change: Change) -> Set<String> {
        Set(recentlyRemoved.keys).subtracting(change.removed.map(\.id))
    }

    /// A card's profile step in this change is routectl's own command's (`ownMoveJustNow`,
    /// `arrivesAtOwnMove`): `watch --apply` does not answer it, and plain `watch` does not predict it will.
    func ownStepSeen(_ change: Change) -> Bool { ownMoveJustNow(away: change.previous.output) || arrivesAtOwnMove(change) }

    /// The change brings the route to the output a command of routectl's announced moments ago (a
    /// move between cards: call end from the earpiece to a Bluetooth speaker, the phone to HiFi).
    func arrivesAtOwnMove(_ change: Change) -> Bool {
        guard change.routeChanged, let output = change.current.output, let intent = intentNow(), intent.output == output.id else {
            return false
        }
        return explainsNow(intent)
    }

    /// A command's move still explains what this watcher sees: finished within `finishedExplains`,
    /// or begun within `inProgressExplains` and still under way.
    func explainsNow(_ intent: RouteIntent) -> Bool {
        let age = clocks.wallMilliseconds() - intent.at
        return age >= 0 && age <= (intent.done ? Self.finishedExplains : Self.inProgressExplains)
    }

    /// routectl itself moved the route away from `output` to another output of its card a moment ago
    /// (an intent under 2 s old, done or not): a profile switch of that card seen now is its own, even
    /// when this watcher, slow under load, took its snapshot in the middle of a move already over. (A
    /// flip of the very device routectl moved to is another client's.)
    func ownMoveJustNow(away output: Output?) -> Bool {
        guard let output, let card = output.cardName, let intent = intentNow() else { return false }
        return clocks.wallMilliseconds() - intent.at < Int64(RouteHold.limit * 1000)
            && intent.output != output.id && Output.id(intent.output, isOn: card)
    }

    /// What set a decision off, in words for `why`.
    static func cause(of change: Change) -> String? {
        if let added = change.added.first { return "'\(added.id)' appeared" }
        if let removed = change.removed.first { return "'\(removed.id)' went away" }
        if let card = change.profileChanged.sorted().first { return "'\(card)' changed profile" }
        if change.routeChanged { return "the server moved the route to '\(change.current.output?.id ?? "none")'" }
        return nil
    }

    /// Plain `watch`: prints the change. While a `watch --apply` runs, a device change it will answer
    /// holds the route event until the route gets where the rules put it (predicted by the same
    /// rules), so that the server's own intermediate pick is not reported as a second route change.
    mutating func follow(_ change: Change, _ next: Snapshot, _ events: [Event], stealUndone stolen: Output? = nil,
                         endedHold: RouteChangeReason? = nil) -> Bool {
        snapshot = next
        var reason: RouteChangeReason?
        for event in events {
            if case let .route(_, _, r, _) = event { reason = r; continue }
            guard emit(event) else { return false }
        }
        let preferences = (try? preferences()) ?? Preferences()
        let decision = Policy.decide(change, state: &policy, preferences: preferences, muteOnFallback: false,
                                     recentlyAdded: Set(recentlyAdded.keys), recentlyRemoved: recentlyRemoved.isEmpty ? [] : departedNow(change))
        if let stolen, hold == nil, let restore = intentNow() {
            // Both moves happened between two refetches of this watcher: reported as `watch --apply`
            // reports them. A later refetch that still shows the steal (this one was taken before it,
            // the restore's intent read after) shows what is reported already.
            let back = reported
            stealReported = (restore.at, stolen.id)
            return emit(.route(route: stolen.route, previous: back.route, reason: .newDeviceAvailable, output: stolen))
                && emit(.route(route: change.current.route, previous: stolen.route, reason: .restored, output: change.current.output))
        }
        if let seen = stealReported {
            // The late view of that steal comes at most once, within moments of the restore.
            stealReported = nil
            if change.current.output?.id == seen.output, intentNow()?.at == seen.intent,
               clocks.wallMilliseconds() - seen.intent <= Self.finishedExplains {
                return true
            }
        }
        // routectl's own announced move (an intent being held) explains the change better than a prediction,
        // as does its own card switch. A request that leads nowhere (watch --apply then reports the
        // change as it is) holds nothing.
        if let request = decision.request, store.policyRunning, decision.reason != .restored, hold?.intent == nil,
           !ownCardSwitch(change),
           decision.reason != .categoryChange || !ownStepSeen(change),
           Self.leadsSomewhere(request, next, preferences) {
            var held = RouteHold(request: request, reason: decision.reason ?? .unknown, preferredInput: preferences.preferredInput,
                                 deadline: clocks.monotonic() + 1.5)
            held.inCall = preferences.inCall
            held.predictedAt = clocks.wallMilliseconds()
            let arrived = held.isDone(next)
            // Nor does a move a command announced (finished before this watcher's refetch) that already
            // stands where the rules would put it: the prediction would only lend it the rules' reason.
            // (A `clear` onto another port of a card a jack of which was pulled a moment before looks to
            // the rules like the server's answer to that departure.) Where the rules move on from it
            // (a device that came in the same refetch), watch --apply reports one move, and so does this.
            if !arrived || externalSet(change) == nil {
                held.note(arrived: arrived, at: clocks.monotonic())
                hold = held
            }
        }
        if let endedHold { return reportRoute(change.current, reason: endedHold) }
        guard let reason = reason ?? hold?.reason else { return true }
        return reportOrHold(change.current, reason: reason)
    }

    /// Whether `watch --apply` would find an output for `request` (a card left off is no way there).
    static func leadsSomewhere(_ request: RouteRequest, _ snapshot: Snapshot, _ preferences: Preferences) -> Bool {
        guard let plan = policyPlan(snapshot, request, preferences) else { return true }
        return plan.output != nil || !plan.actions.isEmpty
    }

    /// The plan `watch --apply` would carry out for `request` under the preferences (its own moves
    /// leave a card that is off as it is); nil when there is none.
    static func policyPlan(_ snapshot: Snapshot, _ request: RouteRequest, _ preferences: Preferences, status: Status? = nil) -> Plan? {
        let context = PlanContext(preferredInput: preferences.preferredInput, inCall: preferences.inCall, keepCardsOff: true)
        return try? Planner.plan(snapshot, request, context, status: status)
    }

    /// The cards switched to or from `off` in this change: `off`, the card of the output the route
    /// was on, now off; `on`, the cards of outputs that appeared from a card that was off.
    static func cardsSwitchedOffOrOn(_ change: Change) -> (off: Set<String>, on: Set<String>) {
        var off = Set<String>(), on = Set<String>()
        if let card = change.previous.output?.cardName,
           change.current.outputs.contains(where: { $0.cardName == card && $0.cardProfile == "off" }) {
            off.insert(card)
        }
        for added in change.added {
            if let was = change.previous.outputs.first(where: { $0.id == added.id }), was.cardProfile == "off",
               let card = added.cardName {
                on.insert(card)
            }
        }
        return (off, on)
    }

    /// routectl's own command switched a card on or off in this change: `set` or `call start`
    /// switching on the card of the output it announced moments ago (done or not), or `call end`,
    /// still under way, putting back off a card that was off before the call. Its outputs coming or
    /// going are that step. (A headset whose card goes off as it disconnects, moments after a command
    /// chose it, is a departure.)
    func ownCardSwitch(_ change: Change) -> Bool {
        let cards = Self.cardsSwitchedOffOrOn(change)
        guard !cards.off.isEmpty || !cards.on.isEmpty, let intent = intentNow() else { return false }
        func onCard(_ card: String) -> Bool { Output.id(intent.output, isOn: card) }
        let inProgress = hold?.intent == intent.at && !intent.done
        if !cards.off.isEmpty, inProgress, !cards.off.contains(where: onCard) { return true }
        return explainsNow(intent) && cards.on.contains(where: onCard)
    }

    /// The output of a steal `watch --apply` put back before this watcher's refetch could show it: an
    /// unlisted hardware output that arrived within the no-steal window took the route, and the
    /// announced restore, which this watcher has not seen the route reach, moved it back; this change
    /// shows the route where it was, or where the restore put it instead (the headphones, when the
    /// speaker it was forced onto is hidden by their jack). Nil otherwise.
    func stealUndone(_ change: Change) -> Output? {
        guard let output = change.current.output, let intent = intentNow(),
              intent.reason == .restored, intent.output == output.id, !reachedMoves.contains(intent.at),
              (0...Self.finishedExplains).contains(clocks.wallMilliseconds() - intent.at) else { return nil }
        let priority = (try? preferences().priority) ?? []
        let stolen = change.current.outputs.filter { recentlyAdded[$0.id] != nil && Policy.mayNotSteal($0, priority) }
        // A steal already printed (a refetch showed it) is not printed again.
        guard stolen.count == 1, reported.output?.id != stolen[0].id else { return nil }
        return stolen[0]
    }

    /// routectl's announced move: the one read for the change being handled, else the file now.
    func intentNow() -> RouteIntent? {
        if let read = intentThisChange { return read }
        return store.loadIntent()
    }

    /// The route moved somewhere other than where a command that has just finished took it.
    func lateForFinishedCommand(_ change: Change) -> Bool {
        guard change.routeChanged, let intent = intentNow(), intent.done,
              intent.output != change.current.output?.id else { return false }
        let age = clocks.wallMilliseconds() - intent.at
        return age >= 0 && age <= Self.finishedExplains
    }

    /// A route move routectl announced (its intent, written by `set`, `clear` or a `watch --apply`)
    /// holds the route events until it is done: the server's reactions on the way (a profile switch
    /// removes a sink, WirePlumber restores a port and is overruled) are not route changes of their own.
    /// `reportNow` false: the change being handled has device events, which go out first; a route
    /// event due now is left to the next round (at once).
    mutating func adoptIntent(_ next: Snapshot, reportNow: Bool = true) {
        guard endSupersededHold(), let intent = intentNow() else { return }
        if commandOverSincePrediction(intent, next) {
            // The command's move is what the route did: its hold, done, reported below. Where this
            // watcher saw the prediction met elsewhere first, that is reported first.
            if let earlier = hold, let reached = earlier.reached, reached.output?.id != intent.output {
                _ = reportRoute(reached, reason: earlier.reason)
            }
            adoptedIntent = intent.at
            var held = RouteHold(target: intent.output, reason: intent.reason, deadline: clocks.monotonic() + RouteHold.lag)
            held.intent = intent.at
            hold = held
        }
        if let held = hold, held.intent == intent.at, intent.done {
            // The command is over: its route event now, from where it began to where it ended. When
            // this connection does not show it there yet, the command's own notifications may still be
            // on their way (they can trail its read-back): a moment for them before anything else.
            if !held.isDone(next) {
                let now = clocks.monotonic()
                guard let seen = held.doneSeenAt else {
                    hold?.doneSeenAt = now
                    return
                }
                if now < seen + RouteHold.lag { return }
            }
            if missedTheMove(next) { return }
            guard reportNow else {
                hold?.quietUntil = clocks.monotonic()
                return
            }
            hold = nil
            _ = reportRoute(Status(snapshot: next), reason: held.reason)
            return
        }
        // The policy putting back a route the server took (restored) holds nothing: both the steal
        // and the restore are reported, as watch --apply reports them.
        guard intent.at != adoptedIntent, !intent.done, intent.reason != .restored else { return }
        let age = Double(clocks.wallMilliseconds() - intent.at) / 1000
        guard age >= 0, age < RouteHold.limit else { return }
        adoptedIntent = intent.at
        var held = RouteHold(target: intent.output, reason: intent.reason, deadline: clocks.monotonic() + RouteHold.limit - age)
        held.intent = intent.at
        if let earlier = hold, earlier.intent == nil, intent.reason == .override || intent.reason == .call,
           !arrivesNow(for: intent, after: earlier) {
            // A command (set, clear, call) begins its move while an earlier change is still held (a
            // prediction, a departure window): that change is reported first, as the route stood.
            _ = reportRoute(earlier.reached ?? Status(snapshot: snapshot), reason: earlier.reason)
        }
        let arrived = held.isDone(next)
        held.note(arrived: arrived, at: clocks.monotonic())
        if arrived { held.reached = Status(snapshot: next) }
        hold = held
    }

    /// A command (`set`, `clear`, `call`) announced, made and finished its move after this watcher
    /// began holding a prediction of the policy's move, all between two of its refetches, and the
    /// route stands where the command put it: the command explains the route, not the prediction
    /// (which the policy may have met, and the command undone, unseen in between).
    func commandOverSincePrediction(_ intent: RouteIntent, _ next: Snapshot) -> Bool {
        guard intent.done, intent.reason != .restored, intent.at != adoptedIntent, let held = hold, held.intent == nil,
              let predictedAt = held.predictedAt, intent.at > predictedAt,
              Status(snapshot: next).output?.id == intent.output else { return false }
        let age = clocks.wallMilliseconds() - intent.at
        return age >= 0 && age <= Self.finishedExplains
    }

    /// The change being handled brought the route to where a command announced after `prediction`
    /// was made is going: that arrival is the command's, not the prediction's reached.
    func arrivesNow(for intent: RouteIntent, after prediction: RouteHold) -> Bool {
        guard let predictedAt = prediction.predictedAt, intent.at > predictedAt,
              let reached = prediction.reached?.output?.id else { return false }
        return reached == intent.output && Status(snapshot: snapshot).output?.id != reached
    }

    /// A command's move held here (its intent) is over once a later move to the same output is
    /// announced: what it reached is reported as its own, and the later move explains its own
    /// arrival. (A connection that missed the held move's change of the default, pipewire-pulse's gap
    /// in `refreshStaleDefaults`, would otherwise lend its reason to a later move reaching the same
    /// output.) Never seen there, it hands what it held back to the later move while that is in
    /// progress (its hold reports where the route ends: one command announcing its output again, as
    /// `call end` does, is one route event); once that is done, the route is reported as it stands.
    /// A later move elsewhere ends it as before: when it is done, or at its deadline. False when
    /// stdout is gone.
    mutating func endSupersededHold() -> Bool {
        guard let held = hold, let at = held.intent, let target = held.target, let latest = intentNow(), latest.at > at,
              latest.output == target else { return true }
        hold = nil
        if let reached = held.reached { return reportRoute(reached, reason: held.reason) }
        guard latest.done else { return true }
        return reportRoute(Status(snapshot: snapshot), reason: held.reason)
    }

    /// A held move is over but this connection does not show it where it was going (or, for a profile
    /// flip, back on the card that flipped): before saying so, one fresh connection is asked, since
    /// this one may have missed the server's change of the default (`AudioServer.refreshStaleDefaults`).
    /// True when it had: the hold waits for the refetch that follows, which shows the move.
    mutating func missedTheMove(_ current: Snapshot) -> Bool {
        guard var held = hold, !held.askedFresh else { return false }
        if let card = held.departedCard, held.reason == .categoryChange {
            // A profile flip of the card the route left brings the route back to that card.
            guard Status(snapshot: current).output?.cardName != card else { return false }
        } else if held.isDone(current),
                  !(current.server.isPipeWire && (held.transient || passThroughOutput(Status(snapshot: current)) != nil)) {
            // (A fallback onto HDMI is asked about on PipeWire even where it stands: the move on to the
            // speaker may be the very default change this connection missed; so is a move onto HDMI a
            // departure hold waited on, as the server passes through it on a plug.)
            return false
        }
        held.askedFresh = true
        hold = held
        return (try? server.refreshStaleDefaults(timeout: timeout)) ?? false
    }

    /// The output the route stands on when it is an unlisted HDMI output, one WirePlumber passes
    /// through on a jack of the laptop (`Policy.mayNotSteal`). (Its first two conditions come first:
    /// they spare every other route a read of state.json for the priority list.)
    func passThroughOutput(_ status: Status) -> Output? {
        guard let now = status.output, now.route == .unknown, now.isHardware,
              Policy.mayNotSteal(now, ((try? preferences()) ?? Preferences()).priority) else { return nil }
        return now
    }

    /// Reports the route now, unless a move is held (its event comes when it is done).
    mutating func reportOrHold(_ status: Status, reason: RouteChangeReason) -> Bool {
        guard hold == nil, !isReported(status) else { return true }
        if !apply, reason == .oldDeviceUnavailable, let now = passThroughOutput(status), reported.output.map({ $0.id != now.id }) ?? false {
            // The route fell back onto an unlisted HDMI output: WirePlumber passes through it for a
            // millisecond before it switches the laptop's own port. Where the server stays there a
            // moment, that is where the sound went; where it moves on, that is (above, in `handle`).
            var held = RouteHold(target: now.id, reason: reason, deadline: clocks.monotonic() + RouteHold.departureWindow)
            held.transient = true
            held.note(arrived: true, at: clocks.monotonic())
            hold = held
            return true
        }
        if reason == .routeConfigurationChange || reason == .noSuitableRoute, let left = reported.output, left.cardName != nil {
            // A server may move the default off a card's output a moment before it reports that
            // output gone (WirePlumber and a sleeping monitor): wait a moment before calling it a
            // client's pick. A virtual sink goes in one notification; it needs no wait. Likewise a
            // route left with no sink at all: pipewire-pulse puts its auto_null in a moment later.
            let departed = left.id
            let departedCard = left.cardName
            var held = RouteHold(target: status.output?.id, reason: reason, deadline: clocks.monotonic() + RouteHold.departureWindow)
            held.departed = departed
            held.departedCard = departedCard
            held.quietUntil = clocks.monotonic() + RouteHold.departureWindow
            hold = held
            return true
        }
        return reportRoute(status, reason: reason)
    }

    /// The preferences remote clients are shown: the last that could be read (not the defaults while a
    /// state file cannot be: a phone shell would take `AudioMode` 0 for the call's end), with a call
    /// shown once its `call` event is out (with the call's route, not before it).
    var shownToRemote: Preferences {
        var shown = shownPreferences
        if !callActive { shown.callTarget = nil }
        return shown
    }

    /// Prints a `call` event when call mode began or ended since the last one, once no route move is
    /// held and `call start` has applied the call: after the call's route event, with the route it
    /// reached. False when stdout is gone.
    mutating func reportCall() -> Bool {
        guard hold == nil else { return true }
        let record: CallRecord?
        do { record = try store.callRecord() } catch { return true }
        if record != nil {
            callRecordSeen = true
        } else if callRecordSeen {
            // A card that came back during the call (or as it ended) may be owed its profile now, and
            // rules changed during it apply now.
            callRecordSeen = false
            if apply {
                owedCheck = true
                rulesCheckOwed = true
            }
        }
        let active = record?.isBegun(now: clocks.wallMilliseconds()) ?? false
        guard active != callActive else {
            callEventDue = nil
            return true
        }
        if let wait = callMoveOnItsWay() {
            callEventDue = clocks.monotonic() + wait
            return true
        }
        callEventDue = nil
        callActive = active
        return emit(.call(active: active, route: reported.route))
    }

    /// Seconds the call event still waits: `call start` or `call end` has finished its move to an
    /// output this watcher has not reported the route on. Its notifications are on their way (a
    /// watcher slow under load read the files first), and the call event follows the route event, as
    /// long as a finished move explains what a watcher sees. Nil: report now.
    func callMoveOnItsWay() -> Double? {
        guard let intent = intentNow(), intent.reason == .call, intent.done, !intent.output.isEmpty,
              reported.output?.id != intent.output else { return nil }
        let left = Self.finishedExplains - (clocks.wallMilliseconds() - intent.at)
        return left > 0 ? Double(left) / 1000 : nil
    }

    /// Prints a route event when the route differs from the one last printed.
    mutating func reportRoute(_ status: Status, reason: RouteChangeReason) -> Bool {
        guard !isReported(status) else { return true }
        if apply, reason == .routeConfigurationChange {
            // Another client's pick, respected: what routectl did before no longer explains the route
            // (`why`), even once it is back where routectl put it. With the devices present then: a
            // watcher starting later in the call leaves the pick while they are the same.
            store.saveDecision(DecisionRecord(reason: reason, cause: "another client's pick", output: status.output?.id,
                                              at: clocks.wallMilliseconds(), externals: status.externalKeys))
            if let left = reported.output, let picked = status.output?.id { callInputFollow = (left, picked, inputAsRouteLeft) }
        }
        return emit(.route(route: status.route, previous: reported.route, reason: reason, output: status.output))
    }

    /// The route `status` shows is the one last printed: the same kind, output and sink.
    func isReported(_ status: Status) -> Bool {
        reported.route == status.route && reported.output?.id == status.output?.id && reported.output?.sink == status.output?.sink
            && reported.output?.sinkIndex == status.output?.sinkIndex
    }

    /// A route change to the output routectl (`set`, `clear`, another `watch --apply`) announced it
    /// was moving to, moments ago, carries that command's reason. The move may be one announced
    /// before the latest (a watcher slower than the commands handles a `set`'s move after `watch
    /// --apply` has announced its fallback from it), if this watcher has not seen the route reach its
    /// output already (`reachedMoves`): each move explains one arrival.
    func externalSet(_ change: Change) -> (outputID: String, reason: RouteChangeReason)? {
        if let found = ownThisChange { return found }
        guard change.routeChanged, let output = change.current.output, let latest = intentNow() else { return nil }
        let now = clocks.wallMilliseconds()
        if latest.output == output.id {
            // A move in progress explains what it reaches; a finished one only the notifications right
            // after it, not a later arrival at the same output (a headset reconnecting), nor anything
            // after this watcher saw it arrive (another client flipping the headset's profile).
            guard now - latest.at <= (latest.done ? Self.finishedExplains : Self.inProgressExplains),
                  !latest.done || !arrivedMoves.contains(latest.at) else { return nil }
            return (output.id, latest.reason)
        }
        // A replaced move explains only a late view of itself: the output was there before this change
        // (one that comes back is its own arrival), and the route did not leave an output that went
        // (that is the departure's fallback). Replaced while in progress or done, it explains only the
        // notifications right after it.
        guard !change.added.contains(where: { $0.id == output.id }),
              let left = change.previous.output, change.current.outputs.contains(where: { $0.id == left.id && $0.isAvailable }),
              let earlier = latest.earlier.first(where: { $0.output == output.id && !reachedMoves.contains($0.at) }),
              (0...Self.finishedExplains).contains(now - earlier.at) else { return nil }
        return (output.id, earlier.reason)
    }

    /// Spends the announced moves this watcher has seen over: the route on a move's output spends that
    /// move and every one announced before it (it saw a state after them). A move whose output the
    /// route changed to has arrived (`arrivedMoves`).
    mutating func noteMovesReached(_ change: Change) {
        guard let latest = intentNow() else {
            reachedMoves.removeAll()
            arrivedMoves.removeAll()
            return
        }
        let moves = [latest] + latest.earlier
        reachedMoves = reachedMoves.filter { at in moves.contains { $0.at == at } }
        arrivedMoves = arrivedMoves.filter { at in moves.contains { $0.at == at } }
        let output = change.current.output?.id
        guard let reached = moves.filter({ $0.output == output }).map(\.at).max() else { return }
        for move in moves where move.at <= reached { reachedMoves.insert(move.at) }
        if change.routeChanged {
            for move in moves where move.output == output { arrivedMoves.insert(move.at) }
        }
    }

    /// How long after it began (ms) a finished command still explains what a watcher sees.
    static let finishedExplains: Int64 = 1000
    /// How long after it began (ms) a command still in progress explains the route reaching its target.
    static let inProgressExplains: Int64 = 5000

    func preferences() throws(EngineError) -> Preferences {
        do { return try store.preferences() } catch { throw .state(error) }
    }

    func clearOverride() -> Bool { store.clearOverride() }

    /// The route lock `set`, `clear` and `call` hold from their read of the server to their read-back,
    /// for a policy move: taken before the server and the preferences the rules decide on are read,
    /// so that a command holding it goes first and the rules decide on what it left (a `set speaker`
    /// planned before a headset's plug, carried out over the move to it; a call started as the
    /// headset came). Waited for at most `lockPatience`: a command stopped while holding it (Ctrl-Z)
    /// does not stop the policy for good; past that the policy acts without it, says so once, and
    /// only tries it (no wait) until it is free again. Nil then, or when the lock cannot be taken at
    /// all (no runtime dir: the state errors say so).
    mutating func lockForMove() -> AnyObject? {
        do {
            if let lock = try store.lockRoute(within: lockOverdue ? 0 : lockPatience) {
                lockOverdue = false
                return lock
            }
            noteLockOverdue()
        } catch {}
        return nil
    }

    /// The route lock was held past the watcher's patience: said once, and from now on only tried.
    mutating func noteLockOverdue() {
        if !lockOverdue {
            warn("another routectl has held the route lock for over \(JSON.number(lockPatience)) s (stopped with Ctrl-Z?); "
                 + "watch --apply acts without it until it is free")
        }
        lockOverdue = true
    }

    /// How long the watcher waits for the route lock: longer than a command holds it when the server
    /// is slow (each of its read-backs is bounded by the timeout, at least 3 s).
    var lockPatience: Double { Self.lockPatience(timeout: timeout) }

    /// As long as a one-shot command waits for a lock another routectl holds, too.
    public static func lockPatience(timeout: Double) -> Double { 2 * max(timeout, 3) }

    /// Carries out the D-Bus requests received. Each waits for the route lock as the watcher does, at
    /// most 20 s (a D-Bus call's own limit is 25 s), and not at all while the lock is overdue; one
    /// that ran out of that makes it overdue for the policy too (the watcher's loop is blocked while a
    /// request waits: not twice for the same stuck lock), and one that took it ends that.
    mutating func serveRemote() {
        switch remote?.serve(lockWait: lockOverdue ? 0 : min(lockPatience, 20)) {
        case true?: noteLockOverdue()
        case false?: lockOverdue = false
        case nil: break
        }
    }

    /// An override set before this watcher started (or before the server went), whose devices have
    /// changed since, is dropped now; returns its `override-cleared` event, for the caller to print.
    /// (A device it was set beside, gone within the hold-down, is not a change yet: its departure
    /// holds the clear.)
    mutating func clearStaleOverride(_ status: Status) -> Event? {
        guard let record = try? store.overrideRecord(),
              let cause = record.staleness(currentExternals: status.externalKeys + departures.keys.filter(record.externals.contains)),
              clearOverride() else { return nil }
        return .overrideCleared(override: record.target, cause: cause)
    }

    /// The server back from a restart without external devices it had before (a Bluetooth headset's
    /// card comes back seconds after the server: PulseAudio makes it once A2DP connects again): each
    /// is a departure under the hold-down, as if it had left now. Back within it, it is a flicker; the
    /// override it would clear (one set while it was there) goes when the hold-down passes, not as
    /// stale at `recovered`. `order` and `callCapable`: the rules' state before the server went.
    mutating func holdMissingExternals(_ fresh: Status, before: Status, overrideThen: OverrideRecord?, order: [String],
                                       callCapable: Set<String>) {
        guard holdDown > 0 else { return }
        let missing = Set(before.externalKeys).subtracting(fresh.externalKeys).subtracting(departures.keys)
        guard !missing.isEmpty else { return }
        let now = clocks.monotonic()
        for id in missing.sorted() {
            guard let output = before.outputs.first(where: { $0.id == id }) else { continue }
            // They left under the override that stood as the server went: one set during the outage
            // is newer than them (their return is an arrival), and theirs is not cleared any more.
            let clear = overrideThen?.externals.contains(id) == true ? DeferredClear(device: output, cause: "'\(id)' was disconnected") : nil
            departures[id] = Departure(clear: clear, leftAt: now,
                                       carried: before.output?.id, carriedProfile: before.output?.cardProfile,
                                       deadline: now + holdDown, order: order, callCapable: callCapable.contains(id),
                                       overrideThen: overrideThen)
        }
    }

    /// Departures whose device is there again without a change that added it (back before the
    /// server, or while the rules were applied again after it): nothing to wait for. The override
    /// stands, as after any flicker, and the device is the same connection to the rules.
    mutating func dropReturnedDepartures(_ status: Status) {
        guard !departures.isEmpty else { return }
        let present = Set(status.externalKeys)
        for (id, departure) in departures where present.contains(id) {
            departures[id] = nil
            if departure.callCapable { policy.callCapable.insert(id) }
        }
    }

    /// As watch --apply starts: the rules applied where something routectl owns says they no longer
    /// hold: an override it just cleared as stale (a device came or went while no watcher ran: what
    /// `clear` does then), or a call whose route they would move (a headset plugged meanwhile takes
    /// the call, rule 8). Otherwise the route stays: it may be a pick of the user's. False when
    /// stdout is gone.
    mutating func applyRulesOnStart(clearedOverride: Bool) throws(EngineError) -> Bool {
        // (A state file that cannot be read is said, and waited for, by the main loop.)
        guard let read = try? store.preferences(), clearedOverride || read.inCall else { return true }
        let lock = lockForMove()
        defer { withExtendedLifetime(lock) {} }
        let preferences = try preferences()
        // A command that held the lock meanwhile (call start, set) moved the route: the main loop
        // reports and answers that change; this start has nothing left to decide.
        let fresh: Snapshot
        do { fresh = try server.snapshot(timeout: timeout) } catch { throw .server(error) }
        let status = Status(snapshot: fresh)
        guard let output = status.output, output.id == Status(snapshot: snapshot).output?.id else { return true }
        // Another client's pick during this call that a watcher before this one respected, with the
        // same devices present as then: it stands (rule 5), as it did.
        // (An override set after the pick is the user's later word: it is applied.)
        let call = preferences.inCall ? try? store.callRecord() : nil
        if let call, let pick = store.loadDecision(), pick.isPick(of: output.id, duringCallFrom: call.startedAt),
           pick.externals == status.externalKeys, ((try? store.overrideRecord()) ?? nil).map({ $0.setAt < pick.at / 1000 }) ?? true {
            return true
        }
        var request = preferences.override.map { RouteRequest(target: $0, force: true) } ?? Policy.ruling(status, preferences, recency: policy)
        if let call, preferences.override == nil {
            // Devices that came during the call while no watcher ran are newer than those there at its
            // start (rule 1; sink numbers cannot tell): one plugged meanwhile takes the call from the
            // headset in use, as with a watcher running.
            let came = policy.connected.filter { !call.externals.contains($0) }
            policy.connected = policy.connected.filter { call.externals.contains($0) } + came
            if let first = Policy.ranked(status, policy, priority: preferences.priority, inCall: true).first,
               first.id != output.id, came.contains(first.id) {
                request = Policy.choice(status, policy, defaultTarget: preferences.baseTarget, by: preferences)
            }
        }
        // The same output may still need a step in a call: its headphones in the card's music profile (a
        // server's switch-on-port-available while no watcher ran) go to its call profile. Outside a
        // call the same output stays as it is (a card another program put in its call profile too).
        guard let plan = Self.policyPlan(fresh, request, preferences, status: status), let wanted = plan.output,
              wanted.id != output.id || preferences.inCall && plan.switchesProfile
        else { return true }
        let reason: RouteChangeReason = preferences.inCall ? .call : .override
        var after = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout, from: fresh, reason: reason,
                                      inCall: preferences.inCall, claimDefault: true, keepCardsOff: true).snapshot
        after = try unmuteIfBackOnADevice(after)
        // The call's microphone moved with it: the call's mute is kept on the new one (keepCallMute).
        if preferences.inCall { callInputMovedAt = clocks.monotonic() }
        let steps = Change(previous: snapshot, current: after)
        store.saveDecision(DecisionRecord(reason: reason, cause: "watch --apply started", output: steps.current.output?.id,
                                          at: clocks.wallMilliseconds()))
        snapshot = after
        return reportRoute(steps.current, reason: reason) && emitSteps(steps)
    }

    /// The server went away: say so, reconnect with backoff (capped at 2 s), re-apply what --apply
    /// owns, and say `recovered` only once connected and re-applied (a state file that cannot be read
    /// is said once and tried again with the backoff, as a refusal is). False when asked to stop.
    mutating func recover(from reason: String) throws(EngineError) -> Bool {
        // What was held happened before the server went: said first (a route change held for its
        // departure window too, as the window would have ended it).
        if let held = hold {
            hold = nil
            guard reportRoute(Status(snapshot: snapshot), reason: held.reason) else { return false }
        }
        guard releaseHeldEvents(dueOnly: false), emit(.interrupted(reason: reason)) else { return false }
        // Remote clients see no route while no server can be read (their properties only ever show
        // what was read back): an unknown route, no output, no microphone, until `recovered`.
        remote?.update(Status(snapshot: Snapshot(server: snapshot.server, sinks: [], sources: [], cards: [],
                                                 sinkInputs: [], sourceOutputs: [])), shownToRemote)
        beforeInterruption = beforeInterruption ?? Status(snapshot: snapshot)
        // The devices and the override as this outage found them (`beforeInterruption` is the first
        // outage's, kept until the rules are applied again), and its override cleared as stale once
        // the server is back, said after `recovered`.
        let lastSeenSnapshot = snapshot
        let lastSeen = Status(snapshot: lastSeenSnapshot)
        let overrideThen = apply && holdDown > 0 ? try? store.overrideRecord() : nil
        var staleClear: Event?
        var delay = 0.1
        var warned = false
        // During a call the server is looked for more often: the call's route and mute are put back
        // the sooner (a server restores the mute it remembers, and a caller who muted is heard until then).
        let call = apply ? try? store.callRecord() : nil
        let cap = call?.applied == true ? Self.callReconnectCap : 2.0
        while server.pause(seconds: delay) {
            // Remote clients get their answer (a failure, with no server) rather than waiting for it.
            serveRemote()
            delay = min(delay * 2, cap)
            let fresh: Snapshot
            do {
                try server.reconnect(timeout: 2)
                try server.subscribe(timeout: timeout)
                muteTheCallAtOnce()
                fresh = try server.snapshotWhenQuiet(timeout: timeout, quiet: 0.3, limit: 3)
            } catch {
                continue
            }
            snapshot = fresh
            let freshStatus = Status(snapshot: fresh)
            // A headset the server shows again after its restart is the same connection to the rules:
            // its headset profile coming back (A2DP first) is no new arrival that clears an override.
            let callCapable = policy.callCapable, order = policy.connected
            policy = PolicyState(status: freshStatus)
            policy.callCapable.formUnion(callCapable.filter { id in freshStatus.outputs.contains { $0.id == id && $0.isConnected } })
            carriersAwaitingHeadsetProfile = [:]
            // A server back from a restart may give a card the call profile it remembers, one a
            // card is owed its profile from before (a call start that failed as the server went):
            // looked at as when watch --apply starts.
            owedCheck = apply
            if apply {
                holdMissingExternals(freshStatus, before: lastSeen, overrideThen: overrideThen, order: order, callCapable: callCapable)
                staleClear = clearStaleOverride(freshStatus) ?? staleClear
                do {
                    try reapplyRules()
                } catch .state(let cause) {
                    // Connected again, but the rules need a state file that cannot be read: reconnecting
                    // again would not help (and each new pipewire-pulse client opens issue 15's window
                    // for others). The main loop tries the file each second and applies them then.
                    sayStateTrouble(.state(cause))
                    reapplyOwed = true
                } catch {
                    guard server.isConnected else { continue }
                    // Not recovered until the rules are back: say why once, and try again after the backoff.
                    if !warned { warn("\(error)") }
                    warned = true
                    continue
                }
                // The server back gives the call's microphone the mute it remembers: as after a move.
                let lock = lockForMove()
                callInputMovedAt = clocks.monotonic()
                if let muted = try? keepCallMute() { snapshot = muted }
                withExtendedLifetime(lock) {}
            }
            let status = Status(snapshot: snapshot)
            dropReturnedDepartures(status)
            guard releaseHeldEvents(dueOnly: false), emit(.recovered(route: status.route, output: status.output)) else { return false }
            // What changed while the server was away, after `recovered`: the devices that came or went
            // (one gone within the hold-down is its departure), the streams and the input; then the
            // override that went as stale with them.
            guard emitSteps(Change(previous: lastSeenSnapshot, current: snapshot)) else { return false }
            if let staleClear { guard emit(staleClear) else { return false } }
            // The input the server came back with, when it is not the one last printed (another
            // microphone, or the mute the server remembers for it) and not said above: a reader knows
            // the microphone as well as the route; later input events start from there.
            let (source, muted) = (status.defaultInput, status.micMuted)
            guard heldInput == nil, source != reportedInput.source || muted != reportedInput.muted else { return true }
            let changed = source != reportedInput.source
            return deliver(.input(source: source, previous: changed ? reportedInput.source : nil, sourceChanged: changed, micMuted: muted))
        }
        return false
    }

    /// The reconnection backoff's cap during a call, in seconds (2 otherwise).
    static let callReconnectCap = 0.25

    /// A muted call's microphone, muted again as soon as the server is back, before the rules wait for
    /// it to settle: the server gives the input the mute it remembers, and the caller who muted must
    /// not be heard meanwhile. (`keepCallMute` keeps it so once the call's input is settled.)
    mutating func muteTheCallAtOnce() {
        guard apply, let record = try? store.callRecord(), record.applied else { return }
        adoptCallMute(asked: record)
        guard callMute?.muted == true else { return }
        let lock = lockForMove()
        defer { withExtendedLifetime(lock) {} }
        guard let now = try? server.snapshot(timeout: timeout), let source = now.defaultSource, !source.isMonitor, !source.mute else { return }
        _ = try? CallMode(server: server, store: store, clocks: clocks).setMute(of: source.name, to: true, timeout: timeout)
    }

    /// Notes a state file that cannot be read (`stateTrouble`), saying it once, not at each retry.
    mutating func sayStateTrouble(_ error: EngineError) {
        if stateTrouble != error.description { warn(error.description) }
        stateTrouble = error.description
    }

    /// What --apply owns, applied again on the server as it is (after it came back): the route as it
    /// was before the server went, when the same devices are here (a pick of another client's that
    /// the watcher respected stays respected: both servers come back on the default they remember),
    /// else where the rules put it (during a call the call's, and announced as the call's move); and
    /// the preferred input. A move is the watcher's decision (`why`). Returns the reason the move
    /// was announced with.
    @discardableResult
    mutating func reapplyRules() throws(EngineError) -> RouteChangeReason {
        let routeLock = lockForMove()
        defer { withExtendedLifetime(routeLock) {} }
        let preferences = try self.preferences()
        let status = Status(snapshot: snapshot)
        let reason: RouteChangeReason = preferences.inCall ? .call : .override
        let before = beforeInterruption
        var request = Policy.choice(status, policy, defaultTarget: preferences.effectiveTarget, by: preferences)
        var claim = true
        // The same devices: every output that was connected is (a server torn down part way before
        // it went left fewer: then the rules decide).
        func connected(_ s: Status) -> Set<String> { Set(s.outputs.filter(\.isConnected).map(\.id)) }
        if let before, let was = before.output, connected(before) == connected(status),
           let back = status.outputs.first(where: { $0.id == was.id && $0.isAvailable }) {
            // Asked for even when the server is back on it: in a call it may need its call profile
            // again (a headset back in A2DP, the phone in HiFi); nothing is done when it does not.
            request = .output(back)
            claim = status.output?.id != was.id
        }
        var moved = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout,
                                      reason: reason, inCall: preferences.inCall, claimDefault: claim, keepCardsOff: true).snapshot
        moved = try unmuteIfBackOnADevice(moved)
        if Status(snapshot: moved).output?.id != status.output?.id {
            store.saveDecision(DecisionRecord(reason: reason, cause: "the sound server came back",
                                              output: Status(snapshot: moved).output?.id, at: clocks.wallMilliseconds()))
        }
        snapshot = moved
        beforeInterruption = nil
        if let input = preferences.preferredInput, snapshot.sources.contains(where: { $0.name == input }),
           snapshot.server.defaultSourceName != input {
            do {
                snapshot = try server.apply([.setDefaultSource(input)], timeout: timeout) { $0.server.defaultSourceName == input }
            } catch {
                throw .server(error)
            }
        }
        return reason
    }

    /// The priority list or the persistent default changed (`priority set|clear`, `default TARGET` in
    /// another shell): if the route is where the rules put it before, and they now put it elsewhere,
    /// it goes there, as routectl's own move (`override`, as `clear` moves it), reported as the
    /// watcher's other moves are (its decision for `why`, the microphone that followed). A route the
    /// user put elsewhere by other means stays. Under an override the new rules are only noted: the
    /// override's clear applies them. In a call they wait for its end, whose route is the old rules'
    /// pick (`reportCall` asks again then). Under the route lock, as `set` and `clear` take it: a
    /// `set` just after the change waits for this move, or this move for the override it records.
    /// False when stdout is gone.
    mutating func applyChangedRules() throws(EngineError) -> Bool {
        let lock = lockForMove()
        defer { withExtendedLifetime(lock) {} }
        let preferences = try self.preferences()
        guard let seen = rulesSeen else {
            rulesSeen = (preferences.priority, preferences.defaultTarget)
            return true
        }
        guard seen.priority != preferences.priority || seen.defaultTarget != preferences.defaultTarget, !preferences.inCall else { return true }
        // Seen, whatever follows: a move the server refuses is not tried again at every round.
        rulesSeen = (preferences.priority, preferences.defaultTarget)
        guard preferences.override == nil else { return true }
        var before = preferences
        before.priority = seen.priority
        before.defaultTarget = seen.defaultTarget
        let status = Status(snapshot: snapshot)
        let request = Policy.ruling(status, preferences, recency: policy)
        let context = PlanContext(preferredInput: preferences.preferredInput, keepCardsOff: true)
        func pick(_ request: RouteRequest) -> String? { (try? Planner.plan(snapshot, request, context, status: status))?.output?.id }
        guard let output = status.output, pick(Policy.ruling(status, before, recency: policy)) == output.id, pick(request) != output.id else {
            return true
        }
        var after = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout,
                                      reason: .override, claimDefault: true, keepCardsOff: true).snapshot
        after = try unmuteIfBackOnADevice(after)
        let steps = Change(previous: snapshot, current: after)
        let cause = seen.priority != preferences.priority ? "the priority list changed" : "the default changed"
        store.saveDecision(DecisionRecord(reason: .override, cause: cause, output: steps.current.output?.id, at: clocks.wallMilliseconds()))
        snapshot = after
        return reportRoute(steps.current, reason: .override) && emitSteps(steps)
    }

    /// The events of routectl's own steps other than the route's (the microphone that followed, say),
    /// after the route event its caller printed. False when stdout is gone.
    mutating func emitSteps(_ steps: Change) -> Bool {
        for event in Events.diff(steps) where event.type != "route" {
            guard emit(event) else { return false }
        }
        return true
    }

    /// Prints the held events (`heldStops`, `heldInput`), once their moment has passed unless
    /// `dueOnly` is false. False when stdout is gone.
    mutating func releaseHeldEvents(dueOnly: Bool) -> Bool {
        let now = clocks.monotonic()
        for (type, held) in heldStops.sorted(by: { $0.key < $1.key }) where !dueOnly || held.until <= now {
            heldStops[type] = nil
            guard deliver(held.event) else { return false }
        }
        guard let held = heldInput, !dueOnly || held.until <= now else { return true }
        if dueOnly, now < held.since + RouteHold.limit, snapshot.isReturning(toInput: reportedInput.source) {
            heldInput?.until = now + Self.heldInputQuiet
            return true
        }
        heldInput = nil
        return deliver(held.event)
    }

    /// Prints one event, flushed; false when stdout is gone (a closed pipe ends watch quietly).
    mutating func emit(_ event: Event) -> Bool {
        switch event {
        case .engaged(false), .otherAudio(playing: false):
            if heldStops[event.type] == nil { heldStops[event.type] = (event, clocks.monotonic() + Self.heldInputQuiet) }
            return true
        case .engaged(true), .otherAudio(playing: true):
            // Stopped and playing again within the moment: a stream moved, nothing to say.
            return heldStops.removeValue(forKey: event.type) != nil || deliver(event)
        default:
            break
        }
        // Other events go out as they come: a headset's combo jack moves the route and the
        // microphone's port in one plug, and the route event does not end the microphone's step.
        guard case let .input(source, _, _, muted) = event else { return deliver(event) }
        guard source != reportedInput.source else {
            // Back on the input last printed (the server's step is over: nothing to say), or only its
            // mute changed.
            heldInput = nil
            return muted == reportedInput.muted || deliver(.input(source: source, previous: nil, sourceChanged: false, micMuted: muted))
        }
        // Another input, or none: printed once it has lasted a moment.
        let now = clocks.monotonic()
        heldInput = (.input(source: source, previous: reportedInput.source, sourceChanged: true, micMuted: muted), heldInput?.since ?? now,
                     now + Self.heldInputQuiet)
        return true
    }

    /// Prints `event` now, noting what it says of the route and the input.
    mutating func deliver(_ event: Event) -> Bool {
        if case let .input(source, _, _, muted) = event { reportedInput = (source, muted) }
        if case let .route(route, previous, reason, output) = event {
            reported = (route, output)
            if let previous { remote?.routeChanged(route: route, previous: previous, reason: reason) }
        }
        if case let .recovered(route, output) = event { reported = (route, output) }
        return sink(event)
    }
}

/// A route move whose route event waits until it is done: the route has reached its target (an
/// output, or where a policy request leads) and the server has been quiet for a moment; or the
/// deadline passed. Then one route event is printed, with the move's reason.
public struct RouteHold {
    /// How long a move may take before its route event is printed anyway, in seconds.
    static let limit = 2.0
    /// How long the server must stay quiet once the target is reached, in seconds: WirePlumber's
    /// reactions to a profile switch come within a few milliseconds.
    public static let quiet = 0.06
    /// How long a route change that looks like another client's waits for the output it left to be
    /// reported gone, in seconds.
    public static let departureWindow = 0.3
    /// How long a finished command's own notifications may trail its end, in seconds.
    static let lag = 0.1

    var target: String?
    var request: RouteRequest?
    /// The intent this hold waits on (its time), whose `done` ends it.
    var intent: Int64?
    /// When a prediction of the policy's move was made (wall clock, milliseconds).
    var predictedAt: Int64?
    /// The output the route left, when its going away would explain the move, and its card.
    var departed: String?
    var departedCard: String?
    /// The status when the route last stood at the target.
    var reached: Status?
    var reason: RouteChangeReason
    var preferredInput: String?
    /// The policy's move is planned in call mode (the call's profiles are where it ends).
    var inCall = false
    var deadline: Double
    var quietUntil: Double?
    /// When this watcher found its intent done with the route not yet where it went (monotonic).
    var doneSeenAt: Double?
    /// A fresh connection was asked whether this one missed the move (once per hold).
    var askedFresh = false
    /// The route fell back onto an unlisted HDMI output the server may only pass through: held until
    /// the server is quiet there, or reported where it moves on to.
    var transient = false

    init(target: String? = nil, request: RouteRequest? = nil, reason: RouteChangeReason, preferredInput: String? = nil,
         deadline: Double) {
        self.target = target
        self.request = request
        self.reason = reason
        self.preferredInput = preferredInput
        self.deadline = deadline
    }

    /// When the watcher should look again without a server change.
    var wakeAt: Double {
        // Once a fresh connection was asked, the refetch it owes wakes the watcher, not the lag.
        min(deadline, quietUntil ?? deadline, (askedFresh ? nil : doneSeenAt.map { $0 + RouteHold.lag }) ?? deadline)
    }

    func isDone(_ snapshot: Snapshot) -> Bool {
        if let target { return Status(snapshot: snapshot).output?.id == target }
        guard let request else { return true }
        let plan = try? Planner.plan(snapshot, request, PlanContext(preferredInput: preferredInput, inCall: inCall, keepCardsOff: true))
        return plan.map { !$0.movesRoute } ?? true
    }

    mutating func note(arrived: Bool, at now: Double) {
        if departed != nil { return }  // a departure window runs its whole length
        quietUntil = arrived ? now + RouteHold.quiet : nil
    }
}


