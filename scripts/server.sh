#!/usr/bin/env bash
# Private sound servers for routectl's tests, demo and bench (DESIGN.md §6).
# Never touches the user's own server: everything lives under a fresh runtime dir,
# with its own HOME and XDG dirs, and clients reach it only through PULSE_SERVER.
#
#   scripts/server.sh start pulseaudio|pipewire DIR   start one; prints shell exports
#   scripts/server.sh stop DIR                        stop it and everything it started
#   scripts/server.sh plug DIR KIND NAME              load a null sink with KIND's properties
#   scripts/server.sh unplug DIR NAME                 unload it
#   scripts/server.sh jack DIR CARD JACK in|out       plug/unplug a simulated card's jack
#   scripts/server.sh bt DIR add ADDR NAME [PROFILES] a Bluetooth headset (BLUETOOTH=1 servers);
#                                                     PROFILES: a2dp (default), a2dp+hfp, a2dp+hsp
#   scripts/server.sh bt DIR connect|disconnect|remove ADDR
#   scripts/server.sh bt DIR headset ADDR NAME [PROFILES]   add + connect
#   scripts/server.sh bt DIR status                   the stand-in's view (transports, bytes played)
# PRELOAD="kind:name ..." makes start load those devices with the server itself, so that they are
# there again the moment a restarted server comes up (the reconnection tests).
# CARDS="laptop hdmi ..." makes start give the server simulated ALSA cards (sim/, kinds: laptop
# desktop usb-headset hdmi phone phone17), hw:0, hw:1, ... in that order, named
# alsa_card.sim-KIND (a repeated kind: sim-KIND-2, ...). start returns once every card exists and
# the server has settled a default sink (on PipeWire, once every card has a profile too: a start
# that left a card without one is made again). JACK is a line of sim/cards/KIND/jacks (headphone, mic,
# headset, hdmi, lineout); CARD is a kind or a card name (laptop, sim-laptop-2). The simulator's
# environment (ALSA_CONFIG_PATH, ALSA_CONFIG_UCM2, LD_PRELOAD) is the servers' only, never the
# clients'; the servers' system bus is $DIR/run/system_bus_socket (nothing there unless a test
# starts a stand-in), never the machine's.
# BLUETOOTH=1 makes start run a private system bus there with a stand-in for bluetoothd
# (sim/bluez) before the server, and the server's own bluez5 code (PulseAudio: module-bluetooth-policy
# and module-bluetooth-discover; WirePlumber: its bluez monitor); start returns once the server has
# registered its A2DP endpoint and HFP profile. Headsets come and go with `bt` (card
# bluez_card.ADDR_WITH_UNDERSCORES appears some tens of ms after `bt connect`).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

props_for() {
	case "$1" in
	speaker) echo "device.form_factor=speaker device.bus=pci" ;;
	earpiece) echo "device.form_factor=handset device.bus=platform" ;;
	headset) echo "device.form_factor=headphone device.bus=usb" ;;
	bluetooth) echo "device.form_factor=headset device.bus=bluetooth device.api=bluez5" ;;
	hdmi) echo "device.form_factor=tv device.bus=pci" ;;
	# An HDMI card's properties on a null sink, class and all: hardware to routectl's no-steal rule.
	monitor) echo "device.class=sound device.form_factor=tv device.bus=pci" ;;
	*) echo "server.sh: unknown device kind '$1'" >&2; return 2 ;;
	esac
}

env_for() {
	local dir=$1
	export HOME="$dir/home" XDG_RUNTIME_DIR="$dir/run" XDG_STATE_HOME="$dir/home/.local/state"
	export XDG_CONFIG_HOME="$dir/home/.config" XDG_DATA_HOME="$dir/home/.local/share"
	export PULSE_SERVER="unix:$dir/run/pulse/native" PULSE_RUNTIME_PATH="$dir/run/pulse"
	export PULSE_STATE_PATH="$dir/home/pulse-state" PULSE_COOKIE="$dir/home/pulse-cookie"
	export PIPEWIRE_RUNTIME_DIR="$dir/run" DISABLE_RTKIT=1 PIPEWIRE_LOG_SYSTEMD=false
	unset DBUS_SESSION_BUS_ADDRESS
}

