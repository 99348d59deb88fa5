/* SPDX-License-Identifier: Apache-2.0 */
/* Running another program: the suite's one spawner. brokerd runs host tools and key
 * commands with rts_spawn_run(), the admin CLI the docker CLI; runnerd drives the same
 * rts_child from its event loop (runnerd/proc.c).
 *
 * Every child is started by posix_spawn(3) from an absolute path, never through a shell,
 * with exactly the environment the caller passes, an empty signal mask, every signal at
 * its default action, and no descriptor of ours beyond its stdin, stdout and stderr
 * (closefrom in the child, on top of O_CLOEXEC everywhere: a descriptor a library left
 * inheritable stays here too). A pidfd names it from the start, and it is reaped only
 * once nothing will signal it any more, so no signal can reach a recycled pid. In a
 * session of its own (new_session) with kill_group, the whole process group is
 * signalled, and whatever the leader leaves running in it is killed when the leader
 * exits: no process outlives its run.
 *
 * Output is read into bounded buffers (struct rts_capture): stdout up to a maximum, where
 * one more byte stops the child; the first bytes of stderr, for one sanitised log line,
 * with the rest read and dropped, so a child never blocks on a full pipe. Input is
 * written to stdin while output is read, then stdin is closed.
 *
 * Writing to a child that stopped reading fails with EPIPE, which raises SIGPIPE: a
 * caller that pipes input ignores SIGPIPE (the daemons do). */
#ifndef RTS_SPAWN_H
#define RTS_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cancel.h"

/* Bytes of stderr a caller may keep (struct rts_spawn.err_max). */
#define RTS_SPAWN_ERR_MAX 4096u

/* What one of the child's stdin, stdout and stderr is. */
enum rts_spawn_stdio {
	RTS_STDIO_NULL,	   /* /dev/null (opened for writing for stdout and stderr, which brokerd's
			    * filter refuses: its children read stdin from a pipe or /dev/null, and
			    * their stdout and stderr are pipes) */
	RTS_STDIO_INHERIT, /* the same descriptor as ours */
	RTS_STDIO_PIPE,	   /* stdin: input is written, then closed; stdout, stderr: captured */
	RTS_STDIO_FD,	   /* the descriptor in struct rts_spawn.fds (borrowed; above 3) */
};

/* How to start a child. Everything is borrowed until the child is started (and input
 * until it was written). */
struct rts_spawn {
	char *const *argv;	/* NULL-terminated; argv[0] is an absolute path */
	char *const *envp;	/* NULL-terminated: the child's whole environment */
	const char *cwd;	/* working directory, or NULL to keep ours */
	bool new_session;	/* setsid(): a session and process group of its own */
	bool kill_group;	/* with new_session: signals go to the whole group, and what the
				 * leader leaves in it is killed when the leader exits */
	enum rts_spawn_stdio in, out, err;
	const char *input;	/* in == RTS_STDIO_PIPE: input_len bytes for stdin (may be 0) */
	size_t input_len;
	size_t out_max;		/* out == RTS_STDIO_PIPE: stdout bytes kept; one more overflows */
	size_t err_max;		/* err == RTS_STDIO_PIPE: the first err_max bytes of stderr are kept
				 * (at most RTS_SPAWN_ERR_MAX), the rest is read and dropped */
	int fds[3];		/* RTS_STDIO_FD: stdin's, stdout's, stderr's descriptor */
	bool with_fd3;		/* the child also gets fd3 (borrowed; above 3) as its descriptor 3 */
	int fd3;
	/* A child started elsewhere (brokerd's host commands, by its launcher): instead of
	 * posix_spawn, start(hook_arg, fds, &pidfd) is handed the child's ends of its stdin,
	 * stdout and stderr pipes (all three must be RTS_STDIO_PIPE; it dups what it passes
	 * on: they are closed when it returns) and answers 0 with a pidfd of the process to
	 * watch and signal, or -errno. argv, envp and cwd are then the starter's business
	 * and may be NULL; kill_group must be false (the process signalled is expected to
	 * pass signals on). reap(hook_arg, &status) is called once instead of waitpid(), after
	 * the pidfd showed the process's end or it was killed, and answers 0 with a
	 * waitpid()-style status, or -errno. */
	int (*start)(void *hook_arg, const int fds[3], int *pidfd);
	int (*reap)(void *hook_arg, int *status);
	void *hook_arg;
};

/* A bounded output buffer. */
struct rts_capture {
	char *buf;	/* len bytes and a NUL (heap), or NULL until something arrived */
	size_t len, cap;
	size_t max;	/* bytes kept */
	bool keep_head; /* keep the first max bytes and drop the rest; else more is an overflow */
	bool overflow;	/* !keep_head and more than max bytes came (len stays max) */
};

