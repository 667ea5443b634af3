import Routing

/// Options that apply to every command; they may stand before or after it.
struct GlobalOptions {
    var json = false
    var server: String?
    var snapshot: String?
    /// Seconds to wait for the server: connecting, and each request.
    var timeout = 5.0
    var quiet = false
}

/// The fields `routectl query FIELD` prints, one value each, for scripts.
/// Every row of the full status, by its row name; each top-level JSON key is accepted too
/// (DESIGN.md §2): `other_audio_playing` is `other_audio`, `output` the output object.
enum QueryField: String, CaseIterable {
    case route, target, override, `default`, external, available, bluetooth, headset, receiver, speaker, engaged
    case otherAudio = "other_audio", muted, call, micMuted = "mic_muted", sink, port, description, server, output

    init?(word: String) {
        if word == "other_audio_playing" { self = .otherAudio; return }
        self.init(rawValue: word)
    }

    /// Its key in JSON, the full status's (keys are never renamed): `other_audio` is `other_audio_playing`.
    var jsonKey: String { self == .otherAudio ? "other_audio_playing" : rawValue }

    /// The words `query` accepts, for errors and completions.
    static var words: [String] { allCases.map(\.rawValue) + ["other_audio_playing"] }

    /// What the full status is made of: of the sources only the default one (its mute), and not the
    /// recording streams, which it does not show.
    static let statusParts: SnapshotParts = [.sinks, .defaultSource, .cards, .sinkInputs]

    /// What the field's answer is made of, fetched from the server and nothing more: on a machine
    /// with many devices the sources (a monitor per sink) and the streams cost more than the rest.
    /// The sinks and cards say whether an override on disk is stale, which is cleared before any
    /// answer. With none on disk (looked at only for the fields that can use it), routectl's own
    /// state needs no server and a field of the output in use needs the default sink alone.
    func parts(overrideOnDisk: @autoclosure () -> Bool) -> SnapshotParts {
        switch self {
        case .override, .default, .target:
            return overrideOnDisk() ? [.sinks, .cards] : []
        case .route, .external, .muted, .sink, .port, .description, .output:
            return overrideOnDisk() ? [.sinks, .cards] : [.defaultSink, .cards]
        case .engaged, .otherAudio: return [.sinks, .cards, .sinkInputs]
        case .micMuted: return [.sinks, .cards, .defaultSource]
        case .available, .bluetooth, .headset, .receiver, .speaker, .call, .server: return [.sinks, .cards]
        }
    }

    /// routectl's own state: answered without a server when none answers.
    var isOwnState: Bool { [.override, .default, .target].contains(self) }
}

enum Command {
    case query(QueryField?)
    case set(RouteRequest)
    case clear
    case `default`(RouteTarget?)
    case inputList
    case inputSet(String)
    case inputClear
    case inputMute(MuteChange?)
    case call(CallVerb, speaker: Bool)
    case priorityList
    case prioritySet([String])
    case priorityClear
    case why
    case watch(WatchOptions)
    case wait(Route, timeout: Double?)
    case devices
    case dump
    case help(String?)
    case version
    case completions(Shell)
    case completionIds(IdKind)
}

struct Invocation {
    var options = GlobalOptions()
    var command: Command
}

/// `watch`'s own options.
struct WatchOptions: Equatable {
    var apply = false
    var muteOnFallback = false
    /// Seconds a departed device has to come back before its override clear happens (0: off).
    var holdDown = 2.0
    var dbus = false
}

enum CallVerb: String, CaseIterable {
    case start, end, status
}

/// `input mute on|off|toggle`.
enum MuteChange: String, CaseIterable {
    case on, off, toggle
}

/// One entry of the command table: what it takes, for the parser, the help and the completions.
struct CommandSpec {
    var name: String
    var arguments: String
    var summary: String
    /// Options this command takes beyond the global ones.
    var options: [OptionSpec] = []
    /// The words its first argument takes, for the completions (the parser checks the same lists).
    var words: [String] = []
    /// What follows a first word (`input set <id>`, `input mute on`), for the completions.
    var after: [Follow] = []
    var details: String
}

