/* SPDX-License-Identifier: Apache-2.0 */
/* The validation tables (common/jspec.h): every JSON type, bound and store, missing and
 * unknown members, nested paths, list and map bounds, the callbacks, the order of the
 * checks and what messages may say in each mode. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/jspec.h"
#include "common/util.h"

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "does not parse: %s", text);
	return o;
}

/* Validate text against root (base may be NULL); returns 0 or -EINVAL with *e. */
static int run(const char *text, const struct rts_jfield *root, void *base, unsigned flags, struct rts_jerr *e)
{
	cleanup_json json_object *doc = parse(text);
	return rts_jspec_validate(doc, root, base, flags, e);
}

static void assert_ok(const char *text, const struct rts_jfield *root)
{
	struct rts_jerr e;
	ck_assert_msg(run(text, root, NULL, 0, &e) == 0, "%s refused: %s: %s", text, e.path, e.text);
}

/* Refused with this problem, path and text. */
static void assert_refused(const char *text, const struct rts_jfield *root, unsigned flags, enum rts_jproblem problem,
			   const char *path, const char *want)
{
	struct rts_jerr e;
	ck_assert_msg(run(text, root, NULL, flags, &e) == -EINVAL, "accepted: %s", text);
	ck_assert_msg(e.problem == problem, "%s: problem %d, want %d (%s: %s)", text, e.problem, problem, e.path,
		      e.text);
	ck_assert_msg(strcmp(e.path, path) == 0, "%s: path \"%s\", want \"%s\"", text, e.path, path);
	ck_assert_msg(strcmp(e.text, want) == 0, "%s: text \"%s\", want \"%s\"", text, e.text, want);
}

/* ---- scalars ---- */

struct scalars {
	bool b;
	int64_t i;
	uint32_t u;
	double d;
	const char *s;
	char *dup;
	int index;
	json_object *j;
	bool has_u;
};
#define S(m) offsetof(struct scalars, m)

static const char *const colours[] = {"red", "green", "blue", NULL};

static const struct rts_jspec scalar_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "b", .types = RTS_JT_BOOL, .store = RTS_JS_BOOL, .at = S(b)},
		{.key = "i", .types = RTS_JT_INT, .min = -5, .max = 5, .store = RTS_JS_INT64, .at = S(i)},
		{.key = "u", .types = RTS_JT_INT, .flags = RTS_JF_PRESENT, .min = 0, .max = UINT32_MAX,
		 .store = RTS_JS_UINT32, .at = S(u), .present_at = S(has_u)},
		{.key = "d", .types = RTS_JT_NUMBER, .dmin = 0.5, .dmax = 2.5, .store = RTS_JS_DOUBLE, .at = S(d)},
		{.key = "s", .types = RTS_JT_STRING, .min = 2, .max = 4, .store = RTS_JS_STR, .at = S(s)},
		{.key = "dup", .types = RTS_JT_STRING | RTS_JT_NULL, .max = 8, .store = RTS_JS_STRDUP, .at = S(dup)},
		{.key = "colour", .types = RTS_JT_STRING, .one_of = colours, .store = RTS_JS_INDEX, .at = S(index)},
		{.key = "j", .types = RTS_JT_OBJECT | RTS_JT_ARRAY, .store = RTS_JS_JSON, .at = S(j)},
		{.key = "one", .types = RTS_JT_INT, .min = 1, .max = 1},
		{.key = "nonempty", .types = RTS_JT_STRING, .min = 1},
		{.key = "any", .types = RTS_JT_STRING},
		{.key = "exact", .types = RTS_JT_STRING, .min = 3, .max = 3},
		{.key = "upto", .types = RTS_JT_STRING, .max = 3},
		{.key = "atleast", .types = RTS_JT_STRING, .min = 2},
		{.key = "utf8", .types = RTS_JT_STRING, .flags = RTS_JF_UTF8},
		{.key = "enc", .types = RTS_JT_STRING, .flags = RTS_JF_ENCODED, .max = 4},
		{0},
	},
};
static const struct rts_jfield scalar_root = RTS_JSPEC_ROOT(&scalar_spec);

