#!/usr/bin/env bash
# Private sound servers for routectl's tests, demo and bench (DESIGN.md §6).
# Never touches the user's own server: everything lives under a fresh runtime dir,
# with its own HOME and XDG dirs, and clients reach it only through PULSE_SERVER.
#
#   scripts/server.sh start pulseaudio|pipewire DIR   start one; prints shell exports
#   scripts/server.sh stop DIR                        stop it and everything it started
#   scripts/server.sh plug DIR KIND NAME              load a null sink with KIND's properties
#   scripts/server.sh unplug DIR NAME                 unload it
# PRELOAD="kind:name ..." makes start load those devices with the server itself, so that they are
# there again the moment a restarted server comes up (the reconnection tests).
set -euo pipefail

props_for() {
	case "$1" in
	speaker) echo "device.form_factor=speaker device.bus=pci" ;;
	earpiece) echo "device.form_factor=handset device.bus=platform" ;;
	headset) echo "device.form_factor=headphone device.bus=usb" ;;
	bluetooth) echo "device.form_factor=headset device.bus=bluetooth device.api=bluez5" ;;
	hdmi) echo "device.form_factor=tv device.bus=pci" ;;
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

start() {
	local kind=$1 dir=$2
	mkdir -p "$dir/run" "$dir/home/.local/state" "$dir/home/.config"
	chmod 700 "$dir/run"
	env_for "$dir"
	case "$kind" in
	pulseaudio)
		cat >"$dir/default.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$dir/run/pulse/native
PA
		for device in ${PRELOAD:-}; do
			echo "load-module module-null-sink sink_name=${device#*:} sink_properties='device.description=${device#*:} $(props_for "${device%%:*}")'" >>"$dir/default.pa"
		done
		mkdir -p "$dir/run/pulse"
		setsid pulseaudio -n -F "$dir/default.pa" --daemonize=no --exit-idle-time=-1 \
			--use-pid-file=no --disable-shm=no --log-target=stderr >"$dir/server.log" 2>&1 &
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
		# pipewire-pulse started before PipeWire's socket exists runs without a core ("Host is
		# down") and drops its pulse.cmd: start the three in order.
		setsid dbus-run-session -- sh -c 'pipewire & i=0
			while [ ! -S "$PIPEWIRE_RUNTIME_DIR/pipewire-0" ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i + 1)); done
			wireplumber & exec pipewire-pulse' \
			>"$dir/server.log" 2>&1 &
		echo $! >"$dir/pids"
		;;
	*) echo "server.sh: unknown server '$kind' (pulseaudio or pipewire)" >&2; return 2 ;;
	esac
	wait_ready "$dir"
	if [ "$kind" = pipewire ]; then
		# WirePlumber must be up before devices are plugged, or it never picks a default.
		for i in $(seq 1 100); do
			pw-cli ls Client 2>/dev/null | grep -qi wireplumber && break
			sleep 0.05
		done
	fi
	echo "export HOME='$HOME' XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' XDG_STATE_HOME='$XDG_STATE_HOME'"
	echo "export XDG_CONFIG_HOME='$XDG_CONFIG_HOME' XDG_DATA_HOME='$XDG_DATA_HOME'"
	echo "export PULSE_SERVER='$PULSE_SERVER' PULSE_RUNTIME_PATH='$PULSE_RUNTIME_PATH' PIPEWIRE_RUNTIME_DIR='$PIPEWIRE_RUNTIME_DIR'"
	echo "export PULSE_STATE_PATH='$PULSE_STATE_PATH' PULSE_COOKIE='$PULSE_COOKIE'"
}

stop() {
	local dir=$1 pid
	[ -f "$dir/pids" ] || return 0
	pid=$(cat "$dir/pids")
	# setsid made the server a process-group leader: end the whole group.
	kill -TERM -- "-$pid" 2>/dev/null || true
	for _ in $(seq 1 40); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.05; done
	kill -KILL -- "-$pid" 2>/dev/null || true
	rm -f "$dir/pids"
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

cmd=${1:-}; shift || true
case "$cmd" in
start) start "$@" ;;
stop) stop "$@" ;;
plug) plug "$@" ;;
unplug) unplug "$@" ;;
*) echo "usage: server.sh start pulseaudio|pipewire DIR | stop DIR | plug DIR KIND NAME | unplug DIR NAME" >&2; exit 2 ;;
esac
