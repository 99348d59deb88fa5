#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a precheck run costs over a bare hardened `docker run` of the same image.

    tests/bench/precheck.py [-n N]     (as root, with dockerd running and node installed)

Builds the precheck image from the host's node (worker/precheck/make-context.sh, a tag of
this run's own, removed at the end), then alternates N sealed runs of each:
  precheck   the harness with a trivial script (`export default async () => ({wake:false})`)
             and its JSON input on stdin, answer read from stdout
  bare       `node -e 0` in the same image with the same flags (--entrypoint)
Both use the precheck's flags (runnerd/docker_args.c's list, 256 MiB, one CPU, 32
processes, a 64 MiB /tmp, a read-only empty workspace, the run dir read-only). Also times
the harness under the host's node without Docker, for scale. Prints the median of each,
their ratio and the image's size. One untimed warm-up of each comes first. Nothing is
asserted: timings depend on the machine.

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

TRIVIAL = "export default async () => ({ wake: false })"
EXPECTED = b'{"v":1,"wake":false}\n'


def timed(fn):
    t = time.monotonic()
    fn()
    return (time.monotonic() - t) * 1000.0


def measure(img, uid, gid, n):
    stdin = run_input(TRIVIAL, tools=())
    with RunDirs(uid, gid) as dirs:
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

        precheck()
        bare()
        host()
        pre_ms, bare_ms, host_ms = [], [], []
        for _ in range(n):
            pre_ms.append(timed(precheck))
            bare_ms.append(timed(bare))
            host_ms.append(timed(host))
        return pre_ms, bare_ms, host_ms


def describe(name, xs):
    return (f"{name:<32} median {statistics.median(xs):8.1f} ms   min {min(xs):8.1f}   max {max(xs):8.1f}"
            f"   (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser(description="precheck run vs bare docker run of the same image")
    ap.add_argument("-n", type=int, default=20, help="timed runs of each (default 20)")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("-n must be at least 1")
    try:
        Environment.check_host()
        uid, gid, _ = Environment.ensure_account()
        img = PrecheckImage.build()
    except (HarnessError, subprocess.CalledProcessError) as e:
        print(f"precheck.py: {e}", file=sys.stderr)
        return 1
    try:
        size = img.size()
        pre, bare, host = measure(img, uid, gid, a.n)
    except (HarnessError, subprocess.SubprocessError) as e:
        print(f"precheck.py: {e}", file=sys.stderr)
        return 1
    finally:
        problem = img.remove()
        if problem:
            print(f"precheck.py: {problem}", file=sys.stderr)
    node = subprocess.run(node_host_argv(["/usr/bin/node", "--version"]), capture_output=True, text=True).stdout.strip()
    print(f"image: {size} bytes ({size / 1e6:.1f} MB), {len(img.context_files)} files, from node {node}")
    print(describe("precheck run (trivial)", pre))
    print(describe("bare docker run (node -e 0)", bare))
    print(describe("harness on the host (no Docker)", host))
    print(f"ratio (median precheck / median bare): {statistics.median(pre) / statistics.median(bare):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
