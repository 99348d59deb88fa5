# SPDX-License-Identifier: Apache-2.0
"""Run the real suite for integration tests: three daemons as the service account, the real
dockerd and image, and the scripted HTTPS model endpoint (tests/fakes/fake_model.py).

Usable without pytest (tests/bench uses it): errors are HarnessError; conftest.py turns them
into pytest outcomes.

    env = Environment.prepare()          # root + docker check, account, binaries, image
    env = Environment.prepare(docker=False)  # the same without Docker (brokerd, statd alone)
    env.require_docker()                 # later: Docker checked, the image built (once)
    ...
    env.cleanup()                        # removes the copied binaries and our image tags
    with Suite(env, config={...}) as s:  # dirs, config, fake model, daemons
        s.cli("on", "chan")              # -> subprocess.CompletedProcess (text)
        s.control({"op": "status"})      # -> [answer, (event)]
        s.fake.requests()                # -> what the model endpoint received

Layout of one suite (all under a short /tmp directory so runRoot/<16 hex>/broker.sock stays
within the 100-character socket path limit):

    ROOT/            0755 root          ROOT/etc/        0755 root: sandbox.json 0640 root:svc,
    ROOT/run/        0700 svc (runRoot)                  api-key 0400 svc
    ROOT/ws/         0700 svc (workspaceRoot)  ROOT/ca/  test CA (ca.pem 0644)
    ROOT/state/      0700 svc (stateFile's dir) ROOT/logs/ 0700 root: daemon stderr, model.jsonl
    ROOT/rt/         0750 svc (runtime dir: control.sock, runnerd.sock, brokerd.sock)

Docker is needed only by what starts runnerd (a Suite) or builds an image: brokerd on its
own (broker_rig.BrokerRig) and statd on its own (Suite(daemons=("statd",))) run on a host
with no Docker daemon, and a Suite that needs Docker raises HarnessError there (a failed
test, never a skipped one).

Waiting: tests wait on conditions, never for a fixed time. wait_until(predicate, timeout,
what) polls until the condition holds; assert_quiet(probe, within, what) is the one way to
check that something does NOT happen, over a window sized from measurement (QUIET_*_S);
wait_past(instant) waits for the clock itself, where the condition is time passing (a
deadline expiring, bytes paced on purpose).

Accounts (DESIGN.md 8.1): by default a suite runs in accounts mode, as the package does:
statd as the service account (roundtable-sandbox), brokerd as roundtable-sandbox-broker,
runnerd as roundtable-sandbox-runner, turn containers as roundtable-sandbox-guest, each
with its own group; the config names them ("accounts", "uid", "gid"). Suite(...,
accounts=False) is single-account mode: all three daemons and the containers as the
service account. The daemons run the way roundtable-sandbox(7) tells an operator to start
them by hand: runnerd with `runuser -u ACCOUNT -g GROUP -G docker`, statd and brokerd with
`-g GROUP` only (so not even an account that is in the docker group passes it on to them).
No account is ever put in the docker group.

Accounts mode layout (what differs from the single-account one above): runRoot 0700
runner; workspaceRoot 0700 svc (statd adds an ACL entry letting runner search it); the
runtime dir 01750 svc with ACL entries letting runner and broker create their sockets
there (the sticky bit keeps each daemon's socket its own); api-key 0400 broker;
sandbox.json 0644 root (all three daemon accounts read it; it holds no secret).

Images: every Environment builds its worker (and probe) image under a tag of its own,
roundtable-sandbox:test-<pid>-<random>, and cleanup() removes exactly those tags
(`docker rmi TAG`: never forced, never another image), so runs on a shared Docker host do
not untag each other's images.
"""
import functools
import grp
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

