/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <math.h>
#include <stdarg.h>

#include "common/conf.h"
#include "common/json.h"
#include "common/schema.h"
#include "common/tools.h"
#include "common/util.h"

/* Validation context: the first error wins and carries the key path. */
struct vctx {
	const char *file;
	char *err;
	size_t errlen;
	bool failed;
};

__attribute__((format(printf, 3, 4))) static bool fail(struct vctx *v, const char *keypath, const char *fmt, ...)
{
	if (v->failed)
		return false;
	v->failed = true;
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(v->err, v->errlen, "%s: %s: %s", v->file, keypath, what);
	return false;
}

static const char *type_name(json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null:
		return "null";
	case json_type_boolean:
		return "a boolean";
	case json_type_double:
	case json_type_int:
		return "a number";
	case json_type_object:
		return "an object";
	case json_type_array:
		return "an array";
	case json_type_string:
		return "a string";
	}
	return "something else";
}

/* Paths end up in docker --mount arguments and socket paths, so only a conservative
 * character set is accepted, and only normalised absolute paths (the installation id is
 * derived from the stateFile string, so "/a//b" and "/a/b" must not both be possible). */
static bool path_ok(const char *p, const char **why)
{
	size_t n = strlen(p);
	if (n == 0 || p[0] != '/') {
		*why = "must be an absolute path";
		return false;
	}
	if (n > 1024) {
		*why = "must be at most 1024 characters";
		return false;
	}
	if (n > 1 && p[n - 1] == '/') {
		*why = "must not end with '/'";
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
		      c == '.' || c == '_' || c == '-' || c == '+' || c == '@' || c == '~')) {
			*why = "may contain only letters, digits and / . _ - + @ ~";
			return false;
		}
	}
	if (strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") || (n >= 2 && strcmp(p + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(p + n - 3, "/..") == 0)) {
		*why = "must be normalised (no empty, '.' or '..' components)";
		return false;
	}
	return true;
}

static bool get_string(struct vctx *v, json_object *o, const char *kp, size_t max, bool nonempty, char **out)
{
	if (!json_object_is_type(o, json_type_string))
		return fail(v, kp, "must be a string, not %s", type_name(o));
	size_t n = (size_t)json_object_get_string_len(o);
	if (nonempty && n == 0)
		return fail(v, kp, "must not be empty");
	if (n > max)
		return fail(v, kp, "must be at most %zu bytes", max);
	const char *s = json_object_get_string(o);
	if (memchr(s, '\0', n))
		return fail(v, kp, "must not contain NUL characters");
	free(*out);
	*out = rts_xstrdup(s);
	return true;
}

/* A string whose encoded size (rts_json_string_len(): what it takes inside a JSON string
 * in a request body) is at most max: the worker would otherwise cut it. */
static bool get_encoded_string(struct vctx *v, json_object *o, const char *kp, size_t max, char **out)
{
	if (!get_string(v, o, kp, max, false, out))
		return false;
	size_t n = rts_json_string_len(*out, strlen(*out));
	if (n > max)
		return fail(v, kp, "must take at most %zu bytes JSON-escaped, not %zu (quotes, backslashes, '/' and line "
			    "breaks take two, other control characters six)",
			    max, n);
	return true;
}

static bool get_path(struct vctx *v, json_object *o, const char *kp, char **out)
{
	if (!get_string(v, o, kp, 1024, true, out))
		return false;
	const char *why;
	if (!path_ok(*out, &why))
		return fail(v, kp, "%s", why);
	return true;
}

/* A top-level list of at most max items ("tools", "servers", "channel keys"); *n its length. */
static bool get_list(struct vctx *v, json_object *o, const char *kp, size_t max, const char *items, size_t *n)
{
	if (!json_object_is_type(o, json_type_array))
		return fail(v, kp, "must be an array of %s, not %s", items, type_name(o));
	*n = json_object_array_length(o);
	if (*n > max)
		return fail(v, kp, "must list at most %zu %s", max, items);
	return true;
}

static bool get_int(struct vctx *v, json_object *o, const char *kp, int64_t lo, int64_t hi, int64_t *out)
{
	if (!json_object_is_type(o, json_type_int))
		return fail(v, kp, "must be an integer from %lld to %lld, not %s", (long long)lo, (long long)hi,
			    type_name(o));
	errno = 0;
	int64_t x = json_object_get_int64(o);
	/* json-c saturates out-of-range integers and sets errno. */
	if (errno != 0 || x < lo || x > hi)
		return fail(v, kp, "must be an integer from %lld to %lld", (long long)lo, (long long)hi);
	*out = x;
	return true;
}

