/* SPDX-License-Identifier: Apache-2.0 */
/* statd's channel queues as a state machine (DESIGN.md section 3 steps 1-3 and 6).
 *
 * Dependencies point one way:
 *
 *   control.c -> control_queue.c --inputs--> queue.c <--inputs-- runnerd.c (link glue)
 *
 * and queue.c reaches the others only through struct statd_queue_ops, which queue_ops.c
 * fills: answers and events (control_queue.c makes JSON of them), TURN_RUN and
 * TURN_CANCEL (runnerd.c), the state file, workspaces and timers on the loop. queue.c
 * includes this header and common/ only, so tests/unit/check_statd_queue.c drives it
 * with a fake clock and recording ops.
 *
 * Rules of the machine:
 *  - A channel is "active" while it has a running turn, queued items or a pending fresh
 *    start. Turns, mode changes and fresh starts of one channel run one at a time in
 *    arrival order (seed: the channel queue prevents overlapping turns; mode off takes
 *    effect after queued work). Mode changes and fresh starts complete when they reach the
 *    head, so a queue is only ever non-empty behind a running turn. Channels are
 *    independent: ending a turn may start the next item of its own channel, never
 *    anything of another.
 *  - An accepted turn's answer (route sandbox) is emitted before anything the turn
 *    produces; every accepted turn ends with exactly one event (a reply or an error).
 *  - Effects never call back into the queue: the ops are leaves. What an effect sets off
 *    comes back later as an input (a failed send fails the link, whose deferred teardown
 *    calls statd_queue_link_down). */
#ifndef STATD_QUEUE_H
#define STATD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "statd/state.h"

/* Queue bounds: per channel, and across all channels so that many channels cannot add up
 * to unbounded memory. */
#define STATD_QUEUE_MAX 64u		   /* queued items (turns, mode, fresh) per channel */
#define STATD_QUEUED_TURNS_MAX 4096u	   /* queued turns, all channels */
#define STATD_QUEUED_BYTES_MAX (64u << 20) /* bytes of queued guest text, all channels */
#define STATD_ACTIVE_CHANNELS_MAX 16384u   /* channels with queued work or a pending fresh */

/* Timing. Connecting to runnerd and its HELLO have common/link.h's deadlines. */
#define STATD_RUNNERD_FAIL_FAST_MS 1000u /* after a link that never came up, fail turns at once */
#define STATD_BACKSTOP_EXTRA_MS 30000u	 /* turnTimeoutMs + this: runnerd never answered */
#define STATD_SHUTDOWN_MS 10000u	 /* stopping: how long running turns get to end */

struct statd_queue;
struct rts_timer; /* a timer handle (common/timer.h), opaque to the queue */
/* Where a request's answer and events go. Opaque here: the queue only hands it back to
 * the ops, and releases it when the item is done (control_queue.c defines it). */
struct statd_origin;

/* Why the queue refused a request, or a mode change failed. */
enum statd_refusal {
	STATD_REFUSAL_NONE = 0,
	STATD_REFUSAL_SHUTTING_DOWN,
	STATD_REFUSAL_BUSY,		 /* the queued turns or bytes of all channels are at their bound */
	STATD_REFUSAL_TOO_MANY_CHANNELS, /* active channels, or the state file's table, is full */
	STATD_REFUSAL_QUEUE_FULL,	 /* STATD_QUEUE_MAX items in this channel */
	STATD_REFUSAL_STATE_WRITE,	 /* the state file could not be written */
};

/* How a turn ended: the one event of an accepted turn. */
enum statd_outcome {
	STATD_OUTCOME_REPLY = 0,
	STATD_OUTCOME_FAILED,
	STATD_OUTCOME_TIMEOUT,
	STATD_OUTCOME_CANCELLED,
	STATD_OUTCOME_CLEANUP_FAILED,
	STATD_OUTCOME_UNAVAILABLE, /* runnerd could not be reached, or the link failed */
};

enum statd_answer_kind {
	STATD_ANSWER_SANDBOX, /* a message's turn was queued */
	STATD_ANSWER_MODE,    /* a mode change reached the head of its queue */
	STATD_ANSWER_FRESH,   /* a fresh start reached the head of its queue */
};

/* An answer that is ready. Strings are borrowed for the duration of the op. */
struct statd_answer {
	enum statd_answer_kind kind;
	enum statd_refusal error; /* MODE: NONE, TOO_MANY_CHANNELS or STATE_WRITE */
	const char *channel;
	enum statd_mode mode; /* MODE */
};

/* What starting a turn at runnerd needs (statd/runnerd.c makes a TURN_RUN of it). Strings
 * are borrowed for the duration of the op. */
struct statd_turn_start {
	const void *tag; /* the turn, for ops->withdraw */
	const char *turn_id;
	const char *channel;
	const char *channel_hash;
	const char *speaker_id;
	const char *speaker_name;
	const char *principal_id;
	const char *text;
	uint32_t attachments;
	bool start_fresh;
	const char *workspace;
	int workspace_fd; /* O_PATH fd of the verified workspace; see ops->send_run */
};

/* The effects. owner is the one given to statd_queue_new. */
struct statd_queue_ops {
	/* CLOCK_MONOTONIC in ms: turn durations, the fail-fast window. */
	uint64_t (*now_ms)(void *owner);
	/* One-shot timers with common/timer.h's contract: fn(arg) runs once, after the timer
	 * freed itself; after_ms > 0 here. Returns 0 or -errno. */
	int (*timer_start)(void *owner, uint64_t after_ms, void (*fn)(void *arg), void *arg,
			   struct rts_timer **ret);
	void (*timer_stop)(void *owner, struct rts_timer *t);

