# SPDX-License-Identifier: Apache-2.0
"""doctor and what mode bits do not show (cli/doctor_sockets.c, cli/doctor_inputs.c; issue
12): an ACL entry that lets the guest account into the runtime directory or a daemon's
socket, into runRoot or the state directory; a config file, or its directory, that an
account other than root may change; a key file that is a symbolic link. Each is made on a
running accounts-mode installation, seen as a FAIL that names the fix, and undone; doctor
passes before and after, so each FAIL is that problem's."""
import os

import pytest

from harness import setfacl
from test_doctor import doctor


def fails(suite, check, *words, config=None, offline=False):
    """doctor fails, the first FAIL line is check's and holds each of words."""
    p, lines = doctor(suite, *(["--offline"] if offline else []), config=config)
    bad = [ln for ln in lines if ln.startswith("FAIL: ")]
    assert p.returncode == 1 and bad, p.stdout
    assert bad[0].startswith(f"FAIL: {check}: "), (check, bad)
    for w in words:
        assert w in bad[0], (w, bad[0])


def passes(suite, offline=False, config=None):
    p, lines = doctor(suite, *(["--offline"] if offline else []), config=config)
    assert p.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], p.stdout
    return lines


@pytest.fixture(scope="module")
def acc(suite):
    assert suite.accounts
    return suite.env.accounts


def test_doctor_sees_an_acl_entry_on_the_runtime_dir(suite, acc):
    guest, rt = acc["guest"], suite.dirs["rt"]
    lines = passes(suite)
    assert any(ln.startswith(f"ok: runtime dir: {rt}") for ln in lines)
    setfacl("-m", f"u:{guest.uid}:x", rt)
    try:
        fails(suite, "runtime dir", f"{rt} has an ACL entry granting uid {guest.uid}", '"--x"',
              "reach the daemons' sockets", f"fix: setfacl -x u:{guest.uid} {rt}")
    finally:
        setfacl("-x", f"u:{guest.uid}", rt)
    passes(suite)


@pytest.mark.parametrize("sock", ["control.sock", "runnerd.sock", "brokerd.sock"])
def test_doctor_sees_an_acl_entry_on_a_socket(suite, acc, sock):
    guest = acc["guest"]
    path = os.path.join(suite.dirs["rt"], sock)
    passes(suite)
    setfacl("-m", f"u:{guest.uid}:rw", path)
    risk = "switch a channel's mode" if sock == "control.sock" else "speak for a daemon"
    try:
        fails(suite, sock, f"{path} has an ACL entry granting uid {guest.uid}", '"rw-"', risk,
              f"fix: setfacl -x u:{guest.uid} {path}")
    finally:
        setfacl("-x", f"u:{guest.uid}", path)
    passes(suite)


@pytest.mark.parametrize("which", ["runRoot", "state dir"])
def test_doctor_sees_an_acl_entry_on_a_private_root(suite, acc, which):
    guest = acc["guest"]
    path = suite.dirs["run"] if which == "runRoot" else suite.dirs["state"]
    setfacl("-m", f"u:{guest.uid}:x", path)
    try:
        fails(suite, which, "ACL entry for another account", f"setfacl -b {path}", offline=True)
    finally:
        setfacl("-x", f"u:{guest.uid}", path)
        setfacl("-k", path)
    passes(suite, offline=True)


def test_doctor_sees_who_may_change_the_config(suite, acc):
    svc = acc["service"]
    etc, conf = suite.dirs["etc"], suite.config_path
    passes(suite, offline=True)
    # Its directory owned by the service account, which could replace the file.
    st = os.stat(etc)
    os.chown(etc, svc.uid, st.st_gid)
    try:
        fails(suite, "config file", f"{etc}, the config file's directory, can be changed by its owner uid {svc.uid}",
              f"fix: chown root:root {etc}", offline=True)
    finally:
        os.chown(etc, st.st_uid, st.st_gid)
    # Or letting it write by an ACL entry.
    setfacl("-m", f"u:{svc.uid}:rwx", etc)
    try:
        fails(suite, "config file", f"{etc} has an ACL entry granting uid {svc.uid}", "replace the config file",
              f"fix: setfacl -x u:{svc.uid} {etc}", offline=True)
    finally:
        setfacl("-x", f"u:{svc.uid}", etc)
    # The file itself writable by an ACL entry (its mode bits show only the mask).
    setfacl("-m", f"u:{svc.uid}:rw", conf)
    try:
        fails(suite, "config file", f"{conf} has an ACL entry granting uid {svc.uid}",
              f"fix: setfacl -x u:{svc.uid} {conf}", offline=True)
    finally:
        setfacl("-x", f"u:{svc.uid}", conf)
    # Read-only entries are fine: the package's upgrade lets the accounts read it so.
    setfacl("-m", f"u:{acc['guest'].uid}:r", conf)
    try:
        passes(suite, offline=True)
    finally:
        setfacl("-x", f"u:{acc['guest'].uid}", conf)
    passes(suite, offline=True)


def test_doctor_refuses_a_linked_key_file(suite, acc):
    """doctor looks at the key file itself (lstat), as brokerd reads it."""
    broker = acc["broker"]
    key = suite.key_file
    vault = os.path.join(suite.root, "vault")
    os.mkdir(vault, 0o700)
    os.chown(vault, broker.uid, broker.gid)
    real = os.path.join(vault, "api-key")
    os.rename(key, real)
    os.symlink(real, key)
    try:
        fails(suite, "apiKey", f"{key} is a symbolic link, which brokerd refuses to read",
              f'fix: mv "$(readlink -f {key})" {key}', offline=True)
    finally:
        os.unlink(key)
        os.rename(real, key)
        os.rmdir(vault)
    passes(suite, offline=True)
