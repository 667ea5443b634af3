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

echo "-- input events: a microphone where there was none says so; a mute alone does not"
"$routectl" watch >"$dir/text" 2>&1 &
text_watcher=$!
start_watch watch --json
wait_for "text watcher" grep -q 'reason=initial' "$dir/text"
pactl load-module module-remap-source master=sim-speaker.monitor source_name=sim-mic source_properties=device.description=sim-mic >/dev/null
wait_for "source sim-mic" sh -c 'pactl list short sources | grep -q sim-mic'
pactl set-default-source sim-mic
pactl set-source-mute sim-mic 0
wait_event "$dir/events" 1 input source=sim-mic
pactl set-source-mute sim-mic 1
wait_event "$dir/events" 1 input source=sim-mic mic_muted=true
wait_for "text: the mute" grep -q 'input sim-mic mic_muted=yes' "$dir/text"
expect_eq "text: from none, then the mute alone" "$(printf '%s\n' 'input sim-mic (was none) mic_muted=no' 'input sim-mic mic_muted=yes')" \
	"$(lines "$dir/text" input)"
expect_eq "JSON: from none: source_changed true, previous null" 1 "$(events "$dir/events" input source=sim-mic previous=none source_changed=true mic_muted=false)"
expect_eq "JSON: the mute alone: source_changed false" 1 "$(events "$dir/events" input source=sim-mic previous=none source_changed=false mic_muted=true)"
pactl unload-module module-remap-source
wait_event "$dir/events" 1 input source=none previous=sim-mic source_changed=true
kill "$text_watcher"; wait "$text_watcher" 2>/dev/null || true
stop_watch

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
# Back within the hold-down (2 s): one flicker, not an unplug and a plug (DESIGN.md §1). It did not
# carry the sound, so the route ends where it was, on the headset connected after it.
plug headset sim-headset
wait_event "$dir/events" 1 flicker
settle
expect_eq "the headset back within the hold-down: a flicker; bluetooth keeps the sound" sim-bluetooth "$(pactl get-default-sink)"
expect_eq "the headset back within the hold-down: no route event to it" 1 "$(events "$dir/events" route route=headset)"
# Past the hold-down, a plug is a plug: the newest device takes the sound.
unplug sim-headset
sleep 2.2
plug headset sim-headset
default_is sim-headset
# The watcher reports the headset before it goes: a plug and unplug within one of its refetches are
# no route change at all (a burst is one event), and the server's default alone does not say it looked.
wait_event "$dir/events" 2 route route=headset
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
# The route lock `set` holds from its read of the server to its read-back (flock(1) takes the same
# lock): a plug meanwhile is answered once it is let go, from the server as the set left it.
lockfile=$XDG_RUNTIME_DIR/routectl/override.json.lock
flock "$lockfile" sh -c 'touch "$1"; sleep 1.5' sh "$dir/locked" &
locker=$!
wait_for "the route lock held" test -e "$dir/locked"
plug headset sim-headset
sleep 0.8
expect_eq "a plug while set holds the route lock: watch --apply waits (server)" sim-speaker "$(pactl get-default-sink)"
wait "$locker"
default_is sim-headset
expect_eq "the lock let go: the headset takes the route (server)" sim-headset "$(pactl get-default-sink)"
unplug sim-headset
default_is sim-earpiece
# A holder that keeps it (a set stopped with Ctrl-Z) does not stop the policy for good: past twice
# the timeout (10 s) watch --apply acts without it, clears the override the plug ends, says so once.
rc -q set speaker >/dev/null
# (-o: the lock is flock's own, not its child's, so that killing flock lets it go.)
flock -o "$lockfile" sleep 20 &
stuck=$!
wait_for "the route lock held" sh -c "! flock -n '$lockfile' true"
plug bluetooth sim-bluetooth
sleep 3
expect_eq "a plug while the lock is stuck: the watcher waits at first (server)" sim-speaker "$(pactl get-default-sink)"
i=0
until [ "$(pactl get-default-sink)" = sim-bluetooth ] || [ $i -ge 150 ]; do sleep 0.1; i=$((i + 1)); done
expect_eq "the lock stuck past twice the timeout: the watcher acts without it (server)" sim-bluetooth "$(pactl get-default-sink)"
expect_eq "and clears the override the plug ends" none "$(rc query override)"
expect_eq "and says so once" 1 "$(grep -c 'held the route lock for over 10 s' "$dir/watch.err" || true)"
kill "$stuck" 2>/dev/null || true
wait "$stuck" 2>/dev/null || true
unplug sim-bluetooth
default_is sim-earpiece

echo "-- the server goes away and comes back: interrupted, recovered, the route re-applied"
for round in 1 2; do
	"$root/scripts/server.sh" stop "$dir"
	wait_event "$dir/events" "$round" interrupted
	eval "$("$root/scripts/server.sh" start "$server" "$dir")"
	wait_event "$dir/events" "$round" recovered
	expect_eq "restart $round: recovered on the earpiece" "$round" "$(events "$dir/events" recovered route=receiver)"
	expect_eq "restart $round: the route re-applied on the server" sim-earpiece "$(pactl get-default-sink)"
