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
    /// The card's available profiles with a sink under which this output exists, best server priority
    /// first; empty for an output that no card profile governs (a port-less or card-less sink).
    public var profiles: [String]
    /// The card's active profile, for an output of a card.
    public var cardProfile: String?
    /// The availability the server reports for the port.
    public var availability: PortAvailability
    /// True for the default sink's active port (or the port-less default sink itself).
    public var isActive: Bool
    /// The output's id (DESIGN.md §1), stable across profile switches: `CARD:PORT` for a card port, the
    /// card for a Bluetooth device (one output whatever its profile), else the sink name.
    public var id: String
    /// The sink is muted (the output's mute, not the microphone's).
    public var isMuted: Bool = false
    /// A card's output, or a sink with `device.class=sound`: hardware, not a virtual, null or network
    /// sink a client created (`device.class=abstract`, tunnels).
    public var isHardware: Bool = false

    /// On a sink now, or reachable by switching its card to an available profile.
    public var isReachable: Bool { sink != nil || !profiles.isEmpty }

    /// A built-in output the server marks "not available" because a jack is plugged (the speaker with
    /// headphones in) still exists: only the jack hides it, and `--force` reaches it.
    public var isHiddenByJack: Bool { route.isBuiltIn && availability == .unavailable }

    /// There to be used: reachable, and not a jack known to be empty (a hidden built-in output still is).
    public var isAvailable: Bool { isReachable && (availability.isUsable || isHiddenByJack) }

    /// A Bluetooth sink whose card has already gone: the headset is disconnecting. Still the device
    /// (same id) while it lasts, but no longer one to route to or to count as present.
    public var isLeaving: Bool { cardName == nil && id.hasPrefix("bluez_card.") }

    /// Still a device of this machine: available, not a headset disconnecting, and not on a card
    /// switched `off` (a headset PulseAudio is removing, or a card a user turned off).
    public var isConnected: Bool { isAvailable && !isLeaving && cardProfile != "off" }

    /// Whether the output can carry a call (rule 8): a Bluetooth device only with a headset profile
    /// (HFP/HSP), the one with a microphone; an A2DP-only speaker cannot. One no card profile governs
    /// (a sink with Bluetooth's properties and no card) is taken at its word.
    public var takesCalls: Bool {
        route != .bluetooth || profiles.isEmpty || profiles.contains(where: Planner.isBluetoothHeadsetProfile)
    }

    /// Whether the output id `id` names an output of the card `card`: one of its ports
    /// (`CARD:PORT`), or the card itself (a Bluetooth headset's).
    public static func id(_ id: String, isOn card: String) -> Bool { id == card || id.hasPrefix(card + ":") }
}

/// The kind of an input, for listing: the built-in microphone, a headset's, a Bluetooth one, or other.
public enum InputKind: String, Sendable {
    case builtin, headset, bluetooth, unknown
}

public struct Input: Equatable, Sendable {
    /// `CARD:PORT` for one microphone of a card, else the source name (DESIGN.md §1).
    public var id: String
    public var kind: InputKind
    public var source: String
    public var sourceIndex: UInt32
    public var port: String?
    public var description: String
    public var availability: PortAvailability
    public var isDefault: Bool

