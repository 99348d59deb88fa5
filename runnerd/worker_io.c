/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/jspec.h"
#include "common/proto.h"
#include "common/util.h"
#include "runnerd/worker_io.h"

static json_object *str(const char *s)
{
	return json_object_new_string_len(s, (int)strlen(s));
}

int runnerd_worker_input(const struct rts_config *cfg, json_object *public_tools, const struct runnerd_worker_turn *t,
			 const char *now, char **out, size_t *out_len)
{
	const char *strings[] = {t->turn_id, t->speaker_id, t->speaker_name, t->text, cfg->system_prompt,
				 cfg->time_zone, now};
	/* json-c copies bytes as they are; the worker parses strictly, so refuse here. */
	for (size_t i = 0; i < RTS_ARRAY_SIZE(strings); i++)
		if (!strings[i] || !rts_utf8_valid(strings[i], strlen(strings[i])))
			return -EINVAL;

	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "v", json_object_new_int(1));
	json_object_object_add(o, "turn", str(t->turn_id));
	json_object *speaker = json_object_new_object();
	json_object_object_add(speaker, "id", str(t->speaker_id));
	json_object_object_add(speaker, "name", str(t->speaker_name));
	json_object_object_add(o, "speaker", speaker);
	json_object_object_add(o, "text", str(t->text));
	json_object_object_add(o, "attachments", json_object_new_int64(t->attachments));
	json_object_object_add(o, "systemPrompt", str(cfg->system_prompt));
	json_object_object_add(o, "timeZone", str(cfg->time_zone));
	json_object_object_add(o, "now", str(now));
	json_object_object_add(o, "tools", public_tools ? json_object_get(public_tools) : json_object_new_array());
	json_object_object_add(o, "startFresh", json_object_new_boolean(t->start_fresh));
	json_object *limits = json_object_new_object();
	json_object_object_add(limits, "modelCalls", json_object_new_int(RTS_MODEL_CALLS_PER_TURN));
	json_object_object_add(limits, "toolCallsPerResponse", json_object_new_int(RTS_TOOL_CALLS_PER_RESPONSE));
	json_object_object_add(limits, "maxOutputTokens", json_object_new_int64(cfg->max_output_tokens));
	/* The worker paces its broker calls by this; the real deadline is runnerd's. */
	uint64_t left = t->time_left_ms < RTS_TURN_TIMEOUT_MS_MIN   ? RTS_TURN_TIMEOUT_MS_MIN
			: t->time_left_ms > RTS_TURN_TIMEOUT_MS_MAX ? RTS_TURN_TIMEOUT_MS_MAX
								    : t->time_left_ms;
	json_object_object_add(limits, "turnTimeoutMs", json_object_new_int64((int64_t)left));
	json_object_object_add(o, "limits", limits);

	char *s = rts_json_dump(o);
	size_t n = strlen(s);
	if (n > RTS_WORKER_INPUT_MAX) {
		free(s);
		return -E2BIG;
	}
	*out = s;
	*out_len = n;
	return 0;
}

/* The worker's answer: {"v":1} and exactly one of reply and error. A reply is refused if
 * it holds a NUL (the daemon link cannot carry one) or is not UTF-8; one longer than
 * RTS_REPLY_MAX is refused whole, never cut (a truncated answer could change its meaning). */
struct worker_output {
	const char *reply, *error;
};
static const struct rts_jspec output_spec = {
	.fields = (const struct rts_jfield[]){
		/* An integer 1, not 1.0 or "1": the version check is exact. */
		{.key = "v", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 1, .max = 1},
		{.key = "reply", .types = RTS_JT_STRING, .flags = RTS_JF_ALTERNATIVE | RTS_JF_UTF8,
		 .max = RTS_REPLY_MAX,
		 .store = RTS_JS_STR, .at = offsetof(struct worker_output, reply)},
		{.key = "error", .types = RTS_JT_STRING, .flags = RTS_JF_ALTERNATIVE, .store = RTS_JS_STR,
		 .at = offsetof(struct worker_output, error)},
		{0},
	},
};
static const struct rts_jfield output_root = RTS_JSPEC_ROOT(&output_spec);

static bool code_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > RTS_WORKER_ERROR_CODE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return false;
	return true;
}

enum runnerd_worker_result runnerd_worker_output_parse(const char *buf, size_t len, char **reply,
							char code[RTS_WORKER_ERROR_CODE_MAX + 1])
{
	cleanup_json json_object *o = NULL;
	const char *why;
	*reply = NULL;
	code[0] = '\0';
	if (len == 0 || len > RTS_WORKER_OUTPUT_MAX || rts_json_parse_strict(buf, len, 4, &o, &why) < 0)
		return RUNNERD_WORKER_MALFORMED;
	struct worker_output out = {0};
	struct rts_jerr e;
	if (rts_jspec_validate(o, &output_root, &out, 0, &e) < 0) {
		bool too_long = e.problem == RTS_JP_RANGE && e.field == &output_spec.fields[1];
		return too_long ? RUNNERD_WORKER_TOO_LONG : RUNNERD_WORKER_MALFORMED;
	}
	if (out.reply) {
		*reply = rts_xstrdup(out.reply);
		return RUNNERD_WORKER_REPLY;
	}
	if (code_ok(out.error))
		snprintf(code, RTS_WORKER_ERROR_CODE_MAX + 1, "%s", out.error);
	return RUNNERD_WORKER_GAVE_UP;
}
