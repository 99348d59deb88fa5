#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How much latency brokerd adds to a model call.

In one invocation, the same POST /model request N times (default 200) three ways,
interleaved:

  broker        over a turn's Unix socket to a real brokerd (running as the service
                account, as in tests/integration/broker_rig.py): the gate,
                libmicrohttpd, validation and rebuild, the credential read, libcurl to the
                local HTTPS endpoint, the answer's checks and rebuild;
  direct-kept   straight to the same local HTTPS endpoint (tests/fakes/fake_model.py) with
                the body brokerd would send and the real key, on one kept connection, as
                brokerd keeps its upstream connections;
  direct-fresh  the same, opening a new TCP connection and TLS session per request (what
                a client without a connection pool does, and what brokerd did before it
                kept connections).

The worker opens a new connection to brokerd per request (the broker contract); brokerd
keeps its upstream connection. A turn allows 48 calls: a new turn is bound every 48
requests, outside the timed part.

Also brokerd's resident memory (VmRSS): idle right after start, the highest seen while
the requests ran (sampled between requests), and idle again at the end.

    sudo RTS_BUILDDIR=build tests/bench/broker_latency.py [-n 200] [--upstream-ms MS] [--json]

--upstream-ms MS makes the local endpoint take MS milliseconds per answer ("#sleep MS" in
the user message, tests/fakes/fake_model.py), for all three clients alike. With the default
0 the endpoint answers in well under a millisecond, so the ratios compare brokerd's fixed
hop (a new Unix-socket connection, the gate, validation and rebuild) against almost
nothing; a real model's time to answer is tens of milliseconds at least, and the ratio
against it is the figure a guest feels. The added milliseconds are the same either way.

Prints median and p95 for each, the latency brokerd adds against each direct client
(median broker - median direct) and the ratios. Targets (issue 15): broker/direct-kept at
most 1.1, broker/direct-fresh below 1.0. Anchor: a popular LLM proxy documents about 3 ms
added per call.
"""
import argparse
import http.client
import json
import os
import ssl
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from broker_rig import BrokerRig, exchange, request_bytes  # noqa: E402
from harness import Environment  # noqa: E402

CALLS_PER_TURN = 48
REQUEST = {"messages": [{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "hello, how far is the moon?"}],
           "max_tokens": 256}


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


HEADERS_DIRECT = {"Content-Type": "application/json", "Accept": "application/json"}


def direct_call(conn, body, key):
    """One request on conn (an http.client.HTTPSConnection, kept or new)."""
    conn.request("POST", "/v1/chat/completions", body=body, headers=dict(HEADERS_DIRECT, Authorization="Bearer " + key))
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"direct call: HTTP {r.status}")
    return data


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def memory(pid):
    """VmRSS split up (KiB, /proc/PID/smaps_rollup): Rss, Pss (shared pages divided among
    the processes mapping them), Anonymous (heap, stacks: brokerd's own) and the rest,
    file pages of the shared libraries."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss", "Anonymous", "Private_Dirty"):
                out[k] = int(v.split()[0])
    return out


