# SPDX-License-Identifier: Apache-2.0
"""The precheck image and its harness (worker/precheck/, HACKING.md "Precheck runtime"),
in real sealed containers against a stand-in broker on a real Unix socket (precheck_rig.py).

The runner through the daemons is test_precheck.py's; what is checked here is what the
image itself promises: the harness's input and output contract, the answer's
shape rules, mcp.call/mcp.json over the broker socket with the worker's exact request
form, one call at a time and the local call budget, and what the sealed container denies
(network, environment). The image is built once per module from the host's node.
"""
import json
import os
import subprocess
import tarfile
import tempfile

import pytest

from harness import Environment, HarnessError, docker, docker_bin
from precheck_rig import (DUMMY_KEY, MAKE_CONTEXT, PrecheckImage, RunDirs, StandInBroker, make_context,
                          node_host_argv, rpc_error, rpc_result, run_input, run_plain, run_sealed, text_result)

CONTEXT_MAX = 16 * 1024
NOTE_MAX = 1024
ERROR_MAX = 2048


@pytest.fixture(scope="module")
def account():
    try:
        Environment.check_root()
        uid, gid, _ = Environment.ensure_account()
    except HarnessError as e:
        pytest.fail(f"integration tests cannot run: {e}", pytrace=False)
    return uid, gid


@pytest.fixture(scope="module")
def precheck_image(account):
    try:
        Environment.check_docker()
        img = PrecheckImage.build()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    yield img
    problem = img.remove()
    if problem:
        print(f"test_precheck_image: {problem}")


class Rig:
    def __init__(self, image, uid, gid):
        self.image = image
        self.uid, self.gid = uid, gid
        self.dirs = RunDirs(uid, gid)
        self.broker = StandInBroker(self.dirs.socket, uid, gid)

    def run(self, script, deadline_s=60, attach_stderr=False, cli_env=None, **kw):
        return run_sealed(self.image.tag, run_input(script, **kw), self.dirs, self.uid, self.gid,
                          deadline_s=deadline_s, attach_stderr=attach_stderr, cli_env=cli_env)

    def answer(self, script, **kw):
        r = self.run(script, **kw)
        assert r.returncode == 0 and r.answer is not None, (r.returncode, r.stdout, r.stderr)
        return r.answer

    def plain(self, script, **kw):
        """The same run under the host's node, outside Docker."""
        return run_plain(run_input(script, **kw), socket_path=self.dirs.socket)

    def close(self):
        self.broker.close()
        self.dirs.close()


@pytest.fixture
def rig(precheck_image, account):
    r = Rig(precheck_image, *account)
    yield r
    r.close()


def error_of(answer):
    assert answer["v"] == 1 and answer["wake"] is True and set(answer) == {"v", "wake", "error"}, answer
    return answer["error"]


# ---- the image ---------------------------------------------------------------------------

def ldd_closure():
    """What ldd lists for the host's node: the libraries and the loader."""
    out = subprocess.run(node_host_argv(["sh", "-c", 'ldd "$(readlink -f /usr/bin/node)"']), capture_output=True,
                         text=True, check=True).stdout
    paths = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] == "=>" and f[2].startswith("/"):
            paths.add(f[2])
        elif f and f[0].startswith("/"):
            paths.add(f[0])
    return paths


def image_files(tag):
    """Every regular file in the image's layers (`docker save`), as absolute paths."""
    files = set()
    with tempfile.TemporaryDirectory() as tmp:
        tar = os.path.join(tmp, "image.tar")
        docker("save", "-o", tar, tag, timeout=300)
        with tarfile.open(tar) as t:
            manifest = json.load(t.extractfile("manifest.json"))
            for layer in manifest[0]["Layers"]:
                with tarfile.open(fileobj=t.extractfile(layer)) as lt:
                    files |= {"/" + m.name for m in lt.getmembers() if m.isfile()}
    return files


