/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's turns (runnerd/turn.h), driven through their inputs with recording ops, fake
 * docker CLI children and a fake clock: no Docker, no sockets, no root.
 *
 * Every test also checks that nothing is left behind: no timer, no fd, no child the
 * machine still waits for, and that TURN_DONE never leaves from inside an input (only
 * from the loop, fake_run()). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "runnerd/turn.h"
#include "tests/unit/machine_rig.h"
#include "tests/unit/seqpacket_rig.h"

#define T1 "0000000000000001"
#define T2 "0000000000000002"
#define CHANNEL "guild-1/general"

/* The statd connections turns belong to: only their addresses matter. */
struct runnerd_statd {
	char name[8];
};
static struct runnerd_statd peer1 = {"p1"}, peer2 = {"p2"};

/* A docker CLI child that never runs: the test ends it with finish(). */
struct runnerd_proc {
	struct runnerd_proc *next;
	bool is_run; /* docker run (else docker rm -f) */
	char *input;
	size_t input_len;
	size_t out_max;
	uint64_t timeout_ms;
	runnerd_proc_done_t done;
	void *arg;
	bool killed, detached, exited;
};

static struct {
	/* behaviour of the fakes */
	int run_dir_result;	  /* < 0: run_dir_create fails with it */
	int run_dir_remove_result;
	int workspace_result;	  /* what workspace_check returns */
	int spawn_run_result;	  /* < 0: spawning docker run fails with it */
	int spawn_rm_result;	  /* < 0: spawning docker rm fails with it */
	bool broker_up_at_once;	  /* broker_want finds the link up */
	uint64_t gen;		  /* the current brokerd link generation */

	/* what happened */
	struct runnerd_proc *procs;
	char **run_argv; /* the last docker run command line */
	unsigned idles;
	bool in_input; /* an input of the machine is running */
} fk;

static struct rts_config *cfg;
static json_object *public_tools;
static struct runnerd_turns ts;
static int fds_at_start;

/* "t1" for T1: turn ids in log lines. */
static const char *tname(const char *id)
{
	static char buf[8];
	snprintf(buf, sizeof(buf), "t%c", id[RTS_TURN_ID_LEN - 1]);
	return buf;
}

static const char *status_name(uint32_t s)
{
	static const char *const names[] = {
		[RTS_TURN_OK] = "ok",
		[RTS_TURN_ERROR] = "error",
		[RTS_TURN_TIMEOUT] = "timeout",
		[RTS_TURN_CANCELLED] = "cancelled",
		[RTS_TURN_CLEANUP_FAILED] = "cleanup_failed",
	};
	return s < RTS_ARRAY_SIZE(names) ? names[s] : "?";
}

/* ---- the ops ---- */

static int op_run_dir_create(void *owner, const char *turn_id)
{
	if (fk.run_dir_result < 0)
		return fk.run_dir_result;
	rig_logf("mkdir %s", tname(turn_id));
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* stands for the listening broker.sock */
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int op_run_dir_remove(void *owner, const char *turn_id)
{
	rig_logf("rmdir %s", tname(turn_id));
	return fk.run_dir_remove_result;
}

static int op_workspace_check(void *owner, const char *path, int fd)
{
	ck_assert_int_ge(fcntl(fd, F_GETFD), 0);
	rig_logf("wscheck");
	return fk.workspace_result;
}

static int op_spawn(void *owner, char *const argv[], char *input, size_t input_len, size_t out_max,
		    uint64_t timeout_ms, runnerd_proc_done_t done, void *arg, struct runnerd_proc **ret)
{
	ck_assert_str_eq(argv[0], RTS_DOCKER);
	bool is_run = strcmp(argv[1], "run") == 0;
	int r = is_run ? fk.spawn_run_result : fk.spawn_rm_result;
	if (r < 0) {
		free(input);
		return r;
	}
	if (is_run) {
		rts_strv_free(fk.run_argv);
		fk.run_argv = rts_strv_dup(argv);
		rig_logf("spawn run");
	} else {
		ck_assert_str_eq(argv[1], "rm");
		ck_assert_str_eq(argv[2], "-f");
		rig_logf("spawn rm %s", argv[3]);
	}
	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	*p = (struct runnerd_proc){.next = fk.procs, .is_run = is_run, .input = input, .input_len = input_len,
				   .out_max = out_max, .timeout_ms = timeout_ms, .done = done, .arg = arg};
	fk.procs = p;
	*ret = p;
	return 0;
}

static void op_kill(void *owner, struct runnerd_proc *p)
{
	ck_assert(!p->exited);
	if (!p->killed)
		rig_logf("kill %s", p->is_run ? "run" : "rm");
	p->killed = true;
}

static void op_detach(void *owner, struct runnerd_proc *p)
{
	ck_assert(!p->exited);
	p->detached = true;
}

static pid_t op_pid(void *owner, const struct runnerd_proc *p)
{
	return 4242;
}

static void op_broker_want(void *owner)
{
	rig_logf("want");
	if (fk.broker_up_at_once)
		runnerd_turns_broker_up(&ts);
}

static uint64_t op_broker_bind(void *owner, const struct rts_msg_broker_bind *m)
{
	ck_assert_int_ge(m->fd, 0);
	close(m->fd);
	ck_assert_str_eq(m->channel, CHANNEL);
	ck_assert_str_eq(m->principal_id, "p42");
	rig_logf("bind %s gen=%llu", tname(m->turn_id), (unsigned long long)fk.gen);
	return fk.gen;
}

static void op_broker_close(void *owner, uint64_t gen, const char *turn_id)
{
	rig_logf("close %s gen=%llu", tname(turn_id), (unsigned long long)gen);
}

static void op_turn_done(void *owner, struct runnerd_statd *peer, const struct rts_msg_turn_done *m)
{
	ck_assert_msg(!fk.in_input, "TURN_DONE from inside an input");
	ck_assert(m->status == RTS_TURN_OK || !*m->reply);
	rig_logf("done %s %s %s%s%s", peer->name, tname(m->turn_id), status_name(m->status), *m->reply ? " " : "",
	      m->reply);
}

/* Prechecks: the same machine, another kind of run dir, bind and answer. */
static int op_precheck_dir_create(void *owner, const char *id)
{
	if (fk.run_dir_result < 0)
		return fk.run_dir_result;
	rig_logf("pc mkdir %s", tname(id));
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int op_precheck_dir_remove(void *owner, const char *id)
{
	rig_logf("pc rmdir %s", tname(id));
	return fk.run_dir_remove_result;
}

static uint64_t op_precheck_bind(void *owner, const struct rts_msg_precheck_bind *m)
{
	ck_assert_int_ge(m->fd, 0);
	close(m->fd);
	ck_assert_str_eq(m->channel, CHANNEL);
	rig_logf("pc bind %s gen=%llu target=%s tier=%s approved=%s", tname(m->precheck_id),
		 (unsigned long long)fk.gen, m->target, m->tier, m->approved);
	return fk.gen;
}

static void op_precheck_done(void *owner, struct runnerd_statd *peer, const struct rts_msg_precheck_done *m)
{
	ck_assert(m->status == RTS_TURN_OK || (!*m->text && m->answer == 0));
	if (m->status == RTS_TURN_OK)
		rig_logf("pc done %s %s ok %u%s%s", peer->name, tname(m->precheck_id), m->answer, *m->text ? " " : "",
			 m->text);
	else
		rig_logf("pc done %s %s %s", peer->name, tname(m->precheck_id), status_name(m->status));
}

static void op_idle(void *owner)
{
	fk.idles++;
	rig_logf("idle");
}

static const struct runnerd_turn_ops ops = {
	.now_ms = rig_op_now_ms,
	.timer_start = rig_op_timer_start,
	.timer_stop = rig_op_timer_stop,
	.run_dir_create = op_run_dir_create,
	.run_dir_remove = op_run_dir_remove,
	.workspace_check = op_workspace_check,
	.spawn = op_spawn,
	.kill = op_kill,
	.detach = op_detach,
	.pid = op_pid,
	.broker_want = op_broker_want,
	.broker_bind = op_broker_bind,
	.broker_close = op_broker_close,
	.turn_done = op_turn_done,
	.precheck_dir_create = op_precheck_dir_create,
	.precheck_dir_remove = op_precheck_dir_remove,
	.precheck_bind = op_precheck_bind,
	.precheck_done = op_precheck_done,
	.idle = op_idle,
};

/* ---- the rig ---- */

static const char *config_doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\"}";

static void setup(void)
{
	rts_log_set_max_priority(LOG_EMERG); /* the log lines are the integration tests' */
	memset(&fk, 0, sizeof(fk));
	fk.gen = 1;
	fake_timers_reset();
	char err[512];
	cleanup_json json_object *o = NULL;
	const char *why;
	const char *doc = config_doc;
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 16, &o, &why), 0);
	cfg = rts_config_from_json(o, "test.json", err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	public_tools = rts_config_public_tools(cfg);
	fds_at_start = rig_count_open_fds();
	runnerd_turns_init(&ts, &ops, NULL,
			   &(struct runnerd_turn_config){.cfg = cfg, .public_tools = public_tools, .uid = 1000, .gid = 1000});
}

static void teardown(void)
{
	ck_assert_uint_eq(ts.n, 0);
	ck_assert_uint_eq(fake_timers_pending(), 0);
	/* Every child either exited or was given up (detached) by its turn. */
	for (struct runnerd_proc *p = fk.procs, *next; p; p = next) {
		next = p->next;
		ck_assert(p->exited || p->detached);
		free(p->input);
		free(p);
	}
	ck_assert_int_eq(rig_count_open_fds(), fds_at_start);
	rig_log_reset();
	rts_strv_free(fk.run_argv);
	json_object_put(public_tools);
	rts_config_free(cfg);
}

/* A TURN_RUN as statd sends it, for channel CHANNEL; mutate may break it. */
struct turn_run {
	char hash[RTS_HASH_HEX_LEN + 1];
	char *workspace;
	struct rts_msg_turn_run m;
};

static void turn_run_init(struct turn_run *tr, const char *id)
{
	rts_channel_hash(CHANNEL, tr->hash);
	tr->workspace = rts_xasprintf("%s/%s", cfg->workspace_root, tr->hash);
	tr->m = (struct rts_msg_turn_run){
		.turn_id = id,
		.channel = CHANNEL,
		.channel_hash = tr->hash,
		.speaker_id = "42",
		.speaker_name = "Alice",
		.principal_id = "p42",
		.text = "what is the door code?",
		.workspace = tr->workspace,
		.fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), /* a directory: statd's verified fd */
	};
	ck_assert_int_ge(tr->m.fd, 0);
}

