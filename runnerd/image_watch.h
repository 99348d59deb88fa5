/* SPDX-License-Identifier: Apache-2.0 */
/* Watching the guest image for a change, for the warm spares (issue 15: a spare is
 * discarded on an image change; runnerd/spare.h).
 *
 * A cold turn's `docker run` resolves the configured image name when it starts, so it
 * always runs the image the name means then. A spare resolved it when it was started,
 * perhaps long before its turn: after `roundtable-sandbox image build` (or any retag) it
 * would run the old image. So runnerd keeps a `docker events --filter type=image` child
 * running and, on every event it prints (whatever it says), inspects the configured image
 * again; the spares whose container runs another image ID are then discarded and replaced.
 *
 * Fail closed: spares are claimed only while the watch is current, that is while the
 * events child runs and the image was inspected after the last event it printed. From an
 * event to the end of the inspect after it, while the child is down (dockerd restarted,
 * the CLI killed) and before the first inspect, turns start cold. The child is started
 * with --since a moment before now, so an event between its start and the first inspect is
 * replayed rather than missed; it is started again after RUNNERD_IMAGE_WATCH_RETRY_MS,
 * doubling up to RUNNERD_IMAGE_WATCH_RETRY_MAX_MS while it keeps failing. */
#ifndef RUNNERD_IMAGE_WATCH_H
#define RUNNERD_IMAGE_WATCH_H

#include <stdbool.h>

#include "runnerd/docker_args.h"

#define RUNNERD_IMAGE_WATCH_RETRY_MS 1000u
#define RUNNERD_IMAGE_WATCH_RETRY_MAX_MS 30000u
/* The events child starts with --since this many seconds before now (whole seconds: the
 * CLI's own resolution), so an event of the moment it connects is replayed. */
#define RUNNERD_IMAGE_WATCH_SINCE_S 2
/* `docker image inspect` of the configured image after an event. */
#define RUNNERD_IMAGE_INSPECT_TIMEOUT_MS 10000u

struct runnerd;
struct runnerd_proc;
struct rts_timer;

struct runnerd_image_watch {
	struct runnerd_proc *events;  /* docker events, while it runs */
	struct runnerd_proc *inspect; /* docker image inspect, while it runs */
	struct rts_timer *restart;    /* the events child is started again when it fires */
	char id[RUNNERD_IMAGE_ID_MAX + 1]; /* the configured image's ID at the last inspect; "" unknown */
	bool dirty;		      /* an event (or a restart) since the last inspect began */
	bool stopped;
	unsigned retry_ms;	      /* the next restart delay */
	unsigned long long events_seen; /* event reads, since start-up (for the log and tests) */
};

/* Start watching (after start-up, when warmSpares is on). Failures to start the child are
 * logged and retried; the watch is then simply not current. */
void runnerd_image_watch_start(struct runnerd *rd);

/* Stop watching (shutdown): the children are killed, nothing is restarted, and the watch
 * is never current again. */
void runnerd_image_watch_stop(struct runnerd *rd);

/* The image ID spares may be claimed with: the configured image's ID while the watch is
 * current, else NULL (every turn starts cold). Borrowed from rd. */
const char *runnerd_image_watch_current(const struct runnerd *rd);

#endif
