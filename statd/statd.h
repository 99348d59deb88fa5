/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-statd: internal interfaces between its source files.
 *
 *   main.c           start-up, signals, shutdown
 *   control.c        control.sock connections: NDJSON framing, answer ordering, the operations
 *   control_queue.c  the operations that go through the queue; its answers and events as JSON
 *   request.c        field validation and the route of a message (request.h: routing fails closed)
 *   queue.c          channels, their FIFO queues, turns and their outcomes: a state machine
 *                    with typed inputs and effects (queue.h), no JSON, no sockets
 *   queue_ops.c      the queue's effects in the daemon (the ops table)
 *   runnerd.c        statd's end of the link to runnerd (TURN_RUN, TURN_CANCEL, TURN_DONE)
 *   workspace.c      directory checks and the per-turn workspace fd
 *   state.c          the state file (state.h)
 *   precheck.c       the precheck runner's ops and the prechecks running at runnerd
 *                    (precheck_request.c: their fields and describe text)
 *
 * Dependencies point one way: control.c -> control_queue.c -> queue.c <- runnerd.c; queue.c
 * reaches the others only through its ops (queue.h), which queue_ops.c wires.
 *
 * Everything runs on one sd-event loop in one thread. Rules that keep the call graph free of
 * surprises:
 *  - client output is written only from that client's own io callback (and once more at
 *    exit); everything else appends to its buffer and enables EPOLLOUT;
 *  - a client connection is reference counted: dropping it (overflow, hang-up) closes the
 *    socket at once, but the struct lives while queue items and turns hold it, and what they
 *    answer later is discarded;
 *  - a broken runnerd link is torn down from a deferred event, never from inside the call
 *    that noticed it, so turns never vanish under a caller;
 *  - the queue's effects never call back into it (queue.h). */
#ifndef STATD_STATD_H
#define STATD_STATD_H

#include <json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/ids.h"
#include "common/link.h"
#include "common/proto.h"
#include "statd/queue.h"
#include "statd/request.h"
#include "statd/state.h"

/* Limits of the control protocol (HACKING.md "Control protocol answers"). A request line
 * is at most RTS_CONTROL_LINE_MAX bytes, newline excluded (common/limits.h: the CLI writes
 * what statd reads). */
/* A client holding more unread output is dropped: one rich reply event and more. */
#define STATD_CONN_OUTPUT_MAX (RTS_CONTROL_EVENT_MAX + 8u * 1024u * 1024u)
/* Bytes of request lines longer than RTS_CONTROL_LINE_MAX being read, all clients: two
 * maximal rich messages. */
#define STATD_BIG_LINES_MAX (2u * RTS_CONTROL_RICH_LINE_MAX)
#define STATD_CONNS_MAX 256u			/* concurrent control connections */
#define STATD_REFUSAL_LOG_MS 10000u		/* at most one "refusing clients" warning this often */

/* Timing of control connections; the queue's bounds and timing are in queue.h. */
#define STATD_LINE_DEADLINE_MS 30000u	/* a request line must be complete this long after its first byte */
#define STATD_SWEEP_MS 1000u		/* how often that deadline is checked */

/* Prechecks running at once (statd/precheck.c): a precheck is no channel turn, so these
 * bound it instead of a channel queue; a request beyond either is refused with "busy". */
#define STATD_PRECHECKS_MAX 16u
#define STATD_PRECHECKS_PER_CHANNEL 4u

struct statd;
struct statd_conn;
struct statd_prechecks;

/* With rich mode configured, a lost runnerd link is made again after this long. */
#define STATD_RICH_RECONNECT_MS 5000u

struct rts_timer;

/* The link to runnerd (runnerd.c; common/link.h does the work). */
struct statd_link {
	struct rts_link *link; /* NULL until a turn needs it, and again after it failed */
	char *path;
	struct rts_timer *reconnect; /* rich mode: the next connect after a loss */
};

