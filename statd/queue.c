/* SPDX-License-Identifier: Apache-2.0 */
/* Channels, their FIFO queues and turns: the state machine of statd/queue.h.
 *
 * Depends on queue.h and common/ only. Everything outside (answers, the link, the state
 * file, workspaces, timers) is an op; see queue.h for the rules. */
#include "config.h"

#include <fcntl.h>
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
	char *profile;		     /* MODE rich */
	/* TURN */
	char *speaker_id;
	char *speaker_name;
	char *principal_id;
	char *text;
	uint32_t attachments;
	bool rich;
	char *images_json; /* rich: the rendered images, or NULL */
	size_t images_len;
	struct statd_attachment *att; /* rich: the attachments to fetch */
	size_t n_att;
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

/* What a channel runs at the head of its queue. */
enum statd_run_kind {
	STATD_RUN_SEALED, /* a sealed turn: TURN_RUN ... TURN_DONE */
	STATD_RUN_RICH,	  /* a rich turn: attachments, then RICH_ENSURE + RICH_TURN ... RICH_TURN_DONE */
	STATD_RUN_FRESH,  /* a rich fresh start: RICH_STOP ... RICH_STATE, then the archive */
};

enum statd_turn_state {
	STATD_TURN_WAITING,  /* workspace ready, waiting for the link to take the next message */
	STATD_TURN_FETCHING, /* rich: ATTACH_FETCH of attachment next_att sent, ATTACH_DATA due */
	STATD_TURN_SENT,     /* TURN_RUN / RICH_TURN / RICH_STOP handed to the link, its answer due */
};

struct statd_turn {
	struct statd_queue *q;
	struct statd_turn *prev, *next; /* q->turns */
	struct statd_channel *ch;
	struct statd_item *item;
	char id[RTS_TURN_ID_LEN + 1];
	enum statd_run_kind kind;
	enum statd_turn_state state;
	bool start_fresh;
	bool cancel_sent;
	int ws_fd; /* O_PATH fd of the verified workspace, until TURN_RUN is handed over */
	char *ws_path;
	uint64_t started_ms;
	struct rts_timer *backstop;
	/* rich */
	char *profile;	   /* the channel's profile when the turn started */
	uint32_t next_att; /* the attachment being fetched, or the next one */
	uint64_t att_total;
	uint32_t seq; /* FRESH: its RICH_STOP's */
};

/* The sync after HELLO (statd_queue_rich_sync): the channels still to ensure. */
struct statd_sync {
	char **channels, **profiles;
	size_t n, next;
	uint32_t sent; /* RICH_ENSUREs sent */
};

struct statd_queue {
	const struct statd_queue_ops *ops;
	void *owner;
	struct statd_queue_conf conf;

	struct lh_table *channels; /* key -> struct statd_channel, active channels only */
	struct statd_turn *turns;  /* running turns */
	unsigned n_running;
	unsigned n_queued_turns;
	size_t queued_bytes;
	size_t rich_bytes; /* images_json of queued and running rich turns */
	uint32_t rich_seq; /* the last RICH_ENSURE / RICH_STOP number */
	struct statd_sync *sync;

	uint64_t fail_fast_until_ms;
	bool stopping;
	bool stopped; /* ops->stopped was called */
	struct rts_timer *stop_timer;
};

static void channel_advance(struct statd_queue *q, struct statd_channel *ch);
static void stop_check(struct statd_queue *q);

/* ---- channels ---- */

struct statd_queue *statd_queue_new(const struct statd_queue_ops *ops, void *owner, const struct statd_queue_conf *conf)
{
	struct statd_queue *q = rts_xcalloc(1, sizeof(*q));
	q->ops = ops;
	q->owner = owner;
	q->conf = *conf;
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

static void attachments_free(struct statd_attachment *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].url);
		free(v[i].name);
		free(v[i].file_name);
		free(v[i].path);
		free(v[i].mime);
	}
	free(v);
}

static void item_free(struct statd_queue *q, struct statd_item *it)
{
	if (!it)
		return;
	q->ops->release(q->owner, it->origin);
	free(it->profile);
	free(it->speaker_id);
	free(it->speaker_name);
	free(it->principal_id);
	free(it->text);
	if (it->images_json) {
		q->rich_bytes -= it->images_len;
		free(it->images_json);
	}
	attachments_free(it->att, it->n_att);
	free(it);
}

static void item_event(struct statd_queue *q, struct statd_item *it, enum statd_outcome outcome, const char *reply,
		       const struct statd_rich_reply *rich)
{
	bool ok = outcome == STATD_OUTCOME_REPLY;
	q->ops->event(q->owner, it->origin, outcome, ok ? reply : NULL, ok ? rich : NULL);
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
			item_event(q, it, STATD_OUTCOME_CANCELLED, NULL, NULL);
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
	[STATD_OUTCOME_ATTACHMENT_REFUSED] = {"error", "attachment_refused"},
	[STATD_OUTCOME_ATTACHMENT_TOO_LARGE] = {"error", "attachment_too_large"},
	[STATD_OUTCOME_ATTACHMENT_FAILED] = {"error", "attachment_failed"},
};