# Set up the simulated cards of $CARDS in $dir/sim and fill sim_env (the servers' environment)
# and the arrays card_names/card_kinds. Without cards, sim_env only keeps the servers off the
# machine's system bus.
setup_cards() {
	local dir=$1 kind n=0 name count
	sim_env=("DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/run/system_bus_socket")
	card_names=() card_kinds=()
	[ -n "${CARDS:-}" ] || return 0
	"$root/sim/build.sh" "$root/.build/sim"
	rm -rf "$dir/sim"
	mkdir -p "$dir/sim"
	: >"$dir/sim/cards"
	for kind in $CARDS; do
		if [ ! -d "$root/sim/cards/$kind" ]; then
			echo "server.sh: unknown card kind '$kind' (see sim/cards)" >&2
			return 2
		fi
		count=$(grep -c " $kind\$" "$dir/sim/cards" || true)
		name=sim-$kind
		[ "$count" -eq 0 ] || name=sim-$kind-$((count + 1))
		cp -r "$root/sim/cards/$kind" "$dir/sim/card$n"
		echo "$n $name $kind" >>"$dir/sim/cards"
		card_names+=("$name") card_kinds+=("$kind")
		n=$((n + 1))
	done
	sed "s|@LIBDIR@|$root/.build/sim|; s|@STATEDIR@|$dir/sim|" "$root/sim/alsa/routectl-sim.conf.in" \
		>"$dir/sim/alsa.conf"
	cp -r "$root/sim/ucm2" "$dir/sim/ucm2"
	sed -i "s|@LIBDIR@|$root/.build/sim|; s|@STATEDIR@|$dir/sim|" "$dir/sim/ucm2/ucm.conf"
	sim_env+=("ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:$dir/sim/alsa.conf"
		"ALSA_CONFIG_UCM2=$dir/sim/ucm2" "ROUTECTL_SIM_DIR=$dir/sim"
		"LD_PRELOAD=$root/.build/sim/routectl-sim-preload.so")
}

# KEY of sim/cards/KIND/props or info (empty when absent).
card_prop() {
	sed -n "s/^$2=//p" "$root/sim/cards/$1/$3" | head -n 1
}

# PulseAudio: one module-alsa-card per simulated card, with what udev would have added.
pa_cards() {
	local i kind props v
	for i in "${!card_names[@]}"; do
		kind=${card_kinds[$i]}
		props="device.bus=$(card_prop "$kind" BUS props)"
		v=$(card_prop "$kind" FORM_FACTOR props); [ -z "$v" ] || props+=" device.form_factor=$v"
		# As PulseAudio names a udev card with that form factor (the property arrives too late
		# for its own description code here).
		[ "$v" != internal ] || props+=" device.description='Built-in Audio'"
		v=$(card_prop "$kind" BUS_PATH props); [ -z "$v" ] || props+=" device.bus_path=$v"
		v=$(card_prop "$kind" VENDOR_ID props); [ -z "$v" ] || props+=" device.vendor.id=$v"
		v=$(card_prop "$kind" PRODUCT_ID props); [ -z "$v" ] || props+=" device.product.id=$v"
		v=$(card_prop "$kind" PRODUCT_NAME props); [ -z "$v" ] || props+=" device.product.name='$v'"
		echo "load-module module-alsa-card device_id=$i name=${card_names[$i]} card_name=alsa_card.${card_names[$i]} namereg_fail=false tsched=yes card_properties=\"$props\""
	done
}

