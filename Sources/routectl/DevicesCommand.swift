import Routing

/// `routectl devices`: every output and input with its kind, availability and whether it is in use.
enum DevicesCommand {
    static func render(_ status: Status, json: Bool) -> String {
        if json {
            return JSON.object([
                ("outputs", .array(status.outputs.map(object))),
                ("inputs", .array(status.inputs.map(object))),
            ]).text + "\n"
        }
        var out = "Outputs:\n"
        let header = ["", "ROUTE", "AVAILABLE", "MUTED", "ID", "DESCRIPTION"]
        out += Console.table([header] + status.outputs.map { o in
            [o.isActive ? "*" : " ", o.route.rawValue, availability(o), o.sink == nil ? "-" : o.isMuted ? "yes" : "no", o.id, o.description]
        }, indent: "")
        out += "Inputs:\n"
        let inputs = status.inputs.map { i in
            [i.isDefault ? "*" : " ", i.kind.rawValue, i.availability.isUsable ? "yes" : "no",
             i.id, i.description]
        }
        out += inputs.isEmpty ? "  none\n" : Console.table([["", "KIND", "AVAILABLE", "ID", "DESCRIPTION"]] + inputs)
        return out
    }

    /// yes, no, `profile` (behind a card profile switch) or `jack` (a built-in output hidden by a
    /// plugged jack: `set --force` reaches it).
    static func availability(_ o: Output) -> String {
        if !o.isAvailable { return "no" }
        if o.isHiddenByJack { return "jack" }
        return o.sink == nil ? "profile" : "yes"
    }

    static func object(_ o: Output) -> JSON {
        .object([
            ("id", .string(o.id)),
            ("route", .string(o.route.rawValue)),
            ("sink", o.sink.map(JSON.string) ?? .null),
            ("port", o.port.map(JSON.string) ?? .null),
            ("card", o.card.map { .int(Int64($0)) } ?? .null),
            ("description", .string(o.description)),
            ("available", .bool(o.isAvailable)),
            ("availability", .string(o.availability.rawValue)),
            ("profiles", .array(o.profiles.map(JSON.string))),
            ("active", .bool(o.isActive)),
            ("muted", .bool(o.isMuted)),
        ])
    }

    static func object(_ i: Input) -> JSON {
        .object([
            ("id", .string(i.id)),
            ("kind", .string(i.kind.rawValue)),
            ("source", .string(i.source)),
            ("port", i.port.map(JSON.string) ?? .null),
            ("description", .string(i.description)),
            ("available", .bool(i.availability.isUsable)),
            ("availability", .string(i.availability.rawValue)),
            ("default", .bool(i.isDefault)),
        ])
    }
}
