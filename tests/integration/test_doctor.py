# SPDX-License-Identifier: Apache-2.0
"""roundtable-sandbox doctor against a real installation: every check passes on a healthy
suite, and each kind of problem turns into a FAIL line that names it and its fix, with
exit status 1 (cli/doctor.c). Where doctor judges something a daemon also judges (the state
file, whether a root can be created), the daemon is started too, to check that they agree."""
import grp
import json
import os
import pwd
import re
import signal
import stat
import subprocess

import pytest

from harness import docker_inspect
from lifecycle_helpers import changed_config, restart, rewrite_config, start_expect_exit


def doctor(suite, *args, config=None):
    p = subprocess.run([suite.env.program("cli"), "--config", config or suite.config_path, "--runtime-dir",
                        suite.dirs["rt"], "doctor", *args], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    lines = p.stdout.splitlines()
    assert lines and lines[-1].startswith("summary: "), p.stdout + p.stderr
    for line in lines[:-1]:
        assert line.split(": ", 1)[0] in ("ok", "warn", "FAIL"), line
    return p, lines


def failures(lines):
    return [line for line in lines if line.startswith("FAIL: ")]


def variant(suite, name, **changes):
    """A copy of the suite's config with changes (None removes a key), as the operator
    would keep it: owner, group and mode of the suite's (single-account mode: root, group
    of the service account, 0640; accounts mode: root, 0644, for all three accounts)."""
    cfg = changed_config(suite, **changes)
    path = os.path.join(suite.dirs["etc"], name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    st = os.stat(suite.config_path)
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, stat.S_IMODE(st.st_mode))
    return path


def test_doctor_passes_on_a_running_installation(suite):
    p, lines = doctor(suite)
    assert p.returncode == 0, p.stdout
    assert failures(lines) == []
    checks = {line.split(": ", 2)[1] for line in lines[:-1]}
    for want in ("config", "account", "config file", "runRoot", "workspaceRoot", "state dir", "stateFile", "layout",
                 "path lengths", "timeZone", "apiKey", "caFile", "docker", "docker data root", "image", "runtime dir",
                 "control.sock", "runnerd.sock", "brokerd.sock"):
        assert want in checks, f"no {want} check in:\n{p.stdout}"
    assert any(line.startswith("ok: control.sock: statd answers") for line in lines), p.stdout
    # The key file is judged by its metadata; its contents never appear.
    assert suite.api_key not in p.stdout + p.stderr


def test_doctor_offline_talks_to_nothing(suite):
    p, lines = doctor(suite, "--offline")
    assert p.returncode == 0, p.stdout
    checks = {line.split(": ", 2)[1] for line in lines[:-1]}
    assert not checks & {"docker", "image", "control.sock", "runnerd.sock", "brokerd.sock"}, p.stdout


def test_doctor_usage(suite):
    p = subprocess.run([suite.env.program("cli"), "doctor", "extra"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2


@pytest.mark.parametrize("name,changes,check,words", [
    ("unknown-key", {"limitz": 1}, "config", "limitz"),
    ("bad-range", {"turnTimeoutMs": 999}, "config", "turnTimeoutMs"),
    ("no-tz", {"timeZone": "Mars/Olympus_Mons"}, "timeZone", "tzdata"),
    ("long-run-root", {"runRoot": "/tmp/" + "r" * 80}, "path lengths", "at most 71 characters"),
    ("state-in-ws", {"stateFile": "WS/channels.json"}, "layout", "inside workspaceRoot"),
    ("missing-key-file", {"apiKey": {"file": "/nonexistent/key"}}, "apiKey", "does not exist"),
])
def test_doctor_reports_config_problems(suite, name, changes, check, words):
    changes = {k: (v.replace("WS", suite.dirs["ws"]) if isinstance(v, str) else v) for k, v in changes.items()}
    p, lines = doctor(suite, "--offline", config=variant(suite, name, **changes))
    assert p.returncode == 1, p.stdout
    bad = [line for line in failures(lines) if line.startswith(f"FAIL: {check}: ")]
    assert bad, f"no FAIL for {check}:\n{p.stdout}"
    assert words in bad[0] and "; fix: " in bad[0], bad[0]


def test_doctor_reports_installation_problems(make_suite):
    """Single-account mode's rules; test_accounts.py::test_doctor_in_accounts_mode has
    accounts mode's."""
    s = make_suite(accounts=False)
    run_root = s.dirs["run"]

    # A root with group/other permissions (seed: refused at start-up).
    os.chmod(run_root, 0o755)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chmod(run_root, 0o700)
    assert p.returncode == 1
    assert f"FAIL: runRoot: {run_root} has mode 0755; it must have no group/other permissions and no ACL entry for " \
        f"another account; fix: chmod 0700 {run_root} && setfacl -b {run_root}" in lines, p.stdout

    # A root owned by someone else.
    os.chown(s.dirs["ws"], 0, 0)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chown(s.dirs["ws"], s.env.uid, s.env.gid)
    assert any(line.startswith(f"FAIL: workspaceRoot: {s.dirs['ws']} is owned by uid 0") for line in lines), p.stdout

    # A key file others can read.
    os.chmod(s.key_file, 0o644)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chmod(s.key_file, 0o400)
    assert any(line.startswith("FAIL: apiKey: ") and "its group and other users may read the key" in line
               for line in lines), p.stdout

    # Root-owned and group-readable: mode and owner in one line, both fixes in one go.
    os.chown(s.key_file, 0, s.env.gid)
    os.chmod(s.key_file, 0o640)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chown(s.key_file, s.env.uid, s.env.gid)
        os.chmod(s.key_file, 0o400)
    bad = [line for line in lines if line.startswith("FAIL: apiKey: ")]
    assert len(bad) == 1 and "its group may read the key" in bad[0], p.stdout
    assert f"fix: chown {s.env.uid} {s.key_file} && chmod 0600 {s.key_file}" in bad[0], bad

    # A config file anyone may change (it names the commands brokerd runs).
    os.chmod(s.config_path, 0o642)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chmod(s.config_path, 0o640)
    assert p.returncode == 1
    assert f"FAIL: config file: {s.config_path} can be changed by other users (mode 0642), and it names the " \
        f"commands brokerd runs; fix: chown root:{s.env.gid} {s.config_path} && chmod 0640 {s.config_path}" \
        in lines, p.stdout

    # An image that is not in the local store.
    p, lines = doctor(s, config=variant(s, "no-image", image="roundtable-sandbox:doctor-absent"))
    assert p.returncode == 1
    assert any(line.startswith("FAIL: image: roundtable-sandbox:doctor-absent is not in the local image store")
               for line in lines), p.stdout

    # Everything is fine again.
    p, lines = doctor(s)
    assert p.returncode == 0, p.stdout

    # A daemon killed without clean-up leaves a socket file nothing listens on.
    s.stop_daemon("brokerd", sig=signal.SIGKILL)
    p, lines = doctor(s)
    assert p.returncode == 1
    bad = [line for line in failures(lines) if line.startswith("FAIL: brokerd.sock: ")]
    assert bad and "nothing listens" in bad[0], p.stdout

    # statd gone: the control socket does not answer.
    s.stop_daemon("statd")
    p, lines = doctor(s)
    assert any(line.startswith("FAIL: control.sock: ") for line in lines), p.stdout


# ---- doctor agrees with the daemons ----

def lines_of(lines, verdict, check):
    return [line for line in lines if line.startswith(f"{verdict}: {check}: ")]


def write_raw_config(suite, name, text):
    path = os.path.join(suite.dirs["etc"], name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chown(path, 0, suite.env.gid)
    os.chmod(path, 0o640)
    return path


def test_doctor_config_fix_fits_the_error(suite):
    """A JSON syntax error (a duplicate key is one) gets the loader's message with its
    position and a fix about syntax; an error about a key gets the fix about that key."""
    body = json.dumps(suite.config, indent=2)
    for name, text in (("dup-key", body[:-1].rstrip() + ',\n  "model": "other"\n}'),
                       ("trailing-comma", body[:-1].rstrip() + ",\n}")):
        p, lines = doctor(suite, "--offline", config=write_raw_config(suite, name, text))
        assert p.returncode == 1, p.stdout
        bad = lines_of(lines, "FAIL", "config")
        assert len(bad) == 1, p.stdout
        assert re.search(r"\.json:\d+:\d+: ", bad[0]), bad[0]  # line and column
        assert "; fix: correct the JSON syntax at the position shown" in bad[0], bad[0]
        assert "the key it names" not in bad[0], bad[0]

    p, lines = doctor(suite, "--offline", config=variant(suite, "wrong-type", turnTimeoutMs="60000"))
    bad = lines_of(lines, "FAIL", "config")
    assert bad and "turnTimeoutMs" in bad[0] and "; fix: correct the key it names" in bad[0], p.stdout


def test_doctor_judges_the_state_file_as_statd_does(make_suite):
    s = make_suite()
    s.stop_daemon("statd")
    state = s.state_file
    with open(state, encoding="utf-8") as f:
        good = f.read()

    # Each of these makes statd refuse to start: doctor must fail with statd's own message.
    for content in ('{"version":1,"channels":{"c":{"mode":"maybe"}}}',
                    '{"version":1,"channels":{},"channels":{}}',
                    '{"version":1,"chan'):
        with open(state, "w", encoding="utf-8") as f:
            f.write(content)
        p, lines = doctor(s, "--offline")
        assert p.returncode == 1, p.stdout
        bad = lines_of(lines, "FAIL", "stateFile")
        assert len(bad) == 1, p.stdout
        assert "statd refuses to start with it" in bad[0] and "restore it from a backup" in bad[0], bad[0]
        message = bad[0][len("FAIL: stateFile: "):].split("; statd refuses")[0]
        assert message.startswith(state + ":"), bad[0]
        status, log = start_expect_exit(s, "statd")
        assert status == 1, log
        assert message in log, f"doctor said {message!r}, statd said:\n{log}"
        with open(state, encoding="utf-8") as f:
            assert f.read() == content  # never replaced

    # Readable but 0644: statd starts (its directory is 0700), so a warning, not a failure.
    with open(state, "w", encoding="utf-8") as f:
        f.write(good)
    os.chmod(state, 0o644)
    p, lines = doctor(s, "--offline")
    assert p.returncode == 0, p.stdout
    warned = lines_of(lines, "warn", "stateFile")
    assert warned and "mode 0644" in warned[0] and "statd writes it 0600" in warned[0], p.stdout
    assert f"fix: chmod 0600 {state}" in warned[0]
    restart(s, "statd")
    assert s.cli("status").returncode == 0

    # Unreadable for the account: statd cannot start, doctor fails.
    s.stop_daemon("statd")
    os.chown(state, 0, 0)
    os.chmod(state, 0o600)
    p, lines = doctor(s, "--offline")
    bad = lines_of(lines, "FAIL", "stateFile")
    assert bad and "the service account cannot read" in bad[0], p.stdout
    status, log = start_expect_exit(s, "statd")
    assert status == 1, log


def test_doctor_checks_that_a_missing_root_can_be_created(make_suite):
    s = make_suite()
    # runRoot is runnerd's account's (the service account's in single-account mode).
    uid, gid = s.account("runnerd").uid, s.account("runnerd").gid

    # The account may write in the parent: the daemon creates the root, doctor says so.
    mine = os.path.join(s.root, "mine")
    os.mkdir(mine, 0o700)
    os.chown(mine, uid, gid)
    p, lines = doctor(s, "--offline", config=variant(s, "creatable", runRoot=os.path.join(mine, "run")))
    ok = lines_of(lines, "ok", "runRoot")
    assert ok and "does not exist yet; roundtable-sandbox-runnerd creates it" in ok[0], p.stdout

    # A root-owned 0755 parent: runnerd cannot create it, so doctor fails with the fix.
    locked = os.path.join(s.root, "locked")
    os.mkdir(locked, 0o755)
    run_root = os.path.join(locked, "run")
    p, lines = doctor(s, "--offline", config=variant(s, "not-creatable", runRoot=run_root))
    assert p.returncode == 1, p.stdout
    bad = lines_of(lines, "FAIL", "runRoot")
    assert bad, p.stdout
    assert f"{run_root} does not exist, and roundtable-sandbox-runnerd cannot create it" in bad[0], bad[0]
    assert f"may not write in {locked} (owner uid 0 (root)" in bad[0], bad[0]
    assert f"fix: install -d -o {uid} -g {gid} -m 0700 {run_root}" in bad[0], bad[0]

    # runnerd agrees: it does not start with that runRoot ...
    s.stop_daemon("runnerd")
    rewrite_config(s, runRoot=run_root)
    status, log = start_expect_exit(s, "runnerd")
    assert status == 1 and "cannot create" in log, log
    # ... and the fix doctor gave makes it start.
    subprocess.run(["install", "-d", "-o", str(uid), "-g", str(gid), "-m", "0700", run_root], check=True)
    p, lines = doctor(s, "--offline")
    assert not lines_of(lines, "FAIL", "runRoot"), p.stdout
    restart(s, "runnerd")


def test_doctor_judges_parent_directories_plainly(suite):
    # Writable by everyone, no sticky bit: anyone could rename the root away. The daemons
    # refuse this, so doctor fails, and says it in those words.
    open_dir = os.path.join(suite.root, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    ws = os.path.join(open_dir, "ws")
    p, lines = doctor(suite, "--offline", config=variant(suite, "open-parent", workspaceRoot=ws))
    assert p.returncode == 1, p.stdout
    bad = lines_of(lines, "FAIL", "workspaceRoot")
    assert bad == [f"FAIL: workspaceRoot: {open_dir} is writable by other users without the sticky bit (mode 0777), "
                   f"so any local user could replace {ws} with a directory of their own; fix: chmod o-w {open_dir}"], \
        p.stdout

    # With the sticky bit (like /tmp) it is fine, and the account can create the root there.
    os.chmod(open_dir, 0o1777)
    p, lines = doctor(suite, "--offline", config=variant(suite, "sticky-parent", workspaceRoot=ws))
    assert not lines_of(lines, "FAIL", "workspaceRoot"), p.stdout
    assert lines_of(lines, "ok", "workspaceRoot"), p.stdout

    # Group-writable by a group that is neither root's nor the account's: a warning that
    # names the group (the daemons accept it).
    other = grp.getgrnam("nogroup")
    shared = os.path.join(suite.root, "shared")
    os.mkdir(shared)
    os.chown(shared, 0, other.gr_gid)
    os.chmod(shared, 0o775)
    ws = os.path.join(shared, "ws")
    os.mkdir(ws, 0o700)
    os.chown(ws, suite.env.uid, suite.env.gid)
    p, lines = doctor(suite, "--offline", config=variant(suite, "group-parent", workspaceRoot=ws))
    assert p.returncode == 0, p.stdout
    warned = lines_of(lines, "warn", "workspaceRoot")
    assert warned == [f"warn: workspaceRoot: {shared} is writable by the group gid {other.gr_gid} (nogroup) "
                      f"(mode 0775), whose members could replace {ws} with a directory of their own; fix: chmod g-w "
                      f"{shared}"], p.stdout


# ---- the docker group: runnerd alone, as doctor, roundtable-sandbox(7) and the harness do it ----

def proc_groups(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return int(st["Gid"].split()[0]), {int(g) for g in st["Groups"].split()}


def test_only_runnerd_gets_the_docker_group(suite):
    docker_gid = grp.getgrnam("docker").gr_gid
    for name in ("statd", "runnerd", "brokerd"):
        pid = suite._daemon_pid(suite.procs[name])
        assert pid, name
        gid, groups = proc_groups(pid)
        # The account's own group stays the primary one (single-account mode: runnerd
        # must read the root:<group> 0640 config).
        assert gid == suite.account(name).gid, (name, gid)
        assert (docker_gid in groups) == (name == "runnerd"), (name, groups)

    account = pwd.getpwuid(suite.env.uid).pw_name
    member = account in grp.getgrnam("docker").gr_mem
    p, lines = doctor(suite, "--offline")
    if member:  # from earlier runs of older harnesses; doctor says how to undo it
        warned = lines_of(lines, "warn", "account")
        assert warned, p.stdout
        assert f"fix: gpasswd -d {account} docker" in warned[0]
        assert f"runuser -u {account} -g {suite.env.group} -G docker -- roundtable-sandbox-runnerd" in warned[0]
    else:
        assert lines_of(lines, "ok", "account"), p.stdout


def test_images_are_built_under_a_tag_of_this_run(suite):
    # A shared global tag would be moved away from other users' images on the same host.
    assert re.fullmatch(r"roundtable-sandbox:test-\d+-[0-9a-f]{8}", suite.env.image), suite.env.image
    assert docker_inspect(suite.env.image) is not None


def test_doctor_warns_when_brokerd_unit_would_hide_what_it_reads(suite):
    """brokerd's unit hides /tmp, /var/tmp, /home, /root and /run/user (PrivateTmp=,
    ProtectHome=): a caFile, key file or command there works by hand but not under systemd."""
    def brokerd_warnings(lines):
        return [ln for ln in lines if ln.startswith("warn: units: ") and "brokerd.service hides" in ln]

    # The suite keeps its CA and key file under /tmp.
    p, lines = doctor(suite, "--offline")
    assert p.returncode == 0, p.stdout  # a warning, not a failure
    found = brokerd_warnings(lines)
    assert any(ln.startswith(f"warn: units: caFile {suite.config['caFile']} is under /tmp") for ln in found), found
    assert any(ln.startswith(f"warn: units: apiKey.file {suite.key_file} is under /tmp") for ln in found), found
    assert all("; fix: " in ln for ln in found), found

    tool = {"name": "clock", "description": "the time", "parameters": {"type": "object"},
            "command": ["/home/someone/bin/clock"]}
    p, lines = doctor(suite, "--offline", config=variant(
        suite, "hidden-tool", caFile="/etc/ssl/certs/ca-certificates.crt", apiKey={"env": "RTS_KEY"},
        tools=[tool]))
    found = brokerd_warnings(lines)
    assert [ln.split(" is under ")[0] for ln in found] == ["warn: units: tools[0].command[0] /home/someone/bin/clock"], \
        found

    tool["command"] = ["/usr/bin/date"]
    p, lines = doctor(suite, "--offline", config=variant(
        suite, "visible", caFile="/etc/ssl/certs/ca-certificates.crt", apiKey={"command": ["/usr/bin/true"]},
        tools=[tool]))
    assert brokerd_warnings(lines) == [], p.stdout


def test_doctor_as_the_service_account_skips_docker_with_a_warning(suite):
    """The service account is not in the docker group (runnerd's unit alone adds it):
    doctor run as that account says Docker was not checked instead of failing on it."""
    account = pwd.getpwuid(suite.env.uid).pw_name
    p = subprocess.run(["runuser", "-u", account, "-g", suite.env.group, "--", suite.env.program("cli"), "--config",
                        suite.config_path, "--runtime-dir", suite.dirs["rt"], "doctor"],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = p.stdout.splitlines()
    assert lines and lines[-1].startswith("summary: "), p.stdout + p.stderr
    docker_lines = [ln for ln in lines if ln.split(": ", 2)[1:2] in (["docker"], ["docker data root"], ["image"])]
    assert docker_lines == [ln for ln in lines if ln.startswith("warn: docker: not checked: ")], p.stdout
    assert len(docker_lines) == 1 and "run doctor as root" in docker_lines[0], p.stdout
    assert failures(lines) == [], p.stdout
    assert p.returncode == 0, p.stdout
