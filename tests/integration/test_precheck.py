# SPDX-License-Identifier: Apache-2.0
"""The precheck runner through the real daemons (DESIGN.md 8.3; seed: "Precheck scripts"):
statd's ops, runnerd's sealed one-shot containers of the precheck image, brokerd's
precheck route to a fake MCP server over TLS, and the CLI verb.

Every rule brokerd enforces is shown against a script that speaks HTTP to the broker socket
itself (RAW_JS), since the harness's own checks are not the boundary: each refusal is
checked by its answer, by nothing reaching the fake MCP server, and by brokerd's log line
naming that rule.
"""
import json
import os
import signal
import subprocess
import tempfile

import pytest

from harness import QUIET_FORWARD_S, HarnessError, assert_quiet, wait_until
from precheck_suite import RAW_JS, PrecheckSuite, build_precheck_image

FORWARD_WINDOW_S = QUIET_FORWARD_S


@pytest.fixture(scope="module")
def precheck_tag(rts_env):
    try:
        return build_precheck_image(rts_env)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def _start(env, tag, **kw):
    try:
        return PrecheckSuite(env, tag, **kw)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)


@pytest.fixture(scope="module")
def pc(rts_env, precheck_tag):
    s = _start(rts_env, precheck_tag, precheck={"maxCalls": 6})
    yield s
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def make_pc(rts_env, precheck_tag):
    made = []

    def make(**kw):
        s = _start(rts_env, precheck_tag, **kw)
        made.append(s)
        return s
    yield make
    errors = []
    for s in made:
        try:
            s.stop()
        except HarnessError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("; ".join(errors), pytrace=False)


def context(ev):
    """The context of a wake:true event, parsed as JSON."""
    assert ev.get("event") == "precheck" and ev.get("wake") is True and "context" in ev, ev
    return json.loads(ev["context"])


def raw_script(body):
    """A script with RAW_JS, whose default export runs body (async, may use raw() and
    call()) and wakes with what body returns as JSON context."""
    return RAW_JS + "\nexport default async ({ mcp }) => {\n" + body + "\n};\n"


def wakes_with(body):
    return raw_script(f"const out = await (async () => {{ {body} }})();\n"
                      "return { wake: true, context: JSON.stringify(out) };")


def nothing_forwarded(s, before, what):
    assert len(s.mcp_requests()) == before, f"{what}: forwarded"
    assert_quiet(lambda: len(s.mcp_requests()) - before, FORWARD_WINDOW_S, f"{what}: requests at the MCP server")


def log_mark(s, name="brokerd"):
    """Where the daemon's log ends now: brokerd_says() looks only at what comes after."""
    try:
        return os.path.getsize(s.log_path(name))
    except FileNotFoundError:
        return 0


def log_since(s, mark, name="brokerd"):
    with open(s.log_path(name), encoding="utf-8", errors="replace") as f:
        f.seek(mark)
        return f.read()


def brokerd_says(s, text, mark):
    """brokerd logged text after mark (its refusals name their rule)."""
    wait_until(lambda: text in log_since(s, mark), 10, f"brokerd's log line \"{text}\"")


# ---------------------------------------------------------------- answers and the script's own errors

def test_the_answers(pc):
    assert pc.precheck("export default async () => ({ wake: false })") == {"id": "t1", "event": "precheck",
                                                                            "wake": False}
    ev = pc.precheck("export default () => ({ wake: false, note: 'nothing new' })")
    assert (ev["wake"], ev["note"]) == (False, "nothing new")
    ev = pc.precheck("export default async ({ schedule }) => ({ wake: true, context: JSON.stringify(schedule) })",
                     schedule={"cron": "0 9 * * *", "n": [1, 2]})
    assert context(ev) == {"cron": "0 9 * * *", "n": [1, 2]}


