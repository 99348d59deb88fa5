#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""roundtable-sandbox fetch and check-url: exit statuses, stdout and the one stderr line.

Two binaries are run. Refusals need no network and no seam (loopback and private literals,
names /etc/hosts resolves to loopback, bad schemes, user info), so they run against the
real CLI, cli/roundtable-sandbox, with a loopback listener that must see no connection.
The success paths need a name that resolves to a public address and a connection that
still ends on loopback: they run against tests/unit/fetch-seams-cli, which is the same
cli/fetch.c and common/ fetch code compiled with the test seams (common/fetch_seams.h),
against tests/fakes/fetch_fake.py. The real CLI is checked to carry no seam at all.

No packet leaves loopback: the only names the real CLI resolves are in /etc/hosts.
Run from the build directory (make check does), or set RTS_CLI and RTS_SEAMS_CLI.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

CLI = os.environ.get("RTS_CLI", os.path.join(os.getcwd(), "cli", "roundtable-sandbox"))
SEAMS_CLI = os.environ.get("RTS_SEAMS_CLI", os.path.join(os.getcwd(), "tests", "unit", "fetch-seams-cli"))
SRCDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEB = "93.184.216.34"


def run(argv, timeout=60):
    return subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


class Listener:
    """A loopback TCP listener that must never see a connection."""

    def __init__(self, family=socket.AF_INET, host="127.0.0.1"):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def connections(self):
        """Connections queued so far. The CLI has exited when this is asked, so anything
        it connected is already in the queue: no wait is needed."""
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def close(self):
        self.sock.close()


class RealCli(unittest.TestCase):
    """The installed-to-be binary: refusals, usage errors, no seams."""

    def setUp(self):
        self.v4 = Listener()
        self.v6 = Listener(socket.AF_INET6, "::1")

    def tearDown(self):
        self.assertEqual(self.v4.connections(), 0, "the CLI connected to the IPv4 listener")
        self.assertEqual(self.v6.connections(), 0, "the CLI connected to the IPv6 listener")
        self.v4.close()
        self.v6.close()

    def refusals(self):
        p4, p6 = self.v4.port, self.v6.port
        loop4 = "address not public: loopback (RFC 1122)"
        return [
            (f"http://127.0.0.1:{p4}/", loop4),
            (f"https://127.0.0.1:{p4}/", loop4),
            (f"http://2130706433:{p4}/", loop4),
            (f"http://0177.0.0.1:{p4}/", loop4),
            (f"http://0x7f.1:{p4}/", loop4),
            (f"http://127.1:{p4}/", loop4),
            (f"http://localhost:{p4}/", None),  # /etc/hosts: loopback, v4 or v6 first
            (f"http://[::1]:{p6}/", "address not public: loopback (RFC 4291)"),
            (f"http://[::ffff:127.0.0.1]:{p4}/", "address not public: IPv4-mapped (RFC 4291)"),
            ("http://169.254.169.254/latest/meta-data/", "address not public: link-local (RFC 3927)"),
            ("http://[fd00:ec2::254]/", "address not public: unique-local (RFC 4193)"),
            ("http://10.0.0.1/", "address not public: private (RFC 1918)"),
            ("http://0/", "address not public: unspecified (RFC 1122)"),
            ("ftp://example.com/", "URL scheme is not http or https"),
            ("file:///etc/passwd", "URL scheme is not http or https"),
            (f"http://user:pw@127.0.0.1:{p4}/", "URL carries user info"),
            ("http://@example.com/", "URL carries user info"),
            ("http://ex%61mple.com/", "URL host is percent-encoded or has an IPv6 zone"),
            ("http://1.2.3.4.5/", "URL host looks like a number but is not an IPv4 address"),
        ]

    def check_refused(self, verb, url, reason):
        p = run([CLI, verb, url])
        self.assertEqual(p.returncode, 3, f"{verb} {url}: {p.stderr!r}")
        self.assertEqual(p.stdout, b"")
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("roundtable-sandbox: refused: "), lines[0])
        if reason:
            self.assertEqual(lines[0], f"roundtable-sandbox: refused: {reason}")
        else:
            self.assertIn("loopback", lines[0])

    def test_fetch_refused(self):
        for url, reason in self.refusals():
            with self.subTest(url=url):
                self.check_refused("fetch", url, reason)

    def test_check_url_refused(self):
        for url, reason in self.refusals():
            with self.subTest(url=url):
                self.check_refused("check-url", url, reason)

    def test_options_do_not_change_a_refusal(self):
        url = f"http://127.0.0.1:{self.v4.port}/"
        p = run([CLI, "fetch", "--no-follow", "--max-bytes", "1", "--max-redirects", "0", "--timeout-ms", "1", url])
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stderr, b"roundtable-sandbox: refused: address not public: loopback (RFC 1122)\n")

    def test_usage(self):
        u = "http://www.example.com/"
        cases = [
            ["fetch"],
            ["fetch", u, u],
            ["fetch", "--max-bytes", "0", u],
            ["fetch", "--max-bytes", "33554433", u],
            ["fetch", "--max-bytes", "1k", u],
            ["fetch", "--max-bytes", "-1", u],
            ["fetch", "--max-bytes", "", u],
            ["fetch", "--max-redirects", "11", u],
            ["fetch", "--timeout-ms", "0", u],
            ["fetch", "--timeout-ms", "120001", u],
            ["fetch", "--bogus", u],
            ["fetch", "--max-bytes"],
            ["check-url"],
            ["check-url", u, u],
            ["check-url", "--no-follow", u],
        ]
        for argv in cases:
            with self.subTest(argv=argv):
                p = run([CLI] + argv)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(p.stdout, b"")
                self.assertNotIn(b"refused", p.stderr)

    def test_no_seams_in_the_real_cli(self):
        nm = shutil.which("nm")
        if not nm:
            self.skipTest("nm (binutils) not installed")
        real = run([nm, CLI]).stdout
        self.assertIn(b"rts_fetch", real, "nm shows no symbols: the check would prove nothing")
        self.assertNotIn(b"rts_fetch_test_seams", real)
        self.assertIn(b"rts_fetch_test_seams", run([nm, SEAMS_CLI]).stdout)


