/* SPDX-License-Identifier: Apache-2.0 */
/* statd's end of the link to runnerd (runtime-dir/runnerd.sock): what statd sends and
 * accepts on it. Connecting, HELLO, the send queue and deferred teardown are common/link.c.
 *
 * Link glue, both ways: runnerd's messages and the link's state become the queue's inputs
 * (queue.h), and the queue's connect, send_run, withdraw and send_cancel ops become
 * messages here. The link is made when a turn needs it; what its failure means for turns
 * (unavailable, the fail-fast window) is the queue's to decide. */
#include "config.h"

#include "common/ids.h"
#include "common/accounts.h"
#include "common/link.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/timer.h"
#include "common/tools.h"
#include "common/util.h"
#include "statd/rich.h"
#include "statd/statd.h"

/* Everything a TURN_RUN carries besides the text fits in 8 KiB; with the text it fits in
 * one packet, so building a TURN_RUN can never overflow. */
_Static_assert(RTS_TEXT_MAX + RTS_CHANNEL_MAX + 3 * RTS_SPEAKER_FIELD_MAX + 2048 + 8192 < RTS_MSG_MAX,
	       "TURN_RUN must fit in one packet");

static int statd_on_turn_done(struct rts_link *l, void *owner, struct rts_msg_turn_done *m)
{
	struct statd *d = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->status >= RTS_TURN_STATUS_MAX_ ||
	    (m->status != RTS_TURN_OK && *m->reply))
		return -EBADMSG;
	statd_queue_turn_done(d->queue, m->turn_id, (enum rts_turn_status)m->status, m->reply);
	return 0;
}

static int statd_on_rich_turn_done(struct rts_link *l, void *owner, struct rts_msg_rich_turn_done *m)
{
	struct statd *d = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->status >= RTS_TURN_STATUS_MAX_)
		return -EBADMSG;
	struct statd_rich_reply *reply = NULL;
	if (m->status == RTS_TURN_OK) {
		/* brokerd built the reply from the worker's packet; statd checks it again before
		 * a bot sees it. A bad one fails the turn, not the link. */
		const char *why = NULL;
		int r = statd_rich_reply_read(m->fd, &reply, &why);
		if (r < 0)
			rts_log_errno(LOG_WARNING, r, "turn %s: the reply is refused: %s (%m)", m->turn_id, why);
	}
	statd_queue_rich_turn_done(d->queue, m->turn_id, (enum rts_turn_status)m->status, reply);
	return 0;
}

static int statd_on_attach_data(struct rts_link *l, void *owner, struct rts_msg_attach_data *m)
{
	struct statd *d = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->index >= RTS_RICH_ATTACHMENTS_MAX || m->result > 0)
		return -EBADMSG;
	statd_queue_attach_data(d->queue, m->turn_id, m->index, m->result, m->mime, m->fd);
	return 0;
}

static int statd_on_rich_state(struct rts_link *l, void *owner, struct rts_msg_rich_state *m)
{
	struct statd *d = owner;
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN) || m->state < RTS_RICH_STATE_READY || m->state > RTS_RICH_STATE_FAILED ||
	    m->error > 0)
		return -EBADMSG;
	statd_queue_rich_state(d->queue, m->seq, m->channel_hash, m->state, m->error);
	return 0;
}

static int statd_on_rich_synced(struct rts_link *l, void *owner, struct rts_msg_rich_synced *m)
{
	log_info("runnerd synced the rich channels: %u container(s) of channels no longer rich removed", m->removed);
	return 0;
}

static int statd_on_metrics_text(struct rts_link *l, void *owner, struct rts_msg_metrics_text *m)
{
	return statd_metrics_text(owner, m);
}

static int statd_on_spare_state(struct rts_link *l, void *owner, struct rts_msg_spare_state *m)
{
	struct statd *d = owner;
	size_t n = strlen(m->ready);
	if (n % RTS_HASH_HEX_LEN != 0 || n / RTS_HASH_HEX_LEN > d->cfg->warm_spares_max ||
	    !rts_hex_valid(m->ready, n))
		return -EBADMSG;
	memcpy(d->spares_ready, m->ready, n + 1);
	return 0;
}

static int statd_on_precheck_done(struct rts_link *l, void *owner, struct rts_msg_precheck_done *m)
{
	return statd_precheck_done(owner, m);
}