/* End t: its event (reply only for REPLY) or, for a fresh start, its answer; the outcome
 * logged; everything released. Does not advance the queue. registered: t is on q->turns
 * and ch->running. */
static void turn_end(struct statd_turn *t, bool registered, enum statd_outcome outcome, const char *reply,
		     const struct statd_rich_reply *rich)
{
	struct statd_queue *q = t->q;
	struct statd_channel *ch = t->ch;
	bool ok = outcome == STATD_OUTCOME_REPLY;
	if (t->kind == STATD_RUN_FRESH) {
		struct statd_answer a = {.kind = STATD_ANSWER_FRESH, .channel = ch->key};
		if (ok) {
			ch->fresh = true;
			log_info("channel %.12s: container removed and sessions archived; fresh start pending", ch->hash);
		} else {
			a.error = STATD_REFUSAL_UNAVAILABLE;
			log_warning("channel %.12s: fresh start not done (%s); the sessions stay where they are", ch->hash,
				    outcome_log[outcome].says);
		}
		item_answer(q, t->item, &a);
	} else {
		item_event(q, t->item, outcome, reply, rich);
		uint64_t ms = q->ops->now_ms(q->owner) - t->started_ms;
		rts_log_turn(ok ? LOG_INFO : LOG_WARNING, t->id, ch->hash, outcome_log[outcome].word, ms ? ms : 1,
			     "turn finished: %s", outcome_log[outcome].says);
		/* A pending fresh start is used up only by a turn that succeeded (seed: startFresh
		 * resets history on the next successful turn). */
		if (ok && t->start_fresh)
			ch->fresh = false;
	}
	if (registered) {
		if (t->prev)
			t->prev->next = t->next;
		else
			q->turns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		q->n_running--;
		ch->running = NULL;
		/* An unsent TURN_RUN (RICH_TURN) of a turn that ended is taken back: runnerd
		 * never hears of it. */
		if (t->state == STATD_TURN_SENT && t->kind != STATD_RUN_FRESH)
			(void)q->ops->withdraw(q->owner, t);
	}
	q->ops->timer_stop(q->owner, t->backstop);
	if (t->ws_fd >= 0)
		close(t->ws_fd);
	free(t->ws_path);
	free(t->profile);
	item_free(q, t->item);
	free(t);
}

/* End a running turn and let its channel move on. t and maybe its channel are freed. */
static void turn_finish(struct statd_turn *t, enum statd_outcome outcome, const char *reply,
			const struct statd_rich_reply *rich)
{
	struct statd_queue *q = t->q;
	struct statd_channel *ch = t->ch;
	turn_end(t, true, outcome, reply, rich);
	channel_advance(q, ch);
	stop_check(q);
}

/* Ask runnerd to drop t. Returns true when t can end now (runnerd never got it: still
 * waiting, fetching attachments (a late ATTACH_DATA is ignored), or its TURN_RUN was taken
 * back); false when a TURN_DONE (or the link's failure) will end it. A fresh start is
 * never recalled: the container's removal is already on its way. */
static bool turn_recall(struct statd_turn *t)
{
	struct statd_queue *q = t->q;
	if (t->kind == STATD_RUN_FRESH)
		return t->state == STATD_TURN_WAITING;
	if (t->state == STATD_TURN_WAITING || t->state == STATD_TURN_FETCHING || q->ops->withdraw(q->owner, t))
		return true;
	if (!t->cancel_sent) {
		t->cancel_sent = true;
		q->ops->send_cancel(q->owner, t->id);
	}
	return false;
}

/* The link's answer is overdue: give up so the queue cannot hang, and ask runnerd once
 * more to clean up. While a rich turn fetches its attachments, its own deadline
 * (rich.turnTimeoutMs) has passed: a timeout. */
static void turn_backstop(void *arg)
{
	struct statd_turn *t = arg;
	t->backstop = NULL; /* fired */
	if (t->kind == STATD_RUN_RICH && t->state != STATD_TURN_SENT) {
		rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "timeout", 0,
			     "the attachments were not fetched within rich.turnTimeoutMs");
		turn_finish(t, STATD_OUTCOME_TIMEOUT, NULL, NULL);
		return;
	}
	if (t->kind == STATD_RUN_FRESH)
		log_error("channel %.12s: runnerd did not stop the container within %u s; giving up on the fresh "
			  "start",
			  t->ch->hash, STATD_BACKSTOP_EXTRA_MS / 1000);
	else
		rts_log_turn(LOG_ERR, t->id, t->ch->hash, "error", 0,
			     "runnerd did not finish the turn within its deadline + %u s; giving up on it",
			     STATD_BACKSTOP_EXTRA_MS / 1000);
	if (t->state == STATD_TURN_SENT)
		(void)turn_recall(t);
	turn_finish(t, t->kind == STATD_RUN_FRESH ? STATD_OUTCOME_UNAVAILABLE : STATD_OUTCOME_FAILED, NULL, NULL);
}

