/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/acl.h"
#include "common/sock.h"
#include "common/util.h"

char *rts_runtime_path(const char *runtime_dir, const char *name)
{
	return rts_xasprintf("%s/%s", runtime_dir, name);
}

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	size_t n = strlen(path);
	if (n == 0)
		return -EINVAL;
	if (n > RTS_SUN_PATH_MAX)
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n + 1);
	return 0;
}

int rts_fd_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	int nfl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	if (nfl != fl && fcntl(fd, F_SETFL, nfl) < 0)
		return -errno;
	return 0;
}

/* Is something accepting connections on path right now? */
static bool socket_is_live(const struct sockaddr_un *sa, int type)
{
	cleanup_close int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: be conservative, do not remove */
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return true;
	/* ECONNREFUSED: a socket file with no listener. Other errors (a socket of another
	 * type, EACCES) are treated as live so we never remove what we do not understand. */
	return errno != ECONNREFUSED;
}

/* Give the socket file at path (just bound by us) its permissions: mode, or with a peer the
 * ACL "owner and peer get the owner's bits of mode". The file is opened O_PATH|O_NOFOLLOW
 * and checked to be our socket first, so the ACL lands on it even if the directory's
 * owner swapped the name meanwhile. */
static int set_socket_access(const char *path, mode_t mode, uid_t peer)
{
	if (peer == (uid_t)-1)
		return chmod(path, mode) < 0 ? -errno : 0;
	cleanup_close int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		return -ESTALE;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	unsigned owner = (unsigned)(mode >> 6) & 07;
	return rts_acl_grant(-1, proc, owner, peer, owner);
}

int rts_listen_unix_for(const char *path, int type, mode_t mode, uid_t peer)
{
	struct sockaddr_un sa;
	int r = fill_addr(&sa, path);
	if (r < 0)
		return r;
	cleanup_close int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Bind with no permissions at all, then widen to mode: there is never a window in
	 * which the socket is more open than asked for. */
	mode_t old = umask(0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno == EADDRINUSE) {
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && !socket_is_live(&sa, type)) {
			unlink(path);
			r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		} else {
			errno = EADDRINUSE;
		}
	}
	int saved = errno;
	umask(old);
	if (r < 0)
		return -saved;
	r = set_socket_access(path, mode, peer);
	if (r < 0 || listen(fd, 64) < 0) {
		r = r < 0 ? r : -errno;
		unlink(path);
		return r;
	}
	return steal_fd(&fd);
}

int rts_listen_unix(const char *path, int type, mode_t mode)
{
	return rts_listen_unix_for(path, type, mode, (uid_t)-1);
}

/* One connect attempt with extra socket() flags. Returns the fd or -errno (-EAGAIN for a
 * non-blocking socket and a full backlog). */
static int connect_once(const struct sockaddr_un *sa, int type, int flags)
{
	cleanup_close int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | flags, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return steal_fd(&fd);
}

int rts_connect_unix(const char *path, int type, unsigned retry_ms)
{
	struct sockaddr_un sa;
	int r = fill_addr(&sa, path);
	if (r < 0)
		return r;
	uint64_t deadline = rts_now_ms() + retry_ms;
	for (;;) {
		int fd = connect_once(&sa, type, 0);
		if (fd >= 0 || (fd != -ENOENT && fd != -ECONNREFUSED && fd != -EAGAIN) || rts_now_ms() >= deadline)
			return fd;
		struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

int rts_connect_unix_once(const char *path, int type)
{
	struct sockaddr_un sa;
	int r = fill_addr(&sa, path);
	return r < 0 ? r : connect_once(&sa, type, SOCK_NONBLOCK);
}

int rts_peer_is_self(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	return uc.uid == geteuid() ? 0 : -EPERM;
}

int rts_listener_is_trusted(int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	return uc.uid == geteuid() || uc.uid == 0 ? 0 : -EPERM;
}
