internal import CPulse
import Routing

/// Collects the replies of one snapshot's requests; every string is copied out inside its callback.
final class SnapshotBuilder {
    var server: ServerInfo?
    var sinks: [Sink] = []
    var sources: [Source] = []
    var cards: [Card] = []
    var sinkInputs: [SinkInput] = []
    var sourceOutputs: [SourceOutput] = []
    var modules: [String] = []
    var pending = 0
    var failure: PulseError?

    /// The snapshot the replies make, nil without the server's information. The default sink or source
    /// asked for alone is the default: the server answered it a moment after its information, and a
    /// default changed in between would otherwise leave the snapshot with no default at all.
    func snapshot(parts: SnapshotParts, serverString: String?) -> Snapshot? {
        guard var server else { return nil }
        server.serverString = serverString
        if parts.contains(.defaultSink), !parts.contains(.sinks), let sink = sinks.first {
            server.defaultSinkName = sink.name
        }
        if parts.contains(.defaultSource), !parts.contains(.sources), let source = sources.first {
            server.defaultSourceName = source.name
        }
        return Snapshot(server: server, sinks: sinks, sources: sources, cards: cards,
                        sinkInputs: sinkInputs, sourceOutputs: sourceOutputs)
    }

    func finish(_ eol: Int32, _ context: OpaquePointer?, _ operation: String, missingIsAnswer: Bool = false) -> Bool {
        if eol < 0 {
            let code = pa_context_errno(context)
            if failure == nil, !(missingIsAnswer && code == Int32(PA_ERR_NOENTITY.rawValue)) {
                failure = PulseError(code: code, operation: operation)
            }
            pending -= 1
            return true
        }
        if eol > 0 { pending -= 1; return true }
        return false
    }
}

@available(*, unavailable)
extension SnapshotBuilder: Sendable {}

extension PulseConnection {
    /// The server state routing needs, `parts` of it (by default all), with the requests sent
    /// together (one round trip).
    public func snapshot(timeout: Double, parts: SnapshotParts = .all) throws(PulseError) -> Snapshot {
        try snapshot(until: Deadline(seconds: timeout), parts: parts)
    }

    /// The server as this connection last read it whole, when that is still the server: the
    /// connection is subscribed, no change notification has come since (those already queued are
    /// taken first) and routectl has not acted since. Otherwise a fresh snapshot of `parts`. For
    /// the state a request starts from in a long-lived client; one-shot commands read afresh.
    /// A fresh snapshot taken here leaves the notifications it covers owed to the caller's own next
    /// refetch (`waitForChanges`): a watcher serving a request between its rounds still answers them.
    public func latestSnapshot(timeout: Double, parts: SnapshotParts = .all) throws(PulseError) -> Snapshot {
        if subscribed {
            drainQueuedEvents()
            if isConnected, let snapshot = latest.current(changes: changes) { return snapshot }
        }
        let owed = consumed
        defer { consumed = owed }
        return try snapshot(until: Deadline(seconds: timeout), parts: parts)
    }

    func snapshot(until deadline: Deadline, parts: SnapshotParts) throws(PulseError) -> Snapshot {
        let whole = parts == .all && subscribed
        if whole, let base = mirror.snapshot { return try refetchChanged(over: base, until: deadline) }
        let operation = "Failed to get server information"
        let ctx = try liveContext(operation)
        let builder = SnapshotBuilder()
        consumed = changes
        let mark = changes
        // What notifications come from here on, this read may not show: they name the next read's objects.
        if whole { mirror.changed = ChangedObjects() }
        try request(builder, operation) { pa_context_get_server_info(ctx, serverInfoCallback, $0) }
        if parts.contains(.sinks) {
            try request(builder, operation) { pa_context_get_sink_info_list(ctx, sinkInfoCallback, $0) }
        } else if parts.contains(.defaultSink) {
            try request(builder, operation) { pa_context_get_sink_info_by_name(ctx, "@DEFAULT_SINK@", oneSinkInfoCallback, $0) }
        }
        if parts.contains(.sources) {
            try request(builder, operation) { pa_context_get_source_info_list(ctx, sourceInfoCallback, $0) }
        } else if parts.contains(.defaultSource) {
            // Both servers resolve the name; a server with no source at all answers that it has none.
            try request(builder, operation) { pa_context_get_source_info_by_name(ctx, "@DEFAULT_SOURCE@", oneSourceInfoCallback, $0) }
        }
        if parts.contains(.cards) {
            try request(builder, operation) { pa_context_get_card_info_list(ctx, cardInfoCallback, $0) }
        }
        if parts.contains(.sinkInputs) {
            try request(builder, operation) { pa_context_get_sink_input_info_list(ctx, sinkInputInfoCallback, $0) }
        }
        if parts.contains(.sourceOutputs) {
            try request(builder, operation) { pa_context_get_source_output_info_list(ctx, sourceOutputInfoCallback, $0) }
        }
        try collect(builder, until: deadline, operation)
        guard let snapshot = builder.snapshot(parts: parts, serverString: serverString) else { throw PulseError.noEntity(operation) }
        if whole {
            latest.keep(snapshot, requestedAt: mark)
            mirror.snapshot = snapshot
        }
        return snapshot
    }