/* Give the machine an input, checking it sends no TURN_DONE from inside it. */
#define INPUT(call)                     \
	do {                            \
		fk.in_input = true;     \
		call;                   \
		fk.in_input = false;    \
	} while (0)

static int run_msg(struct runnerd_statd *peer, struct turn_run *tr)
{
	int r;
	INPUT(r = runnerd_turn_run(&ts, peer, &tr->m));
	ck_assert_int_eq(tr->m.fd, -1); /* taken, whatever the outcome */
	free(tr->workspace);
	return r;
}

static void start(struct runnerd_statd *peer, const char *id)
{
	struct turn_run tr;
	turn_run_init(&tr, id);
	ck_assert_int_eq(run_msg(peer, &tr), 0);
}

static enum runnerd_turn_phase phase(const char *id)
{
	struct runnerd_turn *t = runnerd_turn_find(&ts, id);
	ck_assert_msg(t != NULL, "turn %s is gone", id);
	return runnerd_turn_phase(t);
}

static void broker_up(void)
{
	INPUT(runnerd_turns_broker_up(&ts));
}

static void bound(const char *id, int32_t result)
{
	INPUT(runnerd_turn_bound(&ts, fk.gen, id, result));
}

/* T1 from TURN_RUN to phase p (BROKER_WAIT, BINDING or RUNNING). */
static void drive_to(enum runnerd_turn_phase p)
{
	start(&peer1, T1);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BROKER_WAIT);
	if (p >= RUNNERD_TURN_BINDING) {
		broker_up();
		ck_assert_int_eq(phase(T1), RUNNERD_TURN_BINDING);
	}
	if (p >= RUNNERD_TURN_RUNNING) {
		bound(T1, 0);
		ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
	}
}

/* The live child of that kind (the newest). */
static struct runnerd_proc *child(bool is_run)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (p->is_run == is_run && !p->exited && !p->detached)
			return p;
	ck_abort_msg("no live docker %s", is_run ? "run" : "rm");
	return NULL;
}

/* The newest child of that kind, live or not. */
static struct runnerd_proc *last_child(bool is_run)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (p->is_run == is_run)
			return p;
	ck_abort_msg("no docker %s ever", is_run ? "run" : "rm");
	return NULL;
}

static bool has_child(bool is_run)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (p->is_run == is_run && !p->exited && !p->detached)
			return true;
	return false;
}

/* The child exits with result r (out and err NUL-terminated as proc.c gives them). */
static void finish(struct runnerd_proc *p, struct runnerd_proc_result r)
{
	r.killed |= p->killed;
	r.out = r.out ? r.out : "";
	r.out_len = strlen(r.out);
	r.err = r.err ? r.err : "";
	r.err_len = strlen(r.err);
	p->exited = true;
	ck_assert(!p->detached);
	INPUT(p->done(p, &r, p->arg));
}

static struct runnerd_proc_result exit_status(int status, const char *out, const char *err)
{
	return (struct runnerd_proc_result){.exited = true, .status = status, .out = out, .err = err};
}

static struct runnerd_proc_result killed_by(int sig)
{
	return (struct runnerd_proc_result){.exited = false, .status = sig};
}

/* After a cancellation while docker run ran: the CLI dies of the SIGKILL, both removals
 * succeed, the second one RUNNERD_RM_SECOND_DELAY_MS after the first. */
static void kill_and_remove_twice(void)
{
	finish(child(true), killed_by(SIGKILL));
	finish(child(false), exit_status(0, "", ""));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(child(false), exit_status(0, "", ""));
}

#define CONTAINER_T1 "roundtable-sandbox-%s-" T1

static char *container(void)
{
	return rts_xasprintf(CONTAINER_T1, cfg->installation_id);
}

/* ---- the phases ---- */

START_TEST(test_phases_of_a_turn_that_replies)
{
	size_t m = rig_mark();
	start(&peer1, T1);
	/* Run dir and broker.sock, then the brokerd link is asked for; the deadline and the
	 * bind deadline run. */
	rig_expect_since(m, "mkdir t1", "want", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BROKER_WAIT);
	ck_assert_uint_eq(fake_timers_pending(), 2);
	ck_assert_uint_eq(fake_timer_in(), RUNNERD_BIND_TIMEOUT_MS);

	m = rig_mark();
	fake_advance(2000);
	broker_up();
	rig_expect_since(m, "bind t1 gen=1", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BINDING);

	m = rig_mark();
	fake_advance(1000);
	bound(T1, 0);
	/* The workspace is checked again right before docker run. */
	rig_expect_since(m, "wscheck", "spawn run", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
	ck_assert_uint_eq(fake_timers_pending(), 1); /* the bind deadline is over */
	struct runnerd_proc *run = child(true);
	ck_assert_uint_eq(run->out_max, RTS_WORKER_OUTPUT_MAX);
	ck_assert_uint_eq(run->timeout_ms, 0); /* the turn's deadline covers it */
	/* The worker gets the text and the time left of a deadline that runs from arrival. */
	cleanup_json json_object *in = json_tokener_parse(run->input);
	ck_assert_ptr_nonnull(in);
	ck_assert_str_eq(json_object_get_string(rts_json_get(in, "text")), "what is the door code?");
	ck_assert_int_eq(json_object_get_int64(rts_json_get(rts_json_get(in, "limits"), "turnTimeoutMs")),
			 cfg->turn_timeout_ms - 3000);
	/* The exact container of this turn. */
	cleanup_free char *name = container();
	bool named = false;
	for (char **a = fk.run_argv; *a && a[1]; a++)
		named |= strcmp(a[0], "--name") == 0 && strcmp(a[1], name) == 0;
	ck_assert(named);

	m = rig_mark();
	finish(run, exit_status(0, "{\"v\":1,\"reply\":\"4711\"}", ""));
	/* --rm removed it: no docker rm. BROKER_CLOSE at once; the rest from the loop. */
	rig_expect_since(m, "close t1 gen=1", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_FINISHING);
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "rmdir t1", "done p1 t1 ok 4711", NULL);
	ck_assert_ptr_null(runnerd_turn_find(&ts, T1));
}
END_TEST

