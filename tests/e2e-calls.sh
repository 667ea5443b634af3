#!/usr/bin/env bash
# End-to-end tests of call mode (DESIGN.md rule 8) on the simulated phone (both UCM namings) and
# laptop, with a Bluetooth headset on the BlueZ stand-in: `call start|end|status`, plugs, `set` and
# `clear` during a call under `watch --apply`, the microphone, and the files and exit statuses. Each
# check reads the server back (profile, port, default) and the exact event lines of plain `watch` and
# `watch --apply` side by side.
#   tests/e2e-calls.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export BLUETOOTH=1
watchers=()
before_cleanup() {
	for pid in "${watchers[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
CARDS="phone" e2e_setup calls "${1:?usage: e2e-calls.sh pulseaudio|pipewire [routectl]}" "${2:-}"
bluetooth_names
a_addr=00:11:22:33:44:55 a_name=WH-1000XM4 a_card=bluez_card.00_11_22_33_44_55

# What the server says: the default sink's active port, and a card profile's UCM verb (the name before " (").
port_now() { server_route | cut -d' ' -f2-; }
port_is() { [ "$(port_now)" = "$1" ]; }
verb_of() { profile_of "$1" | sed 's/ (.*//'; }
# The default source's active port and its mute, as the server says.
mic_now() {
	printf '%s %s\n' "$(LC_ALL=C pactl -f json list sources | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["name"] == sys.argv[1]: print(s["active_port"])' "$(pactl get-default-source)")" "$(pactl get-source-mute @DEFAULT_SOURCE@)"
}
mic_port_is() { [ "$(mic_now | sed 's/ Mute: .*//')" = "$1" ]; }
# mixer_pick PORT REGEX: another client (a mixer) selects PORT on the default sink, from a new mark;
# waits for watch --apply's line matching REGEX, then for quiet.
mixer_pick() {
	mark
	pactl set-sink-port "$(pactl get-default-sink)" "$1"
	wait_line "$apply" 1 "$2" || true
	settle
}
# expect_both NAME REGEX: both watchers printed a line matching REGEX since the mark.
expect_both() {
	local file
	for file in "$watch" "$apply"; do
		wait_line "$file" 1 "$2" >/dev/null 2>&1 || true
		expect_match "$1 ($(mode "$file"))" "$2" "$(since "$file")"
	done
}

# phone_tour KIND: a call on a phone card, with the headset jack in and out, the speaker and the
# receiver, under both watchers; `call end` puts HiFi, the speaker and the microphone back.
phone_tour() {
	local kind=$1 card=alsa_card.sim-$1 hifi
	cards_server "$kind"
	wait_for "$kind: the server on the speaker" port_is "[Out] Speaker" || true
	hifi=$(profile_of "$card")
	rc input mute on >/dev/null
	start_watchers
	echo "-- $kind: call start: the receiver, in a Voice Call profile (chosen by its ports: $hifi now)"
	run_rc rc call start
	expect_eq "$kind call start: exit 0" 0 "$rc"
	expect_eq "$kind call start: the card in its Voice Call verb (server)" "Voice Call" "$(verb_of "$card")"
	expect_eq "$kind call start: the earpiece port (server)" "[Out] Earpiece" "$(port_now)"
	expect_match "$kind call start: the output says so" "^route +receiver" "$out"
	expect_eq "$kind query call" yes "$(rc query call)"
	expect_eq "$kind query target during the call" earpiece "$(rc query target)"
	expect_eq "$kind call status --json: call" true "$(rc --json call status | json_get call)"
	expect_eq "$kind call status --json: target" earpiece "$(rc --json call status | json_get target)"
	wait_line "$apply" 1 "^call active" || true
	wait_line "$watch" 1 "^call active" || true
	settle
	expect_step "$kind call start: one route event, reason call" "route receiver (was speaker) reason=call output=$card:[Out] Earpiece"
	expect_both "$kind call start: the call event" "call active route=receiver"
	expect_eq "$kind call start: call.json records the profile before the call" "$hifi" \
		"$(json_get profiles.0.profile <"$XDG_RUNTIME_DIR/routectl/call.json")"

	echo "-- $kind: the headset jack during the call: it takes the call, in a call profile"
	mark
	jack "$kind" headphone in
	wait_line "$apply" 1 "^route headset" || true
	settle
	expect_eq "$kind jack in: the headphones port (server)" "[Out] Headphones" "$(port_now)"
	expect_eq "$kind jack in: still a Voice Call profile (server)" "Voice Call" "$(verb_of "$card")"
	expect_step "$kind jack in: the device and one route event" \
		"device-added headset $card:[Out] Headphones \"Headphones (Sim Phone)\"" \
		"route headset (was receiver) reason=new-device-available output=$card:[Out] Headphones"
	rc --json why >"$dir/why.json"
	expect_eq "$kind jack in: why, rule 8 since the headset took the call (the watcher's decision), not the call's start" \
		"call $(json_get decision.at <"$dir/why.json")" "$(json_get rule <"$dir/why.json") $(json_get since <"$dir/why.json")"

	if [ "$kind" = phone ]; then
		# The old-named phone's Voice Call sink holds the earpiece port too: a mixer's port pick.
		echo "-- $kind: another client puts the call on the earpiece beside the headset: why names that client"
		mixer_pick "[Out] Earpiece" "^route receiver \(was headset\) reason=route-configuration-change"
		expect_eq "$kind another client's earpiece beside the headset: respected (server)" "[Out] Earpiece" "$(port_now)"
		expect_eq "$kind another client's earpiece beside the headset: why, that client, not rule 8" other \
			"$(rc --json why | json_get rule)"
		rc clear >/dev/null
		wait_for "$kind: the call back on the headset" port_is "[Out] Headphones" || true
		settle
	fi

	echo "-- $kind: the speaker button with the headset in (set speaker --force), then the jack pulled"
	mark
	run_rc rc set speaker --force
	expect_eq "$kind speaker with the headset in: exit 0" 0 "$rc"
	expect_eq "$kind speaker with the headset in: the speaker port (server)" "[Out] Speaker" "$(port_now)"
	expect_eq "$kind speaker with the headset in: still Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	expect_eq "$kind speaker with the headset in: why, the override" override "$(rc --json why | json_get rule)"
	settle
	mark
	jack "$kind" headphone out
	wait_line "$apply" 1 "^device-removed headset" || true
	expect_eq "$kind jack out with the speaker on: the speaker stays for the hold-down (server)" "[Out] Speaker" "$(port_now)"
	expect_eq "$kind jack out with the speaker on: query says speaker" speaker "$(rc query route)"
	expect_eq "$kind jack out with the speaker on: the override stands for the hold-down" speaker "$(rc query override)"
	expect_eq "$kind jack out with the speaker on: still Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	echo "-- $kind: the hold-down passes: the override goes with the headset that would win, the call's receiver"
	wait_line "$apply" 1 "^override-cleared speaker" || true
	wait_line "$apply" 1 "^route receiver \(was speaker\) reason=old-device-unavailable" || true
	settle
	expect_eq "$kind hold-down passed: the earpiece (server)" "[Out] Earpiece" "$(port_now)"
	expect_eq "$kind hold-down passed: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	expect_step "$kind hold-down passed: the device, then one route event to the receiver" \
		"device-removed headset $card:[Out] Headphones \"Headphones (Sim Phone)\"" \
		"route receiver (was speaker) reason=old-device-unavailable output=$card:[Out] Earpiece"
	expect_cleared "$kind hold-down passed: the override went" "override-cleared speaker: '$card:[Out] Headphones' was disconnected"

	echo "-- $kind: clear during the call returns to the call's target, the receiver"
	rc set speaker --force >/dev/null
	settle
	mark
	run_rc rc clear
	expect_eq "$kind clear in a call: exit 0" 0 "$rc"
	expect_eq "$kind clear in a call: the earpiece (server)" "[Out] Earpiece" "$(port_now)"
	expect_eq "$kind clear in a call: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	settle
	expect_step "$kind clear in a call: one route event, reason override" \
		"route receiver (was speaker) reason=override output=$card:[Out] Earpiece"
	expect_eq "$kind clear in a call: why, the call's receiver" "call: a call is in progress (rule 8): the call's receiver" \
		"$(rc why | sed -n 's/^rule *//p')"

	if [ "$kind" = phone ]; then
		# The old-named phone's Voice Call sink holds the speaker port too: a mixer's port pick.
		echo "-- $kind: another client puts the call on the speaker: respected, also by the next watch --apply"
		mixer_pick "[Out] Speaker" "^route speaker"
		expect_step "$kind another client's speaker in the call: one route event, its reason" \
			"route speaker (was receiver) reason=route-configuration-change output=$card:[Out] Speaker"
		expect_eq "$kind another client's speaker in the call: decision.json has the pick" "route-configuration-change" \
			"$(json_get reason <"$XDG_RUNTIME_DIR/routectl/decision.json")"
		expect_eq "$kind another client's speaker in the call: why says so, not the call's rule" other "$(rc --json why | json_get rule)"
		stop_watchers
		start_watchers
		settle
		expect_eq "$kind another client's speaker, watch --apply restarted: the speaker (server)" "[Out] Speaker" "$(port_now)"
		expect_eq "$kind another client's speaker, watch --apply restarted: no route event" "" "$(since "$apply" route)"
		rc clear >/dev/null
		wait_for "$kind: the call back on the earpiece" port_is "[Out] Earpiece" || true
		settle
	fi

	echo "-- $kind: a headset that goes during the call falls back to the receiver, never the music route"
	jack "$kind" headphone in
	wait_line "$apply" 2 "^route headset" || true
	settle
	mark
	jack "$kind" headphone out
	wait_line "$apply" 1 "^route receiver" || true
	settle
	expect_eq "$kind headset gone in a call: the earpiece (server)" "[Out] Earpiece" "$(port_now)"
	expect_eq "$kind headset gone in a call: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	expect_step "$kind headset gone in a call: one route event to the receiver" \
		"device-removed headset $card:[Out] Headphones \"Headphones (Sim Phone)\"" \
		"route receiver (was headset) reason=old-device-unavailable output=$card:[Out] Earpiece"

	if grep -q "^headset " "$root/sim/cards/$kind/jacks"; then
		# The server gives each port the mute it remembers for it: a caller who muted would be heard
		# on the headset's microphone. watch --apply keeps the call's mute as its input moves.
		echo "-- $kind: muted in the call, the headset (with its microphone) plugged and pulled: still muted"
		rc input mute on >/dev/null
		settle
		jack "$kind" headset in
		wait_for "$kind: the headset's microphone" mic_port_is "[In] Headset" || true
		settle
		expect_eq "$kind muted, headset in: the headset's microphone, muted (server)" "[In] Headset Mute: yes" "$(mic_now)"
		expect_eq "$kind muted, headset in: query mic_muted" yes "$(rc query mic_muted)"
		jack "$kind" headset out
		wait_for "$kind: the phone's microphone" mic_port_is "[In] Mic" || true
		settle
		expect_eq "$kind muted, headset out: the phone's microphone, muted (server)" "[In] Mic Mute: yes" "$(mic_now)"
		echo "-- $kind: unmuted in the call: routectl never unmutes; the headset's microphone comes as the server remembers it"
		rc input mute off >/dev/null
		settle
		jack "$kind" headset in
		wait_for "$kind: the headset's microphone" mic_port_is "[In] Headset" || true
		settle
		expect_eq "$kind unmuted, headset in: the headset's microphone, muted as the server remembers it (server)" \
			"[In] Headset Mute: yes" "$(mic_now)"
		rc input mute off >/dev/null
		jack "$kind" headset out
		wait_for "$kind: the phone's microphone" mic_port_is "[In] Mic" || true
		settle
		expect_eq "$kind unmuted, headset out: the phone's microphone, live (server)" "[In] Mic Mute: no" "$(mic_now)"
		expect_eq "$kind unmuted, headset out: call.json has the call's mute" false \
			"$(json_get call_mic_muted <"$XDG_RUNTIME_DIR/routectl/call.json")"
	fi

	echo "-- $kind: the microphone during the call, and call end from another shell"
	run_rc rc input mute off
	expect_eq "$kind input mute off: exit 0" 0 "$rc"
	expect_eq "$kind input mute off: read back" "mic_muted    no" "$out"
	expect_eq "$kind query mic_muted in the call" no "$(rc query mic_muted)"
	mark
	run_rc sh -c "cd / && '$routectl' call end"
	expect_eq "$kind call end from another shell: exit 0" 0 "$rc"
	expect_eq "$kind call end: the profile before the call (server)" "$hifi" "$(profile_of "$card")"
	expect_eq "$kind call end: the speaker port (server)" "[Out] Speaker" "$(port_now)"
	expect_eq "$kind call end: the microphone muted again, as before the call" yes "$(rc query mic_muted)"
	expect_eq "$kind call end: query call" no "$(rc query call)"
	expect_eq "$kind call end: call.json is gone" no "$([ -e "$XDG_RUNTIME_DIR/routectl/call.json" ] && echo yes || echo no)"
	wait_line "$apply" 1 "^call ended" || true
	wait_line "$watch" 1 "^call ended" || true
	settle
	expect_step "$kind call end: one route event back, reason call" "route speaker (was receiver) reason=call output=$card:[Out] Speaker"
	expect_both "$kind call end: the call event" "call ended route=speaker"
	run_rc rc call end
	expect_eq "$kind call end with no call: exit 0" 0 "$rc"
	expect_eq "$kind call end with no call: says so" "routectl: note: no call in progress" "$err"
	rc input mute off >/dev/null
	stop_watchers
	echo "-- $kind: a mute left on the call's microphone does not carry into the next call"
	rc call start >/dev/null
	rc input mute on >/dev/null
	expect_eq "$kind muted in a call" yes "$(rc query mic_muted)"
	rc call end >/dev/null
	expect_eq "$kind after the muted call: the microphone live, as before it" no "$(rc query mic_muted)"
	run_rc rc call start
	expect_eq "$kind the next call: exit 0" 0 "$rc"
	expect_eq "$kind the next call: its microphone live (server)" no "$(rc query mic_muted)"
	expect_match "$kind the next call: the output says so" "^mic_muted +no$" "$out"
	echo "-- $kind: the headset plugged in the call while no watcher runs: it has the call once watch --apply starts"
	local earpiece_profile earpiece_sink
	earpiece_profile=$(profile_of "$card") earpiece_sink=$(pactl get-default-sink)
	jack "$kind" headphone in
	wait_for "$kind: the headphones seen by the server" sh -c "[ \"\$('$routectl' query headset)\" = yes ]" || true
	# Left on the earpiece, as a server without a switching policy would (PulseAudio's did once).
	pactl set-card-profile "$card" "$earpiece_profile"
	wait_for "$kind: the earpiece's sink" sink_present "$earpiece_sink" || true
	pactl set-sink-port "$earpiece_sink" "[Out] Earpiece"
	pactl set-default-sink "$earpiece_sink"
	wait_for "$kind: the call on the earpiece, the headphones in" port_is "[Out] Earpiece" || true
	start_watchers
	wait_for "$kind: the headphones take the call" port_is "[Out] Headphones" || true
	settle
	expect_eq "$kind headset plugged with no watcher: the headphones once watch --apply starts (server)" "[Out] Headphones" "$(port_now)"
	expect_eq "$kind headset plugged with no watcher: still Voice Call (server)" "Voice Call" "$(verb_of "$card")"
	echo "-- $kind: call end on the headset plugged in the call: routectl's own move, then the call event"
	mark
	rc call end >/dev/null
	wait_line "$watch" 1 "^call ended" || true
	wait_line "$apply" 1 "^call ended" || true
	settle
	expect_step "$kind call end on the headset: one route event, reason call" \
		"route headset (was headset) reason=call output=$card:[Out] Headphones"
	expect_both "$kind call end on the headset: the call event, with where the call ended" "call ended route=headset"
	stop_watchers
}

echo "== $server: call mode on simulated phones: $(pactl info | sed -n 's/^Server Name: //p')"
phone_tour phone
phone_tour phone17

echo "-- phone: --speaker, set earpiece during the call, and two call start at once"
cards_server phone
card=alsa_card.sim-phone
wait_for "phone: the server on the speaker" port_is "[Out] Speaker" || true
run_rc rc call start --speaker
expect_eq "call start --speaker: exit 0" 0 "$rc"
expect_eq "call start --speaker: the speaker port (server)" "[Out] Speaker" "$(port_now)"
expect_eq "call start --speaker: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
expect_eq "call start --speaker: target" speaker "$(rc query target)"
run_rc rc set earpiece
expect_eq "set earpiece in a call: exit 0" 0 "$rc"
expect_eq "set earpiece in a call: the earpiece port (server)" "[Out] Earpiece" "$(port_now)"
expect_eq "set earpiece in a call: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
rc call end >/dev/null
expect_eq "call end after --speaker: HiFi again (server)" HiFi "$(profile_of "$card")"
expect_eq "call end after --speaker: no override left from the call" none "$(rc query override)"
rc call start >"$dir/one.txt" 2>&1 & one=$!
rc call start >"$dir/two.txt" 2>&1 & two=$!
set +e
wait "$one"; rc_one=$?
wait "$two"; rc_two=$?
set -e
expect_eq "two call start at once: both exit 0" "0 0" "$rc_one $rc_two"
expect_eq "two call start at once: the second re-applied (one note)" 1 "$(cat "$dir/one.txt" "$dir/two.txt" | grep -c 'already in progress' || true)"
expect_eq "two call start at once: the earpiece in Voice Call (server)" "Voice Call [Out] Earpiece" "$(verb_of "$card") $(port_now)"
expect_eq "two call start at once: call.json holds the profile before the call" HiFi \
	"$(json_get profiles.0.profile <"$XDG_RUNTIME_DIR/routectl/call.json")"
rc call end >/dev/null
expect_eq "and call end restores HiFi (server)" "HiFi [Out] Speaker" "$(profile_of "$card") $(port_now)"

echo "-- phone: an override in force before the call steps aside and comes back after it"
rc set earpiece >/dev/null
rc call start --speaker >/dev/null
expect_eq "override before the call: the call's speaker wins (server)" "[Out] Speaker" "$(port_now)"
expect_eq "override before the call: query override during the call" none "$(rc query override)"
rc call end >/dev/null
expect_eq "override before the call: back after it" earpiece "$(rc query override)"
expect_eq "override before the call: the route before the call (server)" "[Out] Earpiece" "$(port_now)"
rc clear >/dev/null

echo "-- the files and the exit statuses"
rc call start >/dev/null
cp "$XDG_RUNTIME_DIR/routectl/call.json" "$dir/call.saved"
printf '{"version":1,"started_at":' >"$XDG_RUNTIME_DIR/routectl/call.json"
run_rc rc call end
expect_eq "corrupt call.json: call end exit 5" 5 "$rc"
expect_match "corrupt call.json: the message names it" "call.json" "$err"
expect_eq "corrupt call.json: left as it was" '{"version":1,"started_at":' "$(cat "$XDG_RUNTIME_DIR/routectl/call.json")"
run_rc rc query
expect_eq "corrupt call.json: query exit 5" 5 "$rc"
cp "$dir/call.saved" "$XDG_RUNTIME_DIR/routectl/call.json"
run_rc rc call end
expect_eq "call.json repaired: call end exit 0" 0 "$rc"
expect_eq "call.json repaired: HiFi (server)" HiFi "$(profile_of "$card")"
rc call start >/dev/null
printf 'zz' >"$XDG_RUNTIME_DIR/routectl/override.json"
run_rc rc call end
expect_eq "corrupt override.json in a call: call end exit 5" 5 "$rc"
expect_match "corrupt override.json in a call: the message names it" "override.json" "$err"
expect_eq "corrupt override.json in a call: left as it was" zz "$(cat "$XDG_RUNTIME_DIR/routectl/override.json")"
expect_match "corrupt override.json in a call: the call is still on" "^call +yes" "$(rc call status | head -1)"
rm -f "$XDG_RUNTIME_DIR/routectl/override.json"
rc call end >/dev/null
printf 'zz' >"$XDG_RUNTIME_DIR/routectl/override.json"
run_rc rc call end
expect_eq "corrupt override.json and no call: call end is still the no-op (exit 0)" "0 routectl: note: no call in progress" "$rc $err"
rm -f "$XDG_RUNTIME_DIR/routectl/override.json"
# A Ctrl-C while call end puts things back does not leave call.json naming a call whose profiles are
# back: the end is carried through. Once the server is quiet after call start, the signal goes the
# moment a client sees a card change, which is call end's (its first step); on PipeWire call end then
# still waits out WirePlumber's restores. A change that never comes sends no signal (and fails below).
rc call start >/dev/null
python3 - "$routectl" >"$dir/int.txt" <<'PY'
import os, select, signal, subprocess, sys, time
sub = subprocess.Popen(["pactl", "subscribe"], stdout=subprocess.PIPE)
fd = sub.stdout.fileno()
time.sleep(0.3)  # pactl subscribe says nothing when it is ready
while select.select([fd], [], [], 0.3)[0] and os.read(fd, 4096):
    pass  # call start's tail, until 0.3 s pass without a line
end = subprocess.Popen([sys.argv[1], "call", "end"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seen, deadline = b"", time.monotonic() + 5
while b"on card" not in seen and end.poll() is None:
    if not select.select([fd], [], [], max(0, deadline - time.monotonic()))[0]:
        break
    seen += os.read(fd, 4096)
if b"on card" in seen:
    end.send_signal(signal.SIGINT)
err = end.communicate()[1]
sub.terminate()
print(end.returncode)
print(err.strip())
PY
expect_eq "Ctrl-C during call end: carried through (exit 0)" 0 "$(sed -n 1p "$dir/int.txt")"
expect_match "Ctrl-C during call end: no call left" "^call +no" "$(rc call status | head -1)"
expect_eq "Ctrl-C during call end: HiFi (server)" HiFi "$(profile_of "$card")"
if [ "$server" = pipewire ]; then
	expect_eq "Ctrl-C during call end: it says so" \
		"routectl: note: Ctrl-C (SIGINT) came while the change was being made; it was carried through" "$(sed -n 2p "$dir/int.txt")"
fi
# A dump carries when the call began: --snapshot answers as the live server does.
rc call start --speaker >/dev/null
rc dump >"$dir/in-call.json"
expect_eq "dump in a call: call status --json from it, as live" "$(rc --json call status)" "$(rc --snapshot "$dir/in-call.json" --json call status)"
expect_eq "dump in a call: why from it, as live" "$(rc why | grep -v '^policies')" "$(rc --snapshot "$dir/in-call.json" why | grep -v '^policies')"
# A start time before 1970 (a hand-edited file) is still printed as a time.
python3 -c 'import json, sys; f = sys.argv[1]; d = json.load(open(f)); d["started_at"] = -5; json.dump(d, open(f, "w"))' \
	"$XDG_RUNTIME_DIR/routectl/call.json"
expect_eq "call.json started_at -5: since" '"1969-12-31T23:59:59.995Z"' \
	"$(rc --json call status | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["since"]))')"
rc call end >/dev/null
run_rc env PULSE_SERVER="unix:$dir/nothing" "$routectl" --timeout 1 call start
expect_eq "call start with no server: exit 4" 4 "$rc"
expect_eq "call start with no server: no call recorded" no "$([ -e "$XDG_RUNTIME_DIR/routectl/call.json" ] && echo yes || echo no)"
rc dump >"$dir/dump.json"
run_rc rc --snapshot "$dir/dump.json" call start
expect_eq "--snapshot call start: exit 2" 2 "$rc"
run_rc rc --snapshot "$dir/dump.json" call status
expect_match "--snapshot call status: from the dump" "^call +no" "$(printf '%s\n' "$out" | head -1)"
run_rc rc call stop
expect_eq "call stop: exit 2" 2 "$rc"
expect_eq "call stop: the line" "routectl: The value 'stop' is invalid for 'call': expected start, end or status. Did you mean 'end'? See 'routectl --help'." "$err"
run_rc rc call end --speaker
expect_eq "call end --speaker: exit 2" 2 "$rc"
run_rc rc input mute maybe
expect_eq "input mute maybe: exit 2" 2 "$rc"

echo "-- phone with a Bluetooth headset: the call in HFP, the receiver in Voice Call when it goes, A2DP and HiFi after"
cards_server phone
card=alsa_card.sim-phone
wait_for "phone: the speaker" port_is "[Out] Speaker" || true
start_watchers
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" 1 "^route bluetooth" || true
settle
timed_start=$(date +%s%N)
run_rc rc --timeout 10 call start
timed_ms=$((($(date +%s%N) - timed_start) / 1000000))
expect_eq "phone+headset call start: exit 0" 0 "$rc"
# The sink HFP brings settles it (PipeWire gives HFP a port of its own): not the end of --timeout.
expect_eq "phone+headset call start: over well before its timeout" yes "$([ "$timed_ms" -lt 3000 ] && echo yes || echo "no: $timed_ms ms")"
expect_match "phone+headset call start: the headset in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "phone+headset call start: the phone card left in HiFi (server)" HiFi "$(profile_of "$card")"
expect_eq "phone+headset call start: route bluetooth" bluetooth "$(rc query route)"
settle
mark
disconnect "$a_addr"
wait_line "$apply" 1 "^route receiver" || true
settle
expect_eq "phone headset lost in the call: the earpiece (server)" "[Out] Earpiece" "$(port_now)"
expect_eq "phone headset lost in the call: Voice Call (server)" "Voice Call" "$(verb_of "$card")"
expect_step "phone headset lost in the call: one route event to the receiver" \
	"device-removed bluetooth $a_card \"$a_name\"" \
	"route receiver (was bluetooth) reason=old-device-unavailable output=$card:[Out] Earpiece"
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" 2 "^route bluetooth" || true
settle
expect_match "phone headset back in the call: HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
rc call end >/dev/null
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
expect_match "phone+headset call end: A2DP again (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "phone+headset call end: HiFi (server)" HiFi "$(profile_of "$card")"
expect_eq "phone+headset call end: route bluetooth" bluetooth "$(rc query route)"
stop_watchers
disconnect "$a_addr"

echo "-- phone with a Bluetooth speaker (A2DP only) and a headset: the headset takes the call, the speaker never does"
s_addr=00:1A:7D:DA:71:13 s_name=Soundcore s_card=bluez_card.00_1A_7D_DA_71_13
start_watchers
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" 1 "^route bluetooth .*output=$a_card" || true
connect "$s_addr" "$s_name" a2dp
wait_line "$apply" 1 "^route bluetooth .*output=$s_card" || true
settle
expect_eq "the A2DP speaker, connected last, has the sound (server)" "$(bt_sink "$s_addr")" "$(pactl get-default-sink)"
run_rc rc call start
expect_eq "A2DP speaker beside a headset, call start: exit 0" 0 "$rc"
expect_match "A2DP speaker beside a headset, call start: the headset in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "A2DP speaker beside a headset, call start: the headset's sink is the default (server)" \
	"$(bt_sink "$a_addr" "$hfp")" "$(pactl get-default-sink)"
settle
mark
disconnect "$a_addr"
wait_line "$apply" 1 "^route receiver" || true
settle
expect_eq "the headset gone in the call: the earpiece, not the A2DP speaker (server)" "[Out] Earpiece" "$(port_now)"
expect_eq "the headset gone in the call: the speaker's sink is not the default (server)" no \
	"$([ "$(pactl get-default-sink)" = "$(bt_sink "$s_addr")" ] && echo yes || echo no)"
expect_step "the headset gone in the call: one route event to the receiver" \
	"device-removed bluetooth $a_card \"$a_name\"" \
	"route receiver (was bluetooth) reason=old-device-unavailable output=$card:[Out] Earpiece"
# Asking for Bluetooth in the call: the A2DP speaker has no microphone for it, and no headset being
# there never makes the call a speakerphone one (rule 8 over rule 4's fallback).
mark
run_rc rc set bluetooth
expect_rc "set bluetooth in the call with only the A2DP speaker: exit 3" 3
expect_eq "set bluetooth in the call with only the A2DP speaker: the note" \
	"routectl: note: no bluetooth output with a headset profile (HFP/HSP or LE Audio duplex) here; the call stays on the receiver (the preference is recorded)" "$err"
expect_eq "set bluetooth in the call with only the A2DP speaker: the earpiece keeps it (server)" "[Out] Earpiece" "$(port_now)"
run_rc rc set bluetooth --force
expect_rc "set bluetooth --force in the call with only the A2DP speaker: exit 3" 3
expect_eq "set bluetooth --force in the call with only the A2DP speaker: the earpiece keeps it (server)" "[Out] Earpiece" "$(port_now)"
run_rc rc set bluetooth --device "$s_card"
expect_rc "set bluetooth --device the A2DP speaker in the call: exit 1" 1
expect_eq "set bluetooth --device the A2DP speaker in the call: why" \
	"routectl: '$s_card' has no headset profile (HFP/HSP or LE Audio duplex), so no microphone for the call; the call stays where it is (--force puts it there anyway)" "$err"
expect_eq "set bluetooth --device the A2DP speaker in the call: the override before it stands" bluetooth "$(rc query override)"
expect_eq "set bluetooth in the call with only the A2DP speaker: why, the call's receiver" call "$(rc --json why | json_get rule)"
run_rc rc set headset
expect_rc "set headset in the call with no headset: exit 3" 3
expect_eq "set headset in the call with no headset: the earpiece keeps it (server)" "[Out] Earpiece" "$(port_now)"
run_rc rc clear
expect_rc "clear in the call: exit 0" 0
settle
expect_eq "set bluetooth and headset in the call with neither: no route event" "" "$(since "$apply" route)"
mark
disconnect "$s_addr"
connect "$s_addr" "$s_name" a2dp
wait_line "$watch" 2 "^device-added bluetooth $s_card" || true
settle
expect_eq "the A2DP speaker connecting in the call: the earpiece keeps it (server)" "[Out] Earpiece" "$(port_now)"
expect_eq "the A2DP speaker connecting in the call: no route event" "" "$(since "$apply" route)"
mark
run_rc rc call end
expect_eq "call end onto the A2DP speaker: exit 0" 0 "$rc"
wait_line "$apply" 1 "^call ended" || true
settle
expect_eq "call end: the A2DP speaker has the sound again (server)" "$(bt_sink "$s_addr")" "$(pactl get-default-sink)"
expect_eq "call end: HiFi (server)" HiFi "$(profile_of "$card")"
expect_step "call end onto the A2DP speaker: one route event, the call's (watch --apply leaves it)" \
	"route bluetooth (was receiver) reason=call output=$s_card"
stop_watchers
disconnect "$s_addr"

# late_hfp NAME PORT [OVERRIDE]: in a call on PORT (the earpiece, or the speaker by `set OVERRIDE
# --force`), a headset connects A2DP first and HFP a moment later: it takes the call once it can
# carry it (rule 8), and an override set in the call is cleared by that arrival.
l_addr=00:1A:7D:DA:71:14 l_name=Latecomer l_card=bluez_card.00_1A_7D_DA_71_14
late_hfp() {
	local name=$1 port=$2 override=${3:-} was=receiver
	start_watchers
	run_rc rc call start
	expect_rc "$name: call start: exit 0" 0
	if [ -n "$override" ]; then
		run_rc rc set "$override" --force
		expect_rc "$name: set $override --force in the call: exit 0" 0
		was=$override
	fi
	expect_eq "$name: the call on $port (server)" "$port" "$(port_now)"
	settle
	mark
	if [ "$(bt status | grep -c "$l_addr" || true)" = 0 ]; then bt add "$l_addr" "$l_name" a2dp+hfp; fi
	bt connect "$l_addr" a2dp
	wait_for "card of $l_addr" card_present "$l_card" || true
	if [ "$server" = pulseaudio ]; then
		# PulseAudio makes the card after its wait for the other profiles (~3 s), HFP unavailable; PipeWire
		# lists HFP at once (it connects it when the profile is chosen), so there the headset takes the call now.
		settle
		expect_eq "$name, A2DP only: $port keeps the call (server)" "$port" "$(port_now)"
		expect_eq "$name, A2DP only: HFP not available yet (server)" no \
			"$(LC_ALL=C pactl list cards | sed -n "/Name: $l_card/,/Active Profile/p" | sed -n "s/.*$hfp: .*available: \([a-z]*\)).*/\1/p")"
		if [ -n "$override" ]; then
			expect_eq "$name, A2DP only: the override stands" "$override" "$(rc query override)"
			expect_cleared "$name, A2DP only: nothing cleared yet"
		fi
		mark
	fi
	bt connect "$l_addr" hfp
	wait_for "the late headset in HFP" profile_is "$l_card" "$hfp" || true
	settle
	expect_eq "$name: the headset has the call (server)" "$(bt_sink "$l_addr" "$hfp")" "$(pactl get-default-sink)"
	expect_match "$name: the headset in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$l_card")"
	if [ -n "$override" ]; then
		expect_eq "$name: the override is cleared" none "$(rc query override)"
		expect_cleared "$name: one override-cleared, the headset's arrival" "override-cleared $override: '$l_card' was connected"
	fi
	if [ "$server" = pulseaudio ]; then
		expect_step "$name: one route event as HFP comes up, a device arriving for the call" \
			"route bluetooth (was $was) reason=new-device-available output=$l_card"
	fi
	run_rc rc call end
	expect_rc "$name: call end: exit 0" 0
	wait_for "the late headset's A2DP" profile_is "$l_card" "$a2dp" || true
	expect_match "$name: call end: A2DP again (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$l_card")"
	stop_watchers
	disconnect "$l_addr"
}
echo "-- phone with a headset whose HFP connects after its A2DP: it takes the call once it can carry it"
late_hfp "late HFP" "[Out] Earpiece"
echo "-- the same with the call on the speaker by choice: the headset arriving clears the override (rule 8)"
late_hfp "late HFP over set speaker" "[Out] Speaker" speaker

