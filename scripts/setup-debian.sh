#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Prepare a Debian 12 host for building, testing and running roundtable-sandbox:
# install the build and runtime dependencies that are missing, then make sure a Docker
# daemon answers (starting dockerd when none does). Idempotent; run as root.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "setup-debian.sh: run this as root (as root: scripts/setup-debian.sh)" >&2
	exit 1
fi

packages="autoconf automake pkg-config make gcc libcurl4-openssl-dev libjson-c-dev libseccomp-dev
libcap-ng-dev libsystemd-dev libmicrohttpd-dev check libhttp-parser-dev libssl-dev libjansson-dev
docker.io python3 python3-pytest python3-brotli python3-prometheus-client openssl curl mandoc clang systemd debhelper lintian tzdata
nodejs bubblewrap tini"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	echo "setup-debian.sh: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -q $missing
fi

# The Debian CLI from docker.io, whatever else is first in PATH.
docker=/usr/bin/docker
log=/var/log/roundtable-sandbox-dockerd.log
if "$docker" info >/dev/null 2>&1; then
	exit 0
fi
if [ -d /run/systemd/system ] && systemctl start docker 2>/dev/null; then
	:
else
	# No systemd (containers, CI): run dockerd detached from this shell; it starts and
	# supervises its own containerd.
	echo "setup-debian.sh: starting dockerd (log: $log)"
	setsid -f /usr/sbin/dockerd >"$log" 2>&1 </dev/null
fi
i=0
until "$docker" info >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -ge 60 ]; then
		echo "setup-debian.sh: no Docker daemon answers after 60 s (see $log or the docker unit's journal)" >&2
		exit 1
	fi
	sleep 1
done
echo "setup-debian.sh: Docker daemon is up"
