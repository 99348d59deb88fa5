/* SPDX-License-Identifier: Apache-2.0 */
/* Rich channels' containers and turns: the state machine of runnerd/rich.h.
 *
 * Depends on rich.h, turn.h's ops, removal.h (a machine on the same ops), the pure
 * docker_args.h and common/ only. */
#include "config.h"

#include <sys/stat.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/spawn.h"
#include "common/util.h"
#include "runnerd/removal.h"
#include "runnerd/rich.h"
#include "runnerd/worker_io.h"

/* A request of statd's that waits for its RICH_STATE. */
struct pending {
	struct pending *next;
	struct runnerd_statd *peer; /* NULL once that statd went away: not answered */
	uint32_t seq;
	bool ensure; /* RICH_ENSURE, else RICH_STOP */
};

enum rich_turn_state {
	TURN_QUEUED, /* waiting for the container */
	TURN_SENT,   /* BROKER_RICH_TURN sent; BROKER_RICH_DONE due */
	TURN_ENDING, /* cancelled at brokerd; answered once the container is removed */
};

struct rich_turn {
	TAILQ_ENTRY(rich_turn) entry;
	struct runnerd_rich *ch;
	struct runnerd_statd *peer; /* NULL once statd went away: no answer */
	char id[RTS_TURN_ID_LEN + 1];
	char *channel, *speaker_id, *speaker_name, *principal_id, *profile;
	int input_fd;
	enum rich_turn_state state;
	enum rts_turn_status ending; /* TURN_ENDING: the answer */
	uint64_t started_ms, deadline_ms;
	uint64_t gen; /* the brokerd link it went out on */
	struct rts_timer *deadline;
};

struct runnerd_rich {
	TAILQ_ENTRY(runnerd_rich) entry;
	struct runnerd_riches *rs;
	char hash[RTS_HASH_HEX_LEN + 1]; /* its first RUNNERD_RICH_PREFIX_LEN digits name the
					  * container and the broker directory (prefix_of()) */
	char *name;			/* the container's */
	char *channel, *profile;	/* from the last RICH_ENSURE; NULL for one only found */
	char *workspace;
	int ws_fd;			/* O_PATH of the workspace statd verified, from the last ENSURE */
	struct runnerd_statd *claim;	/* the statd link whose RICH_ENSURE claimed it last */

	enum runnerd_rich_container container;
	bool found_running;				/* FOUND: docker said "running" */
	bool found_dir_gone;				/* FOUND: its broker directory is gone */
	char generation[RUNNERD_GENERATION_LEN + 1];	/* of the container ("" unknown) */
	char want_gen[RUNNERD_GENERATION_LEN + 1];	/* what the config and image make now */
	enum runnerd_rich_step step;
	bool adopting;	  /* the start binds a container that runs: no docker run */
	bool dir_made;	  /* runRoot/rich-<prefix>/ (and a broker.sock) exist */
	int bind_fd;	  /* BIND_WAIT: the listening broker.sock, until RICH_BIND takes it */
	uint64_t broker_gen; /* the link its listener went to brokerd on; 0: not bound */
	uint64_t start_deadline_ms;

	/* What is wanted. */
	bool want_running;  /* an ENSURE since the last stop */
	bool check_needed;  /* an ENSURE not yet checked against the generation */
	bool stop_pending;  /* a RICH_STOP: remove before anything else */
	bool replace;	    /* remove it (stale, failed, cancelled) before anything else */
	bool logs_wanted;   /* log the worker's last lines before removing it */
	int fail_err;	    /* when the removal is a failure's clean-up: what the ENSUREs hear */
	const char *why;    /* the removal's reason, for its log line */

	struct runnerd_proc *proc;
	struct runnerd_removal removal; /* step REMOVE: the container's */

	struct pending *pending;
	TAILQ_HEAD(, rich_turn) turns;
};

static void drive(struct runnerd_rich *ch);
static const struct runnerd_removal_hooks rich_removal_hooks;

void runnerd_riches_init(struct runnerd_riches *rs, const struct runnerd_turn_ops *ops,
			 const struct runnerd_rich_ops *rops, void *owner, const struct runnerd_rich_config *conf)
{
	*rs = (struct runnerd_riches){.ops = ops, .rops = rops, .owner = owner, .conf = *conf};
	TAILQ_INIT(&rs->list);
}

struct runnerd_rich *runnerd_rich_find(struct runnerd_riches *rs, const char *hash)
{
	struct runnerd_rich *ch;
	TAILQ_FOREACH(ch, &rs->list, entry)
	if (strcmp(ch->hash, hash) == 0)
		return ch;
	return NULL;
}

enum runnerd_rich_container runnerd_rich_container_of(const struct runnerd_rich *ch)
{
	return ch->container;
}

enum runnerd_rich_step runnerd_rich_step_of(const struct runnerd_rich *ch)
{
	if (ch->step == RUNNERD_RICH_REMOVE && runnerd_removal_waiting(&ch->removal))
		return RUNNERD_RICH_REMOVE_WAIT;
	return ch->step;
}

