/* SPDX-License-Identifier: Apache-2.0 */
/* statd's message validation and routing (statd/request.h): every way a message request
 * can be wrong, and that none of them routes "pass" for a channel that is on, nor
 * "sandbox" at all (DESIGN.md section 5, routing fails closed). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/proto.h"
#include "common/util.h"
#include "statd/request.h"

#define BASE                                                                                                        \
	"{\"op\":\"message\",\"id\":\"m1\",\"channel\":\"guild-1/c\",\"guild\":true,\"addressed\":true,"            \
	"\"text\":\"hello\",\"attachments\":0,\"author\":{\"id\":\"42\",\"name\":\"Alice\",\"principalId\":\"p42\"," \
	"\"tier\":\"member\",\"bot\":false,\"integration\":false}}"

#define DELETE "<delete>"

static json_object *base_message(void)
{
	json_object *o = json_tokener_parse(BASE);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* A string of n copies of c (caller frees). */
static char *repeat(char c, size_t n)
{
	char *s = rts_xmalloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* The object holding member path ("KEY" of the request, or "author.KEY" of its author);
 * *key receives KEY. */
static json_object *holder(json_object *req, const char *path, const char **key)
{
	if (strncmp(path, "author.", 7) == 0) {
		*key = path + 7;
		return rts_json_get(req, "author");
	}
	*key = path;
	return req;
}

/* Set member path to the JSON value text ("null" included), or delete it when text is
 * DELETE. */
static void mutate(json_object *req, const char *path, const char *text)
{
	const char *key;
	json_object *o = holder(req, path, &key);
	if (strcmp(text, DELETE) == 0) {
		json_object_object_del(o, key);
		return;
	}
	json_object *v = json_tokener_parse(text);
	ck_assert_msg(v || strcmp(text, "null") == 0, "bad test value %s", text);
	json_object_object_add(o, key, v);
}

/* Set member path to the string value (len bytes, NULs included). */
static void mutate_str(json_object *req, const char *path, const char *value, size_t len)
{
	const char *key;
	json_object *o = holder(req, path, &key);
	json_object_object_add(o, key, json_object_new_string_len(value, (int)len));
}

struct bad_case {
	const char *path;
	const char *value; /* JSON text, or DELETE */
	const char *code;
	const char *detail_has; /* a word the detail must contain: names the rule */
	bool channel_known;	/* the channel can still be read */
	bool id_known;
};

static const struct bad_case bad_cases[] = {
	/* id */
	{"id", DELETE, STATD_E_INVALID_REQUEST, "id is required", true, false},
	{"id", "1.5", STATD_E_INVALID_REQUEST, "id must be", true, false},
	{"id", "true", STATD_E_INVALID_REQUEST, "id must be", true, false},
	{"id", "[1]", STATD_E_INVALID_REQUEST, "id must be", true, false},
	{"id", "{}", STATD_E_INVALID_REQUEST, "id must be", true, false},
	{"id", "9007199254740992", STATD_E_INVALID_REQUEST, "id must be", true, false},
	/* channel */
	{"channel", DELETE, STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "null", STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "7", STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "true", STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "[\"guild-1/c\"]", STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "{\"k\":\"guild-1/c\"}", STATD_E_INVALID_REQUEST, "channel", false, true},
	{"channel", "\"\"", STATD_E_INVALID_REQUEST, "channel", false, true},
	/* an unknown member, at the top and in author */
	{"thread", "true", STATD_E_INVALID_REQUEST, "unknown field", true, true},
	{"author.role", "\"admin\"", STATD_E_INVALID_REQUEST, "author has an unknown field", true, true},
	/* guild, addressed */
	{"guild", DELETE, STATD_E_INVALID_REQUEST, "guild", true, true},
	{"guild", "1", STATD_E_INVALID_REQUEST, "guild", true, true},
	{"guild", "\"true\"", STATD_E_INVALID_REQUEST, "guild", true, true},
	{"guild", "null", STATD_E_INVALID_REQUEST, "guild", true, true},
	{"addressed", DELETE, STATD_E_INVALID_REQUEST, "addressed", true, true},
	{"addressed", "0", STATD_E_INVALID_REQUEST, "addressed", true, true},
	{"addressed", "\"yes\"", STATD_E_INVALID_REQUEST, "addressed", true, true},
	/* author */
	{"author", DELETE, STATD_E_INVALID_REQUEST, "author is required", true, true},
	{"author", "\"42\"", STATD_E_INVALID_REQUEST, "author must be", true, true},
	{"author", "[]", STATD_E_INVALID_REQUEST, "author must be", true, true},
	{"author", "false", STATD_E_INVALID_REQUEST, "author must be", true, true},
	{"author.id", DELETE, STATD_E_INVALID_REQUEST, "author.id", true, true},
	{"author.id", "42", STATD_E_INVALID_REQUEST, "author.id", true, true},
	{"author.id", "\"\"", STATD_E_INVALID_REQUEST, "author.id", true, true},
	{"author.id", "null", STATD_E_INVALID_REQUEST, "author.id", true, true},
	{"author.name", DELETE, STATD_E_INVALID_REQUEST, "author.name", true, true},
	{"author.name", "[\"Alice\"]", STATD_E_INVALID_REQUEST, "author.name", true, true},
	{"author.name", "\"\"", STATD_E_INVALID_REQUEST, "author.name", true, true},
	{"author.principalId", "17", STATD_E_INVALID_REQUEST, "author.principalId", true, true},
	{"author.principalId", "{}", STATD_E_INVALID_REQUEST, "author.principalId", true, true},
	{"author.tier", "1", STATD_E_INVALID_REQUEST, "author.tier", true, true},
	{"author.tier", "true", STATD_E_INVALID_REQUEST, "author.tier", true, true},
	{"author.bot", DELETE, STATD_E_INVALID_REQUEST, "author.bot", true, true},
	{"author.bot", "\"false\"", STATD_E_INVALID_REQUEST, "author.bot", true, true},
	{"author.bot", "null", STATD_E_INVALID_REQUEST, "author.bot", true, true},
	{"author.integration", DELETE, STATD_E_INVALID_REQUEST, "author.integration", true, true},
	{"author.integration", "0", STATD_E_INVALID_REQUEST, "author.integration", true, true},
	/* text */
	{"text", DELETE, STATD_E_INVALID_REQUEST, "text must be a string", true, true},
	{"text", "null", STATD_E_INVALID_REQUEST, "text must be a string", true, true},
	{"text", "42", STATD_E_INVALID_REQUEST, "text must be a string", true, true},
	{"text", "[\"hello\"]", STATD_E_INVALID_REQUEST, "text must be a string", true, true},
	/* attachments (optional) */
	{"attachments", "\"1\"", STATD_E_INVALID_REQUEST, "attachments", true, true},
	{"attachments", "1.5", STATD_E_INVALID_REQUEST, "attachments", true, true},
	{"attachments", "-1", STATD_E_INVALID_REQUEST, "attachments", true, true},
	{"attachments", "4294967296", STATD_E_INVALID_REQUEST, "attachments", true, true},
	{"attachments", "true", STATD_E_INVALID_REQUEST, "attachments", true, true},
};

/* The routes of a request statd_message_parse() refused, in a channel that is on and off;
 * checks the refusal names the rule. */
static void check_refused(json_object *req, const char *code, const char *detail_has, bool channel_known,
			  bool id_known, const char *label)
{
	struct statd_message m;
	const char *c = NULL, *d = NULL;
	ck_assert_msg(statd_message_parse(req, &m, &c, &d) == -EINVAL, "%s: accepted", label);
	ck_assert_msg(c && strcmp(c, code) == 0, "%s: code %s", label, c ? c : "(none)");
	ck_assert_msg(d && strstr(d, detail_has), "%s: detail \"%s\"", label, d ? d : "(none)");
	ck_assert_msg((m.channel != NULL) == channel_known, "%s: channel %s", label, m.channel ? "read" : "not read");
	ck_assert_msg((m.id != NULL) == id_known, "%s: id %s", label, m.id ? "read" : "not read");

	enum statd_route on = statd_message_route(&m, false, STATD_MODE_ON);
	enum statd_route off = statd_message_route(&m, false, STATD_MODE_OFF);
	ck_assert_msg(on == STATD_ROUTE_DROP, "%s: %s in a channel that is on", label, statd_route_name(on));
	/* pass only where the channel is known off and the answer can be matched. */
	enum statd_route want_off = channel_known && id_known ? STATD_ROUTE_PASS : STATD_ROUTE_DROP;
	ck_assert_msg(off == want_off, "%s: %s in a channel that is off", label, statd_route_name(off));
}

START_TEST(test_each_bad_field)
{
	const struct bad_case *bc = &bad_cases[_i];
	cleanup_json json_object *req = base_message();
	mutate(req, bc->path, bc->value);
	char label[128];
	snprintf(label, sizeof(label), "%s = %s", bc->path, bc->value);
	check_refused(req, bc->code, bc->detail_has, bc->channel_known, bc->id_known, label);
}
END_TEST

/* Each length bound, one byte past it; exactly at it the request is valid. */
START_TEST(test_length_bounds)
{
	static const struct {
		const char *path;
		size_t max;
		const char *code, *detail_has;
		bool channel_known;
	} bounds[] = {
		{"channel", RTS_CHANNEL_MAX, STATD_E_INVALID_REQUEST, "channel", false},
		{"author.id", RTS_SPEAKER_FIELD_MAX, STATD_E_INVALID_REQUEST, "author.id", true},
		{"author.name", RTS_SPEAKER_FIELD_MAX, STATD_E_INVALID_REQUEST, "author.name", true},
		{"author.principalId", RTS_SPEAKER_FIELD_MAX, STATD_E_INVALID_REQUEST, "author.principalId", true},
		{"author.tier", RTS_SPEAKER_FIELD_MAX, STATD_E_INVALID_REQUEST, "author.tier", true},
		/* The longest text of any mode; each mode's own: check_statd_rich.c. */
		{"text", RTS_RICH_TEXT_BYTES_MAX, STATD_E_TEXT_TOO_LONG, "longer than", true},
	};
	for (size_t k = 0; k < RTS_ARRAY_SIZE(bounds); k++) {
		cleanup_free char *at = repeat('x', bounds[k].max);
		cleanup_free char *over = repeat('x', bounds[k].max + 1);
		cleanup_json json_object *ok = base_message();
		mutate_str(ok, bounds[k].path, at, bounds[k].max);
		struct statd_message m;
		const char *c, *d;
		ck_assert_msg(statd_message_parse(ok, &m, &c, &d) == 0, "%s at its bound: %s", bounds[k].path, d);
		ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_ON), STATD_ROUTE_SANDBOX);

		cleanup_json json_object *bad = base_message();
		mutate_str(bad, bounds[k].path, over, bounds[k].max + 1);
		check_refused(bad, bounds[k].code, bounds[k].detail_has, bounds[k].channel_known, true, bounds[k].path);
	}
}
END_TEST