echo "-- two headsets in a call, another client picks the other one: why names that client, not rule 8"
start_watchers
connect "$a_addr" "$a_name" a2dp+hfp
connect "$l_addr" "$l_name" a2dp+hfp
settle
run_rc rc call start
expect_rc "two headsets: call start: exit 0" 0
# (Which one the call is on is rule 1's business, tested above; here only why is.)
on=$(rc query output)
if [ "$on" = "$l_card" ]; then other_addr=$a_addr other_card=$a_card; else other_addr=$l_addr other_card=$l_card; fi
expect_match "two headsets: the call on one of them, in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$on")"
expect_eq "two headsets: why, rule 8" "call: a call is in progress (rule 8): a connected headset takes the call" \
	"$(rc why | sed -n 's/^rule *//p')"
settle
mark
pactl set-default-sink "$(bt_sink "$other_addr")"
wait_line "$apply" 1 "^route bluetooth .*reason=route-configuration-change output=$other_card" || true
settle
expect_eq "two headsets: another client's pick of the other one stands (server)" "$(bt_sink "$other_addr")" "$(pactl get-default-sink)"
expect_eq "two headsets: why, another client's pick" other "$(rc --json why | json_get rule)"
# routectl's own move since (the user's set) is no longer that client's pick.
rc set speaker --force >/dev/null
run_rc rc set bluetooth --device "$other_card"
expect_rc "two headsets: set bluetooth --device that one: exit 0" 0
settle
expect_match "two headsets: set bluetooth --device that one: its HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$other_card")"
expect_eq "two headsets: why after routectl's own set, rule 8 again" call "$(rc --json why | json_get rule)"
rc call end >/dev/null
stop_watchers
disconnect "$l_addr"
disconnect "$a_addr"

