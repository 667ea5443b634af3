import Routing

/// Applies a route request and reads the result back (DESIGN.md §1 rules 4, 5, 6, 7): plan, announce
/// the intent, act, wait for the server's notifications until the plan shows, and plan again after a
/// card profile switch.
public struct RouteApplier {
    /// How long a change may take to show on the server before routectl reports what it sees instead.
    public static let settleSeconds = 3.0
    /// How long an acknowledged change of the default sink may take to show before routectl asks a
    /// fresh connection (`AudioServer.refreshStaleDefaults`), when a client connected meanwhile:
    /// WirePlumber carries it out within milliseconds, in 0.3–1 s among 500 sinks; a connection that
    /// missed it would wait for ever. While no client connects, this connection cannot miss it, and
    /// waits on: a fresh connection would itself keep the change from every other client there.
    public static let staleAfter = 0.5

    public let server: any AudioServer
    public let store: (any PreferenceStore)?
    public let clocks: Clocks

    public init(server: any AudioServer, store: (any PreferenceStore)?, clocks: Clocks) {
        self.server = server
        self.store = store
        self.clocks = clocks
    }

    public struct Result: Sendable {
        public let snapshot: Snapshot
        public let plan: Plan
        /// The route read back, derived once: every command reports it, several read it more than once.
        public let status: Status

        public init(snapshot: Snapshot, plan: Plan) {
            self.snapshot = snapshot
            self.plan = plan
            status = Status(snapshot: snapshot)
        }
    }

    /// Plans `request` and carries it out, switching a card profile first when the target exists only
    /// under another one; returns the route read back. `reason` is what watchers report for the move.
    /// `lightReadBack` reads back only the server information and the planned sink over the snapshot
    /// acted on (what settles a plan), for `set` among hundreds of outputs. `inCall` plans in call mode
    /// (rule 8: call profiles, Bluetooth in HFP, the microphone following the output). `claimDefault`
    /// names the output's sink as the default even when the server already made it so, and
    /// `keepCardsOff` leaves a card a user turned off alone (`PlanContext`: both for the policy).
    /// `initialStatus` is `initial`'s status when the caller has derived it already.
    public func route(_ request: RouteRequest, preferredInput: String?, timeout: Double, from initial: Snapshot? = nil,
                      status initialStatus: Status? = nil, reason: RouteChangeReason = .override, lightReadBack: Bool = false,
                      inCall: Bool = false, claimDefault: Bool = false, keepCardsOff: Bool = false) throws(EngineError) -> Result {
        var snapshot: Snapshot
        do { snapshot = try initial ?? server.latestSnapshot(timeout: timeout) } catch { throw .server(error) }
        // The status of the snapshot in hand, while it is the one first read: the context and the first plan share it.
        var status: Status? = (initial != nil ? initialStatus : nil) ?? Status(snapshot: snapshot)
        // Watchers hold their route events while the intent is in progress: say when it is over.
        var announced: RouteIntent?
        defer {
            if var intent = announced {
                intent.done = true
                store?.saveIntent(intent)
            }
        }
        // Every step is judged against the route before the command (rule 7), and only the streams of
        // the default sink before it follow (rule 5).
        let context = PlanContext(preferredInput: preferredInput, inCall: inCall, before: status?.output,
                                  previousDefaultSink: snapshot.server.defaultSinkName, claimDefault: claimDefault,
                                  keepCardsOff: keepCardsOff)
        let first = snapshot
        func done(_ plan: Plan) -> Result {
            if inCall, let store { Self.oweProfiles(switchedFrom: first, to: snapshot, store) }
            return Result(snapshot: snapshot, plan: plan)
        }
        var overruled = false
        for _ in 0..<4 {
            let plan: Plan
            do { plan = try Planner.plan(snapshot, request, context, status: status) } catch { throw .planning(error) }
            status = nil
            if plan.actions.isEmpty, plan.needsReplan {
                // The output's sink is on its way (its card is there, in the right profile): wait for it.
                do {
                    guard try server.waitForChanges(timeout: Self.settleSeconds) else { break }
                    snapshot = try server.snapshot(timeout: timeout)
                } catch {
                    throw .server(error)
                }
                continue
            }
            guard !plan.actions.isEmpty else { return done(plan) }
            if let output = plan.output, announced?.output != output.id {
                announced = RouteIntent(output: output.id, reason: reason, at: clocks.wallMilliseconds())
                store?.saveIntent(announced!)
            }
            // The planned sink's port before acting: a third one afterwards is the server's own choice.
            let portBefore = plan.output?.sink.flatMap { name in snapshot.sinks.first { $0.name == name }?.activePort }
            do {
                let readBack: ReadBack = lightReadBack && !plan.needsReplan && plan.output?.sink != nil
                    ? .sinks([plan.output!.sink!], over: snapshot) : .snapshot(.all)
                let limit = max(timeout, Self.settleSeconds)
                let namesDefault = plan.actions.contains { if case .setDefaultSink = $0 { return true } else { return false } }
                // A wait ends early when the planned output went meanwhile (a headset disconnecting as
                // it was chosen): nothing more will come, and the route lock is not held for nothing.
                let over = { (s: Snapshot) in Self.settled(s, plan) || Self.outputGone(s, plan) }
                // Counted from the subscription these actions bring, when this connection has none yet.
                let clients = server.clientsArrived ?? 0
                snapshot = try server.apply(plan.actions, timeout: limit, readBack: readBack) { namesDefault || over($0) }
                if namesDefault, !over(snapshot) {
                    snapshot = try defaultShown(limit: limit, clientsBefore: clients, readBack: readBack, settled: over) { s in
                        Self.portOverruled(s, plan, before: portBefore)
                    }
                }
                if !plan.needsReplan {
                    guard !overruled, Self.portOverruled(snapshot, plan, before: portBefore) else { return done(plan) }
                    // The planned sink is the default but shows a third port: the server chose one after
                    // routectl did, answering the same event (WirePlumber selecting the best port left
                    // when a jack is pulled). Once it is quiet, the plan is made and carried out once more.
                    overruled = true
                    snapshot = try server.snapshotWhenQuiet(timeout: timeout, quiet: 0.05, limit: 1)
                    continue
                }
                if snapshot.server.isPipeWire, !Self.onlyPort(snapshot, plan) {
                    // WirePlumber restores the card's routes for the new profile just after the switch:
                    // choose the port once that burst is over, or WirePlumber undoes it. A sink with one
                    // port (a Bluetooth headset's) leaves it nothing to choose, and nothing to wait for.
                    snapshot = try server.snapshotWhenQuiet(timeout: timeout, quiet: 0.05, limit: 1)
                }
            } catch {
                throw .server(error)
            }
        }
        throw .profileSwitch(request.target.route)
    }

