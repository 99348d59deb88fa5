/* SPDX-License-Identifier: Apache-2.0 */
/* What the suites of the daemons' state machines (statd/queue.h, runnerd/turn.h) share:
 * an effect log the recording ops write and the tests compare, and a fake monotonic clock
 * with one-shot timers behind the machines' timer ops, so no loop is needed.
 *
 * The timers' contract is common/timer.h's: a timer fires once, freed before its function
 * runs; after_ms 0 fires on the next fake_run() ("from the loop"). Stopping a timer that
 * already fired or was stopped is a test failure: the machine kept a dangling handle. */
#ifndef TESTS_UNIT_MACHINE_RIG_H
#define TESTS_UNIT_MACHINE_RIG_H

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the effect log ---- */

static char **rig_log;
static size_t rig_n_log, rig_cap_log;

static inline void rig_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void rig_logf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *line = NULL;
	ck_assert_int_ge(vasprintf(&line, fmt, ap), 0);
	va_end(ap);
	if (rig_n_log == rig_cap_log) {
		rig_cap_log = rig_cap_log ? 2 * rig_cap_log : 256;
		rig_log = realloc(rig_log, rig_cap_log * sizeof(*rig_log));
		ck_assert_ptr_nonnull(rig_log);
	}
	rig_log[rig_n_log++] = line;
}

/* Where the log stands now, for rig_expect_since. */
static inline size_t rig_mark(void)
{
	return rig_n_log;
}

/* Exactly these lines (NULL-terminated) were logged since mark, in this order. */
static inline void rig_expect_since(size_t mark, ...)
{
	va_list ap;
	va_start(ap, mark);
	size_t i = mark;
	const char *want;
	while ((want = va_arg(ap, const char *))) {
		ck_assert_msg(i < rig_n_log, "missing \"%s\" (after %zu effects)", want, i - mark);
		ck_assert_str_eq(rig_log[i], want);
		i++;
	}
	va_end(ap);
	ck_assert_msg(i == rig_n_log, "unexpected \"%s\"", i < rig_n_log ? rig_log[i] : "");
}

static inline void rig_log_reset(void)
{
	for (size_t i = 0; i < rig_n_log; i++)
		free(rig_log[i]);
	free(rig_log);
	rig_log = NULL;
	rig_n_log = rig_cap_log = 0;
}

/* ---- the clock and its timers ---- */


typedef void (*fake_timer_fn)(void *arg);

/* The handle the machines see as opaque (common/timer.h's in the daemons). */
struct rts_timer {
	struct rts_timer *next;
	uint64_t due_ms;
	uint64_t seq; /* start order: ties fire in it */
	fake_timer_fn fn;
	void *arg;
};

static uint64_t fake_now_ms = 1000000; /* any start; never 0 */
static struct rts_timer *fake_timers;
static uint64_t fake_timer_seq;
static unsigned fake_timer_failures; /* the next this many starts fail with -ENOMEM */

static inline int fake_timer_start(uint64_t after_ms, fake_timer_fn fn, void *arg, struct rts_timer **ret)
{
	if (fake_timer_failures > 0) {
		fake_timer_failures--;
		return -ENOMEM;
	}
	struct rts_timer *t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	*t = (struct rts_timer){.next = fake_timers, .due_ms = fake_now_ms + after_ms, .seq = ++fake_timer_seq,
				.fn = fn, .arg = arg};
	fake_timers = t;
	*ret = t;
	return 0;
}

static inline void fake_timer_stop(struct rts_timer *t)
{
	if (!t)
		return;
	for (struct rts_timer **p = &fake_timers; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			free(t);
			return;
		}
	ck_abort_msg("a timer was stopped that had fired or was stopped already");
}

/* The earliest timer due at or before until_ms (ties: the first started), or NULL. */
static inline struct rts_timer *fake_timer_next(uint64_t until_ms)
{
	struct rts_timer *best = NULL;
	for (struct rts_timer *t = fake_timers; t; t = t->next)
		if (t->due_ms <= until_ms && (!best || t->due_ms < best->due_ms ||
					      (t->due_ms == best->due_ms && t->seq < best->seq)))
			best = t;
	return best;
}

/* Move the clock forward by ms, firing every timer that comes due on the way (and those
 * the callbacks start, when due by then), each at its own time. */
static inline void fake_advance(uint64_t ms)
{
	uint64_t until = fake_now_ms + ms;
	struct rts_timer *t;
	while ((t = fake_timer_next(until))) {
		if (t->due_ms > fake_now_ms)
			fake_now_ms = t->due_ms;
		fake_timer_fn fn = t->fn;
		void *arg = t->arg;
		fake_timer_stop(t);
		fn(arg);
	}
	fake_now_ms = until;
}

/* One pass of "the loop" without time passing: what is due now fires. */
static inline void fake_run(void)
{
	fake_advance(0);
}

static inline unsigned fake_timers_pending(void)
{
	unsigned n = 0;
	for (struct rts_timer *t = fake_timers; t; t = t->next)
		n++;
	return n;
}

/* How long until the earliest pending timer (UINT64_MAX: none). */
static inline uint64_t fake_timer_in(void)
{
	struct rts_timer *t = fake_timer_next(UINT64_MAX);
	return t ? t->due_ms - fake_now_ms : UINT64_MAX;
}

/* The machines' now_ms, timer_start and timer_stop ops (owner unused). */
static inline uint64_t rig_op_now_ms(void *owner)
{
	return fake_now_ms;
}

static inline int rig_op_timer_start(void *owner, uint64_t after_ms, fake_timer_fn fn, void *arg,
				     struct rts_timer **ret)
{
	return fake_timer_start(after_ms, fn, arg, ret);
}

static inline void rig_op_timer_stop(void *owner, struct rts_timer *t)
{
	fake_timer_stop(t);
}

static inline void fake_timers_reset(void)
{
	while (fake_timers) {
		struct rts_timer *t = fake_timers;
		fake_timers = t->next;
		free(t);
	}
	fake_timer_seq = 0;
	fake_timer_failures = 0;
}

#endif
