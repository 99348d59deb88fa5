/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <strings.h>

#include "brokerd/anthropic.h"
#include "brokerd/keys.h"
#include "brokerd/reflect.h"
#include "common/base64.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/schema.h"
#include "common/util.h"

/* ---- effort ---- */

/* Effort values the Messages API takes; "max" (what Pi sends for xhigh on Opus 4.6) ranks
 * with xhigh. */
static const char *const effort_values[] = {"low", "medium", "high", "xhigh", "max", NULL};
static const int effort_rank[] = {RTS_EFFORT_LOW, RTS_EFFORT_MEDIUM, RTS_EFFORT_HIGH, RTS_EFFORT_XHIGH,
				  RTS_EFFORT_XHIGH};

uint32_t brokerd_anthropic_budget_cap(enum rts_effort level)
{
	/* Pi's own budgets per level (low 2048, medium 8192, high 16384); xhigh doubles high. */
	switch (level) {
	case RTS_EFFORT_LOW:
		return 2048;
	case RTS_EFFORT_MEDIUM:
		return 8192;
	case RTS_EFFORT_HIGH:
		return 16384;
	case RTS_EFFORT_XHIGH:
		return 32768;
	}
	return 2048;
}

/* ---- the request tables ---- */

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static const char *const ephemeral_only[] = {"ephemeral", NULL};
static const char *const ttl_values[] = {"5m", "1h", NULL};
static const struct rts_jspec cache_control_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = ephemeral_only},
		{.key = "ttl", .types = RTS_JT_STRING, .one_of = ttl_values},
		{0},
	},
};
#define CACHE_CONTROL {.key = "cache_control", .types = RTS_JT_OBJECT, .object = &cache_control_spec}
#define TYPE_FIELD {.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED}

static const struct rts_jspec text_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		{.key = "text", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		CACHE_CONTROL,
		{0},
	},
	.unknown = "has a member a text block does not allow (citations and the like are refused)",
};

/* Base64 as the API takes it: the standard alphabet, padded to a multiple of four, and not
 * empty. The alphabet is the project's strict check (common/base64.h); the length is
 * checked first only to keep its own, clearer message. */
static bool base64_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	if (n == 0 || n % 4 != 0)
		return rts_jfail(ctx, "must be base64 (a multiple of four characters)");
	if (rts_base64_decoded_len(s, n) == SIZE_MAX)
		return rts_jfail(ctx, "must be base64 (standard alphabet)");
	return true;
}

static const char *const base64_only[] = {"base64", NULL};
static const char *const image_types[] = {"image/png", "image/jpeg", "image/webp", "image/gif", NULL};
static const struct rts_jspec image_source_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = base64_only},
		{.key = "media_type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = image_types},
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = base64_check},
		{0},
	},
	.unknown = "has a member a base64 image source does not allow (url, file_id)",
};

/* Seed: media come as base64 only; URL and file (account) sources are refused, whatever
 * else the source holds. */
static bool source_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *t = rts_json_get_string(v, "type");
	if (t && strcmp(t, "base64") != 0)
		return rts_jfail_code(ctx, "remote_media", "type must be \"base64\": URL and file sources are refused");
	return rts_jctx_object(ctx, v, &image_source_spec, NULL);
}

static const struct rts_jspec image_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		{.key = "source", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .check = source_check},
		CACHE_CONTROL,
		{0},
	},
};

static bool tool_id_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
			return rts_jfail(ctx, "must match [A-Za-z0-9_-]{1,256}");
	return true;
}

static bool tool_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
			return rts_jfail(ctx, "must match [A-Za-z0-9_-]{1,128}");
	return true;
}
#define TOOL_ID(k) {.key = (k), .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 256, .check = tool_id_check}
#define TOOL_NAME {.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 128, .check = tool_name_check}

static const struct rts_jspec tool_use_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		TOOL_ID("id"),
		TOOL_NAME,
		{.key = "input", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .what = "an object"},
		CACHE_CONTROL,
		{0},
	},
};

/* Inside a tool result: text and base64 images only. */
static bool result_part_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *t = rts_json_get_string(v, "type");
	if (t && strcmp(t, "text") == 0)
		return rts_jctx_object(ctx, v, &text_block_spec, NULL);
	if (t && strcmp(t, "image") == 0)
		return rts_jctx_object(ctx, v, &image_block_spec, NULL);
	if (t && (strcmp(t, "document") == 0 || strcmp(t, "search_result") == 0))
		return rts_jfail_code(ctx, "remote_media", "documents and search results are refused");
	return rts_jfail(ctx, "must be a text or image block");
}

static const struct rts_jspec tool_result_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		TOOL_ID("tool_use_id"),
		{.key = "content", .types = RTS_JT_STRING | RTS_JT_ARRAY,
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = result_part_check}},
		{.key = "is_error", .types = RTS_JT_BOOL},
		CACHE_CONTROL,
		{0},
	},
};

static const struct rts_jspec thinking_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		{.key = "thinking", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		{.key = "signature", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		CACHE_CONTROL,
		{0},
	},
};

static const struct rts_jspec redacted_thinking_block_spec = {
	.fields = (const struct rts_jfield[]){
		TYPE_FIELD,
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		CACHE_CONTROL,
		{0},
	},
};

/* Block types a server tool or an account feature uses: refused by name, so the log says
 * which rule refused them. */
