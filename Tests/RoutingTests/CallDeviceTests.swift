import Testing
import Routing

/// Rule 8: a connected headset takes the call; a Bluetooth device without a headset profile (an
/// A2DP-only speaker) has no microphone path and is no call device.
@Suite struct CallDeviceTests {
    /// The fixture's headset with its HFP profile taken away: a Bluetooth speaker.
    func a2dpOnly(_ snapshot: Snapshot) -> Snapshot {
        var s = snapshot
        for i in s.cards.indices where s.cards[i].name.hasPrefix("bluez_card.") {
            s.cards[i].profiles.removeAll { Planner.isBluetoothHeadsetProfile($0.name) }
            for j in s.cards[i].ports.indices { s.cards[i].ports[j].profiles.removeAll(where: Planner.isBluetoothHeadsetProfile) }
            s.cards[i].ports.removeAll { $0.profiles.isEmpty }
        }
        return s
    }

    @Test(arguments: ["pulseaudio", "pipewire"])
    func anA2DPOnlySpeakerDoesNotTakeTheCall(server: String) throws {
        let headset = Status(snapshot: try fixture("sim/\(server)-bluetooth-a2dp"))
        let speaker = Status(snapshot: a2dpOnly(try fixture("sim/\(server)-bluetooth-a2dp")))
        let card = "bluez_card.00_11_22_33_44_55"
        #expect(try #require(headset.outputs.first { $0.id == card }).takesCalls)
        #expect(try !#require(speaker.outputs.first { $0.id == card }).takesCalls)
        let inCall = Preferences(callTarget: .earpiece)
        // In use when the call starts: the headset keeps the sound for the call, the speaker does not.
        #expect(Policy.ruling(headset, inCall) == RouteRequest(target: .bluetooth, device: card))
        #expect(Policy.ruling(speaker, inCall) == RouteRequest(target: .earpiece))
        #expect(Policy.ranked(speaker, PolicyState(status: speaker), priority: ["bluetooth"], inCall: true).isEmpty,
                "not even listed first")
        // Outside a call it is a Bluetooth device like any other (rule 1).
        #expect(Policy.ranked(speaker, PolicyState(status: speaker), priority: []).map(\.id) == [card])
    }
}
