// The Swift runtime's crash backtracer, not searched for at every start when it is not there.
//
// A constructor of the static runtime (Backtrace.cpp.o) reads SWIFT_BACKTRACE and, unless it names
// the helper program (`swift-backtrace=PATH`), looks for swift-backtrace under the runtime's root
// (the binary's directory, less a final /bin): dladdr on its own address (a walk of the
// executable's symbols, ~50,000 instructions), then seven stats. It does so even with `enable=no`.
// The helper comes with a Swift toolchain, so unless one shares routectl's prefix the search fails
// and the runtime turns backtraces off: every run paid to find that out.
//
// This constructor runs before the runtime's (priority 101; theirs have the default). When the
// variable is not set and the helper is not where a toolchain under the same prefix puts it
// (PREFIX/libexec/swift/linux/swift-backtrace: one readlink and one access, a few microseconds),
// it sets the variable to what the search would end in: backtraces off, with a helper path of its
// own (empty) so that none is looked for. A user's own setting is left as it is:
// `SWIFT_BACKTRACE=enable=yes routectl …` gets backtraces wherever the runtime finds the helper.
// main takes the variable out again (routectl_startup_done), so nothing routectl starts inherits it.
//
// Where the runtime is a shared library (debug builds), its constructors run before any of the
// executable's, and this changes nothing.
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "CStartup.h"

static int set_here;

/// Whether the backtracer's helper is where a toolchain installed under routectl's prefix has it.
static int helper_under_prefix(void) {
    static const char helper[] = "/libexec/swift/linux/swift-backtrace";
    char path[PATH_MAX + sizeof helper];
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (!slash)
        return 0;
    *slash = 0;
    size_t length = strlen(path);
    if (length >= 4 && strcmp(path + length - 4, "/bin") == 0)
        path[length - 4] = 0;
    strcat(path, helper);
    return access(path, X_OK) == 0;
}

__attribute__((constructor(101))) static void backtracer_off(void) {
    if (getenv("SWIFT_BACKTRACE") == NULL && !helper_under_prefix()
        && setenv("SWIFT_BACKTRACE", "enable=no,swift-backtrace=", 0) == 0)
        set_here = 1;
}

void routectl_startup_done(void) {
    if (set_here) {
        unsetenv("SWIFT_BACKTRACE");
        set_here = 0;
    }
}
