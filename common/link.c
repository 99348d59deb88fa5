/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>

#include "common/link.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

enum link_state {
	LINK_CONNECTING, /* connecting side: retrying connect() on the timer */
	LINK_HELLO,	 /* HELLO sent (connecting) or awaited (listening), under the deadline */
	LINK_UP,
	LINK_DEAD, /* failed; on_down is pending */
};

struct out_msg {
	STAILQ_ENTRY(out_msg) entry;
	struct rts_packet p;
	const void *tag;
};

struct rts_link {
	sd_event *event;
	const struct rts_link_spec *spec;
	void *owner;
	enum link_state state;
	bool connecting_side;
	char *path; /* connecting side */
	uint64_t connect_deadline_ms;
	int fd;
	sd_event_source *io;
	sd_event_source *timer; /* connect retries, then the HELLO deadline */
	sd_event_source *down_src;
	sd_event_source *drain_src; /* on_drain, from its own event */
	STAILQ_HEAD(, out_msg) out;
	unsigned n_out;
	bool congested;
	struct rts_packet rx;
	int err;
	bool was_up;
	struct rts_link_server *server;
	LIST_ENTRY(rts_link) server_entry;
};

struct rts_link_server {
	sd_event *event;
	const struct rts_link_spec *spec;
	sd_event_source *src;
	unsigned max_links, n_links;
	void *(*peer_new)(void *owner, struct rts_link *l);
	void *owner;
	LIST_HEAD(, rts_link) links;
};

/* ---- dispatch ---- */

static int on_hello(struct rts_link *l, void *owner, struct rts_msg_hello *m);
static int on_hello_ok(struct rts_link *l, void *owner, struct rts_msg_hello_ok *m);

/* Before HELLO: the one message each side may get. */
static const struct rts_link_dispatch dispatch_hello[] = {
	RTS_LINK_ON(HELLO, on_hello),
	RTS_LINK_DISPATCH_END,
};
static const struct rts_link_dispatch dispatch_hello_ok[] = {
	RTS_LINK_ON(HELLO_OK, on_hello_ok),
	RTS_LINK_DISPATCH_END,
};

static const struct rts_link_dispatch *dispatch_find(const struct rts_link_dispatch *table, uint32_t type)
{
	for (const struct rts_link_dispatch *e = table; e->type; e++)
		if (e->type == type)
			return e;
	return NULL;
}

static int dispatch_call(const struct rts_link_dispatch *e, struct rts_link *l, union rts_msg_payload *u)
{
	switch (e->type) {
#define CALL_(NAME, name, number, link, dir, has_fd) \
	case RTS_MSG_##NAME:                         \
		return e->on.NAME(l, l->owner, &u->name);
		RTS_PROTO_MESSAGES(CALL_)
#undef CALL_
	}
	return -EPROTO;
}

/* A table that lists a message its side cannot receive is a bug: stop at once. */
static void dispatch_check(const struct rts_link_spec *spec, bool connecting_side)
{
	enum rts_proto_dir want = connecting_side ? RTS_PROTO_TO_CONNECTOR : RTS_PROTO_TO_LISTENER;
	for (const struct rts_link_dispatch *e = spec->dispatch; e->type; e++) {
		const struct rts_msg_desc *d = rts_msg_desc_of(e->type);
		if (!d || d->link != spec->proto || d->dir != want)
			fatal_f("%s: the dispatch table of %s lists %s, which this side never receives", spec->sock,
				spec->self, rts_msg_name(e->type));
	}
}

/* ---- the queue and failure ---- */

static void out_free(struct out_msg *o)
{
	rts_packet_free(&o->p);
	free(o);
}

static void down_run(struct rts_link *l)
{
	l->down_src = sd_event_source_disable_unref(l->down_src);
	l->spec->on_down(l, l->owner, l->err, l->was_up);
	rts_link_free(l);
}

static int on_down_event(sd_event_source *s, void *userdata)
{
	down_run(userdata);
	return 0;
}

