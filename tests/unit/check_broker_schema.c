/* SPDX-License-Identifier: Apache-2.0 */
/* common/schema.h: the reference rule for guest schemas. A remote reference in every
 * schema position, every keyword with a value of each wrong JSON type (each hiding a remote
 * reference where the type can hold one), the local forms that pass, data positions that are
 * not looked into, local references that must name a schema position and data that must
 * hold no reference, and the depth bound. Each refusal is checked for the reason the walker
 * gives, so a test cannot pass because another rule answered first. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/model.h"
#include "common/schema.h"
#include "common/json.h"
#include "common/util.h"

#define PARSE_DEPTH 1000 /* deeper than any body, to reach the walker's own bound */

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), PARSE_DEPTH, &o, &why) == 0, "test JSON does not parse: %s",
		      text);
	return o;
}

/* NULL when rts_schema_check() accepts o, else its reason. */
static const char *verdict(json_object *o)
{
	const char *why = "unset";
	int r = rts_schema_check(o, &why);
	if (r == 0) {
		ck_assert_ptr_null(why);
		return NULL;
	}
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_ptr_nonnull(why);
	return why;
}

static const char *verdict_text(const char *text)
{
	cleanup_json json_object *o = parse(text);
	return verdict(o);
}

static void assert_ok(const char *text)
{
	const char *why = verdict_text(text);
	ck_assert_msg(why == NULL, "refused (%s): %s", why, text);
}

static void assert_refused(const char *text, const char *reason)
{
	const char *why = verdict_text(text);
	ck_assert_msg(why != NULL, "accepted: %s", text);
	ck_assert_msg(strcmp(why, reason) == 0, "refused for \"%s\", expected \"%s\": %s", why, reason, text);
}

static void assert_why(const char *why, const char *reason)
{
	ck_assert_msg(why != NULL, "accepted, expected \"%s\"", reason);
	ck_assert_str_eq(why, reason);
}

/* ---- what a local fragment is ---- */

static const char *const local_forms[] = {
	"#",
	"#/$defs/a",
	"#/definitions/Pet",
	"#/properties/a%20b",
	"#/properties/%E2%82%AC",
	"#/items/0",
	"#/$defs/a~1b~0c",
	"#anchor",
	"#Foo_Bar-1.2",
	"#/a:b@c!$&'()*+,;=?/-._~",
};

static const char *const remote_forms[] = {
	"https://evil.example/s.json",
	"https://evil.example/s.json#/$defs/a",
	"HTTPS://EVIL.EXAMPLE/",
	"http://json-schema.org/draft-07/schema#",
	"//evil.example/s.json",
	"file:///etc/passwd",
	"urn:example:schema",
	"data:application/json,{}",
	"other.json",
	"other.json#/a",
	"./#/a",
	"/#",
	"?#",
	"",
	/* whitespace a lenient parser may trim or split on */
	" #/a",
	"\t#/a",
	"\n#/a",
	"#/a https://evil.example/",
	"#/a\thttps://evil.example/",
	"#/a\nhttps://evil.example/",
	"# ",
	/* percent-encoding that is not a fragment's */
	"%23/a",
	"%23https://evil.example/",
	"#%",
	"#%2",
	"#%zz",
	"#%G0",
	/* characters no fragment has */
	"#/a#https://evil.example/",
	"#/a\\b",
	"\\\\evil.example\\s",
	"#/a\"b",
	"#/a<b>",
	"#/a[0]",
	"#/a{b}",
	"#/a|b",
	"#/a^b",
	"#/a`b",
	"#/\xc3\xa9",		 /* raw UTF-8 (é) */
	("#/\xef\xbc\x83" "evil"), /* fullwidth number sign */
	"\xef\xbc\x83/a",	 /* fullwidth number sign in front */
	"#/a\xe2\x80\xa8https:", /* U+2028 */
	"#\x7f",
};

START_TEST(test_local_forms)
{
	const char *s = local_forms[_i];
	ck_assert_msg(rts_schema_local_fragment(s, strlen(s)), "refused: %s", s);
}
END_TEST

START_TEST(test_remote_forms)
{
	const char *s = remote_forms[_i];
	ck_assert_msg(!rts_schema_local_fragment(s, strlen(s)), "accepted: %s", s);
}
END_TEST

START_TEST(test_fragment_length_is_respected)
{
	/* The length counts, not a NUL: "#a" followed by a NUL and more is not "#a". */
	ck_assert(!rts_schema_local_fragment("#a\0//evil", 9));
	ck_assert(rts_schema_local_fragment("#a\0//evil", 2));
	/* an escape cut off by the length */
	ck_assert(!rts_schema_local_fragment("#%41", 3));
	ck_assert(rts_schema_local_fragment("#%41", 4));
}
END_TEST

/* ---- a remote reference in every position ---- */

/* Each template holds the string "@" where a schema goes. */
static const char *const positions[] = {
	"\"@\"",
	"{\"properties\":{\"a\":\"@\"}}",
	"{\"patternProperties\":{\"^a\":\"@\"}}",
	"{\"additionalProperties\":\"@\"}",
	"{\"items\":\"@\"}",
	"{\"items\":[true,\"@\"]}",
	"{\"prefixItems\":[{},\"@\"]}",
	"{\"additionalItems\":\"@\"}",
	"{\"contains\":\"@\"}",
	"{\"allOf\":[\"@\"]}",
	"{\"anyOf\":[{\"type\":\"null\"},\"@\"]}",
	"{\"oneOf\":[\"@\",false]}",
	"{\"not\":\"@\"}",
	"{\"if\":\"@\"}",
	"{\"if\":{},\"then\":\"@\"}",
	"{\"if\":{},\"then\":{},\"else\":\"@\"}",
	"{\"$defs\":{\"x\":\"@\"}}",
	"{\"definitions\":{\"x\":\"@\"}}",
	"{\"dependentSchemas\":{\"a\":\"@\"}}",
	"{\"dependencies\":{\"a\":[\"b\"],\"c\":\"@\"}}",
	"{\"propertyNames\":\"@\"}",
	"{\"unevaluatedItems\":\"@\"}",
	"{\"unevaluatedProperties\":\"@\"}",
	"{\"contentSchema\":\"@\"}",
	"{\"extends\":\"@\"}",
	"{\"extends\":[{},\"@\"]}",
	"{\"type\":[\"string\",\"@\"]}",
	"{\"disallow\":[\"@\"]}",
	/* names that are keywords elsewhere, and keyword-looking names, are only names */
	"{\"properties\":{\"$ref\":{\"properties\":{\"anyOf\":\"@\"}}}}",
	"{\"$defs\":{\"https://evil.example/\":{\"items\":{\"not\":\"@\"}}}}",
	"{\"properties\":{\"a\":{\"items\":{\"anyOf\":[{\"properties\":{\"b\":{\"allOf\":[{\"not\":\"@\"}]}}}]}}}}",
};