static bool get_argv(struct vctx *v, json_object *o, const char *kp, char ***out)
{
	if (!json_object_is_type(o, json_type_array))
		return fail(v, kp, "must be an array of strings (argv), not %s", type_name(o));
	size_t n = json_object_array_length(o);
	if (n == 0 || n > 64)
		return fail(v, kp, "must hold 1 to 64 strings");
	char **argv = rts_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		char ekp[256];
		snprintf(ekp, sizeof(ekp), "%s[%zu]", kp, i);
		if (!get_string(v, json_object_array_get_idx(o, i), ekp, 4096, i == 0, &argv[i])) {
			rts_strv_free(argv);
			return false;
		}
	}
	if (argv[0][0] != '/') {
		rts_strv_free(argv);
		char ekp[256];
		snprintf(ekp, sizeof(ekp), "%s[0]", kp);
		return fail(v, ekp, "must be an absolute path to the program");
	}
	*out = argv;
	return true;
}

static void key_source_free(struct rts_key_source *k)
{
	free(k->value);
	rts_strv_free(k->argv);
	*k = (struct rts_key_source){0};
}

static bool get_key_source(struct vctx *v, json_object *o, const char *kp, struct rts_key_source *out)
{
	if (!json_object_is_type(o, json_type_object))
		return fail(v, kp, "must be an object with one of credential, file, env or command, not %s",
			    type_name(o));
	if (json_object_object_length(o) != 1)
		return fail(v, kp, "must have exactly one of credential, file, env or command");
	struct rts_key_source k = {0};
	char ekp[256];
	json_object_object_foreach(o, key, val)
	{
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, key);
		if (strcmp(key, "credential") == 0) {
			k.kind = RTS_KEY_CREDENTIAL;
			if (!get_string(v, val, ekp, 64, true, &k.value))
				return false;
			for (const char *p = k.value; *p; p++)
				if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
				      *p == '-' || *p == '_' || *p == '.'))
					return key_source_free(&k), fail(v, ekp, "must be a credential name ([A-Za-z0-9._-])");
			if (strcmp(k.value, ".") == 0 || strcmp(k.value, "..") == 0)
				return key_source_free(&k), fail(v, ekp, "must be a credential name, not . or ..");
		} else if (strcmp(key, "file") == 0) {
			k.kind = RTS_KEY_FILE;
			if (!get_path(v, val, ekp, &k.value))
				return key_source_free(&k), false;
		} else if (strcmp(key, "env") == 0) {
			k.kind = RTS_KEY_ENV;
			if (!get_string(v, val, ekp, 128, true, &k.value))
				return false;
			for (const char *p = k.value; *p; p++)
				if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
				      (p != k.value && *p >= '0' && *p <= '9')))
					return key_source_free(&k), fail(v, ekp, "must be an environment variable name");
		} else if (strcmp(key, "command") == 0) {
			k.kind = RTS_KEY_COMMAND;
			if (!get_argv(v, val, ekp, &k.argv))
				return false;
		} else {
			return fail(v, ekp, "unknown key (expected credential, file, env or command)");
		}
	}
	key_source_free(out);
	*out = k;
	return true;
}

/* Containers nested in o, o included (json-c's measure of depth): 0 for a scalar. */
static unsigned json_depth(json_object *o)
{
	unsigned deepest = 0;
	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, key, val)
		{
			(void)key;
			unsigned d = json_depth(val);
			deepest = d > deepest ? d : deepest;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
			unsigned d = json_depth(json_object_array_get_idx(o, i));
			deepest = d > deepest ? d : deepest;
		}
	} else {
		return 0;
	}
	return 1 + deepest;
}

