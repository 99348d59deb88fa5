# SPDX-License-Identifier: Apache-2.0
"""Routing never fails open (issue 10; DESIGN.md section 5; HACKING.md "Control protocol
answers").

For a channel that is on, every answer to a `message` carries "route":"drop" or
"route":"sandbox", also when it carries an error; only a channel known to be off answers
"pass". A line statd cannot read as a request at all (too long, not JSON, no op) may have
been a message, so it answers "drop" too. Each case sends the bad input to the real statd
and checks the answer, that nothing was queued or run for it (no container created, no
model request, no event), and that the answer names the rule that refused it.

Faults of the service itself: a queue that is full, statd's global bounds (busy), a statd
that is shutting down, and a runnerd that is not running, whose socket is stale, or that
hangs. A hanging runnerd is the real one stopped with SIGSTOP once its link is up: statd's
turns then wait on it without any container, so queues fill cheaply."""
import json
import os
import signal
import time

import pytest

from harness import LABEL_INSTALLATION, docker
from lifecycle_helpers import daemon_pid, kill9, message, recv_until, restart, say, wait_for

ON = "guild-10/on"
OFF = "guild-10/off"
QUEUE_MAX = 64  # STATD_QUEUE_MAX: queued items per channel
QUEUED_BYTES_MAX = 64 << 20  # STATD_QUEUED_BYTES_MAX: bytes of queued text, all channels
TEXT_MAX = 64 * 1024  # RTS_TEXT_MAX: a sandboxed channel's text (statd_message_check_mode)
TEXT_PARSE_MAX = 400000  # RTS_RICH_TEXT_BYTES_MAX: the longest text of any mode, refused whatever the mode
LINE_MAX = 96 * 1024 * 1024  # RTS_CONTROL_RICH_LINE_MAX (common/limits.h)
DELETE = object()


# ---- helpers ----

def creates_since(s, t0):
    """Names of this installation's containers created since t0 (time.time())."""
    p = docker("events", "--since", f"{t0:.3f}", "--until", str(int(time.time()) + 1), "--filter",
               f"label={LABEL_INSTALLATION}={s.installation}", "--filter", "event=create", "--format",
               "{{.Actor.Attributes.name}}", timeout=60)
    return [n for n in p.stdout.split() if n]


def changed(channel, path, value, text="hello"):
    """message(channel, text) with member path ("key" or "author.key") set to value, or
    removed when value is DELETE."""
    m = message(channel, text, id=f"r-{path}-{len(str(value))}")
    m["author"] = dict(m["author"])
    obj, key = (m["author"], path[7:]) if path.startswith("author.") else (m, path)
    if value is DELETE:
        obj.pop(key, None)
    else:
        obj[key] = value
    return m


def send_line(c, data):
    """Send one request (an object, or raw bytes without the newline) and return the next line."""
    c.send_raw((json.dumps(data).encode() if isinstance(data, dict) else data) + b"\n")
    return c.recv(timeout=30)


def mode(s, channel, m):
    p = s.cli(m, channel)
    assert p.returncode == 0, p.stderr


def channel_status(s, channel):
    return s.control({"op": "status", "channel": channel})[0]


def freeze(s, name):
    """SIGSTOP a daemon: it hangs with its sockets open (ended by kill_frozen). runuser,
    its parent, stops itself when it sees its child stop (util-linux su-common.c)."""
    os.kill(daemon_pid(s, name), signal.SIGSTOP)


def kill_frozen(s, name):
    """SIGKILL a daemon stopped by freeze(), and let runuser go on to report its end."""
    os.kill(daemon_pid(s, name), signal.SIGKILL)
    os.kill(s.procs[name].pid, signal.SIGCONT)
    s.procs[name].wait(30)


def assert_base_runs_next(s, c, channel, before_requests):
    """Send a valid, eligible message on c and check that its route answer and its reply are
    the very next lines: no refused request of this connection left a turn queued ahead of
    it in the channel's FIFO, nor an event. Returns the model requests its turn made."""
    rid = c.send(message(channel, "route-check: the valid one"))
    assert c.recv(timeout=60) == {"id": rid, "route": "sandbox"}
    ev = c.recv(timeout=120)
    assert ev["id"] == rid and ev["event"] == "reply", ev
    assert ev["text"].endswith("route-check: the valid one"), ev
    new = s.fake.requests()[before_requests:]
    assert new, "the valid turn made no model request"
    assert all("route-check: the valid one" in json.dumps(r) for r in new), "a refused message reached the model"
    return new


