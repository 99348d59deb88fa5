/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <sys/queue.h>

#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/link.h"

/* Messages handled per wake-up, so one peer cannot starve the others. */
#define LINK_BURST 32

struct out_msg {
	TAILQ_ENTRY(out_msg) entry;
	struct rts_msg m;
};

struct runnerd_link {
	int fd;
	sd_event_source *io;
	sd_event_source *close_src;
	const char *peer;
	const struct runnerd_link_ops *ops;
	void *owner;
	TAILQ_HEAD(, out_msg) out;
	unsigned n_out;
	bool dead;
	int err;
};

static int on_close_deferred(sd_event_source *s, void *userdata)
{
	struct runnerd_link *l = userdata;
	l->close_src = sd_event_source_disable_unref(l->close_src);
	l->ops->on_close(l->owner, l->err);
	return 0;
}

void runnerd_link_fail(struct runnerd_link *l, int err)
{
	if (l->dead)
		return;
	l->dead = true;
	l->err = err;
	sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
	int r = sd_event_add_defer(sd_event_source_get_event(l->io), &l->close_src, on_close_deferred, l);
	if (r < 0)
		/* Cannot happen short of memory exhaustion; a link that cannot be closed through
		 * the loop would leave turns hanging, so stop here. */
		fatal_f("cannot schedule closing the %s link: %s", l->peer, strerror(-r));
}

bool runnerd_link_dead(const struct runnerd_link *l)
{
	return l->dead;
}

static void flush(struct runnerd_link *l)
{
	struct out_msg *o;
	while (!l->dead && (o = TAILQ_FIRST(&l->out))) {
		int r = rts_msg_send(l->fd, &o->m);
		if (r == -EAGAIN) {
			sd_event_source_set_io_events(l->io, EPOLLIN | EPOLLOUT);
			return;
		}
		if (r < 0) {
			log_warning_errno(r, "cannot send to %s: %m", l->peer);
			runnerd_link_fail(l, r);
			return;
		}
		TAILQ_REMOVE(&l->out, o, entry);
		l->n_out--;
		rts_msg_release(&o->m);
		free(o);
	}
	if (!l->dead)
		sd_event_source_set_io_events(l->io, EPOLLIN);
}

int runnerd_link_send(struct runnerd_link *l, struct rts_msg *m)
{
	if (l->dead) {
		rts_msg_release(m);
		return -ENOTCONN;
	}
	if (l->n_out >= RUNNERD_LINK_QUEUE_MAX) {
		rts_msg_release(m);
		log_warning("%s does not read its messages; dropping the link", l->peer);
		runnerd_link_fail(l, -ENOBUFS);
		return -ENOBUFS;
	}
	struct out_msg *o = rts_xcalloc(1, sizeof(*o));
	o->m = *m;
	/* The queue owns the buffer and the fd now. */
	*m = (struct rts_msg){.fd = -1};
	TAILQ_INSERT_TAIL(&l->out, o, entry);
	l->n_out++;
	flush(l);
	return l->dead ? (l->err < 0 ? l->err : -ENOTCONN) : 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct runnerd_link *l = userdata;
	if (revents & EPOLLOUT)
		flush(l);
	for (int i = 0; i < LINK_BURST && !l->dead; i++) {
		struct rts_msg m;
		int r = rts_msg_recv(l->fd, &m);
		if (r == -EAGAIN) {
			rts_msg_release(&m);
			break;
		}
		if (r == 0)
			r = l->ops->on_msg(l->owner, &m);
		rts_msg_release(&m);
		if (r < 0) {
			if (r == -ECONNRESET)
				log_info("%s closed the connection", l->peer);
			else
				log_error_errno(r, "protocol violation by %s (message type %u), dropping it: %m", l->peer,
						(unsigned)m.type);
			runnerd_link_fail(l, r);
		}
	}
	/* A hang-up without readable data (EPOLLIN would have given ECONNRESET above). */
	if (!l->dead && (revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN))
		runnerd_link_fail(l, -ECONNRESET);
	return 0;
}

int runnerd_link_new(sd_event *e, int fd, const char *peer, const struct runnerd_link_ops *ops, void *owner,
		     struct runnerd_link **ret)
{
	cleanup_close int sock = fd;
	int r = rts_fd_set_nonblock(sock, true);
	if (r < 0)
		return r;
	struct runnerd_link *l = rts_xcalloc(1, sizeof(*l));
	l->peer = peer;
	l->ops = ops;
	l->owner = owner;
	TAILQ_INIT(&l->out);
	r = sd_event_add_io(e, &l->io, sock, EPOLLIN, on_io, l);
	if (r < 0) {
		free(l);
		return r;
	}
	l->fd = steal_fd(&sock);
	*ret = l;
	return 0;
}

void runnerd_link_free(struct runnerd_link *l)
{
	if (!l)
		return;
	struct out_msg *o;
	while ((o = TAILQ_FIRST(&l->out))) {
		TAILQ_REMOVE(&l->out, o, entry);
		rts_msg_release(&o->m);
		free(o);
	}
	l->io = sd_event_source_disable_unref(l->io);
	l->close_src = sd_event_source_disable_unref(l->close_src);
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}
