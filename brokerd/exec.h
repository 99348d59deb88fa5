/* SPDX-License-Identifier: Apache-2.0 */
/* Running host commands (tools, apiKey commands) for a turn.
 *
 * Each run (common/spawn.h) gets a fresh session and process group (setsid), the working
 * directory /, the environment PATH=/usr/bin:/bin and nothing else, default signal
 * dispositions and an empty signal mask, and no file descriptor beyond its stdin, stdout
 * and stderr. When the deadline passes or the turn closes, the whole process group gets
 * SIGTERM and, after BROKERD_KILL_GRACE_MS, SIGKILL (seed: host tools obey cancellation;
 * DESIGN.md section 5: "SIGTERM then SIGKILL on cancel"). Whatever the group left running
 * when its leader exits is killed too, so no process outlives its call. */
#ifndef BROKERD_EXEC_H
#define BROKERD_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/brokerd.h"

struct brokerd_exec {
	char *const *argv;	   /* argv[0] is an absolute path (the config checks it) */
	const char *input;	   /* written to stdin, then stdin is closed */
	size_t input_len;
	size_t max_output;	   /* stdout bytes; more is an error */
	struct brokerd_cancel cancel; /* deadline and turn closing */
	const char *stderr_label;  /* NULL: stderr is discarded; else its first line (sanitised,
				      at most 200 bytes) is logged under this label */
	const char *turn_id;	   /* for that log line */
};

struct brokerd_exec_result {
	char *output;	 /* stdout, NUL-terminated; caller frees */
	size_t len;
	int exit_status; /* exit code, or -1 when a signal ended the process */
};

/* Run e->argv to completion. Returns 0 when the process exited by itself (look at
 * r->exit_status), -ETIMEDOUT when the deadline stopped it, -ECANCELED when the turn
 * closed, -EFBIG when stdout went past max_output (the process is stopped), or -errno
 * when it could not be started. r->output is set only on 0. */
int brokerd_exec_run(const struct brokerd_exec *e, struct brokerd_exec_result *r);

#endif
