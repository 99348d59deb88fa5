/* roundtable-sandbox-runnerd: runs each turn's container (DESIGN.md sections 2 to 4). */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "common/daemon.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/sandbox.h"
#include "common/sock.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/runnerd.h"

#define ZONEINFO_DIR "/usr/share/zoneinfo"
/* Stale containers removed at start-up, at most (a crash leaves at most 64 turns). */
#define STALE_MAX 1024u

static const char usage[] = "Usage: roundtable-sandbox-runnerd [--config PATH] [--runtime-dir DIR]\n"
			    "\n"
			    "Runs each sandboxed turn in a fresh Docker container. Listens on\n"
			    "DIR/" RTS_SOCK_RUNNERD " (or the socket systemd passes) for statd and connects to\n"
			    "DIR/" RTS_SOCK_BROKERD ". See roundtable-sandbox-runnerd(8).\n";

/* Start-up clean-up of containers a crashed runnerd left behind. */
struct startup {
	struct runnerd *rd;
	char **names;
	size_t n, next;
};

static void startup_done(struct startup *st)
{
	struct runnerd *rd = st->rd;
	rts_strv_free(st->names);
	free(st);
	if (rd->shutting_down) {
		sd_event_exit(rd->event, 0);
		return;
	}
	int r = sd_event_source_set_enabled(rd->listen_src, SD_EVENT_ON);
	if (r < 0)
		fatal_f("cannot watch %s: %s", RTS_SOCK_RUNNERD, strerror(-r));
	sd_notify(0, "READY=1\nSTATUS=Running turns");
	log_info("ready: image %s, runRoot %s, installation %s", rd->cfg->image, rd->cfg->run_root,
		 rd->cfg->installation_id);
}

static void startup_rm_next(struct startup *st);

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

static void startup_rm_next(struct startup *st)
{
	struct runnerd *rd = st->rd;
	while (st->next < st->n && !rd->shutting_down) {
		const char *name = st->names[st->next++];
		cleanup_strv char **argv = runnerd_docker_rm_argv(RTS_DOCKER, name);
		struct runnerd_proc *p;
		int r = argv ? runnerd_proc_spawn(rd->event, argv, rd->child_env, NULL, 0, RUNNERD_RM_OUTPUT_MAX,
						  RUNNERD_RM_TIMEOUT_MS, startup_rm_done, st, &p)
			     : -EINVAL;
		if (r >= 0)
			return;
		log_warning_errno(r, "cannot remove stale container %s: %m", name);
	}
	startup_done(st);
}

static void startup_ps_done(struct runnerd_proc *p, const struct runnerd_proc_result *r, void *userdata)
{
	struct startup *st = userdata;
	struct runnerd *rd = st->rd;
	if (!r->exited || r->status != 0 || r->out_overflow) {
		log_warning("cannot list stale containers of this installation (docker ps %s); continuing",
			    r->timed_out ? "timed out" : "failed");
		startup_done(st);
		return;
	}
	st->names = rts_xcalloc(STALE_MAX + 1, sizeof(char *));
	char *save = NULL;
	for (char *line = strtok_r((char *)r->out, "\n", &save); line && st->n < STALE_MAX;
	     line = strtok_r(NULL, "\n", &save)) {
		/* Only names of this installation's turns, checked by shape, never anything else
		 * the label filter might have matched. */
		if (runnerd_stale_name_ok(rd->cfg->installation_id, line))
			st->names[st->n++] = rts_xstrdup(line);
	}
	if (st->n)
		log_notice("removing %zu stale container(s) of this installation", st->n);
	startup_rm_next(st);
}

static void startup_begin(struct runnerd *rd)
{
	struct startup *st = rts_xcalloc(1, sizeof(*st));
	st->rd = rd;
	cleanup_strv char **argv = runnerd_docker_ps_argv(RTS_DOCKER, rd->cfg->installation_id);
	struct runnerd_proc *p;
	int r = argv ? runnerd_proc_spawn(rd->event, argv, rd->child_env, NULL, 0, RUNNERD_PS_OUTPUT_MAX,
					  RUNNERD_PS_TIMEOUT_MS, startup_ps_done, st, &p)
		     : -EINVAL;
	if (r < 0) {
		log_warning_errno(r, "cannot run docker ps to find stale containers: %m");
		startup_done(st);
	}
}

static int on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	runnerd_statd_accept(userdata, fd);
	return 0;
}

static int on_terminate(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct runnerd *rd = userdata;
	if (rd->shutting_down)
		return 0;
	log_info("shutting down: cancelling %u turn(s)", rd->n_turns);
	sd_notify(0, "STOPPING=1");
	rd->shutting_down = true;
	sd_event_source_set_enabled(rd->listen_src, SD_EVENT_OFF);
	/* Turns end the normal way (removal included); the loop exits when the last one is
	 * gone. During start-up there are none: a docker rm still running finishes alone. */
	runnerd_turns_cancel_all(rd);
	runnerd_maybe_exit(rd);
	return 0;
}