/* "\u0000" survives JSON parsing: a NUL inside a string must not shorten it into another
 * (valid) value. Built with json-c directly, since the strict parser refuses it first. */
START_TEST(test_embedded_nul)
{
	static const struct {
		const char *path, *detail_has;
		bool channel_known;
	} cases[] = {
		{"channel", "channel", false},
		{"author.id", "author.id", true},
		{"author.name", "author.name", true},
		{"author.principalId", "author.principalId", true},
		{"text", "NUL", true},
	};
	for (size_t k = 0; k < RTS_ARRAY_SIZE(cases); k++) {
		cleanup_json json_object *req = base_message();
		mutate_str(req, cases[k].path, "guild-1/c\0x", 11);
		check_refused(req, STATD_E_INVALID_REQUEST, cases[k].detail_has, cases[k].channel_known, true,
			      cases[k].path);
	}
	cleanup_json json_object *req = base_message();
	mutate_str(req, "id", "m1\0x", 4);
	check_refused(req, STATD_E_INVALID_REQUEST, "id must be", true, false, "id with NUL");
}
END_TEST

/* The id and the channel are read whatever else is wrong, even everything. */
START_TEST(test_channel_read_before_anything_else)
{
	cleanup_json json_object *req = json_tokener_parse("{\"op\":\"message\",\"id\":7,\"channel\":\"c\",\"x\":1}");
	check_refused(req, STATD_E_INVALID_REQUEST, "unknown field", true, true, "only id and channel");
	cleanup_json json_object *bare = json_tokener_parse("{\"op\":\"message\"}");
	check_refused(bare, STATD_E_INVALID_REQUEST, "id is required", false, false, "nothing");
	cleanup_json json_object *no_id = json_tokener_parse("{\"op\":\"message\",\"channel\":\"c\",\"text\":7}");
	check_refused(no_id, STATD_E_INVALID_REQUEST, "id is required", true, false, "no id");
}
END_TEST

