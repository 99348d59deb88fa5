/* SPDX-License-Identifier: Apache-2.0 */
/* Watching the guest image for a change, for the warm spares (issue 15: a spare is
 * discarded on an image change; runnerd/spare.h).
 *
 * A cold turn's `docker run` resolves the configured image name when it starts, so it
 * always runs the image the name means then. A spare resolved it when it was started,
 * perhaps long before its turn: after `roundtable-sandbox image build` (or any retag) it
 * would run the old image. Two things tell runnerd that the name moved:
 *  - a `docker events --filter type=image --filter image=<name>` child, for as long as
 *    runnerd runs: every line it prints (whatever it says) is an event on the name, after
 *    which the image is inspected again at once. It is started with --since a moment
 *    before now, so an event between its start and the first inspect is replayed. It
 *    ends itself every RUNNERD_IMAGE_WATCH_ROTATE_S (--until) and is replaced at once by
 *    one whose --since overlaps, so nothing is missed and a child whose runnerd died
 *    (SIGKILL, outside systemd's cgroup) does not outlive it by more than that. One
 *    that ends otherwise is started again after RUNNERD_IMAGE_WATCH_RETRY_MS, doubling up
 *    to RUNNERD_IMAGE_WATCH_RETRY_MAX_MS while it keeps failing;
 *  - an inspect every RUNNERD_IMAGE_RECHECK_MS while spares exist (or while the image is
 *    unknown): the backstop for events that never come (a stalled stream, a builder that
 *    emits no tag event, an image removed, which emits no event naming it).
 * After each inspect, spares whose container runs another image ID are replaced.
 *
 * Fail closed: spares are claimed only while the watch is current, that is while the
 * events child runs, no event (or restart) is still unchecked, and the last inspect
 * succeeded less than RUNNERD_IMAGE_FRESH_MS ago. Otherwise every turn starts cold, from
 * the name. What is left is bounded: an image change no event reports is seen within
 * RUNNERD_IMAGE_RECHECK_MS plus one inspect. */
#ifndef RUNNERD_IMAGE_WATCH_H
#define RUNNERD_IMAGE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "runnerd/docker_args.h"

#define RUNNERD_IMAGE_WATCH_RETRY_MS 1000u
#define RUNNERD_IMAGE_WATCH_RETRY_MAX_MS 30000u
/* The events child starts with --since this many seconds before now (whole seconds: the
 * CLI's own resolution), so an event of the moment it connects is replayed. */
#define RUNNERD_IMAGE_WATCH_SINCE_S 2
/* Each events child ends itself this long after its start (--until). */
#define RUNNERD_IMAGE_WATCH_ROTATE_S 30
/* `docker image inspect` of the configured image. */
#define RUNNERD_IMAGE_INSPECT_TIMEOUT_MS 10000u
/* The backstop inspect, and how old a successful inspect may be for a claim. */
#define RUNNERD_IMAGE_RECHECK_MS 5000u
#define RUNNERD_IMAGE_FRESH_MS (2u * RUNNERD_IMAGE_RECHECK_MS + RUNNERD_IMAGE_INSPECT_TIMEOUT_MS)

struct runnerd;
struct runnerd_proc;
struct rts_timer;

struct runnerd_image_watch {
	struct runnerd_proc *events;  /* docker events, while it runs */
	struct runnerd_proc *inspect; /* docker image inspect, while it runs */
	struct rts_timer *restart;    /* the events child is started again when it fires */
	struct rts_timer *recheck;    /* the backstop inspect */
	char id[RUNNERD_IMAGE_ID_MAX + 1]; /* the configured image's ID at the last inspect; "" unknown */
	uint64_t checked_ms;	      /* CLOCK_MONOTONIC ms at which the last successful inspect began */
	uint64_t inspect_began_ms;    /* ... and the running one */
	bool pending;		      /* an event or a restart that no inspect has begun to check */
	bool inspect_blocks;	      /* the running inspect checks an event: no claim until it ends */
	bool stopped;
	unsigned retry_ms;	      /* the next restart delay */
	long long until;	      /* the running events child's --until (seconds since the epoch) */
};

/* Start watching (after start-up, when warmSpares is on). Failures to start the child are
 * logged and retried; the watch is then simply not current. */
void runnerd_image_watch_start(struct runnerd *rd);

/* Stop watching (shutdown): the children are killed, nothing is restarted, and the watch
 * is never current again. */
void runnerd_image_watch_stop(struct runnerd *rd);

/* The image ID spares may be claimed with: the configured image's ID while the watch is
 * current, else NULL (every turn starts cold) and *why (may be NULL) says why, for the
 * log. Borrowed from rd, or static. */
const char *runnerd_image_watch_current(const struct runnerd *rd, const char **why);

/* A spare is being started: when the last inspect is older than RUNNERD_IMAGE_RECHECK_MS
 * (no spare existed, so the backstop slept), inspect now, without holding claims up, so the
 * spare is claimable as soon as it is ready. */
void runnerd_image_watch_spare_started(struct runnerd *rd);

/* Inspect the image again soon, and claim no spare until that inspect ended: a spare's
 * container runs an image ID other than the one last inspected (the name moved and no
 * event said so yet, or the last inspect is older than the spare). */
void runnerd_image_watch_recheck(struct runnerd *rd);

#endif
