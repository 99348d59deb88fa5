# SPDX-License-Identifier: Apache-2.0
"""The upstream deadline (seed "Threat model": "a 60-second upstream deadline"): an upstream
that answers too slowly gets the generic upstream_timeout at that deadline, and nothing of
its late answer reaches the worker.

Waiting a minute per test is too long, so brokerd here is the test build
(tests/testbuild/Makemodule.am) whose only difference is that deadline, lowered at compile
time; it says so in its log at start. The production brokerd has no switch for it. The
turn deadline (30 s here) and the listener's request deadline (60 s) are far away, so an
answer at the lowered deadline, with the log line naming it, can only come from it.
"""
import json
import re
import time

import pytest

from broker_rig import BrokerRig
from harness import Suite, wait_past
from lifecycle_helpers import message, recv_until
from testbuild import tb_env  # noqa: F401 (a fixture)

TURN_DEADLINE_MS = 30000
SLOW_MS = 6000        # the upstream answers after this long
BANNER = re.compile(r"test build: upstream deadline (\d+) ms instead of 60000 ms")


def upstream_deadline_s(log):
    m = BANNER.search(log)
    assert m, "brokerd is not the test build"
    return int(m.group(1)) / 1000


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    r = BrokerRig(tb_env)
    yield r
    r.stop()


def post_model(turn, text):
    return turn.post("/model", {"messages": [{"role": "user", "content": text}]}, timeout=SLOW_MS / 1000 + 10)


def assert_generic(a, status, code):
    assert a.status == status, (a.status, a.raw[:300])
    assert a.body == json.dumps({"error": code}, separators=(",", ":")).encode()
    assert a.closed and a.rest == b""


def test_slow_model_upstream_ends_at_the_upstream_deadline(rig):
    deadline = upstream_deadline_s(rig.broker_log())
    assert deadline < 10 and deadline * 1000 < SLOW_MS
    with rig.turn(deadline_ms=TURN_DEADLINE_MS) as turn:
        # The same call minus the slowness passes.
        a = post_model(turn, "#sleep 500 in time")
        assert a.status == 200 and a.json()["choices"][0]["message"]["content"].startswith("echo: ")

        before = len(rig.model_requests())
        t0 = time.monotonic()
        a = post_model(turn, f"#sleep {SLOW_MS} too slow")
        took = time.monotonic() - t0
        assert_generic(a, 504, "upstream_timeout")
        assert deadline <= took < deadline + 3, took
        log = rig.broker_log()
        assert f"model upstream timed out: upstream deadline of {int(deadline * 1000)} ms" in log
        assert f"[turn={turn.id} " in log.split("model upstream timed out: upstream deadline", 1)[1].split("\n")[0]
        # Asked once, not retried.
        assert [r["body"]["messages"][-1]["content"] for r in rig.model_requests()[before:]] == \
            [f"#sleep {SLOW_MS} too slow"]

        # Once the upstream has sent its late answer (it sleeps SLOW_MS after receiving the
        # request, t0), the turn's next call gets its own answer: the late one went nowhere.
        wait_past(t0 + SLOW_MS / 1000 + 0.5)
        a = post_model(turn, "next question")
        assert a.status == 200
        assert a.json()["choices"][0]["message"]["content"] == "echo: next question"
    assert turn.calls == 3


def test_slow_mcp_upstream_ends_at_the_upstream_deadline(rig):
    deadline = upstream_deadline_s(rig.broker_log())
    with rig.turn(deadline_ms=TURN_DEADLINE_MS) as turn:
        t0 = time.monotonic()
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"ms": SLOW_MS}}}
        a = turn.post("/mcp/docs", body, timeout=SLOW_MS / 1000 + 10)
        took = time.monotonic() - t0
        assert_generic(a, 504, "upstream_timeout")
        assert deadline <= took < deadline + 3, took
        assert f"mcp upstream timed out: upstream deadline of {int(deadline * 1000)} ms" in rig.broker_log()


def test_the_turn_deadline_is_named_when_it_comes_first(rig):
    """The other bound, for contrast: a turn ending before the upstream deadline is logged
    as the turn's."""
    deadline = upstream_deadline_s(rig.broker_log())
    with rig.turn(deadline_ms=int(deadline * 1000 / 2)) as turn:
        a = post_model(turn, f"#sleep {SLOW_MS} too slow")
        assert_generic(a, 504, "upstream_timeout")
    assert "model upstream timed out: turn deadline" in rig.broker_log()


def test_the_production_brokerd_waits_for_the_same_upstream(host_env):
    """The production build, same slow upstream: answered after SLOW_MS, so the 504 above
    came from the test build's one difference, its upstream deadline."""
    with BrokerRig(host_env) as r:
        assert not BANNER.search(r.broker_log())
        with r.turn(deadline_ms=TURN_DEADLINE_MS) as turn:
            t0 = time.monotonic()
            a = post_model(turn, f"#sleep {SLOW_MS} too slow")
            assert a.status == 200, a.raw[:300]
            assert time.monotonic() - t0 >= SLOW_MS / 1000
        assert "upstream timed out" not in r.broker_log()


def test_a_real_turn_fails_generically_at_the_upstream_deadline(tb_env, rts_env):  # noqa: F811
    """Worker -> brokerd -> a slow model: the worker gets the 504, gives up, and the guest
    gets the generic turn_failed well before the turn deadline; the late answer never shows
    up, not in this turn and not in the next one."""
    with Suite(tb_env, config={"turnTimeoutMs": TURN_DEADLINE_MS}) as s:
        deadline = upstream_deadline_s(s.log_tail("brokerd"))
        ch = "guild-10/slow-model"
        assert s.cli("on", ch).returncode == 0
        c = s.connect(timeout=60)
        t0 = time.monotonic()
        rid = c.send(message(ch, f"#sleep {SLOW_MS} LATE-ANSWER-MARK"))
        assert c.recv()["route"] == "sandbox"
        ev = recv_until(c, rid, timeout=TURN_DEADLINE_MS / 1000)
        took = time.monotonic() - t0
        assert ev == {"id": rid, "event": "error", "error": "turn_failed"}
        assert deadline <= took < TURN_DEADLINE_MS / 1000 / 2, took
        assert "model upstream timed out: upstream deadline" in s.log_tail("brokerd")
        # The worker gave up because of that answer, not because its time ran out.
        assert "worker code model_unavailable" in s.log_tail("runnerd")
        assert len(s.fake.requests()) == 1

        wait_past(t0 + SLOW_MS / 1000 + 0.5)
        rid2 = c.send(message(ch, "hello again"))
        assert c.recv()["route"] == "sandbox"
        ev = recv_until(c, rid2, timeout=TURN_DEADLINE_MS / 1000)
        assert ev["event"] == "reply", ev
        # "echo: <last user message>": this turn's own answer; the earlier turn's late
        # answer ("echo: #sleep ... LATE-ANSWER-MARK") was never delivered or kept.
        assert ev["text"].startswith("echo: ") and ev["text"].endswith("hello again")
        assert "echo: #sleep" not in ev["text"]
        c.close()
