/* SPDX-License-Identifier: Apache-2.0 */
/* The config's "rich" key (DESIGN.md 8.5; seed, "Host options and hooks"): its table,
 * defaults and the rules between it and the rest of the file. Keys, defaults and ranges are
 * DESIGN's; every bound is in common/limits.h. */
#include "config.h"

#include "common/conf.h"
#include "common/conf_int.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/tools.h"
#include "common/util.h"

static const char *const effort_names[] = {
	[RTS_EFFORT_LOW] = "low", [RTS_EFFORT_MEDIUM] = "medium", [RTS_EFFORT_HIGH] = "high",
	[RTS_EFFORT_XHIGH] = "xhigh", NULL};
static const char *const visibility_names[] = {[RTS_MEMORY_PRIVATE] = "private", [RTS_MEMORY_SHARED] = "shared",
					       NULL};

_Static_assert(sizeof(enum rts_effort) == sizeof(int) && sizeof(enum rts_memory_visibility) == sizeof(int),
	       "RTS_JS_INDEX stores an int");

const char *rts_effort_name(enum rts_effort e)
{
	return (unsigned)e <= RTS_EFFORT_XHIGH ? effort_names[e] : "medium";
}

int rts_effort_parse(const char *s, size_t len)
{
	for (int i = 0; effort_names[i]; i++)
		if (strlen(effort_names[i]) == len && memcmp(effort_names[i], s, len) == 0)
			return i;
	return -1;
}

const struct rts_rich_profile *rts_rich_profile_find(const struct rts_rich_conf *r, const char *name)
{
	for (size_t i = 0; r->enabled && i < r->n_profiles; i++)
		if (strcmp(r->profiles[i].name, name) == 0)
			return &r->profiles[i];
	return NULL;
}

#define RICH(m) offsetof(struct rts_rich_conf, m)
#define PROFILE(m) offsetof(struct rts_rich_profile, m)
#define UINT_FIELD(k, lo, hi, off)                                                                                     \
	{.key = (k), .types = RTS_JT_INT, .min = (lo), .max = (hi), .store = RTS_JS_UINT32, .at = (off)}

/* ---- profiles ---- */

static bool profile_key(struct rts_jctx *ctx, const char *key, void *entry)
{
	if (!rts_name_valid(key, RTS_NAME_MAX))
		return rts_jfail(ctx, "profile names must match [a-z][a-z0-9_]{0,47}");
	if (entry)
		((struct rts_rich_profile *)entry)->name = rts_xstrdup(key);
	return true;
}

static const struct rts_jfield name_item = {.types = RTS_JT_STRING, .min = 1, .max = RTS_NAME_MAX,
					    .check = rts_conf_name_check, .store = RTS_JS_STRDUP};

static const struct rts_jspec profile_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "model", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_RICH_MODEL_MAX,
		 .store = RTS_JS_STRDUP, .at = PROFILE(model),
		 .missing = "is required (the Anthropic model of this profile)"},
		{.key = "mcp", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_MAX_MCP_SERVERS,
		 .items = "server names", .each = &name_item, .store = RTS_JS_ARRAY, .at = PROFILE(mcp),
		 .count_at = PROFILE(n_mcp), .elem_size = sizeof(char *)},
		{.key = "tools", .types = RTS_JT_ARRAY, .flags = RTS_JF_COUNT, .max = RTS_MAX_TOOLS,
		 .items = "tool names", .each = &name_item, .store = RTS_JS_ARRAY, .at = PROFILE(tools),
		 .count_at = PROFILE(n_tools), .elem_size = sizeof(char *)},
		{.key = "prompt", .types = RTS_JT_STRING, .flags = RTS_JF_ENCODED, .max = RTS_RICH_PROMPT_MAX,
		 .store = RTS_JS_STRDUP, .at = PROFILE(prompt)},
		{0},
	},
};

/* ---- the other members ---- */

/* The Anthropic base URL: https, no query or fragment, no trailing slash (brokerd appends
 * /v1/messages). */
static bool upstream_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!rts_conf_https_url_check(ctx, v, base))
		return false;
	const char *u = json_object_get_string(v);
	if (strpbrk(u, "?#") || u[strlen(u) - 1] == '/')
		return rts_jfail(ctx, "must be a base URL such as \"https://api.anthropic.com\" (no query, "
				      "fragment or trailing '/')");
	return true;
}

/* A log driver or option name as Docker spells them. */
static bool docker_word_ok(const char *s)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return false;
	return true;
}

