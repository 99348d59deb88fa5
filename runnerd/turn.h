/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's turns as a state machine, from TURN_RUN to TURN_DONE (HACKING.md "Turn flow").
 *
 * Dependencies point one way:
 *
 *   statd.c, broker.c (link glue) --inputs--> turn.c --ops--> turn_ops.c
 *                                                             (docker CLI children, timers,
 *                                                              run dirs, the links, the loop)
 *
 * turn.c includes this header, removal.h (the container's docker rm -f rounds, on these
 * same ops), the pure docker_args.h and worker_io.h, and common/ only;
 * tests/unit/check_runnerd_turn.c drives it with a fake clock and recording ops, without
 * Docker or sockets.
 *
 * Phases of one turn (RUNNERD_TURN_*):
 *
 *   TURN_RUN --> BROKER_WAIT --> BINDING --> RUNNING --+--> REMOVING <--> REMOVE_WAIT
 *   (run dir,    (link up:       (BOUND:     (docker   |       |
 *    broker.sock) BROKER_BIND)    workspace   run -i,  |       v
 *                                 re-check,   stdout)  +--> FINISHING --> freed
 *                                 spawn)
 *
 * The outcome is decided once, in any of the first three phases (the first wins): a
 * reply, a failure, the deadline (RTS_TURN_TIMEOUT), TURN_CANCEL or statd gone or
 * shutdown (RTS_TURN_CANCELLED), brokerd gone (RTS_TURN_ERROR). Deciding it sends
 * BROKER_CLOSE (when bound), SIGKILLs the docker CLI if it still runs and starts the
 * removals a container may need: none when docker run never started or exited cleanly
 * with --rm, one after a failed run, two after a kill (the second
 * RUNNERD_RM_SECOND_DELAY_MS after the first: the create/attach race). A removal that fails or times out makes the status RTS_TURN_CLEANUP_FAILED.
 * FINISHING removes the run dir, logs the one outcome line and sends TURN_DONE, unless
 * statd is gone. A turn is freed only from a timer or child callback of its own, never
 * from inside an input, so every input is safe from anywhere.
 *
 * A precheck (DESIGN.md 8.3) is a turn of another kind (RUNNERD_KIND_PRECHECK) with the
 * same phases, deadline, cancellations and removals. What differs is where it starts and
 * what it reports: PRECHECK_RUN instead of TURN_RUN (no workspace from statd: its run dir
 * <precheck runRoot>/precheck-<id>/ holds the broker socket and an empty workspace,
 * mounted read-only), PRECHECK_BIND with the approvals instead of BROKER_BIND, the
 * precheck image, limits and deadline (precheck.timeoutMs), the harness's input and result
 * line instead of the worker's (runnerd/precheck_io.h), and PRECHECK_DONE instead of
 * TURN_DONE. */
#ifndef RUNNERD_TURN_H
#define RUNNERD_TURN_H

#include <json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "common/conf.h"
#include "common/msg.h"
#include "runnerd/proc.h"

enum runnerd_turn_kind {
	RUNNERD_KIND_TURN = 0, /* a guest turn: TURN_RUN .. TURN_DONE */
	RUNNERD_KIND_PRECHECK, /* a precheck script: PRECHECK_RUN .. PRECHECK_DONE */
};

/* Turns running at once (beyond: an immediate TURN_DONE with RTS_TURN_ERROR). */
#define RUNNERD_MAX_TURNS 64u
/* How long brokerd may take to answer BROKER_BIND (from the moment the turn asks for the
 * link, so connecting and HELLO count too). */
#define RUNNERD_BIND_TIMEOUT_MS 5000u
/* Each docker rm -f has this deadline (seed: "each removal command has a five-second
 * deadline"). */
#define RUNNERD_RM_TIMEOUT_MS 5000u
/* The second removal after a kill covers the create/attach race (seed: "A short second
 * removal covers the local create/attach race"). */
#define RUNNERD_RM_SECOND_DELAY_MS 1000u
/* stdout kept from docker rm -f (it prints the name; nothing in it is used). */
#define RUNNERD_RM_OUTPUT_MAX 4096u
/* First line of a failed docker CLI's stderr that is logged. */
#define RUNNERD_STDERR_LOG_MAX 200u

enum runnerd_turn_phase {
	RUNNERD_TURN_BROKER_WAIT, /* run dir and broker.sock made; waiting for the brokerd link */
	RUNNERD_TURN_BINDING,	  /* BROKER_BIND sent; BROKER_BOUND due within RUNNERD_BIND_TIMEOUT_MS */
	RUNNERD_TURN_RUNNING,	  /* docker run -i runs; its stdout will be the reply */
	RUNNERD_TURN_REMOVING,	  /* outcome decided; a docker rm -f runs */
	RUNNERD_TURN_REMOVE_WAIT, /* outcome decided; the second docker rm -f is due */
	RUNNERD_TURN_FINISHING,	  /* removals over; run dir removal, log line, TURN_DONE are due */
};

