/* SPDX-License-Identifier: Apache-2.0 */
/* The link to runnerd: runtime-dir/runnerd.sock, SOCK_SEQPACKET, messages from
 * common/proto.h.
 *
 * Connected lazily when a turn needs it (HACKING.md "Daemon links"): one connect attempt at
 * once, then retries on a timer for STATD_RUNNERD_CONNECT_MS, so a runnerd that is
 * (re)starting is waited for without blocking the event loop. Then HELLO, and TURN_RUNs
 * only after HELLO_OK. Sends go through a queue drained on EPOLLOUT because a TURN_RUN can
 * be larger than what the socket buffer has room for at that moment.
 *
 * Any failure (connect, HELLO deadline, send or receive error, a message runnerd must not
 * send, a malformed payload) drops the link. The drop is deferred to its own event so that
 * the code that noticed it never sees turns vanish under it; then every running turn gets
 * `unavailable` and its queue moves on, and the next turn connects again. After a failed
 * connect, turns fail at once for STATD_RUNNERD_FAIL_FAST_MS instead of each waiting for
 * another full retry period. */
#include "config.h"

#include <sys/socket.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "statd/statd.h"

/* A link the failure of which has been noticed and whose tear-down is pending. */
#define STATD_LINK_BROKEN ((enum statd_link_state)100)

static void outmsg_free(struct statd_outmsg *om)
{
	/* The carried fd is ours, whatever rts_msg_release does with fds. */
	int fd = om->m.fd;
	om->m.fd = -1;
	rts_msg_release(&om->m);
	if (fd >= 0)
		close(fd);
	free(om);
}

void statd_link_init(struct statd *d)
{
	struct statd_link *l = &d->link;
	*l = (struct statd_link){.state = STATD_LINK_IDLE, .fd = -1};
	l->path = rts_runtime_path(d->runtime_dir, RTS_SOCK_RUNNERD);
}

static void link_reset(struct statd *d)
{
	struct statd_link *l = &d->link;
	l->io = sd_event_source_disable_unref(l->io);
	l->timer = sd_event_source_disable_unref(l->timer);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	while (l->out_head) {
		struct statd_outmsg *om = l->out_head;
		l->out_head = om->next;
		outmsg_free(om);
	}
	l->out_tail = NULL;
	l->state = STATD_LINK_IDLE;
}

void statd_link_free(struct statd *d)
{
	link_reset(d);
	d->link.fail_src = sd_event_source_disable_unref(d->link.fail_src);
	free(d->link.path);
	d->link.path = NULL;
}

bool statd_link_ready(struct statd *d)
{
	return d->link.state == STATD_LINK_READY;
}

static int link_fail_run(sd_event_source *s, void *userdata)
{
	struct statd *d = userdata;
	d->link.fail_src = sd_event_source_disable_unref(d->link.fail_src);
	link_reset(d);
	statd_turns_fail_all(d, STATD_EV_UNAVAILABLE);
	return 0;
}

/* Mark the link broken now (nothing more is sent or read) and tear it down from a deferred
 * event. The caller has logged why. */
static void link_fail(struct statd *d)
{
	struct statd_link *l = &d->link;
	if (l->state == STATD_LINK_BROKEN)
		return;
	l->state = STATD_LINK_BROKEN;
	if (l->io)
		sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
	if (l->timer)
		sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
	int r = sd_event_add_defer(d->ev, &l->fail_src, link_fail_run, d);
	if (r < 0) {
		/* Only on allocation failure; without the deferred event turns would hang. */
		log_error_errno(r, "runnerd link: cannot schedule its tear-down: %m");
		abort();
	}
}

static void link_set_events(struct statd *d)
{
	struct statd_link *l = &d->link;
	if (!l->io)
		return;
	int r = sd_event_source_set_io_events(l->io, EPOLLIN | (l->out_head ? EPOLLOUT : 0));
	if (r < 0) {
		log_error_errno(r, "runnerd link: cannot update its event mask: %m");
		link_fail(d);
	}
}

/* Send queued messages until the socket is full. */
static void link_flush(struct statd *d)
{
	struct statd_link *l = &d->link;
	while (l->out_head && l->state != STATD_LINK_BROKEN) {
		struct statd_outmsg *om = l->out_head;
		int r = rts_msg_send(l->fd, &om->m);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_error_errno(r, "runnerd link: send failed: %m");
			link_fail(d);
			return;
		}
		l->out_head = om->next;
		if (!l->out_head)
			l->out_tail = NULL;
		outmsg_free(om);
	}
	link_set_events(d);
}

static void link_queue(struct statd *d, struct statd_outmsg *om)
{
	struct statd_link *l = &d->link;
	if (l->out_tail)
		l->out_tail->next = om;
	else
		l->out_head = om;
	l->out_tail = om;
	link_flush(d);
}

