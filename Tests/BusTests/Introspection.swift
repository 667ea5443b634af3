import Foundation
import FoundationXML

/// One interface as introspection XML describes it: its members in order, each with its arguments
/// (directions made explicit: a method's default "in", a signal's "out"), types, access and
/// annotations. Comments and whitespace do not count.
struct InterfaceShape: Equatable, CustomStringConvertible {
    struct Member: Equatable {
        var kind: String
        var name: String
        var attributes: [String: String]
        var arguments: [[String: String]]
        var annotations: [String: String]
    }
    var members: [Member]

    init(xml: String, interface: String) throws {
        let document = try XMLDocument(xmlString: xml, options: [])
        let found = try document.nodes(forXPath: "//interface[@name='\(interface)']")
        guard found.count == 1, let element = found.first as? XMLElement else {
            throw ToolError("no single interface \(interface) in the introspection data")
        }
        members = (element.children ?? []).compactMap { $0 as? XMLElement }.map { member in
            let kind = member.name ?? ""
            var attributes: [String: String] = [:]
            for attribute in member.attributes ?? [] where attribute.name != "name" {
                attributes[attribute.name ?? ""] = attribute.stringValue ?? ""
            }
            let children = (member.children ?? []).compactMap { $0 as? XMLElement }
            let arguments = children.filter { $0.name == "arg" }.map { arg in
                var fields: [String: String] = [:]
                for attribute in arg.attributes ?? [] { fields[attribute.name ?? ""] = attribute.stringValue ?? "" }
                if fields["direction"] == nil { fields["direction"] = kind == "signal" ? "out" : "in" }
                return fields
            }
            var annotations: [String: String] = [:]
            for annotation in children where annotation.name == "annotation" {
                annotations[annotation.attribute(forName: "name")?.stringValue ?? ""] =
                    annotation.attribute(forName: "value")?.stringValue ?? ""
            }
            return Member(kind: kind, name: member.attribute(forName: "name")?.stringValue ?? "",
                          attributes: attributes, arguments: arguments, annotations: annotations)
        }
    }

    var description: String {
        members.map { member in
            let args = member.arguments.map { "\($0["direction"] ?? "") \($0["name"] ?? "?"):\($0["type"] ?? "")" }
            return "\(member.kind) \(member.name) \(member.attributes) (\(args.joined(separator: ", "))) \(member.annotations)"
        }.joined(separator: "\n")
    }
}
