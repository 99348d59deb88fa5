# SPDX-License-Identifier: Apache-2.0
"""The control operations besides message (mode, status, fresh, channels, cancel) against
their tables (statd/request.c, common/jspec.h): each bad member is refused with
invalid_request and a detail that names the member and the rule, nothing happens, the
same request without the bad part succeeds, and no detail repeats the request. Also the
line bound that the line_too_long detail states. Real statd over its real socket."""
import json
import os
import socket

LINE_MAX = 96 * 1024 * 1024  # RTS_CONTROL_RICH_LINE_MAX (common/limits.h): a rich message's images


def exchange(suite, line, timeout=30):
    """Send one raw line on a fresh connection; return the first answer as an object."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(os.path.join(suite.dirs["rt"], "control.sock"))
        s.sendall(line + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, "statd closed the connection without answering"
            buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])


def send(suite, obj):
    return exchange(suite, json.dumps(obj).encode())


def state_text(suite):
    with open(suite.state_file, encoding="utf-8") as f:
        return f.read()


DELETE = object()

# (the valid request, the member, its bad value or DELETE, a phrase the detail must hold)
CASES = [
    ({"op": "mode", "id": "r1", "channel": "guild-7/ops", "mode": "on"}, "mode", "maybe",
     'mode must be "on" or "off"'),
    ({"op": "mode", "id": "r1", "channel": "guild-7/ops", "mode": "on"}, "mode", DELETE, "mode is required"),
    ({"op": "mode", "id": "r1", "channel": "guild-7/ops", "mode": "on"}, "channel", "", "channel must be a string of 1 to 512 bytes"),
    ({"op": "mode", "id": "r1", "channel": "guild-7/ops", "mode": "on"}, "channel", "c" * 513,
     "channel must be a string of 1 to 512 bytes"),
    ({"op": "mode", "id": "r1", "channel": "guild-7/ops", "mode": "on"}, "SECRETMEMBER", True,
     "unknown field for this op"),
    ({"op": "status", "id": 7, "channel": "guild-7/ops"}, "channel", 7, "channel must be a string of 1 to 512 bytes"),
    ({"op": "fresh", "id": "r3", "channel": "guild-7/ops"}, "channel", DELETE, "channel is required"),
    ({"op": "cancel", "id": "r4", "channel": "guild-7/ops"}, "channel", ["guild-7/ops"],
     "channel must be a string of 1 to 512 bytes"),
    ({"op": "channels", "id": "r5"}, "channel", "guild-7/ops", "unknown field for this op"),
]


def test_each_bad_member_of_an_operation_is_refused_and_changes_nothing(suite):
    assert suite.cli("off", "guild-7/ops").returncode == 0
    for good, member, value, phrase in CASES:
        bad = dict(good)
        if value is DELETE:
            del bad[member]
        else:
            bad[member] = value
        before = state_text(suite)
        a = send(suite, bad)
        detail = a.pop("detail", "")
        assert a == {"id": good["id"], "error": "invalid_request"}, (bad, a)
        assert phrase in detail, (bad, detail)
        assert "SECRET" not in detail and "maybe" not in detail, detail
        assert state_text(suite) == before, bad
        # The same request without the bad part is served: that member's rule refused it.
        ok = send(suite, good)
        assert ok.get("ok") is True and ok["id"] == good["id"], (good, ok)
    # The mode requests that were refused switched nothing; the good ones switched it on.
    assert json.loads(state_text(suite))["channels"]["guild-7/ops"] == {"mode": "on"}


def test_an_invalid_id_is_not_echoed(suite):
    for bad_id, phrase in ((DELETE, "id is required"), (2 ** 53, "id must be"), ("i" * 257, "id must be"),
                           (1.5, "id must be")):
        req = {"op": "status"}
        if bad_id is not DELETE:
            req["id"] = bad_id
        a = send(suite, req)
        detail = a.pop("detail", "")
        assert a == {"error": "invalid_request"}, a
        assert detail.startswith(phrase), detail
    assert send(suite, {"op": "status", "id": 2 ** 53 - 1})["ok"] is True


def test_line_bound_is_the_one_the_detail_states(suite):
    """A line of RTS_CONTROL_RICH_LINE_MAX bytes is read; one byte more is line_too_long,
    and the detail says that number."""
    base = json.dumps({"op": "channels", "id": "L", "pad": ""}).encode()
    at_bound = base.replace(b'"pad": ""', b'"pad": "' + b"p" * (LINE_MAX - len(base)) + b'"')
    assert len(at_bound) == LINE_MAX
    a = exchange(suite, at_bound)
    # Read and judged by its fields (pad is unknown), not by its length.
    assert a["error"] == "invalid_request" and a["detail"] == "unknown field for this op", a
    over = at_bound.replace(b'"pad": "', b'"pad": "p')
    assert len(over) == LINE_MAX + 1
    a = exchange(suite, over)
    assert a == {"route": "drop", "error": "line_too_long", "detail": f"a request line is at most {LINE_MAX} bytes"}, a
