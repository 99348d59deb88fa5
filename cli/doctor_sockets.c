/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: the runtime directory and the daemons' sockets (cli/doctor.c lists the checks). */
#include "config.h"

#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* How long statd has to answer doctor's status request, in seconds. */
#define DOCTOR_SOCKET_TIMEOUT_S 5u

#include "cli/cli.h"
#include "cli/doctor_checks.h"
#include "common/acl.h"
#include "common/json.h"
#include "common/sock.h"
#include "common/util.h"

void doctor_check_runtime_dir(struct doctor *d)
{
	const char *dir = d->opts->runtime_dir;
	struct stat st;
	if (lstat(dir, &st) < 0) {
		doctor_report(d, DOCTOR_FAIL, "runtime dir", "%s: %s; fix: start the socket units (systemctl start "
		              "roundtable-sandbox-statd.socket roundtable-sandbox-runnerd.socket "
		              "roundtable-sandbox-brokerd.socket)", dir, doctor_cannot(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, "runtime dir", "%s is not a directory", dir);
		return;
	}
	char who[128];
	const char *writer = doctor_other_writer(d, &st, who, sizeof(who));
	if (writer) {
		doctor_report(d, DOCTOR_FAIL, "runtime dir", "%s can be changed by %s (mode %04o), who could put "
		              "their own sockets there; fix: chown root:root %s && chmod 0755 %s", dir, writer,
		              (unsigned)(st.st_mode & 07777), dir, dir);
		return;
	}
	/* Mode bits alone miss an ACL entry (setfacl -m u:GUEST:x): only the daemons' accounts
	 * may pass through to the sockets (a hand-started runtime directory lets runnerd and
	 * brokerd in to bind their own). */
	const uid_t ok[] = {d->svc_uid, d->accounts ? d->runner_uid : d->svc_uid, d->accounts ? d->broker_uid : d->svc_uid};
	if (!doctor_acl_only(d, "runtime dir", dir, ok, d->have_account ? RTS_ARRAY_SIZE(ok) : 0, false,
			     "reach the daemons' sockets in it"))
		return;
	doctor_report(d, DOCTOR_OK, "runtime dir", "%s: owner %lu, mode %04o", dir, (unsigned long)st.st_uid,
	              (unsigned)(st.st_mode & 07777));
}

/* A daemon's own account (accounts mode: statd's, the runner's or the broker's). */
static bool daemon_owned(const struct doctor *d, uid_t uid)
{
	return doctor_uid_trusted(d, uid) || (d->accounts && (uid == d->runner_uid || uid == d->broker_uid));
}

/* The socket file at path: a socket, owned by the service account (or root for a socket
 * unit without SocketUser=; in accounts mode any daemon's account), and no wider than
 * max_mode; in accounts mode a socket bound by its daemon may also let in peer (not
 * (uid_t)-1) by its one ACL entry (rts_listen_unix_for()). Returns false after reporting. */
static bool check_socket_file(struct doctor *d, const char *check, const char *daemon, const char *path,
			      mode_t max_mode, uid_t peer)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		doctor_report(d, DOCTOR_FAIL, check, "%s: %s; fix: start the daemon or its socket unit (systemctl "
		              "start roundtable-sandbox-%s.socket)", path, doctor_cannot(errno), daemon);
		return false;
	}
	if (!S_ISSOCK(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is not a socket; fix: remove it and restart the daemon",
		              path);
		return false;
	}
	if (!daemon_owned(d, st.st_uid)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s belongs to uid %lu; fix: stop whatever created it and "
		              "restart the daemon", path, (unsigned long)st.st_uid);
		return false;
	}
	/* Mode bits alone miss an ACL entry (setfacl -m u:GUEST:rw): nobody but the owner,
	 * the service account and the one peer may connect. */
	const uid_t ok[] = {st.st_uid, d->have_account ? d->svc_uid : st.st_uid, peer != (uid_t)-1 ? peer : st.st_uid};
	if (!doctor_acl_only(d, check, path, ok, RTS_ARRAY_SIZE(ok), false,
			     strcmp(daemon, "statd") == 0 ? "connect to it and switch a channel's mode"
							  : "connect to it and speak for a daemon"))
		return false;
	struct rts_acl_view v;
	if (d->accounts && peer != (uid_t)-1 && (st.st_mode & 0777) == 0660 && rts_acl_view(-1, path, &v) == 0 &&
	    rts_acl_is_grant(&v, 06, peer, 06))
		return true;
	if ((st.st_mode & 0777) & ~max_mode) {
		doctor_report(d, DOCTOR_FAIL, check, "%s has mode %04o, wider than %04o: other local users could "
		              "connect; fix: chmod %04o %s (or SocketMode= in the socket unit)", path,
		              (unsigned)(st.st_mode & 0777), (unsigned)max_mode, (unsigned)max_mode, path);
		return false;
	}
	return true;
}

