# SPDX-License-Identifier: Apache-2.0
"""Lifecycle: how turns end (deadline, cancel, shutdown), clean-up of stale containers,
start-up refusals, and the routing, queue and mode rules (seed "Setup", the lifecycle
paragraphs of "Threat model", "Memory and scope"; DESIGN.md sections 2 to 6).

Turn containers that must hang use the probe image (tests/images/probe.c) with "#hang": its
PID 1 ignores SIGTERM and never exits."""
import json
import os
import secrets
import subprocess
import time

import pytest

from harness import LABEL_INSTALLATION, Suite, docker, installation_id, wait_until
from lifecycle_helpers import (FakeDockerd, container_exists, daemon_sockets_only, docker_context, message,
                               real_docker, recv_until, restart, rewrite_config, say, start_expect_exit, turn_dirs,
                               wait_for, wait_for_container, wait_runnerd_ready)

HANG_TIMEOUT_MS = 3000


# ---- how turns end ----

def assert_turn_cleaned(s, name):
    """The container is gone, and so are its run dir and broker socket."""
    assert not container_exists(name), name
    assert s.containers() == []
    assert turn_dirs(s) == []


def test_deadline_removes_a_container_that_ignores_sigterm(make_suite, rts_env):
    s = make_suite(config={"image": rts_env.probe_image(), "turnTimeoutMs": HANG_TIMEOUT_MS})
    ch = "guild-1/hang"
    assert s.cli("on", ch).returncode == 0
    c = s.connect(timeout=60)
    t0 = time.monotonic()
    rid = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    name = wait_for_container(s)
    ev = recv_until(c, rid)
    elapsed = time.monotonic() - t0
    assert ev == {"id": rid, "event": "error", "error": "turn_timeout"}
    # The deadline, then SIGKILL of the CLI and docker rm -f (about 60 ms for this
    # container): well within the 5 s removal deadline.
    assert HANG_TIMEOUT_MS / 1000 <= elapsed < HANG_TIMEOUT_MS / 1000 + 6, elapsed
    assert_turn_cleaned(s, name)

    # The channel's queue moved on: the next turn runs normally.
    p = say(s, ch, "report please")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["input"]
    assert_turn_cleaned(s, name)
    assert "timeout" in s.log_tail("runnerd")


@pytest.fixture(scope="module")
def hang_suite(rts_env):
    """A probe installation with a long deadline: turns end only by cancel or shutdown."""
    s = Suite(rts_env, config={"image": rts_env.probe_image(), "turnTimeoutMs": 120000})
    yield s
    s.stop()


def test_cancel_removes_the_container_and_drops_queued_turns(hang_suite):
    s = hang_suite
    ch = "guild-1/cancel"
    assert s.cli("on", ch).returncode == 0
    c = s.connect(timeout=60)
    running = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    queued = c.send(message(ch, "#hang too"))
    assert c.recv()["route"] == "sandbox"
    name = wait_for_container(s)

    t0 = time.monotonic()
    ans = s.control({"op": "cancel", "channel": ch})[0]
    assert ans["ok"] is True and ans["cancelled"] == 2
    events = {}
    for _ in range(2):
        o = c.recv(timeout=30)
        events[o["id"]] = o
    assert events[running] == {"id": running, "event": "error", "error": "turn_cancelled"}
    assert events[queued] == {"id": queued, "event": "error", "error": "turn_cancelled"}
    assert time.monotonic() - t0 < 6
    assert_turn_cleaned(s, name)
    st = s.control({"op": "status", "channel": ch})[0]
    assert (st["running"], st["queued"]) == (False, 0)
    # The queued turn never started a container.
    assert s.containers() == []


