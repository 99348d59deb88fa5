/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's rich channels as a state machine (DESIGN.md 8.5; helpers' rich-design.md
 * sections 1-2): one long-lived container per rich channel, the turns relayed to brokerd.
 *
 * Like runnerd/turn.h, the machine has typed inputs (statd's RICH_* messages and
 * TURN_CANCEL of a rich turn, brokerd's answers, the docker CLI's results, timers) and
 * reaches everything through ops: the docker CLI and timers through turn.h's ops (shared),
 * the broker directory and the link messages through struct runnerd_rich_ops.
 * tests/unit/check_runnerd_rich.c drives it with a fake clock and recording ops.
 *
 * What runnerd knows of a channel's container:
 *   NONE   none (as far as runnerd knows);
 *   FOUND  one exists but is not bound to brokerd: found by the start-up listing (a
 *          previous runnerd's), or kept when brokerd went away. It is adopted when it
 *          runs with the current generation, else replaced;
 *   READY  running, bound, and its worker announced itself (POST /worker/ready).
 * At most one docker CLI step (or one brokerd answer) is in flight per channel:
 *
 *   ENSURE --> INSPECT (docker image inspect: the generation; for READY also whether the
 *   container still runs) --> [REMOVE a stale one] --> BIND (broker.sock made, RICH_BIND,
 *   RICH_BOUND) --> RUN (docker run -d; not when adopting) --> WAIT_READY (RICH_WAIT_READY
 *   until startTimeoutMs) --> READY
 *
 * and the stop: RICH_UNBIND (not waited for), [docker logs --tail 200 of a worker that
 * timed out], docker rm -f of the exact name (a second one RUNNERD_RM_SECOND_DELAY_MS
 * later), the broker directory removed.
 *
 * Rules:
 *  - Every ENSURE checks the generation again (an image rebuilt under the same tag, a
 *    config change after a restart), so the turn that follows it runs on a current
 *    container: statd sends one before every turn.
 *  - A turn is sent to brokerd only when the container is READY and no step is in flight,
 *    one at a time per channel; its deadline (rich.turnTimeoutMs) runs from RICH_TURN and
 *    covers a start. A deadline or TURN_CANCEL of a turn brokerd has cancels it there and
 *    force-removes the container (logging the worker's last 200 log lines on a deadline);
 *    the answer waits for the removal (CLEANUP_FAILED when it failed). The next turn starts
 *    a new container.
 *  - A failure to start answers the waiting ENSUREs FAILED and fails the waiting turns;
 *    whatever was created is removed. A start that timed out logs the worker's lines too.
 *  - Daemon restarts do not kill containers: losing statd cancels its turns at brokerd
 *    (no answers), losing brokerd fails the turns bound through it and keeps the
 *    containers FOUND (the next ENSURE binds them again; the worker re-announces), and
 *    runnerd's own shutdown leaves them running.
 *  - RICH_SYNC removes the containers no RICH_ENSURE of that statd link claimed. */
#ifndef RUNNERD_RICH_H
#define RUNNERD_RICH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/msg.h"
#include "runnerd/docker_args.h"
#include "runnerd/turn.h"

/* docker image inspect / container inspect. */
#define RUNNERD_RICH_INSPECT_TIMEOUT_MS 10000u
#define RUNNERD_RICH_INSPECT_OUTPUT_MAX 4096u
/* docker run -d: bounded by what is left of startTimeoutMs, and at least this. */
#define RUNNERD_RICH_RUN_MIN_MS 5000u
#define RUNNERD_RICH_RUN_OUTPUT_MAX 4096u
/* docker logs --tail: the lines, the bytes kept, one line's length in the log. */
#define RUNNERD_RICH_LOG_LINES 200u
#define RUNNERD_RICH_LOG_OUTPUT_MAX (256u * 1024u)
#define RUNNERD_RICH_LOG_LINE_MAX 300u
#define RUNNERD_RICH_LOGS_TIMEOUT_MS 5000u
/* Rich channels with a container or work at once. */
#define RUNNERD_MAX_RICH 256u

enum runnerd_rich_container {
	RUNNERD_RICH_NONE,
	RUNNERD_RICH_FOUND,
	RUNNERD_RICH_READY,
};

enum runnerd_rich_step {
	RUNNERD_RICH_IDLE,
	RUNNERD_RICH_INSPECT,	  /* docker image inspect */
	RUNNERD_RICH_RUNNING_Q,	  /* docker container inspect: does a READY container still run? */
	RUNNERD_RICH_BIND_WAIT,	  /* broker.sock made; waiting for the brokerd link */
	RUNNERD_RICH_BINDING,	  /* RICH_BIND sent */
	RUNNERD_RICH_RUN,	  /* docker run -d */
	RUNNERD_RICH_WAIT_READY,  /* RICH_WAIT_READY sent */
	RUNNERD_RICH_LOGS,	  /* docker logs --tail (a worker that timed out) */
	RUNNERD_RICH_REMOVE,	  /* docker rm -f */
	RUNNERD_RICH_REMOVE_WAIT, /* the second docker rm -f is due */
};

struct runnerd_rich;
struct runnerd_statd;

/* The effects beyond turn.h's. owner is the one given to runnerd_riches_init. */
struct runnerd_rich_ops {
	/* runRoot/rich-<prefix>/ (0700, made when missing) and a new listening broker.sock in
	 * it (0600; one left there is unlinked first): the listening fd or -errno. Removal of
	 * both: 0 or -errno. */
	int (*dir_open)(void *owner, const char *prefix);
	int (*dir_remove)(void *owner, const char *prefix);
	/* brokerd.sock. Each returns nothing: a send failure fails the link, and its loss
	 * comes back as runnerd_riches_broker_lost. bind takes m's fd and returns the link
	 * generation it went out on; the others go out only on the link of generation gen. */
	uint64_t (*bind)(void *owner, const struct rts_msg_rich_bind *m);
	void (*wait_ready)(void *owner, uint64_t gen, const struct rts_msg_rich_wait_ready *m);
	void (*unbind)(void *owner, uint64_t gen, const char *channel_hash);
	/* Takes m's fd. */
	void (*turn)(void *owner, uint64_t gen, const struct rts_msg_broker_rich_turn *m);
	void (*cancel)(void *owner, uint64_t gen, const char *turn_id);
	/* runnerd.sock, to the statd connection peer. turn_done takes m->fd; -1 means "no
	 * reply": the op sends an empty sealed memfd. */
	void (*state)(void *owner, struct runnerd_statd *peer, const struct rts_msg_rich_state *m);
	void (*turn_done)(void *owner, struct runnerd_statd *peer, struct rts_msg_rich_turn_done *m);
	void (*synced)(void *owner, struct runnerd_statd *peer, uint32_t removed);
};

/* What the machine needs from the configuration; borrowed for its life. */
struct runnerd_rich_config {
	const struct rts_config *cfg;
	uid_t uid; /* the container's user and group */
	gid_t gid;
};

struct runnerd_riches {
	const struct runnerd_turn_ops *ops; /* timers, the docker CLI, workspace_check, broker_want */
	const struct runnerd_rich_ops *rops;
	void *owner;
	struct runnerd_rich_config conf;
	TAILQ_HEAD(, runnerd_rich) list;
	unsigned n;
	bool shutting_down;
};

void runnerd_riches_init(struct runnerd_riches *rs, const struct runnerd_turn_ops *ops,
			 const struct runnerd_rich_ops *rops, void *owner, const struct runnerd_rich_config *conf);

/* ---- start-up ---- */

/* A rich container the start-up listing found (runnerd_parse_rich_line). Kept until an
 * ENSURE adopts or replaces it, or RICH_SYNC removes it. */
void runnerd_rich_found(struct runnerd_riches *rs, const struct runnerd_rich_found *f);

/* ---- inputs from statd ---- */

/* RICH_ENSURE (takes m's fd). Returns 0, or -EBADMSG for a malformed or inconsistent
 * message (the peer is dropped). */
int runnerd_rich_ensure(struct runnerd_riches *rs, struct runnerd_statd *peer, struct rts_msg_rich_ensure *m);
/* RICH_STOP. Returns 0 or -EBADMSG. */
int runnerd_rich_stop(struct runnerd_riches *rs, struct runnerd_statd *peer, const struct rts_msg_rich_stop *m);
/* RICH_TURN (takes m's fd). Returns 0 or -EBADMSG. */
int runnerd_rich_turn(struct runnerd_riches *rs, struct runnerd_statd *peer, struct rts_msg_rich_turn *m);
/* TURN_CANCEL: true when turn_id was a rich turn of peer's (then it is being cancelled). */
bool runnerd_rich_cancel(struct runnerd_riches *rs, struct runnerd_statd *peer, const char *turn_id);
/* RICH_SYNC of peer. */
void runnerd_rich_sync(struct runnerd_riches *rs, struct runnerd_statd *peer, uint32_t channels);
/* peer's connection is gone: its turns are cancelled at brokerd without answers, nothing
 * is answered to it any more; containers stay. */
void runnerd_riches_forget_peer(struct runnerd_riches *rs, struct runnerd_statd *peer);

/* ---- inputs from brokerd ---- */

/* The link is up: channels waiting for it send RICH_BIND. */
void runnerd_riches_broker_up(struct runnerd_riches *rs);
/* The link of generation gen was lost (connect_failed: it never came up). */
void runnerd_riches_broker_lost(struct runnerd_riches *rs, uint64_t gen, bool connect_failed);
void runnerd_rich_bound(struct runnerd_riches *rs, uint64_t gen, const char *channel_hash, int32_t result);
void runnerd_rich_ready(struct runnerd_riches *rs, uint64_t gen, const struct rts_msg_rich_ready *m);
/* BROKER_RICH_DONE (takes m's fd, relayed to statd unread). */
void runnerd_rich_done(struct runnerd_riches *rs, uint64_t gen, struct rts_msg_broker_rich_done *m);

/* ---- shutdown ---- */

/* Leave every container running; cancel the turns at brokerd and answer them CANCELLED;
 * answer what waits FAILED (-ESHUTDOWN); stop every step. */
void runnerd_riches_shutdown(struct runnerd_riches *rs);
/* At exit: free everything without effects. */
void runnerd_riches_free(struct runnerd_riches *rs);

/* ---- queries ---- */

struct runnerd_rich *runnerd_rich_find(struct runnerd_riches *rs, const char *channel_hash);
enum runnerd_rich_container runnerd_rich_container_of(const struct runnerd_rich *ch);
enum runnerd_rich_step runnerd_rich_step_of(const struct runnerd_rich *ch);
/* Does a channel runnerd keeps track of have this hash prefix (RUNNERD_RICH_PREFIX_LEN)? */
bool runnerd_riches_know_prefix(struct runnerd_riches *rs, const char *prefix);
/* Is turn_id a rich turn runnerd holds? */
bool runnerd_rich_has_turn(struct runnerd_riches *rs, const char *turn_id);

/* One line of a worker's log as runnerd logs it: printable ASCII, other bytes as '?',
 * at most RUNNERD_RICH_LOG_LINE_MAX characters ("..." when cut). out: that plus 4. */
void runnerd_rich_log_line(const char *s, size_t len, char out[RUNNERD_RICH_LOG_LINE_MAX + 4]);

#endif