echo "-- headphones plugged in a call on a headset while no watcher ran: watch --apply, starting, gives them the call (rule 1)"
start_watchers
connect "$a_addr" "$a_name" a2dp+hfp
settle
run_rc rc call start
expect_rc "plugged with no watcher: call start: exit 0" 0
expect_match "plugged with no watcher: the headset in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
stop_watchers
jack phone headphone in
wait_for "the headphones' jack" sh -c "LC_ALL=C pactl list cards | grep '\[Out\] Headphones:' | grep -qv 'not available'" || true
expect_eq "plugged with no watcher: the headset keeps the call meanwhile (server)" "$(bt_sink "$a_addr" "$hfp")" "$(pactl get-default-sink)"
start_watchers
wait_for "the headphones take the call" port_is "[Out] Headphones" || true
settle
expect_eq "plugged with no watcher: the headphones have the call once watch --apply starts (server)" "[Out] Headphones" "$(port_now)"
expect_eq "plugged with no watcher: a Voice Call profile (server)" "Voice Call" "$(verb_of "$card")"
expect_eq "plugged with no watcher: route headset" headset "$(rc query route)"
rc call end >/dev/null
jack phone headphone out
stop_watchers
disconnect "$a_addr"

echo "-- laptop (no call profile) with a Bluetooth headset: HFP for the call only"
cards_server laptop
laptop_card=alsa_card.sim-laptop
wait_for "laptop: the speaker" port_is analog-output-speaker || true
connect "$a_addr" "$a_name" a2dp+hfp
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
rc set bluetooth >/dev/null
start_watchers
timed_start=$(date +%s%N)
run_rc rc --timeout 10 call start
timed_ms=$((($(date +%s%N) - timed_start) / 1000000))
expect_eq "laptop call start: exit 0" 0 "$rc"
# The sink HFP brings settles it (PipeWire gives HFP a port of its own): not the end of --timeout.
expect_eq "laptop call start: over well before its timeout" yes "$([ "$timed_ms" -lt 3000 ] && echo yes || echo "no: $timed_ms ms")"
expect_match "laptop call start: the headset in HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "laptop call start: route bluetooth" bluetooth "$(rc query route)"
expect_match "laptop call start: the headset's microphone is the default input (server)" "^bluez_(source|input)\." "$(pactl get-default-source)"
settle
expect_step "laptop call start: one route event, reason call" "route bluetooth (was bluetooth) reason=call output=$a_card"
mark
disconnect "$a_addr"
wait_line "$apply" 1 "^route speaker" || true
settle
expect_eq "laptop headset lost in the call: the speaker (no receiver) (server)" "analog-output-speaker" "$(port_now)"
expect_step "laptop headset lost in the call: one route event" \
	"device-removed bluetooth $a_card \"$a_name\"" \
	"route speaker (was bluetooth) reason=old-device-unavailable output=$laptop_card:analog-output-speaker"
