import Glibc
import Pulse
import Routing

/// `routectl watch [--apply [--mute-on-fallback]]` and `routectl wait ROUTE`.
///
/// The loop blocks in poll until the server notifies a change (no timers, no polling), refetches
/// once per burst, derives events by diffing against the previous snapshot, and with --apply lets
/// the policy decide and carries its decision out.
struct Watcher {
    let options: GlobalOptions
    let apply: Bool
    let muteOnFallback: Bool
    let connection: PulseConnection
    let store = State.store()
    var snapshot: Snapshot
    var policy: PolicyState
    /// Outputs that appeared in the last second, by id, with the monotonic time they did: a switch to
    /// one within that window is the server's reaction to its arrival (DESIGN.md's 1 s window).
    var recentlyAdded: [String: Double] = [:]

    static func run(_ options: GlobalOptions, apply: Bool, muteOnFallback: Bool) throws(Failure) -> ExitStatus {
        let lock = apply ? try ApplyLock.acquire(State.store()) : nil
        defer { withExtendedLifetime(lock) {} }
        let connection = try ServerAccess.connect(options)
        connection.stopOnSignalsAndClosedOutput()
        let snapshot: Snapshot
        do {
            try connection.subscribe(timeout: options.timeout)
            snapshot = try connection.snapshot(timeout: options.timeout)
        } catch {
            throw ServerAccess.failure(error)
        }
        var watcher = Watcher(options: options, apply: apply, muteOnFallback: muteOnFallback, connection: connection,
                              snapshot: snapshot, policy: PolicyState(status: Status(snapshot: snapshot)))
        return try watcher.loop()
    }

    mutating func loop() throws(Failure) -> ExitStatus {
        let status = Status(snapshot: snapshot)
        guard emit(.route(route: status.route, previous: nil, reason: .initial, output: status.output)) else { return .ok }
        if apply { clearStaleOverride(status) }
        while !connection.shouldStop {
            do {
                guard try connection.waitForChanges(timeout: nil) else { break }
                let next = try connection.snapshotAfterChange(timeout: options.timeout)
                guard try handle(Change(previous: snapshot, current: next), next) else { break }
            } catch let error as Failure where error.status == .stateFile {
                throw error
            } catch {
                guard connection.isConnected else {
                    // The server went away, while waiting or while acting on a change.
                    guard try recover(from: (error as? Failure)?.message ?? "\(error)") else { break }
                    continue
                }
                // A connected server refused one step (a stream that would not move, a device that
                // vanished meanwhile): say so and keep watching; the next change is handled afresh.
                Console.err("routectl: \((error as? Failure)?.message ?? "\(error)")\n")
            }
        }
        return .ok
    }

    /// Reports one change and, with --apply, acts on it. False when stdout is gone.
    mutating func handle(_ change: Change, _ next: Snapshot) throws -> Bool {
        let preferences = apply ? try preferences() : Preferences()
        let decision = apply ? Policy.decide(change, state: &policy, preferences: preferences, muteOnFallback: muteOnFallback) : Decision()
        let ownSet = externalSet(change)
        let clock = WaitCommand.monotonic()
        recentlyAdded = recentlyAdded.filter { clock - $0.value < 1 }
        for output in change.added { recentlyAdded[output.id] = clock }
        var events = Events.diff(change, own: ownSet, recentlyAdded: Set(recentlyAdded.keys))
        // The route event waits for routectl's own move, so that one user action is one route change.
        if decision.request != nil { events.removeAll { $0.type == "route" } }
        for event in events { guard emit(event) else { return false } }
        snapshot = next
        guard apply, !decision.isEmpty else { return true }

        if let cause = decision.clearOverride, let target = preferences.override, clearOverride() {
            guard emit(.overrideCleared(override: target, cause: cause)) else { return false }
        }
        var after = next
        if let request = decision.request {
            let result = try RouteCommands.route(connection, request, preferredInput: preferences.preferredInput,
                                                 timeout: options.timeout, reason: decision.reason ?? .override)
            after = result.snapshot
            if decision.muteFallback, result.status.route == .speaker, let sink = result.status.output?.sink {
                after = try connection.apply([.setSinkMute(sink: sink, mute: true)], timeout: options.timeout) { s in
                    s.sinks.first { $0.name == sink }?.mute == true
                }
            }
        }
        if let input = decision.restoreInput {
            after = try connection.apply(Planner.sourceActions(input, after), timeout: options.timeout) {
                Status(snapshot: $0).inputs.contains { $0.id == input.id && $0.isDefault }
            }
        }
        // One route event from where the user was to where the rules put the sound; the other events
        // of routectl's own steps (the microphone that followed, say) after it.
        let steps = Change(previous: next, current: after)
        var settled = Events.diff(steps).filter { $0.type != "route" }
        let before = change.previous, now = steps.current
        if before.route != now.route || before.output?.id != now.output?.id {
            settled.insert(.route(route: now.route, previous: before.route, reason: decision.reason ?? .override, output: now.output), at: 0)
        }
        for event in settled { guard emit(event) else { return false } }
        snapshot = after
        return true
    }

    /// A route change to the output routectl (`set`, `clear`, another `watch --apply`) announced it
    /// was moving to, moments ago, carries that command's reason.
    func externalSet(_ change: Change) -> (outputID: String, reason: RouteChangeReason)? {
        guard change.routeChanged, let output = change.current.output, let intent = store.loadIntent(),
              intent.output == output.id, State.nowMilliseconds() - intent.at <= 5000 else { return nil }
        return (output.id, intent.reason)
    }

