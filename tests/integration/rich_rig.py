# SPDX-License-Identifier: Apache-2.0
"""Rigs for rich mode (DESIGN.md 8.5; issue 16): the scripted worker image, the streaming
Anthropic fake, a worker-side HTTP client with an SSE parser, and three ways to run a rich
channel.

    env = Environment.prepare()
    tag = richworker_image(env)              # tests/images/richworker.c, built once per env

    # 1. The worker alone, against a Python stand-in for brokerd's rich listener (smoke tests
    #    of the fixtures themselves; no daemon):
    with StandIn(env, tmpdir) as st:         # stand-in broker + fake_anthropic + a workspace
        st.start_worker(tag)                 # a real sealed container on the stand-in socket
        st.queue_turn("hello #rw parallel 3")
        rep = st.wait_reply()                # the worker's report, parsed
        st.requests("/anthropic/v1/messages")

    # 2. brokerd alone (RB's rich listener), this process standing in for runnerd:
    with RichBrokerRig(env) as rig:          # broker_rig.BrokerRig + fake_anthropic + "rich" config
        ch = rig.bind("guild-1/rich", "default")     # RICH_BIND with a listening socket
        w = WorkerClient(ch.path)                     # the worker side from Python, or:
        ch.start_worker(tag)                          # the real richworker container on it
        ch.wait_ready()                               # RICH_WAIT_READY -> RICH_READY fields
        t = ch.turn("hello")                          # BROKER_RICH_TURN with a sealed memfd
        status, calls, reply = t.done()               # BROKER_RICH_DONE, reply memfd checked
        rig.anthropic.requests()                      # what the upstream got

    # 3. The whole installation (RA's statd/runnerd, the CLI):
    with RichSuite(env) as s:
        s.worker_config("chan", {"ready": "none"})   # before the container starts
        s.rich("chan", "default")
        p, rep = s.say("chan", "hi #rw files 2 10")

What the worker reports and how to steer it: tests/images/richworker.c (its DIRECTIVES table).
What the upstream answers and records: tests/fakes/fake_anthropic.py.

The daemon-link rows of rich mode (RICH_BIND, BROKER_RICH_TURN, ...: helper RB's proto 3) come
from rtsproto.py; until they are there, the brokerd rig raises HarnessError naming what is
missing.
"""
import base64
import fcntl
import http.client
import json
import os
import queue
import secrets
import select
import shutil
import socket
import socketserver
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler

import rtsproto
from broker_rig import BrokerRig, read_jsonl
from harness import SRCDIR, HarnessError, Suite, docker, unique_tag, wait_until

# The placeholders richworker sends (richworker.c): on the Anthropic routes an
# sk-ant-api03-shaped key (RW_DUMMY_KEY: an SDK keeps to its API-key dialect with it), on the
# worker, tool and MCP routes the sealed worker's bearer (RW_WORKER_DUMMY_KEY = RTS_DUMMY_KEY).
RICH_DUMMY_KEY = "sk-ant-api03-roundtable-sandbox-dummy-key"
WORKER_DUMMY_KEY = rtsproto.DUMMY_KEY
WORKER_CONFIG = ".richworker.json"
MODEL = "claude-fake-4-6"
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL


# ---- server-sent events ------------------------------------------------------------------

class SSEParser:
    """The event-stream framing of the WHATWG HTML standard ("event stream interpretation"),
    as much as Anthropic's streams use: lines end in LF, CRLF or CR; "event:" sets the name,
    "data:" lines are joined with LF, a blank line dispatches (an event with no data is
    dropped), lines starting with ":" are comments, one space after the colon is dropped.
    feed() takes bytes as they arrive (a line may span calls) and returns the events
    completed, as (name, data) with name "message" when none was given."""

    def __init__(self):
        self.buf = b""
        self.name = ""
        self.data = []

    def feed(self, chunk):
        out = []
        self.buf += chunk
        while True:
            i = min((k for k in (self.buf.find(b"\n"), self.buf.find(b"\r")) if k >= 0), default=-1)
            if i < 0:
                return out
            line, sep = self.buf[:i], self.buf[i:i + 1]
            rest = self.buf[i + 1:]
            if sep == b"\r":
                if not rest:  # a CR at the end of the chunk: wait to see whether LF follows
                    return out
                if rest.startswith(b"\n"):
                    rest = rest[1:]
            self.buf = rest
            self._line(line.decode("utf-8"), out)

    def _line(self, line, out):
        if line == "":
            if self.data:
                out.append((self.name or "message", "\n".join(self.data)))
            self.name, self.data = "", []
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self.name = value
        elif field == "data":
            self.data.append(value)


def parse_sse(data):
    """All complete events in data (bytes) as [(name, parsed JSON or the raw string)]."""
    out = []
    for name, d in SSEParser().feed(data):
        try:
            out.append((name, json.loads(d)))
        except ValueError:
            out.append((name, d))
    return out


