/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <grp.h>
#include <pwd.h>

#include "common/conf.h"
#include "common/conf_int.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/precheck.h"
#include "common/schema.h"
#include "common/tools.h"
#include "common/util.h"

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

static bool path_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *why;
	return path_ok(json_object_get_string(v), &why) || rts_jfail(ctx, "%s", why);
}

bool rts_conf_time_zone_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *tz = json_object_get_string(v);
	bool ok = tz[0] != '/' && !strstr(tz, "..");
	for (const char *p = tz; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '/' ||
		     *p == '_' || *p == '-' || *p == '+';
	return ok || rts_jfail(ctx, "must be an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"");
}

bool rts_conf_image_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_image_ref_ok(json_object_get_string(v)) ||
	       rts_jfail(ctx, "must be a Docker image reference ([a-z0-9][A-Za-z0-9._/:@-]*)");
}

bool rts_conf_https_url_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *u = json_object_get_string(v);
	bool ok = strncmp(u, "https://", 8) == 0 && strlen(u) > 8;
	for (const char *p = u; ok && *p; p++)
		ok = (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f;
	return ok || rts_jfail(ctx, "must be an https:// URL without spaces or control characters");
}

bool rts_conf_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_name_valid(json_object_get_string(v), RTS_NAME_MAX) ||
	       rts_jfail(ctx, "must match [a-z][a-z0-9_]{0,47}");
}

/* argv: the program is named by an absolute path (no $PATH lookup). */
bool rts_conf_argv_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return json_object_get_string(json_object_array_get_idx(v, 0))[0] == '/' ||
	       rts_jfail_at(ctx, "[0]", "must be an absolute path to the program");
}

const struct rts_jfield rts_conf_argv_item = {.types = RTS_JT_STRING, .max = 4096, .store = RTS_JS_STRDUP};

/* ---- key sources ---- */

void rts_conf_key_source_free(struct rts_key_source *k)
{
	free(k->value);
	rts_strv_free(k->argv);
	*k = (struct rts_key_source){0};
}

/* Each member of a key source stores its value, then says which kind it is and drops what
 * a default (apiKey's credential) left in the other member. */
static void key_kind(struct rts_key_source *k, enum rts_key_kind kind)
{
	if (!k)
		return;
	k->kind = kind;
	if (kind == RTS_KEY_COMMAND) {
		free(k->value);
		k->value = NULL;
	} else {
		rts_strv_free(k->argv);
		k->argv = NULL;
	}
}

static bool credential_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *s = json_object_get_string(v);
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '_' || *p == '.'))
			return rts_jfail(ctx, "must be a credential name ([A-Za-z0-9._-])");
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return rts_jfail(ctx, "must be a credential name, not . or ..");
	key_kind(base, RTS_KEY_CREDENTIAL);
	return true;
}

static bool key_file_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!path_check(ctx, v, base))
		return false;
	key_kind(base, RTS_KEY_FILE);
	return true;
}

static bool env_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *s = json_object_get_string(v);
	for (const char *p = s; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		      (p != s && *p >= '0' && *p <= '9')))
			return rts_jfail(ctx, "must be an environment variable name");
	key_kind(base, RTS_KEY_ENV);
	return true;
}

static bool command_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!rts_conf_argv_check(ctx, v, base))
		return false;
	key_kind(base, RTS_KEY_COMMAND);
	return true;
}

#define KS_VALUE offsetof(struct rts_key_source, value)
const struct rts_jspec rts_conf_key_source_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "credential", .types = RTS_JT_STRING, .flags = RTS_JF_ALTERNATIVE, .min = 1, .max = 64,
		 .check = credential_check, .store = RTS_JS_STRDUP, .at = KS_VALUE},
		{.key = "file", .types = RTS_JT_STRING, .flags = RTS_JF_ALTERNATIVE, .min = 1, .max = 1024,
		 .check = key_file_check, .store = RTS_JS_STRDUP, .at = KS_VALUE},
		{.key = "env", .types = RTS_JT_STRING, .flags = RTS_JF_ALTERNATIVE, .min = 1, .max = 128,
		 .check = env_check, .store = RTS_JS_STRDUP, .at = KS_VALUE},
		ARGV_FIELD("command", RTS_JF_ALTERNATIVE, offsetof(struct rts_key_source, argv), command_check),
		{0},
	},
};

/* ---- tools ---- */

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

static bool parameters_check(struct rts_jctx *ctx, json_object *o, void *base)
{
	if (rts_json_dump_len(o) > RTS_PARAMETERS_MAX)
		return rts_jfail(ctx, "must serialise to at most %u bytes", RTS_PARAMETERS_MAX);
	/* The parse already bounded the recursion: the whole file nests at most RTS_JSON_DEPTH_MAX. */
	if (json_depth(o) > RTS_PARAMETERS_DEPTH_MAX)
		return rts_jfail(ctx, "must nest at most %u levels deep", RTS_PARAMETERS_DEPTH_MAX);
	/* The worker offers these parameters in every /model body, where brokerd applies the
	 * schema reference rule (common/schema.h); a schema that rule refuses would fail every
	 * model call, so it is refused here, at start, instead (a copied "$schema" URL). */
	const char *why = NULL;
	if (rts_schema_check(o, &why) < 0)
		return rts_jfail(ctx,
				 "%s (references such as $ref, $id and $schema must be local fragments that name a "
				 "schema, like \"#/$defs/x\"; enum, const, default and examples hold none)",
				 why);
	return true;
}

