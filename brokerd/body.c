/* SPDX-License-Identifier: Apache-2.0 */
/* Worker-supplied bodies are parsed strictly (common/strictjson.h). */
#include "config.h"

#include "brokerd/brokerd.h"
#include "common/json.h"

int brokerd_body_parse(const char *buf, size_t len, json_object **out, const char **why)
{
	return rts_json_parse_strict(buf, len, RTS_JSON_DEPTH_MAX, out, why);
}
