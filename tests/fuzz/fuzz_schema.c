/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the schema reference walker (common/schema.h), on the input parsed as
 * a JSON schema (json-c, deeper than a body may be, to reach the walker's own bound), and
 * the local-fragment test on the raw bytes.
 *
 * Invariants:
 *  - a verdict is 0 with no reason, or -EINVAL with one of the RTS_SCHEMA_WHY_*;
 *  - the verdict is the same under a data keyword: {"enum":[s],"const":s,"default":s,
 *    "examples":[s]} always passes (data is never looked into);
 *  - a schema at a schema position of a wrapper ({"not":s}, {"anyOf":[true,s]},
 *    {"properties":{"$ref":s}}, {"items":[s]}) keeps its verdict, or is refused for depth;
 *  - an accepted object schema given a remote "$ref" is refused as remote, given
 *    "anyOf":{} is refused for the type, given "$ref":"#" still passes;
 *  - a string the fragment test accepts has no byte outside printable ASCII, no space, no
 *    second '#' and no '%' without two hex digits; resolved by libcurl's URL parser against
 *    a base URL it keeps the base's scheme and host, adds no port or user, and all of it
 *    after the '#' is the fragment. */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
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
		       !strcmp(why, RTS_SCHEMA_WHY_DEPTH));
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

static bool same_or_depth(const char *before, const char *after)
{
	return same(before, after) || (after && !strcmp(after, RTS_SCHEMA_WHY_DEPTH));
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
	FUZZ_ASSERT(verdict(w) == NULL);
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
	if (!first && json_object_is_type(s, json_type_object))
		check_injections(s);
	json_object_put(s);
	return 0;
}
