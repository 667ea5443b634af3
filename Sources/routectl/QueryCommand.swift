import Routing

/// `routectl query [FIELD]`: the status, in full or one field.
enum QueryCommand {
    static func render(_ status: Status, preferences: Preferences = Preferences(), field: QueryField?, json: Bool) -> String {
        if let field {
            let value = self.value(field, status, preferences)
            return json ? JSON.object([(field.jsonKey, value)]).text + "\n" : text(field, value) + "\n"
        }
        if json { return object(status, preferences).text + "\n" }
        // The rows of the full status, each one a field (`query ROW`).
        let rows: [QueryField] = [.route, .target, .override, .default, .call, .external, .available, .engaged, .otherAudio, .muted,
                                  .micMuted, .sink, .port, .description, .server]
        return Console.table(rows.compactMap { field in
            let value = self.value(field, status, preferences)
            if field == .port, value == .null { return nil }
            return [field.rawValue, text(field, value)]
        })
    }

    static func serverLine(_ server: ServerInfo) -> String {
        var line = server.isPipeWire ? "pipewire \(server.pipeWireVersion ?? server.version)" : "\(server.name) \(server.version)"
        if let address = server.serverString { line += " (\(address))" }
        return line
    }

    static func value(_ field: QueryField, _ status: Status, _ preferences: Preferences) -> JSON {
        switch field {
        case .route: return .string(status.route.rawValue)
        case .target: return .string(preferences.effectiveTarget.rawValue)
        case .override: return preferences.override.map { .string($0.rawValue) } ?? .null
        case .default: return .string(preferences.defaultTarget.rawValue)
        case .external: return .bool(status.route.isExternal)
        case .available: return .object(Route.allCases.filter { $0 != .unknown }.map { ($0.rawValue, .bool(status.isAvailable($0))) })
        case .bluetooth: return .bool(status.isAvailable(.bluetooth))
        case .headset: return .bool(status.isAvailable(.headset))
        case .receiver: return .bool(status.isAvailable(.receiver))
        case .speaker: return .bool(status.isAvailable(.speaker))
        case .engaged: return .bool(status.engaged)
        case .otherAudio: return .bool(status.otherAudioPlaying)
        case .muted: return .bool(status.output?.isMuted ?? false)
        case .call: return .bool(preferences.inCall)
        case .micMuted: return status.micMuted.map(JSON.bool) ?? .null
        case .sink: return status.output?.sink.map(JSON.string) ?? .null
        case .port: return status.output?.port.map(JSON.string) ?? .null
        case .description: return status.output.map { .string($0.description) } ?? .null
        case .server: return .object([
            ("name", .string(status.server.name)),
            ("version", .string(status.server.version)),
            ("address", status.server.serverString.map(JSON.string) ?? .null),
            ("pipewire", .bool(status.server.isPipeWire)),
        ])
        case .output: return status.output.map(DevicesCommand.object) ?? .null
        }
    }

    /// The text form of one field: `available` as the kinds, `server` as one line, the rest as values.
    static func text(_ field: QueryField, _ value: JSON) -> String {
        switch field {
        case .available:
            guard case let .object(members) = value else { return text(value) }
            let kinds = members.filter { $0.1 == .bool(true) }.map(\.0)
            // Not `joined(separator:)`: the standard library runs it unspecialized, and its first call
            // in a process looks up the array's associated types (~80,000 instructions).
            return kinds.isEmpty ? "none" : kinds.dropFirst().reduce(into: kinds[0]) { $0 += " " + $1 }
        case .server:
            guard case let .object(members) = value else { return text(value) }
            let get = { (key: String) in members.first { $0.0 == key }?.1 }
            let name = get("name").flatMap(\.stringValue) ?? ""
            let version = get("version").flatMap(\.stringValue) ?? ""
            return Events.printable(serverLine(ServerInfo(name: name, version: version, serverString: get("address").flatMap(\.stringValue))))
        case .output:
            guard case let .object(members) = value else { return text(value) }
            return Events.printable(members.first { $0.0 == "id" }?.1.stringValue ?? "none")
        default:
            return text(value)
        }
    }

    /// The text form of one value: booleans as yes/no (as pactl prints them), null as none.
    static func text(_ value: JSON) -> String {
        switch value {
        case let .string(s): return Events.printable(s)
        case let .bool(b): return b ? "yes" : "no"
        case .null: return "none"
        default: return value.text
        }
    }

    /// The `--json` status object; its keys are documented in routectl(1) and never renamed.
    static func object(_ status: Status, _ preferences: Preferences) -> JSON {
        let fields: [QueryField] = [.route, .target, .override, .default, .call, .external, .available, .engaged, .otherAudio,
                                    .muted, .micMuted, .output, .server]
        return .object(fields.map { ($0.jsonKey, value($0, status, preferences)) })
    }
}
