/* SPDX-License-Identifier: Apache-2.0 */
/* One turn, from TURN_RUN to TURN_DONE (HACKING.md "Turn flow").
 *
 *   BROKER_WAIT  run dir and broker.sock exist; waiting for the brokerd link
 *   BINDING      BROKER_BIND sent; waiting for BROKER_BOUND (RUNNERD_BIND_TIMEOUT_MS)
 *   RUNNING      docker run -i is running; its stdout is the reply
 *   ENDING       outcome decided: BROKER_CLOSE sent, the CLI killed if it still runs,
 *                docker rm -f as needed; then the run dir goes and TURN_DONE is sent
 *
 * A turn is only ever freed from an event-loop callback of its own (a child, a timer or
 * its finish source), never from inside a message handler that still holds it, so
 * cancelling is safe from anywhere. */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/runnerd.h"
#include "runnerd/worker_io.h"

enum turn_phase {
	TURN_BROKER_WAIT,
	TURN_BINDING,
	TURN_RUNNING,
	TURN_ENDING,
};

struct runnerd_turn {
	TAILQ_ENTRY(runnerd_turn) entry;
	struct runnerd *rd;
	struct runnerd_statd *peer; /* NULL once statd went away: no TURN_DONE then */

	char id[RTS_TURN_ID_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char *channel;
	char *speaker_id, *speaker_name, *principal_id;
	char *text;
	uint32_t attachments;
	bool start_fresh;
	char *workspace;
	int workspace_fd; /* O_PATH fd statd verified; compared with lstat before docker run */
	char *container;

	int listen_fd;	     /* broker.sock listener until it travels in BROKER_BIND */
	bool run_dir_made;
	uint64_t broker_gen; /* link generation BROKER_BIND went out on; 0: none (or closed) */

	enum turn_phase phase;
	uint64_t started_ms, deadline_ms;
	sd_event_source *deadline_src, *bind_src, *rm_delay_src, *finish_src;
	struct runnerd_proc *run, *rm;
	bool spawned;		 /* docker run was started: a container may exist */
	unsigned rm_rounds_left; /* docker rm -f still to run */
	bool rm_extra_round;	 /* one more was added after "removal already in progress" */

	enum rts_turn_status status;
	const char *why; /* short reason for the log line; never guest data */
	char worker_code[RTS_WORKER_ERROR_CODE_MAX + 1];
	char *reply;
	bool cleanup_failed;
};

static const char *outcome_word(enum rts_turn_status s)
{
	switch (s) {
	case RTS_TURN_OK:
		return "ok";
	case RTS_TURN_TIMEOUT:
		return "timeout";
	case RTS_TURN_CANCELLED:
		return "cancelled";
	case RTS_TURN_CLEANUP_FAILED:
		return "cleanup_failed";
	case RTS_TURN_ERROR:
	default:
		return "error";
	}
}

static struct runnerd_turn *turn_find(struct runnerd *rd, const char *id)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &rd->turns, entry)
	if (strcmp(t->id, id) == 0)
		return t;
	return NULL;
}

static void turn_free(struct runnerd_turn *t)
{
	t->deadline_src = sd_event_source_disable_unref(t->deadline_src);
	t->bind_src = sd_event_source_disable_unref(t->bind_src);
	t->rm_delay_src = sd_event_source_disable_unref(t->rm_delay_src);
	t->finish_src = sd_event_source_disable_unref(t->finish_src);
	/* Children outlive the turn only if they refused to die; they reap themselves. */
	if (t->run)
		runnerd_proc_detach(t->run);
	if (t->rm)
		runnerd_proc_detach(t->rm);
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
	free(t->reply);
	free(t);
}

static void send_done(struct runnerd_statd *peer, const char *id, enum rts_turn_status status, const char *reply)
{
	int r = rts_link_send_turn_done(peer->link, &(struct rts_msg_turn_done){
							    .turn_id = id,
							    .status = (uint32_t)status,
							    .reply = status == RTS_TURN_OK && reply ? reply : "",
						    });
	if (r < 0)
		log_warning_errno(r, "cannot send the result of turn %s to statd: %m", id);
}

