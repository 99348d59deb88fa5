# SPDX-License-Identifier: Apache-2.0
"""Rich mode on the host side (DESIGN.md 8.5, issue 16): statd's rich channels, runnerd's
long-lived channel containers and the CLI, with real daemons, a real dockerd, the richworker
test image and the scripted Anthropic endpoint (rich_host_rig.py).

Refusals are checked three ways: the answer (route and the rule's own detail), nothing
forwarded (the fake endpoint's record and the worker's turns stay as they were for a quiet
window) and, where a daemon decides, the log line of that rule."""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from harness import (QUIET_TURN_S, HarnessError, assert_quiet, docker, docker_inspect, unique_tag, wait_until)
from rich_host_rig import (JPEG, PNG, RichHostSuite, StandInBroker, build_richworker, channel_hash,
                           reply_report)


@pytest.fixture
def rich_suite(rts_env):
    suites = []

    def make(**kw):
        try:
            s = RichHostSuite(rts_env, **kw)
        except HarnessError as e:
            pytest.fail(f"the suite did not start: {e}", pytrace=False)
        suites.append(s)
        return s

    yield make
    for s in suites:
        s.stop()


@pytest.fixture(scope="module")
def shared(rts_env):
    """One installation with a ready rich channel "chan" for the tests that only read."""
    try:
        s = RichHostSuite(rts_env)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    p = s.rich("chan")
    assert p.returncode == 0, p.stderr
    yield s
    s.stop()


def images_file(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def turns_served(s, channel=None):
    """How many turns brokerd has handed to a worker (its log)."""
    return s.log_tail("brokerd", 10 ** 7).count("rich turn handed to the worker")


def log_has(s, name, text):
    return text in s.log_tail(name, 200000)


# ---- the channel's container ----------------------------------------------------------------

def test_rich_turn_end_to_end(shared):
    s = shared
    s.wait_container("chan")
    c = s.container("chan")
    hc = c["HostConfig"]
    # seed, "Pi isolation and continuity": no network, read-only root, no capabilities,
    # no-new-privileges, the service uid, 1.5 GiB without extra swap, one CPU, 256 PIDs, a
    # 512 MiB /tmp; only the workspace (rw) and the broker directory (ro).
    assert hc["NetworkMode"] == "none"
    assert hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"]
    assert hc["SecurityOpt"] == ["no-new-privileges"]
    assert c["Config"]["User"] == f"{s.env.uid}:{s.env.gid}"
    assert hc["Memory"] == 1536 * 1024 * 1024 and hc["MemorySwap"] == hc["Memory"]
    assert hc["NanoCpus"] == 1_000_000_000
    assert hc["PidsLimit"] == 256
    assert hc["Tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=512m"}
    assert hc["RestartPolicy"]["Name"] in ("", "no") and not hc["AutoRemove"]
    mounts = sorted((m["Source"], m["Destination"], m["RW"]) for m in c["Mounts"])
    assert mounts == sorted([(s.workspace("chan"), "/workspace", True), (s.broker_dir("chan"), "/run/broker", False)])
    assert c["Config"]["Env"][0] == "TZ=UTC"
    labels = c["Config"]["Labels"]
    assert labels["io.roundtable-sandbox.kind"] == "rich"
    assert labels["io.roundtable-sandbox.profile"] == "default"
    assert labels["io.roundtable-sandbox.channel"] == channel_hash("chan")
    assert len(labels["io.roundtable-sandbox.generation"]) == 16
    assert hc["LogConfig"]["Type"] == "json-file"
    # The broker directory: 0700, the socket 0600, both the service account's.
    st = os.lstat(s.broker_dir("chan"))
    assert (st.st_mode & 0o7777, st.st_uid) == (0o700, s.env.uid)
    st = os.lstat(os.path.join(s.broker_dir("chan"), "broker.sock"))
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, s.env.uid)

    before = len(s.anthropic.requests())
    p, rep = s.say("chan", "hello there", author="1001", name="Alice", principal="p-1001")
    assert p.returncode == 0, p.stderr + s.logs()
    assert rep["worker"] == "richworker"
    # Identity from the host's binding: the speaker as statd got it, the principal too.
    assert rep["input"]["speaker"] == {"id": "1001", "name": "Alice", "principalId": "p-1001"}
    assert rep["input"]["timeZone"] == "UTC" and rep["input"]["startFresh"] is False
    reqs = s.anthropic.requests()[before:]
    assert len(reqs) == 1
    # The container holds no credential; the upstream got the OAuth token from the host.
    assert s.oauth_token not in json.dumps(c)
    assert any(s.oauth_token in json.dumps(r) for r in reqs)


