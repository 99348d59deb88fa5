/* SPDX-License-Identifier: Apache-2.0 */
/* The files statd writes for a rich channel (statd/rich.h). The workspace is writable by
 * the guest's container, so below the workspace directory every step is relative to a
 * directory descriptor opened without following symbolic links, and every file statd
 * creates is O_CREAT|O_EXCL|O_NOFOLLOW: whatever a guest planted is replaced or refused,
 * never followed out of the workspace.
 *
 * In accounts mode (DESIGN.md 8.1) the container runs as the guest account, so what statd
 * makes for it is shared the way the workspace is: a directory statd's, mode 01770 with
 * the ACL "owner rwx, guest rwx, nothing else" (the guest creates and removes its own
 * entries; the sticky bit keeps statd's entries statd's, so sessions/archive and a turn's
 * attachment directory stay where statd made them), an attachment file statd's with
 * "owner rw, guest rw". statd only ever writes into directories it owns: one a guest made
 * where statd's belongs is renamed aside (in the same directory, which needs no
 * permission on it) and statd makes its own. */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/util.h"
#include "statd/rich.h"
#include "statd/workspace.h"

/* How often a directory is made again when something replaces it between our mkdir and
 * our open (a guest racing us): a few tries, then give up. */
#define SUBDIR_TRIES 4

/* Move the directory name in dirfd, which someone else made, aside to name.guest-XXXXXXXX
 * in the same directory (statd owns dirfd: the sticky bit lets it, and a rename within
 * one directory needs no permission on the entry). Returns 0 or -errno. */
static int move_aside(int dirfd, const char *name)
{
	char rnd[9];
	int r = rts_random_hex(rnd, 4);
	if (r < 0)
		return r;
	cleanup_free char *other = rts_xasprintf("%s.guest-%s", name, rnd);
	if (renameat2(dirfd, name, dirfd, other, RENAME_NOREPLACE) < 0)
		return errno == ENOENT ? 0 : -errno;
	log_notice("a directory %s statd did not make was moved aside to %s", name, other);
	return 0;
}

/* Open the directory name in dirfd without following a symbolic link, making it first
 * when it is missing, and make it statd's and shared with guest ((uid_t)-1: single-account
 * mode, nobody). Anything else at name (a symbolic link, a file, a fifo) is removed first:
 * unlinkat() removes a link itself, never its target; a directory someone else owns is
 * moved aside (move_aside()). Returns the fd or -errno. */
static int subdir_ensure(int dirfd, const char *name, uid_t guest, const char **why)
{
	for (int i = 0; i < SUBDIR_TRIES; i++) {
		/* O_PATH first: it needs no permission on the directory, which a guest's may
		 * deny us, and tells whose it is before anything is done in it. */
		cleanup_close int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (pfd >= 0 && fstat(pfd, &st) < 0) {
			*why = "cannot stat a directory in the workspace";
			return -errno;
		}
		if (pfd >= 0 && S_ISDIR(st.st_mode)) {
			if (st.st_uid != geteuid()) {
				/* A guest's: it could take statd's access away at any time. */
				int r = move_aside(dirfd, name);
				if (r < 0) {
					*why = "cannot move aside a directory the guest made where statd's belongs";
					return r;
				}
				continue;
			}
			/* Ours: reopen that very directory for reading (no second name lookup). */
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
			int fd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				*why = "cannot open a directory in the workspace";
				return -errno;
			}
			if (guest != (uid_t)-1) {
				int r = statd_guest_share(fd, true, guest, NULL);
				if (r < 0) {
					close(fd);
					*why = r == -EOPNOTSUPP ? "the file system has no ACLs, which sharing with the guest account needs"
								: "cannot share a directory in the workspace with the guest account";
					return r;
				}
			}
			return fd;
		}
		int e = pfd >= 0 ? ENOTDIR : errno;
		if (e == ENOENT) {
			if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST) {
				*why = "cannot create a directory in the workspace";
				return -errno;
			}
			continue;
		}
		/* ELOOP, ENOTDIR: a symbolic link (O_NOFOLLOW), a file or another kind. */
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
	if (!rts_hex_valid(hash, RTS_HASH_HEX_LEN)) {
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

int statd_attachment_write(int ws_fd, uid_t guest, const char *turn_id, uint32_t index, int data_fd,
			   const char *mime, uint64_t max_bytes, struct statd_attachment *a, const char **why)
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
	cleanup_close int att = subdir_ensure(ws_fd, "attachments", guest, why);
	if (att < 0) {
		rts_memfd_unmap(data, len);
		return att;
	}
	/* The turn's directory exists already from the turn's earlier attachments. One a
	 * guest made first (having guessed the turn id) is moved aside; each file is created
	 * with O_EXCL|O_NOFOLLOW, so a name planted in statd's directory refuses the
	 * attachment instead of being written through. */
	cleanup_close int dir = subdir_ensure(att, turn_id, guest, why);
	if (dir < 0) {
		rts_memfd_unmap(data, len);
		return dir;
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
	r = guest == (uid_t)-1 ? 0 : statd_guest_share(fd, false, guest, NULL);
	if (r >= 0)
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

/* Make or restore sessions/, sessions/archive/ and attachments/; return the fds of the
 * first two in *sess and *arch. Returns 0 or -errno with *why. */
static int dirs_ensure(int ws_fd, uid_t guest, int *sess, int *arch, const char **why)
{
	*sess = *arch = -1;
	cleanup_close int s = subdir_ensure(ws_fd, "sessions", guest, why);
	if (s < 0)
		return s;
	cleanup_close int a = subdir_ensure(s, "archive", guest, why);
	if (a < 0)
		return a;
	/* attachments/ is checked too: the seed names it with the session directories. */
	int att = subdir_ensure(ws_fd, "attachments", guest, why);
	if (att < 0)
		return att;
	close(att);
	*sess = steal_fd(&s);
	*arch = steal_fd(&a);
	return 0;
}

int statd_rich_dirs_ensure(int ws_fd, uid_t guest, const char **why)
{
	*why = NULL;
	int sess, arch;
	int r = dirs_ensure(ws_fd, guest, &sess, &arch, why);
	if (r < 0)
		return r;
	close(sess);
	close(arch);
	return 0;
}

int statd_sessions_archive(int ws_fd, uid_t guest, unsigned *moved, const char **why)
{
	*moved = 0;
	*why = NULL;
	int s, a;
	int r = dirs_ensure(ws_fd, guest, &s, &a, why);
	if (r < 0)
		return r;
	cleanup_close int sess = s;
	cleanup_close int arch = a;

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
