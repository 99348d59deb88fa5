#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Concurrent turns: the suite against bare `docker run`, and what the daemons leak and weigh.

    tests/bench/concurrency.py [-c CHANNELS] [-n TURNS] [--warm-spares 0|1] [--json]
        (as root, with dockerd running and the suite built; RTS_BUILDDIR as for the
        integration tests)

In one invocation: CHANNELS channels (default 8) each run TURNS turns (default 6) one after
the other, all channels at once, through the whole suite (the CLI's `say`: statd, runnerd,
a new container running the worker, brokerd, and the scripted model endpoint answering at
once); then the same number of bare `docker run --rm -i` of a static program with the same
hardening flags and binds (tests/bench/turns.py's baseline), CHANNELS in parallel. The two
phases alternate twice, so a drift in machine load hits both.

Prints throughput (turns or runs per second of wall time), the median and p95 latency of
each and their ratios, the overhead (suite minus bare, at the median and p95), failures,
and what was left behind once the load stopped: containers of the installation, open fds
of each daemon beyond their idle count, and per-turn run dirs. Each daemon's RSS is
reported idle (before the load) and at its peak under load (sampled every 50 ms). Exits 1
when a turn failed or anything leaked. --warm-spares sets the suite's "warmSpares" (default
0, every turn cold; 1: each channel's spare is ready before the load starts, and the one
spare per channel left at the end, with its run dir, is not a leak); run it both ways to
compare.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import shutil
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import Environment, HarnessError, Suite, docker, wait_until  # noqa: E402
from turns import baseline_argv, build_baseline, remove_baseline  # noqa: E402

DAEMONS = ("statd", "runnerd", "brokerd")


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(0.95 * len(xs))) - 1))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid):
    out = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            out.append(f"{fd}:{os.readlink(f'/proc/{pid}/fd/{fd}')}")
        except OSError:
            pass
    return out


class Sampler(threading.Thread):
    """Peak RSS of each daemon while the load runs."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = {n: 0 for n in pids}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for n, pid in self.pids.items():
                try:
                    self.peak[n] = max(self.peak[n], rss_kib(pid))
                except OSError:
                    pass
            self.stop.wait(0.05)


def parallel(workers, per_worker, job):
    """workers threads, each running job(worker, i) per_worker times in a row. Returns
    (latencies in ms, failures, wall seconds)."""
    lat, fails, lock = [], [], threading.Lock()

    def work(w):
        for i in range(per_worker):
            t = time.monotonic()
            err = job(w, i)
            ms = (time.monotonic() - t) * 1000.0
            with lock:
                if err:
                    fails.append(err)
                else:
                    lat.append(ms)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, fails, time.monotonic() - t0


def spare_containers(s):
    """This suite's warm spares (runnerd/spare.h), by their label."""
    return docker("ps", "-a", "--filter", f"label=io.roundtable-sandbox.installation={s.installation}",
                  "--filter", "label=io.roundtable-sandbox.spare=1", "--format", "{{.Names}}",
                  timeout=30).stdout.split()


