/* SPDX-License-Identifier: Apache-2.0 */
/* The profile's MCP servers and host tools on a rich channel (DESIGN.md 8.5; seed, "Pi
 * isolation and continuity": MCP initialization, the initialized notification, ping, tool
 * listing and explicitly listed tool calls are supported, other methods and batches
 * refused; "Private tool exchanges in Pi mode": host tools may return privateTo). */
#include "config.h"

#include "brokerd/keys.h"
#include "brokerd/mcp.h"
#include "brokerd/rich.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/strictjson.h"
#include "common/util.h"

/* ---- MCP ---- */

/* MCP protocol versions the local answers speak; a client asking for another gets the
 * newest (the spec's negotiation). */
static const char *const mcp_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

static const char *const version_2_0[] = {"2.0", NULL};
static const struct rts_jspec rpc_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "jsonrpc", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = version_2_0},
		{.key = "id", .types = RTS_JT_STRING | RTS_JT_INT, .min = INT64_MIN, .max = INT64_MAX, .what = "a string or an integer"},
		{.key = "method", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 128},
		{.key = "params", .types = RTS_JT_OBJECT},
		{0},
	},
};
static const struct rts_jfield rpc_root = RTS_JSPEC_ROOT(&rpc_spec);

static void answer_json(struct rich_answer *a, json_object *o)
{
	a->status = 200;
	a->body = rts_json_dump(o);
	a->len = strlen(a->body);
	a->content_type = "application/json";
}

static json_object *rpc_result(json_object *id, json_object *result)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", json_object_get(id));
	json_object_object_add(o, "result", result);
	return o;
}

static json_object *initialize_result(json_object *params)
{
	const char *asked = rts_json_get_string(params, "protocolVersion");
	const char *version = mcp_versions[0];
	for (const char *const *v = mcp_versions; asked && *v; v++)
		if (strcmp(*v, asked) == 0)
			version = *v;
	json_object *caps = json_object_new_object();
	json_object *tools = json_object_new_object();
	json_object_object_add(tools, "listChanged", json_object_new_boolean(0));
	json_object_object_add(caps, "tools", tools);
	json_object *info = json_object_new_object();
	json_object_object_add(info, "name", json_object_new_string("roundtable-sandbox-broker"));
	json_object_object_add(info, "version", json_object_new_string(PACKAGE_VERSION));
	json_object *r = json_object_new_object();
	json_object_object_add(r, "protocolVersion", json_object_new_string(version));
	json_object_object_add(r, "capabilities", caps);
	json_object_object_add(r, "serverInfo", info);
	return r;
}

/* The server's tools as the operator declared them: the allow-list is the list. */
static json_object *tools_list_result(const struct rts_mcp_server *srv)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < srv->n_tools; i++) {
		json_object *t = json_object_new_object();
		json_object_object_add(t, "name", json_object_new_string(srv->tools[i].name));
		json_object_object_add(t, "description", json_object_new_string(srv->tools[i].description));
		json_object_object_add(t, "inputSchema", json_object_get(srv->tools[i].parameters));
		json_object_array_add(a, t);
	}
	json_object *r = json_object_new_object();
	json_object_object_add(r, "tools", a);
	return r;
}

