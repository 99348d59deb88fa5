/* SPDX-License-Identifier: Apache-2.0 */
/* Directories statd owns: the state directory, the workspace root and one workspace per
 * channel (DESIGN.md section 3 step 3; seed: directories dedicated to the service account,
 * no group/other permissions, never following symlinks, channel keys hashed). */
#ifndef STATD_WORKSPACE_H
#define STATD_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/privdir.h"

/* rts_private_dir_open() for start-up checks that need no fd: 0 or -errno with the message
 * (naming the config key what, the path and the fix) in err. */
int statd_dir_ensure(const char *what, const char *path, char *err, size_t errlen);

/* rts_private_dir_open_grant() (grant may be NULL), then lock the directory for this statd
 * (rts_dir_lock) and, with a grant, give grant->uid exactly grant->perms by an ACL entry
 * (accounts mode: runnerd may search workspaceRoot). Returns the fd holding the lock, to
 * keep open for the life of the process, or -errno (-EBUSY: another statd owns it) with
 * the message in err. */
int statd_dir_claim(const char *what, const char *path, const struct rts_dir_grant *grant, char *err,
		    size_t errlen);

/* Create (mkdirat, EEXIST is fine) and open workspace_root/<hash> without following
 * symlinks, and verify it: a directory owned by our effective uid, and
 *   - single-account mode (guest is (uid_t)-1): mode exactly 0700;
 *   - accounts mode (guest is the guest account's uid): shared with the guest and nobody
 *     else, and the guest can neither take it over nor lock statd out: mode 01770 where
 *     the group bits are the mask of the ACL "owner rwx, guest rwx, group and others
 *     nothing", no default ACL. The sticky bit keeps the guest from renaming or removing
 *     entries statd made; statd owns the directory itself, so the guest cannot change
 *     its mode or ACL (roundtable-sandbox(7) "Accounts" has the whole model).
 * A mode or ACL that is not that is restored through the fd (no name lookup) and checked
 * again; a restore of a directory that existed is logged. hash must be 64 lowercase hex
 * digits (rts_channel_hash). Returns an O_PATH|O_DIRECTORY fd (caller closes) and stores
 * the absolute path in *path (caller frees); or -errno: -ENOTDIR not a directory (e.g. a
 * symlink), -EPERM wrong owner, -EACCES wrong mode or ACL that could not be restored
 * (-EOPNOTSUPP: no ACLs on that file system), and *why (static string) says which check
 * failed. Nothing else is logged here. */
int statd_workspace_open(const char *workspace_root, const char *hash, uid_t guest, char **path, const char **why);

/* Accounts mode: give the guest account (uid guest) its share of what statd made for it,
 * unless it has it already. A directory (dir): mode 01770 where the group bits are the
 * mask of the ACL "owner rwx, guest rwx, group and others nothing", no default ACL (the
 * workspace, and what statd makes in a rich channel's); a file: mode 0660 with "owner rw,
 * guest rw". fd must be statd's own (the caller checked); it may be O_PATH (the change is
 * made through /proc/self/fd/N, never by name). Returns 0 when it was shared already, 1
 * when it was changed (and checked again; *was, unless NULL, gets the mode it had), or
 * -errno: -EOPNOTSUPP no ACLs on the file system, -EACCES not shared after the change. */
int statd_guest_share(int fd, bool dir, uid_t guest, mode_t *was);

#endif