@pytest.mark.parametrize("daemon", ["runnerd", "statd"])
def test_shutdown_removes_the_running_container(hang_suite, daemon):
    s = hang_suite
    ch = f"guild-1/shutdown-{daemon}"
    assert s.cli("on", ch).returncode == 0
    c = s.connect(timeout=60)
    rid = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    name = wait_for_container(s)

    t0 = time.monotonic()
    s.stop_daemon(daemon)  # SIGTERM, wait for the exit
    assert s.exit_codes[daemon] == 0
    assert time.monotonic() - t0 < 8
    assert_turn_cleaned(s, name)
    if daemon == "runnerd":
        # statd heard the turn end (cancelled by runnerd's shutdown) and stays up.
        ev = recv_until(c, rid, timeout=10)
        assert ev["event"] == "error" and ev["error"] in ("turn_cancelled", "unavailable")
    restart(s, daemon)
    p = say(s, ch, "report please")
    assert p.returncode == 0, p.stderr + s.logs()
    assert daemon_sockets_only(s)


# ---- stale containers: only this installation's label AND name prefix ----

def make_decoys(s, other_inst):
    """docker create (never started) containers: one of ours that is stale, and decoys that
    must survive. Returns (ours, decoys)."""
    image = s.env.image
    inst = s.installation
    ours = f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}"
    decoys = [
        # another installation's label and name
        (f"roundtable-sandbox-{other_inst}-{secrets.token_hex(8)}", other_inst),
        # our name shape but another installation's label
        (f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}", other_inst),
        # our label but a foreign name
        (f"rts-decoy-{secrets.token_hex(6)}", inst),
        # our name shape without any label
        (f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}", None),
        # nothing of ours
        (f"rts-foreign-{secrets.token_hex(6)}", None),
    ]
    for name, label in [(ours, inst)] + decoys:
        args = ["create", "--name", name, "--network", "none"]
        if label:
            args += ["--label", f"{LABEL_INSTALLATION}={label}"]
        docker(*args, image, timeout=60)
    return ours, [n for n, _ in decoys]


def remove_containers(names):
    for n in names:
        docker("rm", "-f", n, check=False, timeout=30)


def test_runnerd_start_removes_only_our_stale_containers(make_suite):
    s = make_suite()
    wait_runnerd_ready(s)
    ours, decoys = make_decoys(s, "0" * 12)
    try:
        s.stop_daemon("runnerd")
        restart(s, "runnerd")
        wait_for(lambda: not container_exists(ours), 30, what="the stale container's removal")
        assert all(container_exists(n) for n in decoys), decoys
        assert f"removed stale container {ours}" in s.log_tail("runnerd")
        # Serving again after the clean-up.
        assert s.cli("on", "guild-1/after-cleanup").returncode == 0
        assert say(s, "guild-1/after-cleanup", "hi").returncode == 0
    finally:
        remove_containers(decoys + [ours])


def test_gc_removes_only_our_stale_containers(make_suite):
    s = make_suite()
    wait_runnerd_ready(s)  # its own start-up clean-up is over
    ours, decoys = make_decoys(s, "f" * 12)
    try:
        p = s.cli("gc")
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == [ours]
        assert not container_exists(ours)
        assert all(container_exists(n) for n in decoys), decoys
    finally:
        remove_containers(decoys + [ours])


# ---- start-up refusals ----

@pytest.fixture
def stopped_suite(make_suite):
    """A started and stopped installation whose config a test may change; each test then
    starts one daemon expecting it to refuse."""
    s = make_suite()
    for name in ("statd", "runnerd", "brokerd"):
        s.stop_daemon(name)
    return s


def refuse(s, daemon, *expect):
    status, log = start_expect_exit(s, daemon)
    assert status != 0, log
    for e in expect:
        assert e in log, (e, log)
    return log


def test_refuses_group_or_other_permissions(stopped_suite):
    s = stopped_suite
    state_dir, ws, run = s.dirs["state"], s.dirs["ws"], s.dirs["run"]
    os.chmod(state_dir, 0o750)
    refuse(s, "statd", state_dir, "0750", f"chmod 0700 {state_dir}")
    os.chmod(state_dir, 0o700)
    os.chmod(ws, 0o705)
    refuse(s, "statd", ws, f"chmod 0700 {ws}")
    os.chmod(ws, 0o700)
    os.chmod(run, 0o710)
    refuse(s, "runnerd", run, f"chmod 0700 {run}")
    os.chmod(run, 0o700)


