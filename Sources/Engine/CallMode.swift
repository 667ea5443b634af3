import Routing

/// Call mode (DESIGN.md rule 8): `call start` records what the call will change in `call.json` before
/// changing anything, sets the override aside and applies the call's route (an external headset, in
/// HFP for Bluetooth, else the receiver or the speaker, with the microphone following); `call end`
/// puts every card profile, the route, the override and the microphone back. Reacting to plugs during
/// the call is `watch --apply`'s job, as at any time. The caller holds the route lock.
public struct CallMode {
    public let server: any AudioServer
    public let store: any PreferenceStore
    public let clocks: Clocks

    public init(server: any AudioServer, store: any PreferenceStore, clocks: Clocks) {
        self.server = server
        self.store = store
        self.clocks = clocks
    }

    public struct Started {
        public var result: RouteApplier.Result
        public var record: CallRecord
        /// False when a call was already in progress (this start re-applied it).
        public var isNew: Bool
    }

    /// Enters call mode, or re-applies the call in progress (`speaker` true moves it to the speaker).
    /// A server refusal puts everything back as it was and throws: nothing is left half-applied.
    public func start(speaker: Bool, timeout: Double) throws(EngineError) -> Started {
        let before: Snapshot
        do { before = try server.latestSnapshot(timeout: timeout) } catch { throw .server(error) }
        let existing: CallRecord?
        do { existing = try store.callRecord() } catch { throw .state(error) }
        var owed: [CallRecord.CardProfile] = []
        // Derived once: the record, the ruling and the first plan all read this one.
        let status = Status(snapshot: before)
        var record: CallRecord
        if let existing {
            record = existing
            if speaker { record.speaker = true }
        } else {
            let saved: OverrideRecord?
            do { saved = try store.overrideRecord() } catch { throw .state(error) }
            // A card an earlier call still owes its profile (it left during that call, and the server
            // gave it back the call's when it returned) had that one before the call, as far as this
            // call is concerned: its end puts that back. One given another profile since keeps it.
            owed = store.owedProfiles()
            // Not applied yet: watchers wait for the route before they report the call.
            record = CallRecord(startedAt: clocks.wallMilliseconds(), speaker: speaker,
                                profiles: before.cards.compactMap { card in
                                    (owed.first { $0.isStillOwed(by: card) }?.profile ?? card.activeProfile)
                                        .map { CallRecord.CardProfile(card: card.name, profile: $0) }
                                },
                                output: status.output?.id, defaultSink: before.server.defaultSinkName,
                                defaultSource: before.server.defaultSourceName, micMuted: before.defaultSource?.mute,
                                override: saved, externals: status.externalKeys,
                                inputs: status.inputs.filter { $0.availability.isUsable }.map(\.id), applied: false)
        }
        // What the call changes is on disk before anything changes: `call end` (or a crash's later
        // `call end`) can always put it back. Only then does the override step aside.
        do {
            try store.saveCall(record)
            if existing == nil, record.override != nil { try store.replaceOverride(nil) }
        } catch {
            throw .state(error)
        }
        if owed.contains(where: { owed in record.profiles.contains { $0.card == owed.card } }) {
            // What this call's record now owes the cards here, it no longer owes apart.
            store.updateOwedProfiles { $0.filter { owed in !record.profiles.contains { $0.card == owed.card } } }
        }
        let preferences: Preferences
        do { preferences = try store.preferences() } catch { throw .state(error) }
        let request = preferences.override.map { RouteRequest(target: $0, force: true) }
            ?? Policy.ruling(status, preferences)
        let applier = RouteApplier(server: server, store: store, clocks: clocks)
        do {
            var result = try applier.route(request, preferredInput: nil, timeout: timeout, from: before, status: status,
                                           reason: .call, inCall: true)
            try RouteApplier.verify(result)
            let followed = result.plan.actions.compactMap { action -> String? in
                if case let .setDefaultSource(name) = action { return name } else { return nil }
            }.last
            if let followed, result.snapshot.server.defaultSourceName != followed {
                // The microphone that followed the route can show a moment after the sink it
                // follows (PipeWire, the route already on the headset): its mute is the call's.
                if let shown = try defaultSourceShown(followed, timeout: min(timeout, 1)) {
                    result = RouteApplier.Result(snapshot: shown, plan: result.plan)
                }
            }
            if existing == nil, let source = result.snapshot.defaultSource, source.name != record.defaultSource {
                // The call's own microphone: its mute is noted for call end, then it is made live.
                record.callSource = source.name
                record.callSourceMuted = source.mute
                if record.micMuted == false { result = try unmuted(result, timeout: timeout) }
            }
            if record.callMute == nil, let source = result.snapshot.defaultSource, !source.isMonitor {
                // The call's mute from here on, which `watch --apply` keeps as the call's input moves.
                record.callMute = CallRecord.Mute(muted: source.mute, at: clocks.wallMilliseconds())
            }
            if !record.applied { markApplied(&record) }
            return Started(result: result, record: record, isNew: existing == nil)
        } catch {
            if let existing {
                // A re-apply that failed leaves the call as it was (its speaker flag too).
                try? store.saveCall(existing)
            } else {
                do { _ = try end(timeout: timeout) } catch { abandon(record) }
            }
            throw error
        }
    }

