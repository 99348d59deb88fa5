/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "brokerd/keys.h"
#include "brokerd/mcp.h"
#include "common/strictjson.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static bool members_exactly(json_object *o, const char *const *names)
{
	size_t n = 0;
	for (const char *const *p = names; *p; p++, n++)
		if (!json_object_object_get_ex(o, *p, NULL))
			return false;
	return (size_t)json_object_object_length(o) == n;
}

static bool id_ok(json_object *id)
{
	return is_type(id, json_type_string) || is_type(id, json_type_int);
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

enum brokerd_result brokerd_mcp_request_build(json_object *req, const struct rts_mcp_server *srv,
					      json_object **out)
{
	static const char *const top[] = {"jsonrpc", "id", "method", "params", NULL};
	static const char *const params_members[] = {"name", "arguments", NULL};
	*out = NULL;
	/* An array is a batch; anything without an id is a notification. */
	if (!is_type(req, json_type_object) || !members_exactly(req, top))
		return BROKERD_BAD_REQUEST;
	const char *version = rts_json_get_string(req, "jsonrpc");
	json_object *id = rts_json_get(req, "id");
	const char *method = rts_json_get_string(req, "method");
	json_object *params = rts_json_get(req, "params");
	if (!version || strcmp(version, "2.0") != 0 || !id_ok(id) || !method)
		return BROKERD_BAD_REQUEST;
	/* initialize, tools/list, the resources and prompts methods, ping: refused, not proxied. */
	if (strcmp(method, "tools/call") != 0)
		return BROKERD_FORBIDDEN;
	if (!is_type(params, json_type_object) || !members_exactly(params, params_members))
		return BROKERD_BAD_REQUEST;
	json_object *name = rts_json_get(params, "name");
	json_object *args = rts_json_get(params, "arguments");
	if (!is_type(name, json_type_string) || !is_type(args, json_type_object))
		return BROKERD_BAD_REQUEST;
	const char *tool = json_object_get_string(name);
	bool declared = false;
	for (size_t i = 0; i < srv->n_tools && !declared; i++)
		declared = strcmp(srv->tools[i].name, tool) == 0;
	if (!declared)
		return BROKERD_FORBIDDEN;

	json_object *args_copy = NULL;
	if (json_object_deep_copy(args, &args_copy, NULL) != 0)
		abort();
	json_object *p = json_object_new_object();
	json_object_object_add(p, "name", json_object_new_string(tool));
	json_object_object_add(p, "arguments", args_copy);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", id_copy(id));
	json_object_object_add(o, "method", json_object_new_string("tools/call"));
	json_object_object_add(o, "params", p);
	*out = o;
	return BROKERD_OK;
}

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
		return BROKERD_BAD_REQUEST;
	}
	cleanup_json json_object *up = NULL;
	enum brokerd_result res = brokerd_mcp_request_build(req, srv, &up);
	if (res != BROKERD_OK)
		return res;
	cleanup_free char *up_body = rts_json_dump(up);

	char *key = NULL;
	size_t key_len = 0;
	if (srv->has_api_key) {
		int r = brokerd_key_read(&srv->api_key, b, &call->cancel, &key, &key_len);
		if (r < 0) {
			if (r == -ENOKEY)
				rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "no_key", 0,
					     "no credential available for MCP server %s; call refused", srv->name);
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
		return BROKERD_UPSTREAM_ERROR;
	}
	*answer = rts_json_dump(out);
	return BROKERD_OK;
}
