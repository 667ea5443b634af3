-- routectl's private WirePlumber: no Bluetooth monitor for now (a later stand-in for BlueZ on a
-- private system bus will enable it); it must never reach the machine's real BlueZ.
bluez_monitor.enabled = false
