/* SPDX-License-Identifier: Apache-2.0 */
/* Metrics in the Prometheus text exposition format, version 0.0.4 (DESIGN.md 8.4), and the
 * counters behind them.
 *
 * Each daemon renders its own families into a bounded text (at most RTS_METRICS_TEXT_MAX
 * bytes, common/proto.h) and statd puts the three texts together for `roundtable-sandbox
 * metrics`. A family belongs to exactly one daemon, so the texts can be joined as they
 * are (the format wants every line of a family in one group):
 *   statd    roundtable_sandbox_turns_total, _messages_total, _queued_turns,
 *            _running_turns, _channels, _control_connections, _link_up, _daemon_up
 *   runnerd  roundtable_sandbox_turn_seconds, _containers, _spares_ready
 *   brokerd  roundtable_sandbox_broker_calls_total, _broker_connections_refused_total,
 *            _broker_turns, _upstream_seconds, _upstream_requests_total
 * Labels take values from fixed, short lists only (an outcome, a route, a result code):
 * never a channel key, a turn id or anything a guest wrote, so every family has a bounded
 * number of series.
 *
 * Counters and histograms are plain C11 atomics: brokerd's connection threads update them
 * while its main thread renders. */
#ifndef RTS_METRICS_H
#define RTS_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A text being rendered. Grows as needed; rts_metrics_text_take() hands it over. */
struct rts_metrics_text {
	char *buf;
	size_t len, cap;
};

/* "# HELP name help" and "# TYPE name type" (type: counter, gauge, histogram). Once per
 * family, before its samples. help is a fixed string. */
void rts_metrics_family(struct rts_metrics_text *t, const char *name, const char *type, const char *help);
/* One sample line: name{labels} value. labels is NULL or `key="value",...` built from fixed
 * strings. */
void rts_metrics_sample(struct rts_metrics_text *t, const char *name, const char *labels, uint64_t value);

/* A histogram of durations. Bucket bounds are in milliseconds (ascending, at most
 * RTS_HISTOGRAM_BUCKETS; +Inf is implicit) and rendered in seconds. */
#define RTS_HISTOGRAM_BUCKETS 16u
struct rts_histogram {
	const uint32_t *bounds_ms;
	size_t n_bounds;
	atomic_uint_fast64_t counts[RTS_HISTOGRAM_BUCKETS + 1]; /* per bucket, the last one +Inf */
	atomic_uint_fast64_t sum_us;
};
/* Set up h with bounds_ms (static, n_bounds <= RTS_HISTOGRAM_BUCKETS), all zero. */
void rts_histogram_init(struct rts_histogram *h, const uint32_t *bounds_ms, size_t n_bounds);
/* Record one observation of us microseconds. Thread-safe. */
void rts_histogram_observe(struct rts_histogram *h, uint64_t us);
/* The name_bucket{labels,le=...}, name_sum{labels} and name_count{labels} lines of h
 * (cumulative, as the format wants). The family line is the caller's. */
void rts_metrics_histogram(struct rts_metrics_text *t, const char *name, const char *labels,
			   const struct rts_histogram *h);

/* The text so far (NUL-terminated; "" when nothing was written); the caller frees it. t is
 * empty afterwards. */
char *rts_metrics_text_take(struct rts_metrics_text *t);

/* True when s (len bytes) can be a daemon's metrics text: at most max bytes of printable
 * ASCII and newlines, empty or ending in a newline. Texts received from a peer daemon are
 * checked with this before they are passed on. */
bool rts_metrics_text_valid(const char *s, size_t len, size_t max);

#endif
