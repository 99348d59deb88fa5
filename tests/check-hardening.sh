#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make check: the programs carry the hardening configure added (configure.ac, "Hardening"),
# read from the ELF files with readelf (binutils), as hardening-check (devscripts) would:
#   - PIE: an ET_DYN executable whose DT_FLAGS_1 has PIE;
#   - full RELRO: a GNU_RELRO segment, and BIND_NOW (DT_FLAGS BIND_NOW or DT_FLAGS_1 NOW);
#   - stack protector: __stack_chk_fail among the imported symbols;
#   - _FORTIFY_SOURCE: some checked libc call (__*_chk) among the imported symbols (ours,
#     or the distribution's CPPFLAGS: configure found it defined).
# The three daemons and the CLI; the static worker for PIE and full RELRO (its libc brings
# its own stack protector symbols, so they prove nothing). Each property is asserted only
# when configure added the flag behind it (HARDEN_* in the environment, from
# AM_TESTS_ENVIRONMENT): with --disable-hardening the test is skipped, saying so.
# Runs from the build directory.
set -eu

if [ -z "${HARDEN_CFLAGS:-}${HARDEN_LDFLAGS:-}" ]; then
	echo "SKIP: configured with --disable-hardening (or the compiler took none of the flags)"
	exit 77
fi
if ! command -v readelf >/dev/null; then
	echo "FAIL: readelf (binutils) not found"
	exit 1
fi

# has_flag WORD LIST: WORD is one of the words of LIST.
has_flag() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }

failed=0
prog_failed=0
fail() {
	echo "FAIL: $*"
	failed=1
	prog_failed=1
}

check() { # PROGRAM WHAT...: WHAT is any of pie relro now ssp fortify
	prog=$1
	shift
	prog_failed=0
	if [ ! -f "$prog" ]; then
		fail "$prog is not built"
		return
	fi
	headers=$(readelf -hlW "$prog")
	dynamic=$(readelf -dW "$prog")
	imports=$(readelf --dyn-syms -W "$prog" | awk '$7 == "UND" {print $8}')
	for what in "$@"; do
		case $what in
		pie)
			printf '%s\n' "$headers" | grep -q 'Type:[[:space:]]*DYN' &&
				printf '%s\n' "$dynamic" | grep -q 'FLAGS_1.*PIE' || fail "$prog is not a PIE" ;;
		relro)
			printf '%s\n' "$headers" | grep -q 'GNU_RELRO' || fail "$prog has no RELRO segment" ;;
		now)
			printf '%s\n' "$dynamic" | grep -Eq '\(FLAGS\)[[:space:]]+.*BIND_NOW|FLAGS_1.*NOW' ||
				fail "$prog is not linked with BIND_NOW" ;;
		ssp)
			printf '%s\n' "$imports" | grep -q '^__stack_chk_fail' || fail "$prog has no stack protector" ;;
		fortify)
			printf '%s\n' "$imports" | grep -Eq '^__[a-z0-9_]+_chk(@|$)' || fail "$prog calls no checked libc function" ;;
		esac
	done
	[ "$prog_failed" -ne 0 ] || echo "ok: $prog:$(printf ' %s' "$@")"
}

want=""
has_flag -pie "${HARDEN_LDFLAGS:-}" && want="$want pie"
has_flag -Wl,-z,relro "${HARDEN_LDFLAGS:-}" && want="$want relro"
has_flag -Wl,-z,now "${HARDEN_LDFLAGS:-}" && want="$want now"
has_flag -fstack-protector-strong "${HARDEN_CFLAGS:-}" && want="$want ssp"
[ "${HARDEN_FORTIFY:-no}" != yes ] || want="$want fortify"

for prog in statd/roundtable-sandbox-statd runnerd/roundtable-sandbox-runnerd \
	brokerd/roundtable-sandbox-brokerd cli/roundtable-sandbox; do
	# shellcheck disable=SC2086 # one word per property
	check "$prog" $want
done

worker_want=""
has_flag -static-pie "${WORKER_LDFLAGS:-}" && worker_want="$worker_want pie"
has_flag -Wl,-z,relro "${WORKER_LDFLAGS:-}" && worker_want="$worker_want relro"
has_flag -Wl,-z,now "${WORKER_LDFLAGS:-}" && worker_want="$worker_want now"
# shellcheck disable=SC2086
[ -z "$worker_want" ] || check worker/roundtable-sandbox-worker $worker_want

exit "$failed"