void runnerd_rich_log_line(const char *s, size_t len, char out[RUNNERD_RICH_LOG_LINE_MAX + 4])
{
	size_t n = 0;
	for (size_t i = 0; i < len && n < RUNNERD_RICH_LOG_LINE_MAX; i++)
		out[n++] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	if (len > RUNNERD_RICH_LOG_LINE_MAX) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* ---- channels ---- */

/* The prefix of ch's hash as a string (ch_get keeps it unique among the channels). */
static const char *prefix_of(const struct runnerd_rich *ch, char out[RUNNERD_RICH_PREFIX_LEN + 1])
{
	memcpy(out, ch->hash, RUNNERD_RICH_PREFIX_LEN);
	out[RUNNERD_RICH_PREFIX_LEN] = '\0';
	return out;
}

/* The channel of hash, made when missing. NULL with *err when it cannot be: too many, or
 * another channel's hash shares its prefix (their container name and broker directory
 * would be one). */
static struct runnerd_rich *ch_get(struct runnerd_riches *rs, const char *hash, int *err)
{
	struct runnerd_rich *ch = runnerd_rich_find(rs, hash);
	if (ch)
		return ch;
	struct runnerd_rich *o;
	TAILQ_FOREACH(o, &rs->list, entry)
	if (strncmp(o->hash, hash, RUNNERD_RICH_PREFIX_LEN) == 0) {
		*err = -EEXIST;
		return NULL;
	}
	if (rs->n >= RUNNERD_MAX_RICH) {
		*err = -EBUSY;
		return NULL;
	}
	ch = rts_xcalloc(1, sizeof(*ch));
	ch->rs = rs;
	memcpy(ch->hash, hash, sizeof(ch->hash));
	ch->name = runnerd_rich_name(rs->conf.cfg->installation_id, hash);
	ch->ws_fd = -1;
	ch->bind_fd = -1;
	runnerd_removal_init(&ch->removal, rs->ops, rs->owner, &rich_removal_hooks, ch, "channel %.12s", hash);
	TAILQ_INIT(&ch->turns);
	TAILQ_INSERT_TAIL(&rs->list, ch, entry);
	rs->n++;
	return ch;
}

static void turn_free(struct rich_turn *t)
{
	struct runnerd_riches *rs = t->ch->rs;
	rs->ops->timer_stop(rs->owner, t->deadline);
	TAILQ_REMOVE(&t->ch->turns, t, entry);
	if (t->input_fd >= 0)
		close(t->input_fd);
	free(t->channel);
	free(t->speaker_id);
	free(t->speaker_name);
	free(t->principal_id);
	free(t->profile);
	free(t);
}

static void ch_free(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	while (!TAILQ_EMPTY(&ch->turns))
		turn_free(TAILQ_FIRST(&ch->turns));
	while (ch->pending) {
		struct pending *p = ch->pending;
		ch->pending = p->next;
		free(p);
	}
	if (ch->proc)
		rs->ops->detach(rs->owner, ch->proc);
	runnerd_removal_abandon(&ch->removal);
	if (ch->ws_fd >= 0)
		close(ch->ws_fd);
	if (ch->bind_fd >= 0)
		close(ch->bind_fd);
	TAILQ_REMOVE(&rs->list, ch, entry);
	rs->n--;
	free(ch->name);
	free(ch->channel);
	free(ch->profile);
	free(ch->workspace);
	free(ch);
}

/* Nothing left to do or know: forget it. */
static void ch_maybe_free(struct runnerd_rich *ch)
{
	if (ch->container == RUNNERD_RICH_NONE && ch->step == RUNNERD_RICH_IDLE && !ch->dir_made && !ch->pending &&
	    TAILQ_EMPTY(&ch->turns) && !ch->want_running)
		ch_free(ch);
}

/* Answer the waiting ENSUREs (ensures) or STOPs with state and err. */
static void answer(struct runnerd_rich *ch, bool ensures, uint32_t state, int err)
{
	struct runnerd_riches *rs = ch->rs;
	struct pending **pp = &ch->pending;
	while (*pp) {
		struct pending *p = *pp;
		if (p->ensure != ensures) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (p->peer)
			rs->rops->state(rs->owner, p->peer,
					&(struct rts_msg_rich_state){.seq = p->seq, .channel_hash = ch->hash, .state = state,
								     .error = err});
		free(p);
	}
}

static void pending_add(struct runnerd_rich *ch, struct runnerd_statd *peer, uint32_t seq, bool ensure)
{
	struct pending *p = rts_xcalloc(1, sizeof(*p));
	*p = (struct pending){.peer = peer, .seq = seq, .ensure = ensure};
	struct pending **pp = &ch->pending;
	while (*pp)
		pp = &(*pp)->next;
	*pp = p;
}

/* ---- turns ---- */

/* Answer t (reply_fd: the reply memfd, or -1) and free it. */
static void turn_answer(struct rich_turn *t, enum rts_turn_status status, uint32_t calls, int reply_fd,
			const char *why)
{
	struct runnerd_riches *rs = t->ch->rs;
	uint64_t ms = rs->ops->now_ms(rs->owner) - t->started_ms;
	rts_log_turn(status == RTS_TURN_OK	  ? LOG_INFO
		     : status == RTS_TURN_CANCELLED ? LOG_NOTICE
		     : status == RTS_TURN_CLEANUP_FAILED ? LOG_ERR
							 : LOG_WARNING,
		     t->id, t->ch->hash, rts_turn_status_word(status), ms ? ms : 1, "rich turn finished: %s (%u broker calls)%s",
		     why, calls, t->peer ? "" : " (statd gone, not answered)");
	if (t->peer)
		rs->rops->turn_done(rs->owner, t->peer,
				    &(struct rts_msg_rich_turn_done){.turn_id = t->id, .status = (uint32_t)status,
								     .calls = calls, .fd = reply_fd});
	else if (reply_fd >= 0)
		close(reply_fd);
	turn_free(t);
}

/* Fail every turn still waiting for the container. */
static void turns_fail_queued(struct runnerd_rich *ch, enum rts_turn_status status, const char *why)
{
	struct rich_turn *t, *next;
	for (t = TAILQ_FIRST(&ch->turns); t; t = next) {
		next = TAILQ_NEXT(t, entry);
		if (t->state == TURN_QUEUED)
			turn_answer(t, status, 0, -1, why);
	}
}

/* A turn brokerd has is ended from here: cancelled there, the container force-removed,
 * the answer given once it is gone (seed: cancellation force-removes the exact channel
 * container). */
static void turn_force_end(struct rich_turn *t, enum rts_turn_status status)
{
	struct runnerd_rich *ch = t->ch;
	struct runnerd_riches *rs = ch->rs;
	rs->rops->cancel(rs->owner, t->gen, t->id);
	t->state = TURN_ENDING;
	t->ending = status;
	ch->replace = true;
	ch->want_running = false;
	ch->why = status == RTS_TURN_TIMEOUT ? "its turn ran out of time" : "its turn was cancelled";
	/* seed: the host logs a timed-out worker's last 200 log lines. */
	if (status == RTS_TURN_TIMEOUT)
		ch->logs_wanted = true;
}

static void on_turn_deadline(void *arg)
{
	struct rich_turn *t = arg;
	t->deadline = NULL; /* fired */
	if (t->state == TURN_QUEUED) {
		turn_answer(t, RTS_TURN_TIMEOUT, 0, -1, "deadline reached before the container was ready");
		return;
	}
	if (t->state == TURN_SENT) {
		struct runnerd_rich *ch = t->ch;
		turn_force_end(t, RTS_TURN_TIMEOUT);
		drive(ch);
	}
}

/* READY and idle: hand the next turn to brokerd. */
static void turn_send_next(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	struct rich_turn *t;
	TAILQ_FOREACH(t, &ch->turns, entry)
	if (t->state != TURN_QUEUED)
		return; /* one at a time */
	t = TAILQ_FIRST(&ch->turns);
	if (!t)
		return;
	t->state = TURN_SENT;
	t->gen = ch->broker_gen;
	rs->rops->turn(rs->owner, ch->broker_gen,
		       &(struct rts_msg_broker_rich_turn){
			       .turn_id = t->id,
			       .channel = t->channel,
			       .channel_hash = ch->hash,
			       .speaker_id = t->speaker_id,
			       .speaker_name = t->speaker_name,
			       .principal_id = t->principal_id,
			       .profile = t->profile,
			       .deadline_ms = t->deadline_ms,
			       .fd = steal_fd(&t->input_fd),
		       });
}

/* ---- the docker steps ---- */

static int spawn(struct runnerd_rich *ch, char **argv, size_t out_max, uint64_t timeout_ms, runnerd_proc_done_t done)
{
	struct runnerd_riches *rs = ch->rs;
	cleanup_strv char **v = argv;
	if (!v)
		return -EINVAL;
	return rs->ops->spawn(rs->owner, v, NULL, 0, out_max, timeout_ms, done, ch, &ch->proc);
}

/* Why a docker CLI failed, for a log line (its stderr's first line: the CLI's own words;
 * no container output reaches its stderr with these commands). */
static void cli_failure(const struct runnerd_proc_result *r, char *buf, size_t len)
{
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	if (r->timed_out)
		snprintf(buf, len, "no answer in time");
	else if (!r->exited)
		snprintf(buf, len, "signal %d", r->status);
	else
		snprintf(buf, len, "status %d: %s", r->status, line[0] ? line : "(no message)");
}

/* A start failed: answer the ENSUREs FAILED with err once whatever was made is gone. */
static void start_failed(struct runnerd_rich *ch, int err, const char *why)
{
	ch->fail_err = err;
	ch->replace = true;
	ch->want_running = false;
	ch->why = why;
}

static void stop_finished(struct runnerd_rich *ch);

static void removal_round_failed(void *arg, const char *container, const struct runnerd_proc_result *r)
{
	struct runnerd_rich *ch = arg;
	char why[RUNNERD_STDERR_LOG_MAX + 64];
	cli_failure(r, why, sizeof(why));
	log_warning("channel %.12s: docker rm -f %s failed (%s)", ch->hash, container, why);
}

static void removal_over(void *arg)
{
	stop_finished(arg);
}

static const struct runnerd_removal_hooks rich_removal_hooks = {
	.round_failed = removal_round_failed,
	.over = removal_over,
};

/* The container goes: two removals, the second for a container still being created
 * (none when nothing was started). */
static void remove_container(struct runnerd_rich *ch, unsigned rounds)
{
	ch->step = RUNNERD_RICH_REMOVE;
	runnerd_removal_start(&ch->removal, ch->name, rounds);
}

/* docker logs --tail: the worker's last lines, one log record each (seed: "a timed-out
 * worker's last 200 log lines"). The worker is untrusted: each line is cut and defanged. */
static void logs_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_rich *ch = arg;
	ch->proc = NULL;
	const char *streams[] = {r->out, r->err};
	size_t lens[] = {r->out_len, r->err_len};
	unsigned n = 0;
	for (size_t k = 0; k < 2; k++) {
		const char *s = streams[k], *end = s + lens[k];
		while (s < end && n < 2 * RUNNERD_RICH_LOG_LINES) {
			const char *nl = memchr(s, '\n', (size_t)(end - s));
			size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
			char line[RUNNERD_RICH_LOG_LINE_MAX + 4];
			runnerd_rich_log_line(s, len, line);
			log_notice("channel %.12s: worker log: %s", ch->hash, line);
			n++;
			s = nl ? nl + 1 : end;
		}
	}
	log_notice("channel %.12s: %u worker log line(s) above (docker logs --tail %u %s)", ch->hash, n,
		   RUNNERD_RICH_LOG_LINES, ch->name);
	remove_container(ch, 2);
}

