# SPDX-License-Identifier: Apache-2.0
"""brokerd's contract (issue 3), rule by rule, against a real brokerd running as the service
account, over real per-turn Unix sockets, with the scripted HTTPS model endpoint, a scripted
HTTPS MCP server and a real host tool command (tests/integration/broker_rig.py).

Every refusal sends the bad input (raw bytes where syntax matters) and checks the status and
error code, that the connection is closed with nothing after the answer (no second request
is read from leftover bytes), and that neither the model endpoint, the MCP server nor the
tool received anything. Positive tests cover each route.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_broker.py
(root and a running dockerd are needed only because the shared harness checks for them).
"""
import base64
import json
import os
import shutil
import socket
import threading
import time
import urllib.parse

import pytest

from broker_rig import BrokerRig, DUMMY_AUTH, ToolRecorder, request_bytes
from harness import QUIET_FORWARD_S, HarnessError, assert_quiet, wait_past, wait_until

BODY_MAX = 256 * 1024
GOOD_MODEL = {"messages": [{"role": "user", "content": "hello"}]}
MARKER = "PAYLOAD-MARKER-7f3a"  # never in a log line


@pytest.fixture(scope="module")
def broker_env(host_env):
    """brokerd needs no Docker: the session's Environment, Docker never asked."""
    return host_env


@pytest.fixture(scope="module")
def rig(broker_env):
    try:
        r = BrokerRig(broker_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def turn(rig):
    t = rig.turn()
    yield t
    t.close()


def model_req(text, **extra):
    return dict({"messages": [{"role": "user", "content": text}]}, **extra)


def mcp_call(tool, arguments=None, rid=1, method="tools/call"):
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"name": tool, "arguments": arguments or {}}}


def assert_answer(a, status, code=None):
    """status (and for errors the exact generic body), then the connection state: closed by
    the broker, nothing after the first answer."""
    assert a.status == status, (a.status, a.raw[:400])
    if code is not None:
        assert a.body == json.dumps({"error": code}, separators=(",", ":")).encode(), a.body
    assert a.header("Connection") == "close"
    assert a.header("Content-Type") == "application/json"
    assert a.closed, "the broker left the connection open"
    assert a.rest == b"", f"bytes after the answer: {a.rest[:200]!r}"


PIPELINED = request_bytes("/model", {"messages": [{"role": "user", "content": "pipelined"}]})


def refused(rig, turn, data, status, code, **kw):
    """Send data with a valid request pipelined behind it: the refusal must be the only
    answer, and neither request may reach an upstream."""
    with rig.nothing_forwarded():
        a = turn.raw(data + PIPELINED, **kw)
    assert_answer(a, status, code)
    return a


# ---------------------------------------------------------------- positive, each route

def test_model_route_rebuilds_both_ways(rig, turn):
    before = len(rig.model_requests())
    body = {"messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": "hello " + MARKER},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "host_echo", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "result"},
                         {"role": "user", "content": "#upstream headers"}],
            "tools": [{"type": "function", "function": {"name": "host_echo", "description": "d",
                                                        "parameters": {"type": "object"}}}],
            "tool_choice": "auto", "max_tokens": 100000}
    a = turn.post("/model", body)
    assert_answer(a, 200)
    # Only our own headers: nothing of the upstream's (cookie, session, detail) crosses.
    assert sorted(k.lower() for k, _ in a.headers) == ["connection", "content-length", "content-type", "date"]
    assert b"upstream-cookie" not in a.raw and b"internal" not in a.raw and b"upstream-session" not in a.raw
    ans = a.json()
    assert set(ans) == {"choices"}
    assert ans["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "upstream headers"},
                               "finish_reason": "stop"}]
    reqs = rig.model_requests()[before:]
    assert len(reqs) == 1
    up = reqs[0]
    assert up["path"] == "/v1/chat/completions"
    assert up["headers"]["authorization"] == "Bearer " + rig.api_key
    assert sorted(up["headers"]) == ["accept", "authorization", "content-length", "content-type", "host"]
    assert up["body"]["model"] == "fake-model"
    assert up["body"]["stream"] is False
    assert up["body"]["max_tokens"] == 4096  # the configured limit, the worker asked for more
    assert up["body"]["messages"] == body["messages"]
    assert up["body"]["tools"] == body["tools"]
    assert set(up["body"]) == {"model", "messages", "tools", "tool_choice", "stream", "max_tokens"}


def test_model_max_tokens_lower_is_kept(rig, turn):
    before = len(rig.model_requests())
    assert_answer(turn.post("/model", model_req("hi", max_tokens=17)), 200)
    assert rig.model_requests()[before]["body"]["max_tokens"] == 17


def test_schema_data_positions_are_not_checked(rig, turn):
    """$ref-like keywords are refused only at schema positions: property names, enum, const,
    default and examples data pass."""
    params = {"type": "object",
              "properties": {"$ref": {"type": "string", "enum": ["https://example.com/$ref"]},
                             "$id": {"const": {"$ref": "https://evil.example/x"}},
                             "other": {"default": {"$schema": "http://json-schema.org/draft-07/schema#"},
                                       "examples": [{"$id": "https://x"}], "$ref": "#/$defs/local"}},
              "$defs": {"local": {"type": "string", "$id": "#local"}}}
    body = model_req("hi", tools=[{"type": "function", "function": {"name": "t", "parameters": params}}])
    before = len(rig.model_requests())
    assert_answer(turn.post("/model", body), 200)
    assert rig.model_requests()[before]["body"]["tools"][0]["function"]["parameters"] == params


def test_tool_route_runs_the_command_with_the_bound_identity(rig, broker_env):
    t = rig.turn(channel="guild-9/chan", speaker_id="42", speaker_name="Bob", principal_id="")
    try:
        before = len(rig.tool_calls())
        # The body tries to choose an identity: it stays inside "input".
        args = {"mode": "echo", "channel": "evil", "speaker": {"id": "0", "principalId": "admin"}, "m": MARKER}
        a = t.post("/tools/echo", args)
        assert_answer(a, 200)
        result = json.loads(a.json()["result"])
        assert result == {"tool": "echo", "input": args, "channel": "guild-9/chan",
                          "speaker": {"id": "42", "name": "Bob", "principalId": None}}
        call = rig.tool_calls()[before]
        assert call["stdin"] == result
        # A process group of its own under the sandbox's PID 1 (tini, which leads the
        # sandbox's session), a minimal environment (bwrap always sets PWD), cwd /, no
        # inherited fds.
        assert call["pid"] == call["pgid"] != 1
        assert call["sid"] == call["ppid"] == 1
        assert call["env"] == {"PATH": "/usr/bin:/bin", "PWD": "/"}
        assert call["cwd"] == "/"
        # Nothing of brokerd's: three pipes.
        fds = call["fds"]
        assert sorted(fds) == ["0", "1", "2"], fds
        assert all(fds[k].startswith("pipe:") for k in ("0", "1", "2"))
    finally:
        t.close()


