/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-runnerd: runs each turn's container (DESIGN.md sections 2 to 4). */
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/daemon.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/paths.h"
#include "common/privdir.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/runnerd.h"

/* Stale containers removed at start-up, at most (a crash leaves at most 64 turns). */
#define STALE_MAX 1024u

static const char usage[] = "Usage: roundtable-sandbox-runnerd [--config PATH] [--runtime-dir DIR]\n"
			    "\n"
			    "Runs each sandboxed turn in a fresh Docker container. Listens on\n"
			    "DIR/" RTS_SOCK_RUNNERD " (or the socket systemd passes) for statd and connects to\n"
			    "DIR/" RTS_SOCK_BROKERD ". See roundtable-sandbox-runnerd(8).\n";

/* Start-up, after the filter is on and before runnerd.sock is served, one docker CLI at a
 * time: docker info (Docker answers; no root inside its data root), docker image inspect
 * (the image exists locally; the rich and precheck images only warn), one docker ps of
 * this installation's containers (the rich ones are kept, runnerd_rich_found; the stale
 * turn containers a crashed runnerd left behind are removed with docker rm -f). The first
 * two refuse to start; listing and clean-up problems are only logged. */
struct startup {
	struct runnerd *rd;
	char **names;
	size_t n, next;
};

/* Stop start-up with a message (exit status 1). */
static void startup_refuse(struct startup *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void startup_refuse(struct startup *st, const char *fmt, ...)
{
	struct runnerd *rd = st->rd;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	rts_strv_free(st->names);
	free(st);
	sd_event_exit(rd->event, 1);
}

/* Why a start-up docker command failed, for the refusal message. */
static void startup_docker_error(const struct runnerd_proc_result *r, char *buf, size_t len)
{
	char line[RUNNERD_STDERR_LOG_MAX + 1];
	rts_spawn_first_line(r->err, r->err_len, line, sizeof(line));
	if (r->timed_out)
		snprintf(buf, len, "no answer within %u ms", RUNNERD_CHECK_TIMEOUT_MS);
	else if (!r->exited)
		snprintf(buf, len, "killed by signal %d", r->status);
	else
		snprintf(buf, len, "exit status %d: %s", r->status, line[0] ? line : "(no message)");
}

static void startup_done(struct startup *st)
{
	struct runnerd *rd = st->rd;
	rts_strv_free(st->names);
	free(st);
	if (rd->shutting_down) {
		sd_event_exit(rd->event, 0);
		return;
	}
	if (rd->cfg->rich.enabled)
		runnerd_rich_dirs_clean(rd);
	int r = rts_link_server_enable(rd->statd_server, true);
	if (r < 0)
		fatal_f("cannot watch %s: %s", RTS_SOCK_RUNNERD, strerror(-r));
	if (rd->cfg->warm_spares > 0)
		runnerd_image_watch_start(rd);
	rts_daemon_ready(&rd->daemon, "Running turns");
	log_info("ready: image %s, runRoot %s, installation %s", rd->cfg->image, rd->cfg->run_root,
		 rd->cfg->installation_id);
}

static void startup_rm_next(struct startup *st);
static void startup_ps(struct startup *st);

static void startup_rm_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	const char *name = st->names[st->next - 1];
	if (!r->killed && r->exited && (r->status == 0 || strstr(r->err, "No such container"))) {
		log_notice("removed stale container %s", name);
	} else {
		log_warning("cannot remove stale container %s%s; inspect it with docker ps -a", name,
			    r->timed_out ? " (docker rm -f timed out)" : "");
		if (r->timed_out) {
			/* dockerd does not answer: do not spend 5 s on each of the others. */
			startup_done(st);
			return;
		}
	}
	startup_rm_next(st);
}

/* Start one docker CLI step of start-up (argv: consumed, NULL when it could not be built)
 * with done as its continuation. Returns 0 or -errno. */
static int startup_spawn(struct startup *st, char **argv, size_t out_max, uint64_t timeout_ms,
			 runnerd_proc_done_t done)
{
	cleanup_strv char **args = argv;
	struct runnerd_proc *p;
	return args ? runnerd_proc_spawn(st->rd->event, args, st->rd->child_env, NULL, 0, out_max, timeout_ms, done,
					 st, &p)
		    : -EINVAL;
}

