/* SPDX-License-Identifier: Apache-2.0 */
/* Warm spares (DESIGN.md 8.4, issue 15): per sandboxed channel with recent traffic, one
 * turn container started ahead of demand, so an admitted turn skips `docker run`'s start.
 *
 * How the workspace and the broker socket reach a container started before its turn:
 * Docker fixes bind mounts when a container is created, so nothing known only at claim
 * time can be mounted. Neither needs to be:
 *  - the workspace is the channel's own (<workspaceRoot>/<channel hash>), known once the
 *    channel had a turn: a spare belongs to exactly one channel, is started after that
 *    channel's turn with the directory statd verified for it (its O_PATH fd is kept and the
 *    path re-checked right before docker run), and is claimed only by a turn of the same
 *    channel hash whose verified workspace fd names the same inode. A turn of another
 *    channel never finds it; a workspace that was replaced meanwhile discards it.
 *  - the broker socket is the spare's own: runRoot/<spare id>/broker.sock, bound by runnerd
 *    before the spare starts and bind-mounted like a turn's. Until a turn claims the spare
 *    no broker serves it (runnerd holds the listener and never accepts; the worker is still
 *    waiting for stdin and calls nothing). At the claim, runnerd drops anything that queued
 *    on the listener, then hands it to brokerd in BROKER_BIND with that turn's binding. One
 *    listener per spare, one spare per turn: no turn's broker is ever reachable from a
 *    container another turn used.
 * The worker input (identity, text, deadlines) goes to the spare's stdin only when the turn
 * is bound: until then the spare holds no key, no speaker and no guest text.
 *
 * Lifecycle: started by spare_refill after a turn of its channel (not after a cancelled
 * one), ready once `docker container inspect` says it runs, claimed once (then the turn
 * owns it and removes it like any turn container; one that ends before the turn's input
 * reached it gives way to a cold start, turn.c spare_lost), discarded after "warmSpareIdleMs"
 * without a turn, on a workspace mismatch, and at shutdown. A spare that dies while it
 * waits (killed from outside, a failed start) is removed and started again up to
 * RUNNERD_SPARE_RETRIES times. The config is read once at start-up; a config change takes
 * a restart, and start-up removes every container of this installation by its label,
 * spares included. An image change is seen while running (runnerd/image_watch.h): the
 * readiness check records the image ID a spare's container runs, a spare is claimed only
 * while the watch is current and says the configured image still has that ID, and a spare
 * of another image is discarded and replaced as soon as the watch sees the change. At most
 * "warmSparesMax" spares exist at once. */
#ifndef RUNNERD_SPARE_H
#define RUNNERD_SPARE_H

#include <stdbool.h>
#include <sys/queue.h>

#include "common/ids.h"
#include "common/limits.h"
#include "runnerd/proc.h"
#include "runnerd/turn.h"

/* Readiness: docker container inspect every RUNNERD_SPARE_PROBE_MS, at most
 * RUNNERD_SPARE_PROBES times, then the spare is given up as failed. */
#define RUNNERD_SPARE_PROBE_MS 100u
#define RUNNERD_SPARE_PROBES 100u
#define RUNNERD_SPARE_PROBE_TIMEOUT_MS 5000u
/* A spare that died while waiting is started again after this, at most this many times in
 * a row (a turn of its channel resets the count). */
#define RUNNERD_SPARE_RETRY_MS 1000u
#define RUNNERD_SPARE_RETRIES 3u

struct runnerd;
struct runnerd_spare;
struct runnerd_spare_retry;

struct runnerd_spares {
	TAILQ_HEAD(, runnerd_spare) list;
	unsigned n;	   /* spares in the pool (starting or ready) */
	unsigned n_ready;  /* of which ready */
	unsigned removing; /* discarded spares whose docker rm -f still runs */
	unsigned claimed;  /* spares turns took over, since start-up */
	TAILQ_HEAD(, runnerd_spare_retry) retries; /* dead spares' channels, started again soon */
	bool shutting_down;
};

void runnerd_spares_init(struct runnerd *rd);
/* The turn machine's ops (runnerd/turn.h: spare_claim, spare_feed, spare_refill). */
int runnerd_spare_claim(struct runnerd *rd, const char *channel_hash, int workspace_fd, runnerd_proc_done_t done,
			void *arg, struct runnerd_spare_claim *out);
int runnerd_spare_feed(struct runnerd *rd, struct runnerd_proc *p, char *input, size_t input_len);
void runnerd_spare_refill(struct runnerd *rd, const char *channel_hash, const char *workspace, int workspace_fd);
/* The image watch inspected the configured image: image_id is its ID, or "" when it could
 * not be inspected. Spares whose container runs another image are discarded and started
 * again (from the image the name means now); with "" every spare is discarded. */
void runnerd_spares_image_checked(struct runnerd *rd, const char *image_id);
/* SPARE_DROP: discard channel_hash's spare, if any (its channel was turned off or had a
 * turn cancelled). */
void runnerd_spare_drop(struct runnerd *rd, const char *channel_hash);
/* Discard every spare and start no more; runnerd_spares_idle() tells when their
 * containers are gone. */
void runnerd_spares_shutdown(struct runnerd *rd);
bool runnerd_spares_idle(const struct runnerd *rd);
/* Tell peer (NULL: every statd) which channels have a ready spare (SPARE_STATE, for
 * `status` and `channels`); a congested link gets it when it drains. */
void runnerd_spares_announce(struct runnerd *rd, struct runnerd_statd *peer);
/* Containers the pool accounts for: spares waiting plus those still being removed. */
unsigned runnerd_spares_containers(const struct runnerd *rd);

#endif
