/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>

#include "brokerd/brokerd.h"
#include "brokerd/keys.h"
#include "brokerd/model.h"
#include "common/schema.h"
#include "common/strictjson.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/util.h"

#define FAIL(msg)                                                                                                      \
	do {                                                                                                           \
		*why = (msg);                                                                                          \
		return false;                                                                                          \
	} while (0)

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static json_object *dup_string(json_object *s)
{
	return json_object_new_string_len(json_object_get_string(s), json_object_get_string_len(s));
}

/* ---- request: what is accepted ---- */

/* OpenAI function names: [A-Za-z0-9_-]{1,64} (the length is the field's bound). */
static bool function_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '-'))
			return rts_jfail(ctx, "must match [A-Za-z0-9_-]{1,64}");
	return true;
}

static bool schema_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *why = NULL;
	return rts_schema_check(v, &why) == 0 || rts_jfail(ctx, "%s", why);
}

static const char *const function_only[] = {"function", NULL};
#define FUNCTION_TYPE_FIELD {.key = "type", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = function_only}
#define FUNCTION_NAME_FIELD                                                                                            \
	{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_FUNCTION_NAME_MAX,      \
	 .check = function_name_check}
#define CALL_ID_FIELD(k)                                                                                               \
	{.key = (k), .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_MODEL_CALL_ID_MAX}

static const struct rts_jspec tool_call_spec = {
	.fields = (const struct rts_jfield[]){
		CALL_ID_FIELD("id"),
		FUNCTION_TYPE_FIELD,
		{.key = "function", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED,
		 .object = &(const struct rts_jspec){
			 .fields = (const struct rts_jfield[]){
				 FUNCTION_NAME_FIELD,
				 {.key = "arguments", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
				 {0},
			 },
		 }},
		{0},
	},
};

/* The roles, and what each message may hold (seed: only system/user/assistant/tool roles
 * with string content and function tool calls; no content parts, so no image_url,
 * input_audio, file or file ids). */
enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };
static const char *const roles[] = {[ROLE_SYSTEM] = "system", [ROLE_USER] = "user", [ROLE_ASSISTANT] = "assistant",
				    [ROLE_TOOL] = "tool", NULL};
#define ROLE_FIELD                                                                                                     \
	{.key = "role", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = roles, .store = RTS_JS_INDEX}
#define MESSAGE_UNKNOWN "has a member its role does not allow"

static const struct rts_jspec role_spec = {
	.flags = RTS_JO_OPEN,
	.fields = (const struct rts_jfield[]){ROLE_FIELD, {0}},
};

static const struct rts_jspec plain_spec = {
	.fields = (const struct rts_jfield[]){
		ROLE_FIELD,
		{.key = "content", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		{0},
	},
	.unknown = MESSAGE_UNKNOWN,
};

/* Content may be null or absent only beside tool calls. */
static bool assistant_check(struct rts_jctx *ctx, json_object *m, void *base)
{
	if (rts_json_get(m, "tool_calls") || json_object_is_type(rts_json_get(m, "content"), json_type_string))
		return true;
	return rts_jfail_at(ctx, "content", "must be a string (null only beside tool_calls)");
}

static const struct rts_jspec assistant_spec = {
	.fields = (const struct rts_jfield[]){
		ROLE_FIELD,
		{.key = "content", .types = RTS_JT_STRING | RTS_JT_NULL},
		/* A tool message names the call it answers by id: ids must be unambiguous. */
		{.key = "tool_calls", .types = RTS_JT_ARRAY, .min = 1, .max = RTS_MODEL_TOOL_CALLS_MAX, .unique = "id",
		 .items = "tool calls",
		 	.each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &tool_call_spec}},
		{0},
	},
	.unknown = MESSAGE_UNKNOWN,
	.check = assistant_check,
};

