#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What brokerd's rich listener adds to a streamed model call (issue 16, "Measure").

In one invocation, the same streamed POST /v1/messages N times (default 100) two ways,
interleaved:

  broker  the worker side (rich_rig.WorkerClient, the Anthropic SDK's headers) on a rich
          channel's Unix socket of a real brokerd (rich_rig.RichBrokerRig, this process
          standing in for runnerd: RICH_BIND, BROKER_RICH_TURN), inside an admitted turn;
          brokerd validates and rebuilds the request, reads the OAuth token, opens TLS to
          tests/fakes/fake_anthropic.py and streams the events back;
  direct  straight to the same fake over a fresh TLS connection with the same body.

The fake paces its answer (#sleep TTFB before the head, then #chunks deltas #pace ms apart),
so a broker that buffered instead of streaming would show its first byte near the end.

Reported, medians over N (times from before connecting, on both paths):
  ttfb     time to the first streamed body byte: at the worker through brokerd, and from
           the upstream directly; their ratio (one run)
  total    time to the end of the stream; added latency per call = broker - direct
  streamed how many broker calls had their first byte before the upstream's pacing ended

    sudo RTS_BUILDDIR=build-default tests/bench/rich_stream.py [-n 100] [--json]
         [--ttfb-ms 50] [--chunks 20] [--pace-ms 5] [--via brokerd|stand-in]

--via stand-in runs the same loop through rich_rig.StandIn (a Python forwarder, no brokerd):
a check of this script and a reference for what a trivial streaming proxy costs.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from harness import Environment, HarnessError  # noqa: E402
from rich_rig import MODEL, RichBrokerRig, StandIn, WorkerClient, messages_body  # noqa: E402

CALLS_PER_TURN = 900  # below the rig's maxCalls (1,000): a new turn well before the budget ends


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


class BrokerPath:
    """A bound rich channel with the worker side in this process, inside an admitted turn."""

    def __init__(self, env):
        self.rig = RichBrokerRig(env, rich={"maxCalls": 1000, "turnTimeoutMs": 600000})
        self.ch = self.rig.bind("bench/rich-stream", "bare")
        self.w = WorkerClient(self.ch.path)
        r = self.w.ready()
        if r.status is None or r.status >= 300:
            raise HarnessError(f"/worker/ready: {r.status} {r.body[:200]!r}")
        ready = self.ch.wait_ready()
        if ready["result"] != 0:
            raise HarnessError(f"RICH_READY: {ready}")
        self.turn, self.turn_id, self.used = None, None, CALLS_PER_TURN
        self.anthropic = self.rig.anthropic

    def admit(self):
        if self.turn:
            self.w.result(self.turn_id, "bench done")
            self.turn.done(60)
        self.turn = self.ch.turn("bench", deadline_ms=590000)
        nx = self.w.next()
        if nx.status != 200:
            raise HarnessError(f"/worker/next: {nx.status} {nx.body[:200]!r}")
        self.turn_id = nx.json()["turnId"]
        self.used = 0

    def call(self, body):
        if self.used >= CALLS_PER_TURN:
            self.admit()
        self.used += 1
        return self.w.messages(body)

    def close(self):
        try:
            if self.turn:
                self.w.result(self.turn_id, "bench done")
                self.turn.done(60)
        finally:
            self.rig.stop()


class StandInPath:
    def __init__(self, env):
        self.st = StandIn(env)
        self.w = WorkerClient(self.st.sock)
        self.anthropic = self.st.anthropic

    def call(self, body):
        return self.w.messages(body)

    def close(self):
        self.st.close()


def check(s, what):
    if s.error or s.status != 200 or not s.events or s.events[-1][0] != "message_stop":
        raise RuntimeError(f"{what}: status {s.status} error {s.error!r} events {[n for n, _ in s.events][-3:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100, help="calls each way (default 100)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--ttfb-ms", type=int, default=50, help="the upstream's delay before its answer head")
    ap.add_argument("--chunks", type=int, default=20, help="text deltas per answer")
    ap.add_argument("--pace-ms", type=int, default=5, help="the upstream's delay between events")
    ap.add_argument("--via", choices=("brokerd", "stand-in"), default="brokerd")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    a = ap.parse_args()

    text = f"bench #sleep {a.ttfb_ms} #chunks {a.chunks} #pace {a.pace_ms} " + "lorem ipsum " * 20
    body = messages_body(text, model=MODEL, max_tokens=1024)
    env = Environment.prepare(build_image=False, docker=False)
    path = None
    b_ttfb, b_total, d_ttfb, d_total, streamed = [], [], [], [], 0
    try:
        path = (BrokerPath if a.via == "brokerd" else StandInPath)(env)
        for i in range(a.warmup + a.n):
            b = path.call(body)
            check(b, "through the broker")
            d = path.anthropic.direct(body)
            check(d, "direct")
            if i < a.warmup:
                continue
            b_ttfb.append((b.t_first_body - b.t_start) * 1000)
            b_total.append((b.t_end - b.t_start) * 1000)
            d_ttfb.append((d.t_first_body - d.t_start) * 1000)
            d_total.append((d.t_end - d.t_start) * 1000)
            # The upstream paces about chunks+5 events; a buffering proxy would deliver its
            # first byte only after all of them.
            if (b.t_end - b.t_first_body) * 1000 >= 0.5 * a.chunks * a.pace_ms:
                streamed += 1
    finally:
        if path:
            path.close()
        env.cleanup()

    res = {"n": a.n, "via": a.via, "upstream_ttfb_ms": a.ttfb_ms, "chunks": a.chunks, "pace_ms": a.pace_ms,
           "direct_ttfb_median_ms": statistics.median(d_ttfb), "broker_ttfb_median_ms": statistics.median(b_ttfb),
           "direct_total_median_ms": statistics.median(d_total), "broker_total_median_ms": statistics.median(b_total),
           "direct_total_p95_ms": pct(d_total, 95), "broker_total_p95_ms": pct(b_total, 95),
           "streamed_calls": streamed}
    res["ttfb_ratio"] = res["broker_ttfb_median_ms"] / res["direct_ttfb_median_ms"]
    res["added_per_call_median_ms"] = res["broker_total_median_ms"] - res["direct_total_median_ms"]
    if a.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}))
        return 0
    via = "brokerd" if a.via == "brokerd" else "the Python stand-in"
    print(f"{a.n} streamed calls each way; upstream: {a.ttfb_ms} ms to its head, {a.chunks} deltas "
          f"{a.pace_ms} ms apart; fresh TLS connection per call on both paths")
    print(f"  first streamed byte, direct from the upstream:  median {res['direct_ttfb_median_ms']:7.2f} ms")
    print(f"  first streamed byte at the worker ({via}): median {res['broker_ttfb_median_ms']:7.2f} ms   "
          f"(ratio {res['ttfb_ratio']:.2f}x)")
    print(f"  whole stream, direct:                          median {res['direct_total_median_ms']:7.2f} ms   "
          f"p95 {res['direct_total_p95_ms']:7.2f} ms")
    print(f"  whole stream, through {via}:          median {res['broker_total_median_ms']:7.2f} ms   "
          f"p95 {res['broker_total_p95_ms']:7.2f} ms")
    print(f"  added per streamed call:                       median {res['added_per_call_median_ms']:7.2f} ms")
    print(f"  calls whose first byte came well before the stream ended: {streamed} of {a.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