/* Replace the string "@" in tree (which owns it) with sub (reference taken); true if found. */
static bool put_at(json_object *tree, json_object *sub)
{
	if (json_object_is_type(tree, json_type_object)) {
		json_object_object_foreach(tree, k, v)
		{
			if (json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), "@") == 0) {
				json_object_object_add(tree, k, sub);
				return true;
			}
			if (v && put_at(v, sub))
				return true;
		}
	} else if (json_object_is_type(tree, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(tree); i++) {
			json_object *v = json_object_array_get_idx(tree, i);
			if (json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), "@") == 0) {
				json_object_array_put_idx(tree, i, sub);
				return true;
			}
			if (v && put_at(v, sub))
				return true;
		}
	}
	return false;
}

/* positions[pos] with sub (reference taken) in its place. */
static json_object *at_position(size_t pos, json_object *sub)
{
	if (strcmp(positions[pos], "\"@\"") == 0)
		return sub;
	json_object *tree = parse(positions[pos]);
	ck_assert_msg(put_at(tree, sub), "no @ in %s", positions[pos]);
	return tree;
}

static const char *const ref_keywords[] = {"$ref", "$dynamicRef", "$recursiveRef", "$id", "$schema", "id"};

/* {keyword: value}, or {"$vocabulary": {value: true}} when keyword is NULL. */
static json_object *ref_schema(const char *keyword, const char *value)
{
	json_object *o = json_object_new_object();
	json_object *v = json_object_new_string_len(value, (int)strlen(value));
	if (keyword) {
		json_object_object_add(o, keyword, v);
	} else {
		json_object_put(v);
		json_object *voc = json_object_new_object();
		json_object_object_add(voc, value, json_object_new_boolean(1));
		json_object_object_add(o, "$vocabulary", voc);
	}
	return o;
}

/* A root defining every target the resolving forms below name, with tree (reference
 * taken) as its allOf[0]. */
static json_object *with_targets(json_object *tree)
{
	json_object *root = parse("{\"$defs\":{\"a\":{},\"a/b~c\":{},\"n\":{\"$anchor\":\"anchor\"},"
				  "\"m\":{\"$id\":\"#Foo_Bar-1.2\"}},\"definitions\":{\"Pet\":{}},"
				  "\"properties\":{\"a b\":{},\"\u20ac\":true},\"items\":[{}]}");
	json_object *all = json_object_new_array();
	json_object_array_add(all, tree);
	json_object_object_add(root, "allOf", all);
	return root;
}

/* Local references that name a schema of with_targets(); the first RESOLVING_ELSEWHERE
 * also name one in some position trees alone. */
#define RESOLVING_ELSEWHERE 3u
static const char *const resolving_forms[] = {
	"#",
	"#/items/0",
	"#/allOf/0",
	"#/$defs/a",
	"#/definitions/Pet",
	"#/properties/a%20b",
	"#/properties/%E2%82%AC",
	"#/$defs/a~1b~0c",
	"#anchor",
	"#Foo_Bar-1.2",
};

static void position_verdicts(size_t pos, const char *keyword)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(remote_forms); i++) {
		cleanup_json json_object *s = with_targets(at_position(pos, ref_schema(keyword, remote_forms[i])));
		const char *why = verdict(s);
		ck_assert_msg(why && strcmp(why, RTS_SCHEMA_WHY_REMOTE) == 0, "%s \"%s\" at %s: %s",
			      keyword ? keyword : "$vocabulary", remote_forms[i], positions[pos], why ? why : "accepted");
	}
	/* $id, id and $vocabulary keys name no target: every local fragment passes there */
	bool names = keyword && strcmp(keyword, "$id") != 0 && strcmp(keyword, "id") != 0;
	const char *const *forms = names ? resolving_forms : local_forms;
	size_t n = names ? RTS_ARRAY_SIZE(resolving_forms) : RTS_ARRAY_SIZE(local_forms);
	for (size_t i = 0; i < n; i++) {
		cleanup_json json_object *s = with_targets(at_position(pos, ref_schema(keyword, forms[i])));
		const char *why = verdict(s);
		ck_assert_msg(why == NULL, "%s \"%s\" at %s refused: %s", keyword ? keyword : "$vocabulary", forms[i],
			      positions[pos], why);
	}
	/* the same references, in the same places, without the targets */
	if (!names)
		return;
	for (size_t i = RESOLVING_ELSEWHERE; i < n; i++) {
		cleanup_json json_object *s = at_position(pos, ref_schema(keyword, forms[i]));
		const char *why = verdict(s);
		ck_assert_msg(why && strcmp(why, RTS_SCHEMA_WHY_TARGET) == 0, "%s \"%s\" at %s without targets: %s",
			      keyword, forms[i], positions[pos], why ? why : "accepted");
	}
}

START_TEST(test_ref_in_every_position)
{
	for (size_t k = 0; k < RTS_ARRAY_SIZE(ref_keywords); k++)
		position_verdicts((size_t)_i, ref_keywords[k]);
}
END_TEST

START_TEST(test_vocabulary_in_every_position)
{
	position_verdicts((size_t)_i, NULL);
}
END_TEST

/* ---- a value of the wrong type is refused, never skipped ---- */

