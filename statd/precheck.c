/* SPDX-License-Identifier: Apache-2.0 */
/* The precheck runner in statd (DESIGN.md 8.3; seed: "Precheck scripts"): the two control
 * ops, the prechecks running at runnerd, and their events.
 *
 * A precheck is not a channel turn: it does not wait in the channel's queue (the seed runs
 * one per firing of a schedule, beside whatever the channel does) and it touches no
 * workspace or channel mode. Instead the number running is bounded, STATD_PRECHECKS_MAX in
 * all and STATD_PRECHECKS_PER_CHANNEL per channel, and a request beyond either is refused
 * with an error event ("busy").
 *
 * Answers and events on the control connection:
 *   - an invalid request gets an answer {"id"?,"error":"invalid_request","detail"}, and a
 *     config without "precheck" {"id","error":"not_configured"}, like the other ops;
 *   - a valid request gets no answer of its own (its answer slot is given up, so later
 *     requests on the connection are not held back for a run's minute) and exactly one
 *     event later:
 *       {"id","event":"error","error":CODE}   it never reached runnerd: busy,
 *                                              shutting_down, unavailable
 *       {"id","event":"precheck","wake":...}  its outcome: the script's answer, or
 *                                              wake:true with an error for a throw, a wrong
 *                                              answer, a timeout, or a run that failed
 *                                              (a generic text: nothing of a failed run's
 *                                              bytes is passed on).
 *
 * Shutdown: waiting prechecks end with shutting_down; running ones get PRECHECK_CANCEL
 * and statd waits (STATD_SHUTDOWN_MS at most) for runnerd's PRECHECK_DONE, which comes
 * once their containers are removed. */
#include "config.h"

#include "common/ids.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/timer.h"
#include "common/util.h"
#include "statd/precheck_request.h"
#include "statd/statd.h"

enum precheck_state {
	PRECHECK_WAITING, /* waiting for the link to take PRECHECK_RUN */
	PRECHECK_SENT,	  /* PRECHECK_RUN handed to the link, waiting for PRECHECK_DONE */
};

struct statd_precheck {
	struct statd_precheck *prev, *next;
	struct statd *d;
	char id[RTS_TURN_ID_LEN + 1];
	char hash[RTS_HASH_HEX_LEN + 1];
	enum precheck_state state;
	bool cancel_sent;
	struct statd_conn *conn; /* reference */
	uint64_t seq;
	json_object *req_id; /* the request's id (reference) */
	uint64_t started_ms;
	struct rts_timer *backstop;
	/* PRECHECK_RUN's fields, kept until it is handed over. */
	char *channel, *target, *tier, *script, *approved, *fired_at, *time_zone, *today, *schedule;
};

struct statd_prechecks {
	struct statd_precheck *list;
	unsigned n;
	bool stopping;
	struct rts_timer *stop_timer;
};

/* ---- events ---- */

static void emit(struct statd_precheck *p, json_object *ev)
{
	statd_conn_event(p->conn, p->seq, ev);
}

static json_object *event_new(struct statd_precheck *p, const char *kind)
{
	json_object *e = json_object_new_object();
	json_object_object_add(e, "id", json_object_get(p->req_id));
	json_object_object_add(e, "event", json_object_new_string(kind));
	return e;
}

/* {"id","event":"error","error":code}: the precheck never reached runnerd. */
static void emit_error(struct statd_precheck *p, const char *code)
{
	json_object *e = event_new(p, "error");
	json_object_object_add(e, "error", json_object_new_string(code));
	emit(p, e);
}

/* {"id","event":"precheck","wake":true,"error":text}. */
static void emit_wake_error(struct statd_precheck *p, const char *text)
{
	json_object *e = event_new(p, "precheck");
	json_object_object_add(e, "wake", json_object_new_boolean(1));
	json_object_object_add(e, "error", json_object_new_string(text));
	emit(p, e);
}

/* The generic words for a run that ended without the script's answer. They reach the
 * agent that wrote the script, so they say what happened and nothing of how. */
static void emit_failure(struct statd_precheck *p, enum rts_turn_status status)
{
	char text[160];
	switch (status) {
	case RTS_TURN_TIMEOUT:
		snprintf(text, sizeof(text), "the precheck did not finish within %u ms and was stopped",
			 p->d->cfg->precheck.timeout_ms);
		break;
	case RTS_TURN_CANCELLED:
		snprintf(text, sizeof(text), "the precheck was cancelled before it finished");
		break;
	default:
		snprintf(text, sizeof(text), "the precheck run failed without an answer");
		break;
	}
	emit_wake_error(p, text);
}

/* ---- the list ---- */

