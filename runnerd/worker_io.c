/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/proto.h"
#include "common/util.h"
#include "runnerd/worker_io.h"

int runnerd_format_now(time_t t, char *out, size_t outlen)
{
	struct tm tm;
	char raw[40];
	if (outlen < 32 || !localtime_r(&t, &tm))
		return -EINVAL;
	size_t n = strftime(raw, sizeof(raw), "%Y-%m-%dT%H:%M:%S%z", &tm);
	/* %z is "+HHMM"; the worker gets RFC 3339 "+HH:MM". */
	if (n < 5 || (raw[n - 5] != '+' && raw[n - 5] != '-'))
		return -EINVAL;
	snprintf(out, outlen, "%.*s:%s", (int)(n - 2), raw, raw + n - 2);
	return 0;
}

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

static bool code_ok(const char *s, size_t n)
{
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
	if (!json_object_is_type(o, json_type_object) || json_object_object_length(o) != 2)
		return RUNNERD_WORKER_MALFORMED;
	json_object *v = rts_json_get(o, "v");
	/* An integer 1, not 1.0 or "1": the version check is exact. */
	if (!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
		return RUNNERD_WORKER_MALFORMED;

	json_object *r = rts_json_get(o, "reply");
	if (r) {
		if (!json_object_is_type(r, json_type_string))
			return RUNNERD_WORKER_MALFORMED;
		size_t n = (size_t)json_object_get_string_len(r);
		const char *s = json_object_get_string(r);
		/* "\u0000" decodes to a NUL the daemon link cannot carry. */
		if (memchr(s, '\0', n) || !rts_utf8_valid(s, n))
			return RUNNERD_WORKER_MALFORMED;
		if (n > RTS_REPLY_MAX)
			return RUNNERD_WORKER_TOO_LONG;
		*reply = rts_xstrndup(s, n);
		return RUNNERD_WORKER_REPLY;
	}
	json_object *e = rts_json_get(o, "error");
	if (!e || !json_object_is_type(e, json_type_string))
		return RUNNERD_WORKER_MALFORMED;
	size_t n = (size_t)json_object_get_string_len(e);
	const char *s = json_object_get_string(e);
	if (code_ok(s, n)) {
		memcpy(code, s, n);
		code[n] = '\0';
	}
	return RUNNERD_WORKER_GAVE_UP;
}
