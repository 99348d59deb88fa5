/* SPDX-License-Identifier: Apache-2.0 */
/* The channel queue's effects in the daemon: the ops table joining queue.c to control.sock
 * (control_queue.c), the runnerd link (runnerd.c), the state file, workspaces and timers
 * on the loop. Nothing here decides anything; the queue does. */
#include "config.h"

#include "common/log.h"
#include "common/timer.h"
#include "common/util.h"
#include "statd/statd.h"
#include "statd/workspace.h"

static uint64_t op_now_ms(void *owner)
{
	return rts_now_ms();
}

static int op_timer_start(void *owner, uint64_t after_ms, void (*fn)(void *arg), void *arg,
			  struct rts_timer **ret)
{
	struct statd *d = owner;
	/* Both of the queue's timers are seconds long: a 100 ms slack costs nothing. */
	return rts_timer_start(d->ev, after_ms, 100, fn, arg, ret);
}

static void op_timer_stop(void *owner, struct rts_timer *t)
{
	rts_timer_stop(t);
}

static int op_record_mode(void *owner, const char *channel, enum statd_mode mode)
{
	struct statd *d = owner;
	int r = statd_state_update(d->state, d->cfg->state_file, channel, mode);
	if (r >= 0)
		return r;
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(channel, hash);
	if (r == -E2BIG || r == -EFBIG)
		log_warning("channel %.12s: mode not recorded: the state file would hold more than %u channels or "
			    "%u bytes",
			    hash, STATD_STATE_MAX_CHANNELS, STATD_STATE_MAX_BYTES);
	else
		log_error_errno(r, "state file %s: cannot record mode %s for channel %.12s (the old file and mode "
				   "stay): %m",
				d->cfg->state_file, statd_mode_name(mode), hash);
	return r;
}

static int op_workspace_open(void *owner, const char *channel_hash, char **path, const char **why)
{
	struct statd *d = owner;
	return statd_workspace_open(d->cfg->workspace_root, channel_hash, path, why);
}

static void op_stopped(void *owner)
{
	struct statd *d = owner;
	d->queue_stopped = true;
	statd_maybe_exit(d);
}

void statd_maybe_exit(struct statd *d)
{
	if (d->queue_stopped && statd_prechecks_idle(d))
		sd_event_exit(d->ev, d->exit_code);
}

static const struct statd_queue_ops statd_queue_ops = {
	.now_ms = op_now_ms,
	.timer_start = op_timer_start,
	.timer_stop = op_timer_stop,
	.answer = statd_control_answer,
	.event = statd_control_event,
	.release = statd_control_release,
	.record_mode = op_record_mode,
	.workspace_open = op_workspace_open,
	.connect = statd_link_start,
	.send_run = statd_link_send_run,
	.withdraw = statd_link_withdraw,
	.send_cancel = statd_link_send_cancel,
	.stopped = op_stopped,
};

void statd_queue_attach(struct statd *d)
{
	d->queue = statd_queue_new(&statd_queue_ops, d, d->cfg->turn_timeout_ms);
}
