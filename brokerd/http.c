/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "brokerd/audit.h"
#include "brokerd/gate.h"
#include "brokerd/http.h"
#include "brokerd/precheck.h"
#include "brokerd/turn.h"
#include "common/json.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/tools.h"
#include "common/util.h"

/* Longest request target we keep; longer ones cannot name a route anyway. */
#define TARGET_MAX 256u

static bool tool_known(const struct rts_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_tools; i++)
		if (strcmp(cfg->tools[i].name, name) == 0)
			return true;
	return false;
}

static bool mcp_known(const struct rts_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_mcp; i++)
		if (strcmp(cfg->mcp[i].name, name) == 0)
			return true;
	return false;
}

static bool fetch_enabled(const struct rts_config *cfg)
{
	return cfg->fetch.enabled;
}

/* Every route the broker serves. Anything not listed is 404. */
static const struct brokerd_route brokerd_routes[] = {
	{"/model", true, "model", "model_route", NULL, brokerd_model_handle, NULL},
	/* Before the host tools' prefix, which it would otherwise fall under. */
	{RTS_FETCH_TOOL_ROUTE, true, "fetch", "fetch_enabled", NULL, brokerd_fetch_handle, fetch_enabled},
	{"/tools/", false, "tool", "tool_configured", tool_known, brokerd_tool_handle, NULL},
	{"/mcp/", false, "mcp", "mcp_tool_declared", mcp_known, brokerd_mcp_handle, NULL},
};

const struct brokerd_route *brokerd_route_match(const struct rts_config *cfg, const char *target, const char **name)
{
	*name = NULL;
	if (!target)
		return NULL;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(brokerd_routes); i++) {
		const struct brokerd_route *r = &brokerd_routes[i];
		size_t n = strlen(r->prefix);
		if (r->enabled && !r->enabled(cfg))
			continue;
		if (r->exact) {
			if (strcmp(target, r->prefix) == 0)
				return r;
			continue;
		}
		/* Configured names are [a-z][a-z0-9_]{0,47}: a suffix holding '/', '?', '#',
		 * '%' or '.' can never equal one. */
		if (strncmp(target, r->prefix, n) == 0 && r->name_known(cfg, target + n)) {
			*name = target + n;
			return r;
		}
	}
	return NULL;
}

enum header_id { H_HOST, H_AUTHORIZATION, H_CONTENT_TYPE, H_CONTENT_LENGTH, H_COUNT_ };

/* The allow-list. Host: HTTP/1.1 framing (fixed value). Authorization: the dummy bearer
 * the worker holds, checked so a caller with another credential learns nothing.
 * Content-Type and Content-Length: the body's type and exact size, read before any byte
 * of it. Nothing else has a meaning here. */
static const char *const header_names[H_COUNT_] = {
	[H_HOST] = "Host",
	[H_AUTHORIZATION] = "Authorization",
	[H_CONTENT_TYPE] = "Content-Type",
	[H_CONTENT_LENGTH] = "Content-Length",
};

bool brokerd_header_whole(const struct brokerd_header *h)
{
	return h->name && h->value && strlen(h->name) == h->name_len && strlen(h->value) == h->value_len;
}

bool brokerd_header_is(const struct brokerd_header *h, const char *want)
{
	size_t n = strlen(want);
	return h->value_len == n && memcmp(h->value, want, n) == 0;
}

int brokerd_content_length(const struct brokerd_header *h, size_t max, size_t *len)
{
	*len = 0;
	if (h->value_len == 0)
		return -EINVAL;
	size_t v = 0;
	bool over = false;
	for (size_t i = 0; i < h->value_len; i++) {
		char c = h->value[i];
		if (c < '0' || c > '9')
			return -EINVAL;
		size_t d = (size_t)(c - '0');
		if (over || d > max || v > (max - d) / 10)
			over = true;
		else
			v = v * 10 + d;
	}
	if (over)
		return -EFBIG;
	*len = v;
	return 0;
}

enum MHD_Result brokerd_header_collect(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				       const char *value, size_t value_size)
{
	(void)kind;
	struct brokerd_header_list *l = cls;
	if (l->n < l->cap)
		l->h[l->n] = (struct brokerd_header){
			.name = key, .name_len = key_size, .value = value ? value : "", .value_len = value ? value_size : 0};
	l->n++;
	return l->n <= l->cap ? MHD_YES : MHD_NO;
}

