/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's metrics and its part of `roundtable-sandbox metrics` (issue 15): METRICS from
 * statd is answered with runnerd's own text and brokerd's, which runnerd asks for with
 * BROKER_METRICS (common/proto.h). One BROKER_METRICS is out at a time; statd requests
 * arriving meanwhile wait for the same answer. brokerd's text comes within
 * RUNNERD_METRICS_WAIT_MS, connecting to brokerd first if no link is up, or the waiting
 * requests are answered without it. */
#include "config.h"

#include <stdio.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/timer.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

/* Turn durations, 250 ms to the longest turn timeout (600 s). */
static const uint32_t turn_bounds_ms[] = {250, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000,
					  600000};

void runnerd_metrics_init(struct runnerd *rd)
{
	struct runnerd_metrics *mt = &rd->metrics;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(mt->turn_seconds); i++)
		rts_histogram_init(&mt->turn_seconds[i], turn_bounds_ms, RTS_ARRAY_SIZE(turn_bounds_ms));
}

void runnerd_metrics_turn_finished(struct runnerd *rd, enum rts_turn_status status, uint64_t duration_ms, bool warm)
{
	(void)status;
	rts_histogram_observe(&rd->metrics.turn_seconds[warm ? RUNNERD_START_WARM : RUNNERD_START_COLD],
			      duration_ms * 1000u);
}

static char *render(struct runnerd *rd)
{
	static const char *const starts[] = {[RUNNERD_START_COLD] = "cold", [RUNNERD_START_WARM] = "warm"};
	struct rts_metrics_text t = {0};
	char labels[64];
	rts_metrics_family(&t, "roundtable_sandbox_turn_seconds", "histogram",
			   "Turn duration at runnerd, from TURN_RUN to the end of its clean-up, by how its "
			   "container started.");
	for (size_t i = 0; i < RTS_ARRAY_SIZE(starts); i++) {
		snprintf(labels, sizeof(labels), "start=\"%s\"", starts[i]);
		rts_metrics_histogram(&t, "roundtable_sandbox_turn_seconds", labels, &rd->metrics.turn_seconds[i]);
	}
	rts_metrics_family(&t, "roundtable_sandbox_containers", "gauge",
			   "Containers runnerd runs or still removes, by kind.");
	rts_metrics_sample(&t, "roundtable_sandbox_containers", "kind=\"turn\"", runnerd_turns_containers(&rd->turns));
	rts_metrics_sample(&t, "roundtable_sandbox_containers", "kind=\"spare\"", runnerd_spares_containers(rd));
	rts_metrics_family(&t, "roundtable_sandbox_spares_ready", "gauge",
			   "Warm spare containers started and waiting for a turn.");
	rts_metrics_sample(&t, "roundtable_sandbox_spares_ready", NULL, rd->spares.n_ready);
	rts_metrics_family(&t, "roundtable_sandbox_spares_claimed_total", "counter",
			   "Warm spares turns took over since runnerd started.");
	rts_metrics_sample(&t, "roundtable_sandbox_spares_claimed_total", NULL, rd->spares.claimed);
	rts_metrics_family(&t, "roundtable_sandbox_spares_usable", "gauge",
			   "1 while the image watch lets turns claim warm spares, else 0 (warmSpares 0, the "
			   "watch down, an image event unchecked, no recent inspect).");
	rts_metrics_sample(&t, "roundtable_sandbox_spares_usable", NULL,
			   rd->cfg->warm_spares > 0 && runnerd_image_watch_current(rd, NULL) ? 1 : 0);
	rts_metrics_family(&t, "roundtable_sandbox_runner_turns", "gauge", "Turns runnerd holds, in any phase.");
	rts_metrics_sample(&t, "roundtable_sandbox_runner_turns", NULL, rd->turns.n);
	return rts_metrics_text_take(&t);
}

