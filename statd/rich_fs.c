/* SPDX-License-Identifier: Apache-2.0 */
/* The files statd writes for a rich channel (statd/rich.h). The workspace is writable by
 * the guest's container, so below the workspace directory every step is relative to a
 * directory descriptor opened without following symbolic links, and every file statd
 * creates is O_CREAT|O_EXCL|O_NOFOLLOW: whatever a guest planted is replaced or refused,
 * never followed out of the workspace. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/memfd.h"
#include "common/util.h"
#include "statd/rich.h"

/* How often a directory is made again when something replaces it between our mkdir and
 * our open (a guest racing us): a few tries, then give up. */
#define SUBDIR_TRIES 4

/* Open the directory name in dirfd without following a symbolic link, making it first
 * when it is missing. Anything else at name (a symbolic link, a file, a fifo) is removed
 * first: unlinkat() removes a link itself, never its target. Returns the fd or -errno. */
static int subdir_ensure(int dirfd, const char *name, const char **why)
{
	for (int i = 0; i < SUBDIR_TRIES; i++) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			return fd;
		int e = errno;
		if (e == ENOENT) {
			if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST) {
				*why = "cannot create a directory in the workspace";
				return -errno;
			}
			continue;
		}
		/* ELOOP: a symbolic link (O_NOFOLLOW); ENOTDIR: a file or another kind. */
		if (e == ELOOP || e == ENOTDIR) {
			if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
				*why = "cannot remove what was planted where a directory belongs";
				return -errno;
			}
			continue;
		}
		*why = "cannot open a directory in the workspace";
		return -e;
	}
	*why = "a directory in the workspace kept being replaced";
	return -EAGAIN;
}

/* ---- .channel-key ---- */

static int key_write(int root, const char *name, const char *channel, const char **why)
{
	char rnd[17];
	int r = rts_random_hex(rnd, 8);
	if (r < 0) {
		*why = "no randomness for a temporary name";
		return r;
	}
	cleanup_free char *tmp = rts_xasprintf(".%s.tmp-%s", name, rnd);
	int fd = openat(root, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		*why = "cannot create the .channel-key record";
		return -errno;
	}
	r = rts_write_all(fd, channel, strlen(channel));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	/* Never over a record that appeared meanwhile: that one is checked instead. */
	if (r == 0 && renameat2(root, tmp, root, name, RENAME_NOREPLACE) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(root, tmp, 0);
		*why = r == -EEXIST ? "the .channel-key record appeared while it was written"
				    : "cannot write the .channel-key record";
		return r;
	}
	(void)fsync(root);
	return 0;
}

int statd_channel_key_check(const char *workspace_root, const char *hash, const char *channel, const char **why)
{
	*why = NULL;
	if (strlen(hash) != RTS_HASH_HEX_LEN || strspn(hash, "0123456789abcdef") != RTS_HASH_HEX_LEN) {
		*why = "invalid workspace name";
		return -EINVAL;
	}
	cleanup_close int root = open(workspace_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0) {
		*why = "cannot open the workspace root";
		return -errno;
	}
	char name[RTS_HASH_HEX_LEN + sizeof(".channel-key")];
	snprintf(name, sizeof(name), "%s.channel-key", hash);
	for (int attempt = 0; attempt < 2; attempt++) {
		cleanup_close int fd = openat(root, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			int r = key_write(root, name, channel, why);
			if (r == -EEXIST)
				continue;
			return r;
		}
		if (fd < 0) {
			*why = errno == ELOOP ? "the .channel-key record is a symbolic link"
					      : "cannot open the .channel-key record";
			return -errno;
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			*why = "cannot stat the .channel-key record";
			return -errno;
		}
		if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size > RTS_CHANNEL_MAX) {
			*why = "the .channel-key record is not a regular file of ours of at most 512 bytes";
			return -EPERM;
		}
		char buf[RTS_CHANNEL_MAX + 1];
		ssize_t n = pread(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			*why = "cannot read the .channel-key record";
			return -errno;
		}
		if ((size_t)n != strlen(channel) || memcmp(buf, channel, (size_t)n) != 0) {
			*why = "the .channel-key record names another channel key (a workspace name collision)";
			return -EEXIST;
		}
		return 0;
	}
	*why = "the .channel-key record keeps changing";
	return -EAGAIN;
}

