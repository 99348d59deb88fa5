# SPDX-License-Identifier: Apache-2.0
"""Real turns against an upstream that answers the way popular OpenAI-compatible servers do
(issue 10, "Real servers' answers"): real daemons as the service account, the real dockerd,
the worker image, and the scripted HTTPS model endpoint sending each answer verbatim
("#script NAME" with {"completion": ...} entries, tests/fakes/fake_model.py).

Each odd shape must still give the guest the right reply, tool calls included (the fake
records every upstream request, so a test sees what the worker echoed and what the tools
answered); what is really malformed still fails the turn with the generic error, refused by
its own rule (brokerd's log names it) and with nothing handed on to the worker.
"""
import json
import os

import pytest

from test_worker import ID_RE, script, trailing_tool_messages

ABSENT = object()


# ---- helpers ----

def completion(message, finish="stop", **extra):
    """A script entry sending this whole answer body."""
    choice = {"index": 0, "message": message}
    if finish is not ABSENT:
        choice["finish_reason"] = finish
    body = {"id": "chatcmpl-shape", "object": "chat.completion", "created": 1700000000, "model": "m",
            "choices": [choice]}
    body.update(extra)
    return {"completion": body}


def reply(text, finish="stop", **extra):
    return completion({"role": "assistant", "content": text}, finish, **extra)


def memory_set(key, value, **call):
    """A memory_set call with arguments as JSON text; keys of call replace or (None) drop
    members of the call."""
    c = {"id": f"call_{key}", "type": "function",
         "function": {"name": "memory_set",
                      "arguments": json.dumps({"scope": "channel", "key": key, "value": value})}}
    for k, v in call.items():
        if v is ABSENT:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def turn(s, channel, text):
    """One addressed message through the CLI in a channel switched on first; returns
    (CompletedProcess, the upstream request bodies of this turn)."""
    assert s.cli("on", channel).returncode == 0
    before = len(s.fake.requests())
    p = s.cli("say", channel, "--author", "1001", "--name", "Alice", text)
    bodies = [r["body"] for r in s.fake.requests()[before:] if r["method"] == "POST"]
    return p, bodies


def ok_turn(s, channel, name, entries):
    script(s, name, entries)
    p, bodies = turn(s, channel, f"#script {name}")
    assert p.returncode == 0, p.stderr + s.log_tail("brokerd", 2000)
    return p.stdout.strip(), bodies


def echoed_assistant(body):
    """The assistant message the trailing tool messages answer."""
    msgs = body["messages"]
    return msgs[len(msgs) - 1 - len(trailing_tool_messages(body))]


def assert_tool_round_trip(body, want_args):
    """The worker's request after one tool-call response: each call echoed with a valid,
    distinct id and the arguments sent, each answered by a successful result paired by id."""
    calls = echoed_assistant(body)["tool_calls"]
    results = trailing_tool_messages(body)
    ids = [c["id"] for c in calls]
    assert all(ID_RE.match(i) for i in ids), ids
    assert len(set(ids)) == len(ids), ids
    assert [m["tool_call_id"] for m in results] == ids
    assert [c["function"]["name"] for c in calls] == ["memory_set"] * len(want_args)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == want_args
    for m in results:
        assert json.loads(m["content"]).get("ok") is True, m["content"]
    return ids


def channel_notes(s, channel):
    with open(os.path.join(s.workspace(channel), ".sandbox", "memory.json"), encoding="utf-8") as f:
        return json.load(f)["channel"]


def args(key, value):
    return {"scope": "channel", "key": key, "value": value}


# ---- tool calls ----

