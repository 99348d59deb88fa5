# SPDX-License-Identifier: Apache-2.0
"""Compaction of the rich (Pi) worker's session (seed, "Compaction"; worker/pi/lib/tiers.mjs
and compaction.mjs) in the real image against pi_rig.PiStandIn, whose host compactor
(POST /worker/compact) each test scripts. fake_anthropic's #usage N makes the model report
N input tokens, which is what Pi's compaction threshold reads; #big N makes a reply large
enough that the compaction cut falls after the private exchange of the first turn.

What brokerd adds on the host (running the configured compactor command, its timeout,
maxRequestBytes, the three-request and sixteen-report limits, its log lines) is tested
with the real brokerd in test_rich_hooks.py; here the stand-in plays the host's answers."""
import json

import pytest

from pi_rig import BIG_MODEL, BOB, PLACEHOLDER, host_tool, is_summary, pi_image, started_stand_in

SECRET = "SECRET-private_lookup-tea"
TOOLS = [host_tool("private_lookup", {"q": {"type": "string"}, "owner": {"type": "string"}})]


@pytest.fixture(scope="module")
def image(rts_env):
    return pi_image(rts_env)


@pytest.fixture
def st(rts_env, image):
    """A stand-in and a worker container of its own, on a fresh workspace."""
    with started_stand_in(rts_env, image) as s:
        yield s


def turn(st, text, model=BIG_MODEL, **kw):
    kw.setdefault("speaker", BOB)
    return st.turn_packet(text, model=model, tools=TOOLS, **kw)


def history_then_threshold(st, model=BIG_MODEL, usage=310_000):
    """Alice's private exchange, a large public reply (the cut falls after the exchange),
    then a turn whose model call reports usage tokens: Pi compacts after it."""
    st.turn_packet('#tool host_private_lookup {"q": "tea", "owner": "principal-1001"} #quiet', model=model,
                   tools=TOOLS)
    turn(st, "chatter #big 100000", model=model)
    return turn(st, f"now large #usage {usage}", model=model)


def compact_requests(st):
    return [r["body"] for r in st.requests("/worker/compact") if r.get("body") and "request" in r["body"]]


def reports(st):
    return [r["body"]["report"] for r in st.requests("/worker/compact") if r.get("body") and "report" in r["body"]]


def summaries(st):
    return [r["body"] for r in st.model_requests() if is_summary(r["body"])]


def compactions(st):
    return [e for e in st.session_entries()[0] if e["type"] == "compaction"]


def host_answer(summary="HOST-SUMMARY", **extra):
    def answer(body):
        req = body["request"]
        out = {"summary": summary, "firstKeptEntryId": req["firstKeptEntryId"], "tokensBefore": req["tokensBefore"],
               "estimatedTokensAfter": 1234, "details": {"engine": "test-engine"}}
        out.update(extra)
        return 200, out
    return answer


def test_host_compactor_at_300000_with_no_tagged_exchange(st):
    st.compact = host_answer()
    packet = history_then_threshold(st)
    assert packet["text"].startswith("echo: [Bob]: now large")
    reqs = compact_requests(st)
    assert len(reqs) == 1
    body = reqs[0]
    assert body["turnId"] == packet["turnId"]
    req = body["request"]
    assert req["reason"] == "threshold" and req["tokensBefore"] >= 310_000
    assert set(req) >= {"firstKeptEntryId", "isSplitTurn", "messagesToSummarize", "turnPrefixMessages",
                        "keptMessages", "readFiles", "modifiedFiles"}
    blob = json.dumps(req)
    assert SECRET not in blob and '"tea"' not in blob
    assert PLACEHOLDER in json.dumps(req["messagesToSummarize"]), "the exchange is in the summarized part"
    # Written to the session file as the host's.
    (c,) = compactions(st)
    assert c["summary"] == "HOST-SUMMARY" and c["fromHook"] is True and c["firstKeptEntryId"] == req["firstKeptEntryId"]
    assert c["details"] == {"engine": "test-engine", "estimatedTokensAfter": 1234}
    assert summaries(st) == [], "Pi's own summary ran too"
    (rep,) = reports(st)
    assert rep["event"] == "compacted" and rep["engine"] == "test-engine" and rep["trigger"] == "threshold"
    assert rep["tokensAfter"] == 1234 and rep["nextCompactionAt"] == 300_000
    # The next request starts from the summary.
    turn(st, "after")
    first = st.model_requests()[-1]["body"]["messages"][0]["content"][0]["text"]
    assert "HOST-SUMMARY" in first


