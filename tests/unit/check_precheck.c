/* SPDX-License-Identifier: Apache-2.0 */
/* The precheck runner's shared rules (common/precheck.h) and its config key "precheck"
 * (common/conf.c): defaults, each refusal with its key path, first-match grants, approval
 * names in every form, and the dates and zone names a run carries. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/precheck.h"
#include "common/util.h"

static struct rts_config *load_precheck(const char *precheck, char *err, size_t errlen)
{
	cleanup_free char *text = rts_xasprintf("{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1\","
						"\"runRoot\":\"/run/rts\",\"precheck\":%s}",
						precheck);
	json_object *root = NULL;
	const char *why = NULL;
	if (rts_json_parse(text, strlen(text), 64, &root, &why) < 0) {
		snprintf(err, errlen, "parse: %s", why);
		return NULL;
	}
	struct rts_config *c = rts_config_from_json(root, "test.json", err, errlen);
	json_object_put(root);
	return c;
}

static void assert_refused(const char *precheck, const char *keypath)
{
	char err[1024] = "";
	struct rts_config *c = load_precheck(precheck, err, sizeof(err));
	ck_assert_msg(c == NULL, "accepted: %s", precheck);
	cleanup_free char *prefix = rts_xasprintf("test.json: %s: ", keypath);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "for %s expected prefix '%s', got '%s'", precheck,
		      prefix, err);
}

START_TEST(test_absent_and_defaults)
{
	char err[1024];
	struct rts_config *c = load_precheck("{\"image\":\"rts:pc\"}", err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	ck_assert(c->has_precheck);
	const struct rts_precheck *p = &c->precheck;
	ck_assert_str_eq(p->image, "rts:pc");
	ck_assert_str_eq(p->run_root, "/run/rts"); /* the turns' runRoot */
	ck_assert_uint_eq(p->timeout_ms, 60000);
	ck_assert_uint_eq(p->max_calls, 16);
	ck_assert_uint_eq(p->limits.memory_mb, 256);
	ck_assert(p->limits.cpus == 1.0);
	ck_assert_uint_eq(p->limits.pids, 32);
	ck_assert_int_eq(p->tool_names, RTS_TOOL_NAMES_TOOL);
	ck_assert_uint_eq(p->n_grants, 0);
	ck_assert_ptr_null(rts_precheck_grant_find(p, "c", "t", "member"));
	/* The turn container's limits are untouched. */
	ck_assert_uint_eq(c->limits.memory_mb, 512);
	rts_config_free(c);

	json_object *root = NULL;
	const char *why;
	const char *minimal = "{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1\"}";
	ck_assert_int_eq(rts_json_parse(minimal, strlen(minimal), 64, &root, &why), 0);
	c = rts_config_from_json(root, "test.json", err, sizeof(err));
	json_object_put(root);
	ck_assert(c && !c->has_precheck);
	rts_config_free(c);
}
END_TEST

static const char FULL[] =
	"{\"image\":\"rts:pc\",\"runRoot\":\"/run/pc\",\"timeoutMs\":5000,\"maxCalls\":0,"
	"\"limits\":{\"memoryMb\":128,\"cpus\":0.5,\"pids\":16},\"toolNames\":\"server_tool\","
	"\"grants\":["
	"{\"channel\":\"g/1\",\"target\":\"daily\",\"tiers\":[\"owner\",\"member\"],\"servers\":["
	"{\"name\":\"docs\",\"url\":\"https://mcp.example/a\",\"tools\":[\"search\",\"get.page\"],"
	"\"token\":{\"file\":\"/etc/rts/docs-token\"}}]},"
	"{\"channel\":\"g/1\",\"servers\":[]},"
	"{\"servers\":[{\"name\":\"cal\",\"url\":\"https://cal.example/mcp\",\"tools\":[\"events\"]}]}]}";

