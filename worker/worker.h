/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-worker: limits shared by the worker's modules.
 *
 * The worker runs inside the turn's container and is untrusted by everyone else; these
 * bounds exist so that a hostile workspace, a confused model or a misbehaving broker can
 * neither grow a request past the broker's 256 KiB body limit nor make the worker hang or
 * balloon. "Encoded" sizes are bytes of JSON-escaped text (see rts_json_string_len()),
 * which is what counts against a request body. Rules quoted from the seed name it. */
#ifndef WORKER_WORKER_H
#define WORKER_WORKER_H

#include "common/limits.h"

#define WORKER_DEFAULT_BROKER "/run/broker/broker.sock"
#define WORKER_DEFAULT_WORKSPACE "/workspace"

/* The input, its bounds and its ranges (RTS_WORKER_INPUT_MAX, RTS_MODEL_CALLS_PER_TURN,
 * RTS_TOOL_CALLS_PER_RESPONSE, RTS_MAX_OUTPUT_TOKENS_*, RTS_TURN_TIMEOUT_MS_*), the broker's
 * call budget (RTS_BROKER_CALLS_PER_TURN) and its answer bound (RTS_BROKER_ANSWER_MAX) are
 * shared with the host: common/limits.h. */
#define WORKER_INPUT_TIMEOUT_MS 30000u /* from the input's first byte: runnerd writes it all and closes stdin */

/* Broker calls. The worker waits for an answer at least as long as brokerd may take to
 * give one, so a late answer is never mistaken for a lost broker. The last call of the
 * broker's budget is kept for a final model call, so running tools can never leave a turn
 * without an answer. */
#define WORKER_HTTP_HEADERS_MAX (16u * 1024u)
#define WORKER_CALL_TIMEOUT_MS 90000u /* one broker call, capped by the turn's remainder */
_Static_assert(WORKER_CALL_TIMEOUT_MS >= RTS_BROKER_REQUEST_DEADLINE_MS, "the worker must outwait brokerd");
/* Tool call arguments from the model: an MCP call nests them two levels down (params,
 * arguments), and brokerd parses that body with RTS_JSON_DEPTH_MAX. */
#define WORKER_ARGUMENTS_DEPTH (RTS_JSON_DEPTH_MAX - 2)

/* Loop bounds. limits.modelCalls and limits.toolCallsPerResponse may only lower
 * RTS_MODEL_CALLS_PER_TURN and RTS_TOOL_CALLS_PER_RESPONSE. Calls past the per-response
 * bound are answered with an error result; past WORKER_TOOL_CALLS_ECHO_MAX they are not
 * echoed one by one, the last echoed result says how many more there were (the broker lets
 * at most RTS_MODEL_TOOL_CALLS_MAX through). */
#define WORKER_TOOL_CALLS_ECHO_MAX 32u
#define WORKER_CALL_ID_MAX 64u	 /* [A-Za-z0-9_-]{1,64}; anything else is renamed */
_Static_assert(WORKER_TOOL_CALLS_ECHO_MAX <= RTS_MODEL_TOOL_CALLS_MAX, "brokerd must accept every echoed call");
_Static_assert(WORKER_CALL_ID_MAX <= RTS_MODEL_CALL_ID_MAX, "brokerd must accept every call id the worker sends");

/* Model request budget. Seed: "Model request context stays below 192 KiB". All sizes
 * below are JSON-encoded bytes as they appear in the request body. The operator's prompt
 * (RTS_SYSTEM_PROMPT_MAX) and the tools (RTS_TOOLS_BUDGET) are bounded by the config. */
