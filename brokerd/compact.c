/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <inttypes.h>

#include "brokerd/compact.h"
#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "brokerd/rich.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/strictjson.h"
#include "common/util.h"

/* ---- shapes ---- */

static const struct rts_jspec envelope_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "turnId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 64},
		{.key = "request", .types = RTS_JT_OBJECT},
		{.key = "report", .types = RTS_JT_OBJECT},
		{0},
	},
};
static const struct rts_jfield envelope_root = RTS_JSPEC_ROOT(&envelope_spec);

static const char *const reasons[] = {"threshold", "overflow", "manual", NULL};
static const struct rts_jfield message_item = {.types = RTS_JT_OBJECT};
static const struct rts_jfield path_item = {.types = RTS_JT_STRING, .max = 4096};
static const struct rts_jspec request_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "reason", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = reasons},
		{.key = "tokensBefore", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0, .max = INT64_MAX},
		{.key = "firstKeptEntryId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 256},
		{.key = "isSplitTurn", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
		{.key = "messagesToSummarize", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .each = &message_item},
		{.key = "turnPrefixMessages", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .each = &message_item},
		{.key = "keptMessages", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .each = &message_item},
		{.key = "previousSummary", .types = RTS_JT_STRING},
		{.key = "customInstructions", .types = RTS_JT_STRING},
		{.key = "readFiles", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .each = &path_item},
		{.key = "modifiedFiles", .types = RTS_JT_ARRAY, .flags = RTS_JF_REQUIRED, .each = &path_item},
		{0},
	},
};
static const struct rts_jfield request_root = RTS_JSPEC_ROOT(&request_spec);

static const struct rts_jspec answer_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "summary", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1},
		{.key = "firstKeptEntryId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 256},
		{.key = "tokensBefore", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0, .max = INT64_MAX},
		{.key = "estimatedTokensAfter", .types = RTS_JT_INT, .min = 0, .max = INT64_MAX},
		{.key = "details", .types = RTS_JT_OBJECT},
		{0},
	},
};
static const struct rts_jfield answer_root = RTS_JSPEC_ROOT(&answer_spec);

static bool word_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return rts_jfail(ctx, "must be letters, digits and . _ -");
	return true;
}

static bool reason_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	for (const char *p = json_object_get_string(v); *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == ' ' || *p == '_' || *p == '-'))
			return rts_jfail(ctx, "must be lower-case letters, digits, spaces and _ -");
	return true;
}

static const char *const events[] = {"compacted", "failed", "skipped", "fallback", NULL};
#define COUNT_FIELD(k) {.key = (k), .types = RTS_JT_INT, .min = 0, .max = INT64_MAX}
static const struct rts_jspec report_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "event", .types = RTS_JT_STRING, .one_of = events},
		{.key = "trigger", .types = RTS_JT_STRING, .one_of = reasons},
		{.key = "engine", .types = RTS_JT_STRING, .min = 1, .max = 64, .check = word_check},
		COUNT_FIELD("tokensBefore"),
		COUNT_FIELD("tokensAfter"),
		COUNT_FIELD("contextAfter"),
		COUNT_FIELD("nextCompactionAt"),
		{.key = "reason", .types = RTS_JT_STRING, .min = 1, .max = 128, .check = reason_check},
		{0},
	},
};
static const struct rts_jfield report_root = RTS_JSPEC_ROOT(&report_spec);

int brokerd_compact_envelope(json_object *doc, const char **turn_id, json_object **request, json_object **report,
			     const char **why)
{
	*turn_id = NULL;
	*request = *report = NULL;
	if (brokerd_body_check(doc, &envelope_root, why, NULL) < 0)
		return -EINVAL;
	*request = rts_json_get(doc, "request");
	*report = rts_json_get(doc, "report");
	if ((*request != NULL) == (*report != NULL)) {
		*why = "must hold exactly one of request and report";
		*request = *report = NULL;
		return -EINVAL;
	}
	*turn_id = rts_json_get_string(doc, "turnId");
	return 0;
}

int brokerd_compact_request_check(json_object *req, const char **why)
{
	return brokerd_body_check(req, &request_root, why, NULL);
}

