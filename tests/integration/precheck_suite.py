# SPDX-License-Identifier: Apache-2.0
"""The precheck runner through the real daemons (DESIGN.md 8.3): an installation with a
"precheck" config, the precheck image built by the CLI, and a fake MCP server over TLS with
a token brokerd reads from a file.

Used by test_precheck.py and tests/bench/precheck.py.

    tag = build_precheck_image(env)              # roundtable-sandbox image build --precheck
    with PrecheckSuite(env, tag, precheck={"maxCalls": 4}) as s:
        ev = s.precheck("export default async () => ({ wake: false })", approved=["docs/echo"])
        ev                                       # the event, e.g. {"id", "event": "precheck", "wake": false}
        s.mcp_requests()                         # what reached the fake MCP server
        s.log_tail("brokerd")                    # brokerd's log: each refusal names its rule

Grants (GRANTS below): channel "g/1" gets server "docs" (the fake, with the token) and
"slow" (the same fake under another name); every other channel the catch-all grant with
server "wiki" only.
"""
import json
import os
import secrets
import subprocess

from broker_rig import FakeMcp
from harness import SRCDIR, HarnessError, Suite, _chown, unique_tag

PRECHECK_SOURCE = os.path.join(SRCDIR, "worker", "precheck")
DEFAULT_FIRED_AT = "2026-03-01T12:00:00Z"
DEFAULT_TIME_ZONE = "Europe/Berlin"
DEFAULT_TODAY = "2026-03-01"
DOCS_TOOLS = ["echo", "whoami", "reflect", "sse", "sleep", "say", "status", "wrongid", "html"]

# The script helper a test script imports by pasting: a raw request on the broker socket,
# bypassing the harness's own checks (which are not the boundary), so brokerd's rules can
# be shown to hold against a script that speaks HTTP itself.
RAW_JS = r"""
import http from 'node:http';
const DUMMY = 'roundtable-sandbox-dummy-key';
function raw(path, body, extra = {}, drop = []) {
  return new Promise((resolve) => {
    const headers = { Host: 'broker', Authorization: `Bearer ${DUMMY}`, 'Content-Type': 'application/json',
                      'Content-Length': Buffer.byteLength(body), ...extra };
    for (const d of drop) delete headers[d];
    const req = http.request({ socketPath: '/run/broker/broker.sock', method: 'POST', path, agent: false,
                               setHost: false, headers });
    req.removeHeader('connection');
    req.on('response', (res) => {
      let d = '';
      res.on('data', (c) => { d += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: d }));
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e.code || e) }));
    req.end(body);
  });
}
let nextId = 1;
const call = (tool, args = {}) => JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'tools/call',
                                                   params: { name: tool, arguments: args } });
"""


def build_precheck_image(env):
    """Build the precheck image from this tree with the CLI (image build --precheck) under
    a tag of this session's own, removed by env.cleanup(). Returns the tag."""
    env.require_docker()
    tag = unique_tag("precheck")
    env._built_tags.append(tag)  # a failed build may still have tagged something
    p = subprocess.run([env.program("cli"), "image", "build", "--precheck", "--dir", PRECHECK_SOURCE, "--tag", tag],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise HarnessError(f"image build --precheck failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return tag


def grants(s):
    docs = {"name": "docs", "url": s.mcp.url, "tools": DOCS_TOOLS, "token": {"file": s.token_file}}
    slow = {"name": "slow", "url": s.mcp.url, "tools": ["sleep"], "token": {"file": s.token_file}}
    wiki = {"name": "wiki", "url": s.mcp.url, "tools": ["echo"]}
    return [{"channel": "g/1", "servers": [docs, slow]},
            {"servers": [wiki]}]


class PrecheckSuite(Suite):
    """A Suite with "precheck" in its config (precheck: overrides of it) and a fake MCP
    server; the token is in a file only the service account reads."""

    def __init__(self, env, image, precheck=None, grants_fn=grants, **kw):
        self.precheck_image = image
        self.precheck_overrides = precheck or {}
        self.grants_fn = grants_fn
        self.mcp = None
        self.token = "pct-" + secrets.token_hex(24)
        super().__init__(env, **kw)

    def _write_config(self):
        # Suite.start() has made the test CA by now.
        self._logfiles.append(open(self.log_path("fake-mcp"), "ab"))
        self.mcp = FakeMcp(self.dirs["ca"], os.path.join(self.dirs["logs"], "mcp.jsonl"), self._logfiles[-1])
        self.token_file = os.path.join(self.dirs["etc"], "precheck-token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.token + "\n")
        _chown(self.token_file, self.env.uid, self.env.gid, 0o400)
        pc = {"image": self.precheck_image, "timeoutMs": 60000, "maxCalls": 16, "grants": self.grants_fn(self)}
        pc.update(self.precheck_overrides)
        self.config_overrides = dict(self.config_overrides, precheck=pc)
        super()._write_config()

    def mcp_requests(self):
        try:
            with open(os.path.join(self.dirs["logs"], "mcp.jsonl"), encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    @staticmethod
    def request(script, channel="g/1", target="daily", tier="member", approved=(), fired_at=DEFAULT_FIRED_AT,
                time_zone=DEFAULT_TIME_ZONE, today=DEFAULT_TODAY, schedule=None, **extra):
        req = {"op": "precheck", "channel": channel, "target": target, "tier": tier, "script": script,
               "approved": list(approved), "firedAt": fired_at, "timeZone": time_zone, "today": today,
               "schedule": schedule}
        req.update(extra)
        return req

    def send_precheck(self, conn, script, **kw):
        """Send a precheck on conn (a ControlConnection); returns its id."""
        return conn.send(self.request(script, **kw))

    @staticmethod
    def wait_line(conn, rid, timeout=180):
        """The next line about rid on conn: the precheck's event, or an answer refusing it."""
        while True:
            o = conn.recv(timeout=timeout)
            if o.get("id") == rid or ("error" in o and "id" not in o):
                return o

    def precheck(self, script, timeout=180, **kw):
        """Run one precheck on a connection of its own; returns its event (or the answer
        that refused it)."""
        c = self.connect(timeout)
        try:
            rid = self.send_precheck(c, script, **kw)
            return self.wait_line(c, rid, timeout)
        finally:
            c.close()

    def describe(self, channel="g/1", target="daily", tier="member"):
        return self.control({"op": "precheck_describe", "channel": channel, "target": target, "tier": tier})[0]

    def stop(self, check_leftovers=True):
        if self.mcp:
            self.mcp.stop()
        super().stop(check_leftovers=check_leftovers)