START_TEST(test_broker_link_already_up)
{
	fk.broker_up_at_once = true;
	size_t m = rig_mark();
	start(&peer1, T1);
	rig_expect_since(m, "mkdir t1", "want", "bind t1 gen=1", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BINDING);
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
}
END_TEST

/* ---- what docker run's end means ---- */

START_TEST(test_status_of_a_finished_run)
{
	char *long_reply = rts_xmalloc(RTS_REPLY_MAX + 64);
	int n = snprintf(long_reply, RTS_REPLY_MAX + 64, "{\"v\":1,\"reply\":\"");
	memset(long_reply + n, 'x', RTS_REPLY_MAX + 1);
	strcpy(long_reply + n + RTS_REPLY_MAX + 1, "\"}");
	const struct {
		const char *what;
		struct runnerd_proc_result r;
		const char *done;
		unsigned removals;
	} cases[] = {
		{"reply", exit_status(0, "{\"v\":1,\"reply\":\"hi\"}", ""), "done p1 t1 ok hi", 0},
		{"worker ran out of time", exit_status(0, "{\"v\":1,\"error\":\"turn_timeout\"}", ""),
		 "done p1 t1 timeout", 1},
		{"worker gave up", exit_status(0, "{\"v\":1,\"error\":\"model_failed\"}", ""), "done p1 t1 error", 1},
		{"malformed output", exit_status(0, "{\"v\":1,\"reply\":\"hi\",\"x\":1}", ""), "done p1 t1 error", 1},
		{"reply over the limit", exit_status(0, long_reply, ""), "done p1 t1 error", 1},
		{"docker run failed", exit_status(125, "", "docker: Error response from daemon\n"), "done p1 t1 error",
		 1},
		{"CLI killed by someone else", killed_by(SIGTERM), "done p1 t1 error", 1},
		{"output over the limit", {.exited = false, .status = SIGKILL, .killed = true, .out_overflow = true},
		 "done p1 t1 error", 2},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		drive_to(RUNNERD_TURN_RUNNING);
		size_t m = rig_mark();
		finish(child(true), cases[i].r);
		for (unsigned k = 0; k < cases[i].removals; k++) {
			ck_assert_msg(has_child(false), "%s: removal %u missing", cases[i].what, k + 1);
			finish(child(false), exit_status(0, "", ""));
			fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
		}
		ck_assert_msg(!has_child(false), "%s: one removal too many", cases[i].what);
		fake_run();
		ck_assert_msg(rig_n_log >= m + 2, "%s: no TURN_DONE", cases[i].what);
		ck_assert_str_eq(rig_log[rig_n_log - 1], cases[i].done);
		ck_assert_str_eq(rig_log[rig_n_log - 2], "rmdir t1");
		ck_assert_str_eq(rig_log[m], "close t1 gen=1");
		ck_assert_uint_eq(ts.n, 0);
	}
	free(long_reply);
}
END_TEST

/* ---- cancellation: every path at every phase ---- */

enum cancel_path {
	CANCEL_DEADLINE,
	CANCEL_TURN_CANCEL,
	CANCEL_STATD_GONE,
	CANCEL_BROKERD_GONE,
	CANCEL_SHUTDOWN,
};

static const char *const path_names[] = {"deadline", "TURN_CANCEL", "statd gone", "brokerd gone", "shutdown"};

static void cancel_by(enum cancel_path path)
{
	switch (path) {
	case CANCEL_DEADLINE:
		/* From arrival, whatever the phase (drive_to lets no time pass). */
		fake_advance(cfg->turn_timeout_ms - 1);
		ck_assert_uint_eq(fake_timer_in(), 1);
		fake_advance(1);
		break;
	case CANCEL_TURN_CANCEL:
		INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
		break;
	case CANCEL_STATD_GONE:
		INPUT(runnerd_turns_forget_peer(&ts, &peer1));
		break;
	case CANCEL_BROKERD_GONE:
		/* The link it was bound through, or, while waiting, one that never came up. */
		INPUT(runnerd_turns_broker_lost(&ts, fk.gen, true));
		break;
	case CANCEL_SHUTDOWN:
		INPUT(runnerd_turns_shutdown(&ts));
		break;
	}
}

START_TEST(test_cancel_every_path_at_every_phase)
{
	static const enum runnerd_turn_phase phases[] = {RUNNERD_TURN_BROKER_WAIT, RUNNERD_TURN_BINDING,
							 RUNNERD_TURN_RUNNING};
	static const char *const phase_names[] = {"BROKER_WAIT", "BINDING", "RUNNING"};
	cleanup_free char *name = container();
	char rm_line[128];
	snprintf(rm_line, sizeof(rm_line), "spawn rm %s", name);
	for (size_t ph = 0; ph < RTS_ARRAY_SIZE(phases); ph++)
		for (enum cancel_path path = 0; path <= CANCEL_SHUTDOWN; path++) {
			const char *what = path_names[path];
			ts.shutting_down = false;
			/* The shortest turnTimeoutMs, so the deadline comes before the bind
			 * deadline in the first two phases. */
			cfg->turn_timeout_ms = path == CANCEL_DEADLINE ? RTS_TURN_TIMEOUT_MS_MIN : RTS_TURN_TIMEOUT_MS_DEFAULT;
			drive_to(phases[ph]);
			size_t m = rig_mark();
			cancel_by(path);
			/* Inputs never free a turn; the deadline is the loop, which may. */
			ck_assert_msg(ts.n == 1 || path == CANCEL_DEADLINE, "%s at %s: freed from inside the input", what,
				      phase_names[ph]);
			const char *status = path == CANCEL_DEADLINE	  ? "timeout"
					     : path == CANCEL_BROKERD_GONE ? "error"
									   : "cancelled";
			/* BROKER_CLOSE once bound, unless that link is the one that went away. */
			size_t i = m;
			if (phases[ph] >= RUNNERD_TURN_BINDING && path != CANCEL_BROKERD_GONE)
				ck_assert_str_eq(rig_log[i++], "close t1 gen=1");
			if (phases[ph] == RUNNERD_TURN_RUNNING) {
				/* The CLI is killed and the container removed, twice, 1 s apart. */
				ck_assert_str_eq(rig_log[i++], "kill run");
				ck_assert_str_eq(rig_log[i++], rm_line);
				ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVING);
				ck_assert_uint_eq(child(false)->timeout_ms, RUNNERD_RM_TIMEOUT_MS);
				finish(child(true), killed_by(SIGKILL));
				finish(child(false), exit_status(0, "", ""));
				ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVE_WAIT);
				ck_assert_uint_eq(fake_timer_in(), RUNNERD_RM_SECOND_DELAY_MS);
				fake_advance(RUNNERD_RM_SECOND_DELAY_MS - 1);
				ck_assert(!has_child(false));
				fake_advance(1);
				ck_assert_str_eq(rig_log[i++], rm_line);
				ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVING);
				finish(child(false), exit_status(1, "", "Error response from daemon: No such container: x"));
			}
			if (ts.n) {
				ck_assert_msg(i == rig_n_log, "%s at %s: unexpected \"%s\"", what, phase_names[ph],
					      i < rig_n_log ? rig_log[i] : "");
				ck_assert_int_eq(phase(T1), RUNNERD_TURN_FINISHING);
				fake_run();
			}
			ck_assert_str_eq(rig_log[i++], "rmdir t1");
			if (path == CANCEL_STATD_GONE) {
				ck_assert_msg(i == rig_n_log, "statd gone at %s: answered anyway", phase_names[ph]);
			} else {
				char done[64];
				snprintf(done, sizeof(done), "done p1 t1 %s", status);
				ck_assert_str_eq(rig_log[i++], done);
			}
			if (path == CANCEL_SHUTDOWN)
				ck_assert_str_eq(rig_log[i++], "idle");
			ck_assert_msg(i == rig_n_log, "%s at %s: unexpected \"%s\"", what, phase_names[ph],
				      i < rig_n_log ? rig_log[i] : "");
			ck_assert_uint_eq(ts.n, 0);
		}
}
END_TEST