/* name, description and parameters, as host and MCP tools both have them (struct rts_tool
 * and struct rts_mcp_tool start alike). */
#define TOOL_FIELDS(type)                                                                                              \
	{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_NAME_MAX,               \
	 .check = rts_conf_name_check, .store = RTS_JS_STRDUP, .at = offsetof(type, name)},                                     \
	{.key = "description", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED | RTS_JF_ENCODED,                      \
	 .max = RTS_DESCRIPTION_MAX, .store = RTS_JS_STRDUP, .at = offsetof(type, description)},                       \
	{.key = "parameters", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .check = parameters_check,             \
	 .store = RTS_JS_JSON_REF, .at = offsetof(type, parameters), .what = "a JSON schema object"}

static bool tool_defaults(struct rts_jctx *ctx, json_object *o, void *base)
{
	struct rts_tool *t = base;
	if (t && t->timeout_ms == 0) /* absent: 0 is out of range */
		t->timeout_ms = RTS_TOOL_TIMEOUT_MS_DEFAULT;
	if (t && !t->write_paths) /* absent: the tool writes nowhere */
		t->write_paths = rts_xcalloc(1, sizeof(char *));
	return true;
}

/* One of a tool's writePaths. The file system checks (an existing directory, no symbolic
 * link, writable, apart from the suite's own directories) are brokerd's at start
 * (brokerd/toolbox.h): they depend on the host, not on the file. */
static bool write_path_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!path_check(ctx, v, base))
		return false;
	if (strcmp(json_object_get_string(v), "/") == 0)
		return rts_jfail(ctx, "must not be / (name the directories the tool writes)");
	return true;
}

static bool write_paths_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	size_t n = json_object_array_length(v);
	for (size_t i = 1; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(json_object_get_string(json_object_array_get_idx(v, i)),
				   json_object_get_string(json_object_array_get_idx(v, j))) == 0) {
				char at[32];
				snprintf(at, sizeof(at), "[%zu]", i);
				return rts_jfail_at(ctx, at, "repeats writePaths[%zu]", j);
			}
	return true;
}

static const struct rts_jspec tool_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		TOOL_FIELDS(struct rts_tool),
		ARGV_FIELD("command", RTS_JF_REQUIRED, offsetof(struct rts_tool, command), rts_conf_argv_check),
		{.key = "timeoutMs", .types = RTS_JT_INT, .min = RTS_TOOL_TIMEOUT_MS_MIN,
		 .max = RTS_TOOL_TIMEOUT_MS_MAX,
		 .store = RTS_JS_UINT32, .at = offsetof(struct rts_tool, timeout_ms)},
		{.key = "writePaths", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_TOOL_WRITE_PATHS_MAX,
		 .items = "directories",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = RTS_WRITE_PATH_MAX,
						    .check = write_path_check, .store = RTS_JS_STRDUP},
		 .check = write_paths_check, .store = RTS_JS_ARRAY, .at = offsetof(struct rts_tool, write_paths),
		 .count_at = offsetof(struct rts_tool, n_write_paths), .elem_size = sizeof(char *)},
		{0},
	},
	.check = tool_defaults,
};

static const struct rts_jspec mcp_tool_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){TOOL_FIELDS(struct rts_mcp_tool), {0}},
};

/* https://, or http:// for a server only rich channels reach: config_check() allows that
 * only with rich.allowHttpMcp (seed: allowHttpMcp is the only way to a cleartext endpoint). */
static bool mcp_url_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *u = json_object_get_string(v);
	bool ok = (strncmp(u, "https://", 8) == 0 && strlen(u) > 8) || (strncmp(u, "http://", 7) == 0 && strlen(u) > 7);
	for (const char *p = u; ok && *p; p++)
		ok = (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f;
	return ok || rts_jfail(ctx, "must be an https:// URL without spaces or control characters");
}

static const struct rts_jspec mcp_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_NAME_MAX,
		 .check = rts_conf_name_check, .store = RTS_JS_STRDUP, .at = offsetof(struct rts_mcp_server, name)},
		{.key = "url", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 2048,
		 .check = mcp_url_check, .store = RTS_JS_STRDUP, .at = offsetof(struct rts_mcp_server, url)},
		{.key = "apiKey", .types = RTS_JT_OBJECT, .flags = RTS_JF_PRESENT, .object = &rts_conf_key_source_spec,
		 .store = RTS_JS_OBJECT, .at = offsetof(struct rts_mcp_server, api_key),
		 .present_at = offsetof(struct rts_mcp_server, has_api_key), .what = KEY_SOURCE_WHAT},
		{.key = "tools", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT, .min = 1,
		 .max = RTS_MAX_MCP_TOOLS, .unique = "name", .items = "tools",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &mcp_tool_spec,
						    .store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = offsetof(struct rts_mcp_server, tools),
		 .count_at = offsetof(struct rts_mcp_server, n_tools), .elem_size = sizeof(struct rts_mcp_tool)},
		{0},
	},
};

