#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted stand-in for the Anthropic Messages API, over HTTPS, streaming server-sent events.

Not a model: it answers from the fixed rules below, so tests can run rich turns (richworker ->
brokerd -> here) and script every way an upstream stream can go wrong. python3 stdlib only.

    fake_anthropic.py --cert server.pem --key server.key [--port 0] [--host 127.0.0.1]
                      [--record FILE] [--script-dir DIR]

With --port 0 it picks a free port; the first stdout line is "PORT <n>", printed once the
socket listens. Make the certificate with tests/fakes/make-ca.sh (the rich config's caFile).

Routes: POST /v1/messages and POST /v1/messages/count_tokens, each also with "?beta=true".
Anything else is answered 404 (405 for another method on those paths) with an Anthropic error
body, and recorded like the rest.

Record (--record): one JSON line per event, flushed at once:
  {"kind":"request", "seq", "method", "path", "headers":{lowercase name: value},
   "rawHeaders":[[name, value]...], "bearer" (the Authorization bearer, else x-api-key),
   "body" (parsed JSON; for a body over RECORD_FULL_MAX bytes, every string longer than
   1,024 characters is replaced by "<N chars sha256 HEX>"), "bodyBytes", "bodySha256",
   "bodyError"?, "time"}   written when the request has been read, before any answer;
  {"kind":"answer", "seq", "status", "firstByte" (time of the first answer byte written),
   "end", "events" (SSE events written), "outcome" ("complete", "silent", "cut",
   "client-gone", ...)}   written when the answer is over.
Times are time.time() seconds. RichRig's FakeAnthropic.requests() reads the request lines.

Answers. A request with "stream": true is answered as Anthropic does: 200, Content-Type
text/event-stream, Transfer-Encoding: chunked, one SSE event per chunk and per write (TCP
NODELAY): message_start, content blocks (content_block_start, *_delta..., content_block_stop),
message_delta (stop_reason, usage), message_stop. Without "stream" the whole Message is one
JSON body. count_tokens answers {"input_tokens": N}.

Directives, found anywhere in the last user text (the text blocks of the last user message
that has any; case-insensitive), in the style of fake_model.py. They never collide with
richworker's "#rw WORD" directives, which the worker forwards as part of the turn text.

  content
    (none)              one text block "echo: <last user text>"; after tool results (the
                        last message carries tool_result blocks): "tool results: <texts>"
    #big N              text of N bytes ("x"), in text_delta events of 16 KiB
    #chunks N           the text in N text_delta events
    #reflect [FORM] [decoy]
                        the credential that arrived (bearer or x-api-key), in FORM (a name of
                        keyforms.FORMS, default raw), in the text; decoy: keyforms.DECOY
    #thinking           a thinking block (thinking_delta, signature_delta) before the text
    #tool NAME [JSON]   a tool_use block calling NAME with input JSON (default {}), streamed
                        as input_json_delta pieces; stop_reason "tool_use"
    #tools N NAME       N such tool_use blocks
                        (#tool and #tools are read only while the last message carries no
                        tool results, so an agent loop ends after its tools answered)
    #quiet              after tool results, say only how many came back ("tool results: N
                        received"), never their text
    #recall             "recall: " and the texts of the earlier user messages the request
                        carries, " | " between them (what a conversation's history holds)
    #usage N            report N input tokens (message_start and the Message's usage), so
                        a client's context accounting (compaction) can be steered
  pacing
    #sleep MS           wait MS before the answer's headers (time to first byte)
    #pace MS            wait MS between events
    #ping N             N ping events after message_start
    #split BYTE [MS]    the text holds the credential (raw), and the write boundary falls
                        after byte BYTE of it: the event is written as two HTTP chunks, two
                        TLS records, two TCP writes, MS (default 50) apart
    #split-delta BYTE [MS]
                        the credential's first BYTE characters end one text_delta event and
                        the rest starts the next, written MS (default 50) apart
  failures
    #status CODE [TYPE] HTTP CODE with {"type":"error","error":{"type":TYPE,...}} (TYPE by
                        default from the code: 400 invalid_request_error, 401
                        authentication_error, 403 permission_error, 404 not_found_error, 413
                        request_too_large, 429 rate_limit_error, 500 api_error, 529
                        overloaded_error)
    #silent             headers and message_start, then nothing until the client goes
    #silent-after N     N events, then nothing until the client goes
    #silent-headers     read the request, send nothing at all until the client goes
    #error-event [TYPE] message_start, one text delta, then "event: error" (default
                        overloaded_error), then the stream ends
    #no-stop            a complete stream without its message_stop event
    #cut                close the connection in the middle of a chunk
    #redirect           307 with a Location header
    #html               200 text/html
    #json               a non-streamed JSON Message although a stream was asked for
    #headers            extra answer headers a broker must not pass on (Set-Cookie,
                        X-Upstream-Detail, anthropic-organization-id)
  summaries
    A request whose system prompt is a conversation-summary instruction (Pi's compaction
    prompt: "You are a context summarization assistant") is answered with one text block,
    "summary: <N> bytes of conversation", and its directives are not read: the
    conversation it carries quotes earlier turns' directives.
  script
    #script NAME        the n-th request naming NAME replays entry n (the last repeats) of
                        SCRIPT_DIR/script-NAME.json (SCRIPT_DIR: --script-dir, else the
                        record's directory), a JSON array of {"status": CODE, "body": ANY}
                        (a JSON answer), {"events": [[EVENT, DATA]...], "paceMs"?: MS} (an SSE
                        stream of exactly those events, DATA an object or a raw string), or
                        {"raw": STR} (written as the whole SSE body)
"""
import base64
import hashlib
import json
import os
import re
import select
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import keyforms
from https_fake import RecordingTLSServer, argument_parser, serve, tls_context

BODY_MAX = 128 * 1024 * 1024  # above brokerd's 96 MiB input bound, so the fake never refuses first
RECORD_FULL_MAX = 4 * 1024 * 1024
RECORD_STRING_MAX = 1024
BIG_MAX = 128 * 1024 * 1024
SLEEP_MAX_MS = 600_000
SILENT_MAX_S = 900
DELTA_BYTES = 16 * 1024
ROUTES = ("/v1/messages", "/v1/messages/count_tokens")
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}


def last_user_text(messages):
    """The text of the last user message that has text (string content or text blocks)."""
    for m in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            return c
        if isinstance(c, list):
            t = "".join(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")
            if t:
                return t
    return ""


def tool_results(messages):
    """The texts of the tool_result blocks of the last message, when it is a user message."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    c = last.get("content")
    if last.get("role") != "user" or not isinstance(c, list):
        return None
    out = []
    for b in c:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            r = b.get("content")
            if isinstance(r, list):
                r = "".join(x.get("text", "") for x in r if isinstance(x, dict))
            out.append(r if isinstance(r, str) else json.dumps(r))
    return out or None


def earlier_user_texts(messages):
    """The texts of the user messages before the last one that has text, oldest first."""
    out = []
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        c = m.get("content")
        t = c if isinstance(c, str) else "".join(
            b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text") if isinstance(c, list) else ""
        if t:
            out.append(t)
    return out[:-1]


SUMMARY_PROMPT = "you are a context summarization assistant"


def is_summary_request(body):
    """Whether the system prompt is Pi's conversation-summary instruction."""
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
    return isinstance(system, str) and SUMMARY_PROMPT in system.lower()


def shorten(o):
    """o with every string longer than RECORD_STRING_MAX replaced by its length and hash."""
    if isinstance(o, str) and len(o) > RECORD_STRING_MAX:
        return f"<{len(o)} chars sha256 {hashlib.sha256(o.encode('utf-8', 'surrogatepass')).hexdigest()}>"
    if isinstance(o, list):
        return [shorten(x) for x in o]
    if isinstance(o, dict):
        return {k: shorten(v) for k, v in o.items()}
    return o


def sse(event, data):
    """One SSE event as bytes; data is an object (sent as compact JSON) or a raw string."""
    if not isinstance(data, str):
        data = json.dumps(data, separators=(",", ":"))
    return f"event: {event}\ndata: {data}\n\n".encode()


class Plan:
    """What to answer, from the directives (see the module docstring)."""

    def __init__(self, text, bearer, results):
        low = text.lower()
        self.text = "echo: " + text if results is None else "tool results: " + " | ".join(results)
        if results is not None and "#quiet" in low:
            self.text = f"tool results: {len(results)} received"
        self.usage = None
        if m := re.search(r"#usage\s+(\d+)", low):
            self.usage = min(int(m.group(1)), 10_000_000)
        self.status = self.error_type = None
        self.sleep_ms = self.pace_ms = 0
        self.pings = 0
        self.chunks = 1
        self.thinking = "#thinking" in low
        self.tools = []
        self.split = None  # (offset in the text, byte of the key, ms, across deltas)
        self.fail = None   # silent, silent-after, silent-headers, error-event, no-stop, cut, ...
        self.fail_arg = None
        self.extra_headers = "#headers" in low
        self.recall = results is None and "#recall" in low
        self.script = None
        if m := re.search(r"#script\s+([a-z0-9_-]{1,64})", low):
            self.script = m.group(1)
        if m := re.search(r"#status\s+(\d{3})(?:\s+([a-z_]+))?", low):
            self.status = int(m.group(1))
            self.error_type = m.group(2) or ERROR_TYPES.get(self.status, "api_error")
        if m := re.search(r"#sleep\s+(\d+)", low):
            self.sleep_ms = min(int(m.group(1)), SLEEP_MAX_MS)
        if m := re.search(r"#pace\s+(\d+)", low):
            self.pace_ms = min(int(m.group(1)), SLEEP_MAX_MS)
        if m := re.search(r"#ping\s+(\d+)", low):
            self.pings = min(int(m.group(1)), 10_000)
        if m := re.search(r"#chunks\s+(\d+)", low):
            self.chunks = max(1, min(int(m.group(1)), 100_000))
        if m := re.search(r"#big\s+(\d+)", low):
            self.text = "x" * min(int(m.group(1)), BIG_MAX)
            self.chunks = max(1, -(-len(self.text) // DELTA_BYTES))
        if m := re.search(r"#reflect(?:\s+([a-z0-9-]+))?(\s+decoy)?", low):
            form = m.group(1) if m.group(1) in keyforms.FORMS else "raw"
            self.text = "the key I was given is " + keyforms.encode(keyforms.DECOY if m.group(2) else bearer, form)
        if m := re.search(r"#split(-delta)?\s+(\d+)(?:\s+(\d+))?", low):
            prefix = "the key I was given is "
            self.text = prefix + bearer + " (end)"
            byte = max(1, min(int(m.group(2)), max(1, len(bearer) - 1)))
            self.split = (len(prefix) + byte, byte, int(m.group(3) or 50), bool(m.group(1)))
        if results is not None:
            pass  # the tools answered: the loop ends with text
        elif m := re.search(r"#tools\s+(\d+)\s+([a-z0-9_.-]+)", low):
            self.tools = [(m.group(2), {}) for _ in range(min(int(m.group(1)), 256))]
        elif m := re.search(r"#tool\s+([A-Za-z0-9_.-]+)(?:\s+(\{.*?\})(?=\s|$))?", text, re.IGNORECASE):
            try:
                args = json.loads(m.group(2)) if m.group(2) else {}
            except ValueError:
                args = {"raw": m.group(2)}
            self.tools = [(m.group(1), args)]
        for word in ("silent-headers", "silent-after", "silent", "error-event", "no-stop", "cut", "redirect",
                     "html", "json"):
            if m := re.search(r"#" + word + r"(?![a-z-])(?:\s+([a-z_0-9]+))?", low):
                self.fail, self.fail_arg = word, m.group(1)
                break


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-anthropic/1"

    def log_message(self, fmt, *args):
        pass  # the record file is the log

    # ---- recording ----

    def record_request(self, raw, body, err):
        self.seq = self.server.next_seq()
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:] if auth.startswith("Bearer ") else self.headers.get("x-api-key", "")
        entry = {"kind": "request", "seq": self.seq, "method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "rawHeaders": [[k, v] for k, v in self.headers.items()], "bearer": bearer,
                 "body": body if len(raw) <= RECORD_FULL_MAX else shorten(body),
                 "bodyBytes": len(raw), "bodySha256": hashlib.sha256(raw).hexdigest(), "time": time.time()}
        if err:
            entry["bodyError"] = err
        self.server.record(entry)
        return bearer

    def record_answer(self, status, outcome):
        self.server.record({"kind": "answer", "seq": self.seq, "status": status, "firstByte": self.first_byte,
                            "end": time.time(), "events": self.events, "outcome": outcome})

    # ---- writing ----

    def write(self, data):
        if self.first_byte is None:
            self.first_byte = time.time()
        self.wfile.write(data)
        self.wfile.flush()

    def start(self, status, ctype, length=None, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("request-id", f"req_fake_{self.seq:08d}")
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(length))
        for k, v in extra:
            self.send_header(k, v)
        if self.first_byte is None:
            self.first_byte = time.time()
        self.end_headers()  # flushes the buffered head in one write

    def chunk(self, data):
        self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def send_json(self, status, obj, extra=()):
        data = json.dumps(obj).encode()
        self.start(status, "application/json", len(data), extra)
        self.write(data)
        self.record_answer(status, "complete")

    def send_error_json(self, status, etype, message="scripted failure"):
        self.send_json(status, {"type": "error", "error": {"type": etype, "message": message},
                                "request_id": f"req_fake_{self.seq:08d}"})

    def event(self, name, data):
        self.chunk(sse(name, data))
        self.events += 1

    def pace(self, ms):
        if ms:
            time.sleep(ms / 1000.0)

    def wait_client_gone(self):
        """Hold the connection, sending nothing, until the client closes it (or SILENT_MAX_S)."""
        sock = self.connection
        deadline = time.monotonic() + SILENT_MAX_S
        while time.monotonic() < deadline:
            r, _, _ = select.select([sock], [], [], 0.5)
            if not r:
                continue
            try:
                if not sock.recv(4096):
                    return "client-gone"
            except (OSError, ValueError):
                return "client-gone"
        return "silent"

    # ---- requests ----

    def read_body(self):
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > BODY_MAX:
            self.close_connection = True
            return b"", None, "bad or too large Content-Length"
        raw = self.rfile.read(n)
        try:
            return raw, json.loads(raw), None
        except ValueError:
            return raw, None, "body is not JSON"

    def do_POST(self):
        self.first_byte = None
        self.events = 0
        raw, body, err = self.read_body()
        bearer = self.record_request(raw, body, err)
        path, _, query = self.path.partition("?")
        if path not in ROUTES or query not in ("", "beta=true"):
            return self.send_error_json(404, "not_found_error", "not found")
        if err or not isinstance(body, dict):
            return self.send_error_json(400, "invalid_request_error", err or "body is not an object")
        messages = body.get("messages")
        if is_summary_request(body):
            plan = Plan("", bearer, None)
            plan.text = f"summary: {len(raw)} bytes of conversation"
        else:
            plan = Plan(last_user_text(messages), bearer, tool_results(messages))
            if plan.recall:
                plan.text = "recall: " + " | ".join(earlier_user_texts(messages))
        if plan.script:
            return self.scripted(plan.script)
        if plan.sleep_ms:
            time.sleep(plan.sleep_ms / 1000.0)
        if plan.status:
            return self.send_error_json(plan.status, plan.error_type)
        if path.endswith("/count_tokens"):
            return self.send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        if plan.fail == "silent-headers":
            return self.record_answer(None, self.wait_client_gone())
        if plan.fail == "redirect":
            self.start(307, "text/plain", 0, [("Location", f"https://localhost:{self.server.server_address[1]}/x")])
            return self.record_answer(307, "complete")
        if plan.fail == "html":
            data = b"<html><body>not an API</body></html>"
            self.start(200, "text/html", len(data))
            self.write(data)
            return self.record_answer(200, "complete")
        message = self.message(body, plan)
        if not body.get("stream") or plan.fail == "json":
            extra = self.extra_headers() if plan.extra_headers else ()
            return self.send_json(200, message, extra)
        return self.stream(message, plan)

    def extra_headers(self):
        return [("Set-Cookie", "session=upstream-cookie; Secure"), ("X-Upstream-Detail", "internal"),
                ("anthropic-organization-id", "org-fake")]

    def message(self, body, plan):
        """The Message the stream spells out (also the non-streamed answer)."""
        content = []
        if plan.thinking:
            content.append({"type": "thinking", "thinking": "Let me think.", "signature": "c2lnbmF0dXJl"})
        if plan.text and not plan.tools or plan.text and plan.split:
            content.append({"type": "text", "text": plan.text})
        for name, args in plan.tools:
            content.append({"type": "tool_use", "id": self.server.tool_id(), "name": name, "input": args})
        return {"id": f"msg_fake_{self.seq:08d}", "type": "message", "role": "assistant",
                "model": body.get("model", "fake"), "content": content,
                "stop_reason": "tool_use" if plan.tools else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": plan.usage or 10, "output_tokens": max(1, len(plan.text) // 4)}}

    def stream(self, message, plan):
        self.start(200, "text/event-stream; charset=utf-8", None,
                   self.extra_headers() if plan.extra_headers else ())
        try:
            outcome = self.stream_events(message, plan)
        except (BrokenPipeError, ConnectionResetError, OSError):
            outcome = "client-gone"
        self.record_answer(200, outcome)

    def stream_events(self, message, plan):
        start = dict(message, content=[], stop_reason=None,
                     usage={"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1})
        self.event("message_start", {"type": "message_start", "message": start})
        if plan.fail == "silent":
            return self.wait_client_gone()
        limit = int(plan.fail_arg or 0) if plan.fail == "silent-after" else None

        def step(name, data):
            if limit is not None and self.events >= limit:
                raise Silent()
            self.pace(plan.pace_ms)
            self.event(name, data)

        try:
            for _ in range(plan.pings):
                step("ping", {"type": "ping"})
            for i, block in enumerate(message["content"]):
                self.stream_block(i, block, plan, step)
                if plan.fail == "error-event":
                    etype = plan.fail_arg or "overloaded_error"
                    step("error", {"type": "error", "error": {"type": etype, "message": "scripted stream error"}})
                    self.write(b"0\r\n\r\n")
                    return "error-event"
            step("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                   "usage": {"output_tokens": message["usage"]["output_tokens"]}})
            if plan.fail == "cut":
                self.write(b"400\r\nevent: message_stop\ndata: {\"ty")
                self.close_connection = True
                return "cut"
            if plan.fail != "no-stop":
                step("message_stop", {"type": "message_stop"})
            self.write(b"0\r\n\r\n")
            return "no-stop" if plan.fail == "no-stop" else "complete"
        except Silent:
            return self.wait_client_gone()

    def stream_block(self, i, block, plan, step):
        kind = block["type"]
        if kind == "thinking":
            step("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            step("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "thinking_delta", "thinking": block["thinking"]}})
            step("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": {"type": "signature_delta", "signature": block["signature"]}})
        elif kind == "text":
            step("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {"type": "text", "text": ""}})
            self.stream_text(i, block["text"], plan, step)
        else:
            step("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": {"type": "tool_use", "id": block["id"],
                                                           "name": block["name"], "input": {}}})
            js = json.dumps(block["input"])
            for part in ("", js[:len(js) // 2], js[len(js) // 2:]):
                step("content_block_delta", {"type": "content_block_delta", "index": i,
                                             "delta": {"type": "input_json_delta", "partial_json": part}})
        step("content_block_stop", {"type": "content_block_stop", "index": i})

    def stream_text(self, i, text, plan, step):
        def delta(t):
            return {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}}

        if plan.split:
            at, _, ms, across = plan.split
            if across:
                step("content_block_delta", delta(text[:at]))
                self.pace(ms)
                step("content_block_delta", delta(text[at:]))
            else:
                # One event in two chunks: the boundary inside the key's raw bytes.
                data = sse("content_block_delta", delta(text))
                cut = data.index(text.encode()) + at
                self.pace(plan.pace_ms)
                self.chunk(data[:cut])
                self.pace(ms)
                self.chunk(data[cut:])
                self.events += 1
            return
        n = plan.chunks
        size = max(1, -(-len(text) // n))
        for k in range(0, max(1, len(text)), size):
            step("content_block_delta", delta(text[k:k + size]))

    def scripted(self, name):
        n = self.server.script_call(name)
        try:
            with open(os.path.join(self.server.script_dir or ".", f"script-{name}.json"), encoding="utf-8") as f:
                entries = json.load(f)
            entry = entries[min(n, len(entries) - 1)]
        except (OSError, ValueError, TypeError, IndexError, KeyError):
            return self.send_error_json(500, "api_error", "no such script")
        if "status" in entry:
            return self.send_json(int(entry["status"]), entry.get("body", {}))
        self.start(200, "text/event-stream; charset=utf-8")
        try:
            if "raw" in entry:
                self.chunk(entry["raw"].encode())
            for ev, data in entry.get("events", []):
                self.pace(int(entry.get("paceMs", 0)))
                self.event(ev, data)
            self.write(b"0\r\n\r\n")
        except OSError:
            return self.record_answer(200, "client-gone")
        self.record_answer(200, "complete")

    def other(self):
        self.first_byte = None
        self.events = 0
        raw, body, err = (b"", None, None)
        if self.headers.get("Content-Length"):
            raw, body, err = self.read_body()
        self.record_request(raw, body, err)
        known = self.path.partition("?")[0] in ROUTES
        self.send_error_json(405 if known else 404, "not_found_error", "no")

    do_GET = do_PUT = do_DELETE = do_PATCH = other

    def do_HEAD(self):
        self.first_byte = None
        self.events = 0
        self.record_request(b"", None, None)
        self.start(404, "application/json", 0)
        self.record_answer(404, "complete")


class Silent(Exception):
    """Raised inside a stream to stop sending (#silent-after)."""


class Server(RecordingTLSServer):
    def __init__(self, addr, ctx, record_path, script_dir):
        super().__init__(addr, Handler, ctx, ROUTES[0], record_path)
        self.lock = threading.Lock()
        self.seq = 0
        self.tools = 0
        self.scripts = {}
        self.script_dir = script_dir

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def tool_id(self):
        with self.lock:
            self.tools += 1
            return "toolu_fake_" + base64.b32encode(self.tools.to_bytes(5, "big")).decode().lower()

    def script_call(self, name):
        with self.lock:
            n = self.scripts.get(name, 0)
            self.scripts[name] = n + 1
            return n


def main():
    ap = argument_parser(__doc__.splitlines()[0], ROUTES[0])
    ap.add_argument("--script-dir", help="where #script finds script-NAME.json (default: the record's directory)")
    a = ap.parse_args()
    script_dir = a.script_dir or (os.path.dirname(os.path.abspath(a.record)) if a.record else None)
    return serve(Server((a.host, a.port), tls_context(a.cert, a.key), a.record, script_dir))


if __name__ == "__main__":
    sys.exit(main())