enum brokerd_result brokerd_headers_check_rule(const struct brokerd_header *h, size_t n, size_t *content_length,
					       const char **rule)
{
#define REFUSE(r, name)                                                                                                \
	do {                                                                                                           \
		*rule = (name);                                                                                        \
		return (r);                                                                                            \
	} while (0)
	*rule = NULL;
	const struct brokerd_header *seen[H_COUNT_] = {0};
	*content_length = 0;
	if (n > BROKERD_HEADERS_MAX)
		REFUSE(BROKERD_BAD_REQUEST, "header_not_allowed");
	for (size_t i = 0; i < n; i++) {
		if (!brokerd_header_whole(&h[i]))
			REFUSE(BROKERD_BAD_REQUEST, "header_not_allowed");
		int id = -1;
		for (int k = 0; k < H_COUNT_ && id < 0; k++)
			if (strcasecmp(h[i].name, header_names[k]) == 0)
				id = k;
		if (id < 0 || seen[id])
			REFUSE(BROKERD_BAD_REQUEST, "header_not_allowed");
		seen[id] = &h[i];
	}
	if (!seen[H_AUTHORIZATION] || !brokerd_header_is(seen[H_AUTHORIZATION], "Bearer " RTS_DUMMY_KEY))
		REFUSE(BROKERD_UNAUTHORIZED, "dummy_key");
	if (!seen[H_HOST] || !brokerd_header_is(seen[H_HOST], "broker"))
		REFUSE(BROKERD_BAD_REQUEST, "host_header");
	if (!seen[H_CONTENT_TYPE] || seen[H_CONTENT_TYPE]->value_len != strlen("application/json") ||
	    strcasecmp(seen[H_CONTENT_TYPE]->value, "application/json") != 0)
		REFUSE(BROKERD_BAD_REQUEST, "content_type");
	size_t len = 0;
	int r = seen[H_CONTENT_LENGTH] ? brokerd_content_length(seen[H_CONTENT_LENGTH], RTS_BROKER_BODY_MAX, &len)
				       : -EINVAL;
	if (r == -EINVAL)
		REFUSE(BROKERD_BAD_REQUEST, "content_length");
	if (r < 0)
		REFUSE(BROKERD_TOO_LARGE, "body_too_large");
#undef REFUSE
	*content_length = len;
	return BROKERD_OK;
}

enum brokerd_result brokerd_headers_check(const struct brokerd_header *h, size_t n, size_t *content_length)
{
	const char *rule;
	return brokerd_headers_check_rule(h, n, content_length, &rule);
}

char *brokerd_error_body(enum brokerd_result r)
{
	return rts_xasprintf("{\"error\":\"%s\"}", brokerd_result_code(r));
}

/* ---- libmicrohttpd glue ---- */

/* The call's one audit entry (brokerd/audit.h). rule NULL: the route's allow rule for an
 * answer, else the result code. */
static void audit(struct brokerd_turn *t, struct brokerd_conn *c, enum brokerd_result r, const char *rule,
		  bool forwarded)
{
	if (c->audited)
		return;
	c->audited = true;
	if (!rule)
		rule = r == BROKERD_OK && c->route ? c->route->allow_rule : brokerd_result_code(r);
	brokerd_audit_call(&t->b, c->call_no, c->route ? c->route->kind : "none", rule, r, forwarded,
			   rts_now_ms() - c->accepted_ms);
}

/* The longest libmicrohttpd message logged: its own texts are short; an argument that
 * quotes request bytes is cut here. */
#define BROKERD_MHD_LOG_MAX 240u

void brokerd_http_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	/* Guests can trigger these at will, so they stay at debug level, and an argument may
	 * quote request bytes: the message is filled into a bounded buffer and logged as its
	 * first line, every byte that is not printable ASCII replaced (no forged lines, no
	 * terminal escapes), at most BROKERD_MHD_LOG_MAX bytes of it. */
	char text[BROKERD_MHD_LOG_MAX + 1];
	char line[BROKERD_MHD_LOG_MAX + 1];
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	if (n < 0)
		return;
	rts_spawn_first_line(text, strnlen(text, sizeof(text)), line, sizeof(line));
	log_debug("libmicrohttpd: %s%s", line, (size_t)n > BROKERD_MHD_LOG_MAX ? "..." : "");
}

