/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "common/daemon.h"
#include "common/strictjson.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

int rts_parse_options(int argc, char **argv, const char *usage, struct rts_opts *o)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 'r'},
		{"launcher-socket", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	o->config_path = RTS_DEFAULT_CONFIG;
	o->runtime_dir = RTS_DEFAULT_RUNTIME_DIR;
	o->launcher_socket = NULL;
	int c;
	/* '+': stop at the first non-option, so subcommands keep their own options. */
	while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config_path = optarg;
			break;
		case 'r':
			o->runtime_dir = optarg;
			break;
		case 'l':
			o->launcher_socket = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		case 'V':
			printf("%s\n", PACKAGE_STRING);
			exit(0);
		default:
			fputs(usage, stderr);
			exit(2);
		}
	}
	return optind;
}

struct rts_config *rts_daemon_load_config(const struct rts_opts *o, enum rts_role role)
{
	char err[1024];
	struct rts_config *c = rts_config_load(o->config_path, err, sizeof(err));
	if (!c) {
		log_error("%s", err);
		exit(1);
	}
	if (rts_check_identity(c, role, geteuid(), getegid(), err, sizeof(err)) < 0) {
		log_error("%s", err);
		rts_config_free(c);
		exit(1);
	}
	return c;
}

/* ---- the daemon skeleton ---- */

/* Open /dev/null on any of fds 0-2 that is closed, so a socket or a child's pipe never
 * lands there (runnerd dup2()s the docker CLI's pipes onto 0-2). */
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

void rts_daemon_init(struct rts_daemon *d, int argc, char **argv, const char *program, const char *usage)
{
	/* Before anything is read into memory (the config, a key, a guest's text): from here
	 * on /proc/self belongs to root and ptrace needs CAP_SYS_PTRACE, so a process of the
	 * same uid (a guest escaped into it in single-account mode) cannot read us. execve()
	 * resets it for the programs we start. No filter is installed yet. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		exit(1);
	ensure_std_fds();
	*d = (struct rts_daemon){.program = program, .role = rts_role_of(program), .listen_fd = -1};
	int idx = rts_parse_options(argc, argv, usage, &d->opts);
	if (d->opts.launcher_socket && d->role != RTS_ROLE_BROKERD) {
		/* Named, as the CLI does: an option the daemon knows is not simply unknown. */
		fprintf(stderr, "%s: error: --launcher-socket is brokerd's option\n", program);
		fputs(usage, stderr);
		exit(2);
	}
	if (idx != argc) {
		fputs(usage, stderr);
		exit(2);
	}
	rts_log_init(program);
	/* jansson's hash seed, before any thread and before the seccomp filter (strictjson.h). */
	rts_json_strict_init();
	d->cfg = rts_daemon_load_config(&d->opts, d->role);
	rts_accounts_init(d->cfg);
	int r = rts_sandbox_init();
	if (r < 0) {
		log_error_errno(r, "cannot drop privileges: %m");
		exit(1);
	}
	/* A write to a peer that hung up must fail with EPIPE, not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct rts_daemon *d = userdata;
	if (d->stopping)
		return 0;
	d->stopping = true;
	log_info("received %s, stopping", strsignal((int)si->ssi_signo));
	sd_notify(0, "STOPPING=1");
	d->on_stop(d);
	return 0;
}

static const char *type_name(int type)
{
	return type == SOCK_STREAM ? "stream" : type == SOCK_SEQPACKET ? "sequential-packet" : "other";
}

/* Clients find the daemon by --runtime-dir; a unit listening elsewhere works but is likely a
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

/* The socket systemd passed, checked like SSSD's activate_unix_sockets(): exactly one, an
 * AF_UNIX listening socket of the right type. Returns the fd, 0 when none was passed, or
 * exits. */
