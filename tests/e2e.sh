#!/usr/bin/env bash
# End-to-end tests: the built routectl against a private server with simulated devices (DESIGN.md §6).
#   tests/e2e.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
player=
before_cleanup() { [ -z "$player" ] || kill "$player" 2>/dev/null; }
e2e_setup e2e "${1:?usage: e2e.sh pulseaudio|pipewire [routectl]}" "${2:-}"

echo "== $server: $(pactl info | sed -n 's/^Server Name: //p')"
for kind in speaker earpiece headset bluetooth hdmi; do
	"$root/scripts/server.sh" plug "$dir" "$kind" "sim-$kind"
done
wait_for "five sinks" sh -c '[ "$(pactl list short sinks | grep -c sim-)" = 5 ]'

echo "-- each kind made the default sink reports its route"
for pair in speaker:speaker earpiece:receiver headset:headset bluetooth:bluetooth hdmi:unknown; do
	kind=${pair%%:*} route=${pair#*:}
	pactl set-default-sink "sim-$kind"
	wait_for "default sink sim-$kind" default_is "sim-$kind"
	run_rc rc query route
	expect_eq "$kind: query route" "$route" "$out"
	expect_rc "$kind: query route exits 0" 0
	run_rc rc query
	expect_eq "$kind: status line" "route        $route" "$(printf '%s\n' "$out" | head -1)"
	expect_eq "$kind: status names the sink" "sink         sim-$kind" "$(printf '%s\n' "$out" | grep '^sink ')"
	run_rc rc --json query
	expect_eq "$kind: --json route" "$route" "$(printf '%s' "$out" | json_get route)"
	expect_eq "$kind: --json output.sink" "sim-$kind" "$(printf '%s' "$out" | json_get output.sink)"
	case $route in bluetooth | headset) external=yes ;; *) external=no ;; esac
	expect_eq "$kind: query external" "$external" "$(rc query external)"
done

echo "-- options may stand before or after the command, as --opt=value or --opt value"
expect_same "query --json == --json query" rc --json query -- rc query --json
expect_same "--timeout=2 and --timeout 2" rc --timeout=2 query route -- rc query route --timeout 2
expect_same "routectl alone is query" rc query -- rc
expect_eq "query FIELD --json" '{"route":"unknown"}' "$(rc query route --json)"
echo "-- every row of the full status is a field, by its row name and by its JSON key"
for row in $(rc query | awk '{print $1}'); do
	run_rc rc query "$row"
	expect_rc "query $row: exit 0" 0
	expect_eq "query $row: the full status's value" "$(rc query | awk -v r="$row" '$1 == r {sub(/^[^ ]+ +/, ""); print}')" "$out"
done
for key in $(rc --json query | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)))'); do
	run_rc rc --json query "$key"
	expect_rc "query $key (JSON key): exit 0" 0
	expect_eq "query $key --json: the full object's member" \
		"$(rc --json query | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[sys.argv[1]]))' "$key")" \
		"$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.dumps(list(json.load(sys.stdin).values())[0]))')"
done

echo "-- availability and server"
expect_eq "bluetooth available" yes "$(rc query bluetooth)"
expect_eq "receiver available" yes "$(rc query receiver)"
expect_eq "--json available.headset" true "$(rc --json query | json_get available.headset)"
if [ "$server" = pipewire ]; then
	expect_match "server is PipeWire, by its own version" '^server +pipewire [0-9]+\.[0-9]+\.[0-9]+ \(' "$(rc query | grep '^server')"
	expect_eq "--json server.pipewire" true "$(rc --json query | json_get server.pipewire)"
else
	expect_match "server is PulseAudio" '^server +pulseaudio [0-9]' "$(rc query | grep '^server')"
	expect_eq "--json server.pipewire" false "$(rc --json query | json_get server.pipewire)"
fi

echo "-- engaged: a stream playing on the route"
pactl set-default-sink sim-speaker
wait_for "default sink sim-speaker" default_is sim-speaker
expect_eq "idle: engaged no" no "$(rc query engaged)"
paplay --raw --device=sim-speaker </dev/zero &
player=$!
wait_for "a playing stream" sh -c 'pactl list short sink-inputs | grep -q .'
wait_for "engaged yes" sh -c "[ \"\$('$routectl' query engaged)\" = yes ]"
expect_eq "playing: engaged yes" yes "$(rc query engaged)"
expect_eq "playing: other_audio_playing" true "$(rc --json query | json_get other_audio_playing)"
expect_eq "playing: query other_audio (the field reads the streams too)" yes "$(rc query other_audio)"
expect_eq "playing: --json query other_audio_playing keeps its key" '{"other_audio_playing":true}' "$(rc --json query other_audio_playing)"
expect_eq "playing: --json query other_audio has the same key (keys are never renamed)" '{"other_audio_playing":true}' "$(rc --json query other_audio)"
kill "$player"; wait "$player" 2>/dev/null || true; player=