static const struct rts_jspec tool_message_spec = {
	.fields = (const struct rts_jfield[]){
		ROLE_FIELD,
		{.key = "content", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED},
		CALL_ID_FIELD("tool_call_id"),
		{0},
	},
	.unknown = MESSAGE_UNKNOWN,
};

static const struct rts_jspec *const message_specs[] = {
	[ROLE_SYSTEM] = &plain_spec,
	[ROLE_USER] = &plain_spec,
	[ROLE_ASSISTANT] = &assistant_spec,
	[ROLE_TOOL] = &tool_message_spec,
};

/* The role decides which members a message may have. */
static bool message_check(struct rts_jctx *ctx, json_object *m, void *base)
{
	int role = -1;
	return rts_jctx_object(ctx, m, &role_spec, &role) && rts_jctx_object(ctx, m, message_specs[role], NULL);
}

/* Every tool message answers a call of the assistant message before it (other tool
 * messages of the same group may sit in between), and each call is answered at most
 * once. The messages are valid one by one. */
static bool tool_order_check(struct rts_jctx *ctx, json_object *messages, void *base)
{
	json_object *calls = NULL; /* of the assistant message tool messages may answer now */
	bool answered[RTS_MODEL_TOOL_CALLS_MAX] = {false};
	char at[32];
	for (size_t i = 0, n = json_object_array_length(messages); i < n; i++) {
		json_object *m = json_object_array_get_idx(messages, i);
		const char *role = rts_json_get_string(m, "role");
		if (strcmp(role, "tool") != 0) {
			calls = strcmp(role, "assistant") == 0 ? rts_json_get(m, "tool_calls") : NULL;
			memset(answered, 0, sizeof(answered));
			continue;
		}
		snprintf(at, sizeof(at), "[%zu]", i);
		if (!calls)
			return rts_jfail_at(ctx, at, "a tool message must follow an assistant message with tool calls");
		const char *id = rts_json_get_string(m, "tool_call_id");
		size_t k = 0, n_calls = json_object_array_length(calls);
		while (k < n_calls && strcmp(rts_json_get_string(json_object_array_get_idx(calls, k), "id"), id) != 0)
			k++;
		if (k == n_calls)
			return rts_jfail_at(ctx, at,
					    "a tool message answers no call of the assistant message before it");
		if (answered[k])
			return rts_jfail_at(ctx, at, "a tool call is answered twice");
		answered[k] = true;
	}
	return true;
}

static const struct rts_jspec tool_spec = {
	.fields = (const struct rts_jfield[]){
		/* Native provider tools (web search, code interpreter, ...) are refused. */
		FUNCTION_TYPE_FIELD,
		{.key = "function", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED,
		 .object = &(const struct rts_jspec){
			 .fields = (const struct rts_jfield[]){
				 FUNCTION_NAME_FIELD,
				 {.key = "description", .types = RTS_JT_STRING},
				 {.key = "parameters", .types = RTS_JT_OBJECT, .check = schema_check,
				  .what = "a schema object"},
				 {0},
			 },
		 }},
		{0},
	},
};

static const char *const tool_choices[] = {"auto", "none", NULL};

/* Only these members: n, stream, model, logprobs, temperature, user, ... are all refused.
 * json-c reads a null member as a missing one; here a null is a wrong type. */
static const struct rts_jspec request_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "messages", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .min = 1,
		 .max = RTS_MODEL_MESSAGES_MAX, .items = "messages", .check = tool_order_check,
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = message_check}},
		{.key = "tools", .types = RTS_JT_ARRAY, .max = RTS_MODEL_TOOLS_MAX, .unique = "function.name",
		 .items = "tools", .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &tool_spec}},
		{.key = "max_tokens", .types = RTS_JT_INT, .min = 1, .max = INT32_MAX},
		{.key = "tool_choice", .types = RTS_JT_STRING, .one_of = tool_choices},
		{0},
	},
	.unknown = "unknown top-level member",
};
static const struct rts_jfield request_root = RTS_JSPEC_ROOT(&request_spec);

