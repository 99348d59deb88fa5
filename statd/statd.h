/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-statd: internal interfaces between its source files.
 *
 *   main.c      start-up, signals, shutdown
 *   control.c   control.sock connections: NDJSON framing, answer ordering, the operations
 *   request.c   field validation and the route of a message (request.h: routing fails closed)
 *   queue.c     channels, their FIFO queues, turns and their outcomes
 *   runnerd.c   statd's end of the link to runnerd (TURN_RUN, TURN_CANCEL, TURN_DONE)
 *   workspace.c directory checks and the per-turn workspace fd
 *   state.c     the state file (state.h)
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
 *  - ending a turn may start the next item of that turn's channel (and free the channel),
 *    never anything of another channel. */
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
#include "statd/request.h"
#include "statd/state.h"

/* Limits of the control protocol (HACKING.md "Control protocol answers"). A request line
 * is at most RTS_CONTROL_LINE_MAX bytes, newline excluded (common/limits.h: the CLI writes
 * what statd reads). */
#define STATD_CONN_OUTPUT_MAX (8u * 1024u * 1024u) /* a client holding more is dropped */
#define STATD_CONNS_MAX 256u			/* concurrent control connections */
#define STATD_REFUSAL_LOG_MS 10000u		/* at most one "refusing clients" warning this often */

/* Queue bounds: per channel, and across all channels so that many channels cannot add up
 * to unbounded memory. */
#define STATD_QUEUE_MAX 64u		      /* queued items (turns, mode, fresh) per channel */
#define STATD_QUEUED_TURNS_MAX 4096u	      /* queued turns, all channels */
#define STATD_QUEUED_BYTES_MAX (64u << 20)    /* bytes of queued guest text, all channels */
#define STATD_ACTIVE_CHANNELS_MAX 16384u      /* channels with queued work or a pending fresh */

/* Timing. Connecting to runnerd and its HELLO have common/link.h's deadlines. */
#define STATD_RUNNERD_FAIL_FAST_MS 1000u	/* after a failed connect, fail turns at once */
#define STATD_BACKSTOP_EXTRA_MS 30000u	/* turnTimeoutMs + this: runnerd never answered */
#define STATD_SHUTDOWN_MS 10000u
#define STATD_LINE_DEADLINE_MS 30000u	/* a request line must be complete this long after its first byte */
#define STATD_SWEEP_MS 1000u		/* how often that deadline is checked */

struct statd;
struct statd_conn;

enum statd_item_kind {
	STATD_ITEM_TURN,
	STATD_ITEM_MODE,
	STATD_ITEM_FRESH,
};

/* One entry of a channel queue. The answer (mode, fresh) or the events (turn) go to conn,
 * which may have been dropped meanwhile (then they are discarded). */
struct statd_item {
	enum statd_item_kind kind;
	struct statd_item *next;
	struct statd_conn *conn; /* reference */
	uint64_t seq;		 /* the request's answer slot on conn */
	json_object *id;	 /* the request's id (reference), echoed in answers and events */
	enum statd_mode mode;	 /* MODE */
	/* TURN */
	char *speaker_id;
	char *speaker_name;
	char *principal_id; /* never empty: a message without one is not eligible */
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
	STATD_TURN_WAITING, /* workspace ready, waiting for the runnerd link */
	STATD_TURN_SENT,    /* TURN_RUN handed to the link, waiting for TURN_DONE */
};

struct statd_turn {
	struct statd *d;
	struct statd_turn *prev, *next; /* d->turns */
	struct statd_channel *ch;
	struct statd_item *item;
	char id[RTS_TURN_ID_LEN + 1];
	enum statd_turn_state state;
	bool start_fresh;
	bool cancel_sent;
	int ws_fd; /* O_PATH fd of the verified workspace, until TURN_RUN is sent */
	char *ws_path;
	uint64_t started_ms;
	sd_event_source *backstop;
};

/* The link to runnerd (runnerd.c; common/link.h does the work). */
struct statd_link {
	struct rts_link *link; /* NULL until a turn needs it, and again after it failed */
	char *path;
	uint64_t fail_fast_until_ms;
};

struct statd {
	struct rts_daemon daemon; /* the loop, the config and control.sock (common/daemon.h) */
	struct rts_config *cfg;	  /* daemon.cfg */
	const char *runtime_dir;
	sd_event *ev; /* daemon.event */
	int exit_code;