# Each wrong-typed, missing or over-long field of a message: (path, value, error code, a word
# of the detail that names the rule, whether statd can still read the channel key).
BAD_FIELDS = [
    ("id", DELETE, "invalid_request", "id is required", True),
    ("id", 1.5, "invalid_request", "id must be", True),
    ("id", True, "invalid_request", "id must be", True),
    ("id", [1], "invalid_request", "id must be", True),
    ("id", 2 ** 53, "invalid_request", "id must be", True),
    ("id", "i" * 257, "invalid_request", "id must be", True),
    ("channel", DELETE, "invalid_request", "channel", False),
    ("channel", None, "invalid_request", "channel", False),
    ("channel", 10, "invalid_request", "channel", False),
    ("channel", [ON], "invalid_request", "channel", False),
    ("channel", {"key": ON}, "invalid_request", "channel", False),
    ("channel", "", "invalid_request", "channel", False),
    ("channel", "c" * 513, "invalid_request", "channel", False),
    ("guild", DELETE, "invalid_request", "guild", True),
    ("guild", "true", "invalid_request", "guild", True),
    ("guild", 1, "invalid_request", "guild", True),
    ("guild", None, "invalid_request", "guild", True),
    ("addressed", DELETE, "invalid_request", "addressed", True),
    ("addressed", "yes", "invalid_request", "addressed", True),
    ("author", DELETE, "invalid_request", "author is required", True),
    ("author", "1001", "invalid_request", "author must be", True),
    ("author", [], "invalid_request", "author must be", True),
    ("author.id", DELETE, "invalid_request", "author.id", True),
    ("author.id", 1001, "invalid_request", "author.id", True),
    ("author.id", "", "invalid_request", "author.id", True),
    ("author.id", "9" * 257, "invalid_request", "author.id", True),
    ("author.name", DELETE, "invalid_request", "author.name", True),
    ("author.name", ["Alice"], "invalid_request", "author.name", True),
    ("author.name", "", "invalid_request", "author.name", True),
    ("author.name", "A" * 257, "invalid_request", "author.name", True),
    ("author.principalId", 7, "invalid_request", "author.principalId", True),
    ("author.principalId", "p" * 257, "invalid_request", "author.principalId", True),
    ("author.tier", 3, "invalid_request", "author.tier", True),
    ("author.tier", "t" * 257, "invalid_request", "author.tier", True),
    ("author.bot", DELETE, "invalid_request", "author.bot", True),
    ("author.bot", "false", "invalid_request", "author.bot", True),
    ("author.integration", DELETE, "invalid_request", "author.integration", True),
    ("author.integration", 0, "invalid_request", "author.integration", True),
    ("author.role", "admin", "invalid_request", "author has an unknown field", True),
    ("thread", True, "invalid_request", "unknown field", True),
    ("text", DELETE, "invalid_request", "text must be a string", True),
    ("text", None, "invalid_request", "text must be a string", True),
    ("text", 42, "invalid_request", "text must be a string", True),
    ("text", "x" * (TEXT_PARSE_MAX + 1), "text_too_long", "longer than", True),
    ("text", "y" * (410 * 1000), "text_too_long", "longer than", True),
    ("attachments", "1", "invalid_request", "attachments", True),
    ("attachments", -1, "invalid_request", "attachments", True),
    ("attachments", 2 ** 32, "invalid_request", "attachments", True),
    ("attachments", 1.5, "invalid_request", "attachments", True),
]


def test_every_bad_field_drops_in_an_on_channel_and_passes_only_when_known_off(suite):
    mode(suite, ON, "on")
    mode(suite, OFF, "off")
    t0 = time.time()
    before = len(suite.fake.requests())
    c = suite.connect(timeout=60)
    try:
        for path, value, code, word, channel_known in BAD_FIELDS:
            for channel, known_off in ((ON, False), (OFF, True)):
                m = changed(channel, path, value, text=f"bad-case {path}")
                id_ok = path != "id"
                route = "pass" if known_off and channel_known and id_ok else "drop"
                a = send_line(c, m)
                detail = a.pop("detail", "")
                want = {"route": route, "error": code}
                if id_ok:
                    want["id"] = m["id"]
                assert a == want, (path, value, channel, a)
                # The detail names the rule (a fixed text: never the client's data).
                assert word in detail, (path, detail)
                assert len(detail) < 120 and "bad-case" not in detail
        # Nothing was queued or run for any of them: the next valid message of the channel
        # is answered and replied to at once, nothing reached the model but its own turn,
        # and only its container was created.
        assert_base_runs_next(suite, c, ON, before)
    finally:
        c.close()
    assert len(creates_since(suite, t0)) == 1
    assert channel_status(suite, ON)["queued"] == 0


