/* SPDX-License-Identifier: Apache-2.0 */
/* A rich channel's listener: the gate's rules for it, its libmicrohttpd server, the
 * routes, the header allow-list, the per-turn budget and slots, the silence limit. */
#include "config.h"

#include <limits.h>
#include <microhttpd.h>
#include <strings.h>
#include <sys/socket.h>

#include "brokerd/anthropic.h"
#include "brokerd/audit.h"
#include "brokerd/http.h"
#include "brokerd/rich.h"
#include "common/json.h"
#include "common/jsonscan.h"
#include "common/log.h"
#include "common/util.h"

#define TARGET_MAX 256u
/* libmicrohttpd's buffer per connection: the head (the gate bounds it at BROKERD_HEAD_MAX)
 * plus room to read bodies and write streamed answers in large pieces. */
#define CONNECTION_MEMORY (128u * 1024u)
#define MHD_CONNECTION_LIMIT (2u * BROKERD_RICH_CONNECTIONS)
/* libmicrohttpd's own idle limit is only a backstop: the silence limit is the sweep's,
 * which knows when brokerd itself is the one working (a host command, a long poll). */
#define MHD_IDLE_SECONDS (RTS_RICH_TIMEOUT_MS_MAX / 1000u + 10u)
#define SILENCE_GRACE_MS 2000u /* a stream's reader checks the silence limit at least every second */

#define BUDGET_WHY "the rich listeners' buffer budget is used up"

enum conn_state {
	CONN_NEW,    /* handed over, request line not parsed yet */
	CONN_HEADER, /* request line parsed, header not complete */
	CONN_BODY,   /* admitted, reading the body */
	CONN_RUN,    /* the handler runs */
	CONN_DONE,   /* answered */
	CONN_DROP,   /* to be closed unanswered */
};

/* ---- routes ---- */

static bool in_profile(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Every route kind in one row: its exact target (NULL: matched by name below) and whether
 * "?beta=true" may follow, its word in log lines, its audit route and the rule of an allowed
 * call whose handler named none (brokerd/audit.c lists both), the largest body it takes,
 * and its handler: answer() answers in *a; stream() may instead queue a streamed answer on
 * the connection itself and then returns true. */
struct route_row {
	const char *path;
	bool beta_ok;
	const char *word, *audit, *allow_rule;
	size_t body_max;
	void (*answer)(struct rich_conn *c, struct rich_answer *a);
	bool (*stream)(struct rich_conn *c, struct MHD_Connection *mc, struct rich_answer *a);
};

static const struct route_row routes[] = {
	[RICH_ROUTE_READY] = {"/worker/ready", false, "ready", "rich_worker", "worker_ready",
			      BROKERD_RICH_SMALL_BODY_MAX, .answer = brokerd_rich_worker_ready},
	[RICH_ROUTE_NEXT] = {"/worker/next", false, "next", "rich_worker", "worker_next", BROKERD_RICH_SMALL_BODY_MAX,
			     .answer = brokerd_rich_worker_next},
	[RICH_ROUTE_RESULT] = {"/worker/result", false, "result", "rich_worker", "reply_packet",
			       RTS_RICH_REPLY_PACKET_MAX, .answer = brokerd_rich_worker_result},
	[RICH_ROUTE_COMPACT] = {"/worker/compact", false, "compact", "rich_compact", "compaction", RTS_RICH_BODY_MAX,
				.answer = brokerd_rich_worker_compact},
	[RICH_ROUTE_MESSAGES] = {"/anthropic/v1/messages", true, "anthropic", "rich_model", "anthropic_route",
				 RTS_RICH_BODY_MAX, .stream = brokerd_rich_anthropic},
	[RICH_ROUTE_COUNT_TOKENS] = {"/anthropic/v1/messages/count_tokens", true, "count_tokens", "rich_count_tokens",
				     "anthropic_route", RTS_RICH_BODY_MAX, .stream = brokerd_rich_anthropic},
	[RICH_ROUTE_MCP] = {NULL, false, "mcp", "rich_mcp", "mcp_method", RTS_RICH_BODY_MAX, .answer = brokerd_rich_mcp},
	[RICH_ROUTE_TOOL] = {NULL, false, "tool", "rich_tool", "tool_configured", RTS_RICH_BODY_MAX,
			     .answer = brokerd_rich_tool},
};
_Static_assert(RTS_ARRAY_SIZE(routes) == RICH_ROUTE_TOOL + 1, "a row for every rich route kind");

/* k's row, or for a kind no route has (never matched) the row of no route. */
static const struct route_row *route_row(enum rich_route_kind k)
{
	static const struct route_row none = {.word = "none", .audit = "rich_none", .allow_rule = "allowed",
					      .body_max = RTS_RICH_BODY_MAX};
	return (unsigned)k < RTS_ARRAY_SIZE(routes) ? &routes[k] : &none;
}

bool brokerd_rich_route_match(const struct rts_config *cfg, const struct rts_rich_profile *profile,
			      const char *target, struct rich_route *r)
{
	*r = (struct rich_route){0};
	if (!target)
		return false;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(routes); i++) {
		if (!routes[i].path)
			continue;
		size_t n = strlen(routes[i].path);
		if (strncmp(target, routes[i].path, n) != 0)
			continue;
		const char *rest = target + n;
		if (*rest == '\0' || (routes[i].beta_ok && strcmp(rest, "?beta=true") == 0)) {
			r->kind = (enum rich_route_kind)i;
			r->beta = *rest != '\0';
			return true;
		}
	}
	/* Configured names are [a-z][a-z0-9_]{0,47}: a suffix holding '/', '?', '#', '%' or
	 * '.' can never equal one. */
	if (strncmp(target, "/mcp/", 5) == 0 && in_profile((const char *const *)profile->mcp, profile->n_mcp, target + 5)) {
		r->kind = RICH_ROUTE_MCP;
		r->name = target + 5;
		for (size_t i = 0; i < cfg->n_mcp; i++)
			if (strcmp(cfg->mcp[i].name, r->name) == 0)
				r->index = i;
		return true;
	}
	if (strncmp(target, "/tools/", 7) == 0 &&
	    in_profile((const char *const *)profile->tools, profile->n_tools, target + 7)) {
		r->kind = RICH_ROUTE_TOOL;
		r->name = target + 7;
		for (size_t i = 0; i < cfg->n_tools; i++)
			if (strcmp(cfg->tools[i].name, r->name) == 0)
				r->index = i;
		return true;
	}
	return false;
}

