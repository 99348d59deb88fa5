# SPDX-License-Identifier: Apache-2.0
"""A real roundtable-sandbox-brokerd serving rich channels, for test_rich_broker.py and
test_rich_hooks.py (rich_rig.py has the rigs for the scripted worker image).

brokerd runs as the service account as in broker_rig.BrokerRig (same fake MCP server, host
tool and recorder), with a "rich" config whose upstream is the scripted Anthropic endpoint
(tests/fakes/fake_anthropic.py, HTTPS with the test CA). No runnerd, statd or Docker: the
test stands in for runnerd on brokerd.sock (RICH_BIND with a listening socket it made,
BROKER_RICH_TURN with a sealed memfd) and plays the worker on the channel's broker socket.

    with RichRig(env) as rig:
        ch = rig.channel()                         # RICH_BIND -> RICH_BOUND 0
        w = ch.worker()
        w.ready()                                  # POST /worker/ready with both capabilities
        tid = ch.turn("hello")                     # BROKER_RICH_TURN (input memfd)
        handout = w.next().json()                  # POST /worker/next
        a = w.messages({"messages": [...], "stream": True})   # SSE through brokerd
        w.result(tid, "the reply")                 # POST /worker/result
        done = ch.done(tid)                        # BROKER_RICH_DONE: status, calls, reply

        ch, w, tid, handout = start_turn(rig)      # the same first steps in one
        done = finish(ch, w, tid)                  # and the last two
"""
import base64
import hashlib
import json
import os
import secrets
import select
import socket
import time
from dataclasses import dataclass, field

import rich_rig
import rtsproto
from broker_rig import DUMMY_AUTH, BrokerRig
from harness import HarnessError
from rich_rig import FakeAnthropic, sealed_memfd  # noqa: F401 (sealed_memfd: the tests import it from here)

DUMMY_API_KEY = rich_rig.RICH_DUMMY_KEY
MODEL = "claude-sonnet-4-5"

# What the Anthropic SDK sends besides the framing (rich_rig.SDK_HEADERS without the
# Content-Type request_bytes() sets), with the API-key-shaped dummy.
SDK_HEADERS = {k: v for k, v in rich_rig.SDK_HEADERS if k != "content-type"}


