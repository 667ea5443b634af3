internal import CPulse
import Routing

/// An error from libpulse (`PA_ERR_*`), or a wait that ran out of time.
///
/// The text is libpulse's own (`pa_strerror`), prefixed with what routectl was doing, as pactl does:
/// `Connection failure: Connection refused`.
public struct PulseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `PA_ERR_*` number.
    public var code: Int32
    /// What was being done, for the message ("Connection failure", "Failed to set default sink").
    public var operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// libpulse's text for the code. The corresponding C function is `pa_strerror`.
    public var reason: String {
        guard let text = pa_strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    public var description: String { "\(operation): \(reason)" }

    /// True when no server could be reached (routectl's exit status 4): connecting failed, whatever
    /// the code, or the server went away. A connected server that refuses or is slow is not this.
    public var isUnreachable: Bool {
        operation == PulseError.connecting || code == Int32(PA_ERR_CONNECTIONTERMINATED.rawValue)
    }

    /// The operation name of every error raised while connecting, as pactl words it.
    static let connecting = "Connection failure"

    /// The corresponding C error is `PA_ERR_TIMEOUT`.
    public static func timeout(_ operation: String) -> PulseError {
        PulseError(code: Int32(PA_ERR_TIMEOUT.rawValue), operation: operation)
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