START_TEST(test_stores)
{
	struct scalars v = {.dup = rts_xstrdup("old"), .index = -1};
	struct rts_jerr e;
	cleanup_json json_object *doc =
		parse("{\"b\":true,\"i\":-5,\"u\":4294967295,\"d\":2,\"s\":\"abcd\",\"dup\":\"copy\",\"colour\":\"blue\","
		      "\"j\":[1]}");
	ck_assert_int_eq(rts_jspec_validate(doc, &scalar_root, &v, 0, &e), 0);
	ck_assert(v.b);
	ck_assert_int_eq(v.i, -5);
	ck_assert_uint_eq(v.u, UINT32_MAX);
	ck_assert(v.has_u);
	ck_assert(v.d == 2.0); /* an integer where a number is allowed */
	ck_assert_str_eq(v.s, "abcd");
	ck_assert_ptr_eq(v.s, json_object_get_string(rts_json_get(doc, "s"))); /* borrowed */
	ck_assert_str_eq(v.dup, "copy");
	ck_assert_ptr_ne(v.dup, json_object_get_string(rts_json_get(doc, "dup"))); /* a copy; "old" freed */
	ck_assert_int_eq(v.index, 2);
	ck_assert_ptr_eq(v.j, rts_json_get(doc, "j"));
	free(v.dup);

	/* null stores NULL; an absent member stores nothing; PRESENT stays false. */
	struct scalars w = {.dup = rts_xstrdup("old"), .i = 77};
	cleanup_json json_object *doc2 = parse("{\"dup\":null,\"d\":0.5}");
	ck_assert_int_eq(rts_jspec_validate(doc2, &scalar_root, &w, 0, &e), 0);
	ck_assert_ptr_null(w.dup);
	ck_assert_int_eq(w.i, 77);
	ck_assert(!w.has_u);
	ck_assert(w.d == 0.5);

	/* A NULL base validates without storing. */
	assert_ok("{\"b\":false,\"s\":\"ab\"}", &scalar_root);
}
END_TEST

START_TEST(test_types)
{
	const unsigned flags = 0;
	assert_refused("{\"b\":1}", &scalar_root, flags, RTS_JP_TYPE, "b", "must be a boolean");
	assert_refused("{\"b\":null}", &scalar_root, flags, RTS_JP_TYPE, "b", "must be a boolean");
	assert_refused("{\"i\":1.0}", &scalar_root, flags, RTS_JP_TYPE, "i", "must be an integer from -5 to 5");
	assert_refused("{\"i\":\"1\"}", &scalar_root, flags, RTS_JP_TYPE, "i", "must be an integer from -5 to 5");
	assert_refused("{\"d\":\"1\"}", &scalar_root, flags, RTS_JP_TYPE, "d", "must be a number from 0.5 to 2.5");
	assert_refused("{\"s\":[]}", &scalar_root, flags, RTS_JP_TYPE, "s", "must be a string of 2 to 4 bytes");
	assert_refused("{\"dup\":{}}", &scalar_root, flags, RTS_JP_TYPE, "dup",
		       "must be a string of at most 8 bytes or null");
	assert_refused("{\"colour\":1}", &scalar_root, flags, RTS_JP_TYPE, "colour",
		       "must be \"red\", \"green\" or \"blue\"");
	assert_refused("{\"j\":true}", &scalar_root, flags, RTS_JP_TYPE, "j", "must be an object or an array");
	assert_refused("[]", &scalar_root, flags, RTS_JP_TYPE, "", "must be an object");
	/* The operator's own files hear what they wrote instead. */
	assert_refused("{\"b\":1}", &scalar_root, RTS_JV_OPERATOR, RTS_JP_TYPE, "b", "must be a boolean, not a number");
	assert_refused("{\"s\":null}", &scalar_root, RTS_JV_OPERATOR, RTS_JP_TYPE, "s",
		       "must be a string of 2 to 4 bytes, not null");
	assert_refused("[]", &scalar_root, RTS_JV_OPERATOR, RTS_JP_TYPE, "", "must be an object, not an array");
}
END_TEST

