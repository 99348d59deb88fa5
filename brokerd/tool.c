/* SPDX-License-Identifier: Apache-2.0 */
/* POST /tools/<name>: run an operator-configured host command (DESIGN.md section 5,
 * "tools[]"; seed, "Allowed host tools"). The body is the tool's arguments object; the
 * identity the command sees comes from the turn binding, never from the body. */
#include "config.h"

#include "brokerd/brokerd.h"
#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "common/strictjson.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

static const struct rts_tool *find_tool(const struct rts_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_tools; i++)
		if (strcmp(cfg->tools[i].name, name) == 0)
			return &cfg->tools[i];
	return NULL;
}

enum brokerd_result brokerd_tool_handle(struct brokerd_call *call, char **answer)
{
	const struct brokerd_binding *b = call->binding;
	const struct rts_tool *tool = find_tool(call->cfg, call->name);
	if (!tool)
		return BROKERD_NOT_FOUND; /* the route matched a configured name; cannot happen */

	const char *why = NULL;
	cleanup_json json_object *args = NULL;
	if (brokerd_body_parse(call->body, call->body_len, &args, &why) < 0 ||
	    !json_object_is_type(args, json_type_object)) {
		log_debug("turn %s: /tools body refused: %s", b->turn_id, why ? why : "not a JSON object");
		call->rule = why ? "body_json" : "tool_arguments";
		return BROKERD_BAD_REQUEST;
	}

	/* Before the tool runs: its output is checked against every credential of the turn,
	 * the model key included even when no model call came first. */
	enum brokerd_result primed = brokerd_keyring_prime_call(call);
	if (primed != BROKERD_OK)
		return primed;

	cleanup_json json_object *in = brokerd_binding_json(b);
	json_object_object_add(in, "tool", json_object_new_string(tool->name));
	json_object_object_add(in, "input", json_object_get(args));
	cleanup_free char *input = rts_json_dump(in);

	struct brokerd_exec e = {
		.tool = tool,
		.input = input,
		.input_len = strlen(input),
		.max_output = RTS_UPSTREAM_ANSWER_MAX,
		.cancel = call->cancel,
		.stderr_label = tool->name,
		.turn_id = b->turn_id,
	};
	uint64_t limit = rts_now_ms() + tool->timeout_ms;
	if (limit < e.cancel.deadline_ms)
		e.cancel.deadline_ms = limit;
	struct brokerd_exec_result res;
	uint64_t started = rts_now_ms();
	int r = brokerd_exec_run(&e, &res);
	uint64_t took = rts_now_ms() - started;
	call->forwarded = true; /* the command started (or was about to) with the arguments */
	if (r == -ECANCELED) {
		call->rule = "turn_closing";
		return BROKERD_UNAVAILABLE;
	}
	if (r == -ETIMEDOUT) {
		call->rule = "tool_timeout";
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_timeout", took,
			     "tool %s stopped at its deadline", tool->name);
		return BROKERD_UPSTREAM_TIMEOUT;
	}
	if (r < 0) {
		call->rule = r == -EFBIG ? "tool_output_too_large" : "tool_failed";
		if (r == -EFBIG)
			rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took,
				     "tool %s stopped: output larger than %u bytes", tool->name, RTS_UPSTREAM_ANSWER_MAX);
		else
			rts_log_errno(LOG_WARNING, r, "turn %s: tool %s: cannot run the command: %m", b->turn_id,
				      tool->name);
		return BROKERD_UPSTREAM_ERROR;
	}
	cleanup_free char *out = res.output;
	enum brokerd_result result = BROKERD_OK;
	const char *problem = NULL;
	if (res.exit_status != 0)
		problem = "exited with a failure status", call->rule = "tool_exit_status";
	else if (!rts_utf8_valid(out, res.len))
		problem = "output is not UTF-8 text", call->rule = "tool_output_utf8";
	else {
		/* Any output is checked as text (escapes of every kind are decoded there);
		 * output that is JSON text is also checked string by string after decoding, so
		 * a key encoded inside a \u-escaped string is caught too. */
		const char *ignored = NULL;
		cleanup_json json_object *decoded = NULL;
		if (rts_json_parse(out, res.len, RTS_JSON_DEPTH_MAX, &decoded, &ignored) < 0)
			decoded = NULL;
		if (brokerd_keyring_reflected(call->keys, out, res.len, decoded))
			problem = "output reflects a credential", call->rule = "credential_reflected";
	}
	if (problem) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took, "tool %s %s (status %d)",
			     tool->name, problem, res.exit_status);
		result = BROKERD_UPSTREAM_ERROR;
	} else {
		cleanup_json json_object *o = json_object_new_object();
		json_object_object_add(o, "result", json_object_new_string_len(out, (int)res.len));
		*answer = rts_json_dump(o);
	}
	return result;
}
