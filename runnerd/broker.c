/* SPDX-License-Identifier: Apache-2.0 */
/* The brokerd side: one lazily connected link to brokerd.sock. */
#include "config.h"

#include <sys/socket.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

#define RETRY_INTERVAL_MS 100u

static void broker_try_connect(struct runnerd *rd);

static int broker_hello_ok(void *ctx, struct rts_msg *m)
{
	struct runnerd *rd = ctx;
	uint32_t version;
	if (rts_msg_get_u32(m, &version) < 0 || rts_msg_end(m) < 0)
		return -EBADMSG;
	if (version != RTS_PROTO_VERSION) {
		log_error("brokerd speaks protocol version %u, this runnerd %u: install matching versions", version,
			  RTS_PROTO_VERSION);
		return -EPROTO;
	}
	rd->broker.state = RUNNERD_BROKER_UP;
	rd->broker.timer = sd_event_source_disable_unref(rd->broker.timer);
	log_debug("connected to brokerd");
	runnerd_turns_link_up(rd);
	return 0;
}

static int broker_bound(void *ctx, struct rts_msg *m)
{
	struct runnerd *rd = ctx;
	const char *id;
	int32_t result;
	if (rts_msg_get_str(m, &id, RTS_TURN_ID_LEN) < 0 || rts_msg_get_i32(m, &result) < 0 || rts_msg_end(m) < 0 ||
	    !rts_turn_id_valid(id) || result > 0)
		return -EBADMSG;
	runnerd_turn_bound(rd, id, result);
	return 0;
}

static int broker_closed(void *ctx, struct rts_msg *m)
{
	const char *id;
	uint32_t calls;
	if (rts_msg_get_str(m, &id, RTS_TURN_ID_LEN) < 0 || rts_msg_get_u32(m, &calls) < 0 || rts_msg_end(m) < 0 ||
	    !rts_turn_id_valid(id))
		return -EBADMSG;
	/* Informational only: a turn's clean-up never waits for it. */
	log_debug("brokerd closed turn %s after %u broker calls", id, calls);
	return 0;
}

static const struct rts_dispatch runnerd_dispatch_brokerd_hello[] = {
	{RTS_MSG_HELLO_OK, broker_hello_ok},
	{0, NULL},
};

static const struct rts_dispatch runnerd_dispatch_brokerd[] = {
	{RTS_MSG_BROKER_BOUND, broker_bound},
	{RTS_MSG_BROKER_CLOSED, broker_closed},
	{0, NULL},
};

static int broker_on_msg(void *owner, struct rts_msg *m)
{
	struct runnerd *rd = owner;
	return rts_dispatch(rd->broker.state == RUNNERD_BROKER_UP ? runnerd_dispatch_brokerd
								  : runnerd_dispatch_brokerd_hello,
			    rd, m);
}

static void broker_on_close(void *owner, int err)
{
	struct runnerd *rd = owner;
	struct runnerd_broker *b = &rd->broker;
	bool was_up = b->state == RUNNERD_BROKER_UP;
	b->timer = sd_event_source_disable_unref(b->timer);
	runnerd_link_free(b->link);
	b->link = NULL;
	b->state = RUNNERD_BROKER_DOWN;
	if (was_up)
		log_warning("lost the connection to brokerd; running turns fail");
	else
		log_warning("the brokerd connection ended before HELLO completed");
	/* Turns bound through this connection fail; turns still waiting fail too when the
	 * link never came up, else they get a fresh connection. */
	runnerd_turns_link_lost(rd, b->gen, !was_up);
}

static const struct runnerd_link_ops broker_ops = {
	.on_msg = broker_on_msg,
	.on_close = broker_on_close,
};

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd *rd = userdata;
	rd->broker.timer = sd_event_source_disable_unref(rd->broker.timer);
	broker_try_connect(rd);
	return 0;
}

static int on_hello_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd *rd = userdata;
	rd->broker.timer = sd_event_source_disable_unref(rd->broker.timer);
	log_error("brokerd did not answer HELLO within %u ms", RUNNERD_HELLO_TIMEOUT_MS);
	runnerd_link_fail(rd->broker.link, -ETIMEDOUT);
	return 0;
}