static const char *const server_blocks[] = {
	"server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
	"bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use",
	"mcp_tool_result", "container_upload", "tool_search_tool_result", "tool_reference", NULL};

static bool one_of(const char *s, const char *const *list)
{
	for (; s && *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/* A content block of a message, by its role: user text, base64 images and tool results;
 * assistant text, tool calls and thinking. */
static bool block_check(struct rts_jctx *ctx, json_object *v, bool assistant)
{
	const char *t = rts_json_get_string(v, "type");
	if (!t)
		return rts_jfail_at(ctx, "type", "must be a string");
	if (strcmp(t, "text") == 0)
		return rts_jctx_object(ctx, v, &text_block_spec, NULL);
	if (one_of(t, server_blocks))
		return rts_jfail_code(ctx, "native_tool", "is a server tool block: native server tools are refused");
	if (strcmp(t, "document") == 0 || strcmp(t, "search_result") == 0)
		return rts_jfail_code(ctx, "remote_media", "documents and search results are refused");
	if (!assistant && strcmp(t, "image") == 0)
		return rts_jctx_object(ctx, v, &image_block_spec, NULL);
	if (!assistant && strcmp(t, "tool_result") == 0)
		return rts_jctx_object(ctx, v, &tool_result_block_spec, NULL);
	if (assistant && strcmp(t, "tool_use") == 0)
		return rts_jctx_object(ctx, v, &tool_use_block_spec, NULL);
	if (assistant && strcmp(t, "thinking") == 0)
		return rts_jctx_object(ctx, v, &thinking_block_spec, NULL);
	if (assistant && strcmp(t, "redacted_thinking") == 0)
		return rts_jctx_object(ctx, v, &redacted_thinking_block_spec, NULL);
	return rts_jfail(ctx, "is not a content block this role may send");
}

static bool user_block_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return block_check(ctx, v, false);
}

static bool assistant_block_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return block_check(ctx, v, true);
}

static const char *const roles[] = {"user", "assistant", NULL};
static const struct rts_jspec role_spec = {
	.flags = RTS_JO_OPEN,
	.fields = (const struct rts_jfield[]){
		{.key = "role", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = roles, .store = RTS_JS_INDEX},
		{0},
	},
};

#define MESSAGE_SPEC(name, check_fn)                                                                                   \
	static const struct rts_jspec name = {                                                                         \
		.fields = (const struct rts_jfield[]){                                                                 \
			{.key = "role", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = roles},            \
			{.key = "content", .types = RTS_JT_STRING | RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED,            \
			 .items = "content blocks",                                                                    \
			 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = (check_fn)}},             \
			{0},                                                                                           \
		},                                                                                                     \
	}
MESSAGE_SPEC(user_message_spec, user_block_check);
MESSAGE_SPEC(assistant_message_spec, assistant_block_check);

static bool message_check(struct rts_jctx *ctx, json_object *m, void *base)
{
	int role = -1;
	return rts_jctx_object(ctx, m, &role_spec, &role) &&
	       rts_jctx_object(ctx, m, role == 1 ? &assistant_message_spec : &user_message_spec, NULL);
}

static bool system_block_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *t = rts_json_get_string(v, "type");
	if (!t || strcmp(t, "text") != 0)
		return rts_jfail(ctx, "must be a text block");
	return rts_jctx_object(ctx, v, &text_block_spec, NULL);
}

static bool schema_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *why = NULL;
	if (rts_schema_check(v, &why) == 0)
		return true;
	if (strcmp(why, RTS_SCHEMA_WHY_REMOTE) == 0)
		return rts_jfail_code(ctx, "remote_ref", "%s", why);
	return rts_jfail(ctx, "%s", why);
}

static const char *const custom_only[] = {"custom", NULL};
static const struct rts_jspec tool_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "type", .types = RTS_JT_STRING, .one_of = custom_only},
		TOOL_NAME,
		{.key = "description", .types = RTS_JT_STRING},
		{.key = "input_schema", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .check = schema_check,
		 .what = "a JSON schema object"},
		{.key = "eager_input_streaming", .types = RTS_JT_BOOL},
		CACHE_CONTROL,
		{0},
	},
	.unknown = "has a member a custom tool does not allow",
};

/* Only custom tools: a tool with any other type is one of the API's server tools (web
 * search, web fetch, code execution, bash, text editor, computer use, memory, ...), refused
 * before anything else about it is looked at. */
static bool tool_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	json_object *t = rts_json_get(v, "type");
	if (t && !(is_type(t, json_type_string) && strcmp(json_object_get_string(t), "custom") == 0))
		return rts_jfail_code(ctx, "native_tool", "is not a custom tool: native server tools are refused");
	return rts_jctx_object(ctx, v, &tool_spec, NULL);
}


static const char *const choice_types[] = {"auto", "any", "tool", "none", NULL};
static bool tool_choice_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	bool named = strcmp(rts_json_get_string(v, "type"), "tool") == 0;
	if (named != (rts_json_get(v, "name") != NULL))
		return rts_jfail_at(ctx, "name", "is required with type \"tool\" and only then");
	return true;
}
static const struct rts_jspec tool_choice_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = choice_types},
		{.key = "name", .types = RTS_JT_STRING, .min = 1, .max = 128},
		{.key = "disable_parallel_tool_use", .types = RTS_JT_BOOL},
		{0},
	},
	.check = tool_choice_check,
};

