/* SPDX-License-Identifier: Apache-2.0 */
/* The worker protocol routes of a rich channel (rich-design.md section 4): /worker/ready
 * (the capability handshake), /worker/next (the long poll that hands a turn out) and
 * /worker/result (the reply packet). */
#include "config.h"

#include <poll.h>

#include "brokerd/keys.h"
#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/strictjson.h"
#include "common/util.h"

/* ---- the routes ---- */

static void answer_ok(struct rich_answer *a)
{
	a->status = 200;
	a->body = rts_xstrdup("{\"ok\":true}");
	a->len = strlen(a->body);
	a->content_type = "application/json";
}

static void log_capability_failure(struct rich_channel *ch, struct rich_turn *t, const char *what)
{
	/* Seed: the error names the exact configured image to rebuild; the same local tag is
	 * no proof that it was rebuilt. */
	rts_log_turn(LOG_ERR, t->b.turn_id, ch->hash, "capabilities", 0,
		     "rich turn failed: %s, and the worker did not declare both the privateTo and readerRecords "
		     "capabilities; rebuild the image %s with the installed roundtable-sandbox (keeping the same tag "
		     "is no proof that it was rebuilt)",
		     what, brokerd_rich_image(ch));
}

static const char *required_why(const struct rich_channel *ch, const struct rich_turn *t)
{
	return t->private_memory    ? "the turn carries a private prompt block"
	       : t->private_tool    ? "a host tool returned privateTo"
	       : ch->private_history ? "the worker retains private history"
				     : "capabilities required";
}

void brokerd_rich_worker_ready(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	uint8_t caps = 0;
	bool history = false;
	const char *why = NULL;
	if (brokerd_rich_ready_parse(c->body, c->body_len, &caps, &history, &why) < 0) {
		log_debug("rich channel %.12s: /worker/ready refused: %s", ch->hash, why ? why : "malformed");
		c->rule = "worker_ready_body";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	pthread_mutex_lock(&ch->lock);
	bool again = ch->announced;
	ch->announced = true;
	ch->caps = caps;
	ch->private_history = history;
	ch->ready_news = true;
	struct rich_turn *t = ch->turn;
	if (t && t->state != RICH_TURN_SETTLING) {
		/* A worker that announces itself again has restarted: a turn it held goes back to
		 * the queue. */
		if (t->state == RICH_TURN_HANDED)
			t->state = RICH_TURN_QUEUED;
		/* Seed: a worker reconnecting without capabilities invalidates an already queued
		 * private turn. */
		bool required = brokerd_rich_caps_required(t->private_memory, history, t->private_tool);
		if (t->state == RICH_TURN_QUEUED && required && !brokerd_rich_caps_enough(caps)) {
			log_capability_failure(ch, t, required_why(ch, t));
			brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR,
						   "the worker reconnected without the capabilities a private turn needs", -1);
		}
	}
	pthread_cond_broadcast(&ch->cond);
	pthread_mutex_unlock(&ch->lock);
	brokerd_rich_poke(ch->rich);
	log_info("rich channel %.12s: worker %s (privateTo %s, readerRecords %s, private history %s)", ch->hash,
		 again ? "announced itself again" : "ready", caps & RTS_RICH_CAP_PRIVATE_TO ? "yes" : "no",
		 caps & RTS_RICH_CAP_READER_RECORDS ? "yes" : "no", history ? "yes" : "no");
	answer_ok(a);
}

static bool hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = 0};
	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

