/* SPDX-License-Identifier: Apache-2.0 */
/* A rich turn from admission to hand-out: the turn input statd built (checked again here:
 * brokerd trusts no payload it did not build), the host hooks (effort judge, memory
 * command), and what the worker gets on /worker/next (rich-design.md section 3). */
#include "config.h"

#include <sys/eventfd.h>

#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/strictjson.h"
#include "common/util.h"

/* ---- the capability rule (seed, "Worker capability handshake") ---- */

bool brokerd_rich_caps_required(bool private_memory, bool private_history, bool private_tool)
{
	/* Merely configuring tools requires nothing: only a private prompt block, retained
	 * private history, or a tool that actually returned privateTo. */
	return private_memory || private_history || private_tool;
}

bool brokerd_rich_caps_enough(uint8_t caps)
{
	const uint8_t both = RTS_RICH_CAP_PRIVATE_TO | RTS_RICH_CAP_READER_RECORDS;
	return (caps & both) == both;
}

/* ---- turns ---- */

struct rich_turn *brokerd_rich_turn_new(struct rich_channel *ch, const struct brokerd_binding *b, int input_fd)
{
	struct rich_turn *t = rts_xcalloc(1, sizeof(*t));
	t->b = *b;
	t->b.channel = rts_xstrdup(b->channel);
	t->b.speaker_id = rts_xstrdup(b->speaker_id);
	t->b.speaker_name = rts_xstrdup(b->speaker_name);
	t->b.principal_id = rts_xstrdup(b->principal_id);
	t->keys = brokerd_keyring_new();
	t->admitted_ms = rts_now_ms();
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0)
		fatal_f("eventfd: %s", strerror(errno));
	atomic_init(&t->closing, false);
	t->input_fd = input_fd;
	t->state = RICH_TURN_ADMITTING;
	t->effort = ch->last_effort;
	t->reply_fd = -1;
	return t;
}

void brokerd_rich_turn_free(struct rich_turn *t)
{
	if (!t)
		return;
	free(t->b.channel);
	free(t->b.speaker_id);
	free(t->b.speaker_name);
	free(t->b.principal_id);
	brokerd_keyring_free(t->keys);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	if (t->reply_fd >= 0)
		close(t->reply_fd);
	if (t->input)
		json_object_put(t->input);
	if (t->input_fd >= 0)
		close(t->input_fd);
	free(t->handout);
	free(t);
}

/* ---- hooks ---- */

static struct brokerd_cancel turn_cancel(struct rich_turn *t)
{
	return (struct brokerd_cancel){.wake_fd = t->wake_fd, .closing = &t->closing, .deadline_ms = t->b.deadline_ms};
}

/* Run a host hook with input (JSON) and return its stdout (caller frees) or NULL. */
static char *run_hook(struct rich_turn *t, char *const *argv, json_object *input, const char *label, size_t *len)
{
	cleanup_free char *text = rts_json_dump(input);
	struct brokerd_exec e = {
		.hook = argv,
		.input = text,
		.input_len = strlen(text),
		.max_output = BROKERD_RICH_HOOK_OUTPUT_MAX,
		.cancel = turn_cancel(t),
		.stderr_label = label,
		.turn_id = t->b.turn_id,
	};
	uint64_t limit = rts_now_ms() + BROKERD_RICH_HOOK_TIMEOUT_MS;
	if (limit < e.cancel.deadline_ms)
		e.cancel.deadline_ms = limit;
	struct brokerd_exec_result res;
	int r = brokerd_exec_run(&e, &res);
	if (r < 0) {
		if (r != -ECANCELED)
			rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "hook_failed", 0,
				     "rich %s command %s", label,
				     r == -ETIMEDOUT ? "timed out" : r == -EFBIG ? "printed too much" : "could not run");
		return NULL;
	}
	if (res.exit_status != 0) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "hook_failed", 0,
			     "rich %s command exited with status %d", label, res.exit_status);
		free(res.output);
		return NULL;
	}
	*len = res.len;
	return res.output;
}

/* Seed: effort.judge(text, {level}) picks low, medium, high or xhigh; the previous choice
 * is kept for the next judgment, and stays when the judge has no usable answer. */
static enum rts_effort judge(struct rich_channel *ch, struct rich_turn *t, enum rts_effort previous)
{
	const struct rts_rich_conf *rc = &ch->cfg->rich;
	if (!rc->effort_judge)
		return rc->effort_default;
	cleanup_json json_object *in = json_object_new_object();
	json_object_object_add(in, "text", json_object_get(rts_json_get(t->input, "text")));
	json_object_object_add(in, "level", json_object_new_string(rts_effort_name(previous)));
	size_t len = 0;
	cleanup_free char *out = run_hook(t, rc->effort_judge, in, "effort judge", &len);
	if (!out)
		return previous;
	while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ' || out[len - 1] == '\r'))
		len--;
	int level = rts_effort_parse(out, len);
	if (level < 0) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "hook_failed", 0,
			     "rich effort judge printed no level (low, medium, high or xhigh); keeping %s",
			     rts_effort_name(previous));
		return previous;
	}
	return (enum rts_effort)level;
}

