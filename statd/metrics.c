/* SPDX-License-Identifier: Apache-2.0 */
/* statd's metrics and the control op {"op":"metrics","id"} (issue 15, DESIGN.md 8.4): the
 * answer {"id","text"} is Prometheus text gathered from the three daemons. statd asks
 * runnerd with METRICS (one request out at a time; control requests arriving meanwhile
 * wait for the same answer), connecting first if no link is up; runnerd brings brokerd's
 * text along (common/proto.h). After STATD_METRICS_WAIT_MS, or when the link fails, the
 * waiting requests are answered with what statd has: its own families, which say which
 * daemons answered (roundtable_sandbox_daemon_up). */
#include "config.h"

#include <stdio.h>

#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/timer.h"
#include "common/util.h"
#include "statd/statd.h"

struct statd_metrics_req {
	struct statd_metrics_req *next;
	struct statd_conn *conn; /* reference */
	uint64_t seq;		 /* the request's answer slot on conn */
	json_object *id;	 /* reference */
};

void statd_metrics_message(struct statd *d, enum statd_route route)
{
	if ((unsigned)route < RTS_ARRAY_SIZE(d->metrics.messages))
		d->metrics.messages[route]++;
}

void statd_metrics_outcome(struct statd *d, enum statd_outcome outcome)
{
	if ((unsigned)outcome < RTS_ARRAY_SIZE(d->metrics.outcomes))
		d->metrics.outcomes[outcome]++;
}

static char *render(struct statd *d, bool runnerd_up, bool brokerd_link, bool brokerd_up)
{
	struct statd_metrics *mt = &d->metrics;
	struct rts_metrics_text t = {0};
	char labels[64];
	/* The words of the control protocol's events (HACKING.md), in enum statd_outcome order. */
	static const char *const outcomes[] = {"reply",		 "turn_failed",	   "turn_timeout",
					       "turn_cancelled", "cleanup_failed", "unavailable"};
	_Static_assert(RTS_ARRAY_SIZE(outcomes) == RTS_ARRAY_SIZE(mt->outcomes), "an outcome name each");
	rts_metrics_family(&t, "roundtable_sandbox_turns_total", "counter",
			   "Sandboxed turns that ended, by outcome (the event the bot got).");
	for (size_t i = 0; i < RTS_ARRAY_SIZE(outcomes); i++) {
		snprintf(labels, sizeof(labels), "outcome=\"%s\"", outcomes[i]);
		rts_metrics_sample(&t, "roundtable_sandbox_turns_total", labels, mt->outcomes[i]);
	}
	rts_metrics_family(&t, "roundtable_sandbox_messages_total", "counter", "Message requests by the route answered.");
	for (size_t i = 0; i < RTS_ARRAY_SIZE(mt->messages); i++) {
		snprintf(labels, sizeof(labels), "route=\"%s\"", statd_route_name((enum statd_route)i));
		rts_metrics_sample(&t, "roundtable_sandbox_messages_total", labels, mt->messages[i]);
	}
	unsigned running, queued;
	statd_queue_totals(d->queue, &running, &queued);
	rts_metrics_family(&t, "roundtable_sandbox_queued_turns", "gauge", "Turns waiting in the channel queues.");
	rts_metrics_sample(&t, "roundtable_sandbox_queued_turns", NULL, queued);
	rts_metrics_family(&t, "roundtable_sandbox_running_turns", "gauge", "Turns started and not yet ended.");
	rts_metrics_sample(&t, "roundtable_sandbox_running_turns", NULL, running);
	static const char *const modes[] = STATD_MODE_NAMES;
	size_t n_modes = RTS_ARRAY_SIZE(modes) - 1;
	uint64_t per_mode[RTS_ARRAY_SIZE(modes)] = {0};
	for (size_t i = 0; i < statd_state_count(d->state); i++) {
		size_t m = (size_t)statd_state_mode_at(d->state, i);
		if (m < n_modes)
			per_mode[m]++;
	}
	rts_metrics_family(&t, "roundtable_sandbox_channels", "gauge", "Channels in the state file, by mode.");
	for (size_t i = 0; i < n_modes; i++) {
		snprintf(labels, sizeof(labels), "mode=\"%s\"", modes[i]);
		rts_metrics_sample(&t, "roundtable_sandbox_channels", labels, per_mode[i]);
	}
	rts_metrics_family(&t, "roundtable_sandbox_control_connections", "gauge", "Open control.sock connections.");
	rts_metrics_sample(&t, "roundtable_sandbox_control_connections", NULL, d->n_conns);
	rts_metrics_family(&t, "roundtable_sandbox_link_up", "gauge",
			   "Daemon links up (1) or not (0): statd to runnerd, runnerd to brokerd.");
	rts_metrics_sample(&t, "roundtable_sandbox_link_up", "link=\"runnerd\"", rts_link_up(d->link.link));
	rts_metrics_sample(&t, "roundtable_sandbox_link_up", "link=\"brokerd\"", brokerd_link);
	rts_metrics_family(&t, "roundtable_sandbox_daemon_up", "gauge",
			   "Whether each daemon's metrics are in this answer (1) or it did not answer (0).");
	rts_metrics_sample(&t, "roundtable_sandbox_daemon_up", "daemon=\"statd\"", 1);
	rts_metrics_sample(&t, "roundtable_sandbox_daemon_up", "daemon=\"runnerd\"", runnerd_up);
	rts_metrics_sample(&t, "roundtable_sandbox_daemon_up", "daemon=\"brokerd\"", brokerd_up);
	return rts_metrics_text_take(&t);
}

