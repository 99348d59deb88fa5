/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>

#include "common/json.h"
#include "common/util.h"
#include "worker/memory.h"
#include "worker/text.h"
#include "worker/worker.h"

#define MEMORY_FILE "memory.json"

static json_object *new_root(void)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "v", json_object_new_int(1));
	json_object_object_add(o, "speakers", json_object_new_object());
	json_object_object_add(o, "channel", json_object_new_object());
	return o;
}

/* 1..128 characters, none of them a control character (C0, DEL or C1). */
static bool key_valid(const char *k)
{
	const unsigned char *p = (const unsigned char *)k;
	size_t n = worker_text_chars(k);
	if (n == 0 || n > WORKER_MEMORY_KEY_CHARS_MAX)
		return false;
	for (; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return false;
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return false;
	}
	return true;
}

/* A "\u0000" escape would hide the rest of a string from every C string function. */
static bool whole_string(json_object *v)
{
	return json_object_is_type(v, json_type_string) &&
	       strlen(json_object_get_string(v)) == (size_t)json_object_get_string_len(v);
}

static bool value_valid(json_object *v)
{
	return whole_string(v) && worker_text_chars(json_object_get_string(v)) <= WORKER_MEMORY_VALUE_CHARS_MAX;
}

static size_t count_entries(json_object *root)
{
	size_t n = (size_t)json_object_object_length(rts_json_get(root, "channel"));
	json_object_object_foreach(rts_json_get(root, "speakers"), id, ns)
	{
		(void)id;
		n += (size_t)json_object_object_length(ns);
	}
	return n;
}

static bool scope_valid(json_object *ns)
{
	if (!json_object_is_type(ns, json_type_object))
		return false;
	json_object_object_foreach(ns, key, val)
	{
		if (!key_valid(key) || !value_valid(val))
			return false;
	}
	return true;
}