# WirePlumber: the simulated cards as a Lua table for sim/wireplumber/routectl-sim-cards.lua.
wp_cards() {
	local i kind k v
	echo "load_script(\"$root/sim/wireplumber/routectl-sim-cards.lua\", {"
	echo '  rules = alsa_monitor.rules, properties = alsa_monitor.properties,'
	echo '  cards = {'
	for i in "${!card_names[@]}"; do
		kind=${card_kinds[$i]}
		echo "    { card = $i, name = \"${card_names[$i]}\", props = {"
		echo "      [\"api.alsa.card.name\"] = \"$(card_prop "$kind" name info)\","
		echo "      [\"api.alsa.card.longname\"] = \"$(card_prop "$kind" longname info)\","
		for k in BUS:device.bus FORM_FACTOR:device.form-factor BUS_PATH:device.bus-path \
			VENDOR_ID:device.vendor.id PRODUCT_ID:device.product.id PRODUCT_NAME:device.product.name; do
			v=$(card_prop "$kind" "${k%%:*}" props)
			[ -z "$v" ] || echo "      [\"${k#*:}\"] = \"$v\","
		done
		echo "    } },"
	done
	echo '  },'
	echo '})'
}

# Whether every card is there and the server has settled a default sink (on a card's sink,
# when the cards have any).
cards_settled() {
	local n=${#card_names[@]} sinks default
	[ "$(pactl list cards short 2>/dev/null | wc -l)" -ge "$n" ] || return 1
	default=$(pactl get-default-sink 2>/dev/null) || return 1
	sinks=$(pactl list sinks short 2>/dev/null | cut -f2)
	[ -n "$default" ] && grep -qxF "$default" <<<"$sinks" || return 1
	if grep -q '^alsa_output\.' <<<"$sinks"; then
		[[ $default == alsa_output.* ]] || return 1
	fi
}

# The cards that have no active profile: PipeWire 0.3.65 now and then exports a simulated card with
# no profiles at all (pipewire-pulse logs "profiles inconsistent"), and WirePlumber leaves it off.
cards_without_profile() {
	pactl list cards 2>/dev/null | awk '
		/^Card #/ { if (name != "" && !active) print name; name = ""; active = 0 }
		/^\tName: / { name = $2 }
		/^\tActive Profile: / { active = 1 }
		END { if (name != "" && !active) print name }'
}

wait_ready() {
	local dir=$1 i
	for i in $(seq 1 200); do
		if pactl info >/dev/null 2>&1; then return 0; fi
		sleep 0.05
	done
	echo "server.sh: server in $dir did not come up; log:" >&2
	cat "$dir/server.log" >&2 || true
	return 1
}

bluetooth_on() {
	[ "${BLUETOOTH:-0}" = 1 ]
}

bus_address() {
	echo "unix:path=$1/run/system_bus_socket"
}

# BLUETOOTH=1: the private system bus and the BlueZ stand-in, each in its own process group
# (their pids in $dir/bt-pids, for stop), and what the servers need for HFP's SCO socket (the
# preload shim's socketpair stand-in, sim/shim/preload.c).
bt_start() {
	local dir=$1 i
	bluetooth_on || return 0
	rm -f "$dir/run/system_bus_socket"
	setsid dbus-daemon --config-file="$root/sim/bluez/bus.conf" --address="$(bus_address "$dir")" \
		--nofork --nopidfile >"$dir/bus.log" 2>&1 &
	echo $! >"$dir/bt-pids"
	for i in $(seq 1 200); do [ -S "$dir/run/system_bus_socket" ] && break; sleep 0.01; done
	setsid /usr/bin/python3 "$root/sim/bluez/bluez-sim.py" --address="$(bus_address "$dir")" \
		>"$dir/bluez.log" 2>&1 &
	echo $! >>"$dir/bt-pids"
	for i in $(seq 1 300); do
		"$root/sim/bluez/btctl" "$(bus_address "$dir")" status >/dev/null 2>&1 && break
		sleep 0.01
	done
	if [[ " ${sim_env[*]} " != *" LD_PRELOAD="* ]]; then
		"$root/sim/build.sh" "$root/.build/sim"
		sim_env+=("LD_PRELOAD=$root/.build/sim/routectl-sim-preload.so")
	fi
	sim_env+=("ROUTECTL_SIM_SCO=1")
}

bt_stop() {
	local dir=$1 pid
	[ -f "$dir/bt-pids" ] || return 0
	for pid in $(cat "$dir/bt-pids"); do kill -TERM -- "-$pid" 2>/dev/null || true; done
	for pid in $(cat "$dir/bt-pids"); do
		for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.05; done
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	rm -f "$dir/bt-pids"
}

# Wait until the server has registered with the stand-in what a headset needs.
bt_wait_registered() {
	local dir=$1 i
	bluetooth_on || return 0
	for i in $(seq 1 300); do
		"$root/sim/bluez/btctl" "$(bus_address "$dir")" ready a2dp+hfp 2>/dev/null && return 0
		sleep 0.02
	done
	echo "server.sh: the server in $dir did not register with the BlueZ stand-in; logs:" >&2
	tail -n 20 "$dir/bluez.log" "$dir/server.log" >&2 || true
	return 1
}

bt() {
	local dir=$1 cmd=${2:-} bus
	bus=$(bus_address "$dir")
	shift 2 || true
	case "$cmd" in
	headset)
		"$root/sim/bluez/btctl" "$bus" add "$@"
		"$root/sim/bluez/btctl" "$bus" connect "$1" ;;
	add | connect | disconnect | remove | status) "$root/sim/bluez/btctl" "$bus" "$cmd" "$@" ;;
	*) echo "server.sh: bt DIR add ADDR NAME [a2dp|a2dp+hfp|a2dp+hsp] | headset ADDR NAME [PROFILES] | connect ADDR [a2dp|hfp|hsp] | disconnect|remove ADDR | status" >&2; return 2 ;;
	esac
}

