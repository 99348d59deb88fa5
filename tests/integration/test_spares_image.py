# SPDX-License-Identifier: Apache-2.0
"""An image change while runnerd runs (issue 15: a spare is discarded on an image change;
runnerd/image_watch.h), with the real daemons, a real dockerd and real containers.

Each test runs the suite from a tag of its own (a second tag of the test image), then
rebuilds that tag as an operator's `image build` would: a new image under the same name.
A spare started before the change runs the old image; it must never serve a turn after
the change. runnerd watches `docker events` for images: the old spare is discarded and a
spare of the new image replaces it, and while the watch is down or has an unchecked event,
turns start cold (from the name, so from the new image).

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spares_image.py
"""
import os
import re
import signal
import subprocess
import tempfile

import pytest

from harness import docker, docker_bin, docker_inspect, remove_tag, unique_tag, wait_until
from lifecycle_helpers import container_exists, daemon_pid
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


def rebuild(tag, built, label):
    """Build a new image under tag: the old one plus a label, so its ID differs."""
    with tempfile.TemporaryDirectory() as ctx:
        with open(os.path.join(ctx, "Dockerfile"), "w", encoding="ascii") as f:
            f.write(f"FROM {tag}\nLABEL io.roundtable-sandbox.test-rebuild={label}\n")
        p = subprocess.run([docker_bin(), "build", "-q", "-t", tag, ctx],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "DOCKER_BUILDKIT": "0"})
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
    s = make_suite(config={"warmSpares": 1, "image": tag})
    ch = "guild-15/image-change"
    assert s.cli("on", ch).returncode == 0
    old = image_id(tag)
    turn(s, ch, "cold, from the first image")
    a = ready_spare(s, ch)
    assert docker_inspect(a)["Image"] == old

    new = rebuild(tag, built, "second")
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


def test_while_the_watch_is_down_no_spare_of_an_unchecked_image_is_claimed(own_tag, make_suite):
    """The events child is killed and the image rebuilt at once, before the watch is back:
    the next turn must not take the old spare. Whether it starts cold (from the name, so from
    the new image) or takes a spare of the new image depends on how fast the watch returns;
    either way the old spare serves nothing, and once the watch is back spares work again."""
    tag, built = own_tag
    s = make_suite(config={"warmSpares": 1, "image": tag})
    ch = "guild-15/image-watch-down"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    a = ready_spare(s, ch)
    pid = wait_until(lambda: events_child(s), 30, "runnerd's docker events child")
    os.kill(pid, signal.SIGKILL)
    new = rebuild(tag, built, "while-down")
    turn(s, ch, "right after the change")
    assert not claimed(s, a), s.log_tail("runnerd")
    log = s.log_tail("runnerd", limit=10**7)
    assert "docker events died of signal 9" in log and "no spare is used until the image watch is back" in log, log

    # The watch comes back by itself (a new events child), sees the change it missed, and
    # the channel's next spare is of the new image and serves turns again.
    wait_until(lambda: (events_child(s) or pid) != pid, 30, "a new docker events child")
    b = ready_spare_of(s, ch, new)
    warm = warm_turns(s)
    turn(s, ch, "warm again")
    assert warm_turns(s) == warm + 1 and claimed(s, b)
    assert cold_turns(s) >= 1
