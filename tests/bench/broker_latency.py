#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How much latency brokerd adds to a model call.

In one invocation, the same POST /model request N times (default 200) two ways, interleaved:

  broker  over a turn's Unix socket to a real brokerd (running as the service account, as
          in tests/integration/broker_rig.py): the gate, libmicrohttpd, validation and
          rebuild, the credential read, libcurl to the local HTTPS endpoint, the answer's
          checks and rebuild;
  direct  straight to the same local HTTPS endpoint (tests/fakes/fake_model.py) with the body
          brokerd would send and the real key.

brokerd opens a fresh TCP connection and TLS session for every upstream call (a new libcurl
easy handle each time: no connection reuse, no session resumption, the CA file loaded each
time), so the direct side also opens a fresh TLS connection per request (its SSLContext,
with the test CA, is made once). A turn allows 48 calls: a new turn is bound every 48
requests, outside the timed part.

    sudo RTS_BUILDDIR=build tests/bench/broker_latency.py [-n 200] [--json]

Prints median and p95 for both, the added latency (median broker - median direct) and the
ratio. Anchor: a popular LLM proxy documents about 3 ms added per call.
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


def direct_call(ctx, port, body, key):
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json",
                              "Accept": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"direct call: HTTP {r.status}")
        return data
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="requests each way (default 200)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    a = ap.parse_args()

    env = Environment.prepare(build_image=False)
    rig = BrokerRig(env, config={"turnTimeoutMs": 600000})
    try:
        # The body brokerd sends upstream for REQUEST (model, stream and max_tokens set).
        up_body = json.dumps(dict(REQUEST, model=rig.config["model"], stream=False)).encode()
        ctx = ssl.create_default_context(cafile=os.path.join(rig.dirs["ca"], "ca.pem"))
        req = request_bytes("/model", REQUEST)
        broker_ms, direct_ms = [], []
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
            t2 = time.perf_counter()
            direct_call(ctx, rig.fake.port, up_body, rig.api_key)
            t3 = time.perf_counter()
            if i >= a.warmup:
                broker_ms.append((t1 - t0) * 1000)
                direct_ms.append((t3 - t2) * 1000)
        turn.close()
    finally:
        rig.stop()
        env.cleanup()

    res = {
        "n": a.n,
        "broker_median_ms": statistics.median(broker_ms),
        "broker_p95_ms": pct(broker_ms, 95),
        "direct_median_ms": statistics.median(direct_ms),
        "direct_p95_ms": pct(direct_ms, 95),
    }
    res["added_median_ms"] = res["broker_median_ms"] - res["direct_median_ms"]
    res["added_p95_ms"] = res["broker_p95_ms"] - res["direct_p95_ms"]
    res["ratio_median"] = res["broker_median_ms"] / res["direct_median_ms"]
    if a.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}))
        return 0
    print(f"{a.n} requests each way (fresh TLS connection per call on both paths)")
    print(f"  direct to the HTTPS endpoint: median {res['direct_median_ms']:7.2f} ms   "
          f"p95 {res['direct_p95_ms']:7.2f} ms")
    print(f"  through brokerd:              median {res['broker_median_ms']:7.2f} ms   "
          f"p95 {res['broker_p95_ms']:7.2f} ms")
    print(f"  added by brokerd:             median {res['added_median_ms']:7.2f} ms   "
          f"(ratio {res['ratio_median']:.2f}x; anchor: ~3 ms for a popular LLM proxy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
