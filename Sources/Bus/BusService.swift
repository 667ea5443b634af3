internal import CSystemd
import Glibc
import Routing

/// routectl on D-Bus: its own interface for status bars and applets, and a drop-in for callaudiod's,
/// served on one connection from the sound server's main loop (`LoopSource`).
///
/// Method calls are not carried out here: the work needs the sound server, whose loop is the one
/// this runs in, so a call is checked, queued as a `PendingCall` and answered by the owner once the
/// route is read back. Properties show only what the owner published. Not thread-safe: one thread
/// owns the loop, the connection and every call.
public final class BusService {
    /// routectl's own name, object path and interface (the man page documents them).
    public static let name = "io.github.routectl"
    public static let objectPath = "/io/github/routectl"
    public static let interface = "io.github.routectl"
    /// callaudiod 0.1.x's name, path and interface, served only when the name was free.
    public static let callAudioName = "org.mobian_project.CallAudio"
    public static let callAudioPath = "/org/mobian_project/CallAudio"
    public static let callAudioInterface = "org.mobian_project.CallAudio"

    /// The error a call left unanswered gets.
    static let failedError = "org.freedesktop.DBus.Error.Failed"
    static let invalidArgsError = "org.freedesktop.DBus.Error.InvalidArgs"

    let bus: OpaquePointer
    /// The vtables sd-bus reads for as long as the objects are registered (CSystemd.h).
    private let ownTable: UnsafeMutablePointer<sd_bus_vtable>
    private let callAudioTable: UnsafeMutablePointer<sd_bus_vtable>
    private var ownSlot: OpaquePointer?
    private var callAudioSlot: OpaquePointer?

    /// What the getters answer: the last published state.
    var state = BusState.unknown
    private var published = false
    /// Calls checked and held since the last `takeRequests`, in arrival order.
    var queue: [PendingCall] = []
    /// Set by the method handler during `process`: the owner has work.
    var queuedWork = false

    /// False when another program (callaudiod) owned org.mobian_project.CallAudio at start, or the
    /// drop-in was not asked for; only routectl's own interface is served then.
    public private(set) var ownsCallAudio = false
    /// The unique name of the program that owned org.mobian_project.CallAudio instead (":1.42").
    public private(set) var callAudioOwner: String?
    /// Why the connection ended, once it has (the bus went away): nothing is served after that.
    public internal(set) var lostError: BusError?

    /// Connects to the bus at `address` (nil: the user's session bus, by `DBUS_SESSION_BUS_ADDRESS`
    /// or the runtime dir), serves routectl's interface under its name and, when `callAudio`, the
    /// drop-in under callaudiod's if that is free. Names are requested without queueing, so the
    /// outcome is known here: routectl's own name taken is an error; callaudiod's is not.
    public init(address: String?, callAudio: Bool) throws(BusError) {
        bus = try BusService.connect(address: address)
        ownTable = .allocate(capacity: Int(CSystemd_routectl_vtable_length))
        callAudioTable = .allocate(capacity: Int(CSystemd_callaudio_vtable_length))
        let me = Unmanaged.passUnretained(self).toOpaque()
        CSystemd_routectl_vtable(ownTable, { message, userdata, error in
            Unmanaged<BusService>.fromOpaque(userdata!).takeUnretainedValue().handle(message, error)
        }, { _, _, _, property, reply, userdata, _ in
            Unmanaged<BusService>.fromOpaque(userdata!).takeUnretainedValue().get(property, into: reply)
        })
        CSystemd_callaudio_vtable(callAudioTable, { message, userdata, error in
            Unmanaged<BusService>.fromOpaque(userdata!).takeUnretainedValue().handle(message, error)
        }, { _, _, _, property, reply, userdata, _ in
            Unmanaged<BusService>.fromOpaque(userdata!).takeUnretainedValue().get(property, into: reply)
        })

        // Objects first, then the name: once the name is ours, calls find the objects there.
        var r = sd_bus_add_object_vtable(bus, &ownSlot, BusService.objectPath, BusService.interface, ownTable, me)
        guard r >= 0 else { throw BusError(operation: "cannot serve \(BusService.objectPath)", code: r) }
        r = sd_bus_request_name(bus, BusService.name, 0)
        if r == -EEXIST { throw BusError.nameTaken(BusService.name) }
        guard r >= 0 else { throw BusError(operation: "cannot own the name \(BusService.name)", code: r) }

        guard callAudio else { return }
        r = sd_bus_add_object_vtable(bus, &callAudioSlot, BusService.callAudioPath, BusService.callAudioInterface,
                                     callAudioTable, me)
        guard r >= 0 else { throw BusError(operation: "cannot serve \(BusService.callAudioPath)", code: r) }
        r = sd_bus_request_name(bus, BusService.callAudioName, 0)
        if r > 0 {
            ownsCallAudio = true
        } else {
            // Taken (callaudiod runs) or refused: not a reason to stop serving routectl's interface.
            callAudioSlot = sd_bus_slot_unref(callAudioSlot)
            callAudioOwner = owner(of: BusService.callAudioName)
        }
    }

