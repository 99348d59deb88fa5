/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "brokerd/keys.h"
#include "brokerd/mcp.h"
#include "common/strictjson.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/util.h"

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static json_object *id_copy(json_object *id)
{
	if (is_type(id, json_type_string))
		return json_object_new_string_len(json_object_get_string(id), json_object_get_string_len(id));
	return json_object_new_int64(json_object_get_int64(id));
}

static bool id_equal(json_object *a, json_object *b)
{
	if (is_type(a, json_type_string) && is_type(b, json_type_string))
		return json_object_get_string_len(a) == json_object_get_string_len(b) &&
		       memcmp(json_object_get_string(a), json_object_get_string(b),
			      (size_t)json_object_get_string_len(a)) == 0;
	if (is_type(a, json_type_int) && is_type(b, json_type_int))
		return json_object_get_int64(a) == json_object_get_int64(b);
	return false;
}

/* initialize, tools/list, the resources and prompts methods, ping: refused, not proxied. */
static bool method_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return strcmp(json_object_get_string(v), "tools/call") == 0 ||
	       rts_jfail_code(ctx, "forbidden", "is not tools/call");
}

static const char *const version_2_0[] = {"2.0", NULL};

/* Exactly these members: an array is a batch, anything without an id a notification. */
static const struct rts_jspec request_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "jsonrpc", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = version_2_0},
		{.key = "id", .types = RTS_JT_STRING | RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = INT64_MIN,
		 .max = INT64_MAX, .what = "a string or an integer"},
		{.key = "method", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = method_check},
		{.key = "params", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED,
		 .object = &(const struct rts_jspec){
			 .fields = (const struct rts_jfield[]){
				 {.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
				 {.key = "arguments", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED},
				 {0},
			 },
		 }},
		{0},
	},
};
static const struct rts_jfield request_root = RTS_JSPEC_ROOT(&request_spec);

enum brokerd_result brokerd_mcp_request_build(json_object *req, const struct rts_mcp_server *srv,
					      json_object **out)
{
	*out = NULL;
	struct rts_jerr e;
	if (rts_jspec_validate(req, &request_root, NULL, 0, &e) < 0)
		return e.code ? BROKERD_FORBIDDEN : BROKERD_BAD_REQUEST;
	json_object *params = rts_json_get(req, "params");
	const char *tool = rts_json_get_string(params, "name");
	bool declared = false;
	for (size_t i = 0; i < srv->n_tools && !declared; i++)
		declared = strcmp(srv->tools[i].name, tool) == 0;
	if (!declared)
		return BROKERD_FORBIDDEN;

	json_object *args_copy = NULL;
	if (json_object_deep_copy(rts_json_get(params, "arguments"), &args_copy, NULL) != 0)
		abort();
	json_object *p = json_object_new_object();
	json_object_object_add(p, "name", json_object_new_string(tool));
	json_object_object_add(p, "arguments", args_copy);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", id_copy(rts_json_get(req, "id")));
	json_object_object_add(o, "method", json_object_new_string("tools/call"));
	json_object_object_add(o, "params", p);
	*out = o;
	return BROKERD_OK;
}

/* The server's answer is normalised by hand, like the model's (model.c): it is upstream
 * output, accepted in the shapes servers send and rebuilt, not a request held to a table. */
int brokerd_mcp_answer_rebuild(json_object *ans, json_object *id, json_object **out)
{
	*out = NULL;
	if (!is_type(ans, json_type_object))
		return -EINVAL;
	const char *version = rts_json_get_string(ans, "jsonrpc");
	if (!version || strcmp(version, "2.0") != 0 || !id_equal(rts_json_get(ans, "id"), id))
		return -EINVAL;
	json_object *result = rts_json_get(ans, "result");
	json_object *error = rts_json_get(ans, "error");
	if ((result != NULL) == (error != NULL))
		return -EINVAL;

	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", id_copy(id));
	if (result) {
		if (!is_type(result, json_type_object))
			return -EINVAL;
		json_object *copy = NULL;
		if (json_object_deep_copy(result, &copy, NULL) != 0)
			abort();
		json_object_object_add(o, "result", copy);
	} else {
		json_object *code = rts_json_get(error, "code");
		json_object *message = rts_json_get(error, "message");
		if (!is_type(error, json_type_object) || !is_type(code, json_type_int) ||
		    !is_type(message, json_type_string))
			return -EINVAL;
		/* "data" is free-form server detail: dropped. */
		json_object *e = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_int64(json_object_get_int64(code)));
		json_object_object_add(e, "message", json_object_new_string_len(json_object_get_string(message),
									     json_object_get_string_len(message)));
		json_object_object_add(o, "error", e);
	}
	*out = steal_pointer(&o);
	return 0;
}

