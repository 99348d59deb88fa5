/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's files in the guest-writable workspace: /workspace/.sandbox/<name>.
 *
 * A previous guest may have left anything there (symlinks, FIFOs, huge or invalid files,
 * other owners' modes). Every access goes through a dirfd of .sandbox opened without
 * following symlinks, every file is opened O_NOFOLLOW|O_NONBLOCK and must be a regular
 * file, every read is bounded, and every write is a new temp file renamed into place. An
 * unusable file is renamed aside (<name>.corrupt-<time>-<hex>), never followed, never
 * silently dropped. */
#ifndef WORKER_STORE_H
#define WORKER_STORE_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>

struct worker_store {
	int dir_fd;	/* .sandbox, O_DIRECTORY; -1 when the store is unusable */
	bool dir_reset; /* .sandbox was not a usable directory and was moved aside */
};

/* Open (creating it 0700 when missing) workspace/.sandbox. A .sandbox that is a symlink,
 * not a directory, or not owned by us is moved aside and replaced by a fresh directory.
 * Returns 0, or -errno when the workspace itself or the fresh directory cannot be used
 * (s->dir_fd stays -1). */
int worker_store_open(struct worker_store *s, const char *workspace);

void worker_store_close(struct worker_store *s);

/* Read the file name (a plain name inside .sandbox) as one strict JSON value of at most
 * WORKER_FILE_READ_MAX bytes. Returns 0 with *out NULL when the file does not exist, 0 with
 * *out (caller owns it), or a negative errno when the file is unusable: -ELOOP (symlink),
 * -EINVAL (not a regular file: FIFO, directory, ...), -EFBIG (too large), -EBADMSG (not
 * strict JSON), or the open/read error. The caller decides whether to move it aside. */
int worker_store_read(struct worker_store *s, const char *name, json_object **out);

/* Rename name aside as <name>.corrupt-<unix time>-<8 hex>, without following it. Returns
 * 0 (also when name no longer exists) or -errno. */
int worker_store_move_aside(struct worker_store *s, const char *name);

/* Replace name atomically with the len bytes at data: a temp file created O_EXCL|O_NOFOLLOW
 * in .sandbox, written, fsync'd, renamed over name, and the directory fsync'd. Whatever
 * name was before (even a directory or a symlink) is replaced, never written through; a
 * non-empty directory in the way is moved aside first. Returns 0 or -errno. */
int worker_store_write(struct worker_store *s, const char *name, const char *data, size_t len);

#endif
