/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "brokerd/exec.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/util.h"

/* Bytes of a command's stderr kept for its one log line. */
#define STDERR_KEEP 200u

/* Host commands see no part of brokerd's environment (which may hold a credential for an
 * {"env"} key source). */
static char *const exec_env[] = {"PATH=/usr/bin:/bin", NULL};

static bool exec_cancelled(void *arg)
{
	return brokerd_cancel_closing(arg);
}

static void log_stderr(const struct brokerd_exec *e, const char *err, size_t len, int exit_status)
{
	char line[STDERR_KEEP + 1];
	rts_spawn_first_line(err, len, line, sizeof(line));
	if (line[0] == '\0')
		return;
	/* The host log only (never the worker), sanitised: a tool cannot forge log lines or
	 * terminal escapes. */
	rts_log_turn(exit_status == 0 ? LOG_DEBUG : LOG_WARNING, e->turn_id, NULL, NULL, 0, "%s stderr: %s",
		     e->stderr_label, line);
}

int brokerd_exec_run(const struct brokerd_exec *e, struct brokerd_exec_result *r)
{
	*r = (struct brokerd_exec_result){.exit_status = -1};
	/* The turn closing and the caller hanging up are both in the predicate, so either
	 * one stops the command before it starts, too; the descriptors wake the wait. */
	struct rts_cancel cancel = {
		.deadline_ms = e->cancel.deadline_ms,
		.wake_fd = e->cancel.wake_fd,
		.hangup_fd = e->cancel.has_client ? e->cancel.client_fd : -1,
		.cancelled = exec_cancelled,
		.arg = (void *)&e->cancel,
	};
	/* A deadline of 0 has passed already; for rts_cancel it would mean none. */
	if (cancel.deadline_ms == 0)
		return brokerd_cancel_closing(&e->cancel) ? -ECANCELED : -ETIMEDOUT;
	const struct rts_spawn s = {
		.argv = e->argv,
		.envp = exec_env,
		.cwd = "/",
		.new_session = true,
		.kill_group = true,
		.in = RTS_STDIO_PIPE,
		.input = e->input,
		.input_len = e->input_len,
		.out = RTS_STDIO_PIPE,
		.out_max = e->max_output,
		/* Read and dropped without a label: a credential helper's diagnostics may quote
		 * the credential. (Not /dev/null: brokerd's filter lets nobody open a file for
		 * writing, the child before its exec included.) */
		.err = RTS_STDIO_PIPE,
		.err_max = e->stderr_label ? STDERR_KEEP : 0,
	};
	struct rts_spawn_result res;
	int ret = rts_spawn_run(&s, &cancel, BROKERD_KILL_GRACE_MS, &res);
	if (e->stderr_label && res.err)
		log_stderr(e, res.err, res.err_len, ret == 0 && res.exited ? res.status : -1);
	if (ret == 0) {
		r->exit_status = res.exited ? res.status : -1;
		r->output = steal_pointer(&res.out);
		r->len = res.out_len;
	}
	rts_spawn_result_release(&res);
	return ret;
}
