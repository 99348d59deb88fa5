# SPDX-License-Identifier: Apache-2.0
"""The shared limits (common/limits.h) through real daemons, the real dockerd and image, and
the scripted model endpoint.

- Every configurable range, at its bottom and at its top, runs a real turn: the guest gets
  a reply, and the value reached where it matters (max_tokens in the upstream request,
  the container's memory/cpus/pids in `docker inspect`, the tool's deadline in brokerd's
  log, the prompt and tool list intact in the upstream request). Values are grouped so
  that three suites cover every range.
- One step outside either end of every range is refused at start, naming the key; so are
  bad names and a tool list the worker could not offer whole.
- Names outside [a-z][a-z0-9_]{0,47} sent to brokerd by a guest are refused and nothing is
  forwarded.
- The current user context is cut at 48 KiB, measured as the worker sends it.

Run: RTS_BUILDDIR=... python3 -m pytest -q -p no:cacheprovider tests/integration/test_limits.py
"""
import json
import os
import re
import subprocess
import threading

import pytest

import harness
import rtsproto
from broker_rig import BrokerRig, FakeMcp
from harness import SRCDIR, HarnessError, Suite, wait_until
from precheck_suite import PrecheckSuite, build_precheck_image
import test_spares as spare_tests

# common/limits.h (a test of its own below checks these against the header).
LIMITS = {
    "RTS_MAX_OUTPUT_TOKENS_MIN": 1, "RTS_MAX_OUTPUT_TOKENS_MAX": 1048576,
    "RTS_TURN_TIMEOUT_MS_MIN": 1000, "RTS_TURN_TIMEOUT_MS_MAX": 600000,
    "RTS_MEMORY_MB_MIN": 64, "RTS_MEMORY_MB_MAX": 65536,
    "RTS_PIDS_MIN": 8, "RTS_PIDS_MAX": 32768,
    "RTS_TOOL_TIMEOUT_MS_MIN": 1, "RTS_BROKER_REQUEST_DEADLINE_MS": 60000,
    "RTS_NAME_MAX": 48, "RTS_MAX_TOOLS": 32, "RTS_MAX_MCP_SERVERS": 8, "RTS_MAX_MCP_TOOLS": 32,
    "RTS_SYSTEM_PROMPT_MAX": 16 * 1024, "RTS_DESCRIPTION_MAX": 2048, "RTS_PARAMETERS_MAX": 16 * 1024,
    "RTS_PARAMETERS_DEPTH_MAX": 32, "RTS_INITIAL_CHANNELS_MAX": 4096, "RTS_CHANNEL_MAX": 512,
    "RTS_TEXT_MAX": 64 * 1024,
    "RTS_PRECHECK_TIMEOUT_MS_MIN": 1000, "RTS_PRECHECK_TIMEOUT_MS_MAX": 600000,
    "RTS_PRECHECK_MAX_CALLS_MAX": 1000, "RTS_PRECHECK_PIDS_MIN": 16,
    "RTS_WARM_SPARES_CAP_MIN": 1, "RTS_WARM_SPARES_CAP_MAX": 256,
    "RTS_WARM_SPARE_IDLE_MS_MIN": 1000, "RTS_WARM_SPARE_IDLE_MS_MAX": 86400000,
    "RTS_RICH_MEMORY_MB_MIN": 192, "RTS_RICH_PIDS_MIN": 16,
}
CPUS_MIN, CPUS_MAX = 0.01, 64
PRECHECK_CPUS_MIN = 0.1  # RTS_PRECHECK_CPUS_MIN: node does not start in time below it
RICH_CPUS_MIN = 0.25  # RTS_RICH_CPUS_MIN: the Pi worker starts in half a minute at 0.1
USER_CONTEXT_MAX = 48 * 1024  # seed: "current user context at 48 KiB" (worker/worker.h)
TRUNCATED = "\u2026[truncated]"
MIB = 1024 * 1024


def say(s, channel, text, author="1001", name="Alice"):
    return s.cli("say", channel, "--author", author, "--name", name, text)


def message(channel, text):
    author = {"id": "1001", "name": "Alice", "principalId": "p1", "tier": "member", "bot": False,
              "integration": False}
    return {"op": "message", "channel": channel, "guild": True, "author": author, "addressed": True,
            "text": text, "attachments": 0}


def json_len(text):
    """Bytes text takes inside a JSON string, as the worker counts them (rts_json_string_len:
    '"', '\\', '/' and the short escapes two, other control characters six)."""
    n = 0
    for b in text.encode():
        n += 2 if b in b'"\\/\b\f\n\r\t' else 6 if b < 0x20 else 1
    return n


def encoded_text(n_plain, n_breaks):
    """A text of n_plain letters and n_breaks line breaks: n_plain + 2 * n_breaks bytes encoded."""
    return ("p" * n_plain) + ("\n" * n_breaks)


def turn_requests(s, before):
    """The upstream requests recorded since index before."""
    return s.fake.requests()[before:]


def inspect_while_running(s, run, timeout=60, join=180):
    """Start run() (a turn) in a thread, `docker inspect` the turn's container while it runs,
    then wait for run() (at most join seconds). Returns (inspect dict, run's result)."""
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", run()))
    t.start()

    def inspected():
        for name in s.containers():
            try:
                info = s.docker_inspect(name)
            except subprocess.TimeoutExpired:
                # dockerd holds a container's lock while it starts it, and at the bottom of
                # the cpus range runc's own set-up inside the container runs at 1% of a CPU.
                continue
            if info:
                return info
        if not t.is_alive():
            raise AssertionError("the turn ended before its container was seen running")
        return None
    try:
        info = wait_until(inspected, timeout, "the turn's container to be running", step=0.05)
    finally:
        t.join(join)
    assert "r" in result, f"the run did not end within {join} s"
    return info, result["r"]


def assert_container_limits(info, memory_mb, nano_cpus, pids):
    hc = info["HostConfig"]
    assert hc["Memory"] == memory_mb * MIB
    assert hc["MemorySwap"] == memory_mb * MIB  # no additional swap
    assert hc["NanoCpus"] == nano_cpus
    assert hc["PidsLimit"] == pids


