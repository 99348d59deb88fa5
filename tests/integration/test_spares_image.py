# SPDX-License-Identifier: Apache-2.0
"""An image change while runnerd runs (issue 15: a spare is discarded on an image change;
runnerd/image_watch.h), with the real daemons, a real dockerd and real containers.

Each test runs the suite from a tag of its own (a second tag of the test image), then
rebuilds that tag with the project's own `roundtable-sandbox image build`, as an operator
would: a new image under the same name. A spare started before the change runs the old
image; it must never serve a turn after the change. runnerd watches `docker events` for the
name and inspects the image every few seconds as a backstop: the old spare is replaced by a
spare of the new image, and while the watch is down or an event is unchecked, turns start
cold (from the name, so from the new image).

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spares_image.py
"""
import os
import re
import signal
import tempfile
import threading
import time

import pytest

from harness import docker, docker_inspect, remove_tag, unique_tag, wait_past, wait_until
from lifecycle_helpers import container_exists, daemon_pid, kill9
from test_spares import cold_turns, metrics, ready_spare, spares, turn, warm_turns


@pytest.fixture
def own_tag(rts_env):
    """A tag of this test's own for the test image; every image built under it is removed
    afterwards (never forced: only what this test made). Ask for it before make_suite, so
    it is torn down after the suite's containers are gone."""
    rts_env.require_docker()
    tag = unique_tag("imagewatch")
    docker("tag", rts_env.image, tag, timeout=60)
    built = []
    yield tag, built
    errors = [e for e in (remove_tag(tag),) if e]
    for image_id in built:
        p = docker("rmi", image_id, check=False, timeout=60)
        if p.returncode != 0 and "No such image" not in p.stderr and "being used" not in p.stderr:
            errors.append(p.stderr.strip())
    assert not errors, errors


def image_id(ref):
    return docker("image", "inspect", "--format", "{{.Id}}", ref, timeout=60).stdout.strip()


def rebuild(s, tag, built, label):
    """Build a new image under tag with the project's CLI: the old one plus a label, so its
    ID differs. Docker's default builder for this host, as an operator's build gets."""
    with tempfile.TemporaryDirectory() as ctx:
        with open(os.path.join(ctx, "Dockerfile"), "w", encoding="ascii") as f:
            f.write(f"FROM {tag}\nLABEL io.roundtable-sandbox.test-rebuild={label}\n")
        p = s.cli("image", "build", "--dir", ctx, "--tag", tag, timeout=300)
        assert p.returncode == 0, p.stderr
    new = image_id(tag)
    built.append(new)
    return new


def ready_spare_of(s, channel, image, timeout=60):
    """Wait until channel has a running spare of image that runnerd counts ready; its name."""
    def probe():
        names = [n for n in spares(s, channel, running=True) if (docker_inspect(n) or {}).get("Image") == image]
        ready = metrics(s).get(("roundtable_sandbox_spares_ready", ()), 0)
        return names[0] if len(names) == 1 and ready >= 1 else None
    return wait_until(probe, timeout, f"a ready spare of {channel} from {image[:19]}")


def suite_with_a_spare(make_suite, tag, ch):
    """A suite running image tag with spares on, after one cold turn of ch: the suite and
    ch's ready spare."""
    s = make_suite(config={"warmSpares": 1, "image": tag})
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    return s, ready_spare(s, ch)


def spare_id(name):
    return name.rsplit("-", 1)[1]


def claimed(s, name):
    return f"a turn claimed spare {spare_id(name)}" in s.log_tail("runnerd", limit=10**7)


def events_child(s):
    """The pid of runnerd's `docker events` child."""
    parent = daemon_pid(s, "runnerd")
    with open(f"/proc/{parent}/task/{parent}/children", encoding="ascii") as f:
        kids = [int(k) for k in f.read().split()]
    for pid in kids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == b"events":
            return pid
    return None


def test_a_rebuilt_image_replaces_the_spare_before_any_turn_claims_it(own_tag, make_suite):
    tag, built = own_tag
    ch = "guild-15/image-change"
    old = image_id(tag)
    s, a = suite_with_a_spare(make_suite, tag, ch)
    assert docker_inspect(a)["Image"] == old

    new = rebuild(s, tag, built, "second")
    assert new != old
    # The old spare goes without a turn asking, for that reason, and one of the new image
    # takes its place.
    wait_until(lambda: not container_exists(a), 60, "the old image's spare's removal")
    log = s.log_tail("runnerd", limit=10**7)
    assert re.search(rf"spare {spare_id(a)} of channel \w+ discarded: its image is no longer the configured one",
                     log), log
    b = ready_spare_of(s, ch, new)
    assert not claimed(s, a)

    warm = warm_turns(s)
    turn(s, ch, "warm, from the second image")
    assert warm_turns(s) == warm + 1
    assert claimed(s, b) and not claimed(s, a)


