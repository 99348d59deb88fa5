/* SPDX-License-Identifier: Apache-2.0 */
/* The channel queue's effects in the daemon: the ops table joining queue.c to control.sock
 * (control_queue.c), the runnerd link (runnerd.c), the state file, workspaces and timers
 * on the loop. Nothing here decides anything; the queue does. */
#include "config.h"

#include <time.h>

#include "common/log.h"
#include "common/timer.h"
#include "common/util.h"
#include "statd/rich.h"
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

static int op_record_mode(void *owner, const char *channel, enum statd_mode mode, const char *profile)
{
	struct statd *d = owner;
	int r = statd_state_update(d->state, d->cfg->state_file, channel, mode, profile);
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

static enum statd_mode op_mode_of(void *owner, const char *channel, const char **profile)
{
	struct statd *d = owner;
	enum statd_mode mode = STATD_MODE_OFF;
	(void)statd_state_get(d->state, channel, &mode); /* never switched: off */
	if (profile)
		*profile = statd_state_profile(d->state, channel);
	return mode;
}

/* With accounts, the guest account's uid, which the workspace and what statd makes in it
 * are shared with (DESIGN.md 8.1); (uid_t)-1 in single-account mode. */
static uid_t guest_of(const struct statd *d)
{
	return d->cfg->accounts.present ? d->cfg->uid : (uid_t)-1;
}

static int op_workspace_open(void *owner, const char *channel_hash, char **path, const char **why)
{
	struct statd *d = owner;
	return statd_workspace_open(d->cfg->workspace_root, channel_hash, guest_of(d), path, why);
}

static int op_channel_key(void *owner, const char *channel, const char *channel_hash, const char **why)
{
	struct statd *d = owner;
	return statd_channel_key_check(d->cfg->workspace_root, channel_hash, channel, why);
}

static int op_attachment_write(void *owner, int workspace_fd, const char *turn_id, uint32_t index, int data_fd,
			       const char *mime, uint64_t max_bytes, struct statd_attachment *a, const char **why)
{
	struct statd *d = owner;
	return statd_attachment_write(workspace_fd, guest_of(d), turn_id, index, data_fd, mime, max_bytes, a, why);
}

static int op_rich_input(void *owner, const struct statd_rich_input *in)
{
	struct statd *d = owner;
	char now[40];
	int r = rts_format_local_time(time(NULL), now, sizeof(now));
	if (r < 0)
		return r;
	return statd_rich_input_build(in, d->cfg->rich.time_zone, now);
}

static int op_archive(void *owner, int workspace_fd, const char *channel_hash, const char **why)
{
	struct statd *d = owner;
	unsigned moved = 0;
	int r = statd_sessions_archive(workspace_fd, guest_of(d), &moved, why);
	if (r >= 0)
		log_info("channel %.12s: %u session file(s) archived", channel_hash, moved);
	return r;
}

static int op_rich_dirs(void *owner, int workspace_fd, const char **why)
{
	struct statd *d = owner;
	return statd_rich_dirs_ensure(workspace_fd, guest_of(d), why);
}

static void op_rich_reply_free(void *owner, struct statd_rich_reply *r)
{
	statd_rich_reply_free(r);
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
	.mode_of = op_mode_of,
	.workspace_open = op_workspace_open,
	.connect = statd_link_start,
	.send_run = statd_link_send_run,
	.withdraw = statd_link_withdraw,
	.send_cancel = statd_link_send_cancel,
	.send_spare_drop = statd_link_send_spare_drop,
	.channel_key = op_channel_key,
	.send_ensure = statd_link_send_ensure,
	.send_stop = statd_link_send_stop,
	.send_sync = statd_link_send_sync,
	.send_fetch = statd_link_send_fetch,
	.send_rich_turn = statd_link_send_rich_turn,
	.attachment_write = op_attachment_write,
	.rich_input = op_rich_input,
	.archive = op_archive,
	.rich_dirs = op_rich_dirs,
	.rich_reply_free = op_rich_reply_free,
	.stopped = op_stopped,
};

void statd_queue_attach(struct statd *d)
{
	const struct rts_rich_conf *rich = &d->cfg->rich;
	d->queue = statd_queue_new(&statd_queue_ops, d,
				   &(struct statd_queue_conf){
					   .turn_timeout_ms = d->cfg->turn_timeout_ms,
					   .rich_turn_timeout_ms = rich->enabled ? rich->turn_timeout_ms : 0,
					   .rich_start_timeout_ms = rich->enabled ? rich->start_timeout_ms : 0,
				   });
}