/* The principal a Pi message is tagged private to (details.privateTo), or NULL. */
static const char *private_owner(json_object *m)
{
	const char *p = rts_json_get_string(rts_json_get(m, "details"), "privateTo");
	return p && p[0] ? p : NULL;
}

static bool id_in(json_object *ids, const char *id)
{
	size_t n = json_object_array_length(ids);
	for (size_t i = 0; id && i < n; i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(ids, i)), id) == 0)
			return true;
	return false;
}

/* A copy of the message list msgs without tagged tool results and their calls. */
static json_object *without_private(json_object *msgs, size_t *dropped)
{
	json_object *ids = json_object_new_array();
	size_t n = json_object_array_length(msgs);
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(msgs, i);
		const char *call = rts_json_get_string(m, "toolCallId");
		if (private_owner(m) && call)
			json_object_array_add(ids, json_object_new_string(call));
	}
	json_object *out = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(msgs, i);
		if (private_owner(m)) {
			(*dropped)++;
			continue;
		}
		json_object *content = rts_json_get(m, "content");
		if (json_object_array_length(ids) == 0 || !json_object_is_type(content, json_type_array)) {
			json_object_array_add(out, json_object_get(m));
			continue;
		}
		/* An assistant message: its calls of a dropped result go too. */
		json_object *copy = json_object_new_object();
		json_object_object_foreach(m, k, v)
		{
			if (strcmp(k, "content") != 0)
				json_object_object_add(copy, k, json_object_get(v));
		}
		json_object *blocks = json_object_new_array();
		size_t nb = json_object_array_length(content);
		for (size_t j = 0; j < nb; j++) {
			json_object *b = json_object_array_get_idx(content, j);
			if (id_in(ids, rts_json_get_string(b, "id")))
				(*dropped)++;
			else
				json_object_array_add(blocks, json_object_get(b));
		}
		json_object_object_add(copy, "content", blocks);
		json_object_array_add(out, copy);
	}
	json_object_put(ids);
	return out;
}

json_object *brokerd_compact_request_for_host(json_object *req, size_t *dropped)
{
	static const char *const lists[] = {"messagesToSummarize", "turnPrefixMessages", "keptMessages"};
	*dropped = 0;
	json_object *o = json_object_new_object();
	json_object_object_foreach(req, k, v)
	{
		bool list = false;
		for (size_t i = 0; i < RTS_ARRAY_SIZE(lists); i++)
			list = list || strcmp(k, lists[i]) == 0;
		json_object_object_add(o, k, list && json_object_is_type(v, json_type_array) ? without_private(v, dropped)
											      : json_object_get(v));
	}
	return o;
}

int brokerd_compact_answer_build(const char *out, size_t len, json_object *req, const char *engine, char **answer,
				 const char **why)
{
	*answer = NULL;
	size_t i = 0;
	while (i < len && (out[i] == ' ' || out[i] == '\n' || out[i] == '\r' || out[i] == '\t'))
		i++;
	if (i == len)
		return -ENODATA;
	cleanup_json json_object *doc = NULL;
	if (rts_json_parse(out, len, RTS_JSON_DEPTH_MAX, &doc, why) < 0)
		return -EINVAL;
	if (brokerd_body_check(doc, &answer_root, why, NULL) < 0)
		return -EINVAL;
	if (strcmp(rts_json_get_string(doc, "firstKeptEntryId"), rts_json_get_string(req, "firstKeptEntryId")) != 0) {
		*why = "firstKeptEntryId is not the request's";
		return -EINVAL;
	}
	cleanup_json json_object *o = json_object_new_object();
	static const char *const copied[] = {"summary", "firstKeptEntryId", "tokensBefore", "estimatedTokensAfter",
					     NULL};
	for (const char *const *k = copied; *k; k++) {
		json_object *v = rts_json_get(doc, *k);
		if (v)
			json_object_object_add(o, *k, json_object_get(v));
	}
	json_object *details = json_object_new_object();
	json_object *d = rts_json_get(doc, "details");
	if (d) {
		json_object_object_foreach(d, key, val)
		{
			if (strcmp(key, "engine") != 0)
				json_object_object_add(details, key, json_object_get(val));
		}
	}
	/* Seed: the broker sets the engine. */
	json_object_object_add(details, "engine", json_object_new_string(engine));
	json_object_object_add(o, "details", details);
	*answer = rts_json_dump(o);
	return 0;
}

