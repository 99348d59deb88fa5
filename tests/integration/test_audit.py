# SPDX-License-Identifier: Apache-2.0
"""brokerd's audit trail (issue 15, DESIGN.md 8.4): one structured entry per broker
decision, allowed or refused, naming the turn, the channel hash, the route, the decision
and the rule that decided; never a payload or a key.

Outside systemd brokerd writes the entries to stderr with the journal's fields in braces
(common/log.h: "... {MESSAGE_ID=... RTS_TURN_ID=... RTS_RULE=...}"); these tests parse that.
scripts/ci-systemd.sh finds the same entries in the journal under the real systemd.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_audit.py
"""
import json
import re
import socket

import pytest

from broker_rig import BrokerRig, request_bytes
from harness import HarnessError, wait_until
from rtsproto import channel_hash

MESSAGE_ID = "0bf421491732452c8a2331a833fe4e73"  # brokerd/audit.h
BUDGET = 48  # RTS_BROKER_CALLS_PER_TURN
MARKER = "AUDIT-PAYLOAD-MARKER-5d1c"
FIELDS = ("RTS_TURN_ID", "RTS_CHANNEL_HASH", "RTS_CALL", "RTS_ROUTE", "RTS_DECISION", "RTS_RULE", "RTS_RESULT",
          "RTS_FORWARDED", "RTS_DURATION_MS")
ENTRY = re.compile(r"\{(MESSAGE_ID=[^}]*)\}$")


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


def entries(rig, turn_id=None):
    """The audit entries in brokerd's log, as dicts of their fields."""
    out = []
    for line in rig.broker_log().splitlines():
        m = ENTRY.search(line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(1).split(" "))
        if fields.get("MESSAGE_ID") != MESSAGE_ID:
            continue
        if turn_id is None or fields.get("RTS_TURN_ID") == turn_id:
            out.append(fields)
    return out


def decisions_of(rig, turn):
    """The entries of a closed turn: exactly one per call brokerd counted."""
    got = wait_until(lambda: len(entries(rig, turn.id)) >= turn.calls and entries(rig, turn.id), 10,
                     "an audit entry for every call of the turn")
    assert len(got) == turn.calls, f"{len(got)} entries for {turn.calls} calls: {got}"
    for e in got:
        for f in FIELDS:
            assert f in e, f"{f} missing in {e}"
        assert e["RTS_TURN_ID"] == turn.id
        assert e["RTS_CHANNEL_HASH"] == channel_hash(turn.channel)
        assert re.fullmatch(r"[a-z_]{1,48}", e["RTS_RULE"]), e
    assert sorted(int(e["RTS_CALL"]) for e in got) == list(range(1, turn.calls + 1))
    return sorted(got, key=lambda e: int(e["RTS_CALL"]))


def one(rig, send):
    """Run send(turn) in a fresh turn; its single decision."""
    with rig.turn() as t:
        send(t)
    (d,) = decisions_of(rig, t)
    return d


def model(text):
    return {"messages": [{"role": "user", "content": text}]}


def mcp(tool, method="tools/call"):
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"name": tool, "arguments": {"q": MARKER}}}


