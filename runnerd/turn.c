/* SPDX-License-Identifier: Apache-2.0 */
/* One turn, from TURN_RUN to TURN_DONE: the state machine of runnerd/turn.h.
 *
 * Depends on turn.h, removal.h (a machine on the same ops), the pure docker_args.h and
 * worker_io.h, and common/ only; every effect is an op (turn_ops.c in the daemon, a
 * recording fake in the unit test). */
#include "config.h"

#include <sys/stat.h>
#include <time.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/precheck.h"
#include "common/spawn.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/precheck_io.h"
#include "runnerd/removal.h"
#include "runnerd/turn.h"
#include "runnerd/worker_io.h"

struct runnerd_turn {
	TAILQ_ENTRY(runnerd_turn) entry;
	struct runnerd_turns *ts;
	struct runnerd_statd *peer; /* NULL once statd went away: no TURN_DONE then */
	enum runnerd_turn_kind kind;

	char id[RTS_TURN_ID_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char *channel;
	char *speaker_id, *speaker_name, *principal_id;
	char *text;
	uint32_t attachments;
	bool start_fresh;
	char *workspace;
	int workspace_fd; /* O_PATH fd statd verified; compared with the path before docker run */
	char *container;

	int listen_fd; /* broker.sock listener until it travels in BROKER_BIND */
	bool run_dir_made;
	/* A warm spare's: its id names the container and the run dir; its docker CLI is t->run
	 * from the claim on, fed the input in turn_spawn (runnerd/spare.h). */
	bool warm, fed;
	char spare_id[RTS_TURN_ID_LEN + 1]; /* empty: no spare was claimed */
	char *spare_container;		     /* a lost spare's (spare_lost) */
	/* A claimed spare that ended before its input: its container's docker rm -f, which the
	 * turn's end waits for (the turn itself goes on cold). */
	struct runnerd_proc *spare_rm;
#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
	struct rts_timer *feed_hold; /* test build only: the input waits (see turn_spawn) */
	bool held;
#endif
	uint64_t broker_gen; /* link generation BROKER_BIND went out on; 0: none (or closed) */

	enum runnerd_turn_phase phase;
	bool ended; /* the outcome is decided (phase REMOVING or later) */
	uint64_t started_ms, deadline_ms;
	struct rts_timer *deadline, *bind_timer, *finish;
	struct runnerd_proc *run;
	bool spawned; /* docker run was started: a container may exist */
	struct runnerd_removal removal; /* the container's, once the outcome is decided */

	enum rts_turn_status status;
	const char *why; /* short reason for the log line; never guest data */
	char worker_code[RTS_WORKER_ERROR_CODE_MAX + 1];
	char *reply; /* a precheck: the text of its answer (note, context or error), or NULL */

	/* RUNNERD_KIND_PRECHECK: the run as statd sent it (validated), and its answer. */
	char *target, *tier, *approved, *script, *fired_at, *time_zone, *today, *schedule;
	uint32_t answer; /* enum rts_precheck_answer */
};

static bool is_precheck(const struct runnerd_turn *t)
{
	return t->kind == RUNNERD_KIND_PRECHECK;
}

/* The id naming the turn's run dir: a claimed spare's, even when the spare ended before its
 * input and the turn went on cold (its broker.sock is the one brokerd was bound to). */
static const char *run_dir_id(const struct runnerd_turn *t)
{
	return t->spare_id[0] ? t->spare_id : t->id;
}

/* "turn" or "precheck", for log lines. */
static const char *kind_word(const struct runnerd_turn *t)
{
	return is_precheck(t) ? "precheck" : "turn";
}

void runnerd_turns_init(struct runnerd_turns *ts, const struct runnerd_turn_ops *ops, void *owner,
			const struct runnerd_turn_config *conf)
{
	*ts = (struct runnerd_turns){.ops = ops, .owner = owner, .conf = *conf};
	TAILQ_INIT(&ts->list);
}

struct runnerd_turn *runnerd_turn_find(struct runnerd_turns *ts, const char *id)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &ts->list, entry)
	if (strcmp(t->id, id) == 0)
		return t;
	return NULL;
}

enum runnerd_turn_phase runnerd_turn_phase(const struct runnerd_turn *t)
{
	if (t->phase == RUNNERD_TURN_REMOVING && runnerd_removal_waiting(&t->removal))
		return RUNNERD_TURN_REMOVE_WAIT;
	return t->phase;
}

enum runnerd_turn_kind runnerd_turn_kind(const struct runnerd_turn *t)
{
	return t->kind;
}

static void timer_stop(struct runnerd_turn *t, struct rts_timer **timer)
{
	t->ts->ops->timer_stop(t->ts->owner, *timer);
	*timer = NULL;
}

static void turn_free(struct runnerd_turn *t)
{
	struct runnerd_turns *ts = t->ts;
	timer_stop(t, &t->deadline);
	timer_stop(t, &t->bind_timer);
	timer_stop(t, &t->finish);
#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
	timer_stop(t, &t->feed_hold);
#endif
	if (t->spare_rm)
		ts->ops->detach(ts->owner, t->spare_rm);
	/* Children outlive the turn only if they refused to die; they reap themselves. */
	if (t->run)
		ts->ops->detach(ts->owner, t->run);
	runnerd_removal_abandon(&t->removal);
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	if (t->workspace_fd >= 0)
		close(t->workspace_fd);
	free(t->channel);
	free(t->speaker_id);
	free(t->speaker_name);
	free(t->principal_id);
	free(t->text);
	free(t->workspace);
	free(t->container);
	free(t->spare_container);
	free(t->reply);
	free(t->target);
	free(t->tier);
	free(t->approved);
	free(t->script);
	free(t->fired_at);
	free(t->time_zone);
	free(t->today);
	free(t->schedule);
	free(t);
}

