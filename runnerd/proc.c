/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/proc.h"

/* Bytes per read and reads per wake-up, so one chatty child cannot starve the loop. */
#define READ_CHUNK 65536u

/* Pipe reads return READ_MORE (the read budget ran out, more may be waiting), READ_IDLE
 * (EAGAIN: drained for now) or READ_EOF (end of stream, error or overflow: close it). */
enum { READ_EOF, READ_IDLE, READ_MORE };

struct runnerd_proc {
	pid_t pid;
	sd_event_source *child;
	sd_event_source *in_src, *out_src, *err_src, *timer;
	int in_fd, out_fd, err_fd;

	char *in_buf;
	size_t in_len, in_pos;

	char *out;
	size_t out_len, out_cap, out_max;
	char err[RUNNERD_PROC_ERR_MAX + 1];
	size_t err_len;

	bool killed, timed_out, out_overflow;
	runnerd_proc_done_t done;
	void *userdata;
};

static void close_stream(sd_event_source **src, int *fd)
{
	*src = sd_event_source_disable_unref(*src);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void proc_free(struct runnerd_proc *p)
{
	close_stream(&p->in_src, &p->in_fd);
	close_stream(&p->out_src, &p->out_fd);
	close_stream(&p->err_src, &p->err_fd);
	p->timer = sd_event_source_disable_unref(p->timer);
	p->child = sd_event_source_unref(p->child);
	free(p->in_buf);
	free(p->out);
	free(p);
}

pid_t runnerd_proc_pid(const struct runnerd_proc *p)
{
	return p->pid;
}

void runnerd_proc_kill(struct runnerd_proc *p)
{
	if (p->killed || !p->child)
		return;
	p->killed = true;
	/* Through the pidfd sd-event holds: the pid cannot have been reused before reaping. */
	int r = sd_event_source_send_child_signal(p->child, SIGKILL, NULL, 0);
	if (r < 0 && r != -ESRCH)
		log_warning_errno(r, "cannot kill docker CLI process %ld: %m", (long)p->pid);
}

void runnerd_proc_detach(struct runnerd_proc *p)
{
	p->done = NULL;
	p->userdata = NULL;
}

static int read_out(struct runnerd_proc *p)
{
	for (unsigned round = 0; round < 4; round++) {
		if (p->out_len == p->out_cap) {
			/* Grow towards out_max + 1: the extra byte detects an overflow. */
			size_t cap = p->out_cap ? p->out_cap * 2 : 16384;
			if (cap > p->out_max + 1)
				cap = p->out_max + 1;
			p->out = rts_xrealloc(p->out, cap + 1);
			p->out_cap = cap;
		}
		size_t want = p->out_cap - p->out_len;
		if (want > READ_CHUNK)
			want = READ_CHUNK;
		ssize_t n = read(p->out_fd, p->out + p->out_len, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return READ_IDLE;
		if (n <= 0)
			return READ_EOF;
		p->out_len += (size_t)n;
		if (p->out_len > p->out_max) {
			p->out_overflow = true;
			p->out_len = p->out_max;
			runnerd_proc_kill(p);
			return READ_EOF;
		}
	}
	return READ_MORE;
}

static int read_err(struct runnerd_proc *p)
{
	char discard[4096];
	for (unsigned round = 0; round < 16; round++) {
		char *dst = discard;
		size_t want = sizeof(discard);
		if (p->err_len < RUNNERD_PROC_ERR_MAX) {
			dst = p->err + p->err_len;
			want = RUNNERD_PROC_ERR_MAX - p->err_len;
		}
		ssize_t n = read(p->err_fd, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return READ_IDLE;
		if (n <= 0)
			return READ_EOF;
		if (dst != discard)
			p->err_len += (size_t)n;
	}
	return READ_MORE;
}

static int on_out(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	if (read_out(p) == READ_EOF)
		close_stream(&p->out_src, &p->out_fd);
	return 0;
}

static int on_err(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	if (read_err(p) == READ_EOF)
		close_stream(&p->err_src, &p->err_fd);
	return 0;
}

static int on_in(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	while (p->in_pos < p->in_len) {
		ssize_t n = write(p->in_fd, p->in_buf + p->in_pos, p->in_len - p->in_pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			break; /* EPIPE: the child stopped reading; its output decides the result */
		p->in_pos += (size_t)n;
	}
	/* Closing stdin is the end of input the worker waits for. */
	close_stream(&p->in_src, &p->in_fd);
	return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd_proc *p = userdata;
	p->timed_out = true;
	runnerd_proc_kill(p);
	return 0;
}

static int on_exit_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct runnerd_proc *p = userdata;
	/* The child is gone, so what it wrote is in the pipes now: drain it. A grandchild
	 * still holding a pipe only gives EAGAIN, never a wait. */
	while (p->out_fd >= 0 && read_out(p) == READ_MORE)
		;
	while (p->err_fd >= 0 && read_err(p) == READ_MORE)
		;
	close_stream(&p->in_src, &p->in_fd);
	close_stream(&p->out_src, &p->out_fd);
	close_stream(&p->err_src, &p->err_fd);
	p->timer = sd_event_source_disable_unref(p->timer);

	if (p->out)
		p->out[p->out_len] = '\0';
	p->err[p->err_len] = '\0';
	struct runnerd_proc_result r = {
		.exited = si->si_code == CLD_EXITED,
		.status = si->si_status,
		.killed = p->killed,
		.timed_out = p->timed_out,
		.out_overflow = p->out_overflow,
		.out = p->out ? p->out : "",
		.out_len = p->out_len,
		.err = p->err,
		.err_len = p->err_len,
	};
	if (p->done)
		p->done(p, &r, p->userdata);
	/* sd-event keeps the dispatching source alive and reaps the zombie after we return. */
	proc_free(p);
	return 0;
}

static int pipe_nb(int fds[2], int parent_end)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	int r = rts_fd_set_nonblock(fds[parent_end], true);
	if (r < 0) {
		close(fds[0]);
		close(fds[1]);
		fds[0] = fds[1] = -1;
	}
	return r;
}

static void close_pair(int fds[2])
{
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int runnerd_proc_spawn(sd_event *e, char *const argv[], char *const envp[], char *input, size_t input_len,
		       size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done, void *userdata,
		       struct runnerd_proc **ret)
{
	cleanup_free char *in_buf = input;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int r = -EINVAL;
	*ret = NULL;
	if (!argv[0] || argv[0][0] != '/')
		return -EINVAL;
	if ((input && (r = pipe_nb(in, 1)) < 0) || (r = pipe_nb(out, 0)) < 0 || (r = pipe_nb(err, 0)) < 0) {
		close_pair(in);
		close_pair(out);
		close_pair(err);
		return r;
	}

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, defaults;
	sigemptyset(&none);
	sigemptyset(&defaults);
	/* Undo what the daemon set for itself: blocked SIGCHLD/SIGTERM/SIGINT, ignored SIGPIPE. */
	static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(sigs); i++)
		sigaddset(&defaults, sigs[i]);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	if (input)
		posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	else
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
	/* Everything of ours is CLOEXEC already; this also covers fds a library left open. */
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &defaults);
	/* A session of its own: a terminal's ^C reaches runnerd, which decides what to kill. */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
	pid_t pid;
	r = -posix_spawn(&pid, argv[0], &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	/* Only the child keeps its ends: EOF and EPIPE then work as expected. */
	if (input)
		close(steal_fd(&in[0]));
	close(steal_fd(&out[1]));
	close(steal_fd(&err[1]));
	if (r < 0) {
		close_pair(in);
		close_pair(out);
		close_pair(err);
		return r;
	}

	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	*p = (struct runnerd_proc){
		.pid = pid,
		.in_fd = in[1],
		.out_fd = out[0],
		.err_fd = err[0],
		.in_buf = steal_pointer(&in_buf),
		.in_len = input_len,
		.out_max = out_max,
		.done = done,
		.userdata = userdata,
	};
	r = sd_event_add_child(e, &p->child, pid, WEXITED, on_exit_child, p);
	if (r < 0) {
		/* Without a child source nobody would reap it: do it here, it is being killed. */
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		proc_free(p);
		return r;
	}
	if ((p->in_fd >= 0 && (r = sd_event_add_io(e, &p->in_src, p->in_fd, EPOLLOUT, on_in, p)) < 0) ||
	    (r = sd_event_add_io(e, &p->out_src, p->out_fd, EPOLLIN, on_out, p)) < 0 ||
	    (r = sd_event_add_io(e, &p->err_src, p->err_fd, EPOLLIN, on_err, p)) < 0 ||
	    (timeout_ms > 0 && (r = sd_event_add_time_relative(e, &p->timer, CLOCK_MONOTONIC, timeout_ms * 1000,
								 10 * 1000, on_timeout, p)) < 0)) {
		/* The child source stays: it reaps the killed child and frees p. */
		runnerd_proc_detach(p);
		runnerd_proc_kill(p);
		return r;
	}
	*ret = p;
	return 0;
}
