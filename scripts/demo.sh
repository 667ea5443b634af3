#!/usr/bin/env bash
# A tour of routectl on a private server with a simulated laptop (a real ALSA card below the server:
# speaker, headphone jack, microphones) and a simulated Bluetooth headset. Never touches your audio.
#   scripts/demo.sh [ROUTECTL]      DEMO_SERVER=pipewire for PipeWire
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-$root/.build/release/routectl}
routectl() { "$binary" "$@"; }
server=${DEMO_SERVER:-pulseaudio}
dir=$(mktemp -d /tmp/routectl-demo.XXXXXX)
watcher=
cleanup() {
	[ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
	"$root/scripts/server.sh" stop "$dir"
	rm -rf "$dir"
}
trap cleanup EXIT
eval "$(CARDS=laptop BLUETOOTH=1 "$root/scripts/server.sh" start "$server" "$dir")"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@" || echo "(exit status $?)"; }
shown=0
# events UNTIL_REGEX: waits (at most 5 s) for watch --apply to print a line matching it, then shows
# the lines it printed since the last call.
events() {
	for _ in $(seq 1 100); do tail -n +"$((shown + 1))" "$dir/events" | grep -qE -- "$1" && break; sleep 0.05; done
	sleep 0.2 # let the lines of the same action arrive
	tail -n +"$((shown + 1))" "$dir/events" | sed 's/^/  watch --apply | /'
	shown=$(wc -l <"$dir/events")
}
act() { printf '\n\033[1m(%s)\033[0m\n' "$1"; }

echo "A private $server in $dir on a simulated laptop; your own sound server is not touched."
step routectl
step routectl devices
printf '\n\033[1m$ routectl watch --apply &\033[0m   (keeps the rules applied; its events below)\n'
routectl watch --apply >"$dir/events" 2>&1 &
watcher=$!
events "reason=initial"

act "headphones plugged into the laptop's jack"
"$root/scripts/server.sh" jack "$dir" laptop headphone in
events "^[0-9:.]+ route headset"
step routectl query route
step routectl query speaker
step routectl set speaker
step routectl set speaker --force
events "route speaker"
step routectl clear
events "route headset"

act "a Bluetooth headset connects"
"$root/scripts/server.sh" bt "$dir" headset 00:1B:66:A1:B2:C3 "WH-1000XM4" a2dp+hfp >/dev/null
events "route bluetooth"
step routectl devices
act "the Bluetooth headset disconnects"
"$root/scripts/server.sh" bt "$dir" disconnect 00:1B:66:A1:B2:C3 >/dev/null
events "route headset"

act "headphones pulled out"
"$root/scripts/server.sh" jack "$dir" laptop headphone out
events "route speaker"
step routectl --json query
printf '\n\033[1m$ %s\033[0m\n' "routectl dump > dump.json"
routectl dump >"$dir/dump.json"
echo "(the dump is $(wc -c <"$dir/dump.json") bytes of pactl-shaped JSON: a bug report is one file)"
step routectl --snapshot "$dir/dump.json" query route
step routectl query rout