# ---- the worker side from Python ---------------------------------------------------------

class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix socket: the real client-side HTTP/1.1 parser for answers."""

    def __init__(self, path, timeout=60):
        super().__init__("broker", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


# The Anthropic SDK's headers as Pi sends them (helpers' pi-notes.md section 4), with the
# API-key placeholder.
SDK_HEADERS = [
    ("connection", "keep-alive"), ("content-type", "application/json"), ("accept", "application/json"),
    ("accept-language", "*"), ("sec-fetch-mode", "cors"), ("accept-encoding", "gzip, deflate"),
    ("anthropic-version", "2023-06-01"), ("anthropic-dangerous-direct-browser-access", "true"),
    ("x-stainless-retry-count", "0"), ("x-stainless-timeout", "600"), ("x-stainless-lang", "js"),
    ("x-stainless-package-version", "0.91.1"), ("x-stainless-os", "Linux"), ("x-stainless-arch", "x64"),
    ("x-stainless-runtime", "node"), ("x-stainless-runtime-version", "v20.20.2"),
    ("x-api-key", RICH_DUMMY_KEY), ("user-agent", "Anthropic/JS 0.91.1"),
]


class Streamed:
    """One answer read as it arrives: status, headers, body, the SSE events, and times
    (time.monotonic()) of the call's start (before connecting), the request's last byte
    sent, the answer's head, the first body byte (first streamed byte) and the end."""

    def __init__(self):
        self.status = None
        self.headers = []
        self.body = b""
        self.events = []
        self.t_start = time.monotonic()
        self.t_sent = self.t_head = self.t_first_body = self.t_end = None
        self.error = None

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def text(self):
        """The streamed text (text_delta pieces joined)."""
        return "".join(d["delta"].get("text", "") for n, d in self.events
                       if n == "content_block_delta" and isinstance(d, dict))

    @property
    def names(self):
        return [n for n, _ in self.events]


class WorkerClient:
    """The rich worker protocol from Python, on the channel's broker socket path."""

    def __init__(self, path, dummy=WORKER_DUMMY_KEY):
        self.path = path
        self.dummy = dummy

    def call(self, method, target, body=b"", headers=None, timeout=60, stream_cb=None):
        """One request on a new connection; returns a Streamed. headers: [(name, value)]
        (default: Host and the worker's Authorization/Content-Type). stream_cb(chunk) sees
        the body as it arrives."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        if headers is None:
            headers = [("Authorization", "Bearer " + self.dummy), ("Content-Type", "application/json")]
        out = Streamed()
        conn = UnixHTTPConnection(self.path, timeout=timeout)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", "broker")
            for k, v in headers:
                conn.putheader(k, v)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            out.t_sent = time.monotonic()
            resp = conn.getresponse()
            out.t_head = time.monotonic()
            out.status = resp.status
            out.headers = resp.getheaders()
            parser = SSEParser()
            is_sse = (resp.getheader("content-type") or "").startswith("text/event-stream")
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                if out.t_first_body is None:
                    out.t_first_body = time.monotonic()
                out.body += chunk
                if stream_cb:
                    stream_cb(chunk)
                if is_sse:
                    for name, d in parser.feed(chunk):
                        try:
                            out.events.append((name, json.loads(d)))
                        except ValueError:
                            out.events.append((name, d))
        except (OSError, http.client.HTTPException) as e:
            out.error = e
        finally:
            out.t_end = time.monotonic()
            conn.close()
        return out

    def post(self, target, body=b"", **kw):
        return self.call("POST", target, body, **kw)

    def ready(self, capabilities=(True, True), private_history=False, body=None):
        if body is None:
            body = {"capabilities": {"privateTo": capabilities[0], "readerRecords": capabilities[1]},
                    "privateHistory": private_history}
        return self.post("/worker/ready", body)

    def next(self, timeout=40):
        return self.post("/worker/next", b"", timeout=timeout)

    def result(self, turn_id, text, files=()):
        return self.post("/worker/result", {"turnId": turn_id, "text": text, "files": list(files)})

    def messages(self, body, headers=None, target="/anthropic/v1/messages", timeout=120, stream_cb=None):
        """A model call with the SDK's headers (or headers), body a dict."""
        return self.call("POST", target, body, headers=headers or SDK_HEADERS, timeout=timeout, stream_cb=stream_cb)