static void startup_rm_next(struct startup *st)
{
	struct runnerd *rd = st->rd;
	while (st->next < st->n && !rd->shutting_down) {
		const char *name = st->names[st->next++];
		int r = startup_spawn(st, runnerd_docker_rm_argv(RTS_DOCKER, name), RUNNERD_RM_OUTPUT_MAX,
				      RUNNERD_RM_TIMEOUT_MS, startup_rm_done);
		if (r >= 0)
			return;
		log_warning_errno(r, "cannot remove stale container %s: %m", name);
	}
	startup_done(st);
}

/* A rich container a previous runnerd left running, when line is one: kept (seed: a
 * restart of the daemons does not kill them) until statd's sync says which channels are
 * still rich. Rich containers are never stale: their names are not a turn's. */
static bool startup_rich_found(struct runnerd *rd, const char *line)
{
	struct runnerd_rich_found f;
	if (runnerd_parse_rich_line(rd->cfg->installation_id, line, &f) < 0)
		return false;
	char dir[sizeof(RTS_RICH_DIR_PREFIX) + RUNNERD_RICH_PREFIX_LEN];
	snprintf(dir, sizeof(dir), RTS_RICH_DIR_PREFIX "%.*s", (int)RUNNERD_RICH_PREFIX_LEN, f.channel_hash);
	struct stat sb;
	f.dir_gone = fstatat(rd->run_root_fd, dir, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode);
	runnerd_rich_found(&rd->riches, &f);
	return true;
}

static void startup_ps_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	struct runnerd *rd = st->rd;
	bool rich = rd->cfg->rich.enabled;
	/* One listing serves both: the rich containers are found in it too, so one that
	 * overflows RUNNERD_PS_OUTPUT_MAX (some 1,400 containers of this installation) leaves
	 * the rich containers unadopted as well as the stale ones in place; both are said. */
	if (!r->exited || r->status != 0 || r->out_overflow) {
		log_warning("cannot list stale containers of this installation (docker ps %s); continuing",
			    r->timed_out ? "timed out" : "failed");
		if (rich)
			log_warning("cannot list this installation's rich containers (docker ps %s); they are left alone",
				    r->timed_out ? "timed out" : "failed");
		startup_done(st);
		return;
	}
	st->names = rts_xcalloc(STALE_MAX + 1, sizeof(char *));
	char *save = NULL;
	unsigned n_rich = 0;
	for (char *line = strtok_r((char *)r->out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (rich && startup_rich_found(rd, line)) {
			n_rich++;
			continue;
		}
		/* Only names of this installation's turns, checked by shape, never anything else
		 * the label filter might have matched. */
		struct runnerd_stale c;
		if (st->n >= STALE_MAX || runnerd_parse_stale_line(rd->cfg->installation_id, line, &c) < 0)
			continue;
		/* The evidence first (seed: inspect what a crash left behind): once removed,
		 * only this line says what was there. */
		log_notice("stale container %s: channel %s, created %s, state %s", c.name, c.channel_hash, c.created,
			   c.state);
		st->names[st->n++] = rts_xstrdup(c.name);
	}
	if (n_rich)
		log_notice("%u rich container(s) of this installation found", n_rich);
	if (st->n)
		log_notice("removing %zu stale container(s) of this installation", st->n);
	startup_rm_next(st);
}

static void startup_ps(struct startup *st)
{
	struct runnerd *rd = st->rd;
	if (rd->shutting_down) {
		startup_done(st);
		return;
	}
	int r = startup_spawn(st, runnerd_docker_ps_argv(RTS_DOCKER, rd->cfg->installation_id), RUNNERD_PS_OUTPUT_MAX,
			      RUNNERD_PS_TIMEOUT_MS, startup_ps_done);
	if (r < 0) {
		log_warning_errno(r, "cannot run docker ps to find stale containers: %m");
		startup_done(st);
	}
}

/* The precheck image only warns: guest turns do not need it, and a precheck run without
 * it fails on its own (its docker run says why). */
static void startup_precheck_image_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	const struct rts_config *c = st->rd->cfg;
	if (!(r->exited && r->status == 0 && !r->out_overflow))
		log_warning("%s: precheck.image: %s is not in the local Docker image store; prechecks fail until it is "
			    "built with \"roundtable-sandbox image build --precheck --tag %s\"",
			    c->path, c->precheck.image, c->precheck.image);
	startup_ps(st);
}