def test_image_holds_node_its_closure_and_the_harness_only(precheck_image):
    image = precheck_image
    """FROM scratch: the image's layers hold node, exactly ldd's closure (with the loader),
    the JavaScript builtins a distribution's node loads from disk (none for a node that
    embeds them) and the harness; no shell, nothing in /etc."""
    expected = {"/usr/bin/node", "/precheck/harness.mjs"} | ldd_closure()
    files = image_files(image.tag)
    builtins = {f for f in files - expected if f.startswith("/usr/share/nodejs/") and f.endswith(".js")}
    assert files - builtins == expected
    assert set(image.context_files) == files
    user = docker("image", "inspect", "--format", "{{.Config.User}}", image.tag).stdout.strip()
    assert user == "65534:65534"


def test_make_context_refusals(tmp_path):
    p = subprocess.run([MAKE_CONTEXT], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr
    p = subprocess.run([MAKE_CONTEXT, "--node", str(tmp_path / "no-node"), str(tmp_path / "a")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "no-node" in p.stderr and not (tmp_path / "a").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    p = subprocess.run([MAKE_CONTEXT, str(tmp_path / "full")], capture_output=True, text=True)
    assert p.returncode == 1 and "not an empty directory" in p.stderr
    assert os.listdir(tmp_path / "full") == ["x"]
    # A node ldd cannot complete: a copy whose interpreter is fine but a needed library is
    # missing is hard to make portably; a script in place of node is refused instead.
    fake = tmp_path / "node"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    p = subprocess.run([MAKE_CONTEXT, "--node", str(fake), str(tmp_path / "b")], capture_output=True, text=True)
    assert p.returncode == 1 and "does not run" in p.stderr and not (tmp_path / "b").exists()
    # An existing empty directory (mktemp -d) is accepted.
    (tmp_path / "empty").mkdir()
    p = make_context(str(tmp_path / "empty"))
    assert p.returncode == 0, p.stderr
    assert os.path.isfile(tmp_path / "empty" / "Dockerfile")
    assert os.path.isfile(tmp_path / "empty" / "rootfs" / "precheck" / "harness.mjs")


# ---- answers -------------------------------------------------------------------------------

def test_wake_false(rig):
    assert rig.answer("export default async () => ({ wake: false })") == {"v": 1, "wake": False}


def test_wake_false_with_note(rig):
    a = rig.answer("export default async () => ({ wake: false, note: 'nothing new' })")
    assert a == {"v": 1, "wake": False, "note": "nothing new"}
    # A note set to undefined counts as absent.
    assert rig.answer("export default async () => ({ wake: false, note: undefined })") == {"v": 1, "wake": False}


def test_wake_true_with_context(rig):
    a = rig.answer("export default async ({ schedule }) => ({ wake: true, context: 'due: ' + schedule.name })",
                   schedule={"name": "standup"})
    assert a == {"v": 1, "wake": True, "context": "due: standup"}
    # A synchronous default export is awaited the same way.
    assert rig.answer("export default () => ({ wake: true, context: '' })") == {"v": 1, "wake": True, "context": ""}


def test_answer_at_the_bounds_passes(rig):
    a = rig.answer(f"export default async () => ({{ wake: true, context: 'é'.repeat({CONTEXT_MAX // 2}) }})")
    assert a["context"] == "é" * (CONTEXT_MAX // 2)
    a = rig.answer(f"export default async () => ({{ wake: false, note: 'n'.repeat({NOTE_MAX}) }})")
    assert a["note"] == "n" * NOTE_MAX


def test_a_throw_wakes_with_the_error(rig):
    err = error_of(rig.answer("export default async () => {\n  throw new RangeError('boom');\n}"))
    assert err == "the script threw: RangeError: boom (script.mjs:2:9)"
    err = error_of(rig.answer("export default async () => { throw 'plain text'; }"))
    assert err == "the script threw: plain text"


WRONG = [
    ("42", "it is number, not an object"),
    ("null", "it is null, not an object"),
    ("[]", "it is an array, not an object"),
    ("'wake'", "it is string, not an object"),
    ("({})", 'it has no "wake"'),
    ("({ wake: 'yes', context: 'c' })", 'its "wake" is string, not a boolean'),
    ("({ wake: true })", 'its "context" is undefined, not a string'),
    ("({ wake: true, context: 7 })", 'its "context" is number, not a string'),
    ("({ wake: false, note: {} })", 'its "note" is object, not a string'),
    ("({ wake: false, context: 'c' })", 'it has "context", which a {wake: false} answer may not have'),
    ("({ wake: true, context: 'c', note: 'n' })", 'it has "note", which a {wake: true} answer may not have'),
    ("({ wake: true, error: 'mine' })", 'it has "error", which a {wake: true} answer may not have'),
    ("({ wake: true, context: 'c', [Symbol('s')]: 1 })", "it has a symbol key"),
    ("({ get wake() { return true; }, context: 'c' })", 'its "wake" is a getter, not a value'),
    (f"({{ wake: true, context: 'x'.repeat({CONTEXT_MAX + 1}) }})",
     f'its "context" is {CONTEXT_MAX + 1} bytes of UTF-8; at most {CONTEXT_MAX} are allowed'),
    (f"({{ wake: false, note: 'é'.repeat({NOTE_MAX // 2 + 1}) }})",
     f'its "note" is {NOTE_MAX + 2} bytes of UTF-8; at most {NOTE_MAX} are allowed'),
    ("({ wake: true, context: 'a\\ud800b' })", 'its "context" holds an unpaired surrogate'),
    ("({ wake: true, context: 'a\\u0000b' })", 'its "context" holds a NUL character'),
]


@pytest.mark.parametrize("value,why", WRONG, ids=[w[1][:40] for w in WRONG])
def test_a_wrong_answer_wakes_with_the_rule(rig, value, why):
    err = error_of(rig.answer(f"export default async () => {value}"))
    assert err.startswith("the script's answer is wrong: " + why), err


def test_error_text_is_bounded_and_sendable(rig):
    # A thrown message far over the bound, with a NUL and a lone surrogate: cut, not refused.
    err = error_of(rig.answer("export default async () => { throw new Error('\\u0000\\ud800' + 'é'.repeat(5000)); }"))
    assert len(err.encode()) <= ERROR_MAX and err.endswith("\u2026")
    assert err.startswith("the script threw: Error: \ufffd\ufffdé")


def test_load_failures(rig):
    err = error_of(rig.answer("export default async () => { const x = ; }"))
    assert err.startswith("the script did not load: SyntaxError")
    err = error_of(rig.answer("export const x = 1;"))
    assert err.startswith("the script has no default export function")
    err = error_of(rig.answer("import x from './other.mjs'; export default async () => ({ wake: false })"))
    assert err.startswith("the script did not load:")
    err = error_of(rig.answer("throw new Error('at load');"))
    assert err == "the script did not load: Error: at load (script.mjs:1:7)"


def test_endings_without_an_answer(rig):
    err = error_of(rig.answer("export default async () => { process.exit(3); }"))
    assert err == "the script ended the process (exit status 3) before answering"
    err = error_of(rig.answer("export default async () => new Promise(() => {})"))
    assert err.startswith("the script never answered")
    err = error_of(rig.answer(
        "export default async () => { setTimeout(() => { throw new Error('late'); }, 1);"
        " await new Promise((r) => setTimeout(r, 200)); return { wake: false }; }"))
    assert err.startswith("the script threw outside its answer: Error: late")


def test_console_output_never_reaches_the_result_line(rig):
    """console.*, process.stdout and node:console all write to stderr; stdout holds only
    the answer, even when the noise looks like an answer line."""
    forged = '{"v":1,"wake":false}'
    script = f"""import nodeConsole from 'node:console';
export default async () => {{
  console.log('{forged}');
  console.info('info'); console.warn('warn'); console.error('error'); console.table([1]);
  console.dir({{ a: 1 }});
  process.stdout.write('{forged}\\n');
  nodeConsole.log('from node:console');
  return {{ wake: true, context: 'real' }};
}};"""
    r = rig.run(script, attach_stderr=True)
    assert r.returncode == 0
    assert r.stdout == b'{"v":1,"wake":true,"context":"real"}\n'
    err = r.stderr.decode()
    assert forged in err and "from node:console" in err and "info" in err


def test_a_direct_write_to_fd_1_is_visible_to_the_host(rig):
    """The harness shares its process with the script, so a deliberate write to fd 1 cannot
    be stopped; it can only be seen: stdout is then not exactly one line, which the host
    treats as a failed run (HACKING.md "Precheck runtime")."""
    r = rig.run("import fs from 'node:fs';\n"
                "export default async () => { fs.writeSync(1, '{\"v\":1,\"wake\":false}\\n');"
                " return { wake: true, context: 'c' }; }")
    assert r.returncode == 0 and r.answer is None
    assert r.lines == ['{"v":1,"wake":false}\n', '{"v":1,"wake":true,"context":"c"}\n']


def test_a_prototype_tojson_does_not_change_the_line(rig):
    a = rig.answer("export default async () => { Object.prototype.toJSON = () => ({ wake: false });"
                   " JSON.stringify = () => 'x'; return { wake: true, context: 'c' }; }")
    assert a == {"v": 1, "wake": True, "context": "c"}


# ---- time ----------------------------------------------------------------------------------

TIME_SCRIPT = """export default async ({ firedAt, timeZone, today }) => ({ wake: true, context: JSON.stringify({
  today, timeZone, firedAt,
  utcDate: new Date(firedAt).toISOString().slice(0, 10),
  localDate: new Date(firedAt).getDate(),
  intlDate: Object.fromEntries(new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit',
    day: '2-digit' }).formatToParts(new Date(firedAt)).map((p) => [p.type, p.value])),
  defaultZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  german: new Intl.DateTimeFormat('de-DE', { timeZone, weekday: 'long' }).format(new Date(firedAt)),
}) })"""


@pytest.mark.parametrize("zone,fired,today,utc", [
    ("Pacific/Kiritimati", "2026-03-01T12:00:00Z", "2026-03-02", "2026-03-01"),  # UTC+14
    ("Pacific/Pago_Pago", "2026-03-01T05:00:00Z", "2026-02-28", "2026-03-01"),   # UTC-11
])
def test_today_and_time_zone_pass_through(rig, zone, fired, today, utc):
    """today is the host's, passed as given; Date's local time and Intl's default zone are
    the run's zone (ICU's data in the image; there is no zoneinfo)."""
    a = rig.answer(TIME_SCRIPT, time_zone=zone, fired_at=fired, today=today)
    got = json.loads(a["context"])
    assert got["today"] == today and got["timeZone"] == zone and got["firedAt"] == fired
    assert got["utcDate"] == utc != today
    assert "%(year)s-%(month)s-%(day)s" % got["intlDate"] == today
    assert got["localDate"] == int(today[-2:])
    assert got["defaultZone"] == zone
    assert got["german"] in ("Montag", "Samstag")  # full ICU: German day names, not English


# ---- mcp -----------------------------------------------------------------------------------

def test_mcp_call_sends_the_workers_request_and_returns_the_result(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("hit", extra={"n": 1}))))
    a = rig.answer("export default async ({ mcp }) => ({ wake: true, context:"
                   " JSON.stringify(await mcp.call('docs', 'search', { q: 'standup', n: 2 })) })")
    assert json.loads(a["context"]) == {"content": [{"type": "text", "text": "hit"}], "extra": {"n": 1}}
    reqs = rig.broker.requests()
    assert len(reqs) == 1 and rig.broker.connections() == 1
    r = reqs[0]
    assert r["requestline"] == "POST /mcp/docs HTTP/1.1"
    assert r["headers"] == [("Host", "broker"), ("Authorization", f"Bearer {DUMMY_KEY}"),
                            ("Content-Type", "application/json"), ("Content-Length", str(len(r["body"])))]
    assert r["json"] == {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "search", "arguments": {"q": "standup", "n": 2}}}


def test_mcp_calls_run_one_per_connection_in_sequence(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result(str(req["json"]["id"])))))
    a = rig.answer("export default async ({ mcp }) => { const out = [];"
                   " for (let i = 0; i < 3; i++) out.push((await mcp.call('docs', 'search')).content[0].text);"
                   " return { wake: true, context: out.join(',') }; }")
    assert a["context"] == "1,2,3"
    reqs = rig.broker.requests()
    assert [r["conn"] for r in reqs] == [1, 2, 3]
    assert [r["json"]["params"]["arguments"] for r in reqs] == [{}, {}, {}]  # no args: {}