def test_a_throw_wakes_with_the_error(pc):
    ev = pc.precheck("export default async () => {\n  throw new TypeError('no feed today');\n};")
    assert ev["event"] == "precheck" and ev["wake"] is True
    assert ev["error"].startswith("the script threw: TypeError: no feed today (script.mjs:2:"), ev


def test_a_wrong_answer_wakes_with_the_rule(pc):
    ev = pc.precheck("export default async () => ({ wake: 'yes' })")
    assert ev["wake"] is True and ev["error"].startswith("the script's answer is wrong:"), ev
    ev = pc.precheck("export default async () => ({ wake: true, context: 'x'.repeat(16385) })")
    assert "16385 bytes" in ev["error"], ev


def test_a_forged_result_line_is_a_generic_error(pc):
    # The script writes its own line to fd 1 besides the harness's: runnerd reads two lines
    # and passes nothing of them on.
    ev = pc.precheck("import fs from 'node:fs';\n"
                     "export default async () => { fs.writeSync(1, 'GARBAGE-LINE\\n'); return { wake: false }; };")
    assert ev == {"id": ev["id"], "event": "precheck", "wake": True,
                  "error": "the precheck run failed without an answer"}, ev
    assert "GARBAGE" not in pc.log_tail("runnerd", 200000)


def test_today_is_the_date_in_the_run_zone(pc):
    # Noon UTC on March 1st is already March 2nd at Kiritimati (+14:00).
    script = ("export default async ({ firedAt, timeZone, today }) => {\n"
              "  const d = new Date(firedAt);\n"
              "  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit',\n"
              "    day: '2-digit' }).formatToParts(d).filter((p) => p.type !== 'literal').map((p) => p.value);\n"
              "  return { wake: true, context: JSON.stringify({ today, local: d.getDate(), utc: d.getUTCDate(),\n"
              "    parts: parts.join('-'), tz: process.env.TZ }) };\n"
              "};")
    ev = pc.precheck(script, fired_at="2026-03-01T12:00:00Z", time_zone="Pacific/Kiritimati", today="2026-03-02")
    assert context(ev) == {"today": "2026-03-02", "local": 2, "utc": 1, "parts": "2026-03-02",
                           "tz": "Pacific/Kiritimati"}
    # A date no zone can have at that instant is refused by statd; nothing runs.
    bad = pc.precheck(script, fired_at="2026-03-01T12:00:00Z", time_zone="Pacific/Kiritimati", today="2026-03-03")
    assert bad["error"] == "invalid_request" and bad["detail"].startswith("today "), bad
    # A zone this host does not know.
    bad = pc.precheck(script, time_zone="Mars/Olympus_Mons")
    assert bad["error"] == "unknown_time_zone", bad


def test_invalid_requests_are_answered_not_run(pc):
    for kw, path in (({"script": ""}, "script "), ({"approved": ["a/b/c"]}, "approved[0] "),
                     ({"firedAt": "yesterday"}, "firedAt "), ({"extra": 1}, "unknown field")):
        req = PrecheckSuite.request("export default () => ({ wake: false })")
        req.update(kw)
        a = pc.control(req)[0]
        assert a["error"] == "invalid_request" and a["detail"].startswith(path), (kw, a)
        assert "route" not in a and "event" not in a


# ---------------------------------------------------------------- the way out

def test_a_call_reaches_the_upstream_with_the_token(pc):
    before = len(pc.mcp_requests())
    ev = pc.precheck("export default async ({ mcp }) => ({ wake: true, context: JSON.stringify([\n"
                     "  await mcp.json('docs', 'echo', { q: 'x' }),\n"
                     "  (await mcp.call('docs', 'sse', {})).content[0].text]) })",
                     approved=["docs/echo", "sse"])
    assert context(ev) == [{"q": "x"}, "over sse"]
    got = pc.mcp_requests()[before:]
    assert [r["body"]["params"]["name"] for r in got] == ["echo", "sse"]
    # The token read on the host, inserted by brokerd; the upstream never saw the dummy.
    assert all(r["headers"]["authorization"] == "Bearer " + pc.token for r in got)


