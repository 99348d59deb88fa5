/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration file (sandbox.json), shared by every program.
 *
 * Strict by design: an unknown key, a wrong type or a value out of range is an error that
 * names the key path (for example "limits.memoryMb" or "tools[1].command"), and start-up
 * stops. Keys and defaults follow DESIGN.md section 5 and the seed's sandbox() options. */
#ifndef RTS_CONFIG_H
#define RTS_CONFIG_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/ids.h"
#include "common/json.h"
#include "common/limits.h"

#ifndef RTS_SYSCONFDIR
#define RTS_SYSCONFDIR "/etc"
#endif
#define RTS_DEFAULT_CONFIG RTS_SYSCONFDIR "/roundtable-sandbox/sandbox.json"

/* Every range and size below is a constant of common/limits.h, shared with the programs
 * that use the value. */

enum rts_key_kind {
	RTS_KEY_CREDENTIAL, /* $CREDENTIALS_DIRECTORY/<value> */
	RTS_KEY_FILE,	    /* the file <value>, one trailing newline stripped */
	RTS_KEY_ENV,	    /* the environment variable <value> */
	RTS_KEY_COMMAND,    /* argv; gets the turn binding on stdin, prints the key */
};

struct rts_key_source {
	enum rts_key_kind kind;
	char *value; /* credential name, file path or variable name; NULL for COMMAND */
	char **argv; /* COMMAND only, NULL-terminated */
};

struct rts_tool {
	char *name;		 /* [a-z][a-z0-9_]{0,47}; the worker sees host_<name> */
	char *description;
	json_object *parameters; /* a JSON object (schema); owned reference */
	char **command;		 /* NULL-terminated argv, command[0] an absolute path */
	uint32_t timeout_ms;	 /* 1..600000, default 30000 */
	char **write_paths;	 /* NULL-terminated, possibly empty: the directories the tool's
				  * sandbox may write (absolute, normalised, not "/", distinct) */
	size_t n_write_paths;	 /* at most RTS_TOOL_WRITE_PATHS_MAX */
};

struct rts_mcp_tool {
	char *name;
	char *description;
	json_object *parameters;
};

struct rts_mcp_server {
	char *name; /* route /mcp/<name> */
	char *url;  /* https:// only */
	bool has_api_key;
	struct rts_key_source api_key;
	struct rts_mcp_tool *tools;
	size_t n_tools;
};

/* The opt-in host_fetch guest tool ("fetch" key; DESIGN.md section 8.2): brokerd fetches a
 * URL the model names with rts_fetch() (common/fetch.h) within these limits. */
struct rts_fetch_conf {
	bool enabled;		/* false (the key absent, or "enabled": false): no such tool */
	uint32_t max_bytes;	/* RTS_FETCH_BYTES_*: body on the wire and decoded, each */
	uint32_t timeout_ms;	/* RTS_FETCH_TIMEOUT_*: the whole fetch; the call's deadline may cut it */
	uint32_t max_redirects; /* RTS_FETCH_REDIRECTS_* */
};

struct rts_limits {
	uint32_t memory_mb; /* RTS_MEMORY_MB_*; swap equals memory (no extra swap) */
	double cpus;	    /* RTS_CPUS_* */
	uint32_t pids;	    /* RTS_PIDS_* */
};

/* An account per role (DESIGN.md 8.1, config key "accounts"): brokerd runs as broker,
 * runnerd as runner, statd as the account it is started as, turn containers as uid/gid
 * (the guest account). Names are resolved when the config is loaded. */
struct rts_accounts {
	bool present; /* "accounts" is in the config; absent: single-account mode */
	char *broker, *runner;
	uid_t broker_uid, runner_uid;
	gid_t broker_gid, runner_gid; /* their primary groups */
};

/* Rich mode ("rich" key; DESIGN.md 8.5; seed "Host options and hooks"). Absent: no rich
 * mode (enabled false, every other member zero). */
enum rts_effort {
	RTS_EFFORT_LOW,
	RTS_EFFORT_MEDIUM,
	RTS_EFFORT_HIGH,
	RTS_EFFORT_XHIGH,
};

enum rts_memory_visibility {
	RTS_MEMORY_PRIVATE, /* a nonempty prompt block is private to the turn's reader */
	RTS_MEMORY_SHARED,  /* declared party-wide facts: taints no reader record */
};