/// What a command's first word takes next: fixed words, device ids of a kind, or both; `repeats`
/// when it takes any number of them (`priority set <id>...`).
struct Follow {
    var word: String
    var words: [String] = []
    var ids: IdKind?
    var repeats = false
}

/// Live values the completions ask routectl for.
enum IdKind: String, CaseIterable {
    case outputs, inputs
}

struct OptionSpec {
    var name: String
    var short: Character?
    var value: String?
    var help: String
    /// Device ids complete this option's value.
    var ids: IdKind?
    /// A file name completes this option's value.
    var file = false
}

enum Grammar {
    static let globalOptions: [OptionSpec] = [
        OptionSpec(name: "json", help: "Print one JSON object (documented keys, snake_case)."),
        OptionSpec(name: "server", short: "s", value: "ADDRESS", help: "Connect to this server instead of the default one (as PULSE_SERVER)."),
        OptionSpec(name: "snapshot", value: "FILE", help: "Run a read-only command against a dump instead of a server.", file: true),
        OptionSpec(name: "timeout", value: "SECONDS", help: "Give up on the server after this long (default 5)."),
        OptionSpec(name: "quiet", short: "q", help: "Print no notes on stderr; errors are still printed."),
        OptionSpec(name: "help", short: "h", help: "Show help information."),
        OptionSpec(name: "version", help: "Show routectl's version and libpulse's."),
    ]

