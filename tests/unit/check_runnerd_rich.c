/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's rich channels (runnerd/rich.h), driven through their inputs with recording ops,
 * fake docker CLI children and a fake clock: no Docker, no sockets, no root.
 *
 * Every test also checks that nothing is left behind at the end: no timer, no fd, no child
 * the machine still waits for. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "runnerd/rich.h"
#include "tests/unit/machine_rig.h"
#include "tests/unit/seqpacket_rig.h"

#define CHANNEL "guild-1/rich"
#define T1 "0000000000000001"
#define T2 "0000000000000002"
#define IMAGE_A "sha256:aaaa\n"
#define IMAGE_B "sha256:bbbb\n"

struct runnerd_statd {
	char name[8];
};
static struct runnerd_statd peer1 = {"p1"}, peer2 = {"p2"};

/* A docker CLI child the test ends with finish(). */
struct runnerd_proc {
	struct runnerd_proc *next;
	char kind[16]; /* image, running, run, rm, logs */
	char **argv;
	uint64_t timeout_ms;
	runnerd_proc_done_t done;
	void *arg;
	bool killed, detached, exited;
};

static struct {
	int dir_result;	   /* < 0: dir_open fails */
	int ws_result;	   /* workspace_check */
	bool broker_up_at_once;
	uint64_t gen;
	struct runnerd_proc *procs;
	char **run_argv;
} fk;

static struct rts_config *cfg;
static struct runnerd_riches rs;
static int fds_at_start;
static char hash[RTS_HASH_HEX_LEN + 1];
static char prefix[RUNNERD_RICH_PREFIX_LEN + 1];

static const char *tname(const char *id)
{
	static char buf[8];
	snprintf(buf, sizeof(buf), "t%c", id[RTS_TURN_ID_LEN - 1]);
	return buf;
}

static const char *status_name(uint32_t s)
{
	static const char *const names[] = {"ok", "error", "timeout", "cancelled", "cleanup_failed"};
	return s < 5 ? names[s] : "?";
}

static const char *state_name(uint32_t s)
{
	return s == RTS_RICH_STATE_READY ? "ready" : s == RTS_RICH_STATE_STOPPED ? "stopped" : "failed";
}

/* ---- turn.h's ops ---- */

static int op_workspace_check(void *owner, const char *path, int fd)
{
	ck_assert_int_ge(fcntl(fd, F_GETFD), 0);
	return fk.ws_result;
}

static int op_spawn(void *owner, char *const argv[], char *input, size_t input_len, size_t out_max,
		    uint64_t timeout_ms, runnerd_proc_done_t done, void *arg, struct runnerd_proc **ret)
{
	ck_assert_str_eq(argv[0], RTS_DOCKER);
	ck_assert_ptr_null(input);
	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	const char *kind = strcmp(argv[1], "image") == 0	 ? "image"
			   : strcmp(argv[1], "container") == 0 ? "running"
			   : strcmp(argv[1], "run") == 0	 ? "run"
			   : strcmp(argv[1], "rm") == 0	 ? "rm"
			   : strcmp(argv[1], "logs") == 0	 ? "logs"
							 : "?";
	snprintf(p->kind, sizeof(p->kind), "%s", kind);
	p->argv = rts_strv_dup((char **)argv);
	p->timeout_ms = timeout_ms;
	p->done = done;
	p->arg = arg;
	p->next = fk.procs;
	fk.procs = p;
	if (strcmp(kind, "run") == 0) {
		rts_strv_free(fk.run_argv);
		fk.run_argv = rts_strv_dup((char **)argv);
	}
	rig_logf("spawn %s", kind);
	*ret = p;
	return 0;
}

static void op_kill(void *owner, struct runnerd_proc *p)
{
	p->killed = true;
}

static void op_detach(void *owner, struct runnerd_proc *p)
{
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
		runnerd_riches_broker_up(&rs);
}

static const struct runnerd_turn_ops ops = {
	.now_ms = rig_op_now_ms,
	.timer_start = rig_op_timer_start,
	.timer_stop = rig_op_timer_stop,
	.workspace_check = op_workspace_check,
	.spawn = op_spawn,
	.kill = op_kill,
	.detach = op_detach,
	.pid = op_pid,
	.broker_want = op_broker_want,
};