/* statd must answer a status request: the same round trip the bot and the CLI make. */
void doctor_check_control_socket(struct doctor *d)
{
	cleanup_free char *path = rts_runtime_path(d->opts->runtime_dir, RTS_SOCK_CONTROL);
	if (!check_socket_file(d, RTS_SOCK_CONTROL, "statd", path, 0660, (uid_t)-1))
		return;
	/* The CLI's own request (cli/request.c), without its retry. */
	json_object *a = NULL;
	const char *why = NULL;
	bool connected;
	int r = cli_statd_status(d->opts->runtime_dir, DOCTOR_SOCKET_TIMEOUT_S * 1000u, &connected, &a, &why);
	cleanup_json json_object *answer = a;
	if (!connected) {
		const char *fix = r == -ECONNREFUSED
					  ? "nothing listens: start statd (a stale socket file is replaced at start)"
					  : "run doctor as root or as a member of the service account's group";
		doctor_report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "cannot connect to %s: %s; fix: %s", path, strerror(-r),
		              fix);
		return;
	}
	if (r < 0) {
		doctor_report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "statd did not answer a status request within %u s "
		              "(%s); fix: look at its log (journalctl -u roundtable-sandbox-statd)",
		              DOCTOR_SOCKET_TIMEOUT_S,
		              r == -ETIMEDOUT ? "timed out" : r == -EBADMSG && why ? why : strerror(-r));
		return;
	}
	json_object *ok = rts_json_get(answer, "ok");
	json_object *ch = rts_json_get(answer, "channels"), *on = rts_json_get(answer, "on");
	json_object *running = rts_json_get(answer, "running"), *queued = rts_json_get(answer, "queued");
	if (!ok || !json_object_get_boolean(ok) || !ch || !on || !running || !queued) {
		doctor_report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "statd's status answer is not understood; fix: make "
		              "sure the CLI and the daemons come from the same version");
		return;
	}
	doctor_report(d, DOCTOR_OK, RTS_SOCK_CONTROL, "statd answers: %lld channels, %lld on, %lld running, %lld "
	              "queued", (long long)json_object_get_int64(ch), (long long)json_object_get_int64(on),
	              (long long)json_object_get_int64(running), (long long)json_object_get_int64(queued));
}

/* Look for a listening socket bound to path in /proc/net/unix (sockets of our network
 * namespace; systemd's activated sockets are there). Returns its type (SOCK_*), 0 when
 * none is listening there, or -errno. Nothing connects, so no daemon logs a refused peer
 * and no socket unit starts its service. */
static int listening_type(const char *path)
{
	cleanup_fclose FILE *f = fopen("/proc/net/unix", "re");
	if (!f)
		return -errno;
	char line[PATH_MAX + 128];
	int type = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long flags;
		unsigned t, st;
		int pos = -1;
		if (sscanf(line, "%*s %*x %*x %lx %x %x %*u %n", &flags, &t, &st, &pos) != 3 || pos < 0)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = '\0';
		/* __SO_ACCEPTCON: the socket listens. */
		if ((flags & 0x10000) && strcmp(p, path) == 0) {
			if ((int)t == SOCK_SEQPACKET || type == 0)
				type = (int)t;
		}
	}
	return type;
}

void doctor_check_link_socket(struct doctor *d, const char *name, const char *daemon)
{
	cleanup_free char *path = rts_runtime_path(d->opts->runtime_dir, name);
	/* Bound by the daemon itself, each lets in its one peer: statd's account, the runner. */
	uid_t peer = !d->accounts ? (uid_t)-1 : strcmp(daemon, "runnerd") == 0 ? d->svc_uid : d->runner_uid;
	if (!check_socket_file(d, name, daemon, path, 0600, peer))
		return;
	int t = listening_type(path);
	if (t == SOCK_SEQPACKET) {
		doctor_report(d, DOCTOR_OK, name, "%s listens (SOCK_SEQPACKET)", path);
		return;
	}
	if (t > 0) {
		doctor_report(d, DOCTOR_FAIL, name, "%s listens with socket type %d, not SOCK_SEQPACKET; fix: use "
		              "ListenSequentialPacket= in roundtable-sandbox-%s.socket", path, t, daemon);
		return;
	}
	/* Not in our network namespace's table: a daemon that bound it itself inside another
	 * one. A connection tells; the daemon refuses it unless we are the service account. */
	int fd = rts_connect_unix(path, SOCK_SEQPACKET, 0);
	if (fd >= 0) {
		close(fd);
		doctor_report(d, DOCTOR_OK, name, "%s accepts connections (SOCK_SEQPACKET)", path);
	} else if (fd == -EPROTOTYPE) {
		doctor_report(d, DOCTOR_FAIL, name, "%s is not a SOCK_SEQPACKET socket; fix: use "
		              "ListenSequentialPacket= in roundtable-sandbox-%s.socket", path, daemon);
	} else {
		doctor_report(d, DOCTOR_FAIL, name, "nothing listens on %s (%s): roundtable-sandbox-%s is not running "
		              "and the file is stale; fix: start it (systemctl start roundtable-sandbox-%s.socket)",
		              path, strerror(-fd), daemon, daemon);
	}
}
