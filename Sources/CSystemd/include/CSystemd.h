#ifndef CSYSTEMD_H
#define CSYSTEMD_H

// sd-bus, the system's own D-Bus library (libsystemd): routectl needs nothing else from libsystemd.
#include <systemd/sd-bus.h>
#include <string.h>

// sd-bus describes an object with a vtable built by C macros (SD_BUS_METHOD_WITH_ARGS and kin,
// which also encode the argument names introspection shows), and Swift cannot expand macros. So the
// two interfaces' tables are written here with those macros and copied into a buffer the caller
// owns: sd-bus keeps pointing at it while the object is registered. The member names and
// signatures live only here; every method shares one handler and every property one getter, which
// the Swift side dispatches on the member's name. The strings are literals, so they live forever.
// Methods are SD_BUS_VTABLE_UNPRIVILEGED: any peer on the user's bus may call them, as callaudiod
// allows, and sd-bus then neither asks the bus for the caller's uid (a blocking round trip inside
// sd_bus_process) nor marks them org.freedesktop.systemd1.Privileged in the introspection data.

enum {
    CSystemd_routectl_vtable_length = 12,
    CSystemd_callaudio_vtable_length = 8,
};

/// routectl's own interface, io.github.routectl: what status bars and applets read and call.
static inline void CSystemd_routectl_vtable(sd_bus_vtable *out, sd_bus_message_handler_t method,
                                            sd_bus_property_get_t get) {
    const sd_bus_vtable table[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Route", "s", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Target", "s", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Override", "s", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Call", "b", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MicMuted", "b", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_SIGNAL_WITH_ARGS("RouteChanged", SD_BUS_ARGS("s", route, "s", previous, "s", reason), 0),
        SD_BUS_METHOD_WITH_ARGS("Set", SD_BUS_ARGS("s", target, "b", force), SD_BUS_RESULT("s", route), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Clear", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", route), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CallStart", SD_BUS_ARGS("b", speaker), SD_BUS_RESULT("s", route), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CallEnd", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", route), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
    };
    _Static_assert(sizeof table / sizeof table[0] == CSystemd_routectl_vtable_length, "routectl vtable length");
    memcpy(out, table, sizeof table);
}

/// callaudiod 0.1.x's org.mobian_project.CallAudio, member for member and argument name for argument
/// name as its data/org.mobian_project.CallAudio.xml has it, in the same order.
static inline void CSystemd_callaudio_vtable(sd_bus_vtable *out, sd_bus_message_handler_t method,
                                             sd_bus_property_get_t get) {
    const sd_bus_vtable table[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("SelectMode", SD_BUS_ARGS("u", mode), SD_BUS_RESULT("b", success), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("AudioMode", "u", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("EnableSpeaker", SD_BUS_ARGS("b", enable), SD_BUS_RESULT("b", success), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("SpeakerState", "u", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("MuteMic", SD_BUS_ARGS("b", mute), SD_BUS_RESULT("b", success), method, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("MicState", "u", get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
    };
    _Static_assert(sizeof table / sizeof table[0] == CSystemd_callaudio_vtable_length, "callaudio vtable length");
    memcpy(out, table, sizeof table);
}

#endif
