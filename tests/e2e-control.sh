#!/usr/bin/env bash
# End-to-end tests of route control (set, clear, default, input, state files) on a private server.
#   tests/e2e-control.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
player=
before_cleanup() { [ -z "$player" ] || kill "$player" 2>/dev/null; }
e2e_setup control "${1:?usage: e2e-control.sh pulseaudio|pipewire [routectl]}" "${2:-}"
default_sink() { pactl get-default-sink; }
state="$XDG_STATE_HOME/routectl/state.json"
override="$XDG_RUNTIME_DIR/routectl/override.json"

echo "== $server: $(pactl info | sed -n 's/^Server Name: //p')"
plug speaker sim-speaker
plug earpiece sim-earpiece
pactl set-default-sink sim-speaker
wait_for "default sim-speaker" sh -c '[ "$(pactl get-default-sink)" = sim-speaker ]'

echo "-- set each target; the server's default sink follows"
run_rc rc set earpiece
expect_rc "set earpiece: exit 0" 0
expect_eq "set earpiece: pactl default" sim-earpiece "$(default_sink)"
expect_eq "set earpiece: route read back" "route     receiver" "$(printf '%s\n' "$out" | head -1)"
expect_eq "set earpiece: override recorded" earpiece "$(json_get override <"$override")"
expect_eq "set earpiece: the text names the default it falls back to" "default   speaker" "$(printf '%s\n' "$out" | grep '^default')"
run_rc rc set receiver --json
expect_eq "receiver is earpiece" earpiece "$(printf '%s' "$out" | json_get target)"
plug headset sim-headset
run_rc rc set headset
expect_eq "set headset: pactl default" sim-headset "$(default_sink)"
expect_rc "set headset: exit 0" 0

echo "-- a playing stream moves with the route"
paplay --raw --device=sim-headset </dev/zero &
player=$!
wait_for "a stream" sh -c 'pactl list short sink-inputs | grep -q .'
rc set speaker --force >/dev/null
speaker_index=$(pactl list short sinks | awk '$2 == "sim-speaker" {print $1}')
wait_for "stream on sim-speaker" sh -c "pactl list short sink-inputs | awk '{print \$2}' | grep -qx '$speaker_index'"
expect_eq "paplay's stream is on sim-speaker" "$speaker_index" "$(pactl list short sink-inputs | awk '{print $2}' | head -1)"
expect_fields_as_dumped "a stream on the forced speaker: every query field live as from a dump"
kill "$player"; wait "$player" 2>/dev/null || true; player=

echo "-- set does not fight an external device; --force does"
plug bluetooth sim-bluetooth
run_rc rc set bluetooth
expect_eq "set bluetooth: pactl default" sim-bluetooth "$(default_sink)"
run_rc rc set speaker --json
expect_rc "set speaker on bluetooth: exit 0" 0
expect_eq "set speaker on bluetooth: route stays" sim-bluetooth "$(default_sink)"
expect_eq "set speaker on bluetooth: applied false" false "$(printf '%s' "$out" | json_get applied)"
expect_eq "set speaker on bluetooth: reason" external-device-active "$(printf '%s' "$out" | json_get reason)"
expect_match "set speaker on bluetooth: the note names the device" "^routectl: note: bluetooth output 'sim-bluetooth' keeps priority" "$err"
expect_eq "set speaker on bluetooth: override recorded" speaker "$(json_get override <"$override")"
run_rc rc -q set speaker
expect_eq "-q silences the note" "" "$err"
run_rc rc set speaker --force
expect_rc "--force: exit 0" 0
expect_eq "--force: pactl default" sim-speaker "$(default_sink)"

echo "-- clear returns to the default"
rc default earpiece >/dev/null
rc set headset >/dev/null
run_rc rc clear --json
expect_eq "clear on a headset: the headset keeps priority" sim-headset "$(default_sink)"
expect_eq "clear on a headset: the note names a command that exists" \
	"routectl: note: headset output 'sim-headset' keeps priority; the earpiece target applies when it is disconnected ('routectl set earpiece --force' switches now)" "$err"
