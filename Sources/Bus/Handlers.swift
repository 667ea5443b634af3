internal import CSystemd
import Glibc

/// What sd-bus calls from inside `sd_bus_process`: the method handler and the property getter that
/// both vtables share (CSystemd.h), dispatched on the interface and member.
extension BusService {
    /// The targets `Set` takes: the command line's, with `receiver` (what the Route property says)
    /// for the earpiece, so a status bar can hand a route back.
    static let targets: Set<String> = ["speaker", "earpiece", "receiver", "bluetooth", "headset"]

    /// Checks the call's arguments and holds it for the owner: 1 (answered later), or an error now.
    /// sd-bus has already checked the signature against the vtable.
    func handle(_ message: OpaquePointer?, _ error: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        guard let message, let member = sd_bus_message_get_member(message).map({ String(cString: $0) }) else {
            return -EINVAL
        }
        let request: BusRequest
        switch member {
        case "Set":
            let target = readString(message)
            let force = readBool(message)
            guard let target, let force else { return -EINVAL }
            guard BusService.targets.contains(target) else {
                let valid = BusService.targets.sorted().joined(separator: ", ")
                return sd_bus_error_set(error, BusService.invalidArgsError, "Unknown target '\(target)': use one of \(valid)")
            }
            request = .set(target: target, force: force)
        case "Clear": request = .clear
        case "CallStart":
            guard let speaker = readBool(message) else { return -EINVAL }
            request = .callStart(speaker: speaker)
        case "CallEnd": request = .callEnd
        case "SelectMode":
            // callaudiod's XML: a mode other than 0 (default) or 1 (call) is InvalidArgs.
            guard let mode = readUInt32(message) else { return -EINVAL }
            guard mode <= 1 else {
                return sd_bus_error_set(error, BusService.invalidArgsError, "Invalid mode \(mode): 0 is default, 1 is call")
            }
            request = .selectMode(mode)
        case "EnableSpeaker":
            guard let enable = readBool(message) else { return -EINVAL }
            request = .enableSpeaker(enable)
        case "MuteMic":
            guard let mute = readBool(message) else { return -EINVAL }
            request = .muteMic(mute)
        default:
            return sd_bus_error_set(error, "org.freedesktop.DBus.Error.UnknownMethod", "No method \(member)")
        }
        queue.append(PendingCall(request: request, message: message))
        queuedWork = true
        return 1
    }

    /// Appends the property's published value to `reply`. The corresponding C function is
    /// `sd_bus_message_append_basic`.
    func get(_ property: UnsafePointer<CChar>?, into reply: OpaquePointer?) -> Int32 {
        guard let property else { return -EINVAL }
        switch String(cString: property) {
        case "Route": return append(state.route, to: reply)
        case "Target": return append(state.target, to: reply)
        case "Override": return append(state.override, to: reply)
        case "Call": return append(state.call, to: reply)
        case "MicMuted": return append(state.micMuted, to: reply)
        case "AudioMode": return append(state.audioMode, to: reply)
        case "SpeakerState": return append(state.speakerState, to: reply)
        case "MicState": return append(state.micState, to: reply)
        default: return -ENOENT
        }
    }

    private func append(_ value: String, to reply: OpaquePointer?) -> Int32 {
        value.withCString { sd_bus_message_append_basic(reply, Signature.string, $0) }
    }

    private func append(_ value: Bool, to reply: OpaquePointer?) -> Int32 {
        var b: Int32 = value ? 1 : 0
        return sd_bus_message_append_basic(reply, Signature.boolean, &b)
    }

    private func append(_ value: UInt32, to reply: OpaquePointer?) -> Int32 {
        var u = value
        return sd_bus_message_append_basic(reply, Signature.uint32, &u)
    }

    /// The corresponding C function is `sd_bus_message_read_basic` (the string is the message's own,
    /// copied here before the message goes).
    private func readString(_ message: OpaquePointer) -> String? {
        var value: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, Signature.string, &value) > 0, let value else { return nil }
        return String(cString: value)
    }

    private func readBool(_ message: OpaquePointer) -> Bool? {
        var value: Int32 = 0
        guard sd_bus_message_read_basic(message, Signature.boolean, &value) > 0 else { return nil }
        return value != 0
    }

    private func readUInt32(_ message: OpaquePointer) -> UInt32? {
        var value: UInt32 = 0
        guard sd_bus_message_read_basic(message, Signature.uint32, &value) > 0 else { return nil }
        return value
    }
}
