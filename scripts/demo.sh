#!/usr/bin/env bash
# A short tour of routectl on a private server with simulated devices. Never touches your own audio.
#   scripts/demo.sh [ROUTECTL]      DEMO_SERVER=pipewire for PipeWire
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
routectl=${1:-$root/.build/release/routectl}
server=${DEMO_SERVER:-pulseaudio}
dir=$(mktemp -d /tmp/routectl-demo.XXXXXX)
trap '"$root/scripts/server.sh" stop "$dir"; rm -rf "$dir"' EXIT
eval "$("$root/scripts/server.sh" start "$server" "$dir")"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
plug() { "$root/scripts/server.sh" plug "$dir" "$1" "$2"; echo "(plugged a simulated $1: $2)"; }
settle() { for _ in $(seq 1 40); do [ "$(pactl get-default-sink)" = "$1" ] && return; sleep 0.05; done; }

echo "A private $server in $dir; your own sound server is not touched."
plug speaker builtin-speaker
plug earpiece builtin-earpiece
pactl set-default-sink builtin-speaker; settle builtin-speaker
step "$routectl"
plug headset usb-headset
plug bluetooth wh-1000xm4
plug hdmi monitor
step "$routectl" devices
echo; echo "(another client makes the Bluetooth headphones the default sink)"
pactl set-default-sink wh-1000xm4; settle wh-1000xm4
step "$routectl" query route
step "$routectl" query external
step "$routectl" --json query
printf '\n\033[1m$ %s\033[0m\n' "routectl dump > dump.json"
"$routectl" dump >"$dir/dump.json"
echo "(the dump is $(wc -c <"$dir/dump.json") bytes of pactl-shaped JSON)"
step "$routectl" --snapshot "$dir/dump.json" query route
step "$routectl" query rout || echo "(exit status $?)"
