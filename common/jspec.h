/* SPDX-License-Identifier: Apache-2.0 */
/* Declarative validation of parsed JSON: one table per object shape, one walker.
 *
 * Every host-side JSON document is checked this way: the config (common/conf.c), control
 * requests (statd/request.c), the state file (statd/state.c), the worker's input
 * (worker/input.c) and output (runnerd/worker_io.c), and the broker's /model and /mcp
 * bodies (brokerd/model.c, brokerd/mcp.c). A table lists each member an object may have:
 * its JSON types, whether it is required, its bounds (an integer range, a string's bytes,
 * a list's entries), a nested table, a rule of the caller's own, and where the value is
 * stored. rts_jspec_validate() walks the document against it and reports the first problem
 * with the key path that leads to it ("tools[1].name"), so every module words its refusals
 * the same way and a new field is one table line, not another if/else chain.
 *
 * Why our own tables and not jansson's json_unpack_ex() (which has a strict mode that
 * refuses unknown keys): the static worker links json-c only, so the layer must work on
 * json-c trees; json_unpack has no ranges, string or list bounds, nested list items or
 * per-field rules, so each of those would stay hand-written after it; and its messages
 * quote the input ("Object item not found: x"), where we need key paths for operator files
 * and fixed texts for network input. The layer needs libc, json-c and rts_utf8_valid() and
 * rts_json_string_len() only (the worker compiles common/util.c and common/json.c too).
 *
 * The layer sees a json-c tree, so it cannot tell what json-c's parser already folded
 * away (duplicate keys, lone surrogate escapes, "\u0000" inside a key); untrusted bytes
 * still go through rts_json_parse_strict() first (common/strictjson.h says why).
 *
 * Order of the checks in one object, the first failure wins:
 *   1. unknown members, in document order (unless RTS_JO_OPEN);
 *   2. RTS_JF_ALTERNATIVE members: exactly one present;
 *   3. every field in table order: missing (when required), JSON type, built-in bounds
 *      (NUL, UTF-8, length, one_of, range, list entries, then each item or member), the
 *      value stored, uniqueness among list items, then the field's own check;
 *   4. the table's own check (relations between fields).
 * So a table lists its fields in the order their problems should be reported.
 *
 * Messages. The problem text is generated from the table ("must be an integer from 1 to
 * 5", "must list at most 32 tools", "is required"), never from the document, except in
 * RTS_JV_OPERATOR mode (the operator's own files), where an unknown key's name and a wrong
 * value's JSON type are named as well. Callers put the path and text together in their own
 * format: "FILE: PATH: TEXT" for files, "PATH TEXT" for control answers. */
#ifndef RTS_JSPEC_H
#define RTS_JSPEC_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* JSON types a field accepts (bit set). json-c reads 1 as an int and 1.0 or 1e0 as a
 * double, so RTS_JT_INT refuses both of those. */
enum {
	RTS_JT_NULL = 1u << 0,
	RTS_JT_BOOL = 1u << 1,
	RTS_JT_INT = 1u << 2,
	RTS_JT_DOUBLE = 1u << 3,
	RTS_JT_NUMBER = RTS_JT_INT | RTS_JT_DOUBLE,
	RTS_JT_STRING = 1u << 4,
	RTS_JT_OBJECT = 1u << 5,
	RTS_JT_ARRAY = 1u << 6,
};

/* Field flags. */
enum {
	RTS_JF_REQUIRED = 1u << 0,    /* absent is an error (text: .missing, else "is required") */
	RTS_JF_ALTERNATIVE = 1u << 1, /* exactly one of the table's alternatives must be present */
	RTS_JF_NULL_ABSENT = 1u << 2, /* a JSON null counts as absent: not typed, stored or counted */
	RTS_JF_PRESENT = 1u << 3,     /* set the bool at .present_at when present and not null */
	RTS_JF_COUNT = 1u << 4,	      /* RTS_JS_ARRAY: also store the entry count (size_t) at .count_at */
	RTS_JF_UTF8 = 1u << 5,	      /* strings: valid UTF-8 (json-c's parser checks it already) */
	RTS_JF_ENCODED = 1u << 6,     /* strings: max counts bytes JSON-escaped (rts_json_string_len()) */
};

