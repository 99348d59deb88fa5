# SPDX-License-Identifier: Apache-2.0
"""A discarded warm spare whose container cannot be removed (runnerd/spare.c through
runnerd/removal.c): runnerd logs why docker rm -f failed and the operator's cue (seed: a
cleanup failure asks for inspection), keeps serving, and the container is left for the
operator to remove.

The failure is real: runnerd's docker CLI is pointed (lifecycle_helpers.docker_context) at a
socket where nothing listens, so `docker rm -f` fails at once. A spare's container is started
with `docker run -i --rm` attached, so when the discard kills that CLI the worker usually
sees its stdin end and the container removes itself; the removal is the backstop for one
that does not. The test stages such a container by pausing the spare (docker pause, in the
real dockerd) before the discard: it stays, and only the operator's remedy removes it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spare_removal.py
"""
import os
import re

from harness import docker, docker_inspect, wait_until
from lifecycle_helpers import container_exists, docker_context, real_docker
from test_spares import SPARES_ON, ready_spare, spares, turn


def test_a_spare_that_cannot_be_removed_is_reported_and_runnerd_serves_on(make_suite):
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spare-removal-fails"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    name = ready_spare(s, ch)

    try:
        # A wedged spare: it will not notice its stdin end, so it outlives the discard.
        docker("pause", name, timeout=60)
        nowhere = os.path.join(s.root, "no-dockerd.sock")
        docker_context(s, "unix://" + nowhere)
        try:
            assert s.cli("off", ch).returncode == 0
            cue = f"spare container {name} could not be removed: inspect it with docker ps -a and remove it"
            wait_until(lambda: cue in s.log_tail("runnerd", limit=1 << 20), 30, "the operator's line")
            log = s.log_tail("runnerd", limit=1 << 20)
            assert "discarded: its channel left sealed mode or was cancelled" in log
            # The warning before it names the container and carries docker's own reason (the
            # endpoint it could not reach), not a guess.
            warned = re.search(r"spare [0-9a-f]+: docker rm -f " + re.escape(name) + r" failed \((.*)\)", log)
            assert warned, log
            assert log.index(warned.group(0)) < log.index(cue)
            assert nowhere in warned.group(1), warned.group(1)
            assert log.count(cue) == 1
            # Nothing removed it: the container is still there for the operator.
            assert docker_inspect(name)["State"]["Paused"] is True
        finally:
            real_docker(s)

        # runnerd serves on: the channel's next turn works (cold: off took the spare).
        assert s.cli("on", ch).returncode == 0
        assert turn(s, ch, "after the failed removal")
        assert container_exists(name)
        # The operator's remedy works on what runnerd left.
        docker("rm", "-f", name, timeout=60)
        assert not container_exists(name)
        assert name not in spares(s, ch)
    finally:
        # runnerd no longer tracks it: on a failure above, the test removes it itself.
        docker("rm", "-f", name, check=False, timeout=60)