expect_eq "clear on a headset: applied false" false "$(printf '%s' "$out" | json_get applied)"
rc set speaker --force >/dev/null
run_rc rc clear
expect_rc "clear over a forced speaker: exit 0" 0
expect_eq "clear over a forced speaker: the most recent external device takes the sound (rule 1)" sim-bluetooth "$(default_sink)"
unplug sim-bluetooth
unplug sim-headset
rc set speaker --force >/dev/null
run_rc rc clear
expect_rc "clear: exit 0" 0
expect_eq "clear: pactl default is the default target" sim-earpiece "$(default_sink)"
expect_eq "clear: no override file" no "$([ -e "$override" ] && echo yes || echo no)"
expect_eq "clear: query override" none "$(rc query override)"
expect_eq "clear: query target" earpiece "$(rc query target)"
# With no override on disk there is nothing to check against the server: routectl's own state only.
for field in target override default; do
	strace -f -o "$dir/trace" -e trace=connect "$routectl" query "$field" >/dev/null
	expect_eq "query $field with no override on disk: the server is not asked" 0 "$(grep -c '^[0-9]* *connect(' "$dir/trace" || true)"
done
rc default speaker >/dev/null

echo "-- plugging or unplugging an external device clears the override, with no watcher"
rc set speaker --force >/dev/null
expect_eq "override set" speaker "$(rc query override)"
plug headset sim-headset2
run_rc rc query override
expect_eq "after plug: override gone" none "$out"
expect_eq "after plug: said once" "routectl: note: override 'speaker' cleared: 'sim-headset2' was connected" "$err"
run_rc rc query override
expect_eq "after plug: not said twice" "" "$err"
rc set earpiece >/dev/null
unplug sim-headset2
run_rc rc query override
expect_eq "after unplug: override gone" none "$out"
expect_match "after unplug: says why" "'sim-headset2' was disconnected" "$err"
# query route reads the default sink alone when no override is on disk; with one, every output,
# to check it first.
rc set speaker --force >/dev/null
plug headset sim-headset3
run_rc rc query route
expect_eq "query route with a stale override: the note" "routectl: note: override 'speaker' cleared: 'sim-headset3' was connected" "$err"
expect_eq "query route with a stale override: the file is gone" no "$([ -e "$override" ] && echo yes || echo no)"
expect_eq "query route: the same route as the full status" "$(rc query | awk '$1 == "route" {print $2}')" "$(rc query route)"
expect_eq "query sink: the same sink as the full status" "$(rc query | awk '$1 == "sink" {print $2}')" "$(rc query sink)"
expect_fields_as_dumped "three outputs, no override: every query field live as from a dump"
unplug sim-headset3

echo "-- earpiece where there is none: recorded, falls back to the speaker, exit 3"
pactl set-default-sink sim-speaker
unplug sim-earpiece
run_rc rc set earpiece --json
expect_rc "no receiver: exit 3" 3
expect_eq "no receiver: route speaker" speaker "$(printf '%s' "$out" | json_get route)"
expect_eq "no receiver: fell_back" true "$(printf '%s' "$out" | json_get fell_back)"
expect_eq "no receiver: recorded" earpiece "$(json_get override <"$override")"
expect_eq "no receiver: pactl default" sim-speaker "$(default_sink)"
run_rc rc default earpiece
plug earpiece sim-earpiece

echo "-- a target the server cannot reach: exit 1, state unchanged"
cp "$override" "$dir/override.before"
run_rc rc set headset --device no-such-thing
expect_rc "unknown device: exit 1" 1
expect_eq "unknown device: the line" "routectl: no headset output named 'no-such-thing' (see 'routectl devices')" "$err"
expect_eq "unknown device: override unchanged" same "$(cmp -s "$override" "$dir/override.before" && echo same || echo changed)"
run_rc rc set headset --device sim-speaker
expect_rc "a device of another kind: exit 1" 1
expect_eq "a device of another kind: the line says its kind" \
	"routectl: 'sim-speaker' is a speaker output, not a headset one; set headset --device takes a headset output ('routectl devices' shows each output's kind)" "$err"
expect_eq "a device of another kind: override unchanged" same "$(cmp -s "$override" "$dir/override.before" && echo same || echo changed)"

echo "-- no server: exit 4, nothing recorded"
run_rc env PULSE_SERVER="unix:$dir/nothing" "$routectl" --timeout 1 set headset
expect_rc "set without server: exit 4" 4
expect_eq "set without server: override unchanged" same "$(cmp -s "$override" "$dir/override.before" && echo same || echo changed)"
run_rc env PULSE_SERVER="unix:$dir/nothing" "$routectl" --timeout 1 clear
expect_rc "clear without server: exit 4" 4
expect_eq "clear without server: override kept" yes "$([ -e "$override" ] && echo yes || echo no)"
run_rc env PULSE_SERVER="unix:$dir/nothing" "$routectl" --timeout 1 input set x
expect_rc "input set without server: exit 4" 4
run_rc env PULSE_SERVER="unix:$dir/nothing" "$routectl" default speaker
expect_eq "default needs no server" 0 "$rc"
expect_eq "default recorded" speaker "$(json_get default <"$state")"

