/* SPDX-License-Identifier: Apache-2.0 */
/* Worker-supplied bodies are parsed strictly (common/strictjson.h) and held to their
 * tables (common/jspec.h). */
#include "config.h"

#include <errno.h>

#include "brokerd/brokerd.h"
#include "common/json.h"
#include "common/jspec.h"

int brokerd_body_parse(const char *buf, size_t len, json_object **out, const char **why)
{
	return rts_json_parse_strict(buf, len, RTS_JSON_DEPTH_MAX, out, why);
}

int brokerd_body_check(json_object *doc, const struct rts_jfield *root, const char **why, const char **code)
{
	/* One per thread: libmicrohttpd runs a thread per connection. */
	static __thread struct rts_jerr e;
	static __thread char text[RTS_JERR_PATH_MAX + RTS_JERR_TEXT_MAX + 8];
	if (code)
		*code = NULL;
	if (rts_jspec_validate(doc, root, NULL, 0, &e) < 0) {
		*why = rts_jerr_join(&e, " ", text, sizeof(text));
		if (code)
			*code = e.code;
		return -EINVAL;
	}
	return 0;
}
