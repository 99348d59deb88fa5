# SPDX-License-Identifier: Apache-2.0
# Shell functions (sourced, POSIX sh) that put the host's node into an image root, offline:
# the precheck image (worker/precheck/make-context.sh) and the rich image
# (worker/pi/make-context.sh) both run on it. Installed beside them in $(pkglibdir).
#
#   node_probe NODE     resolve NODE (symlinks followed), check that it runs and knows time
#                       zones (ICU), and work out what it needs; sets node_real, node_libs
#                       ("SOURCE DESTINATION" lines: what ldd lists) and node_builtins (the
#                       JavaScript files a distribution's node loads from disk at start-up:
#                       Debian's nodejs names them in process.config's
#                       NODE_SHARED_BUILTIN_*_PATH defines and aborts without them)
#   node_copy ROOT      copy node (to /usr/bin/node, execute-only), its libraries and the
#                       loader at the paths ldd lists them, and the builtins, into the
#                       directory ROOT
#   node_put SRC DST MODE ROOT
#                       copy the file behind SRC to ROOT/DST (DST an absolute, plain path)
#   node_context OUT    make OUT the build context: an empty directory (created when
#                       missing), with umask 022, and the image root OUT/rootfs in it; sets
#                       root
#
# Both need die() (print a message and exit 1) from the caller. ICU: Debian's nodejs uses
# the system ICU, whose data is libicudata, a shared library of the closure; NodeSource's
# and upstream's builds carry full ICU inside the binary. A node without time-zone data is
# refused: the images format local time.

# Paths end up as paths inside the image; accept only the plain ones libraries have.
node_path_ok() {
	case $1 in
	/*) ;;
	*) return 1 ;;
	esac
	case $1 in
	*[!A-Za-z0-9._/+-]* | */../* | */./* | *//*) return 1 ;;
	esac
	return 0
}

node_probe() {
	node_real=$(readlink -f -- "$1") || die "$1 does not exist (install nodejs)"
	if ! [ -f "$node_real" ] || ! [ -x "$node_real" ]; then
		die "$1 is not an executable file (install nodejs)"
	fi
	# What the image needs from node itself: its shared builtins and whether it knows time
	# zones. This runs the host's own node.
	node_probe_out=$("$node_real" -e '
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
console.log("version " + process.versions.node);
') || die "$node_real does not run"
	case $node_probe_out in
	*"icu ok"*) ;;
	*) die "$node_real has no ICU time-zone data (Intl cannot format in a time zone); the image needs it" ;;
	esac
	node_version=$(printf '%s\n' "$node_probe_out" | sed -n 's/^version //p')
	node_builtins=$(printf '%s\n' "$node_probe_out" | sed -n 's/^builtin //p')

	# ldd lists the closure: "name => /path (addr)", the loader as "/path (addr)" (or, on
	# some systems, "/path => /real/path (addr)": the file goes to both), the vDSO without a
	# path. Each line becomes "SOURCE DESTINATION". A library it cannot find stops the build.
	node_ldd_out=$(ldd "$node_real" 2>&1) || die "ldd $node_real failed: $node_ldd_out"
	node_libs=$(printf '%s\n' "$node_ldd_out" | awk '
		$2 == "=>" && $3 == "not" { print "MISSING " $1; next }
		$2 == "=>" && substr($3, 1, 1) == "/" {
			print $3 " " $3
			if (substr($1, 1, 1) == "/") print $3 " " $1
			next
		}
		substr($1, 1, 1) == "/" { print $1 " " $1; next }')
	case $node_libs in
	*MISSING*) die "ldd cannot find a library of $node_real: $(printf '%s\n' "$node_libs" | grep MISSING | head -n 1)" ;;
	esac
	[ -n "$node_libs" ] || die "ldd lists no libraries for $node_real (a static node is not supported)"
}

node_put() {
	node_path_ok "$2" || die "refusing an unusual path: $2"
	[ -f "$1" ] || die "$1 is missing"
	node_dst=$4$2
	[ -e "$node_dst" ] && return 0
	mkdir -p -- "$(dirname -- "$node_dst")"
	cp -L -- "$1" "$node_dst"
	chmod "$3" "$node_dst"
}

# node goes in execute-only (0711; the builder's owner keeps read, for the build context):
# in the container node is root's and the guest account, holding no capability when runc
# execs it (--cap-drop ALL), may not read it, so the kernel marks the process non-dumpable
# at exec. (It checks with the credentials the caller has at execve(): a caller still
# holding CAP_DAC_OVERRIDE then, as setpriv run by root does, gets a dumpable process.)
# Every container runs as the one guest uid: without this, a guest that escaped one
# container could ptrace another's node, read its /proc/PID/environ and reach its broker
# socket and workspace through /proc/PID/root. node has no prctl(), and a launcher's
# PR_SET_DUMPABLE would not survive its exec of node (exec of a readable file resets it).
# node never reads its own file (it only readlinks /proc/self/exe), and a node it spawns
# execs the same file. The libraries stay readable: the loader maps them as the process.
node_copy() {
	node_put "$node_real" /usr/bin/node 0711 "$1"
	while read -r node_src node_to; do
		node_put "$node_src" "$node_to" 0755 "$1"
	done <<EOF
$node_libs
EOF
	for node_b in $node_builtins; do
		node_put "$node_b" "$node_b" 0644 "$1"
	done
}

node_context() {
	if [ -e "$1" ]; then
		if ! [ -d "$1" ] || [ -n "$(ls -A -- "$1")" ]; then
			die "$1 exists and is not an empty directory"
		fi
	else
		mkdir -- "$1" || die "cannot create $1"
	fi
	umask 022
	root=$1/rootfs
	mkdir -- "$root" || die "cannot create $root"
}