mark
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" 1 "^route bluetooth" || true
# pipewire-pulse may not tell the plain watcher the default changed (issue 15); it asks a fresh
# connection once its hold runs out (1.5 s), past settle's 0.6 s of quiet.
wait_line "$watch" 1 "^route bluetooth \(was speaker\)" || true
settle
expect_match "laptop headset back in the call: HFP again (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "laptop headset back in the call: route bluetooth" bluetooth "$(rc query route)"
expect_step "laptop headset back in the call: one route event" \
	"device-added bluetooth $a_card \"$a_name\"" \
	"route bluetooth (was speaker) reason=new-device-available output=$a_card"
echo "-- laptop: another client puts the call on the speaker: the microphone goes with it (rule 8)"
settle
mark
pactl set-default-sink "$(pactl list short sinks | cut -f2 | grep '^alsa_output\.sim-laptop\.' | head -1)"
wait_line "$apply" 1 "^input alsa_input\.sim-laptop\." || true
settle
expect_eq "another client's pick in the call: the speaker stands (server)" analog-output-speaker "$(port_now)"
expect_match "another client's pick in the call: the laptop's microphone (server)" "^alsa_input\.sim-laptop\." "$(pactl get-default-source)"
expect_eq "another client's pick in the call: route event, then the microphone (watch --apply)" \
	"route speaker (was bluetooth) reason=route-configuration-change output=$laptop_card:analog-output-speaker|input" \
	"$(since "$apply" route input | cut -d' ' -f1-6 | sed 's/^\(input\) .*/\1/' | paste -sd'|')"