def test_refuses_roots_not_owned_by_the_service_account(stopped_suite):
    """Each root belongs to the account of the daemon that keeps it (runRoot: the runner
    account in accounts mode)."""
    s = stopped_suite
    for daemon, key in (("statd", "ws"), ("statd", "state"), ("runnerd", "run")):
        path = s.dirs[key]
        owner = s.account(daemon)
        os.chown(path, 0, 0)
        try:
            refuse(s, daemon, path, f"chown {owner.uid} {path}")
        finally:
            os.chown(path, owner.uid, owner.gid)
    # In accounts mode the service account is not runRoot's owner either.
    svc = s.env.accounts["service"]
    os.chown(s.dirs["run"], svc.uid, svc.gid)
    try:
        refuse(s, "runnerd", s.dirs["run"], f"is owned by uid {svc.uid}", f"chown {s.account('runnerd').uid}")
    finally:
        os.chown(s.dirs["run"], s.account("runnerd").uid, s.account("runnerd").gid)


def test_missing_roots_are_created_private(stopped_suite):
    s = stopped_suite
    base = os.path.join(s.root, "new")
    os.mkdir(base)
    os.chown(base, s.env.uid, s.env.gid)
    # runnerd creates its root where its own account may write.
    runner = s.account("runnerd")
    os.mkdir(os.path.join(base, "b"))
    os.chown(os.path.join(base, "b"), runner.uid, runner.gid)
    ws, run = os.path.join(base, "a", "ws"), os.path.join(base, "b", "r", "run")
    state = os.path.join(base, "c", "state", "channels.json")
    # runnerd looks up the state directory's owner (statd's account) and the workspaces by
    # name: it must be able to pass through their parents.
    for d in ("a", "c"):
        os.mkdir(os.path.join(base, d), 0o755)
        os.chown(os.path.join(base, d), s.env.uid, s.env.gid)
    rewrite_config(s, workspaceRoot=ws, runRoot=run, stateFile=state)
    # statd first: in accounts mode runnerd lets in the owner of the state file's
    # directory, so it must exist when runnerd binds its socket (roundtable-sandbox(7)).
    s.start_daemon("statd")
    wait_until(lambda: os.path.isdir(os.path.dirname(state)), 30, "statd's state directory")
    for name in ("brokerd", "runnerd"):
        s.start_daemon(name)
    s._wait_ready()
    for d, who in ((ws, s.env.uid), (run, runner.uid), (os.path.dirname(run), runner.uid),
                   (os.path.dirname(state), s.env.uid)):
        st = os.lstat(d)
        # workspaceRoot: statd's ACL entry for runnerd's search shows as group bits.
        mode = 0o710 if d == ws and s.accounts else 0o700
        assert (st.st_uid, st.st_mode & 0o7777) == (who, mode), d
    assert s.cli("on", "guild-1/new").returncode == 0
    # stop() must find this installation's containers under the new state file's id.
    s.installation = installation_id(state)


@pytest.mark.parametrize("inside", ["ws", "run"])
def test_refuses_state_file_inside_a_root(stopped_suite, inside):
    s = stopped_suite
    state = os.path.join(s.dirs[inside], "channels.json")
    rewrite_config(s, stateFile=state)
    key = "workspaceRoot" if inside == "ws" else "runRoot"
    refuse(s, "statd", state, key, "outside")
    assert not os.path.exists(state)


def test_refuses_a_run_root_too_long_for_the_socket_path(stopped_suite):
    s = stopped_suite
    base = os.path.join(s.root, "long")
    os.mkdir(base, 0o700)
    os.chown(base, s.account("runnerd").uid, s.account("runnerd").gid)
    suffix = 1 + 16 + 1 + len("broker.sock")  # /<turn id>/broker.sock
    run = os.path.join(base, "r" * (101 - suffix - len(base) - 1))
    assert len(run) + suffix == 101
    rewrite_config(s, runRoot=run)
    refuse(s, "runnerd", run, "100", "too long")
    assert not os.path.exists(run)
    # One character shorter fits.
    rewrite_config(s, runRoot=run[:-1])
    restart(s, "runnerd")
    assert os.path.isdir(run[:-1])