START_TEST(test_bounds)
{
	assert_ok("{\"i\":-5,\"d\":0.5,\"s\":\"ab\",\"one\":1,\"exact\":\"abc\",\"upto\":\"\",\"atleast\":\"ab\"}",
		  &scalar_root);
	assert_ok("{\"i\":5,\"d\":2.5,\"s\":\"abcd\",\"upto\":\"abc\",\"any\":\"\"}", &scalar_root);
	assert_refused("{\"i\":-6}", &scalar_root, 0, RTS_JP_RANGE, "i", "must be an integer from -5 to 5");
	assert_refused("{\"i\":6}", &scalar_root, 0, RTS_JP_RANGE, "i", "must be an integer from -5 to 5");
	/* json-c reads integers beyond 64 bits as the nearest 64-bit one: out of range too. */
	assert_refused("{\"i\":99999999999999999999}", &scalar_root, 0, RTS_JP_RANGE, "i",
		       "must be an integer from -5 to 5");
	assert_refused("{\"u\":-1}", &scalar_root, 0, RTS_JP_RANGE, "u", "must be an integer from 0 to 4294967295");
	assert_refused("{\"u\":4294967296}", &scalar_root, 0, RTS_JP_RANGE, "u",
		       "must be an integer from 0 to 4294967295");
	assert_refused("{\"one\":2}", &scalar_root, 0, RTS_JP_RANGE, "one", "must be 1");
	assert_refused("{\"d\":0.49}", &scalar_root, 0, RTS_JP_RANGE, "d", "must be a number from 0.5 to 2.5");
	assert_refused("{\"d\":3}", &scalar_root, 0, RTS_JP_RANGE, "d", "must be a number from 0.5 to 2.5");
	assert_refused("{\"d\":NaN}", &scalar_root, 0, RTS_JP_RANGE, "d", "must be a number from 0.5 to 2.5");
	assert_refused("{\"d\":1e400}", &scalar_root, 0, RTS_JP_RANGE, "d", "must be a number from 0.5 to 2.5");
	assert_refused("{\"s\":\"a\"}", &scalar_root, 0, RTS_JP_RANGE, "s", "must be a string of 2 to 4 bytes");
	assert_refused("{\"s\":\"abcde\"}", &scalar_root, 0, RTS_JP_RANGE, "s", "must be a string of 2 to 4 bytes");
	/* Bytes, not characters: "\u00e9" is two. */
	assert_refused("{\"s\":\"\\u00e9\\u00e9a\"}", &scalar_root, 0, RTS_JP_RANGE, "s",
		       "must be a string of 2 to 4 bytes");
	assert_refused("{\"nonempty\":\"\"}", &scalar_root, 0, RTS_JP_RANGE, "nonempty", "must be a non-empty string");
	assert_refused("{\"exact\":\"ab\"}", &scalar_root, 0, RTS_JP_RANGE, "exact", "must be a string of 3 bytes");
	assert_refused("{\"upto\":\"abcd\"}", &scalar_root, 0, RTS_JP_RANGE, "upto",
		       "must be a string of at most 3 bytes");
	assert_refused("{\"atleast\":\"a\"}", &scalar_root, 0, RTS_JP_RANGE, "atleast",
		       "must be a string of at least 2 bytes");
	assert_refused("{\"colour\":\"Red\"}", &scalar_root, 0, RTS_JP_RANGE, "colour",
		       "must be \"red\", \"green\" or \"blue\"");
	/* Encoded size: a line break takes two bytes. */
	assert_ok("{\"enc\":\"\\n\\n\"}", &scalar_root);
	assert_refused("{\"enc\":\"\\n\\na\"}", &scalar_root, 0, RTS_JP_RANGE, "enc",
		       "must take at most 4 bytes JSON-escaped, not 5 (quotes, backslashes, '/' and line breaks take two, "
		       "other control characters six)");
}
END_TEST

/* "\u0000" survives json-c's parser, and strings must not hold invalid UTF-8 either. */
START_TEST(test_nul_and_utf8)
{
	assert_refused("{\"any\":\"a\\u0000b\"}", &scalar_root, 0, RTS_JP_NUL, "any",
		       "must not contain NUL characters");
	/* Built by hand: the parser refuses invalid UTF-8 before any table sees it. */
	cleanup_json json_object *doc = json_object_new_object();
	json_object_object_add(doc, "utf8", json_object_new_string_len("a\xff", 2));
	struct rts_jerr e;
	ck_assert_int_eq(rts_jspec_validate(doc, &scalar_root, NULL, 0, &e), -EINVAL);
	ck_assert_int_eq(e.problem, RTS_JP_UTF8);
	ck_assert_str_eq(e.text, "must be valid UTF-8");
	/* Without RTS_JF_UTF8 the table trusts the parser's check. */
	json_object_object_del(doc, "utf8");
	json_object_object_add(doc, "any", json_object_new_string_len("a\xff", 2));
	ck_assert_int_eq(rts_jspec_validate(doc, &scalar_root, NULL, 0, &e), 0);
}
END_TEST

