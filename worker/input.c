/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/limits.h"
#include "common/tools.h"
#include "common/util.h"
#include "worker/input.h"
#include "worker/worker.h"

/* A string member of 1..max bytes (0..max when may_be_empty). */
static const char *get_str(json_object *o, const char *key, size_t max, bool may_be_empty)
{
	json_object *v = rts_json_get(o, key);
	if (!v || !json_object_is_type(v, json_type_string))
		return NULL;
	size_t n = (size_t)json_object_get_string_len(v);
	const char *s = json_object_get_string(v);
	/* A "\u0000" escape would make the C string shorter than the JSON one. */
	if (n > max || (n == 0 && !may_be_empty) || strlen(s) != n)
		return NULL;
	return s;
}

static bool get_int(json_object *o, const char *key, int64_t min, int64_t max, int64_t *out)
{
	json_object *v = rts_json_get(o, key);
	if (!v || !json_object_is_type(v, json_type_int))
		return false;
	errno = 0;
	int64_t x = json_object_get_int64(v);
	if (errno != 0 || x < min || x > max)
		return false;
	*out = x;
	return true;
}

/* route is /tools/<name> or /mcp/<name>; names are checked so that nothing but those two
 * shapes can reach a request line. */
static bool route_valid(const char *route, bool *mcp)
{
	if (strncmp(route, "/tools/", 7) == 0) {
		*mcp = false;
		return rts_name_valid(route + 7, RTS_NAME_MAX);
	}
	if (strncmp(route, "/mcp/", 5) == 0) {
		*mcp = true;
		return rts_name_valid(route + 5, RTS_NAME_MAX);
	}
	return false;
}

