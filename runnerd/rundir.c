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
#include "common/privdir.h"
#include "common/sock.h"
#include "common/util.h"
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
	/* Single-account mode: the container runs as our uid, so 0700 on the dir and 0600 on
	 * the socket are all it needs to connect. Accounts mode: the guest account gets search
	 * on the dir and read/write on the socket by ACL entries, nobody else anything; runRoot
	 * stays 0700, so the guest reaches them only through this turn's bind mount. */
	uid_t guest = rd->cfg->accounts.present ? rd->uid : (uid_t)-1;
	int r = 0;
	if (guest != (uid_t)-1) {
		cleanup_close int dfd = openat(rd->run_root_fd, turn_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = dfd < 0 ? -errno : rts_acl_grant(dfd, NULL, RTS_PERM_R | RTS_PERM_W | RTS_PERM_X, guest, RTS_PERM_X);
	}
	cleanup_free char *path = rts_xasprintf("%s/%s/%s", rd->cfg->run_root, turn_id, RUNNERD_BROKER_SOCK);
	int fd = r < 0 ? r : rts_listen_unix_for(path, SOCK_STREAM, 0600, guest);
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
