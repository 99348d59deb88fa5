# SPDX-License-Identifier: Apache-2.0
"""The precheck image under test, sealed runs of it, and a stand-in broker.

Used by test_precheck_image.py and tests/bench/precheck.py. Nothing here starts a daemon
(precheck_suite.py runs the real ones): a run is the `docker run` argument list of
runnerd/docker_args.c with the precheck limits (DESIGN.md 8.3), and the broker is a small
recording HTTP server on a real Unix socket in a real run dir, bind-mounted read-only.

    img = PrecheckImage.build()                  # make-context.sh + docker build, unique tag
    with RunDirs(uid, gid) as dirs, StandInBroker(dirs.socket, uid, gid) as broker:
        broker.script("docs", "search", lambda req: (200, rpc_result(req, {...})))
        r = run_sealed(img.tag, run_input("export default ..."), dirs, uid, gid)
        r.answer                                 # the one JSON line, parsed (or None)
        broker.requests()                        # what reached the broker
    img.remove()

RTS_PRECHECK_USR_OVERLAY=DIR assembles the context with DIR (an unpacked tree holding
usr/..., e.g. `dpkg-deb -x` of Debian's nodejs, libnode and its node-* dependencies)
mounted over /usr in a private mount namespace (overlayfs, read-only), so a host whose
/usr/bin/node is another build can still check the image built from Debian's.
"""
import json
import os
import secrets
import shutil
import socketserver
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler

from harness import SRCDIR, HarnessError, docker, docker_bin, remove_tag, unique_tag

PRECHECK_DIR = os.path.join(SRCDIR, "worker", "precheck")
MAKE_CONTEXT = os.path.join(PRECHECK_DIR, "make-context.sh")
HARNESS = os.path.join(PRECHECK_DIR, "harness.mjs")
BROKER_SOCKET_IN_CONTAINER = "/run/broker/broker.sock"
DUMMY_KEY = "roundtable-sandbox-dummy-key"  # RTS_DUMMY_KEY

# The precheck defaults (seed: "Precheck scripts"): 256 MiB, one CPU, 32 processes, a
# 64 MiB /tmp. Everything else is the turn's list from runnerd/docker_args.c.
PRECHECK_MEMORY_MB = 256
PRECHECK_CPUS = "1"
PRECHECK_PIDS = 32
PRECHECK_TMPFS = "/tmp:rw,nosuid,nodev,size=64m"


def node_host_argv(argv):
    """argv as run on the host whose node builds the image: as is, or under
    RTS_PRECHECK_USR_OVERLAY (see above)."""
    overlay = os.environ.get("RTS_PRECHECK_USR_OVERLAY")
    if not overlay:
        return list(argv)
    usr = os.path.join(os.path.abspath(overlay), "usr")
    if not os.path.isdir(usr):
        raise HarnessError(f"RTS_PRECHECK_USR_OVERLAY={overlay} has no usr/ directory")
    # Paths go in as positional parameters, not into the command text.
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -t overlay overlay -o "lowerdir=$1:/usr" /usr && shift && exec "$@"', "sh", usr, *argv]


