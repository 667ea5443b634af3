import Glibc
import Routing

/// One event as one line: text for people (local time), NDJSON for programs (UTC, ISO 8601).
enum EventRenderer {
    static func line(_ event: Event, json: Bool, at time: timespec = now()) -> String {
        json ? object(event, time).text + "\n" : text(event, time) + "\n"
    }

    static func now() -> timespec {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts
    }

    static func text(_ event: Event, _ time: timespec) -> String {
        var tm = Glibc.tm()
        var seconds = time.tv_sec
        localtime_r(&seconds, &tm)
        let stamp = "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)).\(three(Int(time.tv_nsec) / 1_000_000))"
        let detail: String
        switch event {
        case let .route(route, previous, reason, output):
            detail = "\(route.rawValue)" + (previous.map { " (was \($0.rawValue))" } ?? "") + " reason=\(reason.rawValue)"
                + " output=\(escaped(output?.id ?? "none"))"
        case let .deviceAdded(o), let .deviceRemoved(o):
            detail = "\(o.route.rawValue) \(escaped(o.id)) \"\(escaped(o.description))\""
        case let .overrideCleared(override, cause):
            detail = "\(override.rawValue): \(escaped(cause))"
        case let .interrupted(reason):
            detail = escaped(reason)
        case let .recovered(route, output):
            detail = "\(route.rawValue) output=\(escaped(output?.id ?? "none"))"
        case let .engaged(on):
            detail = on ? "yes" : "no"
        case let .otherAudio(playing):
            detail = playing ? "playing" : "stopped"
        case let .input(source, previous, sourceChanged, micMuted):
            detail = escaped(source ?? "none") + (sourceChanged ? " (was \(previous.map(escaped) ?? "none"))" : "")
                + (micMuted.map { " mic_muted=\($0 ? "yes" : "no")" } ?? "")
        case let .call(active, route):
            detail = (active ? "active" : "ended") + " route=\(route.rawValue)"
        case let .flicker(o, away):
            detail = "\(o.route.rawValue) \(escaped(o.id)) away_ms=\(away)"
        case let .lost(count):
            detail = "\(count) event\(count == 1 ? "" : "s") dropped: the reader was too slow"
        }
        return "\(stamp) \(event.type) \(detail)"
    }

    /// Text a device or server supplied, safe on one line (see `Events.escapedForLine`).
    static func escaped(_ text: String) -> String { Events.escapedForLine(text) }

    /// The NDJSON object; keys are documented in routectl(1) and never renamed.
    static func object(_ event: Event, _ time: timespec) -> JSON {
        var m: [(String, JSON)] = [("time", .string(iso8601(time))), ("type", .string(event.type))]
        switch event {
        case let .route(route, previous, reason, output):
            m += [("route", .string(route.rawValue)), ("previous", previous.map { .string($0.rawValue) } ?? .null),
                  ("reason", .string(reason.rawValue)), ("output", output.map(DevicesCommand.object) ?? .null)]
        case let .deviceAdded(o), let .deviceRemoved(o):
            m += [("kind", .string(o.route.rawValue)), ("name", .string(o.id)), ("description", .string(o.description))]
        case let .overrideCleared(override, cause):
            m += [("override", .string(override.rawValue)), ("cause", .string(cause))]
        case let .interrupted(reason):
            m += [("reason", .string(reason))]
        case let .recovered(route, output):
            m += [("route", .string(route.rawValue)), ("output", output.map(DevicesCommand.object) ?? .null)]
        case let .engaged(on):
            m += [("engaged", .bool(on))]
        case let .otherAudio(playing):
            m += [("playing", .bool(playing))]
        case let .input(source, previous, sourceChanged, micMuted):
            m += [("source", source.map(JSON.string) ?? .null), ("previous", previous.map(JSON.string) ?? .null),
                  ("source_changed", .bool(sourceChanged)), ("mic_muted", micMuted.map(JSON.bool) ?? .null)]
        case let .call(active, route):
            m += [("active", .bool(active)), ("route", .string(route.rawValue))]
        case let .flicker(o, away):
            m += [("kind", .string(o.route.rawValue)), ("name", .string(o.id)), ("away_ms", .int(Int64(away)))]
        case let .lost(count):
            m += [("count", .int(Int64(count)))]
        }
        return .object(m)
    }

    static func iso8601(_ time: timespec) -> String {
        var tm = Glibc.tm()
        var seconds = time.tv_sec
        gmtime_r(&seconds, &tm)
        return "\(tm.tm_year + 1900)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):"
            + "\(two(tm.tm_sec)).\(three(Int(time.tv_nsec) / 1_000_000))Z"
    }

    static func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    static func three(_ n: Int) -> String { n < 10 ? "00\(n)" : n < 100 ? "0\(n)" : "\(n)" }
}