/* metrics.c: statd's counters and the metrics requests waiting for runnerd. */
#define STATD_METRICS_WAIT_MS 4000u   /* runnerd's answer; runnerd waits 2.5 s for brokerd */
#define STATD_METRICS_WAITING_MAX 64u /* metrics requests waiting at once (more: busy) */
struct statd_metrics_req;
struct statd_metrics {
	uint64_t outcomes[6]; /* enum statd_outcome */
	uint64_t messages[3]; /* enum statd_route */
	struct statd_metrics_req *waiting;
	unsigned n_waiting;
	bool asking; /* waiting for runnerd (timer armed) */
	bool sent;   /* METRICS with seq is out */
	uint32_t seq;
	struct rts_timer *timer;
};

struct statd {
	struct rts_daemon daemon; /* the loop, the config and control.sock (common/daemon.h) */
	struct rts_config *cfg;	  /* daemon.cfg */
	const char *runtime_dir;
	sd_event *ev; /* daemon.event */
	int exit_code;

	sd_event_source *listen_src; /* control.sock */

	struct statd_state *state;
	struct statd_queue *queue; /* queue.h */

	struct statd_conn *conns; /* open connections */
	unsigned n_conns;
	uint64_t conn_serial;
	/* Connections refused at STATD_CONNS_MAX since the last warning about them, and when
	 * that warning was written: a client flooding the socket gets one line per
	 * STATD_REFUSAL_LOG_MS, not one per connection. */
	uint64_t conns_refused;
	uint64_t conns_refused_logged_ms;
	size_t big_lines; /* bytes of long request lines being read (STATD_BIG_LINES_MAX) */

	struct statd_link link;
	struct statd_metrics metrics;
	struct statd_prechecks *prechecks; /* precheck.c */
	/* The channels whose warm spare runnerd has ready (its last SPARE_STATE, checked):
	 * RTS_HASH_HEX_LEN hex digits per channel; "" while the link is down. */
	char spares_ready[RTS_SPARES_READY_MAX + 1];

	bool stopping;	     /* a stop signal came: no more clients */
	bool queue_stopped;  /* the queue's stopped op ran: no turn is left */
};

/* control.c */
int statd_control_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata);
/* Start the periodic check that drops clients whose request line stays incomplete for
 * STATD_LINE_DEADLINE_MS (a client dribbling half a line must not hold one of the
 * STATD_CONNS_MAX slots forever). Returns 0 or -errno. */
int statd_control_start_sweep(struct statd *d);
struct statd_conn *statd_conn_ref(struct statd_conn *c);
void statd_conn_unref(struct statd_conn *c);
/* Fill the pending answer slot seq of c; takes over the reference to answer. */
void statd_conn_answer(struct statd_conn *c, uint64_t seq, json_object *answer);
/* Write an event for the request seq: right away, or just after that request's answer if
 * the answer is still held back behind an earlier pending one. Takes over ev. */
void statd_conn_event(struct statd_conn *c, uint64_t seq, json_object *ev);
/* The request seq of c gets no answer of its own, only events (a valid precheck): its
 * pending answer slot goes, so answers of later requests are not held back. */
void statd_conn_forget(struct statd_conn *c, uint64_t seq);
/* Drop every connection (shutdown), trying one last non-blocking write of its output. */
void statd_control_close_all(struct statd *d);
/* New {"id": id, "error": code} object (id may be NULL: left out). */
json_object *statd_error_answer(json_object *id, const char *code);

/* control_queue.c: the operations that go through the queue. Each returns the answer, or
 * NULL when the queue answers later (through the ops below). m, channel and id are
 * validated. */
json_object *statd_control_message(struct statd *d, struct statd_conn *c, uint64_t seq, const struct statd_message *m,
				   bool rich);
json_object *statd_control_mode(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
				const char *channel, enum statd_mode mode, const char *profile);
json_object *statd_control_fresh(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
				 const char *channel);