def test_status_and_channels_show_rich(shared):
    s = shared
    p = s.cli("status", "chan")
    assert p.returncode == 0, p.stderr
    lines = dict(line.split("\t", 1) for line in p.stdout.splitlines())
    assert lines["mode"] == "rich" and lines["profile"] == "default"
    # The log tag: the hash prefix, never the channel key.
    assert lines["logTag"] == "sandbox/" + channel_hash("chan")[:16]
    p = s.cli("channels")
    assert "chan\trich\tdefault\n" in p.stdout
    p = s.cli("status")
    assert "rich\t1\n" in p.stdout


def test_images_delivered(shared, tmp_path):
    s = shared
    png = images_file(tmp_path, "a.png", PNG)
    jpg = images_file(tmp_path, "b.jpg", JPEG)
    p, rep = s.say("chan", "what is in these?", images=[png, jpg])
    assert p.returncode == 0, p.stderr
    assert [i["mime"] for i in rep["input"]["images"]] == ["image/png", "image/jpeg"]
    assert rep["input"]["images"][0]["base64Chars"] == len(base64.b64encode(PNG))
    # The CLI refuses a file that is none of the four types before sending anything.
    txt = images_file(tmp_path, "c.png", b"not an image")
    p, _ = s.say("chan", "x", images=[txt])
    assert p.returncode == 2 and "not a PNG, JPEG, WebP or GIF image" in p.stderr


def test_reply_files(shared, tmp_path):
    s = shared
    out = tmp_path / "files"
    out.mkdir()
    p, rep = s.say("chan", "#rw files 2 10", files_dir=str(out))
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["file-1.txt", "file-2.txt"]
    assert os.path.getsize(out / "file-1.txt") == 10
    assert (os.stat(out / "file-1.txt").st_mode & 0o777) == 0o600
    # Never over an existing file, never through a link planted in the directory.
    (out / "file-1.txt").write_text("mine")
    victim = tmp_path / "victim"
    os.unlink(out / "file-2.txt")
    os.symlink(victim, out / "file-2.txt")
    p, _ = s.say("chan", "#rw files 2 10", files_dir=str(out))
    assert p.returncode == 1
    assert "cannot create file-1.txt" in p.stderr and "cannot create file-2.txt" in p.stderr
    assert (out / "file-1.txt").read_text() == "mine"
    assert not victim.exists()
    # A name with a path in it stays in the directory (statd refuses it before: the reply
    # is checked again on the host; here the worker's name is made safe by brokerd).
    out2 = tmp_path / "files2"
    out2.mkdir()
    p, _ = s.say("chan", "#rw file-name ..%2F..%2Fescape.txt", files_dir=str(out2))
    assert p.returncode == 0, p.stderr
    assert len(os.listdir(out2)) == 1 and not os.path.exists(tmp_path / "escape.txt")
    # Without --files-dir the files are only counted.
    p, _ = s.say("chan", "#rw files 1 3")
    assert p.returncode == 0 and "carries 1 file(s)" in p.stderr


# ---- lifecycle ------------------------------------------------------------------------------

def test_fresh_archives_sessions(rich_suite):
    s = rich_suite()
    s.rich("chan")
    # Pi keeps its sessions there (the worker makes the directory; richworker does not).
    sessions = os.path.join(s.workspace("chan"), "sessions")
    os.mkdir(sessions, 0o700)
    os.chown(sessions, s.env.uid, s.env.gid)
    p, _ = s.say("chan", "#rw write-file /workspace/sessions/2026-a.jsonl {} #rw write-file /workspace/sessions/notes.txt x")
    assert p.returncode == 0, p.stderr
    first = s.container_id("chan")
    p = s.cli("fresh", "chan")
    assert p.returncode == 0, p.stderr + s.logs()
    # Answered only after the container was removed and the sessions moved.
    assert s.container_id("chan") is None
    ws = s.workspace("chan")
    assert os.listdir(os.path.join(ws, "sessions", "archive")) == ["2026-a.jsonl"]
    assert sorted(os.listdir(os.path.join(ws, "sessions"))) == ["archive", "notes.txt"]
    p, rep = s.say("chan", "again")
    assert p.returncode == 0, p.stderr
    assert rep["input"]["startFresh"] is True
    assert s.container_id("chan") not in (None, first)
    p, rep = s.say("chan", "and again")
    assert rep["input"]["startFresh"] is False


