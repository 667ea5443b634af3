import Glibc
import Pulse
import Routing
import Store

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
    /// The route last printed, which the next route event says it was.
    var reported: (route: Route, output: Output?)
    /// A route move in progress whose route event waits until it is done, so that one user action is
    /// one route event in both modes and the server's transients on the way are not reported.
    var hold: RouteHold?
    /// The intent (by its time) already turned into a hold: each is adopted once.
    var adoptedIntent: Int64?
    /// Outputs that appeared in the last second, by id, with the monotonic time they did: a switch to
    /// one within that window is the server's reaction to its arrival (DESIGN.md's 1 s window).
    var recentlyAdded: [String: Double] = [:]

    static func run(_ options: GlobalOptions, apply: Bool, muteOnFallback: Bool) throws(Failure) -> ExitStatus {
        if apply { try State.validate() }
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
        let status = Status(snapshot: snapshot)
        var watcher = Watcher(options: options, apply: apply, muteOnFallback: muteOnFallback, connection: connection,
                              snapshot: snapshot, policy: PolicyState(status: status), reported: (status.route, status.output))
        return try watcher.loop()
    }

    mutating func loop() throws(Failure) -> ExitStatus {
        let status = Status(snapshot: snapshot)
        guard emit(.route(route: status.route, previous: nil, reason: .initial, output: status.output)) else { return .ok }
        if apply { clearStaleOverride(status) }
        while !connection.shouldStop {
            do {
                let wait = hold.map { max(0, $0.wakeAt - WaitCommand.monotonic()) }
                guard try connection.waitForChanges(timeout: wait) else {
                    if connection.shouldStop { break }
                    // Done and quiet, or out of time: report where the route is now.
                    adoptIntent(snapshot)
                    guard let held = hold, held.wakeAt <= WaitCommand.monotonic() else { continue }
                    hold = nil
                    guard reportRoute(Status(snapshot: snapshot), reason: held.reason) else { break }
                    continue
                }
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
        let clock = WaitCommand.monotonic()
        recentlyAdded = recentlyAdded.filter { clock - $0.value < 1 }
        for output in change.added { recentlyAdded[output.id] = clock }
        let events = Events.diff(change, own: externalSet(change), recentlyAdded: Set(recentlyAdded.keys))
        if var held = hold {
            held.note(arrived: held.isDone(next), at: clock)
            hold = held
        }
        adoptIntent(next)
        guard apply else { return follow(change, next, events) }
        let preferences = try preferences()
        let decision = Policy.decide(change, state: &policy, preferences: preferences, muteOnFallback: muteOnFallback)
        // The route event waits for routectl's own move, so that one user action is one route change.
        for event in events where decision.request == nil || event.type != "route" {
            if case let .route(_, _, reason, _) = event {
                guard reportOrHold(Status(snapshot: next), reason: reason) else { return false }
                continue
            }
            guard emit(event) else { return false }
        }
        snapshot = next
        guard !decision.isEmpty else { return true }

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
        guard reportRoute(steps.current, reason: decision.reason ?? .override) else { return false }
        for event in Events.diff(steps) where event.type != "route" {
            guard emit(event) else { return false }
        }
        snapshot = after
        return true
    }

    /// Plain `watch`: prints the change. While a `watch --apply` runs, a device change it will answer
    /// holds the route event until the route gets where the rules put it (predicted by the same
    /// rules), so that the server's own intermediate pick is not reported as a second route change.
    mutating func follow(_ change: Change, _ next: Snapshot, _ events: [Event]) -> Bool {
        snapshot = next
        var reason: RouteChangeReason?
        for event in events {
            if case let .route(_, _, r, _) = event { reason = r; continue }
            guard emit(event) else { return false }
        }
        let preferences = (try? preferences()) ?? Preferences()
        let decision = Policy.decide(change, state: &policy, preferences: preferences, muteOnFallback: false)
        if let request = decision.request, ApplyLock.isHeld(store) {
            var held = RouteHold(request: request, reason: decision.reason ?? .unknown, preferredInput: preferences.preferredInput,
                                 deadline: WaitCommand.monotonic() + 1.5)
            held.note(arrived: held.isDone(next), at: WaitCommand.monotonic())
            hold = held
        }
        guard let reason = reason ?? hold?.reason else { return true }
        return reportOrHold(change.current, reason: reason)
    }

    /// A route move routectl announced (its intent, written by `set`, `clear` or a `watch --apply`)
    /// holds the route events until it is done: the server's reactions on the way (a profile switch
    /// removes a sink, WirePlumber restores a port and is overruled) are not route changes of their own.
    mutating func adoptIntent(_ next: Snapshot) {
        guard let intent = store.loadIntent() else { return }
        if let held = hold, held.intent == intent.at, intent.done {
            // The command is over: its route event now, from where it began to where it ended.
            hold = nil
            _ = reportRoute(Status(snapshot: next), reason: held.reason)
            return
        }
        guard intent.at != adoptedIntent, !intent.done else { return }
        let age = Double(State.nowMilliseconds() - intent.at) / 1000
        guard age >= 0, age < RouteHold.limit else { return }
        adoptedIntent = intent.at
        var held = RouteHold(target: intent.output, reason: intent.reason, deadline: WaitCommand.monotonic() + RouteHold.limit - age)
        held.intent = intent.at
        held.note(arrived: held.isDone(next), at: WaitCommand.monotonic())
        hold = held
    }

    /// Reports the route now, unless a move is held (its event comes when it is done).
    mutating func reportOrHold(_ status: Status, reason: RouteChangeReason) -> Bool {
        hold == nil ? reportRoute(status, reason: reason) : true
    }

    /// Prints a route event when the route differs from the one last printed.
    mutating func reportRoute(_ status: Status, reason: RouteChangeReason) -> Bool {
        let was = reported
        guard was.route != status.route || was.output?.id != status.output?.id || was.output?.sink != status.output?.sink
            || was.output?.sinkIndex != status.output?.sinkIndex else { return true }
        return emit(.route(route: status.route, previous: was.route, reason: reason, output: status.output))
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
    mutating func emit(_ event: Event) -> Bool {
        if case let .route(route, _, _, output) = event { reported = (route, output) }
        if case let .recovered(route, output) = event { reported = (route, output) }
        return Console.out(EventRenderer.line(event, json: options.json))
    }
}

/// A route move whose route event waits until it is done: the route has reached its target (an
/// output, or where a policy request leads) and the server has been quiet for a moment; or the
/// deadline passed. Then one route event is printed, with the move's reason.
struct RouteHold {
    /// How long a move may take before its route event is printed anyway, in seconds.
    static let limit = 2.0
    /// How long the server must stay quiet once the target is reached, in seconds: WirePlumber's
    /// reactions to a profile switch come within a few milliseconds.
    static let quiet = 0.06

    var target: String?
    var request: RouteRequest?
    /// The intent this hold waits on (its time), whose `done` ends it.
    var intent: Int64?
    var reason: RouteChangeReason
    var preferredInput: String?
    var deadline: Double
    var quietUntil: Double?

    init(target: String? = nil, request: RouteRequest? = nil, reason: RouteChangeReason, preferredInput: String? = nil,
         deadline: Double) {
        self.target = target
        self.request = request
        self.reason = reason
        self.preferredInput = preferredInput
        self.deadline = deadline
    }

    /// When the watcher should look again without a server change.
    var wakeAt: Double { min(deadline, quietUntil ?? deadline) }

    func isDone(_ snapshot: Snapshot) -> Bool {
        if let target { return Status(snapshot: snapshot).output?.id == target }
        guard let request else { return true }
        let plan = try? Planner.plan(snapshot, request, PlanContext(preferredInput: preferredInput))
        return plan.map { !$0.movesRoute } ?? true
    }

    mutating func note(arrived: Bool, at now: Double) {
        quietUntil = arrived ? now + RouteHold.quiet : nil
    }
}

/// One `watch --apply` per user session: an flock on a file in the runtime dir that holds the pid.
enum ApplyLock {
    /// Whether a `watch --apply` holds the lock now: its pid, recorded in the lock file, is a live
    /// routectl. Asking flock would take the lock for a moment and could turn a starting watcher away.
    static func isHeld(_ store: StateStore) -> Bool {
        guard let path = store.overrideFile?.replacingSuffix("override.json", with: "apply.lock"),
              let bytes = try? FileIO.read(path), let pid = Int32(String(decoding: bytes, as: UTF8.self).trimmingNewline),
              pid > 0, kill(pid, 0) == 0 || errno == EPERM,
              let comm = try? FileIO.read("/proc/\(pid)/comm") else { return false }
        return String(decoding: comm, as: UTF8.self).hasPrefix("routectl")
    }

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
