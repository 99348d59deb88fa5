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
#define WORKER_CALL_TIMEOUT_MS 90000u	    /* one broker call, capped by the turn's remainder */
#define WORKER_TURN_TIMEOUT_MS 600000u	    /* when the input names no turnTimeoutMs */
#define WORKER_MODEL_CALLS_MAX 48u	    /* the broker's per-turn call budget */
#define WORKER_TOOL_CALLS_MAX 32u	    /* tool calls echoed back from one response */

/* Model request budget. Seed: "Model request context stays below 192 KiB". The fixed
 * parts below plus one worst-case tool-call group stay under it by construction; the
 * dropping of history and older groups covers the rest. */
#define WORKER_REQUEST_MAX (192u * 1024u)
#define WORKER_OPERATOR_PROMPT_MAX (16u * 1024u)
#define WORKER_PREVIEW_MAX (4u * 1024u)	       /* seed: memory previews 4 KiB per scope */
#define WORKER_USER_TEXT_MAX (48u * 1024u)     /* seed: current user context 48 KiB */
#define WORKER_TOOLS_BUDGET (32u * 1024u)      /* the request's whole "tools" array */
#define WORKER_TOOL_DESCRIPTION_MAX 1024u
#define WORKER_TOOL_RESULT_MAX (16u * 1024u)   /* one tool result */
#define WORKER_GROUP_RESULTS_MAX (32u * 1024u) /* all executed results of one response */
#define WORKER_GROUP_ARGUMENTS_MAX (16u * 1024u)
#define WORKER_ASSISTANT_TEXT_MAX (4u * 1024u) /* text beside tool calls */
#define WORKER_REPLY_MAX (32u * 1024u)

/* Memory. Seed: "capped at 256 entries, 2,048 characters per value and 512 KiB total". */
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
