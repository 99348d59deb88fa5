# SPDX-License-Identifier: Apache-2.0
"""The rich-mode fixtures themselves: the richworker image (tests/images/richworker.c) in a real
sealed container against a Python stand-in for brokerd's rich listener (rich_rig.StandIn),
and fake_anthropic.py's streams read with a real SSE parser. Later suites rely on each
directive doing what its table entry says; these tests are where that is shown.

The stand-in forwards every model call to fake_anthropic unchanged (it enforces no rule), so
the fake's record shows exactly what the worker sent."""
import base64
import json
import os
import socket
import time

import pytest

from harness import QUIET_FORWARD_S, assert_quiet, wait_until
from rich_rig import (MODEL, RICH_DUMMY_KEY, WORKER_DUMMY_KEY, FakeAnthropic, SSEParser, StandIn, WorkerClient,
                      make_ca, messages_body, parse_sse, richworker_image, step)

DIRECTIVE_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def image(rts_env):
    return richworker_image(rts_env)


@pytest.fixture(scope="module")
def st(rts_env, image):
    """One stand-in and one worker container for the tests that leave the worker running."""
    s = StandIn(rts_env)
    try:
        s.start_worker(image)
        wait_until(lambda: s.readies, 30, "the worker's readiness announcement")
        yield s
    finally:
        s.close()


def model_requests(st, since=0):
    return [r for r in st.anthropic.requests() if r["path"].startswith("/v1/messages")][since:]


# ---- the container and the plain turn ----------------------------------------------------

def test_worker_runs_sealed_and_announces_capabilities(st):
    info = st.worker.inspect()
    hc = info["HostConfig"]
    assert hc["NetworkMode"] == "none"
    assert hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in hc["SecurityOpt"]
    assert info["Config"]["User"] == f"{st.env.uid}:{st.env.gid}"
    assert info["State"]["Running"]
    assert st.readies[0] == {"capabilities": {"privateTo": True, "readerRecords": True}, "privateHistory": False}
    ready = st.requests("/worker/ready")[0]
    assert ["Authorization", "Bearer " + WORKER_DUMMY_KEY] in ready["headers"]


def test_plain_turn_streams_one_model_call_and_posts_the_reply(st):
    before = len(model_requests(st))
    tid = st.queue_turn("hello there")
    packet = st.wait_result(DIRECTIVE_TIMEOUT_S)
    assert packet["turnId"] == tid and packet["files"] == []
    rep = json.loads(packet["text"])
    assert rep["turnId"] == tid
    assert rep["input"]["speaker"]["principalId"] == "principal-1001"
    s = step(rep, "model")
    assert s["status"] == 200 and s["stop"] is True and s["stopReason"] == "end_turn"
    assert s["events"][0] == "message_start" and s["events"][-1] == "message_stop"
    assert s["text"] == "echo: hello there"
    assert s["contentType"].startswith("text/event-stream")
    reqs = model_requests(st, before)
    assert len(reqs) == 1
    body = reqs[0]["body"]
    assert body["model"] == MODEL and body["max_tokens"] == 4096 and body["stream"] is True
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "medium"}
    assert body["system"][0]["text"] == "You are a test."
    assert body["messages"][0]["content"][0] == {"type": "text", "text": "hello there"}
    # What the worker sent the stand-in: the Anthropic SDK's headers, with the placeholder.
    sent = dict((k.lower(), v) for k, v in st.requests("/anthropic/v1/messages")[-1]["headers"])
    assert sent["x-api-key"] == RICH_DUMMY_KEY
    assert sent["anthropic-version"] == "2023-06-01"
    assert sent["x-stainless-lang"] == "js" and sent["user-agent"] == "Anthropic/JS 0.91.1"
    assert "authorization" not in sent


def test_turn_images_go_to_the_model_as_base64_blocks(st):
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    before = len(model_requests(st))
    rep = st.turn("look", images=[{"mime": "image/png", "data": png}])
    assert rep["input"]["images"] == [{"mime": "image/png", "base64Chars": len(png)}]
    content = model_requests(st, before)[0]["body"]["messages"][0]["content"]
    assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}


