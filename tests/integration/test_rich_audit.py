# SPDX-License-Identifier: Apache-2.0
"""The audit trail and metrics of brokerd's rich side (issues 15 and 16): every call on a
rich channel's listener, allowed or refused, and every attachment fetch ends in exactly one
structured decision entry (brokerd/audit.h: MESSAGE_ID, RTS_TURN_ID, RTS_CHANNEL_HASH,
RTS_ROUTE rich_*, RTS_DECISION, RTS_RULE, ...), never with a payload or a credential, and
moves brokerd's broker call and upstream latency metrics.

A real brokerd (the test build) serves a rich channel; the test plays runnerd on
brokerd.sock and the worker on the channel's socket (rich_broker_rig.py). Outside systemd
the entries are on brokerd's stderr with the journal's fields in braces, as in
test_audit.py; the metrics come over the link (BROKER_METRICS) and are parsed with the
prometheus_client parser, as in test_metrics.py.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_audit.py
"""
import itertools
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

import rich_broker_rig
import rtsproto
from harness import HarnessError, wait_until
from rich_broker_rig import RichRig, finish, model_body, token_for
from testbuild import tb_env  # noqa: F401 (a fixture)

MESSAGE_ID = "0bf421491732452c8a2331a833fe4e73"  # brokerd/audit.h
FIELDS = ("RTS_TURN_ID", "RTS_CHANNEL_HASH", "RTS_CALL", "RTS_ROUTE", "RTS_DECISION", "RTS_RULE", "RTS_RESULT",
          "RTS_FORWARDED", "RTS_DURATION_MS")
ENTRY = re.compile(r"\{(MESSAGE_ID=[^}]*)\}$")
MARKER = "RICH-AUDIT-PAYLOAD-MARKER-7f3a"
SPEAKER = ("1001", "Alice", "principal-1001")
MAX_CALLS = 128    # rich.maxCalls, the default
AUDIT_EXTRA = 64   # BROKERD_RICH_AUDIT_EXTRA
LONG_POLL_S = 1.5  # TESTBUILD_RICH_LONG_POLL_MS
EACCES = 13
_seq = itertools.count(1)


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    try:
        r = RichRig(tb_env)
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def entries(rig, **want):
    """The audit entries in brokerd's log whose fields match want, as dicts."""
    out = []
    for line in rig.broker_log().splitlines():
        m = ENTRY.search(line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(1).split(" "))
        if fields.get("MESSAGE_ID") == MESSAGE_ID and all(fields.get(k) == v for k, v in want.items()):
            out.append(fields)
    return out


def the_entry(rig, **want):
    """The one entry matching want (waited for), checked for its fields."""
    got = wait_until(lambda: entries(rig, **want), 10, f"an audit entry {want}")
    assert len(got) == 1, got
    e = got[0]
    for f in FIELDS:
        assert f in e, (f, e)
    assert set(e) <= set(FIELDS) | {"MESSAGE_ID"}, e
    assert re.fullmatch(r"[a-z_]{1,48}", e["RTS_RULE"]), e
    return e


def metrics(rig):
    """brokerd's metrics text over the link, parsed: {(sample name, frozen labels): value}."""
    seq = next(_seq)
    rig.link.send(rtsproto.BROKER_METRICS, seq=seq)
    m = rig.expect(rtsproto.BROKER_METRICS_TEXT, lambda m: m["seq"] == seq)
    out = {}
    for f in text_string_to_metric_families(m["text"]):
        for s in f.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(values, name, **labels):
    return values.get((name, frozenset(labels.items())), 0.0)


def start_turn(rig, text="hello", ch=None):
    """rich_broker_rig.start_turn(), its worker's long poll once brokerd admitted the turn."""
    ch, w, tid, _ = rich_broker_rig.start_turn(rig, text, SPEAKER, ch, before_next=lambda tid: admitted(rig, tid))
    return ch, w, tid


def admitted(rig, tid):
    """brokerd took the turn (its calls are numbered from here)."""
    wait_until(lambda: re.search(rf"rich turn admitted.*turn={tid}", rig.broker_log()), 10, "the turn admitted")


def no_secret_in_log(rig, ch):
    log = rig.broker_log()
    assert MARKER not in log
    assert token_for(ch.channel, SPEAKER[0], SPEAKER[2]) not in log
    assert rig.mcp_key not in log