@pytest.mark.parametrize("which", ["runRoot", "workspaceRoot"])
def test_refuses_roots_inside_dockers_data_root(stopped_suite, which):
    """Docker's data root is what `docker info` reports; a fake daemon reports one that
    holds the suite's roots (the real one is never touched)."""
    s = stopped_suite
    path = s.dirs["run"] if which == "runRoot" else s.dirs["ws"]
    fake = FakeDockerd(s, data_root=path)
    try:
        docker_context(s, fake.host)
        refuse(s, "runnerd", which, path, "data root", "move it outside")
    finally:
        real_docker(s)
        fake.stop()
    restart(s, "runnerd")


def test_refuses_a_missing_image(stopped_suite):
    s = stopped_suite
    image = f"roundtable-sandbox:missing-{secrets.token_hex(4)}"
    rewrite_config(s, image=image)
    refuse(s, "runnerd", image, "--pull never", "roundtable-sandbox image build")


def test_refuses_when_docker_does_not_answer(stopped_suite):
    s = stopped_suite
    docker_context(s, "unix://" + os.path.join(s.root, "no-dockerd.sock"))
    try:
        refuse(s, "runnerd", "Docker daemon does not answer", "docker group")
    finally:
        real_docker(s)


@pytest.fixture
def stopped_single(make_suite):
    """stopped_suite in single-account mode."""
    s = make_suite(accounts=False)
    for name in ("statd", "runnerd", "brokerd"):
        s.stop_daemon(name)
    return s


@pytest.mark.parametrize("daemon", ["statd", "runnerd", "brokerd"])
@pytest.mark.parametrize("key", ["uid", "gid"])
def test_refuses_an_identity_that_is_not_the_process(stopped_single, daemon, key):
    """Single-account mode: uid and gid, when set, are the daemons' own (test_accounts.py
    has accounts mode's rules)."""
    s = stopped_single
    actual = s.env.uid if key == "uid" else s.env.gid
    rewrite_config(s, **{key: actual + 1})
    refuse(s, daemon, f"{key}: is {actual + 1} but this process runs as {key} {actual}")


@pytest.mark.parametrize("daemon", ["statd", "runnerd", "brokerd"])
def test_refuses_to_run_as_root(stopped_suite, daemon):
    s = stopped_suite
    if not s.accounts:
        rewrite_config(s, uid=None, gid=None)
    before = sorted(os.listdir(s.dirs["rt"]))
    p = subprocess.run([s.env.program(daemon), "--config", s.config_path, "--runtime-dir", s.dirs["rt"]],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode != 0
    assert "refusing to run as root" in p.stderr
    assert sorted(os.listdir(s.dirs["rt"])) == before


@pytest.mark.parametrize("damage", ["unreadable", "directory", "empty", "dangling-symlink"])
def test_unusable_state_file_stops_statd_and_is_never_replaced(stopped_suite, damage):
    s = stopped_suite
    path = s.state_file
    if damage == "unreadable":
        os.chmod(path, 0o000)
    elif damage == "directory":
        os.unlink(path)
        os.mkdir(path, 0o700)
        os.chown(path, s.env.uid, s.env.gid)
    elif damage == "empty":
        os.truncate(path, 0)
    else:
        os.unlink(path)
        os.symlink(os.path.join(s.root, "nowhere.json"), path)
    before = os.lstat(path)
    refuse(s, "statd", path, "never replaced")
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_mode, before.st_size, before.st_mtime_ns)
    assert sorted(os.listdir(s.dirs["state"])) == ["channels.json"]


# ---- routing, queue and modes ----

