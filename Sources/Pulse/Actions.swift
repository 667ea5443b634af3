internal import CPulse
import Routing

/// The requests sent together and waited for as one: how many are unanswered, and the first refusal.
final class RequestBatch {
    var pending = 0
    var failure: PulseError?
    /// The last request's name, for the message when no reply comes in time.
    var lastOperation = ""
}

/// One request's userdata, so a reply is matched to its request whatever order replies come in
/// (pipewire-pulse may answer out of order: a refusal can overtake the acknowledgement before it).
/// C holds it retained from the send until the operation is done or cancelled (`send`).
final class Request {
    /// What routectl was doing, for the message ("Failed to set default sink 'x'").
    let operation: String
    /// A refusal that does not fail the batch: moving a stream the server will not move
    /// (PA_STREAM_DONT_MOVE, or one that just ended) must not undo a route change.
    let bestEffort: Bool
    let batch: RequestBatch
    private(set) var answered = false

    init(_ operation: String, bestEffort: Bool = false, in batch: RequestBatch) {
        self.operation = operation
        self.bestEffort = bestEffort
        self.batch = batch
    }

    /// Records this request's reply; `code` is read only for a refusal (`pa_context_errno` then holds it).
    func answer(success: Bool, code: () -> Int32) {
        guard !answered else { return }
        answered = true
        batch.pending -= 1
        if !success, !bestEffort, batch.failure == nil {
            batch.failure = PulseError(code: code(), operation: operation)
        }
    }
}

@available(*, unavailable)
extension RequestBatch: Sendable {}

@available(*, unavailable)
extension Request: Sendable {}

extension PulseConnection {
    /// Subscribes to the facilities routing depends on (a watcher's subscription: CLIENT is left out,
    /// as every pactl run makes noise there). The corresponding C function is `pa_context_subscribe`.
    public func subscribe(timeout: Double) throws(PulseError) {
        guard !subscribed else { return }
        let batch = RequestBatch()
        try sendSubscribe(in: batch)
        try wait(for: batch, until: Deadline(seconds: timeout))
    }

    /// Sends the subscription as one request of `batch`; it holds from the moment the server reads
    /// it, so requests sent after it in the same batch are seen with their notifications. `clients`:
    /// a command's read-back also counts the clients that connect (`clientsArrived`), never a change
    /// to refetch for.
    func sendSubscribe(in batch: RequestBatch, clients: Bool = false) throws(PulseError) {
        let ctx = try liveContext("Failed to subscribe to server events")
        pa_context_set_subscribe_callback(ctx, { _, type, index, ud in
            let connection = Unmanaged<PulseConnection>.fromOpaque(ud!).takeUnretainedValue()
            let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
            if facility == PA_SUBSCRIPTION_EVENT_CLIENT.rawValue {
                if type.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue == PA_SUBSCRIPTION_EVENT_NEW.rawValue {
                    connection.clientsCounted += 1
                }
                return
            }
            connection.changes += 1
            connection.mirror.changed.note(facility: facility, index: index)
        }, Unmanaged.passUnretained(self).toOpaque())
        let mask = PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_SOURCE.rawValue
            | PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue | PA_SUBSCRIPTION_MASK_SOURCE_OUTPUT.rawValue
            | PA_SUBSCRIPTION_MASK_CARD.rawValue | PA_SUBSCRIPTION_MASK_SERVER.rawValue
            | (clients ? PA_SUBSCRIPTION_MASK_CLIENT.rawValue : 0)
        try send(Request("Failed to subscribe to server events", in: batch)) { ud in
            pa_context_subscribe(ctx, pa_subscription_mask_t(rawValue: mask), ackCallback, ud)
        }
        subscribed = true
        countsClients = clients
    }

    /// Sends every action at once and waits for all acknowledgements. An acknowledgement is not the
    /// change itself: pipewire-pulse acknowledges first and WirePlumber acts a little later.
    public func perform(_ actions: [Action], timeout: Double) throws(PulseError) {
        try perform(actions, until: Deadline(seconds: timeout))
    }