    func preferences() throws(Failure) -> Preferences {
        do {
            let persistent = try store.loadPersistent()
            let record = store.overrideFile == nil ? nil : try store.loadOverride()
            return Preferences(defaultTarget: persistent.defaultTarget, override: record?.target, preferredInput: persistent.preferredInput)
        } catch {
            throw State.failure(error)
        }
    }

    /// Removes the override file under its lock; false when there was none.
    func clearOverride() -> Bool {
        guard let lock = try? store.lockOverride() else { return false }
        defer { withExtendedLifetime(lock) {} }
        guard (try? store.loadOverride()) ?? nil != nil else { return false }
        return (try? store.removeOverride()) != nil
    }

    /// An override set before this watcher started, whose devices have changed since, is dropped now.
    mutating func clearStaleOverride(_ status: Status) {
        guard let record = try? store.loadOverride(), let cause = record.staleness(currentExternals: status.externalKeys),
              clearOverride() else { return }
        _ = emit(.overrideCleared(override: record.target, cause: cause))
    }

    /// The server went away: say so, reconnect with backoff (capped at 2 s), re-apply what --apply
    /// owns, and say `recovered` only once connected and re-applied. Only connection failures are
    /// retried; a state file that cannot be read ends watch (exit 5). False when asked to stop.
    mutating func recover(from reason: String) throws(Failure) -> Bool {
        guard emit(.interrupted(reason: reason)) else { return false }
        var delay = 0.1
        while connection.pause(seconds: delay) {
            delay = min(delay * 2, 2.0)
            let fresh: Snapshot
            do {
                try connection.reconnect(timeout: 2)
                try connection.subscribe(timeout: options.timeout)
                fresh = try connection.snapshotWhenQuiet(timeout: options.timeout)
            } catch {
                continue
            }
            snapshot = fresh
            policy = PolicyState(status: Status(snapshot: fresh))
            if apply {
                clearStaleOverride(Status(snapshot: fresh))
                let preferences = try self.preferences()
                do {
                    let request = Policy.choice(Status(snapshot: fresh), policy, defaultTarget: preferences.effectiveTarget)
                    snapshot = try RouteCommands.route(connection, request, preferredInput: preferences.preferredInput,
                                                       timeout: options.timeout).snapshot
                    if let input = preferences.preferredInput, snapshot.sources.contains(where: { $0.name == input }),
                       snapshot.server.defaultSourceName != input {
                        snapshot = try connection.apply([.setDefaultSource(input)], timeout: options.timeout) {
                            $0.server.defaultSourceName == input
                        }
                    }
                } catch {
                    guard connection.isConnected else { continue }
                    Console.err("routectl: \((error as? Failure)?.message ?? "\(error)")\n")
                }
            }
            let status = Status(snapshot: snapshot)
            return emit(.recovered(route: status.route, output: status.output))
        }
        return false
    }

    /// Prints one event, flushed; false when stdout is gone (a closed pipe ends watch quietly).
    func emit(_ event: Event) -> Bool {
        Console.out(EventRenderer.line(event, json: options.json))
    }
}

/// One `watch --apply` per user session: an flock on a file in the runtime dir that holds the pid.
enum ApplyLock {
    static func acquire(_ store: StateStore) throws(Failure) -> FileLock {
        guard let overrideFile = store.overrideFile else {
            throw Failure(status: .stateFile, message: "$XDG_RUNTIME_DIR: not set; 'watch --apply' keeps its lock in the runtime directory")
        }
        // Taking (and dropping) the override's lock creates routectl's runtime dir and checks its owner.
        do { _ = try store.lockOverride() } catch { throw State.failure(error) }
        let path = overrideFile.replacingSuffix("override.json", with: "apply.lock")
        do {
            let lock = try FileLock(path, wait: false)
            lock.record("\(getpid())\n")
            return lock
        } catch where error.errno == EWOULDBLOCK {
            let pid = (try? FileIO.read(path)).map { String(decoding: $0, as: UTF8.self).trimmingNewline } ?? ""
            throw Failure(status: .failed, message: "Another 'routectl watch --apply' is running (pid \(pid.isEmpty ? "unknown" : pid)); one per session.")
        } catch {
            throw Failure(status: .stateFile, message: "\(path): cannot lock: \(error)")
        }
    }
}

extension String {
    func replacingSuffix(_ suffix: String, with replacement: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) + replacement : self
    }

    var trimmingNewline: String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }
}

enum WaitCommand {
    /// Exit 0 as soon as the route is `route`; 1 at the timeout.
    static func run(_ route: Route, timeout: Double?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let connection = try ServerAccess.connect(options)
        connection.stopOnSignalsAndClosedOutput()
        var deadline: Double?
        if let timeout { deadline = monotonic() + timeout }
        do {
            try connection.subscribe(timeout: options.timeout)
            while true {
                let status = Status(snapshot: try connection.snapshot(timeout: options.timeout))
                if status.route == route {
                    if !options.quiet { Console.out("\(route.rawValue)\n") }
                    return .ok
                }
                let remaining = deadline.map { $0 - monotonic() }
                if let remaining, remaining <= 0 { return .failed }
                guard try connection.waitForChanges(timeout: remaining) else {
                    return .failed
                }
            }
        } catch {
            throw ServerAccess.failure(error)
        }
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