def make_context(outdir, extra_args=()):
    """Run make-context.sh into outdir (absent, or an empty directory). Returns CompletedProcess."""
    return subprocess.run(node_host_argv([MAKE_CONTEXT, *extra_args, outdir]), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


class PrecheckImage:
    """The image built from this tree's worker/precheck under a tag of its own."""

    def __init__(self, tag, context_files):
        self.tag = tag
        self.context_files = context_files  # paths inside rootfs/, as in the image

    @classmethod
    def build(cls):
        tmp = tempfile.mkdtemp(prefix="rts-pcimg-", dir="/tmp")
        try:
            ctx = os.path.join(tmp, "ctx")
            p = make_context(ctx)
            if p.returncode != 0:
                raise HarnessError(f"make-context.sh failed ({p.returncode}): {p.stderr.strip()}")
            root = os.path.join(ctx, "rootfs")
            files = sorted("/" + os.path.relpath(os.path.join(d, f), root)
                           for d, _, fs in os.walk(root) for f in fs)
            tag = unique_tag("precheck")
            img = cls(tag, files)
            try:
                docker("build", "-q", "-t", tag, ctx, timeout=600)
            except BaseException:
                img.remove()
                raise
            return img
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def size(self):
        """The image's size in bytes, as `docker image inspect` reports it."""
        return int(docker("image", "inspect", "--format", "{{.Size}}", self.tag).stdout.strip())

    def remove(self):
        return remove_tag(self.tag)


class RunDirs:
    """A run's directories as runnerd will make them: ROOT/run (0700, the container's uid;
    the broker socket goes there) and ROOT/ws, an empty workspace (0700, same owner)."""

    def __init__(self, uid, gid):
        self.root = tempfile.mkdtemp(prefix="rts-pc-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.run = os.path.join(self.root, "run")
        self.workspace = os.path.join(self.root, "ws")
        for d in (self.run, self.workspace):
            os.mkdir(d, 0o700)
            os.chown(d, uid, gid)
        self.socket = os.path.join(self.run, "broker.sock")

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def rpc_result(req, result):
    """A JSON-RPC success answer to the recorded request req."""
    return {"jsonrpc": "2.0", "id": req["json"]["id"], "result": result}


def rpc_error(req, code, message):
    return {"jsonrpc": "2.0", "id": req["json"]["id"], "error": {"code": code, "message": message}}


def text_result(text, **extra):
    return {"content": [{"type": "text", "text": text}], **extra}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin-broker"
    sys_version = ""

    def log_message(self, *args):  # quiet, and client_address is empty on AF_UNIX
        pass

    def address_string(self):
        return "unix"

    def setup(self):
        super().setup()
        self.conn_id = self.server.broker.next_conn()

    def _answer(self, status, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n > 0 else b""
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        req = {"conn": self.conn_id, "requestline": self.requestline, "path": self.path,
               "headers": list(self.headers.items()), "body": body, "json": doc}
        self.server.broker.record(req)
        server = self.path[len("/mcp/"):] if self.path.startswith("/mcp/") else None
        tool = None
        if isinstance(doc, dict) and isinstance(doc.get("params"), dict):
            tool = doc["params"].get("name")
        fn = self.server.broker.scripted(server, tool)
        if fn is None:
            self._answer(403, {"error": "forbidden"})
            return
        status, answer = fn(req)
        self._answer(status, answer)

    def do_GET(self):
        self.server.broker.record({"conn": self.conn_id, "requestline": self.requestline, "path": self.path,
                                   "headers": list(self.headers.items()), "body": b"", "json": None})
        self._answer(405, {"error": "method_not_allowed"})


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False


class StandInBroker:
    """A recording HTTP/1.1 server on a real Unix socket, 0600 and owned by the container's
    uid like runnerd's. A call to (server, tool) is answered by the function scripted for
    it, fn(request) -> (status, JSON-able or bytes); anything unscripted gets brokerd's
    403 {"error":"forbidden"}. requests() lists what arrived: conn (one id per connection),
    requestline, path, headers (name, value as sent, in order), body (bytes), json."""

    def __init__(self, path, uid, gid):
        self._lock = threading.Lock()
        self._requests = []
        self._scripts = {}
        self._conns = 0
        self._server = _Server(path, _Handler)
        self._server.broker = self
        os.chown(path, uid, gid)
        os.chmod(path, 0o600)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def next_conn(self):
        with self._lock:
            self._conns += 1
            return self._conns

    def record(self, req):
        with self._lock:
            self._requests.append(req)

    def script(self, server, tool, fn):
        with self._lock:
            self._scripts[(server, tool)] = fn

    def scripted(self, server, tool):
        with self._lock:
            return self._scripts.get((server, tool))

    def requests(self):
        with self._lock:
            return list(self._requests)

    def connections(self):
        with self._lock:
            return self._conns

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_input(script, *, fired_at="2026-03-01T12:00:00Z", time_zone="Europe/Berlin", today="2026-03-01",
              schedule=None, tools=(("docs", "search"),), max_calls=16, **extra):
    """The harness's stdin object (HACKING.md "Precheck runtime") as bytes."""
    obj = {"v": 1, "script": script, "firedAt": fired_at, "timeZone": time_zone, "today": today,
           "schedule": schedule, "tools": [{"server": s, "tool": t} for s, t in tools], "maxCalls": max_calls}
    obj.update(extra)
    return json.dumps(obj).encode()


def sealed_argv(image, name, uid, gid, dirs, *, attach_stderr=False, entrypoint=None, args=()):
    """runnerd/docker_args.c's list with the precheck limits and a read-only workspace."""
    argv = [docker_bin(), "run", "-i", "--attach", "stdin", "--attach", "stdout"]
    if attach_stderr:
        argv += ["--attach", "stderr"]  # tests only: runnerd never attaches the guest's stderr
    argv += ["--rm", "--name", name, "--label", "io.roundtable-sandbox.test=precheck",
             "--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--user", f"{uid}:{gid}", "--memory", f"{PRECHECK_MEMORY_MB}m", "--memory-swap",
             f"{PRECHECK_MEMORY_MB}m", "--cpus", PRECHECK_CPUS, "--pids-limit", str(PRECHECK_PIDS),
             "--tmpfs", PRECHECK_TMPFS, "--log-driver", "none", "--pull", "never",
             "--mount", f"type=bind,source={dirs.workspace},target=/workspace,readonly",
             "--mount", f"type=bind,source={dirs.run},target=/run/broker,readonly"]
    if entrypoint:
        argv += ["--entrypoint", entrypoint]
    argv += [image, *args]
    return argv


class RunResult:
    def __init__(self, name, returncode, stdout, stderr, timed_out):
        self.name = name
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out

    @property
    def lines(self):
        return self.stdout.decode("utf-8", "replace").splitlines(keepends=True)

    @property
    def answer(self):
        """The result line parsed, when stdout is exactly one JSON line; else None."""
        if not self.stdout.endswith(b"\n") or self.stdout.count(b"\n") != 1:
            return None
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None


def force_remove(name, timeout=30):
    """`docker rm -f NAME`, as runnerd's cancellation does; True when it is gone."""
    docker("rm", "-f", name, check=False, timeout=timeout)
    return docker("inspect", name, check=False, timeout=timeout).returncode != 0


def run_sealed(image, stdin, dirs, uid, gid, *, deadline_s=60, attach_stderr=False, entrypoint=None, args=(),
               cli_env=None):
    """One sealed run. At the deadline the docker CLI is killed and the container removed
    (runnerd's cancellation, in small); the result then has timed_out set. cli_env: extra
    variables for the docker CLI's own environment (never passed on with -e)."""
    name = "rts-precheck-test-" + secrets.token_hex(8)
    argv = sealed_argv(image, name, uid, gid, dirs, attach_stderr=attach_stderr, entrypoint=entrypoint, args=args)
    env = dict(os.environ, **(cli_env or {}))
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = p.communicate(stdin, timeout=deadline_s)
        return RunResult(name, p.returncode, out, err, False)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        if not force_remove(name):
            raise HarnessError(f"container {name} is still there after docker rm -f")
        return RunResult(name, p.returncode, out, err, True)


def run_plain(stdin, *, socket_path, node="node", timeout=60):
    """The harness under the host's node, outside any container."""
    return subprocess.run([node, HARNESS, "--broker", socket_path], input=stdin, capture_output=True,
                          timeout=timeout)