# ---- one entry per decision ----

def test_an_allowed_streamed_call_is_one_entry_and_moves_the_metrics(rig):
    before = metrics(rig)
    ch, w, tid = start_turn(rig)
    a = w.messages(model_body(MARKER))
    assert a.status == 200 and a.events(), a.body[:300]
    e = the_entry(rig, RTS_TURN_ID=tid, RTS_ROUTE="rich_model")
    assert (e["RTS_DECISION"], e["RTS_RULE"], e["RTS_RESULT"], e["RTS_FORWARDED"]) == \
        ("allowed", "anthropic_route", "ok", "yes"), e
    assert e["RTS_CHANNEL_HASH"] == ch.hash
    finish(ch, w, tid)
    # Every call of the turn has its entry: the long poll that handed it, the model call,
    # the reply packet; numbered from 1 since the turn was admitted.
    got = wait_until(lambda: len(entries(rig, RTS_TURN_ID=tid)) >= 3 and entries(rig, RTS_TURN_ID=tid), 10,
                     "the turn's three entries")
    assert sorted(e["RTS_RULE"] for e in got) == ["anthropic_route", "reply_packet", "worker_next"], got
    assert sorted(int(e["RTS_CALL"]) for e in got) == [1, 2, 3], got
    after = metrics(rig)
    calls = "roundtable_sandbox_broker_calls_total"
    assert sample(after, calls, route="rich_model", decision="allowed", result="ok") - \
        sample(before, calls, route="rich_model", decision="allowed", result="ok") == 1
    assert sample(after, calls, route="rich_worker", decision="allowed", result="ok") - \
        sample(before, calls, route="rich_worker", decision="allowed", result="ok") >= 3
    count = "roundtable_sandbox_upstream_seconds_count"
    assert sample(after, count, upstream="anthropic") - sample(before, count, upstream="anthropic") == 1
    no_secret_in_log(rig, ch)


def test_a_refused_call_is_one_entry_with_its_rule(rig):
    before = metrics(rig)
    ch, w, tid = start_turn(rig)
    native = model_body(MARKER, tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}])
    with rig.nothing_forwarded():
        a = w.messages(native)
    assert a.status == 400 and a.error == "bad_request"
    e = the_entry(rig, RTS_TURN_ID=tid, RTS_ROUTE="rich_model")
    assert (e["RTS_DECISION"], e["RTS_RULE"], e["RTS_RESULT"], e["RTS_FORWARDED"]) == \
        ("refused", "native_tool", "bad_request", "no"), e
    # The same request without the native tool passes (tested above); here the counters.
    after = metrics(rig)
    calls = "roundtable_sandbox_broker_calls_total"
    assert sample(after, calls, route="rich_model", decision="refused", result="bad_request") - \
        sample(before, calls, route="rich_model", decision="refused", result="bad_request") == 1
    finish(ch, w, tid)
    no_secret_in_log(rig, ch)


@pytest.mark.parametrize("case", ["dummy_key", "route_unknown", "reply_outside_turn", "no_turn"])
def test_refusals_before_the_handler_have_their_rule(rig, case):
    ch = rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    with rig.nothing_forwarded():
        if case == "dummy_key":
            tid = ch.turn("x", speaker=SPEAKER)
            admitted(rig, tid)
            assert w.next().status == 200
            a = w.messages(model_body(MARKER), headers={"x-api-key": "sk-ant-api03-guess"})
            want = (tid, "rich_model", "dummy_key", "unauthorized")  # the turn the worker holds
        elif case == "route_unknown":
            a = w.post("/v1/files", {"x": MARKER})
            want = ("-", "rich_none", "route_unknown", "not_found")
        elif case == "reply_outside_turn":
            a = w.post("/worker/result", {"turnId": "0" * 16, "text": MARKER})
            want = ("-", "rich_worker", "reply_outside_turn", "conflict")
        else:
            a = w.tool("echo", {"x": MARKER})
            want = ("-", "rich_tool", "no_turn", "forbidden")
    assert a.status >= 400, a.status
    e = the_entry(rig, RTS_CHANNEL_HASH=ch.hash, RTS_RULE=want[2])
    assert (e["RTS_TURN_ID"], e["RTS_ROUTE"], e["RTS_RULE"], e["RTS_RESULT"], e["RTS_DECISION"],
            e["RTS_FORWARDED"]) == want + ("refused", "no"), e
    no_secret_in_log(rig, ch)


