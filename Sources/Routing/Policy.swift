/// What `watch --apply` remembers between changes: the external outputs in the order they were
/// connected, oldest first, so that the most recent one wins (rule 1) and the fallback goes to the
/// next most recent (rule 3).
public struct PolicyState: Equatable, Sendable {
    public var connected: [String]
    /// The external outputs that could carry a call at some moment since they connected (a Bluetooth
    /// device once its headset profile was up): a headset profile coming up is the device arriving
    /// for calls the first time only, not each time it comes back on the same connection.
    public var callCapable: Set<String>

    /// Externals already present at start are ordered as the server numbered them.
    public init(status: Status) {
        connected = status.outputs
            .filter { $0.route.isExternal && $0.isAvailable }
            .sorted { ($0.sinkIndex ?? 0, $0.priority) < ($1.sinkIndex ?? 0, $1.priority) }
            .map(\.id)
            .reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        callCapable = PolicyState.callCapable(in: status)
    }

    static func callCapable(in status: Status) -> Set<String> {
        Set(status.outputs.filter { $0.route.isExternal && $0.isConnected && $0.takesCalls }.map(\.id))
    }
}

/// What the policy wants done about one change.
public struct Decision: Equatable, Sendable {
    /// Route there, giving this reason for the route change that follows.
    public var request: RouteRequest?
    public var reason: RouteChangeReason?
    /// Clear the temporary override, for this cause.
    public var clearOverride: String?
    /// Mute the output the route falls back to (`--mute-on-fallback`, when leaving an external device).
    public var muteFallback = false
    /// Make the preferred input the default again: it came back.
    public var restoreInput: Input?
    /// With a hold-down, a departure's override clear waits (DESIGN.md §1 "Hold-down"): the device
    /// that left, and the cause to give if it does not come back in time.
    public var deferredClear: DeferredClear?

    public init() {}

    public var isEmpty: Bool { request == nil && clearOverride == nil && restoreInput == nil && deferredClear == nil }
}

/// An override clear that waits for the hold-down to pass.
public struct DeferredClear: Equatable, Sendable {
    public var device: Output
    public var cause: String

    public init(device: Output, cause: String) {
        self.device = device
        self.cause = cause
    }
}

/// The rules of DESIGN.md §1 as `watch --apply` keeps them. Pure: it decides, Pulse acts.
///
/// Only device changes lead to actions. A default-sink or port change that another client made (no
/// device came or went) is reported and respected, and the preferences are left as they are (rule 5).
public enum Policy {
    /// Where the rules put the sound now: the best ranked output (`ranked`), else the built-in target.
    public static func choice(_ status: Status, _ state: PolicyState, defaultTarget: RouteTarget,
                              priority: [String] = [], inCall: Bool = false) -> RouteRequest {
        guard let output = ranked(status, state, priority: priority, inCall: inCall).first else {
            return RouteRequest(target: defaultTarget, force: true)
        }
        // An external device by its kind (the planner picks its profile); a listed other output by itself.
        return output.route.isExternal ? RouteRequest(target: output.route == .bluetooth ? .bluetooth : .headset, device: output.id)
            : .output(output)
    }

    /// The outputs the rules would put the sound on, best first (DESIGN.md §1, rule 1 and the priority
    /// list): the present outputs the list names, in its order (an entry is an output id, or a kind,
    /// `bluetooth` or `headset`, meaning those devices most recent first); then the unlisted external
    /// devices, most recently connected first. An unlisted HDMI or built-in output is not ranked: the
    /// target decides those. In a call only headsets are ranked, a Bluetooth one only with a headset
    /// profile (rule 8: the list chooses among them; the call's target, not a listed HDMI output, a
    /// speaker or an A2DP-only Bluetooth speaker, stands in when none is there).
    public static func ranked(_ status: Status, _ state: PolicyState, priority: [String], inCall: Bool = false) -> [Output] {
        let present = status.outputs.filter { $0.isConnected && !$0.isHiddenByJack && (!inCall || $0.route.isExternal && $0.takesCalls) }
        let recent = state.connected.reversed().compactMap { id in present.first { $0.id == id } }
        var ranked: [Output] = []
        func add(_ output: Output) { if !ranked.contains(where: { $0.id == output.id }) { ranked.append(output) } }
        for entry in priority {
            if let kind = Route(rawValue: entry), kind.isExternal {
                recent.filter { $0.route == kind }.forEach(add)
            } else if let output = present.first(where: { $0.id == entry || $0.sink == entry }) {
                add(output)
            }
        }
        recent.forEach(add)
        return ranked
    }

    /// `choice` and `ranked` under the priority list and the call of `preferences`.
    public static func choice(_ status: Status, _ state: PolicyState, defaultTarget: RouteTarget,
                              by preferences: Preferences) -> RouteRequest {
        choice(status, state, defaultTarget: defaultTarget, priority: preferences.priority, inCall: preferences.inCall)
    }