def test_lines_that_may_be_messages_drop(suite):
    """Lines statd cannot read as a request answer "drop" whatever channel they name: it
    cannot tell their channel (or whether they are messages at all)."""
    mode(suite, ON, "on")
    mode(suite, OFF, "off")
    t0 = time.time()
    before = len(suite.fake.requests())
    valid = json.dumps(message(OFF, "bad-case line", id="L1"))
    cases = [
        # (raw line, expected error code, id echoed)
        (valid[:-1].encode(), "invalid_json", None),  # unterminated
        (valid.replace('"channel": "guild-10/off"', '"channel": "guild-10/off", "channel": "guild-10/on"').encode(),
         "invalid_json", None),  # duplicate key
        (valid.replace("bad-case line", "bad\\u0000case").encode(), "invalid_json", None),
        (valid.replace("bad-case line", "bad-case \\ud800").encode(), "invalid_json", None),
        (valid.replace("bad-case line", "bad-case \x01").encode(), "invalid_json", None),
        (b"\xff" + valid.encode(), "invalid_json", None),
        (b"[" + valid.encode() + b"]", "invalid_json", None),
        (valid.replace('"message"', '"message", "x": ' + "[" * 40 + "]" * 40).encode(), "invalid_json", None),
        (json.dumps({k: v for k, v in json.loads(valid).items() if k != "op"}).encode(), "invalid_request", "L1"),
        (valid.replace('"op": "message"', '"op": 7').encode(), "invalid_request", "L1"),
        (valid.replace('"op": "message"', '"op": ""').encode(), "invalid_request", "L1"),
        (valid.replace('"op": "message"', '"op": "Message"').encode(), "unknown_op", "L1"),
        (valid.replace('"op": "message"', '"op": "messages"').encode(), "unknown_op", "L1"),
        # An over-long line: only a message can legitimately be this long.
        (json.dumps(message(OFF, "z" * (LINE_MAX + 10), id="L2")).encode(), "line_too_long", None),
    ]
    c = suite.connect(timeout=60)
    try:
        for raw, code, rid in cases:
            a = send_line(c, raw)
            a.pop("detail", None)
            want = {"route": "drop", "error": code}
            if rid:
                want["id"] = rid
            assert a == want, (raw[:80], a)
        # Requests known not to be messages get an error without a route.
        for req in ({"op": "mode", "id": "M1", "channel": "", "mode": "on"},
                    {"op": "status", "id": "M2", "channel": 7},
                    {"op": "cancel", "id": "M3"},
                    {"op": "mode", "id": 1.5, "channel": ON, "mode": "off"}):
            a = send_line(c, req)
            assert a["error"] == "invalid_request" and "route" not in a, (req, a)
        # The connection is still usable, and nothing ran.
        assert send_line(c, {"op": "status", "id": "S"})["ok"] is True
        assert_base_runs_next(suite, c, ON, before)
    finally:
        c.close()
    assert len(creates_since(suite, t0)) == 1
    assert channel_status(suite, ON)["mode"] == "on"


def test_say_is_non_zero_unless_sandboxed(suite):
    """The CLI's say against the real statd: pass is exit 3 with one line on stderr; a text
    over the limit is refused before anything is sent. (Refusals by statd: the fault tests
    below; every answer shape: cli/check-cli.py.)"""
    mode(suite, ON, "on")
    mode(suite, OFF, "off")
    before = len(suite.fake.requests())
    p = say(suite, OFF, "bad-case hello")
    assert p.returncode == 3 and p.stdout == "" and len(p.stderr.splitlines()) == 1, p
    assert "pass" in p.stderr
    # Over the sandboxed channel's own bound: statd drops it, with that rule's code.
    p = suite.cli("say", ON, "--author", "1", "--name", "A", "--stdin", input="y" * 70000)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p
    assert "text_too_long (route drop)" in p.stderr
    # Over every mode's bound: the CLI refuses it before sending.
    p = suite.cli("say", ON, "--author", "1", "--name", "A", "--stdin", input="y" * (TEXT_PARSE_MAX + 1))
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p
    suite.assert_no_turn(before, "a passed message and a refused say", containers=False)


