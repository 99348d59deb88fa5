/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/acl.h"
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

int statd_dir_claim(const char *what, const char *path, const struct rts_dir_grant *grant, char *err,
		    size_t errlen)
{
	int fd = rts_private_dir_open_grant(what, path, grant, err, errlen);
	if (fd < 0)
		return fd;
	int r = rts_dir_lock(fd, "roundtable-sandbox-statd", what, path, err, errlen);
	if (r == 0 && grant) {
		/* Every start: systemd's StateDirectoryMode= chmod resets the ACL's mask. */
		r = rts_acl_grant(fd, NULL, RTS_PERM_R | RTS_PERM_W | RTS_PERM_X, grant->uid, grant->perms);
		if (r < 0)
			snprintf(err, errlen, "%s: cannot give uid %lu search permission on %s by an ACL entry: %s%s", what,
				 (unsigned long)grant->uid, path, strerror(-r),
				 r == -EOPNOTSUPP ? " (mount that file system with ACL support)" : "");
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

#define RW (RTS_PERM_R | RTS_PERM_W)
#define RWX (RTS_PERM_R | RTS_PERM_W | RTS_PERM_X)

/* Has what proc names (st: its stat) the guest's share (statd_guest_share())? A
 * directory's setgid bit (a setgid parent passes it on) only picks the group of new
 * entries, which the ACL gives nothing: it does not count. */
static bool guest_shared_ok(const char *proc, const struct stat *st, bool dir, uid_t guest)
{
	mode_t want = dir ? (S_ISVTX | 0770) : 0660;
	mode_t ignored = dir ? S_ISGID : 0;
	unsigned perms = dir ? RWX : RW;
	struct rts_acl_view v;
	return (st->st_mode & 07777 & ~ignored) == want && rts_acl_view(-1, proc, &v) == 0 &&
	       rts_acl_is_grant(&v, perms, guest, perms);
}

int statd_guest_share(int fd, bool dir, uid_t guest, mode_t *was)
{
	/* Through /proc/self/fd/N: no name lookup, and an O_PATH fd will do. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (guest_shared_ok(proc, &st, dir, guest))
		return 0;
	if (was)
		*was = st.st_mode & 07777;
	/* chmod first (it also sets the mask, to nothing), then the ACL, which keeps the
	 * sticky bit. */
	if (chmod(proc, dir ? (S_ISVTX | 0700) : 0600) < 0)
		return -errno;
	unsigned perms = dir ? RWX : RW;
	int r = rts_acl_grant(-1, proc, perms, guest, perms);
	if (r == 0 && dir)
		r = rts_acl_drop_default(proc);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0 || !guest_shared_ok(proc, &st, dir, guest))
		return -EACCES;
	return 1;
}

int statd_workspace_open(const char *workspace_root, const char *hash, uid_t guest, char **path, const char **why)
{
	*path = NULL;
	*why = NULL;
	if (!rts_hex_valid(hash, RTS_HASH_HEX_LEN)) {
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
	bool created = mkdirat(root, hash, 0700) == 0;
	if (!created && errno != EEXIST) {
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
	if (guest != (uid_t)-1) {
		/* Not shared yet when new, made in single-account mode, or changed by root: only
		 * the owner (us) or root can change a directory's mode or ACL. */
		mode_t old = 0;
		int r = statd_guest_share(fd, true, guest, &old);
		if (r < 0) {
			*why = r == -EOPNOTSUPP ? "the file system has no ACLs, which sharing the workspace with the guest account needs"
						: "mode or ACL is not the guest's share and could not be restored";
			return r;
		}
		if (r > 0 && !created)
			log_notice("workspace %.12s: mode %04o or ACL was not the guest account's share; restored", hash,
				   (unsigned)old);
		*path = rts_xasprintf("%s/%s", workspace_root, hash);
		return steal_fd(&fd);
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
