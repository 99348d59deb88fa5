/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <json.h>
#include <poll.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "brokerd/launcher.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/spawn.h"
#include "common/util.h"

extern char **environ;

/* ---- messages ---- */

/* What each type carries. */
static bool type_known(uint32_t type, size_t *nfds)
{
	switch (type) {
	case BROKERD_LAUNCH_RUN:
		*nfds = 4;
		return true;
	case BROKERD_LAUNCH_STARTED:
		*nfds = 1;
		return true;
	case BROKERD_LAUNCH_FAILED:
	case BROKERD_LAUNCH_EXITED:
		*nfds = 0;
		return true;
	}
	return false;
}

int brokerd_launch_decode(const void *buf, size_t len, size_t nfds, struct brokerd_launch_msg *m)
{
	size_t want_fds;
	if (len != sizeof(*m))
		return -EBADMSG;
	memcpy(m, buf, sizeof(*m));
	if (m->version != BROKERD_LAUNCH_VERSION || !type_known(m->type, &want_fds) || nfds != want_fds)
		return -EBADMSG;
	switch (m->type) {
	case BROKERD_LAUNCH_RUN:
		if (m->value != 0 || m->kind < BROKERD_RUN_TOOL || m->kind > BROKERD_RUN_PROBE_HOOK)
			return -EBADMSG;
		break;
	case BROKERD_LAUNCH_FAILED:
		if (m->kind != 0 || m->index != 0 || m->value >= 0 || m->value < -4095)
			return -EBADMSG;
		break;
	default: /* STARTED, EXITED */
		if (m->kind != 0 || m->index != 0 || (m->type == BROKERD_LAUNCH_STARTED && m->value != 0))
			return -EBADMSG;
		break;
	}
	return 0;
}

int brokerd_launch_send(int sock, const struct brokerd_launch_msg *m, const int *fds, size_t nfds)
{
	if (nfds > BROKERD_LAUNCH_FDS_MAX)
		return -EINVAL;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(BROKERD_LAUNCH_FDS_MAX * sizeof(int))];
	} control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return (size_t)n == sizeof(*m) ? 0 : -EMSGSIZE;
	}
}

/* Close every descriptor of mh's control data (a refused message). */
static void close_passed(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

int brokerd_launch_recv(int sock, struct brokerd_launch_msg *m, int fds[BROKERD_LAUNCH_FDS_MAX], size_t *nfds)
{
	*nfds = 0;
	/* One byte more than a message, so a longer one shows as too long (MSG_TRUNC says
	 * so too), and room for one descriptor more than any message carries. */
	char buf[sizeof(*m) + 1];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE((BROKERD_LAUNCH_FDS_MAX + 1) * sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (n == 0 && mh.msg_controllen == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_passed(&mh);
		return -EBADMSG;
	}
	size_t got = 0;
	bool bad = false;
	int tmp[BROKERD_LAUNCH_FDS_MAX + 1];
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0) ||
		    (c->cmsg_len - CMSG_LEN(0)) % sizeof(int) != 0) {
			bad = true;
			continue;
		}
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && got < RTS_ARRAY_SIZE(tmp); i++)
			memcpy(&tmp[got++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (bad || brokerd_launch_decode(buf, (size_t)n, got, m) < 0) {
		close_passed(&mh);
		return -EBADMSG;
	}
	memcpy(fds, tmp, got * sizeof(int));
	*nfds = got;
	return 0;
}

int brokerd_launch_parse_info(const char *buf, size_t len, pid_t *pid)
{
	if (len > INT32_MAX)
		return -EBADMSG;
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error e = json_tokener_get_error(tok);
	json_tokener_free(tok);
	if (!o)
		return e == json_tokener_continue ? -EAGAIN : -EBADMSG;
	json_object *v = NULL;
	int r = -EBADMSG;
	if (json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "child-pid", &v) &&
	    json_object_is_type(v, json_type_int)) {
		int64_t p = json_object_get_int64(v);
		if (p > 0 && p <= INT32_MAX) {
			*pid = (pid_t)p;
			r = 0;
		}
	}
	json_object_put(o);
	return r;
}

/* ---- the launcher process ---- */

/* bwrap's info (a small JSON object); more than this is not bwrap's. */
#define INFO_MAX 2048u
/* The launcher socket's descriptor in the launcher: below every descriptor it receives,
 * which then lie above 3 as the spawner wants them (common/spawn.h). */
#define LAUNCHER_CTL_FD 3

