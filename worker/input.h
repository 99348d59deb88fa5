/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's input: one JSON object on stdin (HACKING.md "Worker input"). */
#ifndef WORKER_INPUT_H
#define WORKER_INPUT_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One public tool the host offers (rts_config_public_tools()). Strings are borrowed from
 * the input document. */
struct worker_tool {
	const char *name;	 /* what the model calls it: host_<name> or mcp_<i>_<tool> */
	const char *description;
	json_object *parameters; /* JSON schema object (borrowed) */
	const char *route;	 /* /tools/<name> or /mcp/<server> */
	const char *mcp_tool;	 /* the server's own tool name; NULL for /tools/ routes */
};

struct worker_input {
	json_object *root; /* owns every borrowed pointer below */
	const char *turn;
	const char *speaker_id;
	const char *speaker_name;
	const char *text;
	uint32_t attachments;
	const char *system_prompt;
	const char *time_zone;
	const char *now;
	struct worker_tool *tools;
	size_t n_tools;
	bool start_fresh;
	unsigned model_calls;		 /* limits.modelCalls, 1..RTS_MODEL_CALLS_PER_TURN */
	unsigned tool_calls_per_response; /* limits.toolCallsPerResponse, 1..RTS_TOOL_CALLS_PER_RESPONSE */
	unsigned max_output_tokens;	 /* limits.maxOutputTokens, the config's range (RTS_MAX_OUTPUT_TOKENS_*) */
	uint32_t turn_timeout_ms;	 /* limits.turnTimeoutMs, optional (0: not given), RTS_TURN_TIMEOUT_MS_* */
};

/* Parse and validate the len bytes at buf (at most RTS_WORKER_INPUT_MAX). Every field of
 * HACKING.md's example is required and type- and range-checked against common/limits.h,
 * the same bounds the config loader and runnerd use (the limits may lower the seed's 12
 * model calls and 8 tool calls per response, never raise them); unknown keys are ignored
 * so the host can add fields without breaking older images. Returns 0 with *out (free with
 * worker_input_free()), or -EINVAL with a one-line reason for stderr in why (the key path
 * and the rule, never input text). */
int worker_input_parse(const char *buf, size_t len, struct worker_input **out, char *why, size_t whylen);

void worker_input_free(struct worker_input *in);

/* The offered public tool called name, or NULL. */
const struct worker_tool *worker_input_tool(const struct worker_input *in, const char *name);

#endif