/* (Re)arm t's backstop after_ms from now. Returns 0 or -errno. */
static int turn_arm(struct statd_turn *t, uint64_t after_ms)
{
	struct statd_queue *q = t->q;
	q->ops->timer_stop(q->owner, t->backstop);
	t->backstop = NULL;
	return q->ops->timer_start(q->owner, after_ms, turn_backstop, t, &t->backstop);
}

static bool turn_send(struct statd_turn *t, enum statd_outcome *fail);

/* ---- rich turns ---- */

/* A new O_PATH fd of t's workspace for a message that carries one (the turn keeps its own
 * for the attachments). -errno when none can be had. */
static int turn_ws_dup(struct statd_turn *t)
{
	int fd = fcntl(t->ws_fd, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : fd;
}

/* The attachments are in the workspace: make the input, then RICH_ENSURE and RICH_TURN.
 * Returns false when the turn must end with *fail. */
static bool rich_send_turn(struct statd_turn *t, enum statd_outcome *fail)
{
	struct statd_queue *q = t->q;
	struct statd_item *it = t->item;
	int in_fd = q->ops->rich_input(q->owner, &(struct statd_rich_input){
							 .turn_id = t->id,
							 .speaker_id = it->speaker_id,
							 .speaker_name = it->speaker_name,
							 .principal_id = it->principal_id,
							 .text = it->text,
							 .images_json = it->images_json,
							 .images_len = it->images_len,
							 .attachments = it->att,
							 .n_attachments = it->n_att,
							 .start_fresh = t->start_fresh,
						 });
	if (in_fd < 0) {
		rts_log_errno(LOG_ERR, in_fd, "turn %s: cannot make its input: %m", t->id);
		*fail = STATD_OUTCOME_FAILED;
		return false;
	}
	int ws = turn_ws_dup(t);
	if (ws < 0) {
		close(in_fd);
		rts_log_errno(LOG_ERR, ws, "turn %s: %m", t->id);
		*fail = STATD_OUTCOME_FAILED;
		return false;
	}
	struct statd_rich_turn_start s = {
		.tag = t,
		.turn_id = t->id,
		.channel = t->ch->key,
		.channel_hash = t->ch->hash,
		.speaker_id = it->speaker_id,
		.speaker_name = it->speaker_name,
		.principal_id = it->principal_id,
		.profile = t->profile,
		.input_fd = in_fd,
		.ensure = {.seq = ++q->rich_seq, .channel = t->ch->key, .channel_hash = t->ch->hash,
			   .profile = t->profile, .workspace = t->ws_path, .workspace_fd = ws},
	};
	if (!q->ops->send_rich_turn(q->owner, &s)) {
		close(in_fd);
		close(ws);
		return true; /* waits for the link */
	}
	t->state = STATD_TURN_SENT;
	/* From here runnerd's deadline (rich.turnTimeoutMs from RICH_TURN, which may first
	 * wait for the container to start) bounds the turn; the backstop waits longer. */
	uint64_t after = (uint64_t)q->conf.rich_turn_timeout_ms + q->conf.rich_start_timeout_ms + STATD_BACKSTOP_EXTRA_MS;
	int r = turn_arm(t, after);
	if (r < 0)
		log_error_errno(r, "turn %s: cannot arm its backstop timer: %m", t->id);
	return true;
}

/* WAITING: ask for the next attachment, or go on to the turn itself. */
static bool rich_send(struct statd_turn *t, enum statd_outcome *fail)
{
	struct statd_queue *q = t->q;
	struct statd_item *it = t->item;
	if (t->next_att < it->n_att) {
		uint64_t left = RTS_RICH_ATTACHMENTS_TOTAL_MAX - t->att_total;
		uint64_t max = left < RTS_RICH_ATTACHMENT_BYTES_MAX ? left : RTS_RICH_ATTACHMENT_BYTES_MAX;
		if (max == 0) {
			/* seed: 50 MiB in all; the ones before took it. */
			rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0,
				     "attachment %u not fetched: the attachments before it hold %u bytes already",
				     t->next_att, RTS_RICH_ATTACHMENTS_TOTAL_MAX);
			*fail = STATD_OUTCOME_ATTACHMENT_TOO_LARGE;
			return false;
		}
		if (q->ops->send_fetch(q->owner, t->id, t->next_att, it->att[t->next_att].url, max))
			t->state = STATD_TURN_FETCHING;
		return true;
	}
	return rich_send_turn(t, fail);
}

