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
refusals come from non-dumpability, not from a probe that cannot work."""
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading

import pytest

from harness import HarnessError, docker, docker_bin, wait_until
from pi_rig import pi_image
from precheck_suite import PrecheckSuite, build_precheck_image
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
        finally:
            t.join(120)
        assert out["ev"].get("wake") is False, out
        # Nothing reached the MCP server: the precheck called nothing, and neither did the guest.
        assert s.mcp_requests() == []
    finally:
        s.stop()


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
            wait_until(lambda: any(r["path"].startswith("/v1/messages") for r in s.anthropic.requests()), 90,
                       "the turn's model request")
            assert_escape_refused(s, s.container_name("pi"), "/run/broker/broker.sock", "/workspace")
        finally:
            t.join(180)
        p, _ = result["say"]
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("echo: "), p.stdout
        # One model request, the turn's own; no file of the guest's in the workspace.
        assert len([r for r in s.anthropic.requests() if r["path"].startswith("/v1/messages")]) == 1
        assert MARK not in os.listdir(os.path.join(s.dirs["ws"], channel_hash("pi")))
    finally:
        s.stop()