    /// The corresponding C functions are `sd_bus_open_user`, or `sd_bus_set_address` and `sd_bus_start`.
    private static func connect(address: String?) throws(BusError) -> OpaquePointer {
        var made: OpaquePointer?
        let what = address.map { "cannot connect to the bus at \($0)" } ?? "cannot connect to the session bus"
        if let address {
            var r = sd_bus_new(&made)
            if r >= 0 { r = sd_bus_set_address(made, address) }
            if r >= 0 { r = sd_bus_set_bus_client(made, 1) }
            if r >= 0 { r = sd_bus_start(made) }
            guard r >= 0, let made else {
                sd_bus_unref(made)
                throw BusError(operation: what, code: r)
            }
            return made
        }
        let r = sd_bus_open_user(&made)
        guard r >= 0, let made else { throw BusError(operation: what, code: r) }
        return made
    }

    /// The unique name that owns `name` now, if the bus tells. The corresponding C function is
    /// `sd_bus_get_name_creds` (the bus's GetNameOwner).
    private func owner(of name: String) -> String? {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_UNIQUE_NAME), &creds) >= 0 else { return nil }
        defer { sd_bus_creds_unref(creds) }
        var unique: UnsafePointer<CChar>?
        guard sd_bus_creds_get_unique_name(creds, &unique) >= 0, let unique else { return nil }
        return String(cString: unique)
    }

    /// Who owns these names on the user's session bus now, as (name, unique name, pid), for `why`;
    /// empty when there is no session bus. Opens its own short-lived connection.
    public static func owners(of names: [String]) -> [(name: String, unique: String, pid: Int32?)] {
        var bus: OpaquePointer?
        guard sd_bus_open_user(&bus) >= 0, let bus else { return [] }
        defer { sd_bus_flush_close_unref(bus) }
        var found: [(name: String, unique: String, pid: Int32?)] = []
        for name in names {
            var creds: OpaquePointer?
            guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_UNIQUE_NAME) | UInt64(SD_BUS_CREDS_PID), &creds) >= 0 else { continue }
            defer { sd_bus_creds_unref(creds) }
            var unique: UnsafePointer<CChar>?
            guard sd_bus_creds_get_unique_name(creds, &unique) >= 0, let unique else { continue }
            var pid: pid_t = 0
            found.append((name, String(cString: unique), sd_bus_creds_get_pid(creds, &pid) >= 0 ? pid : nil))
        }
        return found
    }

    /// The method calls received since the last time, in order, each to be answered.
    public func takeRequests() -> [PendingCall] {
        defer { queue = [] }
        return queue
    }

    /// Shows `new` in the properties. Each object's PropertiesChanged names only what changed; the
    /// first publish sets the state without signals (no client has seen a value to change from).
    /// The corresponding C function is `sd_bus_emit_properties_changed_strv`.
    public func publish(_ new: BusState) {
        let old = state
        state = new
        guard published else {
            published = true
            return
        }
        var own: [String] = []
        if old.route != new.route { own.append("Route") }
        if old.target != new.target { own.append("Target") }
        if old.override != new.override { own.append("Override") }
        if old.call != new.call { own.append("Call") }
        if old.micMuted != new.micMuted { own.append("MicMuted") }
        emitChanged(BusService.objectPath, BusService.interface, own)
        guard ownsCallAudio else { return }
        var callAudio: [String] = []
        if old.audioMode != new.audioMode { callAudio.append("AudioMode") }
        if old.speakerState != new.speakerState { callAudio.append("SpeakerState") }
        if old.micState != new.micState { callAudio.append("MicState") }
        emitChanged(BusService.callAudioPath, BusService.callAudioInterface, callAudio)
    }

    private func emitChanged(_ path: String, _ interface: String, _ names: [String]) {
        guard !names.isEmpty, lostError == nil else { return }
        var list: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) } + [nil]
        defer { for name in list { free(name) } }
        _ = list.withUnsafeMutableBufferPointer { sd_bus_emit_properties_changed_strv(bus, path, interface, $0.baseAddress) }
    }

    /// routectl's RouteChanged signal: the route, the one before it, and why (the event's reason).
    /// The corresponding C functions are `sd_bus_message_new_signal` and `sd_bus_send`.
    public func routeChanged(route: String, previous: String, reason: String) {
        guard lostError == nil else { return }
        var signal: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &signal, BusService.objectPath, BusService.interface, "RouteChanged") >= 0 else {
            return
        }
        defer { sd_bus_message_unref(signal) }
        for value in [route, previous, reason] {
            guard value.withCString({ sd_bus_message_append_basic(signal, Signature.string, $0) }) >= 0 else { return }
        }
        sd_bus_send(bus, signal, nil)
    }

    deinit {
        // Calls nobody took are answered with an error as they go (PendingCall), before the close.
        queue = []
        sd_bus_slot_unref(ownSlot)
        sd_bus_slot_unref(callAudioSlot)
        sd_bus_flush_close_unref(bus)
        ownTable.deallocate()
        callAudioTable.deallocate()
    }
}

@available(*, unavailable)
extension BusService: Sendable {}
