/* SPDX-License-Identifier: Apache-2.0 */
/* The credential reflection filter: every encoding the seed names is caught, alone and
 * inside longer text, also after JSON decoding; ordinary answers and key look-alikes pass. */
#include "config.h"

#include <check.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/reflect.h"
#include "common/json.h"
#include "common/util.h"

/* Has characters a URL encoder changes ('/', '+', '=') and both letter cases. */
static const char KEY[] = "sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ";

static struct brokerd_reflect *r;

static void setup(void)
{
	r = brokerd_reflect_new(KEY, strlen(KEY));
	ck_assert_ptr_nonnull(r);
}

static void teardown(void)
{
	brokerd_reflect_free(r);
	r = NULL;
}

static bool hit(const char *text)
{
	return brokerd_reflect_text(r, text, strlen(text));
}

/* "The answer is <s>, bye" */
static char *wrap(const char *s)
{
	return rts_xasprintf("The answer is <%s>, bye", s);
}

static char *b64(const void *data, size_t len, bool url)
{
	char *out = rts_xmalloc(4 * ((len + 2) / 3) + 1);
	int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	if (url) {
		for (int i = 0; i < n; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
		while (n > 0 && out[n - 1] == '=')
			out[--n] = '\0';
	}
	return out;
}

static char *hex(const char *s, bool upper)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, upper ? "%02X" : "%02x", (unsigned char)s[i]);
	return out;
}

static char *pct(const char *s, bool every, bool upper)
{
	size_t n = strlen(s);
	char *out = rts_xmalloc(3 * n + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool keep = !every && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
				       c == '-' || c == '.' || c == '_' || c == '~');
		if (keep)
			*o++ = (char)c;
		else
			o += sprintf(o, upper ? "%%%02X" : "%%%02x", c);
	}
	*o = '\0';
	return out;
}

START_TEST(test_raw)
{
	ck_assert(hit(KEY));
	cleanup_free char *t = wrap(KEY);
	ck_assert(hit(t));
}
END_TEST

START_TEST(test_percent_forms)
{
	for (int every = 0; every < 2; every++)
		for (int upper = 0; upper < 2; upper++) {
			cleanup_free char *e = pct(KEY, every, upper);
			ck_assert_str_ne(e, KEY);
			cleanup_free char *t = wrap(e);
			ck_assert_msg(hit(t), "percent form every=%d upper=%d missed: %s", every, upper, e);
		}
}
END_TEST

START_TEST(test_hex_forms)
{
	for (int upper = 0; upper < 2; upper++) {
		cleanup_free char *e = hex(KEY, upper);
		cleanup_free char *t = wrap(e);
		ck_assert_msg(hit(t), "hex upper=%d missed", upper);
	}
}
END_TEST

/* The key alone, and at every byte alignment inside a longer encoded text such as the
 * base64 of "Authorization: Bearer <key>" (the loop index is the prefix length). */
START_TEST(test_base64_forms)
{
	int url = _i % 2;
	int prefix_len = _i / 2;
	cleanup_free char *plain = rts_xasprintf("%.*s%s and more text after it", prefix_len, "Bearer: ", KEY);
	cleanup_free char *e = b64(plain, strlen(plain), url);
	ck_assert_msg(hit(e), "base64%s with a %d-byte prefix missed: %s", url ? "url" : "", prefix_len, e);
	cleanup_free char *alone = b64(KEY, strlen(KEY), url);
	ck_assert(hit(alone));
	cleanup_free char *t = wrap(alone);
	ck_assert(hit(t));
}
END_TEST

/* The raw body carries \u escapes; the decoded string is the key. */
START_TEST(test_json_escaped)
{
	static const char body[] = "{\"choices\":[{\"message\":{\"content\":\"here: "
				   "\\u0073k\\u002dproj-Ab9\\/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ\"}}]}";
	ck_assert(!hit(body)); /* the raw text does not show it... */
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rts_json_parse(body, strlen(body), 64, &o, &why), 0);
	ck_assert(brokerd_reflect_json(r, o)); /* ...the decoded string does */
	json_object_put(o);
}
END_TEST

START_TEST(test_json_member_name_and_nested)
{
	cleanup_free char *e = hex(KEY, false);
	cleanup_free char *doc = rts_xasprintf("{\"a\":[1,true,null,{\"b\":\"x%sy\"}]}", e);
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 64, &o, &why), 0);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);

	cleanup_free char *doc2 = rts_xasprintf("{\"%s\":1}", KEY);
	ck_assert_int_eq(rts_json_parse(doc2, strlen(doc2), 64, &o, &why), 0);
	ck_assert(brokerd_reflect_json(r, o));
	json_object_put(o);
}
END_TEST

START_TEST(test_look_alikes_pass)
{
	static const char *const ok[] = {
		"Your key starts with sk-proj- and that is all I know.",
		"sk-...cdefQ",
		"sk-proj-Ab9/****************************defQ",
		/* one character changed */
		"sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefR",
		/* the first half only */
		"sk-proj-Ab9/Zq+x=Lm_7",
		"{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\"},"
		"\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3}}",
		"",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++)
		ck_assert_msg(!hit(ok[i]), "false positive on: %s", ok[i]);
	/* Encodings of half the key are not the key. */
	cleanup_free char *half = rts_xstrndup(KEY, strlen(KEY) / 2);
	cleanup_free char *h = hex(half, false);
	cleanup_free char *b = b64(half, strlen(half), false);
	ck_assert(!hit(h));
	ck_assert(!hit(b));
	ck_assert(!brokerd_reflect_json(r, NULL));
}
END_TEST

START_TEST(test_other_key_is_not_this_key)
{
	struct brokerd_reflect *other = brokerd_reflect_new("another-key-0000000000", 22);
	ck_assert(!brokerd_reflect_text(other, KEY, strlen(KEY)));
	brokerd_reflect_free(other);
}
END_TEST

START_TEST(test_short_key_raw_only)
{
	/* Encodings of a 3-byte key would be 4-6 characters and match ordinary text; the raw
	 * form is still searched. */
	struct brokerd_reflect *s = brokerd_reflect_new("k3y", 3);
	ck_assert(brokerd_reflect_text(s, "a k3y here", 10));
	ck_assert(!brokerd_reflect_text(s, "azN5 6b3379", 11)); /* base64 and hex of "k3y" */
	brokerd_reflect_free(s);
	ck_assert_ptr_null(brokerd_reflect_new("", 0));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_reflect");
	TCase *tc = tcase_create("reflect");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_raw);
	tcase_add_test(tc, test_percent_forms);
	tcase_add_test(tc, test_hex_forms);
	tcase_add_loop_test(tc, test_base64_forms, 0, 2 * 9);
	tcase_add_test(tc, test_json_escaped);
	tcase_add_test(tc, test_json_member_name_and_nested);
	tcase_add_test(tc, test_look_alikes_pass);
	tcase_add_test(tc, test_other_key_is_not_this_key);
	tcase_add_test(tc, test_short_key_raw_only);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