struct rts_rich_profile {
	char *name;	   /* the map key: [a-z][a-z0-9_]{0,47} */
	char *model;	   /* the Anthropic model every call of the profile uses */
	char *prompt;	   /* persona text for the worker, or NULL */
	char **mcp;	   /* names of mcp[] servers, NULL-terminated (config checks they exist) */
	size_t n_mcp;
	char **tools;	   /* names of tools[] host tools, NULL-terminated (checked likewise) */
	size_t n_tools;
	size_t *mcp_index; /* mcp[i] is cfg->mcp[mcp_index[i]]; set by the config check */
	size_t *tool_index; /* tools[i] is cfg->tools[tool_index[i]] */
};

struct rts_rich_log_option {
	char *name;  /* the map key: a docker --log-opt name */
	char *value;
};

struct rts_rich_conf {
	bool enabled;
	char *image;		       /* the rich worker image */
	struct rts_rich_profile *profiles;
	size_t n_profiles;
	struct rts_key_source oauth_token; /* read per model call, like apiKey */
	char *upstream;		       /* Anthropic base URL without a trailing slash */
	enum rts_effort effort_default; /* the level before any judgment */
	char **effort_judge;	       /* argv or NULL: gets {text, level}, prints a level */
	char **memory_command;	       /* argv or NULL: gets {channel, id, name, principalId} */
	enum rts_memory_visibility memory_visibility;
	char **compaction_command;     /* argv or NULL: the host compactor */
	char *compaction_engine;       /* recorded as details.engine */
	uint32_t compaction_timeout_ms; /* at most half of turn_timeout_ms */
	uint32_t compaction_max_request; /* bytes of a /worker/compact request */
	struct rts_limits limits;      /* the channel container */
	uint32_t tmp_mb;	       /* its /tmp */
	char *log_driver;	       /* docker --log-driver */
	struct rts_rich_log_option *log_options;
	size_t n_log_options;
	uint32_t start_timeout_ms;     /* RTS_RICH_TIMEOUT_MS_* */
	uint32_t turn_timeout_ms;
	uint32_t max_calls;	       /* credential-bearing calls per turn */
	uint32_t max_output_tokens;    /* per model call */
	char *time_zone;
	bool allow_http_mcp;	       /* http:// mcp[] URLs allowed (rich channels only) */
};

/* The profile called name, or NULL. */
const struct rts_rich_profile *rts_rich_profile_find(const struct rts_rich_conf *r, const char *name);

/* "low", "medium", "high", "xhigh" (static). */
const char *rts_effort_name(enum rts_effort e);
/* The level named s, or -1. */
int rts_effort_parse(const char *s, size_t len);
/* The precheck runner (DESIGN.md 8.3, seed: "Precheck scripts"). A grant names the MCP
 * servers a precheck script of a matching schedule may call; the first grant whose
 * channel, target and tiers match wins, and none matching leaves the script no way out. */
struct rts_precheck_server {
	char *name;  /* [a-z][a-z0-9_]{0,47}; route /mcp/<name> on the run's broker socket */
	char *url;   /* https:// Streamable HTTP endpoint, fixed */
	char **tools; /* NULL-terminated, [A-Za-z0-9_.-]{1,128}, unique */
	size_t n_tools;
	bool has_token;
	struct rts_key_source token; /* read by brokerd per call, sent as the bearer */
};

struct rts_precheck_grant {
	char *channel; /* NULL: any channel */
	char *target;  /* NULL: any target */
	bool has_tiers;
	char **tiers;  /* NULL-terminated; matched when has_tiers (a run without tier never) */
	struct rts_precheck_server *servers;
	size_t n_servers;
};

/* How the host's hold rules name an MCP tool, so approvals can be matched (seed:
 * toolName(server, tool), "the default is the tool's own name"). */
enum rts_tool_names {
	RTS_TOOL_NAMES_TOOL = 0,	/* "tool": the tool's own name */
	RTS_TOOL_NAMES_SERVER_TOOL = 1, /* "server_tool": <server>_<tool> */
};

struct rts_precheck {
	char *image;
	char *run_root;		/* runs live in <run_root>/precheck-<id>/; default: runRoot */
	uint32_t timeout_ms;	/* RTS_PRECHECK_TIMEOUT_MS_* */
	uint32_t max_calls;	/* 0..RTS_PRECHECK_MAX_CALLS_MAX */
	struct rts_limits limits;
	int tool_names;		/* enum rts_tool_names */
	struct rts_precheck_grant *grants;
	size_t n_grants;
};

