# SPDX-License-Identifier: Apache-2.0
"""brokerd's start-up probe of the rich hooks' sandbox (roundtable-sandbox-brokerd(8),
"Host tools": `tini --version` once in each sandbox). A config with rich hooks (effort
judge, memory, compactor) but no host tool and no key command has only the hooks' sandbox;
a host where bwrap cannot make its namespaces must stop brokerd at start, with bwrap's
message in the log, rather than fail the first turn.

The broken host is real: brokerd runs in a user namespace whose
user.max_user_namespaces is 0 (the sysctl is per user namespace, so nothing outside it
changes), where bwrap's --unshare-user fails with ENOSPC. The same config and program start
and serve outside it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_hook_probe.py
"""
import os
import subprocess
import sys

import pytest

from harness import HarnessError
from rich_broker_rig import MODEL, RichRig

# Runs argv[1:] in a new user namespace (identity-mapped, so the service account is itself
# inside it) in which no further user namespace can be made. The parent writes the maps:
# only it holds CAP_SETUID in the initial namespace.
NO_USERNS = r"""
import ctypes, os, sys
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(90)
    os.write(w1, b"u"); os.read(r2, 1)
    os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0\n")
    os.execvp(sys.argv[1], sys.argv[1:])
if os.read(r1, 1) != b"u":
    sys.exit(91)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 0 4294967295\n")
os.write(w2, b"g")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


class HooksOnlyRig(RichRig):
    """Rich hooks and a file token: no host tool, no key command."""

    def more_config(self):
        cfg = super().more_config()
        cfg["rich"]["oauthToken"] = {"file": self.mcp_key_file}
        cfg["rich"]["profiles"] = {"p": {"model": MODEL, "mcp": ["docs"]}}
        return cfg


@pytest.fixture
def rig(host_env):
    try:
        r = HooksOnlyRig(host_env, config={"tools": []})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def test_a_broken_hook_sandbox_stops_brokerd_at_start(rig):
    cfg = rig.config_overrides
    assert cfg["tools"] == [] and "command" not in cfg["rich"]["oauthToken"]
    assert all(h in cfg["rich"] for h in ("effort", "memory", "compaction"))
    # It started and serves with a working sandbox (the probe passed).
    ch = rig.channel()
    assert ch.worker().ready().status == 200
    rig.stop_daemon("brokerd")

    acct = rig.account("brokerd")
    log_path = rig.log_path("brokerd-no-userns")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    with open(log_path, "ab") as log:
        p = subprocess.Popen(
            [sys.executable, "-c", NO_USERNS, "runuser", "-u", acct.name, "-g", acct.group, "--",
             rig.env.program("brokerd"), "--config", rig.config_path, "--runtime-dir", rig.dirs["rt"]],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.wait()
        pytest.fail("brokerd kept running with a broken hook sandbox")
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    assert rc == 1, (rc, text[-3000:])
    assert "cannot run the rich hooks in their sandbox" in text, text[-3000:]
    # bwrap's own words, from inside the hooks' sandbox attempt.
    assert "rich hooks stderr: bwrap:" in text and "namespace" in text, text[-3000:]
