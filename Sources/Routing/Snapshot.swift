/// Everything routectl knows about a sound server at one moment.
///
/// Its JSON form is the dump format (DESIGN.md §6): pactl's `-f json` member names and C-locale
/// spellings, so `LC_ALL=C pactl -f json list` with `server` added decodes as a snapshot.
public struct Snapshot: Equatable, Sendable {
    public var server: ServerInfo
    public var sinks: [Sink]
    public var sources: [Source]
    public var cards: [Card]
    public var sinkInputs: [SinkInput]
    public var sourceOutputs: [SourceOutput]
    /// routectl's own state, as `routectl dump` records it (DESIGN.md §4): with it, `--snapshot`
    /// answers from the file alone. Nil in a plain pactl capture.
    public var routectl: Preferences?
    /// With `routectl`: what `watch --apply` last did, and the other policies `why` reported.
    public var decision: DecisionRecord?
    public var policies: [String] = []
    /// With `routectl`: the profile each card that left during a call is owed (`profiles.json`).
    public var owedProfiles: [CallRecord.CardProfile] = []
    /// With `routectl`: when the override was set and the call began (ms since 1970), for the `since`
    /// that `why` and `call status` say.
    public var overrideSetAt: Int64?
    public var callStartedAt: Int64?
    /// With `routectl`: routectl's last announced move (`intent.json`), for `why`; the dump writes it
    /// without the moves it replaced.
    public var lastMove: RouteIntent?

    public init(server: ServerInfo, sinks: [Sink] = [], sources: [Source] = [], cards: [Card] = [],
                sinkInputs: [SinkInput] = [], sourceOutputs: [SourceOutput] = []) {
        self.server = server
        self.sinks = sinks
        self.sources = sources
        self.cards = cards
        self.sinkInputs = sinkInputs
        self.sourceOutputs = sourceOutputs
    }

    public var defaultSink: Sink? { sinks.first { $0.name == server.defaultSinkName } }
    public var defaultSource: Source? { sources.first { $0.name == server.defaultSourceName } }

    /// Whether the server is on its way back to the input `name` it stepped off: the source is still
    /// here, not the default, and either its port's jack was emptied while another of its ports can
    /// take over (the session manager switches ports), or it can be used and the default input is none
    /// (a monitor or nothing: the session manager picks it again once its port is switched).
    /// WirePlumber takes these steps on each microphone jack plugged or pulled.
    public func isReturning(toInput name: String?) -> Bool {
        guard let name, name != server.defaultSourceName,
              let source = sources.first(where: { $0.name == name && !$0.isMonitor }) else { return false }
        if let active = source.activePortInfo, !active.availability.isUsable {
            return source.ports.contains { $0.availability.isUsable }
        }
        return defaultSource?.isMonitor ?? true
    }
    public func card(index: UInt32?) -> Card? {
        guard let index else { return nil }
        return cards.first { $0.index == index }
    }
}

public struct ServerInfo: Equatable, Sendable {
    /// The server's own name: "pulseaudio", or "PulseAudio (on PipeWire 1.0.5)".
    public var name: String
    public var version: String
    public var defaultSinkName: String?
    public var defaultSourceName: String?
    public var serverString: String?
    public var hostName: String?

    public init(name: String, version: String, defaultSinkName: String? = nil, defaultSourceName: String? = nil,
                serverString: String? = nil, hostName: String? = nil) {
        self.name = name
        self.version = version
        self.defaultSinkName = defaultSinkName
        self.defaultSourceName = defaultSourceName
        self.serverString = serverString
        self.hostName = hostName
    }

    /// pipewire-pulse reports version 15.0.0 whatever PipeWire's is, so the name is what tells them apart.
    public var isPipeWire: Bool { Folded(name).contains("pipewire") }

    /// PipeWire's own version, from the name pipewire-pulse gives ("PulseAudio (on PipeWire 0.3.65)").
    public var pipeWireVersion: String? {
        let words = name.split(whereSeparator: { $0 == " " || $0 == "(" || $0 == ")" })
        guard let i = words.firstIndex(of: "PipeWire"), i + 1 < words.count else { return nil }
        return String(words[i + 1])
    }
}

/// pactl's C-locale spellings of `pa_port_available`.
public enum PortAvailability: String, Sendable {
    case unknown = "availability unknown"
    case available = "available"
    case unavailable = "not available"

    /// Unknown counts as usable: most ports that cannot sense a jack report it.
    public var isUsable: Bool { self != .unavailable }
}

