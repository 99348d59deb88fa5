# SPDX-License-Identifier: Apache-2.0
"""The workspace stays executable (seed "Container sandbox": the threat model already assumes
arbitrary code execution in the container and does not rely on noexec): in a real turn
container, the probe (tests/images/probe.c) copies itself into /workspace, runs the copy
from there with a fresh token and reports whether the token came back."""
import json
import os

from lifecycle_helpers import say


def test_a_program_in_the_workspace_runs(make_suite, rts_env):
    s = make_suite(config={"image": rts_env.probe_image()})
    ch = "guild-10/exec"
    assert s.cli("on", ch).returncode == 0
    p = say(s, ch, "report please")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["exec_workspace"] == "ok", r["exec_workspace"]
    # The mount itself carries no noexec (mountinfo: mount options are field 6).
    (ws,) = [line.split() for line in r["mountinfo"].splitlines() if line.split()[4] == "/workspace"]
    assert "noexec" not in ws[5].split(","), ws
    # The probe's copy is gone again; the workspace is the channel's own directory.
    assert ".probe-exec" not in os.listdir(s.workspace(ch))
