# SPDX-License-Identifier: Apache-2.0
"""A precheck whose container is killed (runnerd/turn.c, precheck_run_done): the schedule
wakes with the generic failure, and runnerd's log says how the container ended (the signal,
docker's status, the precheck limits) without anything the container wrote."""
import pytest

from harness import HarnessError
from precheck_suite import PrecheckSuite, build_precheck_image


@pytest.fixture(scope="module")
def pc(rts_env):
    try:
        s = PrecheckSuite(rts_env, build_precheck_image(rts_env), precheck={"limits": {"memoryMb": 128, "pids": 24}})
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    yield s
    s.stop()


def test_a_container_killed_by_the_memory_limit_is_logged_by_its_signal(pc):
    """The kernel's OOM killer ends node (PID 1 of the container, so a signal it sent itself
    would be ignored) once the script's buffers pass precheck.limits.memoryMb."""
    script = ("import fs from 'node:fs';\n"
              "export default async () => { fs.writeSync(2, 'GUEST-STDERR\\n'); fs.writeSync(1, 'GUEST-STDOUT');\n"
              "  const keep = []; for (;;) keep.push(Buffer.alloc(8 << 20, 1)); };")
    ev = pc.precheck(script)
    assert ev == {"id": ev["id"], "event": "precheck", "wake": True,
                  "error": "the precheck run failed without an answer"}, ev
    log = pc.log_tail("runnerd", 1 << 20)
    want = ("docker run failed: the container's process was ended by signal 9 (SIGKILL; status 137) "
            "(precheck.limits: memoryMb 128, pids 24)")
    assert want in log, log[-3000:]
    assert "GUEST-" not in log
