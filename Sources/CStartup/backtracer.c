// The Swift runtime's crash backtracer, not searched for at every start unless SWIFT_BACKTRACE asks.
//
// A constructor of the static runtime (Backtrace.cpp.o) reads SWIFT_BACKTRACE and, unless it names
// the helper program (`swift-backtrace=PATH`), looks for swift-backtrace under the runtime's root:
// dladdr on its own address (a walk of the executable's symbols, ~50,000 instructions), then seven
// stats beside the binary. It does so even with `enable=no`. The helper comes with a Swift
// toolchain, not with routectl, so wherever routectl is installed the search fails and the runtime
// turns backtraces off: every run paid to find that out. This constructor runs before the
// runtime's (priority 101; theirs have the default) and, when the variable is not set, sets it to
// what the search ends in: backtraces off, with a helper path of its own (empty) so that none is
// looked for. A user's own setting is left as it is: `SWIFT_BACKTRACE=enable=yes routectl …` gets
// backtraces where the helper is. main takes the variable out again (routectl_startup_done), so
// nothing routectl starts inherits it.
//
// Where the runtime is a shared library (debug builds), its constructors run before any of the
// executable's, and this changes nothing.
#include <stdlib.h>
#include "CStartup.h"

static int set_here;

__attribute__((constructor(101))) static void backtracer_off(void) {
    if (getenv("SWIFT_BACKTRACE") == NULL && setenv("SWIFT_BACKTRACE", "enable=no,swift-backtrace=", 0) == 0) set_here = 1;
}

void routectl_startup_done(void) {
    if (set_here) {
        unsetenv("SWIFT_BACKTRACE");
        set_here = 0;
    }
}
