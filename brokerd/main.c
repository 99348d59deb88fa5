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
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"
#include "brokerd/closer.h"
#include "brokerd/rich.h"
#include "brokerd/exec.h"
#include "brokerd/keys.h"
#include "brokerd/launcher.h"
#include "brokerd/toolbox.h"
#include "brokerd/precheck.h"
#include "brokerd/turn.h"
#include "brokerd/audit.h"
#include "brokerd/upstream.h"
#include "common/daemon.h"
#include "common/link.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/sock.h"
#include "common/util.h"
#ifdef RTS_FETCH_TEST_SEAMS
#include "tests/testbuild/fetch_seams.h"
#endif

#define LINKS_MAX 4u	     /* runnerd connections at once (a restarting runnerd overlaps) */
#define SWEEP_EVERY_US 250000 /* connection deadline sweep */

static const char usage[] = "Usage: roundtable-sandbox-brokerd [--config PATH] [--runtime-dir DIR]\n"
			    "                                  [--launcher-socket PATH]\n"
			    "\n"
			    "The per-turn HTTP broker of roundtable-sandbox. Listens on DIR/brokerd.sock for\n"
			    "roundtable-sandbox-runnerd and serves each turn's broker socket. Host tools run\n"
			    "through a launcher it forks, or through the launcher unit's socket at PATH.\n";

/* One runnerd connection on brokerd.sock (common/link.c runs it). */
struct brokerd_link {
	struct brokerd *d;
	struct rts_link *link;
	struct brokerd_link *next;
};

struct brokerd {
	const struct rts_config *cfg;
	struct rts_daemon *daemon;
	int exit_status; /* 1 once the launcher is gone */
	sd_event *ev;
	sd_event_source *sweep;
	struct rts_link_server *server;
	struct brokerd_link *links;
	struct brokerd_turn *turns;   /* bound and serving */
	unsigned n_turns;	      /* these and those being torn down */
	bool stopping;
	struct brokerd_rich *rich;    /* rich channels (rich.c) */

	/* Turns being torn down; closer threads hand finished ones back through done_fd. */
	struct brokerd_closers closers;
	int done_fd;
};

/* ---- turns ---- */

/* What a closer thread needs: the turn, and where to report it finished. */
struct closer_arg {
	struct brokerd *d;
	struct brokerd_turn *t;
};

static void turn_finished(struct brokerd *d, struct brokerd_turn *t)
{
	brokerd_closers_done(&d->closers, &t->closer);
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
	int r = rts_link_send_broker_closed(l->link, &(struct rts_msg_broker_closed){.turn_id = turn_id, .calls = calls});
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
	t->answer_close = answer;
	brokerd_turn_begin_close(t);
	struct closer_arg *ca = rts_xmalloc(sizeof(*ca));
	*ca = (struct closer_arg){.d = d, .t = t};
	int r = brokerd_closers_start(&d->closers, &t->closer, closer_thread, ca);
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
	for (struct brokerd_closer *c; (c = brokerd_closers_reap(&d->closers));) {
		struct brokerd_turn *t = brokerd_entry(c, struct brokerd_turn, closer);
		unsigned calls = brokerd_turn_calls(t);
		rts_log_turn(LOG_INFO, t->b.turn_id, t->b.channel_hash, "closed", rts_now_ms() - t->bound_ms,
			     "%s closed after %u calls", t->precheck ? "precheck" : "turn", calls);
		brokerd_audit_summary(&t->b, calls);
		if (t->answer_close && t->owner)
			send_closed(t->owner, t->b.turn_id, calls);
		brokerd_turn_free(t);
		d->n_turns--;
	}
	if (d->stopping && d->n_turns == 0 && brokerd_rich_idle(d->rich))
		sd_event_exit(d->ev, d->exit_status);
	return 0;
}

