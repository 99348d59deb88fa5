#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

/* mkdir -p, each missing component 0700 (seed: missing roots are created owned by the
 * service account with no group/other permissions). Existing components are left as they
 * are; only runRoot itself is judged. */
static int mkdir_parents(const char *path)
{
	cleanup_free char *p = rts_xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int runnerd_run_root_open(const char *run_root, char *err, size_t errlen)
{
	/* runRoot/<16 hex>/broker.sock must fit (seed: at most 100 characters). */
	size_t len = strlen(run_root) + 1 + RTS_TURN_ID_LEN + 1 + strlen(RUNNERD_BROKER_SOCK);
	if (len > RUNNERD_BROKER_PATH_MAX) {
		snprintf(err, errlen,
			 "runRoot: %s is too long: the broker socket path %s/<turn id>/%s would be %zu characters, "
			 "the limit is %u (use a runRoot of at most %zu characters)",
			 run_root, run_root, RUNNERD_BROKER_SOCK, len, RUNNERD_BROKER_PATH_MAX,
			 RUNNERD_BROKER_PATH_MAX - (len - strlen(run_root)));
		return -ENAMETOOLONG;
	}
	int r = mkdir_parents(run_root);
	if (r < 0) {
		snprintf(err, errlen, "runRoot: cannot create %s: %s (create it, owned by uid %lu, mode 0700)", run_root,
			 strerror(-r), (unsigned long)geteuid());
		return r;
	}
	/* O_NOFOLLOW: the run root itself must not be a symlink to somewhere else. */
	int fd = open(run_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		struct stat lst;
		if (e == EACCES && lstat(run_root, &lst) == 0 && lst.st_uid != geteuid())
			snprintf(err, errlen,
				 "runRoot: %s is owned by uid %lu, not by this service account (uid %lu): fix with "
				 "chown %lu %s",
				 run_root, (unsigned long)lst.st_uid, (unsigned long)geteuid(), (unsigned long)geteuid(),
				 run_root);
		else
			snprintf(err, errlen, "runRoot: %s: %s", run_root,
				 e == ELOOP || e == ENOTDIR ? "is not a directory (symlinks are refused)" : strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		snprintf(err, errlen, "runRoot: %s: %s", run_root, strerror(e));
		return -e;
	}
	/* Seed: directories dedicated to the package, owned by the service account, no
	 * group/other permissions. */
	if (st.st_uid != geteuid()) {
		close(fd);
		snprintf(err, errlen,
			 "runRoot: %s is owned by uid %lu, not by this service account (uid %lu): fix with chown %lu %s",
			 run_root, (unsigned long)st.st_uid, (unsigned long)geteuid(), (unsigned long)geteuid(), run_root);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		close(fd);
		snprintf(err, errlen,
			 "runRoot: %s has mode %04o; it must have no group/other permissions: fix with chmod 0700 %s",
			 run_root, (unsigned)(st.st_mode & 07777), run_root);
		return -EPERM;
	}
	return fd;
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
