# SPDX-License-Identifier: Apache-2.0
"""statd's control socket under hostile or sloppy clients, and workspaces a guest tampered
with. Real daemons, the real image; the tests of the control socket alone run statd on its
own (statd_suite), with no Docker."""
import json
import os
import socket
import time

import pytest

from harness import HarnessError, Suite, wait_past, wait_until


@pytest.fixture(scope="module")
def statd_suite(host_env):
    """statd alone: what it answers on control.sock does not depend on runnerd or Docker."""
    try:
        s = Suite(host_env, daemons=("statd",))
    except HarnessError as e:
        pytest.fail(f"statd did not start: {e}", pytrace=False)
    yield s
    s.stop()


def raw_exchange(suite, data, timeout=10):
    """Send raw bytes on a fresh connection; return the first answer line as an object."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(os.path.join(suite.dirs["rt"], "control.sock"))
        s.sendall(data)
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, "statd closed the connection without answering"
            buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])


def test_duplicate_keys_are_refused(statd_suite):
    suite = statd_suite
    # json-c alone would keep the last "op" and run "channels".
    a = raw_exchange(suite, b'{"id":1,"op":"status","op":"channels"}\n')
    assert a["error"] == "invalid_json"
    assert "channels" not in a or not isinstance(a.get("channels"), list)
    a = raw_exchange(suite, b'{"id":2,"op":"mode","channel":"dup","channel":"other","mode":"on"}\n')
    assert a["error"] == "invalid_json"
    out = suite.cli("channels", "--json")
    assert "dup" not in out.stdout and "other" not in out.stdout


def test_lone_surrogates_do_not_collapse_channel_keys(statd_suite):
    suite = statd_suite
    # Two different escapes must not both become U+FFFD and name one channel.
    for esc in (b"\\ud800", b"\\udfff"):
        a = raw_exchange(suite, b'{"id":1,"op":"mode","channel":"k' + esc + b'","mode":"on"}\n')
        assert a["error"] == "invalid_json", a
    with open(suite.state_file, encoding="utf-8") as f:
        assert "\ufffd" not in f.read()


def test_empty_author_name_is_refused_before_any_turn(suite):
    """The worker needs a speaker name: statd refuses an empty one at once instead of
    starting a container that can only fail."""
    assert suite.cli("on", "guild-1/names").returncode == 0
    before = len(suite.fake.requests())
    a = raw_exchange(suite, json.dumps({
        "op": "message", "id": "n1", "channel": "guild-1/names", "guild": True, "addressed": True, "text": "hi",
        "attachments": 0, "author": {"id": "42", "name": "", "principalId": "p42", "tier": "member", "bot": False,
                                     "integration": False}}).encode() + b"\n")
    assert a["id"] == "n1" and a["error"] == "invalid_request" and "author.name" in a["detail"], a
    suite.assert_no_turn(before, "a message with an empty author name", containers=False)


def test_control_characters_and_nul_escapes_are_refused(statd_suite):
    suite = statd_suite
    a = raw_exchange(suite, b'{"id":1,"op":"status","channel":"a\x01b"}\n')
    assert a["error"] == "invalid_json"
    a = raw_exchange(suite, b'{"id":1,"op":"status","channel":"a\\u0000b"}\n')
    assert a["error"] == "invalid_json"


def test_incomplete_line_is_dropped_and_others_are_served(statd_suite):
    suite = statd_suite
    path = os.path.join(suite.dirs["rt"], "control.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.settimeout(60)
        slow.connect(path)
        slow.sendall(b'{"id":1,')
        start = time.monotonic()
        # Meanwhile another client is served at once.
        assert suite.cli("status").returncode == 0
        # Dribbling more bytes does not extend the deadline: it runs from the first byte.
        wait_past(start + 5)
        slow.sendall(b'"op"')
        assert slow.recv(1024) == b""  # closed by statd, nothing answered
        elapsed = time.monotonic() - start
    assert 29 <= elapsed <= 45, elapsed
    assert "stayed incomplete" in suite.log_tail("statd")


def test_guest_changed_workspace_mode_is_restored(make_suite):
    """Single-account mode: the container runs as the workspace's owner, so a guest can
    change its mode; statd puts it back. (In accounts mode the guest cannot change it at
    all: test_accounts.py.)"""
    suite = make_suite(accounts=False)
    channel = "guild-2/chmod"
    assert suite.cli("on", channel).returncode == 0
    first = suite.cli("say", channel, "--author", "1", "--name", "A", "hello")
    assert first.returncode == 0, first.stderr
    ws = suite.workspace(channel)
    # What a guest can do from inside: the container runs as the workspace's owner.
    os.chmod(ws, 0o755)
    second = suite.cli("say", channel, "--author", "1", "--name", "A", "again")
    assert second.returncode == 0, second.stderr
    assert os.stat(ws).st_mode & 0o7777 == 0o700
    assert "restored to 0700" in suite.log_tail("statd")


def test_full_control_socket_logs_refusals_once_and_recovers(statd_suite):
    """A client that fills every connection slot cannot flood the log: refusals are
    counted and reported at most once per 10 s. Freeing the slots restores service."""
    suite = statd_suite
    path = os.path.join(suite.dirs["rt"], "control.sock")
    idle = []
    try:
        for _ in range(256):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            idle.append(s)
        # Every slot is taken once statd has accepted them all: a status then gets no answer.
        refused = 0
        start = time.monotonic()
        for _ in range(200):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(path)  # blocking: waits while statd's backlog is full
                s.settimeout(10)
                try:
                    s.sendall(b'{"id":1,"op":"status"}\n')
                    got = s.recv(1024)
                except (ConnectionResetError, BrokenPipeError):
                    got = b""
                refused += got == b""
        assert refused >= 150, refused
        elapsed = time.monotonic() - start
    finally:
        for s in idle:
            s.close()
    with open(suite.log_path("statd"), encoding="utf-8", errors="replace") as f:
        warnings = [ln for ln in f if "clients connected, the most allowed" in ln]
    # One line, plus one per further 10 s the flood lasted (however many it refused).
    assert 1 <= len(warnings) <= 2 + int(elapsed // 10), (elapsed, warnings)
    wait_until(lambda: suite.cli("status").returncode == 0, 10, "statd to serve again after the flood", step=0.2)
