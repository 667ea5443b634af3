/// One place sound can come out: a sink with one of its ports, a port-less sink, or a card port that
/// exists only under another profile of its card (then `sink` is nil and `profiles` says where).
public struct Output: Equatable, Sendable {
    public var route: Route
    public var sink: String?
    public var sinkIndex: UInt32?
    public var port: String?
    public var description: String
    public var card: UInt32?
    public var cardName: String?
    /// The port's priority (higher is better), 0 for a port-less sink.
    public var priority: UInt32
    /// The card profiles under which this output exists, for an output not present now.
    public var profiles: [String]
    public var availability: PortAvailability
    /// True for the default sink's active port (or the port-less default sink itself).
    public var isActive: Bool

    /// The device behind the output, stable across card profile switches: a Bluetooth device is its
    /// card (A2DP and HFP are two sinks of one device); other outputs are their card's (or sink's) port.
    public var deviceKey: String {
        let owner = cardName ?? sink ?? id
        if route == .bluetooth { return owner }
        return port.map { "\(owner):\($0)" } ?? owner
    }

    /// Usable: not a jack known to be unplugged, and present now or reachable by an available profile.
    public var isAvailable: Bool { availability.isUsable }

    /// A stable name to address this output with: `sink` or `sink:port`, or `card-name:port`.
    public var id: String
}

/// The kind of an input, for listing: the built-in microphone, a headset's, a Bluetooth one, or other.
public enum InputKind: String, Sendable {
    case builtin, headset, bluetooth, unknown
}

public struct Input: Equatable, Sendable {
    public var kind: InputKind
    public var source: String
    public var sourceIndex: UInt32
    public var port: String?
    public var description: String
    public var availability: PortAvailability
    public var isDefault: Bool
}

/// The status of a server, derived from one snapshot: what `query` and `devices` show.
public struct Status: Equatable, Sendable {
    public var server: ServerInfo
    public var route: Route
    /// The output sound comes out of: the default sink and its active port.
    public var output: Output?
    public var outputs: [Output]
    public var inputs: [Input]
    /// A stream is running on the route's sink.
    public var engaged: Bool
    /// A stream is running anywhere on the server.
    public var otherAudioPlaying: Bool

    public init(snapshot: Snapshot) {
        server = snapshot.server
        outputs = Status.outputs(of: snapshot)
        inputs = Status.inputs(of: snapshot)
        output = outputs.first { $0.isActive }
        route = output?.route ?? .unknown
        let routeSink = snapshot.defaultSink?.index
        let playing = snapshot.sinkInputs.filter { !$0.corked }
        engaged = routeSink.map { sink in playing.contains { $0.sink == sink } } ?? false
        otherAudioPlaying = !playing.isEmpty
    }

    /// The external outputs present now, by a name that survives profile switches (card, else sink, and port).
    public var externalKeys: [String] {
        outputs.filter { $0.route.isExternal && $0.isAvailable && $0.sink != nil }
            .map(\.deviceKey)
            .reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            .sorted()
    }

    /// The default source when it is an input (not a monitor).
    public var defaultInput: String? { inputs.first { $0.isDefault }?.source }

    /// Whether an output of this kind could be used now (with a profile switch if need be).
    public func isAvailable(_ route: Route) -> Bool {
        outputs.contains { $0.route == route && $0.isAvailable }
    }

    /// The kinds with a usable output, in the order of `Route.allCases`.
    public var availableRoutes: [Route] { Route.allCases.filter { $0 != .unknown && isAvailable($0) } }

