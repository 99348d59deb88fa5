# SPDX-License-Identifier: Apache-2.0
"""The socket-activation path of the three daemons, the way the shipped systemd units use
it (systemd/*.socket.in): root creates each listening socket with the unit's type, owner
and mode, and the daemon, running as the service account, receives it (sd_listen_fds)
when the first peer connects. systemd-socket-activate plays PID 1's part here; setpriv
switches to the service account without forking, so LISTEN_PID stays right.

These tests need systemd-socket-activate (package systemd) and setpriv (util-linux)."""
import grp
import os
import shutil
import signal
import socket
import subprocess

import pytest

from harness import SOCKETS, STOP_GRACE_S, Suite, wait_until

ACTIVATE = shutil.which("systemd-socket-activate") or "/usr/bin/systemd-socket-activate"
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
# What the .socket units declare.
SOCKET_MODE = {"statd": 0o660, "runnerd": 0o600, "brokerd": 0o600}
SOCKET_TYPE = {"statd": "stream", "runnerd": "seqpacket", "brokerd": "seqpacket"}
ACTIVATED_LOG = {"statd": "listening on the socket passed by systemd", "brokerd": "(socket activation)"}

pytestmark = pytest.mark.skipif(not (os.access(ACTIVATE, os.X_OK) and os.access(SETPRIV, os.X_OK)),
                                reason="systemd-socket-activate or setpriv is not installed")


def activated_argv(suite, name, sock_type):
    """systemd-socket-activate listening on the daemon's socket, then the daemon as the
    service account (runnerd with the docker group, as SupplementaryGroups=docker gives it)."""
    path = os.path.join(suite.dirs["rt"], SOCKETS[name])
    groups = [f"--groups={grp.getgrnam('docker').gr_gid}"] if name == "runnerd" else ["--clear-groups"]
    account = suite.account(name)
    return [ACTIVATE, "-l", path, *(["--seqpacket"] if sock_type == "seqpacket" else []),
            SETPRIV, f"--reuid={account.uid}", f"--regid={account.gid}", *groups, "--",
            suite.env.program(name), "--config", suite.config_path, "--runtime-dir", suite.dirs["rt"]]


def wait_for_socket(path, proc, timeout=10):
    def created():
        if proc.poll() is not None:
            raise AssertionError(f"systemd-socket-activate exited ({proc.returncode}) without creating {path}")
        return os.path.exists(path)
    wait_until(created, timeout, f"systemd-socket-activate to create {path}")


class ActivatedSuite(Suite):
    """A suite whose daemons are socket-activated; socket_types overrides a daemon's
    socket type (to offer it the wrong one)."""

    def __init__(self, env, socket_types=None, **kw):
        self.socket_types = dict(SOCKET_TYPE, **(socket_types or {}))
        self.inodes = {}
        super().__init__(env, **kw)

    def start_daemon(self, name, extra_env=None):
        log = open(self.log_path(name), "ab")
        self._logfiles.append(log)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        env.update(extra_env or {})
        p = subprocess.Popen(activated_argv(self, name, self.socket_types[name]), stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, env=env, start_new_session=True)
        self.procs[name] = p
        path = os.path.join(self.dirs["rt"], SOCKETS[name])
        wait_for_socket(path, p)
        # SocketUser=, SocketGroup=, SocketMode= of the unit: each socket belongs to the
        # account that connects to it (control.sock and runnerd.sock statd's, brokerd.sock
        # the runner's).
        owner = self.account("runnerd") if name == "brokerd" else self.account("statd")
        os.chown(path, owner.uid, owner.gid)
        os.chmod(path, SOCKET_MODE[name])
        self.inodes[name] = os.lstat(path).st_ino

    def stop_daemon(self, name, sig=signal.SIGTERM):
        # The activator execs the daemon in place: the process to signal is the one we started.
        p = self.procs.get(name)
        if not p or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.exit_codes[name] = p.returncode


@pytest.fixture
def activated(rts_env):
    suites = []

    def start(**kw):
        s = ActivatedSuite(rts_env, **kw)
        suites.append(s)
        return s

    yield start
    for s in suites:
        s.stop()


def test_turns_through_socket_activated_daemons(activated):
    s = activated()
    channel = "guild-1/activated"
    assert s.cli("on", channel).returncode == 0
    first = s.cli("say", channel, "--author", "1001", "--name", "Alice", "remember that the blue key opens the shed")
    assert first.returncode == 0, first.stderr + s.logs()
    assert first.stdout.strip() == "I will remember that."
    second = s.cli("say", channel, "--author", "1001", "--name", "Alice", "what do you remember?")
    assert second.returncode == 0, second.stderr
    assert "the blue key opens the shed" in second.stdout

    for name in ("statd", "runnerd", "brokerd"):
        p = s.procs[name]
        # The activator exec'd the daemon, which serves the socket root created for it:
        # had it bound its own, the file would be a new inode.
        assert p.poll() is None, f"{name} exited: " + s.log_tail(name)
        assert os.readlink(f"/proc/{p.pid}/exe") == s.env.program(name)
        path = os.path.join(s.dirs["rt"], SOCKETS[name])
        assert os.lstat(path).st_ino == s.inodes[name], f"{name} replaced the activated socket"
        with open(f"/proc/{p.pid}/status", encoding="ascii") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        assert status["Uid"].split()[0] == str(s.account(name).uid)
        if name in ACTIVATED_LOG:
            assert ACTIVATED_LOG[name] in s.log_tail(name)

    # A clean stop; the socket belongs to whoever activated the daemon, so it stays.
    s.stop()
    for name in ("statd", "runnerd", "brokerd"):
        assert s.exit_codes[name] == 0, f"{name} exited with {s.exit_codes[name]}"


@pytest.mark.parametrize("name", ["statd", pytest.param("runnerd", marks=pytest.mark.docker), "brokerd"])
def test_socket_of_the_wrong_type_is_refused(host_env, request, name):
    """A unit that hands a daemon the wrong kind of socket is a misconfiguration the daemon
    must refuse at start, not serve. (runnerd runs with the docker group: it asks for
    Docker.)"""
    env = request.getfixturevalue("rts_env") if name == "runnerd" else host_env
    s = Suite(env, start=False, fake_model=False,
              config={"model": "m", "modelUrl": "https://127.0.0.1:9/v1/chat/completions", "caFile": None})
    try:
        s._make_dirs()
        s._write_config()
        wrong = "stream" if SOCKET_TYPE[name] == "seqpacket" else "seqpacket"
        path = os.path.join(s.dirs["rt"], SOCKETS[name])
        with open(s.log_path(name), "ab") as log:
            p = subprocess.Popen(activated_argv(s, name, wrong), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True)
            try:
                wait_for_socket(path, p)
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if wrong == "stream" else socket.SOCK_SEQPACKET)
                c.connect(path)  # activates the daemon
                try:
                    rc = p.wait(STOP_GRACE_S * 3)
                finally:
                    c.close()
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        log_text = s.log_tail(name)
        assert rc == 1, f"{name} served a {wrong} socket (exit {rc}):\n{log_text}"
        assert "listen" in log_text, log_text
    finally:
        s.stop(check_leftovers=False)