static void send_done(struct runnerd_turns *ts, struct runnerd_statd *peer, const char *id,
		      enum rts_turn_status status, const char *reply)
{
	ts->ops->turn_done(ts->owner, peer,
			   &(struct rts_msg_turn_done){
				   .turn_id = id,
				   .status = (uint32_t)status,
				   .reply = status == RTS_TURN_OK && reply ? reply : "",
			   });
}

static void send_precheck_done(struct runnerd_turns *ts, struct runnerd_statd *peer, const char *id,
			       enum rts_turn_status status, uint32_t answer, const char *text)
{
	bool ok = status == RTS_TURN_OK;
	ts->ops->precheck_done(ts->owner, peer,
			       &(struct rts_msg_precheck_done){
				       .precheck_id = id,
				       .status = (uint32_t)status,
				       .answer = ok ? answer : 0,
				       .text = ok && text ? text : "",
			       });
}

static void maybe_idle(struct runnerd_turns *ts)
{
	if (ts->shutting_down && ts->n == 0)
		ts->ops->idle(ts->owner);
}

/* FINISHING, from the loop: run dir gone, one log line, statd answered, t freed. */
static void turn_finish(void *arg)
{
	struct runnerd_turn *t = arg;
	struct runnerd_turns *ts = t->ts;
	t->finish = NULL; /* fired */
	if (t->listen_fd >= 0)
		close(steal_fd(&t->listen_fd));
	if (t->run_dir_made) {
		int r = is_precheck(t) ? ts->ops->precheck_dir_remove(ts->owner, t->id)
				       : ts->ops->run_dir_remove(ts->owner, run_dir_id(t));
		if (r < 0)
			log_warning_errno(r, "cannot remove the run dir of %s %s: %m", kind_word(t), t->id);
	}
	bool cleanup_failed = runnerd_removal_failed(&t->removal);
	if (cleanup_failed)
		t->status = RTS_TURN_CLEANUP_FAILED;
	if (t->status != RTS_TURN_OK) {
		free(t->reply);
		t->reply = NULL;
	}
	uint64_t ms = ts->ops->now_ms(ts->owner) - t->started_ms;
	ms = ms ? ms : 1;
	const char *why = t->why ? t->why : "-";
	if (cleanup_failed)
		/* The one generic line that asks the operator to look (seed: a cleanup failure
		 * ends the turn and asks for inspection instead of hanging the queue). */
		rts_log_turn(LOG_ERR, t->id, t->channel_hash, "cleanup_failed", ms,
			     "%s finished (%s) but container %s could not be removed: inspect it with "
			     "docker ps -a and remove it",
			     kind_word(t), why, t->container);
	else if (t->worker_code[0])
		rts_log_turn(LOG_WARNING, t->id, t->channel_hash, rts_turn_status_word(t->status), ms,
			     "%s finished: %s (%s %s)", kind_word(t), why,
			     is_precheck(t) ? "harness refused the input field" : "worker code", t->worker_code);
	else
		rts_log_turn(t->status == RTS_TURN_OK		? LOG_INFO
			     : t->status == RTS_TURN_CANCELLED ? LOG_NOTICE
							       : LOG_WARNING,
			     t->id, t->channel_hash, rts_turn_status_word(t->status), ms, "%s finished: %s%s", kind_word(t),
			     why, t->peer ? "" : " (statd gone, not answered)");
	/* After the log line: whoever hears the outcome finds it logged already. */
	/* Prechecks are not turns: the turn metrics leave them out. */
	if (ts->ops->finished && !is_precheck(t))
		ts->ops->finished(ts->owner, t->status, ms, t->warm);
	if (t->peer && is_precheck(t))
		send_precheck_done(ts, t->peer, t->id, t->status, t->answer, t->reply);
	else if (t->peer)
		send_done(ts, t->peer, t->id, t->status, t->reply);
	/* After the answer, so it never waits for a docker run: the channel had traffic, so
	 * its next turn gets a spare, unless this one was cancelled (a spare is discarded on
	 * cancel) or runnerd is stopping. */
	if (ts->ops->spare_refill && !is_precheck(t) && t->status != RTS_TURN_CANCELLED && !ts->shutting_down)
		ts->ops->spare_refill(ts->owner, t->channel_hash, t->workspace, steal_fd(&t->workspace_fd));

	TAILQ_REMOVE(&ts->list, t, entry);
	ts->n--;
	turn_free(t);
	maybe_idle(ts);
}

/* Once the outcome is decided and no removal runs or is due: FINISHING. A docker CLI
 * that was SIGKILLed but is not reaped yet does not hold the turn up. */