static const struct rts_mcp_server *find_server(const struct rts_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_mcp; i++)
		if (strcmp(cfg->mcp[i].name, name) == 0)
			return &cfg->mcp[i];
	return NULL;
}

enum brokerd_result brokerd_mcp_handle(struct brokerd_call *call, char **answer)
{
	const struct brokerd_binding *b = call->binding;
	const struct rts_mcp_server *srv = find_server(call->cfg, call->name);
	if (!srv)
		return BROKERD_NOT_FOUND; /* the route matched a configured name; cannot happen */

	const char *why = NULL;
	cleanup_json json_object *req = NULL;
	if (brokerd_body_parse(call->body, call->body_len, &req, &why) < 0) {
		log_debug("turn %s: /mcp body refused: %s", b->turn_id, why);
		call->rule = "body_json";
		return BROKERD_BAD_REQUEST;
	}
	cleanup_json json_object *up = NULL;
	enum brokerd_result res = brokerd_mcp_request_build(req, srv, &up);
	if (res != BROKERD_OK) {
		/* FORBIDDEN: a method other than tools/call, or a tool the server does not
		 * declare (the request's shape was right). */
		const char *method = rts_json_get_string(req, "method");
		call->rule = res != BROKERD_FORBIDDEN			     ? "mcp_request"
			     : method && strcmp(method, "tools/call") == 0 ? "mcp_tool_undeclared"
									   : "mcp_method";
		return res;
	}
	cleanup_free char *up_body = rts_json_dump(up);

	char *key = NULL;
	size_t key_len = 0;
	if (srv->has_api_key) {
		int r = brokerd_key_read(&srv->api_key, b, &call->cancel, &key, &key_len);
		if (r < 0) {
			if (r == -ENOKEY)
				rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "no_key", 0,
					     "no credential available for MCP server %s; call refused", srv->name);
			call->rule = r == -ECANCELED ? "turn_closing" : "no_credential";
			return BROKERD_UNAVAILABLE;
		}
		brokerd_keyring_add(call->keys, &srv->api_key, key, key_len);
	}
	/* After the server's own key (so its command does not run twice), before anything is
	 * forwarded: the answer is checked against every credential of the turn. */
	enum brokerd_result primed = brokerd_keyring_prime_call(call);
	if (primed != BROKERD_OK) {
		brokerd_key_free(key, key_len);
		return primed;
	}
	struct brokerd_upstream_req ur = {
		.url = srv->url,
		.ca_file = call->cfg->ca_file,
		.bearer = key,
		/* The Streamable HTTP transport wants both listed; an SSE answer is still refused
		 * (brokerd_upstream_json() accepts application/json only). */
		.accept = "application/json, text/event-stream",
		.body = up_body,
		.body_len = strlen(up_body),
		.max_answer = RTS_UPSTREAM_ANSWER_MAX,
		.cancel = call->cancel,
		.timeout_ms = call->upstream_timeout_ms,
		.allow_http = call->allow_http,
	};
	cleanup_json json_object *ans = NULL;
	res = brokerd_upstream_json(call, "mcp", &ur, &ans);
	brokerd_key_free(key, key_len);
	if (res != BROKERD_OK)
		return res;
	cleanup_json json_object *out = NULL;
	if (brokerd_mcp_answer_rebuild(ans, rts_json_get(up, "id"), &out) < 0) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", 0,
			     "MCP server %s: answer is not a JSON-RPC response to the call", srv->name);
		call->rule = "mcp_answer";
		return BROKERD_UPSTREAM_ERROR;
	}
	*answer = rts_json_dump(out);
	return BROKERD_OK;
}