/* A FETCHING turn gets its attachment's bytes (or why there are none). */
static void rich_attach_data(struct statd_turn *t, int32_t result, const char *mime, int data_fd)
{
	struct statd_queue *q = t->q;
	struct statd_item *it = t->item;
	uint32_t i = t->next_att;
	if (result < 0) {
		/* -EACCES always means a rule of the controlled fetch refused it (common/fetch.h). */
		enum statd_outcome o = result == -EACCES  ? STATD_OUTCOME_ATTACHMENT_REFUSED
				       : result == -EFBIG ? STATD_OUTCOME_ATTACHMENT_TOO_LARGE
							  : STATD_OUTCOME_ATTACHMENT_FAILED;
		rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0, "attachment %u not fetched: %s (%s)", i,
			     outcome_log[o].says, strerror(-result));
		turn_finish(t, o, NULL, NULL);
		return;
	}
	uint64_t left = RTS_RICH_ATTACHMENTS_TOTAL_MAX - t->att_total;
	uint64_t max = left < RTS_RICH_ATTACHMENT_BYTES_MAX ? left : RTS_RICH_ATTACHMENT_BYTES_MAX;
	const char *why = NULL;
	int r = q->ops->attachment_write(q->owner, t->ws_fd, t->id, i, data_fd, mime, max, &it->att[i], &why);
	if (r < 0) {
		enum statd_outcome o = r == -EFBIG ? STATD_OUTCOME_ATTACHMENT_TOO_LARGE : STATD_OUTCOME_ATTACHMENT_FAILED;
		rts_log_errno(LOG_WARNING, r, "turn %s: attachment %u not stored: %s: %m", t->id, i,
			      why ? why : "failed");
		turn_finish(t, o, NULL, NULL);
		return;
	}
	t->att_total += it->att[i].bytes;
	t->next_att++;
	t->state = STATD_TURN_WAITING;
	enum statd_outcome fail;
	if (!turn_send(t, &fail))
		turn_finish(t, fail, NULL, NULL);
}

/* ---- fresh starts of rich channels ---- */

static void fresh_send(struct statd_turn *t)
{
	struct statd_queue *q = t->q;
	uint32_t seq = q->rich_seq + 1;
	if (!q->ops->send_stop(q->owner, seq, t->ch->hash, RTS_RICH_STOP_FRESH))
		return;
	q->rich_seq = seq;
	t->seq = seq;
	t->state = STATD_TURN_SENT;
}

/* runnerd answered the fresh start's RICH_STOP. */
static void fresh_stopped(struct statd_turn *t, uint32_t state, int32_t error)
{
	struct statd_queue *q = t->q;
	if (state != RTS_RICH_STATE_STOPPED) {
		rts_log_errno(LOG_WARNING, error ? error : -EIO, "channel %.12s: the container was not removed: %m",
			      t->ch->hash);
		turn_finish(t, STATD_OUTCOME_UNAVAILABLE, NULL, NULL);
		return;
	}
	/* The container is gone: nobody writes the sessions while they move. */
	const char *why = NULL;
	int r = q->ops->channel_key(q->owner, t->ch->key, t->ch->hash, &why);
	if (r >= 0)
		r = q->ops->archive(q->owner, t->ws_fd, t->ch->hash, &why);
	if (r < 0) {
		rts_log_errno(LOG_ERR, r, "channel %.12s: cannot archive the sessions: %s: %m", t->ch->hash,
			      why ? why : "failed");
		turn_finish(t, STATD_OUTCOME_FAILED, NULL, NULL);
		return;
	}
	turn_finish(t, STATD_OUTCOME_REPLY, NULL, NULL);
}

/* ---- starting what runs at the head ---- */

/* Hand t's next message to the link if it takes it now. Returns false when t must end
 * with *fail instead (the caller ends it: this may run inside channel_advance). */
static bool turn_send(struct statd_turn *t, enum statd_outcome *fail)
{
	struct statd_queue *q = t->q;
	struct statd_item *it = t->item;
	if (t->kind == STATD_RUN_RICH)
		return rich_send(t, fail);
	if (t->kind == STATD_RUN_FRESH) {
		fresh_send(t);
		return true;
	}
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
		return true;
	t->ws_fd = -1; /* the link's now */
	t->state = STATD_TURN_SENT;
	return true;
}

/* Start it (a turn, or a rich fresh start) at the head of ch. Returns true when it is now
 * ch's running turn; false when it ended at once (its event or answer is sent and it is
 * freed). */