struct run {
	bool used;
	bool started;	 /* STARTED was sent */
	bool abandoned;	 /* brokerd closed the run socket: killed, only reaping is left */
	int sock;	 /* to brokerd; -1 once closed */
	pid_t pid;	 /* bwrap */
	int pidfd;	 /* bwrap's */
	int info_fd;	 /* bwrap's --info-fd, read end; -1 once done */
	char info[INFO_MAX];
	size_t info_len;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void answer(struct run *r, uint32_t type, int32_t value, int fd)
{
	if (r->sock < 0)
		return;
	struct brokerd_launch_msg m = {.version = BROKERD_LAUNCH_VERSION, .type = type, .value = value};
	if (brokerd_launch_send(r->sock, &m, &fd, fd >= 0 ? 1 : 0) < 0) {
		/* brokerd gave up on this run: same as closing its socket. */
		close_fd(&r->sock);
		if (r->pidfd >= 0 && !r->abandoned)
			(void)pidfd_send_signal(r->pidfd, SIGKILL, NULL, 0);
		r->abandoned = true;
	}
}

/* pidfd of the sandbox's PID 1 (tini), whose host pid bwrap reported: a pid can be
 * reused once its process is reaped, so it counts only when, after the pidfd is open,
 * /proc says its parent is our bwrap and the pidfd's process still exists: then the
 * pidfd names the process that /proc described (bwrap forks no other child). -1 when it
 * cannot be had (it is already gone: the sandbox ended). */
static int sandbox_init_pidfd(pid_t child, pid_t bwrap)
{
	int fd = pidfd_open(child, 0);
	if (fd < 0)
		return -1;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
	cleanup_close int sf = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = sf >= 0 ? read(sf, buf, sizeof(buf) - 1) : -1;
	bool ok = false;
	if (n > 0) {
		buf[n] = '\0';
		/* "pid (comm) state ppid ...": comm may hold anything, ")" included. */
		const char *p = strrchr(buf, ')');
		char state;
		int ppid;
		ok = p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)bwrap;
	}
	if (!ok || pidfd_send_signal(fd, 0, NULL, 0) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Answer STARTED once: with the sandbox init's pidfd when bwrap reported it, else with a
 * pidfd of bwrap itself (its end is the sandbox's end too). */
static void send_started(struct run *r, pid_t child)
{
	if (r->started)
		return;
	r->started = true;
	int fd = child > 0 ? sandbox_init_pidfd(child, r->pid) : -1;
	if (fd < 0)
		fd = fcntl(r->pidfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		/* Cannot even pass bwrap's: brokerd could neither watch nor stop it. */
		answer(r, BROKERD_LAUNCH_FAILED, -errno, -1);
		close_fd(&r->sock);
		(void)pidfd_send_signal(r->pidfd, SIGKILL, NULL, 0);
		r->abandoned = true;
		return;
	}
	answer(r, BROKERD_LAUNCH_STARTED, 0, fd);
	close(fd);
}

static void on_info(struct run *r)
{
	ssize_t n;
	do
		n = read(r->info_fd, r->info + r->info_len, sizeof(r->info) - r->info_len);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	pid_t child = 0;
	int p = -EBADMSG;
	if (n > 0) {
		r->info_len += (size_t)n;
		p = brokerd_launch_parse_info(r->info, r->info_len, &child);
		if (p == -EAGAIN && r->info_len < sizeof(r->info))
			return; /* more to come */
	}
	/* Complete, unusable, too long, or the end without it: decided either way. */
	close_fd(&r->info_fd);
	send_started(r, p == 0 ? child : 0);
}

static void run_free(struct run *r)
{
	close_fd(&r->sock);
	close_fd(&r->pidfd);
	close_fd(&r->info_fd);
	*r = (struct run){.sock = -1, .pidfd = -1, .info_fd = -1};
}

static void on_exit_of_bwrap(struct run *r)
{
	int st;
	pid_t w;
	do
		w = waitpid(r->pid, &st, WNOHANG);
	while (w < 0 && errno == EINTR);
	if (w == 0)
		return;
	if (w < 0)
		st = W_EXITCODE(255, 0); /* cannot happen: it is our child */
	send_started(r, 0);
	answer(r, BROKERD_LAUNCH_EXITED, st, -1);
	run_free(r);
}

static void refuse(int sock, int err)
{
	struct brokerd_launch_msg m = {.version = BROKERD_LAUNCH_VERSION, .type = BROKERD_LAUNCH_FAILED, .value = err};
	(void)brokerd_launch_send(sock, &m, NULL, 0);
}

static bool is_seqpacket(int fd)
{
	int type = 0, domain = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(domain);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) == 0 && type == SOCK_SEQPACKET &&
	       getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l2) == 0 && domain == AF_UNIX;
}

static bool is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* Start bwrap for RUN m (descriptors fds, ours). */
static void on_run(const struct brokerd_toolbox *tb, struct run *runs, const struct brokerd_launch_msg *m, int fds[4])
{
	/* fds[0] is the run socket; without a usable one nobody can be answered. */
	if (!is_seqpacket(fds[0])) {
		log_error("launcher: a run came without a run socket; ignored");
		return;
	}
	int err = 0;
	struct run *r = NULL;
	for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX && !r; i++)
		if (!runs[i].used)
			r = &runs[i];
	char *const *command = brokerd_toolbox_command(tb, (enum brokerd_run_kind)m->kind, m->index);
	if (!is_pipe(fds[1]) || !is_pipe(fds[2]) || !is_pipe(fds[3]))
		err = -EBADF;
	else if (!command)
		err = -EINVAL;
	else if (!r)
		err = -EBUSY;
	else if (access(command[0], X_OK) < 0)
		err = -errno; /* as posix_spawn would say, not bwrap's exit status */
	if (err < 0) {
		refuse(fds[0], err);
		return;
	}

