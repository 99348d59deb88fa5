/* SPDX-License-Identifier: Apache-2.0 */
/* The turn machine's effects in the daemon (runnerd/turn.h): docker CLI children
 * (proc.c), timers on the loop, run dirs (rundir.c), the brokerd link (broker.c) and the
 * statd links. Nothing here decides anything; turn.c does. */
#include "config.h"

#include <sys/stat.h>

#include "common/log.h"
#include "common/memfd.h"
#include "common/timer.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

static uint64_t op_now_ms(void *owner)
{
	return rts_now_ms();
}

static int op_timer_start(void *owner, uint64_t after_ms, void (*fn)(void *arg), void *arg,
			  struct rts_timer **ret)
{
	struct runnerd *rd = owner;
	return rts_timer_start(rd->event, after_ms, 10, fn, arg, ret);
}

static void op_timer_stop(void *owner, struct rts_timer *t)
{
	rts_timer_stop(t);
}

static int op_run_dir_create(void *owner, const char *turn_id)
{
	return runnerd_run_dir_create(owner, turn_id);
}

static int op_run_dir_remove(void *owner, const char *turn_id)
{
	return runnerd_run_dir_remove(owner, turn_id);
}

static int op_workspace_check(void *owner, const char *path, int fd)
{
	struct stat a, b;
	if (lstat(path, &a) < 0)
		return -errno;
	if (fstat(fd, &b) < 0)
		return -errno;
	if (!S_ISDIR(a.st_mode) || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -ESTALE;
	return 0;
}

static int op_spawn(void *owner, char *const argv[], char *input, size_t input_len, size_t out_max,
		    uint64_t timeout_ms, runnerd_proc_done_t done, void *arg, struct runnerd_proc **ret)
{
	struct runnerd *rd = owner;
	return runnerd_proc_spawn(rd->event, argv, rd->child_env, input, input_len, out_max, timeout_ms, done, arg,
				  ret);
}

static void op_kill(void *owner, struct runnerd_proc *p)
{
	runnerd_proc_kill(p);
}

static void op_detach(void *owner, struct runnerd_proc *p)
{
	runnerd_proc_detach(p);
}

static pid_t op_pid(void *owner, const struct runnerd_proc *p)
{
	return runnerd_proc_pid(p);
}

static void op_broker_want(void *owner)
{
	runnerd_broker_want(owner);
}

static uint64_t op_broker_bind(void *owner, const struct rts_msg_broker_bind *m)
{
	struct runnerd *rd = owner;
	/* A send failure fails the link, and the link's loss fails the turn. */
	(void)rts_link_send_broker_bind(rd->broker.link, m);
	return rd->broker.gen;
}

static void op_broker_close(void *owner, uint64_t gen, const char *turn_id)
{
	struct runnerd *rd = owner;
	if (gen == rd->broker.gen)
		(void)rts_link_send_broker_close(rd->broker.link, &(struct rts_msg_broker_close){.turn_id = turn_id});
}

static void op_turn_done(void *owner, struct runnerd_statd *peer, const struct rts_msg_turn_done *m)
{
	int r = rts_link_send_turn_done(peer->link, m);
	if (r < 0)
		log_warning_errno(r, "cannot send the result of turn %s to statd: %m", m->turn_id);
}

static int op_precheck_dir_create(void *owner, const char *id)
{
	return runnerd_precheck_dir_create(owner, id);
}

static int op_precheck_dir_remove(void *owner, const char *id)
{
	return runnerd_precheck_dir_remove(owner, id);
}

static uint64_t op_precheck_bind(void *owner, const struct rts_msg_precheck_bind *m)
{
	struct runnerd *rd = owner;
	/* A send failure fails the link, and the link's loss fails the precheck. */
	(void)rts_link_send_precheck_bind(rd->broker.link, m);
	return rd->broker.gen;
}

static void op_precheck_done(void *owner, struct runnerd_statd *peer, const struct rts_msg_precheck_done *m)
{
	int r = rts_link_send_precheck_done(peer->link, m);
	if (r < 0)
		log_warning_errno(r, "cannot send the result of precheck %s to statd: %m", m->precheck_id);
}

static void op_idle(void *owner)
{
	struct runnerd *rd = owner;
	sd_event_exit(rd->event, 0);
}

static void op_finished(void *owner, enum rts_turn_status status, uint64_t duration_ms)
{
	runnerd_metrics_turn_finished(owner, status, duration_ms);
}

static const struct runnerd_turn_ops runnerd_turn_ops = {
	.now_ms = op_now_ms,
	.timer_start = op_timer_start,
	.timer_stop = op_timer_stop,
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
	.finished = op_finished,
};

/* ---- the rich machine's own ops (rich.h) ---- */

static int op_dir_open(void *owner, const char *prefix)
{
	return runnerd_rich_dir_open(owner, prefix);
}

static int op_dir_remove(void *owner, const char *prefix)
{
	return runnerd_rich_dir_remove(owner, prefix);
}

static uint64_t op_rich_bind(void *owner, const struct rts_msg_rich_bind *m)
{
	struct runnerd *rd = owner;
	(void)rts_link_send_rich_bind(rd->broker.link, m);
	return rd->broker.gen;
}

static void op_rich_wait_ready(void *owner, uint64_t gen, const struct rts_msg_rich_wait_ready *m)
{
	struct runnerd *rd = owner;
	if (gen == rd->broker.gen)
		(void)rts_link_send_rich_wait_ready(rd->broker.link, m);
}

static void op_rich_unbind(void *owner, uint64_t gen, const char *channel_hash)
{
	struct runnerd *rd = owner;
	if (gen == rd->broker.gen)
		(void)rts_link_send_rich_unbind(rd->broker.link, &(struct rts_msg_rich_unbind){.channel_hash = channel_hash});
}

static void op_rich_turn(void *owner, uint64_t gen, const struct rts_msg_broker_rich_turn *m)
{
	struct runnerd *rd = owner;
	if (gen == rd->broker.gen) {
		(void)rts_link_send_broker_rich_turn(rd->broker.link, m);
		return;
	}
	/* A stale link: brokerd never hears of it, and the turn ends with the link's loss. */
	close(m->fd);
}

static void op_rich_cancel(void *owner, uint64_t gen, const char *turn_id)
{
	struct runnerd *rd = owner;
	if (gen == rd->broker.gen)
		(void)rts_link_send_broker_rich_cancel(rd->broker.link, &(struct rts_msg_broker_rich_cancel){.turn_id = turn_id});
}

static void op_rich_state(void *owner, struct runnerd_statd *peer, const struct rts_msg_rich_state *m)
{
	int r = rts_link_send_rich_state(peer->link, m);
	if (r < 0)
		log_warning_errno(r, "cannot answer statd about channel %.12s: %m", m->channel_hash);
}

static void op_rich_turn_done(void *owner, struct runnerd_statd *peer, struct rts_msg_rich_turn_done *m)
{
	/* The fd column is fixed per message: "no reply" is an empty sealed memfd. */
	if (m->fd < 0)
		m->fd = rts_memfd_from_buffer("rts-rich-reply", "", 0);
	if (m->fd < 0) {
		log_error_errno(m->fd, "turn %s: cannot make an empty memfd for its answer: %m", m->turn_id);
		return;
	}
	int r = rts_link_send_rich_turn_done(peer->link, m);
	if (r < 0)
		log_warning_errno(r, "cannot send the result of rich turn %s to statd: %m", m->turn_id);
}

static void op_rich_synced(void *owner, struct runnerd_statd *peer, uint32_t removed)
{
	(void)rts_link_send_rich_synced(peer->link, &(struct rts_msg_rich_synced){.removed = removed});
}

static const struct runnerd_rich_ops runnerd_rich_ops = {
	.dir_open = op_dir_open,
	.dir_remove = op_dir_remove,
	.bind = op_rich_bind,
	.wait_ready = op_rich_wait_ready,
	.unbind = op_rich_unbind,
	.turn = op_rich_turn,
	.cancel = op_rich_cancel,
	.state = op_rich_state,
	.turn_done = op_rich_turn_done,
	.synced = op_rich_synced,
};

void runnerd_turns_attach(struct runnerd *rd)
{
	runnerd_riches_init(&rd->riches, &runnerd_turn_ops, &runnerd_rich_ops, rd,
			    &(struct runnerd_rich_config){.cfg = rd->cfg, .uid = rd->uid, .gid = rd->gid});
	runnerd_turns_init(&rd->turns, &runnerd_turn_ops, rd,
			   &(struct runnerd_turn_config){
				   .cfg = rd->cfg,
				   .public_tools = rd->public_tools,
				   .uid = rd->uid,
				   .gid = rd->gid,
			   });
}