START_TEST(test_valid_message_routes)
{
	cleanup_json json_object *req = base_message();
	struct statd_message m;
	const char *c = "unset", *d = "unset";
	ck_assert_int_eq(statd_message_parse(req, &m, &c, &d), 0);
	ck_assert_ptr_null(c);
	ck_assert_ptr_null(d);
	ck_assert_str_eq(m.channel, "guild-1/c");
	ck_assert_str_eq(m.author_name, "Alice");
	ck_assert_str_eq(m.principal_id, "p42");
	ck_assert_str_eq(m.text, "hello");
	ck_assert(statd_message_eligible(&m));
	ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_ON), STATD_ROUTE_SANDBOX);
	ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_OFF), STATD_ROUTE_PASS);
	/* A mode that is neither on nor off is not off. */
	ck_assert_int_eq(statd_message_route(&m, true, (enum statd_mode)7), STATD_ROUTE_SANDBOX);
	ck_assert_int_eq(statd_message_route(&m, false, (enum statd_mode)7), STATD_ROUTE_DROP);
	/* Optional: attachments absent or null, principalId and tier null (then ineligible). */
	mutate(req, "attachments", DELETE);
	ck_assert_int_eq(statd_message_parse(req, &m, &c, &d), 0);
	mutate(req, "attachments", "null");
	ck_assert_int_eq(statd_message_parse(req, &m, &c, &d), 0);
}
END_TEST

