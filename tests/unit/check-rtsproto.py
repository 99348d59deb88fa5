#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/integration/rtsproto.py against common/proto.h.

The integration tests speak the daemon links through rtsproto.py, a hand-written copy of
the protocol table. It is compared here, at make check, rather than generated at build
time: the harness is imported from the source tree by tests that need no build directory on
their import path, it reads better as Python than as a generated file, and a comparison also
catches a copy edited without the table. The C side is read through tests/unit/proto-dump,
compiled from proto.h itself, so nothing parses C by hand.

Run from the build directory (make check does), or set RTS_PROTO_DUMP.
"""
import json
import os
import subprocess
import sys

SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = os.environ.get("RTS_PROTO_DUMP", os.path.join(os.getcwd(), "tests", "unit", "proto-dump"))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration"))

import rtsproto  # noqa: E402


def main():
    table = json.loads(subprocess.run([DUMP], check=True, capture_output=True, text=True).stdout)
    problems = []
    messages = table.pop("MESSAGES")
    for name, want in table.items():
        got = getattr(rtsproto, name, None)
        if got != want:
            problems.append(f"{name}: proto.h has {want!r}, rtsproto.py {got!r}")
    py = {k: [v[0], v[1], v[2], v[3], [list(f) for f in v[4]]] for k, v in rtsproto.MESSAGES.items()}
    for name in sorted(set(messages) | set(py)):
        if messages.get(name) != py.get(name):
            problems.append(f"{name}: proto.h has {messages.get(name)}, rtsproto.py {py.get(name)}")
        elif getattr(rtsproto, name, None) != messages[name][0]:
            problems.append(f"{name}: rtsproto.{name} is {getattr(rtsproto, name, None)}, not {messages[name][0]}")
    if sorted(rtsproto.PRECHECK_ANSWER_NAMES) != sorted(v for k, v in table.items() if k.startswith("PRECHECK_")):
        problems.append("PRECHECK_ANSWER_NAMES does not name exactly the precheck answers")
    if sorted(rtsproto.STATUS_NAMES) != sorted(v for k, v in table.items() if k.startswith("TURN_")):
        problems.append("STATUS_NAMES does not name exactly the turn statuses")
    for p in problems:
        print("rtsproto.py differs from common/proto.h: " + p, file=sys.stderr)
    if problems:
        print("Update tests/integration/rtsproto.py (and bump RTS_PROTO_VERSION if the wire changed).",
              file=sys.stderr)
        return 1
    print(f"rtsproto.py matches common/proto.h: {len(messages)} messages, protocol version "
          f"{table['PROTO_VERSION']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
