/* SPDX-License-Identifier: Apache-2.0 */
/* The roots every daemon keeps (runRoot, workspaceRoot, the state file's directory). */
#ifndef RTS_PRIVDIR_H
#define RTS_PRIVDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Make sure path is a private directory of this service account and open it: missing
 * components are created 0700 (mkdir -p; existing parents are left alone), then path is
 * opened O_DIRECTORY|O_NOFOLLOW and must be a directory (not a symbolic link) owned by our
 * effective uid with no group/other permission bits (seed: directories dedicated to the
 * package, owned by the service account, insecure permissions refused at start-up). No
 * ancestor may be writable by other users without the sticky bit: whoever can write an
 * ancestor can rename our directory away and put their own in its place.
 * what names the config key for messages ("runRoot", "workspaceRoot", "stateFile").
 * Returns an O_RDONLY|O_DIRECTORY fd (caller closes), or -errno with one line in err that
 * names the key and the path and says how to fix it (a chown or chmod command). */
int rts_private_dir_open(const char *what, const char *path, char *err, size_t errlen);

/* The rules rts_private_dir_open() applies to the directory itself, on its lstat()/fstat()
 * result and the uid that must own it: 0, -ENOTDIR (not a directory, a symbolic link
 * included), -EPERM (another owner) or -EACCES (group or other permission bits). doctor
 * applies them with the service account's uid. */
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
