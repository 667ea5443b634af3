import Bus
import CPulse
@testable import Pulse
import Routing
import Testing

/// The service on libpulse's main loop, as `watch --dbus` runs it: no manual polling, only the io
/// event and timer `PulseConnection.attach` registers, and the question `waitForChanges` asks
/// before each poll (`takeWork`). No sound server is needed for the loop itself.
@Suite struct MainLoopTests {
    @Test func callsArriveAndAreAnsweredThroughThePulseMainLoop() throws {
        let bus = try PrivateBus()
        let service = try BusService(address: bus.address, callAudio: true)
        service.publish(OwnInterfaceTests.speakerState)
        let loop = pa_mainloop_new()!
        defer { pa_mainloop_free(loop) }
        let sources = AttachedSources(api: pa_mainloop_get_api(loop))
        defer { sources.detachAll() }
        sources.attach(service)

        var wakes = 0
        var received: [BusRequest] = []
        /// One `waitForChanges` turn: the question, then one poll and dispatch.
        func turn() {
            if sources.takeWork() {
                wakes += 1
                for call in service.takeRequests() {
                    received.append(call.request)
                    call.reply(route: "receiver")
                }
            }
            _ = pa_mainloop_prepare(loop, 20_000)
            _ = pa_mainloop_poll(loop)
            _ = pa_mainloop_dispatch(loop)
        }

        let set = try Client("busctl", ["--address=\(bus.address)", "call", BusService.name, BusService.objectPath,
                                        BusService.interface, "Set", "sb", "earpiece", "false"])
        var result = try set.wait(while: turn)
        #expect(result.status == 0 && result.stdout == "s \"receiver\"\n", "\(result)")
        #expect(received == [.set(target: "earpiece", force: false)])
        #expect(wakes == 1)

        // Properties are answered inside the loop's dispatch, with no wake for the owner.
        let get = try Client("busctl", ["--address=\(bus.address)", "get-property", BusService.name, BusService.objectPath,
                                        BusService.interface, "Route"])
        result = try get.wait(while: turn)
        #expect(result.stdout == "s \"speaker\"\n", "\(result)")
        #expect(wakes == 1)
    }
}