static void precheck_free(struct statd_precheck *p)
{
	rts_timer_stop(p->backstop);
	statd_conn_unref(p->conn);
	json_object_put(p->req_id);
	free(p->channel);
	free(p->target);
	free(p->tier);
	free(p->script);
	free(p->approved);
	free(p->fired_at);
	free(p->time_zone);
	free(p->today);
	free(p->schedule);
	free(p);
}

/* Exit once the channel queues are done and no precheck is left (main.c). */
static void maybe_exit(struct statd *d)
{
	struct statd_prechecks *ps = d->prechecks;
	if (!ps->stopping || ps->n > 0)
		return;
	rts_timer_stop(ps->stop_timer);
	ps->stop_timer = NULL;
	statd_maybe_exit(d);
}

/* Take p off the list: an unsent PRECHECK_RUN is taken back from the link (runnerd never
 * hears of it), its outcome logged, p freed. */
static void precheck_end(struct statd_precheck *p, const char *outcome)
{
	struct statd *d = p->d;
	struct statd_prechecks *ps = d->prechecks;
	if (p->state == PRECHECK_SENT)
		(void)statd_link_withdraw(d, p);
	if (p->prev)
		p->prev->next = p->next;
	else
		ps->list = p->next;
	if (p->next)
		p->next->prev = p->prev;
	ps->n--;
	uint64_t ms = rts_now_ms() - p->started_ms;
	rts_log_turn(LOG_INFO, p->id, p->hash, outcome, ms ? ms : 1, "precheck finished: %s", outcome);
	precheck_free(p);
	maybe_exit(d);
}

static struct statd_precheck *find(struct statd *d, const char *id)
{
	for (struct statd_precheck *p = d->prechecks->list; p; p = p->next)
		if (strcmp(p->id, id) == 0)
			return p;
	return NULL;
}

static unsigned in_channel(struct statd *d, const char *hash)
{
	unsigned n = 0;
	for (struct statd_precheck *p = d->prechecks->list; p; p = p->next)
		n += strcmp(p->hash, hash) == 0;
	return n;
}

/* Ask runnerd to stop p, once. */
static void precheck_cancel(struct statd_precheck *p)
{
	if (p->state == PRECHECK_SENT && !p->cancel_sent) {
		p->cancel_sent = true;
		statd_link_send_precheck_cancel(p->d, p->id);
	}
}

/* Hand PRECHECK_RUN to the link if it takes it now. */
static void precheck_send(struct statd_precheck *p)
{
	if (p->state != PRECHECK_WAITING)
		return;
	struct rts_msg_precheck_run m = {
		.precheck_id = p->id,
		.channel = p->channel,
		.channel_hash = p->hash,
		.target = p->target,
		.tier = p->tier,
		.script = p->script,
		.approved = p->approved,
		.fired_at = p->fired_at,
		.time_zone = p->time_zone,
		.today = p->today,
		.schedule = p->schedule,
	};
	if (statd_link_send_precheck_run(p->d, &m, p))
		p->state = PRECHECK_SENT;
}

/* runnerd never answered within the precheck's deadline plus a margin: give up so the
 * client hears something, and ask runnerd once more to clean up. */
static void on_backstop(void *arg)
{
	struct statd_precheck *p = arg;
	p->backstop = NULL; /* fired */
	rts_log_turn(LOG_ERR, p->id, p->hash, "error", 0,
		     "runnerd did not finish the precheck within timeoutMs + %u s; giving up on it",
		     STATD_BACKSTOP_EXTRA_MS / 1000);
	bool sent = p->state == PRECHECK_SENT;
	precheck_cancel(p);
	if (sent)
		emit_failure(p, RTS_TURN_ERROR);
	else
		emit_error(p, STATD_EV_UNAVAILABLE);
	precheck_end(p, "error");
}

/* ---- the ops ---- */

static json_object *error_answer(json_object *id, const char *code, const char *detail)
{
	json_object *a = statd_error_answer(id, code);
	if (detail)
		json_object_object_add(a, "detail", json_object_new_string(detail));
	return a;
}

