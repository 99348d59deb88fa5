# SPDX-License-Identifier: Apache-2.0
"""brokerd's rich side (issue 16, DESIGN.md 8.5), rule by rule, against a real brokerd (the
test build: rich silence 3 s, start-up scope 4 s, long poll 1.5 s) running as the service
account, over a real rich listener, with the scripted streaming Anthropic endpoint over TLS
(tests/fakes/fake_anthropic.py), the scripted MCP server and real host commands
(tests/integration/rich_broker_rig.py). The test plays runnerd on brokerd.sock and the worker on
the channel's broker socket.

Every refusal sends the bad input and checks the answer, that nothing reached an upstream
(the fakes record every request), and that it was that rule which refused it (its log line,
or the same input without the bad part passing).

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_broker.py
"""
import json
import re
import socket
import threading
import time

import pytest

import rtsproto
from harness import QUIET_FORWARD_S, HarnessError, wait_past, wait_until
from rich_broker_rig import (DUMMY_API_KEY, MODEL, RichRig, finish, model_body, parse_reply, request_bytes,
                             sealed_memfd, start_turn, token_for)
from testbuild import tb_env  # noqa: F401 (a fixture)

SILENCE_S = 3.0   # TESTBUILD_RICH_SILENCE_MS
STARTUP_S = 4.0   # TESTBUILD_RICH_STARTUP_MS
LONG_POLL_S = 1.5  # TESTBUILD_RICH_LONG_POLL_MS
TURN_OK, TURN_ERROR, TURN_TIMEOUT, TURN_CANCELLED = 0, 1, 2, 3


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    try:
        r = RichRig(tb_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    assert "test build: rich silence limit 3000 ms" in r.broker_log()
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def log_has(rig, pattern, timeout=10):
    wait_until(lambda: re.search(pattern, rig.broker_log()), timeout, f"log line /{pattern}/")


# ---- a whole turn ----

def test_a_turn_round_trip(rig):
    ch = rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    m = ch.wait_ready()
    assert m["result"] == 0 and m["capabilities"] == 3 and m["private_history"] == 0
    tid = ch.turn("hello there")
    h = w.next().json()
    assert h["turnId"] == tid and h["text"] == "hello there"
    assert h["speaker"] == {"id": "1001", "name": "Alice", "principalId": "principal-1001"}
    assert h["model"] == MODEL and h["maxOutputTokens"] == 8000 and h["prompt"] == "You are a test persona."
    assert h["effort"] == "medium" and h["memory"] is None and h["requireCapabilities"] is False
    names = {t["name"]: t["route"] for t in h["tools"]}
    assert names == {"host_echo": "/tools/echo", "host_short": "/tools/short", "mcp_1_whoami": "/mcp/open",
                     **{n: "/mcp/docs" for n in names if n.startswith("mcp_0_")}}
    assert h["limits"]["maxCalls"] == 128 and 0 < h["limits"]["turnTimeoutMs"] <= 60000

    a = w.messages(model_body("say hi"))
    assert a.status == 200 and a.headers["content-type"].startswith("text/event-stream")
    assert a.text() == "echo: say hi"
    kinds = [n for n, _ in a.events()]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    files = [{"name": "../../notes.txt", "mime": "text/plain", "data": "aGVsbG8="},
             {"name": ".env", "mime": "application/x-evil", "data": ""}]
    assert w.result(tid, "the reply", files).status == 200
    d = ch.done(tid)
    assert d["status"] == TURN_OK and d["calls"] == 1
    assert d["reply"]["text"] == "the reply"
    assert [(f["name"], f["mime"]) for f in d["reply"]["files"]] == [("_.._notes.txt", "text/plain"),
                                                                     ("env", "application/octet-stream")]


def test_the_upstream_request_is_rebuilt(rig):
    ch, w, tid, _ = start_turn(rig)
    n = len(rig.anthropic.requests())
    body = model_body("rebuild me", max_tokens=60000, metadata={"user_id": "guest"})
    a = w.messages(body, headers={"anthropic-beta": "interleaved-thinking-2025-05-14,files-api-2025-04-14",
                                  "x-stainless-helper-method": "stream"})
    assert a.status == 200
    req = rig.anthropic.requests()[n]
    assert req["path"] == "/v1/messages"
    assert req["body"]["model"] == MODEL and req["body"]["max_tokens"] == 8000
    assert "metadata" not in req["body"]
    # The OAuth token read for this channel and speaker, the OAuth beta with it, the
    # allow-listed beta only; nothing of the SDK's own headers.
    assert req["bearer"] == token_for(ch.channel, "1001", "principal-1001")
    betas = req["headers"]["anthropic-beta"].split(",")
    assert "interleaved-thinking-2025-05-14" in betas and "oauth-2025-04-20" in betas
    assert "files-api-2025-04-14" not in betas
    assert req["headers"]["anthropic-version"] == "2023-06-01"
    assert not [k for k in req["headers"] if k.startswith("x-stainless") or k in ("x-api-key", "user-agent",
                                                                                   "anthropic-dangerous-direct-browser-access")]
    # ?beta=true is kept; count_tokens is not streamed.
    a = w.messages(model_body("count me", stream=False), target="/anthropic/v1/messages/count_tokens?beta=true")
    assert a.status == 200 and set(a.json()) == {"input_tokens"}
    assert rig.anthropic.requests()[-1]["path"] == "/v1/messages/count_tokens?beta=true"
    finish(ch, w, tid)


def test_the_token_command_gets_the_bound_speaker_and_none_fails_the_call(rig):
    ch, w, tid, _ = start_turn(rig, speaker=("nokey", "Nobody", "principal-x"))
    with rig.nothing_forwarded():
        a = w.messages(model_body("hi"))
    assert a.status == 503 and a.error == "unavailable"
    log_has(rig, rf"no OAuth token from rich.oauthToken.*turn={tid}")
    finish(ch, w, tid)
    # The same call for another speaker on the same channel carries that speaker's token.
    _, w2, tid2, _ = start_turn(rig, ch=ch, speaker=("1002", "Bob", "principal-1002"))
    assert w2.messages(model_body("hi")).status == 200
    assert rig.anthropic.requests()[-1]["bearer"] == token_for(ch.channel, "1002", "principal-1002")
    finish(ch, w2, tid2)


# ---- the worker protocol ----

def test_wait_ready_times_out_then_answers_at_once(rig):
    ch = rig.channel()
    t0 = time.monotonic()
    m = ch.wait_ready(deadline_ms=1000)
    assert m["result"] == -62  # -ETIME
    assert time.monotonic() - t0 >= 0.9
    w = ch.worker()
    assert w.ready(private_to=True, reader_records=False, history=True).status == 200
    m = ch.wait_ready()
    assert m["result"] == 0 and m["capabilities"] == rtsproto.RICH_CAP_PRIVATE_TO and m["private_history"] == 1


def test_a_malformed_ready_is_refused_and_an_empty_one_is_an_old_worker(rig):
    ch = rig.channel()
    w = ch.worker()
    for body in ({"capabilities": {}}, {"capabilities": {"privateTo": True, "readerRecords": True}},
                 {"capabilities": {"privateTo": "yes", "readerRecords": True}, "privateHistory": False}, "[]"):
        a = w.ready(body=body)
        assert a.status == 400 and a.error == "bad_request", body
    assert ch.wait_ready(deadline_ms=300)["result"] == -62
    assert w.ready(body=b"").status == 200
    m = ch.wait_ready()
    assert m["result"] == 0 and m["capabilities"] == 0


def test_one_idle_long_poll_per_channel(rig):
    ch = rig.channel()
    w = ch.worker()
    # Two at once (each waits LONG_POLL_S when no turn comes): one waits, one is refused.
    got = []
    threads = [threading.Thread(target=lambda: got.append(w.next())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status for a in got) == [204, 429]
    assert [a.error for a in got if a.status == 429] == ["busy"]
    # The long poll ends with 204 after LONG_POLL_S, below the silence limit.
    t0 = time.monotonic()
    assert w.next().status == 204
    assert LONG_POLL_S - 0.3 <= time.monotonic() - t0 <= LONG_POLL_S + 2


def test_a_reply_packet_outside_its_turn_is_refused_before_its_body(rig):
    ch = rig.channel()
    w = ch.worker()
    # Only the head of a 60 MiB packet: the answer comes although the body never does.
    head = (b"POST /worker/result HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer roundtable-sandbox-dummy-key\r\n"
            b"Content-Type: application/json\r\nContent-Length: 62914560\r\n\r\n")
    a = w.raw(head, timeout=10)
    assert a.status == 409 and a.error == "conflict" and a.closed
    log_has(rig, r"reply packet outside its turn")
    # Admitted but not yet handed to the worker: still outside.
    tid = ch.turn("queued")
    a = w.raw(head, timeout=10)
    assert a.status == 409
    assert w.next().status == 200
    # Handed: another turn's id is refused (after the body), the right one settles it.
    a = w.result("0" * 16, "wrong turn")
    assert a.status == 409
    d = finish(ch, w, tid)
    assert d["status"] == TURN_OK
    # Settled: outside again.
    assert w.result(tid, "late").status == 409


def test_a_reply_packet_beyond_72_mib_is_refused(rig):
    ch, w, tid, _ = start_turn(rig)
    head = (b"POST /worker/result HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer roundtable-sandbox-dummy-key\r\n"
            b"Content-Type: application/json\r\nContent-Length: 75497473\r\n\r\n")
    a = w.raw(head, timeout=10)
    assert a.status == 413 and a.error == "too_large"
    head72 = head.replace(b"75497473", b"75497472")
    s = w.connect()
    s.sendall(head72)  # exactly 72 MiB is taken: the broker waits for the body
    r = w.raw(head72, timeout=5)  # a second packet while the first is incoming
    assert r.status == 409 and r.error == "conflict"
    log_has(rig, rf"broker call \d+ route rich_worker refused \(reply_outside_turn\).*RTS_TURN_ID={tid} ")
    s.close()
    # Once brokerd saw the first one go, a packet is taken again.
    wait_until(lambda: w.result(tid, "done").status == 200, 10, "the reply packet taken")
    assert ch.done(tid)["status"] == TURN_OK


def test_a_reply_packet_is_cancelled_with_its_turn(rig):
    ch, w, tid, _ = start_turn(rig)
    s = w.connect()
    s.sendall(request_bytes("/worker/result", b"x" * 10)[:-10].replace(b"Content-Length: 10",
                                                                        b"Content-Length: 1000000")
              + b'{"turnId":')
    wait_past(time.monotonic() + 0.3)  # the packet is on its way
    ch.cancel(tid)
    d = ch.done(tid)
    assert d["status"] == TURN_CANCELLED and d["reply"] is None
    s.settimeout(10)
    data = b""
    try:
        while (b := s.recv(65536)):
            data += b
    except ConnectionResetError:
        pass
    s.close()
    assert not data.startswith(b"HTTP/1.1 200"), data[:100]


def test_turn_input_refusals(rig):
    ch = rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    bad = {
        "unsealed memfd": dict(fd=sealed_memfd(b"{}", seals=0)),
        "another speaker": dict(input_override=lambda d: dict(d, speaker={**d["speaker"], "principalId": "other"})),
        "nine images": dict(images=[{"mime": "image/png", "data": "AAAA"}] * 9),
        "an svg": dict(images=[{"mime": "image/svg+xml", "data": "AAAA"}]),
        "an attachment elsewhere": dict(attachments=[{"name": "a", "path": "/workspace/x", "mime": "a/b",
                                                      "bytes": 1}]),
        "an unknown member": dict(input_override=lambda d: dict(d, tools=[])),
        "another profile": dict(profile="plain"),
    }
    for what, kw in bad.items():
        tid = ch.turn("x", **kw)
        d = ch.done(tid)
        assert d["status"] == TURN_ERROR and d["calls"] == 0, what
    log_has(rig, r"rich turn refused: turn input refused: not a sealed memfd")
    log_has(rig, r"rich turn input refused: speaker is not the bound speaker")
    log_has(rig, r"rich turn error after 0 calls: its input was refused: images must list at most 8 images")
    log_has(rig, r"rich turn refused: the turn names another profile")
    # Nothing was handed out.
    assert w.next().status == 204
    # One admitted turn per channel.
    tid = ch.turn("first")
    tid2 = ch.turn("second")
    assert ch.done(tid2)["status"] == TURN_ERROR
    log_has(rig, r"the channel has an admitted turn already")
    assert w.next().json()["turnId"] == tid
    finish(ch, w, tid)


def test_the_turn_deadline_ends_the_turn_and_its_calls(rig):
    ch, w, tid, _ = start_turn(rig, deadline_ms=2500)
    t0 = time.monotonic()
    a = w.messages(model_body("#sleep 8000"))
    assert a.status in (503, 504) or a.closed
    d = ch.done(tid)
    assert d["status"] == TURN_TIMEOUT
    assert time.monotonic() - t0 < 7
    log_has(rig, rf"rich turn timeout after .* the turn deadline passed.*turn={tid}")


# ---- limits of the listener ----

def test_the_silence_limit_cuts_a_silent_request_body(rig):
    ch, w, tid, _ = start_turn(rig)
    s = w.connect()
    s.sendall(request_bytes("/worker/result", b"x" * 10)[:-10].replace(b"Content-Length: 10",
                                                                        b"Content-Length: 1000") + b"{")
    t0 = time.monotonic()
    s.settimeout(SILENCE_S + 10)
    try:
        data = s.recv(1024)
    except ConnectionResetError:
        data = b""
    took = time.monotonic() - t0
    s.close()
    assert data == b"" and SILENCE_S - 0.5 <= took <= SILENCE_S + 3, took
    log_has(rig, r"closed: no byte read or written for the silence limit")
    # The cut packet's slot is given back when libmicrohttpd reports the connection
    # closed, a moment after the worker saw it close: until then a new packet is refused
    # from its head (409), and then it is taken.
    wait_until(lambda: w.result(tid, "done").status == 200, 10, "the reply slot given back")
    ch.done(tid)


def test_a_silent_stream_is_cut(rig):
    ch, w, tid, _ = start_turn(rig)
    t0 = time.monotonic()
    a = w.messages(model_body("#silent"), timeout=SILENCE_S + 15)
    took = time.monotonic() - t0
    assert a.status == 200 and SILENCE_S - 0.5 <= took <= SILENCE_S + 5, took
    ev = a.events()
    assert ev[0][0] == "message_start" and ev[-1][0] == "error"
    log_has(rig, r"anthropic upstream failure: .*the stream was silent for the silence limit")
    # A head that never comes: the same limit, a 504.
    a = w.messages(model_body("#silent-headers"), timeout=SILENCE_S + 15)
    assert a.status == 504 and a.error == "upstream_timeout"
    log_has(rig, r"no answer head within the silence limit")
    finish(ch, w, tid)


def test_a_head_must_come_within_ten_seconds(rig):
    ch = rig.channel()
    w = ch.worker()
    s = w.connect(timeout=20)
    s.sendall(b"POST /worker/next HTTP/1.1\r\nHost: broker\r\n")  # and nothing more
    t0 = time.monotonic()
    try:
        data = s.recv(1024)
    except ConnectionResetError:
        data = b""
    took = time.monotonic() - t0
    s.close()
    # Closed unanswered, not before the ten-second header deadline (the upper bound only
    # says it was closed at all, on a loaded machine).
    assert data == b"" and 9.5 <= took <= 30, took
    log_has(rig, rf"route rich_none refused \(header_deadline\).*RTS_CHANNEL_HASH={ch.hash} .*RTS_RESULT=closed")


def test_sixteen_connections_per_listener(rig):
    ch = rig.channel()
    w = ch.worker()
    held = [w.connect() for _ in range(16)]
    for s in held:
        s.sendall(b"POST /worker/next HTTP/1.1\r\n")  # heads still coming
    extra = w.connect()
    extra.settimeout(5)
    try:
        assert extra.recv(10) == b""  # closed at once, unanswered
    except ConnectionResetError:
        pass
    extra.close()
    for s in held:
        s.close()
    wait_until(lambda: w.next().status == 204, 20, "the listener serving again")


def test_an_input_body_beyond_96_mib_is_refused(rig):
    ch, w, tid, _ = start_turn(rig)
    head = request_bytes("/anthropic/v1/messages", b"", worker=False).replace(b"Content-Length: 0",
                                                                               b"Content-Length: 100663297")
    with rig.nothing_forwarded():
        a = w.raw(head, timeout=10)
    assert a.status == 413 and a.error == "too_large"
    finish(ch, w, tid)


def test_a_fifth_credential_call_in_flight_is_refused(rig):
    ch, w, tid, _ = start_turn(rig)
    n = len(rig.anthropic.requests())
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(w.messages(model_body("#sleep 2500"))))
               for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(rig.anthropic.requests()) == n + 4, 10, "four calls at the upstream")
    fifth = w.messages(model_body("the fifth"))
    assert fifth.status == 429 and fifth.error == "busy"
    log_has(rig, r"rich call route anthropic status 429: four credential-bearing calls in flight already")
    for t in threads:
        t.join()
    assert [a.status for a in answers] == [200] * 4
    assert len(rig.anthropic.requests()) == n + 4
    # With the slots free again, the same call goes through.
    assert w.messages(model_body("the fifth")).status == 200
    finish(ch, w, tid)


