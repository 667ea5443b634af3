// The command line for the statically linked Swift runtime, without its scan of /proc/self/maps.
//
// libswiftCore.a's CommandLine.cpp.o finds argv from a constructor that reads /proc/self/maps line by
// line with sscanf until it reaches [stack]. With libpulse's ~30 libraries mapped that is ~400,000
// instructions, about 6% of a whole `routectl query` (callgrind), in every run. glibc passes argc and
// argv to each .init_array function of the executable, so they are kept from there instead.
//
// The two functions below are everything CommandLine.cpp.o defines. Defined in an object file of the
// executable, they keep the linker from taking that member out of the archive, so its constructor is
// not linked at all. If a later runtime renames them, the member is linked as before: the cost comes
// back and nothing breaks (tests/install.sh says so). Where the runtime is a shared library (debug
// builds) these are linked too but unused: libswiftCore.so calls its own, which it does not export.
// The semantics are the runtime's: an override wins; no argv is an empty one.
//
// Only with glibc: musl calls .init_array functions with no arguments, so there the runtime keeps its own.
#include <stdlib.h>  /* NULL, and __GLIBC__ where it is glibc */

#ifdef __GLIBC__

static char **captured_argv;
static int captured_argc;
static char **override_argv;
static int override_argc;

static void capture(int argc, char **argv, char **envp) {
    (void)envp;
    captured_argc = argc;
    captured_argv = argv;
}

__attribute__((section(".init_array"), used)) static void (*const capture_entry)(int, char **, char **) = capture;

char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (override_argv) {
        *outArgLen = override_argc;
        return override_argv;
    }
    if (captured_argv) {
        *outArgLen = captured_argc;
        return captured_argv;
    }
    static char *empty[] = {NULL};
    *outArgLen = 0;
    return empty;
}

void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    override_argv = argv;
    override_argc = argc;
}

#endif