static void startup_precheck_image(struct startup *st)
{
	const struct rts_config *c = st->rd->cfg;
	if (!c->has_precheck || st->rd->shutting_down) {
		startup_ps(st);
		return;
	}
	int r = startup_spawn(st, runnerd_docker_image_inspect_argv(RTS_DOCKER, c->precheck.image),
			      RUNNERD_CHECK_OUTPUT_MAX, RUNNERD_CHECK_TIMEOUT_MS, startup_precheck_image_done);
	if (r < 0) {
		log_warning_errno(r, "cannot check that the precheck image exists: %m");
		startup_ps(st);
	}
}

static void startup_rich_image_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	struct runnerd *rd = st->rd;
	if (!(r->exited && r->status == 0 && !r->out_overflow))
		log_warning("%s: rich.image: %s cannot be found in the local Docker image store: rich channels cannot "
			    "start until it is built",
			    rd->cfg->path, rd->cfg->rich.image);
	startup_precheck_image(st);
}

static void startup_rich(struct startup *st)
{
	struct runnerd *rd = st->rd;
	if (!rd->cfg->rich.enabled || rd->shutting_down) {
		startup_precheck_image(st);
		return;
	}
	int r = startup_spawn(st, runnerd_docker_image_inspect_argv(RTS_DOCKER, rd->cfg->rich.image),
			      RUNNERD_CHECK_OUTPUT_MAX, RUNNERD_CHECK_TIMEOUT_MS, startup_rich_image_done);
	if (r < 0) {
		log_warning_errno(r, "cannot run docker image inspect: %m");
		startup_precheck_image(st);
	}
}

static void startup_image_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	const struct rts_config *c = st->rd->cfg;
	if (r->exited && r->status == 0 && !r->out_overflow) {
		startup_rich(st);
		return;
	}
	if (r->exited && strstr(r->err, "No such image"))
		startup_refuse(st,
			       "%s: image: %s does not exist in the local Docker image store, and turns never pull "
			       "(--pull never): build it with \"roundtable-sandbox image build --tag %s\"",
			       c->path, c->image, c->image);
	else {
		char why[RUNNERD_STDERR_LOG_MAX + 64];
		startup_docker_error(r, why, sizeof(why));
		startup_refuse(st, "cannot check that the image %s exists (docker image inspect: %s)", c->image, why);
	}
}

/* A start-up check (docker info, image inspect): start-up is refused when it cannot even
 * be started. */
static void startup_check(struct startup *st, char **argv, const char *what, runnerd_proc_done_t done)
{
	int r = startup_spawn(st, argv, RUNNERD_CHECK_OUTPUT_MAX, RUNNERD_CHECK_TIMEOUT_MS, done);
	if (r < 0) {
		errno = -r;
		startup_refuse(st, "cannot run %s %s: %m", RTS_DOCKER, what);
	}
}

static void startup_image(struct startup *st)
{
	startup_check(st, runnerd_docker_image_inspect_argv(RTS_DOCKER, st->rd->cfg->image), "image inspect",
		      startup_image_done);
}

static void startup_info_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	struct runnerd *rd = st->rd;
	const struct rts_config *c = rd->cfg;
	char data_root[PATH_MAX];
	if (!r->exited || r->status != 0 || r->out_overflow) {
		char why[RUNNERD_STDERR_LOG_MAX + 64];
		startup_docker_error(r, why, sizeof(why));
		startup_refuse(st,
			       "the Docker daemon does not answer (%s info: %s): start dockerd, and make sure uid %lu "
			       "is in the docker group",
			       RTS_DOCKER, why, (unsigned long)geteuid());
		return;
	}
	if (runnerd_parse_data_root(r->out, r->out_len, data_root, sizeof(data_root)) < 0) {
		startup_refuse(st, "cannot read Docker's data root from %s info", RTS_DOCKER);
		return;
	}
	/* This check is runnerd's: it hands both roots to Docker as bind sources, and statd
	 * must never talk to Docker (DESIGN.md section 2). */
	const struct {
		const char *key, *path;
	} roots[] = {{"runRoot", c->run_root},
		     {"workspaceRoot", c->workspace_root},
		     {"precheck.runRoot", c->has_precheck ? c->precheck.run_root : c->run_root}};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(roots); i++)
		if (rts_path_within(roots[i].path, data_root)) {
			startup_refuse(st,
				       "%s: %s: %s lies inside Docker's data root %s, where Docker refuses private "
				       "propagation for bind sources: move it outside %s",
				       c->path, roots[i].key, roots[i].path, data_root, data_root);
			return;
		}
	if (rd->shutting_down) {
		startup_done(st);
		return;
	}
	startup_image(st);
}