    static func ranked(_ status: Status, _ state: PolicyState, by preferences: Preferences) -> [Output] {
        ranked(status, state, priority: preferences.priority, inCall: preferences.inCall)
    }

    /// What the rules want with no device change to react to (`clear`, a call's start and end): an
    /// external device in use keeps the sound (rule 2); else the most recently connected one; else the
    /// base target (the call's during a call, else the default). An override is the caller's business.
    /// `recency`: the order devices connected in, as a watcher saw it (else as the sink numbers tell it).
    /// `namingTheDeviceInUse`: the device in use is asked for by name, not kept by rule 2, for a caller
    /// that plans on a later snapshot (`call end`, after restoring the profiles lets the server pick).
    public static func ruling(_ status: Status, _ preferences: Preferences, recency: PolicyState? = nil,
                              namingTheDeviceInUse: Bool = false) -> RouteRequest {
        let state = recency ?? PolicyState(status: status)
        if let output = status.output, output.route.isExternal, output.isAvailable, !preferences.inCall || output.takesCalls,
           preferences.priority.isEmpty || ranked(status, state, by: preferences).first?.id == output.id {
            // In a call the device is asked for by name: the call may need its headset profile.
            return preferences.inCall || namingTheDeviceInUse
                ? RouteRequest(target: output.route == .bluetooth ? .bluetooth : .headset, device: output.id)
                : RouteRequest(target: preferences.baseTarget)
        }
        let choice = choice(status, state, defaultTarget: preferences.baseTarget, by: preferences)
        // A listed output (an HDMI output or the speaker, ranked above the headphones in use) is asked
        // for forced, as `watch --apply` asks for it; the base target, when nothing ranks, is not.
        return choice.device == nil ? RouteRequest(target: choice.target) : choice
    }

    /// The output in use before the change, when it went away (any kind: an HDMI monitor sleeping too).
    static func routeGone(_ change: Change) -> Output? {
        change.previous.output.flatMap { old in change.removed.first { $0.id == old.id } }
    }

    /// How long after an output appears a switch to it is the server's reaction to its arrival.
    public static let noStealWindow = 1.0

    /// An unlisted hardware output that is neither external nor built-in (HDMI/DisplayPort, S/PDIF,
    /// line-out) never takes the route by itself (DESIGN.md §1 "No stealing by unknown outputs").
    public static func mayNotSteal(_ output: Output, _ priority: [String]) -> Bool {
        output.route == .unknown && output.isHardware && !priority.contains { $0 == output.id || $0 == output.sink }
    }