START_TEST(test_first_outcome_wins)
{
	cleanup_free char *name = container();
	cleanup_free char *rm_line = rts_xasprintf("spawn rm %s", name);
	drive_to(RUNNERD_TURN_RUNNING);
	fake_advance(cfg->turn_timeout_ms);
	size_t m = rig_mark();
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	INPUT(runnerd_turns_broker_lost(&ts, fk.gen, false));
	/* The CLI's output after the kill does not count either. */
	finish(child(true), exit_status(0, "{\"v\":1,\"reply\":\"late\"}", ""));
	rig_expect_since(m, NULL);
	finish(child(false), exit_status(0, "", ""));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(child(false), exit_status(0, "", ""));
	fake_run();
	rig_expect_since(m, rm_line, "rmdir t1", "done p1 t1 timeout", NULL);
}
END_TEST

/* ---- the removals ---- */

/* T1 cancelled while docker run runs: the first docker rm -f is running. */
static void cancelled_while_running(void)
{
	drive_to(RUNNERD_TURN_RUNNING);
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVING);
}

/* The rest of T1 after its removals: run dir, TURN_DONE with status. */
static void expect_end(const char *status)
{
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_FINISHING);
	size_t m = rig_mark();
	fake_run();
	char done[64];
	snprintf(done, sizeof(done), "done p1 t1 %s", status);
	rig_expect_since(m, "rmdir t1", done, NULL);
}

START_TEST(test_removal_timeout_is_cleanup_failed)
{
	cancelled_while_running();
	finish(child(false), (struct runnerd_proc_result){.status = SIGKILL, .killed = true, .timed_out = true});
	/* No second try: dockerd does not answer. The CLI, killed but not reaped yet, holds
	 * nothing up: it is left to reap itself. */
	ck_assert(!has_child(false));
	ck_assert(last_child(true)->killed && last_child(true)->detached);
	expect_end("cleanup_failed");
}
END_TEST

START_TEST(test_removal_failure_is_cleanup_failed)
{
	cancelled_while_running();
	finish(child(true), killed_by(SIGKILL));
	finish(child(false), exit_status(1, "", "Error response from daemon: permission denied\n"));
	ck_assert(!has_child(false));
	ck_assert_uint_eq(fake_timers_pending(), 1); /* only the finish */
	expect_end("cleanup_failed");
}
END_TEST

START_TEST(test_removal_that_cannot_start_is_cleanup_failed)
{
	fk.spawn_rm_result = -EAGAIN;
	drive_to(RUNNERD_TURN_RUNNING);
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	ck_assert(last_child(true)->killed && last_child(true)->detached);
	expect_end("cleanup_failed");
}
END_TEST

START_TEST(test_second_removal_that_cannot_be_scheduled_is_cleanup_failed)
{
	cancelled_while_running();
	finish(child(true), killed_by(SIGKILL));
	fake_timer_failures = 1;
	finish(child(false), exit_status(0, "", ""));
	ck_assert(!has_child(false));
	expect_end("cleanup_failed");
}
END_TEST

START_TEST(test_no_such_container_is_gone)
{
	cancelled_while_running();
	finish(child(true), killed_by(SIGKILL));
	/* Some CLI versions say so with status 1: the container is gone all the same. */
	finish(child(false), exit_status(1, "", "Error response from daemon: No such container: x\n"));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(child(false), exit_status(0, "", ""));
	expect_end("cancelled");
}
END_TEST

START_TEST(test_removal_in_progress_is_settled_by_the_next)
{
	/* Two rounds (a kill): the first finds dockerd removing it already, the second
	 * confirms it is gone. */
	cancelled_while_running();
	finish(child(true), killed_by(SIGKILL));
	finish(child(false), exit_status(1, "", "Error: removal of container x is already in progress\n"));
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVE_WAIT);
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(child(false), exit_status(0, "", ""));
	expect_end("cancelled");
}
END_TEST

START_TEST(test_removal_in_progress_adds_one_round)
{
	/* One round (docker run failed): "in progress" adds exactly one more. */
	drive_to(RUNNERD_TURN_RUNNING);
	finish(child(true), exit_status(125, "", "docker: failed\n"));
	finish(child(false), exit_status(1, "", "Error: removal of container x is already in progress\n"));
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_REMOVE_WAIT);
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	/* Still in progress: no third try, and the container may remain. */
	finish(child(false), exit_status(1, "", "Error: removal of container x is already in progress\n"));
	ck_assert(!has_child(false));
	expect_end("cleanup_failed");
}
END_TEST

START_TEST(test_run_dir_removal_failure_is_only_logged)
{
	fk.run_dir_remove_result = -EBUSY;
	drive_to(RUNNERD_TURN_RUNNING);
	finish(child(true), exit_status(0, "{\"v\":1,\"reply\":\"hi\"}", ""));
	expect_end("ok hi");
}
END_TEST

/* ---- failures before docker run ---- */

START_TEST(test_run_dir_that_cannot_be_made)
{
	fk.run_dir_result = -ENOSPC;
	size_t m = rig_mark();
	start(&peer1, T1);
	/* Nothing to bind, nothing to remove. */
	rig_expect_since(m, NULL);
	fake_run();
	rig_expect_since(m, "done p1 t1 error", NULL);
}
END_TEST

START_TEST(test_deadline_that_cannot_be_armed)
{
	fake_timer_failures = 1;
	size_t m = rig_mark();
	start(&peer1, T1);
	fake_run();
	rig_expect_since(m, "done p1 t1 error", NULL);
}
END_TEST

