# SPDX-License-Identifier: Apache-2.0
"""One statd and one runnerd per installation, and roots nobody else can swap out.
Real daemons, the real image."""
import os
import subprocess
import threading

from harness import wait_until
from lifecycle_helpers import rewrite_config, start_expect_exit


def second_instance(suite, name, timeout=60):
    """Start another copy of daemon name for the same config but its own runtime dir (so its
    sockets do not collide) and wait for it to exit: (status, output)."""
    account = suite.account(name)
    rt = os.path.join(suite.root, f"rt-second-{name}")
    os.mkdir(rt, 0o700)
    os.chown(rt, account.uid, account.gid)
    # As the harness starts them: the account's own group, docker only for runnerd.
    extra = ["-g", account.group] + (["-G", "docker"] if name == "runnerd" else [])
    p = subprocess.run(["runuser", "-u", account.name, *extra, "--", suite.env.program(name), "--config",
                        suite.config_path, "--runtime-dir", rt],
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout + p.stderr


def test_a_second_runnerd_or_statd_refuses_and_the_first_keeps_its_turn(make_suite):
    s = make_suite()
    channel = "guild-3/single"
    assert s.cli("on", channel).returncode == 0
    result = {}
    t = threading.Thread(target=lambda: result.setdefault(
        "p", s.cli("say", channel, "--author", "1", "--name", "A", "#sleep 4000 still here")))
    t.start()
    wait_until(s.containers, 60, "the turn's container")
    running = s.containers()

    # Without the lock, a second runnerd would remove the live turn as "stale".
    status, out = second_instance(s, "runnerd")
    assert status != 0, out
    assert "another roundtable-sandbox-runnerd already uses" in out and s.dirs["run"] in out
    assert s.containers() == running

    status, out = second_instance(s, "statd")
    assert status != 0, out
    assert "another roundtable-sandbox-statd already uses" in out

    t.join(120)
    assert result["p"].returncode == 0, result["p"].stderr
    assert "still here" in result["p"].stdout


def test_roots_under_a_world_writable_parent_are_refused(make_suite):
    s = make_suite()
    for name in ("statd", "runnerd", "brokerd"):
        s.stop_daemon(name)
    open_dir = os.path.join(s.root, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)  # no sticky bit: anyone could rename a root away
    ws = os.path.join(open_dir, "ws")
    rewrite_config(s, workspaceRoot=ws)
    status, log = start_expect_exit(s, "statd")
    assert status != 0
    assert f"{open_dir} is writable by other users without the sticky bit" in log
    assert f"chmod o-w {open_dir}" in log
    assert not os.path.exists(ws) or os.stat(ws).st_uid == s.env.uid

    # With the sticky bit (like /tmp) it is fine.
    os.chmod(open_dir, 0o1777)
    s.start_daemon("statd")
    s.start_daemon("runnerd")
    s.start_daemon("brokerd")
    s._wait_ready()
    assert s.cli("status").returncode == 0