/* ---- objects: members, nesting, order ---- */

struct inner {
	const char *name;
	uint32_t n;
};
struct outer {
	struct inner in;
	const char *a;
	bool has_in;
};

static const struct rts_jspec inner_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 8,
		 .store = RTS_JS_STR,
		 .at = offsetof(struct inner, name)},
		{.key = "n", .types = RTS_JT_INT, .min = 1, .max = 9, .store = RTS_JS_UINT32,
		 .at = offsetof(struct inner, n)},
		{0},
	},
	.unknown = "has a member it does not know",
};
static const struct rts_jspec outer_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "a", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .store = RTS_JS_STR,
		 .at = offsetof(struct outer, a), .missing = "is required (the letter a)"},
		{.key = "in", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED | RTS_JF_PRESENT, .object = &inner_spec,
		 .store = RTS_JS_OBJECT, .at = offsetof(struct outer, in),
		 	.present_at = offsetof(struct outer, has_in)},
		{.key = "z", .types = RTS_JT_INT | RTS_JT_NULL, .flags = RTS_JF_NULL_ABSENT, .min = 0, .max = 0},
		{0},
	},
};
static const struct rts_jfield outer_root = RTS_JSPEC_ROOT(&outer_spec);

START_TEST(test_nested)
{
	struct outer o = {0};
	struct rts_jerr e;
	cleanup_json json_object *doc = parse("{\"in\":{\"n\":3,\"name\":\"x\"},\"a\":\"b\"}");
	ck_assert_int_eq(rts_jspec_validate(doc, &outer_root, &o, 0, &e), 0);
	ck_assert_str_eq(o.a, "b");
	ck_assert_str_eq(o.in.name, "x");
	ck_assert_uint_eq(o.in.n, 3);
	ck_assert(o.has_in);

	assert_refused("{\"a\":\"b\",\"in\":{\"name\":\"x\",\"n\":10}}", &outer_root, 0, RTS_JP_RANGE, "in.n",
		       "must be an integer from 1 to 9");
	assert_refused("{\"a\":\"b\",\"in\":{\"n\":1}}", &outer_root, 0, RTS_JP_MISSING, "in.name", "is required");
	assert_refused("{\"in\":{\"name\":\"x\"}}", &outer_root, 0, RTS_JP_MISSING, "a", "is required (the letter a)");
	assert_refused("{\"a\":\"b\",\"in\":[]}", &outer_root, 0, RTS_JP_TYPE, "in", "must be an object");
	/* null counts as absent only where the field says so */
	assert_ok("{\"a\":\"b\",\"in\":{\"name\":\"x\"},\"z\":null}", &outer_root);
	assert_refused("{\"a\":null,\"in\":{\"name\":\"x\"}}", &outer_root, 0, RTS_JP_TYPE, "a", "must be a string");
}
END_TEST

static const struct rts_jspec open_spec = {
	.flags = RTS_JO_OPEN,
	.fields = (const struct rts_jfield[]){{.key = "a", .types = RTS_JT_STRING}, {0}},
};
static const struct rts_jfield open_root = RTS_JSPEC_ROOT(&open_spec);

START_TEST(test_unknown_members)
{
	/* Network input: the object's own path and the table's text; the key is not named. */
	assert_refused("{\"a\":\"b\",\"in\":{\"name\":\"x\",\"evil\\nkey\":1}}", &outer_root, 0, RTS_JP_UNKNOWN, "in",
		       "has a member it does not know");
	assert_refused("{\"a\":\"b\",\"in\":{\"name\":\"x\"},\"q\":1}", &outer_root, 0, RTS_JP_UNKNOWN, "",
		       "has an unknown member");
	/* The operator's file: the key is named, printable and cut, and the table may list its keys. */
	assert_refused("{\"a\":\"b\",\"in\":{\"name\":\"x\",\"evil\\nkey\":1}}", &outer_root, RTS_JV_OPERATOR,
		       RTS_JP_UNKNOWN, "in.evil?key", "unknown key (expected name, n)");
	assert_refused("{\"a\":\"b\",\"q\":1}", &outer_root, RTS_JV_OPERATOR, RTS_JP_UNKNOWN, "q", "unknown key");
	char long_key[200];
	memset(long_key, 'k', 100);
	long_key[100] = '\0';
	cleanup_free char *text = rts_xasprintf("{\"%s\":1}", long_key);
	struct rts_jerr e;
	ck_assert_int_eq(run(text, &outer_root, NULL, RTS_JV_OPERATOR, &e), -EINVAL);
	ck_assert_uint_eq(strlen(e.path), 64 + 3);
	ck_assert_str_eq(e.path + 64, "...");
	/* An open table ignores what it does not know. */
	assert_ok("{\"later\":[1,2],\"a\":\"x\"}", &open_root);
}
END_TEST

