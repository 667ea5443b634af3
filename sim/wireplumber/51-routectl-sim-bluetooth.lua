-- routectl's private WirePlumber, Bluetooth (scripts/server.sh copies this into
-- $XDG_CONFIG_HOME/wireplumber/bluetooth.lua.d/). The bluez monitor stays off unless the server
-- was started with BLUETOOTH=1: then server.sh turns the next line to true, and the monitor meets
-- the BlueZ stand-in (sim/bluez) on the private system bus, never the machine's real BlueZ.
bluez_monitor.enabled = false
-- No logind in a container: without this, the monitor waits forever for an active seat.
bluez_monitor.properties["with-logind"] = false