@pytest.mark.parametrize("place", ["sessions", "sessions/archive", "attachments"])
def test_fresh_replaces_planted_links(rich_suite, place, tmp_path):
    s = rich_suite()
    s.rich("chan")
    p, _ = s.say("chan", "hi")
    assert p.returncode == 0
    outside = tempfile.mkdtemp(prefix="rts-outside-", dir="/tmp")
    try:
        with open(os.path.join(outside, "x.jsonl"), "w") as f:
            f.write("outside\n")
        ws = s.workspace("chan")
        # As the guest would: the container runs as the service account.
        if not os.path.isdir(os.path.join(ws, "sessions")):
            os.mkdir(os.path.join(ws, "sessions"), 0o700)
            os.chown(os.path.join(ws, "sessions"), s.env.uid, s.env.gid)
        if place == "sessions/archive":
            with open(os.path.join(ws, "sessions", "s.jsonl"), "w") as f:
                f.write("{}\n")
        link = os.path.join(ws, place)
        if os.path.isdir(link) and not os.path.islink(link):
            shutil.rmtree(link)
        os.symlink(outside, link)
        p = s.cli("fresh", "chan")
        assert p.returncode == 0, p.stderr + s.logs()
        assert os.path.isdir(link) and not os.path.islink(link)
        assert os.listdir(outside) == ["x.jsonl"]
        if place == "sessions/archive":
            assert os.listdir(link) == ["s.jsonl"]
    finally:
        shutil.rmtree(outside)


def test_channel_key_mismatch_refused(rich_suite):
    s = rich_suite()
    s.rich("chan")
    p, _ = s.say("chan", "hi")
    assert p.returncode == 0
    with open(s.channel_key_file("chan")) as f:
        assert f.read() == "chan"
    # Another channel's key under this workspace's name (a collision): every rich operation
    # of the channel is refused, with that rule's line.
    os.chmod(s.channel_key_file("chan"), 0o600)
    with open(s.channel_key_file("chan"), "w") as f:
        f.write("another channel")
    before = len(s.anthropic.requests())
    p, _ = s.say("chan", "hi again")
    assert p.returncode == 1 and "turn_failed" in p.stderr
    assert log_has(s, "statd", "names another channel key")
    p = s.cli("fresh", "chan")
    assert p.returncode == 1 and "unavailable" in p.stderr
    assert_quiet(lambda: len(s.anthropic.requests()) - before, QUIET_TURN_S, "model requests")


def test_off_profile_config_and_image_change_stop_the_container(rich_suite, rts_env):
    # The rich image under a tag of this test's own, which is moved to another image later.
    binary = os.path.join(rts_env.builddir, "tests", "images", "richworker")
    tag_a = build_richworker(rts_env, binary, label="a")
    tag_b = build_richworker(rts_env, binary, label="b")
    tag = unique_tag("richimage")
    rts_env._built_tags.append(tag)
    docker("tag", tag_a, tag)
    s = rich_suite(image=tag)
    s.rich("chan")
    p, _ = s.say("chan", "one")
    assert p.returncode == 0, p.stderr
    first = s.container_id("chan")
    # off: stopped.
    assert s.cli("off", "chan").returncode == 0
    s.wait_container("chan", present=False)
    wait_until(lambda: not os.path.exists(s.broker_dir("chan")), 30, "the broker directory to go")
    # rich with a profile, then another profile: replaced (its label says which).
    s.rich("chan", "default")
    s.wait_container("chan")
    second = s.container_id("chan")
    assert second != first
    assert s.rich("chan", "other").returncode == 0
    wait_until(lambda: (s.container("chan") or {}).get("Config", {}).get("Labels", {}).get(
        "io.roundtable-sandbox.profile") == "other", 60, "the container of profile other")
    third = s.container_id("chan")
    p, _ = s.say("chan", "two")
    assert p.returncode == 0, p.stderr
    assert s.container_id("chan") == third
    # A config change (seen at the next start): replaced at statd's sync after HELLO.
    s.rewrite_config(rich={"limits": {"pids": 200}})
    s.restart()
    wait_until(lambda: (s.container("chan") or {}).get("HostConfig", {}).get("PidsLimit") == 200, 60,
               "the container of the new config")
    fourth = s.container_id("chan")
    assert fourth != third
    # The image rebuilt under the same tag: the next turn gets a new container.
    docker("tag", tag_b, tag)
    p, _ = s.say("chan", "three")
    assert p.returncode == 0, p.stderr
    c = s.container("chan")
    assert c["Id"] != fourth and c["Image"] == docker_inspect(tag_b)["Id"]
    assert log_has(s, "runnerd", "the profile, the rich config or the image changed")


