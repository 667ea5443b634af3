#!/usr/bin/env python3
"""make bench: routectl against pactl on private servers of both kinds, run alternately (DESIGN.md §7).

    python3 scripts/bench.py [ROUTECTL] [--only BENCH[,BENCH...]]
BENCH: query, json-query, jack, bluetooth, watch, set (all of them without --only).

Each pair is run N times in alternation, so both see the same machine state; the figures are
medians of wall time and the median of the per-round ratios. The budgets are read from DESIGN.md §7,
the one table that holds them (../shared/DESIGN.md beside the project, or $ROUTECTL_DESIGN).
"""
import argparse
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHES = ("query", "json-query", "jack", "bluetooth", "watch", "set")
# On a shared machine, one bench at a time: `--only call`.
_args = argparse.ArgumentParser(description="routectl's budgets, DESIGN.md §7")
_args.add_argument("routectl", nargs="?", default=os.path.join(ROOT, ".build/release/routectl"))
_args.add_argument("--only", type=lambda v: v.split(","), default=list(BENCHES),
                   help="comma-separated: " + ", ".join(BENCHES))
ARGS = _args.parse_args()
if not set(ARGS.only) <= set(BENCHES):
    _args.error(f"unknown bench {', '.join(sorted(set(ARGS.only) - set(BENCHES)))} (have {', '.join(BENCHES)})")
ROUTECTL = os.path.abspath(ARGS.routectl)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "300"))
SERVER = os.path.join(ROOT, "scripts/server.sh")
DESIGN = os.environ.get("ROUTECTL_DESIGN", os.path.join(ROOT, "..", "shared", "DESIGN.md"))


def budgets():
    """The numbers of DESIGN.md §7's table, by the row's first words: ratios (×) and times (ms)."""
    try:
        text = open(DESIGN, encoding="utf-8").read()
    except OSError as e:
        sys.exit(f"make bench: cannot read the budget table in {DESIGN}: {e.strerror} (set ROUTECTL_DESIGN)")
    table = text[text.index("## 7."):]
    found = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[1].startswith(("≤", "p99")):
            continue
        m = re.search(r"≤ ([0-9.]+)\s*(×|ms)", cells[1])
        if m:
            found[cells[0]] = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    return found


def budget(rows, prefix):
    for name, value in rows.items():
        if name.startswith(prefix):
            return value
    sys.exit(f"make bench: DESIGN.md §7 has no row starting {prefix!r}")


def start_server(kind, directory, cards="", bluetooth=False):
    env = dict(os.environ, CARDS=cards, BLUETOOTH="1" if bluetooth else "")
    exports = subprocess.check_output([SERVER, "start", kind, directory], text=True, env=env)
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


def watch_bench(kind, env, directory, limit):
    rounds = int(os.environ.get("BENCH_PLUGS", "100"))
    watch = Reader([ROUTECTL, "watch", "--json"], env)
    watch.wait_for('"initial"')
    subscribe = Reader(["pactl", "subscribe"], env)
    time.sleep(0.3)  # pactl subscribe prints nothing when it is ready
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
    print(f"plug (module load) to event line, {rounds} plugs")
    print(f"  routectl watch --json   p50 {ms(percentile(ours, 50))}  p99 {ms(percentile(ours, 99))}")
    print(f"  pactl subscribe         p50 {ms(percentile(theirs, 50))}  p99 {ms(percentile(theirs, 99))}")
    p99 = percentile(extra, 99)
    print(f"  routectl after pactl    p50 {ms(percentile(extra, 50))}  p99 {ms(p99)} (budget {limit * 1000:.0f} ms p99): "
          + verdict(p99 <= limit))

    # The server's own suspend-on-idle (5 s) notifies every client once; measure the idle after it.
    time.sleep(6)
    pid = watch.proc.pid
    _, switches0, ticks0 = proc_status(pid)
    time.sleep(10)
    _, switches1, ticks1 = proc_status(pid)
    wakeups = switches1 - switches0
    print(f"idle for 10 s: {wakeups} wakeups (context switches), {ticks1 - ticks0} CPU ticks (budget: no work): "
          + verdict(wakeups == 0))
    ok = p99 <= limit and wakeups == 0
    if kind == "pulseaudio":
        ok = memory_bench(env, watch) and ok
    else:
        print("memory over 10,000 events: measured on PulseAudio, whose CLI protocol flips the default this fast")
    watch.stop()
    return ok