def test_mcp_json_structured_then_text(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result(
        '{"from":"text"}', structuredContent={"from": "structured"}))))
    rig.broker.script("docs", "list", lambda req: (200, rpc_result(req, {"content": [
        {"type": "image", "data": "AA==", "mimeType": "image/png"}, {"type": "text", "text": '{"from":"text"}'},
        {"type": "text", "text": "second"}]})))
    rig.broker.script("docs", "prose", lambda req: (200, rpc_result(req, text_result("not json"))))
    rig.broker.script("docs", "empty", lambda req: (200, rpc_result(req, {"content": []})))
    script = """export default async ({ mcp }) => {
  const out = [await mcp.json('docs', 'search'), await mcp.json('docs', 'list')];
  for (const tool of ['prose', 'empty']) {
    try { await mcp.json('docs', tool); out.push('no throw'); } catch (e) { out.push([e.name, e.code, e.message]); }
  }
  return { wake: true, context: JSON.stringify(out) };
};"""
    got = json.loads(rig.answer(script, tools=[("docs", t) for t in ("search", "list", "prose", "empty")])["context"])
    assert got[0] == {"from": "structured"} and got[1] == {"from": "text"}
    assert got[2] == ["McpError", "not_json", "the first text content of docs/prose's answer is not JSON"]
    assert got[3] == ["McpError", "not_json", "docs/empty answered neither structured content nor text"]