SERVICE_USER = "roundtable-sandbox"
# The other three accounts of accounts mode (DESIGN.md 8.1, the package's sysusers.d names).
BROKER_USER = "roundtable-sandbox-broker"
RUNNER_USER = "roundtable-sandbox-runner"
GUEST_USER = "roundtable-sandbox-guest"
DOCKER_GROUP = "docker"
IMAGE_REPO = "roundtable-sandbox"
LABEL_INSTALLATION = "io.roundtable-sandbox.installation"
SOCKET_PATH_MAX = 100  # seed: runRoot plus the per-turn suffix within 100 characters
SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = {
    "statd": "statd/roundtable-sandbox-statd",
    "runnerd": "runnerd/roundtable-sandbox-runnerd",
    "brokerd": "brokerd/roundtable-sandbox-brokerd",
    "cli": "cli/roundtable-sandbox",
    "launcher": "brokerd/roundtable-sandbox-launcher",  # brokerd's launcher unit's program
}
SOCKETS = {"statd": "control.sock", "runnerd": "runnerd.sock", "brokerd": "brokerd.sock"}
START_TIMEOUT_S = 15
STOP_GRACE_S = 10
ANSWER_MAX = 1024 * 1024
DAEMONS = ("brokerd", "runnerd", "statd")  # in start order

# Polling period of wait_until() and assert_quiet(): short against every window below, and
# long enough that a poll (a file read, a `docker ps`) does not load the machine.
POLL_S = 0.02

# Negative-check windows. A window must outlast the thing it looks for when that thing does
# happen, by a wide margin, or "nothing happened" means nothing. Measured on the 2-core CI
# machine with both cores saturated by busy loops (idle figures in brackets):
# - a request brokerd forwards reaches the fake's record within 17 ms for the model and
#   the MCP server [5 ms] and 52 ms for a host tool, which is a python3 start [23 ms]:
#   QUIET_FORWARD_S is ten times the slowest.
# - an addressed message reaches the model (statd, runnerd, docker run, the worker,
#   brokerd) within 616 ms [408 ms], its container shows in `docker ps` within 531 ms:
#   QUIET_TURN_S is about five times that.
QUIET_FORWARD_S = 0.5
QUIET_TURN_S = 3.0


class HarnessError(Exception):
    """The environment cannot run integration tests, or the suite failed to start/stop."""


@functools.lru_cache(maxsize=1)
def _limits_defines():
    """common/limits.h's `#define RTS_NAME VALUE` lines, read once."""
    with open(os.path.join(SRCDIR, "common", "limits.h"), encoding="utf-8") as f:
        return {m.group(1): m.group(2)
                for m in re.finditer(r"^#define (RTS_\w+) ([^\n]*?)\s*(?:/\*.*)?$", f.read(), re.M)}


def limits_value(name):
    """The value of `#define name` in common/limits.h (the one source of every limit),
    evaluated: plain numbers and arithmetic over other RTS_ constants only."""
    defines = _limits_defines()

    def value(n):
        expr = re.sub(r"\b(\d+)u\b", r"\1", defines[n])
        expr = re.sub(r"\bRTS_\w+\b", lambda m: f"({value(m.group(0))})", expr)
        assert re.fullmatch(r"[\d\s()+*/.-]+", expr), expr  # plain arithmetic only
        return eval(expr, {"__builtins__": {}})
    return value(name)


