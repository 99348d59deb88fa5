# SPDX-License-Identifier: Apache-2.0
"""A precheck's timeZone and today through the real daemons and the precheck image
(DESIGN.md 8.3, statd/time_zone.h):

- statd accepts exactly the IANA database's zone and link names that this host has files
  for (tzdata.zi, minus Factory), which the harness's Intl all knows (checked against the
  image's own runtime); zoneinfo entries that are no zone (posixrules, localtime, posix/,
  right/, leapseconds, Factory) and names only ICU knows are refused with
  unknown_time_zone and nothing runs;
- today must be firedAt's date in timeZone, to the day, refused with invalid_request and
  a detail naming the date otherwise.
"""
import json
import os
import subprocess

import pytest

from harness import QUIET_FORWARD_S, HarnessError, assert_quiet
from precheck_suite import PrecheckSuite, build_precheck_image

ZONEINFO = "/usr/share/zoneinfo"
SCRIPT = ("export default async ({ timeZone, today }) => ({ wake: true, context: JSON.stringify({ timeZone, today,\n"
          "  tz: process.env.TZ }) })")


@pytest.fixture(scope="module")
def tag(rts_env):
    try:
        return build_precheck_image(rts_env)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def pc(rts_env, tag):
    try:
        s = PrecheckSuite(rts_env, tag)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    yield s
    try:
        s.stop()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)


def iana_names():
    """The Zone and Link names of the host's tzdata.zi."""
    names = []
    with open(os.path.join(ZONEINFO, "tzdata.zi"), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "Z":
                names.append(parts[1])
            elif parts and parts[0] == "L":
                names.append(parts[2])
    return names


def ran(pc, ev, zone, today):
    """ev is the event of a run that reached the harness and answered."""
    assert ev.get("event") == "precheck" and ev.get("wake") is True and "context" in ev, ev
    assert json.loads(ev["context"]) == {"timeZone": zone, "today": today, "tz": zone}


def refused(pc, ev, code, detail=None):
    """ev is the answer that refused a request; no container ran for it."""
    assert "event" not in ev and ev.get("error") == code, ev
    if detail is not None:
        assert ev.get("detail") == detail, ev
    assert_quiet(pc.containers, QUIET_FORWARD_S, "containers after a refused precheck", step=0.1)


def test_every_name_statd_accepts_is_one_the_harness_knows(rts_env, tag):
    """The image's own runtime accepts every tzdata.zi name but Factory, which statd refuses
    for that reason (statd_time_zone_listed)."""
    names = iana_names()
    assert len(names) > 400 and "Europe/Berlin" in names and "Factory" in names
    js = ("const names = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];\n"
          "for (const z of names) { try { new Intl.DateTimeFormat('en-US', { timeZone: z }); }"
          " catch { bad.push(z); } }\n"
          "process.stdout.write(JSON.stringify(bad));")
    p = subprocess.run(["docker", "run", "-i", "--rm", "--network", "none", "--entrypoint", "/usr/bin/node", tag,
                        "-e", js], input=json.dumps(names), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["Factory"]


# zoneinfo entries with a file that are no zone the harness knows, and names ICU knows that
# this host's database does not list.
NOT_ZONES = ["posixrules", "localtime", "Factory", "right/UTC", "posix/Europe/Berlin", "leapseconds",
             "SystemV/EST5", "europe/berlin", "Mars/Olympus_Mons"]


@pytest.mark.parametrize("zone", NOT_ZONES)
def test_a_name_that_is_no_iana_zone_is_refused(pc, zone):
    if zone in ("posixrules", "localtime", "right/UTC", "posix/Europe/Berlin", "leapseconds"):
        # What made the old check (a file exists) accept it.
        assert os.path.isfile(os.path.join(ZONEINFO, zone)), zone
    ev = pc.precheck(SCRIPT, time_zone=zone)
    refused(pc, ev, "unknown_time_zone", "timeZone names no time zone this host knows")


@pytest.mark.parametrize("zone", ["Europe/Berlin", "US/Eastern", "EST5EDT", "Etc/GMT+5", "UTC", "Asia/Calcutta"])
def test_zones_and_links_run(pc, zone):
    """Canonical zones, old links and Etc/ zones: the same request as above reaches the
    harness (so it was the name that was refused there)."""
    ev = pc.precheck(SCRIPT, time_zone=zone, fired_at="2026-03-01T12:00:00Z", today="2026-03-01")
    ran(pc, ev, zone, "2026-03-01")


TODAY_CASES = {
    # Noon UTC is already the next day at Kiritimati (+14:00).
    "Kiritimati": ("Pacific/Kiritimati", "2026-03-01T12:00:00Z", "2026-03-02", ["2026-02-28", "2026-03-01"]),
    # And still the day before at Honolulu (-10:00).
    "Honolulu": ("Pacific/Honolulu", "2026-03-01T05:00:00Z", "2026-02-28", ["2026-03-01", "2026-03-02"]),
    # The night the clocks change at Berlin (+02:00 from 01:00 UTC).
    "Berlin DST": ("Europe/Berlin", "2026-03-29T22:30:00Z", "2026-03-30", ["2026-03-29"]),
}


@pytest.mark.parametrize("case", sorted(TODAY_CASES))
def test_today_must_be_the_local_date_of_fired_at(pc, case):
    zone, fired_at, local, wrong = TODAY_CASES[case]
    for today in wrong:
        ev = pc.precheck(SCRIPT, time_zone=zone, fired_at=fired_at, today=today)
        refused(pc, ev, "invalid_request", f"today must be firedAt's date in timeZone, {local}")
    ev = pc.precheck(SCRIPT, time_zone=zone, fired_at=fired_at, today=local)
    ran(pc, ev, zone, local)
