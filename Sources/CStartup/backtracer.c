// The Swift runtime's crash backtracer, never searched for at start.
//
// A constructor of the static runtime (Backtrace.cpp.o) reads SWIFT_BACKTRACE and, unless it names
// the helper program (`swift-backtrace=PATH`), looks for swift-backtrace under the runtime's root:
// dladdr on its own address (a walk of the executable's symbols, ~50,000 instructions), which for
// the main program names it as argv[0] gave it, then five stats. Run by name from PATH, that root is
// the current directory: the search fails, or finds whatever `./swift-backtrace` is there. The helper
// comes with a Swift toolchain, so unless one shares routectl's prefix the search fails and the
// runtime turns backtraces off: every run paid to find that out.
//
// This constructor runs before the runtime's (priority 101; theirs have the default). When neither
// SWIFT_BACKTRACE nor SWIFT_ROOT is set, it looks once (one readlink, one access: a few
// microseconds) where a toolchain under routectl's own prefix has the helper
// (PREFIX/libexec/swift/linux/swift-backtrace, PREFIX from /proc/self/exe) and names it, or, when it
// is not there, sets what the search would end in: backtraces off, with an empty helper path so that
// none is looked for. A user's own setting is left to the runtime: `SWIFT_BACKTRACE=enable=yes` or
// `SWIFT_ROOT=DIR` gets the runtime's own search.
// main takes the variable out again (routectl_startup_done), so nothing routectl starts inherits it.
//
// Where the runtime is a shared library (debug builds), its constructors run before any of the
// executable's, and this changes nothing.
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "CStartup.h"

static const char helper[] = "/libexec/swift/linux/swift-backtrace";
static int set_here;

/// Writes into `path` where a toolchain under routectl's prefix has the helper, if it is there.
static int helper_under_prefix(char *path) {
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (path[0] != '/' || !slash)
        return 0;
    *slash = 0;
    size_t length = strlen(path);
    if (length >= 4 && strcmp(path + length - 4, "/bin") == 0)
        path[length - 4] = 0;
    strcat(path, helper);
    // The runtime's settings are comma-separated: a path with a comma cannot be named.
    return strchr(path, ',') == NULL && access(path, X_OK) == 0;
}

__attribute__((constructor(101))) static void backtracer_setting(void) {
    if (getenv("SWIFT_BACKTRACE") != NULL || getenv("SWIFT_ROOT") != NULL)
        return;
    static const char named[] = "swift-backtrace=";
    char value[sizeof named + PATH_MAX + sizeof helper] = "swift-backtrace=";
    if (!helper_under_prefix(value + sizeof named - 1))
        strcpy(value, "enable=no,swift-backtrace=");
    if (setenv("SWIFT_BACKTRACE", value, 0) == 0)
        set_here = 1;
}

void routectl_startup_done(void) {
    if (set_here) {
        unsetenv("SWIFT_BACKTRACE");
        set_here = 0;
    }
}
