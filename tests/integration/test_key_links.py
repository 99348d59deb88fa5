# SPDX-License-Identifier: Apache-2.0
"""Key files and symbolic links (brokerd/keys.h, brokerd/toolbox.h; issue 12): host tools'
sandbox hides the directory of each {"file"} key source, so a key must never be readable
through a name outside it.

  - a key file that is a symbolic link is refused: at start (brokerd names the config key),
    and at every read should it become one later (a log line names the file, nothing is
    forwarded); its target's directory is hidden from tools all the same;
  - a key file reached through a linked directory is read, and tools can read it by neither
    name: the real directory is hidden too.

The tool is a few lines of python3 that reports what it reads from each path listed in its argument,
reversed (so that brokerd's reflection filter, which looks for the key as it is, would not
hide a leak). Each run first records itself through the fixture's ToolRecorder (tools
cannot write files), so a test can tell that a refused call ran no tool."""
import json
import os
import secrets
import shutil
import tempfile

import pytest

from broker_rig import BrokerRig, ToolRecorder, count_lines
from harness import QUIET_FORWARD_S, HarnessError, assert_quiet

READER = r'''
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(sys.argv[2], "recorder.sock"))
s.sendall(json.dumps({"file": "runs.log", "mode": "a", "text": "run\n"}).encode())
s.shutdown(socket.SHUT_WR)
s.recv(16)
s.close()
out = {}
for p in json.load(open(sys.argv[1])):
    try:
        with open(p, encoding="utf-8") as f:
            out[p] = "read:" + f.read().strip()[::-1]
    except OSError as e:
        import errno
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
'''


@pytest.fixture
def key_dir(host_env):
    """/tmp/rtskl-*/ (0755, root's) with reader.py, the recorder of its runs (runs.log)
    and, the service account's: vault/ (0700), keys/ (0700), plain/ (0755, with a file any
    tool may read)."""
    d = tempfile.mkdtemp(prefix="rtskl-", dir="/tmp")
    os.chmod(d, 0o755)
    recorder = ToolRecorder(d, host_env.uid)
    with open(os.path.join(d, "reader.py"), "w", encoding="utf-8") as f:
        f.write(READER)
    os.chmod(os.path.join(d, "reader.py"), 0o755)
    for sub, mode in (("vault", 0o700), ("keys", 0o700), ("plain", 0o755)):
        os.mkdir(os.path.join(d, sub))
        os.chown(os.path.join(d, sub), host_env.uid, host_env.gid)
        os.chmod(os.path.join(d, sub), mode)
    write_key(os.path.join(d, "plain", "readme"), "plain-text", host_env, mode=0o444)
    yield d
    recorder.stop()
    shutil.rmtree(d, ignore_errors=True)


def tool_runs(d):
    """How many times reader.py ran."""
    return count_lines(os.path.join(d, "runs.log"))


def write_key(path, text, env, mode=0o400):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.chown(path, env.uid, env.gid)
    os.chmod(path, mode)


def reader_tool(d, *paths):
    """The tool reads paths, listed in a file (naming a hidden path in a tool's command is
    refused at start)."""
    lst = os.path.join(d, "paths-%s.json" % secrets.token_hex(4))
    with open(lst, "w", encoding="utf-8") as f:
        json.dump(list(paths), f)
    os.chmod(lst, 0o644)
    return {"name": "peek", "description": "reads files", "parameters": {"type": "object"},
            "command": ["/usr/bin/python3", "-B", os.path.join(d, "reader.py"), lst, d], "timeoutMs": 20000}


def peek(rig):
    with rig.turn() as t:
        a = t.post("/tools/peek", {})
    assert a.status == 200, (a.status, a.body, rig.broker_log()[-3000:])
    return json.loads(a.json()["result"])


def model_call(rig):
    with rig.turn() as t:
        return t.post("/model", {"messages": [{"role": "user", "content": "hi"}]})


def test_a_linked_key_file_stops_brokerd_at_start(host_env, key_dir):
    real, link = os.path.join(key_dir, "vault", "api-key"), os.path.join(key_dir, "keys", "api-key")
    write_key(real, "sk-vault-" + secrets.token_hex(8), host_env)
    os.symlink(real, link)
    with pytest.raises(HarnessError) as e:
        BrokerRig(host_env, config={"apiKey": {"file": link}})
    said = str(e.value)
    assert f"apiKey.file: {link} is a symbolic link" in said, said[-3000:]
    assert "name the file itself" in said, said[-3000:]