def test_arguments_as_a_json_object(suite):
    """TGI (and llama.cpp's object mode): arguments as an object, id "0", a null
    description beside the name, no content member, finish_reason "stop" beside the call,
    then "eos_token" for the answer."""
    value = 'violet "quoted" \\ ünïcödé ☂'
    call = {"id": "0", "type": "function",
            "function": {"description": None, "name": "memory_set", "arguments": args("colour", value)}}
    ch = "guild-s/object-arguments"
    out, bodies = ok_turn(suite, ch, "tgi-object", [
        completion({"role": "assistant", "tool_calls": [call]}, "stop", system_fingerprint="3.0.1-sha-abc"),
        reply("Stored.", "eos_token", system_fingerprint="3.0.1-sha-abc")])
    assert out == "Stored."
    assert len(bodies) == 2
    assert_tool_round_trip(bodies[1], [args("colour", value)])
    assert channel_notes(suite, ch)["colour"] == value


def test_missing_and_null_call_ids(suite):
    """Older llama.cpp sends no id; a null one is the same."""
    ch = "guild-s/missing-ids"
    calls = [memory_set("a", "1", id=ABSENT), memory_set("b", "2", id=None)]
    out, bodies = ok_turn(suite, ch, "llamacpp-ids", [
        completion({"role": "assistant", "content": None, "reasoning_content": "two notes", "tool_calls": calls},
                   "tool_calls", timings={"prompt_n": 6, "predicted_ms": 1.5}),
        reply("Both stored.")])
    assert out == "Both stored."
    assert_tool_round_trip(bodies[1], [args("a", "1"), args("b", "2")])
    assert channel_notes(suite, ch) == {"a": "1", "b": "2"}


def test_empty_and_duplicate_call_ids(suite):
    """Gemini's endpoint sends "" for every id; a confused server may repeat one."""
    ch = "guild-s/dup-ids"
    calls = [memory_set("a", "1", id=""), memory_set("b", "2", id=""),
             memory_set("c", "3", id="dup"), memory_set("d", "4", id="dup")]
    out, bodies = ok_turn(suite, ch, "gemini-ids", [
        completion({"role": "assistant", "tool_calls": calls}, "tool_calls"), reply("Four stored.")])
    assert out == "Four stored."
    ids = assert_tool_round_trip(bodies[1], [args("a", "1"), args("b", "2"), args("c", "3"), args("d", "4")])
    assert ids[2] == "dup"  # the first use of a well-formed id is kept
    assert channel_notes(suite, ch) == {"a": "1", "b": "2", "c": "3", "d": "4"}


def test_missing_type(suite):
    """Ollama: no type, an index in each call, content "" beside the calls, and (older
    versions) finish_reason "stop"."""
    ch = "guild-s/no-type"
    call = memory_set("k", "v", type=ABSENT, id="call_ollama1", index=0)
    out, bodies = ok_turn(suite, ch, "ollama-type", [
        completion({"role": "assistant", "content": "", "tool_calls": [call]}, "stop",
                   system_fingerprint="fp_ollama"),
        reply("Noted.", system_fingerprint="fp_ollama")])
    assert out == "Noted."
    assert assert_tool_round_trip(bodies[1], [args("k", "v")]) == ["call_ollama1"]
    assert channel_notes(suite, ch) == {"k": "v"}


def test_content_null_beside_tool_calls(suite):
    ch = "guild-s/null-content"
    out, bodies = ok_turn(suite, ch, "null-content", [
        completion({"role": "assistant", "content": None, "refusal": None, "tool_calls": [memory_set("k", "v")]},
                   "tool_calls"),
        reply("Done.")])
    assert out == "Done."
    assert echoed_assistant(bodies[1])["content"] == ""
    assert_tool_round_trip(bodies[1], [args("k", "v")])


