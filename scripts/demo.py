#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The running part of scripts/demo.sh (see there): one installation, two turns.

Reuses tests/integration/harness.py, which sets up an installation exactly as the
integration tests do: the worker image under a tag of its own
(roundtable-sandbox:demo-<pid>-<random>), removed at the end unless RTS_KEEP_IMAGE=1; each
daemon started as its own account with runuser (accounts mode, as packaged), runnerd alone
with the docker group, the turn containers as the guest account.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from harness import Environment, HarnessError, Suite, unique_tag  # noqa: E402

CHANNEL = "demo-channel"
SPEAKER = ["--author", "1001", "--name", "Ada"]
TURNS = ["remember that the blue key opens the shed", "what do you remember?"]


def real_endpoint():
    """Config and key for a real endpoint named in the environment, or (None, None)."""
    url = os.environ.get("RTS_MODEL_URL")
    if not url:
        return None, None
    with open(os.environ["RTS_API_KEY_FILE"], encoding="utf-8") as f:
        key = f.read()
    key = key[:-1] if key.endswith("\n") else key
    config = {"model": os.environ["RTS_MODEL"], "modelUrl": url, "caFile": os.environ.get("RTS_CA_FILE")}
    return config, key


def main():
    config, key = real_endpoint()
    keep_image = os.environ.get("RTS_KEEP_IMAGE") == "1"
    tag = unique_tag("demo")
    print(f"building the worker image {tag} ...", flush=True)
    try:
        env = Environment.prepare(image=tag)
    except HarnessError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    replies = []
    try:
        with Suite(env, config=config, api_key=key, fake_model=config is None) as s:
            where = s.config["modelUrl"] + (" (scripted local endpoint)" if s.fake else "")
            print(f"installation {s.installation} in {s.root}\nconfig: {s.config_path}\nmodel: {where}\n")
            on = s.cli("on", CHANNEL)
            if on.returncode != 0:
                print(f"demo: 'on {CHANNEL}' failed: {on.stderr.strip()}", file=sys.stderr)
                return 1
            for text in TURNS:
                print(f"Ada> {text}", flush=True)
                p = s.cli("say", CHANNEL, *SPEAKER, text)
                if p.returncode != 0:
                    print(f"demo: no reply (exit {p.returncode}): {p.stderr.strip()}", file=sys.stderr)
                    print(s.logs(), file=sys.stderr)
                    return 1
                reply = p.stdout.rstrip("\n")
                replies.append(reply)
                print(f"sandbox> {reply}\n", flush=True)
            left = s.containers()
            print("containers left after the turns: " + (", ".join(left) if left else "none"))
    except HarnessError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    finally:
        problems = env.cleanup(keep_images=keep_image)
        if keep_image:
            print(f"kept the worker image {tag}")
        elif problems:
            print("demo: " + "; ".join(problems), file=sys.stderr)
        else:
            print(f"removed the worker image {tag} (RTS_KEEP_IMAGE=1 keeps it)")
    ok = len(replies) == len(TURNS) and all(replies)
    print("demo: both replies came back" if ok else "demo: a reply was empty")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