static bool get_parameters(struct vctx *v, json_object *o, const char *kp, json_object **out)
{
	if (!json_object_is_type(o, json_type_object))
		return fail(v, kp, "must be a JSON schema object, not %s", type_name(o));
	if (rts_json_dump_len(o) > RTS_PARAMETERS_MAX)
		return fail(v, kp, "must serialise to at most %u bytes", RTS_PARAMETERS_MAX);
	/* The parse already bounded the recursion: the whole file nests at most RTS_JSON_DEPTH_MAX. */
	if (json_depth(o) > RTS_PARAMETERS_DEPTH_MAX)
		return fail(v, kp, "must nest at most %u levels deep", RTS_PARAMETERS_DEPTH_MAX);
	/* The worker offers these parameters in every /model body, where brokerd applies the
	 * schema reference rule (common/schema.h); a schema that rule refuses would fail every
	 * model call, so it is refused here, at start, instead (a copied "$schema" URL). */
	const char *why = NULL;
	if (rts_schema_check(o, &why) < 0)
		return fail(v, kp, "%s (references such as $ref, $id and $schema must be local fragments like \"#/$defs/x\")",
			    why);
	*out = json_object_get(o);
	return true;
}

static bool get_tool(struct vctx *v, json_object *o, const char *kp, struct rts_tool *t)
{
	char ekp[256];
	if (!json_object_is_type(o, json_type_object))
		return fail(v, kp, "must be an object, not %s", type_name(o));
	int64_t x;
	t->timeout_ms = RTS_TOOL_TIMEOUT_MS_DEFAULT;
	json_object_object_foreach(o, key, val)
	{
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, key);
		if (strcmp(key, "name") == 0) {
			if (!get_string(v, val, ekp, RTS_NAME_MAX, true, &t->name))
				return false;
			if (!rts_name_valid(t->name, RTS_NAME_MAX))
				return fail(v, ekp, "must match [a-z][a-z0-9_]{0,47}");
		} else if (strcmp(key, "description") == 0) {
			if (!get_encoded_string(v, val, ekp, RTS_DESCRIPTION_MAX, &t->description))
				return false;
		} else if (strcmp(key, "parameters") == 0) {
			if (!get_parameters(v, val, ekp, &t->parameters))
				return false;
		} else if (strcmp(key, "command") == 0) {
			if (!get_argv(v, val, ekp, &t->command))
				return false;
		} else if (strcmp(key, "timeoutMs") == 0) {
			if (!get_int(v, val, ekp, RTS_TOOL_TIMEOUT_MS_MIN, RTS_TOOL_TIMEOUT_MS_MAX, &x))
				return false;
			t->timeout_ms = (uint32_t)x;
		} else {
			return fail(v, ekp, "unknown key (expected name, description, parameters, command, timeoutMs)");
		}
	}
	const char *missing = !t->name ? "name" : !t->description ? "description" : !t->parameters ? "parameters"
							  : !t->command ? "command" : NULL;
	if (missing) {
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, missing);
		return fail(v, ekp, "is required");
	}
	return true;
}

static bool get_mcp_tool(struct vctx *v, json_object *o, const char *kp, struct rts_mcp_tool *t)
{
	char ekp[256];
	if (!json_object_is_type(o, json_type_object))
		return fail(v, kp, "must be an object, not %s", type_name(o));
	json_object_object_foreach(o, key, val)
	{
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, key);
		if (strcmp(key, "name") == 0) {
			if (!get_string(v, val, ekp, RTS_NAME_MAX, true, &t->name))
				return false;
			if (!rts_name_valid(t->name, RTS_NAME_MAX))
				return fail(v, ekp, "must match [a-z][a-z0-9_]{0,47}");
		} else if (strcmp(key, "description") == 0) {
			if (!get_encoded_string(v, val, ekp, RTS_DESCRIPTION_MAX, &t->description))
				return false;
		} else if (strcmp(key, "parameters") == 0) {
			if (!get_parameters(v, val, ekp, &t->parameters))
				return false;
		} else {
			return fail(v, ekp, "unknown key (expected name, description, parameters)");
		}
	}
	const char *missing = !t->name ? "name" : !t->description ? "description" : !t->parameters ? "parameters" : NULL;
	if (missing) {
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, missing);
		return fail(v, ekp, "is required");
	}
	return true;
}

static bool https_url_ok(const char *u)
{
	if (strncmp(u, "https://", 8) != 0 || strlen(u) <= 8)
		return false;
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return false;
	return true;
}