def host_cpus():
    return len(os.sched_getaffinity(0))


# ---------------------------------------------------------------- the header itself

def test_python_copies_match_the_header():
    """The constants this file, the harness and rtsproto.py use, and the ranges the man
    page states, are the header's (it is the one source)."""
    value = harness.limits_value

    for name, want in LIMITS.items():
        assert value(name) == want, name
    assert value("RTS_CPUS_MIN") == CPUS_MIN and value("RTS_CPUS_MAX") == CPUS_MAX
    assert value("RTS_PRECHECK_CPUS_MIN") == PRECHECK_CPUS_MIN
    assert value("RTS_RICH_CPUS_MIN") == RICH_CPUS_MIN

    # The harness's and the protocol helper's copies.
    assert rtsproto.CHANNEL_MAX == value("RTS_CHANNEL_MAX")
    assert rtsproto.SPEAKER_FIELD_MAX == value("RTS_SPEAKER_FIELD_MAX")
    assert rtsproto.TEXT_MAX == value("RTS_TEXT_MAX") and rtsproto.REPLY_MAX == value("RTS_REPLY_MAX")
    assert rtsproto.WORKER_OUTPUT_MAX == value("RTS_WORKER_OUTPUT_MAX")
    assert rtsproto.TURN_ID_LEN == value("RTS_TURN_ID_LEN")
    assert harness.SOCKET_PATH_MAX == value("RTS_BROKER_SOCK_PATH_MAX")

    # roundtable-sandbox.json(5) states the same ranges and sizes.
    with open(os.path.join(SRCDIR, "man", "roundtable-sandbox.json.5.in"), encoding="utf-8") as f:
        page = f.read()
    for line in (f"maxOutputTokens Pq integer, {value('RTS_MAX_OUTPUT_TOKENS_MIN')} to "
                 f"{value('RTS_MAX_OUTPUT_TOKENS_MAX')}",
                 f"turnTimeoutMs Pq integer, {value('RTS_TURN_TIMEOUT_MS_MIN')} to {value('RTS_TURN_TIMEOUT_MS_MAX')}",
                 f"memoryMb Pq integer, {value('RTS_MEMORY_MB_MIN')} to {value('RTS_MEMORY_MB_MAX')}",
                 f"cpus Pq number, {value('RTS_CPUS_MIN'):g} to {value('RTS_CPUS_MAX'):g}",
                 f"pids Pq integer, {value('RTS_PIDS_MIN')} to {value('RTS_PIDS_MAX')}",
                 f"timeoutMs Pq integer, {value('RTS_TOOL_TIMEOUT_MS_MIN')} to {value('RTS_TOOL_TIMEOUT_MS_MAX')}",
                 f"systemPrompt Pq string, at most {value('RTS_SYSTEM_PROMPT_MAX')} bytes JSON-escaped",
                 f"description Pq string, at most {value('RTS_DESCRIPTION_MAX')} bytes JSON-escaped",
                 f"{value('RTS_PARAMETERS_DEPTH_MAX')} levels deep",
                 f"budget of {value('RTS_PUBLIC_TOOLS_BUDGET')} bytes",
                 f"tools Pq array, at most {value('RTS_MAX_TOOLS')} objects",
                 f"mcp Pq array, at most {value('RTS_MAX_MCP_SERVERS')} objects",
                 f"initialChannels Pq array of strings, at most {value('RTS_INITIAL_CHANNELS_MAX')}",
                 f"timeoutMs Pq integer, {value('RTS_PRECHECK_TIMEOUT_MS_MIN')} to "
                 f"{value('RTS_PRECHECK_TIMEOUT_MS_MAX')}",
                 f"maxCalls Pq integer, 0 to {value('RTS_PRECHECK_MAX_CALLS_MAX')}",
                 f"is at least {value('RTS_PRECHECK_PIDS_MIN')}:",
                 f"is at least {value('RTS_PRECHECK_CPUS_MIN'):g} (",
                 f"({value('RTS_RICH_MEMORY_MB_MIN')} to {value('RTS_MEMORY_MB_MAX')}; default "
                 f"{value('RTS_RICH_MEMORY_MB_DEFAULT')}, swap equal)",
                 f"({value('RTS_RICH_CPUS_MIN'):g} to {value('RTS_CPUS_MAX'):g}; default "
                 f"{value('RTS_RICH_CPUS_DEFAULT'):g})",
                 f"({value('RTS_RICH_PIDS_MIN')} to {value('RTS_PIDS_MAX')}; default {value('RTS_RICH_PIDS_DEFAULT')})",
                 f"warmSparesMax Pq integer, {value('RTS_WARM_SPARES_CAP_MIN')} to {value('RTS_WARM_SPARES_CAP_MAX')}",
                 f"warmSpareIdleMs Pq integer, {value('RTS_WARM_SPARE_IDLE_MS_MIN')} to "
                 f"{value('RTS_WARM_SPARE_IDLE_MS_MAX')}"):
        assert line in page, line


# ---------------------------------------------------------------- the bottom of every range

def deep_schema(depth):
    """A parameters object nesting depth containers, itself included: arrays of arrays."""
    s = {"type": "integer"}
    for _ in range(depth - 1):
        s = {"type": "array", "items": s}
    return s


def wide_schema(size):
    """A parameters object that serialises to exactly size bytes."""
    base = json.dumps({"type": "object", "description": ""}, separators=(",", ":"))
    return {"type": "object", "description": "w" * (size - len(base))}