    /// Whether the preferred input `id` (an input id, or a source name for its ports) names this one.
    public func isNamed(by id: String?) -> Bool { id == self.id || id == source }
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
    /// The default input's mute (the microphone's, not the output's); nil with no input.
    public var micMuted: Bool?

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
        micMuted = snapshot.defaultSource.flatMap { $0.isMonitor ? nil : $0.mute }
    }

    /// The external outputs present now, by a name that survives profile switches (card, else sink, and port).
    public var externalKeys: [String] {
        outputs.filter { $0.route.isExternal && $0.isAvailable }
            .map(\.id)
            .reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            .sorted()
    }

    /// The default source when it is an input (not a monitor).
    public var defaultInput: String? { inputs.first { $0.isDefault }?.source }

    /// The preferred input `id` while it can be used: present, and not a port whose jack is empty (the
    /// server would move the default input on to a monitor).
    public func usableInput(preferred id: String?) -> Input? {
        guard let input = inputs.first(where: { $0.isNamed(by: id) }), input.availability.isUsable else { return nil }
        return input
    }

    /// A built-in microphone that can be used, the default one first: the call's when its output's
    /// card has none (rule 8: the headset's microphone, else the built-in one).
    public var builtInMicrophone: Input? {
        let usable = inputs.filter { $0.kind == .builtin && $0.availability.isUsable }
        return usable.first { $0.isDefault } ?? usable.first
    }

    /// Whether an output of this kind could be used now (with a profile switch if need be).
    public func isAvailable(_ route: Route) -> Bool {
        outputs.contains { $0.route == route && $0.isAvailable }
    }

    /// The kinds with a usable output, in the order of `Route.allCases`.
    public var availableRoutes: [Route] { Route.allCases.filter { $0 != .unknown && isAvailable($0) } }

    static func outputs(of snapshot: Snapshot) -> [Output] {
        var outputs: [Output] = []
        var ids: Set<String> = []
        func add(_ output: Output) {
            if ids.insert(output.id).inserted { outputs.append(output) }
        }
        let defaultName = snapshot.server.defaultSinkName
        for sink in snapshot.sinks {
            let card = snapshot.card(of: sink)
            let isDefault = sink.name == defaultName
            let base = OutputFacts(sinkName: sink.name, sinkDescription: sink.description, driver: sink.driver,
                                   properties: sink.properties, card: card)
            // A Bluetooth device is one output whatever its profile: its card, with the sink's active port.
            // A sink whose card has already gone (a headset disconnecting) is still that device.
            let bluetoothCard = card.flatMap { Classifier.isBluetooth(base) ? $0 : nil }
            let bluetoothID = bluetoothCard?.name ?? (card == nil && Classifier.isBluetooth(base) ? bluetoothCardName(sink.properties) : nil)
            let ports: [Port?] = sink.ports.isEmpty ? [nil]
                : bluetoothID != nil ? [sink.activePortInfo ?? sink.ports[0]] : sink.ports
            for port in ports {
                var facts = base
                facts.port = port
                let cardPort = port.flatMap { p in card?.ports.first { $0.name == p.name } }
                facts.portProperties = cardPort?.properties ?? [:]
                let id = bluetoothID ?? cardPort.map { "\(card!.name):\($0.name)" }
                    ?? port.map { "\(sink.name):\($0.name)" } ?? sink.name
                // A card port is described by its card, which (unlike a UCM sink) keeps its name across profiles.
                let description = bluetoothCard.map(Status.description(of:))
                    ?? port.map { "\($0.description) (\(card.map(Status.description(of:)) ?? sink.description))" } ?? sink.description
                add(Output(route: Classifier.route(of: facts), sink: sink.name, sinkIndex: sink.index,
                           port: port?.name, description: description,
                           card: card?.index, cardName: card?.name, priority: port?.priority ?? 0,
                           // A Bluetooth device is reached under any of its card's profiles (PipeWire gives
                           // A2DP and HFP separate ports): all of them hold it.
                           profiles: card.map { Status.profiles(of: bluetoothCard == nil ? cardPort : nil, in: $0) } ?? [],
                           cardProfile: card?.activeProfile,
                           // pipewire-pulse can update a card port's availability a notification
                           // before the sink port's (WirePlumber reacts to the first): either says unplugged.
                           availability: cardPort?.port.availability == .unavailable ? .unavailable : port?.availability ?? .unknown,
                           isActive: isDefault && (port == nil || sink.activePort == port?.name || sink.activePort == nil),
                           id: id, isMuted: sink.mute,
                           isHardware: card != nil || sink.properties["device.class"] == "sound"))
            }
        }
        // Card ports that no current sink offers: reachable by switching the card's profile.
        for card in snapshot.cards {
            for cardPort in card.ports where cardPort.effectiveDirection == .output {
                let facts = OutputFacts(sinkName: nil, port: cardPort.port, portProperties: cardPort.properties, card: card)
                let route = Classifier.route(of: facts)
                add(Output(route: route, sink: nil, sinkIndex: nil, port: cardPort.name,
                           description: route == .bluetooth ? description(of: card) : "\(cardPort.port.description) (\(description(of: card)))",
                           card: card.index, cardName: card.name, priority: cardPort.port.priority,
                           profiles: Status.profiles(of: route == .bluetooth ? nil : cardPort, in: card), cardProfile: card.activeProfile,
                           availability: cardPort.port.availability,
                           isActive: false, id: route == .bluetooth ? card.name : "\(card.name):\(cardPort.name)",
                           isHardware: true))
            }
        }
        return outputs
    }

    static func description(of card: Card) -> String { card.properties["device.description"] ?? card.name }

    /// The card name both servers give a Bluetooth device (`bluez_card.00_11_22_33_44_55`), from its
    /// address in a sink's properties: for the moments a sink outlives its card.
    static func bluetoothCardName(_ properties: [String: String]) -> String? {
        guard let address = properties["api.bluez5.address"] ?? properties["device.string"],
              address.count == 17, address.filter({ $0 == ":" }).count == 5 else { return nil }
        return "bluez_card." + address.replacingColons()
    }

    /// The available profiles with a sink under which a card port exists, best server priority first.
    /// A port-less sink of a card is governed by the card's profiles with a sink.
    static func profiles(of cardPort: CardPort?, in card: Card) -> [String] {
        card.profiles
            .filter { $0.available && $0.sinks > 0 && (cardPort?.profiles.contains($0.name) ?? true) }
            .sorted { $0.priority > $1.priority }
            .map(\.name)
    }

    static func inputs(of snapshot: Snapshot) -> [Input] {
        var inputs: [Input] = []
        for source in snapshot.sources where !source.isMonitor {
            let card = snapshot.card(of: source)
            let isDefault = source.name == snapshot.server.defaultSourceName
            let ports: [Port?] = source.ports.isEmpty ? [nil] : source.ports
            for port in ports {
                let kind = inputKind(source: source, port: port, card: card)
                let cardPort = port.flatMap { p in card?.ports.first { $0.name == p.name } }
                let id = cardPort.map { "\(card!.name):\($0.name)" } ?? port.map { "\(source.name):\($0.name)" } ?? source.name
                inputs.append(Input(id: id, kind: kind, source: source.name, sourceIndex: source.index, port: port?.name,
                                    description: port.map { "\($0.description) (\(card.map(Status.description(of:)) ?? source.description))" }
                                        ?? source.description,
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
        let name = Folded(port?.name ?? "")
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
        // PulseAudio's Bluetooth sinks and sources carry their address in `device.string` only; their
        // card is named by it.
        guard let name = Status.bluetoothCardName(properties) else { return nil }
        return cards.first { $0.name == name }
    }
}

extension String {
    /// `00:11:22:33:44:55` as card names spell it: `00_11_22_33_44_55`.
    func replacingColons() -> String { String(map { $0 == ":" ? "_" : $0 }) }
}
