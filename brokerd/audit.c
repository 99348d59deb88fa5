/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "brokerd/audit.h"
#include "common/log.h"
#include "common/util.h"

/* Label values: fixed lists, so every family has a bounded number of series. */
static const char *const routes[] = {"model",	   "fetch",	  "tool",	  "mcp",
				     "precheck",   "none",	  "rich_model",	  "rich_count_tokens",
				     "rich_mcp",   "rich_tool",	  "rich_worker",  "rich_compact",
				     "rich_none",  "rich_attachment", "other"};
#define N_ROUTES RTS_ARRAY_SIZE(routes)
#define N_RESULTS ((size_t)BROKERD_RESULT_MAX_ + 1u) /* the last one: no answer ("closed") */
static const char *const upstreams[] = {"model", "mcp", "anthropic"};
#define N_UPSTREAMS RTS_ARRAY_SIZE(upstreams)
enum { CONN_NEW, CONN_REUSED, CONN_FAILED, N_CONN };
static const char *const conn_names[N_CONN] = {"new", "reused", "failed"};

/* Upstream latency, 5 ms to 60 s (the upstream deadline). */
static const uint32_t upstream_bounds_ms[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};

static struct {
	atomic_uint_fast64_t calls[N_ROUTES][N_RESULTS];
	atomic_uint_fast64_t conn_refused;
	atomic_uint_fast64_t unlogged;
	atomic_uint_fast64_t upstream_requests[N_UPSTREAMS][N_CONN];
	struct rts_histogram upstream_seconds[N_UPSTREAMS];
} m;
static pthread_once_t m_once = PTHREAD_ONCE_INIT;

/* Counters are zero (static storage); the histograms need their bounds. */
static void metrics_init_once(void)
{
	for (size_t i = 0; i < N_UPSTREAMS; i++)
		rts_histogram_init(&m.upstream_seconds[i], upstream_bounds_ms, RTS_ARRAY_SIZE(upstream_bounds_ms));
}

static void metrics_init(void)
{
	pthread_once(&m_once, metrics_init_once);
}

static size_t route_index(const char *route)
{
	for (size_t i = 0; i < N_ROUTES - 1; i++)
		if (strcmp(routes[i], route) == 0)
			return i;
	return N_ROUTES - 1;
}

static const char *result_name(size_t r)
{
	return r < (size_t)BROKERD_RESULT_MAX_ ? brokerd_result_code((enum brokerd_result)r) : "closed";
}

bool brokerd_audit_call(const struct brokerd_binding *b, unsigned call_no, const char *route, const char *rule,
			enum brokerd_result result, bool forwarded, uint64_t ms)
{
	return brokerd_audit_decision(b->turn_id, b->channel_hash, call_no, BROKERD_AUDIT_CALLS_MAX, route, rule, result,
				      forwarded, ms);
}

bool brokerd_audit_decision(const char *turn_id, const char *channel_hash, unsigned call_no, unsigned call_max,
			    const char *route, const char *rule, enum brokerd_result result, bool forwarded,
			    uint64_t ms)
{
	brokerd_metrics_call(route, result);
	if (!turn_id || !turn_id[0])
		turn_id = "-";
	if (!channel_hash || !channel_hash[0])
		channel_hash = "-";
	if (call_no > call_max) {
		atomic_fetch_add(&m.unlogged, 1);
		return false;
	}
	const char *decision = result == BROKERD_OK ? "allowed" : "refused";
	char call[16], dur[24];
	snprintf(call, sizeof(call), "%u", call_no);
	snprintf(dur, sizeof(dur), "%" PRIu64, ms);
	const struct rts_log_field f[] = {
		{"RTS_TURN_ID", turn_id},
		{"RTS_CHANNEL_HASH", channel_hash},
		{"RTS_CALL", call},
		{"RTS_ROUTE", route},
		{"RTS_DECISION", decision},
		{"RTS_RULE", rule},
		{"RTS_RESULT", result_name((size_t)result < N_RESULTS ? (size_t)result : N_RESULTS - 1)},
		{"RTS_FORWARDED", forwarded ? "yes" : "no"},
		{"RTS_DURATION_MS", dur},
	};
	rts_log_fields(LOG_INFO, BROKERD_AUDIT_MESSAGE_ID, f, RTS_ARRAY_SIZE(f),
		       "turn %s: broker call %u route %s %s (%s)", turn_id, call_no, route, decision, rule);
	return true;
}

void brokerd_audit_summary(const struct brokerd_binding *b, unsigned calls)
{
	if (calls > BROKERD_AUDIT_CALLS_MAX)
		brokerd_audit_unlogged(b->turn_id, b->channel_hash, calls - BROKERD_AUDIT_CALLS_MAX);
}

