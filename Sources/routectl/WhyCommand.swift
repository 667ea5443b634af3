import Bus
import Glibc
import Pulse
import Routing
import Store

/// `routectl why`: which rule put the route where it is, which output and port carry it, since when,
/// and which other policies on this machine could move it (DESIGN.md §1 "Desktop policy"). What a
/// user runs when the sound went somewhere unexpected, and what a bug report should contain.
enum WhyCommand {
    struct Answer {
        var rule: String
        var explanation: String
        /// When the rule took effect, in milliseconds, when routectl knows.
        var since: Int64?
    }

    static func run(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let snapshot: Snapshot
        var policies: [String] = []
        var decision: DecisionRecord?
        var override: OverrideRecord?
        var call: CallRecord?
        var intent: RouteIntent?
        let preferences: Preferences
        if options.snapshot != nil {
            snapshot = try ServerAccess.snapshot(options)
            preferences = snapshot.routectl ?? Preferences()
            decision = snapshot.decision
            intent = snapshot.lastMove
            policies = snapshot.policies
            // Only their times are in the dump, which is all `explain` reads of them.
            if let target = preferences.override, let at = snapshot.overrideSetAt {
                override = OverrideRecord(target: target, setAt: at / 1000, externals: [])
            }
            if let target = preferences.callTarget, let at = snapshot.callStartedAt {
                call = CallRecord(startedAt: at, speaker: target == .speaker)
            }
        } else {
            let connection = try ServerAccess.connect(options)
            snapshot = try RouteCommands.onServer { try connection.snapshot(timeout: options.timeout) }
            let store = State.store()
            preferences = try State.preferences(store, current: Status(snapshot: snapshot), quiet: options.quiet)
            do {
                override = store.overrideFile == nil ? nil : try store.loadOverride()
                call = store.call == nil ? nil : try store.loadCall()
            } catch {
                throw State.failure(error)
            }
            decision = store.loadDecision()
            intent = store.loadIntent()
            policies = otherPolicies(connection, snapshot, store, options)
        }
        let status = Status(snapshot: snapshot)
        let answer = explain(status, preferences, override: override, call: call, decision: decision, intent: intent)
        let lastAct = decision.map { d in
            (d.reason == .routeConfigurationChange ? "watch --apply saw another client's pick" : "watch --apply: \(d.reason.rawValue)"
                + (d.cause.map { ", \($0)" } ?? ""))
                + " -> \(d.output ?? "none") at \(clock(d.at))"
        }
        if options.json {
            return RouteCtl.write(JSON.object([
                ("route", .string(status.route.rawValue)), ("rule", .string(answer.rule)),
                ("explanation", .string(answer.explanation)),
                ("since", answer.since.map { .string(EventRenderer.iso8601(CallCommand.timespecOf(milliseconds: $0))) } ?? .null),
                ("output", status.output.map(DevicesCommand.object) ?? .null),
                ("decision", decision.map { d in
                    .object([("reason", .string(d.reason.rawValue)), ("cause", d.cause.map(JSON.string) ?? .null),
                             ("output", d.output.map(JSON.string) ?? .null),
                             ("at", .string(EventRenderer.iso8601(CallCommand.timespecOf(milliseconds: d.at))))])
                } ?? .null),
                ("policies", .array(policies.map(JSON.string))),
            ]).text + "\n")
        }
        var rows = [
            ["route", status.route.rawValue + (status.output.map { " \($0.id)" } ?? "")],
            ["rule", "\(answer.rule): \(answer.explanation)"],
        ]
        if let output = status.output {
            rows.append(["carried by", "sink \(output.sink ?? "none")" + (output.port.map { ", port \($0)" } ?? "")])
        }
        if let since = answer.since { rows.append(["since", clock(since)]) }
        if let lastAct { rows.append(["last act", lastAct]) }
        for (i, policy) in policies.enumerated() { rows.append([i == 0 ? "policies" : "", policy]) }
        return RouteCtl.write(Console.table(rows))
    }

    /// When the override was set, in milliseconds (`setAt` is in seconds); nil past what that holds.
    static func milliseconds(_ record: OverrideRecord) -> Int64? {
        let (ms, overflow) = record.setAt.multipliedReportingOverflow(by: 1000)
        return overflow ? nil : ms
    }

