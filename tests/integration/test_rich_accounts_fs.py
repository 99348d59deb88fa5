# SPDX-License-Identifier: Apache-2.0
"""Rich mode in accounts mode (DESIGN.md 8.1, the package's default): what statd makes in a
workspace for the channel's container (sessions/, sessions/archive/, attachments/ and each
turn's attachment directory and files) is shared with the guest account the way the
workspace is, so the container, running as the guest, can use it after a fresh start or a
planted link; and it stays statd's (the sticky bit), so the guest cannot move it away and
statd never writes into a directory the guest controls. Real daemons, dockerd and the
richworker image (rich_host_rig.py); the guest's access is also checked on the host as the
guest account itself, through the kernel's ACL check."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from harness import HarnessError, wait_until
from rich_host_rig import RichHostSuite, StandInBroker
from rich_rig import step


@pytest.fixture
def rich_suite(rts_env):
    suites = []

    def make(**kw):
        try:
            s = RichHostSuite(rts_env, **kw)
        except HarnessError as e:
            pytest.fail(f"the suite did not start: {e}", pytrace=False)
        suites.append(s)
        return s

    yield make
    for s in suites:
        s.stop()


def as_guest(s, channel, fn):
    """Run fn(ws) in a child process as the guest account (uid, primary gid, no other
    groups), ws a descriptor of the channel's workspace opened before: the container sees
    only its workspace, while on the host the guest may not pass workspaceRoot, so every
    path fn uses is relative to ws (dir_fd=ws). Returns 0 when fn returned, else the errno
    of the OSError it raised (254 for anything else)."""
    guest = s.env.accounts["guest"]
    ws = os.open(s.workspace(channel), os.O_PATH | os.O_DIRECTORY)
    try:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.setgroups([])
                os.setgid(guest.gid)
                os.setuid(guest.uid)
                fn(ws)
            except OSError as e:
                code = e.errno or 255
            except BaseException:
                code = 254
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    finally:
        os.close(ws)


def rename(a, b):
    return lambda ws: os.rename(a, b, src_dir_fd=ws, dst_dir_fd=ws)


def list_dir(rel):
    def fn(ws):
        fd = os.open(rel, os.O_RDONLY | os.O_DIRECTORY, dir_fd=ws)
        try:
            os.listdir(fd)
        finally:
            os.close(fd)
    return fn


def assert_statds_shared(s, path):
    """path is statd's directory, sticky, with the guest's ACL entry (getfacl reads it)."""
    st = os.lstat(path)
    service = s.env.accounts["service"]
    assert st.st_uid == service.uid and st.st_mode & 0o7777 == 0o1770, (path, oct(st.st_mode), st.st_uid)
    guest = s.env.accounts["guest"]
    acl = subprocess.run(["getfacl", "-n", "-p", path], capture_output=True, text=True, check=True).stdout
    assert f"user:{guest.uid}:rwx" in acl, acl


def errors(report):
    return [st for st in report["steps"] if "error" in st]


def test_fresh_then_the_container_writes_its_session(rich_suite):
    """The reviewer's case: after `fresh` statd has (re)made sessions/ and the container,
    as the guest, writes a session there, reads it back and a second fresh archives it."""
    s = rich_suite(accounts=True)
    assert s.rich("chan").returncode == 0
    p, rep = s.say("chan", "#rw no-model #rw write-file /workspace/sessions/2026-a.jsonl {}")
    assert p.returncode == 0, p.stderr + s.logs()
    assert not errors(rep), rep["steps"]
    p = s.cli("fresh", "chan")
    assert p.returncode == 0, p.stderr + s.logs()
    ws = s.workspace("chan")
    for d in ("sessions", "sessions/archive", "attachments"):
        assert_statds_shared(s, os.path.join(ws, d))
    assert os.listdir(os.path.join(ws, "sessions", "archive")) == ["2026-a.jsonl"]
    p, rep = s.say("chan", "#rw no-model #rw write-file /workspace/sessions/2026-b.jsonl {\"n\":1} "
                   "#rw read-file /workspace/sessions/2026-b.jsonl "
                   "#rw write-file /workspace/sessions/archive/note.txt x")
    assert p.returncode == 0, p.stderr + s.logs()
    assert not errors(rep), rep["steps"]
    assert step(rep, "read-file")["content"] == "{\"n\":1}"
    guest = s.env.accounts["guest"]
    assert os.lstat(os.path.join(ws, "sessions", "2026-b.jsonl")).st_uid == guest.uid
    p = s.cli("fresh", "chan")
    assert p.returncode == 0, p.stderr + s.logs()
    assert sorted(os.listdir(os.path.join(ws, "sessions", "archive"))) == ["2026-a.jsonl", "2026-b.jsonl",
                                                                          "note.txt"]


def test_the_guest_cannot_move_statds_directories(rich_suite):
    """The sticky bit: the guest creates and removes its own entries, never statd's; so
    what statd reopens at the next fresh start is what it made (no link can be swapped
    in for it)."""
    s = rich_suite(accounts=True)
    assert s.rich("chan").returncode == 0
    p, rep = s.say("chan", "#rw no-model #rw write-file /workspace/sessions/own.jsonl x")
    assert p.returncode == 0 and not errors(rep), p.stderr + json.dumps(rep)
    sess = os.path.join(s.workspace("chan"), "sessions")
    assert as_guest(s, "chan", rename("sessions", "moved")) == 1  # EPERM
    assert as_guest(s, "chan", rename("sessions/archive", "sessions/x")) == 1
    assert as_guest(s, "chan", lambda ws: os.rmdir("sessions/archive", dir_fd=ws)) == 1
    # Its own entries it may move, and it may write in statd's directories.
    assert as_guest(s, "chan", rename("sessions/own.jsonl", "sessions/o.jsonl")) == 0
    assert as_guest(s, "chan", lambda ws: os.mkdir("sessions/archive/mine", dir_fd=ws)) == 0
    assert os.path.isdir(os.path.join(sess, "archive")) and not os.path.islink(os.path.join(sess, "archive"))


@pytest.mark.parametrize("place", ["sessions", "attachments"])
def test_planted_link_replaced_then_usable(rich_suite, place):
    """A link the guest planted where statd's directory belongs (a workspace from before
    statd made them, so the guest could) is replaced at the next turn, never followed, and
    the container then uses statd's directory."""
    s = rich_suite(accounts=True)
    assert s.rich("chan").returncode == 0
    p, _ = s.say("chan", "#rw no-model")
    assert p.returncode == 0, p.stderr + s.logs()
    s.cli("off", "chan")
    s.wait_container("chan", present=False)
    outside = tempfile.mkdtemp(prefix="rts-outside-", dir="/tmp")
    try:
        os.chmod(outside, 0o777)
        ws = s.workspace("chan")
        link = os.path.join(ws, place)
        shutil.rmtree(link)
        guest = s.env.accounts["guest"]
        os.symlink(outside, link)
        os.lchown(link, guest.uid, guest.gid)
        assert s.rich("chan").returncode == 0
        p = s.cli("fresh", "chan")
        assert p.returncode == 0, p.stderr + s.logs()
        assert os.path.isdir(link) and not os.path.islink(link)
        assert_statds_shared(s, link)
        p, rep = s.say("chan", f"#rw no-model #rw write-file /workspace/{place}/2026-c.jsonl x "
                       f"#rw list-dir /workspace/{place}")
        assert p.returncode == 0, p.stderr + s.logs()
        assert not errors(rep), rep["steps"]
        assert "2026-c.jsonl" in step(rep, "list-dir")["entries"]
        assert os.listdir(outside) == []
    finally:
        shutil.rmtree(outside)


