import Glibc
import Routing
import Store
import Testing

/// The man page against the code: every route-change reason and event type routectl can print is
/// documented, and nothing documented is missing from the code.
@Suite struct DocumentationTests {
    func manPage() throws -> String {
        let root = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        return String(decoding: try FileIO.read("/\(root)/man/routectl.1"), as: UTF8.self)
    }

    /// The `.B word` entries of a man page section, from `start` up to the next `.SH` or `.PP`.
    func entries(_ page: String, after start: String) -> Set<String> {
        guard let range = page.split(separator: "\n", omittingEmptySubsequences: false)
            .drop(while: { !$0.hasPrefix(start) }).dropFirst() as ArraySlice<Substring>? else { return [] }
        var words: Set<String> = []
        for line in range {
            if line.hasPrefix(".SH") || line.hasPrefix(".PP") { break }
            if line.hasPrefix(".B ") {
                words.insert(String(line.dropFirst(3)).split(separator: " ")[0].filter { $0 != "\\" })
            }
        }
        return words
    }

    @Test func everyReasonIsDocumented() throws {
        let documented = entries(try manPage(), after: "Route-change reasons:")
        #expect(documented == Set(RouteChangeReason.allCases.map(\.rawValue)))
    }

    @Test func everyEventTypeIsDocumented() throws {
        let page = try manPage()
        let events: [Event] = [
            .route(route: .speaker, previous: nil, reason: .initial, output: nil), .interrupted(reason: ""),
            .overrideCleared(override: .speaker, cause: ""), .recovered(route: .speaker, output: nil), .engaged(true),
            .otherAudio(playing: true), .input(source: nil, previous: nil, sourceChanged: false, micMuted: nil), .lost(count: 1),
            .call(active: true, route: .receiver),
        ]
        for type in events.map(\.type) + ["device-added", "device-removed", "flicker"] {
            let spelled = type.split(separator: "-").joined(separator: "\\-")
            let bold = page.split(separator: "\n").filter { $0.hasPrefix(".B") }
            #expect(bold.contains { line in line.split(whereSeparator: { $0 == " " || $0 == "\"" }).contains { $0 == spelled } },
                    "event type \(type)")
        }
    }
}
