# SPDX-License-Identifier: Apache-2.0
"""A scripted loopback web server for the controlled fetch's tests (tests/unit/check_fetch.c,
cli/check-fetch.py, tests/bench/fetch.py). The fetch's test seams make a name resolve to a
public address and then carry the connection here, so the rules run on public-looking input
while no packet leaves loopback.

It writes raw HTTP/1.1 itself (no http.server) so it can misbehave on purpose: huge
headers, a body that dribbles, compression bombs, codings nobody asked for.

Listeners (all on loopback; the first stdout line is a JSON object of their ports):
  http4, https4    HTTP and HTTPS on 127.0.0.1
  http6, https6    the same on ::1
  tlshang4         accepts TCP and never answers: a TLS handshake that never completes
  blackhole4       a full accept queue: a TCP connect that never completes

Every request is appended to --record as one JSON line {"listener", "method", "path",
"headers": [[name, value], ...]} before it is answered, so a test that got an answer can
read what was sent, and a test that expected nothing can check that nothing came. With
--connections, every accepted connection is also appended there as {"id", "listener",
"event": "open"|"close", "time"} (id counts connections from 1, time is time.time()),
even one that never sends a request, so a test can check that nothing connected at all,
or when a connection was dropped.

Routes (N is a byte count):
  /text                 200 text/plain, a short line
  /bytes/N              N bytes of "x" with Content-Length
  /chunked/N            N bytes of "x", chunked
  /status/N             status N, a short body
  /headers              200, the request headers as JSON
  /redirect/CODE?to=U   status CODE with Location U (percent-decoded)
  /redirect-nolocation  302 without Location
  /chain/K              302 to /chain/K-1; /chain/0 is 200 "end of chain"
  /hang                 reads the request, never answers (until the client leaves)
  /dribble              headers, then one body byte every 50 ms
  /bigheader/N          one header line of N bytes
  /manyheaders/N        N header lines of 100 bytes each
  /gzip/N /deflate/N /br/N   N zero bytes, compressed with that coding
  /gzip-random/N        N random bytes gzip-compressed (bigger on the wire than decoded)
  /gzip-random-chunked/N  the same, chunked (no Content-Length to refuse early)
  /encoding/VALUE       one byte with Content-Encoding VALUE (percent-decoded)
  /corrupt/CODING       Content-Encoding CODING, a body that does not decode
  /interim              a 100 Continue, then 200 /text
  /static/NAME          the file NAME of --static DIR, its Content-Type from the suffix
                        (.txt text/plain, .html text/html; charset=utf-8, .json
                        application/json, .png image/png, .bin application/octet-stream,
                        .latin1 text/plain; charset=iso-8859-1, anything else none)

python3 stdlib, plus the Debian package python3-brotli for /br only.
"""
import argparse
import gzip
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import zlib

HEAD_MAX = 65536


STATIC_TYPES = {".txt": "text/plain", ".html": "text/html; charset=utf-8", ".json": "application/json",
                ".png": "image/png", ".bin": "application/octet-stream",
                ".latin1": "text/plain; charset=iso-8859-1"}


class Fake:
    def __init__(self, record_path, connections_path=None, static_dir=None):
        self.lock = threading.Lock()
        self.record_file = open(record_path, "a", encoding="utf-8") if record_path else None
        self.connections_file = open(connections_path, "a", encoding="utf-8") if connections_path else None
        self.static_dir = static_dir
        self.cache = {}
        self.next_id = 0

    def record(self, entry):
        if self.record_file:
            with self.lock:
                self.record_file.write(json.dumps(entry) + "\n")
                self.record_file.flush()

    def connection(self, listener, event, cid=None):
        """Log an event of connection cid (None: a new one); returns its id."""
        with self.lock:
            if cid is None:
                self.next_id += 1
                cid = self.next_id
            if self.connections_file:
                self.connections_file.write(json.dumps({"id": cid, "listener": listener, "event": event,
                                                        "time": time.time()}) + "\n")
                self.connections_file.flush()
        return cid

    def compressed(self, coding, n):
        key = (coding, n)
        with self.lock:
            if key in self.cache:
                return self.cache[key]
        data = bytes(n)
        if coding == "gzip":
            body = gzip.compress(data, compresslevel=9)
        elif coding == "deflate":
            body = zlib.compress(data, 9)
        elif coding == "br":
            import brotli  # python3-brotli

            body = brotli.compress(data, quality=11)
        elif coding == "gzip-random":
            body = gzip.compress(os.urandom(n), compresslevel=1)
        else:
            raise ValueError(coding)
        with self.lock:
            self.cache[key] = body
        return body


