/* SPDX-License-Identifier: Apache-2.0 */
/* Directories statd owns: the state directory, the workspace root and one workspace per
 * channel (DESIGN.md section 3 step 3; seed: directories dedicated to the service account,
 * no group/other permissions, never following symlinks, channel keys hashed). */
#ifndef STATD_WORKSPACE_H
#define STATD_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>

/* rts_private_dir_open() for start-up checks that need no fd: 0 or -errno with the message
 * (naming the config key what, the path and the fix) in err. */
int statd_dir_ensure(const char *what, const char *path, char *err, size_t errlen);

/* statd_dir_ensure(), then lock the directory for this statd (rts_dir_lock). Returns the
 * fd holding the lock, to keep open for the life of the process, or -errno (-EBUSY: another
 * statd owns it) with the message in err. */
int statd_dir_claim(const char *what, const char *path, char *err, size_t errlen);

/* Create (mkdirat 0700, EEXIST is fine) and open workspace_root/<hash> without following
 * symlinks, and verify it: a directory owned by our effective uid with mode exactly 0700.
 * hash must be 64 lowercase hex digits (rts_channel_hash). Returns an O_PATH|O_DIRECTORY
 * fd (caller closes) and stores the absolute path in *path (caller frees); or -errno:
 * -ENOTDIR not a directory (e.g. a symlink), -EPERM wrong owner, -EACCES wrong mode, and
 * *why (static string) says which check failed. Nothing is logged here. */
int statd_workspace_open(const char *workspace_root, const char *hash, char **path, const char **why);

#endif
