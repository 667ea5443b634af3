/// The dump format: reading a snapshot from pactl-shaped JSON and writing it back.

/// Why a JSON document is not a snapshot: the path of the member at fault and what is wrong with it.
public struct SnapshotFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String
    public var description: String { path.isEmpty ? problem : "\(path): \(problem)" }

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }
}

extension Snapshot {
    public init(json text: String) throws(SnapshotFormatError) {
        let value: JSON
        do {
            value = try JSON.parse(text)
        } catch {
            throw SnapshotFormatError(path: "", problem: "not JSON (\(error))")
        }
        try self.init(json: value)
    }

    public init(json: JSON) throws(SnapshotFormatError) {
        let root = Reader(value: json, path: "")
        guard json.objectValue != nil else { throw root.error("a snapshot is a JSON object") }
        server = try ServerInfo(root.member("server"))
        sinks = try root.list("sinks").map { r throws(SnapshotFormatError) in try Sink(r) }
        sources = try root.list("sources").map { r throws(SnapshotFormatError) in try Source(r) }
        cards = try root.list("cards").map { r throws(SnapshotFormatError) in try Card(r) }
        sinkInputs = try root.list("sink_inputs").map { r throws(SnapshotFormatError) in try SinkInput(r) }
        sourceOutputs = try root.list("source_outputs").map { r throws(SnapshotFormatError) in try SourceOutput(r) }
        if let state = root.optional("routectl"), state.value != .null {
            let word = try state.optionalString("default") ?? "speaker"
            guard let target = RouteTarget(rawValue: word), target.isBuiltIn else {
                throw (state.optional("default") ?? state).error("'\(word)' is not speaker or earpiece")
            }
            var override: RouteTarget?
            if let o = try state.optionalString("override") {
                guard let t = RouteTarget(rawValue: o) else { throw (state.optional("override") ?? state).error("unknown target '\(o)'") }
                override = t
            }
            var call: RouteTarget?
            if let c = try state.optionalString("call_target") {
                guard let t = RouteTarget(rawValue: c), t.isBuiltIn else {
                    throw (state.optional("call_target") ?? state).error("'\(c)' is not speaker or earpiece")
                }
                call = t
            }
            let priority = try state.strings("priority")
            routectl = Preferences(defaultTarget: target, override: override, preferredInput: try state.optionalString("preferred_input"),
                                   callTarget: call, priority: priority)
            if let d = state.optional("decision") {
                let word = try d.string("reason")
                guard let reason = RouteChangeReason(rawValue: word) else { throw d.error("unknown reason '\(word)'") }
                guard let at = d.value["at"]?.intValue else { throw d.error("missing member 'at'") }
                // (Absent from a decision an older routectl recorded: unknown, not none.)
                let externals = d.optional("externals") == nil ? nil : try d.strings("externals")
                decision = DecisionRecord(reason: reason, cause: try d.optionalString("cause"), output: try d.optionalString("output"), at: at,
                                          externals: externals)
            }
            policies += try state.strings("policies")
            overrideSetAt = try state.optionalInt("override_set_at")
            callStartedAt = try state.optionalInt("call_started_at")
            // Absent in a dump of a routectl from before it: unknown.
            if let m = state.optional("last_move") {
                let word = try m.string("reason")
                guard let reason = RouteChangeReason(rawValue: word) else { throw m.error("unknown reason '\(word)'") }
                guard let at = try m.optionalInt("at") else { throw m.error("missing member 'at'") }
                // As intent.json reads it: a move with no `done` is over.
                var done = true
                if let d = m.optional("done") {
                    guard case let .bool(b) = d.value else { throw d.error("expected true or false") }
                    done = b
                }
                lastMove = RouteIntent(output: try m.string("output"), reason: reason, at: at, done: done)
            }
            // Absent in a dump of a routectl from before profiles.json: none owed.
            owedProfiles = try state.list("owed_profiles").map { item throws(SnapshotFormatError) in
                CallRecord.CardProfile(card: try item.string("card"), profile: try item.string("profile"))
            }
        }
    }