def test_arguments_absent_or_null(suite):
    """A call without arguments (or null ones) is sent on as "{}": the tool runs and answers
    for itself (here memory_get, which needs a scope, with an error result)."""
    ch = "guild-s/no-arguments"
    calls = [{"id": "a", "type": "function", "function": {"name": "memory_get"}},
             {"id": "b", "type": "function", "function": {"name": "memory_get", "arguments": None}}]
    out, bodies = ok_turn(suite, ch, "no-arguments", [
        completion({"role": "assistant", "tool_calls": calls}, "tool_calls"), reply("Looked.")])
    assert out == "Looked."
    echoed = echoed_assistant(bodies[1])["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in echoed] == [("a", "{}"), ("b", "{}")]
    results = trailing_tool_messages(bodies[1])
    assert [m["tool_call_id"] for m in results] == ["a", "b"]
    for m in results:
        assert "scope" in json.loads(m["content"])["error"], m["content"]


# ---- content ----

def test_content_as_an_array_of_parts(suite):
    """Mistral's reasoning models: content as parts; the thinking parts never reach the
    worker, the text parts are joined (beside tool calls too)."""
    ch = "guild-s/content-parts"
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "SECRET-THOUGHT-41"}]}
    out, bodies = ok_turn(suite, ch, "mistral-parts", [
        completion({"role": "assistant", "content": [thinking, {"type": "text", "text": "Let me note that."}],
                    "tool_calls": [memory_set("k", "v", id="Ab3dE5gH9", index=0)], "prefix": False}, "tool_calls"),
        completion({"role": "assistant", "content": [thinking, {"type": "text", "text": "Noted"},
                                                     {"type": "thinking", "thinking": []},
                                                     {"type": "text", "text": " it."}]}, "stop")])
    assert out == "Noted it."
    assert echoed_assistant(bodies[1])["content"] == "Let me note that."
    assert_tool_round_trip(bodies[1], [args("k", "v")])
    assert "SECRET-THOUGHT-41" not in json.dumps(bodies[1])


def test_extra_fields_are_dropped(suite):
    """vLLM, OpenRouter and Groq extras: reasoning text, refusal, logprobs, annotations,
    system_fingerprint, service_tier, provider details and usage details. None of it reaches
    the worker: not in what it sends next, not in the guest's reply."""
    ch = "guild-s/extras"
    marker = "EXTRA-MARKER-77"
    msg_extras = {"reasoning_content": marker, "reasoning": marker, "refusal": marker,
                  "annotations": [{"type": "url_citation", "url_citation": {"url": marker}}],
                  "audio": None, "function_call": None, "reasoning_details": [{"type": "reasoning.text",
                                                                               "text": marker}]}
    top_extras = {"system_fingerprint": marker, "service_tier": marker, "provider": marker,
                  "prompt_logprobs": None, "kv_transfer_params": None, "x_groq": {"id": marker},
                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "cost": 0.0001,
                            "queue_time": 0.01, "prompt_tokens_details": {"cached_tokens": 0}, marker: 1}}

    def with_extras(message, finish):
        e = completion(dict(message, **msg_extras), finish, **top_extras)
        choice = e["completion"]["choices"][0]
        choice.update({"logprobs": {"content": [{"token": marker, "logprob": -0.1}]}, "stop_reason": marker,
                       "native_finish_reason": marker})
        return e

    out, bodies = ok_turn(suite, ch, "extras", [
        with_extras({"role": "assistant", "content": None, "tool_calls": [memory_set("k", "v", index=0)]},
                    "tool_calls"),
        with_extras({"role": "assistant", "content": "Plain answer."}, "stop")])
    assert out == "Plain answer."
    assert_tool_round_trip(bodies[1], [args("k", "v")])
    assert marker not in json.dumps(bodies[1])


# ---- finish_reason and usage ----

FINISH_PLAIN = {"absent": ABSENT, "null": None, "empty": "", "eos": "eos", "eos_token": "eos_token",
                "end_turn": "end_turn", "length": "length", "tool_calls": "tool_calls"}


@pytest.mark.parametrize("name", sorted(FINISH_PLAIN))
def test_finish_reason_of_a_plain_answer(suite, name):
    """Whatever finish_reason says ("tool_calls" without any calls, null, unknown words),
    a message without tool calls is the answer."""
    message = {"role": "assistant", "content": f"answer {name}"}
    if name == "tool_calls":
        message["tool_calls"] = []  # vLLM with tool_choice "required" and no call parsed
    out, bodies = ok_turn(suite, f"guild-s/finish-{name}", f"finish-{name}",
                          [completion(message, FINISH_PLAIN[name])])
    assert out == f"answer {name}"
    assert len(bodies) == 1


