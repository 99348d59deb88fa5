# SPDX-License-Identifier: Apache-2.0
"""runnerd's start-up clean-up keeps the evidence (seed "Threat model": after a host crash,
inspect and remove only the stale roundtable-sandbox- containers of this installation): each
stale container is logged with its name, channel hash, creation time and state before it
is removed, and a container of another installation is neither logged nor removed."""
import secrets

from harness import LABEL_INSTALLATION, docker
from lifecycle_helpers import container_exists, kill9, message, restart, wait_for, wait_for_container, \
    wait_runnerd_ready
from rtsproto import channel_hash

LABEL_CHANNEL = "io.roundtable-sandbox.channel"


def create(s, name, installation, channel_label=None):
    args = ["create", "--name", name, "--network", "none", "--label", f"{LABEL_INSTALLATION}={installation}"]
    if channel_label is not None:
        args += ["--label", f"{LABEL_CHANNEL}={channel_label}"]
    docker(*args, s.env.image, timeout=60)


def listed(name):
    """(CreatedAt, State) as docker ps shows them, the form runnerd logs."""
    p = docker("ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.CreatedAt}}\t{{.State}}", timeout=30)
    created, state = p.stdout.strip().split("\t")
    return created, state


def runnerd_log(s):
    return s.log_tail("runnerd", limit=10**7)


def test_stale_containers_are_logged_then_removed(make_suite):
    s = make_suite()
    wait_runnerd_ready(s)
    inst, other = s.installation, "0" * 12
    ours = f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}"
    unlabelled = f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}"
    # Another installation's container, and one with our name shape but its label.
    theirs = f"roundtable-sandbox-{other}-{secrets.token_hex(8)}"
    their_label = f"roundtable-sandbox-{inst}-{secrets.token_hex(8)}"
    hashed = channel_hash("guild-10/stale")
    try:
        create(s, ours, inst, hashed)
        create(s, unlabelled, inst)  # ours, but without a channel label
        create(s, theirs, other, hashed)
        create(s, their_label, other, hashed)
        created, state = listed(ours)
        assert state == "created"
        created_unlabelled, _ = listed(unlabelled)
        s.stop_daemon("runnerd")
        restart(s, "runnerd")
        log = runnerd_log(s)
        line = f"stale container {ours}: channel {hashed}, created {created}, state created"
        assert line in log, log
        assert f"stale container {unlabelled}: channel -, created {created_unlabelled}, state created" in log
        # Logged before it was removed.
        assert log.index(line) < log.index(f"removed stale container {ours}")
        wait_for(lambda: not container_exists(ours) and not container_exists(unlabelled), 30,
                 what="the stale containers' removal")
        for n in (theirs, their_label):
            assert n not in log
            assert container_exists(n)
    finally:
        for n in (ours, unlabelled, theirs, their_label):
            docker("rm", "-f", n, check=False, timeout=30)


def test_a_turn_left_by_a_crash_is_logged_running(make_suite, rts_env):
    """runnerd dies with SIGKILL mid-turn: at its next start the orphan is logged with the
    channel of its turn and the state it was in, then removed."""
    s = make_suite(config={"image": rts_env.probe_image(), "turnTimeoutMs": 120000})
    wait_runnerd_ready(s)
    ch = "guild-10/crash"
    assert s.cli("on", ch).returncode == 0
    c = s.connect(timeout=60)
    c.send(message(ch, "#hang"))
    assert c.recv()["route"] == "sandbox"
    name = wait_for_container(s)
    wait_for(lambda: listed(name)[1] == "running", 30, what="the container to run")
    created, _ = listed(name)
    kill9(s, "runnerd")
    restart(s, "runnerd")
    log = runnerd_log(s)
    assert f"stale container {name}: channel {channel_hash(ch)}, created {created}, state running" in log, log
    assert f"removed stale container {name}" in log
    assert not container_exists(name)