def test_cancel_force_removes_the_container(rich_suite):
    s = rich_suite()
    s.rich("chan")
    assert s.say("chan", "warm up")[0].returncode == 0
    first = s.container_id("chan")
    result = {}
    t = threading.Thread(target=lambda: result.update(p=s.say("chan", "#rw sleep 60000")[0]))
    t.start()
    wait_until(lambda: json.loads(s.cli("status", "--json", "chan").stdout)["running"], 30, "the turn to run")
    wait_until(lambda: turns_served(s) == 2, 30, "the worker to get the turn")
    p = s.cli("cancel", "chan")
    assert p.returncode == 0 and p.stdout == "chan\tcancelled\t1\n", p.stderr
    t.join(60)
    assert result["p"].returncode == 1 and "turn_cancelled" in result["p"].stderr
    # The exact container was force-removed (not just stopped); the next turn gets a new one.
    assert s.container("chan") is None
    assert log_has(s, "runnerd", f"removing its container {s.container_name('chan')} (its turn was cancelled)")
    p, _ = s.say("chan", "after")
    assert p.returncode == 0, p.stderr
    assert s.container_id("chan") not in (None, first)


@pytest.mark.parametrize("which", [("statd", "runnerd", "brokerd"), ("runnerd",), ("brokerd",), ("statd",)])
def test_daemon_restart_keeps_the_container(rich_suite, which):
    s = rich_suite()
    s.rich("chan")
    assert s.say("chan", "before")[0].returncode == 0
    first = s.container_id("chan")
    announced = len(s.announcements("chan"))
    s.restart(which)
    if "runnerd" in which:
        # statd's sync after HELLO adopts it at once: a new broker socket in the same
        # directory, to which the worker announces itself again.
        wait_until(lambda: len(s.announcements("chan")) > announced, 60, "the worker to re-announce itself")
    p, rep = s.say("chan", "after the restart")
    assert p.returncode == 0, p.stderr + s.logs()
    assert s.container_id("chan") == first
    if "brokerd" in which:
        # brokerd alone: bound again by the turn's RICH_ENSURE, announced again before it ran.
        assert len(s.announcements("chan")) > announced


def test_queued_work_resumes_after_a_runnerd_restart(rich_suite):
    s = rich_suite()
    s.rich("chan")
    assert s.say("chan", "before")[0].returncode == 0
    first = s.container_id("chan")
    s.stop_daemon("runnerd")
    # statd comes back to runnerd on its own (rich mode reconnects) and resyncs.
    s.start_daemon("runnerd")
    s._wait_ready()
    wait_until(lambda: log_has(s, "runnerd", "statd synced 1 rich channel(s)") and
               s.log_tail("runnerd", 200000).count("runnerd.sock: roundtable-sandbox-statd connected") >= 2, 60,
               "statd to sync with the new runnerd")
    p, _ = s.say("chan", "after")
    assert p.returncode == 0, p.stderr + s.logs()
    assert s.container_id("chan") == first


def test_runnerd_restart_with_a_new_run_root_replaces_the_container(rich_suite):
    """systemd empties a RuntimeDirectory= it does not preserve: the container's
    /run/broker is then bound to a directory nothing reaches, so runnerd replaces it
    instead of adopting it, and the next turn still works."""
    s = rich_suite()
    s.rich("chan")
    assert s.say("chan", "before")[0].returncode == 0
    first = s.container_id("chan")
    s.stop_daemon("runnerd")
    shutil.rmtree(s.broker_dir("chan"))
    s.start_daemon("runnerd")
    s._wait_ready()
    wait_until(lambda: log_has(s, "runnerd", "its broker directory gone"), 30, "runnerd to notice the lost directory")
    p, _ = s.say("chan", "after")
    assert p.returncode == 0, p.stderr + s.logs()
    assert s.container_id("chan") not in (None, first)
    assert log_has(s, "runnerd", "lost its broker directory (runRoot was made anew): replacing it")