def read_memfd(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = b""
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return out
        out += b


@dataclass
class Reply:
    status: int = None
    headers: dict = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    closed: bool = False
    raw: bytes = b""

    def json(self):
        return json.loads(self.body)

    @property
    def error(self):
        try:
            return self.json().get("error")
        except (ValueError, AttributeError):
            return None

    def events(self):
        """The server-sent events of a streamed answer: [(name, data object)]."""
        out = []
        for block in self.body.decode("utf-8", "replace").split("\n\n"):
            name, data = None, []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
            if name:
                out.append((name, json.loads("\n".join(data))))
        return out

    def text(self):
        """The text the text deltas of a streamed answer spell."""
        return "".join(d["delta"].get("text", "") for n, d in self.events()
                       if n == "content_block_delta" and d["delta"]["type"] == "text_delta")


def parse_reply(data, closed):
    r = Reply(raw=data, closed=closed)
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return r
    head = data[:end].decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    r.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    for line in head[1:]:
        k, _, v = line.partition(":")
        r.headers[k.strip().lower()] = v.strip()
    rest = data[end + 4:]
    if r.headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while rest:
            line, _, rest = rest.partition(b"\r\n")
            try:
                n = int(line.split(b";")[0], 16)
            except ValueError:
                break
            if n == 0:
                break
            body += rest[:n]
            rest = rest[n + 2:]
        r.body = body
    elif "content-length" in r.headers:
        r.body = rest[:int(r.headers["content-length"])]
    else:
        r.body = rest
    return r


def request_bytes(target, body, headers=None, worker=True, method="POST"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    fields = {"Host": "broker", "Content-Type": "application/json", "Content-Length": str(len(body))}
    if worker:
        fields["Authorization"] = DUMMY_AUTH
    else:
        fields.update(SDK_HEADERS)
    for k, v in (headers or {}).items():
        for existing in [e for e in fields if e.lower() == k.lower()]:
            del fields[existing]
        if v is not None:
            fields[k] = v
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


class Worker:
    """The worker's side of a channel's broker socket, played by the test."""

    def __init__(self, path):
        self.path = path

    def connect(self, timeout=30):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.path)
        return s

    def raw(self, data, timeout=30.0):
        """Send data on a new connection and read until the broker closes it or timeout."""
        s = self.connect(timeout)
        closed = False
        out = b""
        try:
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
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
                out += d
        finally:
            s.close()
        return parse_reply(out, closed)

    def post(self, target, body, headers=None, worker=True, timeout=30.0):
        return self.raw(request_bytes(target, body, headers, worker), timeout)

    def ready(self, private_to=True, reader_records=True, history=False, body=None):
        if body is None:
            body = {"capabilities": {"privateTo": private_to, "readerRecords": reader_records},
                    "privateHistory": history}
        return self.post("/worker/ready", body)

    def next(self, timeout=40.0):
        return self.post("/worker/next", b"", timeout=timeout)

    def result(self, turn_id, text, files=None, **kw):
        body = {"turnId": turn_id, "text": text}
        if files is not None:
            body["files"] = files
        return self.post("/worker/result", body, **kw)

    def messages(self, body, target="/anthropic/v1/messages", headers=None, timeout=60.0):
        return self.post(target, body, headers=headers, worker=False, timeout=timeout)

    def mcp(self, server, body, headers=None):
        return self.post("/mcp/" + server, body, headers=headers)

    def tool(self, name, args):
        return self.post("/tools/" + name, args)

    def compact(self, body):
        return self.post("/worker/compact", body)


def model_body(text, stream=True, **extra):
    """rich_rig.messages_body() with a model of the worker's own, which brokerd replaces."""
    return rich_rig.messages_body(text, model="whatever-the-worker-says", stream=stream, **extra)


class Channel:
    """One rich channel bound with RICH_BIND: its listening socket and its link messages."""

    def __init__(self, rig, channel, profile):
        self.rig = rig
        self.channel = channel
        self.hash = rtsproto.channel_hash(channel)
        self.profile = profile
        self.path = os.path.join(rig.dirs["socks"], "rich-" + self.hash[:16] + ".sock")
        self.bind()

    def bind(self, expect=0):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.path)
        lsock.listen(64)
        try:
            self.rig.link.send(rtsproto.RICH_BIND, fd=lsock.fileno(), channel=self.channel, channel_hash=self.hash,
                               profile=self.profile)
        finally:
            lsock.close()
        m = self.rig.expect(rtsproto.RICH_BOUND, lambda m: m["channel_hash"] == self.hash)
        if expect is not None and m["result"] != expect:
            raise HarnessError(f"RICH_BIND answered {m['result']}")
        return m["result"]

    def worker(self):
        return Worker(self.path)

    def turn(self, text="hello", speaker=("1001", "Alice", "principal-1001"), deadline_ms=60000, images=None,
             attachments=None, input_override=None, fd=None, profile=None, turn_id=None):
        tid = turn_id or secrets.token_hex(8)
        sid, name, principal = speaker
        doc = {"v": 1, "turnId": tid, "speaker": {"id": sid, "name": name, "principalId": principal},
               "text": text, "images": images or [], "attachments": attachments or [],
               "timeZone": "Europe/Berlin", "now": "2026-11-30T14:30:00+01:00", "startFresh": False}
        if input_override is not None:
            doc = input_override(doc)
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        memfd = sealed_memfd(data) if fd is None else fd
        try:
            self.rig.link.send(rtsproto.BROKER_RICH_TURN, fd=memfd, turn_id=tid, channel=self.channel,
                               channel_hash=self.hash, speaker_id=sid, speaker_name=name, principal_id=principal,
                               profile=profile or self.profile,
                               deadline_ms=int(time.monotonic() * 1000) + deadline_ms)
        finally:
            os.close(memfd)
        return tid

    def done(self, turn_id, timeout=30):
        m = self.rig.expect(rtsproto.BROKER_RICH_DONE, lambda m: m["turn_id"] == turn_id, timeout)
        data = read_memfd(m.fd)
        m.close()
        return {"status": m["status"], "calls": m["calls"], "reply": json.loads(data) if data else None}

    def cancel(self, turn_id):
        self.rig.link.send(rtsproto.BROKER_RICH_CANCEL, turn_id=turn_id)

    def wait_ready(self, deadline_ms=5000, timeout=30):
        self.rig.link.send(rtsproto.RICH_WAIT_READY, channel_hash=self.hash,
                           deadline_ms=int(time.monotonic() * 1000) + deadline_ms)
        return self.rig.expect(rtsproto.RICH_READY, lambda m: m["channel_hash"] == self.hash, timeout)

    def unbind(self):
        self.rig.link.send(rtsproto.RICH_UNBIND, channel_hash=self.hash)
        return self.rig.expect(rtsproto.RICH_UNBOUND, lambda m: m["channel_hash"] == self.hash)


