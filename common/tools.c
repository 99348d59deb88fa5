/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/tools.h"
#include "common/util.h"

bool rts_name_valid(const char *s, size_t max_len)
{
	size_t n = strlen(s);
	if (n == 0 || n > max_len || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

json_object *rts_tool_spec_new(const char *name, const char *description, json_object *parameters)
{
	json_object *fn = json_object_new_object();
	json_object_object_add(fn, "name", json_object_new_string(name));
	json_object_object_add(fn, "description", json_object_new_string(description));
	json_object_object_add(fn, "parameters", json_object_get(parameters));
	json_object *spec = json_object_new_object();
	json_object_object_add(spec, "type", json_object_new_string("function"));
	json_object_object_add(spec, "function", fn);
	return spec;
}

size_t rts_tool_spec_cost(json_object *spec, const char *name)
{
	return rts_json_dump_len(spec) + 1 + 2 + strlen(name);
}

json_object *rts_fetch_tool_parameters(void)
{
	json_object *url = json_object_new_object();
	json_object_object_add(url, "type", json_object_new_string("string"));
	json_object_object_add(url, "description",
			       json_object_new_string("the absolute http:// or https:// URL to fetch"));
	json_object *props = json_object_new_object();
	json_object_object_add(props, "url", url);
	json_object *required = json_object_new_array();
	json_object_array_add(required, json_object_new_string("url"));
	json_object *p = json_object_new_object();
	json_object_object_add(p, "type", json_object_new_string("object"));
	json_object_object_add(p, "properties", props);
	json_object_object_add(p, "required", required);
	json_object_object_add(p, "additionalProperties", json_object_new_boolean(false));
	return p;
}
