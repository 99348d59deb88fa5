/* SPDX-License-Identifier: Apache-2.0 */
/* A precheck's broker (brokerd/precheck.h): the grant brokerd resolves from its own config,
 * the one route, and every refusal its handler makes before anything is sent upstream. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/keys.h"
#include "brokerd/precheck.h"
#include "common/json.h"
#include "common/log.h"
#include "common/strictjson.h"
#include "common/util.h"

static struct rts_config *cfg;

static void setup(void)
{
	const char *text =
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1\",\"precheck\":{\"image\":\"i\",\"maxCalls\":5,"
		"\"grants\":["
		"{\"channel\":\"g/1\",\"servers\":["
		"{\"name\":\"docs\",\"url\":\"https://d.invalid/\",\"tools\":[\"search\",\"fetch\"],"
		"\"token\":{\"env\":\"RTS_TEST_NO_SUCH_TOKEN\"}},"
		"{\"name\":\"cal\",\"url\":\"https://c.invalid/\",\"tools\":[\"events\"]}]},"
		"{\"servers\":[{\"name\":\"wiki\",\"url\":\"https://w.invalid/\",\"tools\":[\"page\"]}]}]}}";
	json_object *o = NULL;
	const char *why;
	ck_assert_int_eq(rts_json_parse(text, strlen(text), 16, &o, &why), 0);
	char err[512];
	cfg = rts_config_from_json(o, "t.json", err, sizeof(err));
	json_object_put(o);
	ck_assert_msg(cfg, "%s", err);
	unsetenv("RTS_TEST_NO_SUCH_TOKEN");
}

static void teardown(void)
{
	rts_config_free(cfg);
}

START_TEST(test_grant_resolved_here)
{
	struct brokerd_precheck *p = NULL;
	/* "search" by its hold-rule name, cal's tool as SERVER/TOOL; "fetch" not approved. */
	ck_assert_int_eq(brokerd_precheck_new(cfg, "g/1", "daily", "", "search\ncal/events\nwiki/page", &p), 0);
	ck_assert_uint_eq(brokerd_precheck_tools(p), 2);
	ck_assert_uint_eq(brokerd_precheck_max_calls(p), 5);
	const char *name;
	ck_assert_ptr_nonnull(brokerd_precheck_route(p, "/mcp/docs", &name));
	ck_assert_str_eq(name, "docs");
	ck_assert_ptr_nonnull(brokerd_precheck_route(p, "/mcp/cal", &name));
	/* wiki is the second grant's: the first grant matched, so it is not reachable. */
	ck_assert_ptr_null(brokerd_precheck_route(p, "/mcp/wiki", &name));
	const char *misses[] = {"/mcp/docs?x=1", "/mcp/docs/", "/mcp/doc", "/mcp/", "/mcp/docs#a", "/mcp/%64ocs",
				"/model", "/tools/docs", "mcp/docs", "/MCP/docs"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(misses); i++)
		ck_assert_msg(!brokerd_precheck_route(p, misses[i], &name), "%s routed", misses[i]);
	brokerd_precheck_free(p);

	/* No approvals: no server is reachable at all. */
	ck_assert_int_eq(brokerd_precheck_new(cfg, "g/1", "daily", "", "", &p), 0);
	ck_assert_uint_eq(brokerd_precheck_tools(p), 0);
	ck_assert_ptr_null(brokerd_precheck_route(p, "/mcp/docs", &name));
	brokerd_precheck_free(p);

	ck_assert_int_eq(brokerd_precheck_new(cfg, "g/1", "daily", "", "a/b/c", &p), -EINVAL);
	ck_assert_int_eq(brokerd_precheck_new(cfg, "g/1", "", "", "", &p), -EINVAL);
	ck_assert_ptr_null(p);
}
END_TEST

/* A call to server with body, as http.c hands it over. */
static enum brokerd_result call(struct brokerd_precheck *p, const char *server, const char *body)
{
	struct brokerd_binding b = {.turn_id = "0123456789abcdef", .channel = (char *)"g/1", .speaker_id = (char *)"",
				    .speaker_name = (char *)"", .principal_id = (char *)"",
				    .deadline_ms = rts_now_ms() + 60000};
	rts_channel_hash(b.channel, b.channel_hash);
	struct brokerd_keyring *keys = brokerd_keyring_new();
	struct brokerd_call c = {
		.cfg = cfg,
		.binding = &b,
		.precheck = p,
		.keys = keys,
		.name = server,
		.body = body,
		.body_len = strlen(body),
		.cancel = {.wake_fd = -1, .deadline_ms = b.deadline_ms},
	};
	char *answer = NULL;
	enum brokerd_result r = brokerd_precheck_handle(&c, &answer);
	ck_assert(r != BROKERD_OK);
	ck_assert_ptr_null(answer);
	brokerd_keyring_free(keys);
	return r;
}

#define CALL(tool) \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"" tool "\",\"arguments\":{}}}"

START_TEST(test_refusals_before_upstream)
{
	struct brokerd_precheck *p = NULL;
	ck_assert_int_eq(brokerd_precheck_new(cfg, "g/1", "daily", "", "search", &p), 0);
	ck_assert_int_eq(call(p, "docs", "[" CALL("search") "]"), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(call(p, "docs", CALL("search") CALL("search")), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(call(p, "docs", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"), BROKERD_FORBIDDEN);
	ck_assert_int_eq(call(p, "docs", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}"),
			 BROKERD_FORBIDDEN);
	ck_assert_int_eq(call(p, "docs", CALL("fetch")), BROKERD_FORBIDDEN); /* granted, not approved */
	ck_assert_int_eq(call(p, "docs", CALL("delete")), BROKERD_FORBIDDEN); /* not granted */
	ck_assert_int_eq(call(p, "docs", "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"search\","
					 "\"arguments\":{}}}"),
			 BROKERD_BAD_REQUEST); /* a notification */
	ck_assert_int_eq(call(p, "docs", "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"tools/call\"}"),
			 BROKERD_BAD_REQUEST); /* duplicate keys */
	ck_assert_int_eq(call(p, "cal", CALL("events")), BROKERD_NOT_FOUND); /* not approved: not routed either */
	/* The approved call passes every rule; its token source has nothing: refused, never sent. */
	ck_assert_int_eq(call(p, "docs", CALL("search")), BROKERD_UNAVAILABLE);
	brokerd_precheck_free(p);
}
END_TEST

int main(void)
{
	rts_log_set_max_priority(LOG_EMERG);
	rts_json_strict_init();
	Suite *s = suite_create("broker_precheck");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_grant_resolved_here);
	tcase_add_test(tc, test_refusals_before_upstream);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
