# Assertions and set-up for routectl's shell-driven end-to-end tests. Each check prints one line;
# the run ends with "N passed, N failed" and fails when anything failed.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
passed=0
failed=0

ok() { passed=$((passed + 1)); printf '  ok    %s\n' "$1"; }
not_ok() {
	failed=$((failed + 1))
	printf '  FAIL  %s\n' "$1"
	shift
	for line in "$@"; do printf '        %s\n' "$line"; done
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "expected: $2" "actual:   $3"; fi
}

# expect_match NAME REGEX ACTUAL
expect_match() {
	if printf '%s' "$3" | grep -Eq -- "$2"; then ok "$1"; else not_ok "$1" "expected to match: $2" "actual: $3"; fi
}

# run_rc CMD...: runs it, leaving stdout in $out, stderr in $err and the status in $rc.
run_rc() {
	local o e
	o=$(mktemp) e=$(mktemp)
	set +e
	"$@" >"$o" 2>"$e"
	rc=$?
	set -e
	out=$(cat "$o") err=$(cat "$e")
	rm -f "$o" "$e"
}

# json_get KEY.PATH: reads stdin as JSON and prints one member (Python, so the parser under test is not the judge).
json_get() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if not isinstance(v, str) else v)' "$1"
}

# wait_for DESCRIPTION CMD...: retries CMD for up to 10 s (PipeWire acts shortly after it acknowledges).
wait_for() {
	local what=$1 i
	shift
	for i in $(seq 1 200); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.05
	done
	echo "  timed out waiting for: $what" >&2
	return 1
}

summary() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# events FILE TYPE [FIELD=VALUE...]: how many NDJSON lines of FILE have that type and fields.
events() {
	python3 - "$@" <<'PY'
import json, sys
path, kind, *conds = sys.argv[1:]
n = 0
for line in open(path):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("type") != kind:
        continue
    ok = True
    for c in conds:
        k, v = c.split("=", 1)
        val = e
        for part in k.split("."):
            val = val.get(part) if isinstance(val, dict) else None
        if str(val).lower() != v.lower():
            ok = False
    n += ok
print(n)
PY
}

# wait_event FILE COUNT TYPE [FIELD=VALUE...]: waits until at least COUNT such events were printed.
wait_event() {
	local file=$1 count=$2
	shift 2
	for _ in $(seq 1 200); do
		[ "$(events "$file" "$@")" -ge "$count" ] && return 0
		sleep 0.05
	done
	echo "  timed out waiting for $count x $* in $file" >&2
	return 1
}

# expect_same NAME CMD_A... -- CMD_B...: both exit 0, print something, and print the same.
expect_same() {
	local name=$1 a=() ra oa
	shift
	while [ "$1" != "--" ]; do a+=("$1"); shift; done
	shift
	run_rc "${a[@]}"
	ra=$rc oa=$out
	run_rc "$@"
	if [ "$ra" = 0 ] && [ "$rc" = 0 ] && [ -n "$oa" ] && [ "$oa" = "$out" ]; then ok "$name"; else
		not_ok "$name" "first:  exit $ra: $(printf '%s' "$oa" | head -3)" "second: exit $rc: $(printf '%s' "$out" | head -3)"
	fi
}

