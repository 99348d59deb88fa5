/* SPDX-License-Identifier: Apache-2.0 */
/* Channels, their FIFO queues and turns: the state machine of statd/queue.h.
 *
 * Depends on queue.h and common/ only. Everything outside (answers, the link, the state
 * file, workspaces, timers) is an op; see queue.h for the rules. */
#include "config.h"

#include <json-c/linkhash.h> /* json-c's hash table; no JSON is built here */

#include "common/ids.h"
#include "common/log.h"
#include "common/util.h"
#include "statd/queue.h"

enum statd_item_kind {
	STATD_ITEM_TURN,
	STATD_ITEM_MODE,
	STATD_ITEM_FRESH,
};

/* One entry of a channel queue. */
struct statd_item {
	enum statd_item_kind kind;
	struct statd_item *next;
	struct statd_origin *origin; /* released with the item */
	enum statd_mode mode;	     /* MODE */
	/* TURN */
	char *speaker_id;
	char *speaker_name;
	char *principal_id;
	char *text;
	uint32_t attachments;
};

struct statd_channel {
	char *key;
	char hash[RTS_HASH_HEX_LEN + 1];
	struct statd_item *head, *tail;
	unsigned n_items; /* queued items of any kind */
	unsigned n_turns; /* queued turns */
	struct statd_turn *running;
	bool fresh; /* a fresh start is pending (memory only: seed, lost on restart) */
};

enum statd_turn_state {
	STATD_TURN_WAITING, /* workspace ready, waiting for the link to take TURN_RUN */
	STATD_TURN_SENT,    /* TURN_RUN handed to the link, waiting for TURN_DONE */
};

struct statd_turn {
	struct statd_queue *q;
	struct statd_turn *prev, *next; /* q->turns */
	struct statd_channel *ch;
	struct statd_item *item;
	char id[RTS_TURN_ID_LEN + 1];
	enum statd_turn_state state;
	bool start_fresh;
	bool cancel_sent;
	int ws_fd; /* O_PATH fd of the verified workspace, until TURN_RUN is handed over */
	char *ws_path;
	uint64_t started_ms;
	struct rts_timer *backstop;
};

struct statd_queue {
	const struct statd_queue_ops *ops;
	void *owner;
	uint32_t turn_timeout_ms;

	struct lh_table *channels; /* key -> struct statd_channel, active channels only */
	struct statd_turn *turns;  /* running turns */
	unsigned n_running;
	unsigned n_queued_turns;
	size_t queued_bytes;

	uint64_t fail_fast_until_ms;
	bool stopping;
	bool stopped; /* ops->stopped was called */
	struct rts_timer *stop_timer;
};

static void channel_advance(struct statd_queue *q, struct statd_channel *ch);
static void stop_check(struct statd_queue *q);

/* ---- channels ---- */

struct statd_queue *statd_queue_new(const struct statd_queue_ops *ops, void *owner, uint32_t turn_timeout_ms)
{
	struct statd_queue *q = rts_xcalloc(1, sizeof(*q));
	q->ops = ops;
	q->owner = owner;
	q->turn_timeout_ms = turn_timeout_ms;
	/* json-c's string table hashes with a per-process random seed. */
	q->channels = lh_kchar_table_new(64, NULL);
	if (!q->channels)
		abort();
	return q;
}

static struct statd_channel *channel_find(const struct statd_queue *q, const char *key)
{
	void *v = NULL;
	return lh_table_lookup_ex(q->channels, key, &v) ? v : NULL;
}

/* The active channel for key, created when needed; NULL when too many are active. */
static struct statd_channel *channel_get(struct statd_queue *q, const char *key)
{
	struct statd_channel *ch = channel_find(q, key);
	if (ch)
		return ch;
	if ((unsigned)lh_table_length(q->channels) >= STATD_ACTIVE_CHANNELS_MAX)
		return NULL;
	ch = rts_xcalloc(1, sizeof(*ch));
	ch->key = rts_xstrdup(key);
	rts_channel_hash(key, ch->hash);
	if (lh_table_insert(q->channels, ch->key, ch) < 0)
		abort(); /* only on allocation failure */
	return ch;
}

