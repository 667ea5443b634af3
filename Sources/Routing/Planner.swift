/// One change to make on the server. Names, not indices: PipeWire renumbers, names stay.
public enum Action: Equatable, Sendable {
    case setCardProfile(card: String, profile: String)
    case setSinkPort(sink: String, port: String)
    case setDefaultSink(String)
    case moveSinkInput(index: UInt32, sink: String)
    case setDefaultSource(String)
    case setSourcePort(source: String, port: String)
    case setSinkMute(sink: String, mute: Bool)
    /// The microphone's mute (`input mute`, a call's end restoring it).
    case setSourceMute(source: String, mute: Bool)
}

/// What `set`, `clear` and the policy ask for: a target, optionally one named device, optionally forced.
public struct RouteRequest: Equatable, Sendable {
    public var target: RouteTarget
    public var device: String?
    public var force: Bool
    /// `device` names one output whatever its kind: the policy's pick of a listed HDMI output (an
    /// `unknown` route, which no target names).
    public var anyKind: Bool

    public init(target: RouteTarget, device: String? = nil, force: Bool = false, anyKind: Bool = false) {
        self.target = target
        self.device = device
        self.force = force
        self.anyKind = anyKind
    }

    /// The request that puts the sound on this one output, forced.
    public static func output(_ output: Output) -> RouteRequest {
        RouteRequest(target: RouteTarget(route: output.route) ?? .speaker, device: output.id, force: true,
                     anyKind: RouteTarget(route: output.route) == nil)
    }
}

/// The outcome of planning: what to do and what the route should then be.
public struct Plan: Equatable, Sendable {
    public enum Outcome: Equatable, Sendable {
        /// Switch to `output` (no actions when it is already the route).
        case switchTo
        /// An external device is the route and the request is a built-in target: leave it (rule 2).
        case externalKeepsPriority(Output)
        /// No output of the asked kind: `output` is what the route falls back to, if anything (rule 4).
        case fellBack(from: RouteTarget)
    }

    public var outcome: Outcome
    public var actions: [Action]
    /// The output the actions lead to; nil when nothing can be done.
    public var output: Output?
    /// The card profile switch comes first: the wanted sink only exists after it, so planning runs again.
    public var needsReplan: Bool
    /// In a call, nothing of the asked kind: the call stays on the output it is on (rule 8 over rule 4).
    public var callStays = false

    public var expectedRoute: Route? { output?.route }

    /// Whether carrying it out would move the route (a profile, a port or the default sink), as
    /// opposed to only following streams or the microphone.
    public var movesRoute: Bool {
        actions.contains { action in
            switch action {
            case .setCardProfile, .setSinkPort, .setDefaultSink: return true
            default: return false
            }
        }
    }

    /// Whether it switches a card's profile (to reach the output under another one).
    public var switchesProfile: Bool {
        actions.contains { if case .setCardProfile = $0 { true } else { false } }
    }
}

/// Why a request cannot be planned at all.
public enum PlanningError: Error, Equatable, Sendable, CustomStringConvertible {
    case noSuchDevice(String, RouteTarget)
    /// The named output is here, but of another kind than the target (an HDMI output named to `set
    /// headset`): `set` moves to an output of its target's kind only.
    case deviceOfAnotherKind(String, RouteTarget, Route)
    /// Both servers rank a sink whose active port a jack marks unavailable below any other usable
    /// sink, and move the default away from it at once: switching would not stick, only flap.
    case hiddenByJack(output: String, rival: String)
    /// In a call, the named Bluetooth output has no headset profile (HFP/HSP), so no microphone for
    /// the call (rule 8): an A2DP-only speaker takes a call only when named with --force.
    case cannotCarryCall(String)