ERRORS_SCRIPT = """export default async ({ mcp }) => {
  try { await mcp.call('docs', 'search', {}); return { wake: false }; }
  catch (e) { return { wake: true, context: JSON.stringify([e.name, e.code, e.message, e.result ?? null]) }; }
};"""


@pytest.mark.parametrize("answer,expect", [
    (lambda req: (200, rpc_result(req, {"content": [{"type": "text", "text": "no such page"}], "isError": True})),
     ["tool_error", "docs/search failed: no such page", True]),
    (lambda req: (200, rpc_result(req, {"content": [], "isError": True})),
     ["tool_error", "docs/search failed: the tool reported an error", True]),
    (lambda req: (200, rpc_error(req, -32602, "bad arguments")),
     ["rpc_error", "docs/search failed: JSON-RPC error -32602: bad arguments", False]),
    (lambda req: (403, {"error": "forbidden"}),
     ["forbidden", "the broker refused docs/search: forbidden (HTTP 403)", False]),
    (lambda req: (429, {"error": "budget_exhausted"}),
     ["budget_exhausted", "the broker refused docs/search: budget_exhausted (HTTP 429)", False]),
    (lambda req: (502, b"<html>"), ["error", "the broker refused docs/search: error (HTTP 502)", False]),
    (lambda req: (200, {"jsonrpc": "2.0", "id": 99, "result": {}}),
     ["bad_answer", "the broker's answer to docs/search is not a JSON-RPC response to it", False]),
    (lambda req: (200, {"jsonrpc": "2.0", "id": req["json"]["id"], "result": []}),
     ["bad_answer", "the broker's answer to docs/search has no result object", False]),
], ids=["isError", "isError-no-text", "rpc-error", "403", "429", "502-html", "wrong-id", "result-not-object"])
def test_mcp_errors_throw(rig, answer, expect):
    rig.broker.script("docs", "search", answer)
    name, code, message, result = json.loads(rig.answer(ERRORS_SCRIPT)["context"])
    assert [code, message, result is not None] == expect and name == "McpError"
    assert len(rig.broker.requests()) == 1


