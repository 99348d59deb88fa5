/* SPDX-License-Identifier: Apache-2.0 */
/* The warm spare pool of runnerd/spare.h. */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/spawn.h"
#include "common/timer.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/image_watch.h"
#include "runnerd/removal.h"
#include "runnerd/runnerd.h"
#include "runnerd/spare.h"

struct runnerd_spare {
	TAILQ_ENTRY(runnerd_spare) entry;
	struct runnerd *rd;
	char id[RTS_TURN_ID_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char *workspace;
	int workspace_fd; /* O_PATH of the directory statd verified, checked before docker run */
	char *container;
	int listen_fd;	  /* its broker.sock; nobody accepts until a turn claims it */
	struct runnerd_proc *run, *probe;
	struct rts_timer *probe_timer, *idle_timer;
	unsigned probes;
	unsigned failures; /* spares of this channel that died in a row before it */
	char image_id[RUNNERD_IMAGE_ID_MAX + 1]; /* what its container runs, once ready */
	bool ready;
};

/* A discarded spare's container being removed (runnerd/removal.h, as for a turn's), then
 * its run dir. */
struct spare_removal {
	struct runnerd *rd;
	char id[RTS_TURN_ID_LEN + 1];
	char *container;
	struct runnerd_removal removal;
};

/* A dead spare's channel, started again after RUNNERD_SPARE_RETRY_MS (unless dropped or
 * shutting down first). */
struct runnerd_spare_retry {
	TAILQ_ENTRY(runnerd_spare_retry) entry;
	struct runnerd *rd;
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char *workspace;
	int workspace_fd;
	unsigned failures;
	struct rts_timer *timer;
};

static void spare_start(struct runnerd *rd, const char *channel_hash, const char *workspace, int workspace_fd,
			unsigned failures);

static void announce_to(struct runnerd *rd, struct runnerd_statd *peer, const char *ready)
{
	if (!rts_link_up(peer->link))
		return;
	if (!rts_link_has_room(peer->link)) {
		peer->spares_due = true;
		return;
	}
	peer->spares_due = false;
	/* A failure fails the link; its teardown is statd's forgetting. */
	(void)rts_link_send_spare_state(peer->link, &(struct rts_msg_spare_state){.ready = ready});
}

void runnerd_spares_announce(struct runnerd *rd, struct runnerd_statd *peer)
{
	/* The ready spares never outnumber warmSparesMax, which the config bounds by
	 * RTS_WARM_SPARES_CAP_MAX: the set always fits. */
	char ready[RTS_SPARES_READY_MAX + 1];
	size_t n = 0;
	const struct runnerd_spare *s;
	TAILQ_FOREACH(s, &rd->spares.list, entry)
	if (s->ready && n + RTS_HASH_HEX_LEN <= RTS_SPARES_READY_MAX) {
		memcpy(ready + n, s->channel_hash, RTS_HASH_HEX_LEN);
		n += RTS_HASH_HEX_LEN;
	}
	ready[n] = '\0';
	if (peer) {
		announce_to(rd, peer, ready);
		return;
	}
	struct runnerd_statd *p;
	TAILQ_FOREACH(p, &rd->statd, entry)
	announce_to(rd, p, ready);
}

void runnerd_spares_init(struct runnerd *rd)
{
	rd->spares = (struct runnerd_spares){0};
	TAILQ_INIT(&rd->spares.list);
	TAILQ_INIT(&rd->spares.retries);
}

bool runnerd_spares_idle(const struct runnerd *rd)
{
	return rd->spares.n == 0 && rd->spares.removing == 0;
}

unsigned runnerd_spares_containers(const struct runnerd *rd)
{
	return rd->spares.n + rd->spares.removing;
}

static void maybe_exit(struct runnerd *rd)
{
	if (rd->spares.shutting_down && rd->turns_idle && runnerd_spares_idle(rd))
		sd_event_exit(rd->event, 0);
}

static void removal_round_failed(void *arg, const char *container, const struct runnerd_proc_result *r)
{
	struct spare_removal *rm = arg;
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	log_warning("spare %s: docker rm -f %s failed (%s)", rm->id, container,
		    line[0] ? line : r->timed_out ? "timed out" : "failed");
}

static void removal_over(void *arg)
{
	struct spare_removal *rm = arg;
	struct runnerd *rd = rm->rd;
	if (runnerd_removal_failed(&rm->removal))
		/* The operator's cue, as for a turn (seed: a cleanup failure asks for inspection). */
		log_error("spare container %s could not be removed: inspect it with docker ps -a and remove it",
			  rm->container);
	int r = runnerd_run_dir_remove(rd, rm->id);
	if (r < 0)
		log_warning_errno(r, "cannot remove the run dir of spare %s: %m", rm->id);
	free(rm->container);
	free(rm);
	rd->spares.removing--;
	maybe_exit(rd);
}

static const struct runnerd_removal_hooks spare_removal_hooks = {
	.round_failed = removal_round_failed,
	.over = removal_over,
};

/* Take s out of the pool and free it; its container is removed in the background (counted
 * in spares.removing until the removal ends). */
static void spare_discard(struct runnerd_spare *s, const char *why)
{
	struct runnerd *rd = s->rd;
	TAILQ_REMOVE(&rd->spares.list, s, entry);
	rd->spares.n--;
	if (s->ready) {
		rd->spares.n_ready--;
		runnerd_spares_announce(rd, NULL);
	}
	log_info("spare %s of channel %.12s discarded: %s", s->id, s->channel_hash, why);
	rts_timer_stop(s->probe_timer);
	rts_timer_stop(s->idle_timer);
	if (s->probe) {
		runnerd_proc_detach(s->probe);
		runnerd_proc_kill(s->probe);
	}
	struct spare_removal *rm = rts_xcalloc(1, sizeof(*rm));
	rm->rd = rd;
	memcpy(rm->id, s->id, sizeof(rm->id));
	rm->container = steal_pointer(&s->container);
	/* A container confirmed running needs one removal; one that may still be being
	 * created needs the second for the create/attach race. */
	unsigned rounds = s->ready ? 1 : 2;
	if (s->run) {
		runnerd_proc_detach(s->run);
		runnerd_proc_kill(s->run);
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->workspace_fd >= 0)
		close(s->workspace_fd);
	free(s->workspace);
	free(s);
	rd->spares.removing++;
	runnerd_removal_init(&rm->removal, rd->turns.ops, rd, &spare_removal_hooks, rm, "spare %s", rm->id);
	runnerd_removal_start(&rm->removal, rm->container, rounds);
}

static void retry_free(struct runnerd_spare_retry *rt)
{
	TAILQ_REMOVE(&rt->rd->spares.retries, rt, entry);
	rts_timer_stop(rt->timer);
	if (rt->workspace_fd >= 0)
		close(rt->workspace_fd);
	free(rt->workspace);
	free(rt);
}

static void retry_fire(void *arg)
{
	struct runnerd_spare_retry *rt = arg;
	rt->timer = NULL; /* fired */
	spare_start(rt->rd, rt->channel_hash, rt->workspace, steal_fd(&rt->workspace_fd), rt->failures);
	retry_free(rt);
}

/* Forget the pending restart of channel_hash's spare (NULL: every one). */
static void retries_cancel(struct runnerd *rd, const char *channel_hash)
{
	struct runnerd_spare_retry *rt, *next;
	for (rt = TAILQ_FIRST(&rd->spares.retries); rt; rt = next) {
		next = TAILQ_NEXT(rt, entry);
		if (!channel_hash || strcmp(rt->channel_hash, channel_hash) == 0)
			retry_free(rt);
	}
}

/* The spare's docker CLI exited while it waited: killed from outside, or it never started. */
static void spare_run_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_spare *s = arg;
	struct runnerd *rd = s->rd;
	s->run = NULL;
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	log_warning("spare %s of channel %.12s: docker run %s %d while waiting for a turn: %s", s->id,
		    s->channel_hash, r->exited ? "exited with status" : "died of signal", r->status,
		    line[0] ? line : "(no stderr)");
	unsigned failures = s->failures + 1;
	struct runnerd_spare_retry *rt = NULL;
	if (!rd->spares.shutting_down && failures < RUNNERD_SPARE_RETRIES) {
		rt = rts_xcalloc(1, sizeof(*rt));
		rt->rd = rd;
		memcpy(rt->channel_hash, s->channel_hash, sizeof(rt->channel_hash));
		rt->workspace = rts_xstrdup(s->workspace);
		rt->workspace_fd = steal_fd(&s->workspace_fd);
		rt->failures = failures;
	} else if (!rd->spares.shutting_down) {
		log_warning("channel %.12s: %u spares in a row died; none until its next turn", s->channel_hash,
			    failures);
	}
	spare_discard(s, "its container ended");
	if (rt) {
		TAILQ_INSERT_TAIL(&rd->spares.retries, rt, entry);
		if (rts_timer_start(rd->event, RUNNERD_SPARE_RETRY_MS, 10, retry_fire, rt, &rt->timer) < 0)
			retry_free(rt);
	}
}

