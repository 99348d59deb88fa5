/* SPDX-License-Identifier: Apache-2.0 */
/* The image watch of runnerd/image_watch.h. */
#include "config.h"

#include <time.h>

#include "common/log.h"
#include "common/spawn.h"
#include "common/timer.h"
#include "common/util.h"
#include "runnerd/image_watch.h"
#include "runnerd/runnerd.h"

static void events_start(struct runnerd *rd, long long since, bool rotation);
static void inspect_start(struct runnerd *rd, bool blocks);
static void recheck_arm(struct runnerd *rd);

static void inspect_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd *rd = arg;
	struct runnerd_image_watch *w = &rd->image_watch;
	w->inspect = NULL;
	w->inspect_blocks = false;
	char id[RUNNERD_IMAGE_ID_MAX + 1];
	if (r->exited && r->status == 0 && runnerd_parse_image_id(r->out, r->out_len, id) == 0) {
		if (strcmp(id, w->id) != 0) {
			if (w->id[0])
				log_notice("image %s is now %.19s (was %.19s): its spares are replaced", rd->cfg->image,
					   id, w->id);
			memcpy(w->id, id, sizeof(w->id));
		}
		w->checked_ms = w->inspect_began_ms;
		if (w->events)
			w->retry_ms = 0; /* the watch works again: the next failure waits the least */
	} else {
		char line[RUNNERD_STDERR_LOG_MAX + 1];
		rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
		log_warning("cannot inspect image %s (%s): no spare is used until it can be (tried again in %u ms)",
			    rd->cfg->image, line[0] ? line : r->timed_out ? "timed out" : "failed",
			    RUNNERD_IMAGE_RECHECK_MS);
		w->id[0] = '\0';
	}
	/* Spares of another image (all of them when the image is unknown) go. */
	runnerd_spares_image_checked(rd, w->id);
	if (w->pending && !w->stopped)
		inspect_start(rd, true);
}

/* blocks: the inspect checks an event, and no spare is claimed until it ended. */
static void inspect_start(struct runnerd *rd, bool blocks)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	if (w->stopped)
		return;
	if (w->inspect) {
		/* The one running may have asked docker before the event: another follows. */
		if (blocks)
			w->pending = true;
		return;
	}
	if (blocks)
		w->pending = false;
	cleanup_strv char **argv = runnerd_docker_image_inspect_argv(RTS_DOCKER, rd->cfg->image);
	int r = argv ? runnerd_proc_spawn(rd->event, argv, rd->child_env, NULL, 0, RUNNERD_CHECK_OUTPUT_MAX,
					  RUNNERD_IMAGE_INSPECT_TIMEOUT_MS, inspect_done, rd, &w->inspect)
		     : -EINVAL;
	if (r < 0) {
		log_warning_errno(r, "cannot run docker image inspect: %m; no spare is used until it can be");
		w->pending = w->pending || blocks; /* not current; the backstop tries again */
		return;
	}
	w->inspect_blocks = blocks;
	w->inspect_began_ms = rts_now_ms();
}

static void recheck_fire(void *arg)
{
	struct runnerd *rd = arg;
	struct runnerd_image_watch *w = &rd->image_watch;
	w->recheck = NULL; /* fired */
	/* Only while a spare could be claimed from what it finds, or to learn the image at
	 * all (after a failed inspect, nothing else would try again on a quiet host). */
	if (rd->spares.n > 0 || !w->id[0] || w->pending)
		inspect_start(rd, w->pending);
	recheck_arm(rd);
}

static void recheck_arm(struct runnerd *rd)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	if (w->stopped || w->recheck)
		return;
	if (rts_timer_start(rd->event, RUNNERD_IMAGE_RECHECK_MS, 100, recheck_fire, rd, &w->recheck) < 0)
		log_error("cannot arm the image recheck: spares stop being used once the last check is %u ms old",
			  RUNNERD_IMAGE_FRESH_MS);
}

static void on_event(struct runnerd_proc *p, void *arg)
{
	struct runnerd *rd = arg;
	log_debug("an image event on %s: inspecting it again", rd->cfg->image);
	inspect_start(rd, true);
}

static long long wall_seconds(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (long long)now.tv_sec;
}

static void restart_fire(void *arg)
{
	struct runnerd *rd = arg;
	rd->image_watch.restart = NULL; /* fired */
	events_start(rd, wall_seconds() - RUNNERD_IMAGE_WATCH_SINCE_S, false);
}