done
echo "-- another client's pick, respected, outlives a restart: the route is put back where it was, not where the rules say"
pactl set-default-sink sim-speaker
wait_event "$dir/events" 1 route route=speaker reason=route-configuration-change
"$root/scripts/server.sh" stop "$dir"
wait_event "$dir/events" 3 interrupted
eval "$("$root/scripts/server.sh" start "$server" "$dir")"
wait_event "$dir/events" 3 recovered
expect_eq "a pick before the restart: recovered on it" 1 "$(events "$dir/events" recovered route=speaker)"
expect_eq "a pick before the restart: kept on the server" sim-speaker "$(pactl get-default-sink)"
echo "-- wait across a restart: it waits on, and sees the route the server comes back to"
"$routectl" wait headset --timeout 30 >"$dir/wait.out" 2>"$dir/wait.err" &
waiter=$!
wait_for "wait connected" sh -c "[ \"\$(pactl list clients | grep -c 'application.id = \"io.github.routectl\"')\" -ge 2 ]"
"$root/scripts/server.sh" stop "$dir"
wait_event "$dir/events" 4 interrupted
eval "$("$root/scripts/server.sh" start "$server" "$dir")"
wait_event "$dir/events" 4 recovered
plug headset sim-headset
set +e; wait "$waiter"; wrc=$?; set -e
expect_eq "wait headset across a restart: exit 0 with the route, not exit 4" "0 headset" "$wrc $(cat "$dir/wait.out")"
expect_eq "wait headset across a restart: nothing on stderr" "" "$(cat "$dir/wait.err")"
unplug sim-headset
expect_eq "the watcher is still running" yes "$(kill -0 "$watcher" 2>/dev/null && echo yes || echo no)"
stop_watch
expect_eq "--apply ends with exit 0" 0 "$watch_rc"

echo "-- --mute-on-fallback mutes the speaker the route falls back to"
# The headset plugged and pulled under watch --apply --mute-on-fallback: the speaker, muted.
fall_back_muted() {
	plug headset sim-headset
	default_is sim-headset
	unplug sim-headset
	default_is sim-speaker
	wait_for "sim-speaker muted" sh -c '[ "$(pactl get-sink-mute sim-speaker)" = "Mute: yes" ]'
}
rc default speaker >/dev/null
set_default sim-speaker
start_watch watch --apply --mute-on-fallback --json
fall_back_muted
expect_eq "fallback to the speaker: muted" "Mute: yes" "$(pactl get-sink-mute sim-speaker)"
expect_eq "fallback to the speaker: query muted says so" yes "$(rc query muted)"
plug headset sim-headset
default_is sim-headset
wait_for "sim-speaker unmuted" sh -c '[ "$(pactl get-sink-mute sim-speaker)" = "Mute: no" ]'
expect_eq "the headset back: what routectl muted is unmuted" "Mute: no" "$(pactl get-sink-mute sim-speaker)"
unplug sim-headset
default_is sim-speaker
wait_for "sim-speaker muted again" sh -c '[ "$(pactl get-sink-mute sim-speaker)" = "Mute: yes" ]'
stop_watch
pactl set-sink-mute sim-earpiece 1
rc set earpiece --force >/dev/null
expect_eq "set --force: what routectl muted is unmuted" "Mute: no" "$(pactl get-sink-mute sim-speaker)"
expect_eq "set --force: what the user muted stays muted" "Mute: yes" "$(pactl get-sink-mute sim-earpiece)"
pactl set-sink-mute sim-earpiece 0
rc clear >/dev/null
pactl set-sink-mute sim-speaker 0

echo "-- --mute-on-fallback: set to the speaker it muted unmutes it; a speaker the user muted stays muted"
start_watch watch --apply --mute-on-fallback --json
fall_back_muted
rc set speaker >/dev/null
expect_eq "set speaker: the speaker routectl muted is unmuted" "Mute: no" "$(pactl get-sink-mute sim-speaker)"
rc clear >/dev/null
pactl set-sink-mute sim-speaker 1
plug headset sim-headset
wait_event "$dir/events" 2 route route=headset
unplug sim-headset
# The route event comes after the watcher's steps for the change, the mute among them.
wait_event "$dir/events" 2 route route=speaker reason=old-device-unavailable
expect_eq "a speaker the user muted: the fallback notes no mute of routectl's" no \
	"$([ -e "$XDG_RUNTIME_DIR/routectl/muted.json" ] && echo yes || echo no)"
plug headset sim-headset
wait_event "$dir/events" 3 route route=headset
expect_eq "a speaker the user muted stays muted when the headset comes back" "Mute: yes" "$(pactl get-sink-mute sim-speaker)"
unplug sim-headset
wait_event "$dir/events" 3 route route=speaker reason=old-device-unavailable
stop_watch
pactl set-sink-mute sim-speaker 0