/* Each hides a remote reference where its type can hold one. */
static const char *const not_a_schema[] = {
	"[{\"$ref\":\"https://evil.example/\"}]",
	"[]",
	"\"https://evil.example/\"",
	"\"#\"",
	"1",
	"1.5",
	"null",
};
static const char *const not_a_list[] = {
	"{\"a\":{\"$ref\":\"https://evil.example/\"}}",
	"{\"$ref\":\"https://evil.example/\"}",
	"{}",
	"true",
	"\"https://evil.example/\"",
	"0",
	"null",
};
static const char *const not_a_map[] = {
	"[{\"$ref\":\"https://evil.example/\"}]",
	"[]",
	"true",
	"\"https://evil.example/\"",
	"7",
	"null",
};
static const char *const not_a_ref[] = {
	"{\"$ref\":\"https://evil.example/\"}",
	"[\"https://evil.example/\"]",
	"[\"#\"]",
	"{}",
	"true",
	"1",
	"null",
};

static const struct {
	const char *keyword;
	const char *const *values;
	size_t n;
} wrong_types[] = {
#define WRONG(k, list) {k, list, RTS_ARRAY_SIZE(list)}
	WRONG("additionalProperties", not_a_schema),
	WRONG("additionalItems", not_a_schema),
	WRONG("contains", not_a_schema),
	WRONG("not", not_a_schema),
	WRONG("if", not_a_schema),
	WRONG("then", not_a_schema),
	WRONG("else", not_a_schema),
	WRONG("propertyNames", not_a_schema),
	WRONG("unevaluatedItems", not_a_schema),
	WRONG("unevaluatedProperties", not_a_schema),
	WRONG("contentSchema", not_a_schema),
	WRONG("allOf", not_a_list),
	WRONG("anyOf", not_a_list),
	WRONG("oneOf", not_a_list),
	WRONG("prefixItems", not_a_list),
	WRONG("properties", not_a_map),
	WRONG("patternProperties", not_a_map),
	WRONG("$defs", not_a_map),
	WRONG("definitions", not_a_map),
	WRONG("dependentSchemas", not_a_map),
	WRONG("dependencies", not_a_map),
	WRONG("$ref", not_a_ref),
	WRONG("$dynamicRef", not_a_ref),
	WRONG("$recursiveRef", not_a_ref),
	WRONG("$id", not_a_ref),
	WRONG("$schema", not_a_ref),
	WRONG("id", not_a_ref),
	WRONG("$vocabulary", not_a_map),
#undef WRONG
};

/* The containers the wrong value is tried in: the root, and two nested schema positions. */
static const char *const wrappers[][2] = {{"", ""}, {"{\"properties\":{\"a\":", "}}"}, {"{\"anyOf\":[true,", "]}"}};

START_TEST(test_wrong_type_refused)
{
	char inner[512], text[1024];
	for (size_t v = 0; v < wrong_types[_i].n; v++) {
		snprintf(inner, sizeof(inner), "{\"%s\":%s}", wrong_types[_i].keyword, wrong_types[_i].values[v]);
		for (size_t w = 0; w < RTS_ARRAY_SIZE(wrappers); w++) {
			snprintf(text, sizeof(text), "%s%s%s", wrappers[w][0], inner, wrappers[w][1]);
			assert_refused(text, RTS_SCHEMA_WHY_TYPE);
		}
	}
}
END_TEST

/* items and extends take a schema or a list; both forms are walked, other types refused. */
static const char *const wrong_elsewhere[] = {
	"{\"items\":\"https://evil.example/\"}",
	"{\"items\":7}",
	"{\"items\":null}",
	"{\"items\":[{},7]}",
	"{\"items\":[null]}",
	"{\"items\":[[{\"$ref\":\"https://evil.example/\"}]]}",
	"{\"extends\":\"https://evil.example/\"}",
	"{\"extends\":[\"https://evil.example/\"]}",
	"{\"allOf\":[{},\"https://evil.example/\"]}",
	"{\"anyOf\":[[{\"$ref\":\"https://evil.example/\"}]]}",
	"{\"oneOf\":[null]}",
	"{\"prefixItems\":[1]}",
	"{\"properties\":{\"a\":\"https://evil.example/\"}}",
	"{\"properties\":{\"a\":[{\"$ref\":\"https://evil.example/\"}]}}",
	"{\"properties\":{\"a\":null}}",
	"{\"$defs\":{\"a\":1}}",
	"{\"dependentSchemas\":{\"a\":[\"b\"]}}",
	/* dependencies: a schema or property names, nothing else */
	"{\"dependencies\":{\"a\":\"b\"}}",
	"{\"dependencies\":{\"a\":[\"b\",{\"$ref\":\"https://evil.example/\"}]}}",
	"{\"dependencies\":{\"a\":[1]}}",
	"{\"dependencies\":{\"a\":[null]}}",
	"{\"dependencies\":{\"a\":null}}",
	"{\"dependencies\":{\"a\":7}}",
	/* $vocabulary: booleans */
	"{\"$vocabulary\":{\"#v\":\"https://evil.example/\"}}",
	"{\"$vocabulary\":{\"#v\":{\"$ref\":\"https://evil.example/\"}}}",
	"{\"$vocabulary\":{\"#v\":null}}",
	/* type, disallow: names, and schemas in draft 3 */
	"{\"type\":{\"$ref\":\"https://evil.example/\"}}",
	"{\"type\":7}",
	"{\"type\":null}",
	"{\"type\":true}",
	"{\"type\":[\"string\",7]}",
	"{\"type\":[\"string\",true]}",
	"{\"type\":[[\"string\"]]}",
	"{\"disallow\":{}}",
	/* anchors are names */
	"{\"$anchor\":7}",
	"{\"$dynamicAnchor\":{\"$ref\":\"https://evil.example/\"}}",
	"{\"$anchor\":null}",
	/* a schema position holds an object or a boolean: not a number, string or null */
	"1",
	"\"#\"",
	"[]",
};

START_TEST(test_wrong_type_elsewhere)
{
	assert_refused(wrong_elsewhere[_i], RTS_SCHEMA_WHY_TYPE);
}
END_TEST

START_TEST(test_null_is_not_a_schema)
{
	/* json-c hands a JSON null over as NULL */
	assert_why(verdict(NULL), RTS_SCHEMA_WHY_TYPE);
}
END_TEST