/* Where a value goes, relative to the base pointer of the object holding the field. With a
 * NULL base nothing is stored (validation only). */
enum rts_jstore {
	RTS_JS_NONE = 0,
	RTS_JS_BOOL,	 /* bool */
	RTS_JS_INT64,	 /* int64_t */
	RTS_JS_UINT32,	 /* uint32_t (the range must lie within 0..UINT32_MAX) */
	RTS_JS_DOUBLE,	 /* double (ints converted) */
	RTS_JS_STR,	 /* const char *, borrowed from the document; NULL for null */
	RTS_JS_STRDUP,	 /* char *, a heap copy; the previous value is freed */
	RTS_JS_INDEX,	 /* int: the value's index in .one_of */
	RTS_JS_JSON,	 /* json_object *, borrowed */
	RTS_JS_JSON_REF, /* json_object *, a new reference; the previous one is put */
	RTS_JS_OBJECT,	 /* a nested object: its table stores relative to base + .at */
	RTS_JS_ARRAY,	 /* arrays and maps: a new zeroed array of n + 1 entries of .elem_size
			  * bytes at .at (so a pointer array ends with NULL); entry i is the
			  * base of item i. The previous pointer is overwritten, not freed. */
};

struct rts_jctx;
struct rts_jspec;

/* A rule of the caller's own, run after the built-in checks and after storing. v is the
 * value (NULL for JSON null); base is where the enclosing object stores (NULL when nothing
 * is stored); for a list item or map value its entry, for a table's check the base of that
 * object itself. Return true, or the false of rts_jfail(). */
typedef bool rts_jcheck_fn(struct rts_jctx *ctx, json_object *v, void *base);

/* A map's rule for one member name, before its value is looked at. entry is where that
 * member's value stores (NULL when nothing is stored). May rename the path component
 * (rts_jctx_rename()) before anything can fail, to keep the name out of messages. */
typedef bool rts_jkey_fn(struct rts_jctx *ctx, const char *key, void *entry);

struct rts_jfield {
	const char *key; /* the member; NULL ends a table (and is unused for items) */
	unsigned types;	 /* RTS_JT_* accepted */
	unsigned flags;	 /* RTS_JF_* */
	/* Bounds. RTS_JT_INT: the value, always applied. Strings: bytes; lists and maps:
	 * entries; for those a min below 1 or a max of 0 is no bound (so a field that is a
	 * string or an integer can give the integer's range). */
	int64_t min, max;
	double dmin, dmax;		/* RTS_JT_DOUBLE (and an int where a number is allowed) */
	const char *const *one_of;	/* strings: the only values allowed (NULL-terminated) */
	const struct rts_jspec *object; /* objects: the members (NULL with .each: a map) */
	const struct rts_jfield *each;	/* arrays: every item; maps: every member's value */
	rts_jkey_fn *key_check;		/* maps: every member's name */
	const char *unique;		/* arrays: items whose string at this member path ("name",
					 * "function.name") repeats an earlier one are refused */
	rts_jcheck_fn *check;
	enum rts_jstore store;
	size_t at;	     /* offset of the stored value */
	size_t present_at;   /* RTS_JF_PRESENT */
	size_t count_at;     /* RTS_JF_COUNT */
	size_t elem_size;    /* RTS_JS_ARRAY */
	const char *what;    /* what the value must be, instead of the generated description;
			      * then also the text for a NUL or invalid UTF-8 in a string */
	const char *items;   /* lists and maps: the entries' plural noun ("tools"); "entries" */
	const char *missing; /* the problem when required and absent, instead of "is required" */
};

/* Table flags. */
enum {
	RTS_JO_OPEN = 1u << 0,	    /* unknown members are ignored (forward compatible input) */
	RTS_JO_LIST_KEYS = 1u << 1, /* RTS_JV_OPERATOR: "unknown key (expected a, b, c)" */
};

struct rts_jspec {
	const struct rts_jfield *fields; /* ends with an entry whose key is NULL */
	unsigned flags;			 /* RTS_JO_* */
	const char *unknown;		 /* the text for an unknown member outside RTS_JV_OPERATOR
					  * mode (reported at the object's own path); default
					  * "has an unknown member" */
	rts_jcheck_fn *check;		 /* after every field */
};