def memory_bench(env, watch):
    """10,000 events: another client flips the default sink, over one CLI-protocol connection (what
    pacmd speaks), paced so that each flip is its own notification burst."""
    pid = watch.proc.pid
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
    growth = rss1 - rss0
    print(f"memory: {rss0} KiB at start, {rss1} KiB after {events} events ({growth:+d} KiB; budget flat): "
          + verdict(growth <= 256))
    return growth <= 256


def jack_bench(env, directory, limit):
    """The laptop's headphone jack, plugged and pulled by writing its control as hardware would: the
    server's own policy switches the port (PulseAudio's module-switch-on-port-available, WirePlumber),
    `pactl subscribe` sees that sink change, and `watch --apply` reports the route; the budget is
    routectl's line after the server's own switch."""
    rounds = int(os.environ.get("BENCH_JACKS", "100"))
    subprocess.check_call(["pactl", "set-default-sink", "alsa_output.sim-laptop.analog-stereo"], env=env)
    watch = Reader([ROUTECTL, "watch", "--apply", "--json"], env)
    watch.wait_for('"initial"')
    subscribe = Reader(["pactl", "subscribe"], env)
    time.sleep(0.3)
    total, after_server = [], []
    for i in range(2 * rounds):
        state = "in" if i % 2 == 0 else "out"
        watch.drain()
        subscribe.drain()
        start = time.perf_counter()
        subprocess.check_call([SERVER, "jack", directory, "laptop", "headphone", state])
        seen_ours = watch.wait_for('"type":"route"')
        seen_server = subscribe.wait_for("'change' on sink")
        total.append(seen_ours - start)
        after_server.append(seen_ours - seen_server)
    subscribe.stop()
    watch.stop()
    p99 = percentile(after_server, 99)
    print(f"jack plug/pull to route event, {2 * rounds} jack changes (watch --apply)")
    print(f"  jack written -> route event   p50 {ms(percentile(total, 50))}  p99 {ms(percentile(total, 99))}")
    print(f"  server's sink change -> event p50 {ms(percentile(after_server, 50))}  p99 {ms(p99)} "
          f"(budget {limit * 1000:.0f} ms p99): " + verdict(p99 <= limit))
    return p99 <= limit


def set_bench(kind, limit):
    """`set` on a server with 500 outputs (null sinks) against the script it replaces: `pactl -f json
    list sinks`, then `pactl set-default-sink`. Each side switches the default every run: routectl
    to the speaker, the script back to the earpiece, alternately. Its own server: no cards."""
    outputs = int(os.environ.get("BENCH_OUTPUTS", "500"))
    rounds = int(os.environ.get("BENCH_SET_ROUNDS", str(min(ROUNDS, 100))))
    with tempfile.TemporaryDirectory(prefix=f"routectl-bench-set-{kind}.") as directory:
        exports = subprocess.check_output([SERVER, "start", kind, directory], text=True, env=dict(os.environ, CARDS=""))
        env = dict(os.environ)
        for line in exports.splitlines():
            for assignment in line.removeprefix("export ").split(" "):
                key, _, value = assignment.partition("=")
                env[key] = value.strip("'")
        try:
            subprocess.check_call([SERVER, "plug", directory, "speaker", "bench-speaker"], env=env)
            subprocess.check_call([SERVER, "plug", directory, "earpiece", "bench-earpiece"], env=env)
            for i in range(outputs - 2):
                subprocess.check_call(["pactl", "load-module", "module-null-sink", f"sink_name=bench-null{i}"],
                                      env=env, stdout=subprocess.DEVNULL)
            deadline = time.time() + 60
            while len(subprocess.check_output(["pactl", "list", "short", "sinks"], env=env, text=True).splitlines()) < outputs:
                if time.time() > deadline:
                    sys.exit(f"make bench: {kind} did not bring up {outputs} sinks")
                time.sleep(0.2)
            subprocess.check_call(["pactl", "set-default-sink", "bench-earpiece"], env=env)

            def ours():
                start = time.perf_counter()
                subprocess.run([ROUTECTL, "set", "speaker", "--force"], env=env, stdout=subprocess.DEVNULL, check=True)
                return time.perf_counter() - start

            def theirs():
                start = time.perf_counter()
                subprocess.run(["pactl", "-f", "json", "list", "sinks"], env=env, stdout=subprocess.DEVNULL, check=True)
                subprocess.run(["pactl", "set-default-sink", "bench-earpiece"], env=env, stdout=subprocess.DEVNULL, check=True)
                return time.perf_counter() - start

            for _ in range(5):  # warm the page cache and the server
                ours()
                theirs()
            a, b = [], []
            for _ in range(rounds):
                a.append(ours())
                b.append(theirs())
            ratios = [x / y for x, y in zip(a, b)]
            ma, mb, mr = statistics.median(a), statistics.median(b), statistics.median(ratios)
            print(f"set with {outputs} outputs vs pactl -f json list sinks + pactl set-default-sink, {rounds} rounds")
            print(f"  {'routectl set speaker --force':<50} median {ma * 1000:6.2f} ms")
            print(f"  {'pactl -f json list sinks; pactl set-default-sink':<50} median {mb * 1000:6.2f} ms")
            print(f"  ratio of medians {ma / mb:.2f}x, median ratio {mr:.2f}x (budget {limit:.2f}x): {verdict(mr <= limit)}")
            return mr <= limit
        finally:
            subprocess.call([SERVER, "stop", directory])


