/* SPDX-License-Identifier: Apache-2.0 */
/* The json-c side of strict parsing (see strictjson.h for why two libraries). Kept out of
 * json.c, which the static worker compiles without jansson. */
#include "config.h"

#include <dlfcn.h>

#include "common/json.h"
#include "common/strictjson.h"
#include "common/util.h"

/* jansson exports json_object_get and json_object_iter_next too (strictjson.h). A program
 * linked with jansson before json-c would call jansson's on json-c objects: a reference
 * count that never moves, an iterator that never ends. Every program that can parse
 * strictly links this file, so it refuses to start in that case, before main(), whatever
 * its Makefile line says; check_broker_body also calls both functions. */
__attribute__((constructor)) static void json_c_binding_check(void)
{
	static const struct {
		const char *name;
		void *fn;
	} shared[] = {
		{"json_object_get", (void *)json_object_get},
		{"json_object_iter_next", (void *)json_object_iter_next},
	};
	Dl_info json_c = {0};
	if (!dladdr((void *)json_object_new_object, &json_c) || !json_c.dli_fname)
		return; /* nothing to compare with: json-c linked in statically */
	for (size_t i = 0; i < RTS_ARRAY_SIZE(shared); i++) {
		Dl_info got = {0};
		if (dladdr(shared[i].fn, &got) && got.dli_fname && strcmp(got.dli_fname, json_c.dli_fname) == 0)
			continue;
		fprintf(stderr,
			"roundtable-sandbox: %s is bound to %s, not to json-c (%s): this program was linked with jansson "
			"before json-c; link json-c first (COMMON_LIBS in common/Makemodule.am)\n",
			shared[i].name, got.dli_fname ? got.dli_fname : "another object", json_c.dli_fname);
		abort();
	}
}

void rts_json_link_check(void)
{
	json_c_binding_check();
}

int rts_json_parse_strict(const char *buf, size_t len, int max_depth, json_object **out, const char **why)
{
	int r = rts_json_parse(buf, len, max_depth, out, why);
	if (r < 0)
		return r;
	r = rts_json_strict_check(buf, len, why);
	if (r < 0) {
		json_object_put(*out);
		*out = NULL;
	}
	return r;
}

int rts_json_read_file_strict(const char *path, size_t max_bytes, int max_depth, json_object **out, char *err,
			      size_t errlen)
{
	*out = NULL;
	cleanup_free char *buf = NULL;
	size_t len = 0;
	int r = rts_json_read_bytes(path, max_bytes, &buf, &len, err, errlen);
	if (r < 0)
		return r;
	/* Operator-written files get a position, so "duplicate object key" or a stray comma can
	 * be found; network input never does (it would help nobody but a prober). */
	const char *why = NULL;
	size_t off = 0, line = 0, col = 0;
	r = rts_json_parse_at(buf, len, max_depth, out, &why, &off);
	if (r == 0) {
		r = rts_json_strict_check_at(buf, len, &why, &line, &col);
		if (r < 0) {
			json_object_put(*out);
			*out = NULL;
		}
	} else {
		line = 1;
		col = 1;
		for (size_t i = 0; i < off && i < len; i++) {
			if (buf[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
	}
	if (r < 0) {
		if (line > 0)
			snprintf(err, errlen, "%s:%zu:%zu: %s", path, line, col, why);
		else
			snprintf(err, errlen, "%s: %s", path, why);
		return -EINVAL;
	}
	return 0;
}
