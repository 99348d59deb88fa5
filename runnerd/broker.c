/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's end of the link to brokerd (brokerd.sock): made when a turn needs it, what
 * runnerd accepts from brokerd. Connecting, HELLO and the queue are common/link.c. */
#include "config.h"

#include "common/ids.h"
#include "common/accounts.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

static int runnerd_on_broker_bound(struct rts_link *l, void *owner, struct rts_msg_broker_bound *m)
{
	if (!rts_turn_id_valid(m->turn_id) || m->result > 0)
		return -EBADMSG;
	struct runnerd *rd = owner;
	runnerd_turn_bound(&rd->turns, rd->broker.gen, m->turn_id, m->result);
	return 0;
}

static int runnerd_on_broker_closed(struct rts_link *l, void *owner, struct rts_msg_broker_closed *m)
{
	if (!rts_turn_id_valid(m->turn_id))
		return -EBADMSG;
	/* Informational only: a turn's clean-up never waits for it. */
	log_debug("brokerd closed turn %s after %u broker calls", m->turn_id, m->calls);
	return 0;
}

static int runnerd_on_rich_bound(struct rts_link *l, void *owner, struct rts_msg_rich_bound *m)
{
	struct runnerd *rd = owner;
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN) || m->result > 0)
		return -EBADMSG;
	runnerd_rich_bound(&rd->riches, rd->broker.gen, m->channel_hash, m->result);
	return 0;
}

static int runnerd_on_rich_ready(struct rts_link *l, void *owner, struct rts_msg_rich_ready *m)
{
	struct runnerd *rd = owner;
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN) || m->result > 0 || m->private_history > 1 ||
	    (m->capabilities & ~(RTS_RICH_CAP_PRIVATE_TO | RTS_RICH_CAP_READER_RECORDS)))
		return -EBADMSG;
	runnerd_rich_ready(&rd->riches, rd->broker.gen, m);
	return 0;
}

static int runnerd_on_rich_unbound(struct rts_link *l, void *owner, struct rts_msg_rich_unbound *m)
{
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN))
		return -EBADMSG;
	/* Informational: a removal never waits for it. */
	log_debug("brokerd unbound channel %.12s", m->channel_hash);
	return 0;
}

static int runnerd_on_broker_rich_done(struct rts_link *l, void *owner, struct rts_msg_broker_rich_done *m)
{
	struct runnerd *rd = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->status >= RTS_TURN_STATUS_MAX_)
		return -EBADMSG;
	runnerd_rich_done(&rd->riches, rd->broker.gen, m);
	return 0;
}

static int runnerd_on_broker_attach_data(struct rts_link *l, void *owner, struct rts_msg_broker_attach_data *m)
{
	struct runnerd *rd = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->index >= RTS_RICH_ATTACHMENTS_MAX || m->result > 0)
		return -EBADMSG;
	runnerd_attach_data(rd, rd->broker.gen, m);
	return 0;
}

static int runnerd_on_broker_metrics_text(struct rts_link *l, void *owner, struct rts_msg_broker_metrics_text *m)
{
	return runnerd_metrics_brokerd_text(owner, m->seq, m->text);
}

/* What brokerd may send once HELLO is done; anything else drops the link. */
static const struct rts_link_dispatch runnerd_dispatch_brokerd[] = {
	RTS_LINK_ON(BROKER_BOUND, runnerd_on_broker_bound),
	RTS_LINK_ON(BROKER_CLOSED, runnerd_on_broker_closed),
	RTS_LINK_ON(RICH_BOUND, runnerd_on_rich_bound),
	RTS_LINK_ON(RICH_READY, runnerd_on_rich_ready),
	RTS_LINK_ON(RICH_UNBOUND, runnerd_on_rich_unbound),
	RTS_LINK_ON(BROKER_RICH_DONE, runnerd_on_broker_rich_done),
	RTS_LINK_ON(BROKER_ATTACH_DATA, runnerd_on_broker_attach_data),
	RTS_LINK_ON(BROKER_METRICS_TEXT, runnerd_on_broker_metrics_text),
	RTS_LINK_DISPATCH_END,
};

/* Everything that waits for the link. */
static void broker_up_all(struct runnerd *rd)
{
	runnerd_turns_broker_up(&rd->turns);
	runnerd_riches_broker_up(&rd->riches);
	runnerd_attach_broker_up(rd);
}

static void runnerd_brokerd_up(struct rts_link *l, void *owner)
{
	struct runnerd *rd = owner;
	broker_up_all(rd);
	runnerd_metrics_broker_up(rd);
}

static void runnerd_brokerd_down(struct rts_link *l, void *owner, int err, bool was_up)
{
	struct runnerd *rd = owner;
	rd->broker.link = NULL;
	if (was_up)
		log_warning("lost the connection to brokerd; running turns fail");
	/* Turns bound through this connection fail; turns still waiting fail too when the
	 * link never came up, else they get a fresh connection. */
	runnerd_turns_broker_lost(&rd->turns, rd->broker.gen, !was_up);
	runnerd_riches_broker_lost(&rd->riches, rd->broker.gen, !was_up);
	runnerd_attach_broker_lost(rd, rd->broker.gen, !was_up);
	runnerd_metrics_broker_down(rd);
}

static const struct rts_link_spec runnerd_brokerd_spec = {
	.proto = RTS_PROTO_LINK_BROKERD,
	.sock = RTS_SOCK_BROKERD,
	.self = RTS_PROGRAM_RUNNERD,
	.peer = RTS_PROGRAM_BROKERD,
	.peer_name = "brokerd",
	/* We hand brokerd listening sockets: it must be brokerd's account (or a listener
	 * systemd made for it). */
	.peer_check = rts_listener_is_brokerd,
	.peer_refusal = "listener that is neither brokerd's account nor root",
	.dispatch = runnerd_dispatch_brokerd,
	.on_up = runnerd_brokerd_up,
	.on_down = runnerd_brokerd_down,
};

void runnerd_broker_want(struct runnerd *rd)
{
	struct runnerd_broker *b = &rd->broker;
	if (rts_link_up(b->link)) {
		broker_up_all(rd);
		return;
	}
	/* Being made (its on_up follows), or failed (its on_down reconnects for turns that
	 * still wait). */
	if (b->link)
		return;
	b->gen++;
	int r = rts_link_connect(rd->event, rd->broker_path, &runnerd_brokerd_spec, rd, &b->link);
	if (r < 0) {
		/* Nothing was started: there is no on_down to wait for. */
		log_error_errno(r, "cannot start connecting to brokerd: %m");
		b->link = NULL;
		runnerd_turns_broker_lost(&rd->turns, b->gen, true);
		runnerd_riches_broker_lost(&rd->riches, b->gen, true);
		runnerd_attach_broker_lost(rd, b->gen, true);
		runnerd_metrics_broker_down(rd);
	}
}

void runnerd_broker_close(struct runnerd *rd)
{
	rts_link_free(rd->broker.link);
	rd->broker.link = NULL;
}
