# SPDX-License-Identifier: Apache-2.0
"""Precheck runs under the account model (DESIGN.md 8.1 with 8.3): a precheck container runs
as the guest account like a turn's, reaches its broker socket through its bind mount alone,
and a call through it still works; in single-account mode it runs as the service account.
"""
import json
import os

import pytest

from harness import HarnessError, wait_until
from precheck_suite import PrecheckSuite, build_precheck_image

# What the script reports: its ids, what its two mounts list, and one granted call.
SCRIPT = ("import fs from 'node:fs';\n"
          "export default async ({ mcp }) => {\n"
          "  const ids = fs.readFileSync('/proc/self/status', 'latin1').split('\\n')\n"
          "    .filter((l) => l.startsWith('Uid:') || l.startsWith('Gid:'))\n"
          "    .map((l) => Number(l.split(/\\s+/)[1]));\n"
          "  const broker = fs.readdirSync('/run/broker');\n"
          "  const workspace = fs.readdirSync('/workspace');\n"
          "  const echo = await mcp.json('docs', 'echo', { q: 'acct' });\n"
          "  return { wake: true, context: JSON.stringify({ ids, broker, workspace, echo }) };\n"
          "};\n")


@pytest.fixture(scope="module")
def precheck_tag(rts_env):
    try:
        return build_precheck_image(rts_env)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.mark.parametrize("accounts", [True, False], ids=["accounts", "single-account"])
def test_a_precheck_runs_as_the_containers_account(rts_env, precheck_tag, accounts):
    try:
        s = PrecheckSuite(rts_env, precheck_tag, accounts=accounts)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        ev = s.precheck(SCRIPT, approved=["docs/echo"])
        assert ev.get("event") == "precheck" and ev.get("wake") is True and "context" in ev, (ev, s.logs())
        got = json.loads(ev["context"])
        want = s.guest
        assert got["ids"] == [want.uid, want.gid], (got, want)
        assert got["broker"] == ["broker.sock"] and got["workspace"] == [], got
        assert got["echo"] == {"q": "acct"}, got
        # The run dir under runRoot was the runner account's (single-account: the service
        # account's) and is gone after the run.
        run_root = s.dirs["run"]
        assert os.stat(run_root).st_uid == s.account("runnerd").uid
        wait_until(lambda: not [n for n in os.listdir(run_root) if n.startswith("precheck-")], 30,
                   "the precheck's run dir to be removed")
    finally:
        s.stop()