static void startup_begin(struct runnerd *rd)
{
	struct startup *st = rts_xcalloc(1, sizeof(*st));
	st->rd = rd;
	startup_check(st, runnerd_docker_info_argv(RTS_DOCKER), "info", startup_info_done);
}

static void on_stop(struct rts_daemon *daemon)
{
	struct runnerd *rd = daemon->userdata;
	log_info("shutting down: cancelling %u turn(s); rich containers keep running", rd->turns.n);
	rd->shutting_down = true;
	(void)rts_link_server_enable(rd->statd_server, false);
	runnerd_riches_shutdown(&rd->riches);
	/* Turns end the normal way (removal included); the loop exits when the last one is
	 * gone. During start-up there are none: a docker rm still running finishes alone. */
	runnerd_image_watch_stop(rd);
	runnerd_spares_shutdown(rd);
	runnerd_turns_shutdown(&rd->turns);
}

static void check_time_zone(const char *tz)
{
	/* The config only admits IANA-shaped names; the file must exist so "now" is right. */
	cleanup_free char *path = NULL;
	if (rts_time_zone_file(tz, &path) < 0) {
		log_error("timeZone: %s is not a known time zone (%s does not exist; is tzdata installed?)", tz, path);
		exit(1);
	}
	if (setenv("TZ", tz, 1) < 0)
		fatal_f("cannot set TZ: %m");
	tzset();
}

/* Docker refuses a --cpus above the CPUs its daemon may run on; the config's range is
 * host-independent, so a larger limits.cpus is lowered here once rather than failing every
 * turn. dockerd runs on this host and, normally, on the same CPUs as we do. */
static void fit_cpus_to_host(struct rts_limits *l, const char *key)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	unsigned host = (unsigned)CPU_COUNT(&set);
	double cpus = runnerd_cpus_for_host(l->cpus, host);
	if (cpus != l->cpus) {
		log_notice("%s.cpus: %g is more than the %u CPUs of this host; containers get %u", key, l->cpus, host,
			   host);
		l->cpus = cpus;
	}
}

