/* SPDX-License-Identifier: Apache-2.0 */
/* Channels, their FIFO queues and turns (DESIGN.md section 3 steps 1-3 and 6).
 *
 * A channel is "active" while it has a running item, queued items or a pending fresh
 * start; only active channels have a struct statd_channel. Turns, mode changes and fresh
 * starts of one channel go through its queue and run one at a time in arrival order
 * (seed: the channel queue prevents overlapping turns; mode off takes effect after queued
 * work). Mode changes and fresh starts complete at once when they reach the head, so a
 * queue is only ever non-empty behind a running turn. Channels are independent. */
#include "config.h"

#include <json-c/linkhash.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "statd/statd.h"
#include "statd/workspace.h"

/* Everything a TURN_RUN carries besides the text fits in 8 KiB; with the text it fits in
 * one packet, so building a TURN_RUN can never overflow. */
_Static_assert(RTS_TEXT_MAX + RTS_CHANNEL_MAX + 3 * RTS_SPEAKER_FIELD_MAX + 2048 + 8192 < RTS_MSG_MAX,
	       "TURN_RUN must fit in one packet");

static void channel_advance(struct statd *d, struct statd_channel *ch);
static void stop_check(struct statd *d);

/* ---- channels ---- */

void statd_queue_init(struct statd *d)
{
	/* json-c's string table hashes with a per-process random seed. */
	d->channels = lh_kchar_table_new(64, NULL);
	if (!d->channels)
		abort();
}

static struct statd_channel *channel_find(struct statd *d, const char *key)
{
	void *v = NULL;
	return lh_table_lookup_ex(d->channels, key, &v) ? v : NULL;
}

/* The active channel for key, created when needed; NULL when too many are active. */
static struct statd_channel *channel_get(struct statd *d, const char *key)
{
	struct statd_channel *ch = channel_find(d, key);
	if (ch)
		return ch;
	if ((unsigned)lh_table_length(d->channels) >= STATD_ACTIVE_CHANNELS_MAX)
		return NULL;
	ch = rts_xcalloc(1, sizeof(*ch));
	ch->key = rts_xstrdup(key);
	rts_channel_hash(key, ch->hash);
	if (lh_table_insert(d->channels, ch->key, ch) < 0)
		abort(); /* only on allocation failure */
	return ch;
}

static void channel_maybe_free(struct statd *d, struct statd_channel *ch)
{
	if (ch->running || ch->head || ch->fresh)
		return;
	lh_table_delete(d->channels, ch->key);
	free(ch->key);
	free(ch);
}

/* ---- items ---- */

static struct statd_item *item_new(enum statd_item_kind kind, struct statd_conn *c, uint64_t seq, json_object *id)
{
	struct statd_item *it = rts_xcalloc(1, sizeof(*it));
	it->kind = kind;
	it->conn = statd_conn_ref(c);
	it->seq = seq;
	it->id = json_object_get(id);
	return it;
}

static void item_free(struct statd_item *it)
{
	if (!it)
		return;
	statd_conn_unref(it->conn);
	json_object_put(it->id);
	free(it->speaker_id);
	free(it->speaker_name);
	free(it->principal_id);
	free(it->text);
	free(it);
}

static void channel_push(struct statd *d, struct statd_channel *ch, struct statd_item *it)
{
	if (ch->tail)
		ch->tail->next = it;
	else
		ch->head = it;
	ch->tail = it;
	ch->n_items++;
	if (it->kind == STATD_ITEM_TURN) {
		ch->n_turns++;
		d->n_queued_turns++;
		d->queued_bytes += strlen(it->text);
	}
}

/* Unlink it (whose predecessor is prev, NULL for the head) from ch's queue. */
static void channel_unlink(struct statd *d, struct statd_channel *ch, struct statd_item *prev, struct statd_item *it)
{
	if (prev)
		prev->next = it->next;
	else
		ch->head = it->next;
	if (ch->tail == it)
		ch->tail = prev;
	it->next = NULL;
	ch->n_items--;
	if (it->kind == STATD_ITEM_TURN) {
		ch->n_turns--;
		d->n_queued_turns--;
		d->queued_bytes -= strlen(it->text);
	}
}

