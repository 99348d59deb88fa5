/* SPDX-License-Identifier: Apache-2.0 */
/* The table walker of jspec.h. libc, json-c and two helpers only: the static worker
 * compiles this file too. */
#include "config.h"

#include <math.h>
#include <stdarg.h>

#include "common/json.h"
#include "common/jspec.h"
#include "common/util.h"

/* An unknown key is named in operator mode with at most this many bytes of it. */
#define ECHO_KEY_MAX 64u

struct rts_jctx {
	unsigned flags;
	struct rts_jerr *err;
	bool failed;
	const struct rts_jfield *field; /* whose rule is being checked (NULL: a table's own) */
	char path[RTS_JERR_PATH_MAX];
	size_t len;  /* strlen(path) */
	size_t last; /* where the last component starts */
};

/* ---- the path ---- */

__attribute__((format(printf, 2, 3))) static size_t push(struct rts_jctx *ctx, const char *fmt, ...)
{
	size_t old = ctx->len;
	if (ctx->len < sizeof(ctx->path) - 1) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(ctx->path + ctx->len, sizeof(ctx->path) - ctx->len, fmt, ap);
		va_end(ap);
		if (n > 0)
			ctx->len +=
			    (size_t)n < sizeof(ctx->path) - ctx->len ? (size_t)n : sizeof(ctx->path) - 1 - ctx->len;
	}
	ctx->last = old;
	return old;
}

/* A member name, or a relative path that starts with one or with "[i]". */
static size_t push_key(struct rts_jctx *ctx, const char *key)
{
	return push(ctx, "%s%s", ctx->len && key[0] != '[' ? "." : "", key);
}

static void pop(struct rts_jctx *ctx, size_t old)
{
	ctx->len = old;
	ctx->path[old] = '\0';
	ctx->last = old;
}

/* The key as the operator wrote it, printable ASCII only and cut at ECHO_KEY_MAX bytes:
 * it lands in a log line. */
static size_t push_echo(struct rts_jctx *ctx, const char *key)
{
	char safe[ECHO_KEY_MAX + 4];
	size_t n = 0;
	for (; key[n] && n < ECHO_KEY_MAX; n++)
		safe[n] = key[n] >= 0x20 && key[n] < 0x7f ? key[n] : '?';
	if (key[n]) {
		memcpy(safe + n, "...", 3);
		n += 3;
	}
	safe[n] = '\0';
	return push(ctx, "%s%s", ctx->len ? "." : "", safe);
}

/* ---- failing ---- */

__attribute__((format(printf, 5, 0))) static bool vfail(struct rts_jctx *ctx, enum rts_jproblem problem,
							const struct rts_jfield *f, const char *code, const char *fmt,
							va_list ap)
{
	if (ctx->failed)
		return false;
	ctx->failed = true;
	struct rts_jerr *e = ctx->err;
	e->problem = problem;
	e->field = f;
	e->code = code;
	memcpy(e->path, ctx->path, ctx->len + 1);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	return false;
}

__attribute__((format(printf, 4, 5))) static bool fail(struct rts_jctx *ctx, enum rts_jproblem problem,
						       const struct rts_jfield *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, problem, f, NULL, fmt, ap);
	va_end(ap);
	return false;
}

bool rts_jfail(struct rts_jctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, RTS_JP_RULE, ctx->field, NULL, fmt, ap);
	va_end(ap);
	return false;
}

bool rts_jfail_code(struct rts_jctx *ctx, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, RTS_JP_RULE, ctx->field, code, fmt, ap);
	va_end(ap);
	return false;
}

bool rts_jfail_at(struct rts_jctx *ctx, const char *rel, const char *fmt, ...)
{
	size_t old = push_key(ctx, rel);
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, RTS_JP_RULE, ctx->field, NULL, fmt, ap);
	va_end(ap);
	pop(ctx, old);
	return false;
}

