/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/pidfd.h>
#include <sys/wait.h>

#include "brokerd/exec.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

#define STDERR_KEEP 200u
#define READ_CHUNK (64u * 1024u)

/* Host commands see no part of brokerd's environment (which may hold a credential for an
 * {"env"} key source). */
static char *const exec_env[] = {"PATH=/usr/bin:/bin", NULL};

struct run {
	pid_t pid;
	int pidfd;
	int in_fd, out_fd, err_fd; /* our ends, -1 once closed */
	size_t in_off;
	char *out;
	size_t out_len, out_cap;
	char err[STDERR_KEEP + 1];
	size_t err_len;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void run_release(struct run *p)
{
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->pidfd);
	free(p->out);
	p->out = NULL;
}

static int spawn(const struct brokerd_exec *e, struct run *p)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int r = 0;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		r = -errno;
		goto done;
	}

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
	/* Sockets of other turns, upstream connections and the runnerd link stay here. */
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	posix_spawn_file_actions_addchdir_np(&fa, "/");
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	/* Our threads block SIGTERM/SIGINT (sd-event) and we ignore SIGPIPE: the child gets
	 * neither, and its own session so a signal to its group cannot reach us. */
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int sr = posix_spawn(&p->pid, e->argv[0], &fa, &at, e->argv, exec_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (sr != 0) {
		r = -sr;
		goto done;
	}

	p->pidfd = pidfd_open(p->pid, 0);
	if (p->pidfd < 0) {
		r = -errno;
		/* The group exists (the child is at least a zombie we have not reaped). */
		kill(-p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto done;
	}
	p->in_fd = steal_fd(&in[1]);
	p->out_fd = steal_fd(&out[0]);
	p->err_fd = steal_fd(&err[0]);
	/* Only our ends: each end of a pipe is its own open file description, so the child's
	 * stdin/stdout stay blocking. */
	if ((r = rts_fd_set_nonblock(p->in_fd, true)) < 0 || (r = rts_fd_set_nonblock(p->out_fd, true)) < 0 ||
	    (r = rts_fd_set_nonblock(p->err_fd, true)) < 0) {
		kill(-p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		run_release(p);
	}
done:
	for (int i = 0; i < 2; i++) {
		close_fd(&in[i]);
		close_fd(&out[i]);
		close_fd(&err[i]);
	}
	return r;
}

/* Read what is available on stdout. Returns 0, or -EFBIG past max. */
static int read_out(struct run *p, size_t max)
{
	for (;;) {
		if (p->out_cap - p->out_len < READ_CHUNK) {
			size_t cap = p->out_cap ? p->out_cap * 2 : READ_CHUNK;
			/* Never allocate more than max plus one chunk, whatever the child writes. */
			if (cap > max + READ_CHUNK + 1)
				cap = max + READ_CHUNK + 1;
			if (cap > p->out_cap) {
				p->out = rts_xrealloc(p->out, cap);
				p->out_cap = cap;
			}
		}
		size_t room = p->out_cap - p->out_len - 1;
		if (room == 0)
			return -EFBIG;
		ssize_t n = read(p->out_fd, p->out + p->out_len, room);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				close_fd(&p->out_fd);
			return 0;
		}
		if (n == 0) {
			close_fd(&p->out_fd);
			return 0;
		}
		p->out_len += (size_t)n;
		if (p->out_len > max)
			return -EFBIG;
	}
}

/* Keep the first STDERR_KEEP bytes of stderr, drop the rest. */
static void read_err(struct run *p)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(p->err_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || errno != EAGAIN)
				close_fd(&p->err_fd);
			return;
		}
		size_t keep = STDERR_KEEP - p->err_len;
		if (keep > (size_t)n)
			keep = (size_t)n;
		memcpy(p->err + p->err_len, buf, keep);
		p->err_len += keep;
	}
}

static void write_in(const struct brokerd_exec *e, struct run *p)
{
	while (p->in_off < e->input_len) {
		ssize_t n = write(p->in_fd, e->input + p->in_off, e->input_len - p->in_off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			/* EPIPE: the command does not read its input; that is its business. */
			break;
		}
		p->in_off += (size_t)n;
	}
	close_fd(&p->in_fd);
}

/* Move data until the child exits (0), or the deadline, the turn or the output bound
 * stops it. */