static void turn_settle(struct runnerd_turn *t)
{
	struct runnerd_turns *ts = t->ts;
	if (!t->ended || t->phase == RUNNERD_TURN_FINISHING || runnerd_removal_busy(&t->removal) || t->spare_rm)
		return;
	if (t->run) {
		/* Already SIGKILLed by turn_end; it reaps itself whenever the kernel lets go. */
		ts->ops->kill(ts->owner, t->run);
		ts->ops->detach(ts->owner, t->run);
		t->run = NULL;
	}
	t->phase = RUNNERD_TURN_FINISHING;
	int r = ts->ops->timer_start(ts->owner, 0, turn_finish, t, &t->finish);
	if (r < 0)
		fatal_f("cannot schedule the end of turn %s: %s", t->id, strerror(-r));
}

/* The removal's words for a round that failed for good; the operator's cue follows in the
 * outcome line (cleanup_failed). */
static void removal_round_failed(void *arg, const char *container, const struct runnerd_proc_result *r)
{
	struct runnerd_turn *t = arg;
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	if (r->timed_out)
		log_warning("turn %s: docker rm -f did not finish within %u ms", t->id, RUNNERD_RM_TIMEOUT_MS);
	else
		log_warning("turn %s: docker rm -f failed (%s %d): %s", t->id, r->exited ? "status" : "signal", r->status,
			    line);
}

static void removal_over(void *arg)
{
	turn_settle(arg);
}

static const struct runnerd_removal_hooks turn_removal_hooks = {
	.round_failed = removal_round_failed,
	.over = removal_over,
};

/* Decide the outcome and start the clean-up: BROKER_CLOSE, kill the CLI, remove the
 * container rm_rounds times (RUNNERD_RM_SECOND_DELAY_MS apart) if docker run was started.
 * Idempotent: the first outcome wins. */
static void turn_end(struct runnerd_turn *t, enum rts_turn_status status, const char *why, unsigned rm_rounds)
{
	struct runnerd_turns *ts = t->ts;
	if (t->ended)
		return;
	t->ended = true;
	t->phase = RUNNERD_TURN_REMOVING;
	t->status = status;
	t->why = why;
	timer_stop(t, &t->deadline);
	timer_stop(t, &t->bind_timer);
#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
	timer_stop(t, &t->feed_hold);
#endif

	/* brokerd aborts in-flight upstream calls and tool processes; its BROKER_CLOSED is
	 * not waited for. */
	if (t->broker_gen)
		ts->ops->broker_close(ts->owner, t->broker_gen, t->id);
	t->broker_gen = 0;

	if (t->run)
		ts->ops->kill(ts->owner, t->run);
	/* A claimed spare's container runs from the claim on, whatever ended the turn. */
	if (t->warm && !t->fed && rm_rounds == 0)
		rm_rounds = 1;
	runnerd_removal_start(&t->removal, t->container, t->spawned ? rm_rounds : 0);
}

/* Cancelled from outside the turn (deadline, TURN_CANCEL, statd gone, shutdown): kill,
 * remove, then remove again for the create/attach race (HACKING.md "Turn flow" step 4). */
static void turn_cancel(struct runnerd_turn *t, enum rts_turn_status status)
{
	turn_end(t, status, status == RTS_TURN_TIMEOUT ? "deadline reached" : "cancelled", 2);
}

static void on_deadline(void *arg)
{
	struct runnerd_turn *t = arg;
	t->deadline = NULL; /* fired */
	turn_cancel(t, RTS_TURN_TIMEOUT);
}

static void on_bind_timeout(void *arg)
{
	struct runnerd_turn *t = arg;
	t->bind_timer = NULL; /* fired */
	log_warning("%s %s: brokerd did not bind it within %u ms", kind_word(t), t->id, RUNNERD_BIND_TIMEOUT_MS);
	turn_end(t, RTS_TURN_ERROR, "brokerd did not bind in time", 0);
}

_Static_assert(RUNNERD_PRECHECK_FIELD_MAX <= RTS_WORKER_ERROR_CODE_MAX, "a bad_input field is logged like a worker code");

/* A precheck's docker run exited: the harness's one result line decides (HACKING.md
 * "Precheck runtime"). Anything but a valid line is a failed run whose bytes go nowhere:
 * statd wakes the schedule with a generic error. */
static void precheck_run_done(struct runnerd_turn *t, const struct runnerd_proc_result *r)
{
	if (r->out_overflow) {
		log_warning("precheck %s: the harness wrote more than %u bytes to stdout", t->id, RTS_PRECHECK_OUTPUT_MAX);
		turn_end(t, RTS_TURN_ERROR, "precheck output too large", 2);
		return;
	}
	uint32_t answer = RTS_PRECHECK_SLEEP;
	char *text = NULL;
	int status = r->exited ? r->status : -1;
	switch (runnerd_precheck_output_parse(r->out, r->out_len, status, &answer, &text, t->worker_code)) {
	case RUNNERD_PRECHECK_ANSWER:
		t->answer = answer;
		t->reply = text;
		/* --rm: the CLI returned after the container was removed; nothing to clean. */
		turn_end(t, RTS_TURN_OK, "answered", 0);
		return;
	case RUNNERD_PRECHECK_BAD_INPUT:
		/* Our input was refused: a bug on this side; the field is in the log line. */
		turn_end(t, RTS_TURN_ERROR, "the harness refused its input", 1);
		return;
	case RUNNERD_PRECHECK_MALFORMED:
		break;
	}
	if (!r->exited || r->status != 0) {
		/* The docker CLI's own stderr only (the container's is not attached), and the
		 * limits, which a runtime that crashes on start usually points at. */
		char line[RUNNERD_STDERR_LOG_MAX + 1];
		char how[128];
		const struct rts_limits *l = &t->ts->conf.cfg->precheck.limits;
		rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
		runnerd_docker_exit_text(r->exited, r->status, how, sizeof(how));
		log_warning("precheck %s: docker run failed: %s (precheck.limits: memoryMb %u, pids %u): %s", t->id, how,
			    l->memory_mb, l->pids, line[0] ? line : "(no stderr)");
		turn_end(t, RTS_TURN_ERROR, "docker run failed", 1);
		return;
	}
	turn_end(t, RTS_TURN_ERROR, "precheck output malformed", 1);
}