class EventsKiller:
    """Keep runnerd's image watch down: SIGKILL every `docker events` child of runnerd as
    soon as it shows, until stopped."""

    def __init__(self, s):
        self.s, self.killed, self._stop = s, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            pid = events_child(self.s)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.killed += 1
                except ProcessLookupError:
                    pass
            self._stop.wait(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def test_while_the_watch_is_down_turns_start_cold_and_no_old_spare_serves(own_tag, make_suite):
    """The events child is killed whenever it starts, and the image rebuilt meanwhile: the
    turns go cold, saying why, and the old spare serves none of them. Once the watch is let
    back, it sees the change it missed, and spares of the new image serve turns again."""
    tag, built = own_tag
    ch = "guild-15/image-watch-down"
    s, a = suite_with_a_spare(make_suite, tag, ch)
    with EventsKiller(s) as killer:
        wait_until(lambda: killer.killed >= 1 and events_child(s) is None, 30, "the image watch down")
        new = rebuild(s, tag, built, "while-down")
        cold, warm = cold_turns(s), warm_turns(s)
        turn(s, ch, "while the watch is down")
        assert (cold_turns(s), warm_turns(s)) == (cold + 1, warm)
        log = s.log_tail("runnerd", limit=10**7)
        assert "its spare is not used: the image watch is down" in log, log
        assert "no spare is used until the image watch is back" in log, log
        assert not claimed(s, a)
        assert metrics(s)[("roundtable_sandbox_spares_usable", ())] == 0

    # Let back: the watch returns by itself and the old spare is replaced.
    wait_until(lambda: not container_exists(a), 90, "the old image's spare's removal")
    b = ready_spare_of(s, ch, new)
    wait_until(lambda: metrics(s)[("roundtable_sandbox_spares_usable", ())] == 1, 30, "spares usable again")
    warm = warm_turns(s)
    turn(s, ch, "warm again")
    assert warm_turns(s) == warm + 1 and claimed(s, b) and not claimed(s, a)


def test_a_change_no_event_reports_is_found_by_the_periodic_inspect(own_tag, make_suite):
    """The events child is stopped (SIGSTOP: alive, but it reports nothing, as a stalled
    stream or a builder that emits no tag event): the periodic inspect still finds the new
    image, replaces the old spare, and the next turn claims a spare of the new image."""
    tag, built = own_tag
    ch = "guild-15/image-no-event"
    s, a = suite_with_a_spare(make_suite, tag, ch)
    pid = wait_until(lambda: events_child(s), 30, "runnerd's docker events child")
    os.kill(pid, signal.SIGSTOP)
    try:
        new = rebuild(s, tag, built, "no-event")
        wait_until(lambda: not container_exists(a), 60, "the old image's spare's removal by the periodic inspect")
        log = s.log_tail("runnerd", limit=10**7)
        assert re.search(rf"spare {spare_id(a)} of channel \w+ discarded: its image is no longer the configured one",
                         log), log
        assert "docker events died" not in log and "docker events exited" not in log, log
        b = ready_spare_of(s, ch, new)
        warm = warm_turns(s)
        turn(s, ch, "warm, from the new image")
        assert warm_turns(s) == warm + 1 and claimed(s, b) and not claimed(s, a)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


# The worker's input deadline (worker/worker.h WORKER_INPUT_TIMEOUT_MS), which runs from the
# input's first byte; a spare's worker waits for that byte longer than this.
WORKER_INPUT_TIMEOUT_S = 30
# runnerd/image_watch.h RUNNERD_IMAGE_WATCH_ROTATE_S: each events child ends itself then.
ROTATE_S = 30


def test_spares_serve_after_long_quiet_periods(make_suite):
    """Two quiet periods, each longer than the worker's input deadline and than the image
    watch's freshness bound (RUNNERD_IMAGE_FRESH_MS, 20 s):
    - with no spare at all, runnerd inspects the image only at start, so the first spare
      after the quiet period must have the image inspected again when it starts, or the
      turn right after it would go cold ("the image was not inspected recently");
    - a spare waits for its turn as long as runnerd keeps it (warmSpareIdleMs), not just
      the 30 s the worker gives an input that has begun: one that waited longer serves
      its channel's next turn, and was never restarted meanwhile."""
    s = make_suite(config={"warmSpares": 1})
    ch = "guild-15/spare-waits-long"
    assert s.cli("on", ch).returncode == 0
    first_watch = wait_until(lambda: events_child(s), 30, "runnerd's docker events child")
    # A second installation whose runnerd dies by SIGKILL, as outside systemd nothing
    # reaps its children: its events child must still end, at its --until.
    orphaned = make_suite(config={"warmSpares": 1})
    orphan = wait_until(lambda: events_child(orphaned), 30, "the other runnerd's docker events child")
    kill9(orphaned, "runnerd")
    orphaned_at = time.monotonic()
    assert pid_alive(orphan)

    wait_past(time.monotonic() + WORKER_INPUT_TIMEOUT_S + 5)
    turn(s, ch, "cold, after a quiet start")
    a = ready_spare(s, ch)
    warm = warm_turns(s)
    turn(s, ch, "warm at once")
    assert warm_turns(s) == warm + 1 and claimed(s, a), s.log_tail("runnerd")

    b = ready_spare(s, ch, other_than=(a,))
    wait_past(time.monotonic() + WORKER_INPUT_TIMEOUT_S + 5)
    assert container_exists(b)
    log = s.log_tail("runnerd", limit=10**7)
    assert "while waiting for a turn" not in log and "its spare is not used" not in log, log
    turn(s, ch, "warm after a long wait")
    assert warm_turns(s) == warm + 2 and claimed(s, b)

    # Over 70 s the watch replaced its events child at each --until (every 30 s) without
    # a gap anyone saw: no warning, no cold turn for want of a watch.
    assert events_child(s) not in (None, first_watch)
    log = s.log_tail("runnerd", limit=10**7)
    assert "docker events exited" not in log and "docker events died" not in log, log
    wait_until(lambda: not pid_alive(orphan), max(1, orphaned_at + ROTATE_S + 10 - time.monotonic()),
               "the dead runnerd's docker events child to end at its --until")


def pid_alive(pid):
    """pid runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
