/// Where sound actually comes out: the five states of the mobile model.
public enum Route: String, CaseIterable, Sendable {
    case speaker, receiver, bluetooth, headset, unknown

    /// Bluetooth and wired devices are external: they win while connected.
    public var isExternal: Bool { self == .bluetooth || self == .headset }

    /// The speaker and the receiver are part of the machine: a jack can hide them, never remove them.
    public var isBuiltIn: Bool { self == .speaker || self == .receiver }
}

/// What the user asks for. `speaker` and `earpiece` are the mobile model's built-in targets;
/// Linux can also address external devices.
public enum RouteTarget: String, CaseIterable, Sendable {
    case speaker, earpiece, bluetooth, headset

    /// The words `set` accepts, with `receiver` as an alias of `earpiece`.
    public static let words = ["speaker", "earpiece", "receiver", "bluetooth", "headset"]

    public init?(word: String) {
        if word == "receiver" { self = .earpiece; return }
        self.init(rawValue: word)
    }

    /// The target that asks for a route (none for `unknown`).
    public init?(route: Route) {
        switch route {
        case .speaker: self = .speaker
        case .receiver: self = .earpiece
        case .bluetooth: self = .bluetooth
        case .headset: self = .headset
        case .unknown: return nil
        }
    }

    /// The route this target is satisfied by.
    public var route: Route {
        switch self {
        case .speaker: return .speaker
        case .earpiece: return .receiver
        case .bluetooth: return .bluetooth
        case .headset: return .headset
        }
    }

    /// Only the built-in targets can be the persistent default.
    public var isBuiltIn: Bool { self == .speaker || self == .earpiece }
}