    public var description: String {
        switch self {
        case let .noSuchDevice(name, target): return "no \(target.route.rawValue) output named '\(name)' (see 'routectl devices')"
        case let .deviceOfAnotherKind(name, target, kind):
            return "'\(name)' is \(kind == .unknown ? "an" : "a") \(kind.rawValue) output, not a \(target.route.rawValue) one; "
                + "set \(target.rawValue) --device takes a \(target.route.rawValue) output ('routectl devices' shows each output's kind)"
        case let .cannotCarryCall(name):
            return "'\(name)' has no headset profile (HFP/HSP or LE Audio duplex), so no microphone for the call; the call stays where it is (--force puts it there anyway)"
        case let .hiddenByJack(output, rival):
            return "'\(output)' is hidden by a plugged jack, and the server keeps the default on an available output ('\(rival)') instead; unplug the jack or make that output unavailable"
        }
    }
}

/// What planning needs besides the snapshot and the request.
public struct PlanContext: Equatable, Sendable {
    /// The preferred input (an input id or a source name), when one is set.
    public var preferredInput: String?
    /// Call mode (rule 8): prefer a card's call profile rather than a non-call one.
    public var inCall: Bool
    /// The route before the command began (rule 7): a replan after routectl's own profile switch is
    /// judged against it, not against the server's reaction (a transient default on an idle headset).
    public var before: Output?
    /// The default sink before the command began: only its streams follow the route (rule 5).
    public var previousDefaultSink: String?
    /// Name the output's sink as the default even when it already is. A server may have made it the
    /// default only as a stand-in for the default it remembers (WirePlumber's configured default,
    /// PulseAudio's configured default sink), and goes back to that one as soon as it is usable
    /// again: the policy's choice must be the remembered one.
    public var claimDefault: Bool
    /// The policy's own moves (`watch --apply`, `call end`'s return) never switch a card out of its
    /// `off` profile: turning a card off is a user's choice (rule 5). Except in a call, which must be
    /// heard (rule 8). A command (`set`, `call start`) asked for does.
    public var keepCardsOff: Bool

    public init(preferredInput: String? = nil, inCall: Bool = false, before: Output? = nil, previousDefaultSink: String? = nil,
                claimDefault: Bool = false, keepCardsOff: Bool = false) {
        self.preferredInput = preferredInput
        self.inCall = inCall
        self.before = before
        self.previousDefaultSink = previousDefaultSink
        self.claimDefault = claimDefault
        self.keepCardsOff = keepCardsOff
    }
}

/// Turns (snapshot, request, context) into actions (DESIGN.md §1 rules 1, 2, 4, 5, 7). Pure.
public enum Planner {
    public static func plan(_ snapshot: Snapshot, _ request: RouteRequest, preferredInput: String? = nil) throws(PlanningError) -> Plan {
        try plan(snapshot, request, PlanContext(preferredInput: preferredInput))
    }