def run(env, channels, turns, warm_spares=0):
    tmp = tempfile.mkdtemp(prefix="rts-bench-", dir="/tmp")
    try:
        build_baseline(tmp)
        dirs = []
        for w in range(channels):
            ws, rd = os.path.join(tmp, f"ws{w}"), os.path.join(tmp, f"run{w}")
            for d in (ws, rd):
                os.mkdir(d, 0o700)
                os.chown(d, env.uid, env.gid)
            dirs.append((ws, rd))

        def bare(w, i):
            p = subprocess.run(baseline_argv(env, *dirs[w]), input=b'{"v":1}\n', capture_output=True, timeout=120)
            return None if p.returncode == 0 else f"bare run: exit {p.returncode}: {p.stderr[-200:]!r}"

        with Suite(env, config={"warmSpares": warm_spares}) as s:
            names = [f"bench/c{w}" for w in range(channels)]
            for n in names:
                if s.cli("on", n).returncode != 0:
                    raise HarnessError("could not turn a bench channel on")

            def turn(w, i):
                p = s.cli("say", names[w], "--author", str(w + 1), "--name", "Bench", f"hello {i}")
                return None if p.returncode == 0 else f"turn: exit {p.returncode}: {p.stderr.strip()}"

            # Warm-up, untimed: every channel's first workspace, the daemon links, the caches.
            _, fails, _ = parallel(channels, 1, turn)
            parallel(channels, 1, bare)
            if fails:
                raise HarnessError(f"warm-up turn failed: {fails[0]}\n{s.logs()}")
            time.sleep(1.0)
            if warm_spares:
                wait_until(lambda: len(spare_containers(s)) == channels, 120, "every channel's spare")

            pids = {n: s._daemon_pid(s.procs[n]) for n in DAEMONS}
            idle_rss = {n: rss_kib(p) for n, p in pids.items()}
            idle_fds = {n: fd_count(p) for n, p in pids.items()}
            idle_fd_list = {n: fd_targets(p) for n, p in pids.items()}
            sampler = Sampler(pids)
            sampler.start()
            suite_lat, bare_lat, failures = [], [], []
            suite_wall = bare_wall = 0.0
            for _ in range(2):
                lat, fails, wall = parallel(channels, turns // 2 + turns % 2, turn)
                suite_lat += lat
                failures += fails
                suite_wall += wall
                lat, fails, wall = parallel(channels, turns // 2 + turns % 2, bare)
                bare_lat += lat
                failures += fails
                bare_wall += wall
            sampler.stop.set()
            sampler.join()

            # Let the last clean-ups (second removals, closer threads) finish: up to 10 s
            # for every daemon to be back at its idle descriptor count.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(fd_count(p) > idle_fds[n] for n, p in pids.items()):
                time.sleep(0.2)
            if warm_spares:
                wait_until(lambda: len(spare_containers(s)) == channels, 120, "every channel's next spare")
            spares = len(spare_containers(s)) if warm_spares else 0
            leaks = {
                "containers": len(s.containers()) - spares,
                "run_dirs": len([e for e in os.listdir(s.dirs["run"]) if len(e) == 16]) - spares,
                "fds": {n: fd_count(p) - idle_fds[n] for n, p in pids.items()},
            }
            bench_left = docker("ps", "-a", "--filter", "name=rts-bench-", "--format", "{{.Names}}",
                                timeout=30).stdout.split()
            leaks["bare_containers"] = len(bench_left)
            leaks["fd_detail"] = {n: sorted(set(fd_targets(p)) - set(idle_fd_list[n])) for n, p in pids.items()
                                  if fd_count(p) != idle_fds[n]}
            return {
                "warm_spares": warm_spares,
                "channels": channels,
                "turns_per_channel": 2 * (turns // 2 + turns % 2),
                "suite": {"n": len(suite_lat), "throughput_per_s": len(suite_lat) / suite_wall,
                          "median_ms": statistics.median(suite_lat), "p95_ms": p95(suite_lat)},
                "bare": {"n": len(bare_lat), "throughput_per_s": len(bare_lat) / bare_wall,
                         "median_ms": statistics.median(bare_lat), "p95_ms": p95(bare_lat)},
                "failures": failures,
                "leaks": leaks,
                "rss_kib": {n: {"idle": idle_rss[n], "peak_under_load": sampler.peak[n]} for n in DAEMONS},
            }
    finally:
        remove_baseline()
        shutil.rmtree(tmp, ignore_errors=True)


def report(r):
    su, ba = r["suite"], r["bare"]
    print(f"{r['channels']} channels x {r['turns_per_channel']} turns, concurrently, warmSpares {r['warm_spares']}; "
          "bare runs likewise")
    print(f"{'':16}{'throughput/s':>14}{'median ms':>12}{'p95 ms':>10}{'n':>6}")
    for name, x in (("suite turn", su), ("bare docker run", ba)):
        print(f"{name:16}{x['throughput_per_s']:14.2f}{x['median_ms']:12.1f}{x['p95_ms']:10.1f}{x['n']:6d}")
    print(f"ratio suite/bare: throughput {su['throughput_per_s'] / ba['throughput_per_s']:.2f}, "
          f"median {su['median_ms'] / ba['median_ms']:.2f}, p95 {su['p95_ms'] / ba['p95_ms']:.2f}")
    print(f"overhead (suite - bare): median {su['median_ms'] - ba['median_ms']:.1f} ms, "
          f"p95 {su['p95_ms'] - ba['p95_ms']:.1f} ms")
    print(f"failures: {len(r['failures'])}" + (f" (first: {r['failures'][0]})" if r["failures"] else ""))
    lk = r["leaks"]
    print(f"left behind: containers {lk['containers']} (bare {lk['bare_containers']}), run dirs {lk['run_dirs']}, "
          "fds " + ", ".join(f"{n} {v:+d}" for n, v in lk["fds"].items()))
    for n, extra in lk["fd_detail"].items():
        print(f"  {n} holds beyond idle: {' '.join(extra)}")
    print("RSS KiB (idle -> peak under load): " +
          ", ".join(f"{n} {v['idle']} -> {v['peak_under_load']}" for n, v in r["rss_kib"].items()))


def main():
    ap = argparse.ArgumentParser(description="concurrent suite turns vs bare docker runs")
    ap.add_argument("-c", "--channels", type=int, default=8, help="channels at once (default 8)")
    ap.add_argument("-n", "--turns", type=int, default=6, help="turns per channel (default 6, made even)")
    ap.add_argument("--warm-spares", type=int, choices=(0, 1), default=0,
                    help="the suite's warmSpares (default 0: cold turns)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object too")
    a = ap.parse_args()
    if a.channels < 1 or a.turns < 1:
        ap.error("-c and -n must be at least 1")
    try:
        env = Environment.prepare()
    except HarnessError as e:
        print(f"concurrency.py: {e}", file=sys.stderr)
        return 1
    try:
        r = run(env, a.channels, a.turns, a.warm_spares)
    except (HarnessError, subprocess.CalledProcessError) as e:
        print(f"concurrency.py: {e}", file=sys.stderr)
        return 1
    finally:
        for problem in env.cleanup():
            print(f"concurrency.py: {problem}", file=sys.stderr)
    report(r)
    if a.json:
        print(json.dumps(r))
    lk = r["leaks"]
    leaked = lk["containers"] or lk["run_dirs"] or lk["bare_containers"] or any(lk["fds"].values())
    return 1 if r["failures"] or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