/* ---- request: the upstream body, from a validated one ---- */

static json_object *copy_tool_call(json_object *tc)
{
	json_object *fn = rts_json_get(tc, "function");
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", dup_string(rts_json_get(fn, "name")));
	json_object_object_add(f, "arguments", dup_string(rts_json_get(fn, "arguments")));
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", dup_string(rts_json_get(tc, "id")));
	json_object_object_add(o, "type", json_object_new_string("function"));
	json_object_object_add(o, "function", f);
	return o;
}

static json_object *copy_message(json_object *m)
{
	json_object *content = rts_json_get(m, "content");
	json_object *calls = rts_json_get(m, "tool_calls");
	json_object *id = rts_json_get(m, "tool_call_id");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "role", dup_string(rts_json_get(m, "role")));
	json_object_object_add(o, "content", content ? dup_string(content) : NULL);
	if (calls) {
		size_t n = json_object_array_length(calls);
		json_object *arr = json_object_new_array_ext((int)n);
		for (size_t i = 0; i < n; i++)
			json_object_array_add(arr, copy_tool_call(json_object_array_get_idx(calls, i)));
		json_object_object_add(o, "tool_calls", arr);
	}
	if (id)
		json_object_object_add(o, "tool_call_id", dup_string(id));
	return o;
}

static json_object *copy_tool(json_object *t)
{
	json_object *fn = rts_json_get(t, "function");
	json_object *desc = rts_json_get(fn, "description");
	json_object *params = rts_json_get(fn, "parameters");
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", dup_string(rts_json_get(fn, "name")));
	if (desc)
		json_object_object_add(f, "description", dup_string(desc));
	if (params) {
		json_object *copy = NULL;
		if (json_object_deep_copy(params, &copy, NULL) != 0)
			abort();
		json_object_object_add(f, "parameters", copy);
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("function"));
	json_object_object_add(o, "function", f);
	return o;
}

static json_object *build(json_object *req, const char *model, uint32_t max_output_tokens)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(model));
	json_object *messages = rts_json_get(req, "messages");
	size_t n = json_object_array_length(messages);
	json_object *msgs = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(msgs, copy_message(json_object_array_get_idx(messages, i)));
	json_object_object_add(o, "messages", msgs);

	json_object *tools = rts_json_get(req, "tools");
	size_t n_tools = tools ? json_object_array_length(tools) : 0;
	if (n_tools > 0) {
		json_object *arr = json_object_new_array_ext((int)n_tools);
		for (size_t i = 0; i < n_tools; i++)
			json_object_array_add(arr, copy_tool(json_object_array_get_idx(tools, i)));
		json_object_object_add(o, "tools", arr);
		json_object *choice = rts_json_get(req, "tool_choice");
		if (choice)
			json_object_object_add(o, "tool_choice", dup_string(choice));
	}
	json_object_object_add(o, "stream", json_object_new_boolean(0));
	int64_t max_tokens = max_output_tokens;
	json_object *asked = rts_json_get(req, "max_tokens");
	if (asked && json_object_get_int64(asked) < max_tokens)
		max_tokens = json_object_get_int64(asked);
	json_object_object_add(o, "max_tokens", json_object_new_int64(max_tokens));
	return o;
}

/* Validate req and build the upstream body; on refusal e says why and where. */
static int request_build(json_object *req, const char *model, uint32_t max_output_tokens, json_object **out,
			 struct rts_jerr *e)
{
	*out = NULL;
	if (rts_jspec_validate(req, &request_root, NULL, 0, e) < 0)
		return -EINVAL;
	*out = build(req, model, max_output_tokens);
	return 0;
}

int brokerd_model_request_build(json_object *req, const char *model, uint32_t max_output_tokens, json_object **out,
				const char **why)
{
	/* One per thread: libmicrohttpd runs a thread per connection. */
	static __thread struct rts_jerr e;
	*why = NULL;
	int r = request_build(req, model, max_output_tokens, out, &e);
	if (r < 0)
		*why = e.text;
	return r;
}