void rts_jctx_rename(struct rts_jctx *ctx, const char *fmt, ...)
{
	char name[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	pop(ctx, ctx->last);
	push(ctx, "[%s]", name);
}

const char *rts_jerr_join(const struct rts_jerr *e, const char *sep, char *buf, size_t len)
{
	if (e->path[0])
		snprintf(buf, len, "%s%s%s", e->path, sep, e->text);
	else
		snprintf(buf, len, "%s", e->text);
	return buf;
}

/* ---- describing a field ---- */

static unsigned json_type_bit(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		return RTS_JT_NULL;
	case json_type_boolean:
		return RTS_JT_BOOL;
	case json_type_int:
		return RTS_JT_INT;
	case json_type_double:
		return RTS_JT_DOUBLE;
	case json_type_string:
		return RTS_JT_STRING;
	case json_type_object:
		return RTS_JT_OBJECT;
	case json_type_array:
		return RTS_JT_ARRAY;
	}
	return 0;
}

static const char *type_name(json_object *v)
{
	switch (json_type_bit(v)) {
	case RTS_JT_NULL:
		return "null";
	case RTS_JT_BOOL:
		return "a boolean";
	case RTS_JT_INT:
	case RTS_JT_DOUBLE:
		return "a number";
	case RTS_JT_STRING:
		return "a string";
	case RTS_JT_OBJECT:
		return "an object";
	case RTS_JT_ARRAY:
		return "an array";
	}
	return "something else";
}

/* Append to buf (of len bytes, NUL-terminated, used bytes *at). */
__attribute__((format(printf, 4, 5))) static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	if (*at >= len - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len - 1 ? *at + (size_t)n : len - 1;
}

/* "a", "a or b", "a, b or c" from the NULL-terminated list, each quoted when quote. */
static void add_list(char *buf, size_t len, size_t *at, const char *const *v, bool quote)
{
	const char *q = quote ? "\"" : "";
	for (size_t i = 0; v[i]; i++)
		add(buf, len, at, "%s%s%s%s", i == 0 ? "" : v[i + 1] ? ", " : " or ", q, v[i], q);
}

static void add_string_bounds(char *buf, size_t len, size_t *at, const struct rts_jfield *f)
{
	long long lo = (long long)f->min, hi = (long long)f->max;
	if (f->one_of)
		add_list(buf, len, at, f->one_of, true);
	else if (hi == 0 && lo == 0)
		add(buf, len, at, "a string");
	else if (hi == 0)
		add(buf, len, at, lo == 1 ? "a non-empty string" : "a string of at least %lld bytes", lo);
	else if (lo == hi)
		add(buf, len, at, "a string of %lld bytes", lo);
	else if (lo == 0)
		add(buf, len, at, "a string of at most %lld bytes", hi);
	else
		add(buf, len, at, "a string of %lld to %lld bytes", lo, hi);
}

/* What a value of f must be: "an integer from 1 to 5", "a string of at most 256 bytes or
 * null", "\"on\" or \"off\"", "an array of tools". */
static const char *describe(const struct rts_jfield *f, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	if (f->what)
		return f->what;
	unsigned t = f->types & ~RTS_JT_NULL;
	bool first = true;
	if (t & RTS_JT_DOUBLE) {
		add(buf, len, &at, "a number from %g to %g", f->dmin, f->dmax);
		first = false;
	} else if (t & RTS_JT_INT) {
		if (f->min == f->max)
			add(buf, len, &at, "%lld", (long long)f->min);
		else
			add(buf, len, &at, "an integer from %lld to %lld", (long long)f->min, (long long)f->max);
		first = false;
	}
	static const struct {
		unsigned bit;
		const char *noun;
	} nouns[] = {
	    {RTS_JT_BOOL, "a boolean"}, {RTS_JT_STRING, NULL}, {RTS_JT_OBJECT, "an object"}, {RTS_JT_ARRAY, NULL}};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(nouns); i++) {
		if (!(t & nouns[i].bit))
			continue;
		if (!first)
			add(buf, len, &at, " or ");
		first = false;
		if (nouns[i].bit == RTS_JT_STRING)
			add_string_bounds(buf, len, &at, f);
		else if (nouns[i].bit == RTS_JT_ARRAY)
			add(buf, len, &at, f->items ? "an array of %s" : "an array", f->items);
		else
			add(buf, len, &at, "%s", nouns[i].noun);
	}
	if (f->types & RTS_JT_NULL)
		add(buf, len, &at, first ? "null" : " or null");
	return buf;
}

