"""The private servers the bench and scripts/phases.py measure on (scripts/server.sh start)."""
import os
import subprocess

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.sh")


def private_server(kind, directory, cards="", bluetooth=False):
    """A private server (scripts/server.sh start), and the environment that reaches it."""
    env = dict(os.environ, CARDS=cards, BLUETOOTH="1" if bluetooth else "")
    exports = subprocess.check_output([SERVER, "start", kind, directory], text=True, env=env)
    env = dict(os.environ)
    for line in exports.splitlines():
        for assignment in line.removeprefix("export ").split(" "):
            key, _, value = assignment.partition("=")
            env[key] = value.strip("'")
    return env


def start_server(kind, directory, cards="", bluetooth=False):
    """The query rows' server: a private one with four null sinks, one of each kind."""
    env = private_server(kind, directory, cards, bluetooth)
    for kind in ("speaker", "headset", "bluetooth", "hdmi"):
        subprocess.check_call([SERVER, "plug", directory, kind, f"bench-{kind}"], env=env)
    return env
