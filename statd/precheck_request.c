/* SPDX-License-Identifier: Apache-2.0 */
/* The precheck ops' fields and describe text (statd/precheck_request.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/jspec.h"
#include "common/limits.h"
#include "common/precheck.h"
#include "common/util.h"
#include "statd/precheck_request.h"

static bool approval_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_precheck_approval_valid(json_object_get_string(v)) ||
	       rts_jfail(ctx, "must be SERVER/TOOL or a tool's approval name ([A-Za-z0-9_.-], one optional /)");
}

static bool fired_at_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct statd_precheck_request *r = base;
	int64_t t;
	if (rts_precheck_fired_at_parse(json_object_get_string(v), &t) < 0)
		return rts_jfail(ctx, "must be an ISO 8601 date and time with a zone (2026-03-01T12:00:00Z)");
	if (r)
		r->fired_at_s = t;
	return true;
}

static bool time_zone_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_precheck_time_zone_valid(json_object_get_string(v)) ||
	       rts_jfail(ctx, "must be an IANA time zone name such as \"Europe/Berlin\"");
}

static bool today_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_precheck_today_parse(json_object_get_string(v), NULL) == 0 ||
	       rts_jfail(ctx, "must be a date YYYY-MM-DD");
}

/* Rules between members, once each is valid on its own. */
static bool precheck_check(struct rts_jctx *ctx, json_object *o, void *base)
{
	int64_t today = 0;
	int64_t fired_at = 0;
	(void)rts_precheck_today_parse(rts_json_get_string(o, "today"), &today);
	(void)rts_precheck_fired_at_parse(rts_json_get_string(o, "firedAt"), &fired_at);
	/* No zone is more than a day from UTC: a date further away is from another run. */
	if (!rts_precheck_today_plausible(today, fired_at))
		return rts_jfail_at(ctx, "today", "must be firedAt's date in timeZone");
	json_object *schedule = rts_json_get(o, "schedule");
	if (schedule && rts_json_dump_len(schedule) > RTS_PRECHECK_SCHEDULE_MAX)
		return rts_jfail_at(ctx, "schedule", "must serialise to at most %u bytes", RTS_PRECHECK_SCHEDULE_MAX);
	return true;
}

#define OP_ROW {.key = "op", .types = RTS_JT_STRING, .max = STATD_OP_MAX}
#define STRING_ROW(k, lo, hi, chk, off)                                                                                \
	{.key = (k), .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = (lo), .max = (hi), .check = (chk),       \
	 .store = RTS_JS_STR, .at = (off)}
/* A run's tier: a string, or null for a run that has none (grants with "tiers" then do
 * not match). */
#define TIER_ROW(off)                                                                                                  \
	{.key = "tier", .types = RTS_JT_STRING | RTS_JT_NULL, .flags = RTS_JF_REQUIRED, .min = 1,                      \
	 .max = RTS_SPEAKER_FIELD_MAX, .store = RTS_JS_STR, .at = (off), .missing = "is required (a string or null)"}

#define PR(m) offsetof(struct statd_precheck_request, m)
_Static_assert(offsetof(struct statd_precheck_request, id) == 0, "the id row stores first");
static const struct rts_jspec precheck_spec = {
	.fields = (const struct rts_jfield[]){
		OP_ROW,
		STATD_ID_FIELD(PR(id)),
		STRING_ROW("channel", 1, RTS_CHANNEL_MAX, NULL, PR(channel)),
		STRING_ROW("target", 1, RTS_PRECHECK_TARGET_MAX, NULL, PR(target)),
		TIER_ROW(PR(tier)),
		STRING_ROW("script", 1, RTS_PRECHECK_SCRIPT_MAX, NULL, PR(script)),
		{.key = "approved", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .max = RTS_PRECHECK_APPROVED_MAX,
		 .items = "approvals",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = RTS_PRECHECK_APPROVAL_MAX,
						    .check = approval_check},
		 .store = RTS_JS_JSON, .at = PR(approved)},
		STRING_ROW("firedAt", 1, RTS_PRECHECK_FIRED_AT_MAX, fired_at_check, PR(fired_at)),
		STRING_ROW("timeZone", 1, RTS_TIME_ZONE_MAX, time_zone_check, PR(time_zone)),
		STRING_ROW("today", RTS_PRECHECK_TODAY_LEN, RTS_PRECHECK_TODAY_LEN, today_check, PR(today)),
		{.key = "schedule",
		 .types = RTS_JT_NULL | RTS_JT_BOOL | RTS_JT_NUMBER | RTS_JT_STRING | RTS_JT_OBJECT | RTS_JT_ARRAY,
		 .flags = RTS_JF_REQUIRED, .store = RTS_JS_JSON, .at = PR(schedule),
		 .missing = "is required (any JSON value)"},
		{0},
	},
	/* A typo must not silently change what a request means. */
	.unknown = "unknown field for this op",
	.check = precheck_check,
};
static const struct rts_jfield precheck_root = RTS_JSPEC_ROOT(&precheck_spec);
static const struct rts_jfield precheck_id_row = STATD_ID_FIELD(PR(id));

#define PD(m) offsetof(struct statd_precheck_describe, m)
_Static_assert(offsetof(struct statd_precheck_describe, id) == 0, "the id row stores first");
static const struct rts_jspec describe_spec = {
	.fields = (const struct rts_jfield[]){
		OP_ROW,
		STATD_ID_FIELD(PD(id)),
		STRING_ROW("channel", 1, RTS_CHANNEL_MAX, NULL, PD(channel)),
		STRING_ROW("target", 1, RTS_PRECHECK_TARGET_MAX, NULL, PD(target)),
		TIER_ROW(PD(tier)),
		{0},
	},
	.unknown = "unknown field for this op",
};
static const struct rts_jfield describe_root = RTS_JSPEC_ROOT(&describe_spec);