static bool get_mcp(struct vctx *v, json_object *o, const char *kp, struct rts_mcp_server *s)
{
	char ekp[256];
	if (!json_object_is_type(o, json_type_object))
		return fail(v, kp, "must be an object, not %s", type_name(o));
	bool have_tools = false;
	json_object_object_foreach(o, key, val)
	{
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, key);
		if (strcmp(key, "name") == 0) {
			if (!get_string(v, val, ekp, RTS_NAME_MAX, true, &s->name))
				return false;
			if (!rts_name_valid(s->name, RTS_NAME_MAX))
				return fail(v, ekp, "must match [a-z][a-z0-9_]{0,47}");
		} else if (strcmp(key, "url") == 0) {
			if (!get_string(v, val, ekp, 2048, true, &s->url))
				return false;
			if (!https_url_ok(s->url))
				return fail(v, ekp, "must be an https:// URL without spaces or control characters");
		} else if (strcmp(key, "apiKey") == 0) {
			if (!get_key_source(v, val, ekp, &s->api_key))
				return false;
			s->has_api_key = true;
		} else if (strcmp(key, "tools") == 0) {
			if (!json_object_is_type(val, json_type_array))
				return fail(v, ekp, "must be an array, not %s", type_name(val));
			size_t n = json_object_array_length(val);
			if (n == 0 || n > RTS_MAX_MCP_TOOLS)
				return fail(v, ekp, "must list 1 to %u tools", RTS_MAX_MCP_TOOLS);
			s->tools = rts_xcalloc(n, sizeof(*s->tools));
			s->n_tools = n;
			for (size_t i = 0; i < n; i++) {
				char tkp[256];
				snprintf(tkp, sizeof(tkp), "%s[%zu]", ekp, i);
				if (!get_mcp_tool(v, json_object_array_get_idx(val, i), tkp, &s->tools[i]))
					return false;
				for (size_t j = 0; j < i; j++)
					if (strcmp(s->tools[j].name, s->tools[i].name) == 0)
						return fail(v, tkp, "duplicate tool name \"%s\"", s->tools[i].name);
			}
			have_tools = true;
		} else {
			return fail(v, ekp, "unknown key (expected name, url, apiKey, tools)");
		}
	}
	const char *missing = !s->name ? "name" : !s->url ? "url" : !have_tools ? "tools" : NULL;
	if (missing) {
		snprintf(ekp, sizeof(ekp), "%s.%s", kp, missing);
		return fail(v, ekp, "is required");
	}
	return true;
}

static bool get_limits(struct vctx *v, json_object *o, struct rts_limits *l)
{
	if (!json_object_is_type(o, json_type_object))
		return fail(v, "limits", "must be an object, not %s", type_name(o));
	int64_t x;
	json_object_object_foreach(o, key, val)
	{
		if (strcmp(key, "memoryMb") == 0) {
			if (!get_int(v, val, "limits.memoryMb", RTS_MEMORY_MB_MIN, RTS_MEMORY_MB_MAX, &x))
				return false;
			l->memory_mb = (uint32_t)x;
		} else if (strcmp(key, "pids") == 0) {
			if (!get_int(v, val, "limits.pids", RTS_PIDS_MIN, RTS_PIDS_MAX, &x))
				return false;
			l->pids = (uint32_t)x;
		} else if (strcmp(key, "cpus") == 0) {
			if (!json_object_is_type(val, json_type_int) && !json_object_is_type(val, json_type_double))
				return fail(v, "limits.cpus", "must be a number from %g to %g, not %s", RTS_CPUS_MIN,
					    RTS_CPUS_MAX, type_name(val));
			double d = json_object_get_double(val);
			if (!isfinite(d) || d < RTS_CPUS_MIN || d > RTS_CPUS_MAX)
				return fail(v, "limits.cpus", "must be a number from %g to %g", RTS_CPUS_MIN, RTS_CPUS_MAX);
			l->cpus = d;
		} else {
			char ekp[128];
			snprintf(ekp, sizeof(ekp), "limits.%s", key);
			return fail(v, ekp, "unknown key (expected memoryMb, cpus, pids)");
		}
	}
	return true;
}

static bool time_zone_ok(const char *tz)
{
	if (!*tz || tz[0] == '/' || strstr(tz, ".."))
		return false;
	for (const char *p = tz; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '/' ||
		      *p == '_' || *p == '-' || *p == '+'))
			return false;
	return true;
}

/* Add one public tool to *used, the tool list's cost so far; false (naming kp) once the
 * list no longer fits what the worker gives configured tools. */