int brokerd_compact_report_format(json_object *report, char *line, size_t len, const char **why)
{
	if (brokerd_body_check(report, &report_root, why, NULL) < 0)
		return -EINVAL;
	const char *event = rts_json_get_string(report, "event");
	if (!event)
		event = "compacted";
	static const char *const words[] = {"conversation compacted", "compaction failed",
					    "compaction skips the host compactor for Pi's summary past the ceiling",
					    "compaction falls back to Pi's summary"};
	size_t w = 0;
	while (strcmp(events[w], event) != 0)
		w++;
	int n = snprintf(line, len, "%s", words[w]);
	static const char *const members[] = {"trigger", "engine", "tokensBefore", "tokensAfter", "contextAfter",
					      "nextCompactionAt", "reason", NULL};
	for (const char *const *m = members; *m && n >= 0 && (size_t)n < len; m++) {
		json_object *v = rts_json_get(report, *m);
		if (!v)
			continue;
		if (json_object_is_type(v, json_type_int))
			n += snprintf(line + n, len - (size_t)n, " %s=%" PRId64, *m, json_object_get_int64(v));
		else
			n += snprintf(line + n, len - (size_t)n, " %s=%s", *m, json_object_get_string(v));
	}
	return 0;
}

/* ---- the route ---- */

static void fall_back(struct rich_conn *c, struct rich_answer *a, const char *reason)
{
	struct rich_turn *t = c->turn;
	rts_log_turn(LOG_WARNING, t->b.turn_id, c->ch->hash, "fallback", 0, "compaction falls back to Pi's summary: %s",
		     reason);
	c->rule = "compaction_fallback";
	a->status = 204;
}

