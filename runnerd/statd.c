/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's end of the statd links (runnerd.sock): what runnerd accepts from statd.
 * Accepting, the peer check, HELLO and the queue are common/link.c. */
#include "config.h"

#include "common/ids.h"
#include "common/accounts.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

static int runnerd_on_turn_run(struct rts_link *l, void *owner, struct rts_msg_turn_run *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_turn_run(&peer->rd->turns, peer, m);
}

static int runnerd_on_turn_cancel(struct rts_link *l, void *owner, struct rts_msg_turn_cancel *m)
{
	struct runnerd_statd *peer = owner;
	if (!rts_turn_id_valid(m->turn_id))
		return -EBADMSG;
	/* Turn ids are unique across both kinds. */
	if (!runnerd_rich_cancel(&peer->rd->riches, peer, m->turn_id))
		runnerd_turn_cancel_id(&peer->rd->turns, peer, m->turn_id);
	return 0;
}

static int runnerd_on_spare_drop(struct rts_link *l, void *owner, struct rts_msg_spare_drop *m)
{
	struct runnerd_statd *peer = owner;
	if (!rts_hex_valid(m->channel_hash, RTS_HASH_HEX_LEN))
		return -EBADMSG;
	runnerd_spare_drop(peer->rd, m->channel_hash);
	return 0;
}

static int runnerd_on_rich_ensure(struct rts_link *l, void *owner, struct rts_msg_rich_ensure *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_rich_ensure(&peer->rd->riches, peer, m);
}

static int runnerd_on_rich_stop(struct rts_link *l, void *owner, struct rts_msg_rich_stop *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_rich_stop(&peer->rd->riches, peer, m);
}

static int runnerd_on_rich_turn(struct rts_link *l, void *owner, struct rts_msg_rich_turn *m)
{
	struct runnerd_statd *peer = owner;
	/* A rich turn id must not be a sealed turn's either. */
	if (runnerd_turn_find(&peer->rd->turns, m->turn_id))
		return -EBADMSG;
	return runnerd_rich_turn(&peer->rd->riches, peer, m);
}

static int runnerd_on_rich_sync(struct rts_link *l, void *owner, struct rts_msg_rich_sync *m)
{
	struct runnerd_statd *peer = owner;
	runnerd_rich_sync(&peer->rd->riches, peer, m->channels);
	return 0;
}

static int runnerd_on_attach_fetch(struct rts_link *l, void *owner, struct rts_msg_attach_fetch *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_attach_fetch(peer->rd, peer, m);
}

static int runnerd_on_metrics(struct rts_link *l, void *owner, struct rts_msg_metrics *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_metrics_request(peer->rd, peer, m->seq);
}

static int runnerd_on_precheck_run(struct rts_link *l, void *owner, struct rts_msg_precheck_run *m)
{
	struct runnerd_statd *peer = owner;
	return runnerd_precheck_run(&peer->rd->turns, peer, m);
}

static int runnerd_on_precheck_cancel(struct rts_link *l, void *owner, struct rts_msg_precheck_cancel *m)
{
	struct runnerd_statd *peer = owner;
	if (!rts_turn_id_valid(m->precheck_id))
		return -EBADMSG;
	runnerd_turn_cancel_id(&peer->rd->turns, peer, m->precheck_id);
	return 0;
}

/* What statd may send once HELLO is done; anything else drops it. */
static const struct rts_link_dispatch runnerd_dispatch_statd[] = {
	RTS_LINK_ON(TURN_RUN, runnerd_on_turn_run),
	RTS_LINK_ON(TURN_CANCEL, runnerd_on_turn_cancel),
	RTS_LINK_ON(SPARE_DROP, runnerd_on_spare_drop),
	RTS_LINK_ON(RICH_ENSURE, runnerd_on_rich_ensure),
	RTS_LINK_ON(RICH_STOP, runnerd_on_rich_stop),
	RTS_LINK_ON(RICH_TURN, runnerd_on_rich_turn),
	RTS_LINK_ON(RICH_SYNC, runnerd_on_rich_sync),
	RTS_LINK_ON(ATTACH_FETCH, runnerd_on_attach_fetch),
	RTS_LINK_ON(METRICS, runnerd_on_metrics),
	RTS_LINK_ON(PRECHECK_RUN, runnerd_on_precheck_run),
	RTS_LINK_ON(PRECHECK_CANCEL, runnerd_on_precheck_cancel),
	RTS_LINK_DISPATCH_END,
};

static void runnerd_statd_down(struct rts_link *l, void *owner, int err, bool was_up)
{
	struct runnerd_statd *peer = owner;
	struct runnerd *rd = peer->rd;
	/* HACKING.md: statd gone means its turns are cancelled and nobody is answered. */
	runnerd_turns_forget_peer(&rd->turns, peer);
	runnerd_riches_forget_peer(&rd->riches, peer);
	runnerd_attach_forget_peer(rd, peer);
	runnerd_metrics_forget_peer(rd, peer);
	TAILQ_REMOVE(&rd->statd, peer, entry);
	free(peer);
}

/* statd learns the ready spares at once, and again after a congestion that held them. */
static void runnerd_statd_up(struct rts_link *l, void *owner)
{
	struct runnerd_statd *peer = owner;
	runnerd_spares_announce(peer->rd, peer);
}

static void runnerd_statd_drain(struct rts_link *l, void *owner)
{
	struct runnerd_statd *peer = owner;
	if (peer->spares_due)
		runnerd_spares_announce(peer->rd, peer);
}

const struct rts_link_spec runnerd_statd_spec = {
	.proto = RTS_PROTO_LINK_RUNNERD,
	.sock = RTS_SOCK_RUNNERD,
	.self = RTS_PROGRAM_RUNNERD,
	.peer = RTS_PROGRAM_STATD,
	.peer_name = "statd",
	/* Only statd's account may drive runnerd (common/accounts.h). */
	.peer_check = rts_peer_is_statd,
	.peer_refusal = "connection from an account other than statd's",
	.dispatch = runnerd_dispatch_statd,
	.on_up = runnerd_statd_up,
	.on_down = runnerd_statd_down,
	.on_drain = runnerd_statd_drain,
};

void *runnerd_statd_new(void *owner, struct rts_link *l)
{
	struct runnerd *rd = owner;
	if (rd->shutting_down) {
		log_warning("refusing a %s connection: shutting down", RTS_SOCK_RUNNERD);
		return NULL;
	}
	struct runnerd_statd *peer = rts_xcalloc(1, sizeof(*peer));
	peer->rd = rd;
	peer->link = l;
	TAILQ_INSERT_TAIL(&rd->statd, peer, entry);
	return peer;
}

void runnerd_statd_free_all(struct runnerd *rd)
{
	struct runnerd_statd *peer;
	while ((peer = TAILQ_FIRST(&rd->statd))) {
		TAILQ_REMOVE(&rd->statd, peer, entry);
		rts_link_free(peer->link);
		free(peer);
	}
}
