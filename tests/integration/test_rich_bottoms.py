# SPDX-License-Identifier: Apache-2.0
"""A rich channel at every bottom of rich.limits at once (common/limits.h RTS_RICH_*_MIN:
the Pi worker's own, measured with tests/bench/rich_bottoms.py) is a setting, not a fault:
the real Pi worker in the real image (pi_rig.pi_image) starts within the default
rich.startTimeoutMs and answers turns through the real daemons and the scripted Anthropic
endpoint (rich_host_rig.RichHostSuite), and its container gets exactly those limits.
One step below each bottom is refused at start: test_limits.py (RICH_OUTSIDE)."""
import pytest

from harness import HarnessError, limits_value
from pi_rig import pi_image
from rich_host_rig import RichHostSuite

MIB = 1024 * 1024


def test_a_rich_channel_at_all_its_bottoms_answers(rts_env):
    memory_mb = limits_value("RTS_RICH_MEMORY_MB_MIN")
    cpus = limits_value("RTS_RICH_CPUS_MIN")
    pids = limits_value("RTS_RICH_PIDS_MIN")
    image = pi_image(rts_env)
    # The default start deadline: a bottom at which the worker needs longer is no setting.
    rich = {"limits": {"memoryMb": memory_mb, "cpus": cpus, "pids": pids},
            "startTimeoutMs": limits_value("RTS_RICH_START_TIMEOUT_MS_DEFAULT")}
    try:
        s = RichHostSuite(rts_env, image=image.tag, rich=rich)
    except HarnessError as e:
        pytest.fail(f"the suite did not start: {e}", pytrace=False)
    try:
        p = s.rich("low")
        assert p.returncode == 0, p.stderr
        p, _ = s.say("low", "are you there at the bottom?")
        assert p.returncode == 0, p.stderr + s.logs()
        assert p.stdout.rstrip("\n") == "echo: [Alice]: are you there at the bottom?"
        first = s.container("low")
        assert first is not None, s.logs()
        hc = first["HostConfig"]
        assert hc["Memory"] == memory_mb * MIB and hc["MemorySwap"] == hc["Memory"], hc
        assert hc["NanoCpus"] == round(cpus * 1e9), hc
        assert hc["PidsLimit"] == pids, hc
        # The worker outlived its turn (at 96 MiB it is OOM-killed right after answering):
        # a second turn, with the first in its history, runs in the same container.
        p, _ = s.say("low", "and after that?")
        assert p.returncode == 0, p.stderr + s.logs()
        assert p.stdout.rstrip("\n") == "echo: [Alice]: and after that?"
        after = s.container("low")
        assert after is not None and after["Id"] == first["Id"], s.logs()
        assert after["State"]["Running"] and not after["State"]["OOMKilled"], after["State"]
        assert s.log_tail("runnerd", 10 ** 6).count(": starting container ") == 1, s.logs()
        reqs = [r for r in s.anthropic.requests() if r["path"].startswith("/v1/messages")]
        assert len(reqs) == 2 and all(r["bearer"] == s.oauth_token for r in reqs)
        assert "are you there at the bottom?" in str(reqs[1]["body"]["messages"])
    finally:
        s.stop()