/* What runnerd may send once HELLO is done; anything else drops the link. */
static const struct rts_link_dispatch statd_dispatch_runnerd[] = {
	RTS_LINK_ON(TURN_DONE, statd_on_turn_done),
	RTS_LINK_ON(RICH_TURN_DONE, statd_on_rich_turn_done),
	RTS_LINK_ON(ATTACH_DATA, statd_on_attach_data),
	RTS_LINK_ON(RICH_STATE, statd_on_rich_state),
	RTS_LINK_ON(RICH_SYNCED, statd_on_rich_synced),
	RTS_LINK_ON(METRICS_TEXT, statd_on_metrics_text),
	RTS_LINK_ON(PRECHECK_DONE, statd_on_precheck_done),
	RTS_LINK_ON(SPARE_STATE, statd_on_spare_state),
	RTS_LINK_DISPATCH_END,
};

/* Up, or drained after congestion: waiting turns and prechecks go. */
static void statd_runnerd_ready(struct rts_link *l, void *owner)
{
	struct statd *d = owner;
	statd_queue_link_ready(d->queue);
	statd_metrics_link_ready(d);
	statd_prechecks_link_ready(d);
}

/* The rich channels whose profile is configured, for the sync after HELLO. A channel whose
 * profile the config no longer has is left out: runnerd removes its container, and its
 * messages are refused (control.c). */
static void statd_rich_sync(struct statd *d)
{
	const struct rts_rich_conf *rich = &d->cfg->rich;
	if (!rich->enabled)
		return;
	size_t n = statd_state_count(d->state), k = 0;
	cleanup_free const char **channels = rts_xcalloc(n + 1, sizeof(char *));
	cleanup_free const char **profiles = rts_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const char *profile = statd_state_profile_at(d->state, i);
		if (statd_state_mode_at(d->state, i) != STATD_MODE_RICH || !profile ||
		    !rts_rich_profile_find(rich, profile))
			continue;
		channels[k] = statd_state_key(d->state, i);
		profiles[k++] = profile;
	}
	statd_queue_rich_sync(d->queue, channels, profiles, k);
}

/* Up: the rich channels are synced before anything waiting goes. */
static void statd_runnerd_up(struct rts_link *l, void *owner)
{
	statd_rich_sync(owner);
	statd_runnerd_ready(l, owner);
}

static void statd_reconnect(void *arg)
{
	struct statd *d = arg;
	d->link.reconnect = NULL; /* fired */
	if (!d->stopping)
		(void)statd_link_start(d);
}

static void statd_runnerd_down(struct rts_link *l, void *owner, int err, bool was_up)
{
	struct statd *d = owner;
	d->link.link = NULL;
	statd_queue_link_down(d->queue, was_up);
	/* Rich containers outlive a runnerd restart; the next HELLO adopts them (and removes
	 * those of channels no longer rich), so statd comes back on its own instead of
	 * waiting for the next turn. */
	if (d->cfg->rich.enabled && !d->stopping && !d->link.reconnect) {
		int r = rts_timer_start(d->ev, STATD_RICH_RECONNECT_MS, 100, statd_reconnect, d, &d->link.reconnect);
		if (r < 0)
			log_warning_errno(r, "cannot arm the reconnect timer for runnerd: %m");
	}
	statd_metrics_link_down(d);
	statd_prechecks_link_down(d);
	d->spares_ready[0] = '\0'; /* a new runnerd tells its own after HELLO */
}

static const struct rts_link_spec statd_runnerd_spec = {
	.proto = RTS_PROTO_LINK_RUNNERD,
	.sock = RTS_SOCK_RUNNERD,
	.self = RTS_PROGRAM_STATD,
	.peer = RTS_PROGRAM_RUNNERD,
	.peer_name = "runnerd",
	/* runnerd checks us with SO_PEERCRED; we check it too, so a socket planted by another
	 * account cannot receive guest messages and workspace fds. */
	.peer_check = rts_listener_is_runnerd,
	.peer_refusal = "listener that is neither runnerd's account nor root",
	.dispatch = statd_dispatch_runnerd,
	.on_up = statd_runnerd_up,
	.on_down = statd_runnerd_down,
	.on_drain = statd_runnerd_ready,
};

void statd_link_init(struct statd *d)
{
	d->link = (struct statd_link){.path = rts_runtime_path(d->runtime_dir, RTS_SOCK_RUNNERD)};
}

void statd_link_free(struct statd *d)
{
	rts_timer_stop(d->link.reconnect);
	d->link.reconnect = NULL;
	rts_link_free(d->link.link);
	d->link.link = NULL;
	free(d->link.path);
	d->link.path = NULL;
}

