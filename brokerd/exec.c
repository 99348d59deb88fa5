/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "brokerd/exec.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/util.h"

/* Bytes of a command's stderr kept for its one log line. */
#define STDERR_KEEP 200u

static struct brokerd_launcher *launcher;

void brokerd_exec_init(struct brokerd_launcher *l)
{
	launcher = l;
}

/* Which command of the launcher's config e names. */
static int run_of(const struct brokerd_exec *e, enum brokerd_run_kind *kind, uint32_t *index)
{
	const struct rts_config *cfg = brokerd_launcher_toolbox(launcher)->cfg;
	if (e->tool && !e->key && e->tool >= cfg->tools && e->tool < cfg->tools + cfg->n_tools) {
		*kind = e->probe ? BROKERD_RUN_PROBE_TOOL : BROKERD_RUN_TOOL;
		*index = (uint32_t)(e->tool - cfg->tools);
		return 0;
	}
	if (e->hook && !e->tool && !e->key) {
		for (uint32_t h = 0; h < BROKERD_HOOKS; h++)
			if (e->hook == brokerd_hook_command(cfg, (enum brokerd_hook)h)) {
				*kind = e->probe ? BROKERD_RUN_PROBE_HOOK : BROKERD_RUN_HOOK;
				*index = e->probe ? 0 : h; /* one sandbox for every hook */
				return 0;
			}
		return -EINVAL;
	}
	if (!e->key || e->tool || e->hook)
		return -EINVAL;
	*kind = e->probe ? BROKERD_RUN_PROBE_KEY : BROKERD_RUN_KEY_COMMAND;
	/* Numbered as rts_config_key_source() numbers key sources (brokerd/toolbox.h). */
	bool found = false;
	*index = 0;
	for (size_t i = 0; i < rts_config_key_sources(cfg) && !found; i++)
		if (e->key == rts_config_key_source(cfg, i, NULL, 0)) {
			found = true;
			*index = (uint32_t)i;
		}
	if (!found)
		return -EINVAL;
	if (e->probe)
		*index = 0; /* one sandbox for every key command */
	return 0;
}

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
	if (!launcher)
		return -ENOTCONN;
	struct brokerd_launch lc = {.launcher = launcher, .sock = -1};
	int rc = run_of(e, &lc.kind, &lc.index);
	if (rc < 0)
		return rc;
	/* The environment (PATH=/usr/bin:/bin), the working directory, the session and the
	 * descriptors are the launcher's and the sandbox's (brokerd/toolbox.h): nothing of
	 * brokerd's environment, which may hold an {"env"} credential, reaches a command. */
	const struct rts_spawn s = {
		.start = brokerd_launch_start,
		.reap = brokerd_launch_reap,
		.hook_arg = &lc,
		.in = RTS_STDIO_PIPE,
		.input = e->input,
		.input_len = e->input_len,
		.out = RTS_STDIO_PIPE,
		.out_max = e->max_output,
		/* Read and dropped without a label: a credential helper's diagnostics may quote
		 * the credential. */
		.err = RTS_STDIO_PIPE,
		.err_max = e->stderr_label ? STDERR_KEEP : 0,
	};
	struct rts_spawn_result res;
	int ret = rts_spawn_run(&s, &cancel, BROKERD_KILL_GRACE_MS, &res);
	brokerd_launch_release(&lc);
	if (e->stderr_label && res.err)
		log_stderr(e, res.err, res.err_len, ret == 0 && res.exited ? res.status : -1);
	if (ret == 0) {
		/* bwrap passes the command's end on as an exit status (128 + n for signal n). */
		r->exit_status = res.exited ? res.status : -1;
		r->output = steal_pointer(&res.out);
		r->len = res.out_len;
	}
	rts_spawn_result_release(&res);
	return ret;
}
