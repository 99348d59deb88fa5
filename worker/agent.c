/* SPDX-License-Identifier: Apache-2.0 */
/* The sealed agent loop: Chat Completions against the broker's /model, the memory tools run
 * here, public tools through /tools/<name> and /mcp/<server>.
 *
 * Seed rules this file carries out ("Threat model", "Memory and scope"): at most
 * limits.modelCalls (12) model calls, the last of which asks for an answer (tool_choice
 * "none") and runs no tools; at most limits.toolCallsPerResponse (8) tools per response,
 * every further call answered with an error result; malformed or unoffered tool names
 * echoed as a placeholder with an error result; call ids that are not [A-Za-z0-9_-]{1,64}
 * or repeat one already used in the turn renamed together with their results; every
 * request under 192 KiB by dropping the oldest history first, then the oldest whole
 * tool-call groups (worker.h shows the parts that always remain fit); the broker's 48-call
 * budget never spent on a tool when the final model call would go without; only the
 * settled exchange saved to history, never the tool transcript. */
#include "config.h"

#include <stdarg.h>

#include "common/json.h"
#include "common/limits.h"
#include "common/tools.h"
#include "common/util.h"
#include "worker/agent.h"
#include "worker/broker.h"
#include "worker/history.h"
#include "worker/memory.h"
#include "worker/store.h"
#include "worker/text.h"
#include "worker/worker.h"

/* What a refused tool call is echoed as: the broker and the upstream only ever see tool
 * names that are well-formed, never what a confused model made up. */
#define PLACEHOLDER_TOOL "unavailable_tool"
#define EMPTY_REPLY "(The model returned an empty answer.)"

/* An assistant message with tool calls and the tool messages answering them. The budget
 * drops a group whole or not at all, so every tool message in a request answers a call of
 * the assistant message just before it. */
struct group {
	json_object *assistant;
	json_object *results;
};

struct agent {
	const struct worker_input *in;
	const char *broker;
	uint64_t deadline_ms;
	struct worker_store store;
	struct worker_memory mem;
	struct worker_history hist;
	json_object *tools;  /* the request's "tools" array */
	json_object *system; /* the system message */
	json_object *user;   /* the current user message */
	json_object *past;   /* history as alternating user/assistant messages */
	struct group groups[RTS_MODEL_CALLS_PER_TURN];
	size_t n_groups;
	json_object *ids; /* set of tool call ids used in this turn (object keys) */
	unsigned next_id;
	unsigned rpc_id;
	unsigned broker_calls; /* POSTs attempted in this turn, model and tools */
	char *tool_names; /* the offered public tools, comma separated */
};

/* One tool call of a response after normalisation. */
struct pending {
	char *id;			/* as echoed, normalised */
	const char *name;		/* as echoed: the real name or PLACEHOLDER_TOOL */
	const struct worker_tool *tool; /* public tool, or NULL for a memory tool / refusal */
	json_object *args;		/* parsed arguments object, or NULL */
	char *args_text;		/* as echoed: args re-serialised, or "{}" */
	char *refusal;			/* non-NULL: not run, the model gets this error */
};

static json_object *message(const char *role, const char *content)
{
	json_object *m = json_object_new_object();
	json_object_object_add(m, "role", json_object_new_string(role));
	json_object_object_add(m, "content", json_object_new_string(content));
	return m;
}

/* The deadline of one broker call: the per-call cap or the turn's remainder. */
static uint64_t call_deadline(const struct agent *a)
{
	uint64_t cap = rts_now_ms() + WORKER_CALL_TIMEOUT_MS;
	return cap < a->deadline_ms ? cap : a->deadline_ms;
}

/* One broker call, counted against the broker's per-turn budget whatever its outcome. */
static int agent_post(struct agent *a, const char *route, const char *body, unsigned *status, json_object **answer)
{
	a->broker_calls++;
	return worker_broker_post(a->broker, route, body, strlen(body), call_deadline(a), status, answer);
}

/* Broker calls left in this turn's budget. */
static unsigned broker_calls_left(const struct agent *a)
{
	return a->broker_calls < RTS_BROKER_CALLS_PER_TURN ? RTS_BROKER_CALLS_PER_TURN - a->broker_calls : 0;
}

/* How a guest's message is shown to the model; the name is the display name the host
 * resolved, the id tells apart two guests who share one. Both are quoted: a guest picks
 * its own display name and must not be able to end our header line with it. */
