# SPDX-License-Identifier: Apache-2.0
"""Host tools and key commands in sandboxes of their own (brokerd/toolbox.h,
brokerd/launcher.h; DESIGN.md section 8.1): a tool writes its writePaths and nowhere else,
interpreters run, the network is there, and neither a tool nor a key command reaches a
key source it should not see, brokerd's memory, or brokerd itself.

Most tests drive a real brokerd alone (broker_rig.BrokerRig: POST /tools/NAME on a turn's
broker socket, as the worker would); the last one runs real turns through the whole suite
and a real container, the model asking for the tool (tests/fakes/fake_model.py "#tools 1
NAME"). The tool is tests/fakes/sandbox_probe.py, which reports each attempt it makes.
"""
import http.server
import json
import os
import secrets
import shutil
import tempfile
import threading

import pytest

from broker_rig import BrokerRig, serve_json_records
from harness import SRCDIR, HarnessError, Suite

PROBE_SRC = os.path.join(SRCDIR, "tests", "fakes", "sandbox_probe.py")
PARAMS = {"type": "object"}


@pytest.fixture
def probe_dir(host_env):
    """A directory the service account can read: the probe, and
      out/    the service account's, a tool's writePath
      other/  the service account's too, in no writePath: only the sandbox stops a write
      keys/   the service account's: a key a key command reads
      creds/  the service account's: a $CREDENTIALS_DIRECTORY"""
    d = tempfile.mkdtemp(prefix="rtstb-", dir="/tmp")
    os.chmod(d, 0o755)
    shutil.copy2(PROBE_SRC, os.path.join(d, "probe.py"))
    os.chmod(os.path.join(d, "probe.py"), 0o755)
    for sub, mode in (("out", 0o755), ("other", 0o755), ("keys", 0o700), ("creds", 0o700)):
        os.mkdir(os.path.join(d, sub))
        os.chown(os.path.join(d, sub), host_env.uid, host_env.gid)
        os.chmod(os.path.join(d, sub), mode)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def probe(d, *args):
    return ["/usr/bin/python3", "-B", os.path.join(d, "probe.py"), *args]


def tool(name, command, write_paths=None, timeout_ms=20000):
    t = {"name": name, "description": "sandbox probe", "parameters": PARAMS, "command": command,
         "timeoutMs": timeout_ms}
    if write_paths is not None:
        t["writePaths"] = write_paths
    return t


def owned_file(path, text, uid, gid, mode=0o400):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        f.write(text)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def brokerd_pid(rig):
    pid = Suite._daemon_pid(rig.procs["brokerd"])
    assert pid and os.readlink(f"/proc/{pid}/exe").endswith("roundtable-sandbox-brokerd"), pid
    return pid


def start_rig(env, **kw):
    try:
        return BrokerRig(env, **kw)
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)


def call(rig, name, args=None):
    """POST /tools/NAME on a fresh turn: the tool's report (its stdout as JSON)."""
    with rig.turn() as t:
        a = t.post(f"/tools/{name}", args or {})
    assert a.status == 200, (a.status, a.body, rig.broker_log()[-3000:])
    return json.loads(a.json()["result"])


# ---------------------------------------------------------------- writePaths

def test_a_tool_writes_its_write_paths_and_nowhere_else(host_env, probe_dir):
    out, other = os.path.join(probe_dir, "out"), os.path.join(probe_dir, "other")
    # other/, /tmp and /var/tmp: directories the service account may write by their
    # permissions; only the sandbox keeps the tool out of them.
    elsewhere = [other, "/tmp", "/var/tmp", probe_dir]
    rig = start_rig(host_env, config={"tools": [
        tool("ticket", probe(probe_dir, "write", out, *elsewhere), write_paths=[out]),
        tool("other", probe(probe_dir, "write", other), write_paths=[other]),
    ]})
    try:
        name = "ticket-" + secrets.token_hex(4)
        r = call(rig, "ticket", {"name": name})
        assert r["mine"] == "ok", r
        assert r["devnull"] == "ok", r
        assert r["elsewhere"] == {d: "EROFS" for d in elsewhere}, r
        with open(os.path.join(out, name + ".txt"), encoding="utf-8") as f:
            assert f.read() == "guild-1/broker-tests"
        assert os.stat(os.path.join(out, name + ".txt")).st_uid == host_env.uid
        for d in elsewhere:
            assert not os.path.exists(os.path.join(d, name + ".txt")), d
        # The same write into other/ works for the tool whose writePath it is: the rule
        # above, not the directory's permissions, refused it.
        r = call(rig, "other", {"name": name})
        assert r["mine"] == "ok", r
        assert os.path.exists(os.path.join(other, name + ".txt"))
    finally:
        rig.stop()