/* The rich side finished stopping. */
static void on_rich_idle(void *arg)
{
	struct brokerd *d = arg;
	if (d->stopping && d->n_turns == 0)
		sd_event_exit(d->ev, d->exit_status);
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

static int answer_bound(struct brokerd_link *l, const char *turn_id, int result)
{
	return rts_link_send_broker_bound(l->link, &(struct rts_msg_broker_bound){.turn_id = turn_id, .result = result});
}

/* Put a new turn in service: listed, swept, logged, answered. */
static int turn_serve(struct brokerd_link *l, struct brokerd_turn *t, const char *what)
{
	struct brokerd *d = l->d;
	t->owner = l;
	t->next = d->turns;
	d->turns = t;
	d->n_turns++;
	if (!d->turns->next) {
		sd_event_source_set_time_relative(d->sweep, SWEEP_EVERY_US);
		sd_event_source_set_enabled(d->sweep, SD_EVENT_ONESHOT);
	}
	rts_log_turn(LOG_INFO, t->b.turn_id, t->b.channel_hash, "bound", 0, "%s", what);
	return answer_bound(l, t->b.turn_id, 0);
}

static int brokerd_on_bind(struct rts_link *link, void *owner, struct rts_msg_broker_bind *m)
{
	struct brokerd_link *l = owner;
	struct brokerd *d = l->d;
	/* Every field parsed within its bounds (else the link dropped the peer); a binding
	 * that is not acceptable gets BROKER_BOUND with an error. */
	if (d->stopping)
		return answer_bound(l, m->turn_id, -ESHUTDOWN);
	if (d->n_turns >= BROKERD_MAX_TURNS) {
		log_warning("turn %s refused: %u turns are bound already", m->turn_id, BROKERD_MAX_TURNS);
		return answer_bound(l, m->turn_id, -EBUSY);
	}
	if (find_turn(d, m->turn_id))
		return answer_bound(l, m->turn_id, -EEXIST);

	struct brokerd_binding b = {
		.channel = (char *)m->channel,
		.speaker_id = (char *)m->speaker_id,
		.speaker_name = (char *)m->speaker_name,
		.principal_id = (char *)m->principal_id,
		.deadline_ms = m->deadline_ms,
	};
	snprintf(b.turn_id, sizeof(b.turn_id), "%s", m->turn_id);
	snprintf(b.channel_hash, sizeof(b.channel_hash), "%s", m->channel_hash);
	struct brokerd_turn *t = NULL;
	int r = brokerd_turn_new(d->cfg, &b, steal_fd(&m->fd), d->ev, &t);
	if (r < 0) {
		log_warning_errno(r, "turn %s refused: %m", rts_turn_id_valid(m->turn_id) ? m->turn_id : "(invalid id)");
		return answer_bound(l, m->turn_id, r);
	}
	return turn_serve(l, t, "turn bound");
}

/* A precheck run (DESIGN.md 8.3): answered with BROKER_BOUND and closed with BROKER_CLOSE
 * like a turn. The grant is resolved here, from brokerd's own config: the message carries
 * only who the run is for and its approvals. */
static int brokerd_on_precheck_bind(struct rts_link *link, void *owner, struct rts_msg_precheck_bind *m)
{
	struct brokerd_link *l = owner;
	struct brokerd *d = l->d;
	if (d->stopping)
		return answer_bound(l, m->precheck_id, -ESHUTDOWN);
	if (d->n_turns >= BROKERD_MAX_TURNS) {
		log_warning("precheck %s refused: %u turns are bound already", m->precheck_id, BROKERD_MAX_TURNS);
		return answer_bound(l, m->precheck_id, -EBUSY);
	}
	if (find_turn(d, m->precheck_id))
		return answer_bound(l, m->precheck_id, -EEXIST);
	const char *id = rts_turn_id_valid(m->precheck_id) ? m->precheck_id : "(invalid id)";
	struct brokerd_precheck *pc = NULL;
	int r = brokerd_precheck_new(d->cfg, m->channel, m->target, m->tier, m->approved, &pc);
	if (r < 0) {
		log_warning_errno(r, "precheck %s refused: %m", id);
		return answer_bound(l, m->precheck_id, r == -ENOENT ? -EINVAL : r);
	}
	unsigned tools = brokerd_precheck_tools(pc);
	struct brokerd_binding b = {
		.channel = (char *)m->channel,
		.speaker_id = (char *)"",
		.speaker_name = (char *)"",
		.principal_id = (char *)"",
		.deadline_ms = m->deadline_ms,
	};
	snprintf(b.turn_id, sizeof(b.turn_id), "%s", m->precheck_id);
	snprintf(b.channel_hash, sizeof(b.channel_hash), "%s", m->channel_hash);
	struct brokerd_turn *t = NULL;
	r = brokerd_turn_new_precheck(d->cfg, &b, pc, steal_fd(&m->fd), d->ev, &t);
	if (r < 0) {
		log_warning_errno(r, "precheck %s refused: %m", id);
		return answer_bound(l, m->precheck_id, r);
	}
	char what[96];
	snprintf(what, sizeof(what), "precheck bound: %u tools granted and approved, %u calls", tools,
		 brokerd_precheck_max_calls(t->precheck));
	return turn_serve(l, t, what);
}

static int brokerd_on_close(struct rts_link *link, void *owner, struct rts_msg_broker_close *m)
{
	struct brokerd_link *l = owner;
	struct brokerd_turn *t = find_turn(l->d, m->turn_id);
	if (t && t->owner == l) {
		turn_close(l->d, t, true);
		return 0;
	}
	/* Unknown (never bound, refused, or its link is gone): nothing to close. */
	return rts_link_send_broker_closed(l->link, &(struct rts_msg_broker_closed){.turn_id = m->turn_id, .calls = 0});
}

/* Rich channels: rich.c decides (rich.h). */
#define RICH_HANDLER(name, msg)                                                                                        \
	static int brokerd_on_rich_##name(struct rts_link *link, void *owner, struct rts_msg_##msg *m)                \
	{                                                                                                              \
		return brokerd_rich_on_##name(((struct brokerd_link *)owner)->d->rich, link, m);                      \
	}
RICH_HANDLER(bind, rich_bind)
RICH_HANDLER(wait_ready, rich_wait_ready)
RICH_HANDLER(unbind, rich_unbind)
RICH_HANDLER(turn, broker_rich_turn)
RICH_HANDLER(cancel, broker_rich_cancel)
RICH_HANDLER(attach_fetch, broker_attach_fetch)
/* brokerd's metrics text (brokerd/audit.h), for `roundtable-sandbox metrics`. */
static int brokerd_on_metrics(struct rts_link *link, void *owner, struct rts_msg_broker_metrics *m)
{
	struct brokerd_link *l = owner;
	cleanup_free char *text = brokerd_metrics_render(l->d->n_turns);
	if (strlen(text) > RTS_METRICS_TEXT_MAX) {
		/* Fixed families and label lists keep it far below; never cut a text short. */
		log_error("metrics text of %zu bytes is over %u (bug); sending none", strlen(text), RTS_METRICS_TEXT_MAX);
		text[0] = '\0';
	}
	return rts_link_send_broker_metrics_text(l->link,
						 &(struct rts_msg_broker_metrics_text){.seq = m->seq, .text = text});
}

/* What runnerd may send once HELLO is done; anything else drops the peer. */
static const struct rts_link_dispatch brokerd_dispatch_runnerd[] = {
	RTS_LINK_ON(BROKER_BIND, brokerd_on_bind),
	RTS_LINK_ON(BROKER_CLOSE, brokerd_on_close),
	RTS_LINK_ON(RICH_BIND, brokerd_on_rich_bind),
	RTS_LINK_ON(RICH_WAIT_READY, brokerd_on_rich_wait_ready),
	RTS_LINK_ON(RICH_UNBIND, brokerd_on_rich_unbind),
	RTS_LINK_ON(BROKER_RICH_TURN, brokerd_on_rich_turn),
	RTS_LINK_ON(BROKER_RICH_CANCEL, brokerd_on_rich_cancel),
	RTS_LINK_ON(BROKER_ATTACH_FETCH, brokerd_on_rich_attach_fetch),
	RTS_LINK_ON(BROKER_METRICS, brokerd_on_metrics),
	RTS_LINK_ON(PRECHECK_BIND, brokerd_on_precheck_bind),
	RTS_LINK_DISPATCH_END,
};

/* The link is gone (or brokerd stops): close what it bound and forget it. */
static void link_forget(struct brokerd_link *l)
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
	for (struct brokerd_closer *c = d->closers.closing; c; c = c->next) {
		struct brokerd_turn *t = brokerd_entry(c, struct brokerd_turn, closer);
		if (t->owner == l)
			t->owner = NULL;
	}
	brokerd_rich_link_down(d->rich, l->link);
	for (struct brokerd_link **p = &d->links; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	free(l);
}

static void brokerd_runnerd_down(struct rts_link *link, void *owner, int err, bool was_up)
{
	link_forget(owner);
}

static const struct rts_link_spec brokerd_runnerd_spec = {
	.proto = RTS_PROTO_LINK_BROKERD,
	.sock = RTS_SOCK_BROKERD,
	.self = RTS_PROGRAM_BROKERD,
	.peer = RTS_PROGRAM_RUNNERD,
	.peer_name = "runnerd",
	/* Only runnerd's account binds turns: brokerd holds the credentials. */
	.peer_check = rts_peer_is_runnerd,
	.peer_refusal = "peer that is not runnerd's account",
	.dispatch = brokerd_dispatch_runnerd,
	.on_down = brokerd_runnerd_down,
};

static void *brokerd_runnerd_new(void *owner, struct rts_link *link)
{
	struct brokerd *d = owner;
	if (d->stopping) {
		log_warning("refusing a runnerd connection: shutting down");
		return NULL;
	}
	struct brokerd_link *l = rts_xcalloc(1, sizeof(*l));
	*l = (struct brokerd_link){.d = d, .link = link, .next = d->links};
	d->links = l;
	return l;
}

static void on_stop(struct rts_daemon *daemon)
{
	struct brokerd *d = daemon->userdata;
	d->stopping = true;
	log_info("stopping: closing %u turns", d->n_turns);
	(void)rts_link_server_enable(d->server, false);
	while (d->links) {
		struct rts_link *link = d->links->link;
		link_forget(d->links);
		rts_link_free(link);
	}
	brokerd_rich_stop(d->rich);
	if (d->n_turns == 0 && brokerd_rich_idle(d->rich))
		sd_event_exit(d->ev, d->exit_status);
}

/* The launcher never writes to its socket: readable means it is gone, and no host tool
 * or key command can run any more. Stop like at SIGTERM, and exit with a failure so that
 * systemd (Restart=on-failure) starts a whole brokerd again. */
static int on_launcher_gone(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct brokerd *d = userdata;
	sd_event_source_set_enabled(s, SD_EVENT_OFF);
	if (d->stopping)
		return 0;
	log_error("the host tool launcher has ended; stopping");
	d->exit_status = 1;
	d->daemon->stopping = true;
	on_stop(d->daemon);
	return 0;
}

/* Host tools and key commands: their sandbox's rules checked, the launcher forked or
 * connected to (launcher_socket: the launcher unit's; before any key is read, any thread
 * exists and the seccomp filter), and each sandbox profile started once, so that a host
 * where bubblewrap cannot make its namespaces (or a unit that forbids them) stops brokerd
 * at start, with bwrap's own words, instead of failing every call. NULL when the config
 * runs no command. */
static struct brokerd_launcher *start_launcher(const struct rts_config *cfg, const char *runtime_dir,
					       const char *launcher_socket, struct brokerd_toolbox **tb)
{
	*tb = NULL;
	if (!brokerd_toolbox_needed(cfg))
		return NULL;
	char err[1024];
	/* With a launcher unit, tools write in that unit's mount namespace, not in this one
	 * (where ProtectSystem=strict makes them read-only): the launcher checks writePaths. */
	int r = brokerd_toolbox_new(cfg, runtime_dir, getenv("CREDENTIALS_DIRECTORY"), RTS_BWRAP, RTS_TINI,
				    !launcher_socket, tb, err, sizeof(err));
	if (r < 0)
		fatal_f("%s", err);
	struct brokerd_launcher *l = NULL;
	if (launcher_socket) {
		r = brokerd_launcher_connect(*tb, launcher_socket, &l);
		if (r < 0)
			fatal_f("cannot connect to the host tool launcher at %s: %s%s", launcher_socket, strerror(-r),
				r == -EPERM ? " (the socket was not made by root or this account)" : "");
	} else {
		r = brokerd_launcher_start(*tb, &l);
		if (r < 0)
			fatal_f("cannot start the host tool launcher: %s", strerror(-r));
	}
	brokerd_exec_init(l);
	bool key_command = false;
	for (size_t i = 0; i < rts_config_key_sources(cfg) && !key_command; i++) {
		const struct rts_key_source *k = rts_config_key_source(cfg, i, NULL, 0);
		key_command = k && k->kind == RTS_KEY_COMMAND;
	}
	for (size_t i = 0; i <= cfg->n_tools; i++) {
		struct brokerd_exec e = {
			.tool = i < cfg->n_tools ? &cfg->tools[i] : NULL,
			.key = i < cfg->n_tools ? NULL : &cfg->api_key,
			.probe = true,
			.max_output = 4096,
			.cancel = {.wake_fd = -1, .deadline_ms = rts_now_ms() + BROKERD_KEY_COMMAND_TIMEOUT_MS},
			.stderr_label = i < cfg->n_tools ? cfg->tools[i].name : "key command",
			.turn_id = "start-up",
		};
		if (i == cfg->n_tools && !key_command)
			break;
		struct brokerd_exec_result res;
		r = brokerd_exec_run(&e, &res);
		free(res.output);
		if (r < 0 || res.exit_status != 0)
			fatal_f("cannot run %s%s in its sandbox (%s; bwrap's message, if any, is logged just "
				"before%s): see roundtable-sandbox-brokerd(8), \"Host tools\"",
				i < cfg->n_tools ? "host tool " : "key commands",
				i < cfg->n_tools ? cfg->tools[i].name : "",
				r < 0 ? strerror(-r) : "the sandbox did not start",
				launcher_socket ? "; the launcher's own refusals are in the journal of "
						  "roundtable-sandbox-launcher@*.service" : "");
	}
	/* The rich hooks' sandbox differs from every tool's (no writePaths, key sources hidden)
	 * and may be the only one: a config with hooks and no tool would otherwise find a
	 * broken sandbox only at the first turn. */
	for (int h = 0; h < BROKERD_HOOKS; h++) {
		char *const *hook = brokerd_hook_command(cfg, (enum brokerd_hook)h);
		if (!hook)
			continue;
		struct brokerd_exec e = {
			.hook = hook,
			.probe = true,
			.max_output = 4096,
			.cancel = {.wake_fd = -1, .deadline_ms = rts_now_ms() + BROKERD_KEY_COMMAND_TIMEOUT_MS},
			.stderr_label = "rich hooks",
			.turn_id = "start-up",
		};
		struct brokerd_exec_result res;
		r = brokerd_exec_run(&e, &res);
		free(res.output);
		if (r < 0 || res.exit_status != 0)
			fatal_f("cannot run the rich hooks in their sandbox (%s; bwrap's message, if any, is logged just "
				"before): see roundtable-sandbox-brokerd(8), \"Host tools\"",
				r < 0 ? strerror(-r) : "the sandbox did not start");
		break; /* one sandbox for every hook */
	}
	return l;
}

int main(int argc, char **argv)
{
	struct rts_daemon daemon;
	rts_daemon_init(&daemon, argc, argv, "roundtable-sandbox-brokerd", usage);
	const struct rts_config *cfg = daemon.cfg;
	if (cfg->ca_file && access(cfg->ca_file, R_OK) < 0)
		fatal_f("%s: caFile: cannot read %s: %s", cfg->path, cfg->ca_file, strerror(errno));
	char key_err[1024];
	if (brokerd_key_files_check(cfg, key_err, sizeof(key_err)) < 0)
		fatal_f("%s", key_err);
	struct brokerd_toolbox *toolbox = NULL;
	struct brokerd_launcher *launcher = start_launcher(cfg, daemon.opts.runtime_dir, daemon.opts.launcher_socket, &toolbox);
	/* libcurl would write TLS session secrets to this file; brokerd writes no files and
	 * its upstream traffic carries the real credentials. Done before any thread exists. */
	unsetenv("SSLKEYLOGFILE");
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		fatal_f("cannot initialise libcurl");
#ifdef RTS_FETCH_TEST_SEAMS
	/* Only tests/testbuild's fetch build: host_fetch resolves and dials through test
	 * seams; the installed brokerd links common/libfetch.a, which has none. */
	brokerd_testbuild_fetch_seams();
#endif

	struct brokerd d = {.cfg = cfg, .daemon = &daemon, .done_fd = -1};
	brokerd_closers_init(&d.closers);
	rts_daemon_listen(&daemon, RTS_SOCK_BROKERD, SOCK_SEQPACKET, 0600, false, on_stop, &d);
	d.ev = daemon.event;
	d.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d.done_fd < 0)
		fatal_f("eventfd: %s", strerror(errno));

	sd_event_source *done_src = NULL, *launcher_src = NULL;
	int r;
	if ((r = rts_link_server_new(d.ev, daemon.listen_fd, &brokerd_runnerd_spec, LINKS_MAX, brokerd_runnerd_new, &d,
				     &d.server)) < 0 ||
	    (r = rts_link_server_enable(d.server, true)) < 0 ||
	    (r = sd_event_add_io(d.ev, &done_src, d.done_fd, EPOLLIN, on_done, &d)) < 0 ||
	    (r = sd_event_add_time_relative(d.ev, &d.sweep, CLOCK_MONOTONIC, SWEEP_EVERY_US, 50000, on_sweep, &d)) <
		    0)
		fatal_f("cannot set up the event loop: %s", strerror(-r));
	sd_event_source_set_enabled(d.sweep, SD_EVENT_OFF);
	if (launcher &&
	    (r = sd_event_add_io(d.ev, &launcher_src, brokerd_launcher_fd(launcher), EPOLLIN, on_launcher_gone, &d)) < 0)
		fatal_f("cannot set up the event loop: %s", strerror(-r));
	d.rich = brokerd_rich_new(cfg, d.ev, on_rich_idle, &d);

	/* Start-up is over and no thread exists yet. Host tools and key commands do not
	 * inherit the filter: the launcher was forked before it. */
	rts_daemon_sandbox(&daemon, RTS_SANDBOX_BROKERD);
#ifdef BROKERD_TEST_UPSTREAM_TIMEOUT_MS
	/* Only the integration tests' build (tests/testbuild): never mistaken for the real one. */
	log_warning("test build: upstream deadline %u ms instead of 60000 ms; never install this binary",
		    (unsigned)BROKERD_UPSTREAM_TIMEOUT_MS);
#endif
#ifdef BROKERD_TEST_RICH_SILENCE_MS
	log_warning("test build: rich silence limit %u ms, start-up scope %u ms, long poll %u ms; never install "
		    "this binary",
		    (unsigned)BROKERD_RICH_SILENCE_MS, (unsigned)BROKERD_RICH_STARTUP_MS, (unsigned)BROKERD_RICH_LONG_POLL_MS);
#endif
	rts_daemon_ready(&daemon, "Serving turns");
	int status = rts_daemon_run(&daemon);

	/* Normally none: stopping dropped them. */
	for (struct brokerd_link *l = d.links, *next; l; l = next) {
		next = l->next;
		rts_link_free(l->link);
		free(l);
	}
	rts_link_server_free(d.server);
	brokerd_rich_free(d.rich);
	sd_event_source_disable_unref(done_src);
	sd_event_source_disable_unref(launcher_src);
	brokerd_exec_init(NULL);
	brokerd_launcher_stop(launcher);
	brokerd_toolbox_free(toolbox);
	sd_event_source_disable_unref(d.sweep);
	close(d.done_fd);
	brokerd_closers_destroy(&d.closers);
	brokerd_upstream_cleanup();
	curl_global_cleanup();
	rts_daemon_finish(&daemon);
	return status;
}