def test_an_uncaught_tool_error_wakes_with_it(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("down", isError=True))))
    err = error_of(rig.answer("export default async ({ mcp }) => {"
                              " await mcp.call('docs', 'search'); return { wake: false }; }"))
    assert err.startswith("the script threw: McpError: docs/search failed: down")


def test_an_unapproved_tool_is_refused_before_the_broker(rig):
    """Refused locally with its own code; nothing reaches the broker. The approved tool in
    the same run goes through, so it was the approval rule that refused."""
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("ok"))))
    rig.broker.script("docs", "delete", lambda req: (200, rpc_result(req, text_result("deleted"))))
    script = """export default async ({ mcp }) => {
  const out = [];
  for (const [s, t] of [['docs', 'delete'], ['mail', 'search'], ['docs', 'search']]) {
    try { out.push((await mcp.call(s, t)).content[0].text); } catch (e) { out.push(e.code + ': ' + e.message); }
  }
  return { wake: true, context: JSON.stringify(out) };
};"""
    got = json.loads(rig.answer(script)["context"])
    assert got == ["not_approved: docs/delete is not one of the tools this precheck may call: docs/search",
                   "not_approved: mail/search is not one of the tools this precheck may call: docs/search", "ok"]
    assert [r["json"]["params"]["name"] for r in rig.broker.requests()] == ["search"]


