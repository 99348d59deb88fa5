# SPDX-License-Identifier: Apache-2.0
"""Who may connect to the three sockets of a hand-started suite (DESIGN.md sections 2 and 5,
HACKING.md "Daemon links"):

  control.sock   0660, the service account's group: the account and the bot's account (a
                 member of that group) connect; any other uid gets EACCES
  runnerd.sock,  0600: only the daemon's own account reaches them (single-account mode:
  brokerd.sock   the service account), plus in accounts mode its one peer account by an
                 ACL entry (statd's for runnerd.sock, the runner's for brokerd.sock); root,
                 which passes any file mode, is refused by the SO_PEERCRED check before a
                 byte is read: the connection is closed, nothing it sent is honoured, the
                 refusal is logged, and the daemon goes on serving. (test_accounts.py has
                 the other accounts' refusals.)

An unrelated system account is created for the test (and removed); clients run as it with
setpriv (no capabilities once the uid is not 0).
"""
import json
import os
import pwd
import secrets
import socket
import stat
import subprocess
import time

import pytest

import rtsproto

CLIENT = r"""
import errno, json, os, socket, sys
path, kind = sys.argv[1], sys.argv[2]
with open("/proc/self/status") as f:
    st = dict(l.split(":", 1) for l in f if ":" in l)
out = {"uid": os.getuid(), "euid": os.geteuid(), "groups": sorted(os.getgroups()),
       "capeff": int(st["CapEff"].strip(), 16)}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_SEQPACKET)
s.settimeout(20)
try:
    s.connect(path)
except OSError as e:
    out["result"] = errno.errorcode.get(e.errno, str(e.errno))
else:
    out["result"] = "connected"
    if kind == "stream":
        s.sendall(b'{"op":"status","id":"outsider"}\n')
        data = b""
        while b"\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        out["answer"] = json.loads(data.split(b"\n")[0]) if b"\n" in data else None
print(json.dumps(out))
"""

REFUSED_RUNNERD = "refusing a runnerd.sock connection from an account other than statd's"
REFUSED_BROKERD = "refusing a brokerd.sock peer that is not runnerd's account"


@pytest.fixture
def outsider():
    """An unrelated system account (own group, no home), removed at the end."""
    name = "rts-outsider-" + secrets.token_hex(3)
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield pw
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", name], check=False, capture_output=True)  # when userdel kept it


def connect_as(uid, gid, path, kind, groups=None):
    """Connect to path as uid/gid (supplementary groups: exactly `groups`); the client's report."""
    grp_args = ["--groups", ",".join(str(g) for g in groups)] if groups else ["--clear-groups"]
    p = subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(gid), *grp_args, "--",
                        "/usr/bin/python3", "-I", "-c", CLIENT, path, kind],
                       capture_output=True, text=True, timeout=60, cwd="/", stdin=subprocess.DEVNULL,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    # Really that account, and without any capability that would pass a file mode.
    assert r["uid"] == r["euid"] == uid and r["capeff"] == 0, r
    assert r["groups"] == sorted(set(groups or [])), r
    return r


def sock_paths(s):
    rt = s.dirs["rt"]
    return {"control.sock": (os.path.join(rt, "control.sock"), "stream"),
            "runnerd.sock": (os.path.join(rt, "runnerd.sock"), "seqpacket"),
            "brokerd.sock": (os.path.join(rt, "brokerd.sock"), "seqpacket")}


def count(text, needle):
    return text.count(needle)


