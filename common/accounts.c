/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <libgen.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/accounts.h"
#include "common/proto.h"
#include "common/sock.h"
#include "common/util.h"

enum rts_role rts_role_of(const char *program)
{
	if (!program)
		return RTS_ROLE_OTHER;
	if (strcmp(program, RTS_PROGRAM_STATD) == 0)
		return RTS_ROLE_STATD;
	if (strcmp(program, RTS_PROGRAM_RUNNERD) == 0)
		return RTS_ROLE_RUNNERD;
	if (strcmp(program, RTS_PROGRAM_BROKERD) == 0)
		return RTS_ROLE_BROKERD;
	return RTS_ROLE_OTHER;
}

static int refuse(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EPERM;
}

/* brokerd and runnerd: exactly the configured account, with its own primary group (a
 * group shared with statd's account would open control.sock to it). */
static int check_daemon_account(const struct rts_config *c, const char *key, const char *name, uid_t want_uid,
				gid_t want_gid, uid_t euid, gid_t egid, char *err, size_t errlen)
{
	if (euid != want_uid)
		return refuse(err, errlen,
			      "%s: %s is \"%s\" (uid %lu) but this process runs as uid %lu: start it as that account "
			      "(systemd User=%s, or runuser -u %s -g GROUP)",
			      c->path, key, name, (unsigned long)want_uid, (unsigned long)euid, name, name);
	if (egid != want_gid)
		return refuse(err, errlen,
			      "%s: %s is \"%s\", whose primary group is gid %lu, but this process runs with gid %lu: "
			      "start it with that group (systemd Group=, or runuser -g)",
			      c->path, key, name, (unsigned long)want_gid, (unsigned long)egid);
	return 0;
}

int rts_check_identity(const struct rts_config *c, enum rts_role role, uid_t euid, gid_t egid, char *err,
		       size_t errlen)
{
	if (euid == 0)
		return refuse(err, errlen,
			      "refusing to run as root: start this program as the service account (for example with "
			      "systemd User= or runuser -u)");
	const struct rts_accounts *a = &c->accounts;
	if (!a->present) {
		if (c->has_uid && c->uid != euid)
			return refuse(err, errlen, "%s: uid: is %lu but this process runs as uid %lu; they must match",
				      c->path, (unsigned long)c->uid, (unsigned long)euid);
		if (c->has_gid && c->gid != egid)
			return refuse(err, errlen, "%s: gid: is %lu but this process runs as gid %lu; they must match",
				      c->path, (unsigned long)c->gid, (unsigned long)egid);
		return 0;
	}
	switch (role) {
	case RTS_ROLE_BROKERD:
		return check_daemon_account(c, "accounts.broker", a->broker, a->broker_uid, a->broker_gid, euid, egid,
					    err, errlen);
	case RTS_ROLE_RUNNERD:
		return check_daemon_account(c, "accounts.runner", a->runner, a->runner_uid, a->runner_gid, euid, egid,
					    err, errlen);
	case RTS_ROLE_STATD:
		if (euid == a->broker_uid || euid == a->runner_uid)
			return refuse(err, errlen,
				      "%s: this process runs as accounts.%s (uid %lu); statd runs as the service account, "
				      "which must be neither the broker nor the runner account",
				      c->path, euid == a->broker_uid ? "broker" : "runner", (unsigned long)euid);
		if (euid == c->uid)
			return refuse(err, errlen,
				      "%s: uid: is %lu, the uid this process runs as; with accounts, uid is the guest "
				      "account turn containers run as, and statd must run as another (the service account)",
				      c->path, (unsigned long)c->uid);
		if (egid == c->gid || egid == a->broker_gid || egid == a->runner_gid)
			return refuse(err, errlen,
				      "%s: this process runs with gid %lu, the %s; start statd with the service account's "
				      "own group (runuser -g)",
				      c->path, (unsigned long)egid,
				      egid == c->gid ? "guest group (gid)" : "primary group of another daemon's account");
		return 0;
	case RTS_ROLE_OTHER:
		return 0;
	}
	return 0;
}

/* ---- the peer predicates ---- */

/* What rts_accounts_init() kept: the predicates have no other argument than the fd. */
static struct {
	bool present;
	uid_t broker, runner, guest;
	char *state_dir;
} peers;

void rts_accounts_init(const struct rts_config *c)
{
	free(peers.state_dir);
	peers.present = c->accounts.present;
	peers.broker = c->accounts.broker_uid;
	peers.runner = c->accounts.runner_uid;
	peers.guest = c->uid;
	cleanup_free char *copy = rts_xstrdup(c->state_file);
	peers.state_dir = rts_xstrdup(dirname(copy));
}

int rts_accounts_statd_uid(uid_t *uid)
{
	if (!peers.present)
		return -EINVAL;
	/* Looked up each time: statd may create the directory after we started. Only root
	 * can give it another owner. */
	struct stat st;
	if (lstat(peers.state_dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid == 0 || st.st_uid == peers.broker || st.st_uid == peers.runner ||
	    st.st_uid == peers.guest)
		return -EPERM;
	*uid = st.st_uid;
	return 0;
}

static int peer_uid(int fd, uid_t *uid)
{
	struct ucred uc = {.uid = (uid_t)-1};
	socklen_t len = sizeof(uc);
	*uid = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	*uid = uc.uid;
	return 0;
}

int rts_peer_is_statd(int fd)
{
	if (!peers.present)
		return rts_peer_is_self(fd);
	uid_t peer, statd;
	int r = peer_uid(fd, &peer);
	if (r < 0)
		return r;
	r = rts_accounts_statd_uid(&statd);
	if (r < 0)
		return -EPERM;
	return peer == statd ? 0 : -EPERM;
}

int rts_peer_is_runnerd(int fd)
{
	if (!peers.present)
		return rts_peer_is_self(fd);
	uid_t peer;
	int r = peer_uid(fd, &peer);
	if (r < 0)
		return r;
	return peer == peers.runner ? 0 : -EPERM;
}

/* A listener's SO_PEERCRED names whoever called listen(2): the daemon itself, or systemd
 * (root) for a socket unit. */
static int listener_is(int fd, uid_t want)
{
	uid_t peer;
	int r = peer_uid(fd, &peer);
	if (r < 0)
		return r;
	return peer == want || peer == 0 ? 0 : -EPERM;
}

int rts_listener_is_runnerd(int fd)
{
	return peers.present ? listener_is(fd, peers.runner) : rts_listener_is_trusted(fd);
}

int rts_listener_is_brokerd(int fd)
{
	return peers.present ? listener_is(fd, peers.broker) : rts_listener_is_trusted(fd);
}

int rts_accounts_listen_peer(enum rts_role role, uid_t *uid)
{
	*uid = (uid_t)-1;
	if (!peers.present)
		return 0;
	if (role == RTS_ROLE_BROKERD)
		*uid = peers.runner;
	else if (role == RTS_ROLE_RUNNERD)
		return rts_accounts_statd_uid(uid);
	return 0;
}
