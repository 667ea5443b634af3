/// What the D-Bus properties show, for both objects. Only ever a state read back from the sound
/// server (DESIGN §5): the owner publishes it after each action and change, never what it asked for.
public struct BusState: Equatable, Sendable {
    /// io.github.routectl: the current route (speaker, receiver, bluetooth, headset, unknown).
    public var route: String
    /// The effective target (the override, else the default).
    public var target: String
    /// The temporary override, "" when none.
    public var override: String
    /// Whether a call is in progress (`call start`).
    public var call: Bool
    public var micMuted: Bool
    /// org.mobian_project.CallAudio, in callaudiod's numbers: 0 default, 1 call, 255 unknown.
    public var audioMode: UInt32
    /// 0 off, 1 on, 255 unknown.
    public var speakerState: UInt32
    /// 0 off (muted), 1 on (the mic is live), 255 unknown.
    public var micState: UInt32

    public init(route: String, target: String, override: String, call: Bool, micMuted: Bool,
                audioMode: UInt32, speakerState: UInt32, micState: UInt32) {
        self.route = route
        self.target = target
        self.override = override
        self.call = call
        self.micMuted = micMuted
        self.audioMode = audioMode
        self.speakerState = speakerState
        self.micState = micState
    }

    /// What the properties read before the first publish: nothing has been read back yet.
    public static let unknown = BusState(route: "unknown", target: "unknown", override: "", call: false,
                                         micMuted: false, audioMode: 255, speakerState: 255, micState: 255)
}

/// A method call, its arguments already checked (a bad one was refused with InvalidArgs).
public enum BusRequest: Equatable, Sendable {
    /// io.github.routectl: answered with `PendingCall.reply(route:)`.
    case set(target: String, force: Bool), clear, callStart(speaker: Bool), callEnd
    /// org.mobian_project.CallAudio: answered with `PendingCall.reply(success:)`.
    case selectMode(UInt32), enableSpeaker(Bool), muteMic(Bool)

    /// True for routectl's own interface, whose methods return the route.
    public var returnsRoute: Bool {
        switch self {
        case .set, .clear, .callStart, .callEnd: return true
        case .selectMode, .enableSpeaker, .muteMic: return false
        }
    }
}