/* Last step: run dir gone, statd answered, one log line. */
static void turn_finish(struct runnerd_turn *t)
{
	struct runnerd *rd = t->rd;
	if (t->listen_fd >= 0)
		close(steal_fd(&t->listen_fd));
	if (t->run_dir_made) {
		int r = runnerd_run_dir_remove(rd, t->id);
		if (r < 0)
			log_warning_errno(r, "cannot remove the run dir of turn %s: %m", t->id);
	}
	if (t->cleanup_failed)
		t->status = RTS_TURN_CLEANUP_FAILED;
	if (t->status != RTS_TURN_OK) {
		free(t->reply);
		t->reply = NULL;
	}
	uint64_t ms = rts_now_ms() - t->started_ms;
	ms = ms ? ms : 1;
	const char *why = t->why ? t->why : "-";
	if (t->cleanup_failed)
		/* The one generic line that asks the operator to look (seed: a cleanup failure
		 * ends the turn and asks for inspection instead of hanging the queue). */
		rts_log_turn(LOG_ERR, t->id, t->channel_hash, "cleanup_failed", ms,
			     "turn finished (%s) but container %s could not be removed: inspect it with "
			     "docker ps -a and remove it",
			     why, t->container);
	else if (t->worker_code[0])
		rts_log_turn(LOG_WARNING, t->id, t->channel_hash, outcome_word(t->status), ms,
			     "turn finished: %s (worker code %s)", why, t->worker_code);
	else
		rts_log_turn(t->status == RTS_TURN_OK		? LOG_INFO
			     : t->status == RTS_TURN_CANCELLED ? LOG_NOTICE
							       : LOG_WARNING,
			     t->id, t->channel_hash, outcome_word(t->status), ms, "turn finished: %s%s", why,
			     t->peer ? "" : " (statd gone, not answered)");
	/* After the log line: whoever hears the outcome finds it logged already. */
	if (t->peer)
		send_done(t->peer, t->id, t->status, t->reply);

	TAILQ_REMOVE(&rd->turns, t, entry);
	rd->n_turns--;
	turn_free(t);
	runnerd_maybe_exit(rd);
}

static int on_finish(sd_event_source *s, void *userdata)
{
	turn_finish(userdata);
	return 0;
}

static void turn_schedule_finish(struct runnerd_turn *t)
{
	if (t->finish_src)
		return;
	int r = sd_event_add_defer(t->rd->event, &t->finish_src, on_finish, t);
	if (r < 0)
		fatal_f("cannot schedule the end of turn %s: %s", t->id, strerror(-r));
}

/* Done when no child of ours runs and no removal is pending. A docker CLI that was
 * SIGKILLed but is not reaped yet does not hold the turn once the removals are over. */
static void turn_maybe_finish(struct runnerd_turn *t)
{
	if (t->phase != TURN_ENDING || t->rm || t->rm_delay_src || t->rm_rounds_left > 0)
		return;
	if (t->run) {
		/* Already SIGKILLed by turn_end; it reaps itself whenever the kernel lets go. */
		runnerd_proc_kill(t->run);
		runnerd_proc_detach(t->run);
		t->run = NULL;
	}
	turn_schedule_finish(t);
}

static void turn_start_removal(struct runnerd_turn *t);

static int on_rm_delay(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd_turn *t = userdata;
	t->rm_delay_src = sd_event_source_disable_unref(t->rm_delay_src);
	turn_start_removal(t);
	return 0;
}

