#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted stand-in for a stateless MCP server (Streamable HTTP, JSON answers), over HTTPS.

It answers JSON-RPC 2.0 tools/call requests from fixed rules, so tests can check what
brokerd forwards and how it treats what comes back. python3 stdlib only.

    fake_mcp.py --cert server.pem --key server.key [--port 0] [--host 127.0.0.1]
                [--path /mcp] [--record FILE]

With --port 0 it picks a free port. The first stdout line is always "PORT <n>", printed
once the socket listens. Certificates: tests/fakes/make-ca.sh.

Every request (any method, any path) is appended to --record as one JSON line {"method",
"path", "headers": {lowercase name: value}, "body": parsed JSON or null, "raw": the body
text}, flushed at once, so a test can assert what arrived (or that nothing did).

A POST to --path with a JSON-RPC request is answered by the tool it calls (params.name):
  echo       result {"content":[{"type":"text","text": <arguments as JSON text>}]}
  whoami     result text: the Authorization header that arrived (to check the bearer)
  reflect    result text: the bearer credential, encoded as arguments.enc says (a name
             of keyforms.FORMS, default raw; or escaped: \\u-escaped in the JSON text; or
             json-text: inside a JSON document that is the text); with arguments.decoy
             true, keyforms.DECOY instead of the bearer; with arguments.sse true, the
             answer as one server-sent event
  say        result text: arguments.text exactly; with arguments.escaped true every
             character of it is \\u-escaped in the JSON text
  mask       result text that only looks like a key ("sk-" prefix, "sk-...<last 4>")
  session    an echo answer that also carries Mcp-Session-Id and Set-Cookie headers
  sse        the answer as text/event-stream (one SSE event); arguments.events N > 1 sends
             N events, arguments.type an event type other than message
  html       the answer with Content-Type text/html
  redirect   302 to another path of this server
  status     HTTP status arguments.code with a JSON-RPC error body
  rpcerror   a JSON-RPC error with free-form "data"
  wrongid    a result for another id
  big        result text of arguments.n bytes
  sleep      wait arguments.ms milliseconds, then echo
  notjson    Content-Type application/json, body that is not JSON
Any other method or tool: a JSON-RPC error -32601 (brokerd should never forward those).
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler

import keyforms
from https_fake import RecordingTLSServer, argument_parser, serve, tls_context

BODY_MAX = 8 * 1024 * 1024
BIG_MAX = 16 * 1024 * 1024
SLEEP_MAX_MS = 600_000