# Host hooks of the rich config, as small programs in the rig's tools directory (they run
# under brokerd's seccomp filter: they read stdin and print, nothing else).
JUDGE = r"""#!/usr/bin/python3
# rich.effort.judge: "#effort LEVEL" in the text picks LEVEL; otherwise the previous level
import json, re, sys
d = json.load(sys.stdin)
m = re.search(r"#effort (\S+)", d["text"])
print(m.group(1) if m else d["level"])
"""
MEMORY = r"""#!/usr/bin/python3
# rich.memory.command: speakers whose id starts with "mem" have a memory block
import json, sys
d = json.load(sys.stdin)
if d["id"].startswith("mem"):
    print("private facts about " + d["name"] + " in " + d["channel"])
"""
COMPACTOR = r"""#!/usr/bin/python3
# rich.compaction.command: customInstructions says how to behave
import json, sys, time
d = json.load(sys.stdin)
req = d["request"]
how = req.get("customInstructions", "ok")
if how == "empty":
    sys.exit(0)
if how == "fail":
    sys.exit(3)
if how == "sleep":
    time.sleep(30)
if how == "shape":
    print(json.dumps({"summary": 5}))
    sys.exit(0)
print(json.dumps({"summary": "summary of " + d["channel"], "firstKeptEntryId": req["firstKeptEntryId"],
                  "tokensBefore": req["tokensBefore"], "estimatedTokensAfter": 1234,
                  "details": {"engine": "spoofed", "kept": len(req["keptMessages"])}}))
"""
TOKEN = r"""#!/usr/bin/python3
# rich.oauthToken {"command"}: a token per channel and speaker; none for speaker "nokey"
import hashlib, json, sys
d = json.load(sys.stdin)
sp = d["speaker"]
if sp["id"] != "nokey":
    print("sk-ant-oat01-" + hashlib.sha256((d["channel"] + "/" + sp["id"] + "/" + str(sp["principalId"])).encode()).hexdigest()[:40])
"""


def token_for(channel, speaker_id, principal_id):
    """What TOKEN prints for this channel and speaker."""
    return "sk-ant-oat01-" + hashlib.sha256(f"{channel}/{speaker_id}/{principal_id}".encode()).hexdigest()[:40]


