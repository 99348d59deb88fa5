/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "brokerd/audit.h"
#include "brokerd/gate.h"
#include "brokerd/head.h"
#include "brokerd/http.h"
#include "brokerd/keys.h"
#include "brokerd/precheck.h"
#include "brokerd/turn.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

/* Header block plus the read buffer of one connection: four times the longest head the
 * gate lets through, so libmicrohttpd never answers 431 itself. */
#define CONNECTION_MEMORY (4u * BROKERD_HEAD_MAX)
/* libmicrohttpd's own connection limit is only a backstop above the gate's (which counts
 * a connection until libmicrohttpd reports it closed, slightly before it forgets it). */
#define MHD_CONNECTION_LIMIT (2u * BROKERD_CONNECTIONS_PER_TURN)

static bool field_ok(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	return n >= min && n <= max && rts_utf8_valid(s, n);
}

static int check_binding(const struct rts_config *cfg, const struct brokerd_binding *b, bool precheck)
{
	if (!rts_turn_id_valid(b->turn_id))
		return -EINVAL;
	if (!field_ok(b->channel, 1, RTS_CHANNEL_MAX))
		return -EINVAL;
	/* runnerd forwards statd's hash; a mismatch means one of them is confused. */
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(b->channel, hash);
	if (strcmp(hash, b->channel_hash) != 0)
		return -EINVAL;
	/* A precheck has no speaker: nothing a key command or tool is told may pose as one. */
	if (precheck ? b->speaker_id[0] || b->speaker_name[0] || b->principal_id[0]
		     : !field_ok(b->speaker_id, 1, RTS_SPEAKER_FIELD_MAX) ||
			       !field_ok(b->speaker_name, 0, RTS_SPEAKER_FIELD_MAX) ||
			       !field_ok(b->principal_id, 0, RTS_SPEAKER_FIELD_MAX))
		return -EINVAL;
	uint64_t now = rts_now_ms();
	if (b->deadline_ms <= now)
		return -ETIME;
	if (b->deadline_ms - now > (precheck ? cfg->precheck.timeout_ms : cfg->turn_timeout_ms))
		return -EINVAL;
	return 0;
}

static void binding_release(struct brokerd_binding *b)
{
	free(b->channel);
	free(b->speaker_id);
	free(b->speaker_name);
	free(b->principal_id);
}

/* ---- what the gate needs from a turn (gate.h) ---- */

static struct brokerd_turn *gate_turn(struct brokerd_gate *g)
{
	return g->owner;
}