def test_bottom_of_every_range(make_suite):
    """maxOutputTokens 1, memoryMb 64, cpus 0.01, pids 8, a tool timeoutMs of 1 and an empty
    system prompt, with the sizes at their top where they cost no time (a description of
    2048 encoded bytes, parameters of 16 KiB and 32 levels): a real turn calls the tool
    and the guest gets the reply."""
    description = encoded_text(LIMITS["RTS_DESCRIPTION_MAX"] - 2 * 100, 100)
    wide = wide_schema(LIMITS["RTS_PARAMETERS_MAX"])
    deep = deep_schema(LIMITS["RTS_PARAMETERS_DEPTH_MAX"])
    tools = [
        {"name": "slow", "description": description, "parameters": {"type": "object"},
         "command": ["/bin/sleep", "30"], "timeoutMs": LIMITS["RTS_TOOL_TIMEOUT_MS_MIN"]},
        {"name": "wide", "description": "", "parameters": wide, "command": ["/bin/cat"]},
        {"name": "deep", "description": "", "parameters": deep, "command": ["/bin/cat"]},
    ]
    s = make_suite(config={
        "maxOutputTokens": LIMITS["RTS_MAX_OUTPUT_TOKENS_MIN"],
        "limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MIN"], "cpus": CPUS_MIN, "pids": LIMITS["RTS_PIDS_MIN"]},
        "systemPrompt": "",
        "tools": tools,
    })
    channel = "guild-1/limits-low"
    assert s.cli("on", channel).returncode == 0
    before = len(s.fake.requests())

    # Each model call waits 2 s, so the container outlives the start it waits for at 1%
    # of a CPU by long enough to be inspected.
    info, p = inspect_while_running(s, lambda: say(s, channel, "#sleep 2000 #tools 1 host_slow"), timeout=180)
    assert p.returncode == 0, p.stderr + s.logs()
    # The tool's 1 ms deadline stopped it (brokerd says so), and the model got that result.
    assert p.stdout.startswith("tool results: "), p.stdout
    assert "upstream_timeout" in p.stdout
    assert "tool slow stopped at its deadline" in s.log_tail("brokerd", limit=1 << 20)
    assert_container_limits(info, LIMITS["RTS_MEMORY_MB_MIN"], int(CPUS_MIN * 1e9), LIMITS["RTS_PIDS_MIN"])

    reqs = turn_requests(s, before)
    assert len(reqs) == 2  # the tool call, then the answer after its result
    for r in reqs:
        body = r["body"]
        assert body["max_tokens"] == LIMITS["RTS_MAX_OUTPUT_TOKENS_MIN"]
        # The empty prompt: the system message starts with what the worker adds.
        assert body["messages"][0]["content"].startswith("Time zone: ")
        offered = {t["function"]["name"]: t["function"] for t in body["tools"]}
        assert offered["host_slow"]["description"] == description  # whole: 2048 bytes encoded
        assert offered["host_wide"]["parameters"] == wide
        assert offered["host_deep"]["parameters"] == deep
    assert json_len(description) == LIMITS["RTS_DESCRIPTION_MAX"]


def test_warm_spare_bounds_at_their_bottom(make_suite):
    """warmSparesMax 1 and warmSpareIdleMs 1000: after a turn the channel's spare is started
    and, with no turn for 1 s, discarded (runnerd says why, its container goes); the next
    turn then starts cold. (The cap of 1 between two channels: test_spares.py.)"""
    s = make_suite(config={"warmSpares": 1, "warmSparesMax": LIMITS["RTS_WARM_SPARES_CAP_MIN"],
                           "warmSpareIdleMs": LIMITS["RTS_WARM_SPARE_IDLE_MS_MIN"]})
    channel = "guild-1/limits-spares-low"
    assert s.cli("on", channel).returncode == 0
    p = say(s, channel, "cold")
    assert p.returncode == 0, p.stderr + s.logs()
    h = spare_tests.chash(channel)
    idle = re.compile(r"spare [0-9a-f]+ of channel " + h[:12] + r" discarded: its channel was idle")
    wait_until(lambda: idle.search(s.log_tail("runnerd", limit=1 << 20)), 30, "the idle spare's discard")
    wait_until(lambda: spare_tests.spares(s, channel) == [], 30, "the idle spare's container to go")
    p = say(s, channel, "cold again")
    assert p.returncode == 0, p.stderr + s.logs()
    assert (spare_tests.cold_turns(s), spare_tests.warm_turns(s)) == (2, 0)


def test_warm_spare_bounds_at_their_top(make_suite):
    """warmSparesMax 256 and warmSpareIdleMs 86400000 load, and the channel's next turn
    claims its spare."""
    s = make_suite(config={"warmSpares": 1, "warmSparesMax": LIMITS["RTS_WARM_SPARES_CAP_MAX"],
                           "warmSpareIdleMs": LIMITS["RTS_WARM_SPARE_IDLE_MS_MAX"]})
    channel = "guild-1/limits-spares-high"
    assert s.cli("on", channel).returncode == 0
    p = say(s, channel, "cold")
    assert p.returncode == 0, p.stderr + s.logs()
    spare_tests.ready_spare(s, channel)
    p = say(s, channel, "warm")
    assert p.returncode == 0, p.stderr + s.logs()
    assert (spare_tests.cold_turns(s), spare_tests.warm_turns(s)) == (1, 1)


def test_turn_deadline_at_its_bottom(make_suite):
    """turnTimeoutMs 1000: a quick turn still gets its reply, and a turn whose model takes 3 s
    ends with turn_timeout instead: the one-second deadline is the one that holds."""
    s = make_suite(config={"turnTimeoutMs": LIMITS["RTS_TURN_TIMEOUT_MS_MIN"]})
    channel = "guild-1/limits-deadline"
    assert s.cli("on", channel).returncode == 0
    answers = s.control(message(channel, "quick"))
    assert answers[0]["route"] == "sandbox"
    assert answers[1].get("event") == "reply", answers
    answers = s.control(message(channel, "#sleep 3000 slow"))
    assert answers[1] == {"id": answers[0]["id"], "event": "error", "error": "turn_timeout"}, answers


# ---------------------------------------------------------------- the top of every range

LONG_NAME = "n" + "x" * (LIMITS["RTS_NAME_MAX"] - 1)          # a host tool and an MCP tool
LONG_SERVER = "s" + "y" * (LIMITS["RTS_NAME_MAX"] - 1)        # the last MCP server
LONG_CHANNEL = "c" * LIMITS["RTS_CHANNEL_MAX"]