def test_mcp_route(rig, turn):
    before = len(rig.mcp_requests())
    a = turn.post("/mcp/docs", mcp_call("echo", {"q": MARKER}, rid="r-1"))
    assert_answer(a, 200)
    assert a.json() == {"jsonrpc": "2.0", "id": "r-1",
                        "result": {"content": [{"type": "text", "text": json.dumps({"q": MARKER})}], "isError": False}}
    up = rig.mcp_requests()[before]
    assert up["path"] == "/mcp"
    assert up["headers"]["authorization"] == "Bearer " + rig.mcp_key
    assert up["headers"]["accept"] == "application/json, text/event-stream"
    assert "mcp-session-id" not in up["headers"] and "cookie" not in up["headers"]
    assert sorted(up["headers"]) == ["accept", "authorization", "content-length", "content-type", "host"]
    assert up["body"] == mcp_call("echo", {"q": MARKER}, rid="r-1")


def test_mcp_server_without_key_gets_no_authorization(rig, turn):
    a = turn.post("/mcp/open", mcp_call("whoami"))
    assert_answer(a, 200)
    assert a.json()["result"]["content"][0]["text"] == ""


def test_mcp_session_headers_do_not_cross(rig, turn):
    a = turn.post("/mcp/docs", mcp_call("session"))
    assert_answer(a, 200)
    assert a.header("Mcp-Session-Id") is None and a.header("Set-Cookie") is None
    assert b"fake-session" not in a.raw and b"fake-cookie" not in a.raw


def test_mcp_rpc_error_is_rebuilt_without_data(rig, turn):
    a = turn.post("/mcp/docs", mcp_call("rpcerror", rid=7))
    assert_answer(a, 200)
    assert a.json() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "tool failed"}}


def test_pipelined_second_request_is_never_read(rig):
    t = rig.turn()
    try:
        before = rig.upstream_counts()
        one = request_bytes("/model", model_req("first"))
        a = t.raw(one + request_bytes("/model", model_req("second")) + request_bytes("/tools/echo", {}))
        assert_answer(a, 200)
        assert a.json()["choices"][0]["message"]["content"] == "echo: first"
        after = rig.upstream_counts()
        assert after[0] == before[0] + 1 and after[1:] == before[1:]
        assert_quiet(rig.upstream_counts, QUIET_FORWARD_S, "a pipelined request forwarded late")
    finally:
        assert t.close() == 1


# ---------------------------------------------------------------- request syntax

GOOD_HEAD = ("POST /model HTTP/1.1\r\nHost: broker\r\nAuthorization: " + DUMMY_AUTH +
             "\r\nContent-Type: application/json\r\n")
BODY = json.dumps(GOOD_MODEL).encode()


def head(extra="", cl=True, start=GOOD_HEAD):
    h = start + extra + (f"Content-Length: {len(BODY)}\r\n" if cl else "")
    return h.encode("latin-1")


BAD_SYNTAX = {
    "bare LF everywhere": request_bytes("/model", GOOD_MODEL).replace(b"\r\n", b"\n"),
    "bare LF after request line": request_bytes("/model", GOOD_MODEL).replace(b"HTTP/1.1\r\n", b"HTTP/1.1\n", 1),
    "bare LF in a field": head("X: y\n") + b"\r\n" + BODY,
    "bare CR": head("Accept: a\rb\r\n") + b"\r\n" + BODY,
    "LF LF end": head()[:-2] + b"\n\n" + BODY,
    "obs-fold": head().replace(b"Authorization: Bearer ", b"Authorization: Bearer\r\n ") + b"\r\n" + BODY,
    "obs-fold tab": head("X-A: b\r\n\tc\r\n") + b"\r\n" + BODY,
    "NUL in target": request_bytes("/mo\x00del", GOOD_MODEL),
    "NUL in a value": head().replace(b"Host: broker", b"Host: bro\x00ker") + b"\r\n" + BODY,
    "NUL in a name": head("X\x00Y: z\r\n") + b"\r\n" + BODY,
    "control byte in a value": head().replace(b"Host: broker", b"Host: bro\x01ker") + b"\r\n" + BODY,
    "ESC in the target": request_bytes("/mo\x1bdel", GOOD_MODEL),
    "DEL in a value": head().replace(b"Host: broker", b"Host: bro\x7fker") + b"\r\n" + BODY,
    "byte >= 0x80 in a value": head().replace(b"Host: broker", b"Host: br\xc3\xb6ker") + b"\r\n" + BODY,
    "byte >= 0x80 in the target": request_bytes("/model", GOOD_MODEL).replace(b"/model", b"/m\xffodel", 1),
    "tab in the request line": request_bytes("/model", GOOD_MODEL).replace(b"POST ", b"POST\t", 1),
    "two spaces in the request line": request_bytes("/model", GOOD_MODEL).replace(b"POST ", b"POST  ", 1),
    "empty line before the request line": b"\r\n" + request_bytes("/model", GOOD_MODEL),
    "space before the colon": head().replace(b"Host: broker", b"Host : broker") + b"\r\n" + BODY,
    "space in a field name": head("X Y: z\r\n") + b"\r\n" + BODY,
    "empty field name": head(": z\r\n") + b"\r\n" + BODY,
    "field without colon": head("NoColonHere\r\n") + b"\r\n" + BODY,
    "over-long header block": head("X-Pad: " + "a" * 5000 + "\r\n") + b"\r\n" + BODY,
    "over-long target": request_bytes("/model" + "a" * 5000, GOOD_MODEL),
    "many small fields": head("".join(f"X-{i}: v\r\n" for i in range(500))) + b"\r\n" + BODY,
    "Transfer-Encoding chunked": head("Transfer-Encoding: chunked\r\n", cl=False) + b"\r\n"
                                 + f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n",
    "Transfer-Encoding and Content-Length": head("Transfer-Encoding: chunked\r\n") + b"\r\n"
                                            + f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n",
    "transfer-encoding lower case": head("transfer-encoding: identity\r\n") + b"\r\n" + BODY,
    "missing Content-Length": head(cl=False) + b"\r\n" + BODY,
    "duplicate Content-Length, same value": head(f"Content-Length: {len(BODY)}\r\n") + b"\r\n" + BODY,
    "duplicate Content-Length, other value": head("Content-Length: 2\r\n") + b"\r\n" + BODY,
    "Content-Length list": head(cl=False) + f"Content-Length: {len(BODY)},{len(BODY)}\r\n\r\n".encode() + BODY,
    "Content-Length with sign": head(cl=False) + f"Content-Length: +{len(BODY)}\r\n\r\n".encode() + BODY,
    "Content-Length negative": head(cl=False) + b"Content-Length: -1\r\n\r\n" + BODY,
    "Content-Length hex": head(cl=False) + b"Content-Length: 0x10\r\n\r\n" + BODY,
    "Content-Length empty": head(cl=False) + b"Content-Length: \r\n\r\n" + BODY,
    "missing Host": head().replace(b"Host: broker\r\n", b"") + b"\r\n" + BODY,
    "duplicate Host": head("Host: broker\r\n") + b"\r\n" + BODY,
    "HTTP/1.0": request_bytes("/model", GOOD_MODEL, version="HTTP/1.0"),
    "HTTP/2.0": request_bytes("/model", GOOD_MODEL, version="HTTP/2.0"),
    "HTTP/1.10": request_bytes("/model", GOOD_MODEL, version="HTTP/1.10"),
    "lower-case version": request_bytes("/model", GOOD_MODEL, version="http/1.1"),
    "no version": b"POST /model\r\n" + head(start="Host: broker\r\n") + b"\r\n" + BODY,
    "HTTP/0.9 style": b"POST /model\r\n\r\n",
    "garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
}