def test_an_answer_is_json_or_exactly_one_event(pc):
    script = ("export default async ({ mcp }) => {\n"
              "  const out = [];\n"
              "  for (const a of ARGS) {\n"
              "    try { out.push((await mcp.call('docs', 'sse', a)).content[0].text); }\n"
              "    catch (e) { out.push(e.code); }\n"
              "  }\n"
              "  return { wake: true, context: JSON.stringify(out) };\n"
              "};").replace("ARGS", json.dumps([{}, {"events": 2}, {"type": "other"}, {}]))
    mark = log_mark(pc)
    got = context(pc.precheck(script, approved=["docs/sse"]))
    assert got == ["over sse", "upstream_error", "upstream_error", "over sse"], got
    brokerd_says(pc, "an event stream that is not exactly one event", mark)
    # An answer in another type is refused the same way.
    script = ("export default async ({ mcp }) => {\n"
              "  try { await mcp.call('docs', 'html', {}); return { wake: false }; }\n"
              "  catch (e) { return { wake: true, context: JSON.stringify(e.code) }; }\n"
              "};")
    assert context(pc.precheck(script, approved=["docs/html"])) == "upstream_error"
    brokerd_says(pc, "an answer that is neither JSON nor an event stream", mark)


def test_describe_names_exactly_the_first_grants_tools(pc):
    a = pc.describe(channel="g/1")
    assert set(a) == {"id", "text"}
    text = a["text"]
    assert 'mcp.call("docs", "echo", args)  approval name: echo' in text
    assert 'mcp.call("slow", "sleep", args)' in text
    assert "wiki" not in text  # the catch-all grant is not this channel's
    assert "formatToParts" in text and "At most 6 calls" in text
    assert pc.token not in text and str(pc.mcp.port) not in text
    other = pc.describe(channel="g/elsewhere")["text"]
    assert 'mcp.call("wiki", "echo", args)' in other and "docs" not in other


def test_no_matching_grant_means_no_way_out(make_pc):
    s = make_pc(grants_fn=lambda s: [{"channel": "only-this", "servers": [
        {"name": "docs", "url": s.mcp.url, "tools": ["echo"], "token": {"file": s.token_file}}]}])
    assert "Tools: none." in s.describe(channel="g/1")["text"]
    before, mark = len(s.mcp_requests()), log_mark(s)
    ev = s.precheck(wakes_with("return [await raw('/mcp/docs', call('echo'))];"), approved=["docs/echo"])
    assert [r["status"] for r in context(ev)] == [404]
    brokerd_says(s, "refused: no such route", mark)
    nothing_forwarded(s, before, "a run without a grant")


def test_the_first_matching_grant_wins(pc):
    # g/1 matches the first grant: wiki, the catch-all's server, is not reachable even if
    # approved; elsewhere only wiki is.
    before = len(pc.mcp_requests())
    ev = pc.precheck(wakes_with("return [await raw('/mcp/wiki', call('echo'))];"), approved=["wiki/echo"])
    assert [r["status"] for r in context(ev)] == [404]
    nothing_forwarded(pc, before, "a server of a later grant")
    ev = pc.precheck(wakes_with("return [await raw('/mcp/wiki', call('echo', {k: 1})), "
                                "await raw('/mcp/docs', call('echo'))];"),
                     channel="g/elsewhere", approved=["wiki/echo", "docs/echo"])
    got = context(ev)
    assert [r["status"] for r in got] == [200, 404]
    assert json.loads(got[0]["body"])["result"]["content"][0]["text"] == '{"k": 1}'
    # wiki has no token: none is sent.
    assert "authorization" not in pc.mcp_requests()[-1]["headers"]


# ---------------------------------------------------------------- each of brokerd's rules

