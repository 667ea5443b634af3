import Glibc
import Routing

/// A state file that cannot be read, parsed or written (routectl's exit status 5). It names the path.
public struct StateError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String
    /// Not the file's fault: another routectl kept its lock past `LockWait.limit`.
    public var heldElsewhere = false
    public var description: String { "\(path): \(problem)" }

    public init(path: String, problem: String, heldElsewhere: Bool = false) {
        self.path = path
        self.problem = problem
        self.heldElsewhere = heldElsewhere
    }
}

/// How long a take of a state file's lock may wait in this process. Nil: as long as another holder
/// keeps it. A one-shot command waits as long as the watcher would (twice its timeout, at least 6 s),
/// so that commands run one after another but one stopped while holding the route lock (Ctrl-Z)
/// costs the next an error, not a silent hang. `watch --apply --dbus` bounds it while it serves a
/// request: its loop is also the policy's and the bus's.
public enum LockWait {
    nonisolated(unsafe) public static var limit: Double?
    /// Set when a bounded take of the route lock (the override's) ran out of the limit, and when one
    /// succeeded (the caller clears both): whether a command still holds it past its time.
    nonisolated(unsafe) public static var ranOut = false
    nonisolated(unsafe) public static var took = false
}

/// A value kept in one of routectl's JSON state files: how it reads from and writes to the file's
/// members. `version` and any member the type does not know are the file's business (StateFile).
public protocol StateRecord: Sendable {
    /// What the file is, in messages: "state", "override".
    static var fileKind: String { get }
    /// The newest file version this routectl reads and writes; a newer file is refused.
    static var version: Int64 { get }
    init(fields: Fields) throws(FieldError)
    /// The members this type writes, in order (never `version`).
    var fields: [(String, JSON)] { get }
}

extension StateRecord {
    public static var version: Int64 { 1 }
}

/// A member of a state file that is missing or of the wrong kind.
public struct FieldError: Error, Sendable, CustomStringConvertible {
    public var key: String
    public var problem: String
    public var description: String { key.isEmpty ? problem : "\(key): \(problem)" }

    public init(key: String, problem: String) {
        self.key = key
        self.problem = problem
    }
}

/// The members of a state file's top-level object, read by name.
public struct Fields: Sendable {
    public let json: JSON

    public func string(_ key: String) throws(FieldError) -> String {
        guard let s = try optionalString(key) else { throw FieldError(key: key, problem: "missing") }
        return s
    }

    /// A string member; absent or null is nil.
    public func optionalString(_ key: String) throws(FieldError) -> String? {
        guard let value = json[key], !value.isNull else { return nil }
        guard let s = value.stringValue else { throw FieldError(key: key, problem: "expected a string") }
        return s
    }

    /// An array of strings; absent or null is empty.
    public func strings(_ key: String) throws(FieldError) -> [String] {
        guard let value = json[key], !value.isNull else { return [] }
        guard let items = value.arrayValue else { throw FieldError(key: key, problem: "expected an array") }
        var strings: [String] = []
        for (i, item) in items.enumerated() {
            guard let s = item.stringValue else { throw FieldError(key: "\(key)[\(i)]", problem: "expected a string") }
            strings.append(s)
        }
        return strings
    }

    /// A list of strings under `key`, or nil when it is absent or null.
    public func optionalStrings(_ key: String) throws(FieldError) -> [String]? {
        guard let value = json[key], !value.isNull else { return nil }
        return try strings(key)
    }

    public func optionalInt(_ key: String) throws(FieldError) -> Int64? {
        guard let value = json[key], !value.isNull else { return nil }
        guard let i = value.intValue else { throw FieldError(key: key, problem: "expected an integer") }
        return i
    }

    public func optionalBool(_ key: String) throws(FieldError) -> Bool? {
        guard let value = json[key], !value.isNull else { return nil }
        guard let b = value.boolValue else { throw FieldError(key: key, problem: "expected true or false") }
        return b
    }
}

/// One of routectl's state files, holding one `Record`: read bounded and without following links,
/// written atomically, versioned, and rewritten with the members a newer routectl added kept.
public struct StateFile<Record: StateRecord>: Sendable {
    public let path: String
    /// The routectl directory it lives in, checked before every read and write.
    let directory: StateDirectory