/* Remove the container and the broker directory (the step is idle). */
static void begin_stop(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	log_info("channel %.12s: removing its container %s (%s)", ch->hash, ch->name, ch->why ? ch->why : "stopped");
	if (ch->broker_gen) {
		rs->rops->unbind(rs->owner, ch->broker_gen, ch->hash);
		ch->broker_gen = 0;
	}
	/* A turn still at brokerd goes with it. */
	struct rich_turn *t;
	TAILQ_FOREACH(t, &ch->turns, entry)
	if (t->state == TURN_SENT) {
		rs->rops->cancel(rs->owner, t->gen, t->id);
		t->state = TURN_ENDING;
		t->ending = RTS_TURN_CANCELLED;
	}
	if (ch->bind_fd >= 0)
		close(steal_fd(&ch->bind_fd));
	/* Nothing was started when there is no container: only the directory goes. */
	bool may_exist = ch->container != RUNNERD_RICH_NONE;
	if (ch->logs_wanted && may_exist) {
		ch->logs_wanted = false;
		ch->step = RUNNERD_RICH_LOGS;
		int r = spawn(ch, runnerd_docker_logs_argv(RTS_DOCKER, ch->name, RUNNERD_RICH_LOG_LINES),
			      RUNNERD_RICH_LOG_OUTPUT_MAX, RUNNERD_RICH_LOGS_TIMEOUT_MS, logs_done);
		if (r >= 0)
			return;
		log_warning_errno(r, "channel %.12s: cannot run docker logs: %m", ch->hash);
	}
	ch->logs_wanted = false;
	remove_container(ch, may_exist ? 2 : 0);
}

/* The removal is over (or was not needed): the channel has no container. */
static void stop_finished(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	ch->step = RUNNERD_RICH_IDLE;
	if (ch->dir_made) {
		char prefix[RUNNERD_RICH_PREFIX_LEN + 1];
		int r = rs->rops->dir_remove(rs->owner, prefix_of(ch, prefix));
		if (r < 0)
			log_warning_errno(r, "channel %.12s: cannot remove its broker directory: %m", ch->hash);
		ch->dir_made = false;
	}
	bool failed = runnerd_removal_failed(&ch->removal);
	if (failed)
		log_error("channel %.12s: container %s could not be removed: inspect it with docker ps -a and "
			  "remove it",
			  ch->hash, ch->name);
	else
		ch->container = RUNNERD_RICH_NONE;
	ch->found_running = false;
	ch->found_dir_gone = false;
	ch->generation[0] = '\0';
	ch->adopting = false;
	ch->replace = false;
	ch->why = NULL;
	/* The turns that waited for the removal. */
	struct rich_turn *t, *next;
	for (t = TAILQ_FIRST(&ch->turns); t; t = next) {
		next = TAILQ_NEXT(t, entry);
		if (t->state == TURN_ENDING)
			turn_answer(t, failed ? RTS_TURN_CLEANUP_FAILED : t->ending, 0, -1,
				    t->ending == RTS_TURN_TIMEOUT ? "deadline reached" : "cancelled");
	}
	if (ch->stop_pending) {
		ch->stop_pending = false;
		answer(ch, false, failed ? RTS_RICH_STATE_FAILED : RTS_RICH_STATE_STOPPED, failed ? -EIO : 0);
	}
	if (ch->fail_err) {
		answer(ch, true, RTS_RICH_STATE_FAILED, ch->fail_err);
		turns_fail_queued(ch, RTS_TURN_ERROR, "the container could not be started");
		ch->fail_err = 0;
	}
	if (failed) {
		/* Do not start another over it: the next ENSURE tries again. */
		ch->want_running = false;
		ch->container = RUNNERD_RICH_FOUND;
		ch->found_running = true;
	}
	drive(ch);
}

