# SPDX-License-Identifier: Apache-2.0
"""A whole installation with a rich channel, for statd's, runnerd's and the CLI's side of rich
mode (tests/integration/test_rich_host.py).

    with RichHostSuite(env) as s:            # harness.Suite + fake_anthropic + a "rich" config
        s.rich("chan")                         # roundtable-sandbox rich chan default
        p, report = s.say("chan", "hi")        # the richworker's report of the turn
        s.container("chan")                    # docker inspect of the channel's container

The worker is helper RC's scripted test worker (tests/images/richworker.c: "#rw NAME ..."
directives in the turn text steer it; its reply is a JSON report of the turn), the model
endpoint is tests/fakes/fake_anthropic.py (SSE over TLS, scripted, recording). brokerd is the
real one, unless daemons leaves it out: then StandInBroker answers on brokerd.sock (for the
attachment path, whose real fetch needs a public address: see test_rich_host.py).

The rich config's log driver is json-file here: this machine's dockerd does not run under
systemd, so journald (the default) would refuse every container; `docker logs` reads
json-file the same way.
"""
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading

import rtsproto
from rtsproto import channel_hash  # noqa: F401 (the tests import it from here too)
from harness import SRCDIR, DAEMONS, HarnessError, Suite, docker, docker_inspect, unique_tag, wait_until
from rich_rig import FakeAnthropic

MODEL = "claude-fake-4-6"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63"
                    "6460f8ff1f0002870180eb47ba920000000049454e44ae426082")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