static bool log_driver_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return docker_word_ok(json_object_get_string(v)) || rts_jfail(ctx, "must be a Docker log driver name ([a-z0-9._-])");
}

static bool log_option_key(struct rts_jctx *ctx, const char *key, void *entry)
{
	if (strlen(key) > RTS_RICH_LOG_NAME_MAX || !docker_word_ok(key))
		return rts_jfail(ctx, "log option names must be Docker log option names ([a-z0-9._-], at most %u)",
				 RTS_RICH_LOG_NAME_MAX);
	if (entry)
		((struct rts_rich_log_option *)entry)->name = rts_xstrdup(key);
	return true;
}

/* A value goes into one docker argument "--log-opt NAME=VALUE": printable ASCII. */
static bool log_value_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return rts_jfail(ctx, "must be printable ASCII");
	return true;
}

static bool engine_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '_' || *p == '.'))
			return rts_jfail(ctx, "must be a name of letters, digits and . _ -");
	return true;
}

static const struct rts_jspec effort_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "default", .types = RTS_JT_STRING, .one_of = effort_names, .store = RTS_JS_INDEX,
		 .at = RICH(effort_default)},
		{.key = "judge", .types = RTS_JT_OBJECT, .store = RTS_JS_OBJECT, .at = 0,
		 .object = &(const struct rts_jspec){
			 .flags = RTS_JO_LIST_KEYS,
			 .fields = (const struct rts_jfield[]){
				 ARGV_FIELD("command", RTS_JF_REQUIRED, RICH(effort_judge), rts_conf_argv_check),
				 {0},
			 },
		 }},
		{0},
	},
};

static const struct rts_jspec memory_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		ARGV_FIELD("command", RTS_JF_REQUIRED, RICH(memory_command), rts_conf_argv_check),
		{.key = "visibility", .types = RTS_JT_STRING, .one_of = visibility_names, .store = RTS_JS_INDEX,
		 .at = RICH(memory_visibility)},
		{0},
	},
};

static const struct rts_jspec compaction_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		ARGV_FIELD("command", RTS_JF_REQUIRED, RICH(compaction_command), rts_conf_argv_check),
		{.key = "engine", .types = RTS_JT_STRING, .min = 1, .max = RTS_RICH_ENGINE_MAX, .check = engine_check,
		 .store = RTS_JS_STRDUP, .at = RICH(compaction_engine)},
		/* At most half of turnTimeoutMs: rts_conf_rich_check(). */
		UINT_FIELD("timeoutMs", 1, RTS_RICH_TIMEOUT_MS_MAX / 2, RICH(compaction_timeout_ms)),
		UINT_FIELD("maxRequestBytes", RTS_RICH_COMPACTION_REQUEST_MIN, RTS_RICH_BODY_MAX,
			   RICH(compaction_max_request)),
		{0},
	},
};

#define RICH_LIMITS(m) (RICH(limits) + offsetof(struct rts_limits, m))
static const struct rts_jspec limits_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		UINT_FIELD("memoryMb", RTS_RICH_MEMORY_MB_MIN, RTS_MEMORY_MB_MAX, RICH_LIMITS(memory_mb)),
		{.key = "cpus", .types = RTS_JT_NUMBER, .dmin = RTS_RICH_CPUS_MIN, .dmax = RTS_CPUS_MAX,
		 .store = RTS_JS_DOUBLE, .at = RICH_LIMITS(cpus)},
		UINT_FIELD("pids", RTS_RICH_PIDS_MIN, RTS_PIDS_MAX, RICH_LIMITS(pids)),
		UINT_FIELD("tmpMb", RTS_RICH_TMP_MB_MIN, RTS_RICH_TMP_MB_MAX, RICH(tmp_mb)),
		{0},
	},
};

static const struct rts_jspec log_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "driver", .types = RTS_JT_STRING, .min = 1, .max = RTS_RICH_LOG_NAME_MAX,
		 .check = log_driver_check, .store = RTS_JS_STRDUP, .at = RICH(log_driver)},
		{.key = "options", .types = RTS_JT_OBJECT, .flags = RTS_JF_COUNT, .max = RTS_RICH_LOG_OPTIONS_MAX,
		 .items = "options", .key_check = log_option_key,
		 .each = &(const struct rts_jfield){.types = RTS_JT_STRING, .max = RTS_RICH_LOG_VALUE_MAX,
						    .check = log_value_check, .store = RTS_JS_STRDUP,
						    .at = offsetof(struct rts_rich_log_option, value)},
		 .store = RTS_JS_ARRAY, .at = RICH(log_options), .count_at = RICH(n_log_options),
		 .elem_size = sizeof(struct rts_rich_log_option)},
		{0},
	},
};