	int info[2];
	if (pipe2(info, O_CLOEXEC | O_NONBLOCK) < 0) {
		refuse(fds[0], -errno);
		return;
	}
	/* bwrap reads its info descriptor's number from argv: 3 in the child (spawn.h). */
	cleanup_strv char **argv = NULL;
	int rr = brokerd_toolbox_argv(tb, (enum brokerd_run_kind)m->kind, m->index, 3, &argv);
	static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	struct rts_spawn s = {
		.argv = argv,
		.envp = envp,
		.cwd = "/",
		/* Away from brokerd's process group and terminal; the sandbox makes the
		 * command's own session again (--new-session). */
		.new_session = true,
		.in = RTS_STDIO_FD,
		.out = RTS_STDIO_FD,
		.err = RTS_STDIO_FD,
		.fds = {fds[1], fds[2], fds[3]},
		.with_fd3 = true,
		.fd3 = info[1],
	};
	struct rts_child c;
	if (rr == 0)
		rr = rts_child_start(&s, &c);
	close(info[1]);
	if (rr < 0) {
		close(info[0]);
		refuse(fds[0], rr);
		return;
	}
	*r = (struct run){
		.used = true,
		.sock = steal_fd(&fds[0]),
		.pid = c.pid,
		.pidfd = steal_fd(&c.pidfd),
		.info_fd = info[0],
	};
	rts_child_release(&c);
}

/* Kill every sandbox and wait for them: brokerd is gone or said so. */
static __attribute__((noreturn)) void shut_down(struct run *runs)
{
	for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX; i++)
		if (runs[i].used)
			(void)pidfd_send_signal(runs[i].pidfd, SIGKILL, NULL, 0);
	for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX; i++)
		if (runs[i].used)
			while (waitpid(runs[i].pid, NULL, 0) < 0 && errno == EINTR)
				;
	_exit(0);
}