def daemon_pid(launcher_pid, exe):
    """The daemon's pid: runuser (launcher_pid) forks it."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == launcher_pid and os.readlink(f"/proc/{d}/exe").endswith(os.path.basename(exe)):
                return int(d)
        except (OSError, ValueError, IndexError):
            continue
    raise RuntimeError("brokerd's process not found")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="requests each way (default 200)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--upstream-ms", type=int, default=0,
                    help="the local endpoint's time per answer in ms (default 0)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    a = ap.parse_args()

    request = REQUEST
    if a.upstream_ms > 0:
        msgs = [dict(m) for m in REQUEST["messages"]]
        msgs[-1]["content"] += f" #sleep {a.upstream_ms}"
        request = dict(REQUEST, messages=msgs)

    env = Environment.prepare(build_image=False)
    rig = BrokerRig(env, config={"turnTimeoutMs": 600000})
    try:
        pid = daemon_pid(rig.procs["brokerd"].pid, env.program("brokerd"))
        rss_idle_start = rss_kib(pid)
        mem_start = memory(pid)
        # The body brokerd sends upstream for REQUEST (model, stream and max_tokens set).
        up_body = json.dumps(dict(request, model=rig.config["model"], stream=False)).encode()
        ctx = ssl.create_default_context(cafile=os.path.join(rig.dirs["ca"], "ca.pem"))
        kept = http.client.HTTPSConnection("localhost", rig.fake.port, context=ctx, timeout=30)
        req = request_bytes("/model", request)
        times = {"broker": [], "direct_kept": [], "direct_fresh": []}
        rss_peak = rss_idle_start
        turn, used = None, CALLS_PER_TURN
        for i in range(a.warmup + a.n):
            if used == CALLS_PER_TURN:
                if turn:
                    turn.close()
                turn, used = rig.turn(deadline_ms=590000), 0
            t0 = time.perf_counter()
            ans = exchange(turn.path, [req], timeout=30)
            t1 = time.perf_counter()
            used += 1
            if ans.status != 200:
                raise RuntimeError(f"broker call: {ans.status} {ans.body[:200]!r}")
            direct_call(kept, up_body, rig.api_key)
            t2 = time.perf_counter()
            fresh = http.client.HTTPSConnection("localhost", rig.fake.port, context=ctx, timeout=30)
            try:
                direct_call(fresh, up_body, rig.api_key)
            finally:
                fresh.close()
            t3 = time.perf_counter()
            if i >= a.warmup:
                times["broker"].append((t1 - t0) * 1000)
                times["direct_kept"].append((t2 - t1) * 1000)
                times["direct_fresh"].append((t3 - t2) * 1000)
            rss_peak = max(rss_peak, rss_kib(pid))
        turn.close()
        kept.close()
        rss_idle_end = rss_kib(pid)
        mem_end = memory(pid)
    finally:
        rig.stop()
        env.cleanup()

    res = {"n": a.n, "upstream_ms": a.upstream_ms}
    for k, v in times.items():
        res[f"{k}_median_ms"] = statistics.median(v)
        res[f"{k}_p95_ms"] = pct(v, 95)
    for d in ("direct_kept", "direct_fresh"):
        res[f"added_vs_{d}_median_ms"] = res["broker_median_ms"] - res[f"{d}_median_ms"]
        res[f"ratio_vs_{d}"] = res["broker_median_ms"] / res[f"{d}_median_ms"]
    res.update(brokerd_rss_idle_start_kib=rss_idle_start, brokerd_rss_peak_kib=rss_peak,
               brokerd_rss_idle_end_kib=rss_idle_end,
               **{f"brokerd_start_{k.lower()}_kib": v for k, v in mem_start.items()},
               **{f"brokerd_end_{k.lower()}_kib": v for k, v in mem_end.items()})
    if a.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}))
        return 0
    print(f"{a.n} requests each way, interleaved; the endpoint takes {a.upstream_ms} ms per answer")
    print(f"  direct, kept connection:      median {res['direct_kept_median_ms']:7.2f} ms   "
          f"p95 {res['direct_kept_p95_ms']:7.2f} ms")
    print(f"  direct, new TLS per request:  median {res['direct_fresh_median_ms']:7.2f} ms   "
          f"p95 {res['direct_fresh_p95_ms']:7.2f} ms")
    print(f"  through brokerd:              median {res['broker_median_ms']:7.2f} ms   "
          f"p95 {res['broker_p95_ms']:7.2f} ms")
    print(f"  brokerd vs direct kept:       {res['added_vs_direct_kept_median_ms']:+7.2f} ms   "
          f"ratio {res['ratio_vs_direct_kept']:.2f} (target <= 1.1)")
    print(f"  brokerd vs direct new TLS:    {res['added_vs_direct_fresh_median_ms']:+7.2f} ms   "
          f"ratio {res['ratio_vs_direct_fresh']:.2f} (target < 1.0)")
    print(f"  brokerd VmRSS: idle {rss_idle_start} KiB at start, peak {rss_peak} KiB under load, "
          f"idle {rss_idle_end} KiB after (target: at most 8192 KiB idle)")
    for when, m in (("start", mem_start), ("end", mem_end)):
        print(f"    {when}: Rss {m['Rss']} KiB = anonymous {m['Anonymous']} KiB + library file pages "
              f"{m['Rss'] - m['Anonymous']} KiB; Pss {m['Pss']} KiB; Private_Dirty {m['Private_Dirty']} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