START_TEST(test_bind_deadline)
{
	/* The link never comes up: nothing to close. */
	start(&peer1, T1);
	size_t m = rig_mark();
	fake_advance(RUNNERD_BIND_TIMEOUT_MS - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	rig_expect_since(m, "rmdir t1", "done p1 t1 error", NULL);
	/* BROKER_BIND went out but BROKER_BOUND never came: closed. */
	start(&peer1, T2);
	broker_up();
	m = rig_mark();
	fake_advance(RUNNERD_BIND_TIMEOUT_MS);
	rig_expect_since(m, "close t2 gen=1", "rmdir t2", "done p1 t2 error", NULL);
}
END_TEST

START_TEST(test_binding_refused)
{
	drive_to(RUNNERD_TURN_BINDING);
	size_t m = rig_mark();
	bound(T1, -EPERM);
	rig_expect_since(m, "close t1 gen=1", NULL);
	expect_end("error");
}
END_TEST

START_TEST(test_bound_from_another_link_is_ignored)
{
	drive_to(RUNNERD_TURN_BINDING);
	size_t m = rig_mark();
	INPUT(runnerd_turn_bound(&ts, fk.gen + 1, T1, 0));
	INPUT(runnerd_turn_bound(&ts, fk.gen, T2, 0));
	rig_expect_since(m, NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BINDING);
	bound(T1, 0);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
	/* A second BROKER_BOUND is late: ignored. */
	m = rig_mark();
	bound(T1, 0);
	rig_expect_since(m, NULL);
	INPUT(runnerd_turns_shutdown(&ts));
	kill_and_remove_twice();
	fake_run();
}
END_TEST

START_TEST(test_workspace_changed_before_docker_run)
{
	fk.workspace_result = -ESTALE;
	drive_to(RUNNERD_TURN_BINDING);
	size_t m = rig_mark();
	bound(T1, 0);
	/* Never bind-mounted: no docker run, nothing to remove. */
	rig_expect_since(m, "wscheck", "close t1 gen=1", NULL);
	expect_end("error");
}
END_TEST

START_TEST(test_docker_run_that_cannot_start)
{
	fk.spawn_run_result = -ENOENT;
	drive_to(RUNNERD_TURN_BINDING);
	size_t m = rig_mark();
	bound(T1, 0);
	rig_expect_since(m, "wscheck", "close t1 gen=1", NULL);
	expect_end("error");
}
END_TEST

/* ---- brokerd and statd links ---- */

START_TEST(test_brokerd_lost_fails_bound_turns_and_reconnects_for_waiting_ones)
{
	start(&peer1, T1);
	broker_up();
	start(&peer1, T2); /* asks for the link; it does not come up yet */
	ck_assert_int_eq(phase(T2), RUNNERD_TURN_BROKER_WAIT);
	size_t m = rig_mark();
	INPUT(runnerd_turns_broker_lost(&ts, 1, false));
	/* T1 fails (nothing to close on a dead link); T2 asks for a new link. */
	rig_expect_since(m, "want", NULL);
	fake_run();
	rig_expect_since(m, "want", "rmdir t1", "done p1 t1 error", NULL);
	fk.gen = 2;
	m = rig_mark();
	broker_up();
	rig_expect_since(m, "bind t2 gen=2", NULL);
	INPUT(runnerd_turn_bound(&ts, 1, T2, 0)); /* from the old link */
	ck_assert_int_eq(phase(T2), RUNNERD_TURN_BINDING);
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
	rig_expect_since(m, "bind t2 gen=2", "close t2 gen=2", "rmdir t2", "done p1 t2 cancelled", "idle", NULL);
}
END_TEST

START_TEST(test_brokerd_that_never_comes_up)
{
	start(&peer1, T1);
	start(&peer1, T2);
	size_t m = rig_mark();
	INPUT(runnerd_turns_broker_lost(&ts, 0, true));
	fake_run();
	rig_expect_since(m, "rmdir t1", "done p1 t1 error", "rmdir t2", "done p1 t2 error", NULL);
}
END_TEST

START_TEST(test_cancel_only_from_the_peer_that_started_it)
{
	drive_to(RUNNERD_TURN_BINDING);
	size_t m = rig_mark();
	INPUT(runnerd_turn_cancel_id(&ts, &peer2, T1));
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T2));
	INPUT(runnerd_turns_forget_peer(&ts, &peer2));
	rig_expect_since(m, NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_BINDING);
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	rig_expect_since(m, "close t1 gen=1", NULL);
	expect_end("cancelled");
}
END_TEST

/* ---- TURN_RUN checks and refusals ---- */

START_TEST(test_turn_run_checked_field_by_field)
{
	static const char *const cases[] = {"turn id", "empty channel", "hash", "start_fresh", "text utf-8",
					    "speaker utf-8", "principal utf-8", "workspace elsewhere",
					    "workspace root prefix", "workspace other hash", "fd not a directory"};
	char other[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash("another channel", other);
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		struct turn_run tr;
		turn_run_init(&tr, T1);
		cleanup_free char *ws = NULL;
		switch (i) {
		case 0:
			tr.m.turn_id = "0123";
			break;
		case 1:
			tr.m.channel = "";
			break;
		case 2:
			tr.m.channel_hash = other;
			break;
		case 3:
			tr.m.start_fresh = 2;
			break;
		case 4:
			tr.m.text = "bad \xc3\x28";
			break;
		case 5:
			tr.m.speaker_name = "\xff";
			break;
		case 6:
			tr.m.principal_id = "\xed\xa0\x80"; /* a surrogate */
			break;
		case 7:
			ws = rts_xasprintf("/tmp/%s", tr.hash);
			break;
		case 8:
			ws = rts_xasprintf("%sx/%s", cfg->workspace_root, tr.hash);
			break;
		case 9:
			ws = rts_xasprintf("%s/%s", cfg->workspace_root, other);
			break;
		case 10:
			close(tr.m.fd);
			tr.m.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			break;
		}
		if (ws)
			tr.m.workspace = ws;
		size_t m = rig_mark();
		ck_assert_msg(run_msg(&peer1, &tr) == -EBADMSG, "%s: accepted", cases[i]);
		/* Refused before anything: the peer is dropped, its fd closed (teardown). */
		rig_expect_since(m, NULL);
		ck_assert_uint_eq(ts.n, 0);
	}
	/* The same message, unbroken, is a turn; its id once more is refused. */
	start(&peer1, T1);
	struct turn_run tr;
	turn_run_init(&tr, T1);
	size_t m = rig_mark();
	ck_assert_int_eq(run_msg(&peer1, &tr), -EBADMSG);
	rig_expect_since(m, NULL);
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
}
END_TEST

START_TEST(test_too_many_turns_and_shutdown_refuse_at_once)
{
	char ids[RUNNERD_MAX_TURNS + 1][RTS_TURN_ID_LEN + 1];
	for (unsigned i = 0; i <= RUNNERD_MAX_TURNS; i++)
		snprintf(ids[i], sizeof(ids[i]), "%016x", 0x100u + i);
	for (unsigned i = 0; i < RUNNERD_MAX_TURNS; i++)
		start(&peer1, ids[i]);
	size_t m = rig_mark();
	/* Answered at once: no turn exists for it (the one TURN_DONE not sent from the loop). */
	struct turn_run tr;
	turn_run_init(&tr, ids[RUNNERD_MAX_TURNS]);
	ck_assert_int_eq(runnerd_turn_run(&ts, &peer2, &tr.m), 0);
	free(tr.workspace);
	rig_expect_since(m, "done p2 t0 error", NULL); /* 0x140: its last digit */
	ck_assert_uint_eq(ts.n, RUNNERD_MAX_TURNS);

	INPUT(runnerd_turns_shutdown(&ts));
	m = rig_mark();
	turn_run_init(&tr, T1);
	ck_assert_int_eq(runnerd_turn_run(&ts, &peer2, &tr.m), 0);
	free(tr.workspace);
	rig_expect_since(m, "done p2 t1 cancelled", NULL);
	ck_assert_uint_eq(fk.idles, 0);
	fake_run();
	ck_assert_uint_eq(ts.n, 0);
	ck_assert_uint_eq(fk.idles, 1);
	ck_assert_str_eq(rig_log[rig_n_log - 1], "idle");
}
END_TEST

START_TEST(test_shutdown_without_turns_is_idle_at_once)
{
	INPUT(runnerd_turns_shutdown(&ts));
	rig_expect_since(0, "idle", NULL);
}
END_TEST

START_TEST(test_shutdown_waits_for_every_removal)
{
	drive_to(RUNNERD_TURN_RUNNING);
	start(&peer2, T2);
	size_t m = rig_mark();
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
	/* T2 (waiting) is done; T1 waits for its removals, and so does the exit. */
	ck_assert_uint_eq(ts.n, 1);
	ck_assert_uint_eq(fk.idles, 0);
	kill_and_remove_twice();
	fake_run();
	ck_assert_uint_eq(fk.idles, 1);
	ck_assert_str_eq(rig_log[rig_n_log - 1], "idle");
	ck_assert_str_eq(rig_log[rig_n_log - 2], "done p1 t1 cancelled");
	ck_assert_uint_gt(rig_n_log, m);
}
END_TEST

/* ---- prechecks (DESIGN.md 8.3): a turn of another kind ---- */

#define PRECHECK_CONFIG                                                                                                \
	"{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\",\"runRoot\":\"/run/rts\","     \
	"\"precheck\":{\"image\":\"rts:pc\",\"timeoutMs\":5000,\"maxCalls\":3,\"grants\":[{\"channel\":\"" CHANNEL \
	"\",\"servers\":[{\"name\":\"docs\",\"url\":\"https://mcp.invalid/\",\"tools\":[\"search\",\"fetch\"]}]}]}}"

static void setup_precheck(void)
{
	config_doc = PRECHECK_CONFIG;
	setup();
}

static void teardown_precheck(void)
{
	teardown();
	config_doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\"}";
}

struct precheck_run {
	char hash[RTS_HASH_HEX_LEN + 1];
	struct rts_msg_precheck_run m;
};