void brokerd_rich_worker_next(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	if (c->body_len > 0) {
		cleanup_json json_object *doc = NULL;
		const char *why = NULL;
		if (rts_json_parse_strict(c->body, c->body_len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0 ||
		    !json_object_is_type(doc, json_type_object)) {
			c->rule = "worker_next_body";
			brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
			return;
		}
	}
	pthread_mutex_lock(&ch->lock);
	/* Seed: one idle long poll per channel. */
	if (ch->polling) {
		pthread_mutex_unlock(&ch->lock);
		c->rule = "long_poll_busy";
		brokerd_rich_answer_error(a, BROKERD_BUSY);
		return;
	}
	ch->polling = true;
	rich_conn_quiet(c, true);
	uint64_t deadline = rts_now_ms() + BROKERD_RICH_LONG_POLL_MS;
	char *handout = NULL;
	size_t len = 0;
	struct rich_turn *handed = NULL;
	for (;;) {
		struct rich_turn *t = ch->turn;
		if (atomic_load(&ch->closing))
			break;
		if (t && t->state == RICH_TURN_QUEUED) {
			bool required = brokerd_rich_caps_required(t->private_memory, ch->private_history, t->private_tool);
			t->require_caps = required;
			if (required && !brokerd_rich_caps_enough(ch->caps)) {
				log_capability_failure(ch, t, required_why(ch, t));
				brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR,
							   "the worker lacks the capabilities the turn needs", -1);
				continue;
			}
			t->state = RICH_TURN_HANDED;
			handout = rts_xmalloc(t->handout_len);
			memcpy(handout, t->handout, t->handout_len);
			len = t->handout_len;
			handed = t;
			break;
		}
		uint64_t now = rts_now_ms();
		if (now >= deadline || hung_up(c->fd))
			break;
		uint64_t until = deadline < now + 1000 ? deadline : now + 1000;
		struct timespec ts = {.tv_sec = (time_t)(until / 1000), .tv_nsec = (long)(until % 1000) * 1000000L};
		pthread_cond_timedwait(&ch->cond, &ch->lock, &ts);
	}
	ch->polling = false;
	rich_conn_quiet(c, false);
	if (handed)
		snprintf(c->turn_id, sizeof(c->turn_id), "%s", handed->b.turn_id);
	if (handed)
		rts_log_turn(LOG_INFO, handed->b.turn_id, ch->hash, "handed", rts_now_ms() - handed->admitted_ms,
			     "rich turn handed to the worker (effort %s)", rts_effort_name(handed->effort));
	pthread_mutex_unlock(&ch->lock);
	if (!handout) {
		a->status = 204;
		return;
	}
	a->status = 200;
	a->body = handout;
	a->len = len;
	a->content_type = "application/json";
}

void brokerd_rich_worker_result(struct rich_conn *c, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn; /* held since the head (rich_http.c) */
	const char *why = NULL;
	cleanup_json json_object *doc = NULL;
	if (rts_json_parse_strict(c->body, c->body_len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, ch->hash, "bad_reply", 0, "reply packet refused: %s", why);
		c->rule = "body_json";
		brokerd_rich_answer_error(a, BROKERD_BAD_REQUEST);
		return;
	}
	char *reply = NULL;
	size_t len = 0;
	int r = brokerd_rich_reply_build(doc, t->b.turn_id, &reply, &len, &why);
	if (r < 0) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, ch->hash, "bad_reply", 0, "reply packet refused: %s", why);
		c->rule = r == -ESTALE ? "reply_turn_id" : "reply_packet_shape";
		brokerd_rich_answer_error(a, r == -ESTALE ? BROKERD_CONFLICT : BROKERD_BAD_REQUEST);
		return;
	}
	/* The reply goes to every guest of the channel. */
	if (brokerd_keyring_reflected(t->keys, c->body, c->body_len, doc)) {
		free(reply);
		pthread_mutex_lock(&ch->lock);
		brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR, "the reply packet reflects a credential", -1);
		pthread_mutex_unlock(&ch->lock);
		c->rule = "credential_reflected";
		brokerd_rich_answer_error(a, BROKERD_FORBIDDEN);
		return;
	}
	int fd = rts_memfd_from_buffer("rts-reply", reply, len);
	free(reply);
	if (fd < 0) {
		log_warning_errno(fd, "turn %s: cannot make the reply's memfd: %m", t->b.turn_id);
		brokerd_rich_answer_error(a, BROKERD_UNAVAILABLE);
		return;
	}
	pthread_mutex_lock(&ch->lock);
	bool open = t->state == RICH_TURN_HANDED;
	if (open)
		brokerd_rich_settle_locked(ch, t, RTS_TURN_OK, NULL, fd);
	pthread_mutex_unlock(&ch->lock);
	if (!open) {
		close(fd);
		c->rule = "reply_outside_turn";
		brokerd_rich_answer_error(a, BROKERD_CONFLICT);
		return;
	}
	answer_ok(a);
}

/* ---- calls of a turn ---- */

struct brokerd_call brokerd_rich_call(struct rich_conn *c)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn;
	return (struct brokerd_call){
		.cfg = ch->cfg,
		.binding = &t->b,
		.keys = t->keys,
		.name = c->route.name,
		.body = c->body,
		.body_len = c->body_len,
		.cancel = {.wake_fd = t->wake_fd,
			   .closing = &t->closing,
			   .deadline_ms = t->b.deadline_ms,
			   .has_client = c->fd >= 0,
			   .client_fd = c->fd},
		.model_key = &ch->cfg->rich.oauth_token,
		.mcp_scoped = true,
		.mcp_servers = ch->profile->mcp_index,
		.n_mcp_servers = ch->profile->n_mcp,
		.upstream_timeout_ms = BROKERD_RICH_SILENCE_MS,
		.allow_http = ch->cfg->rich.allow_http_mcp,
	};
}
