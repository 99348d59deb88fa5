#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Pi worker's bottoms: at which rich.limits a rich channel's real worker still reaches
readiness and answers a turn (the measurements behind RTS_RICH_*_MIN in common/limits.h).

    sudo RTS_BUILDDIR=build-default tests/bench/rich_bottoms.py [--image TAG] [-n RUNS]
         [--memory MB,...] [--cpus N,...] [--pids N,...] [--together MB/CPUS/PIDS]...
         [--load K] [--cold] [--turns N] [--images N] [--start-timeout-ms MS]
         [--turn-timeout-ms MS] [--json]

Each trial is a whole installation (tests/integration/rich_host_rig.RichHostSuite: statd,
runnerd, brokerd, the scripted Anthropic endpoint behind brokerd's OAuth broker) whose rich
config has one limit changed (--memory, --cpus, --pids: the other two at their defaults)
or all three (--together), a rich channel bound to it and `say` through the CLI. A trial
answers when the CLI prints the fake model's echo of each of its --turns turns (the later
ones some 16 KiB each, so that the session grows; --images N PNG images of 16 MiB go with
the first). Reported per trial:
  ready    seconds from the container's creation (docker inspect .Created: runnerd's
           `docker run`) to the worker's "ready" log record (its POST /worker/ready taken)
  turn     seconds of the first `say`, from before `rich` binds the channel
  oom      whether Docker saw the container OOM-killed; starts: runnerd's "starting
           container" lines
  peak     the most the container's memory cgroup held (v1: max_usage_in_bytes), the most
           of it anonymous (rss) and page cache, and the most processes (pids.current),
           polled every 50 ms; oom kills and exits (status, OOM-killed) of its containers
startTimeoutMs is the default (90 s) unless --start-timeout-ms; turnTimeoutMs 120 s unless
--turn-timeout-ms. --load K runs K busy loops (children of this process) during the trials.
--cold builds each run an image of its own (a new layer, whose files' page cache is then
dropped file by file): the worker reads, and is charged for, every page it touches, as on a
host's first start; otherwise the image (built once under a tag of this run's own with the
integration tests' content, tests/integration/pi_rig.py, or --image) shares its cached pages
with every container of it, charged to whichever read them first.

Values below the config's bottoms are refused by the loader and by runnerd: trying them takes
a build with those checks lowered. Needs cgroup v1 for the peaks (they read 0 otherwise).
Nothing is asserted: the numbers depend on the machine.
"""
import argparse
import datetime
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Environment, HarnessError, docker, docker_inspect, remove_tag, unique_tag  # noqa: E402
from pi_rig import PI_DIR, pi_image, write_test_content  # noqa: E402
from rich_host_rig import RichHostSuite  # noqa: E402

DEFAULTS = {"memoryMb": 1536, "cpus": 1.0, "pids": 256}
TEXT = "hello from the bottom"
EXPECTED = f"echo: [Alice]: {TEXT}"
PNG_HEAD = bytes.fromhex("89504e470d0a1a0a")  # all the worker checks of a PNG (lib/images.mjs)


def docker_time(s):
    """Docker's RFC 3339 time with nanoseconds as a UTC datetime (microseconds)."""
    s = s.rstrip("Z")
    head, _, frac = s.partition(".")
    return datetime.datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}").replace(tzinfo=datetime.timezone.utc)


