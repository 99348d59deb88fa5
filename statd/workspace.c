#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/util.h"
#include "statd/workspace.h"

/* mkdir -p with 0700 for each missing component. Existing components are left alone:
 * only the final directory is ours to judge. */
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

/* The ownership and mode rules, on a stat result. */
static int dir_judge(const char *path, const struct stat *st, char *err, size_t errlen)
{
	uid_t uid = geteuid();
	if (S_ISLNK(st->st_mode) || !S_ISDIR(st->st_mode)) {
		snprintf(err, errlen, "%s: not a directory (symbolic links are refused): point the config at the real "
				      "directory",
			 path);
		return -ENOTDIR;
	}
	if (st->st_uid != uid) {
		snprintf(err, errlen, "%s: owned by uid %lu, not by this service account (uid %lu): fix with chown %lu %s",
			 path, (unsigned long)st->st_uid, (unsigned long)uid, (unsigned long)uid, path);
		return -EPERM;
	}
	if (st->st_mode & 077) {
		snprintf(err, errlen, "%s: mode %04o gives group/other access: fix with chmod 0700 %s", path,
			 (unsigned)(st->st_mode & 07777), path);
		return -EACCES;
	}
	return 0;
}

int statd_dir_ensure(const char *path, char *err, size_t errlen)
{
	int r = mkdir_parents(path);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot create directory: %s (create it, owned by uid %lu, mode 0700)", path,
			 strerror(-r), (unsigned long)geteuid());
		return r;
	}
	/* lstat first, for a message that says what is wrong even when we cannot open it. */
	struct stat st;
	if (lstat(path, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(-r));
		return r;
	}
	r = dir_judge(path, &st, err, errlen);
	if (r < 0)
		return r;
	/* Then the verdict that counts, on the directory itself. */
	cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}
	return dir_judge(path, &st, err, errlen);
}

static bool prefix_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool statd_path_within(const char *path, const char *dir)
{
	if (prefix_within(path, dir))
		return true;
	/* The file itself may not exist yet: resolve its directory. */
	cleanup_free char *copy = rts_xstrdup(path);
	char *slash = strrchr(copy, '/');
	if (slash && slash != copy)
		*slash = '\0';
	cleanup_free char *rp = realpath(copy, NULL);
	cleanup_free char *rd = realpath(dir, NULL);
	if (!rp || !rd)
		return false;
	return prefix_within(rp, rd);
}

int statd_workspace_open(const char *workspace_root, const char *hash, char **path, const char **why)
{
	*path = NULL;
	*why = NULL;
	if (strlen(hash) != RTS_HASH_HEX_LEN || strspn(hash, "0123456789abcdef") != RTS_HASH_HEX_LEN) {
		*why = "invalid workspace name";
		return -EINVAL;
	}
	/* The root was checked at start-up; open it again per turn so a root that was moved
	 * or replaced since is noticed instead of used through a stale fd. */
	cleanup_close int root = open(workspace_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0) {
		*why = "cannot open the workspace root";
		return -errno;
	}
	if (mkdirat(root, hash, 0700) < 0 && errno != EEXIST) {
		*why = "cannot create the workspace";
		return -errno;
	}
	cleanup_close int fd = openat(root, hash, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		*why = e == ENOTDIR || e == ELOOP ? "not a directory (or a symbolic link)" : "cannot open the workspace";
		return e == ELOOP ? -ENOTDIR : -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		*why = "cannot stat the workspace";
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		*why = "not a directory";
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		*why = "not owned by the service account";
		return -EPERM;
	}
	if ((st.st_mode & 07777) != 0700) {
		/* Containers run as the service account, so a guest can chmod its own workspace;
		 * that must not lock the channel out. Restore the mode through the O_PATH fd (no
		 * name lookup, so nothing can be swapped in between), then check again. */
		unsigned old = (unsigned)(st.st_mode & 07777);
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (chmod(proc, 0700) < 0 || fstat(fd, &st) < 0 || (st.st_mode & 07777) != 0700) {
			*why = "mode is not 0700 and could not be restored";
			return -EACCES;
		}
		log_notice("workspace %.12s: mode was %04o, restored to 0700", hash, old);
	}
	*path = rts_xasprintf("%s/%s", workspace_root, hash);
	return steal_fd(&fd);
}