    /// The rule that explains the route now, most specific first.
    static func explain(_ status: Status, _ preferences: Preferences, override: OverrideRecord?, call: CallRecord?,
                        decision: DecisionRecord?, intent: RouteIntent? = nil) -> Answer {
        guard let output = status.output else {
            return Answer(rule: "none", explanation: "the server has no default output")
        }
        // The watcher's own act that put the route here (another client's pick it recorded is not one).
        let actedHere = decision.flatMap { $0.output == output.id && $0.reason != .routeConfigurationChange ? $0 : nil }
        let since = arrival(at: output, decision: decision, intent: intent)
        if preferences.inCall {
            // Rule 8 puts a call on a headset that can carry it, else on the call's target; what else
            // carries it was asked for (`set` during the call) or picked by someone else.
            let kind = RouteTarget(route: output.route)
            if let target = preferences.override, kind == target, !output.route.isExternal || !output.takesCalls {
                return Answer(rule: "override", explanation: "'routectl set \(target.rawValue)' during the call (temporary: until clear or a device change)",
                              since: override.flatMap(milliseconds))
            }
            let base = preferences.baseTarget
            // (The speaker stands in for a receiver a laptop does not have: rule 4.)
            // A headset another client picked during the call (the watcher, which keeps the rules,
            // respected it) is that client's choice, until routectl moves the route again.
            let pickedByAnother = output.route.isExternal && decision.map { pick in
                pick.isPick(of: output.id, duringCallFrom: call?.startedAt ?? .max) && (intent.map { $0.at <= pick.at } ?? true)
            } == true
            // A built-in output is the call's target only while no headset that can carry the call is
            // connected: beside one, it was picked (another client, the server), not rule 8's.
            let headsetForTheCall = !Policy.ranked(status, PolicyState(status: status), priority: preferences.priority, inCall: true).isEmpty
            if !pickedByAnother,
               output.route.isExternal ? output.takesCalls
                   : !headsetForTheCall && (kind == base || output.route == .speaker && !status.isAvailable(base.route)) {
                let what = output.route.isExternal ? "a connected headset takes the call" : "the call's \(output.route.rawValue)"
                // Since the later of the call's start and the route's coming here (a headset plugged
                // during the call took it then).
                return Answer(rule: "call", explanation: "a call is in progress (rule 8): \(what)",
                              since: [call?.startedAt, since].compactMap { $0 }.max())
            }
            return other(since)
        }
        // A restore explains the route until an override set after it does (`set_at` is in seconds: one
        // set in the restore's second counts as after it).
        if let actedHere, actedHere.reason == .restored, override.map({ $0.setAt < actedHere.at / 1000 }) ?? true {
            return Answer(rule: "restored", explanation: "the server moved the route to an unlisted output as it appeared; routectl put it back",
                          since: actedHere.at)
        }
        if let target = preferences.override, RouteTarget(route: output.route) == target {
            return Answer(rule: "override", explanation: "'routectl set \(target.rawValue)' (temporary: until clear or a device change)",
                          since: override.flatMap(milliseconds))
        }
        // The priority list explains the output it ranks first, and no other: one listed lower, or an
        // unlisted one, carrying the sound while the list's first is present was someone else's pick.
        // Between devices of one entry (a kind) recency decides, which a watcher knows and this
        // guess from sink numbers may not (rule 3, below); so does a decision the watcher recorded.
        func entry(_ o: Output) -> Int? {
            preferences.priority.firstIndex { $0 == o.id || $0 == o.sink || (o.route.isExternal && $0 == o.route.rawValue) }
        }
        // Connection order as the sink numbers tell it, for the list's ranking and rule 3 alike.
        let recency = PolicyState(status: status)
        var listFirst: Output?
        if !preferences.priority.isEmpty, let first = Policy.ranked(status, recency, priority: preferences.priority).first,
           let firstRank = entry(first) {
            let rank = entry(output)
            if first.id == output.id || (actedHere != nil && rank != nil) {
                let shown = rank ?? firstRank
                return Answer(rule: "priority", explanation: "entry \(shown + 1) of the priority list ('\(preferences.priority[shown])')",
                              since: since)
            }
            if rank != firstRank, actedHere == nil { listFirst = first }
        }
        // Not applied yet ('priority set' moves nothing by itself) or overruled by another client.
        let listNote = listFirst.map { "; the priority list ranks '\($0.id)' first ('routectl clear' applies it)" } ?? ""
        if output.route.isExternal, listFirst == nil {
            // Rule 3 explains the most recently connected device only; another one in use was chosen
            // by someone else (a mixer, pactl), which routectl respects, below. Without a watcher's
            // decision, connection order is known only between devices that came with a sink of their
            // own; headphones in a jack are a port of a sink that was there before.
            let mostRecent = Policy.choice(status, recency, defaultTarget: preferences.baseTarget).device
            let orderKnown = !status.outputs.contains { $0.sink != nil && $0.sink == output.sink && $0.id != output.id }
            if actedHere != nil || !orderKnown || mostRecent == nil || mostRecent == output.id {
                return Answer(rule: "external-device", explanation: "an external device is connected; the most recently connected wins (rule 3)",
                              since: since)
            }
        }
        // An external device the rules would give the sound to (rule 3) is here, and the sound is on a
        // built-in output with no override or list to say so: another client's pick (a mixer putting
        // the port back on the speaker). A decision of the watcher's for this output does not say
        // otherwise: it may be from before the device came.
        let passedOver = !output.route.isExternal && listFirst == nil
            && Policy.choice(status, recency, defaultTarget: preferences.baseTarget).device.map { $0 != output.id } == true
        if RouteTarget(route: output.route) == preferences.effectiveTarget, !passedOver {
            let layer = preferences.override == nil ? "the persistent default" : "the override"
            return Answer(rule: preferences.override == nil ? "default" : "override",
                          explanation: "\(layer), \(preferences.effectiveTarget.rawValue)" + listNote, since: since)
        }
        if !passedOver, !output.route.isExternal, !status.isAvailable(preferences.effectiveTarget.route) {
            if output.route == .speaker {
                return Answer(rule: "fallback", explanation: "no \(preferences.effectiveTarget.route.rawValue) output here; the speaker stands in (rule 4)" + listNote,
                              since: since)
            }
            if !status.isAvailable(.speaker) {
                // A desktop's line-out: rule 4 has no speaker to fall back to, and the route stays.
                return Answer(rule: "fallback", explanation: "no \(preferences.effectiveTarget.route.rawValue) output here and no speaker to fall back to (rule 4); "
                                  + "the route stays where it is" + listNote, since: since)
            }
        }
        if let intent, intent.done, intent.output == output.id {
            // No rule puts the route here now, but routectl's own last move did (`set`, `clear`, a
            // call, the watcher; the priority list or the default changed since, with no watcher to
            // apply them): not another client's pick, as far as routectl can tell.
            return Answer(rule: "earlier",
                          explanation: "routectl's last move put it here (\(intent.reason.rawValue)); the rules as they are now "
                              + "would not ('routectl clear' applies them)" + listNote,
                          since: intent.at)
        }
        return other(since)
    }