static struct statd_outmsg *outmsg_new(uint32_t type)
{
	struct statd_outmsg *om = rts_xcalloc(1, sizeof(*om));
	rts_msg_init(&om->m, type);
	return om;
}

/* ---- receiving ---- */

static int statd_recv_hello_ok(void *ctx, struct rts_msg *m)
{
	struct statd *d = ctx;
	uint32_t version;
	if (rts_msg_get_u32(m, &version) < 0 || rts_msg_end(m) < 0)
		return -EBADMSG;
	/* Once per connection, and only as the answer to our HELLO. */
	if (d->link.state != STATD_LINK_HANDSHAKE || version != RTS_PROTO_VERSION)
		return -EPROTO;
	d->link.state = STATD_LINK_READY;
	d->link.timer = sd_event_source_disable_unref(d->link.timer);
	log_info("connected to runnerd");
	statd_turns_send_waiting(d);
	return 0;
}

static int statd_recv_turn_done(void *ctx, struct rts_msg *m)
{
	struct statd *d = ctx;
	const char *turn_id, *reply;
	uint32_t status;
	if (rts_msg_get_str(m, &turn_id, RTS_TURN_ID_LEN) < 0 || rts_msg_get_u32(m, &status) < 0 ||
	    rts_msg_get_str(m, &reply, RTS_REPLY_MAX) < 0 || rts_msg_end(m) < 0)
		return -EBADMSG;
	if (!rts_turn_id_valid(turn_id) || status >= RTS_TURN_STATUS_MAX_ || (status != RTS_TURN_OK && *reply))
		return -EBADMSG;
	if (d->link.state != STATD_LINK_READY)
		return -EPROTO;
	statd_turn_done(d, turn_id, (enum rts_turn_status)status, reply);
	return 0;
}

/* What runnerd may send us; anything else is a protocol violation that drops the link. */
static const struct rts_dispatch statd_dispatch_runnerd[] = {
	{RTS_MSG_HELLO_OK, statd_recv_hello_ok},
	{RTS_MSG_TURN_DONE, statd_recv_turn_done},
	{0, NULL},
};

/* Packets handled per wake-up, so a busy link cannot starve the control clients. */
#define LINK_BATCH 32

static int link_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct statd *d = userdata;
	struct statd_link *l = &d->link;
	if (revents & EPOLLOUT)
		link_flush(d);
	for (int i = 0; i < LINK_BATCH && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)); i++) {
		if (l->state != STATD_LINK_HANDSHAKE && l->state != STATD_LINK_READY)
			break;
		struct rts_msg m;
		int r = rts_msg_recv(fd, &m);
		if (r == -EAGAIN) {
			rts_msg_release(&m);
			break;
		}
		if (r == 0) {
			uint32_t type = m.type;
			r = rts_dispatch(statd_dispatch_runnerd, d, &m);
			rts_msg_release(&m);
			if (r < 0) {
				log_error_errno(r, "runnerd link: unexpected or malformed message (type %u), dropping the "
						   "link: %m",
						type);
				link_fail(d);
			}
			continue;
		}
		rts_msg_release(&m);
		if (r == -ECONNRESET)
			log_warning("runnerd closed the link");
		else
			log_error_errno(r, "runnerd link: receive failed, dropping the link: %m");
		link_fail(d);
	}
	return 0;
}

/* ---- connecting ---- */

static int hello_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd *d = userdata;
	log_error("runnerd did not answer HELLO within %u s", STATD_RUNNERD_HELLO_MS / 1000);
	link_fail(d);
	return 0;
}

/* One connect attempt; on success the link is in HANDSHAKE with HELLO queued. */
static int link_try_connect(struct statd *d)
{
	struct statd_link *l = &d->link;
	cleanup_close int fd = rts_connect_unix(l->path, SOCK_SEQPACKET, 0);
	if (fd < 0)
		return fd;
	/* runnerd checks us with SO_PEERCRED; we check it too, so a socket planted by
	 * another account cannot receive guest messages and workspace fds. */
	int r = rts_listener_is_trusted(fd);
	if (r < 0) {
		log_error_errno(r, "%s: the listening process is not this service account, refusing it: %m", l->path);
		return -EPERM;
	}
	r = rts_fd_set_nonblock(fd, true);
	if (r < 0)
		return r;
	r = sd_event_add_io(d->ev, &l->io, fd, EPOLLIN, link_io, d);
	if (r < 0)
		return r;
	l->timer = sd_event_source_disable_unref(l->timer);
	r = sd_event_add_time_relative(d->ev, &l->timer, CLOCK_MONOTONIC, (uint64_t)STATD_RUNNERD_HELLO_MS * 1000u,
				       100000, hello_deadline, d);
	if (r < 0) {
		l->io = sd_event_source_disable_unref(l->io);
		return r;
	}
	l->fd = steal_fd(&fd);
	l->state = STATD_LINK_HANDSHAKE;
	struct statd_outmsg *om = outmsg_new(RTS_MSG_HELLO);
	rts_msg_put_u32(&om->m, RTS_PROTO_VERSION);
	rts_msg_put_str(&om->m, "statd");
	link_queue(d, om);
	return 0;
}

