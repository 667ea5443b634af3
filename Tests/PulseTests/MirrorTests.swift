import CPulse
@testable import Pulse
import Routing
import Testing

/// A subscribed connection's whole read asks only for the objects notified since, and lays them over
/// what it read before: what it asks for, and how the replies are laid over.
@Suite struct MirrorTests {
    static func sink(_ index: UInt32, card: UInt32? = nil, ports: [String] = [], description: String = "") -> Sink {
        Sink(index: index, name: "sink\(index)", description: description, card: card,
             ports: ports.map { Port(name: $0, description: $0) }, activePort: ports.first)
    }

    static func source(_ index: UInt32, card: UInt32? = nil) -> Source {
        Source(index: index, name: "source\(index)", description: "", card: card)
    }

    @Test func aReplyReplacesItsObjectInPlaceAGoneOneIsDroppedANewOneComesLast() {
        let old = [Self.sink(3), Self.sink(5), Self.sink(9)]
        let got = [Self.sink(12, description: "new"), Self.sink(3, description: "changed"), Self.sink(11, description: "new")]
        let patched = Mirror.patched(old, asked: [3, 5, 11, 12], got: got, index: \.index)
        #expect(patched.map(\.index) == [3, 9, 11, 12])
        #expect(patched[0].description == "changed")
        #expect(patched[2].description == "new" && patched[3].description == "new")
    }

    @Test func nothingAskedKeepsTheListAndAWholeListReplacesIt() {
        let old = [Self.sink(3), Self.sink(5)]
        #expect(Mirror.patched(old, asked: [], got: [], index: \.index) == old)
        #expect(Mirror.patched(old, asked: nil, got: [Self.sink(7)], index: \.index).map(\.index) == [7])
        #expect(Mirror.patched(old, asked: nil, got: [], index: \.index).isEmpty)
    }

    /// pipewire-pulse tells a change of which routes are available to the card alone: the sinks and
    /// sources holding a copy of its ports are asked for with it.
    @Test func aCardsNotificationAsksForItsSinksAndSourcesToo() {
        let base = Snapshot(server: ServerInfo(name: "pulseaudio", version: "16.1"),
                            sinks: [Self.sink(1, card: 7, ports: ["speaker"]), Self.sink(2, card: 8), Self.sink(3, ports: ["line"]), Self.sink(4)],
                            sources: [Self.source(10, card: 7), Self.source(11, card: 8), Self.source(12)])
        var changed = ChangedObjects()
        changed.note(facility: PA_SUBSCRIPTION_EVENT_CARD.rawValue, index: 7)
        var wanted = changed.expanded(over: base)
        #expect(wanted == ChangedObjects(sinks: [1], sources: [10], cards: [7]))
        // The defaults' notification names no device.
        changed = ChangedObjects()
        changed.note(facility: PA_SUBSCRIPTION_EVENT_SERVER.rawValue, index: UInt32.max)
        wanted = changed.expanded(over: base)
        #expect(wanted == ChangedObjects())
    }

    /// A card notified with no index (pipewire-pulse, for a card its client does not know): libpulse
    /// refuses that index, so the cards, sinks and sources are read whole.
    @Test func aNotificationWithNoIndexReadsTheWholeKind() {
        let base = Snapshot(server: ServerInfo(name: "pulseaudio", version: "16.1"), sinks: [Self.sink(1, card: 7)])
        var changed = ChangedObjects()
        changed.note(facility: PA_SUBSCRIPTION_EVENT_CARD.rawValue, index: UInt32.max)
        let wanted = changed.expanded(over: base)
        #expect(ChangedObjects.asked(wanted.cards) == nil)
        #expect(ChangedObjects.asked(wanted.sinks) == nil && ChangedObjects.asked(wanted.sources) == nil)
        #expect(ChangedObjects.asked([1, 2, 3]) == [1, 2, 3])
        #expect(ChangedObjects.asked(Set(0..<UInt32(Mirror.listAbove + 1))) == nil)
    }

    @Test func eachDeviceIsNotedUnderItsOwnKindAndStreamsAreNotCounted() {
        var changed = ChangedObjects()
        changed.note(facility: PA_SUBSCRIPTION_EVENT_SINK.rawValue, index: 1)
        changed.note(facility: PA_SUBSCRIPTION_EVENT_SOURCE.rawValue, index: 1)
        changed.note(facility: PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue, index: 2)
        changed.note(facility: PA_SUBSCRIPTION_EVENT_SOURCE_OUTPUT.rawValue, index: 3)
        changed.note(facility: PA_SUBSCRIPTION_EVENT_CARD.rawValue, index: 4)
        #expect(changed == ChangedObjects(sinks: [1], sources: [1], cards: [4]))
    }
}