START_TEST(test_wrong_type_right_type_passes)
{
	/* The same keywords with values of their types pass, so the refusals above were the
	 * type rule's. */
	for (size_t i = 0; i < RTS_ARRAY_SIZE(wrong_types); i++) {
		const char *k = wrong_types[i].keyword;
		const char *const *vals = wrong_types[i].values;
		const char *good = vals == not_a_schema ? "{\"$ref\":\"#/$defs/a\"}"
				   : vals == not_a_list	  ? "[{\"$ref\":\"#\"},true,false]"
				   : vals == not_a_ref	  ? "\"#/$defs/a\""
				   : strcmp(k, "$vocabulary") == 0 ? "{\"#v\":true,\"#w\":false}"
								   : "{\"a\":{\"$ref\":\"#\"},\"b\":true}";
		char text[256];
		snprintf(text, sizeof(text), "{\"%s\":%s%s}", k, good,
			 strcmp(k, "$defs") == 0 ? "" : ",\"$defs\":{\"a\":{}}");
		assert_ok(text);
	}
}
END_TEST

/* ---- what passes ---- */

static const char *const accepted[] = {
	"true",
	"false",
	"{}",
	"{\"type\":\"object\",\"properties\":{},\"required\":[]}",
	/* what pydantic v2 writes */
	"{\"$defs\":{\"Pet\":{\"properties\":{\"name\":{\"title\":\"Name\",\"type\":\"string\"}},\"required\":[\"name\"],"
	"\"title\":\"Pet\",\"type\":\"object\"}},\"properties\":{\"pets\":{\"items\":{\"$ref\":\"#/$defs/Pet\"},"
	"\"title\":\"Pets\",\"type\":\"array\"},\"owner\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
	"\"default\":null}},\"required\":[\"pets\"],\"title\":\"Args\",\"type\":\"object\"}",
	/* draft 7 with definitions, an anchor $id and the root reference */
	"{\"$schema\":\"#\",\"definitions\":{\"node\":{\"$id\":\"#node\",\"type\":\"object\",\"properties\":"
	"{\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}}}},\"$ref\":\"#node\"}",
	/* 2019-09 and 2020-12 forms */
	"{\"$recursiveAnchor\":true,\"$recursiveRef\":\"#\",\"$dynamicAnchor\":\"meta\",\"$dynamicRef\":\"#meta\","
	"\"$vocabulary\":{\"#core\":true,\"#applicator\":false},\"$anchor\":\"a\",\"$comment\":\"https://x\"}",
	"{\"prefixItems\":[{\"type\":\"string\"},true],\"items\":false,\"unevaluatedItems\":false,"
	"\"contains\":{\"const\":1},\"minContains\":1}",
	"{\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"$ref\":\"#/items/0\"}}",
	"{\"if\":{\"properties\":{\"a\":{\"const\":1}}},\"then\":{\"required\":[\"b\"]},\"else\":false}",
	"{\"dependentSchemas\":{\"a\":{\"required\":[\"b\"]}},\"dependentRequired\":{\"c\":[\"d\"]},"
	"\"dependencies\":{\"e\":[\"f\",\"g\"],\"h\":{\"required\":[\"i\"]},\"j\":[],\"k\":true}}",
	"{\"patternProperties\":{\"^x-\":true},\"propertyNames\":{\"pattern\":\"^[a-z]+$\"},"
	"\"additionalProperties\":false,\"unevaluatedProperties\":false}",
	"{\"type\":[\"string\",\"null\"],\"contentMediaType\":\"application/json\",\"contentSchema\":{\"type\":\"object\"}}",
	"{\"extends\":[{\"$ref\":\"#/definitions/a\"}],\"type\":[\"string\",{\"$ref\":\"#\"}],\"disallow\":\"null\","
	"\"definitions\":{\"a\":{}}}",
	/* data: enum, const, default, examples and unknown keywords are not schemas: keyword
	 * values of any type and URLs pass there, only reference members do not */
	"{\"enum\":[\"https://evil.example/\",{\"anyOf\":{}},[\"$ref\"]],\"const\":{\"url\":\"https://evil.example/\"},"
	"\"default\":{\"schema\":\"http://json-schema.org/draft-07/schema#\",\"not\":[],\"id\":\"abc\"},"
	"\"examples\":[{\"id\":7,\"ref\":\"http://e\"}],\"x-ref\":{\"items\":{\"type\":7}},"
	"\"description\":\"see https://evil.example/\",\"format\":\"uri\",\"title\":\"$ref\","
	"\"required\":[\"$ref\",\"$id\"]}",
	/* property names are names, also when they spell a keyword or a URL */
	"{\"properties\":{\"$ref\":{\"type\":\"string\"},\"$schema\":{},\"id\":{\"type\":\"integer\"},"
	"\"anyOf\":{\"type\":\"string\"},\"https://evil.example/\":true},\"required\":[\"$ref\",\"id\"]}",
	"{\"$defs\":{\"$ref\":{},\"https://evil.example/\":{\"$ref\":\"#/$defs/$ref\"}}}",
};

START_TEST(test_accepted)
{
	assert_ok(accepted[_i]);
}
END_TEST

/* ---- bounds ---- */

/* n schemas, each but the innermost holding the next through open ... close; the innermost
 * is inner. */
static char *nested(size_t n, const char *open, const char *close, const char *inner)
{
	size_t lo = strlen(open), lc = strlen(close), li = strlen(inner);
	char *s = rts_xmalloc(n * (lo + lc) + li + 1);
	char *p = s;
	for (size_t i = 1; i < n; i++, p += lo)
		memcpy(p, open, lo);
	memcpy(p, inner, li);
	p += li;
	for (size_t i = 1; i < n; i++, p += lc)
		memcpy(p, close, lc);
	*p = '\0';
	return s;
}

