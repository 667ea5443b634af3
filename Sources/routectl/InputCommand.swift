import Engine
import Pulse
import Routing
import Store

/// `routectl input list|set ID|clear`: the preferred microphone, by the ids `devices` prints.
extension RouteCommands {
    // MARK: input

    static func inputList(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let snapshot = try ServerAccess.snapshot(options)
        let preferences = try RouteCtl.preferences(for: snapshot, options)
        let status = Status(snapshot: snapshot)
        if options.json {
            return RouteCtl.write(JSON.object([
                ("preferred", preferences.preferredInput.map(JSON.string) ?? .null),
                ("inputs", .array(status.inputs.map(DevicesCommand.object))),
            ]).text + "\n")
        }
        let rows = status.inputs.map { i in
            [(i.isDefault ? "*" : " ") + (i.isNamed(by: preferences.preferredInput) ? "P" : " "),
             i.kind.rawValue, i.availability.isUsable ? "yes" : "no", i.id, i.description]
        }
        var out = rows.isEmpty ? "no inputs\n" : Console.table([["", "KIND", "AVAILABLE", "ID", "DESCRIPTION"]] + rows)
        if let preferred = preferences.preferredInput, !status.inputs.contains(where: { $0.isNamed(by: preferred) }) {
            out += "preferred input '\(Events.printable(preferred))' is not connected; it is used again when it returns\n"
        }
        return RouteCtl.write(out)
    }

    static func inputSet(_ id: String, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let lock: FileLock
        var persistent: PersistentState
        do {
            lock = try store.lockPersistent()
            persistent = try store.loadPersistent()
        } catch {
            throw State.failure(error)
        }
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connectToChange(options)
        let (snapshot, input): (Snapshot, Input) = try onServer {
            let before = try connection.snapshot(timeout: options.timeout)
            let status = Status(snapshot: before)
            // A source name means its port in use, else one that can be used.
            let ofSource = status.inputs.filter { $0.source == id }
            let activePort = before.sources.first { $0.name == id }?.activePort
            guard let input = status.inputs.first(where: { $0.id == id })
                ?? ofSource.first(where: { $0.port == activePort && $0.availability != .unavailable })
                ?? ofSource.first(where: { $0.availability != .unavailable }) ?? ofSource.first else {
                let names = status.inputs.map(\.id)
                throw Failure(status: .failed, message: "No input named '\(id)'.\(ArgumentParser.suggestion(id, names)) See 'routectl input list'.")
            }
            // A microphone whose jack is empty: the server would move the default on to whatever is
            // left (a monitor), leaving no microphone. Nothing is changed or recorded.
            guard input.availability != .unavailable else {
                throw Failure(status: .failed, message: "Input '\(input.id)' is not available (nothing is plugged into its jack); the default input stays '\(before.server.defaultSourceName ?? "none")'.")
            }
            let after = try connection.makeDefault(input, from: before, timeout: max(options.timeout, settleSeconds))
            return (after, input)
        }
        guard Status(snapshot: snapshot).inputs.contains(where: { $0.id == input.id && $0.isDefault }) else {
            throw Failure(status: .failed, message: "The server did not make '\(input.id)' the default input; it is '\(snapshot.server.defaultSourceName ?? "none")'")
        }
        persistent.preferredInput = input.id
        do { try store.savePersistent(persistent) } catch { throw State.failure(error) }
        return RouteCtl.write(options.json ? JSON.object([("preferred", .string(input.id))]).text + "\n" : "preferred    \(input.id)\n")
    }

    /// Mutes or unmutes (nil: toggles) the default input, read back; what `input mute` and D-Bus's
    /// MuteMic share. Fails (exit 1) when there is no default input.
    ///
    /// In a call the mute is the call's: it is recorded in `call.json` (under the route lock, as `call
    /// start` and `call end` write that file) before the server is asked, so that `watch --apply`
    /// keeps it as the call's input moves (a headset plugged, Bluetooth taking the call) and takes an
    /// unmute within a second of a move for the user's, not the server's. A change the server refuses
    /// puts the record back. The mute itself never waits on state: with `call.json` unreadable, or the
    /// route lock held past half a second (a watcher's move, a stopped command), it is made unrecorded.
    static func setMicMute(_ wanted: Bool?, on connection: PulseConnection, _ options: GlobalOptions) throws(Failure) -> Snapshot {
        let store = State.store()
        var lock: AnyObject?
        var call: CallRecord?
        if (try? State.call(store)) != nil, let held = try? StatePreferences(store).lockRoute(within: 0.5) {
            lock = held
            call = try? State.call(store)
        }
        defer { withExtendedLifetime(lock) {} }
        let before = try onServer { try connection.latestSnapshot(timeout: options.timeout, parts: [.sources]) }
        guard let source = before.defaultSource, !source.isMonitor else {
            throw Failure(status: .failed, message: "No microphone: the server has no default input (see 'routectl input list').")
        }
        let mute = wanted ?? !source.mute
        var recorded = false
        if let call, call.applied, call.callMute?.muted != mute || mute != source.mute {
            var marked = call
            marked.callMute = CallRecord.Mute(muted: mute, at: State.nowMilliseconds())
            recorded = (try? store.saveCall(marked)) != nil
        }
        guard mute != source.mute else { return before }
        do {
            return try onServer {
                try connection.apply([.setSourceMute(source: source.name, mute: mute)], timeout: max(options.timeout, settleSeconds),
                                     readBack: .snapshot([.sources])) { s in
                    s.sources.first { $0.name == source.name }?.mute == mute
                }
            }
        } catch {
            if recorded, let call { try? store.saveCall(call) }
            throw error
        }
    }

    static func inputClear(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        do {
            try State.store().updatePersistent { $0.preferredInput = nil }
        } catch {
            throw State.failure(error)
        }
        return RouteCtl.write(options.json ? #"{"preferred":null}"# + "\n" : "preferred    none\n")
    }

    /// `input mute [on|off|toggle]`: the default input's mute, read back from the server. No default
    /// input is an error for a change (exit 1) and `none` for the question.
    static func inputMute(_ change: MuteChange?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        guard let change else {
            let status = Status(snapshot: try ServerAccess.snapshot(options))
            let value = status.micMuted.map(JSON.bool) ?? .null
            return RouteCtl.write(options.json ? JSON.object([("mic_muted", value), ("source", status.defaultInput.map(JSON.string) ?? .null)]).text + "\n"
                                               : "mic_muted    \(QueryCommand.text(value))\n")
        }
        let after = try setMicMute(change == .toggle ? nil : change == .on, on: ServerAccess.connect(options), options)
        let status = Status(snapshot: after)
        let value = status.micMuted.map(JSON.bool) ?? .null
        return RouteCtl.write(options.json ? JSON.object([("mic_muted", value), ("source", status.defaultInput.map(JSON.string) ?? .null)]).text + "\n"
                                           : "mic_muted    \(QueryCommand.text(value))\n")
    }
}
