# SPDX-License-Identifier: Apache-2.0
"""What the local HTTPS fakes (fake_model.py, fake_mcp.py) share: a threaded TLS server that
records every request as one JSON line, and its command line. python3 stdlib only."""
import argparse
import json
import socket
import ssl
import threading
from http.server import ThreadingHTTPServer


class RecordingTLSServer(ThreadingHTTPServer):
    """Serves handler over TLS (ctx) and appends record(entry) lines to record_path."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, ctx, api_path, record_path):
        super().__init__(addr, handler)
        self.ctx = ctx
        self.api_path = api_path
        self.record_lock = threading.Lock()
        self.record_file = open(record_path, "a", encoding="utf-8") if record_path else None

    def record(self, entry):
        if not self.record_file:
            return
        with self.record_lock:
            self.record_file.write(json.dumps(entry) + "\n")
            self.record_file.flush()

    def finish_request(self, request, client_address):
        # TLS per connection in the connection's own thread, so a client that never finishes
        # its handshake cannot stall the accept loop. NODELAY: answers must not wait on
        # Nagle and delayed ACKs (a 40 ms stall per request would skew the benchmarks).
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request.settimeout(60)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(tls, client_address)


def argument_parser(description, default_path):
    """--host, --port (0: pick one), --cert, --key, --path, --record."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--path", default=default_path)
    ap.add_argument("--record")
    return ap


def tls_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def serve(srv):
    """Announce the port ("PORT <n>", the first stdout line) and serve until interrupted."""
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
