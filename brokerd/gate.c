/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <microhttpd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "brokerd/audit.h"
#include "brokerd/gate.h"
#include "brokerd/head.h"
#include "brokerd/http.h"
#include "brokerd/turn.h"
#include "common/log.h"
#include "common/util.h"

#define ACCEPT_BATCH 16u      /* accepts per listener wake-up (the listener is level-triggered) */
#define PEEKS_MAX 64u	      /* a head arriving in more pieces is refused (each peek re-reads it) */
#define DRAIN_MAX (64u * 1024u) /* unread bytes discarded before a refused connection is closed */
#define HANDOFF_STALE_MS 5000u /* a hand-off libmicrohttpd did not take up by then never will be */

#define ANSWER_HEAD "Content-Type: application/json\r\nConnection: close\r\n"

static const char answer_bad_request[] = "HTTP/1.1 400 Bad Request\r\n" ANSWER_HEAD
					 "Content-Length: 23\r\n\r\n{\"error\":\"bad_request\"}";
static const char answer_too_large[] = "HTTP/1.1 413 Content Too Large\r\n" ANSWER_HEAD
				       "Content-Length: 21\r\n\r\n{\"error\":\"too_large\"}";

const char *brokerd_gate_answer(enum brokerd_result r)
{
	return r == BROKERD_TOO_LARGE ? answer_too_large : answer_bad_request;
}

/* A connection whose head has not been checked yet. Main thread only. */
struct brokerd_pending {
	struct brokerd_turn *t;
	int fd;
	sd_event_source *src;
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t accepted_ms;
	unsigned peeks;
	bool got_bytes;
	struct brokerd_pending *prev, *next;
};

