/* SPDX-License-Identifier: Apache-2.0 */
/* The Anthropic routes of a rich channel's broker (POST /anthropic/v1/messages and
 * /anthropic/v1/messages/count_tokens, each optionally with ?beta=true; DESIGN.md 8.5;
 * seed, "Pi isolation and continuity": the broker rebuilds model traffic as ordinary
 * text/base64-image/custom-tool blocks, fixes the model and output limit, preserves
 * supported thinking/effort but never above the host-judged level, and refuses native
 * server tools, remote media, remote schema references and unrelated account routes).
 *
 * Pure functions: the request rebuild, the headers the upstream gets, the answers rebuilt
 * for the worker, and the filter a streamed answer passes through. The I/O is in
 * brokerd/anthropic_call.c. */
#ifndef BROKERD_ANTHROPIC_H
#define BROKERD_ANTHROPIC_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "common/conf.h"

struct brokerd_keyring;

/* ---- the request ---- */

/* What a request is for, and what the host fixes about it. */
struct brokerd_anthropic_policy {
	bool count_tokens;	    /* /v1/messages/count_tokens */
	const char *model;	    /* the profile's model: every request uses it */
	uint32_t max_output_tokens; /* rich.maxOutputTokens: max_tokens never above it */
	enum rts_effort judged;	    /* the turn's host-judged level */
};

/* What the rebuild did, for the call's log line. */
struct brokerd_anthropic_rebuilt {
	json_object *body; /* the upstream body; caller owns */
	bool stream;	   /* the worker asked for server-sent events */
	bool effort_capped;  /* output_config.effort was above the judged level */
	bool budget_capped;  /* thinking.budget_tokens was above the level's budget */
	bool effort_added;   /* adaptive thinking without an effort got the judged one */
};

/* The thinking budget a level allows for budget-thinking models (tokens), at least 1024. */
uint32_t brokerd_anthropic_budget_cap(enum rts_effort level);

/* Validate a worker's parsed body (brokerd_body_parse()) and build the upstream body.
 * Accepted members, each held to its table and no others: model (replaced by the
 * profile's), max_tokens (messages: 1.., min(asked, max_output_tokens); absent: the cap),
 * messages (user: text, base64 image, tool_result of text and base64 images; assistant:
 * text, tool_use, thinking, redacted_thinking; every block may carry cache_control
 * {type:"ephemeral", ttl?:"5m"|"1h"}), system (a string or text blocks), tools (custom
 * tools: name [A-Za-z0-9_-]{1,128}, description, input_schema that passes
 * rts_schema_check(), cache_control, eager_input_streaming, type "custom"), tool_choice,
 * thinking ({type:"disabled"}, {type:"enabled", budget_tokens >= 1024, display?},
 * {type:"adaptive", display?}), output_config ({effort}), temperature, top_p, top_k,
 * stop_sequences, stream, metadata (dropped: the broker owns identity). count_tokens
 * forwards only model, messages, system, tools, tool_choice and thinking.
 * Effort: an effort above the judged level becomes the judged level ("max" ranks with
 * "xhigh"); a thinking budget above brokerd_anthropic_budget_cap() of the level becomes
 * the cap, and below max_tokens; adaptive thinking without an effort gets the judged level
 * when that is low or medium (the model's default is high).
 * Returns 0 with *out filled, or -EINVAL with *why (static or thread-local: the rule, no
 * request data) and *rule, a short word naming the rule for the log: "native_tool"
 * (a server tool or a server-tool block), "remote_media" (URL or file sources),
 * "remote_ref" (a schema reference that is not a local fragment), "shape" (anything
 * else). */
int brokerd_anthropic_request_build(json_object *req, const struct brokerd_anthropic_policy *p,
				    struct brokerd_anthropic_rebuilt *out, const char **why, const char **rule);

/* ---- headers ---- */

/* True when value names an anthropic-beta feature the broker forwards (prompt caching,
 * interleaved thinking, fine-grained tool streaming, the Claude Code and OAuth betas, the
 * long context window, ...): the value exactly, case-sensitive. Files, MCP connector, code
 * execution, computer use, web fetch and the like are never forwarded. */
bool brokerd_anthropic_beta_allowed(const char *value, size_t len);

/* True when v (len bytes) is an anthropic-version value: YYYY-MM-DD. */
bool brokerd_anthropic_version_ok(const char *v, size_t len);

/* The upstream credential header for token: an "sk-ant-api..." key goes as x-api-key,
 * anything else is an OAuth token and goes as Authorization: Bearer together with the
 * OAuth beta. Returns the header line (caller wipes and frees) and sets *oauth. */
char *brokerd_anthropic_auth_header(const char *token, bool *oauth);

/* ---- answers ---- */

/* The worker's answer to an upstream status that is not 2xx, rebuilt from scratch:
 * {"type":"error","error":{"type":T,"message":M}} with a fixed M per T (a context window
 * overflow keeps saying "prompt is too long", which Pi's overflow compaction looks for).
 * 400, 413, 429, 500 and 529 keep their status and type; anything else (401, 403, 404, a
 * redirect, ...) becomes 502 api_error. body (len bytes, may be NULL) is the upstream's.
 * Returns the text (caller frees) and sets *status. */