RULES = [
    # (name, script body returning [responses], approvals, status, brokerd's rule words)
    ("an unapproved tool", "return [await raw('/mcp/docs', call('whoami'))];", ["docs/echo"], 403,
     "refused: a granted tool that was not approved"),
    ("a tool the grant does not list", "return [await raw('/mcp/docs', call('delete_all'))];", ["docs/echo"], 403,
     "refused: a tool the grant does not list"),
    ("an ungranted server", "return [await raw('/mcp/other', call('echo'))];", ["docs/echo", "other/echo"], 404,
     "refused: no such route"),
    ("a query string", "return [await raw('/mcp/docs?url=x', call('echo'))];", ["docs/echo"], 404,
     "refused: no such route"),
    ("a batch", "return [await raw('/mcp/docs', '[' + call('echo') + ']')];", ["docs/echo"], 400,
     "refused: a batch"),
    ("tools/list", "return [await raw('/mcp/docs', JSON.stringify({jsonrpc: '2.0', id: 1, method: 'tools/list'}))];",
     ["docs/echo"], 403, "refused: a method other than tools/call"),
    ("initialize", "return [await raw('/mcp/docs', JSON.stringify({jsonrpc: '2.0', id: 1, method: 'initialize', "
     "params: {}}))];", ["docs/echo"], 403, "refused: a method other than tools/call"),
    ("another credential", "return [await raw('/mcp/docs', call('echo'), {Authorization: 'Bearer sk-mine'})];",
     ["docs/echo"], 401, "refused: a credential other than the dummy bearer"),
    ("an extra credential header", "return [await raw('/mcp/docs', call('echo'), {'X-Api-Key': 'sk-mine'})];",
     ["docs/echo"], 400, "refused: a header field outside the four allowed"),
]


@pytest.mark.parametrize("name,body,approved,status,rule", RULES, ids=[r[0] for r in RULES])
def test_a_rule_refuses_its_bad_input(pc, name, body, approved, status, rule):
    before, mark = len(pc.mcp_requests()), log_mark(pc)
    ev = pc.precheck(wakes_with(body), approved=approved)
    got = context(ev)
    assert [r["status"] for r in got] == [status], got
    nothing_forwarded(pc, before, name)
    brokerd_says(pc, rule, mark)
    # The same call without the bad part passes: it was that rule.
    ok = pc.precheck(wakes_with("return [await raw('/mcp/docs', call('echo'))];"), approved=["docs/echo"])
    assert [r["status"] for r in context(ok)] == [200]


def test_a_second_call_while_one_is_pending_is_busy(pc):
    before, mark = len(pc.mcp_requests()), log_mark(pc)
    ev = pc.precheck(wakes_with(
        "const first = raw('/mcp/slow', call('sleep', { ms: 3000 }));\n"
        "await new Promise((r) => setTimeout(r, 700));\n"
        "const second = await raw('/mcp/docs', call('echo', { second: true }));\n"
        "return [await first, second];"), approved=["slow/sleep", "docs/echo"])
    got = context(ev)
    assert [r["status"] for r in got] == [200, 429], got
    assert json.loads(got[1]["body"]) == {"error": "busy"}
    brokerd_says(pc, "refused: another call is pending", mark)
    assert [r["body"]["params"]["name"] for r in pc.mcp_requests()[before:]] == ["sleep"]
    nothing_forwarded(pc, before + 1, "the second call")


