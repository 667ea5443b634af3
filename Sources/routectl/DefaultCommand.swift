import Engine
import Pulse
import Routing

/// `routectl default [speaker|earpiece]`: the persistent default; needs no server.
extension RouteCommands {
    // MARK: default

    static func setDefault(_ target: RouteTarget?, _ options: GlobalOptions) throws(Failure) -> ExitStatus {
        let store = State.store()
        let shown: RouteTarget
        if target == nil, let path = options.snapshot {
            shown = try ServerAccess.read(snapshotFile: path).routectl?.defaultTarget ?? .speaker
            return RouteCtl.write(options.json ? JSON.object([("default", .string(shown.rawValue))]).text + "\n" : shown.rawValue + "\n")
        }
        do {
            if let target {
                shown = try store.updatePersistent { $0.defaultTarget = target }.defaultTarget
            } else {
                shown = try store.loadPersistent().defaultTarget
            }
        } catch {
            throw State.failure(error)
        }
        return RouteCtl.write(options.json ? JSON.object([("default", .string(shown.rawValue))]).text + "\n" : shown.rawValue + "\n")
    }
}