class McpSuite(Suite):
    """A Suite with a fake MCP server too, whose config is built once the fakes run
    (config_fn(suite) -> overrides), so MCP URLs can point at the fake."""

    def __init__(self, env, config_fn):
        self.config_fn = config_fn
        self.mcp = None
        super().__init__(env)

    def _write_config(self):
        # Suite.start() has made the test CA by now.
        self._logfiles.append(open(self.log_path("fake-mcp"), "ab"))
        self.mcp = FakeMcp(self.dirs["ca"], os.path.join(self.dirs["logs"], "mcp.jsonl"), self._logfiles[-1])
        self.config_overrides = self.config_fn(self)
        super()._write_config()

    def mcp_requests(self):
        try:
            with open(os.path.join(self.dirs["logs"], "mcp.jsonl"), encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def stop(self, check_leftovers=True):
        if self.mcp:
            self.mcp.stop()
        super().stop(check_leftovers=check_leftovers)


def top_config(s):
    host = [{"name": f"h{i:02d}", "description": "", "parameters": {}, "command": ["/bin/cat"]}
            for i in range(LIMITS["RTS_MAX_TOOLS"] - 1)]
    # The longest name, and the longest tool deadline (brokerd's request deadline).
    host.append({"name": LONG_NAME, "description": "", "parameters": {}, "command": ["/bin/cat"],
                 "timeoutMs": LIMITS["RTS_BROKER_REQUEST_DEADLINE_MS"]})
    servers = []
    for i in range(LIMITS["RTS_MAX_MCP_SERVERS"]):
        tools = [{"name": f"t{j:02d}", "description": "", "parameters": {}} for j in range(LIMITS["RTS_MAX_MCP_TOOLS"])]
        last = i == LIMITS["RTS_MAX_MCP_SERVERS"] - 1
        if last:
            tools[-1]["name"] = LONG_NAME
        servers.append({"name": LONG_SERVER if last else f"m{i}", "url": s.mcp.url, "tools": tools})
    channels = [f"c{i:04d}" for i in range(LIMITS["RTS_INITIAL_CHANNELS_MAX"] - 1)] + [LONG_CHANNEL]
    return {
        "maxOutputTokens": LIMITS["RTS_MAX_OUTPUT_TOKENS_MAX"],
        "turnTimeoutMs": LIMITS["RTS_TURN_TIMEOUT_MS_MAX"],
        "limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MAX"], "cpus": CPUS_MAX, "pids": LIMITS["RTS_PIDS_MAX"]},
        "systemPrompt": encoded_text(LIMITS["RTS_SYSTEM_PROMPT_MAX"] - 2 * 500, 500),
        "tools": host,
        "mcp": servers,
        "initialChannels": channels,
    }


@pytest.fixture(scope="module")
def top_suite(rts_env):
    try:
        s = McpSuite(rts_env, top_config)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    yield s
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def test_top_of_every_range(top_suite):
    """maxOutputTokens 1048576, turnTimeoutMs 600000, memoryMb 65536, cpus 64, pids 32768,
    every list at its longest (32 host tools, 8 MCP servers of 32 tools, 4096 initial
    channels), the longest names, channel key and system prompt: a real turn in the
    512-byte channel (on from initialChannels) gets its reply."""
    s = top_suite
    before = len(s.fake.requests())
    info, p = inspect_while_running(s, lambda: say(s, LONG_CHANNEL, "#sleep 1500 hello"))
    assert p.returncode == 0, p.stderr + s.logs()
    assert p.stdout.startswith("echo: ")
    # Docker refuses --cpus above the host's CPUs: 64 runs with all of them.
    assert_container_limits(info, LIMITS["RTS_MEMORY_MB_MAX"], min(CPUS_MAX, host_cpus()) * 10**9,
                            LIMITS["RTS_PIDS_MAX"])
    if host_cpus() < CPUS_MAX:
        assert f"limits.cpus: 64 is more than the {host_cpus()} CPUs of this host" in s.log_tail("runnerd")

    reqs = turn_requests(s, before)
    assert len(reqs) == 1
    body = reqs[0]["body"]
    assert body["max_tokens"] == LIMITS["RTS_MAX_OUTPUT_TOKENS_MAX"]
    prompt = s.config["systemPrompt"]
    assert json_len(prompt) == LIMITS["RTS_SYSTEM_PROMPT_MAX"]
    system = body["messages"][0]["content"]
    assert system.startswith(prompt + "\n\n") and TRUNCATED not in system
    # Every tool is offered (none left out), within the worker's tool budget.
    names = [t["function"]["name"] for t in body["tools"]]
    n_public = LIMITS["RTS_MAX_TOOLS"] + LIMITS["RTS_MAX_MCP_SERVERS"] * LIMITS["RTS_MAX_MCP_TOOLS"]
    assert len(names) == 3 + n_public
    assert "host_" + LONG_NAME in names and "mcp_7_" + LONG_NAME in names and "mcp_0_t00" in names
    assert len(json.dumps(body["tools"], separators=(",", ":"), ensure_ascii=False)) <= 32 * 1024
    assert "left out" not in s.log_tail("runnerd", limit=1 << 20)


def test_longest_names_route_to_their_tools(top_suite):
    """host_<48 characters> runs that host tool; mcp_7_<48> reaches /mcp/<48-character server>
    and names the 48-character MCP tool upstream."""
    s = top_suite
    p = say(s, LONG_CHANNEL, "#tools 1 host_" + LONG_NAME)
    assert p.returncode == 0, p.stderr
    # /bin/cat echoes what brokerd gave the tool: its own name, from the route.
    assert p.stdout.startswith("tool results: ") and f'"tool":"{LONG_NAME}"' in p.stdout, p.stdout

    before = len(s.mcp_requests())
    p = say(s, LONG_CHANNEL, "#tools 1 mcp_7_" + LONG_NAME)
    assert p.returncode == 0, p.stderr
    got = s.mcp_requests()[before:]
    assert len(got) == 1
    assert got[0]["body"]["method"] == "tools/call"
    assert got[0]["body"]["params"]["name"] == LONG_NAME