@pytest.mark.parametrize("name", sorted(BAD_SYNTAX))
def test_bad_syntax_is_400_closed_and_not_forwarded(rig, turn, name):
    refused(rig, turn, BAD_SYNTAX[name], 400, "bad_request")


def test_bad_byte_refused_before_the_head_is_complete(rig, turn):
    """The gate refuses as soon as it sees a bad byte, without waiting for the empty line."""
    with rig.nothing_forwarded():
        t0 = time.monotonic()
        a = turn.raw(b"POST /model HTTP/1.1\r\nHost: bro\x00", timeout=5)
        assert time.monotonic() - t0 < 2
    assert_answer(a, 400, "bad_request")


def test_head_in_pieces_is_accepted(rig, turn):
    data = request_bytes("/model", model_req("slowly"))
    a = turn.raw([data[i:i + 7] for i in range(0, len(data), 7)], pause=0.01)
    assert_answer(a, 200)


# ---------------------------------------------------------------- routes and methods

BAD_TARGETS = ["/model?x=1", "/model?", "/model#f", "/model/", "//model", "/Model", "/MODEL", "/%6dodel",
               "/model%20", "/./model", "/model/.", "/x/../model", "/tools/../model", "/tools/unknown",
               "/tools/echo/", "/tools/echo?x=1", "/tools/ech%6f", "/tools//echo", "/tools/", "/tools",
               "/mcp/nope", "/mcp/docs/", "/mcp/docs/x", "/mcp/", "/mcp", "/mcp/docs?x", "http://broker/model",
               "https://broker/model", "broker:80", "*", "/", "/model;x", "/tools/Echo", "/tools/short/../echo"]


@pytest.mark.parametrize("target", BAD_TARGETS)
def test_unknown_targets_are_404(rig, turn, target):
    refused(rig, turn, request_bytes(target, GOOD_MODEL), 404, "not_found")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "post", "Post", "PRI"])
@pytest.mark.parametrize("target", ["/model", "/tools/echo", "/mcp/docs"])
def test_other_methods_are_405(rig, turn, method, target):
    refused(rig, turn, request_bytes(target, GOOD_MODEL, method=method), 405, "method_not_allowed")


def test_head_is_refused(rig, turn):
    with rig.nothing_forwarded():
        a = turn.raw(request_bytes("/model", GOOD_MODEL, method="HEAD") + PIPELINED)
    assert a.status == 405 and a.closed and a.rest == b""


def test_connect_is_refused(rig, turn):
    refused(rig, turn, request_bytes("broker:443", GOOD_MODEL, method="CONNECT"), 404, "not_found")


# ---------------------------------------------------------------- headers

BAD_HEADERS = [
    ("Cookie", "a=b", 400, "bad_request"),
    ("Connection", "keep-alive", 400, "bad_request"),
    ("Connection", "close", 400, "bad_request"),
    ("Keep-Alive", "timeout=5", 400, "bad_request"),
    ("TE", "trailers", 400, "bad_request"),
    ("Upgrade", "websocket", 400, "bad_request"),
    ("Trailer", "X", 400, "bad_request"),
    ("Proxy-Authorization", "Basic eDp5", 400, "bad_request"),
    ("Proxy-Connection", "keep-alive", 400, "bad_request"),
    ("Forwarded", "for=1.2.3.4", 400, "bad_request"),
    ("X-Forwarded-For", "1.2.3.4", 400, "bad_request"),
    ("X-Forwarded-Host", "evil", 400, "bad_request"),
    ("Via", "1.1 proxy", 400, "bad_request"),
    ("Mcp-Session-Id", "s-1", 400, "bad_request"),
    ("Mcp-Protocol-Version", "2025-06-18", 400, "bad_request"),
    ("Expect", "100-continue", 400, "bad_request"),
    ("Accept", "application/json", 400, "bad_request"),
    ("User-Agent", "x", 400, "bad_request"),
    ("X-Api-Key", "sk-real", 400, "bad_request"),
    ("X-Unknown", "1", 400, "bad_request"),
    ("Authorization", None, 401, "unauthorized"),
    ("Authorization", "Bearer sk-live-realkey", 401, "unauthorized"),
    ("Authorization", "Basic cm91bmR0YWJsZTp4", 401, "unauthorized"),
    ("Authorization", "bearer roundtable-sandbox-dummy-key", 401, "unauthorized"),
    ("Authorization", "Bearer roundtable-sandbox-dummy-key-x", 401, "unauthorized"),
    ("Authorization", "Bearer  roundtable-sandbox-dummy-key", 401, "unauthorized"),
    ("Authorization", "", 401, "unauthorized"),
    ("Host", "api.openai.com", 400, "bad_request"),
    ("Host", "", 400, "bad_request"),
    ("Content-Type", None, 400, "bad_request"),
    ("Content-Type", "text/plain", 400, "bad_request"),
    ("Content-Type", "application/json; charset=utf-8", 400, "bad_request"),
    ("Content-Type", "multipart/form-data; boundary=x", 400, "bad_request"),
]


@pytest.mark.parametrize("name,value,status,code", BAD_HEADERS, ids=[f"{n}:{v}" for n, v, _, _ in BAD_HEADERS])
@pytest.mark.parametrize("target", ["/model", "/tools/echo", "/mcp/docs"])
def test_header_allow_list(rig, turn, target, name, value, status, code):
    refused(rig, turn, request_bytes(target, GOOD_MODEL, headers={name: value}), status, code)


def test_second_authorization_is_refused(rig, turn):
    data = head("Authorization: Bearer sk-live-realkey\r\n") + b"\r\n" + BODY
    refused(rig, turn, data, 400, "bad_request")


def test_header_names_are_case_insensitive(rig, turn):
    data = request_bytes("/model", GOOD_MODEL).replace(b"Host:", b"HOST:").replace(b"Content-Type:", b"content-type:")
    assert_answer(turn.raw(data), 200)


# ---------------------------------------------------------------- /model bodies

def deep(n):
    return "[" * n + "]" * n