/* Add one public tool to *used, the tool list's cost so far; false (naming the tool) once
 * the list no longer fits what the worker gives configured tools. */
static bool tool_fits(struct rts_jctx *ctx, size_t *used, const char *at, const char *public_name, const char *name,
		      const char *description, json_object *parameters)
{
	cleanup_json json_object *spec = rts_tool_spec_new(public_name, description, parameters);
	*used += rts_tool_spec_cost(spec, public_name);
	if (*used <= RTS_PUBLIC_TOOLS_BUDGET)
		return true;
	return rts_jfail_at(ctx, at,
			    "tool \"%s\" does not fit: the tools offered to the model may take %u bytes in all (names, "
			    "descriptions and parameters as JSON), and the tools up to this one take %zu; shorten "
			    "descriptions or parameters, or offer fewer tools",
			    name, RTS_PUBLIC_TOOLS_BUDGET, *used);
}

/* ---- accounts (DESIGN.md 8.1) ---- */

/* An account or group name as useradd and systemd-sysusers accept it: a letter or '_'
 * first (so a number written as a string is never taken for a name), at most 32 bytes. */
static bool account_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 32 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '-' || *p == '.'))
			return false;
	return true;
}

#define ACCOUNT_NAME_WHAT "a user name ([A-Za-z_][A-Za-z0-9_.-]*, at most 32 bytes)"

/* Resolve a user name (the config is loaded before any filter, so NSS may be asked).
 * Refuses root: no daemon and no container runs as root (seed: root workers are
 * refused). */
static bool resolve_user(struct rts_jctx *ctx, const char *name, uid_t *uid, gid_t *gid)
{
	if (!account_name_ok(name))
		return rts_jfail(ctx, "must be %s", ACCOUNT_NAME_WHAT);
	errno = 0;
	struct passwd *pw = getpwnam(name);
	if (!pw)
		return rts_jfail(ctx, "there is no user named \"%s\" on this host (systemd-sysusers creates the "
				      "packaged ones; else useradd --system --user-group %s)",
				 name, name);
	if (pw->pw_uid == 0)
		return rts_jfail(ctx, "\"%s\" is root (uid 0), and nothing here runs as root", name);
	*uid = pw->pw_uid;
	if (gid)
		*gid = pw->pw_gid;
	return true;
}

/* One daemon account of "accounts": resolved, its ids stored where given (base may be
 * NULL: nothing stored). */
static bool daemon_account(struct rts_jctx *ctx, json_object *v, uid_t *uid, gid_t *gid)
{
	uid_t u;
	gid_t g;
	if (!resolve_user(ctx, json_object_get_string(v), &u, &g))
		return false;
	if (uid)
		*uid = u, *gid = g;
	return true;
}

static bool broker_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct rts_accounts *a = base;
	return daemon_account(ctx, v, a ? &a->broker_uid : NULL, a ? &a->broker_gid : NULL);
}

static bool runner_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct rts_accounts *a = base;
	return daemon_account(ctx, v, a ? &a->runner_uid : NULL, a ? &a->runner_gid : NULL);
}

static bool accounts_check(struct rts_jctx *ctx, json_object *o, void *base)
{
	const struct rts_accounts *a = base;
	if (a && (a->broker_uid == a->runner_uid || strcmp(a->broker, a->runner) == 0))
		return rts_jfail_at(ctx, "runner", "is the same account as accounts.broker; each role needs an "
						  "account of its own");
	if (a && a->broker_gid == a->runner_gid)
		return rts_jfail_at(ctx, "runner", "has the same primary group (gid %lu) as accounts.broker; give "
						  "each account a group of its own",
				    (unsigned long)a->runner_gid);
	return true;
}

#define ACCOUNTS(m) offsetof(struct rts_accounts, m)
static const struct rts_jspec accounts_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "broker", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 32,
		 .check = broker_check, .store = RTS_JS_STRDUP, .at = ACCOUNTS(broker), .what = ACCOUNT_NAME_WHAT,
		 .missing = "is required (the account brokerd runs as)"},
		{.key = "runner", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 32,
		 .check = runner_check, .store = RTS_JS_STRDUP, .at = ACCOUNTS(runner), .what = ACCOUNT_NAME_WHAT,
		 .missing = "is required (the account runnerd runs as)"},
		{0},
	},
	.check = accounts_check,
};

/* uid: a number (1 .. 2^32-2) or a user name, resolved now. */
static bool uid_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct rts_config *c = base;
	uid_t uid;
	if (json_object_is_type(v, json_type_int)) {
		uid = (uid_t)json_object_get_int64(v);
	} else {
		if (!resolve_user(ctx, json_object_get_string(v), &uid, NULL))
			return false;
		if (c) {
			free(c->uid_name);
			c->uid_name = rts_xstrdup(json_object_get_string(v));
		}
	}
	if (c)
		c->uid = uid;
	return true;
}