static bool tool_fits(struct vctx *v, size_t *used, const char *kp, const char *public_name, const char *name,
		      const char *description, json_object *parameters)
{
	cleanup_json json_object *spec = rts_tool_spec_new(public_name, description, parameters);
	*used += rts_tool_spec_cost(spec, public_name);
	if (*used <= RTS_PUBLIC_TOOLS_BUDGET)
		return true;
	return fail(v, kp,
		    "tool \"%s\" does not fit: the tools offered to the model may take %u bytes in all (names, "
		    "descriptions and parameters as JSON), and the tools up to this one take %zu; shorten "
		    "descriptions or parameters, or offer fewer tools",
		    name, RTS_PUBLIC_TOOLS_BUDGET, *used);
}

/* The worker offers the model the tools in rts_config_public_tools() order while they fit
 * RTS_TOOLS_BUDGET (seed: "bounded tool descriptions ... cannot grow a later turn past the
 * broker's body limit"). Rather than have it leave a tool out at every turn, the first
 * tool that would not fit is refused here, counted the way the worker counts. */
static bool check_tool_budget(struct vctx *v, const struct rts_config *c)
{
	size_t used = 0;
	char kp[64];
	for (size_t i = 0; i < c->n_tools; i++) {
		const struct rts_tool *t = &c->tools[i];
		cleanup_free char *pub = rts_xasprintf("host_%s", t->name);
		snprintf(kp, sizeof(kp), "tools[%zu]", i);
		if (!tool_fits(v, &used, kp, pub, t->name, t->description, t->parameters))
			return false;
	}
	for (size_t i = 0; i < c->n_mcp; i++)
		for (size_t j = 0; j < c->mcp[i].n_tools; j++) {
			const struct rts_mcp_tool *t = &c->mcp[i].tools[j];
			cleanup_free char *pub = rts_xasprintf("mcp_%zu_%s", i, t->name);
			snprintf(kp, sizeof(kp), "mcp[%zu].tools[%zu]", i, j);
			if (!tool_fits(v, &used, kp, pub, t->name, t->description, t->parameters))
				return false;
		}
	return true;
}

static void set_defaults(struct rts_config *c)
{
	c->image = rts_xstrdup("roundtable-sandbox:local");
	c->run_root = rts_xstrdup("/run/roundtable-sandbox/turns");
	c->workspace_root = rts_xstrdup("/var/lib/roundtable-sandbox/workspaces");
	c->state_file = rts_xstrdup("/var/lib/roundtable-sandbox/state/channels.json");
	c->provider = rts_xstrdup("openai");
	c->api_key.kind = RTS_KEY_CREDENTIAL;
	c->api_key.value = rts_xstrdup("model-api-key");
	c->max_output_tokens = RTS_MAX_OUTPUT_TOKENS_DEFAULT;
	c->limits = (struct rts_limits){.memory_mb = RTS_MEMORY_MB_DEFAULT, .cpus = RTS_CPUS_DEFAULT,
					.pids = RTS_PIDS_DEFAULT};
	c->turn_timeout_ms = RTS_TURN_TIMEOUT_MS_DEFAULT;
	c->system_prompt = rts_xstrdup("You are a helpful assistant taking part in a group chat. Answer the "
				       "current speaker briefly and stay friendly.");
	c->time_zone = rts_xstrdup("UTC");
	c->initial_channels = rts_xcalloc(1, sizeof(char *));
}

