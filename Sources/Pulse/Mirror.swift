internal import CPulse
import Routing

/// The devices the change notifications since a subscribed connection's last read name, by kind:
/// what its next whole read asks for again, one object at a time (DESIGN.md §3: a burst is one
/// refetch; this makes that refetch the burst's devices, not every list). The streams are not
/// counted: their lists are read whole every time (`PulseConnection.readChanged` says why).
struct ChangedObjects: Equatable {
    var sinks: Set<UInt32> = []
    var sources: Set<UInt32> = []
    var cards: Set<UInt32> = []

    /// In a kind's set: a notification named no index there, so the kind's whole list is read.
    static let wholeList = UInt32.max

    /// Notes one notification: its facility (`pa_subscription_event_type_t`, the facility bits) and
    /// the object's index (`PA_INVALID_INDEX`, which pipewire-pulse sends for a card its client
    /// does not know, stands for the whole kind: libpulse refuses to ask for it by that index).
    mutating func note(facility: UInt32, index: UInt32) {
        switch facility {
        case PA_SUBSCRIPTION_EVENT_SINK.rawValue: sinks.insert(index)
        case PA_SUBSCRIPTION_EVENT_SOURCE.rawValue: sources.insert(index)
        case PA_SUBSCRIPTION_EVENT_CARD.rawValue: cards.insert(index)
        default: break
        }
    }

    /// What to ask for again over `base`. A card's notification stands for its sinks and sources as
    /// well: pipewire-pulse tells a change of which routes are available to the card alone, and the
    /// sink's or source's copy of the port changes with it (PulseAudio tells both).
    func expanded(over base: Snapshot) -> ChangedObjects {
        var wanted = self
        if cards.contains(Self.wholeList) {
            wanted.sinks.insert(Self.wholeList)
            wanted.sources.insert(Self.wholeList)
            return wanted
        }
        for sink in base.sinks where sink.card.map(cards.contains) ?? false { wanted.sinks.insert(sink.index) }
        for source in base.sources where source.card.map(cards.contains) ?? false { wanted.sources.insert(source.index) }
        return wanted
    }

    /// The indices to ask for, or nil for the whole list: more than `Mirror.listAbove` of them (one
    /// reply instead of many requests), or one notification that named none.
    static func asked(_ set: Set<UInt32>) -> Set<UInt32>? {
        set.count > Mirror.listAbove || set.contains(wholeList) ? nil : set
    }
}

/// The server as a subscribed connection last read it, and what has changed since: a whole read
/// asks only for the objects named since (`ChangedObjects`) and lays them over it. Kept only for a
/// connection that was subscribed before the read that made it, and dropped with the connection
/// (or when a read fails), so that the next read is whole again.
struct Mirror {
    var snapshot: Snapshot?
    var changed = ChangedObjects()

    /// Beyond this many objects of one kind, that kind's whole list is asked for instead (one reply
    /// instead of many requests): a profile switch, a server restoring its streams.
    static let listAbove = 8
    /// Reads that notifications overtake before a whole read is made instead (`refetchChanged`).
    static let readsBeforeWhole = 4

    mutating func forget() {
        snapshot = nil
        changed = ChangedObjects()
    }

    /// `old` with the objects `asked` for replaced by their fresh copies (`got`), in place; one asked
    /// for that did not come back has gone, and one that is new comes last, as it does in the
    /// servers' own lists. `asked` nil: the whole list was asked for, and `got` is it.
    static func patched<Object>(_ old: [Object], asked: Set<UInt32>?, got: [Object], index: (Object) -> UInt32) -> [Object] {
        guard let asked else { return got }
        guard !asked.isEmpty else { return old }
        var fresh: [UInt32: Object] = [:]
        for object in got { fresh[index(object)] = object }
        var result: [Object] = []
        result.reserveCapacity(old.count + got.count)
        for object in old {
            let i = index(object)
            if !asked.contains(i) {
                result.append(object)
            } else if let new = fresh.removeValue(forKey: i) {
                result.append(new)
            }
        }
        // New objects in the order of their indices (the order their replies came is not theirs).
        result += got.filter { fresh[index($0)] != nil }.sorted { index($0) < index($1) }
        return result
    }
}