/* Unknown members first, then alternatives, then the fields in table order, then the
 * table's own check: the first problem wins. */
static bool never(struct rts_jctx *ctx, json_object *o, void *base)
{
	return rts_jfail(ctx, "the table's own check");
}
static const struct rts_jspec order_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "first", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0, .max = 0},
		{.key = "second", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0, .max = 0},
		{.key = "x", .types = RTS_JT_BOOL, .flags = RTS_JF_ALTERNATIVE},
		{.key = "y", .types = RTS_JT_BOOL, .flags = RTS_JF_ALTERNATIVE | RTS_JF_NULL_ABSENT},
		{0},
	},
	.check = never,
};
static const struct rts_jfield order_root = RTS_JSPEC_ROOT(&order_spec);

START_TEST(test_order)
{
	assert_refused("{\"second\":1,\"first\":1,\"x\":true,\"y\":true,\"u\":1}", &order_root, 0, RTS_JP_UNKNOWN, "",
		       "has an unknown member");
	assert_refused("{\"second\":1,\"first\":1,\"x\":true,\"y\":true}", &order_root, 0, RTS_JP_ALTERNATIVE, "",
		       "must have exactly one of x or y");
	assert_refused("{\"second\":1,\"first\":1}", &order_root, 0, RTS_JP_ALTERNATIVE, "",
		       "must have exactly one of x or y");
	/* a null alternative with RTS_JF_NULL_ABSENT is not there */
	assert_refused("{\"second\":1,\"first\":1,\"y\":null}", &order_root, 0, RTS_JP_ALTERNATIVE, "",
		       "must have exactly one of x or y");
	assert_refused("{\"second\":1,\"first\":1,\"x\":true}", &order_root, 0, RTS_JP_RANGE, "first", "must be 0");
	assert_refused("{\"second\":1,\"x\":true}", &order_root, 0, RTS_JP_MISSING, "first", "is required");
	assert_refused("{\"second\":1,\"first\":0,\"x\":true}", &order_root, 0, RTS_JP_RANGE, "second", "must be 0");
	assert_refused("{\"second\":0,\"first\":0,\"y\":false}", &order_root, 0, RTS_JP_RULE, "",
		       "the table's own check");
}
END_TEST

/* ---- lists and maps ---- */

struct item {
	const char *name;
	int64_t n;
};
struct list {
	struct item *items;
	size_t n_items;
	char **words; /* NULL-terminated */
};

static const struct rts_jspec item_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 8,
		 .store = RTS_JS_STR,
		 .at = offsetof(struct item, name)},
		{.key = "n", .types = RTS_JT_INT, .min = 0, .max = 9, .store = RTS_JS_INT64,
		 .at = offsetof(struct item, n)},
		{0},
	},
};
static const struct rts_jspec list_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "items", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .min = 1, .max = 3, .unique = "name",
		 .items = "items",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &item_spec,
		 	.store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = offsetof(struct list, items), .count_at = offsetof(struct list, n_items),
		 .elem_size = sizeof(struct item)},
		{.key = "words", .types = RTS_JT_ARRAY, .max = 2,
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .max = 3, .store = RTS_JS_STRDUP},
		 .store = RTS_JS_ARRAY, .at = offsetof(struct list, words), .elem_size = sizeof(char *)},
		{.key = "atleast", .types = RTS_JT_ARRAY, .min = 2},
		{.key = "nested", .types = RTS_JT_ARRAY, .unique = "a.b",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT}},
		{0},
	},
};
static const struct rts_jfield list_root = RTS_JSPEC_ROOT(&list_spec);