struct rts_config *rts_config_from_json(json_object *root, const char *path, char *err, size_t errlen)
{
	struct vctx v = {.file = path, .err = err, .errlen = errlen};
	if (!json_object_is_type(root, json_type_object)) {
		fail(&v, "(top level)", "must be a JSON object, not %s", type_name(root));
		return NULL;
	}
	struct rts_config *c = rts_xcalloc(1, sizeof(*c));
	c->path = rts_xstrdup(path);
	set_defaults(c);
	int64_t x;
	bool ok = true;
	json_object_object_foreach(root, key, val)
	{
		if (!ok)
			break;
		if (strcmp(key, "image") == 0) {
			ok = get_string(&v, val, key, RTS_IMAGE_MAX, true, &c->image) &&
			     (rts_image_ref_ok(c->image) || fail(&v, key, "must be a Docker image reference ([a-z0-9][A-Za-z0-9._/:@-]*)"));
		} else if (strcmp(key, "runRoot") == 0) {
			ok = get_path(&v, val, key, &c->run_root);
		} else if (strcmp(key, "workspaceRoot") == 0) {
			ok = get_path(&v, val, key, &c->workspace_root);
		} else if (strcmp(key, "stateFile") == 0) {
			ok = get_path(&v, val, key, &c->state_file);
		} else if (strcmp(key, "uid") == 0) {
			/* A root service account is refused (seed: "root workers are refused"). */
			ok = get_int(&v, val, key, 1, 4294967294LL, &x);
			c->uid = (uid_t)x;
			c->has_uid = true;
		} else if (strcmp(key, "gid") == 0) {
			ok = get_int(&v, val, key, 1, 4294967294LL, &x);
			c->gid = (gid_t)x;
			c->has_gid = true;
		} else if (strcmp(key, "provider") == 0) {
			ok = get_string(&v, val, key, 64, true, &c->provider) &&
			     (strcmp(c->provider, "openai") == 0 ||
			      fail(&v, key, "must be \"openai\" (an OpenAI-compatible Chat Completions endpoint)"));
		} else if (strcmp(key, "model") == 0) {
			ok = get_string(&v, val, key, 256, true, &c->model);
		} else if (strcmp(key, "modelUrl") == 0) {
			ok = get_string(&v, val, key, 2048, true, &c->model_url) &&
			     (https_url_ok(c->model_url) ||
			      fail(&v, key, "must be an https:// URL without spaces or control characters"));
		} else if (strcmp(key, "apiKey") == 0) {
			ok = get_key_source(&v, val, key, &c->api_key);
		} else if (strcmp(key, "maxOutputTokens") == 0) {
			ok = get_int(&v, val, key, RTS_MAX_OUTPUT_TOKENS_MIN, RTS_MAX_OUTPUT_TOKENS_MAX, &x);
			c->max_output_tokens = (uint32_t)x;
		} else if (strcmp(key, "limits") == 0) {
			ok = get_limits(&v, val, &c->limits);
		} else if (strcmp(key, "turnTimeoutMs") == 0) {
			ok = get_int(&v, val, key, RTS_TURN_TIMEOUT_MS_MIN, RTS_TURN_TIMEOUT_MS_MAX, &x);
			c->turn_timeout_ms = (uint32_t)x;
		} else if (strcmp(key, "systemPrompt") == 0) {
			ok = get_encoded_string(&v, val, key, RTS_SYSTEM_PROMPT_MAX, &c->system_prompt);
		} else if (strcmp(key, "timeZone") == 0) {
			ok = get_string(&v, val, key, RTS_TIME_ZONE_MAX, true, &c->time_zone) &&
			     (time_zone_ok(c->time_zone) ||
			      fail(&v, key, "must be an IANA time zone name such as \"UTC\" or \"Europe/Berlin\""));
		} else if (strcmp(key, "caFile") == 0) {
			ok = get_path(&v, val, key, &c->ca_file);
		} else if (strcmp(key, "tools") == 0) {
			size_t n;
			if (!(ok = get_list(&v, val, key, RTS_MAX_TOOLS, "tools", &n)))
				break;
			c->tools = rts_xcalloc(n, sizeof(*c->tools));
			c->n_tools = n;
			for (size_t i = 0; ok && i < n; i++) {
				char kp[64];
				snprintf(kp, sizeof(kp), "tools[%zu]", i);
				ok = get_tool(&v, json_object_array_get_idx(val, i), kp, &c->tools[i]);
				for (size_t j = 0; ok && j < i; j++)
					if (strcmp(c->tools[j].name, c->tools[i].name) == 0)
						ok = fail(&v, kp, "duplicate tool name \"%s\"", c->tools[i].name);
			}
		} else if (strcmp(key, "mcp") == 0) {
			size_t n;
			if (!(ok = get_list(&v, val, key, RTS_MAX_MCP_SERVERS, "servers", &n)))
				break;
			c->mcp = rts_xcalloc(n, sizeof(*c->mcp));
			c->n_mcp = n;
			for (size_t i = 0; ok && i < n; i++) {
				char kp[64];
				snprintf(kp, sizeof(kp), "mcp[%zu]", i);
				ok = get_mcp(&v, json_object_array_get_idx(val, i), kp, &c->mcp[i]);
				for (size_t j = 0; ok && j < i; j++)
					if (strcmp(c->mcp[j].name, c->mcp[i].name) == 0)
						ok = fail(&v, kp, "duplicate server name \"%s\"", c->mcp[i].name);
			}
		} else if (strcmp(key, "initialChannels") == 0) {
			size_t n;
			if (!(ok = get_list(&v, val, key, RTS_INITIAL_CHANNELS_MAX, "channel keys", &n)))
				break;
			rts_strv_free(c->initial_channels);
			c->initial_channels = rts_xcalloc(n + 1, sizeof(char *));
			for (size_t i = 0; ok && i < n; i++) {
				char kp[64];
				snprintf(kp, sizeof(kp), "initialChannels[%zu]", i);
				ok = get_string(&v, json_object_array_get_idx(val, i), kp, RTS_CHANNEL_MAX, true,
						&c->initial_channels[i]);
			}
		} else {
			ok = fail(&v, key, "unknown key");
		}
	}
	if (ok && !c->model)
		ok = fail(&v, "model", "is required (the model name the endpoint serves)");
	if (ok && !c->model_url)
		ok = fail(&v, "modelUrl", "is required (the https:// Chat Completions URL)");
	if (ok && strcmp(c->state_file, "/") == 0)
		ok = fail(&v, "stateFile", "must name a file");
	if (ok)
		ok = check_tool_budget(&v, c);
	if (!ok) {
		rts_config_free(c);
		return NULL;
	}
	rts_installation_id(c->state_file, c->installation_id);
	return c;
}

