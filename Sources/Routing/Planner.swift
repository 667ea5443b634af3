/// One change to make on the server. Names, not indices: PipeWire renumbers, names stay.
public enum Action: Equatable, Sendable {
    case setCardProfile(card: String, profile: String)
    case setSinkPort(sink: String, port: String)
    case setDefaultSink(String)
    case moveSinkInput(index: UInt32, sink: String)
    case setDefaultSource(String)
    case setSinkMute(sink: String, mute: Bool)
}

/// What `set`, `clear` and the policy ask for: a target, optionally one named device, optionally forced.
public struct RouteRequest: Equatable, Sendable {
    public var target: RouteTarget
    public var device: String?
    public var force: Bool

    public init(target: RouteTarget, device: String? = nil, force: Bool = false) {
        self.target = target
        self.device = device
        self.force = force
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

    public var expectedRoute: Route? { output?.route }
}

/// Why a request cannot be planned at all.
public enum PlanningError: Error, Equatable, Sendable, CustomStringConvertible {
    case noSuchDevice(String, RouteTarget)

    public var description: String {
        switch self {
        case let .noSuchDevice(name, target): return "no \(target.route.rawValue) output named '\(name)' (see 'routectl devices')"
        }
    }
}

/// Turns (snapshot, request, preferred input) into actions (DESIGN.md §1 rules 1, 2, 4). Pure.
public enum Planner {
    public static func plan(_ snapshot: Snapshot, _ request: RouteRequest, preferredInput: String? = nil) throws(PlanningError) -> Plan {
        let status = Status(snapshot: snapshot)

        // Rule 2: a built-in target does not take the sound back from an external device unless forced
        // (an unplugged headphone jack is no device in use).
        if request.target.isBuiltIn, !request.force, status.route.isExternal, let current = status.output, current.isAvailable {
            return Plan(outcome: .externalKeepsPriority(current), actions: [], output: current, needsReplan: false)
        }

        let wanted = request.target.route
        if let device = request.device {
            guard let output = match(device, in: status.outputs, route: wanted) else {
                throw .noSuchDevice(device, request.target)
            }
            return actions(toward: output, snapshot, status, preferredInput, outcome: .switchTo)
        }
        if let output = best(wanted, status) {
            return actions(toward: output, snapshot, status, preferredInput, outcome: .switchTo)
        }
        // Rule 4: nothing of that kind here. An external device in use keeps the sound (rule 1);
        // otherwise an earpiece, or an absent external device, degrades to the speaker.
        if status.route.isExternal, let current = status.output, current.isAvailable {
            return Plan(outcome: .fellBack(from: request.target), actions: [], output: current, needsReplan: false)
        }
        if let speaker = best(.speaker, status) {
            return actions(toward: speaker, snapshot, status, preferredInput, outcome: .fellBack(from: request.target))
        }
        return Plan(outcome: .fellBack(from: request.target), actions: [], output: nil, needsReplan: false)
    }

    /// The output a request for `route` means: the current one if it already is that kind; else, for
    /// an external kind, the most recently connected (servers number sinks in order of appearance);
    /// else the best by port priority. Outputs present now beat those behind a profile switch.
    static func best(_ route: Route, _ status: Status) -> Output? {
        let candidates = status.outputs.filter { $0.route == route && $0.isAvailable }
        if let active = candidates.first(where: \.isActive) { return active }
        return candidates.max { a, b in rank(a, route) < rank(b, route) }
    }

    static func rank(_ o: Output, _ route: Route) -> (Int, UInt32, UInt32) {
        let present = o.sink != nil ? 1 : 0
        let recency = route.isExternal ? (o.sinkIndex ?? 0) : 0
        return (present, recency, o.priority)
    }

    /// `--device NAME`: an output id, a sink name, a card name or a description, of the asked kind.
    static func match(_ name: String, in outputs: [Output], route: Route) -> Output? {
        let kind = outputs.filter { $0.route == route && $0.isAvailable }
        return kind.first { $0.id == name } ?? kind.first { $0.sink == name } ?? kind.first { $0.cardName == name }
            ?? kind.first { $0.description == name }
    }

    static func actions(toward output: Output, _ snapshot: Snapshot, _ status: Status, _ preferredInput: String?,
                        outcome: Plan.Outcome) -> Plan {
        guard let sinkName = output.sink, let sink = snapshot.sinks.first(where: { $0.name == sinkName }) else {
            // Behind a profile switch: switch first, then plan again on the new sinks.
            guard let card = output.cardName, let profile = output.profiles.first else {
                return Plan(outcome: outcome, actions: [], output: nil, needsReplan: false)
            }
            return Plan(outcome: outcome, actions: [.setCardProfile(card: card, profile: profile)], output: output, needsReplan: true)
        }
        var actions: [Action] = []
        if let port = output.port, sink.activePort != port { actions.append(.setSinkPort(sink: sink.name, port: port)) }
        if snapshot.server.defaultSinkName != sink.name { actions.append(.setDefaultSink(sink.name)) }
        for input in snapshot.sinkInputs where input.sink != sink.index {
            actions.append(.moveSinkInput(index: input.index, sink: sink.name))
        }
        if let source = inputSource(for: sink, route: output.route, snapshot, preferredInput),
           source != snapshot.server.defaultSourceName {
            actions.append(.setDefaultSource(source))
        }
        return Plan(outcome: outcome, actions: actions, output: output, needsReplan: false)
    }

    /// The microphone that goes with an output: the preferred input while it is present, else the
    /// headset's own microphone (a source of the same card), else leave the server's choice.
    static func inputSource(for sink: Sink, route: Route, _ snapshot: Snapshot, _ preferredInput: String?) -> String? {
        if let preferredInput, snapshot.sources.contains(where: { $0.name == preferredInput }) { return preferredInput }
        guard route.isExternal, let card = snapshot.card(of: sink) else { return nil }
        return snapshot.sources.first { !$0.isMonitor && snapshot.card(of: $0)?.index == card.index }?.name
    }
}