static void turn_spawn(struct runnerd_turn *t);

static void spare_rm_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_turn *t = arg;
	t->spare_rm = NULL;
	enum runnerd_rm_outcome o = runnerd_docker_rm_outcome(r->killed, r->exited, r->status, r->err);
	if (o != RUNNERD_RM_GONE && o != RUNNERD_RM_IN_PROGRESS)
		log_error("turn %s: spare container %s could not be removed: inspect it with docker ps -a and remove it",
			  t->id, t->spare_container ? t->spare_container : "?");
	turn_settle(t);
}

/* A claimed spare ended, or refused its input, before the turn's input reached it: the turn
 * goes on cold instead of failing (issue 15: a crash never loses a turn). The spare's
 * container is removed by name (the turn's end waits for it); its run dir and broker.sock,
 * which brokerd serves for this turn already, stay the turn's and are mounted into the cold
 * container. The spare had no input, so nothing of the turn ran twice. */
static void spare_lost(struct runnerd_turn *t, const char *what)
{
	struct runnerd_turns *ts = t->ts;
	log_warning("turn %s: spare %s %s before its input; the turn starts cold", t->id, t->spare_id, what);
	t->spare_container = steal_pointer(&t->container);
	cleanup_strv char **argv = runnerd_docker_rm_argv(RTS_DOCKER, t->spare_container);
	int r = argv ? ts->ops->spawn(ts->owner, argv, NULL, 0, RUNNERD_RM_OUTPUT_MAX, RUNNERD_RM_TIMEOUT_MS,
				      spare_rm_done, t, &t->spare_rm)
		     : -EINVAL;
	if (r < 0)
		log_error_errno(r, "turn %s: cannot run docker rm -f for spare container %s: %m; inspect it with "
				   "docker ps -a and remove it",
				t->id, t->spare_container);
	t->warm = false;
	t->spawned = false; /* no container of the turn's own yet */
	t->container = rts_container_name(ts->conf.cfg->installation_id, t->id);
}

/* docker run exited: its output decides the outcome, unless one was decided already. */
static void run_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *arg)
{
	struct runnerd_turn *t = arg;
	struct runnerd_turns *ts = t->ts;
	t->run = NULL;
	if (t->warm && !t->fed && !t->ended) {
		spare_lost(t, "ended");
#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
		if (t->feed_hold) {
			timer_stop(t, &t->feed_hold);
			turn_spawn(t);
		}
#endif
		return;
	}
	if (t->ended) {
		/* Killed by a cancellation; its removals decide the rest. How it ended comes from
		 * the kernel's wait status, not from what we meant to send. */
		log_info("%s %s: the docker CLI (pid %ld) %s %d", kind_word(t), t->id, (long)ts->ops->pid(ts->owner, p),
			 r->exited ? "exited with status" : "was ended by signal", r->status);
		turn_settle(t);
		return;
	}
	if (is_precheck(t)) {
		precheck_run_done(t, r);
		return;
	}
	if (r->out_overflow) {
		log_warning("turn %s: the worker wrote more than %u bytes to stdout", t->id, RTS_WORKER_OUTPUT_MAX);
		turn_end(t, RTS_TURN_ERROR, "worker output too large", 2);
		return;
	}
	if (!r->exited || r->status != 0) {
		char line[RUNNERD_STDERR_LOG_MAX + 1];
		rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
		log_warning("turn %s: docker run %s %d: %s", t->id, r->exited ? "exited with status" : "died of signal",
			    r->status, line[0] ? line : "(no stderr)");
		turn_end(t, RTS_TURN_ERROR, "docker run failed", 1);
		return;
	}
	char *reply = NULL;
	switch (runnerd_worker_output_parse(r->out, r->out_len, &reply, t->worker_code)) {
	case RUNNERD_WORKER_REPLY:
		t->reply = reply;
		/* --rm: the CLI returned after the container was removed; nothing to clean. */
		turn_end(t, RTS_TURN_OK, "reply", 0);
		return;
	case RUNNERD_WORKER_GAVE_UP:
		/* The worker paces itself by the time left we gave it; when it runs out first, the
		 * guest should hear the same "timed out" as from our own deadline. */
		turn_end(t, strcmp(t->worker_code, "turn_timeout") == 0 ? RTS_TURN_TIMEOUT : RTS_TURN_ERROR,
			 "worker gave up", 1);
		return;
	case RUNNERD_WORKER_TOO_LONG:
		turn_end(t, RTS_TURN_ERROR, "worker reply longer than the reply limit", 1);
		return;
	case RUNNERD_WORKER_MALFORMED:
		turn_end(t, RTS_TURN_ERROR, "worker output malformed", 1);
		return;
	}
}

/* BINDING -> RUNNING for a precheck: the harness input, docker run of the precheck image
 * with the precheck limits, its empty workspace read-only. */
