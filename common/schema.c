/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/schema.h"
#include "common/util.h"

/* What a keyword's value may be. */
enum schema_kw {
	SCHEMA_KW_REF,		  /* a local fragment naming a schema */
	SCHEMA_KW_ID,		  /* a local fragment; "#name" defines an anchor */
	SCHEMA_KW_ANCHOR,	  /* an anchor name (a string) */
	SCHEMA_KW_VOCABULARY,	  /* {local fragment: boolean} */
	SCHEMA_KW_ONE,		  /* a schema */
	SCHEMA_KW_ONE_OR_LIST,	  /* a schema or [schema] */
	SCHEMA_KW_LIST,		  /* [schema] */
	SCHEMA_KW_MAP,		  /* {name: schema} */
	SCHEMA_KW_DEPENDENCIES,	  /* {name: schema or [name]} */
	SCHEMA_KW_TYPE,		  /* a type name, or [type name or schema] */
	SCHEMA_KW_DATA,		  /* not a keyword the walker knows: data */
};

static const struct {
	const char *name;
	enum schema_kw kind;
} schema_keywords[] = {
	{"$ref", SCHEMA_KW_REF},
	{"$dynamicRef", SCHEMA_KW_REF},
	{"$recursiveRef", SCHEMA_KW_REF},
	/* A meta-schema is read as a schema: "#/enum/0" would make data one. */
	{"$schema", SCHEMA_KW_REF},
	{"$id", SCHEMA_KW_ID},
	/* Draft 4's spelling of $id: a remote one would make every local "#..." below it
	 * resolve against a remote base. */
	{"id", SCHEMA_KW_ID},
	{"$anchor", SCHEMA_KW_ANCHOR},
	{"$dynamicAnchor", SCHEMA_KW_ANCHOR},
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

/* Members that make an object a reference, a resource or an anchor to a resolver: never in
 * data, where a resolver that reads data as a schema, or indexes every "$id" it meets, would
 * find them. Draft 4's "id" is data's common "id" field; it counts only holding a '#'. */
static const char *const reference_members[] = {
	"$ref",	   "$dynamicRef",    "$recursiveRef", "$id",	     "$schema",
	"$anchor", "$dynamicAnchor", "$vocabulary",   "$recursiveAnchor",
};

/* One walk over the schema. Pass 1 checks everything but whether each plain-name reference
 * names an anchor, and records the anchors (at most RTS_SCHEMA_ANCHORS, pointers into the
 * tree); pass 2, run only when pass 1 met a plain-name reference, checks those. */
struct walk {
	json_object *root;
	const char **why;
	bool names; /* pass 2 */
	size_t name_refs;
	size_t n_anchors;
	bool anchors_overflow;
	struct {
		const char *s;
		size_t len;
	} anchors[RTS_SCHEMA_ANCHORS];
};

static bool is_type(json_object *o, json_type t)
{
	return o && json_object_is_type(o, t);
}

static bool hex_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hex_value(char c)
{
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
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

/* An anchor name (2020-12: [A-Za-z_][-A-Za-z0-9._]*): no '/', '%' or '~', so no resolver
 * reads it as a pointer or decodes it differently. */
static bool anchor_name(const char *s, size_t len)
{
	if (len == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return false;
	for (size_t i = 1; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._", c)))
			return false;
	}
	return true;
}

static int refuse(const char **why, const char *reason)
{
	*why = reason;
	return -EINVAL;
}

static enum schema_kw keyword_kind(const char *name)
{
	for (size_t k = 0; k < RTS_ARRAY_SIZE(schema_keywords); k++)
		if (strcmp(schema_keywords[k].name, name) == 0)
			return schema_keywords[k].kind;
	return SCHEMA_KW_DATA;
}

/* ---- JSON pointers (RFC 6901 in a URI fragment, section 6) ---- */

enum target {
	TARGET_SCHEMA, /* a value at a schema position */
	TARGET_ABSENT, /* resolves to nothing: a resolver reading it so fails */
	TARGET_OTHER,  /* data, a keyword's non-schema value, or not decidable */
};

/* How a resolver may read the pointer: RFC 6901 percent-decodes, then unescapes ~0 ~1;
 * resolvers that skip either step exist. */
enum {
	POINTER_PCT = 1u,
	POINTER_TILDE = 2u,
};

/* Where a pointer step stands: the container kind decides what the next token names. */
enum place {
	PLACE_SCHEMA, /* a schema: the token is a keyword */
	PLACE_LIST,   /* [schema]: an index */
	PLACE_MAP,    /* {name: schema}: a name */
	PLACE_DEPS,   /* {name: schema or [name]}: a name */
	PLACE_TYPES,  /* [type name or schema]: an index */
	PLACE_OTHER,  /* anything else: not a schema */
};

/* RFC 6901 array index: "0" or a digit string without a leading zero, below n. */
static bool array_index(const char *t, size_t len, size_t n, size_t *idx)
{
	if (len == 0 || (len > 1 && t[0] == '0'))
		return false;
	size_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (t[i] < '0' || t[i] > '9')
			return false;
		v = v * 10 + (size_t)(t[i] - '0'); /* no overflow: v < n before, n is a length */
		if (v >= n)
			return false;
	}
	*idx = v;
	return true;
}

/* Decode the raw token t (len bytes, no '/') into buf as flags say; false when it cannot be
 * decoded: a token longer than RTS_SCHEMA_TOKEN_MAX, a NUL byte (no json-c key holds one), a
 * '~' not followed by 0 or 1. */
static bool token_decode(const char *t, size_t len, unsigned flags, char *buf, size_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		char c = t[i];
		if ((flags & POINTER_PCT) && c == '%' && len - i >= 3 && hex_digit(t[i + 1]) && hex_digit(t[i + 2])) {
			c = (char)(hex_value(t[i + 1]) << 4 | hex_value(t[i + 2]));
			i += 2;
		} else if ((flags & POINTER_TILDE) && c == '~') {
			if (i + 1 >= len || (t[i + 1] != '0' && t[i + 1] != '1'))
				return false;
			c = t[i + 1] == '0' ? '~' : '/';
			i++;
		}
		if (c == '\0' || n == RTS_SCHEMA_TOKEN_MAX)
			return false;
		buf[n++] = c;
	}
	buf[n] = '\0';
	*out = n;
	return true;
}

/* What the pointer p (len bytes after the '#', the leading '/' included unless the caller
 * reads a plain name as a pointer) names in root, read as flags say. Each token is one
 * keyword, name or index step; the place decides which, as in the walk, so a pointer can
 * only end at a schema position by the same steps the walk takes to visit it. */
static enum target resolve(json_object *root, const char *p, size_t len, unsigned flags)
{
	char buf[RTS_SCHEMA_TOKEN_MAX + 1];
	json_object *cur = root;
	enum place place = PLACE_SCHEMA;
	size_t i = len > 0 && p[0] == '/' ? 1 : 0;
	while (i <= len && len > 0) {
		const char *t = p + i;
		const char *slash = memchr(t, '/', len - i);
		size_t tlen = slash ? (size_t)(slash - t) : len - i;
		i += tlen + 1;
		size_t n;
		if (!token_decode(t, tlen, flags, buf, &n))
			return TARGET_OTHER;
		json_object *next = NULL;
		size_t idx;
		switch (place) {
		case PLACE_SCHEMA:
			if (!is_type(cur, json_type_object))
				return TARGET_ABSENT; /* a boolean schema has no members */
			if (!json_object_object_get_ex(cur, buf, &next))
				return TARGET_ABSENT;
			switch (keyword_kind(buf)) {
			case SCHEMA_KW_ONE:
				place = PLACE_SCHEMA;
				break;
			case SCHEMA_KW_ONE_OR_LIST:
				place = is_type(next, json_type_array) ? PLACE_LIST : PLACE_SCHEMA;
				break;
			case SCHEMA_KW_LIST:
				place = PLACE_LIST;
				break;
			case SCHEMA_KW_MAP:
				place = PLACE_MAP;
				break;
			case SCHEMA_KW_DEPENDENCIES:
				place = PLACE_DEPS;
				break;
			case SCHEMA_KW_TYPE:
				place = PLACE_TYPES;
				break;
			default: /* data, or a reference, anchor or vocabulary value */
				return TARGET_OTHER;
			}
			break;
		case PLACE_LIST:
		case PLACE_TYPES:
			if (!is_type(cur, json_type_array))
				return TARGET_OTHER;
			if (!array_index(buf, n, json_object_array_length(cur), &idx))
				return TARGET_ABSENT;
			next = json_object_array_get_idx(cur, idx);
			place = place == PLACE_LIST || is_type(next, json_type_object) ? PLACE_SCHEMA : PLACE_OTHER;
			break;
		case PLACE_MAP:
		case PLACE_DEPS:
			if (!is_type(cur, json_type_object))
				return TARGET_OTHER;
			if (!json_object_object_get_ex(cur, buf, &next))
				return TARGET_ABSENT;
			place = place == PLACE_DEPS && is_type(next, json_type_array) ? PLACE_OTHER : PLACE_SCHEMA;
			break;
		case PLACE_OTHER:
			return TARGET_OTHER;
		}
		cur = next;
	}
	if (place != PLACE_SCHEMA || !(is_type(cur, json_type_object) || is_type(cur, json_type_boolean)))
		return TARGET_OTHER;
	return TARGET_SCHEMA;
}

/* A "#/..." reference: it names a schema as RFC 6901 reads it, and a resolver that skips the
 * percent-decoding or the ~ unescaping finds a schema or nothing, never data. An escape that
 * decodes to '/', '~', '%' or '#' is refused: resolvers disagree on whether it splits,
 * unescapes or decodes again, and no schema a client writes needs one. */
static bool pointer_names_a_schema(json_object *root, const char *p, size_t len)
{
	bool pct = false, tilde = false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '~') {
			tilde = true;
		} else if (p[i] == '%') {
			pct = true;
			/* rts_schema_local_fragment() made sure two hex digits follow */
			char c = (char)(hex_value(p[i + 1]) << 4 | hex_value(p[i + 2]));
			if (c == '/' || c == '~' || c == '%' || c == '#')
				return false;
		}
	}
	if (resolve(root, p, len, POINTER_PCT | POINTER_TILDE) != TARGET_SCHEMA)
		return false;
	if (pct && resolve(root, p, len, POINTER_TILDE) == TARGET_OTHER)
		return false;
	if (tilde && resolve(root, p, len, POINTER_PCT) == TARGET_OTHER)
		return false;
	if (pct && tilde && resolve(root, p, len, 0) == TARGET_OTHER)
		return false;
	return true;
}