start() {
	local kind=$1 dir=$2 t0 i
	t0=$(date +%s%N)
	mkdir -p "$dir/run" "$dir/home/.local/state" "$dir/home/.config"
	chmod 700 "$dir/run"
	env_for "$dir"
	setup_cards "$dir"
	bt_start "$dir"
	case "$kind" in
	pulseaudio)
		# PulseAudio sets its own open-files limit (256) from daemon.conf: raise it for
		# benchmarks with hundreds of null sinks.
		mkdir -p "$XDG_CONFIG_HOME/pulse"
		echo "rlimit-nofile = 65536" >"$XDG_CONFIG_HOME/pulse/daemon.conf"
		cat >"$dir/default.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$dir/run/pulse/native
PA
		if [ ${#card_names[@]} -gt 0 ]; then
			# What Debian's default.pa loads that matters for routing, minus hardware
			# discovery (udev, Bluetooth) and the session's other buses; state files live in
			# PULSE_STATE_PATH. Only with cards: the null-sink tests keep a bare server.
			cat >>"$dir/default.pa" <<PA
load-module module-device-restore
load-module module-stream-restore
load-module module-card-restore
load-module module-augment-properties
load-module module-switch-on-port-available
$(pa_cards)
load-module module-default-device-restore
load-module module-always-sink
load-module module-intended-roles
load-module module-suspend-on-idle
load-module module-position-event-sounds
load-module module-role-cork
load-module module-filter-heuristics
load-module module-filter-apply
PA
		fi
		if bluetooth_on; then
			# As Debian's default.pa, on the private system bus (DBUS_SYSTEM_BUS_ADDRESS).
			cat >>"$dir/default.pa" <<PA
load-module module-bluetooth-policy
load-module module-bluetooth-discover
PA
		fi
		for device in ${PRELOAD:-}; do
			echo "load-module module-null-sink sink_name=${device#*:} sink_properties='device.description=${device#*:} $(props_for "${device%%:*}")'" >>"$dir/default.pa"
		done
		mkdir -p "$dir/run/pulse"
		env "${sim_env[@]}" setsid pulseaudio -n -F "$dir/default.pa" --daemonize=no \
			--exit-idle-time=-1 --use-pid-file=no --disable-shm=no --realtime=no \
			--high-priority=no --log-target=stderr >"$dir/server.log" 2>&1 &
		echo $! >"$dir/pids"
		;;
	pipewire)
		local conf="$dir/home/.config/pipewire/pipewire-pulse.conf.d"
		mkdir -p "$conf"
		{
			echo "pulse.cmd = ["
			for device in ${PRELOAD:-}; do
				echo "  { cmd = \"load-module\" args = \"module-null-sink sink_name=${device#*:} sink_properties='device.description=${device#*:} $(props_for "${device%%:*}")'\" }"
			done
			echo "]"
		} >"$conf/routectl-preload.conf"
		# WirePlumber: never the stock udev/Bluetooth monitors; the simulated cards instead.
		local wp=$XDG_CONFIG_HOME/wireplumber
		mkdir -p "$wp/main.lua.d" "$wp/bluetooth.lua.d"
		if bluetooth_on; then
			sed 's/^bluez_monitor.enabled = false$/bluez_monitor.enabled = true/' \
				"$root/sim/wireplumber/51-routectl-sim-bluetooth.lua" >"$wp/bluetooth.lua.d/51-routectl-sim-bluetooth.lua"
		else
			cp "$root/sim/wireplumber/51-routectl-sim-bluetooth.lua" "$wp/bluetooth.lua.d/"
		fi
		{
			cat "$root/sim/wireplumber/51-routectl-sim.lua"
			[ ${#card_names[@]} -eq 0 ] || wp_cards
		} >"$wp/main.lua.d/51-routectl-sim.lua"
		# pipewire-pulse started before PipeWire's socket exists runs without a core ("Host is
		# down") and drops its pulse.cmd: start the three in order. The simulator's environment
		# goes to the three servers only, not to dbus-daemon.
		setsid dbus-run-session -- env ROUTECTL_SIM_ENV="$(printf '%q ' "${sim_env[@]}")" sh -c '
			eval "set -- $ROUTECTL_SIM_ENV"; unset ROUTECTL_SIM_ENV
			env "$@" pipewire & i=0
			while [ ! -S "$PIPEWIRE_RUNTIME_DIR/pipewire-0" ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
			env "$@" wireplumber & exec env "$@" pipewire-pulse' \
			>"$dir/server.log" 2>&1 &
		echo $! >"$dir/pids"
		;;
	*) echo "server.sh: unknown server '$kind' (pulseaudio or pipewire)" >&2; return 2 ;;
	esac
	wait_ready "$dir"
	bt_wait_registered "$dir"
	if [ "$kind" = pipewire ]; then
		# WirePlumber must be up before devices are plugged, or it never picks a default.
		for i in $(seq 1 100); do
			pw-cli ls Client 2>/dev/null | grep -qi wireplumber && break
			sleep 0.05
		done
	fi
	if [ ${#card_names[@]} -gt 0 ]; then
		for i in $(seq 1 300); do
			cards_settled && break
			sleep 0.02
		done
		if ! cards_settled; then
			echo "server.sh: the simulated cards of $kind in $dir did not settle; log:" >&2
			tail -n 40 "$dir/server.log" >&2 || true
			return 1
		fi
		local missing=
		if [ "$kind" = pipewire ]; then
			for i in $(seq 1 40); do
				missing=$(cards_without_profile)
				[ -z "$missing" ] && break
				sleep 0.05
			done
		fi
		if [ -n "$missing" ]; then
			# Seen on PipeWire about once in 20 starts under load, before any client has run: the
			# card stays off (no sink, no source) until something on it changes, which would make
			# a test start from a machine no user has. The server starts again, twice at most.
			if [ "${SERVER_SH_RESTARTS:-0}" -ge 2 ]; then
				echo "server.sh: $kind in $dir has no profile on:" $missing >&2
				return 1
			fi
			echo "server.sh: $kind came up with no profile on" $missing "(a PipeWire 0.3.65 race); starting it again" >&2
			stop "$dir"
			rm -rf "$XDG_STATE_HOME/wireplumber"
			SERVER_SH_RESTARTS=$((${SERVER_SH_RESTARTS:-0} + 1)) start "$kind" "$dir"
			return
		fi
	fi
	# Start time (cards included), for the record: tests and bench read it from here.
	echo "$(( ($(date +%s%N) - t0) / 1000000 )) ms" >"$dir/start-time"
	echo "export HOME='$HOME' XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' XDG_STATE_HOME='$XDG_STATE_HOME'"
	echo "export XDG_CONFIG_HOME='$XDG_CONFIG_HOME' XDG_DATA_HOME='$XDG_DATA_HOME'"
	echo "export PULSE_SERVER='$PULSE_SERVER' PULSE_RUNTIME_PATH='$PULSE_RUNTIME_PATH' PIPEWIRE_RUNTIME_DIR='$PIPEWIRE_RUNTIME_DIR'"
	echo "export PULSE_STATE_PATH='$PULSE_STATE_PATH' PULSE_COOKIE='$PULSE_COOKIE'"
}

stop() {
	local dir=$1 pid
	[ -f "$dir/pids" ] || { bt_stop "$dir"; return 0; }
	pid=$(cat "$dir/pids")
	# setsid made the server a process-group leader: end the whole group.
	kill -TERM -- "-$pid" 2>/dev/null || true
	for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.05; done
	kill -KILL -- "-$pid" 2>/dev/null || true
	rm -f "$dir/pids"
	bt_stop "$dir"
}

plug() {
	local dir=$1 kind=$2 name=$3 props
	env_for "$dir"
	props=$(props_for "$kind")
	pactl load-module module-null-sink sink_name="$name" \
		sink_properties="'device.description=$name $props'" >"$dir/module.$name"
}

unplug() {
	local dir=$1 name=$2
	env_for "$dir"
	pactl unload-module "$(cat "$dir/module.$name")"
	rm -f "$dir/module.$name"
}

# Write a simulated jack's value file: the hardware event both servers react to. Returns at once.
jack() {
	local dir=$1 card=$2 jack=$3 state=$4 n control found=0 value file
	case "$state" in in) value=1 ;; out) value=0 ;; *) echo "server.sh: jack state is in or out" >&2; return 2 ;; esac
	n=$(awk -v c="$card" '$2 == c || $2 == "sim-" c || ($3 == c && !seen++) { print $1; exit }' "$dir/sim/cards" 2>/dev/null)
	if [ -z "$n" ]; then
		echo "server.sh: no simulated card '$card' in $dir" >&2
		return 2
	fi
	while read -r name control; do
		[ "$name" = "$jack" ] || continue
		file="$dir/sim/card$n/values/${control//\//_}"
		echo "$value" >"$file.jack.tmp" && mv "$file.jack.tmp" "$file"
		found=1
	done < <(grep -v '^#' "$dir/sim/card$n/jacks")
	if [ "$found" = 0 ]; then
		echo "server.sh: card '$card' has no jack '$jack' (see sim/cards/*/jacks)" >&2
		return 2
	fi
}

cmd=${1:-}; shift || true
case "$cmd" in
start) start "$@" ;;
stop) stop "$@" ;;
plug) plug "$@" ;;
unplug) unplug "$@" ;;
jack) jack "$@" ;;
bt) bt "$@" ;;
*) echo "usage: [CARDS=...] [BLUETOOTH=1] server.sh start pulseaudio|pipewire DIR | stop DIR | plug DIR KIND NAME | unplug DIR NAME | jack DIR CARD JACK in|out | bt DIR add|headset|connect|disconnect|remove|status ..." >&2; exit 2 ;;
esac