START_TEST(test_full)
{
	char err[1024];
	struct rts_config *c = load_precheck(FULL, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	const struct rts_precheck *p = &c->precheck;
	ck_assert_str_eq(p->run_root, "/run/pc");
	ck_assert_uint_eq(p->timeout_ms, 5000);
	ck_assert_uint_eq(p->max_calls, 0);
	ck_assert_uint_eq(p->limits.pids, 16);
	ck_assert_int_eq(p->tool_names, RTS_TOOL_NAMES_SERVER_TOOL);
	ck_assert_uint_eq(p->n_grants, 3);
	const struct rts_precheck_grant *g = &p->grants[0];
	ck_assert(g->has_tiers);
	ck_assert_str_eq(g->tiers[1], "member");
	ck_assert_ptr_null(g->tiers[2]);
	ck_assert_uint_eq(g->n_servers, 1);
	ck_assert_uint_eq(g->servers[0].n_tools, 2);
	ck_assert_str_eq(g->servers[0].tools[1], "get.page");
	ck_assert(g->servers[0].has_token);
	ck_assert_int_eq(g->servers[0].token.kind, RTS_KEY_FILE);
	ck_assert(!p->grants[2].servers[0].has_token);
	rts_config_free(c);
}
END_TEST

START_TEST(test_refusals)
{
	assert_refused("{}", "precheck.image");
	assert_refused("{\"image\":\"-x\"}", "precheck.image");
	assert_refused("{\"image\":\"i\",\"nope\":1}", "precheck.nope");
	assert_refused("{\"image\":\"i\",\"timeoutMs\":999}", "precheck.timeoutMs");
	assert_refused("{\"image\":\"i\",\"timeoutMs\":600001}", "precheck.timeoutMs");
	assert_refused("{\"image\":\"i\",\"maxCalls\":1001}", "precheck.maxCalls");
	assert_refused("{\"image\":\"i\",\"maxCalls\":-1}", "precheck.maxCalls");
	assert_refused("{\"image\":\"i\",\"limits\":{\"pids\":7}}", "precheck.limits.pids");
	assert_refused("{\"image\":\"i\",\"runRoot\":\"rel\"}", "precheck.runRoot");
	assert_refused("{\"image\":\"i\",\"toolNames\":\"server/tool\"}", "precheck.toolNames");
	assert_refused("{\"image\":\"i\",\"grants\":[{}]}", "precheck.grants[0].servers");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[],\"tiers\":[]}]}", "precheck.grants[0].tiers");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[],\"tiers\":[\"a\",\"a\"]}]}",
		       "precheck.grants[0].tiers[1]");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[],\"channel\":\"\"}]}",
		       "precheck.grants[0].channel");
	/* Cleartext is never an upstream. */
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"http://x/\","
		       "\"tools\":[\"t\"]}]}]}",
		       "precheck.grants[0].servers[0].url");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"A\",\"url\":\"https://x/\","
		       "\"tools\":[\"t\"]}]}]}",
		       "precheck.grants[0].servers[0].name");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"https://x/\","
		       "\"tools\":[]}]}]}",
		       "precheck.grants[0].servers[0].tools");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"https://x/\","
		       "\"tools\":[\"t/u\"]}]}]}",
		       "precheck.grants[0].servers[0].tools[0]");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"https://x/\","
		       "\"tools\":[\"t\",\"t\"]}]}]}",
		       "precheck.grants[0].servers[0].tools[1]");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"https://x/\","
		       "\"tools\":[\"t\"]},{\"name\":\"a\",\"url\":\"https://y/\",\"tools\":[\"u\"]}]}]}",
		       "precheck.grants[0].servers[1]");
	assert_refused("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\",\"url\":\"https://x/\","
		       "\"tools\":[\"t\"],\"token\":{\"env\":\"A\",\"file\":\"/k\"}}]}]}",
		       "precheck.grants[0].servers[0].token");
	/* The longest tool name passes, one more byte does not. */
	char long_tool[RTS_PRECHECK_TOOL_NAME_MAX + 2];
	memset(long_tool, 'x', sizeof(long_tool) - 1);
	long_tool[RTS_PRECHECK_TOOL_NAME_MAX + 1] = '\0';
	cleanup_free char *over = rts_xasprintf("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\","
						"\"url\":\"https://x/\",\"tools\":[\"%s\"]}]}]}",
						long_tool);
	assert_refused(over, "precheck.grants[0].servers[0].tools[0]");
	long_tool[RTS_PRECHECK_TOOL_NAME_MAX] = '\0';
	cleanup_free char *top = rts_xasprintf("{\"image\":\"i\",\"grants\":[{\"servers\":[{\"name\":\"a\","
					       "\"url\":\"https://x/\",\"tools\":[\"%s\"]}]}]}",
					       long_tool);
	char err[1024];
	struct rts_config *c = load_precheck(top, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	rts_config_free(c);
}
END_TEST