    static let commands: [CommandSpec] = [
        CommandSpec(
            name: "query", arguments: "[FIELD]", summary: "Show where sound comes out (the default command).",
            words: QueryField.words,
            details: """
              With no FIELD, the full status. With a FIELD, its value alone, for scripts:
                route      speaker, receiver, bluetooth, headset or unknown: where sound comes out
                target     the target routectl aims for (override, else the call's, else default)
                override   the temporary override, or none
                default    the persistent default: speaker or earpiece
                external   yes when the route is Bluetooth or a headset
                available  the kinds with a usable output
                bluetooth, headset, receiver, speaker
                           yes when an output of that kind can be used
                engaged    yes when a stream is playing on the route
                other_audio
                           yes when a stream is playing anywhere (JSON key other_audio_playing)
                muted      yes when the output is muted
                call       yes during a call (routectl call start ... call end)
                mic_muted  yes when the default input (the microphone) is muted; none without one
                sink, port, description, server, output
                           the output sound comes out of, and the server
              Every top-level --json key is accepted as a FIELD too.
            """),
        CommandSpec(
            name: "set", arguments: "<target>", summary: "Set the temporary override and move the sound there.",
            options: [
                OptionSpec(name: "force", help: "Switch even while an external device is the route."),
                OptionSpec(name: "device", value: "ID", help: "The output to use: an ID from 'routectl devices', a sink or a card.",
                           ids: .outputs),
            ],
            words: RouteTarget.words,
            details: """
              <target> is speaker, earpiece (alias receiver), bluetooth or headset. The override lasts
              until 'routectl clear', until an external device is connected or disconnected, or until
              logout. While Bluetooth or a headset is the route, 'set speaker' and 'set earpiece' record
              the override and leave the sound where it is (exit 0, with a note); --force switches anyway.
              With no output of the kind here the route falls back to the speaker, or stays on an external
              device in use (exit 3; recorded); during a call it stays on the receiver or speaker.
              bluetooth and headset keep the device of that kind in use, else pick the most recently
              connected one, unless --device names one. In a call a Bluetooth output needs a headset
              profile (HFP/HSP): an A2DP-only speaker only named, with --force.
            """),
        CommandSpec(
            name: "clear", arguments: "", summary: "Drop the override and return to the default.",
            details: """
              Removes the temporary override and lets the rules decide: an external device in use keeps
              the sound; else the most recently connected one takes it; else the persistent default.
              With a priority list, the present listed output ranked first takes it.
            """),
        CommandSpec(
            name: "default", arguments: "[speaker|earpiece]", summary: "Show or set the persistent default.",
            words: ["speaker", "earpiece"],
            details: """
              With no argument, print the default. With one, record it (no server is needed); it decides
              where sound goes when no override is set and no external device is connected. Under a
              running 'watch --apply' the route follows at once if it was the old default's.
            """),
        CommandSpec(
            name: "input", arguments: "list | set <id> | clear | mute [on|off|toggle]",
            summary: "List inputs, set or clear the preferred one, or mute the microphone.",
            words: ["list", "set", "clear", "mute"],
            after: [Follow(word: "set", ids: .inputs), Follow(word: "mute", words: MuteChange.allCases.map(\.rawValue))],
            details: """
              list   every input (monitor sources are not inputs); '*' marks the default, 'P' the preferred
              set    make the source <id> the default input and remember it as preferred
              clear  forget the preferred input (no server is needed)
              mute   with no argument, print whether the microphone (the default input) is muted; on, off
                     or toggle change it, read back from the server
            """),
        CommandSpec(
            name: "call", arguments: "start [--speaker] | end | status", summary: "Call mode: the call's route until the call ends.",
            options: [OptionSpec(name: "speaker", help: "With 'call start': the call on the speaker rather than the receiver.")],
            words: CallVerb.allCases.map(\.rawValue),
            details: """
              start   enter call mode: a connected headset takes the call (Bluetooth in its headset profile,
                      HFP/HSP, for the call only), else the receiver (the speaker with --speaker); the
                      card's call profile is chosen by its ports; the microphone follows the output. During
                      a call again: re-applies it. The override in force steps aside until the call ends.
              end     leave call mode: every card profile, the route, the override and the microphone's
                      mute go back to how they were before the call; a headset that left during the call
                      gets its profile back when it returns (under 'watch --apply', or at the next call's
                      end). With no call: says so (exit 0).
              status  whether a call is in progress, since when, and its route.
              While 'watch --apply' runs, plugs, 'set' and 'clear' keep the call profile; a headset
              lost during a call falls back to the call's target, never the music route; and a muted
              call stays muted as its microphone moves (routectl never unmutes one by itself).
            """),
        CommandSpec(
            name: "priority", arguments: "[list] | set <id>... | clear", summary: "Show, set or clear the priority list of outputs.",
            words: ["list", "set", "clear"],
            after: [Follow(word: "set", words: Route.allCases.filter(\.isExternal).map(\.rawValue), ids: .outputs, repeats: true)],
            details: """
              An ordered list of output ids (from 'routectl devices'; a Bluetooth device's id is its card,
              the same in A2DP and HFP) or kinds (bluetooth, headset), kept in the persistent state; no
              server is needed. Under 'watch --apply' the present listed output ranked highest takes the
              route; unlisted external devices rank below, most recent first; an HDMI output takes the
              route only if it is listed. In a call it ranks headsets only. A list changed while it runs
              moves the route at once if the route is where the old list put it (not under an override
              or in a call: the list applies at their end). Ids not present now are kept (the headset
              at the office).
              'set --device' stays a temporary override and never edits the list.
            """),
        CommandSpec(
            name: "why", arguments: "", summary: "Say which rule put the route where it is, and what else could move it.",
            details: """
              The rule behind the route (call, override, priority list, external device, default, fallback,
              restored, routectl's own earlier move under rules changed since, or another client's or the
              server's choice), the output and port that carry it,
              since when, what 'watch --apply' last did (decision.json), and the other policies on this
              machine that could move it: routectl's own watcher, WirePlumber's remembered default and
              configuration, PulseAudio's switch-on-connect, switch-on-port-available and role-cork
              modules. Attach it, with 'routectl dump', to a bug report.
            """),
        CommandSpec(
            name: "watch", arguments: "", summary: "Print route events as they happen; --apply keeps the rules.",
            options: [
                OptionSpec(name: "apply", help: "Also enforce the rules: external devices win, unplugging falls back."),
                OptionSpec(name: "mute-on-fallback", help: "With --apply: mute the speaker the route falls back to from an external device (only one it can unmute later)."),
                OptionSpec(name: "hold-down", value: "SECONDS",
                           help: "With --apply: an external device back within this long is a flicker; its override stays (default 2, 0 off)."),
                OptionSpec(name: "dbus", help: "With --apply: serve io.github.routectl and the callaudiod drop-in on the session bus."),
            ],
            details: """
              One line per event, flushed; with --json one object per line (NDJSON). The first event is the
              current route with reason 'initial'. Events: route, device-added, device-removed,
              override-cleared, interrupted, recovered, engaged, other-audio, input, call, flicker, lost
              (a slow reader made watch drop events; the policy never waits on it). When the server goes
              away, 'interrupted', then reconnection with backoff and 'recovered'. SIGINT/SIGTERM end it
              (exit 0). One 'watch --apply' per user session.
            """),
        CommandSpec(
            name: "wait", arguments: "<route> [--timeout SECONDS]", summary: "Exit 0 when the route is or becomes <route>.",
            words: Route.allCases.map(\.rawValue),
            details: """
              <route> is speaker, receiver, bluetooth, headset or unknown. Exit 1 when --timeout SECONDS
              (given after 'wait') passes first; without it, wait as long as it takes. A route reached
              after a change counts once the server has been quiet on it for 60 ms: one the server only
              passes through on its way to another does not. A server that restarts meanwhile is
              waited for, as watch waits for it; exit 4 only when it is not back by the timeout.
            """),
        CommandSpec(
            name: "devices", arguments: "", summary: "List outputs and inputs: kind, availability, which is active.",
            details: """
              '*' marks the output sound comes out of and the default input. AVAILABLE is yes, no (a jack
              known to be unplugged), jack (a built-in output a plugged jack hides: 'set --force' reaches
              it) or profile (the output exists under another profile of its card). IDs are stable across
              profile switches: CARD:PORT, the card for a Bluetooth device, else the sink or source name.
            """),
        CommandSpec(
            name: "dump", arguments: "", summary: "Print the server state as a snapshot (JSON).",
            details: """
              The snapshot uses pactl's JSON member names ('pactl -f json list'), with 'server' added.
              Read it back with --snapshot FILE; attach it to a bug report.
            """),
        CommandSpec(name: "help", arguments: "[COMMAND]", summary: "Show help for routectl or one command.", details: ""),
        CommandSpec(
            name: "completions", arguments: "bash|zsh|fish", summary: "Print the shell completion script (generated from this table).",
            words: ["bash", "zsh", "fish", "ids"], after: [Follow(word: "ids", words: IdKind.allCases.map(\.rawValue))],
            details: """
              bash, zsh or fish: the script 'make install' installs, printed from routectl's own command
              table, so it cannot miss a command or an option. 'completions ids outputs|inputs' prints
              the device ids the scripts offer (one a line), from the server or dump that --server or
              --snapshot names on the line being completed.
            """),
    ]

