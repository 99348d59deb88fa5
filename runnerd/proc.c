/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/spawn.h"
#include "common/util.h"
#include "runnerd/proc.h"
#include "runnerd/runnerd.h"

struct runnerd_proc {
	struct rts_child c; /* its pidfd belongs to the child source */
	sd_event_source *child;
	sd_event_source *in_src, *out_src, *err_src, *timer;
	char *input; /* what c.input points into */
	sd_event *event;
	bool held;   /* runnerd_proc_spawn_held: c.in_fd is open and not watched until fed */
	bool killed, timed_out;
	runnerd_proc_output_t output; /* runnerd_proc_spawn_watch: stdout is reported, not kept */
	runnerd_proc_done_t done;
	void *userdata;
};

/* Stop watching a pipe, then close it: the source goes before its descriptor. */
static void close_stream(sd_event_source **src, int *fd)
{
	*src = sd_event_source_disable_unref(*src);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void proc_free(struct runnerd_proc *p)
{
	close_stream(&p->in_src, &p->c.in_fd);
	close_stream(&p->out_src, &p->c.out_fd);
	close_stream(&p->err_src, &p->c.err_fd);
	p->timer = sd_event_source_disable_unref(p->timer);
	/* sd-event keeps a dispatching source alive and reaps the zombie after the callback. */
	p->child = sd_event_source_unref(p->child);
	rts_child_release(&p->c);
	free(p->input);
	free(p);
}

pid_t runnerd_proc_pid(const struct runnerd_proc *p)
{
	return p->c.pid;
}

void runnerd_proc_kill(struct runnerd_proc *p)
{
	if (p->killed || !p->child)
		return;
	p->killed = true;
	/* Through the pidfd sd-event holds (or to the group): the pid cannot have been
	 * reused, the child is not reaped before its source fires. */
	int r = p->c.group ? rts_child_signal(&p->c, SIGKILL)
			   : sd_event_source_send_child_signal(p->child, SIGKILL, NULL, 0);
	if (r < 0 && r != -ESRCH)
		log_warning_errno(r, "cannot kill docker CLI process %ld: %m", (long)p->c.pid);
}

void runnerd_proc_detach(struct runnerd_proc *p)
{
	p->done = NULL;
	p->output = NULL;
	p->userdata = NULL;
}

static int on_out(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	enum rts_io io = rts_capture_read(&p->c.out, p->c.out_fd);
	if (p->output && p->c.out.len > 0) {
		/* A watch: what came is an event; its bytes are not kept. */
		p->c.out.len = 0;
		p->c.out.buf[0] = '\0';
		p->output(p, p->userdata);
	}
	if (io == RTS_IO_DONE) {
		close_stream(&p->out_src, &p->c.out_fd);
		if (p->c.out.overflow)
			runnerd_proc_kill(p);
	}
	return 0;
}

static int on_err(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	if (rts_capture_read(&p->c.err, p->c.err_fd) == RTS_IO_DONE)
		close_stream(&p->err_src, &p->c.err_fd);
	return 0;
}

static int on_in(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_proc *p = userdata;
	/* Closing stdin is the end of input the worker waits for. */
	if (rts_child_write_input(&p->c) == RTS_IO_DONE)
		close_stream(&p->in_src, &p->c.in_fd);
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
	/* With kill_group, what the leader left running in its group goes with it (it is
	 * not reaped yet), so the drain below is bounded by what the pipes hold. */
	if (p->c.group)
		(void)rts_child_signal(&p->c, SIGKILL);
	/* The child is gone, so what it wrote is in the pipes now: drain it. A process it
	 * left holding a pipe only gives EAGAIN, never a wait. */
	while (p->c.out_fd >= 0 && rts_capture_read(&p->c.out, p->c.out_fd) == RTS_IO_MORE)
		;
	while (p->c.err_fd >= 0 && rts_capture_read(&p->c.err, p->c.err_fd) == RTS_IO_MORE)
		;
	close_stream(&p->in_src, &p->c.in_fd);
	close_stream(&p->out_src, &p->c.out_fd);
	close_stream(&p->err_src, &p->c.err_fd);
	p->timer = sd_event_source_disable_unref(p->timer);

	struct runnerd_proc_result r = {
		.exited = si->si_code == CLD_EXITED,
		.status = si->si_status,
		.killed = p->killed,
		.timed_out = p->timed_out,
		.out_overflow = p->c.out.overflow,
		.out = p->c.out.buf ? p->c.out.buf : "",
		.out_len = p->c.out.len,
		.err = p->c.err.buf ? p->c.err.buf : "",
		.err_len = p->c.err.len,
	};
	if (p->done)
		p->done(p, &r, p->userdata);
	proc_free(p);
	return 0;
}

static int proc_start(sd_event *e, char *const argv[], char *const envp[], char *input, size_t input_len,
		      int held_in, size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done, void *userdata,
		      struct runnerd_proc **ret);

int runnerd_proc_spawn(sd_event *e, char *const argv[], char *const envp[], char *input, size_t input_len,
		       size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done, void *userdata,
		       struct runnerd_proc **ret)
{
	return proc_start(e, argv, envp, input, input_len, -1, out_max, timeout_ms, done, userdata, ret);
}

int runnerd_proc_spawn_held(sd_event *e, char *const argv[], char *const envp[], size_t out_max,
			    runnerd_proc_done_t done, void *userdata, struct runnerd_proc **ret)
{
	int pipefd[2];
	*ret = NULL;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	/* Our end never blocks the loop; the child's is its stdin (dup2'd, so O_CLOEXEC on
	 * ours is right). */
	int r = rts_fd_set_nonblock(pipefd[1], true);
	if (r >= 0)
		r = proc_start(e, argv, envp, NULL, 0, pipefd[0], out_max, 0, done, userdata, ret);
	close(pipefd[0]);
	if (r < 0) {
		close(pipefd[1]);
		return r;
	}
	(*ret)->held = true;
	(*ret)->c.in_fd = pipefd[1];
	return 0;
}

int runnerd_proc_feed(struct runnerd_proc *p, char *input, size_t input_len)
{
	cleanup_free char *in_buf = input;
	if (!p->held || p->c.in_fd < 0 || p->in_src)
		return -EALREADY;
	p->held = false;
	p->input = steal_pointer(&in_buf);
	p->c.input = p->input;
	p->c.input_len = input_len;
	p->c.input_pos = 0;
	int r = sd_event_add_io(p->event, &p->in_src, p->c.in_fd, EPOLLOUT, on_in, p);
	if (r < 0)
		close_stream(&p->in_src, &p->c.in_fd);
	return r;
}

int runnerd_proc_spawn_watch(sd_event *e, char *const argv[], char *const envp[], runnerd_proc_output_t output,
			     runnerd_proc_done_t done, void *userdata, struct runnerd_proc **ret)
{
	/* 4 KiB a read at most, the rest of a burst dropped (keep_head); each read's bytes
	 * are reported and forgotten in on_out. */
	int r = proc_start(e, argv, envp, NULL, 0, -1, 4096, 0, done, userdata, ret);
	if (r < 0)
		return r;
	(*ret)->c.out.keep_head = true;
	(*ret)->output = output;
	return 0;
}

void runnerd_proc_retarget(struct runnerd_proc *p, runnerd_proc_done_t done, void *userdata)
{
	p->done = done;
	p->userdata = userdata;
}

static int proc_start(sd_event *e, char *const argv[], char *const envp[], char *input, size_t input_len,
		      int held_in, size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done, void *userdata,
		      struct runnerd_proc **ret)
{
	cleanup_free char *in_buf = input;
	*ret = NULL;
	const struct rts_spawn s = {
		.argv = argv,
		.envp = envp,
		/* A session of its own: a terminal's ^C reaches runnerd, which decides what to
		 * kill: the CLI itself (it starts no processes of its own). */
		.new_session = true,
		.in = held_in >= 0 ? RTS_STDIO_FD : input ? RTS_STDIO_PIPE : RTS_STDIO_NULL,
		.fds = {held_in, -1, -1},
		.input = input,
		.input_len = input_len,
		.out = RTS_STDIO_PIPE,
		.out_max = out_max,
		.err = RTS_STDIO_PIPE,
		.err_max = RUNNERD_PROC_ERR_MAX,
	};
	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	int r = rts_child_start(&s, &p->c);
	if (r < 0) {
		free(p);
		return r;
	}
	p->input = steal_pointer(&in_buf);
	p->event = e;
	p->done = done;
	p->userdata = userdata;
	r = sd_event_add_child_pidfd(e, &p->child, p->c.pidfd, WEXITED, on_exit_child, p);
	if (r >= 0)
		r = sd_event_source_set_child_pidfd_own(p->child, true);
	if (r < 0) {
		/* Without a child source nobody would reap it: do it here, it is being killed. */
		p->child = sd_event_source_unref(p->child);
		rts_child_signal(&p->c, SIGKILL);
		while (waitpid(p->c.pid, NULL, 0) < 0 && errno == EINTR)
			;
		proc_free(p);
		return r;
	}
	p->c.pidfd = -1; /* the source's now */
	if ((p->c.in_fd >= 0 && (r = sd_event_add_io(e, &p->in_src, p->c.in_fd, EPOLLOUT, on_in, p)) < 0) ||
	    (r = sd_event_add_io(e, &p->out_src, p->c.out_fd, EPOLLIN, on_out, p)) < 0 ||
	    (r = sd_event_add_io(e, &p->err_src, p->c.err_fd, EPOLLIN, on_err, p)) < 0 ||
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