/* The nested objects store relative to the rich struct itself (.at 0), so their members
 * keep flat names there. */
const struct rts_jspec rts_conf_rich_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "image", .types = RTS_JT_STRING, .min = 1, .max = RTS_IMAGE_MAX, .check = rts_conf_image_check,
		 .store = RTS_JS_STRDUP, .at = RICH(image)},
		{.key = "profiles", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT, .min = 1,
		 .max = RTS_RICH_PROFILES_MAX, .items = "profiles", .key_check = profile_key,
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &profile_spec,
						    .store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = RICH(profiles), .count_at = RICH(n_profiles),
		 .elem_size = sizeof(struct rts_rich_profile),
		 .missing = "is required (at least one profile: {\"NAME\": {\"model\": ...}})"},
		{.key = "oauthToken", .types = RTS_JT_OBJECT, .object = &rts_conf_key_source_spec, .store = RTS_JS_OBJECT,
		 .at = RICH(oauth_token), .what = KEY_SOURCE_WHAT},
		{.key = "upstream", .types = RTS_JT_STRING, .min = 1, .max = 2048, .check = upstream_check,
		 .store = RTS_JS_STRDUP, .at = RICH(upstream)},
		{.key = "effort", .types = RTS_JT_OBJECT, .object = &effort_spec, .store = RTS_JS_OBJECT, .at = 0},
		{.key = "memory", .types = RTS_JT_OBJECT, .object = &memory_spec, .store = RTS_JS_OBJECT, .at = 0},
		{.key = "compaction", .types = RTS_JT_OBJECT, .object = &compaction_spec, .store = RTS_JS_OBJECT,
		 .at = 0},
		{.key = "limits", .types = RTS_JT_OBJECT, .object = &limits_spec, .store = RTS_JS_OBJECT, .at = 0},
		{.key = "log", .types = RTS_JT_OBJECT, .object = &log_spec, .store = RTS_JS_OBJECT, .at = 0},
		UINT_FIELD("startTimeoutMs", RTS_RICH_TIMEOUT_MS_MIN, RTS_RICH_TIMEOUT_MS_MAX, RICH(start_timeout_ms)),
		UINT_FIELD("turnTimeoutMs", RTS_RICH_TIMEOUT_MS_MIN, RTS_RICH_TIMEOUT_MS_MAX, RICH(turn_timeout_ms)),
		UINT_FIELD("maxCalls", RTS_RICH_MAX_CALLS_MIN, RTS_RICH_MAX_CALLS_MAX, RICH(max_calls)),
		UINT_FIELD("maxOutputTokens", RTS_RICH_MAX_OUTPUT_TOKENS_MIN, RTS_RICH_MAX_OUTPUT_TOKENS_MAX,
			   RICH(max_output_tokens)),
		{.key = "timeZone", .types = RTS_JT_STRING, .min = 1, .max = RTS_TIME_ZONE_MAX,
		 .check = rts_conf_time_zone_check, .store = RTS_JS_STRDUP, .at = RICH(time_zone)},
		{.key = "allowHttpMcp", .types = RTS_JT_BOOL, .store = RTS_JS_BOOL, .at = RICH(allow_http_mcp)},
		{0},
	},
};

void rts_conf_rich_defaults(struct rts_rich_conf *r)
{
	*r = (struct rts_rich_conf){
		.image = rts_xstrdup("roundtable-sandbox-rich:local"),
		.oauth_token = {.kind = RTS_KEY_CREDENTIAL, .value = rts_xstrdup("anthropic-oauth-token")},
		.upstream = rts_xstrdup("https://api.anthropic.com"),
		.effort_default = RTS_EFFORT_MEDIUM,
		.memory_visibility = RTS_MEMORY_PRIVATE,
		.compaction_engine = rts_xstrdup("host-compactor"),
		.compaction_max_request = RTS_RICH_COMPACTION_REQUEST_DEFAULT,
		.limits = {.memory_mb = RTS_RICH_MEMORY_MB_DEFAULT, .cpus = RTS_RICH_CPUS_DEFAULT,
			   .pids = RTS_RICH_PIDS_DEFAULT},
		.tmp_mb = RTS_RICH_TMP_MB_DEFAULT,
		.log_driver = rts_xstrdup("journald"),
		.start_timeout_ms = RTS_RICH_START_TIMEOUT_MS_DEFAULT,
		.turn_timeout_ms = RTS_RICH_TURN_TIMEOUT_MS_DEFAULT,
		.max_calls = RTS_RICH_MAX_CALLS_DEFAULT,
		.max_output_tokens = RTS_RICH_MAX_OUTPUT_TOKENS_DEFAULT,
		.time_zone = rts_xstrdup("UTC"),
	};
}