static const char *const thinking_types[] = {"enabled", "disabled", "adaptive", NULL};
static const char *const display_values[] = {"summarized", "omitted", NULL};
static bool thinking_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	bool enabled = strcmp(rts_json_get_string(v, "type"), "enabled") == 0;
	if (enabled != (rts_json_get(v, "budget_tokens") != NULL))
		return rts_jfail_at(ctx, "budget_tokens", "is required with type \"enabled\" and only then");
	if (strcmp(rts_json_get_string(v, "type"), "disabled") == 0 && rts_json_get(v, "display"))
		return rts_jfail_at(ctx, "display", "is not allowed with type \"disabled\"");
	return true;
}
static const struct rts_jspec thinking_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = thinking_types},
		{.key = "budget_tokens", .types = RTS_JT_INT, .min = 1024, .max = INT32_MAX},
		{.key = "display", .types = RTS_JT_STRING, .one_of = display_values},
		{0},
	},
	.check = thinking_check,
};

static const struct rts_jspec output_config_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "effort", .types = RTS_JT_STRING, .one_of = effort_values},
		{0},
	},
	.unknown = "has a member other than effort",
};

static const struct rts_jspec metadata_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "user_id", .types = RTS_JT_STRING | RTS_JT_NULL, .max = 256},
		{0},
	},
};

/* Everything else (mcp_servers, container, context_management, service_tier, ...) is an
 * account feature or a way out: refused. json-c reads a null member as a missing one;
 * here a null is a wrong type. */
static const struct rts_jspec request_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "model", .types = RTS_JT_STRING, .max = 256},
		{.key = "max_tokens", .types = RTS_JT_INT, .min = 1, .max = INT32_MAX},
		{.key = "messages", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .min = 1, .items = "messages",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = message_check}},
		{.key = "system", .types = RTS_JT_STRING | RTS_JT_ARRAY, .items = "system blocks",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = system_block_check}},
		{.key = "tools", .types = RTS_JT_ARRAY, .unique = "name", .items = "tools",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = tool_check}},
		{.key = "tool_choice", .types = RTS_JT_OBJECT, .object = &tool_choice_spec},
		{.key = "thinking", .types = RTS_JT_OBJECT, .object = &thinking_spec},
		{.key = "output_config", .types = RTS_JT_OBJECT, .object = &output_config_spec},
		{.key = "temperature", .types = RTS_JT_NUMBER, .min = 0, .max = 1, .dmin = 0.0, .dmax = 1.0},
		{.key = "top_p", .types = RTS_JT_NUMBER, .min = 0, .max = 1, .dmin = 0.0, .dmax = 1.0},
		{.key = "top_k", .types = RTS_JT_INT, .min = 0, .max = INT32_MAX},
		{.key = "stop_sequences", .types = RTS_JT_ARRAY, .max = 64, .items = "strings",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = 1024}},
		{.key = "stream", .types = RTS_JT_BOOL},
		{.key = "metadata", .types = RTS_JT_OBJECT, .object = &metadata_spec},
		{0},
	},
	.unknown = "unknown top-level member",
};
static const struct rts_jfield request_root = RTS_JSPEC_ROOT(&request_spec);

/* ---- the rebuild ---- */

static void add_ref(json_object *dst, json_object *src, const char *key)
{
	json_object *v = rts_json_get(src, key);
	if (v)
		json_object_object_add(dst, key, json_object_get(v));
}

static int effort_index(const char *s)
{
	for (int i = 0; effort_values[i]; i++)
		if (strcmp(effort_values[i], s) == 0)
			return i;
	return -1;
}

/* thinking and output_config as the judged level allows them. */
static void apply_effort(json_object *out, json_object *req, const struct brokerd_anthropic_policy *p,
			 int64_t max_tokens, struct brokerd_anthropic_rebuilt *o, bool *budget_too_small)
{
	json_object *thinking = rts_json_get(req, "thinking");
	json_object *oc = rts_json_get(req, "output_config");
	const char *effort = oc ? rts_json_get_string(oc, "effort") : NULL;
	*budget_too_small = false;

	if (thinking) {
		const char *type = rts_json_get_string(thinking, "type");
		json_object *t = json_object_new_object();
		json_object_object_add(t, "type", json_object_new_string(type));
		if (strcmp(type, "enabled") == 0) {
			int64_t budget = json_object_get_int64(rts_json_get(thinking, "budget_tokens"));
			int64_t cap = brokerd_anthropic_budget_cap(p->judged);
			if (budget > cap) {
				budget = cap;
				o->budget_capped = true;
			}
			/* The API wants the budget below max_tokens. */
			if (!p->count_tokens && budget >= max_tokens)
				budget = max_tokens - 1;
			if (budget < 1024)
				*budget_too_small = true;
			json_object_object_add(t, "budget_tokens", json_object_new_int64(budget));
		}
		add_ref(t, thinking, "display");
		json_object_object_add(out, "thinking", t);
	}

	const char *judged = rts_effort_name(p->judged);
	const char *want = NULL;
	if (effort) {
		int i = effort_index(effort);
		if (i >= 0 && effort_rank[i] > (int)p->judged) {
			want = judged;
			o->effort_capped = true;
		} else {
			want = effort;
		}
	} else if (thinking && strcmp(rts_json_get_string(thinking, "type"), "adaptive") == 0 &&
		   p->judged <= RTS_EFFORT_MEDIUM) {
		/* Seed: adaptive thinking without an effort is capped below the model's default
		 * (high) for low and medium. */
		want = judged;
		o->effort_added = true;
	}
	if (want && !p->count_tokens) {
		json_object *c = json_object_new_object();
		json_object_object_add(c, "effort", json_object_new_string(want));
		json_object_object_add(out, "output_config", c);
	}
}

