/// The values routectl keeps between runs, as plain Swift: Store reads and writes them
/// (Sources/Store), the rules and the commands use them.

/// The temporary override as stored: the target, when it was set, and the external outputs present
/// then, so that a plug or unplug since then clears it even when nothing was watching.
public struct OverrideRecord: Equatable, Sendable {
    public var target: RouteTarget
    public var device: String?
    public var setAt: Int64
    public var externals: [String]

    public init(target: RouteTarget, device: String? = nil, setAt: Int64, externals: [String]) {
        self.target = target
        self.device = device
        self.setAt = setAt
        self.externals = externals.sorted()
    }

    /// Why the override no longer holds, or nil while the same external outputs are present.
    public func staleness(currentExternals: [String]) -> String? {
        let then = Set(externals), now = Set(currentExternals)
        if then == now { return nil }
        if let added = now.subtracting(then).sorted().first { return "'\(added)' was connected" }
        return "'\(then.subtracting(now).sorted().first!)' was disconnected"
    }
}

/// What routectl itself is about to do to the route, written before it acts, so that a watcher that
/// sees the switch reports routectl's reason (`override`, or the device change `watch --apply`
/// answered) instead of taking it for another client's (`route-configuration-change`).
public struct RouteIntent: Equatable, Sendable {
    /// The id of the output the route is being moved to.
    public var output: String
    public var reason: RouteChangeReason
    /// When, in milliseconds of the real-time clock.
    public var at: Int64
    /// The command has finished (read the route back, or given up).
    public var done: Bool
    /// The other moves announced in the last few seconds, the one this replaced first (`superseding`).
    public var earlier: [RouteIntent]

    public init(output: String, reason: RouteChangeReason, at: Int64, done: Bool = false, earlier: [RouteIntent] = []) {
        self.output = output
        self.reason = reason
        self.at = at
        self.done = done
        self.earlier = earlier
    }

    /// How long (ms) a move stays in `earlier` after it began, and how many are kept.
    public static let earlierKept: Int64 = 5000
    public static let earlierCount = 3

    /// This intent as written over `previous`, the one on disk: the other moves of the last few
    /// seconds are kept, so that a watcher slower than the commands still finds the move behind a
    /// change it sees late (a `set` whose route event it handles only after `watch --apply` has
    /// announced the fallback from it). The intent written is the latest, also when it marks done a
    /// move that another one announced after it (that one is kept among the earlier).
    public func superseding(_ previous: RouteIntent?) -> RouteIntent {
        var intent = self
        intent.earlier = []
        guard let previous else { return intent }
        var moved = previous
        moved.earlier = []
        intent.earlier = Array(([moved] + previous.earlier)
            .filter { ($0.at != at || $0.output != output) && at - $0.at <= Self.earlierKept }
            .prefix(Self.earlierCount))
        return intent
    }
}

/// The persistent layer: kept across reboots.
public struct PersistentState: Equatable, Sendable {
    public var defaultTarget: RouteTarget
    public var preferredInput: String?
    /// The priority list: output ids or kinds (`bluetooth`, `headset`), best first.
    public var priority: [String]

    public init(defaultTarget: RouteTarget = .speaker, preferredInput: String? = nil, priority: [String] = []) {
        self.defaultTarget = defaultTarget
        self.preferredInput = preferredInput
        self.priority = priority
    }

    /// What an id the command line or the list takes may be: 1 to 1024 bytes, no control characters.
    public static func isWellFormed(id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 1024 && !id.unicodeScalars.contains(where: Events.isControl)
    }
    public static let idRule = "an id is 1 to 1024 bytes without control characters"
}

/// A call in progress (DESIGN.md rule 8), as `call.json` keeps it: when it began, whether it is on the
/// speaker, and what the call changed, so that `call end` (from any shell, after a crash too) puts
/// every card profile, the route, the override and the microphone back as they were.
public struct CallRecord: Equatable, Sendable {
    /// One card's profile before the call.
    public struct CardProfile: Equatable, Sendable {
        public var card: String
        public var profile: String

        public init(card: String, profile: String) {
            self.card = card
            self.profile = profile
        }