def read_head(conn):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > HEAD_MAX:
            return None
    head = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = [line.split(":", 1) for line in lines[1:]]
    headers = [[k, v.strip()] for k, v in headers]
    return method, target, headers


def response(status, headers, body, reason="Fake"):
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def wait_for_close(conn, limit=120):
    """Block until the client goes away (or limit seconds)."""
    conn.settimeout(limit)
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass


def handle(fake, listener, conn):
    got = read_head(conn)
    if not got:
        return
    method, target, headers = got
    fake.record({"listener": listener, "method": method, "path": target, "headers": headers})
    url = urllib.parse.urlsplit(target)
    path = url.path
    query = urllib.parse.parse_qs(url.query)
    parts = path.strip("/").split("/")
    name = parts[0]
    arg = parts[1] if len(parts) > 1 else ""
    text = [("Content-Type", "text/plain")]

    if name == "text":
        body = b"hello from the fake\n"
        conn.sendall(response(200, text + [("Content-Length", len(body))], body))
    elif name == "bytes":
        n = int(arg)
        conn.sendall(response(200, text + [("Content-Length", n)], b"x" * n))
    elif name == "chunked":
        n = int(arg)
        out = response(200, text + [("Transfer-Encoding", "chunked")], b"")
        left = n
        while left > 0:
            k = min(left, 16384)
            out += f"{k:x}\r\n".encode() + b"x" * k + b"\r\n"
            left -= k
        conn.sendall(out + b"0\r\n\r\n")
    elif name == "status":
        body = f"status {arg}\n".encode()
        conn.sendall(response(int(arg), text + [("Content-Length", len(body))], body))
    elif name == "headers":
        body = json.dumps(headers).encode()
        conn.sendall(response(200, [("Content-Type", "application/json"), ("Content-Length", len(body))], body))
    elif name == "redirect":
        to = query.get("to", [""])[0]
        body = b"moved\n"
        conn.sendall(response(int(arg), text + [("Location", to), ("Content-Length", len(body))], body))
    elif name == "chain":
        k = int(arg)
        if k > 0:
            conn.sendall(response(302, text + [("Location", f"/chain/{k - 1}"), ("Content-Length", 0)], b""))
        else:
            body = b"end of chain\n"
            conn.sendall(response(200, text + [("Content-Length", len(body))], body))
    elif name == "redirect-nolocation":
        conn.sendall(response(302, text + [("Content-Length", 0)], b""))
    elif name == "hang":
        wait_for_close(conn)
    elif name == "dribble":
        conn.sendall(response(200, text + [("Content-Length", 1000000)], b""))
        try:
            for _ in range(20 * 120):
                conn.sendall(b"x")
                time.sleep(0.05)
        except OSError:
            pass
    elif name == "bigheader":
        conn.sendall(response(200, text + [("X-Big", "b" * int(arg)), ("Content-Length", 2)], b"ok"))
    elif name == "manyheaders":
        many = [(f"X-Many-{i:06d}", "m" * 84) for i in range(int(arg))]
        conn.sendall(response(200, text + many + [("Content-Length", 2)], b"ok"))
    elif name in ("gzip", "deflate", "br", "gzip-random"):
        body = fake.compressed(name, int(arg))
        coding = "gzip" if name == "gzip-random" else name
        conn.sendall(response(200, text + [("Content-Encoding", coding), ("Content-Length", len(body))], body))
    elif name == "gzip-random-chunked":
        body = fake.compressed("gzip-random", int(arg))
        out = response(200, text + [("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")], b"")
        for i in range(0, len(body), 8192):
            part = body[i : i + 8192]
            out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
        conn.sendall(out + b"0\r\n\r\n")
    elif name == "encoding":
        value = urllib.parse.unquote(arg)
        conn.sendall(response(200, text + [("Content-Encoding", value), ("Content-Length", 1)], b"x"))
    elif name == "corrupt":
        body = b"this is not compressed data at all" * 4
        conn.sendall(response(200, text + [("Content-Encoding", arg), ("Content-Length", len(body))], body))
    elif name == "static" and fake.static_dir and arg and "/" not in arg and not arg.startswith("."):
        try:
            with open(os.path.join(fake.static_dir, arg), "rb") as f:
                body = f.read()
        except OSError:
            body = None
        if body is None:
            body = b"not found\n"
            conn.sendall(response(404, text + [("Content-Length", len(body))], body))
        else:
            ctype = STATIC_TYPES.get(os.path.splitext(arg)[1])
            conn.sendall(response(200, ([("Content-Type", ctype)] if ctype else []) + [("Content-Length", len(body))],
                                  body))
    elif name == "interim":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = b"after interim\n"
        conn.sendall(response(200, text + [("Content-Length", len(body))], body))
    else:
        body = b"not found\n"
        conn.sendall(response(404, text + [("Content-Length", len(body))], body))