void rts_link_fail(struct rts_link *l, int err)
{
	if (l->state == LINK_DEAD)
		return;
	l->was_up = l->state == LINK_UP;
	l->state = LINK_DEAD;
	l->err = err < 0 ? err : -EPROTO;
	if (l->io)
		sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
	l->timer = sd_event_source_disable_unref(l->timer);
	int r = sd_event_add_defer(l->event, &l->down_src, on_down_event, l);
	if (r < 0)
		/* Only short of memory; without it the owner would wait for ever. */
		fatal_f("%s: cannot schedule the end of the link: %s", l->spec->sock, strerror(-r));
}

/* Which events to wait for: EPOLLOUT while something is queued; EPOLLIN unless this is
 * a congested listening side (back-pressure on a peer that does not read its answers). */
static void update_events(struct rts_link *l)
{
	if (l->state == LINK_DEAD || !l->io)
		return;
	uint32_t ev = 0;
	if (l->connecting_side || !l->congested)
		ev |= EPOLLIN;
	if (!STAILQ_EMPTY(&l->out))
		ev |= EPOLLOUT;
	int r = sd_event_source_set_io_events(l->io, ev);
	if (r < 0) {
		log_error_errno(r, "%s: cannot update the link's events: %m", l->spec->sock);
		rts_link_fail(l, r);
	}
}

static int on_drain_event(sd_event_source *s, void *userdata)
{
	struct rts_link *l = userdata;
	l->drain_src = sd_event_source_disable_unref(l->drain_src);
	if (l->state == LINK_UP && l->spec->on_drain)
		l->spec->on_drain(l, l->owner);
	return 0;
}

/* Half empty again after congestion: reading resumes (update_events) and on_drain runs
 * from its own event, never inside the send or withdrawal that got here. */
static void uncongest(struct rts_link *l)
{
	if (!l->congested || l->n_out > RTS_LINK_QUEUE_HIGH / 2)
		return;
	l->congested = false;
	if (!l->drain_src && l->spec->on_drain) {
		int r = sd_event_add_defer(l->event, &l->drain_src, on_drain_event, l);
		if (r < 0)
			fatal_f("%s: cannot schedule the drain callback: %s", l->spec->sock, strerror(-r));
	}
}

/* A peer's clients come and go (info); the server a daemon needs going away is worth a
 * warning. */
static void peer_closed(const struct rts_link *l)
{
	rts_log(l->connecting_side ? LOG_WARNING : LOG_INFO, "%s closed the link%s", l->spec->peer_name,
		l->state == LINK_HELLO ? " before HELLO completed" : "");
}

static void flush(struct rts_link *l)
{
	struct out_msg *o;
	while (l->state != LINK_DEAD && l->state != LINK_CONNECTING && (o = STAILQ_FIRST(&l->out))) {
		int r = rts_packet_send(l->fd, &o->p);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			uint32_t version, type = 0;
			(void)rts_msg_header(&o->p, &version, &type);
			if (r == -EPIPE || r == -ECONNRESET)
				peer_closed(l);
			else
				log_warning_errno(r, "cannot send %s to %s: %m", rts_msg_name(type), l->spec->peer_name);
			rts_link_fail(l, r);
			return;
		}
		STAILQ_REMOVE_HEAD(&l->out, entry);
		l->n_out--;
		out_free(o);
	}
	uncongest(l);
	update_events(l);
}

/* Queue an encoded packet (taken over) and try to send it at once. */
static int queue_packet(struct rts_link *l, struct rts_packet *p, const void *tag)
{
	if (l->n_out >= RTS_LINK_QUEUE_MAX) {
		rts_packet_free(p);
		log_warning("%s does not read its messages; dropping the link", l->spec->peer_name);
		rts_link_fail(l, -ENOBUFS);
		return -ENOBUFS;
	}
	struct out_msg *o = rts_xcalloc(1, sizeof(*o));
	o->p = *p;
	*p = (struct rts_packet)RTS_PACKET_INIT;
	o->tag = tag;
	STAILQ_INSERT_TAIL(&l->out, o, entry);
	if (++l->n_out >= RTS_LINK_QUEUE_HIGH)
		l->congested = true;
	/* Behind others: EPOLLOUT sends it in order. */
	if (l->n_out == 1)
		flush(l);
	else
		update_events(l);
	return l->state == LINK_DEAD ? l->err : 0;
}

