/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/pidfd.h>
#include <sys/wait.h>

#include "common/sock.h"
#include "common/spawn.h"
#include "common/util.h"

/* Bytes per read, and reads per rts_capture_read() call, so that one chatty child cannot
 * starve an event loop. */
#define READ_CHUNK (64u * 1024u)
#define READS_PER_CALL 4u
/* First allocation for stdout; it doubles up to out_max. */
#define CAPTURE_FIRST (16u * 1024u)

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void close_pipe(int p[2])
{
	close_fd(&p[0]);
	close_fd(&p[1]);
}

/* Room for at least one more byte in cap->buf (keeping one for the NUL). For an output
 * that may overflow, room up to max + 1 bytes: the extra byte is the one that shows the
 * overflow. */
static size_t capture_room(struct rts_capture *cap)
{
	size_t limit = cap->keep_head ? cap->max : cap->max + 1;
	if (cap->len == cap->cap && cap->cap < limit) {
		size_t want = cap->cap ? cap->cap * 2 : CAPTURE_FIRST;
		if (cap->keep_head || want > limit)
			want = limit;
		cap->buf = rts_xrealloc(cap->buf, want + 1);
		cap->buf[cap->len] = '\0';
		cap->cap = want;
	}
	size_t room = cap->cap - cap->len;
	return room > READ_CHUNK ? READ_CHUNK : room;
}