#define WORKER_REQUEST_MAX (192u * 1024u)
_Static_assert(WORKER_REQUEST_MAX <= RTS_BROKER_BODY_MAX, "every /model request must fit brokerd's body limit");
#define WORKER_PREVIEW_MAX (4u * 1024u)	   /* seed: memory previews 4 KiB per scope */
#define WORKER_PREVIEW_VALUE_MAX 512u	   /* one note's value inside a preview */
#define WORKER_USER_TEXT_MAX (48u * 1024u) /* seed: current user context 48 KiB */
#define WORKER_TOOL_RESULT_MAX (16u * 1024u)   /* one tool result */
#define WORKER_GROUP_RESULTS_MAX (32u * 1024u) /* all results of tools run for one response */
#define WORKER_GROUP_ARGUMENTS_MAX (16u * 1024u)
#define WORKER_REFUSAL_MAX 256u		       /* a locally refused call's error result */
#define WORKER_ASSISTANT_TEXT_MAX (4u * 1024u) /* text beside tool calls */
#define WORKER_REPLY_MAX (32u * 1024u)
/* The reply is written as {"v":1,"reply":...}: encoded bytes are at least the raw ones. */
_Static_assert(WORKER_REPLY_MAX <= RTS_REPLY_MAX && WORKER_REPLY_MAX + 64u <= RTS_WORKER_OUTPUT_MAX,
	       "every reply the worker writes must pass runnerd");

/* What every request carries however much is dropped: the system message, the current
 * user message, the tools and the latest tool-call group. Input strings are bounded in raw
 * bytes (speaker fields, time zone and time); escaping can make a byte six. The fixed
 * allowances cover JSON punctuation, member names and the prompt's own wording. */
#define WORKER_ENCODED(raw) (6u * (raw))
#define WORKER_SYSTEM_WORST                                                                                     \
	(2048u + RTS_SYSTEM_PROMPT_MAX + 2u * WORKER_PREVIEW_MAX + WORKER_ENCODED(RTS_TIME_ZONE_MAX) +          \
	 WORKER_ENCODED(RTS_WORKER_NOW_MAX))
#define WORKER_USER_WORST (512u + WORKER_USER_TEXT_MAX + 2u * WORKER_ENCODED(RTS_SPEAKER_FIELD_MAX))
#define WORKER_GROUP_WORST                                                                                      \
	(64u + WORKER_ASSISTANT_TEXT_MAX + WORKER_GROUP_ARGUMENTS_MAX + WORKER_GROUP_RESULTS_MAX +              \
	 WORKER_TOOL_CALLS_ECHO_MAX * (66u + WORKER_CALL_ID_MAX + RTS_FUNCTION_NAME_MAX) +                       \
	 WORKER_TOOL_CALLS_ECHO_MAX * (47u + WORKER_CALL_ID_MAX + WORKER_REFUSAL_MAX))
_Static_assert(256u + WORKER_SYSTEM_WORST + WORKER_USER_WORST + RTS_TOOLS_BUDGET + WORKER_GROUP_WORST <
		       WORKER_REQUEST_MAX,
	       "the parts a request always carries must fit the 192 KiB budget");

/* Memory. Seed: "capped at 256 entries, 2,048 characters per value and 512 KiB total".
 * Entries count across all scopes of the channel (speakers and channel together);
 * characters are Unicode code points; the total is the serialised memory.json. */
#define WORKER_MEMORY_ENTRIES_MAX 256u
#define WORKER_MEMORY_VALUE_CHARS_MAX 2048u
#define WORKER_MEMORY_KEY_CHARS_MAX 128u
#define WORKER_MEMORY_BYTES_MAX (512u * 1024u)
#define WORKER_MEMORY_LIST_MAX (12u * 1024u) /* memory_get without a key */

/* History. Seed: "Up to ten settled user/assistant exchanges", "8 KiB of JSON-encoded text". */
#define WORKER_HISTORY_MAX 10u
#define WORKER_HISTORY_ENTRY_MAX (8u * 1024u)

/* The most messages a /model request holds: the system message, the history, the current
 * user message, and per model call one assistant message with its echoed tool results. */
_Static_assert(1u + 2u * WORKER_HISTORY_MAX + 1u + RTS_MODEL_CALLS_PER_TURN * (1u + WORKER_TOOL_CALLS_ECHO_MAX) <=
		       RTS_MODEL_MESSAGES_MAX,
	       "brokerd must accept every message list the worker sends");

/* Any file read from the guest-writable workspace. */
#define WORKER_FILE_READ_MAX (1024u * 1024u)

#endif