START_TEST(test_grants_first_match)
{
	char err[1024];
	struct rts_config *c = load_precheck(FULL, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	const struct rts_precheck *p = &c->precheck;
	/* All three conditions of the first grant. */
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "daily", "member"), &p->grants[0]);
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "daily", "owner"), &p->grants[0]);
	/* Another tier, no tier, another target: the second grant (channel only) wins over the
	 * catch-all, and it has no servers. */
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "daily", "guest"), &p->grants[1]);
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "daily", NULL), &p->grants[1]);
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "daily", ""), &p->grants[1]);
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/1", "weekly", "member"), &p->grants[1]);
	/* Any other channel: the catch-all. Matching is exact, never a prefix. */
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/10", "daily", "member"), &p->grants[2]);
	ck_assert_ptr_eq(rts_precheck_grant_find(p, "g/", "daily", "member"), &p->grants[2]);
	rts_config_free(c);

	c = load_precheck("{\"image\":\"i\",\"grants\":[{\"channel\":\"a\",\"servers\":[]}]}", err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	ck_assert_ptr_null(rts_precheck_grant_find(&c->precheck, "b", "t", NULL));
	rts_config_free(c);
}
END_TEST

START_TEST(test_approvals)
{
	char *const none[] = {NULL};
	char *const bare[] = {"search", NULL};
	char *const pair[] = {"docs/search", NULL};
	char *const joined[] = {"docs_search", NULL};
	char *const other[] = {"wiki/search", "docs/searc", "docs/search2", "Docs/search", NULL};
	/* toolNames "tool": the bare name covers the tool on any server; SERVER/TOOL is exact. */
	ck_assert(!rts_precheck_approved(RTS_TOOL_NAMES_TOOL, "docs", "search", none, 0));
	ck_assert(rts_precheck_approved(RTS_TOOL_NAMES_TOOL, "docs", "search", bare, 1));
	ck_assert(rts_precheck_approved(RTS_TOOL_NAMES_TOOL, "docs", "search", pair, 1));
	ck_assert(!rts_precheck_approved(RTS_TOOL_NAMES_TOOL, "docs", "search", joined, 1));
	ck_assert(!rts_precheck_approved(RTS_TOOL_NAMES_TOOL, "docs", "search", other, 4));
	/* toolNames "server_tool": the bare name no longer covers it. */
	ck_assert(!rts_precheck_approved(RTS_TOOL_NAMES_SERVER_TOOL, "docs", "search", bare, 1));
	ck_assert(rts_precheck_approved(RTS_TOOL_NAMES_SERVER_TOOL, "docs", "search", joined, 1));
	ck_assert(rts_precheck_approved(RTS_TOOL_NAMES_SERVER_TOOL, "docs", "search", pair, 1));
	char name[RTS_PRECHECK_APPROVAL_MAX + 1];
	rts_precheck_tool_name(RTS_TOOL_NAMES_SERVER_TOOL, "docs", "get.page", name, sizeof(name));
	ck_assert_str_eq(name, "docs_get.page");

	char err[1024];
	struct rts_config *c = load_precheck(FULL, err, sizeof(err));
	ck_assert_msg(c, "%s", err);
	struct rts_precheck_pair out[RTS_PRECHECK_PAIRS_MAX];
	char *const some[] = {"docs_get.page", "docs/nothere", "search", NULL};
	size_t n = rts_precheck_allowed(&c->precheck.grants[0], RTS_TOOL_NAMES_SERVER_TOOL, some, 3, out);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(out[0].server->name, "docs");
	ck_assert_str_eq(out[0].tool, "get.page");
	ck_assert_uint_eq(rts_precheck_allowed(NULL, 0, some, 3, out), 0);
	ck_assert_uint_eq(rts_precheck_allowed(&c->precheck.grants[1], 0, some, 3, out), 0);
	rts_config_free(c);
}
END_TEST

