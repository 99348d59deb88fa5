#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The installed systemd units under a real systemd: boots the host's own systemd
# (/lib/systemd/systemd) as PID 1 in a throwaway Docker container and checks that
#   - only the four .socket units start (the daemons' three and brokerd's launcher's); the
#     first CLI connection socket-activates statd, the first turn then activates runnerd
#     and brokerd, and brokerd's connection an instance of roundtable-sandbox-launcher@;
#   - `roundtable-sandbox doctor` passes in there;
#   - a turn runs in a turn container started by the HOST dockerd and answers; a turn whose
#     model asks for a host tool (a tool this script adds to a copy of the config, bound
#     over it in the container) has it run by the launcher unit, as the broker account,
#     with the python3 interpreter, and unable to read brokerd's credential; brokerd's unit
#     cannot make a namespace (a one-shot with its settings tries), the launcher's can
#     (bwrap, tini, python3, node and sh under its settings); brokerd starts no process;
#   - each daemon runs as its own packaged account (statd roundtable-sandbox, runnerd
#     roundtable-sandbox-runner, brokerd roundtable-sandbox-broker; the config names them:
#     accounts mode) under its unit's sandbox (NoNewPrivs 1, Seccomp 2 with the unit's
#     filter and the daemon's own, no capabilities, not dumpable), brokerd has its key from
#     LoadCredential=, statd and brokerd cannot reach /run/docker.sock, runnerd can; what
#     the turns wrote in the workspace belongs to the guest account;
#   - the journal has the turn's structured fields and neither the key nor guest text;
#   - brokerd's broker decisions are in the journal (journalctl MESSAGE_ID=...), and
#     `roundtable-sandbox metrics` is answered by all three daemons;
#   - `systemctl stop` of services and sockets leaves no turn container and no run dir.
#
# Preconditions (what scripts/ci-package.sh leaves just before its upgrade step), as root
# on Debian 12 with a Docker engine running:
#   - the roundtable-sandbox package is installed, /etc/roundtable-sandbox/sandbox.json is
#     configured with runRoot, workspaceRoot and stateFile at their default locations, the
#     key is in /etc/roundtable-sandbox/model-api-key, the model endpoint of the config
#     answers on this host (it is reached from the container through the host network);
#   - the worker image of the config's "image" exists in the host's dockerd;
#   - no roundtable-sandbox daemon runs (started by hand or otherwise).
# RTS_MODEL_RECORD=FILE (optional): the fake model endpoint's request record
# (tests/fakes/fake_model.py --record); then the upstream request of this run's turn must
# carry the key.
#
# It changes nothing it does not put back: its container, image tag and temporary files
# are removed at exit, the channel it used is switched off and its workspace removed,
# and directories it had to create (or that systemd removed, runRoot) are restored.
# It never stops dockerd and touches no other container or image. Exits non-zero with a
# message on the first failure.
set -euo pipefail

user=roundtable-sandbox
broker=roundtable-sandbox-broker
runner=roundtable-sandbox-runner
guest=roundtable-sandbox-guest
conf=/etc/roundtable-sandbox/sandbox.json
keyfile=/etc/roundtable-sandbox/model-api-key
rundir=/run/roundtable-sandbox
statedir=/var/lib/roundtable-sandbox
units="roundtable-sandbox-statd roundtable-sandbox-runnerd roundtable-sandbox-brokerd"
launcher=roundtable-sandbox-launcher
suffix="$$-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
ctr=roundtable-sandbox-systemd-ci-$suffix
img=roundtable-sandbox-systemd-ci:$suffix
channel=systemd-ci-$suffix
marker="guest-marker-$suffix"
started=$(date +%s)

say() { printf 'ci-systemd: %s\n' "$*"; }
die() {
	echo "ci-systemd: FAILED: $*" >&2
	exit 1
}
# docker exec into the booted container, bounded so that a hang fails instead of blocking CI.
dx() { timeout 120 docker exec "$ctr" "$@"; }

[ "$(id -u)" -eq 0 ] || die "run this as root"
[ "$(dpkg-query -W -f='${db:Status-Status}' roundtable-sandbox 2>/dev/null)" = installed ] ||
	die "the roundtable-sandbox package is not installed"
[ -x /lib/systemd/systemd ] || die "no /lib/systemd/systemd on this host"
[ -r "$conf" ] && [ -s "$keyfile" ] || die "configure $conf and $keyfile first (see README.md)"
docker version >/dev/null 2>&1 || die "the Docker daemon does not answer"
for exe in /proc/[0-9]*/exe; do
	case $(readlink "$exe" 2>/dev/null) in
	/usr/sbin/roundtable-sandbox-*) die "a roundtable-sandbox daemon is running (${exe%/exe}); stop it first" ;;
	esac
done
uid=$(id -u "$user") && gid=$(id -g "$user") || die "no service account $user"
for a in $broker $runner $guest; do id "$a" >/dev/null || die "no account $a (the package's sysusers.d file)"; done
grep -q '"accounts"' "$conf" || die "$conf is in single-account mode; the packaged units need \"accounts\" (roundtable-sandbox(7))"
docker_gid=$(getent group docker | cut -d: -f3)
[ -n "$docker_gid" ] || die "no docker group"

