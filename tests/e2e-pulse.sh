#!/usr/bin/env bash
# End-to-end tests of the libpulse adapter on a private server: replies matched to their own request
# (an unmovable stream), the client's identity, a non-blocking stdout, signals.
#   tests/e2e-pulse.sh pulseaudio|pipewire [ROUTECTL]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
player= watcher= bare=
before_cleanup() {
	[ -z "$player" ] || kill "$player" 2>/dev/null
	[ -z "$watcher" ] || kill "$watcher" 2>/dev/null
	[ -z "$bare" ] || kill "$bare" 2>/dev/null
}
e2e_setup pulse "${1:?usage: e2e-pulse.sh pulseaudio|pipewire [routectl]}" "${2:-}"
override="$XDG_RUNTIME_DIR/routectl/override.json"
sink_index() { pactl list short sinks | awk -v n="$1" '$2 == n {print $1}'; }
stream_sink() { pactl list short sink-inputs | awk '{print $2}' | head -1; }

echo "== $server: $(pactl info | sed -n 's/^Server Name: //p')"
plug speaker sim-speaker
plug earpiece sim-earpiece
pactl set-default-sink sim-earpiece
wait_for "default sim-earpiece" sh -c '[ "$(pactl get-default-sink)" = sim-earpiece ]'