# ---- faults of the service ----

@pytest.fixture
def frozen(make_suite):
    """A private suite whose runnerd is stopped with SIGSTOP once statd's link to it is up:
    turns sent to it wait, no container starts. Yields (suite, t0): t0 is before the
    suite's one real turn (the warm-up). runnerd is killed at the end."""
    s = make_suite(config={"turnTimeoutMs": 120000})
    mode(s, ON, "on")
    mode(s, OFF, "off")
    t0 = time.time()
    p = say(s, ON, "warm-up")
    assert p.returncode == 0, p.stderr
    freeze(s, "runnerd")
    try:
        yield s, t0
    finally:
        if s.procs["runnerd"].poll() is None:
            kill_frozen(s, "runnerd")


def events_for(c, ids, timeout=60):
    """Read c until every id in ids has its (error) event. Returns ({id: error code}, every
    line read)."""
    events, lines = {}, []
    deadline = time.monotonic() + timeout
    while set(events) != set(ids):
        o = c.recv(timeout=max(0.1, deadline - time.monotonic()))
        lines.append(o)
        if o.get("event") == "error" and o.get("id") in ids:
            events[o["id"]] = o["error"]
    return events, lines


def test_queue_full_drops(frozen):
    s, t0 = frozen
    c = s.connect(timeout=60)
    # One turn waits on runnerd, QUEUE_MAX more are queued behind it.
    ids = [c.send(message(ON, f"queued {i}")) for i in range(1 + QUEUE_MAX)]
    for rid in ids:
        assert c.recv() == {"id": rid, "route": "sandbox"}
    st = channel_status(s, ON)
    assert (st["running"], st["queued"]) == (True, QUEUE_MAX)
    refused = c.send(message(ON, "bad-case one too many"))
    assert c.recv() == {"id": refused, "route": "drop", "error": "queue_full"}
    assert "queue full (64 items), refusing a turn" in s.log_tail("statd")
    assert channel_status(s, ON)["queued"] == QUEUE_MAX  # nothing queued for it
    # The CLI says so in one line and exits non-zero.
    p = say(s, ON, "bad-case from say")
    assert p.returncode == 1 and "queue_full" in p.stderr and len(p.stderr.splitlines()) == 1, p
    # A channel that is off still passes.
    assert s.control(message(OFF, "bad-case"))[0]["route"] == "pass"

    a = s.control({"op": "cancel", "channel": ON})[0]
    assert a["cancelled"] == 1 + QUEUE_MAX
    kill_frozen(s, "runnerd")  # the waiting turn ends too: runnerd is gone
    events, lines = events_for(c, ids)
    assert all(events[rid] == "turn_cancelled" for rid in ids[1:])
    assert events[ids[0]] in ("turn_cancelled", "unavailable")
    assert all(o.get("id") != refused for o in lines)
    # Only the warm-up ever ran.
    assert len(creates_since(s, t0)) == 1
    assert all("bad-case" not in json.dumps(r) for r in s.fake.requests())