    static func command(named name: String) -> CommandSpec? { commands.first { $0.name == name } }

    /// The words a command's first argument takes: `help` takes the commands.
    static func words(of spec: CommandSpec) -> [String] { spec.name == "help" ? commands.map(\.name) : spec.words }
}

/// The hand-written parser of DESIGN.md §2: global options anywhere, `--opt=value` or `--opt value`,
/// `--` ends options; any unknown word is a usage failure before a connection is attempted.
enum ArgumentParser {
    static func parse(_ args: [String]) throws(Failure) -> Invocation {
        var options = GlobalOptions()
        var commandOptions: [String: String] = [:]
        // `wait ROUTE --timeout S`: a --timeout after the word `wait` is how long to wait, not the connect timeout.
        var waitTimeout: Double?
        var positionals: [String] = []
        var wantsHelp = false
        var wantsVersion = false
        var i = 0
        var onlyPositionals = false

        while i < args.count {
            let arg = args[i]
            i += 1
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                positionals.append(arg)
                continue
            }
            if arg == "--" { onlyPositionals = true; continue }

            let (spec, inlineValue, spelled) = try lookUp(arg)
            var value: String?
            if spec.value != nil {
                if let inlineValue {
                    value = inlineValue
                } else if i < args.count {
                    value = args[i]
                    i += 1
                } else {
                    throw Failure.usage("Missing value for '\(spelled)'.")
                }
            } else if inlineValue != nil {
                throw Failure.usage("Option '\(spelled)' takes no value.")
            }

            switch spec.name {
            case "json": options.json = true
            case "server": options.server = try address(value!, for: spelled)
            case "snapshot": options.snapshot = try nonEmpty(value!, for: spelled)
            case "timeout":
                if positionals.first == "wait" { waitTimeout = try seconds(value!, for: spelled) } else {
                    options.timeout = try seconds(value!, for: spelled)
                }
            case "quiet": options.quiet = true
            case "help": wantsHelp = true
            case "version": wantsVersion = true
            default: commandOptions[spec.name] = value ?? ""
            }
        }

