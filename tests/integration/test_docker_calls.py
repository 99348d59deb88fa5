# SPDX-License-Identifier: Apache-2.0
"""How a turn's container is removed, call by call (seed "Threat model": SIGKILL of the run
CLI, force-removal of the exact name with a five-second deadline, a short second removal for
the create/attach race; DESIGN.md section 3; HACKING.md "Turn flow" step 4).

runnerd here is the test build whose docker CLI is tests/testbuild/docker-calls: it logs
each call (time, pid, arguments, when the process was gone) and execs the real docker CLI
against the real dockerd. Turn containers run the probe image; "#hang" makes its PID 1
ignore SIGTERM and never exit, "#fail" makes it exit with status 3 at once.
"""
import pytest

from harness import Suite, assert_quiet, docker
from lifecycle_helpers import container_exists, message, recv_until, say, turn_dirs, wait_for_container, \
    wait_runnerd_ready
from testbuild import calls, calls_for, control, tb_env, wait_ended  # noqa: F401 (tb_env: a fixture)

DEADLINE_MS = 3000
RM_DEADLINE_S = 5.0   # runnerd's RUNNERD_RM_TIMEOUT_MS
SECOND_DELAY_S = 1.0  # RUNNERD_RM_SECOND_DELAY_MS
# The wrapper notices a process is gone by polling every 20 ms and then runs date(1): its
# "end" times are late by that much, never early.
END_LAG_S = 0.15
# The negative window after the last expected call: a further removal would come
# SECOND_DELAY_S after the previous one ended, and the wrapper logs its start within tens of
# milliseconds of that; 2.5 times the delay.
QUIET_S = 2.5


def start(env, timeout_ms):
    s = Suite(env, config={"image": env.probe_image(), "turnTimeoutMs": timeout_ms})
    wait_runnerd_ready(s)
    return s


@pytest.fixture(scope="module")
def short_suite(tb_env, rts_env):  # noqa: F811
    """Turns end at a 3 s deadline."""
    s = start(tb_env, DEADLINE_MS)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def long_suite(tb_env, rts_env):  # noqa: F811
    """Turns end only when they finish or are cancelled."""
    s = start(tb_env, 120000)
    yield s
    s.stop()


@pytest.fixture
def no_hang(short_suite):
    yield
    control(short_suite)


def hang_turn(s, ch):
    """Start a "#hang" turn in channel ch: (connection, request id, container name)."""
    assert s.cli("on", ch).returncode == 0
    c = s.connect(timeout=60)
    rid = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    return c, rid, wait_for_container(s)


def turn_id(name):
    return name.rsplit("-", 1)[1]


def assert_killed(s, run, name):
    """runnerd's log of the CLI's wait status: it died of SIGKILL (signal 9)."""
    line = f"turn {turn_id(name)}: the docker CLI (pid {run.pid}) was ended by signal 9"
    assert line in s.log_tail("runnerd", limit=10**7), line


def assert_quiet_after(s, name, n):
    """No further docker call names the container: a later removal would have come within
    QUIET_S."""
    assert len(calls_for(s, name)) == n, calls_for(s, name)
    assert_quiet(lambda: len(calls_for(s, name)), QUIET_S, f"docker calls naming {name}")


def assert_kill_then_two_removals(s, name, ended_by_deadline):
    run, rm1, rm2 = wait_ended(s, name, 3)
    assert run.args[0] == "run" and run.args[run.args.index("--name") + 1] == name
    # The exact container name, force-removed, twice; nothing else.
    assert rm1.args == ["rm", "-f", name] and rm2.args == ["rm", "-f", name]
    assert_killed(s, run, name)
    if ended_by_deadline:
        # The run CLI's own bound is the turn deadline (armed when the turn reached
        # runnerd, a little before docker run started).
        assert DEADLINE_MS / 1000 - 1.0 <= rm1.start - run.start <= DEADLINE_MS / 1000 + 1.5, (run, rm1)
    # Each removal within its 5 s deadline (here: dockerd answers at once).
    assert rm1.end - rm1.start < RM_DEADLINE_S and rm2.end - rm2.start < RM_DEADLINE_S
    # The second removal a short second after the first one finished.
    gap = rm2.start - rm1.end
    assert SECOND_DELAY_S - END_LAG_S <= gap <= SECOND_DELAY_S + 1.0, gap
    assert_quiet_after(s, name, 3)
    assert not container_exists(name)
    assert turn_dirs(s) == []


def test_deadline_kills_the_cli_then_removes_twice(short_suite, no_hang):
    s = short_suite
    c, rid, name = hang_turn(s, "guild-10/deadline")
    assert recv_until(c, rid) == {"id": rid, "event": "error", "error": "turn_timeout"}
    assert_kill_then_two_removals(s, name, ended_by_deadline=True)


def test_cancel_kills_the_cli_then_removes_twice(long_suite):
    s = long_suite
    ch = "guild-10/cancel"
    c, rid, name = hang_turn(s, ch)
    assert s.control({"op": "cancel", "channel": ch})[0]["cancelled"] == 1
    assert recv_until(c, rid) == {"id": rid, "event": "error", "error": "turn_cancelled"}
    assert_kill_then_two_removals(s, name, ended_by_deadline=False)