static void precheck_init(struct precheck_run *pr, const char *id)
{
	rts_channel_hash(CHANNEL, pr->hash);
	pr->m = (struct rts_msg_precheck_run){
		.precheck_id = id,
		.channel = CHANNEL,
		.channel_hash = pr->hash,
		.target = "daily",
		.tier = "member",
		.script = "export default async () => ({ wake: false })",
		.approved = "search\nother/tool",
		.fired_at = "2026-03-01T23:30:00Z",
		.time_zone = "Pacific/Kiritimati",
		.today = "2026-03-02",
		.schedule = "{\"every\":\"day\"}",
	};
}

static void precheck_start(struct runnerd_statd *peer, const char *id)
{
	struct precheck_run pr;
	precheck_init(&pr, id);
	int r;
	INPUT(r = runnerd_precheck_run(&ts, peer, &pr.m));
	ck_assert_int_eq(r, 0);
}

static void precheck_to_running(void)
{
	precheck_start(&peer1, T1);
	broker_up();
	bound(T1, 0);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
}

static bool argv_has(const char *a, const char *b)
{
	for (char **v = fk.run_argv; *v && v[1]; v++)
		if (strcmp(v[0], a) == 0 && strcmp(v[1], b) == 0)
			return true;
	return false;
}

START_TEST(test_precheck_phases)
{
	size_t m = rig_mark();
	precheck_start(&peer1, T1);
	ck_assert_int_eq(runnerd_turn_kind(runnerd_turn_find(&ts, T1)), RUNNERD_KIND_PRECHECK);
	rig_expect_since(m, "pc mkdir t1", "want", NULL);
	/* The precheck's own deadline (timeoutMs), not the turn's. */
	ck_assert_uint_eq(fake_timers_pending(), 2);
	ck_assert_uint_eq(fake_timer_in(), 5000);

	m = rig_mark();
	broker_up();
	/* The approvals travel to brokerd as statd sent them; brokerd resolves the grant. */
	rig_expect_since(m, "pc bind t1 gen=1 target=daily tier=member approved=search\nother/tool", NULL);
	m = rig_mark();
	fake_advance(1000);
	bound(T1, 0);
	/* No workspace from statd to re-check: runnerd made the empty one itself. */
	rig_expect_since(m, "spawn run", NULL);
	struct runnerd_proc *run = child(true);
	ck_assert_uint_eq(run->out_max, RTS_PRECHECK_OUTPUT_MAX);
	ck_assert_uint_eq(run->timeout_ms, 0);
	/* The precheck's image, limits, /tmp, and its own run dir: the empty workspace read-only. */
	cleanup_free char *ws = rts_xasprintf("type=bind,source=/run/rts/precheck-%s/workspace,target=/workspace,readonly", T1);
	cleanup_free char *rd = rts_xasprintf("type=bind,source=/run/rts/precheck-%s/broker,target=/run/broker,readonly", T1);
	ck_assert(argv_has("--mount", ws));
	ck_assert(argv_has("--mount", rd));
	ck_assert(argv_has("--tmpfs", "/tmp:rw,nosuid,nodev,size=64m"));
	ck_assert(argv_has("--memory", "256m") && argv_has("--memory-swap", "256m"));
	ck_assert(argv_has("--pids-limit", "32") && argv_has("--cpus", "1"));
	ck_assert(argv_has("--network", "none"));
	cleanup_free char *name = container();
	ck_assert(argv_has("--name", name));
	ck_assert_str_eq(fk.run_argv[rts_strv_len(fk.run_argv) - 1], "rts:pc");
	/* The harness's input: the granted tools that were approved ("search" by its hold-rule
	 * name; "fetch" was not approved), the config's maxCalls, the rest as sent. */
	cleanup_json json_object *in = json_tokener_parse(run->input);
	ck_assert_ptr_nonnull(in);
	ck_assert_str_eq(json_object_to_json_string_ext(rts_json_get(in, "tools"), JSON_C_TO_STRING_PLAIN),
			 "[{\"server\":\"docs\",\"tool\":\"search\"}]");
	ck_assert_int_eq(json_object_get_int(rts_json_get(in, "maxCalls")), 3);
	ck_assert_str_eq(json_object_get_string(rts_json_get(in, "today")), "2026-03-02");
	ck_assert_str_eq(json_object_get_string(rts_json_get(rts_json_get(in, "schedule"), "every")), "day");

	m = rig_mark();
	finish(run, exit_status(0, "{\"v\":1,\"wake\":true,\"context\":\"go\"}\n", ""));
	rig_expect_since(m, "close t1 gen=1", NULL);
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "pc rmdir t1", "pc done p1 t1 ok 2 go", NULL);
}
END_TEST

START_TEST(test_precheck_results)
{
	cleanup_free char *big = rts_xmalloc(RTS_PRECHECK_CONTEXT_MAX + 64);
	int n = snprintf(big, RTS_PRECHECK_CONTEXT_MAX + 64, "{\"v\":1,\"wake\":true,\"context\":\"");
	memset(big + n, 'x', RTS_PRECHECK_CONTEXT_MAX + 1);
	strcpy(big + n + RTS_PRECHECK_CONTEXT_MAX + 1, "\"}\n");
	const struct {
		const char *what;
		struct runnerd_proc_result r;
		const char *done;
		unsigned removals;
	} cases[] = {
		{"sleep", exit_status(0, "{\"v\":1,\"wake\":false}\n", ""), "pc done p1 t1 ok 0", 0},
		{"note", exit_status(0, "{\"v\":1,\"wake\":false,\"note\":\"quiet\"}\n", ""), "pc done p1 t1 ok 1 quiet", 0},
		{"context", exit_status(0, "{\"v\":1,\"wake\":true,\"context\":\"\"}\n", ""), "pc done p1 t1 ok 2", 0},
		{"script error", exit_status(0, "{\"v\":1,\"wake\":true,\"error\":\"Error: no\"}\n", ""),
		 "pc done p1 t1 ok 3 Error: no", 0},
		/* The harness refused our input: a host bug, never shown. */
		{"bad input", exit_status(1, "{\"v\":1,\"error\":\"bad_input\",\"field\":\"today\"}\n", ""),
		 "pc done p1 t1 error", 1},
		{"answer with exit 1", exit_status(1, "{\"v\":1,\"wake\":false}\n", ""), "pc done p1 t1 error", 1},
		{"two lines", exit_status(0, "{\"v\":1,\"wake\":false}\n{\"v\":1,\"wake\":false}\n", ""),
		 "pc done p1 t1 error", 1},
		{"no newline", exit_status(0, "{\"v\":1,\"wake\":false}", ""), "pc done p1 t1 error", 1},
		{"nothing", exit_status(0, "", ""), "pc done p1 t1 error", 1},
		{"extra member", exit_status(0, "{\"v\":1,\"wake\":false,\"context\":\"x\"}\n", ""), "pc done p1 t1 error",
		 1},
		{"context over its bound", exit_status(0, big, ""), "pc done p1 t1 error", 1},
		{"out of memory", exit_status(137, "", ""), "pc done p1 t1 error", 1},
		{"output over the limit", {.exited = false, .status = SIGKILL, .killed = true, .out_overflow = true},
		 "pc done p1 t1 error", 2},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		precheck_to_running();
		size_t m = rig_mark();
		finish(child(true), cases[i].r);
		for (unsigned k = 0; k < cases[i].removals; k++) {
			ck_assert_msg(has_child(false), "%s: removal %u missing", cases[i].what, k + 1);
			finish(child(false), exit_status(0, "", ""));
			fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
		}
		ck_assert_msg(!has_child(false), "%s: one removal too many", cases[i].what);
		fake_run();
		ck_assert_str_eq(rig_log[m], "close t1 gen=1");
		ck_assert_str_eq(rig_log[rig_n_log - 2], "pc rmdir t1");
		ck_assert_msg(strcmp(rig_log[rig_n_log - 1], cases[i].done) == 0, "%s: %s", cases[i].what,
			      rig_log[rig_n_log - 1]);
		ck_assert_uint_eq(ts.n, 0);
	}
}
END_TEST