/// A port type as pactl spells it (`pa_device_port_type_t`); new servers may add types, so any string is kept.
public struct PortType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let unknown = PortType(rawValue: "Unknown")
    public static let aux = PortType(rawValue: "Aux")
    public static let speaker = PortType(rawValue: "Speaker")
    public static let headphones = PortType(rawValue: "Headphones")
    public static let line = PortType(rawValue: "Line")
    public static let mic = PortType(rawValue: "Mic")
    public static let headset = PortType(rawValue: "Headset")
    public static let handset = PortType(rawValue: "Handset")
    public static let earpiece = PortType(rawValue: "Earpiece")
    public static let spdif = PortType(rawValue: "SPDIF")
    public static let hdmi = PortType(rawValue: "HDMI")
    public static let tv = PortType(rawValue: "TV")
    public static let radio = PortType(rawValue: "Radio")
    public static let video = PortType(rawValue: "Video")
    public static let usb = PortType(rawValue: "USB")
    public static let bluetooth = PortType(rawValue: "Bluetooth")
    public static let portable = PortType(rawValue: "Portable")
    public static let handsfree = PortType(rawValue: "Handsfree")
    public static let car = PortType(rawValue: "Car")
    public static let hifi = PortType(rawValue: "HiFi")
    public static let phone = PortType(rawValue: "Phone")
    public static let network = PortType(rawValue: "Network")
    public static let analog = PortType(rawValue: "Analog")

    /// pactl's spelling of each `PA_DEVICE_PORT_TYPE_*` number, in order; numbers past the end are "Unknown".
    public static let byNumber: [PortType] = [
        .unknown, .aux, .speaker, .headphones, .line, .mic, .headset, .handset, .earpiece, .spdif, .hdmi,
        .tv, .radio, .video, .usb, .bluetooth, .portable, .handsfree, .car, .hifi, .phone, .network, .analog,
    ]

    public init(number: UInt32) {
        self = Int(number) < PortType.byNumber.count ? PortType.byNumber[Int(number)] : .unknown
    }
}

/// A sink's or source's port.
public struct Port: Equatable, Sendable {
    public var name: String
    public var description: String
    public var type: PortType
    public var priority: UInt32
    public var availability: PortAvailability
    public var availabilityGroup: String?

    public init(name: String, description: String, type: PortType = .unknown, priority: UInt32 = 0,
                availability: PortAvailability = .unknown, availabilityGroup: String? = nil) {
        self.name = name
        self.description = description
        self.type = type
        self.priority = priority
        self.availability = availability
        self.availabilityGroup = availabilityGroup
    }
}

/// What tells a sink from a source in `Device` and `Stream`: the two have one shape in pactl's JSON
/// and in what routing reads, so they are one type with two names. `Kind` is one of these two, and
/// only a name: the types put no constraint on it, because a protocol requirement there is checked by
/// the runtime (a scan of every conformance record) the first time each type is used, in every run.
public enum SinkKind {}
public enum SourceKind {}

/// A sink or a source (`pa_sink_info` / `pa_source_info`).
public struct Device<Kind>: Equatable, Sendable {
    public var index: UInt32
    public var name: String
    public var description: String
    public var driver: String
    public var state: String
    public var mute: Bool
    public var ownerModule: UInt32?
    /// Added by routectl: the card this device belongs to (pactl's JSON has no such member).
    public var card: UInt32?
    /// pactl's `monitor_source`: a sink's monitor source; for a source, the sink it monitors (nil
    /// for a microphone).
    public var monitor: String?
    public var properties: [String: String]
    public var ports: [Port]
    public var activePort: String?

    public init(index: UInt32, name: String, description: String, driver: String = "", state: String = "IDLE",
                mute: Bool = false, ownerModule: UInt32? = nil, card: UInt32? = nil, monitor: String? = nil,
                properties: [String: String] = [:], ports: [Port] = [], activePort: String? = nil) {
        self.index = index
        self.name = name
        self.description = description
        self.driver = driver
        self.state = state
        self.mute = mute
        self.ownerModule = ownerModule
        self.card = card
        self.monitor = monitor
        self.properties = properties
        self.ports = ports
        self.activePort = activePort
    }

    public var activePortInfo: Port? { ports.first { $0.name == activePort } }
}

public typealias Sink = Device<SinkKind>
public typealias Source = Device<SourceKind>

extension Device where Kind == SinkKind {
    public init(index: UInt32, name: String, description: String, driver: String = "", state: String = "IDLE",
                mute: Bool = false, ownerModule: UInt32? = nil, card: UInt32? = nil, monitorSource: String?,
                properties: [String: String] = [:], ports: [Port] = [], activePort: String? = nil) {
        self.init(index: index, name: name, description: description, driver: driver, state: state, mute: mute,
                  ownerModule: ownerModule, card: card, monitor: monitorSource, properties: properties, ports: ports,
                  activePort: activePort)
    }

    /// The sink's monitor source.
    public var monitorSource: String? {
        get { monitor }
        set { monitor = newValue }
    }
}

