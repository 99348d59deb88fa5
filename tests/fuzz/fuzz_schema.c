/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the schema reference walker (common/schema.h), on the input parsed as
 * a JSON schema (json-c, deeper than a body may be, to reach the walker's own bound), and
 * the local-fragment test on the raw bytes.
 *
 * Invariants:
 *  - a verdict is 0 with no reason, or -EINVAL with one of the RTS_SCHEMA_WHY_*;
 *  - under a data keyword ({"enum":[s],"const":s,"default":s,"examples":[s]}) s is data:
 *    refused for a reference member exactly when s holds an object with one at any depth
 *    (an independent scan), else accepted (or refused for depth);
 *  - a schema at a schema position of a wrapper ({"not":s}, {"anyOf":[true,s]},
 *    {"properties":{"$ref":s}}, {"items":[s]}) keeps its verdict, or is refused for depth,
 *    unless a local reference is involved (the wrapper is the new root its pointers
 *    resolve against);
 *  - an accepted object schema given a remote "$ref" is refused as remote, given
 *    "anyOf":{} is refused for the type, given "$ref":"#" still passes, given "$ref":
 *    "#/enum/0" with "enum":[{}] is refused for the target, and given "enum":[{"$ref":"#"}]
 *    for data;
 *  - in an accepted schema every string-valued reference member anywhere in the tree is a
 *    local fragment, and each "#/..." one, percent-decoded and resolved by json-c's own
 *    RFC 6901 resolver, names an object or a boolean;
 *  - a string the fragment test accepts has no byte outside printable ASCII, no space, no
 *    second '#' and no '%' without two hex digits; resolved by libcurl's URL parser against
 *    a base URL it keeps the base's scheme and host, adds no port or user, and all of it
 *    after the '#' is the fragment. */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <json_pointer.h>
#include <stdint.h>

#include "common/schema.h"
#include "common/util.h"
#include "tests/fuzz/fuzz_common.h"

#define PARSE_DEPTH 256 /* well past RTS_SCHEMA_DEPTH nested schemas */
#define BASE_URL "https://base.example/dir/doc.json"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	curl_global_init(CURL_GLOBAL_NOTHING);
	return 0;
}

static bool known_reason(const char *why)
{
	return why && (!strcmp(why, RTS_SCHEMA_WHY_REMOTE) || !strcmp(why, RTS_SCHEMA_WHY_TYPE) ||
		       !strcmp(why, RTS_SCHEMA_WHY_DEPTH) || !strcmp(why, RTS_SCHEMA_WHY_TARGET) ||
		       !strcmp(why, RTS_SCHEMA_WHY_DATA) || !strcmp(why, RTS_SCHEMA_WHY_ANCHORS));
}

/* NULL when accepted, else the reason. */
static const char *verdict(json_object *s)
{
	const char *why = "unset";
	int r = rts_schema_check(s, &why);
	if (r == 0) {
		FUZZ_ASSERT(why == NULL);
		return NULL;
	}
	FUZZ_ASSERT(r == -EINVAL && known_reason(why));
	return why;
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool is(const char *why, const char *reason)
{
	return why && !strcmp(why, reason);
}

static bool same_or_depth(const char *before, const char *after)
{
	if (is(before, RTS_SCHEMA_WHY_TARGET) || is(before, RTS_SCHEMA_WHY_ANCHORS) ||
	    is(after, RTS_SCHEMA_WHY_TARGET) || is(after, RTS_SCHEMA_WHY_ANCHORS))
		return true; /* the wrapper is the pointers' root now */
	return same(before, after) || is(after, RTS_SCHEMA_WHY_DEPTH);
}

static const char *const reference_members[] = {
	"$ref", "$dynamicRef", "$recursiveRef", "$id", "$schema", "$anchor", "$dynamicAnchor", "$recursiveAnchor",
	"$vocabulary",
};

static bool reference_member(const char *name, json_object *v)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(reference_members); i++)
		if (!strcmp(name, reference_members[i]))
			return true;
	return !strcmp(name, "id") && json_object_is_type(v, json_type_string) &&
	       memchr(json_object_get_string(v), '#', (size_t)json_object_get_string_len(v));
}

