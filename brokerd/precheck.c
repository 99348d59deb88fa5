/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's broker: its binding and its one route (brokerd/precheck.h). */
#include "config.h"

#include "brokerd/keys.h"
#include "brokerd/mcp.h"
#include "brokerd/precheck.h"
#include "brokerd/sse.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/log.h"
#include "common/precheck.h"
#include "common/util.h"

/* One granted server as the run may use it: the config's entry (URL, token source) and a
 * view of it listing only the approved tools, in the shape brokerd/mcp.h checks a request
 * against. */
struct precheck_server {
	const struct rts_precheck_server *srv;
	struct rts_mcp_server view;
};

struct brokerd_precheck {
	const struct rts_config *cfg;
	char *target;
	char *tier; /* "" when the run has none */
	const struct rts_precheck_grant *grant; /* NULL: no grant matched, no way out */
	struct precheck_server *servers;	/* the grant's servers with at least one approved tool */
	size_t n_servers;
	unsigned n_tools;
};

int brokerd_precheck_new(const struct rts_config *cfg, const char *channel, const char *target, const char *tier,
			 const char *approved, struct brokerd_precheck **out)
{
	*out = NULL;
	if (!cfg->has_precheck)
		return -ENOENT;
	size_t tl = strlen(target);
	if (tl == 0 || tl > RTS_PRECHECK_TARGET_MAX || !rts_utf8_valid(target, tl) ||
	    strlen(tier) > RTS_SPEAKER_FIELD_MAX || !rts_utf8_valid(tier, strlen(tier)))
		return -EINVAL;
	cleanup_strv char **list = NULL;
	int n = rts_precheck_approved_split(approved, &list);
	if (n < 0)
		return n;
	const struct rts_precheck *pc = &cfg->precheck;
	struct brokerd_precheck *p = rts_xcalloc(1, sizeof(*p));
	p->cfg = cfg;
	p->target = rts_xstrdup(target);
	p->tier = rts_xstrdup(tier);
	p->grant = rts_precheck_grant_find(pc, channel, target, tier);
	struct rts_precheck_pair pairs[RTS_PRECHECK_PAIRS_MAX];
	size_t n_pairs = rts_precheck_allowed(p->grant, pc->tool_names, list, (size_t)n, pairs);
	p->n_tools = (unsigned)n_pairs;
	p->servers = rts_xcalloc(RTS_MAX_MCP_SERVERS, sizeof(*p->servers));
	/* Pairs come grouped by server, in the grant's order. */
	for (size_t i = 0; i < n_pairs; i++) {
		struct precheck_server *ps = p->n_servers ? &p->servers[p->n_servers - 1] : NULL;
		if (!ps || ps->srv != pairs[i].server) {
			ps = &p->servers[p->n_servers++];
			ps->srv = pairs[i].server;
			ps->view.name = pairs[i].server->name;
			ps->view.url = pairs[i].server->url;
			ps->view.tools = rts_xcalloc(pairs[i].server->n_tools, sizeof(struct rts_mcp_tool));
		}
		ps->view.tools[ps->view.n_tools++].name = (char *)pairs[i].tool;
	}
	*out = p;
	return 0;
}

void brokerd_precheck_free(struct brokerd_precheck *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_servers; i++)
		free(p->servers[i].view.tools);
	free(p->servers);
	free(p->target);
	free(p->tier);
	free(p);
}

unsigned brokerd_precheck_max_calls(const struct brokerd_precheck *p)
{
	return p->cfg->precheck.max_calls;
}

unsigned brokerd_precheck_tools(const struct brokerd_precheck *p)
{
	return p->n_tools;
}

static const struct precheck_server *server_of(const struct brokerd_precheck *p, const char *name)
{
	for (size_t i = 0; i < p->n_servers; i++)
		if (strcmp(p->servers[i].srv->name, name) == 0)
			return &p->servers[i];
	return NULL;
}

static const struct brokerd_route precheck_route = {
	.prefix = "/mcp/", .kind = "precheck", .allow_rule = "precheck_tool_granted", .handle = brokerd_precheck_handle};