    func perform(_ actions: [Action], until deadline: Deadline, subscribing: Bool = false) throws(PulseError) {
        guard !actions.isEmpty || subscribing else { return }
        let ctx = try liveContext("Failed to change the route")
        if !actions.isEmpty { latest.forget() }
        let batch = RequestBatch()
        if subscribing, !subscribed { try sendSubscribe(in: batch, clients: true) }
        for action in actions {
            let request: Request
            let start: (UnsafeMutableRawPointer) -> OpaquePointer?
            switch action {
            case let .setCardProfile(card, profile):
                request = Request("Failed to set card profile '\(profile)' on '\(card)'", in: batch)
                start = { pa_context_set_card_profile_by_name(ctx, card, profile, ackCallback, $0) }
            case let .setSinkPort(sink, port):
                request = Request("Failed to set port '\(port)' on sink '\(sink)'", in: batch)
                start = { pa_context_set_sink_port_by_name(ctx, sink, port, ackCallback, $0) }
            case let .setDefaultSink(sink):
                request = Request("Failed to set default sink '\(sink)'", in: batch)
                start = { pa_context_set_default_sink(ctx, sink, ackCallback, $0) }
            case let .moveSinkInput(index, sink):
                request = Request("Failed to move sink input \(index) to '\(sink)'", bestEffort: true, in: batch)
                start = { pa_context_move_sink_input_by_name(ctx, index, sink, ackCallback, $0) }
            case let .setSinkMute(sink, mute):
                request = Request("Failed to \(mute ? "mute" : "unmute") sink '\(sink)'", in: batch)
                start = { pa_context_set_sink_mute_by_name(ctx, sink, mute ? 1 : 0, ackCallback, $0) }
            case let .setSourceMute(source, mute):
                request = Request("Failed to \(mute ? "mute" : "unmute") source '\(source)'", in: batch)
                start = { pa_context_set_source_mute_by_name(ctx, source, mute ? 1 : 0, ackCallback, $0) }
            case let .setSourcePort(source, port):
                request = Request("Failed to set port '\(port)' on source '\(source)'", in: batch)
                start = { pa_context_set_source_port_by_name(ctx, source, port, ackCallback, $0) }
            case let .setDefaultSource(source):
                request = Request("Failed to set default source '\(source)'", in: batch)
                start = { pa_context_set_default_source(ctx, source, ackCallback, $0) }
            }
            try send(request, start)
        }
        try wait(for: batch, until: deadline)
    }

    /// Performs `actions`, then reads the server back until `settled` holds: each change notification
    /// (a burst coalesced into one) triggers one refetch. Returns the last snapshot, settled or not
    /// when the time ran out; the caller reports what it is. One deadline covers every stage
    /// (subscribing, acting, each read-back), which are not each given the whole timeout again.
    /// `readBack` says what is fetched after acting: by default a whole snapshot.
    public func apply(_ actions: [Action], timeout: Double, readBack: ReadBack = .snapshot(.all),
                      settled: (Snapshot) -> Bool) throws(PulseError) -> Snapshot {
        let deadline = Deadline(seconds: timeout)
        // The subscription travels with the actions: one round trip, and it is in force before them.
        try perform(actions, until: deadline, subscribing: true)
        var snapshot = try self.readBack(readBack, until: deadline)
        while !settled(snapshot) {
            guard try waitForChanges(until: deadline) else { return snapshot }
            snapshot = try self.readBack(readBack, until: deadline)
        }
        return snapshot
    }

    func readBack(_ what: ReadBack, until deadline: Deadline) throws(PulseError) -> Snapshot {
        switch what {
        case let .snapshot(parts): return try snapshot(until: deadline, parts: parts)
        case let .sinks(names, base): return try refreshed(base, sinks: names, until: deadline)
        }
    }

    /// Waits until every request of `batch` is answered. A refusal the server sent is reported with
    /// its own code even when the deadline then passes before the other replies.
    func wait(for batch: RequestBatch, until deadline: Deadline) throws(PulseError) {
        do {
            try run(until: { _ in batch.pending == 0 }, deadline: deadline, operation: batch.lastOperation)
        } catch {
            throw batch.failure ?? error
        }
        if let failure = batch.failure { throw failure }
    }

    /// Sends one request with `userdata` as its callbacks' data: retained for C here, released exactly
    /// once by the operation's state callback when the operation is done (after its data callback) or
    /// cancelled (a context that died or was disconnected: then only the state callback runs). The
    /// operation itself is unreferenced at once, as pactl does. `start` makes the `pa_context_*` call.
    func send(_ userdata: AnyObject, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?) throws(PulseError) {
        let ud = Unmanaged<AnyObject>.passRetained(userdata).toOpaque()
        guard let op = start(ud) else {
            Unmanaged<AnyObject>.fromOpaque(ud).release()
            let operation = (userdata as? Request)?.operation ?? "Failed to send a request"
            throw PulseError(code: pa_context_errno(context), operation: operation)
        }
        pa_operation_set_state_callback(op, { op, ud in
            if pa_operation_get_state(op) != PA_OPERATION_RUNNING {
                Unmanaged<AnyObject>.fromOpaque(ud!).release()
            }
        }, ud)
        pa_operation_unref(op)
        if let request = userdata as? Request {
            request.batch.pending += 1
            request.batch.lastOperation = request.operation
        }
    }
}

/// `pa_context_success_cb_t` for every request routectl sends: the reply goes to its own request.
private let ackCallback: @convention(c) (OpaquePointer?, Int32, UnsafeMutableRawPointer?) -> Void = { ctx, success, ud in
    Unmanaged<Request>.fromOpaque(ud!).takeUnretainedValue().answer(success: success != 0) { pa_context_errno(ctx) }
}