static void broker_connect_failed(struct runnerd *rd, int r)
{
	rd->broker.state = RUNNERD_BROKER_DOWN;
	log_error_errno(r, "cannot connect to brokerd at %s: %m", rd->broker_path);
	runnerd_turns_link_lost(rd, 0, true);
}

static void broker_try_connect(struct runnerd *rd)
{
	struct runnerd_broker *b = &rd->broker;
	/* One attempt per call (retry_ms 0): waiting happens on the event loop's timer, not in
	 * a sleep that would stall every other turn. */
	int fd = rts_connect_unix(rd->broker_path, SOCK_SEQPACKET, 0);
	if (fd < 0) {
		if ((fd == -ENOENT || fd == -ECONNREFUSED || fd == -EAGAIN) && rts_now_ms() < b->connect_deadline_ms) {
			int r = sd_event_add_time_relative(rd->event, &b->timer, CLOCK_MONOTONIC,
							   RETRY_INTERVAL_MS * 1000, 10 * 1000, on_retry, rd);
			if (r >= 0)
				return;
			fd = r;
		}
		broker_connect_failed(rd, fd);
		return;
	}
	/* We hand brokerd listening sockets: make sure it is the service account (or a
	 * listener systemd made for it). */
	int r = rts_listener_is_trusted(fd);
	if (r < 0) {
		close(fd);
		broker_connect_failed(rd, r);
		return;
	}
	r = runnerd_link_new(rd->event, fd, "brokerd", &broker_ops, rd, &b->link);
	if (r < 0) {
		broker_connect_failed(rd, r);
		return;
	}
	b->gen++;
	b->state = RUNNERD_BROKER_HELLO;
	struct rts_msg m;
	rts_msg_init(&m, RTS_MSG_HELLO);
	rts_msg_put_u32(&m, RTS_PROTO_VERSION);
	rts_msg_put_str(&m, "roundtable-sandbox-runnerd");
	/* A failure here fails the link; broker_on_close then fails the waiting turns. */
	(void)runnerd_link_send(b->link, &m);
	/* A brokerd that never answers must not hold the link in HELLO for good. */
	r = sd_event_add_time_relative(rd->event, &b->timer, CLOCK_MONOTONIC, RUNNERD_HELLO_TIMEOUT_MS * 1000,
				       10 * 1000, on_hello_timeout, rd);
	if (r < 0)
		runnerd_link_fail(b->link, r);
}

void runnerd_broker_want(struct runnerd *rd)
{
	struct runnerd_broker *b = &rd->broker;
	switch (b->state) {
	case RUNNERD_BROKER_UP:
		if (!runnerd_link_dead(b->link))
			runnerd_turns_link_up(rd);
		/* A dead link is being closed; its on_close reconnects for waiting turns. */
		return;
	case RUNNERD_BROKER_CONNECTING:
	case RUNNERD_BROKER_HELLO:
		return;
	case RUNNERD_BROKER_DOWN:
		b->state = RUNNERD_BROKER_CONNECTING;
		b->connect_deadline_ms = rts_now_ms() + RUNNERD_BROKER_CONNECT_MS;
		/* First attempt from the loop too, so a failure never reaches the caller's turn
		 * while it is still setting itself up. */
		if (sd_event_add_time_relative(rd->event, &b->timer, CLOCK_MONOTONIC, 0, 0, on_retry, rd) < 0)
			broker_try_connect(rd);
		return;
	}
}

int runnerd_broker_send(struct runnerd *rd, struct rts_msg *m)
{
	struct runnerd_broker *b = &rd->broker;
	if (b->state != RUNNERD_BROKER_UP || !b->link) {
		rts_msg_release(m);
		return -ENOTCONN;
	}
	return runnerd_link_send(b->link, m);
}

void runnerd_broker_close(struct runnerd *rd)
{
	struct runnerd_broker *b = &rd->broker;
	b->timer = sd_event_source_disable_unref(b->timer);
	runnerd_link_free(b->link);
	b->link = NULL;
	b->state = RUNNERD_BROKER_DOWN;
}