static json_object *answer_new(json_object *id)
{
	json_object *a = json_object_new_object();
	json_object_object_add(a, "id", json_object_get(id));
	return a;
}

static void item_event_error(struct statd_item *it, const char *code)
{
	json_object *e = answer_new(it->id);
	json_object_object_add(e, "event", json_object_new_string("error"));
	json_object_object_add(e, "error", json_object_new_string(code));
	statd_conn_event(it->conn, it->seq, e);
}

static void item_event_reply(struct statd_item *it, const char *text)
{
	json_object *e = answer_new(it->id);
	json_object_object_add(e, "event", json_object_new_string("reply"));
	json_object_object_add(e, "text", json_object_new_string(text));
	statd_conn_event(it->conn, it->seq, e);
}

/* Remove every queued turn of ch, each answered with a turn_cancelled event. Mode changes
 * and fresh starts stay queued, in order. Returns how many turns were removed. */
static unsigned channel_drop_turns(struct statd *d, struct statd_channel *ch)
{
	unsigned n = 0;
	struct statd_item *prev = NULL, *it = ch->head;
	while (it) {
		struct statd_item *next = it->next;
		if (it->kind == STATD_ITEM_TURN) {
			channel_unlink(d, ch, prev, it);
			item_event_error(it, STATD_EV_TURN_CANCELLED);
			item_free(it);
			n++;
		} else {
			prev = it;
		}
		it = next;
	}
	return n;
}

/* ---- turns ---- */

/* The word logged for an outcome (rts_log_turn's "outcome" field). */
static const char *outcome_word(const char *code)
{
	if (!code)
		return "ok";
	if (strcmp(code, STATD_EV_TURN_TIMEOUT) == 0)
		return "timeout";
	if (strcmp(code, STATD_EV_TURN_CANCELLED) == 0)
		return "cancelled";
	if (strcmp(code, STATD_EV_CLEANUP_FAILED) == 0)
		return "cleanup_failed";
	if (strcmp(code, STATD_EV_UNAVAILABLE) == 0)
		return "unavailable";
	return "error";
}

/* End t: tell the client (reply when code is NULL, else the error event), log the
 * outcome, release everything. Does not advance the queue. */
static void turn_end(struct statd_turn *t, bool registered, const char *code, const char *reply)
{
	struct statd *d = t->d;
	struct statd_channel *ch = t->ch;
	if (code)
		item_event_error(t->item, code);
	else
		item_event_reply(t->item, reply);
	uint64_t ms = rts_now_ms() - t->started_ms;
	rts_log_turn(code ? LOG_WARNING : LOG_INFO, t->id, ch->hash, outcome_word(code), ms ? ms : 1,
		     "turn finished: %s", code ? code : "replied");
	/* A pending fresh start is used up only by a turn that succeeded (seed: startFresh
	 * resets history on the next successful turn). */
	if (!code && t->start_fresh)
		ch->fresh = false;
	if (registered) {
		if (t->prev)
			t->prev->next = t->next;
		else
			d->turns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		d->n_running--;
		ch->running = NULL;
		statd_link_forget_turn(d, t);
	}
	sd_event_source_disable_unref(t->backstop);
	if (t->ws_fd >= 0)
		close(t->ws_fd);
	free(t->ws_path);
	item_free(t->item);
	free(t);
}

/* End a running turn and let its channel move on. t and maybe its channel are freed. */
static void turn_finish(struct statd_turn *t, const char *code, const char *reply)
{
	struct statd *d = t->d;
	struct statd_channel *ch = t->ch;
	turn_end(t, true, code, reply);
	channel_advance(d, ch);
	stop_check(d);
}

/* runnerd never answered within the turn deadline plus a margin: give up so the queue
 * cannot hang, and ask runnerd once more to clean up. */
static int turn_backstop(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd_turn *t = userdata;
	rts_log_turn(LOG_ERR, t->id, t->ch->hash, "error", 0,
		     "runnerd did not finish the turn within turnTimeoutMs + %u s; giving up on it",
		     STATD_BACKSTOP_EXTRA_MS / 1000);
	if (t->state == STATD_TURN_SENT)
		statd_link_send_cancel(t->d, t);
	turn_finish(t, STATD_EV_TURN_FAILED, NULL);
	return 0;
}

