/* SPDX-License-Identifier: Apache-2.0 */
/* brokerd's metrics text (brokerd/audit.c): the rich routes are series of their own, an
 * unknown route counts as "other", and the text stays within what one BROKER_METRICS_TEXT
 * carries even with every series present and every value at its widest. */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/audit.h"
#include "common/proto.h"
#include "common/util.h"

static const char *const routes[] = {"model",	     "fetch",	  "tool",	  "mcp",	  "precheck",
				     "none",	     "rich_model", "rich_count_tokens", "rich_mcp", "rich_tool",
				     "rich_worker", "rich_compact", "rich_none", "rich_attachment", "nonsense"};

START_TEST(test_rich_routes_are_their_own_series)
{
	brokerd_metrics_call("rich_model", BROKERD_OK);
	brokerd_metrics_call("rich_model", BROKERD_OK);
	brokerd_metrics_call("model", BROKERD_OK);
	brokerd_metrics_call("a route nobody named", BROKERD_FORBIDDEN);
	brokerd_metrics_upstream("anthropic", 3000, false, true);
	cleanup_free char *text = brokerd_metrics_render(0);
	ck_assert_ptr_nonnull(strstr(text, "{route=\"rich_model\",decision=\"allowed\",result=\"ok\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text, "{route=\"model\",decision=\"allowed\",result=\"ok\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "{route=\"other\",decision=\"refused\",result=\"forbidden\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text, "roundtable_sandbox_upstream_seconds_count{upstream=\"anthropic\"} 1\n"));
	ck_assert_ptr_null(strstr(text, "a route nobody named"));
}
END_TEST

START_TEST(test_the_widest_text_fits_one_message)
{
	for (size_t r = 0; r < RTS_ARRAY_SIZE(routes); r++)
		for (int c = 0; c <= BROKERD_RESULT_MAX_; c++)
			brokerd_metrics_call(routes[r], (enum brokerd_result)c);
	const char *const upstreams[] = {"model", "mcp", "anthropic"};
	for (size_t u = 0; u < RTS_ARRAY_SIZE(upstreams); u++) {
		brokerd_metrics_upstream(upstreams[u], 1000, true, true);
		brokerd_metrics_upstream(upstreams[u], 1000, false, true);
		brokerd_metrics_upstream(upstreams[u], 1000, false, false);
	}
	cleanup_free char *text = brokerd_metrics_render(UINT32_MAX);
	/* Every sample's value could be up to 20 digits wide (a counter near 2^64). */
	size_t samples = 0;
	for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
		if (*p != '#')
			samples++;
		ck_assert_ptr_nonnull(strchr(p, '\n'));
	}
	ck_assert_uint_lt(strlen(text) + samples * 20u, RTS_METRICS_TEXT_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_audit");
	TCase *tc = tcase_create("metrics");
	tcase_add_test(tc, test_rich_routes_are_their_own_series);
	tcase_add_test(tc, test_the_widest_text_fits_one_message);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