static bool anchor_known(const struct walk *w, const char *s, size_t len)
{
	for (size_t i = 0; i < w->n_anchors; i++)
		if (w->anchors[i].len == len && memcmp(w->anchors[i].s, s, len) == 0)
			return true;
	return false;
}

static void anchor_record(struct walk *w, const char *s, size_t len)
{
	if (w->names || !anchor_name(s, len) || anchor_known(w, s, len))
		return;
	if (w->n_anchors == RTS_SCHEMA_ANCHORS) {
		w->anchors_overflow = true;
		return;
	}
	w->anchors[w->n_anchors].s = s;
	w->anchors[w->n_anchors].len = len;
	w->n_anchors++;
}

/* The value v of $ref, $dynamicRef, $recursiveRef or $schema at a schema position. */
static int check_reference(struct walk *w, json_object *v)
{
	if (!is_type(v, json_type_string))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (!rts_schema_local_fragment(s, len))
		return refuse(w->why, RTS_SCHEMA_WHY_REMOTE);
	const char *frag = s + 1;
	size_t flen = len - 1;
	if (flen == 0)
		return 0; /* the root */
	if (frag[0] == '/')
		return pointer_names_a_schema(w->root, frag, flen) ? 0 : refuse(w->why, RTS_SCHEMA_WHY_TARGET);
	/* A plain name: an anchor of this document. A resolver that reads "#name" as the
	 * pointer "/name" must not find data there either. */
	if (!anchor_name(frag, flen) || resolve(w->root, frag, flen, 0) == TARGET_OTHER)
		return refuse(w->why, RTS_SCHEMA_WHY_TARGET);
	if (!w->names) {
		w->name_refs++;
		return 0;
	}
	if (anchor_known(w, frag, flen))
		return 0;
	return refuse(w->why, w->anchors_overflow ? RTS_SCHEMA_WHY_ANCHORS : RTS_SCHEMA_WHY_TARGET);
}