    /// The dump: pactl's member names, in pactl's order, with routectl's additions (`card`, `direction`).
    public var json: JSON {
        .object([
            ("server", server.json),
            ("sinks", .array(sinks.map(\.json))),
            ("sources", .array(sources.map(\.json))),
            ("cards", .array(cards.map(\.json))),
            ("sink_inputs", .array(sinkInputs.map(\.json))),
            ("source_outputs", .array(sourceOutputs.map(\.json))),
        ] + (routectl.map { [("routectl", stateJSON($0))] } ?? []))
    }

    /// The dump's `routectl` member (DESIGN.md §4): what `--snapshot` answers routectl's own questions from.
    func stateJSON(_ p: Preferences) -> JSON {
        let decision: JSON = self.decision.map { d in
            .object([("reason", .string(d.reason.rawValue)), ("cause", d.cause.map(JSON.string) ?? .null),
                     ("output", d.output.map(JSON.string) ?? .null), ("at", .int(d.at)),
                     ("externals", d.externals.map { .array($0.map(JSON.string)) } ?? .null)])
        } ?? .null
        let members: [(String, JSON)] = [
            ("default", .string(p.defaultTarget.rawValue)),
            ("override", p.override.map { .string($0.rawValue) } ?? .null),
            ("override_set_at", overrideSetAt.map(JSON.int) ?? .null),
            ("preferred_input", p.preferredInput.map(JSON.string) ?? .null),
            ("call", .bool(p.inCall)),
            ("call_target", p.callTarget.map { .string($0.rawValue) } ?? .null),
            ("call_started_at", callStartedAt.map(JSON.int) ?? .null),
            ("priority", .array(p.priority.map(JSON.string))),
            ("decision", decision),
            ("last_move", lastMove.map { m in
                .object([("output", .string(m.output)), ("reason", .string(m.reason.rawValue)), ("at", .int(m.at)), ("done", .bool(m.done))])
            } ?? .null),
            ("policies", .array(policies.map(JSON.string))),
            ("owed_profiles", CallRecord.CardProfile.json(owedProfiles)),
        ]
        return .object(members)
    }
}

// MARK: - Reading

/// A position in the document being read, so that every error names the member at fault.
struct Reader {
    var value: JSON
    var path: String

    func error(_ problem: String) -> SnapshotFormatError { SnapshotFormatError(path: path, problem: problem) }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func member(_ key: String) throws(SnapshotFormatError) -> Reader {
        guard let v = value[key] else { throw error("missing member '\(key)'") }
        return Reader(value: v, path: child(key))
    }

    func optional(_ key: String) -> Reader? {
        guard let v = value[key], !v.isNull else { return nil }
        return Reader(value: v, path: child(key))
    }

    /// An array member; a missing one is empty (a snapshot of a server with no cards has none).
    func list(_ key: String) throws(SnapshotFormatError) -> [Reader] {
        guard let r = optional(key) else { return [] }
        guard let items = r.value.arrayValue else { throw r.error("expected an array") }
        return items.enumerated().map { Reader(value: $1, path: "\(r.path)[\($0)]") }
    }

    /// An array of strings; a missing one is empty.
    func strings(_ key: String) throws(SnapshotFormatError) -> [String] {
        var strings: [String] = []
        for item in try list(key) {
            guard let s = item.value.stringValue else { throw item.error("expected a string") }
            strings.append(s)
        }
        return strings
    }

    func string(_ key: String) throws(SnapshotFormatError) -> String {
        let r = try member(key)
        guard let s = r.value.stringValue else { throw r.error("expected a string") }
        return s
    }

    func optionalString(_ key: String) throws(SnapshotFormatError) -> String? {
        guard let r = optional(key) else { return nil }
        guard let s = r.value.stringValue else { throw r.error("expected a string") }
        return s
    }

    func optionalInt(_ key: String) throws(SnapshotFormatError) -> Int64? {
        guard let r = optional(key) else { return nil }
        guard let i = r.value.intValue else { throw r.error("expected an integer") }
        return i
    }

    func index(_ key: String) throws(SnapshotFormatError) -> UInt32 {
        let r = try member(key)
        guard let i = r.value.intValue, let u = UInt32(exactly: i) else { throw r.error("expected an index") }
        return u
    }

