#!/usr/bin/env bash
# End-to-end tests of the state files (DESIGN.md §4): hostile files in their place, private
# directories, versions, unknown keys, XDG rules, concurrent writers.
#   tests/e2e-state.sh pulseaudio|pipewire [ROUTECTL]
# Commands that need no server run with PULSE_SERVER pointing nowhere, so they prove they do not.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
watcher=
before_cleanup() { [ -z "$watcher" ] || kill "$watcher" 2>/dev/null; }
e2e_setup state "${1:?usage: e2e-state.sh pulseaudio|pipewire [routectl]}" "${2:-}"
state_dir="$XDG_STATE_HOME/routectl"
state="$state_dir/state.json"
run_dir="$XDG_RUNTIME_DIR/routectl"
override="$run_dir/override.json"
outside="$dir/outside"
mkdir -p "$outside"
# offline CMD...: routectl with no server reachable.
offline() { PULSE_SERVER="unix:$dir/no-server" "$routectl" "$@"; }
# fresh: no state at all, as on a first run.
fresh() { chmod -R u+w "$state_dir" "$run_dir" 2>/dev/null || true; rm -rf "$state_dir" "$run_dir"; }
# sum FILE: a checksum to compare a file before and after.
sum() { sha256sum "$1" | cut -d' ' -f1; }

echo "== $server: $(pactl info | sed -n 's/^Server Name: //p')"
plug speaker sim-speaker
plug earpiece sim-earpiece

echo "-- a symlink in place of state.json is refused, and its target left alone"
fresh; mkdir -p "$state_dir"
printf '{"version":1,"default":"speaker"}\n' >"$outside/target.json"
before=$(sum "$outside/target.json")
ln -s "$outside/target.json" "$state"
run_rc timeout 5 "$routectl" default earpiece
expect_rc "symlinked state.json: default earpiece exits 5" 5
expect_match "symlinked state.json: the message names the path" "$state" "$err"
expect_eq "symlinked state.json: the target is untouched" "$before" "$(sum "$outside/target.json")"
expect_eq "symlinked state.json: still a symlink" yes "$([ -L "$state" ] && echo yes || echo no)"
run_rc timeout 5 "$routectl" default
expect_rc "symlinked state.json: reading it exits 5 too" 5

echo "-- a symlinked lock is refused"
fresh; mkdir -p "$state_dir"; chmod 700 "$state_dir"
ln -s "$outside/lock-target" "$state.lock"
run_rc timeout 5 "$routectl" default earpiece
expect_rc "symlinked state.json.lock: exit 5" 5
expect_match "symlinked state.json.lock: the message names it" "state.json.lock" "$err"
expect_eq "symlinked state.json.lock: nothing created through it" no "$([ -e "$outside/lock-target" ] && echo yes || echo no)"

echo "-- a FIFO in place of override.json: an error at once, never a hang"
fresh; mkdir -p -m 700 "$run_dir"
mkfifo "$override"
run_rc timeout 5 "$routectl" query override
expect_rc "FIFO override.json: query override exits 5 (not 124, a hang)" 5
expect_match "FIFO override.json: the message names the path" "$override" "$err"
run_rc timeout 5 "$routectl" query
expect_rc "FIFO override.json: query exits 5" 5

echo "-- /dev/zero or a huge file in place of state.json: bounded, exit 5"
fresh; mkdir -p -m 700 "$state_dir"
ln -s /dev/zero "$state"
run_rc timeout 5 "$routectl" default
expect_rc "state.json -> /dev/zero: exit 5" 5
rm "$state"
# Valid JSON, 2 MiB of it: the limit, not the parser, refuses it.
python3 -c 'import sys; sys.stdout.write("{\"version\":1,\"default\":\"speaker\",\"pad\":\"" + "x" * (2 << 20) + "\"}\n")' >"$state"
run_rc timeout 5 "$routectl" default
expect_rc "a 2 MiB state.json: exit 5" 5
expect_match "a 2 MiB state.json: says it is too large" "too large|larger" "$err"
mkfifo "$outside/fifo.json"
run_rc timeout 5 "$routectl" --snapshot "$outside/fifo.json" query
expect_eq "--snapshot FIFO: fails at once (not 124, a hang)" 1 "$rc"
run_rc timeout 5 "$routectl" --snapshot /dev/zero query
expect_eq "--snapshot /dev/zero: fails at once" 1 "$rc"
expect_match "--snapshot /dev/zero: names the file" "/dev/zero" "$err"
fresh
"$routectl" dump >"$outside/dump.json"
ln -s "$outside/dump.json" "$outside/dump-link.json"
run_rc timeout 5 "$routectl" --snapshot "$outside/dump-link.json" query route
expect_rc "--snapshot through a symlink the user chose still works" 0

