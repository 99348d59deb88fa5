/* SPDX-License-Identifier: Apache-2.0 */
/* Who runs as whom (DESIGN.md 8.1; roundtable-sandbox(7) "Accounts").
 *
 * Single-account mode (no "accounts" key): every daemon runs as the account it is started
 * as, the daemon links accept only that account, and turn containers run as it too.
 *
 * Accounts mode: brokerd runs as accounts.broker, runnerd as accounts.runner (the only one
 * with the Docker group), statd as the service account it is started as, and turn
 * containers as uid/gid, the guest account, which no daemon runs as. The config names
 * two of the three daemon accounts; statd's is the owner of the state file's directory,
 * which statd refuses to start without owning (common/privdir.h), and which no other
 * account can change. The daemon links accept exactly those accounts:
 *
 *   runnerd.sock   runnerd accepts statd's account; statd accepts a listener made by
 *                  the runner account or by root (systemd's socket unit)
 *   brokerd.sock   brokerd accepts the runner account; runnerd accepts a listener made
 *                  by the broker account or by root
 *
 * Each link's spec names its side's predicate below (common/link.h peer_check). */
#ifndef RTS_ACCOUNTS_H
#define RTS_ACCOUNTS_H

#include <stddef.h>
#include <sys/types.h>

#include "common/conf.h"

enum rts_role {
	RTS_ROLE_OTHER = 0, /* the CLI, tests: no identity rule of a daemon */
	RTS_ROLE_STATD,
	RTS_ROLE_RUNNERD,
	RTS_ROLE_BROKERD,
};

/* The role of a daemon's program name (RTS_PROGRAM_*), RTS_ROLE_OTHER for anything else. */
enum rts_role rts_role_of(const char *program);

/* The identity rules a daemon checks at start, for a process running with euid and egid
 * (seed: root workers are refused; DESIGN.md 8.1):
 *   - never root;
 *   - single-account mode: uid and gid, when configured, are the process's own;
 *   - accounts mode: brokerd runs as accounts.broker and runnerd as accounts.runner, each
 *     with that account's primary group; statd as none of them and not as the guest
 *     account (uid), nor with the guest's or a daemon account's group.
 * Returns 0, or -EPERM with a message in err that names the key and says how to start the
 * program instead. */
int rts_check_identity(const struct rts_config *c, enum rts_role role, uid_t euid, gid_t egid, char *err,
		       size_t errlen);

/* Keep what the peer predicates need from c (a copy; c may be freed afterwards). Called
 * once by rts_daemon_init(); before it, the predicates act as in single-account mode. */
void rts_accounts_init(const struct rts_config *c);

/* statd's account in accounts mode: the owner of the state file's directory, which must
 * be a directory (not a symbolic link) owned by neither root, the broker, the runner nor
 * the guest account. Returns 0 with *uid, -ENOENT when that directory does not exist
 * (yet), -EPERM when its owner is not acceptable, -EINVAL in single-account mode. */
int rts_accounts_statd_uid(uid_t *uid);

/* The accepted-peer predicates of the daemon links (common/link.h peer_check): 0 to
 * accept, -EPERM (or -errno from SO_PEERCRED) to refuse. In single-account mode
 * rts_peer_is_self() and rts_listener_is_trusted() (common/sock.h). */
int rts_peer_is_statd(int fd);	     /* runnerd.sock, runnerd's side */
int rts_peer_is_runnerd(int fd);     /* brokerd.sock, brokerd's side */
int rts_listener_is_runnerd(int fd); /* runnerd.sock, statd's side */
int rts_listener_is_brokerd(int fd); /* brokerd.sock, runnerd's side */

/* The account a daemon's own listening socket must let in when the daemon binds it
 * itself (no socket activation), or (uid_t)-1 for none beyond the socket's mode:
 * runnerd.sock statd's account, brokerd.sock the runner account, in accounts mode only.
 * Returns 0 with *uid, or what rts_accounts_statd_uid() returns. */
int rts_accounts_listen_peer(enum rts_role role, uid_t *uid);

#endif