static unsigned count_call(struct brokerd_turn *t)
{
	pthread_mutex_lock(&t->lock);
	if (t->calls < UINT_MAX)
		t->calls++;
	unsigned n = t->calls;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* Connections of this listener that are open: waiting here, handed over, or served. */
static unsigned open_connections(struct brokerd_turn *t)
{
	unsigned n = t->n_pending;
	pthread_mutex_lock(&t->lock);
	for (struct brokerd_conn *c = t->handoff; c; c = c->next)
		n++;
	for (struct brokerd_conn *c = t->conns; c; c = c->next)
		n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void pending_free(struct brokerd_pending *p)
{
	struct brokerd_turn *t = p->t;
	if (p->prev)
		p->prev->next = p->next;
	else
		t->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	t->n_pending--;
	sd_event_source_disable_unref(p->src);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

/* The audit entry of a call the gate ended (brokerd/audit.h); what is the detail for the
 * debug log (static). */
static void audit(struct brokerd_pending *p, unsigned call_no, enum brokerd_result r, const char *rule,
		  const char *what)
{
	log_debug("turn %s: call %u: %s", p->t->b.turn_id, call_no, what);
	brokerd_audit_call(&p->t->b, call_no, "none", rule, r, false, rts_now_ms() - p->accepted_ms);
}

/* Discard what the peer sent (bounded) and close. Closing an AF_UNIX socket with unread
 * data makes the peer's next read fail with ECONNRESET, which could cost it an answer
 * written just before. */
static void close_drained(struct brokerd_pending *p)
{
	shutdown(p->fd, SHUT_WR);
	char sink[4096];
	for (size_t drained = 0; drained < DRAIN_MAX;) {
		ssize_t n = recv(p->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	pending_free(p);
}

/* Close a connection that never sent a whole head, unanswered. It counts as a call when
 * it sent anything at all. */
static void drop(struct brokerd_pending *p, const char *rule, const char *what)
{
	if (p->got_bytes)
		audit(p, count_call(p->t), BROKERD_RESULT_MAX_, rule, what);
	close_drained(p);
}

/* Answer r and close. */
static void refuse(struct brokerd_pending *p, enum brokerd_result r, const char *rule, const char *why)
{
	audit(p, count_call(p->t), r, rule, why);
	const char *answer = brokerd_gate_answer(r);
	/* A fresh connection's send buffer is empty: this short write does not block. */
	if (send(p->fd, answer, strlen(answer), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("turn %s: cannot answer a refused request head: %m", p->t->b.turn_id);
	close_drained(p);
}

/* Give a connection with a valid head to libmicrohttpd. */
static void handoff(struct brokerd_pending *p)
{
	struct brokerd_turn *t = p->t;
	struct brokerd_conn *c = rts_xcalloc(1, sizeof(*c));
	c->turn = t;
	c->fd = p->fd;
	c->accepted_ms = p->accepted_ms;
	c->handed_ms = rts_now_ms();
	c->deadline_ms = p->accepted_ms + RTS_BROKER_REQUEST_DEADLINE_MS;
	c->state = BROKERD_CONN_NEW;
	c->call_no = count_call(t);

	int fd = steal_fd(&p->fd);
	struct sockaddr_un addr = p->addr;
	socklen_t addr_len = p->addr_len;
	/* The event source must be gone before libmicrohttpd owns (and may close) the fd. */
	pending_free(p);

	pthread_mutex_lock(&t->lock);
	/* An entry for the same fd number is stale: that descriptor was closed and reused. */
	for (struct brokerd_conn **q = &t->handoff; *q; q = &(*q)->next)
		if ((*q)->fd == fd) {
			struct brokerd_conn *old = *q;
			*q = old->next;
			free(old);
			break;
		}
	c->next = t->handoff;
	t->handoff = c;
	pthread_mutex_unlock(&t->lock);

	/* libmicrohttpd closes the socket when this fails. */
	if (MHD_add_connection(t->mhd, fd, (const struct sockaddr *)&addr, addr_len) != MHD_YES) {
		log_warning_errno(errno, "turn %s: cannot hand a connection to the HTTP server: %m", t->b.turn_id);
		pthread_mutex_lock(&t->lock);
		struct brokerd_conn *mine = brokerd_gate_claim_locked(t, fd);
		pthread_mutex_unlock(&t->lock);
		if (mine)
			brokerd_audit_call(&t->b, mine->call_no, "none", "server_error", BROKERD_RESULT_MAX_, false,
					   rts_now_ms() - mine->accepted_ms);
		free(mine);
	}
}

/* Look at what the connection has sent so far. */
static void peek(struct brokerd_pending *p, uint32_t revents)
{
	/* Main thread only, so one buffer serves every turn. */
	static char buf[BROKERD_HEAD_MAX];
	ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			drop(p, "head_incomplete", "receive error before the head was complete");
		return;
	}
	if (n == 0) {
		drop(p, "head_incomplete", "closed before the head was complete");
		return;
	}
	p->got_bytes = true;
	struct brokerd_head h;
	switch (brokerd_head_scan(buf, (size_t)n, &h)) {
	case BROKERD_HEAD_COMPLETE:
		if (h.content_length > RTS_BROKER_BODY_MAX)
			refuse(p, BROKERD_TOO_LARGE, "body_too_large", "body larger than the limit");
		else
			handoff(p);
		return;
	case BROKERD_HEAD_INVALID:
		refuse(p, BROKERD_BAD_REQUEST, "head_syntax", h.why);
		return;
	case BROKERD_HEAD_INCOMPLETE:
		break;
	}
	if (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		drop(p, "head_incomplete", "closed before the head was complete");
	else if (++p->peeks >= PEEKS_MAX)
		refuse(p, BROKERD_BAD_REQUEST, "head_pieces", "head sent in too many pieces");
}

static int on_pending(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	peek(userdata, revents);
	return 0;
}

static int on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd_turn *t = userdata;
	for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_un addr;
		socklen_t addr_len = sizeof(addr);
		cleanup_close int c = accept4(fd, (struct sockaddr *)&addr, &addr_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warning_errno(errno, "turn %s: accept on the broker socket: %m", t->b.turn_id);
			return 0;
		}
		/* Seed: at most 16 connections per listener. Beyond that a connection is closed
		 * at once, unanswered and uncounted. */
		if (open_connections(t) >= BROKERD_CONNECTIONS_PER_TURN) {
			log_debug("turn %s: connection refused: %u connections open", t->b.turn_id,
				  BROKERD_CONNECTIONS_PER_TURN);
			brokerd_metrics_connection_refused();
			continue;
		}
		struct brokerd_pending *p = rts_xcalloc(1, sizeof(*p));
		p->t = t;
		p->addr = addr;
		p->addr_len = addr_len;
		p->accepted_ms = rts_now_ms();
		/* Edge-triggered: a head that is still incomplete after a peek stays readable,
		 * and only new bytes should wake us. */
		int r = sd_event_add_io(t->ev, &p->src, c, EPOLLIN | EPOLLRDHUP | EPOLLET, on_pending, p);
		if (r < 0) {
			log_warning_errno(r, "turn %s: cannot watch a connection: %m", t->b.turn_id);
			free(p);
			continue;
		}
		p->fd = steal_fd(&c);
		p->next = t->pending;
		if (t->pending)
			t->pending->prev = p;
		t->pending = p;
		t->n_pending++;
		/* The worker writes its head right after connect: it is usually here already. */
		peek(p, 0);
	}
	return 0;
}

int brokerd_gate_start(struct brokerd_turn *t, sd_event *ev)
{
	t->ev = ev;
	return sd_event_add_io(ev, &t->listen_src, t->listen_fd, EPOLLIN, on_listen, t);
}

void brokerd_gate_stop(struct brokerd_turn *t)
{
	t->listen_src = sd_event_source_disable_unref(t->listen_src);
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	t->listen_fd = -1;
	while (t->pending)
		pending_free(t->pending);
}

void brokerd_gate_sweep(struct brokerd_turn *t, uint64_t now_ms)
{
	for (struct brokerd_pending *p = t->pending, *next; p; p = next) {
		next = p->next;
		if (now_ms >= p->accepted_ms + BROKERD_HEADER_DEADLINE_MS || now_ms >= t->b.deadline_ms)
			drop(p, "header_deadline", "header deadline");
	}
	pthread_mutex_lock(&t->lock);
	for (struct brokerd_conn **q = &t->handoff; *q;) {
		struct brokerd_conn *c = *q;
		if (now_ms - c->handed_ms >= HANDOFF_STALE_MS) {
			*q = c->next;
			free(c);
		} else {
			q = &c->next;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

struct brokerd_conn *brokerd_gate_claim_locked(struct brokerd_turn *t, int fd)
{
	for (struct brokerd_conn **q = &t->handoff; *q; q = &(*q)->next)
		if ((*q)->fd == fd) {
			struct brokerd_conn *c = *q;
			*q = c->next;
			c->next = NULL;
			return c;
		}
	return NULL;
}

void brokerd_gate_free_handoffs(struct brokerd_turn *t)
{
	pthread_mutex_lock(&t->lock);
	while (t->handoff) {
		struct brokerd_conn *c = t->handoff;
		t->handoff = c->next;
		free(c);
	}
	pthread_mutex_unlock(&t->lock);
}