/* Valid but not eligible: drop when on, pass when off. */
START_TEST(test_ineligible_messages_drop)
{
	static const struct {
		const char *path, *value;
	} cases[] = {
		{"guild", "false"},	      {"addressed", "false"},	   {"author", "null"},
		{"author.bot", "true"},	      {"author.integration", "true"}, {"author.tier", "null"},
		{"author.tier", "\"\""},      {"author.tier", DELETE},	   {"author.principalId", "null"},
		{"author.principalId", "\"\""}, {"author.principalId", DELETE},
	};
	for (size_t k = 0; k < RTS_ARRAY_SIZE(cases); k++) {
		cleanup_json json_object *req = base_message();
		mutate(req, cases[k].path, cases[k].value);
		struct statd_message m;
		const char *c, *d;
		ck_assert_msg(statd_message_parse(req, &m, &c, &d) == 0, "%s = %s: %s", cases[k].path, cases[k].value,
			      d);
		ck_assert_msg(!statd_message_eligible(&m), "%s = %s", cases[k].path, cases[k].value);
		ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_ON), STATD_ROUTE_DROP);
		ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_OFF), STATD_ROUTE_PASS);
	}
}
END_TEST

START_TEST(test_answer_shape)
{
	cleanup_json json_object *id = json_object_new_string("m1");
	cleanup_json json_object *a = statd_message_answer(id, STATD_ROUTE_DROP, STATD_E_QUEUE_FULL, "why");
	cleanup_free char *sa = rts_json_dump(a);
	ck_assert_str_eq(sa, "{\"id\":\"m1\",\"route\":\"drop\",\"error\":\"queue_full\",\"detail\":\"why\"}");
	cleanup_json json_object *b = statd_message_answer(NULL, STATD_ROUTE_DROP, STATD_E_LINE_TOO_LONG, NULL);
	cleanup_free char *sb = rts_json_dump(b);
	ck_assert_str_eq(sb, "{\"route\":\"drop\",\"error\":\"line_too_long\"}");
	cleanup_json json_object *c = statd_message_answer(id, STATD_ROUTE_SANDBOX, NULL, "ignored");
	cleanup_free char *sc = rts_json_dump(c);
	ck_assert_str_eq(sc, "{\"id\":\"m1\",\"route\":\"sandbox\"}");
	/* An out-of-range route is named "drop", never "pass". */
	ck_assert_str_eq(statd_route_name((enum statd_route)99), "drop");
	ck_assert_str_eq(statd_route_name(STATD_ROUTE_PASS), "pass");
}
END_TEST

static Suite *request_suite(void)
{
	Suite *s = suite_create("statd_request");
	TCase *tc = tcase_create("refusals");
	tcase_add_loop_test(tc, test_each_bad_field, 0, (int)RTS_ARRAY_SIZE(bad_cases));
	tcase_add_test(tc, test_length_bounds);
	tcase_add_test(tc, test_embedded_nul);
	tcase_add_test(tc, test_channel_read_before_anything_else);
	suite_add_tcase(s, tc);
	tc = tcase_create("routes");
	tcase_add_test(tc, test_valid_message_routes);
	tcase_add_test(tc, test_ineligible_messages_drop);
	tcase_add_test(tc, test_answer_shape);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(request_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