json_object *statd_precheck_op(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *req)
{
	struct statd_precheck_request r;
	const char *detail = NULL;
	if (statd_precheck_parse(req, &r, &detail) < 0)
		return error_answer(r.id, STATD_E_INVALID_REQUEST, detail);
	if (!d->cfg->has_precheck)
		return error_answer(r.id, STATD_E_NOT_CONFIGURED, "the configuration has no \"precheck\"");
	/* The harness needs a zone ICU knows; the host's zone files are the list the config's
	 * own timeZone is held to (runnerd formats with them). */
	cleanup_free char *zone_file = NULL;
	if (rts_time_zone_file(r.time_zone, &zone_file) < 0)
		return error_answer(r.id, STATD_E_UNKNOWN_TIME_ZONE, "timeZone names no time zone this host knows");

	struct statd_precheck *p = rts_xcalloc(1, sizeof(*p));
	p->d = d;
	p->conn = statd_conn_ref(c);
	p->seq = seq;
	p->req_id = json_object_get(r.id);
	p->started_ms = rts_now_ms();
	rts_channel_hash(r.channel, p->hash);
	/* From here on, one event and no answer: later requests on c must not wait for it. */
	statd_conn_forget(c, seq);

	struct statd_prechecks *ps = d->prechecks;
	const char *refusal = NULL;
	int ret = rts_turn_id_new(p->id);
	if (ret < 0) {
		log_error_errno(ret, "channel %.12s: cannot make a precheck id: %m", p->hash);
		refusal = STATD_EV_UNAVAILABLE;
	} else if (ps->stopping) {
		refusal = STATD_E_SHUTTING_DOWN;
	} else if (ps->n >= STATD_PRECHECKS_MAX || in_channel(d, p->hash) >= STATD_PRECHECKS_PER_CHANNEL) {
		log_warning("channel %.12s: precheck refused: %u running in all, %u in this channel (the most are "
			    "%u and %u)",
			    p->hash, ps->n, in_channel(d, p->hash), STATD_PRECHECKS_MAX, STATD_PRECHECKS_PER_CHANNEL);
		refusal = STATD_E_BUSY;
	} else if (statd_link_start(d) < 0) {
		refusal = STATD_EV_UNAVAILABLE;
	}
	if (refusal) {
		emit_error(p, refusal);
		precheck_free(p);
		return NULL;
	}
	p->channel = rts_xstrdup(r.channel);
	p->target = rts_xstrdup(r.target);
	p->tier = rts_xstrdup(r.tier ? r.tier : "");
	p->script = rts_xstrdup(r.script);
	p->approved = statd_precheck_approved_text(&r);
	p->fired_at = rts_xstrdup(r.fired_at);
	p->time_zone = rts_xstrdup(r.time_zone);
	p->today = rts_xstrdup(r.today);
	p->schedule = statd_precheck_schedule_text(&r);
	ret = rts_timer_start(d->ev, (uint64_t)d->cfg->precheck.timeout_ms + STATD_BACKSTOP_EXTRA_MS, 100, on_backstop,
			      p, &p->backstop);
	if (ret < 0) {
		log_error_errno(ret, "precheck %s: cannot arm its backstop timer: %m", p->id);
		emit_error(p, STATD_EV_UNAVAILABLE);
		precheck_free(p);
		return NULL;
	}
	p->next = ps->list;
	if (ps->list)
		ps->list->prev = p;
	ps->list = p;
	ps->n++;
	log_debug("precheck %s: started for channel %.12s", p->id, p->hash);
	precheck_send(p);
	return NULL;
}

json_object *statd_precheck_describe(struct statd *d, json_object *req)
{
	struct statd_precheck_describe r;
	const char *detail = NULL;
	if (statd_precheck_describe_parse(req, &r, &detail) < 0)
		return error_answer(r.id, STATD_E_INVALID_REQUEST, detail);
	if (!d->cfg->has_precheck)
		return error_answer(r.id, STATD_E_NOT_CONFIGURED, "the configuration has no \"precheck\"");
	cleanup_free char *text = statd_precheck_describe_text(&d->cfg->precheck, r.channel, r.target, r.tier);
	json_object *a = json_object_new_object();
	json_object_object_add(a, "id", json_object_get(r.id));
	json_object_object_add(a, "text", json_object_new_string(text));
	return a;
}

/* ---- inputs from the runnerd link ---- */

/* Bounds of PRECHECK_DONE's text per answer: what the harness contract allows, so a confused
 * runnerd cannot hand a client more than a script could. */
static bool done_valid(const struct rts_msg_precheck_done *m)
{
	size_t n = strlen(m->text);
	if (!rts_turn_id_valid(m->precheck_id) || m->status >= RTS_TURN_STATUS_MAX_ ||
	    m->answer >= RTS_PRECHECK_ANSWER_MAX_ || !rts_utf8_valid(m->text, n))
		return false;
	if (m->status != RTS_TURN_OK)
		return m->answer == 0 && n == 0;
	switch (m->answer) {
	case RTS_PRECHECK_SLEEP:
		return n == 0;
	case RTS_PRECHECK_NOTE:
		return n <= RTS_PRECHECK_NOTE_MAX;
	case RTS_PRECHECK_CONTEXT:
		return n <= RTS_PRECHECK_CONTEXT_MAX;
	case RTS_PRECHECK_SCRIPT_ERROR:
		return n >= 1 && n <= RTS_PRECHECK_ERROR_MAX;
	}
	return false;
}