START_TEST(test_lists)
{
	struct list l = {0};
	struct rts_jerr e;
	cleanup_json json_object *doc = parse("{\"items\":[{\"name\":\"a\",\"n\":1},{\"name\":\"b\"}],\"words\":[\"x\",\"yz\"]}");
	ck_assert_int_eq(rts_jspec_validate(doc, &list_root, &l, 0, &e), 0);
	ck_assert_uint_eq(l.n_items, 2);
	ck_assert_str_eq(l.items[0].name, "a");
	ck_assert_int_eq(l.items[0].n, 1);
	ck_assert_str_eq(l.items[1].name, "b");
	ck_assert_ptr_null(l.items[2].name); /* n + 1 entries, zeroed */
	ck_assert_str_eq(l.words[0], "x");
	ck_assert_str_eq(l.words[1], "yz");
	ck_assert_ptr_null(l.words[2]); /* a NULL-terminated argv */
	free(l.items);
	rts_strv_free(l.words);

	assert_refused("{\"items\":[]}", &list_root, 0, RTS_JP_COUNT, "items", "must list 1 to 3 items");
	assert_refused("{\"items\":[{},{},{},{}]}", &list_root, 0, RTS_JP_COUNT, "items", "must list 1 to 3 items");
	assert_refused("{\"words\":[\"a\",\"b\",\"c\"]}", &list_root, 0, RTS_JP_COUNT, "words",
		       "must list at most 2 entries");
	assert_refused("{\"atleast\":[1]}", &list_root, 0, RTS_JP_COUNT, "atleast", "must list at least 2 entries");
	assert_refused("{\"items\":{}}", &list_root, 0, RTS_JP_TYPE, "items", "must be an array of items");
	assert_refused("{\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"n\":10}]}", &list_root, 0, RTS_JP_RANGE,
		       "items[1].n",
		       "must be an integer from 0 to 9");
	assert_refused("{\"words\":[\"ab\",7]}", &list_root, 0, RTS_JP_TYPE, "words[1]",
		       "must be a string of at most 3 bytes");
	/* Uniqueness: the later item is named; its value only in the operator's own file. */
	assert_refused("{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"a\"}]}", &list_root, 0,
		       RTS_JP_DUPLICATE,
		       "items[2]", "repeats an earlier name");
	assert_refused("{\"items\":[{\"name\":\"a\"},{\"name\":\"a\"}]}", &list_root, RTS_JV_OPERATOR, RTS_JP_DUPLICATE,
		       "items[1]", "duplicate name \"a\"");
	assert_refused("{\"nested\":[{\"a\":{\"b\":\"x\"}},{\"a\":{\"b\":\"y\"}},{\"a\":{\"b\":\"x\"}}]}", &list_root,
		       0,
		       RTS_JP_DUPLICATE, "nested[2]", "repeats an earlier a.b");
	/* items without the member (or with another type) are not compared */
	assert_ok("{\"nested\":[{},{\"a\":1},{\"a\":{\"b\":2}},{\"a\":{\"b\":2}}]}", &list_root);
}
END_TEST

struct entry {
	char *key;
	int mode;
};
struct map {
	struct entry *v;
	size_t n;
};
static const char *const modes[] = {"off", "on", NULL};

/* Keys are kept out of messages: named by their length. */
static bool key_check(struct rts_jctx *ctx, const char *key, void *entry)
{
	rts_jctx_rename(ctx, "key of %zu bytes", strlen(key));
	if (strlen(key) == 0)
		return rts_jfail(ctx, "must not be empty");
	if (entry)
		((struct entry *)entry)->key = rts_xstrdup(key);
	return true;
}

static const struct rts_jspec map_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "m", .types = RTS_JT_OBJECT, .flags = RTS_JF_COUNT, .max = 2, .items = "keys",
		 .key_check = key_check,
		 .each = &(const struct rts_jfield){
			 .types = RTS_JT_OBJECT, .store = RTS_JS_OBJECT,
			 .object = &(const struct rts_jspec){
				 .fields = (const struct rts_jfield[]){
					 {.key = "mode", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED,
					  .one_of = modes,
					  .store = RTS_JS_INDEX, .at = offsetof(struct entry, mode)},
					 {0},
				 },
			 }},
		 .store = RTS_JS_ARRAY, .at = offsetof(struct map, v), .count_at = offsetof(struct map, n),
		 .elem_size = sizeof(struct entry)},
		{.key = "plain", .types = RTS_JT_OBJECT,
		 .each = &(const struct rts_jfield){.types = RTS_JT_INT, .min = 0, .max = 1}},
		{0},
	},
};
static const struct rts_jfield map_root = RTS_JSPEC_ROOT(&map_spec);

