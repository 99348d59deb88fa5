# SPDX-License-Identifier: Apache-2.0
"""The rich (Pi) worker through the real daemons (DESIGN.md 8.5, issues 16 and 17): statd,
runnerd and brokerd as installed, a real rich channel container from the real Pi image
(pi_rig.pi_image: `image build --rich`), and the scripted Anthropic endpoint behind brokerd's
OAuth broker (rich_host_rig.RichHostSuite). test_pi_worker.py checks the worker's own rules
against a stand-in broker; this file checks that the pieces fit: a turn's words persist in the
channel's session and reach the model again next turn, a refusal the worker owns holds
when the guest goes through the whole path, and a host tool's privateTo travels from the
tool through brokerd into the session and out again only to its principal."""
import json
import os

import pytest

from harness import HarnessError
from pi_rig import pi_image
from rich_host_rig import MODEL, RichHostSuite, channel_hash

FACT = "the lighthouse key is under stone 4417"


@pytest.fixture(scope="module")
def suite(rts_env):
    image = pi_image(rts_env)
    try:
        s = RichHostSuite(rts_env, image=image.tag)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        p = s.rich("pi")
        assert p.returncode == 0, p.stderr
        yield s
    finally:
        s.stop()


def say(s, text, **kw):
    p, _ = s.say("pi", text, **kw)
    assert p.returncode == 0, (p.returncode, p.stderr)
    return p.stdout.rstrip("\n")


def model_requests(s):
    return [r for r in s.anthropic.requests() if r["path"].startswith("/v1/messages")]


def session_files(s):
    d = os.path.join(s.dirs["ws"], channel_hash("pi"), "sessions")
    return sorted(n for n in os.listdir(d) if n.endswith(".jsonl")), d


def test_a_fact_told_in_one_turn_is_recalled_in_the_next(suite):
    s = suite
    n = len(model_requests(s))
    assert say(s, f"Please remember: {FACT}.", principal="p-alice") == f"echo: [Alice]: Please remember: {FACT}."
    # The next turn runs in the same container and session: the model gets the first
    # turn back as history (the fake's #recall answers from the request's earlier user
    # messages), through brokerd, which swapped the worker's dummy for the OAuth token.
    out = say(s, "Where is the lighthouse key? #recall", author="2002", name="Bob", principal="p-bob")
    assert FACT in out, out
    reqs = model_requests(s)[n:]
    assert len(reqs) == 2
    assert all(r["bearer"] == s.oauth_token for r in reqs)
    assert FACT not in json.dumps(reqs[0]["body"]["messages"][:-1])
    assert FACT in json.dumps(reqs[1]["body"]["messages"])
    # One session file of the channel's workspace holds both turns and their reader
    # records (the readers are the principals statd bound to the speakers).
    names, d = session_files(s)
    assert len(names) == 1, names
    with open(os.path.join(d, names[0]), encoding="utf-8") as f:
        entries = [json.loads(line) for line in f if line.strip()]
    readers = [e["data"]["reader"] for e in entries
               if e.get("type") == "custom" and e.get("customType") == "roundtable-sandbox.reader"]
    assert readers[-2:] == ["p-alice", "p-bob"], readers
    assert FACT in json.dumps(entries)


def test_read_skill_stays_inside_the_skill(suite):
    # Seed, "Worker content and files": skill reads are confined to the baked-in skills
    # tree. The guest steers the model into reading a file of another skill through "..";
    # the worker answers the tool call with its own refusal and reads nothing.
    s = suite
    n = len(model_requests(s))
    out = say(s, '#tool read_skill {"skill": "dice", "path": "../files/SKILL.md"}')
    assert "must stay inside the skill's directory" in out, out
    assert "FILES-SKILL-TEXT" not in out
    reqs = model_requests(s)[n:]
    assert len(reqs) == 2 and "FILES-SKILL-TEXT" not in json.dumps(reqs[1]["body"])
    # The same call inside the skill's directory is answered with the file.
    out = say(s, '#tool read_skill {"skill": "dice", "path": "ref/table.md"}')
    assert "DICE-TABLE-TEXT" in out, out


# ---- a private host tool result through brokerd (seed, "Private tool exchanges in Pi mode") ----

SECRET = "SECRET-tea-is-under-the-floorboard"
# A host tool that answers privately to Alice's principal, whoever asks: the host decides
# the tag, never the model's arguments.
PRIVATE_TOOL = f"""#!/usr/bin/python3
import json, sys
json.load(sys.stdin)
print(json.dumps({{"result": "{SECRET}", "privateTo": "p-alice"}}))
"""


class PrivateToolSuite(RichHostSuite):
    """RichHostSuite whose default profile has one host tool, private_lookup."""

    def _write_config(self):
        d = os.path.join(self.root, "tools")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        tool = os.path.join(d, "private_lookup.py")
        with open(tool, "w", encoding="utf-8") as f:
            f.write(PRIVATE_TOOL)
        os.chmod(tool, 0o755)
        self.config_overrides = dict(self.config_overrides, tools=[{
            "name": "private_lookup", "description": "what the host keeps for the asker",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "command": ["/usr/bin/python3", tool], "timeoutMs": 20000}])
        self.rich_overrides = dict(self.rich_overrides, profiles={"default": {"model": MODEL, "tools": ["private_lookup"]}})
        super()._write_config()


@pytest.fixture(scope="module")
def private_suite(rts_env):
    image = pi_image(rts_env)
    try:
        s = PrivateToolSuite(rts_env, image=image.tag)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        p = s.rich("priv")
        assert p.returncode == 0, p.stderr
        yield s
    finally:
        s.stop()


def test_a_private_tool_result_is_a_placeholder_for_the_next_speaker(private_suite):
    s = private_suite
    p, _ = s.say("priv", '#tool host_private_lookup {"q": "tea"} #quiet', principal="p-alice")
    # #quiet: the model's reply counts the results and never quotes them, so what Bob's
    # request holds can only come from the session history.
    assert p.returncode == 0 and p.stdout.strip() == "tool results: 1 received", (p.returncode, p.stdout, p.stderr)
    n = len(model_requests(s))
    p, _ = s.say("priv", "what did Alice look up?", author="2002", name="Bob", principal="p-bob")
    assert p.returncode == 0, p.stderr
    bob = model_requests(s)[n:]
    assert len(bob) == 1
    body = json.dumps(bob[0]["body"])
    assert SECRET not in body
    uses = [b for m in bob[0]["body"]["messages"] if isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_use"]
    results = [b for m in bob[0]["body"]["messages"] if isinstance(m.get("content"), list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert [u["name"] for u in uses] == ["host_private_lookup"]
    assert uses[0]["input"] == {"hidden": "(another person's private memory, hidden)"}
    assert [r["tool_use_id"] for r in results] == [uses[0]["id"]]
    assert "(another person's private memory, hidden)" in json.dumps(results[0]["content"])
    # Alice, the principal the host named, sees her exchange intact.
    n = len(model_requests(s))
    p, _ = s.say("priv", "and again?", principal="p-alice")
    assert p.returncode == 0, p.stderr
    alice = model_requests(s)[n:]
    assert len(alice) == 1 and SECRET in json.dumps(alice[0]["body"])
    assert '"q": "tea"' in json.dumps(alice[0]["body"]) or '"q":"tea"' in json.dumps(alice[0]["body"])