/* Start the turn item it at the head of ch. Returns true when it is now ch's running turn;
 * false when it ended at once (its event is sent and it is freed). */
static bool turn_start(struct statd *d, struct statd_channel *ch, struct statd_item *it)
{
	struct statd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->d = d;
	t->ch = ch;
	t->item = it;
	t->ws_fd = -1;
	t->started_ms = rts_now_ms();
	int r = rts_turn_id_new(t->id);
	if (r < 0) {
		log_error_errno(r, "channel %.12s: cannot make a turn id: %m", ch->hash);
		snprintf(t->id, sizeof(t->id), "-");
		turn_end(t, false, STATD_EV_TURN_FAILED, NULL);
		return false;
	}
	const char *why = NULL;
	r = statd_workspace_open(d->cfg->workspace_root, ch->hash, d->cfg->accounts.present ? d->cfg->uid : (uid_t)-1,
				 &t->ws_path, &why);
	if (r < 0) {
		/* Only the hash: the channel key is guest-facing data. */
		rts_log_errno(LOG_ERR, r, "turn %s: workspace %s: %s (%m); refusing to run the turn", t->id, ch->hash,
			      why ? why : "unusable");
		turn_end(t, false, STATD_EV_TURN_FAILED, NULL);
		return false;
	}
	t->ws_fd = r;
	r = statd_link_start(d);
	if (r < 0) {
		turn_end(t, false, STATD_EV_UNAVAILABLE, NULL);
		return false;
	}
	r = sd_event_add_time_relative(d->ev, &t->backstop, CLOCK_MONOTONIC,
				       ((uint64_t)d->cfg->turn_timeout_ms + STATD_BACKSTOP_EXTRA_MS) * 1000u, 1000000,
				       turn_backstop, t);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm its backstop timer: %m", t->id);
		turn_end(t, false, STATD_EV_TURN_FAILED, NULL);
		return false;
	}
	t->start_fresh = ch->fresh;
	t->state = STATD_TURN_WAITING;
	t->next = d->turns;
	if (d->turns)
		d->turns->prev = t;
	d->turns = t;
	d->n_running++;
	ch->running = t;
	log_debug("turn %s: started for channel %.12s%s", t->id, ch->hash, t->start_fresh ? " (fresh start)" : "");
	if (statd_link_ready(d))
		statd_link_send_run(d, t);
	return true;
}

/* ---- the queue ---- */

static void item_run_mode(struct statd *d, struct statd_channel *ch, struct statd_item *it)
{
	int r = statd_state_update(d->state, d->cfg->state_file, ch->key, it->mode);
	json_object *a;
	if (r == -E2BIG || r == -EFBIG) {
		/* A full table is the client's problem to solve, not a write failure. */
		log_warning("channel %.12s: mode not recorded: the state file would hold more than %u channels or "
			    "%u bytes",
			    ch->hash, STATD_STATE_MAX_CHANNELS, STATD_STATE_MAX_BYTES);
		a = statd_error_answer(it->id, STATD_E_TOO_MANY_CHANNELS);
	} else if (r < 0) {
		log_error_errno(r, "state file %s: cannot record mode %s for channel %.12s (the old file and mode "
				   "stay): %m",
				d->cfg->state_file, statd_mode_name(it->mode), ch->hash);
		a = statd_error_answer(it->id, STATD_E_STATE_WRITE);
	} else {
		log_info("channel %.12s: mode %s", ch->hash, statd_mode_name(it->mode));
		a = answer_new(it->id);
		json_object_object_add(a, "ok", json_object_new_boolean(1));
		json_object_object_add(a, "channel", json_object_new_string(ch->key));
		json_object_object_add(a, "mode", json_object_new_string(statd_mode_name(it->mode)));
	}
	statd_conn_answer(it->conn, it->seq, a);
}