static void rm_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct runnerd_turn *t = userdata;
	t->rm = NULL;
	/* "No such container" is what we want: it is gone (the CLI says so with status 0 or
	 * 1 depending on its version). */
	bool gone = !r->killed && r->exited && (r->status == 0 || strstr(r->err, "No such container"));
	/* dockerd is already removing it (--rm after the CLI was killed): only a later
	 * removal can confirm it is gone, so make sure one follows. */
	bool in_progress = !gone && !r->killed && r->exited && strstr(r->err, "already in progress");
	if (in_progress && t->rm_rounds_left == 0 && !t->rm_extra_round) {
		t->rm_extra_round = true;
		t->rm_rounds_left = 1;
	}
	if (!gone && (!in_progress || t->rm_rounds_left == 0)) {
		char line[RUNNERD_STDERR_LOG_MAX + 1];
		runnerd_first_line(r->err, r->err_len, line);
		if (r->timed_out)
			log_warning("turn %s: docker rm -f did not finish within %u ms", t->id, RUNNERD_RM_TIMEOUT_MS);
		else
			log_warning("turn %s: docker rm -f failed (%s %d): %s", t->id, r->exited ? "status" : "signal",
				    r->status, line);
		t->cleanup_failed = true;
		/* The daemon is not cooperating: another try would only hold up the queue. */
		t->rm_rounds_left = 0;
	} else {
		/* The last removal decides: an earlier "in progress" is settled by a later one. */
		t->cleanup_failed = false;
	}
	if (t->rm_rounds_left > 0) {
		int rr = sd_event_add_time_relative(t->rd->event, &t->rm_delay_src, CLOCK_MONOTONIC,
						    RUNNERD_RM_SECOND_DELAY_MS * 1000, 10 * 1000, on_rm_delay, t);
		if (rr < 0) {
			log_error_errno(rr, "turn %s: cannot schedule the next removal: %m", t->id);
			t->cleanup_failed = true;
			t->rm_rounds_left = 0;
		}
	}
	turn_maybe_finish(t);
}

static void turn_start_removal(struct runnerd_turn *t)
{
	struct runnerd *rd = t->rd;
	if (t->rm_rounds_left == 0) {
		turn_maybe_finish(t);
		return;
	}
	t->rm_rounds_left--;
	cleanup_strv char **argv = runnerd_docker_rm_argv(RTS_DOCKER, t->container);
	int r = argv ? runnerd_proc_spawn(rd->event, argv, rd->child_env, NULL, 0, RUNNERD_RM_OUTPUT_MAX,
					  RUNNERD_RM_TIMEOUT_MS, rm_done, t, &t->rm)
		     : -EINVAL;
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot run docker rm -f: %m", t->id);
		t->cleanup_failed = true;
		t->rm_rounds_left = 0;
	}
	turn_maybe_finish(t);
}

/* Decide the outcome and start the clean-up: BROKER_CLOSE, kill the CLI, remove the
 * container rm_rounds times (1 s apart). Idempotent: the first outcome wins. */
static void turn_end(struct runnerd_turn *t, enum rts_turn_status status, const char *why, unsigned rm_rounds)
{
	struct runnerd *rd = t->rd;
	if (t->phase == TURN_ENDING)
		return;
	t->phase = TURN_ENDING;
	t->status = status;
	t->why = why;
	t->deadline_src = sd_event_source_disable_unref(t->deadline_src);
	t->bind_src = sd_event_source_disable_unref(t->bind_src);

	/* brokerd aborts in-flight upstream calls and tool processes; its BROKER_CLOSED is
	 * not waited for. */
	if (t->broker_gen && t->broker_gen == rd->broker.gen)
		(void)rts_link_send_broker_close(rd->broker.link, &(struct rts_msg_broker_close){.turn_id = t->id});
	t->broker_gen = 0;

	if (t->run)
		runnerd_proc_kill(t->run);
	t->rm_rounds_left = t->spawned ? rm_rounds : 0;
	turn_start_removal(t);
}

void runnerd_turn_cancel(struct runnerd_turn *t, enum rts_turn_status status)
{
	const char *why = status == RTS_TURN_TIMEOUT     ? "deadline reached"
			  : status == RTS_TURN_CANCELLED ? "cancelled"
							 : "failed";
	/* Kill, remove, then remove again for the create/attach race (HACKING.md step 4). */
	turn_end(t, status, why, 2);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd_turn *t = userdata;
	t->deadline_src = sd_event_source_disable_unref(t->deadline_src);
	runnerd_turn_cancel(t, RTS_TURN_TIMEOUT);
	return 0;
}