struct rts_config *rts_config_load(const char *path, char *err, size_t errlen)
{
	cleanup_json json_object *root = NULL;
	if (rts_config_read_json(path, &root, err, errlen) < 0)
		return NULL;
	return rts_config_from_json(root, path, err, errlen);
}

void rts_config_free(struct rts_config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->image);
	free(c->run_root);
	free(c->workspace_root);
	free(c->state_file);
	free(c->provider);
	free(c->model);
	free(c->model_url);
	key_source_free(&c->api_key);
	free(c->system_prompt);
	free(c->time_zone);
	for (size_t i = 0; i < c->n_tools; i++) {
		free(c->tools[i].name);
		free(c->tools[i].description);
		if (c->tools[i].parameters)
			json_object_put(c->tools[i].parameters);
		rts_strv_free(c->tools[i].command);
	}
	free(c->tools);
	for (size_t i = 0; i < c->n_mcp; i++) {
		struct rts_mcp_server *s = &c->mcp[i];
		free(s->name);
		free(s->url);
		key_source_free(&s->api_key);
		for (size_t j = 0; j < s->n_tools; j++) {
			free(s->tools[j].name);
			free(s->tools[j].description);
			if (s->tools[j].parameters)
				json_object_put(s->tools[j].parameters);
		}
		free(s->tools);
	}
	free(c->mcp);
	rts_strv_free(c->initial_channels);
	free(c->ca_file);
	free(c);
}

static json_object *tool_entry(const char *name, const char *description, json_object *parameters, const char *route)
{
	json_object *t = json_object_new_object();
	json_object_object_add(t, "name", json_object_new_string(name));
	json_object_object_add(t, "description", json_object_new_string(description));
	json_object_object_add(t, "parameters", json_object_get(parameters));
	json_object_object_add(t, "route", json_object_new_string(route));
	return t;
}

json_object *rts_config_public_tools(const struct rts_config *c)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < c->n_tools; i++) {
		cleanup_free char *name = rts_xasprintf("host_%s", c->tools[i].name);
		cleanup_free char *route = rts_xasprintf("/tools/%s", c->tools[i].name);
		json_object_array_add(a, tool_entry(name, c->tools[i].description, c->tools[i].parameters, route));
	}
	for (size_t i = 0; i < c->n_mcp; i++) {
		for (size_t j = 0; j < c->mcp[i].n_tools; j++) {
			const struct rts_mcp_tool *t = &c->mcp[i].tools[j];
			cleanup_free char *name = rts_xasprintf("mcp_%zu_%s", i, t->name);
			cleanup_free char *route = rts_xasprintf("/mcp/%s", c->mcp[i].name);
			json_object *e = tool_entry(name, t->description, t->parameters, route);
			json_object_object_add(e, "mcpTool", json_object_new_string(t->name));
			json_object_array_add(a, e);
		}
	}
	return a;
}