static void precheck_spawn(struct runnerd_turn *t)
{
	struct runnerd_turns *ts = t->ts;
	const struct rts_config *cfg = ts->conf.cfg;
	const struct rts_precheck *pc = &cfg->precheck;
	cleanup_strv char **approved = NULL;
	int n = rts_precheck_approved_split(t->approved, &approved);
	if (n < 0) {
		/* Checked when PRECHECK_RUN arrived. */
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	/* The tools the script may call, from runnerd's own copy of the grants; brokerd decides
	 * again from its own. */
	struct rts_precheck_pair pairs[RTS_PRECHECK_PAIRS_MAX];
	const struct rts_precheck_grant *g = rts_precheck_grant_find(pc, t->channel, t->target, t->tier);
	size_t n_pairs = rts_precheck_allowed(g, pc->tool_names, approved, (size_t)n, pairs);
	struct runnerd_precheck_input in = {
		.script = t->script,
		.fired_at = t->fired_at,
		.time_zone = t->time_zone,
		.today = t->today,
		.schedule = t->schedule,
		.pairs = pairs,
		.n_pairs = n_pairs,
		.max_calls = pc->max_calls,
	};
	char *input = NULL;
	size_t input_len = 0;
	int r = runnerd_precheck_input(&in, &input, &input_len);
	if (r < 0) {
		log_error_errno(r, "precheck %s: cannot build the harness input: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "precheck input unusable", 0);
		return;
	}
	cleanup_free char *dir = rts_xasprintf("%s/" RTS_PRECHECK_DIR_PREFIX "%s", pc->run_root, t->id);
	cleanup_free char *workspace = rts_xasprintf("%s/" RTS_PRECHECK_WORKSPACE_DIR, dir);
	cleanup_free char *broker_dir = rts_xasprintf("%s/" RTS_PRECHECK_BROKER_DIR, dir);
	struct runnerd_run_spec spec = {
		.kind = RUNNERD_RUN_PRECHECK,
		.docker = RTS_DOCKER,
		.installation_id = cfg->installation_id,
		.turn_id = t->id,
		.channel_hash = t->channel_hash,
		.uid = ts->conf.uid,
		.gid = ts->conf.gid,
		.limits = pc->limits,
		.workspace = workspace,
		.run_dir = broker_dir,
		.image = pc->image,
	};
	cleanup_strv char **argv = runnerd_docker_run_argv(&spec);
	if (!argv) {
		free(input);
		log_error("precheck %s: cannot build the docker run arguments", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	r = ts->ops->spawn(ts->owner, argv, input, input_len, RTS_PRECHECK_OUTPUT_MAX, 0, run_done, t, &t->run);
	if (r < 0) {
		log_error_errno(r, "precheck %s: cannot run %s: %m", t->id, RTS_DOCKER);
		turn_end(t, RTS_TURN_ERROR, "cannot start docker", 0);
		return;
	}
	t->spawned = true;
	t->phase = RUNNERD_TURN_RUNNING;
	log_debug("precheck %s: started container %s with %zu tools", t->id, t->container, n_pairs);
}

/* The worker input of turn t (HACKING.md "Worker input"); 0, or the turn is ended. */
static int turn_input(struct runnerd_turn *t, char **input, size_t *input_len)
{
	struct runnerd_turns *ts = t->ts;
	char now[40];
	int r = rts_format_local_time(time(NULL), now, sizeof(now));
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot format the current time: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return r;
	}
	uint64_t now_ms = ts->ops->now_ms(ts->owner);
	struct runnerd_worker_turn wt = {
		.turn_id = t->id,
		.speaker_id = t->speaker_id,
		.speaker_name = t->speaker_name,
		.text = t->text,
		.attachments = t->attachments,
		.start_fresh = t->start_fresh,
		.time_left_ms = t->deadline_ms > now_ms ? t->deadline_ms - now_ms : 0,
	};
	r = runnerd_worker_input(ts->conf.cfg, ts->conf.public_tools, &wt, now, input, input_len);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot build the worker input: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "worker input too large", 0);
	}
	return r;
}

#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
static void on_feed_hold(void *arg)
{
	struct runnerd_turn *t = arg;
	t->feed_hold = NULL; /* fired */
	turn_spawn(t);
}
#endif

/* A claimed spare gets the input: true once it has it. False: the turn went on cold
 * (spare_lost) or ended, or (test build) the input waits. */
static bool spare_feed(struct runnerd_turn *t, bool *wait)
{
	struct runnerd_turns *ts = t->ts;
	*wait = false;
#ifdef RUNNERD_TEST_SPARE_FEED_HOLD_MS
	/* The test build's seam: the input waits RUNNERD_TEST_SPARE_FEED_HOLD_MS, or until the
	 * spare's CLI ended, so a test can end the spare between the claim and its input. */
	if (!t->held) {
		t->held = true;
		t->phase = RUNNERD_TURN_RUNNING;
		int rr = ts->ops->timer_start(ts->owner, RUNNERD_TEST_SPARE_FEED_HOLD_MS, on_feed_hold, t, &t->feed_hold);
		if (rr < 0)
			turn_end(t, RTS_TURN_ERROR, "internal error", 1);
		*wait = true;
		return false;
	}
#endif
	char *input = NULL;
	size_t input_len = 0;
	if (turn_input(t, &input, &input_len) < 0)
		return false;
	int r = ts->ops->spare_feed(ts->owner, t->run, input, input_len);
	if (r < 0) {
		log_warning_errno(r, "turn %s: cannot hand the input to spare %s: %m", t->id, t->spare_id);
		ts->ops->kill(ts->owner, t->run);
		ts->ops->detach(ts->owner, t->run);
		t->run = NULL;
		spare_lost(t, "took no input");
		return false;
	}
	t->fed = true;
	t->phase = RUNNERD_TURN_RUNNING;
	log_debug("turn %s: input handed to spare container %s", t->id, t->container);
	return true;
}

/* BINDING -> RUNNING: the workspace re-check, the worker input, docker run (or a claimed
 * spare's stdin). */
static void turn_spawn(struct runnerd_turn *t)
{
	struct runnerd_turns *ts = t->ts;
	const struct runnerd_turn_config *c = &ts->conf;
	if (is_precheck(t)) {
		precheck_spawn(t);
		return;
	}
	/* The path statd verified must still name the same directory, so a swapped-in
	 * symlink or directory is never bind-mounted. */
	int r = ts->ops->workspace_check(ts->owner, t->workspace, t->workspace_fd);
	if (r < 0) {
		log_error_errno(r, "turn %s: the workspace is no longer the directory statd verified: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "workspace changed", 0);
		return;
	}
	bool wait;
	if (t->warm && (spare_feed(t, &wait) || wait || t->ended))
		return;
	char *input = NULL;
	size_t input_len = 0;
	if (turn_input(t, &input, &input_len) < 0)
		return;
	cleanup_free char *run_dir = rts_xasprintf("%s/%s", c->cfg->run_root, run_dir_id(t));
	struct runnerd_run_spec spec = {
		.docker = RTS_DOCKER,
		.installation_id = c->cfg->installation_id,
		.turn_id = t->id,
		.channel_hash = t->channel_hash,
		.uid = c->uid,
		.gid = c->gid,
		.limits = c->cfg->limits,
		.workspace = t->workspace,
		.run_dir = run_dir,
		.image = c->cfg->image,
	};
	cleanup_strv char **argv = runnerd_docker_run_argv(&spec);
	if (!argv) {
		free(input);
		log_error("turn %s: cannot build the docker run arguments", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	r = ts->ops->spawn(ts->owner, argv, input, input_len, RTS_WORKER_OUTPUT_MAX, 0, run_done, t, &t->run);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot run %s: %m", t->id, RTS_DOCKER);
		turn_end(t, RTS_TURN_ERROR, "cannot start docker", 0);
		return;
	}
	t->spawned = true;
	t->phase = RUNNERD_TURN_RUNNING;
	/* The fd stays until the end: the channel's next spare is checked against it. */
	log_debug("turn %s: started container %s", t->id, t->container);
}

/* BROKER_WAIT -> BINDING. */
static void turn_send_bind(struct runnerd_turn *t)
{
	struct runnerd_turns *ts = t->ts;
	t->phase = RUNNERD_TURN_BINDING;
	if (is_precheck(t)) {
		t->broker_gen = ts->ops->precheck_bind(ts->owner, &(struct rts_msg_precheck_bind){
									  .precheck_id = t->id,
									  .channel = t->channel,
									  .channel_hash = t->channel_hash,
									  .target = t->target,
									  .tier = t->tier,
									  .approved = t->approved,
									  .deadline_ms = t->deadline_ms,
									  .fd = steal_fd(&t->listen_fd),
								  });
		return;
	}
	t->broker_gen = ts->ops->broker_bind(ts->owner, &(struct rts_msg_broker_bind){
								.turn_id = t->id,
								.channel = t->channel,
								.channel_hash = t->channel_hash,
								.speaker_id = t->speaker_id,
								.speaker_name = t->speaker_name,
								.principal_id = t->principal_id,
								.deadline_ms = t->deadline_ms,
								/* After sending, only brokerd holds it. */
								.fd = steal_fd(&t->listen_fd),
							});
}

void runnerd_turns_broker_up(struct runnerd_turns *ts)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &ts->list, entry)
	if (!t->ended && t->phase == RUNNERD_TURN_BROKER_WAIT)
		turn_send_bind(t);
}

void runnerd_turns_broker_lost(struct runnerd_turns *ts, uint64_t gen, bool connect_failed)
{
	struct runnerd_turn *t;
	bool still_waiting = false;
	TAILQ_FOREACH(t, &ts->list, entry)
	{
		if (t->ended)
			continue;
		if ((gen && t->broker_gen == gen) || (connect_failed && t->phase == RUNNERD_TURN_BROKER_WAIT)) {
			t->broker_gen = 0; /* nothing left to close on a dead link */
			turn_end(t, RTS_TURN_ERROR, "brokerd unavailable", 2);
		} else if (t->phase == RUNNERD_TURN_BROKER_WAIT) {
			still_waiting = true;
		}
	}
	/* HACKING.md: the next use reconnects. */
	if (still_waiting)
		ts->ops->broker_want(ts->owner);
}

void runnerd_turn_bound(struct runnerd_turns *ts, uint64_t gen, const char *turn_id, int32_t result)
{
	struct runnerd_turn *t = runnerd_turn_find(ts, turn_id);
	if (!t || t->ended || t->phase != RUNNERD_TURN_BINDING || t->broker_gen != gen)
		return; /* a late answer for a turn that already ended */
	timer_stop(t, &t->bind_timer);
	if (result < 0) {
		log_warning_errno(result, "%s %s: brokerd refused the binding: %m", kind_word(t), t->id);
		turn_end(t, RTS_TURN_ERROR, "brokerd refused the turn", 0);
		return;
	}
	turn_spawn(t);
}

void runnerd_turn_cancel_id(struct runnerd_turns *ts, struct runnerd_statd *peer, const char *turn_id)
{
	struct runnerd_turn *t = runnerd_turn_find(ts, turn_id);
	if (t && t->peer == peer)
		turn_cancel(t, RTS_TURN_CANCELLED);
}

void runnerd_turns_forget_peer(struct runnerd_turns *ts, struct runnerd_statd *peer)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &ts->list, entry)
	if (t->peer == peer) {
		t->peer = NULL;
		turn_cancel(t, RTS_TURN_CANCELLED);
	}
}