    init(_ name: String, in directory: StateDirectory) {
        self.path = "\(directory.path)/\(name)"
        self.directory = directory
    }

    /// The record, or nil when there is none. A file that is corrupt, of a newer version, or not a
    /// regular file is an error naming it.
    public func load() throws(StateError) -> Record? {
        guard try directory.check(), let object = try readObject() else { return nil }
        do {
            return try Record(fields: Fields(json: object))
        } catch {
            throw StateError(path: path, problem: "not a routectl \(Record.fileKind) file (\(error)); fix or remove it")
        }
    }

    /// Writes `record`, keeping the members of the file on disk that this routectl does not know
    /// (a newer one's). A file it cannot read, or of a newer version, is left alone: an error.
    /// Callers hold the file's lock (`withLock`) when what they write depends on what they read.
    /// `merge`, when given, makes what is written from `record` and the record on disk (nil when there
    /// is none, or it is not one this routectl reads), from the one read that keeps the members.
    public func save(_ record: Record, merging merge: ((Record, Record?) -> Record)? = nil) throws(StateError) {
        try directory.prepare()
        let existing = try readObject()
        let record = merge.map { $0(record, existing.flatMap { try? Record(fields: Fields(json: $0)) }) } ?? record
        let fields = record.fields
        var members: [(String, JSON)] = [("version", .int(Record.version))] + fields
        if let existing = existing?.objectValue {
            let known = Set(fields.map(\.0) + ["version"])
            members += existing.filter { !known.contains($0.0) }
        }
        do {
            // The runtime directory does not outlive a reboot: no fsync there (it costs ~0.3 ms a file
            // on a disk-backed one, and call start writes three).
            try FileIO.writeAtomically(path, Array((JSON.object(members).text + "\n").utf8), durable: directory.runtimeParent == nil)
        } catch {
            throw StateError(path: path, problem: "cannot write: \(error)")
        }
    }

    /// Removes the file; one that is not there is not an error.
    public func remove() throws(StateError) {
        guard try directory.check() else { return }
        do { try FileIO.remove(path) } catch { throw StateError(path: path, problem: "cannot remove: \(error)") }
    }

    /// Takes the file's lock (`NAME.lock` beside it), creating the directory if needed. Waits as long
    /// as another holder keeps it, unless `LockWait.limit` bounds the wait in this process; a bounded
    /// take of the route lock (`isRouteLock`, the override's) says in `LockWait` how it went.
    public func lock(isRouteLock: Bool = false) throws(StateError) -> FileLock {
        if let limit = LockWait.limit {
            guard let lock = try lock(within: limit) else {
                if isRouteLock { LockWait.ranOut = true }
                throw StateError(path: path + ".lock", problem: "held by another routectl" + (limit > 0 ? " for over \(JSON.number(limit)) s" : "") + " (stopped with Ctrl-Z?)",
                                 heldElsewhere: true)
            }
            if isRouteLock { LockWait.took = true }
            return lock
        }
        try directory.prepare()
        do {
            return try FileLock(path + ".lock")
        } catch {
            throw StateError(path: path + ".lock", problem: "cannot lock: \(error)")
        }
    }

    /// The file's lock, waited for at most `seconds` (`FileLock.take`); nil when another holder
    /// kept it that long.
    public func lock(within seconds: Double) throws(StateError) -> FileLock? {
        try directory.prepare()
        do {
            return try FileLock.take(path + ".lock", within: seconds)
        } catch {
            throw StateError(path: path + ".lock", problem: "cannot lock: \(error)")
        }
    }

    /// Runs `body` under the file's lock.
    @discardableResult
    public func withLock<T>(_ body: () throws(StateError) -> T) throws(StateError) -> T {
        try lock().hold(body)
    }

    /// Changes the record under the lock, read fresh, so concurrent writers of different members
    /// lose nothing; returns what was written.
    @discardableResult
    public func update(default initial: @autoclosure () -> Record, _ change: (inout Record) -> Void) throws(StateError) -> Record {
        try withLock { () throws(StateError) -> Record in
            var record = try load() ?? initial()
            change(&record)
            try save(record)
            return record
        }
    }