static __attribute__((noreturn)) void launcher_main(const struct brokerd_toolbox *tb)
{
	static struct run runs[BROKERD_LAUNCH_RUNS_MAX];
	for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX; i++)
		runs[i] = (struct run){.sock = -1, .pidfd = -1, .info_fd = -1};
	/* One poll entry for the socket, three per run. */
	static struct pollfd pfd[1 + 3 * BROKERD_LAUNCH_RUNS_MAX];
	for (;;) {
		size_t n = 0;
		pfd[n++] = (struct pollfd){.fd = LAUNCHER_CTL_FD, .events = POLLIN};
		for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX; i++) {
			struct run *r = &runs[i];
			/* -1 entries are skipped by poll() and keep the indexes fixed. */
			pfd[1 + 3 * i] = (struct pollfd){.fd = r->used ? r->pidfd : -1, .events = POLLIN};
			pfd[2 + 3 * i] = (struct pollfd){.fd = r->used ? r->info_fd : -1, .events = POLLIN};
			/* No events: POLLHUP alone, brokerd closed the run socket. */
			pfd[3 + 3 * i] = (struct pollfd){.fd = r->used && !r->abandoned ? r->sock : -1};
		}
		n = 1 + 3 * BROKERD_LAUNCH_RUNS_MAX;
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error_errno(-errno, "launcher: poll: %m");
			shut_down(runs);
		}
		for (size_t i = 0; i < BROKERD_LAUNCH_RUNS_MAX; i++) {
			struct run *r = &runs[i];
			if (!r->used)
				continue;
			if (pfd[3 + 3 * i].revents && !r->abandoned) {
				close_fd(&r->sock);
				(void)pidfd_send_signal(r->pidfd, SIGKILL, NULL, 0);
				r->abandoned = true;
			}
			if (pfd[2 + 3 * i].revents && r->info_fd >= 0)
				on_info(r);
			if (pfd[1 + 3 * i].revents)
				on_exit_of_bwrap(r);
		}
		if (pfd[0].revents) {
			struct brokerd_launch_msg m;
			int fds[BROKERD_LAUNCH_FDS_MAX];
			size_t nfds;
			int r = brokerd_launch_recv(LAUNCHER_CTL_FD, &m, fds, &nfds);
			if (r == -EAGAIN)
				continue;
			if (r < 0 || m.type != BROKERD_LAUNCH_RUN) {
				if (r != -ECONNRESET)
					log_error_errno(r < 0 ? r : -EPROTO, "launcher: bad message from brokerd: %m");
				for (size_t i = 0; r == 0 && i < nfds; i++)
					close(fds[i]);
				shut_down(runs);
			}
			on_run(tb, runs, &m, fds);
			for (size_t i = 0; i < nfds; i++)
				if (fds[i] >= 0)
					close(fds[i]);
		}
	}
}

void brokerd_launcher_serve(const struct brokerd_toolbox *tb, int ctl, bool forked)
{
	/* Nothing of another process of this account may read the launcher's memory. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Forked, brokerd stops it (by closing the socket), not a terminal's ^C or systemd's
	 * SIGTERM to brokerd's unit. In a unit of its own, SIGTERM is systemd stopping that
	 * unit: the default action ends the launcher, and its sandboxes die with it. */
	if (forked) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
	}
	signal(SIGPIPE, SIG_IGN);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* The values of {"env"} key sources are brokerd's business: wiped here (the copy of
	 * the environment this process got with the fork), never passed on. */
	for (char **e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	clearenv();
	/* The socket at 3, every other descriptor (a socket systemd passed brokerd, ...) gone;
	 * 0-2 stay (the log, or /dev/null). */
	if (ctl != LAUNCHER_CTL_FD && (dup3(ctl, LAUNCHER_CTL_FD, O_CLOEXEC) < 0 || close(ctl) < 0))
		_exit(1);
	if (fcntl(LAUNCHER_CTL_FD, F_SETFD, FD_CLOEXEC) < 0 || close_range(LAUNCHER_CTL_FD + 1, ~0u, 0) < 0)
		_exit(1);
	launcher_main(tb);
}

/* The launcher's start in the forked child: nothing of brokerd it does not need. */
static __attribute__((noreturn)) void launcher_child(const struct brokerd_toolbox *tb, int ctl, pid_t brokerd)
{
	/* Dies with brokerd; and brokerd may have gone before this was set. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != brokerd)
		_exit(1);
	brokerd_launcher_serve(tb, ctl, true);
}

struct brokerd_launcher {
	const struct brokerd_toolbox *tb;
	int ctl;
	pid_t pid; /* forked; 0 when connected to a launcher unit */
	int pidfd; /* forked; -1 when connected */
};

