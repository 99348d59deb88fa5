#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Assemble the docker build context of the rich (Pi) worker image (DESIGN.md 8.5):
#
#   make-context.sh [--node PATH] [--npm PATH] [--npm-cache DIR] [--offline]
#                   [--content DIR] [--source DIR] OUTDIR
#   docker build -t TAG OUTDIR
#
# OUTDIR (created; or an existing empty directory) receives the Dockerfile and rootfs/:
#   - node (the real file behind --node, default /usr/bin/node) with its shared-library
#     closure and start-up builtins (worker/node-closure.sh, as the precheck image); it must
#     be node 20.18.1 or later (undici 7) with ICU time-zone data;
#   - /app/package.json, /app/package-lock.json and /app/node_modules: `npm ci` of the
#     committed lockfile, run here, on this host, as the caller: it downloads the pinned
#     packages (@mariozechner/pi-coding-agent 0.73.1 and what it needs, each checked against
#     the lockfile's sha512) from the npm registry npm is configured for, runs none of their
#     install scripts (--ignore-scripts) and leaves out optional and development packages.
#     With --offline it takes them from the npm cache only (--npm-cache DIR, filled before by
#     an online run with the same cache). Nothing is fetched when the image runs;
#   - /app/worker: the worker (main.mjs, lib/*.mjs);
#   - /app/content: the operator's content from --content DIR, if given: prompt.md (the
#     persona, at most 256 KiB) and skills/ (skills/<name>/SKILL.md and the files each skill
#     refers to). Only those two are taken; a symbolic link, device or other special file
#     in them is refused, so nothing from elsewhere on the host comes along. Never put
#     credentials there: the image is readable by whoever runs it;
#   - /app/empty (Pi's agent directory: empty, read-only), /tmp (mode 1777: Docker copies
#     it onto the --tmpfs mounted there), /workspace and /run/broker (mount points).
# --source is the directory holding main.mjs, lib/, package.json, package-lock.json and
# Dockerfile: by default this script's own, which is $(pkglibdir)/pi once installed.
#
# Exit status: 0 done, 1 failed (a message on stderr; OUTDIR may be left half-filled),
# 2 usage.
set -eu

me=make-context.sh
die() {
	echo "$me: $*" >&2
	exit 1
}
usage() {
	echo "usage: $me [--node PATH] [--npm PATH] [--npm-cache DIR] [--offline] [--content DIR] [--source DIR] OUTDIR" >&2
	exit 2
}

here=$(dirname -- "$0")
. "$here/../node-closure.sh"
node=/usr/bin/node
npm=npm
npm_cache=
offline=
content=
source_dir=$here
while [ $# -gt 0 ]; do
	case $1 in
	--node | --npm | --npm-cache | --content | --source)
		[ $# -ge 2 ] || usage
		case $1 in
		--node) node=$2 ;;
		--npm) npm=$2 ;;
		--npm-cache) npm_cache=$2 ;;
		--content) content=$2 ;;
		--source) source_dir=$2 ;;
		esac
		shift 2
		;;
	--offline)
		offline=1
		shift
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
[ -z "$offline" ] || [ -n "$npm_cache" ] || die "--offline needs --npm-cache DIR (a cache an online run filled)"

for f in main.mjs package.json package-lock.json Dockerfile; do
	[ -f "$source_dir/$f" ] || die "$source_dir/$f is missing (pass --source with the worker/pi directory)"
done
[ -d "$source_dir/lib" ] || die "$source_dir/lib is missing (pass --source with the worker/pi directory)"
command -v "$npm" >/dev/null 2>&1 || die "$npm not found: building the rich image runs npm ci (install Debian's npm package, or pass --npm)"

node_probe "$node"
# undici 7 (the worker's HTTP client) needs node 20.18.1 or later.
printf '%s\n' "$node_version" | awk -F. '{ exit !($1 > 20 || ($1 == 20 && ($2 > 18 || ($2 == 18 && $3 >= 1)))) }' ||
	die "$node_real is node $node_version; the rich worker needs node 20.18.1 or later"

# The operator's content: check all of it before anything is written.
if [ -n "$content" ]; then
	[ -d "$content" ] || die "--content $content is not a directory"
	if [ -e "$content/prompt.md" ] || [ -L "$content/prompt.md" ]; then
		{ [ -f "$content/prompt.md" ] && ! [ -L "$content/prompt.md" ]; } || die "$content/prompt.md is not a regular file"
		[ "$(wc -c <"$content/prompt.md")" -le 262144 ] || die "$content/prompt.md is larger than 256 KiB"
	fi
	if [ -e "$content/skills" ] || [ -L "$content/skills" ]; then
		{ [ -d "$content/skills" ] && ! [ -L "$content/skills" ]; } || die "$content/skills is not a directory"
		odd=$(find "$content/skills" ! -type f ! -type d -print | head -n 1)
		[ -z "$odd" ] || die "$odd is not a regular file or directory (symbolic links are refused)"
	fi
	for f in "$content"/* "$content"/.[!.]*; do
		[ -e "$f" ] || [ -L "$f" ] || continue
		case ${f##*/} in
		prompt.md | skills) ;;
		*) echo "$me: leaving out $f (only prompt.md and skills/ are taken)" >&2 ;;
		esac
	done
fi

node_context "$out"

node_copy "$root"
mkdir -p -- "$root/app/worker/lib" "$root/app/empty" "$root/app/content" "$root/workspace" "$root/run/broker" "$root/tmp"
chmod 1777 "$root/tmp"
node_put "$source_dir/main.mjs" /app/worker/main.mjs 0644 "$root"
for f in "$source_dir"/lib/*.mjs; do
	node_put "$f" "/app/worker/lib/${f##*/}" 0644 "$root"
done
node_put "$source_dir/package.json" /app/package.json 0644 "$root"
node_put "$source_dir/package-lock.json" /app/package-lock.json 0644 "$root"

set -- ci --omit=dev --omit=optional --ignore-scripts --no-bin-links --no-audit --no-fund --loglevel=error
[ -z "$npm_cache" ] || set -- "$@" --cache "$npm_cache"
[ -z "$offline" ] || set -- "$@" --offline
(cd "$root/app" && npm_config_update_notifier=false "$npm" "$@") || die "npm ci failed (it needs the npm registry, or --offline with a filled --npm-cache)"
[ -f "$root/app/node_modules/@mariozechner/pi-coding-agent/package.json" ] || die "npm ci did not install @mariozechner/pi-coding-agent"
# npm's own record of the install; the image needs only the packages.
rm -f -- "$root/app/node_modules/.package-lock.json"

if [ -n "$content" ]; then
	[ ! -f "$content/prompt.md" ] || node_put "$content/prompt.md" /app/content/prompt.md 0644 "$root"
	if [ -d "$content/skills" ]; then
		(cd "$content" && find skills -type d) | while read -r d; do
			node_path_ok "/app/content/$d" || die "refusing an unusual path: $content/$d"
			mkdir -p -- "$root/app/content/$d"
		done
		(cd "$content" && find skills -type f) | while read -r f; do
			node_put "$content/$f" "/app/content/$f" 0644 "$root"
		done
	fi
fi
cp -- "$source_dir/Dockerfile" "$out/Dockerfile"
chmod 0644 "$out/Dockerfile"