    static func other(_ since: Int64?) -> Answer {
        Answer(rule: "other", explanation: "not routectl's rules: another client (pavucontrol, pactl, an applet) or the server chose it; routectl respects that",
               since: since)
    }

    /// When the route came to `output`, as far as routectl knows: the later of its last move (a
    /// command's or the watcher's, `intent.json`) and the watcher's last decision, when that one put
    /// it there. One that put it elsewhere means it came back since by another's hand, at a time
    /// routectl does not know.
    static func arrival(at output: Output, decision: DecisionRecord?, intent: RouteIntent?) -> Int64? {
        let moves = [decision.map { ($0.output, $0.at) }, intent.flatMap { $0.done ? ($0.output, $0.at) : nil }].compactMap { $0 }
        guard let last = moves.max(by: { $0.1 < $1.1 }) else { return nil }
        return last.0 == output.id ? last.1 : nil
    }

    /// What else on this machine moves the route: routectl's own watcher, WirePlumber's remembered
    /// defaults and config files, PulseAudio's switching modules.
    static func otherPolicies(_ connection: PulseConnection, _ snapshot: Snapshot, _ store: StateStore, _ options: GlobalOptions) -> [String] {
        var found: [String] = []
        var watcher: String?
        if ApplyLock.isHeld(store) {
            let pid = store.applyLockFile.flatMap { try? FileIO.read($0) }.map { String(decoding: $0, as: UTF8.self).trimmingNewline } ?? "?"
            watcher = pid
            found.append("routectl watch --apply is running (pid \(pid)): it keeps the rules")
        } else {
            found.append("routectl watch --apply is not running: plugs and unplugs are left to the server")
        }
        found += busOwners(watcher: watcher)
        if snapshot.server.isPipeWire {
            let home = env("HOME") ?? ""
            let stateHome = env("XDG_STATE_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "\(home)/.local/state"
            let file = "\(stateHome)/wireplumber/default-nodes"
            if let bytes = try? FileIO.read(file, limit: 65536) {
                for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("default.configured.audio.sink=") {
                    found.append("WirePlumber remembers the default sink '\(line.dropFirst("default.configured.audio.sink=".count))' (\(file))")
                }
            }
            let configHome = env("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "\(home)/.config"
            for dir in ["\(configHome)/wireplumber", "/etc/wireplumber"] where holdsFiles(dir) {
                found.append("WirePlumber configuration in \(dir)")
            }
        } else if let modules = try? connection.moduleNames(timeout: options.timeout) {
            for module in ["module-switch-on-connect", "module-switch-on-port-available", "module-role-cork"] where modules.contains(module) {
                found.append("PulseAudio loads \(module)")
            }
        }
        return found
    }

    /// routectl's and callaudiod's names on the session bus, and who holds them.
    static func busOwners(watcher: String?) -> [String] {
        BusService.owners(of: [BusService.name, BusService.callAudioName]).map { owner in
            let pid = owner.pid.map(String.init)
            let comm = pid.flatMap { try? FileIO.read("/proc/\($0)/comm", limit: 256) }.map { String(decoding: $0, as: UTF8.self).trimmingNewline }
            if let pid, pid == watcher { return "\(owner.name) is served by this routectl watch --apply --dbus (pid \(pid))" }
            return "\(owner.name) is owned by \(comm ?? "another program") (\(owner.unique)\(pid.map { ", pid \($0)" } ?? ""))"
        }
    }

    static func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    /// A directory with at least one entry besides . and ..
    static func holdsFiles(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { return true }
        }
        return false
    }

    /// Local wall-clock time of a millisecond timestamp, as `watch` prints it.
    static func clock(_ milliseconds: Int64) -> String {
        var tm = Glibc.tm()
        var seconds = time_t(milliseconds / 1000)
        localtime_r(&seconds, &tm)
        return "\(EventRenderer.two(tm.tm_hour)):\(EventRenderer.two(tm.tm_min)):\(EventRenderer.two(tm.tm_sec))"
    }
}