void brokerd_http_on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
				enum MHD_ConnectionNotificationCode code)
{
	struct brokerd_turn *t = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		int fd = ci ? ci->connect_fd : -1;
		pthread_mutex_lock(&t->lock);
		struct brokerd_conn *c = brokerd_turn_claim_locked(t, fd);
		if (!c) {
			/* Only when the gate already forgot this hand-off as stale (gate.c).
			 * Counting the call twice is the safe side of that race. */
			c = rts_xcalloc(1, sizeof(*c));
			c->turn = t;
			c->fd = fd;
			c->accepted_ms = rts_now_ms();
			c->deadline_ms = c->accepted_ms + RTS_BROKER_REQUEST_DEADLINE_MS;
			if (t->calls < UINT_MAX)
				t->calls++;
			c->call_no = t->calls;
		}
		c->prev = NULL;
		c->next = t->conns;
		if (t->conns)
			t->conns->prev = c;
		t->conns = c;
		pthread_mutex_unlock(&t->lock);
		*socket_context = c;
		return;
	}
	/* CLOSED comes before libmicrohttpd closes the fd, and the sweep shuts fds down only
	 * under the lock: it can never touch a reused descriptor. */
	struct brokerd_conn *c = *socket_context;
	if (!c)
		return;
	pthread_mutex_lock(&t->lock);
	bool shut = c->shut; /* the sweep sets it under the lock */
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->holds_slot)
		t->busy = false;
	pthread_mutex_unlock(&t->lock);
	/* Closed without an answer: still one decision entry for the call. */
	if (!c->audited)
		audit(t, c, BROKERD_RESULT_MAX_,
		      shut			      ? "request_deadline"
		      : c->state == BROKERD_CONN_BODY ? "body_incomplete"
		      : c->state == BROKERD_CONN_DROP ? "second_request"
						      : "head_incomplete",
		      false);
	free(c->target);
	free(c->body);
	free(c);
	*socket_context = NULL;
}

void *brokerd_http_on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
	(void)cls;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct brokerd_conn *c = ci ? ci->socket_context : NULL;
	if (!c)
		return NULL;
	/* The gate counted this request against the budget (refused ones are counted there
	 * too). */
	if (c->state != BROKERD_CONN_NEW) {
		/* A second request on one connection. Every answer carries Connection: close
		 * and libmicrohttpd closes after it, so this is a second line of defence. */
		c->state = BROKERD_CONN_DROP;
		return c;
	}
	c->state = BROKERD_CONN_HEADER;
	c->target = rts_xstrndup(uri, TARGET_MAX);
	if (strlen(uri) > TARGET_MAX)
		c->target[0] = '\0'; /* matches no route */
	return c;
}

static enum MHD_Result respond(struct MHD_Connection *mc, unsigned status, const char *body)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	/* The only headers besides libmicrohttpd's framing (Date, Content-Length). */
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	enum MHD_Result r = MHD_queue_response(mc, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result refuse(struct brokerd_turn *t, struct brokerd_conn *c, struct MHD_Connection *mc,
			      enum brokerd_result r, const char *rule, bool forwarded)
{
	c->state = BROKERD_CONN_DONE;
	audit(t, c, r, rule, forwarded);
	/* A precheck's refusals are the rules its tests and operators look for (brokerd/precheck.h);
	 * the handler logs its own. */
	if (t->precheck && c->why)
		rts_log_turn(LOG_NOTICE, t->b.turn_id, t->b.channel_hash, brokerd_result_code(r), 0,
			     "precheck call %u refused: %s", c->call_no, c->why);
	cleanup_free char *body = brokerd_error_body(r);
	return respond(mc, brokerd_result_status(r), body);
}

static bool turn_open(struct brokerd_turn *t)
{
	return !atomic_load(&t->closing) && rts_now_ms() < t->b.deadline_ms;
}

/* Everything decided from the request line and header, before any body byte is read.
 * *rule: the audit rule of a refusal (static); c->why: its words, for a precheck's log. */
static enum brokerd_result admit(struct brokerd_turn *t, struct brokerd_conn *c, struct MHD_Connection *mc,
				 const char *method, const char *version, const char **rule)
{
#define REFUSE(r, name, text)                                                                                          \
	do {                                                                                                           \
		*rule = (name);                                                                                        \
		c->why = (text);                                                                                       \
		return (r);                                                                                            \
	} while (0)
	*rule = NULL;
	if (!turn_open(t))
		REFUSE(BROKERD_UNAVAILABLE, "turn_closing", "the run is closing");
	/* A precheck's own budget (precheck.maxCalls), refused calls counted too. */
	if (c->call_no > (t->precheck ? brokerd_precheck_max_calls(t->precheck) : RTS_BROKER_CALLS_PER_TURN))
		REFUSE(BROKERD_BUDGET_EXHAUSTED, "call_budget", "the call budget is spent");
	c->route = t->precheck ? brokerd_precheck_route(t->precheck, c->target, &c->name)
			       : brokerd_route_match(t->cfg, c->target, &c->name);
	if (!c->route)
		REFUSE(BROKERD_NOT_FOUND, "route_unknown",
		       "no such route (a server the run was not granted, another path, or a query)");
	if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
		REFUSE(BROKERD_METHOD_NOT_ALLOWED, "method_not_post", "an HTTP method other than POST");
	if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0)
		REFUSE(BROKERD_BAD_REQUEST, "http_version", "an HTTP version other than 1.1");

	struct brokerd_header fields[BROKERD_HEADERS_MAX];
	struct brokerd_header_list hl = {.h = fields, .cap = RTS_ARRAY_SIZE(fields)};
	MHD_get_connection_values_n(mc, MHD_HEADER_KIND, brokerd_header_collect, &hl);
	size_t len = 0;
	enum brokerd_result r = brokerd_headers_check_rule(hl.h, hl.n, &len, rule);
	if (r != BROKERD_OK) {
		c->why = r == BROKERD_UNAUTHORIZED ? "a credential other than the dummy bearer"
						   : "a header field outside the four allowed";
		return r;
	}

	/* One call in flight per turn; a second one is refused, not queued. */
	pthread_mutex_lock(&t->lock);
	bool busy = t->busy;
	if (!busy) {
		t->busy = true;
		c->holds_slot = true;
	}
	pthread_mutex_unlock(&t->lock);
	if (busy)
		REFUSE(BROKERD_BUSY, "call_in_flight", "another call is pending (calls run one at a time)");
#undef REFUSE
	c->body_want = len;
	c->body = rts_xmalloc(len + 1);
	return BROKERD_OK;
}