enum rts_io rts_capture_read(struct rts_capture *cap, int fd)
{
	char discard[4096];
	for (unsigned round = 0; round < READS_PER_CALL; round++) {
		size_t room = capture_room(cap);
		char *dst = room ? cap->buf + cap->len : discard;
		/* Only a keep_head capture gets here with no room: it drops the rest. */
		size_t want = room ? room : sizeof(discard);
		ssize_t n = read(fd, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return RTS_IO_IDLE;
		if (n <= 0)
			return RTS_IO_DONE;
		if (dst == discard)
			continue;
		cap->len += (size_t)n;
		cap->buf[cap->len] = '\0';
		if (cap->len > cap->max) {
			cap->overflow = true;
			cap->len = cap->max;
			cap->buf[cap->len] = '\0';
			return RTS_IO_DONE;
		}
	}
	return RTS_IO_MORE;
}

enum rts_io rts_child_write_input(struct rts_child *c)
{
	while (c->input_pos < c->input_len) {
		ssize_t n = write(c->in_fd, c->input + c->input_pos, c->input_len - c->input_pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return RTS_IO_IDLE;
		if (n < 0)
			return RTS_IO_DONE; /* EPIPE: it does not read its input; its output decides */
		c->input_pos += (size_t)n;
	}
	return RTS_IO_DONE;
}

int rts_child_signal(const struct rts_child *c, int sig)
{
	/* The leader is not reaped yet, so neither its pid nor its group id can have been
	 * reused. */
	int r = c->group ? kill(-c->pid, sig) : c->pidfd >= 0 ? pidfd_send_signal(c->pidfd, sig, NULL, 0) : -1;
	if (r < 0)
		return c->group || c->pidfd >= 0 ? -errno : -EBADF;
	return 0;
}

void rts_child_close_pipes(struct rts_child *c)
{
	close_fd(&c->in_fd);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
}

void rts_child_release(struct rts_child *c)
{
	rts_child_close_pipes(c);
	close_fd(&c->pidfd);
	free(c->out.buf);
	free(c->err.buf);
	c->out = (struct rts_capture){0};
	c->err = (struct rts_capture){0};
}

/* Kill and reap a child that could not be set up completely. */
static void child_abandon(struct rts_child *c)
{
	kill(c->group ? -c->pid : c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* The file actions for one of the child's stdin/stdout/stderr. */
static void stdio_action(posix_spawn_file_actions_t *fa, int target, enum rts_spawn_stdio mode, int child_end)
{
	switch (mode) {
	case RTS_STDIO_NULL:
		posix_spawn_file_actions_addopen(fa, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY,
						 0);
		break;
	case RTS_STDIO_PIPE:
	case RTS_STDIO_FD:
		posix_spawn_file_actions_adddup2(fa, child_end, target);
		break;
	case RTS_STDIO_INHERIT:
		break;
	}
}

/* Only our ends are non-blocking: each end of a pipe is an open file description of its
 * own, so the child's stay blocking. An empty input closes stdin at once. */
static int our_ends_ready(struct rts_child *c)
{
	const int ours[3] = {c->in_fd, c->out_fd, c->err_fd};
	for (int i = 0; i < 3; i++)
		if (ours[i] >= 0) {
			int r = rts_fd_set_nonblock(ours[i], true);
			if (r < 0)
				return r;
		}
	if (c->in_fd >= 0 && c->input_len == 0)
		close_fd(&c->in_fd);
	return 0;
}

/* Once the child (or its starter) has its ends of the pipes p, only ours stay open here:
 * then EOF and EPIPE work as they should. stdin's child end is its read end [0], stdout's
 * and stderr's their write end [1]. */
static void keep_our_ends(struct rts_child *c, int p[3][2])
{
	close_fd(&p[0][0]);
	close_fd(&p[1][1]);
	close_fd(&p[2][1]);
	c->in_fd = p[0][1];
	c->out_fd = p[1][0];
	c->err_fd = p[2][0];
}

/* rts_child_start() for s->start: the pipes p are made; the hook gets the child's ends. */
static int child_start_elsewhere(const struct rts_spawn *s, struct rts_child *c, int p[3][2])
{
	const int ends[3] = {p[0][0], p[1][1], p[2][1]};
	int pidfd = -1;
	int r = s->start(s->hook_arg, ends, &pidfd);
	keep_our_ends(c, p);
	c->pidfd = pidfd;
	if (r == 0 && pidfd < 0)
		r = -EBADF;
	if (r == 0)
		r = our_ends_ready(c);
	if (r < 0) {
		/* The starter's business to stop what it started: the pidfd is not ours to
		 * kill through, and reap() is not called. */
		rts_child_release(c);
		return r;
	}
	return 0;
}

int rts_child_start(const struct rts_spawn *s, struct rts_child *c)
{
	*c = (struct rts_child){
		.pid = -1,
		.pidfd = -1,
		.group = s->kill_group,
		.in_fd = -1,
		.out_fd = -1,
		.err_fd = -1,
		.input = s->input,
		.input_len = s->input ? s->input_len : 0,
		.out = {.max = s->out_max},
		.err = {.max = s->err_max < RTS_SPAWN_ERR_MAX ? s->err_max : RTS_SPAWN_ERR_MAX, .keep_head = true},
	};
	const enum rts_spawn_stdio mode[3] = {s->in, s->out, s->err};
	if (s->start) {
		/* Started elsewhere: only pipes can be handed over, and only the process the
		 * pidfd names is signalled. */
		if (s->kill_group || !s->reap || s->in != RTS_STDIO_PIPE || s->out != RTS_STDIO_PIPE ||
		    s->err != RTS_STDIO_PIPE)
			return -EINVAL;
		c->reap = s->reap;
		c->hook_arg = s->hook_arg;
	} else if (!s->argv || !s->argv[0] || s->argv[0][0] != '/' || !s->envp ||
		   /* Without a session of its own, its group id would not be its pid. */
		   (s->kill_group && !s->new_session)) {
		return -EINVAL;
	}
	/* Above 3, so that no dup2() below lands on a source still to be read. */
	for (int i = 0; i < 3; i++)
		if (mode[i] == RTS_STDIO_FD && s->fds[i] <= 3)
			return -EINVAL;
	if (s->with_fd3 && s->fd3 <= 3)
		return -EINVAL;
	int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	int r = 0;
	for (int i = 0; i < 3 && r == 0; i++)
		if (mode[i] == RTS_STDIO_PIPE && pipe2(p[i], O_CLOEXEC) < 0)
			r = -errno;
	if (r < 0) {
		for (int i = 0; i < 3; i++)
			close_pipe(p[i]);
		return r;
	}

	if (s->start)
		return child_start_elsewhere(s, c, p);

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* stdin's child end is its read end [0]; stdout's and stderr's their write end [1]. */
	for (int i = 0; i < 3; i++)
		stdio_action(&fa, i, mode[i], mode[i] == RTS_STDIO_FD ? s->fds[i] : p[i][i == STDIN_FILENO ? 0 : 1]);
	if (s->with_fd3)
		posix_spawn_file_actions_adddup2(&fa, s->fd3, 3);
	posix_spawn_file_actions_addclosefrom_np(&fa, s->with_fd3 ? 4 : STDERR_FILENO + 1);
	if (s->cwd)
		posix_spawn_file_actions_addchdir_np(&fa, s->cwd);
	/* Undo what we set for ourselves: blocked SIGTERM/SIGINT/SIGCHLD (sd-event), an
	 * ignored SIGPIPE. A session of its own keeps a terminal's ^C and any signal to its
	 * group away from us. */
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
					      (s->new_session ? POSIX_SPAWN_SETSID : 0));
	r = -posix_spawn(&c->pid, s->argv[0], &fa, &at, s->argv, s->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	keep_our_ends(c, p);
	if (r < 0) {
		c->pid = -1;
		rts_child_release(c);
		return r;
	}

	c->pidfd = pidfd_open(c->pid, 0);
	if (c->pidfd < 0)
		r = -errno;
	if (r == 0)
		r = our_ends_ready(c);
	if (r < 0) {
		child_abandon(c);
		rts_child_release(c);
		return r;
	}
	return 0;
}

/* ---- running a child to its end ---- */

/* Read what the child wrote until the pipes are empty (or over). Returns -EFBIG on a
 * stdout overflow. */
static int drain(struct rts_child *c)
{
	enum rts_io io;
	while (c->out_fd >= 0 && (io = rts_capture_read(&c->out, c->out_fd)) != RTS_IO_IDLE)
		if (io == RTS_IO_DONE)
			close_fd(&c->out_fd);
	while (c->err_fd >= 0 && (io = rts_capture_read(&c->err, c->err_fd)) != RTS_IO_IDLE)
		if (io == RTS_IO_DONE)
			close_fd(&c->err_fd);
	return c->out.overflow ? -EFBIG : 0;
}

/* Move data until the child exits (0), or the deadline, cancel or the output bound stops
 * it. */
static int pump(struct rts_child *c, const struct rts_cancel *cancel, uint64_t deadline)
{
	for (;;) {
		if (rts_cancel_fired(cancel))
			return -ECANCELED;
		if (rts_now_ms() >= deadline)
			return -ETIMEDOUT;
		struct pollfd p[4 + RTS_CANCEL_POLLFDS];
		size_t n = 0;
		int i_in = -1, i_out = -1, i_err = -1;
		if (c->in_fd >= 0)
			p[i_in = (int)n++] = (struct pollfd){.fd = c->in_fd, .events = POLLOUT};
		if (c->out_fd >= 0)
			p[i_out = (int)n++] = (struct pollfd){.fd = c->out_fd, .events = POLLIN};
		if (c->err_fd >= 0)
			p[i_err = (int)n++] = (struct pollfd){.fd = c->err_fd, .events = POLLIN};
		size_t i_pid = n;
		p[n++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
		size_t k = rts_cancel_pollfds(cancel, p + n);
		if (poll(p, n + k, rts_cancel_poll_timeout(deadline, cancel)) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (i_in >= 0 && p[i_in].revents && rts_child_write_input(c) == RTS_IO_DONE)
			close_fd(&c->in_fd);
		if (i_out >= 0 && p[i_out].revents && rts_capture_read(&c->out, c->out_fd) == RTS_IO_DONE) {
			/* Over the bound: SIGKILL before the pipe closes, so the child ends by the
			 * bound's signal, never by a SIGPIPE that races it. */
			if (c->out.overflow)
				(void)rts_child_signal(c, SIGKILL);
			close_fd(&c->out_fd);
			if (c->out.overflow)
				return -EFBIG;
		}
		if (i_err >= 0 && p[i_err].revents && rts_capture_read(&c->err, c->err_fd) == RTS_IO_DONE)
			close_fd(&c->err_fd);
		/* Exited: everything it wrote is in the pipes now. What it left running in its
		 * group goes first (it is not reaped, so the group id is still ours), so the
		 * drain is bounded by what the pipes hold; a process outside the group that
		 * holds a pipe only gives EAGAIN, never a wait. */
		if (p[i_pid].revents) {
			if (c->group)
				(void)rts_child_signal(c, SIGKILL);
			return drain(c);
		}
		if (rts_cancel_polled(p + n, k))
			return -ECANCELED;
	}
}

/* SIGTERM (to the group), SIGKILL after the grace period, or at once without one. */
static void stop(struct rts_child *c, unsigned grace_ms)
{
	/* A child blocked writing to us gets EPIPE instead of waiting for a reader. */
	rts_child_close_pipes(c);
	if (grace_ms > 0 && rts_child_signal(c, SIGTERM) == 0) {
		uint64_t until = rts_now_ms() + grace_ms;
		for (;;) {
			uint64_t now = rts_now_ms();
			if (now >= until)
				break;
			struct pollfd pf = {.fd = c->pidfd, .events = POLLIN};
			int k = poll(&pf, 1, (int)(until - now));
			if (k > 0 || (k < 0 && errno != EINTR))
				break;
		}
	}
	/* With a group, also whatever survived SIGTERM after the leader exited. */
	(void)rts_child_signal(c, SIGKILL);
}

int rts_spawn_run(const struct rts_spawn *s, const struct rts_cancel *cancel, unsigned kill_grace_ms,
		  struct rts_spawn_result *r)
{
	*r = (struct rts_spawn_result){0};
	if (rts_cancel_fired(cancel))
		return -ECANCELED;
	uint64_t deadline = rts_cancel_deadline(UINT64_MAX, cancel);
	if (rts_now_ms() >= deadline)
		return -ETIMEDOUT;
	struct rts_child c;
	int ret = rts_child_start(s, &c);
	if (ret < 0)
		return ret;

	ret = pump(&c, cancel, deadline);
	if (ret < 0)
		stop(&c, kill_grace_ms);
	int st = 0;
	if (c.reap) {
		int r2 = c.reap(c.hook_arg, &st);
		if (r2 < 0 && ret == 0)
			ret = r2;
	} else {
		while (waitpid(c.pid, &st, 0) < 0) {
			if (errno != EINTR) {
				if (ret == 0)
					ret = -errno;
				break;
			}
		}
	}
	r->exited = WIFEXITED(st);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	if (s->err == RTS_STDIO_PIPE) {
		r->err = c.err.buf ? steal_pointer(&c.err.buf) : rts_xstrdup("");
		r->err_len = c.err.len;
	}
	if (ret == 0 && s->out == RTS_STDIO_PIPE) {
		r->out = c.out.buf ? steal_pointer(&c.out.buf) : rts_xstrdup("");
		r->out_len = c.out.len;
	}
	rts_child_release(&c);
	return ret;
}

void rts_spawn_result_release(struct rts_spawn_result *r)
{
	free(r->out);
	free(r->err);
	*r = (struct rts_spawn_result){0};
}

void rts_spawn_first_line(const char *err, size_t len, char *out, size_t outlen)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 1 < outlen && err[i] != '\n' && err[i] != '\r'; i++) {
		unsigned char ch = (unsigned char)err[i];
		out[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	out[n] = '\0';
}
