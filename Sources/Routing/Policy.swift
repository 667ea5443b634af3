/// What `watch --apply` remembers between changes: the external outputs in the order they were
/// connected, oldest first, so that the most recent one wins (rule 1) and the fallback goes to the
/// next most recent (rule 3).
public struct PolicyState: Equatable, Sendable {
    public var connected: [String]

    /// Externals already present at start are ordered as the server numbered them.
    public init(status: Status) {
        connected = status.outputs
            .filter { $0.route.isExternal && $0.isAvailable }
            .sorted { ($0.sinkIndex ?? 0, $0.priority) < ($1.sinkIndex ?? 0, $1.priority) }
            .map(\.id)
            .reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
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

    public init() {}

    public var isEmpty: Bool { request == nil && clearOverride == nil && restoreInput == nil }
}

/// The rules of DESIGN.md §1 as `watch --apply` keeps them. Pure: it decides, Pulse acts.
///
/// Only device changes lead to actions. A default-sink or port change that another client made (no
/// device came or went) is reported and respected, and the preferences are left as they are (rule 5).
public enum Policy {
    /// Where the rules put the sound now: the most recently connected external device still
    /// present, else the built-in target.
    public static func choice(_ status: Status, _ state: PolicyState, defaultTarget: RouteTarget) -> RouteRequest {
        for key in state.connected.reversed() {
            if let output = status.outputs.first(where: { $0.id == key && $0.isAvailable }) {
                return RouteRequest(target: output.route == .bluetooth ? .bluetooth : .headset, device: output.id)
            }
        }
        return RouteRequest(target: defaultTarget, force: true)
    }

    /// What the rules want with no device change to react to (`clear`, a call's start and end): an
    /// external device in use keeps the sound (rule 2); else the most recently connected one; else the
    /// base target (the call's during a call, else the default). An override is the caller's business.
    public static func ruling(_ status: Status, _ preferences: Preferences) -> RouteRequest {
        if let output = status.output, output.route.isExternal, output.isAvailable {
            // In a call the device is asked for by name: the call may need its headset profile.
            return preferences.inCall ? RouteRequest(target: output.route == .bluetooth ? .bluetooth : .headset, device: output.id)
                : RouteRequest(target: preferences.baseTarget)
        }
        let choice = choice(status, PolicyState(status: status), defaultTarget: preferences.baseTarget)
        return RouteRequest(target: choice.target, device: choice.device)
    }

    /// The output in use before the change, when it went away (any kind: an HDMI monitor sleeping too).
    static func routeGone(_ change: Change) -> Output? {
        change.previous.output.flatMap { old in change.removed.first { $0.id == old.id } }
    }

    public static func decide(_ change: Change, state: inout PolicyState, preferences: Preferences,
                              muteOnFallback: Bool) -> Decision {
        var decision = Decision()
        let added = change.added.filter(\.route.isExternal)
        let removed = change.removed.filter(\.route.isExternal)
        let mostRecent = state.connected.last
        state.connected.removeAll { key in removed.contains { $0.id == key } }
        for output in added.sorted(by: { ($0.sinkIndex ?? 0) < ($1.sinkIndex ?? 0) }) where !state.connected.contains(output.id) {
            state.connected.append(output.id)
        }

        if let newest = added.max(by: { ($0.sinkIndex ?? 0) < ($1.sinkIndex ?? 0) }) {
            // Rule 1: a newly connected external device becomes the route, and the override goes.
            decision.request = RouteRequest(target: newest.route == .bluetooth ? .bluetooth : .headset, device: newest.id)
            decision.reason = .newDeviceAvailable
            if preferences.override != nil { decision.clearOverride = "'\(newest.id)' was connected" }
        } else if let gone = routeGone(change) ?? removed.first(where: { $0.id == mostRecent }) {
            // The device in use, or the one the rules would pick (the most recent), went: the override goes.
            let clears = preferences.override != nil && gone.route.isExternal
            if clears { decision.clearOverride = "'\(gone.id)' was disconnected" }
            if routeGone(change) != nil {
                // Rule 3: fall back to the next most recent external device, else to the effective
                // target (the default, or the call's target in a call, when this very change clears the override).
                let request = choice(change.current, state, defaultTarget: clears ? preferences.baseTarget : preferences.effectiveTarget)
                decision.request = request
                decision.muteFallback = muteOnFallback && request.target.isBuiltIn
                decision.reason = .oldDeviceUnavailable
            }
        } else if let old = change.previous.output, let card = old.cardName, change.profileChanged.contains(card),
                  change.current.output?.cardName != card, let target = RouteTarget(route: old.route),
                  let same = change.current.outputs.first(where: { $0.id == old.id && $0.isAvailable }) {
            // A profile flip (A2DP <-> HFP, HiFi <-> Voice Call) replaced the route's sink and the
            // server parked the default on another card meanwhile: the same device keeps the sound.
            // (Another port of the same card is the flipper's own choice, and stands.)
            decision.request = RouteRequest(target: target, device: same.id, force: true)
            decision.reason = .categoryChange
        } else if change.current.output == nil, change.previous.output != nil,
                  change.current.outputs.contains(where: { $0.sink != nil && $0.isAvailable }) {
            // The route's sink vanished (not an external device) and nothing took its place.
            decision.request = RouteRequest(target: preferences.effectiveTarget, force: true)
            decision.reason = .noSuitableRoute
        }

        if let preferred = preferences.preferredInput,
           let input = change.current.inputs.first(where: { $0.id == preferred || $0.source == preferred }),
           !change.previous.inputs.contains(where: { $0.id == input.id }),
           !input.isDefault {
            decision.restoreInput = input
        }
        return decision
    }
}
