/* SPDX-License-Identifier: Apache-2.0 */
/* The removal machine of runnerd/removal.h: turn.h's ops, the pure docker_args.h and
 * common/ only. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/removal.h"

void runnerd_removal_init(struct runnerd_removal *rm, const struct runnerd_turn_ops *ops, void *owner,
			  const struct runnerd_removal_hooks *hooks, void *arg, const char *what_fmt, ...)
{
	*rm = (struct runnerd_removal){.ops = ops, .owner = owner, .hooks = hooks, .arg = arg};
	va_list ap;
	va_start(ap, what_fmt);
	(void)vsnprintf(rm->what, sizeof(rm->what), what_fmt, ap);
	va_end(ap);
}

bool runnerd_removal_busy(const struct runnerd_removal *rm)
{
	return rm->proc || rm->delay || rm->rounds_left > 0;
}

bool runnerd_removal_waiting(const struct runnerd_removal *rm)
{
	return rm->delay != NULL;
}

bool runnerd_removal_failed(const struct runnerd_removal *rm)
{
	return rm->failed;
}

void runnerd_removal_abandon(struct runnerd_removal *rm)
{
	if (rm->delay)
		rm->ops->timer_stop(rm->owner, rm->delay);
	rm->delay = NULL;
	if (rm->proc)
		rm->ops->detach(rm->owner, rm->proc);
	rm->proc = NULL;
	rm->rounds_left = 0;
	free(rm->container);
	rm->container = NULL;
}

/* The daemon is not cooperating: another try would only hold up the owner. */
static void give_up(struct runnerd_removal *rm)
{
	rm->failed = true;
	rm->rounds_left = 0;
}

/* Nothing runs or is due: tell the owner, last (it may free rm). */
static void over(struct runnerd_removal *rm)
{
	free(rm->container);
	rm->container = NULL;
	rm->hooks->over(rm->arg);
}

/* Did this round fail for good? "Already in progress" is settled only by a later round:
 * one more is added when none is left, once. */
static bool round_failed(struct runnerd_removal *rm, const struct runnerd_proc_result *r)
{
	enum runnerd_rm_outcome o = runnerd_docker_rm_outcome(r->killed, r->exited, r->status, r->err);
	bool in_progress = o == RUNNERD_RM_IN_PROGRESS;
	if (in_progress && rm->rounds_left == 0 && !rm->extra_round) {
		rm->extra_round = true;
		rm->rounds_left = 1;
	}
	return o != RUNNERD_RM_GONE && (!in_progress || rm->rounds_left == 0);
}

static void round_next(struct runnerd_removal *rm);

static void on_delay(void *arg)
{
	struct runnerd_removal *rm = arg;
	rm->delay = NULL; /* fired */
	round_next(rm);
}

static void round_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_removal *rm = arg;
	rm->proc = NULL;
	if (round_failed(rm, r)) {
		rm->hooks->round_failed(rm->arg, rm->container, r);
		give_up(rm);
	}
	if (rm->rounds_left > 0) {
		int rr = rm->ops->timer_start(rm->owner, RUNNERD_RM_SECOND_DELAY_MS, on_delay, rm, &rm->delay);
		if (rr >= 0)
			return;
		log_error_errno(rr, "%s: cannot schedule the next removal: %m", rm->what);
		give_up(rm);
	}
	over(rm);
}

static void round_next(struct runnerd_removal *rm)
{
	if (rm->rounds_left == 0) {
		over(rm);
		return;
	}
	rm->rounds_left--;
	cleanup_strv char **argv = runnerd_docker_rm_argv(RTS_DOCKER, rm->container);
	int r = argv ? rm->ops->spawn(rm->owner, argv, NULL, 0, RUNNERD_RM_OUTPUT_MAX, RUNNERD_RM_TIMEOUT_MS,
				      round_done, rm, &rm->proc)
		     : -EINVAL;
	if (r < 0) {
		log_error_errno(r, "%s: cannot run docker rm -f: %m", rm->what);
		give_up(rm);
		over(rm);
	}
}

void runnerd_removal_start(struct runnerd_removal *rm, const char *container, unsigned rounds)
{
	runnerd_removal_abandon(rm); /* nothing, unless misused */
	rm->container = rts_xstrdup(container);
	rm->rounds_left = rounds;
	rm->extra_round = false;
	rm->failed = false;
	round_next(rm);
}
