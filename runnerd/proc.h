/* SPDX-License-Identifier: Apache-2.0 */
/* Asynchronous children (the docker CLI) on the sd-event loop: common/spawn.h's child,
 * driven by event sources (its pidfd, its pipes, a timer) instead of a blocking wait. The
 * event loop must have SIGCHLD blocked (sd_event_add_child_pidfd requires it). */
#ifndef RUNNERD_PROC_H
#define RUNNERD_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/* Bytes of a child's stderr that are kept (the rest is read and discarded, so the child
 * never blocks on a full pipe). */
#define RUNNERD_PROC_ERR_MAX 4096u

struct runnerd_proc;

struct runnerd_proc_result {
	bool exited;	  /* exited normally (then status is the exit status) */
	int status;	  /* exit status, or the terminating signal when !exited */
	bool killed;	  /* we sent SIGKILL (runnerd_proc_kill, timeout or overflow) */
	bool timed_out;	  /* the proc's own timeout expired and it was killed */
	bool out_overflow; /* stdout exceeded out_max bytes; the child was killed */
	const char *out;  /* stdout, out_len bytes plus a NUL; valid during the callback */
	size_t out_len;
	const char *err; /* the first RUNNERD_PROC_ERR_MAX bytes of stderr plus a NUL */
	size_t err_len;
};

/* Called once, after the child exited and its pipes were drained. The proc is freed right
 * after the callback returns; do not touch it afterwards. */
typedef void (*runnerd_proc_done_t)(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata);

/* Spawn argv[0] (an absolute path) with exactly the environment envp, in a new session,
 * all signals unblocked and default, no fds but the three pipes (rts_child_start()).
 * input (heap, taken over
 * and freed; may be NULL for /dev/null) is written to stdin, which is then closed. Up to
 * out_max bytes of stdout are kept; one more byte kills the child. timeout_ms > 0 kills the
 * child when it runs longer. Returns 0 with *ret (owned by the event loop until done is
 * called), or -errno (posix_spawn's error, e.g. -ENOENT for a missing docker CLI; input is
 * freed then too). */
int runnerd_proc_spawn(sd_event *e, char *const argv[], char *const envp[], char *input, size_t input_len,
		       size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done, void *userdata,
		       struct runnerd_proc **ret);

/* As runnerd_proc_spawn, for a warm spare (runnerd/spare.h): stdin is a pipe that stays
 * open and empty, so the worker waits for its input, until runnerd_proc_feed(); no
 * timeout. Returns 0 with *ret or -errno. */
int runnerd_proc_spawn_held(sd_event *e, char *const argv[], char *const envp[], size_t out_max,
			    runnerd_proc_done_t done, void *userdata, struct runnerd_proc **ret);

/* Called for each read that brought stdout bytes of a watching child (runnerd_proc_spawn_watch);
 * the bytes themselves are dropped. */
typedef void (*runnerd_proc_output_t)(struct runnerd_proc *p, void *userdata);

/* As runnerd_proc_spawn, for a child that reports events on stdout for as long as it runs
 * (`docker events`): stdin is /dev/null, there is no timeout, and stdout is never
 * collected: each read that brought bytes calls output(p, userdata) and the bytes are
 * dropped, so a chatty child costs no memory. done is called when it ends, as for any
 * proc. Returns 0 with *ret or -errno. */
int runnerd_proc_spawn_watch(sd_event *e, char *const argv[], char *const envp[], runnerd_proc_output_t output,
			     runnerd_proc_done_t done, void *userdata, struct runnerd_proc **ret);

/* Write input (heap, taken over) to a held child's stdin, then close it. Once only: -EALREADY
 * for a child not held or already fed (input freed). Returns 0 or -errno. */
int runnerd_proc_feed(struct runnerd_proc *p, char *input, size_t input_len);

/* Hand the child to another owner: done(p, result, userdata) is called instead. */
void runnerd_proc_retarget(struct runnerd_proc *p, runnerd_proc_done_t done, void *userdata);

/* SIGKILL the child (through its pidfd, so a recycled pid is never hit). Idempotent. */
void runnerd_proc_kill(struct runnerd_proc *p);

/* The owner goes away: the callback will not be called; the proc still reaps the child
 * and frees itself when it exits. Call runnerd_proc_kill first if it must not live on. */
void runnerd_proc_detach(struct runnerd_proc *p);

pid_t runnerd_proc_pid(const struct runnerd_proc *p);

#endif