# The config values this needs; the bind mounts below assume the default locations.
cfg_image="" cfg_caFile="" cfg_runRoot="" cfg_workspaceRoot="" cfg_stateFile=""
eval "$(python3 - "$conf" <<'EOF'
import json, shlex, sys
c = json.load(open(sys.argv[1]))
for k, d in (("image", "roundtable-sandbox:local"), ("caFile", ""),
             ("runRoot", "/run/roundtable-sandbox/turns"),
             ("workspaceRoot", "/var/lib/roundtable-sandbox/workspaces"),
             ("stateFile", "/var/lib/roundtable-sandbox/state/channels.json")):
    print(f"cfg_{k}={shlex.quote(str(c.get(k, d)))}")
EOF
)"
[ "$cfg_runRoot" = $rundir/turns ] && [ "$cfg_workspaceRoot" = $statedir/workspaces ] &&
	[ "$cfg_stateFile" = $statedir/state/channels.json ] ||
	die "runRoot, workspaceRoot and stateFile must be at their default locations (the units' own)"
docker image inspect "$cfg_image" >/dev/null 2>&1 || die "the worker image $cfg_image does not exist"
inst=$(printf '%s' "$cfg_stateFile" | sha256sum | cut -c1-12)
key=$(cat "$keyfile")
key=${key%%$'\n'*}