def socket_inodes(pid):
    """The inodes of the sockets process pid holds open."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[len("socket:["):-1]))
    return out


def expect_dropped(path, sends):
    """Connect as root (this process), send each (type, fd, fields) while the daemon lets
    us, then expect the link to be closed without a single message back."""
    conn = rtsproto.Conn.connect(path)
    try:
        for mtype, fd, fields in sends:
            try:
                conn.send(mtype, fd=fd, **fields)
            except (BrokenPipeError, ConnectionResetError):
                break
        try:
            m = conn.recv(timeout=30)
        except ConnectionResetError:
            m = None
        assert m is None, f"the daemon answered a root peer with {m.name} {m.fields}"
    finally:
        conn.close()


@pytest.mark.parametrize("accounts", [True, False], ids=["accounts", "single-account"])
def test_socket_modes_and_who_may_connect(make_suite, outsider, accounts):
    s = make_suite(accounts=accounts)
    svc_uid, svc_gid = s.env.uid, s.env.gid
    socks = sock_paths(s)

    st = os.lstat(socks["control.sock"][0])
    assert stat.S_ISSOCK(st.st_mode)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o660, svc_uid, svc_gid)
    for name, daemon in (("runnerd.sock", "runnerd"), ("brokerd.sock", "brokerd")):
        st = os.lstat(socks[name][0])
        assert stat.S_ISSOCK(st.st_mode)
        # Accounts mode: the group bits are the mask of the one peer's ACL entry.
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o660 if accounts else 0o600,
                                                         s.account(daemon).uid), name
    assert outsider.pw_gid != svc_gid and outsider.pw_uid != svc_uid

    # An unrelated uid: refused everywhere (here already by the 0750 runtime directory).
    for name, (path, kind) in socks.items():
        r = connect_as(outsider.pw_uid, outsider.pw_gid, path, kind)
        assert r["result"] == "EACCES", (name, r)

    rt = s.dirs["rt"]
    old_mode = stat.S_IMODE(os.stat(rt).st_mode)
    try:
        # With a world-searchable runtime directory the sockets' own modes still refuse it.
        os.chmod(rt, 0o755)
        for name, (path, kind) in socks.items():
            r = connect_as(outsider.pw_uid, outsider.pw_gid, path, kind)
            assert r["result"] == "EACCES", (name, r)
    finally:
        os.chmod(rt, old_mode)

    # The bot's account, a member of the service group, talks to control.sock only.
    path, kind = socks["control.sock"]
    r = connect_as(outsider.pw_uid, outsider.pw_gid, path, kind, groups=[svc_gid])
    assert r["result"] == "connected", r
    assert r["answer"] and r["answer"].get("id") == "outsider" and r["answer"].get("ok") is True, r
    for name in ("runnerd.sock", "brokerd.sock"):
        path, kind = socks[name]
        r = connect_as(outsider.pw_uid, outsider.pw_gid, path, kind, groups=[svc_gid])
        assert r["result"] == "EACCES", (name, r)

    # Nothing of this reached the daemon links.
    assert count(s.log_tail("runnerd", 1 << 20), REFUSED_RUNNERD) == 0
    assert count(s.log_tail("brokerd", 1 << 20), REFUSED_BROKERD) == 0


def test_root_is_refused_by_peer_credentials(make_suite):
    s = make_suite()
    socks = sock_paths(s)

    # runnerd: root says HELLO and asks for a turn that a trusted statd would get run.
    channel = "guild-s/root-asks-" + secrets.token_hex(4)
    ws = s.workspace(channel)
    os.mkdir(ws, 0o700)
    os.chown(ws, s.env.uid, s.env.gid)
    turn_id = secrets.token_hex(8)
    wsfd = rtsproto.open_workspace(ws)
    try:
        expect_dropped(socks["runnerd.sock"][0], [
            (rtsproto.HELLO, None, {"version": rtsproto.PROTO_VERSION, "program": "root-statd"}),
            (rtsproto.TURN_RUN, wsfd, rtsproto.turn_run_fields(turn_id, channel, s.dirs["ws"], text="from root")),
        ])
    finally:
        os.close(wsfd)
    runnerd_log = s.log_tail("runnerd", 1 << 20)
    assert count(runnerd_log, REFUSED_RUNNERD) == 1, runnerd_log[-3000:]
    assert turn_id not in runnerd_log
    assert [n for n in os.listdir(s.dirs["run"]) if not n.startswith(".")] == []  # no run dir made
    s.assert_no_turn(0, "a TURN_RUN from root")

    # brokerd: root says HELLO and binds a listening socket of its own, with a binding a
    # trusted runnerd would get accepted (brokerd would then hold that socket).
    lpath = os.path.join(s.root, "root-bind.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lsock.bind(lpath)
        lsock.listen(8)
        ino = os.fstat(lsock.fileno()).st_ino
        bind_id = secrets.token_hex(8)
        expect_dropped(socks["brokerd.sock"][0], [
            (rtsproto.HELLO, None, {"version": rtsproto.PROTO_VERSION, "program": "root-runnerd"}),
            (rtsproto.BROKER_BIND, lsock.fileno(),
             {"turn_id": bind_id, "channel": channel, "channel_hash": rtsproto.channel_hash(channel),
              "speaker_id": "1", "speaker_name": "Root", "principal_id": "p-root",
              "deadline_ms": int(time.monotonic() * 1000) + 60000}),
        ])
        brokerd_pid = s._daemon_pid(s.procs["brokerd"])
        assert brokerd_pid, "cannot find brokerd's pid"
        assert ino not in socket_inodes(brokerd_pid), "brokerd took the listening socket root sent"
    finally:
        lsock.close()
    brokerd_log = s.log_tail("brokerd", 1 << 20)
    assert count(brokerd_log, REFUSED_BROKERD) == 1, brokerd_log[-3000:]
    assert bind_id not in brokerd_log

    # Both keep serving: a real turn goes statd -> runnerd -> brokerd -> model.
    ch = "guild-s/after-refusals"
    assert s.cli("on", ch).returncode == 0
    marker = "after-refusal-" + secrets.token_hex(4)
    p = s.cli("say", ch, "--author", "77", "--name", "Zed", "hello " + marker)
    assert p.returncode == 0, p.stderr + s.logs()
    assert p.stdout.startswith("echo: ") and marker in p.stdout, p.stdout
    assert all(r["headers"]["authorization"] == "Bearer " + s.api_key for r in s.fake.requests())
    assert s.containers() == []
    # The refused peers did not count against anything later: still one refusal each.
    assert count(s.log_tail("runnerd", 1 << 20), REFUSED_RUNNERD) == 1
    assert count(s.log_tail("brokerd", 1 << 20), REFUSED_BROKERD) == 1
