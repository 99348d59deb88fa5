#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make check: the generated man pages are clean under `mandoc -Tlint` (style messages
# included), with every cross-reference resolved among the pages themselves. Skipped
# (exit 77) when mandoc is not installed.
set -eu
command -v mandoc >/dev/null 2>&1 || { echo "mandoc not installed: skipped"; exit 77; }
pages="man/roundtable-sandbox.1 man/roundtable-sandbox.json.5 man/roundtable-sandbox.7
man/roundtable-sandbox-statd.8 man/roundtable-sandbox-runnerd.8 man/roundtable-sandbox-brokerd.8"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A private manual tree, so .Xr to our own pages resolves and to system pages does too.
for p in $pages; do
	[ -f "$p" ] || { echo "missing $p (run make first)"; exit 1; }
	sect=${p##*.}
	mkdir -p "$tmp/man$sect"
	cp "$p" "$tmp/man$sect/"
done
# Unresolved @...@ placeholders would be printed literally.
if grep -n '@[A-Za-z_]*@' $pages; then
	echo "unsubstituted placeholders above"
	exit 1
fi
# mandoc resolves .Xr through mandoc.db: index the private tree (Debian: /usr/sbin).
PATH=$PATH:/usr/sbin
if command -v makewhatis >/dev/null 2>&1; then
	makewhatis "$tmp"
	manpath="$tmp"
else
	manpath=""
fi
out=$(mandoc -Tlint -W style ${manpath:+-M "$manpath"} $pages 2>&1 || true)
# References to other packages' pages (docker(1), systemd.exec(5)) cannot be resolved in
# a build environment; ours must be (all of them, when makewhatis is missing).
if [ -n "$manpath" ]; then
	out=$(printf '%s\n' "$out" | grep -v 'referenced manual not found: Xr [^r]' || true)
else
	out=$(printf '%s\n' "$out" | grep -v 'referenced manual not found' || true)
fi
if [ -n "$out" ]; then
	printf '%s\n' "$out"
	exit 1
fi
echo "mandoc -Tlint: clean"