static int on_bind_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd_turn *t = userdata;
	t->bind_src = sd_event_source_disable_unref(t->bind_src);
	log_warning("turn %s: brokerd did not bind the turn within %u ms", t->id, RUNNERD_BIND_TIMEOUT_MS);
	turn_end(t, RTS_TURN_ERROR, "brokerd did not bind in time", 0);
	return 0;
}

static void run_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct runnerd_turn *t = userdata;
	t->run = NULL;
	if (t->phase == TURN_ENDING) {
		/* Killed by a cancellation; its removals decide the rest. How it ended comes from
		 * the kernel's wait status, not from what we meant to send. */
		log_info("turn %s: the docker CLI (pid %ld) %s %d", t->id, (long)runnerd_proc_pid(p),
			 r->exited ? "exited with status" : "was ended by signal", r->status);
		turn_maybe_finish(t);
		return;
	}
	if (r->out_overflow) {
		log_warning("turn %s: the worker wrote more than %u bytes to stdout", t->id, RTS_WORKER_OUTPUT_MAX);
		turn_end(t, RTS_TURN_ERROR, "worker output too large", 2);
		return;
	}
	if (!r->exited || r->status != 0) {
		char line[RUNNERD_STDERR_LOG_MAX + 1];
		runnerd_first_line(r->err, r->err_len, line);
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

/* Right before docker run: the path statd verified must still name the same directory,
 * so a swapped-in symlink or directory is never bind-mounted. */
static int workspace_still_same(const struct runnerd_turn *t)
{
	struct stat a, b;
	if (lstat(t->workspace, &a) < 0)
		return -errno;
	if (fstat(t->workspace_fd, &b) < 0)
		return -errno;
	if (!S_ISDIR(a.st_mode) || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -ESTALE;
	return 0;
}

static void turn_spawn(struct runnerd_turn *t)
{
	struct runnerd *rd = t->rd;
	int r = workspace_still_same(t);
	if (r < 0) {
		log_error_errno(r, "turn %s: the workspace is no longer the directory statd verified: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "workspace changed", 0);
		return;
	}
	char now[40];
	r = runnerd_format_now(time(NULL), now, sizeof(now));
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot format the current time: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	struct runnerd_worker_turn wt = {
		.turn_id = t->id,
		.speaker_id = t->speaker_id,
		.speaker_name = t->speaker_name,
		.text = t->text,
		.attachments = t->attachments,
		.start_fresh = t->start_fresh,
		.time_left_ms = t->deadline_ms > rts_now_ms() ? t->deadline_ms - rts_now_ms() : 0,
	};
	char *input = NULL;
	size_t input_len = 0;
	r = runnerd_worker_input(rd->cfg, rd->public_tools, &wt, now, &input, &input_len);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot build the worker input: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "worker input too large", 0);
		return;
	}
	cleanup_free char *run_dir = rts_xasprintf("%s/%s", rd->cfg->run_root, t->id);
	struct runnerd_run_spec spec = {
		.docker = RTS_DOCKER,
		.installation_id = rd->cfg->installation_id,
		.turn_id = t->id,
		.channel_hash = t->channel_hash,
		.uid = rd->uid,
		.gid = rd->gid,
		.limits = rd->cfg->limits,
		.workspace = t->workspace,
		.run_dir = run_dir,
		.image = rd->cfg->image,
	};
	cleanup_strv char **argv = runnerd_docker_run_argv(&spec);
	if (!argv) {
		free(input);
		log_error("turn %s: cannot build the docker run arguments", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return;
	}
	r = runnerd_proc_spawn(rd->event, argv, rd->child_env, input, input_len, RTS_WORKER_OUTPUT_MAX, 0, run_done, t,
			       &t->run);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot run %s: %m", t->id, RTS_DOCKER);
		turn_end(t, RTS_TURN_ERROR, "cannot start docker", 0);
		return;
	}
	t->spawned = true;
	t->phase = TURN_RUNNING;
	/* The container has its own view of the workspace now; the fd is no longer needed. */
	close(steal_fd(&t->workspace_fd));
	log_debug("turn %s: started container %s", t->id, t->container);
}

static void turn_send_bind(struct runnerd_turn *t)
{
	struct runnerd *rd = t->rd;
	struct rts_msg_broker_bind m = {
		.turn_id = t->id,
		.channel = t->channel,
		.channel_hash = t->channel_hash,
		.speaker_id = t->speaker_id,
		.speaker_name = t->speaker_name,
		.principal_id = t->principal_id,
		.deadline_ms = t->deadline_ms,
		/* The message owns the listener from here; after sending, only brokerd holds it. */
		.fd = steal_fd(&t->listen_fd),
	};
	t->broker_gen = rd->broker.gen;
	t->phase = TURN_BINDING;
	/* A send failure fails the link, and the link's loss fails this turn. */
	(void)rts_link_send_broker_bind(rd->broker.link, &m);
}

void runnerd_turns_link_up(struct runnerd *rd)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &rd->turns, entry)
	if (t->phase == TURN_BROKER_WAIT)
		turn_send_bind(t);
}

