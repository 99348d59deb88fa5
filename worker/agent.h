/* SPDX-License-Identifier: Apache-2.0 */
/* One sealed turn: a minimal Chat Completions tool loop against the broker. */
#ifndef WORKER_AGENT_H
#define WORKER_AGENT_H

#include "worker/input.h"

/* Run the turn described by in, talking to the broker at broker_path and keeping memory
 * and history under workspace/.sandbox. Returns 0 with *reply (newly allocated, at most
 * WORKER_REPLY_MAX encoded bytes), or a negative errno with *error_code set to a static
 * code for the output ("model_unavailable", "turn_timeout", "workspace_unavailable",
 * "context_overflow"). Diagnostics go to stderr, never payloads. */
int worker_agent_run(const struct worker_input *in, const char *broker_path, const char *workspace, char **reply,
		     const char **error_code);

/* The reply when the model-call budget runs out before a final answer. */
#define WORKER_OUT_OF_STEPS_REPLY "I ran out of steps for this turn before I could finish. Please try again, perhaps with a simpler request."

#endif
