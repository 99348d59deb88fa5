# SPDX-License-Identifier: Apache-2.0
"""Accounts mode (DESIGN.md 8.1, roundtable-sandbox(7) "Accounts"): an account per role, and
what a container escape still reaches.

The escaped guest is simulated the only honest way a test can: a host process running as the
guest account (the uid and gid every turn container runs as, no supplementary group), started
while two real turns are live in two real containers, tries everything a kernel or runtime
escape would try first. Each attempt must fail, with the errno of the rule that stops it."""
import grp
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
import threading

import pytest

from harness import DOCKER_GROUP, docker, setfacl, wait_until

# Run as another account; prints {attempt: "ok" | errno name} for the attempts in argv[1].
PROBE = r'''
import ctypes, errno, json, os, signal, socket, sys

def attempt(op, arg):
    if op == "read":
        with open(arg, "rb") as f:
            f.read(1)
    elif op == "listdir":
        os.listdir(arg)
    elif op in ("stream", "seqpacket"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if op == "stream" else socket.SOCK_SEQPACKET)
        try:
            s.connect(arg)
        finally:
            s.close()
    elif op == "write":
        os.close(os.open(arg, os.O_WRONLY | os.O_APPEND))
    elif op == "create":
        os.close(os.open(os.path.join(arg, "escaped-guest-was-here"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    elif op == "signal0":
        os.kill(arg, 0)
    elif op == "sigterm":
        os.kill(arg, signal.SIGTERM)
    elif op == "ptrace":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, arg, None, None) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), "ptrace")
        libc.ptrace(17, arg, None, None)  # PTRACE_DETACH
    else:
        raise ValueError(op)

out = {}
for name, op, arg in json.loads(sys.argv[1]):
    try:
        attempt(op, arg)
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
'''