/* Everything a file must satisfy to be used; anything else is moved aside. */
static bool root_valid(json_object *root)
{
	if (!json_object_is_type(root, json_type_object) || json_object_object_length(root) != 3)
		return false;
	json_object *v = rts_json_get(root, "v");
	json_object *speakers = rts_json_get(root, "speakers");
	json_object *channel = rts_json_get(root, "channel");
	if (!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
		return false;
	if (!speakers || !json_object_is_type(speakers, json_type_object) || !channel || !scope_valid(channel))
		return false;
	json_object_object_foreach(speakers, id, ns)
	{
		size_t n = strlen(id);
		if (n == 0 || n > RTS_SPEAKER_FIELD_MAX || !scope_valid(ns))
			return false;
	}
	return count_entries(root) <= WORKER_MEMORY_ENTRIES_MAX && rts_json_dump_len(root) <= WORKER_MEMORY_BYTES_MAX;
}

void worker_memory_load(struct worker_memory *m, struct worker_store *s)
{
	*m = (struct worker_memory){0};
	m->root = new_root();
	if (s->dir_fd < 0) {
		m->unavailable = true;
		return;
	}
	json_object *o = NULL;
	int r = worker_store_read(s, MEMORY_FILE, &o);
	if (r == 0 && !o)
		return;
	if (r == 0 && root_valid(o)) {
		json_object_put(m->root);
		m->root = o;
		return;
	}
	if (o)
		json_object_put(o);
	fprintf(stderr, "worker: memory file unusable (%s), moving it aside\n", r < 0 ? strerror(-r) : "invalid content");
	m->reset = true;
	r = worker_store_move_aside(s, MEMORY_FILE);
	if (r < 0) {
		/* Writing now would replace the file we could not keep: refuse instead. */
		fprintf(stderr, "worker: cannot move the memory file aside: %s\n", strerror(-r));
		m->unavailable = true;
	}
}

void worker_memory_free(struct worker_memory *m)
{
	if (m->root)
		json_object_put(m->root);
	m->root = NULL;
}

static int save(struct worker_memory *m, struct worker_store *s)
{
	cleanup_free char *text = rts_json_dump(m->root);
	int r = worker_store_write(s, MEMORY_FILE, text, strlen(text));
	if (r < 0)
		fprintf(stderr, "worker: saving memory failed: %s\n", strerror(-r));
	return r;
}

/* The call's arguments, checked against the keys the tool takes. */
struct call {
	const char *scope_name;
	json_object *scope;	/* the namespace; NULL for a speaker without notes yet */
	const char *key;	/* NULL when not given */
	json_object *value;	/* NULL when not given */
	bool speaker;
};

static char *memory_set(struct worker_memory *m, struct worker_store *s, const char *speaker_id, struct call *c)
{
	if (!c->key || !c->value)
		return worker_error_json("memory_set needs scope, key and value");
	if (!whole_string(c->value))
		return worker_error_json("value must be a string without NUL characters");
	size_t chars = worker_text_chars(json_object_get_string(c->value));
	if (chars > WORKER_MEMORY_VALUE_CHARS_MAX)
		return worker_error_json("value is too long: %zu characters (at most %u); nothing was stored", chars,
				    WORKER_MEMORY_VALUE_CHARS_MAX);
	bool existed = rts_json_get(c->scope, c->key) != NULL;
	if (!existed && count_entries(m->root) >= WORKER_MEMORY_ENTRIES_MAX)
		return worker_error_json("memory is full: %u entries in this channel, all scopes together; remove a note "
				    "with memory_remove first; nothing was stored",
				    WORKER_MEMORY_ENTRIES_MAX);

	bool new_scope = false;
	if (!c->scope) {
		c->scope = json_object_new_object();
		json_object_object_add(rts_json_get(m->root, "speakers"), speaker_id, c->scope);
		new_scope = true;
	}
	json_object *old = existed ? json_object_get(rts_json_get(c->scope, c->key)) : NULL;
	json_object_object_add(c->scope, c->key, json_object_get(c->value));

	const char *refusal = NULL;
	if (rts_json_dump_len(m->root) > WORKER_MEMORY_BYTES_MAX)
		refusal = "memory is full: 512 KiB in total; remove or shorten notes first; nothing was stored";
	else if (save(m, s) < 0)
		refusal = "memory could not be saved; nothing was stored";
	if (refusal) {
		/* Put the notes back exactly as they were stored. */
		if (old)
			json_object_object_add(c->scope, c->key, steal_pointer(&old));
		else
			json_object_object_del(c->scope, c->key);
		if (new_scope)
			json_object_object_del(rts_json_get(m->root, "speakers"), speaker_id);
		return worker_error_json("%s", refusal);
	}
	if (old)
		json_object_put(old);
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	json_object_object_add(o, "scope", json_object_new_string(c->scope_name));
	json_object_object_add(o, "key", json_object_new_string(c->key));
	return rts_json_dump(o);
}

static char *memory_get(struct worker_memory *m, struct worker_store *s, const char *speaker_id, struct call *c)
{
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "scope", json_object_new_string(c->scope_name));
	if (c->key) {
		json_object *v = rts_json_get(c->scope, c->key);
		if (!v)
			return worker_error_json("no note with that key in the %s scope", c->scope_name);
		json_object_object_add(o, "key", json_object_new_string(c->key));
		json_object_object_add(o, "value", json_object_get(v));
		return rts_json_dump(o);
	}
	/* A listing is bounded; the rest stays reachable by key. */
	json_object *entries = json_object_new_object();
	json_object_object_add(o, "entries", entries);
	size_t used = 0, omitted = 0, total = 0;
	if (c->scope) {
		json_object_object_foreach(c->scope, key, val)
		{
			total++;
			size_t cost = rts_json_string_len(key, strlen(key)) +
				      rts_json_string_len(json_object_get_string(val),
							   (size_t)json_object_get_string_len(val)) +
				      6;
			if (omitted || used + cost > WORKER_MEMORY_LIST_MAX) {
				omitted++;
				continue;
			}
			used += cost;
			json_object_object_add(entries, key, json_object_get(val));
		}
	}
	json_object_object_add(o, "count", json_object_new_int64((int64_t)total));
	if (omitted) {
		json_object_object_add(o, "omitted", json_object_new_int64((int64_t)omitted));
		json_object_object_add(o, "note", json_object_new_string("listing cut short; get the others by key"));
	}
	return rts_json_dump(o);
}