/* ---- starting ---- */

static void run_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_rich *ch = arg;
	struct runnerd_riches *rs = ch->rs;
	ch->proc = NULL;
	ch->step = RUNNERD_RICH_IDLE;
	/* From here a container may exist: a failure removes it. */
	ch->container = RUNNERD_RICH_FOUND;
	ch->found_running = true;
	if (!r->exited || r->status != 0) {
		char why[RUNNERD_STDERR_LOG_MAX + 64];
		cli_failure(r, why, sizeof(why));
		log_warning("channel %.12s: docker run of %s failed (%s)", ch->hash, ch->name, why);
		start_failed(ch, -EIO, "it could not be started");
		drive(ch);
		return;
	}
	memcpy(ch->generation, ch->want_gen, sizeof(ch->generation));
	if (!ch->broker_gen) {
		/* brokerd went away while docker ran: bind it again (drive adopts it). */
		drive(ch);
		return;
	}
	ch->step = RUNNERD_RICH_WAIT_READY;
	rs->rops->wait_ready(rs->owner, ch->broker_gen,
			     &(struct rts_msg_rich_wait_ready){.channel_hash = ch->hash,
							       .deadline_ms = ch->start_deadline_ms});
}

static void start_run(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	const struct rts_config *cfg = rs->conf.cfg;
	const struct rts_rich_conf *rich = &cfg->rich;
	/* The path statd verified must still name that directory. */
	int r = rs->ops->workspace_check(rs->owner, ch->workspace, ch->ws_fd);
	if (r < 0) {
		log_error_errno(r, "channel %.12s: the workspace is no longer the directory statd verified: %m",
				ch->hash);
		start_failed(ch, -ESTALE, "its workspace changed");
		drive(ch);
		return;
	}
	cleanup_free char *broker_dir =
		rts_xasprintf("%s/" RTS_RICH_DIR_PREFIX "%.*s", cfg->run_root, (int)RUNNERD_RICH_PREFIX_LEN, ch->hash);
	struct runnerd_rich_spec spec = {
		.docker = RTS_DOCKER,
		.installation_id = cfg->installation_id,
		.channel_hash = ch->hash,
		.profile = ch->profile,
		.generation = ch->want_gen,
		.uid = rs->conf.uid,
		.gid = rs->conf.gid,
		.limits = rich->limits,
		.tmp_mb = rich->tmp_mb,
		.log_driver = rich->log_driver,
		.log_options = rich->log_options,
		.n_log_options = rich->n_log_options,
		.time_zone = rich->time_zone,
		.workspace = ch->workspace,
		.broker_dir = broker_dir,
		.image = rich->image,
	};
	uint64_t now = rs->ops->now_ms(rs->owner);
	uint64_t left = ch->start_deadline_ms > now ? ch->start_deadline_ms - now : 0;
	ch->step = RUNNERD_RICH_RUN;
	r = spawn(ch, runnerd_docker_rich_argv(&spec), RUNNERD_RICH_RUN_OUTPUT_MAX,
		  left > RUNNERD_RICH_RUN_MIN_MS ? left : RUNNERD_RICH_RUN_MIN_MS, run_done);
	if (r < 0) {
		ch->step = RUNNERD_RICH_IDLE;
		log_error_errno(r, "channel %.12s: cannot run docker run: %m", ch->hash);
		start_failed(ch, r, "it could not be started");
		drive(ch);
		return;
	}
	log_info("channel %.12s: starting container %s (profile %s, generation %s)", ch->hash, ch->name, ch->profile,
		 ch->want_gen);
}

static void send_bind(struct runnerd_rich *ch, int listen_fd)
{
	struct runnerd_riches *rs = ch->rs;
	ch->step = RUNNERD_RICH_BINDING;
	ch->broker_gen = rs->rops->bind(rs->owner, &(struct rts_msg_rich_bind){.channel = ch->channel,
										 .channel_hash = ch->hash,
										 .profile = ch->profile,
										 .fd = listen_fd});
}

/* NONE (a new container) or FOUND and current (adopted): the broker socket first. */
static void start(struct runnerd_rich *ch, bool adopt)
{
	struct runnerd_riches *rs = ch->rs;
	ch->adopting = adopt;
	ch->start_deadline_ms = rs->ops->now_ms(rs->owner) + rs->conf.cfg->rich.start_timeout_ms;
	char prefix[RUNNERD_RICH_PREFIX_LEN + 1];
	int fd = rs->rops->dir_open(rs->owner, prefix_of(ch, prefix));
	if (fd < 0) {
		log_error_errno(fd, "channel %.12s: cannot make its broker directory and socket: %m", ch->hash);
		if (adopt) {
			/* Nothing of ours was made: keep it as it is. */
			answer(ch, true, RTS_RICH_STATE_FAILED, fd);
			turns_fail_queued(ch, RTS_TURN_ERROR, "no broker socket");
			ch->want_running = false;
			return;
		}
		start_failed(ch, fd, "no broker socket");
		drive(ch);
		return;
	}
	ch->dir_made = true;
	/* The socket waits in the machine only for the link: it is the listener brokerd will
	 * serve. Kept as the proc-less step's state. */
	ch->step = RUNNERD_RICH_BIND_WAIT;
	ch->broker_gen = 0;
	ch->bind_fd = fd;
	rs->ops->broker_want(rs->owner);
}

/* ---- checking the generation ---- */