size_t brokerd_rich_route_body_max(const struct rts_config *cfg, enum rich_route_kind kind)
{
	return route_row(kind)->body_max;
}

static const char *route_word(enum rich_route_kind k)
{
	return route_row(k)->word;
}

/* ---- the audit trail ---- */

void brokerd_rich_audit(struct rich_channel *ch, const char *turn_id, unsigned call_no, bool routed,
			enum rich_route_kind route, const char *rule, enum brokerd_result result, bool forwarded,
			uint64_t accepted_ms)
{
	if (!rule)
		rule = result == BROKERD_OK && routed ? route_row(route)->allow_rule
		       : result == BROKERD_RESULT_MAX_ ? "closed"
						       : brokerd_result_code(result);
	const char *audit = routed ? route_row(route)->audit : "rich_none";
	if (!brokerd_audit_decision(turn_id, ch->hash, call_no, ch->audit_max, audit, rule, result, forwarded,
				    rts_now_ms() - accepted_ms))
		atomic_fetch_add(&ch->audit_unlogged, 1);
}

void brokerd_rich_audit_conn(struct rich_conn *c, enum brokerd_result result, const char *rule)
{
	if (c->audited)
		return;
	c->audited = true;
	brokerd_rich_audit(c->ch, c->turn_id[0] ? c->turn_id : NULL, c->call_no, c->routed, c->route.kind,
			   rule ? rule : c->rule, result, c->forwarded, c->accepted_ms);
}

void brokerd_rich_audit_summary(struct rich_channel *ch, const char *turn_id)
{
	brokerd_audit_unlogged(turn_id, ch->hash, atomic_exchange(&ch->audit_unlogged, 0));
}

/* ---- headers ---- */

enum hid {
	H_HOST,
	H_CONTENT_TYPE,
	H_CONTENT_LENGTH,
	H_CONNECTION,
	H_AUTHORIZATION,
	H_API_KEY,
	H_VERSION,
	H_BETA,
	H_IGNORED, /* allowed, never looked at, may repeat */
	H_MCP,	   /* allowed on /mcp routes only, ignored */
	H_COUNT_
};

static const struct {
	const char *name;
	enum hid id;
} header_table[] = {
	{"host", H_HOST},
	{"content-type", H_CONTENT_TYPE},
	{"content-length", H_CONTENT_LENGTH},
	{"connection", H_CONNECTION},
	{"authorization", H_AUTHORIZATION},
	{"x-api-key", H_API_KEY},
	{"anthropic-version", H_VERSION},
	{"anthropic-beta", H_BETA},
	{"user-agent", H_IGNORED},
	{"accept", H_IGNORED},
	{"accept-language", H_IGNORED},
	{"accept-encoding", H_IGNORED},
	{"sec-fetch-mode", H_IGNORED},
	{"anthropic-dangerous-direct-browser-access", H_IGNORED},
	{"x-app", H_IGNORED},
	{"mcp-protocol-version", H_MCP},
	{"mcp-session-id", H_MCP},
};

static enum hid header_id(const char *name)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(header_table); i++)
		if (strcasecmp(name, header_table[i].name) == 0)
			return header_table[i].id;
	if (strncasecmp(name, "x-stainless-", 12) == 0)
		return H_IGNORED;
	return H_COUNT_;
}

static bool dummy_credential(const struct brokerd_header *h, enum hid id)
{
	if (id == H_API_KEY)
		return brokerd_header_is(h, BROKERD_RICH_DUMMY_API_KEY);
	return brokerd_header_is(h, "Bearer " RTS_DUMMY_KEY) ||
	       brokerd_header_is(h, "Bearer " BROKERD_RICH_DUMMY_API_KEY) ||
	       brokerd_header_is(h, "Bearer " BROKERD_RICH_DUMMY_OAUTH);
}