class RichRig(BrokerRig):
    """BrokerRig with a rich config and the scripted Anthropic endpoint."""

    def __init__(self, env, rich=None, **kw):
        self.rich_overrides = rich or {}
        self.anthropic = None
        self.backlog = []
        super().__init__(env, **kw)

    def more_config(self):
        self._logfiles.append(open(self.log_path("fake-anthropic"), "ab"))
        self.anthropic = FakeAnthropic(self.dirs["ca"], os.path.join(self.dirs["logs"], "anthropic.jsonl"),
                                       self._logfiles[-1])
        hooks = {}
        for name, text in (("judge", JUDGE), ("memory", MEMORY), ("compactor", COMPACTOR), ("token", TOKEN)):
            hooks[name] = os.path.join(self.dirs["tools"], name + ".py")
            with open(hooks[name], "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(hooks[name], 0o755)
        rich = {
            "image": "roundtable-sandbox-rich:test",
            "profiles": {"p": {"model": MODEL, "mcp": ["docs", "open"], "tools": ["echo", "short"],
                               "prompt": "You are a test persona."},
                         "plain": {"model": MODEL}},
            "oauthToken": {"command": ["/usr/bin/python3", hooks["token"]]},
            "upstream": self.anthropic.url,
            "effort": {"default": "medium", "judge": {"command": ["/usr/bin/python3", hooks["judge"]]}},
            "memory": {"command": ["/usr/bin/python3", hooks["memory"]], "visibility": "private"},
            "compaction": {"command": ["/usr/bin/python3", hooks["compactor"]], "engine": "test-engine",
                           "timeoutMs": 1500, "maxRequestBytes": 65536},
            "maxOutputTokens": 8000,
            "turnTimeoutMs": 120000,
        }
        rich.update(self.rich_overrides)
        return {"rich": rich}

    def channel(self, channel=None, profile="p"):
        return Channel(self, channel or "guild-1/rich-" + secrets.token_hex(4), profile)

    def expect(self, mtype, pred=lambda m: True, timeout=30):
        """The next link message of mtype that pred accepts (others wait in the backlog)."""
        for i, m in enumerate(self.backlog):
            if m.type == mtype and pred(m):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {rtsproto.NAMES[mtype]} within {timeout} s")
            m = self.link.recv(timeout=left)
            if m is None:
                raise HarnessError("brokerd closed the link")
            if m.type == mtype and pred(m):
                return m
            self.backlog.append(m)

    def nothing_on_link(self, mtype, pred, within):
        """No such message arrives within the window."""
        end = time.monotonic() + within
        while time.monotonic() < end:
            for m in self.backlog:
                if m.type == mtype and pred(m):
                    raise AssertionError(f"unexpected {rtsproto.NAMES[mtype]}: {m.fields}")
            r, _, _ = select.select([self.link], [], [], max(0.0, end - time.monotonic()))
            if r:
                m = self.link.recv(timeout=1)
                if m is None:
                    raise HarnessError("brokerd closed the link")
                self.backlog.append(m)

    def upstream_counts(self):
        return (len(self.anthropic.requests()),) + super().upstream_counts()

    def stop(self, check_leftovers=True):
        if self.anthropic:
            self.anthropic.stop()
        for m in self.backlog:
            m.close()
        super().stop(check_leftovers)


def start_turn(rig, text="hello", speaker=("1001", "Alice", "principal-1001"), ch=None, before_next=None, **kw):
    """A channel (ch, or a new one of rig) whose worker announced both capabilities and
    holds a turn: (channel, worker, turn id, the handout). before_next(turn id) runs before
    the worker's long poll; kw go to Channel.turn()."""
    ch = ch or rig.channel()
    w = ch.worker()
    assert w.ready().status == 200
    tid = ch.turn(text, speaker=speaker, **kw)
    if before_next:
        before_next(tid)
    n = w.next()
    assert n.status == 200, (n.status, n.body[:300])
    return ch, w, tid, n.json()


def finish(ch, w, tid, text="done"):
    """The worker's reply packet for turn tid, then its BROKER_RICH_DONE (Channel.done())."""
    assert w.result(tid, text).status == 200
    return ch.done(tid)


def b64(data):
    return base64.b64encode(data).decode()


def sha(data):
    return hashlib.sha256(data).hexdigest()