/* The id first (without one the answer cannot be matched), then the whole table. */
static int parse(json_object *req, const struct rts_jfield *root, void *r, char *detail_buf, const char **detail)
{
	struct rts_jerr e;
	json_object **id = r;
	int ret = rts_jspec_member(req, &precheck_id_row, r, 0, &e);
	if (ret < 0)
		*id = NULL;
	else
		ret = rts_jspec_validate(req, root, r, 0, &e);
	if (ret < 0) {
		rts_jerr_join(&e, " ", detail_buf, STATD_DETAIL_MAX);
		*detail = detail_buf;
	}
	return ret;
}

int statd_precheck_parse(json_object *req, struct statd_precheck_request *r, const char **detail)
{
	*r = (struct statd_precheck_request){0};
	*detail = NULL;
	return parse(req, &precheck_root, r, r->detail, detail);
}

int statd_precheck_describe_parse(json_object *req, struct statd_precheck_describe *r, const char **detail)
{
	*r = (struct statd_precheck_describe){0};
	*detail = NULL;
	return parse(req, &describe_root, r, r->detail, detail);
}

char *statd_precheck_approved_text(const struct statd_precheck_request *r)
{
	size_t n = r->approved ? json_object_array_length(r->approved) : 0;
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(json_object_get_string(json_object_array_get_idx(r->approved, i))) + 1;
	char *out = rts_xcalloc(len, 1);
	char *p = out;
	for (size_t i = 0; i < n; i++) {
		const char *a = json_object_get_string(json_object_array_get_idx(r->approved, i));
		if (i)
			*p++ = '\n';
		size_t k = strlen(a);
		memcpy(p, a, k);
		p += k;
	}
	*p = '\0';
	return out;
}

char *statd_precheck_schedule_text(const struct statd_precheck_request *r)
{
	return r->schedule ? rts_json_dump(r->schedule) : rts_xstrdup("null");
}

char *statd_precheck_describe_text(const struct rts_precheck *p, const char *channel, const char *target,
				   const char *tier)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		abort();
	fprintf(f,
		"Precheck scripts. A precheck decides, each time this schedule fires and before its turn, whether "
		"the agent is woken at all. It runs once per firing in a sealed container: no network, a read-only "
		"file system (only /tmp, %u MiB, is writable, and nothing in it is kept), at most %u ms.\n\n",
		RTS_PRECHECK_TMPFS_MB, p->timeout_ms);
	fprintf(f,
		"The script is an ES module:\n"
		"  export default async ({ mcp, firedAt, timeZone, today, schedule }) => result\n"
		"result is { wake: false, note? } (note: a string of at most %u bytes of UTF-8, kept for the log) or "
		"{ wake: true, context } (context: a string of at most %u bytes of UTF-8, handed to the woken "
		"agent). A throw, any other answer, or running out of time wakes the agent with the error instead.\n\n",
		RTS_PRECHECK_NOTE_MAX, RTS_PRECHECK_CONTEXT_MAX);
	fputs("firedAt: when the schedule fired (ISO 8601, a string). timeZone: the run's IANA time zone; Date's "
	      "local-time methods and Intl use it by default. today: the date in timeZone (YYYY-MM-DD), computed "
	      "by the host: use it rather than a UTC date. schedule: the schedule itself, as JSON.\n"
	      "Other dates in timeZone: new Intl.DateTimeFormat(\"en-CA\", { timeZone, year: \"numeric\", month: "
	      "\"2-digit\", day: \"2-digit\" }).formatToParts(date), reading the parts by their type. Never parse "
	      "the text of format() or toLocaleString(): its shape differs between ICU versions.\n\n",
	      f);
	struct rts_precheck_pair pairs[RTS_PRECHECK_PAIRS_MAX];
	size_t n = 0;
	const struct rts_precheck_grant *g = rts_precheck_grant_find(p, channel, target, tier);
	for (size_t i = 0; g && i < g->n_servers; i++)
		for (size_t j = 0; j < g->servers[i].n_tools && n < RTS_PRECHECK_PAIRS_MAX; j++)
			pairs[n++] = (struct rts_precheck_pair){.server = &g->servers[i], .tool = g->servers[i].tools[j]};
	if (n == 0) {
		fputs("Tools: none. This schedule's precheck has no way out of its container: it can decide only "
		      "from firedAt, timeZone, today and schedule.\n",
		      f);
	} else {
		fprintf(f,
			"Tools: await mcp.call(server, tool, args) resolves with the MCP tool result; await "
			"mcp.json(server, tool, args) with its structuredContent, or its first text content parsed as "
			"JSON. A tool error throws. Calls run one at a time: await each before the next. At most %u "
			"calls per run, refused ones included. These are the only tools, and each works only if it was "
			"approved when the script was saved (by the approval name given):\n",
			p->max_calls);
		for (size_t i = 0; i < n; i++) {
			char name[RTS_PRECHECK_APPROVAL_MAX + 1];
			rts_precheck_tool_name(p->tool_names, pairs[i].server->name, pairs[i].tool, name, sizeof(name));
			fprintf(f, "  mcp.call(\"%s\", \"%s\", args)  approval name: %s\n", pairs[i].server->name,
				pairs[i].tool, name);
		}
	}
	if (fclose(f) != 0)
		abort();
	return text;
}