/* rts_jspec_validate() flags. */
enum {
	/* The document is the operator's own file: name an unknown key (printable ASCII, at
	 * most 64 bytes of it) in the path and a wrong value's JSON type in the text. Never
	 * for input from outside the trust boundary. */
	RTS_JV_OPERATOR = 1u << 0,
};

enum rts_jproblem {
	RTS_JP_NONE = 0,
	RTS_JP_TYPE,	    /* a JSON type the field does not accept */
	RTS_JP_MISSING,	    /* a required member is absent */
	RTS_JP_UNKNOWN,	    /* a member the table does not list */
	RTS_JP_ALTERNATIVE, /* not exactly one of the alternatives */
	RTS_JP_RANGE,	    /* a number out of range, a string too short or long, not one_of */
	RTS_JP_NUL,	    /* a string with a NUL character */
	RTS_JP_UTF8,	    /* a string that is not UTF-8 (RTS_JF_UTF8) */
	RTS_JP_COUNT,	    /* too few or too many list or map entries */
	RTS_JP_DUPLICATE,   /* an item repeats an earlier one (.unique) */
	RTS_JP_RULE,	    /* a check callback refused it */
};

#define RTS_JERR_PATH_MAX 256u
#define RTS_JERR_TEXT_MAX 512u

/* The first problem found. */
struct rts_jerr {
	enum rts_jproblem problem;
	const struct rts_jfield *field; /* the field whose rule failed; NULL for RTS_JP_UNKNOWN
					 * and RTS_JP_ALTERNATIVE */
	const char *code;		/* what a check callback passed to rts_jfail_code(), else NULL */
	char path[RTS_JERR_PATH_MAX];	/* "tools[1].name"; "" for the document itself */
	char text[RTS_JERR_TEXT_MAX];	/* "must match [a-z][a-z0-9_]{0,47}" */
};

/* The root field of a document that is one object described by spec, stored at base. */
#define RTS_JSPEC_ROOT(spec) {.types = RTS_JT_OBJECT, .object = (spec), .store = RTS_JS_OBJECT}

/* Validate doc against root (a field without key describing the whole document, e.g.
 * {.types = RTS_JT_OBJECT, .object = &spec}) and store values relative to base (may be
 * NULL). Returns 0, or -EINVAL with *err filled (when err is not NULL); values stored
 * before the problem stay stored, so the caller frees what it owns as usual. flags:
 * RTS_JV_*. A table that contradicts itself (an RTS_JS_UINT32 range outside 32 bits, an
 * array store without elem_size) aborts: that is a bug, not input. */
int rts_jspec_validate(json_object *doc, const struct rts_jfield *root, void *base, unsigned flags,
		       struct rts_jerr *err);

/* Validate the one member f->key of the object obj against f, as a table walk would (f
 * need not belong to a table); for the members a caller must read before anything else
 * (statd reads a request's id and channel first, whatever else is wrong). Same result
 * convention as rts_jspec_validate(). */
int rts_jspec_member(json_object *obj, const struct rts_jfield *f, void *base, unsigned flags, struct rts_jerr *err);

/* "PATH" SEP "TEXT", or "TEXT" alone when the path is empty, into buf (truncated to len).
 * Returns buf. */
const char *rts_jerr_join(const struct rts_jerr *e, const char *sep, char *buf, size_t len);

/* For check callbacks: report a problem at the current path and return false. The text is
 * the caller's: never put document content in it for network input. */
bool rts_jfail(struct rts_jctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* rts_jfail() that also sets err->code (a static string) for the caller to answer with. */
bool rts_jfail_code(struct rts_jctx *ctx, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* rts_jfail() at a path below the current one: rel is a member ("stateFile"), an item
 * ("[0]") or a path of them ("tools[3]"). */
bool rts_jfail_at(struct rts_jctx *ctx, const char *rel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Replace the last path component (a map member's name) with "[TEXT]". */
void rts_jctx_rename(struct rts_jctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Validate the object o against spec at the current path, storing relative to base: for
 * a check callback that chooses the table from a member's value (a message's role). */
bool rts_jctx_object(struct rts_jctx *ctx, json_object *o, const struct rts_jspec *spec, void *base);

#endif
