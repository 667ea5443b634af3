#!/usr/bin/env python3
"""Where a one-shot command's time goes, against pactl: README "Where the misses come from".

    python3 scripts/phases.py [ROUTECTL] [--server pulseaudio|pipewire] [--rounds N]

On a private server set up as `make bench` sets up its query rows (the simulated laptop and four
null sinks), runs each pair alternately with scripts/phases.c preloaded and prints the medians of:
its start until its libraries are loaded and relocated, then until it connects, the handshake (until
its last message to the server), its last message until it leaves, and its leaving until its parent
has reaped it. Needs gcc (make deps). The stamps cost both sides the same few microseconds.
Then the server's own share of "to exit": how long it takes to answer each program's requests, sent
together to a connection already warm (scripts/requests.c, medians of 1,000 rounds).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

from private_servers import SERVER, start_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAIRS = (("query route", "pactl get-default-sink"), ("--json query", "pactl -f json list sinks"))
PHASES = ("start to loaded", "to connect", "handshake", "to exit", "exit to reaped", "total")


def stamps(cmd, env, out):
    if os.path.exists(out):
        os.unlink(out)
    start = time.monotonic_ns()
    pid = os.posix_spawnp(cmd[0], cmd, env, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    os.waitpid(pid, 0)
    end = time.monotonic_ns()
    marks = [(word[0], int(word[1:])) for word in open(out).read().split()]
    loaded = marks[0][1]
    connected = next(t for kind, t in marks if kind == "c")
    last_sent = [t for kind, t in marks if kind == "s"][-1]
    left = marks[-1][1]
    return [(b - a) / 1e6 for a, b in ((start, loaded), (loaded, connected), (connected, last_sent),
                                       (last_sent, left), (left, end), (start, end))]


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("routectl", nargs="?", default=os.path.join(ROOT, ".build/release/routectl"))
    args.add_argument("--server", choices=("pulseaudio", "pipewire"), default="pulseaudio")
    args.add_argument("--rounds", type=int, default=300)
    opts = args.parse_args()
    with tempfile.TemporaryDirectory(prefix="routectl-phases.") as top:
        library = os.path.join(top, "phases.so")
        subprocess.check_call(["gcc", "-O2", "-shared", "-fPIC", "-o", library, os.path.join(ROOT, "scripts/phases.c"), "-ldl"])
        directory = os.path.join(top, "server")
        os.mkdir(directory)
        try:
            env = start_server(opts.server, directory, cards="laptop")
            env.update(LD_PRELOAD=library, PHASES_OUT=os.path.join(top, "stamps"))
            commands = [cmd for ours, theirs in PAIRS for cmd in ([opts.routectl] + ours.split(), theirs.split())]
            times = {i: [] for i in range(len(commands))}
            for round in range(opts.rounds + 20):  # 20 to warm the page cache and the server
                for i, cmd in enumerate(commands):
                    phases = stamps(cmd, env, env["PHASES_OUT"])
                    if round >= 20:
                        times[i].append(phases)
            print(f"medians of {opts.rounds} alternating rounds on {opts.server}, ms")
            print(f"{'':28}" + "".join(f"{p:>16}" for p in PHASES))
            for i, cmd in enumerate(commands):
                name = " ".join(["routectl"] + cmd[1:]) if i % 2 == 0 else " ".join(cmd)
                print(f"{name:28}" + "".join(f"{statistics.median([r[k] for r in times[i]]):16.3f}" for k in range(len(PHASES))))
            probe = os.path.join(top, "requests")
            subprocess.check_call(["gcc", "-O2", "-o", probe, os.path.join(ROOT, "scripts/requests.c"), "-lpulse"])
            env.pop("LD_PRELOAD")
            print(f"the server's answer to each program's requests, sent together on a warm connection (median of 1000), ms")
            for line in subprocess.check_output([probe, "1000"], env=env, text=True).splitlines():
                name, median = line.split("\t")
                print(f"{name:28}{float(median) / 1000:16.3f}")
        finally:
            subprocess.call([SERVER, "stop", directory], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
