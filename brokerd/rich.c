/* SPDX-License-Identifier: Apache-2.0 */
/* Rich channels on the main thread: runnerd's messages, the channels' lifecycle, settling
 * turns and answering for them, the sweep (rich.h gives the whole picture). */
#include "config.h"

#include <microhttpd.h>
#include <sys/eventfd.h>

#include "brokerd/keys.h"
#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/memfd.h"
#include "common/util.h"

#define SWEEP_EVERY_US 250000

/* A RICH_WAIT_READY not answered yet. */
struct rich_waiter {
	struct rts_link *link;
	uint64_t deadline_ms;
	struct rich_waiter *next;
};

struct brokerd_rich {
	const struct rts_config *cfg;
	sd_event *ev;
	sd_event_source *sweep;
	int poke_fd;
	sd_event_source *poke_src;
	struct rich_channel *channels; /* serving */
	unsigned n_channels;	       /* these and those being torn down */
	bool stopping;
	void (*on_idle)(void *arg);
	void *idle_arg;

	/* Channels being torn down; closer threads hand finished ones back here and poke. */
	struct brokerd_closers closers;
};

/* The fetch side (rich_fetch.c) keeps its own state; these are its hooks here. */
bool brokerd_rich_fetch_idle(void);
void brokerd_rich_fetch_deliver(struct brokerd_rich *rich);
void brokerd_rich_fetch_link_down(struct rts_link *l);
void brokerd_rich_fetch_stop(void);