static int activated_socket(struct rts_daemon *d, int type)
{
	int n = sd_listen_fds(1);
	if (n == 0)
		return 0;
	if (n < 0) {
		log_error_errno(n, "cannot listen: the sockets passed by systemd are unusable: %m");
		exit(1);
	}
	if (n > 1) {
		log_error("cannot listen: systemd passed %d sockets, expected one (check the .socket unit)", n);
		exit(1);
	}
	int fd = SD_LISTEN_FDS_START;
	int r = sd_is_socket_unix(fd, type, 1, NULL, 0);
	if (r <= 0) {
		log_error_errno(r < 0 ? r : -EINVAL,
				"cannot listen on the socket passed by systemd: it is not a listening AF_UNIX %s "
				"socket (check the .socket unit): %m",
				type_name(type));
		exit(1);
	}
	r = rts_fd_set_nonblock(fd, true);
	if (r >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		r = -errno;
	if (r < 0) {
		log_error_errno(r, "cannot listen on the socket passed by systemd: %m");
		exit(1);
	}
	return fd;
}

void rts_daemon_listen(struct rts_daemon *d, const char *sock_name, int type, mode_t mode, bool sigchld,
		       void (*on_stop)(struct rts_daemon *d), void *userdata)
{
	d->on_stop = on_stop;
	d->userdata = userdata;
	/* Blocked before any thread exists, so every thread inherits the mask and sd-event's
	 * signalfd is the only receiver. */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	if (sigchld)
		sigaddset(&ss, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
		fatal_f("sigprocmask: %m");
	int r = sd_event_default(&d->event);
	if (r < 0)
		fatal_f("cannot create the event loop: %s", strerror(-r));
	(void)sd_event_set_watchdog(d->event, true);
	if ((r = sd_event_add_signal(d->event, NULL, SIGTERM, on_stop_signal, d)) < 0 ||
	    (r = sd_event_add_signal(d->event, NULL, SIGINT, on_stop_signal, d)) < 0)
		fatal_f("cannot watch signals: %s", strerror(-r));

	d->listen_path = rts_runtime_path(d->opts.runtime_dir, sock_name);
	int fd = activated_socket(d, type);
	if (fd > 0) {
		d->activated = true;
		warn_activated_path(fd, d->listen_path);
	} else {
		uid_t peer;
		r = rts_accounts_listen_peer(d->role, &peer);
		if (r < 0) {
			/* Accounts mode, runnerd: statd's account is the state directory's owner. */
			cleanup_free char *copy = rts_xstrdup(d->cfg->state_file);
			const char *dir = dirname(copy);
			if (r == -EPERM)
				log_error("cannot tell statd's account, whom %s must let in: %s, the state file's "
					  "directory, must be a directory of the service account (not root's, nor the "
					  "broker's, runner's or guest's)",
					  d->listen_path, dir);
			else
				log_error_errno(r, "cannot tell statd's account, whom %s must let in: it is the owner of %s, "
						   "the state file's directory (start statd first, or create it with "
						   "install -d -o SERVICE-ACCOUNT -m 0700 %s): %m",
						d->listen_path, dir, dir);
			exit(1);
		}
		fd = rts_listen_unix_for(d->listen_path, type, mode, peer);
		if (fd == -EADDRINUSE) {
			log_error("%s: another %s is answering there; stop it first", d->listen_path, d->program);
			exit(1);
		}
		if (fd < 0) {
			log_error_errno(fd, "cannot listen on %s (does the runtime directory %s exist and belong to this "
					    "account?): %m",
					d->listen_path, d->opts.runtime_dir);
			exit(1);
		}
	}
	d->listen_fd = fd;
}

void rts_daemon_sandbox(struct rts_daemon *d, enum rts_sandbox_profile profile)
{
	int r = rts_sandbox_apply(profile);
	if (r < 0) {
		log_error_errno(r, "cannot install the seccomp filter: %m");
		exit(1);
	}
}

void rts_daemon_ready(struct rts_daemon *d, const char *status)
{
	if (d->activated)
		log_info("listening on the socket passed by systemd (socket activation)");
	else
		log_info("listening on %s", d->listen_path);
	cleanup_free char *msg = rts_xasprintf("READY=1%s%s", status ? "\nSTATUS=" : "", status ? status : "");
	sd_notify(0, msg);
}

int rts_daemon_run(struct rts_daemon *d)
{
	int r = sd_event_loop(d->event);
	if (r < 0) {
		log_error_errno(r, "event loop failed: %m");
		return 1;
	}
	return r;
}

void rts_daemon_stop_listening(struct rts_daemon *d)
{
	if (d->listen_fd < 0)
		return;
	close(d->listen_fd);
	d->listen_fd = -1;
	/* A socket we bound ourselves is ours to remove; an activated one is systemd's. Under
	 * brokerd's filter this fails, and the next start replaces the file. */
	if (!d->activated)
		unlink(d->listen_path);
}

void rts_daemon_finish(struct rts_daemon *d)
{
	rts_daemon_stop_listening(d);
	free(d->listen_path);
	d->listen_path = NULL;
	d->event = sd_event_unref(d->event);
	rts_config_free(d->cfg);
	d->cfg = NULL;
}