START_TEST(test_approval_shapes)
{
	ck_assert(rts_precheck_approval_valid("search"));
	ck_assert(rts_precheck_approval_valid("docs_search"));
	ck_assert(rts_precheck_approval_valid("docs/get.page-2"));
	ck_assert(!rts_precheck_approval_valid(""));
	ck_assert(!rts_precheck_approval_valid("/search"));
	ck_assert(!rts_precheck_approval_valid("docs/"));
	ck_assert(!rts_precheck_approval_valid("Docs/search"));
	ck_assert(!rts_precheck_approval_valid("a/b/c"));
	ck_assert(!rts_precheck_approval_valid("sea rch"));
	ck_assert(!rts_precheck_approval_valid("docs/\xc3\xa9"));

	char **v = NULL;
	ck_assert_int_eq(rts_precheck_approved_split("", &v), 0);
	ck_assert_ptr_null(v[0]);
	rts_strv_free(v);
	ck_assert_int_eq(rts_precheck_approved_split("a\ndocs/b", &v), 2);
	ck_assert_str_eq(v[1], "docs/b");
	rts_strv_free(v);
	ck_assert_int_eq(rts_precheck_approved_split("a\n", &v), -EINVAL);
	ck_assert_int_eq(rts_precheck_approved_split("a\n\nb", &v), -EINVAL);
	ck_assert_int_eq(rts_precheck_approved_split("a b", &v), -EINVAL);
	ck_assert_ptr_null(v);
	/* At most RTS_PRECHECK_APPROVED_MAX entries. */
	size_t len = RTS_PRECHECK_APPROVED_MAX * 2 + 2;
	cleanup_free char *many = rts_xcalloc(len + 1, 1);
	for (size_t i = 0; i < RTS_PRECHECK_APPROVED_MAX; i++)
		memcpy(many + 2 * i, "a\n", 2);
	many[2 * RTS_PRECHECK_APPROVED_MAX - 1] = '\0';
	ck_assert_int_eq(rts_precheck_approved_split(many, &v), (int)RTS_PRECHECK_APPROVED_MAX);
	rts_strv_free(v);
	many[2 * RTS_PRECHECK_APPROVED_MAX - 1] = '\n';
	many[2 * RTS_PRECHECK_APPROVED_MAX] = 'b';
	ck_assert_int_eq(rts_precheck_approved_split(many, &v), -EINVAL);
}
END_TEST