    /// The override from before the call comes back unless a device came or went meanwhile (it would
    /// have been cleared then, as always).
    static func restoredOverride(_ record: CallRecord, _ status: Status) -> OverrideRecord? {
        record.override.flatMap { $0.staleness(currentExternals: status.externalKeys) == nil ? $0 : nil }
    }

    /// Where `call end` goes: the output in use before the call when it is still there and no external
    /// device came or went (an override that was only recorded, rule 2, left it there: it still does),
    /// else the restored override, else the rules. Decided on the call's own route (`status` before the
    /// profiles are restored): the default a server picks as they are is its reaction (rule 7), so the
    /// device the call was on is named.
    static func request(_ record: CallRecord, _ status: Status, _ preferences: Preferences) -> RouteRequest {
        if let id = record.output,
           let output = status.outputs.first(where: { $0.id == id && $0.isAvailable && !$0.isHiddenByJack }),
           status.externalKeys == record.externals {
            // Any kind: an HDMI output the call took the sound from gets it back.
            return .output(output)
        }
        if let override = preferences.override { return RouteRequest(target: override, force: true) }
        return Policy.ruling(status, preferences, namingTheDeviceInUse: true)
    }

    /// A new call does not inherit the mute an earlier call left on its microphone (the server
    /// remembers each source's): live before the call, live in it. Call end puts its mute back.
    func unmuted(_ result: RouteApplier.Result, timeout: Double) throws(EngineError) -> RouteApplier.Result {
        guard let source = result.snapshot.defaultSource, source.mute else { return result }
        return RouteApplier.Result(snapshot: try setMute(of: source.name, to: false, timeout: timeout), plan: result.plan)
    }

    /// The server read back until `source` is its default, or the time ran out. Best effort: nil when
    /// a read-back itself ran out of time (the call goes on as its read-back showed it); a server
    /// gone is an error.
    func defaultSourceShown(_ source: String, timeout: Double) throws(EngineError) -> Snapshot? {
        do {
            return try server.apply([], timeout: timeout) { $0.server.defaultSourceName == source }
        } catch {
            guard server.isConnected else { throw .server(error) }
            return nil
        }
    }

    /// Mutes or unmutes one source, read back.
    func setMute(of source: String, to mute: Bool, timeout: Double) throws(EngineError) -> Snapshot {
        do {
            return try server.apply([.setSourceMute(source: source, mute: mute)], timeout: timeout) { s in
                s.sources.first { $0.name == source }?.mute == mute
            }
        } catch {
            throw .server(error)
        }
    }

    /// A new call whose start failed and could not be undone either (the server went away on the
    /// way): it failed, so no call stays on record (`call status`, `watch --apply` and the D-Bus
    /// properties agree there is none). What it may have changed is kept as for a card that leaves
    /// during a call: the cards are owed their profiles from before it (`watch --apply` puts back a
    /// card the returning server gives the call's profile; the next `call start` records them as the
    /// ones to restore), and the override it set aside comes back. call.json goes last.
    func abandon(_ record: CallRecord) {
        store.updateOwedProfiles { current in
            record.profiles + current.filter { owed in !record.profiles.contains { $0.card == owed.card } }
        }
        if let override = record.override { try? store.replaceOverride(override) }
        try? store.removeCall()
    }