/* ---- rich.h's ops ---- */

static int op_dir_open(void *owner, const char *p)
{
	ck_assert_str_eq(p, prefix);
	if (fk.dir_result < 0)
		return fk.dir_result;
	rig_logf("dir");
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* stands for the listening broker.sock */
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int op_dir_remove(void *owner, const char *p)
{
	ck_assert_str_eq(p, prefix);
	rig_logf("rmdir");
	return 0;
}

static uint64_t op_bind(void *owner, const struct rts_msg_rich_bind *m)
{
	ck_assert_int_ge(m->fd, 0);
	close(m->fd);
	ck_assert_str_eq(m->channel, CHANNEL);
	ck_assert_str_eq(m->channel_hash, hash);
	rig_logf("bind %s gen=%llu", m->profile, (unsigned long long)fk.gen);
	return fk.gen;
}

static void op_wait_ready(void *owner, uint64_t gen, const struct rts_msg_rich_wait_ready *m)
{
	rig_logf("wait gen=%llu", (unsigned long long)gen);
}

static void op_unbind(void *owner, uint64_t gen, const char *h)
{
	rig_logf("unbind gen=%llu", (unsigned long long)gen);
}

static void op_turn(void *owner, uint64_t gen, const struct rts_msg_broker_rich_turn *m)
{
	ck_assert_int_ge(m->fd, 0);
	close(m->fd);
	ck_assert_str_eq(m->principal_id, "p42");
	rig_logf("bturn %s gen=%llu", tname(m->turn_id), (unsigned long long)gen);
}

static void op_cancel(void *owner, uint64_t gen, const char *turn_id)
{
	rig_logf("bcancel %s gen=%llu", tname(turn_id), (unsigned long long)gen);
}

static void op_state(void *owner, struct runnerd_statd *peer, const struct rts_msg_rich_state *m)
{
	ck_assert_str_eq(m->channel_hash, hash);
	if (m->error)
		rig_logf("state %s #%u %s %d", peer->name, m->seq, state_name(m->state), m->error);
	else
		rig_logf("state %s #%u %s", peer->name, m->seq, state_name(m->state));
}

static void op_turn_done(void *owner, struct runnerd_statd *peer, struct rts_msg_rich_turn_done *m)
{
	rig_logf("done %s %s %s%s", peer->name, tname(m->turn_id), status_name(m->status), m->fd >= 0 ? " +reply" : "");
	if (m->fd >= 0)
		close(m->fd);
}

static void op_synced(void *owner, struct runnerd_statd *peer, uint32_t removed)
{
	rig_logf("synced %s %u", peer->name, removed);
}

static const struct runnerd_rich_ops rops = {
	.dir_open = op_dir_open,
	.dir_remove = op_dir_remove,
	.bind = op_bind,
	.wait_ready = op_wait_ready,
	.unbind = op_unbind,
	.turn = op_turn,
	.cancel = op_cancel,
	.state = op_state,
	.turn_done = op_turn_done,
	.synced = op_synced,
};

/* ---- the rig ---- */

static void setup(void)
{
	rts_log_set_max_priority(LOG_EMERG);
	memset(&fk, 0, sizeof(fk));
	fk.gen = 1;
	fk.broker_up_at_once = true;
	fake_timers_reset();
	char err[512];
	cleanup_json json_object *o = NULL;
	const char *why;
	const char *doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\","
			  "\"rich\":{\"image\":\"rich:local\",\"profiles\":{\"default\":{\"model\":\"claude\"},"
			  "\"other\":{\"model\":\"claude\",\"prompt\":\"x\"}},\"startTimeoutMs\":90000,"
			  "\"turnTimeoutMs\":300000}}";
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 8, &o, &why), 0);
	cfg = rts_config_from_json(o, "test.json", err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
	rts_channel_hash(CHANNEL, hash);
	memcpy(prefix, hash, RUNNERD_RICH_PREFIX_LEN);
	prefix[RUNNERD_RICH_PREFIX_LEN] = '\0';
	fds_at_start = rig_count_open_fds();
	runnerd_riches_init(&rs, &ops, &rops, NULL, &(struct runnerd_rich_config){.cfg = cfg, .uid = 1000, .gid = 1000});
}