    /// pactl prints "n/a" or null where libpulse has PA_INVALID_INDEX.
    func optionalIndex(_ key: String) throws(SnapshotFormatError) -> UInt32? {
        guard let r = optional(key), r.value != .string("n/a") else { return nil }
        guard let i = r.value.intValue, let u = UInt32(exactly: i) else { throw r.error("expected an index") }
        return u == UInt32.max ? nil : u
    }

    func bool(_ key: String, default fallback: Bool) throws(SnapshotFormatError) -> Bool {
        guard let r = optional(key) else { return fallback }
        guard let b = r.value.boolValue else { throw r.error("expected true or false") }
        return b
    }

    func properties(_ key: String = "properties") throws(SnapshotFormatError) -> [String: String] {
        guard let r = optional(key) else { return [:] }
        guard let members = r.value.objectValue else { throw r.error("expected an object") }
        var out: [String: String] = [:]
        for (k, v) in members {
            switch v {
            case let .string(s): out[k] = s
            case let .int(i): out[k] = String(i)
            case let .bool(b): out[k] = b ? "true" : "false"
            default: throw Reader(value: v, path: r.child(k)).error("expected a string")
            }
        }
        return out
    }
}

extension ServerInfo {
    init(_ r: Reader) throws(SnapshotFormatError) {
        name = try r.string("server_name")
        version = try r.optionalString("server_version") ?? ""
        defaultSinkName = try r.optionalString("default_sink_name")
        defaultSourceName = try r.optionalString("default_source_name")
        serverString = try r.optionalString("server_string")
        hostName = try r.optionalString("host_name")
    }

    var json: JSON {
        var m: [(String, JSON)] = []
        if let serverString { m.append(("server_string", .string(serverString))) }
        if let hostName { m.append(("host_name", .string(hostName))) }
        m.append(("server_name", .string(name)))
        m.append(("server_version", .string(version)))
        m.append(("default_sink_name", defaultSinkName.map(JSON.string) ?? .null))
        m.append(("default_source_name", defaultSourceName.map(JSON.string) ?? .null))
        return .object(m)
    }
}

extension Port {
    init(_ r: Reader, name: String? = nil) throws(SnapshotFormatError) {
        if let name { self.name = name } else { self.name = try r.string("name") }
        description = try r.optionalString("description") ?? self.name
        type = PortType(rawValue: try r.optionalString("type") ?? "Unknown")
        let p = r.optional("priority")?.value.intValue ?? 0
        priority = UInt32(clamping: p)
        let a = try r.optionalString("availability") ?? PortAvailability.unknown.rawValue
        guard let availability = PortAvailability(rawValue: a) else {
            throw r.error("unknown availability '\(a)' (expected 'available', 'not available' or 'availability unknown')")
        }
        self.availability = availability
        availabilityGroup = try r.optionalString("availability_group")
    }

    /// The members of a port, with or without its name (card ports are keyed by name).
    func members(named: Bool) -> [(String, JSON)] {
        var m: [(String, JSON)] = []
        if named { m.append(("name", .string(name))) }
        m.append(("description", .string(description)))
        m.append(("type", .string(type.rawValue)))
        m.append(("priority", .int(Int64(priority))))
        m.append(("availability_group", availabilityGroup.map(JSON.string) ?? .null))
        m.append(("availability", .string(availability.rawValue)))
        return m
    }
}

func propertiesJSON(_ properties: [String: String]) -> JSON {
    .object(properties.keys.sorted().map { ($0, .string(properties[$0]!)) })
}

func indexJSON(_ index: UInt32?) -> JSON { index.map { .int(Int64($0)) } ?? .null }

extension Device {
    init(_ r: Reader) throws(SnapshotFormatError) {
        index = try r.index("index")
        name = try r.string("name")
        description = try r.optionalString("description") ?? name
        driver = try r.optionalString("driver") ?? ""
        state = try r.optionalString("state") ?? "UNKNOWN"
        mute = try r.bool("mute", default: false)
        ownerModule = try r.optionalIndex("owner_module")
        card = try r.optionalIndex("card")
        // pactl prints "n/a" as a real input's monitored sink.
        let monitor = try r.optionalString("monitor_source")
        self.monitor = monitor == "n/a" || monitor == "" ? nil : monitor
        properties = try r.properties()
        ports = try r.list("ports").map { p throws(SnapshotFormatError) in try Port(p) }
        activePort = try r.optionalString("active_port")
    }