START_TEST(test_precheck_deadline_kills_and_removes)
{
	precheck_to_running();
	size_t m = rig_mark();
	fake_advance(4999);
	rig_expect_since(m, NULL);
	fake_advance(1);
	cleanup_free char *name = container();
	cleanup_free char *rm_line = rts_xasprintf("spawn rm %s", name);
	rig_expect_since(m, "close t1 gen=1", "kill run", rm_line, NULL);
	kill_and_remove_twice();
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "kill run", rm_line, rm_line, "pc rmdir t1", "pc done p1 t1 timeout",
			 NULL);
}
END_TEST

START_TEST(test_precheck_cancel_and_statd_gone)
{
	precheck_to_running();
	size_t m = rig_mark();
	INPUT(runnerd_turn_cancel_id(&ts, &peer2, T1)); /* not its peer */
	rig_expect_since(m, NULL);
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	kill_and_remove_twice();
	fake_run();
	ck_assert_str_eq(rig_log[rig_n_log - 1], "pc done p1 t1 cancelled");

	precheck_to_running();
	m = rig_mark();
	INPUT(runnerd_turns_forget_peer(&ts, &peer1));
	kill_and_remove_twice();
	fake_run();
	/* Removed, never answered. */
	ck_assert_str_eq(rig_log[rig_n_log - 1], "pc rmdir t1");
}
END_TEST

START_TEST(test_precheck_shutdown_waits_for_removals)
{
	precheck_to_running();
	INPUT(runnerd_turns_shutdown(&ts));
	ck_assert_uint_eq(fk.idles, 0);
	kill_and_remove_twice();
	ck_assert_uint_eq(fk.idles, 0);
	fake_run();
	ck_assert_uint_eq(fk.idles, 1);
	ck_assert_str_eq(rig_log[rig_n_log - 2], "pc done p1 t1 cancelled");
}
END_TEST

START_TEST(test_precheck_run_checked_field_by_field)
{
	static const char *const fields[] = {"id", "hash", "target", "approved", "fired_at", "today", "zone",
					     "script", "schedule", "utf8"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(fields); i++) {
		struct precheck_run pr;
		precheck_init(&pr, T1);
		switch (i) {
		case 0: pr.m.precheck_id = "000000000000000G"; break;
		case 1: pr.m.channel_hash = "00"; break;
		case 2: pr.m.target = ""; break;
		case 3: pr.m.approved = "docs/search\n"; break;
		case 4: pr.m.fired_at = "2026-03-01T24:00:00Z"; break;
		case 5: pr.m.today = "2026-03-04"; break; /* two days from the instant: no zone has that */
		case 6: pr.m.time_zone = "../etc"; break;
		case 7: pr.m.script = ""; break;
		case 8: pr.m.schedule = ""; break;
		case 9: pr.m.target = "\xff"; break;
		}
		int r;
		INPUT(r = runnerd_precheck_run(&ts, &peer1, &pr.m));
		ck_assert_msg(r == -EBADMSG, "%s: accepted", fields[i]);
		ck_assert_uint_eq(ts.n, 0);
	}
	rig_expect_since(0, NULL);
	/* An id already running is refused too. */
	precheck_start(&peer1, T1);
	struct precheck_run pr;
	precheck_init(&pr, T1);
	ck_assert_int_eq(runnerd_precheck_run(&ts, &peer1, &pr.m), -EBADMSG);
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
}
END_TEST

START_TEST(test_precheck_refused_at_once)
{
	/* Shutting down: cancelled, answered at once (no precheck exists for it). */
	INPUT(runnerd_turns_shutdown(&ts));
	fake_run();
	size_t m = rig_mark();
	struct precheck_run pr;
	precheck_init(&pr, T2);
	ck_assert_int_eq(runnerd_precheck_run(&ts, &peer2, &pr.m), 0);
	rig_expect_since(m, "pc done p2 t2 cancelled", NULL);
	ck_assert_uint_eq(ts.n, 0);
}
END_TEST

/* Without "precheck" in runnerd's config (the turn fixture's): refused, nothing made. */
START_TEST(test_precheck_without_config)
{
	struct precheck_run pr;
	precheck_init(&pr, T1);
	size_t m = rig_mark();
	ck_assert_int_eq(runnerd_precheck_run(&ts, &peer1, &pr.m), 0);
	rig_expect_since(m, "pc done p1 t1 error", NULL);
	ck_assert_uint_eq(ts.n, 0);
}
END_TEST


/* ---- warm spares (runnerd/spare.h): the turn's side of a claim ---- */

#define SPARE "00000000000000ff" /* tname: "tf" */

static struct {
	bool available; /* spare_claim finds one */
	int feed_result;
	unsigned refills;
	unsigned finished_warm, finished_cold; /* the metrics' count by start */
} sp;

static int op_spare_claim(void *owner, const char *channel_hash, int workspace_fd, runnerd_proc_done_t done,
			  void *arg, struct runnerd_spare_claim *out)
{
	char expect[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(CHANNEL, expect);
	ck_assert_str_eq(channel_hash, expect);
	ck_assert_int_ge(fcntl(workspace_fd, F_GETFD), 0);
	if (!sp.available)
		return 0;
	sp.available = false;
	rig_logf("claim %s", tname(SPARE));
	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	*p = (struct runnerd_proc){.next = fk.procs, .is_run = true, .out_max = RTS_WORKER_OUTPUT_MAX, .done = done,
				   .arg = arg};
	fk.procs = p;
	snprintf(out->id, sizeof(out->id), "%s", SPARE);
	out->listen_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(out->listen_fd, 0);
	out->run = p;
	return 1;
}

static int op_spare_feed(void *owner, struct runnerd_proc *p, char *input, size_t input_len)
{
	if (sp.feed_result < 0) {
		free(input);
		return sp.feed_result;
	}
	ck_assert_ptr_null(p->input);
	p->input = input;
	p->input_len = input_len;
	rig_logf("feed");
	return 0;
}

static void op_spare_refill(void *owner, const char *channel_hash, const char *workspace, int workspace_fd)
{
	ck_assert_int_ge(workspace_fd, 0);
	close(workspace_fd);
	sp.refills++;
	rig_logf("refill");
}

static void op_finished(void *owner, enum rts_turn_status status, uint64_t ms, bool warm)
{
	if (warm)
		sp.finished_warm++;
	else
		sp.finished_cold++;
}

static struct runnerd_turn_ops spare_ops;

static void setup_spares(void)
{
	setup();
	memset(&sp, 0, sizeof(sp));
	spare_ops = ops;
	spare_ops.spare_claim = op_spare_claim;
	spare_ops.spare_feed = op_spare_feed;
	spare_ops.spare_refill = op_spare_refill;
	spare_ops.finished = op_finished;
	runnerd_turns_init(&ts, &spare_ops, NULL,
			   &(struct runnerd_turn_config){.cfg = cfg, .public_tools = public_tools, .uid = 1000, .gid = 1000});
}

START_TEST(test_warm_turn_replies_through_its_spare)
{
	sp.available = true;
	size_t m = rig_mark();
	start(&peer1, T1);
	/* No run dir of its own: the spare's broker.sock is bound. */
	rig_expect_since(m, "claim tf", "want", NULL);
	broker_up();
	m = rig_mark();
	bound(T1, 0);
	/* The input reaches the spare only now, after the binding; no docker run. */
	rig_expect_since(m, "wscheck", "feed", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
	struct runnerd_proc *run = child(true);
	cleanup_json json_object *in = json_tokener_parse(run->input);
	ck_assert_ptr_nonnull(in);
	ck_assert_str_eq(json_object_get_string(rts_json_get(in, "turn")), T1);
	ck_assert_ptr_null(fk.run_argv);
	m = rig_mark();
	finish(run, exit_status(0, "{\"v\":1,\"reply\":\"warm\"}", ""));
	fake_run();
	/* The spare's run dir goes with the turn, then its channel gets the next spare. */
	rig_expect_since(m, "close t1 gen=1", "rmdir tf", "done p1 t1 ok warm", "refill", NULL);
	ck_assert_uint_eq(sp.refills, 1);
}
END_TEST

START_TEST(test_warm_turn_that_ends_before_its_input_removes_the_spare)
{
	sp.available = true;
	start(&peer1, T1);
	broker_up();
	size_t m = rig_mark();
	bound(T1, -EIO);
	/* Never fed; its container runs since the claim, so it is removed by name. */
	cleanup_free char *name = rts_xasprintf("roundtable-sandbox-%s-" SPARE, cfg->installation_id);
	char want[128];
	snprintf(want, sizeof(want), "spawn rm %s", name);
	rig_expect_since(m, "close t1 gen=1", "kill run", want, NULL);
	ck_assert_ptr_null(child(true)->input);
	finish(child(true), killed_by(SIGKILL));
	finish(child(false), exit_status(0, "", ""));
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "kill run", want, "rmdir tf", "done p1 t1 error", "refill", NULL);
}
END_TEST

/* Issue 15: a claimed spare that refuses its input does not cost the turn: its container is
 * removed and the turn runs cold, mounting the spare's run dir (brokerd is bound to its
 * broker.sock already); the metrics count it cold. */
START_TEST(test_spare_that_takes_no_input_falls_back_cold)
{
	sp.available = true;
	sp.feed_result = -EPIPE;
	start(&peer1, T1);
	broker_up();
	size_t m = rig_mark();
	bound(T1, 0);
	cleanup_free char *want = rts_xasprintf("spawn rm roundtable-sandbox-%s-" SPARE, cfg->installation_id);
	rig_expect_since(m, "wscheck", "kill run", want, "spawn run", NULL);
	ck_assert_int_eq(phase(T1), RUNNERD_TURN_RUNNING);
	/* The cold container is the turn's own, with the spare's run dir. */
	cleanup_free char *name = rts_xasprintf("roundtable-sandbox-%s-" T1, cfg->installation_id);
	cleanup_free char *dir =
		rts_xasprintf("type=bind,source=%s/" SPARE ",target=/run/broker,readonly", cfg->run_root);
	ck_assert(argv_has("--name", name));
	ck_assert(argv_has("--mount", dir));
	struct runnerd_proc *run = child(true);
	ck_assert_ptr_nonnull(run->input);
	finish(child(false), exit_status(0, "", ""));
	m = rig_mark();
	finish(run, exit_status(0, "{\"v\":1,\"reply\":\"cold after all\"}", ""));
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "rmdir tf", "done p1 t1 ok cold after all", "refill", NULL);
	ck_assert_uint_eq(sp.finished_warm, 0);
	ck_assert_uint_eq(sp.finished_cold, 1);
}
END_TEST

