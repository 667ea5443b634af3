#!/usr/bin/env bash
# Writes scripts/startup.order: the functions a one-shot command runs, by symbol, in the order they
# first run, so that the release link (lld's --symbol-ordering-file, Makefile) puts them side by
# side at the front of the text. A query touches ~700 functions scattered over the binary's 4.7 MB
# of text; each page fault on the text maps a 64 KiB window of it, so scattered code costs faults
# and mapped pages on every run.
#
#   scripts/startup-order.sh [ROUTECTL]     (default .build/release/routectl; needs valgrind)
#
# Run under callgrind on a private PulseAudio with the bench's devices (scripts/server.sh), the
# query family first: it is the budgeted start-up (DESIGN.md §7). A function that no longer exists
# is skipped by the linker, so a stale list costs speed, never correctness; regenerate it after
# changing what these commands run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$(realpath "${1:-$root/.build/release/routectl}")
out=$root/scripts/startup.order
command -v valgrind >/dev/null || { echo "startup-order: needs valgrind (apt install valgrind)" >&2; exit 1; }

work=$(mktemp -d /tmp/routectl-order.XXXXXX)
stop() { for dir in server phone; do "$root/scripts/server.sh" stop "$work/$dir" >/dev/null 2>&1 || true; done; rm -rf "$work"; }
trap stop EXIT
mkdir "$work/server" "$work/phone"
# The call commands run on a phone (a UCM card with a call profile), on a second server: call start
# is budgeted against callaudiod (DESIGN.md §7).
phone=$(CARDS=phone "$root/scripts/server.sh" start pulseaudio "$work/phone")
eval "$(CARDS=laptop "$root/scripts/server.sh" start pulseaudio "$work/server")"
for kind in speaker headset bluetooth hdmi; do "$root/scripts/server.sh" plug "$work/server" "$kind" "order-$kind"; done

# valgrind cannot read the DWARF 5 the toolchain writes; the symbol table is all it needs.
strip -g -o "$work/routectl" "$bin"
nm --defined-only "$work/routectl" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u >"$work/symbols"
n=0
run() {
	n=$((n + 1))
	valgrind -q --tool=callgrind --demangle=no --compress-strings=no --callgrind-out-file="$work/cg.$n" \
		"$work/routectl" "$@" >/dev/null 2>"$work/err.$n" || { cat "$work/err.$n" >&2; exit 1; }
}
# shellcheck disable=SC2086 # the words of each line are the command's arguments
while read -r args; do run $args; done <<'EOF'
query route
query
--json query
query default
devices
--json devices
set speaker
query
clear
input list
EOF
eval "$phone"
run call start
run call end

# Each function once, in the order the runs first name it; only routectl's own (not libpulse's).
for i in $(seq 1 "$n"); do sed -n 's/^c\{0,1\}fn=//p' "$work/cg.$i"; done |
	awk 'NR == FNR { ours[$0] = 1; next } ($0 in ours) && !seen[$0]++' "$work/symbols" - >"$work/order"
mv "$work/order" "$out"
echo "startup-order: $(wc -l <"$out") functions in ${out#"$root"/}"