def richworker_image(env):
    """The richworker image (tests/images/richworker.c), built once per Environment under a tag
    of its own (removed by env.cleanup())."""
    tag = getattr(env, "_rich_host_image", None)
    if tag:
        return tag
    env.require_docker()
    binary = os.path.join(env.builddir, "tests", "images", "richworker")
    p = subprocess.run(["make", "-C", env.builddir, "tests/images/richworker"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0 or not os.access(binary, os.X_OK):
        raise HarnessError(f"cannot build richworker: {p.stderr.strip()[-2000:]}")
    tag = build_richworker(env, binary)
    env._rich_host_image = tag
    return tag


def build_richworker(env, binary, label=None):
    """Build the richworker image under a new tag (label: a LABEL that makes another image
    ID of the same binary); returns the tag."""
    ctx = tempfile.mkdtemp(prefix="rts-richworker-", dir="/tmp")
    try:
        shutil.copy2(binary, os.path.join(ctx, "richworker"))
        with open(os.path.join(SRCDIR, "tests", "images", "Dockerfile.richworker"), encoding="utf-8") as f:
            dockerfile = f.read()
        if label:
            dockerfile += f"\nLABEL io.roundtable-sandbox.test={label}\n"
        with open(os.path.join(ctx, "Dockerfile"), "w", encoding="utf-8") as f:
            f.write(dockerfile)
        tag = unique_tag("richworker")
        env._build(ctx, tag, "richworker image")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return tag


def reply_report(text):
    """The report richworker puts first in its reply text."""
    obj, _ = json.JSONDecoder().raw_decode(text)
    return obj


class RichHostSuite(Suite):
    """harness.Suite with fake_anthropic and a rich config running the richworker image.
    rich: keys merged over the defaults; image: the rich image tag (default: richworker).
    Single-account mode unless accounts=True is given: the rich tests check the rich rules
    and reach into the workspace and broker directory as the service account;
    test_rich_host.py::test_a_rich_channel_in_accounts_mode runs the package's default."""

    def __init__(self, env, rich=None, image=None, **kw):
        kw.setdefault("accounts", False)
        self.rich_overrides = rich or {}
        self.oauth_token = "sk-ant-oat01-test-" + secrets.token_hex(24)
        self.anthropic = None
        self.rich_image = image or richworker_image(env)
        super().__init__(env, **kw)

    def _write_config(self):
        if self.anthropic is None and self.fake is not None:
            self._logfiles.append(open(self.log_path("fake-anthropic"), "ab"))
            self.anthropic = FakeAnthropic(self.dirs["ca"], os.path.join(self.dirs["logs"], "anthropic.jsonl"),
                                           self._logfiles[-1])
            self.oauth_file = os.path.join(self.dirs["etc"], "oauth-token")
            fd = os.open(self.oauth_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.oauth_token + "\n")
            # brokerd's account alone reads it (in single-account mode, the service account).
            owner = self.env.accounts["broker"] if self.accounts else None
            os.chown(self.oauth_file, owner.uid if owner else self.env.uid, owner.gid if owner else self.env.gid)
            os.chmod(self.oauth_file, 0o400)
        rich = {"image": self.rich_image, "profiles": {"default": {"model": MODEL},
                                                        "other": {"model": MODEL, "prompt": "Other persona."}},
                "oauthToken": {"file": self.oauth_file} if self.anthropic else {"env": "NONE"},
                "upstream": self.anthropic.url if self.anthropic else "https://localhost:9",
                "log": {"driver": "json-file"}, "startTimeoutMs": 30000, "turnTimeoutMs": 120000}
        rich.update(self.rich_overrides)
        self.config_overrides = dict(self.config_overrides, rich=rich)
        super()._write_config()

    def rewrite_config(self, rich=None, **top):
        """Change the config on disk (the daemons read it at their next start)."""
        self.config["rich"].update(rich or {})
        self.config.update(top)
        with open(self.config_path, "w", encoding="utf-8") as f:
            json.dump(self.config, f, indent=2)

    # ---- the CLI ----

    def rich(self, channel, profile="default"):
        return self.cli("rich", channel, profile)

    def say(self, channel, text, author="1001", name="Alice", principal=None, images=(), urls=(), files_dir=None,
            timeout=300):
        """`say` to a channel: (CompletedProcess, the worker's report or None)."""
        args = ["say", channel, "--author", author, "--name", name]
        if principal:
            args += ["--principal", principal]
        for img in images:
            args += ["--image", img]
        for u in urls:
            args += ["--attach", u]
        if files_dir:
            args += ["--files-dir", files_dir]
        p = self.cli(*args, "--", text, timeout=timeout)
        report = None
        if p.returncode == 0:
            try:
                report = reply_report(p.stdout)
            except ValueError:
                pass
        return p, report

    def message(self, channel, text="hi", **extra):
        """An eligible message request (extra members merged, None removes one)."""
        m = {"op": "message", "channel": channel, "guild": True, "addressed": True, "text": text,
             "author": {"id": "1001", "name": "Alice", "principalId": "1001", "tier": "member", "bot": False,
                        "integration": False}}
        m.update(extra)
        return {k: v for k, v in m.items() if v is not None}

    # ---- the container ----

    def container_name(self, channel):
        return f"roundtable-sandbox-{self.installation}-rich-{channel_hash(channel)[:16]}"

    def container(self, channel):
        """docker inspect of the channel's container, or None."""
        return docker_inspect(self.container_name(channel))

    def container_id(self, channel):
        c = self.container(channel)
        return c["Id"] if c else None

    def wait_container(self, channel, present=True, timeout=60):
        return wait_until(lambda: (self.container(channel) is not None) == present, timeout,
                          f"{channel}'s container to be {'there' if present else 'gone'}")

    def rich_containers(self):
        p = docker("ps", "-a", "--filter", f"label=io.roundtable-sandbox.installation={self.installation}",
                   "--filter", "label=io.roundtable-sandbox.kind=rich", "--format", "{{.Names}}", timeout=30)
        return [n for n in p.stdout.split() if n]

    def worker_log(self, channel):
        """The JSON lines of the channel's worker (docker logs)."""
        p = docker("logs", self.container_name(channel), check=False, timeout=30)
        out = []
        for line in (p.stdout + p.stderr).splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def announcements(self, channel):
        return [r for r in self.worker_log(channel)
                if r.get("rw") == "between" and r.get("data", {}).get("what") == "ready"]

    def broker_dir(self, channel):
        return os.path.join(self.dirs["run"], "rich-" + channel_hash(channel)[:16])

    def channel_key_file(self, channel):
        return os.path.join(self.dirs["ws"], channel_hash(channel) + ".channel-key")

    # ---- tear-down ----

    def restart(self, names=DAEMONS):
        """Stop the daemons named (SIGTERM) and start them again with the config on disk."""
        for name in ("statd", "runnerd", "brokerd"):
            if name in names:
                self.stop_daemon(name)
        for name in DAEMONS:
            if name in names:
                self.start_daemon(name)
        self.procs = {k: v for k, v in self.procs.items()}
        self._wait_ready()

    def stop(self, check_leftovers=True):
        if self.stopped:
            return
        # Rich containers outlive the daemons by design: this installation's go here, then
        # the usual check that nothing else was left.
        for name in ("statd", "runnerd", "brokerd"):
            self.stop_daemon(name)
        if hasattr(self, "installation") and "runnerd" in self.procs:
            for n in self.rich_containers():
                docker("rm", "-f", n, check=False, timeout=30)
        if self.anthropic:
            self.anthropic.stop()
        super().stop(check_leftovers)


class StandInBroker:
    """A stand-in for brokerd on brokerd.sock (rtsproto): binds every rich channel, says its
    worker is ready at once, answers BROKER_ATTACH_FETCH from `files` ({url: (bytes, mime)}
    or {url: -errno}), and answers each BROKER_RICH_TURN with `reply(input)` (a dict
    {"text","files"}). Records what it got (input JSON, fetches)."""

    def __init__(self, path, uid, gid, files=None, reply=None):
        self.listener = rtsproto.Listener(path)
        # runnerd (the service account) must reach it; a root listener is one it trusts.
        os.chown(path, uid, gid)
        self.files = files or {}
        self.reply = reply or (lambda inp: {"text": "stand-in reply"})
        self.inputs = []
        self.fetches = []
        self.messages = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            conn = self.listener.accept(timeout=60)
            conn.expect_hello(rtsproto.PROGRAM_BROKERD)
        except (TimeoutError, rtsproto.ProtocolError, OSError):
            return
        while not self.stopping:
            try:
                m = conn.recv(timeout=0.5)
            except TimeoutError:
                continue
            except (rtsproto.ProtocolError, OSError):
                return
            if m is None:
                return
            self.messages.append(m.name)
            if m.type == rtsproto.RICH_BIND:
                conn.send(rtsproto.RICH_BOUND, channel_hash=m["channel_hash"], result=0)
            elif m.type == rtsproto.RICH_WAIT_READY:
                conn.send(rtsproto.RICH_READY, channel_hash=m["channel_hash"], result=0, capabilities=3,
                          private_history=0)
            elif m.type == rtsproto.RICH_UNBIND:
                conn.send(rtsproto.RICH_UNBOUND, channel_hash=m["channel_hash"])
            elif m.type == rtsproto.BROKER_ATTACH_FETCH:
                self.fetches.append(dict(m.fields))
                got = self.files.get(m["url"], -5)
                if isinstance(got, int):
                    fd = memfd(b"")
                    conn.send(rtsproto.BROKER_ATTACH_DATA, fd=fd, turn_id=m["turn_id"], index=m["index"],
                              result=got, mime="")
                else:
                    data, mime = got
                    fd = memfd(data)
                    conn.send(rtsproto.BROKER_ATTACH_DATA, fd=fd, turn_id=m["turn_id"], index=m["index"], result=0,
                              mime=mime)
                os.close(fd)
            elif m.type == rtsproto.BROKER_RICH_TURN:
                size = os.fstat(m.fd).st_size
                inp = json.loads(os.pread(m.fd, size, 0))
                self.inputs.append(inp)
                fd = memfd(json.dumps(self.reply(inp)).encode())
                conn.send(rtsproto.BROKER_RICH_DONE, fd=fd, turn_id=m["turn_id"], status=rtsproto.TURN_OK, calls=1)
                os.close(fd)
            m.close()

    def stop(self):
        self.stopping = True
        self.listener.close()


def memfd(data):
    """A memfd holding data, sealed against every change (common/memfd.h)."""
    import fcntl
    fd = os.memfd_create("rts-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    return fd