# ---------------------------------------------------------------- the precheck runner's ranges

@pytest.fixture(scope="module")
def precheck_tag(rts_env):
    try:
        return build_precheck_image(rts_env)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def make_precheck(rts_env, precheck_tag):
    made = []

    def make(precheck):
        try:
            s = PrecheckSuite(rts_env, precheck_tag, precheck=precheck)
        except HarnessError as e:
            pytest.fail(f"the suite did not start: {e}", pytrace=False)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


# One call to the granted, approved docs/echo; a refused call is reported, not thrown.
CALL_ONCE = ("export default async ({ mcp }) => {\n"
             "  try { await mcp.call('docs', 'echo', { n: 1 }); return { wake: false, note: 'called' }; }\n"
             "  catch (e) { return { wake: false, note: 'refused: ' + e.message }; }\n"
             "};")


def test_precheck_bottom_of_every_range(make_precheck):
    """precheck.limits memoryMb 64, cpus 0.1, pids 16 (the measured bottoms, common/limits.h)
    and maxCalls 0: a real run answers within the default deadline, in a container with
    those limits, and its one call is refused by the budget without reaching the upstream."""
    low = {"memoryMb": LIMITS["RTS_MEMORY_MB_MIN"], "cpus": PRECHECK_CPUS_MIN,
           "pids": LIMITS["RTS_PRECHECK_PIDS_MIN"]}
    s = make_precheck({"maxCalls": 0, "limits": low})
    info, ev = inspect_while_running(s, lambda: s.precheck(CALL_ONCE, approved=["docs/echo"]))
    assert ev.get("event") == "precheck" and ev.get("wake") is False, (ev, s.log_tail("runnerd"))
    assert ev["note"].startswith("refused: this run may make at most 0 mcp calls"), ev
    assert s.mcp_requests() == []
    assert_container_limits(info, LIMITS["RTS_MEMORY_MB_MIN"], int(PRECHECK_CPUS_MIN * 1e9),
                            LIMITS["RTS_PRECHECK_PIDS_MIN"])


def test_precheck_deadline_at_its_bottom(make_precheck):
    """timeoutMs 1000: a quick run still answers, and a run that hangs is stopped with the
    one-second deadline's error."""
    s = make_precheck({"timeoutMs": LIMITS["RTS_PRECHECK_TIMEOUT_MS_MIN"]})
    ev = s.precheck("export default async () => ({ wake: false, note: 'quick' })")
    assert ev == {"id": ev["id"], "event": "precheck", "wake": False, "note": "quick"}, (ev, s.log_tail("runnerd"))
    ev = s.precheck("export default () => new Promise(() => { setInterval(() => {}, 1000); })")
    assert ev == {"id": ev["id"], "event": "precheck", "wake": True,
                  "error": "the precheck did not finish within 1000 ms and was stopped"}, ev


def test_precheck_top_of_every_range(make_precheck):
    """timeoutMs 600000, maxCalls 1000, memoryMb 65536, cpus 64, pids 32768: a real run
    answers after its call reached the upstream, in a container with those limits."""
    high = {"memoryMb": LIMITS["RTS_MEMORY_MB_MAX"], "cpus": CPUS_MAX, "pids": LIMITS["RTS_PIDS_MAX"]}
    s = make_precheck({"timeoutMs": LIMITS["RTS_PRECHECK_TIMEOUT_MS_MAX"],
                       "maxCalls": LIMITS["RTS_PRECHECK_MAX_CALLS_MAX"], "limits": high})
    script = CALL_ONCE.replace("export default async ({ mcp }) => {",
                               "export default async ({ mcp }) => {\n  await new Promise((r) => setTimeout(r, 1500));")
    info, ev = inspect_while_running(s, lambda: s.precheck(script, approved=["docs/echo"]))
    assert ev == {"id": ev["id"], "event": "precheck", "wake": False, "note": "called"}, (ev, s.log_tail("runnerd"))
    assert len(s.mcp_requests()) == 1
    assert_container_limits(info, LIMITS["RTS_MEMORY_MB_MAX"], min(CPUS_MAX, host_cpus()) * 10**9,
                            LIMITS["RTS_PIDS_MAX"])


# ---------------------------------------------------------------- refused at start

BASE = {"model": "m", "modelUrl": "https://localhost:9/v1/chat/completions"}


def start_refused(env, overrides, daemon="brokerd"):
    """Start daemon with BASE plus overrides as its config; it must exit at once with a
    failure. Returns (config path, the daemon's log)."""
    s = Suite(env, config=dict(BASE, **overrides), start=False, fake_model=False)
    try:
        s._make_dirs()
        s._write_config()
        s.start_daemon(daemon)
        p = s.procs[daemon]
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{daemon} did not refuse {overrides}") from None
        assert p.returncode != 0, f"{daemon} accepted {overrides}"
        return s.config_path, s.log_tail(daemon)
    finally:
        s.stop(check_leftovers=False)


def tool(name="a", **kw):
    return dict({"name": name, "description": "", "parameters": {}, "command": ["/bin/true"]}, **kw)


def mcp_server(name="s", tools=None):
    return {"name": name, "url": "https://localhost:9/mcp",
            "tools": tools or [{"name": "t", "description": "", "parameters": {}}]}