int brokerd_launcher_connect(const struct brokerd_toolbox *tb, const char *path, struct brokerd_launcher **out)
{
	*out = NULL;
	int fd = rts_connect_unix(path, SOCK_SEQPACKET, 0);
	if (fd < 0)
		return fd;
	/* Made by systemd (root) or by this account: a socket another account planted in the
	 * runtime directory never gets a RUN, whose pipes carry what tools are given. */
	int r = rts_listener_is_trusted(fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	struct brokerd_launcher *l = rts_xcalloc(1, sizeof(*l));
	*l = (struct brokerd_launcher){.tb = tb, .ctl = fd, .pid = 0, .pidfd = -1};
	*out = l;
	return 0;
}

int brokerd_launcher_start(const struct brokerd_toolbox *tb, struct brokerd_launcher **out)
{
	*out = NULL;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	pid_t self = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(sp[0]);
		close(sp[1]);
		return e;
	}
	if (pid == 0) {
		close(sp[0]);
		launcher_child(tb, sp[1], self);
	}
	close(sp[1]);
	int pidfd = pidfd_open(pid, 0);
	if (pidfd < 0) {
		int e = -errno;
		close(sp[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return e;
	}
	struct brokerd_launcher *l = rts_xcalloc(1, sizeof(*l));
	*l = (struct brokerd_launcher){.tb = tb, .ctl = sp[0], .pid = pid, .pidfd = pidfd};
	*out = l;
	return 0;
}

int brokerd_launcher_fd(const struct brokerd_launcher *l)
{
	return l->ctl;
}

const struct brokerd_toolbox *brokerd_launcher_toolbox(const struct brokerd_launcher *l)
{
	return l->tb;
}

void brokerd_launcher_stop(struct brokerd_launcher *l)
{
	if (!l)
		return;
	close(l->ctl);
	if (l->pidfd < 0) {
		/* A launcher unit: closing the connection ends that launcher and its sandboxes,
		 * and systemd reaps it. */
		free(l);
		return;
	}
	struct pollfd p = {.fd = l->pidfd, .events = POLLIN};
	uint64_t until = rts_now_ms() + BROKERD_LAUNCH_REAP_MS;
	for (;;) {
		uint64_t now = rts_now_ms();
		int k = now < until ? poll(&p, 1, (int)(until - now)) : 0;
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			(void)pidfd_send_signal(l->pidfd, SIGKILL, NULL, 0);
		break;
	}
	while (waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(l->pidfd);
	free(l);
}

/* ---- one run, from brokerd ---- */

/* Wait up to ms for a message on sock. 0 with *m (and a descriptor in *fd, or -1), or
 * -ETIMEDOUT, -ENOTCONN (the launcher closed the run socket or is gone), -EPROTO. */
static int wait_answer(int sock, unsigned ms, struct brokerd_launch_msg *m, int *fd)
{
	*fd = -1;
	uint64_t until = rts_now_ms() + ms;
	for (;;) {
		int fds[BROKERD_LAUNCH_FDS_MAX];
		size_t nfds = 0;
		int r = brokerd_launch_recv(sock, m, fds, &nfds);
		if (r == 0) {
			if (nfds == 1)
				*fd = fds[0];
			return 0;
		}
		if (r == -ECONNRESET)
			return -ENOTCONN;
		if (r != -EAGAIN)
			return -EPROTO;
		uint64_t now = rts_now_ms();
		if (now >= until)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, (int)(until - now)) < 0 && errno != EINTR)
			return -errno;
	}
}

int brokerd_launch_start(void *arg, const int fds[3], int *pidfd)
{
	struct brokerd_launch *lc = arg;
	*pidfd = -1;
	if (!lc->launcher)
		return -ENOTCONN;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	struct brokerd_launch_msg m = {
		.version = BROKERD_LAUNCH_VERSION, .type = BROKERD_LAUNCH_RUN, .kind = lc->kind, .index = lc->index};
	const int pass[4] = {sp[1], fds[0], fds[1], fds[2]};
	int r;
	uint64_t until = rts_now_ms() + BROKERD_LAUNCH_START_MS;
	/* Many threads send here; each packet arrives whole. A full queue is waited out. */
	while ((r = brokerd_launch_send(lc->launcher->ctl, &m, pass, 4)) == -EAGAIN && rts_now_ms() < until) {
		struct pollfd p = {.fd = lc->launcher->ctl, .events = POLLOUT};
		(void)poll(&p, 1, 100);
	}
	close(sp[1]);
	if (r < 0) {
		close(sp[0]);
		return r == -EPIPE || r == -ECONNRESET || r == -ECONNREFUSED ? -ENOTCONN : r;
	}
	lc->sock = sp[0];
	uint64_t now = rts_now_ms();
	int fd;
	r = wait_answer(lc->sock, now < until ? (unsigned)(until - now) : 0, &m, &fd);
	if (r < 0)
		return r;
	if (m.type == BROKERD_LAUNCH_STARTED && fd >= 0) {
		*pidfd = fd;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	return m.type == BROKERD_LAUNCH_FAILED ? m.value : -EPROTO;
}

int brokerd_launch_reap(void *arg, int *status)
{
	struct brokerd_launch *lc = arg;
	if (lc->sock < 0)
		return -ENOTCONN;
	struct brokerd_launch_msg m;
	int fd;
	int r = wait_answer(lc->sock, BROKERD_LAUNCH_REAP_MS, &m, &fd);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return r;
	if (m.type != BROKERD_LAUNCH_EXITED)
		return -EPROTO;
	*status = m.value;
	return 0;
}

void brokerd_launch_release(struct brokerd_launch *lc)
{
	if (lc->sock >= 0)
		close(lc->sock);
	lc->sock = -1;
}
