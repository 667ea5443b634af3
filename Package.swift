// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "routectl",
    products: [
        .executable(name: "routectl", targets: ["routectl"]),
    ],
    targets: [
        // Headers only: a module map over <pulse/pulseaudio.h>, which links libpulse (apt: libpulse-dev).
        // No pkgConfig: libpulse.pc's "-D_REENTRANT -pthread" make SwiftPM warn on every build, and
        // the header and library are on the default paths wherever libpulse-dev is installed.
        .systemLibrary(name: "CPulse"),
        // Headers only, as CPulse: <systemd/sd-bus.h> and the two vtables Swift cannot build from
        // sd-bus's macros; links libsystemd (apt: libsystemd-dev).
        .systemLibrary(name: "CSystemd"),
        // Headers only, no library: gettid(2) for Store's bounded lock wait.
        .systemLibrary(name: "CThread"),
        // The model, the classifier and the policy: pure Swift, no C, no file I/O, no printing.
        .target(name: "Routing"),
        // The state files: atomic writes, locks, permissions, bounded reads. Glibc lives here, not in Routing.
        .target(name: "Store", dependencies: ["Routing", "CThread"]),
        // The libpulse adapter: the only importer of CPulse.
        .target(name: "Pulse", dependencies: ["CPulse", "Routing"]),
        // The orchestration every command shares, written against AudioServer and PreferenceStore.
        .target(name: "Engine", dependencies: ["Routing"]),
        // The D-Bus service (routectl's interface and the callaudiod drop-in): the only importer of CSystemd.
        .target(name: "Bus", dependencies: ["CSystemd", "Routing"]),
        // C, linked into the executable only: argv for the static Swift runtime without its
        // /proc/self/maps scan at start-up (Sources/CStartup/argv.c says why), and no search for its
        // crash backtracer's helper (backtracer.c).
        .target(name: "CStartup"),
        .executableTarget(name: "routectl", dependencies: ["Routing", "Engine", "Store", "Pulse", "Bus", "CStartup"]),
        .testTarget(name: "EngineTests", dependencies: ["Engine", "Routing"]),
        .testTarget(
            name: "RoutingTests",
            // Store only to read the fixture files.
            dependencies: ["Routing", "Store"],
            exclude: ["Fixtures"]
        ),
        // The libpulse adapter's bookkeeping that needs no server (request replies, errors).
        .testTarget(name: "PulseTests", dependencies: ["Pulse", "Routing"]),
        .testTarget(name: "StoreTests", dependencies: ["Store", "Routing"]),
        // The service on a private dbus-daemon, driven by busctl and callaudiocli; Pulse for its main loop.
        .testTarget(name: "BusTests", dependencies: ["Bus", "Pulse", "Routing"]),
    ],
    swiftLanguageModes: [.v6]
)