void brokerd_audit_unlogged(const char *turn_id, const char *channel_hash, unsigned unlogged)
{
	if (unlogged == 0)
		return;
	if (!turn_id || !turn_id[0])
		turn_id = "-";
	char n[16];
	snprintf(n, sizeof(n), "%u", unlogged);
	const struct rts_log_field f[] = {
		{"RTS_TURN_ID", turn_id},
		{"RTS_CHANNEL_HASH", channel_hash},
		{"RTS_DECISION", "refused"},
		{"RTS_RULE", "unlogged_beyond_budget"},
		{"RTS_CALLS", n},
	};
	rts_log_fields(LOG_NOTICE, BROKERD_AUDIT_MESSAGE_ID, f, RTS_ARRAY_SIZE(f),
		       "turn %s: %s more broker calls beyond the budget were refused and not logged one by one",
		       turn_id, n);
}

void brokerd_metrics_call(const char *route, enum brokerd_result result)
{
	size_t ri = (size_t)result < N_RESULTS ? (size_t)result : N_RESULTS - 1;
	atomic_fetch_add(&m.calls[route_index(route)][ri], 1);
}

void brokerd_metrics_connection_refused(void)
{
	atomic_fetch_add(&m.conn_refused, 1);
}

void brokerd_metrics_upstream(const char *what, uint64_t us, bool reused, bool answered)
{
	metrics_init();
	size_t u = 0;
	for (size_t i = 0; i < N_UPSTREAMS; i++)
		if (strcmp(upstreams[i], what) == 0)
			u = i;
	atomic_fetch_add(&m.upstream_requests[u][!answered ? CONN_FAILED : reused ? CONN_REUSED : CONN_NEW], 1);
	rts_histogram_observe(&m.upstream_seconds[u], us);
}

char *brokerd_metrics_render(unsigned turns)
{
	metrics_init();
	struct rts_metrics_text t = {0};
	char labels[128];
	rts_metrics_family(&t, "roundtable_sandbox_broker_calls_total", "counter",
			   "Broker calls by route, decision and the result the worker got.");
	for (size_t r = 0; r < N_ROUTES; r++)
		for (size_t c = 0; c < N_RESULTS; c++) {
			uint64_t v = atomic_load(&m.calls[r][c]);
			/* Every route's ok and refused lines always, others once seen. */
			if (!v && c != BROKERD_OK)
				continue;
			snprintf(labels, sizeof(labels), "route=\"%s\",decision=\"%s\",result=\"%s\"", routes[r],
				 c == BROKERD_OK ? "allowed" : "refused", result_name(c));
			rts_metrics_sample(&t, "roundtable_sandbox_broker_calls_total", labels, v);
		}
	rts_metrics_family(&t, "roundtable_sandbox_broker_connections_refused_total", "counter",
			   "Connections to a broker socket closed at once: too many open on that turn.");
	rts_metrics_sample(&t, "roundtable_sandbox_broker_connections_refused_total", NULL,
			   atomic_load(&m.conn_refused));
	rts_metrics_family(&t, "roundtable_sandbox_broker_calls_unlogged_total", "counter",
			   "Calls beyond a turn's budget that got no audit entry of their own.");
	rts_metrics_sample(&t, "roundtable_sandbox_broker_calls_unlogged_total", NULL, atomic_load(&m.unlogged));
	rts_metrics_family(&t, "roundtable_sandbox_broker_turns", "gauge", "Turns bound at brokerd.");
	rts_metrics_sample(&t, "roundtable_sandbox_broker_turns", NULL, turns);
	rts_metrics_family(&t, "roundtable_sandbox_upstream_requests_total", "counter",
			   "Upstream requests by upstream and connection (new, reused, failed).");
	for (size_t u = 0; u < N_UPSTREAMS; u++)
		for (size_t c = 0; c < N_CONN; c++) {
			snprintf(labels, sizeof(labels), "upstream=\"%s\",connection=\"%s\"", upstreams[u], conn_names[c]);
			rts_metrics_sample(&t, "roundtable_sandbox_upstream_requests_total", labels,
					   atomic_load(&m.upstream_requests[u][c]));
		}
	rts_metrics_family(&t, "roundtable_sandbox_upstream_seconds", "histogram",
			   "Time from sending an upstream request to its whole answer (or failure).");
	for (size_t u = 0; u < N_UPSTREAMS; u++) {
		snprintf(labels, sizeof(labels), "upstream=\"%s\"", upstreams[u]);
		rts_metrics_histogram(&t, "roundtable_sandbox_upstream_seconds", labels, &m.upstream_seconds[u]);
	}
	return rts_metrics_text_take(&t);
}