# Each case: what the worker sends, and the decision, rule, result and forwarded flag of
# its one entry. The allowed ones show the same input minus the bad part passes.
CASES = {
    "model_ok": (lambda t: t.post("/model", model(MARKER)), "model", "allowed", "model_route", "ok", "yes"),
    "tool_ok": (lambda t: t.post("/tools/echo", {"x": MARKER}), "tool", "allowed", "tool_configured", "ok", "yes"),
    "mcp_ok": (lambda t: t.post("/mcp/docs", mcp("echo")), "mcp", "allowed", "mcp_tool_declared", "ok", "yes"),
    "route_unknown": (lambda t: t.post("/nope", model(MARKER)), "none", "refused", "route_unknown", "not_found",
                      "no"),
    "method_not_post": (lambda t: t.raw(request_bytes("/model", model(MARKER), method="PUT")), "model", "refused",
                        "method_not_post", "method_not_allowed", "no"),
    "dummy_key": (lambda t: t.post("/model", model(MARKER), headers={"Authorization": "Bearer sk-guess"}), "model",
                  "refused", "dummy_key", "unauthorized", "no"),
    "host_header": (lambda t: t.post("/model", model(MARKER), headers={"Host": "api.openai.com"}), "model",
                    "refused", "host_header", "bad_request", "no"),
    "head_syntax": (lambda t: t.raw(b"POST /model HTTP/1.1\nHost: broker\n\n"), "none", "refused", "head_syntax",
                    "bad_request", "no"),
    "body_too_large": (lambda t: t.post("/model", model(MARKER), headers={"Content-Length": str(1 << 30)}, timeout=5),
                       "none", "refused", "body_too_large", "too_large", "no"),
    "body_json": (lambda t: t.post("/model", "{\"messages\": [" + MARKER), "model", "refused", "body_json",
                  "bad_request", "no"),
    "model_request": (lambda t: t.post("/model", {"messages": [{"role": "root", "content": MARKER}]}), "model",
                      "refused", "model_request", "bad_request", "no"),
    "tool_arguments": (lambda t: t.post("/tools/echo", [MARKER]), "tool", "refused", "tool_arguments",
                       "bad_request", "no"),
    "mcp_tool_undeclared": (lambda t: t.post("/mcp/docs", mcp("rm_rf")), "mcp", "refused", "mcp_tool_undeclared",
                            "forbidden", "no"),
    "mcp_method": (lambda t: t.post("/mcp/docs", mcp("echo", method="tools/list")), "mcp", "refused", "mcp_method",
                   "forbidden", "no"),
    "upstream_status": (lambda t: t.post("/model", model("#status 500 " + MARKER)), "model", "refused",
                        "upstream_status", "upstream_error", "yes"),
    "credential_reflected": (lambda t: t.post("/model", model("#reflect")), "model", "refused",
                             "credential_reflected", "upstream_error", "yes"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_entry_per_decision_with_its_rule(rig, case):
    send, route, decision, rule, result, forwarded = CASES[case]
    d = one(rig, send)
    assert (d["RTS_ROUTE"], d["RTS_DECISION"], d["RTS_RULE"], d["RTS_RESULT"], d["RTS_FORWARDED"]) == \
        (route, decision, rule, result, forwarded), d


def test_head_incomplete_is_one_entry(rig):
    with rig.turn() as t:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(t.path)
        s.sendall(b"POST /model HTTP/1.1\r\nHost: bro")
        s.shutdown(socket.SHUT_WR)
        s.recv(100)
        s.close()
        wait_until(lambda: entries(rig, t.id), 10, "the entry of the cut-short head")
    (d,) = decisions_of(rig, t)
    assert (d["RTS_ROUTE"], d["RTS_RULE"], d["RTS_RESULT"]) == ("none", "head_incomplete", "closed"), d


def test_call_budget_and_flood_bound(rig):
    """Calls beyond the budget are refused by the budget rule; after one such entry the
    rest are counted in one summary entry, so a worker cannot flood the journal."""
    extra = 12
    with rig.turn() as t:
        for _ in range(BUDGET + extra):
            t.post("/nope", {})
    got = wait_until(lambda: [e for e in entries(rig, t.id) if e.get("RTS_RULE") == "unlogged_beyond_budget"],
                     10, "the summary entry")
    logged = [e for e in entries(rig, t.id) if "RTS_CALL" in e]
    assert len(logged) == BUDGET + 1
    assert logged[-1]["RTS_RULE"] == "call_budget" and logged[-1]["RTS_RESULT"] == "budget_exhausted"
    assert all(e["RTS_RULE"] == "route_unknown" for e in logged[:-1])
    assert got[0]["RTS_CALLS"] == str(extra - 1)


def test_no_payload_or_key_in_any_entry(rig):
    # Calls that carry the marker in every place a body can, allowed and refused ones.
    for case in ("model_ok", "tool_ok", "mcp_ok", "body_json", "model_request", "credential_reflected"):
        one(rig, CASES[case][0])
    log = rig.broker_log()
    assert entries(rig), "no audit entries at all"
    assert MARKER not in log
    assert rig.api_key not in log
    assert rig.mcp_key not in log
    for e in entries(rig):
        assert set(e) <= set(FIELDS) | {"MESSAGE_ID", "RTS_CALLS"}, e