echo "-- a stream that cannot move does not fail the route change (replies matched per request)"
# pacat has no --no-move: a few lines of libpulse play silence with PA_STREAM_DONT_MOVE.
cat >"$dir/nomove.c" <<'C'
#include <pulse/pulseaudio.h>
#include <string.h>
static const char *device;
static void write_cb(pa_stream *s, size_t n, void *u) {
	static char zero[65536];
	(void)u;
	while (n > 0) { size_t k = n < sizeof zero ? n : sizeof zero; pa_stream_write(s, zero, k, NULL, 0, PA_SEEK_RELATIVE); n -= k; }
}
static void state_cb(pa_context *c, void *u) {
	static const pa_sample_spec spec = { PA_SAMPLE_S16LE, 44100, 2 };
	(void)u;
	if (pa_context_get_state(c) != PA_CONTEXT_READY) return;
	pa_stream *s = pa_stream_new(c, "unmovable", &spec, NULL);
	pa_stream_set_write_callback(s, write_cb, NULL);
	pa_stream_connect_playback(s, device, NULL, PA_STREAM_DONT_MOVE, NULL, NULL);
}
int main(int argc, char **argv) {
	device = argc > 1 ? argv[1] : NULL;
	pa_mainloop *m = pa_mainloop_new();
	pa_context *c = pa_context_new(pa_mainloop_get_api(m), "nomove");
	pa_context_set_state_callback(c, state_cb, NULL);
	if (pa_context_connect(c, NULL, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) return 1;
	return pa_mainloop_run(m, NULL);
}
C
gcc -o "$dir/nomove" "$dir/nomove.c" -lpulse
"$dir/nomove" sim-earpiece &
player=$!
wait_for "a stream" sh -c 'pactl list short sink-inputs | grep -q .'
earpiece_index=$(sink_index sim-earpiece)
rounds=${PULSE_ROUNDS:-5}
for i in $(seq 1 "$rounds"); do
	rm -f "$override"
	run_rc rc set speaker --force
	expect_rc "round $i: set speaker --force with an unmovable stream: exit 0" 0
	expect_eq "round $i: pactl default is sim-speaker" sim-speaker "$(pactl get-default-sink)"
	expect_eq "round $i: override recorded" speaker "$([ -e "$override" ] && json_get override <"$override" || echo none)"
	expect_eq "round $i: the unmovable stream stays on sim-earpiece" "$earpiece_index" "$(stream_sink)"
	run_rc rc set earpiece
	expect_rc "round $i: set earpiece back: exit 0" 0
	expect_eq "round $i: pactl default is sim-earpiece" sim-earpiece "$(pactl get-default-sink)"
done
kill "$player"; wait "$player" 2>/dev/null || true; player=

echo "-- the client names itself as desktop clients do"
"$routectl" watch --json >"$dir/events" 2>"$dir/watch.err" &
watcher=$!
wait_event "$dir/events" 1 route reason=initial
clients=$(pactl list clients)
version=$(rc --json --version | json_get routectl)
block=$(printf '%s\n' "$clients" | awk -v RS= '/application.id = "io.github.routectl"/')
expect_match "watch's client: application.id" 'application.id = "io.github.routectl"' "$block"
expect_match "watch's client: application.name" 'application.name = "routectl"' "$block"
expect_match "watch's client: application.icon_name" 'application.icon_name = "audio-card"' "$block"
expect_match "watch's client: application.version" "application.version = \"$version\"" "$block"
# routectl plays and records nothing: libpulse's shared memory (a memfd pool of its own and, on
# PulseAudio, the server's ring buffer mapped in) is start-up and exit work for no use.
expect_eq "watch's client: no shared memory with the server (memfd or POSIX)" 0 "$(grep -cE 'memfd:pulseaudio|/pulse-shm-' "/proc/$watcher/maps" || true)"

echo "-- signals end watch cleanly (libpulse's signal handling set up and torn down)"
kill -TERM "$watcher"
set +e; wait "$watcher"; watch_rc=$?; set -e
watcher=
expect_eq "watch on SIGTERM: exit 0" 0 "$watch_rc"
expect_eq "watch on SIGTERM: nothing on stderr" "" "$(cat "$dir/watch.err")"

echo "-- a one-shot command's client leaves the server when routectl exits (no teardown of its own)"
routectl_clients() { pactl list clients | grep -c 'application.id = "io.github.routectl"' || true; }
no_routectl_client() { [ "$(routectl_clients)" = 0 ]; }
wait_for "watch's client gone" no_routectl_client || true
expect_eq "after watch: no routectl client on the server" 0 "$(routectl_clients)"
run_rc rc query route
expect_rc "query route: exit 0" 0
run_rc rc dump
expect_rc "dump (two connections): exit 0" 0
wait_for "one-shot clients gone" no_routectl_client || true
expect_eq "after query and dump: no routectl client on the server" 0 "$(routectl_clients)"

for kind in headset bluetooth hdmi; do plug "$kind" "sim-$kind"; done
echo "-- a full non-blocking stdout is waited on, not taken for a closed pipe (EAGAIN)"
result=$(python3 - "$routectl" <<'PY'
import fcntl, json, os, subprocess, sys, time
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page, far less than the dump
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen([sys.argv[1], "dump"], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(0.5)  # routectl fills the pipe and meets EAGAIN meanwhile
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
rc = p.wait()
try:
    json.loads(data)
    parsed = "json"
except ValueError:
    parsed = "truncated"
print(rc, parsed, len(data) > 4096, p.stderr.read().decode().strip() or "-")
PY
)
expect_eq "dump into a small non-blocking pipe: exit 0, whole JSON, more than the pipe holds" "0 json True -" "$result"

# The status asks for the default source by name (its mute is all it shows): a server without one
# answers that it has none, which is the answer, not a failure. PipeWire always has a source (a
# monitor of its dummy sink when nothing else), so a bare PulseAudio beside the suite's server.
if [ "$server" = pulseaudio ]; then
	echo "-- a server without a single source: the status has no microphone, and no error"
	mkdir -p "$dir/bare/run"
	# Its own runtime and state paths, none of the suite server's.
	env -u PULSE_RUNTIME_PATH -u PULSE_STATE_PATH -u PULSE_SERVER XDG_RUNTIME_DIR=$dir/bare/run HOME=$dir/bare pulseaudio -n --daemonize=no --exit-idle-time=-1 --use-pid-file=no \
		--load="module-native-protocol-unix auth-anonymous=1 socket=$dir/bare/native" >"$dir/bare/log" 2>&1 &
	bare=$!
	wait_for "bare PulseAudio" env PULSE_SERVER="unix:$dir/bare/native" pactl info
	expect_eq "bare server: no default source (pactl)" "(null)" \
		"$(PULSE_SERVER="unix:$dir/bare/native" pactl info | sed -n 's/^Default Source: //p')"
	run_rc rc --server "unix:$dir/bare/native" query mic_muted
	expect_eq "bare server: query mic_muted" none "$out"
	expect_rc "bare server: query mic_muted exits 0" 0
	run_rc rc --server "unix:$dir/bare/native" --json query
	expect_eq "bare server: --json query's mic_muted" null "$(printf '%s' "$out" | json_get mic_muted)"
	expect_rc "bare server: --json query exits 0" 0
	run_rc rc --server "unix:$dir/bare/native" query
	expect_eq "bare server: the status's mic_muted row" "mic_muted    none" "$(printf '%s\n' "$out" | grep '^mic_muted ')"
	kill "$bare"
	bare=
fi

summary