static void item_run_fresh(struct statd_channel *ch, struct statd_item *it)
{
	ch->fresh = true;
	log_info("channel %.12s: fresh start pending", ch->hash);
	json_object *a = answer_new(it->id);
	json_object_object_add(a, "ok", json_object_new_boolean(1));
	json_object_object_add(a, "channel", json_object_new_string(ch->key));
	json_object_object_add(a, "fresh", json_object_new_boolean(1));
	statd_conn_answer(it->conn, it->seq, a);
}

/* Run queued items until one is running or the queue is empty; free ch when it is idle.
 * ch must not be used by the caller afterwards. */
static void channel_advance(struct statd *d, struct statd_channel *ch)
{
	while (!ch->running && ch->head) {
		struct statd_item *it = ch->head;
		channel_unlink(d, ch, NULL, it);
		switch (it->kind) {
		case STATD_ITEM_MODE:
			item_run_mode(d, ch, it);
			item_free(it);
			break;
		case STATD_ITEM_FRESH:
			item_run_fresh(ch, it);
			item_free(it);
			break;
		case STATD_ITEM_TURN:
			if (d->stopping) {
				item_event_error(it, STATD_EV_TURN_CANCELLED);
				item_free(it);
			} else {
				turn_start(d, ch, it);
			}
			break;
		}
	}
	channel_maybe_free(d, ch);
}

json_object *statd_queue_message(struct statd *d, struct statd_conn *c, uint64_t seq, const struct statd_message *m)
{
	/* Refusals from here on are answered "drop" (request.h): the channel is on, and the
	 * bot must not hand the message to a host agent because statd could not take it. */
	if (d->stopping)
		return statd_message_answer(m->id, STATD_ROUTE_DROP, STATD_E_SHUTTING_DOWN, NULL);
	size_t tlen = strlen(m->text);
	if (d->n_queued_turns >= STATD_QUEUED_TURNS_MAX || d->queued_bytes + tlen > STATD_QUEUED_BYTES_MAX)
		return statd_message_answer(m->id, STATD_ROUTE_DROP, STATD_E_BUSY, NULL);
	struct statd_channel *ch = channel_get(d, m->channel);
	if (!ch)
		return statd_message_answer(m->id, STATD_ROUTE_DROP, STATD_E_TOO_MANY_CHANNELS, NULL);
	if (ch->n_items >= STATD_QUEUE_MAX) {
		log_warning("channel %.12s: queue full (%u items), refusing a turn", ch->hash, STATD_QUEUE_MAX);
		return statd_message_answer(m->id, STATD_ROUTE_DROP, STATD_E_QUEUE_FULL, NULL);
	}
	struct statd_item *it = item_new(STATD_ITEM_TURN, c, seq, m->id);
	it->speaker_id = rts_xstrdup(m->author_id);
	it->speaker_name = rts_xstrdup(m->author_name);
	it->principal_id = rts_xstrdup(m->principal_id);
	it->text = rts_xstrdup(m->text);
	it->attachments = m->attachments;
	/* The route answer goes out before anything the turn can produce. */
	statd_conn_answer(c, seq, statd_message_answer(m->id, STATD_ROUTE_SANDBOX, NULL, NULL));
	channel_push(d, ch, it);
	channel_advance(d, ch);
	return NULL;
}

static json_object *queue_simple(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
				 const char *channel, enum statd_item_kind kind, enum statd_mode mode)
{
	if (d->stopping)
		return statd_error_answer(id, STATD_E_SHUTTING_DOWN);
	struct statd_channel *ch = channel_get(d, channel);
	if (!ch)
		return statd_error_answer(id, STATD_E_TOO_MANY_CHANNELS);
	if (ch->n_items >= STATD_QUEUE_MAX) {
		log_warning("channel %.12s: queue full (%u items), refusing a %s request", ch->hash, STATD_QUEUE_MAX,
			    kind == STATD_ITEM_MODE ? "mode" : "fresh");
		return statd_error_answer(id, STATD_E_QUEUE_FULL);
	}
	struct statd_item *it = item_new(kind, c, seq, id);
	it->mode = mode;
	channel_push(d, ch, it);
	channel_advance(d, ch);
	return NULL;
}

json_object *statd_queue_mode(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
			      const char *channel, enum statd_mode mode)
{
	return queue_simple(d, c, seq, id, channel, STATD_ITEM_MODE, mode);
}