static void teardown(void)
{
	runnerd_riches_free(&rs);
	ck_assert_uint_eq(rs.n, 0);
	ck_assert_uint_eq(fake_timers_pending(), 0);
	for (struct runnerd_proc *p = fk.procs, *next; p; p = next) {
		next = p->next;
		ck_assert_msg(p->exited || p->detached, "a %s child left running", p->kind);
		rts_strv_free(p->argv);
		free(p);
	}
	ck_assert_int_eq(rig_count_open_fds(), fds_at_start);
	rig_log_reset();
	rts_strv_free(fk.run_argv);
	rts_config_free(cfg);
}

/* The child of kind still running (the newest). */
static struct runnerd_proc *proc_of(const char *kind)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (!p->exited && strcmp(p->kind, kind) == 0)
			return p;
	ck_abort_msg("no %s child runs", kind);
	return NULL;
}

/* End the running child of kind with exit status and stdout out. */
static void finish(const char *kind, int status, const char *out, const char *err)
{
	struct runnerd_proc *p = proc_of(kind);
	p->exited = true;
	struct runnerd_proc_result r = {
		.exited = true, .status = status, .out = out ? out : "", .out_len = out ? strlen(out) : 0,
		.err = err ? err : "", .err_len = err ? strlen(err) : 0, .killed = p->killed,
	};
	if (!p->detached)
		p->done(p, &r, p->arg);
}

static int ensure(struct runnerd_statd *peer, uint32_t seq, const char *profile)
{
	cleanup_free char *ws = rts_xasprintf("%s/%s", cfg->workspace_root, hash);
	struct rts_msg_rich_ensure m = {.seq = seq, .channel = CHANNEL, .channel_hash = hash, .profile = profile,
					.workspace = ws, .fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
	int r = runnerd_rich_ensure(&rs, peer, &m);
	ck_assert_int_eq(m.fd, -1);
	return r;
}

static int turn(struct runnerd_statd *peer, const char *id)
{
	struct rts_msg_rich_turn m = {.turn_id = id, .channel = CHANNEL, .channel_hash = hash, .speaker_id = "42",
				      .speaker_name = "Alice", .principal_id = "p42", .profile = "default",
				      .fd = open("/dev/null", O_RDONLY | O_CLOEXEC)};
	int r = runnerd_rich_turn(&rs, peer, &m);
	ck_assert_int_eq(m.fd, -1);
	return r;
}

static void bound(int32_t result)
{
	runnerd_rich_bound(&rs, fk.gen, hash, result);
}

static void ready(int32_t result)
{
	runnerd_rich_ready(&rs, fk.gen,
			   &(struct rts_msg_rich_ready){.channel_hash = hash, .result = result, .capabilities = 3});
}

static void broker_done(const char *id, uint32_t status)
{
	struct rts_msg_broker_rich_done m = {.turn_id = id, .status = status, .calls = 2,
					     .fd = open("/dev/null", O_RDONLY | O_CLOEXEC)};
	runnerd_rich_done(&rs, fk.gen, &m);
	if (m.fd >= 0)
		close(m.fd); /* the link closes what the handler left */
}

static enum runnerd_rich_container container(void)
{
	struct runnerd_rich *ch = runnerd_rich_find(&rs, hash);
	return ch ? runnerd_rich_container_of(ch) : RUNNERD_RICH_NONE;
}

/* NONE -> READY through a new container: what every test starts from. */
static void make_ready(void)
{
	size_t m = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 1, "default"), 0);
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	finish("run", 0, "c0ffee\n", NULL);
	ready(0);
	rig_expect_since(m, "spawn image", "dir", "want", "bind default gen=1", "spawn run", "wait gen=1",
			 "state p1 #1 ready", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
}

