# SPDX-License-Identifier: Apache-2.0
"""The rich (Pi) worker (worker/pi/, DESIGN.md 8.5, issue 17) in its real image, in real
sealed containers, against a stand-in for brokerd's rich listener on a real Unix socket
(pi_rig.PiStandIn) that forwards every model call over TLS to the scripted Anthropic endpoint
(tests/fakes/fake_anthropic.py). The image is built once per session through the CLI
(`image build --rich --content DIR`).

The stand-in enforces nothing: what the fake records is exactly what the worker sent, and
that is what these tests judge (projection, compaction requests, headers, tools). The host's
own rules (brokerd's checks, statd's fresh start) are tested with the real daemons in
test_rich_host.py and test_rich_hooks.py, the worker through them in test_pi_rich.py."""
import base64
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time

import pytest

from harness import SRCDIR, docker_bin, wait_until
from pi_rig import (ALICE, BIG_MODEL, BOB, PLACEHOLDER, READY_S, SKILL_LONG_CHARS, content_blocks, host_tool,
                    is_summary, mcp_tool, pi_image, started_stand_in, system_text, tool_result_text)
from rich_rig import RICH_DUMMY_KEY, WORKER_DUMMY_KEY

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


@pytest.fixture(scope="module")
def image(rts_env):
    return pi_image(rts_env)


@pytest.fixture
def st(rts_env, image):
    """A stand-in and a worker container of its own, on a fresh workspace."""
    with started_stand_in(rts_env, image) as s:
        yield s


def restart_worker(st, image):
    """A new container on the same workspace and broker directory (the old one removed)."""
    n = len(st.readies)
    st.worker.stop()
    st.start_worker(image.tag)
    wait_until(lambda: len(st.readies) > n, READY_S, "the new worker's announcement")
    return st.readies[-1]


# ---- the session ---------------------------------------------------------------------------

def test_two_turns_continue_one_session(st):
    assert st.reply("first message") == "echo: [Alice]: first message"
    assert st.reply("second message", speaker=BOB) == "echo: [Bob]: second message"
    reqs = st.model_requests()
    assert len(reqs) == 2
    msgs = reqs[1]["body"]["messages"]
    texts = [b["text"] for m in msgs for b in m["content"] if b.get("type") == "text"]
    assert texts == ["[Alice]: first message", "echo: [Alice]: first message", "[Bob]: second message"]
    sessions = st.session_entries()
    assert len(sessions) == 1
    header = sessions[0][0]
    assert header["type"] == "session" and header["cwd"] == "/workspace"
    readers = [e["data"] for e in sessions[0] if e.get("customType") == "roundtable-sandbox.reader"]
    assert [(r["reader"], r["privateMemory"]) for r in readers] == [("principal-1001", False), ("principal-2002", False)]


def test_container_restart_continues_the_session(st, image):
    st.reply("before the restart")
    ready = restart_worker(st, image)
    assert ready == {"capabilities": {"privateTo": True, "readerRecords": True}, "privateHistory": False}
    st.reply("after the restart")
    body = st.model_requests()[-1]["body"]
    texts = [b["text"] for m in body["messages"] for b in m["content"] if b.get("type") == "text"]
    assert texts[:2] == ["[Alice]: before the restart", "echo: [Alice]: before the restart"]
    assert len(st.session_entries()) == 1


def test_a_link_planted_at_sessions_is_never_followed(st, image):
    # statd's fresh start replaces such a link (test_rich_host.py); until then the worker
    # writes nothing through it and reads nothing from it: the turn fails, the model is
    # never asked.
    ws = st.dirs["ws"]
    st.worker.stop()
    st.worker = None
    shutil.rmtree(os.path.join(ws, "sessions"))
    elsewhere = os.path.join(ws, "elsewhere")
    os.mkdir(elsewhere)
    os.chown(elsewhere, st.env.uid, st.env.gid)
    os.symlink("elsewhere", os.path.join(ws, "sessions"))
    n = len(st.readies)
    st.start_worker(image.tag)
    wait_until(lambda: len(st.readies) > n, READY_S, "the new worker's announcement")
    assert st.readies[-1]["privateHistory"] is True  # unknown, so claimed
    before = len(st.model_requests())
    assert st.reply("hello") == "Something went wrong on my side with this message."
    assert os.listdir(elsewhere) == [] and os.path.islink(os.path.join(ws, "sessions"))
    assert len(st.model_requests()) == before
    assert any(r.get("msg") == "turn failed" and "is not a directory" in r.get("error", "")
               for r in st.worker_records())


