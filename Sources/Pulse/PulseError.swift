internal import CPulse
import Routing

/// An error from libpulse (`PA_ERR_*`), or routectl's own deadline that passed.
///
/// The text is libpulse's own (`pa_strerror`), prefixed with what routectl was doing, as pactl does:
/// `Connection failure: Connection refused`. A server that itself answers `PA_ERR_TIMEOUT` and a
/// deadline of routectl's that passed both read "Timeout", but only the latter has `isDeadline`.
public struct PulseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `PA_ERR_*` number: the server's or libpulse's own, or `PA_ERR_TIMEOUT` for a deadline.
    public var code: Int32
    /// What was being done, for the message ("Connection failure", "Failed to set default sink").
    public var operation: String
    /// True when routectl's own deadline passed (no reply in time), not an error the server sent.
    public var isDeadline: Bool

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
        isDeadline = false
    }

    /// libpulse's text for the code. The corresponding C function is `pa_strerror`.
    public var reason: String {
        guard let text = pa_strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    /// True for a `PA_ERR_TIMEOUT` the server or libpulse reported (not routectl's deadline).
    public var isServerTimeout: Bool { !isDeadline && code == Int32(PA_ERR_TIMEOUT.rawValue) }

    public var description: String { "\(operation): \(reason)" }

    /// True when no server could be reached (routectl's exit status 4): connecting failed, whatever
    /// the code, or the server went away. A connected server that refuses or is slow is not this.
    public var isUnreachable: Bool {
        operation == PulseError.connecting || code == Int32(PA_ERR_CONNECTIONTERMINATED.rawValue)
    }

    /// The operation name of every error raised while connecting, as pactl words it.
    static let connecting = "Connection failure"

    /// routectl's deadline passed; reads as libpulse's `PA_ERR_TIMEOUT` ("Timeout"), as pactl's would.
    public static func deadline(_ operation: String) -> PulseError {
        var error = PulseError(code: Int32(PA_ERR_TIMEOUT.rawValue), operation: operation)
        error.isDeadline = true
        return error
    }

    /// The corresponding C error is `PA_ERR_NOENTITY`.
    public static func noEntity(_ operation: String) -> PulseError {
        PulseError(code: Int32(PA_ERR_NOENTITY.rawValue), operation: operation)
    }
}

/// The versions of libpulse routectl was compiled against and is running with.
public enum PulseLibrary {
    /// The corresponding C macro is `pa_get_headers_version`.
    public static var headersVersion: String { String(cString: CPulse_headers_version()) }
    /// The corresponding C function is `pa_get_library_version`.
    public static var libraryVersion: String { pa_get_library_version().map { String(cString: $0) } ?? "unknown" }
}

extension PulseError: ServerFailure {}
