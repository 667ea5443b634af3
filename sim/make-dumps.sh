#!/usr/bin/env bash
# Regenerate the Routing corpus (Tests/RoutingTests/Fixtures/sim/): `routectl dump` of a private
# server per server kind and card kind, plus the laptop with headphones plugged and the phones in a
# call, and a Bluetooth headset (sim/bluez) next to the laptop in A2DP and in HFP.
# Usage: [KINDS="laptop ... all bluetooth"] sim/make-dumps.sh [pulseaudio|pipewire ...] (after make build)
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
has_sink() { pactl list sinks short | cut -f2 | grep -q "$1"; }
has_source() { pactl list sources short | cut -f2 | grep -v '\.monitor$' | grep -q "$1"; }
servers=("$@"); [ $# -gt 0 ] || servers=(pulseaudio pipewire)
kinds=${KINDS:-laptop desktop usb-headset hdmi phone phone17 all bluetooth}
for server in "${servers[@]}"; do
	for kind in $kinds; do
		case $kind in all | bluetooth) continue ;; esac
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
			until_true active_port_is "\[Out\] Earpiece"
			dump "$server" phone-voicecall ;;
		phone17)
			pactl set-card-profile alsa_card.sim-phone17 "Voice Call (Earpiece, Mic)"
			until_true profile_is "Voice Call (Earpiece, Mic)"
			until_true active_port_is "\[Out\] Earpiece"
			dump "$server" phone17-voicecall ;;
		esac
		"$root/scripts/server.sh" stop "$dir"
	done
	if [[ " $kinds " == *" all "* ]]; then
		dir=$tmp/$server-all
		eval "$(CARDS="laptop hdmi phone usb-headset" "$root/scripts/server.sh" start "$server" "$dir")"
		echo "$server: 4 cards started in $(cat "$dir/start-time")" >&2
		dump "$server" all
		"$root/scripts/server.sh" stop "$dir"
	fi
	if [[ " $kinds " == *" bluetooth "* ]]; then
		# An A2DP+HFP headset next to the laptop: A2DP as it connects, then the HFP profile.
		dir=$tmp/$server-bluetooth
		eval "$(CARDS=laptop BLUETOOTH=1 "$root/scripts/server.sh" start "$server" "$dir")"
		"$root/scripts/server.sh" bt "$dir" headset 00:11:22:33:44:55 "Sim Headset" a2dp+hfp
		card=bluez_card.00_11_22_33_44_55
		if [ "$server" = pulseaudio ]; then
			a2dp_sink=bluez_sink.00_11_22_33_44_55.a2dp_sink hfp=handsfree_head_unit
		else
			a2dp_sink=bluez_output.00_11_22_33_44_55.1 hfp=headset-head-unit
		fi
		until_true has_sink "$a2dp_sink"
		until_true sh -c "pactl get-default-sink | grep -qxF $a2dp_sink"
		dump "$server" bluetooth-a2dp
		pactl set-card-profile "$card" "$hfp"
		until_true profile_is "$hfp"
		until_true has_source "^bluez_input\.00_11_22_33_44_55\|^bluez_source\.00_11_22_33_44_55"
		until_true has_sink "^bluez_output\.00_11_22_33_44_55\|^bluez_sink\.00_11_22_33_44_55\.$hfp"
		dump "$server" bluetooth-hfp
		"$root/scripts/server.sh" stop "$dir"
	fi
done
