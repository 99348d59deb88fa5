# SPDX-License-Identifier: Apache-2.0
"""The walking skeleton end to end: real daemons as the service account, the real dockerd,
the real worker image, and the scripted HTTPS model endpoint."""
import json
import os
import threading
import time

import pytest

from harness import LABEL_INSTALLATION, docker
from lifecycle_helpers import wait_for_container


def say(suite, channel, text, author="1001", name="Alice"):
    return suite.cli("say", channel, "--author", author, "--name", name, text)


def started_containers(suite, since):
    """Names of this installation's containers that started since the unix time `since`."""
    out = docker("events", "--since", str(int(since) - 1), "--until", str(int(time.time()) + 1),
                 "--filter", f"label={LABEL_INSTALLATION}={suite.installation}", "--filter", "event=start",
                 "--format", "{{.Actor.Attributes.name}}", timeout=60)
    return [line for line in out.stdout.split() if line]


def test_second_turn_in_new_container_recalls_memory(suite):
    channel = "guild-1/channel-memory"
    t0 = time.time()
    assert suite.cli("on", channel).returncode == 0

    first = say(suite, channel, "remember that the blue key opens the shed")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "I will remember that."
    assert suite.containers() == []
    assert os.listdir(suite.dirs["run"]) == []

    second = say(suite, channel, "what do you remember?")
    assert second.returncode == 0, second.stderr
    assert "the blue key opens the shed" in second.stdout

    # Two turns, two distinct containers, both gone; no run dir or socket left.
    names = started_containers(suite, t0)
    assert len(names) == 2 and names[0] != names[1], names
    assert all(n.startswith(f"roundtable-sandbox-{suite.installation}-") for n in names)
    assert suite.containers() == []
    assert os.listdir(suite.dirs["run"]) == []

    # The memory lives in the channel's own workspace, written by the container's uid. The
    # workspace is statd's; in accounts mode shared with the guest (sticky, ACL mask rwx).
    ws = suite.workspace(channel)
    st = os.lstat(ws)
    assert (st.st_uid, st.st_mode & 0o7777) == (suite.env.uid, 0o1770 if suite.accounts else 0o700)
    memory = os.path.join(ws, ".sandbox", "memory.json")
    assert os.lstat(memory).st_uid == suite.guest.uid
    with open(memory, encoding="utf-8") as f:
        assert "the blue key opens the shed" in f.read()


def test_only_the_upstream_sees_the_real_key(suite):
    channel = "guild-1/channel-keys"
    assert suite.cli("on", channel).returncode == 0
    before = len(suite.fake.requests())

    # Keep a turn waiting on the model so its container can be inspected while it runs.
    result = {}

    def run():
        result["p"] = say(suite, channel, "#sleep 3000 hello")

    t = threading.Thread(target=run)
    t.start()
    name = wait_for_container(suite)
    inspect = json.dumps(suite.docker_inspect(name))
    t.join(120)
    assert result["p"].returncode == 0, result["p"].stderr
    assert result["p"].stdout.startswith("echo:")

    assert say(suite, channel, "remember that keys stay home").returncode == 0

    reqs = suite.fake.requests()[before:]
    assert len(reqs) >= 3
    for r in reqs:
        assert r["headers"].get("authorization") == f"Bearer {suite.api_key}"
        assert r["body"]["model"] == "fake-model"
        assert r["body"]["stream"] is False
        body = json.dumps(r["body"])
        assert "roundtable-sandbox-dummy-key" not in body
        assert suite.api_key not in body
    # The container never held the key: not in its configuration, environment or command.
    assert suite.api_key not in inspect
    assert "sk-test-" not in inspect
    # Nor did anything the worker could write, nor the daemons' logs.
    for root, _dirs, files in os.walk(suite.workspace(channel)):
        for fn in files:
            with open(os.path.join(root, fn), "rb") as f:
                assert suite.api_key.encode() not in f.read()
    for d in ("statd", "runnerd", "brokerd"):
        assert suite.api_key not in suite.log_tail(d, limit=10**7)


def test_turn_container_is_hardened(suite):
    channel = "guild-1/channel-inspect"
    assert suite.cli("on", channel).returncode == 0
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("p", say(suite, channel, "#sleep 3000 inspect me")))
    t.start()
    name = wait_for_container(suite)
    info = suite.docker_inspect(name)
    t.join(120)
    assert result["p"].returncode == 0, result["p"].stderr

    hc, cfg = info["HostConfig"], info["Config"]
    assert hc["NetworkMode"] == "none"
    assert hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"] and not hc.get("CapAdd")
    assert "no-new-privileges" in hc["SecurityOpt"]
    assert hc["Privileged"] is False
    assert cfg["User"] == f"{suite.guest.uid}:{suite.guest.gid}"
    assert hc["Memory"] == 512 * 1024 * 1024
    assert hc["MemorySwap"] == 512 * 1024 * 1024
    assert hc["NanoCpus"] == 1_000_000_000
    assert hc["PidsLimit"] == 64
    assert hc["Tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=16m"}
    assert hc["LogConfig"]["Type"] == "none"
    assert hc["AutoRemove"] is True
    assert cfg["Image"] == suite.env.image
    assert cfg["Labels"][LABEL_INSTALLATION] == suite.installation
    assert cfg["Labels"]["io.roundtable-sandbox.channel"] == os.path.basename(suite.workspace(channel))
    assert cfg["AttachStderr"] is False
    mounts = sorted(info["Mounts"], key=lambda m: m["Destination"])
    assert [(m["Type"], m["Destination"], m["RW"]) for m in mounts] == [
        ("bind", "/run/broker", False), ("bind", "/workspace", True)]
    assert mounts[1]["Source"] == suite.workspace(channel)
    assert os.path.dirname(mounts[0]["Source"]) == suite.dirs["run"]
    # Nothing from the host environment: only what the image itself declares.
    assert [e for e in cfg["Env"] if not e.startswith("PATH=")] == []