@pytest.mark.parametrize("case", ["missing", "not writable", "symlink", "key file in /etc"])
def test_bad_write_paths_stop_brokerd_at_start(host_env, probe_dir, case):
    out = os.path.join(probe_dir, "out")
    cfg = {"tools": [tool("ticket", probe(probe_dir, "write", out), write_paths=[out])]}
    says = {"missing": "No such file or directory (it must be an existing directory)",
            "not writable": "this account cannot write", "symlink": "is or goes through a symbolic link",
            "key file in /etc": "apiKey.file: host tools and key commands run with /etc hidden"}[case]
    if case == "missing":
        cfg["tools"][0]["writePaths"] = [os.path.join(probe_dir, "absent")]
    elif case == "not writable":
        cfg["tools"][0]["writePaths"] = [probe_dir]  # root's, 0755
    elif case == "symlink":
        os.symlink(out, os.path.join(probe_dir, "link"))
        cfg["tools"][0]["writePaths"] = [os.path.join(probe_dir, "link")]
    else:
        cfg["apiKey"] = {"file": "/etc/hostname"}
    with pytest.raises(HarnessError) as e:
        BrokerRig(host_env, config=cfg)
    assert says in str(e.value), str(e.value)[-3000:]
    assert "tools[0].writePaths[0]" in str(e.value) or case == "key file in /etc"


# ---------------------------------------------------------------- what a tool cannot reach

def test_a_tool_reaches_no_key_source_and_not_brokerd(host_env, probe_dir):
    creds = os.path.join(probe_dir, "creds")
    secret = "sk-credential-" + secrets.token_hex(8)
    owned_file(os.path.join(creds, "model-api-key"), secret + "\n", host_env.uid, host_env.gid)
    pidfile, pathsfile = os.path.join(probe_dir, "brokerd.pid"), os.path.join(probe_dir, "paths")
    rig = start_rig(host_env, extra_env={"CREDENTIALS_DIRECTORY": creds},
                    config={"tools": [tool("snoop", probe(probe_dir, "snoop", pidfile, pathsfile))]})
    try:
        pid = brokerd_pid(rig)
        with open(pidfile, "w") as f:
            f.write(f"{pid}\n")
        d = rig.dirs
        hidden = {
            rig.key_file: "the model key file", rig.mcp_key_file: "an MCP key file",
            d["etc"]: "the key files' directory", rig.config_path: "the config",
            creds: "$CREDENTIALS_DIRECTORY", os.path.join(creds, "model-api-key"): "a credential",
            os.path.join(d["rt"], "brokerd.sock"): "the daemons' sockets", d["run"]: "runRoot",
            d["ws"]: "workspaceRoot", d["state"]: "the state directory",
        }
        with open(pathsfile, "w") as f:
            f.write("".join(p + "\n" for p in hidden))
        r = call(rig, "snoop")
        # Each is behind an empty tmpfs of mode 0: not even listed.
        assert r["paths"] == {p: "EACCES" for p in hidden}, r["paths"]
        # brokerd is not in the tool's PID namespace: no /proc entry, no signal.
        for k in ("environ", "mem", "maps", "cmdline", "status"):
            assert r[k] == "ENOENT", (k, r)
        assert r["signal0"] == r["sigterm"] == "ESRCH", r
        assert r["sigterm_all"] == "ESRCH", r  # nobody but the sandbox's PID 1 and itself
        assert r["pids"] == [1, r["self"]] and r["self"] == 2, r
        assert pid not in r["pids"]
        # brokerd lives on and serves.
        assert rig.procs["brokerd"].poll() is None
        assert os.path.exists(f"/proc/{pid}")
        assert call(rig, "snoop")["pids"] == [1, 2]
        assert secret not in rig.broker_log()
    finally:
        rig.stop()


def test_a_key_command_sees_its_key_but_not_brokerd(host_env, probe_dir):
    """Key commands run in a sandbox of their own too: what a key command prints must come
    from somewhere it can read, so key sources stay visible to it (unlike to a tool), but
    brokerd's memory and brokerd do not."""
    key = "sk-command-" + secrets.token_hex(12)
    keyfile = os.path.join(probe_dir, "keys", "model-key")
    owned_file(keyfile, key + "\n", host_env.uid, host_env.gid)
    pidfile, sock = os.path.join(probe_dir, "brokerd.pid"), os.path.join(probe_dir, "report.sock")
    reports = []
    got = threading.Event()

    def record(r, conn):
        reports.append(r)
        got.set()
        conn.sendall(b"ok")

    server = serve_json_records(sock, host_env.uid, record)
    rig = None
    try:
        rig = start_rig(host_env, config={"apiKey": {"command": probe(probe_dir, "key", keyfile, pidfile, sock)}})
        pid = brokerd_pid(rig)
        with open(pidfile, "w") as f:
            f.write(f"{pid}\n")
        before = len(rig.model_requests())
        with rig.turn() as t:
            a = t.post("/model", {"messages": [{"role": "user", "content": "hi"}]})
        assert a.status == 200, (a.status, a.body, rig.broker_log()[-3000:])
        assert rig.model_requests()[before]["headers"]["authorization"] == "Bearer " + key
        assert got.wait(10), "the key command never reported"
        r = reports[-1]
        assert r["paths"] == {keyfile: "ok:" + key + "\n"}, r
        for k in ("environ", "mem", "maps"):
            assert r[k] == "ENOENT", (k, r)
        assert r["signal0"] == r["sigterm"] == "ESRCH", r
        assert r["pids"] == [1, 2], r
        assert rig.procs["brokerd"].poll() is None
    finally:
        if rig:
            rig.stop()
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- interpreters, network