def test_more_than_max_calls_counting_refused_ones(pc):
    # maxCalls 6 in this suite: five refused calls and one good one use it up; the seventh,
    # a good call, is refused by the budget.
    before, mark = len(pc.mcp_requests()), log_mark(pc)
    ev = pc.precheck(wakes_with(
        "const out = [];\n"
        "for (let i = 0; i < 5; i++) out.push(await raw('/mcp/docs', call('whoami')));\n"
        "out.push(await raw('/mcp/docs', call('echo', { n: 6 })));\n"
        "out.push(await raw('/mcp/docs', call('echo', { n: 7 })));\n"
        "return out;"), approved=["docs/echo"])
    got = context(ev)
    assert [r["status"] for r in got] == [403] * 5 + [200, 429], got
    assert json.loads(got[6]["body"]) == {"error": "budget_exhausted"}
    brokerd_says(pc, "refused: the call budget is spent", mark)
    assert [r["body"]["params"]["arguments"] for r in pc.mcp_requests()[before:]] == [{"n": 6}]
    nothing_forwarded(pc, before + 1, "the call over the budget")


# ---------------------------------------------------------------- the token stays on the host

@pytest.mark.parametrize("enc", ["raw", "json-text", "json-u", "base64", "base64url-2", "hex"])
@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_an_answer_echoing_the_token_is_refused(pc, enc, sse):
    before, mark = len(pc.mcp_requests()), log_mark(pc)
    script = ("export default async ({ mcp }) => {\n"
              "  try { await mcp.call('docs', 'reflect', ARGS); return { wake: false, note: 'passed' }; }\n"
              "  catch (e) { return { wake: true, context: JSON.stringify({ code: e.code, msg: e.message }) }; }\n"
              "};")
    args = {"enc": "escaped" if enc == "json-u" else enc, "sse": sse}
    ev = pc.precheck(script.replace("ARGS", json.dumps(args)), approved=["docs/reflect"])
    got = context(ev)
    assert got["code"] == "upstream_error", got
    assert pc.token not in ev["context"]
    # It reached the upstream (the token is echoed there), and came back refused for it.
    assert len(pc.mcp_requests()) == before + 1
    brokerd_says(pc, "answer refused (HTTP 200): an answer that carries the token", mark)
    # The same form of a key nobody holds passes: it was the token that was refused.
    ok = pc.precheck(script.replace("ARGS", json.dumps(dict(args, decoy=True))), approved=["docs/reflect"])
    assert ok.get("note") == "passed", ok


def test_the_token_is_nowhere_in_the_container(pc):
    # The script carries the token to search for it: it travels on stdin and is compiled
    # from memory, never written to a file, so a file holding it came from elsewhere.
    needle = json.dumps([pc.token[:10], pc.token[10:]])
    script = ("import fs from 'node:fs';\n"
              "import path from 'node:path';\n"
              "const token = NEEDLE.join('');\n"
              "export default async () => {\n"
              "  const texts = { env: JSON.stringify(process.env) };\n"
              "  for (const f of ['/proc/self/environ', '/proc/1/environ', '/proc/self/cmdline']) {\n"
              "    try { texts[f] = fs.readFileSync(f, 'latin1'); } catch (e) { texts[f] = String(e.code); }\n"
              "  }\n"
              "  let files = 0;\n"
              "  const hits = [];\n"
              "  const walk = (d, depth) => {\n"
              "    if (depth > 16 || d === '/proc' || d === '/sys') return;\n"
              "    let names = [];\n"
              "    try { names = fs.readdirSync(d); } catch { return; }\n"
              "    for (const n of names) {\n"
              "      const p = path.join(d, n);\n"
              "      let st;\n"
              "      try { st = fs.lstatSync(p); } catch { continue; }\n"
              "      if (st.isDirectory()) walk(p, depth + 1);\n"
              "      else if (st.isFile()) {\n"
              "        files++;\n"
              "        try { if (fs.readFileSync(p).includes(token)) hits.push(p); } catch {}\n"
              "      }\n"
              "    }\n"
              "  };\n"
              "  walk('/', 0);\n"
              "  let wsWritable = true;\n"
              "  try { fs.writeFileSync('/workspace/x', 'x'); } catch { wsWritable = false; }\n"
              "  return { wake: true, context: JSON.stringify({ env: Object.keys(process.env), files, hits,\n"
              "    inTexts: Object.values(texts).some((t) => t.includes(token)), texts,\n"
              "    broker: fs.readdirSync('/run/broker'), ws: fs.readdirSync('/workspace'), wsWritable }) };\n"
              "};").replace("NEEDLE", needle)
    got = context(pc.precheck(script, approved=["docs/echo"]))
    assert got["env"] == ["TZ"], got["env"]
    assert got["files"] > 10  # the walk saw the image's files
    assert (got["hits"], got["inTexts"]) == ([], False), got
    assert got["broker"] == ["broker.sock"] and got["ws"] == [] and got["wsWritable"] is False, got
    # Nor where the upstream is.
    blob = json.dumps(got["texts"])
    assert str(pc.mcp.port) not in blob and "localhost" not in blob, blob