void runnerd_turns_link_lost(struct runnerd *rd, uint64_t gen, bool waiting_too)
{
	struct runnerd_turn *t;
	bool still_waiting = false;
	TAILQ_FOREACH(t, &rd->turns, entry)
	{
		if (t->phase == TURN_ENDING)
			continue;
		if ((gen && t->broker_gen == gen) || (waiting_too && t->phase == TURN_BROKER_WAIT)) {
			t->broker_gen = 0; /* nothing left to close on a dead link */
			turn_end(t, RTS_TURN_ERROR, "brokerd unavailable", 2);
		} else if (t->phase == TURN_BROKER_WAIT) {
			still_waiting = true;
		}
	}
	/* HACKING.md: the next use reconnects. */
	if (still_waiting)
		runnerd_broker_want(rd);
}

void runnerd_turn_bound(struct runnerd *rd, const char *turn_id, int32_t result)
{
	struct runnerd_turn *t = turn_find(rd, turn_id);
	if (!t || t->phase != TURN_BINDING || t->broker_gen != rd->broker.gen)
		return; /* a late answer for a turn that already ended */
	t->bind_src = sd_event_source_disable_unref(t->bind_src);
	if (result < 0) {
		log_warning_errno(result, "turn %s: brokerd refused the binding: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "brokerd refused the turn", 0);
		return;
	}
	turn_spawn(t);
}

void runnerd_turn_cancel_id(struct runnerd *rd, struct runnerd_statd *peer, const char *turn_id)
{
	struct runnerd_turn *t = turn_find(rd, turn_id);
	if (t && t->peer == peer)
		runnerd_turn_cancel(t, RTS_TURN_CANCELLED);
}

void runnerd_turns_forget_peer(struct runnerd *rd, struct runnerd_statd *peer)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &rd->turns, entry)
	if (t->peer == peer) {
		t->peer = NULL;
		runnerd_turn_cancel(t, RTS_TURN_CANCELLED);
	}
}

void runnerd_turns_cancel_all(struct runnerd *rd)
{
	struct runnerd_turn *t;
	TAILQ_FOREACH(t, &rd->turns, entry)
	runnerd_turn_cancel(t, RTS_TURN_CANCELLED);
}

void runnerd_maybe_exit(struct runnerd *rd)
{
	if (rd->shutting_down && rd->n_turns == 0)
		sd_event_exit(rd->event, 0);
}

static bool str_ok(const char *s)
{
	return rts_utf8_valid(s, strlen(s));
}