def test_worker_runs_sealed_as_given(st):
    info = st.worker.inspect()
    hc = info["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True and hc["CapDrop"] == ["ALL"]
    assert info["Config"]["User"] == f"{st.env.uid}:{st.env.gid}"
    assert info["Config"]["WorkingDir"] == "/workspace"


def test_requests_carry_only_the_placeholder_credentials(st):
    st.reply("#tool host_lookup {\"q\": \"x\"}", tools=[host_tool("lookup")])
    model = st.requests("/anthropic/v1/messages")
    assert model, "no model call"
    for r in model:
        h = {k.lower(): v for k, v in r["headers"]}
        assert h["x-api-key"] == RICH_DUMMY_KEY and "authorization" not in h
        assert h["host"] == "broker" and h["x-stainless-retry-count"] == "0"
        assert "anthropic-beta" not in h or "oauth" not in h["anthropic-beta"]
    for path in ("/worker/ready", "/worker/next", "/worker/result", "/tools/lookup"):
        for r in st.requests(path):
            h = {k.lower(): v for k, v in r["headers"]}
            assert h["authorization"] == "Bearer " + WORKER_DUMMY_KEY and "x-api-key" not in h, path
            assert h["host"] == "broker" and h["content-type"] == "application/json"


# ---- what the model gets -----------------------------------------------------------------

def test_only_declared_tools_and_no_discovery(st, image):
    ws = st.dirs["ws"]
    # Everything Pi's stock loader would pick up from a guest-writable working directory.
    planted = {
        ".pi/SYSTEM.md": "PLANTED-SYSTEM-PROMPT",
        ".pi/APPEND_SYSTEM.md": "PLANTED-APPEND",
        ".pi/settings.json": json.dumps({"packages": ["npm:evil"], "npmCommand": ["/bin/sh", "-c", "touch /workspace/pwned"]}),
        ".pi/extensions/evil.js": "require('fs').writeFileSync('/workspace/pwned-ext', 'x'); module.exports = () => {};",
        ".pi/skills/planted/SKILL.md": "---\nname: planted\ndescription: PLANTED-SKILL\n---\nx\n",
        ".agents/skills/agent/SKILL.md": "---\nname: agent\ndescription: PLANTED-AGENT-SKILL\n---\nx\n",
        ".pi/prompts/x.md": "PLANTED-TEMPLATE",
        "AGENTS.md": "PLANTED-AGENTS-FILE",
        "CLAUDE.md": "PLANTED-CLAUDE-FILE",
    }
    for rel, text in planted.items():
        path = os.path.join(ws, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            os.chown(os.path.join(root, n), st.env.uid, st.env.gid)
    restart_worker(st, image)
    st.reply("/x hello", tools=[host_tool("lookup"), mcp_tool("docs", "search")])
    body = st.model_requests()[-1]["body"]
    assert sorted(t["name"] for t in body["tools"]) == ["host_lookup", "mcp_0_search", "read_skill", "reply_file"]
    blob = json.dumps(body)
    assert "PLANTED" not in blob
    assert body["messages"][-1]["content"][0]["text"] == "[Alice]: /x hello"  # no template or command
    sys = system_text(body)
    assert sys.startswith("You are Pip, the test persona.") and "<name>dice</name>" in sys
    assert not os.path.exists(os.path.join(ws, "pwned")) and not os.path.exists(os.path.join(ws, "pwned-ext"))


def test_system_prompt_time_zone_effort_and_memory_block(st):
    st.reply("hi", timeZone="Asia/Tokyo", now="2026-03-01T21:05:00+09:00", effort="high", prompt="PROFILE-PROMPT",
             memory={"text": "MEMORY-OF-ALICE", "visibility": "private"}, maxOutputTokens=32000)
    body = st.model_requests()[-1]["body"]
    sys = system_text(body)
    assert "PROFILE-PROMPT" in sys and "Current time: 2026-03-01T21:05:00+09:00 (Asia/Tokyo)" in sys
    assert "MEMORY-OF-ALICE" in sys
    assert body["thinking"]["type"] in ("adaptive", "enabled")
    assert body["max_tokens"] == 32000
    if body["thinking"]["type"] == "enabled":
        assert body["thinking"]["budget_tokens"] == 16384  # Pi's budget for high (medium: 8192)
    else:
        assert body["output_config"] == {"effort": "high"}
    # The block is the turn's: not persisted, not in the next turn.
    assert "MEMORY-OF-ALICE" not in json.dumps(st.session_entries())
    st.reply("again", speaker=BOB)
    assert "MEMORY-OF-ALICE" not in json.dumps(st.model_requests()[-1]["body"])


def test_images_from_the_delivered_bytes_at_most_four(st):
    good = base64.b64encode(PNG).decode()
    bad = base64.b64encode(b"GIF89a" + b"\0" * 20).decode()  # a GIF's bytes, said to be PNG
    images = [{"mime": "image/png", "data": bad}] + [{"mime": "image/png", "data": good}] * 6
    st.reply("look", images=images)
    body = st.model_requests()[-1]["body"]
    imgs = content_blocks(body, "image")
    assert len(imgs) == 4
    assert all(b["source"] == {"type": "base64", "media_type": "image/png", "data": good} for b in imgs)
    text = body["messages"][-1]["content"][0]["text"]
    assert "2 more image(s)" in text and "1 image(s) came in a form" in text


def test_attachments_are_listed_not_read(st):
    st.reply("see the file", attachments=[{"name": "a.txt", "path": "/workspace/attachments/t/1-a.txt",
                                            "mime": "text/plain", "bytes": 5}])
    text = st.model_requests()[-1]["body"]["messages"][-1]["content"][0]["text"]
    assert "- a.txt (text/plain, 5 bytes): /workspace/attachments/t/1-a.txt" in text


# ---- private exchanges ---------------------------------------------------------------------

def test_private_result_is_a_placeholder_for_another_reader(st):
    tools = [host_tool("private_lookup", {"q": {"type": "string"}, "owner": {"type": "string"}}), host_tool("lookup")]
    st.reply('#tool host_private_lookup {"q": "tea", "owner": "principal-1001"} #quiet', tools=tools)
    secret = "SECRET-private_lookup-tea"
    # Bob's next request: the exchange is there, paired, but as placeholders.
    st.reply("hello from bob", speaker=BOB, tools=tools)
    bob = st.model_requests()[-1]["body"]
    uses = content_blocks(bob, "tool_use")
    results = content_blocks(bob, "tool_result")
    assert len(uses) == 1 and len(results) == 1
    assert uses[0]["name"] == "host_private_lookup" and uses[0]["input"] == {"hidden": PLACEHOLDER}
    assert results[0]["tool_use_id"] == uses[0]["id"] and tool_result_text(results[0]) == PLACEHOLDER
    assert secret not in json.dumps(bob) and '"tea"' not in json.dumps(bob)
    # Alice's next request: the original.
    st.reply("hello from alice", tools=tools)
    alice = st.model_requests()[-1]["body"]
    assert content_blocks(alice, "tool_use")[0]["input"] == {"q": "tea", "owner": "principal-1001"}
    assert tool_result_text(content_blocks(alice, "tool_result")[0]) == secret
    # Persisted with its tag.
    results = [e["message"] for e in st.session_entries()[0]
               if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert results[0]["details"] == {"privateTo": "principal-1001"} and results[0]["isError"] is False


def test_private_error_result_keeps_its_tag(st):
    tools = [host_tool("privfail_x", {"owner": {"type": "string"}})]
    st.reply('#tool host_privfail_x {"owner": "principal-2002"} #quiet', speaker=BOB, tools=tools)
    results = [e["message"] for e in st.session_entries()[0]
               if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert results[0]["isError"] is True
    assert results[0]["details"] == {"privateTo": "principal-2002", "isError": True}
    st.reply("alice now", tools=tools)
    alice = st.model_requests()[-1]["body"]
    assert tool_result_text(content_blocks(alice, "tool_result")[0]) == PLACEHOLDER
    assert "SECRET-FAILURE" not in json.dumps(alice)


def test_public_tool_results_are_shared(st):
    tools = [host_tool("lookup")]
    st.reply('#tool host_lookup {"q": "x"} #quiet', tools=tools)
    st.reply("bob", speaker=BOB, tools=tools)
    bob = st.model_requests()[-1]["body"]
    assert tool_result_text(content_blocks(bob, "tool_result")[0]) == "public result of lookup"


def test_reader_records_and_private_history(st, image):
    # A shared block does not taint: no private history, the next reader is not refused.
    st.reply("#thinking shared facts", memory={"text": "PARTY-WIDE-FACTS", "visibility": "shared"})
    assert restart_worker(st, image)["privateHistory"] is False
    assert st.reply("bob speaks", speaker=BOB) == "echo: [Bob]: bob speaks"
    # A private block does, with or without a tool call.
    st.reply("private facts", memory={"text": "ALICE-ONLY-FACTS", "visibility": "private"})
    readers = [e["data"] for e in st.session_entries()[0] if e.get("customType") == "roundtable-sandbox.reader"]
    assert [r["privateMemory"] for r in readers] == [False, False, True]
    assert restart_worker(st, image)["privateHistory"] is True
    # Bob is answered (his request holds no private material: reasoning is never replayed).
    assert st.reply("bob again", speaker=BOB) == "echo: [Bob]: bob again"
    bob = st.model_requests()[-1]["body"]
    assert content_blocks(bob, "thinking") == [] and "ALICE-ONLY-FACTS" not in json.dumps(bob)


def test_a_tagged_result_gives_private_history(st, image):
    tools = [host_tool("private_lookup", {"owner": {"type": "string"}})]
    st.reply('#tool host_private_lookup {"owner": "principal-1001"} #quiet', tools=tools)
    assert restart_worker(st, image)["privateHistory"] is True


# ---- skills ---------------------------------------------------------------------------------

def test_skill_gate_until_read(st):
    tools = [host_tool("roll")]
    out = st.reply("#tool host_roll", tools=tools)
    assert "Read the dice skill with read_skill first" in out
    assert st.requests("/tools/roll") == []
    out = st.reply('#tool read_skill {"skill": "dice"}', tools=tools)
    assert "Roll with host_roll" in out
    out = st.reply("#tool host_roll", tools=tools)
    assert out == "tool results: public result of roll"
    assert len(st.requests("/tools/roll")) == 1


@pytest.mark.parametrize("args, want", [
    ({"skill": "dice", "path": "ref/table.md"}, "DICE-TABLE-TEXT"),
    ({"skill": "dice", "path": "../files/SKILL.md"}, "must stay inside the skill's directory"),
    ({"skill": "dice", "path": "ref/../../files/SKILL.md"}, "must stay inside the skill's directory"),
    ({"skill": "dice", "path": "/etc/passwd"}, "must be relative"),
    ({"skill": "dice", "path": "/app/content/skills/dice/SKILL.md"}, "must be relative"),
    ({"skill": "../dice"}, "there is no skill named"),
    ({"skill": "nope"}, "there is no skill named"),
    ({"skill": "dice", "path": "ref"}, "not a regular file"),
    ({"skill": "dice", "path": "missing.md"}, "is not a file of dice"),
    ({"skill": "bulky", "path": "huge.md"}, "larger than 256 KiB"),
])
def test_read_skill_confinement_and_bounds(st, args, want):
    out = st.reply("#tool read_skill " + json.dumps(args))
    assert want in out, out


def test_read_skill_returns_at_most_40000_characters(st):
    out = st.reply('#tool read_skill {"skill": "bulky", "path": "long.md"}')
    body = out[len("tool results: "):]
    assert body.startswith("L" * 40000) and "L" * 40001 not in body and "[cut at 40000 characters]" in body
    assert SKILL_LONG_CHARS > 40000


# ---- reply files ------------------------------------------------------------------------------

def write_script(st, name, entries):
    with open(os.path.join(st.dirs["logs"], f"script-{name}.json"), "w") as f:
        json.dump(entries, f)


def tool_uses_stream(calls):
    """A fake_anthropic script entry: one assistant message making calls [(name, input)]."""
    events = [["message_start", {"type": "message_start", "message": {
        "id": "msg_script", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}]]
    for i, (name, args) in enumerate(calls):
        events.append(["content_block_start", {"type": "content_block_start", "index": i, "content_block": {
            "type": "tool_use", "id": f"toolu_script_{i:03d}", "name": name, "input": {}}}])
        events.append(["content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(args)}}])
        events.append(["content_block_stop", {"type": "content_block_stop", "index": i}])
    events.append(["message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                     "usage": {"output_tokens": 10}}])
    events.append(["message_stop", {"type": "message_stop"}])
    return {"events": events}


def text_stream(text):
    return {"events": [
        ["message_start", {"type": "message_start", "message": {"id": "msg_s2", "type": "message", "role": "assistant",
                                                                 "model": "m", "content": [], "stop_reason": None,
                                                                 "usage": {"input_tokens": 10, "output_tokens": 1}}}],
        ["content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}],
        ["content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}],
        ["content_block_stop", {"type": "content_block_stop", "index": 0}],
        ["message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}],
        ["message_stop", {"type": "message_stop"}]]}


def tool_results_of_last_call(st):
    """The tool_result blocks the worker sent back (the second request of the scripted turn)."""
    return [tool_result_text(b) for b in content_blocks(st.model_requests()[-1]["body"], "tool_result")]


def test_outbox_ten_files_at_most(st):
    calls = [("reply_file", {"name": f"f{i}.txt", "content": f"file {i}"}) for i in range(11)]
    write_script(st, "eleven", [tool_uses_stream(calls), text_stream("done")])
    packet = st.turn_packet("#script eleven")
    assert packet["text"] == "done"
    files = packet["files"]
    assert [f["name"] for f in files] == [f"f{i}.txt" for i in range(10)]
    assert all(f["mime"] == "text/plain" and base64.b64decode(f["data"]) == f"file {i}".encode()
               for i, f in enumerate(files))
    results = tool_results_of_last_call(st)
    assert results[-1] == "a reply holds at most 10 files"
    # The record in the workspace: written, never read back for the reply.
    outbox = os.path.join(st.dirs["ws"], "outbox", packet["turnId"])
    assert sorted(os.listdir(outbox)) == sorted(f"f{i}.txt" for i in range(10))


def test_outbox_size_bounds(st):
    ten_mib = 10 * 1024 * 1024
    calls = [("reply_file", {"name": "big.txt", "content": "a" * ten_mib}),
             ("reply_file", {"name": "over.txt", "content": "b" * (ten_mib + 1)}),
             ("reply_file", {"name": "../../etc/x.bin", "content": base64.b64encode(b"\x00\x01").decode(),
                             "encoding": "base64"})]
    write_script(st, "sizes", [tool_uses_stream(calls), text_stream("sized")])
    packet = st.turn_packet("#script sizes", timeout=180)
    names = [f["name"] for f in packet["files"]]
    assert names == ["big.txt", "_.._etc_x.bin"], names
    assert len(base64.b64decode(packet["files"][0]["data"])) == ten_mib
    assert base64.b64decode(packet["files"][1]["data"]) == b"\x00\x01"
    assert packet["files"][1]["mime"] == "application/octet-stream"
    assert "a reply file holds at most 10 MiB" in tool_results_of_last_call(st)


# ---- the last check before a model call ------------------------------------------------------

def test_raw_replay_of_private_material_is_refused(st, image):
    """A bridge-style replay (the raw persisted branch, not projected) holding Bob's private
    exchange is refused for Alice before it reaches the broker, also after Pi compacted the
    exchange away; the same history projected goes out."""
    tools = [host_tool("private_lookup", {"q": {"type": "string"}, "owner": {"type": "string"}})]
    st.reply('#tool host_private_lookup {"q": "bob-secret", "owner": "principal-2002"} #quiet', speaker=BOB,
             tools=tools, model="claude-opus-4-6")
    st.compact = lambda body: (200, {"summary": "COMPACTED", "firstKeptEntryId": body["request"]["firstKeptEntryId"],
                                     "tokensBefore": body["request"]["tokensBefore"]})
    st.reply("chatter #big 100000", speaker=BOB, tools=tools, model="claude-opus-4-6")
    st.reply("#usage 310000", speaker=BOB, tools=tools, model="claude-opus-4-6")
    entries = st.session_entries()[0]
    assert any(e["type"] == "compaction" for e in entries), "no compaction"
    st.worker.stop()
    st.worker = None
    before = len(st.requests("/anthropic/v1/messages"))
    turn_input = {"v": 1, "turnId": "replay000000test", "speaker": ALICE, "text": "x", "model": "claude-opus-4-6",
                  "maxOutputTokens": 4096, "tools": tools, "timeZone": "UTC", "effort": "low"}
    p = st.run_script(image.tag, "replay.mjs", "principal-1001", json.dumps(turn_input))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["raw"]["stopReason"] == "error"
    assert re.fullmatch(r"refused: the request replays a tool (call|result) private to another reader",
                        out["raw"]["errorMessage"]), out
    assert out["summary"] == {"stopReason": "error", "errorMessage": "refused: a summary of an unredacted history"}
    assert out["projected"]["stopReason"] == "stop", out
    sent = st.requests("/anthropic/v1/messages")[before:]
    assert len(sent) == 1, "the refused calls reached the broker"
    body = sent[0]["body"]
    assert [b["input"] for b in content_blocks(body, "tool_use")] == [{"hidden": PLACEHOLDER}]
    assert [tool_result_text(b) for b in content_blocks(body, "tool_result")] == [PLACEHOLDER]


# ---- budget, deadline, MCP ---------------------------------------------------------------------

def test_mcp_tool_call(st):
    out = st.reply('#tool mcp_0_search {"q": "moon"}', tools=[mcp_tool("docs", "search")])
    assert out == "tool results: mcp docs search ok"
    (call,) = st.requests("/mcp/docs")
    assert call["body"] == {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "search", "arguments": {"q": "moon"}}}


def test_call_budget_stops_asking(st):
    packet = st.turn_packet('#tool host_lookup {"q": "x"}', tools=[host_tool("lookup")], limits={"maxCalls": 2})
    assert packet["text"] == "I could not get an answer from the model this time."
    assert len(st.requests("/anthropic/v1/messages")) == 1 and len(st.requests("/tools/lookup")) == 1
    assert any(r.get("msg") == "model call failed" and "used up its calls" in r.get("error", "")
               for r in st.worker_records())


def test_turn_deadline_answers_before_the_host_gives_up(st):
    t0 = time.monotonic()
    packet = st.turn_packet("#sleep 30000 slow", limits={"maxCalls": 128, "turnTimeoutMs": 9000}, timeout=30)
    took = time.monotonic() - t0
    assert packet["text"] == "I ran out of time on this message."
    assert took < 9, took
    # The worker goes on serving.
    assert st.reply("next") == "echo: [Alice]: next"


# ---- what the container holds ----------------------------------------------------------------

def test_no_credential_upstream_or_host_path_in_the_container(st, image):
    tools = [host_tool("lookup")]
    st.reply('#tool host_lookup {"q": "x"}', tools=tools)
    st.reply("a second turn", speaker=BOB)
    needles = {st.token.encode(): "the model token", f"localhost:{st.anthropic.port}".encode(): "the upstream",
               st.root.encode(): "the stand-in's directory", SRCDIR.encode(): "the source tree",
               st.env.bindir.encode(): "the programs' directory", st.env.builddir.encode(): "the build tree",
               }
    oauth = re.compile(rb"sk-ant-oat01-[A-Za-z0-9_-]{16,}")
    found = {}
    export = subprocess.run([docker_bin(), "export", st.worker.name], capture_output=True, timeout=300)
    assert export.returncode == 0, export.stderr[-2000:]
    with tarfile.open(fileobj=io.BytesIO(export.stdout)) as tar:
        names = tar.getnames()
        for m in tar:
            if not m.isfile():
                continue
            data = tar.extractfile(m).read()
            for needle, what in needles.items():
                if needle in data:
                    found.setdefault(what, []).append(m.name)
            if oauth.search(data):
                found.setdefault("an OAuth token", []).append(m.name)
    assert found == {}, found
    # No auth file of Pi's, no npm configuration, nothing of the operator's but the content.
    assert not [n for n in names if n.rsplit("/", 1)[-1] in ("auth.json", ".npmrc", "models.json", "settings.json")
                and "node_modules" not in n]
    assert not [n for n in names if n.startswith("app/content/") and not
                (n.startswith("app/content/skills") or n == "app/content/prompt.md")]
    top = {n.split("/", 1)[0] for n in names}
    assert top <= {"usr", "lib", "lib64", "app", "tmp", "workspace", "run", "etc", "dev", "proc", "sys",
                   ".dockerenv"}, top
    env = st.worker.inspect()["Config"]["Env"]
    assert not [e for e in env if st.token in e or "localhost" in e]
    # The workspace holds the session, the reply, and no credential.
    for root, _, files in os.walk(st.dirs["ws"]):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                data = fh.read()
            assert st.token.encode() not in data and f"localhost:{st.anthropic.port}".encode() not in data, f
