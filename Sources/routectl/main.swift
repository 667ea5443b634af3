// routectl: the audio route manager. Parsing, the commands and their rendering live beside this file;
// the model is in Routing and the server in Pulse.
import Glibc

exit(RouteCtl.run(Array(CommandLine.arguments.dropFirst())).rawValue)