    /// A whole read of a subscribed connection that has read the server whole before: the server
    /// information, the devices the notifications since named (`ChangedObjects`) and the streams,
    /// laid over `base`. A few small replies instead of every list: pipewire-pulse answers on the thread that
    /// takes WirePlumber's changes in. Each read is followed by a barrier, the server information
    /// asked again: the server sends the notifications of what changed before it answers that
    /// (PulseAudio posts them at its next main-loop iteration, after the reply to a request it is
    /// handling). Notifications that came meanwhile name objects the read may show as they were
    /// (fresh defaults beside a sink's old port): those are read again, until a read and its barrier
    /// pass with none, so what is returned is the server at one moment, as a whole read shows it. A
    /// server that keeps changing gets a whole read after `Mirror.readsBeforeWhole`.
    func refetchChanged(over base: Snapshot, until deadline: Deadline) throws(PulseError) -> Snapshot {
        var snapshot = base
        do throws(PulseError) {
            for _ in 0..<Mirror.readsBeforeWhole {
                consumed = changes
                let mark = changes
                snapshot = try readChanged(over: snapshot, until: deadline)
                // The barrier: the server information alone (not a whole read, so it leaves the mirror be).
                _ = try self.snapshot(until: deadline, parts: [])
                if changes == mark {
                    latest.keep(snapshot, requestedAt: mark)
                    mirror.snapshot = snapshot
                    return snapshot
                }
            }
        } catch {
            // The next whole read starts over: what this one would have laid over the mirror is lost.
            mirror.forget()
            throw error
        }
        mirror.forget()
        return try self.snapshot(until: deadline, parts: .all)
    }

    /// One read of the devices noted since the last, each asked for by its index (a kind with more
    /// than `Mirror.listAbove` of them, by its list), with the server information and the streams,
    /// laid over `base`.
    private func readChanged(over base: Snapshot, until deadline: Deadline) throws(PulseError) -> Snapshot {
        let operation = "Failed to get server information"
        let ctx = try liveContext(operation)
        let builder = SnapshotBuilder()
        let wanted = mirror.changed.expanded(over: base)
        mirror.changed = ChangedObjects()
        let sinks = ChangedObjects.asked(wanted.sinks), sources = ChangedObjects.asked(wanted.sources)
        let cards = ChangedObjects.asked(wanted.cards)
        try request(builder, operation) { pa_context_get_server_info(ctx, serverInfoCallback, $0) }
        if let sinks {
            for i in sinks { try request(builder, operation) { pa_context_get_sink_info_by_index(ctx, i, oneSinkInfoCallback, $0) } }
        } else {
            try request(builder, operation) { pa_context_get_sink_info_list(ctx, sinkInfoCallback, $0) }
        }
        if let sources {
            for i in sources { try request(builder, operation) { pa_context_get_source_info_by_index(ctx, i, oneSourceInfoCallback, $0) } }
        } else {
            try request(builder, operation) { pa_context_get_source_info_list(ctx, sourceInfoCallback, $0) }
        }
        if let cards {
            for i in cards { try request(builder, operation) { pa_context_get_card_info_by_index(ctx, i, oneCardInfoCallback, $0) } }
        } else {
            try request(builder, operation) { pa_context_get_card_info_list(ctx, cardInfoCallback, $0) }
        }
        // The streams' lists whole, every time: pipewire-pulse tells a stream moved to another sink
        // only when the stream's own node changes too (a paused one's may not), as its sink comes
        // from the links. Few, and small.
        try request(builder, operation) { pa_context_get_sink_input_info_list(ctx, sinkInputInfoCallback, $0) }
        try request(builder, operation) { pa_context_get_source_output_info_list(ctx, sourceOutputInfoCallback, $0) }
        try collect(builder, until: deadline, operation)
        guard let server = builder.server else { throw PulseError.noEntity(operation) }
        var snapshot = base
        snapshot.server = server
        snapshot.server.serverString = serverString
        snapshot.sinks = Mirror.patched(base.sinks, asked: sinks, got: builder.sinks, index: \.index)
        snapshot.sources = Mirror.patched(base.sources, asked: sources, got: builder.sources, index: \.index)
        snapshot.cards = Mirror.patched(base.cards, asked: cards, got: builder.cards, index: \.index)
        snapshot.sinkInputs = builder.sinkInputs
        snapshot.sourceOutputs = builder.sourceOutputs
        return snapshot
    }