        if wantsVersion { return Invocation(options: options, command: .version) }
        guard let word = positionals.first else {
            // `routectl --force` alone: a command's option with no command is a mistake, not a query.
            if let name = commandOptions.keys.sorted().first {
                let owners = Grammar.commands.filter { $0.options.contains { $0.name == name } }.map { "'\($0.name)'" }
                throw Failure.usage("Option '--\(name)' needs a command (\(owners.joined(separator: ", "))).")
            }
            return Invocation(options: options, command: wantsHelp ? .help(nil) : .query(nil))
        }
        guard let spec = Grammar.command(named: word) else {
            throw Failure.usage("Unknown command '\(word)'.\(suggestion(word, Grammar.commands.map(\.name)))")
        }
        if wantsHelp { return Invocation(options: options, command: .help(spec.name == "help" ? nil : spec.name)) }
        for name in commandOptions.keys.sorted() where !spec.options.contains(where: { $0.name == name }) {
            throw Failure.usage("Option '--\(name)' does not apply to '\(spec.name)'.")
        }
        let rest = Array(positionals.dropFirst())
        return Invocation(options: options, command: try command(spec, rest, commandOptions, waitTimeout: waitTimeout))
    }

    static func command(_ spec: CommandSpec, _ rest: [String], _ commandOptions: [String: String],
                        waitTimeout: Double? = nil) throws(Failure) -> Command {
        switch spec.name {
        case "query":
            try atMost(1, rest, spec)
            guard let word = rest.first else { return .query(nil) }
            guard let field = QueryField(word: word) else {
                throw Failure.usage("The value '\(word)' is invalid for '<field>'.\(suggestion(word, QueryField.words))")
            }
            return .query(field)
        case "set":
            guard let word = rest.first else { throw Failure.usage("Missing value for '<target>'.") }
            try atMost(1, rest, spec)
            guard let target = RouteTarget(word: word) else {
                throw invalid(word, for: "<target>", among: RouteTarget.words)
            }
            let device = try commandOptions["device"].map { id throws(Failure) in try outputID(id) }
            return .set(RouteRequest(target: target, device: device, force: commandOptions["force"] != nil))
        case "clear":
            try atMost(0, rest, spec)
            return .clear
        case "default":
            try atMost(1, rest, spec)
            guard let word = rest.first else { return .default(nil) }
            guard let target = RouteTarget(word: word), target.isBuiltIn else {
                throw invalid(word, for: "default", among: ["speaker", "earpiece"])
            }
            return .default(target)
        case "input":
            guard let verb = rest.first else { throw Failure.usage("Missing value for 'input': expected list, set, clear or mute.") }
            switch verb {
            case "mute":
                try atMost(2, rest, spec)
                guard rest.count == 2 else { return .inputMute(nil) }
                guard let change = MuteChange(rawValue: rest[1]) else {
                    throw invalid(rest[1], for: "input mute", among: MuteChange.allCases.map(\.rawValue))
                }
                return .inputMute(change)
            case "list": try atMost(1, rest, spec); return .inputList
            case "clear": try atMost(1, rest, spec); return .inputClear
            case "set":
                guard rest.count >= 2 else { throw Failure.usage("Missing value for '<id>'.") }
                try atMost(2, rest, spec)
                return .inputSet(try outputID(rest[1]))
            default:
                throw invalid(verb, for: "input", among: ["list", "set", "clear", "mute"])
            }
        case "why":
            try atMost(0, rest, spec)
            return .why
        case "priority":
            guard let verb = rest.first, verb != "list" else { try atMost(1, rest, spec); return .priorityList }
            switch verb {
            case "clear": try atMost(1, rest, spec); return .priorityClear
            case "set":
                let ids = Array(rest.dropFirst())
                guard !ids.isEmpty else { throw Failure.usage("Missing value for '<id>': 'priority set' takes one or more output ids.") }
                for id in ids { _ = try outputID(id) }
                return .prioritySet(ids)
            default:
                throw invalid(verb, for: "priority", among: ["list", "set", "clear"])
            }
        case "call":
            guard let word = rest.first else { throw Failure.usage("Missing value for 'call': expected start, end or status.") }
            try atMost(1, rest, spec)
            guard let verb = CallVerb(rawValue: word) else {
                throw invalid(word, for: "call", among: CallVerb.allCases.map(\.rawValue))
            }
            if commandOptions["speaker"] != nil, verb != .start { throw Failure.usage("Option '--speaker' needs 'call start'.") }
            return .call(verb, speaker: commandOptions["speaker"] != nil)
        case "watch":
            try atMost(0, rest, spec)
            var watch = WatchOptions(apply: commandOptions["apply"] != nil, muteOnFallback: commandOptions["mute-on-fallback"] != nil,
                                     dbus: commandOptions["dbus"] != nil)
            for name in ["mute-on-fallback", "hold-down", "dbus"] where commandOptions[name] != nil && !watch.apply {
                throw Failure.usage("Option '--\(name)' needs '--apply'.")
            }
            if let value = commandOptions["hold-down"] {
                guard let s = decimal(value), s >= 0, s <= 3600 else {
                    throw Failure.usage("The value '\(value)' is invalid for '--hold-down': expected seconds, 0 to 3600.")
                }
                watch.holdDown = s
            }
            return .watch(watch)
        case "wait":
            guard let word = rest.first else { throw Failure.usage("Missing value for '<route>'.") }
            try atMost(1, rest, spec)
            guard let route = Route(rawValue: word == "earpiece" ? "receiver" : word) else {
                throw invalid(word, for: "<route>", among: Route.allCases.map(\.rawValue))
            }
            return .wait(route, timeout: waitTimeout)
        case "devices":
            try atMost(0, rest, spec)
            return .devices
        case "dump":
            try atMost(0, rest, spec)
            return .dump
        case "completions":
            guard let shell = rest.first else { throw Failure.usage("Missing value for '<shell>'.") }
            if shell == "ids" {
                guard rest.count == 2, let kind = IdKind(rawValue: rest[1]) else {
                    throw Failure.usage("'completions ids' takes outputs or inputs.")
                }
                return .completionIds(kind)
            }
            try atMost(1, rest, spec)
            guard let which = Shell(rawValue: shell) else {
                throw invalid(shell, for: "<shell>", among: ["bash", "zsh", "fish"])
            }
            return .completions(which)
        case "help":
            try atMost(1, rest, spec)
            guard let topic = rest.first else { return .help(nil) }
            guard Grammar.command(named: topic) != nil else {
                throw Failure.usage("Unknown command '\(topic)'.\(suggestion(topic, Grammar.commands.map(\.name)))")
            }
            return .help(topic)
        default:
            throw Failure.usage("Unknown command '\(spec.name)'.")
        }
    }

    static func atMost(_ n: Int, _ rest: [String], _ spec: CommandSpec) throws(Failure) {
        guard rest.count > n else { return }
        throw Failure.usage("Unexpected argument '\(rest[n])' for '\(spec.name)'.")
    }

    /// Finds an option by its long or short spelling; returns it, an inline `=value`, and how it was written.
    static func lookUp(_ arg: String) throws(Failure) -> (OptionSpec, String?, String) {
        let all = Grammar.globalOptions + Grammar.commands.flatMap(\.options)
        if arg.hasPrefix("--") {
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if let spec = all.first(where: { $0.name == name }) { return (spec, inline, "--\(name)") }
            throw Failure.usage("Unknown option '--\(name)'.\(suggestion("--\(name)", all.map { "--\($0.name)" }))")
        }
        let letters = Array(arg.dropFirst())
        if letters.count == 1, let spec = all.first(where: { $0.short == letters[0] }) { return (spec, nil, arg) }
        if letters.count > 1, let spec = all.first(where: { $0.short == letters[0] }), spec.value != nil {
            return (spec, String(letters.dropFirst()), "-\(letters[0])")
        }
        let spellings = all.compactMap { $0.short.map { "-\($0)" } } + all.map { "--\($0.name)" }
        throw Failure.usage("Unknown option '\(arg)'.\(suggestion(arg, spellings))")
    }

    /// A server address libpulse can take: libpulse aborts on some over-long host names, so routectl
    /// refuses them first, with control characters.
    static func address(_ value: String, for option: String) throws(Failure) -> String {
        let value = try nonEmpty(value, for: option)
        guard value.utf8.count <= 1024, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw Failure.usage("The value for '\(option)' is invalid: a server address is at most 1024 bytes, without control characters.")
        }
        return value
    }

    /// An output or input id as DESIGN.md §1 bounds it: not empty, at most 1,024 bytes, no control
    /// characters (C0, DEL and C1, which terminals also act on).
    static func outputID(_ id: String) throws(Failure) -> String {
        guard PersistentState.isWellFormed(id: id) else {
            throw Failure.usage("The id '\(Events.escapedForLine(String(id.prefix(64))))' is malformed: \(PersistentState.idRule).")
        }
        return id
    }

    static func nonEmpty(_ value: String, for option: String) throws(Failure) -> String {
        guard !value.isEmpty else { throw Failure.usage("The value '' is invalid for '\(option)'.") }
        return value
    }

    static func seconds(_ value: String, for option: String) throws(Failure) -> Double {
        guard let s = decimal(value), s > 0, s <= 86_400 else {
            throw Failure.usage("The value '\(value)' is invalid for '\(option)': expected seconds, a number above 0 and at most 86400.")
        }
        return s
    }

    /// A finite decimal number (`2`, `0.5`, `1e3`); not the hexadecimal, `inf` or `nan` that `Double`
    /// also reads.
    static func decimal(_ value: String) -> Double? {
        guard value.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x65 || $0 == 0x45 || $0 == 0x2B || $0 == 0x2D }),
              let number = Double(value), number.isFinite else { return nil }
        return number
    }

    /// Words people type for a target or route, and the word routectl uses.
    static let synonyms = [
        "headphone": "headset", "headphones": "headset", "earphones": "headset", "earbuds": "headset", "wired": "headset",
        "bt": "bluetooth", "bluez": "bluetooth", "speakers": "speaker", "loudspeaker": "speaker",
        "handset": "earpiece", "phone": "earpiece",
        "stop": "end", "hangup": "end", "finish": "end", "begin": "start", "answer": "start",
    ]

    /// A word outside a short closed set: the words it takes, and the closest one when one is close.
    static func invalid(_ word: String, for name: String, among words: [String]) -> Failure {
        Failure.usage("The value '\(word)' is invalid for '\(name)'\(expected(words)).\(suggestion(word, words))")
    }

    /// ": expected a, b or c": the words a closed set takes, in the order help gives them.
    static func expected(_ words: [String]) -> String {
        guard let last = words.last else { return "" }
        return ": expected " + (words.count == 1 ? last : words.dropLast().joined(separator: ", ") + " or " + last)
    }

    /// " Did you mean 'x'?" for the closest candidate, or nothing when none is close.
    static func suggestion(_ word: String, _ candidates: [String]) -> String {
        if let alias = synonyms[word.lowercased()], candidates.contains(alias) { return " Did you mean '\(alias)'?" }
        var best: (String, Int)?
        for c in candidates {
            let d = editDistance(word.lowercased(), c)
            if d < (best?.1 ?? Int.max) { best = (c, d) }
        }
        guard let (match, distance) = best else { return "" }
        // Candidates may be a server's names: printed with their control characters escaped.
        let prefix = candidates.filter { $0.hasPrefix(word) && word.count >= 2 }
        if prefix.count == 1 { return " Did you mean '\(Events.printable(prefix[0]))'?" }
        return distance <= max(1, min(3, match.count / 3)) ? " Did you mean '\(Events.printable(match))'?" : ""
    }

    /// Edits between two words, a swap of neighbours counting as one (`qeury` is one from `query`).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}