static char *user_text(const char *raw_name, const char *raw_id, const char *when, const char *text,
		       uint32_t attachments)
{
	cleanup_free char *name = worker_text_quote(raw_name);
	cleanup_free char *id = worker_text_quote(raw_id);
	cleanup_free char *body = worker_text_bound(text, WORKER_USER_TEXT_MAX, NULL);
	cleanup_free char *note = NULL;
	if (attachments > 0)
		note = rts_xasprintf("\n\n[%u attachment%s not downloaded: attachments are not supported here.]",
				     attachments, attachments == 1 ? " was" : "s were");
	return rts_xasprintf("Message from %s (speaker id %s)%s%s:\n%s%s", name, id, when ? " at " : "",
			     when ? when : "", body, note ? note : "");
}

/* The request's "tools": the memory tools, then the public tools in input order while they
 * fit RTS_TOOLS_BUDGET together with their names in the system prompt. The config loader
 * refuses a tool list that would not fit (common/tools.h), so leaving one out here is a
 * defense against another host's input, not something a valid config meets. */
static void agent_tools(struct agent *a)
{
	a->tools = worker_memory_tool_specs();
	size_t used = rts_json_dump_len(a->tools);
	size_t names_len = 0;
	a->tool_names = rts_xstrdup("");
	for (size_t i = 0; i < a->in->n_tools; i++) {
		const struct worker_tool *t = &a->in->tools[i];
		cleanup_free char *desc = worker_text_bound(t->description, RTS_DESCRIPTION_MAX, NULL);
		json_object *spec = rts_tool_spec_new(t->name, desc, t->parameters);
		size_t cost = rts_tool_spec_cost(spec, t->name);
		if (used + cost > RTS_TOOLS_BUDGET) {
			fprintf(stderr, "worker: tool %s left out: the tool list is full\n", t->name);
			json_object_put(spec);
			continue;
		}
		json_object_array_add(a->tools, spec);
		used += cost;
		char *names = rts_xasprintf("%s%s%s", a->tool_names, names_len ? ", " : "", t->name);
		free(a->tool_names);
		a->tool_names = names;
		names_len = strlen(names);
	}
}

static bool tool_offered(const struct agent *a, const char *name)
{
	if (worker_memory_is_tool(name))
		return true;
	for (size_t i = 0, n = json_object_array_length(a->tools); i < n; i++) {
		json_object *fn = rts_json_get(json_object_array_get_idx(a->tools, i), "function");
		const char *offered = rts_json_get_string(fn, "name");
		if (offered && strcmp(offered, name) == 0)
			return true;
	}
	return false;
}

/* Seed: the operator's prompt, time zone and time, the two memory previews, then the tool
 * names; nothing else from the host. */
static void agent_system(struct agent *a)
{
	const struct worker_input *in = a->in;
	cleanup_free char *operator = worker_text_bound(in->system_prompt, RTS_SYSTEM_PROMPT_MAX, NULL);
	cleanup_free char *speaker_notes = worker_memory_preview(&a->mem, in->speaker_id, true, WORKER_PREVIEW_MAX);
	cleanup_free char *channel_notes = worker_memory_preview(&a->mem, in->speaker_id, false, WORKER_PREVIEW_MAX);
	bool mem_reset = a->mem.reset || a->store.dir_reset;
	bool hist_reset = a->hist.reset || a->store.dir_reset;
	cleanup_free char *text = rts_xasprintf(
		"%s%s"
		"Time zone: %s\nCurrent time: %s\n\n"
		"Memory notes of the current speaker (scope \"speaker\"; full notes via memory_get):\n%s\n\n"
		"Channel memory notes, shared with everyone in this channel (scope \"channel\"):\n%s\n\n"
		"%s%s%s"
		"Tools: memory_set, memory_get, memory_remove%s%s",
		operator, operator[0] ? "\n\n" : "", in->time_zone, in->now, speaker_notes,
		channel_notes,
		mem_reset ? "Note: the stored memory notes could not be read and were reset; the unreadable file was "
			    "kept aside.\n"
			  : "",
		hist_reset ? "Note: the stored conversation history could not be read and was reset.\n" : "",
		mem_reset || hist_reset ? "\n" : "", a->tool_names[0] ? ", " : "", a->tool_names);
	a->system = message("system", text);
}

