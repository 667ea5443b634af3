import Glibc

/// A D-Bus failure, in one line for the user: `D-Bus: <what failed>[: <strerror>]`.
public struct BusError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What failed, in the user's words ("cannot connect to the session bus").
    public var operation: String
    /// The errno sd-bus returned (positive), or 0 when `operation` says it all.
    public var code: Int32
    /// True when routectl's own name is owned already: another routectl serves it.
    public var isNameTaken: Bool

    public init(operation: String, code: Int32) {
        self.operation = operation
        self.code = code < 0 ? -code : code
        isNameTaken = false
    }

    public var description: String {
        guard code != 0 else { return "D-Bus: \(operation)" }
        return "D-Bus: \(operation): \(String(cString: strerror(code)))"
    }

    /// sd-bus refused the name with EEXIST: it has an owner and we asked not to queue.
    static func nameTaken(_ name: String) -> BusError {
        var error = BusError(operation: "the name \(name) is already owned (another routectl watch --dbus runs)", code: 0)
        error.isNameTaken = true
        return error
    }
}
