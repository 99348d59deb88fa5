/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up steps every program shares (the common options, loading the config, the
 * service-account identity rules), and the one start-up skeleton of the three daemons.
 *
 * A daemon's main() is its own checks and event sources between these steps:
 *
 *   rts_daemon_init()      non-dumpable, stdin/out/err open, options, log, config and
 *                          identity (common/accounts.h), no new privileges and no
 *                          capabilities, SIGPIPE ignored
 *   rts_daemon_listen()    SIGTERM/SIGINT (and SIGCHLD when asked) blocked and watched on
 *                          a new sd-event loop; the listening socket: the one systemd
 *                          passed (validated like SSSD's activate_unix_sockets()) or one
 *                          bound at <runtime-dir>/<name> (a stale socket file is replaced;
 *                          in accounts mode runnerd.sock and brokerd.sock get an ACL entry
 *                          for their one peer account)
 *   rts_daemon_sandbox()   the seccomp filter: start-up is over
 *   rts_daemon_ready()     READY=1 and the "listening on" line
 *   rts_daemon_run()       the loop; the first SIGTERM/SIGINT sends STOPPING=1 and calls
 *                          the daemon's on_stop once, which ends the loop when its work is
 *                          done (sd_event_exit)
 *   rts_daemon_finish()    the socket closed (and removed when we bound it), the loop and
 *                          the config freed
 *
 * Every step that fails logs why and exits with status 1 (2 for bad arguments). */
#ifndef RTS_DAEMON_H
#define RTS_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "common/accounts.h"
#include "common/conf.h"
#include "common/sandbox.h"

struct rts_opts {
	const char *config_path; /* --config, default RTS_DEFAULT_CONFIG */
	const char *runtime_dir; /* --runtime-dir, default RTS_DEFAULT_RUNTIME_DIR */
	const char *launcher_socket; /* --launcher-socket, brokerd's alone (brokerd/launcher.h);
					NULL when not given */
};

/* Parse the options every program takes before its subcommand or arguments:
 * --config PATH, --runtime-dir DIR, --help, --version, and --launcher-socket PATH, which
 * only brokerd takes (the others refuse it as a usage error). usage is printed for --help (exit 0)
 * and after a bad option (exit 2). Returns the index of the first non-option argument. */
int rts_parse_options(int argc, char **argv, const char *usage, struct rts_opts *o);

/* Load the config named by o and apply rts_check_identity() for role (common/accounts.h)
 * with this process's effective ids. On any failure prints the message to the log and
 * exits with status 1 (a start-up failure). */
struct rts_config *rts_daemon_load_config(const struct rts_opts *o, enum rts_role role);

struct rts_daemon {
	const char *program; /* "roundtable-sandbox-statd": the log's ident, in messages */
	enum rts_role role;  /* from program */
	struct rts_opts opts;
	struct rts_config *cfg;
	sd_event *event;
	int listen_fd; /* -1 once closed */
	char *listen_path;
	bool activated; /* listen_fd came from systemd: never ours to remove */
	bool stopping;	/* a stop signal arrived */
	/* Called once, at the first SIGTERM or SIGINT, after STOPPING=1. */
	void (*on_stop)(struct rts_daemon *d);
	void *userdata;
};

/* Start-up's first step (see above). program is kept by pointer and names the role
 * (RTS_PROGRAM_*); usage is printed for --help and after a bad argument (no arguments
 * other than the common options). The process is made non-dumpable first of all
 * (PR_SET_DUMPABLE 0): another process of the same uid can then neither ptrace it nor
 * read its /proc/PID/mem, environ, maps or fd, and no core file holds its memory. */
void rts_daemon_init(struct rts_daemon *d, int argc, char **argv, const char *program, const char *usage);

/* The loop, the stop signals and the listening socket <runtime-dir>/sock_name of type
 * (SOCK_STREAM, SOCK_SEQPACKET), non-blocking and close-on-exec, mode applied when we bind
 * it. An activated socket must be exactly one AF_UNIX listening socket of type (else exit
 * 1); one bound elsewhere than sock_name's path gets a warning (clients will not find it).
 * sigchld: block SIGCHLD too, for sd-event child sources. on_stop: see struct rts_daemon. */
void rts_daemon_listen(struct rts_daemon *d, const char *sock_name, int type, mode_t mode, bool sigchld,
		       void (*on_stop)(struct rts_daemon *d), void *userdata);

/* rts_sandbox_apply(profile), or exit 1. */
void rts_daemon_sandbox(struct rts_daemon *d, enum rts_sandbox_profile profile);

/* READY=1 with status (may be NULL) to systemd, and "listening on ..." to the log: the
 * line tests and operators take for "serving". */
void rts_daemon_ready(struct rts_daemon *d, const char *status);

/* Run the loop. Returns the exit status: the code given to sd_event_exit(), or 1 when the
 * loop failed. */
int rts_daemon_run(struct rts_daemon *d);

/* Close the listening socket now (the daemon has removed its own source on it first), and
 * remove the socket file when we bound it. Idempotent. */
void rts_daemon_stop_listening(struct rts_daemon *d);

/* rts_daemon_stop_listening, then free the loop and the config. */
void rts_daemon_finish(struct rts_daemon *d);

#endif
