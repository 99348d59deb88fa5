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

/* Every member of o is named in allowed (NULL-terminated). */
static bool only_members(json_object *o, const char *const *allowed)
{
	json_object_object_foreach(o, name, val)
	{
		(void)val;
		bool ok = false;
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(name, *a) == 0;
		if (!ok)
			return false;
	}
	return true;
}

static bool string_in(json_object *o, size_t min, size_t max)
{
	if (!is_type(o, json_type_string))
		return false;
	size_t n = (size_t)json_object_get_string_len(o);
	return n >= min && n <= max;
}

/* OpenAI function names: [A-Za-z0-9_-]{1,64}. */
static bool function_name_ok(json_object *o)
{
	if (!string_in(o, 1, RTS_FUNCTION_NAME_MAX))
		return false;
	for (const char *p = json_object_get_string(o); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '-'))
			return false;
	return true;
}

static json_object *dup_string(json_object *s)
{
	return json_object_new_string_len(json_object_get_string(s), json_object_get_string_len(s));
}

/* ---- request ---- */

static bool copy_tool_call(json_object *tc, json_object **out, const char **why)
{
	static const char *const tc_members[] = {"id", "type", "function", NULL};
	static const char *const fn_members[] = {"name", "arguments", NULL};
	if (!is_type(tc, json_type_object) || !only_members(tc, tc_members))
		FAIL("tool call must be an object with id, type, function");
	json_object *id = rts_json_get(tc, "id");
	json_object *type = rts_json_get(tc, "type");
	json_object *fn = rts_json_get(tc, "function");
	if (!string_in(id, 1, RTS_MODEL_CALL_ID_MAX))
		FAIL("tool call id must be a string of 1 to 256 bytes");
	if (!is_type(type, json_type_string) || strcmp(json_object_get_string(type), "function") != 0)
		FAIL("tool call type must be \"function\"");
	if (!is_type(fn, json_type_object) || !only_members(fn, fn_members))
		FAIL("tool call function must be an object with name and arguments");
	json_object *name = rts_json_get(fn, "name");
	json_object *args = rts_json_get(fn, "arguments");
	if (!function_name_ok(name))
		FAIL("tool call function name must match [A-Za-z0-9_-]{1,64}");
	if (!is_type(args, json_type_string))
		FAIL("tool call arguments must be a string");
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", dup_string(name));
	json_object_object_add(f, "arguments", dup_string(args));
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", dup_string(id));
	json_object_object_add(o, "type", json_object_new_string("function"));
	json_object_object_add(o, "function", f);
	*out = o;
	return true;
}

static bool copy_message(json_object *m, json_object **out, const char **why)
{
	static const char *const plain[] = {"role", "content", NULL};
	static const char *const assistant[] = {"role", "content", "tool_calls", NULL};
	static const char *const tool[] = {"role", "content", "tool_call_id", NULL};
	if (!is_type(m, json_type_object))
		FAIL("each message must be an object");
	const char *role = rts_json_get_string(m, "role");
	if (!role)
		FAIL("message role must be a string");
	bool is_assistant = strcmp(role, "assistant") == 0, is_tool = strcmp(role, "tool") == 0;
	if (!is_assistant && !is_tool && strcmp(role, "system") != 0 && strcmp(role, "user") != 0)
		FAIL("message role must be system, user, assistant or tool");
	if (!only_members(m, is_assistant ? assistant : is_tool ? tool : plain))
		FAIL("message has a member its role does not allow");

	json_object *content = rts_json_get(m, "content");
	json_object *calls = rts_json_get(m, "tool_calls");
	/* json-c gives NULL for both a missing member and a JSON null. */
	bool has_calls = calls != NULL;
	if (!has_calls && json_object_object_get_ex(m, "tool_calls", NULL))
		FAIL("tool_calls must be an array");
	/* Arrays of content parts (images, audio, files) are refused: text only. */
	if (!is_type(content, json_type_string) && !(is_assistant && has_calls && content == NULL))
		FAIL("message content must be a string (null only for assistant tool calls)");

	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "role", json_object_new_string(role));
	json_object_object_add(o, "content", content ? dup_string(content) : NULL);
	if (has_calls) {
		if (!is_type(calls, json_type_array))
			FAIL("tool_calls must be an array");
		size_t n = json_object_array_length(calls);
		if (n == 0 || n > RTS_MODEL_TOOL_CALLS_MAX)
			FAIL("tool_calls must hold 1 to 64 calls");
		json_object *arr = json_object_new_array_ext((int)n);
		json_object_object_add(o, "tool_calls", arr);
		for (size_t i = 0; i < n; i++) {
			json_object *tc = NULL;
			if (!copy_tool_call(json_object_array_get_idx(calls, i), &tc, why))
				return false;
			/* A tool message names the call it answers by id: ids must be unambiguous. */
			for (size_t j = 0; j < i; j++)
				if (strcmp(rts_json_get_string(tc, "id"),
					   rts_json_get_string(json_object_array_get_idx(arr, j), "id")) == 0) {
					json_object_put(tc);
					FAIL("tool call ids of one message must be distinct");
				}
			json_object_array_add(arr, tc);
		}
	}
	if (is_tool) {
		json_object *id = rts_json_get(m, "tool_call_id");
		if (!string_in(id, 1, RTS_MODEL_CALL_ID_MAX))
			FAIL("tool message needs tool_call_id (a string of 1 to 256 bytes)");
		json_object_object_add(o, "tool_call_id", dup_string(id));
	}
	*out = steal_pointer(&o);
	return true;
}