	/* The answer to origin's request is ready. */
	void (*answer)(void *owner, struct statd_origin *o, const struct statd_answer *a);
	/* The event of origin's turn: reply (valid UTF-8, no NUL) for STATD_OUTCOME_REPLY,
	 * NULL otherwise. */
	void (*event)(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply);
	/* The queue is done with origin: nothing more goes to it. */
	void (*release)(void *owner, struct statd_origin *o);

	/* Record mode for channel in the state file. Returns 0; -E2BIG or -EFBIG when the
	 * file would hold too many channels or bytes; another -errno when it could not be
	 * written (the old file and mode stay). Logs its failures. */
	int (*record_mode)(void *owner, const char *channel, enum statd_mode mode);
	/* Create and verify the channel's workspace (statd/workspace.h). Returns an O_PATH fd
	 * and *path (heap), or -errno with *why (static). */
	int (*workspace_open)(void *owner, const char *channel_hash, char **path, const char **why);

	/* Make sure a link to runnerd exists or is being made; statd_queue_link_ready follows
	 * once it can take turns, statd_queue_link_down when it fails. Returns 0, or -errno
	 * when it cannot even be started (logged). */
	int (*connect)(void *owner);
	/* Hand TURN_RUN to the link. Returns false when the link is not up or congested:
	 * nothing was taken, the turn waits for statd_queue_link_ready. Returns true when it
	 * was queued: workspace_fd is the link's from then on, whatever happens to the send (a
	 * failure fails the link, and statd_queue_link_down ends the turn). */
	bool (*send_run)(void *owner, const struct statd_turn_start *s);
	/* Take back the TURN_RUN tagged tag if it has not left the send queue yet. Returns
	 * true when it was still there (runnerd never heard of the turn). */
	bool (*withdraw)(void *owner, const void *tag);
	/* Queue TURN_CANCEL (nothing when the link is not up: its failure ends the turn). */
	void (*send_cancel)(void *owner, const char *turn_id);

	/* statd_queue_stop was called and no turn runs any more: the daemon may exit. Called
	 * once. */
	void (*stopped)(void *owner);
};

/* A new, empty queue. turn_timeout_ms is the config's turnTimeoutMs (the backstop waits
 * that plus STATD_BACKSTOP_EXTRA_MS for runnerd's answer). ops must outlive the queue.
 * Never fails (aborts on OOM). */
struct statd_queue *statd_queue_new(const struct statd_queue_ops *ops, void *owner, uint32_t turn_timeout_ms);
/* At exit: release every item and turn without answers or events, stop every timer.
 * Safe on NULL. */
void statd_queue_free(struct statd_queue *q);

/* ---- inputs from control requests (all fields validated by the caller) ---- */

/* A message that routes to the sandbox. Strings are copied. */
struct statd_turn_request {
	const char *channel;
	const char *speaker_id;
	const char *speaker_name;
	const char *principal_id; /* never empty: a message without one is not eligible */
	const char *text;
	uint32_t attachments;
};

/* Queue a turn. Returns STATD_REFUSAL_NONE when queued: the queue took o, emitted its
 * SANDBOX answer and will emit exactly one event. Otherwise (SHUTTING_DOWN, BUSY,
 * TOO_MANY_CHANNELS, QUEUE_FULL) nothing was queued and o is still the caller's. */
enum statd_refusal statd_queue_turn(struct statd_queue *q, const struct statd_turn_request *m,
				    struct statd_origin *o);
/* Queue a mode change or a fresh start of channel. Returns STATD_REFUSAL_NONE when
 * queued (the queue took o; its answer comes when it reaches the head, maybe before this
 * returns), or SHUTTING_DOWN, TOO_MANY_CHANNELS, QUEUE_FULL (o is still the caller's). */
enum statd_refusal statd_queue_mode(struct statd_queue *q, const char *channel, enum statd_mode mode,
				    struct statd_origin *o);
enum statd_refusal statd_queue_fresh(struct statd_queue *q, const char *channel, struct statd_origin *o);
/* Cancel channel's running turn and drop its queued turns (each gets a CANCELLED event;
 * mode changes and fresh starts stay queued). Returns how many turns that was. */
unsigned statd_queue_cancel(struct statd_queue *q, const char *channel);

/* ---- inputs from the runnerd link ---- */

/* TURN_DONE (status range-checked, reply bounded). Unknown ids are ignored: the backstop
 * may have given up on the turn. */
void statd_queue_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
			   const char *reply);
/* The link is up and has room: hand over every waiting TURN_RUN. */
void statd_queue_link_ready(struct statd_queue *q);
/* The link failed: every running turn ends UNAVAILABLE and its queue moves on. When it
 * never came up (was_up false), turns fail at once for STATD_RUNNERD_FAIL_FAST_MS
 * instead of each waiting for another connect. */
void statd_queue_link_down(struct statd_queue *q, bool was_up);

/* ---- shutdown ---- */

/* Refuse new requests, drop queued turns, cancel running ones; ops->stopped once all are
 * done or STATD_SHUTDOWN_MS later (the rest end CANCELLED). Idempotent. */
void statd_queue_stop(struct statd_queue *q);

/* ---- queries (status answers) ---- */

struct statd_channel_status {
	bool running;
	unsigned queued; /* queued turns */
	bool fresh;	 /* a fresh start is pending */
};
void statd_queue_channel_status(const struct statd_queue *q, const char *channel, struct statd_channel_status *st);
/* Running and queued turns of all channels. */
void statd_queue_totals(const struct statd_queue *q, unsigned *running, unsigned *queued);

#endif
