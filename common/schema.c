/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/schema.h"
#include "common/util.h"

/* What a keyword's value may be. */
enum schema_kw {
	SCHEMA_KW_REF,		  /* a local fragment */
	SCHEMA_KW_VOCABULARY,	  /* {local fragment: boolean} */
	SCHEMA_KW_ONE,		  /* a schema */
	SCHEMA_KW_ONE_OR_LIST,	  /* a schema or [schema] */
	SCHEMA_KW_LIST,		  /* [schema] */
	SCHEMA_KW_MAP,		  /* {name: schema} */
	SCHEMA_KW_DEPENDENCIES,	  /* {name: schema or [name]} */
	SCHEMA_KW_TYPE,		  /* a type name, or [type name or schema] */
};

static const struct {
	const char *name;
	enum schema_kw kind;
} schema_keywords[] = {
	{"$ref", SCHEMA_KW_REF},
	{"$dynamicRef", SCHEMA_KW_REF},
	{"$recursiveRef", SCHEMA_KW_REF},
	{"$id", SCHEMA_KW_REF},
	{"$schema", SCHEMA_KW_REF},
	/* Draft 4's spelling of $id: a remote one would make every local "#..." below it
	 * resolve against a remote base. */
	{"id", SCHEMA_KW_REF},
	{"$vocabulary", SCHEMA_KW_VOCABULARY},
	{"additionalProperties", SCHEMA_KW_ONE},
	{"additionalItems", SCHEMA_KW_ONE},
	{"contains", SCHEMA_KW_ONE},
	{"not", SCHEMA_KW_ONE},
	{"if", SCHEMA_KW_ONE},
	{"then", SCHEMA_KW_ONE},
	{"else", SCHEMA_KW_ONE},
	{"propertyNames", SCHEMA_KW_ONE},
	{"unevaluatedItems", SCHEMA_KW_ONE},
	{"unevaluatedProperties", SCHEMA_KW_ONE},
	{"contentSchema", SCHEMA_KW_ONE},
	/* The array form is draft 4 to 2019-09's tuple validation. */
	{"items", SCHEMA_KW_ONE_OR_LIST},
	{"extends", SCHEMA_KW_ONE_OR_LIST},
	{"allOf", SCHEMA_KW_LIST},
	{"anyOf", SCHEMA_KW_LIST},
	{"oneOf", SCHEMA_KW_LIST},
	{"prefixItems", SCHEMA_KW_LIST},
	{"properties", SCHEMA_KW_MAP},
	{"patternProperties", SCHEMA_KW_MAP},
	{"$defs", SCHEMA_KW_MAP},
	{"definitions", SCHEMA_KW_MAP},
	{"dependentSchemas", SCHEMA_KW_MAP},
	{"dependencies", SCHEMA_KW_DEPENDENCIES},
	/* Draft 3 allowed schemas among the type names. */
	{"type", SCHEMA_KW_TYPE},
	{"disallow", SCHEMA_KW_TYPE},
};

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static bool hex_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* RFC 3986 fragment = *( pchar / "/" / "?" ) without pct-encoded, which the caller handles. */
static bool fragment_char(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("-._~!$&'()*+,;=:@/?", c) != NULL;
}

bool rts_schema_local_fragment(const char *s, size_t len)
{
	if (len == 0 || s[0] != '#')
		return false;
	for (size_t i = 1; i < len; i++) {
		if (s[i] == '%') {
			if (len - i < 3 || !hex_digit(s[i + 1]) || !hex_digit(s[i + 2]))
				return false;
			i += 2;
		} else if (!fragment_char(s[i])) {
			return false;
		}
	}
	return true;
}

static bool local_ref(json_object *v)
{
	return rts_schema_local_fragment(json_object_get_string(v), (size_t)json_object_get_string_len(v));
}

static int refuse(const char **why, const char *reason)
{
	*why = reason;
	return -EINVAL;
}

static int check_schema(json_object *s, unsigned depth, const char **why);

static int check_list(json_object *v, unsigned depth, const char **why)
{
	if (!is_type(v, json_type_array))
		return refuse(why, RTS_SCHEMA_WHY_TYPE);
	size_t n = json_object_array_length(v);
	for (size_t i = 0; i < n; i++) {
		int r = check_schema(json_object_array_get_idx(v, i), depth, why);
		if (r < 0)
			return r;
	}
	return 0;
}