static bool turn_start(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it, enum statd_run_kind kind)
{
	const struct statd_queue_ops *ops = q->ops;
	struct statd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->q = q;
	t->ch = ch;
	t->item = it;
	t->kind = kind;
	t->ws_fd = -1;
	t->started_ms = ops->now_ms(q->owner);
	int r = rts_turn_id_new(t->id);
	if (r < 0) {
		log_error_errno(r, "channel %.12s: cannot make a turn id: %m", ch->hash);
		snprintf(t->id, sizeof(t->id), "-");
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL, NULL);
		return false;
	}
	const char *why = NULL;
	r = ops->workspace_open(q->owner, ch->hash, &t->ws_path, &why);
	if (r < 0) {
		/* Only the hash: the channel key is guest-facing data. */
		rts_log_errno(LOG_ERR, r, "turn %s: workspace %s: %s (%m); refusing to run the turn", t->id, ch->hash,
			      why ? why : "unusable");
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL, NULL);
		return false;
	}
	t->ws_fd = r;
	if (kind == STATD_RUN_RICH) {
		/* The mode may have changed since the message was routed (a mode change queued
		 * ahead of it): a channel no longer rich gets no container back. */
		const char *profile = NULL;
		if (ops->mode_of(q->owner, ch->key, &profile) != STATD_MODE_RICH || !profile) {
			rts_log_turn(LOG_WARNING, t->id, ch->hash, "error", 0,
				     "the channel is no longer rich; refusing the rich turn");
			turn_end(t, false, STATD_OUTCOME_FAILED, NULL, NULL);
			return false;
		}
		t->profile = rts_xstrdup(profile);
	}
	if (kind != STATD_RUN_SEALED) {
		/* seed: the .channel-key record guards every lifecycle, session and attachment
		 * operation of a rich channel against a workspace name shared with another key. */
		r = ops->channel_key(q->owner, ch->key, ch->hash, &why);
		if (r < 0) {
			rts_log_errno(LOG_ERR, r, "channel %.12s: %s (%m); refusing the %s", ch->hash,
				      why ? why : "the .channel-key record does not match",
				      kind == STATD_RUN_FRESH ? "fresh start" : "turn");
			turn_end(t, false, kind == STATD_RUN_FRESH ? STATD_OUTCOME_UNAVAILABLE : STATD_OUTCOME_FAILED,
				 NULL, NULL);
			return false;
		}
	}
	if (kind == STATD_RUN_RICH && ops->rich_dirs) {
		r = ops->rich_dirs(q->owner, t->ws_fd, &why);
		if (r < 0) {
			rts_log_errno(LOG_ERR, r, "channel %.12s: %s (%m); refusing the turn", ch->hash,
				      why ? why : "cannot make the session directories");
			turn_end(t, false, STATD_OUTCOME_FAILED, NULL, NULL);
			return false;
		}
	}
	/* After a link that never came up, runnerd is not tried again for a while. */
	if (t->started_ms < q->fail_fast_until_ms || ops->connect(q->owner) < 0) {
		turn_end(t, false, STATD_OUTCOME_UNAVAILABLE, NULL, NULL);
		return false;
	}
	uint64_t after = kind == STATD_RUN_SEALED ? (uint64_t)q->conf.turn_timeout_ms + STATD_BACKSTOP_EXTRA_MS
			 : kind == STATD_RUN_RICH ? q->conf.rich_turn_timeout_ms
						  : STATD_BACKSTOP_EXTRA_MS;
	r = turn_arm(t, after);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm its backstop timer: %m", t->id);
		turn_end(t, false, STATD_OUTCOME_FAILED, NULL, NULL);
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
	enum statd_outcome fail;
	if (!turn_send(t, &fail)) {
		turn_end(t, true, fail, NULL, NULL);
		return false;
	}
	return true;
}

/* ---- the queue ---- */

/* A rich channel's container after a mode change: stop the one that is stale, ensure the
 * one it needs. Fire and forget: without a link (or room) the sync after HELLO does it. */
static void rich_after_mode(struct statd_queue *q, struct statd_channel *ch, enum statd_mode old,
			    const char *old_profile, enum statd_mode mode, const char *profile)
{
	bool was_rich = old == STATD_MODE_RICH;
	bool is_rich = mode == STATD_MODE_RICH;
	if (!was_rich && !is_rich)
		return;
	if (was_rich && is_rich && old_profile && strcmp(old_profile, profile) == 0)
		return;
	if (q->ops->connect(q->owner) < 0)
		return;
	if (was_rich) {
		uint32_t seq = q->rich_seq + 1;
		if (q->ops->send_stop(q->owner, seq, ch->hash, is_rich ? RTS_RICH_STOP_CHANGED : RTS_RICH_STOP_OFF))
			q->rich_seq = seq;
	}
	if (!is_rich)
		return;
	cleanup_free char *path = NULL;
	const char *why = NULL;
	int fd = q->ops->workspace_open(q->owner, ch->hash, &path, &why);
	if (fd < 0) {
		rts_log_errno(LOG_ERR, fd, "channel %.12s: workspace: %s (%m); its container is not started",
			      ch->hash, why ? why : "unusable");
		return;
	}
	int r = q->ops->channel_key(q->owner, ch->key, ch->hash, &why);
	if (r < 0) {
		rts_log_errno(LOG_ERR, r, "channel %.12s: %s (%m); its container is not started", ch->hash,
			      why ? why : "the .channel-key record does not match");
		close(fd);
		return;
	}
	struct statd_rich_ensure e = {.seq = q->rich_seq + 1, .channel = ch->key, .channel_hash = ch->hash,
				      .profile = profile, .workspace = path, .workspace_fd = fd};
	if (q->ops->send_ensure(q->owner, &e))
		q->rich_seq = e.seq;
	else
		close(fd);
}

