/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>

#include "common/json.h"
#include "common/jspec.h"
#include "common/util.h"
#include "runnerd/precheck_io.h"

static bool text_ok(const char *s, size_t min, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	return s && n >= min && n <= max && rts_utf8_valid(s, n);
}

static json_object *str(const char *s)
{
	return json_object_new_string_len(s, (int)strlen(s));
}

int runnerd_precheck_input(const struct runnerd_precheck_input *in, char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (!text_ok(in->script, 1, RTS_PRECHECK_SCRIPT_MAX) || rts_precheck_fired_at_parse(in->fired_at, NULL) < 0 ||
	    !rts_precheck_time_zone_valid(in->time_zone) || rts_precheck_today_parse(in->today, NULL) < 0 ||
	    !in->schedule || strlen(in->schedule) > RTS_PRECHECK_SCHEDULE_MAX || in->n_pairs > RTS_PRECHECK_PAIRS_MAX ||
	    in->max_calls > RTS_PRECHECK_MAX_CALLS_MAX)
		return -EINVAL;
	/* The schedule is any JSON value; the strict parser takes a document that is an object
	 * or an array, so it reads the value as the one item of an array. */
	cleanup_free char *wrapped = rts_xasprintf("[%s]", in->schedule);
	cleanup_json json_object *list = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict(wrapped, strlen(wrapped), RUNNERD_PRECHECK_SCHEDULE_DEPTH + 1, &list, &why) < 0 ||
	    json_object_array_length(list) != 1)
		return -EINVAL;
	json_object *schedule = json_object_get(json_object_array_get_idx(list, 0));

	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "v", json_object_new_int(1));
	json_object_object_add(o, "script", str(in->script));
	json_object_object_add(o, "firedAt", str(in->fired_at));
	json_object_object_add(o, "timeZone", str(in->time_zone));
	json_object_object_add(o, "today", str(in->today));
	/* json-c writes a JSON null for a NULL member: the schedule "null" stays null. */
	json_object_object_add(o, "schedule", schedule);
	json_object *tools = json_object_new_array_ext((int)in->n_pairs);
	for (size_t i = 0; i < in->n_pairs; i++) {
		const struct rts_precheck_pair *p = &in->pairs[i];
		if (!rts_precheck_tool_name_valid(p->tool))
			return -EINVAL;
		json_object *t = json_object_new_object();
		json_object_object_add(t, "server", str(p->server->name));
		json_object_object_add(t, "tool", str(p->tool));
		json_object_array_add(tools, t);
	}
	json_object_object_add(o, "tools", tools);
	json_object_object_add(o, "maxCalls", json_object_new_int64(in->max_calls));

	char *s = rts_json_dump(o);
	size_t n = strlen(s);
	if (n > RTS_PRECHECK_INPUT_MAX) {
		free(s);
		return -E2BIG;
	}
	*out = s;
	*out_len = n;
	return 0;
}

/* The result line's members (HACKING.md "Precheck runtime"). Which combinations make an
 * answer is decided after the table: one table for both shapes, so an unknown member is
 * refused whatever else the line holds. */
struct precheck_output {
	bool has_wake;
	bool wake;
	const char *note, *context, *error, *field;
};

#define OUT(m) offsetof(struct precheck_output, m)
static const struct rts_jspec output_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "v", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 1, .max = 1},
		{.key = "wake", .types = RTS_JT_BOOL, .flags = RTS_JF_PRESENT, .store = RTS_JS_BOOL, .at = OUT(wake),
		 .present_at = OUT(has_wake)},
		{.key = "note", .types = RTS_JT_STRING, .flags = RTS_JF_UTF8, .max = RTS_PRECHECK_NOTE_MAX,
		 .store = RTS_JS_STR, .at = OUT(note)},
		{.key = "context", .types = RTS_JT_STRING, .flags = RTS_JF_UTF8, .max = RTS_PRECHECK_CONTEXT_MAX,
		 .store = RTS_JS_STR, .at = OUT(context)},
		{.key = "error", .types = RTS_JT_STRING, .flags = RTS_JF_UTF8, .min = 1, .max = RTS_PRECHECK_ERROR_MAX,
		 .store = RTS_JS_STR, .at = OUT(error)},
		{.key = "field", .types = RTS_JT_STRING, .flags = RTS_JF_UTF8, .max = RTS_PRECHECK_ERROR_MAX,
		 .store = RTS_JS_STR, .at = OUT(field)},
		{0},
	},
};
static const struct rts_jfield output_root = RTS_JSPEC_ROOT(&output_spec);

static bool field_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > RUNNERD_PRECHECK_FIELD_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

enum runnerd_precheck_result runnerd_precheck_output_parse(const char *buf, size_t len, int exit_status,
							   uint32_t *answer, char **text,
							   char field[RUNNERD_PRECHECK_FIELD_MAX + 1])
{
	*answer = RTS_PRECHECK_SLEEP;
	*text = NULL;
	field[0] = '\0';
	/* One line: a newline at the end and nowhere else (JSON escapes every newline inside
	 * a string, so a second raw one is a second line). */
	if (len < 3 || len > RTS_PRECHECK_OUTPUT_MAX || buf[len - 1] != '\n' || memchr(buf, '\n', len - 1))
		return RUNNERD_PRECHECK_MALFORMED;
	/* The object and nothing around it: the harness writes JSON.stringify's text and the
	 * newline, so whitespace (a CR) around it is not its line. */
	if (buf[0] != '{' || buf[len - 2] != '}')
		return RUNNERD_PRECHECK_MALFORMED;
	cleanup_json json_object *o = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict(buf, len - 1, 2, &o, &why) < 0)
		return RUNNERD_PRECHECK_MALFORMED;
	struct precheck_output out = {0};
	struct rts_jerr e;
	if (rts_jspec_validate(o, &output_root, &out, 0, &e) < 0)
		return RUNNERD_PRECHECK_MALFORMED;

	if (!out.has_wake) {
		if (exit_status != 1 || !out.error || strcmp(out.error, "bad_input") != 0 || !out.field || out.note ||
		    out.context)
			return RUNNERD_PRECHECK_MALFORMED;
		if (field_name_ok(out.field))
			snprintf(field, RUNNERD_PRECHECK_FIELD_MAX + 1, "%s", out.field);
		return RUNNERD_PRECHECK_BAD_INPUT;
	}
	if (exit_status != 0 || out.field)
		return RUNNERD_PRECHECK_MALFORMED;
	if (!out.wake) {
		if (out.context || out.error)
			return RUNNERD_PRECHECK_MALFORMED;
		*answer = out.note ? RTS_PRECHECK_NOTE : RTS_PRECHECK_SLEEP;
		*text = out.note ? rts_xstrdup(out.note) : NULL;
		return RUNNERD_PRECHECK_ANSWER;
	}
	if (out.note || (out.context != NULL) == (out.error != NULL))
		return RUNNERD_PRECHECK_MALFORMED;
	*answer = out.context ? RTS_PRECHECK_CONTEXT : RTS_PRECHECK_SCRIPT_ERROR;
	*text = rts_xstrdup(out.context ? out.context : out.error);
	return RUNNERD_PRECHECK_ANSWER;
}