/* ---- answer ---- */

/* Servers that speak Chat Completions differ in the details of an answer (vLLM, llama.cpp,
 * Ollama, LM Studio, LiteLLM, TGI, OpenRouter, Mistral, Gemini): the rebuild accepts what
 * they send and writes the one shape model.h describes, so the worker never sees a member
 * it does not know. */

/* o is a string of exactly the bytes of s (no embedded NUL tricks). */
static bool string_is(json_object *o, const char *s)
{
	return is_type(o, json_type_string) && (size_t)json_object_get_string_len(o) == strlen(s) &&
	       memcmp(json_object_get_string(o), s, strlen(s)) == 0;
}

/* The message's text: a string as is; null or absent as no text (*out NULL); an array of
 * content parts (Mistral's reasoning models) as its "text" parts joined, every other kind
 * of part ("thinking", "refusal", ...) dropped. Anything else is malformed. */
static bool rebuild_content(json_object *content, json_object **out, const char **why)
{
	*out = NULL;
	if (!content)
		return true;
	if (is_type(content, json_type_string)) {
		*out = dup_string(content);
		return true;
	}
	if (!is_type(content, json_type_array))
		FAIL("message content is not a string, null or an array of parts");
	size_t n = json_object_array_length(content), len = 0, texts = 0;
	for (size_t i = 0; i < n; i++) {
		json_object *part = json_object_array_get_idx(content, i);
		if (!is_type(rts_json_get(part, "type"), json_type_string))
			FAIL("a content part is not an object with a type");
		if (!string_is(rts_json_get(part, "type"), "text"))
			continue;
		json_object *text = rts_json_get(part, "text");
		if (!is_type(text, json_type_string))
			FAIL("a text content part has no text string");
		len += (size_t)json_object_get_string_len(text);
		texts++;
	}
	if (texts == 0)
		return true;
	/* The answer is at most RTS_BROKER_ANSWER_MAX bytes, so len fits an int. */
	cleanup_free char *buf = rts_xmalloc(len + 1);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		json_object *part = json_object_array_get_idx(content, i);
		if (!string_is(rts_json_get(part, "type"), "text"))
			continue;
		json_object *text = rts_json_get(part, "text");
		size_t l = (size_t)json_object_get_string_len(text);
		memcpy(buf + at, json_object_get_string(text), l);
		at += l;
	}
	*out = json_object_new_string_len(buf, (int)len);
	return true;
}

/* One tool call as {"id","type":"function","function":{"name","arguments"}}. Beside the
 * OpenAI shape it accepts: no id or a null one (sent as ""; the worker renames empty,
 * malformed and repeated ids together with their results), no type, and arguments as a
 * JSON object (TGI, newer llama.cpp), re-serialised to JSON text, or none at all ("{}").
 * Names and ids are passed as any string: the worker checks them. */
static bool rebuild_tool_call(json_object *tc, json_object **out, const char **why)
{
	if (!is_type(tc, json_type_object))
		FAIL("a tool call is not an object");
	json_object *id = rts_json_get(tc, "id");
	json_object *type = rts_json_get(tc, "type");
	json_object *fn = rts_json_get(tc, "function");
	if (id && !is_type(id, json_type_string))
		FAIL("a tool call id is not a string");
	if (type && !string_is(type, "function"))
		FAIL("a tool call type is not \"function\"");
	if (!is_type(fn, json_type_object))
		FAIL("a tool call has no function object");
	json_object *name = rts_json_get(fn, "name");
	json_object *args = rts_json_get(fn, "arguments");
	if (!is_type(name, json_type_string))
		FAIL("a tool call name is not a string");
	json_object *args_text = NULL;
	if (!args) {
		args_text = json_object_new_string("{}");
	} else if (is_type(args, json_type_string)) {
		args_text = dup_string(args);
	} else if (is_type(args, json_type_object)) {
		cleanup_free char *text = rts_json_dump(args);
		args_text = json_object_new_string(text);
	} else {
		FAIL("tool call arguments are neither JSON text nor an object");
	}
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", dup_string(name));
	json_object_object_add(f, "arguments", args_text);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", id ? dup_string(id) : json_object_new_string(""));
	json_object_object_add(o, "type", json_object_new_string("function"));
	json_object_object_add(o, "function", f);
	*out = o;
	return true;
}

