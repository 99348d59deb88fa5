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
# ICU: Debian's nodejs uses the system ICU, whose data is libicudata, a shared library of
# the closure; NodeSource's and upstream's builds carry full ICU inside the binary. A node
# without time-zone data is refused, since `today` and `timeZone` need it.
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
source_dir=$(dirname -- "$0")
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
real_node=$(readlink -f -- "$node") || die "$node does not exist (install nodejs)"
if ! [ -f "$real_node" ] || ! [ -x "$real_node" ]; then
	die "$node is not an executable file (install nodejs)"
fi

# Paths end up as paths inside the image; accept only the plain ones libraries have.
path_ok() {
	case $1 in
	/*) ;;
	*) return 1 ;;
	esac
	case $1 in
	*[!A-Za-z0-9._/+-]* | */../* | */./* | *//*) return 1 ;;
	esac
	return 0
}

# What the image needs from node itself: its shared builtins (a define of Debian's build
# naming each file) and whether it knows time zones. This runs the host's own node.
probe=$("$real_node" -e '
const defs = (process.config.target_defaults || {}).defines || [];
for (const d of defs) {
	const m = /^NODE_SHARED_BUILTIN_[A-Z0-9_]+_PATH=(.+)$/.exec(d);
	if (m) console.log("builtin " + m[1]);
}
try {
	new Intl.DateTimeFormat("en-US", { timeZone: "Asia/Tokyo" }).format(0);
	console.log("icu ok");
} catch (e) {
	console.log("icu none");
}
') || die "$real_node does not run"
case $probe in
*"icu ok"*) ;;
*) die "$real_node has no ICU time-zone data (Intl cannot format in a time zone); the precheck image needs it" ;;
esac

# ldd lists the closure: "name => /path (addr)", the loader as "/path (addr)" (or, on some
# systems, "/path => /real/path (addr)": the file goes to both), the vDSO without a path.
# Each line becomes "SOURCE DESTINATION". A library it cannot find stops the build.
ldd_out=$(ldd "$real_node" 2>&1) || die "ldd $real_node failed: $ldd_out"
libs=$(printf '%s\n' "$ldd_out" | awk '
	$2 == "=>" && $3 == "not" { print "MISSING " $1; next }
	$2 == "=>" && substr($3, 1, 1) == "/" {
		print $3 " " $3
		if (substr($1, 1, 1) == "/") print $3 " " $1
		next
	}
	substr($1, 1, 1) == "/" { print $1 " " $1; next }')
case $libs in
*MISSING*) die "ldd cannot find a library of $real_node: $(printf '%s\n' "$libs" | grep MISSING | head -n 1)" ;;
esac
[ -n "$libs" ] || die "ldd lists no libraries for $real_node (a static node is not supported)"

if [ -e "$out" ]; then
	if ! [ -d "$out" ] || [ -n "$(ls -A -- "$out")" ]; then
		die "$out exists and is not an empty directory"
	fi
else
	mkdir -- "$out" || die "cannot create $out"
fi
umask 022
root=$out/rootfs
mkdir -- "$root"

# Copy the file behind $1 (symlinks resolved) to $2 inside the root, with mode $3.
put() {
	path_ok "$2" || die "refusing an unusual path: $2"
	[ -f "$1" ] || die "$1 is missing"
	dst=$root$2
	[ -e "$dst" ] && return 0
	mkdir -p -- "$(dirname -- "$dst")"
	cp -L -- "$1" "$dst"
	chmod "$3" "$dst"
}

put "$real_node" /usr/bin/node 0755
while read -r src dst; do
	put "$src" "$dst" 0755
done <<EOF
$libs
EOF
for b in $(printf '%s\n' "$probe" | sed -n 's/^builtin //p'); do
	put "$b" "$b" 0644
done
put "$source_dir/harness.mjs" /precheck/harness.mjs 0644
cp -- "$source_dir/Dockerfile" "$out/Dockerfile"
chmod 0644 "$out/Dockerfile"