static bool content_type_ok(const struct brokerd_header *h)
{
	static const char json[] = "application/json";
	if (h->value_len < sizeof(json) - 1 || strncasecmp(h->value, json, sizeof(json) - 1) != 0)
		return false;
	const char *p = h->value + sizeof(json) - 1, *end = h->value + h->value_len;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end)
		return true;
	if (*p++ != ';')
		return false;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	static const char utf8[] = "charset=utf-8";
	return (size_t)(end - p) == sizeof(utf8) - 1 && strncasecmp(p, utf8, sizeof(utf8) - 1) == 0;
}

/* The anthropic-beta values on the allow-list, comma-separated; the others are dropped. */
static void take_betas(const struct brokerd_header *h, struct rich_headers *out)
{
	const char *p = h->value, *end = h->value + h->value_len;
	while (p < end) {
		while (p < end && (*p == ',' || *p == ' ' || *p == '\t'))
			p++;
		const char *s = p;
		while (p < end && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		size_t n = (size_t)(p - s);
		if (n > 0 && n < sizeof(out->betas[0]) && out->n_betas < BROKERD_RICH_BETAS_MAX &&
		    brokerd_anthropic_beta_allowed(s, n)) {
			memcpy(out->betas[out->n_betas], s, n);
			out->betas[out->n_betas][n] = '\0';
			out->n_betas++;
		}
	}
}

enum brokerd_result brokerd_rich_headers_check(const struct brokerd_header *h, size_t n, enum rich_route_kind kind,
					       struct rich_headers *out)
{
	const struct brokerd_header *seen[H_COUNT_] = {0};
	*out = (struct rich_headers){0};
	if (n > BROKERD_RICH_HEADERS_MAX)
		return BROKERD_BAD_REQUEST;
	unsigned credentials = 0;
	for (size_t i = 0; i < n; i++) {
		if (!brokerd_header_whole(&h[i]))
			return BROKERD_BAD_REQUEST;
		enum hid id = header_id(h[i].name);
		if (id == H_COUNT_ || (id == H_MCP && kind != RICH_ROUTE_MCP))
			return BROKERD_BAD_REQUEST;
		if (id == H_IGNORED || id == H_MCP)
			continue;
		if (seen[id])
			return BROKERD_BAD_REQUEST;
		seen[id] = &h[i];
		if (id == H_AUTHORIZATION || id == H_API_KEY)
			credentials++;
	}
	/* One credential, and only a dummy: the worker holds nothing real. */
	if (credentials != 1)
		return BROKERD_UNAUTHORIZED;
	const struct brokerd_header *cred = seen[H_AUTHORIZATION] ? seen[H_AUTHORIZATION] : seen[H_API_KEY];
	if (!dummy_credential(cred, seen[H_AUTHORIZATION] ? H_AUTHORIZATION : H_API_KEY))
		return BROKERD_UNAUTHORIZED;
	if (!seen[H_HOST] || !brokerd_header_is(seen[H_HOST], "broker"))
		return BROKERD_BAD_REQUEST;
	if (!seen[H_CONTENT_TYPE] || !content_type_ok(seen[H_CONTENT_TYPE]))
		return BROKERD_BAD_REQUEST;
	if (seen[H_CONNECTION] && !(strcasecmp(seen[H_CONNECTION]->value, "keep-alive") == 0 ||
				    strcasecmp(seen[H_CONNECTION]->value, "close") == 0))
		return BROKERD_BAD_REQUEST;
	/* At most 12 digits: the route's limit (far below) is checked by the caller. */
	const struct brokerd_header *cl = seen[H_CONTENT_LENGTH];
	if (!cl || cl->value_len > 12 || brokerd_content_length(cl, SIZE_MAX, &out->content_length) < 0)
		return BROKERD_BAD_REQUEST;
	if (seen[H_VERSION]) {
		if (!brokerd_anthropic_version_ok(seen[H_VERSION]->value, seen[H_VERSION]->value_len))
			return BROKERD_BAD_REQUEST;
		memcpy(out->version, seen[H_VERSION]->value, seen[H_VERSION]->value_len);
	}
	if (seen[H_BETA])
		take_betas(seen[H_BETA], out);
	return BROKERD_OK;
}

static void release_locked(struct rich_conn *c);

/* ---- the gate's rules for a channel (gate.h) ---- */

static struct rich_channel *gate_channel(struct brokerd_gate *g)
{
	return g->owner;
}

static unsigned gate_open_beyond(struct brokerd_gate *g)
{
	struct rich_channel *ch = gate_channel(g);
	unsigned n = 0;
	pthread_mutex_lock(&ch->lock);
	n += brokerd_handoff_count(ch->handoffs);
	for (struct rich_conn *c = ch->conns; c; c = c->next)
		n++;
	pthread_mutex_unlock(&ch->lock);
	return n;
}

/* The turn's budget counts in admit() (take_slot_locked()); here only the number of the
 * call for its audit entry. */
static unsigned gate_count(struct brokerd_gate *g)
{
	struct rich_channel *ch = gate_channel(g);
	pthread_mutex_lock(&ch->lock);
	if (ch->audit_calls < UINT_MAX)
		ch->audit_calls++;
	unsigned n = ch->audit_calls;
	pthread_mutex_unlock(&ch->lock);
	return n;
}

/* A call the gate ended itself: before any route was matched. */
static void gate_audit(struct brokerd_gate *g, unsigned call_no, const char *rule, enum brokerd_result r, uint64_t ms)
{
	struct rich_channel *ch = gate_channel(g);
	char turn_id[RTS_TURN_ID_LEN + 1] = "";
	pthread_mutex_lock(&ch->lock);
	if (ch->turn)
		snprintf(turn_id, sizeof(turn_id), "%s", ch->turn->b.turn_id);
	pthread_mutex_unlock(&ch->lock);
	/* The one refusal that knows its route: a reply packet outside its turn. */
	bool packet = strcmp(rule, "reply_outside_turn") == 0;
	brokerd_rich_audit(ch, turn_id[0] ? turn_id : NULL, call_no, packet, RICH_ROUTE_RESULT, rule, r, false,
			   rts_now_ms() - ms);
}

/* Before libmicrohttpd reads a byte: the body's size for its route, and a reply packet
 * only for a turn the worker holds, with no other packet on its way (seed: reply packets
 * are refused before body reading outside that turn). */
static enum brokerd_result gate_admit_head(struct brokerd_gate *g, const struct brokerd_head *h, const char **rule,
					   const char **why)
{
	struct rich_channel *ch = gate_channel(g);
	char target[TARGET_MAX + 1];
	struct rich_route r;
	bool routed = false;
	if (h->target_len <= TARGET_MAX) {
		memcpy(target, h->target, h->target_len);
		target[h->target_len] = '\0';
		routed = brokerd_rich_route_match(ch->cfg, ch->profile, target, &r);
	}
	size_t max = routed ? brokerd_rich_route_body_max(ch->cfg, r.kind) : RTS_RICH_BODY_MAX;
	if (h->content_length > max) {
		*rule = "body_too_large";
		*why = "body larger than the route's limit";
		return BROKERD_TOO_LARGE;
	}
	if (routed && r.kind == RICH_ROUTE_RESULT) {
		/* Taken here, on the main thread, for the connection handed over next: a second
		 * packet is refused here too, whatever libmicrohttpd has read of the first. */
		pthread_mutex_lock(&ch->lock);
		struct rich_turn *t = ch->turn;
		bool open = t && t->state == RICH_TURN_HANDED && !t->packet_incoming;
		if (open) {
			t->packet_incoming = true;
			t->users++;
			ch->gate_packet = t;
		}
		pthread_mutex_unlock(&ch->lock);
		if (!open) {
			*rule = "reply_outside_turn";
			*why = "reply packet outside its turn";
			return BROKERD_CONFLICT;
		}
	}
	return BROKERD_OK;
}

static struct rich_conn *handoff_conn(struct brokerd_handoff *h)
{
	return h ? brokerd_entry(h, struct rich_conn, handoff) : NULL;
}

static struct rich_conn *claim_locked(struct rich_channel *ch, int fd)
{
	return handoff_conn(brokerd_handoff_claim(&ch->handoffs, fd));
}

/* A hand-off libmicrohttpd never started: what it holds goes back, and its call gets its
 * entry (rule static). ch->lock held. */
static void drop_handoff_locked(struct rich_conn *c, const char *rule)
{
	release_locked(c);
	brokerd_rich_audit_conn(c, BROKERD_RESULT_MAX_, rule);
	free(c);
}

static void gate_handoff(struct brokerd_gate *g, int fd, const struct sockaddr_un *addr, socklen_t addr_len,
			 uint64_t accepted_ms, unsigned call_no)
{
	struct rich_channel *ch = gate_channel(g);
	struct rich_conn *c = rts_xcalloc(1, sizeof(*c));
	c->ch = ch;
	c->fd = fd;
	c->accepted_ms = accepted_ms;
	c->last_io_ms = rts_now_ms();
	c->state = CONN_NEW;
	c->call_no = call_no;
	pthread_mutex_lock(&ch->lock);
	if (ch->gate_packet) {
		c->turn = steal_pointer(&ch->gate_packet);
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", c->turn->b.turn_id);
		c->route.kind = RICH_ROUTE_RESULT;
		c->routed = true;
		c->packet_reserved = true;
	}
	struct rich_conn *stale = handoff_conn(brokerd_handoff_put(&ch->handoffs, &c->handoff, fd, c->last_io_ms));
	if (stale)
		drop_handoff_locked(stale, "server_error");
	pthread_mutex_unlock(&ch->lock);
	if (MHD_add_connection(ch->mhd, fd, (const struct sockaddr *)addr, addr_len) != MHD_YES) {
		log_warning_errno(errno, "channel %.12s: cannot hand a connection to the HTTP server: %m", ch->hash);
		pthread_mutex_lock(&ch->lock);
		struct rich_conn *mine = claim_locked(ch, fd);
		if (mine)
			release_locked(mine);
		pthread_mutex_unlock(&ch->lock);
		if (mine)
			brokerd_rich_audit_conn(mine, BROKERD_RESULT_MAX_, "server_error");
		free(mine);
	}
}

static const struct brokerd_gate_ops rich_gate_ops = {
	.open_beyond = gate_open_beyond,
	.count = gate_count,
	.admit_head = gate_admit_head,
	.audit = gate_audit,
	.handoff = gate_handoff,
};

/* ---- the buffer budget of all rich listeners (RTS_RICH_BUFFER_BUDGET) ---- */

static atomic_size_t buffered; /* bytes reserved, across every channel's threads */

/* Reserve n bytes of the budget: false (nothing taken) when they do not fit. */
static bool budget_take(size_t n)
{
	size_t cur = atomic_load(&buffered);
	do {
		if (n > RTS_RICH_BUFFER_BUDGET || cur > RTS_RICH_BUFFER_BUDGET - n)
			return false;
	} while (!atomic_compare_exchange_weak(&buffered, &cur, cur + n));
	return true;
}

static void budget_give(size_t n)
{
	if (n)
		atomic_fetch_sub(&buffered, n);
}

/* ---- connections ---- */

/* Give back what c holds of its turn: its slot, its packet, its use. ch->lock held. */
static void release_locked(struct rich_conn *c)
{
	struct rich_turn *t = c->turn;
	if (!t)
		return;
	if (c->holds_slot && t->in_flight > 0)
		t->in_flight--;
	c->holds_slot = false;
	if (c->compact_slot && t->compacts > 0)
		t->compacts--;
	c->compact_slot = false;
	if (c->route.kind == RICH_ROUTE_RESULT && c->routed)
		t->packet_incoming = false;
	c->turn = NULL;
	brokerd_rich_turn_unuse_locked(c->ch, t);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct rich_channel *ch = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		int fd = ci ? ci->connect_fd : -1;
		pthread_mutex_lock(&ch->lock);
		struct rich_conn *c = claim_locked(ch, fd);
		if (!c) {
			c = rts_xcalloc(1, sizeof(*c));
			c->ch = ch;
			c->fd = fd;
			c->accepted_ms = c->last_io_ms = rts_now_ms();
			if (ch->audit_calls < UINT_MAX)
				ch->audit_calls++;
			c->call_no = ch->audit_calls;
		}
		c->prev = NULL;
		c->next = ch->conns;
		if (ch->conns)
			ch->conns->prev = c;
		ch->conns = c;
		pthread_mutex_unlock(&ch->lock);
		*socket_context = c;
		return;
	}
	struct rich_conn *c = *socket_context;
	if (!c)
		return;
	pthread_mutex_lock(&ch->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		ch->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	release_locked(c);
	if (c->stream)
		brokerd_rich_stream_detach_locked(c->stream);
	bool shut = c->shut;
	struct rich_turn *t = ch->turn;
	if (!c->audited && !c->turn_id[0] && t && t->state == RICH_TURN_HANDED)
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", t->b.turn_id);
	pthread_mutex_unlock(&ch->lock);
	/* Closed without an answer: still one decision entry for the call. */
	if (!c->audited)
		brokerd_rich_audit_conn(c, BROKERD_RESULT_MAX_,
					shut			       ? "connection_cut"
					: c->state == CONN_BODY ? "body_incomplete"
					: c->state == CONN_DROP ? "second_request"
								: "head_incomplete");
	budget_give(c->budget_held);
	free(c->target);
	free(c->body);
	free(c);
	*socket_context = NULL;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct rich_conn *c = ci ? ci->socket_context : NULL;
	if (!c)
		return NULL;
	if (c->state != CONN_NEW) {
		/* A second request on one connection: every answer says Connection: close. */
		c->state = CONN_DROP;
		return c;
	}
	c->state = CONN_HEADER;
	c->target = rts_xstrndup(uri, TARGET_MAX);
	if (strlen(uri) > TARGET_MAX)
		c->target[0] = '\0';
	return c;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)ap;
	/* TCP socket options do not apply to a Unix socket: nothing to report. */
	if (strncmp(fmt, "Setting %s option", 17) == 0 || strncmp(fmt, "Failed to push the data", 23) == 0)
		return;
	log_debug("libmicrohttpd (rich): %.*s", (int)strcspn(fmt, "\n"), fmt);
}

