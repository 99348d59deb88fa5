/* SPDX-License-Identifier: Apache-2.0 */
/* host_fetch's answer as the model reads it (brokerd/fetch.h), without sockets: the media
 * type taken from a Content-Type value, what counts as text, and the result text with its
 * head, its cut at the tool result bound and its refusal sentences. The route itself runs
 * through real daemons in tests/integration/test_host_fetch.py. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/fetch.h"
#include "common/limits.h"
#include "common/util.h"

START_TEST(test_media_type)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"text/html", "text/html"},
		{"text/html; charset=utf-8", "text/html"},
		{"Text/HTML;charset=UTF-8", "text/html"},
		{"  application/json", "application/json"},
		{"text/html ; charset=utf-8", "text/html"},
		{"application/vnd.api+json", "application/vnd.api+json"},
		{"", ""},
		{"text", ""},
		{"text/", ""},
		{"/html", ""},
		{"text/html/x", ""},
		{"text/html garbage", ""},
		{"text/html\r\nX-Injected: 1", ""},
		{"text/h\x01tml", ""},
		{"text/h\xc3\xa9ml", ""},
		{"text/html,image/png", ""},
		{"/~/~", ""}, /* found by fuzz_fetch_answer: a leading slash */
		{"//", ""},
		{"a//b", ""},
	};
	char out[128];
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		brokerd_fetch_media_type(cases[i].in, out, sizeof(out));
		ck_assert_msg(strcmp(out, cases[i].out) == 0, "'%s' -> '%s', expected '%s'", cases[i].in, out,
			      cases[i].out);
	}
	brokerd_fetch_media_type(NULL, out, sizeof(out));
	ck_assert_str_eq(out, "");
	/* Longer than the buffer: nothing, never a cut type. */
	cleanup_free char *longer = rts_xasprintf("text/%0200d", 0);
	brokerd_fetch_media_type(longer, out, sizeof(out));
	ck_assert_str_eq(out, "");
	char small[10];
	brokerd_fetch_media_type("text/plain", small, sizeof(small));
	ck_assert_str_eq(small, "");
	brokerd_fetch_media_type("text/html", small, sizeof(small));
	ck_assert_str_eq(small, "text/html");
}
END_TEST

START_TEST(test_classify)
{
	static const char *const textual[] = {
		"", "text/plain", "text/html", "text/csv", "text/x-unknown", "application/json", "application/xml",
		"application/javascript", "application/ld+json", "application/xhtml+xml", "application/rss+xml",
		"image/svg+xml", "application/yaml", "application/x-www-form-urlencoded", "application/x-ndjson",
	};
	static const char *const binary[] = {
		"image/png", "application/octet-stream", "application/pdf", "application/zip", "audio/mpeg",
		"video/mp4", "font/woff2", "application/x-protobuf", "multipart/form-data", "application/jsonx",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(textual); i++)
		ck_assert_msg(brokerd_fetch_classify(textual[i], "h\xc3\xa9llo", 6) == BROKERD_FETCH_TEXT, "%s",
			      textual[i]);
	for (size_t i = 0; i < RTS_ARRAY_SIZE(binary); i++)
		ck_assert_msg(brokerd_fetch_classify(binary[i], "hello", 5) == BROKERD_FETCH_BINARY, "%s", binary[i]);
	/* Text types whose bytes are not UTF-8, or hold a NUL, are not passed on as text. */
	ck_assert_int_eq(brokerd_fetch_classify("text/plain", "caf\xe9", 4), BROKERD_FETCH_NOT_UTF8);
	ck_assert_int_eq(brokerd_fetch_classify("text/plain", "a\0b", 3), BROKERD_FETCH_NOT_UTF8);
	ck_assert_int_eq(brokerd_fetch_classify("", "\x89PNG\r\n", 6), BROKERD_FETCH_NOT_UTF8);
	ck_assert_int_eq(brokerd_fetch_classify("text/plain", "\xed\xa0\x80", 3), BROKERD_FETCH_NOT_UTF8);
	ck_assert_int_eq(brokerd_fetch_classify("text/plain", "", 0), BROKERD_FETCH_TEXT);
}
END_TEST

static char *result(long status, const char *url, const char *ct, const char *body, size_t len, size_t max,
		    enum brokerd_fetch_content *content)
{
	struct rts_fetch_result res = {
		.status = status, .body = (char *)body, .len = len, .final_url = (char *)url, .content_type = (char *)ct};
	return brokerd_fetch_result_text(&res, max, content);
}

