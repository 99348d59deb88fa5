/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "brokerd/audit.h"
#include "brokerd/gate.h"
#include "brokerd/head.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

#define ACCEPT_BATCH 16u      /* accepts per listener wake-up (the listener is level-triggered) */
#define PEEKS_MAX 64u	      /* a head arriving in more pieces is refused (each peek re-reads it) */
#define DRAIN_MAX (64u * 1024u) /* unread bytes discarded before a refused connection is closed */

/* ---- the answers ---- */

static const char *reason_phrase(unsigned status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 429: return "Too Many Requests";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

static char answers[BROKERD_RESULT_MAX_][192];
static pthread_once_t answers_once = PTHREAD_ONCE_INIT;

static void answers_fill(void)
{
	for (int r = 0; r < BROKERD_RESULT_MAX_; r++) {
		char body[64];
		int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", brokerd_result_code((enum brokerd_result)r));
		unsigned status = brokerd_result_status((enum brokerd_result)r);
		snprintf(answers[r], sizeof(answers[r]),
			 "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
			 "Content-Length: %d\r\n\r\n%s",
			 status, reason_phrase(status), n, body);
	}
}

const char *brokerd_gate_answer(enum brokerd_result r)
{
	pthread_once(&answers_once, answers_fill);
	if ((unsigned)r >= BROKERD_RESULT_MAX_ || r == BROKERD_OK)
		r = BROKERD_BAD_REQUEST;
	return answers[r];
}

/* ---- connections waiting for their head ---- */

/* A connection whose head has not been checked yet. Main thread only. */
struct brokerd_pending {
	struct brokerd_gate *g;
	int fd;
	sd_event_source *src;
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t accepted_ms;
	unsigned peeks;
	bool got_bytes;
	struct brokerd_pending *prev, *next;
};

static void pending_free(struct brokerd_pending *p)
{
	struct brokerd_gate *g = p->g;
	if (p->prev)
		p->prev->next = p->next;
	else
		g->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	g->n_pending--;
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
	struct brokerd_gate *g = p->g;
	uint64_t ms = rts_now_ms() - p->accepted_ms;
	if (g->ops->audit) {
		log_debug("turn %s: call %u: %s", g->log_turn ? g->log_turn : "-", call_no, what);
		g->ops->audit(g, call_no, rule, r, ms);
	} else if (r == BROKERD_RESULT_MAX_)
		rts_log_turn(LOG_DEBUG, g->log_turn, g->log_hash, "closed", ms, "call %u route none closed unanswered (%s)",
			     call_no, what);
	else
		rts_log_turn(LOG_DEBUG, g->log_turn, g->log_hash, brokerd_result_code(r), ms,
			     "call %u route none status %u (%s)", call_no, brokerd_result_status(r), what);
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
		audit(p, p->g->ops->count(p->g), BROKERD_RESULT_MAX_, rule, what);
	close_drained(p);
}

/* Answer r and close. */
static void refuse(struct brokerd_pending *p, enum brokerd_result r, const char *rule, const char *why)
{
	audit(p, p->g->ops->count(p->g), r, rule, why);
	const char *answer = brokerd_gate_answer(r);
	/* A fresh connection's send buffer is empty: this short write does not block. */
	if (send(p->fd, answer, strlen(answer), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("cannot answer a refused request head: %m");
	close_drained(p);
}

static void handoff(struct brokerd_pending *p)
{
	struct brokerd_gate *g = p->g;
	unsigned call_no = g->ops->count(g);
	int fd = steal_fd(&p->fd);
	struct sockaddr_un addr = p->addr;
	socklen_t addr_len = p->addr_len;
	uint64_t accepted_ms = p->accepted_ms;
	/* The event source must be gone before the owner's server owns (and may close) the fd. */
	pending_free(p);
	g->ops->handoff(g, fd, &addr, addr_len, accepted_ms, call_no);
}

/* Look at what the connection has sent so far. */
static void peek(struct brokerd_pending *p, uint32_t revents)
{
	/* Main thread only, so one buffer serves every listener. */
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
	case BROKERD_HEAD_COMPLETE: {
		const char *rule = "listener", *why = "refused by the listener";
		enum brokerd_result r = p->g->ops->admit_head(p->g, &h, &rule, &why);
		if (r == BROKERD_OK)
			handoff(p);
		else
			refuse(p, r, rule, why);
		return;
	}
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
	struct brokerd_gate *g = userdata;
	for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_un addr;
		socklen_t addr_len = sizeof(addr);
		cleanup_close int c = accept4(fd, (struct sockaddr *)&addr, &addr_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warning_errno(errno, "accept on a broker socket: %m");
			return 0;
		}
		/* Seed: at most 16 connections per listener. Beyond that a connection is closed
		 * at once, unanswered and uncounted. */
		if (g->n_pending + g->ops->open_beyond(g) >= g->max_connections) {
			log_debug("broker socket of channel %.12s: connection refused: %u connections open", g->log_hash,
				  g->max_connections);
			brokerd_metrics_connection_refused();
			continue;
		}
		struct brokerd_pending *p = rts_xcalloc(1, sizeof(*p));
		p->g = g;
		p->addr = addr;
		p->addr_len = addr_len;
		p->accepted_ms = rts_now_ms();
		/* Edge-triggered: a head that is still incomplete after a peek stays readable,
		 * and only new bytes should wake us. */
		int r = sd_event_add_io(g->ev, &p->src, c, EPOLLIN | EPOLLRDHUP | EPOLLET, on_pending, p);
		if (r < 0) {
			log_warning_errno(r, "cannot watch a connection: %m");
			free(p);
			continue;
		}
		p->fd = steal_fd(&c);
		p->next = g->pending;
		if (g->pending)
			g->pending->prev = p;
		g->pending = p;
		g->n_pending++;
		/* The worker writes its head right after connect: it is usually here already. */
		peek(p, 0);
	}
	return 0;
}

int brokerd_gate_start(struct brokerd_gate *g, sd_event *ev, int listen_fd)
{
	g->ev = ev;
	g->listen_fd = listen_fd;
	int r = rts_fd_set_nonblock(listen_fd, true);
	if (r >= 0)
		r = sd_event_add_io(ev, &g->listen_src, listen_fd, EPOLLIN, on_listen, g);
	if (r < 0) {
		close(listen_fd);
		g->listen_fd = -1;
		return r;
	}
	return 0;
}

void brokerd_gate_stop(struct brokerd_gate *g)
{
	g->listen_src = sd_event_source_disable_unref(g->listen_src);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	g->listen_fd = -1;
	while (g->pending)
		pending_free(g->pending);
}

/* The handed fd must be what runnerd promised: a listening AF_UNIX stream socket. */
int brokerd_gate_check_listener(int fd)
{
	int v;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
		return -ENOTSOCK;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_STREAM)
		return -ENOTSOCK;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v != 1)
		return -ENOTSOCK;
	return 0;
}

