# SPDX-License-Identifier: Apache-2.0
"""`roundtable-sandbox metrics` and {"op":"metrics"} (issue 15, DESIGN.md 8.4): Prometheus
text gathered from the three real daemons, parsed with a real Prometheus text parser
(Debian's python3-prometheus-client), and values that move as turns run. Labels carry no
channel key, turn id or guest text.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_metrics.py
"""
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

import rtsproto
from harness import HarnessError, Suite, wait_until

CHANNEL = "guild-7/metrics-channel-KEY-not-a-label"
GUEST_TEXT = "metrics guest text marker 9c2e"
REQUIRED = {
    "roundtable_sandbox_turns_total": "counter",
    "roundtable_sandbox_turn_seconds": "histogram",
    "roundtable_sandbox_broker_calls_total": "counter",
    "roundtable_sandbox_containers": "gauge",
    "roundtable_sandbox_spares_ready": "gauge",
    "roundtable_sandbox_spares_usable": "gauge",
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
    # The daemons connect their links lazily, and a daemon that does not answer within
    # statd's wait is reported down rather than waited on; on a busy machine the first
    # scrape after start-up may come before runnerd reached brokerd.
    def all_up():
        fams, txt = scrape(suite)
        up = all(value(fams, "roundtable_sandbox_daemon_up", daemon=d) == 1 for d in ("statd", "runnerd", "brokerd"))
        return (fams, txt) if up else None
    families, text = wait_until(all_up, 30, "metrics from all three daemons")
    for name, kind in REQUIRED.items():
        assert name in families, f"{name} missing"
        assert families[name].type == kind, (name, families[name].type)
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


@pytest.fixture
def statd_alone(host_env):
    """statd with this test standing in for runnerd on runnerd.sock (rtsproto)."""
    try:
        s = Suite(host_env, daemons=("statd",))
    except HarnessError as e:
        pytest.fail(f"statd did not start: {e}", pytrace=False)
    path = os.path.join(s.dirs["rt"], "runnerd.sock")
    lst = rtsproto.Listener(path)
    os.chown(path, host_env.uid, host_env.gid)  # statd runs as the service account
    yield s, lst
    lst.close()
    s.stop()


def ask_with_runnerd_text(suite, lst, runnerd_text):
    """A metrics request; the fake runnerd answers with runnerd_text. Returns the control
    answer and the fake's link (to see whether statd dropped it)."""
    c = suite.connect()
    try:
        rid = c.send({"op": "metrics"})
        peer = lst.accept(timeout=10)
        peer.expect_hello(rtsproto.PROGRAM_RUNNERD)
        m = peer.expect(rtsproto.METRICS)
        peer.send(rtsproto.METRICS_TEXT, seq=m["seq"], brokerd_link=0, brokerd_up=0, runnerd=runnerd_text,
                  brokerd="")
        a = c.recv(timeout=10)
    finally:
        c.close()
    assert a["id"] == rid
    return a, peer


def test_runnerd_text_is_passed_on(statd_alone):
    suite, lst = statd_alone
    a, peer = ask_with_runnerd_text(suite, lst, "# TYPE roundtable_sandbox_spares_ready gauge\n"
                                                "roundtable_sandbox_spares_ready 0\n")
    families = parse(a["text"])
    assert value(families, "roundtable_sandbox_daemon_up", daemon="runnerd") == 1
    assert value(families, "roundtable_sandbox_spares_ready") == 0
    peer.close()


@pytest.mark.parametrize("bad", ["x 1\n\x1b[2Jx 2\n", "no newline at the end 1", "caf\u00e9 1\n"])
def test_runnerd_text_not_ascii_lines_drops_the_link(statd_alone, bad):
    """A peer's text with a control byte, a non-ASCII byte or no final newline is a
    protocol violation: statd drops the link and answers without it."""
    suite, lst = statd_alone
    a, peer = ask_with_runnerd_text(suite, lst, bad)
    families = parse(a["text"])
    assert value(families, "roundtable_sandbox_daemon_up", daemon="runnerd") == 0
    assert bad.rstrip("\n") not in a["text"] and "\x1b" not in a["text"] and "\u00e9" not in a["text"]
    assert wait_until(lambda: peer.recv(timeout=10) is None, 15, "statd dropping the link")
    assert "METRICS_TEXT" in suite.log_tail("statd") or "protocol" in suite.log_tail("statd").lower()
