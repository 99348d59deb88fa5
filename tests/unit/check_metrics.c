/* SPDX-License-Identifier: Apache-2.0 */
/* common/metrics.h: the lines the writer makes (Prometheus text format 0.0.4), histogram
 * buckets, and the check every daemon applies to a metrics text from a peer. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "common/util.h"

START_TEST(test_family_and_samples)
{
	struct rts_metrics_text t = {0};
	rts_metrics_family(&t, "x_total", "counter", "Things.");
	rts_metrics_sample(&t, "x_total", "a=\"b\"", 3);
	rts_metrics_sample(&t, "x_total", NULL, 18446744073709551615ull);
	char *s = rts_metrics_text_take(&t);
	ck_assert_str_eq(s, "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"b\"} 3\n"
			    "x_total 18446744073709551615\n");
	ck_assert(rts_metrics_text_valid(s, strlen(s), 4096));
	free(s);
	/* Nothing written: an empty text, which is valid. */
	s = rts_metrics_text_take(&t);
	ck_assert_str_eq(s, "");
	ck_assert(rts_metrics_text_valid(s, 0, 10));
	free(s);
}
END_TEST

START_TEST(test_histogram)
{
	static const uint32_t bounds[] = {5, 1000, 2500};
	struct rts_histogram h;
	rts_histogram_init(&h, bounds, RTS_ARRAY_SIZE(bounds));
	rts_histogram_observe(&h, 5000);    /* exactly 5 ms: in le="0.005" */
	rts_histogram_observe(&h, 5001);    /* just above */
	rts_histogram_observe(&h, 2000000); /* 2 s */
	rts_histogram_observe(&h, 9000000); /* 9 s: only +Inf */
	struct rts_metrics_text t = {0};
	rts_metrics_histogram(&t, "d_seconds", "k=\"v\"", &h);
	char *s = rts_metrics_text_take(&t);
	ck_assert_str_eq(s, "d_seconds_bucket{k=\"v\",le=\"0.005\"} 1\n"
			    "d_seconds_bucket{k=\"v\",le=\"1.000\"} 2\n"
			    "d_seconds_bucket{k=\"v\",le=\"2.500\"} 3\n"
			    "d_seconds_bucket{k=\"v\",le=\"+Inf\"} 4\n"
			    "d_seconds_sum{k=\"v\"} 11.010001\n"
			    "d_seconds_count{k=\"v\"} 4\n");
	free(s);
	rts_metrics_histogram(&t, "d_seconds", NULL, &h);
	s = rts_metrics_text_take(&t);
	ck_assert_ptr_nonnull(strstr(s, "d_seconds_bucket{le=\"+Inf\"} 4\nd_seconds_sum 11.010001\n"));
	free(s);
}
END_TEST

START_TEST(test_peer_text_check)
{
	ck_assert(rts_metrics_text_valid("a 1\nb 2\n", 8, 8));
	ck_assert(!rts_metrics_text_valid("a 1\nb 2\n", 8, 7));	 /* over the bound */
	ck_assert(!rts_metrics_text_valid("a 1", 3, 100));		 /* no final newline */
	ck_assert(!rts_metrics_text_valid("a\x1b[2J 1\n", 8, 100));	 /* a control byte */
	ck_assert(!rts_metrics_text_valid("a\t1\n", 4, 100));	 /* tab: not in our texts */
	ck_assert(!rts_metrics_text_valid("caf\xc3\xa9 1\n", 8, 100)); /* not ASCII */
	ck_assert(!rts_metrics_text_valid("a\x7f 1\n", 5, 100));
	ck_assert(!rts_metrics_text_valid("a\0 1\n", 5, 100));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("writer");
	tcase_add_test(tc, test_family_and_samples);
	tcase_add_test(tc, test_histogram);
	tcase_add_test(tc, test_peer_text_check);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
