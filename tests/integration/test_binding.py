# SPDX-License-Identifier: Apache-2.0
"""The turn's identity end to end: the binding (channel, speaker id, name, principal id) that
host tools and key commands see must come from the control message statd received, travel
statd -> runnerd (TURN_RUN) -> brokerd (BROKER_BIND), and never reach the container.

test_broker.py checks brokerd against a hand-made BROKER_BIND; here the real suite makes the
binding. Two speakers with different principals talk in two channels at once. Host tools
and key commands run in sandboxes that write nowhere but a tool's writePaths, so the key
command and the host tool report what they got on stdin to a Unix socket this test serves
(BindingRecorder):

  key command   records its stdin, then prints "sk-bind-<sha256 of that stdin>": the bearer the
                fake model records names the exact key-command input of that model call.
  host tool     (`whoami`, like /bin/cat with a barrier) records its stdin, waits until both
                turns' tools are running, then prints its stdin: the fake model's next request
                carries it as the tool result. The barrier proves both bindings were live in
                brokerd at the same time.

The last test checks that an MCP server's apiKey is read at every call (BrokerRig).
"""
import json
import os
import secrets
import shutil
import tempfile
import threading

import pytest

from broker_rig import BrokerRig, serve_json_records
from harness import HarnessError, docker_inspect

BARRIER_WAIT_S = 90  # both turns' tools must be running together within this (generous)

KEY_COMMAND = r"""#!/usr/bin/python3
import hashlib, json, os, socket, sys
data = sys.stdin.buffer.read()
key = "sk-bind-" + hashlib.sha256(data).hexdigest()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(os.path.join(sys.argv[1], "binding.sock"))
s.sendall(json.dumps({"kind": "key", "stdin": data.decode(), "key": key}).encode())
s.shutdown(socket.SHUT_WR)
if s.recv(16) != b"ok":
    sys.exit(1)
print(key)
"""

TOOL_COMMAND = r"""#!/usr/bin/python3
import json, os, socket, sys
data = sys.stdin.buffer.read()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(110)
s.connect(os.path.join(sys.argv[1], "binding.sock"))
s.sendall(json.dumps({"kind": "tool", "stdin": data.decode()}).encode())
s.shutdown(socket.SHUT_WR)
if s.recv(16) != b"go":
    sys.exit(1)
sys.stdout.buffer.write(data)
"""


