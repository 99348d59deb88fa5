/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's stdin and stdout (HACKING.md "Worker input" and "Worker output"). Pure
 * functions, unit-tested in tests/unit/check_docker_args.c. */
#ifndef RUNNERD_WORKER_IO_H
#define RUNNERD_WORKER_IO_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/conf.h"
#include "common/limits.h"

/* The input's size (RTS_WORKER_INPUT_MAX), its limits (RTS_MODEL_CALLS_PER_TURN,
 * RTS_TOOL_CALLS_PER_RESPONSE, RTS_TURN_TIMEOUT_MS_*), the output's size
 * (RTS_WORKER_OUTPUT_MAX) and the longest error code logged (RTS_WORKER_ERROR_CODE_MAX)
 * are the worker's as well: common/limits.h. */

/* The per-turn fields of the worker input; all borrowed. The principal id is deliberately
 * absent: it never reaches the container (seed: principalId "never reaches the worker"). */
struct runnerd_worker_turn {
	const char *turn_id;
	const char *speaker_id;
	const char *speaker_name;
	const char *text;
	uint32_t attachments;
	bool start_fresh;
	uint64_t time_left_ms; /* until the turn deadline; sent as limits.turnTimeoutMs */
};

/* Build the worker input JSON for one turn: v, turn, speaker {id, name}, text, attachments,
 * systemPrompt, timeZone, now, tools (the caller's rts_config_public_tools(cfg) array, not
 * consumed), startFresh and limits {modelCalls, toolCallsPerResponse, maxOutputTokens,
 * turnTimeoutMs (time_left_ms clamped to RTS_TURN_TIMEOUT_MS_MIN..MAX, as the worker accepts)}.
 * Returns 0 with *out (heap, NUL-terminated, free()) and *out_len; -E2BIG when the
 * serialised object exceeds RTS_WORKER_INPUT_MAX bytes; -EINVAL for a string that is
 * not valid UTF-8. */
int runnerd_worker_input(const struct rts_config *cfg, json_object *public_tools, const struct runnerd_worker_turn *t,
			 const char *now, char **out, size_t *out_len);

enum runnerd_worker_result {
	RUNNERD_WORKER_REPLY,	  /* {"v":1,"reply":TEXT} with a usable reply */
	RUNNERD_WORKER_GAVE_UP,	  /* {"v":1,"error":CODE}: the worker gave up */
	RUNNERD_WORKER_MALFORMED, /* anything else */
	RUNNERD_WORKER_TOO_LONG,  /* a well-formed reply longer than RTS_REPLY_MAX bytes */
};

/* Parse the worker's stdout (len bytes, untrusted). Exactly {"v":1,"reply":string} is a
 * reply: *reply receives a heap copy (free()) of at most RTS_REPLY_MAX bytes, valid UTF-8
 * without NUL. A longer reply is refused as a whole (RUNNERD_WORKER_TOO_LONG) rather than
 * cut: a truncated answer could change its meaning. Exactly {"v":1,"error":string} gives
 * RUNNERD_WORKER_GAVE_UP; code (RTS_WORKER_ERROR_CODE_MAX + 1 bytes) receives the code when it
 * matches [a-z_]{1,32}, else "". Extra keys, another "v", other types, trailing data or
 * invalid JSON give RUNNERD_WORKER_MALFORMED. */
enum runnerd_worker_result runnerd_worker_output_parse(const char *buf, size_t len, char **reply,
							char code[RTS_WORKER_ERROR_CODE_MAX + 1]);

#endif
