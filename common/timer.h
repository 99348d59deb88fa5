/* SPDX-License-Identifier: Apache-2.0 */
/* One-shot timers on an sd-event loop, behind an opaque handle.
 *
 * The daemons' state machines (statd/queue.c, runnerd/turn.c) never see sd-event: they
 * start and stop timers through their ops, which the daemons implement with these and the
 * unit tests with a fake clock (tests/unit/fake_timers.h). */
#ifndef RTS_TIMER_H
#define RTS_TIMER_H

#include <stdint.h>
#include <systemd/sd-event.h>

struct rts_timer;

typedef void (*rts_timer_fn)(void *arg);

/* Call fn(arg) once from the loop e, after_ms milliseconds from now on CLOCK_MONOTONIC
 * (accuracy_ms: how late it may fire so the loop can batch wake-ups). after_ms 0 means
 * "from the loop, once the current callback has returned" (a defer source). The timer
 * frees itself before fn is called: from then on the handle is gone, so fn's owner
 * forgets it first thing and never stops it. Returns 0 with *ret, or -errno (nothing is
 * started). */
int rts_timer_start(sd_event *e, uint64_t after_ms, uint64_t accuracy_ms, rts_timer_fn fn, void *arg,
		    struct rts_timer **ret);

/* Stop a timer that has not fired: fn will not be called. Safe on NULL. */
void rts_timer_stop(struct rts_timer *t);

#endif