static void probe_arm(struct runnerd_spare *s);

/* Discard s and start its channel's next spare at once, from the same verified workspace
 * (the image changed: nothing is wrong with the channel). A replacement counts as a
 * failure: a channel gets at most RUNNERD_SPARE_RETRIES of them in a row, so an image
 * that keeps changing (or an ID that never matches) cannot keep runnerd starting spares. */
static void spare_replace(struct runnerd_spare *s, const char *why)
{
	struct runnerd *rd = s->rd;
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	memcpy(channel_hash, s->channel_hash, sizeof(channel_hash));
	cleanup_free char *workspace = rts_xstrdup(s->workspace);
	int ws_fd = steal_fd(&s->workspace_fd);
	unsigned failures = s->failures + 1;
	spare_discard(s, why);
	if (failures >= RUNNERD_SPARE_RETRIES || rd->spares.shutting_down) {
		log_warning("channel %.12s: %u spares in a row replaced; none until its next turn", channel_hash,
			    failures);
		if (ws_fd >= 0)
			close(ws_fd);
		return;
	}
	spare_start(rd, channel_hash, workspace, ws_fd, failures);
}

static void probe_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_spare *s = arg;
	s->probe = NULL;
	if (r->exited && r->status == 0 && runnerd_parse_running_image(r->out, r->out_len, s->image_id) == 1) {
		/* docker run resolved the name after the last inspect: when the two differ, one
		 * of them is stale. Which one, only another inspect tells; until it ended no spare
		 * is claimed, and then the spares of another image are replaced. Replacing this one
		 * at once could go on for ever if the watch's ID were the stale one. */
		const char *current = runnerd_image_watch_current(s->rd, NULL);
		if (current && strcmp(current, s->image_id) != 0)
			runnerd_image_watch_recheck(s->rd);
		s->ready = true;
		s->rd->spares.n_ready++;
		log_debug("spare %s of channel %.12s is ready", s->id, s->channel_hash);
		runnerd_spares_announce(s->rd, NULL);
		return;
	}
	if (++s->probes >= RUNNERD_SPARE_PROBES) {
		spare_discard(s, "its container did not start in time");
		return;
	}
	probe_arm(s);
}