echo "-- a runtime dir others can write to, or someone else's, is refused"
fresh; mkdir -p "$run_dir"; chmod 0777 "$run_dir"
run_rc timeout 5 "$routectl" query
expect_rc "0777 runtime dir: query exits 5" 5
expect_match "0777 runtime dir: the message names it" "$run_dir" "$err"
run_rc timeout 5 "$routectl" set speaker
expect_rc "0777 runtime dir: set exits 5" 5
chmod 0700 "$run_dir"
chown nobody "$run_dir"
run_rc timeout 5 "$routectl" query override
expect_rc "runtime dir owned by nobody: query exits 5" 5
expect_match "runtime dir owned by nobody: says whose it is" "uid" "$err"
chown "$(id -u)" "$run_dir"
run_rc timeout 5 "$routectl" query override
expect_rc "own 0700 runtime dir: query works" 0
fresh; mkdir -p "$state_dir"; chmod 0777 "$state_dir"
run_rc offline default
expect_rc "0777 state dir: default exits 5" 5

echo "-- a state file of a newer version is refused and never overwritten"
fresh; mkdir -p -m 700 "$state_dir"
printf '{"version":99,"default":"speaker","future":[1,2]}\n' >"$state"
before=$(sum "$state")
run_rc offline default earpiece
expect_rc "version 99: default earpiece exits 5" 5
expect_match "version 99: says the version" "version 99" "$err"
expect_eq "version 99: the file is byte-for-byte unchanged" "$before" "$(sum "$state")"
run_rc offline default
expect_rc "version 99: reading it exits 5" 5

echo "-- a hand-edited file with a member given twice, or the version in quotes: an error, nothing written"
fresh; mkdir -p -m 700 "$state_dir"
printf '{"version":1,"default":"earpiece","default":"speaker"}\n' >"$state"
before=$(sum "$state")
run_rc offline default
expect_rc "a member given twice: default exits 5" 5
expect_eq "a member given twice: one line naming the file and the member" \
	"routectl: $state: member 'default' is given twice; fix or remove it" "$err"
run_rc offline default earpiece
expect_rc "a member given twice: default earpiece exits 5" 5
expect_eq "a member given twice: the file is byte-for-byte unchanged" "$before" "$(sum "$state")"
printf '{"version":"1","default":"earpiece"}\n' >"$state"
run_rc offline default
expect_rc "version in quotes: default exits 5" 5
expect_match "version in quotes: says so" "version: expected an integer" "$err"

echo "-- keys a newer routectl wrote survive a rewrite"
fresh; mkdir -p -m 700 "$state_dir"
printf '{"version":1,"default":"speaker","priority":["bluez_card.00_11","headset"],"x_future":{"a":1}}\n' >"$state"
run_rc offline default earpiece
expect_rc "unknown keys: default earpiece exits 0" 0
expect_eq "unknown keys: default written" earpiece "$(json_get default <"$state")"
expect_eq "unknown keys: priority kept" '["bluez_card.00_11", "headset"]' "$(json_get priority <"$state")"
expect_eq "unknown keys: x_future kept" '{"a": 1}' "$(json_get x_future <"$state")"
expect_eq "unknown keys: mode 0600" 600 "$(stat -c %a "$state")"