def messages_body(text, model=MODEL, max_tokens=1024, stream=True, **extra):
    body = {"model": model, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
    body.update(extra)
    return body


# ---- the fixtures' processes -------------------------------------------------------------

class FakeAnthropic:
    """tests/fakes/fake_anthropic.py with the test CA in cadir, on 127.0.0.1."""

    def __init__(self, cadir, record, logfile):
        self.record = record
        self.cadir = cadir
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fake_anthropic.py"), "--port", "0",
             "--cert", os.path.join(cadir, "server.pem"), "--key", os.path.join(cadir, "server.key"),
             "--record", record],
            stdout=subprocess.PIPE, stderr=logfile, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise HarnessError("the fake Anthropic endpoint did not start")
        self.port = int(line.split()[1])
        self.url = f"https://localhost:{self.port}"  # rich.upstream: the broker appends /v1/...

    def records(self):
        return read_jsonl(self.record)

    def requests(self):
        """Every request received so far, oldest first (fields: fake_anthropic.py)."""
        return [r for r in self.records() if r.get("kind") == "request"]

    def answers(self):
        return [r for r in self.records() if r.get("kind") == "answer"]

    def count(self):
        return len(self.requests())

    def ssl_context(self):
        ctx = ssl.create_default_context(cafile=os.path.join(self.cadir, "ca.pem"))
        return ctx

    def direct(self, body, headers=None, path="/v1/messages", timeout=60):
        """The same call straight to the fake over TLS (a baseline): a Streamed."""
        out = Streamed()
        conn = http.client.HTTPSConnection("localhost", self.port, context=self.ssl_context(), timeout=timeout)
        data = json.dumps(body).encode()
        try:
            conn.request("POST", path, data, dict(headers or {"content-type": "application/json",
                                                                "anthropic-version": "2023-06-01",
                                                                "authorization": "Bearer direct-token"}))
            out.t_sent = time.monotonic()
            resp = conn.getresponse()
            out.t_head = time.monotonic()
            out.status, out.headers = resp.status, resp.getheaders()
            parser = SSEParser()
            while chunk := resp.read1(65536):
                if out.t_first_body is None:
                    out.t_first_body = time.monotonic()
                out.body += chunk
                for name, d in parser.feed(chunk):
                    out.events.append((name, json.loads(d)))
        finally:
            out.t_end = time.monotonic()
            conn.close()
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


def make_ca(cadir):
    subprocess.run([os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), cadir], check=True, capture_output=True)


