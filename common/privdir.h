/* SPDX-License-Identifier: Apache-2.0 */
/* The roots every daemon keeps (runRoot, workspaceRoot, the state file's directory). */
#ifndef RTS_PRIVDIR_H
#define RTS_PRIVDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The one account, besides the owner, that a private directory may let in, and how far
 * (RTS_PERM_* of common/acl.h), by a POSIX ACL entry: in accounts mode statd lets runnerd
 * search workspaceRoot (runnerd looks a workspace up by name right before docker run,
 * and may enter none). */
struct rts_dir_grant {
	uid_t uid;
	unsigned perms;
};

/* Make sure path is a private directory of this service account and open it: missing
 * components are created 0700 (mkdir -p; existing parents are left alone), then path is
 * opened O_DIRECTORY|O_NOFOLLOW and must be a directory (not a symbolic link) owned by our
 * effective uid that gives nobody else any access (seed: directories dedicated to the
 * package, owned by the service account, insecure permissions refused at start-up): no
 * group or other permission bits, no ACL entry for anyone, no default ACL; except, when
 * grant is not NULL, an ACL entry that gives grant->uid at most grant->perms (the caller
 * adds that entry itself, rts_acl_grant()). No ancestor may be writable by other users
 * without the sticky bit: whoever can write an ancestor can rename our directory away and
 * put their own in its place. what names the config key for messages ("runRoot",
 * "workspaceRoot", "stateFile"). Returns an O_RDONLY|O_DIRECTORY fd (caller closes), or
 * -errno with one line in err that names the key and the path and says how to fix it (a
 * chown, chmod or setfacl command). */
int rts_private_dir_open_grant(const char *what, const char *path, const struct rts_dir_grant *grant, char *err,
			       size_t errlen);

/* rts_private_dir_open_grant() without a grant. */
int rts_private_dir_open(const char *what, const char *path, char *err, size_t errlen);

/* The rules rts_private_dir_open_grant() applies to the directory itself: st is its
 * lstat()/fstat() result, uid the account that must own it, and its ACLs are read from fd
 * (O_RDONLY, when >= 0) or path. 0, -ENOTDIR (not a directory, a symbolic link included),
 * -EPERM (another owner), -EACCES (group or other permission bits, or an ACL that lets
 * another account in beyond grant, or a default ACL), or -errno when the ACLs cannot be
 * read. doctor applies them with the owner the daemon would have. */
int rts_private_dir_judge_acl(int fd, const char *path, const struct stat *st, uid_t uid,
			      const struct rts_dir_grant *grant);

/* The owner and type rules alone, on a stat result: 0, -ENOTDIR or -EPERM. */
int rts_private_dir_judge(const struct stat *st, uid_t uid);

/* The rule for every ancestor of a private directory: true when anyone may rename its
 * entries (writable by other users without the sticky bit), and so swap ours for theirs. */
bool rts_dir_swappable(const struct stat *st);

/* Call fn for each ancestor of the absolute path (not path itself), from "/" down, with
 * its stat() (symbolic links followed, as the kernel does resolving path). Stops at the
 * first that cannot be stat()ed (not there yet; the rest is not either) and returns 0,
 * or at the first non-zero fn() result and returns it. */
int rts_dir_ancestors(const char *path, int (*fn)(const char *dir, const struct stat *st, void *arg), void *arg);

/* Take an exclusive advisory lock (flock) on the directory fd, held until the fd is closed
 * (keep it open for the life of the process), so that a second daemon for the same
 * installation refuses to start instead of removing the first one's containers or writing
 * its state file (seed: only one host process may own these directories). prog names the
 * caller in the message. Returns 0, -EBUSY with "another <prog> already uses <key> <path>"
 * in err, or -errno. */
int rts_dir_lock(int fd, const char *prog, const char *what, const char *path, char *err, size_t errlen);

#endif
