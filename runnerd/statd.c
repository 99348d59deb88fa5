/* SPDX-License-Identifier: Apache-2.0 */
/* The statd side: runnerd.sock connections. */
#include "config.h"

#include <sys/socket.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/runnerd.h"

#define PROGRAM_NAME_MAX 64u

static int statd_hello(void *ctx, struct rts_msg *m)
{
	struct runnerd_statd *peer = ctx;
	uint32_t version;
	const char *program;
	if (rts_msg_get_u32(m, &version) < 0 || rts_msg_get_str(m, &program, PROGRAM_NAME_MAX) < 0 ||
	    rts_msg_end(m) < 0)
		return -EBADMSG;
	if (version != RTS_PROTO_VERSION) {
		log_error("statd speaks protocol version %u, this runnerd %u: install matching versions", version,
			  RTS_PROTO_VERSION);
		return -EPROTO;
	}
	peer->hello_done = true;
	peer->hello_timer = sd_event_source_disable_unref(peer->hello_timer);
	struct rts_msg ok;
	rts_msg_init(&ok, RTS_MSG_HELLO_OK);
	rts_msg_put_u32(&ok, RTS_PROTO_VERSION);
	return runnerd_statd_send(peer, &ok);
}

static int statd_turn_run(void *ctx, struct rts_msg *m)
{
	struct runnerd_statd *peer = ctx;
	return runnerd_turn_run(peer->rd, peer, m);
}

static int statd_turn_cancel(void *ctx, struct rts_msg *m)
{
	struct runnerd_statd *peer = ctx;
	const char *id;
	if (rts_msg_get_str(m, &id, RTS_TURN_ID_LEN) < 0 || rts_msg_end(m) < 0 || !rts_turn_id_valid(id))
		return -EBADMSG;
	runnerd_turn_cancel_id(peer->rd, peer, id);
	return 0;
}

/* Before HELLO only HELLO; afterwards only turn requests (a second HELLO is a violation). */
static const struct rts_dispatch runnerd_dispatch_statd_hello[] = {
	{RTS_MSG_HELLO, statd_hello},
	{0, NULL},
};

static const struct rts_dispatch runnerd_dispatch_statd[] = {
	{RTS_MSG_TURN_RUN, statd_turn_run},
	{RTS_MSG_TURN_CANCEL, statd_turn_cancel},
	{0, NULL},
};

static int statd_on_msg(void *owner, struct rts_msg *m)
{
	struct runnerd_statd *peer = owner;
	return rts_dispatch(peer->hello_done ? runnerd_dispatch_statd : runnerd_dispatch_statd_hello, peer, m);
}

static void statd_on_close(void *owner, int err)
{
	struct runnerd_statd *peer = owner;
	struct runnerd *rd = peer->rd;
	/* HACKING.md: statd gone means its turns are cancelled and nobody is answered. */
	runnerd_turns_forget_peer(rd, peer);
	TAILQ_REMOVE(&rd->statd, peer, entry);
	rd->n_statd--;
	peer->hello_timer = sd_event_source_disable_unref(peer->hello_timer);
	runnerd_link_free(peer->link);
	free(peer);
}

static int on_hello_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct runnerd_statd *peer = userdata;
	peer->hello_timer = sd_event_source_disable_unref(peer->hello_timer);
	log_warning("a %s client did not say HELLO within %u ms; dropping it", RTS_SOCK_RUNNERD,
		    RUNNERD_HELLO_TIMEOUT_MS);
	runnerd_link_fail(peer->link, -ETIMEDOUT);
	return 0;
}

static const struct runnerd_link_ops statd_ops = {
	.on_msg = statd_on_msg,
	.on_close = statd_on_close,
};

int runnerd_statd_send(struct runnerd_statd *peer, struct rts_msg *m)
{
	return runnerd_link_send(peer->link, m);
}

void runnerd_statd_accept(struct runnerd *rd, int listen_fd)
{
	for (unsigned i = 0; i < 16; i++) {
		cleanup_close int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warning_errno(-errno, "accept on %s failed: %m", RTS_SOCK_RUNNERD);
			return;
		}
		/* Before reading a single byte: only the service account may drive runnerd. */
		int r = rts_peer_is_self(fd);
		if (r < 0) {
			log_warning_errno(r, "refusing a %s connection from another user: %m", RTS_SOCK_RUNNERD);
			continue;
		}
		if (rd->n_statd >= RUNNERD_MAX_STATD || rd->shutting_down) {
			log_warning("refusing a %s connection: %s", RTS_SOCK_RUNNERD,
				    rd->shutting_down ? "shutting down" : "too many connections");
			continue;
		}
		struct runnerd_statd *peer = rts_xcalloc(1, sizeof(*peer));
		peer->rd = rd;
		r = runnerd_link_new(rd->event, steal_fd(&fd), "statd", &statd_ops, peer, &peer->link);
		if (r < 0) {
			log_error_errno(r, "cannot watch a statd connection: %m");
			free(peer);
			continue;
		}
		/* An idle connection must not hold one of the few slots. */
		r = sd_event_add_time_relative(rd->event, &peer->hello_timer, CLOCK_MONOTONIC,
					       RUNNERD_HELLO_TIMEOUT_MS * 1000, 10 * 1000, on_hello_timeout, peer);
		if (r < 0) {
			log_error_errno(r, "cannot arm the HELLO deadline: %m");
			runnerd_link_free(peer->link);
			free(peer);
			continue;
		}
		TAILQ_INSERT_TAIL(&rd->statd, peer, entry);
		rd->n_statd++;
		log_debug("statd connected");
	}
}