    /// `known` is the snapshot's own status when the caller has it already: deriving a status is the
    /// costliest step of planning, and a command plans from the snapshot it has just read.
    public static func plan(_ snapshot: Snapshot, _ request: RouteRequest, _ context: PlanContext,
                            status known: Status? = nil) throws(PlanningError) -> Plan {
        var status = known ?? Status(snapshot: snapshot)
        if context.keepCardsOff, !context.inCall { status.outputs.removeAll { $0.cardProfile == "off" } }
        // Rule 8: in a call, a Bluetooth output with no headset profile (an A2DP-only speaker) has no
        // microphone for it: no candidate, and no external device keeping the sound, unless named and
        // forced (`set --device ID --force`, the policy putting a call back where it was).
        let unfitForCall = context.inCall && !(request.force && request.device != nil) ? status.outputs.filter { !$0.takesCalls } : []
        if !unfitForCall.isEmpty { status.outputs.removeAll { !$0.takesCalls } }
        let present = status.outputs + unfitForCall
        // Rule 7: the route before the command, not a transient the server picked after routectl's own step.
        let before = context.before ?? status.output
        let external = before.flatMap { old in
            status.outputs.first { $0.id == old.id && $0.route.isExternal && $0.isAvailable }
        }

        let wanted = request.target.route
        // A named device must be there, whoever keeps the sound: a typo is not recorded as a preference.
        let named = try request.device.map { device throws(PlanningError) in
            guard let output = match(device, in: status.outputs, route: request.anyKind ? nil : wanted) else {
                if let unfit = match(device, in: unfitForCall, route: request.anyKind ? nil : wanted) { throw .cannotCarryCall(unfit.id) }
                if let other = match(device, in: present, route: nil) {
                    throw .deviceOfAnotherKind(device, request.target, other.route)
                }
                throw .noSuchDevice(device, request.target)
            }
            return output
        }
        // Rule 2: a built-in target does not take the sound back from an external device unless forced
        // (an unplugged headphone jack is no device in use). It applies once the device goes, so there
        // must be an output of its kind, a speaker behind the jack included; with none, rule 4 below.
        if request.target.isBuiltIn, !request.force, let external,
           named != nil || best(wanted, status, context, includeHidden: true) != nil {
            return Plan(outcome: .externalKeepsPriority(external), actions: [], output: external, needsReplan: false)
        }
        if let named { return try actions(toward: named, snapshot, status, context, outcome: .switchTo) }
        // A built-in output hidden by a plugged jack is reached only with --force (rule 4).
        if let output = best(wanted, status, context, includeHidden: request.force) {
            return try actions(toward: output, snapshot, status, context, outcome: .switchTo)
        }
        // Rule 4: nothing of that kind here. An external device in use keeps the sound (rule 1);
        // otherwise an earpiece, or an absent external device, degrades to the speaker, and a speaker
        // hidden by a jack (without --force) leaves the sound on what is plugged into it.
        if let external {
            return Plan(outcome: .fellBack(from: request.target), actions: [], output: external, needsReplan: false)
        }
        // In a call the call stays where it is when a headset that is not there is asked for: on the
        // receiver or the speaker, where rule 8 put it, or on an A2DP-only speaker the user named with
        // --force. That never turns a call into a speakerphone one. A built-in target (call start,
        // clear, set earpiece) never keeps a call on an A2DP-only speaker: it has no microphone.
        if context.inCall, let current = before, current.route != .unknown,
           let here = present.first(where: { o in
               o.id == current.id && o.isAvailable && (request.force || !o.isHiddenByJack)
                   && (!o.route.isExternal || !o.takesCalls && request.target.route.isExternal)
           }) {
            var plan = try actions(toward: here, snapshot, status, context, outcome: .fellBack(from: request.target))
            plan.callStays = true
            return plan
        }
        if let speaker = best(.speaker, status, context, includeHidden: request.force)
            ?? best(.headset, status, context, includeHidden: false) {
            // The speaker is there behind the jack (its card was off, say): the headphones get the
            // sound and keep it, as rule 2 says once they have it. Else nothing of that kind is here.
            let hidden = request.target.isBuiltIn && speaker.route.isExternal && best(wanted, status, context, includeHidden: true) != nil
            return try actions(toward: speaker, snapshot, status, context,
                               outcome: hidden ? .externalKeepsPriority(speaker) : .fellBack(from: request.target))
        }
        return Plan(outcome: .fellBack(from: request.target), actions: [], output: nil, needsReplan: false)
    }

    /// The output a request for `route` means, ranked as rule 4 says: reachable in a profile of the
    /// mode's kind (a non-call profile outside a call); then the one in use; for an external kind the
    /// most recently connected (servers number sinks in order of appearance); then the least
    /// disruptive (a port of the current default sink, then its card, then other cards); then present
    /// without a profile switch; then the server's priority.
    static func best(_ route: Route, _ status: Status, _ context: PlanContext, includeHidden: Bool) -> Output? {
        let candidates = status.outputs.filter { $0.route == route && $0.isAvailable && (includeHidden || !$0.isHiddenByJack) }
        let current = status.output
        func key(_ o: Output) -> [Int] {
            let kindOfProfile = o.profiles.isEmpty || o.profiles.contains { fits($0, context) } ? 0 : 1
            let disruption = o.sink != nil && o.sink == current?.sink ? 0 : o.card != nil && o.card == current?.card ? 1 : 2
            let recency = route.isExternal ? -Int(o.sinkIndex ?? 0) : 0
            let switchNeeded = profile(for: o, context) == nil ? 0 : 1
            return [kindOfProfile, o.isActive ? 0 : 1, recency, disruption, switchNeeded, -Int(o.priority)]
        }
        return candidates.min { key($0).lexicographicallyPrecedes(key($1)) }
    }