static void compact_request(struct rich_conn *c, json_object *req, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn;
	const struct rts_rich_conf *rc = &ch->cfg->rich;
	const char *why = NULL;
	if (brokerd_compact_request_check(req, &why) < 0) {
		log_debug("turn %s: compaction request refused: %s", t->b.turn_id, why);
		c->rule = "compaction_request";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	const char *busy = NULL;
	pthread_mutex_lock(&ch->lock);
	if (!rc->compaction_command)
		busy = "no host compactor is configured";
	else if (t->compactions >= BROKERD_RICH_COMPACTIONS)
		busy = "the turn asked for three host compactions already";
	else if (t->compactor_running)
		busy = "another host compaction is still running";
	if (!busy) {
		t->compactions++;
		t->compactor_running = true;
	}
	pthread_mutex_unlock(&ch->lock);
	if (busy) {
		fall_back(c, a, busy);
		return;
	}
	/* Its own timeout, or half the turn's time left, whichever is shorter, so Pi's own
	 * summary keeps time to run. */
	uint64_t now = rts_now_ms();
	uint64_t left = t->b.deadline_ms > now ? t->b.deadline_ms - now : 0;
	uint64_t timeout = rc->compaction_timeout_ms < left / 2 ? rc->compaction_timeout_ms : left / 2;
	cleanup_json json_object *in = json_object_new_object();
	json_object_object_add(in, "channel", json_object_new_string(t->b.channel));
	/* Seed: the compactor sees the conversation without private exchanges. The worker
	 * already leaves them out (placeholders, still tagged); here brokerd drops whatever is
	 * still tagged, so a worker that forgot cannot hand them to the host. */
	size_t dropped = 0;
	json_object_object_add(in, "request", brokerd_compact_request_for_host(req, &dropped));
	if (dropped)
		rts_log_turn(LOG_DEBUG, t->b.turn_id, ch->hash, "compacting", 0,
			     "compaction request: %zu tagged private entries left out for the host compactor", dropped);
	cleanup_free char *input = rts_json_dump(in);
	struct brokerd_exec e = {
		.hook = rc->compaction_command,
		.input = input,
		.input_len = strlen(input),
		.max_output = BROKERD_RICH_COMPACTOR_OUTPUT_MAX,
		.cancel = {.wake_fd = t->wake_fd, .closing = &t->closing, .deadline_ms = now + timeout},
		.stderr_label = "compactor",
		.turn_id = t->b.turn_id,
	};
	struct brokerd_exec_result res = {0};
	rich_conn_quiet(c, true);
	c->forwarded = timeout > 0;
	int r = timeout > 0 ? brokerd_exec_run(&e, &res) : -ETIMEDOUT;
	rich_conn_quiet(c, false);
	uint64_t took = rts_now_ms() - now;
	char reason[160] = "";
	cleanup_free char *answer = NULL;
	if (r == -ETIMEDOUT)
		snprintf(reason, sizeof(reason), "the host compactor outlasted its timeout of %" PRIu64 " ms", timeout);
	else if (r == -ECANCELED)
		snprintf(reason, sizeof(reason), "the turn ended");
	else if (r == -EFBIG)
		snprintf(reason, sizeof(reason), "the host compactor printed more than %u bytes",
			 BROKERD_RICH_COMPACTOR_OUTPUT_MAX);
	else if (r < 0)
		snprintf(reason, sizeof(reason), "the host compactor could not run");
	else if (res.exit_status != 0)
		snprintf(reason, sizeof(reason), "the host compactor failed (status %d)", res.exit_status);
	else {
		int b = brokerd_compact_answer_build(res.output, res.len, req, rc->compaction_engine, &answer, &why);
		if (b == -ENODATA)
			snprintf(reason, sizeof(reason), "the host compactor answered nothing");
		else if (b < 0)
			snprintf(reason, sizeof(reason), "the host compactor's answer is out of shape (%s)", why);
		else if (brokerd_keyring_reflected(t->keys, answer, strlen(answer), NULL))
			snprintf(reason, sizeof(reason), "the host compactor's answer reflects a credential");
	}
	free(res.output);
	pthread_mutex_lock(&ch->lock);
	t->compactor_running = false;
	pthread_mutex_unlock(&ch->lock);
	if (reason[0]) {
		fall_back(c, a, reason);
		return;
	}
	rts_log_turn(LOG_INFO, t->b.turn_id, ch->hash, "compacted", took,
		     "conversation compacted by the host compactor %s (%s, tokensBefore %" PRId64 ")",
		     rc->compaction_engine, rts_json_get_string(req, "reason"),
		     json_object_get_int64(rts_json_get(req, "tokensBefore")));
	c->rule = "compaction_host";
	a->status = 200;
	a->body = steal_pointer(&answer);
	a->len = strlen(a->body);
	a->content_type = "application/json";
}

static void compact_report(struct rich_conn *c, json_object *report, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn;
	char line[512];
	const char *why = NULL;
	if (brokerd_compact_report_format(report, line, sizeof(line), &why) < 0) {
		log_debug("turn %s: compaction report refused: %s", t->b.turn_id, why);
		c->rule = "compaction_report";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	pthread_mutex_lock(&ch->lock);
	bool over = t->reports >= BROKERD_RICH_REPORTS;
	if (!over)
		t->reports++;
	pthread_mutex_unlock(&ch->lock);
	if (over) {
		rts_log_turn(LOG_DEBUG, t->b.turn_id, ch->hash, "refused", 0,
			     "compaction report refused: sixteen reports in this turn already");
		c->rule = "compaction_reports";
		brokerd_rich_answer_error(a, BROKERD_BUDGET_EXHAUSTED);
		return;
	}
	rts_log_turn(LOG_INFO, t->b.turn_id, ch->hash, "compaction", 0, "%s", line);
	c->rule = "compaction_report";
	a->status = 204;
}

void brokerd_rich_worker_compact(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_turn *t = c->turn;
	const char *why = NULL;
	cleanup_json json_object *doc = NULL;
	const char *turn_id = NULL;
	json_object *req = NULL, *report = NULL;
	if (rts_json_parse_strict(c->body, c->body_len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0 ||
	    brokerd_compact_envelope(doc, &turn_id, &req, &report, &why) < 0) {
		log_debug("turn %s: /worker/compact refused: %s", t->b.turn_id, why ? why : "malformed");
		c->rule = "body_json";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	if (strcmp(turn_id, t->b.turn_id) != 0) {
		c->rule = "compaction_turn_id";
		brokerd_rich_answer_error(a, BROKERD_CONFLICT);
		return;
	}
	if (req)
		compact_request(c, req, a);
	else
		compact_report(c, report, a);
}
