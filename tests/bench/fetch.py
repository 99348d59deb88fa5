#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What the controlled fetch costs next to plain curl, on the same loopback URL.

In one invocation, each case N times (default 50), the two sides interleaved:

  safe  tests/unit/fetch-seams-cli fetch URL: the real cli/fetch.c and common/ fetch code
        (strict parse, one resolution through the test resolver, which answers a public
        address at once, vetting, a fresh multi handle, CURLOPT_RESOLVE and the opensocket
        pin, our header and body bounds), with the test transport seam carrying the
        vetted connection to tests/fakes/fetch_fake.py on loopback;
  curl  curl(1) with --resolve to the same listener, the same test CA and HTTP/1.1.

The safe fetch refuses loopback on purpose, so it can only reach a loopback server through
the test-build seams; that binary is otherwise the CLI's code. Both sides are one process
per request: exec, a fresh TCP connection and TLS handshake (the CA file loaded each
time), one GET, the body to /dev/null. The server, URL path, bytes and certificate are
the same for both.

    tests/bench/fetch.py [--builddir build-default] [-n 50] [--json]

Prints, per case, the median and p95 of each side and the ratio of the medians
(safe / curl). Needs curl, openssl and python3 (stdlib; python3-brotli is not used).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(os.path.dirname(HERE))
WEB = "93.184.216.34"
CASES = [("small text", "/text", []), ("1 MiB", "/bytes/1048576", []),
         ("1 MiB gzip", "/gzip/1048576", ["--compressed"])]


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def timed(argv):
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=60)
    ms = (time.perf_counter() - t0) * 1000.0
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({p.returncode}): {p.stderr.decode(errors='replace').strip()}")
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builddir", default=os.environ.get("RTS_BUILDDIR", os.path.join(SRCDIR, "build-default")))
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seams = os.path.join(os.path.abspath(args.builddir), "tests", "unit", "fetch-seams-cli")
    curl = shutil.which("curl")
    if not os.access(seams, os.X_OK):
        sys.exit(f"{seams}: not built (make -C {args.builddir} tests/unit/fetch-seams-cli)")
    if not curl:
        sys.exit("curl not found")

    with tempfile.TemporaryDirectory(prefix="rts-bench-fetch-") as d:
        subprocess.run(["sh", os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), d,
                        f"DNS:*.example.com, DNS:example.com, IP:{WEB}"], check=True, capture_output=True)
        fake = subprocess.Popen([sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fetch_fake.py"),
                                 "--cert", os.path.join(d, "server.pem"), "--key", os.path.join(d, "server.key")],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            ports = json.loads(fake.stdout.readline())
            port_list = ",".join(str(ports[k]) for k in
                                 ("http4", "https4", "http6", "https6", "tlshang4", "blackhole4"))
            ca = os.path.join(d, "ca.pem")
            results = []
            for name, path, curl_opts in CASES:
                safe_cmd = [seams, "--ports", port_list, "--ca", ca, "--resolve", f"www.example.com={WEB}",
                            "fetch", f"https://www.example.com{path}"]
                curl_cmd = [curl, "-sS", "--fail", "--http1.1", "-o", "/dev/null", "--cacert", ca,
                            "--resolve", f"www.example.com:{ports['https4']}:127.0.0.1"] + curl_opts + \
                           [f"https://www.example.com:{ports['https4']}{path}"]
                timed(safe_cmd)  # warm the page cache and the fake's compression cache
                timed(curl_cmd)
                safe, plain = [], []
                for _ in range(args.n):
                    safe.append(timed(safe_cmd))
                    plain.append(timed(curl_cmd))
                results.append({
                    "case": name, "n": args.n,
                    "safe_median_ms": statistics.median(safe), "safe_p95_ms": pct(safe, 95),
                    "curl_median_ms": statistics.median(plain), "curl_p95_ms": pct(plain, 95),
                    "ratio": statistics.median(safe) / statistics.median(plain),
                })
        finally:
            fake.terminate()
            fake.wait(timeout=30)
            fake.stdout.close()

    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{'case':<12} {'safe median':>12} {'p95':>8} {'curl median':>12} {'p95':>8} {'ratio':>6}")
    for r in results:
        print(f"{r['case']:<12} {r['safe_median_ms']:>10.1f}ms {r['safe_p95_ms']:>6.1f}ms "
              f"{r['curl_median_ms']:>10.1f}ms {r['curl_p95_ms']:>6.1f}ms {r['ratio']:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
