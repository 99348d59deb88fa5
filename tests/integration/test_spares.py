# SPDX-License-Identifier: Apache-2.0
"""Warm spares (issue 15, DESIGN.md 8.4, runnerd/spare.h) with the real daemons, a real
dockerd and real containers: after a channel's turn runnerd starts that channel's spare; the
next turn of the channel claims it (turn_seconds{start="warm"}, the container's spare label),
and a new spare replaces it. A spare serves one turn, only its own channel's, has no broker
before its turn, is replaced when killed from outside, and leaves no container behind when
runnerd stops or dies. warmSpares 0 is the cold path.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_spares.py
"""
import json
import os
import socket
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from harness import LABEL_INSTALLATION, QUIET_FORWARD_S, QUIET_TURN_S, assert_quiet, docker, docker_inspect, wait_until
from lifecycle_helpers import container_exists, kill9, restart, say, wait_runnerd_ready
from rtsproto import channel_hash as chash

LABEL_CHANNEL = "io.roundtable-sandbox.channel"
LABEL_SPARE = "io.roundtable-sandbox.spare"
SPARES_ON = {"warmSpares": 1}


def metrics(s):
    out = s.cli("metrics", timeout=60)
    assert out.returncode == 0, out.stderr
    vals = {}
    for f in text_string_to_metric_families(out.stdout):
        for smp in f.samples:
            vals[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return vals


def warm_turns(s):
    return metrics(s).get(("roundtable_sandbox_turn_seconds_count", (("start", "warm"),)), 0)


def cold_turns(s):
    return metrics(s).get(("roundtable_sandbox_turn_seconds_count", (("start", "cold"),)), 0)


def spares(s, channel=None, running=False):
    """Names of this suite's spare containers (of channel), by their labels."""
    args = ["ps", "--filter", f"label={LABEL_INSTALLATION}={s.installation}", "--filter", f"label={LABEL_SPARE}=1",
            "--format", "{{.Names}}"]
    if channel:
        args[1:1] = ["--filter", f"label={LABEL_CHANNEL}={chash(channel)}"]
    if not running:
        args.insert(1, "-a")
    return sorted(n for n in docker(*args, timeout=30).stdout.split() if n)


def ready_spare(s, channel, other_than=(), timeout=60):
    """Wait until channel's spare runs and runnerd counts it ready; its name."""
    def probe():
        names = [n for n in spares(s, channel, running=True) if n not in other_than]
        if len(names) != 1:
            return None
        ready = metrics(s).get(("roundtable_sandbox_spares_ready", ()), 0)
        return names[0] if ready >= 1 else None
    return wait_until(probe, timeout, f"a ready spare of {channel}")


def turn(s, channel, text):
    out = say(s, channel, text)
    assert out.returncode == 0, out.stderr + s.logs()
    return out.stdout


def test_a_turn_claims_its_channels_spare_and_a_new_one_replaces_it(make_suite):
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spares-claim"
    assert s.cli("on", ch).returncode == 0
    assert spares(s) == []
    turn(s, ch, "first, cold")
    assert (cold_turns(s), warm_turns(s)) == (1, 0)
    a = ready_spare(s, ch)
    # Started with the turn's hardening, the channel's workspace and a run dir of its own.
    info = docker_inspect(a)
    spare_id = a.rsplit("-", 1)[1]
    binds = sorted((m["Source"], m["Destination"], m["RW"]) for m in info["Mounts"])
    assert binds == sorted([(s.workspace(ch), "/workspace", True),
                            (os.path.join(s.dirs["run"], spare_id), "/run/broker", False)]), binds
    hc = info["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] and hc["CapDrop"] == ["ALL"]
    assert info["Config"]["User"] == f"{s.guest.uid}:{s.guest.gid}"
    assert info["Config"]["Labels"][LABEL_CHANNEL] == chash(ch)

    requests = len(s.fake.requests())
    reply = turn(s, ch, "second, warm")
    assert reply.strip()
    assert len(s.fake.requests()) > requests  # the model was reached through the spare's broker
    assert warm_turns(s) == 1 and cold_turns(s) == 1
    m = metrics(s)
    assert m[("roundtable_sandbox_spares_claimed_total", ())] == 1
    # Used once: the claimed spare is gone, and another one (a new container) replaces it.
    wait_until(lambda: not container_exists(a), 30, "the used spare's removal")
    b = ready_spare(s, ch, other_than=(a,))
    assert b != a
    assert not os.path.exists(os.path.join(s.dirs["run"], spare_id))
    turn(s, ch, "third, warm again")
    assert warm_turns(s) == 2
    wait_until(lambda: not container_exists(b), 30, "the second spare's removal")


def test_before_its_turn_a_spares_broker_answers_nothing(make_suite):
    """The spare's broker socket exists (it is mounted), but no broker serves it until a turn
    is bound: a request sent to it gets no answer, is dropped at the claim, and never
    reaches the model."""
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spares-unbound"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    a = ready_spare(s, ch)
    sock_path = os.path.join(s.dirs["run"], a.rsplit("-", 1)[1], "broker.sock")
    marker = "pre-claim-request-7f3a"
    body = ('{"messages":[{"role":"user","content":"%s"}]}' % marker).encode()
    # Counted before the request is sent: one forwarded while the spare waits counts too.
    requests = len(s.fake.requests())
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock_path)
    c.sendall(b"POST /model HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer roundtable-sandbox-dummy-key\r\n"
              b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    c.settimeout(0.2)

    def answered():
        try:
            return c.recv(1) != b"" or None
        except socket.timeout:
            return None
    # Nothing answers while the spare waits (the window a turn's start would take).
    assert assert_quiet(answered, QUIET_TURN_S, "an answer from an unbound spare's broker") is None
    assert len(s.fake.requests()) == requests
    turn(s, ch, "the turn that claims it")
    assert warm_turns(s) == 1
    # At the claim runnerd closed the early connection without a byte (a reset, as the
    # request was never read).
    c.settimeout(30)
    try:
        assert c.recv(4096) == b""
    except ConnectionResetError:
        pass
    c.close()
    assert all(marker not in str(r) for r in s.fake.requests()[requests:])
    assert "a turn claimed spare" in s.log_tail("runnerd", limit=10**7)


def test_pool_size_zero_is_todays_cold_path(make_suite):
    s = make_suite(config={"warmSpares": 0})
    ch = "guild-15/spares-off"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "one")
    turn(s, ch, "two")
    assert (cold_turns(s), warm_turns(s)) == (2, 0)
    assert assert_quiet(lambda: spares(s) or s.containers(), QUIET_TURN_S,
                        "a container after the turns with warmSpares 0") == []
    assert metrics(s)[("roundtable_sandbox_containers", (("kind", "spare"),))] == 0


def test_a_spare_killed_from_outside_is_replaced_and_the_turn_still_works(make_suite):
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spares-killed"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    a = ready_spare(s, ch)
    docker("rm", "-f", a, timeout=30)
    b = ready_spare(s, ch, other_than=(a,))
    assert b != a
    assert "while waiting for a turn" in s.log_tail("runnerd", limit=10**7)
    turn(s, ch, "after the kill")
    assert warm_turns(s) == 1


def test_two_channels_never_share_a_spare(make_suite):
    s = make_suite(config=SPARES_ON)
    x, y = "guild-15/spares-x", "guild-15/spares-y"
    for ch in (x, y):
        assert s.cli("on", ch).returncode == 0
        turn(s, ch, f"cold {ch}")
    sx, sy = ready_spare(s, x), ready_spare(s, y)
    assert sx != sy
    for name, ch in ((sx, x), (sy, y)):
        mounts = {m["Destination"]: m["Source"] for m in docker_inspect(name)["Mounts"]}
        assert mounts["/workspace"] == s.workspace(ch)
    turn(s, y, "warm y")
    # y's turn took y's spare and left x's alone.
    wait_until(lambda: not container_exists(sy), 30, "y's used spare's removal")
    assert container_exists(sx)
    assert warm_turns(s) == 1
    # A channel that never had a turn has no spare to take: its first turn is cold.
    z = "guild-15/spares-z"
    assert s.cli("on", z).returncode == 0
    turn(s, z, "cold z")
    assert (warm_turns(s), cold_turns(s)) == (1, 3)
    assert container_exists(sx)


def test_runnerd_stop_and_crash_leave_no_spare_behind(make_suite):
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spares-restart"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    a = ready_spare(s, ch)
    # SIGTERM: runnerd removes its spares before it exits.
    s.stop_daemon("runnerd")
    assert s.exit_codes["runnerd"] == 0, s.log_tail("runnerd")
    assert s.containers() == [], s.containers()
    assert not os.path.exists(os.path.join(s.dirs["run"], a.rsplit("-", 1)[1]))
    restart(s, "runnerd")
    wait_runnerd_ready(s, starts=2)
    turn(s, ch, "cold again: a new runnerd has no spare yet")
    b = ready_spare(s, ch)
    # SIGKILL: runnerd cannot clean up. Its end of the spare's stdin closes with it, so the
    # worker sees the end of an empty input and exits (--rm removes the container); what
    # is still there at the next start is removed by its installation label. Either way
    # nothing is left once runnerd serves again.
    kill9(s, "runnerd")
    restart(s, "runnerd")
    wait_until(lambda: s.containers() == [], 60, "no container of the killed runnerd's left")
    assert not container_exists(b)
    turn(s, ch, "works after the restart")
    assert ready_spare(s, ch) != b


def test_off_and_cancel_discard_the_channels_spare(make_suite):
    """DESIGN.md 8.4: a spare is discarded when its channel goes off and on cancel (statd
    tells runnerd with SPARE_DROP); the next turn then starts cold. Another channel's spare
    stays."""
    s = make_suite(config=SPARES_ON)
    ch, other = "guild-15/spares-off-cancel", "guild-15/spares-bystander"
    for c in (ch, other):
        assert s.cli("on", c).returncode == 0
        turn(s, c, "cold")
    a, keep = ready_spare(s, ch), ready_spare(s, other)
    assert s.cli("off", ch).returncode == 0
    wait_until(lambda: not container_exists(a), 30, "the spare's removal after off")
    assert "discarded: its channel left sealed mode or was cancelled" in s.log_tail("runnerd", limit=10**7)
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold: off took the spare")
    assert warm_turns(s) == 0
    b = ready_spare(s, ch)
    assert s.cli("cancel", ch).returncode == 0
    wait_until(lambda: not container_exists(b), 30, "the spare's removal after cancel")
    turn(s, ch, "cold: cancel took the spare")
    assert warm_turns(s) == 0
    # The bystander's spare survived both and still serves its channel.
    assert container_exists(keep)
    turn(s, other, "warm")
    assert warm_turns(s) == 1


def test_a_switch_to_rich_discards_the_channels_spare(rts_env):
    """Only a sealed channel keeps a spare: switching it to rich drops the spare at once
    (statd's SPARE_DROP on every mode but on), so no sealed container holds the workspace
    beside the rich one until the idle timeout."""
    from rich_host_rig import RichHostSuite
    s = RichHostSuite(rts_env, config=dict(SPARES_ON))
    try:
        ch = "guild-15/spares-to-rich"
        assert s.cli("on", ch).returncode == 0
        turn(s, ch, "cold")
        a = ready_spare(s, ch)
        assert s.rich(ch).returncode == 0
        wait_until(lambda: not container_exists(a), 30, "the spare's removal after the switch to rich")
        assert "discarded: its channel left sealed mode or was cancelled" in s.log_tail("runnerd", limit=10**7)
    finally:
        s.stop()


# Speaks statd's side of runnerd.sock as the service account (runnerd accepts only its own
# uid): HELLO, one SPARE_DROP, then reports whether runnerd dropped the link.
AS_STATD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import rtsproto
conn = rtsproto.Conn.connect(sys.argv[2])
conn.hello(rtsproto.PROGRAM_STATD)
conn.send(rtsproto.SPARE_DROP, channel_hash=sys.argv[3])
print(json.dumps({"dropped": conn.closed_by_peer(timeout=float(sys.argv[4]))}))
"""


def spare_drop_as_statd(s, channel_hash, wait_s):
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run(["setpriv", "--reuid", str(s.env.uid), "--regid", str(s.env.gid), "--clear-groups", "--",
                        "/usr/bin/python3", "-I", "-c", AS_STATD, here, os.path.join(s.dirs["rt"], "runnerd.sock"),
                        channel_hash, str(wait_s)],
                       capture_output=True, text=True, timeout=60, cwd="/", stdin=subprocess.DEVNULL,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["dropped"]


def test_spare_drop_with_a_malformed_hash_drops_the_link_not_a_spare(make_suite):
    s = make_suite(config=SPARES_ON)
    ch = "guild-15/spares-drop-msg"
    assert s.cli("on", ch).returncode == 0
    turn(s, ch, "cold")
    a = ready_spare(s, ch)
    h = chash(ch)
    # runnerd's SPARE_DROP handler refuses the hash (EBADMSG), not the decoder (whose
    # line is "a malformed SPARE_DROP") nor another of the link's rules.
    refused = "protocol violation by statd: SPARE_DROP refused: Bad message; dropping it"

    def refusals():
        return s.log_tail("runnerd", limit=10**7).count(refused)
    before = refusals()
    # 64 characters, the field's bound, but not lowercase hex: a protocol violation.
    assert spare_drop_as_statd(s, h.upper(), 10) is True
    wait_until(lambda: refusals() == before + 1, 10, "runnerd's refusal of the malformed SPARE_DROP")
    assert container_exists(a)
    # The same message with the hash as statd writes it discards the spare, link kept.
    assert spare_drop_as_statd(s, h, QUIET_FORWARD_S) is False
    wait_until(lambda: not container_exists(a), 30, "the spare's removal after SPARE_DROP")
    assert refusals() == before + 1


def test_no_more_spares_than_warm_spares_max(make_suite):
    """warmSparesMax 1: while one channel's spare waits, another channel's turn leaves no
    spare behind (runnerd says the cap was why); the first channel keeps its spare."""
    s = make_suite(config=dict(SPARES_ON, warmSparesMax=1))
    a, b = "guild-15/spares-cap-a", "guild-15/spares-cap-b"
    for ch in (a, b):
        assert s.cli("on", ch).returncode == 0
    turn(s, a, "a, cold")
    sa = ready_spare(s, a)
    turn(s, b, "b, cold")
    cap = f"channel {chash(b)[:12]}: no spare: warmSparesMax (1) spares exist already"
    wait_until(lambda: cap in s.log_tail("runnerd", 1 << 20), 30, "the cap's log line")
    assert assert_quiet(lambda: spares(s, b) or None, QUIET_TURN_S, "a spare of the second channel") is None
    assert spares(s) == [sa]
    turn(s, a, "a, warm")  # the spare that was kept serves its channel
    assert warm_turns(s) == 1


def status(s, *args):
    out = s.cli("status", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_status_and_channels_account_the_spares(make_suite):
    """`status` counts the ready spares and names a channel's (ready or none), `channels`
    lists each channel's; runnerd tells statd (SPARE_STATE) as spares come and go."""
    s = make_suite(config=SPARES_ON)
    ch, other = "guild-15/spares-status", "guild-15/spares-status-other"
    for c in (ch, other):
        assert s.cli("on", c).returncode == 0
    assert status(s)["spares"] == 0 and status(s, ch)["spare"] == "none"
    turn(s, ch, "cold")
    ready_spare(s, ch)
    wait_until(lambda: status(s)["spares"] == 1 or None, 30, "status to count the spare")
    assert status(s, ch)["spare"] == "ready" and status(s, other)["spare"] == "none"
    out = s.cli("status", ch)
    assert "\nspare\tready\n" in out.stdout, out.stdout
    assert "spares\t1\n" in s.cli("status").stdout
    listed = {e["channel"]: e["spare"] for e in json.loads(s.cli("channels", "--json").stdout)["channels"]}
    assert listed == {ch: "ready", other: "none"}
    # off discards the spare, and status says so.
    assert s.cli("off", ch).returncode == 0
    wait_until(lambda: status(s)["spares"] == 0 or None, 30, "status to drop the spare")
    assert status(s, ch)["spare"] == "none"
    wait_until(lambda: spares(s, ch) == [], 30, "the spare's removal")