static enum MHD_Result respond(struct MHD_Connection *mc, unsigned status, char *body, size_t len, const char *ctype)
{
	struct MHD_Response *resp =
		body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
		     : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	if ((ctype && MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype) != MHD_YES) ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES) {
		MHD_destroy_response(resp);
		return MHD_NO;
	}
	enum MHD_Result r = MHD_queue_response(mc, status, resp);
	MHD_destroy_response(resp);
	return r;
}

void brokerd_rich_answer_error(struct rich_answer *a, enum brokerd_result r)
{
	a->result = r;
	a->status = brokerd_result_status(r);
	a->body = brokerd_error_body(r);
	a->len = strlen(a->body);
	a->content_type = "application/json";
}

static void log_call(struct rich_conn *c, unsigned status, const char *what)
{
	rts_log_turn(LOG_DEBUG, c->turn_id[0] ? c->turn_id : NULL, c->ch->hash, status < 400 ? "ok" : "refused",
		     rts_now_ms() - c->accepted_ms, "rich call route %s status %u%s%s",
		     c->routed ? route_word(c->route.kind) : "none", status, what ? ": " : "", what ? what : "");
}

/* A call refused before it took its turn still belongs to the turn the worker holds, for
 * its audit entry. ch->lock not held. */
static void note_turn(struct rich_conn *c)
{
	if (c->turn_id[0])
		return;
	pthread_mutex_lock(&c->ch->lock);
	struct rich_turn *t = c->ch->turn;
	if (t && t->state == RICH_TURN_HANDED)
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", t->b.turn_id);
	pthread_mutex_unlock(&c->ch->lock);
}