# ---- model-call directives: each one changes exactly what it says --------------------------

VARIANTS = [
    ("native-tool", lambda b, h: b["tools"][-1]["type"] == "web_search_20250305"),
    ("native-tool code_execution_20250522", lambda b, h: b["tools"][-1]["type"] == "code_execution_20250522"),
    ("mcp-servers", lambda b, h: b["mcp_servers"][0]["type"] == "url"),
    ("url-image", lambda b, h: b["messages"][0]["content"][-1]["source"]["type"] == "url"),
    ("file-image", lambda b, h: b["messages"][0]["content"][-1]["source"]["type"] == "file"),
    ("document", lambda b, h: b["messages"][0]["content"][-1]["type"] == "document"),
    ("image", lambda b, h: b["messages"][0]["content"][-1]["source"]["type"] == "base64"),
    ("remote-ref", lambda b, h: b["tools"][-1]["input_schema"]["properties"]["q"]["$ref"].startswith("https://")),
    ("local-ref", lambda b, h: b["tools"][-1]["input_schema"]["properties"]["q"]["$ref"] == "#/$defs/q"),
    ("tool-use", lambda b, h: [m["role"] for m in b["messages"]] == ["user", "assistant", "user"]
     and b["messages"][1]["content"][0]["type"] == "tool_use"),
    ("effort xhigh", lambda b, h: b["output_config"] == {"effort": "xhigh"} and b["thinking"]["type"] == "adaptive"),
    ("budget 5000", lambda b, h: b["thinking"] == {"type": "enabled", "budget_tokens": 5000}
     and "output_config" not in b),
    ("adaptive", lambda b, h: b["thinking"] == {"type": "adaptive"} and "output_config" not in b),
    ("no-thinking", lambda b, h: b["thinking"] == {"type": "disabled"}),
    ("model-name claude-other-1", lambda b, h: b["model"] == "claude-other-1"),
    ("max-tokens 999999", lambda b, h: b["max_tokens"] == 999999),
    ("no-stream", lambda b, h: b["stream"] is False),
    ('extra-field metadata {"user_id": "u-1"}', lambda b, h: b["metadata"] == {"user_id": "u-1"}),
    ("big-request 300000", lambda b, h: 298000 < len(b["messages"][0]["content"][-1]["text"]) < 300000),
]


@pytest.mark.parametrize("directive,check", VARIANTS, ids=[v[0].split()[0] + "-" + str(i) for i, v in enumerate(VARIANTS)])
def test_model_body_directives(st, directive, check):
    before = len(model_requests(st))
    rep = st.turn(f"variant #rw {directive}")
    s = rep["steps"][0]
    assert s["do"] == directive.split()[0] and s["status"] == 200, s
    reqs = model_requests(st, before)
    assert len(reqs) == 1, "the directive is the turn's only model call"
    r = reqs[0]
    assert check(r["body"], r["headers"]), json.dumps(r["body"])[:1500]


HEADER_VARIANTS = [
    ("header Cookie session=abc", lambda h: h.get("cookie") == "session=abc"),
    ("header X-Forwarded-For 10.0.0.1", lambda h: h.get("x-forwarded-for") == "10.0.0.1"),
    ("drop-header anthropic-version", lambda h: "anthropic-version" not in h and "x-stainless-os" in h),
    ("beta files-api-2025-04-14", lambda h: h.get("anthropic-beta") == "files-api-2025-04-14"),
    ("auth bearer", lambda h: h.get("authorization") == "Bearer " + RICH_DUMMY_KEY and "x-api-key" not in h),
    ("auth real sk-ant-api03-realkey", lambda h: h.get("x-api-key") == "sk-ant-api03-realkey"),
    ("auth none", lambda h: "x-api-key" not in h and "authorization" not in h),
]


