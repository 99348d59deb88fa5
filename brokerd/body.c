/* The json-c half of strictjson.h. */
#include "config.h"

#include "brokerd/brokerd.h"
#include "brokerd/strictjson.h"
#include "common/json.h"

int brokerd_body_parse(const char *buf, size_t len, json_object **out, const char **why)
{
	int r = rts_json_parse(buf, len, BROKERD_JSON_DEPTH, out, why);
	if (r < 0)
		return r;
	r = brokerd_json_strict_check(buf, len, why);
	if (r < 0) {
		json_object_put(*out);
		*out = NULL;
	}
	return r;
}