static void agent_past(struct agent *a)
{
	a->past = json_object_new_array();
	json_object *ex = a->hist.exchanges;
	for (size_t i = 0, n = json_object_array_length(ex); i < n; i++) {
		json_object *e = json_object_array_get_idx(ex, i);
		json_object *sp = rts_json_get(e, "speaker");
		cleanup_free char *u = user_text(rts_json_get_string(sp, "name"), rts_json_get_string(sp, "id"),
						 rts_json_get_string(e, "time"), rts_json_get_string(e, "user"), 0);
		json_object_array_add(a->past, message("user", u));
		json_object_array_add(a->past, message("assistant", rts_json_get_string(e, "assistant")));
	}
}

/* The /model body: everything that fits under WORKER_REQUEST_MAX, dropping the oldest
 * history exchange first, then the oldest tool-call group of this turn (never the last).
 * Returns the serialised body, or NULL if even the minimum does not fit (cannot happen
 * with the bounds in worker.h; checked anyway). */
static char *agent_request(struct agent *a, bool last_call)
{
	size_t n_pairs = json_object_array_length(a->past) / 2;
	size_t h0 = 0, g0 = 0;
	for (;;) {
		cleanup_json json_object *req = json_object_new_object();
		json_object *msgs = json_object_new_array();
		json_object_object_add(req, "messages", msgs);
		json_object_array_add(msgs, json_object_get(a->system));
		for (size_t i = 2 * h0; i < 2 * n_pairs; i++)
			json_object_array_add(msgs, json_object_get(json_object_array_get_idx(a->past, i)));
		json_object_array_add(msgs, json_object_get(a->user));
		for (size_t g = g0; g < a->n_groups; g++) {
			json_object_array_add(msgs, json_object_get(a->groups[g].assistant));
			for (size_t i = 0, n = json_object_array_length(a->groups[g].results); i < n; i++)
				json_object_array_add(msgs,
						      json_object_get(json_object_array_get_idx(a->groups[g].results, i)));
		}
		json_object_object_add(req, "tools", json_object_get(a->tools));
		json_object_object_add(req, "max_tokens", json_object_new_int64(a->in->max_output_tokens));
		/* The last allowed call asks for an answer instead of more tool calls. */
		json_object_object_add(req, "tool_choice", json_object_new_string(last_call ? "none" : "auto"));
		char *body = rts_json_dump(req);
		if (strlen(body) < WORKER_REQUEST_MAX)
			return body;
		free(body);
		if (h0 < n_pairs)
			h0++;
		else if (g0 + 1 < a->n_groups)
			g0++;
		else
			return NULL;
	}
}

static bool id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > WORKER_CALL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* A unique, well-formed id for this call: the model's own when it is both. Newly
 * allocated. */
static char *agent_call_id(struct agent *a, const char *id)
{
	json_object *used = NULL;
	char fresh[32];
	if (!id_valid(id) || json_object_object_get_ex(a->ids, id, &used)) {
		do
			snprintf(fresh, sizeof(fresh), "call_%u", ++a->next_id);
		while (json_object_object_get_ex(a->ids, fresh, &used));
		id = fresh;
	}
	json_object_object_add(a->ids, id, NULL);
	return rts_xstrdup(id);
}