@pytest.mark.parametrize("directive,check", HEADER_VARIANTS, ids=[v[0].replace(" ", "-") for v in HEADER_VARIANTS])
def test_model_header_directives(st, directive, check):
    """The stand-in's record holds the worker's own headers (the fake sees rebuilt ones)."""
    n = len(st.requests("/anthropic/v1/messages"))
    rep = st.turn(f"headers #rw {directive}")
    assert rep["steps"][0]["status"] == 200
    sent = st.requests("/anthropic/v1/messages")[n:]
    assert len(sent) == 1
    assert check({k.lower(): v for k, v in sent[0]["headers"]}), sent[0]["headers"]


def test_route_directives(st):
    rep = st.turn("routes #rw beta-query #rw count-tokens #rw route /anthropic/v1/models #rw get /anthropic/v1/files")
    paths = [r["path"] for r in st.requests()][-8:]
    assert "/anthropic/v1/messages?beta=true" in paths
    assert "/anthropic/v1/messages/count_tokens" in paths
    assert "/anthropic/v1/models" in paths and "/anthropic/v1/files" in paths
    ct = step(rep, "count-tokens")
    assert ct["status"] == 200 and ct["answer"]["input_tokens"] > 0
    assert step(rep, "get")["status"] == 404  # the stand-in has no GET route
    assert [s["do"] for s in rep["steps"]] == ["beta-query", "count-tokens", "route", "get"]


def test_parallel_calls_are_in_flight_together(st):
    st.max_in_flight = 0
    rep = st.turn("five at once #rw parallel 5 #sleep 1500")
    calls = step(rep, "parallel")["calls"]
    assert [c["status"] for c in calls] == [200] * 5
    assert st.max_in_flight == 5


def test_sequential_calls(st):
    before = len(model_requests(st))
    rep = st.turn("three #rw calls 3")
    assert step(rep, "calls")["statuses"] == [200, 200, 200]
    assert len(model_requests(st, before)) == 3


# ---- the listener's bounds: silence, header deadline, slow bodies, connections ---------------

def test_silent_body_stops_mid_body(st):
    n = len(st.requests("/anthropic/v1/messages"))
    rep = st.turn("quiet #rw silent 10")
    s = step(rep, "silent")
    assert s["status"] == 0 and s["closed"] is True
    assert s["ms"] >= st.silence_s * 1000 * 0.9
    r = st.requests("/anthropic/v1/messages")[n]
    assert r["bodyBytes"] == 10 and r["silent"] is True and r["contentLength"] > 10


def test_slow_header_sends_half_a_head(st):
    before = len(st.requests())
    rep = st.turn("#rw slow-header")
    s = step(rep, "slow-header")
    assert s["status"] == 0 and s["closed"] is True
    # The stand-in never saw a whole request line + head from that connection.
    assert not [r for r in st.requests()[before:] if r["path"].startswith("/anthropic")]


def test_slow_body_arrives_whole(st):
    rep = st.turn("#rw slow-body 400")
    s = step(rep, "slow-body")
    assert s["status"] == 200 and s["ms"] >= 400


def test_connections_are_held_then_one_call(st):
    rep = st.turn("#rw connections 4")
    s = step(rep, "connections")
    assert s["connected"] == 4 and s["closedAtOnce"] == 0
    assert s["extraCall"]["status"] == 200


# ---- the stream as the worker reads it ---------------------------------------------------------

def test_stream_failures_are_reported(st):
    rep = st.turn("#rw model #error-event")
    s = step(rep, "model")
    assert s["streamError"] == "overloaded_error" and s["stop"] is False
    rep = st.turn("#rw model #no-stop")
    assert step(rep, "model")["stop"] is False and "message_delta" in step(rep, "model")["events"]
    rep = st.turn("#rw model #status 529")
    s = step(rep, "model")
    assert s["status"] == 529 and s["answer"]["error"]["type"] == "overloaded_error"


def test_stall_read_and_abort(st):
    rep = st.turn("#rw stall-read 800 #big 2000000")
    s = step(rep, "stall-read")
    assert s["status"] == 200 and s["textBytes"] == 2000000 and s["ms"] >= 800 and s["stop"] is True
    rep = st.turn("#rw abort-stream #chunks 50 #pace 20")
    s = step(rep, "abort-stream")
    assert s["aborted"] is True and s["nEvents"] < 50