def test_fifty_thousand_rule_then_pis_summary_past_the_ceiling(st):
    # The host's summary leaves about 275,000 tokens: the next compaction moves to 500,000.
    st.compact = host_answer(summary="S" * 1_100_000)
    history_then_threshold(st)
    assert reports(st)[-1]["nextCompactionAt"] == 500_000
    turn(st, "#usage 400000 below the ceiling")
    assert len(compact_requests(st)) == 1 and len(compactions(st)) == 1, "compacted below the moved threshold"
    n_reports = len(reports(st))
    turn(st, "#usage 520000 past the ceiling")
    assert len(compact_requests(st)) == 1, "the host compactor was asked past the hard ceiling"
    new = reports(st)[n_reports:]
    assert new[0] == {"event": "skipped", "trigger": "threshold", "tokensBefore": new[0]["tokensBefore"],
                      "reason": "above the hard ceiling"}
    assert new[1]["event"] == "compacted" and new[1]["engine"] == "pi"
    assert len(summaries(st)) >= 1
    last = compactions(st)[-1]
    assert last["fromHook"] is False and last["summary"].startswith("summary:")


def test_small_window_compacts_at_pis_threshold(st):
    st.compact = host_answer()
    history_then_threshold(st, model="claude-sonnet-4-5", usage=190_000)
    (body,) = compact_requests(st)
    assert body["request"]["tokensBefore"] >= 190_000
    assert compactions(st)[0]["fromHook"] is True


def fails_with(status):
    return lambda body: (status, {"error": "scripted"} if status else None)


@pytest.mark.parametrize("script, reason", [
    ("decline", None),
    ("status500", "the broker answered 500"),
    ("drop", "the host compactor gave no answer"),
    ("empty", "the host compactor s answer is out of shape the answer has no summary"),
    ("otherentry", "the host compactor s answer is out of shape the answer keeps another first entry"),
    ("notobject", "the host compactor s answer is out of shape the answer is not an object"),
    ("oversized", "the compaction request is larger than the host takes"),
])
def test_host_compactor_fallbacks_to_pis_summary(st, script, reason):
    st.compact = {
        "decline": fails_with(204),
        "status500": fails_with(500),
        "drop": fails_with(0),
        "empty": host_answer(summary=""),
        "otherentry": host_answer(firstKeptEntryId="nope"),
        "notobject": lambda body: (200, ["summary"]),
        "oversized": host_answer(),
    }[script]
    if script == "oversized":
        st.compact_max = 1000  # brokerd refuses a request over maxRequestBytes before reading it
    packet = history_then_threshold(st)
    assert packet["text"].startswith("echo: [Bob]: now large"), packet["text"]
    asked = [r for r in st.requests("/worker/compact") if r.get("refusedBeforeBody") or "request" in (r.get("body") or {})]
    assert len(asked) == 1
    fallbacks = [r for r in reports(st) if r["event"] == "fallback"]
    if reason is None:
        assert fallbacks == []  # the host said why (204) and logged it
    else:
        assert [r["reason"] for r in fallbacks] == [reason]
    # Pi's summary ran instead, through the broker, on the redacted preparation.
    sums = summaries(st)
    assert sums, "Pi's summary did not run"
    blob = json.dumps(sums)
    assert SECRET not in blob and PLACEHOLDER in blob
    (c,) = compactions(st)
    assert c["fromHook"] is False and c["summary"].startswith("summary:")
    assert reports(st)[-1]["event"] == "compacted" and reports(st)[-1]["engine"] == "pi"
