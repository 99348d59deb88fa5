#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make check: the generated systemd units and the example configuration.
#   - brokerd's unit may make no namespace and mount nothing: host tools run in the launcher
#     unit (roundtable-sandbox-launcher.socket and @.service), which alone may;
#   - the units carry the sandboxing DESIGN.md section 2 asks of each daemon (and nothing a
#     daemon must not have: no network for statd and runnerd, the credential for brokerd
#     alone, writable directories only where the daemon writes);
#   - the paths in the units are the defaults the programs compile in (common/sock.h,
#     common/conf.c), and the example configuration spells out the same defaults and loads
#     with the real loader;
#   - `systemd-analyze verify` accepts them (when systemd-analyze exists), with ExecStart=
#     pointed at the programs just built; `systemd-analyze security --offline` scores are
#     printed for the log.
# Runs from the build directory; $srcdir is the source directory (automake sets it).
set -eu
srcdir=${srcdir:-.}
failed=0
fail() {
	echo "FAIL: $*"
	failed=1
}

unit() { echo "systemd/roundtable-sandbox-$1"; }

# has FILE LINE: FILE has exactly this line; lacks FILE REGEX: no line matches.
has() { grep -qxF -- "$2" "$1" || fail "$1 lacks the line '$2'"; }
lacks() { if grep -qE -- "$2" "$1"; then fail "$1 must not match '$2'"; fi; }

runtime=$(sed -n 's/^#define RTS_DEFAULT_RUNTIME_DIR "\(.*\)"$/\1/p' "$srcdir/common/sock.h")
run_root=$(sed -n 's/.*c->run_root = rts_xstrdup("\(.*\)");/\1/p' "$srcdir/common/conf.c")
ws_root=$(sed -n 's/.*c->workspace_root = rts_xstrdup("\(.*\)");/\1/p' "$srcdir/common/conf.c")
state_file=$(sed -n 's/.*c->state_file = rts_xstrdup("\(.*\)");/\1/p' "$srcdir/common/conf.c")
[ -n "$runtime" ] && [ -n "$run_root" ] && [ -n "$ws_root" ] && [ -n "$state_file" ] ||
	fail "cannot read the compiled-in defaults from common/sock.h and common/conf.c"
[ "$run_root" = "$runtime/turns" ] || fail "runRoot default $run_root is not RuntimeDirectory $runtime/turns"
[ "$ws_root" = /var/lib/roundtable-sandbox/workspaces ] || fail "workspaceRoot default $ws_root is not the unit's StateDirectory"
[ "$(dirname "$state_file")" = /var/lib/roundtable-sandbox/state ] || fail "stateFile default $state_file is not in the unit's StateDirectory"

for d in statd runnerd brokerd; do
	s=$(unit "$d.service")
	[ -f "$s" ] || { fail "$s was not generated"; continue; }
	grep -q '@[A-Za-z_]*@' "$s" && fail "$s has unsubstituted placeholders"
	has "$s" "Type=notify"
	extra=""
	[ "$d" = brokerd ] && extra=" --launcher-socket $runtime/launcher.sock"
	grep -qE "^ExecStart=/.*/roundtable-sandbox-$d --config /.*/roundtable-sandbox/sandbox.json --runtime-dir $runtime$extra\$" "$s" ||
		fail "$s: ExecStart does not run roundtable-sandbox-$d with --config and --runtime-dir $runtime$extra"
	has "$s" "Requires=roundtable-sandbox-$d.socket"
	lacks "$s" '^PrivateUsers=' # the daemons' ACL entries and peer checks name other accounts' uids
	for line in "NoNewPrivileges=yes" "CapabilityBoundingSet=" "ProtectSystem=strict" "ProtectHome=yes" \
		"PrivateTmp=yes" "PrivateDevices=yes" "ProtectKernelModules=yes" "ProtectControlGroups=yes" \
		"RestrictSUIDSGID=yes" "LockPersonality=yes" "SystemCallArchitectures=native" "UMask=0077"; do
		has "$s" "$line"
	done
	# Host tools run in the launcher unit (checked below): no daemon may make namespaces.
	for line in "ProtectKernelTunables=yes" "ProtectKernelLogs=yes" "RestrictNamespaces=yes" \
		"MemoryDenyWriteExecute=yes"; do
		has "$s" "$line"
	done
	# The daemons install their own libseccomp filter with TSYNC, which needs seccomp(2).
	grep -qE '^SystemCallFilter=@system-service( .*)? seccomp( |$)' "$s" || fail "$s: SystemCallFilter lacks seccomp"
	lacks "$s" '^(AmbientCapabilities|ReadWritePaths|DynamicUser)='
	k=$(unit "$d.socket")
	[ -f "$k" ] || { fail "$k was not generated"; continue; }
done

