/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/privdir.h"
#include "common/util.h"
#include "statd/workspace.h"

int statd_dir_ensure(const char *what, const char *path, char *err, size_t errlen)
{
	int fd = rts_private_dir_open(what, path, err, errlen);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int statd_dir_claim(const char *what, const char *path, char *err, size_t errlen)
{
	int fd = rts_private_dir_open(what, path, err, errlen);
	if (fd < 0)
		return fd;
	int r = rts_dir_lock(fd, "roundtable-sandbox-statd", what, path, err, errlen);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
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
