# SPDX-License-Identifier: Apache-2.0
"""brokerd keeps upstream connections between calls (issue 15, DESIGN.md 8.4), and nothing
of one call reaches another's answer (brokerd/upstream.c says why).

The scripted model endpoint numbers its TLS connections ("conn" in each record), so each
test shows which calls shared a connection: two turns' calls share one; a call that was
cut short (turn closed, deadline, a half-sent answer, bytes after the answer) leaves a
connection that is never used again; an upstream that closes an idle connection costs
nothing; and a kept connection that dies after the request went out fails the call
instead of sending the request twice.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_upstream_reuse.py
"""
import threading
import time

import pytest

from broker_rig import BrokerRig
from harness import HarnessError, wait_past, wait_until


@pytest.fixture(scope="module")
def rig(host_env):
    try:
        r = BrokerRig(host_env)
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def ask(turn, text):
    return turn.post("/model", {"messages": [{"role": "user", "content": text}]})


def record_of(rig, text):
    """The model endpoint's records of requests whose last user message is text."""
    found = []
    for r in rig.model_requests():
        msgs = (r.get("body") or {}).get("messages") or []
        if msgs and msgs[-1].get("content") == text:
            found.append(r)
    return found


def conn_of(rig, text):
    recs = record_of(rig, text)
    assert len(recs) == 1, f"{text!r} reached the model endpoint {len(recs)} times"
    return recs[0]["conn"]


def close_waits(port):
    """Client ends of TCP connections to port on loopback that received the peer's FIN
    (CLOSE_WAIT in /proc/net/tcp and tcp6): the connections brokerd keeps and the
    upstream closed."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            cols = row.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "08":
                n += 1
    return n


def warm_connection(rig, tag):
    """One successful call; the connection it used (now idle in brokerd's cache)."""
    with rig.turn() as t:
        a = ask(t, f"warm {tag}")
        assert a.status == 200, a.raw[:300]
    return conn_of(rig, f"warm {tag}")


def test_two_turns_share_a_connection(rig):
    with rig.turn() as t1:
        assert ask(t1, "reuse one").status == 200
    with rig.turn() as t2:
        assert ask(t2, "reuse two").status == 200
        assert ask(t2, "reuse three").status == 200
    c1, c2, c3 = (conn_of(rig, f"reuse {w}") for w in ("one", "two", "three"))
    assert c1 == c2 == c3, (c1, c2, c3)
    recs = [record_of(rig, f"reuse {w}")[0] for w in ("one", "two", "three")]
    # One TCP connection: the same client port, and the requests counted on it in order.
    assert len({r["clientPort"] for r in recs}) == 1
    assert [r["connRequest"] for r in recs] == sorted(r["connRequest"] for r in recs)
    # Each request carried its own credential header and nothing of the one before.
    for r in recs:
        assert r["headers"]["authorization"].startswith("Bearer ")
        assert "cookie" not in r["headers"]


def test_answer_of_one_call_only_reaches_its_own(rig):
    """Calls of two turns on one kept connection: each gets the answer to its own text."""
    warm_connection(rig, "own")
    with rig.turn() as t1, rig.turn() as t2:
        a1 = ask(t1, "only mine 1")
        a2 = ask(t2, "only mine 2")
    assert a1.json()["choices"][0]["message"]["content"] == "echo: only mine 1"
    assert a2.json()["choices"][0]["message"]["content"] == "echo: only mine 2"


def test_cancelled_call_closes_its_connection(rig):
    kept = warm_connection(rig, "cancel")
    t = rig.turn()
    result = {}
    th = threading.Thread(target=lambda: result.update(a=ask(t, "#sleep 5000 cancel me")))
    th.start()
    # The request reached the endpoint on the kept connection; then the turn closes.
    wait_until(lambda: record_of(rig, "#sleep 5000 cancel me"), 10, "the slow request at the model endpoint")
    assert conn_of(rig, "#sleep 5000 cancel me") == kept
    t.close()
    th.join(15)
    # A closing turn answers 503 or closes its connections unanswered.
    assert result["a"].status in (503, None), result["a"].raw[:300]
    with rig.turn() as t2:
        assert ask(t2, "after cancel").status == 200
    assert conn_of(rig, "after cancel") != kept


@pytest.mark.parametrize("tag,text", [("sleep", "#sleep 4000 too slow"), ("partial", "#conn partial 3000")])
def test_deadline_closes_its_connection(rig, tag, text):
    """No answer, or half of one, by the turn's deadline: the call ends 504 and the
    connection it used is not used again."""
    kept = warm_connection(rig, tag)
    with rig.turn(deadline_ms=1500) as t:
        a = ask(t, text)
        assert a.status == 504, a.raw[:300]
    assert conn_of(rig, text) == kept
    with rig.turn() as t2:
        b = ask(t2, f"after {tag}")
        assert b.status == 200
        assert b.json()["choices"][0]["message"]["content"] == f"echo: after {tag}"
    assert conn_of(rig, f"after {tag}") != kept


@pytest.mark.parametrize("how", ["trailing", "trailinglate"])
def test_bytes_after_an_answer_never_reach_the_next_call(rig, how):
    """The upstream sends a second, unasked answer after the first: the connection is not
    used again, and the next call gets the answer to its own request."""
    with rig.turn() as t:
        a = ask(t, f"#conn {how}")
        assert a.status == 200, a.raw[:300]
    used = conn_of(rig, f"#conn {how}")
    # The late variant writes its extra bytes 100 ms after the answer: let them arrive.
    wait_past(time.monotonic() + 0.5)
    with rig.turn() as t2:
        b = ask(t2, f"after {how}")
        assert b.status == 200, b.raw[:300]
        content = b.json()["choices"][0]["message"]["content"]
    assert content == f"echo: after {how}", content
    assert "smuggled" not in b.body.decode()
    assert conn_of(rig, f"after {how}") != used


def test_upstream_closing_an_idle_connection_costs_nothing(rig):
    with rig.turn() as t:
        assert ask(t, "#conn closeafter").status == 200
    closed = conn_of(rig, "#conn closeafter")
    # The endpoint closes the connection right after its answer; brokerd's end has seen it.
    wait_until(lambda: close_waits(rig.fake.port) > 0, 10, "the upstream's close of the kept connection")
    with rig.turn() as t2:
        b = ask(t2, "after idle close")
        assert b.status == 200, b.raw[:300]
    # Sent once, on a new connection: the dead one was noticed before anything went out.
    assert conn_of(rig, "after idle close") != closed


def test_kept_connection_dying_after_the_request_is_not_sent_twice(rig):
    """The endpoint reads the request on a kept connection and hangs up without an answer.
    libcurl would send it again on a new connection; brokerd refuses that retry."""
    kept = warm_connection(rig, "hangup")
    with rig.turn() as t:
        a = ask(t, "#conn hangup")
        assert a.status == 502, a.raw[:300]
        assert a.error == "upstream_error"
    recs = record_of(rig, "#conn hangup")
    assert len(recs) == 1, f"the request reached the model endpoint {len(recs)} times"
    assert recs[0]["conn"] == kept
    # The same request on a new connection (nothing kept to reuse: the hang-up closed it)
    # also fails once, not twice: nothing here depends on the retry.
    with rig.turn() as t2:
        assert ask(t2, "after hangup").status == 200
    assert conn_of(rig, "after hangup") != kept