START_TEST(test_depth_bound)
{
	static const char *const opens[] = {"{\"not\":", "{\"properties\":{\"a\":", "{\"allOf\":[true,",
					    "{\"items\":[", "{\"dependencies\":{\"a\":[],\"b\":"};
	static const char *const closes[] = {"}", "}}", "]}", "]}", "}}"};
	for (size_t k = 0; k < RTS_ARRAY_SIZE(opens); k++) {
		cleanup_free char *ok = nested(RTS_SCHEMA_DEPTH, opens[k], closes[k], "{}");
		assert_ok(ok);
		cleanup_free char *deep = nested(RTS_SCHEMA_DEPTH + 1, opens[k], closes[k], "{}");
		assert_refused(deep, RTS_SCHEMA_WHY_DEPTH);
		/* a boolean schema one level too deep is too deep as well */
		cleanup_free char *b = nested(RTS_SCHEMA_DEPTH + 1, opens[k], closes[k], "true");
		assert_refused(b, RTS_SCHEMA_WHY_DEPTH);
	}
}
END_TEST

START_TEST(test_wide_schema_every_member_visited)
{
	/* 20000 properties, the remote reference in the last one: each member is looked at. */
	enum { N = 20000 };
	size_t cap = (size_t)N * 32 + 128;
	cleanup_free char *s = rts_xmalloc(cap);
	size_t len = (size_t)snprintf(s, cap, "{\"properties\":{");
	for (unsigned i = 0; i < N; i++)
		len += (size_t)snprintf(s + len, cap - len, "\"p%u\":{\"type\":\"string\"},", i);
	size_t tail = len;
	snprintf(s + tail, cap - tail, "\"last\":{\"$ref\":\"https://evil.example/\"}}}");
	assert_refused(s, RTS_SCHEMA_WHY_REMOTE);
	snprintf(s + tail, cap - tail, "\"last\":{\"$ref\":\"#/properties/p0\"}}}");
	assert_ok(s);
}
END_TEST

/* ---- a local reference names a schema; data holds no reference ---- */

/* The bodies a reviewer sent through brokerd: a local reference into data that holds a
 * remote one. */
static const struct {
	const char *text;
	const char *why;
} into_data[] = {
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/x-hidden\"}},"
	 "\"x-hidden\":{\"$ref\":\"https://evil.example/s.json\"}}",
	 RTS_SCHEMA_WHY_TARGET},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/properties/b/default\"},"
	 "\"b\":{\"default\":{\"$ref\":\"https://evil.example/d\"}}}}",
	 RTS_SCHEMA_WHY_TARGET},
	{"{\"enum\":[{\"$ref\":\"http://evil.example/e\"}],\"properties\":{\"a\":{\"$ref\":\"#/enum/0\"}}}",
	 RTS_SCHEMA_WHY_DATA},
	{"{\"const\":{\"$id\":\"http://evil.example/\",\"$ref\":\"x.json\"},\"allOf\":[{\"$ref\":\"#/const\"}]}",
	 RTS_SCHEMA_WHY_DATA},
	/* the same, the other member first: each rule refuses on its own */
	{"{\"properties\":{\"a\":{\"$ref\":\"#/enum/0\"}},\"enum\":[{\"$ref\":\"http://evil.example/e\"}]}",
	 RTS_SCHEMA_WHY_TARGET},
	{"{\"x-hidden\":{\"$ref\":\"https://evil.example/s.json\"},\"properties\":{\"a\":{\"$ref\":\"#/x-hidden\"}}}",
	 RTS_SCHEMA_WHY_DATA},
};

START_TEST(test_reviewer_bodies)
{
	assert_refused(into_data[_i].text, into_data[_i].why);
}
END_TEST

/* Local references that do not name a schema position of their document. */
static const char *const not_a_target[] = {
	/* into data: the reviewer's bodies with the data made harmless */
	"{\"properties\":{\"a\":{\"$ref\":\"#/x-hidden\"}},\"x-hidden\":{\"type\":\"string\"}}",
	"{\"properties\":{\"a\":{\"$ref\":\"#/properties/b/default\"},\"b\":{\"default\":{\"type\":\"string\"}}}}",
	"{\"enum\":[{\"type\":\"string\"}],\"properties\":{\"a\":{\"$ref\":\"#/enum/0\"}}}",
	"{\"const\":{\"type\":\"string\"},\"allOf\":[{\"$ref\":\"#/const\"}]}",
	"{\"examples\":[{}],\"$ref\":\"#/examples/0\"}",
	"{\"$ref\":\"#/properties/a/enum/0\",\"properties\":{\"a\":{\"enum\":[{}]}}}",
	"{\"$ref\":\"#/not/x-data\",\"not\":{\"x-data\":{}}}",
	"{\"$ref\":\"#/required/0\",\"required\":[\"a\"]}",
	"{\"$ref\":\"#/\",\"\":{}}",
	/* a keyword's value that is not a schema */
	"{\"$ref\":\"#/$defs\",\"$defs\":{\"a\":{}}}",
	"{\"$ref\":\"#/properties\",\"properties\":{\"a\":{}}}",
	"{\"$ref\":\"#/allOf\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/items\",\"items\":[{}]}",
	"{\"$ref\":\"#/$ref\"}",
	"{\"$ref\":\"#/type\",\"type\":\"string\"}",
	"{\"$ref\":\"#/type/0\",\"type\":[\"string\"]}",
	"{\"$ref\":\"#/dependencies/a\",\"dependencies\":{\"a\":[\"b\"]}}",
	"{\"$ref\":\"#/dependencies/a/0\",\"dependencies\":{\"a\":[\"b\"]}}",
	"{\"$ref\":\"#/$vocabulary\",\"$vocabulary\":{\"#v\":true}}",
	"{\"$ref\":\"#/$vocabulary/%23v\",\"$vocabulary\":{\"#v\":true}}",
	"{\"$ref\":\"#/$id\",\"$id\":\"#a\"}",
	/* nothing there */
	"{\"$ref\":\"#/$defs/missing\",\"$defs\":{\"a\":{}}}",
	"{\"$ref\":\"#/x\"}",
	"{\"$ref\":\"#/\"}",
	"{\"$ref\":\"#/allOf/1\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/allOf/00\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/allOf/-\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/allOf/a\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/allOf/18446744073709551616\",\"allOf\":[{}]}",
	"{\"$ref\":\"#/not/not\",\"not\":true}",
	"{\"$ref\":\"#/not/properties/a/0\",\"not\":{\"properties\":{\"a\":{}}}}",
	"{\"$ref\":\"#/$defs/a/\",\"$defs\":{\"a\":{}}}",
	/* escapes: a bad ~ escape, escapes resolvers split or decode differently, a NUL */
	"{\"$ref\":\"#/$defs/a~2b\",\"$defs\":{\"a~2b\":{}}}",
	"{\"$ref\":\"#/$defs/a~\",\"$defs\":{\"a~\":{}}}",
	"{\"$ref\":\"#/$defs/a%2Fb\",\"$defs\":{\"a/b\":{},\"a\":{\"b\":{}}}}",
	"{\"$ref\":\"#/$defs/a%2fb\",\"$defs\":{\"a/b\":{}}}",
	"{\"$ref\":\"#/$defs/a%7E1b\",\"$defs\":{\"a/b\":{},\"a~1b\":{}}}",
	"{\"$ref\":\"#/$defs/a%25b\",\"$defs\":{\"a%b\":{}}}",
	"{\"$ref\":\"#/$defs/a%2541\",\"$defs\":{\"a%41\":{},\"aA\":{}}}",
	"{\"$ref\":\"#/$defs/a%23b\",\"$defs\":{\"a#b\":{}}}",
	"{\"$ref\":\"#/$defs/a%00b\",\"$defs\":{\"a\":{}}}",
	/* percent-encoded keywords: data as RFC 6901 reads it, or as a resolver that does not
	 * decode reads it */
	"{\"$ref\":\"#/%65num/0\",\"enum\":[{}]}",
	"{\"$ref\":\"#/%70roperties/a\",\"properties\":{\"a\":{}},\"%70roperties\":{\"a\":{}}}",
	/* plain names: no such anchor, not an anchor name, an anchor that is also data */
	"{\"$ref\":\"#n\"}",
	"{\"$ref\":\"#n\",\"$defs\":{\"n\":{}}}",
	"{\"$ref\":\"#n\",\"$defs\":{\"x\":{\"$anchor\":\"m\"}}}",
	"{\"$ref\":\"#enum/0\",\"enum\":[{}]}",
	"{\"$ref\":\"#definitions/a\",\"definitions\":{\"a\":{}}}",
	"{\"$ref\":\"#%6E\",\"$defs\":{\"x\":{\"$anchor\":\"n\"}}}",
	"{\"$ref\":\"#1n\",\"$defs\":{\"x\":{\"$anchor\":\"1n\"}}}",
	"{\"$ref\":\"#x-data\",\"x-data\":{},\"$defs\":{\"a\":{\"$anchor\":\"x-data\"}}}",
	"{\"$ref\":\"#n\",\"$defs\":{\"x\":{\"$id\":\"#/n\"}}}",
	/* every reference keyword */
	"{\"$dynamicRef\":\"#/enum/0\",\"enum\":[{}]}",
	"{\"$dynamicRef\":\"#meta\"}",
	"{\"$recursiveRef\":\"#/default\",\"default\":{}}",
	"{\"$schema\":\"#/const\",\"const\":{}}",
	"{\"$schema\":\"#meta\"}",
};