@pytest.mark.parametrize("finish", ["stop", None, "length", "end_turn"])
def test_finish_reason_beside_tool_calls(suite, finish):
    """vLLM (named tool choice), Ollama and TGI say "stop" beside tool calls: the calls run."""
    tag = str(finish).lower()
    ch = f"guild-s/calls-finish-{tag}"
    out, bodies = ok_turn(suite, ch, f"calls-finish-{tag}", [
        completion({"role": "assistant", "tool_calls": [memory_set("k", tag)]}, finish), reply("Ran.")])
    assert out == "Ran."
    assert_tool_round_trip(bodies[1], [args("k", tag)])
    assert channel_notes(suite, ch) == {"k": tag}


USAGE = {"absent": ABSENT, "null": None, "string": "n/a",
         "extras": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4, "queue_time": 0.02,
                    "cost": 1.5e-05, "is_byok": False, "prompt_tokens_details": None,
                    "completion_tokens_details": {"reasoning_tokens": 0}}}


@pytest.mark.parametrize("name", sorted(USAGE))
def test_usage_shapes(suite, name):
    extra = {} if USAGE[name] is ABSENT else {"usage": USAGE[name]}
    out, _ = ok_turn(suite, f"guild-s/usage-{name}", f"usage-{name}", [reply(f"usage {name}", **extra)])
    assert out == f"usage {name}"


# ---- still refused ----

MALFORMED = {
    "content_number": (completion({"role": "assistant", "content": 5}),
                       "message content is not a string, null or an array of parts"),
    "content_part_without_type": (completion({"role": "assistant", "content": [{"text": "x"}]}),
                                  "a content part is not an object with a type"),
    "text_part_without_text": (completion({"role": "assistant", "content": [{"type": "text", "text": 1}]}),
                               "a text content part has no text string"),
    "tool_calls_object": (completion({"role": "assistant", "tool_calls": memory_set("k", "v")}),
                          "tool_calls is not an array"),
    "call_id_number": (completion({"role": "assistant", "tool_calls": [memory_set("k", "v", id=7)]}),
                       "a tool call id is not a string"),
    "call_type_custom": (completion({"role": "assistant", "tool_calls": [memory_set("k", "v", type="custom")]}),
                         'a tool call type is not "function"'),
    "call_without_function": (completion({"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}),
                              "a tool call has no function object"),
    "call_name_number": (completion({"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": 5, "arguments": "{}"}}]}), "a tool call name is not a string"),
    "arguments_array": (completion({"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "memory_set", "arguments": ["k", "v"]}}]}),
                        "tool call arguments are neither JSON text nor an object"),
    "role_user": (completion({"role": "user", "content": "x"}), "message role is not assistant"),
    "finish_reason_number": (completion({"role": "assistant", "content": "x"}, 1), "finish_reason is not a string"),
    "completions_api_text": ({"completion": {"choices": [{"index": 0, "text": "x", "finish_reason": "stop"}]}},
                             "first choice has no message object"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_answer_fails_the_turn(suite, name):
    entry, why = MALFORMED[name]
    line = f"model answer refused: {why}"
    before = suite.log_tail("brokerd", limit=10**7).count(line)
    script(suite, f"bad-{name}", [entry, reply("must not be reached")])
    p, bodies = turn(suite, f"guild-s/bad-{name.replace('_', '-')}", f"#script bad-{name}")
    # The generic error, no reply text, and the worker gave up after this one answer.
    assert p.returncode == 1, p.stdout
    assert "turn_failed" in p.stderr
    assert p.stdout == ""
    assert len(bodies) == 1
    # That rule refused it, once (it is logged before the turn ends).
    assert suite.log_tail("brokerd", limit=10**7).count(line) == before + 1