static enum MHD_Result refuse(struct rich_conn *c, struct MHD_Connection *mc, enum brokerd_result r, const char *rule,
			      const char *why)
{
	c->state = CONN_DONE;
	note_turn(c);
	log_call(c, brokerd_result_status(r), why);
	brokerd_rich_audit_conn(c, r, rule);
	struct rich_answer a = {0};
	brokerd_rich_answer_error(&a, r);
	return respond(mc, a.status, a.body, a.len, a.content_type);
}

/* The turn's budget and slots for a credential-bearing call (ch->lock held). Seed: four
 * in-flight slots, maxCalls per turn (refused calls count too); before the first admitted
 * turn, MCP calls fall in the metadata-only start-up scope (rich_calls.c checks the
 * method). */
static enum brokerd_result take_slot_locked(struct rich_channel *ch, struct rich_conn *c, const char **rule,
					    const char **why)
{
	struct rich_turn *t = ch->turn;
	if (t && t->state == RICH_TURN_HANDED) {
		if (t->calls < UINT_MAX)
			t->calls++;
		/* The connection belongs to the turn from here, for its audit entry. */
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", t->b.turn_id);
		if (t->calls > ch->cfg->rich.max_calls) {
			*rule = "call_budget";
			*why = "maxCalls of the turn used up";
			return BROKERD_BUDGET_EXHAUSTED;
		}
		if (t->in_flight >= RTS_RICH_IN_FLIGHT_MAX) {
			*rule = "in_flight";
			*why = "four credential-bearing calls in flight already";
			return BROKERD_BUSY;
		}
		t->in_flight++;
		t->users++;
		c->turn = t;
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", t->b.turn_id);
		c->holds_slot = true;
		return BROKERD_OK;
	}
	if (c->route.kind == RICH_ROUTE_MCP && !ch->turn && !ch->scope_revoked &&
	    rts_now_ms() < ch->bound_ms + BROKERD_RICH_STARTUP_MS) {
		if (ch->scope_calls >= BROKERD_RICH_STARTUP_CALLS) {
			*rule = "startup_scope_calls";
			*why = "the start-up scope's 32 calls are used up";
			return BROKERD_FORBIDDEN;
		}
		ch->scope_calls++;
		c->scope_call = true;
		return BROKERD_OK;
	}
	*rule = t && t->blocked ? "turn_failed" : "no_turn";
	*why = t && t->blocked ? "the turn has failed" : "no turn is admitted to the worker";
	return BROKERD_FORBIDDEN;
}

