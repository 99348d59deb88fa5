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
 *    calls statd_queue_link_down).
 *
 * Rich channels (DESIGN.md 8.5) use the same queue, with three differences:
 *  - A rich turn, at the head: the workspace and its .channel-key (a channel key other
 *    than the channel's refuses the turn), the mode checked again (a channel no longer
 *    rich fails the turn; another profile is used), then its attachments one at a time
 *    (ATTACH_FETCH, each written into the workspace as it arrives; any failure fails the
 *    turn with the attachment's own outcome), then the input memfd, RICH_ENSURE and
 *    RICH_TURN together; RICH_TURN_DONE ends it. Identity goes to runnerd with the turn
 *    right before it is admitted and nowhere else (seed: bound immediately before the
 *    turn, revoked when it settles).
 *  - A mode change from or to rich records the mode, answers, and then (fire and forget)
 *    sends RICH_STOP for a container the change makes stale and RICH_ENSURE for a channel
 *    that became rich (its .channel-key first). Without a link it only connects: the sync
 *    after HELLO does the rest.
 *  - A fresh start of a rich channel runs like a turn: RICH_STOP, and once runnerd says
 *    the container is gone, the sessions are archived (statd_queue_rich_state); then it
 *    answers. The channel's next successful turn still carries startFresh.
 * After every HELLO the link glue hands the rich channels to statd_queue_rich_sync: a
 * RICH_ENSURE each (a channel busy with a fresh start is left out: it is being stopped),
 * then RICH_SYNC, paced by the link's room. */
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
/* Bytes of rich payload (rendered images) queued or running, all channels: a maximal
 * message renders about 86 MiB. */
#define STATD_QUEUED_RICH_BYTES_MAX (256u << 20)

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
	STATD_REFUSAL_UNAVAILABLE,	 /* FRESH of a rich channel: its container could not be stopped */
};

/* How a turn ended: the one event of an accepted turn. */
enum statd_outcome {
	STATD_OUTCOME_REPLY = 0,
	STATD_OUTCOME_FAILED,
	STATD_OUTCOME_TIMEOUT,
	STATD_OUTCOME_CANCELLED,
	STATD_OUTCOME_CLEANUP_FAILED,
	STATD_OUTCOME_UNAVAILABLE, /* runnerd could not be reached, or the link failed */
	STATD_OUTCOME_ATTACHMENT_REFUSED,  /* rich: a fetch rule refused an attachment */
	STATD_OUTCOME_ATTACHMENT_TOO_LARGE, /* rich: an attachment over its bound or the total */
	STATD_OUTCOME_ATTACHMENT_FAILED,   /* rich: an attachment could not be fetched or stored */
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
	const char *profile;  /* MODE rich */
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

/* One attachment of a rich turn: what the message named, then what was stored. */
struct statd_attachment {
	char *url;  /* the message's URL */
	char *name; /* the message's name, or NULL */
	/* Once fetched and written (ops->attachment_write fills these): */
	char *file_name; /* the safe name given to the model */
	char *path;	 /* /workspace/attachments/<turn id>/<n>-<file_name> */
	char *mime;	 /* the answer's media type, or application/octet-stream */
	uint64_t bytes;
};

/* The input of a rich turn (ops->rich_input makes the memfd of it). Borrowed. */
struct statd_rich_input {
	const char *turn_id;
	const char *speaker_id, *speaker_name, *principal_id;
	const char *text;
	const char *images_json; /* the rendered "images" array, or NULL */
	size_t images_len;
	const struct statd_attachment *attachments;
	size_t n_attachments;
	bool start_fresh;
};

/* RICH_ENSURE. Borrowed; workspace_fd as ops->send_run's. */
struct statd_rich_ensure {
	uint32_t seq;
	const char *channel;
	const char *channel_hash;
	const char *profile;
	const char *workspace;
	int workspace_fd;
};

/* RICH_TURN (with the RICH_ENSURE before it). Borrowed; input_fd is taken like
 * workspace_fd. */
struct statd_rich_turn_start {
	const void *tag; /* for ops->withdraw */
	const char *turn_id;
	const char *channel;
	const char *channel_hash;
	const char *speaker_id;
	const char *speaker_name;
	const char *principal_id;
	const char *profile;
	int input_fd;
	struct statd_rich_ensure ensure;
};

/* A rich turn's reply (statd/rich.h): opaque to the queue, which hands it to the event op
 * and then frees it with ops->rich_reply_free. */
struct statd_rich_reply;

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
	/* The event of origin's turn: for STATD_OUTCOME_REPLY reply (valid UTF-8, no NUL) of a
	 * sealed turn or rich (a rich turn's), NULL otherwise. */
	void (*event)(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply,
		      const struct statd_rich_reply *rich);
	/* The queue is done with origin: nothing more goes to it. */
	void (*release)(void *owner, struct statd_origin *o);