def test_tool_and_mcp_calls(rig):
    ch, w, tid = start_turn(rig)
    assert w.tool("echo", {"x": MARKER}).status == 200
    e = the_entry(rig, RTS_TURN_ID=tid, RTS_ROUTE="rich_tool")
    assert (e["RTS_DECISION"], e["RTS_RULE"], e["RTS_FORWARDED"]) == ("allowed", "tool_configured", "yes"), e
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"q": MARKER}}}
    assert w.mcp("docs", call).status == 200
    e = the_entry(rig, RTS_TURN_ID=tid, RTS_ROUTE="rich_mcp")
    assert (e["RTS_DECISION"], e["RTS_RULE"], e["RTS_FORWARDED"]) == ("allowed", "mcp_tool_declared", "yes"), e
    finish(ch, w, tid)
    # Before any turn, the start-up scope: metadata yes, tool calls no.
    ch2 = rig.channel()
    w2 = ch2.worker()
    with rig.nothing_forwarded():
        assert w2.mcp("docs", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status == 200
        assert w2.mcp("docs", call).status == 403
    e = the_entry(rig, RTS_CHANNEL_HASH=ch2.hash, RTS_RULE="mcp_tools_list")
    assert (e["RTS_TURN_ID"], e["RTS_DECISION"]) == ("-", "allowed"), e
    e = the_entry(rig, RTS_CHANNEL_HASH=ch2.hash, RTS_RULE="startup_scope_metadata")
    assert (e["RTS_TURN_ID"], e["RTS_DECISION"], e["RTS_RESULT"]) == ("-", "refused", "forbidden"), e
    no_secret_in_log(rig, ch)


def test_an_idle_long_poll_is_counted_but_not_logged(rig):
    ch = rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    before = metrics(rig)
    assert w.next(timeout=LONG_POLL_S + 20).status == 204
    after = metrics(rig)
    calls = "roundtable_sandbox_broker_calls_total"
    assert sample(after, calls, route="rich_worker", decision="allowed", result="ok") - \
        sample(before, calls, route="rich_worker", decision="allowed", result="ok") == 1
    assert [e["RTS_RULE"] for e in entries(rig, RTS_CHANNEL_HASH=ch.hash)] == ["worker_ready"]


def test_an_attachment_fetch_is_one_entry_without_its_url(rig):
    url = f"http://10.0.0.1/{MARKER}.png"
    tid = "b" * 16
    with rig.nothing_forwarded():
        rig.link.send(rtsproto.BROKER_ATTACH_FETCH, turn_id=tid, index=0, url=url, max_bytes=1 << 20)
        m = rig.expect(rtsproto.BROKER_ATTACH_DATA, lambda m: m["turn_id"] == tid)
        m.close()
    assert m["result"] == -EACCES
    e = the_entry(rig, RTS_TURN_ID=tid, RTS_ROUTE="rich_attachment")
    assert (e["RTS_DECISION"], e["RTS_RULE"], e["RTS_RESULT"], e["RTS_CHANNEL_HASH"]) == \
        ("refused", "fetch_rule", "forbidden", "-"), e
    assert MARKER not in rig.broker_log()


def test_a_flooding_worker_gets_one_summary_entry(rig):
    """Beyond maxCalls + 64 entries in a turn, calls are counted and summed up in one entry,
    so a worker cannot flood the journal."""
    limit = MAX_CALLS + AUDIT_EXTRA
    extra = 10
    ch, w, tid = start_turn(rig)  # call 1: the long poll
    for _ in range(limit - 1 + extra):
        assert w.post("/nope", {}).status == 404
    finish(ch, w, tid)  # the reply packet: beyond the limit too
    ch.unbind()
    logged = entries(rig, RTS_TURN_ID=tid)
    one_by_one = [e for e in logged if "RTS_CALL" in e]
    assert len(one_by_one) == limit, len(one_by_one)
    assert sorted(int(e["RTS_CALL"]) for e in one_by_one) == list(range(1, limit + 1))

    def unlogged():
        got = entries(rig, RTS_CHANNEL_HASH=ch.hash, RTS_RULE="unlogged_beyond_budget")
        return sum(int(e["RTS_CALLS"]) for e in got)
    wait_until(lambda: unlogged() == extra + 1, 10, "the summary entries")
