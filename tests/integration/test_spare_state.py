# SPDX-License-Identifier: Apache-2.0
"""SPARE_STATE (common/proto.h): how statd learns which channels have a ready warm spare,
for `status` and `channels` (issue 15). statd runs alone; this test stands in for runnerd
on runnerd.sock (rtsproto) and sends the set, good and bad. A bad set (not whole hashes,
not lowercase hex, more hashes than warmSparesMax) is a protocol violation: statd drops
the link and, without a link, counts no spares. The real runnerd's side:
test_spares.py::test_status_and_channels_account_the_spares.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spare_state.py
"""
import json

import pytest

import rtsproto
from harness import wait_until
from rtsproto import channel_hash as chash
from test_metrics import statd_alone  # noqa: F401 (a fixture)

WARM_SPARES_MAX_DEFAULT = 16  # common/limits.h RTS_WARM_SPARES_CAP_DEFAULT


def status(suite, *args):
    out = suite.cli("status", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def link_up(suite, lst):
    """Make statd connect (a metrics request), answer HELLO and the request: the fake
    runnerd's peer."""
    c = suite.connect()
    try:
        c.send({"op": "metrics"})
        peer = lst.accept(timeout=10)
        peer.expect_hello(rtsproto.PROGRAM_RUNNERD)
        m = peer.expect(rtsproto.METRICS)
        peer.send(rtsproto.METRICS_TEXT, seq=m["seq"], brokerd_link=0, brokerd_up=0, runnerd="", brokerd="")
        c.recv(timeout=10)
    finally:
        c.close()
    return peer


def test_statd_shows_the_set_runnerd_sends(statd_alone):  # noqa: F811
    suite, lst = statd_alone
    for ch in ("a", "b", "c"):
        assert suite.cli("on", ch).returncode == 0
    peer = link_up(suite, lst)
    peer.send(rtsproto.SPARE_STATE, ready=chash("a") + chash("c"))
    wait_until(lambda: status(suite)["spares"] == 2 or None, 15, "statd to count two spares")
    assert [status(suite, ch)["spare"] for ch in ("a", "b", "c")] == ["ready", "none", "ready"]
    listed = {e["channel"]: e["spare"] for e in json.loads(suite.cli("channels", "--json").stdout)["channels"]}
    assert listed == {"a": "ready", "b": "none", "c": "ready"}
    # The whole set each time: "a" claimed, "c" still waits.
    peer.send(rtsproto.SPARE_STATE, ready=chash("c"))
    wait_until(lambda: status(suite)["spares"] == 1 or None, 15, "statd to count one spare")
    assert status(suite, "a")["spare"] == "none"
    # The most a runnerd with the default warmSparesMax can have.
    peer.send(rtsproto.SPARE_STATE, ready="".join(chash(f"x{i}") for i in range(WARM_SPARES_MAX_DEFAULT)))
    wait_until(lambda: status(suite)["spares"] == WARM_SPARES_MAX_DEFAULT or None, 15, "statd to count 16")
    # Without the link, statd knows of no spare.
    peer.close()
    wait_until(lambda: status(suite)["spares"] == 0 or None, 15, "statd to forget the spares")


BAD = {
    "half a hash": lambda: chash("a") + chash("b")[:32],
    "uppercase hex": lambda: chash("a").upper(),
    "not hex": lambda: "g" * 64,
    "more than warmSparesMax": lambda: "".join(chash(f"x{i}") for i in range(WARM_SPARES_MAX_DEFAULT + 1)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_set_drops_the_link(statd_alone, case):  # noqa: F811
    suite, lst = statd_alone
    assert suite.cli("on", "a").returncode == 0
    peer = link_up(suite, lst)
    peer.send(rtsproto.SPARE_STATE, ready=chash("a"))
    wait_until(lambda: status(suite)["spares"] == 1 or None, 15, "the good set")
    peer.send(rtsproto.SPARE_STATE, ready=BAD[case]())
    assert wait_until(lambda: peer.recv(timeout=10) is None, 15, "statd dropping the link")
    assert status(suite)["spares"] == 0 and status(suite, "a")["spare"] == "none"
    assert "protocol violation by runnerd: SPARE_STATE refused" in suite.log_tail("statd"), suite.log_tail("statd")
