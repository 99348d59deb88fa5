# SPDX-License-Identifier: Apache-2.0
"""An escape from one container reaches no other container's process (issue 12,
roundtable-sandbox(7) "Accounts"): every container of ours runs as the one guest account,
so what keeps a guest that escaped one of them out of another's process is that the
other's entry process is non-dumpable from exec on. The sealed worker also calls
PR_SET_DUMPABLE itself; node (the precheck and the rich images) cannot, so each image ships
its entry binary execute-only and the kernel does it at exec (worker/node-closure.sh,
worker/Makemodule.am).

The escaped guest is a host process running as the guest account (test_accounts.run_as),
started while a real precheck or a real rich turn runs in a real container of the real
image. Each probe is also run against a process of the guest's own, where it succeeds: the
refusals come from non-dumpability, not from a probe that cannot work. What the escape is
after, a call through the other container's broker, is sent as the guest and then, as the
control, as root on the same path: root's reaches the upstream, the guest's does not."""
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading

import pytest

from broker_rig import request_bytes
from harness import QUIET_FORWARD_S, HarnessError, assert_quiet, docker, docker_bin, wait_until
from pi_rig import pi_image
from precheck_suite import PrecheckSuite, build_precheck_image
from rich_broker_rig import model_body
from rich_broker_rig import request_bytes as sdk_request_bytes
from rich_host_rig import RichHostSuite, channel_hash
from test_accounts import run_as

# A process of the guest's own, dumpable (python3 is readable): a Unix socket listening in a
# directory of its own, then waiting until it is killed.
OWN = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(sys.argv[1], "broker.sock"))
s.listen(8)
print("ready", flush=True)
sys.stdin.read()
'''

MARK = "escaped-guest-was-here"

# One request on a broker socket (argv[1]; its bytes as hex in argv[2]): prints
# {"result": "ok" | the errno's name, "answer": the answer's status line}.
SEND = r'''
import errno, json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
try:
    s.connect(sys.argv[1])
    s.sendall(bytes.fromhex(sys.argv[2]))
    data = s.recv(65536)
    out = {"result": "ok", "answer": data.split(b"\r\n", 1)[0].decode("latin-1")}
except OSError as e:
    out = {"result": errno.errorcode.get(e.errno, str(e.errno))}
finally:
    s.close()