static void restart_later(struct runnerd *rd)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	if (w->stopped || w->restart)
		return;
	unsigned delay = w->retry_ms ? w->retry_ms : RUNNERD_IMAGE_WATCH_RETRY_MS;
	w->retry_ms = delay * 2 > RUNNERD_IMAGE_WATCH_RETRY_MAX_MS ? RUNNERD_IMAGE_WATCH_RETRY_MAX_MS : delay * 2;
	if (rts_timer_start(rd->event, delay, 100, restart_fire, rd, &w->restart) < 0)
		log_error("cannot arm the image watch's restart: no spare is used until runnerd restarts");
}

static void events_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd *rd = arg;
	struct runnerd_image_watch *w = &rd->image_watch;
	w->events = NULL;
	if (w->stopped)
		return;
	/* (A second early: dockerd's clock may have passed the boundary before ours.) */
	if (r->exited && r->status == 0 && !r->killed && wall_seconds() >= w->until - 1) {
		/* Its --until came: the next one picks up where it ended (the overlap replays
		 * anything in between), from this same callback, so no claim sees the gap. */
		log_debug("docker events reached its end; watching on with a new one");
		events_start(rd, w->until - RUNNERD_IMAGE_WATCH_SINCE_S, true);
		return;
	}
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	log_warning("docker events %s %d (%s): no spare is used until the image watch is back",
		    r->exited ? "exited with status" : "died of signal", r->status, line[0] ? line : "no message");
	restart_later(rd);
}

/* Start the events child, replaying from since. Unless it replaces one that reached its
 * end (rotation: the overlap replays the gap), the image is inspected too, since nothing
 * watched meanwhile. */
static void events_start(struct runnerd *rd, long long since, bool rotation)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	if (w->stopped || w->events)
		return;
	long long until = wall_seconds() + RUNNERD_IMAGE_WATCH_ROTATE_S;
	cleanup_strv char **argv = runnerd_docker_image_events_argv(RTS_DOCKER, rd->cfg->image, since, until);
	int r = argv ? runnerd_proc_spawn_watch(rd->event, argv, rd->child_env, on_event, events_done, rd, &w->events)
		     : -EINVAL;
	if (r < 0) {
		log_warning_errno(r, "cannot run docker events: %m; no spare is used until it runs");
		restart_later(rd);
		return;
	}
	w->until = until;
	/* Whatever happened while no child watched is unknown: look again. */
	if (!rotation)
		inspect_start(rd, true);
}

void runnerd_image_watch_start(struct runnerd *rd)
{
	events_start(rd, wall_seconds() - RUNNERD_IMAGE_WATCH_SINCE_S, false);
	recheck_arm(rd);
}

void runnerd_image_watch_stop(struct runnerd *rd)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	w->stopped = true;
	rts_timer_stop(w->restart);
	w->restart = NULL;
	rts_timer_stop(w->recheck);
	w->recheck = NULL;
	struct runnerd_proc **procs[] = {&w->events, &w->inspect};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(procs); i++)
		if (*procs[i]) {
			runnerd_proc_detach(*procs[i]);
			runnerd_proc_kill(*procs[i]);
			*procs[i] = NULL;
		}
}

void runnerd_image_watch_spare_started(struct runnerd *rd)
{
	struct runnerd_image_watch *w = &rd->image_watch;
	if (!w->inspect && rts_now_ms() - w->checked_ms > RUNNERD_IMAGE_RECHECK_MS)
		inspect_start(rd, false);
}

void runnerd_image_watch_recheck(struct runnerd *rd)
{
	inspect_start(rd, true);
}

const char *runnerd_image_watch_current(const struct runnerd *rd, const char **why)
{
	const struct runnerd_image_watch *w = &rd->image_watch;
	const char *reason = NULL;
	if (w->stopped)
		reason = "runnerd is stopping";
	else if (!w->events)
		reason = "the image watch is down";
	else if (w->pending || (w->inspect && w->inspect_blocks))
		reason = "the image is being checked";
	else if (!w->id[0])
		reason = "the image could not be inspected";
	else if (rts_now_ms() - w->checked_ms > RUNNERD_IMAGE_FRESH_MS)
		reason = "the image was not inspected recently";
	if (why)
		*why = reason;
	return reason ? NULL : w->id;
}