echo "-- laptop: another client picks the headset, and right after it the laptop's microphone: that microphone stands"
laptop_mic=$(pactl get-default-source)
pactl set-default-source "$(pactl list short sources | cut -f2 | grep -E '^bluez_(source|input)\.' | grep -v '\.monitor$' | head -1)"
settle
mark
pactl set-default-sink "$(bt_sink "$a_addr" "$hfp")"
pactl set-default-source "$laptop_mic"
wait_line "$apply" 1 "^route bluetooth \(was speaker\) reason=route-configuration-change" || true
settle
expect_eq "another client's pick of the headset and a microphone: the headset (server)" "$(bt_sink "$a_addr" "$hfp")" "$(pactl get-default-sink)"
expect_eq "another client's pick of the headset and a microphone: the microphone it picked stands (server)" "$laptop_mic" \
	"$(pactl get-default-source)"
echo "-- laptop: the call on the speaker by choice, the headset flickers: the route and the microphone stay with the speaker"
rc set speaker --force >/dev/null
settle
expect_match "set speaker --force in the call: the laptop's microphone (server)" "^alsa_input\.sim-laptop\." "$(pactl get-default-source)"
flickers=$(lines "$apply" flicker | wc -l)
disconnect "$a_addr"
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" $((flickers + 1)) "^flicker bluetooth $a_card " || true
settle
expect_eq "headset flicker in a call on the speaker: the speaker (server)" analog-output-speaker "$(port_now)"
expect_eq "headset flicker in a call on the speaker: the override stands" speaker "$(rc query override)"
# (PipeWire makes the headset's microphone the default as its HFP comes back.)
expect_match "headset flicker in a call on the speaker: the laptop's microphone still (server)" "^alsa_input\.sim-laptop\." \
	"$(pactl get-default-source)"