void brokerd_gate_sweep(struct brokerd_gate *g, uint64_t now_ms)
{
	for (struct brokerd_pending *p = g->pending, *next; p; p = next) {
		next = p->next;
		if (now_ms >= p->accepted_ms + BROKERD_HEADER_DEADLINE_MS || now_ms >= g->deadline_ms)
			drop(p, "header_deadline", "header deadline");
	}
}

/* ---- the hand-off list ---- */

static struct brokerd_handoff *take(struct brokerd_handoff **q)
{
	struct brokerd_handoff *h = *q;
	*q = h->next;
	h->next = NULL;
	return h;
}

struct brokerd_handoff *brokerd_handoff_put(struct brokerd_handoff **list, struct brokerd_handoff *h, int fd,
					    uint64_t now_ms)
{
	struct brokerd_handoff *old = brokerd_handoff_claim(list, fd);
	h->fd = fd;
	h->handed_ms = now_ms;
	h->next = *list;
	*list = h;
	return old;
}

struct brokerd_handoff *brokerd_handoff_claim(struct brokerd_handoff **list, int fd)
{
	for (struct brokerd_handoff **q = list; *q; q = &(*q)->next)
		if ((*q)->fd == fd)
			return take(q);
	return NULL;
}

struct brokerd_handoff *brokerd_handoff_stale(struct brokerd_handoff **list, uint64_t now_ms)
{
	/* An entry handed after now_ms (a clock read before the hand-off) is young, not a
	 * wrapped-around age. */
	for (struct brokerd_handoff **q = list; *q; q = &(*q)->next)
		if (now_ms >= (*q)->handed_ms && now_ms - (*q)->handed_ms >= BROKERD_HANDOFF_STALE_MS)
			return take(q);
	return NULL;
}

struct brokerd_handoff *brokerd_handoff_pop(struct brokerd_handoff **list)
{
	return *list ? take(list) : NULL;
}

unsigned brokerd_handoff_count(const struct brokerd_handoff *list)
{
	unsigned n = 0;
	for (; list; list = list->next)
		n++;
	return n;
}
