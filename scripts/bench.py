#!/usr/bin/env python3
"""make bench: routectl against pactl on one private PulseAudio, run alternately (DESIGN.md §7).

Each pair is run N times in alternation, so both see the same machine state; the figures are
medians of wall time and the median of the per-round ratios. Budgets: query <= 1.25x
`pactl get-default-sink`, `--json query` <= 1.0x `pactl -f json list sinks`.
"""
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTECTL = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release/routectl"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "300"))
SERVER = os.path.join(ROOT, "scripts/server.sh")


def start_server(directory):
    exports = subprocess.check_output([SERVER, "start", "pulseaudio", directory], text=True)
    env = dict(os.environ)
    for line in exports.splitlines():
        for assignment in line.removeprefix("export ").split(" "):
            key, _, value = assignment.partition("=")
            env[key] = value.strip("'")
    for kind in ("speaker", "headset", "bluetooth", "hdmi"):
        subprocess.check_call([SERVER, "plug", directory, kind, f"bench-{kind}"], env=env)
    return env


def wall(cmd, env):
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def compare(name, ours, theirs, budget, env):
    for _ in range(20):  # warm the page cache and the server
        wall(ours, env)
        wall(theirs, env)
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(wall(ours, env))
        b.append(wall(theirs, env))
    ratios = [x / y for x, y in zip(a, b)]
    ma, mb, mr = statistics.median(a), statistics.median(b), statistics.median(ratios)
    verdict = "within budget" if mr <= budget else "OVER BUDGET"
    print(f"{name}")
    print(f"  {' '.join(os.path.basename(ours[0]) if i == 0 else w for i, w in enumerate(ours)):<34} median {ma * 1000:6.2f} ms")
    print(f"  {' '.join(theirs):<34} median {mb * 1000:6.2f} ms")
    print(f"  ratio of medians {ma / mb:.2f}x, median ratio {mr:.2f}x (budget {budget:.2f}x): {verdict}")
    return mr <= budget


class Reader:
    """Timestamps every line a child prints, as it arrives."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line))

    def wait_for(self, needle, timeout=5.0):
        end = time.perf_counter() + timeout
        while True:
            left = end - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no line with {needle!r}")
            at, line = self.lines.get(timeout=left)
            if needle in line:
                return at

    def drain(self):
        n = 0
        while True:
            try:
                self.lines.get_nowait()
                n += 1
            except queue.Empty:
                return n

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def proc_status(pid):
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu_ticks = int(stat[11]) + int(stat[12])
    switches = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return int(fields["VmRSS"].split()[0]), switches, cpu_ticks


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def watch_bench(env, directory):
    rounds = int(os.environ.get("BENCH_PLUGS", "100"))
    watch = Reader([ROUTECTL, "watch", "--json"], env)
    watch.wait_for('"initial"')
    subscribe = Reader(["pactl", "subscribe"], env)
    time.sleep(0.3)
    ours, theirs, extra = [], [], []
    for i in range(rounds):
        name = f"lat{i}"
        watch.drain()
        subscribe.drain()
        start = time.perf_counter()
        module = subprocess.check_output(
            ["pactl", "load-module", "module-null-sink", f"sink_name={name}",
             "sink_properties='device.form_factor=headphone device.bus=usb'"], env=env, text=True).strip()
        seen_pactl = subscribe.wait_for("'new' on sink")
        seen_ours = watch.wait_for(f'"name":"{name}"')
        ours.append(seen_ours - start)
        theirs.append(seen_pactl - start)
        extra.append(seen_ours - seen_pactl)
        subprocess.check_call(["pactl", "unload-module", module], env=env)
        watch.wait_for('"device-removed"')
    subscribe.stop()
    ms = lambda v: f"{v * 1000:6.2f} ms"
    print(f"plug (module load) to event line, {rounds} plugs")
    print(f"  routectl watch --json   p50 {ms(percentile(ours, 50))}  p99 {ms(percentile(ours, 99))}")
    print(f"  pactl subscribe         p50 {ms(percentile(theirs, 50))}  p99 {ms(percentile(theirs, 99))}")
    p99 = percentile(extra, 99)
    print(f"  routectl after pactl    p50 {ms(percentile(extra, 50))}  p99 {ms(p99)} (budget 5 ms p99): "
          + ("within budget" if p99 <= 0.005 else "OVER BUDGET"))

    pid = watch.proc.pid
    _, switches0, ticks0 = proc_status(pid)
    time.sleep(10)
    _, switches1, ticks1 = proc_status(pid)
    wakeups = switches1 - switches0
    print(f"idle for 10 s: {wakeups} wakeups (context switches), {ticks1 - ticks0} CPU ticks (budget: none): "
          + ("within budget" if wakeups == 0 else "OVER BUDGET"))

    # 10,000 events: another client flips the default sink, over one CLI-protocol connection
    # (what pacmd speaks), paced so that each flip is its own notification burst.
    cli = os.path.join(env["PULSE_RUNTIME_PATH"], "bench-cli")
    subprocess.check_call(["pactl", "load-module", "module-cli-protocol-unix", f"socket={cli}"], env=env,
                          stdout=subprocess.DEVNULL)
    import socket
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(cli)
    conn.setblocking(False)
    watch.drain()
    rss0, _, _ = proc_status(pid)
    events = 0
    flips = 0
    deadline = time.time() + 180
    while events < 10000 and time.time() < deadline:
        conn.sendall(f"set-default-sink bench-{'speaker' if flips % 2 else 'headset'}\n".encode())
        flips += 1
        time.sleep(0.004)
        try:
            conn.recv(65536)
        except BlockingIOError:
            pass
        events += watch.drain()
    conn.close()
    rss1, _, _ = proc_status(pid)
    watch.stop()
    growth = rss1 - rss0
    print(f"memory: {rss0} KiB at start, {rss1} KiB after {events} events ({growth:+d} KiB; budget flat): "
          + ("within budget" if growth <= 256 else "OVER BUDGET"))
    return p99 <= 0.005 and wakeups == 0 and growth <= 256


def main():
    with tempfile.TemporaryDirectory(prefix="routectl-bench.") as directory:
        env = start_server(directory)
        try:
            print(f"make bench: {ROUNDS} alternating rounds on a private PulseAudio ({directory})")
            results = [
                compare("query route vs pactl get-default-sink",
                        [ROUTECTL, "query", "route"], ["pactl", "get-default-sink"], 1.25, env),
                compare("--json query vs pactl -f json list sinks",
                        [ROUTECTL, "--json", "query"], ["pactl", "-f", "json", "list", "sinks"], 1.0, env),
                watch_bench(env, directory),
            ]
        finally:
            subprocess.call([SERVER, "stop", directory])
    print("all budgets met" if all(results) else "some budgets missed (see above)")


if __name__ == "__main__":
    main()