def test_credential_calls_need_a_handed_turn(rig):
    ch = rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    with rig.nothing_forwarded():
        a = w.messages(model_body("no turn"))
        t = w.tool("echo", {})
    assert a.status == 403 and t.status == 403
    log_has(rig, r"rich call route anthropic status 403: no turn is admitted to the worker")


# ---- the Anthropic routes' rules ----

NATIVE_TOOL = model_body("search", tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}])
URL_IMAGE = {"messages": [{"role": "user", "content": [
    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]}], "stream": True}
FILE_IMAGE = {"messages": [{"role": "user", "content": [
    {"type": "image", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}}]}], "stream": True}
REMOTE_REF = model_body("tool", tools=[{"name": "t", "input_schema": {
    "type": "object", "properties": {"a": {"$ref": "https://evil.example/schema.json"}}}}])
MCP_CONNECTOR = model_body("x", mcp_servers=[{"type": "url", "url": "https://e/mcp", "name": "e"}])


@pytest.mark.parametrize("body,rule", [(NATIVE_TOOL, "native_tool"), (URL_IMAGE, "remote_media"),
                                       (FILE_IMAGE, "remote_media"), (REMOTE_REF, "remote_ref"),
                                       (MCP_CONNECTOR, "shape")],
                         ids=["native tool", "URL image", "file image", "remote $ref", "MCP connector"])
