/* SPDX-License-Identifier: Apache-2.0 */
/* Types shared by the pieces of roundtable-sandbox-brokerd.
 *
 * brokerd holds the real model and MCP credentials and the host tool commands. It never
 * trusts a byte that comes from a worker: every limit below bounds something a guest
 * controls (seed, "Threat model": request bodies, budgets, deadlines, upstream answers). */
#ifndef BROKERD_BROKERD_H
#define BROKERD_BROKERD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/ids.h"
#include "common/limits.h"
#include "common/proto.h"

/* Seed defaults ("Threat model"). The call budget (RTS_BROKER_CALLS_PER_TURN), the body
 * limit (RTS_BROKER_BODY_MAX), the upstream answer and tool output limit
 * (RTS_UPSTREAM_ANSWER_MAX), the request deadline (RTS_BROKER_REQUEST_DEADLINE_MS, accept to
 * answer, upstream call included) and the nesting accepted in any JSON we parse
 * (RTS_JSON_DEPTH_MAX) are the worker's and the config's too: common/limits.h. */
#define BROKERD_MAX_TURNS 64u		       /* bound turns at once, closing ones included */
#define BROKERD_CONNECTIONS_PER_TURN 16u       /* connections one listener serves at once */
#define BROKERD_HEADER_DEADLINE_MS 10000u      /* accept to end of the request header */
/* One upstream call (seed: "a 60-second upstream deadline"). Only the integration tests'
 * brokerd (tests/testbuild/Makemodule.am, never installed) lowers it, at compile time; no
 * config key or environment variable changes it. */
#ifdef BROKERD_TEST_UPSTREAM_TIMEOUT_MS
#define BROKERD_UPSTREAM_TIMEOUT_MS BROKERD_TEST_UPSTREAM_TIMEOUT_MS
#else
#define BROKERD_UPSTREAM_TIMEOUT_MS 60000u
#endif
#define BROKERD_KEY_MAX (16u * 1024u)	       /* bytes of a credential, and of key command output */
#define BROKERD_KEY_COMMAND_TIMEOUT_MS 10000u  /* apiKey {"command"} run time */
#define BROKERD_KILL_GRACE_MS 2000u	       /* SIGTERM to SIGKILL for tool processes */

/* The outcome of a broker call as the worker sees it: an HTTP status and a generic code
 * (HACKING.md, "Broker HTTP contract"). Nothing else about a failure reaches the worker. */
enum brokerd_result {
	BROKERD_OK = 0,
	BROKERD_BAD_REQUEST,
	BROKERD_UNAUTHORIZED,
	BROKERD_FORBIDDEN,
	BROKERD_NOT_FOUND,
	BROKERD_METHOD_NOT_ALLOWED,
	BROKERD_TOO_LARGE,
	BROKERD_BUSY,
	BROKERD_BUDGET_EXHAUSTED,
	BROKERD_UPSTREAM_ERROR,
	BROKERD_UPSTREAM_TIMEOUT,
	BROKERD_UNAVAILABLE,
	BROKERD_CONFLICT, /* rich mode: not now (a reply packet outside its turn, ...) */
	BROKERD_RESULT_MAX_,
};

/* The struct of type that holds the member at p. */
#define brokerd_entry(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* HTTP status of r (200 for BROKERD_OK; 500 for an out-of-range value, which is a bug). */
unsigned brokerd_result_status(enum brokerd_result r);
/* The generic error code of r ("bad_request", ...); "ok" for BROKERD_OK. Static string. */
const char *brokerd_result_code(enum brokerd_result r);

/* What a turn is bound to: set by runnerd's BROKER_BIND and never by a request body. The
 * identity handed to key commands and host tools comes only from here (seed: "Body fields
 * cannot change that identity"). */