/* The tool calls of the assistant message that tool messages may answer right now. */
struct call_group {
	json_object *calls; /* that message's copied tool_calls, or NULL */
	bool answered[RTS_MODEL_TOOL_CALLS_MAX];
};

/* Every tool message answers a call of the assistant message before it (other tool
 * messages of the same group may sit in between), and each call is answered at most
 * once. m is an already validated copy. */
static bool check_tool_order(struct call_group *g, json_object *m, const char **why)
{
	const char *role = rts_json_get_string(m, "role");
	if (strcmp(role, "tool") != 0) {
		json_object *calls = rts_json_get(m, "tool_calls");
		g->calls = strcmp(role, "assistant") == 0 && calls ? calls : NULL;
		memset(g->answered, 0, sizeof(g->answered));
		return true;
	}
	if (!g->calls)
		FAIL("a tool message must follow an assistant message with tool calls");
	const char *id = rts_json_get_string(m, "tool_call_id");
	size_t n = json_object_array_length(g->calls);
	for (size_t k = 0; k < n; k++) {
		if (strcmp(rts_json_get_string(json_object_array_get_idx(g->calls, k), "id"), id) != 0)
			continue;
		if (g->answered[k])
			FAIL("a tool call is answered twice");
		g->answered[k] = true;
		return true;
	}
	FAIL("a tool message answers no call of the assistant message before it");
}

static bool copy_tool(json_object *t, json_object **out, const char **why)
{
	static const char *const t_members[] = {"type", "function", NULL};
	static const char *const fn_members[] = {"name", "description", "parameters", NULL};
	if (!is_type(t, json_type_object) || !only_members(t, t_members))
		FAIL("each tool must be an object with type and function");
	/* Native provider tools (web search, code interpreter, ...) are refused. */
	const char *type = rts_json_get_string(t, "type");
	if (!type || strcmp(type, "function") != 0)
		FAIL("tool type must be \"function\"");
	json_object *fn = rts_json_get(t, "function");
	if (!is_type(fn, json_type_object) || !only_members(fn, fn_members))
		FAIL("tool function must be an object with name, description, parameters");
	json_object *name = rts_json_get(fn, "name");
	json_object *desc = rts_json_get(fn, "description");
	json_object *params = rts_json_get(fn, "parameters");
	if (!function_name_ok(name))
		FAIL("tool name must match [A-Za-z0-9_-]{1,64}");
	if (desc && !is_type(desc, json_type_string))
		FAIL("tool description must be a string");
	if (params && !is_type(params, json_type_object))
		FAIL("tool parameters must be a schema object");
	if (params && rts_schema_check(params, why) < 0)
		return false;
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", dup_string(name));
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
	*out = o;
	return true;
}