def test_tool_use_stream_is_joined(st):
    rep = st.turn('#rw model #tool lookup {"q":"moon"}')
    s = step(rep, "model")
    assert s["stopReason"] == "tool_use" and json.loads(s["text"]) == {"q": "moon"}


# ---- worker-protocol directives ------------------------------------------------------------------

def test_result_outside_the_turn(st):
    tid = st.queue_turn("#rw result-outside")
    first = st.wait_result()
    second = st.wait_result()
    assert first["turnId"] != tid and len(first["turnId"]) == 16 and first["text"] == "a reply for another turn"
    assert second["turnId"] == tid
    rep = json.loads(second["text"])
    assert step(rep, "result-outside")["turnIdSent"] == first["turnId"]
    st.queue_turn("#rw result-outside none")
    assert "turnId" not in st.wait_result()
    st.wait_result()


def test_result_after_the_turn(st):
    tid = st.queue_turn("#rw result-after")
    assert st.wait_result()["turnId"] == tid
    late = st.wait_result()
    assert late["turnId"] == tid and late["text"] == "a second reply for a settled turn"


def test_result_bytes_is_refused_before_its_body(st):
    """The stand-in refuses a packet over its bound from the head alone; the worker reports
    that the answer came before it sent the body (in the next reply's "between")."""
    tid = st.queue_turn("#rw result-bytes 80000000")
    rep = st.turn("after the big one")
    ev = [e for e in rep["between"] if e["what"] == "result" and e["turnId"] == tid][0]
    assert ev["status"] == 413 and ev["early"] is True
    refused = [r for r in st.requests("/worker/result") if r.get("refusedBeforeBody")]
    assert refused and refused[-1]["headers"] and not refused[-1].get("bodyBytes")


def test_no_result_and_result_twice(st):
    tid = st.queue_turn("#rw no-result")
    rep = st.turn("next")
    assert any(e["what"] == "no-result" for e in rep["between"])
    tid = st.queue_turn("#rw result-twice")
    a, b = st.wait_result(), st.wait_result()
    assert a["turnId"] == b["turnId"] == tid
    rep = st.turn("then")
    ev = [e for e in rep["between"] if e["what"] == "result" and e["turnId"] == tid][0]
    assert [p["status"] for p in ev["packets"]] == [200, 200]


def test_reply_files_and_sizes(st):
    tid = st.queue_turn("#rw files 2 100 #rw file-name ..%2Fevil%00x application/x-evil #rw big-result 150000")
    packet = st.wait_result()
    assert packet["turnId"] == tid
    files = packet["files"]
    assert [f["name"] for f in files] == ["file-1.txt", "file-2.txt", "../evil\x00x"]
    assert [len(base64.b64decode(f["data"])) for f in files] == [100, 100, 16]
    assert files[2]["mime"] == "application/x-evil"
    assert len(packet["text"]) == 150000
    assert json.JSONDecoder().raw_decode(packet["text"])[0]["turnId"] == tid


def test_readiness_directives(st):
    n = len(st.readies)
    st.turn("#rw reconnect none")
    rep = st.turn("#rw ready-bad")
    assert st.readies[n] == {"capabilities": {"privateTo": False, "readerRecords": False}, "privateHistory": False}
    rep = st.turn("#rw ready-empty")
    ev = [e for e in rep["between"] if e["what"] == "ready-bad"][0]
    assert ev["status"] == 400 and ev["reannounced"]["status"] == 200
    assert st.readies[n + 1]["capabilities"]["privateTo"] is True  # the re-announcement after 400
    st.turn("#rw reconnect history")
    assert st.readies[n + 2] is None  # ready-empty: no body at all
    wait_until(lambda: len(st.readies) > n + 3, 10, "the reconnect after the reply")
    assert st.readies[n + 3]["privateHistory"] is True


