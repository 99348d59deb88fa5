/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-worker: limits shared by the worker's modules.
 *
 * The worker runs inside the turn's container and is untrusted by everyone else; these
 * bounds exist so that a hostile workspace, a confused model or a misbehaving broker can
 * neither grow a request past the broker's 256 KiB body limit nor make the worker hang or
 * balloon. "Encoded" sizes are bytes of JSON-escaped text (see worker_text_json_len()),
 * which is what counts against a request body. Rules quoted from the seed name it. */
#ifndef WORKER_WORKER_H
#define WORKER_WORKER_H

#define WORKER_DEFAULT_BROKER "/run/broker/broker.sock"
#define WORKER_DEFAULT_WORKSPACE "/workspace"

/* Input: HACKING.md "Worker input". */
#define WORKER_INPUT_MAX (512u * 1024u)
#define WORKER_INPUT_TIMEOUT_MS 30000u /* runnerd writes the input and closes stdin at once */
#define WORKER_JSON_DEPTH 64	       /* same depth the config (and so tool schemas) allows */

/* Broker calls. */
#define WORKER_HTTP_HEADERS_MAX (16u * 1024u)
#define WORKER_HTTP_BODY_MAX (1024u * 1024u)
#define WORKER_CALL_TIMEOUT_MS 90000u /* one broker call, capped by the turn's remainder */
#define WORKER_TURN_TIMEOUT_MS 600000u /* when the input names no turnTimeoutMs */
/* The broker's per-turn call budget (brokerd BROKERD_CALLS_PER_TURN; seed: 48 broker calls
 * per turn, refused ones included). The worker keeps the last one for a final model call,
 * so running tools can never leave a turn without an answer. */
#define WORKER_BROKER_CALLS_MAX 48u

/* Loop bounds. Seed: "The worker itself stops after 12 model calls and eight tools per
 * response"; limits.modelCalls and limits.toolCallsPerResponse may only lower them. Calls
 * past the per-response bound are answered with an error result; past
 * WORKER_TOOL_CALLS_ECHO_MAX they are not echoed one by one, the last echoed result says
 * how many more there were (the broker lets at most 64 through). */
#define WORKER_MODEL_CALLS_MAX 12u
#define WORKER_TOOL_CALLS_MAX 8u
#define WORKER_TOOL_CALLS_ECHO_MAX 32u
#define WORKER_CALL_ID_MAX 64u	 /* [A-Za-z0-9_-]{1,64}; anything else is renamed */
#define WORKER_TOOL_NAME_MAX 64u /* host_<48> or mcp_<i>_<48>, the Chat Completions limit */

/* Model request budget. Seed: "Model request context stays below 192 KiB". All sizes
 * below are JSON-encoded bytes as they appear in the request body. */
#define WORKER_REQUEST_MAX (192u * 1024u)
#define WORKER_OPERATOR_PROMPT_MAX (16u * 1024u)
#define WORKER_PREVIEW_MAX (4u * 1024u)	   /* seed: memory previews 4 KiB per scope */
#define WORKER_PREVIEW_VALUE_MAX 512u	   /* one note's value inside a preview */
#define WORKER_USER_TEXT_MAX (48u * 1024u) /* seed: current user context 48 KiB */
#define WORKER_TOOLS_BUDGET (32u * 1024u)  /* the "tools" array plus the names in the prompt */
#define WORKER_TOOL_DESCRIPTION_MAX 1024u
#define WORKER_TOOL_RESULT_MAX (16u * 1024u)   /* one tool result */
#define WORKER_GROUP_RESULTS_MAX (32u * 1024u) /* all results of tools run for one response */
#define WORKER_GROUP_ARGUMENTS_MAX (16u * 1024u)
#define WORKER_REFUSAL_MAX 256u		       /* a locally refused call's error result */
#define WORKER_ASSISTANT_TEXT_MAX (4u * 1024u) /* text beside tool calls */
#define WORKER_REPLY_MAX (32u * 1024u)

/* What every request carries however much is dropped: the system message, the current
 * user message, the tools and the latest tool-call group. Input strings are bounded in raw
 * bytes (speaker fields 256, time zone and time 64); escaping can make a byte six. The
 * fixed allowances cover JSON punctuation, member names and the prompt's own wording. */
#define WORKER_ENCODED(raw) (6u * (raw))
#define WORKER_SYSTEM_WORST                                                                                     \
	(2048u + WORKER_OPERATOR_PROMPT_MAX + 2u * WORKER_PREVIEW_MAX + 2u * WORKER_ENCODED(64u))
#define WORKER_USER_WORST (512u + WORKER_USER_TEXT_MAX + 2u * WORKER_ENCODED(256u))
#define WORKER_GROUP_WORST                                                                                      \
	(64u + WORKER_ASSISTANT_TEXT_MAX + WORKER_GROUP_ARGUMENTS_MAX + WORKER_GROUP_RESULTS_MAX +              \
	 WORKER_TOOL_CALLS_ECHO_MAX * (66u + WORKER_CALL_ID_MAX + WORKER_TOOL_NAME_MAX) +                       \
	 WORKER_TOOL_CALLS_ECHO_MAX * (47u + WORKER_CALL_ID_MAX + WORKER_REFUSAL_MAX))
_Static_assert(256u + WORKER_SYSTEM_WORST + WORKER_USER_WORST + WORKER_TOOLS_BUDGET + WORKER_GROUP_WORST <
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

/* Any file read from the guest-writable workspace. */
#define WORKER_FILE_READ_MAX (1024u * 1024u)

#endif
