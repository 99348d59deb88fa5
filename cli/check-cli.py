#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The admin CLI against a scripted stand-in for statd's control socket.

Checks what the CLI sends (request shapes from DESIGN.md section 5), what it prints and
which exit code it returns (the table at the top of cli/main.c). Needs python3 only: no
daemons, no Docker, no root. Run from the build directory (make check does), or set
RTS_CLI to the binary.
"""
import json
import os
import pty
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

CLI = os.environ.get("RTS_CLI", os.path.join(os.getcwd(), "cli", "roundtable-sandbox"))


class FakeStatd:
    """Accepts connections on <dir>/control.sock and answers each request line with the
    lines that script(request) returns (a list of bytes; the connection closes after a
    b"CLOSE" item). Every request is recorded."""

    def __init__(self, runtime_dir, script):
        self.path = os.path.join(runtime_dir, "control.sock")
        self.script = script
        self.requests = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        with conn, conn.makefile("rb") as f:
            try:
                for line in f:
                    req = json.loads(line)
                    self.requests.append(req)
                    for out in self.script(req):
                        if out == b"CLOSE":
                            return
                        conn.sendall(out)
            except OSError:
                pass  # the CLI hung up, as it should on an oversized line

    def close(self):
        self.sock.close()


def line(obj):
    return json.dumps(obj).encode() + b"\n"


# Answers to a message that are not a plain route; say must exit non-zero for each, with one
# line on stderr (DESIGN.md section 5: anything but "pass"/"sandbox" and no answer at all
# mean "do not route to a host agent"). An entry with "id" is sent without any id; None
# closes the connection without an answer.
ODD_ANSWERS = {
    "drop-error": {"route": "drop", "error": "queue_full"},
    "pass-error": {"route": "pass", "error": "invalid_request", "detail": "author.tier must be a string"},
    "sandbox-error": {"route": "sandbox", "error": "busy"},
    "anonymous-drop": {"id": None, "route": "drop", "error": "line_too_long"},
    "no-route": {},
    "null-route": {"route": None},
    "number-route": {"route": 1},
    "odd-route": {"route": "elsewhere"},
    "noisy-route": {"route": "x\n\x1b[2Jlonger than any word statd uses, on two lines"},
    "noisy-error": {"route": "drop", "error": "bad\nthing \x1b[31m"},
    "error-object": {"route": "drop", "error": {"code": "busy"}},
    "no-answer": None,
}


# Reply file names --files-dir must not write as they are (name: what say writes): bidi
# overrides and isolates, C1 controls, zero-width and format characters, '/', a leading dot.
ODD_NAMES = {
    "\u202egnp.exe": "_gnp.exe",
    "a\u0085b": "a_b",
    "zw\u200bj": "zw_j",
    "\ufeffbom": "_bom",
    "iso\u2066x\u2069": "iso_x_",
    "lrm\u200e": "lrm_",
    "tag\U000e0041": "tag_",
    "bell\x07": "bell_",
    "c/d": "c_d",
    ".hidden": "hidden",
    "caf\u00e9 \u65e5\u672c.txt": "caf\u00e9 \u65e5\u672c.txt",
}


def statd_script(req):
    """The stand-in's behaviour, chosen by the request (and, for messages, its text)."""
    rid = req.get("id")
    op = req.get("op")
    if op == "mode":
        return [line({"id": rid, "ok": True, "channel": req["channel"], "mode": req["mode"]})]
    if op == "status" and req.get("channel") == "silent":
        return []  # accepted, never answered: a statd that hangs
    if op == "status" and "channel" in req:
        return [line({"id": rid, "ok": True, "channel": req["channel"], "mode": "on", "running": True,
                      "queued": 2, "fresh": False, "spare": "ready"})]
    if op == "status":
        return [line({"id": rid, "ok": True, "channels": 3, "on": 2, "running": 1, "queued": 4, "spares": 5})]
    if op == "fresh":
        return [line({"id": rid, "ok": True, "channel": req["channel"], "fresh": True})]
    if op == "cancel":
        return [line({"id": rid, "ok": True, "channel": req["channel"], "cancelled": 3})]
    if op == "channels":
        return [line({"id": rid, "ok": True, "channels": [
            {"channel": "alpha", "mode": "on"},
            {"channel": "evil\n\x1b[2Jkey\\", "mode": "off"},
            {"channel": "bidi\u202eevil\u2066\u009b\u200fok\u200b\U000e0001", "mode": "on"}]})]
    if op != "message":
        return [line({"id": rid, "error": "unknown op"})]
    text = req["text"]
    if text in ODD_ANSWERS:
        answer = ODD_ANSWERS[text]
        if answer is None:
            return [b"CLOSE"]
        if "id" in answer:
            return [line({k: v for k, v in answer.items() if k != "id"})]
        return [line(dict(answer, id=rid))]
    route = {"pass": "pass", "drop": "drop"}.get(text, "sandbox")
    if text == "refused":
        return [line({"id": rid, "error": "invalid message"})]
    if text == "anonymous":
        return [line({"error": "malformed request"})]
    if text == "garbage":
        return [b"{not json\n"]
    if text == "huge":
        # Past CLI_ANSWER_MAX (RTS_CONTROL_EVENT_MAX: a rich reply event with its files).
        return [b"{\"id\": %d, \"pad\": \"" % rid + b"x" * (76 * 1024 * 1024) + b"\"}\n"]
    answers = [line({"id": 999, "event": "reply", "text": "someone else's"}),
               line({"id": rid, "route": route})]
    if route != "sandbox":
        return answers
    if text == "fail":
        return answers + [line({"id": rid, "event": "error", "error": "turn_timeout"})]
    if text == "hangup":
        return answers + [b"CLOSE"]
    if text == "escape":
        return answers + [line({"id": rid, "event": "reply", "text": "a\x1b[31mb\nc\td"})]
    if text == "odd-names":
        # Reply files whose names statd would refuse; say must not write them as they are.
        return answers + [line({"id": rid, "event": "reply", "text": "files", "files": [
            {"name": name, "mime": "text/plain", "data": "eA=="} for name in ODD_NAMES]})]
    return answers + [line({"id": rid, "event": "reply", "text": "echo: " + text})]


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rts-cli-")
        self.statd = FakeStatd(self.tmp.name, statd_script)

    def tearDown(self):
        self.statd.close()
        self.tmp.cleanup()

    def cli(self, *args, runtime_dir=None, stdin=None):
        # A config path that does not exist: these commands must not need one.
        cmd = [CLI, "--config", "/nonexistent/sandbox.json", "--runtime-dir", runtime_dir or self.tmp.name]
        if stdin is None:
            return subprocess.run(cmd + list(args), capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        return subprocess.run(cmd + list(args), capture_output=True, timeout=30, input=stdin)

    def test_silent_statd_times_out(self):
        # A status answer comes at once from a healthy statd; the CLI gives up after 30 s
        # instead of hanging, and says statd is unreachable (exit 5).
        start = time.monotonic()
        cmd = [CLI, "--config", "/nonexistent/sandbox.json", "--runtime-dir", self.tmp.name, "status", "silent"]
        p = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - start
        self.assertEqual(p.returncode, 5, p.stderr)
        self.assertIn(b"did not answer in time", p.stderr)
        self.assertGreaterEqual(elapsed, 29)

    def test_mode_on_off(self):
        p = self.cli("on", "chan-1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"chan-1\ton\n")
        p = self.cli("off", "chan-1")
        self.assertEqual(p.stdout, b"chan-1\toff\n")
        self.assertEqual(self.statd.requests[0], {"op": "mode", "id": 1, "channel": "chan-1", "mode": "on"})
        self.assertEqual(self.statd.requests[1]["mode"], "off")

    def test_status(self):
        p = self.cli("status")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"channels\t3\non\t2\nrunning\t1\nqueued\t4\nspares\t5\n")
        self.assertNotIn("channel", self.statd.requests[0])
        p = self.cli("status", "c")
        self.assertEqual(p.stdout, b"channel\tc\nmode\ton\nrunning\tyes\nqueued\t2\nfresh\tno\nspare\tready\n")
        p = self.cli("status", "--json", "c")
        self.assertEqual(json.loads(p.stdout)["queued"], 2)
        p = self.cli("status", "--json")
        self.assertEqual(json.loads(p.stdout)["channels"], 3)

    def test_fresh_cancel(self):
        p = self.cli("fresh", "c")
        self.assertEqual((p.returncode, p.stdout), (0, b"c\tfresh\n"))
        p = self.cli("cancel", "c")
        self.assertEqual((p.returncode, p.stdout), (0, b"c\tcancelled\t3\n"))
        self.assertEqual([r["op"] for r in self.statd.requests], ["fresh", "cancel"])

    def test_channels_escapes_keys(self):
        p = self.cli("channels")
        self.assertEqual(p.returncode, 0, p.stderr)
        # Bidi overrides and isolates and C1 controls are escaped too, and in a key, which
        # must never pass for another, so is every invisible code point: a right-to-left
        # mark, a zero-width space, a tag character.
        self.assertEqual(p.stdout, b"alpha\ton\nevil\\x0a\\x1b[2Jkey\\\\\toff\n"
                         b"bidi\\u202eevil\\u2066\\u009b\\u200fok\\u200b\\U000e0001\ton\n")
        p = self.cli("channels", "--json")
        channels = json.loads(p.stdout)["channels"]
        self.assertEqual(channels[2]["channel"], "bidi\u202eevil\u2066\u009b\u200fok\u200b\U000e0001")
        # The same JSON, with those characters as \u escapes, never raw.
        for raw in ("\u202e", "\u2066", "\u009b"):
            self.assertNotIn(raw.encode(), p.stdout)

    def test_say_request_and_reply(self):
        p = self.cli("say", "c", "--author", "42", "--name", "Alice", "hello there")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"echo: hello there\n")
        self.assertEqual(self.statd.requests[0], {
            "op": "message", "id": 1, "channel": "c", "guild": True, "addressed": True, "attachments": 0,
            "text": "hello there",
            "author": {"id": "42", "name": "Alice", "principalId": "42", "tier": "member", "bot": False,
                       "integration": False}})
        p = self.cli("say", "c", "--author", "42", "--name", "Alice", "--principal", "p-7", "--tier", "vip",
                     "--", "-dash")
        self.assertEqual(p.stdout, b"echo: -dash\n")
        self.assertEqual(self.statd.requests[1]["author"]["principalId"], "p-7")
        self.assertEqual(self.statd.requests[1]["author"]["tier"], "vip")

    def test_say_reply_verbatim_when_not_a_tty(self):
        p = self.cli("say", "c", "--author", "1", "--name", "A", "escape")
        self.assertEqual(p.stdout, b"a\x1b[31mb\nc\td\n")

    def test_say_reply_escaped_on_a_tty(self):
        master, slave = pty.openpty()
        cmd = [CLI, "--runtime-dir", self.tmp.name, "say", "c", "--author", "1", "--name", "A", "escape"]
        p = subprocess.run(cmd, stdout=slave, stderr=subprocess.PIPE, timeout=30, stdin=subprocess.DEVNULL)
        os.close(slave)
        out = b""
        try:
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass  # EIO once the pty's only writer is gone
        os.close(master)
        self.assertEqual(p.returncode, 0, p.stderr)
        # The terminal turns "\n" into "\r\n"; the escape sequence arrives defused.
        self.assertEqual(out, b"a\\x1b[31mb\r\nc\td\r\n")

    def test_say_files_dir_names(self):
        # Each odd name is written with its control or format characters as '_'; ordinary
        # non-ASCII letters stay.
        out = os.path.join(self.tmp.name, "out")
        os.mkdir(out)
        p = self.cli("say", "c", "--author", "1", "--name", "A", "--files-dir", out, "odd-names")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(os.listdir(out)), sorted(ODD_NAMES.values()))
        for name in os.listdir(out):
            with open(os.path.join(out, name), "rb") as f:
                self.assertEqual(f.read(), b"x")

    def test_say_routes_and_errors(self):
        cases = {"pass": 3, "drop": 4, "fail": 1, "refused": 1, "anonymous": 1, "garbage": 1, "huge": 1,
                 "hangup": 5}
        for text, code in cases.items():
            p = self.cli("say", "c", "--author", "1", "--name", "A", text)
            self.assertEqual(p.returncode, code, (text, p.stderr))
            self.assertEqual(p.stdout, b"", text)
            self.assertEqual(len(p.stderr.splitlines()), 1, (text, p.stderr))
            if text == "huge":
                self.assertIn(b"longer than", p.stderr)
        p = self.cli("say", "c", "--author", "1", "--name", "A", "fail")
        self.assertIn(b"turn_timeout", p.stderr)

    def test_say_never_succeeds_without_a_sandbox_route(self):
        expect = {"drop-error": (1, b"queue_full (route drop)"), "pass-error": (1, b"invalid_request (route pass)"),
                  "sandbox-error": (1, b"busy (route sandbox)"), "anonymous-drop": (1, b"line_too_long (route drop)"),
                  "no-route": (1, b"no route"), "null-route": (1, b"no route"), "number-route": (1, b"no route"),
                  "odd-route": (1, b"unknown route"), "noisy-route": (1, b"unknown route \"?\""),
                  "noisy-error": (1, b"an unknown reason (route drop)"),
                  "error-object": (1, b"an unknown reason (route drop)"), "no-answer": (5, b"closed the connection")}
        self.assertEqual(set(expect), set(ODD_ANSWERS))
        for text, (code, words) in expect.items():
            p = self.cli("say", "c", "--author", "1", "--name", "A", text)
            self.assertEqual(p.returncode, code, (text, p.stderr))
            self.assertEqual(p.stdout, b"", text)
            self.assertEqual(len(p.stderr.splitlines()), 1, (text, p.stderr))
            self.assertIn(words, p.stderr, text)
            self.assertNotIn(b"\x1b", p.stderr, text)

    def test_usage_errors_send_nothing(self):
        cases = [
            [], ["bogus"], ["on"], ["on", "a", "b"], ["on", ""], ["status", "a", "b"], ["channels", "x"],
            ["say", "c", "hello"], ["say", "c", "--author", "1", "hi"], ["say", "--author", "1", "--name", "A", "c"],
            ["say", "c", "--author", "", "--name", "A", "t"], ["status", "--bogus"], ["image"], ["image", "push"],
        ]
        for args in cases:
            p = self.cli(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
        self.assertEqual(self.statd.requests, [])

    def test_say_text_from_stdin(self):
        # Kept out of argv, where every local user can read it; one trailing newline dropped.
        p = self.cli("say", "c", "--author", "1", "--name", "A", "--stdin", stdin=b"two\nlines\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"echo: two\nlines\n")
        self.assertEqual(self.statd.requests[0]["text"], "two\nlines")
        longest = b"z" * 400000  # RTS_RICH_TEXT_BYTES_MAX: statd holds each mode to its own
        p = self.cli("say", "c", "--author", "1", "--name", "A", "--stdin", stdin=longest + b"\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.statd.requests[1]["text"], longest.decode())
        sent = len(self.statd.requests)
        bad = {"too long": longest + b"z", "too long after the newline": longest + b"\nmore",
               "NUL": b"a\0b", "not UTF-8": b"\xff\xfe"}
        for why, data in bad.items():
            p = self.cli("say", "c", "--author", "1", "--name", "A", "--stdin", stdin=data)
            self.assertEqual(p.returncode, 2, (why, p.stderr))
            self.assertIn(b"TEXT", p.stderr, why)
        p = self.cli("say", "c", "--author", "1", "--name", "A", "--stdin", "also an argument", stdin=b"x")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(self.statd.requests), sent, "a refused TEXT was sent")

    def test_longest_text_is_accepted(self):
        # An argument is at most 128 KiB (the kernel's MAX_ARG_STRLEN); longer TEXT, up to the
        # rich bound, comes with --stdin (test_say_text_from_stdin).
        text = "y" * (128 * 1024 - 1)
        p = self.cli("say", "c", "--author", "1", "--name", "A", text)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.statd.requests[0]["text"], text)

    def test_unreachable(self):
        with tempfile.TemporaryDirectory() as empty:
            p = self.cli("status", runtime_dir=empty)
            self.assertEqual(p.returncode, 5)
            p = self.cli("say", "c", "--author", "1", "--name", "A", "hi", runtime_dir=empty)
            self.assertEqual(p.returncode, 5)

    def test_config_commands_need_a_config(self):
        p = self.cli("gc")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"/nonexistent/sandbox.json", p.stderr)
        p = self.cli("image", "build")
        self.assertEqual(p.returncode, 1)
        p = self.cli("image", "build", "--tag", "x:y", "--dir", self.tmp.name)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"Dockerfile", p.stderr)
        p = self.cli("image", "build", "--tag", "-bad", "--dir", self.tmp.name)
        self.assertEqual(p.returncode, 2)

    def test_image_build_rich_usage(self):
        # --content belongs to --rich, --rich and --precheck exclude each other; without
        # --tag the tag is the config's rich.image (here no config: a failure naming it);
        # a directory without make-context.sh is refused before anything runs.
        p = self.cli("image", "build", "--content", self.tmp.name, "--tag", "x:y")
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--content goes with --rich", p.stderr)
        p = self.cli("image", "build", "--rich", "--precheck", "--tag", "x:y")
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"pass one", p.stderr)
        p = self.cli("image", "build", "--rich", "--dir", self.tmp.name)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"--tag", p.stderr)
        p = self.cli("image", "build", "--rich", "--tag", "x:y", "--dir", self.tmp.name)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"make-context.sh", p.stderr)
        p = self.cli("image", "build", "--rich", "--tag", "x:y", "--dir", os.path.join(self.tmp.name, "none"))
        self.assertEqual(p.returncode, 1)
        p = self.cli("image", "build", "--rich", "--tag", "x:y", "--dir", self.tmp.name, "--content", "")
        self.assertEqual(p.returncode, 2)

    def test_gc_refuses_while_turns_run(self):
        config = os.path.join(self.tmp.name, "sandbox.json")
        with open(config, "w") as f:
            json.dump({"model": "m", "modelUrl": "https://model.invalid/v1/chat/completions",
                       "stateFile": os.path.join(self.tmp.name, "state.json")}, f)
        cmd = [CLI, "--config", config, "--runtime-dir", self.tmp.name, "gc"]
        p = subprocess.run(cmd, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(b"1 running turn", p.stderr)
        self.assertEqual(self.statd.requests, [{"op": "status", "id": 1}])


if __name__ == "__main__":
    if not os.access(CLI, os.X_OK):
        print(f"{CLI}: not built", file=sys.stderr)
        sys.exit(99)
    unittest.main(verbosity=2)