/* Open /dev/null on any of fds 0-2 that is closed, so a pipe or socket never lands there
 * (the docker CLI's pipes are dup2'ed onto 0-2). */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int n = open("/dev/null", O_RDWR);
			if (n < 0)
				exit(1);
			if (n != fd) {
				dup2(n, fd);
				close(n);
			}
		}
}

static void check_time_zone(const char *tz)
{
	/* The config only admits IANA-shaped names; the file must exist so "now" is right. */
	cleanup_free char *path = rts_xasprintf(ZONEINFO_DIR "/%s", tz);
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("timeZone: %s is not a known time zone (%s does not exist; is tzdata installed?)", tz, path);
		exit(1);
	}
	if (setenv("TZ", tz, 1) < 0)
		fatal_f("cannot set TZ: %m");
	tzset();
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
	struct rts_opts o;
	int idx = rts_parse_options(argc, argv, usage, &o);
	if (idx != argc) {
		fputs(usage, stderr);
		return 2;
	}
	rts_log_init("roundtable-sandbox-runnerd");
	ensure_std_fds();

	struct runnerd rd = {.run_root_fd = -1, .listen_fd = -1};
	TAILQ_INIT(&rd.statd);
	TAILQ_INIT(&rd.turns);
	rd.runtime_dir = o.runtime_dir;
	rd.cfg = rts_daemon_load_config(&o);
	int r = rts_sandbox_init();
	if (r < 0)
		fatal_f("cannot drop privileges: %s", strerror(-r));
	rd.uid = rd.cfg->has_uid ? rd.cfg->uid : geteuid();
	rd.gid = rd.cfg->has_gid ? rd.cfg->gid : getegid();

	if (access(RTS_DOCKER, X_OK) < 0) {
		log_error("the docker CLI %s is not executable: %m (build with --with-docker=PATH)", RTS_DOCKER);
		return 1;
	}
	check_time_zone(rd.cfg->time_zone);

	char err[1024];
	rd.run_root_fd = runnerd_run_root_open(rd.cfg->run_root, err, sizeof(err));
	if (rd.run_root_fd < 0) {
		log_error("%s: %s", rd.cfg->path, err);
		return 1;
	}
	runnerd_run_root_clean(rd.run_root_fd);

	/* sd-event needs these blocked to deliver them as events (SIGCHLD: child sources). */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		fatal_f("sigprocmask: %m");
	/* A worker that closes stdin early must not kill us; writes see EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);

	r = sd_event_default(&rd.event);
	if (r < 0)
		fatal_f("cannot create the event loop: %s", strerror(-r));
	(void)sd_event_set_watchdog(rd.event, true);
	if ((r = sd_event_add_signal(rd.event, NULL, SIGTERM, on_terminate, &rd)) < 0 ||
	    (r = sd_event_add_signal(rd.event, NULL, SIGINT, on_terminate, &rd)) < 0)
		fatal_f("cannot watch signals: %s", strerror(-r));

	cleanup_free char *sock_path = rts_runtime_path(o.runtime_dir, RTS_SOCK_RUNNERD);
	bool activated = false;
	rd.listen_fd = rts_listen_activated_or_bind(sock_path, SOCK_SEQPACKET, 0600, &activated);
	if (rd.listen_fd < 0) {
		errno = -rd.listen_fd;
		log_error("cannot listen on %s: %m", activated ? "the socket systemd passed" : sock_path);
		return 1;
	}
	/* Watched only once stale containers are gone: a turn must never race that clean-up. */
	r = sd_event_add_io(rd.event, &rd.listen_src, rd.listen_fd, EPOLLIN, on_listen, &rd);
	if (r < 0)
		fatal_f("cannot watch %s: %s", sock_path, strerror(-r));
	sd_event_source_set_enabled(rd.listen_src, SD_EVENT_OFF);

	rd.broker_path = rts_runtime_path(o.runtime_dir, RTS_SOCK_BROKERD);
	rd.public_tools = rts_config_public_tools(rd.cfg);
	rd.child_env = make_child_env(rd.cfg->run_root);

	startup_begin(&rd);
	r = sd_event_loop(rd.event);
	if (r < 0)
		log_error_errno(r, "event loop failed: %m");

	struct runnerd_statd *peer;
	while ((peer = TAILQ_FIRST(&rd.statd))) {
		TAILQ_REMOVE(&rd.statd, peer, entry);
		peer->hello_timer = sd_event_source_disable_unref(peer->hello_timer);
		runnerd_link_free(peer->link);
		free(peer);
	}
	runnerd_broker_close(&rd);
	rd.listen_src = sd_event_source_disable_unref(rd.listen_src);
	if (!activated)
		unlink(sock_path);
	close(rd.listen_fd);
	close(rd.run_root_fd);
	json_object_put(rd.public_tools);
	rts_strv_free(rd.child_env);
	free(rd.broker_path);
	rd.event = sd_event_unref(rd.event);
	rts_config_free(rd.cfg);
	log_info("stopped");
	return r < 0 ? 1 : 0;
}