/* The spare's CLI ends after the claim, before the binding: the turn waits for brokerd as
 * usual, then starts cold; it ends only once the spare's removal did. */
START_TEST(test_spare_that_ends_before_its_input_falls_back_cold)
{
	sp.available = true;
	start(&peer1, T1);
	size_t m = rig_mark();
	finish(child(true), exit_status(137, "", ""));
	cleanup_free char *want = rts_xasprintf("spawn rm roundtable-sandbox-%s-" SPARE, cfg->installation_id);
	rig_expect_since(m, want, NULL);
	broker_up();
	m = rig_mark();
	bound(T1, 0);
	rig_expect_since(m, "wscheck", "spawn run", NULL);
	m = rig_mark();
	finish(child(true), exit_status(0, "{\"v\":1,\"reply\":\"cold\"}", ""));
	fake_run();
	/* Not done while the spare's removal runs. */
	rig_expect_since(m, "close t1 gen=1", NULL);
	finish(child(false), exit_status(0, "", ""));
	fake_run();
	rig_expect_since(m, "close t1 gen=1", "rmdir tf", "done p1 t1 ok cold", "refill", NULL);
	ck_assert_uint_eq(sp.finished_cold, 1);
}
END_TEST

START_TEST(test_cold_when_no_spare_and_no_refill_after_cancel)
{
	size_t m = rig_mark();
	start(&peer1, T1);
	rig_expect_since(m, "mkdir t1", "want", NULL);
	broker_up();
	bound(T1, 0);
	ck_assert_ptr_nonnull(fk.run_argv); /* a cold docker run */
	INPUT(runnerd_turn_cancel_id(&ts, &peer1, T1));
	kill_and_remove_twice();
	fake_run();
	/* A cancelled turn leaves its channel without a spare (DESIGN.md 8.4). */
	ck_assert_uint_eq(sp.refills, 0);
	/* The next one replies cold and gets its channel a spare. */
	start(&peer1, T2);
	broker_up();
	bound(T2, 0);
	finish(child(true), exit_status(0, "{\"v\":1,\"reply\":\"cold\"}", ""));
	fake_run();
	ck_assert_uint_eq(sp.refills, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("runnerd_turn");
	TCase *tc = tcase_create("turn");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_phases_of_a_turn_that_replies);
	tcase_add_test(tc, test_broker_link_already_up);
	tcase_add_test(tc, test_status_of_a_finished_run);
	tcase_add_test(tc, test_cancel_every_path_at_every_phase);
	tcase_add_test(tc, test_first_outcome_wins);
	tcase_add_test(tc, test_removal_timeout_is_cleanup_failed);
	tcase_add_test(tc, test_removal_failure_is_cleanup_failed);
	tcase_add_test(tc, test_removal_that_cannot_start_is_cleanup_failed);
	tcase_add_test(tc, test_second_removal_that_cannot_be_scheduled_is_cleanup_failed);
	tcase_add_test(tc, test_no_such_container_is_gone);
	tcase_add_test(tc, test_removal_in_progress_is_settled_by_the_next);
	tcase_add_test(tc, test_removal_in_progress_adds_one_round);
	tcase_add_test(tc, test_run_dir_removal_failure_is_only_logged);
	tcase_add_test(tc, test_run_dir_that_cannot_be_made);
	tcase_add_test(tc, test_deadline_that_cannot_be_armed);
	tcase_add_test(tc, test_bind_deadline);
	tcase_add_test(tc, test_binding_refused);
	tcase_add_test(tc, test_bound_from_another_link_is_ignored);
	tcase_add_test(tc, test_workspace_changed_before_docker_run);
	tcase_add_test(tc, test_docker_run_that_cannot_start);
	tcase_add_test(tc, test_brokerd_lost_fails_bound_turns_and_reconnects_for_waiting_ones);
	tcase_add_test(tc, test_brokerd_that_never_comes_up);
	tcase_add_test(tc, test_cancel_only_from_the_peer_that_started_it);
	tcase_add_test(tc, test_turn_run_checked_field_by_field);
	tcase_add_test(tc, test_too_many_turns_and_shutdown_refuse_at_once);
	tcase_add_test(tc, test_shutdown_without_turns_is_idle_at_once);
	tcase_add_test(tc, test_shutdown_waits_for_every_removal);
	tcase_add_test(tc, test_precheck_without_config);
	suite_add_tcase(s, tc);
	TCase *pc = tcase_create("precheck");
	tcase_add_checked_fixture(pc, setup_precheck, teardown_precheck);
	tcase_set_timeout(pc, 60);
	tcase_add_test(pc, test_precheck_phases);
	tcase_add_test(pc, test_precheck_results);
	tcase_add_test(pc, test_precheck_deadline_kills_and_removes);
	tcase_add_test(pc, test_precheck_cancel_and_statd_gone);
	tcase_add_test(pc, test_precheck_shutdown_waits_for_removals);
	tcase_add_test(pc, test_precheck_run_checked_field_by_field);
	tcase_add_test(pc, test_precheck_refused_at_once);
	suite_add_tcase(s, pc);
	TCase *wc = tcase_create("spares");
	tcase_add_checked_fixture(wc, setup_spares, teardown);
	tcase_set_timeout(wc, 60);
	tcase_add_test(wc, test_warm_turn_replies_through_its_spare);
	tcase_add_test(wc, test_warm_turn_that_ends_before_its_input_removes_the_spare);
	tcase_add_test(wc, test_spare_that_takes_no_input_falls_back_cold);
	tcase_add_test(wc, test_spare_that_ends_before_its_input_falls_back_cold);
	tcase_add_test(wc, test_cold_when_no_spare_and_no_refill_after_cancel);
	suite_add_tcase(s, wc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
