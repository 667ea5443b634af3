/// routectl's exit statuses (DESIGN.md §2); scripts depend on them, so they never change meaning.
enum ExitStatus: Int32 {
    /// Done, including "recorded, and an external device takes priority, as designed".
    case ok = 0
    /// The server refused or an operation failed.
    case failed = 1
    /// Usage: an unknown command, option or value.
    case usage = 2
    /// Recorded, but no output of that kind exists here; the route fell back.
    case fellBack = 3
    /// No sound server could be reached within the timeout.
    case noServer = 4
    /// A state file cannot be read or written.
    case stateFile = 5
    /// Interrupted (Ctrl-C, SIGTERM) before done, as `wait` can be: never reported as a timeout.
    case interrupted = 130

    /// Each status with its meaning, as `help` prints them.
    static let documented: [(ExitStatus, String)] = [
        (.ok, "done (also: recorded, and an external device keeps priority)"),
        (.failed, "the server refused or an operation failed"),
        (.usage, "usage: an unknown command, option or value"),
        (.fellBack, "recorded, but no output of that kind exists here; the route fell back"),
        (.noServer, "no sound server could be reached within the timeout"),
        (.stateFile, "a state file cannot be read or written (the message names it)"),
        (.interrupted, "interrupted (Ctrl-C) before done"),
    ]
}

/// A command's failure: the one line to print and the status to exit with.
struct Failure: Error {
    var status: ExitStatus
    var message: String

    static func usage(_ message: String) -> Failure {
        Failure(status: .usage, message: "\(message) See 'routectl --help'.")
    }
}
