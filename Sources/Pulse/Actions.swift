internal import CPulse
import Routing

/// Collects the acknowledgements of requests sent together.
final class AckCollector {
    var pending = 0
    var failure: (code: Int32, operation: String)?
    var operations: [String] = []
    /// Operations whose refusal does not fail the batch: moving a stream the server will not move
    /// (PA_STREAM_DONT_MOVE, or one that just ended) must not undo a route change.
    var bestEffort: Set<Int> = []
}

@available(*, unavailable)
extension AckCollector: Sendable {}

extension PulseConnection {
    /// Subscribes to the facilities routing depends on; CLIENT is left out because every pactl run
    /// makes noise there. The corresponding C function is `pa_context_subscribe`.
    public func subscribe(timeout: Double) throws(PulseError) {
        guard !subscribed else { return }
        let operation = "Failed to subscribe to server events"
        let ctx = try liveContext(operation)
        pa_context_set_subscribe_callback(ctx, { _, _, _, ud in
            Unmanaged<PulseConnection>.fromOpaque(ud!).takeUnretainedValue().changes += 1
        }, Unmanaged.passUnretained(self).toOpaque())
        let mask = PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_SOURCE.rawValue
            | PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue | PA_SUBSCRIPTION_MASK_SOURCE_OUTPUT.rawValue
            | PA_SUBSCRIPTION_MASK_CARD.rawValue | PA_SUBSCRIPTION_MASK_SERVER.rawValue
        let acks = AckCollector()
        acks.operations = [operation]
        try sent(pa_context_subscribe(ctx, pa_subscription_mask_t(rawValue: mask), ackCallback,
                                      Unmanaged.passUnretained(acks).toOpaque()), operation, owner: acks)
        acks.pending = 1
        try wait(for: acks, timeout: timeout)
        subscribed = true
    }

    /// Sends every action at once and waits for all acknowledgements. An acknowledgement is not the
    /// change itself: pipewire-pulse acknowledges first and WirePlumber acts a little later.
    public func perform(_ actions: [Action], timeout: Double) throws(PulseError) {
        guard !actions.isEmpty else { return }
        let ctx = try liveContext("Failed to change the route")
        let acks = AckCollector()
        let ud = Unmanaged.passUnretained(acks).toOpaque()
        for action in actions {
            let operation: String
            let op: OpaquePointer?
            switch action {
            case let .setCardProfile(card, profile):
                operation = "Failed to set card profile '\(profile)' on '\(card)'"
                op = pa_context_set_card_profile_by_name(ctx, card, profile, ackCallback, ud)
            case let .setSinkPort(sink, port):
                operation = "Failed to set port '\(port)' on sink '\(sink)'"
                op = pa_context_set_sink_port_by_name(ctx, sink, port, ackCallback, ud)
            case let .setDefaultSink(sink):
                operation = "Failed to set default sink '\(sink)'"
                op = pa_context_set_default_sink(ctx, sink, ackCallback, ud)
            case let .moveSinkInput(index, sink):
                operation = "Failed to move sink input \(index) to '\(sink)'"
                op = pa_context_move_sink_input_by_name(ctx, index, sink, ackCallback, ud)
            case let .setSinkMute(sink, mute):
                operation = "Failed to \(mute ? "mute" : "unmute") sink '\(sink)'"
                op = pa_context_set_sink_mute_by_name(ctx, sink, mute ? 1 : 0, ackCallback, ud)
            case let .setSourcePort(source, port):
                operation = "Failed to set port '\(port)' on source '\(source)'"
                op = pa_context_set_source_port_by_name(ctx, source, port, ackCallback, ud)
            case let .setDefaultSource(source):
                operation = "Failed to set default source '\(source)'"
                op = pa_context_set_default_source(ctx, source, ackCallback, ud)
            }
            // Acknowledgements arrive in order; each callback takes the next operation's name.
            if case .moveSinkInput = action { acks.bestEffort.insert(acks.operations.count) }
            acks.operations.append(operation)
            try sent(op, operation, owner: acks)
            acks.pending += 1
        }
        try wait(for: acks, timeout: timeout)
    }

    /// Performs `actions`, then reads the server back until `settled` holds: each change notification
    /// (a burst coalesced into one) triggers one refetch. Returns the last snapshot, settled or not
    /// when the time ran out; the caller reports what it is.
    public func apply(_ actions: [Action], timeout: Double, settled: (Snapshot) -> Bool) throws(PulseError) -> Snapshot {
        try subscribe(timeout: timeout)
        let deadline = Deadline(seconds: timeout)
        try perform(actions, timeout: timeout)
        var snapshot = try self.snapshot(timeout: timeout)
        while !settled(snapshot) {
            guard try waitForChanges(until: deadline) else { return snapshot }
            snapshot = try self.snapshot(timeout: timeout)
        }
        return snapshot
    }

    func wait(for acks: AckCollector, timeout: Double) throws(PulseError) {
        try run(until: { _ in acks.pending == 0 }, deadline: Deadline(seconds: timeout), operation: acks.operations.last ?? "")
        if let failure = acks.failure { throw PulseError(code: failure.code, operation: failure.operation) }
    }
}

/// `pa_context_success_cb_t` for every request routectl sends; records the first failure.
private let ackCallback: @convention(c) (OpaquePointer?, Int32, UnsafeMutableRawPointer?) -> Void = { ctx, success, ud in
    let acks = Unmanaged<AckCollector>.fromOpaque(ud!).takeUnretainedValue()
    let index = acks.operations.count - acks.pending
    acks.pending -= 1
    if success == 0, acks.failure == nil, !acks.bestEffort.contains(index) {
        let name = index >= 0 && index < acks.operations.count ? acks.operations[index] : "Failed to change the route"
        acks.failure = (pa_context_errno(ctx), name)
    }
}