const struct brokerd_route *brokerd_precheck_route(const struct brokerd_precheck *p, const char *target,
						   const char **name)
{
	*name = NULL;
	static const char prefix[] = "/mcp/";
	/* Granted names are [a-z][a-z0-9_]{0,47}: a suffix with '?', '/', '%' or '#' is never
	 * one. */
	if (!target || strncmp(target, prefix, sizeof(prefix) - 1) != 0 || !server_of(p, target + sizeof(prefix) - 1))
		return NULL;
	*name = target + sizeof(prefix) - 1;
	return &precheck_route;
}

/* ---- one call ---- */

/* Log a refused call with its rule (never the request's bytes) and return r. */
static enum brokerd_result refused(const struct brokerd_call *call, enum brokerd_result r, const char *rule)
{
	const struct brokerd_binding *b = call->binding;
	rts_log_turn(LOG_NOTICE, b->turn_id, b->channel_hash, brokerd_result_code(r), 0,
		     "precheck call to %s refused: %s", call->name, rule);
	return r;
}

/* Which rule a body breaks before it could be built, for the log line: the same decisions
 * brokerd_mcp_request_build() makes, named. */
static enum brokerd_result classify(const struct brokerd_call *call, const struct precheck_server *ps,
				    json_object *req)
{
	if (json_object_is_type(req, json_type_array))
		return refused(call, BROKERD_BAD_REQUEST, "a batch (only single tools/call requests)");
	if (!json_object_is_type(req, json_type_object))
		return refused(call, BROKERD_BAD_REQUEST, "not a JSON-RPC request object");
	const char *method = rts_json_get_string(req, "method");
	if (method && strcmp(method, "tools/call") != 0)
		return refused(call, BROKERD_FORBIDDEN, "a method other than tools/call");
	const char *tool = rts_json_get_string(rts_json_get(req, "params"), "name");
	if (tool) {
		bool granted = false, approved = false;
		for (size_t i = 0; i < ps->srv->n_tools && !granted; i++)
			granted = strcmp(ps->srv->tools[i], tool) == 0;
		for (size_t i = 0; i < ps->view.n_tools && !approved; i++)
			approved = strcmp(ps->view.tools[i].name, tool) == 0;
		if (!granted)
			return refused(call, BROKERD_FORBIDDEN, "a tool the grant does not list");
		if (!approved)
			return refused(call, BROKERD_FORBIDDEN, "a granted tool that was not approved");
	}
	return BROKERD_OK;
}

/* The command form of a token source gets who the run is for: a precheck has no speaker. */
static json_object *who_json(const struct brokerd_binding *b, const struct brokerd_precheck *p)
{
	json_object *pre = json_object_new_object();
	json_object_object_add(pre, "target", json_object_new_string(p->target));
	json_object_object_add(pre, "tier", p->tier[0] ? json_object_new_string(p->tier) : NULL);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "channel", json_object_new_string(b->channel));
	json_object_object_add(o, "precheck", pre);
	return o;
}

/* The upstream's answer as a JSON document: application/json, or text/event-stream with
 * exactly one event whose data is the document. */
static int answer_document(const struct brokerd_upstream_answer *a, json_object **doc, const char **why)
{
	*doc = NULL;
	if (a->status < 200 || a->status > 299) {
		*why = "a non-2xx status";
		return -EINVAL;
	}
	if (brokerd_content_type_is_json(a->content_type)) {
		if (rts_json_parse(a->body, a->len, RTS_JSON_DEPTH_MAX, doc, why) < 0) {
			*why = "an answer that is not JSON";
			return -EINVAL;
		}
		return 0;
	}
	if (!brokerd_content_type_is_sse(a->content_type)) {
		*why = "an answer that is neither JSON nor an event stream";
		return -EINVAL;
	}
	cleanup_free char *data = NULL;
	size_t data_len = 0;
	const char *sse_why = NULL;
	if (brokerd_sse_one_event(a->body, a->len, &data, &data_len, &sse_why) < 0) {
		*why = "an event stream that is not exactly one event";
		return -EINVAL;
	}
	if (rts_json_parse(data, data_len, RTS_JSON_DEPTH_MAX, doc, why) < 0) {
		*why = "an event whose data is not JSON";
		return -EINVAL;
	}
	return 0;
}

