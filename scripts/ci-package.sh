#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Distribution checks, as root on Debian 12 with a Docker daemon running (CI runs it after
# the integration tests):
#   1. make distcheck: the release tarball builds, passes `make check` and installs;
#   2. dpkg-buildpackage -us -uc -b from that tarball plus debian/, and lintian;
#   3. installs the package, checks what it put where (units verified by
#      systemd-analyze, the four accounts of sysusers.d), builds the worker image with the
#      installed CLI, and runs the installation the way the previous, single-account
#      release did: a config without "accounts", the three installed daemons started by
#      hand (no systemd here) all as the service account; `doctor` (which warns about
#      single-account mode) and real turns through the installed binaries against the
#      fake model endpoint store a memory;
#   4. upgrades to a second build of the package (same files, a higher version), whose
#      postinst moves the installation to an account per role: the config gains the
#      accounts and is otherwise byte for byte what it was, the key and the state file
#      are untouched, every workspace file keeps its contents and becomes the guest
#      account's; then each daemon runs as its own account, doctor is clean, a turn
#      recalls the memory stored before the upgrade, and the installed units run under
#      a real systemd with the packaged accounts (scripts/ci-systemd.sh);
#   5. removes the package (state and config stay), then purges it and checks that nothing
#      is left running or installed.
# Prints package sizes and the installed footprint. Exits non-zero on the first failure.
#
# RTS_PKG_BUILDDIR (default build-package in the source tree) is its build directory;
# RTS_PKG_CHECK=1 also runs `make check` inside dpkg-buildpackage (CI already ran it);
# RTS_PKG_OUTDIR=DIR keeps a copy of the built packages and the build log there.
set -euo pipefail

srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${RTS_PKG_BUILDDIR:-$srcdir/build-package}
user=roundtable-sandbox
broker=roundtable-sandbox-broker
runner=roundtable-sandbox-runner
guest=roundtable-sandbox-guest
# A tag of this run's own (removed at exit), so a shared Docker host keeps everyone else's.
tag=roundtable-sandbox:pkgtest-$$-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
jobs=$(nproc)
pids=()

step() { printf '\n==== ci-package: %s ====\n' "$*"; }
die() {
	echo "ci-package: FAILED: $*" >&2
	exit 1
}

if [ "$(id -u)" -ne 0 ]; then
	die "run this as root (it installs and purges a package)"
fi
case $(dpkg-query -W -f='${db:Status-Status}' roundtable-sandbox 2>/dev/null) in
"" | not-installed) ;;
*) die "roundtable-sandbox is (or was) installed here; purge it first (apt-get purge roundtable-sandbox)" ;;
esac

work=$(mktemp -d /tmp/rts-pkg-XXXXXX)
chmod 0755 "$work"
# The test CA lives where an operator's caFile must: outside the directories brokerd's unit
# hides (PrivateTmp=, ProtectHome=), so the same config also works under systemd.
cadir=$(mktemp -d /run/rts-pkg-ca-XXXXXX)
chmod 0755 "$cadir"
fake_pid=""
cleanup() {
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null
	wait 2>/dev/null
	# Installed, or removed with its configuration kept: purge either.
	case $(dpkg-query -W -f='${db:Status-Status}' roundtable-sandbox 2>/dev/null) in
	installed | config-files | half-*) apt-get purge -y -q roundtable-sandbox >/dev/null 2>&1 ;;
	esac
	/usr/bin/docker image rm "$tag" >/dev/null 2>&1
	rm -rf "$work" "$cadir"
}
trap cleanup EXIT

step "build dependencies"
"$srcdir/scripts/setup-debian.sh"
need="debhelper dpkg-dev lintian systemd"
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "ci-package: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -q --no-install-recommends $missing
fi

step "debian/control names every build dependency configure.ac does"
# configure.ac spells out the Debian package of each dependency (RTS_NEED's third
# argument, and the error messages of the static worker checks).
for p in $(sed -n 's/^RTS_NEED(\[[^]]*\], *\[[^]]*\], *\[\([^]]*\)\]).*/\1/p' "$srcdir/configure.ac") libhttp-parser-dev; do
	grep -qE "^ +$p(,| |$)" "$srcdir/debian/control" || die "debian/control lacks the build dependency $p"
done