int brokerd_anthropic_request_build(json_object *req, const struct brokerd_anthropic_policy *p,
				    struct brokerd_anthropic_rebuilt *o, const char **why, const char **rule)
{
	*o = (struct brokerd_anthropic_rebuilt){0};
	*why = NULL;
	*rule = NULL;
	if (brokerd_body_check(req, &request_root, why, rule) < 0) {
		if (!*rule)
			*rule = "shape";
		return -EINVAL;
	}
	json_object *out = json_object_new_object();
	json_object_object_add(out, "model", json_object_new_string(p->model));
	int64_t max_tokens = p->max_output_tokens;
	json_object *asked = rts_json_get(req, "max_tokens");
	if (asked && json_object_get_int64(asked) < max_tokens)
		max_tokens = json_object_get_int64(asked);
	if (!p->count_tokens)
		json_object_object_add(out, "max_tokens", json_object_new_int64(max_tokens));
	add_ref(out, req, "messages");
	add_ref(out, req, "system");
	add_ref(out, req, "tools");
	add_ref(out, req, "tool_choice");
	bool too_small = false;
	apply_effort(out, req, p, max_tokens, o, &too_small);
	if (too_small) {
		json_object_put(out);
		*why = "thinking.budget_tokens would be below 1024 under the output limit";
		*rule = "shape";
		return -EINVAL;
	}
	if (!p->count_tokens) {
		add_ref(out, req, "temperature");
		add_ref(out, req, "top_p");
		add_ref(out, req, "top_k");
		add_ref(out, req, "stop_sequences");
		json_object *stream = rts_json_get(req, "stream");
		o->stream = stream && json_object_get_boolean(stream);
		if (o->stream)
			json_object_object_add(out, "stream", json_object_new_boolean(1));
	}
	o->body = out;
	return 0;
}

/* ---- headers ---- */

bool brokerd_anthropic_beta_allowed(const char *value, size_t len)
{
	static const char *const betas[] = {
		"interleaved-thinking-2025-05-14",
		"fine-grained-tool-streaming-2025-05-14",
		"claude-code-20250219",
		"oauth-2025-04-20",
		"context-1m-2025-08-07",
		"token-efficient-tools-2025-02-19",
		"extended-cache-ttl-2025-04-11",
		"prompt-caching-2024-07-31",
		"output-128k-2025-02-19",
		"effort-2025-11-24",
		NULL,
	};
	for (const char *const *b = betas; *b; b++)
		if (strlen(*b) == len && memcmp(*b, value, len) == 0)
			return true;
	return false;
}

bool brokerd_anthropic_version_ok(const char *v, size_t len)
{
	if (len != 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		bool dash = i == 4 || i == 7;
		if (dash ? v[i] != '-' : !(v[i] >= '0' && v[i] <= '9'))
			return false;
	}
	return true;
}

char *brokerd_anthropic_auth_header(const char *token, bool *oauth)
{
	*oauth = strncmp(token, "sk-ant-api", 10) != 0;
	return *oauth ? rts_xasprintf("Authorization: Bearer %s", token) : rts_xasprintf("x-api-key: %s", token);
}

/* ---- answers ---- */

static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; hay && *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return false;
}

char *brokerd_anthropic_error_answer(long upstream_status, const char *body, size_t len, unsigned *status)
{
	const char *type = "api_error", *message = "upstream error";
	*status = 502;
	switch (upstream_status) {
	case 400: {
		*status = 400;
		type = "invalid_request_error";
		message = "invalid request";
		/* Pi compacts and retries once on a context overflow, which it recognises by
		 * these words; nothing else of the upstream's message is passed on. */
		json_object *doc = NULL;
		const char *ignored = NULL;
		if (body && rts_json_parse(body, len, RTS_JSON_DEPTH_MAX, &doc, &ignored) == 0) {
			const char *m = rts_json_get_string(rts_json_get(doc, "error"), "message");
			if (contains_ci(m, "too long") || contains_ci(m, "context window") ||
			    contains_ci(m, "context length"))
				message = "prompt is too long: the request exceeds the model's context window";
			json_object_put(doc);
		}
		break;
	}
	case 413:
		*status = 413;
		type = "request_too_large";
		message = "request too large";
		break;
	case 429:
		*status = 429;
		type = "rate_limit_error";
		message = "rate limited";
		break;
	case 500:
		*status = 500;
		break;
	case 529:
		*status = 529;
		type = "overloaded_error";
		message = "overloaded";
		break;
	default:
		break;
	}
	json_object *e = json_object_new_object();
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "message", json_object_new_string(message));
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "error", e);
	return rts_json_dump(o);
}