def serve_conn(fake, listener, conn, ctx, cid):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(120)
    try:
        if ctx:
            conn = ctx.wrap_socket(conn, server_side=True)
        handle(fake, listener, conn)
    except (OSError, ssl.SSLError, ValueError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass
        fake.connection(listener, "close", cid)


def hang_conn(fake, listener, conn, cid):
    wait_for_close(conn)
    conn.close()
    fake.connection(listener, "close", cid)


def accept_loop(fake, listener, sock, ctx):
    while True:
        conn, _ = sock.accept()
        cid = fake.connection(listener, "open")
        if listener == "tlshang4":
            threading.Thread(target=hang_conn, args=(fake, listener, conn, cid), daemon=True).start()
            continue
        threading.Thread(target=serve_conn, args=(fake, listener, conn, ctx, cid), daemon=True).start()


def listen(family, host, backlog=64):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 0))
    s.listen(backlog)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--record")
    ap.add_argument("--connections")
    ap.add_argument("--static")
    args = ap.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    fake = Fake(args.record, args.connections, args.static)

    socks = {
        "http4": (listen(socket.AF_INET, "127.0.0.1"), None),
        "https4": (listen(socket.AF_INET, "127.0.0.1"), ctx),
        "http6": (listen(socket.AF_INET6, "::1"), None),
        "https6": (listen(socket.AF_INET6, "::1"), ctx),
        "tlshang4": (listen(socket.AF_INET, "127.0.0.1"), None),
    }
    # A listener whose accept queue is full and never drained: further SYNs are dropped,
    # so a connect to it hangs until the client's own deadline.
    bh = listen(socket.AF_INET, "127.0.0.1", backlog=0)
    fillers = []
    for _ in range(4):
        f = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        f.setblocking(False)
        try:
            f.connect(bh.getsockname())
        except BlockingIOError:
            pass
        fillers.append(f)

    for name, (s, c) in socks.items():
        threading.Thread(target=accept_loop, args=(fake, name, s, c), daemon=True).start()
    ports = {name: s.getsockname()[1] for name, (s, _) in socks.items()}
    ports["blackhole4"] = bh.getsockname()[1]
    print(json.dumps(ports), flush=True)
    try:
        while True:
            signal.pause()  # the accept loops serve; this thread only waits to be ended
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
