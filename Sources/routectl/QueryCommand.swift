import Routing

/// `routectl query [FIELD]`: the status, in full or one field.
enum QueryCommand {
    static func render(_ status: Status, preferences: Preferences = Preferences(), field: QueryField?, json: Bool) -> String {
        if let field {
            let value = self.value(field, status, preferences)
            return json ? JSON.object([(field.rawValue, value)]).text + "\n" : text(value) + "\n"
        }
        if json { return object(status, preferences).text + "\n" }
        var rows: [[String]] = QueryField.allCases
            .filter { ![.bluetooth, .headset, .receiver, .speaker].contains($0) }
            .map { [$0.rawValue, text(value($0, status, preferences))] }
        let available = status.availableRoutes.map(\.rawValue)
        rows.insert(["available", available.isEmpty ? "none" : available.joined(separator: " ")], at: 5)
        rows.append(["other_audio", status.otherAudioPlaying ? "yes" : "no"])
        if let output = status.output {
            rows.append(["sink", output.sink ?? "-"])
            if let port = output.port { rows.append(["port", port]) }
            rows.append(["description", output.description])
        } else {
            rows.append(["sink", "none"])
        }
        rows.append(["server", serverLine(status.server)])
        return Console.table(rows)
    }

    static func serverLine(_ server: ServerInfo) -> String {
        var line = server.name
        if !server.isPipeWire { line += " \(server.version)" }
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
        case .bluetooth: return .bool(status.isAvailable(.bluetooth))
        case .headset: return .bool(status.isAvailable(.headset))
        case .receiver: return .bool(status.isAvailable(.receiver))
        case .speaker: return .bool(status.isAvailable(.speaker))
        case .engaged: return .bool(status.engaged)
        }
    }

    /// The text form of one value: booleans as yes/no (as pactl prints them), null as none.
    static func text(_ value: JSON) -> String {
        switch value {
        case let .string(s): return s
        case let .bool(b): return b ? "yes" : "no"
        case .null: return "none"
        default: return value.text
        }
    }

    /// The `--json` status object; its keys are documented in routectl(1) and never renamed.
    static func object(_ status: Status, _ preferences: Preferences) -> JSON {
        .object([
            ("route", .string(status.route.rawValue)),
            ("target", .string(preferences.effectiveTarget.rawValue)),
            ("override", value(.override, status, preferences)),
            ("default", .string(preferences.defaultTarget.rawValue)),
            ("external", .bool(status.route.isExternal)),
            ("available", .object(Route.allCases.filter { $0 != .unknown }.map { ($0.rawValue, .bool(status.isAvailable($0))) })),
            ("engaged", .bool(status.engaged)),
            ("other_audio_playing", .bool(status.otherAudioPlaying)),
            ("output", status.output.map(DevicesCommand.object) ?? .null),
            ("server", .object([
                ("name", .string(status.server.name)),
                ("version", .string(status.server.version)),
                ("address", status.server.serverString.map(JSON.string) ?? .null),
                ("pipewire", .bool(status.server.isPipeWire)),
            ])),
        ])
    }
}