# An account per daemon (DESIGN.md 8.1); each link socket belongs to the one account that
# connects to it.
for du in statd:roundtable-sandbox runnerd:roundtable-sandbox-runner brokerd:roundtable-sandbox-broker; do
	has "$(unit "${du%%:*}.service")" "User=${du#*:}"
	has "$(unit "${du%%:*}.service")" "Group=${du#*:}"
done
for su in statd:roundtable-sandbox runnerd:roundtable-sandbox brokerd:roundtable-sandbox-runner; do
	has "$(unit "${su%%:*}.socket")" "SocketUser=${su#*:}"
	has "$(unit "${su%%:*}.socket")" "SocketGroup=${su#*:}"
done
has "$(unit statd.service)" "SystemCallFilter=~@privileged @resources"
has "$(unit brokerd.service)" "SystemCallFilter=~@privileged @resources"

s=$(unit statd.service)
has "$s" "PrivateNetwork=yes"
has "$s" "RestrictAddressFamilies=AF_UNIX"
has "$s" "StateDirectory=roundtable-sandbox/state roundtable-sandbox/workspaces"
has "$s" "StateDirectoryMode=0700"
has "$s" "InaccessiblePaths=-/run/docker.sock"
lacks "$s" '^(LoadCredential|SupplementaryGroups|RuntimeDirectory)='
k=$(unit statd.socket)
has "$k" "ListenStream=$runtime/control.sock"
has "$k" "SocketMode=0660"

s=$(unit runnerd.service)
has "$s" "PrivateNetwork=yes"
has "$s" "RestrictAddressFamilies=AF_UNIX"
has "$s" "SupplementaryGroups=docker"
has "$s" "RuntimeDirectory=${run_root#/run/}"
has "$s" "RuntimeDirectoryMode=0700"
# Rich containers outlive runnerd with runRoot/rich-*/ bound in (roundtable-sandbox-runnerd(8)).
has "$s" "RuntimeDirectoryPreserve=yes"
lacks "$s" '^(LoadCredential|StateDirectory)='
k=$(unit runnerd.socket)
has "$k" "ListenSequentialPacket=$runtime/runnerd.sock"
has "$k" "SocketMode=0600"

s=$(unit brokerd.service)
has "$s" "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"
has "$s" "InaccessiblePaths=-/run/docker.sock"
# Host tools go through the launcher unit; brokerd itself mounts nothing and runs nothing.
has "$s" "SystemCallFilter=@system-service seccomp"
for line in "ProtectHostname=yes" "ProcSubset=pid" "Wants=roundtable-sandbox-launcher.socket" \
	"After=roundtable-sandbox-launcher.socket"; do
	has "$s" "$line"
done
lacks "$s" '^(KillMode|ReadWritePaths)='
# Memory: MemoryHigh= at least four times the rich listeners' buffer budget (the unit's
# comment says why), MemoryMax= above it.
budget=$(sed -n 's/^#define RTS_RICH_BUFFER_BUDGET (\([0-9]*\)u \* 1024u \* 1024u)$/\1/p' "$srcdir/common/limits.h")
high=$(sed -n 's/^MemoryHigh=\([0-9]*\)M$/\1/p' "$s")
max=$(sed -n 's/^MemoryMax=\([0-9]*\)G$/\1/p' "$s")
if [ -z "$budget" ] || [ -z "$high" ] || [ -z "$max" ]; then
	fail "$s: no MemoryHigh=<N>M and MemoryMax=<N>G, or no RTS_RICH_BUFFER_BUDGET in common/limits.h"
elif [ "$high" -lt $((4 * budget)) ] || [ $((max * 1024)) -le "$high" ]; then
	fail "$s: MemoryHigh=${high}M is under four times the ${budget} MiB buffer budget, or MemoryMax=${max}G not above it"
fi
lacks "$s" '^SystemCallFilter=.*@mount'
grep -qE '^LoadCredential=model-api-key:/.*/roundtable-sandbox/model-api-key$' "$s" || fail "$s: no LoadCredential=model-api-key"
lacks "$s" '^(PrivateNetwork|SupplementaryGroups|StateDirectory|RuntimeDirectory)='
k=$(unit brokerd.socket)
has "$k" "ListenSequentialPacket=$runtime/brokerd.sock"
has "$k" "SocketMode=0600"

# brokerd's launcher (brokerd/launcher.h): a socket only the broker account may use, and a
# service per connection that holds what bwrap needs and nothing of the credentials.
k=$(unit launcher.socket)
s=$(unit launcher@.service)
[ -f "$k" ] && [ -f "$s" ] || fail "the launcher's units were not generated"
has "$k" "ListenSequentialPacket=$runtime/launcher.sock"
has "$k" "Accept=yes"
has "$k" "SocketUser=roundtable-sandbox-broker"
has "$k" "SocketGroup=roundtable-sandbox-broker"
has "$k" "SocketMode=0600"
grep -q '@[A-Za-z_]*@' "$s" && fail "$s has unsubstituted placeholders"
grep -qE "^ExecStart=/.*/roundtable-sandbox/roundtable-sandbox-launcher --config /.*/roundtable-sandbox/sandbox.json --runtime-dir $runtime\$" "$s" ||
	fail "$s: ExecStart does not run roundtable-sandbox-launcher with --config and --runtime-dir $runtime"
