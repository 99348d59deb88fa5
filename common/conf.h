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
	char *system_prompt;	  /* at most RTS_SYSTEM_PROMPT_MAX bytes encoded */
	char *time_zone;
	struct rts_tool *tools;
	size_t n_tools;
	struct rts_mcp_server *mcp;
	size_t n_mcp;
	char **initial_channels; /* NULL-terminated */
	char *ca_file;		 /* NULL: the system trust store */
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

/* Validate an already parsed document (used by rts_config_load and the unit tests). The
 * file name is only used in messages. Same result convention as rts_config_load. */
struct rts_config *rts_config_from_json(json_object *root, const char *path, char *err, size_t errlen);

void rts_config_free(struct rts_config *c);

/* The public tool list the worker sees: an array of {name, description, parameters,
 * route[, mcpTool]} with host tools as host_<name> (route /tools/<name>) and MCP tools as
 * mcp_<index>_<tool> (route /mcp/<server>). A loaded config's list fits
 * RTS_PUBLIC_TOOLS_BUDGET as the worker counts it (rts_tool_spec_cost()), so the worker
 * offers every tool. Caller owns the returned reference. */
json_object *rts_config_public_tools(const struct rts_config *c);

#endif
