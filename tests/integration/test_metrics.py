# SPDX-License-Identifier: Apache-2.0
"""`roundtable-sandbox metrics` and {"op":"metrics"} (issue 15, DESIGN.md 8.4): Prometheus
text gathered from the three real daemons, parsed with a real Prometheus text parser
(Debian's python3-prometheus-client), and values that move as turns run. Labels carry no
channel key, turn id or guest text.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_metrics.py
"""
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import wait_until

CHANNEL = "guild-7/metrics-channel-KEY-not-a-label"
GUEST_TEXT = "metrics guest text marker 9c2e"
REQUIRED = {
    "roundtable_sandbox_turns_total": "counter",
    "roundtable_sandbox_turn_seconds": "histogram",
    "roundtable_sandbox_broker_calls_total": "counter",
    "roundtable_sandbox_containers": "gauge",
    "roundtable_sandbox_spares_ready": "gauge",
    "roundtable_sandbox_upstream_seconds": "histogram",
    "roundtable_sandbox_queued_turns": "gauge",
    "roundtable_sandbox_link_up": "gauge",
    "roundtable_sandbox_daemon_up": "gauge",
}


def parse(text):
    """{family name as exposed: family}. The parser names a counter family without its
    _total suffix; this keys it by the exposed name again."""
    out = {}
    for f in text_string_to_metric_families(text):
        out[f.name + "_total" if f.type == "counter" else f.name] = f
    return out


def scrape(suite):
    """The CLI's output, parsed, and the raw text."""
    out = suite.cli("metrics", timeout=60)
    assert out.returncode == 0, out.stderr
    return parse(out.stdout), out.stdout


def value(families, family, sample_name=None, **labels):
    """The value of the one sample of family (named sample_name; default: the family's
    own) with these labels (among others)."""
    f = families[family]
    want = sample_name or family
    hits = [s.value for s in f.samples
            if s.name == want and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (family, labels, [s for s in f.samples])
    return hits[0]


def test_metrics_parse_and_cover_the_three_daemons(suite):
    families, text = scrape(suite)
    for name, kind in REQUIRED.items():
        assert name in families, f"{name} missing"
        assert families[name].type == kind, (name, families[name].type)
    for daemon in ("statd", "runnerd", "brokerd"):
        assert value(families, "roundtable_sandbox_daemon_up", daemon=daemon) == 1, text
    assert {s.labels["start"] for s in families["roundtable_sandbox_turn_seconds"].samples} == {"warm", "cold"}
    assert value(families, "roundtable_sandbox_spares_ready") == 0
    # Each family's HELP and TYPE once: the texts of three daemons joined without clashes.
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)), types


def test_values_move_as_turns_run(suite):
    before, _ = scrape(suite)
    assert suite.cli("on", CHANNEL).returncode == 0
    for i in range(2):
        out = suite.cli("say", CHANNEL, "--author", "1001", "--name", "Alice", f"{GUEST_TEXT} {i}")
        assert out.returncode == 0, out.stderr
    after, text = scrape(suite)

    def delta(family, sample_name=None, **labels):
        return value(after, family, sample_name, **labels) - value(before, family, sample_name, **labels)

    assert delta("roundtable_sandbox_turns_total", outcome="reply") == 2
    assert delta("roundtable_sandbox_messages_total", route="sandbox") == 2
    assert delta("roundtable_sandbox_turn_seconds", "roundtable_sandbox_turn_seconds_count", start="cold") == 2
    assert delta("roundtable_sandbox_turn_seconds", "roundtable_sandbox_turn_seconds_count", start="warm") == 0
    assert delta("roundtable_sandbox_broker_calls_total", route="model", decision="allowed", result="ok") >= 2
    assert delta("roundtable_sandbox_upstream_seconds", "roundtable_sandbox_upstream_seconds_count",
                 upstream="model") >= 2
    assert value(after, "roundtable_sandbox_link_up", link="runnerd") == 1
    assert value(after, "roundtable_sandbox_link_up", link="brokerd") == 1
    # The turns are over: no container left, nothing queued.
    assert value(after, "roundtable_sandbox_containers", kind="turn") == 0
    assert value(after, "roundtable_sandbox_queued_turns") == 0
    # No channel key, hash or guest text anywhere in the labels or the text.
    assert CHANNEL not in text and GUEST_TEXT not in text
    for f in after.values():
        for s in f.samples:
            for v in s.labels.values():
                assert len(v) <= 24 and "/" not in v, (s.name, s.labels)


def test_control_op_answers_id_and_text(suite):
    c = suite.connect()
    try:
        rid = c.send({"op": "metrics", "id": "m-1"})
        a = c.recv()
    finally:
        c.close()
    assert set(a) == {"id", "text"}, a
    assert a["id"] == rid
    assert "roundtable_sandbox_broker_calls_total" in parse(a["text"])


def test_unknown_field_is_refused(suite):
    c = suite.connect()
    try:
        c.send({"op": "metrics", "id": 5, "channel": CHANNEL})
        a = c.recv()
    finally:
        c.close()
    assert a.get("error") == "invalid_request" and "text" not in a, a
    assert "route" not in a


def test_brokerd_down_is_reported_not_fatal(make_suite):
    """With brokerd stopped the answer still comes, from statd and runnerd, and says so."""
    s = make_suite()
    s.stop_daemon("brokerd")
    families, text = scrape(s)
    assert value(families, "roundtable_sandbox_daemon_up", daemon="statd") == 1
    assert value(families, "roundtable_sandbox_daemon_up", daemon="runnerd") == 1
    assert value(families, "roundtable_sandbox_daemon_up", daemon="brokerd") == 0
    assert value(families, "roundtable_sandbox_link_up", link="brokerd") == 0
    assert "roundtable_sandbox_broker_calls_total" not in families
    s.stop_daemon("runnerd")
    families, _ = scrape(s)
    assert value(families, "roundtable_sandbox_daemon_up", daemon="runnerd") == 0
    assert "roundtable_sandbox_turn_seconds" not in families