# Seccomp kills and logs of the service account's installed programs (the daemons and
# what they run from /usr: the docker CLI, tools) land in the kernel log as audit
# type=1326: count them now, show any new one at the end. (Test builds elsewhere on this
# host run as the same account from other paths; they are not counted.)
uids="$uid|$(id -u $broker)|$(id -u $runner)"
seccomp_audit() { dmesg 2>/dev/null | grep -E "type=1326 .* uid=($uids) gid=.* exe=\"/usr/" || true; }
audit_before=$(seccomp_audit | wc -l)
work=$(mktemp -d /tmp/rts-systemd-ci-XXXXXX)
created_dirs=()
runroot_before=""
[ -d "$rundir/turns" ] && runroot_before=$(stat -c '%u %g %a' "$rundir/turns")
# statd names the channel's workspace by the SHA-256 of the channel name (rts_channel_hash).
chan_hash=$(printf '%s' "$channel" | sha256sum | cut -d' ' -f1)
channel_on=""
cleanup() {
	local st=$?
	set +e
	if [ "$st" -ne 0 ] && docker inspect "$ctr" >/dev/null 2>&1; then
		echo "---- journal of the units (last 40 lines) ----" >&2
		timeout 30 docker exec "$ctr" journalctl --no-pager -n 40 -u roundtable-sandbox-statd.service \
			-u roundtable-sandbox-runnerd.service -u roundtable-sandbox-brokerd.service >&2
		timeout 30 docker exec "$ctr" systemctl --no-pager --failed >&2
		seccomp_audit | tail -n +"$((audit_before + 1))" >&2
	fi
	if [ -n "$channel_on" ] && docker inspect "$ctr" >/dev/null 2>&1; then
		timeout 30 docker exec "$ctr" roundtable-sandbox off "$channel" >/dev/null 2>&1
	fi
	if docker inspect "$ctr" >/dev/null 2>&1; then
		# SIGRTMIN+3 (the container's stop signal) makes systemd stop every unit and halt.
		docker stop -t 60 "$ctr" >/dev/null
		# Turn containers are runnerd's to remove; one left after a failure is removed
		# here only because this run created it (created after the systemd container).
		for c in $(docker ps -a -q --filter "label=io.roundtable-sandbox.installation=$inst" --filter "since=$ctr"); do
			docker rm -f "$c" >/dev/null
		done
		docker rm -f "$ctr" >/dev/null
	fi
	docker image rm "$img" >/dev/null 2>&1
	if [ -d "$statedir/workspaces/$chan_hash" ]; then
		rm -rf "${statedir:?}/workspaces/$chan_hash"
	fi
	# systemd removes runRoot (RuntimeDirectory=) when runnerd stops: put it back as it was.
	if [ -n "$runroot_before" ] && [ ! -d "$rundir/turns" ]; then
		read -r o g m <<<"$runroot_before"
		install -d -o "$o" -g "$g" -m "$m" "$rundir/turns"
	fi
	for ((i = ${#created_dirs[@]} - 1; i >= 0; i--)); do rm -rf "${created_dirs[i]}"; done
	rm -rf "$work"
	exit "$st"
}
trap cleanup EXIT

# Host directories the container binds at the same paths: the host's dockerd resolves the
# turn containers' bind sources (runRoot/<turn>, workspaceRoot/<hash>) on the host.
for d in $rundir $statedir; do
	if [ ! -d "$d" ]; then
		install -d -m 0755 "$d"
		created_dirs+=("$d")
	fi
done

# caFile: brokerd's unit has PrivateTmp= and ProtectHome=, so a CA file under /tmp,
# /var/tmp, /home, /root or /run/user is invisible to it (doctor warns about that). The
# config is used as it is, so such a caFile is a failed precondition, not worked around.
# Any other location outside /usr and /etc is bound into the container at the same path.
ca_mounts=()
if [ -n "$cfg_caFile" ]; then
	case $cfg_caFile in
	/tmp/* | /var/tmp/* | /home/* | /root/* | /run/user/*)
		die "caFile $cfg_caFile is under a directory brokerd's unit hides (PrivateTmp=/ProtectHome=); move it" ;;
	/usr/* | /etc/*) ;;
	*) ca_mounts=(-v "$cfg_caFile:$cfg_caFile:ro") ;;
	esac
fi

# Units of this run, first in the unit search path ($SYSTEMD_UNIT_PATH with a trailing
# colon keeps the usual path after it, so these win even over /etc/systemd/system): the
# boot target that pulls in the four sockets and nothing else, and masks for what must
# never run here. docker.service and containerd.service above all: runnerd's unit
# Wants=docker.service, and a second dockerd must never start. The rest of the list is
# sysinit.target's units that would act on the shared kernel (udev, sysctl, modules,
# binfmt, AppArmor, clock) or fail on the read-only /etc.
mkdir -p "$work/units" "$work/root"
cat >"$work/units/roundtable-sandbox-ci.target" <<'EOF'
[Unit]
Description=roundtable-sandbox CI: the four sockets
Requires=roundtable-sandbox-statd.socket roundtable-sandbox-runnerd.socket roundtable-sandbox-brokerd.socket roundtable-sandbox-launcher.socket
After=roundtable-sandbox-statd.socket roundtable-sandbox-runnerd.socket roundtable-sandbox-brokerd.socket roundtable-sandbox-launcher.socket
AllowIsolate=yes
EOF
for u in docker.service docker.socket containerd.service apparmor.service systemd-timesyncd.service \
	systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-udev-trigger.service \
	systemd-udev-settle.service systemd-modules-load.service systemd-sysctl.service systemd-binfmt.service \
	proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount systemd-hwdb-update.service \
	ldconfig.service systemd-machine-id-commit.service systemd-firstboot.service systemd-random-seed.service \
	systemd-pstore.service systemd-sysusers.service systemd-repart.service systemd-remount-fs.service \
	kmod-static-nodes.service sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
	sys-fs-fuse-connections.mount getty.target console-getty.service cron.service ssh.service ssh.socket; do
	ln -s /dev/null "$work/units/$u"
done

# Seccomp probes: each daemon's unit with ExecStart= replaced by a one-shot that prints its
# own Seccomp_filters (and without the socket, state and runtime directory lines). A daemon
# with more filters than its probe has its own libseccomp filter on top of the unit's.
for d in statd runnerd brokerd; do
	{
		sed -E -e '/^(Requires|After|Wants|Also|WantedBy|Documentation|Type|ExecStart|Restart|RestartSec|RuntimeDirectory|RuntimeDirectoryMode|StateDirectory|StateDirectoryMode)=/d' \
			-e 's/^\[Service\]$/[Service]\nType=oneshot\nExecStart=\/usr\/bin\/grep ^Seccomp_filters: \/proc\/self\/status\nStandardOutput=truncate:\/run\/roundtable-sandbox-ci-probe-'"$d"'.out/' \
			"/lib/systemd/system/roundtable-sandbox-$d.service"
	} >"$work/units/roundtable-sandbox-ci-probe-$d.service"
done

# Host tools (brokerd/toolbox.h) run in the launcher unit, whose settings must let
# bubblewrap build a tool's sandbox (namespaces, mounts, a fresh /proc) and let a
# JavaScript engine run in it, since every setting of the unit reaches the tools too. A
# one-shot with the launcher unit's settings and ExecStart= replaced by the sandbox the
# launcher builds for a tool (same options, tini as PID 1), running python3, node and sh;
# it must print "tool-probe 42 42 ok". Another with brokerd's unit's settings tries to
# make user, mount and PID namespaces and must fail: brokerd's unit has no such rights.
tool_probe_drop='^(Requires|After|Wants|Also|WantedBy|Documentation|Type|ExecStart|Restart|RestartSec|KillMode|LoadCredential|RuntimeDirectory|RuntimeDirectoryMode|StateDirectory|StateDirectoryMode|StandardInput|StandardOutput|StandardError|CollectMode)='
probe_unit() { # UNIT-FILE EXEC-START OUTPUT-NAME
	sed -n '1,/^\[Service\]$/p' "$1" | grep -vE "$tool_probe_drop"
	printf 'Type=oneshot\nStandardOutput=truncate:/run/%s.out\nStandardError=journal\nExecStart=%s\n' "$3" "$2"
	sed -n '/^\[Service\]$/,/^\[Install\]$/p' "$1" | grep -vE "$tool_probe_drop|^\[(Service|Install)\]$"
}
probe_bwrap="/usr/bin/bwrap --unshare-user --unshare-ipc --unshare-pid --unshare-uts --unshare-cgroup-try --disable-userns --die-with-parent --new-session --as-pid-1 --ro-bind / / --dev /dev --proc /proc --chdir / -- /usr/bin/tini -g --"
probe_unit "/lib/systemd/system/$launcher@.service" \
	"$probe_bwrap /bin/sh -c \"p=\$\$(python3 -c 'print(6*7)') && n=\$\$(node -e 'console.log([...Array(7).keys()].reduce((a, b) => a + b, 0) * 2)') && echo x >/dev/null && echo tool-probe \$\$p \$\$n ok\"" \
	roundtable-sandbox-ci-tool-probe >"$work/units/roundtable-sandbox-ci-tool-probe.service"
probe_unit /lib/systemd/system/roundtable-sandbox-brokerd.service "/usr/bin/unshare --user --mount --pid --fork /bin/true" \
	roundtable-sandbox-ci-ns-probe >"$work/units/roundtable-sandbox-ci-ns-probe.service"

# The config the units read in the container: the operator's, plus one host tool that
# reports what it can do (its uid, python3, whether brokerd's credential is readable). A
# copy with the original's owner, mode and ACL, bound over it read-only.
cp -a "$conf" "$work/sandbox.json"
python3 - "$work/sandbox.json" <<'EOF'
import json, sys
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    c = json.load(f)
probe = ("import json, os; P = ['/run/credentials/roundtable-sandbox-brokerd.service/model-api-key', "
         "'/etc/roundtable-sandbox/model-api-key']; "
         "print(json.dumps(dict({p: os.access(p, os.R_OK) for p in P}, uid=os.getuid(), python=6 * 7), sort_keys=True))")
c.setdefault("tools", []).append({"name": "ci_probe", "description": "ci-systemd's host tool probe",
                                  "parameters": {"type": "object"}, "command": ["/usr/bin/python3", "-c", probe],
                                  "timeoutMs": 20000})
with open(path, "r+", encoding="utf-8") as f:
    f.truncate(0)
    json.dump(c, f, indent=2)
EOF

# No registry: the image is FROM scratch plus mount points and Debian 12's merged-/usr
# symlinks; the host's /usr and /etc are bind-mounted read-only. /var stays in the
# container's own writable layer (so /var/run -> ../run exists), /run and /tmp are tmpfs.
(
	cd "$work/root"
	mkdir -p usr etc run tmp var/lib var/log var/tmp proc sys dev
	ln -s ../run var/run
	for l in bin lib lib32 lib64 libx32 sbin; do
		[ -L "/$l" ] && ln -s "$(readlink "/$l")" "$l"
	done
	true
)
tar -C "$work/root" -c . | docker import - "$img" >/dev/null || die "docker import of the boot image"

# Why these options (a test harness container, removed at exit):
#  - systemd needs CAP_SYS_ADMIN and friends to mount, set up the units' namespaces and
#    credentials, and a writable cgroup hierarchy. --privileged would do, but where dockerd
#    lacks a capability in its bounding set (CAP_SYS_RESOURCE in the CI VM) runc refuses
#    --privileged: every capability but that one instead, which also keeps /sys, /proc/sys
#    and the host's devices out of reach. seccomp=unconfined so that the Seccomp lines
#    checked below are the units' and the daemons' filters, not Docker's profile.
#  - --cgroupns=private: systemd sees only its own subtree. Docker still mounts the cgroup
#    file systems read-only without --privileged, so the entry point remounts them
#    read-write (inside the namespace: this container's own cgroup) and then execs
#    systemd as PID 1.
#  - mount --make-rshared /: systemd leaves the root's propagation to the container manager
#    (systemd.io/CONTAINER_INTERFACE) and Docker makes it private; then the credentials
#    systemd sets up in a helper's mount namespace never reach the service, and brokerd
#    finds an empty $CREDENTIALS_DIRECTORY (systemd/systemd#38103). Inside this container's
#    own mount namespace only: the host's mounts are not peers of these.
#  - -t: without a console systemd 252 exits at once with status 255 and no message.
#  - --network host: brokerd reaches the model endpoint on the host's loopback.
#  - /run/docker.sock: runnerd drives the HOST dockerd; no dockerd runs in here.
#  - container=docker: systemd's container mode (units with ConditionVirtualization=!container).
docker run -d -t --name "$ctr" \
	--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
	--cgroupns=private --network host -e container=docker -e SYSTEMD_UNIT_PATH=/run/roundtable-sandbox-ci/units: \
	--stop-signal SIGRTMIN+3 \
	--tmpfs /run:rw,nosuid,nodev,mode=0755 --tmpfs /tmp:rw,nosuid,nodev \
	-v /usr:/usr:ro -v /etc:/etc:ro -v "$work/sandbox.json:$conf:ro" "${ca_mounts[@]}" \
	-v "$work/units:/run/roundtable-sandbox-ci/units:ro" \
	-v $rundir:$rundir -v $statedir:$statedir -v /run/docker.sock:/run/docker.sock \
	"$img" /bin/sh -c 'for d in /sys/fs/cgroup /sys/fs/cgroup/*/; do
			! mountpoint -q "$d" || mount -o remount,bind,rw "$d" || exit 1
		done
		mount --make-rshared / || exit 1
		exec /lib/systemd/systemd --unit=roundtable-sandbox-ci.target' >/dev/null ||
	die "docker run of the systemd container"

# Until PID 1 has created /run/systemd/system, systemctl answers "offline" (not booted
# with systemd); until its private bus socket exists, it cannot even ask. Then --wait
# waits for the boot job to finish.
for _ in $(seq 300); do
	state=$(timeout 120 docker exec "$ctr" systemctl is-system-running --wait 2>&1) || true
	case $state in
	offline | *"Failed to connect to bus"*) sleep 0.2 ;;
	*) break ;;
	esac
done
if [ "$state" != running ]; then
	docker logs "$ctr" 2>&1 | tail -n 30 >&2
	die "systemd did not come up cleanly (is-system-running: $state)"
fi
say "systemd $(dx systemctl --version | awk 'NR==1{print $2}') is PID 1 in container $ctr; boot finished: $state"

# Nothing but the sockets (and journald): no second dockerd, no getty, cron or ssh.
active=$(dx systemctl list-units --no-legend --plain --state=active --type=service,socket | awk '{print $1}')
printf '%s\n' "$active" | sed 's/^/ci-systemd:   active: /'
bad=$(grep -E '^(docker|containerd|getty|console-getty|cron|ssh)' <<<"$active" || true)
[ -z "$bad" ] || die "units that must not run are active: $bad"
procs=$(dx sh -c 'cat /proc/[0-9]*/comm 2>/dev/null' | sort -u)
bad=$(grep -xE 'dockerd|containerd|agetty|cron|sshd' <<<"$procs" || true)
[ -z "$bad" ] || die "processes that must not run in the container: $bad"
for u in docker.service docker.socket containerd.service; do
	[ "$(dx systemctl show -p LoadState --value "$u")" = masked ] || die "$u is not masked in the container"
done
for u in $units; do
	[ "$(dx systemctl is-active "$u.socket")" = active ] || die "$u.socket is not active"
	[ "$(dx systemctl is-active "$u.service" || true)" = inactive ] || die "$u.service runs before any connection"
done
[ "$(dx systemctl is-active "$launcher.socket")" = active ] || die "$launcher.socket is not active"
[ -z "$(dx systemctl list-units --no-legend --plain "$launcher@*.service")" ] || die "a launcher instance runs before brokerd"
say "the four sockets listen; no service runs yet"

# Socket activation: the first CLI connection starts statd alone; statd reaches runnerd
# (and runnerd brokerd) only at the first turn.
dx roundtable-sandbox status >/dev/null || die "roundtable-sandbox status (first connection) failed"
[ "$(dx systemctl is-active roundtable-sandbox-statd.service)" = active ] || die "the first connection did not activate statd"
for u in roundtable-sandbox-runnerd roundtable-sandbox-brokerd; do
	[ "$(dx systemctl is-active "$u.service" || true)" = inactive ] || die "$u.service started before the first turn"
done
say "the first CLI connection activated statd; runnerd and brokerd still inactive"

# A real turn. Host dockerd events for this installation's containers since now prove that
# the host's dockerd ran it.
since=$(date +%s)
record_lines=0
if [ -n "${RTS_MODEL_RECORD:-}" ]; then
	record_lines=$(wc -l <"$RTS_MODEL_RECORD")
fi
channel_on=1
dx roundtable-sandbox on "$channel" >/dev/null || die "roundtable-sandbox on $channel failed"
reply=$(dx roundtable-sandbox say "$channel" --author 1001 --name Alice "remember that the $marker opens the shed") ||
	die "say failed (exit $?)"
[ "$reply" = "I will remember that." ] || die "unexpected reply: $reply"
reply=$(dx roundtable-sandbox say "$channel" --author 1001 --name Alice "what do you remember?") || die "second say failed"
grep -qF "the $marker opens the shed" <<<"$reply" || die "the second turn did not recall the memory: $reply"
# --until one second ahead: the events of the current second are all in (docker events
# then returns by itself at that time).
started_all=$(docker events --since "$since" --until "$(($(date +%s) + 1))" --filter type=container --filter event=start \
	--filter "label=io.roundtable-sandbox.installation=$inst" \
	--format '{{.Actor.Attributes.name}} {{index .Actor.Attributes "io.roundtable-sandbox.spare"}}')
[ -n "$started_all" ] && [ "$(wc -l <<<"$started_all")" -ge 2 ] ||
	die "the host's dockerd reports $(grep -c . <<<"$started_all") turn container starts for installation $inst since $since, not 2: $started_all"
# Warm spares are on by default: a spare's container is named after the spare, not the
# turn that claims it, so the per-turn journal checks below look at the cold turns'
# containers (the first turn of a channel always runs cold).
started_ctrs=$(awk '$2 != "1" {print $1}' <<<"$started_all")
[ -n "$started_ctrs" ] || die "no cold turn container among the starts: $started_all"
for u in $units; do
	[ "$(dx systemctl is-active "$u.service")" = active ] || die "$u.service is not active after a turn"
done
say "two turns answered (store, then recall) in turn containers started by the host's dockerd:"
sed 's/^/ci-systemd:   /' <<<"$started_ctrs"
if [ -n "${RTS_MODEL_RECORD:-}" ]; then
	tail -n +"$((record_lines + 1))" "$RTS_MODEL_RECORD" | grep -qF "\"authorization\": \"Bearer $key\"" ||
		die "the model endpoint did not get the key in this run's requests"
	say "the model endpoint got the key from brokerd's credential"
fi

# A host tool through the launcher unit: the model asks for it, the worker calls the broker,
# brokerd sends RUN to its launcher instance, which runs it in a bwrap sandbox.
reply=$(dx roundtable-sandbox say "$channel" --author 1001 --name Alice "#tools 1 host_ci_probe") ||
	die "the host tool turn failed"
python3 -c '
import json, sys
prefix = "tool results: "
reply, uid = sys.argv[1], int(sys.argv[2])
assert reply.startswith(prefix), reply
r = json.loads(reply[len(prefix):])
assert r == {"uid": uid, "python": 42, "/etc/roundtable-sandbox/model-api-key": False,
             "/run/credentials/roundtable-sandbox-brokerd.service/model-api-key": False}, r
' "$reply" "$(id -u "$broker")" || die "the host tool did not answer as expected: $reply"
instances=$(dx systemctl list-units --no-legend --plain --state=active "$launcher@*.service" | awk '{print $1}')
[ "$(grep -c . <<<"$instances")" = 1 ] || die "not one active launcher instance: $instances"
lpid=$(dx systemctl show -p MainPID --value "$instances")
bpid=$(dx systemctl show -p MainPID --value roundtable-sandbox-brokerd.service)
lst=$(dx cat "/proc/$lpid/status")
[ "$(awk '$1 == "Uid:" {print $2 $3 $4 $5}' <<<"$lst")" = "$(id -u "$broker")$(id -u "$broker")$(id -u "$broker")$(id -u "$broker")" ] ||
	die "the launcher does not run as $broker"
[ "$(dx stat -c %u "/proc/$lpid/environ")" = 0 ] || die "the launcher is dumpable"
[ "$(awk '$1 == "NoNewPrivs:" {print $2}' <<<"$lst")" = 1 ] && [ "$(awk '$1 == "CapEff:" {print $2}' <<<"$lst")" = 0000000000000000 ] ||
	die "the launcher has privileges: $(grep -E '^(NoNewPrivs|CapEff)' <<<"$lst")"
! dx cat "/proc/$lpid/environ" | tr '\0' '\n' | grep -q '^CREDENTIALS_DIRECTORY=' || die "the launcher has a credentials directory"
[ -z "$(dx sh -c "cat /proc/$bpid/task/*/children")" ] || die "brokerd has child processes: it must start none"
dx journalctl --no-pager -u "$instances" | grep -q "serving brokerd (pid $bpid)" || die "the launcher's journal does not name brokerd $bpid"
say "a host tool ran through $instances (pid $lpid, $broker, not dumpable, no capabilities, no credentials): python3 works, brokerd's credential unreadable; brokerd (pid $bpid) has no child"

say "doctor inside the container:"
doc=$(dx roundtable-sandbox doctor 2>&1) || {
	printf '%s\n' "$doc" >&2
	die "doctor found problems under systemd"
}
printf '%s\n' "$doc" | sed 's/^/ci-systemd:   /'

# The workspace files the two turns wrote are the guest account's (the containers ran as it).
memory="$statedir/workspaces/$chan_hash/.sandbox/memory.json"
[ "$(stat -c %U "$memory")" = "$guest" ] || die "$memory belongs to $(stat -c %U "$memory"), not to $guest"
say "the turns' memory file belongs to $guest, the account the containers ran as"

# Each daemon as its own account, under its unit's sandbox.
for u in $units; do
	case $u in
	*statd) acct=$user ;;
	*runnerd) acct=$runner ;;
	*brokerd) acct=$broker ;;
	esac
	auid=$(id -u "$acct")
	agid=$(id -g "$acct")
	pid=$(dx systemctl show -p MainPID --value "$u.service")
	[ -n "$pid" ] && [ "$pid" -gt 0 ] || die "$u.service has no main PID"
	st=$(dx cat "/proc/$pid/status")
	field() { awk -v k="$1:" '$1 == k {$1 = ""; sub(/^ /, ""); print}' <<<"$st"; }
	[ "$(field Uid)" = "$auid $auid $auid $auid" ] || die "$u runs with uids $(field Uid), not $acct's $auid"
	[ "$(field Gid)" = "$agid $agid $agid $agid" ] || die "$u runs with gids $(field Gid), not $acct's $agid"
	# PR_SET_DUMPABLE 0: the kernel gives the process's /proc files to root.
	[ "$(dx stat -c %u "/proc/$pid/environ")" = 0 ] || die "$u is dumpable"
	[ "$(field NoNewPrivs)" = 1 ] || die "$u: NoNewPrivs is $(field NoNewPrivs)"
	[ "$(field Seccomp)" = 2 ] || die "$u: Seccomp is $(field Seccomp)"
	# The unit's filters (SystemCallFilter= and the other seccomp-based settings) and the
	# daemon's own allow-list, both in force: more filters than the unit alone installs.
	probe=roundtable-sandbox-ci-probe-${u#roundtable-sandbox-}
	dx systemctl start "$probe.service" || die "the seccomp probe $probe failed"
	unit_filters=$(dx cat "/run/$probe.out" | awk '{print $2}')
	[ -n "$unit_filters" ] && [ "$unit_filters" -ge 1 ] || die "$probe: no seccomp filter from the unit"
	[ "$(field Seccomp_filters)" -gt "$unit_filters" ] ||
		die "$u: $(field Seccomp_filters) seccomp filters, no more than its unit alone ($unit_filters)"
	for c in CapInh CapPrm CapEff CapBnd CapAmb; do
		[ "$(field $c)" = 0000000000000000 ] || die "$u: $c is $(field $c)"
	done
	groups=" $(field Groups) "
	env=$(dx cat "/proc/$pid/environ" | tr '\0' '\n')
	# Connect through the daemon's own mount namespace (/proc/PID/root) to /run/docker.sock.
	if dx python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
		"/proc/$pid/root/run/docker.sock" 2>/dev/null; then docker_ok=yes; else docker_ok=no; fi
	case $u in
	*runnerd)
		[[ $groups == *" $docker_gid "* ]] || die "runnerd lacks the docker group (groups:$groups)"
		[ $docker_ok = yes ] || die "runnerd cannot reach /run/docker.sock"
		;;
	*)
		[[ $groups != *" $docker_gid "* ]] || die "$u has the docker group"
		[ $docker_ok = no ] || die "$u can connect to /run/docker.sock"
		;;
	esac
	case $u in
	*brokerd)
		cred=$(sed -n 's/^CREDENTIALS_DIRECTORY=//p' <<<"$env")
		[ "$cred" = /run/credentials/roundtable-sandbox-brokerd.service ] ||
			die "brokerd's CREDENTIALS_DIRECTORY is '$cred'"
		dx cmp -s "/proc/$pid/root$cred/model-api-key" "$keyfile" ||
			die "brokerd's credential model-api-key differs from $keyfile"
		;;
	*) ! grep -q '^CREDENTIALS_DIRECTORY=' <<<"$env" || die "$u has a credentials directory" ;;
	esac
	say "$u (pid $pid): $acct uid/gid $auid/$agid, groups:${groups% }, not dumpable, NoNewPrivs 1, Seccomp 2 ($(field Seccomp_filters) filters, unit alone $unit_filters), no capabilities, docker.sock reachable: $docker_ok"
done
say "brokerd reads model-api-key from \$CREDENTIALS_DIRECTORY (LoadCredential=), same bytes as $keyfile"

# A host tool's sandbox under the launcher unit's settings, and none under brokerd's (the
# probe units made above).
dx systemctl start roundtable-sandbox-ci-tool-probe.service ||
	die "a host tool's sandbox does not start under the launcher unit: $(dx journalctl --no-pager -n 5 -u roundtable-sandbox-ci-tool-probe.service)"
tool_out=$(dx cat /run/roundtable-sandbox-ci-tool-probe.out)
[ "$tool_out" = "tool-probe 42 42 ok" ] || die "the host tool probe printed '$tool_out', not 'tool-probe 42 42 ok'"
! dx systemctl start roundtable-sandbox-ci-ns-probe.service 2>/dev/null || die "bwrap made its namespaces under brokerd's unit"
ns_log=$(dx journalctl --no-pager -u roundtable-sandbox-ci-ns-probe.service)
grep -q 'unshare failed: Operation not permitted' <<<"$ns_log" ||
	die "unshare under brokerd's unit failed otherwise than for want of permission: $(tail -n 3 <<<"$ns_log")"
say "a host tool's sandbox (bwrap, tini, python3, node, sh) runs under the launcher unit; under brokerd's, no namespace can be made"

# The journal: structured per-turn fields, and no key or guest text anywhere in the
# three units' entries.
jargs=()
for u in $units; do jargs+=(-u "$u.service" -u "$u.socket"); done
journal=$(dx journalctl --no-pager -o verbose "${jargs[@]}")
[ -n "$journal" ] || die "the journal has no entries of the units"
for f in RTS_TURN_ID RTS_CHANNEL_HASH RTS_OUTCOME; do
	grep -qE "^ +$f=" <<<"$journal" || die "no journal entry carries $f"
done
hashes=$(sed -n 's/^ *RTS_CHANNEL_HASH=//p' <<<"$journal" | sort -u)
[ "$hashes" = "$chan_hash" ] && [ -d "$statedir/workspaces/$chan_hash" ] ||
	die "the journal's RTS_CHANNEL_HASH values ($hashes) are not this run's channel's ($chan_hash)"
while read -r name; do
	t=${name##*-}
	grep -qE "^ +RTS_TURN_ID=$t\$" <<<"$journal" || die "no journal entry for turn $t ($name)"
done <<<"$started_ctrs"
outcomes=$(sed -n 's/^ *RTS_OUTCOME=//p' <<<"$journal" | sort | uniq -c | tr -s ' \n' ' ')
! grep -qF "$key" <<<"$journal" || die "the model key appears in the journal"
! grep -qF "$marker" <<<"$journal" || die "guest text appears in the journal"
say "journal: RTS_TURN_ID of both turns, RTS_CHANNEL_HASH $chan_hash, RTS_OUTCOME:$outcomes; no key, no guest text"

# The audit trail (issue 15): brokerd's broker decisions in the journal under their
# MESSAGE_ID (brokerd/audit.h), each turn's model call allowed by the model_route rule,
# no key or guest text in them; and `roundtable-sandbox metrics` answered by all three.
audit_id=0bf421491732452c8a2331a833fe4e73
audit=$(dx journalctl --no-pager -o json "MESSAGE_ID=$audit_id")
[ -n "$audit" ] || die "the journal has no broker decision entries (MESSAGE_ID=$audit_id)"
while read -r name; do
	t=${name##*-}
	python3 -c '
import json, sys
turn, chan = sys.argv[1], sys.argv[2]
entries = [json.loads(line) for line in sys.stdin if line.strip()]
mine = [e for e in entries if e.get("RTS_TURN_ID") == turn]
assert mine, "no broker decision entry"
for e in mine:
    assert e.get("RTS_CHANNEL_HASH") == chan, e
    for f in ("RTS_CALL", "RTS_ROUTE", "RTS_DECISION", "RTS_RULE", "RTS_RESULT", "RTS_FORWARDED"):
        assert f in e, (f, e)
assert any(e["RTS_ROUTE"] == "model" and e["RTS_DECISION"] == "allowed" and e["RTS_RULE"] == "model_route"
           for e in mine), mine
' "$t" "$chan_hash" <<<"$audit" || die "turn $t ($name): its broker decisions are not in the journal as expected"
done <<<"$started_ctrs"
! grep -qF "$key" <<<"$audit" || die "the model key appears in a broker decision entry"
! grep -qF "$marker" <<<"$audit" || die "guest text appears in a broker decision entry"
metrics=$(dx roundtable-sandbox metrics) || die "roundtable-sandbox metrics failed"
for d in statd runnerd brokerd; do
	grep -qx "roundtable_sandbox_daemon_up{daemon=\"$d\"} 1" <<<"$metrics" ||
		die "roundtable-sandbox metrics: $d did not answer"
done
say "audit: broker decisions of both turns in the journal (MESSAGE_ID=$audit_id), no key, no guest text; metrics from all three daemons"

for u in $units; do
	[ "$(dx systemctl show -p NRestarts --value "$u.service")" = 0 ] || die "$u.service was restarted"
done
dx roundtable-sandbox off "$channel" >/dev/null || die "roundtable-sandbox off failed"
channel_on=""

# Stop services and sockets: runnerd removes its containers, systemd removes runRoot.
dx systemctl stop roundtable-sandbox-statd.service roundtable-sandbox-runnerd.service \
	roundtable-sandbox-brokerd.service roundtable-sandbox-statd.socket roundtable-sandbox-runnerd.socket \
	roundtable-sandbox-brokerd.socket || die "systemctl stop failed"
# brokerd's connection closed: its launcher instance ended by itself (and was collected).
for _ in $(seq 100); do
	[ -z "$(dx systemctl list-units --all --no-legend --plain "$launcher@*.service")" ] && break
	sleep 0.1
done
left=$(dx systemctl list-units --all --no-legend --plain "$launcher@*.service")
[ -z "$left" ] || die "launcher instances left after brokerd stopped: $left"
dx systemctl stop "$launcher.socket" || die "systemctl stop $launcher.socket failed"
for u in $units; do
	for t in service socket; do
		[ "$(dx systemctl is-active "$u.$t" || true)" = inactive ] || die "$u.$t did not stop"
	done
	res=$(dx systemctl show -p Result --value "$u.service")
	code=$(dx systemctl show -p ExecMainCode,ExecMainStatus "$u.service" | tr '\n' ' ')
	[ "$res" = success ] || die "$u.service ended with Result=$res ($code)"
done
audit=$(seccomp_audit | tail -n +"$((audit_before + 1))")
[ -z "$audit" ] || die "seccomp stopped or logged a process of $user: $audit"
left=$(docker ps -a -q --filter "label=io.roundtable-sandbox.installation=$inst")
[ -z "$left" ] || die "turn containers left after systemctl stop: $left"
[ ! -e "$rundir/turns" ] || [ -z "$(ls -A "$rundir/turns")" ] || die "run dirs left: $(ls -A "$rundir/turns")"
# runRoot itself stays (RuntimeDirectoryPreserve=yes: a rich channel's container outlives
# runnerd and its broker directory is bound from there), empty of turn directories above.
for s in control.sock runnerd.sock brokerd.sock launcher.sock; do
	[ ! -e "$rundir/$s" ] || die "$rundir/$s left behind (RemoveOnStop=yes)"
done
say "systemctl stop: every service exited cleanly (Result=success, no restarts); no turn container, no run dir, no socket left"

# Power the container's systemd off (what `systemctl poweroff` does, without first asking
# logind over D-Bus, which does not run here).
dx systemctl --no-block --job-mode=replace-irreversibly start poweroff.target || die "systemctl start poweroff.target"
code=$(timeout 120 docker wait "$ctr") || die "the systemd container did not exit after poweroff"
# reboot(2) inside a PID namespace ends the namespace's init with SIGINT for a power-off:
# Docker reports 128 + 2. Anything else, or no "Powering off." in its log, is a failure.
[ "$code" = 130 ] && docker logs "$ctr" 2>&1 | grep -q '^Powering off\.' ||
	die "systemd did not power off cleanly (exit status $code)"
docker rm "$ctr" >/dev/null || die "docker rm of the systemd container"
say "passed in $(($(date +%s) - started)) s"
