# SPDX-License-Identifier: Apache-2.0
"""What one rich worker can make brokerd hold (issue 16, review: "one hostile rich container
can make brokerd use tens of GiB"), against a real brokerd (tests/integration/rich_broker_rig.py).

Rules under test, each with its bad input, its own log line and nothing forwarded:
- a body whose JSON would build a tree out of proportion to its bytes is refused before
  json-c or jansson parse it (common/jsonscan.h, RTS_RICH_JSON_WEIGHT_MAX): 413 and
  "json_too_heavy";
- /worker/compact has its own bound of two bodies a turn at once: 429;
- all rich listeners share a budget of buffered bytes (RTS_RICH_BUFFER_BUDGET, 384 MiB),
  reserved before a body is read: 503 and "buffer budget".
brokerd's peak RSS (VmHWM) is read from /proc while the reviewer's bodies are sent, and a
long conversation near the real limits still goes through. The host compactor of this rig
records every request it is given, so a compaction body that passes is seen at the
compactor, and one refused is seen not to reach it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_broker_memory.py
"""
import json
import os
import re
import socket
import subprocess

import pytest

from broker_rig import count_lines, read_jsonl
from harness import HarnessError, wait_until
from rich_broker_rig import RichRig, finish, request_bytes, start_turn
from testbuild import tb_env  # noqa: F401 (a fixture)

MiB = 1 << 20
# What the bad bodies below may add to brokerd's peak RSS: the body itself is bounded by its
# route (8 MiB here), the parse never happens. Before the pre-scan the 8 MiB bodies cost
# +2.1 GiB and +1 GiB.
REFUSED_GROWTH_MAX = 48 * MiB
# The budget (common/limits.h) plus room for the threads and libmicrohttpd's buffers.
BUDGET = 384 * MiB
HELD_GROWTH_MAX = BUDGET + 64 * MiB


# rich.compaction.command of this rig: records what it was asked through the rig's
# ToolRecorder (hooks write no file), then answers a summary that says how many messages it
# was given.
RECORDING_COMPACTOR = r'''#!/usr/bin/python3
import json, os, socket, sys
d = json.load(sys.stdin)
req = d["request"]
n = len(req["messagesToSummarize"])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.path.join(sys.argv[1], "recorder.sock"))
s.sendall(json.dumps({"file": "compactor.jsonl", "mode": "a",
                      "text": json.dumps({"channel": d["channel"], "messages": n}) + "\n"}).encode())
s.shutdown(socket.SHUT_WR)
s.recv(16)
s.close()
print(json.dumps({"summary": "%d messages" % n, "firstKeptEntryId": req["firstKeptEntryId"],
                  "tokensBefore": req["tokensBefore"], "details": {"summarized": n}}))
'''


class CompactorRig(RichRig):
    """A host compactor that records its requests, taking them up to the route's body
    limit: /worker/compact reads and pre-scans every body of these tests (no size fallback
    answers first) and hands what passes to the compactor."""

    def more_config(self):
        c = super().more_config()
        path = os.path.join(self.dirs["tools"], "recording-compactor.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(RECORDING_COMPACTOR)
        os.chmod(path, 0o755)
        c["rich"]["compaction"] = {"command": ["/usr/bin/python3", path, self.dirs["toolout"]],
                                   "engine": "test-engine", "timeoutMs": 20000, "maxRequestBytes": 96 * MiB}
        return c

    def compactor_requests(self):
        return read_jsonl(os.path.join(self.dirs["toolout"], "compactor.jsonl"))

    def upstream_counts(self):
        return super().upstream_counts() + (count_lines(os.path.join(self.dirs["toolout"], "compactor.jsonl")),)


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    try:
        r = CompactorRig(tb_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def brokerd_pid(rig):
    """brokerd runs under runuser: its child."""
    root = rig.procs["brokerd"].pid
    kids = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(root)], capture_output=True, text=True,
                          check=True).stdout.split("\n")
    for line in kids:
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("roundtable-sand"):
            return int(parts[0])
    return root


def status_kib(pid, field):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def hwm(rig):
    return status_kib(brokerd_pid(rig), "VmHWM") * 1024


def log_count(rig, pattern):
    return len(re.findall(pattern, rig.broker_log()))


def log_grows(rig, pattern, before, timeout=10):
    wait_until(lambda: log_count(rig, pattern) > before, timeout, f"a new log line /{pattern}/")


def empty_objects(tid, size):
    n = size // 3
    return b'{"turnId":"' + tid.encode() + b'","request":{"x":[' + b",".join([b"{}"] * n) + b"]}}"


