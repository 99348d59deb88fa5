#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets (tests/fuzz) of brokerd and of common/'s controlled fetch
# with clang, AddressSanitizer and UndefinedBehaviorSanitizer, and run each one for a
# bounded time. Exits non-zero when a target cannot be built, crashes, leaks, trips a
# sanitizer or breaks an invariant; the input that did it is kept as
# $builddir/crash-<target>-*, and each target's whole output as $builddir/fuzz-<target>.log.
#
#   scripts/ci-fuzz.sh [TARGET...]          default: every tests/fuzz/fuzz_*.c
#
# RTS_FUZZ_SECONDS   run time per target (default 30; the targets run one per CPU at a time;
#                    run longer by hand when a parser changes)
# RTS_FUZZ_BUILDDIR  build directory (default build-fuzz in the source tree)
# CLANG              the compiler (default clang, Debian's package "clang")
#
# The seed corpora in tests/fuzz/corpus/<target>/ are read, never written: what a run
# discovers goes to $builddir/corpus-<target>/ and is reused by the next run there.
set -euo pipefail

# wait -n -p (below) is bash 5.1 (Debian 11 and later).
if [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
	echo "ci-fuzz.sh: needs bash 5.1 or later, this is $BASH_VERSION" >&2
	exit 1
fi

srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${RTS_FUZZ_BUILDDIR:-$srcdir/build-fuzz}
seconds=${RTS_FUZZ_SECONDS:-30}
clang=${CLANG:-clang}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
pkgs="json-c jansson libmicrohttpd libcurl libsystemd libcrypto libseccomp libcap-ng libacl"

if ! command -v "$clang" >/dev/null; then
	echo "ci-fuzz.sh: $clang not found (install the Debian package clang)" >&2
	exit 1
fi

# The brokerd and common libraries, instrumented for coverage and the sanitizers. The
# flags go to make, not configure: configure links a static worker test program, which
# the sanitizers cannot be part of. No hardening: the sanitizers check what
# _FORTIFY_SOURCE would (HARDEN_CPPFLAGS= also for a directory configured before
# --disable-hardening existed), and fuzzers are never shipped.
mkdir -p "$builddir"
cd "$builddir"
# Configure here, never through make's automatic re-check: that would run configure with the
# sanitizer CFLAGS below, and the static worker link test cannot pass with them.
if [ ! -f Makefile ] || [ "$srcdir/configure" -nt config.status ]; then
	"$srcdir/configure" -q CC="$clang" --disable-hardening
fi
make -s -j"$(nproc)" CFLAGS="-g -O1 -fsanitize=fuzzer-no-link $san" HARDEN_CPPFLAGS= brokerd/libbrokerd.a \
	statd/libstatd.a runnerd/librunnerd.a common/libfetch.a common/libcommon.a

if [ $# -eq 0 ]; then
	set -- $(cd "$srcdir/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
fi

dict_for() {
	case $1 in
	http_head) echo "-dict=$srcdir/tests/fuzz/http_head.dict" ;;
	sse) ;;
	url) echo "-dict=$srcdir/tests/fuzz/url.dict" ;;
	sse_stream) echo "-dict=$srcdir/tests/fuzz/sse.dict" ;;
	*) echo "-dict=$srcdir/tests/fuzz/json.dict" ;;
	esac
}

# Build every target first: a target that does not build fails the run before any fuzzing.
for t in "$@"; do
	echo "==== fuzz_$t: build"
	# shellcheck disable=SC2046 # pkg-config prints one word per flag
	"$clang" -g -O1 -fsanitize=fuzzer $san -I"$builddir" -I"$srcdir" $(pkg-config --cflags $pkgs) \
		-o "fuzz_$t" "$srcdir/tests/fuzz/fuzz_$t.c" brokerd/libbrokerd.a statd/libstatd.a runnerd/librunnerd.a \
		common/libfetch.a common/libcommon.a \
		$(pkg-config --libs $pkgs) -lm -pthread
	mkdir -p "corpus-$t"
done

# One target per CPU at a time: each still gets its whole time on a CPU of its own, and
# the step takes half as long on the 2-core machines CI runs on. Each writes to
# fuzz-<target>.log; this shell prints it when the target ends, one at a time, so two
# targets' reports never interleave: the whole log for a target that failed (the
# sanitizer's report and stack come before its shadow-memory dump and libFuzzer's own
# lines), the final statistics for one that passed.
failed=()
declare -A running=()
# A fuzzer outlives this script only by being forgotten: stop what still runs when it
# ends early (an error here, or CI's SIGTERM).
stop_running() {
	if [ ${#running[@]} -ne 0 ]; then
		kill "${!running[@]}" 2>/dev/null || true
	fi
}
trap stop_running EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Wait for any one running target, print its log and note it if it failed (bash 5.1's
# wait -p says which one ended).
reap_one() {
	local pid rc=0
	wait -n -p pid "${!running[@]}" || rc=$?
	local t=${running[$pid]}
	unset "running[$pid]"
	echo "==== fuzz_$t: ${seconds} s, exit status $rc"
	if [ "$rc" -eq 0 ]; then
		awk '/^Done [0-9]+ runs|^stat::/' "fuzz-$t.log"
	else
		cat "fuzz-$t.log"
		failed+=("$t")
	fi
}
for t in "$@"; do
	while [ ${#running[@]} -ge "$(nproc)" ]; do
		reap_one
	done
	echo "==== fuzz_$t: running"
	# shellcheck disable=SC2046 # no dictionary is no word
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"./fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
		-print_final_stats=1 -artifact_prefix="$builddir/crash-$t-" $(dict_for "$t") \
		"corpus-$t" "$srcdir/tests/fuzz/corpus/$t" >"fuzz-$t.log" 2>&1 &
	running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do
	reap_one
done

if [ ${#failed[@]} -ne 0 ]; then
	echo "ci-fuzz.sh: FAILED: ${failed[*]} (inputs: $builddir/crash-*)" >&2
	exit 1
fi
echo "ci-fuzz.sh: all targets ran ${seconds} s without a finding"
