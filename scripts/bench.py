#!/usr/bin/env python3
"""make bench: routectl against pactl on one private PulseAudio, run alternately (DESIGN.md §7).

Each pair is run N times in alternation, so both see the same machine state; the figures are
medians of wall time and the median of the per-round ratios. Budgets: query <= 1.25x
`pactl get-default-sink`, `--json query` <= 1.0x `pactl -f json list sinks`.
"""
import os
import statistics
import subprocess
import sys
import tempfile
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
            ]
        finally:
            subprocess.call([SERVER, "stop", directory])
    print("all budgets met" if all(results) else "some budgets missed (see above)")


if __name__ == "__main__":
    main()