def text_blocks(size):
    return json.dumps({"model": "m", "max_tokens": 100, "stream": False,
                       "messages": [{"role": "user",
                                     "content": [{"type": "text", "text": ""}] * (size // 30)}]}).encode()


def compaction(tid, n):
    """A compaction request (brokerd/compact.c's shape) of n empty messages to summarize:
    the worst bytes-to-tree ratio in a body the compactor takes."""
    req = {"reason": "threshold", "tokensBefore": 1000, "firstKeptEntryId": "entry-1", "isSplitTurn": False,
           "messagesToSummarize": "@", "turnPrefixMessages": [], "keptMessages": [], "readFiles": [],
           "modifiedFiles": []}
    head, tail = json.dumps({"turnId": tid, "request": req}).encode().split(b'"@"')
    return head + b"[" + b",".join([b"{}"] * n) + b"]" + tail


def compacted(rig, w, tid, n, timeout=30):
    """Send compaction(tid, n): the compactor's answer (200, its summary of n messages), its
    record of n messages and brokerd's line for it, and no pre-scan refusal."""
    calls, lines = len(rig.compactor_requests()), log_count(rig, r"conversation compacted by the host compactor")
    heavy = log_count(rig, r"json_too_heavy")
    r = w.post("/worker/compact", compaction(tid, n), timeout=timeout)
    assert r.status == 200, (r.status, r.body[:200])
    assert r.json()["details"] == {"summarized": n, "engine": "test-engine"}, r.body[:200]
    assert [c["messages"] for c in rig.compactor_requests()[calls:]] == [n]
    log_grows(rig, r"conversation compacted by the host compactor test-engine", lines)
    assert log_count(rig, r"json_too_heavy") == heavy
    return r


# ---- the pre-scan (RTS_RICH_JSON_WEIGHT_MAX) ----

def test_heavy_compact_body_is_refused_before_parsing(rig):
    ch, w, tid, _ = start_turn(rig)
    heavy = r"rich call route compact refused before parsing: more JSON objects"
    before, peak = log_count(rig, heavy), hwm(rig)
    with rig.nothing_forwarded():
        body = compaction(tid, 8 * MiB // 3)
        r = w.post("/worker/compact", body, timeout=60)
        grown = hwm(rig) - peak
        print(f"\n8 MiB compact body of empty objects: {r.status}, peak RSS +{grown / MiB:.1f} MiB")
        assert r.status == 413 and r.error == "too_large", (r.status, r.body[:200])
        log_grows(rig, heavy, before)
        assert grown < REFUSED_GROWTH_MAX
    # The same request, light enough, is parsed and reaches the compactor, which answers.
    compacted(rig, w, tid, 1000)
    finish(ch, w, tid)


def test_heavy_model_body_is_refused_and_not_forwarded(rig):
    ch, w, tid, _ = start_turn(rig)
    heavy = r"rich call route anthropic refused before parsing: more JSON objects"
    before, peak = log_count(rig, heavy), hwm(rig)
    with rig.nothing_forwarded():
        body = text_blocks(8 * MiB)
        r = w.raw(request_bytes("/anthropic/v1/messages", body, worker=False), timeout=60)
        grown = hwm(rig) - peak
        print(f"\n8 MiB model body of empty text blocks: {r.status}, peak RSS +{grown / MiB:.1f} MiB")
        assert r.status == 413, (r.status, r.body[:200])
        log_grows(rig, heavy, before)
        assert grown < REFUSED_GROWTH_MAX
    # Nested past the parse's depth: refused by the pre-scan too, with its own reason.
    with rig.nothing_forwarded():
        r = w.raw(request_bytes("/anthropic/v1/messages", b"[" * 65 + b"]" * 65, worker=False))
        assert r.status == 400
        log_grows(rig, r"rich call route anthropic refused before parsing: JSON nested deeper than 64", 0)
    finish(ch, w, tid)


def test_the_heaviest_body_passed_stays_within_its_estimate(rig):
    """Empty objects just under the weight bound (the worst bytes-to-tree ratio): parsed by
    both libraries and handed to the compactor, and brokerd's peak grows by about the
    128 MiB the weights stand for, not the 340x of the body the review measured."""
    ch, w, tid, _ = start_turn(rig)
    peak = hwm(rig)
    n = 130000
    compacted(rig, w, tid, n, timeout=60)
    grown = hwm(rig) - peak
    print(f"\n{len(compaction(tid, n)) / 1024:.0f} KiB compact body of {n:,} empty objects: "
          f"peak RSS +{grown / MiB:.1f} MiB")
    assert grown < 160 * MiB
    finish(ch, w, tid)


def test_a_long_conversation_still_passes(rig):
    """20,000 messages of 2 KB text each (about 40 MiB, weight 340,000 of 524,288): the
    pre-scan lets it through and the model endpoint gets it."""
    ch, w, tid, _ = start_turn(rig)
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": f"message {i} " + "w" * 2000}]} for i in range(20001)]
    body = json.dumps({"model": "m", "max_tokens": 100, "stream": False, "messages": msgs}).encode()
    before, peak = len(rig.anthropic.requests()), hwm(rig)
    r = w.raw(request_bytes("/anthropic/v1/messages", body, worker=False), timeout=120)
    grown = hwm(rig) - peak
    print(f"\n{len(body) / MiB:.1f} MiB conversation of {len(msgs)} messages: {r.status}, "
          f"peak RSS +{grown / MiB:.1f} MiB ({grown / len(body):.1f}x the body)")
    assert r.status == 200, (r.status, r.body[:300])
    wait_until(lambda: len(rig.anthropic.requests()) > before, 30, "the conversation upstream")
    got = rig.anthropic.requests()[-1]
    assert len(got["body"]["messages"]) == len(msgs)
    finish(ch, w, tid)


# ---- the concurrency and buffer bounds ----

def hold(w, target, size, sent, worker=True):
    """A connection that declared size bytes and sent the first `sent` of them."""
    s = w.connect(timeout=60)
    s.sendall(request_bytes(target, b"", headers={"Content-Length": str(size)}, worker=worker))
    chunk = b" " * MiB
    while sent > 0:
        n = min(sent, len(chunk))
        s.sendall(chunk[:n])
        sent -= n
    return s


def touch(held):
    """One more body byte on each held connection: within the test build's 3 s silence limit."""
    for s in held:
        s.sendall(b" ")


def answer_of(s, timeout=10):
    s.settimeout(timeout)
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not d:
            break
        out += d
    m = re.match(rb"HTTP/1\.1 (\d+)", out)
    return int(m.group(1)) if m else None


def test_compact_bodies_have_their_own_bound(rig):
    ch, w, tid, _ = start_turn(rig)
    held = [hold(w, "/worker/compact", 90 * MiB, MiB) for _ in range(2)]
    try:
        touch(held)
        before = log_count(rig, r"two compaction bodies of the turn in flight already")
        third = hold(w, "/worker/compact", 90 * MiB, 0)
        assert answer_of(third) == 429
        third.close()
        log_grows(rig, r"rich call route compact status 429: two compaction bodies of the turn in flight", before)
    finally:
        for s in held:
            s.close()
    # Once they are gone, a compaction body is taken again.
    wait_until(lambda: w.post("/worker/compact", empty_objects(tid, 300)).status not in (429, 503), 10,
               "a compaction body taken after the held ones closed")
    finish(ch, w, tid)


def test_the_buffer_budget_bounds_held_bodies(rig):
    """The review's attack, 12 x 90 MiB compaction bodies held open (1.1 GiB resident), at
    its largest now: four model calls' 90 MiB bodies (the four slots) and a 72 MiB reply
    packet nearly sent. The next body is refused before it is read, and brokerd's peak stays
    within the budget."""
    with rig.nothing_forwarded():
        ch, w, tid, _ = start_turn(rig)
        ch2, w2, tid2, _ = start_turn(rig)
        peak = hwm(rig)
        size = 90 * MiB
        held = []
        try:
            held += [hold(w, "/anthropic/v1/messages", size, size - 10, worker=False) for _ in range(4)]
            # 360 MiB reserved: a second channel's reply packet does not fit beside them.
            touch(held)
            budget = r"rich call route {} refused before its body: the rich listeners' buffer budget is used up"
            before = log_count(rig, budget.format("result"))
            s = hold(w2, "/worker/result", 72 * MiB, 0)
            assert answer_of(s) == 503
            s.close()
            log_grows(rig, budget.format("result"), before)
            # Neither does a compaction body of the first (96 MiB are its bound: no size
            # fallback answers it).
            touch(held)
            before = log_count(rig, budget.format("compact"))
            s = hold(w, "/worker/compact", size, 0)
            assert answer_of(s) == 503
            s.close()
            log_grows(rig, budget.format("compact"), before)
            grown = hwm(rig) - peak
            print(f"\nfour 90 MiB bodies held, two more refused: peak RSS +{grown / MiB:.0f} MiB, "
                  f"now {hwm(rig) / MiB:.0f} MiB")
            assert grown < HELD_GROWTH_MAX
        finally:
            for s in held:
                s.close()
        # The held bodies gave their reservations back: the reply packet is taken now.
        wait_until(lambda: w2.result(tid2, "done").status == 200, 15, "the reply packet after the budget freed up")
        ch2.done(tid2)
    finish(ch, w, tid)