START_TEST(test_not_a_target)
{
	assert_refused(not_a_target[_i], RTS_SCHEMA_WHY_TARGET);
}
END_TEST

/* Local references that name a schema: what clients write. */
static const char *const targets[] = {
	"{\"$ref\":\"#\"}",
	"{\"properties\":{\"a\":{\"$ref\":\"#\"}}}",
	"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"$ref\":\"#\"}}}",
	"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", /* a cycle: looked up, not followed */
	"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}}}",
	"{\"$ref\":\"#/$defs/t\",\"$defs\":{\"t\":true}}",
	"{\"definitions\":{\"Pet\":{\"properties\":{\"owner\":{\"$ref\":\"#/definitions/Person\"}}},\"Person\":{}},"
	"\"items\":{\"$ref\":\"#/definitions/Pet\"}}",
	"{\"properties\":{\"a\":{\"items\":{\"type\":\"string\"}},\"b\":{\"$ref\":\"#/properties/a/items\"}}}",
	"{\"properties\":{\"a b\":{},\"c\":{\"$ref\":\"#/properties/a%20b\"}}}",
	"{\"properties\":{\"a/b\":{},\"c~d\":{},\"e\":{\"allOf\":[{\"$ref\":\"#/properties/a~1b\"},"
	"{\"$ref\":\"#/properties/c~0d\"}]}}}",
	"{\"$ref\":\"#/%24defs/a\",\"$defs\":{\"a\":{}}}",
	"{\"$ref\":\"#/$defs/%C3%A9\",\"$defs\":{\"\\u00e9\":{}}}",
	"{\"$ref\":\"#/$defs/a%20~1b\",\"$defs\":{\"a /b\":{}}}",
	"{\"items\":[{},{\"type\":\"string\"}],\"additionalItems\":{\"$ref\":\"#/items/1\"}}",
	"{\"items\":{},\"contains\":{\"$ref\":\"#/items\"}}",
	"{\"prefixItems\":[{}],\"not\":{\"$ref\":\"#/prefixItems/0\"}}",
	"{\"$ref\":\"#/not\",\"not\":false}",
	"{\"if\":{},\"then\":{\"$ref\":\"#/if\"}}",
	"{\"type\":[\"string\",{}],\"$ref\":\"#/type/1\"}",
	"{\"dependencies\":{\"a\":{},\"b\":[\"a\"]},\"$ref\":\"#/dependencies/a\"}",
	"{\"patternProperties\":{\"^x\":{}},\"propertyNames\":{\"$ref\":\"#/patternProperties/%5Ex\"}}",
	"{\"anyOf\":[{\"properties\":{\"a\":{}}}],\"$ref\":\"#/anyOf/0/properties/a\"}",
	/* the percent form a resolver that does not decode reads as a member that is not there */
	"{\"$ref\":\"#/%70roperties/a\",\"properties\":{\"a\":{}}}",
	/* anchors, defined before or after the reference */
	"{\"$ref\":\"#late\",\"$defs\":{\"x\":{\"$anchor\":\"late\"}}}",
	"{\"$defs\":{\"x\":{\"$anchor\":\"early\"}},\"$ref\":\"#early\"}",
	"{\"$ref\":\"#node\",\"definitions\":{\"n\":{\"$id\":\"#node\"}}}",
	"{\"$ref\":\"#node\",\"definitions\":{\"n\":{\"id\":\"#node\"}}}",
	"{\"$dynamicAnchor\":\"meta\",\"items\":{\"$dynamicRef\":\"#meta\"}}",
	"{\"$schema\":\"#\",\"$recursiveAnchor\":true,\"items\":{\"$recursiveRef\":\"#\"}}",
	"{\"$schema\":\"#/$defs/m\",\"$defs\":{\"m\":{}}}",
};

