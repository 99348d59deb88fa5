/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-statd: channel modes, channel queues and workspaces.
 *
 * Holds the state file and the workspace root, decides each message's route, orders turns
 * per channel and hands them to runnerd. Never touches Docker, the network or credentials
 * (DESIGN.md section 2). */
#include "config.h"

#include <libgen.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/sandbox.h"
#include "common/sock.h"
#include "common/util.h"
#include "statd/statd.h"
#include "statd/workspace.h"

static const char usage[] =
	"Usage: roundtable-sandbox-statd [--config PATH] [--runtime-dir DIR]\n"
	"\n"
	"Keeps the sandbox mode of each channel, queues sandboxed turns per channel and hands\n"
	"them to roundtable-sandbox-runnerd. Listens on DIR/control.sock (or the socket passed\n"
	"by systemd socket activation).\n"
	"\n"
	"  --config PATH       configuration file (default " RTS_DEFAULT_CONFIG ")\n"
	"  --runtime-dir DIR   socket directory (default " RTS_DEFAULT_RUNTIME_DIR ")\n"
	"  --help, --version\n";

/* The state file must be host-only: a guest container mounts its workspace, and the run
 * root holds per-turn directories that are bind-mounted too (seed: keep stateFile outside
 * both roots). */
static void check_state_location(const struct rts_config *c)
{
	if (rts_path_within(c->state_file, c->workspace_root)) {
		log_error("%s: stateFile %s lies inside workspaceRoot %s; move it outside both roots", c->path,
			  c->state_file, c->workspace_root);
		exit(1);
	}
	if (rts_path_within(c->state_file, c->run_root)) {
		log_error("%s: stateFile %s lies inside runRoot %s; move it outside both roots", c->path, c->state_file,
			  c->run_root);
		exit(1);
	}
}

static void ensure_dirs(const struct rts_config *c)
{
	char err[1024];
	cleanup_free char *copy = rts_xstrdup(c->state_file);
	const char *state_dir = dirname(copy);
	/* The fds stay open on purpose: they hold the locks that keep a second statd of this
	 * installation from writing the same state file or workspaces. */
	if (statd_dir_claim("stateFile", state_dir, err, sizeof(err)) < 0 ||
	    statd_dir_claim("workspaceRoot", c->workspace_root, err, sizeof(err)) < 0) {
		log_error("%s", err);
		exit(1);
	}
}

static struct statd_state *load_state(const struct rts_config *c)
{
	char err[1024];
	struct statd_state *s = NULL;
	int r = statd_state_load(c->state_file, &s, err, sizeof(err));
	if (r == 0) {
		log_info("state file %s: %zu channels, %zu on", c->state_file, statd_state_count(s),
			 statd_state_count_on(s));
		return s;
	}
	struct stat st;
	if (r != -ENOENT || lstat(c->state_file, &st) == 0) {
		/* Never replaced or reset: it is the only record of which channels are
		 * guest-only boundaries. */
		if (r == -ENOENT)
			snprintf(err, sizeof(err), "%s: exists but cannot be opened (a dangling symbolic link?)",
				 c->state_file);
		log_error("%s; the state file is never replaced automatically: repair it or restore it from a "
			  "backup",
			  err);
		exit(1);
	}
	/* Missing: this is the first start. initialChannels seeds only this file. */
	s = statd_state_new();
	for (char **k = c->initial_channels; k && *k; k++) {
		r = statd_state_set(s, *k, STATD_MODE_ON);
		if (r < 0) {
			log_error_errno(r, "%s: initialChannels: cannot add a channel: %m", c->path);
			exit(1);
		}
	}
	r = statd_state_save(s, c->state_file);
	if (r < 0) {
		log_error_errno(r, "state file %s: cannot create it: %m", c->state_file);
		exit(1);
	}
	log_info("state file %s: created with %zu initial channels", c->state_file, statd_state_count(s));
	return s;
}

static void stop_listening(struct statd *d)
{
	d->listen_src = sd_event_source_disable_unref(d->listen_src);
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		d->listen_fd = -1;
		/* A socket we bound ourselves is ours to remove; an activated one is systemd's. */
		if (!d->activated)
			unlink(d->control_path);
	}
}