/* Everything decided before a body byte is read. */
static enum brokerd_result admit(struct rich_channel *ch, struct rich_conn *c, struct MHD_Connection *mc,
				 const char *method, const char *version, const char **rule, const char **why,
				 bool *fallback)
{
	*fallback = false;
	*rule = NULL;
	if (atomic_load(&ch->closing)) {
		*rule = "listener_closing";
		*why = "the channel's listener is closing";
		return BROKERD_UNAVAILABLE;
	}
	c->routed = brokerd_rich_route_match(ch->cfg, ch->profile, c->target, &c->route);
	if (!c->routed) {
		*rule = "route_unknown";
		*why = "no such route";
		return BROKERD_NOT_FOUND;
	}
	if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
		*rule = "method_not_post";
		*why = "not POST";
		return BROKERD_METHOD_NOT_ALLOWED;
	}
	if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0) {
		*rule = "http_version";
		*why = "not HTTP/1.1";
		return BROKERD_BAD_REQUEST;
	}
	struct brokerd_header fields[BROKERD_RICH_HEADERS_MAX];
	struct brokerd_header_list hl = {.h = fields, .cap = RTS_ARRAY_SIZE(fields)};
	MHD_get_connection_values_n(mc, MHD_HEADER_KIND, brokerd_header_collect, &hl);
	enum brokerd_result r = brokerd_rich_headers_check(hl.h, hl.n, c->route.kind, &c->headers);
	if (r != BROKERD_OK) {
		*rule = r == BROKERD_UNAUTHORIZED ? "dummy_key" : "header_not_allowed";
		*why = "header refused";
		return r;
	}
	if (c->headers.content_length > brokerd_rich_route_body_max(ch->cfg, c->route.kind)) {
		*rule = "body_too_large";
		*why = "body larger than the route's limit";
		return BROKERD_TOO_LARGE;
	}
	r = BROKERD_OK;
	pthread_mutex_lock(&ch->lock);
	struct rich_turn *t = ch->turn;
	switch (c->route.kind) {
	case RICH_ROUTE_READY:
	case RICH_ROUTE_NEXT:
		break;
	case RICH_ROUTE_RESULT:
		/* The gate took the packet for this connection; the turn may have settled since. */
		if (!c->packet_reserved || c->turn != t || t->state != RICH_TURN_HANDED) {
			*rule = "reply_outside_turn";
			*why = "reply packet outside its turn";
			r = BROKERD_CONFLICT;
		}
		break;
	case RICH_ROUTE_COMPACT:
		if (!t || t->state != RICH_TURN_HANDED) {
			*rule = "no_turn";
			*why = "no turn is admitted to the worker";
			r = BROKERD_CONFLICT;
			break;
		}
		/* Its own bound (it takes no credential-bearing slot): each body it reads is
		 * up to 96 MiB and parsed. */
		if (t->compacts >= RTS_RICH_COMPACT_IN_FLIGHT) {
			*why = "two compaction bodies of the turn in flight already";
			r = BROKERD_BUSY;
			break;
		}
		t->compacts++;
		c->compact_slot = true;
		t->users++;
		c->turn = t;
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", t->b.turn_id);
		/* Seed, "Compaction": a request over maxRequestBytes falls back to Pi's summary,
		 * answered without looking at it (libmicrohttpd discards the body it still
		 * reads). A report is never that large. */
		if (ch->cfg->rich.compaction_command && c->headers.content_length > ch->cfg->rich.compaction_max_request) {
			t->compactions++;
			*fallback = true;
		}
		break;
	default:
		r = take_slot_locked(ch, c, rule, why);
		break;
	}
	pthread_mutex_unlock(&ch->lock);
	if (r != BROKERD_OK)
		return r;
	c->body_want = *fallback ? 0 : c->headers.content_length;
	/* Reserved before a body byte is read, given back when the connection ends. */
	if (!budget_take(c->body_want)) {
		*why = BUDGET_WHY;
		rts_log_turn(LOG_WARNING, c->turn_id[0] ? c->turn_id : NULL, ch->hash, "budget",
			     rts_now_ms() - c->accepted_ms, "rich call route %s refused before its body: %s",
			     route_word(c->route.kind), BUDGET_WHY);
		return BROKERD_UNAVAILABLE;
	}
	c->budget_held = c->body_want;
	c->body = rts_xmalloc(c->body_want + 1);
	return BROKERD_OK;
}