    /// `base` with fresh server information and fresh copies of the sinks named (one round trip);
    /// a named sink that has gone is dropped. The rest of `base` is as it was.
    public func refreshed(_ base: Snapshot, sinks names: [String], timeout: Double) throws(PulseError) -> Snapshot {
        try refreshed(base, sinks: names, until: Deadline(seconds: timeout))
    }

    func refreshed(_ base: Snapshot, sinks names: [String], until deadline: Deadline) throws(PulseError) -> Snapshot {
        let operation = "Failed to get server information"
        let ctx = try liveContext(operation)
        let builder = SnapshotBuilder()
        consumed = changes
        try request(builder, operation) { pa_context_get_server_info(ctx, serverInfoCallback, $0) }
        for name in names {
            try request(builder, operation) { pa_context_get_sink_info_by_name(ctx, name, oneSinkInfoCallback, $0) }
        }
        try collect(builder, until: deadline, operation)
        guard let fresh = builder.snapshot(parts: [], serverString: serverString) else { throw PulseError.noEntity(operation) }
        var snapshot = base
        snapshot.server = fresh.server
        snapshot.sinks.removeAll { names.contains($0.name) }
        snapshot.sinks += builder.sinks
        snapshot.sinks.sort { $0.index < $1.index }
        return snapshot
    }

    /// The names of the server's loaded modules, for `why` (PulseAudio's own switching policies:
    /// module-switch-on-connect, module-switch-on-port-available, module-role-cork).
    public func moduleNames(timeout: Double) throws(PulseError) -> [String] {
        let operation = "Failed to get module information"
        let ctx = try liveContext(operation)
        let builder = SnapshotBuilder()
        try request(builder, operation) { pa_context_get_module_info_list(ctx, moduleInfoCallback, $0) }
        try collect(builder, until: Deadline(seconds: timeout), operation)
        return builder.modules
    }

    private func request(_ builder: SnapshotBuilder, _ operation: String,
                         _ start: (UnsafeMutableRawPointer) -> OpaquePointer?) throws(PulseError) {
        try send(builder, start)
        builder.pending += 1
    }

    private func collect(_ builder: SnapshotBuilder, until deadline: Deadline, _ operation: String) throws(PulseError) {
        do {
            try run(until: { _ in builder.pending == 0 }, deadline: deadline, operation: operation)
        } catch {
            throw builder.failure ?? error
        }
        if let failure = builder.failure { throw failure }
    }
}

// MARK: - Introspection callbacks (each copies what it needs out of libpulse's memory)

private func builder(_ ud: UnsafeMutableRawPointer?) -> SnapshotBuilder {
    Unmanaged<SnapshotBuilder>.fromOpaque(ud!).takeUnretainedValue()
}

private let serverInfoCallback: pa_server_info_cb_t = { _, info, ud in
    let b = builder(ud)
    b.pending -= 1
    guard let i = info?.pointee else { return }
    b.server = ServerInfo(
        name: string(i.server_name) ?? "unknown", version: string(i.server_version) ?? "",
        defaultSinkName: string(i.default_sink_name), defaultSourceName: string(i.default_source_name),
        hostName: string(i.host_name))
}

private let moduleInfoCallback: pa_module_info_cb_t = { c, info, eol, ud in
    let b = builder(ud)
    if b.finish(eol, c, "Failed to get module information") { return }
    if let name = info?.pointee.name.flatMap(string) { b.modules.append(name) }
}