echo "-- devices lists every output with its kind, and marks the active one"
run_rc rc devices
for pair in speaker:speaker earpiece:receiver headset:headset bluetooth:bluetooth hdmi:unknown; do
	kind=${pair%%:*} route=${pair#*:}
	expect_match "devices: sim-$kind is $route" "^[ *] +$route +yes +no +sim-$kind " "$out"
done
expect_match "devices: the active one is starred" '^\* +speaker +yes +no +sim-speaker ' "$out"
run_rc rc --json devices
expect_eq "devices --json: outputs" 5 "$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["outputs"]))')"
expect_eq "devices --json: no monitor among inputs" 0 "$(printf '%s' "$out" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["inputs"]))')"
expect_eq "devices --json: active output" sim-speaker "$(printf '%s' "$out" | python3 -c 'import json,sys; print([o["sink"] for o in json.load(sys.stdin)["outputs"] if o["active"]][0])')"

echo "-- dump read back through --snapshot gives the same status"
pactl set-default-sink sim-bluetooth
wait_for "default sink sim-bluetooth" default_is sim-bluetooth
rc dump >"$dir/dump.json"
expect_eq "dump is one JSON object" sim-bluetooth "$(json_get server.default_sink_name <"$dir/dump.json")"
expect_same "--snapshot query" rc query -- rc --snapshot "$dir/dump.json" query
expect_same "--snapshot --json query" rc --json query -- rc --snapshot "$dir/dump.json" --json query
expect_same "--snapshot devices" rc devices -- rc --snapshot "$dir/dump.json" devices
expect_same "--snapshot dump is the dump" cat "$dir/dump.json" -- rc --snapshot "$dir/dump.json" dump
LC_ALL=C pactl -f json list >"$dir/pactl.json"
python3 - "$dir/pactl.json" <<'PY'
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
d["server"] = json.loads(subprocess.check_output(["pactl", "-f", "json", "info"], env={"LC_ALL": "C", **__import__("os").environ}))
json.dump(d, open(sys.argv[1], "w"))
PY
expect_same "a pactl dump with server added is a snapshot" rc query route -- rc --snapshot "$dir/pactl.json" query route
printf '{"server": ' >"$dir/bad.json"
run_rc rc --snapshot "$dir/bad.json" query
expect_rc "corrupt snapshot: exit 1" 1
expect_match "corrupt snapshot: names the file" "^routectl: '$dir/bad.json' is not a routectl snapshot: " "$err"

echo "-- bad words: exit 2, one line, before any connection"
for case in "qury|Unknown command 'qury'. Did you mean 'query'?" \
	"--jsn|Unknown option '--jsn'. Did you mean '--json'?" \
	"query rout|The value 'rout' is invalid for '<field>'. Did you mean 'route'?" \
	"--timeout abc|The value 'abc' is invalid for '--timeout': expected seconds, a number above 0 and at most 86400." \
	"--timeout 86401|The value '86401' is invalid for '--timeout': expected seconds, a number above 0 and at most 86400." \
	"--timeout 0x10|The value '0x10' is invalid for '--timeout': expected seconds, a number above 0 and at most 86400." \
	"query --timeout|Missing value for '--timeout'." \
	"watch --apply --hold-down 0x2|The value '0x2' is invalid for '--hold-down': expected seconds, 0 to 3600." \
	"--json=1|Option '--json' takes no value." \
	"devices extra|Unexpected argument 'extra' for 'devices'." \
	"set loud|The value 'loud' is invalid for '<target>': expected speaker, earpiece, receiver, bluetooth or headset." \
	"set spekaer|The value 'spekaer' is invalid for '<target>': expected speaker, earpiece, receiver, bluetooth or headset. Did you mean 'speaker'?" \
	"set|Missing value for '<target>'." \
	"default bluetooth|The value 'bluetooth' is invalid for 'default': expected speaker or earpiece." \
	"query --force|Option '--force' does not apply to 'query'." \
	"input lst|The value 'lst' is invalid for 'input': expected list, set, clear or mute. Did you mean 'list'?" \
	"input frob|The value 'frob' is invalid for 'input': expected list, set, clear or mute." \
	"priority frob|The value 'frob' is invalid for 'priority': expected list, set or clear." \
	"wait loud|The value 'loud' is invalid for '<route>': expected speaker, receiver, bluetooth, headset or unknown." \
	"completions tcsh|The value 'tcsh' is invalid for '<shell>': expected bash, zsh or fish." \
	"--snapshot x set speaker|'set' changes the server or routectl's state; --snapshot is for read-only commands." \
	"--snapshot x default earpiece|'default earpiece' changes the server or routectl's state; --snapshot is for read-only commands." \
	"--snapshot x input clear|'input clear' changes the server or routectl's state; --snapshot is for read-only commands." \
	"--snapshot x watch|'watch' follows a live server; --snapshot is a file, read once." \
	"--snapshot x wait speaker|'wait' follows a live server; --snapshot is a file, read once." \
	"--force|Option '--force' needs a command ('set')." \
	"qeury|Unknown command 'qeury'. Did you mean 'query'?" \
	"set headphone|The value 'headphone' is invalid for '<target>': expected speaker, earpiece, receiver, bluetooth or headset. Did you mean 'headset'?" \
	"query other_audio_playng|The value 'other_audio_playng' is invalid for '<field>'. Did you mean 'other_audio_playing'?"; do
	args=${case%%|*} message=${case#*|}
	# shellcheck disable=SC2086
	run_rc env PULSE_SERVER="unix:$dir/blackhole" "$routectl" $args
	expect_rc "'$args': exit 2" 2
	expect_eq "'$args': the line" "routectl: $message See 'routectl --help'." "$err"
	expect_eq "'$args': nothing on stdout" "" "$out"
done

# Malformed ids (DESIGN.md §1) wherever an id is taken: exit 2 before any connection, shown escaped.
for args in "set headset --device" "input set"; do
	# shellcheck disable=SC2086
	run_rc env PULSE_SERVER="unix:$dir/blackhole" "$routectl" $args ""
	expect_rc "'$args \"\"': exit 2" 2
	expect_eq "'$args \"\"': the line" "routectl: The id '' is malformed: an id is 1 to 1024 bytes without control characters. See 'routectl --help'." "$err"
	# shellcheck disable=SC2086
	run_rc env PULSE_SERVER="unix:$dir/blackhole" "$routectl" $args "$(printf 'x\033[31mred')"
	expect_rc "'$args' with an escape sequence: exit 2" 2
	expect_eq "'$args' with an escape sequence: the line, escaped" "routectl: The id 'x\\x1b[31mred' is malformed: an id is 1 to 1024 bytes without control characters. See 'routectl --help'." "$err"
	# shellcheck disable=SC2086
	run_rc env PULSE_SERVER="unix:$dir/blackhole" "$routectl" $args "$(printf 'x\302\233red')"
	expect_rc "'$args' with a C1 control (CSI): exit 2" 2
done
long=$(head -c 16000 /dev/zero | tr '\0' a)
run_rc "$routectl" --server "$long" query
expect_rc "a 16,000-byte --server: exit 2, not libpulse's abort" 2
expect_eq "a 16,000-byte --server: one line" "routectl: The value for '--server' is invalid: a server address is at most 1024 bytes, without control characters. See 'routectl --help'." "$err"

echo "-- every JSON key routectl prints is documented in routectl(1)"
json_section=$(sed -n '/^\.SH JSON/,/^\.SH EXIT STATUS/p' "$root/man/routectl.1" | grep '^\.B' | tr -d '\\')
for source in "--json query" "--json devices" "--json input list" "--json set speaker" "--json default"; do
	# shellcheck disable=SC2086
	for key in $(rc $source 2>/dev/null | python3 -c '
import json, sys
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            yield k
            if k != "available": yield from walk(x)
    elif isinstance(v, list):
        for x in v: yield from walk(x)
print(" ".join(sorted(set(walk(json.load(sys.stdin))))))'); do
		if printf '%s\n' "$json_section" | grep -qE "(^|[ \"])$key([ \",]|$)"; then ok "routectl $source: '$key' documented"; else
			not_ok "routectl $source: '$key' is not in routectl(1)'s JSON section"
		fi
	done
done
rc clear >/dev/null 2>&1 || true

echo "-- tables: cut to a narrow terminal, whole lines in a pipe"
narrow=$(script -qc "stty cols 60; '$routectl' --snapshot '$root/Tests/RoutingTests/Fixtures/sim/pulseaudio-all.json' devices" /dev/null | tr -d '\r')
expect_match "a 60-column terminal: long descriptions end in an ellipsis" "Speaker…$" "$(printf '%s\n' "$narrow" | grep 'analog-output-speaker ')"
expect_match "a pipe: the whole description" "Speakers \(Built-in Audio\)$" \
	"$(rc --snapshot "$root/Tests/RoutingTests/Fixtures/sim/pulseaudio-all.json" devices | grep 'analog-output-speaker ')"
# A device's description with a terminal's escape and bell in it: escaped in tables and query values.
evil=$(pactl load-module module-null-sink sink_name=sim-evil "sink_properties=device.description='Evil$(printf '\033')[31mRED$(printf '\a')'")
wait_for "the sink with an escape in its description" sh -c "'$routectl' devices | grep -q sim-evil"
expect_match "devices: a description's control characters escaped" ' sim-evil +Evil\\x1b\[31mRED\\x07$' "$(rc devices | grep ' sim-evil ')"
pactl set-default-sink sim-evil
wait_for "sim-evil the default" sh -c '[ "$(pactl get-default-sink)" = sim-evil ]'
expect_eq "query description: control characters escaped" 'Evil\x1b[31mRED\x07' "$(rc query description)"
pactl unload-module "$evil"
wait_for "sim-evil gone" sh -c "! pactl list short sinks | grep -q sim-evil"
current=$(rc query route)
run_rc rc --json wait "$current" --timeout 1
expect_eq "wait --json: one JSON object" "{\"route\":\"$current\"}" "$out"

echo "-- --snapshot answers from the dump alone, live state untouched"
rc default earpiece >/dev/null
rc dump >"$dir/state-dump.json"
expect_eq "dump carries routectl's state" earpiece "$(json_get routectl.default <"$dir/state-dump.json")"
rc default speaker >/dev/null
expect_eq "--snapshot default: the dump's" earpiece "$(rc --snapshot "$dir/state-dump.json" default)"
expect_eq "--snapshot query default: the dump's" earpiece "$(rc --snapshot "$dir/state-dump.json" query default)"
expect_eq "the live default is untouched" speaker "$(rc default)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["routectl"]; json.dump(d, open(sys.argv[2], "w"))' \
	"$dir/state-dump.json" "$dir/plain-dump.json"
expect_eq "--snapshot of a plain pactl-shaped dump: routectl's defaults" speaker "$(rc --snapshot "$dir/plain-dump.json" query target)"

echo "-- routectl's own state needs no server"
for field in override default target; do
	run_rc env PULSE_SERVER="unix:$dir/nothing-here" "$routectl" --timeout 1 query "$field"
	expect_rc "no server: query $field: exit 0" 0
	expect_eq "no server: query $field: the stored value" "$(rc query "$field")" "$out"
done

echo "-- no server: exit 4 within the timeout"
start=$(date +%s%N)
run_rc env PULSE_SERVER="unix:$dir/nothing-here" "$routectl" --timeout 1 query
expect_rc "refused: exit 4" 4
expect_match "refused: one line with a hint" '^routectl: Connection failure: Connection refused\. Is a PulseAudio or PipeWire server running\?' "$err"
expect_eq "refused: one line" 1 "$(printf '%s\n' "$err" | wc -l)"
# A socket that accepts and never answers: only the timeout ends the wait.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); time.sleep(30)' "$dir/blackhole" &
hole=$!
wait_for "the silent socket" test -S "$dir/blackhole"
start=$(date +%s%N)
run_rc env PULSE_SERVER="unix:$dir/blackhole" "$routectl" --timeout 0.5 query
elapsed=$((($(date +%s%N) - start) / 1000000))
kill "$hole"
expect_rc "silent server: exit 4" 4
expect_match "silent server: says it timed out, and after how long" '^routectl: Connection failure: Timeout: no answer within 0\.5 s\. Is a PulseAudio' "$err"
if [ "$elapsed" -lt 2000 ]; then ok "silent server: gave up after ${elapsed} ms (timeout 0.5 s)"; else not_ok "silent server: took ${elapsed} ms"; fi

# A --timeout too short for any server: the message says what ran out (the server is there).
run_rc "$routectl" --timeout 1e-6 query
expect_rc "--timeout 1e-6 with a server: exit 4" 4
expect_eq "--timeout 1e-6: one line naming the timeout" \
	"routectl: Connection failure: Timeout: no answer within 1e-06 s. Is a PulseAudio or PipeWire server running? (try --server or PULSE_SERVER, or a longer --timeout)" "$err"

echo "-- help and version"
expect_same "-h, --help and help print the same" rc --help -- rc -h
expect_same "help == --help" rc --help -- rc help
expect_same "help query == query --help" rc help query -- rc query --help
expect_eq "help --json lists every command the text lists" \
	"$(rc help | sed -n '/^COMMANDS:/,/^$/p' | awk 'NF && !/COMMANDS/ {print $1}' | sort | tr '\n' ' ')" \
	"$(rc help --json | python3 -c 'import json,sys; print(" ".join(sorted(c["name"] for c in json.load(sys.stdin)["commands"])), end=" ")')"
expect_eq "help call --json: its options" speaker "$(rc --json help call | json_get options.0.name)"
expect_eq "help --json: exit status 130" "interrupted (Ctrl-C) before done" "$(rc help --json | json_get exit_statuses.130)"
expect_match "--version names libpulse" '^routectl [0-9.]+ \(libpulse: compiled with [0-9.]+, linked with [0-9.]+\)$' "$(rc --version)"

summary