static bool fail_type(struct rts_jctx *ctx, const struct rts_jfield *f, json_object *v)
{
	char what[256];
	if (ctx->flags & RTS_JV_OPERATOR)
		return fail(ctx, RTS_JP_TYPE, f, "must be %s, not %s", describe(f, what, sizeof(what)), type_name(v));
	return fail(ctx, RTS_JP_TYPE, f, "must be %s", describe(f, what, sizeof(what)));
}

static bool fail_range(struct rts_jctx *ctx, const struct rts_jfield *f)
{
	char what[256];
	return fail(ctx, RTS_JP_RANGE, f, "must be %s", describe(f, what, sizeof(what)));
}

static bool fail_count(struct rts_jctx *ctx, const struct rts_jfield *f)
{
	const char *items = f->items ? f->items : "entries";
	long long lo = (long long)f->min, hi = (long long)f->max;
	if (hi == 0)
		return fail(ctx, RTS_JP_COUNT, f, "must list at least %lld %s", lo, items);
	if (lo == 0)
		return fail(ctx, RTS_JP_COUNT, f, "must list at most %lld %s", hi, items);
	return fail(ctx, RTS_JP_COUNT, f, "must list %lld to %lld %s", lo, hi, items);
}

/* ---- storing ---- */

static void *at(void *base, size_t off)
{
	return (char *)base + off;
}

static void store_json(const struct rts_jfield *f, void *base, json_object *v)
{
	if (f->store == RTS_JS_JSON) {
		*(json_object **)at(base, f->at) = v;
	} else if (f->store == RTS_JS_JSON_REF) {
		json_object **p = at(base, f->at);
		if (*p)
			json_object_put(*p);
		*p = json_object_get(v);
	}
}

static void store_string(const struct rts_jfield *f, void *base, const char *s)
{
	if (f->store == RTS_JS_STR) {
		*(const char **)at(base, f->at) = s;
	} else if (f->store == RTS_JS_STRDUP) {
		char **p = at(base, f->at);
		free(*p);
		*p = s ? rts_xstrdup(s) : NULL;
	}
}

/* ---- the walk ---- */

static bool check_value(struct rts_jctx *ctx, json_object *v, const struct rts_jfield *f, void *base);
static bool walk_object(struct rts_jctx *ctx, json_object *o, const struct rts_jspec *spec, void *base);

static bool check_int(struct rts_jctx *ctx, json_object *v, const struct rts_jfield *f, void *base)
{
	errno = 0;
	int64_t x = json_object_get_int64(v);
	/* json-c reads an integer beyond 64 bits as the nearest one it holds (errno set for
	 * some only): out of any range that stops short of the 64-bit ends. Untrusted input
	 * never gets here with one (the strict parse refuses it). */
	bool saturated = errno != 0;
	if (f->types & RTS_JT_DOUBLE) {
		double d = (double)x;
		if (saturated || d < f->dmin || d > f->dmax)
			return fail_range(ctx, f);
		if (base && f->store == RTS_JS_DOUBLE)
			*(double *)at(base, f->at) = d;
		return true;
	}
	if (saturated || x < f->min || x > f->max)
		return fail_range(ctx, f);
	if (!base)
		return true;
	if (f->store == RTS_JS_INT64) {
		*(int64_t *)at(base, f->at) = x;
	} else if (f->store == RTS_JS_UINT32) {
		if (f->min < 0 || f->max > (int64_t)UINT32_MAX)
			abort(); /* a table bug: the range must fit the store */
		*(uint32_t *)at(base, f->at) = (uint32_t)x;
	} else if (f->store == RTS_JS_DOUBLE) {
		*(double *)at(base, f->at) = (double)x;
	}
	return true;
}

