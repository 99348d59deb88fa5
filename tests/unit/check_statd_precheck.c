/* SPDX-License-Identifier: Apache-2.0 */
/* statd's precheck ops (statd/precheck_request.h): every field of "precheck" and
 * "precheck_describe" refused with its key path, and the describe text naming exactly the
 * tools of the first matching grant. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/util.h"
#include "statd/precheck_request.h"

#define GOOD                                                                                                           \
	"\"op\":\"precheck\",\"id\":7,\"channel\":\"g/1\",\"target\":\"daily\",\"tier\":\"member\","                  \
	"\"script\":\"export default () => ({wake:false})\",\"approved\":[\"docs/search\",\"fetch\"],"               \
	"\"firedAt\":\"2026-03-01T12:00:00Z\",\"timeZone\":\"Pacific/Kiritimati\",\"today\":\"2026-03-02\","          \
	"\"schedule\":{\"every\":\"day\"}"

static json_object *doc(const char *text)
{
	json_object *o = NULL;
	const char *why;
	ck_assert_msg(rts_json_parse(text, strlen(text), 16, &o, &why) == 0, "%s: %s", text, why);
	return o;
}

/* GOOD with member key replaced by value (a JSON text), or removed when value is NULL. */
static json_object *good_with(const char *key, const char *value)
{
	cleanup_free char *text = rts_xasprintf("{" GOOD "}");
	json_object *o = doc(text);
	json_object_object_del(o, key);
	if (value) {
		json_object *v = NULL;
		cleanup_free char *wrapped = rts_xasprintf("[%s]", value);
		json_object *a = doc(wrapped);
		v = json_object_get(json_object_array_get_idx(a, 0));
		json_object_put(a);
		json_object_object_add(o, key, v);
	}
	return o;
}

START_TEST(test_valid)
{
	cleanup_json json_object *o = good_with("tier", "\"member\"");
	struct statd_precheck_request r;
	const char *detail;
	ck_assert_int_eq(statd_precheck_parse(o, &r, &detail), 0);
	ck_assert_int_eq(json_object_get_int(r.id), 7);
	ck_assert_str_eq(r.channel, "g/1");
	ck_assert_str_eq(r.tier, "member");
	ck_assert_int_eq(r.fired_at_s, 1772366400);
	cleanup_free char *approved = statd_precheck_approved_text(&r);
	ck_assert_str_eq(approved, "docs/search\nfetch");
	cleanup_free char *schedule = statd_precheck_schedule_text(&r);
	ck_assert_str_eq(schedule, "{\"every\":\"day\"}");

	/* A null tier, a null schedule and no approvals are all fine. */
	cleanup_json json_object *o2 = good_with("tier", "null");
	json_object_object_add(o2, "schedule", NULL);
	json_object_object_add(o2, "approved", json_object_new_array());
	ck_assert_int_eq(statd_precheck_parse(o2, &r, &detail), 0);
	ck_assert_ptr_null(r.tier);
	cleanup_free char *none = statd_precheck_approved_text(&r);
	ck_assert_str_eq(none, "");
	cleanup_free char *null = statd_precheck_schedule_text(&r);
	ck_assert_str_eq(null, "null");
}
END_TEST