def test_reconnect_waits_for_its_gate(st):
    n = len(st.readies)
    st.turn("#rw reconnect partial gate go-1")
    assert_quiet(lambda: len(st.readies), QUIET_FORWARD_S, "readiness before the gate file")
    gate = os.path.join(st.dirs["ws"], "go-1")
    open(gate, "w").close()
    wait_until(lambda: len(st.readies) > n, 10, "readiness after the gate file")
    assert st.readies[n]["capabilities"] == {"privateTo": True, "readerRecords": False}


def test_poll2_abandon_and_next_during(st):
    n = len(st.requests("/worker/next"))
    st.turn("#rw poll2")
    # Queue nothing until the second poll was answered: a queued turn would end the first one.
    wait_until(lambda: [r for r in st.requests("/worker/next")[n:] if r.get("status") == 429], 10,
               "the second long poll's refusal")
    rep = st.turn("#rw abandon-poll")
    ev = [e for e in rep["between"] if e["what"] == "poll2"][0]
    assert ev["second"]["status"] == 429 and ev["firstPending"] is True
    # A turn queued before the worker dropped its poll would go to the dropped poll.
    wait_until(lambda: any(r.get("data", {}).get("what") == "abandon-poll" for r in st.worker.log_records()), 10,
               "the worker to drop its poll")
    rep = st.turn("#rw next-during")
    assert step(rep, "next-during")["status"] == 204  # the stand-in has no other turn queued
    assert any(e["what"] == "abandon-poll" and e["sent"] for e in rep["between"])


