import Routing
import Testing

@Suite struct SnapshotTests {
    @Test(arguments: ["laptop", "phone-ucm", "bluetooth-pulseaudio", "bluetooth-pipewire", "usb-and-others",
                      "old-server", "pactl-list-pulseaudio", "pactl-list-pipewire"])
    func dumpRoundTrips(name: String) throws {
        let s = try fixture(name)
        let text = s.json.text
        let again = try Snapshot(json: text)
        #expect(again == s)
        #expect(again.json.text == text, "the dump is stable")
        #expect(Status(snapshot: again) == Status(snapshot: s))
    }

    /// A bug report shows what routectl owes: a dump's `routectl` member carries `profiles.json`'s
    /// cards, and a dump from before it (no `owed_profiles`) owes none.
    @Test func aDumpCarriesTheProfilesCardsAreOwed() throws {
        var s = try fixture("bluetooth-pipewire")
        s.routectl = Preferences()
        s.owedProfiles = [CallRecord.CardProfile(card: "bluez_card.00_11_22_33_44_55", profile: "a2dp-sink")]
        let text = s.json.text
        #expect(text.contains(#""owed_profiles":[{"card":"bluez_card.00_11_22_33_44_55","profile":"a2dp-sink"}]"#))
        #expect(try Snapshot(json: text).owedProfiles == s.owedProfiles)
        guard case var .object(members) = s.json, let i = members.firstIndex(where: { $0.0 == "routectl" }),
              case let .object(state) = members[i].1 else { Issue.record("no routectl member"); return }
        members[i].1 = .object(state.filter { $0.0 != "owed_profiles" })
        let older = JSON.object(members).text
        #expect(!older.contains("owed_profiles"))
        #expect(try Snapshot(json: older).owedProfiles == [])
        #expect(throws: SnapshotFormatError(path: "routectl.owed_profiles[0]", problem: "missing member 'profile'")) {
            try Snapshot(json: #"{"server":{"server_name":"x"},"routectl":{"owed_profiles":[{"card":"c"}]}}"#)
        }
    }

    /// The watcher's last decision in a dump carries the external devices it was made beside (how a
    /// watcher starting later tells another client's pick from a stale one), and reads back as it was;
    /// one recorded without them (an older routectl's) still reads.
    @Test func aDumpCarriesTheDecisionsDevices() throws {
        var s = try fixture("bluetooth-pipewire")
        s.routectl = Preferences()
        s.decision = DecisionRecord(reason: .routeConfigurationChange, cause: "another client's pick", output: "bluez_card.00_11_22_33_44_55",
                                    at: 1_700_000_000_000, externals: ["bluez_card.00_11_22_33_44_55", "alsa_card.x:analog-output-headphones"])
        let text = s.json.text
        #expect(text.contains(#""externals":["alsa_card.x:analog-output-headphones","bluez_card.00_11_22_33_44_55"]"#), "\(text)")
        #expect(try Snapshot(json: text).decision == s.decision)
        s.decision?.externals = nil
        #expect(try Snapshot(json: s.json.text).decision == s.decision)
        #expect(throws: SnapshotFormatError(path: "routectl.decision.externals[0]", problem: "expected a string")) {
            try Snapshot(json: #"{"server":{"server_name":"x"},"routectl":{"decision":{"reason":"override","at":1,"externals":[1]}}}"#)
        }
    }

    @Test func errorsNameTheMember() {
        #expect(throws: SnapshotFormatError(path: "", problem: "missing member 'server'")) {
            try Snapshot(json: "{}")
        }
        #expect(throws: SnapshotFormatError(path: "sinks[0]", problem: "missing member 'name'")) {
            try Snapshot(json: #"{"server":{"server_name":"x"},"sinks":[{"index":1}]}"#)
        }
        #expect(throws: SnapshotFormatError(path: "sinks[0].ports[0]", problem: "unknown availability 'maybe' (expected 'available', 'not available' or 'availability unknown')")) {
            try Snapshot(json: #"{"server":{"server_name":"x"},"sinks":[{"index":1,"name":"a","ports":[{"name":"p","availability":"maybe"}]}]}"#)
        }
        #expect(throws: SnapshotFormatError.self) { try Snapshot(json: "[1,") }
    }
}

@Suite struct JSONTests {
    @Test func parsesAndWrites() throws {
        let text = #"{"a":[1,-2.5,true,false,null],"b":"x\"\\\n\u00e9\ud83d\ude00","c":{}}"#
        let v = try JSON.parse(text)
        #expect(v["a"] == .array([.int(1), .double(-2.5), .bool(true), .bool(false), .null]))
        #expect(v["b"] == .string("x\"\\\né😀"))
        #expect(try JSON.parse(v.text) == v)
        #expect(JSON.string("tab\there\u{01}").text == #""tab\there\u0001""#)
    }

    /// A string is read as its bytes up to the first escape, and decoded from there on.
    @Test func stringsAreReadExactlyAroundEscapes() throws {
        #expect(try JSON.parse(#"["", "plain é😀", "a\nb\"c", "\u00e9x", "\\"]"#)
            == .array([.string(""), .string("plain é😀"), .string("a\nb\"c"), .string("éx"), .string("\\")]))
        #expect(throws: JSONError.self, "a raw control character is refused") { try JSON.parse(bytes: Array("\"ok\u{1}\"".utf8)) }
        #expect(try JSON.parse(bytes: [0x22, 0x61, 0xFF, 0x22]) == .string("a\u{FFFD}"), "invalid UTF-8 is repaired")
    }

    /// Escapes are written between runs of plain text: each run comes out whole and exact, also where
    /// an escaped quote starts a character (a combining mark after it) and around multi-byte text.
    @Test func stringsAreWrittenExactlyAroundEscapes() throws {
        #expect(JSON.string("").text == #""""#)
        #expect(JSON.string("Écouteurs 😀").text == "\"Écouteurs 😀\"")
        #expect(JSON.string("\"\u{301}x").text == "\"\\\"\u{301}x\"")
        #expect(JSON.string("é\né\u{1F}\\").text == #""é\né\u001f\\""#)
        #expect(JSON.string("\r\t\u{0}end").text == #""\r\t\u0000end""#)
        for text in ["a\"\u{301}", "\u{301}\"", "😀\n😀\"", "\"\"", "x\u{7F}y", "tail\\"] {
            #expect(try JSON.parse(JSON.string(text).text) == .string(text), "\(text.debugDescription)")
        }
    }

    /// Digits are written by hand, the sign apart: the extremes, zero and a value of each length.
    @Test func integersAreWrittenAsSwiftPrintsThem() throws {
        let values: [Int64] = [0, 7, -7, 10, -10, 1_733_520_000_123, .max, .min, .min + 1]
        for v in values {
            #expect(JSON.int(v).text == String(v))
        }
        #expect(JSON.array(values.map(JSON.int)).text == "[" + values.map { String($0) }.joined(separator: ",") + "]")
        #expect(JSON.object([("a", .int(-1)), ("b", .double(0.5)), ("c", .double(.nan)), ("d", .null)]).text
            == #"{"a":-1,"b":0.5,"c":null,"d":null}"#)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "{\"a\":1,}", "\"\\x\""])
    func rejectsMalformed(text: String) {
        #expect(throws: JSONError.self) { try JSON.parse(text) }
    }

    @Test func rejectsDeepNesting() {
        #expect(throws: JSONError.self) { try JSON.parse(String(repeating: "[", count: 10_000)) }
    }
}
