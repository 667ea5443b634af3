import Glibc
import Engine
import Pulse
import Routing
import Store

/// `routectl watch [--apply [--mute-on-fallback]]`: the front end of `Engine.Watch`: the lock, the
/// connection, signals, and the rendering of each event as one flushed line.
enum WatchCommand {
    static func run(_ options: GlobalOptions, _ watchOptions: WatchOptions) throws(Failure) -> ExitStatus {
        let apply = watchOptions.apply
        // A state file that cannot be read ends --apply at once (exit 5), not at the first change.
        if apply { try State.validate() }
        let store = State.store()
        let lock = apply ? try ApplyLock.acquire(store) : nil
        defer { withExtendedLifetime(lock) {} }
        let preferences = StatePreferences(store)
        let connection = try ServerAccess.connect(options, endsWithCommand: true)
        connection.stopOnSignalsAndClosedOutput()
        let snapshot: Snapshot
        do {
            try connection.subscribe(timeout: options.timeout)
            snapshot = try connection.snapshot(timeout: options.timeout)
        } catch {
            throw ServerAccess.failure(error)
        }
        let remote = watchOptions.dbus ? try DBusControl.start(connection, options) : nil
        // call start|end in another shell wake the loop for their `call` event, route move or not (the
        // directory, routectl's own, is made here when missing, 0700: nothing else would watch it).
        // Plain watch also wakes as a move is announced and as it ends (`intent.json`): a move whose
        // change of the default pipewire-pulse did not forward to this connection is then asked
        // about at once (`Watch.missedTheMove`), not when its hold runs out.
        if let directory = store.runtimeDirectoryPath, mkdir(directory, 0o700) == 0 || errno == EEXIST,
           let files = DirectoryWatch(directory: directory, names: apply ? ["call.json"] : ["call.json", "intent.json"]) {
            connection.attach(files)
        }
        let output = EventOutput(json: options.json)
        let writable = connection.watchWritable(fd: 1) { output.flush() }
        output.wantWritable = { writable.enable($0) }
        defer {
            output.wantWritable = nil
            writable.enable(false)
            output.finish()
        }
        var watch = Watch(server: connection, store: preferences, clocks: .system, apply: apply,
                          muteOnFallback: watchOptions.muteOnFallback, holdDown: watchOptions.holdDown, timeout: options.timeout, snapshot: snapshot, sink: output.send,
                          warn: { Console.err("routectl: \($0)\n") })
        watch.remote = remote
        // priority set|clear and default in another shell: watch --apply applies the rules they leave.
        if apply, let directory = store.preparedStateDirectory(), let files = DirectoryWatch(directory: directory, names: ["state.json"]) {
            connection.attach(files)
            watch.rulesMayHaveChanged = { files.takeChange() }
        }
        do { try watch.run() } catch { throw Failure.from(error) }
        return .ok
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
