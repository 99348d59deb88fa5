/* SPDX-License-Identifier: Apache-2.0 */
/* The request-head gate (brokerd/head.c): what passes, what is refused and when, framing
 * facts, and the gate's own canned answers. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/gate.h"
#include "brokerd/head.h"
#include "common/util.h"

#define GOOD                                                                                                           \
	"POST /model HTTP/1.1\r\n"                                                                                     \
	"Host: broker\r\n"                                                                                             \
	"Authorization: Bearer roundtable-sandbox-dummy-key\r\n"                                                       \
	"Content-Type: application/json\r\n"                                                                           \
	"Content-Length: 17\r\n"                                                                                       \
	"\r\n"

static enum brokerd_head_verdict scan(const char *s, struct brokerd_head *h)
{
	return brokerd_head_scan(s, strlen(s), h);
}

START_TEST(test_good_head)
{
	struct brokerd_head h;
	const char *text = GOOD "{\"body\":\"bytes\"}";
	ck_assert_int_eq(scan(text, &h), BROKERD_HEAD_COMPLETE);
	ck_assert_uint_eq(h.len, strlen(GOOD));
	ck_assert_uint_eq(h.content_length, 17);
	ck_assert_uint_eq(h.target_len, 6);
	ck_assert(memcmp(h.target, "/model", 6) == 0);
	ck_assert_ptr_eq(h.target, text + 5);
}
END_TEST

/* Every proper prefix of a good head is valid so far: the gate waits for more. */
START_TEST(test_prefixes_are_incomplete)
{
	struct brokerd_head h;
	for (size_t n = 0; n < strlen(GOOD); n++)
		ck_assert_msg(brokerd_head_scan(GOOD, n, &h) == BROKERD_HEAD_INCOMPLETE, "prefix of %zu bytes", n);
}
END_TEST

START_TEST(test_good_variants)
{
	static const char *const good[] = {
		/* names are case-insensitive, OWS around values is not part of them */
		"POST /tools/x HTTP/1.1\r\nhost: broker\r\ncontent-length:0\r\n\r\n",
		"POST /m HTTP/1.1\r\nHost:\tbroker \t\r\nContent-Length: \t5 \r\n\r\n",
		/* any token method and any visible target: routing refuses them later */
		"GET * HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n",
		"X-Y!#$%&'*+.^_`|~ http://a/b?c#d HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n",
	};
	struct brokerd_head h;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(good); i++)
		ck_assert_msg(scan(good[i], &h) == BROKERD_HEAD_COMPLETE, "refused: %s (%s)", good[i], h.why);
}
END_TEST