static void running_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_rich *ch = arg;
	ch->proc = NULL;
	ch->step = RUNNERD_RICH_IDLE;
	bool running = r->exited && r->status == 0 && r->out_len == 5 && memcmp(r->out, "true\n", 5) == 0;
	if (!running) {
		log_notice("channel %.12s: its container %s no longer runs: starting a new one", ch->hash, ch->name);
		ch->replace = true;
		ch->why = "it no longer runs";
	} else if (strcmp(ch->generation, ch->want_gen) != 0) {
		log_notice("channel %.12s: the profile, the rich config or the image changed (generation %s, now %s): "
			   "replacing its container",
			   ch->hash, ch->generation[0] ? ch->generation : "-", ch->want_gen);
		ch->replace = true;
		ch->why = "the profile, the config or the image changed";
	}
	drive(ch);
}

/* What `docker image inspect --format {{.Id}}` printed: the image ID, or false. */
static bool image_id_of(const struct runnerd_proc_result *r, char *out)
{
	return r->exited && r->status == 0 && runnerd_parse_image_id(r->out, r->out_len, out) == 0;
}

static void inspect_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_rich *ch = arg;
	struct runnerd_riches *rs = ch->rs;
	const struct rts_config *cfg = rs->conf.cfg;
	ch->proc = NULL;
	ch->step = RUNNERD_RICH_IDLE;
	ch->check_needed = false;
	char image_id[RUNNERD_IMAGE_ID_MAX + 1];
	const struct rts_rich_profile *profile = rts_rich_profile_find(&cfg->rich, ch->profile);
	if (!image_id_of(r, image_id) || !profile) {
		char why[RUNNERD_STDERR_LOG_MAX + 64];
		if (!profile)
			snprintf(why, sizeof(why), "profile %s is not in the config", ch->profile);
		else
			cli_failure(r, why, sizeof(why));
		log_error("channel %.12s: cannot check the rich image %s (%s)", ch->hash, cfg->rich.image, why);
		/* The container (if any) stays; the waiting ENSUREs and turns fail. */
		answer(ch, true, RTS_RICH_STATE_FAILED, profile ? -EIO : -EINVAL);
		turns_fail_queued(ch, RTS_TURN_ERROR, "the rich image could not be checked");
		ch->want_running = false;
		drive(ch);
		return;
	}
	runnerd_rich_generation(cfg, profile, image_id, rs->conf.uid, rs->conf.gid, ch->want_gen);
	if (ch->container == RUNNERD_RICH_READY) {
		/* Does it still run? A worker that died gets a new container now, not at the
		 * turn's deadline. */
		ch->step = RUNNERD_RICH_RUNNING_Q;
		int rr = spawn(ch, runnerd_docker_running_argv(RTS_DOCKER, ch->name), RUNNERD_RICH_INSPECT_OUTPUT_MAX,
			       RUNNERD_RICH_INSPECT_TIMEOUT_MS, running_done);
		if (rr >= 0)
			return;
		ch->step = RUNNERD_RICH_IDLE;
		ch->replace = true;
		ch->why = "its state could not be checked";
	}
	drive(ch);
}

/* ---- the one place that decides what comes next ---- */

static void drive(struct runnerd_rich *ch)
{
	struct runnerd_riches *rs = ch->rs;
	if (rs->shutting_down || ch->step != RUNNERD_RICH_IDLE)
		return;
	/* A container is removed only when something asks for it: a STOP, a stale or failed
	 * one, a cancelled turn, the sync. Not being wanted is not enough: a brokerd that went
	 * away must not cost a container its life. */
	bool made = ch->container != RUNNERD_RICH_NONE || ch->dir_made;
	if (made && (ch->replace || ch->stop_pending)) {
		begin_stop(ch);
		return;
	}
	/* Nothing (left) to remove. */
	ch->replace = false;
	if (ch->stop_pending) {
		ch->stop_pending = false;
		answer(ch, false, RTS_RICH_STATE_STOPPED, 0);
	}
	if (ch->fail_err) {
		answer(ch, true, RTS_RICH_STATE_FAILED, ch->fail_err);
		turns_fail_queued(ch, RTS_TURN_ERROR, "the container could not be started");
		ch->fail_err = 0;
	}
	if (!ch->want_running) {
		/* ENSUREs superseded by a STOP, turns without an ENSURE: no container for them. */
		answer(ch, true, RTS_RICH_STATE_STOPPED, 0);
		turns_fail_queued(ch, RTS_TURN_ERROR, "the channel's container is not wanted");
		ch_maybe_free(ch);
		return;
	}
	if (ch->check_needed) {
		ch->step = RUNNERD_RICH_INSPECT;
		int r = spawn(ch, runnerd_docker_image_inspect_argv(RTS_DOCKER, rs->conf.cfg->rich.image),
			      RUNNERD_RICH_INSPECT_OUTPUT_MAX, RUNNERD_RICH_INSPECT_TIMEOUT_MS, inspect_done);
		if (r < 0) {
			ch->step = RUNNERD_RICH_IDLE;
			ch->check_needed = false;
			log_error_errno(r, "channel %.12s: cannot run docker image inspect: %m", ch->hash);
			answer(ch, true, RTS_RICH_STATE_FAILED, r);
			turns_fail_queued(ch, RTS_TURN_ERROR, "the rich image could not be checked");
			ch->want_running = false;
			drive(ch);
		}
		return;
	}
	switch (ch->container) {
	case RUNNERD_RICH_READY:
		answer(ch, true, RTS_RICH_STATE_READY, 0);
		turn_send_next(ch);
		return;
	case RUNNERD_RICH_FOUND:
		if (ch->found_running && !ch->found_dir_gone && strcmp(ch->generation, ch->want_gen) == 0) {
			log_info("channel %.12s: adopting its running container %s", ch->hash, ch->name);
			start(ch, true);
			return;
		}
		log_notice("channel %.12s: its container %s %s: replacing it", ch->hash, ch->name,
			   !ch->found_running	 ? "is not running"
			   : ch->found_dir_gone ? "lost its broker directory (runRoot was made anew)"
						 : "is of another generation");
		ch->replace = true;
		ch->why = !ch->found_running   ? "it no longer runs"
			  : ch->found_dir_gone ? "its broker directory is gone"
					       : "the profile, the config or the image changed";
		begin_stop(ch);
		return;
	case RUNNERD_RICH_NONE:
		start(ch, false);
		return;
	}
}

/* ---- inputs ---- */