/* Answer every waiting request; brokerd_text NULL: brokerd's text is missing. */
static void answer_all(struct runnerd *rd, const char *brokerd_text)
{
	struct runnerd_metrics *mt = &rd->metrics;
	rts_timer_stop(mt->timer);
	mt->timer = NULL;
	mt->asking = false;
	if (mt->n_waiting == 0)
		return;
	cleanup_free char *text = render(rd);
	if (strlen(text) > RTS_METRICS_TEXT_MAX) {
		log_error("metrics text of %zu bytes is over %u (bug); sending none", strlen(text), RTS_METRICS_TEXT_MAX);
		text[0] = '\0';
	}
	for (unsigned i = 0; i < mt->n_waiting; i++) {
		struct rts_msg_metrics_text m = {
			.seq = mt->waiting[i].seq,
			.brokerd_link = rts_link_up(rd->broker.link),
			.brokerd_up = brokerd_text != NULL,
			.runnerd = text,
			.brokerd = brokerd_text ? brokerd_text : "",
		};
		(void)rts_link_send_metrics_text(mt->waiting[i].peer->link, &m);
	}
	mt->n_waiting = 0;
}

static void on_wait_over(void *arg)
{
	struct runnerd *rd = arg;
	rd->metrics.timer = NULL; /* fired */
	log_debug("metrics: brokerd did not answer within %u ms", RUNNERD_METRICS_WAIT_MS);
	answer_all(rd, NULL);
}

static void ask_brokerd(struct runnerd *rd)
{
	struct runnerd_metrics *mt = &rd->metrics;
	if (!mt->asking || mt->sent)
		return;
	if (!rts_link_up(rd->broker.link)) {
		runnerd_broker_want(rd); /* runnerd_metrics_broker_up() follows */
		return;
	}
	mt->sent = true;
	if (rts_link_send_broker_metrics(rd->broker.link, &(struct rts_msg_broker_metrics){.seq = mt->seq}) < 0)
		answer_all(rd, NULL);
}

int runnerd_metrics_request(struct runnerd *rd, struct runnerd_statd *peer, uint32_t seq)
{
	struct runnerd_metrics *mt = &rd->metrics;
	if (mt->n_waiting == RTS_ARRAY_SIZE(mt->waiting)) {
		/* statd keeps one request out at a time; more means more statd links. Answer
		 * this one without brokerd rather than queue without bound. */
		cleanup_free char *text = render(rd);
		return rts_link_send_metrics_text(peer->link, &(struct rts_msg_metrics_text){
								      .seq = seq,
								      .brokerd_link = rts_link_up(rd->broker.link),
								      .runnerd = text,
								      .brokerd = "",
							      });
	}
	mt->waiting[mt->n_waiting++] = (struct runnerd_metrics_waiter){.peer = peer, .seq = seq};
	if (mt->asking)
		return 0;
	mt->asking = true;
	mt->sent = false;
	mt->seq++;
	int r = rts_timer_start(rd->event, RUNNERD_METRICS_WAIT_MS, 50, on_wait_over, rd, &mt->timer);
	if (r < 0) {
		answer_all(rd, NULL);
		return 0;
	}
	ask_brokerd(rd);
	return 0;
}

int runnerd_metrics_brokerd_text(struct runnerd *rd, uint32_t seq, const char *text)
{
	if (!rts_metrics_text_valid(text, strlen(text), RTS_METRICS_TEXT_MAX))
		return -EBADMSG;
	struct runnerd_metrics *mt = &rd->metrics;
	if (!mt->asking || !mt->sent || seq != mt->seq)
		return 0; /* late: the requests it was for were answered without it */
	answer_all(rd, text);
	return 0;
}

void runnerd_metrics_broker_up(struct runnerd *rd)
{
	ask_brokerd(rd);
}

void runnerd_metrics_broker_down(struct runnerd *rd)
{
	if (rd->metrics.asking)
		answer_all(rd, NULL);
}

void runnerd_metrics_forget_peer(struct runnerd *rd, struct runnerd_statd *peer)
{
	struct runnerd_metrics *mt = &rd->metrics;
	unsigned k = 0;
	for (unsigned i = 0; i < mt->n_waiting; i++)
		if (mt->waiting[i].peer != peer)
			mt->waiting[k++] = mt->waiting[i];
	mt->n_waiting = k;
}

void runnerd_metrics_free(struct runnerd *rd)
{
	rts_timer_stop(rd->metrics.timer);
	rd->metrics.timer = NULL;
	rd->metrics.n_waiting = 0;
}
