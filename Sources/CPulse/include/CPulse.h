#ifndef CPULSE_H
#define CPULSE_H

// The whole asynchronous libpulse client API; routectl needs no other header.
#include <pulse/pulseaudio.h>


// pa_get_headers_version() is a function-like macro, which Swift cannot import.
static inline const char *CPulse_headers_version(void) { return pa_get_headers_version(); }

#endif