def test_the_network_is_unreachable(pc):
    before = len(pc.mcp_requests())
    script = ("import net from 'node:net';\n"
              "const tryConnect = (host, port) => new Promise((resolve) => {\n"
              "  const s = net.connect({ host, port, timeout: 3000 });\n"
              "  s.on('connect', () => { s.destroy(); resolve('connected'); });\n"
              "  s.on('timeout', () => { s.destroy(); resolve('timeout'); });\n"
              "  s.on('error', (e) => resolve(e.code));\n"
              "});\n"
              "export default async () => {\n"
              "  const tcp = await tryConnect('127.0.0.1', PORT);\n"
              "  let fetched;\n"
              "  try { await fetch('https://localhost:PORT/mcp', { method: 'POST', body: '{}' }); fetched = 'ok'; }\n"
              "  catch (e) { fetched = String(e.cause && e.cause.code || e.name); }\n"
              "  return { wake: true, context: JSON.stringify({ tcp, fetched }) };\n"
              "};").replace("PORT", str(pc.mcp.port))
    got = context(pc.precheck(script))
    assert got["tcp"] != "connected" and got["fetched"] != "ok", got
    nothing_forwarded(pc, before, "a script dialing the upstream itself")


# ---------------------------------------------------------------- deadlines, bounds, shutdown

def test_a_hanging_script_is_stopped_at_the_deadline(make_pc):
    s = make_pc(precheck={"timeoutMs": 3000})
    ev = s.precheck("export default () => new Promise(() => { setInterval(() => {}, 1000); })")
    assert ev == {"id": ev["id"], "event": "precheck", "wake": True,
                  "error": "the precheck did not finish within 3000 ms and was stopped"}, ev
    assert s.containers() == []
    assert "precheck finished: deadline reached" in s.log_tail("runnerd")


def test_too_many_prechecks_in_a_channel_are_busy(make_pc):
    s = make_pc(precheck={"timeoutMs": 4000})
    c = s.connect()
    try:
        hang = "export default () => new Promise(() => { setInterval(() => {}, 1000); })"
        ids = [s.send_precheck(c, hang) for _ in range(4)]
        fifth = s.send_precheck(c, hang)
        # Refused at once, before any of the four ends.
        assert s.wait_line(c, fifth, timeout=3) == {"id": fifth, "event": "error", "error": "busy"}
        assert s.control({"op": "status"})[0]["prechecks"] == 4
        # Another channel still has room.
        other = s.send_precheck(c, "export default () => ({ wake: false })", channel="g/2")
        got = {}
        while len(got) < 5:
            o = c.recv(timeout=60)
            got[o["id"]] = o
        assert got[other]["wake"] is False
        assert all(got[i]["error"].startswith("the precheck did not finish") for i in ids)
    finally:
        c.close()
    assert "precheck refused: 4 running in all, 4 in this channel" in s.log_tail("statd")


def _start_hanging(s):
    c = s.connect()
    rid = s.send_precheck(c, "export default () => new Promise(() => { setInterval(() => {}, 1000); })")
    wait_until(lambda: s.containers(), 30, "the precheck's container")
    return c, rid


