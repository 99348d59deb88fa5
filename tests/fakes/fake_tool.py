#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A host tool command for brokerd's tests: configure it as

    "command": ["/usr/bin/python3", "/path/fake_tool.py", OUTDIR]

brokerd writes {"tool", "input", "channel", "speaker"} to its stdin. Host tools run in a
sandbox where they may write only their writePaths (brokerd/toolbox.h), and this one has
none: it sends each record to OUTDIR/recorder.sock, where the test rig
(broker_rig.ToolRecorder) writes it down. Every run appends one JSON line to
OUTDIR/calls.jsonl: {"stdin": what arrived, "pid", "pgid", "sid", "ppid", "pidns",
"cwd", "env" (as exec'd), "fds"} (pids as the sandbox's PID namespace numbers them;
pidns: that namespace, "pid:[inode]"; fds: the descriptors open in the tool). input.mode
picks what it does:

  echo (default)  print {"tool", "input", "channel", "speaker"} as JSON
  say             print input.text exactly (input.hex: bytes given as hex instead)
  fail            print "partial output" and exit 3
  stderr          write input.text to stderr, print "ok"
  big             print input.n bytes of "y"
  sleep           sleep input.ms milliseconds, then print "slept"
  trap            ignore SIGTERM (record it in OUTDIR/<input.tag>.term), start a child in
                  the same process group, write both pids and the PID namespace to
                  OUTDIR/<input.tag>.pids ("PID CHILD pid:[inode]"), and sleep; only
                  SIGKILL ends it
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time


def record(outdir, name, text, mode="a"):
    """Have the rig write text to OUTDIR/name (mode "a" or "w")."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.path.join(outdir, "recorder.sock"))
        s.sendall(json.dumps({"file": name, "mode": mode, "text": text}).encode())
        s.shutdown(socket.SHUT_WR)
        s.recv(16)  # the rig closes once the file is written
    finally:
        s.close()


def exec_environment():
    """The environment the tool was started with (python itself may add LC_CTYPE)."""
    with open("/proc/self/environ", "rb") as f:
        items = [e.decode("utf-8", "replace") for e in f.read().split(b"\0") if e]
    return dict(e.split("=", 1) for e in items)


def open_fds():
    """{fd: what it is} for every descriptor open in this process."""
    out = {}
    for x in os.listdir("/proc/self/fd"):
        try:
            out[int(x)] = os.readlink(f"/proc/self/fd/{x}")
        except OSError:
            pass  # the directory listing's own descriptor, closed by now
    return out


def main():
    outdir = sys.argv[1]
    raw = sys.stdin.buffer.read()
    try:
        stdin = json.loads(raw)
    except ValueError:
        stdin = {"unparsed": raw.decode("utf-8", "replace")}
    record(outdir, "calls.jsonl", json.dumps({"stdin": stdin, "pid": os.getpid(), "pgid": os.getpgrp(),
                                              "sid": os.getsid(0), "ppid": os.getppid(),
                                              "pidns": os.readlink("/proc/self/ns/pid"), "cwd": os.getcwd(),
                                              "env": exec_environment(), "fds": open_fds()}) + "\n")
    args = stdin.get("input") if isinstance(stdin.get("input"), dict) else {}
    mode = args.get("mode", "echo")
    out = sys.stdout.buffer
    if mode == "echo":
        out.write(json.dumps({k: stdin.get(k) for k in ("tool", "input", "channel", "speaker")}).encode())
    elif mode == "say":
        out.write(bytes.fromhex(args["hex"]) if "hex" in args else args.get("text", "").encode())
    elif mode == "fail":
        out.write(b"partial output")
        out.flush()
        return 3
    elif mode == "stderr":
        sys.stderr.write(args.get("text", "") + "\n")
        out.write(b"ok")
    elif mode == "big":
        out.write(b"y" * int(args.get("n", 0)))
    elif mode == "sleep":
        time.sleep(int(args.get("ms", 0)) / 1000.0)
        out.write(b"slept")
    elif mode == "trap":
        tag = args.get("tag", "trap")

        def on_term(signum, frame):
            record(outdir, tag + ".term", "TERM\n")

        signal.signal(signal.SIGTERM, on_term)
        child = subprocess.Popen(["/bin/sleep", "300"])
        record(outdir, tag + ".pids", f"{os.getpid()} {child.pid} {os.readlink('/proc/self/ns/pid')}\n", "w")
        while True:
            signal.pause()  # SIGTERM runs on_term and is otherwise ignored
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
