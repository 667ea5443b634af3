/// Why the route changed (DESIGN.md §1), computed in one place: `Events.diff`.
public enum RouteChangeReason: String, Sendable, CaseIterable {
    case initial
    case newDeviceAvailable = "new-device-available"
    case oldDeviceUnavailable = "old-device-unavailable"
    case override
    case categoryChange = "category-change"
    case routeConfigurationChange = "route-configuration-change"
    case noSuitableRoute = "no-suitable-route"
    case wakeFromSleep = "wake-from-sleep"
    /// routectl's desktop policy put the route back after the server moved it (an unlisted HDMI output
    /// made the default as it appeared).
    case restored
    /// `call start` or `call end` moved it.
    case call
    case unknown
}

/// One line of `routectl watch`.
public enum Event: Equatable, Sendable {
    case route(route: Route, previous: Route?, reason: RouteChangeReason, output: Output?)
    case deviceAdded(Output)
    case deviceRemoved(Output)
    case overrideCleared(override: RouteTarget, cause: String)
    case interrupted(reason: String)
    case recovered(route: Route, output: Output?)
    case engaged(Bool)
    case otherAudio(playing: Bool)
    /// The default input or its mute changed (`micMuted` nil: no input). `sourceChanged`: the input
    /// itself changed, from `previous` (nil: from none); false when only the mute changed.
    case input(source: String?, previous: String?, sourceChanged: Bool, micMuted: Bool?)
    /// Call mode began or ended (rule 8), with the route then.
    case call(active: Bool, route: Route)
    /// A device left and came back within the hold-down: one flicker, not an unplug and a plug.
    case flicker(Output, awayMilliseconds: Int)
    /// A slow reader made `watch` drop this many events (the policy never waits on a reader).
    case lost(count: Int)

    public var type: String {
        switch self {
        case .route: return "route"
        case .deviceAdded: return "device-added"
        case .deviceRemoved: return "device-removed"
        case .overrideCleared: return "override-cleared"
        case .interrupted: return "interrupted"
        case .recovered: return "recovered"
        case .engaged: return "engaged"
        case .otherAudio: return "other-audio"
        case .input: return "input"
        case .call: return "call"
        case .flicker: return "flicker"
        case .lost: return "lost"
        }
    }
}

/// What changed between two snapshots, which the policy and the events both read.
public struct Change: Sendable {
    public var previous: Status
    public var current: Status
    /// Outputs that became usable (a sink appeared, a jack was plugged), and the reverse.
    public var added: [Output]
    public var removed: [Output]
    /// Cards whose active profile changed to another one that plays (a flip: A2DP <-> HFP, HiFi <-> Voice Call).
    public var profileChanged: Set<String>

    public init(previous: Snapshot, current: Snapshot) {
        self.previous = Status(snapshot: previous)
        self.current = Status(snapshot: current)
        let before = Change.present(self.previous), after = Change.present(self.current)
        added = Change.unique(self.current.outputs.filter { after.contains($0.id) && !before.contains($0.id) })
        removed = Change.unique(self.previous.outputs.filter { before.contains($0.id) && !after.contains($0.id) })
        var changed: Set<String> = []
        for card in current.cards where card.activeProfile != "off" {
            if let old = previous.cards.first(where: { $0.name == card.name }), old.activeProfile != card.activeProfile {
                changed.insert(card.name)
            }
        }
        profileChanged = changed
    }

    /// The outputs there to be used: on a sink or behind a profile switch, and not a jack known to
    /// be empty. A built-in output hidden by a plugged jack is still there (no device-removed). A card
    /// switched `off` has none: a Bluetooth headset disconnecting (PulseAudio turns its card off
    /// before removing it) or a card a user turned off is going, not flipping profile.
    /// PulseAudio's module-always-sink placeholder ("Dummy Output") appears for the moments a card
    /// has no sink (during a profile switch) and stands for no output at all: it is no device.
    static func present(_ status: Status) -> Set<String> {
        Set(status.outputs.filter { $0.isConnected && $0.sink != "auto_null" }.map(\.id))
    }

    /// One output per id (a Bluetooth card with two sinks is one device).
    static func unique(_ outputs: [Output]) -> [Output] {
        var seen: Set<String> = []
        return outputs.filter { $0.isAvailable && seen.insert($0.id).inserted }
    }

