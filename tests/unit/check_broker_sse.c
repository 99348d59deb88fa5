/* SPDX-License-Identifier: Apache-2.0 */
/* One server-sent event (brokerd/sse.h): what a precheck's MCP upstream may answer. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/sse.h"
#include "common/util.h"

static int one(const char *body, char **data)
{
	size_t len;
	const char *why;
	return brokerd_sse_one_event(body, strlen(body), data, &len, &why);
}

START_TEST(test_one_event)
{
	const struct {
		const char *body, *data;
	} ok[] = {
		{"data: {\"a\":1}\n\n", "{\"a\":1}"},
		{"event: message\ndata: {\"a\":1}\n\n", "{\"a\":1}"},
		{"event:message\r\ndata:x\r\n\r\n", "x"},
		{"data: a\rdata: b\r\r", "a\nb"},
		{"\xef\xbb\xbf" "data: x\n\n", "x"},
		{": keep-alive\nid: 7\nretry: 100\ndata:  two spaces\n\n", " two spaces"},
		{"data\n\n", ""},
		/* Events without data are nothing; comments and ids after the event are fine. */
		{"event: message\n\ndata: x\n\n: bye\nid: 8\n\n", "x"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		char *data = NULL;
		ck_assert_msg(one(ok[i].body, &data) == 0, "refused #%zu", i);
		ck_assert_str_eq(data, ok[i].data);
		free(data);
	}
}
END_TEST

START_TEST(test_refused)
{
	const char *bad[] = {
		"",
		"\n\n",
		": only a comment\n\n",
		"data: x\n",			    /* not dispatched */
		"data: x",
		"data: a\n\ndata: b\n\n",	    /* two events */
		"data: a\n\ndata: b\n",		    /* a second one, not dispatched */
		"event: other\ndata: x\n\n",	    /* another type */
		"event: messages\ndata: x\n\n",
		"Data: x\n\n",			    /* field names are case-sensitive: unknown */
		"data: x\nfoo: y\n\n",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		char *data = (char *)"unchanged";
		ck_assert_msg(one(bad[i], &data) == -EINVAL, "accepted #%zu", i);
		ck_assert_ptr_null(data);
	}
	/* A NUL anywhere. */
	char *data;
	size_t len;
	const char *why;
	ck_assert_int_eq(brokerd_sse_one_event("data: a\0b\n\n", 11, &data, &len, &why), -EINVAL);
	ck_assert_str_eq(why, "a NUL byte");
}
END_TEST

START_TEST(test_content_type)
{
	ck_assert(brokerd_content_type_is_sse("text/event-stream"));
	ck_assert(brokerd_content_type_is_sse("Text/Event-Stream; charset=utf-8"));
	ck_assert(!brokerd_content_type_is_sse("text/event-streams"));
	ck_assert(!brokerd_content_type_is_sse("application/json"));
	ck_assert(!brokerd_content_type_is_sse(NULL));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_sse");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_one_event);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_content_type);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