void runnerd_turns_shutdown(struct runnerd_turns *ts)
{
	ts->shutting_down = true;
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &ts->list, entry)
	turn_cancel(t, RTS_TURN_CANCELLED);
	maybe_idle(ts);
}

/* A new turn of kind in BROKER_WAIT, on ts's list; its deadline and run dir come from
 * turn_admit(). */
static struct runnerd_turn *turn_new(struct runnerd_turns *ts, struct runnerd_statd *peer, enum runnerd_turn_kind kind,
				     const char *id, const char *channel, const char *channel_hash)
{
	struct runnerd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->ts = ts;
	t->peer = peer;
	t->kind = kind;
	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->channel_hash, sizeof(t->channel_hash), "%s", channel_hash);
	t->channel = rts_xstrdup(channel);
	t->workspace_fd = -1;
	t->container = rts_container_name(ts->conf.cfg->installation_id, t->id);
	t->listen_fd = -1;
	t->phase = RUNNERD_TURN_BROKER_WAIT;
	runnerd_removal_init(&t->removal, ts->ops, ts->owner, &turn_removal_hooks, t, "turn %s", t->id);
	t->started_ms = ts->ops->now_ms(ts->owner);
	TAILQ_INSERT_TAIL(&ts->list, t, entry);
	ts->n++;
	return t;
}