static void item_run_mode(struct statd_queue *q, struct statd_channel *ch, struct statd_item *it)
{
	const char *p = NULL;
	enum statd_mode old = q->ops->mode_of(q->owner, ch->key, &p);
	cleanup_free char *old_profile = p ? rts_xstrdup(p) : NULL;
	int r = q->ops->record_mode(q->owner, ch->key, it->mode, it->profile);
	struct statd_answer a = {.kind = STATD_ANSWER_MODE, .channel = ch->key, .mode = it->mode,
				 .profile = it->profile};
	/* A full table is the client's problem to solve, not a write failure. */
	if (r == -E2BIG || r == -EFBIG)
		a.error = STATD_REFUSAL_TOO_MANY_CHANNELS;
	else if (r < 0)
		a.error = STATD_REFUSAL_STATE_WRITE;
	else if (it->profile)
		log_info("channel %.12s: mode %s, profile %s", ch->hash, statd_mode_name(it->mode), it->profile);
	else
		log_info("channel %.12s: mode %s", ch->hash, statd_mode_name(it->mode));
	/* Only a sealed (on) channel keeps a warm spare at runnerd (DESIGN.md 8.4): off or
	 * rich drops it, so no sealed container holds the workspace beside a rich one. */
	if (r >= 0 && it->mode != STATD_MODE_ON && q->ops->send_spare_drop)
		q->ops->send_spare_drop(q->owner, ch->hash);
	item_answer(q, it, &a);
	if (r >= 0)
		rich_after_mode(q, ch, old, old_profile, it->mode, it->profile);
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
			/* A rich channel's sessions move only once its container is gone. */
			if (q->ops->mode_of(q->owner, ch->key, NULL) == STATD_MODE_RICH && !q->stopping) {
				turn_start(q, ch, it, STATD_RUN_FRESH);
			} else {
				item_run_fresh(q, ch, it);
				item_free(q, it);
			}
			break;
		case STATD_ITEM_TURN:
			if (q->stopping) {
				item_event(q, it, STATD_OUTCOME_CANCELLED, NULL, NULL);
				item_free(q, it);
			} else {
				turn_start(q, ch, it, it->rich ? STATD_RUN_RICH : STATD_RUN_SEALED);
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
	if (q->n_queued_turns >= STATD_QUEUED_TURNS_MAX || q->queued_bytes + tlen > STATD_QUEUED_BYTES_MAX ||
	    q->rich_bytes + m->images_len > STATD_QUEUED_RICH_BYTES_MAX)
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
	it->rich = m->rich;
	if (m->rich) {
		it->images_json = m->images_json;
		it->images_len = m->images_json ? m->images_len : 0;
		q->rich_bytes += it->images_len;
		it->att = m->attachment_list;
		it->n_att = m->n_attachments;
	}
	/* The route answer goes out before anything the turn can produce. */
	item_answer(q, it, &(struct statd_answer){.kind = STATD_ANSWER_SANDBOX, .channel = ch->key});
	channel_push(q, ch, it);
	channel_advance(q, ch);
	return STATD_REFUSAL_NONE;
}

static enum statd_refusal queue_simple(struct statd_queue *q, const char *channel, enum statd_item_kind kind,
				       enum statd_mode mode, const char *profile, struct statd_origin *o)
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
	it->profile = profile ? rts_xstrdup(profile) : NULL;
	channel_push(q, ch, it);
	channel_advance(q, ch);
	return STATD_REFUSAL_NONE;
}

enum statd_refusal statd_queue_mode(struct statd_queue *q, const char *channel, enum statd_mode mode,
				    const char *profile, struct statd_origin *o)
{
	return queue_simple(q, channel, STATD_ITEM_MODE, mode, mode == STATD_MODE_RICH ? profile : NULL, o);
}

enum statd_refusal statd_queue_fresh(struct statd_queue *q, const char *channel, struct statd_origin *o)
{
	return queue_simple(q, channel, STATD_ITEM_FRESH, STATD_MODE_OFF, NULL, o);
}