static void channel_maybe_free(struct statd_queue *q, struct statd_channel *ch)
{
	if (ch->running || ch->head || ch->fresh)
		return;
	lh_table_delete(q->channels, ch->key);
	free(ch->key);
	free(ch);
}

/* ---- items ---- */

static struct statd_item *item_new(enum statd_item_kind kind, struct statd_origin *o)
{
	struct statd_item *it = rts_xcalloc(1, sizeof(*it));
	it->kind = kind;
	it->origin = o;
	return it;
}

static void item_free(struct statd_queue *q, struct statd_item *it)
{
	if (!it)
		return;
	q->ops->release(q->owner, it->origin);
	free(it->speaker_id);
	free(it->speaker_name);
	free(it->principal_id);
	free(it->text);
	free(it);
}

static void item_event(struct statd_queue *q, struct statd_item *it, enum statd_outcome outcome, const char *reply)
{
	q->ops->event(q->owner, it->origin, outcome, outcome == STATD_OUTCOME_REPLY ? reply : NULL);
}

static void item_answer(struct statd_queue *q, struct statd_item *it, const struct statd_answer *a)
{
	q->ops->answer(q->owner, it->origin, a);
}

static void channel_push(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it)
{
	if (ch->tail)
		ch->tail->next = it;
	else
		ch->head = it;
	ch->tail = it;
	ch->n_items++;
	if (it->kind == STATD_ITEM_TURN) {
		ch->n_turns++;
		q->n_queued_turns++;
		q->queued_bytes += strlen(it->text);
	}
}

/* Unlink it (whose predecessor is prev, NULL for the head) from ch's queue. */
static void channel_unlink(struct statd_queue *q, struct statd_channel *ch, struct statd_item *prev,
			   struct statd_item *it)
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
		q->n_queued_turns--;
		q->queued_bytes -= strlen(it->text);
	}
}

/* Remove every queued turn of ch, each with a CANCELLED event. Mode changes and fresh
 * starts stay queued, in order. Returns how many turns were removed. */
static unsigned channel_drop_turns(struct statd_queue *q, struct statd_channel *ch)
{
	unsigned n = 0;
	struct statd_item *prev = NULL, *it = ch->head;
	while (it) {
		struct statd_item *next = it->next;
		if (it->kind == STATD_ITEM_TURN) {
			channel_unlink(q, ch, prev, it);
			item_event(q, it, STATD_OUTCOME_CANCELLED, NULL);
			item_free(q, it);
			n++;
		} else {
			prev = it;
		}
		it = next;
	}
	return n;
}

/* ---- turns ---- */

/* Per outcome: the word of rts_log_turn's "outcome" field, and the end of its text (the
 * event's error code, as the client sees it). */
static const struct {
	const char *word, *says;
} outcome_log[] = {
	[STATD_OUTCOME_REPLY] = {"ok", "replied"},
	[STATD_OUTCOME_FAILED] = {"error", "turn_failed"},
	[STATD_OUTCOME_TIMEOUT] = {"timeout", "turn_timeout"},
	[STATD_OUTCOME_CANCELLED] = {"cancelled", "turn_cancelled"},
	[STATD_OUTCOME_CLEANUP_FAILED] = {"cleanup_failed", "cleanup_failed"},
	[STATD_OUTCOME_UNAVAILABLE] = {"unavailable", "unavailable"},
};

/* End t: its event (reply only for REPLY), the outcome logged, everything released. Does
 * not advance the queue. registered: t is on q->turns and ch->running. */
static void turn_end(struct statd_turn *t, bool registered, enum statd_outcome outcome, const char *reply)
{
	struct statd_queue *q = t->q;
	struct statd_channel *ch = t->ch;
	item_event(q, t->item, outcome, reply);
	uint64_t ms = q->ops->now_ms(q->owner) - t->started_ms;
	bool ok = outcome == STATD_OUTCOME_REPLY;
	rts_log_turn(ok ? LOG_INFO : LOG_WARNING, t->id, ch->hash, outcome_log[outcome].word, ms ? ms : 1,
		     "turn finished: %s", outcome_log[outcome].says);
	/* A pending fresh start is used up only by a turn that succeeded (seed: startFresh
	 * resets history on the next successful turn). */
	if (ok && t->start_fresh)
		ch->fresh = false;
	if (registered) {
		if (t->prev)
			t->prev->next = t->next;
		else
			q->turns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		q->n_running--;
		ch->running = NULL;
		/* An unsent TURN_RUN of a turn that ended is taken back: runnerd never hears
		 * of it. */
		if (t->state == STATD_TURN_SENT)
			(void)q->ops->withdraw(q->owner, t);
	}
	q->ops->timer_stop(q->owner, t->backstop);
	if (t->ws_fd >= 0)
		close(t->ws_fd);
	free(t->ws_path);
	item_free(q, t->item);
	free(t);
}