/* Every request that sent bytes counts against the call budget (refused ones included). */
static unsigned gate_count(struct brokerd_gate *g)
{
	struct brokerd_turn *t = gate_turn(g);
	pthread_mutex_lock(&t->lock);
	if (t->calls < UINT_MAX)
		t->calls++;
	unsigned n = t->calls;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static unsigned gate_open_beyond(struct brokerd_gate *g)
{
	struct brokerd_turn *t = gate_turn(g);
	unsigned n = 0;
	pthread_mutex_lock(&t->lock);
	n += brokerd_handoff_count(t->handoffs);
	for (struct brokerd_conn *c = t->conns; c; c = c->next)
		n++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* libmicrohttpd never meets a length it would refuse itself. */
static enum brokerd_result gate_admit_head(struct brokerd_gate *g, const struct brokerd_head *h, const char **rule,
					   const char **why)
{
	if (h->content_length > RTS_BROKER_BODY_MAX) {
		*rule = "body_too_large";
		*why = "body larger than the limit";
		return BROKERD_TOO_LARGE;
	}
	return BROKERD_OK;
}

/* A hand-off libmicrohttpd never took up: its call gets the one audit entry every accepted
 * call gets (no answer, rule as the rich listener names it), then it is freed. */
static void drop_handoff(struct brokerd_turn *t, struct brokerd_handoff *h, const char *rule)
{
	struct brokerd_conn *c = brokerd_entry(h, struct brokerd_conn, handoff);
	brokerd_audit_call(&t->b, c->call_no, "none", rule, BROKERD_RESULT_MAX_, false, rts_now_ms() - c->accepted_ms);
	free(c);
}

static void gate_handoff(struct brokerd_gate *g, int fd, const struct sockaddr_un *addr, socklen_t addr_len,
			 uint64_t accepted_ms, unsigned call_no)
{
	struct brokerd_turn *t = gate_turn(g);
	struct brokerd_conn *c = rts_xcalloc(1, sizeof(*c));
	c->turn = t;
	c->fd = fd;
	c->accepted_ms = accepted_ms;
	c->deadline_ms = accepted_ms + RTS_BROKER_REQUEST_DEADLINE_MS;
	c->state = BROKERD_CONN_NEW;
	c->call_no = call_no;

	pthread_mutex_lock(&t->lock);
	struct brokerd_handoff *stale = brokerd_handoff_put(&t->handoffs, &c->handoff, fd, rts_now_ms());
	pthread_mutex_unlock(&t->lock);
	if (stale)
		drop_handoff(t, stale, "server_error");

	/* libmicrohttpd closes the socket when this fails. */
	if (MHD_add_connection(t->mhd, fd, (const struct sockaddr *)addr, addr_len) != MHD_YES) {
		log_warning_errno(errno, "turn %s: cannot hand a connection to the HTTP server: %m", t->b.turn_id);
		pthread_mutex_lock(&t->lock);
		struct brokerd_conn *mine = brokerd_turn_claim_locked(t, fd);
		pthread_mutex_unlock(&t->lock);
		if (mine)
			brokerd_audit_call(&t->b, mine->call_no, "none", "server_error", BROKERD_RESULT_MAX_, false,
					   rts_now_ms() - mine->accepted_ms);
		free(mine);
	}
}

static void gate_audit(struct brokerd_gate *g, unsigned call_no, const char *rule, enum brokerd_result r, uint64_t ms)
{
	brokerd_audit_call(&gate_turn(g)->b, call_no, "none", rule, r, false, ms);
}

static const struct brokerd_gate_ops turn_gate_ops = {
	.open_beyond = gate_open_beyond,
	.count = gate_count,
	.admit_head = gate_admit_head,
	.audit = gate_audit,
	.handoff = gate_handoff,
};

struct brokerd_conn *brokerd_turn_claim_locked(struct brokerd_turn *t, int fd)
{
	struct brokerd_handoff *h = brokerd_handoff_claim(&t->handoffs, fd);
	return h ? brokerd_entry(h, struct brokerd_conn, handoff) : NULL;
}

/* Free hand-offs that were never claimed (after the server stopped). */
static void free_handoffs(struct brokerd_turn *t)
{
	pthread_mutex_lock(&t->lock);
	for (struct brokerd_handoff *h; (h = brokerd_handoff_pop(&t->handoffs));)
		drop_handoff(t, h, "listener_closing");
	pthread_mutex_unlock(&t->lock);
}

void brokerd_turn_free(struct brokerd_turn *t)
{
	if (!t)
		return;
	brokerd_gate_stop(&t->gate);
	free_handoffs(t);
	binding_release(&t->b);
	brokerd_precheck_free(t->precheck);
	brokerd_keyring_free(t->keys);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int turn_new(const struct rts_config *cfg, const struct brokerd_binding *b, struct brokerd_precheck *precheck,
		    int listen_fd, sd_event *ev, struct brokerd_turn **out)
{
	cleanup_close int fd = listen_fd;
	*out = NULL;
	int r = check_binding(cfg, b, precheck != NULL);
	if (r < 0) {
		brokerd_precheck_free(precheck);
		return r;
	}
	r = brokerd_gate_check_listener(fd);
	if (r < 0) {
		brokerd_precheck_free(precheck);
		return r;
	}

	struct brokerd_turn *t = rts_xcalloc(1, sizeof(*t));
	t->bound_ms = rts_now_ms();
	t->b = *b;
	t->b.channel = rts_xstrdup(b->channel);
	t->b.speaker_id = rts_xstrdup(b->speaker_id);
	t->b.speaker_name = rts_xstrdup(b->speaker_name);
	t->b.principal_id = rts_xstrdup(b->principal_id);
	t->cfg = cfg;
	t->precheck = precheck;
	t->keys = brokerd_keyring_new();
	t->gate = (struct brokerd_gate){.ops = &turn_gate_ops,
					.owner = t,
					.log_turn = t->b.turn_id,
					.log_hash = t->b.channel_hash,
					.deadline_ms = t->b.deadline_ms,
					.max_connections = BROKERD_CONNECTIONS_PER_TURN,
					.listen_fd = -1};
	atomic_init(&t->closing, false);
	pthread_mutex_init(&t->lock, NULL);
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0) {
		r = -errno;
		brokerd_turn_free(t);
		return r;
	}

	/* One thread per connection: a connection's handler may block in libcurl or on a
	 * tool process without holding up the others. Poll, not select, so descriptor
	 * numbers above FD_SETSIZE work. No listen socket: the gate accepts and hands over
	 * connections whose request head it has checked (gate.h). The turn is complete
	 * before the server starts, since callbacks may run at once. */
	t->mhd = MHD_start_daemon(
		MHD_USE_NO_LISTEN_SOCKET | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
		0, NULL, NULL, brokerd_http_on_request, t,
		/* First, so that nothing is printed by libmicrohttpd's own logger. */
		MHD_OPTION_EXTERNAL_LOGGER, brokerd_http_on_mhd_log, t,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)MHD_CONNECTION_LIMIT,
		/* An idle limit only; the request deadline is brokerd_turn_sweep(). */
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(RTS_BROKER_REQUEST_DEADLINE_MS / 1000),
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
		MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
		MHD_OPTION_NOTIFY_CONNECTION, brokerd_http_on_connection, t,
		MHD_OPTION_URI_LOG_CALLBACK, brokerd_http_on_uri, t,
		MHD_OPTION_END);
	if (!t->mhd) {
		brokerd_turn_free(t);
		return -EIO;
	}
	r = brokerd_gate_start(&t->gate, ev, steal_fd(&fd));
	if (r < 0) {
		MHD_stop_daemon(t->mhd);
		t->mhd = NULL;
		brokerd_turn_free(t);
		return r;
	}
	*out = t;
	return 0;
}

int brokerd_turn_new(const struct rts_config *cfg, const struct brokerd_binding *b, int listen_fd, sd_event *ev,
		     struct brokerd_turn **out)
{
	return turn_new(cfg, b, NULL, listen_fd, ev, out);
}

int brokerd_turn_new_precheck(const struct rts_config *cfg, const struct brokerd_binding *b,
			      struct brokerd_precheck *precheck, int listen_fd, sd_event *ev, struct brokerd_turn **out)
{
	return turn_new(cfg, b, precheck, listen_fd, ev, out);
}

void brokerd_turn_begin_close(struct brokerd_turn *t)
{
	brokerd_gate_stop(&t->gate);
	if (atomic_exchange(&t->closing, true))
		return;
	uint64_t one = 1;
	/* The counter cannot overflow after one write; EAGAIN is impossible too. */
	if (write(t->wake_fd, &one, sizeof(one)) < 0)
		log_warning_errno(errno, "turn %s: cannot wake its calls: %m", t->b.turn_id);
}

void brokerd_turn_stop(struct brokerd_turn *t)
{
	if (t->mhd)
		MHD_stop_daemon(t->mhd);
	t->mhd = NULL;
	/* Connections added but never started were closed by MHD_stop_daemon(). */
	free_handoffs(t);
}

void brokerd_turn_sweep(struct brokerd_turn *t, uint64_t now_ms)
{
	brokerd_gate_sweep(&t->gate, now_ms);
	pthread_mutex_lock(&t->lock);
	for (struct brokerd_handoff *h; (h = brokerd_handoff_stale(&t->handoffs, now_ms));)
		drop_handoff(t, h, "server_error");
	for (struct brokerd_conn *c = t->conns; c; c = c->next) {
		uint64_t limit = c->deadline_ms < t->b.deadline_ms ? c->deadline_ms : t->b.deadline_ms;
		if (c->shut || c->fd < 0 || now_ms < limit)
			continue;
		/* Wakes the connection thread, which then closes the connection itself; the
		 * fd stays valid until the CLOSED notification, which needs this lock. */
		shutdown(c->fd, SHUT_RDWR);
		c->shut = true;
	}
	pthread_mutex_unlock(&t->lock);
}

unsigned brokerd_turn_calls(struct brokerd_turn *t)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = t->calls;
	pthread_mutex_unlock(&t->lock);
	return n;
}