print(json.dumps(out))
'''


def send_as(account, path, data):
    """SEND data to the socket at path as account (None: as root, the control)."""
    drop = [] if account is None else ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
                                       "--clear-groups", "--no-new-privs", "--"]
    p = subprocess.run(drop + ["/usr/bin/python3", "-c", SEND, path, data.hex()], capture_output=True, text=True,
                       timeout=60, cwd="/", stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def mcp_call(q):
    """A call of the precheck's approved tool docs/echo, which its broker forwards."""
    return request_bytes("/mcp/docs", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                       "params": {"name": "echo", "arguments": {"q": q}}})


def entry_pid(name):
    return int(docker("inspect", "--format", "{{.State.Pid}}", name).stdout)


class OwnProcess:
    """A dumpable process of the guest account with a socket at DIR/broker.sock and a
    writable DIR (its stand-in workspace); .pid, .dir."""

    def __init__(self, guest):
        self.dir = tempfile.mkdtemp(prefix="rts-own-", dir="/tmp")
        os.chown(self.dir, guest.uid, guest.gid)
        os.chmod(self.dir, 0o700)
        self.proc = subprocess.Popen(["setpriv", f"--reuid={guest.uid}", f"--regid={guest.gid}", "--clear-groups",
                                      "--no-new-privs", "--", "/usr/bin/python3", "-c", OWN, self.dir],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def close(self):
        # The probe's PTRACE_ATTACH may leave it stopped (its SIGSTOP can land after the
        # detach): SIGKILL ends it either way.
        self.proc.kill()
        self.proc.wait(30)
        self.proc.stdin.close()
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def probes(pid, sock, workspace):
    """What an escaped guest tries first against the process PID whose broker socket is SOCK
    and whose workspace is WORKSPACE (both paths inside its root)."""
    return [("ptrace", "ptrace", pid),
            ("environ", "read", f"/proc/{pid}/environ"),
            ("root", "listdir", f"/proc/{pid}/root"),
            ("broker socket", "stream", f"/proc/{pid}/root{sock}"),
            ("workspace", "create", f"/proc/{pid}/root{workspace}")]


def container_pids(name):
    """Host pids of every process in container NAME (its entry process first)."""
    p = docker("top", name, "-o", "pid")
    return [int(x) for x in p.stdout.split()[1:]]


def assert_escape_refused(suite, name, sock, workspace):
    """An escaped guest reaches none of container NAME's processes; the same probes work
    against a process of the guest's own."""
    guest = suite.env.accounts["guest"]
    pids = container_pids(name)
    assert pids
    for pid in pids:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            uid = next(line.split()[1] for line in f if line.startswith("Uid:"))
        assert int(uid) == guest.uid, (pid, uid)  # the container's process, as the guest
        # Non-dumpable: the kernel gives the files of /proc/PID to root.
        assert os.stat(f"/proc/{pid}/environ").st_uid == 0, pid
    own = OwnProcess(guest)
    try:
        got_own = run_as(suite, guest, probes(own.pid, os.path.join(own.dir, "broker.sock"), own.dir))
        assert got_own == {"ptrace": "ok", "environ": "ok", "root": "ok", "broker socket": "ok", "workspace": "ok"}
        for pid in pids:
            got = run_as(suite, guest, probes(pid, sock, workspace))
            assert got == {"ptrace": "EPERM", "environ": "EACCES", "root": "EACCES", "broker socket": "EACCES",
                           "workspace": "EACCES"}, (pid, got)
    finally:
        own.close()


def image_file(image, path):
    """The tar header of PATH in IMAGE (docker cp from a created, never started container)."""
    cid = docker("create", image).stdout.strip()
    try:
        out = subprocess.run([docker_bin(), "cp", f"{cid}:{path}", "-"], capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL, check=True).stdout
    finally:
        docker("rm", "-f", cid, check=False)
    with tarfile.open(fileobj=io.BytesIO(out)) as t:
        return t.getmembers()[0]


def assert_execute_only(image, path):
    m = image_file(image, path)
    assert m.isfile(), (image, path)
    # Root's, and nobody else may read it: the guest account runs it but cannot read it.
    assert (m.uid, m.mode & 0o7777) == (0, 0o711), (image, path, m.uid, oct(m.mode))


def test_the_sealed_worker_is_execute_only_in_its_image(rts_env):
    rts_env.require_docker()
    assert_execute_only(rts_env.image, "/roundtable-sandbox-worker")


@pytest.fixture(scope="module")
def precheck_tag(rts_env):
    return build_precheck_image(rts_env)


# A precheck that stays in its container long enough to be probed, then calls nothing.
SLOW_PRECHECK = ("export default async () => {\n"
                 "  await new Promise((r) => setTimeout(r, 20000));\n"
                 "  return { wake: false };\n"
                 "};\n")


def test_an_escaped_guest_reaches_no_live_precheck(rts_env, precheck_tag):
    assert_execute_only(precheck_tag, "/usr/bin/node")
    try:
        s = PrecheckSuite(rts_env, precheck_tag, accounts=True)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("ev", s.precheck(SLOW_PRECHECK, approved=["docs/echo"])))
        t.start()
        try:
            def live():
                for n in s.containers():
                    pid = int(docker("inspect", "--format", "{{.State.Pid}}", n, check=False).stdout or 0)
                    # Its broker socket is there (root passes through /proc/PID/root).
                    if pid and os.path.exists(f"/proc/{pid}/root/run/broker/broker.sock"):
                        return n
            name = wait_until(live, 60, "the precheck's container and its broker socket")
            assert_escape_refused(s, name, "/run/broker/broker.sock", "/tmp")
            # The call the escape is for, through the precheck's broker: refused to the guest.
            sock = f"/proc/{entry_pid(name)}/root/run/broker/broker.sock"
            assert send_as(s.env.accounts["guest"], sock, mcp_call(MARK)) == {"result": "EACCES"}
            assert assert_quiet(lambda: len(s.mcp_requests()), QUIET_FORWARD_S,
                                "an MCP request after the guest's attempt") == 0
            # The control, same request and path as root (who may pass /proc/PID/root): it
            # reaches the MCP server, so the guest's would have had it been let through.
            got = send_as(None, sock, mcp_call("control"))
            assert got["result"] == "ok" and got["answer"].startswith("HTTP/1.1 200 "), got
            wait_until(lambda: len(s.mcp_requests()) == 1, 10, "the control's MCP request")
        finally:
            t.join(120)
        assert out["ev"].get("wake") is False, out
        # Nothing reached the MCP server but the control: the precheck called nothing, and
        # nothing of the guest's got through.
        got = s.mcp_requests()
        assert [r["body"]["params"]["arguments"] for r in got] == [{"q": "control"}], got
        assert all(MARK not in r["raw"] for r in got)
    finally:
        s.stop()


def model_requests(s):
    return [r for r in s.anthropic.requests() if r["path"].startswith("/v1/messages")]


def model_call(text):
    """A model call as the Pi worker's SDK sends it, answered at once (no stream)."""
    return sdk_request_bytes("/anthropic/v1/messages", model_body(text, stream=False), worker=False)


def test_an_escaped_guest_reaches_no_live_rich_turn(rts_env):
    image = pi_image(rts_env)
    assert_execute_only(image.tag, "/usr/bin/node")
    try:
        s = RichHostSuite(rts_env, image=image.tag, accounts=True)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        assert s.rich("pi").returncode == 0
        s.wait_container("pi")
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("say", s.say("pi", "hello #sleep 20000")))
        t.start()
        try:
            # The turn is live: the model has the request and holds its answer.
            wait_until(lambda: model_requests(s), 90, "the turn's model request")
            name = s.container_name("pi")
            assert_escape_refused(s, name, "/run/broker/broker.sock", "/workspace")
            # A model call through the turn's broker: refused to the guest; the control,
            # the same call on the same path as root, reaches the model endpoint.
            sock = f"/proc/{entry_pid(name)}/root/run/broker/broker.sock"
            assert send_as(s.env.accounts["guest"], sock, model_call(MARK)) == {"result": "EACCES"}
            assert assert_quiet(lambda: len(model_requests(s)), QUIET_FORWARD_S,
                                "a model request after the guest's attempt") == 1
            got = send_as(None, sock, model_call("control"))
            assert got["result"] == "ok" and got["answer"].startswith("HTTP/1.1 200 "), got
            wait_until(lambda: len(model_requests(s)) == 2, 10, "the control's model request")
        finally:
            t.join(180)
        p, _ = result["say"]
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("echo: "), p.stdout
        # Two model requests, the turn's own and the control's; nothing of the guest's, and
        # no file of the guest's in the workspace.
        got = [json.dumps(r["body"]) for r in model_requests(s)]
        assert len(got) == 2 and "control" in got[1], got
        assert all(MARK not in r for r in got)
        assert MARK not in os.listdir(os.path.join(s.dirs["ws"], channel_hash("pi")))
    finally:
        s.stop()