	sd_event_source *listen_src; /* control.sock */

	struct statd_state *state;
	struct lh_table *channels; /* key -> struct statd_channel, active channels only */

	struct statd_conn *conns; /* open connections */
	unsigned n_conns;
	uint64_t conn_serial;
	/* Connections refused at STATD_CONNS_MAX since the last warning about them, and when
	 * that warning was written: a client flooding the socket gets one line per
	 * STATD_REFUSAL_LOG_MS, not one per connection. */
	uint64_t conns_refused;
	uint64_t conns_refused_logged_ms;

	struct statd_turn *turns; /* running turns */
	unsigned n_running;
	unsigned n_queued_turns;
	size_t queued_bytes;

	struct statd_link link;

	bool stopping;
	bool exiting;
	sd_event_source *stop_timer;
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
/* Drop every connection (shutdown), trying one last non-blocking write of its output. */
void statd_control_close_all(struct statd *d);
/* New {"id": id, "error": code} object (id may be NULL: left out). */
json_object *statd_error_answer(json_object *id, const char *code);

/* queue.c */
void statd_queue_init(struct statd *d);
void statd_queue_free(struct statd *d);
/* Queue a turn for m, a valid, eligible message of a channel that is on (request.h routed
 * it "sandbox"). Returns NULL when queued: the "sandbox" answer went to c for request seq
 * and the turn's events follow. Otherwise returns an answer with route "drop" and the
 * error (shutting_down, busy, too_many_channels, queue_full): nothing was queued. */
json_object *statd_queue_message(struct statd *d, struct statd_conn *c, uint64_t seq, const struct statd_message *m);
/* Queue a mode change or a fresh start. Returns NULL when queued (the answer comes later,
 * maybe before this returns), or an error answer. */
json_object *statd_queue_mode(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
			      const char *channel, enum statd_mode mode);
json_object *statd_queue_fresh(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
			       const char *channel);
/* Cancel the running turn and drop the queued turns of channel; the answer. */
json_object *statd_queue_cancel(struct statd *d, json_object *id, const char *channel);
/* Answers for status (channel may be NULL) and channels. */
json_object *statd_queue_status(struct statd *d, json_object *id, const char *channel);
json_object *statd_queue_channels(struct statd *d, json_object *id);
/* A TURN_DONE arrived (status already range-checked, reply bounded). Unknown ids are
 * ignored: the backstop may have given up on the turn. */
void statd_turn_done(struct statd *d, const char *turn_id, enum rts_turn_status status, const char *reply);
/* The link failed: every running turn ends with `unavailable` and its queue moves on. */
void statd_turns_fail_all(struct statd *d, const char *code);
/* The link is ready: send TURN_RUN for every waiting turn. */
void statd_turns_send_waiting(struct statd *d);
/* Shutdown: drop queued turns, cancel running ones, exit once all are done or after
 * STATD_SHUTDOWN_MS. */
void statd_queue_stop(struct statd *d);

/* runnerd.c */
void statd_link_init(struct statd *d);
void statd_link_free(struct statd *d);
/* Make sure a link exists or is being made. Returns 0 (ready or in progress: waiting turns
 * are sent once it is ready) or -errno when runnerd cannot be reached now. */
int statd_link_start(struct statd *d);
/* The link is up and not congested. */
bool statd_link_ready(struct statd *d);
/* Queue TURN_RUN for t when the link is ready and has room (takes t->ws_fd; the turn is
 * SENT); otherwise leave t WAITING: statd_turns_send_waiting() follows when the link
 * comes up or drains. Errors tear the link down later (deferred), never from inside this
 * call. */
void statd_link_send_run(struct statd *d, struct statd_turn *t);
/* Cancel t at runnerd. Returns true when its TURN_RUN had not left the send queue yet and
 * was withdrawn (runnerd never heard of the turn: the caller ends it now), false when a
 * TURN_CANCEL was queued (a TURN_DONE will follow, or the link fails). */
bool statd_link_send_cancel(struct statd *d, struct statd_turn *t);
/* t is going away: drop references to it from the send queue. */
void statd_link_forget_turn(struct statd *d, struct statd_turn *t);

#endif