static bool hex_id(const char *s, size_t len)
{
	if (strlen(s) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int parse_tools(struct worker_input *in, json_object *a, const char **why)
{
	if (!a || !json_object_is_type(a, json_type_array)) {
		*why = "tools must be an array";
		return -EINVAL;
	}
	size_t n = json_object_array_length(a);
	if (n > RTS_PUBLIC_TOOLS_MAX) {
		*why = "too many tools";
		return -EINVAL;
	}
	in->tools = rts_xcalloc(n, sizeof(*in->tools));
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(a, i);
		struct worker_tool *t = &in->tools[i];
		bool mcp = false;
		t->name = get_str(e, "name", RTS_FUNCTION_NAME_MAX, false);
		t->description = get_str(e, "description", RTS_DESCRIPTION_MAX, true);
		t->parameters = rts_json_get(e, "parameters");
		t->route = get_str(e, "route", 7 + RTS_NAME_MAX, false);
		if (!t->name || !rts_name_valid(t->name, RTS_FUNCTION_NAME_MAX) || !t->description ||
		    !t->parameters || !json_object_is_type(t->parameters, json_type_object) || !t->route ||
		    !route_valid(t->route, &mcp)) {
			*why = "a tool entry is malformed";
			return -EINVAL;
		}
		/* The memory tools are the worker's own; a public tool must not shadow them. */
		if (strncmp(t->name, "memory_", 7) == 0 || worker_input_tool(in, t->name)) {
			*why = "a tool name is reserved or repeated";
			return -EINVAL;
		}
		if (mcp) {
			t->mcp_tool = get_str(e, "mcpTool", RTS_NAME_MAX, false);
			if (!t->mcp_tool || !rts_name_valid(t->mcp_tool, RTS_NAME_MAX)) {
				*why = "an MCP tool entry lacks a valid mcpTool";
				return -EINVAL;
			}
		}
		in->n_tools = i + 1;
	}
	return 0;
}

int worker_input_parse(const char *buf, size_t len, struct worker_input **out, const char **why)
{
	*out = NULL;
	if (len > RTS_WORKER_INPUT_MAX) {
		*why = "input too large";
		return -EINVAL;
	}
	struct worker_input *in = rts_xcalloc(1, sizeof(*in));
	int64_t x;
	int r = rts_json_parse(buf, len, RTS_JSON_DEPTH_MAX, &in->root, why);
	if (r < 0)
		goto fail;
	r = -EINVAL;
	json_object *root = in->root;
	if (!json_object_is_type(root, json_type_object)) {
		*why = "input is not a JSON object";
		goto fail;
	}
	if (!get_int(root, "v", 1, 1, &x)) {
		*why = "unsupported input version";
		goto fail;
	}
	json_object *speaker = rts_json_get(root, "speaker");
	json_object *limits = rts_json_get(root, "limits");
	json_object *fresh = rts_json_get(root, "startFresh");
	in->turn = get_str(root, "turn", RTS_TURN_ID_LEN, false);
	in->speaker_id = get_str(speaker, "id", RTS_SPEAKER_FIELD_MAX, false);
	in->speaker_name = get_str(speaker, "name", RTS_SPEAKER_FIELD_MAX, false);
	in->text = get_str(root, "text", RTS_TEXT_MAX, true);
	in->system_prompt = get_str(root, "systemPrompt", RTS_SYSTEM_PROMPT_MAX, true);
	in->time_zone = get_str(root, "timeZone", RTS_TIME_ZONE_MAX, false);
	in->now = get_str(root, "now", RTS_WORKER_NOW_MAX, false);
	if (!in->turn || !hex_id(in->turn, RTS_TURN_ID_LEN) || !in->speaker_id || !in->speaker_name ||
	    !in->text || !in->system_prompt || !in->time_zone || !in->now) {
		*why = "a required string field is missing or out of range";
		goto fail;
	}
	if (!get_int(root, "attachments", 0, UINT32_MAX, &x)) {
		*why = "attachments must be a non-negative 32-bit integer";
		goto fail;
	}
	in->attachments = (uint32_t)x;
	if (!fresh || !json_object_is_type(fresh, json_type_boolean)) {
		*why = "startFresh must be a boolean";
		goto fail;
	}
	in->start_fresh = json_object_get_boolean(fresh);
	if (!get_int(limits, "modelCalls", 1, RTS_MODEL_CALLS_PER_TURN, &x)) {
		*why = "limits.modelCalls is missing or out of range";
		goto fail;
	}
	in->model_calls = (unsigned)x;
	if (!get_int(limits, "toolCallsPerResponse", 1, RTS_TOOL_CALLS_PER_RESPONSE, &x)) {
		*why = "limits.toolCallsPerResponse is missing or out of range";
		goto fail;
	}
	in->tool_calls_per_response = (unsigned)x;
	if (!get_int(limits, "maxOutputTokens", RTS_MAX_OUTPUT_TOKENS_MIN, RTS_MAX_OUTPUT_TOKENS_MAX, &x)) {
		*why = "limits.maxOutputTokens is missing or out of range";
		goto fail;
	}
	in->max_output_tokens = (unsigned)x;
	if (rts_json_get(limits, "turnTimeoutMs")) {
		if (!get_int(limits, "turnTimeoutMs", RTS_TURN_TIMEOUT_MS_MIN, RTS_TURN_TIMEOUT_MS_MAX, &x)) {
			*why = "limits.turnTimeoutMs is out of range";
			goto fail;
		}
		in->turn_timeout_ms = (uint32_t)x;
	}
	r = parse_tools(in, rts_json_get(root, "tools"), why);
	if (r < 0)
		goto fail;
	*out = in;
	return 0;
fail:
	worker_input_free(in);
	return -EINVAL;
}

void worker_input_free(struct worker_input *in)
{
	if (!in)
		return;
	free(in->tools);
	if (in->root)
		json_object_put(in->root);
	free(in);
}

const struct worker_tool *worker_input_tool(const struct worker_input *in, const char *name)
{
	for (size_t i = 0; i < in->n_tools; i++)
		if (strcmp(in->tools[i].name, name) == 0)
			return &in->tools[i];
	return NULL;
}