/* The text the model gets back from a public tool. */
static char *agent_call_public(struct agent *a, const struct worker_tool *t, json_object *args)
{
	if (rts_now_ms() >= a->deadline_ms)
		return worker_error_json("the turn's time is up");
	cleanup_json json_object *rpc = NULL;
	json_object *body = args;
	if (t->mcp_tool) {
		rpc = json_object_new_object();
		json_object *params = json_object_new_object();
		json_object_object_add(params, "name", json_object_new_string(t->mcp_tool));
		json_object_object_add(params, "arguments", json_object_get(args));
		json_object_object_add(rpc, "jsonrpc", json_object_new_string("2.0"));
		json_object_object_add(rpc, "id", json_object_new_int64(++a->rpc_id));
		json_object_object_add(rpc, "method", json_object_new_string("tools/call"));
		json_object_object_add(rpc, "params", params);
		body = rpc;
	}
	cleanup_free char *text = rts_json_dump(body);
	unsigned status = 0;
	cleanup_json json_object *answer = NULL;
	int r = agent_post(a, t->route, text, &status, &answer);
	if (r < 0) {
		fprintf(stderr, "worker: tool call %s failed: %s\n", t->name, strerror(-r));
		return worker_error_json("the tool call failed: %s", r == -ETIMEDOUT ? "timed out" : "no usable answer");
	}
	if (status != 200) {
		const char *code = rts_json_get_string(answer, "error");
		if (!code || !rts_name_valid(code, 32))
			code = "error";
		fprintf(stderr, "worker: tool call %s refused: HTTP %u %s\n", t->name, status, code);
		return worker_error_json("the tool call was refused: %s (HTTP %u)", code, status);
	}
	if (!t->mcp_tool) {
		const char *result = rts_json_get_string(answer, "result");
		return result ? rts_xstrdup(result) : worker_error_json("the tool gave a malformed answer");
	}

	json_object *err = rts_json_get(answer, "error");
	if (err) {
		const char *msg = rts_json_get_string(err, "message");
		cleanup_free char *short_msg = worker_text_bound(msg ? msg : "no message", 400, NULL);
		return worker_error_json("the MCP tool failed: %s", short_msg);
	}
	json_object *result = rts_json_get(answer, "result");
	json_object *content = rts_json_get(result, "content");
	if (!content || !json_object_is_type(content, json_type_array))
		return result ? rts_json_dump(result) : worker_error_json("the MCP tool gave a malformed answer");
	/* Text parts joined; other kinds are named, not passed on. */
	size_t cap = WORKER_TOOL_RESULT_MAX + 64, len = 0;
	char *out = rts_xstrdup("");
	json_object *is_error = rts_json_get(result, "isError");
	if (is_error && json_object_get_boolean(is_error)) {
		free(out);
		out = rts_xstrdup("The tool reported an error:\n");
		len = strlen(out);
	}
	for (size_t i = 0, n = json_object_array_length(content); i < n && len < cap; i++) {
		json_object *part = json_object_array_get_idx(content, i);
		const char *type = rts_json_get_string(part, "type");
		const char *ptext = rts_json_get_string(part, "text");
		cleanup_free char *piece = NULL;
		if (type && strcmp(type, "text") == 0 && ptext)
			piece = rts_xstrdup(ptext);
		else
			piece = rts_xasprintf("[%.32s content not shown]", type && rts_name_valid(type, 32) ? type : "other");
		char *joined = rts_xasprintf("%s%s%s", out, len ? "\n" : "", piece);
		free(out);
		out = joined;
		len = strlen(out);
	}
	return out;
}

/* Check one tool call of a response; nothing of it is trusted. index is its position in
 * the response, n the response's number of calls. Usable arguments are echoed
 * re-serialised, so the echo is JSON the worker wrote itself and escapes a model chose
 * cannot inflate it; *args_used sums their encoded size over the response against
 * WORKER_GROUP_ARGUMENTS_MAX. Arguments that are unusable are echoed as "{}". */
static void agent_pending(struct agent *a, json_object *call, size_t index, size_t n, size_t *args_used,
			  struct pending *p)
{
	*p = (struct pending){0};
	p->id = agent_call_id(a, rts_json_get_string(call, "id"));
	const char *type = rts_json_get_string(call, "type");
	json_object *fn = rts_json_get(call, "function");
	const char *name = rts_json_get_string(fn, "name");
	json_object *args = rts_json_get(fn, "arguments");
	p->name = name && tool_offered(a, name) ? name : PLACEHOLDER_TOOL;

	/* Chat Completions sends arguments as JSON text; tolerate an object or nothing. */
	json_object *parsed = NULL;
	const char *why;
	if (!args || json_object_is_type(args, json_type_null))
		parsed = json_object_new_object();
	else if (json_object_is_type(args, json_type_object))
		parsed = json_object_get(args);
	else if (json_object_is_type(args, json_type_string) &&
		 rts_json_parse(json_object_get_string(args), (size_t)json_object_get_string_len(args),
				WORKER_ARGUMENTS_DEPTH, &parsed, &why) < 0)
		parsed = NULL;
	if (parsed && !json_object_is_type(parsed, json_type_object))
		json_object_put(steal_pointer(&parsed));
	bool too_large = false;
	if (parsed) {
		cleanup_free char *text = rts_json_dump(parsed);
		size_t cost = rts_json_string_len(text, strlen(text));
		if (*args_used + cost <= WORKER_GROUP_ARGUMENTS_MAX) {
			*args_used += cost;
			p->args = steal_pointer(&parsed);
			p->args_text = steal_pointer(&text);
		} else {
			too_large = true;
			json_object_put(steal_pointer(&parsed));
		}
	}
	if (!p->args_text)
		p->args_text = rts_xstrdup("{}");

