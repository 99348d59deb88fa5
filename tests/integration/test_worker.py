# SPDX-License-Identifier: Apache-2.0
"""The worker's contract in real turns (issue 4): real daemons as the service account, the
real dockerd, this build's worker image, and the scripted HTTPS model endpoint in script
mode ("#script NAME" in the guest's text replays logs/script-NAME.json, see
tests/fakes/fake_model.py), so each test decides exactly what the "model" answers and then
asserts on what the worker sent back through the broker (the fake records every upstream
request body).

Hostile-workspace cases plant files in workspaceRoot/<sha256 of the channel key> as the
service account before a turn, the way a previous guest's code could have left them.
"""
import json
import os
import re
import secrets
import stat
import subprocess

import pytest

from harness import HarnessError, Suite, docker

OPERATOR_PROMPT = "OPERATOR-PROMPT-7f3a: you are the worker test bot."
OUT_OF_STEPS = "I ran out of steps for this turn before I could finish. Please try again, perhaps with a simpler request."
RESET_MEMORY = "the stored memory notes could not be read and were reset"
RESET_HISTORY = "the stored conversation history could not be read and was reset"
REQUEST_MAX = 192 * 1024
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.fixture(scope="module")
def image(rts_env):
    """This build's worker under a tag of this module's own: the shared test tag may be
    rebuilt by another session while these tests run."""
    tag = f"roundtable-sandbox:test-worker-{secrets.token_hex(4)}"
    p = subprocess.run([rts_env.program("cli"), "image", "build", "--dir",
                        os.path.join(rts_env.builddir, "worker", "image"), "--tag", tag],
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        pytest.fail(f"worker image build failed: {p.stderr.strip()[-2000:]}", pytrace=False)
    yield tag
    docker("rmi", tag, check=False)


@pytest.fixture(scope="module")
def ws_suite(rts_env, image):
    try:
        s = Suite(rts_env, config={"image": image, "systemPrompt": OPERATOR_PROMPT, "timeZone": "Europe/Berlin"})
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    yield s
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


# ---- helpers ----

def tc(call_id, name, args):
    """One tool call as a Chat Completions upstream sends it (arguments as JSON text)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def script(s, name, entries):
    with open(os.path.join(s.dirs["logs"], f"script-{name}.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f)


def turn(s, channel, text, author="1001", name="Alice", ok=True):
    """One addressed message through the CLI; returns (CompletedProcess, upstream requests of
    this turn as recorded by the fake: [{"body", "length"}])."""
    before = len(s.fake.requests())
    p = s.cli("say", channel, "--author", author, "--name", name, text)
    if ok:
        assert p.returncode == 0, p.stderr + s.log_tail("runnerd", 2000)
    reqs = [{"body": r["body"], "length": int(r["headers"].get("content-length", "0"))}
            for r in s.fake.requests()[before:] if r["method"] == "POST"]
    return p, reqs


def bodies(reqs):
    return [r["body"] for r in reqs]


def system_text(body):
    assert body["messages"][0]["role"] == "system"
    return body["messages"][0]["content"]


def trailing_tool_messages(body):
    out = []
    for m in reversed(body["messages"]):
        if m["role"] != "tool":
            break
        out.insert(0, m)
    return out


def echoed_calls(body):
    """The tool calls of the assistant message the trailing tool messages answer."""
    msgs = body["messages"]
    i = len(msgs) - 1 - len(trailing_tool_messages(body))
    return msgs[i].get("tool_calls") or []


def guest_owned(s, path):
    """What a container wrote is the guest account's (the service account's in
    single-account mode)."""
    os.lchown(path, s.guest.uid, s.guest.gid)


def workspace(s, channel):
    """The channel's workspace, created (0700, service account) when missing, as statd
    creates it (in accounts mode statd then shares it with the guest before the turn)."""
    ws = s.workspace(channel)
    if not os.path.isdir(ws):
        os.mkdir(ws, 0o700)
        os.lchown(ws, s.env.uid, s.env.gid)
    return ws


def plant(s, path, data, mode=0o600):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.chmod(path, mode)
    guest_owned(s, path)


def plant_dir(s, path):
    os.mkdir(path, 0o700)
    guest_owned(s, path)


def plant_symlink(s, target, path):
    os.symlink(target, path)
    guest_owned(s, path)


def plant_fifo(s, path):
    os.mkfifo(path, 0o600)
    guest_owned(s, path)


def mem_doc(channel=None, speakers=None):
    """memory.json as the worker writes it (json-c compact output)."""
    return json.dumps({"v": 1, "speakers": speakers or {}, "channel": channel or {}}, separators=(",", ":"))


def history_doc(exchanges):
    return json.dumps({"v": 1, "exchanges": exchanges}, separators=(",", ":"))


def exchange(user, assistant, sid="1001", name="Alice", time="2026-11-30T10:00:00+01:00"):
    return {"speaker": {"id": sid, "name": name}, "user": user, "assistant": assistant, "time": time}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def aside(dirpath, name):
    """Entries of dirpath moved aside by the worker for name."""
    return sorted(e for e in os.listdir(dirpath) if e.startswith(name + ".corrupt-"))


def on(s, channel):
    assert s.cli("on", channel).returncode == 0


def channel_status(s, channel):
    return s.control({"op": "status", "channel": channel})[0]


def encoded_size(body):
    """The size of the worker's own request: the recorded upstream body without the two
    members brokerd adds, serialised compactly as json-c does."""
    mine = {k: v for k, v in body.items() if k not in ("model", "stream")}
    return len(json.dumps(mine, separators=(",", ":"), ensure_ascii=False).encode())


# ---- memory scopes ----

def test_speaker_notes_are_private_and_channel_notes_shared(ws_suite):
    s = ws_suite
    ch = "guild-w/speakers"
    on(s, ch)
    script(s, "alice-notes", [
        {"content": None, "tool_calls": [
            tc("a1", "memory_set", {"scope": "speaker", "key": "pin", "value": "alice-pin-4711"}),
            tc("a2", "memory_set", {"scope": "channel", "key": "rule", "value": "shared-rule-42"})]},
        {"content": "noted"}])
    p, _ = turn(s, ch, "#script alice-notes", "1001", "Alice")
    assert p.stdout.strip() == "noted"

    # Bob: his own scope is empty, no argument selects Alice's, the channel scope is shared.
    script(s, "bob-reads", [
        {"content": None, "tool_calls": [
            tc("b1", "memory_get", {"scope": "speaker", "key": "pin"}),
            tc("b2", "memory_get", {"scope": "speaker", "key": "pin", "speaker": "1001"}),
            tc("b3", "memory_get", {"scope": "speaker"}),
            tc("b4", "memory_get", {"scope": "channel", "key": "rule"}),
            tc("b5", "memory_set", {"scope": "speaker", "key": "pin", "value": "bob-pin-0815"})]},
        {"content": "done"}])
    p, reqs = turn(s, ch, "#script bob-reads", "2002", "Bob")
    assert p.stdout.strip() == "done"
    assert len(reqs) == 2
    assert "alice-pin-4711" not in json.dumps(bodies(reqs))
    assert "shared-rule-42" in system_text(reqs[0]["body"])
    res = [json.loads(m["content"]) for m in trailing_tool_messages(reqs[1]["body"])]
    assert "error" in res[0]
    assert "error" in res[1] and "speaker" in res[1]["error"]
    assert res[2]["count"] == 0
    assert res[3]["value"] == "shared-rule-42"
    assert res[4]["ok"] is True

    # Alice again: her own note, not Bob's; Bob's write did not touch hers.
    script(s, "alice-again", [
        {"content": None, "tool_calls": [tc("c1", "memory_get", {"scope": "speaker", "key": "pin"})]},
        {"content": "ok"}])
    _, reqs = turn(s, ch, "#script alice-again", "1001", "Alice")
    assert "bob-pin-0815" not in json.dumps(bodies(reqs))
    assert "alice-pin-4711" in system_text(reqs[0]["body"])
    assert json.loads(trailing_tool_messages(reqs[1]["body"])[0]["content"])["value"] == "alice-pin-4711"
    mem = read_json(os.path.join(s.workspace(ch), ".sandbox", "memory.json"))
    assert mem["speakers"] == {"1001": {"pin": "alice-pin-4711"}, "2002": {"pin": "bob-pin-0815"}}
    assert mem["channel"] == {"rule": "shared-rule-42"}


# ---- memory caps ----

def _cap_memory(case):
    if case == "entries":
        return mem_doc(channel={f"k{i:03d}": "v" for i in range(256)}), \
            {"scope": "speaker", "key": "new", "value": "x"}, "memory is full: 256 entries"
    if case == "value":
        return mem_doc(channel={"keep": "me"}), \
            {"scope": "channel", "key": "long", "value": "a" * 2049}, "value is too long: 2049 characters"
    # As many 2,048-character notes as fit in 512 KiB; one more breaks the byte cap first.
    notes = {}
    while True:
        notes[f"note{len(notes):03d}"] = "z" * 2048
        if len(mem_doc(channel=notes)) > 512 * 1024:
            notes.popitem()
            break
    assert len(notes) < 255
    return mem_doc(channel=notes), {"scope": "channel", "key": "one_more", "value": "z" * 2048}, \
        "memory is full: 512 KiB"


@pytest.mark.parametrize("case", ["entries", "value", "total"])
def test_memory_cap_is_a_tool_error_and_keeps_the_store(ws_suite, case):
    s = ws_suite
    ch = f"guild-w/cap-{case}"
    on(s, ch)
    doc, args, want = _cap_memory(case)
    sb = os.path.join(workspace(s, ch), ".sandbox")
    plant_dir(s, sb)
    mem = os.path.join(sb, "memory.json")
    plant(s, mem, doc)
    before = read(mem)
    script(s, f"cap-{case}", [{"content": None, "tool_calls": [tc("s1", "memory_set", args)]},
                              {"content": "could not store it"}])
    p, reqs = turn(s, ch, f"#script cap-{case}")
    assert p.stdout.strip() == "could not store it"
    assert len(reqs) == 2
    result = json.loads(trailing_tool_messages(reqs[1]["body"])[0]["content"])
    assert want in result["error"] and "nothing was stored" in result["error"]
    assert read(mem) == before
    assert aside(sb, "memory.json") == []


# ---- loop bounds ----

def test_twelve_model_calls_at_most(ws_suite):
    s = ws_suite
    ch = "guild-w/twelve"
    on(s, ch)
    script(s, "loop12", [{"content": None, "tool_calls": [tc("x", "memory_get", {"scope": "channel"})]}])
    p, reqs = turn(s, ch, "#script loop12")
    assert p.stdout.strip() == OUT_OF_STEPS
    assert len(reqs) == 12
    assert [r["body"]["tool_choice"] for r in reqs] == ["auto"] * 11 + ["none"]
    for k, r in enumerate(reqs):
        assert sum(m["role"] == "tool" for m in r["body"]["messages"]) == k
    # The settled exchange is kept; the tool transcript is not.
    hist = read_json(os.path.join(s.workspace(ch), ".sandbox", "history.json"))
    assert [e["assistant"] for e in hist["exchanges"]] == [OUT_OF_STEPS]
    assert "memory_get" not in json.dumps(hist)


def test_nine_tool_calls_run_eight_and_answer_the_ninth(ws_suite):
    s = ws_suite
    ch = "guild-w/nine"
    on(s, ch)
    calls = [tc(f"n{i}", "memory_set", {"scope": "channel", "key": f"k{i}", "value": "v"}) for i in range(9)]
    script(s, "nine", [{"content": "storing", "tool_calls": calls}, {"content": "done"}])
    p, reqs = turn(s, ch, "#script nine")
    assert p.stdout.strip() == "done"
    body = reqs[1]["body"]
    assert [c["id"] for c in echoed_calls(body)] == [f"n{i}" for i in range(9)]
    results = trailing_tool_messages(body)
    assert [m["tool_call_id"] for m in results] == [f"n{i}" for i in range(9)]
    for m in results[:8]:
        assert json.loads(m["content"])["ok"] is True
    assert "too many tool calls in one response" in json.loads(results[8]["content"])["error"]
    mem = read_json(os.path.join(s.workspace(ch), ".sandbox", "memory.json"))
    assert sorted(mem["channel"]) == [f"k{i}" for i in range(8)]


def test_duplicate_and_invalid_call_ids_and_bad_names_are_normalised(ws_suite):
    s = ws_suite
    ch = "guild-w/ids"
    on(s, ch)
    get = {"scope": "channel"}
    script(s, "ids", [
        {"content": None, "tool_calls": [
            tc("dup", "memory_get", get), tc("dup", "memory_get", get), tc("", "memory_get", get),
            tc("bad id!", "memory_get", get), tc("x" * 100, "memory_get", get),
            tc("u1", "rm_rf", {}), tc("u2", "bad name!", {}), tc("u3", "memory_get", "not json")]},
        {"content": None, "tool_calls": [tc("dup", "memory_get", get)]},
        {"content": "fine"}])
    p, reqs = turn(s, ch, "#script ids")
    assert p.stdout.strip() == "fine"
    assert len(reqs) == 3
    body = reqs[1]["body"]
    calls = echoed_calls(body)
    ids = [c["id"] for c in calls]
    assert ids[0] == "dup" and ids[5:] == ["u1", "u2", "u3"]
    assert len(set(ids)) == 8 and all(ID_RE.match(i) for i in ids)
    results = trailing_tool_messages(body)
    assert [m["tool_call_id"] for m in results] == ids  # each result paired with its call
    names = [c["function"]["name"] for c in calls]
    assert names[:5] == ["memory_get"] * 5 and names[5:7] == ["unavailable_tool"] * 2
    for m in results[5:7]:
        assert "unknown or malformed tool name" in m["content"]
    assert "not a JSON object" in results[7]["content"]
    assert calls[7]["function"]["arguments"] == "{}"
    # The next response reuses "dup", taken earlier in the turn: renamed, still paired.
    body2 = reqs[2]["body"]
    later = echoed_calls(body2)[0]["id"]
    assert later not in ids and ID_RE.match(later)
    assert trailing_tool_messages(body2)[0]["tool_call_id"] == later
    # Every request of the turn is well-formed: ids unique across the whole conversation.
    seen = [c["id"] for m in body2["messages"] for c in (m.get("tool_calls") or [])]
    assert len(seen) == len(set(seen))


# ---- context budget ----

def test_context_dropping_keeps_tool_call_groups_whole(ws_suite):
    s = ws_suite
    ch = "guild-w/context"
    on(s, ch)
    # Ten history exchanges near the 8 KiB entry cap, and a 2,048-character note.
    sb = os.path.join(workspace(s, ch), ".sandbox")
    plant_dir(s, sb)
    hist = [exchange(f"old-user-{i} " + "u" * 3800, f"old-reply-{i} " + "r" * 3800) for i in range(10)]
    plant(s, os.path.join(sb, "history.json"), history_doc(hist))
    plant(s, os.path.join(sb, "memory.json"), mem_doc(channel={"big": "b" * 2048}))
    # Eleven responses of eight calls reading that note (about 2 KiB of result each) with
    # 5 KiB of text (cut to 4 KiB), then an answer: about 22 KiB per group, most of it
    # results, so a budget that dropped single results would get away with it.
    entries = [{"content": "t" * 5000,
                "tool_calls": [tc(f"g{k}_{i}", "memory_get", {"scope": "channel", "key": "big"})
                               for i in range(8)]} for k in range(11)]
    script(s, "ctx", entries + [{"content": "done"}])
    p, reqs = turn(s, ch, "#script ctx " + "w" * 50000)  # over the 48 KiB user-context cap
    assert p.stdout.strip() == "done"
    assert len(reqs) == 12

    sizes = [encoded_size(r["body"]) for r in reqs]
    print("request sizes:", sizes)
    assert max(sizes) < REQUEST_MAX, sizes
    assert max(sizes) > REQUEST_MAX - 24 * 1024, sizes  # the budget was really reached
    prev_history = 10
    history_dropped = group_dropped = False
    for k, r in enumerate(reqs):
        msgs = r["body"]["messages"]
        assert msgs[0]["role"] == "system"
        # History: user/assistant pairs without tool calls, the newest ones kept.
        i, pairs = 1, []
        while msgs[i]["role"] == "user" and msgs[i]["content"].find("old-user-") >= 0:
            assert msgs[i + 1]["role"] == "assistant" and "tool_calls" not in msgs[i + 1]
            pairs.append(int(re.search(r"old-user-(\d+)", msgs[i]["content"]).group(1)))
            i += 2
        assert pairs == list(range(10 - len(pairs), 10))
        assert len(pairs) <= prev_history
        prev_history = len(pairs)
        assert msgs[i]["role"] == "user" and "#script ctx" in msgs[i]["content"]
        assert msgs[i]["content"].endswith("[truncated]")
        i += 1
        # Groups: each assistant message with tool calls followed by exactly its results.
        groups = []
        while i < len(msgs):
            a = msgs[i]
            assert a["role"] == "assistant" and a.get("tool_calls"), a["role"]
            ids = [c["id"] for c in a["tool_calls"]]
            assert len(ids) == 8
            res = msgs[i + 1:i + 1 + len(ids)]
            assert [m["role"] for m in res] == ["tool"] * 8
            assert [m["tool_call_id"] for m in res] == ids
            assert all(json.loads(m["content"])["value"] == "b" * 2048 for m in res)
            groups.append(int(ids[0][1:].split("_")[0]))
            i += 1 + len(ids)
        # The newest groups, contiguous, always the latest one.
        assert groups == list(range(k - len(groups), k))
        if len(pairs) < 10:
            history_dropped = True
        if len(groups) < k:
            assert pairs == []  # groups go only once the history is gone
            group_dropped = True
    assert history_dropped and group_dropped


# ---- fresh start ----

def test_fresh_start_resets_history_on_the_next_successful_turn(ws_suite):
    s = ws_suite
    ch = "guild-w/fresh"
    on(s, ch)
    p, _ = turn(s, ch, "remember that fresh-memory-1")
    assert p.stdout.strip() == "I will remember that."
    hpath = os.path.join(s.workspace(ch), ".sandbox", "history.json")
    assert len(read_json(hpath)["exchanges"]) == 1

    assert s.cli("fresh", ch).returncode == 0
    assert channel_status(s, ch)["fresh"] is True
    # A failed turn: it already runs without history, but the history stays, and so does
    # the pending fresh start.
    before = read(hpath)
    p, reqs = turn(s, ch, "#status 500 this one fails", ok=False)
    assert p.returncode != 0
    assert reqs and [m["role"] for m in reqs[0]["body"]["messages"]] == ["system", "user"]
    assert read(hpath) == before
    assert channel_status(s, ch)["fresh"] is True

    p, reqs = turn(s, ch, "hello after fresh")
    assert [m["role"] for m in reqs[0]["body"]["messages"]] == ["system", "user"]
    assert "fresh-memory-1" in system_text(reqs[0]["body"])  # memory kept
    assert [e["user"] for e in read_json(hpath)["exchanges"]] == ["hello after fresh"]
    assert channel_status(s, ch)["fresh"] is False
    mem = read_json(os.path.join(s.workspace(ch), ".sandbox", "memory.json"))
    assert mem["speakers"]["1001"]["note"] == "fresh-memory-1"


# ---- prompt, attachments ----

def test_system_prompt_and_attachments(ws_suite):
    s = ws_suite
    ch = "guild-w/prompt"
    on(s, ch)
    before = len(s.fake.requests())
    author = {"id": "3003", "name": "Carol", "principalId": "principal-secret-9", "tier": "member",
              "bot": False, "integration": False}
    answers = s.control({"op": "message", "channel": ch, "guild": True, "author": author, "addressed": True,
                         "text": "look at these", "attachments": 3})
    assert answers[0]["route"] == "sandbox" and answers[1]["event"] == "reply", answers
    reqs = [r["body"] for r in s.fake.requests()[before:] if r["method"] == "POST"]
    assert len(reqs) == 1
    sys_text = system_text(reqs[0])
    assert sys_text.startswith(OPERATOR_PROMPT)
    assert "Time zone: Europe/Berlin" in sys_text
    assert re.search(r"Current time: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", sys_text)
    assert "memory_set, memory_get, memory_remove" in sys_text
    user = reqs[0]["messages"][1]["content"]
    assert "Carol" in user and "3003" in user and "look at these" in user
    assert "3 attachments were not downloaded" in user
    # Nothing else from the host: no principal, key, host path or dummy credential.
    text = json.dumps(reqs[0])
    for secret in ("principal-secret-9", s.api_key, s.root, "roundtable-sandbox-dummy-key"):
        assert secret not in text
    assert [t["function"]["name"] for t in reqs[0]["tools"]] == ["memory_set", "memory_get", "memory_remove"]


# ---- hostile workspace ----

def _decoy(s, path, content):
    """A file the worker must neither follow nor read: its atime is set before its mtime,
    so a read would move it (relatime)."""
    plant(s, path, content)
    st = os.stat(path)
    os.utime(path, ns=(st.st_mtime_ns - 10_000_000_000, st.st_mtime_ns))
    return os.stat(path)


def _untouched(path, st0, content):
    st = os.stat(path)
    assert read(path) == content.encode()
    assert st.st_mtime_ns == st0.st_mtime_ns
    assert st.st_atime_ns == st0.st_atime_ns, "the decoy was read"


SECRET_MEM = mem_doc(channel={"stolen": "decoy-secret-mem"})
SECRET_HIST = history_doc([exchange("decoy-secret-user", "decoy-secret-reply")])


def test_hostile_sandbox_symlink(ws_suite):
    s = ws_suite
    ch = "guild-w/hostile-sandbox-link"
    on(s, ch)
    ws = workspace(s, ch)
    decoy = os.path.join(ws, "decoy")
    plant_dir(s, decoy)
    st_m = _decoy(s, os.path.join(decoy, "memory.json"), SECRET_MEM)
    st_h = _decoy(s, os.path.join(decoy, "history.json"), SECRET_HIST)
    plant_symlink(s, "decoy", os.path.join(ws, ".sandbox"))

    p, reqs = turn(s, ch, "remember that a fresh note")
    assert p.stdout.strip() == "I will remember that."
    assert "decoy-secret" not in json.dumps(bodies(reqs))
    assert RESET_MEMORY in system_text(reqs[0]["body"]) and RESET_HISTORY in system_text(reqs[0]["body"])
    _untouched(os.path.join(decoy, "memory.json"), st_m, SECRET_MEM)
    _untouched(os.path.join(decoy, "history.json"), st_h, SECRET_HIST)
    assert sorted(os.listdir(decoy)) == ["history.json", "memory.json"]
    # The link is kept aside, unchanged; .sandbox is a real directory again.
    kept = aside(ws, ".sandbox")
    assert len(kept) == 1 and os.readlink(os.path.join(ws, kept[0])) == "decoy"
    st = os.lstat(os.path.join(ws, ".sandbox"))
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == s.guest.uid
    assert read_json(os.path.join(ws, ".sandbox", "memory.json"))["speakers"]["1001"]["note"] == "a fresh note"


def test_hostile_file_symlinks(ws_suite):
    s = ws_suite
    ch = "guild-w/hostile-file-links"
    on(s, ch)
    ws = workspace(s, ch)
    sb = os.path.join(ws, ".sandbox")
    plant_dir(s, sb)
    st_m = _decoy(s, os.path.join(ws, "decoy-memory.json"), SECRET_MEM)
    st_h = _decoy(s, os.path.join(ws, "decoy-history.json"), SECRET_HIST)
    plant_symlink(s, "../decoy-memory.json", os.path.join(sb, "memory.json"))  # relative
    plant_symlink(s, "/workspace/decoy-history.json", os.path.join(sb, "history.json"))  # absolute

    p, reqs = turn(s, ch, "remember that a fresh note")
    assert p.stdout.strip() == "I will remember that."
    assert "decoy-secret" not in json.dumps(bodies(reqs))
    assert RESET_MEMORY in system_text(reqs[0]["body"]) and RESET_HISTORY in system_text(reqs[0]["body"])
    _untouched(os.path.join(ws, "decoy-memory.json"), st_m, SECRET_MEM)
    _untouched(os.path.join(ws, "decoy-history.json"), st_h, SECRET_HIST)
    for name, target in (("memory.json", "../decoy-memory.json"), ("history.json", "/workspace/decoy-history.json")):
        kept = aside(sb, name)
        assert len(kept) == 1 and os.readlink(os.path.join(sb, kept[0])) == target
        st = os.lstat(os.path.join(sb, name))
        assert stat.S_ISREG(st.st_mode) and st.st_uid == s.guest.uid
    assert read_json(os.path.join(sb, "memory.json"))["speakers"]["1001"]["note"] == "a fresh note"


def _plant_case(s, sb, case):
    """Plant memory.json and history.json for case; returns what each must be kept as:
    {name: ("fifo"|"size", value) or bytes}."""
    mem, hist = os.path.join(sb, "memory.json"), os.path.join(sb, "history.json")
    if case == "fifo":
        plant_fifo(s, mem)
        plant_fifo(s, hist)
        return {"memory.json": ("fifo", None), "history.json": ("fifo", None)}
    if case == "huge":
        plant(s, mem, b"")
        os.truncate(mem, 4 << 30)  # sparse 4 GiB
        big = history_doc([]).encode() + b" " * (1 << 20)  # valid JSON, just over the bound
        plant(s, hist, big)
        return {"memory.json": ("size", 4 << 30), "history.json": ("size", len(big))}
    if case == "invalid_json":
        m, h = b'{"v":1,"speakers":{},"channel":{"half":', b"not json \xff at all"
    else:  # wrong_types
        m = b'{"v":1,"speakers":[],"channel":"x"}'
        h = b'{"v":1,"exchanges":[{"speaker":7,"user":[],"assistant":null,"time":1}]}'
    plant(s, mem, m)
    plant(s, hist, h)
    return {"memory.json": m, "history.json": h}


@pytest.mark.parametrize("case", ["fifo", "huge", "invalid_json", "wrong_types"])
def test_hostile_files_are_moved_aside_and_the_model_told(ws_suite, case):
    s = ws_suite
    ch = f"guild-w/hostile-{case}"
    on(s, ch)
    sb = os.path.join(workspace(s, ch), ".sandbox")
    plant_dir(s, sb)
    want = _plant_case(s, sb, case)

    p, reqs = turn(s, ch, "hello through the mess")
    assert p.stdout.strip().startswith("echo: ")
    assert len(reqs) == 1
    sys_text = system_text(reqs[0]["body"])
    assert RESET_MEMORY in sys_text and RESET_HISTORY in sys_text
    assert [m["role"] for m in reqs[0]["body"]["messages"]] == ["system", "user"]
    for name, kept in want.items():
        moved = aside(sb, name)
        assert len(moved) == 1, (name, os.listdir(sb))
        path = os.path.join(sb, moved[0])
        st = os.lstat(path)
        if kept == ("fifo", None):
            assert stat.S_ISFIFO(st.st_mode)
        elif isinstance(kept, tuple):
            assert stat.S_ISREG(st.st_mode) and st.st_size == kept[1]
        else:
            assert read(path) == kept
    # The turn's exchange is saved in a new, regular history file; memory was not written.
    assert stat.S_ISREG(os.lstat(os.path.join(sb, "history.json")).st_mode)
    assert [e["user"] for e in read_json(os.path.join(sb, "history.json"))["exchanges"]] == ["hello through the mess"]
    assert not os.path.lexists(os.path.join(sb, "memory.json"))

    # The next turn finds a clean workspace and is told nothing.
    _, reqs = turn(s, ch, "hello again")
    assert RESET_MEMORY not in system_text(reqs[0]["body"]) and RESET_HISTORY not in system_text(reqs[0]["body"])
    assert len(aside(sb, "memory.json")) == 1 and len(aside(sb, "history.json")) == 1


def test_hostile_sandbox_is_a_fifo(ws_suite):
    s = ws_suite
    ch = "guild-w/hostile-sandbox-fifo"
    on(s, ch)
    ws = workspace(s, ch)
    plant_fifo(s, os.path.join(ws, ".sandbox"))
    p, reqs = turn(s, ch, "hello")
    assert p.stdout.strip().startswith("echo: ")
    assert RESET_MEMORY in system_text(reqs[0]["body"])
    kept = aside(ws, ".sandbox")
    assert len(kept) == 1 and stat.S_ISFIFO(os.lstat(os.path.join(ws, kept[0])).st_mode)
    assert stat.S_ISDIR(os.lstat(os.path.join(ws, ".sandbox")).st_mode)
