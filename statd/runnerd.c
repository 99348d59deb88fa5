/* SPDX-License-Identifier: Apache-2.0 */
/* statd's end of the link to runnerd (runtime-dir/runnerd.sock): what statd sends and
 * accepts on it. Connecting, HELLO, the send queue and deferred teardown are common/link.c.
 *
 * The link is made when a turn needs it. Its failure (connect, HELLO, a send or receive
 * error, a message runnerd must not send) ends every running turn with `unavailable` and
 * lets its queue move on; the next turn connects again. After a link that never came up,
 * turns fail at once for STATD_RUNNERD_FAIL_FAST_MS instead of each waiting for another
 * full retry period. A TURN_RUN waits (its turn stays WAITING) while the link is congested
 * and goes out when it drains. */
#include "config.h"

#include "common/accounts.h"
#include "common/link.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "statd/statd.h"

static int statd_on_turn_done(struct rts_link *l, void *owner, struct rts_msg_turn_done *m)
{
	struct statd *d = owner;
	if (!rts_turn_id_valid(m->turn_id) || m->status >= RTS_TURN_STATUS_MAX_ ||
	    (m->status != RTS_TURN_OK && *m->reply))
		return -EBADMSG;
	statd_turn_done(d, m->turn_id, (enum rts_turn_status)m->status, m->reply);
	return 0;
}

/* What runnerd may send once HELLO is done; anything else drops the link. */
static const struct rts_link_dispatch statd_dispatch_runnerd[] = {
	RTS_LINK_ON(TURN_DONE, statd_on_turn_done),
	RTS_LINK_DISPATCH_END,
};

static void statd_runnerd_up(struct rts_link *l, void *owner)
{
	statd_turns_send_waiting(owner);
}

static void statd_runnerd_drained(struct rts_link *l, void *owner)
{
	statd_turns_send_waiting(owner);
}

static void statd_runnerd_down(struct rts_link *l, void *owner, int err, bool was_up)
{
	struct statd *d = owner;
	d->link.link = NULL;
	if (!was_up)
		d->link.fail_fast_until_ms = rts_now_ms() + STATD_RUNNERD_FAIL_FAST_MS;
	statd_turns_fail_all(d, STATD_EV_UNAVAILABLE);
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
	.on_drain = statd_runnerd_drained,
};

void statd_link_init(struct statd *d)
{
	d->link = (struct statd_link){.path = rts_runtime_path(d->runtime_dir, RTS_SOCK_RUNNERD)};
}

void statd_link_free(struct statd *d)
{
	rts_link_free(d->link.link);
	d->link.link = NULL;
	free(d->link.path);
	d->link.path = NULL;
}

bool statd_link_ready(struct statd *d)
{
	return rts_link_has_room(d->link.link);
}

int statd_link_start(struct statd *d)
{
	struct statd_link *l = &d->link;
	if (l->link)
		return 0;
	if (rts_now_ms() < l->fail_fast_until_ms)
		return -EHOSTDOWN;
	int r = rts_link_connect(d->ev, l->path, &statd_runnerd_spec, d, &l->link);
	if (r < 0)
		return log_error_errno(r, "cannot start connecting to runnerd: %m");
	return 0;
}

void statd_link_send_run(struct statd *d, struct statd_turn *t)
{
	/* Congested: the turn stays WAITING and goes when the link drains. */
	if (!statd_link_ready(d))
		return;
	struct statd_item *it = t->item;
	struct rts_msg_turn_run m = {
		.turn_id = t->id,
		.channel = t->ch->key,
		.channel_hash = t->ch->hash,
		.speaker_id = it->speaker_id,
		.speaker_name = it->speaker_name,
		.principal_id = it->principal_id,
		.text = it->text,
		.attachments = it->attachments,
		.start_fresh = t->start_fresh ? 1 : 0,
		.workspace = t->ws_path,
		.fd = steal_fd(&t->ws_fd),
	};
	t->state = STATD_TURN_SENT;
	/* Tagged with the turn, so that a cancel can still take it back. A failure fails the
	 * link, whose teardown ends the turn. */
	(void)rts_link_send_turn_run_tagged(d->link.link, &m, t);
}

bool statd_link_send_cancel(struct statd *d, struct statd_turn *t)
{
	if (d->link.link && rts_link_withdraw(d->link.link, t))
		return true;
	if (t->cancel_sent || !rts_link_up(d->link.link))
		return false;
	t->cancel_sent = true;
	(void)rts_link_send_turn_cancel(d->link.link, &(struct rts_msg_turn_cancel){.turn_id = t->id});
	return false;
}

void statd_link_forget_turn(struct statd *d, struct statd_turn *t)
{
	/* An unsent TURN_RUN of a turn that ended is withdrawn: runnerd never hears of it. */
	if (d->link.link)
		(void)rts_link_withdraw(d->link.link, t);
}