static bool check_string(struct rts_jctx *ctx, json_object *v, const struct rts_jfield *f, void *base)
{
	size_t n = (size_t)json_object_get_string_len(v);
	const char *s = json_object_get_string(v);
	/* "\u0000" survives json-c's parser; it would cut the string short later on. */
	if (memchr(s, '\0', n))
		return f->what ? fail(ctx, RTS_JP_NUL, f, "must be %s", f->what)
			       : fail(ctx, RTS_JP_NUL, f, "must not contain NUL characters");
	if ((f->flags & RTS_JF_UTF8) && !rts_utf8_valid(s, n))
		return f->what ? fail(ctx, RTS_JP_UTF8, f, "must be %s", f->what)
			       : fail(ctx, RTS_JP_UTF8, f, "must be valid UTF-8");
	if (f->flags & RTS_JF_ENCODED) {
		size_t e = rts_json_string_len(s, n);
		if (f->max > 0 && e > (size_t)f->max)
			return fail(ctx, RTS_JP_RANGE, f,
				    "must take at most %lld bytes JSON-escaped, not %zu (quotes, backslashes, '/' and "
				    "line breaks take two, other control characters six)",
				    (long long)f->max, e);
	} else if ((f->min > 0 && n < (size_t)f->min) || (f->max > 0 && n > (size_t)f->max)) {
		return fail_range(ctx, f);
	}
	int index = -1;
	if (f->one_of) {
		for (int i = 0; f->one_of[i] && index < 0; i++)
			if (strcmp(f->one_of[i], s) == 0)
				index = i;
		if (index < 0)
			return fail_range(ctx, f);
	}
	if (!base)
		return true;
	if (f->store == RTS_JS_INDEX)
		*(int *)at(base, f->at) = index;
	else
		store_string(f, base, s);
	return true;
}

/* A new zeroed entry array of n + 1 for f at base, or NULL when nothing is stored. */
static char *entries_new(const struct rts_jfield *f, void *base, size_t n)
{
	if (!base || f->store != RTS_JS_ARRAY)
		return NULL;
	if (f->elem_size == 0)
		abort(); /* a table bug */
	char *a = rts_xcalloc(n + 1, f->elem_size);
	*(void **)at(base, f->at) = a;
	if (f->flags & RTS_JF_COUNT)
		*(size_t *)at(base, f->count_at) = n;
	return a;
}

/* The string at the dotted member path in o, or NULL. */
static const char *member_string(json_object *o, const char *path)
{
	char part[64];
	while (o) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		o = rts_json_get(o, part);
		if (!dot)
			return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : NULL;
		path = dot + 1;
	}
	return NULL;
}

static bool check_unique(struct rts_jctx *ctx, json_object *a, const struct rts_jfield *f)
{
	size_t n = json_object_array_length(a);
	for (size_t j = 1; j < n; j++) {
		const char *s = member_string(json_object_array_get_idx(a, j), f->unique);
		for (size_t i = 0; s && i < j; i++) {
			const char *t = member_string(json_object_array_get_idx(a, i), f->unique);
			if (!t || strcmp(s, t) != 0)
				continue;
			size_t old = push(ctx, "[%zu]", j);
			if (ctx->flags & RTS_JV_OPERATOR)
				fail(ctx, RTS_JP_DUPLICATE, f, "duplicate %s \"%s\"", f->unique, s);
			else
				fail(ctx, RTS_JP_DUPLICATE, f, "repeats an earlier %s", f->unique);
			pop(ctx, old);
			return false;
		}
	}
	return true;
}

static bool check_array(struct rts_jctx *ctx, json_object *a, const struct rts_jfield *f, void *base)
{
	size_t n = json_object_array_length(a);
	if ((f->min > 0 && n < (size_t)f->min) || (f->max > 0 && n > (size_t)f->max))
		return fail_count(ctx, f);
	char *entries = entries_new(f, base, n);
	if (f->each)
		for (size_t i = 0; i < n; i++) {
			size_t old = push(ctx, "[%zu]", i);
			bool ok = check_value(ctx, json_object_array_get_idx(a, i), f->each,
					      entries ? entries + i * f->elem_size : NULL);
			pop(ctx, old);
			if (!ok)
				return false;
		}
	return !f->unique || check_unique(ctx, a, f);
}