ELIGIBILITY = [
    # (case, changes to an eligible message, eligible)
    ("eligible", {}, True),
    ("null principal", {"author": {"principalId": None}}, False),
    ("empty principal", {"author": {"principalId": ""}}, False),
    ("attachments", {"attachments": 2}, True),
    ("not a guild", {"guild": False}, False),
    ("bot author", {"author": {"bot": True}}, False),
    ("integration", {"author": {"integration": True}}, False),
    ("unresolved author", {"author": None}, False),
    ("null tier", {"author": {"tier": None}}, False),
    ("empty tier", {"author": {"tier": ""}}, False),
    ("not addressed", {"addressed": False}, False),
]


def build_message(channel, changes):
    m = message(channel, "hello there")
    for k, v in changes.items():
        if k == "author" and v is not None:
            m["author"] = dict(m["author"], **v)
        else:
            m[k] = v
    return m


def test_eligibility_table(suite):
    on, off = "guild-2/sandboxed", "guild-2/normal"
    assert suite.cli("on", on).returncode == 0
    assert suite.cli("off", off).returncode == 0
    before = len(suite.fake.requests())
    t0 = time.time()
    for case, changes, eligible in ELIGIBILITY:
        a = suite.control(build_message(off, changes))
        assert a == [{"id": a[0]["id"], "route": "pass"}], case
        if not eligible:
            a = suite.control(build_message(on, changes))
            assert a == [{"id": a[0]["id"], "route": "drop"}], case
    # Nothing of the above reached runnerd, brokerd or the model (docker events, until
    # now, covers the quiet window too).
    suite.assert_no_turn(before, "passed and dropped messages", containers=False)
    ev = docker("events", "--since", str(int(t0) - 1), "--until", str(int(time.time()) + 1), "--filter",
                f"label={LABEL_INSTALLATION}={suite.installation}", "--filter", "event=create", timeout=60)
    assert ev.stdout.strip() == ""
    # The eligible ones run in the sandbox.
    for case, changes, eligible in ELIGIBILITY:
        if eligible:
            a = suite.control(build_message(on, changes))
            assert a[0]["route"] == "sandbox" and a[1]["event"] == "reply", (case, a)


def test_fifo_per_channel(suite):
    ch = "guild-2/fifo"
    assert suite.cli("on", ch).returncode == 0
    c = suite.connect(timeout=120)
    ids = []
    # The first turn is the slowest; the others must still wait for it.
    for text in ("#sleep 1500 first", "second", "third"):
        ids.append(c.send(message(ch, text)))
        assert c.recv()["route"] == "sandbox"
    order = []
    while len(order) < 3:
        o = c.recv(timeout=120)
        if o.get("event"):
            assert o["event"] == "reply", o
            order.append((o["id"], o["text"].rsplit("\n", 1)[-1]))
    assert order == list(zip(ids, ("#sleep 1500 first", "second", "third")))


def test_channels_run_at_the_same_time(suite):
    chans = ["guild-2/par-a", "guild-2/par-b"]
    for ch in chans:
        assert suite.cli("on", ch).returncode == 0
    c = suite.connect(timeout=120)
    t0 = time.monotonic()
    ids = [c.send(message(ch, "#sleep 3000 together")) for ch in chans]
    # Both turns' containers exist at one moment.
    wait_for(lambda: len(suite.containers()) >= 2, 20, what="two turn containers at once")
    got = 0
    while got < 2:
        o = c.recv(timeout=120)
        if o.get("event"):
            assert o["event"] == "reply" and o["id"] in ids
            got += 1
    # Each waited 3 s on the model; one after the other would take over 6 s.
    assert time.monotonic() - t0 < 6