rc clear >/dev/null
wait_for "the headset's HFP sink" sh -c "pactl get-default-sink | grep -q '^bluez_'" || true
settle
mark
run_rc rc call end
expect_eq "laptop call end: exit 0" 0 "$rc"
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
expect_match "laptop call end: the headset back in A2DP (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "laptop call end: route bluetooth" bluetooth "$(rc query route)"
expect_eq "laptop call end: the override from before the call is back" bluetooth "$(rc query override)"
settle
expect_both "laptop call end: the call event" "call ended route=bluetooth"
stop_watchers
run_rc rc call start --speaker
expect_eq "laptop call start --speaker with the headset: exit 0" 0 "$rc"
expect_eq "laptop call start --speaker: the headset keeps the call (rule 8)" bluetooth "$(rc query route)"
rc set speaker --force >/dev/null
expect_eq "laptop set speaker --force in the call: the speaker (server)" analog-output-speaker "$(port_now)"
rc call end >/dev/null
echo "-- laptop: set speaker under the headset is only recorded (rule 2); the call ends on the headset"
expect_eq "laptop call end: back on the headset" bluetooth "$(rc query route)"
rc set speaker >/dev/null
expect_eq "laptop set speaker under the headset: recorded" speaker "$(rc query override)"
rc call start >/dev/null
run_rc rc call end
expect_eq "laptop call end after a recorded set speaker: exit 0" 0 "$rc"
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
expect_eq "laptop call end after a recorded set speaker: the headset keeps the sound" bluetooth "$(rc query route)"
expect_eq "laptop call end after a recorded set speaker: the override recorded again" speaker "$(rc query override)"
disconnect "$a_addr"
run_rc rc call start
expect_eq "laptop with no receiver: call start exit 0" 0 "$rc"
expect_eq "laptop with no receiver: says so" "routectl: note: no receiver here; the call is on the speaker" "$err"
expect_eq "laptop with no receiver: the speaker (server)" analog-output-speaker "$(port_now)"
rc call end >/dev/null