/* An object whose every member is an entry: member names are free (map keys), values all
 * follow f->each. */
static bool check_map(struct rts_jctx *ctx, json_object *o, const struct rts_jfield *f, void *base)
{
	size_t n = (size_t)json_object_object_length(o);
	if ((f->min > 0 && n < (size_t)f->min) || (f->max > 0 && n > (size_t)f->max))
		return fail_count(ctx, f);
	char *entries = entries_new(f, base, n);
	size_t i = 0;
	json_object_object_foreach(o, key, val)
	{
		void *entry = entries ? entries + i * f->elem_size : NULL;
		size_t old = ctx->flags & RTS_JV_OPERATOR ? push_echo(ctx, key) : push(ctx, "[%zu]", i);
		const struct rts_jfield *saved = ctx->field;
		ctx->field = f;
		bool ok = !f->key_check || f->key_check(ctx, key, entry);
		ctx->field = saved;
		ok = ok && check_value(ctx, val, f->each, entry);
		pop(ctx, old);
		if (!ok)
			return false;
		i++;
	}
	return true;
}

static bool check_value(struct rts_jctx *ctx, json_object *v, const struct rts_jfield *f, void *base)
{
	unsigned t = json_type_bit(v);
	if (!(f->types & t))
		return fail_type(ctx, f, v);
	if (base && (f->flags & RTS_JF_PRESENT) && v)
		*(bool *)at(base, f->present_at) = true;
	if (base)
		store_json(f, base, v);
	bool ok = true;
	switch (t) {
	case RTS_JT_NULL:
		if (base)
			store_string(f, base, NULL);
		break;
	case RTS_JT_BOOL:
		if (base && f->store == RTS_JS_BOOL)
			*(bool *)at(base, f->at) = json_object_get_boolean(v);
		break;
	case RTS_JT_INT:
		ok = check_int(ctx, v, f, base);
		break;
	case RTS_JT_DOUBLE: {
		double d = json_object_get_double(v);
		if (!isfinite(d) || d < f->dmin || d > f->dmax)
			ok = fail_range(ctx, f);
		else if (base && f->store == RTS_JS_DOUBLE)
			*(double *)at(base, f->at) = d;
		break;
	}
	case RTS_JT_STRING:
		ok = check_string(ctx, v, f, base);
		break;
	case RTS_JT_OBJECT:
		if (f->object)
			ok = walk_object(ctx, v, f->object, base && f->store == RTS_JS_OBJECT ? at(base, f->at) : NULL);
		else if (f->each)
			ok = check_map(ctx, v, f, base);
		break;
	case RTS_JT_ARRAY:
		ok = check_array(ctx, v, f, base);
		break;
	}
	if (ok && f->check) {
		const struct rts_jfield *saved = ctx->field;
		ctx->field = f;
		ok = f->check(ctx, v, base);
		ctx->field = saved;
	}
	return ok && !ctx->failed;
}

static bool check_member(struct rts_jctx *ctx, json_object *obj, const struct rts_jfield *f, void *base)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(obj, f->key, &v) && (v || !(f->flags & RTS_JF_NULL_ABSENT));
	size_t old = push_key(ctx, f->key);
	bool ok;
	if (present)
		ok = check_value(ctx, v, f, base);
	else
		ok = !(f->flags & RTS_JF_REQUIRED) ||
		     fail(ctx, RTS_JP_MISSING, f, "%s", f->missing ? f->missing : "is required");
	pop(ctx, old);
	return ok;
}

static const struct rts_jfield *spec_field(const struct rts_jspec *spec, const char *key)
{
	for (const struct rts_jfield *f = spec->fields; f->key; f++)
		if (strcmp(f->key, key) == 0)
			return f;
	return NULL;
}

