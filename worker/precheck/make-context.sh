#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Assemble the docker build context of the precheck image, offline, from the host's node.
#
#   make-context.sh [--node PATH] [--source DIR] OUTDIR
#   docker build -t TAG OUTDIR
#
# OUTDIR (created; or an existing empty directory, such as one from mktemp -d) receives
# the Dockerfile and rootfs/: node (the real file behind PATH, default /usr/bin/node, at
# /usr/bin/node), exactly the shared libraries `ldd` lists for it at the paths it lists
# them and the dynamic loader, the JavaScript files a distribution's node loads from disk
# at start-up (Debian's nodejs takes acorn, cjs-module-lexer and undici from
# /usr/share/nodejs and aborts without them), and the harness. --source is the directory
# holding harness.mjs and Dockerfile: by default this script's own, which is
# $(pkglibdir)/precheck once installed. Nothing is downloaded.
#
# The node part is worker/node-closure.sh's (beside this directory, in the source tree and
# in $(pkglibdir)); a node without time-zone data is refused, since `today` and `timeZone`
# need it.
#
# Exit status: 0 done, 1 failed (a message on stderr), 2 usage.
set -eu

me=make-context.sh
die() {
	echo "$me: $*" >&2
	exit 1
}
usage() {
	echo "usage: $me [--node PATH] [--source DIR] OUTDIR" >&2
	exit 2
}

node=/usr/bin/node
here=$(dirname -- "$0")
source_dir=$here
. "$here/../node-closure.sh"
while [ $# -gt 0 ]; do
	case $1 in
	--node)
		[ $# -ge 2 ] || usage
		node=$2
		shift 2
		;;
	--source)
		[ $# -ge 2 ] || usage
		source_dir=$2
		shift 2
		;;
	--)
		shift
		break
		;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage
out=$1
[ -n "$out" ] || usage

for f in harness.mjs Dockerfile; do
	[ -f "$source_dir/$f" ] || die "$source_dir/$f is missing (pass --source with the precheck directory)"
done
node_probe "$node"

node_context "$out"

node_copy "$root"
node_put "$source_dir/harness.mjs" /precheck/harness.mjs 0644 "$root"
cp -- "$source_dir/Dockerfile" "$out/Dockerfile"
chmod 0644 "$out/Dockerfile"