def test_refused_requests(rig, body, rule):
    ch, w, tid, _ = start_turn(rig)
    with rig.nothing_forwarded():
        a = w.messages(body)
    assert a.status == 400 and a.error == "bad_request"
    log_has(rig, rf"anthropic request refused \({rule}\).*turn={tid}")
    finish(ch, w, tid)


def test_the_same_requests_without_the_bad_part_pass(rig):
    ch, w, tid, _ = start_turn(rig)
    ok_tool = model_body("search", tools=[{"name": "web_search", "input_schema": {"type": "object"}}])
    ok_image = {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "what is it"}]}], "stream": True}
    ok_ref = model_body("tool", tools=[{"name": "t", "input_schema": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}}])
    for body in (ok_tool, ok_image, ok_ref):
        assert w.messages(body).status == 200
    finish(ch, w, tid)


def test_account_routes_and_other_methods_are_refused(rig):
    ch, w, tid, _ = start_turn(rig)
    with rig.nothing_forwarded():
        for target in ("/anthropic/v1/files", "/anthropic/v1/models", "/anthropic/v1/messages/batches",
                       "/anthropic/v1/messages?beta=false", "/anthropic/v1/messages?x=1", "/v1/messages"):
            a = w.messages(model_body("x"), target=target)
            assert a.status == 404 and a.error == "not_found", target
        a = w.raw(request_bytes("/anthropic/v1/messages", b"{}", worker=False, method="GET"))
        assert a.status == 405
    finish(ch, w, tid)


