#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted stand-in for an OpenAI-compatible Chat Completions endpoint, over HTTPS.

It is not a model: it answers from the fixed rules below, at once, so tests and the demo
can run a whole turn (worker -> broker -> here) without a provider. python3 stdlib only.

    fake_model.py --cert server.pem --key server.key [--port 0] [--host 127.0.0.1]
                  [--path /v1/chat/completions] [--record FILE]

With --port 0 it picks a free port. The first stdout line is always "PORT <n>", printed
once the socket listens. Make a certificate with tests/fakes/make-ca.sh.

Only POST to --path is served (anything else: 404/405). Every request, served or not, is
appended to --record as one JSON line {"method", "path", "headers": {lowercase name:
value}, "rawHeaders": [[name, value]...], "body": parsed JSON or null, "bodyError"?,
"conn": N, "connRequest": M, "clientPort": P}, flushed at once, so a test can assert which
Authorization value arrived, and which requests shared a connection (conn counts the
server's TLS connections from 1, connRequest the requests on one from 1).

Rules, applied to the conversation in the request body's "messages":

  After tool results (the last message has role "tool"):
    memory_set answered          -> "I will remember that."
    memory_get answered          -> "You asked me to remember: <value in the tool result>"
                                    (or "... nothing (<error>)" when the result is an error)
    "#loop" in the last user msg -> the same tool calls again (to exhaust call budgets)
    anything else                -> "tool results: <the results joined with ' | '>"
  Otherwise, from the last user message (matched anywhere in it, case-insensitive):
    "#status CODE"   answer with HTTP status CODE and an error body
    "#sleep MS"      wait MS milliseconds, then apply the remaining rules
    "#reflect [FORM] [decoy]"
                     put the bearer key that arrived, in FORM (default raw; the names of
                     keyforms.FORMS), into the content, to exercise the broker's reflection
                     filter; with "decoy", keyforms.DECOY in that form instead
    "#big N"         content of N bytes ("x" repeated)
    "#tools N [NAME]" N calls of tool NAME (default "no_such_tool") with {} arguments
    "what do you remember" or "recall"
                     a memory_get {"scope":"speaker","key":"note"} tool call
    "remember <X>"   a memory_set {"scope":"speaker","key":"note","value":"<X>"} tool call
                     (a leading "that " is dropped from X)
    anything else    "echo: <the last user message>"

Upstream misbehaviour (checked before every other rule): "#upstream WORD" in the last user
message answers with redirect (302 with Location), html / sse (a completion under that
Content-Type), errorobj (200 with an "error" member), emptychoices / nochoices, notjson,
headers (a completion plus Set-Cookie, Mcp-Session-Id and X-Upstream-Detail), mask (text
that only looks like a key: "sk-", "sk-...<last 4>"), or the bearer key reflected as
b64url, b64shift (base64 at another byte alignment) or escaped (\\u escapes in the JSON text).

Connection behaviour (checked first, on any path): "#conn WORD" in the last user message:
hangup (read the request, close the connection without an answer), trailing (a completion,
then the bytes of a second, unasked answer on the same connection), partial MS (the status
line, headers and half the body, then MS ms of silence, then close), closeafter (a
completion, then close the connection, without a Connection: close header, as a server
closing an idle keep-alive connection does).

Script mode (a separate path, checked before the conversation rules): "#script NAME" in the last
user message (NAME [a-z0-9_-]{1,64}) replays canned answers from SCRIPT_DIR/script-NAME.json
(SCRIPT_DIR: --script-dir, else the --record file's directory), a JSON array whose entries
are {"content": str|null, "tool_calls": [...]?} (sent as the assistant message, tool calls
verbatim, so a test can send odd ids or names), {"status": CODE}, or {"completion": ANY}
(ANY sent verbatim as the whole 200 JSON body, so a test can answer in the shape another
server uses: object arguments, content parts, odd finish reasons). The n-th request naming
NAME gets entry n (counted per NAME since start); past the end, the last entry repeats. A
missing or unreadable file is answered with status 500.
"""
import base64
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import keyforms
from https_fake import RecordingTLSServer, argument_parser, serve, tls_context

BODY_MAX = 8 * 1024 * 1024  # larger than the broker ever sends (256 KiB)
BIG_MAX = 64 * 1024 * 1024
SLEEP_MAX_MS = 600_000


def text_of(content):
    """A message's content as text (string content, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_text(messages):
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return text_of(m.get("content"))
    return ""


def pending_tool_calls(messages):
    """The trailing tool results and the assistant tool calls they answer."""
    results = []
    i = len(messages) - 1
    while i >= 0 and isinstance(messages[i], dict) and messages[i].get("role") == "tool":
        results.insert(0, messages[i])
        i -= 1
    calls = []
    if i >= 0 and isinstance(messages[i], dict):
        calls = messages[i].get("tool_calls") or []
    return calls, results


def remembered_value(result_text):
    """Pull the stored value out of a memory_get result, whatever shape the worker gives it."""
    try:
        data = json.loads(result_text)
    except ValueError:
        return result_text
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        if isinstance(data.get("error"), str):
            return f"nothing ({data['error']})"
        if isinstance(data.get("value"), str):
            return data["value"]
        for key in ("entries", "notes", "memory"):
            entries = data.get(key)
            if isinstance(entries, dict) and isinstance(entries.get("note"), str):
                return entries["note"]
            if isinstance(entries, list):
                for e in entries:
                    if isinstance(e, dict) and e.get("key") == "note" and isinstance(e.get("value"), str):
                        return e["value"]
        if isinstance(data.get("note"), str):
            return data["note"]
    return result_text


class Scripted(Exception):
    """An HTTP error answer chosen by a #status directive."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class Verbatim(Exception):
    """A whole answer body chosen by a script entry's "completion"."""

    def __init__(self, body):
        super().__init__("verbatim")
        self.body = body


class Rules:
    def __init__(self):
        self.lock = threading.Lock()
        self.counter = 0
        self.script_dir = None  # script mode; see the module docstring
        self.script_calls = {}

    def scripted(self, name):
        """The next canned answer of script NAME: (content, tool_calls or None); raises
        Scripted for a status entry, Verbatim for a completion entry."""
        with self.lock:
            n = self.script_calls.get(name, 0)
            self.script_calls[name] = n + 1
        try:
            with open(os.path.join(self.script_dir or ".", f"script-{name}.json"), encoding="utf-8") as f:
                entries = json.load(f)
            entry = entries[min(n, len(entries) - 1)]
        except (OSError, ValueError, TypeError, IndexError, KeyError):
            raise Scripted(500)
        if "status" in entry:
            raise Scripted(int(entry["status"]))
        if "completion" in entry:
            raise Verbatim(entry["completion"])
        return entry.get("content"), entry.get("tool_calls")

    def call_id(self):
        with self.lock:
            self.counter += 1
            return f"call_fake_{self.counter}"

    def tool_call(self, name, args):
        return {"id": self.call_id(), "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}

    def answer(self, body, bearer):
        """The assistant message for a request body: (content, tool_calls or None)."""
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            raise Scripted(400)
        user = last_user_text(messages)
        low = user.lower()
        m = re.search(r"#script\s+([a-z0-9_-]{1,64})", low)
        if m:
            return self.scripted(m.group(1))
        calls, results = pending_tool_calls(messages)
        if results:
            names = {c.get("id"): (c.get("function") or {}).get("name") for c in calls if isinstance(c, dict)}
            texts = [text_of(r.get("content")) for r in results]
            answered = [names.get(r.get("tool_call_id")) for r in results]
            if "#loop" in low:
                return None, [self.tool_call((c.get("function") or {}).get("name", "no_such_tool"), {})
                              for c in calls if isinstance(c, dict)]
            if answered == ["memory_set"]:
                return "I will remember that.", None
            if answered == ["memory_get"]:
                return "You asked me to remember: " + remembered_value(texts[0]), None
            return "tool results: " + " | ".join(texts), None

        m = re.search(r"#status\s+(\d{3})", low)
        if m:
            raise Scripted(int(m.group(1)))
        m = re.search(r"#sleep\s+(\d+)", low)
        if m:
            time.sleep(min(int(m.group(1)), SLEEP_MAX_MS) / 1000.0)
        m = re.search(r"#reflect(?:\s+([a-z0-9-]+))?(\s+decoy)?", low)
        if m:
            form = m.group(1) or "raw"
            if form not in keyforms.FORMS:
                raise Scripted(400)
            shown = keyforms.encode(keyforms.DECOY if m.group(2) else bearer, form)
            return f"the key I was given is {shown}", None
        m = re.search(r"#big\s+(\d+)", low)
        if m:
            return "x" * min(int(m.group(1)), BIG_MAX), None
        m = re.search(r"#tools\s+(\d+)(?:\s+([a-z][a-z0-9_]*))?", low)
        if m:
            name = m.group(2) or "no_such_tool"
            return None, [self.tool_call(name, {}) for _ in range(min(int(m.group(1)), 256))]
        if "what do you remember" in low or re.search(r"\brecall\b", low):
            return None, [self.tool_call("memory_get", {"scope": "speaker", "key": "note"})]
        m = re.search(r"\bremember\s+(.+)", user, re.IGNORECASE | re.DOTALL)
        if m:
            value = re.sub(r"^that\s+", "", m.group(1).strip(), flags=re.IGNORECASE)
            return None, [self.tool_call("memory_set", {"scope": "speaker", "key": "note", "value": value})]
        return "echo: " + user, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"

    def log_message(self, fmt, *args):
        pass  # the record file is the log; keep test output quiet

    def setup(self):
        super().setup()
        self.conn_id = self.server.next_conn_id()
        self.conn_requests = 0

    def record(self, body, body_error=None):
        self.conn_requests += 1
        entry = {"method": self.command, "path": self.path,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "rawHeaders": [[k, v] for k, v in self.headers.items()],
                 "body": body, "time": time.time(), "conn": self.conn_id, "connRequest": self.conn_requests,
                 "clientPort": self.client_address[1] if isinstance(self.client_address, tuple) else None}
        if body_error:
            entry["bodyError"] = body_error
        self.server.record(entry)

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > BODY_MAX:
            self.close_connection = True
            return None, "bad or too large Content-Length"
        raw = self.rfile.read(n)
        try:
            return json.loads(raw), None
        except ValueError:
            return None, "body is not JSON"

    def do_POST(self):
        body, err = self.read_body()
        self.record(body, err)
        if self.path != self.server.api_path:
            return self.send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
        if err:
            return self.send_json(400, {"error": {"message": err, "type": "invalid_request_error"}})
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:] if auth.startswith("Bearer ") else ""
        messages = body.get("messages") if isinstance(body, dict) else None
        low = last_user_text(messages).lower() if isinstance(messages, list) else ""
        m = re.search(r"#conn\s+([a-z]+)(?:\s+(\d+))?", low)
        if m:
            return self.connection_behaviour(m.group(1), int(m.group(2) or 0), body)
        m = re.search(r"#upstream\s+([a-z0-9]+)", low)
        if m:
            return self.misbehave(m.group(1), bearer)
        try:
            content, tool_calls = self.server.rules.answer(body, bearer)
        except Scripted as s:
            return self.send_json(s.status, {"error": {"message": "scripted failure", "type": "fake_model"}})
        except Verbatim as v:
            return self.send_json(200, v.body)
        message = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        self.send_json(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def completion(self, content):
        return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake-model",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}]}).encode()

    def connection_behaviour(self, what, ms, body):
        """The "#conn WORD" directives (module docstring)."""
        if what == "hangup":
            self.close_connection = True
            return None
        data = self.completion(f"conn {what} on connection {self.conn_id}")
        if what == "partial":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            time.sleep(min(ms, SLEEP_MAX_MS) / 1000.0)
            self.close_connection = True
            return None
        self.send_raw(200, data, "application/json")
        if what in ("trailing", "trailinglate"):
            smuggled = self.completion("smuggled: an answer nobody asked for")
            if what == "trailinglate":
                self.wfile.flush()
                time.sleep(0.1)  # after the client has read its whole answer
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(smuggled)).encode() + b"\r\n\r\n" + smuggled)
        elif what == "closeafter":
            self.close_connection = True
        return None

    def misbehave(self, what, bearer):
        """The "#upstream WORD" directives (module docstring): answers a broker must refuse,
        or pass without leaking anything but the rebuilt completion."""
        ok = {"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake-model",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "upstream " + what},
                           "finish_reason": "stop"}]}
        extra, ctype, status = [], "application/json", 200
        if what == "redirect":
            status = 302
            extra.append(("Location", f"https://localhost:{self.server.server_address[1]}/elsewhere"))
        elif what == "html":
            ctype = "text/html"
        elif what == "sse":
            ctype = "text/event-stream"
        elif what == "errorobj":
            ok["error"] = {"message": "quota exceeded", "type": "insufficient_quota"}
        elif what == "emptychoices":
            ok["choices"] = []
        elif what == "nochoices":
            del ok["choices"]
        elif what == "headers":
            extra += [("Set-Cookie", "session=upstream-cookie; Secure"), ("X-Upstream-Detail", "internal"),
                      ("Mcp-Session-Id", "upstream-session")]
        elif what == "mask":
            ok["choices"][0]["message"]["content"] = (
                f"API keys start with sk- and look like sk-...{bearer[-4:]}; try sk-proj-example")
        elif what == "b64url":
            enc = base64.urlsafe_b64encode(bearer.encode()).decode().rstrip("=")
            ok["choices"][0]["message"]["content"] = "key " + enc
        elif what == "b64shift":
            enc = base64.b64encode(b"ab" + bearer.encode()).decode()
            ok["choices"][0]["message"]["content"] = "key " + enc
        elif what == "escaped":
            escaped = "".join(f"\\u{ord(c):04x}" for c in bearer)
            data = ('{"choices":[{"index":0,"message":{"role":"assistant","content":"key %s"},'
                    '"finish_reason":"stop"}]}' % escaped).encode()
            return self.send_raw(200, data, ctype)
        elif what == "notjson":
            return self.send_raw(200, b"{not json", ctype)
        data = json.dumps(ok).encode()
        return self.send_raw(status, data, ctype, extra)

    def send_raw(self, status, data, ctype, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def other(self):
        body, err = (None, None)
        if self.headers.get("Content-Length"):
            body, err = self.read_body()
        self.record(body, err)
        self.send_json(405 if self.path == self.server.api_path else 404, {"error": {"message": "no"}})

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = other


class Server(RecordingTLSServer):
    def __init__(self, addr, ctx, api_path, record_path):
        super().__init__(addr, Handler, ctx, api_path, record_path)
        self.rules = Rules()
        self.conn_lock = threading.Lock()
        self.conns = 0

    def next_conn_id(self):
        with self.conn_lock:
            self.conns += 1
            return self.conns


def main():
    ap = argument_parser(__doc__.splitlines()[0], "/v1/chat/completions")
    ap.add_argument("--script-dir", help="where script mode finds script-NAME.json (default: the record's directory)")
    a = ap.parse_args()
    srv = Server((a.host, a.port), tls_context(a.cert, a.key), a.path, a.record)
    srv.rules.script_dir = a.script_dir or (os.path.dirname(os.path.abspath(a.record)) if a.record else None)
    return serve(srv)


if __name__ == "__main__":
    sys.exit(main())