static int pump(const struct brokerd_exec *e, struct run *p)
{
	for (;;) {
		if (brokerd_cancel_closing(&e->cancel))
			return -ECANCELED;
		uint64_t now = rts_now_ms();
		if (now >= e->cancel.deadline_ms)
			return -ETIMEDOUT;
		uint64_t left = e->cancel.deadline_ms - now;
		int timeout = left > INT_MAX ? INT_MAX : (int)left;

		struct pollfd fds[6];
		nfds_t n = 0;
		int i_in = -1, i_out = -1, i_err = -1, i_pid, i_wake = -1;
		if (p->in_fd >= 0)
			fds[i_in = (int)n++] = (struct pollfd){.fd = p->in_fd, .events = POLLOUT};
		if (p->out_fd >= 0)
			fds[i_out = (int)n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
		if (p->err_fd >= 0)
			fds[i_err = (int)n++] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
		fds[i_pid = (int)n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
		if (e->cancel.wake_fd >= 0)
			fds[i_wake = (int)n++] = (struct pollfd){.fd = e->cancel.wake_fd, .events = POLLIN};
		/* Wakes on the caller's hang-up only (events 0); seen at the top of the loop. */
		if (e->cancel.has_client)
			fds[n++] = (struct pollfd){.fd = e->cancel.client_fd, .events = 0};
		int k = poll(fds, n, timeout);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (i_in >= 0 && fds[i_in].revents)
			write_in(e, p);
		if (i_out >= 0 && fds[i_out].revents) {
			int r = read_out(p, e->max_output);
			if (r < 0)
				return r;
		}
		if (i_err >= 0 && fds[i_err].revents)
			read_err(p);
		if (fds[i_pid].revents) {
			/* Exited: everything it wrote is in the pipes now. */
			if (p->out_fd >= 0) {
				int r = read_out(p, e->max_output);
				if (r < 0)
					return r;
			}
			if (p->err_fd >= 0)
				read_err(p);
			return 0;
		}
		(void)i_wake; /* a closing turn or a hung-up caller is noticed at the top of the loop */
	}
}

/* SIGTERM to the group, SIGKILL after the grace period, then reap. */
static void stop(struct run *p)
{
	/* A child blocked writing to us gets EPIPE instead of waiting for a reader. */
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	kill(-p->pid, SIGTERM);
	uint64_t until = rts_now_ms() + BROKERD_KILL_GRACE_MS;
	for (;;) {
		uint64_t now = rts_now_ms();
		if (now >= until)
			break;
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		int k = poll(&pf, 1, (int)(until - now));
		if (k > 0 || (k < 0 && errno != EINTR))
			break;
	}
	/* The leader is not reaped yet, so the group id cannot have been reused. */
	kill(-p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static void log_stderr(const struct brokerd_exec *e, struct run *p, int exit_status)
{
	if (!e->stderr_label || p->err_len == 0)
		return;
	p->err[p->err_len] = '\0';
	size_t line = strcspn(p->err, "\r\n");
	p->err[line] = '\0';
	if (line == 0)
		return;
	/* The host log only (never the worker), and only printable ASCII: a tool cannot
	 * forge log lines or terminal escapes. */
	for (size_t i = 0; i < line; i++)
		if ((unsigned char)p->err[i] < 0x20 || (unsigned char)p->err[i] >= 0x7f)
			p->err[i] = '?';
	rts_log_turn(exit_status == 0 ? LOG_DEBUG : LOG_WARNING, e->turn_id, NULL, NULL, 0, "%s stderr: %s",
		     e->stderr_label, p->err);
}

int brokerd_exec_run(const struct brokerd_exec *e, struct brokerd_exec_result *r)
{
	*r = (struct brokerd_exec_result){.exit_status = -1};
	struct run p = {.pid = -1, .pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1};
	if (brokerd_cancel_closing(&e->cancel))
		return -ECANCELED;
	if (rts_now_ms() >= e->cancel.deadline_ms)
		return -ETIMEDOUT;
	int ret = spawn(e, &p);
	if (ret < 0)
		return ret;
	if (e->input_len == 0)
		close_fd(&p.in_fd);

	ret = pump(e, &p);
	if (ret < 0) {
		stop(&p);
		log_stderr(e, &p, -1);
		run_release(&p);
		return ret;
	}
	/* The leader exited; whatever it left behind in its group goes too, before the
	 * leader is reaped (which is what keeps the group id ours). */
	kill(-p.pid, SIGKILL);
	int status = 0;
	while (waitpid(p.pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			run_release(&p);
			return ret;
		}
	}
	r->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	log_stderr(e, &p, r->exit_status);
	if (!p.out)
		p.out = rts_xmalloc(1);
	p.out[p.out_len] = '\0';
	r->output = steal_pointer(&p.out);
	r->len = p.out_len;
	run_release(&p);
	return 0;
}