def test_busy_drops(frozen):
    """statd's bound on queued text across channels (64 MiB) refuses with busy."""
    s, t0 = frozen
    channels = [f"guild-10/busy-{k}" for k in range(QUEUED_BYTES_MAX // (QUEUE_MAX * TEXT_MAX))]
    for ch in channels:
        mode(s, ch, "on")
    big = "b" * TEXT_MAX
    c = s.connect(timeout=120)
    ids = {}
    for ch in channels:
        # The first turn of each channel waits on runnerd (not queued), the rest queue.
        ids[ch] = [c.send(message(ch, "first"))] + [c.send(message(ch, big)) for _ in range(QUEUE_MAX)]
        for rid in ids[ch]:
            assert c.recv(timeout=60) == {"id": rid, "route": "sandbox"}
    assert s.control({"op": "status"})[0]["queued"] == len(channels) * QUEUE_MAX
    # A channel with an empty queue, so neither queue_full nor anything of its own applies.
    fresh = "guild-10/busy-fresh"
    mode(s, fresh, "on")
    refused = c.send(message(fresh, "x"))
    assert c.recv() == {"id": refused, "route": "drop", "error": "busy"}
    assert channel_status(s, fresh)["running"] is False
    assert s.control(message(OFF, "x"))[0]["route"] == "pass"
    # The same message is taken once the bound has room again.
    assert s.control({"op": "cancel", "channel": channels[0]})[0]["cancelled"] == 1 + QUEUE_MAX
    events, lines = events_for(c, ids[channels[0]][1:])
    assert set(events.values()) == {"turn_cancelled"}
    again = c.send(message(fresh, "x"))
    assert c.recv() == {"id": again, "route": "sandbox"}
    for ch in channels[1:] + [fresh]:
        s.control({"op": "cancel", "channel": ch})
    kill_frozen(s, "runnerd")
    rest = [rid for ch in channels[1:] for rid in ids[ch]] + [ids[channels[0]][0], again]
    more, more_lines = events_for(c, rest)
    assert all(o.get("id") != refused for o in lines + more_lines)
    assert len(creates_since(s, t0)) == 1


def test_shutting_down_drops(frozen):
    """While statd stops (waiting for a turn runnerd does not end), a message on an open
    connection gets drop with shutting_down; a new connection gets no answer at all."""
    s, t0 = frozen
    c = s.connect(timeout=60)
    running = c.send(message(ON, "waits"))
    assert c.recv() == {"id": running, "route": "sandbox"}
    statd = daemon_pid(s, "statd")
    os.kill(statd, signal.SIGTERM)
    wait_for(lambda: "stopping: waiting up to" in s.log_tail("statd"), 10, what="statd to start stopping")
    refused = c.send(message(ON, "bad-case while stopping"))
    assert c.recv() == {"id": refused, "route": "drop", "error": "shutting_down"}
    # Routing goes on for the rest: off passes, ineligible drops.
    rid = c.send(message(OFF, "x"))
    assert c.recv() == {"id": rid, "route": "pass"}
    rid = c.send(message(ON, "x", addressed=False))
    assert c.recv() == {"id": rid, "route": "drop"}
    # No listener any more: say gets no answer, and says so.
    p = say(s, ON, "bad-case from say")
    assert p.returncode == 5 and len(p.stderr.splitlines()) == 1, p
    kill_frozen(s, "runnerd")
    ev = recv_until(c, running, timeout=30)
    assert ev["event"] == "error" and ev["error"] in ("unavailable", "turn_cancelled"), ev
    s.procs["statd"].wait(30)
    assert s.procs["statd"].returncode == 0
    assert len(creates_since(s, t0)) == 1
    assert all("bad-case" not in json.dumps(r) for r in s.fake.requests())


@pytest.mark.parametrize("how", ["stopped", "killed", "hanging"])
def test_runnerd_unreachable_never_passes(make_suite, how):
    """runnerd stopped (no socket), killed (a stale socket nothing answers on) or hanging
    before it answers HELLO: a message in an on channel is routed sandbox and its turn
    ends with unavailable; nothing runs, and an off channel still passes."""
    s = make_suite()
    mode(s, ON, "on")
    mode(s, OFF, "off")
    t0 = time.time()
    if how == "stopped":
        s.stop_daemon("runnerd")
    elif how == "killed":
        kill9(s, "runnerd")
        assert os.path.exists(os.path.join(s.dirs["rt"], "runnerd.sock"))
    else:
        freeze(s, "runnerd")
    try:
        c = s.connect(timeout=60)
        rid = c.send(message(ON, "bad-case runnerd gone"))
        assert c.recv() == {"id": rid, "route": "sandbox"}
        ev = recv_until(c, rid, timeout=30)
        assert ev == {"id": rid, "event": "error", "error": "unavailable"}
        p = say(s, ON, "bad-case from say")
        assert p.returncode == 1 and "unavailable" in p.stderr and len(p.stderr.splitlines()) == 1, p
        a = s.control(message(OFF, "x", id="off-1"))[0]
        assert a == {"id": "off-1", "route": "pass"}
        assert channel_status(s, ON)["running"] is False
    finally:
        if how == "hanging":
            kill_frozen(s, "runnerd")
    assert creates_since(s, t0) == []
    assert s.fake.requests() == []
    restart(s, "runnerd")
    # Turns fail at once for a second after a failed connect (STATD_RUNNERD_FAIL_FAST_MS),
    # then the channel works again.
    wait_for(lambda: say(s, ON, "back again").returncode == 0, 20, step=0.5, what="a turn after runnerd's restart")