def escaped_answer(rid, text):
    """A JSON-RPC answer whose text is written with a \\u escape for every character."""
    esc = "".join(f"\\u{ord(c):04x}" for c in text)
    return ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}'
            % (json.dumps(rid), esc)).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-mcp/1"

    def log_message(self, fmt, *args):
        pass

    def send_body(self, status, data, ctype="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def rpc(self, rid, result=None, error=None, sse=False, **kw):
        msg = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        if sse:
            # One event, as a Streamable HTTP server answers a single request.
            return self.send_body(kw.pop("status", 200), f"event: message\ndata: {json.dumps(msg)}\n\n".encode(),
                                  ctype="text/event-stream", **kw)
        self.send_body(kw.pop("status", 200), json.dumps(msg).encode(), **kw)

    def do_POST(self):
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > BODY_MAX:
            self.close_connection = True
            return self.send_body(400, b'{"error":"bad length"}')
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.server.record({"method": "POST", "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body, "raw": raw.decode("utf-8", "replace"), "time": time.time()})
        if self.path != self.server.api_path:
            return self.send_body(404, b'{"error":"not found"}')
        if not isinstance(body, dict):
            return self.send_body(400, b'{"error":"not a JSON-RPC request"}')
        rid = body.get("id")
        params = body.get("params") if isinstance(body.get("params"), dict) else {}
        args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        tool = params.get("name")
        if body.get("method") != "tools/call":
            return self.rpc(rid, error={"code": -32601, "message": "method not found"})
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:] if auth.startswith("Bearer ") else ""

        def text(t):
            return {"content": [{"type": "text", "text": t}], "isError": False}

        if tool == "echo":
            return self.rpc(rid, text(json.dumps(args, sort_keys=True)))
        if tool == "whoami":
            return self.rpc(rid, text(auth))
        if tool == "reflect":
            enc = args.get("enc", "raw")
            key = keyforms.DECOY if args.get("decoy") else bearer
            sse = bool(args.get("sse"))
            if enc == "escaped":
                body = escaped_answer(rid, "key " + key)
                if sse:
                    return self.send_body(200, b"event: message\ndata: " + body + b"\n\n", ctype="text/event-stream")
                return self.send_body(200, body)
            if enc == "json-text":
                return self.rpc(rid, text(json.dumps({"seen": {"authorization": "Bearer " + key}})), sse=sse)
            if enc not in keyforms.FORMS:
                return self.rpc(rid, error={"code": -32602, "message": "unknown encoding"})
            return self.rpc(rid, text("the key is " + keyforms.encode(key, enc)), sse=sse)
        if tool == "say":
            said = str(args.get("text", ""))
            if args.get("escaped"):
                return self.send_body(200, escaped_answer(rid, said))
            return self.rpc(rid, text(said))
        if tool == "mask":
            return self.rpc(rid, text(f"keys look like sk-... ; yours ends sk-...{bearer[-4:]}; sk-proj-example"))
        if tool == "session":
            return self.rpc(rid, text("with session"), headers=(("Mcp-Session-Id", "fake-session-1"),
                                                                 ("Set-Cookie", "sid=fake-cookie; Secure"),
                                                                 ("X-Upstream-Detail", "internal")))
        if tool == "sse":
            event = json.dumps({"jsonrpc": "2.0", "id": rid, "result": text("over sse")})
            kind = str(args.get("type", "message"))
            n = max(1, min(int(args.get("events", 1)), 8))
            return self.send_body(200, f"event: {kind}\ndata: {event}\n\n".encode() * n, ctype="text/event-stream")
        if tool == "html":
            return self.send_body(200, json.dumps({"jsonrpc": "2.0", "id": rid, "result": text("html")}).encode(),
                                  ctype="text/html")
        if tool == "redirect":
            return self.rpc(rid, text("redirected"), status=302,
                            headers=(("Location", f"https://localhost:{self.server.server_address[1]}/elsewhere"),))
        if tool == "status":
            code = int(args.get("code", 500))
            return self.rpc(rid, error={"code": -32000, "message": "scripted status"}, status=code)
        if tool == "rpcerror":
            return self.rpc(rid, error={"code": -32000, "message": "tool failed", "data": {"trace": "internal"}})
        if tool == "wrongid":
            return self.rpc(f"not-{rid}", text("wrong id"))
        if tool == "big":
            return self.rpc(rid, text("x" * min(int(args.get("n", 0)), BIG_MAX)))
        if tool == "sleep":
            time.sleep(min(int(args.get("ms", 0)), SLEEP_MAX_MS) / 1000.0)
            return self.rpc(rid, text("slept"))
        if tool == "notjson":
            return self.send_body(200, b"{this is not json")
        return self.rpc(rid, error={"code": -32601, "message": "unknown tool"})

    def other(self):
        self.server.record({"method": self.command, "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": None, "raw": "", "time": time.time()})
        self.send_body(405, b'{"error":"method not allowed"}')

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = other


class Server(RecordingTLSServer):
    def __init__(self, addr, ctx, api_path, record_path):
        super().__init__(addr, Handler, ctx, api_path, record_path)


def main():
    a = argument_parser(__doc__.splitlines()[0], "/mcp").parse_args()
    return serve(Server((a.host, a.port), tls_context(a.cert, a.key), a.path, a.record))


if __name__ == "__main__":
    sys.exit(main())