    /// Switches card profiles (`setCardProfile` actions) and returns the snapshot once the server shows
    /// every one, and on PipeWire once WirePlumber has restored the cards' routes after them.
    public func switchProfiles(_ switches: [Action], timeout: Double) throws(EngineError) -> Snapshot {
        do {
            var snapshot = try server.apply(switches, timeout: max(timeout, Self.settleSeconds)) { s in
                switches.allSatisfy { action in
                    guard case let .setCardProfile(card, profile) = action else { return true }
                    return s.cards.first { $0.name == card }?.activeProfile == profile
                }
            }
            if snapshot.server.isPipeWire {
                snapshot = try server.snapshotWhenQuiet(timeout: timeout, quiet: 0.05, limit: 1)
            }
            return snapshot
        } catch {
            throw .server(error)
        }
    }

    /// A card the call's record does not name that a move in the call switched to another profile (a
    /// headset that joined the call, put in HFP for it) is owed its profile from before: `call end`
    /// puts it back, or `watch --apply` when the card returns, if it left meanwhile (rule 8).
    static func oweProfiles(switchedFrom before: Snapshot, to after: Snapshot, _ store: any PreferenceStore) {
        let switched = before.cards.compactMap { card -> CallRecord.CardProfile? in
            guard let profile = card.activeProfile, let now = after.cards.first(where: { $0.name == card.name }),
                  now.activeProfile != profile else { return nil }
            return CallRecord.CardProfile(card: card.name, profile: profile)
        }
        guard !switched.isEmpty, let record = try? store.callRecord() else { return }
        let owed = switched.filter { card in !record.profiles.contains { $0.card == card.card } }
        guard !owed.isEmpty else { return }
        // The first profile owed is the one from before the call.
        store.updateOwedProfiles { current in current + owed.filter { card in !current.contains { $0.card == card.card } } }
    }

    /// Reads the server back after a new default was asked for, until `settled`, the server's own
    /// choice of port (`overruled`), or `limit` seconds: waiting on this connection while no client
    /// connects (it cannot miss the change then), and in slices of `staleAfter`; once a client has
    /// connected since the request (`clientsBefore`), a fresh connection is asked, once. So is one at
    /// the end, for a client this connection did not see (one that connected as it subscribed: a
    /// `set` then takes the whole `limit`, a rare case). A connection that does not count clients (a
    /// watcher's) asks after the first slice, as it cannot tell.
    /// A read the server does not answer within its slice is a slice waited, not a failure:
    /// pipewire-pulse answers on the thread that takes WirePlumber's changes in, and WirePlumber
    /// carrying out a default among 500 sinks keeps it busy for most of a second.
    func defaultShown(limit: Double, clientsBefore: Int, readBack: ReadBack, settled: (Snapshot) -> Bool,
                      overruled: (Snapshot) -> Bool) throws -> Snapshot {
        var waited = 0.0, refreshed = false
        var snapshot: Snapshot?
        repeat {
            let slice = min(Self.staleAfter, limit - waited)
            do {
                let read = try server.apply([], timeout: slice, readBack: readBack, settled: settled)
                if settled(read) || overruled(read) { return read }
                snapshot = read
            } catch let error as any ServerFailure where error.isDeadline {}
            waited += slice
            if !refreshed, server.clientsArrived.map({ $0 != clientsBefore }) ?? true || waited >= limit {
                _ = try server.refreshStaleDefaults(timeout: max(limit - waited, Self.staleAfter))
                refreshed = true
                return try server.apply([], timeout: max(limit - waited, Self.staleAfter), readBack: readBack, settled: settled)
            }
        } while waited < limit
        return try snapshot ?? server.apply([], timeout: Self.staleAfter, readBack: readBack, settled: settled)
    }

