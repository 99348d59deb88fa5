#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets (tests/fuzz) of brokerd and of common/'s controlled fetch
# with clang, AddressSanitizer and UndefinedBehaviorSanitizer, and run each one for a
# bounded time. Exits non-zero when a target cannot be built, crashes, leaks, trips a
# sanitizer or breaks an invariant; the input that did it is kept as
# $builddir/crash-<target>-*.
#
#   scripts/ci-fuzz.sh [TARGET...]          default: every tests/fuzz/fuzz_*.c
#
# RTS_FUZZ_SECONDS   run time per target (default 30: ten targets keep CI near five minutes of
#                    fuzzing; run longer by hand when a parser changes)
# RTS_FUZZ_BUILDDIR  build directory (default build-fuzz in the source tree)
# CLANG              the compiler (default clang, Debian's package "clang")
#
# The seed corpora in tests/fuzz/corpus/<target>/ are read, never written: what a run
# discovers goes to $builddir/corpus-<target>/ and is reused by the next run there.
set -euo pipefail

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

failed=()
for t in "$@"; do
	echo "==== fuzz_$t: build"
	# shellcheck disable=SC2046 # pkg-config prints one word per flag
	"$clang" -g -O1 -fsanitize=fuzzer $san -I"$builddir" -I"$srcdir" $(pkg-config --cflags $pkgs) \
		-o "fuzz_$t" "$srcdir/tests/fuzz/fuzz_$t.c" brokerd/libbrokerd.a statd/libstatd.a runnerd/librunnerd.a \
		common/libfetch.a common/libcommon.a \
		$(pkg-config --libs $pkgs) -lm -pthread
	dict=
	case $t in
	http_head) dict=-dict=$srcdir/tests/fuzz/http_head.dict ;;
	sse) dict= ;;
	url) dict=-dict=$srcdir/tests/fuzz/url.dict ;;
	sse_stream) dict=-dict=$srcdir/tests/fuzz/sse.dict ;;
	*) dict=-dict=$srcdir/tests/fuzz/json.dict ;;
	esac
	mkdir -p "corpus-$t"
	echo "==== fuzz_$t: ${seconds} s"
	if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"./fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
		-print_final_stats=1 -artifact_prefix="$builddir/crash-$t-" $dict \
		"corpus-$t" "$srcdir/tests/fuzz/corpus/$t"; then
		failed+=("$t")
	fi
done

if [ ${#failed[@]} -ne 0 ]; then
	echo "ci-fuzz.sh: FAILED: ${failed[*]} (inputs: $builddir/crash-*)" >&2
	exit 1
fi
echo "ci-fuzz.sh: all targets ran ${seconds} s without a finding"
