#!/usr/bin/env bash
# End-to-end tests of watch, watch --apply and wait on a private server.
#   tests/e2e-watch.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
watcher=
# KEEP=1 keeps the last events file in /tmp/last-events, to read after a failure.
before_cleanup() {
	[ -z "$watcher" ] || kill "$watcher" 2>/dev/null
	[ -z "${KEEP:-}" ] || cp "$dir/events" /tmp/last-events 2>/dev/null
}
export PRELOAD="speaker:sim-speaker earpiece:sim-earpiece"
e2e_setup watch "${1:?usage: e2e-watch.sh pulseaudio|pipewire [routectl]}" "${2:-}"
default_is() { wait_for "default sink $1" sh -c "[ \"\$(pactl get-default-sink)\" = '$1' ]"; }
set_default() { pactl set-default-sink "$1"; default_is "$1"; }
start_watch() { "$routectl" "$@" >"$dir/events" 2>"$dir/watch.err" & watcher=$!; wait_event "$dir/events" 1 route reason=initial; }
stop_watch() {
	kill -TERM "$watcher"
	set +e; wait "$watcher"; watch_rc=$?; set -e
	watcher=
}
# settle: the server's own follow-up notifications have arrived once pactl has had a round trip.
settle() { pactl info >/dev/null; sleep 0.3; }

echo "== $server: $(pactl info | sed -n 's/^Server Name: //p')"
wait_for "preloaded sinks" sh -c 'pactl list short sinks | grep -q sim-earpiece' || {
	pactl list short sinks >&2; tail -20 "$dir/server.log" >&2; exit 1
}
set_default sim-speaker

echo "-- watch --json: the initial route, then plug and unplug with their reasons"
start_watch watch --json
expect_eq "first event: initial route speaker" 1 "$(events "$dir/events" route route=speaker reason=initial)"
expect_eq "first line is the initial route" initial "$(head -1 "$dir/events" | json_get reason)"
expect_match "events carry a timestamp" '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$' "$(head -1 "$dir/events" | json_get time)"
plug bluetooth sim-bluetooth
wait_event "$dir/events" 1 device-added kind=bluetooth name=sim-bluetooth
expect_eq "plug: device-added bluetooth" 1 "$(events "$dir/events" device-added kind=bluetooth name=sim-bluetooth)"
before=$(events "$dir/events" route)
set_default sim-earpiece
wait_event "$dir/events" 1 route route=receiver reason=route-configuration-change
settle
expect_eq "another client's change: one route event, route-configuration-change" $((before + 1)) "$(events "$dir/events" route)"
set_default sim-bluetooth
wait_event "$dir/events" 1 route route=bluetooth
unplug sim-bluetooth
wait_event "$dir/events" 1 device-removed kind=bluetooth name=sim-bluetooth
wait_event "$dir/events" 1 route previous=bluetooth reason=old-device-unavailable
expect_eq "unplug: route event with old-device-unavailable" 1 "$(events "$dir/events" route previous=bluetooth reason=old-device-unavailable)"
expect_eq "plain watch changes nothing: no override-cleared" 0 "$(events "$dir/events" override-cleared)"
stop_watch
expect_eq "SIGTERM ends watch with exit 0" 0 "$watch_rc"
expect_eq "watch printed nothing on stderr" "" "$(cat "$dir/watch.err")"

echo "-- watch (text): one flushed line per event"
"$routectl" watch >"$dir/text" 2>&1 &
watcher=$!
wait_for "text line" grep -q ' route speaker\| route receiver\| route unknown' "$dir/text"
expect_match "text line" '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} route [a-z]+ reason=initial output=' "$(head -1 "$dir/text")"
kill -INT "$watcher"; set +e; wait "$watcher"; expect_eq "SIGINT ends watch with exit 0" 0 "$?"; set -e; watcher=

echo "-- a closed stdout ends watch quietly"
set +e
timeout 5 "$routectl" watch 2>"$dir/pipe.err" | head -1 >"$dir/pipe.out"
status=${PIPESTATUS[0]}
set -e
expect_eq "watch | head -1: watch exits 0 by itself (124 would be the timeout)" 0 "$status"
expect_match "watch | head -1 printed the initial route" 'reason=initial' "$(cat "$dir/pipe.out")"
expect_eq "watch | head -1: nothing on stderr" "" "$(cat "$dir/pipe.err")"