def test_sync_removes_channels_no_longer_rich(rich_suite):
    s = rich_suite()
    s.rich("keep")
    s.rich("gone")
    s.wait_container("keep")
    s.wait_container("gone")
    keep = s.container_id("keep")
    s.stop_daemon("statd")
    with open(s.state_file) as f:
        state = json.load(f)
    state["channels"]["gone"] = {"mode": "off"}
    with open(s.state_file, "w") as f:
        json.dump(state, f)
    s.start_daemon("statd")
    s._wait_ready()
    s.wait_container("gone", present=False)
    assert s.container_id("keep") == keep
    assert log_has(s, "runnerd", "not among statd's rich channels")


def test_timed_out_worker_log_lines(rich_suite):
    s = rich_suite(rich={"turnTimeoutMs": 5000})
    s.rich("chan")
    p, _ = s.say("chan", "#rw log 300 #rw hang")
    assert p.returncode == 1 and "turn_timeout" in p.stderr, p.stderr
    log = s.log_tail("runnerd", 1000000)
    # The last 200 of the worker's lines (its numbered ones and what it logged after them),
    # one log record each; the early ones are not there.
    assert log.count("worker log: ") == 200
    assert '"line":300,"of":300' in log and '"line":150,"of":300' in log
    assert '"line":50,"of":300' not in log
    assert "200 worker log line(s) above (docker logs --tail 200" in log
    s.wait_container("chan", present=False)


def test_start_timeout_logs_and_fails(rich_suite):
    s = rich_suite(rich={"startTimeoutMs": 3000})
    from rich_host_rig import channel_hash as ch  # noqa: F401
    ws = s.workspace("chan")
    os.mkdir(ws, 0o700)
    os.chown(ws, s.env.uid, s.env.gid)
    with open(os.path.join(ws, ".richworker.json"), "w") as f:
        json.dump({"ready": "never"}, f)
    os.chown(os.path.join(ws, ".richworker.json"), s.env.uid, s.env.gid)
    s.rich("chan")
    p, _ = s.say("chan", "hi")
    assert p.returncode == 1 and "turn_failed" in p.stderr, p.stderr
    assert log_has(s, "runnerd", "did not announce itself within rich.startTimeoutMs")
    assert log_has(s, "runnerd", "worker log line(s) above")
    s.wait_container("chan", present=False)


# ---- routing and bounds ---------------------------------------------------------------------

def test_routing_fails_closed_for_rich_channels(shared):
    s = shared
    s.wait_container("chan")
    before = len(s.anthropic.requests())
    cases = [
        (dict(text=7), "drop", "invalid_request"),
        (dict(author={"id": "1", "name": "Bot", "principalId": "1", "tier": "member", "bot": True,
                      "integration": False}), "drop", None),
        (dict(author={"id": "1", "name": "A", "principalId": None, "tier": "member", "bot": False,
                      "integration": False}), "drop", None),
        (dict(addressed=False), "drop", None),
        (dict(guild=False), "drop", None),
        (dict(extra=1), "drop", "invalid_request"),
    ]
    for extra, route, error in cases:
        a = s.control(s.message("chan", **extra))[0]
        assert a["route"] == route and a.get("error") == error, (extra, a)
    assert_quiet(lambda: len(s.anthropic.requests()) - before, QUIET_TURN_S, "model requests")


def test_rich_mode_refusals(rich_suite):
    s = rich_suite()
    p = s.rich("chan", "nosuch")
    assert p.returncode == 1 and "unknown_profile" in p.stderr
    a = s.control({"op": "mode", "channel": "chan", "mode": "rich"})[0]
    assert a["error"] == "invalid_request" and "profile is required" in a["detail"]
    # Nothing recorded: the channel is still off.
    assert s.control(s.message("chan"))[0]["route"] == "pass"
    # A state file naming a profile the config no longer has: dropped, never passed.
    s.rich("chan")
    s.stop_daemon("statd")
    with open(s.state_file) as f:
        state = json.load(f)
    state["channels"]["chan"] = {"mode": "rich", "profile": "retired"}
    with open(s.state_file, "w") as f:
        json.dump(state, f)
    s.start_daemon("statd")
    s._wait_ready()
    a = s.control(s.message("chan"))[0]
    assert a == {"id": a["id"], "route": "drop", "error": "unknown_profile"}
    assert log_has(s, "statd", "its rich profile retired is not in the config")