def richworker_image(env):
    """Build (once per Environment, under a unique tag removed by env.cleanup()) the image of
    tests/images/richworker.c; returns its tag."""
    tag = getattr(env, "_richworker_tag", None)
    if tag:
        return tag
    env.require_docker()
    binary = os.path.join(env.builddir, "tests", "images", "richworker")
    p = subprocess.run(["make", "-C", env.builddir, "tests/images/richworker"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0 or not os.access(binary, os.X_OK):
        raise HarnessError(f"cannot build richworker: {p.stderr.strip()[-2000:]}")
    ctx = tempfile.mkdtemp(prefix="rts-richworker-", dir="/tmp")
    try:
        shutil.copy2(binary, os.path.join(ctx, "richworker"))
        shutil.copy2(os.path.join(SRCDIR, "tests", "images", "Dockerfile.richworker"), os.path.join(ctx, "Dockerfile"))
        tag = unique_tag("richworker")
        env._build(ctx, tag, "richworker image")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    env._richworker_tag = tag
    return tag


SEALED_RUN = ("--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
              "--memory", "1536m", "--memory-swap", "1536m", "--cpus", "1", "--pids-limit", "256",
              "--tmpfs", "/tmp:rw,nosuid,nodev,size=512m")


class WorkerContainer:
    """A richworker container started the way runnerd starts a rich channel's (issue 16:
    no network, read-only root, no capabilities, no-new-privileges, the service uid, the
    limits; the workspace and the broker directory the only mounts). Removed by stop()."""

    def __init__(self, env, image, broker_dir, workspace, env_vars=None):
        self.name = f"rts-richworker-test-{os.getpid()}-{secrets.token_hex(4)}"
        args = ["run", "-d", "--name", self.name, *SEALED_RUN, "--user", f"{env.uid}:{env.gid}",
                "-v", f"{workspace}:/workspace", "-v", f"{broker_dir}:/run/broker:ro",
                "--label", "io.roundtable-sandbox.test=richworker"]
        for k, v in (env_vars or {}).items():
            args += ["-e", f"{k}={v}"]
        docker(*args, image)

    def logs(self):
        p = docker("logs", self.name, check=False, timeout=30)
        return p.stdout + p.stderr

    def log_records(self):
        out = []
        for line in self.logs().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def inspect(self):
        p = docker("inspect", self.name, check=False, timeout=30)
        return json.loads(p.stdout)[0] if p.returncode == 0 else None

    def running(self):
        i = self.inspect()
        return bool(i and i["State"]["Running"])

    def exit_code(self):
        i = self.inspect()
        return None if not i or i["State"]["Running"] else i["State"]["ExitCode"]

    def stop(self):
        docker("rm", "-f", self.name, check=False, timeout=60)


def write_worker_config(workspace, conf, uid, gid):
    """richworker's start-up file in a workspace (create the workspace 0700 for uid first)."""
    if not os.path.isdir(workspace):
        os.mkdir(workspace, 0o700)
        os.chown(workspace, uid, gid)
    path = os.path.join(workspace, WORKER_CONFIG)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(conf, f)
    os.chown(path, uid, gid)
    os.chmod(path, 0o644)
    return path


def reply_report(text):
    """The report richworker puts first in its reply text (big-result pads after it)."""
    obj, _ = json.JSONDecoder().raw_decode(text)
    return obj


def step(report, name, index=0):
    """The index-th step called name in a report."""
    found = [s for s in report["steps"] if s.get("do") == name]
    assert len(found) > index, f"no step {name!r} #{index} in {json.dumps(report)[:2000]}"
    return found[index]


# ---- 1. a stand-in for brokerd's rich listener ---------------------------------------------

class StandInServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False


class StandInHandler(BaseHTTPRequestHandler):
    """Worker routes answered like rich-design.md section 4 says, Anthropic routes forwarded
    to fake_anthropic with a test token, everything recorded. Not brokerd: no rule is
    enforced except what the smoke tests need to see the worker react (one idle long poll,
    a refusal of bad readiness and of an oversized reply before its body)."""

    protocol_version = "HTTP/1.1"
    timeout = 3.0  # a stalled request head is dropped after this (StreamRequestHandler)

    def log_message(self, fmt, *args):
        pass

    def address_string(self):
        return "worker"

    def answer(self, status, obj=None, ctype="application/json"):
        data = b"" if obj is None else (obj if isinstance(obj, bytes) else json.dumps(obj).encode())
        self.send_response(status)
        if data or status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if data:
            self.wfile.write(data)
        self.close_connection = True

    def read_body(self, entry):
        """Read the body; a stall of more than the stand-in's silence bound ends it."""
        n = int(self.headers.get("Content-Length") or 0)
        entry["contentLength"] = n
        self.connection.settimeout(self.server.owner.silence_s)
        raw = b""
        try:
            while len(raw) < n:
                chunk = self.rfile.read1(min(65536, n - len(raw)))
                if not chunk:
                    break
                raw += chunk
        except (socket.timeout, OSError):
            entry["silent"] = True
        finally:
            self.connection.settimeout(self.timeout)
        entry["bodyBytes"] = len(raw)
        entry["complete"] = len(raw) == n
        try:
            entry["body"] = json.loads(raw) if raw else None
        except ValueError:
            entry["body"] = None
        return raw

    def do_GET(self):
        entry = self.server.owner.record(self)
        self.answer(404, {"error": "not found"})
        entry["status"] = 404

    def do_POST(self):
        owner = self.server.owner
        entry = owner.record(self)
        path = self.path.partition("?")[0]
        if path == "/worker/result" and int(self.headers.get("Content-Length") or 0) > owner.result_max:
            entry["status"] = 413
            entry["refusedBeforeBody"] = True
            return self.answer(413, {"error": "too_large"})
        raw = self.read_body(entry)
        if entry.get("silent") or not entry["complete"]:
            entry["status"] = 0
            self.close_connection = True
            return
        try:
            if path == "/worker/ready":
                return self.ready(entry, raw)
            if path == "/worker/next":
                return self.next(entry)
            if path == "/worker/result":
                owner.results.put(entry["body"])
                entry["status"] = 200
                return self.answer(200, {})
            if path.startswith("/anthropic/"):
                return self.forward(entry, raw)
            if path.startswith("/tools/"):
                name = path[len("/tools/"):]
                ans = {"result": f"tool {name} ok"}
                if name.startswith("private"):
                    ans["privateTo"] = "principal-1001"
                entry["status"] = 200
                return self.answer(200, ans)
            if path.startswith("/mcp/"):
                body = entry["body"]
                if not isinstance(body, dict):
                    entry["status"] = 400
                    return self.answer(400, {"error": "batch"})
                if "id" not in body:
                    entry["status"] = 202
                    return self.answer(202)
                entry["status"] = 200
                return self.answer(200, {"jsonrpc": "2.0", "id": body["id"], "result": {}})
            if path == "/worker/compact":
                entry["status"] = 204
                return self.answer(204)
            entry["status"] = 404
            return self.answer(404, {"error": "not found"})
        finally:
            entry["t1"] = time.monotonic()

    def ready(self, entry, raw):
        body = entry["body"]
        caps = body.get("capabilities") if isinstance(body, dict) else None
        bad = isinstance(body, dict) and (
            caps is not None and (not isinstance(caps, dict) or any(not isinstance(v, bool) for v in caps.values()))
            or "privateHistory" in body and not isinstance(body["privateHistory"], bool))
        if raw and (body is None or bad):
            entry["status"] = 400
            return self.answer(400, {"error": "bad_request"})
        with self.server.owner.lock:
            self.server.owner.readies.append(body)
            self.server.owner.announced = True
        entry["status"] = 200
        return self.answer(200, {})

    def next(self, entry):
        owner = self.server.owner
        with owner.lock:
            if not owner.announced:
                entry["status"] = 409
                return self.answer(409, {"error": "not_ready"})
            if owner.idle_polls >= 1:
                entry["status"] = 429
                return self.answer(429, {"error": "busy"})
            owner.idle_polls += 1
        try:
            turn = owner.turns.get(timeout=owner.poll_s)
        except queue.Empty:
            turn = None
        finally:
            with owner.lock:
                owner.idle_polls -= 1
        if turn is not None and not self.peer_alive():
            # The worker gave up on this poll: keep the turn for the next one.
            with owner.turns.mutex:
                owner.turns.queue.appendleft(turn)
                owner.turns.not_empty.notify()
            entry["status"] = 0
            self.close_connection = True
            return None
        if turn is None:
            entry["status"] = 204
            return self.answer(204)
        entry["status"] = 200
        return self.answer(200, turn)

    def peer_alive(self):
        r, _, _ = select.select([self.connection], [], [], 0)
        if not r:
            return True
        try:
            return self.connection.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def forward(self, entry, raw):
        """To fake_anthropic over TLS with the test CA, streamed back chunk by chunk."""
        owner = self.server.owner
        with owner.lock:
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            conn = http.client.HTTPSConnection("localhost", owner.anthropic.port,
                                               context=owner.anthropic.ssl_context(), timeout=120)
            conn.request(self.command, self.path[len("/anthropic"):], raw,
                         {"content-type": "application/json", "anthropic-version": "2023-06-01",
                          "authorization": "Bearer " + owner.token})
            resp = conn.getresponse()
            entry["status"] = resp.status
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.getheader("content-type") or "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            while chunk := resp.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            conn.close()
        except OSError as e:
            entry["forwardError"] = str(e)
        finally:
            self.close_connection = True
            with owner.lock:
                owner.in_flight -= 1


class StandIn:
    """The stand-in broker on ROOT/broker/broker.sock, fake_anthropic, a workspace, and the
    worker container; every worker request is in .log (dicts: method, path, headers, body,
    bodyBytes, complete, status, t0/t1)."""

    def __init__(self, env, root=None, poll_s=2.0, silence_s=3.0, result_max=72 * 1024 * 1024,
                 worker_config=None):
        self.env = env
        self.root = root or tempfile.mkdtemp(prefix="rts-standin-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.poll_s, self.silence_s, self.result_max = poll_s, silence_s, result_max
        self.token = "sk-ant-oat01-standin-" + secrets.token_hex(16)
        self.lock = threading.Lock()
        self.log = []
        self.readies = []
        self.turns = queue.Queue()
        self.results = queue.Queue()
        self.idle_polls = 0
        self.announced = False  # /worker/next is refused (409) until the worker announces itself
        self.in_flight = self.max_in_flight = 0
        self.worker = None
        self.dirs = {k: os.path.join(self.root, k) for k in ("broker", "ws", "ca", "logs")}
        for k in self.dirs:
            os.mkdir(self.dirs[k])
        os.chmod(self.dirs["broker"], 0o755)
        os.chown(self.dirs["ws"], env.uid, env.gid)
        os.chmod(self.dirs["ws"], 0o700)
        make_ca(self.dirs["ca"])
        self._fake_log = open(os.path.join(self.dirs["logs"], "fake-anthropic.log"), "ab")
        self.anthropic = FakeAnthropic(self.dirs["ca"], os.path.join(self.dirs["logs"], "anthropic.jsonl"),
                                       self._fake_log)
        self.sock = os.path.join(self.dirs["broker"], "broker.sock")
        self._listen()
        if worker_config is not None:
            write_worker_config(self.dirs["ws"], worker_config, env.uid, env.gid)

    def _listen(self):
        self.server = StandInServer(self.sock, StandInHandler)
        self.server.owner = self
        os.chown(self.sock, self.env.uid, self.env.gid)
        os.chmod(self.sock, 0o600)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def restart_listener(self):
        """What a daemon restart does to the channel's socket: a new listener at the same path
        in the same directory, which knows no worker until it announces itself again."""
        self.server.shutdown()
        self.server.server_close()
        os.unlink(self.sock)
        with self.lock:
            self.announced = False
        self._listen()

    def record(self, handler):
        entry = {"method": handler.command, "path": handler.path,
                 "headers": [[k, v] for k, v in handler.headers.items()], "t0": time.monotonic()}
        with self.lock:
            self.log.append(entry)
        return entry

    def requests(self, path=None):
        with self.lock:
            return [dict(e) for e in self.log if path is None or e["path"].partition("?")[0] == path]

    def start_worker(self, image, env_vars=None):
        self.worker = WorkerContainer(self.env, image, self.dirs["broker"], self.dirs["ws"], env_vars)
        return self.worker

    def queue_turn(self, text, turn_id=None, **fields):
        """Hand the worker a turn input (rich-design.md section 3 plus brokerd's additions)."""
        turn = {"v": 1, "turnId": turn_id or secrets.token_hex(8),
                "speaker": {"id": "1001", "name": "Alice", "principalId": "principal-1001"},
                "text": text, "images": [], "attachments": [], "timeZone": "UTC", "now": "2026-01-01T00:00:00Z",
                "startFresh": False, "model": MODEL, "maxOutputTokens": 4096, "prompt": "You are a test.",
                "effort": "medium", "memory": {"text": "", "visibility": "shared"}, "tools": [],
                "requireCapabilities": False, "limits": {"maxCalls": 128, "turnMsLeft": 600000}}
        turn.update(fields)
        self.turns.put(turn)
        return turn["turnId"]

    def wait_result(self, timeout=60):
        """The next reply packet the worker posted (its JSON body)."""
        try:
            return self.results.get(timeout=timeout)
        except queue.Empty:
            logs = self.worker.logs()[-4000:] if self.worker else ""
            raise AssertionError(f"no reply packet within {timeout} s; worker log:\n{logs}") from None

    def wait_reply(self, timeout=60):
        return reply_report(self.wait_result(timeout)["text"])

    def turn(self, text, timeout=60, **fields):
        """queue_turn + wait_reply; checks the reply is for this turn."""
        tid = self.queue_turn(text, **fields)
        packet = self.wait_result(timeout)
        assert packet["turnId"] == tid, packet.get("turnId")
        return reply_report(packet["text"])

    def close(self):
        if self.worker:
            self.worker.stop()
            self.worker = None
        self.server.shutdown()
        self.server.server_close()
        self.anthropic.stop()
        self._fake_log.close()
        if os.environ.get("RTS_KEEP"):
            print(f"keeping {self.root}", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def add_rich_upstream(suite, defaults):
    """For a Suite about to write its config (its test CA made): start fake_anthropic on the
    CA, write the OAuth token file (0400, the service account's), and merge a "rich" key
    (defaults, then suite.rich_overrides) into the config overrides."""
    suite._logfiles.append(open(suite.log_path("fake-anthropic"), "ab"))
    suite.anthropic = FakeAnthropic(suite.dirs["ca"], os.path.join(suite.dirs["logs"], "anthropic.jsonl"),
                                    suite._logfiles[-1])
    suite.oauth_file = os.path.join(suite.dirs["etc"], "oauth-token")
    with open(os.open(suite.oauth_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(suite.oauth_token + "\n")
    os.chown(suite.oauth_file, suite.env.uid, suite.env.gid)
    os.chmod(suite.oauth_file, 0o400)
    rich = {"upstream": suite.anthropic.url, "oauthToken": {"file": suite.oauth_file},
            "effort": {"default": "medium"}, "turnTimeoutMs": 120000, "startTimeoutMs": 30000}
    rich.update(defaults)
    rich.update(suite.rich_overrides)
    suite.config_overrides = dict(suite.config_overrides, rich=rich)


# ---- 2. brokerd alone ----------------------------------------------------------------------

def sealed_memfd(data, name="rts-test", seals=SEALS):
    """A memfd holding data, sealed against every change (rich-design.md section 0), or
    with the seals given (0: none, for tests of an unsealed one)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def read_sealed(fd, max_bytes=80 * 1024 * 1024):
    """The bytes of a received memfd, after checking it is sealed and within max_bytes."""
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    assert seals & SEALS == SEALS, f"memfd seals {seals:#x}, want {SEALS:#x}"
    size = os.fstat(fd).st_size
    assert size <= max_bytes, f"memfd of {size} bytes"
    return os.pread(fd, size, 0) if size else b""


def _proto(name):
    v = getattr(rtsproto, name, None)
    if v is None:
        raise HarnessError(f"rtsproto.py has no {name}: the rich daemon-link rows (rich-design.md section 2) "
                           "are not there yet")
    return v


def monotonic_ms(after_ms=0):
    return int(time.monotonic() * 1000) + after_ms


class LinkMux:
    """The runnerd stand-in's link with several requests outstanding (answers may come late
    and in any order): a reader thread files every message; wait(type, pred) takes the
    first matching one."""

    def __init__(self, link):
        self.link = link
        self.cond = threading.Condition()
        self.inbox = []
        self.closed = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                m = self.link.recv(timeout=3600)
            except (TimeoutError, OSError, rtsproto.ProtocolError):
                m = None
            with self.cond:
                if m is None:
                    self.closed = True
                    self.cond.notify_all()
                    return
                self.inbox.append(m)
                self.cond.notify_all()

    def wait(self, mtype, pred=lambda m: True, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, m in enumerate(self.inbox):
                    if m.type == mtype and pred(m):
                        return self.inbox.pop(i)
                if self.closed:
                    raise HarnessError(f"brokerd closed the link while waiting for {rtsproto.NAMES.get(mtype)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {rtsproto.NAMES.get(mtype, mtype)} within {timeout} s")
                self.cond.wait(left)

    def send(self, mtype, fd=None, **fields):
        self.link.send(mtype, fd=fd, **fields)


class RichTurn:
    """One BROKER_RICH_TURN sent; done() waits for its BROKER_RICH_DONE."""

    def __init__(self, channel, turn_id, input_obj):
        self.channel = channel
        self.id = turn_id
        self.input = input_obj
        self.answer = None

    def done(self, timeout=120):
        """(status, calls, reply dict or None); the reply memfd is checked for its seals."""
        if self.answer is None:
            m = self.channel.rig.mux.wait(_proto("BROKER_RICH_DONE"), lambda m: m["turn_id"] == self.id, timeout)
            try:
                data = read_sealed(m.fd) if m.fd is not None else b""
            finally:
                m.close()
            self.answer = (m["status"], m["calls"], json.loads(data) if data else None)
        return self.answer

    def cancel(self):
        self.channel.rig.mux.send(_proto("BROKER_RICH_CANCEL"), turn_id=self.id)


class RichChannel:
    """A channel bound on the rig: its broker directory and socket, the worker side."""

    def __init__(self, rig, channel, profile):
        self.rig = rig
        self.channel = channel
        self.profile = profile
        self.hash = rtsproto.channel_hash(channel)
        self.dir = os.path.join(rig.dirs["socks"], "rich-" + self.hash[:16])
        self.path = os.path.join(self.dir, "broker.sock")
        self.workspace = os.path.join(rig.dirs["ws"], self.hash)
        self.worker = None
        self.bound = False
        self.bind()

    def bind(self):
        """RICH_BIND with a fresh listening socket at the same path (a runnerd restart does
        the same); returns RICH_BOUND's result."""
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.path)
        os.chown(self.path, self.rig.env.uid, self.rig.env.gid)
        os.chmod(self.path, 0o600)
        lsock.listen(64)
        try:
            self.rig.mux.send(_proto("RICH_BIND"), fd=lsock.fileno(), channel=self.channel, channel_hash=self.hash,
                              profile=self.profile)
        finally:
            lsock.close()
        m = self.rig.mux.wait(_proto("RICH_BOUND"), lambda m: m["channel_hash"] == self.hash, 10)
        self.bound = m["result"] == 0
        return m["result"]

    def wait_ready(self, within_ms=30000, timeout=None):
        """RICH_WAIT_READY -> RICH_READY's fields (result, capabilities, private_history)."""
        self.rig.mux.send(_proto("RICH_WAIT_READY"), channel_hash=self.hash, deadline_ms=monotonic_ms(within_ms))
        m = self.rig.mux.wait(_proto("RICH_READY"), lambda m: m["channel_hash"] == self.hash,
                              timeout or within_ms / 1000 + 10)
        return m.fields

    def turn(self, text, speaker=("1001", "Alice", "principal-1001"), deadline_ms=120000, turn_id=None, **fields):
        """BROKER_RICH_TURN with the turn input (rich-design.md section 3) in a sealed memfd."""
        tid = turn_id or secrets.token_hex(8)
        obj = {"v": 1, "turnId": tid, "speaker": {"id": speaker[0], "name": speaker[1], "principalId": speaker[2]},
               "text": text, "images": [], "attachments": [], "timeZone": "UTC",
               "now": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "startFresh": False}
        obj.update(fields)
        fd = sealed_memfd(json.dumps(obj).encode())
        try:
            self.rig.mux.send(_proto("BROKER_RICH_TURN"), fd=fd, turn_id=tid, channel=self.channel, channel_hash=self.hash,
                              speaker_id=speaker[0], speaker_name=speaker[1], principal_id=speaker[2],
                              profile=self.profile, deadline_ms=monotonic_ms(deadline_ms))
        finally:
            os.close(fd)
        return RichTurn(self, tid, obj)

    def client(self):
        return WorkerClient(self.path)

    def start_worker(self, image, worker_config=None):
        """The real richworker container on this channel's socket."""
        if not os.path.isdir(self.workspace):
            os.mkdir(self.workspace, 0o700)
            os.chown(self.workspace, self.rig.env.uid, self.rig.env.gid)
        if worker_config is not None:
            write_worker_config(self.workspace, worker_config, self.rig.env.uid, self.rig.env.gid)
        self.worker = WorkerContainer(self.rig.env, image, self.dir, self.workspace)
        return self.worker

    def unbind(self):
        if not self.bound:
            return
        self.bound = False
        self.rig.mux.send(_proto("RICH_UNBIND"), channel_hash=self.hash)
        self.rig.mux.wait(_proto("RICH_UNBOUND"), lambda m: m["channel_hash"] == self.hash, 15)

    def close(self):
        if self.worker:
            self.worker.stop()
            self.worker = None
        try:
            self.unbind()
        except (HarnessError, TimeoutError, OSError):
            pass


class RichBrokerRig(BrokerRig):
    """broker_rig.BrokerRig (brokerd alone, this process as runnerd) with a "rich" config:
    fake_anthropic as the upstream (same test CA), an OAuth token file, the profiles, and the
    rig's host tool and MCP servers named in the default profile. rich: keys merged over
    the rig's rich defaults. Use bind() for rich channels; the sealed turn() helper does not
    mix with them (the link's reader is the mux once a channel is bound)."""

    def __init__(self, env, rich=None, config=None, oauth_token=None, **kw):
        self.rich_overrides = rich or {}
        self.oauth_token = oauth_token or "sk-ant-oat01-test-" + secrets.token_hex(24)
        self.anthropic = None
        self._mux = None
        self.channels = []
        super().__init__(env, config=config, **kw)

    def _write_config(self):
        # Called by BrokerRig.start() once the test CA exists: start the upstream on it.
        if self.anthropic is None:
            add_rich_upstream(self, {"image": "roundtable-sandbox:unused-by-brokerd",
                                     "profiles": {"default": {"model": MODEL, "tools": ["echo"], "mcp": ["docs"]},
                                                  "bare": {"model": MODEL}}})
        super()._write_config()

    @property
    def mux(self):
        if self._mux is None:
            self._mux = LinkMux(self.link)
        return self._mux

    def bind(self, channel="guild-1/rich-tests", profile="default"):
        ch = RichChannel(self, channel, profile)
        self.channels.append(ch)
        return ch

    def anthropic_counts(self):
        return self.anthropic.count() if self.anthropic else 0

    def upstream_counts(self):
        return super().upstream_counts() + (self.anthropic_counts(),)

    def stop(self, check_leftovers=True):
        for ch in self.channels:
            ch.close()
        self.channels = []
        if self.anthropic:
            self.anthropic.stop()
        super().stop(check_leftovers)


# ---- 3. the whole installation ---------------------------------------------------------------

class RichSuite(Suite):
    """harness.Suite (three daemons, the sealed fake model) plus fake_anthropic and a "rich"
    config running the richworker image: for RA's statd/runnerd/CLI and the end-to-end
    suites. rich: keys merged over the defaults below."""

    def __init__(self, env, rich=None, config=None, oauth_token=None, **kw):
        self.rich_overrides = rich or {}
        self.oauth_token = oauth_token or "sk-ant-oat01-test-" + secrets.token_hex(24)
        self.anthropic = None
        self.rich_image = richworker_image(env)
        super().__init__(env, config=config, **kw)

    def _write_config(self):
        if self.anthropic is None and self.fake is not None:
            add_rich_upstream(self, {"image": self.rich_image, "profiles": {"default": {"model": MODEL}}})
        super()._write_config()

    def rich(self, channel, profile="default"):
        return self.cli("rich", channel, profile)

    def say(self, channel, text, author="1001", name="Alice", principal=None, images=(), files_dir=None, timeout=300):
        """`say` a message to a rich channel: (CompletedProcess, the worker's report or None)."""
        args = ["say", channel, "--author", author, "--name", name]
        if principal:
            args += ["--principal", principal]
        for img in images:
            args += ["--image", img]
        if files_dir:
            args += ["--files-dir", files_dir]
        p = self.cli(*args, text, timeout=timeout)
        report = None
        if p.returncode == 0:
            try:
                report = reply_report(p.stdout)
            except ValueError:
                pass
        return p, report

    def worker_config(self, channel, conf):
        """richworker's start-up file in the channel's workspace (before the container starts)."""
        return write_worker_config(self.workspace(channel), conf, self.env.uid, self.env.gid)

    def container_name(self, channel):
        """rich-design.md section 1."""
        return f"roundtable-sandbox-{self.installation}-rich-{rtsproto.channel_hash(channel)[:16]}"

    def worker_log(self, channel):
        p = docker("logs", self.container_name(channel), check=False, timeout=30)
        out = []
        for line in (p.stdout + p.stderr).splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_worker_ready(self, channel, timeout=60):
        """Until the worker's log shows an accepted readiness announcement."""
        def ready():
            return any(r.get("rw") == "between" and r.get("data", {}).get("what") == "ready"
                       for r in self.worker_log(channel))
        return wait_until(ready, timeout, f"{channel}'s worker to announce itself")

    def stop(self, check_leftovers=True):
        if not self.stopped and self.anthropic:
            self.anthropic.stop()
        super().stop(check_leftovers)


def image_file(path, kind="png"):
    """A tiny valid image at path (1x1 PNG), for say --image."""
    data = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
    with open(path, "wb") as f:
        f.write(data)
    return path


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False
