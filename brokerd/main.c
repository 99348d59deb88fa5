/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-brokerd: the per-turn HTTP broker.
 *
 * The main thread runs an sd-event loop for the runnerd link (brokerd.sock): runnerd binds
 * each turn's broker.sock, hands brokerd the listening fd with BROKER_BIND, and ends the
 * turn with BROKER_CLOSE. Each bound turn's fd is accepted on here, on the main loop,
 * and every connection whose request head passes the gate is served by libmicrohttpd
 * (see gate.c, turn.c, http.c). Tearing a turn down waits for its connection threads,
 * which may take up to the tool kill grace period, so it runs on a short-lived closer
 * thread and the main loop is told when it is done. */
#include "config.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"
#include "common/strictjson.h"
#include "brokerd/turn.h"
#include "brokerd/upstream.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/msg.h"
#include "common/proto.h"
#include "common/sandbox.h"
#include "common/sock.h"
#include "common/util.h"

#define LINKS_MAX 4u	     /* runnerd connections at once (a restarting runnerd overlaps) */
#define SWEEP_EVERY_US 250000 /* connection deadline sweep */
#define PROGRAM_NAME_MAX 64u

static const char usage[] = "Usage: roundtable-sandbox-brokerd [--config PATH] [--runtime-dir DIR]\n"
			    "\n"
			    "The per-turn HTTP broker of roundtable-sandbox. Listens on DIR/brokerd.sock for\n"
			    "roundtable-sandbox-runnerd and serves each turn's broker socket.\n";

struct brokerd_link {
	struct brokerd *d;
	int fd;
	sd_event_source *src;
	bool hello_done;
	struct brokerd_link *next;
};

struct brokerd {
	const struct rts_config *cfg;
	sd_event *ev;
	sd_event_source *sweep;
	struct brokerd_link *links;
	unsigned n_links;
	struct brokerd_turn *turns;   /* bound and serving */
	struct brokerd_turn *closing; /* being torn down by a closer thread */
	unsigned n_turns;	      /* both lists */
	bool stopping;

	/* Closer threads hand finished turns back through this list and eventfd. */
	int done_fd;
	pthread_mutex_t done_lock;
	struct brokerd_turn *done;
};

/* ---- turns ---- */

/* What a closer thread needs: the turn, and where to report it finished. */
struct closer_arg {
	struct brokerd *d;
	struct brokerd_turn *t;
};

