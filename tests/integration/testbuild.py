# SPDX-License-Identifier: Apache-2.0
"""The integration tests' own builds of brokerd and runnerd (tests/testbuild/Makemodule.am,
HACKING.md "Test builds"), for rules a production binary gives no handle on:

    brokerd  the upstream deadline lowered from the seed's 60 s, at compile time;
    runnerd  its docker CLI is a wrapper (tests/fakes/docker-calls.in) that logs every call
             (time, pid, arguments, end) to <runRoot>/docker-calls.log and execs the real
             CLI; it runs from the path configure chose (--with-test-docker-wrapper, by
             default /run/rts-testbuild-N/docker-calls), where this module installs it.

testbuild_environment(host_env) (fixture tb_env) is an Environment whose bindir holds these
two in place of the production ones (statd and the CLI are the production programs),
sharing the session's worker image. Suites started from it run exactly like any other; like
the session's, it needs Docker only for them (a test starting one asks for rts_env too).
"""
import os
import shutil
import stat
import subprocess

import pytest

from harness import RUNNER_USER, SERVICE_USER, Environment, HarnessError, wait_until

PROGRAMS = {"brokerd": "tests/testbuild/roundtable-sandbox-brokerd",
            "runnerd": "tests/testbuild/roundtable-sandbox-runnerd"}
WRAPPER = "tests/testbuild/docker-calls"
CALL_LOG = "docker-calls.log"
CONTROL = "docker-calls.ctl"
US = "\x1f"


def build(builddir):
    """Make the test builds in builddir (check programs: `make check` builds them too).
    Returns the path the test runnerd runs its docker CLI from."""
    targets = list(PROGRAMS.values()) + [WRAPPER]
    p = subprocess.run(["make", "-C", builddir, *targets], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise HarnessError(f"cannot build the test builds: {p.stderr.strip()[-2000:]}")
    p = subprocess.run(["make", "-s", "--no-print-directory", "-C", builddir, "testbuild-docker-path"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    path = p.stdout.strip()
    if p.returncode != 0 or not os.path.isabs(path):
        raise HarnessError(f"cannot ask {builddir} where the docker wrapper goes: {p.stderr.strip()}")
    return path


def install_wrapper(builddir, path):
    """Put the built wrapper at path (root's, 0755, replaced atomically: another session of
    the same build tree may be using it). Its directory is created root-owned 0755 and must
    be nobody else's: the service account executes what is in it."""
    d = os.path.dirname(path)
    try:
        os.mkdir(d, 0o755)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise HarnessError(f"{d} is not a directory of root's that only root may write")
    tmp = f"{path}.{os.getpid()}.tmp"
    shutil.copyfile(os.path.join(builddir, WRAPPER), tmp)
    os.chmod(tmp, 0o755)
    os.rename(tmp, path)


def testbuild_environment(session_env):
    """An Environment running the test builds of brokerd and runnerd, with the session's
    image. Its cleanup() removes only what it built itself (a probe image, if asked); the
    installed wrapper stays for the next session of this build tree."""
    wrapper = build(session_env.builddir)
    install_wrapper(session_env.builddir, wrapper)
    for account in (SERVICE_USER, RUNNER_USER):  # runnerd's, in either mode
        p = subprocess.run(["runuser", "-u", account, "--", "test", "-x", wrapper], stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise HarnessError(f"{account} cannot execute {wrapper}")
    env = Environment.prepare(builddir=session_env.builddir, build_image=False, docker=False, parent=session_env)
    for name, rel in PROGRAMS.items():
        shutil.copy2(os.path.join(session_env.builddir, rel), env.program(name))
        os.chmod(env.program(name), 0o755)
    env.docker_wrapper = wrapper
    return env


@pytest.fixture(scope="module")
def tb_env(host_env):
    try:
        env = testbuild_environment(host_env)
    except HarnessError as e:
        pytest.fail(f"the test builds are not usable: {e}", pytrace=False)
    yield env
    env.cleanup()


# ---- the wrapper's call log ----

class Call:
    """One docker CLI run as the wrapper logged it."""

    def __init__(self, pid, start, args):
        self.pid = pid
        self.start = start
        self.args = args
        self.end = None
        self.hang = False
        self.created = None  # late-create: when its container appeared

    def __repr__(self):
        return f"Call(pid={self.pid}, start={self.start:.3f}, end={self.end}, args={self.args[:4]}...)"


def calls(suite):
    """Every docker CLI call of this suite's runnerd so far, in start order."""
    path = os.path.join(suite.dirs["run"], CALL_LOG)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    out, by_pid = [], {}
    for line in lines:
        head, _, rest = line.partition(US)
        t, pid, event = head.split(" ")
        if event == "start":
            c = Call(int(pid), float(t), rest.split(US) if rest else [])
            out.append(c)
            by_pid[c.pid] = c
        elif event == "end":
            by_pid[int(pid)].end = float(t)
        elif event == "hang":
            by_pid[int(pid)].hang = True
        elif event == "created":
            by_pid[int(pid)].created = float(t)
    return out


def calls_for(suite, name):
    """The calls naming container name: its `run` (by --name) and its removals."""
    return [c for c in calls(suite)
            if (c.args[:1] == ["run"] and "--name" in c.args and c.args[c.args.index("--name") + 1] == name)
            or c.args == ["rm", "-f", name]]


def wait_ended(suite, name, n, timeout=30):
    """Wait until n calls naming container name were logged and all of them ended."""
    def ended():
        cs = calls_for(suite, name)
        return cs if len(cs) >= n and all(c.end is not None for c in cs) else None
    try:
        return wait_until(ended, timeout, f"{n} ended docker calls for {name}")
    except AssertionError as e:
        raise AssertionError(f"{e}; have {calls_for(suite, name)}") from None


def control(suite, *lines):
    """Replace the wrapper's control file (owned by runnerd's account, like runRoot)."""
    path = os.path.join(suite.dirs["run"], CONTROL)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.chown(path, suite.account("runnerd").uid, suite.account("runnerd").gid)
