#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How much a sandboxed turn costs over a bare hardened `docker run`, warm and cold.

    tests/bench/turns.py [-n N]        (as root, with dockerd running and the suite built;
                                        RTS_BUILDDIR as for the integration tests)

Times N turns through the whole suite (the CLI's `say` in one channel: statd, runnerd,
the container running the worker, brokerd, and the scripted model endpoint, which
answers at once) in two suites side by side, one with warm spares (each turn claims the
channel's spare, runnerd/spare.h) and one with "warmSpares": 0 (each turn starts its
container), and N bare `docker run --rm -i` of a tiny static program with the same
hardening flags and binds runnerd uses, alternating the three. Before each timed turn the
benchmark waits, untimed, until the warm suite's spare is ready, so the spare's start
never overlaps a timed run. Prints the median of each and their ratios. One untimed
warm-up of each comes first. Nothing is asserted: timings depend on the machine.
"""
import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Environment, HarnessError, Suite, docker, docker_bin, remove_tag, wait_until  # noqa: E402

# A tag of this process's own, so two benchmarks (or a benchmark and someone else) on one
# Docker host never untag each other's image; remove_baseline() removes it.
BASELINE_TAG = f"roundtable-sandbox-bench:baseline-{os.getpid()}-{secrets.token_hex(4)}"
HERE = os.path.dirname(os.path.abspath(__file__))


def build_baseline(tmp):
    """A FROM scratch image holding baseline.c, statically linked."""
    ctx = os.path.join(tmp, "image")
    os.mkdir(ctx)
    subprocess.run([os.environ.get("CC", "cc"), "-static", "-O2", "-o", os.path.join(ctx, "baseline"),
                    os.path.join(HERE, "baseline.c")], check=True)
    with open(os.path.join(ctx, "Dockerfile"), "w", encoding="ascii") as f:
        f.write('FROM scratch\nCOPY baseline /baseline\nUSER 65534:65534\nENTRYPOINT ["/baseline"]\n')
    docker("build", "-q", "-t", BASELINE_TAG, ctx, timeout=300)


def remove_baseline():
    """Remove BASELINE_TAG (only that tag; a no-op when it was never built)."""
    problem = remove_tag(BASELINE_TAG)
    if problem:
        print(f"bench: {problem}", file=sys.stderr)


def baseline_argv(env, workspace, rundir):
    # The argument list of runnerd/docker_args.c with the default limits, minus the labels.
    return [docker_bin(), "run", "-i", "--rm", "--name", "rts-bench-" + secrets.token_hex(8),
            "--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--user", f"{env.uid}:{env.gid}", "--memory", "512m", "--memory-swap", "512m", "--cpus", "1",
            "--pids-limit", "64", "--tmpfs", "/tmp:rw,nosuid,nodev,size=16m", "--log-driver", "none",
            "--pull", "never", "--mount", f"type=bind,source={workspace},target=/workspace",
            "--mount", f"type=bind,source={rundir},target=/run/broker,readonly", BASELINE_TAG]


def timed(fn):
    t = time.monotonic()
    fn()
    return (time.monotonic() - t) * 1000.0


def measure(env, n):
    """Alternate suite turns and bare runs, so a change in machine load hits both alike."""
    tmp = tempfile.mkdtemp(prefix="rts-bench-", dir="/tmp")
    try:
        build_baseline(tmp)
        ws, rd = os.path.join(tmp, "ws"), os.path.join(tmp, "run")
        for d in (ws, rd):
            os.mkdir(d, 0o700)
            os.chown(d, env.uid, env.gid)

        def bare():
            subprocess.run(baseline_argv(env, ws, rd), input=b'{"v":1}\n', check=True, capture_output=True,
                           timeout=60)

        with Suite(env, config={"warmSpares": 1}) as ws_suite, Suite(env, config={"warmSpares": 0}) as cs_suite:
            for s in (ws_suite, cs_suite):
                if s.cli("on", "bench").returncode != 0:
                    raise HarnessError("could not turn the bench channel on")

            def turn(s):
                p = s.cli("say", "bench", "--author", "1", "--name", "Bench", "hello")
                if p.returncode != 0:
                    raise HarnessError(f"turn failed ({p.returncode}): {p.stderr.strip()}\n{s.logs()}")

            def spare_ready():
                wait_until(lambda: metric(ws_suite, "roundtable_sandbox_spares_ready") >= 1, 60,
                           "the warm suite's spare")

            # Warm-up: first workspace, first connections between the daemons, the first spare.
            turn(ws_suite)
            turn(cs_suite)
            bare()
            warm_ms, cold_ms, bare_ms = [], [], []
            for _ in range(n):
                spare_ready()
                warm_ms.append(timed(lambda: turn(ws_suite)))
                spare_ready()
                cold_ms.append(timed(lambda: turn(cs_suite)))
                bare_ms.append(timed(bare))
            # Every timed turn of the warm suite claimed a spare, and none of the cold one.
            claimed = metric(ws_suite, "roundtable_sandbox_spares_claimed_total")
            if claimed != n or metric(cs_suite, "roundtable_sandbox_spares_claimed_total") != 0:
                raise HarnessError(f"expected {n} warm turns, runnerd counted {claimed}")
            return warm_ms, cold_ms, bare_ms
    finally:
        remove_baseline()
        shutil.rmtree(tmp, ignore_errors=True)


def metric(s, name):
    """The value of an unlabelled sample in the suite's `metrics` text."""
    p = s.cli("metrics", timeout=60)
    if p.returncode != 0:
        raise HarnessError(f"metrics failed: {p.stderr.strip()}")
    for line in p.stdout.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise HarnessError(f"{name} missing from the metrics")


def describe(name, xs):
    return (f"{name:<22} median {statistics.median(xs):8.1f} ms   min {min(xs):8.1f}   max {max(xs):8.1f}"
            f"   (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser(description="warm and cold suite turns vs bare docker run")
    ap.add_argument("-n", type=int, default=20, help="timed runs of each (default 20)")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("-n must be at least 1")
    try:
        env = Environment.prepare()
    except HarnessError as e:
        print(f"turns.py: {e}", file=sys.stderr)
        return 1
    try:
        warm, cold, bare = measure(env, a.n)
    except (HarnessError, subprocess.CalledProcessError) as e:
        print(f"turns.py: {e}", file=sys.stderr)
        return 1
    finally:
        for problem in env.cleanup():
            print(f"turns.py: {problem}", file=sys.stderr)
    mw, mc, mb = statistics.median(warm), statistics.median(cold), statistics.median(bare)
    print(describe("warm turn (say)", warm))
    print(describe("cold turn (say)", cold))
    print(describe("bare docker run", bare))
    print(f"ratio warm / cold: {mw / mc:.2f}")
    print(f"ratio warm / bare: {mw / mb:.2f}")
    print(f"ratio cold / bare: {mc / mb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