static char *memory_remove(struct worker_memory *m, struct worker_store *s, const char *speaker_id, struct call *c)
{
	if (!c->key)
		return worker_error_json("memory_remove needs scope and key");
	json_object *v = rts_json_get(c->scope, c->key);
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	json_object_object_add(o, "removed", json_object_new_boolean(v != NULL));
	if (!v)
		return rts_json_dump(o);
	json_object *old = json_object_get(v);
	json_object_object_del(c->scope, c->key);
	bool dropped_scope = c->speaker && json_object_object_length(c->scope) == 0;
	if (dropped_scope)
		json_object_object_del(rts_json_get(m->root, "speakers"), speaker_id);
	if (save(m, s) < 0) {
		if (dropped_scope) {
			c->scope = json_object_new_object();
			json_object_object_add(rts_json_get(m->root, "speakers"), speaker_id, c->scope);
		}
		json_object_object_add(c->scope, c->key, old);
		return worker_error_json("memory could not be saved");
	}
	json_object_put(old);
	return rts_json_dump(o);
}

typedef char *(*memory_fn)(struct worker_memory *, struct worker_store *, const char *, struct call *);

/* The worker's own tools. Arguments a tool does not take are refused rather than ignored,
 * so that no argument (a "speaker" field, say) can look like it selects a namespace. */
/* The memory tools as the model is offered them. Each spec is written compactly, so
 * json-c's plain serialisation of it is no longer than the literal: their sizes bound what
 * the memory tools take of the tool budget (common/limits.h). */
#define MEMORY_SET_SPEC \
	"{\"type\":\"function\",\"function\":{\"name\":\"memory_set\",\"description\":\"Store a note under a " \
	"key. scope \\\"speaker\\\" is the current speaker's own notes; \\\"channel\\\" is shared with " \
	"everyone in this channel. Replaces an existing note with the same key. Limits: 256 notes, 2048 " \
	"characters per value, 512 KiB in total.\",\"parameters\":{\"type\":\"object\",\"properties\":{" \
	"\"scope\":{\"type\":\"string\",\"enum\":[\"speaker\",\"channel\"]},\"key\":{\"type\":\"string\"," \
	"\"minLength\":1,\"maxLength\":128},\"value\":{\"type\":\"string\",\"maxLength\":2048}},\"required\":" \
	"[\"scope\",\"key\",\"value\"],\"additionalProperties\":false}}}"
#define MEMORY_GET_SPEC \
	"{\"type\":\"function\",\"function\":{\"name\":\"memory_get\",\"description\":\"Read the note stored " \
	"under key in a scope, or list the scope's notes when key is left out.\",\"parameters\":{\"type\":" \
	"\"object\",\"properties\":{\"scope\":{\"type\":\"string\",\"enum\":[\"speaker\",\"channel\"]}," \
	"\"key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":128}},\"required\":[\"scope\"]," \
	"\"additionalProperties\":false}}}"
#define MEMORY_REMOVE_SPEC \
	"{\"type\":\"function\",\"function\":{\"name\":\"memory_remove\",\"description\":\"Delete the note " \
	"stored under key in a scope.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"scope\":{" \
	"\"type\":\"string\",\"enum\":[\"speaker\",\"channel\"]},\"key\":{\"type\":\"string\",\"minLength\":1," \
	"\"maxLength\":128}},\"required\":[\"scope\",\"key\"],\"additionalProperties\":false}}}"
_Static_assert(sizeof(MEMORY_SET_SPEC) + sizeof(MEMORY_GET_SPEC) + sizeof(MEMORY_REMOVE_SPEC) + 1 <=
		       RTS_WORKER_OWN_TOOLS_BUDGET,
	       "the memory tools must fit their share of the tool budget");

static const struct memory_tool {
	const char *name;
	memory_fn run;
	const char *const args[4];
	const char *spec;
} memory_tools[] = {
	{"memory_set", memory_set, {"scope", "key", "value", NULL}, MEMORY_SET_SPEC},
	{"memory_get", memory_get, {"scope", "key", NULL, NULL}, MEMORY_GET_SPEC},
	{"memory_remove", memory_remove, {"scope", "key", NULL, NULL}, MEMORY_REMOVE_SPEC},
};

static const struct memory_tool *find_tool(const char *name)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(memory_tools); i++)
		if (strcmp(memory_tools[i].name, name) == 0)
			return &memory_tools[i];
	return NULL;
}