/* Before json-c and jansson see the body: its weighed tree (common/jsonscan.h) within
 * RTS_RICH_JSON_WEIGHT_MAX and, reserved for as long as the connection lasts, within the
 * buffer budget. Returns BROKERD_OK or the refusal, logged with its rule. */
static enum brokerd_result weigh_body(struct rich_conn *c)
{
	struct rich_channel *ch = c->ch;
	struct rts_json_scan s;
	int r = rts_json_scan(c->body, c->body_len, RTS_RICH_JSON_WEIGHT_MAX, RTS_JSON_DEPTH_MAX, &s);
	if (r < 0) {
		rts_log_turn(LOG_WARNING, c->turn_id[0] ? c->turn_id : NULL, ch->hash, "json_too_heavy",
			     rts_now_ms() - c->accepted_ms, "rich call route %s refused before parsing: %s",
			     route_word(c->route.kind),
			     r == -ELOOP ? "JSON nested deeper than 64"
					 : "more JSON objects, arrays and values than a request needs "
					   "(weight above 524288)");
		return r == -ELOOP ? BROKERD_BAD_REQUEST : BROKERD_TOO_LARGE;
	}
	size_t tree = s.weight * (size_t)RTS_JSON_WEIGHT_UNIT;
	if (!budget_take(tree)) {
		rts_log_turn(LOG_WARNING, c->turn_id[0] ? c->turn_id : NULL, ch->hash, "budget",
			     rts_now_ms() - c->accepted_ms, "rich call route %s refused: %s", route_word(c->route.kind),
			     BUDGET_WHY);
		return BROKERD_UNAVAILABLE;
	}
	c->budget_held += tree;
	return BROKERD_OK;
}

static void run(struct rich_conn *c, struct MHD_Connection *mc)
{
	struct rich_channel *ch = c->ch;
	c->state = CONN_RUN;
	c->body[c->body_len] = '\0';
	struct rich_answer a = {0};
	bool streamed = false;
	enum brokerd_result weighed = weigh_body(c);
	if (weighed != BROKERD_OK) {
		brokerd_rich_answer_error(&a, weighed);
		goto answer;
	}
	const struct route_row *row = route_row(c->route.kind);
	if (row->stream)
		streamed = row->stream(c, mc, &a);
	else if (row->answer)
		row->answer(c, &a);
answer:
	c->state = CONN_DONE;
	if (streamed)
		return; /* the stream gives the turn back when it ends */
	pthread_mutex_lock(&ch->lock);
	release_locked(c);
	pthread_mutex_unlock(&ch->lock);
	if (a.status == 0)
		brokerd_rich_answer_error(&a, BROKERD_UNAVAILABLE);
	log_call(c, a.status, NULL);
	/* An idle long poll decided nothing: counted, no entry (brokerd/audit.h). */
	if (c->route.kind == RICH_ROUTE_NEXT && a.status == MHD_HTTP_NO_CONTENT) {
		c->audited = true;
		brokerd_metrics_call("rich_worker", BROKERD_OK);
	} else {
		brokerd_rich_audit_conn(c, a.result, NULL);
	}
	rich_conn_touch(c);
	respond(mc, a.status, a.body, a.len, a.content_type);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls)
{
	struct rich_channel *ch = cls;
	struct rich_conn *c = *req_cls;
	if (!c)
		return MHD_NO;
	switch (c->state) {
	case CONN_HEADER: {
		c->state = CONN_BODY;
		const char *why = NULL, *rule = NULL;
		bool fallback = false;
		enum brokerd_result r = admit(ch, c, mc, method, version, &rule, &why, &fallback);
		if (r != BROKERD_OK)
			return refuse(c, mc, r, rule, why);
		if (fallback) {
			rts_log_turn(LOG_WARNING, c->turn ? c->turn->b.turn_id : NULL, ch->hash, "fallback", 0,
				     "compaction falls back to Pi's summary: the request is larger than "
				     "rich.compaction.maxRequestBytes (%u bytes)",
				     ch->cfg->rich.compaction_max_request);
			c->state = CONN_DONE;
			pthread_mutex_lock(&ch->lock);
			release_locked(c);
			pthread_mutex_unlock(&ch->lock);
			brokerd_rich_audit_conn(c, BROKERD_OK, "compaction_fallback");
			return respond(mc, MHD_HTTP_NO_CONTENT, NULL, 0, NULL);
		}
		return MHD_YES;
	}
	case CONN_BODY:
		if (*upload_data_size == 0) {
			if (c->body_len != c->body_want)
				return MHD_NO;
			run(c, mc);
			return MHD_YES;
		}
		if (atomic_load(&ch->closing) || c->shut)
			return MHD_NO;
		if (*upload_data_size > c->body_want - c->body_len)
			return MHD_NO;
		memcpy(c->body + c->body_len, upload_data, *upload_data_size);
		c->body_len += *upload_data_size;
		*upload_data_size = 0;
		rich_conn_touch(c);
		return MHD_YES;
	case CONN_DONE:
		*upload_data_size = 0;
		return MHD_YES;
	default:
		return MHD_NO;
	}
}