@pytest.mark.parametrize("name,value,status", [
    ("cookie", "session=1", 400), ("x-forwarded-for", "10.0.0.1", 400), ("forwarded", "for=1.2.3.4", 400),
    ("proxy-authorization", "Basic eDp5", 400), ("via", "1.1 proxy", 400), ("te", "trailers", 400),
    ("x-api-key", "sk-ant-api03-real-key-123", 401), ("authorization", "Bearer sk-ant-oat01-real", 401)])
def test_refused_headers(rig, name, value, status):
    ch, w, tid, _ = start_turn(rig)
    with rig.nothing_forwarded():
        a = w.messages(model_body("x"), headers={name: value} if name != "authorization" else
                       {"authorization": value, "x-api-key": None})
    assert a.status == status
    finish(ch, w, tid)


def test_a_higher_effort_than_judged_is_capped(rig):
    ch, w, tid, h = start_turn(rig)
    assert h["effort"] == "medium"
    n = len(rig.anthropic.requests())
    a = w.messages(model_body("think hard", thinking={"type": "adaptive"}, output_config={"effort": "xhigh"}))
    assert a.status == 200
    up = rig.anthropic.requests()[n]["body"]
    assert up["output_config"] == {"effort": "medium"} and up["thinking"] == {"type": "adaptive"}
    log_has(rig, rf"kept at the judged effort medium \(effort capped.*turn={tid}")
    # Adaptive thinking without an effort: capped below the default at medium.
    assert w.messages(model_body("think", thinking={"type": "adaptive"})).status == 200
    assert rig.anthropic.requests()[-1]["body"]["output_config"] == {"effort": "medium"}
    # A budget above the level's is cut down to it.
    assert w.messages(model_body("budget", max_tokens=8000,
                                 thinking={"type": "enabled", "budget_tokens": 7000})).status == 200
    assert rig.anthropic.requests()[-1]["body"]["thinking"]["budget_tokens"] == 7000
    assert w.messages(model_body("budget", max_tokens=8000,
                                 thinking={"type": "enabled", "budget_tokens": 60000})).status == 200
    assert rig.anthropic.requests()[-1]["body"]["thinking"]["budget_tokens"] == 7999
    finish(ch, w, tid)


