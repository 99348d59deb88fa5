# SPDX-License-Identifier: Apache-2.0
"""Each daemon holds only its own privileges (DESIGN.md section 2, issue 5 "Daemon
sandboxing"): no capabilities, no_new_privs, a seccomp allow-list (common/sandbox.c); and
brokerd, which holds the credentials, cannot write any file. The host tools and key commands
it has run do not inherit its filter but run in sandboxes of their own (brokerd/toolbox.h),
where everything but a tool's writePaths is read-only (tests/integration/test_toolbox.py
has the rest)."""
import errno
import json
import os
import shutil
import tempfile

import pytest

from lifecycle_helpers import daemon_pid, proc_status, restart, say

# A host tool that tries to change the file system in every common way and reports what
# happened (errno numbers), plus its own confinement.
WRITER = r'''
import json, os, sys
target = sys.argv[1]
existing = os.path.join(target, "existing")
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return e.errno
sys.stdin.read()
res = {
    "create": attempt(lambda: os.close(os.open(os.path.join(target, "new"), os.O_WRONLY | os.O_CREAT, 0o600))),
    "write_existing": attempt(lambda: os.close(os.open(existing, os.O_WRONLY))),
    "rdwr_existing": attempt(lambda: os.close(os.open(existing, os.O_RDWR))),
    "truncate_open": attempt(lambda: os.close(os.open(existing, os.O_RDONLY | os.O_TRUNC))),
    "tmpfile": attempt(lambda: os.close(os.open(target, os.O_TMPFILE | os.O_WRONLY, 0o600))),
    "dev_null": attempt(lambda: os.close(os.open("/dev/null", os.O_WRONLY))),
    "mkdir": attempt(lambda: os.mkdir(os.path.join(target, "dir"))),
    "unlink": attempt(lambda: os.unlink(existing)),
    "rename": attempt(lambda: os.rename(existing, existing + ".moved")),
    "symlink": attempt(lambda: os.symlink(existing, os.path.join(target, "link"))),
    "chmod": attempt(lambda: os.chmod(existing, 0o644)),
    "truncate": attempt(lambda: os.truncate(existing, 0)),
    "read": attempt(lambda: open(existing, "rb").read()),
}
with open("/proc/self/status") as f:
    st = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
res["seccomp"] = st["Seccomp"].strip()
res["nonewprivs"] = st["NoNewPrivs"].strip()
print(json.dumps(res))
'''

# A key command that tries to leave a file behind, then prints the key anyway.
KEY_WRITER = '''#!/bin/sh
cat >/dev/null 2>&1
echo leaked > "$1/key-was-here" 2>/dev/null
cat "$2"
'''


def test_each_daemon_runs_confined(suite):
    for name in ("statd", "runnerd", "brokerd"):
        st = proc_status(daemon_pid(suite, name))
        assert st["NoNewPrivs"].strip() == "1", name
        assert st["Seccomp"].strip() == "2", name  # filter mode
        if "Seccomp_filters" in st:
            assert st["Seccomp_filters"].strip() == "1", name
        for cap in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
            assert int(st[cap], 16) == 0, (name, cap, st[cap])
        assert st["Uid"].split()[:2] == [str(suite.env.uid)] * 2, name


@pytest.fixture
def tool_suite(make_suite):
    d = tempfile.mkdtemp(prefix="rts-sbx-", dir="/tmp")
    os.chmod(d, 0o755)
    target = os.path.join(d, "target")  # writable for the service account, were it not for the sandbox
    os.mkdir(target, 0o700)
    with open(os.path.join(target, "existing"), "w", encoding="utf-8") as f:
        f.write("keep me\n")
    with open(os.path.join(d, "writer.py"), "w", encoding="utf-8") as f:
        f.write(WRITER)
    key_cmd = os.path.join(d, "key.sh")
    with open(key_cmd, "w", encoding="utf-8") as f:
        f.write(KEY_WRITER)
    os.chmod(key_cmd, 0o755)
    try:
        s = make_suite(config={"tools": [{"name": "writer", "description": "tries to write",
                                          "parameters": {"type": "object"},
                                          "command": ["/usr/bin/python3", "-B", os.path.join(d, "writer.py"), target]}],
                               "apiKey": {"command": [key_cmd, target, os.path.join(d, "api-key")]}})
        # The key command reads the suite's key from a copy the service account may read.
        shutil.copy(s.key_file, os.path.join(d, "api-key"))
        for root, dirs, files in os.walk(target):
            for n in dirs + files + ["."]:
                os.chown(os.path.join(root, n), s.env.uid, s.env.gid)
        os.chown(os.path.join(d, "api-key"), s.env.uid, s.env.gid)
        os.chmod(os.path.join(d, "api-key"), 0o400)
        yield s, target
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_brokerd_children_cannot_write_files(tool_suite):
    s, target = tool_suite
    ch = "guild-7/writer"
    assert s.cli("on", ch).returncode == 0
    p = say(s, ch, "#tools 1 host_writer")
    assert p.returncode == 0, p.stderr + s.logs()
    text = p.stdout.strip()
    assert text.startswith("tool results: "), text
    res = json.loads(text[len("tool results: "):])
    # Every way of opening for writing, creating, truncating or changing a name: refused,
    # the host being read-only in the tool's sandbox (it has no writePaths) ...
    for op in ("create", "write_existing", "rdwr_existing", "truncate_open", "tmpfile", "mkdir",
               "unlink", "rename", "symlink", "chmod", "truncate"):
        assert res[op] == errno.EROFS, (op, res)
    assert res["read"] == "ok"
    # ... where /dev/null works, and no seccomp filter stops an interpreter (brokerd's
    # is not inherited: the launcher was forked before it).
    assert res["dev_null"] == "ok"
    assert (res["seccomp"], res["nonewprivs"]) == ("0", "1")
    assert sorted(os.listdir(target)) == ["existing"]
    with open(os.path.join(target, "existing"), encoding="utf-8") as f:
        assert f.read() == "keep me\n"

    # The key command ran (the model got the key) but could not leave its file.
    assert s.fake.requests()[-1]["headers"]["authorization"] == f"Bearer {s.api_key}"
    assert not os.path.exists(os.path.join(target, "key-was-here"))


def test_brokerd_itself_cannot_remove_its_socket(make_suite):
    """brokerd's own filter: on shutdown it tries to unlink brokerd.sock, which it bound
    before the filter, and is refused; the next start replaces the stale socket."""
    s = make_suite()
    path = os.path.join(s.dirs["rt"], "brokerd.sock")
    before = os.lstat(path)
    s.stop_daemon("brokerd")
    assert s.exit_codes["brokerd"] == 0
    assert os.lstat(path).st_ctime_ns == before.st_ctime_ns  # still there
    restart(s, "brokerd")
    assert os.lstat(path).st_ctime_ns != before.st_ctime_ns  # a new socket
    assert s.cli("on", "guild-7/after").returncode == 0
    assert say(s, "guild-7/after", "hi").returncode == 0
