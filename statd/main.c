/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-statd: channel modes, channel queues and workspaces.
 *
 * Holds the state file and the workspace root, decides each message's route, orders turns
 * per channel and hands them to runnerd. Never touches Docker, the network or credentials
 * (DESIGN.md section 2). */
#include "config.h"

#include <libgen.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common/daemon.h"
#include "common/ids.h"
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
		r = statd_state_set(s, *k, STATD_MODE_ON, NULL);
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

/* Rich mode: statd writes the turn input's "now" in rich.timeZone; a rich channel whose
 * profile the config no longer has stays rich (routing fails closed) and is said so. */
static void rich_init(const struct rts_config *c, const struct statd_state *s)
{
	if (!c->rich.enabled)
		return;
	cleanup_free char *path = NULL;
	if (rts_time_zone_file(c->rich.time_zone, &path) < 0) {
		log_error("rich.timeZone: %s is not a known time zone (%s does not exist; is tzdata installed?)",
			  c->rich.time_zone, path);
		exit(1);
	}
	if (setenv("TZ", c->rich.time_zone, 1) < 0)
		fatal_f("cannot set TZ: %m");
	tzset();
	for (size_t i = 0; i < statd_state_count(s); i++) {
		const char *profile = statd_state_profile_at(s, i);
		if (profile && !rts_rich_profile_find(&c->rich, profile)) {
			char hash[RTS_HASH_HEX_LEN + 1];
			rts_channel_hash(statd_state_key(s, i), hash);
			log_warning("channel %.12s: its rich profile %s is not in the config: its messages are dropped "
				    "until it gets a configured profile (roundtable-sandbox rich CHANNEL PROFILE) or mode",
				    hash, profile);
		}
	}
}

static void stop_listening(struct statd *d)
{
	d->listen_src = sd_event_source_disable_unref(d->listen_src);
	rts_daemon_stop_listening(&d->daemon);
}

static void on_stop(struct rts_daemon *daemon)
{
	struct statd *d = daemon->userdata;
	d->stopping = true;
	stop_listening(d);
	/* Prechecks first: the queue may report itself done (and the loop end) at once. */
	statd_prechecks_stop(d);
	statd_queue_stop(d->queue);
}

int main(int argc, char **argv)
{
	struct statd d = {0};
	rts_daemon_init(&d.daemon, argc, argv, "roundtable-sandbox-statd", usage);
	/* Everything statd creates is for the service account alone; the control socket is
	 * widened to 0660 explicitly. */
	umask(0077);
	d.cfg = d.daemon.cfg;
	d.runtime_dir = d.daemon.opts.runtime_dir;
	check_state_location(d.cfg);
	ensure_dirs(d.cfg);
	check_state_location(d.cfg); /* again, now that symlinks can be resolved */
	d.state = load_state(d.cfg);
	rich_init(d.cfg, d.state);

	rts_daemon_listen(&d.daemon, RTS_SOCK_CONTROL, SOCK_STREAM, 0660, false, on_stop, &d);
	d.ev = d.daemon.event;
	int r = sd_event_add_io(d.ev, &d.listen_src, d.daemon.listen_fd, EPOLLIN, statd_control_accept, &d);
	if (r < 0)
		fatal_f("sd_event_add_io: %s", strerror(-r));
	statd_queue_attach(&d);
	statd_prechecks_init(&d);
	statd_link_init(&d);
	/* Rich containers outlive a restart: the sync after HELLO adopts them (or removes those
	 * of channels no longer rich) without waiting for a turn. */
	if (d.cfg->rich.enabled)
		(void)statd_link_start(&d);
	r = statd_control_start_sweep(&d);
	if (r < 0)
		fatal_f("sd_event_add_time: %s", strerror(-r));

	/* Start-up is over: from here on only the calls statd needs to serve. */
	rts_daemon_sandbox(&d.daemon, RTS_SANDBOX_STATD);
	rts_daemon_ready(&d.daemon, NULL);
	int status = rts_daemon_run(&d.daemon);

	statd_metrics_free(&d);
	statd_control_close_all(&d);
	stop_listening(&d);
	statd_link_free(&d);
	statd_prechecks_free(&d);
	statd_queue_free(d.queue);
	statd_state_free(d.state);
	rts_daemon_finish(&d.daemon);
	return status;
}