	/* Record mode (and profile, for rich) for channel in the state file. Returns 0;
	 * -E2BIG or -EFBIG when the file would hold too many channels or bytes; another
	 * -errno when it could not be written (the old file and mode stay). Logs its
	 * failures. */
	int (*record_mode)(void *owner, const char *channel, enum statd_mode mode, const char *profile);
	/* The recorded mode of channel (off when never switched) and, for rich, its profile
	 * (borrowed until the next record_mode). */
	enum statd_mode (*mode_of)(void *owner, const char *channel, const char **profile);
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
	/* Optional: queue SPARE_DROP for channel_hash (nothing when the link is not up). */
	void (*send_spare_drop)(void *owner, const char *channel_hash);

	/* ---- rich channels ---- */

	/* Check the channel's .channel-key record (statd/rich.h): 0 when it names channel
	 * (written first when missing); -errno with *why (static) otherwise, -EEXIST for
	 * another channel's key. Logs nothing. */
	int (*channel_key)(void *owner, const char *channel, const char *channel_hash, const char **why);
	/* Queue RICH_ENSURE / RICH_STOP / RICH_SYNC / ATTACH_FETCH: false when the link is
	 * not up or congested (nothing was taken; wait for statd_queue_link_ready), true when
	 * queued (an fd is the link's then). */
	bool (*send_ensure)(void *owner, const struct statd_rich_ensure *e);
	bool (*send_stop)(void *owner, uint32_t seq, const char *channel_hash, uint32_t reason);
	bool (*send_sync)(void *owner, uint32_t channels);
	bool (*send_fetch)(void *owner, const char *turn_id, uint32_t index, const char *url, uint64_t max_bytes);
	/* RICH_ENSURE and RICH_TURN, both or neither (as send_run; s->input_fd and
	 * s->ensure.workspace_fd are the link's when true). */
	bool (*send_rich_turn)(void *owner, const struct statd_rich_turn_start *s);
	/* Write attachment a (index in the turn) from the sealed memfd data_fd (at most
	 * max_bytes) into the workspace's attachments/<turn id>/ and fill a's stored fields.
	 * mime: the fetch's media type ("" when none). Returns 0 or -errno (-EFBIG over
	 * max_bytes) with *why. */
	int (*attachment_write)(void *owner, int workspace_fd, const char *turn_id, uint32_t index, int data_fd,
				const char *mime, uint64_t max_bytes, struct statd_attachment *a, const char **why);
	/* The turn input as a sealed memfd (the fd, or -errno). */
	int (*rich_input)(void *owner, const struct statd_rich_input *in);
	/* Archive the top-level session files of the workspace (a fresh start). Returns 0 or
	 * -errno with *why. */
	int (*archive)(void *owner, int workspace_fd, const char *channel_hash, const char **why);
	/* Make or restore the workspace's rich directories (sessions/ and the rest) before a
	 * rich turn, so the container uses statd's. Returns 0 or -errno with *why. NULL: none. */
	int (*rich_dirs)(void *owner, int workspace_fd, const char **why);
	void (*rich_reply_free)(void *owner, struct statd_rich_reply *r);

	/* statd_queue_stop was called and no turn runs any more: the daemon may exit. Called
	 * once. */
	void (*stopped)(void *owner);
};