int statd_precheck_done(struct statd *d, const struct rts_msg_precheck_done *m)
{
	if (!done_valid(m))
		return -EBADMSG;
	struct statd_precheck *p = find(d, m->precheck_id);
	if (!p || p->state != PRECHECK_SENT) {
		log_debug("precheck %s: PRECHECK_DONE for a precheck we no longer track, ignored", m->precheck_id);
		return 0;
	}
	const char *outcome;
	if (m->status == RTS_TURN_OK) {
		json_object *e = event_new(p, "precheck");
		bool wake = m->answer == RTS_PRECHECK_CONTEXT || m->answer == RTS_PRECHECK_SCRIPT_ERROR;
		json_object_object_add(e, "wake", json_object_new_boolean(wake));
		static const char *const member[] = {[RTS_PRECHECK_SLEEP] = NULL,
						     [RTS_PRECHECK_NOTE] = "note",
						     [RTS_PRECHECK_CONTEXT] = "context",
						     [RTS_PRECHECK_SCRIPT_ERROR] = "error"};
		if (member[m->answer])
			json_object_object_add(e, member[m->answer], json_object_new_string(m->text));
		emit(p, e);
		outcome = m->answer == RTS_PRECHECK_SCRIPT_ERROR ? "script_error" : wake ? "wake" : "sleep";
	} else {
		emit_failure(p, m->status);
		outcome = m->status == RTS_TURN_TIMEOUT	    ? "timeout"
			  : m->status == RTS_TURN_CANCELLED ? "cancelled"
							    : "error";
	}
	precheck_end(p, outcome);
	return 0;
}

void statd_prechecks_link_ready(struct statd *d)
{
	for (struct statd_precheck *p = d->prechecks->list; p; p = p->next)
		precheck_send(p);
}

void statd_prechecks_link_down(struct statd *d)
{
	struct statd_prechecks *ps = d->prechecks;
	while (ps->list) {
		struct statd_precheck *p = ps->list;
		/* Sent: it may have run; unsent: it never reached runnerd. */
		if (p->state == PRECHECK_SENT)
			emit_wake_error(p, "the precheck runner became unavailable before the precheck finished");
		else
			emit_error(p, STATD_EV_UNAVAILABLE);
		precheck_end(p, "unavailable");
	}
}

/* ---- shutdown ---- */

static void on_stop_deadline(void *arg)
{
	struct statd *d = arg;
	struct statd_prechecks *ps = d->prechecks;
	ps->stop_timer = NULL; /* fired */
	log_warning("%u prechecks still running %u s after the stop request; not waiting for them", ps->n,
		    STATD_SHUTDOWN_MS / 1000);
	while (ps->list) {
		struct statd_precheck *p = ps->list;
		emit_failure(p, RTS_TURN_CANCELLED);
		precheck_end(p, "cancelled");
	}
}

void statd_prechecks_stop(struct statd *d)
{
	struct statd_prechecks *ps = d->prechecks;
	if (ps->stopping)
		return;
	ps->stopping = true;
	for (struct statd_precheck *p = ps->list, *next; p; p = next) {
		next = p->next;
		/* Still in the link's queue: runnerd never hears of it. */
		if (p->state == PRECHECK_WAITING || statd_link_withdraw(d, p)) {
			p->state = PRECHECK_WAITING;
			emit_error(p, STATD_E_SHUTTING_DOWN);
			precheck_end(p, "cancelled");
		} else {
			precheck_cancel(p);
		}
	}
	if (ps->n > 0) {
		log_info("stopping: waiting up to %u s for %u prechecks to be cancelled", STATD_SHUTDOWN_MS / 1000, ps->n);
		int r = rts_timer_start(d->ev, STATD_SHUTDOWN_MS, 100, on_stop_deadline, d, &ps->stop_timer);
		if (r < 0) {
			log_error_errno(r, "cannot arm the precheck shutdown timer, not waiting: %m");
			on_stop_deadline(d);
		}
	}
	maybe_exit(d);
}

bool statd_prechecks_idle(const struct statd *d)
{
	return d->prechecks->n == 0;
}

unsigned statd_prechecks_running(const struct statd *d)
{
	return d->prechecks->n;
}

void statd_prechecks_init(struct statd *d)
{
	d->prechecks = rts_xcalloc(1, sizeof(*d->prechecks));
}

void statd_prechecks_free(struct statd *d)
{
	struct statd_prechecks *ps = d->prechecks;
	if (!ps)
		return;
	/* Only at exit: whatever is left goes without events. */
	while (ps->list) {
		struct statd_precheck *p = ps->list;
		ps->list = p->next;
		precheck_free(p);
	}
	rts_timer_stop(ps->stop_timer);
	free(ps);
	d->prechecks = NULL;
}