	size_t limit = a->in->tool_calls_per_response;
	if (index >= limit) {
		/* Seed: calls beyond the per-response bound get an error result, not silence. */
		bool more_hidden = n > WORKER_TOOL_CALLS_ECHO_MAX && index + 1 == WORKER_TOOL_CALLS_ECHO_MAX;
		p->refusal = rts_xasprintf("too many tool calls in one response: only the first %zu of %zu run; this "
					   "one was not run%s",
					   limit, n, more_hidden ? ", nor were the ones after it" : "");
	} else if (type && strcmp(type, "function") != 0) {
		p->refusal = rts_xstrdup("unsupported tool call type; this call was not run");
	} else if (strcmp(p->name, PLACEHOLDER_TOOL) == 0) {
		p->refusal = rts_xstrdup("unknown or malformed tool name; use one of the offered tools");
	} else if (too_large) {
		p->refusal = rts_xasprintf("the arguments of this response's tool calls exceed %u KiB in total; this "
					   "call was not run",
					   WORKER_GROUP_ARGUMENTS_MAX / 1024);
	} else if (!p->args) {
		p->refusal = rts_xstrdup("the tool call's arguments are not a JSON object; it was not run");
	}
	if (!p->refusal && !worker_memory_is_tool(p->name))
		p->tool = worker_input_tool(a->in, p->name);
}

/* Run the tool calls of one response and keep them as a group. */
static void agent_tool_calls(struct agent *a, json_object *msg, json_object *calls)
{
	size_t n = json_object_array_length(calls);
	size_t echoed = n < WORKER_TOOL_CALLS_ECHO_MAX ? n : WORKER_TOOL_CALLS_ECHO_MAX;
	if (n > a->in->tool_calls_per_response)
		fprintf(stderr, "worker: %zu tool calls in one response, %zu not run\n", n,
			n - a->in->tool_calls_per_response);

	struct pending p[WORKER_TOOL_CALLS_ECHO_MAX];
	size_t args_used = 0, runnable = 0;
	for (size_t i = 0; i < echoed; i++) {
		agent_pending(a, json_object_array_get_idx(calls, i), i, n, &args_used, &p[i]);
		if (!p[i].refusal)
			runnable++;
	}
	/* Results share one budget so that a whole group always fits in a request. */
	size_t result_max = runnable ? WORKER_GROUP_RESULTS_MAX / runnable : WORKER_TOOL_RESULT_MAX;
	if (result_max > WORKER_TOOL_RESULT_MAX)
		result_max = WORKER_TOOL_RESULT_MAX;

	const char *content = rts_json_get_string(msg, "content");
	cleanup_free char *text = worker_text_bound(content ? content : "", WORKER_ASSISTANT_TEXT_MAX, NULL);
	json_object *assistant = message("assistant", text);
	json_object *echo = json_object_new_array();
	json_object_object_add(assistant, "tool_calls", echo);
	json_object *results = json_object_new_array();

	for (size_t i = 0; i < echoed; i++) {
		json_object *fn = json_object_new_object();
		json_object_object_add(fn, "name", json_object_new_string(p[i].name));
		json_object_object_add(fn, "arguments", json_object_new_string(p[i].args_text));
		json_object *c = json_object_new_object();
		json_object_object_add(c, "id", json_object_new_string(p[i].id));
		json_object_object_add(c, "type", json_object_new_string("function"));
		json_object_object_add(c, "function", fn);
		json_object_array_add(echo, c);

		/* A public tool needs a broker call and must leave one for the final answer. */
		if (!p[i].refusal && p[i].tool && broker_calls_left(a) < 2)
			p[i].refusal = rts_xstrdup("the turn's budget of broker calls is used up; this call was not run. "
						   "Answer with what you have.");
		cleanup_free char *result = NULL;
		size_t max = result_max;
		if (p[i].refusal) {
			result = worker_error_json("%s", p[i].refusal);
			max = WORKER_REFUSAL_MAX;
		} else if (p[i].tool) {
			result = agent_call_public(a, p[i].tool, p[i].args);
		} else {
			result = worker_memory_call(&a->mem, &a->store, a->in->speaker_id, p[i].name, p[i].args);
		}
		cleanup_free char *bounded = worker_text_bound(result, max, NULL);
		json_object *m = message("tool", bounded);
		json_object_object_add(m, "tool_call_id", json_object_new_string(p[i].id));
		json_object_array_add(results, m);

		free(p[i].id);
		free(p[i].args_text);
		free(p[i].refusal);
		if (p[i].args)
			json_object_put(p[i].args);
	}
	a->groups[a->n_groups++] = (struct group){.assistant = assistant, .results = results};
}

