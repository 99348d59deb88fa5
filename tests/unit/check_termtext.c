/* SPDX-License-Identifier: Apache-2.0 */
/* Untrusted text on the operator's terminal (common/termtext.h): what the CLI does to a
 * channel key, a guest's name or a reply before it reaches a tty. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/termtext.h"
#include "common/util.h"

/* rts_term_escape() of the len bytes at s into a new string (caller frees). */
static char *escaped(const char *s, size_t len, enum rts_term_text kind)
{
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	ck_assert_ptr_nonnull(f);
	rts_term_escape(f, s, len, kind);
	ck_assert_int_eq(fclose(f), 0);
	return out;
}

static char *json_escaped(const char *s)
{
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	ck_assert_ptr_nonnull(f);
	rts_term_json(f, s, strlen(s));
	ck_assert_int_eq(fclose(f), 0);
	return out;
}

#define ESCAPES(in, kind, want)                                                                                      \
	do {                                                                                                           \
		cleanup_free char *got_ = escaped((in), sizeof(in) - 1, (kind));                                    \
		ck_assert_str_eq(got_, (want));                                                                        \
	} while (0)

START_TEST(test_controls_and_backslash)
{
	/* A cursor move, a screen clear and a fake prompt on a new line. */
	ESCAPES("a\x1b[2Jb\rc", RTS_TERM_NAME, "a\\x1b[2Jb\\x0dc");
	ESCAPES("x\\x41", RTS_TERM_NAME, "x\\\\x41"); /* a literal "\x41" stays distinguishable */
	ESCAPES("del\x7f", RTS_TERM_NAME, "del\\x7f");
	ESCAPES("nul\0end", RTS_TERM_NAME, "nul\\x00end");
	/* Layout: newline and tab only in prose. */
	ESCAPES("l1\nl2\tt", RTS_TERM_NAME, "l1\\x0al2\\x09t");
	ESCAPES("l1\nl2\tt", RTS_TERM_PROSE, "l1\nl2\tt");
	ESCAPES("cr\r\n", RTS_TERM_PROSE, "cr\\x0d\n");
}
END_TEST

START_TEST(test_not_utf8)
{
	ESCAPES("\xff\xfe", RTS_TERM_NAME, "\\xff\\xfe");
	ESCAPES("\xc3(", RTS_TERM_NAME, "\\xc3(");           /* a missing continuation byte */
	ESCAPES("\xc0\xaf", RTS_TERM_NAME, "\\xc0\\xaf");    /* an overlong "/" */
	ESCAPES("\xed\xa0\x80", RTS_TERM_NAME, "\\xed\\xa0\\x80"); /* a surrogate */
	ESCAPES("caf\xc3\xa9 \xe6\x97\xa5", RTS_TERM_NAME, "caf\xc3\xa9 \xe6\x97\xa5"); /* text passes */
}
END_TEST

START_TEST(test_disguising_code_points)
{
	/* U+009B (a C1 CSI), U+202E (right-to-left override), U+2066 (an isolate). */
	ESCAPES("a\xc2\x9b" "2J", RTS_TERM_NAME, "a\\u009b2J");
	ESCAPES("\xe2\x80\xaegnp.exe", RTS_TERM_NAME, "\\u202egnp.exe");
	ESCAPES("\xe2\x81\xa6x\xe2\x81\xa9", RTS_TERM_NAME, "\\u2066x\\u2069");
	/* The marks U+200E/U+200F are ordinary in right-to-left prose. */
	ESCAPES("\xe2\x80\x8f", RTS_TERM_PROSE, "\xe2\x80\x8f");
	ck_assert(rts_term_disguises(0x80) && rts_term_disguises(0x9f) && !rts_term_disguises(0xa0));
	ck_assert(rts_term_disguises(0x202a) && !rts_term_disguises(0x2029) && !rts_term_disguises(0x202f));
	ck_assert(rts_term_disguises(0x2069) && !rts_term_disguises(0x2065) && !rts_term_disguises(0x206a));
}
END_TEST

/* A name shows every invisible code point, so two channel keys that differ only by one
 * never look the same; prose keeps the ones text uses. */
START_TEST(test_names_show_what_is_invisible)
{
	ESCAPES("guild-1/ops\xe2\x80\x8b", RTS_TERM_NAME, "guild-1/ops\\u200b");      /* zero-width space */
	ESCAPES("a\xc2\xad" "b", RTS_TERM_NAME, "a\\u00adb");                        /* soft hyphen */
	ESCAPES("\xef\xbb\xbfkey", RTS_TERM_NAME, "\\ufeffkey");                  /* byte order mark */
	ESCAPES("ops\xf3\xa0\x80\x81", RTS_TERM_NAME, "ops\\U000e0001");           /* a tag character */
	ESCAPES("\xe2\x80\x8f", RTS_TERM_NAME, "\\u200f");                       /* a mark, in a name */
	/* A family emoji (joined by U+200D) and a soft hyphen in a reply stay. */
	ESCAPES("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa7 a\xc2\xad" "b", RTS_TERM_PROSE,
		"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa7 a\xc2\xad" "b");
	/* What disguises is escaped in both. */
	ESCAPES("\xe2\x80\xae", RTS_TERM_PROSE, "\\u202e");
}
END_TEST

START_TEST(test_json)
{
	/* Only the disguising code points change; the rest, escapes included, is json-c's. */
	cleanup_free char *a = json_escaped("{\"name\":\"\xe2\x80\xae" "cba\",\"n\":\"\\u001b\"}");
	ck_assert_str_eq(a, "{\"name\":\"\\u202ecba\",\"n\":\"\\u001b\"}");
	cleanup_free char *b = json_escaped("[\"\xc2\x85\",\"\xc3\xa9\"]");
	ck_assert_str_eq(b, "[\"\\u0085\",\"\xc3\xa9\"]");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("termtext");
	TCase *tc = tcase_create("termtext");
	tcase_add_test(tc, test_controls_and_backslash);
	tcase_add_test(tc, test_not_utf8);
	tcase_add_test(tc, test_disguising_code_points);
	tcase_add_test(tc, test_names_show_what_is_invisible);
	tcase_add_test(tc, test_json);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