def bluetooth_bench(env, directory, limit):
    """A headset connecting through the BlueZ stand-in: from the moment `pactl subscribe` sees its card
    appear to `watch --apply`'s route event (the headset takes the route, rule 1)."""
    rounds = int(os.environ.get("BENCH_CONNECTS", "30"))
    address = "00:1B:66:A1:B2:C3"
    subprocess.check_call([SERVER, "bt", directory, "add", address, "Bench Headset", "a2dp"], env=env,
                          stdout=subprocess.DEVNULL)
    watch = Reader([ROUTECTL, "watch", "--apply", "--json"], env)
    watch.wait_for('"initial"')
    subscribe = Reader(["pactl", "subscribe"], env)
    time.sleep(0.3)
    after_card, total = [], []
    for _ in range(rounds):
        watch.drain()
        subscribe.drain()
        start = time.perf_counter()
        subprocess.check_call([SERVER, "bt", directory, "connect", address], env=env, stdout=subprocess.DEVNULL)
        seen_card = subscribe.wait_for("'new' on card")
        seen_ours = watch.wait_for('"route":"bluetooth"')
        after_card.append(seen_ours - seen_card)
        total.append(seen_ours - start)
        subprocess.check_call([SERVER, "bt", directory, "disconnect", address], env=env, stdout=subprocess.DEVNULL)
        watch.wait_for('"type":"route"')
    subscribe.stop()
    watch.stop()
    p99 = percentile(after_card, 99)
    print(f"Bluetooth connect to route event, {rounds} connects (watch --apply)")
    print(f"  connect asked -> route event   p50 {ms(percentile(total, 50))}  p99 {ms(percentile(total, 99))}")
    print(f"  card appears -> route event    p50 {ms(percentile(after_card, 50))}  p99 {ms(p99)} "
          f"(budget {limit * 1000:.0f} ms p99): " + verdict(p99 <= limit))
    return p99 <= limit


def ms(v):
    return f"{v * 1000:6.2f} ms"


def verdict(ok):
    return "within budget" if ok else "OVER BUDGET"


def main():
    rows = budgets()
    servers = os.environ.get("BENCH_SERVERS", "pulseaudio pipewire").split()
    only = set(ARGS.only)
    results = []
    for kind in servers:
        if only & {"query", "json-query", "jack", "bluetooth", "watch"}:
            results += shared_server_benches(kind, rows, only)
        if "set" in only:
            results.append(set_bench(kind, budget(rows, "`set` with 500 outputs")))
    print("all budgets met" if all(results) else "some budgets missed (see above)")


def shared_server_benches(kind, rows, only):
    """The benches that share one server with a simulated laptop and Bluetooth."""
    results = []
    with tempfile.TemporaryDirectory(prefix=f"routectl-bench-{kind}.") as directory:
        env = start_server(kind, directory, cards="laptop", bluetooth=True)
        try:
            print(f"== {kind}: {ROUNDS} alternating rounds on a private server with a simulated laptop ({directory})")
            if "query" in only:
                results.append(compare("query route vs pactl get-default-sink",
                                       [ROUTECTL, "query", "route"], ["pactl", "get-default-sink"],
                                       budget(rows, "`routectl query`"), env))
            if "json-query" in only:
                results.append(compare("--json query vs pactl -f json list sinks",
                                       [ROUTECTL, "--json", "query"], ["pactl", "-f", "json", "list", "sinks"],
                                       budget(rows, "`routectl --json query`"), env))
            if "jack" in only:
                results.append(jack_bench(env, directory, budget(rows, "jack plug")))
            if "bluetooth" in only:
                results.append(bluetooth_bench(env, directory, budget(rows, "Bluetooth connect")))
            if "watch" in only:
                results.append(watch_bench(kind, env, directory, budget(rows, "`watch` event")))
        finally:
            subprocess.call([SERVER, "stop", directory])
    return results


if __name__ == "__main__":
    main()
