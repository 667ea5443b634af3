// routectl: the audio route manager. Parsing, the commands and their rendering live beside this file;
// the model is in Routing and the server in Pulse.
import CStartup
import Glibc

routectl_startup_done()

// _exit, not exit: by the time a command returns, everything it said has gone out through write(2)
// (Console keeps no buffer), its state files are renamed into place and its D-Bus service torn down;
// the kernel releases its locks and closes its server socket. What exit would add is the destructors
// of the ~30 C libraries libpulse loads, most of them a first touch of their code: ~0.2 ms of a query.
_exit(RouteCtl.run(Array(CommandLine.arguments.dropFirst())).rawValue)
