# SPDX-License-Identifier: Apache-2.0
"""The opt-in host_fetch guest tool (issue 13, DESIGN.md section 8.2), through real daemons.

Three kinds of test, none of which sends a packet outside loopback:

  real turns   statd, runnerd, the worker in a real container and tests/testbuild's fetch
               build of brokerd (tests/integration/fetch_rig.py): the scripted model asks
               for host_fetch ("#script NAME"), the worker calls /tools/fetch, and the test
               reads what the model got back in the next model request the fake recorded;
  fetch rig    the same brokerd alone (broker_rig.BrokerRig) for what a turn cannot show
               exactly: the answer's bound, the call budget, bad bodies, cancellation;
  production   the installed-to-be brokerd (no seams) for refusals, which need no public
               address: each refused URL points at a loopback listener that must see no
               connection.

Each refusal checks the exact reason (so it was that rule), that the fake web server saw no
connection at all, and where it matters that the same input minus the bad part passes.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_host_fetch.py
"""
import json
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from broker_rig import BrokerRig, request_bytes
from fetch_rig import BLACKHOLE, WEB, WEB6, FetchFake, FetchSuite, fetch_environment
from harness import SRCDIR, HarnessError, Suite, wait_until

LIMITS = {"enabled": True, "maxBytes": 65536, "timeoutMs": 3000, "maxRedirects": 2}
DESCRIPTION = ("Fetch a public web page (http or https URL) from the host and read it as text. The answer starts "
               "with the HTTP status, the final URL after redirects and the content type, then the page's text. "
               "Binary content, private or local addresses and URLs with credentials are refused; long pages "
               "are cut.")
PARAMETERS = {"type": "object", "properties": {"url": {"type": "string", "description":
                                                         "the absolute http:// or https:// URL to fetch"}},
              "required": ["url"], "additionalProperties": False}
BINARY = "Not shown: this is binary content, not text; host_fetch returns text only."
NOT_UTF8 = "Not shown: this content is not UTF-8 text (or it holds NUL bytes); host_fetch returns UTF-8 text only."
LOOPBACK = "refused: address not public: loopback (RFC 1122)"
PRIVATE = "refused: address not public: private (RFC 1918)"


# ---- fixtures ----

@pytest.fixture(scope="module")
def fake():
    try:
        f = FetchFake()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    f.host("www.example.com", WEB)
    f.host("v6.example.com", WEB6)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def fetch_env(rts_env):
    try:
        env = fetch_environment(rts_env)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    yield env
    env.cleanup()


def _start(cls, *args, **kw):
    try:
        return cls(*args, **kw)
    except HarnessError as e:
        pytest.fail(f"did not start: {e}", pytrace=False)


def _stop(s):
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def fs(fetch_env, fake):
    """A whole installation with host_fetch on and small limits."""
    s = _start(FetchSuite, fetch_env, fake, config={"fetch": LIMITS})
    yield s
    _stop(s)


@pytest.fixture(scope="module")
def frig(fetch_env, fake):
    """The fetch build alone, with a body limit above the tool result bound and the seed's
    largest timeout, so the call's own deadlines are what stop a fetch."""
    r = _start(BrokerRig, fetch_env, config={"fetch": {"enabled": True, "maxBytes": 2 * 1024 * 1024,
                                                         "timeoutMs": 120000, "maxRedirects": 2}},
               extra_env=dict(fake.brokerd_env(), RTS_LOG_LEVEL="debug"))
    yield r
    _stop(r)


@pytest.fixture(scope="module")
def prod(rts_env):
    """The production brokerd with host_fetch on."""
    r = _start(BrokerRig, rts_env, config={"fetch": {"enabled": True}}, extra_env={"RTS_LOG_LEVEL": "debug"})
    yield r
    _stop(r)


class Listener:
    """A loopback TCP listener that must never see a connection."""

    def __init__(self, family=socket.AF_INET, host="127.0.0.1"):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def connections(self):
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


# ---- helpers for real turns ----