json_object *statd_queue_fresh(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
			       const char *channel)
{
	return queue_simple(d, c, seq, id, channel, STATD_ITEM_FRESH, STATD_MODE_OFF);
}

json_object *statd_queue_cancel(struct statd *d, json_object *id, const char *channel)
{
	unsigned n = 0;
	struct statd_channel *ch = channel_find(d, channel);
	if (ch) {
		n = channel_drop_turns(d, ch);
		struct statd_turn *t = ch->running;
		if (t) {
			n++;
			log_info("turn %s: cancel requested", t->id);
			/* Not yet at runnerd (or withdrawn before it was sent): it ends here. Else
			 * runnerd removes the container and answers with TURN_DONE. */
			if (t->state == STATD_TURN_WAITING || statd_link_send_cancel(d, t))
				turn_finish(t, STATD_EV_TURN_CANCELLED, NULL);
		} else {
			channel_advance(d, ch);
		}
	}
	json_object *a = answer_new(id);
	json_object_object_add(a, "ok", json_object_new_boolean(1));
	json_object_object_add(a, "channel", json_object_new_string(channel));
	json_object_object_add(a, "cancelled", json_object_new_int64(n));
	return a;
}

json_object *statd_queue_status(struct statd *d, json_object *id, const char *channel)
{
	json_object *a = answer_new(id);
	json_object_object_add(a, "ok", json_object_new_boolean(1));
	if (channel) {
		enum statd_mode mode = STATD_MODE_OFF;
		(void)statd_state_get(d->state, channel, &mode);
		struct statd_channel *ch = channel_find(d, channel);
		json_object_object_add(a, "channel", json_object_new_string(channel));
		json_object_object_add(a, "mode", json_object_new_string(statd_mode_name(mode)));
		json_object_object_add(a, "running", json_object_new_boolean(ch && ch->running));
		json_object_object_add(a, "queued", json_object_new_int64(ch ? ch->n_turns : 0));
		json_object_object_add(a, "fresh", json_object_new_boolean(ch && ch->fresh));
	} else {
		json_object_object_add(a, "channels", json_object_new_int64((int64_t)statd_state_count(d->state)));
		json_object_object_add(a, "on", json_object_new_int64((int64_t)statd_state_count_on(d->state)));
		json_object_object_add(a, "running", json_object_new_int64(d->n_running));
		json_object_object_add(a, "queued", json_object_new_int64(d->n_queued_turns));
	}
	return a;
}

json_object *statd_queue_channels(struct statd *d, json_object *id)
{
	json_object *a = answer_new(id);
	json_object_object_add(a, "ok", json_object_new_boolean(1));
	json_object *list = json_object_new_array_ext((int)statd_state_count(d->state));
	for (size_t i = 0; i < statd_state_count(d->state); i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "channel", json_object_new_string(statd_state_key(d->state, i)));
		json_object_object_add(e, "mode", json_object_new_string(statd_mode_name(statd_state_mode_at(d->state, i))));
		json_object_array_add(list, e);
	}
	json_object_object_add(a, "channels", list);
	return a;
}

/* ---- events from the runnerd link ---- */

void statd_turn_done(struct statd *d, const char *turn_id, enum rts_turn_status status, const char *reply)
{
	struct statd_turn *t = d->turns;
	while (t && !(t->state == STATD_TURN_SENT && strcmp(t->id, turn_id) == 0))
		t = t->next;
	if (!t) {
		log_debug("turn %s: TURN_DONE for a turn we no longer track, ignored", turn_id);
		return;
	}
	const char *code = NULL;
	switch (status) {
	case RTS_TURN_OK:
		/* The reply is the guest's container output: it must be text we can put in
		 * JSON as is. */
		if (!rts_utf8_valid(reply, strlen(reply))) {
			rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0, "reply is not valid UTF-8");
			code = STATD_EV_TURN_FAILED;
		}
		break;
	case RTS_TURN_TIMEOUT:
		code = STATD_EV_TURN_TIMEOUT;
		break;
	case RTS_TURN_CANCELLED:
		code = STATD_EV_TURN_CANCELLED;
		break;
	case RTS_TURN_CLEANUP_FAILED:
		code = STATD_EV_CLEANUP_FAILED;
		break;
	case RTS_TURN_ERROR:
	default:
		code = STATD_EV_TURN_FAILED;
		break;
	}
	turn_finish(t, code, code ? NULL : reply);
}

