/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox-launcher: brokerd's host tool launcher as a program of its own, for
 * roundtable-sandbox-launcher@.service (brokerd/launcher.h): socket-activated with
 * Accept=yes, one instance per brokerd connection, the connection on descriptor 3.
 *
 * It reads the config brokerd reads (no key: it never resolves a key source), checks the
 * identity rules of brokerd's role (it runs as the broker account, since a tool's
 * writePaths are that account's to write and tini must be signalled by brokerd), builds
 * the same toolbox (with the writePaths checked here, where tools write), refuses a peer
 * that is not the broker account, and then serves RUN until brokerd hangs up. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "brokerd/launcher.h"
#include "brokerd/toolbox.h"
#include "common/accounts.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/sandbox.h"
#include "common/sock.h"
#include "common/strictjson.h"

static const char usage[] = "Usage: roundtable-sandbox-launcher [--config PATH] [--runtime-dir DIR]\n"
			    "\n"
			    "Starts the host tools and key commands of roundtable-sandbox-brokerd in their\n"
			    "sandboxes. Run by roundtable-sandbox-launcher@.service, with brokerd's connection\n"
			    "as socket-activated descriptor 3; never started by hand.\n";

int main(int argc, char **argv)
{
	/* Before the config is read, as every daemon does (common/daemon.h). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return 1;
	struct rts_opts o;
	if (rts_parse_options(argc, argv, usage, &o) != argc || o.launcher_socket) {
		fputs(usage, stderr);
		return 2;
	}
	rts_log_init("roundtable-sandbox-launcher");
	rts_json_strict_init();
	struct rts_config *cfg = rts_daemon_load_config(&o, RTS_ROLE_BROKERD);
	rts_accounts_init(cfg);
	int r = rts_sandbox_init();
	if (r < 0) {
		log_error_errno(r, "cannot drop privileges: %m");
		return 1;
	}
	/* Exactly one connected (not listening) sequential-packet socket: Accept=yes. */
	int n = sd_listen_fds(1);
	if (n != 1 || sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 0, NULL, 0) <= 0) {
		log_error("launcher: expected brokerd's connection as the one socket-activated descriptor (a "
			  "sequential-packet socket from roundtable-sandbox-launcher.socket, Accept=yes); got %d",
			  n);
		return 1;
	}
	/* The broker account alone: rts_daemon_load_config() made sure this process runs as it
	 * (accounts.broker, or in single-account mode the one account), so the peer must be this
	 * process's own uid. The socket's mode keeps other accounts out; root is not. */
	struct ucred uc = {0};
	socklen_t len = sizeof(uc);
	if (getsockopt(SD_LISTEN_FDS_START, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
		log_error_errno(-errno, "launcher: SO_PEERCRED: %m");
		return 1;
	}
	if (uc.uid != geteuid()) {
		log_error("launcher: refused a peer running as uid %u (pid %d): only the broker account (uid %u) may "
			  "run host tools",
			  (unsigned)uc.uid, (int)uc.pid, (unsigned)geteuid());
		return 1;
	}
	char err[1024];
	struct brokerd_toolbox *tb = NULL;
	/* No $CREDENTIALS_DIRECTORY here: brokerd's credentials are not in this unit at all. */
	r = brokerd_toolbox_new(cfg, o.runtime_dir, NULL, RTS_BWRAP, RTS_TINI, true, &tb, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return 1;
	}
	log_info("launcher: serving brokerd (pid %d)", (int)uc.pid);
	brokerd_launcher_serve(tb, SD_LISTEN_FDS_START, false);
}