bool worker_memory_is_tool(const char *name)
{
	return find_tool(name) != NULL;
}

_Static_assert(RTS_ARRAY_SIZE(memory_tools) == RTS_WORKER_OWN_TOOLS, "common/limits.h counts the memory tools");

json_object *worker_memory_tool_specs(void)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < RTS_ARRAY_SIZE(memory_tools); i++) {
		json_object *spec = NULL;
		const char *why;
		/* Literals above: a parse failure is a build mistake. */
		if (rts_json_parse(memory_tools[i].spec, strlen(memory_tools[i].spec), 16, &spec, &why) < 0)
			abort();
		json_object_array_add(a, spec);
	}
	return a;
}

static bool arg_allowed(const struct memory_tool *t, const char *key)
{
	for (size_t i = 0; t->args[i]; i++)
		if (strcmp(t->args[i], key) == 0)
			return true;
	return false;
}

char *worker_memory_call(struct worker_memory *m, struct worker_store *s, const char *speaker_id, const char *tool,
			 json_object *args)
{
	const struct memory_tool *t = find_tool(tool);
	if (!t)
		return worker_error_json("unknown memory tool");
	if (m->unavailable)
		return worker_error_json("memory storage is unavailable in this turn");
	if (!args || !json_object_is_type(args, json_type_object))
		return worker_error_json("arguments must be a JSON object");
	json_object_object_foreach(args, name, val)
	{
		(void)val;
		if (!arg_allowed(t, name))
			return worker_error_json("%s takes no argument named \"%s\"", t->name, name);
	}

	struct call c = {0};
	const char *scope = rts_json_get_string(args, "scope");
	if (!scope)
		return worker_error_json("scope must be \"speaker\" or \"channel\"");
	if (strcmp(scope, "speaker") == 0) {
		/* Always the current speaker: the namespace comes from the input, not the call. */
		c.speaker = true;
		c.scope = rts_json_get(rts_json_get(m->root, "speakers"), speaker_id);
	} else if (strcmp(scope, "channel") == 0) {
		c.scope = rts_json_get(m->root, "channel");
	} else {
		return worker_error_json("scope must be \"speaker\" or \"channel\"");
	}
	c.scope_name = c.speaker ? "speaker" : "channel";
	json_object *key = rts_json_get(args, "key");
	if (key) {
		if (!whole_string(key) || !key_valid(json_object_get_string(key)))
			return worker_error_json("key must be 1 to %u printable characters", WORKER_MEMORY_KEY_CHARS_MAX);
		c.key = json_object_get_string(key);
	}
	c.value = rts_json_get(args, "value");
	return t->run(m, s, speaker_id, &c);
}

char *worker_memory_preview(const struct worker_memory *m, const char *speaker_id, bool speaker_scope, size_t max)
{
	json_object *ns = speaker_scope ? rts_json_get(rts_json_get(m->root, "speakers"), speaker_id)
					: rts_json_get(m->root, "channel");
	size_t total = ns ? (size_t)json_object_object_length(ns) : 0;
	if (total == 0)
		return rts_xstrdup("(none)");
	/* Whole notes in stored order while they fit, each value cut to a preview length;
	 * the rest is counted, not cut mid-note. */
	static const char more_fmt[] = "\n[%zu more notes not shown; read them with memory_get]";
	size_t reserve = sizeof(more_fmt) + 16;
	cleanup_json json_object *shown = json_object_new_object();
	size_t n_shown = 0;
	json_object_object_foreach(ns, key, val)
	{
		cleanup_free char *v = worker_text_bound(json_object_get_string(val), WORKER_PREVIEW_VALUE_MAX, NULL);
		json_object_object_add(shown, key, json_object_new_string(v));
		cleanup_free char *text = rts_json_dump(shown);
		if (rts_json_string_len(text, strlen(text)) + reserve > max) {
			json_object_object_del(shown, key);
			break;
		}
		n_shown++;
	}
	cleanup_free char *text = rts_json_dump(shown);
	if (n_shown == total)
		return steal_pointer(&text);
	cleanup_free char *more = rts_xasprintf(more_fmt, total - n_shown);
	return rts_xasprintf("%s%s", text, more);
}
