internal import CSystemd

/// A method call held until its work is done: sd-bus forgets a call once its handler returns, so
/// the message is referenced (`sd_bus_message_ref`) until it is answered. The first answer counts;
/// one never given is an error reply when the call goes, so no client waits out its timeout.
public final class PendingCall {
    public let request: BusRequest
    private var message: OpaquePointer?

    init(request: BusRequest, message: OpaquePointer) {
        self.request = request
        self.message = sd_bus_message_ref(message)
    }

    /// Answers one of routectl's own methods with the route read back after the action.
    public func reply(route: String) {
        guard request.returnsRoute else { return mismatched("a route") }
        answer { reply in
            route.withCString { sd_bus_message_append_basic(reply, Signature.string, $0) }
        }
    }

    /// Answers one of callaudiod's methods, as callaudiod does: whether the action worked.
    public func reply(success: Bool) {
        guard !request.returnsRoute else { return mismatched("success") }
        var value: Int32 = success ? 1 : 0
        answer { sd_bus_message_append_basic($0, Signature.boolean, &value) }
    }

    /// Answers with a D-Bus error, e.g. `io.github.routectl.Error.Failed` and a one-line reason.
    /// The corresponding C function is `sd_bus_reply_method_error`.
    public func fail(name: String, message text: String) {
        guard let call = message else { return }
        message = nil
        var error = sd_bus_error()
        sd_bus_error_set(&error, name, text)
        if sd_bus_message_get_expect_reply(call) > 0 { sd_bus_reply_method_error(call, &error) }
        sd_bus_error_free(&error)
        sd_bus_message_unref(call)
    }

    /// Whether an answer was sent (or the call went without one).
    public var isAnswered: Bool { message == nil }

    /// Sends a method return built by `append`, unless the caller asked for no reply.
    /// The corresponding C functions are `sd_bus_message_new_method_return` and `sd_bus_send`.
    private func answer(_ append: (OpaquePointer?) -> Int32) {
        guard let call = message else { return }
        message = nil
        defer { sd_bus_message_unref(call) }
        guard sd_bus_message_get_expect_reply(call) > 0 else { return }
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(call, &reply) >= 0 else { return }
        defer { sd_bus_message_unref(reply) }
        guard append(reply) >= 0 else { return }
        sd_bus_send(sd_bus_message_get_bus(call), reply, nil)
    }

    /// A reply of the other interface's type would break the client's proxy: a programming error,
    /// answered with an error rather than a malformed reply.
    private func mismatched(_ kind: String) {
        assertionFailure("\(request) answered with \(kind)")
        fail(name: BusService.failedError, message: "routectl answered this call wrongly")
    }

    deinit {
        fail(name: BusService.failedError, message: "routectl stopped before answering")
    }
}

@available(*, unavailable)
extension PendingCall: Sendable {}

/// D-Bus type codes, as `sd_bus_message_append_basic` and `sd_bus_message_read_basic` take them.
enum Signature {
    static let string = CChar(UInt8(ascii: "s"))
    static let boolean = CChar(UInt8(ascii: "b"))
    static let uint32 = CChar(UInt8(ascii: "u"))
}