/* The turns running right now, so callers can end them while the list changes. */
static struct statd_turn **turns_snapshot(struct statd *d, size_t *n)
{
	struct statd_turn **v = rts_xcalloc(d->n_running ? d->n_running : 1, sizeof(*v));
	size_t k = 0;
	for (struct statd_turn *t = d->turns; t && k < d->n_running; t = t->next)
		v[k++] = t;
	*n = k;
	return v;
}

void statd_turns_fail_all(struct statd *d, const char *code)
{
	size_t n;
	cleanup_free struct statd_turn **v = turns_snapshot(d, &n);
	/* Ending one turn only ever starts new turns (of its own channel); it never ends
	 * another turn of this snapshot. */
	for (size_t i = 0; i < n; i++)
		turn_finish(v[i], code, NULL);
}

void statd_turns_send_waiting(struct statd *d)
{
	for (struct statd_turn *t = d->turns; t; t = t->next)
		if (t->state == STATD_TURN_WAITING)
			statd_link_send_run(d, t);
}

/* ---- shutdown ---- */

static void stop_check(struct statd *d)
{
	if (d->stopping && d->n_running == 0 && !d->exiting) {
		d->exiting = true;
		log_info("all turns finished, exiting");
		sd_event_exit(d->ev, d->exit_code);
	}
}

static int stop_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd *d = userdata;
	log_warning("%u turns still running %u s after the stop request; not waiting for them", d->n_running,
		    STATD_SHUTDOWN_MS / 1000);
	statd_turns_fail_all(d, STATD_EV_TURN_CANCELLED);
	stop_check(d);
	return 0;
}

void statd_queue_stop(struct statd *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	struct lh_entry *e;
	lh_foreach(d->channels, e)
	{
		/* Channels with queued items always have a running turn, so none is freed here. */
		channel_drop_turns(d, (struct statd_channel *)lh_entry_v(e));
	}
	size_t n;
	cleanup_free struct statd_turn **v = turns_snapshot(d, &n);
	for (size_t i = 0; i < n; i++) {
		struct statd_turn *t = v[i];
		if (t->state == STATD_TURN_WAITING || statd_link_send_cancel(d, t))
			turn_finish(t, STATD_EV_TURN_CANCELLED, NULL);
	}
	if (d->n_running > 0) {
		log_info("stopping: waiting up to %u s for %u turns to be cancelled", STATD_SHUTDOWN_MS / 1000,
			 d->n_running);
		int r = sd_event_add_time_relative(d->ev, &d->stop_timer, CLOCK_MONOTONIC,
						   (uint64_t)STATD_SHUTDOWN_MS * 1000u, 100000, stop_deadline, d);
		if (r < 0) {
			log_error_errno(r, "cannot arm the shutdown timer, not waiting: %m");
			statd_turns_fail_all(d, STATD_EV_TURN_CANCELLED);
		}
	}
	stop_check(d);
}

void statd_queue_free(struct statd *d)
{
	if (!d->channels)
		return;
	/* Only at exit: whatever is left is released without answers. */
	while (d->turns) {
		struct statd_turn *t = d->turns;
		d->turns = t->next;
		t->ch->running = NULL;
		sd_event_source_disable_unref(t->backstop);
		if (t->ws_fd >= 0)
			close(t->ws_fd);
		free(t->ws_path);
		item_free(t->item);
		free(t);
	}
	d->n_running = 0;
	struct lh_entry *e, *tmp;
	lh_foreach_safe(d->channels, e, tmp)
	{
		struct statd_channel *ch = (struct statd_channel *)lh_entry_v(e);
		while (ch->head) {
			struct statd_item *it = ch->head;
			channel_unlink(d, ch, NULL, it);
			item_free(it);
		}
		free(ch->key);
		free(ch);
	}
	lh_table_free(d->channels);
	d->channels = NULL;
	sd_event_source_disable_unref(d->stop_timer);
	d->stop_timer = NULL;
}
