#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for a Docker daemon on a Unix socket, for runnerd's start-up and fault tests,
so that no test ever has to stop, reconfigure or slow down the real (shared) dockerd.

    fake_dockerd.py --socket PATH --mode answer|hang [--data-root DIR] [--owner UID]

The first stdout line is "READY" once the socket listens (mode 0660, owned by --owner).
Point a docker CLI at it with a context (see lifecycle_helpers.docker_context).

  answer  a minimal Engine API: /_ping, GET /v*/info (DockerRootDir = --data-root), and
          404 "No such image" / "No such container" for image inspect, container removal
          and everything else, so runnerd's start-up checks can be driven to each refusal
  hang    accept connections, read them, never answer: a daemon that hangs

Every request line is printed to stderr (the test's log). python3 stdlib only.
"""
import argparse
import json
import os
import socketserver
import sys
from http.server import BaseHTTPRequestHandler

API_VERSION = "1.41"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    data_root = "/var/lib/docker"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-dockerd: " + (fmt % args) + "\n")

    def address_string(self):
        return "unix"

    def _send(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Api-Version", API_VERSION)
        self.send_header("Ostype", "linux")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _route(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        if path.endswith("/_ping"):
            return self._send(200, b"OK", "text/plain")
        if path.endswith("/info"):
            return self._send(200, {"ID": "fake", "ServerVersion": "20.10.0-fake", "DockerRootDir": self.data_root,
                                    "OperatingSystem": "fake", "OSType": "linux"})
        if "/images/" in path:
            name = path.split("/images/", 1)[1].rsplit("/json", 1)[0]
            return self._send(404, {"message": f"No such image: {name}"})
        if path.endswith("/containers/json"):
            return self._send(200, [])
        return self._send(404, {"message": "No such container: fake"})

    do_GET = do_HEAD = do_POST = do_DELETE = _route


class HangHandler(socketserver.BaseRequestHandler):
    def handle(self):
        sys.stderr.write("fake-dockerd: connection held without an answer\n")
        self.request.settimeout(None)
        while self.request.recv(65536):
            pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", choices=("answer", "hang"), default="answer")
    ap.add_argument("--data-root", default="/var/lib/docker")
    ap.add_argument("--owner", type=int, default=None)
    a = ap.parse_args()
    Handler.data_root = a.data_root
    try:
        os.unlink(a.socket)
    except FileNotFoundError:
        pass
    srv = Server(a.socket, Handler if a.mode == "answer" else HangHandler)
    os.chmod(a.socket, 0o660)
    if a.owner is not None:
        os.chown(a.socket, a.owner, -1)
    print("READY", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