START_TEST(test_result_text)
{
	enum brokerd_fetch_content c;
	cleanup_free char *t =
		result(200, "https://www.example.com/a", "text/plain; charset=utf-8", "hello", 5, RTS_UPSTREAM_ANSWER_MAX, &c);
	ck_assert_int_eq(c, BROKERD_FETCH_TEXT);
	ck_assert_str_eq(t, "HTTP status: 200\nURL: https://www.example.com/a\nContent-Type: text/plain\nLength: 5 "
			    "bytes\n\nhello");

	cleanup_free char *none = result(404, "http://www.example.com/", NULL, "", 0, RTS_UPSTREAM_ANSWER_MAX, &c);
	ck_assert_str_eq(none, "HTTP status: 404\nURL: http://www.example.com/\nContent-Type: (none given)\nLength: 0 "
			       "bytes\n\n");

	/* Binary content: the head and a sentence, none of the bytes. */
	cleanup_free char *bin =
		result(200, "https://www.example.com/i.png", "image/png", "\x89PNG\r\n\x1a\n", 8, RTS_UPSTREAM_ANSWER_MAX, &c);
	ck_assert_int_eq(c, BROKERD_FETCH_BINARY);
	ck_assert_str_eq(bin, "HTTP status: 200\nURL: https://www.example.com/i.png\nContent-Type: image/png\nLength: 8 "
			      "bytes\n\nNot shown: this is binary content, not text; host_fetch returns text only.");
	cleanup_free char *latin = result(200, "https://www.example.com/l", "text/plain; charset=iso-8859-1", "caf\xe9", 4,
					  RTS_UPSTREAM_ANSWER_MAX, &c);
	ck_assert_int_eq(c, BROKERD_FETCH_NOT_UTF8);
	ck_assert_ptr_nonnull(strstr(latin, "\n\nNot shown: this content is not UTF-8 text"));
	ck_assert_ptr_null(strstr(latin, "caf"));
}
END_TEST

/* A body longer than the bound is cut at a character boundary so that the whole text is
 * at most max bytes, and the head says how much follows. */
START_TEST(test_result_cut)
{
	size_t max = RTS_UPSTREAM_ANSWER_MAX;
	for (size_t lead = 0; lead < 3; lead++) {
		/* lead ASCII bytes, then two-byte characters, so the cut falls at either parity. */
		size_t len = 3u * max / 2u;
		char *body = rts_xmalloc(len + 1);
		memset(body, 'a', lead);
		for (size_t i = lead; i + 1 < len; i += 2) {
			body[i] = (char)0xc3;
			body[i + 1] = (char)0xa9;
		}
		if ((len - lead) % 2)
			len--;
		body[len] = '\0';
		enum brokerd_fetch_content c;
		cleanup_free char *t = result(200, "https://www.example.com/big", "text/plain", body, len, max, &c);
		ck_assert_int_eq(c, BROKERD_FETCH_TEXT);
		size_t n = strlen(t);
		ck_assert_uint_le(n, max);
		ck_assert_uint_ge(n, max - 8);
		ck_assert(rts_utf8_valid(t, n));
		const char *sep = strstr(t, "\n\n");
		ck_assert_ptr_nonnull(sep);
		size_t shown = strlen(sep + 2);
		cleanup_free char *note = rts_xasprintf(" (cut: the first %zu bytes follow)\n\n", shown);
		ck_assert_msg(strstr(t, note) == sep - strlen(note) + 2, "%.300s", t);
		cleanup_free char *length = rts_xasprintf("\nLength: %zu bytes (cut", len);
		ck_assert_ptr_nonnull(strstr(t, length));
		ck_assert_int_eq(memcmp(sep + 2, body, shown), 0);
		free(body);
	}

	/* A body that fits exactly is not cut. */
	enum brokerd_fetch_content c;
	cleanup_free char *head = result(200, "https://www.example.com/x", "text/plain", "", 0, max, &c);
	size_t room = max - strlen(head) + strlen("0 bytes") - strlen("NNNNNNN bytes");
	char *body = rts_xmalloc(room + 1);
	memset(body, 'b', room);
	body[room] = '\0';
	cleanup_free char *t = result(200, "https://www.example.com/x", "text/plain", body, room, max, &c);
	ck_assert_uint_eq(strlen(t), max);
	ck_assert_ptr_null(strstr(t, "(cut"));
	free(body);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_fetch");
	TCase *tc = tcase_create("answer");
	tcase_add_test(tc, test_media_type);
	tcase_add_test(tc, test_classify);
	tcase_add_test(tc, test_result_text);
	tcase_add_test(tc, test_result_cut);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
