/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/timer.h"
#include "common/util.h"

struct rts_timer {
	sd_event_source *src;
	rts_timer_fn fn;
	void *arg;
};

/* Free t, then call its function: the callee may start new timers or free its owner. */
static void timer_fire(struct rts_timer *t)
{
	rts_timer_fn fn = t->fn;
	void *arg = t->arg;
	rts_timer_stop(t);
	fn(arg);
}

static int on_time(sd_event_source *s, uint64_t usec, void *userdata)
{
	timer_fire(userdata);
	return 0;
}

static int on_defer(sd_event_source *s, void *userdata)
{
	timer_fire(userdata);
	return 0;
}

int rts_timer_start(sd_event *e, uint64_t after_ms, uint64_t accuracy_ms, rts_timer_fn fn, void *arg,
		    struct rts_timer **ret)
{
	struct rts_timer *t = rts_xcalloc(1, sizeof(*t));
	t->fn = fn;
	t->arg = arg;
	int r = after_ms == 0 ? sd_event_add_defer(e, &t->src, on_defer, t)
			      : sd_event_add_time_relative(e, &t->src, CLOCK_MONOTONIC, after_ms * 1000u,
							   accuracy_ms * 1000u, on_time, t);
	if (r < 0) {
		free(t);
		return r;
	}
	*ret = t;
	return 0;
}

void rts_timer_stop(struct rts_timer *t)
{
	if (!t)
		return;
	/* sd-event keeps a source alive while it is being dispatched, so this is safe from
	 * the timer's own callback. */
	sd_event_source_disable_unref(t->src);
	free(t);
}