/* ---- data ---- */

/* v is data depth levels deep (counted as schemas are): no object in it holds a reference
 * member. Every value is looked at once. */
static int check_data(struct walk *w, json_object *v, unsigned depth)
{
	bool obj = is_type(v, json_type_object);
	if (!obj && !is_type(v, json_type_array))
		return 0;
	if (depth > RTS_SCHEMA_DEPTH)
		return refuse(w->why, RTS_SCHEMA_WHY_DEPTH);
	if (!obj) {
		size_t n = json_object_array_length(v);
		for (size_t i = 0; i < n; i++) {
			int r = check_data(w, json_object_array_get_idx(v, i), depth + 1);
			if (r < 0)
				return r;
		}
		return 0;
	}
	json_object_object_foreach(v, name, sub)
	{
		for (size_t k = 0; k < RTS_ARRAY_SIZE(reference_members); k++)
			if (strcmp(name, reference_members[k]) == 0)
				return refuse(w->why, RTS_SCHEMA_WHY_DATA);
		if (strcmp(name, "id") == 0 && is_type(sub, json_type_string) &&
		    memchr(json_object_get_string(sub), '#', (size_t)json_object_get_string_len(sub)))
			return refuse(w->why, RTS_SCHEMA_WHY_DATA);
		int r = check_data(w, sub, depth + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- schema positions ---- */

static int check_schema(struct walk *w, json_object *s, unsigned depth);

static int check_list(struct walk *w, json_object *v, unsigned depth)
{
	if (!is_type(v, json_type_array))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	size_t n = json_object_array_length(v);
	for (size_t i = 0; i < n; i++) {
		int r = check_schema(w, json_object_array_get_idx(v, i), depth);
		if (r < 0)
			return r;
	}
	return 0;
}

static int check_vocabulary(struct walk *w, json_object *v)
{
	if (!is_type(v, json_type_object))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(v, uri, flag)
	{
		if (!rts_schema_local_fragment(uri, strlen(uri)))
			return refuse(w->why, RTS_SCHEMA_WHY_REMOTE);
		if (!is_type(flag, json_type_boolean))
			return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	}
	return 0;
}

/* {name: schema}; with names_too, a value may also be an array of property names. */
static int check_map(struct walk *w, json_object *v, bool names_too, unsigned depth)
{
	if (!is_type(v, json_type_object))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(v, prop, sub)
	{
		(void)prop; /* a name, not a reference */
		if (names_too && is_type(sub, json_type_array)) {
			size_t n = json_object_array_length(sub);
			for (size_t i = 0; i < n; i++)
				if (!is_type(json_object_array_get_idx(sub, i), json_type_string))
					return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
			continue;
		}
		int r = check_schema(w, sub, depth);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A type name, or an array of type names and (draft 3) schemas. */
static int check_type(struct walk *w, json_object *v, unsigned depth)
{
	if (is_type(v, json_type_string))
		return 0;
	if (!is_type(v, json_type_array))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	size_t n = json_object_array_length(v);
	for (size_t i = 0; i < n; i++) {
		json_object *t = json_object_array_get_idx(v, i);
		if (is_type(t, json_type_string))
			continue;
		if (!is_type(t, json_type_object))
			return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
		int r = check_schema(w, t, depth);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One member of a schema object. depth is that of the schemas (or data) the value holds. */
static int check_keyword(struct walk *w, const char *name, json_object *v, unsigned depth)
{
	switch (keyword_kind(name)) {
	case SCHEMA_KW_REF:
		return check_reference(w, v);
	case SCHEMA_KW_ID:
		if (!is_type(v, json_type_string))
			return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
		if (!rts_schema_local_fragment(json_object_get_string(v), (size_t)json_object_get_string_len(v)))
			return refuse(w->why, RTS_SCHEMA_WHY_REMOTE);
		/* "#name" (drafts 4 to 7) names this schema */
		anchor_record(w, json_object_get_string(v) + 1, (size_t)json_object_get_string_len(v) - 1);
		return 0;
	case SCHEMA_KW_ANCHOR:
		if (!is_type(v, json_type_string))
			return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
		anchor_record(w, json_object_get_string(v), (size_t)json_object_get_string_len(v));
		return 0;
	case SCHEMA_KW_VOCABULARY:
		return check_vocabulary(w, v);
	case SCHEMA_KW_ONE:
		return check_schema(w, v, depth);
	case SCHEMA_KW_ONE_OR_LIST:
		return is_type(v, json_type_array) ? check_list(w, v, depth) : check_schema(w, v, depth);
	case SCHEMA_KW_LIST:
		return check_list(w, v, depth);
	case SCHEMA_KW_MAP:
		return check_map(w, v, false, depth);
	case SCHEMA_KW_DEPENDENCIES:
		return check_map(w, v, true, depth);
	case SCHEMA_KW_TYPE:
		return check_type(w, v, depth);
	case SCHEMA_KW_DATA:
		return check_data(w, v, depth);
	}
	return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
}

/* s sits at a schema position, depth schemas deep (the root is 1). */
static int check_schema(struct walk *w, json_object *s, unsigned depth)
{
	if (depth > RTS_SCHEMA_DEPTH)
		return refuse(w->why, RTS_SCHEMA_WHY_DEPTH);
	if (is_type(s, json_type_boolean))
		return 0;
	if (!is_type(s, json_type_object))
		return refuse(w->why, RTS_SCHEMA_WHY_TYPE);
	json_object_object_foreach(s, name, v)
	{
		int r = check_keyword(w, name, v, depth + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

int rts_schema_check(json_object *schema, const char **why)
{
	struct walk w = {.root = schema, .why = why};
	*why = NULL;
	int r = check_schema(&w, schema, 1);
	if (r < 0 || w.name_refs == 0)
		return r;
	w.names = true;
	return check_schema(&w, schema, 1);
}
