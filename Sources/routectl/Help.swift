import Pulse
import Routing

/// The help texts, in swift-argument-parser's layout; `-h`, `--help` and `help COMMAND` print the same.
enum Help {
    static let version = "0.1.0"

    static var versionText: String {
        "routectl \(version) (libpulse: compiled with \(PulseLibrary.headersVersion), linked with \(PulseLibrary.libraryVersion))\n"
    }

    static func text(for topic: String?) -> String {
        if let topic, let spec = Grammar.command(named: topic) { return commandText(spec) }
        var out = """
        OVERVIEW: Manage where sound comes out: speaker, receiver, bluetooth, headset.

        routectl classifies the default output of a PulseAudio or PipeWire (pipewire-pulse) server
        into five routes, reports it for people and scripts, and moves sound to a target: a
        persistent default (speaker or earpiece) under a temporary override, where external devices
        keep priority while they are connected.

        USAGE: routectl [<options>] [<command>] [<arguments>]

        OPTIONS:

        """
        out += optionRows(Grammar.globalOptions)
        out += "\nCOMMANDS:\n"
        out += Console.table(Grammar.commands.map { [$0.name + ($0.arguments.isEmpty ? "" : " " + $0.arguments), $0.summary] },
                             indent: "  ")
        out += """

        EXIT STATUS:

        """
        out += Console.table(ExitStatus.documented.map { [String($0.0.rawValue), $0.1] }, indent: "  ")
        out += """

        See 'routectl help <command>' for details.

        """
        return out
    }

    static func commandText(_ spec: CommandSpec) -> String {
        var out = "OVERVIEW: \(spec.summary)\n\nUSAGE: routectl [<options>] \(spec.name)"
        if !spec.arguments.isEmpty { out += " \(spec.arguments)" }
        out += "\n\n"
        if !spec.details.isEmpty { out += "DETAILS:\n\(spec.details)\n\n" }
        if !spec.options.isEmpty { out += "OPTIONS:\n" + optionRows(spec.options) + "\n" }
        out += "GLOBAL OPTIONS:\n" + optionRows(Grammar.globalOptions)
        out += "\nSee 'routectl --help' for all commands.\n"
        return out
    }

    static func optionRows(_ options: [OptionSpec]) -> String {
        Console.table(options.map { o in
            var spelled = o.short.map { "-\($0), " } ?? ""
            spelled += "--\(o.name)"
            if let v = o.value { spelled += " <\(v.lowercased())>" }
            return [spelled, o.help]
        }, indent: "  ")
    }

    /// `help --json`: the command table itself, for tools and completion generators.
    static func json(for topic: String?) -> JSON {
        if let topic, let spec = Grammar.command(named: topic) { return object(spec) }
        return .object([
            ("version", .string(version)),
            ("options", .array(Grammar.globalOptions.map(object))),
            ("commands", .array(Grammar.commands.map(object))),
            ("exit_statuses", .object(ExitStatus.documented.map { (String($0.0.rawValue), .string($0.1)) })),
        ])
    }

    static func object(_ spec: CommandSpec) -> JSON {
        .object([
            ("name", .string(spec.name)), ("arguments", .string(spec.arguments)), ("summary", .string(spec.summary)),
            ("words", .array(Grammar.words(of: spec).map(JSON.string))), ("options", .array(spec.options.map(object))),
            ("details", .string(spec.details)),
        ])
    }

    static func object(_ option: OptionSpec) -> JSON {
        .object([
            ("name", .string(option.name)), ("short", option.short.map { .string(String($0)) } ?? .null),
            ("value", option.value.map(JSON.string) ?? .null), ("help", .string(option.help)),
        ])
    }
}