static bool build(json_object *req, const char *model, uint32_t max_output_tokens, json_object **out,
		  const char **why)
{
	static const char *const members[] = {"messages", "tools", "max_tokens", "tool_choice", NULL};
	if (!is_type(req, json_type_object))
		FAIL("body must be a JSON object");
	if (!only_members(req, members))
		FAIL("unknown top-level member");
	/* json-c reads a null member as a missing one: refuse it rather than guess. */
	json_object_object_foreach(req, member, value)
	{
		(void)member;
		if (!value)
			FAIL("a top-level member is null");
	}

	json_object *messages = rts_json_get(req, "messages");
	if (!is_type(messages, json_type_array))
		FAIL("messages must be an array");
	size_t n = json_object_array_length(messages);
	if (n == 0 || n > RTS_MODEL_MESSAGES_MAX)
		FAIL("messages must hold 1 to 1024 messages");

	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(model));
	json_object *msgs = json_object_new_array_ext((int)n);
	json_object_object_add(o, "messages", msgs);
	struct call_group group = {.calls = NULL};
	for (size_t i = 0; i < n; i++) {
		json_object *m = NULL;
		if (!copy_message(json_object_array_get_idx(messages, i), &m, why))
			return false;
		json_object_array_add(msgs, m);
		if (!check_tool_order(&group, m, why))
			return false;
	}

	json_object *tools = rts_json_get(req, "tools");
	size_t n_tools = 0;
	if (tools) {
		if (!is_type(tools, json_type_array))
			FAIL("tools must be an array");
		n_tools = json_object_array_length(tools);
		if (n_tools > RTS_MODEL_TOOLS_MAX)
			FAIL("tools holds too many tools");
		if (n_tools > 0) {
			json_object *arr = json_object_new_array_ext((int)n_tools);
			json_object_object_add(o, "tools", arr);
			for (size_t i = 0; i < n_tools; i++) {
				json_object *t = NULL;
				if (!copy_tool(json_object_array_get_idx(tools, i), &t, why))
					return false;
				const char *name =
					rts_json_get_string(rts_json_get(t, "function"), "name");
				for (size_t j = 0; j < i; j++)
					if (strcmp(name, rts_json_get_string(rts_json_get(json_object_array_get_idx(arr, j),
												   "function"),
									      "name")) == 0) {
						json_object_put(t);
						FAIL("tool names must be distinct");
					}
				json_object_array_add(arr, t);
			}
		}
	}

	json_object *choice = rts_json_get(req, "tool_choice");
	if (choice) {
		const char *c = is_type(choice, json_type_string) ? json_object_get_string(choice) : NULL;
		if (!c || (strcmp(c, "auto") != 0 && strcmp(c, "none") != 0))
			FAIL("tool_choice must be \"auto\" or \"none\"");
		if (n_tools > 0)
			json_object_object_add(o, "tool_choice", json_object_new_string(c));
	}

	json_object_object_add(o, "stream", json_object_new_boolean(0));

	int64_t max_tokens = max_output_tokens;
	json_object *asked = rts_json_get(req, "max_tokens");
	if (asked) {
		if (!is_type(asked, json_type_int))
			FAIL("max_tokens must be a positive integer");
		errno = 0;
		int64_t v = json_object_get_int64(asked);
		/* json-c saturates out-of-range integers and sets errno. */
		if (errno != 0 || v <= 0 || v > INT32_MAX)
			FAIL("max_tokens must be a positive integer");
		if (v < max_tokens)
			max_tokens = v;
	}
	json_object_object_add(o, "max_tokens", json_object_new_int64(max_tokens));
	*out = steal_pointer(&o);
	return true;
}

int brokerd_model_request_build(json_object *req, const char *model, uint32_t max_output_tokens, json_object **out,
				const char **why)
{
	*out = NULL;
	*why = NULL;
	return build(req, model, max_output_tokens, out, why) ? 0 : -EINVAL;
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
		return BROKERD_BAD_REQUEST;
	}
	cleanup_json json_object *up = NULL;
	if (brokerd_model_request_build(req, cfg->model, cfg->max_output_tokens, &up, &why) < 0) {
		log_debug("turn %s: /model body refused: %s", call->binding->turn_id, why);
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
		return BROKERD_UPSTREAM_ERROR;
	}
	*answer = rts_json_dump(out);
	return BROKERD_OK;
}