/* End a running turn and let its channel move on. t and maybe its channel are freed. */
static void turn_finish(struct statd_turn *t, enum statd_outcome outcome, const char *reply)
{
	struct statd_queue *q = t->q;
	struct statd_channel *ch = t->ch;
	turn_end(t, true, outcome, reply);
	channel_advance(q, ch);
	stop_check(q);
}

/* Ask runnerd to drop t. Returns true when t can end now (runnerd never got it: still
 * waiting, or its TURN_RUN was taken back); false when a TURN_DONE (or the link's
 * failure) will end it. */
static bool turn_recall(struct statd_turn *t)
{
	struct statd_queue *q = t->q;
	if (t->state == STATD_TURN_WAITING || q->ops->withdraw(q->owner, t))
		return true;
	if (!t->cancel_sent) {
		t->cancel_sent = true;
		q->ops->send_cancel(q->owner, t->id);
	}
	return false;
}

/* Hand t's TURN_RUN to the link if it takes it now. */
static void turn_send(struct statd_turn *t)
{
	struct statd_queue *q = t->q;
	struct statd_item *it = t->item;
	struct statd_turn_start s = {
		.tag = t,
		.turn_id = t->id,
		.channel = t->ch->key,
		.channel_hash = t->ch->hash,
		.speaker_id = it->speaker_id,
		.speaker_name = it->speaker_name,
		.principal_id = it->principal_id,
		.text = it->text,
		.attachments = it->attachments,
		.start_fresh = t->start_fresh,
		.workspace = t->ws_path,
		.workspace_fd = t->ws_fd,
	};
	if (!q->ops->send_run(q->owner, &s))
		return;
	t->ws_fd = -1; /* the link's now */
	t->state = STATD_TURN_SENT;
}

/* runnerd never answered within the turn deadline plus a margin: give up so the queue
 * cannot hang, and ask runnerd once more to clean up. */
static void turn_backstop(void *arg)
{
	struct statd_turn *t = arg;
	t->backstop = NULL; /* fired: the timer is gone */
	rts_log_turn(LOG_ERR, t->id, t->ch->hash, "error", 0,
		     "runnerd did not finish the turn within turnTimeoutMs + %u s; giving up on it",
		     STATD_BACKSTOP_EXTRA_MS / 1000);
	if (t->state == STATD_TURN_SENT)
		(void)turn_recall(t);
	turn_finish(t, STATD_OUTCOME_FAILED, NULL);
}

/* Start the turn item it at the head of ch. Returns true when it is now ch's running turn;
 * false when it ended at once (its event is sent and it is freed). */
static bool turn_start(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it)
{
	const struct statd_queue_ops *ops = q->ops;
	struct statd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->q = q;
	t->ch = ch;
	t->item = it;
	t->ws_fd = -1;
	t->started_ms = ops->now_ms(q->owner);
	int r = rts_turn_id_new(t->id);
	if (r < 0) {
		log_error_errno(r, "channel %.12s: cannot make a turn id: %m", ch->hash);
		snprintf(t->id, sizeof(t->id), "-");
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL);
		return false;
	}
	const char *why = NULL;
	r = ops->workspace_open(q->owner, ch->hash, &t->ws_path, &why);
	if (r < 0) {
		/* Only the hash: the channel key is guest-facing data. */
		rts_log_errno(LOG_ERR, r, "turn %s: workspace %s: %s (%m); refusing to run the turn", t->id, ch->hash,
			      why ? why : "unusable");
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL);
		return false;
	}
	t->ws_fd = r;
	/* After a link that never came up, runnerd is not tried again for a while. */
	if (t->started_ms < q->fail_fast_until_ms || ops->connect(q->owner) < 0) {
		turn_end(t, false, STATD_OUTCOME_UNAVAILABLE, NULL);
		return false;
	}
	r = ops->timer_start(q->owner, (uint64_t)q->turn_timeout_ms + STATD_BACKSTOP_EXTRA_MS, turn_backstop, t,
			     &t->backstop);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm its backstop timer: %m", t->id);
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL);
		return false;
	}
	t->start_fresh = ch->fresh;
	t->state = STATD_TURN_WAITING;
	t->next = q->turns;
	if (q->turns)
		q->turns->prev = t;
	q->turns = t;
	q->n_running++;
	ch->running = t;
	log_debug("turn %s: started for channel %.12s%s", t->id, ch->hash, t->start_fresh ? " (fresh start)" : "");
	turn_send(t);
	return true;
}