def test_bad_arguments_are_refused_before_the_broker(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("ok"))))
    script = """export default async ({ mcp }) => {
  const out = [];
  const cyclic = {}; cyclic.self = cyclic;
  const args = [[1], 'q', null, cyclic, { s: 'a\\ud800' }, { s: 'a\\u0000' }, { big: 'x'.repeat(300000) }, { ok: 1 }];
  for (const a of args) {
    try { await mcp.call('docs', 'search', a); out.push('sent'); } catch (e) { out.push(e.code); }
  }
  return { wake: true, context: JSON.stringify(out) };
};"""
    got = json.loads(rig.answer(script)["context"])
    assert got == ["bad_arguments"] * 7 + ["sent"]
    assert [r["json"]["params"]["arguments"] for r in rig.broker.requests()] == [{"ok": 1}]


def test_a_second_concurrent_call_is_refused_locally(rig):
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("first"))))
    script = """export default async ({ mcp }) => {
  const r = await Promise.allSettled([mcp.call('docs', 'search', { n: 1 }), mcp.call('docs', 'search', { n: 2 })]);
  return { wake: true, context: JSON.stringify(r.map((x) => x.status === 'fulfilled'
    ? x.value.content[0].text : x.reason.code + ': ' + x.reason.message)) };
};"""
    got = json.loads(rig.answer(script)["context"])
    assert got == ["first", "busy: another mcp call is still pending: calls run one at a time, so await each "
                            "before the next (docs/search)"]
    assert [r["json"]["params"]["arguments"] for r in rig.broker.requests()] == [{"n": 1}]


def test_max_calls_counts_refused_calls_too(rig):
    """maxCalls 3: a refused (unapproved) call, two sent calls, then the budget refuses;
    the broker saw exactly the two. With maxCalls 0 nothing is sent at all."""
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, text_result("ok"))))
    script = """export default async ({ mcp }) => {
  const out = [];
  for (const t of ['nope', 'search', 'search', 'search']) {
    try { await mcp.call('docs', t); out.push('ok'); } catch (e) { out.push(e.code); }
  }
  return { wake: true, context: out.join(',') };
};"""
    assert rig.answer(script, max_calls=3)["context"] == "not_approved,ok,ok,budget_exhausted"
    assert len(rig.broker.requests()) == 2
    assert rig.answer(script, max_calls=0)["context"] == "budget_exhausted," * 3 + "budget_exhausted"
    assert len(rig.broker.requests()) == 2


def test_no_broker_socket(rig):
    rig.broker.close()
    os.unlink(rig.dirs.socket)
    err = error_of(rig.answer("export default async ({ mcp }) => { await mcp.call('docs', 'search'); }"))
    assert err == "the script threw: McpError: the broker could not be reached"