/* ---- answers rebuilt from the Messages API's own members ----
 *
 * Every object the worker gets is built here member by member; anything else the upstream
 * sent (citations, server-tool usage, container, a future member) is dropped. Each string
 * that can carry upstream bytes is also appended, in the order the rebuilt JSON has it, to
 * two running texts the reflection filter reads as one (reflect.h, "a running text"):
 *   - all: every such string and every object key of a tool's input: what the worker gets;
 *   - model: only what the model writes (text, thinking, tool names and input, the stop
 *     sequence), so that an identifier the API assigns between two pieces of the model's
 *     text does not hide a key split around it.
 * Values the filter fixes (member names, "type" values, known stop reasons and service
 * tiers) carry nothing and are not appended: they would only stand between two halves. */

struct piece {
	char *b;
	size_t len, cap;
};

struct texts {
	struct piece all, model;
};

static void piece_add(struct piece *p, const char *s, size_t n)
{
	if (n == 0)
		return;
	if (p->len + n > p->cap) {
		size_t cap = p->cap ? p->cap : 256;
		while (cap < p->len + n)
			cap *= 2;
		char *b = rts_xmalloc(cap);
		if (p->len)
			memcpy(b, p->b, p->len);
		if (p->b)
			explicit_bzero(p->b, p->cap);
		free(p->b);
		p->b = b;
		p->cap = cap;
	}
	memcpy(p->b + p->len, s, n);
	p->len += n;
}

static void texts_reset(struct texts *t)
{
	t->all.len = t->model.len = 0;
}

static void texts_free(struct texts *t)
{
	for (struct piece *p = &t->all; p <= &t->model; p++) {
		if (p->b)
			explicit_bzero(p->b, p->cap);
		free(p->b);
		*p = (struct piece){0};
	}
}

static void texts_add(struct texts *t, const char *s, size_t n, bool model)
{
	piece_add(&t->all, s, n);
	if (model)
		piece_add(&t->model, s, n);
}

#define M_REQ 1u   /* the member must be there */
#define M_NULL 2u  /* null is a value */
#define M_MODEL 4u /* the model writes it */

/* A string member of src copied to dst and appended to the texts. -1: wrong type, or
 * missing when required. */
static int copy_string(json_object *dst, json_object *src, const char *key, unsigned flags, struct texts *t)
{
	json_object *v = NULL;
	/* json-c gives NULL for a null member: ask whether it is there. */
	if (!is_type(src, json_type_object) || !json_object_object_get_ex(src, key, &v))
		return flags & M_REQ ? -1 : 0;
	if (!v && (flags & M_NULL)) {
		json_object_object_add(dst, key, NULL);
		return 0;
	}
	if (!is_type(v, json_type_string))
		return -1;
	const char *sv = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	json_object_object_add(dst, key, json_object_new_string_len(sv, (int)n));
	texts_add(t, sv, n, flags & M_MODEL);
	return 0;
}

/* A count (an integer >= 0, or null with M_NULL) copied. */
static int copy_count(json_object *dst, json_object *src, const char *key, unsigned flags)
{
	json_object *v = NULL;
	/* json-c gives NULL for a null member: ask whether it is there. */
	if (!is_type(src, json_type_object) || !json_object_object_get_ex(src, key, &v))
		return flags & M_REQ ? -1 : 0;
	if (!v && (flags & M_NULL)) {
		json_object_object_add(dst, key, NULL);
		return 0;
	}
	if (!is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return -1;
	json_object_object_add(dst, key, json_object_new_int64(json_object_get_int64(v)));
	return 0;
}

static const char *const stop_reasons[] = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn",
					   "refusal", "model_context_window_exceeded", NULL};
static const char *const service_tiers[] = {"standard", "priority", "batch", NULL};

/* stop_reason: a known one (or null) is copied as a fixed value; one this table does not
 * know yet is still copied, and read like any other upstream string. */
static int copy_stop_reason(json_object *dst, json_object *src, struct texts *t)
{
	json_object *v = rts_json_get(src, "stop_reason");
	if (is_type(v, json_type_string) && one_of(json_object_get_string(v), stop_reasons)) {
		json_object_object_add(dst, "stop_reason", json_object_new_string(json_object_get_string(v)));
		return 0;
	}
	return copy_string(dst, src, "stop_reason", M_NULL, t);
}

/* A copy of a tool's input (any JSON), every key and string appended in the order the copy
 * is serialised (json-c keeps an object's insertion order). */
static json_object *copy_input(json_object *v, struct texts *t)
{
	switch (json_object_get_type(v)) {
	case json_type_string: {
		size_t n = (size_t)json_object_get_string_len(v);
		texts_add(t, json_object_get_string(v), n, true);
		return json_object_new_string_len(json_object_get_string(v), (int)n);
	}
	case json_type_array: {
		json_object *a = json_object_new_array();
		size_t n = json_object_array_length(v);
		for (size_t i = 0; i < n; i++)
			json_object_array_add(a, copy_input(json_object_array_get_idx(v, i), t));
		return a;
	}
	case json_type_object: {
		json_object *o = json_object_new_object();
		json_object_object_foreach(v, k, val)
		{
			texts_add(t, k, strlen(k), true);
			json_object_object_add(o, k, copy_input(val, t));
		}
		return o;
	}
	case json_type_null:
		return NULL;
	default:
		return json_object_get(v); /* numbers and booleans are immutable here */
	}
}