/* ---- the queue ---- */

static void item_run_mode(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it)
{
	int r = q->ops->record_mode(q->owner, ch->key, it->mode);
	struct statd_answer a = {.kind = STATD_ANSWER_MODE, .channel = ch->key, .mode = it->mode};
	/* A full table is the client's problem to solve, not a write failure. */
	if (r == -E2BIG || r == -EFBIG)
		a.error = STATD_REFUSAL_TOO_MANY_CHANNELS;
	else if (r < 0)
		a.error = STATD_REFUSAL_STATE_WRITE;
	else
		log_info("channel %.12s: mode %s", ch->hash, statd_mode_name(it->mode));
	item_answer(q, it, &a);
}

static void item_run_fresh(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it)
{
	ch->fresh = true;
	log_info("channel %.12s: fresh start pending", ch->hash);
	item_answer(q, it, &(struct statd_answer){.kind = STATD_ANSWER_FRESH, .channel = ch->key});
}

/* Run queued items until one is running or the queue is empty; free ch when it is idle.
 * ch must not be used by the caller afterwards. */
static void channel_advance(struct statd_queue *q, struct statd_channel *ch)
{
	while (!ch->running && ch->head) {
		struct statd_item *it = ch->head;
		channel_unlink(q, ch, NULL, it);
		switch (it->kind) {
		case STATD_ITEM_MODE:
			item_run_mode(q, ch, it);
			item_free(q, it);
			break;
		case STATD_ITEM_FRESH:
			item_run_fresh(q, ch, it);
			item_free(q, it);
			break;
		case STATD_ITEM_TURN:
			if (q->stopping) {
				item_event(q, it, STATD_OUTCOME_CANCELLED, NULL);
				item_free(q, it);
			} else {
				turn_start(q, ch, it);
			}
			break;
		}
	}
	channel_maybe_free(q, ch);
}

enum statd_refusal statd_queue_turn(struct statd_queue *q, const struct statd_turn_request *m,
				    struct statd_origin *o)
{
	if (q->stopping)
		return STATD_REFUSAL_SHUTTING_DOWN;
	size_t tlen = strlen(m->text);
	if (q->n_queued_turns >= STATD_QUEUED_TURNS_MAX || q->queued_bytes + tlen > STATD_QUEUED_BYTES_MAX)
		return STATD_REFUSAL_BUSY;
	struct statd_channel *ch = channel_get(q, m->channel);
	if (!ch)
		return STATD_REFUSAL_TOO_MANY_CHANNELS;
	if (ch->n_items >= STATD_QUEUE_MAX) {
		log_warning("channel %.12s: queue full (%u items), refusing a turn", ch->hash, STATD_QUEUE_MAX);
		return STATD_REFUSAL_QUEUE_FULL;
	}
	struct statd_item *it = item_new(STATD_ITEM_TURN, o);
	it->speaker_id = rts_xstrdup(m->speaker_id);
	it->speaker_name = rts_xstrdup(m->speaker_name);
	it->principal_id = rts_xstrdup(m->principal_id);
	it->text = rts_xstrdup(m->text);
	it->attachments = m->attachments;
	/* The route answer goes out before anything the turn can produce. */
	item_answer(q, it, &(struct statd_answer){.kind = STATD_ANSWER_SANDBOX, .channel = ch->key});
	channel_push(q, ch, it);
	channel_advance(q, ch);
	return STATD_REFUSAL_NONE;
}