# expect_fields_as_dumped NAME: every query field (as the completions offer them), in text and JSON,
# says live what it says from a dump taken just before: --snapshot reads the whole state, while a
# live field may read less of it (QueryField.parts). Only for a settled state.
expect_fields_as_dumped() {
	local snap=$dir/fields-dump.json field live dumped bad=()
	"$routectl" dump >"$snap"
	for field in $(bash -c '. <("$1" completions bash); COMP_WORDS=(routectl query ""); COMP_CWORD=2; _routectl
		echo "${COMPREPLY[*]}"' _ "$routectl"); do
		for json in "" --json; do
			live=$("$routectl" $json query "$field" 2>&1; echo "exit $?")
			dumped=$("$routectl" $json --snapshot "$snap" query "$field" 2>&1; echo "exit $?")
			[ "$live" = "$dumped" ] || bad+=("$json query $field: live '${live//$'\n'/ }', dumped '${dumped//$'\n'/ }'")
		done
	done
	[ -n "${field:-}" ] || bad+=("no field completed")
	if [ ${#bad[@]} = 0 ]; then ok "$1"; else not_ok "$1" "${bad[@]}"; fi
}

# expect_rc NAME EXPECTED: the status of the last run_rc; on a mismatch, its stderr says why.
expect_rc() {
	if [ "$2" = "$rc" ]; then ok "$1"; else not_ok "$1" "expected exit $2, got $rc" "stderr: $err"; fi
}

# e2e_setup SUITE SERVER [ROUTECTL]: starts a private SERVER (pulseaudio or pipewire) in a fresh
# directory, exports what reaches it, and stops and removes it at exit, after the script's own
# before_cleanup if it defines one. A server that cannot start fails the run: nothing is skipped.
e2e_setup() {
	suite=$1 server=$2
	routectl=${3:-$root/.build/release/routectl}
	[ -x "$routectl" ] || { echo "e2e: no routectl at $routectl (run make build)" >&2; exit 1; }
	# Absolute, so that checks which run it from another directory still find it (make passes it relative).
	routectl=$(cd "$(dirname "$routectl")" && pwd)/$(basename "$routectl")
	dir=$(mktemp -d "/tmp/routectl-$1-$server.XXXXXX")
	trap e2e_cleanup EXIT
	eval "$("$root/scripts/server.sh" start "$server" "$dir")"
}

# cards_server CARD...: replaces the running server with a fresh one of the same kind on these
# simulated cards (scripts/server.sh: laptop desktop usb-headset hdmi phone phone17).
cards_server() {
	"$root/scripts/server.sh" stop "$dir"
	rm -rf "$dir"
	dir=$(mktemp -d "/tmp/routectl-$suite-$server.XXXXXX")
	eval "$(CARDS="$*" "$root/scripts/server.sh" start "$server" "$dir")"
}

# jack CARD JACK in|out: plugs or pulls a simulated card's jack, as the hardware would.
jack() { "$root/scripts/server.sh" jack "$dir" "$@"; }

# lines FILE [TYPE...]: the text events of FILE without their time stamps, only these types if given.
lines() {
	local file=$1
	shift
	if [ $# -eq 0 ]; then cut -d' ' -f2- "$file"; else cut -d' ' -f2- "$file" | grep -E "^($(IFS='|'; echo "$*")) " || true; fi
}

# ms HH:MM:SS.mmm: an event line's time stamp in milliseconds of the day.
ms() { local h m sec; IFS=: read -r h m sec <<<"$1"; echo $(( (10#$h * 3600 + 10#$m * 60) * 1000 + 10#${sec%.*} * 1000 + 10#${sec#*.} )); }

# wait_line FILE COUNT REGEX: waits until at least COUNT event lines of FILE (time stamps cut) match.
wait_line() {
	local file=$1 count=$2 regex=$3
	for _ in $(seq 1 200); do
		[ "$(lines "$file" | grep -cE -- "$regex")" -ge "$count" ] && return 0
		sleep 0.05
	done
	echo "  timed out waiting for $count x /$regex/ in $file:" >&2
	lines "$file" | sed 's/^/        /' >&2
	return 1
}

e2e_cleanup() {
	if declare -F before_cleanup >/dev/null; then before_cleanup || true; fi
	"$root/scripts/server.sh" stop "$dir"
	rm -rf "$dir"
}

rc() { "$routectl" "$@"; }
plug() { "$root/scripts/server.sh" plug "$dir" "$1" "$2"; wait_for "sink $2" sh -c "pactl list short sinks | grep -q '$2'"; }
unplug() { "$root/scripts/server.sh" unplug "$dir" "$1"; wait_for "no sink $1" sh -c "! pactl list short sinks | grep -q '$1'"; }

# What the server says, not what routectl says: the default sink and its active port, a card's profile.
server_route() {
	local sink
	sink=$(pactl get-default-sink)
	printf '%s %s\n' "$sink" "$(LC_ALL=C pactl -f json list sinks | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["name"] == sys.argv[1]: print(s["active_port"])' "$sink")"
}
server_is() { [ "$(server_route)" = "$1" ]; }
default_is() { [ "$(pactl get-default-sink)" = "$1" ]; }
profile_of() { LC_ALL=C pactl -f json list cards | python3 -c '
import json, sys
for c in json.load(sys.stdin):
    if c["name"] == sys.argv[1]: print(c["active_profile"])' "$1"; }

# quiet FILE...: waits until the files have not grown for 0.6 s (the servers' own policies act within
# ~0.3 s), so that a fight between routectl and the server would show in them; at most 30 s.
quiet() {
	local before after i
	for i in $(seq 1 50); do
		before=$(cat "$@" | wc -c)
		sleep 0.6
		after=$(cat "$@" | wc -c)
		[ "$before" = "$after" ] && return 0
	done
	echo "  never quiet: $*" >&2
	return 1
}

# start_watchers / stop_watchers: plain watch and watch --apply side by side, text events in $watch
# and $apply (the script keeps a watchers=() array for its cleanup); mark notes where they stand.
start_watchers() {
	watch=$dir/watch.txt apply=$dir/apply.txt
	: >"$dir/watch.err" >"$dir/apply.err"
	"$routectl" watch >"$watch" 2>"$dir/watch.err" &
	watchers+=($!)
	# Plain watch first: whatever watch --apply does as it starts, plain watch sees happen.
	wait_line "$watch" 1 "^route .* reason=initial"
	"$routectl" watch --apply >"$apply" 2>"$dir/apply.err" &
	watchers+=($!)
	wait_line "$apply" 1 "^route .* reason=initial"
	mark
}
stop_watchers() {
	for pid in "${watchers[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
	watchers=()
}
mark() { mark_watch=$(wc -l <"$watch") mark_apply=$(wc -l <"$apply"); }

# ---- Bluetooth (sim/bluez) and the watchers' events since a mark, shared by the Bluetooth and call suites.
# bluetooth_names: the two servers' names for the same things, set for $server: the A2DP and HFP
# profiles, and the headset's sink under each (PulseAudio names the sink after the profile; PipeWire
# keeps the name and gives a new index). PipeWire reports the active A2DP/HFP profile with its codec
# (a2dp-sink-sbc): profile_is accepts the profile or that.
bluetooth_names() {
	if [ "$server" = pulseaudio ]; then
		a2dp=a2dp_sink hfp=handsfree_head_unit
		bt_sink() { echo "bluez_sink.${1//:/_}.${2:-a2dp_sink}"; }
	else
		a2dp=a2dp-sink hfp=headset-head-unit
		bt_sink() { echo "bluez_output.${1//:/_}.1"; }
	fi
}

# profile_is CARD PROFILE: the active profile is PROFILE, or PipeWire's codec variant of it.
profile_is() { [[ "$(profile_of "$1")" =~ ^$2(-[a-z0-9_]+)?$ ]]; }
card_present() { pactl list short cards | grep -q "	$1	"; }
sink_present() { pactl list short sinks | grep -q "	$1	"; }
bt() { "$root/scripts/server.sh" bt "$dir" "$@"; }
# connect ADDR NAME PROFILES / disconnect ADDR: the headset comes or goes and its card with it.
connect() {
	if [ "$(bt status | grep -c "$1" || true)" = 0 ]; then bt add "$1" "$2" "$3"; fi
	bt connect "$1"
	wait_for "card of $1" card_present "bluez_card.${1//:/_}"
	wait_for "sink of $1" sh -c "pactl list short sinks | grep -q 'bluez_.*${1//:/_}'"
}
disconnect() {
	bt disconnect "$1"
	wait_for "no card of $1" sh -c "! pactl list short cards | grep -q 'bluez_card.${1//:/_}'"
}
# mark / since FILE [TYPE...]: the event lines printed since the last mark (time stamps cut).
since() {
	local file=$1 from
	shift
	from=$([ "$file" = "$watch" ] && echo "$mark_watch" || echo "$mark_apply")
	tail -n +"$((from + 1))" "$file" >"$dir/since.txt"
	lines "$dir/since.txt" "$@"
}
mode() { [ "$1" = "$watch" ] && echo watch || echo watch --apply; }
# expect_step NAME LINE...: since the mark, each watcher printed exactly these route and device
# lines, in this order (nothing else of those types).
expect_step() {
	local name=$1 file want got
	shift
	want=$(printf '%s\n' "$@")
	for file in "$watch" "$apply"; do
		got=$(since "$file" route device-added device-removed)
		if [ "$got" = "$want" ]; then ok "$name ($(mode "$file"))"; else
			not_ok "$name ($(mode "$file"))" "expected:" "$(printf '%s\n' "$@" | sed 's/^/  /')" "the events since the step began:" "$(since "$file" | sed 's/^/  /')"
		fi
	done
}
# expect_cleared NAME [LINE]: since the mark, watch --apply (which alone clears an override while it
# runs) printed this override-cleared line, or none; plain watch none.
expect_cleared() {
	expect_eq "$1 (watch --apply)" "${2:-}" "$(since "$apply" override-cleared)"
	expect_eq "$1 (watch)" "" "$(since "$watch" override-cleared)"
}
settle() { quiet "$watch" "$apply" || true; }

# session_bus: a private session bus in $dir with no service directories (DESIGN.md §5: Debian's
# callaudiod package installs a D-Bus service file, and a standard bus would start the real callaudiod
# for a name nobody owns), exported as DBUS_SESSION_BUS_ADDRESS; stop_session_bus ends it.
session_bus() {
	cat >"$dir/session.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/session_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
	local out
	out=$(dbus-daemon --config-file="$dir/session.conf" --fork --print-address=1 --print-pid=1)
	export DBUS_SESSION_BUS_ADDRESS=$(printf '%s\n' "$out" | sed -n 1p)
	session_bus_pid=$(printf '%s\n' "$out" | sed -n 2p)
}
stop_session_bus() { [ -z "${session_bus_pid:-}" ] || kill "$session_bus_pid" 2>/dev/null || true; session_bus_pid=; }