/* Seed: memory.promptBlock(channel, id, name): at most 100,000 characters. */
static char *memory_block(struct rich_channel *ch, struct rich_turn *t)
{
	const struct rts_rich_conf *rc = &ch->cfg->rich;
	if (!rc->memory_command)
		return NULL;
	cleanup_json json_object *in = json_object_new_object();
	json_object_object_add(in, "channel", json_object_new_string(t->b.channel));
	json_object_object_add(in, "id", json_object_new_string(t->b.speaker_id));
	json_object_object_add(in, "name", json_object_new_string(t->b.speaker_name));
	json_object_object_add(in, "principalId",
			       t->b.principal_id[0] ? json_object_new_string(t->b.principal_id) : NULL);
	size_t len = 0;
	char *out = run_hook(t, rc->memory_command, in, "memory", &len);
	if (!out)
		return NULL;
	if (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	const char *problem = NULL;
	if (!rts_utf8_valid(out, len))
		problem = "is not UTF-8 text";
	else if (brokerd_rich_utf8_chars(out, len) > RTS_RICH_TEXT_CHARS_MAX)
		problem = "is longer than 100,000 characters";
	else if (brokerd_keyring_reflected(t->keys, out, len, NULL))
		problem = "reflects a credential";
	if (problem) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "hook_failed", 0,
			     "rich memory block %s: the turn goes on without it", problem);
		free(out);
		return NULL;
	}
	if (len == 0) {
		free(out);
		return NULL;
	}
	return out;
}

static json_object *tool_entry(const char *name, const char *description, json_object *parameters, const char *route)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "description", json_object_new_string(description));
	json_object_object_add(o, "parameters", json_object_get(parameters));
	json_object_object_add(o, "route", json_object_new_string(route));
	return o;
}

/* The profile's host tools and MCP servers' tools, as the sealed worker gets its list
 * (host_<name>, mcp_<i>_<tool> with i the server's place in the profile). */
static json_object *profile_tools(const struct rts_config *cfg, const struct rts_rich_profile *p)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < p->n_tools; i++) {
		const struct rts_tool *t = &cfg->tools[p->tool_index[i]];
		cleanup_free char *name = rts_xasprintf("host_%s", t->name);
		cleanup_free char *route = rts_xasprintf("/tools/%s", t->name);
		json_object_array_add(a, tool_entry(name, t->description, t->parameters, route));
	}
	for (size_t i = 0; i < p->n_mcp; i++) {
		const struct rts_mcp_server *s = &cfg->mcp[p->mcp_index[i]];
		cleanup_free char *route = rts_xasprintf("/mcp/%s", s->name);
		for (size_t j = 0; j < s->n_tools; j++) {
			cleanup_free char *name = rts_xasprintf("mcp_%zu_%s", i, s->tools[j].name);
			json_object *e = tool_entry(name, s->tools[j].description, s->tools[j].parameters, route);
			json_object_object_add(e, "mcpTool", json_object_new_string(s->tools[j].name));
			json_object_array_add(a, e);
		}
	}
	return a;
}

/* What /worker/next answers: statd's input with the bound speaker, and what brokerd owns. */
static char *build_handout(struct rich_channel *ch, struct rich_turn *t, const char *memory, size_t *len)
{
	const struct rts_config *cfg = ch->cfg;
	const struct rts_rich_profile *p = ch->profile;
	json_object *in = t->input;
	cleanup_json json_object *o = json_object_new_object();
	static const char *const copied[] = {"v", "turnId", "text", "images", "attachments", "timeZone", "now",
					     "startFresh", NULL};
	for (const char *const *k = copied; *k; k++) {
		json_object *v = rts_json_get(in, *k);
		if (v)
			json_object_object_add(o, *k, json_object_get(v));
		else if (strcmp(*k, "images") == 0 || strcmp(*k, "attachments") == 0)
			json_object_object_add(o, *k, json_object_new_array());
	}
	json_object *sp = json_object_new_object();
	json_object_object_add(sp, "id", json_object_new_string(t->b.speaker_id));
	json_object_object_add(sp, "name", json_object_new_string(t->b.speaker_name));
	/* The reader of private-history projection (seed, "Principal migration"). */
	json_object_object_add(sp, "principalId", json_object_new_string(t->b.principal_id));
	json_object_object_add(o, "speaker", sp);
	json_object_object_add(o, "model", json_object_new_string(p->model));
	json_object_object_add(o, "maxOutputTokens", json_object_new_int64(cfg->rich.max_output_tokens));
	json_object_object_add(o, "prompt", p->prompt ? json_object_new_string(p->prompt) : NULL);
	json_object_object_add(o, "effort", json_object_new_string(rts_effort_name(t->effort)));
	json_object *mem = NULL;
	if (memory) {
		mem = json_object_new_object();
		json_object_object_add(mem, "text", json_object_new_string(memory));
		json_object_object_add(mem, "visibility", json_object_new_string(cfg->rich.memory_visibility ==
											 RTS_MEMORY_SHARED
										 ? "shared"
										 : "private"));
	}
	json_object_object_add(o, "memory", mem);
	json_object_object_add(o, "tools", profile_tools(cfg, p));
	json_object_object_add(o, "requireCapabilities", json_object_new_boolean(t->require_caps));
	json_object *limits = json_object_new_object();
	uint64_t now = rts_now_ms();
	json_object_object_add(limits, "maxCalls", json_object_new_int64(cfg->rich.max_calls));
	json_object_object_add(limits, "turnTimeoutMs",
			       json_object_new_int64(t->b.deadline_ms > now ? (int64_t)(t->b.deadline_ms - now) : 0));
	json_object_object_add(o, "limits", limits);
	char *text = rts_json_dump(o);
	*len = strlen(text);
	return text;
}

