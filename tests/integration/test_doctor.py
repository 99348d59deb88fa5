"""roundtable-sandbox doctor against a real installation: every check passes on a healthy
suite, and each kind of problem turns into a FAIL line that names it and its fix, with
exit status 1 (cli/doctor.c)."""
import json
import os
import signal
import subprocess

import pytest


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
    would keep it: root-owned, group of the service account, 0640."""
    cfg = dict(suite.config)
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path = os.path.join(suite.dirs["etc"], name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    os.chown(path, 0, suite.env.gid)
    os.chmod(path, 0o640)
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
    s = make_suite()
    run_root = s.dirs["run"]

    # A root with group/other permissions (seed: refused at start-up).
    os.chmod(run_root, 0o755)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chmod(run_root, 0o700)
    assert p.returncode == 1
    assert f"FAIL: runRoot: {run_root} has mode 0755; it must have no group/other permissions; fix: chmod 0700 " \
        f"{run_root}" in lines, p.stdout

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
    assert any(line.startswith("FAIL: apiKey: ") and "others can read the key" in line for line in lines), p.stdout

    # A config file anyone may change (it names the commands brokerd runs).
    os.chmod(s.config_path, 0o642)
    try:
        p, lines = doctor(s, "--offline")
    finally:
        os.chmod(s.config_path, 0o640)
    assert p.returncode == 1
    assert any(line.startswith("FAIL: config file: ") and "names the commands brokerd runs" in line
               for line in lines), p.stdout

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