START_TEST(test_each_field_refused)
{
	cleanup_free char *long_script = rts_xmalloc(RTS_PRECHECK_SCRIPT_MAX + 4);
	long_script[0] = '"';
	memset(long_script + 1, 'x', RTS_PRECHECK_SCRIPT_MAX + 1);
	strcpy(long_script + RTS_PRECHECK_SCRIPT_MAX + 2, "\"");
	cleanup_free char *long_schedule = rts_xmalloc(RTS_PRECHECK_SCHEDULE_MAX + 4);
	long_schedule[0] = '"';
	memset(long_schedule + 1, 'x', RTS_PRECHECK_SCHEDULE_MAX);
	strcpy(long_schedule + RTS_PRECHECK_SCHEDULE_MAX + 1, "\"");
	const struct {
		const char *key, *value, *detail_prefix;
	} cases[] = {
		{"id", "1.5", "id "},
		{"id", NULL, "id "},
		{"channel", "\"\"", "channel "},
		{"channel", NULL, "channel "},
		{"target", "\"\"", "target "},
		{"target", "7", "target "},
		{"tier", NULL, "tier "},
		{"tier", "\"\"", "tier "},
		{"script", "\"\"", "script "},
		{"script", long_script, "script "},
		{"approved", "\"docs/search\"", "approved "},
		{"approved", "[\"a/b/c\"]", "approved[0] "},
		{"approved", "[\"ok\",\"\"]", "approved[1] "},
		{"firedAt", "\"2026-03-01\"", "firedAt "},
		{"firedAt", "\"2026-03-01T12:00:00+14\"", "firedAt "},
		{"timeZone", "\"../../etc/passwd\"", "timeZone "},
		{"timeZone", "\"+14:00\"", "timeZone "},
		{"today", "\"2026-3-2\"", "today "},
		{"today", "\"2026-03-04\"", "today "}, /* no zone has that date at that instant */
		{"schedule", NULL, "schedule "},
		{"schedule", long_schedule, "schedule "},
		{"extra", "1", "unknown field"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		cleanup_json json_object *o = good_with(cases[i].key, cases[i].value);
		struct statd_precheck_request r;
		const char *detail = NULL;
		ck_assert_msg(statd_precheck_parse(o, &r, &detail) == -EINVAL, "%s = %s accepted", cases[i].key,
			      cases[i].value ? cases[i].value : "(absent)");
		ck_assert_msg(strncmp(detail, cases[i].detail_prefix, strlen(cases[i].detail_prefix)) == 0,
			      "%s: detail \"%s\"", cases[i].key, detail);
		/* The id is echoed whenever it is valid. */
		ck_assert(strcmp(cases[i].key, "id") == 0 ? r.id == NULL : r.id != NULL);
	}
}
END_TEST

START_TEST(test_describe_parse)
{
	cleanup_json json_object *o =
		doc("{\"op\":\"precheck_describe\",\"id\":\"d1\",\"channel\":\"g/1\",\"target\":\"daily\",\"tier\":null}");
	struct statd_precheck_describe r;
	const char *detail;
	ck_assert_int_eq(statd_precheck_describe_parse(o, &r, &detail), 0);
	ck_assert_ptr_null(r.tier);
	cleanup_json json_object *bad =
		doc("{\"op\":\"precheck_describe\",\"id\":\"d1\",\"channel\":\"g/1\",\"target\":\"daily\",\"tier\":null,"
		    "\"script\":\"x\"}");
	ck_assert_int_eq(statd_precheck_describe_parse(bad, &r, &detail), -EINVAL);
	ck_assert_str_eq(r.id ? json_object_get_string(r.id) : "", "d1");
	cleanup_json json_object *no_target =
		doc("{\"op\":\"precheck_describe\",\"id\":\"d1\",\"channel\":\"g/1\",\"tier\":null}");
	ck_assert_int_eq(statd_precheck_describe_parse(no_target, &r, &detail), -EINVAL);
	ck_assert_str_eq(detail, "target is required");
}
END_TEST

static struct rts_config *config(void)
{
	const char *text =
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1\",\"precheck\":{\"image\":\"i\",\"maxCalls\":5,"
		"\"toolNames\":\"server_tool\",\"grants\":["
		"{\"channel\":\"g/1\",\"tiers\":[\"owner\"],\"servers\":[{\"name\":\"docs\",\"url\":\"https://d.example/\","
		"\"tools\":[\"search\",\"get.page\"],\"token\":{\"env\":\"SECRET_TOKEN_VAR\"}}]},"
		"{\"channel\":\"g/1\",\"servers\":[{\"name\":\"cal\",\"url\":\"https://c.example/\",\"tools\":[\"events\"]}]},"
		"{\"channel\":\"g/2\",\"servers\":[]}]}}";
	cleanup_json json_object *o = doc(text);
	char err[512];
	struct rts_config *c = rts_config_from_json(o, "t.json", err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	return c;
}

START_TEST(test_describe_text)
{
	struct rts_config *c = config();
	cleanup_free char *owner = statd_precheck_describe_text(&c->precheck, "g/1", "daily", "owner");
	ck_assert_ptr_nonnull(strstr(owner, "export default async ({ mcp, firedAt, timeZone, today, schedule })"));
	ck_assert_ptr_nonnull(strstr(owner, "formatToParts"));
	ck_assert_ptr_nonnull(strstr(owner, "At most 5 calls per run"));
	ck_assert_ptr_nonnull(strstr(owner, "mcp.call(\"docs\", \"search\", args)  approval name: docs_search\n"));
	ck_assert_ptr_nonnull(strstr(owner, "mcp.call(\"docs\", \"get.page\", args)  approval name: docs_get.page\n"));
	/* Only the first matching grant: not the second grant's tool. */
	ck_assert_ptr_null(strstr(owner, "events"));
	/* Nothing of where the tools are or how they are reached. */
	ck_assert_ptr_null(strstr(owner, "example"));
	ck_assert_ptr_null(strstr(owner, "SECRET"));

	cleanup_free char *member = statd_precheck_describe_text(&c->precheck, "g/1", "daily", "member");
	ck_assert_ptr_nonnull(strstr(member, "mcp.call(\"cal\", \"events\", args)  approval name: cal_events\n"));
	ck_assert_ptr_null(strstr(member, "docs"));

	cleanup_free char *shadowed = statd_precheck_describe_text(&c->precheck, "g/2", "daily", NULL);
	cleanup_free char *unmatched = statd_precheck_describe_text(&c->precheck, "g/3", "daily", NULL);
	ck_assert_ptr_nonnull(strstr(shadowed, "Tools: none."));
	ck_assert_ptr_nonnull(strstr(unmatched, "Tools: none."));
	ck_assert_ptr_null(strstr(unmatched, "mcp.call(\""));
	rts_config_free(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("statd_precheck");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_valid);
	tcase_add_test(tc, test_each_field_refused);
	tcase_add_test(tc, test_describe_parse);
	tcase_add_test(tc, test_describe_text);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