#define B(name, lit) {name, lit, sizeof(lit) - 1}
static const struct {
	const char *name;
	const char *text;
	size_t len;
} bad[] = {
	B("bare LF ends the request line", "POST /model HTTP/1.1\nHost: broker\r\nContent-Length: 0\r\n\r\n"),
	B("bare LF ends a field", "POST /model HTTP/1.1\r\nHost: broker\nContent-Length: 0\r\n\r\n"),
	B("bare LF ends the head", "POST /model HTTP/1.1\r\nHost: broker\r\nContent-Length: 0\r\n\n"),
	B("CR without LF", "POST /model HTTP/1.1\r\nHost: bro\rker\r\nContent-Length: 0\r\n\r\n"),
	B("obs-fold with SP", "POST /model HTTP/1.1\r\nHost: broker\r\n x\r\nContent-Length: 0\r\n\r\n"),
	B("obs-fold with HTAB", "POST /model HTTP/1.1\r\nHost: broker\r\n\tx\r\nContent-Length: 0\r\n\r\n"),
	B("NUL in the target", "POST /mo\0del HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("NUL in a value", "POST /model HTTP/1.1\r\nHost: b\0\r\nContent-Length: 0\r\n\r\n"),
	B("control byte in a value", "POST /model HTTP/1.1\r\nHost: b\x01\r\nContent-Length: 0\r\n\r\n"),
	B("DEL in a value", "POST /model HTTP/1.1\r\nHost: b\x7f\r\nContent-Length: 0\r\n\r\n"),
	B("obs-text in a value", "POST /model HTTP/1.1\r\nHost: b\xc3\xa4\r\nContent-Length: 0\r\n\r\n"),
	B("byte >= 0x80 in the target", "POST /m\xff HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("HTAB in the request line", "POST\t/model HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("two spaces", "POST  /model HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("trailing space", "POST /model HTTP/1.1 \r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("empty line first", "\r\nPOST /model HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("no target", "POST HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("no version", "POST /model\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("method only", "POST\r\n\r\n"),
	B("HTTP/1.0", "POST /model HTTP/1.0\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("HTTP/1.10", "POST /model HTTP/1.10\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("http/1.1", "POST /model http/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("whitespace before the colon", "POST /model HTTP/1.1\r\nHost : b\r\nContent-Length: 0\r\n\r\n"),
	B("space in a name", "POST /model HTTP/1.1\r\nHo st: b\r\nContent-Length: 0\r\n\r\n"),
	B("empty name", "POST /model HTTP/1.1\r\n: b\r\nHost: b\r\nContent-Length: 0\r\n\r\n"),
	B("no colon", "POST /model HTTP/1.1\r\nHost\r\nContent-Length: 0\r\n\r\n"),
	B("Transfer-Encoding", "POST /model HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\n"),
	B("Transfer-Encoding and Content-Length",
	  "POST /model HTTP/1.1\r\nHost: b\r\nTRANSFER-ENCODING: identity\r\nContent-Length: 0\r\n\r\n"),
	B("no Content-Length", "POST /model HTTP/1.1\r\nHost: b\r\n\r\n"),
	B("two Content-Length", "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\ncontent-length: 0\r\n\r\n"),
	B("Content-Length list", "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length: 1,1\r\n\r\n"),
	B("Content-Length sign", "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length: +1\r\n\r\n"),
	B("Content-Length empty", "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length:\r\n\r\n"),
	B("Content-Length inner space", "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length: 1 2\r\n\r\n"),
	B("no Host", "POST /model HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
	B("two Host", "POST /model HTTP/1.1\r\nHost: b\r\nhost: b\r\nContent-Length: 0\r\n\r\n"),
};

START_TEST(test_bad_heads)
{
	struct brokerd_head h;
	ck_assert_msg(brokerd_head_scan(bad[_i].text, bad[_i].len, &h) == BROKERD_HEAD_INVALID, "accepted: %s",
		      bad[_i].name);
	ck_assert_ptr_nonnull(h.why);
}
END_TEST

/* A bad byte is refused as soon as it arrives, not when the head is complete. */
START_TEST(test_refused_early)
{
	static const char *const early[] = {
		"POST /mo\x01",
		"POST /model HTTP/1.1\n",
		"POST /model HTTP/1.1\r\nHost: b\r\n ",
		"POST /model HTTP/1.0",
		"POST /model HTTP/2",
		"\r\n",
		"POST /model HTTP/1.1\r\nHost: b\r\nX\rY",
		"POST /model HTTP/1.1\r\nHost \r",
	};
	struct brokerd_head h;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(early); i++)
		ck_assert_msg(scan(early[i], &h) == BROKERD_HEAD_INVALID, "not refused yet: %zu", i);
}
END_TEST

START_TEST(test_head_length_bound)
{
	struct brokerd_head h;
	/* A head of exactly BROKERD_HEAD_MAX bytes passes; one byte more does not. */
	const char *start = "POST /model HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nX-Pad: ";
	size_t fixed = strlen(start) + strlen("\r\n\r\n");
	char *buf = rts_xmalloc(BROKERD_HEAD_MAX + 64);
	for (size_t extra = 0; extra < 2; extra++) {
		size_t pad = BROKERD_HEAD_MAX - fixed + extra;
		size_t n = 0;
		memcpy(buf, start, strlen(start));
		n += strlen(start);
		memset(buf + n, 'a', pad);
		n += pad;
		memcpy(buf + n, "\r\n\r\n", 4);
		n += 4;
		enum brokerd_head_verdict v = brokerd_head_scan(buf, n, &h);
		ck_assert_int_eq(v, extra ? BROKERD_HEAD_INVALID : BROKERD_HEAD_COMPLETE);
		/* And without its end, at the limit, it can never complete. */
		if (extra == 0)
			ck_assert_int_eq(brokerd_head_scan(buf, BROKERD_HEAD_MAX - 1, &h), BROKERD_HEAD_INCOMPLETE);
	}
	memset(buf, 'a', BROKERD_HEAD_MAX + 64);
	memcpy(buf, "POST /", 6);
	ck_assert_int_eq(brokerd_head_scan(buf, BROKERD_HEAD_MAX + 64, &h), BROKERD_HEAD_INVALID);
	free(buf);
}
END_TEST

START_TEST(test_content_length_value)
{
	struct brokerd_head h;
	ck_assert_int_eq(scan("POST / HTTP/1.1\r\nHost: b\r\nContent-Length: 0262144\r\n\r\n", &h),
			 BROKERD_HEAD_COMPLETE);
	ck_assert_uint_eq(h.content_length, 262144);
	ck_assert_int_eq(scan("POST / HTTP/1.1\r\nHost: b\r\nContent-Length: 99999999999999999999999\r\n\r\n", &h),
			 BROKERD_HEAD_COMPLETE);
	ck_assert_uint_eq(h.content_length, UINT64_MAX);
}
END_TEST

/* Bytes after the head are not the gate's business (libmicrohttpd frames the body). */
START_TEST(test_after_the_head)
{
	struct brokerd_head h;
	static const char text[] = GOOD "\x00\x01\n garbage POST /x HTTP/1.1\r\n\r\n";
	ck_assert_int_eq(brokerd_head_scan(text, sizeof(text) - 1, &h), BROKERD_HEAD_COMPLETE);
	ck_assert_uint_eq(h.len, strlen(GOOD));
}
END_TEST

static void check_answer(enum brokerd_result r, const char *status_line, const char *body)
{
	const char *a = brokerd_gate_answer(r);
	ck_assert(strncmp(a, status_line, strlen(status_line)) == 0);
	const char *end = strstr(a, "\r\n\r\n");
	ck_assert_ptr_nonnull(end);
	ck_assert_str_eq(end + 4, body);
	char want[64];
	snprintf(want, sizeof(want), "\r\nContent-Length: %zu\r\n", strlen(body));
	ck_assert_ptr_nonnull(strstr(a, want));
	ck_assert_ptr_nonnull(strstr(a, "\r\nContent-Type: application/json\r\n"));
	ck_assert_ptr_nonnull(strstr(a, "\r\nConnection: close\r\n"));
	/* The gate's own answer passes its own check, as a response head would. */
	ck_assert(strstr(a, "\n\n") == NULL);
}

START_TEST(test_gate_answers)
{
	check_answer(BROKERD_BAD_REQUEST, "HTTP/1.1 400 ", "{\"error\":\"bad_request\"}");
	check_answer(BROKERD_TOO_LARGE, "HTTP/1.1 413 ", "{\"error\":\"too_large\"}");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_head");
	TCase *tc = tcase_create("head");
	tcase_add_test(tc, test_good_head);
	tcase_add_test(tc, test_prefixes_are_incomplete);
	tcase_add_test(tc, test_good_variants);
	tcase_add_loop_test(tc, test_bad_heads, 0, (int)RTS_ARRAY_SIZE(bad));
	tcase_add_test(tc, test_refused_early);
	tcase_add_test(tc, test_head_length_bound);
	tcase_add_test(tc, test_content_length_value);
	tcase_add_test(tc, test_after_the_head);
	tcase_add_test(tc, test_gate_answers);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