struct brokerd_binding {
	char turn_id[RTS_TURN_ID_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char *channel;
	char *speaker_id;
	char *speaker_name;
	char *principal_id; /* "" when the speaker was admitted without one */
	uint64_t deadline_ms; /* CLOCK_MONOTONIC milliseconds when the turn ends */
};

/* When a blocking step (upstream call, child process) must give up: the turn closes, the
 * deadline passes, or the worker closes the connection the call came on (seed, "Allowed
 * host tools": the signal combines the request's deadline and closure with the turn's
 * cancellation). */
struct brokerd_cancel {
	int wake_fd;		    /* readable once the turn is closing; -1 when there is none */
	const atomic_bool *closing; /* NULL when there is none */
	uint64_t deadline_ms;	    /* CLOCK_MONOTONIC ms; the step fails with -ETIMEDOUT then */
	bool has_client;	    /* client_fd is the caller's connection */
	int client_fd;		    /* hung up (POLLHUP/POLLERR) -> cancelled; a half-close is not */
};

/* True once the turn behind c is closing or the caller's connection is gone. Never blocks. */
bool brokerd_cancel_closing(const struct brokerd_cancel *c);

struct brokerd_keyring;
struct brokerd_precheck;

/* One admitted call, as a route handler sees it. Everything is borrowed for the call. */
struct brokerd_call {
	const struct rts_config *cfg;
	const struct brokerd_binding *binding;
	const struct brokerd_precheck *precheck; /* a precheck run's grant (brokerd/precheck.h), else NULL */
	struct brokerd_keyring *keys; /* credentials this turn has used, for the reflection filter */
	const char *name;	      /* the tool or server name from the route, or NULL */
	const char *body;	      /* request body, body_len bytes (not NUL-terminated) */
	size_t body_len;
	struct brokerd_cancel cancel; /* turn closing, turn deadline and request deadline */
	/* Rich turns only (zero for sealed ones): the model credential the reflection filter
	 * must know (NULL: cfg->api_key); the MCP servers whose keys it reads (mcp_scoped:
	 * exactly the n_mcp_servers indexes into cfg->mcp, else every server); the upstream
	 * deadline (0: BROKERD_UPSTREAM_TIMEOUT_MS); whether an http:// upstream may be used
	 * (rich.allowHttpMcp). */
	const struct rts_key_source *model_key;
	bool mcp_scoped;
	const size_t *mcp_servers;
	size_t n_mcp_servers;
	uint32_t upstream_timeout_ms;
	bool allow_http;
	/* Set by the handler for the audit entry (brokerd/audit.h): the rule that decided (a
	 * static name; NULL: the route's default when allowed, else the result code), and
	 * whether the request reached an upstream or a tool process. */
	const char *rule;
	bool forwarded;
};

/* A route handler: on BROKERD_OK stores the JSON answer text in *answer (caller frees). */
typedef enum brokerd_result (*brokerd_handler_fn)(struct brokerd_call *call, char **answer);

/* The handlers, one per route kind (model.c, tool.c, mcp.c, fetch.c). */
enum brokerd_result brokerd_model_handle(struct brokerd_call *call, char **answer);
enum brokerd_result brokerd_tool_handle(struct brokerd_call *call, char **answer);
enum brokerd_result brokerd_mcp_handle(struct brokerd_call *call, char **answer);
enum brokerd_result brokerd_fetch_handle(struct brokerd_call *call, char **answer); /* fetch.h */

/* Parse a worker-supplied body strictly (rts_json_parse_strict(), depth RTS_JSON_DEPTH_MAX):
 * duplicate keys, invalid UTF-8, raw control characters, lone surrogates and excessive
 * depth are refused (issue 3). Returns 0 with *out (caller owns the reference), or -EINVAL
 * with *why static (nothing from buf). */
int brokerd_body_parse(const char *buf, size_t len, json_object **out, const char **why);

/* Hold a parsed document to its table (common/jspec.h: root, nothing stored, no flags).
 * Returns 0, or -EINVAL with *why "PATH TEXT" (the text alone at the document itself) in a
 * buffer of the calling thread's, valid until its next call, and *code (when code is not
 * NULL) what a check passed to rts_jfail_code(), else NULL. */
struct rts_jfield;
int brokerd_body_check(json_object *doc, const struct rts_jfield *root, const char **why, const char **code);

#endif