START_TEST(test_targets)
{
	assert_ok(targets[_i]);
}
END_TEST

/* Members that make an object a reference or an anchor. */
static const char *const reference_members[] = {
	"\"$ref\":\"#\"",	   "\"$ref\":\"https://evil.example/\"", "\"$dynamicRef\":\"#a\"", "\"$recursiveRef\":\"#\"",
	"\"$id\":\"#a\"",	   "\"$id\":\"https://evil.example/\"",  "\"$schema\":\"#\"",	    "\"$anchor\":\"a\"",
	"\"$dynamicAnchor\":\"a\"", "\"$recursiveAnchor\":true",	    "\"$vocabulary\":{}",    "\"$ref\":7",
	"\"id\":\"#a\"",	   "\"id\":\"https://evil.example/#a\"",
};

/* Where data sits; "@" is replaced with an object holding the member. */
static const char *const data_places[] = {
	"{\"enum\":[@]}",
	"{\"enum\":[1,\"x\",@]}",
	"{\"const\":@}",
	"{\"default\":@}",
	"{\"examples\":[@]}",
	"{\"x-hidden\":@}",
	"{\"required\":[@]}",
	"{\"default\":{\"a\":[{\"b\":@}]}}",
	"{\"properties\":{\"a\":{\"enum\":[[[@]]]}}}",
	"{\"not\":{\"anyOf\":[{\"const\":{\"x\":@}}]}}",
	"{\"$defs\":{\"a\":{\"x-meta\":@}}}",
};

START_TEST(test_reference_in_data)
{
	const char *place = data_places[_i];
	const char *at = strchr(place, '@');
	for (size_t m = 0; m < RTS_ARRAY_SIZE(reference_members); m++) {
		char text[512];
		snprintf(text, sizeof(text), "%.*s{\"a\":1,%s}%s", (int)(at - place), place, reference_members[m],
			 at + 1);
		assert_refused(text, RTS_SCHEMA_WHY_DATA);
		/* the same object without the member is data like any other */
		snprintf(text, sizeof(text), "%.*s{\"a\":1}%s", (int)(at - place), place, at + 1);
		assert_ok(text);
	}
}
END_TEST

START_TEST(test_reference_in_data_misc)
{
	/* an anchor defined only in data, and a draft 4 id in data */
	assert_refused("{\"$ref\":\"#n\",\"default\":{\"$anchor\":\"n\"}}", RTS_SCHEMA_WHY_DATA);
	assert_refused("{\"$ref\":\"#n\",\"examples\":[{\"id\":\"#n\"}]}", RTS_SCHEMA_WHY_DATA);
	assert_refused("{\"default\":{\"id\":\"a#b\"}}", RTS_SCHEMA_WHY_DATA);
	/* a data "id" without '#' is a record's id, and names and strings are not members */
	assert_ok("{\"default\":{\"id\":\"abc\"},\"examples\":[{\"id\":\"https://x.example/y\"},{\"id\":{\"$x\":1}}],"
		  "\"enum\":[\"$ref\",{\"ref\":\"#/$defs/a\"}],\"properties\":{\"$ref\":{\"default\":\"$id\"}}}");
}
END_TEST

START_TEST(test_data_depth_bound)
{
	/* data nesting counts on from the schema that holds it: the root is 1, its member 2 */
	cleanup_free char *ok = nested(RTS_SCHEMA_DEPTH - 1, "[", "]", "[]");
	cleanup_free char *deep = nested(RTS_SCHEMA_DEPTH, "[", "]", "[]");
	cleanup_free char *t1 = rts_xasprintf("{\"default\":%s}", ok);
	cleanup_free char *t2 = rts_xasprintf("{\"default\":%s}", deep);
	assert_ok(t1);
	assert_refused(t2, RTS_SCHEMA_WHY_DEPTH);
}
END_TEST

/* n anchors a0 .. a(n-1), with a reference to ref when ref is not NULL. */
static char *anchors(size_t n, const char *ref)
{
	size_t cap = n * 48 + 128;
	char *s = rts_xmalloc(cap);
	size_t len = (size_t)snprintf(s, cap, "{%s%s%s\"$defs\":{", ref ? "\"$ref\":\"" : "", ref ? ref : "",
				      ref ? "\"," : "");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s\"d%zu\":{\"$anchor\":\"a%zu\"}", i ? "," : "", i, i);
	snprintf(s + len, cap - len, "}}");
	return s;
}

START_TEST(test_anchor_bound)
{
	char last[32];
	snprintf(last, sizeof(last), "#a%u", RTS_SCHEMA_ANCHORS - 1);
	cleanup_free char *full = anchors(RTS_SCHEMA_ANCHORS, last);
	assert_ok(full);
	/* one more: the anchors past the bound are not recorded, a reference to one refused;
	 * one recorded before still resolves */
	snprintf(last, sizeof(last), "#a%u", RTS_SCHEMA_ANCHORS);
	cleanup_free char *over = anchors(RTS_SCHEMA_ANCHORS + 1, last);
	assert_refused(over, RTS_SCHEMA_WHY_ANCHORS);
	cleanup_free char *first = anchors(RTS_SCHEMA_ANCHORS + 1, "#a0");
	assert_ok(first);
	/* a missing name with anchors past the bound: it might have been one of them */
	cleanup_free char *missing = anchors(RTS_SCHEMA_ANCHORS + 1, "#zz");
	assert_refused(missing, RTS_SCHEMA_WHY_ANCHORS);
	/* anchors nobody refers to by name are not counted against anything */
	cleanup_free char *unused = anchors(RTS_SCHEMA_ANCHORS * 4, "#/$defs/d0");
	assert_ok(unused);
	/* the same name defined twice is one anchor */
	assert_ok("{\"$ref\":\"#a\",\"$defs\":{\"x\":{\"$anchor\":\"a\"},\"y\":{\"$dynamicAnchor\":\"a\"},"
		  "\"z\":{\"$id\":\"#a\"}}}");
}
END_TEST