/* The index of name in names (n of them), or n. */
static size_t index_of(char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return n;
}

/* Resolve a profile's list of names against the configured ones (whose names are at
 * stride bytes apart, starting at first): every name known, none twice. */
static bool resolve(struct rts_jctx *ctx, const char *profile, const char *member, char *const *list, size_t n,
		    const void *first, size_t stride, size_t count, const char *what, size_t **out)
{
	*out = rts_xcalloc(n + 1, sizeof(size_t));
	for (size_t i = 0; i < n; i++) {
		char at[RTS_NAME_MAX + 64];
		snprintf(at, sizeof(at), "rich.profiles.%s.%s[%zu]", profile, member, i);
		if (index_of(list, i, list[i]) < i)
			return rts_jfail_at(ctx, at, "names \"%s\" twice", list[i]);
		size_t k = 0;
		while (k < count && strcmp(*(char *const *)((const char *)first + k * stride), list[i]) != 0)
			k++;
		if (k == count)
			return rts_jfail_at(ctx, at, "names \"%s\", which is not in %s", list[i], what);
		(*out)[i] = k;
	}
	return true;
}

bool rts_conf_rich_check(struct rts_jctx *ctx, struct rts_config *c)
{
	struct rts_rich_conf *r = &c->rich;
	/* Paths below start at the document (rts_jfail_at() appends to the current path, which is
	 * the document itself for the config's own check). */
	for (size_t i = 0; i < r->n_profiles; i++) {
		struct rts_rich_profile *p = &r->profiles[i];
		if (!resolve(ctx, p->name, "mcp", p->mcp, p->n_mcp, c->mcp ? &c->mcp[0].name : NULL,
			     sizeof(struct rts_mcp_server), c->n_mcp, "mcp[]", &p->mcp_index) ||
		    !resolve(ctx, p->name, "tools", p->tools, p->n_tools, c->tools ? &c->tools[0].name : NULL,
			     sizeof(struct rts_tool), c->n_tools, "tools[]", &p->tool_index))
			return false;
	}
	/* Seed, "Compaction": the timeout may be at most half of turnTimeoutMs, so Pi's own
	 * summary keeps time to run; default the smaller of 120 s and a third of it. */
	if (r->compaction_command) {
		uint32_t half = r->turn_timeout_ms / 2;
		if (r->compaction_timeout_ms == 0) {
			uint32_t third = r->turn_timeout_ms / 3;
			r->compaction_timeout_ms =
				third < RTS_RICH_COMPACTION_TIMEOUT_MS_DEFAULT ? third : RTS_RICH_COMPACTION_TIMEOUT_MS_DEFAULT;
		} else if (r->compaction_timeout_ms > half) {
			return rts_jfail_at(ctx, "rich.compaction.timeoutMs",
					    "must be at most half of rich.turnTimeoutMs (%u ms), so Pi's own summary keeps "
					    "time to run",
					    half);
		}
	}
	return true;
}

void rts_conf_rich_free(struct rts_rich_conf *r)
{
	free(r->image);
	for (size_t i = 0; i < r->n_profiles; i++) {
		struct rts_rich_profile *p = &r->profiles[i];
		free(p->name);
		free(p->model);
		free(p->prompt);
		rts_strv_free(p->mcp);
		rts_strv_free(p->tools);
		free(p->mcp_index);
		free(p->tool_index);
	}
	free(r->profiles);
	rts_conf_key_source_free(&r->oauth_token);
	free(r->upstream);
	rts_strv_free(r->effort_judge);
	rts_strv_free(r->memory_command);
	rts_strv_free(r->compaction_command);
	free(r->compaction_engine);
	free(r->log_driver);
	for (size_t i = 0; i < r->n_log_options; i++) {
		free(r->log_options[i].name);
		free(r->log_options[i].value);
	}
	free(r->log_options);
	free(r->time_zone);
	*r = (struct rts_rich_conf){0};
}