/* Some object in v, at any depth, holds a reference member. */
static bool holds_reference(json_object *v)
{
	if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++)
			if (holds_reference(json_object_array_get_idx(v, i)))
				return true;
	} else if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, k, sub)
		{
			if (reference_member(k, sub) || holds_reference(sub))
				return true;
		}
	}
	return false;
}

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* In accepted root, every string-valued reference member below v is local, and a pointer
 * names an object or a boolean as json-c's resolver reads it. */
static void check_references_resolve(json_object *root, json_object *v)
{
	if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++)
			check_references_resolve(root, json_object_array_get_idx(v, i));
		return;
	}
	if (!json_object_is_type(v, json_type_object))
		return;
	json_object_object_foreach(v, k, sub)
	{
		check_references_resolve(root, sub);
		/* anchors are names; a data "id" without '#' is no identifier */
		if (!json_object_is_type(sub, json_type_string) || !reference_member(k, sub) || !strcmp(k, "id") ||
		    !strcmp(k, "$anchor") || !strcmp(k, "$dynamicAnchor"))
			continue;
		const char *s = json_object_get_string(sub);
		size_t len = (size_t)json_object_get_string_len(sub);
		FUZZ_ASSERT(rts_schema_local_fragment(s, len));
		if (len < 2 || s[1] != '/' || !strcmp(k, "$id"))
			continue;
		char *path = rts_xmalloc(len);
		size_t n = 0;
		for (size_t i = 1; i < len; i++) {
			if (s[i] == '%') {
				path[n++] = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
				i += 2;
			} else {
				path[n++] = s[i];
			}
		}
		path[n] = '\0';
		json_object *t = NULL;
		FUZZ_ASSERT(strlen(path) == n && json_pointer_get(root, path, &t) == 0);
		FUZZ_ASSERT(json_object_is_type(t, json_type_object) || json_object_is_type(t, json_type_boolean));
		free(path);
	}
}

static void check_data_positions(json_object *s)
{
	json_object *w = json_object_new_object();
	json_object *arr = json_object_new_array();
	json_object_array_add(arr, json_object_get(s));
	json_object_object_add(w, "enum", arr);
	json_object_object_add(w, "const", json_object_get(s));
	json_object_object_add(w, "default", json_object_get(s));
	arr = json_object_new_array();
	json_object_array_add(arr, json_object_get(s));
	json_object_object_add(w, "examples", arr);
	const char *why = verdict(w);
	if (holds_reference(s))
		FUZZ_ASSERT(is(why, RTS_SCHEMA_WHY_DATA) || is(why, RTS_SCHEMA_WHY_DEPTH));
	else
		FUZZ_ASSERT(why == NULL || is(why, RTS_SCHEMA_WHY_DEPTH));
	json_object_put(w);
}

static void check_wrappers(json_object *s, const char *why)
{
	json_object *w = json_object_new_object();
	json_object_object_add(w, "not", json_object_get(s));
	FUZZ_ASSERT(same_or_depth(why, verdict(w)));
	json_object_put(w);

	w = json_object_new_object();
	json_object *arr = json_object_new_array();
	json_object_array_add(arr, json_object_new_boolean(1));
	json_object_array_add(arr, json_object_get(s));
	json_object_object_add(w, "anyOf", arr);
	FUZZ_ASSERT(same_or_depth(why, verdict(w)));
	json_object_put(w);

	w = json_object_new_object();
	json_object *props = json_object_new_object();
	json_object_object_add(props, "$ref", json_object_get(s));
	json_object_object_add(w, "properties", props);
	FUZZ_ASSERT(same_or_depth(why, verdict(w)));
	json_object_put(w);

	w = json_object_new_object();
	arr = json_object_new_array();
	json_object_array_add(arr, json_object_get(s));
	json_object_object_add(w, "items", arr);
	FUZZ_ASSERT(same_or_depth(why, verdict(w)));
	json_object_put(w);
}