def test_the_judge_picks_the_level_and_the_channel_keeps_it(rig):
    ch, w, tid, h = start_turn(rig, text="please #effort high")
    assert h["effort"] == "high"
    assert w.messages(model_body("x", output_config={"effort": "max"})).status == 200
    assert rig.anthropic.requests()[-1]["body"]["output_config"] == {"effort": "high"}
    assert w.messages(model_body("x", thinking={"type": "adaptive"})).status == 200
    assert "output_config" not in rig.anthropic.requests()[-1]["body"]  # high: the model's default
    finish(ch, w, tid)
    # The next turn's judge gets "high" as the previous level and keeps it.
    _, w, tid, h = start_turn(rig, ch=ch, text="no directive")
    assert h["effort"] == "high"
    finish(ch, w, tid)
    # An answer that is no level keeps the previous one.
    _, w, tid, h = start_turn(rig, ch=ch, text="#effort banana")
    assert h["effort"] == "high"
    log_has(rig, r"rich effort judge printed no level")
    finish(ch, w, tid)


# ---- the streamed answer ----

def test_events_stream_through_in_order(rig):
    ch, w, tid, _ = start_turn(rig)
    a = w.messages(model_body("#thinking #chunks 40 #ping 3 " + "word " * 200))
    kinds = [n for n, _ in a.events()]
    assert kinds.count("content_block_delta") >= 40 and kinds.count("ping") == 3
    assert a.text() == "echo: #thinking #chunks 40 #ping 3 " + "word " * 200
    a = w.messages(model_body("#tool host_echo {\"a\":1}"))
    ev = a.events()
    start = [d for n, d in ev if n == "content_block_start"][0]
    assert start["content_block"]["type"] == "tool_use"
    assert "".join(d["delta"]["partial_json"] for n, d in ev if n == "content_block_delta") == '{"a": 1}'
    finish(ch, w, tid)


