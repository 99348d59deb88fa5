/* SPDX-License-Identifier: Apache-2.0 */
/* Running host commands (tools, apiKey commands) for a turn.
 *
 * Every command runs in a sandbox of its own (brokerd/toolbox.h), started by brokerd's
 * launcher (brokerd/launcher.h); brokerd itself starts no program. The command gets the
 * environment PATH=/usr/bin:/bin and nothing else, the working directory /, no
 * descriptor beyond its stdin, stdout and stderr (pipes to brokerd), and a process group
 * of its own under the sandbox's PID 1. When the deadline passes or the turn closes, that
 * PID 1 gets SIGTERM, which it passes on to the command's whole process group, and after
 * BROKERD_KILL_GRACE_MS SIGKILL, which ends every process of the sandbox (seed: host tools
 * obey cancellation; DESIGN.md section 5: "SIGTERM then SIGKILL on cancel"). Whatever the
 * command left running when it exits ends with it, so no process outlives its call. */
#ifndef BROKERD_EXEC_H
#define BROKERD_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/launcher.h"

struct brokerd_exec {
	/* What runs: exactly one of a host tool of the config the launcher was started
	 * with, a key source of it whose kind is RTS_KEY_COMMAND, or a rich hook. With probe,
	 * {tini, "--version"} runs instead, in that tool's, the key commands' or the hooks'
	 * sandbox (start-up's check that the sandbox comes up). */
	const struct rts_tool *tool;
	const struct rts_key_source *key;
	char *const *hook; /* or a rich hook's argv of that config (brokerd_hook_command()) */
	bool probe;
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
	int exit_status; /* the command's exit code (128 + n when signal n ended it, as the
			    sandbox's PID 1 reports it), or -1 when it could not be learnt */
};

/* The launcher every run goes through; brokerd sets it once at start-up, before any
 * thread (NULL: no command can run, brokerd_exec_run() answers -ENOTCONN). */
void brokerd_exec_init(struct brokerd_launcher *launcher);

/* Run e's command to completion. Returns 0 when the process exited by itself (look at
 * r->exit_status), -ETIMEDOUT when the deadline stopped it, -ECANCELED when the turn
 * closed, -EFBIG when stdout went past max_output (the process is stopped), -EINVAL when
 * e names no command of the launcher's config, or -errno when it could not be started
 * (-ENOENT: the program is missing; -ENOTCONN: no launcher). r->output is set only on
 * 0. */
int brokerd_exec_run(const struct brokerd_exec *e, struct brokerd_exec_result *r);

#endif