static void turn_finished(struct brokerd *d, struct brokerd_turn *t)
{
	pthread_mutex_lock(&d->done_lock);
	t->done_next = d->done;
	d->done = t;
	pthread_mutex_unlock(&d->done_lock);
	uint64_t one = 1;
	if (write(d->done_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warning_errno(errno, "cannot signal a finished turn: %m");
}

static void *closer_thread(void *arg)
{
	struct closer_arg *ca = arg;
	brokerd_turn_stop(ca->t);
	turn_finished(ca->d, ca->t);
	free(ca);
	return NULL;
}

static void send_closed(struct brokerd_link *l, const char *turn_id, unsigned calls)
{
	struct rts_msg m;
	rts_msg_init(&m, RTS_MSG_BROKER_CLOSED);
	rts_msg_put_str(&m, turn_id);
	rts_msg_put_u32(&m, calls);
	int r = rts_msg_send(l->fd, &m);
	rts_msg_release(&m);
	if (r < 0)
		log_warning_errno(r, "cannot answer BROKER_CLOSE for turn %s: %m", turn_id);
}

/* Take t out of service and tear it down off the main thread. answer: send BROKER_CLOSED
 * to its owner when done. */
static void turn_close(struct brokerd *d, struct brokerd_turn *t, bool answer)
{
	for (struct brokerd_turn **p = &d->turns; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	t->next = d->closing;
	d->closing = t;
	t->answer_close = answer;
	brokerd_turn_begin_close(t);
	struct closer_arg *ca = rts_xmalloc(sizeof(*ca));
	*ca = (struct closer_arg){.d = d, .t = t};
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&t->closer, NULL, closer_thread, ca);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	t->has_closer = r == 0;
	if (r != 0) {
		/* No thread: do it here, blocking the loop briefly rather than leaking. */
		log_warning_errno(r, "turn %s: no closer thread, closing inline: %m", t->b.turn_id);
		free(ca);
		brokerd_turn_stop(t);
		turn_finished(d, t);
	}
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd *d = userdata;
	uint64_t v;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warning_errno(errno, "reading the closer eventfd: %m");
	pthread_mutex_lock(&d->done_lock);
	struct brokerd_turn *list = steal_pointer(&d->done);
	pthread_mutex_unlock(&d->done_lock);
	while (list) {
		struct brokerd_turn *t = list;
		list = t->done_next;
		for (struct brokerd_turn **p = &d->closing; *p; p = &(*p)->next)
			if (*p == t) {
				*p = t->next;
				break;
			}
		if (t->has_closer)
			pthread_join(t->closer, NULL);
		unsigned calls = brokerd_turn_calls(t);
		rts_log_turn(LOG_INFO, t->b.turn_id, t->b.channel_hash, "closed", rts_now_ms() - t->bound_ms,
			     "turn closed after %u calls", calls);
		if (t->answer_close && t->owner)
			send_closed(t->owner, t->b.turn_id, calls);
		brokerd_turn_free(t);
		d->n_turns--;
	}
	if (d->stopping && d->n_turns == 0)
		sd_event_exit(d->ev, 0);
	return 0;
}

static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct brokerd *d = userdata;
	uint64_t now = rts_now_ms();
	for (struct brokerd_turn *t = d->turns; t; t = t->next)
		brokerd_turn_sweep(t, now);
	if (d->turns) {
		sd_event_source_set_time_relative(s, SWEEP_EVERY_US);
		sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	}
	return 0;
}

static struct brokerd_turn *find_turn(struct brokerd *d, const char *turn_id)
{
	for (struct brokerd_turn *t = d->turns; t; t = t->next)
		if (strcmp(t->b.turn_id, turn_id) == 0)
			return t;
	return NULL;
}

/* ---- runnerd link ---- */

static int send_simple(struct brokerd_link *l, struct rts_msg *m)
{
	int r = rts_msg_send(l->fd, m);
	rts_msg_release(m);
	return r;
}

static int on_hello(void *ctx, struct rts_msg *m)
{
	struct brokerd_link *l = ctx;
	uint32_t version;
	const char *program;
	int r;
	if ((r = rts_msg_get_u32(m, &version)) < 0 || (r = rts_msg_get_str(m, &program, PROGRAM_NAME_MAX)) < 0 ||
	    (r = rts_msg_end(m)) < 0)
		return r;
	if (version != RTS_PROTO_VERSION)
		return -EPROTO;
	l->hello_done = true;
	struct rts_msg a;
	rts_msg_init(&a, RTS_MSG_HELLO_OK);
	rts_msg_put_u32(&a, RTS_PROTO_VERSION);
	return send_simple(l, &a);
}

static int answer_bound(struct brokerd_link *l, const char *turn_id, int result)
{
	struct rts_msg a;
	rts_msg_init(&a, RTS_MSG_BROKER_BOUND);
	rts_msg_put_str(&a, turn_id);
	rts_msg_put_i32(&a, result);
	return send_simple(l, &a);
}

static int on_bind(void *ctx, struct rts_msg *m)
{
	struct brokerd_link *l = ctx;
	struct brokerd *d = l->d;
	const char *turn_id, *channel, *channel_hash, *speaker_id, *speaker_name, *principal_id;
	uint64_t deadline;
	cleanup_close int fd = -1;
	int r;
	/* A field that does not parse is a protocol violation (the peer is dropped); a
	 * field that parses but is not acceptable gets BROKER_BOUND with an error. */
	if ((r = rts_msg_get_str(m, &turn_id, RTS_TURN_ID_LEN)) < 0 ||
	    (r = rts_msg_get_str(m, &channel, RTS_CHANNEL_MAX)) < 0 ||
	    (r = rts_msg_get_str(m, &channel_hash, RTS_HASH_HEX_LEN)) < 0 ||
	    (r = rts_msg_get_str(m, &speaker_id, RTS_SPEAKER_FIELD_MAX)) < 0 ||
	    (r = rts_msg_get_str(m, &speaker_name, RTS_SPEAKER_FIELD_MAX)) < 0 ||
	    (r = rts_msg_get_str(m, &principal_id, RTS_SPEAKER_FIELD_MAX)) < 0 ||
	    (r = rts_msg_get_u64(m, &deadline)) < 0 || (r = rts_msg_take_fd(m, &fd)) < 0 || (r = rts_msg_end(m)) < 0)
		return r;

	if (d->stopping)
		return answer_bound(l, turn_id, -ESHUTDOWN);
	if (d->n_turns >= BROKERD_MAX_TURNS) {
		log_warning("turn %s refused: %u turns are bound already", turn_id, BROKERD_MAX_TURNS);
		return answer_bound(l, turn_id, -EBUSY);
	}
	if (find_turn(d, turn_id))
		return answer_bound(l, turn_id, -EEXIST);

	struct brokerd_binding b = {
		.channel = (char *)channel,
		.speaker_id = (char *)speaker_id,
		.speaker_name = (char *)speaker_name,
		.principal_id = (char *)principal_id,
		.deadline_ms = deadline,
	};
	snprintf(b.turn_id, sizeof(b.turn_id), "%s", turn_id);
	snprintf(b.channel_hash, sizeof(b.channel_hash), "%s", channel_hash);
	struct brokerd_turn *t = NULL;
	r = brokerd_turn_new(d->cfg, &b, steal_fd(&fd), d->ev, &t);
	if (r < 0) {
		log_warning_errno(r, "turn %s refused: %m", rts_turn_id_valid(turn_id) ? turn_id : "(invalid id)");
		return answer_bound(l, turn_id, r);
	}
	t->owner = l;
	t->next = d->turns;
	d->turns = t;
	d->n_turns++;
	if (!d->turns->next) {
		sd_event_source_set_time_relative(d->sweep, SWEEP_EVERY_US);
		sd_event_source_set_enabled(d->sweep, SD_EVENT_ONESHOT);
	}
	rts_log_turn(LOG_INFO, t->b.turn_id, t->b.channel_hash, "bound", 0, "turn bound");
	return answer_bound(l, t->b.turn_id, 0);
}

static int on_close(void *ctx, struct rts_msg *m)
{
	struct brokerd_link *l = ctx;
	const char *turn_id;
	int r;
	if ((r = rts_msg_get_str(m, &turn_id, RTS_TURN_ID_LEN)) < 0 || (r = rts_msg_end(m)) < 0)
		return r;
	struct brokerd_turn *t = find_turn(l->d, turn_id);
	if (t && t->owner == l) {
		turn_close(l->d, t, true);
		return 0;
	}
	/* Unknown (never bound, refused, or its link is gone): nothing to close. */
	struct rts_msg a;
	rts_msg_init(&a, RTS_MSG_BROKER_CLOSED);
	rts_msg_put_str(&a, turn_id);
	rts_msg_put_u32(&a, 0);
	return send_simple(l, &a);
}

/* Before HELLO only HELLO; after it only the turn messages. Anything else drops the peer. */
static const struct rts_dispatch brokerd_dispatch_runnerd_hello[] = {
	{RTS_MSG_HELLO, on_hello},
	{0, NULL},
};
static const struct rts_dispatch brokerd_dispatch_runnerd[] = {
	{RTS_MSG_BROKER_BIND, on_bind},
	{RTS_MSG_BROKER_CLOSE, on_close},
	{0, NULL},
};

static void link_drop(struct brokerd_link *l)
{
	struct brokerd *d = l->d;
	/* HACKING.md: brokerd loses runnerd -> every turn bound through that link closes. */
	for (struct brokerd_turn *t = d->turns, *next; t; t = next) {
		next = t->next;
		if (t->owner == l) {
			t->owner = NULL;
			turn_close(d, t, false);
		}
	}
	/* Turns already being torn down must not answer on a freed link. */
	for (struct brokerd_turn *t = d->closing; t; t = t->next)
		if (t->owner == l)
			t->owner = NULL;
	for (struct brokerd_link **p = &d->links; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	d->n_links--;
	sd_event_source_disable_unref(l->src);
	close(l->fd);
	free(l);
}

static int on_link(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd_link *l = userdata;
	struct rts_msg m;
	int r = rts_msg_recv(fd, &m);
	if (r == -EAGAIN) {
		rts_msg_release(&m);
		return 0;
	}
	if (r == 0)
		r = rts_dispatch(l->hello_done ? brokerd_dispatch_runnerd : brokerd_dispatch_runnerd_hello, l, &m);
	rts_msg_release(&m);
	if (r < 0) {
		if (r == -ECONNRESET)
			log_info("runnerd link closed");
		else
			log_warning_errno(r, "dropping the runnerd link (protocol violation or send failure): %m");
		link_drop(l);
	}
	return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd *d = userdata;
	cleanup_close int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warning_errno(errno, "accept on brokerd.sock: %m");
		return 0;
	}
	int r = rts_peer_is_self(c);
	if (r < 0) {
		log_warning_errno(r, "refusing a brokerd.sock peer that is not the service account: %m");
		return 0;
	}
	if (d->stopping || d->n_links >= LINKS_MAX) {
		log_warning("refusing a runnerd connection: %s", d->stopping ? "shutting down" : "too many links");
		return 0;
	}
	struct brokerd_link *l = rts_xcalloc(1, sizeof(*l));
	l->d = d;
	l->fd = c;
	r = sd_event_add_io(d->ev, &l->src, c, EPOLLIN, on_link, l);
	if (r < 0) {
		free(l);
		return log_error_errno(r, "cannot watch a runnerd link: %m"), 0;
	}
	steal_fd(&c);
	l->next = d->links;
	d->links = l;
	d->n_links++;
	return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct brokerd *d = userdata;
	if (d->stopping)
		return 0;
	d->stopping = true;
	sd_notify(0, "STOPPING=1");
	log_info("stopping: closing %u turns", d->n_turns);
	while (d->links)
		link_drop(d->links);
	if (d->n_turns == 0)
		sd_event_exit(d->ev, 0);
	return 0;
}

int main(int argc, char **argv)
{
	struct rts_opts o;
	int idx = rts_parse_options(argc, argv, usage, &o);
	rts_log_init("roundtable-sandbox-brokerd");
	if (idx != argc) {
		fputs(usage, stderr);
		return 2;
	}
	struct rts_config *cfg = rts_daemon_load_config(&o);
	int r = rts_sandbox_init();
	if (r < 0)
		fatal_f("cannot drop privileges: %s", strerror(-r));
	if (cfg->ca_file && access(cfg->ca_file, R_OK) < 0)
		fatal_f("%s: caFile: cannot read %s: %s", cfg->path, cfg->ca_file, strerror(errno));
	/* libcurl would write TLS session secrets to this file; brokerd writes no files and
	 * its upstream traffic carries the real credentials. Done before any thread exists. */
	unsetenv("SSLKEYLOGFILE");
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		fatal_f("cannot initialise libcurl");
	rts_json_strict_init();
	/* Writes to a worker that hung up must fail with EPIPE, not kill us. */
	signal(SIGPIPE, SIG_IGN);
	/* Blocked before any thread exists, so every thread inherits it and sd-event's
	 * signalfd is the only receiver. */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);

	struct brokerd d = {.cfg = cfg, .done_fd = -1};
	pthread_mutex_init(&d.done_lock, NULL);
	r = sd_event_default(&d.ev);
	if (r < 0)
		fatal_f("sd_event_default: %s", strerror(-r));

	cleanup_free char *path = rts_runtime_path(o.runtime_dir, RTS_SOCK_BROKERD);
	bool activated = false;
	int lfd = rts_listen_activated_or_bind(path, SOCK_SEQPACKET, 0600, &activated);
	if (lfd < 0)
		fatal_f("cannot listen on %s: %s", path, strerror(-lfd));
	d.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d.done_fd < 0)
		fatal_f("eventfd: %s", strerror(errno));

	sd_event_source *listen_src = NULL, *done_src = NULL;
	if ((r = sd_event_add_io(d.ev, &listen_src, lfd, EPOLLIN, on_accept, &d)) < 0 ||
	    (r = sd_event_add_io(d.ev, &done_src, d.done_fd, EPOLLIN, on_done, &d)) < 0 ||
	    (r = sd_event_add_signal(d.ev, NULL, SIGTERM, on_signal, &d)) < 0 ||
	    (r = sd_event_add_signal(d.ev, NULL, SIGINT, on_signal, &d)) < 0 ||
	    (r = sd_event_add_time_relative(d.ev, &d.sweep, CLOCK_MONOTONIC, SWEEP_EVERY_US, 50000, on_sweep, &d)) <
		    0)
		fatal_f("cannot set up the event loop: %s", strerror(-r));
	sd_event_source_set_enabled(d.sweep, SD_EVENT_OFF);

	/* Start-up is over and no thread exists yet. Host tools and key commands inherit the
	 * filter: like brokerd, they cannot open a file for writing (common/sandbox.c). */
	r = rts_sandbox_apply(RTS_SANDBOX_BROKERD);
	if (r < 0)
		fatal_f("cannot install the seccomp filter: %s", strerror(-r));
#ifdef BROKERD_TEST_UPSTREAM_TIMEOUT_MS
	/* Only the integration tests' build (tests/testbuild): never mistaken for the real one. */
	log_warning("test build: upstream deadline %u ms instead of 60000 ms; never install this binary",
		    (unsigned)BROKERD_UPSTREAM_TIMEOUT_MS);
#endif
	log_info("listening on %s%s", path, activated ? " (socket activation)" : "");
	sd_notify(0, "READY=1\nSTATUS=Serving turns");
	r = sd_event_loop(d.ev);

	sd_event_source_disable_unref(listen_src);
	sd_event_source_disable_unref(done_src);
	sd_event_source_disable_unref(d.sweep);
	close(lfd);
	if (!activated)
		unlink(path);
	close(d.done_fd);
	sd_event_unref(d.ev);
	pthread_mutex_destroy(&d.done_lock);
	brokerd_upstream_cleanup();
	curl_global_cleanup();
	rts_config_free(cfg);
	return r < 0 ? 1 : 0;
}