void runnerd_rich_found(struct runnerd_riches *rs, const struct runnerd_rich_found *f)
{
	int err = 0;
	struct runnerd_rich *ch = ch_get(rs, f->channel_hash, &err);
	if (!ch) {
		log_warning_errno(err, "rich container %s: not kept track of (%m); remove it by hand", f->name);
		return;
	}
	ch->container = RUNNERD_RICH_FOUND;
	ch->found_running = f->running;
	ch->found_dir_gone = f->dir_gone;
	memcpy(ch->generation, f->generation, sizeof(ch->generation));
	log_notice("rich container %s of channel %.12s: %s%s, generation %s; kept until statd's sync", f->name,
		   f->channel_hash, f->running ? "running" : "not running",
		   f->dir_gone ? ", its broker directory gone" : "", f->generation[0] ? f->generation : "-");
}

static bool str_ok(const char *s)
{
	return rts_utf8_valid(s, strlen(s));
}

/* channel's hash is hash, and channel is what the channel's object knows, if it knows. */
static bool channel_matches(const char *channel, const char *hash)
{
	char want[RTS_HASH_HEX_LEN + 1];
	if (!channel[0] || !str_ok(channel))
		return false;
	rts_channel_hash(channel, want);
	return strcmp(want, hash) == 0;
}

int runnerd_rich_ensure(struct runnerd_riches *rs, struct runnerd_statd *peer, struct rts_msg_rich_ensure *m)
{
	cleanup_close int ws_fd = steal_fd(&m->fd);
	const struct rts_config *cfg = rs->conf.cfg;
	if (!channel_matches(m->channel, m->channel_hash) || !m->profile[0])
		return -EBADMSG;
	/* The workspace is exactly <workspaceRoot>/<hash> (as for a sealed turn). */
	size_t rl = strlen(cfg->workspace_root);
	struct stat st;
	if (strncmp(m->workspace, cfg->workspace_root, rl) != 0 || m->workspace[rl] != '/' ||
	    strcmp(m->workspace + rl + 1, m->channel_hash) != 0 || fstat(ws_fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return -EBADMSG;
	struct rts_msg_rich_state refuse = {.seq = m->seq, .channel_hash = m->channel_hash,
					    .state = RTS_RICH_STATE_FAILED};
	if (rs->shutting_down || !cfg->rich.enabled || !rts_rich_profile_find(&cfg->rich, m->profile)) {
		refuse.error = rs->shutting_down ? -ESHUTDOWN : -EINVAL;
		rs->rops->state(rs->owner, peer, &refuse);
		return 0;
	}
	int err = 0;
	struct runnerd_rich *ch = ch_get(rs, m->channel_hash, &err);
	if (!ch) {
		log_warning_errno(err, "channel %.12s: cannot keep track of its container: %m", m->channel_hash);
		refuse.error = err;
		rs->rops->state(rs->owner, peer, &refuse);
		return 0;
	}
	free(ch->channel);
	ch->channel = rts_xstrdup(m->channel);
	free(ch->profile);
	ch->profile = rts_xstrdup(m->profile);
	free(ch->workspace);
	ch->workspace = rts_xstrdup(m->workspace);
	if (ch->ws_fd >= 0)
		close(ch->ws_fd);
	ch->ws_fd = steal_fd(&ws_fd);
	ch->claim = peer;
	ch->want_running = true;
	ch->check_needed = true;
	pending_add(ch, peer, m->seq, true);
	drive(ch);
	return 0;
}

static const char *stop_reason(uint32_t reason)
{
	switch (reason) {
	case RTS_RICH_STOP_OFF:
		return "the channel is no longer rich";
	case RTS_RICH_STOP_FRESH:
		return "a fresh start";
	case RTS_RICH_STOP_CHANGED:
	default:
		return "the channel's profile changed";
	}
}

int runnerd_rich_stop(struct runnerd_riches *rs, struct runnerd_statd *peer, const struct rts_msg_rich_stop *m)
{
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN) || m->reason >= RTS_RICH_STOP_REASONS)
		return -EBADMSG;
	struct runnerd_rich *ch = runnerd_rich_find(rs, m->channel_hash);
	if (!ch || rs->shutting_down) {
		rs->rops->state(rs->owner, peer,
				&(struct rts_msg_rich_state){.seq = m->seq, .channel_hash = m->channel_hash,
							     .state = ch ? RTS_RICH_STATE_FAILED : RTS_RICH_STATE_STOPPED,
							     .error = ch ? -ESHUTDOWN : 0});
		return 0;
	}
	pending_add(ch, peer, m->seq, false);
	ch->stop_pending = true;
	ch->want_running = false;
	ch->check_needed = false;
	ch->why = stop_reason(m->reason);
	/* statd sends a STOP only behind its turns; one still here goes with the container. */
	turns_fail_queued(ch, RTS_TURN_CANCELLED, "the container was stopped");
	struct rich_turn *t;
	TAILQ_FOREACH(t, &ch->turns, entry)
	if (t->state == TURN_SENT)
		turn_force_end(t, RTS_TURN_CANCELLED);
	ch->why = stop_reason(m->reason);
	drive(ch);
	return 0;
}

bool runnerd_riches_know_prefix(struct runnerd_riches *rs, const char *prefix)
{
	struct runnerd_rich *ch;
	TAILQ_FOREACH(ch, &rs->list, entry)
	if (strncmp(ch->hash, prefix, RUNNERD_RICH_PREFIX_LEN) == 0)
		return true;
	return false;
}

bool runnerd_rich_has_turn(struct runnerd_riches *rs, const char *turn_id)
{
	struct runnerd_rich *ch;
	struct rich_turn *t;
	TAILQ_FOREACH(ch, &rs->list, entry)
	TAILQ_FOREACH(t, &ch->turns, entry)
	if (strcmp(t->id, turn_id) == 0)
		return true;
	return false;
}