/* The configuration the queue needs. */
struct statd_queue_conf {
	uint32_t turn_timeout_ms;      /* turnTimeoutMs: the backstop waits that plus STATD_BACKSTOP_EXTRA_MS */
	uint32_t rich_turn_timeout_ms; /* rich.turnTimeoutMs (0: no rich mode): the attachments get that */
	uint32_t rich_start_timeout_ms; /* rich.startTimeoutMs: a rich turn's backstop adds it */
};

/* A new, empty queue. ops must outlive the queue. Never fails (aborts on OOM). */
struct statd_queue *statd_queue_new(const struct statd_queue_ops *ops, void *owner, const struct statd_queue_conf *conf);
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
	/* Rich turns: */
	bool rich;
	char *images_json;  /* rendered images (statd/rich.h), or NULL: taken when queued */
	size_t images_len;
	struct statd_attachment *attachment_list; /* url and name set; taken when queued */
	size_t n_attachments;
};

/* Queue a turn. Returns STATD_REFUSAL_NONE when queued: the queue took o (and a rich
 * turn's images_json and attachment_list), emitted its SANDBOX answer and will emit
 * exactly one event. Otherwise (SHUTTING_DOWN, BUSY, TOO_MANY_CHANNELS, QUEUE_FULL)
 * nothing was queued and o and the rich payload are still the caller's. */
enum statd_refusal statd_queue_turn(struct statd_queue *q, const struct statd_turn_request *m,
				    struct statd_origin *o);
/* Queue a mode change or a fresh start of channel. Returns STATD_REFUSAL_NONE when
 * queued (the queue took o; its answer comes when it reaches the head, maybe before this
 * returns), or SHUTTING_DOWN, TOO_MANY_CHANNELS, QUEUE_FULL (o is still the caller's). */
enum statd_refusal statd_queue_mode(struct statd_queue *q, const char *channel, enum statd_mode mode,
				    const char *profile, struct statd_origin *o);
enum statd_refusal statd_queue_fresh(struct statd_queue *q, const char *channel, struct statd_origin *o);
/* Cancel channel's running turn and drop its queued turns (each gets a CANCELLED event;
 * mode changes and fresh starts stay queued). Returns how many turns that was. */
unsigned statd_queue_cancel(struct statd_queue *q, const char *channel);

/* ---- inputs from the runnerd link ---- */

/* TURN_DONE (status range-checked, reply bounded). Unknown ids are ignored: the backstop
 * may have given up on the turn. */
void statd_queue_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
			   const char *reply);
/* RICH_TURN_DONE (status range-checked). reply: the parsed reply for RTS_TURN_OK (taken
 * over), NULL otherwise (an OK without one fails the turn). Unknown ids are ignored (the
 * reply is freed). */
void statd_queue_rich_turn_done(struct statd_queue *q, const char *turn_id, enum rts_turn_status status,
				struct statd_rich_reply *reply);
/* ATTACH_DATA: attachment index of turn_id, result 0 (data_fd: its bytes, sealed; the
 * caller closes it after this returns) or a negative errno. Unknown turns and indexes that
 * were not asked for are ignored. */
void statd_queue_attach_data(struct statd_queue *q, const char *turn_id, uint32_t index, int32_t result,
			     const char *mime, int data_fd);
/* RICH_STATE seq for channel_hash. */
void statd_queue_rich_state(struct statd_queue *q, uint32_t seq, const char *channel_hash, uint32_t state,
			    int32_t error);
/* The link is up and HELLO is done: ensure the n rich channels (keys and profiles,
 * copied), then RICH_SYNC. */
void statd_queue_rich_sync(struct statd_queue *q, const char *const *channels, const char *const *profiles,
			   size_t n);
/* The link is up and has room: hand over every waiting TURN_RUN (and the sync's next
 * messages). */
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
	bool stopping;	 /* a rich fresh start waits for the container's removal */
};
void statd_queue_channel_status(const struct statd_queue *q, const char *channel, struct statd_channel_status *st);
/* Running and queued turns of all channels. */
void statd_queue_totals(const struct statd_queue *q, unsigned *running, unsigned *queued);

#endif
