/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

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

/* The handed fd must be what runnerd promised: a listening AF_UNIX stream socket. */
static int check_listener(int fd)
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

static void binding_release(struct brokerd_binding *b)
{
	free(b->channel);
	free(b->speaker_id);
	free(b->speaker_name);
	free(b->principal_id);
}

void brokerd_turn_free(struct brokerd_turn *t)
{
	if (!t)
		return;
	brokerd_gate_stop(t);
	brokerd_gate_free_handoffs(t);
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
	r = check_listener(fd);
	if (r < 0) {
		brokerd_precheck_free(precheck);
		return r;
	}
	r = rts_fd_set_nonblock(fd, true);
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
	t->listen_fd = steal_fd(&fd);
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
	r = brokerd_gate_start(t, ev);
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
	brokerd_gate_stop(t);
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
	brokerd_gate_free_handoffs(t);
}

void brokerd_turn_sweep(struct brokerd_turn *t, uint64_t now_ms)
{
	brokerd_gate_sweep(t, now_ms);
	pthread_mutex_lock(&t->lock);
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