START_TEST(test_dates)
{
	int64_t t, d;
	ck_assert_int_eq(rts_precheck_fired_at_parse("1970-01-01T00:00:00Z", &t), 0);
	ck_assert_int_eq(t, 0);
	ck_assert_int_eq(rts_precheck_fired_at_parse("2026-03-01T12:00Z", &t), 0);
	ck_assert_int_eq(t, 1772366400);
	ck_assert_int_eq(rts_precheck_fired_at_parse("2026-03-01T12:00:00.123456789+14:00", &t), 0);
	ck_assert_int_eq(t, 1772366400 - 14 * 3600);
	ck_assert_int_eq(rts_precheck_fired_at_parse("2026-03-01T12:00:00-09:30", &t), 0);
	ck_assert_int_eq(t, 1772366400 + 9 * 3600 + 1800);
	ck_assert_int_eq(rts_precheck_fired_at_parse("2024-02-29T00:00:00Z", NULL), 0);
	const char *bad[] = {"2026-03-01", "2026-03-01T12:00:00", "2026-02-29T00:00Z", "2026-13-01T00:00Z",
			     "2026-03-01T24:00Z", "2026-03-01T12:60Z", "2026-03-01T12:00:60Z", "2026-03-01 12:00Z",
			     "2026-03-01T12:00:00.Z", "2026-03-01T12:00:00.1234567890Z", "2026-03-01T12:00+1400",
			     "2026-03-01T12:00+24:00", "2026-03-01T12:00z", "0000-01-01T00:00Z", "+2026-03-01T12:00Z",
			     "2026-03-01T12:00Z ", ""};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(rts_precheck_fired_at_parse(bad[i], &t) == -EINVAL, "accepted %s", bad[i]);

	ck_assert_int_eq(rts_precheck_today_parse("2026-03-02", &d), 0);
	ck_assert_int_eq(d, 1772366400 / 86400 + 1);
	ck_assert_int_eq(rts_precheck_today_parse("2026-02-29", &d), -EINVAL);
	ck_assert_int_eq(rts_precheck_today_parse("2026-3-02", &d), -EINVAL);
	ck_assert_int_eq(rts_precheck_today_parse("2026-03-02T", &d), -EINVAL);
	/* Kiritimati (+14) is a day ahead of UTC at noon; Honolulu (-10) a day behind at 05:00. */
	ck_assert(rts_precheck_today_plausible(d, 1772366400));
	ck_assert(rts_precheck_today_plausible(d - 2, 1772366400 - 7 * 3600));
	ck_assert(!rts_precheck_today_plausible(d + 1, 1772366400));
	ck_assert(!rts_precheck_today_plausible(d - 3, 1772366400));
	ck_assert(rts_precheck_today_plausible(-1, 0));
	ck_assert(rts_precheck_today_plausible(-2, -1));
	ck_assert(!rts_precheck_today_plausible(1, -1));
}
END_TEST

START_TEST(test_zone_names)
{
	ck_assert(rts_precheck_time_zone_valid("UTC"));
	ck_assert(rts_precheck_time_zone_valid("Pacific/Kiritimati"));
	ck_assert(rts_precheck_time_zone_valid("America/Argentina/Buenos_Aires"));
	ck_assert(rts_precheck_time_zone_valid("Etc/GMT+5"));
	ck_assert(!rts_precheck_time_zone_valid(""));
	ck_assert(!rts_precheck_time_zone_valid("/etc/passwd"));
	ck_assert(!rts_precheck_time_zone_valid("Europe/../../etc"));
	ck_assert(!rts_precheck_time_zone_valid("Europe//Berlin"));
	ck_assert(!rts_precheck_time_zone_valid("Europe/"));
	ck_assert(!rts_precheck_time_zone_valid("+01:00"));
	ck_assert(!rts_precheck_time_zone_valid("EST5EDT,M3.2.0,M11.1.0"));
	ck_assert(!rts_precheck_time_zone_valid(":Europe/Berlin"));
	char tz[RTS_TIME_ZONE_MAX + 2];
	memset(tz, 'a', sizeof(tz) - 1);
	tz[sizeof(tz) - 1] = '\0';
	ck_assert(!rts_precheck_time_zone_valid(tz));
	tz[RTS_TIME_ZONE_MAX] = '\0';
	ck_assert(rts_precheck_time_zone_valid(tz));
}
END_TEST

START_TEST(test_socket_path)
{
	ck_assert_uint_eq(rts_precheck_sock_path_len("/run/rts"), strlen("/run/rts/precheck-0123456789abcdef/broker/broker.sock"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("precheck");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_absent_and_defaults);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_grants_first_match);
	tcase_add_test(tc, test_approvals);
	tcase_add_test(tc, test_approval_shapes);
	tcase_add_test(tc, test_dates);
	tcase_add_test(tc, test_zone_names);
	tcase_add_test(tc, test_socket_path);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