/* gid: a number or a group name. */
static bool gid_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct rts_config *c = base;
	gid_t gid;
	if (json_object_is_type(v, json_type_int)) {
		gid = (gid_t)json_object_get_int64(v);
	} else {
		const char *name = json_object_get_string(v);
		if (!account_name_ok(name))
			return rts_jfail(ctx, "must be a group name ([A-Za-z_][A-Za-z0-9_.-]*, at most 32 bytes)");
		struct group *gr = getgrnam(name);
		if (!gr)
			return rts_jfail(ctx, "there is no group named \"%s\" on this host", name);
		if (gr->gr_gid == 0)
			return rts_jfail(ctx, "\"%s\" is root's group (gid 0), and nothing here runs as root", name);
		gid = gr->gr_gid;
		if (c) {
			free(c->gid_name);
			c->gid_name = rts_xstrdup(name);
		}
	}
	if (c)
		c->gid = gid;
	return true;
}

/* With accounts, uid/gid name the guest account: a fourth account that no daemon runs as
 * (statd's own is checked when it starts, rts_check_identity()). */
static bool guest_check(struct rts_jctx *ctx, const struct rts_config *c)
{
	const struct rts_accounts *a = &c->accounts;
	if (!c->has_uid || !c->has_gid)
		return rts_jfail_at(ctx, c->has_uid ? "gid" : "uid",
				    "is required with \"accounts\": the guest account turn containers run as (the package "
				    "creates \"roundtable-sandbox-guest\")");
	if (c->uid == a->broker_uid || c->uid == a->runner_uid)
		return rts_jfail_at(ctx, "uid",
				    "is accounts.%s's uid %lu: turn containers run as a guest account that no daemon "
				    "runs as",
				    c->uid == a->broker_uid ? "broker" : "runner", (unsigned long)c->uid);
	if (c->gid == a->broker_gid || c->gid == a->runner_gid)
		return rts_jfail_at(ctx, "gid",
				    "is the primary group (gid %lu) of accounts.%s: turn containers need a group no "
				    "daemon has",
				    (unsigned long)c->gid, c->gid == a->broker_gid ? "broker" : "runner");
	return true;
}

/* ---- the whole file ---- */

static bool config_check(struct rts_jctx *ctx, json_object *o, void *base);

#define CONF(m) offsetof(struct rts_config, m)
#define LIMITS(m) offsetof(struct rts_limits, m)
#define PATH_FIELD(k, m)                                                                                               \
	{.key = (k), .types = RTS_JT_STRING, .min = 1, .max = 1024, .check = path_check, .store = RTS_JS_STRDUP,       \
	 .at = CONF(m)}
#define UINT_FIELD(k, lo, hi, off)                                                                                     \
	{.key = (k), .types = RTS_JT_INT, .min = (lo), .max = (hi), .store = RTS_JS_UINT32, .at = (off)}

/* A container's memory (the same range for a turn's and a precheck's) and CPUs from lo. */
#define MEMORY_CPUS_FIELDS(cpus_lo)                                                                                    \
	UINT_FIELD("memoryMb", RTS_MEMORY_MB_MIN, RTS_MEMORY_MB_MAX, LIMITS(memory_mb)),                               \
		{.key = "cpus", .types = RTS_JT_NUMBER, .dmin = (cpus_lo), .dmax = RTS_CPUS_MAX,                       \
		 .store = RTS_JS_DOUBLE, .at = LIMITS(cpus)}

static const struct rts_jspec limits_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		MEMORY_CPUS_FIELDS(RTS_CPUS_MIN),
		UINT_FIELD("pids", RTS_PIDS_MIN, RTS_PIDS_MAX, LIMITS(pids)),
		{0},
	},
};

/* The precheck container's: the turn container's ranges, but enough CPU and processes for
 * the JavaScript runtime to start (RTS_PRECHECK_CPUS_MIN, RTS_PRECHECK_PIDS_MIN). */
static const struct rts_jspec precheck_limits_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		MEMORY_CPUS_FIELDS(RTS_PRECHECK_CPUS_MIN),
		UINT_FIELD("pids", RTS_PRECHECK_PIDS_MIN, RTS_PIDS_MAX, LIMITS(pids)),
		{0},
	},
};

_Static_assert(sizeof(RTS_FETCH_TOOL_DESCRIPTION) - 1 <= RTS_DESCRIPTION_MAX,
	       "host_fetch's description must be one a configured tool could have");
#define FETCH(m) offsetof(struct rts_fetch_conf, m)
/* "enabled" is required: an operator who writes the other keys but not it would
 * otherwise get no tool without a word. */
static const struct rts_jspec fetch_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "enabled", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL,
		 .at = FETCH(enabled), .missing = "is required (true offers the guest tool " RTS_FETCH_TOOL_NAME ")"},
		UINT_FIELD("maxBytes", RTS_FETCH_BYTES_MIN, RTS_FETCH_BYTES_MAX, FETCH(max_bytes)),
		UINT_FIELD("timeoutMs", RTS_FETCH_TIMEOUT_MIN_MS, RTS_FETCH_TIMEOUT_MAX_MS, FETCH(timeout_ms)),
		UINT_FIELD("maxRedirects", RTS_FETCH_REDIRECTS_MIN, RTS_FETCH_REDIRECTS_MAX, FETCH(max_redirects)),
		{0},
	},
};