struct runnerd_turn;
/* A warm spare a turn took over (runnerd/spare.h). */
struct runnerd_spare_claim {
	char id[RTS_TURN_ID_LEN + 1]; /* the spare's own id: its container name and run dir */
	int listen_fd;		      /* its broker.sock listener, nothing accepted yet */
	struct runnerd_proc *run;     /* its docker run -i, stdin still open and empty */
};
struct rts_timer; /* a timer handle (common/timer.h), opaque to the machine */
/* One statd connection (runnerd.h). Opaque here: turns only hand it back to send_done. */
struct runnerd_statd;

/* The effects. owner is the one given to runnerd_turns_init. */
struct runnerd_turn_ops {
	/* CLOCK_MONOTONIC in ms: the deadline, the worker's time left, durations. */
	uint64_t (*now_ms)(void *owner);
	/* One-shot timers with common/timer.h's contract: fn(arg) runs once, after the timer
	 * freed itself; after_ms 0 runs it from the loop once the current callback returned.
	 * Returns 0 or -errno. */
	int (*timer_start)(void *owner, uint64_t after_ms, void (*fn)(void *arg), void *arg,
			   struct rts_timer **ret);
	void (*timer_stop)(void *owner, struct rts_timer *t);

	/* runRoot/<turn>/ and its listening broker.sock: the listening fd or -errno.
	 * Removal: 0 or -errno. */
	int (*run_dir_create)(void *owner, const char *turn_id);
	int (*run_dir_remove)(void *owner, const char *turn_id);
	/* Right before docker run: does path still name the directory fd (statd verified)?
	 * 0, or -errno (-ESTALE: another inode, or not a directory). */
	int (*workspace_check)(void *owner, const char *path, int fd);

	/* The docker CLI, as runnerd/proc.h: argv (absolute argv[0]), input taken over,
	 * stdout up to out_max, killed after timeout_ms (0: never); done(p, result, arg) once
	 * it exited. Returns 0 with *ret or -errno (input freed). */
	int (*spawn)(void *owner, char *const argv[], char *input, size_t input_len, size_t out_max,
		     uint64_t timeout_ms, runnerd_proc_done_t done, void *arg, struct runnerd_proc **ret);
	/* SIGKILL it (done still follows), or forget it (done never follows). */
	void (*kill)(void *owner, struct runnerd_proc *p);
	void (*detach)(void *owner, struct runnerd_proc *p);
	pid_t (*pid)(void *owner, const struct runnerd_proc *p);

	/* Make sure a brokerd link exists or is being made; runnerd_turns_broker_up follows
	 * when it is up (maybe from inside this call), runnerd_turns_broker_lost when it
	 * cannot be. */
	void (*broker_want)(void *owner);
	/* Send BROKER_BIND (m's fd is taken whatever happens); returns the generation of the
	 * link it went out on. A send failure fails the link, and its loss this turn. */
	uint64_t (*broker_bind)(void *owner, const struct rts_msg_broker_bind *m);
	/* Send BROKER_CLOSE for turn_id if the link of generation gen is still the current
	 * one (on a newer link brokerd never heard of the turn). */
	void (*broker_close)(void *owner, uint64_t gen, const char *turn_id);
	/* Send TURN_DONE to peer. */
	void (*turn_done)(void *owner, struct runnerd_statd *peer, const struct rts_msg_turn_done *m);

	/* Prechecks. <precheck runRoot>/precheck-<id>/ with an empty workspace/ and a listening
	 * broker/broker.sock: the listening fd or -errno (nothing left behind on failure).
	 * Removal of all of it: 0 or -errno. */
	int (*precheck_dir_create)(void *owner, const char *id);
	int (*precheck_dir_remove)(void *owner, const char *id);
	/* Send PRECHECK_BIND (m's fd is taken whatever happens); as broker_bind. */
	uint64_t (*precheck_bind)(void *owner, const struct rts_msg_precheck_bind *m);
	/* Send PRECHECK_DONE to peer. */
	void (*precheck_done)(void *owner, struct runnerd_statd *peer, const struct rts_msg_precheck_done *m);

	/* Shutting down and the last turn is gone. */
	void (*idle)(void *owner);
	/* Optional (metrics): a turn finished with status after duration_ms (TURN_RUN to
	 * FINISHING). */
	void (*finished)(void *owner, enum rts_turn_status status, uint64_t duration_ms, bool warm);