/* Clients find statd by --runtime-dir; a unit listening elsewhere works but is likely a
 * mistake, so say so (as SSSD does for its activated sockets). */
static void warn_activated_path(int fd, const char *expected)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0 || len <= offsetof(struct sockaddr_un, sun_path))
		return;
	sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
	if (strcmp(sa.sun_path, expected) != 0)
		log_warning("the socket passed by systemd is %s, not %s: clients using the runtime directory will "
			    "not find it",
			    sa.sun_path[0] ? sa.sun_path : "(unnamed)", expected);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct statd *d = userdata;
	if (d->stopping)
		return 0;
	log_info("received %s, stopping", strsignal((int)si->ssi_signo));
	sd_notify(0, "STOPPING=1");
	stop_listening(d);
	statd_queue_stop(d);
	return 0;
}

int main(int argc, char **argv)
{
	struct rts_opts o;
	int i = rts_parse_options(argc, argv, usage, &o);
	if (i != argc) {
		fputs(usage, stderr);
		return 2;
	}
	rts_log_init("roundtable-sandbox-statd");
	/* Everything statd creates is for the service account alone; the control socket is
	 * widened to 0660 explicitly. */
	umask(0077);

	struct statd d = {.listen_fd = -1, .runtime_dir = o.runtime_dir};
	d.cfg = rts_daemon_load_config(&o);
	int r = rts_sandbox_init();
	if (r < 0) {
		log_error_errno(r, "cannot drop privileges: %m");
		return 1;
	}
	check_state_location(d.cfg);
	ensure_dirs(d.cfg);
	check_state_location(d.cfg); /* again, now that symlinks can be resolved */
	d.state = load_state(d.cfg);

	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
		fatal_f("sigprocmask: %m");
	signal(SIGPIPE, SIG_IGN);

	r = sd_event_default(&d.ev);
	if (r < 0)
		fatal_f("sd_event_default: %s", strerror(-r));
	if ((r = sd_event_add_signal(d.ev, NULL, SIGTERM, on_signal, &d)) < 0 ||
	    (r = sd_event_add_signal(d.ev, NULL, SIGINT, on_signal, &d)) < 0)
		fatal_f("sd_event_add_signal: %s", strerror(-r));

	d.control_path = rts_runtime_path(o.runtime_dir, RTS_SOCK_CONTROL);
	d.listen_fd = rts_listen_activated_or_bind(d.control_path, SOCK_STREAM, 0660, &d.activated);
	if (d.listen_fd < 0) {
		r = d.listen_fd;
		if (r == -EADDRINUSE)
			log_error("%s: another statd is answering there; stop it first", d.control_path);
		else
			log_error_errno(r, "cannot listen on %s (does the runtime directory %s exist and belong to this "
					   "account?): %m",
					d.control_path, o.runtime_dir);
		return 1;
	}
	if (d.activated)
		warn_activated_path(d.listen_fd, d.control_path);
	r = sd_event_add_io(d.ev, &d.listen_src, d.listen_fd, EPOLLIN, statd_control_accept, &d);
	if (r < 0)
		fatal_f("sd_event_add_io: %s", strerror(-r));

	statd_queue_init(&d);
	statd_link_init(&d);
	r = statd_control_start_sweep(&d);
	if (r < 0)
		fatal_f("sd_event_add_time: %s", strerror(-r));

	/* Start-up is over: from here on only the calls statd needs to serve. */
	r = rts_sandbox_apply(RTS_SANDBOX_STATD);
	if (r < 0) {
		log_error_errno(r, "cannot install the seccomp filter: %m");
		return 1;
	}
	log_info("listening on %s", d.activated ? "the socket passed by systemd" : d.control_path);
	sd_notify(0, "READY=1");

	r = sd_event_loop(d.ev);
	if (r < 0)
		log_error_errno(r, "event loop failed: %m");

	statd_control_close_all(&d);
	stop_listening(&d);
	statd_link_free(&d);
	statd_queue_free(&d);
	statd_state_free(d.state);
	free(d.control_path);
	sd_event_unref(d.ev);
	rts_config_free(d.cfg);
	return r < 0 ? 1 : r;
}