def test_off_waits_for_queued_work_and_keeps_the_workspace(suite):
    ch = "guild-2/off-later"
    assert suite.cli("on", ch).returncode == 0
    assert say(suite, ch, "remember that the lamp is green").returncode == 0
    c = suite.connect(timeout=120)
    turn = c.send(message(ch, "#sleep 1500 still on"))
    assert c.recv()["route"] == "sandbox"
    mode = c.send({"op": "mode", "channel": ch, "mode": "off"})
    first = c.recv(timeout=60)
    assert first["id"] == turn and first["event"] == "reply"  # the turn finished first
    second = c.recv(timeout=60)
    assert second == {"id": mode, "ok": True, "channel": ch, "mode": "off"}
    assert suite.control(message(ch))[0]["route"] == "pass"
    with open(os.path.join(suite.workspace(ch), ".sandbox", "memory.json"), encoding="utf-8") as f:
        assert "the lamp is green" in f.read()
    # On again: the memory is still there.
    assert suite.cli("on", ch).returncode == 0
    p = say(suite, ch, "what do you remember?")
    assert "the lamp is green" in p.stdout


def user_texts(request):
    return [m.get("content") for m in request["body"]["messages"] if m.get("role") == "user"]


def test_fresh_is_pending_in_memory_and_applies_to_the_next_successful_turn(make_suite):
    s = make_suite()
    ch = "guild-2/fresh"
    assert s.cli("on", ch).returncode == 0
    assert say(s, ch, "remember that the door code is 4711").returncode == 0
    assert say(s, ch, "hello again").returncode == 0
    assert any("door code" in str(u) for u in user_texts(s.fake.requests()[-1]))  # history is sent

    a = s.control({"op": "fresh", "channel": ch})[0]
    assert (a["ok"], a["channel"], a["fresh"]) == (True, ch, True)
    assert s.control({"op": "status", "channel": ch})[0]["fresh"] is True
    with open(s.state_file, encoding="utf-8") as f:
        assert json.load(f) == {"version": 1, "channels": {ch: {"mode": "on"}}}  # memory only

    # A failed turn does not use it up.
    p = say(s, ch, "#status 500 please fail")
    assert p.returncode != 0
    assert s.control({"op": "status", "channel": ch})[0]["fresh"] is True

    n = len(s.fake.requests())
    p = say(s, ch, "what do you remember?")
    assert p.returncode == 0, p.stderr
    assert "door code is 4711" in p.stdout  # memory survives a fresh start
    first = s.fake.requests()[n]
    assert not any("door code" in str(u) or "hello again" in str(u) for u in user_texts(first))
    assert s.control({"op": "status", "channel": ch})[0]["fresh"] is False

    # Pending fresh starts do not survive a restart of statd.
    assert s.control({"op": "fresh", "channel": ch})[0]["fresh"] is True
    s.stop_daemon("statd")
    restart(s, "statd")
    assert s.control({"op": "status", "channel": ch})[0]["fresh"] is False


def test_thread_keys_are_separate_channels(suite):
    parent, thread = "guild-3/chan", "guild-3/chan/thread-9"
    assert suite.cli("on", parent).returncode == 0
    assert suite.control(message(thread))[0]["route"] == "pass"  # no inheritance
    assert suite.control(build_message(thread, {"addressed": False}))[0]["route"] == "pass"
    assert suite.cli("on", thread).returncode == 0
    assert suite.cli("off", parent).returncode == 0
    assert suite.control(build_message(thread, {"addressed": False}))[0]["route"] == "drop"
    assert suite.control(message(parent))[0]["route"] == "pass"
    assert suite.workspace(parent) != suite.workspace(thread)


def test_initial_channels_seed_only_a_missing_state_file(make_suite):
    s = make_suite(config={"initialChannels": ["seed/a"]})
    assert s.cli("off", "seed/a").returncode == 0
    s.stop_daemon("statd")
    rewrite_config(s, initialChannels=["seed/a", "seed/b"])
    restart(s, "statd")
    out = s.cli("channels").stdout
    assert "seed/a\toff" in out and "seed/b" not in out
    # Only a missing file is seeded again.
    s.stop_daemon("statd")
    os.unlink(s.state_file)
    restart(s, "statd")
    out = s.cli("channels").stdout
    assert "seed/a\ton" in out and "seed/b\ton" in out