static void probe_fire(void *arg)
{
	struct runnerd_spare *s = arg;
	s->probe_timer = NULL; /* fired */
	cleanup_strv char **argv = runnerd_docker_running_image_argv(RTS_DOCKER, s->container);
	int r = argv ? runnerd_proc_spawn(s->rd->event, argv, s->rd->child_env, NULL, 0, RUNNERD_IMAGE_ID_MAX + 16,
					  RUNNERD_SPARE_PROBE_TIMEOUT_MS, probe_done, s, &s->probe)
		     : -EINVAL;
	if (r < 0) {
		log_warning_errno(r, "spare %s: cannot run docker container inspect: %m", s->id);
		spare_discard(s, "cannot check it");
	}
}

static void probe_arm(struct runnerd_spare *s)
{
	if (rts_timer_start(s->rd->event, RUNNERD_SPARE_PROBE_MS, 10, probe_fire, s, &s->probe_timer) < 0)
		spare_discard(s, "cannot arm its readiness check");
}

static void idle_fire(void *arg)
{
	struct runnerd_spare *s = arg;
	s->idle_timer = NULL; /* fired */
	spare_discard(s, "its channel was idle");
}

static struct runnerd_spare *spare_of(struct runnerd *rd, const char *channel_hash)
{
	struct runnerd_spare *s;
	TAILQ_FOREACH(s, &rd->spares.list, entry)
	if (strcmp(s->channel_hash, channel_hash) == 0)
		return s;
	return NULL;
}

