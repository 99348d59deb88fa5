# SPDX-License-Identifier: Apache-2.0
"""brokerd's launcher as a program of its own (brokerd/launcher.h, "a unit of its own"):
roundtable-sandbox-launcher socket-activated with Accept=yes, as
roundtable-sandbox-launcher@.service runs it. systemd-socket-activate(1) stands in for the
socket unit here (the same LISTEN_FDS hand-over, one instance per connection);
scripts/ci-systemd.sh runs the real units under a real systemd.

  - the launcher serves the broker account alone (SO_PEERCRED): root and another account
    are refused before anything runs, even with the socket's mode wide open; the broker
    account's RUN starts a sandbox;
  - a brokerd started with --launcher-socket runs its host tools through it, and forks
    nothing itself;
  - brokerd refuses a launcher socket that another account made.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from broker_rig import BrokerRig
from harness import HarnessError, wait_until

# One RUN of the launcher protocol (brokerd/launcher.h: five 32-bit fields in host order;
# RUN with kind BROKERD_RUN_PROBE_TOOL, index 0: "tini --version" in tools[0]'s sandbox),
# then every answer until EXITED, FAILED or the end of the run socket. Printed as JSON.
CLIENT = r'''
import json, os, socket, struct, sys
M = struct.Struct("=IIIIi")
out = {"uid": os.getuid()}
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1])
except OSError as e:
    out["connect"] = e.errno
    print(json.dumps(out))
    sys.exit(0)
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
i_r, i_w = os.pipe()
o_r, o_w = os.pipe()
e_r, e_w = os.pipe()
try:
    socket.send_fds(s, [M.pack(1, 2, 3, 0, 0)], [theirs.fileno(), i_r, o_w, e_w])
except OSError as e:
    out["send"] = e.errno
theirs.close()
for fd in (i_r, o_w, e_w, i_w):
    os.close(fd)
answers = []
mine.settimeout(20)
while True:
    try:
        data, fds, _, _ = socket.recv_fds(mine, 64, 4)
    except socket.timeout:
        answers.append("timeout")
        break
    except OSError as e:
        answers.append("error %d" % e.errno)
        break
    for fd in fds:
        os.close(fd)
    if not data:
        answers.append("eof")
        break
    v, t, k, i, val = M.unpack(data)
    answers.append([t, val, len(fds)])
    if t in (5, 7):
        break
out["answers"] = answers
if answers and answers[-1] != "timeout" and isinstance(answers[-1], list) and answers[-1][0] == 7:
    chunks = []
    while True:
        b = os.read(o_r, 4096)
        if not b:
            break
        chunks.append(b)
    out["stdout"] = b"".join(chunks).decode(errors="replace")
print(json.dumps(out))
'''

STARTED, FAILED, EXITED = 3, 5, 7


class Activator:
    """systemd-socket-activate --accept running roundtable-sandbox-launcher as account
    (uid, gid) on DIR/launcher.sock for the rig's config and runtime directory."""

    def __init__(self, rig, uid, gid, mode=0o777):
        self.dir = tempfile.mkdtemp(prefix="rtsla-", dir="/tmp")
        os.chown(self.dir, uid, gid)
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "launcher.sock")
        self.log_path = os.path.join(self.dir, "launcher.log")
        self.log = open(self.log_path, "ab")
        self.final = None
        self.proc = subprocess.Popen(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
             "systemd-socket-activate", "--seqpacket", "--accept", "-l", self.path, "--",
             rig.env.program("launcher"), "--config", rig.config_path, "--runtime-dir", rig.dirs["rt"]],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True)
        wait_until(lambda: os.path.exists(self.path) or self.proc.poll() is not None, 10,
                   "systemd-socket-activate to listen")
        assert self.proc.poll() is None, self.text()
        # Open to every account: what refuses a peer must be the launcher's own check.
        os.chmod(self.path, mode)

    def text(self):
        if self.final is not None:
            return self.final
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def instances(self):
        """Launcher processes the activator started that still run."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children", encoding="ascii") as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        if self.final is None:
            self.final = self.text()  # what tests read after the stop
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_client(path, uid, gid):
    p = subprocess.run([sys.executable, "-c", CLIENT, path], user=uid, group=gid, extra_groups=[],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture
def rig(host_env):
    """brokerd alone with its tools (forked launcher), for the config and directories."""
    r = BrokerRig(host_env)
    try:
        yield r
    finally:
        r.stop()


def test_the_launcher_serves_the_broker_account_alone(host_env, rig):
    broker = rig.account("brokerd")
    act = Activator(rig, broker.uid, broker.gid)
    try:
        others = [("root", 0, 0), ("guest", host_env.accounts["guest"].uid, host_env.accounts["guest"].gid)]
        for name, uid, gid in others:
            out = run_client(act.path, uid, gid)
            # Connected (the socket's mode lets anyone in), then dropped unanswered: no
            # STARTED, so no sandbox ran.
            assert "connect" not in out, (name, out)
            assert out["answers"] == ["eof"], (name, out, act.text())
            wait_until(lambda: f"refused a peer running as uid {uid} " in act.text(), 10,
                       f"the launcher's refusal of {name}")
        assert "serving brokerd" not in act.text()
        # The same RUN from the broker account starts the probe in tools[0]'s sandbox.
        out = run_client(act.path, broker.uid, broker.gid)
        assert out["answers"] == [[STARTED, 0, 1], [EXITED, 0, 0]], (out, act.text())
        assert "tini version" in out["stdout"], out
        assert f"refused a peer running as uid {broker.uid} " not in act.text()
        # Each instance ends with its connection.
        wait_until(lambda: not act.instances(), 10, "the launcher instances to end")
    finally:
        act.stop()


class LauncherRig(BrokerRig):
    """brokerd started with --launcher-socket, the launcher under systemd-socket-activate
    as account (uid, gid)."""

    def __init__(self, env, launcher_account, mode=0o700, config=None):
        self.launcher_account = launcher_account
        self.mode = mode
        self.act = None
        self.launcher_ended = False
        try:
            super().__init__(env, config=config)
        except BaseException as e:
            if self.act:
                self.act.stop()
                e.launcher_log = self.act.text()
            raise

    def start_daemon(self, name, extra_env=None, args=()):
        if name == "brokerd":
            a = self.launcher_account
            self.act = Activator(self, a.uid, a.gid, mode=self.mode)
            args = (*args, "--launcher-socket", self.act.path)
        super().start_daemon(name, extra_env, args)

    def stop(self, *a, **kw):
        try:
            return super().stop(*a, **kw)
        finally:
            if self.act:
                # brokerd gone, its connection closed: the launcher instance ends.
                try:
                    wait_until(lambda: not self.act.instances(), 10, "the launcher instance to end")
                    self.launcher_ended = True
                finally:
                    self.act.stop()


def test_brokerd_runs_host_tools_through_the_launcher_socket(host_env):
    r = LauncherRig(host_env, host_env.accounts["service"])
    try:
        with r.turn() as t:
            a = t.post("/tools/echo", {"x": 1})
        assert a.status == 200, (a.status, a.body, r.broker_log()[-3000:])
        assert json.loads(a.json()["result"])["input"] == {"x": 1}
        pid = r._daemon_pid(r.procs["brokerd"])
        # brokerd forked no launcher: the one that ran the tool is the activator's.
        kids = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                kids += f.read().split()
        assert kids == [], kids
        assert f"serving brokerd (pid {pid})" in r.act.text(), r.act.text()
        assert len(r.act.instances()) == 1
    finally:
        r.stop()
    assert r.launcher_ended


def test_brokerd_refuses_a_launcher_socket_another_account_made(host_env):
    with pytest.raises(HarnessError) as e:
        # Open to every account: what refuses it must be brokerd's check of who listens.
        LauncherRig(host_env, host_env.accounts["guest"], mode=0o777)
    assert "cannot connect to the host tool launcher" in str(e.value), str(e.value)
    assert "not made by root or this account" in str(e.value), str(e.value)


def test_the_launcher_checks_write_paths_where_tools_write(host_env):
    """brokerd connected to a launcher does not check writePaths itself (its unit cannot
    write them); the launcher does, refuses to serve, and brokerd's start-up fails. The
    same rig without the writePath starts (test_brokerd_runs_host_tools_through_...)."""
    d = tempfile.mkdtemp(prefix="rtsro-", dir="/tmp")
    os.chmod(d, 0o755)  # root's: the service account cannot write it
    try:
        tools = [{"name": "echo", "description": "test tool", "parameters": {"type": "object"},
                  "command": ["/bin/true"], "writePaths": [d]}]
        with pytest.raises(HarnessError) as e:
            LauncherRig(host_env, host_env.accounts["service"], config={"tools": tools})
        assert "cannot run host tool echo in its sandbox" in str(e.value), str(e.value)
        assert "roundtable-sandbox-launcher@*.service" in str(e.value), str(e.value)
        # brokerd did not refuse it itself; the launcher did, naming the unit to fix.
        assert "this account cannot write" not in str(e.value), str(e.value)
        assert f"tools[0].writePaths[0]: this account cannot write {d}" in e.value.launcher_log, e.value.launcher_log
        assert "drop-in for roundtable-sandbox-launcher@.service" in e.value.launcher_log
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("program", ["statd", "runnerd", "cli"])
def test_only_brokerd_takes_launcher_socket(host_env, program):
    """A usage error (exit 2) that names the option, not an option quietly ignored nor
    another usage error; brokerd's own use is above."""
    args = [host_env.program(program), "--launcher-socket", "/nonexistent/launcher.sock"]
    p = subprocess.run(args + (["status"] if program == "cli" else []), capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    name = os.path.basename(args[0])
    assert p.stderr.startswith(f"{name}: error: --launcher-socket is brokerd's option\n"), p.stderr
    p = subprocess.run(args[:1] + ["--help"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