    /// A call profile is one whose UCM verb (the name before " (", in both namings) is `Voice Call`
    /// or `Voice Call IP`; never a match on a whole profile name (DESIGN.md rule 8).
    public static func isCallProfile(_ name: String) -> Bool {
        var verb = Substring(name)
        if let paren = name.firstIndex(of: "("), paren > name.startIndex, name[name.index(before: paren)] == " " {
            verb = name[..<name.index(before: paren)]
        }
        return verb == "Voice Call" || verb == "Voice Call IP"
    }

    /// A Bluetooth headset profile, with the microphone a call uses and music does not: HFP/HSP,
    /// `headset-head-unit` (and its codec variants) on PipeWire, `handsfree_head_unit`/`headset_head_unit`
    /// on PulseAudio; and LE Audio's duplex, PipeWire's `bap-duplex` (and its codec variants).
    public static func isBluetoothHeadsetProfile(_ name: String) -> Bool {
        name.hasPrefix("headset-head-unit") || name == "handsfree_head_unit" || name == "headset_head_unit"
            || name.hasPrefix("bap-duplex")
    }

    /// Whether a profile is of the mode's kind: in a call a call profile or a Bluetooth headset profile
    /// (rule 8), outside one anything but a call profile. A Bluetooth headset another client put in
    /// HFP outside a call (a softphone) stays there: routectl flips Bluetooth for its own calls only.
    static func fits(_ profile: String, _ context: PlanContext) -> Bool {
        context.inCall ? isCallProfile(profile) || isBluetoothHeadsetProfile(profile) : !isCallProfile(profile)
    }

    /// The profile to switch the output's card to, or nil when its current profile serves: among the
    /// profiles that hold the output, those of the mode's kind, then the current one, then the
    /// server's priority (rule 4).
    static func profile(for output: Output, _ context: PlanContext) -> String? {
        guard !output.profiles.isEmpty else { return nil }
        let ofKind = output.profiles.filter { fits($0, context) }
        let pool = ofKind.isEmpty ? output.profiles : ofKind
        // The current profile holds it: no switch (when its sink is not there yet, it is on its way:
        // a Bluetooth card appears a moment before its sink on PipeWire).
        if let current = output.cardProfile, pool.contains(current) { return nil }
        if output.sink != nil, ofKind.isEmpty { return nil }
        // PipeWire's plain `headset-head-unit` picks the best codec itself; its codec variants pin one.
        if context.inCall, let plain = pool.first(where: { $0 == "headset-head-unit" }) { return plain }
        // Outside a call a Bluetooth headset's music profile (A2DP) before its headset one.
        return pool.first { !isBluetoothHeadsetProfile($0) } ?? pool.first
    }

    /// `--device NAME`: an output id, a sink name, a card name or a description, of the asked kind.
    static func match(_ name: String, in outputs: [Output], route: Route?) -> Output? {
        let kind = outputs.filter { (route == nil || $0.route == route) && $0.isAvailable }
        return kind.first { $0.id == name } ?? kind.first { $0.sink == name } ?? kind.first { $0.cardName == name }
            ?? kind.first { $0.description == name }
    }