def test_container_from_the_inside(make_suite, rts_env):
    """A test-only payload in place of the worker reports what the container really got."""
    s = make_suite(config={"image": rts_env.probe_image()})
    channel = "guild-1/probe"
    assert s.cli("on", channel).returncode == 0
    p = say(s, channel, "report please", author="2002", name="Bob")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)

    status = dict(line.split(":\t", 1) for line in r["status"].splitlines() if ":\t" in line)
    assert status["Uid"].split()[:2] == [str(s.guest.uid)] * 2
    assert status["Gid"].split()[:2] == [str(s.guest.gid)] * 2
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0 and int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"].strip() == "1"

    # Read-only root, writable workspace, read-only broker dir.
    assert r["write_root"] == "ERR 30"  # EROFS
    assert r["write_workspace"] == "ok"
    assert r["write_broker_dir"] == "ERR 30"
    # No network but loopback; the broker socket is reachable.
    ifaces = [line.split(":")[0].strip() for line in r["netdev"].splitlines()[2:]]
    assert ifaces == ["lo"]
    assert r["connect_internet"].startswith("ERR")
    assert r["connect_broker"] == "ok"
    # cgroup limits (v1 on this kind of host; v2 paths are reported when present).
    if not r["cgroup_memory"].startswith("ERR"):
        assert int(r["cgroup_memory"]) == 512 * 1024 * 1024
        assert int(r["cgroup_pids"]) == 64
        assert int(r["cgroup_cpu_quota"]) > 0
    else:
        assert int(r["cgroup_v2_memory"]) == 512 * 1024 * 1024
        assert int(r["cgroup_v2_pids"]) == 64
    # The worker input: the speaker but never the principal, no key, no host paths.
    inp = json.loads(r["input"])
    assert inp["v"] == 1
    assert inp["speaker"] == {"id": "2002", "name": "Bob"}
    assert inp["text"] == "report please"
    assert s.api_key not in r["input"]
    assert "principal" not in r["input"].lower()
    assert s.dirs["ws"] not in r["input"] and s.dirs["run"] not in r["input"]
    env = [e for e in r["environ"].split("\0") if e]
    assert [e for e in env if not e.startswith(("PATH=", "HOSTNAME=", "HOME="))] == []


def test_routes_pass_and_drop(suite):
    channel = "guild-1/channel-routes"
    before = len(suite.fake.requests())
    author = {"id": "1", "name": "A", "principalId": "p1", "tier": "member", "bot": False, "integration": False}
    msg = {"op": "message", "channel": channel, "guild": True, "author": author, "addressed": True,
           "text": "hi", "attachments": 0}

    # Not sandboxed: pass, whatever the message.
    assert suite.control(msg)[0]["route"] == "pass"
    p = say(suite, channel, "hello")
    assert p.returncode == 3 and "pass" in p.stderr

    assert suite.cli("on", channel).returncode == 0
    # Sandboxed: every ineligible message is dropped, never handed back for a host agent.
    for change in ({"guild": False}, {"addressed": False}, {"author": None},
                   {"author": dict(author, bot=True)}, {"author": dict(author, integration=True)},
                   {"author": dict(author, tier=None)}):
        answers = suite.control(dict(msg, **change))
        assert answers == [{"id": answers[0]["id"], "route": "drop"}], change
    suite.assert_no_turn(before, "passed and dropped messages")  # nothing reached the model

    # An eligible one runs in the sandbox.
    answers = suite.control(msg)
    assert answers[0]["route"] == "sandbox"
    assert answers[1]["event"] == "reply"
    assert answers[1]["text"].startswith("echo: ") and answers[1]["text"].endswith("\nhi")

    # Off again: pass, and the workspace is kept.
    assert suite.cli("off", channel).returncode == 0
    assert suite.control(msg)[0]["route"] == "pass"
    assert os.path.isdir(suite.workspace(channel))


def test_mode_survives_restart_and_state_file_shape(make_suite):
    s = make_suite(config={"initialChannels": ["seeded"]})
    assert s.cli("on", "a/1").returncode == 0
    assert s.cli("off", "b/2").returncode == 0
    with open(s.state_file, encoding="utf-8") as f:
        state = json.load(f)
    assert state == {"version": 1, "channels": {"seeded": {"mode": "on"}, "a/1": {"mode": "on"},
                                                "b/2": {"mode": "off"}}}
    st = os.stat(s.state_file)
    assert st.st_uid == s.env.uid and st.st_mode & 0o077 == 0

    s.stop_daemon("statd")
    s.start_daemon("statd")
    s._wait_ready()
    out = s.cli("channels")
    assert out.returncode == 0
    assert "a/1\ton" in out.stdout and "b/2\toff" in out.stdout and "seeded\ton" in out.stdout


@pytest.mark.parametrize("bad", ["{\"version\":1,\"channels\":", "[]", "{\"version\":2,\"channels\":{}}"])
def test_corrupt_state_file_stops_statd_and_is_kept(make_suite, bad):
    s = make_suite()
    s.stop_daemon("statd")
    with open(s.state_file, "w", encoding="utf-8") as f:
        f.write(bad)
    s.start_daemon("statd")
    p = s.procs["statd"]
    p.wait(30)
    assert p.returncode != 0
    assert s.state_file in s.log_tail("statd")
    with open(s.state_file, encoding="utf-8") as f:
        assert f.read() == bad