START_TEST(test_maps)
{
	struct map m = {0};
	struct rts_jerr e;
	cleanup_json json_object *doc = parse("{\"m\":{\"k1\":{\"mode\":\"on\"},\"k2\":{\"mode\":\"off\"}}}");
	ck_assert_int_eq(rts_jspec_validate(doc, &map_root, &m, RTS_JV_OPERATOR, &e), 0);
	ck_assert_uint_eq(m.n, 2);
	ck_assert_str_eq(m.v[0].key, "k1");
	ck_assert_int_eq(m.v[0].mode, 1);
	ck_assert_str_eq(m.v[1].key, "k2");
	ck_assert_int_eq(m.v[1].mode, 0);
	for (size_t i = 0; i < m.n; i++)
		free(m.v[i].key);
	free(m.v);

	assert_refused("{\"m\":{\"a\":{},\"b\":{},\"c\":{}}}", &map_root, 0, RTS_JP_COUNT, "m",
		       "must list at most 2 keys");
	assert_refused("{\"m\":{\"secret\":{\"mode\":\"maybe\"}}}", &map_root, RTS_JV_OPERATOR, RTS_JP_RANGE,
		       "m[key of 6 bytes].mode", "must be \"off\" or \"on\"");
	assert_refused("{\"m\":{\"\":{\"mode\":\"on\"}}}", &map_root, RTS_JV_OPERATOR, RTS_JP_RULE, "m[key of 0 bytes]",
		       "must not be empty");
	/* Without a key rule: the key in the operator's file, the entry's index otherwise. */
	assert_refused("{\"plain\":{\"a\":0,\"b\":2}}", &map_root, RTS_JV_OPERATOR, RTS_JP_RANGE, "plain.b",
		       "must be an integer from 0 to 1");
	assert_refused("{\"plain\":{\"a\":0,\"b\":2}}", &map_root, 0, RTS_JP_RANGE, "plain[1]",
		       "must be an integer from 0 to 1");
}
END_TEST

/* ---- callbacks ---- */

static bool coded(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (json_object_get_int(v) == 13)
		return rts_jfail_code(ctx, "unlucky", "is %d", 13);
	if (json_object_get_int(v) == 7)
		return rts_jfail_at(ctx, "deeper[2]", "is %s", "seven");
	return true;
}

/* The table follows the value of "kind". */
static const struct rts_jspec kind_a = {.fields = (const struct rts_jfield[]){
						{.key = "kind", .types = RTS_JT_STRING},
						{.key = "a", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0,
						 .max = 1},
						{0},
					}};
static const struct rts_jspec kind_b = {.fields = (const struct rts_jfield[]){
						{.key = "kind", .types = RTS_JT_STRING},
						{.key = "b", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
						{0},
					}};
static bool by_kind(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *kind = rts_json_get_string(v, "kind");
	if (!kind)
		return rts_jfail(ctx, "needs a kind");
	return rts_jctx_object(ctx, v, strcmp(kind, "a") == 0 ? &kind_a : &kind_b, NULL);
}

static const struct rts_jspec callback_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "c", .types = RTS_JT_INT, .min = 0, .max = 99, .check = coded},
		{.key = "v", .types = RTS_JT_ARRAY,
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .check = by_kind}},
		{.key = "id", .types = RTS_JT_STRING, .what = "an id"},
		{0},
	},
};
static const struct rts_jfield callback_root = RTS_JSPEC_ROOT(&callback_spec);

START_TEST(test_callbacks)
{
	struct rts_jerr e;
	ck_assert_int_eq(run("{\"c\":13}", &callback_root, NULL, 0, &e), -EINVAL);
	ck_assert_int_eq(e.problem, RTS_JP_RULE);
	ck_assert_str_eq(e.code, "unlucky");
	ck_assert_str_eq(e.path, "c");
	ck_assert_str_eq(e.text, "is 13");
	ck_assert_str_eq(e.field->key, "c");
	ck_assert_int_eq(run("{\"c\":7}", &callback_root, NULL, 0, &e), -EINVAL);
	ck_assert_ptr_null(e.code);
	ck_assert_str_eq(e.path, "c.deeper[2]");
	ck_assert_str_eq(e.text, "is seven");
	/* built-in checks run before the callback */
	assert_refused("{\"c\":100}", &callback_root, 0, RTS_JP_RANGE, "c", "must be an integer from 0 to 99");

	assert_ok("{\"v\":[{\"kind\":\"a\",\"a\":1},{\"kind\":\"b\",\"b\":true}]}", &callback_root);
	assert_refused("{\"v\":[{\"kind\":\"a\",\"a\":1},{\"kind\":\"b\",\"a\":1}]}", &callback_root, 0, RTS_JP_UNKNOWN,
		       "v[1]", "has an unknown member");
	assert_refused("{\"v\":[{\"kind\":\"a\"}]}", &callback_root, 0, RTS_JP_MISSING, "v[0].a", "is required");
	assert_refused("{\"v\":[{}]}", &callback_root, 0, RTS_JP_RULE, "v[0]", "needs a kind");

	/* A field's own description stands for every built-in check of the value. */
	assert_refused("{\"id\":1}", &callback_root, 0, RTS_JP_TYPE, "id", "must be an id");
	assert_refused("{\"id\":\"a\\u0000\"}", &callback_root, 0, RTS_JP_NUL, "id", "must be an id");
}
END_TEST