    /// The route moved: another kind, another output, or the same output on another sink (a profile
    /// switch replaced the sink: another name on PulseAudio, another index on PipeWire).
    public var routeChanged: Bool {
        previous.route != current.route || previous.output?.id != current.output?.id
            || previous.output?.sink != current.output?.sink || previous.output?.sinkIndex != current.output?.sinkIndex
    }
}

public enum Events {
    /// A control character a terminal may act on: C0, DEL and C1.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value)
    }

    /// Text a device or server supplied, safe on one line of `watch`'s text output: control
    /// characters, quotes and backslashes are escaped, so a description cannot end the line or fake
    /// another event. JSON escapes on its own.
    public static func escapedForLine(_ text: String) -> String { escaped(text, quotes: true) }

    /// Text a device or server supplied, safe to print in a table or as a `query` value: its control
    /// characters escaped (a terminal would act on them), quotes left as they are.
    public static func printable(_ text: String) -> String {
        // Most text has none: C0 and DEL are single bytes, C1 starts with 0xC2.
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }) else { return text }
        return escaped(text, quotes: false)
    }

    static func escaped(_ text: String, quotes: Bool) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\"" where quotes: out += "\\\""
            case "\\" where quotes: out += "\\\\"
            default:
                if isControl(scalar) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    /// The events of one change. `ownTarget` is the output routectl itself just switched to, if any,
    /// with the reason it did so (`override` for `set`, or the device change the policy answered).
    ///
    /// `recentlyAdded` holds the outputs that appeared shortly before this change: a server that marks
    /// a jack plugged in one notification and switches to it in the next (WirePlumber, PulseAudio's
    /// port-available module) still has its switch reported as the device's arrival.
    public static func diff(_ change: Change, own: (outputID: String, reason: RouteChangeReason)? = nil,
                            recentlyAdded: Set<String> = []) -> [Event] {
        var events: [Event] = change.added.map(Event.deviceAdded) + change.removed.map(Event.deviceRemoved)
        if change.routeChanged {
            events.append(.route(route: change.current.route, previous: change.previous.route,
                                 reason: reason(change, own: own, recentlyAdded: recentlyAdded), output: change.current.output))
        }
        if change.previous.engaged != change.current.engaged { events.append(.engaged(change.current.engaged)) }
        if change.previous.otherAudioPlaying != change.current.otherAudioPlaying {
            events.append(.otherAudio(playing: change.current.otherAudioPlaying))
        }
        // Monitor sources are not inputs: a default that moves between monitors is no input change.
        let before = change.previous.defaultInput, after = change.current.defaultInput
        if before != after || change.previous.micMuted != change.current.micMuted {
            events.append(.input(source: after, previous: before == after ? nil : before, sourceChanged: before != after,
                                 micMuted: change.current.micMuted))
        }
        return events
    }

    /// One rule for every output, whoever switched: an output appearing that takes the route is
    /// `new-device-available`; the output in use going away (now, or already marked unplugged while
    /// still selected) is `old-device-unavailable`.
    public static func reason(_ change: Change, own: (outputID: String, reason: RouteChangeReason)?,
                              recentlyAdded: Set<String> = []) -> RouteChangeReason {
        let current = change.current.output, previous = change.previous.output
        if let own, current?.id == own.outputID { return own.reason }
        guard let current else { return .noSuitableRoute }
        if change.added.contains(where: { $0.id == current.id }) || recentlyAdded.contains(current.id) { return .newDeviceAvailable }
        if let previous, change.removed.contains(where: { $0.id == previous.id }) || !previous.isAvailable
            || !change.current.outputs.contains(where: { $0.id == previous.id && $0.isAvailable }) {
            return .oldDeviceUnavailable
        }
        if let card = current.cardName, change.profileChanged.contains(card) { return .categoryChange }
        if let card = previous?.cardName, change.profileChanged.contains(card) { return .categoryChange }
        if change.previous.server.defaultSinkName != change.current.server.defaultSinkName
            || previous?.sink == current.sink {
            // The default sink or the active port changed with no device coming or going: another client.
            return .routeConfigurationChange
        }
        return .unknown
    }
}