    /// `recentlyAdded`, `recentlyRemoved`: the outputs that appeared or went within `noStealWindow`
    /// before this change. `holdDown`: a departure's override clear waits (`deferredClear`), and
    /// meanwhile the route falls back with the override still standing.
    public static func decide(_ change: Change, state: inout PolicyState, preferences: Preferences,
                              muteOnFallback: Bool, recentlyAdded: Set<String> = [], recentlyRemoved: Set<String> = [],
                              holdDown: Bool = false) -> Decision {
        var decision = Decision()
        let added = change.added.filter(\.route.isExternal)
        let removed = change.removed.filter(\.route.isExternal)
        // Which output the rules would pick without the override, before and after this change.
        let wouldWin = ranked(change.previous, state, by: preferences).first
        state.connected.removeAll { key in removed.contains { $0.id == key } }
        state.callCapable.subtract(removed.map(\.id))
        for output in added.sorted(by: { ($0.sinkIndex ?? 0) < ($1.sinkIndex ?? 0) }) where !state.connected.contains(output.id) {
            state.connected.append(output.id)
        }
        let winner = ranked(change.current, state, by: preferences).first
        let changesWinner = winner?.id != wouldWin?.id
        // In a call, a Bluetooth device whose headset profile comes up after its card (HFP connects a
        // moment after A2DP) arrives for the call only now, and clears an override as any arrival
        // does (rule 8). Over an override, only the first time on this connection: the user's choice
        // stands while a device's headset profile goes and comes back.
        let arrivedForCall = preferences.inCall && winner.map { now in
            now.profiles.contains(where: Planner.isBluetoothHeadsetProfile)
                && change.previous.outputs.contains { $0.id == now.id && $0.isConnected && !$0.takesCalls }
                && (preferences.override == nil || !state.callCapable.contains(now.id))
        } == true
        state.callCapable.formUnion(PolicyState.callCapable(in: change.current))

        if let winner, changesWinner, arrivedForCall || change.added.contains(where: { $0.id == winner.id }) {
            // Rule 1 (and the priority list): a device that would win arrives; it becomes the route,
            // and the override goes.
            decision.request = choice(change.current, state, defaultTarget: preferences.baseTarget, by: preferences)
            decision.reason = .newDeviceAvailable
            if preferences.override != nil { decision.clearOverride = "'\(winner.id)' was connected" }
        } else if let gone = routeGone(change) ?? removed.first(where: { $0.id == wouldWin?.id }) {
            // The device in use, or the one the rules would pick, went: the override goes.
            var clears = preferences.override != nil && (gone.route.isExternal || gone.id == wouldWin?.id)
            if clears, holdDown {
                decision.deferredClear = DeferredClear(device: gone, cause: "'\(gone.id)' was disconnected")
                clears = false
            }
            if clears { decision.clearOverride = "'\(gone.id)' was disconnected" }
            // Rule 3: the device in use went, or the override went with the device that would win,
            // or the server moved the route in reaction to the departure (WirePlumber picks the best
            // port left): the route goes where the rules say, the next one they rank, else the
            // effective target (the default, or the call's target in a call, once the override goes).
            if routeGone(change) != nil || clears || change.routeChanged {
                let request = choice(change.current, state, defaultTarget: clears ? preferences.baseTarget : preferences.effectiveTarget,
                                     by: preferences)
                decision.request = request
                decision.muteFallback = muteOnFallback && request.target.isBuiltIn && routeGone(change)?.route.isExternal == true
                decision.reason = .oldDeviceUnavailable
            }
        } else if let now = change.current.output, let old = change.previous.output, now.id != old.id,
                  mayNotSteal(now, preferences.priority) || preferences.inCall && !now.takesCalls,
                  change.added.contains(where: { $0.id == now.id }) || recentlyAdded.contains(now.id),
                  let back = change.current.outputs.first(where: { $0.id == old.id && $0.isAvailable }) {
            // The server made an unlisted HDMI output the default as it appeared, or in a call an
            // A2DP-only speaker (a switch-on-connect policy): put the route back.
            if !back.isHiddenByJack {
                decision.request = .output(back)
                decision.reason = .restored
            } else if !ranked(change.current, state, by: preferences).isEmpty {
                // Back onto a speaker behind a plugged jack (`set speaker --force`) it cannot go: the
                // server moves a default whose port the jack hides to any sink it can use, the monitor
                // now. The device the rules rank first (the plugged headphones) gets the sound, and an
                // override that asked for that speaker goes: it cannot be kept while the monitor is here.
                decision.request = choice(change.current, state, defaultTarget: preferences.baseTarget, by: preferences)
                decision.reason = .restored
                if let override = preferences.override, override.isBuiltIn {
                    decision.clearOverride = "'\(now.id)' appeared; the \(back.route.rawValue) behind the plugged jack cannot keep the sound beside it"
                }
            }
        } else if change.added.isEmpty, change.removed.isEmpty, change.profileChanged.isEmpty, change.routeChanged,
                  let old = change.previous.output, let card = old.cardName, change.current.output?.cardName == card,
                  recentlyRemoved.contains(where: { Output.id($0, isOn: card) }),
                  change.current.outputs.contains(where: { $0.id == old.id && $0.isAvailable }) {
            // The server moved the route to another port of its card a moment after a jack of that
            // card was pulled, the route's output still there (WirePlumber picks the best port left):
            // its reaction to the departure, not a user's pick. The route goes where the rules say.
            decision.request = choice(change.current, state, defaultTarget: preferences.effectiveTarget, by: preferences)
            decision.reason = .oldDeviceUnavailable
        } else if let old = change.previous.output, let card = old.cardName, change.profileChanged.contains(card),
                  change.current.output?.cardName != card, let target = RouteTarget(route: old.route),
                  let same = change.current.outputs.first(where: { $0.id == old.id && $0.isConnected }) {
            // A profile flip (A2DP <-> HFP, HiFi <-> Voice Call) replaced the route's sink and the
            // server parked the default on another card meanwhile: the same device keeps the sound.
            // (Another port of the same card is the flipper's own choice, and stands; so is `off`.)
            decision.request = RouteRequest(target: target, device: same.id, force: true)
            decision.reason = .categoryChange
        } else if change.current.output == nil, change.previous.output != nil,
                  change.current.outputs.contains(where: { $0.sink != nil && $0.isAvailable }) {
            // The route's sink vanished (not an external device) and nothing took its place.
            decision.request = RouteRequest(target: preferences.effectiveTarget, force: true)
            decision.reason = .noSuitableRoute
        }

        // The preferred input back (it appeared, or its jack was plugged): applied again. Not while its
        // jack is empty: the server would move the default input on to a monitor.
        if let input = change.current.usableInput(preferred: preferences.preferredInput), !input.isDefault,
           !change.previous.inputs.contains(where: { $0.id == input.id && $0.availability.isUsable }) {
            decision.restoreInput = input
        }
        return decision
    }
}