enum brokerd_result brokerd_precheck_handle(struct brokerd_call *call, char **answer)
{
	const struct brokerd_binding *b = call->binding;
	const struct brokerd_precheck *p = call->precheck;
	const struct precheck_server *ps = p ? server_of(p, call->name) : NULL;
	if (!ps)
		return refused(call, BROKERD_NOT_FOUND, "a server the run was not granted");

	const char *why = NULL;
	cleanup_json json_object *req = NULL;
	if (brokerd_body_parse(call->body, call->body_len, &req, &why) < 0)
		return refused(call, BROKERD_BAD_REQUEST, "a body that is not strict JSON");
	enum brokerd_result res = classify(call, ps, req);
	if (res != BROKERD_OK)
		return res;
	cleanup_json json_object *up = NULL;
	res = brokerd_mcp_request_build(req, &ps->view, &up);
	if (res != BROKERD_OK)
		return refused(call, res, "not a JSON-RPC 2.0 tools/call request of the accepted shape");
	cleanup_free char *up_body = rts_json_dump(up);

	/* The token, read now (seed: "read on the host for each call"). */
	char *key = NULL;
	size_t key_len = 0;
	if (ps->srv->has_token) {
		cleanup_json json_object *who = who_json(b, p);
		int r = brokerd_key_read_for(&ps->srv->token, b, who, &call->cancel, &key, &key_len);
		if (r < 0) {
			if (r == -ENOKEY)
				rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "no_key", 0,
					     "no token available for precheck server %s; call refused", ps->srv->name);
			return BROKERD_UNAVAILABLE;
		}
		brokerd_keyring_add(call->keys, &ps->srv->token, key, key_len);
	}
	struct brokerd_upstream_req ur = {
		.url = ps->srv->url,
		.ca_file = call->cfg->ca_file,
		.bearer = key,
		.accept = "application/json, text/event-stream",
		.body = up_body,
		.body_len = strlen(up_body),
		.max_answer = RTS_UPSTREAM_ANSWER_MAX,
		.cancel = call->cancel,
	};
	struct brokerd_upstream_answer a;
	uint64_t started = rts_now_ms();
	int r = brokerd_upstream_post(&ur, &a);
	brokerd_key_free(key, key_len);
	uint64_t took = rts_now_ms() - started;
	if (r == -ECANCELED)
		return BROKERD_UNAVAILABLE;
	if (r == -ETIMEDOUT) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_timeout", took,
			     "precheck server %s did not answer in time", ps->srv->name);
		return BROKERD_UPSTREAM_TIMEOUT;
	}
	if (r < 0) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took,
			     "precheck server %s: %s", ps->srv->name, r == -EFBIG ? "answer too large" : "transport error");
		return BROKERD_UPSTREAM_ERROR;
	}
	cleanup_json json_object *doc = NULL;
	const char *problem = NULL;
	if (answer_document(&a, &doc, &problem) < 0) {
		/* problem is set */
	} else if (brokerd_keyring_reflected(call->keys, a.body, a.len, doc)) {
		/* Seed: an answer that carries the token, plainly, inside JSON text or encoded. */
		problem = "an answer that carries the token";
	}
	long status = a.status;
	brokerd_upstream_answer_release(&a);
	cleanup_json json_object *out = NULL;
	if (!problem && brokerd_mcp_answer_rebuild(doc, rts_json_get(up, "id"), &out) < 0)
		problem = "an answer that is not a JSON-RPC response to the call";
	if (problem) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took,
			     "precheck server %s answer refused (HTTP %ld): %s", ps->srv->name, status, problem);
		return BROKERD_UPSTREAM_ERROR;
	}
	*answer = rts_json_dump(out);
	return BROKERD_OK;
}