/* usage: the token counts and the service tier; anything else is dropped. */
static json_object *rebuild_usage(json_object *u)
{
	if (!is_type(u, json_type_object))
		return NULL;
	json_object *o = json_object_new_object();
	static const char *const counts[] = {"input_tokens", "output_tokens", "cache_creation_input_tokens",
					     "cache_read_input_tokens"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(counts); i++)
		if (copy_count(o, u, counts[i], M_NULL) < 0) {
			json_object_put(o);
			return NULL;
		}
	json_object *cc = rts_json_get(u, "cache_creation");
	if (is_type(cc, json_type_object)) {
		json_object *c = json_object_new_object();
		if (copy_count(c, cc, "ephemeral_5m_input_tokens", M_NULL) < 0 ||
		    copy_count(c, cc, "ephemeral_1h_input_tokens", M_NULL) < 0) {
			json_object_put(c);
			json_object_put(o);
			return NULL;
		}
		json_object_object_add(o, "cache_creation", c);
	}
	const char *tier = rts_json_get_string(u, "service_tier");
	if (tier && one_of(tier, service_tiers))
		json_object_object_add(o, "service_tier", json_object_new_string(tier));
	return o;
}

/* One content block of a kind the broker lets the model answer with: text, thinking,
 * redacted_thinking, tool_use (a custom tool: the request refuses server tools). A text
 * block's citations are dropped: they only come from documents and search results, which
 * the request refuses. NULL for any other block. */