/* ---- the precheck runner (DESIGN.md 8.3) ---- */

/* An MCP tool name as a precheck script names it: the MCP specification's tool names,
 * which the harness checks too (worker/precheck/harness.mjs). */
static bool precheck_tool_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return rts_precheck_tool_name_valid(json_object_get_string(v)) ||
	       rts_jfail(ctx, "must match [A-Za-z0-9_.-]{1,128}");
}

/* A list of strings with no repeats (jspec's .unique looks at members of objects). */
static bool strings_unique_check(struct rts_jctx *ctx, json_object *a, void *base)
{
	size_t n = json_object_array_length(a);
	for (size_t j = 1; j < n; j++)
		for (size_t i = 0; i < j; i++)
			if (strcmp(json_object_get_string(json_object_array_get_idx(a, i)),
				   json_object_get_string(json_object_array_get_idx(a, j))) == 0) {
				char rel[32];
				snprintf(rel, sizeof(rel), "[%zu]", j);
				return rts_jfail_at(ctx, rel, "repeats an earlier entry");
			}
	return true;
}

#define PSRV(m) offsetof(struct rts_precheck_server, m)
static const struct rts_jspec precheck_server_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_NAME_MAX,
		 .check = rts_conf_name_check, .store = RTS_JS_STRDUP, .at = PSRV(name)},
		/* Fixed by the operator; never from a script (seed: "url is a fixed HTTPS Streamable
		 * HTTP endpoint"; no cleartext). */
		{.key = "url", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 2048,
		 .check = rts_conf_https_url_check, .store = RTS_JS_STRDUP, .at = PSRV(url)},
		{.key = "tools", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT, .min = 1,
		 .max = RTS_MAX_MCP_TOOLS, .items = "tool names",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = RTS_PRECHECK_TOOL_NAME_MAX,
						    .check = precheck_tool_check, .store = RTS_JS_STRDUP},
		 .check = strings_unique_check, .store = RTS_JS_ARRAY, .at = PSRV(tools), .count_at = PSRV(n_tools),
		 .elem_size = sizeof(char *)},
		{.key = "token", .types = RTS_JT_OBJECT, .flags = RTS_JF_PRESENT, .object = &rts_conf_key_source_spec,
		 .store = RTS_JS_OBJECT, .at = PSRV(token), .present_at = PSRV(has_token), .what = KEY_SOURCE_WHAT},
		{0},
	},
};

#define PGRANT(m) offsetof(struct rts_precheck_grant, m)
static const struct rts_jspec precheck_grant_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "channel", .types = RTS_JT_STRING, .min = 1, .max = RTS_CHANNEL_MAX, .store = RTS_JS_STRDUP,
		 .at = PGRANT(channel)},
		{.key = "target", .types = RTS_JT_STRING, .min = 1, .max = RTS_PRECHECK_TARGET_MAX,
		 .store = RTS_JS_STRDUP, .at = PGRANT(target)},
		{.key = "tiers", .types = RTS_JT_ARRAY, .flags = RTS_JF_PRESENT, .min = 1, .max = RTS_PRECHECK_TIERS_MAX,
		 .items = "tiers",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = RTS_SPEAKER_FIELD_MAX,
						    .store = RTS_JS_STRDUP},
		 .check = strings_unique_check, .store = RTS_JS_ARRAY, .at = PGRANT(tiers),
		 .present_at = PGRANT(has_tiers), .elem_size = sizeof(char *)},
		/* May be empty: a grant that shadows later ones and leaves matching scripts no way
		 * out. */
		{.key = "servers", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT,
		 .max = RTS_MAX_MCP_SERVERS, .unique = "name", .items = "servers",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &precheck_server_spec,
						    .store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = PGRANT(servers), .count_at = PGRANT(n_servers),
		 .elem_size = sizeof(struct rts_precheck_server)},
		{0},
	},
};

static const char *const tool_names_names[] = {[RTS_TOOL_NAMES_TOOL] = "tool",
					       [RTS_TOOL_NAMES_SERVER_TOOL] = "server_tool", NULL};

#define PRE(m) offsetof(struct rts_precheck, m)
static const struct rts_jspec precheck_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "image", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_IMAGE_MAX,
		 .check = rts_conf_image_check, .store = RTS_JS_STRDUP, .at = PRE(image),
		 .missing = "is required (the precheck image: roundtable-sandbox image build --precheck)"},
		{.key = "runRoot", .types = RTS_JT_STRING, .min = 1, .max = 1024, .check = path_check,
		 .store = RTS_JS_STRDUP, .at = PRE(run_root)},
		{.key = "timeoutMs", .types = RTS_JT_INT, .min = RTS_PRECHECK_TIMEOUT_MS_MIN,
		 .max = RTS_PRECHECK_TIMEOUT_MS_MAX, .store = RTS_JS_UINT32, .at = PRE(timeout_ms)},
		{.key = "maxCalls", .types = RTS_JT_INT, .min = 0, .max = RTS_PRECHECK_MAX_CALLS_MAX,
		 .store = RTS_JS_UINT32, .at = PRE(max_calls)},
		{.key = "limits", .types = RTS_JT_OBJECT, .object = &precheck_limits_spec, .store = RTS_JS_OBJECT,
		 .at = PRE(limits)},
		{.key = "toolNames", .types = RTS_JT_STRING, .one_of = tool_names_names, .store = RTS_JS_INDEX,
		 .at = PRE(tool_names), .what = "\"tool\" or \"server_tool\" (how the host's hold rules name a tool)"},
		{.key = "grants", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_PRECHECK_GRANTS_MAX,
		 .items = "grants",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &precheck_grant_spec,
						    .store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = PRE(grants), .count_at = PRE(n_grants),
		 .elem_size = sizeof(struct rts_precheck_grant)},
		{0},
	},
};

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "uid and gid store as uint32");