/* Arm the deadline (timeout_ms from arrival: it covers every step after it), make the run
 * dir with its broker socket, arm the bind timer and ask for the brokerd link. A failure
 * ends the turn (its answer follows from the loop). */
static void turn_admit(struct runnerd_turn *t, uint32_t timeout_ms)
{
	struct runnerd_turns *ts = t->ts;
	const struct runnerd_turn_ops *ops = ts->ops;
	t->deadline_ms = t->started_ms + timeout_ms;
	int r = ops->timer_start(ts->owner, timeout_ms, on_deadline, t, &t->deadline);
	if (r < 0) {
		log_error_errno(r, "%s %s: cannot arm the deadline: %m", kind_word(t), t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	r = t->run_dir_made ? steal_fd(&t->listen_fd) /* a warm spare's */
	    : is_precheck(t) ? ops->precheck_dir_create(ts->owner, t->id)
			     : ops->run_dir_create(ts->owner, t->id);
	if (r < 0) {
		log_error_errno(r, "%s %s: cannot create its run dir and broker socket under %s: %m", kind_word(t), t->id,
				is_precheck(t) ? ts->conf.cfg->precheck.run_root : ts->conf.cfg->run_root);
		turn_end(t, RTS_TURN_ERROR, "cannot create run dir", 0);
		return;
	}
	t->listen_fd = r;
	t->run_dir_made = true;
	r = ops->timer_start(ts->owner, RUNNERD_BIND_TIMEOUT_MS, on_bind_timeout, t, &t->bind_timer);
	if (r < 0) {
		log_error_errno(r, "%s %s: cannot arm the bind timer: %m", kind_word(t), t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	log_debug("%s %s: accepted for channel %.12s", kind_word(t), t->id, t->channel_hash);
	ops->broker_want(ts->owner);
}

static bool str_ok(const char *s)
{
	return rts_utf8_valid(s, strlen(s));
}

/* statd is trusted to be statd, not to be bug-free: every field of TURN_RUN is checked
 * again (the link decoded each within its bounds). */
static bool turn_run_valid(const struct runnerd_turns *ts, const struct rts_msg_turn_run *m, int ws_fd)
{
	char expect[RTS_HASH_HEX_LEN + 1];
	if (!rts_turn_id_valid(m->turn_id) || !m->channel[0])
		return false;
	rts_channel_hash(m->channel, expect);
	if (strcmp(m->channel_hash, expect) != 0 || m->start_fresh > 1 || !str_ok(m->channel) ||
	    !str_ok(m->speaker_id) || !str_ok(m->speaker_name) || !str_ok(m->principal_id) || !str_ok(m->text))
		return false;
	/* The workspace is exactly <workspaceRoot>/<hash>: nothing statd sends can point the
	 * bind mount anywhere else. */
	const char *root = ts->conf.cfg->workspace_root;
	size_t rl = strlen(root);
	if (strncmp(m->workspace, root, rl) != 0 || m->workspace[rl] != '/' ||
	    strcmp(m->workspace + rl + 1, m->channel_hash) != 0)
		return false;
	struct stat st;
	return fstat(ws_fd, &st) == 0 && S_ISDIR(st.st_mode);
}

int runnerd_turn_run(struct runnerd_turns *ts, struct runnerd_statd *peer, struct rts_msg_turn_run *m)
{
	cleanup_close int ws_fd = steal_fd(&m->fd);
	if (!turn_run_valid(ts, m, ws_fd))
		return -EBADMSG;
	/* Turn ids are statd's to make unique; a reused one would share a run dir. */
	if (runnerd_turn_find(ts, m->turn_id))
		return -EBADMSG;

	if (ts->shutting_down || ts->n >= RUNNERD_MAX_TURNS) {
		rts_log_turn(LOG_WARNING, m->turn_id, m->channel_hash, ts->shutting_down ? "cancelled" : "error", 0,
			     "turn refused: %s", ts->shutting_down ? "shutting down" : "too many turns running");
		send_done(ts, peer, m->turn_id, ts->shutting_down ? RTS_TURN_CANCELLED : RTS_TURN_ERROR, NULL);
		return 0;
	}

	struct runnerd_turn *t = turn_new(ts, peer, RUNNERD_KIND_TURN, m->turn_id, m->channel, m->channel_hash);
	t->speaker_id = rts_xstrdup(m->speaker_id);
	t->speaker_name = rts_xstrdup(m->speaker_name);
	t->principal_id = rts_xstrdup(m->principal_id);
	t->text = rts_xstrdup(m->text);
	t->attachments = m->attachments;
	t->start_fresh = m->start_fresh;
	t->workspace = rts_xstrdup(m->workspace);
	t->workspace_fd = steal_fd(&ws_fd);
	struct runnerd_spare_claim claim;
	if (ts->ops->spare_claim &&
	    ts->ops->spare_claim(ts->owner, t->channel_hash, t->workspace_fd, run_done, t, &claim) > 0) {
		t->warm = true;
		snprintf(t->spare_id, sizeof(t->spare_id), "%s", claim.id);
		free(t->container);
		t->container = rts_container_name(ts->conf.cfg->installation_id, claim.id);
		t->listen_fd = claim.listen_fd;
		t->run_dir_made = true;
		t->run = claim.run;
		t->spawned = true;
		log_debug("turn %s: claimed spare %s", t->id, t->spare_id);
	}
	turn_admit(t, ts->conf.cfg->turn_timeout_ms);
	return 0;
}

/* PRECHECK_RUN: every field as statd must have checked it (statd/precheck.c), again. */
static bool precheck_run_valid(const struct rts_msg_precheck_run *m)
{
	char expect[RTS_HASH_HEX_LEN + 1];
	if (!rts_turn_id_valid(m->precheck_id) || !m->channel[0] || !str_ok(m->channel))
		return false;
	rts_channel_hash(m->channel, expect);
	if (strcmp(m->channel_hash, expect) != 0 || !m->target[0] || !str_ok(m->target) || !str_ok(m->tier) ||
	    !m->script[0] || !str_ok(m->script) || !m->schedule[0] || !str_ok(m->schedule) ||
	    !rts_precheck_time_zone_valid(m->time_zone))
		return false;
	int64_t fired_at, today;
	if (rts_precheck_fired_at_parse(m->fired_at, &fired_at) < 0 || rts_precheck_today_parse(m->today, &today) < 0 ||
	    !rts_precheck_today_plausible(today, fired_at))
		return false;
	char **approved = NULL;
	int n = rts_precheck_approved_split(m->approved, &approved);
	rts_strv_free(approved);
	return n >= 0;
}

int runnerd_precheck_run(struct runnerd_turns *ts, struct runnerd_statd *peer, struct rts_msg_precheck_run *m)
{
	if (!precheck_run_valid(m) || runnerd_turn_find(ts, m->precheck_id))
		return -EBADMSG;
	const struct rts_config *cfg = ts->conf.cfg;
	const char *refusal = ts->shutting_down	      ? "shutting down"
			      : ts->n >= RUNNERD_MAX_TURNS ? "too many turns running"
			      : !cfg->has_precheck	      ? "the config has no \"precheck\""
							      : NULL;
	if (refusal) {
		enum rts_turn_status st = ts->shutting_down ? RTS_TURN_CANCELLED : RTS_TURN_ERROR;
		rts_log_turn(LOG_WARNING, m->precheck_id, m->channel_hash, rts_turn_status_word(st), 0, "precheck refused: %s",
			     refusal);
		send_precheck_done(ts, peer, m->precheck_id, st, 0, NULL);
		return 0;
	}
	struct runnerd_turn *t = turn_new(ts, peer, RUNNERD_KIND_PRECHECK, m->precheck_id, m->channel, m->channel_hash);
	t->target = rts_xstrdup(m->target);
	t->tier = rts_xstrdup(m->tier);
	t->approved = rts_xstrdup(m->approved);
	t->script = rts_xstrdup(m->script);
	t->fired_at = rts_xstrdup(m->fired_at);
	t->time_zone = rts_xstrdup(m->time_zone);
	t->today = rts_xstrdup(m->today);
	t->schedule = rts_xstrdup(m->schedule);
	turn_admit(t, cfg->precheck.timeout_ms);
	return 0;
}

unsigned runnerd_turns_containers(const struct runnerd_turns *ts)
{
	unsigned n = 0;
	const struct runnerd_turn *t;
	TAILQ_FOREACH(t, &ts->list, entry)
		if (t->spawned && t->phase != RUNNERD_TURN_FINISHING)
			n++;
	return n;
}
