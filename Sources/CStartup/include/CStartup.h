// Start-up work of the executable that the static Swift runtime would do at a higher price:
// argv.c stands in for one of its objects, backtracer.c keeps it from searching for a helper.

/// Called first thing in main: takes out what backtracer.c set for the runtime's constructors.
void routectl_startup_done(void);