def read_int(path):
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Watch:
    """Polls the channel's container (docker inspect, then its cgroup v1 files) until
    stopped: the peak memory and process counts seen, the OOM kills and exits."""

    def __init__(self, name):
        self.name = name
        self.ids = []
        self.peak_mem = 0
        self.peak_pids = 0
        self.peak_rss = 0
        self.peak_cache = 0
        self.oom_kills = 0
        self.exits = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        cid = None
        while not self.stopping:
            if cid is None:
                c = docker_inspect(self.name)
                if c and c["State"]["Running"] and c["Id"] not in self.ids:
                    cid = c["Id"]
                    self.ids.append(cid)
                else:
                    time.sleep(0.2)
                    continue
            mem = read_int(f"/sys/fs/cgroup/memory/docker/{cid}/memory.max_usage_in_bytes")
            if mem is None:  # gone: how did it end?
                c = docker_inspect(self.name)
                if c and c["Id"] == cid:
                    self.exits.append((c["State"]["ExitCode"], c["State"]["OOMKilled"]))
                cid = None
                continue
            self.peak_mem = max(self.peak_mem, mem)
            self.peak_pids = max(self.peak_pids, read_int(f"/sys/fs/cgroup/pids/docker/{cid}/pids.current") or 0)
            try:
                with open(f"/sys/fs/cgroup/memory/docker/{cid}/memory.stat", encoding="ascii") as f:
                    st = dict(line.split() for line in f)
                self.peak_rss = max(self.peak_rss, int(st.get("rss", 0)))
                self.peak_cache = max(self.peak_cache, int(st.get("cache", 0)))
            except (OSError, ValueError):
                pass
            try:
                with open(f"/sys/fs/cgroup/memory/docker/{cid}/memory.oom_control", encoding="ascii") as f:
                    for line in f:
                        if line.startswith("oom_kill "):
                            self.oom_kills = max(self.oom_kills, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        self.stopping = True
        self.thread.join(5)


def trial(env, image, limits, start_timeout_ms, turn_timeout_ms, turns=1, images=()):
    out = {"limits": limits, "ok": False, "ready": None, "turn": None, "oom": None, "starts": 0, "why": ""}
    s = RichHostSuite(env, image=image, rich={"limits": limits, "startTimeoutMs": start_timeout_ms,
                                              "turnTimeoutMs": turn_timeout_ms})
    watch = Watch(s.container_name("chan"))
    try:
        t0 = time.monotonic()
        p = s.rich("chan")
        if p.returncode != 0:
            out["why"] = f"rich: {p.stderr.strip()[-300:]}"
            return out
        p, _ = s.say("chan", TEXT, images=images, timeout=(start_timeout_ms + turn_timeout_ms) / 1000 + 120)
        out["turn"] = round(time.monotonic() - t0, 2)
        out["ok"] = p.returncode == 0 and p.stdout.strip() == EXPECTED
        out["images"] = len(images)
        if not out["ok"]:
            out["why"] = f"say {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}"
        for i in range(1, turns if out["ok"] else 0):
            # Later turns: the session's history grows by some 16 KiB a turn.
            text = f"turn {i}:" + " lorem ipsum dolor sit amet" * 600
            p, _ = s.say("chan", text, timeout=turn_timeout_ms / 1000 + 120)
            if p.returncode != 0 or p.stdout.strip() != f"echo: [Alice]: {text}":
                out["ok"] = False
                out["why"] = f"turn {i + 1}: say {p.returncode}: {p.stderr.strip()[-300:]}"
                break
        out["turns"] = turns
        c = s.container("chan")
        if c:
            out["oom"] = c["State"].get("OOMKilled")
            created = docker_time(c["Created"])
            ready = [r for r in s.worker_log("chan") if r.get("msg") == "ready"]
            if ready:
                t = datetime.datetime.fromisoformat(ready[0]["time"].replace("Z", "+00:00"))
                out["ready"] = round((t - created).total_seconds(), 2)
        log = s.log_tail("runnerd", 10 ** 7)
        out["starts"] = log.count(": starting container ")
        if "did not announce itself within rich.startTimeoutMs" in log:
            out["why"] += " [start deadline passed]"
        return out
    finally:
        watch.stop()
        out.update(peak_mib=round(watch.peak_mem / 2 ** 20, 1), rss_mib=round(watch.peak_rss / 2 ** 20, 1),
                   cache_mib=round(watch.peak_cache / 2 ** 20, 1), peak_pids=watch.peak_pids, oom_kills=watch.oom_kills,
                   containers=len(watch.ids), exits=watch.exits)
        s.stop(check_leftovers=False)


def cold_image(env):
    """A rich image of its own layer (the test content and a nonce in prompt.md), so that
    no file of it is in the page cache yet: its first container reads (and is charged for)
    every page it touches, as a host's first rich channel does. Returns the tag."""
    content = tempfile.mkdtemp(prefix="rts-pi-content-", dir="/tmp")
    try:
        shutil.rmtree(content)
        write_test_content(content)
        with open(os.path.join(content, "prompt.md"), "a", encoding="utf-8") as f:
            f.write(f"nonce {secrets.token_hex(8)}\n")
        tag = unique_tag("pibottoms")
        p = subprocess.run([env.program("cli"), "image", "build", "--rich", "--dir", PI_DIR, "--content", content,
                            "--tag", tag], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            remove_tag(tag)
            raise HarnessError(f"image build --rich failed: {p.stderr.strip()[-2000:]}")
        evict(tag)
        return tag
    finally:
        shutil.rmtree(content, ignore_errors=True)


def evict(tag):
    """Drop the page cache of the image's own files (the build wrote them: their pages are
    cached, charged to the builder), file by file, so no other file's cache is touched."""
    gd = json.loads(docker("image", "inspect", "--format", "{{json .GraphDriver}}", tag).stdout)
    dirs = [d for d in [gd["Data"].get("UpperDir")] + (gd["Data"].get("LowerDir") or "").split(":") if d]
    os.sync()
    for top in dirs:
        for root, _, files in os.walk(top):
            for name in files:
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def values(text, kind):
    return [kind(v) for v in text.split(",") if v] if text else []


def main():
    ap = argparse.ArgumentParser(description="the Pi worker's bottoms through the daemons")
    ap.add_argument("--image", help="a rich image already built (default: build one)")
    ap.add_argument("-n", type=int, default=1, help="runs of each trial (default 1)")
    ap.add_argument("--memory", default="", help="memoryMb values to try, the rest at defaults")
    ap.add_argument("--cpus", default="", help="cpus values to try")
    ap.add_argument("--pids", default="", help="pids values to try")
    ap.add_argument("--together", action="append", default=[], help="MB/CPUS/PIDS: all three at once")
    ap.add_argument("--load", type=int, default=0, help="busy loops running during the trials")
    ap.add_argument("--start-timeout-ms", type=int, default=90000)
    ap.add_argument("--turn-timeout-ms", type=int, default=120000)
    ap.add_argument("--turns", type=int, default=1, help="turns per run (default 1)")
    ap.add_argument("--images", type=int, default=0, help="PNG images of 16 MiB in the first turn")
    ap.add_argument("--cold", action="store_true", help="a fresh image (cold page cache) for each run")
    ap.add_argument("--json", action="store_true", help="one JSON object per trial")
    a = ap.parse_args()
    trials = [dict(DEFAULTS, memoryMb=v) for v in values(a.memory, int)]
    trials += [dict(DEFAULTS, cpus=v) for v in values(a.cpus, float)]
    trials += [dict(DEFAULTS, pids=v) for v in values(a.pids, int)]
    for t in a.together:
        m, c, p = t.split("/")
        trials.append({"memoryMb": int(m), "cpus": float(c), "pids": int(p)})
    if not trials:
        ap.error("nothing to try: give --memory, --cpus, --pids or --together")
    env = None
    loops = []
    pictures = []
    try:
        env = Environment.prepare()
        image = None if a.cold else a.image or pi_image(env).tag
        for _ in range(a.images):
            fd, path = tempfile.mkstemp(prefix="rts-pibottoms-", suffix=".png", dir="/tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(PNG_HEAD + secrets.token_bytes(16 * 2 ** 20 - len(PNG_HEAD)))
            os.chmod(path, 0o644)
            pictures.append(path)
        loops = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(a.load)]
        for limits in trials:
            for _ in range(a.n):
                tag = cold_image(env) if a.cold else image
                try:
                    r = trial(env, tag, limits, a.start_timeout_ms, a.turn_timeout_ms, a.turns, pictures)
                finally:
                    if a.cold:
                        remove_tag(tag)
                r["load"] = a.load
                r["cold"] = a.cold
                if a.json:
                    print(json.dumps(r), flush=True)
                else:
                    lim = r["limits"]
                    print(f"memoryMb {lim['memoryMb']:>5} cpus {lim['cpus']:<5g} pids {lim['pids']:>4} load {a.load}: "
                          f"{'answered' if r['ok'] else 'FAILED  '} ready {r['ready']} s turn {r['turn']} s "
                          f"oom {r['oom']} starts {r['starts']} peak {r['peak_mib']} MiB (rss {r['rss_mib']}, cache "
                          f"{r['cache_mib']}) {r['peak_pids']} pids "
                          f"oom kills {r['oom_kills']} exits {r['exits']} {r['why']}", flush=True)
    except (HarnessError, subprocess.SubprocessError, OSError) as e:
        print(f"rich_bottoms.py: {e}", file=sys.stderr)
        return 1
    finally:
        for p in loops:
            p.kill()
            p.wait()
        for path in pictures:
            os.unlink(path)
        if env:
            for problem in env.cleanup():
                print(f"rich_bottoms.py: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
