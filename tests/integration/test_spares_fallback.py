# SPDX-License-Identifier: Apache-2.0
"""A claimed warm spare that dies before its input never loses the turn (issue 15: "a crash
... never loses a turn: the turn falls back to a cold start"; runnerd/turn.c spare_lost).

runnerd here is the test build (tests/testbuild/Makemodule.am): a claimed spare gets its
input only TESTBUILD_SPARE_FEED_HOLD_MS after the binding, or as soon as its docker CLI
ended, so the test can kill the spare's container between the claim and the input with
`docker kill`, against the real dockerd. Its docker CLI is the logging wrapper, so the test
also sees which containers were run and what they mounted.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spares_fallback.py
"""
import os
import re
import threading

from harness import Suite, docker, wait_until
from lifecycle_helpers import container_exists, say, wait_runnerd_ready
from test_spares import cold_turns, metrics, ready_spare, turn, warm_turns
from testbuild import calls, tb_env  # noqa: F401 (a fixture)

HOLD_S = 15  # TESTBUILD_SPARE_FEED_HOLD_MS


def run_calls(s, name):
    return [c for c in calls(s) if c.args[:1] == ["run"] and c.args[c.args.index("--name") + 1] == name]


def test_a_spare_killed_after_its_claim_gives_way_to_a_cold_start(tb_env, rts_env):  # noqa: F811
    s = Suite(tb_env, config={"warmSpares": 1})
    try:
        wait_runnerd_ready(s)
        ch = "guild-15/spares-fallback"
        assert s.cli("on", ch).returncode == 0
        turn(s, ch, "first, cold")
        spare = ready_spare(s, ch)
        spare_id = spare.rsplit("-", 1)[1]
        requests = len(s.fake.requests())

        # The turn claims the spare, whose input then waits (the test build's hold).
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", say(s, ch, "second: the spare dies")))
        t.start()
        claimed = f"a turn claimed spare {spare_id}"
        wait_until(lambda: claimed in s.log_tail("runnerd", 10 ** 6), 60, "the claim")
        assert metrics(s)[("roundtable_sandbox_spares_claimed_total", ())] == 1
        # The bad situation: the claimed spare's container dies before it got the input.
        assert docker("kill", spare, timeout=30).returncode == 0
        t.join(HOLD_S + 120)
        assert not t.is_alive()
        r = out["r"]
        # The answer: the turn still replies, through the model, and it ran cold.
        assert r.returncode == 0, r.stderr + s.logs()
        assert r.stdout.strip()
        assert len(s.fake.requests()) > requests
        assert (cold_turns(s), warm_turns(s)) == (2, 0)
        # That rule: runnerd says so, and the cold container is the turn's own, mounting the
        # claimed spare's run dir (whose broker.sock brokerd was bound to for this turn).
        log = s.log_tail("runnerd", 10 ** 6)
        m = re.search(r"turn ([0-9a-f]+): spare " + spare_id + r" ended before its input; the turn starts cold",
                      log)
        assert m, log
        turn_name = spare.rsplit("-", 1)[0] + "-" + m.group(1)
        runs = run_calls(s, turn_name)
        assert len(runs) == 1, calls(s)
        broker_mount = f"type=bind,source={os.path.join(s.dirs['run'], spare_id)},target=/run/broker,readonly"
        assert broker_mount in runs[0].args
        assert "io.roundtable-sandbox.spare=1" not in runs[0].args
        # The dead spare and the turn's container are gone; so is the run dir; the channel
        # gets a new spare after the turn.
        wait_until(lambda: not container_exists(spare) and not container_exists(turn_name), 30, "the removals")
        wait_until(lambda: not os.path.exists(os.path.join(s.dirs["run"], spare_id)), 30, "the run dir's removal")
        ready_spare(s, ch, other_than=(spare,))
    finally:
        s.stop()