OUTSIDE = {
    "maxOutputTokens below": ({"maxOutputTokens": 0}, "maxOutputTokens"),
    "maxOutputTokens above": ({"maxOutputTokens": LIMITS["RTS_MAX_OUTPUT_TOKENS_MAX"] + 1}, "maxOutputTokens"),
    "turnTimeoutMs below": ({"turnTimeoutMs": LIMITS["RTS_TURN_TIMEOUT_MS_MIN"] - 1}, "turnTimeoutMs"),
    "turnTimeoutMs above": ({"turnTimeoutMs": LIMITS["RTS_TURN_TIMEOUT_MS_MAX"] + 1}, "turnTimeoutMs"),
    "warmSparesMax below": ({"warmSparesMax": LIMITS["RTS_WARM_SPARES_CAP_MIN"] - 1}, "warmSparesMax"),
    "warmSparesMax above": ({"warmSparesMax": LIMITS["RTS_WARM_SPARES_CAP_MAX"] + 1}, "warmSparesMax"),
    "warmSpareIdleMs below": ({"warmSpareIdleMs": LIMITS["RTS_WARM_SPARE_IDLE_MS_MIN"] - 1}, "warmSpareIdleMs"),
    "warmSpareIdleMs above": ({"warmSpareIdleMs": LIMITS["RTS_WARM_SPARE_IDLE_MS_MAX"] + 1}, "warmSpareIdleMs"),
    "memoryMb below": ({"limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MIN"] - 1}}, "limits.memoryMb"),
    "memoryMb above": ({"limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MAX"] + 1}}, "limits.memoryMb"),
    "cpus below": ({"limits": {"cpus": 0.0099}}, "limits.cpus"),
    "cpus above": ({"limits": {"cpus": 64.01}}, "limits.cpus"),
    "pids below": ({"limits": {"pids": LIMITS["RTS_PIDS_MIN"] - 1}}, "limits.pids"),
    "pids above": ({"limits": {"pids": LIMITS["RTS_PIDS_MAX"] + 1}}, "limits.pids"),
    "tool timeoutMs below": ({"tools": [tool(timeoutMs=0)]}, "tools[0].timeoutMs"),
    "tool timeoutMs above": ({"tools": [tool(timeoutMs=LIMITS["RTS_BROKER_REQUEST_DEADLINE_MS"] + 1)]},
                             "tools[0].timeoutMs"),
    "systemPrompt above": ({"systemPrompt": encoded_text(LIMITS["RTS_SYSTEM_PROMPT_MAX"] - 2 * 500 + 1, 500)},
                           "systemPrompt"),
    "description above": ({"tools": [tool(description=encoded_text(LIMITS["RTS_DESCRIPTION_MAX"] - 199, 100))]},
                          "tools[0].description"),
    "parameters too large": ({"tools": [tool(parameters=wide_schema(LIMITS["RTS_PARAMETERS_MAX"] + 1))]},
                             "tools[0].parameters"),
    "parameters too deep": ({"tools": [tool(parameters=deep_schema(LIMITS["RTS_PARAMETERS_DEPTH_MAX"] + 1))]},
                            "tools[0].parameters"),
    "tools too many": ({"tools": [tool(f"t{i}") for i in range(LIMITS["RTS_MAX_TOOLS"] + 1)]}, "tools"),
    "mcp too many": ({"mcp": [mcp_server(f"s{i}") for i in range(LIMITS["RTS_MAX_MCP_SERVERS"] + 1)]}, "mcp"),
    "mcp tools too many": ({"mcp": [mcp_server(tools=[{"name": f"t{i}", "description": "", "parameters": {}}
                                                      for i in range(LIMITS["RTS_MAX_MCP_TOOLS"] + 1)])]},
                           "mcp[0].tools"),
    "initialChannels too many": ({"initialChannels": [f"c{i}" for i in range(LIMITS["RTS_INITIAL_CHANNELS_MAX"] + 1)]},
                                 "initialChannels"),
    "channel key too long": ({"initialChannels": ["c" * (LIMITS["RTS_CHANNEL_MAX"] + 1)]}, "initialChannels[0]"),
    # brokerd's schema reference rule would refuse every /model body offering these
    # parameters, so the config is refused at start instead (common/schema.h).
    "tool parameters with a remote $schema": (
        {"tools": [tool(parameters={"$schema": "http://json-schema.org/draft-07/schema#"})]},
        "tools[0].parameters"),
    "mcp tool parameters with a remote $ref": (
        {"mcp": [mcp_server(tools=[{"name": "t", "description": "",
                                    "parameters": {"$ref": "https://evil.example/s.json"}}])]},
        "mcp[0].tools[0].parameters"),
}


# The precheck runner's own ranges (its "image" is required beside them).
PRECHECK_OUTSIDE = {
    "timeoutMs below": ({"timeoutMs": LIMITS["RTS_PRECHECK_TIMEOUT_MS_MIN"] - 1}, "timeoutMs"),
    "timeoutMs above": ({"timeoutMs": LIMITS["RTS_PRECHECK_TIMEOUT_MS_MAX"] + 1}, "timeoutMs"),
    "maxCalls below": ({"maxCalls": -1}, "maxCalls"),
    "maxCalls above": ({"maxCalls": LIMITS["RTS_PRECHECK_MAX_CALLS_MAX"] + 1}, "maxCalls"),
    "memoryMb below": ({"limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MIN"] - 1}}, "limits.memoryMb"),
    "memoryMb above": ({"limits": {"memoryMb": LIMITS["RTS_MEMORY_MB_MAX"] + 1}}, "limits.memoryMb"),
    "cpus below": ({"limits": {"cpus": PRECHECK_CPUS_MIN - 0.001}}, "limits.cpus"),
    "cpus at the turn's bottom": ({"limits": {"cpus": CPUS_MIN}}, "limits.cpus"),
    "cpus above": ({"limits": {"cpus": 64.01}}, "limits.cpus"),
    # node crashes below 11 (common/limits.h); the turn container's bottom of 8 is no
    # longer enough here.
    "pids below": ({"limits": {"pids": LIMITS["RTS_PRECHECK_PIDS_MIN"] - 1}}, "limits.pids"),
    "pids at the turn's bottom": ({"limits": {"pids": LIMITS["RTS_PIDS_MIN"]}}, "limits.pids"),
    "pids above": ({"limits": {"pids": LIMITS["RTS_PIDS_MAX"] + 1}}, "limits.pids"),
}
for _case, (_o, _key) in PRECHECK_OUTSIDE.items():
    OUTSIDE["precheck " + _case] = ({"precheck": dict({"image": "roundtable-sandbox:precheck"}, **_o)},
                                    "precheck." + _key)