static json_object *rebuild_block(json_object *b, struct texts *t)
{
	const char *type = rts_json_get_string(b, "type");
	if (!type || !is_type(b, json_type_object))
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	int r = -1;
	if (strcmp(type, "text") == 0) {
		r = copy_string(o, b, "text", M_REQ | M_MODEL, t);
	} else if (strcmp(type, "thinking") == 0) {
		r = copy_string(o, b, "thinking", M_REQ | M_MODEL, t);
		if (r == 0)
			r = copy_string(o, b, "signature", 0, t);
	} else if (strcmp(type, "redacted_thinking") == 0) {
		r = copy_string(o, b, "data", M_REQ, t);
	} else if (strcmp(type, "tool_use") == 0) {
		json_object *input = rts_json_get(b, "input");
		r = copy_string(o, b, "id", M_REQ, t);
		if (r == 0)
			r = copy_string(o, b, "name", M_REQ | M_MODEL, t);
		if (r == 0 && is_type(input, json_type_object))
			json_object_object_add(o, "input", copy_input(input, t));
		else
			r = -1;
	}
	if (r < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* A message object: message_start's (in_stream: its content must be empty, as the API
 * sends it) or a whole answer's. The model before the id, so that nothing stands between
 * the id and the first block's text. NULL when it is not one. */
static json_object *rebuild_message(json_object *m, bool in_stream, struct texts *t)
{
	const char *type = rts_json_get_string(m, "type");
	const char *role = rts_json_get_string(m, "role");
	json_object *content = rts_json_get(m, "content");
	if (!type || strcmp(type, "message") != 0 || !role || strcmp(role, "assistant") != 0 ||
	    !is_type(content, json_type_array) || (in_stream && json_object_array_length(content) > 0))
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("message"));
	json_object_object_add(o, "role", json_object_new_string("assistant"));
	json_object *blocks = json_object_new_array();
	bool ok = copy_string(o, m, "model", 0, t) == 0 && copy_string(o, m, "id", M_REQ, t) == 0;
	json_object_object_add(o, "content", blocks);
	size_t n = json_object_array_length(content);
	for (size_t i = 0; ok && i < n; i++) {
		json_object *b = rebuild_block(json_object_array_get_idx(content, i), t);
		ok = b != NULL;
		if (b)
			json_object_array_add(blocks, b);
	}
	ok = ok && copy_stop_reason(o, m, t) == 0 && copy_string(o, m, "stop_sequence", M_NULL | M_MODEL, t) == 0;
	json_object *usage = rts_json_get(m, "usage");
	if (ok && usage) {
		json_object *u = rebuild_usage(usage);
		ok = u != NULL;
		json_object_object_add(o, "usage", u);
	}
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* Both running texts of a piece fed; true when they hold a key. */
static bool texts_reflected(struct brokerd_keyring *keys, struct brokerd_reflect_run *const runs[2],
			    const struct texts *t, bool final)
{
	return brokerd_keyring_run(keys, runs[0], t->all.b, t->all.len, final) ||
	       brokerd_keyring_run(keys, runs[1], t->model.b, t->model.len, final);
}

char *brokerd_anthropic_answer_rebuild(json_object *ans, bool count_tokens, struct brokerd_keyring *keys,
				       bool *reflected)
{
	*reflected = false;
	if (!is_type(ans, json_type_object))
		return NULL;
	if (count_tokens) {
		json_object *n = rts_json_get(ans, "input_tokens");
		if (!is_type(n, json_type_int) || json_object_get_int64(n) < 0)
			return NULL;
		cleanup_json json_object *o = json_object_new_object();
		json_object_object_add(o, "input_tokens", json_object_new_int64(json_object_get_int64(n)));
		return rts_json_dump(o);
	}
	struct texts t = {0};
	cleanup_json json_object *o = rebuild_message(ans, false, &t);
	if (o && keys) {
		struct brokerd_reflect_run *runs[2] = {brokerd_reflect_run_new(), brokerd_reflect_run_new()};
		*reflected = texts_reflected(keys, runs, &t, true);
		brokerd_reflect_run_free(runs[0]);
		brokerd_reflect_run_free(runs[1]);
	}
	texts_free(&t);
	return o && !*reflected ? rts_json_dump(o) : NULL;
}

/* ---- the stream filter ---- */

struct held {
	char *bytes;
	size_t len;
	uint64_t model_end; /* the model's running text's length when this event ended */
};

struct brokerd_stream_filter {
	struct brokerd_keyring *keys;
	size_t window;
	struct brokerd_reflect_run *runs[2]; /* all, model */
	struct texts piece;		     /* the strings of the event at hand */
	uint64_t model_total;
	struct held *held;
	size_t n_held, held_cap, held_head;
	size_t held_bytes;
	char *out; /* released bytes; out_off of them taken */
	size_t out_len, out_cap, out_off;
	bool stopped, done;
	const char *error_type;
};

size_t brokerd_stream_window(size_t longest_key)
{
	return longest_key ? 6 * longest_key + 8 : 0;
}

struct brokerd_stream_filter *brokerd_stream_filter_new(struct brokerd_keyring *keys, size_t window)
{
	struct brokerd_stream_filter *f = rts_xcalloc(1, sizeof(*f));
	f->keys = keys;
	f->window = window;
	f->runs[0] = brokerd_reflect_run_new();
	f->runs[1] = brokerd_reflect_run_new();
	return f;
}

static void drop_held(struct brokerd_stream_filter *f)
{
	for (size_t i = f->held_head; i < f->n_held; i++)
		free(f->held[i].bytes);
	f->n_held = f->held_head = 0;
	f->held_bytes = 0;
}

void brokerd_stream_filter_free(struct brokerd_stream_filter *f)
{
	if (!f)
		return;
	drop_held(f);
	free(f->held);
	brokerd_reflect_run_free(f->runs[0]);
	brokerd_reflect_run_free(f->runs[1]);
	texts_free(&f->piece);
	free(f->out);
	free(f);
}

static void out_append(struct brokerd_stream_filter *f, const char *b, size_t n)
{
	if (f->out_off > 0 && f->out_off == f->out_len)
		f->out_off = f->out_len = 0;
	if (f->out_len + n > f->out_cap) {
		/* Move what is left to the front before growing. */
		if (f->out_off > 0) {
			memmove(f->out, f->out + f->out_off, f->out_len - f->out_off);
			f->out_len -= f->out_off;
			f->out_off = 0;
		}
		size_t cap = f->out_cap ? f->out_cap : 16384;
		while (cap < f->out_len + n)
			cap *= 2;
		f->out = rts_xrealloc(f->out, cap);
		f->out_cap = cap;
	}
	memcpy(f->out + f->out_len, b, n);
	f->out_len += n;
}

/* Release held events followed by at least a window of the model's text. */
static void release(struct brokerd_stream_filter *f, bool all)
{
	while (f->held_head < f->n_held) {
		struct held *h = &f->held[f->held_head];
		if (!all && h->model_end + f->window > f->model_total)
			break;
		out_append(f, h->bytes, h->len);
		f->held_bytes -= h->len;
		free(h->bytes);
		h->bytes = NULL;
		f->held_head++;
	}
	if (f->held_head == f->n_held)
		f->n_held = f->held_head = 0;
}

static void hold(struct brokerd_stream_filter *f, char *bytes, size_t len)
{
	if (f->n_held == f->held_cap) {
		if (f->held_head > 0) {
			memmove(f->held, f->held + f->held_head, (f->n_held - f->held_head) * sizeof(*f->held));
			f->n_held -= f->held_head;
			f->held_head = 0;
		}
		if (f->n_held == f->held_cap) {
			f->held_cap = f->held_cap ? 2 * f->held_cap : 16;
			f->held = rts_xrealloc(f->held, f->held_cap * sizeof(*f->held));
		}
	}
	f->held[f->n_held++] =
		(struct held){.bytes = bytes, .len = len, .model_end = f->model_total};
	f->held_bytes += len;
}

static const char *const error_types[] = {"invalid_request_error", "authentication_error", "permission_error",
					  "not_found_error", "request_too_large", "rate_limit_error", "api_error",
					  "overloaded_error", NULL};

/* content_block_delta's delta: a text, thinking, signature or input_json delta. */
static json_object *rebuild_delta(json_object *d, struct texts *t)
{
	static const struct {
		const char *type, *member;
		unsigned flags;
	} kinds[] = {{"text_delta", "text", M_REQ | M_MODEL},
		     {"thinking_delta", "thinking", M_REQ | M_MODEL},
		     {"signature_delta", "signature", M_REQ},
		     {"input_json_delta", "partial_json", M_REQ | M_MODEL}};
	const char *type = rts_json_get_string(d, "type");
	for (size_t i = 0; type && i < RTS_ARRAY_SIZE(kinds); i++)
		if (strcmp(type, kinds[i].type) == 0) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "type", json_object_new_string(kinds[i].type));
			if (copy_string(o, d, kinds[i].member, kinds[i].flags, t) < 0) {
				json_object_put(o);
				return NULL;
			}
			return o;
		}
	return NULL;
}