def run_as(suite, account, attempts):
    """Run PROBE as account (an Account: its uid, its primary group, no other group, no
    new privileges) with attempts [(name, op, arg)]; returns {name: result}."""
    script = os.path.join(suite.root, "probe.py")
    if not os.path.exists(script):
        with open(script, "w", encoding="utf-8") as f:
            f.write(PROBE)
        os.chmod(script, 0o644)
    p = subprocess.run(["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups",
                        "--no-new-privs", "--", "/usr/bin/python3", script, json.dumps(attempts)],
                       capture_output=True, text=True, timeout=60, cwd="/", stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def daemon_pids(suite):
    return {name: suite._daemon_pid(suite.procs[name]) for name in ("statd", "runnerd", "brokerd")}


def proc_status(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def say_async(suite, channel, text, results):
    def run():
        results[channel] = suite.cli("say", channel, "--author", "1001", "--name", "Alice", text, timeout=180)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_daemons_run_as_their_accounts_and_are_not_dumpable(suite):
    accounts = suite.env.accounts
    want = {"statd": accounts["service"], "runnerd": accounts["runner"], "brokerd": accounts["broker"]}
    docker_gid = grp.getgrnam(DOCKER_GROUP).gr_gid
    for name, pid in daemon_pids(suite).items():
        st = proc_status(pid)
        assert st["Uid"].split() == [str(want[name].uid)] * 4, (name, st["Uid"])
        assert st["Gid"].split() == [str(want[name].gid)] * 4, (name, st["Gid"])
        groups = {int(g) for g in st["Groups"].split()}
        # Only runnerd holds the docker group; nobody holds the guest's.
        assert (docker_gid in groups) == (name == "runnerd"), (name, groups)
        assert accounts["guest"].gid not in groups
        # PR_SET_DUMPABLE 0: the kernel hands the files of /proc/PID to root (the
        # directory itself keeps the owner, for ps).
        for f in ("environ", "mem", "maps", "fd"):
            assert os.stat(f"/proc/{pid}/{f}").st_uid == 0, (name, f)
    # Four distinct accounts.
    assert len({a.uid for a in accounts.values()}) == 4


def test_non_dumpable_keeps_out_the_daemons_own_account(suite):
    """What PR_SET_DUMPABLE adds: a process of the daemon's own uid (a single-account
    escape, or anything else run as that account) reads none of its memory or environment
    and cannot attach to it, though it may signal it."""
    for name, pid in daemon_pids(suite).items():
        got = run_as(suite, suite.account(name), [
            ("environ", "read", f"/proc/{pid}/environ"),
            ("mem", "read", f"/proc/{pid}/mem"),
            ("maps", "read", f"/proc/{pid}/maps"),
            ("fd", "listdir", f"/proc/{pid}/fd"),
            ("ptrace", "ptrace", pid),
            ("signal0", "signal0", pid),
        ])
        assert got == {"environ": "EACCES", "mem": "EACCES", "maps": "EACCES", "fd": "EACCES",
                       "ptrace": "EPERM", "signal0": "ok"}, (name, got)


@pytest.fixture
def escape_suite(make_suite):
    """A suite whose brokerd has every key source the issue names: the model key as a
    systemd-style credential, a key file, and a secret in its environment."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="rts-creds-", dir="/tmp"))
    os.chmod(root, 0o755)  # brokerd must pass through, as through /run/credentials
    broker = make_suite.env.accounts["broker"]
    creds = root / "credentials"
    creds.mkdir()
    key = "sk-escape-" + os.urandom(12).hex()
    (creds / "model-api-key").write_text(key + "\n")
    for path, mode in ((creds / "model-api-key", 0o400), (creds, 0o500)):
        os.chown(path, broker.uid, broker.gid)
        os.chmod(path, mode)
    env_secret = "env-secret-" + os.urandom(12).hex()
    s = make_suite(config={"apiKey": {"credential": "model-api-key"}, "turnTimeoutMs": 60000}, api_key=key,
                   daemon_env={"brokerd": {"CREDENTIALS_DIRECTORY": str(creds), "RTS_ESCAPE_SECRET": env_secret}})
    s.creds_dir = str(creds)
    yield s
    shutil.rmtree(root, ignore_errors=True)


def test_escaped_guest_reaches_nothing(escape_suite):
    s = escape_suite
    guest = s.env.accounts["guest"]
    channels = ["guild-1/escape-a", "guild-1/escape-b"]
    for ch in channels:
        assert s.cli("on", ch).returncode == 0
    results, threads = {}, []
    for ch in channels:
        threads.append(say_async(s, ch, "#sleep 15000 still here", results))
    try:
        # Both turns live: their containers run, their run dirs hold a broker socket.
        wait_until(lambda: len(s.containers()) == 2, 60, "two live turn containers")
        wait_until(lambda: len([d for d in os.listdir(s.dirs["run"])
                                if os.path.exists(os.path.join(s.dirs["run"], d, "broker.sock"))]) == 2,
                   60, "two broker sockets")
        turns = sorted(os.listdir(s.dirs["run"]))
        socks = [os.path.join(s.dirs["run"], t, "broker.sock") for t in turns]

        def worker_pids():
            pids = [int(docker("inspect", "--format", "{{.State.Pid}}", n).stdout) for n in s.containers()]
            return pids if len(pids) == 2 and all(pids) else None
        workers = wait_until(worker_pids, 60, "both workers running")
        for w in workers:  # a worker is non-dumpable too
            assert os.stat(f"/proc/{w}/environ").st_uid == 0
        pids = daemon_pids(s)
        rt = s.dirs["rt"]
        attempts = [
            # Key sources.
            ("key file", "read", s.key_file),
            ("credentials dir", "listdir", s.creds_dir),
            ("credential", "read", os.path.join(s.creds_dir, "model-api-key")),
            # runRoot and every turn's broker socket by its host path, its own included.
            ("runRoot", "listdir", s.dirs["run"]),
            ("broker socket 0", "stream", socks[0]),
            ("broker socket 1", "stream", socks[1]),
            # ... and through the other containers' /proc/PID/root (the workers are
            # non-dumpable too).
            ("worker root 0", "stream", f"/proc/{workers[0]}/root/run/broker/broker.sock"),
            ("worker root 1", "stream", f"/proc/{workers[1]}/root/run/broker/broker.sock"),
            ("worker workspace 0", "listdir", f"/proc/{workers[0]}/root/workspace"),
            # Docker, the daemons' sockets, the state and the workspaces.
            ("docker.sock", "stream", "/run/docker.sock"),
            ("control.sock", "stream", os.path.join(rt, "control.sock")),
            ("runnerd.sock", "seqpacket", os.path.join(rt, "runnerd.sock")),
            ("brokerd.sock", "seqpacket", os.path.join(rt, "brokerd.sock")),
            ("state file", "write", s.state_file),
            ("state dir", "create", os.path.dirname(s.state_file)),
            ("workspaceRoot", "listdir", s.dirs["ws"]),
            ("a workspace", "create", s.workspace(channels[1])),
        ]
        for name, pid in pids.items():
            attempts += [
                (f"{name} signal 0", "signal0", pid),
                (f"{name} SIGTERM", "sigterm", pid),
                (f"{name} ptrace", "ptrace", pid),
                (f"{name} mem", "read", f"/proc/{pid}/mem"),
                (f"{name} maps", "read", f"/proc/{pid}/maps"),
                (f"{name} environ", "read", f"/proc/{pid}/environ"),
                (f"{name} fd", "listdir", f"/proc/{pid}/fd"),
            ]
        # A control that the probe itself works as the guest.
        attempts.append(("control: /tmp", "listdir", "/tmp"))
        got = run_as(s, guest, attempts)
        assert got.pop("control: /tmp") == "ok"
        # Signals and ptrace: another uid (EPERM); everything else: a permission check.
        want = {n: "EPERM" if op in ("signal0", "sigterm", "ptrace") else "EACCES" for n, op, _ in attempts
                if n != "control: /tmp"}
        assert got == want
        # The daemons are still there, and still serving the two turns.
        assert all(p.poll() is None for p in s.procs.values())
    finally:
        for t in threads:
            t.join(120)
    for ch in channels:
        assert results[ch].returncode == 0, results[ch].stderr
        assert results[ch].stdout.startswith("echo: ")
    # The model saw the credential brokerd read; nothing the guest ran created a file.
    assert any(r["headers"].get("authorization") == f"Bearer {s.api_key}" for r in s.fake.requests())
    for d in (os.path.dirname(s.state_file), s.workspace(channels[1])):
        assert "escaped-guest-was-here" not in os.listdir(d)


def test_sockets_and_dirs_reach_only_their_accounts(suite):
    """The file modes and ACLs behind those refusals: who may reach what."""
    acc = suite.env.accounts
    rt = suite.dirs["rt"]
    # The runtime dir: statd's, searchable by its group (the bot's way to control.sock),
    # runner and broker may create their sockets; sticky: none may remove another's.
    st = os.stat(rt)
    assert st.st_uid == acc["service"].uid and st.st_mode & 0o7007 == 0o1000
    # Each link socket lets in its one peer account (ACL), nobody else.
    for name, owner, peer in (("runnerd.sock", "runner", "service"), ("brokerd.sock", "broker", "runner")):
        path = os.path.join(rt, name)
        st = os.lstat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (acc[owner].uid, 0o660), name
        acl = subprocess.run(["getfacl", "-cpn", path], capture_output=True, text=True, check=True).stdout.split()
        assert sorted(acl) == sorted(["user::rw-", f"user:{acc[peer].uid}:rw-", "group::---", "mask::rw-",
                                      "other::---"]), (name, acl)
    # runRoot: the runner's alone.
    st = os.stat(suite.dirs["run"])
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (acc["runner"].uid, 0o700)
    # workspaceRoot: statd's; runnerd may search it (statd's ACL entry), nothing else.
    acl = subprocess.run(["getfacl", "-cpn", suite.dirs["ws"]], capture_output=True, text=True,
                         check=True).stdout.split()
    assert sorted(acl) == sorted(["user::rwx", f"user:{acc['runner'].uid}:--x", "group::---", "mask::--x",
                                  "other::---"]), acl


def test_peer_checks_accept_exactly_their_accounts(suite):
    """The links' SO_PEERCRED checks, with the socket files' ACLs opened for the test: a
    connection from any other account is refused by the daemon itself."""
    acc = suite.env.accounts
    rt = suite.dirs["rt"]
    runnerd_sock, brokerd_sock = os.path.join(rt, "runnerd.sock"), os.path.join(rt, "brokerd.sock")
    # Let the wrong accounts through the file system, so the daemons' own checks answer.
    for path in (runnerd_sock, brokerd_sock):
        setfacl("-m", f"u:{acc['broker'].uid}:rw,u:{acc['service'].uid}:rw,u:{acc['runner'].uid}:rw", path)
    setfacl("-m", f"u:{acc['broker'].uid}:rwx,u:{acc['runner'].uid}:rwx", rt)
    before = {n: suite.log_tail(n, limit=10**7) for n in ("runnerd", "brokerd")}
    # brokerd connects to runnerd.sock; statd's account connects to brokerd.sock.
    got_b = run_as(suite, acc["broker"], [("runnerd.sock", "seqpacket", runnerd_sock)])
    got_s = run_as(suite, acc["service"], [("brokerd.sock", "seqpacket", brokerd_sock)])
    assert got_b == {"runnerd.sock": "ok"} and got_s == {"brokerd.sock": "ok"}  # connect succeeds; then refused

    def refused(name, text):
        return text in suite.log_tail(name, limit=10**7)[len(before[name]):]
    wait_until(lambda: refused("runnerd", "refusing a runnerd.sock connection from an account other than statd's"),
               10, "runnerd's refusal of the broker account")
    wait_until(lambda: refused("brokerd", "refusing a brokerd.sock peer that is not runnerd's account"), 10,
               "brokerd's refusal of statd's account")
    # The real peers are still served: a turn works.
    ch = "guild-1/peer-checks"
    assert suite.cli("on", ch).returncode == 0
    p = suite.cli("say", ch, "--author", "1001", "--name", "Alice", "hello")
    assert p.returncode == 0, p.stderr


def test_daemon_as_the_wrong_account_refuses_to_start(suite):
    """Each daemon checks that it runs as the account the config names for it."""
    acc = suite.env.accounts
    cases = [("brokerd", acc["runner"], "accounts.broker is \"roundtable-sandbox-broker\""),
             ("runnerd", acc["broker"], "accounts.runner is \"roundtable-sandbox-runner\""),
             ("statd", acc["guest"], "uid: is"),
             ("statd", acc["broker"], "this process runs as accounts.broker")]
    for daemon, account, text in cases:
        p = subprocess.run(["runuser", "-u", account.name, "-g", account.group, "--", suite.env.program(daemon),
                            "--config", suite.config_path, "--runtime-dir", suite.dirs["rt"]],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert p.returncode == 1, (daemon, account.name, p.stderr)
        assert text in p.stderr, (daemon, account.name, p.stderr)
    # None of them touched the running ones.
    assert all(p.poll() is None for p in suite.procs.values())


def test_guest_can_neither_take_over_nor_lock_out_a_workspace(suite):
    """A guest writing its workspace (as its container does: through a descriptor of the
    directory, not through workspaceRoot) cannot change the directory itself nor touch what
    statd put there, and whatever it leaves behind does not stop the next turn."""
    acc = suite.env.accounts
    ch = "guild-1/takeover"
    assert suite.cli("on", ch).returncode == 0
    p = suite.cli("say", ch, "--author", "1001", "--name", "Alice", "remember that the shed is green")
    assert p.returncode == 0, p.stderr
    ws = suite.workspace(ch)
    # Something statd would have made (rich mode's subdirectories): statd's, not the guest's.
    made = os.path.join(ws, "statd-made")
    os.mkdir(made, 0o750)
    os.chown(made, acc["service"].uid, acc["service"].gid)
    script = r'''
import json, os, sys
fd = int(sys.argv[1])
out = {}
def attempt(name, f):
    try:
        f(); out[name] = "ok"
    except OSError as e:
        out[name] = __import__("errno").errorcode[e.errno]
attempt("chmod workspace", lambda: os.chmod(fd, 0o777))
# A well-formed ACL (u::rwx, g::rwx, o::rwx): refused for not owning the directory.
acl = b"\x02\x00\x00\x00" + b"".join(bytes([t, 0, 7, 0, 255, 255, 255, 255]) for t in (1, 4, 32))
attempt("acl workspace", lambda: os.setxattr(fd, "system.posix_acl_access", acl))
attempt("rename statd's", lambda: os.rename("statd-made", "mine", src_dir_fd=fd, dst_dir_fd=fd))
attempt("remove statd's", lambda: os.rmdir("statd-made", dir_fd=fd))
# What a guest can do to its own entries: a directory and a file nobody else may open.
attempt("own locked dir", lambda: os.mkdir("locked", 0o700, dir_fd=fd))
attempt("own locked file", lambda: os.close(os.open("locked-file", os.O_CREAT | os.O_WRONLY, 0, dir_fd=fd)))
print(json.dumps(out))
'''
    dfd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        guest = acc["guest"]
        p = subprocess.run(["setpriv", f"--reuid={guest.uid}", f"--regid={guest.gid}", "--clear-groups", "--",
                            "/usr/bin/python3", "-c", script, str(dfd)], pass_fds=(dfd,), capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        os.close(dfd)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got == {"chmod workspace": "EPERM", "acl workspace": "EPERM", "rename statd's": "EPERM",
                   "remove statd's": "EPERM", "own locked dir": "ok", "own locked file": "ok"}, got
    st = os.lstat(ws)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (acc["service"].uid, 0o1770)
    assert os.path.isdir(made) and os.lstat(made).st_uid == acc["service"].uid
    # A workspace as single-account mode left it (0700, no ACL) with a default ACL besides:
    # statd shares it again before the turn, under its seccomp filter, and says so.
    setfacl("-b", ws)
    os.chmod(ws, 0o700)
    setfacl("-d", "-m", f"u:{acc['runner'].uid}:rx", ws)
    # statd still opens, verifies and hands out the workspace (it never reads what the
    # guest wrote); the next turn runs and recalls the memory.
    p = suite.cli("say", ch, "--author", "1001", "--name", "Alice", "what do you remember?")
    assert p.returncode == 0 and "the shed is green" in p.stdout, p.stdout + p.stderr
    acl = subprocess.run(["getfacl", "-cpn", ws], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(acl) == sorted(["user::rwx", f"user:{acc['guest'].uid}:rwx", "group::---", "mask::rwx",
                                  "other::---"]), acl
    assert stat.S_IMODE(os.lstat(ws).st_mode) == 0o1770
    assert "mode 0700 or ACL was not the guest account's share; restored" in suite.log_tail("statd")


def test_single_account_mode_as_before(make_suite):
    """Without "accounts" everything runs as the service account, as before: the daemons,
    the containers, the workspace 0700; two turns store and recall."""
    s = make_suite(accounts=False)
    svc = s.env.accounts["service"]
    for name, pid in daemon_pids(s).items():
        assert proc_status(pid)["Uid"].split()[0] == str(svc.uid), name
        assert os.stat(f"/proc/{pid}/environ").st_uid == 0, name  # non-dumpable here too
    ch = "guild-1/single"
    assert s.cli("on", ch).returncode == 0
    p = s.cli("say", ch, "--author", "1001", "--name", "Alice", "remember that the gate is red")
    assert p.returncode == 0, p.stderr
    p = s.cli("say", ch, "--author", "1001", "--name", "Alice", "what do you remember?")
    assert p.returncode == 0 and "the gate is red" in p.stdout, p.stdout + p.stderr
    ws = s.workspace(ch)
    st = os.lstat(ws)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (svc.uid, 0o700)
    assert os.lstat(os.path.join(ws, ".sandbox", "memory.json")).st_uid == svc.uid


def doctor_lines(suite, *args):
    p = suite.cli("doctor", "--offline", *args)
    return p, p.stdout.splitlines()


def test_doctor_in_accounts_mode(make_suite):
    """doctor checks the account model and names each fix; each problem is made, seen,
    and undone."""
    s = make_suite()
    acc = s.env.accounts
    ch = "guild-1/doctor"
    assert s.cli("on", ch).returncode == 0
    assert s.cli("say", ch, "--author", "1001", "--name", "Alice", "remember that doctors check").returncode == 0
    p, lines = doctor_lines(s)
    assert p.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], p.stdout
    assert any(ln.startswith("ok: accounts: ") and "four accounts apart" in ln for ln in lines), p.stdout
    assert any(ln.startswith("ok: workspaces: 1 workspaces, each shared with the guest account") for ln in lines)
    assert not any(ln.startswith("warn: accounts:") for ln in lines), p.stdout

    def fails(check, *words):
        p, lines = doctor_lines(s)
        bad = [ln for ln in lines if ln.startswith(f"FAIL: {check}: ")]
        assert p.returncode == 1 and bad, p.stdout
        for w in words:
            assert w in bad[0], (w, bad[0])

    # runRoot is the runner account's, not the service account's.
    svc, runner, broker, guest = acc["service"], acc["runner"], acc["broker"], acc["guest"]
    os.chown(s.dirs["run"], svc.uid, svc.gid)
    try:
        fails("runRoot", f"is owned by uid {svc.uid}, not by the runner account (uid {runner.uid})",
              f"fix: chown {runner.uid}:{runner.gid} {s.dirs['run']}")
    finally:
        os.chown(s.dirs["run"], runner.uid, runner.gid)
    # workspaceRoot lets runnerd search it, nobody else in.
    setfacl("-m", f"u:{guest.uid}:x", s.dirs["ws"])
    try:
        fails("workspaceRoot", "ACL entry for another account", f"setfacl -b {s.dirs['ws']}")
    finally:
        setfacl("-x", f"u:{guest.uid}", s.dirs["ws"])
    # The key file: brokerd's account alone.
    os.chown(s.key_file, svc.uid, svc.gid)
    try:
        fails("apiKey", f"is owned by uid {svc.uid}, so brokerd (uid {broker.uid}) cannot read it",
              f"fix: chown {broker.uid}")
    finally:
        os.chown(s.key_file, broker.uid, broker.gid)
    os.chown(s.key_file, 0, broker.gid)
    os.chmod(s.key_file, 0o640)
    try:
        fails("apiKey", "its group may read the key", f"fix: chown {broker.uid}")
    finally:
        os.chown(s.key_file, broker.uid, broker.gid)
        os.chmod(s.key_file, 0o400)
    # The config: all three daemon accounts read it; root alone may change it.
    os.chmod(s.config_path, 0o640)
    try:
        fails("config file", "cannot read", "setfacl -m u:")
    finally:
        os.chmod(s.config_path, 0o644)
    os.chown(s.config_path, svc.uid, 0)
    try:
        fails("config file", "can be changed by its owner", "fix: chown root:root")
    finally:
        os.chown(s.config_path, 0, 0)
    # A workspace left from single-account mode: its files are the service account's.
    memory = os.path.join(s.workspace(ch), ".sandbox", "memory.json")
    os.chown(memory, svc.uid, svc.gid)
    try:
        fails("workspaces", "files the guest account does not own", f"chown -h {guest.uid}:{guest.gid}")
    finally:
        os.chown(memory, guest.uid, guest.gid)
    # A workspace whose share statd would restore: a warning.
    setfacl("-b", s.workspace(ch))
    try:
        p, lines = doctor_lines(s)
        assert any(ln.startswith("warn: workspaces: 1 of 1 workspaces") and "statd restores" in ln for ln in lines), \
            p.stdout
    finally:
        setfacl("--set", f"u::rwx,u:{guest.uid}:rwx,g::---,m::rwx,o::---", s.workspace(ch))
    p, lines = doctor_lines(s)
    assert p.returncode == 0, p.stdout
    # The runner account passes through a directory that lets it in by an ACL entry alone
    # (runRoot inside the hand-started runtime directory, as README's layout has it).
    turns = os.path.join(s.dirs["rt"], "turns")
    os.mkdir(turns, 0o700)
    os.chown(turns, runner.uid, runner.gid)
    cfg = dict(s.config, runRoot=turns)
    path = os.path.join(s.dirs["etc"], "turns-in-rt.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    os.chmod(path, 0o644)
    p = subprocess.run(
        [s.env.program("cli"), "--config", path, "--runtime-dir", s.dirs["rt"], "doctor", "--offline"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert any(ln.startswith(f"ok: runRoot: {turns}") for ln in p.stdout.splitlines()), p.stdout
    # And single-account mode is worth a warning that names the fix.
    single = make_suite(accounts=False)
    p, lines = doctor_lines(single)
    warned = [ln for ln in lines if ln.startswith("warn: accounts: single-account mode")]
    assert warned and '"accounts": {"broker": "roundtable-sandbox-broker"' in warned[0], p.stdout