    /// The file's top-level object, nil when there is no file; checks it is JSON, an object, and of
    /// a version this routectl knows.
    func readObject() throws(StateError) -> JSON? {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path)
        } catch {
            if error.errno == ENOENT { return nil }
            throw StateError(path: path, problem: "cannot read: \(error)")
        }
        let json: JSON
        do {
            json = try JSON.parse(bytes: bytes)
        } catch {
            throw StateError(path: path, problem: "not valid JSON (\(error)); fix or remove it")
        }
        guard json.objectValue != nil else {
            throw StateError(path: path, problem: "not a routectl \(Record.fileKind) file (expected an object); fix or remove it")
        }
        if let name = Self.memberGivenTwice(in: json) {
            // Parsers disagree on which of the two counts: neither is taken.
            throw StateError(path: path, problem: "member '\(Events.escapedForLine(name))' is given twice; fix or remove it")
        }
        if let version = json["version"], !version.isNull {
            guard case let .int(number) = version else {
                throw StateError(path: path, problem: "not a routectl \(Record.fileKind) file (version: expected an integer); fix or remove it")
            }
            // Versions count from 1: no routectl wrote 0 or less.
            guard number >= 1 else {
                throw StateError(path: path, problem: "not a routectl \(Record.fileKind) file (version: \(number) is no version; they count from 1); fix or remove it")
            }
            guard number <= Record.version else {
                throw StateError(path: path, problem: "version \(number) is newer than this routectl knows (\(Record.version)); upgrade routectl, or remove the file to start afresh")
            }
        }
        return json
    }

    /// The name of a member an object of the file gives twice, if any.
    static func memberGivenTwice(in json: JSON) -> String? {
        switch json {
        case let .object(members):
            // The names compared pairwise: a state file's objects have a few members, and hashing
            // each name into a set cost half of reading the file (callgrind). A file that someone
            // made huge (the read is capped) gets the set.
            var seen = members.count > 32 ? Set<String>() : nil
            for (i, (name, value)) in members.enumerated() {
                if seen != nil {
                    if !seen!.insert(name).inserted { return name }
                } else if members[..<i].contains(where: { $0.0 == name }) {
                    return name
                }
                if let inner = memberGivenTwice(in: value) { return inner }
            }
        case let .array(items):
            for item in items {
                if let inner = memberGivenTwice(in: item) { return inner }
            }
        default:
            break
        }
        return nil
    }
}

/// A routectl directory (`$XDG_STATE_HOME/routectl`, `$XDG_RUNTIME_DIR/routectl`): created 0700,
/// refused when it is a symlink, someone else's, or writable by group or others (DESIGN.md §4).
struct StateDirectory: Sendable {
    let path: String
    /// For the runtime directory: `$XDG_RUNTIME_DIR` itself, which must exist and be the user's.
    let runtimeParent: String?

    /// Whether the directory exists; throws when it exists and cannot be trusted.
    func check() throws(StateError) -> Bool {
        let st: stat?
        do { st = try FileIO.status(path, followLinks: false) } catch { throw StateError(path: path, problem: "\(error)") }
        guard let st else { return false }
        let uid = getuid()
        switch st.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: throw StateError(path: path, problem: "is a symbolic link; routectl keeps its state in a directory of its own")
        default: throw StateError(path: path, problem: "not a directory")
        }
        guard st.st_uid == uid else {
            throw StateError(path: path, problem: "belongs to uid \(st.st_uid), not to you (uid \(uid)); routectl does not trust it")
        }
        guard st.st_mode & 0o022 == 0 else {
            throw StateError(path: path, problem: "is writable by group or others (mode \(String(st.st_mode & 0o777, radix: 8))); make it 0700")
        }
        return true
    }

    /// Creates the directory 0700 when missing, then checks it.
    func prepare() throws(StateError) {
        if try check() { return }
        if let runtimeParent {
            let owner: UInt32?
            do { owner = try FileIO.owner(runtimeParent) } catch { throw StateError(path: runtimeParent, problem: "\(error)") }
            guard let owner else { throw StateError(path: runtimeParent, problem: "the runtime directory does not exist") }
            guard owner == getuid() else {
                throw StateError(path: runtimeParent, problem: "the runtime directory belongs to uid \(owner), not to you (uid \(getuid()))")
            }
        }
        do {
            try FileIO.makeDirectories(path)
        } catch {
            throw StateError(path: error.path, problem: "cannot create: \(error)")
        }
        _ = try check()
    }
}
