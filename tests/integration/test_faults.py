# SPDX-License-Identifier: Apache-2.0
"""Faults (issue 5): a daemon killed with SIGKILL mid-turn and restarted, a Docker daemon
that is gone or hangs, and a state directory that is full or read-only.

The shared dockerd is never stopped: runnerd's docker CLI is pointed at a socket where
nothing listens, or at tests/fakes/fake_dockerd.py in "hang" mode, through a Docker context
in the CLI's config directory (see lifecycle_helpers.py). The state directory faults use a
small tmpfs mounted over the suite's state directory."""
import json
import os
import subprocess
import time

import pytest

from harness import Suite
from lifecycle_helpers import (FakeDockerd, container_exists, daemon_sockets_only, docker_context, kill9, message,
                               real_docker, recv_until, restart, say, turn_dirs, wait_for, wait_for_container,
                               wait_runnerd_ready)

TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def probe_suite(rts_env):
    """Turns that hang until something ends them (probe image, "#hang")."""
    s = Suite(rts_env, config={"image": rts_env.probe_image(), "turnTimeoutMs": 120000})
    wait_runnerd_ready(s)
    yield s
    s.stop()


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("daemon", ["statd", "runnerd", "brokerd"])
def test_kill9_mid_turn_then_restart(probe_suite, daemon):
    s = probe_suite
    ch = f"guild-9/kill-{daemon}"
    assert s.cli("on", ch).returncode == 0
    state = read(s.state_file)
    c = s.connect(timeout=60)
    rid = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    name = wait_for_container(s)

    kill9(s, daemon)
    if daemon == "statd":
        # runnerd lost the turn's requester: it cancels the turn (HACKING.md), removals and
        # run dir included.
        wait_for(lambda: not container_exists(name) and not turn_dirs(s), 15, what="the turn's clean-up")
    elif daemon == "brokerd":
        # runnerd lost the broker: the turn fails and is cleaned up as usual.
        ev = recv_until(c, rid, timeout=15)
        assert ev["event"] == "error" and ev["error"] == "turn_failed", ev
        wait_for(lambda: not container_exists(name), 15, what="the container's removal")
    else:
        # statd answers the waiting client; the container is an orphan until runnerd is back.
        ev = recv_until(c, rid, timeout=15)
        assert ev == {"id": rid, "event": "error", "error": "unavailable"}
        assert container_exists(name)

    restart(s, daemon)
    if daemon == "runnerd":
        log = s.log_tail("runnerd", limit=10**7)
        assert f"removed stale container {name}" in log
        assert "removed the stale run dir" in log
    assert not container_exists(name)
    assert turn_dirs(s) == []
    assert daemon_sockets_only(s)
    # The state file is intact, and the channel works again.
    assert read(s.state_file) == state
    p = say(s, ch, "report please")
    assert p.returncode == 0, p.stderr + s.logs()
    assert json.loads(p.stdout)["input"]
    assert s.containers() == [] and turn_dirs(s) == []


@pytest.fixture
def short_suite(make_suite, rts_env):
    s = make_suite(config={"image": rts_env.probe_image(), "turnTimeoutMs": TIMEOUT_MS})
    wait_runnerd_ready(s)  # its start-up checks use the real daemon
    return s


def status(s, ch):
    return s.control({"op": "status", "channel": ch})[0]


def test_dockerd_gone_turns_fail_fast_and_generically(short_suite):
    s = short_suite
    ch = "guild-9/no-dockerd"
    assert s.cli("on", ch).returncode == 0
    docker_context(s, "unix://" + os.path.join(s.root, "no-dockerd.sock"))
    try:
        c = s.connect(timeout=60)
        t0 = time.monotonic()
        rid = c.send(message(ch, "report please"))
        assert c.recv()["route"] == "sandbox"
        ev = recv_until(c, rid, timeout=30)
        assert ev["event"] == "error" and ev["error"] in ("turn_failed", "cleanup_failed"), ev
        assert time.monotonic() - t0 < TIMEOUT_MS / 1000 + 6
        assert set(ev) == {"id", "event", "error"}  # nothing of docker's message
        assert status(s, ch)["running"] is False
    finally:
        real_docker(s)
    assert say(s, ch, "report please").returncode == 0
    assert turn_dirs(s) == []