/// One reply to a request for sinks or sources: a device, or the end of the list. One asked for by
/// name or index may have gone (or the server has none): that is an answer, not a failure. A list
/// request is never excused.
private func deviceReply<Info>(_ context: OpaquePointer?, _ info: UnsafePointer<Info>?, _ eol: Int32,
                               _ ud: UnsafeMutableRawPointer?, _ operation: String, oneAskedFor: Bool,
                               keep: (SnapshotBuilder, Info) -> Void) {
    let b = builder(ud)
    if b.finish(eol, context, operation, missingIsAnswer: oneAskedFor) { return }
    if let info { keep(b, info.pointee) }
}

private let sinkInfoCallback: pa_sink_info_cb_t = {
    deviceReply($0, $1, $2, $3, "Failed to get sink information", oneAskedFor: false) { $0.sinks.append(sink($1)) }
}
private let oneSinkInfoCallback: pa_sink_info_cb_t = {
    deviceReply($0, $1, $2, $3, "Failed to get sink information", oneAskedFor: true) { $0.sinks.append(sink($1)) }
}

private func sink(_ i: pa_sink_info) -> Sink {
    Sink(
        index: i.index, name: string(i.name) ?? "", description: string(i.description) ?? "",
        driver: string(i.driver) ?? "", state: sinkState(i.state.rawValue), mute: i.mute != 0,
        ownerModule: validIndex(i.owner_module), card: validIndex(i.card),
        monitorSource: string(i.monitor_source_name), properties: properties(i.proplist),
        ports: ports(i.ports, Int(i.n_ports)), activePort: i.active_port.flatMap { string($0.pointee.name) })
}

private let sourceInfoCallback: pa_source_info_cb_t = {
    deviceReply($0, $1, $2, $3, "Failed to get source information", oneAskedFor: false) { $0.sources.append(source($1)) }
}
private let oneSourceInfoCallback: pa_source_info_cb_t = {
    deviceReply($0, $1, $2, $3, "Failed to get source information", oneAskedFor: true) { $0.sources.append(source($1)) }
}

private func source(_ i: pa_source_info) -> Source {
    Source(
        index: i.index, name: string(i.name) ?? "", description: string(i.description) ?? "",
        driver: string(i.driver) ?? "", state: sinkState(i.state.rawValue), mute: i.mute != 0,
        ownerModule: validIndex(i.owner_module), card: validIndex(i.card),
        monitorOfSink: i.monitor_of_sink == UInt32.max ? nil : string(i.monitor_of_sink_name),
        properties: properties(i.proplist), ports: ports(i.ports, Int(i.n_ports)),
        activePort: i.active_port.flatMap { string($0.pointee.name) })
}

private let cardInfoCallback: pa_card_info_cb_t = { cardReply($0, $1, $2, $3, oneAskedFor: false) }
/// One card asked for (by its index): one that has gone is an answer (it is dropped), not a failure.
private let oneCardInfoCallback: pa_card_info_cb_t = { cardReply($0, $1, $2, $3, oneAskedFor: true) }

private func cardReply(_ c: OpaquePointer?, _ info: UnsafePointer<pa_card_info>?, _ eol: Int32, _ ud: UnsafeMutableRawPointer?,
                       oneAskedFor: Bool) {
    let b = builder(ud)
    if b.finish(eol, c, "Failed to get card information", missingIsAnswer: oneAskedFor) { return }
    guard let i = info?.pointee else { return }
    var profiles: [Profile] = []
    if let list = i.profiles2 {
        for k in 0..<Int(i.n_profiles) {
            guard let p = list[k]?.pointee else { break }
            profiles.append(profile(p))
        }
    }
    var cardPorts: [CardPort] = []
    if let list = i.ports {
        for k in 0..<Int(i.n_ports) {
            guard let p = list[k]?.pointee else { break }
            var names: [String] = []
            if let pl = p.profiles2 {
                for j in 0..<Int(p.n_profiles) {
                    guard let name = pl[j].flatMap({ string($0.pointee.name) }) else { break }
                    names.append(name)
                }
            }
            let direction: PortDirection? = p.direction == Int32(PA_DIRECTION_OUTPUT.rawValue) ? .output
                : p.direction == Int32(PA_DIRECTION_INPUT.rawValue) ? .input : nil
            cardPorts.append(CardPort(
                port: Port(name: string(p.name) ?? "", description: string(p.description) ?? "",
                           type: PortType(number: p.type), priority: p.priority,
                           availability: availability(p.available), availabilityGroup: string(p.availability_group)),
                direction: direction, profiles: names, properties: properties(p.proplist)))
        }
    }
    b.cards.append(Card(
        index: i.index, name: string(i.name) ?? "", driver: string(i.driver) ?? "",
        ownerModule: validIndex(i.owner_module), properties: properties(i.proplist), profiles: profiles,
        activeProfile: i.active_profile2.flatMap { string($0.pointee.name) }, ports: cardPorts))
}