echo "-- a relative XDG_STATE_HOME is ignored (XDG spec)"
fresh
mkdir -p "$outside/cwd/run"
run_rc sh -c "cd '$outside/cwd' && XDG_STATE_HOME=relative PULSE_SERVER=unix:$dir/no-server '$routectl' default earpiece"
expect_rc "relative XDG_STATE_HOME: exit 0" 0
expect_eq "relative XDG_STATE_HOME: nothing under the working dir" no "$([ -e "$outside/cwd/relative" ] && echo yes || echo no)"
expect_eq "relative XDG_STATE_HOME: state in \$HOME/.local/state" earpiece "$(json_get default <"$HOME/.local/state/routectl/state.json")"
run_rc sh -c "cd '$outside/cwd' && XDG_RUNTIME_DIR=run '$routectl' set speaker"
expect_rc "relative XDG_RUNTIME_DIR: set has no runtime dir, exit 5" 5
expect_eq "relative XDG_RUNTIME_DIR: nothing under the working dir" no "$([ -e "$outside/cwd/run/routectl" ] && echo yes || echo no)"

echo "-- watch --apply checks the state files at start"
fresh; mkdir -p -m 700 "$state_dir"
printf '{"default": ' >"$state"
run_rc timeout 5 "$routectl" watch --apply
expect_rc "corrupt state.json: watch --apply exits 5 at once" 5
expect_match "corrupt state.json: watch --apply names the path" "$state" "$err"
printf '{"version":1,"default":"speaker"}\n' >"$state"
mkdir -p -m 700 "$run_dir"; printf 'nonsense' >"$override"
run_rc timeout 5 "$routectl" watch --apply
expect_rc "corrupt override.json: watch --apply exits 5 at once" 5
expect_match "corrupt override.json: watch --apply names the path" "$override" "$err"

rm -f "$override"

echo "-- a state file that becomes unreadable while watch --apply runs: said once, the watcher goes on"
"$routectl" watch --apply >"$dir/mid.txt" 2>"$dir/mid.err" &
watcher=$!
wait_line "$dir/mid.txt" 1 "^route .* reason=initial"
printf 'nonsense' >"$override"
plug headset mid-phones
sleep 2.5
expect_eq "override.json unreadable while watching: watch --apply still runs" yes "$(kill -0 "$watcher" 2>/dev/null && echo yes || echo no)"
expect_eq "override.json unreadable while watching: said once, naming it" \
	"routectl: $override: not valid JSON (invalid literal at byte 0); fix or remove it" "$(cat "$dir/mid.err")"
rm -f "$override"
wait_line "$dir/mid.txt" 1 "^route headset .*reason=new-device-available" || true
expect_eq "override.json readable again: the plug that came meanwhile is answered" headset "$(rc query route)"
expect_eq "override.json readable again: one route event for it" 1 "$(lines "$dir/mid.txt" | grep -c '^route headset' || true)"
kill "$watcher" 2>/dev/null || true; wait "$watcher" 2>/dev/null || true; watcher=
unplug mid-phones

rm -f "$run_dir/apply.lock"
ln -s "$outside/apply-target" "$run_dir/apply.lock"
run_rc timeout 5 "$routectl" watch --apply
expect_rc "symlinked apply.lock: watch --apply exits 5 at once" 5
expect_eq "symlinked apply.lock: nothing created through it" no "$([ -e "$outside/apply-target" ] && echo yes || echo no)"

echo "-- 20 concurrent writers leave a valid file"
fresh
printf '{"version":1,"default":"speaker","keep_me":true}\n' | { mkdir -p -m 700 "$state_dir"; cat >"$state"; }
pids=()
for i in $(seq 1 20); do
	if [ $((i % 2)) = 0 ]; then target=speaker; else target=earpiece; fi
	offline default "$target" >/dev/null 2>"$outside/writer-$i.err" &
	pids+=($!)
done
failures=0
for pid in "${pids[@]}"; do wait "$pid" || failures=$((failures + 1)); done
expect_eq "20 writers: every one exits 0" 0 "$failures"
expect_match "20 writers: state.json is valid and holds one of the two" '^(speaker|earpiece)$' "$(json_get default <"$state" 2>&1)"
expect_eq "20 writers: the unknown key survived every rewrite" true "$(json_get keep_me <"$state" 2>&1)"
expect_eq "20 writers: no temporary files left" "" "$(find "$state_dir" -name '.state.json.*')"

summary
