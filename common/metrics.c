/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/metrics.h"
#include "common/util.h"

static void append(struct rts_metrics_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void append(struct rts_metrics_text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	if (t->cap - t->len < (size_t)n + 1) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap - t->len < (size_t)n + 1)
			cap *= 2;
		t->buf = rts_xrealloc(t->buf, cap);
		t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

void rts_metrics_family(struct rts_metrics_text *t, const char *name, const char *type, const char *help)
{
	append(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rts_metrics_sample(struct rts_metrics_text *t, const char *name, const char *labels, uint64_t value)
{
	if (labels && *labels)
		append(t, "%s{%s} %" PRIu64 "\n", name, labels, value);
	else
		append(t, "%s %" PRIu64 "\n", name, value);
}

void rts_histogram_init(struct rts_histogram *h, const uint32_t *bounds_ms, size_t n_bounds)
{
	if (n_bounds > RTS_HISTOGRAM_BUCKETS)
		abort();
	h->bounds_ms = bounds_ms;
	h->n_bounds = n_bounds;
	for (size_t i = 0; i <= RTS_HISTOGRAM_BUCKETS; i++)
		atomic_init(&h->counts[i], 0);
	atomic_init(&h->sum_us, 0);
}

void rts_histogram_observe(struct rts_histogram *h, uint64_t us)
{
	size_t i = 0;
	while (i < h->n_bounds && us > (uint64_t)h->bounds_ms[i] * 1000u)
		i++;
	atomic_fetch_add(&h->counts[i], 1);
	atomic_fetch_add(&h->sum_us, us);
}

void rts_metrics_histogram(struct rts_metrics_text *t, const char *name, const char *labels,
			   const struct rts_histogram *h)
{
	const char *sep = labels && *labels ? "," : "";
	const char *l = labels ? labels : "";
	uint64_t cumulative = 0;
	for (size_t i = 0; i <= h->n_bounds; i++) {
		cumulative += atomic_load(&h->counts[i]);
		if (i < h->n_bounds)
			append(t, "%s_bucket{%s%sle=\"%" PRIu32 ".%03" PRIu32 "\"} %" PRIu64 "\n", name, l, sep,
			       h->bounds_ms[i] / 1000u, h->bounds_ms[i] % 1000u, cumulative);
		else
			append(t, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, l, sep, cumulative);
	}
	uint64_t sum = atomic_load(&h->sum_us);
	/* _count is the +Inf bucket, so the two always agree. */
	if (labels && *labels) {
		append(t, "%s_sum{%s} %" PRIu64 ".%06" PRIu64 "\n", name, labels, sum / 1000000u, sum % 1000000u);
		append(t, "%s_count{%s} %" PRIu64 "\n", name, labels, cumulative);
	} else {
		append(t, "%s_sum %" PRIu64 ".%06" PRIu64 "\n", name, sum / 1000000u, sum % 1000000u);
		append(t, "%s_count %" PRIu64 "\n", name, cumulative);
	}
}

char *rts_metrics_text_take(struct rts_metrics_text *t)
{
	char *s = t->buf ? t->buf : rts_xstrdup("");
	*t = (struct rts_metrics_text){0};
	return s;
}

bool rts_metrics_text_valid(const char *s, size_t len, size_t max)
{
	if (len > max || (len > 0 && s[len - 1] != '\n'))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c != '\n' && (c < 0x20 || c > 0x7e))
			return false;
	}
	return true;
}