private let sinkInputInfoCallback: pa_sink_input_info_cb_t = { c, info, eol, ud in
    let b = builder(ud)
    if b.finish(eol, c, "Failed to get sink input information") { return }
    guard let i = info?.pointee else { return }
    b.sinkInputs.append(SinkInput(index: i.index, sink: i.sink, client: validIndex(i.client),
                                  corked: i.corked != 0, mute: i.mute != 0, properties: properties(i.proplist)))
}

private let sourceOutputInfoCallback: pa_source_output_info_cb_t = { c, info, eol, ud in
    let b = builder(ud)
    if b.finish(eol, c, "Failed to get source output information") { return }
    guard let i = info?.pointee else { return }
    b.sourceOutputs.append(SourceOutput(index: i.index, source: i.source, client: validIndex(i.client),
                                        corked: i.corked != 0, mute: i.mute != 0, properties: properties(i.proplist)))
}

// MARK: - Copying C data out

func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }

/// PA_INVALID_INDEX is `(uint32_t) -1`, which Swift cannot import.
func validIndex(_ i: UInt32) -> UInt32? { i == UInt32.max ? nil : i }

/// A proplist's string values. The corresponding C functions are `pa_proplist_size`, `pa_proplist_iterate` and
/// `pa_proplist_gets`.
func properties(_ list: OpaquePointer?) -> [String: String] {
    guard let list else { return [:] }
    var out: [String: String] = [:]
    // Sized once: grown key by key, the dictionary rehashed ~3 times per list (a quarter of the cost).
    out.reserveCapacity(Int(pa_proplist_size(list)))
    var state: UnsafeMutableRawPointer?
    while let key = pa_proplist_iterate(list, &state) {
        if let value = pa_proplist_gets(list, key) { out[String(cString: key)] = String(cString: value) }
    }
    return out
}

/// pactl's spelling of `pa_sink_state_t` / `pa_source_state_t` (the two share their numbers).
func sinkState(_ raw: Int32) -> String {
    switch raw {
    case 0: return "RUNNING"
    case 1: return "IDLE"
    case 2: return "SUSPENDED"
    default: return "UNKNOWN"
    }
}

func availability(_ raw: Int32) -> PortAvailability {
    switch UInt32(bitPattern: raw) {
    case PA_PORT_AVAILABLE_YES.rawValue: return .available
    case PA_PORT_AVAILABLE_NO.rawValue: return .unavailable
    default: return .unknown
    }
}

func profile(_ p: pa_card_profile_info2) -> Profile {
    Profile(name: string(p.name) ?? "", description: string(p.description) ?? "", sinks: p.n_sinks,
            sources: p.n_sources, priority: p.priority, available: p.available != 0)
}

/// Sink and source ports share their layout but not their C type; both arrive here as one of the two.
func ports(_ list: UnsafeMutablePointer<UnsafeMutablePointer<pa_sink_port_info>?>?, _ count: Int) -> [Port] {
    guard let list else { return [] }
    return (0..<count).compactMap { k in
        list[k].map { p in
            Port(name: string(p.pointee.name) ?? "", description: string(p.pointee.description) ?? "",
                 type: PortType(number: p.pointee.type), priority: p.pointee.priority,
                 availability: availability(p.pointee.available), availabilityGroup: string(p.pointee.availability_group))
        }
    }
}

func ports(_ list: UnsafeMutablePointer<UnsafeMutablePointer<pa_source_port_info>?>?, _ count: Int) -> [Port] {
    guard let list else { return [] }
    return (0..<count).compactMap { k in
        list[k].map { p in
            Port(name: string(p.pointee.name) ?? "", description: string(p.pointee.description) ?? "",
                 type: PortType(number: p.pointee.type), priority: p.pointee.priority,
                 availability: availability(p.pointee.available), availabilityGroup: string(p.pointee.availability_group))
        }
    }
}