/* ---- one member, and messages ---- */

START_TEST(test_member_and_join)
{
	static const struct rts_jfield channel = {.key = "channel", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED,
						  .min = 1, .max = 4, .store = RTS_JS_STR};
	cleanup_json json_object *doc = parse("{\"channel\":\"c1\",\"junk\":[1]}");
	const char *got = NULL;
	struct rts_jerr e;
	ck_assert_int_eq(rts_jspec_member(doc, &channel, &got, 0, &e), 0);
	ck_assert_str_eq(got, "c1");
	cleanup_json json_object *bad = parse("{\"channel\":\"\"}");
	ck_assert_int_eq(rts_jspec_member(bad, &channel, &got, 0, &e), -EINVAL);
	char buf[128];
	ck_assert_str_eq(rts_jerr_join(&e, " ", buf, sizeof(buf)), "channel must be a string of 1 to 4 bytes");
	ck_assert_str_eq(rts_jerr_join(&e, ": ", buf, sizeof(buf)), "channel: must be a string of 1 to 4 bytes");
	cleanup_json json_object *none = parse("{}");
	ck_assert_int_eq(rts_jspec_member(none, &channel, &got, 0, NULL), -EINVAL); /* err may be NULL */
	ck_assert_int_eq(rts_jspec_member(none, &channel, &got, 0, &e), -EINVAL);
	ck_assert_int_eq(e.problem, RTS_JP_MISSING);
	/* An empty path: the text alone. */
	assert_refused("[]", &outer_root, 0, RTS_JP_TYPE, "", "must be an object");
	ck_assert_int_eq(run("[]", &outer_root, NULL, 0, &e), -EINVAL);
	ck_assert_str_eq(rts_jerr_join(&e, " ", buf, sizeof(buf)), "must be an object");
}
END_TEST

/* Network input never reaches a message: not an unknown key, a duplicate value or a type. */
START_TEST(test_no_input_in_network_messages)
{
	static const char *const docs[] = {
		"{\"a\":\"b\",\"in\":{\"name\":\"x\",\"SECRET\":1}}",
		"{\"a\":\"b\",\"SECRET\":1}",
		"{\"a\":\"b\",\"in\":{\"name\":\"SECRETSECRET\"}}",
		"{\"a\":7,\"in\":{}}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(docs); i++) {
		struct rts_jerr e;
		ck_assert_int_eq(run(docs[i], &outer_root, NULL, 0, &e), -EINVAL);
		ck_assert_ptr_null(strstr(e.path, "SECRET"));
		ck_assert_ptr_null(strstr(e.text, "SECRET"));
		ck_assert_ptr_null(strstr(e.text, "not a"));
	}
	struct rts_jerr e;
	ck_assert_int_eq(run("{\"items\":[{\"name\":\"SECRET\"},{\"name\":\"SECRET\"}]}", &list_root, NULL, 0, &e),
			 -EINVAL);
	ck_assert_ptr_null(strstr(e.text, "SECRET"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jspec");
	TCase *tc = tcase_create("tables");
	tcase_add_test(tc, test_stores);
	tcase_add_test(tc, test_types);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_nul_and_utf8);
	tcase_add_test(tc, test_nested);
	tcase_add_test(tc, test_unknown_members);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_lists);
	tcase_add_test(tc, test_maps);
	tcase_add_test(tc, test_callbacks);
	tcase_add_test(tc, test_member_and_join);
	tcase_add_test(tc, test_no_input_in_network_messages);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