/* Answer every waiting request with statd's text followed by runnerd's and brokerd's
 * (NULL: that daemon did not answer). */
static void answer_all(struct statd *d, const char *runnerd, bool brokerd_link, const char *brokerd)
{
	struct statd_metrics *mt = &d->metrics;
	rts_timer_stop(mt->timer);
	mt->timer = NULL;
	mt->asking = false;
	if (!mt->waiting)
		return;
	cleanup_free char *own = render(d, runnerd != NULL, brokerd_link, brokerd != NULL);
	cleanup_free char *text = rts_xasprintf("%s%s%s", own, runnerd ? runnerd : "", brokerd ? brokerd : "");
	while (mt->waiting) {
		struct statd_metrics_req *r = mt->waiting;
		mt->waiting = r->next;
		json_object *a = json_object_new_object();
		json_object_object_add(a, "id", json_object_get(r->id));
		json_object_object_add(a, "text", json_object_new_string(text));
		statd_conn_answer(r->conn, r->seq, a);
		statd_conn_unref(r->conn);
		json_object_put(r->id);
		free(r);
	}
	mt->n_waiting = 0;
}

static void on_wait_over(void *arg)
{
	struct statd *d = arg;
	d->metrics.timer = NULL; /* fired */
	log_debug("metrics: runnerd did not answer within %u ms", STATD_METRICS_WAIT_MS);
	answer_all(d, NULL, false, NULL);
}

static void ask_runnerd(struct statd *d)
{
	struct statd_metrics *mt = &d->metrics;
	if (!mt->asking || mt->sent)
		return;
	if (!rts_link_up(d->link.link)) {
		if (statd_link_start(d) < 0) /* on_up or on_down follows */
			answer_all(d, NULL, false, NULL);
		return;
	}
	mt->sent = true;
	if (rts_link_send_metrics(d->link.link, &(struct rts_msg_metrics){.seq = mt->seq}) < 0)
		answer_all(d, NULL, false, NULL);
}

json_object *statd_control_metrics(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id)
{
	struct statd_metrics *mt = &d->metrics;
	if (mt->n_waiting >= STATD_METRICS_WAITING_MAX)
		return statd_error_answer(id, STATD_E_BUSY);
	struct statd_metrics_req *r = rts_xcalloc(1, sizeof(*r));
	*r = (struct statd_metrics_req){.next = mt->waiting, .conn = statd_conn_ref(c), .seq = seq,
				       .id = json_object_get(id)};
	mt->waiting = r;
	mt->n_waiting++;
	if (mt->asking)
		return NULL;
	mt->asking = true;
	mt->sent = false;
	mt->seq++;
	if (rts_timer_start(d->ev, STATD_METRICS_WAIT_MS, 50, on_wait_over, d, &mt->timer) < 0) {
		answer_all(d, NULL, false, NULL);
		return NULL;
	}
	ask_runnerd(d);
	return NULL;
}

int statd_metrics_text(struct statd *d, const struct rts_msg_metrics_text *m)
{
	if (m->brokerd_link > 1 || m->brokerd_up > 1 ||
	    !rts_metrics_text_valid(m->runnerd, strlen(m->runnerd), RTS_METRICS_TEXT_MAX) ||
	    !rts_metrics_text_valid(m->brokerd, strlen(m->brokerd), RTS_METRICS_TEXT_MAX) ||
	    (!m->brokerd_up && *m->brokerd))
		return -EBADMSG;
	struct statd_metrics *mt = &d->metrics;
	if (!mt->asking || !mt->sent || m->seq != mt->seq)
		return 0; /* late: the requests it was for were answered without it */
	answer_all(d, m->runnerd, m->brokerd_link, m->brokerd_up ? m->brokerd : NULL);
	return 0;
}

void statd_metrics_link_ready(struct statd *d)
{
	ask_runnerd(d);
}

void statd_metrics_link_down(struct statd *d)
{
	if (d->metrics.asking)
		answer_all(d, NULL, false, NULL);
}

void statd_metrics_free(struct statd *d)
{
	/* At exit: the connections are gone, nothing is answered. */
	struct statd_metrics *mt = &d->metrics;
	rts_timer_stop(mt->timer);
	mt->timer = NULL;
	while (mt->waiting) {
		struct statd_metrics_req *r = mt->waiting;
		mt->waiting = r->next;
		statd_conn_unref(r->conn);
		json_object_put(r->id);
		free(r);
	}
	mt->n_waiting = 0;
}
