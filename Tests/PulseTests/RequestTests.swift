@testable import Pulse
import Routing
import Testing

/// The adapter's bookkeeping that needs no server: replies matched to their own request, and
/// routectl's deadline told apart from the server's own timeout.
@Suite struct RequestTests {
    /// pipewire-pulse answered a refused stream move before the set-default-sink it followed: the
    /// refusal belongs to the (best-effort) move, so the batch succeeds.
    @Test func aRefusalThatOvertakesIsTheRefusingRequests() {
        let batch = RequestBatch()
        let setDefault = Request("Failed to set default sink 'speaker'", in: batch)
        let move = Request("Failed to move sink input 7 to 'speaker'", bestEffort: true, in: batch)
        batch.pending = 2
        move.answer(success: false) { 17 }
        setDefault.answer(success: true) { Issue.record("no code read for a success"); return 0 }
        #expect(batch.pending == 0)
        #expect(batch.failure == nil)
    }

    @Test func aRefusedRequestNamesItselfWithTheServersCode() {
        let batch = RequestBatch()
        let move = Request("Failed to move sink input 7 to 'speaker'", bestEffort: true, in: batch)
        let setDefault = Request("Failed to set default sink 'speaker'", in: batch)
        batch.pending = 2
        setDefault.answer(success: false) { 5 }
        move.answer(success: true) { 0 }
        #expect(batch.failure == PulseError(code: 5, operation: "Failed to set default sink 'speaker'"))
    }

    @Test func aSecondReplyToOneRequestCountsOnce() {
        let batch = RequestBatch()
        let request = Request("Failed to subscribe to server events", in: batch)
        batch.pending = 2
        request.answer(success: true) { 0 }
        request.answer(success: false) { 5 }
        #expect(batch.pending == 1)
        #expect(batch.failure == nil)
    }

    @Test func theDeadlineIsNotTheServersTimeout() {
        let deadline = PulseError.deadline("Failed to get server information")
        let server = PulseError(code: deadline.code, operation: "Failed to get server information")
        #expect(deadline.isDeadline && !deadline.isServerTimeout)
        #expect(server.isServerTimeout && !server.isDeadline)
        #expect(deadline != server)
        #expect(deadline.description == "Failed to get server information: Timeout")
        #expect(!deadline.isUnreachable)
    }

    @Test func theClientNamesItselfAsDesktopClientsDo() {
        let props = Dictionary(uniqueKeysWithValues: PulseConnection.clientProperties(name: "routectl", version: "0.1.0"))
        #expect(props["application.id"] == "io.github.routectl")
        #expect(props["application.name"] == "routectl")
        #expect(props["application.icon_name"] != nil)
        #expect(props["application.version"] == "0.1.0")
        #expect(props["context.force.disable.shm"] == "yes")
        #expect(PulseConnection.clientProperties(name: "routectl", version: nil).allSatisfy { $0.0 != "application.version" })
    }

    /// The status asks for the default source alone, a moment after the server's information: a
    /// default changed in between is the source that came back, not a default the snapshot lacks.
    @Test func theDefaultSourceAskedAloneIsTheDefault() throws {
        let builder = SnapshotBuilder()
        builder.server = ServerInfo(name: "pulseaudio", version: "16.1", defaultSinkName: "speaker", defaultSourceName: "mic-a")
        builder.sources = [Source(index: 2, name: "mic-b", description: "Mic B", mute: true, monitorOfSink: nil)]
        let alone = try #require(builder.snapshot(parts: [.sinks, .cards, .defaultSource], serverString: "unix:/x"))
        #expect(alone.server.defaultSourceName == "mic-b")
        #expect(alone.defaultSource?.mute == true)
        #expect(Status(snapshot: alone).micMuted == true)
        #expect(alone.server.serverString == "unix:/x")
        // Listed with the others, the sources say nothing about which is the default.
        let listed = try #require(builder.snapshot(parts: [.sinks, .sources, .cards], serverString: nil))
        #expect(listed.server.defaultSourceName == "mic-a")
        #expect(listed.defaultSource == nil)
        // None came back (a server without sources): the server's information stands.
        builder.sources = []
        let none = try #require(builder.snapshot(parts: [.defaultSource], serverString: nil))
        #expect(none.server.defaultSourceName == "mic-a")
        #expect(Status(snapshot: none).micMuted == nil)
        builder.server = nil
        #expect(builder.snapshot(parts: .all, serverString: nil) == nil)
    }

    /// `query route` with no override asks for the default sink alone: the same rule as the source's.
    @Test func theDefaultSinkAskedAloneIsTheDefault() throws {
        let builder = SnapshotBuilder()
        builder.server = ServerInfo(name: "pulseaudio", version: "16.1", defaultSinkName: "speaker")
        builder.sinks = [Sink(index: 3, name: "headset", description: "Headset", monitorSource: nil)]
        let alone = try #require(builder.snapshot(parts: [.defaultSink, .cards], serverString: nil))
        #expect(alone.server.defaultSinkName == "headset")
        #expect(alone.defaultSink?.index == 3)
        let listed = try #require(builder.snapshot(parts: [.sinks, .cards], serverString: nil))
        #expect(listed.server.defaultSinkName == "speaker")
        #expect(listed.defaultSink == nil)
        builder.sinks = []
        let none = try #require(builder.snapshot(parts: [.defaultSink], serverString: nil))
        #expect(none.server.defaultSinkName == "speaker")
        #expect(Status(snapshot: none).route == .unknown)
    }

    @Test func anOutputSnapshotLeavesOutTheSources() {
        #expect(SnapshotParts.all.isSuperset(of: .outputs))
        #expect(!SnapshotParts.outputs.contains(.sources))
        #expect(!SnapshotParts.outputs.contains(.sourceOutputs))
        #expect(SnapshotParts.outputs.isSuperset(of: [.sinks, .cards, .sinkInputs]))
    }
}

/// What a long-lived client may answer from without asking the server again.
@Suite struct LatestSnapshotTests {
    static let snapshot = Snapshot(server: ServerInfo(name: "pulseaudio", version: "16.1", defaultSinkName: "speaker"))

    @Test func nothingIsKeptUntilAWholeSnapshotIs() {
        #expect(LatestSnapshot().current(changes: 0) == nil)
    }

    @Test func theKeptSnapshotStandsWhileNoNotificationCame() {
        var latest = LatestSnapshot()
        latest.keep(Self.snapshot, requestedAt: 3)
        #expect(latest.current(changes: 3) == Self.snapshot)
    }

    /// One that came while the requests were answered may not be in the snapshot: it is not the server.
    @Test func aNotificationSinceTheRequestsEndsIt() {
        var latest = LatestSnapshot()
        latest.keep(Self.snapshot, requestedAt: 3)
        #expect(latest.current(changes: 4) == nil)
    }

    /// An acknowledged action's notifications may still be on their way.
    @Test func actingEndsIt() {
        var latest = LatestSnapshot()
        latest.keep(Self.snapshot, requestedAt: 3)
        latest.forget()
        #expect(latest.current(changes: 3) == nil)
    }
}