/* statd's turn input: strict JSON within RTS_RICH_TURN_INPUT_MAX (the seals and the size
 * were checked when the turn came), held to brokerd_rich_input_check(). */
static int read_input(struct rich_turn *t, const char **why)
{
	const void *data = NULL;
	size_t len = 0;
	int r = rts_memfd_map(t->input_fd, RTS_RICH_TURN_INPUT_MAX, &data, &len);
	close(steal_fd(&t->input_fd));
	if (r < 0) {
		*why = "cannot map it";
		return r;
	}
	json_object *in = NULL;
	r = rts_json_parse_strict(data, len, RTS_JSON_DEPTH_MAX, &in, why);
	rts_memfd_unmap(data, len);
	if (r < 0)
		return r;
	r = brokerd_rich_input_check(in, &t->b, why);
	if (r < 0) {
		json_object_put(in);
		return r;
	}
	t->input = in;
	return 0;
}

static void *admit_thread(void *arg)
{
	struct rich_channel *ch = arg;
	pthread_mutex_lock(&ch->lock);
	struct rich_turn *t = ch->turn;
	enum rts_effort previous = ch->last_effort;
	pthread_mutex_unlock(&ch->lock);

	const char *why = NULL;
	if (read_input(t, &why) < 0) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "error", 0, "rich turn input refused: %s",
			     why ? why : "invalid");
		pthread_mutex_lock(&ch->lock);
		snprintf(t->cause_buf, sizeof(t->cause_buf), "its input was refused: %s", why ? why : "invalid");
		brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR, t->cause_buf, -1);
		brokerd_rich_turn_unuse_locked(ch, t);
		pthread_mutex_unlock(&ch->lock);
		return NULL;
	}

	/* The turn's credentials first, so the memory block is checked against them too. A
	 * missing OAuth token is not fatal here: every model call reads it again and fails
	 * closed on its own. */
	struct brokerd_cancel cancel = turn_cancel(t);
	(void)brokerd_keyring_prime_scoped(t->keys, ch->cfg, &ch->cfg->rich.oauth_token, true, ch->profile->mcp_index,
					   ch->profile->n_mcp, &t->b, &cancel);
	enum rts_effort level = judge(ch, t, previous);
	char *memory = memory_block(ch, t);
	bool private_memory = memory && ch->cfg->rich.memory_visibility == RTS_MEMORY_PRIVATE;

	pthread_mutex_lock(&ch->lock);
	t->effort = level;
	ch->last_effort = level;
	t->private_memory = private_memory;
	t->require_caps = brokerd_rich_caps_required(private_memory, ch->private_history, false);
	pthread_mutex_unlock(&ch->lock);

	size_t len = 0;
	char *handout = build_handout(ch, t, memory, &len);
	free(memory);

	rts_log_turn(LOG_INFO, t->b.turn_id, t->b.channel_hash, "queued", rts_now_ms() - t->admitted_ms,
		     "rich turn queued for the worker (effort %s, memory %s)", rts_effort_name(level),
		     private_memory ? "private" : "none or shared");
	pthread_mutex_lock(&ch->lock);
	if (t->state == RICH_TURN_ADMITTING) {
		t->handout = handout;
		t->handout_len = len;
		handout = NULL;
		t->state = RICH_TURN_QUEUED;
		pthread_cond_broadcast(&ch->cond);
	}
	/* After this the turn may be freed at any moment: nothing of it is touched again. */
	brokerd_rich_turn_unuse_locked(ch, t);
	pthread_mutex_unlock(&ch->lock);
	free(handout);
	return NULL;
}

int brokerd_rich_turn_admit(struct rich_channel *ch)
{
	pthread_mutex_lock(&ch->lock);
	ch->turn->users++;
	pthread_mutex_unlock(&ch->lock);
	int r = brokerd_thread_start(NULL, admit_thread, ch);
	if (r != 0) {
		pthread_mutex_lock(&ch->lock);
		brokerd_rich_turn_unuse_locked(ch, ch->turn);
		pthread_mutex_unlock(&ch->lock);
		return -r;
	}
	return 0;
}