def test_clean_turn_removes_nothing(long_suite):
    """A reply means the CLI returned after --rm removed the container: no removal at all."""
    s = long_suite
    ch = "guild-10/clean"
    assert s.cli("on", ch).returncode == 0
    before = {c.pid for c in calls_for_any_run(s)}
    p = say(s, ch, "report please")
    assert p.returncode == 0, p.stderr
    runs = [c for c in calls_for_any_run(s) if c.pid not in before]
    assert len(runs) == 1, runs
    name = runs[0].args[runs[0].args.index("--name") + 1]
    (run,) = wait_ended(s, name, 1)
    assert_quiet_after(s, name, 1)
    assert f"turn {turn_id(name)}: the docker CLI" not in s.log_tail("runnerd", limit=10**7)
    assert not container_exists(name)


def test_failed_turn_removes_once(long_suite):
    """A CLI that exited on its own (the worker failed) needs one removal, in case the
    container remains; no kill happened, so no race to cover and no second removal."""
    s = long_suite
    ch = "guild-10/failed"
    assert s.cli("on", ch).returncode == 0
    before = {c.pid for c in calls_for_any_run(s)}
    p = say(s, ch, "#fail")
    assert p.returncode != 0 and "turn_failed" in p.stderr, (p.returncode, p.stderr)
    (run,) = [c for c in calls_for_any_run(s) if c.pid not in before]
    name = run.args[run.args.index("--name") + 1]
    run, rm1 = wait_ended(s, name, 2)
    assert rm1.args == ["rm", "-f", name]
    assert f"turn {turn_id(name)}: the docker CLI" not in s.log_tail("runnerd", limit=10**7)  # not killed
    assert_quiet_after(s, name, 2)
    assert not container_exists(name)


def calls_for_any_run(s):
    return [c for c in calls(s) if c.args[:1] == ["run"]]


@pytest.mark.parametrize("which", [1, 2])
def test_each_removal_has_a_five_second_deadline(short_suite, no_hang, which):
    """The first or the second removal hangs (the wrapper sleeps in place of the CLI):
    runnerd kills it at its 5 s deadline and the turn ends with cleanup_failed, and one
    line for the operator, instead of holding the channel's queue."""
    s = short_suite
    control(s, f"hang-rm {which}")
    ch = f"guild-10/hang-rm-{which}"
    c, rid, name = hang_turn(s, ch)
    try:
        ev = recv_until(c, rid, timeout=DEADLINE_MS / 1000 + 2 * RM_DEADLINE_S + 10)
        assert ev == {"id": rid, "event": "error", "error": "cleanup_failed"}
        cs = wait_ended(s, name, 1 + which)
        run, removals = cs[0], cs[1:]
        assert_killed(s, run, name)
        assert all(r.args == ["rm", "-f", name] for r in removals)
        hung = removals[-1]
        assert hung.hang and not any(r.hang for r in removals[:-1])
        # Killed at its deadline, not earlier and not much later (the wrapper logs its
        # start a moment after runnerd armed the deadline).
        assert RM_DEADLINE_S - 0.3 <= hung.end - hung.start <= RM_DEADLINE_S + 1.5, hung
        log = s.log_tail("runnerd", limit=10**7)
        assert f"turn {turn_id(name)}: docker rm -f did not finish within 5000 ms" in log
        assert f"container {name} could not be removed: inspect it" in log
        # Docker did not answer in time: no further attempt holds up the queue.
        assert_quiet_after(s, name, 1 + which)
        # A first removal that never ran leaves the container for the operator; after a
        # first one that did, it is gone.
        assert container_exists(name) == (which == 1)
    finally:
        control(s)
        docker("rm", "-f", name, check=False, timeout=30)
    # The channel's queue went on.
    assert s.control({"op": "status", "channel": ch})[0]["running"] is False


def test_second_removal_catches_a_late_create(short_suite, no_hang):
    """The race the second removal is for, staged by the wrapper: the run CLI is killed
    before its container exists, the first removal finds nothing, then the container
    appears (a create request that was still on its way); the second removal gets it."""
    s = short_suite
    control(s, "late-create")
    ch = "guild-10/late-create"
    assert s.cli("on", ch).returncode == 0
    before = {c.pid for c in calls_for_any_run(s)}
    c = s.connect(timeout=60)
    rid = c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    ev = recv_until(c, rid)
    name = None
    try:
        (run,) = [x for x in calls_for_any_run(s) if x.pid not in before]
        name = run.args[run.args.index("--name") + 1]
        assert ev == {"id": rid, "event": "error", "error": "turn_timeout"}
        run, rm1, rm2 = wait_ended(s, name, 3)
        assert_killed(s, run, name)
        assert rm1.args == rm2.args == ["rm", "-f", name]
        # The container came to exist only after the first removal had finished...
        assert run.created is not None, "the staged create did not happen"
        assert rm1.end < run.created < rm2.end, (rm1, run.created, rm2)
        # ...and the second one removed it.
        assert_quiet_after(s, name, 3)
        assert not container_exists(name)
        assert f"container {name} could not be removed" not in s.log_tail("runnerd", limit=10**7)
    finally:
        control(s)
        if name:
            docker("rm", "-f", name, check=False, timeout=30)