    static func actions(toward output: Output, _ snapshot: Snapshot, _ status: Status, _ context: PlanContext,
                        outcome: Plan.Outcome) throws(PlanningError) -> Plan {
        if output.isHiddenByJack, let rival = status.outputs.first(where: { o in
            o.sink != nil && o.sink != output.sink && o.availability.isUsable
                && snapshot.sinks.first { $0.name == o.sink }.map { $0.activePort == nil || $0.activePort == o.port } == true
        }) {
            throw .hiddenByJack(output: output.id, rival: rival.id)
        }
        if let card = output.cardName, let profile = profile(for: output, context) {
            // Switch first; the wanted sink exists only after it, so planning runs again on the new sinks.
            return Plan(outcome: outcome, actions: [.setCardProfile(card: card, profile: profile)], output: output, needsReplan: true)
        }
        guard let sinkName = output.sink, let sink = snapshot.sinks.first(where: { $0.name == sinkName }) else {
            // Its card's profile holds it but its sink has not appeared yet: wait for it, then plan again.
            let coming = output.cardProfile.map(output.profiles.contains) ?? false
            return Plan(outcome: outcome, actions: [], output: coming ? output : nil, needsReplan: coming)
        }
        var actions: [Action] = []
        if let port = output.port, sink.activePort != port { actions.append(.setSinkPort(sink: sink.name, port: port)) }
        if context.claimDefault || snapshot.server.defaultSinkName != sink.name { actions.append(.setDefaultSink(sink.name)) }
        // Rule 5: only the streams on the previous default sink follow; one the user placed elsewhere stays.
        let previous = snapshot.sinks.first { $0.name == (context.previousDefaultSink ?? snapshot.server.defaultSinkName) }
            ?? snapshot.defaultSink
        if let previous {
            for input in snapshot.sinkInputs where input.sink == previous.index && input.sink != sink.index {
                actions.append(.moveSinkInput(index: input.index, sink: sink.name))
            }
        }
        if context.inCall {
            actions += callInput(for: output, snapshot, status).map { sourceActions($0, snapshot) } ?? []
        } else {
            actions += inputActions(for: sink, route: output.route, snapshot, status, context.preferredInput)
        }
        return Plan(outcome: outcome, actions: actions, output: output, needsReplan: false)
    }

    /// In a call the microphone follows the output (rule 8): the headset's own (a wired headset's mic
    /// port, a Bluetooth headset's source in HFP), else the output card's other microphone (headphones
    /// without a mic: the phone's own). Nil when the card has none (the server's choice stands).
    public static func callInput(for output: Output, _ snapshot: Snapshot, _ status: Status) -> Input? {
        guard let card = output.cardName else { return nil }
        let sources = Set(snapshot.sources.filter { snapshot.card(of: $0)?.name == card }.map(\.name))
        let mics = status.inputs.filter { sources.contains($0.source) && $0.availability.isUsable }
        let wanted: Set<InputKind> = output.route.isExternal ? [.headset, .bluetooth] : [.builtin, .unknown]
        return mics.first { wanted.contains($0.kind) && $0.isDefault } ?? mics.first { wanted.contains($0.kind) } ?? mics.first
    }

    /// The microphone that goes with an output: the preferred input while it is present (a port
    /// whose jack is empty is not: the server would move the default on to a monitor), else the
    /// headset's own microphone (a source of the same card), else leave the server's choice.
    static func inputActions(for sink: Sink, route: Route, _ snapshot: Snapshot, _ status: Status, _ preferredInput: String?) -> [Action] {
        if let input = status.usableInput(preferred: preferredInput) { return sourceActions(input, snapshot) }
        guard route.isExternal, let card = snapshot.card(of: sink),
              let source = snapshot.sources.first(where: { !$0.isMonitor && snapshot.card(of: $0)?.index == card.index }),
              source.name != snapshot.server.defaultSourceName else { return [] }
        return [.setDefaultSource(source.name)]
    }

    /// Makes one input (a source, or one port of it) the default.
    public static func sourceActions(_ input: Input, _ snapshot: Snapshot) -> [Action] {
        var actions: [Action] = []
        if let port = input.port, snapshot.sources.first(where: { $0.name == input.source })?.activePort != port {
            actions.append(.setSourcePort(source: input.source, port: port))
        }
        if snapshot.server.defaultSourceName != input.source { actions.append(.setDefaultSource(input.source)) }
        return actions
    }
}