START_TEST(test_pointer_token_bound)
{
	/* a name up to RTS_SCHEMA_TOKEN_MAX bytes resolves; a longer one does not */
	for (size_t n = RTS_SCHEMA_TOKEN_MAX; n <= RTS_SCHEMA_TOKEN_MAX + 1; n++) {
		cleanup_free char *name = rts_xmalloc(n + 1);
		memset(name, 'p', n);
		name[n] = '\0';
		cleanup_free char *text =
			rts_xasprintf("{\"properties\":{\"%s\":{}},\"$ref\":\"#/properties/%s\"}", name, name);
		if (n == RTS_SCHEMA_TOKEN_MAX)
			assert_ok(text);
		else
			assert_refused(text, RTS_SCHEMA_WHY_TARGET);
	}
}
END_TEST

START_TEST(test_many_pointers)
{
	/* 20000 properties, each referring to the one before: every pointer is looked up once */
	enum { N = 20000 };
	size_t cap = (size_t)N * 64 + 128;
	cleanup_free char *s = rts_xmalloc(cap);
	size_t len = (size_t)snprintf(s, cap, "{\"properties\":{\"p0\":{}");
	for (unsigned i = 1; i < N; i++)
		len += (size_t)snprintf(s + len, cap - len, ",\"p%u\":{\"$ref\":\"#/properties/p%u\"}", i, i - 1);
	size_t tail = len;
	snprintf(s + tail, cap - tail, "}}");
	assert_ok(s);
	snprintf(s + tail, cap - tail, ",\"last\":{\"$ref\":\"#/properties/p%u/enum\"}}}", (unsigned)N - 1);
	assert_refused(s, RTS_SCHEMA_WHY_TARGET);
}
END_TEST

/* ---- the call site: POST /model tools[].function.parameters ---- */

static const char *model_why(const char *params)
{
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\","
		 "\"function\":{\"name\":\"t\",\"parameters\":%s}}]}",
		 params);
	cleanup_json json_object *req = parse(body);
	json_object *out = NULL;
	const char *why = NULL;
	int r = brokerd_model_request_build(req, "m", 100, &out, &why);
	json_object_put(out);
	return r == 0 ? NULL : why;
}

START_TEST(test_model_request_uses_the_walker)
{
	assert_why(model_why("{\"anyOf\":{\"a\":{\"$ref\":\"https://evil.example/\"}}}"), RTS_SCHEMA_WHY_TYPE);
	assert_why(model_why("{\"not\":[{\"$ref\":\"https://evil.example/\"}]}"), RTS_SCHEMA_WHY_TYPE);
	assert_why(model_why("{\"dependencies\":{\"a\":{\"$ref\":\"https://evil.example/\"}}}"), RTS_SCHEMA_WHY_REMOTE);
	assert_why(model_why("{\"properties\":{\"a\":{\"$ref\":\"#/a b\"}}}"), RTS_SCHEMA_WHY_REMOTE);
	for (size_t i = 0; i < 4; i++)
		assert_why(model_why(into_data[i].text), into_data[i].why);
	ck_assert_ptr_null(model_why("{\"anyOf\":[{\"$ref\":\"#/$defs/a\"}],\"$defs\":{\"a\":true}}"));
	ck_assert_ptr_null(model_why("{\"dependencies\":{\"a\":{\"$ref\":\"#\"}}}"));
	/* the parameters themselves are an object (a boolean schema is not a tool's arguments) */
	ck_assert_ptr_nonnull(model_why("true"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_schema");
	TCase *tc = tcase_create("fragment");
	tcase_add_loop_test(tc, test_local_forms, 0, (int)RTS_ARRAY_SIZE(local_forms));
	tcase_add_loop_test(tc, test_remote_forms, 0, (int)RTS_ARRAY_SIZE(remote_forms));
	tcase_add_test(tc, test_fragment_length_is_respected);
	suite_add_tcase(s, tc);
	tc = tcase_create("positions");
	tcase_add_loop_test(tc, test_ref_in_every_position, 0, (int)RTS_ARRAY_SIZE(positions));
	tcase_add_loop_test(tc, test_vocabulary_in_every_position, 0, (int)RTS_ARRAY_SIZE(positions));
	tcase_add_loop_test(tc, test_accepted, 0, (int)RTS_ARRAY_SIZE(accepted));
	suite_add_tcase(s, tc);
	tc = tcase_create("types");
	tcase_add_loop_test(tc, test_wrong_type_refused, 0, (int)RTS_ARRAY_SIZE(wrong_types));
	tcase_add_loop_test(tc, test_wrong_type_elsewhere, 0, (int)RTS_ARRAY_SIZE(wrong_elsewhere));
	tcase_add_test(tc, test_null_is_not_a_schema);
	tcase_add_test(tc, test_wrong_type_right_type_passes);
	suite_add_tcase(s, tc);
	tc = tcase_create("bounds");
	tcase_add_test(tc, test_depth_bound);
	tcase_add_test(tc, test_wide_schema_every_member_visited);
	suite_add_tcase(s, tc);
	tc = tcase_create("targets");
	tcase_add_loop_test(tc, test_reviewer_bodies, 0, (int)RTS_ARRAY_SIZE(into_data));
	tcase_add_loop_test(tc, test_not_a_target, 0, (int)RTS_ARRAY_SIZE(not_a_target));
	tcase_add_loop_test(tc, test_targets, 0, (int)RTS_ARRAY_SIZE(targets));
	tcase_add_loop_test(tc, test_reference_in_data, 0, (int)RTS_ARRAY_SIZE(data_places));
	tcase_add_test(tc, test_reference_in_data_misc);
	tcase_add_test(tc, test_data_depth_bound);
	tcase_add_test(tc, test_anchor_bound);
	tcase_add_test(tc, test_pointer_token_bound);
	tcase_add_test(tc, test_many_pointers);
	suite_add_tcase(s, tc);
	tc = tcase_create("model");
	tcase_add_test(tc, test_model_request_uses_the_walker);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