/* Start a spare of channel_hash (workspace_fd taken over). */
static void spare_start(struct runnerd *rd, const char *channel_hash, const char *workspace, int workspace_fd,
			unsigned failures)
{
	cleanup_close int ws_fd = workspace_fd;
	const struct rts_config *cfg = rd->cfg;
	if (cfg->warm_spares == 0 || rd->spares.shutting_down || ws_fd < 0 || spare_of(rd, channel_hash))
		return;
	if (rd->spares.n >= cfg->warm_spares_max) {
		log_info("channel %.12s: no spare: warmSparesMax (%u) spares exist already", channel_hash,
			 cfg->warm_spares_max);
		return;
	}
	/* The path must still name the directory statd verified: a swapped-in symlink or
	 * directory is never bind-mounted (the same check as before a turn's docker run). */
	int r = rd->turns.ops->workspace_check(rd, workspace, ws_fd);
	if (r < 0) {
		log_warning_errno(r, "channel %.12s: no spare: its workspace is not the directory statd verified: %m",
				  channel_hash);
		return;
	}
	struct runnerd_spare *s = rts_xcalloc(1, sizeof(*s));
	s->rd = rd;
	s->listen_fd = -1;
	s->workspace_fd = -1;
	s->failures = failures;
	r = rts_turn_id_new(s->id);
	if (r < 0) {
		log_error_errno(r, "cannot make a spare id: %m");
		free(s);
		return;
	}
	memcpy(s->channel_hash, channel_hash, sizeof(s->channel_hash));
	r = runnerd_run_dir_create(rd, s->id);
	if (r < 0) {
		log_warning_errno(r, "spare %s: cannot create its run dir: %m", s->id);
		free(s);
		return;
	}
	s->listen_fd = r;
	s->workspace = rts_xstrdup(workspace);
	s->workspace_fd = steal_fd(&ws_fd);
	s->container = rts_container_name(cfg->installation_id, s->id);
	TAILQ_INSERT_TAIL(&rd->spares.list, s, entry);
	rd->spares.n++;

	cleanup_free char *run_dir = rts_xasprintf("%s/%s", cfg->run_root, s->id);
	struct runnerd_run_spec spec = {
		.docker = RTS_DOCKER,
		.installation_id = cfg->installation_id,
		.turn_id = s->id,
		.channel_hash = s->channel_hash,
		.uid = rd->uid,
		.gid = rd->gid,
		.limits = cfg->limits,
		.workspace = s->workspace,
		.run_dir = run_dir,
		.image = cfg->image,
		.spare = true,
	};
	cleanup_strv char **argv = runnerd_docker_run_argv(&spec);
	r = argv ? runnerd_proc_spawn_held(rd->event, argv, rd->child_env, RTS_WORKER_OUTPUT_MAX, spare_run_done, s,
					   &s->run)
		 : -EINVAL;
	if (r < 0) {
		log_warning_errno(r, "spare %s: cannot run docker: %m", s->id);
		spare_discard(s, "docker run could not be started");
		return;
	}
	if (rts_timer_start(rd->event, cfg->warm_spare_idle_ms, 100, idle_fire, s, &s->idle_timer) < 0) {
		spare_discard(s, "cannot arm its idle timer");
		return;
	}
	log_debug("spare %s of channel %.12s: starting container %s", s->id, s->channel_hash, s->container);
	runnerd_image_watch_spare_started(rd);
	probe_arm(s);
}

