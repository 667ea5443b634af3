/// The two layers of DESIGN.md §1: a persistent default under a temporary override.
public struct Preferences: Equatable, Sendable {
    /// The persistent default: a built-in target (`speaker` unless the user chose `earpiece`).
    public var defaultTarget: RouteTarget
    /// The temporary override, when one is set.
    public var override: RouteTarget?
    /// The preferred input (a source name), when one is set.
    public var preferredInput: String?
    /// During a call (rule 8), the call's built-in target: the receiver, or the speaker after
    /// `call start --speaker`. It stands in for the default until the call ends.
    public var callTarget: RouteTarget?
    /// The priority list (DESIGN.md §1 "Desktop policy"): output ids or kinds, best first; empty: none.
    public var priority: [String]

    public init(defaultTarget: RouteTarget = .speaker, override: RouteTarget? = nil, preferredInput: String? = nil,
                callTarget: RouteTarget? = nil, priority: [String] = []) {
        self.defaultTarget = defaultTarget
        self.override = override
        self.preferredInput = preferredInput
        self.callTarget = callTarget
        self.priority = priority
    }

    public var inCall: Bool { callTarget != nil }

    /// What the route falls back to when no override holds: the call's target during a call, else the default.
    public var baseTarget: RouteTarget { callTarget ?? defaultTarget }

    /// effective target = override ?? (call target during a call) ?? default.
    public var effectiveTarget: RouteTarget { override ?? baseTarget }
}