NODE_TOOL = ("let s = ''; process.stdin.on('data', d => s += d).on('end', () => "
             "console.log(JSON.stringify({node: JSON.parse(s).tool, jit: [...Array(2000).keys()]"
             ".map(x => x * x).reduce((a, b) => a + b, 0)})))")
SH_TOOL = 'read -r line; echo "sh $((6 * 7))"; echo x > /dev/null && echo devnull'


def test_interpreters_run(host_env, probe_dir):
    assert os.path.exists("/usr/bin/node"), "nodejs is missing (scripts/setup-debian.sh installs it)"
    rig = start_rig(host_env, config={"tools": [
        tool("node", ["/usr/bin/node", "-e", NODE_TOOL]),
        tool("shell", ["/bin/sh", "-c", SH_TOOL]),
        tool("python", ["/usr/bin/python3", "-c", "import json, sys; json.dump({'python': json.load(sys.stdin)['tool']}, "
                                                 "sys.stdout)"]),
    ]})
    try:
        with rig.turn() as t:
            for name, want in (("node", '{"node":"node","jit":2664667000}\n'), ("shell", "sh 42\ndevnull\n"),
                               ("python", '{"python": "python"}')):
                a = t.post(f"/tools/{name}", {})
                assert a.status == 200, (name, a.status, a.body, rig.broker_log()[-3000:])
                assert a.json()["result"] == want, name
    finally:
        rig.stop()


class Marker(http.server.BaseHTTPRequestHandler):
    body = b""
    hits = 0

    def do_GET(self):
        Marker.hits += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_a_tool_reaches_a_loopback_server(host_env, probe_dir):
    Marker.body = ("marker-" + secrets.token_hex(8)).encode()
    Marker.hits = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Marker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rig = None
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x"
        rig = start_rig(host_env, config={"tools": [tool("fetch", probe(probe_dir, "fetch", url))]})
        r = call(rig, "fetch")
        assert r == {"body": "ok:" + Marker.body.decode()}, r
        assert Marker.hits == 1
    finally:
        if rig:
            rig.stop()
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- real turns

def test_real_turns_run_sandboxed_tools(make_suite, probe_dir):
    """The model asks for the tool (fake_model "#tools 1 host_NAME"), the worker in its
    container calls the broker, brokerd's launcher runs the tool in its sandbox, and its
    report comes back as the reply ("tool results: ...")."""
    out, other = os.path.join(probe_dir, "out"), os.path.join(probe_dir, "other")
    pidfile, pathsfile = os.path.join(probe_dir, "brokerd.pid"), os.path.join(probe_dir, "paths")
    s = make_suite(config={"tools": [
        tool("ticket", probe(probe_dir, "write", out, other), write_paths=[out]),
        tool("snoop", probe(probe_dir, "snoop", pidfile, pathsfile)),
        tool("node", ["/usr/bin/node", "-e", NODE_TOOL]),
    ]})
    pid = Suite._daemon_pid(s.procs["brokerd"])
    with open(pidfile, "w") as f:
        f.write(f"{pid}\n")
    channel = "guild-tb/chan-" + secrets.token_hex(4)
    hidden = [os.path.join(s.dirs["rt"], "control.sock"), s.dirs["run"], s.dirs["ws"], s.key_file, s.config_path]
    with open(pathsfile, "w") as f:
        f.write("".join(p + "\n" for p in hidden))
    assert s.cli("on", channel).returncode == 0

    def turn(text):
        p = s.cli("say", channel, "--author", "1001", "--name", "Alice", text)
        assert p.returncode == 0, (p.stdout, p.stderr, s.logs())
        prefix = "tool results: "
        assert p.stdout.startswith(prefix), p.stdout
        return json.loads(p.stdout[len(prefix):])

    r = turn("#tools 1 host_ticket")
    assert r["mine"] == "ok" and r["elsewhere"] == {other: "EROFS"}, r
    with open(os.path.join(out, "ticket.txt"), encoding="utf-8") as f:
        assert f.read() == channel
    assert not os.path.exists(os.path.join(other, "ticket.txt"))

    # control.sock among them: a tool that guest text steers cannot switch a channel off.
    r = turn("#tools 1 host_snoop")
    assert r["paths"] == {p: "EACCES" for p in hidden}, r
    assert r["environ"] == r["mem"] == "ENOENT" and r["sigterm"] == "ESRCH" and r["pids"] == [1, 2], r

    assert turn("#tools 1 host_node") == {"node": "node", "jit": 2664667000}