def wait_until(predicate, timeout, what, step=POLL_S):
    """Call predicate() every step seconds until it returns a true value, and return that
    value. Fails with an AssertionError naming what (the condition waited for) when timeout
    seconds pass first; predicate gets one last try at the deadline, so a slow poll cannot
    turn a late success into a failure. Exceptions from predicate propagate (a daemon that
    died while waited for is reported as such, not as a timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(min(step, left))


def assert_quiet(probe, within, what, step=POLL_S):
    """The negative check: probe() (a count or a state of what must not happen) keeps its
    first value for within seconds, or the test fails as soon as it changes, naming what.
    within is one of the QUIET_*_S windows (or a documented bound of the daemon under
    test); returns the value."""
    first = probe()
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(step, left))
        now = probe()
        if now != first:
            raise AssertionError(f"{what}: went from {first!r} to {now!r} within {within:g} s")
    now = probe()
    if now != first:
        raise AssertionError(f"{what}: went from {first!r} to {now!r} within {within:g} s")
    return first


def wait_past(instant):
    """Wait until time.monotonic() passes instant: for tests whose condition is time itself
    (a deadline that must have expired, bytes sent late on purpose), never to let the
    system catch up (use wait_until for that)."""
    while (left := instant - time.monotonic()) > 0:
        time.sleep(left)


def docker_bin():
    return os.environ.get("RTS_DOCKER") or ("/usr/bin/docker" if os.path.exists("/usr/bin/docker")
                                           else shutil.which("docker") or "docker")


def docker(*args, check=True, timeout=120):
    p = subprocess.run([docker_bin(), *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise HarnessError(f"docker {' '.join(args)} failed: {p.stderr.strip()}")
    return p


def docker_inspect(name):
    """`docker inspect NAME` as a dict, or None when there is no such container/image."""
    p = docker("inspect", name, check=False, timeout=30)
    if p.returncode != 0:
        return None
    data = json.loads(p.stdout)
    return data[0] if data else None


def installation_id(state_file):
    """Same derivation as common/ids.c: first 12 hex digits of sha256(absolute stateFile)."""
    return hashlib.sha256(state_file.encode()).hexdigest()[:12]


def installation_containers(inst):
    p = docker("ps", "-a", "--filter", f"label={LABEL_INSTALLATION}={inst}", "--format", "{{.Names}}",
               timeout=30)
    return [n for n in p.stdout.split() if n]


def unique_tag(kind):
    """A tag no other run uses: roundtable-sandbox:KIND-<pid>-<8 hex digits>."""
    return f"{IMAGE_REPO}:{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def remove_tag(tag):
    """`docker rmi TAG`, never forced: removes our tag only (the image itself goes only when
    no other tag and no container uses it). Returns an error text, or None."""
    try:
        p = docker("rmi", tag, check=False, timeout=60)
    except subprocess.TimeoutExpired:
        return f"docker rmi {tag}: timed out"
    if p.returncode != 0 and "No such image" not in p.stderr:
        return f"docker rmi {tag}: {p.stderr.strip()}"
    return None


def _find_program(builddir, rel):
    """The built program at rel, or (a Makemodule.am without the directory prefix) at the
    top of the build tree; None when neither exists."""
    for cand in (os.path.join(builddir, rel), os.path.join(builddir, os.path.basename(rel))):
        if os.access(cand, os.X_OK):
            return cand
    return None


def _chown(path, uid, gid, mode):
    os.chown(path, uid, gid)
    os.chmod(path, mode)


# One account: its name, uid, primary gid and that group's name (runuser -g takes names).
Account = namedtuple("Account", "name uid gid group")


def setfacl(*args):
    """setfacl(1) (Debian package acl), for what an operator would type."""
    subprocess.run(["setfacl", *args], check=True, capture_output=True, text=True)


class Environment:
    """What every suite of a session shares: the service account, a copy of the built
    programs readable by it, and the worker image built under a tag of this run's own.
    Docker is checked, and the image built, only when something asks for it
    (require_docker)."""

    def __init__(self, builddir, bindir, uid, gid, group, image, build_image=False, parent=None, accounts=None):
        self.builddir = builddir
        self.bindir = bindir
        self.uid = uid  # the service account's (statd's; every daemon's in single-account mode)
        self.gid = gid
        self.group = group  # the account's primary group, by name (runuser -g takes names)
        # Account per role: "service", "broker", "runner", "guest".
        self.accounts = accounts or {}
        self.image = image
        self._built_tags = []  # removed by cleanup()
        self._probe_tag = None
        self._image_pending = build_image  # build self.image at the first require_docker()
        self._parent = parent  # an Environment whose image this one uses (testbuild.py)
        self._docker = None  # None: not asked yet; True; or the HarnessError it raised

    @staticmethod
    def check_root():
        if os.geteuid() != 0:
            raise HarnessError("integration tests run as root (they create the service account and "
                               "start the daemons as it with runuser)")

    @staticmethod
    def check_docker():
        """A Docker daemon answers, and the docker group exists (runnerd gets it)."""
        try:
            p = subprocess.run([docker_bin(), "version", "--format", "{{.Server.Version}}"], capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise HarnessError(f"docker does not answer: {e}") from e
        if p.returncode != 0 or not p.stdout.strip():
            raise HarnessError("no Docker daemon answers (start dockerd, e.g. with scripts/setup-debian.sh): "
                               + p.stderr.strip())
        try:
            grp.getgrnam(DOCKER_GROUP)
        except KeyError as e:
            raise HarnessError("there is no docker group: is docker.io installed?") from e

    @classmethod
    def ensure_account(cls):
        """The service account (created when missing); returns (uid, gid, primary group
        name)."""
        a = cls.ensure_named_account(SERVICE_USER)
        return a.uid, a.gid, a.group

    @staticmethod
    def ensure_named_account(name):
        """Create the account when missing, as the package's sysusers.d file does: a system
        account with its own group, not in the docker group (runnerd alone gets that group,
        from runuser -G here and SupplementaryGroups= under systemd). An existing account
        is left as it is. Returns its Account."""
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            # Two sessions may race to create it: the loser's useradd fails, the account exists.
            subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", name], capture_output=True)
            try:
                pw = pwd.getpwnam(name)
            except KeyError as e:
                raise HarnessError(f"cannot create the account {name}") from e
        try:
            group = grp.getgrgid(pw.pw_gid).gr_name
        except KeyError as e:
            raise HarnessError(f"{name}'s primary group {pw.pw_gid} has no name") from e
        return Account(name, pw.pw_uid, pw.pw_gid, group)

    @classmethod
    def ensure_accounts(cls):
        """The four accounts of accounts mode, by role; each distinct, none in the docker
        group (HarnessError otherwise: the tests would prove nothing)."""
        accounts = {role: cls.ensure_named_account(name) for role, name in
                    (("service", SERVICE_USER), ("broker", BROKER_USER), ("runner", RUNNER_USER),
                     ("guest", GUEST_USER))}
        if len({a.uid for a in accounts.values()}) != 4 or len({a.gid for a in accounts.values()}) != 4:
            raise HarnessError(f"the four accounts must have distinct uids and groups: {accounts}")
        try:
            docker_members = set(grp.getgrnam(DOCKER_GROUP).gr_mem)
        except KeyError:
            docker_members = set()
        members = sorted(a.name for a in accounts.values() if a.name in docker_members)
        if members:
            raise HarnessError(f"{', '.join(members)} must not be in the {DOCKER_GROUP} group (gpasswd -d)")
        return accounts

    @classmethod
    def prepare(cls, builddir=None, build_image=True, image=None, docker=True, parent=None):
        """builddir: RTS_BUILDDIR, else the source tree when built in place, else its
        build-default (scripts/build.sh's default). image: the worker image's tag, by
        default a new unique_tag("test"); with build_image it is built (by
        require_docker()) and removed by cleanup(). docker: require Docker now (the
        default); with docker=False, nothing here touches Docker. parent: an Environment
        whose image this one uses and whose require_docker() it calls first."""
        cls.check_root()
        if not builddir:
            builddir = os.environ.get("RTS_BUILDDIR")
        if not builddir:
            in_place = os.access(os.path.join(SRCDIR, PROGRAMS["cli"]), os.X_OK)
            builddir = SRCDIR if in_place else os.path.join(SRCDIR, "build-default")
        builddir = os.path.abspath(builddir)
        found = {name: _find_program(builddir, rel) for name, rel in PROGRAMS.items()}
        missing = [PROGRAMS[name] for name, path in found.items() if not path]
        if missing:
            raise HarnessError(f"not built in {builddir}: {', '.join(missing)} (run scripts/build.sh, or set "
                               "RTS_BUILDDIR to the build directory)")
        accounts = cls.ensure_accounts()
        uid, gid, group = accounts["service"].uid, accounts["service"].gid, accounts["service"].group
        # The build tree may sit under a 0700 home the service account cannot enter.
        bindir = tempfile.mkdtemp(prefix="rts-bin-", dir="/tmp")
        os.chmod(bindir, 0o755)
        for name, rel in PROGRAMS.items():
            dst = os.path.join(bindir, os.path.basename(rel))
            shutil.copy2(found[name], dst)
            os.chmod(dst, 0o755)
        if parent is not None:
            image = parent.image
        env = cls(builddir, bindir, uid, gid, group, image or unique_tag("test"), build_image=build_image,
                  parent=parent, accounts=accounts)
        if docker:
            try:
                env.require_docker()
            except BaseException:
                env.cleanup()
                raise
        return env

    def require_docker(self):
        """Check that Docker answers and build this Environment's image if it is to build
        one; once: later calls return at once, or raise the same HarnessError again."""
        if isinstance(self._docker, HarnessError):
            raise self._docker
        if self._docker:
            return
        try:
            if self._parent is not None:
                self._parent.require_docker()
            self.check_docker()
            if self._image_pending:
                self._image_pending = False
                self.build_image()
        except HarnessError as e:
            self._docker = e
            raise
        self._docker = True

    def program(self, name):
        return os.path.join(self.bindir, os.path.basename(PROGRAMS[name]))

    def _build(self, ctx, tag, what):
        self._built_tags.append(tag)  # a failed build may still have tagged something
        p = subprocess.run([self.program("cli"), "image", "build", "--dir", ctx, "--tag", tag],
                           capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise HarnessError(f"{what} build failed ({p.returncode}): {p.stderr.strip()[-2000:]}")

    def build_image(self):
        self._build(os.path.join(self.builddir, "worker", "image"), self.image, "image")

    def probe_image(self):
        """Build (once per Environment, under a unique tag) the test-only image whose payload
        reports what a turn container gets (tests/images/probe.c); returns its tag."""
        if self._probe_tag:
            return self._probe_tag
        self.require_docker()
        probe = os.path.join(self.builddir, "tests", "images", "probe")
        if not os.access(probe, os.X_OK):
            p = subprocess.run(["make", "-C", self.builddir, "tests/images/probe"], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL)
            if p.returncode != 0:
                raise HarnessError(f"cannot build the probe: {p.stderr.strip()[-2000:]}")
        ctx = tempfile.mkdtemp(prefix="rts-probe-", dir="/tmp")
        try:
            shutil.copy2(probe, os.path.join(ctx, "probe"))
            shutil.copy2(os.path.join(SRCDIR, "tests", "images", "Dockerfile.probe"), os.path.join(ctx, "Dockerfile"))
            tag = unique_tag("probe")
            self._build(ctx, tag, "probe image")
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
        self._probe_tag = tag
        return tag

    def cleanup(self, keep_images=False):
        """Remove the copied programs and, unless keep_images, the tags this Environment
        built (only those). Returns the tags kept or not removable, each with the reason,
        for the caller to print."""
        shutil.rmtree(self.bindir, ignore_errors=True)
        if keep_images:
            return [f"{t}: kept" for t in self._built_tags]
        problems = [e for e in (remove_tag(t) for t in self._built_tags) if e]
        self._built_tags = []
        return problems


class FakeModel:
    """tests/fakes/fake_model.py with a test CA, running as root on 127.0.0.1."""

    def __init__(self, cadir, record, logfile):
        self.record = record
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fake_model.py"), "--port", "0",
             "--cert", os.path.join(cadir, "server.pem"), "--key", os.path.join(cadir, "server.key"),
             "--record", record],
            stdout=subprocess.PIPE, stderr=logfile, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()  # printed once the socket listens
        if not line.startswith("PORT "):
            self.stop()
            raise HarnessError("the fake model endpoint did not start")
        self.port = int(line.split()[1])
        self.url = f"https://localhost:{self.port}/v1/chat/completions"

    def requests(self):
        """Every request received so far, oldest first (see fake_model.py for the fields)."""
        try:
            with open(self.record, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


class ControlConnection:
    """One NDJSON connection to statd's control.sock, for tests that need several requests
    on one connection (answer order, interleaved events)."""

    def __init__(self, path, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def send(self, obj):
        """Send obj (an "id" is added when missing); returns the id."""
        if "id" not in obj:
            obj = dict(obj, id=f"t{self.next_id}")
            self.next_id += 1
        self.sock.sendall(json.dumps(obj).encode() + b"\n")
        return obj["id"]

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv(self, timeout=None):
        """The next line as a parsed object; raises TimeoutError or EOFError."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            if len(self.buf) > ANSWER_MAX:
                raise HarnessError("answer line too long")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("statd closed the control connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.sock.close()


class Suite:
    """One installation: its directories, config, fake model endpoint and three daemons."""

    def __init__(self, env, config=None, api_key=None, start=True, fake_model=True, daemons=DAEMONS,
                 accounts=True, daemon_env=None):
        """config: keys merged over the defaults (a None value removes a key). With
        fake_model=False no local endpoint is started and config must name the real one
        (model, modelUrl); api_key is then the real key, written for brokerd as usual.
        daemons: which of the three start() starts; with runnerd among them the suite
        needs Docker (env.require_docker(), HarnessError without it), without runnerd it
        never touches Docker (statd's control socket alone, for instance). accounts: an
        account per role (the default, as packaged), or False for single-account mode.
        daemon_env: {daemon: {VAR: value}} added to that daemon's environment at start."""
        self.env = env
        self.accounts = accounts
        self.daemon_env = daemon_env or {}
        self.daemons = tuple(d for d in DAEMONS if d in daemons)
        self.root = tempfile.mkdtemp(prefix="rts-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.dirs = {k: os.path.join(self.root, k) for k in ("run", "ws", "state", "rt", "etc", "ca", "logs")}
        self.procs = {}
        self.exit_codes = {}
        self.fake = None
        self._logfiles = []
        self.api_key = api_key or "sk-test-" + secrets.token_hex(24)
        self.config_overrides = config or {}
        self.use_fake_model = fake_model
        self.stopped = False
        self._final_logs = None
        if start:
            try:
                self.start()
            except BaseException:
                self.stop(check_leftovers=False)
                raise

    # ---- accounts ----

    def account(self, daemon):
        """The Account daemon ("statd", "runnerd", "brokerd") runs as."""
        if not self.accounts:
            return self.env.accounts["service"]
        return self.env.accounts[{"statd": "service", "runnerd": "runner", "brokerd": "broker"}[daemon]]

    @property
    def guest(self):
        """The Account turn containers run as: the guest account, or in single-account mode
        the service account."""
        return self.env.accounts["guest" if self.accounts else "service"]

    # ---- set-up ----

    def _make_dirs(self):
        uid, gid = self.env.uid, self.env.gid
        runner = self.account("runnerd")
        for k, mode in (("run", 0o700), ("ws", 0o700), ("state", 0o700), ("rt", 0o750)):
            os.mkdir(self.dirs[k])
            if k == "run":
                _chown(self.dirs[k], runner.uid, runner.gid, mode)
            else:
                _chown(self.dirs[k], uid, gid, mode)
        if self.accounts:
            # Each daemon binds its own socket here (no socket units): runner and broker may
            # create entries, the sticky bit keeps them from removing each other's.
            os.chmod(self.dirs["rt"], 0o1750)
            setfacl("-m", f"u:{self.account('runnerd').uid}:rwx,u:{self.account('brokerd').uid}:rwx",
                    self.dirs["rt"])
        os.mkdir(self.dirs["etc"], 0o755)
        # Root's alone: model.jsonl records every upstream request, key and guest text included.
        os.mkdir(self.dirs["logs"], 0o700)
        os.chmod(self.dirs["logs"], 0o700)
        probe = os.path.join(self.dirs["run"], "0" * 16, "broker.sock")
        if len(probe) > SOCKET_PATH_MAX:
            raise HarnessError(f"runRoot {self.dirs['run']} is too long for a broker socket path")

    def _write_config(self):
        uid, gid = self.env.uid, self.env.gid
        broker = self.account("brokerd")
        self.key_file = os.path.join(self.dirs["etc"], "api-key")
        # Created private: with a real key (the demo), there must be no readable moment.
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.api_key + "\n")  # as an operator's `echo` writes it
        # brokerd's alone (DESIGN.md 8.1: key files readable by the broker account only).
        _chown(self.key_file, broker.uid, broker.gid, 0o400)
        self.state_file = os.path.join(self.dirs["state"], "channels.json")
        self.config = {
            "image": self.env.image,
            "runRoot": self.dirs["run"],
            "workspaceRoot": self.dirs["ws"],
            "stateFile": self.state_file,
            "uid": uid,
            "gid": gid,
            "model": "fake-model",
            "modelUrl": self.fake.url if self.fake else None,
            "caFile": os.path.join(self.dirs["ca"], "ca.pem") if self.fake else None,
            "apiKey": {"file": self.key_file},
            "turnTimeoutMs": 60000,
            # Off unless a test asks: the suites count containers and docker calls of cold
            # turns; tests/integration/test_spares.py turns spares on (the product default).
            "warmSpares": 0,
        }
        if self.accounts:
            # As the package's example names them; the guest by name, resolved at start.
            self.config.update({"accounts": {"broker": BROKER_USER, "runner": RUNNER_USER},
                                "uid": GUEST_USER, "gid": self.guest.group})
        self.config.update(self.config_overrides)
        self.config = {k: v for k, v in self.config.items() if v is not None}
        self.config_path = os.path.join(self.dirs["etc"], "sandbox.json")
        with open(self.config_path, "w", encoding="utf-8") as f:
            json.dump(self.config, f, indent=2)
        if self.accounts:
            _chown(self.config_path, 0, 0, 0o644)  # all three daemon accounts read it
        else:
            _chown(self.config_path, 0, gid, 0o640)
        self.installation = installation_id(self.state_file)

    def log_path(self, name):
        return os.path.join(self.dirs["logs"], f"{name}.log")

    def start_daemon(self, name, extra_env=None, args=()):
        log = open(self.log_path(name), "ab")
        self._logfiles.append(log)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        if os.environ.get("RTS_LOG_LEVEL"):
            env["RTS_LOG_LEVEL"] = os.environ["RTS_LOG_LEVEL"]
        # RTS_SECCOMP_LOG=1: the daemons log system calls outside their allow-lists
        # instead of dying of SIGSYS (common/sandbox.h), for finding a missing one.
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "RTS_SECCOMP_LOG"):
            if k in os.environ:
                env[k] = os.environ[k]
        env.update(extra_env or {})
        # -g: the account's own group as the primary one and no other group from the group
        # database; runnerd alone gets docker as a supplementary group (-G without -g would
        # make docker its primary group, and it could not read the root:<group> 0640 config).
        acct = self.account(name)
        groups = ["-g", acct.group] + (["-G", DOCKER_GROUP] if name == "runnerd" else [])
        self.procs[name] = subprocess.Popen(
            ["runuser", "-u", acct.name, *groups, "--", self.env.program(name), "--config", self.config_path,
             "--runtime-dir", self.dirs["rt"], *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)

    def _wait_ready(self):
        def ready(name):
            if self.procs[name].poll() is not None:
                raise HarnessError(f"{name} exited with {self.procs[name].returncode} at start:\n"
                                   + self.log_tail(name))
            path = os.path.join(self.dirs["rt"], SOCKETS[name])
            try:
                if not stat.S_ISSOCK(os.lstat(path).st_mode):
                    return False
            except FileNotFoundError:
                return False
            # Only control.sock takes a connection from root; the daemon links would
            # (rightly) refuse a peer that is not the service account.
            if name == "statd":
                try:
                    self.control({"op": "status"}, timeout=5)
                except (OSError, EOFError):
                    return False
            return True

        pending = set(self.procs)

        def all_ready():
            pending.difference_update([n for n in sorted(pending) if ready(n)])
            return not pending

        try:
            wait_until(all_ready, START_TIMEOUT_S, "the daemons to serve", step=0.05)
        except AssertionError:
            raise HarnessError(f"not ready after {START_TIMEOUT_S} s: {', '.join(sorted(pending))}\n"
                               + self.logs()) from None

    def start(self):
        if "runnerd" in self.daemons:
            self.env.require_docker()
        self._make_dirs()
        if self.use_fake_model:
            subprocess.run([os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), self.dirs["ca"]], check=True,
                           capture_output=True)
            model_log = open(self.log_path("fake-model"), "ab")
            self._logfiles.append(model_log)
            self.fake = FakeModel(self.dirs["ca"], os.path.join(self.dirs["logs"], "model.jsonl"), model_log)
        self._write_config()
        for name in self.daemons:
            self.start_daemon(name, extra_env=self.daemon_env.get(name))
        self._wait_ready()

    # ---- helpers for tests ----

    def cli(self, *args, timeout=180, input=None):
        """Run the CLI as root against this suite; returns a CompletedProcess (text)."""
        return subprocess.run([self.env.program("cli"), "--config", self.config_path, "--runtime-dir",
                               self.dirs["rt"], *args], capture_output=True, text=True, timeout=timeout,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def connect(self, timeout=30):
        return ControlConnection(os.path.join(self.dirs["rt"], "control.sock"), timeout)

    def control(self, obj, timeout=180):
        """Send one request on a new connection and return what came back for it: the
        answer, then for a "sandbox" route also the reply/error event."""
        c = self.connect(timeout)
        try:
            rid = c.send(obj)
            out = []
            while True:
                o = c.recv()
                if o.get("id") != rid and not ("error" in o and "id" not in o):
                    continue
                out.append(o)
                if "event" in o or o.get("route") != "sandbox":
                    return out
        finally:
            c.close()

    def assert_no_turn(self, requests_before, what, containers=True):
        """The negative check for messages that must not run a turn: no model request past
        the first requests_before, and (containers) no container of this installation,
        now and for QUIET_TURN_S. what names the messages, for the failure."""
        def probe():
            return (len(self.fake.requests()) - requests_before, self.containers() if containers else [])
        assert probe() == (0, []), f"{what}: (model requests, containers) {probe()}"
        assert_quiet(probe, QUIET_TURN_S, f"{what}: (model requests, containers)", step=0.1)

    def workspace(self, channel):
        return os.path.join(self.dirs["ws"], hashlib.sha256(channel.encode()).hexdigest())

    @staticmethod
    def docker_inspect(name):
        return docker_inspect(name)

    def containers(self):
        """Names of this installation's containers that exist right now."""
        return installation_containers(self.installation)

    def log_tail(self, name, limit=8000):
        try:
            with open(self.log_path(name), encoding="utf-8", errors="replace") as f:
                return f.read()[-limit:]
        except FileNotFoundError:
            return ""

    def logs(self):
        """All daemon and fake-model logs, for a failing test's report (kept after stop())."""
        if self._final_logs is not None:
            return self._final_logs
        parts = []
        for name in ("statd", "runnerd", "brokerd", "fake-model"):
            text = self.log_tail(name)
            if text:
                parts.append(f"----- {name} -----\n{text}")
        return "\n".join(parts)

    # ---- tear-down ----

    @staticmethod
    def _daemon_pid(runuser):
        """runuser forks the program; signal that child directly so runuser reports its
        exit status (a signal to runuser itself is forwarded, then SIGKILL after 2 s)."""
        try:
            with open(f"/proc/{runuser.pid}/task/{runuser.pid}/children", encoding="ascii") as f:
                kids = f.read().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def stop_daemon(self, name, sig=signal.SIGTERM):
        p = self.procs.get(name)
        if not p or p.poll() is not None:
            return
        pid = self._daemon_pid(p)
        try:
            if pid:
                os.kill(pid, sig)
            else:
                p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.exit_codes[name] = p.returncode

    def stop(self, check_leftovers=True):
        """Stop the daemons (SIGTERM, SIGKILL after a grace period) and the fake endpoint,
        remove this installation's containers and directories. Raises HarnessError when
        containers of this installation were still there after the daemons stopped."""
        if self.stopped:
            return
        self.stopped = True
        for name in ("statd", "runnerd", "brokerd"):
            self.stop_daemon(name)
        if self.fake:
            self.fake.stop()
        leftovers = []
        # Only runnerd starts containers: without it, Docker is not asked (nor needed).
        if hasattr(self, "installation") and "runnerd" in self.procs:
            try:
                leftovers = self.containers()
                for n in leftovers:
                    docker("rm", "-f", n, check=False, timeout=30)
            except (HarnessError, subprocess.TimeoutExpired):
                pass
        for f in self._logfiles:
            f.close()
        self._final_logs = self.logs()
        if os.environ.get("RTS_KEEP"):
            print(f"keeping {self.root}", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        if check_leftovers and leftovers:
            raise HarnessError(f"containers left behind after the daemons stopped: {', '.join(leftovers)}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(check_leftovers=exc[0] is None)
        return False