def test_stopping_statd_cancels_and_waits_for_the_container(make_pc):
    s = make_pc()
    c, rid = _start_hanging(s)
    names = s.containers()
    # gc leaves a running precheck's container alone.
    p = s.cli("gc")
    assert p.returncode == 1 and "running precheck" in p.stderr, p
    assert s.containers() == names
    s.stop_daemon("statd")
    # statd exited only after runnerd had removed the container and answered.
    assert s.exit_codes["statd"] == 0
    assert s.containers() == [], names
    ev = s.wait_line(c, rid, timeout=5)
    assert ev == {"id": rid, "event": "precheck", "wake": True,
                  "error": "the precheck was cancelled before it finished"}, ev
    c.close()


def test_stopping_runnerd_removes_the_container_before_it_exits(make_pc):
    s = make_pc()
    c, rid = _start_hanging(s)
    s.stop_daemon("runnerd")
    assert s.exit_codes["runnerd"] == 0
    assert s.containers() == []
    ev = s.wait_line(c, rid, timeout=10)
    assert ev["event"] == "precheck" and ev["wake"] is True, ev
    c.close()
    # Its run dir is gone too.
    assert [n for n in os.listdir(s.dirs["run"]) if n.startswith("precheck-")] == []


# ---------------------------------------------------------------- the CLI verb

def test_the_cli_verb(pc, tmp_path):
    script = tmp_path / "p.mjs"
    script.write_text("export default async ({ mcp, today, timeZone }) => ({ wake: true,\n"
                      "  context: JSON.stringify({ today, timeZone, echo: await mcp.json('docs', 'echo', { a: 1 }) }) })")
    p = pc.cli("precheck", "--channel", "g/1", "--target", "daily", "--approve", "docs/echo", "--fired-at",
               "2026-03-01T23:30:00Z", str(script))
    assert p.returncode == 0, p.stderr
    ev = json.loads(p.stdout)
    # The config's zone (UTC in these suites) and the date there.
    assert context(ev) == {"today": "2026-03-01", "timeZone": "UTC", "echo": {"a": 1}}
    # A throw is still an outcome: exit 0.
    script.write_text("export default () => { throw new Error('nope'); }")
    p = pc.cli("precheck", "--channel", "g/1", "--target", "daily", str(script))
    assert p.returncode == 0 and json.loads(p.stdout)["error"].startswith("the script threw: Error: nope"), p
    # From standard input, without approvals: no tool reachable.
    p = pc.cli("precheck", "--channel", "g/1", "--target", "daily", "-",
               input="export default async ({ mcp }) => { await mcp.call('docs', 'echo'); return { wake: false }; }")
    assert p.returncode == 0 and "not one of the tools this precheck may call" in json.loads(p.stdout)["error"]
    # Not attempted: usage errors and refusals are non-zero.
    assert pc.cli("precheck", "--channel", "g/1", str(script)).returncode == 2
    assert pc.cli("precheck", "--channel", "g/1", "--target", "t", "--approve", "a/b/c", str(script)).returncode == 2
    assert pc.cli("precheck", "--channel", "g/1", "--target", "t", "--fired-at", "now", str(script)).returncode == 2
    empty = tmp_path / "empty.mjs"
    empty.write_text("")
    assert pc.cli("precheck", "--channel", "g/1", "--target", "t", str(empty)).returncode == 2


def test_the_cli_verb_without_the_runner(make_suite, tmp_path):
    s = make_suite()
    script = tmp_path / "p.mjs"
    script.write_text("export default () => ({ wake: false })")
    p = s.cli("precheck", "--channel", "g/1", "--target", "daily", str(script))
    assert p.returncode == 1 and "not_configured" in p.stderr, p
    assert s.control({"op": "precheck_describe", "channel": "g/1", "target": "t", "tier": None})[0]["error"] == \
        "not_configured"
