/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox doctor: checks an installation and says how to fix what is wrong
 * (DESIGN.md section 5 "Admin CLI", roundtable-sandbox(1)). */
#ifndef CLI_DOCTOR_H
#define CLI_DOCTOR_H

#include "common/daemon.h"

/* doctor [--offline]. argv[0] is "doctor". Prints one line per check on stdout,
 *   "ok: CHECK: what was found"
 *   "warn: CHECK: a risk; fix: what to do"       (does not fail the run)
 *   "FAIL: CHECK: the problem; fix: what to do"
 * then "summary: N ok, N warnings, N failed". --offline skips the checks that talk to
 * Docker and to the daemons' sockets. Never prints a credential or file contents.
 * Returns the exit status: 0 when nothing failed, 1 when a check failed, 2 for a usage
 * error. */
int cli_doctor(const struct rts_opts *o, int argc, char **argv);

#endif