int statd_link_start(void *owner)
{
	struct statd *d = owner;
	struct statd_link *l = &d->link;
	if (l->link)
		return 0;
	int r = rts_link_connect(d->ev, l->path, &statd_runnerd_spec, d, &l->link);
	if (r < 0)
		return log_error_errno(r, "cannot start connecting to runnerd: %m");
	return 0;
}

bool statd_link_send_run(void *owner, const struct statd_turn_start *s)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	struct rts_msg_turn_run m = {
		.turn_id = s->turn_id,
		.channel = s->channel,
		.channel_hash = s->channel_hash,
		.speaker_id = s->speaker_id,
		.speaker_name = s->speaker_name,
		.principal_id = s->principal_id,
		.text = s->text,
		.attachments = s->attachments,
		.start_fresh = s->start_fresh ? 1 : 0,
		.workspace = s->workspace,
		.fd = s->workspace_fd,
	};
	/* Tagged with the turn, so that a cancel can still take it back. A failure fails the
	 * link, whose teardown ends the turn. */
	(void)rts_link_send_turn_run_tagged(d->link.link, &m, s->tag);
	return true;
}

bool statd_link_withdraw(void *owner, const void *tag)
{
	struct statd *d = owner;
	return d->link.link && rts_link_withdraw(d->link.link, tag);
}

void statd_link_send_cancel(void *owner, const char *turn_id)
{
	struct statd *d = owner;
	if (rts_link_up(d->link.link))
		(void)rts_link_send_turn_cancel(d->link.link, &(struct rts_msg_turn_cancel){.turn_id = turn_id});
}

void statd_link_send_spare_drop(void *owner, const char *channel_hash)
{
	struct statd *d = owner;
	/* Without a link there is no one to tell: a spare runnerd still holds ends with its
	 * idle timeout (runnerd/spare.h). */
	if (rts_link_up(d->link.link))
		(void)rts_link_send_spare_drop(d->link.link, &(struct rts_msg_spare_drop){.channel_hash = channel_hash});
}

bool statd_link_send_ensure(void *owner, const struct statd_rich_ensure *e)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	(void)rts_link_send_rich_ensure(d->link.link, &(struct rts_msg_rich_ensure){
							      .seq = e->seq,
							      .channel = e->channel,
							      .channel_hash = e->channel_hash,
							      .profile = e->profile,
							      .workspace = e->workspace,
							      .fd = e->workspace_fd,
						      });
	return true;
}

bool statd_link_send_stop(void *owner, uint32_t seq, const char *channel_hash, uint32_t reason)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	(void)rts_link_send_rich_stop(d->link.link,
				      &(struct rts_msg_rich_stop){.seq = seq, .channel_hash = channel_hash, .reason = reason});
	return true;
}

bool statd_link_send_sync(void *owner, uint32_t channels)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	(void)rts_link_send_rich_sync(d->link.link, &(struct rts_msg_rich_sync){.channels = channels});
	return true;
}

bool statd_link_send_fetch(void *owner, const char *turn_id, uint32_t index, const char *url, uint64_t max_bytes)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	(void)rts_link_send_attach_fetch(d->link.link, &(struct rts_msg_attach_fetch){
							       .turn_id = turn_id,
							       .index = index,
							       .url = url,
							       .max_bytes = max_bytes,
						       });
	return true;
}

bool statd_link_send_rich_turn(void *owner, const struct statd_rich_turn_start *s)
{
	struct statd *d = owner;
	if (!rts_link_has_room(d->link.link))
		return false;
	/* The container first: runnerd holds the turn until its worker is ready. */
	(void)statd_link_send_ensure(owner, &s->ensure);
	(void)rts_link_send_rich_turn_tagged(d->link.link,
					      &(struct rts_msg_rich_turn){
						      .turn_id = s->turn_id,
						      .channel = s->channel,
						      .channel_hash = s->channel_hash,
						      .speaker_id = s->speaker_id,
						      .speaker_name = s->speaker_name,
						      .principal_id = s->principal_id,
						      .profile = s->profile,
						      .fd = s->input_fd,
					      },
					      s->tag);
	return true;
}

bool statd_link_send_precheck_run(struct statd *d, const struct rts_msg_precheck_run *m, const void *tag)
{
	if (!rts_link_has_room(d->link.link))
		return false;
	/* A failure fails the link, whose teardown ends the precheck. */
	(void)rts_link_send_precheck_run_tagged(d->link.link, m, tag);
	return true;
}

void statd_link_send_precheck_cancel(struct statd *d, const char *id)
{
	if (rts_link_up(d->link.link))
		(void)rts_link_send_precheck_cancel(d->link.link, &(struct rts_msg_precheck_cancel){.precheck_id = id});
}