static const struct rts_jspec config_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "image", .types = RTS_JT_STRING, .min = 1, .max = RTS_IMAGE_MAX, .check = rts_conf_image_check,
		 .store = RTS_JS_STRDUP, .at = CONF(image)},
		PATH_FIELD("runRoot", run_root),
		PATH_FIELD("workspaceRoot", workspace_root),
		PATH_FIELD("stateFile", state_file),
		/* Root is refused (seed: "root workers are refused"); a name is resolved now. */
		{.key = "uid", .types = RTS_JT_INT | RTS_JT_STRING, .flags = RTS_JF_PRESENT, .min = 1,
		 .max = 4294967294LL, .check = uid_check, .present_at = CONF(has_uid),
		 .what = "a uid from 1 to 4294967294, or a user name"},
		{.key = "gid", .types = RTS_JT_INT | RTS_JT_STRING, .flags = RTS_JF_PRESENT, .min = 1,
		 .max = 4294967294LL, .check = gid_check, .present_at = CONF(has_gid),
		 .what = "a gid from 1 to 4294967294, or a group name"},
		{.key = "accounts", .types = RTS_JT_OBJECT, .flags = RTS_JF_PRESENT, .object = &accounts_spec,
		 .store = RTS_JS_OBJECT, .at = CONF(accounts), .present_at = CONF(accounts.present),
		 .what = "an object {\"broker\": USER, \"runner\": USER}"},
		{.key = "provider", .types = RTS_JT_STRING, .one_of = (const char *const[]){"openai", NULL},
		 .store = RTS_JS_STRDUP, .at = CONF(provider),
		 .what = "\"openai\" (an OpenAI-compatible Chat Completions endpoint)"},
		{.key = "model", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 256,
		 .store = RTS_JS_STRDUP, .at = CONF(model),
		 	.missing = "is required (the model name the endpoint serves)"},
		{.key = "modelUrl", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 2048,
		 .check = rts_conf_https_url_check, .store = RTS_JS_STRDUP, .at = CONF(model_url),
		 .missing = "is required (the https:// Chat Completions URL)"},
		{.key = "apiKey", .types = RTS_JT_OBJECT, .object = &rts_conf_key_source_spec, .store = RTS_JS_OBJECT,
		 .at = CONF(api_key), .what = KEY_SOURCE_WHAT},
		UINT_FIELD("maxOutputTokens", RTS_MAX_OUTPUT_TOKENS_MIN, RTS_MAX_OUTPUT_TOKENS_MAX,
			   CONF(max_output_tokens)),
		{.key = "limits", .types = RTS_JT_OBJECT, .object = &limits_spec, .store = RTS_JS_OBJECT,
		 .at = CONF(limits)},
		UINT_FIELD("turnTimeoutMs", RTS_TURN_TIMEOUT_MS_MIN, RTS_TURN_TIMEOUT_MS_MAX, CONF(turn_timeout_ms)),
		UINT_FIELD("warmSpares", 0, RTS_WARM_SPARES_MAX, CONF(warm_spares)),
		UINT_FIELD("warmSparesMax", RTS_WARM_SPARES_CAP_MIN, RTS_WARM_SPARES_CAP_MAX, CONF(warm_spares_max)),
		UINT_FIELD("warmSpareIdleMs", RTS_WARM_SPARE_IDLE_MS_MIN, RTS_WARM_SPARE_IDLE_MS_MAX,
			   CONF(warm_spare_idle_ms)),
		{.key = "systemPrompt", .types = RTS_JT_STRING, .flags = RTS_JF_ENCODED, .max = RTS_SYSTEM_PROMPT_MAX,
		 .store = RTS_JS_STRDUP, .at = CONF(system_prompt)},
		{.key = "timeZone", .types = RTS_JT_STRING, .min = 1, .max = RTS_TIME_ZONE_MAX,
		 .check = rts_conf_time_zone_check,
		 .store = RTS_JS_STRDUP, .at = CONF(time_zone)},
		PATH_FIELD("caFile", ca_file),
		{.key = "tools", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_MAX_TOOLS, .unique = "name",
		 .items = "tools",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &tool_spec,
		 	.store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = CONF(tools), .count_at = CONF(n_tools),
		 	.elem_size = sizeof(struct rts_tool)},
		{.key = "mcp", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_MAX_MCP_SERVERS,
		 .unique = "name",
		 .items = "servers",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &mcp_spec,
		 	.store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = CONF(mcp), .count_at = CONF(n_mcp),
		 	.elem_size = sizeof(struct rts_mcp_server)},
		/* After tools and mcp: profiles name them. */
		{.key = "rich", .types = RTS_JT_OBJECT, .flags = RTS_JF_PRESENT, .object = &rts_conf_rich_spec,
		 .store = RTS_JS_OBJECT, .at = CONF(rich), .present_at = CONF(rich.enabled)},
		{.key = "fetch", .types = RTS_JT_OBJECT, .object = &fetch_spec, .store = RTS_JS_OBJECT,
		 .at = CONF(fetch)},
		{.key = "initialChannels", .types = RTS_JT_ARRAY, .max = RTS_INITIAL_CHANNELS_MAX,
		 .items = "channel keys",
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .min = 1, .max = RTS_CHANNEL_MAX,
						    .store = RTS_JS_STRDUP},
		 .store = RTS_JS_ARRAY, .at = CONF(initial_channels), .elem_size = sizeof(char *)},
		{.key = "precheck", .types = RTS_JT_OBJECT, .flags = RTS_JF_PRESENT, .object = &precheck_spec,
		 .store = RTS_JS_OBJECT, .at = CONF(precheck), .present_at = CONF(has_precheck)},
		{0},
	},
	.check = config_check,
};
static const struct rts_jfield config_root = RTS_JSPEC_ROOT(&config_spec);