# ---- what the container denies ------------------------------------------------------------

def test_the_network_is_unreachable(rig):
    """--network none: fetch to 1.1.1.1 fails at once, a name does not resolve, and only
    the loopback interface exists. Nothing reached the broker either."""
    script = """import net from 'node:net';
import os from 'node:os';
export default async () => {
  const out = {};
  try { await fetch('http://1.1.1.1/', { signal: AbortSignal.timeout(20000) }); out.fetch = 'reached'; }
  catch (e) { out.fetch = e.cause?.code ?? e.name; }
  try { await fetch('https://example.com/', { signal: AbortSignal.timeout(20000) }); out.dns = 'reached'; }
  catch (e) { out.dns = e.cause?.code ?? e.name; }
  out.tcp = await new Promise((resolve) => {
    const s = net.connect(443, '1.1.1.1', () => { s.destroy(); resolve('connected'); });
    s.on('error', (e) => resolve(e.code));
  });
  out.interfaces = Object.keys(os.networkInterfaces());
  return { wake: true, context: JSON.stringify(out) };
};"""
    got = json.loads(rig.answer(script)["context"])
    assert got["fetch"] in ("ENETUNREACH", "EHOSTUNREACH"), got
    assert got["tcp"] in ("ENETUNREACH", "EHOSTUNREACH"), got
    assert got["dns"] in ("EAI_AGAIN", "ENOTFOUND", "ENETUNREACH"), got
    assert got["interfaces"] == ["lo"]
    assert rig.broker.requests() == []


def test_no_token_in_the_environment(rig):
    """A credential in the environment of the host process that starts the run (as a
    daemon's could be) does not reach the script: process.env holds only TZ,
    /proc/self/environ is not readable at all, the run dir only the socket, and the
    workspace is empty and read-only."""
    token = "rts-precheck-secret-" + os.urandom(8).hex()
    script = """import fs from 'node:fs';
export default async () => {
  const read = (p) => { try { return fs.readFileSync(p, 'latin1'); } catch (e) { return e.code; } };
  const list = (p) => { try { return fs.readdirSync(p); } catch (e) { return e.code; } };
  return { wake: true, context: JSON.stringify({
    env: process.env,
    environ: read('/proc/self/environ').split('\\0').filter(Boolean).map((kv) => kv.split('=')[0]),
    environText: read('/proc/self/environ') + read('/proc/1/environ') + read('/proc/self/cmdline'),
    run: list('/run/broker'), workspace: list('/workspace'), writeWorkspace: (() => {
      try { fs.writeFileSync('/workspace/x', 'x'); return 'written'; } catch (e) { return e.code; } })(),
    writeRoot: (() => { try { fs.writeFileSync('/x', 'x'); return 'written'; } catch (e) { return e.code; } })(),
    writeTmp: (() => { fs.writeFileSync('/tmp/x', 'x'); return fs.readFileSync('/tmp/x', 'utf8'); })(),
  }) };
};"""
    r = rig.run(script, cli_env={"RTS_TEST_TOKEN": token, "API_KEY": token})
    assert r.returncode == 0 and "context" in (r.answer or {}), r.stdout
    got = json.loads(r.answer["context"])
    assert got["env"] == {"TZ": "Europe/Berlin"}
    # node is execute-only in the image, so the process is non-dumpable from exec on and
    # its /proc files are root's: not even the script reads its own environ
    # (test_escape_node.py).
    assert got["environ"] == ["EACCES"], got["environ"]
    assert token not in json.dumps(got) and DUMMY_KEY not in got["environText"]
    assert got["run"] == ["broker.sock"] and got["workspace"] == []
    assert got["writeWorkspace"] == "EROFS" and got["writeRoot"] == "EROFS" and got["writeTmp"] == "x"


def test_a_hanging_script_is_killed_at_the_deadline(rig):
    """A busy loop never answers; the run's deadline (runnerd's later; this test's here)
    kills the CLI and removes the container, and nothing was printed."""
    r = rig.run("export default async () => { for (;;) {} }", deadline_s=5)
    assert r.timed_out and r.stdout == b""
    assert docker("inspect", r.name, check=False).returncode != 0