static enum statd_refusal queue_simple(struct statd_queue *q, const char *channel, enum statd_item_kind kind,
				       enum statd_mode mode, struct statd_origin *o)
{
	if (q->stopping)
		return STATD_REFUSAL_SHUTTING_DOWN;
	struct statd_channel *ch = channel_get(q, channel);
	if (!ch)
		return STATD_REFUSAL_TOO_MANY_CHANNELS;
	if (ch->n_items >= STATD_QUEUE_MAX) {
		log_warning("channel %.12s: queue full (%u items), refusing a %s request", ch->hash, STATD_QUEUE_MAX,
			    kind == STATD_ITEM_MODE ? "mode" : "fresh");
		return STATD_REFUSAL_QUEUE_FULL;
	}
	struct statd_item *it = item_new(kind, o);
	it->mode = mode;
	channel_push(q, ch, it);
	channel_advance(q, ch);
	return STATD_REFUSAL_NONE;
}

enum statd_refusal statd_queue_mode(struct statd_queue *q, const char *channel, enum statd_mode mode,
				    struct statd_origin *o)
{
	return queue_simple(q, channel, STATD_ITEM_MODE, mode, o);
}

enum statd_refusal statd_queue_fresh(struct statd_queue *q, const char *channel, struct statd_origin *o)
{
	return queue_simple(q, channel, STATD_ITEM_FRESH, STATD_MODE_OFF, o);
}

unsigned statd_queue_cancel(struct statd_queue *q, const char *channel)
{
	struct statd_channel *ch = channel_find(q, channel);
	if (!ch)
		return 0;
	unsigned n = channel_drop_turns(q, ch);
	struct statd_turn *t = ch->running;
	if (t) {
		n++;
		log_info("turn %s: cancel requested", t->id);
		/* Otherwise runnerd removes the container and answers with TURN_DONE. */
		if (turn_recall(t))
			turn_finish(t, STATD_OUTCOME_CANCELLED, NULL);
	} else {
		channel_advance(q, ch);
	}
	return n;
}

void statd_queue_channel_status(const struct statd_queue *q, const char *channel, struct statd_channel_status *st)
{
	const struct statd_channel *ch = channel_find(q, channel);
	*st = (struct statd_channel_status){
		.running = ch && ch->running,
		.queued = ch ? ch->n_turns : 0,
		.fresh = ch && ch->fresh,
	};
}

void statd_queue_totals(const struct statd_queue *q, unsigned *running, unsigned *queued)
{
	*running = q->n_running;
	*queued = q->n_queued_turns;
}

/* ---- inputs from the runnerd link ---- */

void statd_queue_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
			   const char *reply)
{
	struct statd_turn *t = q->turns;
	while (t && !(t->state == STATD_TURN_SENT && strcmp(t->id, turn_id) == 0))
		t = t->next;
	if (!t) {
		log_debug("turn %s: TURN_DONE for a turn we no longer track, ignored", turn_id);
		return;
	}
	enum statd_outcome outcome;
	switch (status) {
	case RTS_TURN_OK:
		outcome = STATD_OUTCOME_REPLY;
		/* The reply is the guest's container output: it must be text a client can take
		 * as is. */
		if (!rts_utf8_valid(reply, strlen(reply))) {
			rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0, "reply is not valid UTF-8");
			outcome = STATD_OUTCOME_FAILED;
		}
		break;
	case RTS_TURN_TIMEOUT:
		outcome = STATD_OUTCOME_TIMEOUT;
		break;
	case RTS_TURN_CANCELLED:
		outcome = STATD_OUTCOME_CANCELLED;
		break;
	case RTS_TURN_CLEANUP_FAILED:
		outcome = STATD_OUTCOME_CLEANUP_FAILED;
		break;
	case RTS_TURN_ERROR:
	default:
		outcome = STATD_OUTCOME_FAILED;
		break;
	}
	turn_finish(t, outcome, reply);
}