    static func outputs(of snapshot: Snapshot) -> [Output] {
        var outputs: [Output] = []
        let defaultName = snapshot.server.defaultSinkName
        for sink in snapshot.sinks {
            let card = snapshot.card(of: sink)
            let isDefault = sink.name == defaultName
            let base = OutputFacts(sinkName: sink.name, sinkDescription: sink.description, driver: sink.driver,
                                   properties: sink.properties, card: card)
            if sink.ports.isEmpty {
                outputs.append(Output(route: Classifier.route(of: base), sink: sink.name, sinkIndex: sink.index,
                                      port: nil, description: sink.description, card: card?.index, cardName: card?.name,
                                      priority: 0, profiles: [],
                                      availability: .unknown, isActive: isDefault, id: sink.name))
                continue
            }
            for port in sink.ports {
                var facts = base
                facts.port = port
                facts.portProperties = card?.ports.first { $0.name == port.name }?.properties ?? [:]
                outputs.append(Output(route: Classifier.route(of: facts), sink: sink.name, sinkIndex: sink.index,
                                      port: port.name, description: "\(port.description) (\(sink.description))",
                                      card: card?.index, cardName: card?.name, priority: port.priority,
                                      profiles: [], availability: port.availability,
                                      isActive: isDefault && (sink.activePort == port.name || sink.activePort == nil),
                                      id: "\(sink.name):\(port.name)"))
            }
        }
        // Card ports that no current sink offers: reachable by switching the card's profile.
        for card in snapshot.cards {
            let present = Set(snapshot.sinks.filter { snapshot.card(of: $0)?.index == card.index }.flatMap { $0.ports.map(\.name) })
            for cardPort in card.ports where cardPort.effectiveDirection == .output && !present.contains(cardPort.name) {
                let profiles = card.profiles
                    .filter { $0.available && $0.sinks > 0 && cardPort.profiles.contains($0.name) }
                    .sorted { $0.priority > $1.priority }
                    .map(\.name)
                let facts = OutputFacts(sinkName: nil, port: cardPort.port, portProperties: cardPort.properties, card: card)
                let description = card.properties["device.description"] ?? card.name
                outputs.append(Output(route: Classifier.route(of: facts), sink: nil, sinkIndex: nil,
                                      port: cardPort.name, description: "\(cardPort.port.description) (\(description))",
                                      card: card.index, cardName: card.name, priority: cardPort.port.priority,
                                      profiles: profiles,
                                      availability: profiles.isEmpty ? .unavailable : cardPort.port.availability,
                                      isActive: false, id: "\(card.name):\(cardPort.name)"))
            }
        }
        return outputs
    }

    static func inputs(of snapshot: Snapshot) -> [Input] {
        var inputs: [Input] = []
        for source in snapshot.sources where !source.isMonitor {
            let card = snapshot.card(of: source)
            let isDefault = source.name == snapshot.server.defaultSourceName
            let ports: [Port?] = source.ports.isEmpty ? [nil] : source.ports
            for port in ports {
                let kind = inputKind(source: source, port: port, card: card)
                inputs.append(Input(kind: kind, source: source.name, sourceIndex: source.index, port: port?.name,
                                    description: port.map { "\($0.description) (\(source.description))" } ?? source.description,
                                    availability: port?.availability ?? .unknown,
                                    isDefault: isDefault && (port == nil || source.activePort == port?.name)))
            }
        }
        return inputs
    }

    static func inputKind(source: Source, port: Port?, card: Card?) -> InputKind {
        let facts = OutputFacts(sinkName: source.name, sinkDescription: source.description, driver: source.driver,
                                properties: source.properties, port: port, card: card)
        if Classifier.isBluetooth(facts) || source.name.hasPrefix("bluez_source.") || source.name.hasPrefix("bluez_input.") {
            return .bluetooth
        }
        if port?.type == .headset || port?.type == .headphones { return .headset }
        let name = port?.name.lowercased() ?? ""
        if name.contains("headset") || name.contains("headphone") { return .headset }
        switch facts.property("device.form_factor") {
        case "headset", "headphone": return .headset
        case "internal", "handset", "speaker": return .builtin
        default: break
        }
        if name.contains("internal") || name.hasPrefix("[in] mic") || name.hasPrefix("[in] builtin") { return .builtin }
        return .unknown
    }
}

extension Snapshot {
    /// The card a sink belongs to: routectl records it; a plain pactl dump is matched by device properties.
    public func card(of sink: Sink) -> Card? {
        if let c = card(index: sink.card) { return c }
        return matchCard(sink.properties)
    }

    public func card(of source: Source) -> Card? {
        if let c = card(index: source.card) { return c }
        return matchCard(source.properties)
    }

    private func matchCard(_ properties: [String: String]) -> Card? {
        for key in ["api.alsa.card", "alsa.card", "api.bluez5.address", "device.bus_path"] {
            if let value = properties[key], let c = cards.first(where: { $0.properties[key] == value }) { return c }
        }
        return nil
    }
}