# The rich channel container's: the Pi worker's own bottoms (common/limits.h; all three at
# once start and answer in test_rich_bottoms.py), below which it dies or does not start in
# time, whatever the sealed worker or the precheck may have.
RICH_OUTSIDE = {
    "memoryMb below": ({"memoryMb": LIMITS["RTS_RICH_MEMORY_MB_MIN"] - 1}, "limits.memoryMb"),
    "memoryMb at the turn's bottom": ({"memoryMb": LIMITS["RTS_MEMORY_MB_MIN"]}, "limits.memoryMb"),
    "memoryMb above": ({"memoryMb": LIMITS["RTS_MEMORY_MB_MAX"] + 1}, "limits.memoryMb"),
    "cpus below": ({"cpus": RICH_CPUS_MIN - 0.001}, "limits.cpus"),
    "cpus at the precheck's bottom": ({"cpus": PRECHECK_CPUS_MIN}, "limits.cpus"),
    "pids below": ({"pids": LIMITS["RTS_RICH_PIDS_MIN"] - 1}, "limits.pids"),
    "pids at the turn's bottom": ({"pids": LIMITS["RTS_PIDS_MIN"]}, "limits.pids"),
}
for _case, (_o, _key) in RICH_OUTSIDE.items():
    OUTSIDE["rich " + _case] = ({"rich": {"profiles": {"p": {"model": "m"}}, "limits": _o}}, "rich." + _key)


@pytest.mark.parametrize("case", sorted(OUTSIDE))
def test_one_step_outside_a_range_is_refused_at_start(host_env, case):
    overrides, key = OUTSIDE[case]
    path, log = start_refused(host_env, overrides)
    assert f"{path}: {key}: " in log, log


@pytest.mark.parametrize("daemon", ["statd", pytest.param("runnerd", marks=pytest.mark.docker), "brokerd"])
def test_every_daemon_refuses_the_worker_s_out_of_range_value(host_env, request, daemon):
    """The value that used to pass the config and fail every turn in the worker. (runnerd
    is started as in production, with the docker group: it asks for Docker.)"""
    env = request.getfixturevalue("rts_env") if daemon == "runnerd" else host_env
    path, log = start_refused(env, {"maxOutputTokens": LIMITS["RTS_MAX_OUTPUT_TOKENS_MAX"] + 1}, daemon)
    assert f"{path}: maxOutputTokens: must be an integer from 1 to 1048576" in log, log


# The schema reference rule's local references (common/schema.h), refused at start naming
# the rule: a pointer into data, a reference member in data. The same tools with the pointer
# at a schema and the data harmless are in test_schema_refs (brokerd forwards them).
REFERENCE_RULE = {
    "pointer into data": ({"properties": {"a": {"$ref": "#/properties/b/default"},
                                          "b": {"default": {"type": "string"}}}},
                          "schema reference does not point at a schema"),
    "reference in data": ({"properties": {"a": {"enum": [{"$ref": "#"}]}}},
                          "schema data holds a reference or anchor"),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_RULE))
def test_tool_parameters_reference_rule_at_start(host_env, case):
    params, why = REFERENCE_RULE[case]
    path, log = start_refused(host_env, {"tools": [tool(parameters=params)]})
    assert f"{path}: tools[0].parameters: {why}" in log, log


BAD_NAMES = {
    "uppercase": "Clock",
    "leading digit": "1clock",
    "leading underscore": "_clock",
    "49 characters": "c" * (LIMITS["RTS_NAME_MAX"] + 1),
    "empty": "",
    "non-ASCII": "cl\u00f6ck",
    "hyphen": "clock-2",
}
NAME_PLACES = {
    "tool": (lambda n: {"tools": [tool(n)]}, "tools[0].name"),
    "mcp server": (lambda n: {"mcp": [mcp_server(n)]}, "mcp[0].name"),
    "mcp tool": (lambda n: {"mcp": [mcp_server(tools=[{"name": n, "description": "", "parameters": {}}])]},
                 "mcp[0].tools[0].name"),
}


@pytest.mark.parametrize("place", sorted(NAME_PLACES))
def test_bad_names_are_refused_at_start(host_env, place):
    """Seed: names match [a-z][a-z0-9_]{0,47}. Each bad name stops brokerd naming its key."""
    make, key = NAME_PLACES[place]
    for what, name in BAD_NAMES.items():
        path, log = start_refused(host_env, make(name))
        assert f"{path}: {key}: must " in log, (what, log)


def test_tool_list_over_the_budget_is_refused_at_start_naming_the_tool(host_env):
    """Tools whose descriptions do not all fit the worker's tool budget stop the start, and
    the message names the first tool that does not fit (the worker used to leave it out
    at every turn without a word to the operator)."""
    big = encoded_text(LIMITS["RTS_DESCRIPTION_MAX"], 0)
    tools = [tool(f"t{i}", description=big) for i in range(LIMITS["RTS_MAX_TOOLS"])]
    path, log = start_refused(host_env, {"tools": tools})
    assert f"{path}: tools[14]: tool \"t14\" does not fit" in log, log
    # An MCP tool is named by its server and place.
    servers = [mcp_server("docs", [{"name": f"t{i}", "description": big, "parameters": {}} for i in range(15)])]
    path, log = start_refused(host_env, {"mcp": servers})
    assert f"{path}: mcp[0].tools[14]: tool \"t14\" does not fit" in log, log


# ---------------------------------------------------------------- names at the broker

class NamesRig(BrokerRig):
    """BrokerRig plus a host tool, an MCP server and an MCP tool with 48-character names."""

    def _write_config(self):
        o = self.config_overrides
        tool_cmd = ["/usr/bin/python3", self.tool, self.dirs["toolout"]]
        o["tools"] = o["tools"] + [{"name": LONG_NAME, "description": "48", "parameters": {"type": "object"},
                                    "command": tool_cmd}]
        o["mcp"] = o["mcp"] + [{"name": LONG_SERVER, "url": self.mcp.url,
                                "tools": [{"name": LONG_NAME, "description": "48", "parameters": {}}]}]
        super()._write_config()


