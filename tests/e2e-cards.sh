#!/usr/bin/env bash
# End-to-end tests on real ALSA cards simulated below the server (sim/, scripts/server.sh CARDS=...),
# so the server's own port, jack and profile code and its switching policies run: PulseAudio's
# module-switch-on-port-available, WirePlumber's. Each check asserts what the server reports back
# (default sink, active port, card profile, where streams are) and what routectl prints.
#   tests/e2e-cards.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
players=()
watchers=()
before_cleanup() {
	for pid in "${players[@]}" "${watchers[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
CARDS="laptop hdmi" e2e_setup cards "${1:?usage: e2e-cards.sh pulseaudio|pipewire [routectl]}" "${2:-}"

laptop=alsa_output.sim-laptop.analog-stereo
hdmi=alsa_output.sim-hdmi.hdmi-stereo
speaker_id=alsa_card.sim-laptop:analog-output-speaker
phones_id=alsa_card.sim-laptop:analog-output-headphones
hdmi_id=alsa_card.sim-hdmi:hdmi-output-0

sink_of_stream() { # the sink name a stream (by media.name) plays on
	LC_ALL=C pactl -f json list sink-inputs | python3 -c '
import json, subprocess, sys
sinks = {s["index"]: s["name"] for s in json.loads(subprocess.check_output(["pactl", "-f", "json", "list", "sinks"]))}
for i in json.load(sys.stdin):
    if i["properties"].get("media.name") == sys.argv[1]: print(sinks.get(i["sink"], "?"))' "$1"
}
# stream_on SINK: a stream plays on that sink (by name).
stream_on() {
	pactl list short sink-inputs | awk '{ print $2 }' | grep -qx "$(pactl list short sinks | awk -v s="$1" '$2 == s { print $1 }')"
}
play() { # play NAME [SINK]: a stream that stays until the test ends
	pacat --raw --client-name="$1" --stream-name="$1" ${2:+--device="$2"} </dev/zero >/dev/null 2>&1 &
	players+=($!)
	wait_for "stream $1" sh -c "pactl list sink-inputs | grep -q 'media.name = \"$1\"'"
}
# expect_both NAME LINE: the line is in both watchers' output, exactly once each.
expect_both() {
	local name file
	for file in "$watch" "$apply"; do
		name="$1 ($([ "$file" = "$watch" ] && echo watch || echo watch --apply))"
		if [ "$(lines "$file" | grep -cxF -- "$2" || true)" = 1 ]; then ok "$name"; else
			not_ok "$name" "expected once: $2" "the events:" "$(lines "$file" | sed 's/^/  /')"
		fi
	done
}

echo "== $server on a simulated laptop and HDMI: $(pactl info | sed -n 's/^Server Name: //p')"
if ! wait_for "the server settles on the laptop's speaker" server_is "$laptop analog-output-speaker"; then
	# Seen on PipeWire (the HDMI sink the default after 10 s), before routectl had run: the laptop card
	# exported with no profiles, which scripts/server.sh now starts again. What the server had, if
	# something else does it.
	{ pactl list short sinks; pactl list short cards; pactl list sinks | grep -E '^Sink|Active Port|available'; } | sed 's/^/        /' >&2
fi
expect_eq "the server starts on the laptop's speaker" "$laptop analog-output-speaker" "$(server_route)"
expect_eq "query route" speaker "$(rc query route)"
expect_eq "query headset: the jack is empty" no "$(rc query headset)"
expect_match "devices: the headphones are not available" "^ +headset +no +(yes|no|-) +$phones_id " "$(rc devices)"
# The monitor starts asleep: PulseAudio never keeps an output a jack marks unavailable as the default
# while another is available (see the end), and a sleeping monitor is the common case.
jack hdmi hdmi out
wait_for "HDMI not available" sh -c "'$routectl' devices | grep -q ' no  *[a-z-]*  *$hdmi_id '"
complete_words() {
	PATH="$(dirname "$routectl"):$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _routectl
		printf "%s\n" "${COMPREPLY[@]}"' _ "$root/completions/routectl.bash" "$@"
}
expect_eq "bash completes output ids after --device" "$speaker_id" \
	"$(complete_words routectl set speaker --device alsa_card.sim-laptop:analog-output-s)"
expect_eq "bash completes input ids after input set" "alsa_card.sim-laptop:analog-input-internal-mic" \
	"$(complete_words routectl input set alsa_card.sim-laptop:analog-input-int)"
# As bash splits the words it completes, at ':' and '=': a reply replaces the piece after the last split.
expect_eq "bash completes an id bash split at its colon" "analog-output-speaker" \
	"$(complete_words routectl set speaker --device alsa_card.sim-laptop : analog-output-s)"
expect_eq "bash completes --device=ID split at '=' and ':'" "analog-output-speaker" \
	"$(complete_words routectl set --device = alsa_card.sim-laptop : analog-output-s)"
expect_eq "bash completes the ports after a card's colon" ":analog-input-internal-mic :analog-input-mic" \
	"$(complete_words routectl input set alsa_card.sim-laptop : | tr '\n' ' ' | sed 's/ $//')"
expect_eq "fish completes input ids after input set" "alsa_card.sim-laptop:analog-input-internal-mic" \
	"$(PATH="$(dirname "$routectl"):$PATH" fish --no-config -c "source '$root/completions/routectl.fish'; complete -C 'routectl input set alsa_card.sim-laptop:analog-input-int'" | cut -f1)"
# The server typed on the line (--server, split by bash at its colon) is the one asked for ids.
expect_eq "bash: the ids come from the --server on the line" "$speaker_id" \
	"$(PULSE_SERVER=unix:/nonexistent complete_words routectl --server unix : "${PULSE_SERVER#unix:}" set speaker --device alsa_card.sim-laptop:analog-output-s)"
expect_eq "fish: the ids come from the --server on the line" "alsa_card.sim-laptop:analog-input-internal-mic" \
	"$(PULSE_SERVER=unix:/nonexistent PATH="$(dirname "$routectl"):$PATH" fish --no-config -c "source '$root/completions/routectl.fish'; complete -C 'routectl --server=$PULSE_SERVER input set alsa_card.sim-laptop:analog-input-int'" | cut -f1)"
echo "-- input set takes the ids devices prints (CARD:PORT), a microphone port too"
source_before=$(pactl get-default-source)
run_rc rc input set alsa_card.sim-laptop:analog-input-mic
expect_rc "input set on an empty mic jack: exit 1" 1
expect_eq "input set on an empty mic jack: says so" \
	"routectl: Input 'alsa_card.sim-laptop:analog-input-mic' is not available (nothing is plugged into its jack); the default input stays '$source_before'." "$err"
expect_eq "input set on an empty mic jack: the default input unchanged (server)" "$source_before" "$(pactl get-default-source)"
expect_eq "input set on an empty mic jack: nothing recorded" 0 "$(cat "$XDG_STATE_HOME/routectl/state.json" 2>/dev/null | grep -c preferred_input || true)"
jack laptop mic in
wait_for "the mic jack" sh -c "'$routectl' devices | grep -q ' yes  *alsa_card.sim-laptop:analog-input-mic '"
run_rc rc input set alsa_card.sim-laptop:analog-input-mic
expect_rc "input set CARD:PORT: exit 0" 0
expect_eq "input set CARD:PORT: the source's port, read back from the server" "analog-input-mic" \
	"$(LC_ALL=C pactl -f json list sources | python3 -c 'import json,sys; print([s["active_port"] for s in json.load(sys.stdin) if s["name"] == "alsa_input.sim-laptop.analog-stereo"][0])')"
expect_eq "input set CARD:PORT: remembered by its id" alsa_card.sim-laptop:analog-input-mic "$(json_get preferred_input <"$XDG_STATE_HOME/routectl/state.json")"
echo "-- the preferred microphone's jack emptied: set and clear leave the server's microphone (no monitor)"
mic_port() { LC_ALL=C pactl -f json list sources | python3 -c 'import json,sys; print([s["active_port"] for s in json.load(sys.stdin) if s["name"] == "alsa_input.sim-laptop.analog-stereo"][0])'; }
jack laptop mic out
on_internal_mic() { [ "$(pactl get-default-source)" = alsa_input.sim-laptop.analog-stereo ] && [ "$(mic_port)" = analog-input-internal-mic ]; }
wait_for "the server back on the internal mic" on_internal_mic
for args in "set speaker --force" "clear"; do
	# shellcheck disable=SC2086
	run_rc rc $args
	expect_rc "preferred mic unplugged, $args: exit 0" 0
	expect_eq "preferred mic unplugged, $args: the default input is still the microphone (server)" \
		alsa_input.sim-laptop.analog-stereo "$(pactl get-default-source)"
	expect_eq "preferred mic unplugged, $args: on its internal port (server)" analog-input-internal-mic "$(mic_port)"
done
expect_eq "preferred mic unplugged: the preference is kept" alsa_card.sim-laptop:analog-input-mic \
	"$(json_get preferred_input <"$XDG_STATE_HOME/routectl/state.json")"
rc input clear >/dev/null
start_watchers
expected=("route speaker reason=initial output=$speaker_id")

echo "-- headphones plugged: the server switches the port; one arrival, no removed speaker"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
wait_line "$apply" 1 "^route headset"
wait_line "$watch" 1 "^route headset"
quiet "$watch" "$apply"
expect_eq "server: headphones" "$laptop analog-output-headphones" "$(server_route)"
expect_both "plug: one route event, new-device-available" \
	"route headset (was speaker) reason=new-device-available output=$phones_id"
expect_both "plug: the headphones arrive" "device-added headset $phones_id \"Headphones (Built-in Audio)\""
expect_eq "plug: no device-removed for the hidden speaker" 0 "$(lines "$watch" device-removed | wc -l)"
expected+=("device-added headset $phones_id \"Headphones (Built-in Audio)\""
	"route headset (was speaker) reason=new-device-available output=$phones_id")
expect_eq "query speaker: still there behind the jack" yes "$(rc query speaker)"
expect_match "devices: the speaker is hidden by the jack" "^ +speaker +jack +no +$speaker_id " "$(rc devices)"
expect_fields_as_dumped "headphones plugged: every query field live as from a dump"

echo "-- set earpiece with the headphones in, on a laptop with none: rule 4, the headphones keep the sound"
run_rc rc set earpiece
expect_rc "set earpiece with no receiver anywhere: exit 3" 3
expect_eq "set earpiece with no receiver anywhere: the note" \
	"routectl: note: no receiver output here; headset output '$phones_id' keeps the sound (the preference is recorded)" "$err"
expect_eq "set earpiece with no receiver anywhere: the headphones keep the sound" "$laptop analog-output-headphones" "$(server_route)"
echo "-- set speaker --force with the headphones in, and back"
run_rc rc set speaker
expect_rc "set speaker (no --force): exit 0" 0
expect_eq "set speaker: the headphones keep the sound" "$laptop analog-output-headphones" "$(server_route)"
run_rc rc set speaker --force
expect_rc "set speaker --force: exit 0" 0
expect_eq "set speaker --force: the speaker port, read back from the server" "$laptop analog-output-speaker" "$(server_route)"
expect_eq "set speaker --force: route printed" "route     speaker" "$(printf '%s\n' "$out" | head -1)"
wait_line "$apply" 1 "^route speaker \(was headset\)"
quiet "$watch" "$apply"
expect_eq "set speaker --force: no ping-pong, the server leaves it" "$laptop analog-output-speaker" "$(server_route)"
expect_both "set speaker --force: reason override" "route speaker (was headset) reason=override output=$speaker_id"
expected+=("route speaker (was headset) reason=override output=$speaker_id")
expect_fields_as_dumped "override speaker under the headphones: every query field live as from a dump"
cleared=$(date +%s%3N)
run_rc rc clear
expect_rc "clear: exit 0" 0
expect_eq "clear: the plugged headphones take the sound again (rule 1)" "$laptop analog-output-headphones" "$(server_route)"
wait_line "$apply" 2 "^route headset"
quiet "$watch" "$apply"
expect_both "clear: reason override" "route headset (was speaker) reason=override output=$phones_id"
# The headphones carried the sound before set --force too (watch --apply's decision at the plug):
# since when is since the clear brought it back.
since=$(rc --json why | json_get since)
expect_eq "why after clear: since the clear's move, not the watcher's earlier decision" yes \
	"$([ "$(date -d "$since" +%s%3N)" -ge "$cleared" ] && echo yes || echo "no: $since")"
expected+=("route headset (was speaker) reason=override output=$phones_id")

echo "-- headphones pulled: one departure"
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
wait_line "$apply" 1 "reason=old-device-unavailable"
wait_line "$watch" 1 "reason=old-device-unavailable"
quiet "$watch" "$apply"
expect_both "unplug: one route event, old-device-unavailable" \
	"route speaker (was headset) reason=old-device-unavailable output=$speaker_id"
expect_eq "unplug: no device-added for the speaker" 0 "$(lines "$watch" device-added | grep -c speaker || true)"
expected+=("device-removed headset $phones_id \"Headphones (Built-in Audio)\""
	"route speaker (was headset) reason=old-device-unavailable output=$speaker_id")

echo "-- the monitor wakes: what the server does is reported by the event rule"
jack hdmi hdmi in
wait_line "$apply" 1 "^device-added unknown $hdmi_id"
quiet "$watch" "$apply"
expected+=("device-added unknown $hdmi_id \"HDMI / DisplayPort (HDA Intel HDMI)\"")
if [ "$(pactl get-default-sink)" = "$hdmi" ]; then
	echo "  ($server moved the default to the waking monitor)"
	expect_both "wake: taken by the server, new-device-available" \
		"route unknown (was speaker) reason=new-device-available output=$hdmi_id"
	expected+=("route unknown (was speaker) reason=new-device-available output=$hdmi_id")
	pactl set-default-sink "$laptop"
	wait_line "$apply" 2 "^route speaker \(was unknown\)"
	quiet "$watch" "$apply"
	expected+=("route speaker (was unknown) reason=route-configuration-change output=$speaker_id")
else
	echo "  ($server left the default on the speaker)"
	expect_eq "wake: no route event" 0 "$(lines "$apply" route | grep -c "^route unknown (was speaker) reason=new" || true)"
fi

echo "-- a stream the user placed on another sink stays there (rule 5)"
play music
play placed "$hdmi"
plug headset sim-usb-headphones
wait_line "$apply" 1 "^route headset .* output=sim-usb-headphones"
for _ in $(seq 1 100); do [ "$(sink_of_stream music)" = sim-usb-headphones ] && break; sleep 0.05; done
quiet "$watch" "$apply"
expect_eq "the stream on the old default followed the route" sim-usb-headphones "$(sink_of_stream music)"
expect_eq "the stream placed on HDMI stayed" "$hdmi" "$(sink_of_stream placed)"
unplug sim-usb-headphones
wait_line "$apply" 1 "^route speaker \(was headset\) reason=old-device-unavailable output=$speaker_id"
quiet "$watch" "$apply"
expect_eq "unplugged: the stream placed on HDMI still stayed" "$hdmi" "$(sink_of_stream placed)"
expected+=("device-added headset sim-usb-headphones \"sim-usb-headphones\""
	"route headset (was speaker) reason=new-device-available output=sim-usb-headphones"
	"device-removed headset sim-usb-headphones \"sim-usb-headphones\""
	"route speaker (was headset) reason=old-device-unavailable output=$speaker_id")

echo "-- another client picks HDMI: reported and respected (rule 5)"
# Within 1 s of appearing, a pick of a new output is the server's reaction to it (DESIGN.md, desktop
# policy); after that it is a user's. Wait out that window, as a person at a mixer would.
sleep 1.1
pactl set-default-sink "$hdmi"
wait_line "$apply" 1 "^route unknown"
quiet "$watch" "$apply"
expect_eq "HDMI stays the default" "$hdmi hdmi-output-0" "$(server_route)"
expect_both "another client's pick" "route unknown (was speaker) reason=route-configuration-change output=$hdmi_id"
expected+=("route unknown (was speaker) reason=route-configuration-change output=$hdmi_id")
expect_fields_as_dumped "HDMI picked by another client: every query field live as from a dump"

echo "-- the monitor sleeps: its output goes, the route falls back to the speaker"
jack hdmi hdmi out
wait_line "$apply" 1 "^route speaker \(was unknown\)"
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
quiet "$watch" "$apply"
expect_both "sleep: old-device-unavailable" "route speaker (was unknown) reason=old-device-unavailable output=$speaker_id"
expect_both "sleep: HDMI removed" "device-removed unknown $hdmi_id \"HDMI / DisplayPort (HDA Intel HDMI)\""
expected+=("device-removed unknown $hdmi_id \"HDMI / DisplayPort (HDA Intel HDMI)\""
	"route speaker (was unknown) reason=old-device-unavailable output=$speaker_id")

echo "-- a microphone plugged and pulled: the default input stays the microphone, no passing 'input none'"
mark
jack laptop mic in
wait_for "the mic jack" sh -c "'$routectl' devices | grep -q ' yes  *alsa_card.sim-laptop:analog-input-mic '"
quiet "$watch" "$apply"
jack laptop mic out
wait_for "the server back on the internal mic" on_internal_mic
quiet "$watch" "$apply"
for file in "$watch" "$apply"; do
	expect_eq "mic jack in and out: no input event (the same source throughout) ($(mode "$file"))" "" "$(since "$file" input)"
done

echo "-- watch --apply over the whole sequence: the exact event lines"
expect_eq "watch --apply: every route and device line, in order" \
	"$(printf '%s\n' "${expected[@]}")" "$(lines "$apply" route device-added device-removed override-cleared)"
expect_eq "watch: the same route lines as watch --apply" \
	"$(lines "$apply" route)" "$(lines "$watch" route)"
expect_eq "watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
stop_watchers
for pid in "${players[@]}"; do kill "$pid" 2>/dev/null || true; done
players=()

echo "-- a jack plugged while a command holds the route lock: watch --apply answers it once the lock is free"
start_watchers
lockfile=$XDG_RUNTIME_DIR/routectl/override.json.lock
# flock(1) takes the lock set, clear and call hold (-o: flock's own, let go as it exits).
flock -o "$lockfile" sleep 3 &
locker=$!
wait_for "the route lock held" sh -c "! flock -n '$lockfile' true"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
wait_line "$watch" 1 "^route headset"
expect_eq "plain watch reports the jack at once; watch --apply waits while the lock is held" "" "$(since "$apply" route)"
wait "$locker"
wait_line "$apply" 1 "^route headset"
quiet "$watch" "$apply"
expect_both "the lock let go: the same one route event in both" \
	"route headset (was speaker) reason=new-device-available output=$phones_id"
expect_eq "the lock let go: the headphones keep the sound (server)" "$laptop analog-output-headphones" "$(server_route)"
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
quiet "$watch" "$apply"
expect_eq "watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
stop_watchers

echo "-- another client turns the laptop's card off: watch --apply leaves it off (rule 5), and on again"
start_watchers
pactl set-card-profile alsa_card.sim-laptop off
wait_line "$apply" 1 "^route unknown" || true
quiet "$watch" "$apply" || true
expect_eq "card turned off: it stays off (server)" off "$(profile_of alsa_card.sim-laptop)"
# PulseAudio's module-always-sink puts its auto_null sink in at once; pipewire-pulse leaves no sink
# for a moment, then shows its own auto_null: one departure in both.
expect_eq "card turned off: the route leaves the speaker (watch --apply)" \
	"route unknown (was speaker) reason=old-device-unavailable output=auto_null" "$(since "$apply" route)"
expect_eq "card turned off: the same route line (watch)" "$(since "$apply" route)" "$(since "$watch" route)"
rc priority set "$speaker_id" >/dev/null 2>&1
expect_match "card turned off: priority lists its speaker as not present" "^1 +no +$speaker_id" "$(rc priority | sed -n 2p)"
rc priority clear >/dev/null
mark
pactl set-card-profile alsa_card.sim-laptop output:analog-stereo+input:analog-stereo
wait_line "$apply" 1 "^route speaker" || true
quiet "$watch" "$apply" || true
expect_eq "card on again: the speaker (server)" "$laptop analog-output-speaker" "$(server_route)"
# pipewire-pulse may take its auto_null away a moment before the speaker's sink comes: a watcher
# whose refetch falls in that moment reports the moment with no sink first. Both end alike.
expect_eq "card on again: its speaker appears and takes the route (watch --apply)" \
	"route speaker (was unknown) reason=new-device-available output=$speaker_id" "$(since "$apply" route | tail -1)"
expect_eq "card on again: the same last route line (watch)" "$(since "$apply" route | tail -1)" "$(since "$watch" route | tail -1)"
expect_eq "card off and on: watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
stop_watchers

echo "-- the card off beside the awake monitor: one departure; with the headphones in, set speaker turns it on for them"
jack hdmi hdmi in
wait_for "HDMI available" sh -c "'$routectl' devices | grep -q ' yes  *[a-z-]*  *$hdmi_id '"
pactl set-default-sink "$laptop"
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
start_watchers
pactl set-card-profile alsa_card.sim-laptop off
wait_line "$apply" 1 "^route unknown" || true
quiet "$watch" "$apply" || true
expect_eq "card off beside the monitor: HDMI (server)" "$hdmi hdmi-output-0" "$(server_route)"
expect_eq "card off beside the monitor: one departure (watch --apply)" \
	"route unknown (was speaker) reason=old-device-unavailable output=$hdmi_id" "$(since "$apply" route)"
expect_eq "card off beside the monitor: the same route line (watch)" "$(since "$apply" route)" "$(since "$watch" route)"
pactl set-card-profile alsa_card.sim-laptop output:analog-stereo+input:analog-stereo
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
quiet "$watch" "$apply" || true
pactl set-card-profile alsa_card.sim-laptop off
wait_for "the server on HDMI" server_is "$hdmi hdmi-output-0"
quiet "$watch" "$apply" || true
mark
run_rc rc set speaker
expect_rc "set speaker with the card off and the headphones in: exit 0 (the speaker is there)" 0
expect_match "set speaker with the card off and the headphones in: the headphones keep priority" "keeps priority" "$err"
wait_line "$apply" 1 "^route headset" || true
quiet "$watch" "$apply" || true
expect_eq "set speaker with the card off: the headphones (server)" "$laptop analog-output-headphones" "$(server_route)"
expect_eq "set speaker with the card off: routectl's own move (watch --apply)" \
	"route headset (was unknown) reason=override output=$phones_id" "$(since "$apply" route)"
expect_eq "set speaker with the card off: the same route line (watch)" "$(since "$apply" route)" "$(since "$watch" route)"
expect_eq "set speaker with the card off: no flicker" "" "$(since "$apply" flicker)"
rc clear >/dev/null
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
expect_eq "card off and set: watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
stop_watchers
jack hdmi hdmi out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"

echo "-- --force onto the hidden speaker while the monitor is awake: refused, nothing changed"
jack hdmi hdmi in
# The user picked HDMI above, so the server may make it the default again as it wakes: pick the laptop.
wait_for "HDMI available" sh -c "'$routectl' devices | grep -q ' yes  *[a-z-]*  *$hdmi_id '"
pactl set-default-sink "$laptop"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
wait_for "HDMI available" sh -c "'$routectl' devices | grep -q ' yes  *[a-z-]*  *$hdmi_id '"
run_rc rc set speaker --force
expect_rc "hidden speaker beside an available HDMI: exit 1" 1
expect_eq "hidden speaker beside an available HDMI: one line saying why" \
	"routectl: '$speaker_id' is hidden by a plugged jack, and the server keeps the default on an available output ('$hdmi_id') instead; unplug the jack or make that output unavailable" "$err"
expect_eq "hidden speaker beside an available HDMI: the headphones keep the sound" "$laptop analog-output-headphones" "$(server_route)"
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"

echo "-- set speaker --force behind the headphones, then the monitor wakes: the headphones get the sound, the override goes"
# The server makes the waking monitor the default (it keeps none whose port a jack hides beside an
# available output): routectl cannot put the sound back on that speaker, so rule 7 gives it to the
# headphones, and the override it cannot keep goes, saying why.
jack hdmi hdmi out
wait_for "HDMI not available" sh -c "'$routectl' devices | grep -q ' no  *[a-z-]*  *$hdmi_id '"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
start_watchers
run_rc rc set speaker --force
expect_rc "the monitor asleep: set speaker --force: exit 0" 0
wait_line "$apply" 1 "^route speaker \(was headset\) reason=override" || true
quiet "$watch" "$apply" || true
mark
jack hdmi hdmi in
wait_line "$apply" 1 "^route headset \(was unknown\) reason=restored" || true
wait_line "$watch" 1 "^route headset \(was unknown\) reason=restored" || true
quiet "$watch" "$apply" || true
expect_eq "the monitor woke: the headphones have the sound (server)" "$laptop analog-output-headphones" "$(server_route)"
expect_eq "the monitor woke: the override went" none "$(rc query override)"
expect_eq "the monitor woke: watch --apply says why the override went" \
	"override-cleared speaker: '$hdmi_id' appeared; the speaker behind the plugged jack cannot keep the sound beside it" \
	"$(since "$apply" override-cleared)"
for file in "$watch" "$apply"; do
	expect_eq "the monitor woke: the steal, then the headphones ($(mode "$file"))" \
		"route unknown (was speaker) reason=new-device-available output=$hdmi_id
route headset (was unknown) reason=restored output=$phones_id" "$(since "$file" route)"
done
expect_match "the monitor woke: why says restored" "^rule +restored: " "$(rc why | grep '^rule')"
stop_watchers
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"

echo "-- the monitor awake, plain watch alone: a jack plugged and pulled is one route event each; wait sees no step on the way"
# WirePlumber passes through the HDMI output for a millisecond on each, before it switches the
# laptop's port; PulseAudio goes straight. No watch --apply runs to explain anything.
"$routectl" watch >"$dir/alone.txt" 2>"$dir/alone.err" &
alone=$!
wait_line "$dir/alone.txt" 1 "^route speaker reason=initial"
jack laptop headphone in
wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
wait_line "$dir/alone.txt" 1 "^route headset" || true
"$routectl" wait unknown --timeout 1.5 >"$dir/wait.out" &
waiter=$!
wait_for "wait connected" sh -c "[ \"\$(pactl list clients | grep -c 'application.id = \"io.github.routectl\"')\" -ge 2 ]"
jack laptop headphone out
wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
wait_line "$dir/alone.txt" 1 "^route speaker \(was" || true
set +e; wait "$waiter"; wrc=$?; set -e
expect_eq "wait unknown while the headphones are pulled: the route never stood on HDMI (timeout, exit 1)" "1 " "$wrc $(cat "$dir/wait.out")"
quiet "$dir/alone.txt" || true
kill "$alone"; wait "$alone" 2>/dev/null || true
expect_eq "plain watch alone: one arrival, one departure" \
	"route headset (was speaker) reason=new-device-available output=$phones_id
route speaker (was headset) reason=old-device-unavailable output=$speaker_id" "$(lines "$dir/alone.txt" route | tail -n +2)"
expect_eq "plain watch alone: nothing on stderr" "" "$(cat "$dir/alone.err")"

echo "-- another client puts the laptop back on its speaker with the headphones in: why says so"
# PulseAudio only: WirePlumber puts a port a jack hides back on the jack's at once.
if [ "$server" = pulseaudio ]; then
	# The monitor asleep: with it awake, PulseAudio would leave a laptop whose port is hidden by the jack.
	jack hdmi hdmi out
	wait_for "HDMI not available" sh -c "'$routectl' devices | grep -q ' no  *[a-z-]*  *$hdmi_id '"
	jack laptop headphone in
	wait_for "the server on the headphones" server_is "$laptop analog-output-headphones"
	pactl set-sink-port "$laptop" analog-output-speaker
	wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
	# routectl's own last move was to the speaker (the sections before): that is rule `earlier`, also
	# what the rules would not do. Without it, as in a session where routectl moved nothing yet:
	# another client's pick, never the persistent default.
	expect_match "why: the speaker over plugged headphones is not the default's doing" \
		'^(earlier|other)$' "$(rc --json why | json_get rule)"
	rm -f "$XDG_RUNTIME_DIR/routectl/intent.json" "$XDG_RUNTIME_DIR/routectl/decision.json"
	expect_eq "why: the speaker over plugged headphones is another client's pick, not the default's" \
		other "$(rc --json why | json_get rule)"
	jack laptop headphone out
	wait_for "the server on the speaker" server_is "$laptop analog-output-speaker"
fi

# phone_tour KIND EARPIECE_PROFILE SPEAKER_PROFILE HEADPHONES_PROFILE: the phone's targets and its
# headset jack under one profile naming, with both watchers running.
phone_tour() {
	local kind=$1 ear_profile=$2 spk_profile=$3 hp_profile=$4 card=alsa_card.sim-$1
	local ear=$card:"[Out] Earpiece" spk=$card:"[Out] Speaker" hp=$card:"[Out] Headphones"
	cards_server "$kind"
	echo "== $server on a simulated $kind: profiles $(LC_ALL=C pactl -f json list cards | python3 -c 'import json,sys; print(", ".join(json.load(sys.stdin)[0]["profiles"]))')"
	expect_eq "$kind: starts on the speaker" speaker "$(rc query route)"
	run_rc rc set earpiece
	expect_rc "$kind: set earpiece: exit 0" 0
	expect_eq "$kind: set earpiece: the card's profile" "$ear_profile" "$(profile_of "$card")"
	expect_match "$kind: set earpiece: the earpiece port is active" " \[Out\] Earpiece$" "$(server_route)"
	expect_eq "$kind: set earpiece: route read back" receiver "$(rc query route)"
	expect_fields_as_dumped "$kind: the earpiece in the call profile: every query field live as from a dump"
	run_rc rc set speaker
	expect_rc "$kind: set speaker: exit 0" 0
	expect_eq "$kind: set speaker: back to a non-call profile" "$spk_profile" "$(profile_of "$card")"
	expect_match "$kind: set speaker: the speaker port" " \[Out\] Speaker$" "$(server_route)"
	rc set earpiece >/dev/null
	start_watchers
	jack "$kind" headphone in
	wait_line "$apply" 1 "^route headset"
	wait_for "$kind: the headphones" sh -c "'$routectl' query route | grep -qx headset"
	quiet "$watch" "$apply"
	expect_eq "$kind: headset jack: the profile that has the headphones" "$hp_profile" "$(profile_of "$card")"
	expect_match "$kind: headset jack: the headphones port" " \[Out\] Headphones$" "$(server_route)"
	expect_both "$kind: headset jack: one route event" "route headset (was receiver) reason=new-device-available output=$hp"
	expect_eq "$kind: headset jack: the override went" "override-cleared earpiece: '$hp' was connected" "$(lines "$apply" override-cleared)"
	jack "$kind" headphone out
	wait_line "$apply" 1 "reason=old-device-unavailable"
	wait_for "$kind: back on the speaker" sh -c "'$routectl' query route | grep -qx speaker"
	quiet "$watch" "$apply"
	expect_eq "$kind: pulled: the default target's profile" "$spk_profile" "$(profile_of "$card")"
	expect_both "$kind: pulled: one route event" "route speaker (was headset) reason=old-device-unavailable output=$spk"
	rc default earpiece >/dev/null
	run_rc rc clear
	expect_rc "$kind: clear with the default earpiece: exit 0" 0
	expect_eq "$kind: clear: the earpiece" "$ear_profile" "$(profile_of "$card")"
	jack "$kind" headphone in
	wait_line "$apply" 2 "^route headset"
	quiet "$watch" "$apply"
	# Back, often within the hold-down (then a flicker), where the server may already have selected the
	# headphones port of the call profile: the route still ends on the profile the rules choose for them.
	expect_eq "$kind: headphones back: the profile that has the headphones" "$hp_profile" "$(profile_of "$card")"
	jack "$kind" headphone out
	wait_line "$apply" 2 "reason=old-device-unavailable"
	wait_for "$kind: back on the earpiece" sh -c "'$routectl' query route | grep -qx receiver"
	quiet "$watch" "$apply"
	expect_eq "$kind: pulled with the default earpiece: its profile" "$ear_profile" "$(profile_of "$card")"
	expect_both "$kind: pulled with the default earpiece: one route event" \
		"route receiver (was headset) reason=old-device-unavailable output=$ear"
	expect_eq "$kind: watch and watch --apply saw the same route changes" "$(lines "$apply" route)" "$(lines "$watch" route)"
	expect_eq "$kind: watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
	stop_watchers
	rc default speaker >/dev/null
}
echo "-- two cards, each with a speaker: the current card's port first"
cards_server laptop phone
phone_hifi=alsa_output.sim-phone.HiFi__hw_Phone__sink
pactl set-default-sink "$phone_hifi"
jack phone headphone in
wait_for "the phone's headphones" server_is "$phone_hifi [Out] Headphones"
run_rc rc set speaker --force
expect_rc "two cards: set speaker --force: exit 0" 0
expect_eq "two cards: the phone's own speaker port, not the laptop's speaker" "$phone_hifi [Out] Speaker" "$(server_route)"
jack phone headphone out
pactl set-default-sink "$laptop"
jack laptop headphone in
wait_for "the laptop's headphones" server_is "$laptop analog-output-headphones"
run_rc rc set speaker --force
expect_rc "two cards: the laptop's hidden speaker beside the phone's: exit 1" 1
expect_eq "two cards: says which output the server would keep instead" \
	"routectl: '$speaker_id' is hidden by a plugged jack, and the server keeps the default on an available output ('alsa_card.sim-phone:[Out] Speaker') instead; unplug the jack or make that output unavailable" "$err"
expect_eq "two cards: nothing changed" "$laptop analog-output-headphones" "$(server_route)"
rc clear >/dev/null

echo "-- a desktop with a line-out only: clear has no speaker to fall back to, and why says so"
cards_server desktop
run_rc rc clear
expect_rc "desktop: clear: exit 3" 3
expect_eq "desktop: why: rule 4 with no speaker, not another client" \
	"rule        fallback: no speaker output here and no speaker to fall back to (rule 4); the route stays where it is" \
	"$(rc why | grep '^rule')"

echo "-- headphones pulled and plugged back within the hold-down, a USB headset playing: one flicker, the sound stays"
cards_server laptop usb-headset
usb=alsa_output.sim-usb-headset.analog-stereo
jack laptop headphone in
wait_for "the headphones available" sh -c "'$routectl' devices | grep -q ' yes  *[a-z-]*  *$phones_id '"
# The sound on the USB headset (another client's pick: PipeWire starts on the laptop's headphones,
# which keep it under rule 2).
pactl set-default-sink "$usb"
wait_for "the USB headset the default" default_is "$usb"
start_watchers
quiet "$watch" "$apply"
mark
jack laptop headphone out
sleep 0.5
jack laptop headphone in
wait_line "$apply" 1 "^flicker headset $phones_id away_ms="
quiet "$watch" "$apply"
expect_eq "a flicker of headphones that did not carry the sound: the USB headset keeps it (server)" "$usb" "$(pactl get-default-sink)"
expect_eq "a flicker of headphones that did not carry the sound: no route event (watch --apply)" "" "$(since "$apply" route)"
expect_eq "watch --apply said nothing on stderr" "" "$(cat "$dir/apply.err")"
stop_watchers

phone_tour phone "Voice Call" HiFi HiFi
phone_tour phone17 "HiFi (Earpiece, Mic)" "HiFi (Headphones, Mic, Speaker)" "HiFi (Headphones, Mic, Speaker)"

echo "-- a playing stream moved between the cards with the route: no stop; a real stop is said once"
# The server shows a stream it moves on no sink for a moment: no 'engaged no' for that.
cards_server laptop usb-headset
pactl set-default-sink "$usb"
wait_for "the USB headset the default" default_is "$usb"
start_watchers
play moved "$usb"
wait_line "$apply" 1 "^engaged yes" || true
quiet "$watch" "$apply"
mark
rc set speaker --force >/dev/null
wait_for "the stream on the laptop" stream_on "$laptop"
rc clear >/dev/null
wait_for "the stream back on the USB headset" stream_on "$usb"
quiet "$watch" "$apply"
for file in "$watch" "$apply"; do
	expect_eq "a stream moved with the route: no stop ($(mode "$file"))" "" "$(since "$file" engaged other-audio)"
done
for pid in "${players[@]}"; do kill "$pid" 2>/dev/null || true; done
players=()
wait_line "$apply" 1 "^engaged no" || true
wait_line "$apply" 1 "^other-audio stopped" || true
quiet "$watch" "$apply"
for file in "$watch" "$apply"; do
	expect_eq "the stream stopped: said once ($(mode "$file"))" "engaged no
other-audio stopped" "$(since "$file" engaged other-audio)"
done
stop_watchers

summary