/* What a read or write step on a pipe found. */
enum rts_io {
	RTS_IO_DONE, /* the stream is over (end, error, overflow, all input written): close it */
	RTS_IO_IDLE, /* EAGAIN: nothing more for now */
	RTS_IO_MORE, /* the step's budget ran out while there was more: call it again */
};

/* A started child. */
struct rts_child {
	pid_t pid;
	int pidfd;		   /* -1 once an event loop owns it (runnerd/proc.c) */
	bool group;		   /* kill_group: signals go to its process group */
	int in_fd, out_fd, err_fd; /* our non-blocking pipe ends; -1 when not a pipe, or closed */
	const char *input;	   /* what is left to write is input + input_pos .. input_len */
	size_t input_len, input_pos;
	struct rts_capture out, err;
	int (*reap)(void *hook_arg, int *status); /* started elsewhere (struct rts_spawn.start); pid is -1 */
	void *hook_arg;
};

/* Start s's child. Returns 0 with *c filled in (release it with rts_child_release() after
 * reaping it), or -errno with nothing left behind: -EINVAL for a relative argv[0], a
 * missing envp, kill_group without new_session, an RTS_STDIO_FD or fd3 descriptor not
 * above 3, or a start hook with a stdio that is not a pipe or with kill_group;
 * posix_spawn's error (-ENOENT, -EACCES, -ENOEXEC, ...) when the program could not be
 * executed, the start hook's error, or the error of pipe2()/pidfd_open(). An empty input
 * closes stdin at once. */
int rts_child_start(const struct rts_spawn *s, struct rts_child *c);

/* Write what is left of the input to c->in_fd without blocking. RTS_IO_DONE once all of
 * it is written or the child stopped reading (EPIPE): then close in_fd, which is the end
 * of input the child waits for. */
enum rts_io rts_child_write_input(struct rts_child *c);

/* Read from fd into cap without blocking, a bounded number of reads per call.
 * RTS_IO_DONE at the end of the stream, on a read error and on an overflow (cap->overflow
 * set): close fd then. */
enum rts_io rts_capture_read(struct rts_capture *cap, int fd);

/* Send sig to c's process group (kill_group) or, through the pidfd, to c itself.
 * Only before c is reaped. Returns 0 or -errno (-ESRCH: already gone). */
int rts_child_signal(const struct rts_child *c, int sig);

/* Close whatever pipe ends are still open (a child blocked writing to us gets EPIPE). */
void rts_child_close_pipes(struct rts_child *c);

/* Close c's descriptors and free its buffers. Does not signal or reap it. */
void rts_child_release(struct rts_child *c);

/* How a child run by rts_spawn_run() ended. */
struct rts_spawn_result {
	bool exited; /* it exited: status is its exit status; else a signal (status) ended it */
	int status;
	char *out;   /* out == RTS_STDIO_PIPE and rts_spawn_run() returned 0: stdout, out_len
		      * bytes and a NUL; else NULL */
	size_t out_len;
	char *err;   /* err == RTS_STDIO_PIPE and the child was started: the kept stderr,
		      * err_len bytes and a NUL, whatever rts_spawn_run() returned; else NULL */
	size_t err_len;
};

/* Run s's child to its end, writing input and reading output while it runs. cancel (may
 * be NULL) bounds the run: its deadline, wake fd, hang-up fd and predicate stop the child
 * as described below. The child is stopped when it runs past the deadline, when cancel
 * fires, or when stdout goes past out_max: its pipes are closed, it (its group, with
 * kill_group) gets SIGTERM and, kill_grace_ms later, SIGKILL (at once when kill_grace_ms
 * is 0); then it is reaped. Blocks until the child is reaped.
 * Returns 0 when the child ended by itself (see r->exited and r->status), -ETIMEDOUT,
 * -ECANCELED, -EFBIG (stdout overflow), or -errno when it could not be started
 * (rts_child_start()) or waited for. r is filled in whenever the child was started (its
 * status, and stderr whatever the result); release it with rts_spawn_result_release(). */
int rts_spawn_run(const struct rts_spawn *s, const struct rts_cancel *cancel, unsigned kill_grace_ms,
		  struct rts_spawn_result *r);

/* Free what r holds and clear it. */
void rts_spawn_result_release(struct rts_spawn_result *r);

/* The first line of len bytes of a child's stderr (up to CR or LF), cut to outlen - 1
 * bytes, with every byte that is not printable ASCII replaced by '?', into out (outlen >= 1,
 * always NUL-terminated): what reaches the host log of text a child (or a guest steering
 * it) wrote, so it can neither forge log lines nor send terminal escapes. */
void rts_spawn_first_line(const char *err, size_t len, char *out, size_t outlen);

#endif
