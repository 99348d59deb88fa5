# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by test_lifecycle.py, test_faults.py and test_daemon_sandbox.py: messages,
waiting, daemon processes, and pointing runnerd's docker CLI at a fake Docker daemon.

How a test reaches runnerd's docker CLI without touching the shared dockerd: runnerd gives
the CLI DOCKER_CONFIG=<runRoot>/.docker-config-none (runnerd/main.c), a directory that is
never created in production. A test creates it (owned by the service account) holding a
Docker context whose endpoint is a socket of the test's choosing: a fake daemon
(tests/fakes/fake_dockerd.py), one that never answers, or a path where nothing listens
(dockerd stopped). Removing the directory restores the real daemon. The CLI reads it on
every invocation, so this works on a running runnerd.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import SRCDIR, SOCKETS, docker, wait_until

DOCKER_CONFIG_DIR = ".docker-config-none"  # runnerd/main.c make_child_env()
CONTEXT = "rts-test"


def author(**kw):
    a = {"id": "1001", "name": "Alice", "principalId": "p-1001", "tier": "member", "bot": False,
         "integration": False}
    a.update(kw)
    return a


def message(channel, text="hello", **kw):
    m = {"op": "message", "channel": channel, "guild": True, "author": author(), "addressed": True,
         "text": text, "attachments": 0}
    m.update(kw)
    return m


def say(suite, channel, text, author_id="1001", name="Alice", timeout=180):
    return suite.cli("say", channel, "--author", author_id, "--name", name, text, timeout=timeout)


def wait_for(pred, timeout=30, step=0.05, what="condition"):
    """harness.wait_until with this module's argument order and defaults."""
    return wait_until(pred, timeout, what, step=step)


def wait_for_container(suite, timeout=60):
    return wait_for(lambda: (suite.containers() or [None])[0], timeout, what="a turn container")


def recv_until(conn, rid, timeout=60):
    """Read from a ControlConnection until the event (reply/error) for request rid."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no event for {rid}")
        o = conn.recv(timeout=left)
        if o.get("id") == rid and "event" in o:
            return o


def run_dir_entries(suite):
    return sorted(os.listdir(suite.dirs["run"]))


def turn_dirs(suite):
    """Per-turn run dirs (16 hex digits) left in runRoot."""
    return [e for e in run_dir_entries(suite) if len(e) == 16 and all(c in "0123456789abcdef" for c in e)]


def runtime_entries(suite):
    return sorted(os.listdir(suite.dirs["rt"]))


def daemon_pid(suite, name):
    pid = suite._daemon_pid(suite.procs[name])
    assert pid, f"{name} has no process"
    return pid


def proc_status(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def wait_runnerd_ready(suite, starts=1, timeout=30):
    """runnerd binds its socket before its start-up checks and clean-up; it logs "ready:"
    once it serves. starts: how many runnerd starts this suite's log holds."""
    wait_for(lambda: suite.log_tail("runnerd", limit=10**7).count(READY_LINE["runnerd"]) >= starts, timeout,
             what="runnerd's start-up clean-up")


def kill9(suite, name):
    """SIGKILL a daemon (not its runuser parent) and wait for it to be gone."""
    pid = daemon_pid(suite, name)
    os.kill(pid, signal.SIGKILL)
    suite.procs[name].wait(30)


# The log line each daemon writes once it serves.
READY_LINE = {"statd": "info: listening on", "runnerd": "info: ready: ", "brokerd": "info: listening on"}


def restart(suite, name, extra_env=None, timeout=30):
    """Start daemon name again and wait until it serves (the others are left as they are)."""
    starts = suite.log_tail(name, limit=10**7).count(READY_LINE[name]) + 1
    suite.start_daemon(name, extra_env=extra_env)
    p = suite.procs[name]

    def up():
        if p.poll() is not None:
            raise AssertionError(f"{name} exited with {p.returncode}:\n{suite.log_tail(name)}")
        return suite.log_tail(name, limit=10**7).count(READY_LINE[name]) >= starts
    wait_for(up, timeout, what=f"{name} to serve")


def start_expect_exit(suite, name, timeout=60):
    """Start daemon name (stopped before) and wait for it to exit: (status, its new log)."""
    before = len(suite.log_tail(name, limit=10**7))
    suite.start_daemon(name)
    p = suite.procs[name]
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{name} did not exit:\n{suite.log_tail(name)}")
    return p.returncode, suite.log_tail(name, limit=10**7)[before:]


def changed_config(suite, **changes):
    """A copy of the suite's config with changes (None removes a key)."""
    cfg = dict(suite.config)
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return cfg


def rewrite_config(suite, **changes):
    """Change keys of the suite's sandbox.json (None removes a key) for the next start."""
    cfg = changed_config(suite, **changes)
    with open(suite.config_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    suite.config = cfg


# ---- runnerd's docker CLI against another endpoint ----

def docker_context(suite, host):
    """Make runnerd's docker CLI use host ("unix:///path") from now on."""
    base = os.path.join(suite.dirs["run"], DOCKER_CONFIG_DIR)
    meta = os.path.join(base, "contexts", "meta", hashlib.sha256(CONTEXT.encode()).hexdigest())
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, "meta.json"), "w", encoding="utf-8") as f:
        json.dump({"Name": CONTEXT, "Metadata": {}, "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}}},
                  f)
    with open(os.path.join(base, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"currentContext": CONTEXT}, f)
    runner = suite.account("runnerd")  # the docker CLI runs as runnerd's account
    for root, dirs, files in os.walk(base):
        for n in dirs + files + ["."]:
            os.chown(os.path.join(root, n), runner.uid, runner.gid)


def real_docker(suite):
    """Undo docker_context: the real daemon again."""
    shutil.rmtree(os.path.join(suite.dirs["run"], DOCKER_CONFIG_DIR), ignore_errors=True)


class FakeDockerd:
    """tests/fakes/fake_dockerd.py on a socket under the suite's root."""

    def __init__(self, suite, mode="answer", data_root="/var/lib/docker"):
        self.path = os.path.join(suite.root, f"dockerd-{mode}.sock")
        self.log = open(os.path.join(suite.dirs["logs"], f"fake-dockerd-{mode}.log"), "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fake_dockerd.py"), "--socket", self.path,
             "--mode", mode, "--data-root", data_root, "--owner", str(suite.account("runnerd").uid)],
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, text=True)
        if self.proc.stdout.readline().strip() != "READY":
            self.stop()
            raise AssertionError("fake dockerd did not start")
        self.host = "unix://" + self.path

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def container_exists(name):
    return docker("inspect", "--type", "container", name, check=False, timeout=30).returncode == 0


def daemon_sockets_only(suite):
    """The runtime dir holds exactly the three daemons' sockets."""
    return runtime_entries(suite) == sorted(SOCKETS.values())