def test_a_script_over_its_memory_is_killed_without_an_answer(rig):
    """--memory 256m with no swap: the kernel ends the container; stdout stays empty,
    which the host reads as a failed run (it wakes with a generic error)."""
    r = rig.run("export default async () => { const a = [];"
                " for (;;) a.push('x'.repeat(1e6) + Math.random()); }", deadline_s=60)
    assert not r.timed_out and r.returncode == 137 and r.stdout == b""
    assert docker("inspect", r.name, check=False).returncode != 0


def test_the_default_user_is_not_root(precheck_image, account):
    image = precheck_image
    """A bare run of the image (no --user) is nobody, not root."""
    p = subprocess.run([docker_bin(), "run", "--rm", "--network", "none", "--entrypoint", "/usr/bin/node", image.tag,
                        "-e", "console.log(process.getuid() + ':' + process.getgid())"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "65534:65534"


# ---- the harness under the host's node (no container) -------------------------------------

BAD_INPUTS = [
    (b"not json", "json"),
    (b"[]", "json"),
    (b"\xff\xfe", "encoding"),
    (run_input("x", extra=1), "unknown"),
    (json.dumps({"v": 1}).encode(), "script"),
    (run_input("x", v=2), "v"),
    (run_input(""), "script"),
    (run_input("x" * (64 * 1024 + 1)), "script"),
    (run_input("x", fired_at="yesterday"), "firedAt"),
    (run_input("x", fired_at="2026-02-30T25:00:00Z"), "firedAt"),
    (run_input("x", time_zone="Mars/Olympus"), "timeZone"),
    (run_input("x", time_zone="+01:00"), "timeZone"),
    (run_input("x", today="2026-02-30"), "today"),
    (run_input("x", today="1.3.2026"), "today"),
    (run_input("x", tools=[("Docs", "search")]), "tools"),
    (run_input("x", tools=[("docs", "a/b")]), "tools"),
    (run_input("x", max_calls=-1), "maxCalls"),
    (run_input("x", max_calls=1.5), "maxCalls"),
    (b" " * (512 * 1024 + 1), "size"),
]


@pytest.mark.parametrize("stdin,field", BAD_INPUTS, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_INPUTS)])
def test_bad_input_is_named_and_nothing_runs(rig, stdin, field):
    r = run_plain(stdin, socket_path=rig.dirs.socket)
    assert r.returncode == 1
    expected = {"v": 1, "error": "bad_input", "field": field}
    assert r.stdout == json.dumps(expected, separators=(",", ":")).encode() + b"\n"
    assert rig.broker.requests() == []


def test_good_input_at_the_bounds_runs(rig):
    """The bad inputs above minus their fault: a script of exactly 64 KiB, maxCalls 0, the
    largest tool list, any JSON as schedule."""
    script = "export default async () => ({ wake: false })"
    script += " " * (64 * 1024 - len(script))
    r = run_plain(run_input(script, max_calls=0, schedule=[1, {"a": None}],
                            tools=[("s%d" % (i % 8), "t%d" % i) for i in range(256)]), socket_path=rig.dirs.socket)
    assert r.returncode == 0 and r.stdout == b'{"v":1,"wake":false}\n', r.stdout


def test_plain_node_runs_the_same_contract(rig):
    """The harness needs nothing of the image: under the host's node, against the same
    stand-in broker, a call and an answer look the same."""
    rig.broker.script("docs", "search", lambda req: (200, rpc_result(req, {"structuredContent": {"n": 3}})))
    r = rig.plain("export default async ({ mcp }) =>"
                  " ({ wake: true, context: String((await mcp.json('docs', 'search')).n) })")
    assert r.returncode == 0 and r.stdout == b'{"v":1,"wake":true,"context":"3"}\n'
    assert rig.broker.requests()[0]["requestline"] == "POST /mcp/docs HTTP/1.1"