unsigned statd_queue_cancel(struct statd_queue *q, const char *channel)
{
	/* A cancel discards the channel's warm spare too (DESIGN.md 8.4), idle or not. */
	if (q->ops->send_spare_drop) {
		char hash[RTS_HASH_HEX_LEN + 1];
		rts_channel_hash(channel, hash);
		q->ops->send_spare_drop(q->owner, hash);
	}
	struct statd_channel *ch = channel_find(q, channel);
	if (!ch)
		return 0;
	unsigned n = channel_drop_turns(q, ch);
	struct statd_turn *t = ch->running;
	if (t && t->kind != STATD_RUN_FRESH) {
		n++;
		log_info("turn %s: cancel requested", t->id);
		/* Otherwise runnerd removes the container and answers with TURN_DONE. */
		if (turn_recall(t))
			turn_finish(t, STATD_OUTCOME_CANCELLED, NULL, NULL);
	} else if (!t) {
		channel_advance(q, ch);
	}
	return n;
}

void statd_queue_channel_status(const struct statd_queue *q, const char *channel, struct statd_channel_status *st)
{
	const struct statd_channel *ch = channel_find(q, channel);
	bool fresh_run = ch && ch->running && ch->running->kind == STATD_RUN_FRESH;
	*st = (struct statd_channel_status){
		.running = ch && ch->running && !fresh_run,
		.queued = ch ? ch->n_turns : 0,
		.fresh = ch && ch->fresh,
		.stopping = fresh_run,
	};
}

void statd_queue_totals(const struct statd_queue *q, unsigned *running, unsigned *queued)
{
	unsigned fresh = 0;
	for (const struct statd_turn *t = q->turns; t; t = t->next)
		fresh += t->kind == STATD_RUN_FRESH;
	*running = q->n_running - fresh;
	*queued = q->n_queued_turns;
}

/* ---- inputs from the runnerd link ---- */

/* The running turn of kind whose id is turn_id and that waits in state, or NULL. */
static struct statd_turn *turn_find(struct statd_queue *q, const char *turn_id, enum statd_run_kind kind,
				    enum statd_turn_state state)
{
	for (struct statd_turn *t = q->turns; t; t = t->next)
		if (t->kind == kind && t->state == state && strcmp(t->id, turn_id) == 0)
			return t;
	return NULL;
}

static enum statd_outcome outcome_of(enum rts_turn_status status)
{
	switch (status) {
	case RTS_TURN_OK:
		return STATD_OUTCOME_REPLY;
	case RTS_TURN_TIMEOUT:
		return STATD_OUTCOME_TIMEOUT;
	case RTS_TURN_CANCELLED:
		return STATD_OUTCOME_CANCELLED;
	case RTS_TURN_CLEANUP_FAILED:
		return STATD_OUTCOME_CLEANUP_FAILED;
	case RTS_TURN_ERROR:
	default:
		return STATD_OUTCOME_FAILED;
	}
}

void statd_queue_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
			   const char *reply)
{
	struct statd_turn *t = turn_find(q, turn_id, STATD_RUN_SEALED, STATD_TURN_SENT);
	if (!t) {
		log_debug("turn %s: TURN_DONE for a turn we no longer track, ignored", turn_id);
		return;
	}
	enum statd_outcome outcome = outcome_of(status);
	/* The reply is the guest's container output: it must be text a client can take as
	 * is. */
	if (outcome == STATD_OUTCOME_REPLY && !rts_utf8_valid(reply, strlen(reply))) {
		rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0, "reply is not valid UTF-8");
		outcome = STATD_OUTCOME_FAILED;
	}
	turn_finish(t, outcome, reply, NULL);
}

void statd_queue_rich_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
				struct statd_rich_reply *reply)
{
	struct statd_turn *t = turn_find(q, turn_id, STATD_RUN_RICH, STATD_TURN_SENT);
	if (!t) {
		log_debug("turn %s: RICH_TURN_DONE for a turn we no longer track, ignored", turn_id);
		q->ops->rich_reply_free(q->owner, reply);
		return;
	}
	enum statd_outcome outcome = outcome_of(status);
	if (outcome == STATD_OUTCOME_REPLY && !reply) {
		rts_log_turn(LOG_WARNING, t->id, t->ch->hash, "error", 0, "the reply was not usable");
		outcome = STATD_OUTCOME_FAILED;
	}
	turn_finish(t, outcome, NULL, outcome == STATD_OUTCOME_REPLY ? reply : NULL);
	q->ops->rich_reply_free(q->owner, reply);
}

void statd_queue_attach_data(struct statd_queue *q, const char *turn_id, uint32_t index, int32_t result,
			     const char *mime, int data_fd)
{
	struct statd_turn *t = turn_find(q, turn_id, STATD_RUN_RICH, STATD_TURN_FETCHING);
	if (!t || index != t->next_att) {
		log_debug("turn %s: ATTACH_DATA %u for an attachment we no longer wait for, ignored", turn_id, index);
		return;
	}
	rich_attach_data(t, result, mime, data_fd);
}

