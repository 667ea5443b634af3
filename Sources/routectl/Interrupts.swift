import Glibc

/// Ctrl-C, SIGTERM and SIGHUP while a one-shot command changes the route or a call: held until it is
/// done. Killed half-way, `call end` left `call.json` naming a call whose profiles it had already put
/// back (every later plug then brought the call's route back), and `set` an override it had not
/// applied. Once a command has its server and begins to change things, it carries the change
/// through: each of its waits is bounded by `--timeout`. Before that (waiting for the route lock,
/// connecting) a signal ends it at once, as always.
enum Interrupts {
    static let held: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    nonisolated(unsafe) static var holding = false

    /// From here until the process exits (routectl has one thread: the mask is the process's).
    static func hold() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in held { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        holding = true
    }

    static func name(_ signal: Int32) -> String {
        signal == SIGINT ? "Ctrl-C (SIGINT)" : signal == SIGTERM ? "SIGTERM" : "SIGHUP"
    }

    /// A held signal that came meanwhile, if any: said once the command is done. The process then
    /// ends with the command's own status, since what it did is done (the signal dies with it).
    static var arrived: Int32? {
        guard holding else { return nil }
        var set = sigset_t()
        guard sigpending(&set) == 0 else { return nil }
        return held.first { sigismember(&set, $0) == 1 }
    }
}
