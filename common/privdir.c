/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/acl.h"
#include "common/privdir.h"
#include "common/util.h"

/* mkdir -p with 0700 for each missing component. */
static int mkdir_parents(const char *path)
{
	cleanup_free char *p = rts_xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int rts_private_dir_judge(const struct stat *st, uid_t uid)
{
	if (!S_ISDIR(st->st_mode))
		return -ENOTDIR;
	if (st->st_uid != uid)
		return -EPERM;
	return 0;
}

int rts_private_dir_judge_acl(int fd, const char *path, const struct stat *st, uid_t uid,
			      const struct rts_dir_grant *grant)
{
	int r = rts_private_dir_judge(st, uid);
	if (r < 0)
		return r;
	if (st->st_mode & 07)
		return -EACCES;
	/* The group bits are the ACL's mask when there is one: the entries decide. */
	struct rts_acl_view v;
	r = rts_acl_view(fd, path, &v);
	if (r < 0)
		return r;
	if (!rts_acl_private_but(&v, grant ? grant->uid : (uid_t)-1, grant ? grant->perms : 0))
		return -EACCES;
	return 0;
}

bool rts_dir_swappable(const struct stat *st)
{
	return (st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX);
}

int rts_dir_ancestors(const char *path, int (*fn)(const char *dir, const struct stat *st, void *arg), void *arg)
{
	size_t n = strlen(path);
	for (size_t i = 0; i < n; i++) {
		if (path[i] != '/')
			continue;
		/* "/a/b/c" gives "/", "/a" and "/a/b"; a symbolic link is judged by its target. */
		cleanup_free char *dir = i == 0 ? rts_xstrdup("/") : rts_xstrndup(path, i);
		struct stat st;
		if (stat(dir, &st) < 0)
			return 0;
		int r = fn(dir, &st, arg);
		if (r != 0)
			return r;
	}
	return 0;
}

/* The owner and type rules, on a stat result, with the message. */
static int judge(const char *what, const char *path, const struct stat *st, char *err, size_t errlen)
{
	unsigned long uid = (unsigned long)geteuid();
	int r = rts_private_dir_judge(st, geteuid());
	if (r == -ENOTDIR) {
		snprintf(err, errlen, "%s: %s is not a directory (symbolic links are refused): point the config at the "
				      "real directory",
			 what, path);
		return r;
	}
	if (r == -EPERM) {
		snprintf(err, errlen,
			 "%s: %s is owned by uid %lu, not by this service account (uid %lu): fix with chown %lu %s", what,
			 path, (unsigned long)st->st_uid, uid, uid, path);
		return r;
	}
	return 0;
}

/* The access rules, on the open directory, with the message. */
static int judge_access(const char *what, const char *path, int fd, const struct stat *st,
			const struct rts_dir_grant *grant, char *err, size_t errlen)
{
	int r = rts_private_dir_judge_acl(fd, path, st, geteuid(), grant);
	if (r == -EACCES)
		snprintf(err, errlen,
			 "%s: %s has mode %04o or an ACL that gives another account access: fix with chmod 0700 %s && "
			 "setfacl -b %s%s",
			 what, path, (unsigned)(st->st_mode & 07777), path, path,
			 grant ? " (the daemon adds the one ACL entry it needs itself)" : "");
	else if (r < 0)
		snprintf(err, errlen, "%s: cannot read the ACL of %s: %s", what, path, strerror(-r));
	return r;
}

struct ancestors_msg {
	const char *what, *path;
	char *err;
	size_t errlen;
};

static int ancestor_check(const char *dir, const struct stat *st, void *arg)
{
	struct ancestors_msg *m = arg;
	if (!rts_dir_swappable(st))
		return 0;
	snprintf(m->err, m->errlen,
		 "%s: %s is writable by other users without the sticky bit, so anyone could replace %s: fix with "
		 "chmod o-w %s (or move the directory)",
		 m->what, dir, m->path, dir);
	return -EPERM;
}

/* Every ancestor of path (following symbolic links, as the kernel does when it resolves
 * the path): none may be writable by others without the sticky bit. */
static int ancestors_check(const char *what, const char *path, char *err, size_t errlen)
{
	struct ancestors_msg m = {.what = what, .path = path, .err = err, .errlen = errlen};
	return rts_dir_ancestors(path, ancestor_check, &m);
}

int rts_private_dir_open_grant(const char *what, const char *path, const struct rts_dir_grant *grant, char *err,
			       size_t errlen)
{
	int r = mkdir_parents(path);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot create %s: %s (create it, owned by uid %lu, mode 0700)", what, path,
			 strerror(-r), (unsigned long)geteuid());
		return r;
	}
	r = ancestors_check(what, path, err, errlen);
	if (r < 0)
		return r;
	/* lstat first, for a message that says what is wrong even when we cannot open it
	 * (a directory of another owner with mode 0700, a symbolic link). */
	struct stat st;
	if (lstat(path, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot stat %s: %s", what, path, strerror(-r));
		return r;
	}
	r = judge(what, path, &st, err, errlen);
	if (r < 0)
		return r;
	/* Then the verdict that counts, on the directory we actually hold. */
	cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot open %s: %s", what, path, strerror(-r));
		return r;
	}
	r = judge(what, path, &st, err, errlen);
	if (r < 0)
		return r;
	r = judge_access(what, path, fd, &st, grant, err, errlen);
	if (r < 0)
		return r;
	return steal_fd(&fd);
}

int rts_private_dir_open(const char *what, const char *path, char *err, size_t errlen)
{
	return rts_private_dir_open_grant(what, path, NULL, err, errlen);
}

int rts_dir_lock(int fd, const char *prog, const char *what, const char *path, char *err, size_t errlen)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	int e = errno;
	if (e == EWOULDBLOCK) {
		snprintf(err, errlen, "%s: another %s already uses %s (one per installation); stop it first", what, prog,
			 path);
		return -EBUSY;
	}
	snprintf(err, errlen, "%s: cannot lock %s: %s", what, path, strerror(e));
	return -e;
}