def test_a_sessions_directory_the_guest_made_is_moved_aside(rich_suite):
    """A workspace whose sessions/ the container made (Pi does when it finds none): statd
    cannot archive from a directory the guest may lock it out of, so it moves it aside in
    the workspace (a rename in a directory statd owns) and makes its own."""
    s = rich_suite(accounts=True)
    assert s.rich("chan").returncode == 0
    p, _ = s.say("chan", "#rw no-model")
    assert p.returncode == 0
    ws = s.workspace("chan")
    sess = os.path.join(ws, "sessions")
    shutil.rmtree(sess)
    assert as_guest(s, "chan", lambda ws: os.mkdir("sessions", 0o700, dir_fd=ws)) == 0
    assert os.lstat(sess).st_uid == s.env.accounts["guest"].uid
    with open(os.path.join(sess, "old.jsonl"), "w") as f:
        f.write("x")
    p, rep = s.say("chan", "#rw no-model #rw write-file /workspace/sessions/new.jsonl y")
    assert p.returncode == 0 and not errors(rep), p.stderr + json.dumps(rep) + s.logs()
    assert_statds_shared(s, sess)
    aside = [n for n in os.listdir(ws) if n.startswith("sessions.guest-")]
    assert len(aside) == 1 and os.listdir(os.path.join(ws, aside[0])) == ["old.jsonl"]
    assert "statd did not make was moved aside" in s.logs()