json_object *statd_control_cancel(struct statd *d, json_object *id, const char *channel);
/* Answers for status (channel may be NULL) and channels. */
json_object *statd_control_status(struct statd *d, json_object *id, const char *channel);
json_object *statd_control_channels(struct statd *d, json_object *id);
/* The queue's answer, event and release ops (queue.h), owner being the struct statd. */
void statd_control_answer(void *owner, struct statd_origin *o, const struct statd_answer *a);
void statd_control_event(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply,
			 const struct statd_rich_reply *rich);
void statd_control_release(void *owner, struct statd_origin *o);

/* queue_ops.c: d->queue, wired to this daemon. */
void statd_queue_attach(struct statd *d);
/* Stopping: end the loop once the channel queues and the prechecks are all done. */
void statd_maybe_exit(struct statd *d);

/* precheck.c: the ops "precheck" (an answer only when refused; NULL otherwise: its one
 * event follows) and "precheck_describe" (its answer), with req parsed strictly and its op
 * read. */
json_object *statd_precheck_op(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *req);
json_object *statd_precheck_describe(struct statd *d, json_object *req);
/* PRECHECK_DONE from runnerd: its event. -EBADMSG for a message that breaks the contract
 * (drops the link). */
int statd_precheck_done(struct statd *d, const struct rts_msg_precheck_done *m);
/* The link can take messages again: hand over waiting PRECHECK_RUNs. */
void statd_prechecks_link_ready(struct statd *d);
/* The link failed: every precheck ends (unavailable). */
void statd_prechecks_link_down(struct statd *d);
/* Shutdown: end waiting prechecks, cancel running ones and wait for them (at most
 * STATD_SHUTDOWN_MS); statd_maybe_exit() once none is left. Idempotent. */
void statd_prechecks_stop(struct statd *d);
bool statd_prechecks_idle(const struct statd *d);
unsigned statd_prechecks_running(const struct statd *d);
void statd_prechecks_init(struct statd *d);
void statd_prechecks_free(struct statd *d);

/* metrics.c */
void statd_metrics_message(struct statd *d, enum statd_route route);
void statd_metrics_outcome(struct statd *d, enum statd_outcome outcome);
/* {"op":"metrics"}: NULL (answered later, {"id","text"}) or an error answer (busy). */
json_object *statd_control_metrics(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id);
/* METRICS_TEXT from runnerd: -EBADMSG for a text that is not printable ASCII lines. */
int statd_metrics_text(struct statd *d, const struct rts_msg_metrics_text *m);
void statd_metrics_link_ready(struct statd *d);
void statd_metrics_link_down(struct statd *d);
void statd_metrics_free(struct statd *d);

/* runnerd.c */
void statd_link_init(struct statd *d);
void statd_link_free(struct statd *d);
/* The queue's connect, send_run, withdraw and send_cancel ops (queue.h), owner being the
 * struct statd. Errors after a send tear the link down later (deferred), never from inside
 * these calls. */
int statd_link_start(void *owner);
bool statd_link_send_run(void *owner, const struct statd_turn_start *s);
bool statd_link_withdraw(void *owner, const void *tag);
void statd_link_send_cancel(void *owner, const char *turn_id);
void statd_link_send_spare_drop(void *owner, const char *channel_hash);
/* The queue's rich sends (queue.h): false when the link has no room. */
bool statd_link_send_ensure(void *owner, const struct statd_rich_ensure *e);
bool statd_link_send_stop(void *owner, uint32_t seq, const char *channel_hash, uint32_t reason);
bool statd_link_send_sync(void *owner, uint32_t channels);
bool statd_link_send_fetch(void *owner, const char *turn_id, uint32_t index, const char *url, uint64_t max_bytes);
bool statd_link_send_rich_turn(void *owner, const struct statd_rich_turn_start *s);
/* PRECHECK_RUN tagged with tag (statd_link_withdraw takes it back); false when the link is
 * not up or congested (nothing taken). PRECHECK_CANCEL when the link is up. */
bool statd_link_send_precheck_run(struct statd *d, const struct rts_msg_precheck_run *m, const void *tag);
void statd_link_send_precheck_cancel(struct statd *d, const char *id);

#endif