        /// A list as `call.json`, `profiles.json` and the dump write it: `[{"card": ..., "profile": ...}]`.
        public static func json(_ profiles: [Self]) -> JSON {
            .array(profiles.map { .object([("card", .string($0.card)), ("profile", .string($0.profile))]) })
        }
    }

    /// A microphone mute routectl set, and when (milliseconds of the real-time clock).
    public struct Mute: Equatable, Sendable {
        public var muted: Bool
        public var at: Int64

        public init(muted: Bool, at: Int64) {
            self.muted = muted
            self.at = at
        }
    }

    /// When the call began, in milliseconds of the real-time clock.
    public var startedAt: Int64
    /// `call start --speaker` (or the phone UI's speaker button): the call's target is the speaker.
    public var speaker: Bool
    public var profiles: [CardProfile]
    /// The output in use before the call (its id), and the default sink and source then.
    public var output: String?
    public var defaultSink: String?
    public var defaultSource: String?
    /// The default source's mute before the call.
    public var micMuted: Bool?
    /// The call's own microphone (a Voice Call or headset source) and its mute as the call found it,
    /// before routectl made it live: put back at the end, before its profile goes.
    public var callSource: String?
    public var callSourceMuted: Bool?
    /// The call's microphone mute as routectl last set it (`call start`, `input mute`, D-Bus MuteMic),
    /// and when: `watch --apply` keeps it on the call's input as that moves. Nil in a record written
    /// before routectl kept it.
    public var callMute: Mute?
    /// The override in force before the call: set aside for the call, put back at its end.
    public var override: OverrideRecord?
    /// The external outputs present when the call began: the route before the call is restored only
    /// when none came or went meanwhile (else the rules decide).
    public var externals: [String]
    /// The inputs (ids) that could be used when the call began: a preferred input that came during the
    /// call stands at its end. Nil in a record written before routectl kept it.
    public var inputs: [String]?
    /// False while `call start` is still applying the call's route (the record is saved first, so that
    /// a crash on the way can be undone): watchers report the call once it is applied, after its route.
    public var applied: Bool

    public init(startedAt: Int64, speaker: Bool, profiles: [CardProfile] = [], output: String? = nil, defaultSink: String? = nil,
                defaultSource: String? = nil, micMuted: Bool? = nil, callSource: String? = nil, callSourceMuted: Bool? = nil,
                callMute: Mute? = nil, override: OverrideRecord? = nil, externals: [String] = [], inputs: [String]? = nil, applied: Bool = true) {
        self.applied = applied
        self.startedAt = startedAt
        self.speaker = speaker
        self.profiles = profiles
        self.output = output
        self.defaultSink = defaultSink
        self.defaultSource = defaultSource
        self.micMuted = micMuted
        self.callSource = callSource
        self.callSourceMuted = callSourceMuted
        self.callMute = callMute
        self.override = override
        self.externals = externals.sorted()
        self.inputs = inputs
    }

    /// The call's built-in target: the receiver, or the speaker.
    public var target: RouteTarget { speaker ? .speaker : .earpiece }

    /// The call counts as begun for watchers: applied, or started so long ago (a minute: far beyond
    /// what a start's timeouts allow) that the `call start` applying it died on the way.
    public func isBegun(now: Int64) -> Bool { applied || now - startedAt > 60_000 }
}

/// What `watch --apply` last did to the route (`decision.json`), for `why`: the reason, what caused
/// it, where the route went, and when.
public struct DecisionRecord: Equatable, Sendable {
    public var reason: RouteChangeReason
    public var cause: String?
    public var output: String?
    /// Milliseconds of the real-time clock.
    public var at: Int64
    /// For another client's pick that the watcher respected: the external outputs present then
    /// (`Status.externalKeys`), so that a watcher starting later knows whether a device came or went since.
    public var externals: [String]?

    public init(reason: RouteChangeReason, cause: String? = nil, output: String? = nil, at: Int64, externals: [String]? = nil) {
        self.reason = reason
        self.cause = cause
        self.output = output
        self.at = at
        self.externals = externals?.sorted()
    }

    /// Another client's pick of `output` that a watcher respected, made during the call that began at
    /// `callStart` (milliseconds, as `at`).
    public func isPick(of output: String, duringCallFrom callStart: Int64) -> Bool {
        reason == .routeConfigurationChange && self.output == output && at >= callStart
    }
}