[ -x "brokerd/roundtable-sandbox-launcher" ] || fail "brokerd/roundtable-sandbox-launcher was not built"
has "$s" "User=roundtable-sandbox-broker"
has "$s" "Group=roundtable-sandbox-broker"
for line in "NoNewPrivileges=yes" "CapabilityBoundingSet=" "ProtectSystem=strict" "ProtectHome=yes" \
	"PrivateTmp=yes" "PrivateDevices=yes" "ProtectKernelModules=yes" "ProtectControlGroups=yes" \
	"RestrictSUIDSGID=yes" "LockPersonality=yes" "SystemCallArchitectures=native" "UMask=0077" \
	"RestrictNamespaces=user mnt pid ipc uts cgroup" "SystemCallFilter=@system-service @mount" \
	"InaccessiblePaths=-/run/credentials -/run/docker.sock" "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" \
	"StandardInput=null"; do
	has "$s" "$line"
done
lacks "$s" '^(LoadCredential|SetCredential|ImportCredential|SupplementaryGroups|PrivateUsers|StateDirectory|RuntimeDirectory|Restart)='

# The four accounts; none is put in the docker group: only runnerd's unit adds it.
c=systemd/roundtable-sandbox.conf
has "$c" 'u roundtable-sandbox - "roundtable-sandbox service account" - -'
has "$c" 'u roundtable-sandbox-broker - "roundtable-sandbox credential broker" - -'
has "$c" 'u roundtable-sandbox-runner - "roundtable-sandbox container runner" - -'
has "$c" 'u roundtable-sandbox-guest - "roundtable-sandbox turn containers" - -'
lacks "$c" '^m '

# The example configuration loads and spells out the compiled-in defaults. It names the
# package's accounts, which the loader resolves and a build host need not have: the check
# loads a copy naming the base system's accounts (base-passwd) instead.
ex="$srcdir/etc/sandbox.json.example"
tmpex=$(mktemp)
sed -e 's/"roundtable-sandbox-broker"/"daemon"/' -e 's/"roundtable-sandbox-runner"/"bin"/' \
	-e 's/"uid": "roundtable-sandbox-guest"/"uid": "nobody"/' -e 's/"gid": "roundtable-sandbox-guest"/"gid": "nogroup"/' \
	"$ex" >"$tmpex"
out=$(cli/roundtable-sandbox --config "$tmpex" doctor --offline 2>&1 || true)
rm -f "$tmpex"
printf '%s\n' "$out" | grep -q "^ok: config: " || fail "the example configuration does not load: $(printf '%s\n' "$out" | head -1)"
for kv in "\"runRoot\": \"$run_root\"" "\"workspaceRoot\": \"$ws_root\"" "\"stateFile\": \"$state_file\"" \
	'"accounts": {"broker": "roundtable-sandbox-broker", "runner": "roundtable-sandbox-runner"}' \
	'"uid": "roundtable-sandbox-guest"' '"gid": "roundtable-sandbox-guest"'; do
	grep -qF -- "$kv" "$ex" || fail "$ex lacks $kv"
done

if command -v systemd-analyze >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for d in statd runnerd brokerd; do
		cp "$(unit "$d.socket")" "$tmp/"
		# The installed path does not exist yet: verify with the program just built.
		sed "s|^ExecStart=[^ ]*|ExecStart=$PWD/$d/roundtable-sandbox-$d|" "$(unit "$d.service")" \
			>"$tmp/roundtable-sandbox-$d.service"
	done
	cp "$(unit launcher.socket)" "$tmp/"
	sed "s|^ExecStart=[^ ]*|ExecStart=$PWD/brokerd/roundtable-sandbox-launcher|" "$(unit launcher@.service)" \
		>"$tmp/roundtable-sandbox-launcher@.service"
	if ! out=$(cd "$tmp" && systemd-analyze verify --man=no ./*.socket ./*.service 2>&1) || [ -n "$out" ]; then
		fail "systemd-analyze verify: $out"
	fi
	for d in statd runnerd brokerd launcher@; do
		(cd "$tmp" && systemd-analyze security --offline=yes --no-pager "./roundtable-sandbox-$d.service" 2>/dev/null |
			grep 'Overall exposure' | sed "s/^/roundtable-sandbox-$d: /") || true
	done
else
	echo "systemd-analyze not installed: verify skipped"
fi

[ "$failed" -eq 0 ] && echo "units: ok"
exit "$failed"