def test_a_key_file_that_becomes_a_link_is_refused(host_env, key_dir):
    """Started with a plain key file, which is then replaced by a link to another key: each
    read refuses it, and nothing is forwarded."""
    first, second = "sk-first-" + secrets.token_hex(8), "sk-second-" + secrets.token_hex(8)
    keyfile, real = os.path.join(key_dir, "keys", "api-key"), os.path.join(key_dir, "vault", "api-key")
    plain = os.path.join(key_dir, "plain", "readme")
    write_key(keyfile, first, host_env)
    write_key(real, second, host_env)
    rig = BrokerRig(host_env, config={"apiKey": {"file": keyfile}, "tools": [reader_tool(key_dir, plain)]})
    try:
        a = model_call(rig)
        assert a.status == 200, (a.status, a.body)
        assert rig.model_requests()[-1]["headers"]["authorization"] == "Bearer " + first

        os.unlink(keyfile)
        os.symlink(real, keyfile)
        before = len(rig.model_requests())
        a = model_call(rig)
        assert a.status == 503 and a.json() == {"error": "unavailable"}, (a.status, a.body)
        log = rig.broker_log()
        assert f"key file {keyfile} is a symbolic link, which brokerd refuses to follow" in log, log[-3000:]
        assert "outcome=key_file_symlink" in log, log[-3000:]
        assert second not in log and first not in log
        # A tool call needs the model key too (the reflection filter's): refused alike, for
        # the link (the log line of this call's turn), and the tool never ran.
        runs = tool_runs(key_dir)
        with rig.nothing_forwarded():
            with rig.turn() as t:
                a = t.post("/tools/peek", {})
        assert a.status == 503 and a.json() == {"error": "unavailable"}, (a.status, a.body)
        assert assert_quiet(lambda: tool_runs(key_dir), QUIET_FORWARD_S, "a run of the tool") == runs
        said = [line for line in rig.broker_log().splitlines() if f"[turn={t.id} " in line]
        assert any(f"key file {keyfile} is a symbolic link, which brokerd refuses to follow" in line
                   and "outcome=key_file_symlink" in line for line in said), said
        assert len(rig.model_requests()) == before

        # The same calls with the key file itself there again work: the link was the cause.
        os.unlink(keyfile)
        write_key(keyfile, first, host_env)
        a = model_call(rig)
        assert a.status == 200, (a.status, a.body)
        assert len(rig.model_requests()) == before + 1
        assert peek(rig) == {plain: "read:" + "plain-text"[::-1]}
        assert tool_runs(key_dir) == runs + 1
    finally:
        rig.stop()


def test_an_mcp_key_file_that_becomes_a_link_is_refused_and_its_target_hidden(host_env, key_dir):
    """Every key source of kind file reads the same way: an MCP server's key too. Its link's
    target is hidden from tools at every run once the link is there."""
    real = os.path.join(key_dir, "vault", "mcp-key")
    plain = os.path.join(key_dir, "plain", "readme")
    other = "mcp-other-" + secrets.token_hex(8)
    write_key(real, other, host_env)
    rig = BrokerRig(host_env, config={"tools": [reader_tool(key_dir, real, plain)]})
    try:
        # vault/ is nobody's key directory yet: a tool may read it (what hides it below is
        # the link).
        assert peek(rig) == {real: "read:" + other[::-1], plain: "read:" + "plain-text"[::-1]}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"q": "x"}}}
        with rig.turn() as t:
            assert t.post("/mcp/docs", call).status == 200
        os.unlink(rig.mcp_key_file)
        os.symlink(real, rig.mcp_key_file)
        before = len(rig.mcp_requests())
        with rig.turn() as t:
            a = t.post("/mcp/docs", call)
        assert a.status == 503, (a.status, a.body)
        log = rig.broker_log()
        assert f"key file {rig.mcp_key_file} is a symbolic link" in log, log[-3000:]
        assert len(rig.mcp_requests()) == before
        assert peek(rig) == {real: "EACCES", plain: "read:" + "plain-text"[::-1]}
        assert other not in rig.broker_log()
    finally:
        rig.stop()


def test_a_key_in_a_linked_directory_is_hidden_by_both_names(host_env, key_dir):
    key = "sk-linked-dir-" + secrets.token_hex(8)
    real = os.path.join(key_dir, "vault", "api-key")
    write_key(real, key, host_env)
    os.symlink(os.path.join(key_dir, "vault"), os.path.join(key_dir, "link"))
    named = os.path.join(key_dir, "link", "api-key")
    plain = os.path.join(key_dir, "plain", "readme")
    rig = BrokerRig(host_env, config={"apiKey": {"file": named},
                                      "tools": [reader_tool(key_dir, named, real, plain)]})
    try:
        a = model_call(rig)
        assert a.status == 200, (a.status, a.body)
        assert rig.model_requests()[-1]["headers"]["authorization"] == "Bearer " + key
        r = peek(rig)
        assert r == {named: "EACCES", real: "EACCES", plain: "read:" + "plain-text"[::-1]}, r
        assert key not in rig.broker_log()
    finally:
        rig.stop()