def tc(call_id, name, args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def on(s, channel):
    assert s.cli("on", channel).returncode == 0


def fetch_turn(s, channel, name, urls, reply="done"):
    """A turn whose model asks for host_fetch of each URL in one response, then answers
    reply. Returns the model request bodies of the turn, oldest first."""
    with open(os.path.join(s.dirs["logs"], f"script-{name}.json"), "w", encoding="utf-8") as f:
        json.dump([{"content": None, "tool_calls": [tc(f"f{i}", "host_fetch", {"url": u})
                                                    for i, u in enumerate(urls)]},
                   {"content": reply}], f)
    before = len(s.fake.requests())
    p = s.cli("say", channel, "--author", "1001", "--name", "Alice", f"#script {name}")
    assert p.returncode == 0, p.stderr + s.logs()[-4000:]
    assert p.stdout.strip() == reply
    return [r["body"] for r in s.fake.requests()[before:] if r["method"] == "POST"]


def tool_results(body):
    """The contents of the trailing tool messages of a model request, in order."""
    out = []
    for m in reversed(body["messages"]):
        if m["role"] != "tool":
            break
        out.insert(0, m["content"])
    return out


def page(url, ctype, body):
    """The result text of a text page (brokerd/fetch.h)."""
    data = body.encode()
    return f"HTTP status: 200\nURL: {url}\nContent-Type: {ctype}\nLength: {len(data)} bytes\n\n{body}"


def wait_log(s, needle, timeout=15):
    """Wait until brokerd's log holds needle: a string, or a compiled pattern."""
    def found():
        text = s.log_tail("brokerd", 1 << 20)
        return needle.search(text) if isinstance(needle, re.Pattern) else needle in text
    wait_until(found, timeout, f"brokerd logging {getattr(needle, 'pattern', needle)!r}")


def calls_logged(s):
    """The call counts of every "turn closed after N calls" line so far."""
    out = []
    for line in s.log_tail("brokerd", 1 << 20).splitlines():
        if "turn closed after " in line:
            out.append(int(line.split("turn closed after ")[1].split(" ")[0]))
    return out


# ---- real turns ----

def test_offered_and_a_text_page_reaches_the_model(fs, fake):
    """The worker offers host_fetch as the config's tool list says; a text page comes back
    to the model with its status, final URL and type, and the fetch sent no credential."""
    body = "<p>h\u00e9llo from a public page</p>\n"
    fake.static("hello.html", body)
    on(fs, "guild-f/text")
    before = len(fake.requests())
    reqs = fetch_turn(fs, "guild-f/text", "text", ["https://www.example.com/static/hello.html"])
    tools = {t["function"]["name"]: t["function"] for t in reqs[0]["tools"]}
    assert tools["host_fetch"] == {"name": "host_fetch", "description": DESCRIPTION, "parameters": PARAMETERS}
    assert tool_results(reqs[1]) == [page("https://www.example.com/static/hello.html", "text/html", body)]
    got = fake.requests()[before:]
    assert [(r["listener"], r["method"], r["path"]) for r in got] == [("https4", "GET", "/static/hello.html")]
    names = {k.lower() for k, _ in got[0]["headers"]}
    assert names == {"host", "user-agent", "accept", "accept-encoding"}, got[0]["headers"]
    assert fs.api_key not in json.dumps(got)
    wait_log(fs, "host_fetch: status 200, ")


def test_binary_and_non_utf8_content_are_refused_with_a_sentence(fs, fake):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    fake.static("img.png", png)
    fake.static("cafe.latin1", b"caf\xe9 au lait")
    fake.static("data.bin", b"plain words, declared binary")
    on(fs, "guild-f/binary")
    reqs = fetch_turn(fs, "guild-f/binary", "binary", [
        "https://www.example.com/static/img.png", "https://www.example.com/static/cafe.latin1",
        "https://www.example.com/static/data.bin"])
    head = "HTTP status: 200\nURL: https://www.example.com/static/{}\nContent-Type: {}\nLength: {} bytes\n\n"
    assert tool_results(reqs[1]) == [
        head.format("img.png", "image/png", len(png)) + BINARY,
        head.format("cafe.latin1", "text/plain", 12) + NOT_UTF8,
        head.format("data.bin", "application/octet-stream", 28) + BINARY,
    ]
    sent = json.dumps(reqs[1])
    assert "plain words" not in sent and "au lait" not in sent and "IHDR" not in sent


def test_private_loopback_and_metadata_urls_are_refused_and_nothing_connects(fs, fake):
    fake.host("private.example.com", "10.0.0.5")
    fake.host("mixed.example.com", f"{WEB},192.168.1.1")
    fake.host("meta.example.com", "169.254.169.254")
    l4, l6 = Listener(), Listener(socket.AF_INET6, "::1")
    cases = [
        (f"http://127.0.0.1:{l4.port}/", LOOPBACK),
        (f"http://[::1]:{l6.port}/", "refused: address not public: loopback (RFC 4291)"),
        (f"http://2130706433:{l4.port}/", LOOPBACK),
        ("http://169.254.169.254/latest/meta-data/", "refused: address not public: link-local (RFC 3927)"),
        ("https://meta.example.com/", "refused: address not public: link-local (RFC 3927)"),
        ("https://private.example.com/static/hello.html", PRIVATE),
        ("https://mixed.example.com/static/hello.html", "refused: address not public: private (RFC 1918)"),
        ("https://user:pw@www.example.com/static/hello.html", "refused: URL carries user info"),
    ]
    on(fs, "guild-f/refused")
    conns, reqs_before = len(fake.connections()), len(fake.requests())
    try:
        reqs = fetch_turn(fs, "guild-f/refused", "refused", [u for u, _ in cases])
        assert tool_results(reqs[1]) == [want for _, want in cases]
        assert fake.opened_since(conns) == [] and fake.requests()[reqs_before:] == []
        assert l4.connections() == 0 and l6.connections() == 0
    finally:
        l4.close()
        l6.close()
    # The same page from a name whose every address is public passes.
    reqs = fetch_turn(fs, "guild-f/refused", "refused-ok", ["https://www.example.com/static/hello.html"])
    assert tool_results(reqs[1])[0].startswith("HTTP status: 200\n")


def test_redirects_are_vetted_again(fs, fake):
    """A redirect to a private address, and a name that answers a public address for the
    first hop and loopback for the next (rebinding), are refused at that hop."""
    fake.host("rebind.example.com", WEB, "127.0.0.1")
    on(fs, "guild-f/redirect")
    before = len(fake.requests())
    reqs = fetch_turn(fs, "guild-f/redirect", "redirect", [
        "https://www.example.com/redirect/302?to=http%3A%2F%2F10.0.0.7%2F",
        "https://rebind.example.com/redirect/302?to=%2Fstatic%2Fhello.html",
        "https://www.example.com/redirect/302?to=%2Fstatic%2Fhello.html",
    ])
    results = tool_results(reqs[1])
    assert results[:2] == [PRIVATE, LOOPBACK]
    # The same redirect within public addresses is followed, and the final URL shown.
    assert results[2].startswith("HTTP status: 200\nURL: https://www.example.com/static/hello.html\n")
    paths = [r["path"] for r in fake.requests()[before:]]
    assert paths == ["/redirect/302?to=http%3A%2F%2F10.0.0.7%2F", "/redirect/302?to=%2Fstatic%2Fhello.html",
                     "/redirect/302?to=%2Fstatic%2Fhello.html", "/static/hello.html"]


def test_size_limit(fs, fake):
    on(fs, "guild-f/size")
    reqs = fetch_turn(fs, "guild-f/size", "size", ["https://www.example.com/bytes/65537",
                                                     "https://www.example.com/bytes/65536"])
    over, at = tool_results(reqs[1])
    assert over == "fetch failed: response body is larger than the limit (65536 bytes)"
    assert at.startswith("HTTP status: 200\nURL: https://www.example.com/bytes/65536\nContent-Type: text/plain\n"
                         "Length: 65536 bytes\n\nxxxx")


def test_timeout_ends_the_fetch_within_the_turn(fs, fake):
    """fetch.timeoutMs (3 s here) stops a page that never answers; the turn goes on."""
    on(fs, "guild-f/timeout")
    conns = len(fake.connections())
    reqs = fetch_turn(fs, "guild-f/timeout", "timeout", ["https://www.example.com/hang"])
    assert tool_results(reqs[1]) == ["fetch failed: timed out (the limit is 3000 ms)"]
    ev = fake.wait_closed(conns)
    opened = [e["time"] for e in ev if e["event"] == "open"]
    closed = [e["time"] for e in ev if e["event"] == "close"]
    assert len(opened) == 1 and len(closed) == 1
    # Held until the limit, then dropped (the upper end only bounds a stuck fetch).
    assert 2.5 <= closed[0] - opened[0] < 30, ev


def test_fetch_calls_count_against_the_turn_budget(fs, fake):
    """Every host_fetch call is a broker call: this turn makes two model calls and three
    fetches (one refused), and brokerd counts five."""
    on(fs, "guild-f/budget")
    n = len(calls_logged(fs))
    fetch_turn(fs, "guild-f/budget", "budget", ["https://www.example.com/text", "http://10.9.9.9/",
                                                 "https://www.example.com/text"])
    deadline = time.monotonic() + 15
    while len(calls_logged(fs)) == n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls_logged(fs)[n:] == [5]


def test_a_page_reflecting_the_model_key_is_refused(fs, fake):
    """The reflection filter reads fetch answers like any tool output: the key in a page,
    raw or \\u-escaped in JSON, refuses the answer; the same page without it passes."""
    key = fs.api_key
    fake.static("key.txt", f"leaked: {key}\n")
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    fake.static("key.json", '{"token": "' + escaped + '"}')
    fake.static("nokey.txt", "leaked: nothing\n")
    on(fs, "guild-f/reflect")
    reqs = fetch_turn(fs, "guild-f/reflect", "reflect", [
        "https://www.example.com/static/key.txt", "https://www.example.com/static/key.json",
        "https://www.example.com/static/nokey.txt"])
    results = tool_results(reqs[1])
    assert "upstream_error" in results[0] and "upstream_error" in results[1], results
    assert results[2] == page("https://www.example.com/static/nokey.txt", "text/plain", "leaked: nothing\n")
    assert key not in json.dumps(reqs)
    wait_log(fs, "host_fetch answer refused: it reflects a credential")


def test_tool_absent_when_not_enabled(fetch_env, fake):
    """Without "fetch" the worker is not offered host_fetch: a model that asks for it
    anyway gets the worker's refusal, and brokerd is never called on /tools/fetch."""
    s = _start(FetchSuite, fetch_env, fake, config={})
    try:
        on(s, "guild-f/off")
        before = len(fake.requests())
        reqs = fetch_turn(s, "guild-f/off", "off", ["https://www.example.com/text"])
        assert "host_fetch" not in [t["function"]["name"] for t in reqs[0].get("tools", [])]
        assert "host_fetch" not in json.dumps(reqs[1]["tools"] if "tools" in reqs[1] else [])
        assert fake.requests()[before:] == []
        assert "route fetch" not in s.log_tail("brokerd", 1 << 20)
    finally:
        _stop(s)


@pytest.mark.parametrize("config,message", [
    ({"fetch": {"enabled": True},
      "tools": [{"name": "fetch", "description": "d", "parameters": {}, "command": ["/bin/true"]}]},
     'tools[0].name: "fetch" is taken by the built-in tool host_fetch while fetch.enabled is true'),
    ({"fetch": {"maxBytes": 1000}}, "fetch.enabled: is required"),
    ({"fetch": {"enabled": True, "maxBytes": 33554433}}, "fetch.maxBytes: must be an integer from 1 to 33554432"),
    ({"fetch": {"enabled": True, "timeoutMs": 0}}, "fetch.timeoutMs: must be an integer from 1 to 120000"),
    ({"fetch": {"enabled": True, "maxRedirects": 11}}, "fetch.maxRedirects: must be an integer from 0 to 10"),
])
def test_config_errors_stop_the_daemons(rts_env, config, message):
    with pytest.raises(HarnessError) as e:
        Suite(rts_env, config=config)
    assert message in str(e.value), str(e.value)[-2000:]


def test_every_tool_and_host_fetch_reach_the_model(rts_env):
    """The longest tool lists the config allows plus host_fetch: the worker's input admits
    them (RTS_PUBLIC_TOOLS_MAX counts the built-in tool) and the model is offered every one."""
    host = [{"name": f"t{i:02d}", "description": "", "parameters": {}, "command": ["/bin/true"]}
            for i in range(32)]
    mcp = [{"name": f"s{k}", "url": "https://localhost:9/mcp",
            "tools": [{"name": f"m{i:02d}", "description": "", "parameters": {}} for i in range(32)]}
           for k in range(8)]
    s = _start(Suite, rts_env, config={"tools": host, "mcp": mcp, "fetch": {"enabled": True}})
    try:
        on(s, "guild-f/all")
        before = len(s.fake.requests())
        p = s.cli("say", "guild-f/all", "--author", "1001", "--name", "Alice", "hello")
        assert p.returncode == 0 and p.stdout.startswith("echo: "), p.stderr
        body = [r["body"] for r in s.fake.requests()[before:] if r["method"] == "POST"][0]
        names = [t["function"]["name"] for t in body["tools"]]
        assert len(names) == 3 + 32 + 1 + 8 * 32
        assert names.index("host_fetch") == names.index("host_t31") + 1 == names.index("mcp_0_m00") - 1
        assert "left out" not in s.log_tail("runnerd", 1 << 20)
    finally:
        _stop(s)


def test_ranges_are_the_headers_and_the_man_pages():
    """fetch.* ranges: common/limits.h (which the library and the loader both use) and
    roundtable-sandbox.json(5) say the same, and they are the seed's."""
    with open(os.path.join(SRCDIR, "common", "limits.h"), encoding="utf-8") as f:
        header = f.read()

    def define(name):
        m = re.search(rf"^#define {name} \(?([\d\su*]+)\)?$", header, re.M)
        return eval(m.group(1).replace("u", ""), {"__builtins__": {}})

    seed = {"TIMEOUT_MIN_MS": 1, "TIMEOUT_MAX_MS": 120000, "TIMEOUT_DEFAULT_MS": 60000, "REDIRECTS_MIN": 0,
            "REDIRECTS_MAX": 10, "REDIRECTS_DEFAULT": 5, "BYTES_MIN": 1, "BYTES_MAX": 32 * 1024 * 1024,
            "BYTES_DEFAULT": 5 * 1024 * 1024}
    for k, v in seed.items():
        assert define("RTS_FETCH_" + k) == v, k
    with open(os.path.join(SRCDIR, "man", "roundtable-sandbox.json.5.in"), encoding="utf-8") as f:
        page = f.read()
    for line in ("maxBytes Pq integer, 1 to 33554432\n", "Default: 5242880 (5 MiB).",
                 "timeoutMs Pq integer, 1 to 120000\n", "Default: 60000.",
                 "maxRedirects Pq integer, 0 to 10\n", "Default: 5.\n"):
        assert line in page, line
    with open(os.path.join(SRCDIR, "etc", "sandbox.json.example"), encoding="utf-8") as f:
        example = json.load(f)
    assert example["fetch"] == {"enabled": False, "maxBytes": 5242880, "timeoutMs": 60000, "maxRedirects": 5}


# ---- the fetch build alone ----

def result_of(a):
    assert a.status == 200, (a.status, a.raw[:400])
    assert a.header("Content-Type") == "application/json" and a.closed and a.rest == b""
    body = a.json()
    assert list(body) == ["result"]
    return body["result"]


def test_answer_is_bounded_like_a_tool_result(frig, fake):
    """A 1.5 MB page under a 2 MiB fetch limit comes back cut to the 1 MiB tool result
    bound, at a character boundary, saying so."""
    with frig.turn() as t:
        text = result_of(t.post("/tools/fetch", {"url": "https://www.example.com/bytes/1500000"}))
    assert len(text.encode()) <= 1024 * 1024
    head, _, shown = text.partition("\n\n")
    assert head.endswith(f"Length: 1500000 bytes (cut: the first {len(shown)} bytes follow)")
    assert shown == "x" * len(shown) and len(shown) > 1000 * 1000


def test_redirect_limit(frig, fake):
    with frig.turn() as t:
        over = result_of(t.post("/tools/fetch", {"url": "https://www.example.com/chain/3"}))
        ok = result_of(t.post("/tools/fetch", {"url": "https://www.example.com/chain/2"}))
    assert over == "fetch failed: too many redirects (at most 2 are followed)"
    assert ok.startswith("HTTP status: 200\nURL: https://www.example.com/chain/0\n")


@pytest.mark.parametrize("body", [
    b"{}", b'{"url": 5}', b'{"url": ""}', b'{"url": "https://www.example.com/text", "headers": {}}',
    b'["https://www.example.com/text"]', b'{"url": "https://www.example.com/text"', b'"https://www.example.com/text"',
    b'{"url": "https://www.example.com/text", "url": "https://www.example.com/text"}',
])
def test_bad_bodies_are_refused_and_fetch_nothing(frig, fake, body):
    with frig.turn() as t:
        before = len(fake.connections())
        a = t.post("/tools/fetch", body)
        assert a.status == 400 and a.json() == {"error": "bad_request"}, a.raw[:300]
        assert fake.opened_since(before) == []
        # The well-formed body passes on the same turn.
        assert result_of(t.post("/tools/fetch", {"url": "https://www.example.com/text"})).startswith(
            "HTTP status: 200\n")


def test_budget_counts_fetch_calls(frig, fake):
    """48 calls per turn, fetches included, refused ones too; the 49th fetches nothing."""
    with frig.turn() as t:
        for _ in range(47):
            assert result_of(t.post("/tools/fetch", {"url": "http://10.1.1.1/"})) == PRIVATE
        assert result_of(t.post("/tools/fetch", {"url": "https://www.example.com/text"})).startswith("HTTP status: 200")
        before = len(fake.connections())
        a = t.post("/tools/fetch", {"url": "https://www.example.com/text"})
        assert a.status == 429 and a.json() == {"error": "budget_exhausted"}
        assert fake.opened_since(before) == []
    assert t.calls == 49


def _wait_open(fake, before, timeout=15):
    deadline = time.monotonic() + timeout
    while not any(e["event"] == "open" for e in fake.connections()[before:]):
        if time.monotonic() > deadline:
            raise AssertionError("the fetch never connected")
        time.sleep(0.02)


def test_turn_deadline_cuts_the_fetch(frig, fake):
    """With the seed's largest fetch timeout (120 s), the turn's deadline still ends the
    fetch: the page's connection is dropped once the turn is over."""
    t = frig.turn(deadline_ms=3000)
    try:
        before = len(fake.connections())
        started = time.monotonic()
        a = t.post("/tools/fetch", {"url": "https://www.example.com/hang"}, timeout=30)
        # upstream_timeout, or the connection closed by the turn deadline sweep first.
        assert a.status in (504, None), a.raw[:300]
        ev = fake.wait_closed(before)
        assert time.monotonic() - started < 20
        closed = [e["time"] for e in ev if e["event"] == "close"]
        opened = [e["time"] for e in ev if e["event"] == "open"]
        assert closed[0] - opened[0] < 10, ev
    finally:
        t.close()


def test_broker_close_aborts_the_fetch(frig, fake):
    t = frig.turn()
    before = len(fake.connections())
    answers = []
    th = threading.Thread(target=lambda: answers.append(
        t.post("/tools/fetch", {"url": "https://www.example.com/hang"}, timeout=60)))
    th.start()
    try:
        _wait_open(fake, before)
        started = time.monotonic()
        t.close()  # BROKER_CLOSE, answered once the call has returned
        ev = fake.wait_closed(before)
        assert time.monotonic() - started < 10, ev
    finally:
        th.join(60)
    assert answers and answers[0].status in (503, None), answers[0].raw[:300]


def test_worker_hang_up_aborts_the_fetch(frig, fake):
    with frig.turn() as t:
        before = len(fake.connections())
        s = t.connect()
        s.sendall(request_bytes("/tools/fetch", {"url": "https://www.example.com/hang"}))
        _wait_open(fake, before)
        started = time.monotonic()
        s.close()
        fake.wait_closed(before)
        assert time.monotonic() - started < 10
        # The call's audit entry (brokerd/audit.h): the fetch route ended unavailable.
        wait_log(frig, re.compile(r"RTS_ROUTE=fetch .*RTS_RESULT=unavailable"))


def test_connect_deadline_per_address(frig, fake):
    """A vetted address that never completes the TCP handshake is given 3 s, then the
    next vetted address of the same answer is tried."""
    fake.host("slow.example.com", f"{BLACKHOLE},{WEB}")
    with frig.turn() as t:
        started = time.monotonic()
        text = result_of(t.post("/tools/fetch", {"url": "https://slow.example.com/text"}, timeout=30))
    assert text.startswith("HTTP status: 200\nURL: https://slow.example.com/text\n")
    assert time.monotonic() - started >= 2.5


# ---- the production brokerd ----

def test_production_refusals_connect_nothing(prod):
    """The installed-to-be brokerd, no seams: every refused URL names a loopback listener
    (or a private or metadata address) and nothing connects anywhere."""
    l4, l6 = Listener(), Listener(socket.AF_INET6, "::1")
    cases = [
        (f"http://127.0.0.1:{l4.port}/", LOOPBACK),
        (f"https://localhost:{l4.port}/", LOOPBACK),
        (f"http://[::1]:{l6.port}/", "refused: address not public: loopback (RFC 4291)"),
        (f"http://0x7f.1:{l4.port}/", LOOPBACK),
        (f"http://[::ffff:127.0.0.1]:{l4.port}/", "refused: address not public: IPv4-mapped (RFC 4291)"),
        ("http://169.254.169.254/latest/meta-data/", "refused: address not public: link-local (RFC 3927)"),
        ("http://[fd00:ec2::254]/", "refused: address not public: unique-local (RFC 4193)"),
        ("http://10.20.30.40/", PRIVATE),
        ("http://100.64.0.1/", "refused: address not public: shared address space (RFC 6598)"),
        (f"http://user@127.0.0.1:{l4.port}/", "refused: URL carries user info"),
        (f"ftp://127.0.0.1:{l4.port}/", "refused: URL scheme is not http or https"),
        ("file:///etc/passwd", "refused: URL scheme is not http or https"),
    ]
    try:
        with prod.nothing_forwarded(), prod.turn() as t:
            for url, want in cases:
                assert result_of(t.post("/tools/fetch", {"url": url})) == want, url
        assert l4.connections() == 0 and l6.connections() == 0
    finally:
        l4.close()
        l6.close()
    log = prod.broker_log()
    assert "host_fetch: address not public: loopback (RFC 1122)" in log
    assert str(l4.port) not in log and "127.0.0.1" not in log and "169.254" not in log


def test_production_route_absent_when_not_enabled(rts_env):
    r = _start(BrokerRig, rts_env)
    try:
        l4 = Listener()
        try:
            with r.turn() as t:
                a = t.post("/tools/fetch", {"url": f"http://127.0.0.1:{l4.port}/"})
                assert a.status == 404 and a.json() == {"error": "not_found"}
            assert l4.connections() == 0
        finally:
            l4.close()
    finally:
        _stop(r)


def test_seams_only_in_the_test_build(rts_env, fetch_env):
    """The production brokerd has no fetch seam to reach; the fetch build has."""
    def symbols(path):
        p = subprocess.run(["nm", path], capture_output=True, text=True, check=True)
        return p.stdout
    assert "rts_fetch_test_seams" not in symbols(rts_env.program("brokerd"))
    assert "rts_fetch_test_seams" in symbols(fetch_env.program("brokerd"))
