#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A host tool (or key command) for tests/integration/test_toolbox.py: it tries what its
sandbox (brokerd/toolbox.h) should or should not let it do, and prints one JSON object
saying how each attempt went: "ok" (or "ok:" and what it read), or the errno's name.

    sandbox_probe.py write DIR [ELSEWHERE...]
        create DIR/<input.name, default "ticket">.txt holding the turn's channel, then try
        to create a file of that name in each ELSEWHERE directory; also write /dev/null
    sandbox_probe.py snoop PIDFILE PATHSFILE
        try each path PATHSFILE lists, one a line (a directory is listed, a socket
        connected to, a file read); then brokerd, whose host pid is in PIDFILE: its /proc
        entries, signal 0 and SIGTERM to it, and SIGTERM to every process this one may
        signal; and list /proc (the test writes both files once brokerd runs)
    sandbox_probe.py fetch URL
        GET URL (loopback in the tests) and report the body
    sandbox_probe.py key KEYFILE PIDFILE REPORTSOCK
        as a key command: send what snoop finds (of brokerd, and of KEYFILE) to the Unix socket
        REPORTSOCK, then print KEYFILE's first line (the key)
"""
import errno
import json
import os
import signal
import socket
import stat
import sys
import urllib.request


def outcome(fn):
    try:
        r = fn()
        return "ok" if r is None else "ok:" + str(r)[:200]
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def touch(path, text):
    def go():
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    return outcome(go)


def attempt(path):
    """List a directory, connect to a socket, read a file."""
    def go():
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            return sorted(os.listdir(path))
        if stat.S_ISSOCK(st.st_mode):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if "control" in path else socket.SOCK_SEQPACKET)
            try:
                s.settimeout(5)
                s.connect(path)
            finally:
                s.close()
            return "connected"
        with open(path, "rb") as f:
            return f.read(64).decode("latin-1")
    return outcome(go)


def snoop(pidfile, paths):
    report = {"paths": {p: attempt(p) for p in paths}}
    pid = int(open(pidfile).read().split()[0])
    for name in ("environ", "mem", "maps", "cmdline", "status"):
        report[name] = outcome(lambda: open(f"/proc/{pid}/{name}", "rb").read(64).decode("latin-1"))
    report["signal0"] = outcome(lambda: os.kill(pid, 0))
    report["sigterm"] = outcome(lambda: os.kill(pid, signal.SIGTERM))
    report["sigterm_all"] = outcome(lambda: os.kill(-1, signal.SIGTERM))
    report["pids"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
    report["self"] = os.getpid()
    return report


def main():
    action, args = sys.argv[1], sys.argv[2:]
    stdin = json.loads(sys.stdin.buffer.read() or b"{}")
    inp = stdin.get("input") if isinstance(stdin.get("input"), dict) else {}
    if action == "write":
        name = inp.get("name", "ticket") + ".txt"
        report = {"mine": touch(os.path.join(args[0], name), stdin.get("channel", "")),
                  "elsewhere": {d: touch(os.path.join(d, name), "no") for d in args[1:]},
                  "devnull": outcome(lambda: open("/dev/null", "w").write("x") and None)}
    elif action == "snoop":
        report = snoop(args[0], open(args[1]).read().split("\n")[:-1])
    elif action == "fetch":
        report = {"body": outcome(lambda: urllib.request.urlopen(args[0], timeout=10).read().decode())}
    elif action == "key":
        keyfile, pidfile, sock = args
        report = snoop(pidfile, [keyfile])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(sock)
        s.sendall(json.dumps(report).encode())
        s.shutdown(socket.SHUT_WR)
        s.recv(16)
        s.close()
        sys.stdout.write(open(keyfile).readline())
        return 0
    else:
        return 2
    sys.stdout.write(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