int runnerd_rich_turn(struct runnerd_riches *rs, struct runnerd_statd *peer, struct rts_msg_rich_turn *m)
{
	cleanup_close int fd = steal_fd(&m->fd);
	if (!rts_turn_id_valid(m->turn_id) || !channel_matches(m->channel, m->channel_hash) || !m->profile[0] ||
	    !str_ok(m->speaker_id) || !str_ok(m->speaker_name) || !str_ok(m->principal_id) || !m->speaker_id[0] ||
	    !m->principal_id[0])
		return -EBADMSG;
	/* Turn ids are statd's to make unique, across both kinds of turn. */
	if (runnerd_rich_has_turn(rs, m->turn_id))
		return -EBADMSG;
	struct runnerd_rich *ch = runnerd_rich_find(rs, m->channel_hash);
	const char *refusal = rs->shutting_down			 ? "shutting down"
			      : !ch || !ch->want_running || !ch->profile ? "no RICH_ENSURE for its channel"
			      : strcmp(ch->profile, m->profile) != 0	 ? "another profile than its channel's"
									 : NULL;
	if (refusal) {
		rts_log_turn(LOG_WARNING, m->turn_id, m->channel_hash, rs->shutting_down ? "cancelled" : "error", 0,
			     "rich turn refused: %s", refusal);
		rs->rops->turn_done(rs->owner, peer,
				    &(struct rts_msg_rich_turn_done){
					    .turn_id = m->turn_id,
					    .status = rs->shutting_down ? RTS_TURN_CANCELLED : RTS_TURN_ERROR,
					    .fd = -1,
				    });
		return 0;
	}
	struct rich_turn *t = rts_xcalloc(1, sizeof(*t));
	t->ch = ch;
	t->peer = peer;
	memcpy(t->id, m->turn_id, sizeof(t->id));
	t->channel = rts_xstrdup(m->channel);
	t->speaker_id = rts_xstrdup(m->speaker_id);
	t->speaker_name = rts_xstrdup(m->speaker_name);
	t->principal_id = rts_xstrdup(m->principal_id);
	t->profile = rts_xstrdup(m->profile);
	t->input_fd = steal_fd(&fd);
	t->state = TURN_QUEUED;
	t->started_ms = rs->ops->now_ms(rs->owner);
	t->deadline_ms = t->started_ms + rs->conf.cfg->rich.turn_timeout_ms;
	TAILQ_INSERT_TAIL(&ch->turns, t, entry);
	int r = rs->ops->timer_start(rs->owner, rs->conf.cfg->rich.turn_timeout_ms, on_turn_deadline, t, &t->deadline);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm its deadline: %m", t->id);
		turn_answer(t, RTS_TURN_ERROR, 0, -1, "internal error");
		return 0;
	}
	log_debug("turn %s: rich turn accepted for channel %.12s", t->id, ch->hash);
	drive(ch);
	return 0;
}

bool runnerd_rich_cancel(struct runnerd_riches *rs, struct runnerd_statd *peer, const char *turn_id)
{
	struct runnerd_rich *ch;
	struct rich_turn *t;
	TAILQ_FOREACH(ch, &rs->list, entry)
	TAILQ_FOREACH(t, &ch->turns, entry)
	{
		if (strcmp(t->id, turn_id) != 0)
			continue;
		if (t->peer != peer)
			return true; /* not peer's to cancel */
		if (t->state == TURN_QUEUED) {
			turn_answer(t, RTS_TURN_CANCELLED, 0, -1, "cancelled before the container was ready");
		} else if (t->state == TURN_SENT) {
			log_info("turn %s: cancel requested: removing channel %.12s's container", t->id, ch->hash);
			turn_force_end(t, RTS_TURN_CANCELLED);
			drive(ch);
		}
		return true;
	}
	return false;
}

void runnerd_rich_sync(struct runnerd_riches *rs, struct runnerd_statd *peer, uint32_t channels)
{
	uint32_t removed = 0;
	struct runnerd_rich *ch, *next;
	for (ch = TAILQ_FIRST(&rs->list); ch; ch = next) {
		next = TAILQ_NEXT(ch, entry);
		if (ch->claim == peer || !TAILQ_EMPTY(&ch->turns) || (!ch->want_running && ch->container == RUNNERD_RICH_NONE))
			continue;
		log_notice("channel %.12s: not among statd's rich channels: removing its container %s", ch->hash,
			   ch->name);
		ch->want_running = false;
		ch->check_needed = false;
		ch->replace = true;
		ch->why = "the channel is no longer rich";
		removed++;
		answer(ch, true, RTS_RICH_STATE_STOPPED, 0);
		drive(ch); /* may free ch */
	}
	log_info("statd synced %u rich channel(s); %u container(s) to remove", channels, removed);
	rs->rops->synced(rs->owner, peer, removed);
}

void runnerd_riches_forget_peer(struct runnerd_riches *rs, struct runnerd_statd *peer)
{
	struct runnerd_rich *ch, *next;
	for (ch = TAILQ_FIRST(&rs->list); ch; ch = next) {
		next = TAILQ_NEXT(ch, entry);
		if (ch->claim == peer)
			ch->claim = NULL;
		for (struct pending *p = ch->pending; p; p = p->next)
			if (p->peer == peer)
				p->peer = NULL;
		struct rich_turn *t, *tn;
		for (t = TAILQ_FIRST(&ch->turns); t; t = tn) {
			tn = TAILQ_NEXT(t, entry);
			if (t->peer != peer)
				continue;
			t->peer = NULL;
			/* A restart of statd does not kill the container: only the turn goes. */
			if (t->state == TURN_SENT) {
				rs->rops->cancel(rs->owner, t->gen, t->id);
				turn_answer(t, RTS_TURN_CANCELLED, 0, -1, "statd went away");
			} else if (t->state == TURN_QUEUED) {
				turn_answer(t, RTS_TURN_CANCELLED, 0, -1, "statd went away");
			}
		}
		drive(ch);
	}
}

void runnerd_riches_broker_up(struct runnerd_riches *rs)
{
	struct runnerd_rich *ch;
	TAILQ_FOREACH(ch, &rs->list, entry)
	if (ch->step == RUNNERD_RICH_BIND_WAIT)
		send_bind(ch, steal_fd(&ch->bind_fd));
}