@pytest.fixture(scope="module")
def names_rig(host_env):
    try:
        rig = NamesRig(host_env, extra_env={"RTS_LOG_LEVEL": "debug"})
    except HarnessError as e:
        pytest.fail(f"brokerd did not start: {e}", pytrace=False)
    yield rig
    rig.stop()


def mcp_call(name):
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}


# Each bad name next to the configured name it imitates: host tools and MCP tools "echo" and
# LONG_NAME, MCP servers "docs" and LONG_SERVER (broker_rig's defaults plus NamesRig's).
GUEST_NAMES = {
    "uppercase": ("Echo", "echo"),
    "leading digit": ("1echo", "echo"),
    "leading underscore": ("_echo", "echo"),
    "49 characters": (LONG_NAME + "x", LONG_NAME),
    "empty": ("", "echo"),
    "non-ASCII": ("ech\u00f6", "echo"),
    "hyphen": ("ec-ho", "echo"),
}
GUEST_SERVERS = {
    "uppercase": ("Docs", "docs"),
    "leading digit": ("1docs", "docs"),
    "leading underscore": ("_docs", "docs"),
    "49 characters": (LONG_SERVER + "x", LONG_SERVER),
    "empty": ("", "docs"),
    "non-ASCII": ("d\u00f6cs", "docs"),
    "hyphen": ("do-cs", "docs"),
}


def quote(name):
    """name as a request target segment: non-ASCII percent-encoded (raw bytes would be
    refused by the HTTP head grammar, another rule)."""
    return "".join(c if c.isascii() else "".join(f"%{b:02X}" for b in c.encode()) for c in name)


def forwarded_only(rig, count, send_good):
    """After a refused request, prove nothing was forwarded: send_good() is the same request
    with the configured name; once its answer is back, exactly one new upstream record (its
    own) may exist. brokerd answers a call only after forwarding it, one call at a time."""
    before = count()
    a = send_good()
    assert a.status == 200, (a.status, a.body[:200])
    assert count() == before + 1


@pytest.mark.parametrize("case", sorted(GUEST_NAMES))
def test_broker_refuses_bad_tool_names_and_forwards_nothing(names_rig, case):
    rig = names_rig
    bad, good = GUEST_NAMES[case]
    good_target = "/tools/" + ("echo" if good == "echo" else LONG_NAME)
    with rig.turn() as t:
        before = len(rig.tool_calls())
        a = t.post("/tools/" + quote(bad), {})
        assert a.status == 404 and a.error == "not_found", (a.status, a.body)
        assert len(rig.tool_calls()) == before
        forwarded_only(rig, lambda: len(rig.tool_calls()), lambda: t.post(good_target, {}))


@pytest.mark.parametrize("case", sorted(GUEST_SERVERS))
def test_broker_refuses_bad_mcp_server_names_and_forwards_nothing(names_rig, case):
    rig = names_rig
    bad, good = GUEST_SERVERS[case]
    tool_name = "echo" if good == "docs" else LONG_NAME
    with rig.turn() as t:
        before = len(rig.mcp_requests())
        a = t.post("/mcp/" + quote(bad), mcp_call(tool_name))
        assert a.status == 404 and a.error == "not_found", (a.status, a.body)
        assert len(rig.mcp_requests()) == before
        forwarded_only(rig, lambda: len(rig.mcp_requests()), lambda: t.post("/mcp/" + good, mcp_call(tool_name)))


@pytest.mark.parametrize("case", sorted(GUEST_NAMES))
def test_broker_refuses_bad_mcp_tool_names_and_forwards_nothing(names_rig, case):
    rig = names_rig
    bad, good = GUEST_NAMES[case]
    server = "docs" if good == "echo" else LONG_SERVER
    with rig.turn() as t:
        before = len(rig.mcp_requests())
        a = t.post("/mcp/" + server, mcp_call(bad))
        assert a.status == 403 and a.error == "forbidden", (a.status, a.body)
        assert len(rig.mcp_requests()) == before
        forwarded_only(rig, lambda: len(rig.mcp_requests()), lambda: t.post("/mcp/" + server, mcp_call(good)))


# ---------------------------------------------------------------- the current user context

def user_body(request):
    """The guest's text as the worker put it in the current user message: after the
    "Message from ..." header line."""
    content = [m for m in request["body"]["messages"] if m["role"] == "user"][-1]["content"]
    return content.split("\n", 1)[1]


def test_current_user_context_is_cut_at_48_kib(make_suite):
    """Seed: "current user context at 48 KiB". A longer message reaches the model cut to
    48 KiB as the worker sends it (JSON-escaped: a quote takes two bytes), with the mark;
    a message of exactly 48 KiB arrives whole."""
    s = make_suite()
    channel = "guild-1/limits-context"
    assert s.cli("on", channel).returncode == 0
    for unit in ("x", '"'):
        unit_len = json_len(unit)
        fits = unit * (USER_CONTEXT_MAX // unit_len)
        before = len(s.fake.requests())
        answers = s.control(message(channel, fits))
        assert answers[1].get("event") == "reply", answers
        body = user_body(turn_requests(s, before)[0])
        assert body == fits and json_len(body) == USER_CONTEXT_MAX

        longer = unit * (60 * 1024 // unit_len)
        before = len(s.fake.requests())
        answers = s.control(message(channel, longer))
        assert answers[1].get("event") == "reply", answers
        body = user_body(turn_requests(s, before)[0])
        assert body.endswith(TRUNCATED)
        assert longer.startswith(body[:-len(TRUNCATED)])
        # The size the worker sent: at most 48 KiB encoded, and less than one unit short.
        assert USER_CONTEXT_MAX - unit_len < json_len(body) <= USER_CONTEXT_MAX, (unit, json_len(body))
