# SPDX-License-Identifier: Apache-2.0
"""A real roundtable-sandbox-brokerd on its own, for tests/integration/test_broker.py and
tests/bench/broker_latency.py.

brokerd runs as the service account exactly as in a suite (harness.Suite: directories,
config, test CA, the scripted HTTPS model endpoint), plus a scripted HTTPS MCP server
(tests/fakes/fake_mcp.py) and a real host tool command (tests/fakes/fake_tool.py). No
runnerd, statd or Docker: this process stands in for runnerd on brokerd.sock (HELLO, then
BROKER_BIND with a listening Unix socket it creates, BROKER_CLOSE), using rtsproto.py. It
runs on a host without a Docker daemon.

    env = Environment.prepare(docker=False)
    with BrokerRig(env) as rig:
        with rig.turn() as turn:                 # a fresh binding: fresh budget and socket
            a = turn.post("/model", {"messages": [...]})
            a.status, a.json(), a.closed, a.rest
            a = turn.raw(b"POST /model HTTP/1.1\\r\\n...")
        turn.calls                               # BROKER_CLOSED's count
        rig.model_requests(), rig.mcp_requests(), rig.tool_calls()
"""
import json
import os
import secrets
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import rtsproto
from harness import QUIET_FORWARD_S, SRCDIR, FakeModel, HarnessError, Suite, assert_quiet, wait_past

DUMMY_AUTH = "Bearer " + rtsproto.DUMMY_KEY
MCP_TOOLS = ("echo", "whoami", "reflect", "say", "mask", "session", "sse", "html", "redirect", "status", "rpcerror",
             "wrongid", "big", "sleep", "notjson")


@dataclass
class Answer:
    """What came back on one connection."""
    status: int = None
    headers: list = field(default_factory=list)  # [(name, value)] in order
    body: bytes = b""
    rest: bytes = b""    # bytes after the first answer: a second answer would be here
    closed: bool = False  # the broker closed the connection (EOF or reset) before the timeout
    raw: bytes = b""

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        vals = [v for k, v in self.headers if k.lower() == name.lower()]
        return vals[0] if vals else None

    @property
    def error(self):
        try:
            return self.json().get("error")
        except ValueError:
            return None


def parse_answer(data):
    """Split data into the first HTTP answer (framed by Content-Length) and the rest."""
    a = Answer(raw=data)
    end = data.find(b"\r\n\r\n")
    if end < 0:
        a.rest = data
        return a
    head = data[:end].decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    a.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    for line in head[1:]:
        k, _, v = line.partition(":")
        a.headers.append((k.strip(), v.strip()))
    n = int(a.header("Content-Length") or 0)
    a.body = data[end + 4:end + 4 + n]
    a.rest = data[end + 4 + n:]
    return a


def exchange(path, chunks, timeout=15.0, pause=0.0, read=True):
    """Connect to path, send each chunk (pause seconds apart: the test's pacing, not a wait
    for the broker), read until the broker closes or timeout passes; returns an Answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    data = b""
    closed = False
    try:
        for i, c in enumerate(chunks):
            if i and pause:
                wait_past(time.monotonic() + pause)
            try:
                s.sendall(c)
            except (BrokenPipeError, ConnectionResetError):
                break
        if not read:
            return s
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                d = s.recv(1 << 20)
            except ConnectionResetError:
                closed = True
                break
            except socket.timeout:
                break
            if not d:
                closed = True
                break
            data += d
    finally:
        if read:
            s.close()
    a = parse_answer(data)
    a.closed = closed
    return a


def request_bytes(target, body, method="POST", headers=None, version="HTTP/1.1"):
    """The worker's request (DESIGN.md "Pinned details") with optional header changes:
    headers maps a name to a value, or to None to leave the field out."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    fields = {"Host": "broker", "Authorization": DUMMY_AUTH, "Content-Type": "application/json",
              "Content-Length": str(len(body))}
    for k, v in (headers or {}).items():
        if v is None:
            fields.pop(k, None)
        else:
            fields[k] = v
    head = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


def read_jsonl(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


class FakeMcp:
    """tests/fakes/fake_mcp.py with the suite's test CA."""

    def __init__(self, cadir, record, logfile):
        self.record = record
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fake_mcp.py"), "--port", "0",
             "--cert", os.path.join(cadir, "server.pem"), "--key", os.path.join(cadir, "server.key"),
             "--record", record],
            stdout=subprocess.PIPE, stderr=logfile, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise HarnessError("the fake MCP server did not start")
        self.port = int(line.split()[1])
        self.url = f"https://localhost:{self.port}/mcp"

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