# The server remembers the profile routectl set for the call (pipewire-pulse saves every profile set
# through it) and gives it back when the headset returns: HFP with no call.
echo "-- laptop: a headset that left during the call gets A2DP back when it returns (HFP for the call only)"
connect "$a_addr" "$a_name" a2dp+hfp
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
start_watchers
rc call start >/dev/null
expect_match "headset left in the call: HFP for it first (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
disconnect "$a_addr"
wait_line "$apply" 1 "^route speaker" || true
run_rc rc call end
expect_eq "headset left in the call: call end exit 0" 0 "$rc"
expect_eq "headset left in the call: call end says nothing on stderr" "" "$err"
expect_eq "headset left in the call: its profile from before the call is owed (profiles.json)" "$a_card $a2dp" \
	"$(python3 -c 'import json, sys; print(*(c["card"] + " " + c["profile"] for c in json.load(sys.stdin)["cards"]))' \
		<"$XDG_RUNTIME_DIR/routectl/profiles.json" | sed 's/-sbc$//')"
rc dump >"$dir/owed.json"
expect_eq "headset left in the call: the dump says what is owed (a bug report is one file)" \
	"$(python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["cards"]))' <"$XDG_RUNTIME_DIR/routectl/profiles.json")" \
	"$(python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["routectl"]["owed_profiles"]))' <"$dir/owed.json")"
run_rc rc --snapshot "$dir/owed.json" query route
expect_eq "headset left in the call: the dump reads back (--snapshot)" "0 speaker" "$rc $out"
settle
mark
connect "$a_addr" "$a_name" a2dp+hfp
wait_line "$apply" 1 "^route bluetooth" || true
wait_line "$watch" 1 "^route bluetooth \(was speaker\)" || true
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
settle
expect_match "headset back after the call: A2DP (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "headset back after the call: route bluetooth" bluetooth "$(rc query route)"
expect_step "headset back after the call: one route event" \
	"device-added bluetooth $a_card \"$a_name\"" \
	"route bluetooth (was speaker) reason=new-device-available output=$a_card"