struct rts_config {
	char *path; /* the file it came from */
	char *image;
	char *run_root;
	char *workspace_root;
	char *state_file;
	/* Single-account mode: the service account, checked against the daemon's own ids.
	 * With accounts: the guest account turn containers run as (required then). Written
	 * as a number or a name; uid_name/gid_name keep the name (NULL for a number). */
	bool has_uid, has_gid;
	uid_t uid;
	gid_t gid;
	char *uid_name, *gid_name;
	struct rts_accounts accounts;
	char *provider;
	char *model;
	char *model_url;
	struct rts_key_source api_key;
	uint32_t max_output_tokens; /* RTS_MAX_OUTPUT_TOKENS_* */
	struct rts_limits limits;
	uint32_t turn_timeout_ms; /* RTS_TURN_TIMEOUT_MS_* */
	uint32_t warm_spares;	  /* "warmSpares": 0 or 1 per sandboxed channel (DESIGN.md 8.4) */
	uint32_t warm_spares_max; /* "warmSparesMax": spares on the host at once */
	uint32_t warm_spare_idle_ms; /* "warmSpareIdleMs": a channel's spare goes after this idle */
	char *system_prompt;	  /* at most RTS_SYSTEM_PROMPT_MAX bytes encoded */
	char *time_zone;
	struct rts_tool *tools;
	size_t n_tools;
	struct rts_mcp_server *mcp;
	size_t n_mcp;
	struct rts_fetch_conf fetch;
	char **initial_channels; /* NULL-terminated */
	char *ca_file;		 /* NULL: the system trust store */
	struct rts_rich_conf rich; /* rich.enabled false: no rich mode */
	bool has_precheck;	 /* "precheck" is present: the precheck runner is on */
	struct rts_precheck precheck;
	char installation_id[RTS_INSTALLATION_ID_LEN + 1];
};

/* Load and validate the config at path. Returns a new config (free with
 * rts_config_free), or NULL with a one-line message in err that names the file and the key
 * path and says what is expected. */
struct rts_config *rts_config_load(const char *path, char *err, size_t errlen);

/* Read the config file at path as rts_config_load() does, without judging what it says:
 * strict JSON (HACKING.md "JSON strictness"), at most RTS_CONFIG_MAX_BYTES, nested at most
 * RTS_JSON_DEPTH_MAX. doctor uses it to tell a syntax error from a broken rule. Returns
 * what rts_json_read_file_strict() returns. */
static inline int rts_config_read_json(const char *path, json_object **out, char *err, size_t errlen)
{
	return rts_json_read_file_strict(path, RTS_CONFIG_MAX_BYTES, RTS_JSON_DEPTH_MAX, out, err, errlen);
}

/* Every key source of a config, numbered in a fixed order so that another process with the
 * same config (brokerd's launcher) names the same source by the same number: 0 apiKey,
 * 1..n_mcp mcp[i].apiKey, then precheck.grants[g].servers[s].token in order, then
 * rich.oauthToken when rich mode is configured. A slot whose
 * key is not configured gives NULL. label (len bytes, may be NULL) receives the key path
 * for messages. */
size_t rts_config_key_sources(const struct rts_config *cfg);
const struct rts_key_source *rts_config_key_source(const struct rts_config *cfg, size_t i, char *label, size_t len);

/* Validate an already parsed document (used by rts_config_load and the unit tests). The
 * file name is only used in messages. Same result convention as rts_config_load. */
struct rts_config *rts_config_from_json(json_object *root, const char *path, char *err, size_t errlen);

void rts_config_free(struct rts_config *c);

/* The public tool list the worker sees: an array of {name, description, parameters,
 * route[, mcpTool]} with host tools as host_<name> (route /tools/<name>), then host_fetch
 * (route /tools/fetch) when fetch.enabled, then MCP tools as mcp_<index>_<tool> (route
 * /mcp/<server>). A loaded config's list fits
 * RTS_PUBLIC_TOOLS_BUDGET as the worker counts it (rts_tool_spec_cost()), so the worker
 * offers every tool. Caller owns the returned reference. */
json_object *rts_config_public_tools(const struct rts_config *c);

#endif