/* The event rebuilt (NULL: not one the Messages API sends), its strings in f->piece. */
static json_object *rebuild_event(struct brokerd_stream_filter *f, const char *name, json_object *ev)
{
	struct texts *t = &f->piece;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(name));
	json_object *part = NULL;
	bool ok = true;
	if (strcmp(name, "message_start") == 0) {
		ok = (part = rebuild_message(rts_json_get(ev, "message"), true, t)) != NULL;
		json_object_object_add(o, "message", part);
	} else if (strcmp(name, "content_block_start") == 0) {
		ok = copy_count(o, ev, "index", M_REQ) == 0 &&
		     (part = rebuild_block(rts_json_get(ev, "content_block"), t)) != NULL;
		json_object_object_add(o, "content_block", part);
	} else if (strcmp(name, "content_block_delta") == 0) {
		ok = copy_count(o, ev, "index", M_REQ) == 0 && (part = rebuild_delta(rts_json_get(ev, "delta"), t)) != NULL;
		json_object_object_add(o, "delta", part);
	} else if (strcmp(name, "content_block_stop") == 0) {
		ok = copy_count(o, ev, "index", M_REQ) == 0;
	} else if (strcmp(name, "message_delta") == 0) {
		json_object *d = rts_json_get(ev, "delta");
		part = json_object_new_object();
		json_object_object_add(o, "delta", part);
		ok = is_type(d, json_type_object) && copy_stop_reason(part, d, t) == 0 &&
		     copy_string(part, d, "stop_sequence", M_NULL | M_MODEL, t) == 0;
		json_object *usage = rts_json_get(ev, "usage");
		if (ok && usage) {
			json_object *u = rebuild_usage(usage);
			ok = u != NULL;
			json_object_object_add(o, "usage", u);
		}
	} else if (strcmp(name, "message_stop") != 0 && strcmp(name, "ping") != 0) {
		ok = false;
	}
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

int brokerd_stream_filter_event(struct brokerd_stream_filter *f, const char *name, const char *data, size_t len)
{
	if (f->done)
		return BROKERD_STREAM_BAD_EVENT;
	cleanup_json json_object *ev = NULL;
	const char *ignored = NULL;
	if (rts_json_parse(data, len, RTS_JSON_DEPTH_MAX, &ev, &ignored) < 0 || !is_type(ev, json_type_object))
		return BROKERD_STREAM_BAD_EVENT;
	const char *type = rts_json_get_string(ev, "type");
	if (!type || strcmp(type, name) != 0)
		return BROKERD_STREAM_BAD_EVENT;
	if (strcmp(name, "error") == 0) {
		const char *t = rts_json_get_string(rts_json_get(ev, "error"), "type");
		for (const char *const *e = error_types; t && *e; e++)
			if (strcmp(*e, t) == 0)
				f->error_type = *e;
		return BROKERD_STREAM_UPSTREAM_ERROR;
	}
	texts_reset(&f->piece);
	cleanup_json json_object *out = rebuild_event(f, name, ev);
	if (!out)
		return BROKERD_STREAM_BAD_EVENT;
	bool stop = strcmp(name, "message_stop") == 0;
	/* The event as sent (raw and decoded), then its strings as part of the running texts;
	 * at message_stop nothing follows, so an escape left open is read as it is. */
	if (f->keys && (brokerd_keyring_reflected(f->keys, data, len, ev) ||
			texts_reflected(f->keys, f->runs, &f->piece, stop)))
		return BROKERD_STREAM_REFLECTED;
	bool has_text = f->piece.model.len > 0;
	f->model_total += f->piece.model.len;

	cleanup_free char *json = rts_json_dump(out);
	char *bytes = rts_xasprintf("event: %s\ndata: %s\n\n", name, json);
	if (!has_text && f->held_head == f->n_held) {
		/* None of the model's text and nothing held before it: nothing of a key the model
		 * spells out can be in it, and nothing is waiting to go first. */
		out_append(f, bytes, strlen(bytes));
		free(bytes);
		f->stopped = f->stopped || stop;
		return 0;
	}
	hold(f, bytes, strlen(bytes));
	if (stop) {
		f->stopped = true;
		release(f, true);
	} else {
		release(f, false);
	}
	return 0;
}

int brokerd_stream_filter_end(struct brokerd_stream_filter *f)
{
	if (f->done)
		return 0;
	/* An escape a stream cut off mid-way is read as the plain bytes it is. */
	static const struct texts none = {{0}, {0}};
	if (f->keys && texts_reflected(f->keys, f->runs, &none, true))
		return BROKERD_STREAM_REFLECTED;
	release(f, true);
	f->done = true;
	return 0;
}

void brokerd_stream_filter_fail(struct brokerd_stream_filter *f)
{
	if (f->done)
		return;
	drop_held(f);
	f->done = true;
	char *ev = rts_xasprintf("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":"
				 "\"upstream error\"}}\n\n",
				 f->error_type ? f->error_type : "api_error");
	out_append(f, ev, strlen(ev));
	free(ev);
}

const char *brokerd_stream_filter_out(struct brokerd_stream_filter *f, size_t *len)
{
	*len = f->out_len - f->out_off;
	return f->out ? f->out + f->out_off : "";
}

void brokerd_stream_filter_take(struct brokerd_stream_filter *f, size_t n)
{
	if (n > f->out_len - f->out_off)
		n = f->out_len - f->out_off;
	f->out_off += n;
}

size_t brokerd_stream_filter_pending(const struct brokerd_stream_filter *f)
{
	return f->out_len - f->out_off + f->held_bytes;
}

bool brokerd_stream_filter_stopped(const struct brokerd_stream_filter *f)
{
	return f->stopped;
}

const char *brokerd_stream_filter_error_type(const struct brokerd_stream_filter *f)
{
	return f->error_type;
}
