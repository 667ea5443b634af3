/// A JSON value, small enough to keep Foundation off routectl's start-up path.
///
/// Objects keep their members in order, so what routectl prints is stable and reads in the order
/// the man page documents. Integers and fractions are kept apart so that indices print as integers.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member named `key` of an object; `nil` for a missing member or a non-object.
    public subscript(key: String) -> JSON? {
        guard case let .object(members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? {
        if case let .string(s) = self { return s }
        return nil
    }

    public var intValue: Int64? {
        switch self {
        case let .int(i): return i
        case let .double(d) where d == d.rounded() && abs(d) < 9e15: return Int64(d)
        // pactl prints a few numbers as strings ("tile_size": "65472").
        case let .string(s): return Int64(s)
        default: return nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case let .bool(b): return b
        // pactl prints some flags as "yes"/"no" ("is_local": "yes").
        case .string("yes"), .string("true"): return true
        case .string("no"), .string("false"): return false
        default: return nil
        }
    }

    public var arrayValue: [JSON]? {
        if case let .array(a) = self { return a }
        return nil
    }

    public var objectValue: [(String, JSON)]? {
        if case let .object(o) = self { return o }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

// MARK: - Writing

extension JSON {
    /// The compact, one-line text of this value (what `--json` and NDJSON print).
    public var text: String {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A finite number as JSON (and routectl's messages) write it: `5`, `0.5`, `1e-06`.
    public static func number(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }

    /// Written as UTF-8 bytes, not appended to a String piece by piece: String appends cost a
    /// `--json query` ~170 instructions a byte of its text, these ~50 (callgrind). Every state file
    /// is written this way too, four in a `call start`.
    func write(to out: inout [UInt8]) {
        switch self {
        case .null: JSON.append("null", to: &out)
        case let .bool(b): JSON.append(b ? "true" : "false", to: &out)
        case let .int(i): JSON.writeInt(i, to: &out)
        case let .double(d):
            if d.isFinite { out.append(contentsOf: JSON.number(d).utf8) } else { JSON.append("null", to: &out) }
        case let .string(s): JSON.writeString(s, to: &out)
        case let .array(items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func append(_ word: StaticString, to out: inout [UInt8]) {
        word.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    static func writeInt(_ i: Int64, to out: inout [UInt8]) {
        if i < 0 { out.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned: Int64.min has none as Int64.
        var rest = i.magnitude
        let first = out.count
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        out[first...].reverse()
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Only ASCII bytes are escaped: the runs between them are whole UTF-8 sequences, copied at once.
        var s = s
        s.withUTF8 { bytes in
            var run = 0
            for i in bytes.indices {
                let byte = bytes[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "t"))
                default:
                    let hex: StaticString = "0123456789abcdef"
                    JSON.append("u00", to: &out)
                    out.append(hex.utf8Start[Int(byte >> 4)])
                    out.append(hex.utf8Start[Int(byte & 0xf)])
                }
                run = i + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Reading

/// Why a text is not JSON, with the byte offset where reading stopped.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    public var description: String { "\(message) at byte \(offset)" }
}

extension JSON {
    /// Parses one JSON text (RFC 8259); whitespace may surround it, nothing else may follow.
    public static func parse(_ text: String) throws(JSONError) -> JSON {
        var parser = Parser(bytes: Array(text.utf8))
        return try parser.parseDocument()
    }

    public static func parse(bytes: [UInt8]) throws(JSONError) -> JSON {
        var parser = Parser(bytes: bytes)
        return try parser.parseDocument()
    }
}

private struct Parser {
    let bytes: [UInt8]
    var i = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    func fail(_ message: String) -> JSONError { JSONError(message: message, offset: i) }

    mutating func parseDocument() throws(JSONError) -> JSON {
        skipSpace()
        let value = try parseValue()
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected text after the JSON value") }
        return value
    }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func parseValue() throws(JSONError) -> JSON {
        guard i < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw fail("unexpected end of input") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw fail("invalid literal") }
        i += n
    }

    mutating func nest() throws(JSONError) {
        depth += 1
        if depth > 512 { throw fail("nesting too deep") }
    }

    mutating func parseObject() throws(JSONError) -> JSON {
        try nest()
        i += 1
        var members: [(String, JSON)] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; depth -= 1; return .object(members) }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let key = try parseString()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipSpace()
            members.append((key, try parseValue()))
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; depth -= 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONError) -> JSON {
        try nest()
        i += 1
        var items: [JSON] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; depth -= 1; return .array(items) }
        while true {
            skipSpace()
            items.append(try parseValue())
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; depth -= 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseString() throws(JSONError) -> String {
        i += 1
        // Most strings have no escape: up to the first backslash they are the input's own bytes.
        let start = i
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return String(decoding: bytes[start..<i - 1], as: UTF8.self)
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw fail("control character in string") }
            i += 1
        }
        var out = Array(bytes[start..<i])
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; break }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < bytes.count else { throw fail("unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("invalid escape")
            }
        }
        // Invalid UTF-8 from a server is repaired, not fatal: a description should never stop a dump.
        return String(decoding: out, as: UTF8.self)
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    mutating func parseNumber() throws(JSONError) -> JSON {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        var fractional = false
        while i < bytes.count {
            let c = bytes[i]
            if c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") { i += 1; continue }
            if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") || c == UInt8(ascii: "+")
                || (c == UInt8(ascii: "-") && i > start) {
                fractional = true; i += 1; continue
            }
            break
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if !fractional, let v = Int64(text) { return .int(v) }
        guard let d = Double(text) else { throw JSONError(message: "invalid number", offset: start) }
        return .double(d)
    }
}
