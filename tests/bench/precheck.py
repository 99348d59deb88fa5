#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a precheck run costs over a bare hardened `docker run` of the same image.

    tests/bench/precheck.py [-n N]     (as root, with dockerd running and node installed;
                                        RTS_BUILDDIR as for the integration tests)

Builds the precheck image from the host's node (worker/precheck/make-context.sh, a tag of
this run's own, removed at the end), starts an installation with the precheck runner (the
three daemons, tests/integration/precheck_suite.py), then alternates N runs of each:
  daemons    a full precheck through the daemons: the "precheck" op on statd's control
             socket to its event, with a script that makes one MCP call through brokerd to
             the local fake upstream over TLS (statd, runnerd's run dir, brokerd's binding,
             docker run of the image, the harness, removal of the run dir)
  trivial    the same through the daemons with a script that calls nothing
  sealed     the harness alone in the same sealed `docker run` (no daemons), trivial script
  bare       `node -e 0` in the same image with the same flags (--entrypoint)
The sealed runs use the precheck's flags (runnerd/docker_args.c's list, 256 MiB, one CPU,
32 processes, a 64 MiB /tmp, a read-only empty workspace, the run dir read-only). Also
times the harness under the host's node without Docker, for scale. Prints the median of
each, their ratios to bare and the image's size. One untimed warm-up of each comes first.
Nothing is asserted: timings depend on the machine.

RTS_PRECHECK_USR_OVERLAY (see tests/integration/precheck_rig.py) builds the image from
another node tree, e.g. Debian's nodejs on a host with another build; the host run still
uses the host's node.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Environment, HarnessError  # noqa: E402
from precheck_rig import PrecheckImage, RunDirs, node_host_argv, run_input, run_plain, run_sealed  # noqa: E402
from precheck_suite import PrecheckSuite  # noqa: E402

TRIVIAL = "export default async () => ({ wake: false })"
ONE_CALL = "export default async ({ mcp }) => ({ wake: true, context: JSON.stringify(await mcp.json('docs', 'echo', {})) })"
EXPECTED = b'{"v":1,"wake":false}\n'


def timed(fn):
    t = time.monotonic()
    fn()
    return (time.monotonic() - t) * 1000.0


def measure(img, uid, gid, n, suite):
    stdin = run_input(TRIVIAL, tools=())
    with RunDirs(uid, gid) as dirs:
        def daemons():
            ev = suite.precheck(ONE_CALL, approved=["docs/echo"])
            if ev.get("context") != "{}":
                raise HarnessError(f"precheck through the daemons failed: {ev}")

        def trivial():
            ev = suite.precheck(TRIVIAL)
            if ev.get("wake") is not False:
                raise HarnessError(f"trivial precheck through the daemons failed: {ev}")

        def precheck():
            r = run_sealed(img.tag, stdin, dirs, uid, gid)
            if r.returncode != 0 or r.stdout != EXPECTED:
                raise HarnessError(f"precheck run failed ({r.returncode}): {r.stdout!r}")

        def bare():
            r = run_sealed(img.tag, b"", dirs, uid, gid, entrypoint="/usr/bin/node", args=("-e", "0"))
            if r.returncode != 0:
                raise HarnessError(f"bare run failed ({r.returncode})")

        def host():
            r = run_plain(stdin, socket_path=dirs.socket)
            if r.returncode != 0 or r.stdout != EXPECTED:
                raise HarnessError(f"host run failed ({r.returncode}): {r.stdout!r}")

        fns = {"daemons": daemons, "trivial": trivial, "sealed": precheck, "bare": bare, "host": host}
        for fn in fns.values():
            fn()
        times = {k: [] for k in fns}
        for _ in range(n):
            for k, fn in fns.items():
                times[k].append(timed(fn))
        return times


def describe(name, xs):
    return (f"{name:<32} median {statistics.median(xs):8.1f} ms   min {min(xs):8.1f}   max {max(xs):8.1f}"
            f"   (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser(description="precheck run vs bare docker run of the same image")
    ap.add_argument("-n", type=int, default=20, help="timed runs of each (default 20)")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("-n must be at least 1")
    env = suite = None
    try:
        env = Environment.prepare()
        uid, gid = env.uid, env.gid
        img = PrecheckImage.build()
    except (HarnessError, subprocess.CalledProcessError) as e:
        print(f"precheck.py: {e}", file=sys.stderr)
        if env:
            env.cleanup()
        return 1
    try:
        size = img.size()
        suite = PrecheckSuite(env, img.tag)
        times = measure(img, uid, gid, a.n, suite)
    except (HarnessError, subprocess.SubprocessError, OSError) as e:
        print(f"precheck.py: {e}", file=sys.stderr)
        return 1
    finally:
        if suite:
            suite.stop()
        for problem in [img.remove()] + env.cleanup():
            if problem:
                print(f"precheck.py: {problem}", file=sys.stderr)
    node = subprocess.run(node_host_argv(["/usr/bin/node", "--version"]), capture_output=True, text=True).stdout.strip()
    print(f"image: {size} bytes ({size / 1e6:.1f} MB), {len(img.context_files)} files, from node {node}")
    print(describe("precheck via daemons (1 MCP call)", times["daemons"]))
    print(describe("precheck via daemons (trivial)", times["trivial"]))
    print(describe("sealed harness run (trivial)", times["sealed"]))
    print(describe("bare docker run (node -e 0)", times["bare"]))
    print(describe("harness on the host (no Docker)", times["host"]))
    bare = statistics.median(times["bare"])
    for k, label in (("daemons", "daemons, 1 MCP call"), ("trivial", "daemons, trivial"),
                     ("sealed", "sealed harness, trivial")):
        print(f"ratio (median {label} / median bare): {statistics.median(times[k]) / bare:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
