#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make check: the rich worker's modules that need nothing but node (lib/privacy, tiers,
# input, outbox, images, skills) under node's own test runner. The modules that load Pi
# are exercised in the real image (tests/integration/test_pi_worker.py). Skipped (77)
# without node 20 or later.
command -v node >/dev/null 2>&1 || { echo "node not found: skipped"; exit 77; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
	{ echo "node older than 20: skipped"; exit 77; }
exec node --test "${srcdir:-.}/worker/pi/test/"