static int send_packet(struct rts_link *l, uint32_t type, const void *payload, const void *tag)
{
	struct rts_packet p = RTS_PACKET_INIT;
	int r = rts_msg_encode(type, payload, &p);
	if (r < 0) {
		log_error_errno(r, "cannot encode %s for %s (a field is over its maximum): %m", rts_msg_name(type),
				l->spec->peer_name);
		rts_packet_free(&p);
		return r;
	}
	return queue_packet(l, &p, tag);
}

int rts_link_send(struct rts_link *l, uint32_t type, const void *payload, const void *tag)
{
	if (!l || l->state != LINK_UP) {
		/* Still take the fd, as promised. */
		const struct rts_msg_desc *d = rts_msg_desc_of(type);
		if (d && d->has_fd) {
			int fd;
			memcpy(&fd, (const char *)payload + d->fd_offset, sizeof(fd));
			if (fd >= 0)
				close(fd);
		}
		return -ENOTCONN;
	}
	return send_packet(l, type, payload, tag);
}

bool rts_link_withdraw(struct rts_link *l, const void *tag)
{
	struct out_msg *o;
	STAILQ_FOREACH(o, &l->out, entry)
	{
		/* SEQPACKET sends whole packets: anything still queued has not left. */
		if (o->tag != tag)
			continue;
		STAILQ_REMOVE(&l->out, o, out_msg, entry);
		l->n_out--;
		out_free(o);
		uncongest(l);
		update_events(l);
		return true;
	}
	return false;
}

bool rts_link_up(const struct rts_link *l)
{
	return l && l->state == LINK_UP;
}

bool rts_link_has_room(const struct rts_link *l)
{
	return rts_link_up(l) && !l->congested;
}

/* ---- HELLO ---- */

