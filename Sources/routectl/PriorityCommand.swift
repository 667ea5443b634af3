import Routing
import Store

/// `routectl priority [list] | set ID... | clear`: the priority list in the persistent state
/// (DESIGN.md §1 "Desktop policy"). No server is needed; with one, ids not present now get a note.
enum PriorityCommand {
    static func list(_ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let priority: [String]
        let live: Snapshot?
        if options.snapshot != nil {
            let snapshot = try ServerAccess.snapshot(options)
            priority = snapshot.routectl?.priority ?? []
            live = snapshot
        } else {
            do { priority = try State.store().loadPersistent().priority } catch { throw State.failure(error) }
            // Presence is all the server adds: with no list there is nothing to ask it.
            live = priority.isEmpty ? nil : try? ServerAccess.snapshot(options, parts: [.sinks, .cards])
        }
        let outputs = live.map { Status(snapshot: $0).outputs }
        func entry(_ id: String) -> (present: Bool?, output: Output?) {
            guard let outputs else { return (nil, nil) }
            // Present as the rules rank it: not on a card switched off, not a headset leaving.
            if let kind = Route(rawValue: id), kind.isExternal {
                return (outputs.contains { $0.route == kind && $0.isConnected }, nil)
            }
            let output = outputs.first { ($0.id == id || $0.sink == id) && $0.isConnected }
            return (output != nil, output)
        }
        if options.json {
            return RouteCtl.write(JSON.object([("priority", .array(priority.map { id in
                let (present, output) = entry(id)
                return .object([("id", .string(id)), ("present", present.map(JSON.bool) ?? .null),
                                ("route", output.map { .string($0.route.rawValue) } ?? .null)])
            }))]).text + "\n")
        }
        guard !priority.isEmpty else { return RouteCtl.write("no priority list: the most recently connected device wins\n") }
        let rows = priority.enumerated().map { (i, id) -> [String] in
            let (present, output) = entry(id)
            return ["\(i + 1)", present.map { $0 ? "yes" : "no" } ?? "?", id, output?.description ?? ""]
        }
        return RouteCtl.write(Console.table([["#", "PRESENT", "ID", "DESCRIPTION"]] + rows))
    }

    /// Records the list (empty: clears it), under the persistent file's lock so nothing else is lost.
    static func set(_ ids: [String], _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        var unique: [String] = []
        for id in ids where !unique.contains(id) { unique.append(id) }
        do {
            try State.store().updatePersistent { $0.priority = unique }
        } catch {
            throw State.failure(error)
        }
        if !unique.isEmpty, !options.quiet, let live = try? ServerAccess.snapshot(options, parts: [.sinks, .cards]) {
            let outputs = Status(snapshot: live).outputs
            for id in unique where Route(rawValue: id)?.isExternal != true && !outputs.contains(where: { $0.id == id || $0.sink == id }) {
                // A route's name that is not a kind the list takes (speaker, receiver): name its outputs here.
                if let route = id == "earpiece" ? .receiver : Route(rawValue: id) {
                    let ids = outputs.filter { $0.route == route }.map { "'\(Events.printable($0.id))'" }
                    let here = ids.isEmpty ? "" : " (the \(id) here: \(ids.joined(separator: ", ")))"
                    Console.err("routectl: note: '\(id)' is kept as an output id, and no output has it; the list takes output ids\(here) and the kinds bluetooth and headset\n")
                    continue
                }
                let known = outputs.map(\.id)
                Console.err("routectl: note: '\(id)' is not an output here now; it is kept for when it is.\(ArgumentParser.suggestion(id, known))\n")
            }
        }
        if options.json { return RouteCtl.write(JSON.object([("priority", .array(unique.map(JSON.string)))]).text + "\n") }
        return RouteCtl.write(unique.isEmpty ? "priority  none\n" : "priority  \(unique.joined(separator: " "))\n")
    }
}
