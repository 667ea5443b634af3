/// The two layers of DESIGN.md §1: a persistent default under a temporary override.
public struct Preferences: Equatable, Sendable {
    /// The persistent default: a built-in target (`speaker` unless the user chose `earpiece`).
    public var defaultTarget: RouteTarget
    /// The temporary override, when one is set.
    public var override: RouteTarget?
    /// The preferred input (a source name), when one is set.
    public var preferredInput: String?

    public init(defaultTarget: RouteTarget = .speaker, override: RouteTarget? = nil, preferredInput: String? = nil) {
        self.defaultTarget = defaultTarget
        self.override = override
        self.preferredInput = preferredInput
    }

    /// effective target = override ?? default.
    public var effectiveTarget: RouteTarget { override ?? defaultTarget }
}