/* ---- attachments ---- */

int statd_attachment_write(int ws_fd, const char *turn_id, uint32_t index, int data_fd, const char *mime,
			   uint64_t max_bytes, struct statd_attachment *a, const char **why)
{
	*why = NULL;
	if (!rts_turn_id_valid(turn_id) || index >= RTS_RICH_ATTACHMENTS_MAX) {
		*why = "invalid turn id or index";
		return -EINVAL;
	}
	const void *data = NULL;
	size_t len = 0;
	int r = rts_memfd_map(data_fd, max_bytes, &data, &len);
	if (r < 0) {
		*why = r == -EFBIG ? "the attachment is larger than its bound" : "the attachment is not a sealed memfd";
		return r;
	}
	cleanup_close int att = subdir_ensure(ws_fd, "attachments", why);
	if (att < 0) {
		rts_memfd_unmap(data, len);
		return att;
	}
	/* The turn's directory exists already from the turn's earlier attachments; a guest
	 * that guessed the turn id and made it first gains nothing: it is opened without
	 * following a link, and each file is created with O_EXCL, so a planted name refuses
	 * the attachment instead of being written through. */
	if (mkdirat(att, turn_id, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		rts_memfd_unmap(data, len);
		*why = "cannot create the turn's attachment directory";
		return r;
	}
	cleanup_close int dir = openat(att, turn_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0) {
		r = -errno;
		rts_memfd_unmap(data, len);
		*why = "cannot open the turn's attachment directory";
		return r;
	}
	free(a->file_name);
	a->file_name = statd_attachment_name(a->name, a->url);
	cleanup_free char *file = rts_xasprintf("%u-%s", index, a->file_name);
	int fd = openat(dir, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		rts_memfd_unmap(data, len);
		*why = "cannot create the attachment file";
		return r;
	}
	r = rts_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	rts_memfd_unmap(data, len);
	if (r < 0) {
		unlinkat(dir, file, 0);
		*why = "cannot write the attachment file";
		return r;
	}
	free(a->path);
	a->path = rts_xasprintf("/workspace/attachments/%s/%s", turn_id, file);
	free(a->mime);
	a->mime = rts_xstrdup(mime && statd_mime_ok(mime) ? mime : "application/octet-stream");
	a->bytes = len;
	return 0;
}

/* ---- a fresh start ---- */

static bool is_session_file(const char *name)
{
	size_t n = strlen(name);
	return n > 6 && name[0] != '.' && strcmp(name + n - 6, ".jsonl") == 0;
}

/* Move sessions/name to archive/, under another name when it is taken there. */
static int archive_one(int sess, int arch, const char *name)
{
	if (renameat2(sess, name, arch, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	char rnd[9];
	int r = rts_random_hex(rnd, 4);
	if (r < 0)
		return r;
	cleanup_free char *other = rts_xasprintf("%.*s-%s.jsonl", (int)(strlen(name) - 6), name, rnd);
	return renameat2(sess, name, arch, other, RENAME_NOREPLACE) == 0 ? 0 : -errno;
}

int statd_sessions_archive(int ws_fd, unsigned *moved, const char **why)
{
	*moved = 0;
	*why = NULL;
	cleanup_close int sess = subdir_ensure(ws_fd, "sessions", why);
	if (sess < 0)
		return sess;
	cleanup_close int arch = subdir_ensure(sess, "archive", why);
	if (arch < 0)
		return arch;
	/* attachments/ is checked too: the seed names it with the session directories. */
	int att = subdir_ensure(ws_fd, "attachments", why);
	if (att < 0)
		return att;
	close(att);

	int dfd = fcntl(sess, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0) {
		*why = "cannot read the sessions directory";
		return -errno;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		*why = "cannot read the sessions directory";
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!is_session_file(de->d_name))
			continue;
		struct stat st;
		/* Plain files only: a link or directory named *.jsonl stays where it is. */
		if (fstatat(sess, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		r = archive_one(sess, arch, de->d_name);
		if (r < 0) {
			*why = "cannot move a session file into sessions/archive";
			break;
		}
		(*moved)++;
	}
	closedir(d);
	return r;
}