/* A peer-chosen string for a log line: printable ASCII only. */
static void printable(const char *s, char *out, size_t size)
{
	size_t n = 0;
	for (; s && *s && n + 1 < size; s++)
		out[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	out[n] = '\0';
}

static void hello_done(struct rts_link *l, uint32_t version, const char *program)
{
	char prog[RTS_PROGRAM_NAME_MAX + 1];
	printable(program, prog, sizeof(prog));
	l->state = LINK_UP;
	l->timer = sd_event_source_disable_unref(l->timer);
	if (l->connecting_side)
		log_info("connected to %s (%s, protocol %u)", l->spec->peer_name, prog, version);
	else
		log_info("%s: %s connected (protocol %u)", l->spec->sock, prog, version);
	if (l->spec->on_up)
		l->spec->on_up(l, l->owner);
}

/* The peer names another program than the one this link is for: said once, here. */
static int wrong_program(struct rts_link *l, const char *program)
{
	char prog[RTS_PROGRAM_NAME_MAX + 1];
	printable(program, prog, sizeof(prog));
	log_error("%s: the peer says it is \"%s\", not %s; dropping it (is another program using this socket?)",
		  l->spec->sock, prog, l->spec->peer);
	rts_link_fail(l, -EPROTO);
	return 0;
}

static int on_hello(struct rts_link *l, void *owner, struct rts_msg_hello *m)
{
	if (strcmp(m->program, l->spec->peer) != 0)
		return wrong_program(l, m->program);
	int r = send_packet(l, RTS_MSG_HELLO_OK,
			    &(struct rts_msg_hello_ok){.version = RTS_PROTO_VERSION, .program = l->spec->self}, NULL);
	if (r < 0)
		return r;
	hello_done(l, m->version, m->program);
	return 0;
}

static int on_hello_ok(struct rts_link *l, void *owner, struct rts_msg_hello_ok *m)
{
	if (strcmp(m->program, l->spec->peer) != 0)
		return wrong_program(l, m->program);
	hello_done(l, m->version, m->program);
	return 0;
}

/* proto.h, "Version negotiation": one line on each side, naming both versions. */
static void version_mismatch(struct rts_link *l, uint32_t theirs)
{
	log_error("%s: %s speaks protocol version %u and this %s version %u: install the same release of "
		  "roundtable-sandbox for statd, runnerd and brokerd, then restart them",
		  l->spec->sock, l->spec->peer, theirs, l->spec->self, RTS_PROTO_VERSION);
	/* Our HELLO_OK lets the connecting side say the same; then the link goes. */
	if (!l->connecting_side) {
		struct rts_packet p = RTS_PACKET_INIT;
		if (rts_msg_encode(RTS_MSG_HELLO_OK,
				   &(struct rts_msg_hello_ok){.version = RTS_PROTO_VERSION, .program = l->spec->self},
				   &p) == 0)
			(void)rts_packet_send(l->fd, &p);
		rts_packet_free(&p);
	}
	rts_link_fail(l, -EPROTONOSUPPORT);
}

/* ---- receiving ---- */

/* One received packet: permitted in this state? decoded strictly? then its handler. */
static void handle_packet(struct rts_link *l)
{
	uint32_t version, type;
	if (rts_msg_header(&l->rx, &version, &type) < 0) {
		log_error("protocol violation by %s: a packet shorter than a header; dropping it", l->spec->peer_name);
		rts_link_fail(l, -EBADMSG);
		return;
	}
	const struct rts_link_dispatch *table =
		l->state == LINK_UP ? l->spec->dispatch : l->connecting_side ? dispatch_hello_ok : dispatch_hello;
	const struct rts_link_dispatch *e = dispatch_find(table, type);
	if (!e) {
		log_error("protocol violation by %s: %s (type %u) is not expected %s; dropping it", l->spec->peer_name,
			  rts_msg_name(type), type, l->state == LINK_UP ? "on this link" : "before HELLO");
		rts_link_fail(l, -EPROTO);
		return;
	}
	uint32_t theirs;
	if ((type == RTS_MSG_HELLO || type == RTS_MSG_HELLO_OK) && rts_msg_peer_version(&l->rx, &theirs) == 0 &&
	    theirs != RTS_PROTO_VERSION) {
		version_mismatch(l, theirs);
		return;
	}
	union rts_msg_payload u;
	memset(&u, 0, sizeof(u));
	int r = rts_msg_decode(&l->rx, type, &u);
	if (r < 0) {
		log_error("protocol violation by %s: a malformed %s; dropping it", l->spec->peer_name, rts_msg_name(type));
		rts_link_fail(l, r);
		return;
	}
	r = dispatch_call(e, l, &u);
	const struct rts_msg_desc *d = rts_msg_desc_of(type);
	if (d->has_fd) {
		int fd;
		memcpy(&fd, (char *)&u + d->fd_offset, sizeof(fd));
		if (fd >= 0)
			close(fd);
	}
	if (r < 0 && l->state != LINK_DEAD) {
		log_error_errno(r, "protocol violation by %s: %s refused: %m; dropping it", l->spec->peer_name,
				rts_msg_name(type));
		rts_link_fail(l, r);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rts_link *l = userdata;
	if (revents & EPOLLOUT)
		flush(l);
	bool reading = l->connecting_side || !l->congested;
	for (unsigned i = 0; i < RTS_LINK_BURST && reading && l->state != LINK_DEAD && (revents & EPOLLIN); i++) {
		int r = rts_packet_recv(l->fd, &l->rx);
		if (r == -EAGAIN)
			break;
		if (r == 0) {
			handle_packet(l);
			rts_packet_clear(&l->rx);
			reading = l->connecting_side || !l->congested;
			continue;
		}
		if (r == -ECONNRESET)
			peer_closed(l);
		else if (r == -EBADMSG)
			log_error("protocol violation by %s: a truncated packet, bad control data or more than one fd; "
				  "dropping it",
				  l->spec->peer_name);
		else
			log_error_errno(r, "cannot receive from %s: %m", l->spec->peer_name);
		rts_link_fail(l, r);
	}
	/* A hang-up without readable data (with data, the read above saw the end). */
	if (l->state != LINK_DEAD && (revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN)) {
		peer_closed(l);
		rts_link_fail(l, -ECONNRESET);
	}
	return 0;
}

static unsigned hello_ms(const struct rts_link_spec *spec)
{
	return spec->hello_ms ? spec->hello_ms : RTS_LINK_HELLO_MS;
}

static int on_hello_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct rts_link *l = userdata;
	if (l->connecting_side)
		log_error("%s did not answer HELLO within %u ms; dropping the link", l->spec->peer_name,
			  hello_ms(l->spec));
	else
		log_warning("a %s client did not say HELLO within %u ms; dropping it", l->spec->sock, hello_ms(l->spec));
	rts_link_fail(l, -ETIMEDOUT);
	return 0;
}

/* The accepted-peer predicate, before a byte is read or sent. */
static int peer_ok(const struct rts_link_spec *spec, int fd, bool connecting_side)
{
	int r = spec->peer_check(fd);
	if (r < 0)
		/* The connecting side cannot go on at all: an error. A listener just refuses. */
		rts_log_errno(connecting_side ? LOG_ERR : LOG_WARNING, r, "refusing a %s %s: %m", spec->sock,
			      spec->peer_refusal);
	return r;
}

/* fd is connected (either side; taken over): watch it, arm the HELLO deadline and, on the
 * connecting side, queue HELLO. */
static int link_start(struct rts_link *l, int fd)
{
	cleanup_close int sock = fd;
	int r = rts_fd_set_nonblock(sock, true);
	if (r < 0)
		return r;
	r = sd_event_add_io(l->event, &l->io, sock, EPOLLIN, on_io, l);
	if (r < 0)
		return r;
	l->timer = sd_event_source_disable_unref(l->timer);
	r = sd_event_add_time_relative(l->event, &l->timer, CLOCK_MONOTONIC, (uint64_t)hello_ms(l->spec) * 1000u,
				       10 * 1000, on_hello_deadline, l);
	if (r < 0) {
		l->io = sd_event_source_disable_unref(l->io);
		return r;
	}
	l->fd = steal_fd(&sock);
	l->state = LINK_HELLO;
	if (!l->connecting_side)
		return 0;
	/* Failing here fails the link (deferred), like any later send. */
	(void)send_packet(l, RTS_MSG_HELLO,
			  &(struct rts_msg_hello){.version = RTS_PROTO_VERSION, .program = l->spec->self}, NULL);
	return 0;
}

static struct rts_link *link_new(sd_event *e, const struct rts_link_spec *spec, bool connecting_side)
{
	dispatch_check(spec, connecting_side);
	struct rts_link *l = rts_xcalloc(1, sizeof(*l));
	l->event = e;
	l->spec = spec;
	l->connecting_side = connecting_side;
	l->fd = -1;
	l->rx = (struct rts_packet)RTS_PACKET_INIT;
	STAILQ_INIT(&l->out);
	return l;
}

int rts_link_open(sd_event *e, int fd, const struct rts_link_spec *spec, bool connecting_side, void *owner,
		  struct rts_link **ret)
{
	cleanup_close int sock = fd;
	int r = peer_ok(spec, sock, connecting_side);
	if (r < 0)
		return r;
	struct rts_link *l = link_new(e, spec, connecting_side);
	l->owner = owner;
	r = link_start(l, steal_fd(&sock));
	if (r < 0) {
		rts_link_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

void rts_link_free(struct rts_link *l)
{
	if (!l)
		return;
	struct out_msg *o;
	while ((o = STAILQ_FIRST(&l->out))) {
		STAILQ_REMOVE_HEAD(&l->out, entry);
		out_free(o);
	}
	l->io = sd_event_source_disable_unref(l->io);
	l->timer = sd_event_source_disable_unref(l->timer);
	l->down_src = sd_event_source_disable_unref(l->down_src);
	l->drain_src = sd_event_source_disable_unref(l->drain_src);
	if (l->fd >= 0)
		close(l->fd);
	rts_packet_free(&l->rx);
	if (l->server) {
		LIST_REMOVE(l, server_entry);
		l->server->n_links--;
	}
	free(l->path);
	free(l);
}

/* ---- the connecting side ---- */

static bool connect_retryable(int r)
{
	/* Not started yet, restarting, or its backlog is full. */
	return r == -ENOENT || r == -ECONNREFUSED || r == -EAGAIN;
}

static int on_connect_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct rts_link *l = userdata;
	int fd = rts_connect_unix_once(l->path, SOCK_SEQPACKET);
	if (fd < 0) {
		if (connect_retryable(fd) && rts_now_ms() < l->connect_deadline_ms) {
			int r = sd_event_source_set_time_relative(s, (uint64_t)RTS_LINK_CONNECT_STEP_MS * 1000u);
			if (r >= 0)
				r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
			if (r >= 0)
				return 0;
			fd = r;
		}
		log_error_errno(fd, "cannot connect to %s at %s: %m", l->spec->peer_name, l->path);
		rts_link_fail(l, fd);
		return 0;
	}
	/* Before a single byte: a socket planted by another account must not receive what
	 * this link carries (guest messages, workspace and listener fds). */
	int r = peer_ok(l->spec, fd, true);
	if (r >= 0)
		r = link_start(l, fd);
	else
		close(fd);
	if (r < 0 && l->state != LINK_DEAD) {
		if (r != -EPERM)
			log_error_errno(r, "cannot watch the link to %s: %m", l->spec->peer_name);
		rts_link_fail(l, r);
	}
	return 0;
}

int rts_link_connect(sd_event *e, const char *path, const struct rts_link_spec *spec, void *owner,
		     struct rts_link **ret)
{
	struct rts_link *l = link_new(e, spec, true);
	l->owner = owner;
	l->path = rts_xstrdup(path);
	l->state = LINK_CONNECTING;
	l->connect_deadline_ms = rts_now_ms() + (spec->connect_ms ? spec->connect_ms : RTS_LINK_CONNECT_MS);
	int r = sd_event_add_time_relative(e, &l->timer, CLOCK_MONOTONIC, 0, 0, on_connect_timer, l);
	if (r < 0) {
		rts_link_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

/* ---- the listening side ---- */

static int on_accept(sd_event_source *src, int listen_fd, uint32_t revents, void *userdata)
{
	struct rts_link_server *s = userdata;
	const struct rts_link_spec *spec = s->spec;
	for (unsigned i = 0; i < 16; i++) {
		cleanup_close int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warning_errno(-errno, "accept on %s failed: %m", spec->sock);
			return 0;
		}
		/* Before reading a single byte: only the accepted peers may drive this daemon. */
		if (peer_ok(spec, fd, false) < 0)
			continue;
		if (s->n_links >= s->max_links) {
			log_warning("refusing a %s connection: too many connections", spec->sock);
			continue;
		}
		struct rts_link *l = link_new(s->event, spec, false);
		int r = link_start(l, steal_fd(&fd));
		if (r < 0) {
			log_error_errno(r, "cannot watch a %s connection: %m", spec->sock);
			rts_link_free(l);
			continue;
		}
		l->server = s;
		LIST_INSERT_HEAD(&s->links, l, server_entry);
		s->n_links++;
		l->owner = s->peer_new(s->owner, l);
		if (!l->owner)
			rts_link_free(l);
	}
	return 0;
}

int rts_link_server_new(sd_event *e, int listen_fd, const struct rts_link_spec *spec, unsigned max_links,
			void *(*peer_new)(void *owner, struct rts_link *l), void *owner, struct rts_link_server **ret)
{
	dispatch_check(spec, false);
	struct rts_link_server *s = rts_xcalloc(1, sizeof(*s));
	*s = (struct rts_link_server){
		.event = e, .spec = spec, .max_links = max_links, .peer_new = peer_new, .owner = owner};
	LIST_INIT(&s->links);
	int r = sd_event_add_io(e, &s->src, listen_fd, EPOLLIN, on_accept, s);
	if (r >= 0)
		r = sd_event_source_set_enabled(s->src, SD_EVENT_OFF);
	if (r < 0) {
		rts_link_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int rts_link_server_enable(struct rts_link_server *s, bool on)
{
	return sd_event_source_set_enabled(s->src, on ? SD_EVENT_ON : SD_EVENT_OFF);
}

void rts_link_server_free(struct rts_link_server *s)
{
	if (!s)
		return;
	struct rts_link *l;
	while ((l = LIST_FIRST(&s->links))) {
		LIST_REMOVE(l, server_entry);
		l->server = NULL;
	}
	sd_event_source_disable_unref(s->src);
	free(s);
}