def test_tools_mcp_and_compaction_directives(st):
    n = len(st.requests())
    rep = st.turn('#rw tool private_notes {"who": "me"} #rw private private_x #rw mcp docs initialize '
                  '#rw mcp docs notifications/initialized #rw mcp docs tools/call echo {"a": 1} '
                  '#rw mcp-batch docs #rw compact 2 #rw compact-report #rw compact-big 5000')
    assert step(rep, "tool")["privateTo"] == "principal-1001"
    assert step(rep, "private")["modelAfter"]["status"] == 200
    assert step(rep, "mcp", 1)["status"] == 202
    assert step(rep, "mcp-batch")["status"] == 400
    sent = st.requests()[n:]
    by = lambda p: [r for r in sent if r["path"] == p]  # noqa: E731
    assert by("/tools/private_notes")[0]["body"] == {"who": "me"}
    rpc = [r["body"] for r in by("/mcp/docs")]
    assert rpc[0]["method"] == "initialize" and rpc[0]["params"]["clientInfo"]["name"] == "richworker"
    assert rpc[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert rpc[2]["params"] == {"name": "echo", "arguments": {"a": 1}}
    assert isinstance(rpc[3], list) and len(rpc[3]) == 2
    compact = [r["body"] for r in by("/worker/compact")]
    assert [("request" in c, "report" in c) for c in compact] == [(True, False)] * 2 + [(False, True), (True, False)]
    assert len(compact[3]["request"]["previousSummary"]) == 5000
    assert all(c["turnId"] == rep["turnId"] for c in compact)


def test_workspace_and_log_directives(st):
    rep = st.turn("#rw write-file /workspace/note.txt hello there #rw read-file /workspace/note.txt "
                  "#rw symlink /etc /workspace/sessions #rw list-dir /workspace #rw log 3 #rw write-file /etc/x y")
    assert step(rep, "read-file")["content"] == "hello there"
    assert os.readlink(os.path.join(st.dirs["ws"], "sessions")) == "/etc"
    assert {"note.txt", "sessions"} <= set(step(rep, "list-dir")["entries"])
    assert step(rep, "write-file", 1)["error"] in ("EROFS", "Read-only file system", "EACCES", "Permission denied")
    logs = [r for r in st.worker.log_records() if r.get("rw") == "log" and r["of"] == 3]
    assert [r["line"] for r in logs][-3:] == [1, 2, 3]


def test_help_unknown_and_bad_arguments(st):
    rep = st.turn("#rw help #rw nonsense #rw calls")
    names = [d["name"] for d in step(rep, "help")["directives"]]
    assert len(names) == len(set(names)) > 50 and "parallel" in names and "reconnect" in names
    assert step(rep, "nonsense")["error"] == "unknown directive"
    assert step(rep, "calls")["error"] == "bad arguments"


# ---- directives that end the worker, and start-up behaviour: a container each -----------------

def test_crash_exits_with_the_code(rts_env, image):
    with StandIn(rts_env) as s:
        w = s.start_worker(image)
        wait_until(lambda: s.readies, 30, "readiness")
        s.queue_turn("#rw crash 7")
        assert wait_until(lambda: w.exit_code() is not None, 30, "the worker to exit") and w.exit_code() == 7
        assert s.results.empty()


def test_hang_ignores_sigterm(rts_env, image):
    with StandIn(rts_env) as s:
        w = s.start_worker(image)
        wait_until(lambda: s.readies, 30, "readiness")
        s.queue_turn("#rw hang")
        wait_until(lambda: any(r.get("rw") == "hang" for r in w.log_records()), 30, "the worker to hang")
        from harness import docker
        docker("kill", "-s", "TERM", w.name)
        assert_quiet(w.running, 1.0, "a hanging worker after SIGTERM")


def test_exit_after_the_reply(rts_env, image):
    with StandIn(rts_env) as s:
        w = s.start_worker(image)
        s.turn("#rw exit-after 5")
        assert wait_until(lambda: w.exit_code() is not None, 30, "the worker to exit") and w.exit_code() == 5


def test_worker_reannounces_when_the_socket_is_recreated(rts_env, image):
    """A daemon restart re-creates broker.sock in the same directory: the worker notices its
    poll failing, announces itself again and goes on."""
    with StandIn(rts_env, poll_s=1.0) as s:
        s.start_worker(image)
        s.turn("first")
        n = len(s.readies)
        s.restart_listener()
        wait_until(lambda: len(s.readies) > n, 30, "readiness after the socket came back")
        rep = s.turn("second")
        assert any(e["what"] == "next-failed" for e in rep["between"])
        assert any(e["what"] == "ready" and e["why"] == "next failed" for e in rep["between"])


def test_startup_steps_and_ready_config(rts_env, image):
    with StandIn(rts_env, worker_config={"ready": "absent", "startup": ["#rw mcp docs tools/list", "#rw model"]}) as s:
        s.start_worker(image)
        rep = s.turn("first")
        assert s.readies[0] is None
        paths = [r["path"] for r in s.requests()]
        assert paths.index("/mcp/docs") < paths.index("/worker/next")
        assert paths.index("/anthropic/v1/messages") < paths.index("/worker/next")
        ev = [e for e in rep["between"] if e["what"] == "startup"][0]
        assert [x["do"] for x in ev["steps"]] == ["mcp", "model"]


def test_ready_never(rts_env, image):
    with StandIn(rts_env, worker_config={"ready": "never"}) as s:
        w = s.start_worker(image)
        wait_until(lambda: any(r.get("rw") == "start" for r in w.log_records()), 30, "the worker to start")
        assert_quiet(lambda: len(s.requests()), QUIET_FORWARD_S * 2, "requests from a worker told never to announce")


# ---- fake_anthropic on its own ---------------------------------------------------------------

@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fake-anthropic"))
    make_ca(d)
    log = open(os.path.join(d, "log"), "ab")
    f = FakeAnthropic(d, os.path.join(d, "record.jsonl"), log)
    yield f
    f.stop()
    log.close()


def test_sse_stream_has_the_messages_api_shape(fake):
    s = fake.direct(messages_body("hello #chunks 3 #ping 2"))
    assert s.status == 200 and s.header("content-type").startswith("text/event-stream")
    assert s.header("transfer-encoding") == "chunked"
    names = s.names
    assert names[:3] == ["message_start", "ping", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_delta") == 3
    for name, data in s.events:
        assert data["type"] == name  # every event's data names its event
    start = s.events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and "input_tokens" in start["usage"]
    assert s.text == "echo: hello #chunks 3 #ping 2"
    # The same bytes through the module-level parser.
    assert [n for n, _ in parse_sse(s.body)] == names


def test_sse_tool_use_and_thinking(fake):
    s = fake.direct(messages_body('#thinking #tool lookup {"q": "x"}'))
    blocks = [d["content_block"]["type"] for n, d in s.events if n == "content_block_start"]
    assert blocks == ["thinking", "tool_use"]
    deltas = [d["delta"] for n, d in s.events if n == "content_block_delta"]
    assert deltas[0]["type"] == "thinking_delta" and deltas[1]["type"] == "signature_delta"
    js = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(js) == {"q": "x"}
    assert [d for n, d in s.events if n == "message_delta"][0]["delta"]["stop_reason"] == "tool_use"


def test_sse_parser_handles_split_lines_and_crlf():
    p = SSEParser()
    out = []
    for piece in (b"event: a\r", b"\ndata: {\"x\"", b":1}\r\n\r\n: comment\n", b"data: 2\ndata: 3\n\n"):
        out += p.feed(piece)
    assert out == [("a", '{"x":1}'), ("message", "2\n3")]


def test_credential_split_is_two_tls_records(fake):
    """#split BYTE: the key's first BYTE bytes end one write (one TLS record, one chunk),
    the rest starts the next; read record by record from a raw TLS socket."""
    key = "sk-ant-oat01-splitkey-0123456789abcdef"
    body = json.dumps(messages_body("#split 9 200")).encode()
    raw = socket.create_connection(("127.0.0.1", fake.port), timeout=10)
    tls = fake.ssl_context().wrap_socket(raw, server_hostname="localhost")
    tls.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    reads = []
    while True:
        d = tls.recv(65536)  # at most one TLS record's plaintext
        if not d:
            break
        reads.append(d)
        if b"0\r\n\r\n" in d:
            break
    tls.close()
    head, _, chunked = b"".join(reads).partition(b"\r\n\r\n")
    assert key.encode() in dechunk(chunked)
    # Each read is one chunk "SIZE\r\nDATA\r\n": the key's first 9 bytes end one of them.
    cut = [i for i, d in enumerate(reads) if d.endswith(key[:9].encode() + b"\r\n")]
    assert cut, [d[-40:] for d in reads]
    assert reads[cut[0] + 1].split(b"\r\n", 1)[1].startswith(key[9:].encode())
    rec = [r for r in fake.requests() if r["bearer"] == key]
    assert rec and rec[0]["headers"]["authorization"] == "Bearer " + key


def dechunk(data):
    """The payload of an HTTP/1.1 chunked body (no extensions or trailers)."""
    out = b""
    while True:
        size, _, data = data.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return out
        out, data = out + data[:n], data[n + 2:]


def test_split_delta_puts_the_key_in_two_events(fake):
    s = fake.direct(messages_body("#split-delta 5"))
    deltas = [d["delta"]["text"] for n, d in s.events if n == "content_block_delta"]
    assert len(deltas) == 2 and deltas[0].endswith("direct-token"[:5]) and deltas[1].startswith("direct-token"[5:])


def test_failures_and_routes(fake):
    s = fake.direct(messages_body("#status 529"))
    assert s.status == 529 and s.json()["error"]["type"] == "overloaded_error" and s.json()["type"] == "error"
    s = fake.direct(messages_body("#status 400 invalid_request_error"))
    assert s.status == 400 and s.json()["error"]["type"] == "invalid_request_error"
    s = fake.direct({"model": MODEL, "messages": [{"role": "user", "content": "count"}]},
                    path="/v1/messages/count_tokens")
    assert s.status == 200 and s.json()["input_tokens"] > 0
    s = fake.direct(messages_body("x"), path="/v1/models")
    assert s.status == 404 and s.json()["error"]["type"] == "not_found_error"
    s = fake.direct(messages_body("#error-event api_error"))
    assert s.names[-1] == "error" and s.events[-1][1]["error"]["type"] == "api_error"
    s = fake.direct(messages_body("#no-stop"))
    assert "message_stop" not in s.names and s.names[-1] == "message_delta"
    s = fake.direct(messages_body("#json"))
    assert s.header("content-type") == "application/json" and s.json()["content"][0]["type"] == "text"
    s = fake.direct(messages_body("#headers"))
    assert s.header("set-cookie") and s.header("x-upstream-detail")
    with pytest.raises(Exception):  # a chunk cut in the middle: the client must see an error
        fake.direct(messages_body("#cut"))


def test_silent_stream_sends_message_start_then_nothing(fake):
    conn_start = time.monotonic()
    import http.client
    c = http.client.HTTPSConnection("localhost", fake.port, context=fake.ssl_context(), timeout=10)
    c.request("POST", "/v1/messages", json.dumps(messages_body("#silent")), {"content-type": "application/json"})
    r = c.getresponse()
    p = SSEParser()
    first = p.feed(r.read1(65536))
    assert [n for n, _ in first] == ["message_start"]
    c.sock.settimeout(1.0)
    with pytest.raises(socket.timeout):
        r.read1(65536)
    c.close()
    seq = max(x["seq"] for x in fake.requests())
    ans = wait_until(lambda: [a for a in fake.answers() if a["seq"] == seq], 10, "the silent answer's record")
    assert ans[0]["outcome"] == "client-gone" and ans[0]["firstByte"] >= conn_start


def test_big_bodies_are_recorded_shortened(fake):
    big = "z" * (5 * 1024 * 1024)
    s = fake.direct(messages_body(big))
    assert s.status == 200
    rec = fake.requests()[-1]
    assert rec["bodyBytes"] > 5 * 1024 * 1024 and len(rec["bodySha256"]) == 64
    text = rec["body"]["messages"][0]["content"][0]["text"]
    assert text.startswith(f"<{len(big)} chars sha256 ")


# ---- the Python worker side and the memfd helpers (no Docker) --------------------------------

def test_worker_client_streams_through_the_stand_in(host_env):
    """WorkerClient (the brokerd-only rig's worker side and the benchmark's) against the
    stand-in: readiness, a queued turn, a streamed model call with the SDK's headers, the
    reply packet."""
    with StandIn(host_env, poll_s=1.0) as s:
        w = WorkerClient(s.sock)
        assert w.ready().status == 200 and s.readies[-1]["capabilities"] == {"privateTo": True, "readerRecords": True}
        tid = s.queue_turn("hi")
        nx = w.next()
        assert nx.status == 200 and nx.json()["turnId"] == tid
        chunks = []
        m = w.messages(messages_body("stream me #chunks 5 #pace 20"), stream_cb=chunks.append)
        assert m.status == 200 and m.names[0] == "message_start" and m.names[-1] == "message_stop"
        assert m.text == "echo: stream me #chunks 5 #pace 20" and len(chunks) > 1
        assert m.t_start <= m.t_sent <= m.t_head <= m.t_first_body <= m.t_end
        sent = {k.lower(): v for k, v in s.requests("/anthropic/v1/messages")[-1]["headers"]}
        assert sent["x-api-key"] == RICH_DUMMY_KEY and sent["x-stainless-runtime"] == "node"
        assert w.result(tid, "done").status == 200
        assert s.wait_result(5) == {"turnId": tid, "text": "done", "files": []}
        assert w.next(timeout=10).status == 204


def test_sealed_memfd_round_trip():
    import fcntl
    from rich_rig import SEALS, read_sealed, sealed_memfd
    fd = sealed_memfd(b"x" * 100000)
    try:
        assert read_sealed(fd) == b"x" * 100000
        with pytest.raises(PermissionError):
            os.write(fd, b"y")
        with pytest.raises(AssertionError):
            read_sealed(fd, max_bytes=10)
    finally:
        os.close(fd)
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS & ~fcntl.F_SEAL_WRITE)
        with pytest.raises(AssertionError):
            read_sealed(fd)
    finally:
        os.close(fd)
