/// What is known about one output (a sink with one of its ports, a port-less sink, or a card port
/// reachable under another profile) that decides its route.
public struct OutputFacts: Sendable {
    public var sinkName: String?
    public var sinkDescription: String?
    public var driver: String
    public var properties: [String: String]
    public var port: Port?
    public var portProperties: [String: String]
    public var card: Card?

    public init(sinkName: String?, sinkDescription: String? = nil, driver: String = "",
                properties: [String: String] = [:], port: Port? = nil, portProperties: [String: String] = [:],
                card: Card? = nil) {
        self.sinkName = sinkName
        self.sinkDescription = sinkDescription
        self.driver = driver
        self.properties = properties
        self.port = port
        self.portProperties = portProperties
        self.card = card
    }

    /// A sink's or its card's property: sinks of PipeWire cards do not repeat every card property.
    func property(_ key: String) -> String? { properties[key] ?? card?.properties[key] }
}

/// The classifier of DESIGN.md §1: one pure function from an output's facts to its route.
///
/// The order is the contract: Bluetooth from the device first (a Bluetooth speaker's port is typed
/// Speaker), then the port type, then standard properties and port/sink names, and only then the
/// free-text descriptions, which are localised.
public enum Classifier {
    public static func route(of facts: OutputFacts) -> Route {
        if isBluetooth(facts) { return .bluetooth }
        if let type = facts.port?.type, let route = route(forPortType: type) { return route }
        if let route = routeFromProperties(facts) { return route }
        if let route = routeFromText(facts) { return route }
        return .unknown
    }

    static func isBluetooth(_ f: OutputFacts) -> Bool {
        if f.property("device.bus") == "bluetooth" { return true }
        if let api = f.property("device.api"), api == "bluez5" || api == "bluez" { return true }
        if let name = f.sinkName, name.hasPrefix("bluez_sink.") || name.hasPrefix("bluez_output.") { return true }
        if let card = f.card, card.name.hasPrefix("bluez_card.") || card.name.hasPrefix("bluez.") { return true }
        return f.port?.type == .bluetooth
    }

    /// A port type decides the route, says it is none of the four, or (nil) says nothing.
    static func route(forPortType type: PortType) -> Route? {
        switch type {
        case .speaker: return .speaker
        case .earpiece, .handset: return .receiver
        case .headphones, .headset, .handsfree: return .headset
        case .hdmi, .spdif, .line, .tv, .video, .radio, .network, .aux, .car, .hifi, .phone, .portable: return .unknown
        // Unknown, Analog, USB, Mic and numbers this build does not know say nothing about the output.
        default: return nil
        }
    }

    static func route(forFormFactor value: String) -> Route? {
        switch value {
        case "speaker": return .speaker
        case "handset": return .receiver
        case "headphone", "headset", "hands-free": return .headset
        case "tv", "computer", "hifi", "car", "webcam", "microphone", "portable": return .unknown
        default: return nil
        }
    }

    static func route(forPortName raw: String) -> Route? {
        let name = Folded(raw)
        // UCM: "[Out] Speaker", "[Out] Earpiece", "[Out] Headphones", "[Out] HDMI1", "[Out] Line1".
        var word = name
        if name.hasPrefix("[out] ") { word = name.dropFirst(6) }
        if word.hasPrefix("earpiece") || word.hasPrefix("handset") || word.hasPrefix("receiver") { return .receiver }
        if name.contains("headphone") || word.hasPrefix("headset") || name.contains("-headset") { return .headset }
        if name.contains("speaker") { return .speaker }
        if name.contains("hdmi") || name.contains("iec958") || name.contains("spdif") || name.contains("lineout")
            || name.contains("line-out") || word.hasPrefix("line") || name.contains("displayport") {
            return .unknown
        }
        return nil
    }

    static func routeFromProperties(_ f: OutputFacts) -> Route? {
        if let ff = f.property("device.form_factor"), let route = route(forFormFactor: ff) { return route }
        // PipeWire's ACP repeats the port type as a property of card ports ("port.type" = "headphones").
        if let t = f.portProperties["port.type"], let route = route(forPortName: t) { return route }
        if let name = f.port?.name, let route = route(forPortName: name) { return route }
        if let name = f.sinkName, let route = route(forSinkName: name) { return route }
        // Virtual sinks (null, combine, filters) are nothing a person would call a device.
        let cls = f.properties["device.class"]
        if cls == "abstract" || cls == "filter" || cls == "monitor" { return .unknown }
        if f.properties["factory.name"] == "support.null-audio-sink" { return .unknown }
        if f.driver.hasPrefix("module-null-sink") || f.driver.hasPrefix("module-combine-sink")
            || f.driver.hasPrefix("module-tunnel") || f.driver.hasPrefix("module-raop") {
            return .unknown
        }
        // `internal` alone says nothing: a line-out, a GPU's HDMI and a loopback are internal too.
        return nil
    }

    static func route(forSinkName raw: String) -> Route? {
        let name = Folded(raw)
        if name.contains("hdmi") || name.contains("iec958") || name.contains("displayport") { return .unknown }
        if name.hasPrefix("tunnel.") || name.hasPrefix("raop") || name.hasPrefix("combined") { return .unknown }
        return nil
    }

    /// The last resort: descriptions and card names, free text in the user's language.
    static func routeFromText(_ f: OutputFacts) -> Route? {
        let texts = [
            f.port?.description, f.sinkDescription, f.property("device.product.name"), f.property("device.description"),
            f.card?.name, f.property("alsa.card_name"),
        ]
        for case let text? in texts {
            let t = Folded(text)
            if t.contains("headphone") || t.contains("headset") || t.contains("earphone") || t.contains("earbud") { return .headset }
            if t.contains("earpiece") || t.contains("handset") { return .receiver }
            if t.contains("speaker") { return .speaker }
            if t.contains("hdmi") || t.contains("displayport") || t.contains("s/pdif") { return .unknown }
        }
        return nil
    }
}

/// An ASCII-lowercased copy of a name, searched byte by byte: `String.lowercased()` and
/// `String.contains` went through Unicode case mapping and the generic substring search, which
/// were most of `Status` on a server with hundreds of sinks. The words searched for are ASCII.
struct Folded {
    let bytes: ArraySlice<UInt8>

    init(_ text: String) {
        bytes = ArraySlice(text.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 })
    }

    private init(bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    func dropFirst(_ n: Int) -> Folded { Folded(bytes: bytes.dropFirst(n)) }

    func hasPrefix(_ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { p in bytes.count >= p.count && zip(bytes, p).allSatisfy { $0 == $1 } }
    }

    func contains(_ needle: StaticString) -> Bool {
        needle.withUTF8Buffer { n in
            guard n.count > 0, bytes.count >= n.count else { return n.count == 0 }
            let first = n[0]
            var i = bytes.startIndex
            let last = bytes.endIndex - n.count
            while i <= last {
                if bytes[i] == first {
                    var j = 1
                    while j < n.count, bytes[i + j] == n[j] { j += 1 }
                    if j == n.count { return true }
                }
                i += 1
            }
            return false
        }
    }
}