expect_eq "headset back after the call: nothing owed any more" no \
	"$([ -e "$XDG_RUNTIME_DIR/routectl/profiles.json" ] && echo yes || echo no)"
stop_watchers
echo "-- laptop, no watcher: the headset left the call and came back; the next call still ends in A2DP"
rc call start >/dev/null
disconnect "$a_addr"
rc call end >/dev/null
connect "$a_addr" "$a_name" a2dp+hfp
run_rc rc call start
expect_eq "the next call: call start exit 0" 0 "$rc"
expect_match "the next call: HFP (server)" "^$hfp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
run_rc rc call end
expect_eq "the next call: call end exit 0" 0 "$rc"
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
expect_match "the next call ends in A2DP (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
echo "-- laptop: the headset left the call and came back with no watcher; watch --apply, started later, gives it A2DP"
rc call start >/dev/null
disconnect "$a_addr"
rc call end >/dev/null
connect "$a_addr" "$a_name" a2dp+hfp
# WirePlumber makes the headset the default a moment after its sink appears: the watchers start after
# that, so that their first line is the headset (in HFP).
[ "$server" = pulseaudio ] || wait_for "the headset as the default" sh -c "pactl get-default-sink | grep -q '^bluez_'" || true
start_watchers
# Everything after the initial lines (watch --apply may switch before start_watchers marks).
mark_watch=1 mark_apply=1
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
settle
expect_match "watch --apply started later: A2DP (server)" "^$a2dp(-[a-z0-9_]+)?$" "$(profile_of "$a_card")"
expect_eq "watch --apply started later: nothing owed any more" no \
	"$([ -e "$XDG_RUNTIME_DIR/routectl/profiles.json" ] && echo yes || echo no)"
if [ "$server" = pipewire ]; then
	# PipeWire gave it back HFP: the switch is the tail of call end, and both watchers say so.
	expect_step "watch --apply started later: one route event, the tail of call end" \
		"route bluetooth (was bluetooth) reason=call output=$a_card"
else
	# PulseAudio gave it back A2DP itself: nothing to do, nothing to say.
	expect_step "watch --apply started later: nothing to report"
fi
stop_watchers
disconnect "$a_addr"
echo "-- laptop: profiles.json cannot be written (a directory in its place): call end says so, and ends the call"
connect "$a_addr" "$a_name" a2dp+hfp
wait_for "the headset's A2DP" profile_is "$a_card" "$a2dp" || true
mkdir "$XDG_RUNTIME_DIR/routectl/profiles.json"
run_rc rc call start
expect_eq "profiles.json a directory: call start exit 0, nothing owed to read" "0 " "$rc $err"
disconnect "$a_addr"
run_rc rc call end
expect_eq "profiles.json a directory: call end exit 0" 0 "$rc"
expect_eq "profiles.json a directory: call end says what it could not record, once" \
	"routectl: cannot record the profiles owed to cards that left during a call ($XDG_RUNTIME_DIR/routectl/profiles.json: cannot read: not a regular file (a directory)); a headset that left may come back in its call profile" \
	"$err"
expect_match "profiles.json a directory: the call is over" "^call +no" "$(rc call status | head -1)"
rmdir "$XDG_RUNTIME_DIR/routectl/profiles.json"

echo "-- laptop: muted in a call, a Bluetooth headset takes the call and leaves it: the caller stays muted"
start_watchers
rc call start >/dev/null
rc input mute on >/dev/null
settle
connect "$a_addr" "$a_name" a2dp+hfp
wait_for "the headset's microphone" sh -c "pactl get-default-source | grep -q '^bluez_'" || true
settle
expect_eq "muted, Bluetooth takes the call: its microphone, muted (server)" "bluez Mute: yes" \
	"$(pactl get-default-source | cut -c1-5) $(pactl get-source-mute @DEFAULT_SOURCE@)"
disconnect "$a_addr"
wait_for "the laptop's microphone" sh -c "pactl get-default-source | grep -q '^alsa_input'" || true
settle
expect_eq "muted, Bluetooth leaves the call: the laptop's microphone, muted (server)" "alsa_input.sim-laptop.analog-stereo Mute: yes" \
	"$(pactl get-default-source) $(pactl get-source-mute @DEFAULT_SOURCE@)"
rc call end >/dev/null
stop_watchers

echo "-- laptop and a USB headset: the microphone chosen over the preferred one is back after the call"
cards_server laptop usb-headset
laptop_mic=alsa_input.sim-laptop.analog-stereo usb_mic=alsa_input.sim-usb-headset.analog-stereo
default_source_is() { [ "$(pactl get-default-source)" = "$1" ]; }
rc input set "$usb_mic" >/dev/null
pactl set-default-source "$laptop_mic"
wait_for "the laptop's microphone, chosen with pactl" default_source_is "$laptop_mic" || true
run_rc rc call start
expect_eq "preferred mic not chosen: call start exit 0" 0 "$rc"
expect_eq "preferred mic not chosen: the call on the headset's microphone (server)" "$usb_mic" "$(pactl get-default-source)"
run_rc rc call end
expect_eq "preferred mic not chosen: call end exit 0" 0 "$rc"
expect_eq "preferred mic not chosen: call end gives the laptop's microphone back (server)" "$laptop_mic" "$(pactl get-default-source)"
rc input clear >/dev/null
# The route already on the headset: only the microphone follows it into the call. Muted before (by
# an earlier call, say) while the laptop's was live, it is live in the call and muted again after it.
pactl set-default-sink alsa_output.sim-usb-headset.analog-stereo
pactl set-default-source "$laptop_mic"
pactl set-source-mute "$laptop_mic" 0
pactl set-source-mute "$usb_mic" 1
wait_for "the laptop's microphone, live" default_source_is "$laptop_mic" || true
run_rc rc --json call start
expect_eq "the headset's muted microphone: call start exit 0" 0 "$rc"
expect_eq "the headset's muted microphone: the call's, and live (server)" "$usb_mic Mute: no" \
	"$(pactl get-default-source) $(pactl get-source-mute "$usb_mic")"
expect_eq "the headset's muted microphone: call start says it is live" false "$(printf '%s' "$out" | json_get mic_muted)"
run_rc rc call end
expect_eq "the headset's muted microphone: call end exit 0" 0 "$rc"
expect_eq "the headset's muted microphone: muted again after the call, the laptop's the default (server)" \
	"$laptop_mic Mute: yes" "$(pactl get-default-source) $(pactl get-source-mute "$usb_mic")"

summary