static bool fail_unknown(struct rts_jctx *ctx, const struct rts_jspec *spec, const char *key)
{
	if (!(ctx->flags & RTS_JV_OPERATOR))
		return fail(ctx, RTS_JP_UNKNOWN, NULL, "%s", spec->unknown ? spec->unknown : "has an unknown member");
	char text[RTS_JERR_TEXT_MAX];
	size_t at = 0;
	text[0] = '\0';
	add(text, sizeof(text), &at, "unknown key");
	if (spec->flags & RTS_JO_LIST_KEYS)
		for (const struct rts_jfield *f = spec->fields; f->key; f++)
			add(text, sizeof(text), &at, "%s%s", f == spec->fields ? " (expected " : ", ", f->key);
	if (spec->flags & RTS_JO_LIST_KEYS)
		add(text, sizeof(text), &at, ")");
	size_t old = push_echo(ctx, key);
	fail(ctx, RTS_JP_UNKNOWN, NULL, "%s", text);
	pop(ctx, old);
	return false;
}

static bool check_alternatives(struct rts_jctx *ctx, json_object *o, const struct rts_jspec *spec)
{
	const char *names[32];
	size_t n_names = 0, present = 0;
	for (const struct rts_jfield *f = spec->fields; f->key; f++) {
		if (!(f->flags & RTS_JF_ALTERNATIVE))
			continue;
		if (n_names == RTS_ARRAY_SIZE(names) - 1)
			abort(); /* a table bug */
		names[n_names++] = f->key;
		json_object *v = NULL;
		if (json_object_object_get_ex(o, f->key, &v) && (v || !(f->flags & RTS_JF_NULL_ABSENT)))
			present++;
	}
	if (n_names == 0 || present == 1)
		return true;
	names[n_names] = NULL;
	char list[RTS_JERR_TEXT_MAX];
	size_t at = 0;
	list[0] = '\0';
	add_list(list, sizeof(list), &at, names, false);
	return fail(ctx, RTS_JP_ALTERNATIVE, NULL, "must have exactly one of %s", list);
}

static bool walk_object(struct rts_jctx *ctx, json_object *o, const struct rts_jspec *spec, void *base)
{
	if (!(spec->flags & RTS_JO_OPEN)) {
		json_object_object_foreach(o, key, val)
		{
			(void)val;
			if (!spec_field(spec, key))
				return fail_unknown(ctx, spec, key);
		}
	}
	if (!check_alternatives(ctx, o, spec))
		return false;
	for (const struct rts_jfield *f = spec->fields; f->key; f++)
		if (!check_member(ctx, o, f, base))
			return false;
	if (spec->check) {
		const struct rts_jfield *saved = ctx->field;
		ctx->field = NULL;
		bool ok = spec->check(ctx, o, base);
		ctx->field = saved;
		return ok && !ctx->failed;
	}
	return true;
}

bool rts_jctx_object(struct rts_jctx *ctx, json_object *o, const struct rts_jspec *spec, void *base)
{
	return walk_object(ctx, o, spec, base);
}

static void ctx_init(struct rts_jctx *ctx, unsigned flags, struct rts_jerr *err)
{
	*ctx = (struct rts_jctx){.flags = flags, .err = err};
	*err = (struct rts_jerr){.problem = RTS_JP_NONE};
}

int rts_jspec_validate(json_object *doc, const struct rts_jfield *root, void *base, unsigned flags,
		       struct rts_jerr *err)
{
	struct rts_jerr local;
	struct rts_jctx ctx;
	ctx_init(&ctx, flags, err ? err : &local);
	return check_value(&ctx, doc, root, base) ? 0 : -EINVAL;
}

int rts_jspec_member(json_object *obj, const struct rts_jfield *f, void *base, unsigned flags, struct rts_jerr *err)
{
	struct rts_jerr local;
	struct rts_jctx ctx;
	ctx_init(&ctx, flags, err ? err : &local);
	return check_member(&ctx, obj, f, base) ? 0 : -EINVAL;
}