void brokerd_rich_poke(struct brokerd_rich *rich)
{
	uint64_t one = 1;
	if (write(rich->poke_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warning_errno(errno, "cannot wake the main loop: %m");
}

const char *brokerd_rich_image(const struct rich_channel *ch)
{
	return ch->cfg->rich.image;
}

static void arm_sweep(struct brokerd_rich *rich)
{
	int enabled = SD_EVENT_OFF;
	sd_event_source_get_enabled(rich->sweep, &enabled);
	if (enabled != SD_EVENT_OFF)
		return;
	sd_event_source_set_time_relative(rich->sweep, SWEEP_EVERY_US);
	sd_event_source_set_enabled(rich->sweep, SD_EVENT_ONESHOT);
}

/* ---- answers on the link ---- */

static void send_ready(struct rts_link *l, const char *hash, int result, uint8_t caps, bool history)
{
	if (!l)
		return;
	int r = rts_link_send_rich_ready(l, &(struct rts_msg_rich_ready){
						    .channel_hash = hash,
						    .result = result,
						    .capabilities = caps,
						    .private_history = history ? 1 : 0,
					    });
	if (r < 0)
		log_warning_errno(r, "channel %.12s: cannot answer RICH_WAIT_READY: %m", hash);
}

/* BROKER_RICH_DONE with reply_fd (taken; an empty memfd is made when it is -1). */
static void send_done(struct rts_link *l, const char *turn_id, enum rts_turn_status status, unsigned calls,
		      int reply_fd)
{
	if (reply_fd < 0)
		reply_fd = rts_memfd_from_buffer("rts-reply", NULL, 0);
	if (!l || reply_fd < 0) {
		if (reply_fd >= 0)
			close(reply_fd);
		if (l)
			log_error_errno(reply_fd, "turn %s: cannot make an empty memfd for BROKER_RICH_DONE: %m", turn_id);
		return;
	}
	int r = rts_link_send_broker_rich_done(l, &(struct rts_msg_broker_rich_done){
							  .turn_id = turn_id,
							  .status = status,
							  .calls = calls,
							  .fd = reply_fd,
						  });
	if (r < 0)
		log_warning_errno(r, "turn %s: cannot send BROKER_RICH_DONE: %m", turn_id);
}

/* ---- turns ---- */

void brokerd_rich_settle_locked(struct rich_channel *ch, struct rich_turn *t, enum rts_turn_status status,
				const char *cause, int reply_fd)
{
	if (t->state == RICH_TURN_SETTLING) {
		if (reply_fd >= 0)
			close(reply_fd);
		return;
	}
	t->state = RICH_TURN_SETTLING;
	t->status = status;
	t->cause = cause;
	t->reply_fd = reply_fd;
	t->blocked = true;
	atomic_store(&t->closing, true);
	uint64_t one = 1;
	if (write(t->wake_fd, &one, sizeof(one)) < 0)
		log_warning_errno(errno, "turn %s: cannot wake its calls: %m", t->b.turn_id);
	/* Seed: a reply packet outside its turn is cancelled with it. */
	brokerd_rich_http_cut_packets_locked(ch, t);
	pthread_cond_broadcast(&ch->cond);
	brokerd_rich_poke(ch->rich);
}

void brokerd_rich_turn_unuse_locked(struct rich_channel *ch, struct rich_turn *t)
{
	if (t->users > 0)
		t->users--;
	if (t->users == 0) {
		pthread_cond_broadcast(&ch->cond);
		if (t->state == RICH_TURN_SETTLING)
			brokerd_rich_poke(ch->rich);
	}
}

/* Answer for ch's settled turn once nothing uses it any more, and forget it. Main thread. */
static void finish_turn(struct rich_channel *ch, bool force)
{
	pthread_mutex_lock(&ch->lock);
	struct rich_turn *t = ch->turn;
	if (!t || t->state != RICH_TURN_SETTLING || (t->users > 0 && !force)) {
		pthread_mutex_unlock(&ch->lock);
		return;
	}
	ch->turn = NULL;
	int fd = steal_fd(&t->reply_fd);
	enum rts_turn_status status = t->status;
	unsigned calls = t->calls;
	const char *cause = t->cause;
	pthread_cond_broadcast(&ch->cond);
	pthread_mutex_unlock(&ch->lock);

	uint64_t took = rts_now_ms() - t->admitted_ms;
	if (status == RTS_TURN_OK)
		rts_log_turn(LOG_INFO, t->b.turn_id, ch->hash, "ok", took, "rich turn settled after %u calls", calls);
	else
		/* Seed, "Host options and hooks": failed turns are logged with their cause. */
		rts_log_turn(LOG_WARNING, t->b.turn_id, ch->hash, rts_turn_status_word(status), took,
			     "rich turn %s after %u calls: %s", rts_turn_status_word(status), calls, cause ? cause : "unknown cause");
	brokerd_rich_audit_summary(ch, t->b.turn_id);
	send_done(ch->owner, t->b.turn_id, status, calls, fd);
	brokerd_rich_turn_free(t);
}

/* ---- channels ---- */

static void answer_waiters(struct rich_channel *ch, int result)
{
	pthread_mutex_lock(&ch->lock);
	uint8_t caps = ch->caps;
	bool history = ch->private_history;
	pthread_mutex_unlock(&ch->lock);
	while (ch->waiters) {
		struct rich_waiter *w = ch->waiters;
		ch->waiters = w->next;
		send_ready(w->link, ch->hash, result, caps, history);
		free(w);
	}
}

static void channel_free(struct rich_channel *ch)
{
	brokerd_gate_stop(&ch->gate);
	while (ch->waiters) {
		struct rich_waiter *w = ch->waiters;
		ch->waiters = w->next;
		free(w);
	}
	pthread_mutex_lock(&ch->lock);
	brokerd_rich_http_drop_handoffs_locked(ch);
	pthread_mutex_unlock(&ch->lock);
	brokerd_rich_audit_summary(ch, ch->turn ? ch->turn->b.turn_id : NULL);
	if (ch->turn)
		brokerd_rich_turn_free(ch->turn);
	pthread_cond_destroy(&ch->cond);
	pthread_mutex_destroy(&ch->lock);
	free(ch->channel);
	free(ch);
}

struct closer_arg {
	struct brokerd_rich *rich;
	struct rich_channel *ch;
};

/* Stop the channel's HTTP server (joins its connection threads, which may wait for a tool
 * process's kill grace) and wait for its turn's hook thread; then hand it back. */
static void *closer_thread(void *arg)
{
	struct closer_arg *ca = arg;
	struct rich_channel *ch = ca->ch;
	if (ch->mhd)
		MHD_stop_daemon(ch->mhd);
	ch->mhd = NULL;
	pthread_mutex_lock(&ch->lock);
	brokerd_rich_http_drop_handoffs_locked(ch);
	while (ch->turn && ch->turn->users > 0)
		pthread_cond_wait(&ch->cond, &ch->lock);
	pthread_mutex_unlock(&ch->lock);
	struct brokerd_rich *rich = ca->rich;
	brokerd_closers_done(&rich->closers, &ch->closer);
	brokerd_rich_poke(rich);
	free(ca);
	return NULL;
}

/* Take ch out of service and tear it down off the main thread; its turn ends as cancelled
 * (answered when the teardown is done) and its RICH_WAIT_READY waiters get -ENOENT. */
static void channel_close(struct brokerd_rich *rich, struct rich_channel *ch, const char *why)
{
	for (struct rich_channel **p = &rich->channels; *p; p = &(*p)->next)
		if (*p == ch) {
			*p = ch->next;
			break;
		}
	brokerd_gate_stop(&ch->gate);
	answer_waiters(ch, -ENOENT);
	pthread_mutex_lock(&ch->lock);
	if (ch->turn)
		brokerd_rich_settle_locked(ch, ch->turn, RTS_TURN_CANCELLED, why, -1);
	atomic_store(&ch->closing, true);
	pthread_cond_broadcast(&ch->cond);
	pthread_mutex_unlock(&ch->lock);
	log_info("rich channel %.12s: listener closed (%s)", ch->hash, why);

	struct closer_arg *ca = rts_xmalloc(sizeof(*ca));
	*ca = (struct closer_arg){.rich = rich, .ch = ch};
	int r = brokerd_closers_start(&rich->closers, &ch->closer, closer_thread, ca);
	if (r != 0) {
		log_warning_errno(r, "channel %.12s: no closer thread, closing inline: %m", ch->hash);
		closer_thread(ca);
	}
}

static void check_idle(struct brokerd_rich *rich)
{
	if (rich->stopping && rich->n_channels == 0 && brokerd_rich_fetch_idle() && rich->on_idle)
		rich->on_idle(rich->idle_arg);
}

/* Channels whose closer thread is done: answer for their turn and free them. */
static void reap_closed(struct brokerd_rich *rich)
{
	for (struct brokerd_closer *c; (c = brokerd_closers_reap(&rich->closers));) {
		struct rich_channel *ch = brokerd_entry(c, struct rich_channel, closer);
		finish_turn(ch, true);
		channel_free(ch);
		rich->n_channels--;
	}
}

static struct rich_channel *find_channel(struct brokerd_rich *rich, const char *hash)
{
	for (struct rich_channel *ch = rich->channels; ch; ch = ch->next)
		if (strcmp(ch->hash, hash) == 0)
			return ch;
	return NULL;
}

static int on_poke(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd_rich *rich = userdata;
	uint64_t v;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warning_errno(errno, "reading the rich eventfd: %m");
	for (struct rich_channel *ch = rich->channels; ch; ch = ch->next) {
		pthread_mutex_lock(&ch->lock);
		bool news = ch->ready_news;
		ch->ready_news = false;
		bool announced = ch->announced;
		pthread_mutex_unlock(&ch->lock);
		if (news && announced)
			answer_waiters(ch, 0);
		finish_turn(ch, false);
	}
	reap_closed(rich);
	brokerd_rich_fetch_deliver(rich);
	check_idle(rich);
	return 0;
}

static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct brokerd_rich *rich = userdata;
	uint64_t now = rts_now_ms();
	for (struct rich_channel *ch = rich->channels; ch; ch = ch->next) {
		brokerd_gate_sweep(&ch->gate, now);
		brokerd_rich_http_sweep(ch, now);
		pthread_mutex_lock(&ch->lock);
		struct rich_turn *t = ch->turn;
		if (t && t->state != RICH_TURN_SETTLING && now >= t->b.deadline_ms)
			brokerd_rich_settle_locked(ch, t, RTS_TURN_TIMEOUT, "the turn deadline passed", -1);
		pthread_mutex_unlock(&ch->lock);
		for (struct rich_waiter **p = &ch->waiters; *p;) {
			struct rich_waiter *w = *p;
			if (now >= w->deadline_ms) {
				*p = w->next;
				send_ready(w->link, ch->hash, -ETIME, 0, false);
				free(w);
			} else {
				p = &w->next;
			}
		}
	}
	if (rich->channels) {
		sd_event_source_set_time_relative(s, SWEEP_EVERY_US);
		sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	}
	return 0;
}

/* ---- runnerd's messages ---- */

static bool field_ok(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	return n >= min && n <= max && rts_utf8_valid(s, n);
}

static int answer_bound(struct rts_link *l, const char *hash, int result)
{
	return rts_link_send_rich_bound(l, &(struct rts_msg_rich_bound){.channel_hash = hash, .result = result});
}

int brokerd_rich_on_bind(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_bind *m)
{
	const struct rts_config *cfg = rich->cfg;
	if (rich->stopping)
		return answer_bound(l, m->channel_hash, -ESHUTDOWN);
	char hash[RTS_HASH_HEX_LEN + 1];
	if (!field_ok(m->channel, 1, RTS_CHANNEL_MAX))
		return answer_bound(l, m->channel_hash, -EINVAL);
	rts_channel_hash(m->channel, hash);
	if (strcmp(hash, m->channel_hash) != 0)
		return answer_bound(l, m->channel_hash, -EINVAL);
	const struct rts_rich_profile *profile = rts_rich_profile_find(&cfg->rich, m->profile);
	if (!profile) {
		log_warning("rich channel %.12s refused: no rich profile of that name is configured", hash);
		return answer_bound(l, hash, -EINVAL);
	}
	int r = brokerd_gate_check_listener(m->fd);
	if (r < 0)
		return answer_bound(l, hash, r);
	/* A re-created container or a restarted runnerd binds the channel again. */
	struct rich_channel *old = find_channel(rich, hash);
	if (old)
		channel_close(rich, old, "replaced by a new listener");
	if (rich->n_channels >= BROKERD_RICH_CHANNELS_MAX) {
		log_warning("rich channel %.12s refused: %u channels are bound already", hash, BROKERD_RICH_CHANNELS_MAX);
		return answer_bound(l, hash, -EBUSY);
	}

	struct rich_channel *ch = rts_xcalloc(1, sizeof(*ch));
	ch->rich = rich;
	ch->cfg = cfg;
	ch->profile = profile;
	ch->channel = rts_xstrdup(m->channel);
	snprintf(ch->hash, sizeof(ch->hash), "%s", hash);
	ch->bound_ms = rts_now_ms();
	ch->owner = l;
	ch->last_effort = cfg->rich.effort_default;
	ch->audit_max = cfg->rich.max_calls + BROKERD_RICH_AUDIT_EXTRA;
	atomic_init(&ch->audit_unlogged, 0);
	atomic_init(&ch->closing, false);
	pthread_mutex_init(&ch->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ch->cond, &ca);
	pthread_condattr_destroy(&ca);
	ch->gate.listen_fd = -1;
	if ((r = brokerd_rich_http_start(ch, rich->ev, steal_fd(&m->fd))) < 0) {
		log_warning_errno(r, "rich channel %.12s: cannot serve its broker socket: %m", hash);
		if (ch->mhd)
			MHD_stop_daemon(ch->mhd);
		channel_free(ch);
		return answer_bound(l, hash, r == -ENOTSOCK ? r : -EIO);
	}
	ch->next = rich->channels;
	rich->channels = ch;
	rich->n_channels++;
	arm_sweep(rich);
	log_info("rich channel %.12s: listener bound (profile %s)", hash, profile->name);
	return answer_bound(l, hash, 0);
}

int brokerd_rich_on_wait_ready(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_wait_ready *m)
{
	struct rich_channel *ch = find_channel(rich, m->channel_hash);
	if (!ch) {
		send_ready(l, m->channel_hash, -ENOENT, 0, false);
		return 0;
	}
	pthread_mutex_lock(&ch->lock);
	bool announced = ch->announced;
	uint8_t caps = ch->caps;
	bool history = ch->private_history;
	pthread_mutex_unlock(&ch->lock);
	if (announced) {
		send_ready(l, ch->hash, 0, caps, history);
		return 0;
	}
	if (m->deadline_ms <= rts_now_ms()) {
		send_ready(l, ch->hash, -ETIME, 0, false);
		return 0;
	}
	struct rich_waiter *w = rts_xcalloc(1, sizeof(*w));
	*w = (struct rich_waiter){.link = l, .deadline_ms = m->deadline_ms, .next = ch->waiters};
	ch->waiters = w;
	return 0;
}

int brokerd_rich_on_unbind(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_unbind *m)
{
	struct rich_channel *ch = find_channel(rich, m->channel_hash);
	if (ch)
		channel_close(rich, ch, "unbound by runnerd");
	/* The listener is closed and no new call starts; runnerd removes the container
	 * next, which ends whatever the worker still has open. */
	int r = rts_link_send_rich_unbound(l, &(struct rts_msg_rich_unbound){.channel_hash = m->channel_hash});
	if (r < 0)
		log_warning_errno(r, "cannot answer RICH_UNBIND: %m");
	return 0;
}

static struct rich_channel *find_turn(struct brokerd_rich *rich, const char *turn_id)
{
	for (struct rich_channel *ch = rich->channels; ch; ch = ch->next) {
		pthread_mutex_lock(&ch->lock);
		bool found = ch->turn && strcmp(ch->turn->b.turn_id, turn_id) == 0;
		pthread_mutex_unlock(&ch->lock);
		if (found)
			return ch;
	}
	return NULL;
}

/* Refuse a turn at once: BROKER_RICH_DONE with ERROR. */
static int refuse_turn(struct rts_link *l, const char *turn_id, const char *hash, const char *why)
{
	rts_log_turn(LOG_WARNING, rts_turn_id_valid(turn_id) ? turn_id : NULL, hash, "error", 0,
		     "rich turn refused: %s", why);
	send_done(l, turn_id, RTS_TURN_ERROR, 0, -1);
	return 0;
}

int brokerd_rich_on_turn(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_broker_rich_turn *m)
{
	const struct rts_rich_conf *rc = &rich->cfg->rich;
	if (rich->stopping)
		return refuse_turn(l, m->turn_id, m->channel_hash, "shutting down");
	struct rich_channel *ch = find_channel(rich, m->channel_hash);
	if (!ch)
		return refuse_turn(l, m->turn_id, m->channel_hash, "the channel has no bound listener");
	if (!rts_turn_id_valid(m->turn_id) || strcmp(m->channel, ch->channel) != 0 ||
	    !field_ok(m->speaker_id, 1, RTS_SPEAKER_FIELD_MAX) || !field_ok(m->speaker_name, 0, RTS_SPEAKER_FIELD_MAX) ||
	    !field_ok(m->principal_id, 0, RTS_SPEAKER_FIELD_MAX))
		return refuse_turn(l, m->turn_id, ch->hash, "a field of the turn is invalid");
	if (strcmp(m->profile, ch->profile->name) != 0)
		return refuse_turn(l, m->turn_id, ch->hash, "the turn names another profile than the channel's listener");
	uint64_t now = rts_now_ms();
	if (m->deadline_ms <= now || m->deadline_ms - now > rc->turn_timeout_ms)
		return refuse_turn(l, m->turn_id, ch->hash, "the turn's deadline is past or beyond rich.turnTimeoutMs");
	if (find_turn(rich, m->turn_id))
		return refuse_turn(l, m->turn_id, ch->hash, "a turn of that id is admitted already");
	pthread_mutex_lock(&ch->lock);
	bool busy = ch->turn != NULL;
	pthread_mutex_unlock(&ch->lock);
	if (busy)
		return refuse_turn(l, m->turn_id, ch->hash, "the channel has an admitted turn already");

	struct brokerd_binding b = {
		.channel = (char *)m->channel,
		.speaker_id = (char *)m->speaker_id,
		.speaker_name = (char *)m->speaker_name,
		.principal_id = (char *)m->principal_id,
		.deadline_ms = m->deadline_ms,
	};
	snprintf(b.turn_id, sizeof(b.turn_id), "%s", m->turn_id);
	snprintf(b.channel_hash, sizeof(b.channel_hash), "%s", ch->hash);
	/* Only the seals and the size here: parsing up to 96 MiB is the admission thread's
	 * work, not the main loop's (rich_turn.c). */
	size_t size;
	int r = rts_memfd_check(m->fd, RTS_RICH_TURN_INPUT_MAX, &size);
	if (r < 0)
		return refuse_turn(l, m->turn_id, ch->hash,
				   r == -EFBIG ? "turn input refused: larger than the limit"
					       : "turn input refused: not a sealed memfd");
	struct rich_turn *t = brokerd_rich_turn_new(ch, &b, steal_fd(&m->fd));
	pthread_mutex_lock(&ch->lock);
	ch->turn = t;
	/* Seed: the start-up scope is revoked on the first bind. */
	ch->scope_revoked = true;
	ch->audit_calls = 0; /* the turn's calls are numbered from 1 */
	pthread_mutex_unlock(&ch->lock);
	/* What the stretch before the turn did not log one by one. */
	brokerd_rich_audit_summary(ch, NULL);
	rts_log_turn(LOG_INFO, t->b.turn_id, ch->hash, "admitted", 0, "rich turn admitted");
	r = brokerd_rich_turn_admit(ch);
	if (r < 0) {
		pthread_mutex_lock(&ch->lock);
		brokerd_rich_settle_locked(ch, t, RTS_TURN_ERROR, "cannot start the admission hooks", -1);
		pthread_mutex_unlock(&ch->lock);
	}
	return 0;
}

int brokerd_rich_on_cancel(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_broker_rich_cancel *m)
{
	struct rich_channel *ch = find_turn(rich, m->turn_id);
	if (!ch)
		return 0; /* unknown ids are ignored */
	pthread_mutex_lock(&ch->lock);
	if (ch->turn)
		brokerd_rich_settle_locked(ch, ch->turn, RTS_TURN_CANCELLED, "cancelled by runnerd", -1);
	pthread_mutex_unlock(&ch->lock);
	return 0;
}

int brokerd_rich_on_attach_fetch(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_broker_attach_fetch *m)
{
	return brokerd_rich_fetch_start(rich, l, m);
}

void brokerd_rich_link_down(struct brokerd_rich *rich, struct rts_link *l)
{
	for (struct rich_channel *ch = rich->channels, *next; ch; ch = next) {
		next = ch->next;
		if (ch->owner == l) {
			ch->owner = NULL;
			channel_close(rich, ch, "its runnerd link is gone");
		}
	}
	for (struct brokerd_closer *c = rich->closers.closing; c; c = c->next) {
		struct rich_channel *ch = brokerd_entry(c, struct rich_channel, closer);
		if (ch->owner == l)
			ch->owner = NULL;
		for (struct rich_waiter *w = ch->waiters; w; w = w->next)
			if (w->link == l)
				w->link = NULL;
	}
	for (struct rich_channel *ch = rich->channels; ch; ch = ch->next)
		for (struct rich_waiter *w = ch->waiters; w; w = w->next)
			if (w->link == l)
				w->link = NULL;
	brokerd_rich_fetch_link_down(l);
}

void brokerd_rich_stop(struct brokerd_rich *rich)
{
	rich->stopping = true;
	while (rich->channels)
		channel_close(rich, rich->channels, "brokerd stops");
	brokerd_rich_fetch_stop();
	check_idle(rich);
}

bool brokerd_rich_idle(const struct brokerd_rich *rich)
{
	return rich->n_channels == 0 && brokerd_rich_fetch_idle();
}

struct brokerd_rich *brokerd_rich_new(const struct rts_config *cfg, sd_event *ev, void (*on_idle)(void *arg),
				      void *arg)
{
	struct brokerd_rich *rich = rts_xcalloc(1, sizeof(*rich));
	rich->cfg = cfg;
	rich->ev = ev;
	rich->on_idle = on_idle;
	rich->idle_arg = arg;
	brokerd_closers_init(&rich->closers);
	rich->poke_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int r;
	if (rich->poke_fd < 0)
		fatal_f("eventfd: %s", strerror(errno));
	if ((r = sd_event_add_io(ev, &rich->poke_src, rich->poke_fd, EPOLLIN, on_poke, rich)) < 0 ||
	    (r = sd_event_add_time_relative(ev, &rich->sweep, CLOCK_MONOTONIC, SWEEP_EVERY_US, 50000, on_sweep,
					    rich)) < 0)
		fatal_f("cannot set up the rich event sources: %s", strerror(-r));
	sd_event_source_set_enabled(rich->sweep, SD_EVENT_OFF);
	return rich;
}

void brokerd_rich_free(struct brokerd_rich *rich)
{
	if (!rich)
		return;
	/* Normally none: stopping waited for them. */
	reap_closed(rich);
	sd_event_source_disable_unref(rich->poke_src);
	sd_event_source_disable_unref(rich->sweep);
	close(rich->poke_fd);
	brokerd_closers_destroy(&rich->closers);
	free(rich);
}
