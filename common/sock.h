/* SPDX-License-Identifier: Apache-2.0 */
/* AF_UNIX socket helpers: the runtime-dir sockets, socket activation, peer checks. */
#ifndef RTS_SOCK_H
#define RTS_SOCK_H

#include <stdbool.h>
#include <sys/types.h>

#define RTS_DEFAULT_RUNTIME_DIR "/run/roundtable-sandbox"
#define RTS_SOCK_CONTROL "control.sock"
#define RTS_SOCK_RUNNERD "runnerd.sock"
#define RTS_SOCK_BROKERD "brokerd.sock"

/* Longest path bind(2) accepts for an AF_UNIX socket (sun_path minus the NUL). */
#define RTS_SUN_PATH_MAX 107u

/* "<runtime_dir>/<name>", newly allocated; aborts on OOM. */
char *rts_runtime_path(const char *runtime_dir, const char *name);

/* Bind and listen on path with the given socket type (SOCK_STREAM or SOCK_SEQPACKET),
 * CLOEXEC and non-blocking, then chmod the socket file to mode. A socket file left by a
 * dead process (nothing accepts on it) is replaced; a live one gives -EADDRINUSE.
 * Returns the fd or -errno; -ENAMETOOLONG when path does not fit sun_path. */
int rts_listen_unix(const char *path, int type, mode_t mode);

/* rts_listen_unix() that also lets the account peer in (unless it is (uid_t)-1): the
 * socket file gets the POSIX ACL "owner and peer: the owner's bits of mode; group and
 * others: nothing" instead of mode (common/acl.h). Connecting needs write permission, so
 * that is how one other account reaches a socket without a shared group (DESIGN.md 8.1:
 * a turn's broker.sock for the guest account, runnerd.sock and brokerd.sock for their
 * peer daemon). -EOPNOTSUPP: the file system has no ACLs. */
int rts_listen_unix_for(const char *path, int type, mode_t mode, uid_t peer);

/* Connect to path with the given type, retrying ENOENT/ECONNREFUSED/EAGAIN for up to
 * retry_ms milliseconds (peers may start in any order). The fd is CLOEXEC and blocking.
 * Returns the fd or -errno. */
int rts_connect_unix(const char *path, int type, unsigned retry_ms);

/* One non-blocking connect attempt to path: the fd (CLOEXEC, O_NONBLOCK) or -errno
 * (-EAGAIN when the listener's backlog is full: an AF_UNIX connect never blocks half way). */
int rts_connect_unix_once(const char *path, int type);

/* 0 when the peer of a connected AF_UNIX socket runs as our effective uid, else -EPERM
 * (or -errno when SO_PEERCRED fails). The daemon links accept only the service account. */
int rts_peer_is_self(int fd);

/* For the connecting side of a daemon link: 0 when the socket we connected to was made by
 * our effective uid or by root, else -EPERM (or -errno when SO_PEERCRED fails). For a
 * socket-activated listener SO_PEERCRED names whoever called listen(2), which is systemd
 * (uid 0); root is trusted anyway. A socket planted by any other account is refused. */
int rts_listener_is_trusted(int fd);

/* Set O_NONBLOCK on or off. Returns 0 or -errno. */
int rts_fd_set_nonblock(int fd, bool on);

#endif