def test_rich_mode_without_rich_config(make_suite):
    s = make_suite()
    p = s.cli("rich", "chan", "default")
    assert p.returncode == 1 and "rich_unavailable" in p.stderr
    assert s.control(s.message("chan") if hasattr(s, "message") else {
        "op": "message", "channel": "chan", "guild": True, "addressed": True, "text": "x",
        "author": {"id": "1", "name": "A", "principalId": "1", "tier": "m", "bot": False, "integration": False},
    })[0]["route"] == "pass"


def big_b64(head, size):
    return base64.b64encode(head + b"\0" * (size - len(head))).decode()


def bound_cases():
    png = base64.b64encode(PNG).decode()
    M = 1024 * 1024
    return [
        ("nine images", dict(images=[{"mime": "image/png", "data": png}] * 9), "images must list at most 8 images",
         dict(images=[{"mime": "image/png", "data": png}] * 8)),
        ("an image of 20 MiB + 1", dict(images=[{"mime": "image/png", "data": big_b64(PNG, 20 * M + 1)}]),
         "images[0].data must decode to at most 20971520 bytes",
         dict(images=[{"mime": "image/png", "data": big_b64(PNG, 20 * M)}])),
        ("64 MiB + 1 of images", dict(images=[{"mime": "image/png", "data": big_b64(PNG, 16 * M)}] * 3 +
                                      [{"mime": "image/png", "data": big_b64(PNG, 16 * M + 1)}]),
         "images must decode to at most 67108864 bytes in all", None),
        ("a JPEG called PNG", dict(images=[{"mime": "image/png", "data": base64.b64encode(JPEG).decode()}]),
         "images[0].data does not start with the signature", None),
        ("eleven attachments", dict(attachments=[{"url": "https://x.example/a"}] * 11),
         "attachments must list at most 10 attachments", None),
        ("an ftp attachment", dict(attachments=[{"url": "ftp://x.example/a"}]),
         "attachments[0].url must be an http:// or https:// URL", None),
        ("100,001 characters", dict(text="é" * 100001), "text is longer than 100000 characters",
         dict(text="é" * 100000)),
        ("an author id of 257 bytes", dict(author={"id": "1" * 257, "name": "A", "principalId": "p", "tier": "m",
                                                   "bot": False, "integration": False}), "author.id", None),
        ("an author name of 257 bytes", dict(author={"id": "1", "name": "n" * 257, "principalId": "p", "tier": "m",
                                                     "bot": False, "integration": False}), "author.name", None),
    ]


def test_each_bound_with_its_bad_input(shared):
    s = shared
    s.wait_container("chan")
    before = len(s.anthropic.requests())
    served = turns_served(s, "chan")
    for label, extra, detail, control in bound_cases():
        a = s.control(s.message("chan", **extra))[0]
        assert a["route"] == "drop", (label, a)
        assert a["error"] in ("invalid_request", "text_too_long"), (label, a)
        assert detail in a.get("detail", ""), (label, a)
        if control:
            # The same message at the bound goes through: it was that rule.
            a = s.control(s.message("chan", **dict(control, text=control.get("text", "#rw no-model"))))
            assert a[0]["route"] == "sandbox" and a[1]["event"] == "reply", (label, a[1:])
            served += 1
    assert_quiet(lambda: (turns_served(s, "chan") - served), QUIET_TURN_S, "turns handed to the worker")


def test_sealed_channel_keeps_its_own_text_bound(make_suite):
    s = make_suite()
    s.cli("on", "sealed")
    a = s.control({"op": "message", "channel": "sealed", "guild": True, "addressed": True, "text": "x" * 65537,
                   "author": {"id": "1", "name": "A", "principalId": "1", "tier": "m", "bot": False,
                              "integration": False}})[0]
    assert a["route"] == "drop" and a["error"] == "text_too_long" and "65536 bytes" in a["detail"]


# ---- attachments ----------------------------------------------------------------------------

def test_attachment_refused_by_the_controlled_fetch(shared):
    """The real fetch in the real brokerd: a URL on this machine is refused before any
    connection (common/fetch.h), so the turn ends with that rule's error and nothing is
    written or forwarded."""
    s = shared
    s.wait_container("chan")
    before = len(s.anthropic.requests())
    served = turns_served(s, "chan")
    p, _ = s.say("chan", "look", urls=[f"https://127.0.0.1:{s.anthropic.port}/v1/messages"])
    assert p.returncode == 1 and "attachment_refused" in p.stderr, p.stderr
    assert log_has(s, "statd", "attachment 0 not fetched: attachment_refused")
    assert not os.listdir(os.path.join(s.workspace("chan"), "attachments")) if os.path.isdir(
        os.path.join(s.workspace("chan"), "attachments")) else True
    assert_quiet(lambda: (len(s.anthropic.requests()) - before, turns_served(s, "chan") - served), QUIET_TURN_S,
                 "model requests and turns")