def test_dockerd_hanging_cleanup_failure_never_hangs_the_queue(short_suite):
    """The container is running when dockerd stops answering: the deadline kills the CLI,
    docker rm -f gets no answer within its 5 s, the turn ends with cleanup_failed and one
    log line for the operator; the next turn of the channel runs; the orphan goes at the next
    runnerd start."""
    s = short_suite
    ch = "guild-9/hanging-dockerd"
    assert s.cli("on", ch).returncode == 0
    fake = FakeDockerd(s, mode="hang")
    try:
        c = s.connect(timeout=60)
        rid = c.send(message(ch, "#hang"))
        assert c.recv()["route"] == "sandbox"
        name = wait_for_container(s)
        t0 = time.monotonic()
        docker_context(s, fake.host)
        ev = recv_until(c, rid, timeout=40)
        took = time.monotonic() - t0
        assert ev == {"id": rid, "event": "error", "error": "cleanup_failed"}
        # deadline (3 s from the start) + one removal bounded by 5 s, with slack
        assert took < TIMEOUT_MS / 1000 + 5 + 4, took
        log = s.log_tail("runnerd")
        assert sum(1 for line in log.splitlines() if "could not be removed" in line) == 1
        assert f"container {name} could not be removed: inspect it" in log
        assert status(s, ch)["running"] is False
        assert turn_dirs(s) == []
    finally:
        real_docker(s)
        fake.stop()
    assert container_exists(name)  # the orphan: removal never got through
    p = say(s, ch, "report please")  # the queue did not hang
    assert p.returncode == 0, p.stderr
    s.stop_daemon("runnerd")
    restart(s, "runnerd")
    assert not container_exists(name)


@pytest.fixture
def tmpfs_state(make_suite):
    """A suite whose state directory is a 64 KiB tmpfs (mounted while statd is stopped)."""
    s = make_suite()
    assert s.cli("on", "guild-9/before").returncode == 0
    s.stop_daemon("statd")
    saved = read(s.state_file)
    d = s.dirs["state"]
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=64k,mode=0700,uid={s.env.uid},gid={s.env.gid}",
                    "rts-state", d], check=True)
    try:
        with open(s.state_file, "wb") as f:
            f.write(saved)
        os.chown(s.state_file, s.env.uid, s.env.gid)
        os.chmod(s.state_file, 0o600)
        restart(s, "statd")
        yield s
    finally:
        s.stop_daemon("statd")
        subprocess.run(["umount", "-l", d], check=False)


def fill(path):
    """Write zeros to path until the file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def assert_write_refused_and_state_kept(s, op_args, ch):
    before = read(s.state_file)
    channels = s.cli("channels").stdout
    p = s.cli(*op_args)
    assert p.returncode != 0
    assert "state_write_failed" in p.stderr
    assert read(s.state_file) == before
    assert s.cli("channels").stdout == channels  # the change was rolled back in memory too
    assert not [n for n in os.listdir(s.dirs["state"]) if n.startswith(".channels.json.tmp")]


def test_state_dir_full_keeps_the_old_state(tmpfs_state):
    s = tmpfs_state
    filler = os.path.join(s.dirs["state"], "filler")
    fill(filler)
    assert_write_refused_and_state_kept(s, ("on", "guild-9/while-full"), "guild-9/while-full")
    assert_write_refused_and_state_kept(s, ("off", "guild-9/before"), "guild-9/before")
    os.unlink(filler)
    assert s.cli("on", "guild-9/after-full").returncode == 0
    with open(s.state_file, encoding="utf-8") as f:
        chans = json.load(f)["channels"]
    assert chans == {"guild-9/before": {"mode": "on"}, "guild-9/after-full": {"mode": "on"}}


def test_state_dir_read_only_keeps_the_old_state(tmpfs_state):
    s = tmpfs_state
    subprocess.run(["mount", "-o", "remount,ro", s.dirs["state"]], check=True)
    try:
        assert_write_refused_and_state_kept(s, ("off", "guild-9/before"), "guild-9/before")
        # Routing goes on with the state statd has.
        assert s.control(message("guild-9/before", addressed=False))[0]["route"] == "drop"
    finally:
        subprocess.run(["mount", "-o", "remount,rw", s.dirs["state"]], check=True)
    assert s.cli("off", "guild-9/before").returncode == 0