void runnerd_spare_refill(struct runnerd *rd, const char *channel_hash, const char *workspace, int workspace_fd)
{
	spare_start(rd, channel_hash, workspace, workspace_fd, 0);
}

/* Close whatever connected to the listener before the claim: nothing from the time
 * before the binding reaches brokerd. The listener is non-blocking (rts_listen_unix). */
static void listener_drain(int fd)
{
	for (;;) {
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		close(c);
	}
}

int runnerd_spare_claim(struct runnerd *rd, const char *channel_hash, int workspace_fd, runnerd_proc_done_t done,
			void *arg, struct runnerd_spare_claim *out)
{
	struct runnerd_spare *s = spare_of(rd, channel_hash);
	if (!s || !s->ready || !s->run)
		return 0;
	/* Only a spare of the image the configured name means now, and only while that is
	 * known (runnerd/image_watch.h): otherwise the turn starts cold, from the name. */
	const char *why;
	const char *current = runnerd_image_watch_current(rd, &why);
	if (!current) {
		log_info("channel %.12s: its spare is not used: %s", channel_hash, why);
		return 0;
	}
	if (strcmp(current, s->image_id) != 0) {
		/* Its replacement is started after the turn, like any spare's. */
		spare_discard(s, "its image is no longer the configured one");
		return 0;
	}
	/* Same channel hash, and its workspace must be the very directory this turn's was
	 * verified as; else the channel's directory was replaced since (fresh start, an
	 * operator): the spare is of no use. */
	struct stat a, b;
	if (fstat(workspace_fd, &a) < 0 || fstat(s->workspace_fd, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino) {
		spare_discard(s, "its workspace is not the turn's");
		return 0;
	}
	listener_drain(s->listen_fd);
	TAILQ_REMOVE(&rd->spares.list, s, entry);
	rd->spares.n--;
	rd->spares.n_ready--;
	rd->spares.claimed++;
	rts_timer_stop(s->idle_timer);
	rts_timer_stop(s->probe_timer);
	memcpy(out->id, s->id, sizeof(out->id));
	out->listen_fd = steal_fd(&s->listen_fd);
	out->run = steal_pointer(&s->run);
	runnerd_proc_retarget(out->run, done, arg);
	log_info("channel %.12s: a turn claimed spare %s", s->channel_hash, s->id);
	runnerd_spares_announce(rd, NULL);
	if (s->workspace_fd >= 0)
		close(s->workspace_fd);
	free(s->workspace);
	free(s->container);
	free(s);
	return 1;
}

int runnerd_spare_feed(struct runnerd *rd, struct runnerd_proc *p, char *input, size_t input_len)
{
	return runnerd_proc_feed(p, input, input_len);
}

void runnerd_spares_image_checked(struct runnerd *rd, const char *image_id)
{
	/* A replacement goes to the tail of the list, still starting: the walk reaches it and
	 * passes it by, as any spare not ready yet (checked when its readiness check ends). */
	struct runnerd_spare *s, *next;
	for (s = TAILQ_FIRST(&rd->spares.list); s; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (!s->ready || strcmp(s->image_id, image_id) == 0)
			continue;
		if (image_id[0])
			spare_replace(s, "its image is no longer the configured one");
		else
			spare_discard(s, "the configured image cannot be inspected");
	}
}

void runnerd_spare_drop(struct runnerd *rd, const char *channel_hash)
{
	retries_cancel(rd, channel_hash);
	struct runnerd_spare *s = spare_of(rd, channel_hash);
	if (s)
		spare_discard(s, "its channel left sealed mode or was cancelled");
}

void runnerd_spares_shutdown(struct runnerd *rd)
{
	rd->spares.shutting_down = true;
	retries_cancel(rd, NULL);
	struct runnerd_spare *s;
	while ((s = TAILQ_FIRST(&rd->spares.list)))
		spare_discard(s, "shutting down");
	maybe_exit(rd);
}