/* The removal after whatever started it: two docker rm -f, a second apart, then the
 * broker directory. */
static void removal(void)
{
	finish("rm", 0, NULL, NULL);
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish("rm", 0, NULL, NULL);
}

/* ---- tests ---- */

START_TEST(test_start_and_turn)
{
	make_ready();
	/* The argv of a rich container: detached, named, labelled, with the generation. */
	char *name = runnerd_rich_name(cfg->installation_id, hash);
	ck_assert_str_eq(fk.run_argv[2], "-d");
	ck_assert_str_eq(fk.run_argv[4], name);
	free(name);
	/* Its broker directory, the one dir_open made: runRoot/rich-<prefix>. */
	cleanup_free char *mount =
		rts_xasprintf("type=bind,source=%s/rich-%s,target=/run/broker,readonly", cfg->run_root, prefix);
	bool mounted = false;
	for (char **a = fk.run_argv; *a; a++)
		mounted |= strcmp(*a, mount) == 0;
	ck_assert_msg(mounted, "no %s", mount);
	size_t m = rig_mark();
	ck_assert_int_eq(turn(&peer1, T1), 0);
	/* statd's ENSURE before each turn: checked again (image and running), then it goes. */
	ck_assert_int_eq(ensure(&peer1, 2, "default"), 0);
	rig_expect_since(m, "bturn t1 gen=1", "spawn image", NULL);
	finish("image", 0, IMAGE_A, NULL);
	finish("running", 0, "true\n", NULL);
	rig_expect_since(m, "bturn t1 gen=1", "spawn image", "spawn running", "state p1 #2 ready", NULL);
	m = rig_mark();
	broker_done(T1, RTS_TURN_OK);
	rig_expect_since(m, "done p1 t1 ok +reply", NULL);
	/* A late answer for it is nothing. */
	broker_done(T1, RTS_TURN_OK);
	rig_expect_since(m, "done p1 t1 ok +reply", NULL);
}
END_TEST

START_TEST(test_turn_waits_for_the_check)
{
	make_ready();
	size_t m = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 2, "default"), 0);
	ck_assert_int_eq(turn(&peer1, T1), 0);
	/* Not sent while the generation is checked. */
	rig_expect_since(m, "spawn image", NULL);
	finish("image", 0, IMAGE_A, NULL);
	finish("running", 0, "true\n", NULL);
	rig_expect_since(m, "spawn image", "spawn running", "state p1 #2 ready", "bturn t1 gen=1", NULL);
	/* One at a time: a second turn waits for the first. */
	ck_assert_int_eq(turn(&peer1, T2), 0);
	rig_expect_since(m, "spawn image", "spawn running", "state p1 #2 ready", "bturn t1 gen=1", NULL);
	broker_done(T1, RTS_TURN_ERROR);
	rig_expect_since(m, "spawn image", "spawn running", "state p1 #2 ready", "bturn t1 gen=1", "done p1 t1 error",
			 "bturn t2 gen=1", NULL);
	broker_done(T2, RTS_TURN_OK);
}
END_TEST

START_TEST(test_new_generation_replaces)
{
	make_ready();
	size_t m = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 2, "default"), 0);
	/* The image was rebuilt under the same tag: another ID, another generation. */
	finish("image", 0, IMAGE_B, NULL);
	finish("running", 0, "true\n", NULL);
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", NULL);
	removal();
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "dir",
			 "want", "bind default gen=1", NULL);
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "dir",
			 "want", "bind default gen=1", "spawn run", "wait gen=1", "state p1 #2 ready", NULL);
	/* Another profile is another generation too. */
	m = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 3, "other"), 0);
	finish("image", 0, IMAGE_B, NULL);
	finish("running", 0, "true\n", NULL);
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", NULL);
	removal();
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "dir",
			 "want", "bind other gen=1", "spawn run", "wait gen=1", "state p1 #3 ready", NULL);
}
END_TEST