void runnerd_riches_broker_lost(struct runnerd_riches *rs, uint64_t gen, bool connect_failed)
{
	struct runnerd_rich *ch, *next;
	bool waiting = false;
	for (ch = TAILQ_FIRST(&rs->list); ch; ch = next) {
		next = TAILQ_NEXT(ch, entry);
		if (connect_failed && ch->step == RUNNERD_RICH_BIND_WAIT) {
			log_warning("channel %.12s: brokerd cannot be reached: its container is not started or bound",
				    ch->hash);
			close(steal_fd(&ch->bind_fd));
			ch->step = RUNNERD_RICH_IDLE;
			/* A directory made for a container that does not exist goes again. */
			if (ch->container == RUNNERD_RICH_NONE)
				ch->replace = true;
			answer(ch, true, RTS_RICH_STATE_FAILED, -ENOTCONN);
			turns_fail_queued(ch, RTS_TURN_ERROR, "brokerd unavailable");
			/* Keep a container that runs; the next ENSURE tries again. */
			ch->want_running = false;
			if (ch->adopting)
				ch->container = RUNNERD_RICH_FOUND;
			ch->adopting = false;
			drive(ch);
			continue;
		}
		if (!gen || ch->broker_gen != gen)
			continue;
		ch->broker_gen = 0;
		struct rich_turn *t, *tn;
		for (t = TAILQ_FIRST(&ch->turns); t; t = tn) {
			tn = TAILQ_NEXT(t, entry);
			if (t->state == TURN_SENT)
				turn_answer(t, RTS_TURN_ERROR, 0, -1, "brokerd unavailable");
		}
		/* The container runs on: brokerd's restart must not kill it. While something is
		 * wanted of it (an ENSURE waits) it is bound again at once (a new broker.sock in
		 * the same directory; the worker re-announces itself), else at the next ENSURE.
		 * A docker run still going finds the link gone when it ends (run_done). */
		if (ch->step == RUNNERD_RICH_BINDING || ch->step == RUNNERD_RICH_WAIT_READY)
			ch->step = RUNNERD_RICH_IDLE;
		if (ch->container == RUNNERD_RICH_READY || ch->container == RUNNERD_RICH_FOUND) {
			ch->container = RUNNERD_RICH_FOUND;
			ch->found_running = true;
			if (!ch->generation[0])
				memcpy(ch->generation, ch->want_gen, sizeof(ch->generation));
		}
		ch->adopting = false;
		if (!ch->pending && TAILQ_EMPTY(&ch->turns))
			ch->want_running = false;
		drive(ch);
	}
	/* Channels still waiting for a link get a new one (HACKING.md: the next use
	 * reconnects). */
	TAILQ_FOREACH(ch, &rs->list, entry)
	waiting |= ch->step == RUNNERD_RICH_BIND_WAIT;
	if (waiting && !connect_failed)
		rs->ops->broker_want(rs->owner);
}

void runnerd_rich_bound(struct runnerd_riches *rs, uint64_t gen, const char *channel_hash, int32_t result)
{
	struct runnerd_rich *ch = runnerd_rich_find(rs, channel_hash);
	if (!ch || ch->step != RUNNERD_RICH_BINDING || ch->broker_gen != gen)
		return;
	ch->step = RUNNERD_RICH_IDLE;
	if (result < 0) {
		log_warning_errno(result, "channel %.12s: brokerd refused its listener: %m", ch->hash);
		ch->broker_gen = 0;
		if (ch->adopting) {
			/* The container is not ours to kill for brokerd's refusal. */
			ch->adopting = false;
			answer(ch, true, RTS_RICH_STATE_FAILED, result);
			turns_fail_queued(ch, RTS_TURN_ERROR, "brokerd refused the channel");
			ch->want_running = false;
			drive(ch);
			return;
		}
		start_failed(ch, result, "brokerd refused the channel");
		drive(ch);
		return;
	}
	if (ch->adopting) {
		ch->step = RUNNERD_RICH_WAIT_READY;
		rs->rops->wait_ready(rs->owner, gen,
				     &(struct rts_msg_rich_wait_ready){.channel_hash = ch->hash,
								       .deadline_ms = ch->start_deadline_ms});
		return;
	}
	start_run(ch);
}

void runnerd_rich_ready(struct runnerd_riches *rs, uint64_t gen, const struct rts_msg_rich_ready *m)
{
	struct runnerd_rich *ch = runnerd_rich_find(rs, m->channel_hash);
	if (!ch || ch->step != RUNNERD_RICH_WAIT_READY || ch->broker_gen != gen)
		return;
	ch->step = RUNNERD_RICH_IDLE;
	if (m->result == 0) {
		ch->container = RUNNERD_RICH_READY;
		ch->adopting = false;
		log_info("channel %.12s: container %s ready (capabilities %u%s)", ch->hash, ch->name, m->capabilities,
			 m->private_history ? ", private history" : "");
		drive(ch);
		return;
	}
	if (m->result == -ETIME) {
		log_warning("channel %.12s: the worker of %s did not announce itself within rich.startTimeoutMs (%u ms)",
			    ch->hash, ch->name, rs->conf.cfg->rich.start_timeout_ms);
		ch->logs_wanted = true;
	} else {
		log_warning_errno(m->result, "channel %.12s: brokerd gave up waiting for the worker: %m", ch->hash);
	}
	ch->adopting = false;
	start_failed(ch, m->result == -ETIME ? -ETIME : -EIO, "its worker did not announce itself");
	drive(ch);
}

void runnerd_rich_done(struct runnerd_riches *rs, uint64_t gen, struct rts_msg_broker_rich_done *m)
{
	struct runnerd_rich *ch;
	struct rich_turn *t;
	TAILQ_FOREACH(ch, &rs->list, entry)
	TAILQ_FOREACH(t, &ch->turns, entry)
	{
		if (strcmp(t->id, m->turn_id) != 0)
			continue;
		if (t->state != TURN_SENT || t->gen != gen)
			return; /* already ended here (cancelled, timed out) */
		enum rts_turn_status st = (enum rts_turn_status)m->status;
		turn_answer(t, st, m->calls, st == RTS_TURN_OK ? steal_fd(&m->fd) : -1,
			    st == RTS_TURN_OK ? "reply" : "brokerd ended it");
		drive(ch);
		return;
	}
}

/* ---- shutdown ---- */

void runnerd_riches_shutdown(struct runnerd_riches *rs)
{
	rs->shutting_down = true;
	struct runnerd_rich *ch;
	TAILQ_FOREACH(ch, &rs->list, entry)
	{
		if (ch->proc) {
			rs->ops->detach(rs->owner, ch->proc);
			ch->proc = NULL;
		}
		runnerd_removal_abandon(&ch->removal);
		ch->step = RUNNERD_RICH_IDLE;
		struct rich_turn *t;
		while ((t = TAILQ_FIRST(&ch->turns))) {
			if (t->state == TURN_SENT)
				rs->rops->cancel(rs->owner, t->gen, t->id);
			turn_answer(t, RTS_TURN_CANCELLED, 0, -1, "runnerd is shutting down");
		}
		answer(ch, true, RTS_RICH_STATE_FAILED, -ESHUTDOWN);
		answer(ch, false, RTS_RICH_STATE_FAILED, -ESHUTDOWN);
	}
	/* The containers run on: the next runnerd adopts them (seed: a restart of the
	 * daemons does not kill them). */
}

void runnerd_riches_free(struct runnerd_riches *rs)
{
	while (!TAILQ_EMPTY(&rs->list))
		ch_free(TAILQ_FIRST(&rs->list));
}