RAW_BAD_MODEL = {
    "not JSON": b"hello",
    "empty": b"",
    "array": b"[]",
    "string": b'"x"',
    "duplicate top-level key": b'{"messages":[{"role":"user","content":"a"}],"messages":[]}',
    "duplicate key deep": b'{"messages":[{"role":"user","role":"system","content":"a"}]}',
    "duplicate key via escape": b'{"messages":[{"role":"user","content":"a","\\u0063ontent":"b"}]}',
    "duplicate key in a schema": (b'{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function",'
                                  b'"function":{"name":"t","parameters":{"type":"object","type":"string"}}}]}'),
    "invalid UTF-8": b'{"messages":[{"role":"user","content":"\xc3\x28"}]}',
    "overlong UTF-8": b'{"messages":[{"role":"user","content":"\xc0\xaf"}]}',
    "UTF-8 surrogate": b'{"messages":[{"role":"user","content":"\xed\xa0\x80"}]}',
    "lone surrogate escape": b'{"messages":[{"role":"user","content":"\\ud800"}]}',
    "NUL escape": b'{"messages":[{"role":"user","content":"a\\u0000b"}]}',
    "raw NUL": b'{"messages":[{"role":"user","content":"a\x00b"}]}',
    "raw control character": b'{"messages":[{"role":"user","content":"a\x01b"}]}',
    "raw newline in a string": b'{"messages":[{"role":"user","content":"a\nb"}]}',
    "raw tab in a string": b'{"messages":[{"role":"user","content":"a\tb"}]}',
    "single quotes": b"{'messages':[{'role':'user','content':'a'}]}",
    "NaN": b'{"messages":[{"role":"user","content":"a"}],"max_tokens":NaN}',
    "huge integer": b'{"messages":[{"role":"user","content":"a"}],"max_tokens":123456789012345678901234567890}',
    "trailing comma": b'{"messages":[{"role":"user","content":"a"}],}',
    "data after the object": b'{"messages":[{"role":"user","content":"a"}]}{}',
    "comment": b'{"messages":[{"role":"user","content":"a"}]/* c */}',
    "too deep": ('{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":'
                 '{"name":"t","parameters":{"x":' + deep(70) + '}}}]}').encode(),
}


def msgs(*m):
    return {"messages": list(m)}


U = {"role": "user", "content": "hi"}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
A_CALLS = {"role": "assistant", "content": None, "tool_calls": [CALL]}


def tool_msg(cid="c1", content="r"):
    return {"role": "tool", "tool_call_id": cid, "content": content}


def with_tool(params=None, **fn):
    f = {"name": "t"}
    if params is not None:
        f["parameters"] = params
    f.update(fn)
    return dict(msgs(U), tools=[{"type": "function", "function": f}])


def schema_at(path_builder):
    return with_tool(path_builder({"$ref": "https://evil.example/schema.json"}))