static char **make_child_env(const char *run_root)
{
	char **env = rts_xcalloc(4, sizeof(char *));
	env[0] = rts_xstrdup("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
	/* Our own private directory; nothing of the service account's home is read. */
	env[1] = rts_xasprintf("HOME=%s", run_root);
	/* A path inside runRoot (0700, ours) that is never created: the CLI reads no
	 * config.json, credential helper or context there, and nobody else can put one. */
	env[2] = rts_xasprintf("DOCKER_CONFIG=%s/.docker-config-none", run_root);
	return env;
}

int main(int argc, char **argv)
{
	struct runnerd rd = {.run_root_fd = -1, .precheck_root_fd = -1};
	rts_daemon_init(&rd.daemon, argc, argv, "roundtable-sandbox-runnerd", usage);
	TAILQ_INIT(&rd.statd);
	rd.cfg = rd.daemon.cfg;
	rd.runtime_dir = rd.daemon.opts.runtime_dir;
	rd.uid = rd.cfg->has_uid ? rd.cfg->uid : geteuid();
	rd.gid = rd.cfg->has_gid ? rd.cfg->gid : getegid();

	if (access(RTS_DOCKER, X_OK) < 0) {
		log_error("the docker CLI %s is not executable: %m (build with --with-docker=PATH)", RTS_DOCKER);
		return 1;
	}
	check_time_zone(rd.cfg->time_zone);
	fit_cpus_to_host(&rd.cfg->limits, "limits");
	if (rd.cfg->has_precheck)
		fit_cpus_to_host(&rd.cfg->precheck.limits, "precheck.limits");

	char err[1024];
	rd.run_root_fd = runnerd_run_root_open(rd.cfg->run_root, err, sizeof(err));
	if (rd.run_root_fd < 0) {
		log_error("%s: %s", rd.cfg->path, err);
		return 1;
	}
	/* A rich channel's broker socket path is longer than a turn's (seed: at most 100). */
	size_t rich_len = rts_rich_broker_sock_path_len(rd.cfg->run_root);
	if (rd.cfg->rich.enabled && rich_len > RTS_BROKER_SOCK_PATH_MAX) {
		log_error("%s: runRoot: %s is too long for rich mode: %s/" RTS_RICH_DIR_PREFIX "<16 hex>/%s would be %zu "
			  "characters, the limit is %u",
			  rd.cfg->path, rd.cfg->run_root, rd.cfg->run_root, RUNNERD_BROKER_SOCK, rich_len,
			  RTS_BROKER_SOCK_PATH_MAX);
		return 1;
	}
	/* Before touching run dirs or containers: a second runnerd of this installation would
	 * otherwise remove the first one's live turns as stale. */
	if (rts_dir_lock(rd.run_root_fd, "roundtable-sandbox-runnerd", "runRoot", rd.cfg->run_root, err, sizeof(err)) < 0) {
		log_error("%s: %s", rd.cfg->path, err);
		return 1;
	}
	runnerd_run_root_clean(rd.run_root_fd);
	if (rd.cfg->has_precheck) {
		/* Its own fd even when it is runRoot itself; locked only when it is another
		 * directory (a second lock on runRoot would meet our own). */
		const char *root = rd.cfg->precheck.run_root;
		rd.precheck_root_fd = runnerd_precheck_root_open(root, err, sizeof(err));
		if (rd.precheck_root_fd < 0 ||
		    (strcmp(root, rd.cfg->run_root) != 0 &&
		     rts_dir_lock(rd.precheck_root_fd, "roundtable-sandbox-runnerd", "precheck.runRoot", root, err,
				  sizeof(err)) < 0)) {
			log_error("%s: %s", rd.cfg->path, err);
			return 1;
		}
		runnerd_precheck_root_clean(rd.precheck_root_fd);
	}

	/* SIGCHLD too: the docker CLIs are sd-event child sources. */
	rts_daemon_listen(&rd.daemon, RTS_SOCK_RUNNERD, SOCK_SEQPACKET, 0600, true, on_stop, &rd);
	rd.event = rd.daemon.event;
	/* Served only once stale containers are gone: a turn must never race that clean-up. */
	int r = rts_link_server_new(rd.event, rd.daemon.listen_fd, &runnerd_statd_spec, RUNNERD_MAX_STATD,
				    runnerd_statd_new, &rd, &rd.statd_server);
	if (r < 0)
		fatal_f("cannot watch %s: %s", RTS_SOCK_RUNNERD, strerror(-r));

	rd.broker_path = rts_runtime_path(rd.runtime_dir, RTS_SOCK_BROKERD);
	rd.public_tools = rts_config_public_tools(rd.cfg);
	rd.child_env = make_child_env(rd.cfg->run_root);
	runnerd_turns_attach(&rd);
	runnerd_spares_init(&rd);
	runnerd_metrics_init(&rd);

	/* Start-up is over (sockets bound, config and directories checked); the filter is
	 * inherited by every docker CLI from here on, the start-up clean-up's included. */
	rts_daemon_sandbox(&rd.daemon, RTS_SANDBOX_RUNNERD);
	startup_begin(&rd);
	int status = rts_daemon_run(&rd.daemon);

	runnerd_metrics_free(&rd);
	runnerd_statd_free_all(&rd);
	runnerd_riches_free(&rd.riches);
	runnerd_attach_free(&rd);
	runnerd_broker_close(&rd);
	rts_link_server_free(rd.statd_server);
	close(rd.run_root_fd);
	if (rd.precheck_root_fd >= 0)
		close(rd.precheck_root_fd);
	json_object_put(rd.public_tools);
	rts_strv_free(rd.child_env);
	free(rd.broker_path);
	rts_daemon_finish(&rd.daemon);
	if (status == 0)
		log_info("stopped");
	return status != 0 ? 1 : 0;
}
