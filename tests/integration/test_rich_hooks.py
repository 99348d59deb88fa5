# SPDX-License-Identifier: Apache-2.0
"""brokerd's rich side, continued (issue 16): the worker capability handshake, private
memory and private tool results, the host compactor, MCP's start-up scope and calls, the
channel's lifecycle (unbind, rebind, a lost runnerd link, a brokerd restart in the middle
of a conversation) and attachment fetches. Same rig as test_rich_broker.py: a real brokerd
(the test build), the scripted Anthropic and MCP endpoints over TLS, real host commands
(tests/integration/rich_broker_rig.py has the hook programs).

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_hooks.py
"""
import json
import os
import re
import secrets
import socket
import time

import pytest

import rtsproto
from harness import HarnessError, wait_until
from rich_broker_rig import RichRig, model_body
from testbuild import tb_env  # noqa: F401 (a fixture)

STARTUP_S = 4.0
TURN_OK, TURN_ERROR, TURN_TIMEOUT, TURN_CANCELLED = 0, 1, 2, 3
IMAGE = "roundtable-sandbox-rich:test"
ENOENT, ETIME, EINVAL, EACCES = 2, 62, 22, 13


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    try:
        r = RichRig(tb_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def log_has(rig, pattern, timeout=10):
    wait_until(lambda: re.search(pattern, rig.broker_log()), timeout, f"log line /{pattern}/")


def ready_worker(rig, ch=None, **kw):
    ch = ch or rig.channel()
    w = ch.worker()
    assert w.ready(**kw).status == 200
    return ch, w


def old_worker(rig, ch=None):
    ch = ch or rig.channel()
    w = ch.worker()
    assert w.ready(body=b"").status == 200
    return ch, w


def queued(rig, tid):
    log_has(rig, rf"rich turn queued for the worker.*turn={tid}")


# ---- the capability handshake (seed, "Worker capability handshake") ----

def test_a_private_prompt_block_needs_both_capabilities(rig):
    ch, w = old_worker(rig)
    with rig.nothing_forwarded():
        tid = ch.turn("hi", speaker=("mem-1", "Mia", "principal-mem-1"))
        assert w.next().status == 204  # the turn is not handed out
    d = ch.done(tid)
    assert d["status"] == TURN_ERROR
    log_has(rig, rf"rich turn failed: the turn carries a private prompt block, and the worker did not declare both "
                 rf"the privateTo and readerRecords capabilities; rebuild the image {re.escape(IMAGE)}.*turn={tid}")
    log_has(rig, rf"rich turn error after 0 calls: the worker lacks the capabilities the turn needs.*turn={tid}")


def test_half_the_capabilities_is_not_enough(rig):
    ch, w = ready_worker(rig, private_to=True, reader_records=False)
    tid = ch.turn("hi", speaker=("mem-2", "Mo", "principal-mem-2"))
    assert w.next().status == 204
    assert ch.done(tid)["status"] == TURN_ERROR


def test_a_worker_with_both_gets_the_private_block(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi", speaker=("mem-3", "Max", "principal-mem-3"))
    h = w.next().json()
    assert h["turnId"] == tid and h["requireCapabilities"] is True
    assert h["memory"] == {"text": f"private facts about Max in {ch.channel}", "visibility": "private"}
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_an_old_worker_serves_public_turns(rig):
    ch, w = old_worker(rig)
    tid = ch.turn("hi")  # no memory block, public tools only
    h = w.next().json()
    assert h["requireCapabilities"] is False and h["memory"] is None
    assert w.messages(model_body("x")).status == 200
    assert w.tool("echo", {"mode": "echo"}).status == 200  # configured tools require nothing
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_retained_private_history_needs_both_capabilities(rig):
    ch, w = ready_worker(rig, private_to=False, reader_records=False, history=True)
    tid = ch.turn("hi")
    assert w.next().status == 204
    assert ch.done(tid)["status"] == TURN_ERROR
    log_has(rig, rf"rich turn failed: the worker retains private history.*turn={tid}")


def test_a_reconnect_without_capabilities_invalidates_a_queued_private_turn(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi", speaker=("mem-4", "Meg", "principal-mem-4"))
    queued(rig, tid)
    assert w.ready(body=b"").status == 200  # the worker came back as an older image
    assert ch.done(tid)["status"] == TURN_ERROR
    log_has(rig, rf"rich turn error after 0 calls: the worker reconnected without the capabilities a private turn "
                 rf"needs.*turn={tid}")
    # A queued public turn survives the same reconnect.
    tid = ch.turn("public")
    queued(rig, tid)
    assert w.ready(body=b"").status == 200
    assert w.next().json()["turnId"] == tid
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_a_restarted_worker_gets_its_turn_again(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    assert w.next().json()["turnId"] == tid
    assert w.ready().status == 200  # it announces itself again: it restarted
    assert w.next().json()["turnId"] == tid
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


# ---- host tools and privateTo (seed, "Private tool exchanges in Pi mode") ----

def private_answer(principal="principal-1001", text="secret fact"):
    return {"mode": "say", "text": json.dumps({"result": text, "privateTo": principal})}


def test_a_private_tool_result_is_passed_on(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    a = w.tool("echo", private_answer())
    assert a.status == 200 and a.json() == {"result": "secret fact", "privateTo": "principal-1001"}
    # Untagged output is the plain result, as in sealed mode.
    a = w.tool("echo", {"mode": "say", "text": "public fact"})
    assert a.json() == {"result": "public fact"}
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_a_private_tool_result_to_an_old_worker_fails_the_turn(rig):
    ch, w = old_worker(rig)
    tid = ch.turn("hi")
    w.next()
    a = w.tool("echo", private_answer())
    assert a.status == 503 and b"secret" not in a.body
    log_has(rig, rf"host tool echo returned privateTo, and the worker did not declare both.*rebuild the image "
                 rf"{re.escape(IMAGE)}.*turn={tid}")
    # Later model calls are blocked, even if the worker caught the tool error.
    with rig.nothing_forwarded():
        assert w.messages(model_body("go on")).status == 403
    assert ch.done(tid)["status"] == TURN_ERROR


@pytest.mark.parametrize("principal", ["", "a\nb", "x" * 257, 5])
def test_a_malformed_private_to_is_refused(rig, principal):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    a = w.tool("echo", {"mode": "say", "text": json.dumps({"result": "r", "privateTo": principal})})
    assert a.status == 502 and a.error == "upstream_error"
    log_has(rig, rf"host tool echo returned privateTo that is not a principal id.*turn={tid}")
    assert w.result(tid, "ok").status == 200
    ch.done(tid)


def test_only_the_profiles_tools_and_servers(rig):
    ch, w = ready_worker(rig, ch=rig.channel(profile="plain"))
    tid = ch.turn("hi", profile="plain")
    w.next()
    with rig.nothing_forwarded():
        assert w.tool("echo", {}).status == 404
        assert w.mcp("docs", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "echo", "arguments": {}}}).status == 404
    assert w.result(tid, "ok").status == 200
    ch.done(tid)


# ---- MCP ----

def rpc(method, id=1, **params):
    body = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        body["id"] = id
    if params:
        body["params"] = params
    return body


def test_the_start_up_scope_is_metadata_only(rig):
    ch, w = ready_worker(rig)
    with rig.nothing_forwarded():
        a = w.mcp("docs", rpc("initialize", protocolVersion="2025-03-26", capabilities={},
                              clientInfo={"name": "pi-mcp-adapter", "version": "1"}),
                  headers={"mcp-protocol-version": "2025-03-26"})
        assert a.status == 200
        r = a.json()["result"]
        assert r["protocolVersion"] == "2025-03-26" and "tools" in r["capabilities"]
        assert w.mcp("docs", rpc("notifications/initialized", id=None)).status == 202
        assert w.mcp("docs", rpc("ping", id="p")).json() == {"jsonrpc": "2.0", "id": "p", "result": {}}
        tools = w.mcp("docs", rpc("tools/list")).json()["result"]["tools"]
        assert {t["name"] for t in tools} >= {"echo", "whoami"} and all("inputSchema" in t for t in tools)
        a = w.mcp("docs", rpc("tools/call", name="echo", arguments={}))
        assert a.status == 403
        assert w.mcp("docs", rpc("resources/list")).status == 403
        assert w.mcp("docs", [rpc("ping")]).status == 400
    log_has(rig, r"tools/call refused: the start-up scope is metadata only")


def test_the_start_up_scope_has_32_calls(rig):
    ch, w = ready_worker(rig)
    statuses = [w.mcp("open", rpc("ping")).status for _ in range(33)]
    assert statuses == [200] * 32 + [403]
    log_has(rig, r"the start-up scope's 32 calls are used up")


def test_the_start_up_scope_ends_after_its_time_and_at_the_first_bind(rig):
    ch, w = ready_worker(rig)
    assert w.mcp("open", rpc("ping")).status == 200
    time.sleep(STARTUP_S + 0.5)  # the scope's own duration (test build: 4 s)
    assert w.mcp("open", rpc("ping")).status == 403
    ch2, w2 = ready_worker(rig)
    assert w2.mcp("open", rpc("ping")).status == 200
    tid = ch2.turn("hi")
    w2.next()
    assert w2.mcp("open", rpc("ping")).status == 200  # within the turn
    assert w2.result(tid, "ok").status == 200
    ch2.done(tid)
    assert w2.mcp("open", rpc("ping")).status == 403  # revoked at the first bind


def test_mcp_tool_calls_within_a_turn(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    n = len(rig.mcp_requests())
    a = w.mcp("docs", rpc("tools/call", id=7, name="echo", arguments={"q": 1}))
    assert a.status == 200 and a.json()["id"] == 7
    sent = rig.mcp_requests()[n]
    assert sent["headers"]["authorization"] == "Bearer " + rig.mcp_key  # added by brokerd
    assert sent["body"]["params"] == {"name": "echo", "arguments": {"q": 1}}
    # An answer echoing the server's key is refused (the reflection filter).
    assert w.mcp("docs", rpc("tools/call", name="whoami", arguments={})).status == 502
    with rig.nothing_forwarded():
        assert w.mcp("docs", rpc("tools/call", name="undeclared", arguments={})).status == 403
        assert w.mcp("docs", rpc("prompts/list")).status == 403
    assert w.result(tid, "ok").status == 200
    d = ch.done(tid)
    assert d["calls"] == 4  # refused calls count too


# ---- the host compactor (seed, "Compaction") ----

def compact_request(tid, how="ok", size=0):
    req = {"reason": "threshold", "tokensBefore": 310000, "firstKeptEntryId": "e42", "isSplitTurn": False,
           "messagesToSummarize": [{"role": "user", "content": "x" * size}], "turnPrefixMessages": [],
           "keptMessages": [{"role": "assistant"}], "customInstructions": how,
           "readFiles": ["/workspace/a"], "modifiedFiles": []}
    return {"turnId": tid, "request": req}


def test_the_host_compactor(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    a = w.compact(compact_request(tid))
    assert a.status == 200
    c = a.json()
    assert c["summary"] == f"summary of {ch.channel}" and c["firstKeptEntryId"] == "e42"
    assert c["tokensBefore"] == 310000 and c["estimatedTokensAfter"] == 1234
    assert c["details"] == {"kept": 1, "engine": "test-engine"}
    log_has(rig, rf"conversation compacted by the host compactor test-engine \(threshold, tokensBefore 310000\)"
                 rf".*turn={tid}")
    for how, reason in (("empty", "the host compactor answered nothing"),
                        ("fail", r"the host compactor failed \(status 3\)")):
        assert w.compact(compact_request(tid, how)).status == 204
        log_has(rig, rf"compaction falls back to Pi's summary: {reason}.*turn={tid}")
    # Three requests a turn: the fourth falls back without running the compactor.
    assert w.compact(compact_request(tid)).status == 204
    log_has(rig, rf"falls back to Pi's summary: the turn asked for three host compactions already.*turn={tid}")
    # Sixteen reports a turn.
    report = {"turnId": tid, "report": {"event": "compacted", "trigger": "threshold", "engine": "pi",
                                        "tokensBefore": 520000, "tokensAfter": 9000, "contextAfter": 12000,
                                        "nextCompactionAt": 500000}}
    assert [w.compact(report).status for _ in range(17)] == [204] * 16 + [429]
    log_has(rig, rf"conversation compacted trigger=threshold engine=pi tokensBefore=520000 tokensAfter=9000 "
                 rf"contextAfter=12000 nextCompactionAt=500000.*turn={tid}")
    # Another turn's id, or a body that is neither.
    assert w.compact(compact_request("0" * 16)).status == 409
    assert w.compact({"turnId": tid}).status == 400
    assert w.result(tid, "ok").status == 200
    ch.done(tid)


def test_compactor_fallbacks(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    t0 = time.monotonic()
    assert w.compact(compact_request(tid, "sleep")).status == 204
    assert time.monotonic() - t0 < 10
    log_has(rig, rf"falls back to Pi's summary: the host compactor outlasted its timeout of 1500 ms.*turn={tid}")
    assert w.compact(compact_request(tid, "shape")).status == 204
    log_has(rig, rf"falls back to Pi's summary: the host compactor's answer is out of shape.*turn={tid}")
    # Over rich.compaction.maxRequestBytes (64 KiB here).
    assert w.compact(compact_request(tid, "ok", size=70000)).status == 204
    log_has(rig, rf"the request is larger than rich.compaction.maxRequestBytes \(65536 bytes\).*turn={tid}")
    assert w.result(tid, "ok").status == 200
    ch.done(tid)
    # Outside a turn: refused.
    assert w.compact(compact_request(tid)).status == 409


# ---- the channel's lifecycle ----

def test_unbind_cancels_the_turn_and_closes_the_listener(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    ch.unbind()
    assert ch.done(tid)["status"] == TURN_CANCELLED
    with pytest.raises(ConnectionRefusedError):
        w.connect()
    assert ch.wait_ready()["result"] == -ENOENT


def test_a_new_bind_replaces_the_listener(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    ch.bind()  # a re-created container (or a restarted runnerd) binds the channel again
    assert ch.done(tid)["status"] == TURN_CANCELLED
    assert ch.wait_ready(deadline_ms=300)["result"] == -ETIME  # the worker must announce itself again
    w = ch.worker()
    assert w.ready().status == 200
    tid = ch.turn("again")
    assert w.next().json()["turnId"] == tid
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_a_lost_runnerd_link_closes_its_channels(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("hi")
    w.next()
    rig.link.close()
    log_has(rig, rf"rich channel {ch.hash[:12]}: listener closed \(its runnerd link is gone\)")
    rig.link = rig.connect_link()
    rig.backlog.clear()
    with pytest.raises(ConnectionRefusedError):
        w.connect()
    ch.bind()
    w = ch.worker()
    assert w.ready().status == 200
    tid = ch.turn("after")
    assert w.next().json()["turnId"] == tid
    assert w.result(tid, "ok").status == 200
    assert ch.done(tid)["status"] == TURN_OK


def test_a_brokerd_restart_in_the_middle_of_a_conversation(rig):
    ch, w = ready_worker(rig)
    tid = ch.turn("first")
    w.next()
    assert w.messages(model_body("first call")).status == 200
    assert w.result(tid, "one").status == 200
    assert ch.done(tid)["status"] == TURN_OK
    rig.link.close()
    rig.stop_daemon("brokerd")
    rig.start_daemon("brokerd", extra_env={"RTS_LOG_LEVEL": "debug"})
    links = []

    def linked():
        # The old brokerd.sock stays behind until the new brokerd replaces it.
        try:
            links.append(rig.connect_link())
            return True
        except (ConnectionRefusedError, FileNotFoundError):
            return False

    wait_until(linked, 20, "the restarted brokerd to take the runnerd link")
    rig.link = links[0]
    rig.backlog.clear()
    ch.bind()  # runnerd re-binds the same channel's socket
    w = ch.worker()
    assert w.ready(history=False).status == 200  # the worker re-announces readiness
    assert ch.wait_ready()["result"] == 0
    tid = ch.turn("second")
    assert w.next().json()["turnId"] == tid
    assert w.messages(model_body("second call")).status == 200
    assert w.result(tid, "two").status == 200
    d = ch.done(tid)
    assert d["status"] == TURN_OK and d["reply"]["text"] == "two"


# ---- attachments ----

def attach(rig, tid, index, url, max_bytes):
    rig.link.send(rtsproto.BROKER_ATTACH_FETCH, turn_id=tid, index=index, url=url, max_bytes=max_bytes)
    m = rig.expect(rtsproto.BROKER_ATTACH_DATA, lambda m: m["turn_id"] == tid and m["index"] == index)
    data = os.read(m.fd, 1 << 20)
    m.close()
    return m["result"], m["mime"], data


def test_attachment_fetches_keep_to_the_fetch_rules(rig):
    """Each refusal with its own reason in brokerd's log, before any connection or name
    lookup. Hosts under .invalid (RFC 6761) never resolve, so a refusal that did not come
    first would fail the fetch otherwise, and no packet leaves for a real host."""
    tid = secrets.token_hex(8)
    cases = [
        # Loopback, private and credential-carrying URLs, and other schemes.
        (rig.anthropic.url + "/v1/messages", 1 << 20, EACCES, r"address not public: loopback \(RFC \d+\)"),
        ("http://10.0.0.1/x.png", 1 << 20, EACCES, re.escape("address not public: private (RFC 1918)")),
        ("https://user:pw@example.invalid/x", 1 << 20, EACCES, "URL carries user info"),
        ("file:///etc/passwd", 1 << 20, EACCES, "URL scheme is not http or https"),
        # Bounds of the request itself.
        ("https://example.invalid/x", 0, EINVAL, "its size limit is outside 1 to 26214400 bytes"),
        ("https://example.invalid/x", 25 * 1024 * 1024 + 1, EINVAL, "its size limit is outside 1 to 26214400 bytes"),
    ]
    with rig.nothing_forwarded():
        for index, (url, max_bytes, err, _) in enumerate(cases):
            assert attach(rig, tid, index, url, max_bytes)[0] == -err, (index, url)
    for index, (_, _, _, why) in enumerate(cases):
        log_has(rig, rf"attachment {index} not fetched: {why} \[turn={tid} ")
