import Routing
import Store
import Testing

/// Loads a dump from Fixtures/ beside this file.
func fixture(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Snapshot {
    let dir = #filePath.split(separator: "/").dropLast().joined(separator: "/")
    let bytes = try FileIO.read("/\(dir)/Fixtures/\(name).json")
    return try Snapshot(json: String(decoding: bytes, as: UTF8.self))
}

extension Snapshot {
    /// The snapshot with `sink` as the default sink, and `port` as its active port when given.
    func routed(to sink: String, port: String? = nil) -> Snapshot {
        var s = self
        s.server.defaultSinkName = sink
        if let port, let i = s.sinks.firstIndex(where: { $0.name == sink }) { s.sinks[i].activePort = port }
        return s
    }

    /// The snapshot with one sink port's availability changed (a jack plugged or pulled), on the sink
    /// and on its card, as servers report it.
    func jack(_ sink: String, _ port: String, _ availability: PortAvailability) -> Snapshot {
        var s = self
        guard let i = s.sinks.firstIndex(where: { $0.name == sink }) else { return s }
        if let j = s.sinks[i].ports.firstIndex(where: { $0.name == port }) { s.sinks[i].ports[j].availability = availability }
        if let c = s.cards.firstIndex(where: { $0.index == s.sinks[i].card }),
           let j = s.cards[c].ports.firstIndex(where: { $0.name == port }) {
            s.cards[c].ports[j].port.availability = availability
        }
        return s
    }

    var route: Route { Status(snapshot: self).route }
}