echo "-- inputs: the preferred input is set on the server and remembered"
pactl load-module module-remap-source master=sim-speaker.monitor source_name=sim-mic source_properties=device.description=sim-mic >/dev/null
wait_for "source sim-mic" sh -c 'pactl list short sources | grep -q sim-mic'
run_rc rc input list
expect_match "input list shows sim-mic" ' sim-mic +sim-mic$' "$out"
expect_eq "input list hides monitors" 0 "$(printf '%s\n' "$out" | grep -c '\.monitor' || true)"
run_rc rc input set sim-mic
expect_rc "input set: exit 0" 0
expect_eq "input set: pactl default source" sim-mic "$(pactl get-default-source)"
expect_eq "input set: remembered" sim-mic "$(json_get preferred_input <"$state")"
run_rc rc input set sim-mik
expect_rc "input set unknown: exit 1" 1
expect_eq "input set unknown: the line" "routectl: No input named 'sim-mik'. Did you mean 'sim-mic'? See 'routectl input list'." "$err"
rc input clear >/dev/null
rc default speaker >/dev/null
# Writers of different fields at once: without the lock one read-modify-write would undo another.
pids=()
for i in $(seq 1 20); do rc default earpiece >/dev/null 2>&1 & pids+=($!); done
rc input set sim-mic >/dev/null 2>&1 & pids+=($!)
for i in $(seq 1 20); do rc default earpiece >/dev/null 2>&1 & pids+=($!); done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
expect_eq "concurrent default and input set: all succeeded" 0 "$bad"
expect_eq "concurrent default and input set: the default stands" earpiece "$(json_get default <"$state")"
expect_eq "concurrent default and input set: the preferred input was not lost" sim-mic "$(json_get preferred_input <"$state")"
run_rc rc input clear
expect_eq "input clear: forgotten" null "$(json_get preferred_input <"$state")"
rc default speaker >/dev/null

echo "-- 50 concurrent set/default invocations leave valid state files"
pids=()
for i in $(seq 1 50); do
	case $((i % 4)) in
	0) rc set speaker --force ;; 1) rc default earpiece ;; 2) rc set earpiece ;; 3) rc default speaker ;;
	esac >/dev/null 2>&1 &
	pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || case $? in 3) ;; *) bad=$((bad + 1)) ;; esac; done
expect_eq "concurrent: every invocation succeeded" 0 "$bad"
expect_match "concurrent: state.json valid" '^(speaker|earpiece)$' "$(json_get default <"$state")"
expect_match "concurrent: override.json valid" '^(speaker|earpiece)$' "$(json_get override <"$override")"
expect_eq "concurrent: no temporary files left" "" "$(ls -A "$XDG_STATE_HOME/routectl" "$XDG_RUNTIME_DIR/routectl" | grep '^\.' || true)"

echo "-- a route lock another routectl keeps (stopped with Ctrl-Z): set waits twice --timeout, then fails"
lockfile=$XDG_RUNTIME_DIR/routectl/override.json.lock
before=$(cat "$override" 2>/dev/null || echo none)
# (-o: flock's own lock, let go as it is killed.)
flock -o "$lockfile" sleep 30 &
locker=$!
wait_for "the route lock held" sh -c "! flock -n '$lockfile' true"
began=$(date +%s%3N)
run_rc rc --timeout 1 set speaker --force
took=$(( $(date +%s%3N) - began ))
expect_rc "set behind a stuck lock: exit 1" 1
expect_eq "set behind a stuck lock: the error names the lock" \
	"routectl: $lockfile: held by another routectl for over 6 s (stopped with Ctrl-Z?)" "$err"
expect_eq "set behind a stuck lock: it waited 6 s (twice --timeout, at least 6 s), not for good" yes \
	"$([ "$took" -ge 6000 ] && [ "$took" -lt 9000 ] && echo yes || echo "no: $took ms")"
expect_eq "set behind a stuck lock: the override as it was" "$before" "$(cat "$override" 2>/dev/null || echo none)"
# The holder lets go during the wait: the command goes at once.
( sleep 1; kill "$locker" ) &
letgo=$!
began=$(date +%s%3N)
run_rc rc --timeout 1 set speaker --force
took=$(( $(date +%s%3N) - began ))
expect_rc "set behind a lock let go after 1 s: exit 0" 0
expect_eq "set behind a lock let go after 1 s: done as it was free" yes \
	"$([ "$took" -ge 900 ] && [ "$took" -lt 3000 ] && echo yes || echo "no: $took ms")"
wait "$letgo" "$locker" 2>/dev/null || true