class Turn:
    """One binding: a listening socket handed to brokerd with BROKER_BIND."""

    def __init__(self, rig, deadline_ms, channel, speaker_id, speaker_name, principal_id):
        self.rig = rig
        self.id = secrets.token_hex(8)
        self.path = os.path.join(rig.dirs["socks"], self.id + ".sock")
        self.channel = channel
        self.calls = None
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.path)
        lsock.listen(64)
        try:
            rig.link.send(rtsproto.BROKER_BIND, fd=lsock.fileno(), turn_id=self.id, channel=channel,
                          channel_hash=rtsproto.channel_hash(channel), speaker_id=speaker_id,
                          speaker_name=speaker_name, principal_id=principal_id,
                          deadline_ms=int(time.monotonic() * 1000) + deadline_ms)
        finally:
            lsock.close()  # brokerd holds its own copy now, as with runnerd
        m = rig.link.expect(rtsproto.BROKER_BOUND, timeout=10)
        if m["turn_id"] != self.id or m["result"] != 0:
            raise HarnessError(f"BROKER_BIND refused: {m.fields}")
        self.open = True

    def raw(self, data, **kw):
        """Send data (bytes, or a list of chunks) on a new connection; the Answer."""
        return exchange(self.path, data if isinstance(data, list) else [data], **kw)

    def post(self, target, body, headers=None, **kw):
        return self.raw(request_bytes(target, body, headers=headers), **kw)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect(self.path)
        return s

    def close(self, timeout=15):
        """BROKER_CLOSE; returns the call count brokerd reports."""
        if not self.open:
            return self.calls
        self.open = False
        self.rig.link.send(rtsproto.BROKER_CLOSE, turn_id=self.id)
        m = self.rig.link.expect(rtsproto.BROKER_CLOSED, timeout=timeout)
        assert m["turn_id"] == self.id
        self.calls = m["calls"]
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return self.calls

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def serve_json_records(path, uid, on_record):
    """Serve the Unix socket path (owned by uid, so brokerd's children may connect) in a
    thread: each connection sends one JSON document and shuts down its writing side;
    on_record(document, connection) runs in the connection's own thread and may answer on
    it before the connection is closed. Host tools and key commands write nothing outside
    their writePaths (brokerd/toolbox.h), so this is how they report to a test. Returns the server
    (shutdown() and server_close() to stop it)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            data = b""
            while chunk := self.request.recv(65536):
                data += chunk
            on_record(json.loads(data), self.request)

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = Server(path, Handler)
    os.chown(path, uid, -1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class ToolRecorder:
    """Writes files in OUTDIR for tests/fakes/fake_tool.py, which cannot: it has no
    writePaths (brokerd/toolbox.h). One record per connection:
    {"file": NAME, "mode": "a"|"w", "text": ...}; the file is written before the connection
    is closed, so the tool's record is on disk when the tool goes on."""

    def __init__(self, outdir, uid):
        self.outdir = outdir

        def write(r, _conn):
            name = os.path.basename(r["file"])
            with open(os.path.join(outdir, name), "a" if r["mode"] == "a" else "w", encoding="utf-8") as f:
                f.write(r["text"])

        self.server = serve_json_records(os.path.join(outdir, "recorder.sock"), uid, write)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class BrokerRig(Suite):
    """A Suite with brokerd only, plus the fake MCP server and tool, and a runnerd stand-in."""

    def __init__(self, env, config=None, api_key=None, mcp_key=None, extra_env=None):
        self.mcp = None
        self.link = None
        self.recorder = None
        self.mcp_key = mcp_key or "mcp-secret-" + secrets.token_hex(16)
        self.extra_env = extra_env
        self.rig_config = config or {}
        super().__init__(env, config=None, api_key=api_key, start=True, daemons=("brokerd",), accounts=False)

    def start(self):
        uid, gid = self.env.uid, self.env.gid
        self._make_dirs()
        for k, mode, owner in (("socks", 0o755, 0), ("tools", 0o755, 0), ("toolout", 0o700, uid)):
            self.dirs[k] = os.path.join(self.root, k)
            os.mkdir(self.dirs[k])
            os.chown(self.dirs[k], owner, gid if owner else 0)
            os.chmod(self.dirs[k], mode)
        self.recorder = ToolRecorder(self.dirs["toolout"], uid)
        subprocess.run([os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), self.dirs["ca"]], check=True,
                       capture_output=True)
        for name in ("fake-model", "fake-mcp"):
            self._logfiles.append(open(self.log_path(name), "ab"))
        self.fake = FakeModel(self.dirs["ca"], os.path.join(self.dirs["logs"], "model.jsonl"), self._logfiles[0])
        self.mcp = FakeMcp(self.dirs["ca"], os.path.join(self.dirs["logs"], "mcp.jsonl"), self._logfiles[1])
        # The tool and the key files live where the service account can read them.
        self.tool = os.path.join(self.dirs["tools"], "fake_tool.py")
        shutil.copy2(os.path.join(SRCDIR, "tests", "fakes", "fake_tool.py"), self.tool)
        os.chmod(self.tool, 0o755)
        self.mcp_key_file = os.path.join(self.dirs["etc"], "mcp-key")
        with open(os.open(self.mcp_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(self.mcp_key + "\n")
        os.chown(self.mcp_key_file, uid, gid)
        os.chmod(self.mcp_key_file, 0o400)
        params = {"type": "object"}
        tool_cmd = ["/usr/bin/python3", self.tool, self.dirs["toolout"]]
        defaults = {
            "tools": [
                {"name": "echo", "description": "test tool", "parameters": params, "command": tool_cmd,
                 "timeoutMs": 20000},
                {"name": "short", "description": "test tool, 1 s", "parameters": params, "command": tool_cmd,
                 "timeoutMs": 1000},
            ],
            "mcp": [
                {"name": "docs", "url": self.mcp.url, "apiKey": {"file": self.mcp_key_file},
                 "tools": [{"name": t, "description": "fake " + t, "parameters": params} for t in MCP_TOOLS]},
                {"name": "open", "url": self.mcp.url,
                 "tools": [{"name": "whoami", "description": "fake", "parameters": params}]},
            ],
            "turnTimeoutMs": 120000,
        }
        defaults.update(self.more_config())
        defaults.update(self.rig_config)
        self.config_overrides = defaults
        self._write_config()
        self.start_daemon("brokerd", extra_env=self.extra_env)
        self._wait_ready()
        self.link = self.connect_link()

    def more_config(self):
        """Config a subclass adds (its own fakes are started here: the CA exists by now)."""
        return {}

    def connect_link(self):
        """A runnerd stand-in's link: connected as the service account (brokerd checks
        SO_PEERCRED), HELLO done."""
        path = os.path.join(self.dirs["rt"], "brokerd.sock")
        os.seteuid(self.env.uid)
        try:
            link = rtsproto.Conn.connect(path)
        finally:
            os.seteuid(0)
        link.hello(rtsproto.PROGRAM_RUNNERD)
        return link

    def turn(self, deadline_ms=60000, channel="guild-1/broker-tests", speaker_id="1001", speaker_name="Alice",
             principal_id="principal-1001"):
        return Turn(self, deadline_ms, channel, speaker_id, speaker_name, principal_id)

    # ---- what the upstreams saw ----

    def model_requests(self):
        return read_jsonl(os.path.join(self.dirs["logs"], "model.jsonl"))

    def mcp_requests(self):
        return read_jsonl(os.path.join(self.dirs["logs"], "mcp.jsonl"))

    def tool_calls(self):
        return read_jsonl(os.path.join(self.dirs["toolout"], "calls.jsonl"))

    def upstream_counts(self):
        return (count_lines(os.path.join(self.dirs["logs"], "model.jsonl")),
                count_lines(os.path.join(self.dirs["logs"], "mcp.jsonl")),
                count_lines(os.path.join(self.dirs["toolout"], "calls.jsonl")))

    @contextmanager
    def nothing_forwarded(self):
        """Asserts that no request reached the model endpoint, the MCP server or the tool
        while the block ran, nor within QUIET_FORWARD_S after it (a refused call must not
        be forwarded, not even late)."""
        before = self.upstream_counts()
        yield
        after = self.upstream_counts()
        assert after == before, f"forwarded: model/mcp/tool records went from {before} to {after}"
        assert_quiet(self.upstream_counts, QUIET_FORWARD_S, "forwarded after the answer: model/mcp/tool records")

    def broker_log(self):
        return self.log_tail("brokerd", limit=1 << 20)

    def stop(self, check_leftovers=True):
        """Stop everything; raises HarnessError when brokerd did not exit cleanly (a crash,
        or a sanitizer report at exit in a sanitizer build)."""
        if self.link:
            self.link.close()
            self.link = None
        if self.mcp:
            self.mcp.stop()
        if self.recorder:
            self.recorder.stop()
            self.recorder = None
        stopped = self.stopped
        super().stop(check_leftovers=False)
        code = self.exit_codes.get("brokerd")
        if not stopped and check_leftovers and code not in (0, None):
            raise HarnessError(f"brokerd exited with {code}:\n{self.logs()[-4000:]}")

