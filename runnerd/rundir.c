/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/paths.h"
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

int runnerd_run_dir_create(struct runnerd *rd, const char *turn_id)
{
	if (mkdirat(rd->run_root_fd, turn_id, 0700) < 0)
		return -errno;
	cleanup_free char *path = rts_xasprintf("%s/%s/%s", rd->cfg->run_root, turn_id, RUNNERD_BROKER_SOCK);
	/* The container runs as our uid, so 0700 on the dir and 0600 on the socket are all it
	 * needs to connect; nobody else gets in. */
	int fd = rts_listen_unix(path, SOCK_STREAM, 0600);
	if (fd < 0) {
		unlinkat(rd->run_root_fd, turn_id, AT_REMOVEDIR);
		return fd;
	}
	return fd;
}

int runnerd_run_dir_remove(struct runnerd *rd, const char *turn_id)
{
	char sock[RTS_TURN_ID_LEN + 1 + sizeof(RUNNERD_BROKER_SOCK)];
	snprintf(sock, sizeof(sock), "%s/%s", turn_id, RUNNERD_BROKER_SOCK);
	int r = 0;
	if (unlinkat(rd->run_root_fd, sock, 0) < 0 && errno != ENOENT)
		r = -errno;
	if (unlinkat(rd->run_root_fd, turn_id, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

/* ---- rich channels' broker directories ---- */

static bool prefix_ok(const char *prefix)
{
	return strlen(prefix) == RUNNERD_RICH_PREFIX_LEN && strspn(prefix, "0123456789abcdef") == RUNNERD_RICH_PREFIX_LEN;
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
	if ((st.st_mode & 07777) != 0700 && fchmodat(rd->run_root_fd, dir, 0700, 0) < 0)
		return -errno;
	char sock[sizeof(dir) + 1 + sizeof(RUNNERD_BROKER_SOCK)];
	snprintf(sock, sizeof(sock), "%s/%s", dir, RUNNERD_BROKER_SOCK);
	/* The previous listener's file (brokerd may still serve it, unreachable once this
	 * name is taken; RICH_BIND replaces it there). */
	if (unlinkat(rd->run_root_fd, sock, 0) < 0 && errno != ENOENT)
		return -errno;
	cleanup_free char *path = rts_xasprintf("%s/%s", rd->cfg->run_root, sock);
	return rts_listen_unix(path, SOCK_STREAM, 0600);
}

int runnerd_rich_dir_remove(struct runnerd *rd, const char *prefix)
{
	if (!prefix_ok(prefix))
		return -EINVAL;
	char dir[sizeof(RTS_RICH_DIR_PREFIX) + RUNNERD_RICH_PREFIX_LEN];
	snprintf(dir, sizeof(dir), RTS_RICH_DIR_PREFIX "%s", prefix);
	char sock[sizeof(dir) + 1 + sizeof(RUNNERD_BROKER_SOCK)];
	snprintf(sock, sizeof(sock), "%s/%s", dir, RUNNERD_BROKER_SOCK);
	int r = 0;
	if (unlinkat(rd->run_root_fd, sock, 0) < 0 && errno != ENOENT)
		r = -errno;
	if (unlinkat(rd->run_root_fd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT)
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
