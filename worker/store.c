/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "common/json.h"
#include "common/util.h"
#include "worker/store.h"
#include "worker/worker.h"

#define SANDBOX_DIR ".sandbox"

/* name -> name.corrupt-<time>-<hex> in dir_fd. RENAME_NOREPLACE so that a name a guest
 * planted is never clobbered; the random part makes a collision a retry, not a loss. */
static int move_aside_at(int dir_fd, const char *name)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		char hex[9], aside[256];
		int r = rts_random_hex(hex, 4);
		if (r < 0)
			return r;
		snprintf(aside, sizeof(aside), "%s.corrupt-%lld-%s", name, (long long)time(NULL), hex);
		if (renameat2(dir_fd, name, dir_fd, aside, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == ENOENT)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* .sandbox must be a directory we own; a mode a guest changed is put back to 0700. */
static bool dir_usable(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return false;
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
		return false;
	return true;
}

int worker_store_open(struct worker_store *s, const char *workspace)
{
	s->dir_fd = -1;
	s->dir_reset = false;
	cleanup_close int ws = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		return -errno;

	/* Bounded: each round either succeeds, creates the directory, or moves one thing
	 * aside; a guest racing us would need code running in this container right now. */
	for (int round = 0; round < 4; round++) {
		int fd = openat(ws, SANDBOX_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (mkdirat(ws, SANDBOX_DIR, 0700) < 0 && errno != EEXIST)
				return -errno;
			continue;
		}
		if (fd >= 0) {
			if (dir_usable(fd)) {
				s->dir_fd = fd;
				return 0;
			}
			close(fd);
		} else if (errno != ELOOP && errno != ENOTDIR && errno != EACCES) {
			return -errno;
		}
		/* A symlink, a file, a FIFO or a directory we cannot use. */
		int r = move_aside_at(ws, SANDBOX_DIR);
		if (r < 0)
			return r;
		s->dir_reset = true;
	}
	return -ELOOP;
}

void worker_store_close(struct worker_store *s)
{
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	s->dir_fd = -1;
}

int worker_store_read(struct worker_store *s, const char *name, json_object **out)
{
	*out = NULL;
	if (s->dir_fd < 0)
		return -EBADF;
	/* O_NONBLOCK: opening a FIFO for reading must not wait for a writer. */
	cleanup_close int fd = openat(s->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size > (off_t)WORKER_FILE_READ_MAX)
		return -EFBIG;

	cleanup_free char *buf = rts_xmalloc(WORKER_FILE_READ_MAX + 1);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, WORKER_FILE_READ_MAX + 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		/* The file may grow after fstat(). */
		if (len > WORKER_FILE_READ_MAX)
			return -EFBIG;
	}
	const char *why;
	if (rts_json_parse(buf, len, RTS_JSON_DEPTH_MAX, out, &why) < 0)
		return -EBADMSG;
	return 0;
}

int worker_store_move_aside(struct worker_store *s, const char *name)
{
	if (s->dir_fd < 0)
		return -EBADF;
	return move_aside_at(s->dir_fd, name);
}

int worker_store_write(struct worker_store *s, const char *name, const char *data, size_t len)
{
	if (s->dir_fd < 0)
		return -EBADF;
	char hex[17], tmp[256];
	int r = rts_random_hex(hex, 8);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), ".%s.tmp-%s", name, hex);

	cleanup_close int fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = rts_write_all(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && close(steal_fd(&fd)) < 0)
		r = -errno;
	if (r == 0 && renameat(s->dir_fd, tmp, s->dir_fd, name) < 0) {
		r = -errno;
		/* A directory sits where the file belongs: keep it, but out of the way. */
		if (r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST) {
			r = move_aside_at(s->dir_fd, name);
			if (r == 0 && renameat(s->dir_fd, tmp, s->dir_fd, name) < 0)
				r = -errno;
		}
	}
	if (r < 0) {
		unlinkat(s->dir_fd, tmp, 0);
		return r;
	}
	/* The rename is durable once the directory is. */
	if (fsync(s->dir_fd) < 0)
		return -errno;
	return 0;
}