    var json: JSON {
        .object([
            ("index", .int(Int64(index))),
            ("state", .string(state)),
            ("name", .string(name)),
            ("description", .string(description)),
            ("driver", .string(driver)),
            ("owner_module", indexJSON(ownerModule)),
            ("card", indexJSON(card)),
            ("mute", .bool(mute)),
            ("monitor_source", monitor.map(JSON.string) ?? .null),
            ("properties", propertiesJSON(properties)),
            ("ports", .array(ports.map { .object($0.members(named: true)) })),
            ("active_port", activePort.map(JSON.string) ?? .null),
        ])
    }
}

extension Card {
    init(_ r: Reader) throws(SnapshotFormatError) {
        index = try r.index("index")
        name = try r.string("name")
        driver = try r.optionalString("driver") ?? ""
        ownerModule = try r.optionalIndex("owner_module")
        properties = try r.properties()
        activeProfile = try r.optionalString("active_profile")
        // pactl keys profiles and ports by name.
        profiles = []
        if let pr = r.optional("profiles") {
            guard let members = pr.value.objectValue else { throw pr.error("expected an object") }
            for (name, v) in members {
                let p = Reader(value: v, path: pr.child(name))
                profiles.append(Profile(
                    name: name,
                    description: try p.optionalString("description") ?? name,
                    sinks: UInt32(clamping: p.optional("sinks")?.value.intValue ?? 0),
                    sources: UInt32(clamping: p.optional("sources")?.value.intValue ?? 0),
                    priority: UInt32(clamping: p.optional("priority")?.value.intValue ?? 0),
                    available: try p.bool("available", default: true)))
            }
        }
        ports = []
        if let po = r.optional("ports") {
            guard let members = po.value.objectValue else { throw po.error("expected an object") }
            for (name, v) in members {
                let p = Reader(value: v, path: po.child(name))
                let direction = try p.optionalString("direction")
                let profileNames = try p.strings("profiles")
                ports.append(CardPort(
                    port: try Port(p, name: name),
                    direction: direction.flatMap(PortDirection.init(rawValue:)),
                    profiles: profileNames,
                    properties: try p.properties()))
            }
        }
    }

    var json: JSON {
        .object([
            ("index", .int(Int64(index))),
            ("name", .string(name)),
            ("driver", .string(driver)),
            ("owner_module", indexJSON(ownerModule)),
            ("properties", propertiesJSON(properties)),
            ("profiles", .object(profiles.map { p in
                (p.name, .object([
                    ("description", .string(p.description)),
                    ("sinks", .int(Int64(p.sinks))),
                    ("sources", .int(Int64(p.sources))),
                    ("priority", .int(Int64(p.priority))),
                    ("available", .bool(p.available)),
                ]))
            })),
            ("active_profile", activeProfile.map(JSON.string) ?? .null),
            ("ports", .object(ports.map { cp in
                var m = cp.port.members(named: false)
                m.append(("direction", cp.direction.map { .string($0.rawValue) } ?? .null))
                m.append(("properties", propertiesJSON(cp.properties)))
                m.append(("profiles", .array(cp.profiles.map(JSON.string))))
                return (cp.name, .object(m))
            })),
        ])
    }
}

extension Stream {
    init(_ r: Reader) throws(SnapshotFormatError) {
        index = try r.index("index")
        device = try r.index(Self.deviceKey)
        client = try r.optionalIndex("client")
        corked = try r.bool("corked", default: false)
        mute = try r.bool("mute", default: false)
        properties = try r.properties()
    }

    var json: JSON {
        .object([
            ("index", .int(Int64(index))),
            ("client", indexJSON(client)),
            (Self.deviceKey, .int(Int64(device))),
            ("corked", .bool(corked)),
            ("mute", .bool(mute)),
            ("properties", propertiesJSON(properties)),
        ])
    }
}