static void release_slot(struct brokerd_turn *t, struct brokerd_conn *c)
{
	pthread_mutex_lock(&t->lock);
	if (c->holds_slot)
		t->busy = false;
	c->holds_slot = false;
	pthread_mutex_unlock(&t->lock);
}

static enum MHD_Result run_call(struct brokerd_turn *t, struct brokerd_conn *c, struct MHD_Connection *mc)
{
	c->state = BROKERD_CONN_DONE;
	uint64_t deadline = c->deadline_ms < t->b.deadline_ms ? c->deadline_ms : t->b.deadline_ms;
	struct brokerd_call call = {
		.cfg = t->cfg,
		.binding = &t->b,
		.precheck = t->precheck,
		.keys = t->keys,
		.name = c->name,
		.body = c->body,
		.body_len = c->body_len,
		.cancel = {.wake_fd = t->wake_fd,
			   .closing = &t->closing,
			   .deadline_ms = deadline,
			   .has_client = c->fd >= 0,
			   .client_fd = c->fd},
	};
	char *answer = NULL;
	enum brokerd_result r = BROKERD_UNAVAILABLE;
	if (turn_open(t))
		r = c->route->handle(&call, &answer);
	else
		call.rule = "turn_closing";
	release_slot(t, c);
	if (r == BROKERD_OK && !answer) {
		r = BROKERD_UPSTREAM_ERROR;
		call.rule = "no_answer"; /* a handler bug: never seen */
	}
	if (r != BROKERD_OK) {
		free(answer);
		return refuse(t, c, mc, r, call.rule, call.forwarded);
	}
	audit(t, c, r, call.rule, call.forwarded);
	enum MHD_Result ret = respond(mc, 200, answer);
	free(answer);
	return ret;
}

enum MHD_Result brokerd_http_on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
					const char *version, const char *upload_data, size_t *upload_data_size,
					void **req_cls)
{
	(void)url; /* decoded by libmicrohttpd; routes use the raw target instead */
	struct brokerd_turn *t = cls;
	struct brokerd_conn *c = *req_cls;
	if (!c)
		return MHD_NO;
	switch (c->state) {
	case BROKERD_CONN_HEADER: {
		c->state = BROKERD_CONN_BODY;
		const char *rule;
		enum brokerd_result r = admit(t, c, mc, method, version, &rule);
		return r == BROKERD_OK ? MHD_YES : refuse(t, c, mc, r, rule, false);
	}
	case BROKERD_CONN_BODY:
		if (*upload_data_size == 0) {
			if (c->body_len != c->body_want)
				return MHD_NO;
			return run_call(t, c, mc);
		}
		if (!turn_open(t) || rts_now_ms() >= c->deadline_ms)
			return MHD_NO; /* closes the connection */
		/* libmicrohttpd frames the body by Content-Length; this is a second guard. */
		if (*upload_data_size > c->body_want - c->body_len)
			return MHD_NO;
		memcpy(c->body + c->body_len, upload_data, *upload_data_size);
		c->body_len += *upload_data_size;
		*upload_data_size = 0;
		return MHD_YES;
	case BROKERD_CONN_DONE:
		/* Answered already: drop whatever body is still arriving. */
		*upload_data_size = 0;
		return MHD_YES;
	case BROKERD_CONN_NEW:
	case BROKERD_CONN_DROP:
		break;
	}
	return MHD_NO;
}