static int check_vocabulary(json_object *v, const char **why)
{
	if (!is_type(v, json_type_object))
		return refuse(why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(v, uri, flag)
	{
		if (!rts_schema_local_fragment(uri, strlen(uri)))
			return refuse(why, RTS_SCHEMA_WHY_REMOTE);
		if (!is_type(flag, json_type_boolean))
			return refuse(why, RTS_SCHEMA_WHY_TYPE);
	}
	return 0;
}

/* {name: schema}; with names_too, a value may also be an array of property names. */
static int check_map(json_object *v, bool names_too, unsigned depth, const char **why)
{
	if (!is_type(v, json_type_object))
		return refuse(why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(v, prop, sub)
	{
		(void)prop; /* a name, not a reference */
		if (names_too && is_type(sub, json_type_array)) {
			size_t n = json_object_array_length(sub);
			for (size_t i = 0; i < n; i++)
				if (!is_type(json_object_array_get_idx(sub, i), json_type_string))
					return refuse(why, RTS_SCHEMA_WHY_TYPE);
			continue;
		}
		int r = check_schema(sub, depth, why);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A type name, or an array of type names and (draft 3) schemas. */
static int check_type(json_object *v, unsigned depth, const char **why)
{
	if (is_type(v, json_type_string))
		return 0;
	if (!is_type(v, json_type_array))
		return refuse(why, RTS_SCHEMA_WHY_TYPE);
	size_t n = json_object_array_length(v);
	for (size_t i = 0; i < n; i++) {
		json_object *t = json_object_array_get_idx(v, i);
		if (is_type(t, json_type_string))
			continue;
		if (!is_type(t, json_type_object))
			return refuse(why, RTS_SCHEMA_WHY_TYPE);
		int r = check_schema(t, depth, why);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One member of a schema object: a keyword of schema_keywords, else data (not looked into).
 * depth is that of the schemas the value may hold. */
static int check_keyword(const char *name, json_object *v, unsigned depth, const char **why)
{
	size_t k = 0;
	while (k < RTS_ARRAY_SIZE(schema_keywords) && strcmp(schema_keywords[k].name, name) != 0)
		k++;
	if (k == RTS_ARRAY_SIZE(schema_keywords))
		return 0;
	switch (schema_keywords[k].kind) {
	case SCHEMA_KW_REF:
		if (!is_type(v, json_type_string))
			return refuse(why, RTS_SCHEMA_WHY_TYPE);
		return local_ref(v) ? 0 : refuse(why, RTS_SCHEMA_WHY_REMOTE);
	case SCHEMA_KW_VOCABULARY:
		return check_vocabulary(v, why);
	case SCHEMA_KW_ONE:
		return check_schema(v, depth, why);
	case SCHEMA_KW_ONE_OR_LIST:
		return is_type(v, json_type_array) ? check_list(v, depth, why) : check_schema(v, depth, why);
	case SCHEMA_KW_LIST:
		return check_list(v, depth, why);
	case SCHEMA_KW_MAP:
		return check_map(v, false, depth, why);
	case SCHEMA_KW_DEPENDENCIES:
		return check_map(v, true, depth, why);
	case SCHEMA_KW_TYPE:
		return check_type(v, depth, why);
	}
	return refuse(why, RTS_SCHEMA_WHY_TYPE);
}

/* s sits at a schema position, depth schemas deep (the root is 1). */
static int check_schema(json_object *s, unsigned depth, const char **why)
{
	if (depth > RTS_SCHEMA_DEPTH)
		return refuse(why, RTS_SCHEMA_WHY_DEPTH);
	if (is_type(s, json_type_boolean))
		return 0;
	if (!is_type(s, json_type_object))
		return refuse(why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(s, name, v)
	{
		int r = check_keyword(name, v, depth + 1, why);
		if (r < 0)
			return r;
	}
	return 0;
}

int rts_schema_check(json_object *schema, const char **why)
{
	*why = NULL;
	return check_schema(schema, 1, why);
}