	/* Warm spares (runnerd/spare.h); all optional (NULL: every turn starts cold).
	 * spare_claim: take the ready spare of channel_hash whose workspace is the directory
	 * workspace_fd names; its docker CLI then reports to done(p, result, arg). Returns 1
	 * with *out filled (the listener and the CLI are the caller's now), 0 when there is
	 * none (a mismatching one is discarded). */
	int (*spare_claim)(void *owner, const char *channel_hash, int workspace_fd, runnerd_proc_done_t done,
			   void *arg, struct runnerd_spare_claim *out);
	/* Write the worker input (taken over) to a claimed spare's stdin. 0 or -errno. */
	int (*spare_feed)(void *owner, struct runnerd_proc *p, char *input, size_t input_len);
	/* A turn of channel_hash finished: start its replacement spare. workspace_fd (O_PATH,
	 * taken over, may be -1) is the directory statd verified for it. */
	void (*spare_refill)(void *owner, const char *channel_hash, const char *workspace, int workspace_fd);
};

/* What every turn needs from the configuration; all borrowed for the machine's life. */
struct runnerd_turn_config {
	const struct rts_config *cfg;
	json_object *public_tools; /* rts_config_public_tools(cfg) */
	uid_t uid;		   /* the container's user and group */
	gid_t gid;
};

/* The turns of one runnerd. */
struct runnerd_turns {
	const struct runnerd_turn_ops *ops;
	void *owner;
	struct runnerd_turn_config conf;
	TAILQ_HEAD(, runnerd_turn) list;
	unsigned n;
	bool shutting_down;
};

void runnerd_turns_init(struct runnerd_turns *ts, const struct runnerd_turn_ops *ops, void *owner,
			const struct runnerd_turn_config *conf);

/* ---- inputs from statd ---- */

/* TURN_RUN from peer: validate every field (-EBADMSG drops the peer for a malformed or
 * inconsistent message), then start the turn or answer TURN_DONE at once (too many turns:
 * RTS_TURN_ERROR; shutting down: RTS_TURN_CANCELLED). Takes m's fd. Returns 0 or
 * -EBADMSG. */
int runnerd_turn_run(struct runnerd_turns *ts, struct runnerd_statd *peer, struct rts_msg_turn_run *m);
/* PRECHECK_RUN from peer: as runnerd_turn_run. A precheck runnerd cannot take (too many
 * turns, shutting down, no "precheck" in its config) is answered with PRECHECK_DONE at
 * once (RTS_TURN_ERROR, RTS_TURN_CANCELLED). Returns 0 or -EBADMSG. */
int runnerd_precheck_run(struct runnerd_turns *ts, struct runnerd_statd *peer, struct rts_msg_precheck_run *m);
/* TURN_CANCEL and PRECHECK_CANCEL: cancel turn_id if peer started it (unknown ids are
 * ignored). */
void runnerd_turn_cancel_id(struct runnerd_turns *ts, struct runnerd_statd *peer, const char *turn_id);
/* peer's connection is gone: cancel its turns, which then end without TURN_DONE. */
void runnerd_turns_forget_peer(struct runnerd_turns *ts, struct runnerd_statd *peer);

/* ---- inputs from brokerd ---- */

/* The link (generation gen) is up: send BROKER_BIND for every turn waiting for it. */
void runnerd_turns_broker_up(struct runnerd_turns *ts);
/* BROKER_BOUND for turn_id on link gen (late answers and unknown ids are ignored). */
void runnerd_turn_bound(struct runnerd_turns *ts, uint64_t gen, const char *turn_id, int32_t result);
/* The link of generation gen was lost (gen 0: none was up): turns bound through it fail
 * (RTS_TURN_ERROR), and so do the turns waiting for a link when connect_failed (it never
 * came up); turns still waiting otherwise ask for a new link. */
void runnerd_turns_broker_lost(struct runnerd_turns *ts, uint64_t gen, bool connect_failed);

/* ---- shutdown ---- */

/* Refuse new turns and cancel every turn (RTS_TURN_CANCELLED, clean-up as usual);
 * ops->idle once none is left (at once when there are none). */
void runnerd_turns_shutdown(struct runnerd_turns *ts);

/* ---- queries (tests, logs) ---- */

struct runnerd_turn *runnerd_turn_find(struct runnerd_turns *ts, const char *turn_id);
enum runnerd_turn_phase runnerd_turn_phase(const struct runnerd_turn *t);
/* Turns whose container may exist (docker run started, removal not over yet). */
unsigned runnerd_turns_containers(const struct runnerd_turns *ts);
enum runnerd_turn_kind runnerd_turn_kind(const struct runnerd_turn *t);

#endif