char *brokerd_anthropic_error_answer(long upstream_status, const char *body, size_t len, unsigned *status);

/* A non-streamed 2xx answer rebuilt for the worker from the Messages API's own members
 * (anthropic.c, "answers rebuilt"): count_tokens {"input_tokens": N} only; a message:
 * type, role, model, id, content (text, thinking, redacted_thinking and tool_use blocks;
 * a text block's citations dropped), stop_reason, stop_sequence and usage (token counts and
 * service tier), nothing else. Reflection: the concatenation of its strings in order, and
 * of the model's own strings in order, is checked as one text against keys (may be NULL),
 * so a key split across blocks or members is seen. Returns the text (caller frees), or
 * NULL when it is not such an answer or (*reflected set) it holds a key. */
char *brokerd_anthropic_answer_rebuild(json_object *ans, bool count_tokens, struct brokerd_keyring *keys,
				       bool *reflected);

/* ---- the streamed answer ---- */

/* Server-sent events from the upstream pass through this filter on their way to the
 * worker, one whole event at a time (brokerd/sse_stream.h splits them). Each event must be one
 * the Messages API streams (message_start, content_block_start with a text, thinking,
 * redacted_thinking or tool_use block, content_block_delta with a text, thinking,
 * signature or input_json delta, content_block_stop, message_delta, message_stop, ping,
 * error) with a JSON object whose "type" is the event's name; it is rebuilt from the
 * members the API defines for it (brokerd_anthropic_answer_rebuild() says which), every
 * other member dropped.
 *
 * Reflection (seed: bounded response streams reject obvious credential reflections across
 * chunk boundaries): every event is checked whole (raw and after JSON decoding) against
 * the turn's keys, and every upstream string the worker gets (ids, names, text, thinking,
 * signatures, tool input and its keys, stop sequences), in the order it gets them, is
 * checked as one running text across events, and so is the model's own text alone
 * (reflect.h, "a running text"): a key spelled out across many events, or split between
 * a block's text and the next block's tool name, a message id and the first text, a tool's
 * id and name, is seen when its last piece comes, and that event never reaches the worker.
 * So that the first pieces of a key the model spells out do not reach it either, an event
 * with the model's text (and every event after it, to keep the order) is held back until
 * the model's text after it is at least `window` bytes long (the longest form reflect.h
 * looks for: six bytes a key byte for \u escapes) or the message stops; an event without
 * and with nothing held before it (message_start, content_block_stop, ping) goes out at
 * once. So a key split with an identifier the API assigns (a message or tool call id, a
 * signature, which the model does not choose) as its first piece is caught at its second,
 * which never reaches the worker, while that identifier may have. */
struct brokerd_stream_filter;

/* Errors a filter reports. */
#define BROKERD_STREAM_BAD_EVENT (-EBADMSG) /* not an event of the Messages API */
#define BROKERD_STREAM_REFLECTED (-EACCES)  /* a credential of the turn */
#define BROKERD_STREAM_UPSTREAM_ERROR (-EPROTO) /* the upstream sent an error event */

/* A filter checking against keys (kept by reference; may be NULL: no reflection check)
 * that holds back window bytes of delta text. */
struct brokerd_stream_filter *brokerd_stream_filter_new(struct brokerd_keyring *keys, size_t window);
void brokerd_stream_filter_free(struct brokerd_stream_filter *f);

/* The window for keys: 6 * the longest key + 8, or 0 for none. */
size_t brokerd_stream_window(size_t longest_key);

/* One event from the splitter. Returns 0, or one of the errors above; after an error the
 * filter drops what it held and takes nothing more (brokerd_stream_filter_fail()). */
int brokerd_stream_filter_event(struct brokerd_stream_filter *f, const char *name, const char *data, size_t len);

/* The stream ended: release everything held. Returns 0, or BROKERD_STREAM_REFLECTED when
 * the running texts end in a key (an escape the stream cut off, read as it is); then
 * nothing was released and the caller fails the filter (brokerd_stream_filter_fail()). */
int brokerd_stream_filter_end(struct brokerd_stream_filter *f);

/* Give up: drop what is held and append an error event ({"type":"error","error":{"type":
 * T,"message":"upstream error"}}, T the upstream's error type when it sent one of the
 * API's, else api_error) after what was already released. */
void brokerd_stream_filter_fail(struct brokerd_stream_filter *f);

/* Bytes released for the worker and not yet taken (pointer and length), and taking n of
 * them. */
const char *brokerd_stream_filter_out(struct brokerd_stream_filter *f, size_t *len);
void brokerd_stream_filter_take(struct brokerd_stream_filter *f, size_t n);
/* Bytes released or held, not yet taken. */
size_t brokerd_stream_filter_pending(const struct brokerd_stream_filter *f);
/* The message_stop event went through. */
bool brokerd_stream_filter_stopped(const struct brokerd_stream_filter *f);
/* The upstream error event's type, when it sent one (static or NULL). */
const char *brokerd_stream_filter_error_type(const struct brokerd_stream_filter *f);

#endif