def test_attachments_fetched_and_stored(rich_suite, tmp_path):
    """statd and runnerd with a stand-in for brokerd (the controlled fetch's success needs a
    public address, which the integration tests never reach; the real fetch is the test
    above and tests/unit/check_fetch.c): what the fetch answers is written into the
    workspace by statd, the turn input names it, the reply's files reach --files-dir."""
    s = rich_suite(daemons=("runnerd", "statd"))
    pdf = b"%PDF-1.7 " + os.urandom(1000)
    big = os.urandom(25 * 1024 * 1024)
    files = {"https://cdn.example/doc.pdf": (pdf, "application/pdf"),
             "https://cdn.example/blob": (big, "application/octet-stream; x=1"),
             "https://cdn.example/mid": (os.urandom(20 * 1024 * 1024), "application/octet-stream"),
             "https://cdn.example/six": (os.urandom(6 * 1024 * 1024), "application/octet-stream"),
             "https://cdn.example/refused": -13}
    reply = {"text": "here", "files": [{"name": "out.txt", "mime": "text/plain",
                                        "data": base64.b64encode(b"result").decode()}]}
    broker = StandInBroker(os.path.join(s.dirs["rt"], "brokerd.sock"), s.env.uid, s.env.gid, files=files, reply=lambda inp: reply)
    try:
        # A link planted at attachments is replaced, not followed.
        outside = tempfile.mkdtemp(prefix="rts-outside-", dir="/tmp")
        ws = s.workspace("chan")
        s.rich("chan")
        wait_until(lambda: os.path.isdir(ws), 30, "the workspace")
        os.symlink(outside, os.path.join(ws, "attachments"))
        out = tmp_path / "out"
        out.mkdir()
        p, _ = s.say("chan", "read these", urls=["https://cdn.example/doc.pdf", "https://cdn.example/blob"],
                     files_dir=str(out))
        assert p.returncode == 0, p.stderr + s.logs()
        assert p.stdout == "here\n"
        assert (out / "out.txt").read_bytes() == b"result"
        inp = broker.inputs[-1]
        att = inp["attachments"]
        tid = inp["turnId"]
        assert [a["name"] for a in att] == ["doc.pdf", "blob"]
        assert att[0] == {"name": "doc.pdf", "path": f"/workspace/attachments/{tid}/0-doc.pdf",
                          "mime": "application/pdf", "bytes": len(pdf)}
        assert att[1]["mime"] == "application/octet-stream" and att[1]["bytes"] == len(big)
        adir = os.path.join(ws, "attachments", tid)
        assert not os.path.islink(os.path.join(ws, "attachments"))
        with open(os.path.join(adir, "0-doc.pdf"), "rb") as f:
            assert f.read() == pdf
        assert os.listdir(outside) == []
        # The second fetch may bring what is left of 50 MiB, at most 25 MiB.
        assert [f["max_bytes"] for f in broker.fetches] == [25 * 1024 * 1024, 25 * 1024 * 1024]
        # A refusal of the fetch ends the turn with that rule's error; nothing goes to the
        # broker as a turn.
        n = len(broker.inputs)
        p, _ = s.say("chan", "and this", urls=["https://cdn.example/doc.pdf", "https://cdn.example/refused"])
        assert p.returncode == 1 and "attachment_refused" in p.stderr
        assert len(broker.inputs) == n
        # 50 MiB in all: each fetch may bring what is left (25 + 20 MiB fetched: 5 MiB for the
        # third); more than that is refused before it is written...
        m = len(broker.fetches)
        p, _ = s.say("chan", "too much", urls=["https://cdn.example/blob", "https://cdn.example/mid",
                                               "https://cdn.example/six"])
        assert p.returncode == 1 and "attachment_too_large" in p.stderr, p.stderr
        assert [f["max_bytes"] for f in broker.fetches[m:]] == [25 * 1024 * 1024, 25 * 1024 * 1024, 5 * 1024 * 1024]
        assert log_has(s, "statd", "attachment 2 not stored: the attachment is larger than its bound")
        # ...and once nothing is left, the next one is not even fetched.
        m = len(broker.fetches)
        p, _ = s.say("chan", "full", urls=["https://cdn.example/blob", "https://cdn.example/blob",
                                           "https://cdn.example/doc.pdf"])
        assert p.returncode == 1 and "attachment_too_large" in p.stderr, p.stderr
        assert len(broker.fetches) == m + 2
        assert len(broker.inputs) == n
        # The same three within the total go through: it was the bound.
        p, _ = s.say("chan", "fits", urls=["https://cdn.example/blob", "https://cdn.example/mid",
                                           "https://cdn.example/doc.pdf"])
        assert p.returncode == 0, p.stderr
        shutil.rmtree(outside)
    finally:
        broker.stop()