def test_backpressure_holds_the_upstream(rig):
    ch, w, tid, _ = start_turn(rig)
    n = len(rig.anthropic.answers())
    size = 40_000_000
    s = w.connect(timeout=30)
    s.sendall(request_bytes("/anthropic/v1/messages", json.dumps(model_body(f"#big {size}")).encode(),
                            worker=False))
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    # The worker reads nothing for a while: the upstream cannot finish meanwhile.
    wait_past(time.monotonic() + 2.0)
    assert len(rig.anthropic.answers()) == n, "the upstream wrote its whole answer while the worker read nothing"
    data = first
    s.settimeout(30)
    while (b := s.recv(1 << 20)):
        data += b
    s.close()
    r = parse_reply(data, True)
    assert len(r.text()) == size
    wait_until(lambda: len(rig.anthropic.answers()) == n + 1, 10, "the upstream's answer complete")
    assert rig.anthropic.answers()[-1]["outcome"] == "complete"
    finish(ch, w, tid)


def test_an_upstream_answer_beyond_50_mib_is_cut(rig):
    ch, w, tid, _ = start_turn(rig)
    a = w.messages(model_body("#big 60000000"), timeout=120)
    assert a.status == 200 and a.events()[-1][0] == "error"
    assert 40_000_000 < len(a.text()) < 50 * 1024 * 1024
    log_has(rig, r"anthropic upstream failure: .*answer larger than 50 MiB")
    finish(ch, w, tid)