static bool connect_retryable(int r)
{
	/* runnerd not started yet, or restarting. */
	return r == -ENOENT || r == -ECONNREFUSED || r == -EAGAIN;
}

static void connect_failed(struct statd *d, int r)
{
	d->link.fail_fast_until_ms = rts_now_ms() + STATD_RUNNERD_FAIL_FAST_MS;
	log_error_errno(r, "cannot connect to runnerd at %s: %m", d->link.path);
}

static int connect_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd *d = userdata;
	struct statd_link *l = &d->link;
	if (l->state != STATD_LINK_CONNECTING)
		return 0;
	int r = link_try_connect(d);
	if (r == 0)
		return 0;
	if (connect_retryable(r) && rts_now_ms() < l->connect_deadline_ms) {
		r = sd_event_source_set_time_relative(s, (uint64_t)STATD_RUNNERD_RETRY_STEP_MS * 1000u);
		if (r >= 0)
			r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
		if (r >= 0)
			return 0;
	}
	connect_failed(d, r);
	link_fail(d);
	return 0;
}

int statd_link_start(struct statd *d)
{
	struct statd_link *l = &d->link;
	if (l->state != STATD_LINK_IDLE)
		return 0;
	if (rts_now_ms() < l->fail_fast_until_ms)
		return -EHOSTDOWN;
	int r = link_try_connect(d);
	if (r == 0)
		return 0;
	if (!connect_retryable(r)) {
		connect_failed(d, r);
		return r;
	}
	l->connect_deadline_ms = rts_now_ms() + STATD_RUNNERD_CONNECT_MS;
	r = sd_event_add_time_relative(d->ev, &l->timer, CLOCK_MONOTONIC,
				       (uint64_t)STATD_RUNNERD_RETRY_STEP_MS * 1000u, 10000, connect_retry, d);
	if (r < 0) {
		connect_failed(d, r);
		return r;
	}
	l->state = STATD_LINK_CONNECTING;
	log_debug("runnerd not reachable yet, retrying for up to %u ms", STATD_RUNNERD_CONNECT_MS);
	return 0;
}

/* ---- turns ---- */

void statd_link_send_run(struct statd *d, struct statd_turn *t)
{
	struct statd_item *it = t->item;
	struct statd_outmsg *om = outmsg_new(RTS_MSG_TURN_RUN);
	rts_msg_put_str(&om->m, t->id);
	rts_msg_put_str(&om->m, t->ch->key);
	rts_msg_put_str(&om->m, t->ch->hash);
	rts_msg_put_str(&om->m, it->speaker_id);
	rts_msg_put_str(&om->m, it->speaker_name);
	rts_msg_put_str(&om->m, it->principal_id);
	rts_msg_put_str(&om->m, it->text);
	rts_msg_put_u32(&om->m, it->attachments);
	rts_msg_put_u8(&om->m, t->start_fresh ? 1 : 0);
	rts_msg_put_str(&om->m, t->ws_path);
	rts_msg_put_fd(&om->m, steal_fd(&t->ws_fd));
	om->turn = t;
	t->state = STATD_TURN_SENT;
	link_queue(d, om);
}

/* Take t's TURN_RUN out of the send queue if it is still there. */
static bool link_withdraw(struct statd *d, struct statd_turn *t)
{
	struct statd_link *l = &d->link;
	for (struct statd_outmsg **p = &l->out_head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
		if ((*p)->turn != t)
			continue;
		struct statd_outmsg *om = *p;
		*p = om->next;
		if (l->out_tail == om)
			l->out_tail = prev;
		outmsg_free(om);
		link_set_events(d);
		return true;
	}
	return false;
}

bool statd_link_send_cancel(struct statd *d, struct statd_turn *t)
{
	if (link_withdraw(d, t))
		return true;
	if (t->cancel_sent || d->link.state != STATD_LINK_READY)
		return false;
	struct statd_outmsg *om = outmsg_new(RTS_MSG_TURN_CANCEL);
	rts_msg_put_str(&om->m, t->id);
	t->cancel_sent = true;
	link_queue(d, om);
	return false;
}

void statd_link_forget_turn(struct statd *d, struct statd_turn *t)
{
	/* An unsent TURN_RUN of a turn that ended is withdrawn: runnerd never hears of it. */
	(void)link_withdraw(d, t);
}