echo "-- Ctrl-C while set or clear changes the route: carried through, and said"
# The signal goes the moment the intent appears (written once connected, before the server is asked),
# so it lands mid-change; a change that never comes sends none, and the check fails.
cat >"$dir/interrupt.py" <<'PY'
import os, signal, subprocess, sys, time
intent = os.path.join(os.environ["XDG_RUNTIME_DIR"], "routectl", "intent.json")
def inode():
    try:
        return os.stat(intent).st_ino
    except FileNotFoundError:
        return None
before = inode()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
deadline = time.monotonic() + 5
while inode() == before and child.poll() is None and time.monotonic() < deadline:
    pass
sent = child.poll() is None and inode() != before
if sent:
    child.send_signal(signal.SIGINT)
err = child.communicate()[1]
print(child.returncode, "signalled" if sent else "not signalled")
print(err.strip())
PY
note="routectl: note: Ctrl-C (SIGINT) came while the change was being made; it was carried through"
# interrupt RESET COMMAND...: the command, interrupted mid-change. The signal has the few milliseconds
# the change takes to land in; on a loaded 2-core machine the script watching for the intent can be
# scheduled too late and send none ("not signalled": nothing was tested, seen once in CI). Then
# RESET puts the state back and the command is tried again, up to 5 times; the checks judge the last.
interrupt() {
	local reset=$1 i
	shift
	for i in 1 2 3 4 5; do
		python3 "$dir/interrupt.py" "$routectl" "$@" >"$dir/int.txt"
		[ "$(sed -n 1p "$dir/int.txt" | cut -d' ' -f2)" = signalled ] && return 0
		$reset >/dev/null
	done
}
rc default speaker >/dev/null
rc set speaker --force >/dev/null
interrupt "rc set speaker --force" set earpiece --force
expect_eq "Ctrl-C during set: carried through (exit 0)" "0 signalled" "$(sed -n 1p "$dir/int.txt")"
expect_eq "Ctrl-C during set: it says so" "$note" "$(sed -n 2p "$dir/int.txt")"
expect_eq "Ctrl-C during set: pactl default" sim-earpiece "$(default_sink)"
expect_eq "Ctrl-C during set: override recorded" earpiece "$(json_get override <"$override")"
interrupt "rc set earpiece --force" clear
expect_eq "Ctrl-C during clear: carried through (exit 0)" "0 signalled" "$(sed -n 1p "$dir/int.txt")"
expect_eq "Ctrl-C during clear: it says so" "$note" "$(sed -n 2p "$dir/int.txt")"
expect_eq "Ctrl-C during clear: override gone" no "$([ -e "$override" ] && echo yes || echo no)"
expect_eq "Ctrl-C during clear: pactl default is the default target's" sim-speaker "$(default_sink)"
echo "-- a corrupt state file: exit 5, named, left byte for byte"
printf '{"default": "speak' >"$state"
cp "$state" "$dir/state.corrupt"
for args in "default earpiece" "set speaker" "query" "default"; do
	# shellcheck disable=SC2086
	run_rc rc $args
	expect_rc "corrupt state, '$args': exit 5" 5
	expect_match "corrupt state, '$args': names the path" "^routectl: $state: " "$err"
	expect_eq "corrupt state, '$args': file unchanged" same "$(cmp -s "$state" "$dir/state.corrupt" && echo same || echo changed)"
done
rm "$state"
printf 'garbage' >"$override"
run_rc rc set speaker
expect_rc "corrupt override: exit 5" 5
expect_eq "corrupt override: unchanged" garbage "$(cat "$override")"
run_rc rc clear
expect_rc "clear over a corrupt override: exit 0 (removing it is what clear does)" 0
expect_match "clear over a corrupt override: says so" "^routectl: note: removed an unreadable override" "$err"
expect_eq "clear over a corrupt override: gone" no "$([ -e "$override" ] && echo yes || echo no)"

echo "-- directories are private; a runtime dir of another user is refused"
expect_eq "state dir is 0700" 700 "$(stat -c %a "$XDG_STATE_HOME/routectl")"
expect_eq "runtime dir is 0700" 700 "$(stat -c %a "$XDG_RUNTIME_DIR/routectl")"
mkdir -p "$dir/other-run" && chown 65534 "$dir/other-run"
run_rc env XDG_RUNTIME_DIR="$dir/other-run" "$routectl" set speaker
expect_rc "foreign runtime dir: exit 5" 5
expect_match "foreign runtime dir: says whose" "^routectl: $dir/other-run: the runtime directory belongs to uid 65534" "$err"
expect_eq "foreign runtime dir: nothing written" "" "$(ls -A "$dir/other-run")"

summary