@pytest.mark.parametrize("directive", ["#reflect", "#reflect base64", "#reflect hex", "#split 10",
                                       "#split-delta 12", "#split-delta 1"])
def test_a_reflected_credential_never_reaches_the_worker(rig, directive):
    ch, w, tid, _ = start_turn(rig, speaker=("1003", "Carol", "principal-1003"))
    token = token_for(ch.channel, "1003", "principal-1003")
    a = w.messages(model_body(directive + " #chunks 30"))
    assert a.status == 200
    assert a.events()[-1][0] == "error"
    text = a.text()
    assert token not in a.body.decode() and token[:8] not in text
    log_has(rig, rf"anthropic answer refused: it reflects a credential of the turn.*turn={tid}")
    finish(ch, w, tid)


def test_a_decoy_passes_the_filter(rig):
    ch, w, tid, _ = start_turn(rig)
    a = w.messages(model_body("#reflect raw decoy"))
    assert a.events()[-1][0] == "message_stop"
    finish(ch, w, tid)


def test_upstream_failures_are_logged_with_status_latency_and_masked_body(rig):
    ch, w, tid, _ = start_turn(rig, speaker=("1004", "Dan", "principal-1004"))
    token = token_for(ch.channel, "1004", "principal-1004")
    a = w.messages(model_body("#status 529"))
    assert a.status == 529 and a.json()["error"]["type"] == "overloaded_error"
    assert "scripted" not in a.body.decode()
    log_has(rig, rf"anthropic upstream failure: channel {ch.hash[:12]}, status 529, \d+ ms: error status; "
                 r"body: .*scripted failure")
    # A body that quotes the credential is logged with it masked.
    script = [{"status": 500, "body": {"type": "error", "error": {"type": "api_error",
                                                                  "message": "bad token " + token + " sent"}}}]
    with open(rig.anthropic.record.rsplit("/", 1)[0] + "/script-quote.json", "w") as f:
        json.dump(script, f)
    a = w.messages(model_body("#script quote"))
    assert a.status == 500 and token not in a.body.decode()
    log_has(rig, r"status 500, \d+ ms: error status; body: .*bad token \[masked\] sent")
    assert token not in rig.broker_log()
    # Overflow keeps Pi's words; a redirect is refused, not followed.
    a = w.messages(model_body("#status 400"))
    assert a.status == 400
    n = len(rig.anthropic.requests())
    a = w.messages(model_body("#redirect"))
    assert a.status == 502 and len(rig.anthropic.requests()) == n + 1
    # An error event in the stream.
    a = w.messages(model_body("#error-event overloaded_error"))
    assert a.events()[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                    "message": "upstream error"}})
    log_has(rig, r"error event in the stream")
    finish(ch, w, tid)


# ---- budget ----

def test_max_calls_per_turn(tb_env):  # noqa: F811
    r = RichRig(tb_env, rich={"maxCalls": 3}, extra_env={"RTS_LOG_LEVEL": "debug"})
    try:
        ch, w, tid, h = start_turn(r)
        assert h["limits"]["maxCalls"] == 3
        assert [w.messages(model_body(f"call {i}")).status for i in range(3)] == [200] * 3
        with r.nothing_forwarded():
            a = w.messages(model_body("one more"))
            t = w.tool("echo", {})
        assert a.status == 429 and a.error == "budget_exhausted" and t.status == 429
        d = finish(ch, w, tid)
        assert d["calls"] == 5  # refused calls count too
        # A new turn has a new budget.
        _, w, tid, _ = start_turn(r, ch=ch)
        assert w.messages(model_body("again")).status == 200
        finish(ch, w, tid)
    finally:
        r.stop()
