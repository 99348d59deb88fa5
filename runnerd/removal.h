/* SPDX-License-Identifier: Apache-2.0 */
/* One container's removal: `docker rm -f` of its exact name in rounds
 * RUNNERD_RM_SECOND_DELAY_MS apart. A turn's container (turn.c), a rich channel's (rich.c)
 * and a discarded warm spare's (spare.c) are removed by this one machine.
 *
 * The rounds (seed: "each removal command has a five-second deadline", "a short second
 * removal covers the local create/attach race"): the owner asks for one (the container was
 * seen to run) or two (it may still be being created). A round that finds "no such
 * container" counts as done. One that finds "removal already in progress" (dockerd removes
 * it already: --rm once a killed docker CLI let go of its stdin) is settled only by a later
 * round, so when none is left one more is added, once. Any other failure, a timeout, or a
 * round that cannot be started or scheduled ends the removal as failed: another try would
 * only hold up the owner, which asks the operator to look instead.
 *
 * Like turn.c, it reaches the docker CLI and timers only through turn.h's ops, so the
 * machines' suites drive it with their fakes; tests/unit/check_runnerd_removal.c drives it
 * on its own. */
#ifndef RUNNERD_REMOVAL_H
#define RUNNERD_REMOVAL_H

#include <stdbool.h>

#include "runnerd/turn.h"

/* Who a removal is for, in its own log lines ("turn <id>", "channel <hash prefix>"). */
#define RUNNERD_REMOVAL_WHAT_MAX 40u

struct runnerd_removal_hooks {
	/* A round failed for good (r: its result; container: the name): log why, in the
	 * owner's words. over() follows. */
	void (*round_failed)(void *arg, const char *container, const struct runnerd_proc_result *r);
	/* No round runs or is due any more; runnerd_removal_failed() tells how it went. Called
	 * last, from runnerd_removal_start() itself when nothing is to be done: the owner may
	 * free the removal in it. */
	void (*over)(void *arg);
};

/* Embedded in its owner; set up with runnerd_removal_init(). The fields are the machine's. */
struct runnerd_removal {
	const struct runnerd_turn_ops *ops;
	void *owner;
	const struct runnerd_removal_hooks *hooks;
	void *arg;
	char what[RUNNERD_REMOVAL_WHAT_MAX + 1];
	char *container;	  /* a copy of the name, while a round runs or is due */
	unsigned rounds_left;	  /* docker rm -f still to run */
	bool extra_round;	  /* one more was added after "removal already in progress" */
	bool failed;		  /* the container may remain */
	struct runnerd_proc *proc; /* the round that runs */
	struct rts_timer *delay;   /* the next round is due */
};

/* ops and owner as given to the turn machine; hooks (borrowed) get arg. what is printf'd
 * into rm->what (cut at RUNNERD_REMOVAL_WHAT_MAX). */
void runnerd_removal_init(struct runnerd_removal *rm, const struct runnerd_turn_ops *ops, void *owner,
			  const struct runnerd_removal_hooks *hooks, void *arg, const char *what_fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Remove container (copied) in rounds (0: none, over() at once); not while busy. */
void runnerd_removal_start(struct runnerd_removal *rm, const char *container, unsigned rounds);
/* A round runs or is due. */
bool runnerd_removal_busy(const struct runnerd_removal *rm);
/* Between two rounds: the next one is due after RUNNERD_RM_SECOND_DELAY_MS. */
bool runnerd_removal_waiting(const struct runnerd_removal *rm);
/* After over(): the container may remain (a round failed, or one could not be run). */
bool runnerd_removal_failed(const struct runnerd_removal *rm);
/* Stop without a word: the timer is stopped, a running docker rm -f detached (it reaps
 * itself; its result goes nowhere), no hook is called. Safe on a zeroed or idle removal. */
void runnerd_removal_abandon(struct runnerd_removal *rm);

#endif
