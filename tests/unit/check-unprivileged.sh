#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The state-machine suites (statd's queues, runnerd's turns, rich channels and removals) need no root, no
# Docker and no network: they drive the machines through fake ops. When make check runs
# as root, prove it by running them once more as nobody with no supplementary groups (so
# not in the docker group), no new privileges, an empty environment (no DOCKER_HOST) and,
# where the kernel allows it, a network namespace of their own (only a loopback that is
# down). As any other user they ran unprivileged already: skipped.
#
# Run from the build directory (make check does).
set -eu

suites="tests/unit/check_statd_queue tests/unit/check_runnerd_turn tests/unit/check_runnerd_rich
	tests/unit/check_runnerd_removal"

if [ "$(id -u)" != 0 ]; then
	echo "not root: make check ran the suites unprivileged already"
	exit 77
fi
if ! id nobody >/dev/null 2>&1; then
	echo "no user nobody to run the suites as"
	exit 77
fi

# Copies in a directory nobody can read: the build tree may not be.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
for s in $suites; do
	cp "$s" "$tmp/"
done

netns="unshare --net --"
if ! unshare --net -- true 2>/dev/null; then
	echo "note: no network namespace here (unshare --net refused); running without one"
	netns=
fi

status=0
for s in $suites; do
	name=$(basename "$s")
	echo "== $name as nobody${netns:+, no network}"
	# shellcheck disable=SC2086 # $netns is a command prefix or nothing
	if ! (cd "$tmp" && $netns setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --no-new-privs \
		env -i PATH=/usr/bin:/bin ${CK_FORK:+CK_FORK=$CK_FORK} "./$name"); then
		status=1
	fi
done
exit $status
