# SPDX-License-Identifier: Apache-2.0
"""brokerd's reflection filter on the rich Anthropic routes (issue 16; roundtable-sandbox(7): a
credential the model spells out across many events is caught), against a real brokerd over a
real rich listener and the scripted streaming Anthropic endpoint over TLS
(tests/fakes/fake_anthropic.py, "#script").

Each case splits the turn's OAuth token in two between strings of different events or
members: the stream must be cut with an error event at the event that completes it, nothing of
the second half may reach the worker, and the log line must be the reflection rule's. The same
script with the second half changed by one character (a decoy) passes whole, so it is that
rule, not the event's shape, which cut it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_rich_reflect.py
"""
import json
import re

import pytest

import rich_broker_rig
from harness import HarnessError, wait_until
from rich_broker_rig import MODEL, RichRig, finish, model_body, token_for
from testbuild import tb_env  # noqa: F401 (a fixture)

SPEAKER = ("1003", "Carol", "principal-1003")
CUT = 20


@pytest.fixture(scope="module")
def rig(tb_env):  # noqa: F811
    try:
        r = RichRig(tb_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield r
    try:
        r.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def start_turn(rig):
    ch, w, tid, _ = rich_broker_rig.start_turn(rig, speaker=SPEAKER)
    return ch, w, tid


def script(rig, name, entries):
    with open(rig.anthropic.record.rsplit("/", 1)[0] + f"/script-{name}.json", "w", encoding="utf-8") as f:
        json.dump(entries, f)


def msg_start(mid="msg_1"):
    return ["message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": MODEL, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}]


def end():
    return [["message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 5}}],
            ["message_stop", {"type": "message_stop"}]]


def bstart(i, block):
    return ["content_block_start", {"type": "content_block_start", "index": i, "content_block": block}]


def delta(i, d):
    return ["content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}]


def bstop(i):
    return ["content_block_stop", {"type": "content_block_stop", "index": i}]


def text_block():
    return bstart(0, {"type": "text", "text": ""})


# name -> events for the halves a, b
SPLITS = {
    "block_start_text_then_delta": lambda a, b: [
        msg_start(), bstart(0, {"type": "text", "text": a}), delta(0, {"type": "text_delta", "text": b}), bstop(0)],
    "message_id_then_block_start_text": lambda a, b: [
        msg_start("msg_" + a), bstart(0, {"type": "text", "text": b}), bstop(0)],
    "tool_use_id_then_name": lambda a, b: [
        msg_start(), bstart(0, {"type": "tool_use", "id": a, "name": b, "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": "{}"}), bstop(0)],
    "text_delta_then_next_tool_name": lambda a, b: [
        msg_start(), text_block(), delta(0, {"type": "text_delta", "text": a}), bstop(0),
        bstart(1, {"type": "tool_use", "id": "toolu_1", "name": b, "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": "{}"}), bstop(1)],
    "partial_json_escapes_across_deltas": lambda a, b: [
        msg_start(), bstart(0, {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"a":"' + "".join("\\u%04x" % ord(c) for c in a)}),
        delta(0, {"type": "input_json_delta", "partial_json": "".join("\\u%04x" % ord(c) for c in b) + '"}'}),
        bstop(0)],
}


def strings(o):
    """Every string and object key in o, in order."""
    if isinstance(o, str):
        yield o
    elif isinstance(o, dict):
        for k, v in o.items():
            yield k
            yield from strings(v)
    elif isinstance(o, (list, tuple)):
        for v in o:
            yield from strings(v)


def halves(token, decoy):
    a, b = token[:CUT], token[CUT:]
    if decoy:
        b = b[:3] + chr(ord(b[3]) ^ 1) + b[4:]
    return a, b


@pytest.mark.parametrize("decoy", [False, True], ids=["split", "decoy"])
@pytest.mark.parametrize("split", list(SPLITS))
def test_a_split_token_is_cut_before_its_second_half(rig, split, decoy):
    ch, w, tid = start_turn(rig)
    token = token_for(ch.channel, SPEAKER[0], SPEAKER[2])
    a, b = halves(token, decoy)
    name = f"{split.replace('_', '-')}-{int(decoy)}"
    script(rig, name, [{"events": SPLITS[split](a, b) + end()}])
    n = len(rig.anthropic.answers())
    r = w.messages(model_body("#script " + name))
    assert r.status == 200
    wait_until(lambda: len(rig.anthropic.answers()) > n, 10, "the upstream's answer recorded")
    body = r.body.decode()
    if decoy:
        assert r.events()[-1][0] == "message_stop"
        got = "".join(strings(r.events()))
        assert b in got or "".join("\\u%04x" % ord(c) for c in b) in got
    else:
        assert r.events()[-1] == ("error", {"type": "error", "error": {"type": "api_error",
                                                                        "message": "upstream error"}})
        assert b not in body and b[:8] not in body
        assert "".join("\\u%04x" % ord(c) for c in b[:4]) not in body
        wait_until(lambda: re.search(rf"anthropic answer refused: it reflects a credential of the turn.*"
                                     rf"turn={tid}", rig.broker_log()), 10, "the reflection rule's log line")
    finish(ch, w, tid)


def test_citations_are_dropped_not_passed_on(rig):
    """A text block's citations (which only documents and search results, both refused in the
    request, bring) are dropped: the half of the token in them never reaches the worker."""
    ch, w, tid = start_turn(rig)
    token = token_for(ch.channel, SPEAKER[0], SPEAKER[2])
    a, b = token[:CUT], token[CUT:]
    script(rig, "citations", [{"events": [
        msg_start(), bstart(0, {"type": "text", "text": "", "citations": [{"type": "char_location", "cited_text": a}]}),
        delta(0, {"type": "text_delta", "text": b}), bstop(0)] + end()}])
    r = w.messages(model_body("#script citations"))
    assert r.status == 200 and r.events()[-1][0] == "message_stop"
    body = r.body.decode()
    assert a not in body and "citations" not in body and "cited_text" not in body
    assert r.text() == b
    finish(ch, w, tid)


@pytest.mark.parametrize("decoy", [False, True], ids=["split", "decoy"])
def test_a_whole_answer_split_over_two_text_blocks(rig, decoy):
    ch, w, tid = start_turn(rig)
    token = token_for(ch.channel, SPEAKER[0], SPEAKER[2])
    a, b = halves(token, decoy)
    name = f"whole-{int(decoy)}"
    script(rig, name, [{"status": 200, "body": {
        "id": "m", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": a}, {"type": "text", "text": b, "citations": None}],
        "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}])
    r = w.messages(model_body("#script " + name, stream=False))
    body = r.body.decode()
    if decoy:
        assert r.status == 200
        assert [c["text"] for c in r.json()["content"]] == [a, b]
        assert "citations" not in body
    else:
        assert r.status == 502, (r.status, body[:300])
        assert a not in body and b not in body
        wait_until(lambda: re.search(rf"anthropic answer refused: it reflects a credential of the turn.*"
                                     rf"turn={tid}", rig.broker_log()), 10, "the reflection rule's log line")
    finish(ch, w, tid)
