/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/acl.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/precheck.h"
#include "common/privdir.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/runnerd.h"

int runnerd_run_root_open(const char *run_root, char *err, size_t errlen)
{
	/* runRoot/<16 hex>/broker.sock must fit (seed: at most 100 characters). */
	size_t len = rts_broker_sock_path_len(run_root);
	if (len > RTS_BROKER_SOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "runRoot: %s is too long: the broker socket path %s/<turn id>/%s would be %zu characters, "
			 "the limit is %u (use a runRoot of at most %zu characters)",
			 run_root, run_root, RUNNERD_BROKER_SOCK, len, RTS_BROKER_SOCK_PATH_MAX,
			 RTS_BROKER_SOCK_PATH_MAX - (len - strlen(run_root)));
		return -ENAMETOOLONG;
	}
	return rts_private_dir_open("runRoot", run_root, err, errlen);
}

void runnerd_run_root_clean(int run_root_fd)
{
	int dfd = fcntl(run_root_fd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0) {
		log_warning_errno(-errno, "cannot scan runRoot for stale run dirs: %m");
		return;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		log_warning_errno(-errno, "cannot scan runRoot for stale run dirs: %m");
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		/* Only what we create: a turn-id-named directory of ours. Anything else is left
		 * for the operator. */
		if (!rts_turn_id_valid(de->d_name))
			continue;
		struct stat st;
		if (fstatat(run_root_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		char sock[RTS_TURN_ID_LEN + 1 + sizeof(RUNNERD_BROKER_SOCK)];
		snprintf(sock, sizeof(sock), "%s/%s", de->d_name, RUNNERD_BROKER_SOCK);
		if (fstatat(run_root_fd, sock, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
		    unlinkat(run_root_fd, sock, 0) < 0)
			log_warning_errno(-errno, "cannot remove stale broker socket of turn %s: %m", de->d_name);
		if (unlinkat(run_root_fd, de->d_name, AT_REMOVEDIR) < 0)
			log_warning_errno(-errno, "cannot remove stale run dir of turn %s: %m", de->d_name);
		else
			log_info("removed the stale run dir of turn %s", de->d_name);
	}
	closedir(d);
}

/* The guest account the containers run as in accounts mode; (uid_t)-1 in single-account
 * mode, where they run as our uid and need nothing shared. */
static uid_t guest_of(const struct runnerd *rd)
{
	return rd->cfg->accounts.present ? rd->uid : (uid_t)-1;
}

/* Give guest perms (RTS_PERM_*) on the directory dir in root_fd by an ACL entry, the
 * owner rwx, nobody else anything. The directory is opened without following a symbolic
 * link: only one of ours is changed. Returns 0 or -errno (-EOPNOTSUPP: no ACLs). */
static int guest_dir_grant(int root_fd, const char *dir, uid_t guest, unsigned perms)
{
	cleanup_close int dfd = openat(root_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return dfd < 0 ? -errno : rts_acl_grant(dfd, NULL, RTS_PERM_R | RTS_PERM_W | RTS_PERM_X, guest, perms);
}

int runnerd_run_dir_create(struct runnerd *rd, const char *turn_id)
{
	if (mkdirat(rd->run_root_fd, turn_id, 0700) < 0)
		return -errno;
	/* Single-account mode: the container runs as our uid, so 0700 on the dir and 0600 on
	 * the socket are all it needs to connect. Accounts mode: the guest account gets search
	 * on the dir and read/write on the socket by ACL entries, nobody else anything; runRoot
	 * stays 0700, so the guest reaches them only through this turn's bind mount. */
	uid_t guest = guest_of(rd);
	int r = guest == (uid_t)-1 ? 0 : guest_dir_grant(rd->run_root_fd, turn_id, guest, RTS_PERM_X);
	cleanup_free char *path = rts_xasprintf("%s/%s/%s", rd->cfg->run_root, turn_id, RUNNERD_BROKER_SOCK);
	int fd = r < 0 ? r : rts_listen_unix_for(path, SOCK_STREAM, 0600, guest);
	if (fd < 0) {
		unlinkat(rd->run_root_fd, turn_id, AT_REMOVEDIR);
		return fd;
	}
	return fd;
}

/* Unlink dir/broker.sock and remove dir (in runRoot); what is gone already is fine.
 * Returns 0 or the last -errno. */
static int sock_dir_remove(struct runnerd *rd, const char *dir)
{
	cleanup_free char *sock = rts_xasprintf("%s/%s", dir, RUNNERD_BROKER_SOCK);
	int r = 0;
	if (unlinkat(rd->run_root_fd, sock, 0) < 0 && errno != ENOENT)
		r = -errno;
	if (unlinkat(rd->run_root_fd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

int runnerd_run_dir_remove(struct runnerd *rd, const char *turn_id)
{
	return sock_dir_remove(rd, turn_id);
}

/* ---- rich channels' broker directories ---- */

static bool prefix_ok(const char *prefix)
{
	return rts_hex_valid(prefix, RUNNERD_RICH_PREFIX_LEN);
}

int runnerd_rich_dir_open(struct runnerd *rd, const char *prefix)
{
	if (!prefix_ok(prefix))
		return -EINVAL;
	char dir[sizeof(RTS_RICH_DIR_PREFIX) + RUNNERD_RICH_PREFIX_LEN];
	snprintf(dir, sizeof(dir), RTS_RICH_DIR_PREFIX "%s", prefix);
	/* It outlives a container and a runnerd: the same directory is bound into the
	 * container, so a new broker.sock in it reaches a running worker. */
	if (mkdirat(rd->run_root_fd, dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (fstatat(rd->run_root_fd, dir, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -ENOTDIR;
	/* As a turn's run dir (runnerd_run_dir_create): accounts mode lets the guest account,
	 * which the channel's container runs as, search the directory and connect to the
	 * socket by ACL entries; the ACL is set again each time, so whatever the directory's
	 * mode became is replaced. */
	uid_t guest = guest_of(rd);
	if (guest != (uid_t)-1) {
		int r = guest_dir_grant(rd->run_root_fd, dir, guest, RTS_PERM_X);
		if (r < 0)
			return r;
	} else if ((st.st_mode & 07777) != 0700 && fchmodat(rd->run_root_fd, dir, 0700, 0) < 0) {
		return -errno;
	}
	char sock[sizeof(dir) + 1 + sizeof(RUNNERD_BROKER_SOCK)];
	snprintf(sock, sizeof(sock), "%s/%s", dir, RUNNERD_BROKER_SOCK);
	/* The previous listener's file (brokerd may still serve it, unreachable once this
	 * name is taken; RICH_BIND replaces it there). */
	if (unlinkat(rd->run_root_fd, sock, 0) < 0 && errno != ENOENT)
		return -errno;
	cleanup_free char *path = rts_xasprintf("%s/%s", rd->cfg->run_root, sock);
	return rts_listen_unix_for(path, SOCK_STREAM, 0600, guest);
}

int runnerd_rich_dir_remove(struct runnerd *rd, const char *prefix)
{
	if (!prefix_ok(prefix))
		return -EINVAL;
	char dir[sizeof(RTS_RICH_DIR_PREFIX) + RUNNERD_RICH_PREFIX_LEN];
	snprintf(dir, sizeof(dir), RTS_RICH_DIR_PREFIX "%s", prefix);
	return sock_dir_remove(rd, dir);
}

/* ---- precheck run dirs (DESIGN.md 8.3) ---- */

int runnerd_precheck_root_open(const char *root, char *err, size_t errlen)
{
	size_t len = rts_precheck_sock_path_len(root);
	if (len > RTS_BROKER_SOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "precheck.runRoot: %s is too long: the broker socket path %s/" RTS_PRECHECK_DIR_PREFIX
			 "<id>/" RTS_PRECHECK_BROKER_DIR "/%s would be %zu characters, the limit is %u (use a "
			 "runRoot of at most %zu characters)",
			 root, root, RUNNERD_BROKER_SOCK, len, RTS_BROKER_SOCK_PATH_MAX,
			 RTS_BROKER_SOCK_PATH_MAX - (len - strlen(root)));
		return -ENAMETOOLONG;
	}
	return rts_private_dir_open("precheck.runRoot", root, err, errlen);
}

/* Remove <dir>/broker/broker.sock, <dir>/broker, <dir>/workspace and <dir> relative to
 * root_fd, each only if it is what we make (a socket, directories). Returns 0 or the first
 * -errno other than ENOENT. */
static int precheck_dir_unmake(int root_fd, const char *dir)
{
	char path[sizeof(RTS_PRECHECK_DIR_PREFIX) + RTS_TURN_ID_LEN + sizeof(RTS_PRECHECK_BROKER_DIR) +
		  sizeof(RUNNERD_BROKER_SOCK) + sizeof(RTS_PRECHECK_WORKSPACE_DIR) + 8];
	int r = 0;
	struct stat st;
	snprintf(path, sizeof(path), "%s/" RTS_PRECHECK_BROKER_DIR "/%s", dir, RUNNERD_BROKER_SOCK);
	if (fstatat(root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
	    unlinkat(root_fd, path, 0) < 0 && errno != ENOENT)
		r = -errno;
	const char *const subdirs[] = {RTS_PRECHECK_BROKER_DIR, RTS_PRECHECK_WORKSPACE_DIR};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(subdirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subdirs[i]);
		if (unlinkat(root_fd, path, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
			r = -errno;
	}
	if (unlinkat(root_fd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

void runnerd_rich_dirs_clean(struct runnerd *rd)
{
	int dfd = fcntl(rd->run_root_fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		log_warning_errno(-errno, "cannot scan runRoot for stale rich broker directories: %m");
		return;
	}
	size_t plen = strlen(RTS_RICH_DIR_PREFIX);
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *prefix = de->d_name + plen;
		if (strncmp(de->d_name, RTS_RICH_DIR_PREFIX, plen) != 0 || !prefix_ok(prefix))
			continue;
		if (runnerd_riches_know_prefix(&rd->riches, prefix))
			continue;
		int r = runnerd_rich_dir_remove(rd, prefix);
		if (r < 0)
			log_warning_errno(r, "cannot remove the stale rich broker directory %s: %m", de->d_name);
		else
			log_info("removed the stale rich broker directory %s (no container)", de->d_name);
	}
	closedir(d);
}

int runnerd_precheck_dir_create(struct runnerd *rd, const char *id)
{
	if (rd->precheck_root_fd < 0 || !rts_turn_id_valid(id))
		return -EINVAL;
	char dir[sizeof(RTS_PRECHECK_DIR_PREFIX) + RTS_TURN_ID_LEN];
	snprintf(dir, sizeof(dir), RTS_PRECHECK_DIR_PREFIX "%s", id);
	if (mkdirat(rd->precheck_root_fd, dir, 0700) < 0)
		return -errno;
	/* Two directories of their own: the container sees only the socket at /run/broker and
	 * only an empty, read-only directory at /workspace. */
	const char *const subdirs[] = {RTS_PRECHECK_BROKER_DIR, RTS_PRECHECK_WORKSPACE_DIR};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(subdirs); i++) {
		char sub[sizeof(dir) + sizeof(RTS_PRECHECK_WORKSPACE_DIR) + sizeof(RTS_PRECHECK_BROKER_DIR)];
		snprintf(sub, sizeof(sub), "%s/%s", dir, subdirs[i]);
		if (mkdirat(rd->precheck_root_fd, sub, 0700) < 0) {
			int r = -errno;
			precheck_dir_unmake(rd->precheck_root_fd, dir);
			return r;
		}
	}
	/* Accounts mode: the container runs as the guest account, which gets read and search
	 * on the two directories (a script may list what it was given: the socket, nothing)
	 * and read/write on the socket by ACL entries, as for a turn
	 * (runnerd_run_dir_create()); the precheck-<id> directory above them stays 0700, so
	 * only the bind mounts reach them. */
	uid_t guest = guest_of(rd);
	if (guest != (uid_t)-1) {
		for (size_t i = 0; i < RTS_ARRAY_SIZE(subdirs); i++) {
			char sub[sizeof(dir) + sizeof(RTS_PRECHECK_WORKSPACE_DIR) + sizeof(RTS_PRECHECK_BROKER_DIR)];
			snprintf(sub, sizeof(sub), "%s/%s", dir, subdirs[i]);
			int r = guest_dir_grant(rd->precheck_root_fd, sub, guest, RTS_PERM_R | RTS_PERM_X);
			if (r < 0) {
				precheck_dir_unmake(rd->precheck_root_fd, dir);
				return r;
			}
		}
	}
	cleanup_free char *path = rts_xasprintf("%s/%s/" RTS_PRECHECK_BROKER_DIR "/%s", rd->cfg->precheck.run_root, dir,
						RUNNERD_BROKER_SOCK);
	int fd = rts_listen_unix_for(path, SOCK_STREAM, 0600, guest);
	if (fd < 0)
		precheck_dir_unmake(rd->precheck_root_fd, dir);
	return fd;
}

int runnerd_precheck_dir_remove(struct runnerd *rd, const char *id)
{
	if (rd->precheck_root_fd < 0 || !rts_turn_id_valid(id))
		return -EINVAL;
	char dir[sizeof(RTS_PRECHECK_DIR_PREFIX) + RTS_TURN_ID_LEN];
	snprintf(dir, sizeof(dir), RTS_PRECHECK_DIR_PREFIX "%s", id);
	return precheck_dir_unmake(rd->precheck_root_fd, dir);
}

void runnerd_precheck_root_clean(int root_fd)
{
	int dfd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		log_warning_errno(-errno, "cannot scan precheck.runRoot for stale precheck run dirs: %m");
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct dirent *de;
	size_t plen = strlen(RTS_PRECHECK_DIR_PREFIX);
	while ((de = readdir(d))) {
		/* Only what we create: precheck-<id>, a directory of ours. */
		if (strncmp(de->d_name, RTS_PRECHECK_DIR_PREFIX, plen) != 0 || !rts_turn_id_valid(de->d_name + plen))
			continue;
		struct stat st;
		if (fstatat(root_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		int r = precheck_dir_unmake(root_fd, de->d_name);
		if (r < 0)
			log_warning_errno(r, "cannot remove the stale run dir of precheck %s: %m", de->d_name + plen);
		else
			log_info("removed the stale run dir of precheck %s", de->d_name + plen);
	}
	closedir(d);
}