extension Device where Kind == SourceKind {
    public init(index: UInt32, name: String, description: String, driver: String = "", state: String = "IDLE",
                mute: Bool = false, ownerModule: UInt32? = nil, card: UInt32? = nil, monitorOfSink: String?,
                properties: [String: String] = [:], ports: [Port] = [], activePort: String? = nil) {
        self.init(index: index, name: name, description: description, driver: driver, state: state, mute: mute,
                  ownerModule: ownerModule, card: card, monitor: monitorOfSink, properties: properties, ports: ports,
                  activePort: activePort)
    }

    /// The sink this source monitors; pactl prints it as the source's `monitor_source`.
    public var monitorOfSink: String? {
        get { monitor }
        set { monitor = newValue }
    }

    /// Monitor sources echo a sink; they are never microphones.
    public var isMonitor: Bool {
        monitor != nil || properties["device.class"] == "monitor"
    }
}

public struct Profile: Equatable, Sendable {
    public var name: String
    public var description: String
    public var sinks: UInt32
    public var sources: UInt32
    public var priority: UInt32
    public var available: Bool

    public init(name: String, description: String, sinks: UInt32 = 0, sources: UInt32 = 0, priority: UInt32 = 0,
                available: Bool = true) {
        self.name = name
        self.description = description
        self.sinks = sinks
        self.sources = sources
        self.priority = priority
        self.available = available
    }
}

public enum PortDirection: String, Sendable {
    case output, input
}

/// A card's port: unlike a sink's, it also says under which profiles it exists.
public struct CardPort: Equatable, Sendable {
    public var port: Port
    /// Added by routectl; pactl's JSON omits it, so it is inferred from the name when missing.
    public var direction: PortDirection?
    public var profiles: [String]
    public var properties: [String: String]

    public init(port: Port, direction: PortDirection? = nil, profiles: [String] = [], properties: [String: String] = [:]) {
        self.port = port
        self.direction = direction
        self.profiles = profiles
        self.properties = properties
    }

    public var name: String { port.name }

    /// The direction as reported, else as the port's name says it (`analog-output-*`, `[Out] *`).
    public var effectiveDirection: PortDirection? {
        if let direction { return direction }
        let n = Folded(port.name)
        if n.hasPrefix("[out]") || n.contains("output") || n.hasPrefix("out-") { return .output }
        if n.hasPrefix("[in]") || n.contains("input") || n.hasPrefix("in-") { return .input }
        return nil
    }
}

public struct Card: Equatable, Sendable {
    public var index: UInt32
    public var name: String
    public var driver: String
    public var ownerModule: UInt32?
    public var properties: [String: String]
    public var profiles: [Profile]
    public var activeProfile: String?
    public var ports: [CardPort]

    public init(index: UInt32, name: String, driver: String = "", ownerModule: UInt32? = nil,
                properties: [String: String] = [:], profiles: [Profile] = [], activeProfile: String? = nil,
                ports: [CardPort] = []) {
        self.index = index
        self.name = name
        self.driver = driver
        self.ownerModule = ownerModule
        self.properties = properties
        self.profiles = profiles
        self.activeProfile = activeProfile
        self.ports = ports
    }
}

/// A stream on a sink (playback) or a source (recording): one shape, two names, as with `Device`.
public struct Stream<Kind>: Equatable, Sendable {
    public var index: UInt32
    /// The index of the sink (playback) or source (recording) it is on.
    public var device: UInt32
    public var client: UInt32?
    public var corked: Bool
    public var mute: Bool
    public var properties: [String: String]

    public init(index: UInt32, device: UInt32, client: UInt32? = nil, corked: Bool = false, mute: Bool = false,
                properties: [String: String] = [:]) {
        self.index = index
        self.device = device
        self.client = client
        self.corked = corked
        self.mute = mute
        self.properties = properties
    }

    /// pactl's name for the member holding `device`.
    static var deviceKey: String { Kind.self == SinkKind.self ? "sink" : "source" }
}

/// A playback stream (`pa_sink_input_info`).
public typealias SinkInput = Stream<SinkKind>
/// A recording stream (`pa_source_output_info`).
public typealias SourceOutput = Stream<SourceKind>

extension Stream where Kind == SinkKind {
    public init(index: UInt32, sink: UInt32, client: UInt32? = nil, corked: Bool = false, mute: Bool = false,
                properties: [String: String] = [:]) {
        self.init(index: index, device: sink, client: client, corked: corked, mute: mute, properties: properties)
    }

    /// The sink it plays on.
    public var sink: UInt32 {
        get { device }
        set { device = newValue }
    }
}

extension Stream where Kind == SourceKind {
    public init(index: UInt32, source: UInt32, client: UInt32? = nil, corked: Bool = false, mute: Bool = false,
                properties: [String: String] = [:]) {
        self.init(index: index, device: source, client: client, corked: corked, mute: mute, properties: properties)
    }

    /// The source it records from.
    public var source: UInt32 {
        get { device }
        set { device = newValue }
    }
}