echo "-- watch --apply: external devices win, unplugging falls back, other clients are respected"
rc default earpiece >/dev/null
set_default sim-speaker
start_watch watch --apply --json
run_rc rc watch --apply
expect_rc "a second --apply: exit 1" 1
expect_match "a second --apply: says who holds it" "^routectl: Another 'routectl watch --apply' is running \(pid $watcher\); one per session\.$" "$err"
plug headset sim-headset
default_is sim-headset
wait_event "$dir/events" 1 route route=headset reason=new-device-available
settle
expect_eq "plug headset: one route event" 1 "$(events "$dir/events" route route=headset)"
rc -q set speaker >/dev/null
expect_eq "set speaker under a headset: override recorded" speaker "$(rc query override)"
plug bluetooth sim-bluetooth
default_is sim-bluetooth
wait_event "$dir/events" 1 override-cleared override=speaker
expect_eq "plug bluetooth: the override is cleared" none "$(rc query override)"
wait_event "$dir/events" 1 route route=bluetooth reason=new-device-available
expect_eq "plug bluetooth: route event" 1 "$(events "$dir/events" route route=bluetooth reason=new-device-available)"
unplug sim-headset
settle
expect_eq "unplug the headset (not the route): bluetooth stays" sim-bluetooth "$(pactl get-default-sink)"
plug headset sim-headset
default_is sim-headset
unplug sim-headset
default_is sim-bluetooth
wait_event "$dir/events" 1 route route=bluetooth previous=headset reason=old-device-unavailable
expect_eq "unplug headset: back to bluetooth" sim-bluetooth "$(pactl get-default-sink)"
unplug sim-bluetooth
default_is sim-earpiece
wait_event "$dir/events" 1 route route=receiver previous=bluetooth reason=old-device-unavailable
expect_eq "unplug bluetooth: the default target (earpiece)" sim-earpiece "$(pactl get-default-sink)"
set_default sim-speaker
wait_event "$dir/events" 1 route route=speaker reason=route-configuration-change
settle
expect_eq "another client's choice is not reverted" sim-speaker "$(pactl get-default-sink)"
expect_eq "nor are the preferences rewritten" earpiece "$(rc default)"

echo "-- the server goes away and comes back: interrupted, recovered, the route re-applied"
for round in 1 2; do
	"$root/scripts/server.sh" stop "$dir"
	wait_event "$dir/events" "$round" interrupted
	eval "$("$root/scripts/server.sh" start "$server" "$dir")"
	wait_event "$dir/events" "$round" recovered
	expect_eq "restart $round: recovered on the earpiece" "$round" "$(events "$dir/events" recovered route=receiver)"
	expect_eq "restart $round: the route re-applied on the server" sim-earpiece "$(pactl get-default-sink)"
done
expect_eq "the watcher is still running" yes "$(kill -0 "$watcher" 2>/dev/null && echo yes || echo no)"
stop_watch
expect_eq "--apply ends with exit 0" 0 "$watch_rc"

echo "-- --mute-on-fallback mutes the speaker the route falls back to"
rc default speaker >/dev/null
set_default sim-speaker
start_watch watch --apply --mute-on-fallback --json
plug headset sim-headset
default_is sim-headset
unplug sim-headset
default_is sim-speaker
wait_for "sim-speaker muted" sh -c '[ "$(pactl get-sink-mute sim-speaker)" = "Mute: yes" ]'
expect_eq "fallback to the speaker: muted" "Mute: yes" "$(pactl get-sink-mute sim-speaker)"
stop_watch
pactl set-sink-mute sim-speaker 0

echo "-- wait: returns on a plug, times out otherwise"
run_rc rc wait speaker --timeout 2
expect_rc "wait for the current route: exit 0" 0
start=$(date +%s%N)
run_rc rc wait bluetooth --timeout 0.5
elapsed=$((($(date +%s%N) - start) / 1000000))
expect_rc "wait times out: exit 1" 1
if [ "$elapsed" -lt 2000 ]; then ok "wait gave up after ${elapsed} ms (timeout 0.5 s)"; else not_ok "wait took ${elapsed} ms"; fi
"$routectl" wait headset --timeout 10 >"$dir/wait.out" &
waiter=$!
sleep 0.2
plug headset sim-headset2
pactl set-default-sink sim-headset2
set +e; wait "$waiter"; wrc=$?; set -e
expect_eq "wait headset: exit 0 after the plug" 0 "$wrc"
expect_eq "wait prints the route" headset "$(cat "$dir/wait.out")"

summary