class BindingRecorder:
    """Serves DIR/binding.sock for the key command and the tool: records what each got on
    stdin; holds every tool call until release()."""

    def __init__(self, dirpath, uid):
        self.records = []
        self.cond = threading.Condition()
        self.released = threading.Event()

        def record(r, conn):
            with self.cond:
                self.records.append(r)
                self.cond.notify_all()
            if r["kind"] == "tool":
                self.released.wait(BARRIER_WAIT_S + 15)
                conn.sendall(b"go")
            else:
                conn.sendall(b"ok")

        self.server = serve_json_records(os.path.join(dirpath, "binding.sock"), uid, record)

    def of_kind(self, kind):
        with self.cond:
            return [r for r in self.records if r["kind"] == kind]

    def wait_tools(self, n, timeout):
        with self.cond:
            return self.cond.wait_for(lambda: len([r for r in self.records if r["kind"] == "tool"]) >= n, timeout)

    def release(self):
        self.released.set()

    def stop(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def binding_dir(rts_env):
    """A directory the service account can read: the two scripts and binding.sock."""
    d = tempfile.mkdtemp(prefix="rtsb-", dir="/tmp")
    os.chmod(d, 0o755)
    for name, text in (("key.py", KEY_COMMAND), ("tool.py", TOOL_COMMAND)):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(os.path.join(d, name), 0o755)
    rec = BindingRecorder(d, rts_env.uid)
    yield d, rec
    rec.stop()
    shutil.rmtree(d, ignore_errors=True)


def user_text(body):
    return "\n".join(m["content"] for m in body["messages"]
                     if m.get("role") == "user" and isinstance(m.get("content"), str))


def test_tools_and_key_command_see_exactly_their_turns_identity(make_suite, binding_dir):
    d, rec = binding_dir
    tag = secrets.token_hex(4)
    turns = {
        "A": {"channel": f"guild-b/chan-a-{tag}", "id": "5101", "name": "Ann", "principalId": f"principal-ann-{tag}",
              "marker": f"marker-a-{tag}"},
        "B": {"channel": f"guild-b/chan-b-{tag}", "id": "5202", "name": "Ben", "principalId": f"principal-ben-{tag}",
              "marker": f"marker-b-{tag}"},
    }
    s = make_suite(config={
        "apiKey": {"command": ["/usr/bin/python3", "-B", os.path.join(d, "key.py"), d]},
        "tools": [{"name": "whoami", "description": "who is asking", "parameters": {"type": "object"},
                   "command": ["/usr/bin/python3", "-B", os.path.join(d, "tool.py"), d], "timeoutMs": 60000}],
        "turnTimeoutMs": 240000,
    })
    for t in turns.values():
        assert s.cli("on", t["channel"]).returncode == 0

    def binding(t):
        return {"channel": t["channel"], "speaker": {"id": t["id"], "name": t["name"], "principalId": t["principalId"]}}

    c = s.connect(timeout=300)
    try:
        ids = {}
        for k, t in turns.items():
            author = {"id": t["id"], "name": t["name"], "principalId": t["principalId"], "tier": "member",
                      "bot": False, "integration": False}
            rid = c.send({"op": "message", "id": f"msg-{k}", "channel": t["channel"], "guild": True, "author": author,
                          "addressed": True, "text": f"#tools 1 host_whoami {t['marker']}", "attachments": 0})
            ids[rid] = k

        # Both turns' tools are running: both containers exist, both bindings are live.
        both = rec.wait_tools(2, BARRIER_WAIT_S)
        try:
            assert both, f"the two turns never had their tool calls in flight together: {rec.records}\n{s.logs()}"
            names = s.containers()
            assert len(names) == 2, names
            for n in names:
                info = json.dumps(docker_inspect(n))
                for t in turns.values():
                    assert t["principalId"] not in info, f"container {n} carries a principal id"
        finally:
            rec.release()

        answers = {}
        events = {}
        while len(events) < len(turns):
            o = c.recv(timeout=300)
            k = ids.get(o.get("id"))
            assert k, o
            if "event" in o:
                events[k] = o
            else:
                answers[k] = o
    finally:
        c.close()
    assert {k: a["route"] for k, a in answers.items()} == {"A": "sandbox", "B": "sandbox"}, answers

    tool_records = rec.of_kind("tool")
    key_records = rec.of_kind("key")
    reqs = [r for r in s.fake.requests() if r["method"] == "POST"]
    for k, t in turns.items():
        other = turns["B" if k == "A" else "A"]
        expected_tool_input = dict(binding(t), tool="whoami", input={})

        # The reply is the fake model's echo of the tool result: the tool's stdin.
        assert events[k]["event"] == "reply", events[k]
        prefix = "tool results: "
        assert events[k]["text"].startswith(prefix), events[k]
        assert json.loads(events[k]["text"][len(prefix):]) == expected_tool_input

        # Exactly one tool run for this turn, with this turn's binding (all four fields).
        mine = [r for r in tool_records if json.loads(r["stdin"])["channel"] == t["channel"]]
        assert len(mine) == 1, tool_records
        assert json.loads(mine[0]["stdin"]) == expected_tool_input

        # Two model calls for this turn (tool call, then the answer to its result); neither
        # mentions the other turn.
        my_reqs = [r for r in reqs if t["marker"] in user_text(r["body"])]
        assert len(my_reqs) == 2, [user_text(r["body"]) for r in reqs]
        for r in my_reqs:
            assert other["marker"] not in json.dumps(r["body"])
            # The bearer is the key command's output: its input was this turn's binding.
            auth = r["headers"]["authorization"]
            assert auth.startswith("Bearer sk-bind-"), auth
            got = [kr for kr in key_records if kr["key"] == auth[len("Bearer "):]]
            assert got, f"no key command printed {auth}"
            assert all(json.loads(kr["stdin"]) == binding(t) for kr in got), got
        # The first request is built by the worker from its input alone: no principal id.
        first, second = my_reqs
        assert "tool_calls" not in json.dumps(first["body"]["messages"])
        assert t["principalId"] not in json.dumps(first["body"])
        assert other["principalId"] not in json.dumps(first["body"])
        # The second carries the tool's stdout verbatim as the tool result.
        tool_msgs = [m for m in second["body"]["messages"] if m.get("role") == "tool"]
        assert [m["content"] for m in tool_msgs] == [mine[0]["stdin"]]
        assert other["principalId"] not in json.dumps(second["body"])

    # One key-command run per model call, each with the binding of one of the two turns.
    assert len(key_records) == len(reqs) == 4, (key_records, len(reqs))
    assert sorted(json.dumps(json.loads(kr["stdin"]), sort_keys=True) for kr in key_records) == sorted(
        json.dumps(binding(t), sort_keys=True) for t in turns.values() for _ in range(2))


# ---------------------------------------------------------------- MCP credential, per call

def mcp_echo(rid):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo", "arguments": {"n": rid}}}


def post_mcp(turn, rid):
    a = turn.post("/mcp/docs", mcp_echo(rid))
    assert a.closed and a.rest == b""
    return a


def test_mcp_key_is_read_at_every_call(host_env):
    try:
        rig = BrokerRig(host_env)
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    try:
        key_file = rig.mcp_key_file
        with rig.turn() as t:
            def call(rid):
                n = len(rig.mcp_requests())
                a = post_mcp(t, rid)
                assert a.status == 200, (a.status, a.raw[:300])
                assert a.json()["id"] == rid
                got = rig.mcp_requests()[n:]
                assert len(got) == 1, got
                return got[0]["headers"].get("authorization")

            assert call(1) == "Bearer " + rig.mcp_key

            # Rewritten in place, same turn: the next call carries the new key.
            second = "mcp-rotated-" + secrets.token_hex(12)
            with open(key_file, "w", encoding="utf-8") as f:
                f.write(second + "\n")
            assert call(2) == "Bearer " + second

            # Replaced by a new file (rename over it, as config management does).
            third = "mcp-renamed-" + secrets.token_hex(12)
            tmp = key_file + ".new"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(third + "\n")
            os.chown(tmp, host_env.uid, host_env.gid)
            os.chmod(tmp, 0o400)
            os.rename(tmp, key_file)
            assert call(3) == "Bearer " + third

            # Gone: 503 unavailable, and the MCP server receives nothing.
            os.unlink(key_file)
            with rig.nothing_forwarded():
                a = post_mcp(t, 4)
            assert a.status == 503, (a.status, a.raw[:300])
            assert a.body == b'{"error":"unavailable"}', a.body
            assert "no credential available for MCP server docs" in rig.broker_log()

            # Back again: served, with the key now in the file.
            fourth = "mcp-restored-" + secrets.token_hex(12)
            with open(key_file, "w", encoding="utf-8") as f:
                f.write(fourth + "\n")
            os.chown(key_file, host_env.uid, host_env.gid)
            assert call(5) == "Bearer " + fourth
    finally:
        rig.stop()