BAD_MODEL = {
    # top level: spend and routing fields are the broker's
    **{f"top-level {k}": dict(msgs(U), **{k: v}) for k, v in [
        ("n", 2), ("stream", True), ("stream_options", {"include_usage": True}), ("model", "gpt-expensive"),
        ("logprobs", True), ("top_logprobs", 5), ("temperature", 1), ("user", "u"), ("functions", []),
        ("function_call", "auto"), ("response_format", {"type": "json_object"}), ("web_search_options", {}),
        ("store", True), ("metadata", {}), ("service_tier", "priority"), ("parallel_tool_calls", True),
        ("modalities", ["audio"]), ("audio", {"voice": "x"}), ("prediction", {}), ("seed", 1), ("stop", "x"),
        ("max_completion_tokens", 10), ("logit_bias", {}), ("reasoning_effort", "high"), ("url", "https://x"),
        ("messages_extra", [])]},
    "no messages": {},
    "messages not an array": {"messages": {}},
    "messages empty": {"messages": []},
    # roles and content
    "role developer": msgs({"role": "developer", "content": "x"}),
    "role function": msgs({"role": "function", "name": "f", "content": "x"}),
    "role missing": msgs({"content": "x"}),
    "role not a string": msgs({"role": 1, "content": "x"}),
    "message not an object": msgs("hi"),
    "content parts": msgs({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
    "image_url part": msgs({"role": "user",
                            "content": [{"type": "image_url", "image_url": {"url": "https://x/i.png"}}]}),
    "input_audio part": msgs({"role": "user", "content": [{"type": "input_audio",
                                                           "input_audio": {"data": "AAAA", "format": "wav"}}]}),
    "file part": msgs({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}),
    "content object": msgs({"role": "user", "content": {"file_id": "file-abc"}}),
    "content number": msgs({"role": "user", "content": 1}),
    "user content null": msgs({"role": "user", "content": None}),
    "user content missing": msgs({"role": "user"}),
    "assistant content null without calls": msgs(U, {"role": "assistant", "content": None}),
    "message name": msgs({"role": "user", "content": "x", "name": "admin"}),
    "message audio": msgs(U, {"role": "assistant", "content": "x", "audio": {"id": "audio-1"}}),
    "user with tool_calls": msgs({"role": "user", "content": "x", "tool_calls": [CALL]}),
    # tool calls
    "tool call type": msgs(U, {"role": "assistant", "content": None,
                               "tool_calls": [dict(CALL, type="web_search")]}),
    "tool call arguments object": msgs(U, {"role": "assistant", "content": None, "tool_calls": [
        dict(CALL, function={"name": "f", "arguments": {}})]}),
    "tool call without arguments": msgs(U, {"role": "assistant", "content": None, "tool_calls": [
        dict(CALL, function={"name": "f"})]}),
    "tool call bad name": msgs(U, {"role": "assistant", "content": None, "tool_calls": [
        dict(CALL, function={"name": "a b", "arguments": "{}"})]}),
    "tool call without id": msgs(U, {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
    "tool call extra member": msgs(U, {"role": "assistant", "content": None, "tool_calls": [dict(CALL, x=1)]}),
    "tool_calls empty": msgs(U, {"role": "assistant", "content": None, "tool_calls": []}),
    "duplicate call ids": msgs(U, {"role": "assistant", "content": None, "tool_calls": [CALL, CALL]}),
    # tool messages
    "tool message first": msgs(tool_msg()),
    "tool message after a user message": msgs(U, tool_msg()),
    "tool message after plain assistant": msgs(U, {"role": "assistant", "content": "x"}, tool_msg()),
    "tool message answers an unknown call": msgs(U, A_CALLS, tool_msg("c2")),
    "tool message answers twice": msgs(U, A_CALLS, tool_msg(), tool_msg()),
    "tool message answers an older group": msgs(U, A_CALLS, tool_msg(), U,
                                                {"role": "assistant", "content": None,
                                                 "tool_calls": [dict(CALL, id="c9")]}, tool_msg("c1")),
    "tool message without id": msgs(U, A_CALLS, {"role": "tool", "content": "r"}),
    "tool message content parts": msgs(U, A_CALLS, {"role": "tool", "tool_call_id": "c1",
                                                    "content": [{"type": "text", "text": "r"}]}),
    # tools
    "native tool web_search": dict(msgs(U), tools=[{"type": "web_search_preview"}]),
    "native tool file_search": dict(msgs(U), tools=[{"type": "file_search", "vector_store_ids": ["vs_1"]}]),
    "native tool code_interpreter": dict(msgs(U), tools=[{"type": "code_interpreter"}]),
    "tool without type": dict(msgs(U), tools=[{"function": {"name": "t"}}]),
    "tool strict flag": with_tool(strict=True),
    "tool bad name": dict(msgs(U), tools=[{"type": "function", "function": {"name": "a/b"}}]),
    "tools duplicate names": dict(msgs(U), tools=[{"type": "function", "function": {"name": "t"}}] * 2),
    "parameters not an object": with_tool("string"),
    "tool_choice required": dict(msgs(U), tool_choice="required"),
    "tool_choice object": dict(msgs(U), tool_choice={"type": "function", "function": {"name": "t"}}),
    # max_tokens
    **{f"max_tokens {v!r}": dict(msgs(U), max_tokens=v) for v in (0, -1, "100", 1.5, None, 2 ** 40)},
    # remote references at schema positions
    "$ref at the root": with_tool({"$ref": "https://evil.example/s.json"}),
    "$id remote": with_tool({"$id": "https://evil.example/s.json"}),
    "$schema remote": with_tool({"$schema": "http://json-schema.org/draft-07/schema#"}),
    "$dynamicRef remote": with_tool({"$dynamicRef": "https://evil.example/s.json#meta"}),
    "$recursiveRef remote": with_tool({"$recursiveRef": "https://evil.example/s"}),
    "$vocabulary remote": with_tool({"$vocabulary": {"https://evil.example/vocab": True}}),
    "$ref not a string": with_tool({"$ref": {"x": 1}}),
    "$ref relative file": with_tool({"$ref": "other.json#/x"}),
    "$ref in properties": schema_at(lambda s: {"properties": {"a": s}}),
    "$ref in patternProperties": schema_at(lambda s: {"patternProperties": {"^a": s}}),
    "$ref in additionalProperties": schema_at(lambda s: {"additionalProperties": s}),
    "$ref in items": schema_at(lambda s: {"items": s}),
    "$ref in items array": schema_at(lambda s: {"items": [{"type": "string"}, s]}),
    "$ref in prefixItems": schema_at(lambda s: {"prefixItems": [s]}),
    "$ref in additionalItems": schema_at(lambda s: {"additionalItems": s}),
    "$ref in contains": schema_at(lambda s: {"contains": s}),
    "$ref in allOf": schema_at(lambda s: {"allOf": [s]}),
    "$ref in anyOf": schema_at(lambda s: {"anyOf": [{"type": "null"}, s]}),
    "$ref in oneOf": schema_at(lambda s: {"oneOf": [s]}),
    "$ref in not": schema_at(lambda s: {"not": s}),
    "$ref in if/then/else": schema_at(lambda s: {"if": {"type": "string"}, "then": {}, "else": s}),
    "$ref in $defs": schema_at(lambda s: {"$defs": {"x": s}}),
    "$ref in definitions": schema_at(lambda s: {"definitions": {"x": s}}),
    "$ref in dependentSchemas": schema_at(lambda s: {"dependentSchemas": {"a": s}}),
    "$ref in dependencies": schema_at(lambda s: {"dependencies": {"a": s}}),
    "$ref in propertyNames": schema_at(lambda s: {"propertyNames": s}),
    "$ref in unevaluatedProperties": schema_at(lambda s: {"unevaluatedProperties": s}),
    "$ref in unevaluatedItems": schema_at(lambda s: {"unevaluatedItems": s}),
    "$ref in contentSchema": schema_at(lambda s: {"contentSchema": s}),
    "$ref deep": schema_at(lambda s: {"properties": {"a": {"items": {"anyOf": [{"properties": {"b": s}}]}}}}),
}


@pytest.mark.parametrize("name", sorted(RAW_BAD_MODEL))
def test_model_body_strictness(rig, turn, name):
    refused(rig, turn, request_bytes("/model", RAW_BAD_MODEL[name]), 400, "bad_request")


@pytest.mark.parametrize("name", sorted(BAD_MODEL))
def test_model_field_rules(rig, turn, name):
    refused(rig, turn, request_bytes("/model", BAD_MODEL[name]), 400, "bad_request")


GOOD_MODEL_SHAPES = {
    "tool group answered": msgs(U, A_CALLS, tool_msg()),
    "two calls answered in any order": msgs(U, {"role": "assistant", "content": "x", "tool_calls": [
        CALL, dict(CALL, id="c2")]}, tool_msg("c2"), tool_msg("c1")),
    "a call left unanswered": msgs(U, {"role": "assistant", "content": None, "tool_calls": [
        CALL, dict(CALL, id="c2")]}, tool_msg("c1"), U),
    "assistant without content member": msgs(U, {"role": "assistant", "tool_calls": [CALL]}, tool_msg()),
    "local references": with_tool({"$ref": "#/$defs/a", "$defs": {"a": {"$id": "#a", "type": "string"}},
                                   "$schema": "#", "$vocabulary": {"#v": True}}),
    "tool_choice none": dict(msgs(U), tool_choice="none"),
}


@pytest.mark.parametrize("name", sorted(GOOD_MODEL_SHAPES))
def test_model_good_shapes_are_forwarded(rig, turn, name):
    before = len(rig.model_requests())
    assert_answer(turn.post("/model", GOOD_MODEL_SHAPES[name]), 200)
    assert len(rig.model_requests()) == before + 1


# ---------------------------------------------------------------- upstream behaviour

UPSTREAM_ERRORS = ["#upstream redirect", "#status 301", "#status 307", "#status 400", "#status 401", "#status 500",
                   "#status 503", "#upstream html", "#upstream sse", "#upstream errorobj", "#upstream emptychoices",
                   "#upstream nochoices", "#upstream notjson", "#big 1100000"]


@pytest.mark.parametrize("directive", UPSTREAM_ERRORS)
def test_upstream_failures_are_generic_502(rig, turn, directive):
    before = len(rig.model_requests())
    a = turn.post("/model", model_req(directive))
    assert_answer(a, 502, "upstream_error")
    reqs = rig.model_requests()[before:]
    assert [r["path"] for r in reqs] == ["/v1/chat/completions"], "a redirect was followed or a call repeated"


def test_upstream_answer_under_the_bound_passes(rig, turn):
    a = turn.post("/model", model_req("#big 1000000"))
    assert_answer(a, 200)
    assert len(a.json()["choices"][0]["message"]["content"]) == 1000000


def test_upstream_timeout_at_the_turn_deadline(rig):
    t = rig.turn(deadline_ms=2500)
    try:
        t0 = time.monotonic()
        a = t.post("/model", model_req("#sleep 8000"))
        took = time.monotonic() - t0
        assert_answer(a, 504, "upstream_timeout")
        assert 2.0 < took < 4.5, took
    finally:
        t.close()


def test_upstream_unreachable(broker_env):
    with BrokerRig(broker_env, config={"modelUrl": "https://localhost:1/v1/chat/completions"}) as r:
        with r.turn() as t:
            assert_answer(t.post("/model", GOOD_MODEL), 502, "upstream_error")


def test_upstream_certificate_is_verified(broker_env):
    # The system store does not know the test CA: TLS verification must fail.
    with BrokerRig(broker_env, config={"caFile": "/etc/ssl/certs/ca-certificates.crt"}) as r:
        with r.turn() as t:
            assert_answer(t.post("/model", GOOD_MODEL), 502, "upstream_error")
        assert r.model_requests() == []


# ---------------------------------------------------------------- reflection filter

REFLECTIONS = ["#reflect raw", "#reflect base64", "#reflect hex", "#reflect url", "#upstream b64url",
               "#upstream b64shift", "#upstream escaped"]


@pytest.mark.parametrize("directive", REFLECTIONS)
def test_model_answer_reflecting_the_key_is_refused(rig, turn, directive):
    assert_answer(turn.post("/model", model_req(directive)), 502, "upstream_error")


def test_text_that_only_looks_like_a_key_passes(rig, turn):
    a = turn.post("/model", model_req("#upstream mask"))
    assert_answer(a, 200)
    text = a.json()["choices"][0]["message"]["content"]
    assert "sk-..." + rig.api_key[-4:] in text and "sk-proj-example" in text


def key_forms(key):
    k = key.encode()
    return {"raw": key, "base64": base64.b64encode(k).decode(), "base64 shifted": base64.b64encode(b"x" + k).decode(),
            "base64url": base64.urlsafe_b64encode(k).decode().rstrip("="), "hex": k.hex(), "HEX": k.hex().upper(),
            "url": urllib.parse.quote(key, safe=""), "url all": "".join(f"%{b:02X}" for b in k),
            "json escaped": json.dumps({"k": "".join(f"\\u{ord(c):04x}" for c in key)}).replace("\\\\", "\\")}


@pytest.mark.parametrize("form", sorted(key_forms("x")))
def test_tool_output_reflecting_the_key_is_refused(rig, turn, form):
    text = key_forms(rig.api_key)[form]
    # Escapes are decoded only when the whole output is JSON text.
    out = text if form == "json escaped" else "out: " + text
    assert_answer(turn.post("/tools/echo", {"mode": "say", "text": out}), 502, "upstream_error")


def test_tool_output_that_only_looks_like_a_key_passes(rig, turn):
    text = f"use sk-... keys; yours ends sk-...{rig.api_key[-4:]}; sk-{rig.api_key[3:9]}"
    a = turn.post("/tools/echo", {"mode": "say", "text": text})
    assert_answer(a, 200)
    assert a.json() == {"result": text}


@pytest.mark.parametrize("enc", ["raw", "base64", "base64url", "hex", "url", "escaped"])
def test_mcp_answer_reflecting_its_key_is_refused(rig, turn, enc):
    assert_answer(turn.post("/mcp/docs", mcp_call("reflect", {"enc": enc})), 502, "upstream_error")


def test_mcp_answer_that_only_looks_like_a_key_passes(rig, turn):
    a = turn.post("/mcp/docs", mcp_call("mask"))
    assert_answer(a, 200)
    assert "sk-..." + rig.mcp_key[-4:] in a.json()["result"]["content"][0]["text"]


def test_model_key_in_an_mcp_answer_is_refused(rig, turn):
    # The model key is primed into the turn's filter for MCP and tool answers too.
    a = turn.post("/mcp/docs", mcp_call("echo", {"k": rig.api_key}))
    assert_answer(a, 502, "upstream_error")


# ---------------------------------------------------------------- budgets

def test_call_budget_counts_refused_calls(rig):
    t = rig.turn()
    try:
        with rig.nothing_forwarded():
            for i in range(20):
                assert t.raw(BAD_SYNTAX["bare LF everywhere"]).status == 400
            for i in range(20):
                assert t.post("/nope", GOOD_MODEL).status == 404
            for i in range(7):
                assert t.post("/model", {"messages": []}).status == 400
        assert_answer(t.post("/model", GOOD_MODEL), 200)  # call 48
        with rig.nothing_forwarded():
            assert_answer(t.post("/model", GOOD_MODEL), 429, "budget_exhausted")
            assert_answer(t.post("/tools/echo", {}), 429, "budget_exhausted")
            assert_answer(t.raw(BAD_SYNTAX["obs-fold"]), 400, "bad_request")
    finally:
        assert t.close() == 51


def test_body_limit(rig, turn):
    # Refused on the header alone: the body is never sent, let alone read.
    refused(rig, turn, head(cl=False) + f"Content-Length: {BODY_MAX + 1}\r\n\r\n".encode(), 413, "too_large")
    refused(rig, turn, head(cl=False) + b"Content-Length: 99999999999999999999999\r\n\r\n", 413, "too_large")
    # Exactly the limit is accepted.
    filler = "x" * (BODY_MAX - len(json.dumps(model_req(""))))
    body = json.dumps(model_req(filler)).encode()
    assert len(body) == BODY_MAX
    assert_answer(turn.raw(request_bytes("/model", body)), 200)


def test_body_shorter_than_content_length_is_not_forwarded(rig, turn):
    with rig.nothing_forwarded():
        s = turn.connect()
        s.sendall(head(cl=False) + f"Content-Length: {len(BODY) + 10}\r\n\r\n".encode() + BODY)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        data = b""
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    break
                data += d
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
    assert b"200 OK" not in data


def test_one_call_in_flight(rig):
    t = rig.turn()
    try:
        out = {}
        n = len(rig.model_requests())
        slow = threading.Thread(target=lambda: out.setdefault("slow", t.post("/model", model_req("#sleep 1500"))))
        slow.start()
        # The fake records a request before it sleeps: from then on the call is in flight.
        wait_until(lambda: len(rig.model_requests()) > n, 10, "the slow call to reach the model")
        with rig.nothing_forwarded():
            t0 = time.monotonic()
            second = t.post("/tools/echo", {"mode": "echo"})
            assert time.monotonic() - t0 < 0.5, "the second call was queued"
        assert_answer(second, 429, "busy")
        slow.join()
        assert_answer(out["slow"], 200)
        assert_answer(t.post("/tools/echo", {}), 200)
    finally:
        t.close()


def test_sixteen_connections_per_listener(rig):
    t = rig.turn()
    idle = []
    try:
        for _ in range(16):
            idle.append(t.connect())
        # No wait for brokerd to accept them: a listener accepts in connection order, so
        # the 17th comes after the 16 whenever brokerd gets to it.
        extra = t.connect()
        extra.settimeout(3)
        try:
            extra.sendall(request_bytes("/model", GOOD_MODEL))
            got = extra.recv(4096)
        except (BrokenPipeError, ConnectionResetError):
            got = b""
        extra.close()
        assert got == b"", "a 17th connection was served"
        idle.pop().close()

        # Until brokerd has seen that close, a new connection is closed unanswered (and
        # forwards nothing); the first one answered must be served.
        def answered():
            a = t.post("/model", GOOD_MODEL)
            return a if a.status is not None else None
        assert_answer(wait_until(answered, 10, "a connection slot to be free again"), 200)
    finally:
        for s in idle:
            s.close()
        t.close()


def test_deadlines(rig):
    """Header deadline (10 s from accept), request deadline (60 s from accept), and the turn
    deadline, checked at once so the test takes about a minute."""
    t = rig.turn()
    t2 = rig.turn(deadline_ms=4000)
    try:
        # 1. The head never completes.
        opened = time.monotonic()
        slow_head = t.connect()
        slow_head.sendall(b"POST /model HTTP/1.1\r\nHost: br")
        # 2. The head completes, the body trickles in far too slowly.
        slow_body = t.connect()
        slow_body.sendall(head(cl=False) + f"Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY[:1])
        # 3. A turn whose deadline passes: new requests are refused.
        wait_past(opened + 4.5)
        with rig.nothing_forwarded():
            a = t2.post("/model", GOOD_MODEL, timeout=5)
        assert a.status in (None, 503) and a.closed
        t0 = time.monotonic()
        slow_head.settimeout(15)
        try:
            assert slow_head.recv(100) == b"", "no answer, just closed"
        except ConnectionResetError:
            pass
        head_closed = time.monotonic() - opened
        assert 9.0 < head_closed < 12.5, head_closed
        slow_body.settimeout(2)
        sent = 1
        closed_at = None
        while time.monotonic() - t0 < 70:
            try:
                d = slow_body.recv(100)
                if d == b"":
                    closed_at = time.monotonic() - opened
                    break
                raise AssertionError(f"answered: {d!r}")
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed_at = time.monotonic() - opened
                break
            if sent < len(BODY) - 1:
                try:
                    slow_body.sendall(BODY[sent:sent + 1])
                    sent += 1
                except (BrokenPipeError, ConnectionResetError):
                    pass
        assert closed_at is not None and 58 < closed_at < 64, closed_at
    finally:
        t.close()
        t2.close()


# ---------------------------------------------------------------- credentials

def test_key_is_read_for_every_call_and_missing_key_fails_closed(rig, turn):
    key_file = rig.key_file
    old = open(key_file).read()
    try:
        new_key = "sk-rotated-" + os.urandom(12).hex()
        os.chmod(key_file, 0o600)
        with open(key_file, "w") as f:
            f.write(new_key + "\n")
        before = len(rig.model_requests())
        assert_answer(turn.post("/model", GOOD_MODEL), 200)
        assert rig.model_requests()[before]["headers"]["authorization"] == "Bearer " + new_key
        os.unlink(key_file)
        with rig.nothing_forwarded():
            assert_answer(turn.post("/model", GOOD_MODEL), 503, "unavailable")
    finally:
        with open(key_file, "w") as f:
            f.write(old)
        os.chown(key_file, rig.env.uid, rig.env.gid)
        os.chmod(key_file, 0o400)


# Key commands inherit brokerd's filter and cannot write files: the binding it got goes to
# the test's ToolRecorder in argv[1].
KEY_COMMAND = r"""#!/usr/bin/python3
import json, os, socket, sys
data = sys.stdin.read()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(sys.argv[1], "recorder.sock"))
s.sendall(json.dumps({"file": "key.log", "mode": "a", "text": data + "\n"}).encode())
s.shutdown(socket.SHUT_WR)
s.recv(16)
s.close()
speaker = json.loads(data)["speaker"]
if speaker["id"] == "nokey":
    sys.exit(0)
if speaker["id"] == "fails":
    print("sk-should-not-be-used")
    sys.exit(1)
print("sk-from-command-" + (speaker["principalId"] or "none"))
"""


def test_key_command_gets_the_binding(broker_env):
    d = tempfile_dir(broker_env)
    cmd = os.path.join(d, "key.py")
    with open(cmd, "w") as f:
        f.write(KEY_COMMAND)
    os.chmod(cmd, 0o755)
    log = os.path.join(d, "key.log")
    recorder = ToolRecorder(d, broker_env.uid)
    with BrokerRig(broker_env, config={"apiKey": {"command": ["/usr/bin/python3", cmd, d]}}) as r:
        with r.turn(channel="chan-k", speaker_id="7", speaker_name="Kim", principal_id="p-7") as t:
            assert_answer(t.post("/model", GOOD_MODEL), 200)
        assert r.model_requests()[-1]["headers"]["authorization"] == "Bearer sk-from-command-p-7"
        with open(log) as f:
            got = [json.loads(line) for line in f if line.strip()]
        assert got[-1] == {"channel": "chan-k", "speaker": {"id": "7", "name": "Kim", "principalId": "p-7"}}
        n = len(r.model_requests())
        for who in ("nokey", "fails"):
            with r.turn(speaker_id=who) as t:
                with r.nothing_forwarded():
                    assert_answer(t.post("/model", GOOD_MODEL), 503, "unavailable")
        assert len(r.model_requests()) == n
    recorder.stop()
    shutil.rmtree(d, ignore_errors=True)


def tempfile_dir(env):
    import tempfile
    d = tempfile.mkdtemp(prefix="rtsk-", dir="/tmp")
    os.chown(d, env.uid, env.gid)
    os.chmod(d, 0o755)
    return d


# ---------------------------------------------------------------- host tools

BAD_TOOL_BODIES = {
    "array": b"[]",
    "string": b'"x"',
    "duplicate key": b'{"mode":"echo","mode":"say"}',
    "invalid UTF-8": b'{"mode":"\xff"}',
    "raw control character": b'{"mode":"a\x01"}',
    "NUL escape": b'{"mode":"a\\u0000"}',
    "too deep": ('{"x":' + deep(70) + '}').encode(),
    "not JSON": b"mode=echo",
}


@pytest.mark.parametrize("name", sorted(BAD_TOOL_BODIES))
def test_tool_body_strictness(rig, turn, name):
    refused(rig, turn, request_bytes("/tools/echo", BAD_TOOL_BODIES[name]), 400, "bad_request")


@pytest.mark.parametrize("args", [{"mode": "fail"}, {"mode": "big", "n": 1024 * 1024 + 1},
                                  {"mode": "say", "hex": "ff00fe"}],
                         ids=["non-zero exit", "output over 1 MiB", "output not UTF-8"])
def test_tool_failures_are_generic(rig, turn, args):
    a = turn.post("/tools/echo", args)
    assert_answer(a, 502, "upstream_error")
    assert b"partial" not in a.raw


def test_tool_output_at_the_bound(rig, turn):
    a = turn.post("/tools/echo", {"mode": "big", "n": 1024 * 1024})
    assert_answer(a, 200)
    assert len(a.json()["result"]) == 1024 * 1024


def test_tool_stderr_goes_to_the_host_log_only(rig, turn):
    secret = "tool-diagnostic-" + os.urandom(4).hex()
    a = turn.post("/tools/echo", {"mode": "stderr", "text": secret + "\x1b[31m"})
    assert_answer(a, 200)
    assert a.json() == {"result": "ok"} and secret.encode() not in a.raw
    wait_until(lambda: secret in rig.broker_log(), 10, "the tool's stderr in brokerd's log")
    log = rig.broker_log()
    assert secret + "?[31m" in log and "\x1b" not in log


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


# After brokerd's SIGKILL of a tool's process group, how long the processes may take to be
# gone (the kernel ends a killed process within milliseconds; a loaded machine, longer).
KILLED_GONE_S = 2.0


def wait_file(path, timeout=10):
    wait_until(lambda: os.path.exists(path) and os.path.getsize(path) > 0, timeout, f"{path} to be written")


def pidns_members(ns):
    """Host pids of the processes in PID namespace ns ("pid:[inode]")."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/ns/pid") == ns and pid_alive(int(d)):
                    found.append(int(d))
            except OSError:
                pass  # gone meanwhile
    return found


def read_pids(path):
    """A trap tool's OUTDIR/<tag>.pids: its pid, its child's (as its sandbox numbers
    them) and its PID namespace."""
    pid, child, ns = open(path).read().split()
    return int(pid), int(child), ns


def wait_gone(pids_file, what):
    """Every process of the tool's sandbox (its PID namespace) is gone."""
    pid, child, ns = read_pids(pids_file)
    assert pid != child and ns.startswith("pid:["), (pid, child, ns)
    wait_until(lambda: not pidns_members(ns), KILLED_GONE_S, what)


def test_tool_deadline_sigterm_then_sigkill(rig, turn):
    tag = "deadline-" + os.urandom(4).hex()
    t0 = time.monotonic()
    a = turn.post("/tools/short", {"mode": "trap", "tag": tag})
    took = time.monotonic() - t0
    assert_answer(a, 504, "upstream_timeout")
    assert 2.5 < took < 5, took  # 1 s timeout, then 2 s between SIGTERM and SIGKILL
    out = rig.dirs["toolout"]
    assert open(os.path.join(out, tag + ".term")).read() == "TERM\n"
    wait_gone(os.path.join(out, tag + ".pids"), "the tool's process group to end with the call")


def test_turn_close_stops_a_running_tool(rig):
    t = rig.turn()
    tag = "cancel-" + os.urandom(4).hex()
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("a", t.post("/tools/echo", {"mode": "trap", "tag": tag})))
    th.start()
    wait_file(os.path.join(rig.dirs["toolout"], tag + ".pids"))
    t0 = time.monotonic()
    t.close()
    took = time.monotonic() - t0
    th.join(10)
    assert took < 5, took
    a = out["a"]
    assert a.status in (None, 503) and a.closed
    assert open(os.path.join(rig.dirs["toolout"], tag + ".term")).read() == "TERM\n"
    wait_gone(os.path.join(rig.dirs["toolout"], tag + ".pids"), "the tool's process group to end with the turn")


def test_worker_hang_up_stops_its_tool_and_frees_the_slot(rig):
    """Seed: a call's cancellation combines the request's closure with the turn's. A worker
    that closes its connection mid-call gets its tool stopped at once (SIGTERM to the
    group), and the turn's one call slot is free again; the turn itself goes on."""
    t = rig.turn()
    tag = "hangup-" + os.urandom(4).hex()
    s = t.connect()
    s.sendall(request_bytes("/tools/echo", {"mode": "trap", "tag": tag}))  # echo: a 20 s timeout
    wait_file(os.path.join(rig.dirs["toolout"], tag + ".pids"))
    t0 = time.monotonic()
    s.close()
    # The trapping tool ignores SIGTERM, so only SIGKILL ends it: the slot is free once it
    # is gone, 2 s after the SIGTERM, long before its 20 s timeout.
    def not_busy():
        a = t.post("/tools/echo", {"mode": "echo"})
        return a if a.status != 429 else None
    a = wait_until(not_busy, 10, "the call slot to be free after the worker hung up", step=0.2)
    took = time.monotonic() - t0
    assert a.status == 200, (a.status, a.body)
    assert took < 8, took
    assert open(os.path.join(rig.dirs["toolout"], tag + ".term")).read() == "TERM\n"
    wait_gone(os.path.join(rig.dirs["toolout"], tag + ".pids"), "the tool to end after the caller's hang-up")
    t.close()


def test_half_closed_request_is_still_answered(rig, turn):
    """A worker that shuts down only its sending side still gets its answer: only a full
    hang-up cancels the call."""
    s = turn.connect()
    s.sendall(request_bytes("/tools/echo", {"mode": "sleep", "ms": 500}))
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    assert b"slept" in data


# ---------------------------------------------------------------- MCP

BAD_MCP = {
    "batch": ([mcp_call("echo")], 400, "bad_request"),
    "empty batch": ([], 400, "bad_request"),
    "notification": ({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
                     400, "bad_request"),
    "id null": (dict(mcp_call("echo"), id=None), 400, "bad_request"),
    "id float": (dict(mcp_call("echo"), id=1.5), 400, "bad_request"),
    "id object": (dict(mcp_call("echo"), id={}), 400, "bad_request"),
    "jsonrpc 1.0": (dict(mcp_call("echo"), jsonrpc="1.0"), 400, "bad_request"),
    "no jsonrpc": ({k: v for k, v in mcp_call("echo").items() if k != "jsonrpc"}, 400, "bad_request"),
    "extra member": (dict(mcp_call("echo"), extra=1), 400, "bad_request"),
    "params _meta": ({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {}, "_meta": {"progressToken": 1}}}, 400, "bad_request"),
    "arguments array": (dict(mcp_call("echo"), params={"name": "echo", "arguments": []}), 400, "bad_request"),
    "no arguments": (dict(mcp_call("echo"), params={"name": "echo"}), 400, "bad_request"),
    "name not a string": (dict(mcp_call("echo"), params={"name": 1, "arguments": {}}), 400, "bad_request"),
    "undeclared tool": (mcp_call("delete_everything"), 403, "forbidden"),
    "tool of another server": (mcp_call("echo"), 403, "forbidden"),  # sent to /mcp/open below
    **{f"method {m}": (mcp_call("echo", method=m), 403, "forbidden") for m in (
        "initialize", "notifications/initialized", "tools/list", "resources/list", "resources/read",
        "resources/templates/list", "resources/subscribe", "prompts/list", "prompts/get", "ping",
        "completion/complete", "logging/setLevel", "sampling/createMessage", "roots/list", "Tools/Call")},
}


@pytest.mark.parametrize("name", sorted(BAD_MCP))
def test_mcp_refusals(rig, turn, name):
    body, status, code = BAD_MCP[name]
    target = "/mcp/open" if name == "tool of another server" else "/mcp/docs"
    refused(rig, turn, request_bytes(target, body), status, code)


RAW_BAD_MCP = {
    "duplicate key": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"initialize",'
                     b'"params":{"name":"echo","arguments":{}}}',
    "duplicate tool name": b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                           b'"params":{"name":"echo","name":"delete","arguments":{}}}',
    "NUL in the tool name": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo\\u0000x",'
                            b'"arguments":{}}}',
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                     b'"params":{"name":"echo","arguments":{"q":"\xff"}}}',
    "not JSON": b"jsonrpc=2.0",
}


@pytest.mark.parametrize("name", sorted(RAW_BAD_MCP))
def test_mcp_body_strictness(rig, turn, name):
    refused(rig, turn, request_bytes("/mcp/docs", RAW_BAD_MCP[name]), 400, "bad_request")


@pytest.mark.parametrize("tool,args", [("sse", {}), ("html", {}), ("redirect", {}), ("status", {"code": 500}),
                                       ("status", {"code": 401}), ("wrongid", {}), ("notjson", {}),
                                       ("big", {"n": 1100000})])
def test_mcp_upstream_failures_are_generic(rig, turn, tool, args):
    before = len(rig.mcp_requests())
    a = turn.post("/mcp/docs", mcp_call(tool, args))
    assert_answer(a, 502, "upstream_error")
    assert [r["path"] for r in rig.mcp_requests()[before:]] == ["/mcp"]


def test_mcp_timeout_at_the_turn_deadline(rig):
    t = rig.turn(deadline_ms=2000)
    try:
        assert_answer(t.post("/mcp/docs", mcp_call("sleep", {"ms": 6000})), 504, "upstream_timeout")
    finally:
        t.close()


# ---------------------------------------------------------------- logging (runs last)

def test_zz_logs_hold_no_payloads_credentials_or_urls(rig):
    log = rig.broker_log()
    assert "call " in log, "debug logging is not on; this test would prove nothing"
    for secret in (rig.api_key, rig.mcp_key, MARKER, f"localhost:{rig.fake.port}", f"localhost:{rig.mcp.port}",
                   "/v1/chat/completions", "upstream-cookie", "fake-session", "scripted failure", "quota exceeded"):
        assert secret not in log, f"{secret!r} appears in brokerd's log"