int brokerd_rich_http_start(struct rich_channel *ch, sd_event *ev, int listen_fd)
{
	ch->mhd = MHD_start_daemon(
		MHD_USE_NO_LISTEN_SOCKET | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
		0, NULL, NULL, on_request, ch,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, ch,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)MHD_CONNECTION_LIMIT,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MHD_IDLE_SECONDS,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, ch,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, ch,
		MHD_OPTION_END);
	if (!ch->mhd) {
		close(listen_fd);
		return -EIO;
	}
	ch->gate = (struct brokerd_gate){.ops = &rich_gate_ops,
					 .owner = ch,
					 .log_turn = NULL,
					 .log_hash = ch->hash,
					 .deadline_ms = UINT64_MAX,
					 .max_connections = BROKERD_RICH_CONNECTIONS,
					 .listen_fd = -1};
	return brokerd_gate_start(&ch->gate, ev, listen_fd);
}

void brokerd_rich_http_sweep(struct rich_channel *ch, uint64_t now_ms)
{
	pthread_mutex_lock(&ch->lock);
	for (struct rich_conn *c; (c = handoff_conn(brokerd_handoff_stale(&ch->handoffs, now_ms)));)
		drop_handoff_locked(c, "server_error");
	for (struct rich_conn *c = ch->conns; c; c = c->next) {
		if (c->shut || c->fd < 0)
			continue;
		/* Seed: the rich listener limits silence (no request-body byte read and no answer
		 * chunk written), not total time; the turn deadline bounds every call. A stream's
		 * own reader notices a silent upstream first and tells the worker with an error
		 * event; this cuts one whose worker stopped reading. */
		bool reader = c->stream || __atomic_load_n(&c->reader_watches, __ATOMIC_RELAXED);
		uint64_t limit = BROKERD_RICH_SILENCE_MS + (reader ? SILENCE_GRACE_MS : 0);
		uint64_t last = __atomic_load_n(&c->last_io_ms, __ATOMIC_RELAXED);
		bool silent = !__atomic_load_n(&c->quiet_ok, __ATOMIC_RELAXED) && now_ms > last && now_ms - last >= limit;
		bool late = c->turn && now_ms >= c->turn->b.deadline_ms;
		if (!silent && !late)
			continue;
		rts_log_turn(LOG_WARNING, c->turn ? c->turn->b.turn_id : NULL, ch->hash, silent ? "silence" : "timeout",
			     now_ms - c->accepted_ms, "rich call route %s closed: %s",
			     c->routed ? route_word(c->route.kind) : "none",
			     silent ? "no byte read or written for the silence limit" : "the turn deadline passed");
		/* Wakes the connection thread; the fd stays valid until the CLOSED
		 * notification, which needs this lock. */
		shutdown(c->fd, SHUT_RDWR);
		c->shut = true;
	}
	pthread_mutex_unlock(&ch->lock);
}

void brokerd_rich_http_drop_handoffs_locked(struct rich_channel *ch)
{
	for (struct rich_conn *c; (c = handoff_conn(brokerd_handoff_pop(&ch->handoffs)));)
		drop_handoff_locked(c, "listener_closing");
}

void brokerd_rich_http_cut_packets_locked(struct rich_channel *ch, struct rich_turn *t)
{
	for (struct rich_conn *c = ch->conns; c; c = c->next) {
		if (c->turn != t || c->shut || c->fd < 0)
			continue;
		bool packet = c->route.kind == RICH_ROUTE_RESULT && c->state == CONN_BODY;
		if (!packet && !c->stream)
			continue;
		shutdown(c->fd, SHUT_RDWR);
		c->shut = true;
	}
}