/* s was accepted and is an object: a changed member decides the verdict. */
static void check_injections(json_object *s)
{
	json_object *c = NULL;
	FUZZ_ASSERT(json_object_deep_copy(s, &c, NULL) == 0);
	json_object_object_add(c, "$ref", json_object_new_string("https://evil.example/s.json"));
	const char *why = verdict(c);
	FUZZ_ASSERT(why && !strcmp(why, RTS_SCHEMA_WHY_REMOTE));
	json_object_object_add(c, "$ref", json_object_new_string("#"));
	FUZZ_ASSERT(verdict(c) == NULL);
	json_object_object_add(c, "anyOf", json_object_new_object());
	why = verdict(c);
	FUZZ_ASSERT(why && !strcmp(why, RTS_SCHEMA_WHY_TYPE));
	json_object_put(c);

	c = NULL;
	FUZZ_ASSERT(json_object_deep_copy(s, &c, NULL) == 0);
	json_object *e = json_object_new_array();
	json_object_array_add(e, json_object_new_object());
	json_object_object_add(c, "enum", e);
	FUZZ_ASSERT(verdict(c) == NULL);
	json_object_object_add(c, "$ref", json_object_new_string("#/enum/0"));
	FUZZ_ASSERT(is(verdict(c), RTS_SCHEMA_WHY_TARGET));
	json_object_object_add(c, "$ref", json_object_new_string("#"));
	json_object *r = json_object_new_object();
	json_object_object_add(r, "$ref", json_object_new_string("#"));
	json_object_array_put_idx(e, 0, r);
	FUZZ_ASSERT(is(verdict(c), RTS_SCHEMA_WHY_DATA));
	json_object_put(c);
}

static bool hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static void check_fragment(const char *s, size_t len)
{
	if (!rts_schema_local_fragment(s, len))
		return;
	FUZZ_ASSERT(len >= 1 && s[0] == '#');
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		FUZZ_ASSERT(c > 0x20 && c < 0x7f);
		FUZZ_ASSERT(i == 0 || c != '#');
		if (c == '%')
			FUZZ_ASSERT(i + 2 < len && hex(s[i + 1]) && hex(s[i + 2]));
	}

	/* An independent URL parser agrees that it names no other host. libcurl (7.88) resolves
	 * a fragment-only reference like a relative path ("#a" against /dir/doc.json gives
	 * /dir/#a), so the path is not compared; the origin is, and everything after the '#'
	 * must be the fragment. */
	char *text = rts_xmalloc(len + 1);
	memcpy(text, s, len);
	text[len] = '\0';
	CURLU *u = curl_url();
	FUZZ_ASSERT(u && curl_url_set(u, CURLUPART_URL, BASE_URL, 0) == CURLUE_OK);
	FUZZ_ASSERT(curl_url_set(u, CURLUPART_URL, text, 0) == CURLUE_OK);
	static const struct {
		CURLUPart part;
		const char *want; /* NULL: must be absent */
	} parts[] = {
		{CURLUPART_SCHEME, "https"}, {CURLUPART_HOST, "base.example"}, {CURLUPART_PORT, NULL},
		{CURLUPART_USER, NULL},	     {CURLUPART_PASSWORD, NULL},       {CURLUPART_OPTIONS, NULL},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(parts); i++) {
		char *got = NULL;
		CURLUcode rc = curl_url_get(u, parts[i].part, &got, 0);
		if (parts[i].want)
			FUZZ_ASSERT(rc == CURLUE_OK && !strcmp(got, parts[i].want));
		else
			FUZZ_ASSERT(rc != CURLUE_OK && got == NULL);
		curl_free(got);
	}
	if (len > 1) {
		char *frag = NULL;
		FUZZ_ASSERT(curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK && !strcmp(frag, text + 1));
		curl_free(frag);
	}
	curl_url_cleanup(u);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	check_fragment(buf, size);

	json_object *s = NULL;
	const char *why = NULL;
	if (rts_json_parse(buf, size, PARSE_DEPTH, &s, &why) != 0)
		return 0;
	const char *first = verdict(s);
	FUZZ_ASSERT(same(first, verdict(s)));
	check_data_positions(s);
	check_wrappers(s, first);
	if (!first)
		check_references_resolve(s, s);
	if (!first && json_object_is_type(s, json_type_object))
		check_injections(s);
	json_object_put(s);
	return 0;
}