    /// The server shows the plan carried out: after a profile switch, the sink it brought
    /// (`sinkAfterSwitch`); otherwise the default sink with the wanted port.
    public static func settled(_ snapshot: Snapshot, _ plan: Plan) -> Bool {
        guard let output = plan.output else { return true }
        if plan.needsReplan { return sinkAfterSwitch(snapshot, plan) != nil }
        guard let sink = snapshot.defaultSink, sink.name == output.sink else { return false }
        return output.port == nil || sink.activePort == output.port
    }

    /// The planned output's device went: its card (or, for an output with no card, its sink) is no
    /// longer on the server. (A profile switch replaces a card's sink, never the card.)
    static func outputGone(_ snapshot: Snapshot, _ plan: Plan) -> Bool {
        guard let output = plan.output else { return false }
        if let card = output.cardName { return !snapshot.cards.contains { $0.name == card } }
        guard let sink = output.sink else { return false }
        return !snapshot.sinks.contains { $0.name == sink }
    }

    /// The default is the planned sink, on a third port: neither the one it had before routectl acted
    /// (the change has not shown yet) nor the planned one, which is still there to be chosen.
    static func portOverruled(_ snapshot: Snapshot, _ plan: Plan, before: String?) -> Bool {
        guard !plan.needsReplan, let output = plan.output, let port = output.port, let sink = snapshot.defaultSink,
              sink.name == output.sink, let active = sink.activePort else { return false }
        return active != port && active != before && sink.ports.contains { $0.name == port && $0.availability != .unavailable }
    }

    /// After a profile switch, the sink that carries the planned output has no other port.
    static func onlyPort(_ snapshot: Snapshot, _ plan: Plan) -> Bool {
        sinkAfterSwitch(snapshot, plan).map { $0.ports.count == 1 } ?? false
    }

    /// The sink a profile switch brought, not the one it replaces (PipeWire acknowledges before it
    /// switches): on the planned output's card, not the sink the output was planned on (PipeWire keeps a
    /// Bluetooth headset's sink name across the switch), carrying the planned port or an output port
    /// that only the profile switched to holds (one the old profile holds too is on the old sink).
    /// PipeWire gives a Bluetooth headset's HFP output a port of its own (`headset-hf-output`) beside
    /// the A2DP one (`headset-output`) the call was planned on.
    static func sinkAfterSwitch(_ snapshot: Snapshot, _ plan: Plan) -> Sink? {
        guard let output = plan.output else { return nil }
        var ports: Set<String> = output.port.map { [$0] } ?? []
        for case let .setCardProfile(name, profile) in plan.actions {
            guard let card = snapshot.cards.first(where: { $0.name == name }) else { continue }
            for cardPort in card.ports where cardPort.direction != .input && cardPort.profiles.contains(profile)
                && !(output.cardProfile.map(cardPort.profiles.contains) ?? false) {
                ports.insert(cardPort.port.name)
            }
        }
        return snapshot.sinks.first { sink in
            sink.index != output.sinkIndex && snapshot.card(of: sink)?.name == output.cardName
                && sink.ports.contains { ports.contains($0.name) }
        }
    }

    /// Unmutes the sink `--mute-on-fallback` muted, if it still is, and forgets it; routectl never
    /// unmutes what someone else muted.
    public static func unmuteWhatRoutectlMuted(_ server: any AudioServer, _ store: (any PreferenceStore)?, _ snapshot: Snapshot,
                                               timeout: Double) throws -> Snapshot {
        guard let store, let sink = store.mutedByRoutectl else { return snapshot }
        store.mutedByRoutectl = nil
        guard snapshot.sinks.first(where: { $0.name == sink })?.mute == true else { return snapshot }
        return try server.apply([.setSinkMute(sink: sink, mute: false)], timeout: timeout) { s in
            s.sinks.first { $0.name == sink }?.mute == false
        }
    }

    /// Honest reporting (rule 6): a plan to switch that the read-back does not show is a failure.
    public static func verify(_ result: Result) throws(EngineError) {
        guard case .switchTo = result.plan.outcome, let wanted = result.plan.output else { return }
        let status = result.status
        if status.output?.sink != wanted.sink || (wanted.port != nil && status.output?.port != wanted.port) {
            throw .notSwitched(wanted: wanted.id, route: status.route, actual: status.output?.id)
        }
    }
}