START_TEST(test_dead_container_replaced)
{
	make_ready();
	size_t m = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 2, "default"), 0);
	finish("image", 0, IMAGE_A, NULL);
	finish("running", 0, "false\n", NULL);
	rig_expect_since(m, "spawn image", "spawn running", "unbind gen=1", "spawn rm", NULL);
	removal();
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
}
END_TEST

START_TEST(test_turn_deadline_logs_and_removes)
{
	make_ready();
	turn(&peer1, T1);
	size_t m = rig_mark();
	fake_advance(cfg->rich.turn_timeout_ms - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	/* Cancelled at brokerd, the worker's last lines, the exact container force-removed;
	 * the answer once it is gone. */
	rig_expect_since(m, "bcancel t1 gen=1", "unbind gen=1", "spawn logs", NULL);
	struct runnerd_proc *logs = proc_of("logs");
	ck_assert_str_eq(logs->argv[2], "--tail");
	ck_assert_str_eq(logs->argv[3], "200");
	finish("logs", 0, "{\"a\":1}\n\x1b[31mred\n", NULL);
	removal();
	rig_expect_since(m, "bcancel t1 gen=1", "unbind gen=1", "spawn logs", "spawn rm", "spawn rm", "rmdir",
			 "done p1 t1 timeout", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_NONE);
	/* brokerd's CANCELLED for it comes later: nothing. */
	broker_done(T1, RTS_TURN_CANCELLED);
	rig_expect_since(m, "bcancel t1 gen=1", "unbind gen=1", "spawn logs", "spawn rm", "spawn rm", "rmdir",
			 "done p1 t1 timeout", NULL);
}
END_TEST

START_TEST(test_cancel_force_removes)
{
	make_ready();
	turn(&peer1, T1);
	size_t m = rig_mark();
	ck_assert(runnerd_rich_cancel(&rs, &peer1, T1));
	rig_expect_since(m, "bcancel t1 gen=1", "unbind gen=1", "spawn rm", NULL);
	/* The removal fails: the answer says so, and no container is started over it. */
	finish("rm", 1, NULL, "Error: cannot remove");
	rig_expect_since(m, "bcancel t1 gen=1", "unbind gen=1", "spawn rm", "rmdir", "done p1 t1 cleanup_failed", NULL);
	/* Not a turn of this peer's, or no rich turn at all. */
	ck_assert(!runnerd_rich_cancel(&rs, &peer1, T2));
}
END_TEST

START_TEST(test_cancel_before_the_container_is_ready)
{
	ck_assert_int_eq(ensure(&peer1, 1, "default"), 0);
	turn(&peer1, T1);
	size_t m = rig_mark();
	ck_assert(runnerd_rich_cancel(&rs, &peer2, T1)); /* another peer's: untouched */
	rig_expect_since(m, NULL);
	ck_assert(runnerd_rich_cancel(&rs, &peer1, T1));
	rig_expect_since(m, "done p1 t1 cancelled", NULL);
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
}
END_TEST

START_TEST(test_start_timeout)
{
	ck_assert_int_eq(ensure(&peer1, 1, "default"), 0);
	turn(&peer1, T1);
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	finish("run", 0, NULL, NULL);
	size_t m = rig_mark();
	ready(-ETIME);
	rig_expect_since(m, "unbind gen=1", "spawn logs", NULL);
	finish("logs", 0, "starting\n", NULL);
	removal();
	rig_expect_since(m, "unbind gen=1", "spawn logs", "spawn rm", "spawn rm", "rmdir", "state p1 #1 failed -62",
			 "done p1 t1 error", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_NONE);
}
END_TEST

START_TEST(test_start_failures)
{
	/* docker run fails: whatever it made goes, then FAILED. */
	ensure(&peer1, 1, "default");
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	size_t m = rig_mark();
	finish("run", 125, NULL, "docker: Error response from daemon");
	rig_expect_since(m, "unbind gen=1", "spawn rm", NULL);
	removal();
	rig_expect_since(m, "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "state p1 #1 failed -5", NULL);
	/* brokerd refuses the listener: no container was made, only the directory goes. */
	m = rig_mark();
	ensure(&peer1, 2, "default");
	finish("image", 0, IMAGE_A, NULL);
	bound(-EBUSY);
	rig_expect_since(m, "spawn image", "dir", "want", "bind default gen=1", "rmdir", "state p1 #2 failed -16", NULL);
	/* The image cannot be inspected. */
	m = rig_mark();
	ensure(&peer1, 3, "default");
	finish("image", 1, NULL, "Error: No such image");
	rig_expect_since(m, "spawn image", "state p1 #3 failed -5", NULL);
	/* The broker directory cannot be made. */
	m = rig_mark();
	fk.dir_result = -EACCES;
	ensure(&peer1, 4, "default");
	finish("image", 0, IMAGE_A, NULL);
	rig_expect_since(m, "spawn image", "state p1 #4 failed -13", NULL);
	fk.dir_result = 0;
	/* The workspace changed under statd's fd. */
	m = rig_mark();
	fk.ws_result = -ESTALE;
	ensure(&peer1, 5, "default");
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	rig_expect_since(m, "spawn image", "dir", "want", "bind default gen=1", "unbind gen=1", "rmdir",
			 "state p1 #5 failed -116", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_NONE);
}
END_TEST

START_TEST(test_stop)
{
	make_ready();
	size_t m = rig_mark();
	struct rts_msg_rich_stop s = {.seq = 9, .channel_hash = hash, .reason = RTS_RICH_STOP_OFF};
	ck_assert_int_eq(runnerd_rich_stop(&rs, &peer1, &s), 0);
	rig_expect_since(m, "unbind gen=1", "spawn rm", NULL);
	removal();
	rig_expect_since(m, "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "state p1 #9 stopped", NULL);
	ck_assert_ptr_null(runnerd_rich_find(&rs, hash)); /* forgotten */
	/* A channel without a container: STOPPED at once. */
	m = rig_mark();
	ck_assert_int_eq(runnerd_rich_stop(&rs, &peer1, &s), 0);
	rig_expect_since(m, "state p1 #9 stopped", NULL);
	/* A bad reason or hash drops the peer. */
	s.reason = RTS_RICH_STOP_REASONS;
	ck_assert_int_eq(runnerd_rich_stop(&rs, &peer1, &s), -EBADMSG);
	s.reason = 0;
	s.channel_hash = "nothex";
	ck_assert_int_eq(runnerd_rich_stop(&rs, &peer1, &s), -EBADMSG);
}
END_TEST

START_TEST(test_stop_then_ensure)
{
	make_ready();
	size_t m = rig_mark();
	struct rts_msg_rich_stop s = {.seq = 5, .channel_hash = hash, .reason = RTS_RICH_STOP_FRESH};
	runnerd_rich_stop(&rs, &peer1, &s);
	ensure(&peer1, 6, "default"); /* the next turn's, while the removal runs */
	removal();
	rig_expect_since(m, "unbind gen=1", "spawn rm", "spawn rm", "rmdir", "state p1 #5 stopped", "spawn image", NULL);
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
}
END_TEST

START_TEST(test_found_adopted_or_replaced)
{
	struct runnerd_rich_found f = {.channel_hash = "", .running = true};
	snprintf(f.channel_hash, sizeof(f.channel_hash), "%s", hash);
	char *name = runnerd_rich_name(cfg->installation_id, hash);
	snprintf(f.name, sizeof(f.name), "%s", name);
	free(name);
	/* Its generation is what this config and image make: adopted, no docker run. */
	char gen[RUNNERD_GENERATION_LEN + 1];
	runnerd_rich_generation(cfg, rts_rich_profile_find(&cfg->rich, "default"), "sha256:aaaa", 1000, 1000, gen);
	memcpy(f.generation, gen, sizeof(gen));
	runnerd_rich_found(&rs, &f);
	ck_assert_int_eq(container(), RUNNERD_RICH_FOUND);
	size_t m = rig_mark();
	ensure(&peer1, 1, "default");
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	ready(0);
	rig_expect_since(m, "spawn image", "dir", "want", "bind default gen=1", "wait gen=1", "state p1 #1 ready", NULL);
	runnerd_riches_free(&rs);
	/* Another generation: replaced. */
	snprintf(f.generation, sizeof(f.generation), "0123456789abcdef");
	runnerd_rich_found(&rs, &f);
	m = rig_mark();
	ensure(&peer1, 2, "default");
	finish("image", 0, IMAGE_A, NULL);
	rig_expect_since(m, "spawn image", "spawn rm", NULL);
	removal();
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	rig_expect_since(m, "spawn image", "spawn rm", "spawn rm", "dir", "want", "bind default gen=1", "spawn run",
			 "wait gen=1", "state p1 #2 ready", NULL);
	runnerd_riches_free(&rs);
	/* The current generation, but runRoot lost its broker directory (systemd made the
	 * RuntimeDirectory anew): its /run/broker reaches nothing, so it is replaced. */
	memcpy(f.generation, gen, sizeof(gen));
	f.dir_gone = true;
	runnerd_rich_found(&rs, &f);
	m = rig_mark();
	ensure(&peer1, 3, "default");
	finish("image", 0, IMAGE_A, NULL);
	rig_expect_since(m, "spawn image", "spawn rm", NULL);
	removal();
	bound(0);
	finish("run", 0, NULL, NULL);
	ready(0);
	rig_expect_since(m, "spawn image", "spawn rm", "spawn rm", "dir", "want", "bind default gen=1", "spawn run",
			 "wait gen=1", "state p1 #3 ready", NULL);
}
END_TEST

START_TEST(test_sync_removes_unclaimed)
{
	struct runnerd_rich_found f = {.running = true};
	snprintf(f.channel_hash, sizeof(f.channel_hash), "%s", hash);
	runnerd_rich_found(&rs, &f);
	size_t m = rig_mark();
	/* peer1's sync claimed nothing: the container goes. */
	runnerd_rich_sync(&rs, &peer1, 0);
	rig_expect_since(m, "spawn rm", "synced p1 1", NULL);
	removal();
	ck_assert_ptr_null(runnerd_rich_find(&rs, hash));
	/* Claimed by an ENSURE of that link: kept. */
	make_ready();
	m = rig_mark();
	runnerd_rich_sync(&rs, &peer1, 1);
	rig_expect_since(m, "synced p1 0", NULL);
	/* Another statd link's sync, which never claimed it: removed. */
	runnerd_rich_sync(&rs, &peer2, 0);
	rig_expect_since(m, "synced p1 0", "unbind gen=1", "spawn rm", "synced p2 1", NULL);
	removal();
}
END_TEST

START_TEST(test_broker_lost_keeps_the_container)
{
	make_ready();
	turn(&peer1, T1);
	size_t m = rig_mark();
	runnerd_riches_broker_lost(&rs, fk.gen, false);
	/* The turn fails; the container runs on, unbound. */
	rig_expect_since(m, "done p1 t1 error", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_FOUND);
	fk.gen = 2;
	m = rig_mark();
	ensure(&peer1, 2, "default");
	finish("image", 0, IMAGE_A, NULL);
	bound(0);
	ready(0);
	/* Bound again, no docker run, no removal. */
	rig_expect_since(m, "spawn image", "dir", "want", "bind default gen=2", "wait gen=2", "state p1 #2 ready", NULL);
	/* brokerd cannot be reached at all: FAILED, the container still kept. */
	runnerd_riches_broker_lost(&rs, fk.gen, false);
	fk.broker_up_at_once = false;
	m = rig_mark();
	ensure(&peer1, 3, "default");
	finish("image", 0, IMAGE_A, NULL);
	runnerd_riches_broker_lost(&rs, 3, true);
	rig_expect_since(m, "spawn image", "dir", "want", "state p1 #3 failed -107", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_FOUND);
}
END_TEST

START_TEST(test_statd_gone_and_shutdown)
{
	make_ready();
	turn(&peer1, T1);
	size_t m = rig_mark();
	runnerd_riches_forget_peer(&rs, &peer1);
	/* Cancelled at brokerd, not answered, the container kept. */
	rig_expect_since(m, "bcancel t1 gen=1", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
	turn(&peer2, T2);
	ensure(&peer2, 7, "default");
	m = rig_mark();
	runnerd_riches_shutdown(&rs);
	rig_expect_since(m, "bcancel t2 gen=1", "done p2 t2 cancelled", "state p2 #7 failed -108", NULL);
	ck_assert_int_eq(container(), RUNNERD_RICH_READY);
}
END_TEST

START_TEST(test_refusals)
{
	cleanup_free char *ws = rts_xasprintf("%s/%s", cfg->workspace_root, hash);
	/* A hash of another key, a workspace elsewhere: the peer is dropped. */
	struct rts_msg_rich_ensure m = {.seq = 1, .channel = "other", .channel_hash = hash, .profile = "default",
					.workspace = ws, .fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
	ck_assert_int_eq(runnerd_rich_ensure(&rs, &peer1, &m), -EBADMSG);
	m = (struct rts_msg_rich_ensure){.seq = 1, .channel = CHANNEL, .channel_hash = hash, .profile = "default",
					 .workspace = "/etc", .fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)};
	ck_assert_int_eq(runnerd_rich_ensure(&rs, &peer1, &m), -EBADMSG);
	/* A profile the config does not have: FAILED. */
	size_t mark = rig_mark();
	ck_assert_int_eq(ensure(&peer1, 2, "nosuch"), 0);
	rig_expect_since(mark, "state p1 #2 failed -22", NULL);
	/* A turn without an ENSURE: an error answer. */
	ck_assert_int_eq(turn(&peer1, T1), 0);
	rig_expect_since(mark, "state p1 #2 failed -22", "done p1 t1 error", NULL);
	/* A turn id twice drops the peer. */
	make_ready();
	turn(&peer1, T1);
	ck_assert_int_eq(turn(&peer1, T1), -EBADMSG);
	broker_done(T1, RTS_TURN_OK);
	/* Another channel of the same 16-hex prefix cannot have a container of its own. */
	char other[RTS_HASH_HEX_LEN + 1];
	memcpy(other, hash, sizeof(other));
	other[RTS_HASH_HEX_LEN - 1] = other[RTS_HASH_HEX_LEN - 1] == '0' ? '1' : '0';
	struct runnerd_rich_found f = {.running = true};
	snprintf(f.channel_hash, sizeof(f.channel_hash), "%s", other);
	runnerd_rich_found(&rs, &f); /* refused: logged, not kept */
	ck_assert_ptr_null(runnerd_rich_find(&rs, other));
}
END_TEST

START_TEST(test_log_line)
{
	char out[RUNNERD_RICH_LOG_LINE_MAX + 4];
	runnerd_rich_log_line("a\x1b[31mb\tc", 9, out);
	ck_assert_str_eq(out, "a?[31mb?c");
	char big[1000];
	memset(big, 'x', sizeof(big));
	runnerd_rich_log_line(big, sizeof(big), out);
	ck_assert_uint_eq(strlen(out), RUNNERD_RICH_LOG_LINE_MAX + 3);
	ck_assert_str_eq(out + RUNNERD_RICH_LOG_LINE_MAX, "...");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("runnerd_rich");
	TCase *tc = tcase_create("rich");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_start_and_turn);
	tcase_add_test(tc, test_turn_waits_for_the_check);
	tcase_add_test(tc, test_new_generation_replaces);
	tcase_add_test(tc, test_dead_container_replaced);
	tcase_add_test(tc, test_turn_deadline_logs_and_removes);
	tcase_add_test(tc, test_cancel_force_removes);
	tcase_add_test(tc, test_cancel_before_the_container_is_ready);
	tcase_add_test(tc, test_start_timeout);
	tcase_add_test(tc, test_start_failures);
	tcase_add_test(tc, test_stop);
	tcase_add_test(tc, test_stop_then_ensure);
	tcase_add_test(tc, test_found_adopted_or_replaced);
	tcase_add_test(tc, test_sync_removes_unclaimed);
	tcase_add_test(tc, test_broker_lost_keeps_the_container);
	tcase_add_test(tc, test_statd_gone_and_shutdown);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_log_line);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