class SeamsCli(unittest.TestCase):
    """The same verbs over the test seams, against fetch_fake.py on loopback."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="rts-check-fetch-")
        d = cls.tmp.name
        subprocess.run(["sh", os.path.join(SRCDIR, "tests", "fakes", "make-ca.sh"), d,
                        f"DNS:*.example.com, DNS:example.com, IP:{WEB}"],
                       check=True, capture_output=True, timeout=60)
        cls.record = os.path.join(d, "record.jsonl")
        cls.fake = subprocess.Popen(
            [sys.executable, os.path.join(SRCDIR, "tests", "fakes", "fetch_fake.py"), "--cert",
             os.path.join(d, "server.pem"), "--key", os.path.join(d, "server.key"), "--record", cls.record],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        ports = json.loads(cls.fake.stdout.readline())
        cls.ports = ",".join(str(ports[k]) for k in ("http4", "https4", "http6", "https6", "tlshang4", "blackhole4"))
        cls.ca = os.path.join(d, "ca.pem")

    @classmethod
    def tearDownClass(cls):
        cls.fake.terminate()
        cls.fake.wait(timeout=30)
        cls.fake.stdout.close()
        cls.tmp.cleanup()

    def setUp(self):
        open(self.record, "w").close()
        self.dial_log = os.path.join(self.tmp.name, "dials")
        open(self.dial_log, "w").close()

    def seams(self, *argv, resolve=(("www.example.com", WEB),)):
        cmd = [SEAMS_CLI, "--ports", self.ports, "--ca", self.ca, "--dial-log", self.dial_log]
        for name, addrs in resolve:
            cmd += ["--resolve", f"{name}={addrs}"]
        return run(cmd + list(argv))

    def requests(self):
        with open(self.record) as f:
            return [json.loads(line) for line in f]

    def dials(self):
        with open(self.dial_log) as f:
            return f.read().splitlines()

    def test_fetch_writes_the_body(self):
        p = self.seams("fetch", "https://www.example.com/text")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"hello from the fake\n")
        self.assertEqual(p.stderr, b"")
        self.assertEqual(self.dials(), [f"{WEB} 443"])

    def test_fetch_binary_and_status(self):
        p = self.seams("fetch", "http://www.example.com/gzip/1000")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, bytes(1000))
        # Any HTTP status is a fetched body: exit 0.
        p = self.seams("fetch", "http://www.example.com/status/404")
        self.assertEqual((p.returncode, p.stdout), (0, b"status 404\n"))

    def test_no_follow(self):
        p = self.seams("fetch", "--no-follow", "http://www.example.com/redirect/302?to=/text")
        self.assertEqual((p.returncode, p.stdout), (0, b"moved\n"))
        self.assertEqual(len(self.requests()), 1)
        p = self.seams("fetch", "http://www.example.com/redirect/302?to=/text")
        self.assertEqual((p.returncode, p.stdout), (0, b"hello from the fake\n"))

    def test_limits(self):
        p = self.seams("fetch", "--max-redirects", "1", "http://www.example.com/chain/1")
        self.assertEqual((p.returncode, p.stdout), (0, b"end of chain\n"))
        p = self.seams("fetch", "--max-redirects", "1", "http://www.example.com/chain/2")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, b"roundtable-sandbox: error: fetch failed: too many redirects\n")
        p = self.seams("fetch", "--max-bytes", "11", "http://www.example.com/bytes/11")
        self.assertEqual((p.returncode, p.stdout), (0, b"x" * 11))
        p = self.seams("fetch", "--max-bytes", "10", "http://www.example.com/bytes/11")
        self.assertEqual((p.returncode, p.stdout), (1, b""))
        self.assertEqual(p.stderr, b"roundtable-sandbox: error: fetch failed: response body is larger than the limit\n")
        p = self.seams("fetch", "--timeout-ms", "300", "http://www.example.com/hang")
        self.assertEqual((p.returncode, p.stdout), (1, b""))
        self.assertEqual(p.stderr, b"roundtable-sandbox: error: fetch failed: timed out\n")

    def test_rebinding_refused(self):
        resolve = (("rebind.example.com", WEB), ("rebind.example.com", "127.0.0.1"))
        p = self.seams("fetch", "http://rebind.example.com/redirect/302?to=/text", resolve=resolve)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stdout, b"")
        self.assertEqual(p.stderr, b"roundtable-sandbox: refused: address not public: loopback (RFC 1122)\n")
        self.assertEqual([r["path"] for r in self.requests()], ["/redirect/302?to=/text"])

    def test_mixed_answer_refused(self):
        p = self.seams("fetch", "http://mixed.example.com/text", resolve=(("mixed.example.com", f"{WEB},10.0.0.1"),))
        self.assertEqual(p.returncode, 3)
        self.assertEqual(p.stderr, b"roundtable-sandbox: refused: address not public: private (RFC 1918)\n")
        self.assertEqual(self.dials(), [])
        self.assertEqual(self.requests(), [])

    def test_check_url_never_connects(self):
        p = self.seams("check-url", "https://www.example.com/text")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))
        self.assertEqual(self.dials(), [])
        self.assertEqual(self.requests(), [])
        p = self.seams("check-url", "https://mixed.example.com/", resolve=(("mixed.example.com", f"{WEB},::1"),))
        self.assertEqual(p.returncode, 3)
        self.assertEqual(p.stderr, b"roundtable-sandbox: refused: address not public: loopback (RFC 4291)\n")
        p = self.seams("check-url", "https://gone.example.com/", resolve=(("gone.example.com", "NXDOMAIN"),))
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, b"roundtable-sandbox: error: check-url failed: host name does not resolve\n")
        self.assertEqual(self.dials(), [])

    def test_failure_is_one_generic_line(self):
        p = self.seams("fetch", "http://gone.example.com/secret", resolve=(("gone.example.com", "NXDOMAIN"),))
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, b"roundtable-sandbox: error: fetch failed: host name does not resolve\n")


if __name__ == "__main__":
    for binary in (CLI, SEAMS_CLI):
        if not os.access(binary, os.X_OK):
            print(f"{binary}: not built", file=sys.stderr)
            sys.exit(99)
    unittest.main(verbosity=2)
