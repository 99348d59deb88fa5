# SPDX-License-Identifier: Apache-2.0
"""host_fetch's integration rig: tests/testbuild's fetch build of brokerd, and the loopback
web server its test seams carry every connection to (tests/fakes/fetch_fake.py).

The production brokerd refuses every loopback and private address, so a page cannot be
served to it from this machine. The fetch build (tests/testbuild/Makemodule.am, never
installed) is the same brokerd with the controlled fetch's test seams compiled in
(tests/testbuild/fetch_seams.h): names resolve to "public" addresses from a hosts file
this module writes (read again at every lookup), and every connection to a vetted address
ends at the fake on loopback. The rules all run on public-looking input; no packet leaves
the machine.

    fake = FetchFake()                        # CA for *.example.com, the fake, hosts file
    fake.host("www.example.com", WEB)         # answers for the n-th lookups of a name
    fake.static("page.html", b"...")          # served as /static/page.html
    env = fetch_environment(rts_env)          # an Environment whose brokerd is the fetch build
    with FetchSuite(env, fake, config={...}) as s: ...   # harness.Suite with the seams set
    BrokerRig(env, config={...}, extra_env=fake.brokerd_env())   # brokerd alone
    fake.requests(), fake.connections()       # what reached the fake
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from harness import SRCDIR, Environment, HarnessError, Suite

PROGRAM = "tests/testbuild/roundtable-sandbox-brokerd-fetch"
# Public addresses the seams' dialer carries to the fake (tests/unit/fetch_rig.h):
# example.com's own, which no test ever reaches.
WEB = "93.184.216.34"
WEB6 = "2606:2800:220:1:248:1893:25c8:1946"
BLACKHOLE = "93.184.216.35"


class FetchFake:
    """tests/fakes/fetch_fake.py with a CA of its own, a static directory and the hosts
    file of the fetch build's resolver; everything readable by the service account."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rts-ff-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.static_dir = os.path.join(self.dir, "static")
        os.mkdir(self.static_dir, 0o755)
        self.record = os.path.join(self.dir, "record.jsonl")
        self.conn_log = os.path.join(self.dir, "connections.jsonl")
        self.hosts_file = os.path.join(self.dir, "hosts")
        self.hosts = {}
        self._write_hosts()
        subprocess.run([os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), self.dir,
                        f"DNS:*.example.com, DNS:example.com, IP:{WEB}, IP:{WEB6}"],
                       check=True, capture_output=True)
        self.ca = os.path.join(self.dir, "ca.pem")
        self.log = open(os.path.join(self.dir, "fake.log"), "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fetch_fake.py"),
             "--cert", os.path.join(self.dir, "server.pem"), "--key", os.path.join(self.dir, "server.key"),
             "--record", self.record, "--connections", self.conn_log, "--static", self.static_dir],
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        try:
            self.ports = json.loads(line)
        except ValueError as e:
            self.stop()
            raise HarnessError(f"the fetch fake did not start (python3-brotli missing?): {line!r}") from e
        self.ports_line = line.strip()

    def _write_hosts(self):
        tmp = self.hosts_file + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            for name, answers in self.hosts.items():
                f.write(name + " " + " ".join(answers) + "\n")
        os.chmod(tmp, 0o644)
        os.rename(tmp, self.hosts_file)

    def host(self, name, *answers):
        """The resolver's answers for name: the n-th lookup gets the n-th, the last repeats.
        An answer is "ADDR[,ADDR...]", "EMPTY" or "NXDOMAIN". Use a name per test: lookups
        are counted per name for the life of brokerd."""
        self.hosts[name] = list(answers)
        self._write_hosts()

    def static(self, name, data):
        path = os.path.join(self.static_dir, name)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        os.chmod(path, 0o644)

    def brokerd_env(self):
        """The environment the fetch build reads its seams from."""
        return {"RTS_TESTBUILD_FETCH_PORTS": self.ports_line, "RTS_TESTBUILD_FETCH_CA": self.ca,
                "RTS_TESTBUILD_FETCH_HOSTS": self.hosts_file}

    @staticmethod
    def _read(path):
        try:
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def requests(self):
        """Every request the fake received, oldest first: {"listener", "method", "path", "headers"}."""
        return self._read(self.record)

    def connections(self):
        """Every connection event: {"id", "listener", "event": "open"|"close", "time"}."""
        return self._read(self.conn_log)

    def opened_since(self, index, settle=0.2):
        """Connections opened after event index of connections(), once a connection that
        was being accepted had settle seconds to be logged. (A "close" event after index
        may belong to an earlier connection, so only openings count.)"""
        time.sleep(settle)
        return [e for e in self.connections()[index:] if e["event"] == "open"]

    def wait_closed(self, opened_before, timeout=30):
        """Wait until at least one connection was opened after event index opened_before of
        connections() and every such connection is closed again; returns those connections'
        events, in order."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.connections()
            ids = {e["id"] for e in ev[opened_before:] if e["event"] == "open"}
            closed = {e["id"] for e in ev if e["event"] == "close"}
            if ids and ids <= closed:
                return [e for e in ev if e["id"] in ids]
            if time.monotonic() > deadline:
                raise AssertionError(f"connections still open after {timeout} s: {ev[opened_before:]}")
            time.sleep(0.05)

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
        self.log.close()
        if not os.environ.get("RTS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def fetch_environment(session_env):
    """An Environment like session_env (same build, same worker image) whose brokerd is the
    fetch build. Builds it first (a check program: `make check` builds it too)."""
    p = subprocess.run(["make", "-C", session_env.builddir, PROGRAM], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise HarnessError(f"cannot build {PROGRAM}: {p.stderr.strip()[-2000:]}")
    env = Environment.prepare(builddir=session_env.builddir, build_image=False, image=session_env.image)
    shutil.copy2(os.path.join(session_env.builddir, PROGRAM), env.program("brokerd"))
    os.chmod(env.program("brokerd"), 0o755)
    return env


class FetchSuite(Suite):
    """A harness.Suite whose brokerd gets the fetch build's seams (env must come from
    fetch_environment())."""

    def __init__(self, env, fake, **kw):
        self.seams_env = fake.brokerd_env()
        super().__init__(env, **kw)

    def start_daemon(self, name, extra_env=None):
        if name == "brokerd":
            extra_env = dict(self.seams_env, **(extra_env or {}))
        super().start_daemon(name, extra_env)
