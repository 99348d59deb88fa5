#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Build roundtable-sandbox out of tree: autoreconf when the generated files are missing or
# stale, configure --enable-werror (plus any arguments given here) when the build directory
# is new or was configured with other arguments, then make -j$(nproc).
#
#   scripts/build.sh [CONFIGURE-ARGS...]
#
# RTS_BUILDDIR names the build directory (default: build-default in the source tree).
set -euo pipefail

srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${RTS_BUILDDIR:-$srcdir/build-default}

cd "$srcdir"
if [ ! -x configure ] || [ ! -f Makefile.in ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	echo "build.sh: autoreconf -fi"
	autoreconf -fi
fi
if [ -f config.status ] && [ "$(cd "$builddir" 2>/dev/null && pwd)" != "$srcdir" ]; then
	echo "build.sh: $srcdir is configured in place; run 'make distclean' there first" >&2
	exit 1
fi

mkdir -p "$builddir"
cd "$builddir"
# Reconfigure when the arguments changed since this directory was last configured.
want="--enable-werror $*"
stamp=.rts-configure-args
if [ ! -f Makefile ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	echo "build.sh: configuring $builddir with: $want"
	rm -f "$stamp"
	"$srcdir/configure" --enable-werror "$@"
	printf '%s\n' "$want" >"$stamp"
fi
make -j"$(nproc)"