def test_big_images_travel_in_a_memfd(rich_suite):
    """64 MiB of images, the most a message may carry, through statd and runnerd to brokerd's
    end (a stand-in here): the input it reads holds them as sent."""
    s = rich_suite(daemons=("runnerd", "statd"))
    broker = StandInBroker(os.path.join(s.dirs["rt"], "brokerd.sock"), s.env.uid, s.env.gid)
    try:
        s.rich("chan")
        M = 1024 * 1024
        imgs = [{"mime": "image/png", "data": big_b64(PNG, 16 * M)} for _ in range(4)]
        a = s.control(s.message("chan", images=imgs), timeout=300)
        assert a[0]["route"] == "sandbox" and a[1]["event"] == "reply", a
        inp = broker.inputs[-1]
        assert [i["data"] for i in inp["images"]] == [i["data"] for i in imgs]
    finally:
        broker.stop()


# ---- doctor ---------------------------------------------------------------------------------

def test_doctor_checks_rich(rich_suite):
    s = rich_suite(rich={"effort": {"default": "medium", "judge": {"command": ["/nonexistent/judge"]}}})
    p = s.cli("doctor")
    out = p.stdout
    assert "ok: rich image: " + s.rich_image in out, out
    assert "ok: rich log: rich containers log to the json-file driver" in out
    assert "FAIL: rich.effort.judge: /nonexistent/judge" in out
    assert "ok: rich path lengths" in out and "ok: rich.oauthToken" in out
    # journald needs dockerd under systemd: doctor says so where it is not.
    s.rewrite_config(rich={"log": {"driver": "journald"}, "effort": {"default": "medium"}})
    p = s.cli("doctor")
    with open("/proc/1/comm") as f:
        under_systemd = f.read().strip() == "systemd" and os.path.exists("/run/systemd/journal/socket")
    if under_systemd:
        assert "ok: rich log: journald" in p.stdout, p.stdout
    else:
        assert "FAIL: rich log: rich.log.driver is journald" in p.stdout, p.stdout
        assert "dockerd must run under systemd with journald" in p.stdout
    # A missing rich image fails.
    s.rewrite_config(rich={"image": "roundtable-sandbox:no-such-rich-image"})
    p = s.cli("doctor")
    assert "FAIL: rich image: roundtable-sandbox:no-such-rich-image is not in the local image store" in p.stdout


# ---- long control lines -----------------------------------------------------------------------

def test_long_lines_share_a_budget(make_suite):
    """Lines above 512 KiB (rich messages) share 192 MiB in statd: a line that would pass it
    is skipped and answered busy (route drop); once the others are read, it goes."""
    s = make_suite(daemons=("statd",))
    conns = [s.connect(timeout=120) for _ in range(3)]
    try:
        part = b'{"op": "channels", "id": "big", "pad": "' + b"p" * (70 * 1024 * 1024)
        # sendall returns once statd took all but a socket buffer's worth: both lines are
        # in its buffers (96 MiB each once past 64 MiB) before the third comes.
        conns[0].send_raw(part)
        conns[1].send_raw(part)
        third = json.dumps({"op": "channels", "id": "third", "pad": "q" * (1024 * 1024)}).encode() + b"\n"
        conns[2].send_raw(third)
        a = conns[2].recv()
        assert a["route"] == "drop" and a["error"] == "busy" and "long requests" in a["detail"], a
        assert log_has(s, "statd", "a long request line does not fit")
        conns[0].send_raw(b'"}\n')
        assert conns[0].recv()["detail"] == "unknown field for this op"
        conns[2].send_raw(third)
        assert conns[2].recv()["detail"] == "unknown field for this op"
    finally:
        for c in conns:
            c.close()
