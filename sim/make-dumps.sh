#!/usr/bin/env bash
# Regenerate the Routing corpus (Tests/RoutingTests/Fixtures/sim/): `routectl dump` of a private
# server per server kind and card kind, plus the laptop with headphones plugged and the phones in a
# call. Usage: sim/make-dumps.sh [pulseaudio|pipewire ...] (after make build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
routectl=${ROUTECTL:-$root/.build/release/routectl}
out=$root/Tests/RoutingTests/Fixtures/sim
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Waits for a condition with short polls (never a fixed sleep).
until_true() { for _ in $(seq 1 100); do "$@" && return 0; sleep 0.02; done; echo "make-dumps: timed out: $*" >&2; return 1; }
dump() { # SERVER NAME
	"$routectl" dump >"$out/$1-$2.json"
}
active_port_is() { pactl list sinks | grep -q "Active Port: $1"; }
profile_is() { pactl list cards | grep -q "Active Profile: $1"; }
servers=("$@"); [ $# -gt 0 ] || servers=(pulseaudio pipewire)
for server in "${servers[@]}"; do
	for kind in laptop desktop usb-headset hdmi phone phone17; do
		dir=$tmp/$server-$kind
		eval "$(CARDS=$kind "$root/scripts/server.sh" start "$server" "$dir")"
		dump "$server" "$kind"
		case $kind in
		laptop)
			"$root/scripts/server.sh" jack "$dir" laptop headphone in
			until_true active_port_is analog-output-headphones
			dump "$server" laptop-headphones ;;
		phone)
			pactl set-card-profile alsa_card.sim-phone "Voice Call"
			until_true profile_is "Voice Call"
			until_true sh -c 'pactl list sinks short | grep -q Voice_Call'
			dump "$server" phone-voicecall ;;
		phone17)
			pactl set-card-profile alsa_card.sim-phone17 "Voice Call (Earpiece, Mic)"
			until_true profile_is "Voice Call (Earpiece, Mic)"
			until_true active_port_is "\[Out\] Earpiece"
			dump "$server" phone17-voicecall ;;
		esac
		"$root/scripts/server.sh" stop "$dir"
	done
	dir=$tmp/$server-all
	eval "$(CARDS="laptop hdmi phone usb-headset" "$root/scripts/server.sh" start "$server" "$dir")"
	echo "$server: 4 cards started in $(cat "$dir/start-time")" >&2
	dump "$server" all
	"$root/scripts/server.sh" stop "$dir"
done