void statd_queue_rich_state(struct statd_queue *q, uint32_t seq, const char *channel_hash, uint32_t state,
			    int32_t error)
{
	for (struct statd_turn *t = q->turns; t; t = t->next)
		if (t->kind == STATD_RUN_FRESH && t->state == STATD_TURN_SENT && t->seq == seq &&
		    strcmp(t->ch->hash, channel_hash) == 0) {
			fresh_stopped(t, state, error);
			return;
		}
	/* The answer of a fire-and-forget request (a mode change, the sync, a turn's ensure):
	 * runnerd logs the detail; a failure is worth a line here too. */
	if (state == RTS_RICH_STATE_FAILED)
		rts_log_errno(LOG_WARNING, error ? error : -EIO, "channel %.12s: runnerd could not %s its container: %m",
			      channel_hash, "start or stop");
	else
		log_debug("channel %.12s: container %s", channel_hash,
			  state == RTS_RICH_STATE_READY ? "ready" : "stopped");
}

/* ---- the sync after HELLO ---- */

static void sync_free(struct statd_queue *q)
{
	struct statd_sync *s = q->sync;
	if (!s)
		return;
	rts_strv_free(s->channels);
	rts_strv_free(s->profiles);
	free(s);
	q->sync = NULL;
}

/* Ensure what is left of the sync while the link takes it, then RICH_SYNC. */
static void sync_continue(struct statd_queue *q)
{
	struct statd_sync *s = q->sync;
	while (s && s->next < s->n) {
		const char *key = s->channels[s->next];
		struct statd_channel *ch = channel_find(q, key);
		char hash[RTS_HASH_HEX_LEN + 1];
		rts_channel_hash(key, hash);
		/* Being stopped for a fresh start: a RICH_ENSURE now would start it again while
		 * its sessions move. Its own ENSURE comes with its next turn. */
		if (ch && ch->running && ch->running->kind == STATD_RUN_FRESH) {
			s->next++;
			continue;
		}
		cleanup_free char *path = NULL;
		const char *why = NULL;
		int fd = q->ops->workspace_open(q->owner, hash, &path, &why);
		int r = fd < 0 ? fd : q->ops->channel_key(q->owner, key, hash, &why);
		if (r < 0) {
			rts_log_errno(LOG_ERR, r, "channel %.12s: %s (%m); its container is not adopted or started", hash,
				      why ? why : "unusable");
			if (fd >= 0)
				close(fd);
			s->next++;
			continue;
		}
		struct statd_rich_ensure e = {.seq = q->rich_seq + 1, .channel = key, .channel_hash = hash,
					      .profile = s->profiles[s->next], .workspace = path, .workspace_fd = fd};
		if (!q->ops->send_ensure(q->owner, &e)) {
			close(fd);
			return; /* on with statd_queue_link_ready */
		}
		q->rich_seq = e.seq;
		s->sent++;
		s->next++;
	}
	if (s && q->ops->send_sync(q->owner, s->sent)) {
		log_info("rich channels: %u ensured, sync sent", s->sent);
		sync_free(q);
	}
}

void statd_queue_rich_sync(struct statd_queue *q, const char *const *channels, const char *const *profiles, size_t n)
{
	sync_free(q);
	if (q->stopping)
		return;
	struct statd_sync *s = rts_xcalloc(1, sizeof(*s));
	s->channels = rts_xcalloc(n + 1, sizeof(char *));
	s->profiles = rts_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		s->channels[i] = rts_xstrdup(channels[i]);
		s->profiles[i] = rts_xstrdup(profiles[i]);
	}
	s->n = n;
	q->sync = s;
	sync_continue(q);
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
		turn_finish(v[i], outcome, NULL, NULL);
}

void statd_queue_link_ready(struct statd_queue *q)
{
	sync_continue(q);
	size_t n;
	cleanup_free struct statd_turn **v = turns_snapshot(q, &n);
	/* A rich turn that cannot be prepared ends (and maybe starts its channel's next):
	 * the snapshot keeps the walk safe. */
	for (size_t i = 0; i < n; i++) {
		enum statd_outcome fail;
		if (v[i]->state == STATD_TURN_WAITING && !turn_send(v[i], &fail))
			turn_finish(v[i], fail, NULL, NULL);
	}
}

void statd_queue_link_down(struct statd_queue *q, bool was_up)
{
	sync_free(q);
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
	sync_free(q);
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
			turn_finish(v[i], STATD_OUTCOME_CANCELLED, NULL, NULL);
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
	sync_free(q);
	/* Only at exit: whatever is left is released without answers. */
	while (q->turns) {
		struct statd_turn *t = q->turns;
		q->turns = t->next;
		t->ch->running = NULL;
		q->ops->timer_stop(q->owner, t->backstop);
		if (t->ws_fd >= 0)
			close(t->ws_fd);
		free(t->ws_path);
		free(t->profile);
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
