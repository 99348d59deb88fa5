# SPDX-License-Identifier: Apache-2.0
"""The rich (Pi) worker image (worker/pi/) for the integration tests: built once per
Environment through the CLI (`image build --rich --content DIR`), with test content, and
a stand-in broker whose host tools and host compactor a test scripts.

    img = pi_image(env)                          # the image, built once; img.tag, img.content
    with PiStandIn(env) as st:                   # rich_rig.StandIn + scripted tools/compactor
        st.start_worker(img.tag)
        packet = st.turn_packet("hello", speaker=BOB, tools=[host_tool("lookup")])
        st.model_requests()                      # what fake_anthropic got, oldest first

What the worker sends to the model goes through the stand-in to tests/fakes/fake_anthropic.py
unchanged; the fake's directives (#tool, #usage, #big, #quiet, #script ...) steer the answers.
"""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile

from harness import SRCDIR, HarnessError, docker, unique_tag, wait_until
from rich_rig import SEALED_RUN, StandIn, StandInHandler, WorkerContainer

PI_DIR = os.path.join(SRCDIR, "worker", "pi")
SCRIPTS_DIR = os.path.join(SRCDIR, "tests", "integration", "pi")
MAKE_CONTEXT = os.path.join(PI_DIR, "make-context.sh")
ALICE = {"id": "1001", "name": "Alice", "principalId": "principal-1001"}
BOB = {"id": "2002", "name": "Bob", "principalId": "principal-2002"}
PLACEHOLDER = "(another person's private memory, hidden)"
# A model Pi's catalogue knows with a 1,000,000-token window (the compaction tiers).
BIG_MODEL = "claude-opus-4-6"
SKILL_HUGE_BYTES = 300 * 1024       # over read_skill's 256 KiB
SKILL_LONG_CHARS = 200 * 1024       # under 256 KiB, over the 40,000 characters returned
READY_S = 60                        # a worker's start-up: node, Pi's modules, the skills


def write_test_content(root):
    """The operator content the test image is built with: a persona and three skills."""
    os.makedirs(os.path.join(root, "skills", "dice", "ref"))
    os.makedirs(os.path.join(root, "skills", "bulky"))
    os.makedirs(os.path.join(root, "skills", "files"))
    with open(os.path.join(root, "prompt.md"), "w") as f:
        f.write("You are Pip, the test persona.\n")
    with open(os.path.join(root, "skills", "dice", "SKILL.md"), "w") as f:
        f.write("---\nname: dice\ndescription: How this channel rolls dice.\ntools: [host_roll]\n---\n"
                "Roll with host_roll. The table is in ref/table.md.\n")
    with open(os.path.join(root, "skills", "dice", "ref", "table.md"), "w") as f:
        f.write("DICE-TABLE-TEXT\n")
    with open(os.path.join(root, "skills", "bulky", "SKILL.md"), "w") as f:
        f.write("---\nname: bulky\ndescription: Large files.\n---\nSee huge.md and long.md.\n")
    with open(os.path.join(root, "skills", "bulky", "huge.md"), "w") as f:
        f.write("h" * SKILL_HUGE_BYTES)
    with open(os.path.join(root, "skills", "bulky", "long.md"), "w") as f:
        f.write("L" * SKILL_LONG_CHARS)
    with open(os.path.join(root, "skills", "files", "SKILL.md"), "w") as f:
        f.write("---\nname: files\ndescription: Nothing to gate.\n---\nFILES-SKILL-TEXT\n")
    # Left out by make-context.sh: only prompt.md and skills/ are taken.
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write("NOT-IN-THE-IMAGE\n")


class PiImage:
    def __init__(self, tag, build_stderr):
        self.tag = tag
        self.build_stderr = build_stderr

    def size(self):
        from harness import docker
        return int(docker("image", "inspect", "--format", "{{.Size}}", self.tag).stdout.strip())


def pi_image(env):
    """Build (once per Environment, under a unique tag removed by env.cleanup()) the rich
    worker image from this tree's worker/pi with write_test_content(), through the CLI."""
    if getattr(env, "_pi_image", None):
        return env._pi_image
    env.require_docker()
    content = tempfile.mkdtemp(prefix="rts-pi-content-", dir="/tmp")
    try:
        shutil.rmtree(content)
        write_test_content(content)
        tag = unique_tag("pi")
        env._built_tags.append(tag)
        p = subprocess.run([env.program("cli"), "image", "build", "--rich", "--dir", PI_DIR, "--content", content,
                            "--tag", tag], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise HarnessError(f"image build --rich failed ({p.returncode}): {p.stderr.strip()[-3000:]}")
    finally:
        shutil.rmtree(content, ignore_errors=True)
    env._pi_image = PiImage(tag, p.stderr)
    return env._pi_image


def host_tool(name, properties=None):
    """A turn input's tools entry for host tool NAME (the worker sees host_NAME)."""
    return {"name": f"host_{name}", "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": properties or {"q": {"type": "string"}}},
            "route": f"/tools/{name}"}


def mcp_tool(server, tool, index=0):
    return {"name": f"mcp_{index}_{tool}", "description": f"{tool} of {server}",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "route": f"/mcp/{server}", "mcpTool": tool}


