#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The demo: prepare the host, build, then run two guest turns through the whole suite.
#
# As root: installs missing Debian packages and starts dockerd (scripts/setup-debian.sh),
# builds (scripts/build.sh), builds the worker image under a tag of its own
# (roundtable-sandbox:demo-<pid>-<random>), creates the roundtable-sandbox service account
# when missing (not in the docker group), writes a demo config in a temporary directory,
# starts statd, runnerd and brokerd as that account (runnerd alone with the docker group:
# runuser -g <its group> -G docker), turns the sandbox on in "demo-channel", asks it to
# remember something, then asks in a new turn (a new container) what it remembers. Prints
# both replies, stops everything it started, removes its image tag (RTS_KEEP_IMAGE=1 keeps
# it), and exits 0 only when both replies came back.
#
# The model is the local scripted endpoint (tests/fakes/fake_model.py: HTTPS with a test
# CA, not a model) unless these point at a real OpenAI-compatible endpoint:
#   RTS_MODEL_URL     https:// Chat Completions URL
#   RTS_MODEL         the model name
#   RTS_API_KEY_FILE  a file holding the API key (copied for the service account)
#   RTS_CA_FILE       optional PEM bundle to trust instead of the system store
set -euo pipefail

srcdir=$(cd "$(dirname "$0")/.." && pwd)
export RTS_BUILDDIR=${RTS_BUILDDIR:-$srcdir/build-default}

if [ "$(id -u)" -ne 0 ]; then
	echo "demo.sh: run as root (scripts/demo.sh)" >&2
	exit 1
fi
if [ -n "${RTS_MODEL_URL:-}" ] && { [ -z "${RTS_MODEL:-}" ] || [ -z "${RTS_API_KEY_FILE:-}" ]; }; then
	echo "demo.sh: RTS_MODEL_URL needs RTS_MODEL and RTS_API_KEY_FILE too" >&2
	exit 2
fi

echo "==== setup (scripts/setup-debian.sh)"
"$srcdir/scripts/setup-debian.sh"
echo "==== build (scripts/build.sh into $RTS_BUILDDIR)"
"$srcdir/scripts/build.sh"
echo "==== run"
exec /usr/bin/python3 "$srcdir/scripts/demo.py"