/* Rules between keys, once each key is valid on its own. */
static bool config_check(struct rts_jctx *ctx, json_object *o, void *base)
{
	struct rts_config *c = base;
	if (strcmp(c->state_file, "/") == 0)
		return rts_jfail_at(ctx, "stateFile", "must name a file");
	if (c->accounts.present && !guest_check(ctx, c))
		return false;
	/* Precheck runs live beside the turns' run dirs unless told otherwise. */
	if (c->has_precheck && !c->precheck.run_root)
		c->precheck.run_root = rts_xstrdup(c->run_root);
	/* The worker offers the model the tools in rts_config_public_tools() order while they
	 * fit RTS_TOOLS_BUDGET (seed: "bounded tool descriptions ... cannot grow a later turn
	 * past the broker's body limit"). Rather than have it leave a tool out at every turn,
	 * the first tool that would not fit is refused here, counted the way the worker
	 * counts. */
	char at[64];
	for (size_t i = 0; i < c->n_mcp; i++)
		if (strncmp(c->mcp[i].url, "http://", 7) == 0 && !(c->rich.enabled && c->rich.allow_http_mcp)) {
			snprintf(at, sizeof(at), "mcp[%zu].url", i);
			return rts_jfail_at(ctx, at,
					    "must be an https:// URL (http:// only with \"rich\": {\"allowHttpMcp\": true}, "
					    "for servers of rich profiles)");
		}
	if (c->rich.enabled && !rts_conf_rich_check(ctx, c))
		return false;
	/* host_fetch's public name and route are the ones a host tool named "fetch" gets:
	 * while the built-in tool is on, such a tool is refused rather than shadowed. */
	for (size_t i = 0; c->fetch.enabled && i < c->n_tools; i++)
		if (strcmp(c->tools[i].name, RTS_FETCH_TOOL) == 0) {
			snprintf(at, sizeof(at), "tools[%zu].name", i);
			return rts_jfail_at(ctx, at,
					    "\"%s\" is taken by the built-in tool %s while fetch.enabled is true; "
					    "rename this tool or turn fetch off",
					    RTS_FETCH_TOOL, RTS_FETCH_TOOL_NAME);
		}
	size_t used = 0;
	for (size_t i = 0; i < c->n_tools; i++) {
		const struct rts_tool *t = &c->tools[i];
		cleanup_free char *pub = rts_xasprintf("host_%s", t->name);
		snprintf(at, sizeof(at), "tools[%zu]", i);
		if (!tool_fits(ctx, &used, at, pub, t->name, t->description, t->parameters))
			return false;
	}
	if (c->fetch.enabled) {
		cleanup_json json_object *params = rts_fetch_tool_parameters();
		if (!tool_fits(ctx, &used, "fetch", RTS_FETCH_TOOL_NAME, RTS_FETCH_TOOL_NAME, RTS_FETCH_TOOL_DESCRIPTION,
			       params))
			return false;
	}
	for (size_t i = 0; i < c->n_mcp; i++)
		for (size_t j = 0; j < c->mcp[i].n_tools; j++) {
			const struct rts_mcp_tool *t = &c->mcp[i].tools[j];
			cleanup_free char *pub = rts_xasprintf("mcp_%zu_%s", i, t->name);
			snprintf(at, sizeof(at), "mcp[%zu].tools[%zu]", i, j);
			if (!tool_fits(ctx, &used, at, pub, t->name, t->description, t->parameters))
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
	c->warm_spares = RTS_WARM_SPARES_DEFAULT;
	c->warm_spares_max = RTS_WARM_SPARES_CAP_DEFAULT;
	c->warm_spare_idle_ms = RTS_WARM_SPARE_IDLE_MS_DEFAULT;
	c->system_prompt = rts_xstrdup("You are a helpful assistant taking part in a group chat. Answer the "
				       "current speaker briefly and stay friendly.");
	c->time_zone = rts_xstrdup("UTC");
	rts_conf_rich_defaults(&c->rich);
	c->fetch = (struct rts_fetch_conf){.enabled = false, .max_bytes = RTS_FETCH_BYTES_DEFAULT,
					   .timeout_ms = RTS_FETCH_TIMEOUT_DEFAULT_MS,
					   .max_redirects = RTS_FETCH_REDIRECTS_DEFAULT};
	c->precheck = (struct rts_precheck){
		.timeout_ms = RTS_PRECHECK_TIMEOUT_MS_DEFAULT,
		.max_calls = RTS_PRECHECK_MAX_CALLS_DEFAULT,
		.limits = {.memory_mb = RTS_PRECHECK_MEMORY_MB_DEFAULT, .cpus = RTS_PRECHECK_CPUS_DEFAULT,
			   .pids = RTS_PRECHECK_PIDS_DEFAULT},
		.tool_names = RTS_TOOL_NAMES_TOOL,
	};
}

struct rts_config *rts_config_from_json(json_object *root, const char *path, char *err, size_t errlen)
{
	struct rts_config *c = rts_xcalloc(1, sizeof(*c));
	c->path = rts_xstrdup(path);
	set_defaults(c);
	struct rts_jerr e;
	if (rts_jspec_validate(root, &config_root, c, RTS_JV_OPERATOR, &e) < 0) {
		snprintf(err, errlen, "%s: %s: %s", path, e.path[0] ? e.path : "(top level)", e.text);
		rts_config_free(c);
		return NULL;
	}
	if (!c->initial_channels)
		c->initial_channels = rts_xcalloc(1, sizeof(char *));
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

static void precheck_free(struct rts_precheck *p)
{
	free(p->image);
	free(p->run_root);
	for (size_t i = 0; i < p->n_grants; i++) {
		struct rts_precheck_grant *g = &p->grants[i];
		free(g->channel);
		free(g->target);
		rts_strv_free(g->tiers);
		for (size_t j = 0; j < g->n_servers; j++) {
			struct rts_precheck_server *srv = &g->servers[j];
			free(srv->name);
			free(srv->url);
			rts_strv_free(srv->tools);
			rts_conf_key_source_free(&srv->token);
		}
		free(g->servers);
	}
	free(p->grants);
}

size_t rts_config_key_sources(const struct rts_config *cfg)
{
	size_t n = 1 + cfg->n_mcp;
	for (size_t g = 0; g < cfg->precheck.n_grants; g++)
		n += cfg->precheck.grants[g].n_servers;
	return n + (cfg->rich.enabled ? 1u : 0u);
}

const struct rts_key_source *rts_config_key_source(const struct rts_config *cfg, size_t i, char *label, size_t len)
{
	if (label && len)
		label[0] = '\0';
	if (i == 0) {
		if (label)
			snprintf(label, len, "apiKey");
		return &cfg->api_key;
	}
	i--;
	if (i < cfg->n_mcp) {
		if (label)
			snprintf(label, len, "mcp[%zu].apiKey", i);
		return cfg->mcp[i].has_api_key ? &cfg->mcp[i].api_key : NULL;
	}
	i -= cfg->n_mcp;
	for (size_t g = 0; g < cfg->precheck.n_grants; g++) {
		const struct rts_precheck_grant *gr = &cfg->precheck.grants[g];
		if (i < gr->n_servers) {
			if (label)
				snprintf(label, len, "precheck.grants[%zu].servers[%zu].token", g, i);
			return gr->servers[i].has_token ? &gr->servers[i].token : NULL;
		}
		i -= gr->n_servers;
	}
	if (i == 0 && cfg->rich.enabled) {
		if (label)
			snprintf(label, len, "rich.oauthToken");
		return &cfg->rich.oauth_token;
	}
	return NULL;
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
	free(c->uid_name);
	free(c->gid_name);
	free(c->accounts.broker);
	free(c->accounts.runner);
	free(c->provider);
	free(c->model);
	free(c->model_url);
	rts_conf_key_source_free(&c->api_key);
	free(c->system_prompt);
	free(c->time_zone);
	for (size_t i = 0; i < c->n_tools; i++) {
		free(c->tools[i].name);
		free(c->tools[i].description);
		if (c->tools[i].parameters)
			json_object_put(c->tools[i].parameters);
		rts_strv_free(c->tools[i].command);
		rts_strv_free(c->tools[i].write_paths);
	}
	free(c->tools);
	for (size_t i = 0; i < c->n_mcp; i++) {
		struct rts_mcp_server *s = &c->mcp[i];
		free(s->name);
		free(s->url);
		rts_conf_key_source_free(&s->api_key);
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
	rts_conf_rich_free(&c->rich);
	precheck_free(&c->precheck);
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
	if (c->fetch.enabled) {
		cleanup_json json_object *params = rts_fetch_tool_parameters();
		json_object_array_add(a, tool_entry(RTS_FETCH_TOOL_NAME, RTS_FETCH_TOOL_DESCRIPTION, params,
						    RTS_FETCH_TOOL_ROUTE));
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