step "make distcheck ($builddir)"
(cd "$srcdir" && { [ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi; })
mkdir -p "$builddir"
(cd "$builddir" && { [ -f Makefile ] || "$srcdir/configure" -q --enable-werror; } && make -j"$jobs" distcheck) ||
	die "make distcheck"
tarball=$(ls "$builddir"/roundtable-sandbox-*.tar.gz | head -n1)
version=$(basename "$tarball" .tar.gz)
version=${version#roundtable-sandbox-}

step "dpkg-buildpackage from $(basename "$tarball")"
tar -C "$work" -xzf "$tarball"
pkgsrc="$work/roundtable-sandbox-$version"
cp -a "$srcdir/debian" "$pkgsrc/"
rm -rf "$pkgsrc/debian/build" "$pkgsrc/debian/.debhelper"
ln -s "$tarball" "$work/roundtable-sandbox_$version.orig.tar.gz"
opts="parallel=$jobs"
[ "${RTS_PKG_CHECK:-0}" = 1 ] || opts="$opts nocheck"
(cd "$pkgsrc" && DEB_BUILD_OPTIONS="$opts" dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
	{ tail -n 60 "$work/build.log"; die "dpkg-buildpackage"; }
deb=$(ls "$work"/roundtable-sandbox_"$version"-*_*.deb)
changes=$(ls "$work"/roundtable-sandbox_"$version"-*_*.changes)
if [ -n "${RTS_PKG_OUTDIR:-}" ]; then
	mkdir -p "$RTS_PKG_OUTDIR"
	cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$work/build.log" "$RTS_PKG_OUTDIR/"
fi

step "lintian"
# Errors fail the run; warnings are shown.
lintian --fail-on error --suppress-tags bad-distribution-in-changes-file "$changes" || die "lintian errors"

step "package contents and sizes"
for f in "$work"/*.deb "$work"/*.ddeb; do
	[ -f "$f" ] && printf '%-60s %8d bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
echo "Installed-Size: $(dpkg-deb -f "$deb" Installed-Size) KiB"
echo "Depends: $(dpkg-deb -f "$deb" Depends)"
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for want in ./usr/bin/roundtable-sandbox ./usr/sbin/roundtable-sandbox-statd ./usr/sbin/roundtable-sandbox-runnerd \
	./usr/sbin/roundtable-sandbox-brokerd ./usr/lib/roundtable-sandbox/image/Dockerfile \
	./usr/lib/roundtable-sandbox/image/roundtable-sandbox-worker ./etc/roundtable-sandbox/sandbox.json.example \
	./usr/lib/sysusers.d/roundtable-sandbox.conf ./usr/share/man/man1/roundtable-sandbox.1.gz \
	./usr/share/man/man5/roundtable-sandbox.json.5.gz ./usr/share/man/man7/roundtable-sandbox.7.gz \
	./usr/share/man/man8/roundtable-sandbox-statd.8.gz ./usr/share/man/man8/roundtable-sandbox-runnerd.8.gz \
	./usr/share/man/man8/roundtable-sandbox-brokerd.8.gz; do
	grep -qxF "$want" <<<"$contents" || die "the package lacks $want"
done
# Execute-only, past dh_fixperms (debian/rules): the kernel starts it non-dumpable.
worker_mode=$(dpkg-deb -c "$deb" | awk '$6 == "./usr/lib/roundtable-sandbox/image/roundtable-sandbox-worker" { print $1 }')
[ "$worker_mode" = "-rwx--x--x" ] || die "the package's worker is $worker_mode, not execute-only (-rwx--x--x)"
for d in statd runnerd brokerd; do
	for t in socket service; do
		grep -qxF "./lib/systemd/system/roundtable-sandbox-$d.$t" <<<"$contents" ||
			die "the package lacks roundtable-sandbox-$d.$t"
	done
done
# brokerd's launcher unit (brokerd/launcher.h): its socket, its template, its program.
for f in ./lib/systemd/system/roundtable-sandbox-launcher.socket ./lib/systemd/system/roundtable-sandbox-launcher@.service; do
	grep -qxF "$f" <<<"$contents" || die "the package lacks $f"
done
grep -qE '^\./usr/(lib|libexec)/.*roundtable-sandbox-launcher$' <<<"$contents" ||
	die "the package lacks the launcher program"

step "install"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; die "apt-get install"; }
for a in $user $broker $runner $guest; do
	id "$a" >/dev/null || die "the package did not create the account $a"
done
# Here the accounts may predate the package (the integration tests create them): check
# what the package's sysusers.d file creates on a system without them, each with a group
# of its own, and that none is in the docker group (only runnerd's unit adds that group).
sysroot="$work/sysroot"
mkdir -p "$sysroot/etc"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$sysroot/etc/passwd"
printf 'root:x:0:\ndocker:x:4242:\n' >"$sysroot/etc/group"
systemd-sysusers --root="$sysroot" /usr/lib/sysusers.d/roundtable-sandbox.conf >/dev/null 2>&1 ||
	die "systemd-sysusers rejects the package's sysusers.d file"
for a in $user $broker $runner $guest; do
	grep -qE "^$a:x:[1-9][0-9]*:[1-9][0-9]*:[^:]*:[^:]*:/usr/sbin/nologin\$" "$sysroot/etc/passwd" ||
		die "sysusers.d does not create $a as a system account without a shell"
	grep -qE "^$a:x:[1-9][0-9]*:\$" "$sysroot/etc/group" || die "sysusers.d does not give $a a group of its own"
done
[ "$(cut -d: -f3 "$sysroot/etc/passwd" | sort -u | wc -l)" = 5 ] || die "sysusers.d gives two accounts one uid"
grep -qE "^docker:x:4242:\$" "$sysroot/etc/group" || die "sysusers.d puts an account into the docker group"
uid=$(id -u "$user")
gid=$(id -g "$user")
systemd-analyze verify /lib/systemd/system/roundtable-sandbox-*.socket /lib/systemd/system/roundtable-sandbox-*.service ||
	die "systemd-analyze verify of the installed units"
for d in statd runnerd brokerd launcher@; do
	systemd-analyze security --offline=yes --no-pager "/lib/systemd/system/roundtable-sandbox-$d.service" 2>/dev/null |
		grep 'Overall exposure' || true
done
launcher_exe=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' /lib/systemd/system/roundtable-sandbox-launcher@.service)
[ -x "$launcher_exe" ] || die "the launcher unit's program $launcher_exe is not installed"
du -sk /usr/sbin/roundtable-sandbox-* /usr/bin/roundtable-sandbox /usr/lib/roundtable-sandbox \
	/lib/systemd/system/roundtable-sandbox-* /usr/share/man/man?/roundtable-sandbox* | awk '{s += $1} END {print "installed footprint: " s " KiB"}'

step "configure the installed service"
"$srcdir/tests/fakes/make-ca.sh" "$cadir"
# The record holds every upstream request, key and guest text included: root's alone.
install -m 0600 /dev/null "$work/model.jsonl"
python3 "$srcdir/tests/fakes/fake_model.py" --port 0 --cert "$cadir/server.pem" --key "$cadir/server.key" \
	--record "$work/model.jsonl" >"$work/fake.out" 2>"$work/fake.err" &
fake_pid=$!
for _ in $(seq 100); do grep -q '^PORT ' "$work/fake.out" && break; sleep 0.1; done
port=$(awk '/^PORT /{print $2}' "$work/fake.out")
[ -n "$port" ] || die "the fake model endpoint did not start"
# The example, with the two required keys set, as an operator of the previous release
# wrote it: that release's example had no "accounts", "uid" or "gid" (single-account
# mode). The upgrade below moves it.
python3 - "$port" "$cadir/ca.pem" "$tag" <<'EOF'
import json, sys
with open("/etc/roundtable-sandbox/sandbox.json.example") as f:
    c = json.load(f)
for k in ("accounts", "uid", "gid"):
    c.pop(k)
c["model"] = "fake-model"
c["modelUrl"] = f"https://localhost:{sys.argv[1]}/v1/chat/completions"
c["caFile"] = sys.argv[2]
c["image"] = sys.argv[3]
with open("/etc/roundtable-sandbox/sandbox.json", "w") as f:
    json.dump(c, f, indent=2)
EOF
chown "root:$gid" /etc/roundtable-sandbox/sandbox.json
chmod 0640 /etc/roundtable-sandbox/sandbox.json
key="sk-pkg-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
(umask 077 && printf '%s\n' "$key" >/etc/roundtable-sandbox/model-api-key)
# What the units would do: socket directory, runRoot, state directories, and the
# credential systemd copies for brokerd (LoadCredential=model-api-key:...).
install -d -m 0755 -o "$uid" -g "$gid" /run/roundtable-sandbox
install -d -m 0700 -o "$uid" -g "$gid" /run/roundtable-sandbox/turns
install -d -m 0755 /var/lib/roundtable-sandbox
install -d -m 0700 -o "$uid" -g "$gid" /var/lib/roundtable-sandbox/state /var/lib/roundtable-sandbox/workspaces
creds="$work/credentials"
install -d -m 0500 -o "$uid" -g "$gid" "$creds"
install -m 0400 -o "$uid" -g "$gid" /etc/roundtable-sandbox/model-api-key "$creds/model-api-key"

step "image build with the installed CLI"
roundtable-sandbox image build >"$work/image.log" 2>&1 || { tail -n 20 "$work/image.log"; die "image build"; }

step "start the installed daemons as $user (single-account mode, as the previous release)"
# As roundtable-sandbox(7) says for a start without systemd: the account's own group as
# the primary one, and the docker group for runnerd alone (runuser -g GROUP -G docker
# does the same; setpriv is used here for --clear-groups). Logs are appended to, so the
# key and payload checks below cover every start. ACCOUNT is the one each daemon runs as.
start() { # NAME ACCOUNT EXTRA-SETPRIV-ARGS...
	local name=$1 account=$2
	shift 2
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 CREDENTIALS_DIRECTORY="$creds" \
		setpriv --reuid="$(id -u "$account")" --regid="$(id -g "$account")" "$@" -- \
		"/usr/sbin/roundtable-sandbox-$name" >>"$work/$name.log" 2>&1 </dev/null &
	pids+=($!)
}
# single: every daemon as the service account; accounts: each as its own.
mode=single
start_all() {
	rm -f /run/roundtable-sandbox/control.sock /run/roundtable-sandbox/runnerd.sock /run/roundtable-sandbox/brokerd.sock
	if [ $mode = single ]; then
		start brokerd "$user" --clear-groups
		start runnerd "$user" --groups=docker
	else
		start brokerd "$broker" --clear-groups
		start runnerd "$runner" --groups=docker
	fi
	start statd "$user" --clear-groups
	for _ in $(seq 150); do
		[ -S /run/roundtable-sandbox/control.sock ] && [ -S /run/roundtable-sandbox/runnerd.sock ] &&
			[ -S /run/roundtable-sandbox/brokerd.sock ] && return 0
		sleep 0.1
	done
	tail -n 5 "$work"/*d.log
	die "the installed daemons did not create their sockets"
}
stop_all() {
	local p st
	for p in "${pids[@]}"; do kill -TERM "$p"; done
	for p in "${pids[@]}"; do
		st=0
		wait "$p" || st=$?
		[ "$st" -eq 0 ] || die "a daemon exited with status $st on SIGTERM"
	done
	pids=()
}
# What must come through an upgrade or a removal untouched: the operator's files, the
# state file and every workspace file (path, owner, mode, contents).
snapshot() {
	{
		sha256sum /etc/roundtable-sandbox/sandbox.json /etc/roundtable-sandbox/model-api-key
		find /var/lib/roundtable-sandbox -printf '%p %u:%g %m %y\n' | sort
		find /var/lib/roundtable-sandbox -type f -exec sha256sum {} + | sort
	} 2>&1
}
# What must come through the move to accounts mode: the key, the state file, every
# workspace file's contents and the paths (owners and the workspaces' modes change).
contents() {
	{
		sha256sum /etc/roundtable-sandbox/model-api-key
		find /var/lib/roundtable-sandbox -printf '%p %y\n' | sort
		find /var/lib/roundtable-sandbox -type f -exec sha256sum {} + | sort
	} 2>&1
}
start_all

step "doctor"
doctor_out=$(roundtable-sandbox doctor) || { echo "$doctor_out"; tail -n 5 "$work"/*.log; die "doctor found problems"; }
echo "$doctor_out"
# The layout the shipped units expect, in single-account mode: that is the one warning.
grep -q '^summary: .* 1 warnings, 0 failed$' <<<"$doctor_out" && grep -q '^warn: accounts: single-account mode' <<<"$doctor_out" ||
	die "doctor should warn about single-account mode and nothing else"

step "real turns through the installed binaries"
roundtable-sandbox on pkg-channel
reply=$(roundtable-sandbox say pkg-channel --author 1001 --name Alice "remember that the blue key opens the shed") ||
	{ tail -n 20 "$work"/*.log; die "say failed"; }
[ "$reply" = "I will remember that." ] || die "unexpected reply: $reply"
reply=$(roundtable-sandbox say pkg-channel --author 1001 --name Alice "what do you remember?") || die "second say failed"
grep -q "the blue key opens the shed" <<<"$reply" || die "the second turn did not recall the memory: $reply"
grep -qF "\"authorization\": \"Bearer $key\"" "$work/model.jsonl" || die "the model endpoint never saw the real key"
for d in statd runnerd brokerd; do
	! grep -qF "$key" "$work/$d.log" || die "the model key appears in $d's log"
	! grep -qF "blue key opens" "$work/$d.log" || die "guest text appears in $d's log"
done
echo "two turns answered; the upstream saw the key from the credential"

step "upgrade to a newer build of the package: an account per role"
stop_all
# The same files under a higher version: what is exercised is the maintainer scripts and
# dpkg's handling of the installed files, not a code change.
upver="$(dpkg-deb -f "$deb" Version)+upgradetest1"
dpkg-deb -R "$deb" "$work/upgrade"
sed -i "s/^Version: .*/Version: $upver/" "$work/upgrade/DEBIAN/control"
dpkg-deb -b "$work/upgrade" "$work/upgrade.deb" >/dev/null
before=$(contents)
grep -q '/var/lib/roundtable-sandbox/workspaces/[0-9a-f]\{64\}/.sandbox/memory.json' <<<"$before" ||
	die "no workspace memory file to carry through the upgrade"
cp -p /etc/roundtable-sandbox/sandbox.json "$work/sandbox.json.before"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$work/upgrade.deb" >"$work/upgrade.log" 2>&1 ||
	{ cat "$work/upgrade.log"; die "apt-get install of the upgrade"; }
cat "$work/upgrade.log" | grep '^roundtable-sandbox:' || true
[ "$(dpkg-query -W -f='${Version}' roundtable-sandbox)" = "$upver" ] || die "the upgrade did not install $upver"
[ "$(id -u "$user")" = "$uid" ] && [ "$(id -g "$user")" = "$gid" ] || die "the upgrade changed the service account"
diff <(echo "$before") <(contents) || die "the upgrade changed the key, the state file or a workspace's contents"
# The config: the three keys in front, everything else byte for byte, the old file kept.
cmp -s "$work/sandbox.json.before" /etc/roundtable-sandbox/sandbox.json.dpkg-single-account ||
	die "the upgrade did not keep the previous config as sandbox.json.dpkg-single-account"
added=$(diff "$work/sandbox.json.before" /etc/roundtable-sandbox/sandbox.json | grep '^[<>]' || true)
[ "$added" = ">   \"accounts\": {\"broker\": \"$broker\", \"runner\": \"$runner\"},
>   \"uid\": \"$guest\",
>   \"gid\": \"$guest\"," ] || die "the config changed beyond the three keys: $added"
for a in "$user" "$broker" "$runner"; do
	runuser -u "$a" -- test -r /etc/roundtable-sandbox/sandbox.json || die "$a cannot read the config after the upgrade"
done
! runuser -u "$guest" -- test -r /etc/roundtable-sandbox/sandbox.json || die "the guest account can read the config"
# What the containers wrote is the guest's now; the workspace directories stay statd's.
while read -r f; do
	[ "$(stat -c %U "$f")" = "$guest" ] || die "$f is not the guest account's after the upgrade"
done < <(find /var/lib/roundtable-sandbox/workspaces -mindepth 2)
find /var/lib/roundtable-sandbox/workspaces -mindepth 1 -maxdepth 1 ! -user "$user" | grep . &&
	die "a workspace directory is no longer the service account's"
for w in /var/lib/roundtable-sandbox/workspaces/*; do
	[ "$(stat -c %a "$w")" = 1770 ] && getfacl -cpn "$w" | grep -qx "user:$(id -u "$guest"):rwx" ||
		die "$w is not shared with the guest account"
done
echo "upgraded to $upver; the config names the accounts; state, key and workspace contents intact"

step "the installed daemons as their accounts"
mode=accounts
# What the socket units would do: here each daemon binds its own socket, so the runtime
# directory lets runnerd's and brokerd's accounts create theirs (README, "by hand").
install -d -m 1750 -o "$uid" -g "$gid" /run/roundtable-sandbox
setfacl -m "u:$runner:rwx,u:$broker:rwx" /run/roundtable-sandbox
chown "$runner:$runner" /run/roundtable-sandbox/turns
chown -R "$broker:$broker" "$creds"
start_all
doctor_out=$(roundtable-sandbox doctor) || { echo "$doctor_out"; tail -n 5 "$work"/*.log; die "doctor found problems"; }
echo "$doctor_out"
grep -q '^summary: .* 0 warnings, 0 failed$' <<<"$doctor_out" || die "doctor warns about the upgraded installation"
for d in statd:$user runnerd:$runner brokerd:$broker; do
	pid=$(pgrep -x -f "/usr/sbin/roundtable-sandbox-${d%%:*}" | head -n1)
	[ "$(awk '/^Uid:/{print $2}' "/proc/$pid/status")" = "$(id -u "${d#*:}")" ] || die "${d%%:*} does not run as ${d#*:}"
	[ "$(stat -c %u "/proc/$pid/environ")" = 0 ] || die "${d%%:*} is dumpable"
done
roundtable-sandbox status pkg-channel | grep -qx "mode	on" || die "the channel is no longer on after the upgrade"
reply=$(roundtable-sandbox say pkg-channel --author 1001 --name Alice "what do you remember?") ||
	{ tail -n 20 "$work"/*.log; die "say after the upgrade failed"; }
grep -q "the blue key opens the shed" <<<"$reply" || die "the turn after the upgrade lost the memory: $reply"
reply=$(roundtable-sandbox say pkg-channel --author 1001 --name Alice "remember that the red key opens the gate") ||
	die "say (store) after the upgrade failed"
reply=$(roundtable-sandbox say pkg-channel --author 1001 --name Alice "what do you remember?") || die "say (recall) failed"
grep -q "the red key opens the gate" <<<"$reply" || die "the memory stored after the upgrade was not recalled: $reply"
echo "the daemons run as their accounts; the memory stored before the upgrade was recalled, a new one replaced it"
stop_all
# Under a real systemd, with the units' own accounts (see the script).
RTS_MODEL_RECORD="$work/model.jsonl" "$srcdir/scripts/ci-systemd.sh" || die "the units under systemd (scripts/ci-systemd.sh)"

step "remove, then purge"
stop_all
for d in statd runnerd brokerd; do
	! grep -qF "$key" "$work/$d.log" || die "the model key appears in $d's log"
	! grep -qF "blue key opens" "$work/$d.log" || die "guest text appears in $d's log"
done
inst=$(python3 -c 'import hashlib; print(hashlib.sha256(b"/var/lib/roundtable-sandbox/state/channels.json").hexdigest()[:12])')
left=$(/usr/bin/docker ps -a -q --filter "label=io.roundtable-sandbox.installation=$inst")
[ -z "$left" ] || die "containers left behind: $left"
before=$(snapshot)
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q roundtable-sandbox >"$work/remove.log" 2>&1 ||
	{ cat "$work/remove.log"; die "apt-get remove"; }
[ ! -e /usr/sbin/roundtable-sandbox-statd ] || die "remove left the daemons installed"
diff <(echo "$before") <(snapshot) || die "remove (not purge) touched the configuration, the state or a workspace"
echo "removed; configuration, state and workspaces kept for a reinstall"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q roundtable-sandbox >"$work/purge.log" 2>&1 ||
	{ cat "$work/purge.log"; die "apt-get purge"; }
for p in /usr/bin/roundtable-sandbox /usr/sbin/roundtable-sandbox-statd /usr/lib/roundtable-sandbox \
	/lib/systemd/system/roundtable-sandbox-statd.service /etc/roundtable-sandbox /var/lib/roundtable-sandbox \
	/run/roundtable-sandbox; do
	[ ! -e "$p" ] || die "$p is still there after purge"
done
# No process runs one of the package's programs (a removed binary shows as "(deleted)").
for exe in /proc/[0-9]*/exe; do
	t=$(readlink "$exe" 2>/dev/null) || continue
	case $t in
	/usr/sbin/roundtable-sandbox-* | /usr/bin/roundtable-sandbox* | */roundtable-sandbox/roundtable-sandbox-launcher*)
		die "still running: ${exe%/exe} ($t)" ;;
	esac
done
echo "purged; nothing left running"
step "passed"