/* The turns running right now, so callers can end them while the list changes. */
static struct statd_turn **turns_snapshot(struct statd_queue *q, size_t *n)
{
	struct statd_turn **v = rts_xcalloc(q->n_running ? q->n_running : 1, sizeof(*v));
	size_t k = 0;
	for (struct statd_turn *t = q->turns; t && k < q->n_running; t = t->next)
		v[k++] = t;
	*n = k;
	return v;
}

/* End every running turn with outcome. Ending one turn only ever starts new turns (of its
 * own channel); it never ends another turn of the snapshot. */
static void turns_fail_all(struct statd_queue *q, enum statd_outcome outcome)
{
	size_t n;
	cleanup_free struct statd_turn **v = turns_snapshot(q, &n);
	for (size_t i = 0; i < n; i++)
		turn_finish(v[i], outcome, NULL);
}

void statd_queue_link_ready(struct statd_queue *q)
{
	for (struct statd_turn *t = q->turns; t; t = t->next)
		if (t->state == STATD_TURN_WAITING)
			turn_send(t);
}

void statd_queue_link_down(struct statd_queue *q, bool was_up)
{
	if (!was_up)
		q->fail_fast_until_ms = q->ops->now_ms(q->owner) + STATD_RUNNERD_FAIL_FAST_MS;
	turns_fail_all(q, STATD_OUTCOME_UNAVAILABLE);
}

/* ---- shutdown ---- */

static void stop_check(struct statd_queue *q)
{
	if (q->stopping && q->n_running == 0 && !q->stopped) {
		q->stopped = true;
		q->ops->timer_stop(q->owner, q->stop_timer);
		q->stop_timer = NULL;
		log_info("all turns finished, exiting");
		q->ops->stopped(q->owner);
	}
}

static void stop_deadline(void *arg)
{
	struct statd_queue *q = arg;
	q->stop_timer = NULL; /* fired */
	log_warning("%u turns still running %u s after the stop request; not waiting for them", q->n_running,
		    STATD_SHUTDOWN_MS / 1000);
	turns_fail_all(q, STATD_OUTCOME_CANCELLED);
	stop_check(q);
}

void statd_queue_stop(struct statd_queue *q)
{
	if (q->stopping)
		return;
	q->stopping = true;
	struct lh_entry *e;
	lh_foreach(q->channels, e)
	{
		/* Channels with queued items always have a running turn, so none is freed here. */
		channel_drop_turns(q, (struct statd_channel *)lh_entry_v(e));
	}
	size_t n;
	cleanup_free struct statd_turn **v = turns_snapshot(q, &n);
	for (size_t i = 0; i < n; i++)
		if (turn_recall(v[i]))
			turn_finish(v[i], STATD_OUTCOME_CANCELLED, NULL);
	if (q->n_running > 0) {
		log_info("stopping: waiting up to %u s for %u turns to be cancelled", STATD_SHUTDOWN_MS / 1000,
			 q->n_running);
		int r = q->ops->timer_start(q->owner, STATD_SHUTDOWN_MS, stop_deadline, q, &q->stop_timer);
		if (r < 0) {
			log_error_errno(r, "cannot arm the shutdown timer, not waiting: %m");
			turns_fail_all(q, STATD_OUTCOME_CANCELLED);
		}
	}
	stop_check(q);
}

void statd_queue_free(struct statd_queue *q)
{
	if (!q)
		return;
	/* Only at exit: whatever is left is released without answers. */
	while (q->turns) {
		struct statd_turn *t = q->turns;
		q->turns = t->next;
		t->ch->running = NULL;
		q->ops->timer_stop(q->owner, t->backstop);
		if (t->ws_fd >= 0)
			close(t->ws_fd);
		free(t->ws_path);
		item_free(q, t->item);
		free(t);
	}
	q->n_running = 0;
	struct lh_entry *e, *tmp;
	lh_foreach_safe(q->channels, e, tmp)
	{
		struct statd_channel *ch = (struct statd_channel *)lh_entry_v(e);
		while (ch->head) {
			struct statd_item *it = ch->head;
			channel_unlink(q, ch, NULL, it);
			item_free(q, it);
		}
		free(ch->key);
		free(ch);
	}
	lh_table_free(q->channels);
	q->ops->timer_stop(q->owner, q->stop_timer);
	free(q);
}
