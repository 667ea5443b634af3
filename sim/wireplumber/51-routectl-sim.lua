-- routectl's private WirePlumber (scripts/server.sh copies this into
-- $XDG_CONFIG_HOME/wireplumber/main.lua.d/ and appends the load_script call that creates the
-- simulated cards): no udev in a container and never the machine's real devices, so the stock
-- monitors are off and routectl-sim-cards.lua creates the simulated cards instead, as the stock
-- ALSA monitor would for udev cards.
alsa_monitor.enabled = false
v4l2_monitor.enabled = false
libcamera_monitor.enabled = false