echo "-- SIGHUP does not end watch --apply: it keeps applying the rules"
set_default sim-speaker
start_watch watch --apply --json
kill -HUP "$watcher"
plug headset sim-hup-headset
default_is sim-hup-headset
expect_eq "after SIGHUP: still running" yes "$(kill -0 "$watcher" 2>/dev/null && echo yes || echo no)"
expect_eq "after SIGHUP: the rules still applied" sim-hup-headset "$(pactl get-default-sink)"
stop_watch
expect_eq "after SIGHUP: SIGTERM still ends it with exit 0" 0 "$watch_rc"
unplug sim-hup-headset
set_default sim-speaker
run_rc sh -c "'$routectl' set speaker --force >/dev/full"
expect_rc "set >/dev/full: exit 1" 1
expect_eq "set >/dev/full: says why" "routectl: cannot write to standard output: No space left on device" "$err"
rc clear >/dev/null

echo "-- a playing stream moved with the route is no stop; a real stop is reported"
set_default sim-speaker
start_watch watch --apply --json
pacat --playback /dev/zero &
player=$!
wait_event "$dir/events" 1 engaged engaged=true
plug headset sim-stream-headset
default_is sim-stream-headset
wait_event "$dir/events" 1 route route=headset reason=new-device-available
unplug sim-stream-headset
default_is sim-speaker
wait_event "$dir/events" 1 route route=speaker reason=old-device-unavailable
settle
expect_eq "a stream moved with the route: no engaged false" 0 "$(events "$dir/events" engaged engaged=false)"
expect_eq "a stream moved with the route: no other-audio stopped" 0 "$(events "$dir/events" other-audio playing=false)"
kill "$player"; wait "$player" 2>/dev/null || true
wait_event "$dir/events" 1 engaged engaged=false || true
wait_event "$dir/events" 1 other-audio playing=false || true
expect_eq "the stream stopped: engaged false, once" 1 "$(events "$dir/events" engaged engaged=false)"
expect_eq "the stream stopped: other-audio stopped, once" 1 "$(events "$dir/events" other-audio playing=false)"
stop_watch

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
"$routectl" wait bluetooth --timeout 30 >/dev/null &
waiter=$!
sleep 0.3
kill -INT "$waiter"
set +e; wait "$waiter"; wrc=$?; set -e
expect_eq "wait interrupted by Ctrl-C: exit 130, not a timeout" 130 "$wrc"

echo "-- output that fails is said, and a slow reader never stops the policy"
run_rc sh -c "'$routectl' query >/dev/full"
expect_rc "query >/dev/full: exit 1" 1
expect_eq "query >/dev/full: says why" "routectl: cannot write to standard output: No space left on device" "$err"
run_rc sh -c "'$routectl' devices >/dev/full"
expect_eq "devices >/dev/full: exit 1" 1 "$rc"
set_default sim-speaker
# A reader that stops reading: watch --apply goes on applying the rules, drops what does not fit and
# says how much once the reader is back.
python3 - "$routectl" <<'PY' >"$dir/slow.out" 2>&1 || true
import json, os, subprocess, sys, time
watch = subprocess.Popen([sys.argv[1], "watch", "--apply", "--json"], stdout=subprocess.PIPE)
time.sleep(0.5)  # its initial event is in the pipe; now nobody reads
for i in range(1600):
    subprocess.run(["pactl", "set-default-sink", "sim-earpiece" if i % 2 == 0 else "sim-speaker"], check=True)
subprocess.run(["pactl", "load-module", "module-null-sink", "sink_name=sim-slow-headset",
                "sink_properties='device.form_factor=headphone device.bus=usb'"], check=True, stdout=subprocess.DEVNULL)
deadline = time.time() + 10
while time.time() < deadline:
    if subprocess.run(["pactl", "get-default-sink"], capture_output=True, text=True).stdout.strip() == "sim-slow-headset":
        break
    time.sleep(0.05)
print("default while blocked:", subprocess.run(["pactl", "get-default-sink"], capture_output=True, text=True).stdout.strip())
types = []
os.set_blocking(watch.stdout.fileno(), False)
end = time.time() + 5
buffer = b""
while time.time() < end:
    try:
        chunk = os.read(watch.stdout.fileno(), 1 << 16)
    except BlockingIOError:
        chunk = b""
        if any(t == "lost" for t in types):
            break
        # One more event, so that watch flushes what waited and says what it dropped.
        subprocess.run(["pactl", "set-default-sink", "sim-speaker"], check=True)
        time.sleep(0.1)
    buffer += chunk
    *lines, buffer = buffer.split(b"\n")
    types += [json.loads(l)["type"] for l in lines if l]
    counts = [json.loads(l).get("count") for l in lines if l and json.loads(l)["type"] == "lost"]
    if counts:
        print("lost count:", counts[0])
watch.terminate()
print("lost events:", types.count("lost"))
print("lines read:", len(types))
PY
expect_match "slow reader: the policy still moved the route to the new headset" "^default while blocked: sim-slow-headset$" "$(grep '^default while' "$dir/slow.out")"
expect_match "slow reader: one lost event once the reader is back" "^lost events: 1$" "$(grep '^lost events' "$dir/slow.out")"
expect_match "slow reader: it counts what was dropped" "^lost count: [1-9][0-9]*$" "$(grep '^lost count' "$dir/slow.out")"
pactl unload-module module-null-sink 2>/dev/null || true

summary
