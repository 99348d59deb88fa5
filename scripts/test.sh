#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Run every test: the Check suites (make check), the same suites built with ASan/UBSan in a
# second build directory, then the integration tests against real daemons, a real dockerd
# and real containers. Runs as root (it installs missing packages and starts dockerd
# through scripts/setup-debian.sh). Exits non-zero when anything failed.
#
# RTS_BUILDDIR (default build-default) and RTS_SANITIZER_BUILDDIR (default
# build-sanitizers) name the two build directories, both in the source tree by default.
set -euo pipefail

srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${RTS_BUILDDIR:-$srcdir/build-default}
sanbuilddir=${RTS_SANITIZER_BUILDDIR:-$srcdir/build-sanitizers}
jobs=$(nproc)
failed=()

# Each heading says how long the run has taken so far, so a slow step shows in a CI log.
started=$SECONDS
step() {
	printf '\n==== %s (at %d s) ====\n' "$*" $((SECONDS - started))
}

# The packaging step at the end installs and purges the package; refuse now, not after
# ten minutes of other tests, on a host where it is (or was) installed.
case $(dpkg-query -W -f='${db:Status-Status}' roundtable-sandbox 2>/dev/null) in
"" | not-installed) ;;
*)
	echo "test.sh: roundtable-sandbox is (or was) installed here; run the tests on a dedicated machine," \
		"or purge it first (apt-get purge roundtable-sandbox)" >&2
	exit 1
	;;
esac

step "setup"
"$srcdir/scripts/setup-debian.sh"

step "build ($builddir)"
RTS_BUILDDIR=$builddir "$srcdir/scripts/build.sh"

step "make check"
# VERBOSE: the harness prints the logs of failing tests.
make -C "$builddir" -j"$jobs" check VERBOSE=1 || failed+=("make check")

step "make check with sanitizers ($sanbuilddir)"
if RTS_BUILDDIR=$sanbuilddir "$srcdir/scripts/build.sh" --enable-sanitizers; then
	make -C "$sanbuilddir" -j"$jobs" check VERBOSE=1 || failed+=("make check (sanitizers)")
else
	failed+=("build (sanitizers)")
fi

step "integration tests"
# Debian's python3 has pytest (python3-pytest); another python3 first in PATH may not.
# -rfE lists the failures and errors once more at the end of pytest's output; that list is
# kept and printed again with the final verdict, so a reader of the last lines of a long
# run sees which tests failed without scrolling back through the fuzz and packaging steps.
integration_log=$(mktemp)
trap 'rm -f "$integration_log"' EXIT
(cd "$srcdir" && RTS_BUILDDIR=$builddir /usr/bin/python3 -m pytest -v -rfE -p no:cacheprovider tests/integration) |
	tee "$integration_log" || failed+=("integration tests")

step "fuzz (libFuzzer, bounded time per target)"
"$srcdir/scripts/ci-fuzz.sh" || failed+=("fuzz")

step "packaging (distcheck, Debian package, a real turn through the installed binaries)"
"$srcdir/scripts/ci-package.sh" || failed+=("packaging")

if [ ${#failed[@]} -ne 0 ]; then
	if grep -q -E '^(FAILED|ERROR) ' "$integration_log"; then
		step "integration tests that failed"
		grep -E '^(FAILED|ERROR) ' "$integration_log" | cut -c1-300
	fi
	step "FAILED: ${failed[*]}"
	exit 1
fi
step "all tests passed"