void brokerd_rich_mcp(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	const struct rts_mcp_server *srv = &ch->cfg->mcp[c->route.index];
	const char *why = NULL;
	cleanup_json json_object *doc = NULL;
	struct rts_jerr e;
	if (brokerd_body_parse(c->body, c->body_len, &doc, &why) < 0 ||
	    rts_jspec_validate(doc, &rpc_root, NULL, 0, &e) < 0) {
		/* Batches are arrays: refused here like any other shape. */
		log_debug("rich channel %.12s: /mcp/%s body refused", ch->hash, srv->name);
		c->rule = doc ? "mcp_request" : "body_json";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	const char *method = rts_json_get_string(doc, "method");
	json_object *id = rts_json_get(doc, "id");
	json_object *params = rts_json_get(doc, "params");
	if (strcmp(method, "notifications/initialized") == 0 && !id) {
		c->rule = "mcp_initialized";
		a->status = 202;
		return;
	}
	if (!id) {
		/* Any other notification (cancelled, roots/list_changed, ...). */
		c->rule = "mcp_method";
		brokerd_rich_answer_error(a, BROKERD_FORBIDDEN);
		return;
	}
	if (strcmp(method, "initialize") == 0) {
		c->rule = "mcp_initialize";
		cleanup_json json_object *o = rpc_result(id, initialize_result(params));
		answer_json(a, o);
		return;
	}
	if (strcmp(method, "ping") == 0) {
		c->rule = "mcp_ping";
		cleanup_json json_object *o = rpc_result(id, json_object_new_object());
		answer_json(a, o);
		return;
	}
	if (strcmp(method, "tools/list") == 0) {
		c->rule = "mcp_tools_list";
		cleanup_json json_object *o = rpc_result(id, tools_list_result(srv));
		answer_json(a, o);
		return;
	}
	if (strcmp(method, "tools/call") != 0) {
		log_debug("rich channel %.12s: /mcp/%s method refused", ch->hash, srv->name);
		c->rule = "mcp_method";
		brokerd_rich_answer_error(a, BROKERD_FORBIDDEN);
		return;
	}
	/* Seed: the start-up scope is metadata only, never tool calls. */
	if (!c->turn) {
		rts_log_turn(LOG_DEBUG, NULL, ch->hash, "refused", 0,
			     "rich /mcp/%s tools/call refused: the start-up scope is metadata only", srv->name);
		c->rule = "startup_scope_metadata";
		brokerd_rich_answer_error(a, BROKERD_FORBIDDEN);
		return;
	}
	struct brokerd_call call = brokerd_rich_call(c);
	char *answer = NULL;
	enum brokerd_result r = brokerd_mcp_handle(&call, &answer);
	c->rule = call.rule ? call.rule : r == BROKERD_OK ? "mcp_tool_declared" : NULL;
	c->forwarded = call.forwarded;
	if (r != BROKERD_OK) {
		free(answer);
		brokerd_rich_answer_error(a, r);
		return;
	}
	a->status = 200;
	a->body = answer;
	a->len = strlen(answer);
	a->content_type = "application/json";
}

/* ---- host tools ---- */

/* A tool's output that tags itself private: exactly {"result": TEXT, "privateTo": ID}. */
static bool private_answer(const char *out, size_t len, json_object **doc)
{
	*doc = NULL;
	const char *ignored = NULL;
	if (rts_json_parse_strict(out, len, RTS_JSON_DEPTH_MAX, doc, &ignored) < 0)
		return false;
	if (json_object_is_type(*doc, json_type_object) && json_object_object_length(*doc) == 2 &&
	    json_object_is_type(rts_json_get(*doc, "result"), json_type_string) && rts_json_get(*doc, "privateTo"))
		return true;
	json_object_put(*doc);
	*doc = NULL;
	return false;
}

/* A principal id: 1..256 bytes of UTF-8 without control characters (rich-design.md). */
static bool principal_ok(json_object *p)
{
	if (!p || !json_object_is_type(p, json_type_string))
		return false;
	const char *s = json_object_get_string(p);
	size_t n = (size_t)json_object_get_string_len(p);
	if (n == 0 || n > RTS_SPEAKER_FIELD_MAX || !rts_utf8_valid(s, n))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

void brokerd_rich_tool(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn;
	const char *name = c->route.name;
	struct brokerd_call call = brokerd_rich_call(c);
	char *answer = NULL;
	rich_conn_quiet(c, true);
	enum brokerd_result r = brokerd_tool_handle(&call, &answer);
	rich_conn_quiet(c, false);
	c->rule = call.rule;
	c->forwarded = call.forwarded;
	if (r != BROKERD_OK) {
		free(answer);
		brokerd_rich_answer_error(a, r);
		return;
	}
	/* tool.c answered {"result": STDOUT}; a rich tool may tag its output private. */
	cleanup_free char *text = answer;
	cleanup_json json_object *wrapped = NULL;
	const char *ignored = NULL;
	json_object *out = NULL;
	if (rts_json_parse(text, strlen(text), RTS_JSON_DEPTH_MAX, &wrapped, &ignored) == 0)
		out = rts_json_get(wrapped, "result");
	cleanup_json json_object *priv = NULL;
	if (!out || !private_answer(json_object_get_string(out), (size_t)json_object_get_string_len(out), &priv)) {
		a->status = 200;
		a->body = steal_pointer(&text);
		a->len = strlen(a->body);
		a->content_type = "application/json";
		return;
	}
	json_object *to = rts_json_get(priv, "privateTo");
	if (!principal_ok(to)) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, ch->hash, "upstream_error", 0,
			     "host tool %s returned privateTo that is not a principal id (1 to 256 bytes of text)", name);
		c->rule = "private_to";
		brokerd_rich_answer_error(a, BROKERD_UPSTREAM_ERROR);
		return;
	}
	pthread_mutex_lock(&ch->lock);
	t->private_tool = true;
	t->require_caps = true;
	bool enough = brokerd_rich_caps_enough(ch->caps);
	if (!enough) {
		/* Seed: the payload is not sent; the whole turn fails and later model calls are
		 * blocked, even if an old worker would catch the tool error. */
		rts_log_turn(LOG_ERR, t->b.turn_id, ch->hash, "capabilities", 0,
			     "rich turn failed: host tool %s returned privateTo, and the worker did not declare both the "
			     "privateTo and readerRecords capabilities; rebuild the image %s with the installed "
			     "roundtable-sandbox (keeping the same tag is no proof that it was rebuilt)",
			     name, brokerd_rich_image(ch));
		brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR,
					   "a host tool returned privateTo to a worker without the capabilities", -1);
	}
	pthread_mutex_unlock(&ch->lock);
	if (!enough) {
		c->rule = "capabilities";
		brokerd_rich_answer_error(a, BROKERD_UNAVAILABLE);
		return;
	}
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "result", json_object_get(rts_json_get(priv, "result")));
	json_object_object_add(o, "privateTo", json_object_get(to));
	c->rule = "tool_private_to";
	answer_json(a, o);
}