    /// Says in `call.json` that the call's route is applied (watchers report the call from then on).
    /// The call is on either way: a failed write only delays the watchers' `call` event.
    func markApplied(_ record: inout CallRecord) {
        record.applied = true
        try? store.saveCall(record)
    }

    /// Leaves call mode: restores the card profiles, the route (the output in use before the call when
    /// it is still there and no external device came or went, else the rules), the default microphone
    /// and its mute, and the override. Nil when no call was in progress.
    public func end(timeout: Double) throws(EngineError) -> RouteApplier.Result? {
        let record: CallRecord
        do {
            guard let saved = try store.callRecord() else { return nil }
            record = saved
        } catch {
            throw .state(error)
        }
        var snapshot: Snapshot
        do { snapshot = try server.latestSnapshot(timeout: timeout) } catch { throw .server(error) }
        // Watchers report the whole way back as one route change, reason `call`: announced with the
        // output it leads to (an id outlives the profile switch), decided as below on what is here now.
        var announced = record.output
        var decided: RouteRequest?
        if var preferences = try? store.preferences() {
            let status = Status(snapshot: snapshot)
            preferences.override = Self.restoredOverride(record, status)?.target
            preferences.callTarget = nil
            let request = Self.request(record, status, preferences)
            decided = request
            if let output = (try? Planner.plan(snapshot, request, PlanContext(keepCardsOff: true), status: status))?.output {
                announced = output.id
            }
        }
        let intent = RouteIntent(output: announced ?? "", reason: .call, at: clocks.wallMilliseconds())
        store.saveIntent(intent)
        defer {
            var done = intent
            done.done = true
            store.saveIntent(done)
        }
        // The call's own microphone gets the mute the call found it with, before its profile goes.
        if let name = record.callSource, let muted = record.callSourceMuted,
           let source = snapshot.sources.first(where: { $0.name == name }), source.mute != muted {
            snapshot = try setMute(of: name, to: muted, timeout: timeout)
        }
        // What the call found, and what earlier calls still owe cards its record does not name (one that
        // came back during this call, or one the watcher switched to HFP as it joined the call): that
        // only while the card is in a call's profile.
        let owedBefore = store.owedProfiles()
        let owedApart = owedBefore.filter { owed in !record.profiles.contains { $0.card == owed.card } }
        let profiles = record.profiles + owedApart
        var restore = profiles.compactMap { saved -> Action? in
            guard let card = snapshot.cards.first(where: { $0.name == saved.card }), card.activeProfile != saved.profile,
                  card.profiles.contains(where: { $0.name == saved.profile && $0.available }),
                  !owedApart.contains(saved) || saved.isDue(on: card) else { return nil }
            return .setCardProfile(card: saved.card, profile: saved.profile)
        }
        // A Bluetooth headset that connected during the call went to HFP for it: back to its best
        // other profile (A2DP), as rule 8 says ("for the call only"); so does one whose profile from
        // before is not offered now. One that was in HFP before the call (a softphone's) stays.
        for card in snapshot.cards where !restore.contains(where: { if case let .setCardProfile(name, _) = $0 { name == card.name } else { false } }) {
            if let saved = profiles.first(where: { $0.card == card.name }),
               saved.profile == card.activeProfile || CallRecord.CardProfile.isCalls(saved.profile) { continue }
            guard let active = card.activeProfile, Planner.isBluetoothHeadsetProfile(active),
                  let music = card.profiles.filter({ $0.available && $0.sinks > 0 && !Planner.isBluetoothHeadsetProfile($0.name) })
                      .max(by: { $0.priority < $1.priority }) else { continue }
            restore.append(.setCardProfile(card: card.name, profile: music.name))
        }
        let applier = RouteApplier(server: server, store: store, clocks: clocks)
        if !restore.isEmpty { snapshot = try applier.switchProfiles(restore, timeout: timeout) }
        // A card that left during the call cannot be put back now; it is owed its profile from before
        // the call (`watch --apply` pays it when the card returns, the next `call start` records it).
        let away = profiles.filter { saved in !snapshot.cards.contains { $0.name == saved.card } }
        if away != owedBefore {
            store.updateOwedProfiles { current in
                away + current.filter { owed in !profiles.contains { $0.card == owed.card } }
            }
        }
        let status = Status(snapshot: snapshot)
        let override = Self.restoredOverride(record, status)
        var preferences: Preferences
        do {
            try store.replaceOverride(override)
            preferences = try store.preferences()
        } catch {
            throw .state(error)
        }
        // call.json goes last, once everything is back: a failure on the way leaves it for another `call end`.
        preferences.callTarget = nil
        let request = decided ?? Self.request(record, status, preferences)
        // The profiles are as they were before the call: a card that was off stays off.
        var result = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout, from: snapshot,
                                       reason: .call, keepCardsOff: true)
        if result.snapshot.server.isPipeWire, let wanted = result.plan.output?.id {
            // WirePlumber may restore the route it remembers for the profile late, after the read-back
            // showed routectl's: once it is quiet, put the route back if it moved.
            let quiet: Snapshot
            do { quiet = try server.snapshotWhenQuiet(timeout: timeout, quiet: 0.1, limit: 1) } catch { throw .server(error) }
            if Status(snapshot: quiet).output?.id != wanted {
                result = try applier.route(request, preferredInput: preferences.preferredInput, timeout: timeout, from: quiet,
                                           reason: .call, keepCardsOff: true)
            }
        }
        // The microphone as it was: the default source, then its mute.
        var mic: [Action] = []
        let source = record.defaultSource.flatMap { name in result.snapshot.sources.first { $0.name == name } }
            ?? result.snapshot.defaultSource
        // The microphone from before the call comes back, as the output does, when no external device
        // came or went and the preferred input could be used then too (a microphone chosen over it
        // stays chosen). Otherwise a preferred input the route's move applied stands (one that came
        // during the call is made the default as it returns, as always); one it could not (absent,
        // its jack empty) leaves the microphone from before the call to be put back.
        let preferred = Status(snapshot: result.snapshot).usableInput(preferred: preferences.preferredInput)
        let preferredStands = preferred.map { input in
            status.externalKeys != record.externals || !(record.inputs?.contains(input.id) ?? true)
        } ?? false
        if let source, source.name != result.snapshot.server.defaultSourceName, !preferredStands {
            mic.append(.setDefaultSource(source.name))
        }
        if let source, let muted = record.micMuted, source.mute != muted { mic.append(.setSourceMute(source: source.name, mute: muted)) }
        if !mic.isEmpty {
            do {
                let after = try server.apply(mic, timeout: timeout) { s in
                    s.sources.first { $0.name == source!.name }?.mute == (record.micMuted ?? source!.mute)
                }
                result = RouteApplier.Result(snapshot: after, plan: result.plan)
            } catch {
                throw .server(error)
            }
        }
        do { try store.removeCall() } catch { throw .state(error) }
        return result
    }
}

extension CallRecord.CardProfile {
    /// Whether `card` is still owed this profile: it is in a call's profile (HFP/HSP, a Voice Call
    /// verb), as the server gave it back, and this one is not. A card given any other profile since,
    /// by a user or the server, owes nothing; one whose profile from before was a call's (a softphone's
    /// HFP) neither.
    func isStillOwed(by card: Card) -> Bool {
        guard card.name == self.card, let active = card.activeProfile else { return false }
        return Self.isCalls(active) && !Self.isCalls(profile)
    }

    /// Still owed, and offered: the profile can be put back now. (PipeWire offers a headset's A2DP
    /// profiles only once their transport is up.)
    func isDue(on card: Card) -> Bool {
        isStillOwed(by: card) && card.profiles.contains { $0.name == profile && $0.available }
    }

    static func isCalls(_ profile: String) -> Bool {
        Planner.isCallProfile(profile) || Planner.isBluetoothHeadsetProfile(profile)
    }
}