static bool rebuild_tool_calls(json_object *calls, json_object *msg, const char **why)
{
	if (!calls)
		return true;
	if (!is_type(calls, json_type_array))
		FAIL("tool_calls is not an array");
	size_t n = json_object_array_length(calls);
	if (n == 0)
		return true;
	if (n > RTS_MODEL_TOOL_CALLS_MAX)
		FAIL("too many tool calls");
	json_object *arr = json_object_new_array_ext((int)n);
	json_object_object_add(msg, "tool_calls", arr);
	for (size_t i = 0; i < n; i++) {
		json_object *tc = NULL;
		if (!rebuild_tool_call(json_object_array_get_idx(calls, i), &tc, why))
			return false;
		json_object_array_add(arr, tc);
	}
	return true;
}

/* What the message holds decides: "tool_calls" when it has tool calls; otherwise "length"
 * (also for "max_tokens" and "model_length") or "content_filter" when the upstream says
 * so; otherwise "stop", whatever the upstream sent ("stop" beside tool calls, "tool_calls"
 * without any, null, "eos", "eos_token", "end_turn", ...). */
static const char *finish_reason(json_object *fr, bool has_calls)
{
	if (has_calls)
		return "tool_calls";
	if (string_is(fr, "length") || string_is(fr, "max_tokens") || string_is(fr, "model_length"))
		return "length";
	if (string_is(fr, "content_filter"))
		return "content_filter";
	return "stop";
}

static bool rebuild(json_object *ans, json_object **out, const char **why)
{
	static const char *const usage_counts[] = {"prompt_tokens", "completion_tokens", "total_tokens", NULL};
	if (!is_type(ans, json_type_object))
		FAIL("answer is not an object");
	if (rts_json_get(ans, "error"))
		FAIL("answer carries an error");
	json_object *choices = rts_json_get(ans, "choices");
	if (!is_type(choices, json_type_array) || json_object_array_length(choices) == 0)
		FAIL("answer has no choices");
	json_object *c0 = json_object_array_get_idx(choices, 0);
	json_object *m = rts_json_get(c0, "message");
	if (!is_type(m, json_type_object))
		FAIL("first choice has no message object");
	json_object *role = rts_json_get(m, "role");
	if (role && !string_is(role, "assistant"))
		FAIL("message role is not assistant");
	json_object *fr = rts_json_get(c0, "finish_reason");
	if (fr && !is_type(fr, json_type_string))
		FAIL("finish_reason is not a string");

	cleanup_json json_object *msg = json_object_new_object();
	json_object *content = NULL;
	if (!rebuild_content(rts_json_get(m, "content"), &content, why))
		return false;
	json_object_object_add(msg, "role", json_object_new_string("assistant"));
	json_object_object_add(msg, "content", content);
	if (!rebuild_tool_calls(rts_json_get(m, "tool_calls"), msg, why))
		return false;
	bool has_calls = rts_json_get(msg, "tool_calls") != NULL;

	json_object *choice = json_object_new_object();
	json_object_object_add(choice, "index", json_object_new_int(0));
	json_object_object_add(choice, "message", steal_pointer(&msg));
	json_object_object_add(choice, "finish_reason", json_object_new_string(finish_reason(fr, has_calls)));
	cleanup_json json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array_ext(1);
	json_object_array_add(arr, choice);
	json_object_object_add(o, "choices", arr);

	/* Only the three counters; details, costs and timings some servers add are dropped,
	 * and so is a usage that is missing or not an object (nothing downstream needs it). */
	json_object *usage = rts_json_get(ans, "usage");
	if (is_type(usage, json_type_object)) {
		json_object *u = json_object_new_object();
		for (const char *const *k = usage_counts; *k; k++) {
			json_object *v = rts_json_get(usage, *k);
			if (!is_type(v, json_type_int))
				continue;
			errno = 0;
			int64_t count = json_object_get_int64(v);
			if (errno == 0 && count >= 0)
				json_object_object_add(u, *k, json_object_new_int64(count));
		}
		json_object_object_add(o, "usage", u);
	}

	/* Re-serialised arguments and escapes json-c writes out in full can make the rebuilt
	 * answer longer than the upstream's; the worker reads at most RTS_BROKER_ANSWER_MAX
	 * bytes. */
	size_t len = 0;
	json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (len > RTS_BROKER_ANSWER_MAX)
		FAIL("rebuilt answer is larger than the worker reads");
	*out = steal_pointer(&o);
	return true;
}