static void agent_free(struct agent *a)
{
	for (size_t i = 0; i < a->n_groups; i++) {
		json_object_put(a->groups[i].assistant);
		json_object_put(a->groups[i].results);
	}
	json_object *objs[] = {a->tools, a->system, a->user, a->past, a->ids};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(objs); i++)
		if (objs[i])
			json_object_put(objs[i]);
	free(a->tool_names);
	worker_memory_free(&a->mem);
	worker_history_free(&a->hist);
	worker_store_close(&a->store);
}

/* The model loop. Returns 0 with *reply or -errno with *error_code. */
static int agent_loop(struct agent *a, char **reply, const char **error_code)
{
	for (unsigned call = 0; call < a->in->model_calls; call++) {
		/* The last call allowed, by the model-call bound or the broker's call budget,
		 * asks for an answer; tool calls it returns anyway are not run. */
		bool last = call + 1 == a->in->model_calls || broker_calls_left(a) <= 1;
		cleanup_free char *body = agent_request(a, last);
		if (!body) {
			*error_code = "context_overflow";
			return -E2BIG;
		}
		if (rts_now_ms() >= a->deadline_ms) {
			*error_code = "turn_timeout";
			return -ETIMEDOUT;
		}
		unsigned status = 0;
		cleanup_json json_object *answer = NULL;
		int r = agent_post(a, "/model", body, &status, &answer);
		if (r < 0 || status != 200) {
			fprintf(stderr, "worker: model call %u failed: %s (HTTP %u)\n", call + 1,
				r < 0 ? strerror(-r) : "refused", status);
			*error_code = r == -ETIMEDOUT && rts_now_ms() >= a->deadline_ms ? "turn_timeout" : "model_unavailable";
			return r < 0 ? r : -EIO;
		}
		json_object *choices = rts_json_get(answer, "choices");
		json_object *choice = choices && json_object_is_type(choices, json_type_array)
					      ? json_object_array_get_idx(choices, 0)
					      : NULL;
		json_object *msg = rts_json_get(choice, "message");
		if (!msg || !json_object_is_type(msg, json_type_object)) {
			fprintf(stderr, "worker: model answer without a message\n");
			*error_code = "model_unavailable";
			return -EBADMSG;
		}
		json_object *calls = rts_json_get(msg, "tool_calls");
		if (calls && json_object_is_type(calls, json_type_array) && json_object_array_length(calls) > 0) {
			if (last)
				break;
			agent_tool_calls(a, msg, calls);
			continue;
		}
		const char *content = rts_json_get_string(msg, "content");
		*reply = worker_text_bound(content && content[0] ? content : EMPTY_REPLY, WORKER_REPLY_MAX, NULL);
		return 0;
	}
	*reply = rts_xstrdup(WORKER_OUT_OF_STEPS_REPLY);
	return 0;
}

int worker_agent_run(const struct worker_input *in, const char *broker_path, const char *workspace, char **reply,
		     const char **error_code)
{
	struct agent a = {.in = in, .broker = broker_path};
	*reply = NULL;
	*error_code = NULL;

	uint64_t timeout = in->turn_timeout_ms ? in->turn_timeout_ms : RTS_TURN_TIMEOUT_MS_MAX;
	/* Finish a little before the host's own deadline so a late answer still gets out. */
	uint64_t margin = timeout / 10 < 5000 ? timeout / 10 : 5000;
	a.deadline_ms = rts_now_ms() + timeout - margin;

	int r = worker_store_open(&a.store, workspace);
	if (r < 0) {
		fprintf(stderr, "worker: workspace unusable: %s\n", strerror(-r));
		*error_code = "workspace_unavailable";
		return r;
	}
	worker_memory_load(&a.mem, &a.store);
	worker_history_load(&a.hist, &a.store, in->start_fresh);
	a.ids = json_object_new_object();
	agent_tools(&a);
	agent_system(&a);
	agent_past(&a);
	cleanup_free char *u = user_text(in->speaker_name, in->speaker_id, NULL, in->text, in->attachments);
	a.user = message("user", u);

	r = agent_loop(&a, reply, error_code);
	if (r == 0) {
		/* Only the settled exchange is kept, never the tool transcript. */
		json_object *e = worker_history_entry(in->speaker_id, in->speaker_name, in->text, *reply, in->now);
		int w = worker_history_append(&a.hist, &a.store, e);
		if (w < 0)
			fprintf(stderr, "worker: saving history failed: %s\n", strerror(-w));
	}
	agent_free(&a);
	return r;
}