class PiStandInHandler(StandInHandler):
    """StandIn's handler with the host tools and the host compactor scripted by the owner:
    owner.tool(name, body) and owner.compact(body) return (status, answer object or None)."""

    def do_POST(self):
        owner = self.server.owner
        path = self.path.partition("?")[0]
        if path.startswith("/tools/") or path.startswith("/mcp/") or path == "/worker/compact":
            entry = owner.record(self)
            try:
                if path == "/worker/compact" and int(self.headers.get("Content-Length") or 0) > owner.compact_max:
                    entry["status"] = 413
                    entry["refusedBeforeBody"] = True
                    return self.answer(413, {"error": "too_large"})
                self.read_body(entry)
                if not entry["complete"]:
                    entry["status"] = 0
                    self.close_connection = True
                    return None
                if path == "/worker/compact":
                    status, obj = owner.compact(entry["body"])
                elif path.startswith("/mcp/"):
                    status, obj = owner.mcp(path[len("/mcp/"):], entry["body"])
                else:
                    status, obj = owner.tool(path[len("/tools/"):], entry["body"])
                entry["status"] = status
                if status == 0:
                    self.close_connection = True
                    return None
                return self.answer(status, obj)
            finally:
                entry["t1"] = __import__("time").monotonic()
        return super().do_POST()


def default_tool(name, body):
    """Host tools: "private*" answers privately to body["owner"]; "privfail*" answers an
    error tagged for body["owner"]; the rest answer publicly."""
    args = body if isinstance(body, dict) else {}
    if name.startswith("private"):
        return 200, {"result": f"SECRET-{name}-{args.get('q', '')}", "privateTo": args.get("owner", "principal-1001")}
    if name.startswith("privfail"):
        return 200, {"result": f"SECRET-FAILURE-{name}", "privateTo": args.get("owner", "principal-1001"),
                     "isError": True}
    return 200, {"result": f"public result of {name}"}


def default_mcp(server, body):
    if not isinstance(body, dict) or "id" not in body:
        return 202, None
    return 200, {"jsonrpc": "2.0", "id": body["id"],
                 "result": {"content": [{"type": "text", "text": f"mcp {server} {body['params']['name']} ok"}]}}


class PiStandIn(StandIn):
    """rich_rig.StandIn for the Pi worker: scripted host tools (self.tool), MCP servers
    (self.mcp) and host compactor (self.compact, default 204: fall back), a compact
    request bound (self.compact_max, brokerd's maxRequestBytes), and turn defaults."""

    def __init__(self, env, **kw):
        self.tool = default_tool
        self.mcp = default_mcp
        self.compact = lambda body: (204, None)
        self.compact_max = 32 * 1024 * 1024
        super().__init__(env, **kw)

    def _listen(self):
        from rich_rig import StandInServer
        import threading
        self.server = StandInServer(self.sock, PiStandInHandler)
        self.server.owner = self
        os.chown(self.sock, self.env.uid, self.env.gid)
        os.chmod(self.sock, 0o600)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def start_worker(self, image, env_vars=None):
        self.worker = WorkerContainer(self.env, image, self.dirs["broker"], self.dirs["ws"], env_vars)
        return self.worker

    def run_script(self, image, script, *args, timeout=120):
        """node /test/SCRIPT ARGS... in a sealed container of image on this stand-in's
        socket and workspace (tests/integration/pi mounted read-only at /test); returns
        the CompletedProcess."""
        return docker("run", "--rm", *SEALED_RUN, "--user", f"{self.env.uid}:{self.env.gid}",
                      "-v", f"{self.dirs['ws']}:/workspace", "-v", f"{self.dirs['broker']}:/run/broker:ro",
                      "-v", f"{SCRIPTS_DIR}:/test:ro", "--entrypoint", "/usr/bin/node", image,
                      f"/test/{script}", *args, check=False, timeout=timeout)

    def turn_packet(self, text, timeout=90, **fields):
        """Queue a turn and return the reply packet posted for it."""
        tid = self.queue_turn(text, **fields)
        packet = self.wait_result(timeout)
        assert packet["turnId"] == tid, packet.get("turnId")
        return packet

    def reply(self, text, **fields):
        return self.turn_packet(text, **fields)["text"]

    def model_requests(self):
        return [r for r in self.anthropic.requests() if r["path"].startswith("/v1/messages")]

    def worker_records(self):
        return self.worker.log_records() if self.worker else []

    def session_entries(self):
        d = os.path.join(self.dirs["ws"], "sessions")
        out = []
        for name in sorted(os.listdir(d)):
            if name.endswith(".jsonl"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    out.append([json.loads(line) for line in f if line.strip()])
        return out


@contextlib.contextmanager
def started_stand_in(env, image):
    """A PiStandIn with a worker container of image (a PiImage) that has announced itself,
    on a fresh workspace; closed (container and all) on the way out."""
    s = PiStandIn(env)
    try:
        s.start_worker(image.tag)
        wait_until(lambda: s.readies, READY_S, "the worker's readiness announcement")
        yield s
    finally:
        s.close()


# ---- reading requests ----------------------------------------------------------------------

def content_blocks(body, kind):
    """Every content block of type kind in a Messages request body, in order."""
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        for b in c if isinstance(c, list) else []:
            if b.get("type") == kind:
                out.append(b)
    return out


def tool_result_text(block):
    c = block.get("content")
    if isinstance(c, list):
        return "".join(x.get("text", "") for x in c if isinstance(x, dict))
    return c


def system_text(body):
    s = body.get("system")
    if isinstance(s, list):
        return "".join(b.get("text", "") for b in s)
    return s or ""


def is_summary(body):
    return "context summarization assistant" in system_text(body)