int brokerd_model_answer_rebuild(json_object *ans, json_object **out, const char **why)
{
	*out = NULL;
	*why = NULL;
	return rebuild(ans, out, why) ? 0 : -EINVAL;
}

/* ---- the route ---- */

enum brokerd_result brokerd_model_handle(struct brokerd_call *call, char **answer)
{
	const struct rts_config *cfg = call->cfg;
	const char *why = NULL;
	cleanup_json json_object *req = NULL;
	if (brokerd_body_parse(call->body, call->body_len, &req, &why) < 0) {
		log_debug("turn %s: /model body refused: %s", call->binding->turn_id, why);
		call->rule = "body_json";
		return BROKERD_BAD_REQUEST;
	}
	cleanup_json json_object *up = NULL;
	struct rts_jerr e;
	if (request_build(req, cfg->model, cfg->max_output_tokens, &up, &e) < 0) {
		log_debug("turn %s: /model body refused: %s (at %s)", call->binding->turn_id, e.text,
			  e.path[0] ? e.path : "the body");
		call->rule = "model_request";
		return BROKERD_BAD_REQUEST;
	}
	cleanup_free char *up_body = rts_json_dump(up);

	char *key = NULL;
	size_t key_len = 0;
	int r = brokerd_key_read(&cfg->api_key, call->binding, &call->cancel, &key, &key_len);
	if (r < 0) {
		if (r == -ENOKEY)
			rts_log_turn(LOG_WARNING, call->binding->turn_id, call->binding->channel_hash, "no_key", 0,
				     "no model credential available from the configured apiKey source; call refused");
		call->rule = r == -ECANCELED ? "turn_closing" : "no_credential";
		return BROKERD_UNAVAILABLE;
	}
	brokerd_keyring_add(call->keys, &cfg->api_key, key, key_len);
	struct brokerd_upstream_req ur = {
		.url = cfg->model_url,
		.ca_file = cfg->ca_file,
		.bearer = key,
		.body = up_body,
		.body_len = strlen(up_body),
		.max_answer = RTS_UPSTREAM_ANSWER_MAX,
		.cancel = call->cancel,
	};
	cleanup_json json_object *ans = NULL;
	enum brokerd_result res = brokerd_upstream_json(call, "model", &ur, &ans);
	brokerd_key_free(key, key_len);
	if (res != BROKERD_OK)
		return res;
	cleanup_json json_object *out = NULL;
	if (brokerd_model_answer_rebuild(ans, &out, &why) < 0) {
		rts_log_turn(LOG_WARNING, call->binding->turn_id, call->binding->channel_hash, "upstream_error", 0,
			     "model answer refused: %s", why);
		call->rule = "model_answer";
		return BROKERD_UPSTREAM_ERROR;
	}
	*answer = rts_json_dump(out);
	return BROKERD_OK;
}
