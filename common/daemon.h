/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up steps every program shares: the common options, loading the config, and the
 * service-account identity rules. */
#ifndef RTS_DAEMON_H
#define RTS_DAEMON_H

#include <stddef.h>

#include "common/conf.h"

struct rts_opts {
	const char *config_path; /* --config, default RTS_DEFAULT_CONFIG */
	const char *runtime_dir; /* --runtime-dir, default RTS_DEFAULT_RUNTIME_DIR */
};

/* Parse the options every program takes before its subcommand or arguments:
 * --config PATH, --runtime-dir DIR, --help, --version. usage is printed for --help (exit 0)
 * and after a bad option (exit 2). Returns the index of the first non-option argument. */
int rts_parse_options(int argc, char **argv, const char *usage, struct rts_opts *o);

/* The service-account rules (seed: root workers are refused; uid/gid, when configured, must
 * match the host process): 0 when the effective uid is not root and equals the config's uid
 * (and the gid the config's gid) where those are set, else -EPERM with a message in err. */
int rts_check_identity(const struct rts_config *c, char *err, size_t errlen);

/* Load the config named by o and apply rts_check_identity. On any failure prints the
 * message to the log and exits with status 1 (a start-up failure). */
struct rts_config *rts_daemon_load_config(const struct rts_opts *o);

#endif