int runnerd_turn_run(struct runnerd *rd, struct runnerd_statd *peer, struct rts_msg_turn_run *m)
{
	/* The link decoded every field within its bounds; the rest is checked here. */
	const char *id = m->turn_id, *channel = m->channel, *hash = m->channel_hash, *speaker_id = m->speaker_id,
		   *speaker_name = m->speaker_name, *principal_id = m->principal_id, *text = m->text,
		   *workspace = m->workspace;
	uint32_t attachments = m->attachments;
	uint8_t start_fresh = m->start_fresh;
	cleanup_close int ws_fd = steal_fd(&m->fd);

	/* statd is trusted to be statd, not to be bug-free: everything is checked again. */
	char expect[RTS_HASH_HEX_LEN + 1];
	if (!rts_turn_id_valid(id) || !channel[0])
		return -EBADMSG;
	rts_channel_hash(channel, expect);
	if (strcmp(hash, expect) != 0 || start_fresh > 1 || !str_ok(channel) || !str_ok(speaker_id) ||
	    !str_ok(speaker_name) || !str_ok(principal_id) || !str_ok(text))
		return -EBADMSG;
	/* The workspace is exactly <workspaceRoot>/<hash>: nothing statd sends can point the
	 * bind mount anywhere else. */
	size_t rl = strlen(rd->cfg->workspace_root);
	if (strncmp(workspace, rd->cfg->workspace_root, rl) != 0 || workspace[rl] != '/' ||
	    strcmp(workspace + rl + 1, hash) != 0)
		return -EBADMSG;
	struct stat st;
	if (fstat(ws_fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return -EBADMSG;
	/* Turn ids are statd's to make unique; a reused one would share a run dir. */
	if (turn_find(rd, id))
		return -EBADMSG;

	if (rd->shutting_down || rd->n_turns >= RUNNERD_MAX_TURNS) {
		rts_log_turn(LOG_WARNING, id, hash, rd->shutting_down ? "cancelled" : "error", 0,
			     "turn refused: %s", rd->shutting_down ? "shutting down" : "too many turns running");
		send_done(peer, id, rd->shutting_down ? RTS_TURN_CANCELLED : RTS_TURN_ERROR, NULL);
		return 0;
	}

	struct runnerd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->rd = rd;
	t->peer = peer;
	memcpy(t->id, id, sizeof(t->id));
	memcpy(t->channel_hash, hash, sizeof(t->channel_hash));
	t->channel = rts_xstrdup(channel);
	t->speaker_id = rts_xstrdup(speaker_id);
	t->speaker_name = rts_xstrdup(speaker_name);
	t->principal_id = rts_xstrdup(principal_id);
	t->text = rts_xstrdup(text);
	t->attachments = attachments;
	t->start_fresh = start_fresh;
	t->workspace = rts_xstrdup(workspace);
	t->workspace_fd = steal_fd(&ws_fd);
	t->container = rts_container_name(rd->cfg->installation_id, id);
	t->listen_fd = -1;
	t->phase = TURN_BROKER_WAIT;
	t->started_ms = rts_now_ms();
	t->deadline_ms = t->started_ms + rd->cfg->turn_timeout_ms;
	TAILQ_INSERT_TAIL(&rd->turns, t, entry);
	rd->n_turns++;

	/* The deadline runs from arrival and covers every step after it. */
	int r = sd_event_add_time(rd->event, &t->deadline_src, CLOCK_MONOTONIC, t->deadline_ms * 1000, 10 * 1000,
				  on_deadline, t);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm the deadline: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return 0;
	}
	r = runnerd_run_dir_create(rd, t->id);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot create its run dir and broker socket under %s: %m", t->id,
				rd->cfg->run_root);
		turn_end(t, RTS_TURN_ERROR, "cannot create run dir", 0);
		return 0;
	}
	t->listen_fd = r;
	t->run_dir_made = true;
	r = sd_event_add_time_relative(rd->event, &t->bind_src, CLOCK_MONOTONIC, RUNNERD_BIND_TIMEOUT_MS * 1000,
				       10 * 1000, on_bind_timeout, t);
	if (r < 0) {
		log_error_errno(r, "turn %s: cannot arm the bind timer: %m", t->id);
		turn_end(t, RTS_TURN_ERROR, "internal error", 0);
		return 0;
	}
	log_debug("turn %s: accepted for channel %.12s", t->id, t->channel_hash);
	runnerd_broker_want(rd);
	return 0;
}