def test_an_attachment_statd_stored_is_the_guests_to_read(rich_suite):
    """statd stores a fetched attachment (runnerd and statd real, a stand-in for brokerd
    answers the fetch, as in test_rich_host.py); the guest account reads it and lists its
    directory, and cannot move it away."""
    s = rich_suite(accounts=True, daemons=("runnerd", "statd"))
    runner = s.env.accounts["runner"]
    files = {"https://cdn.example/doc.txt": (b"attachment body", "text/plain")}
    broker = StandInBroker(os.path.join(s.dirs["rt"], "brokerd.sock"), runner.uid, runner.gid, files=files,
                           reply=lambda inp: {"text": "ok"})
    try:
        assert s.rich("chan").returncode == 0
        p, _ = s.say("chan", "read", urls=["https://cdn.example/doc.txt"])
        assert p.returncode == 0, p.stderr + s.logs()
        wait_until(lambda: broker.inputs, 30, "the turn input")
        rel = broker.inputs[-1]["attachments"][0]["path"].removeprefix("/workspace/")
        turn_dir = os.path.dirname(rel)
        path = os.path.join(s.workspace("chan"), rel)

        def read(ws):
            fd = os.open(rel, os.O_RDONLY, dir_fd=ws)
            try:
                assert os.read(fd, 100) == b"attachment body"
            finally:
                os.close(fd)

        assert as_guest(s, "chan", read) == 0
        assert as_guest(s, "chan", list_dir(turn_dir)) == 0
        assert_statds_shared(s, os.path.join(s.workspace("chan"), "attachments"))
        assert_statds_shared(s, os.path.dirname(path))
        assert as_guest(s, "chan", rename(turn_dir, "attachments/x")) == 1
        assert as_guest(s, "chan", lambda ws: os.unlink(rel, dir_fd=ws)) == 1
        with open(path, "rb") as f:
            assert f.read() == b"attachment body"
    finally:
        broker.stop()


# ---- reply file names -------------------------------------------------------------------------

# Names with a control or format character (each would show as another name, or hide part of
# itself), percent-encoded for richworker's file-name modifier, and what brokerd makes of them.
DISGUISED = [
    ("%E2%80%AEgnp.exe", "\u202egnp.exe", "_gnp.exe"),     # right-to-left override
    ("a%C2%85b", "a\u0085b", "a_b"),                        # C1 next line
    ("zw%E2%80%8Bj", "zw\u200bj", "zw_j"),                  # zero-width space
    ("%EF%BB%BFbom", "\ufeffbom", "_bom"),                  # byte order mark
    ("iso%E2%81%A6x%E2%81%A9", "iso\u2066x\u2069", "iso_x_"),  # isolates
]


def test_reply_file_names_made_plain_by_brokerd(rich_suite, tmp_path):
    """End to end (real brokerd, the worker's packet): brokerd writes each control or format
    character of a reply file name as '_', so the reply reaches the bot with a plain name
    and say --files-dir writes that."""
    s = rich_suite(accounts=True)
    assert s.rich("chan").returncode == 0
    for encoded, _, plain in DISGUISED:
        out = tmp_path / plain
        out.mkdir()
        p, _ = s.say("chan", f"#rw no-model #rw file-name {encoded}", files_dir=str(out))
        assert p.returncode == 0, p.stderr + s.logs()
        assert os.listdir(out) == [plain]


def test_reply_file_names_refused_by_statd(rich_suite, tmp_path):
    """statd checks the reply again (a stand-in for brokerd sends the names as they are): a
    name with a control or format character fails the turn with that rule's log line and
    nothing is written; the same reply with the character left out passes."""
    s = rich_suite(accounts=True, daemons=("runnerd", "statd"))
    runner = s.env.accounts["runner"]
    names = iter([raw for _, raw, _ in DISGUISED] + ["gnp.exe"])

    def reply(inp):
        return {"text": "here", "files": [{"name": next(names), "mime": "text/plain", "data": "eA=="}]}

    broker = StandInBroker(os.path.join(s.dirs["rt"], "brokerd.sock"), runner.uid, runner.gid, reply=reply)
    try:
        assert s.rich("chan").returncode == 0
        for i, (_, raw, _) in enumerate(DISGUISED):
            out = tmp_path / f"out{i}"
            out.mkdir()
            p, _ = s.say("chan", "files please", files_dir=str(out))
            assert p.returncode == 1 and "turn_failed" in p.stderr, (raw, p.stderr)
            assert os.listdir(out) == []
            wait_until(lambda: s.logs().count("a reply file's name has a control or format character") == i + 1,
                       10, "statd's line for the name rule")
        out = tmp_path / "plain"
        out.mkdir()
        p, _ = s.say("chan", "files please", files_dir=str(out))
        assert p.returncode == 0, p.stderr + s.logs()
        assert os.listdir(out) == ["gnp.exe"]
    finally:
        broker.stop()
