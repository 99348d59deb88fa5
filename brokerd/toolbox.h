/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox each host tool and key command runs in (DESIGN.md section 8.1: host tools
 * "run where they can do real work ... but can never read a configured key source or
 * brokerd's memory").
 *
 * The sandbox is bubblewrap's (Debian's bubblewrap), not namespace code of our own:
 * bwrap is small, setuid-free here, reviewed for exactly this job, and its options say
 * what the sandbox is in one argument list that the unit tests read. Each run gets:
 *
 *   - its own user, PID, IPC, UTS and cgroup namespaces and no capabilities, and it may
 *     create no further user namespace (--disable-userns): brokerd and every other
 *     process of the host are out of sight (a fresh /proc shows the sandbox alone), so
 *     it can neither read their memory nor signal them;
 *   - the host's network namespace: tools call other services (DESIGN.md 8.1, "network
 *     allowed");
 *   - the host's file system read-only (--ro-bind / /), a fresh /dev (where /dev/null
 *     can be written), and, for a tool, its writePaths bound read-write;
 *   - hidden (an empty, unreadable, read-only tmpfs over each): the suite's own
 *     directories, from every run (brokerd's runtime directory with the daemons'
 *     sockets and control.sock, runRoot with every turn's broker socket, workspaceRoot,
 *     the state file's directory); from tools also every key source: the directory of
 *     each {"file"} key as the config names it and the one it really lies in (every
 *     link resolved, at start and again at each run), $CREDENTIALS_DIRECTORY, and the
 *     config file's directory (it names the key sources). Key commands do see the key
 *     sources: the key a command prints must come from somewhere it can read;
 *   - no seccomp filter: a tool is trusted operator code, and interpreters (python3,
 *     node, sh) and the programs they start make system calls no allow-list of ours
 *     could predict. What keeps a tool that guest input has subverted in check is the
 *     above: namespaces, no capabilities, no_new_privs (bwrap sets it), a read-only
 *     host;
 *   - tini (Debian's tini) as the sandbox's PID 1, which starts the command in a
 *     process group of its own and passes SIGTERM on to that whole group (-g):
 *     brokerd's "SIGTERM, then SIGKILL after the grace period" reaches the tool and
 *     what it started; SIGKILL to tini ends the PID namespace, and with it every
 *     process in it (DESIGN.md section 5, "SIGTERM then SIGKILL on cancel").
 *
 * The environment is brokerd's minimal one, PATH=/usr/bin:/bin (and PWD=/, which bwrap
 * always sets), the working directory /. The sandbox dies with the launcher that started
 * it (--die-with-parent), which dies with brokerd (brokerd/launcher.h). */
#ifndef BROKERD_TOOLBOX_H
#define BROKERD_TOOLBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"

/* What a run is. Key commands are numbered as the config lists key sources: 0 is apiKey,
 * 1 + i is mcp[i].apiKey (later key sources go after these). */
enum brokerd_run_kind {
	BROKERD_RUN_TOOL = 1,	     /* tools[index].command in that tool's sandbox */
	BROKERD_RUN_KEY_COMMAND = 2, /* key source index's command in the key commands' sandbox */
	BROKERD_RUN_PROBE_TOOL = 3,  /* "tini --version" in tools[index]'s sandbox (start-up) */
	BROKERD_RUN_PROBE_KEY = 4,   /* "tini --version" in the key commands' sandbox (index 0) */
	BROKERD_RUN_HOOK = 5,	     /* a rich host hook (enum brokerd_hook) in the hooks' sandbox */
	BROKERD_RUN_PROBE_HOOK = 6,  /* "tini --version" in the hooks' sandbox (index 0; start-up) */
};

/* The rich mode's host hooks (rts_rich_conf), as BROKERD_RUN_HOOK's index. They run in a
 * sandbox like a tool's without writePaths: key sources hidden, the host read-only. */
enum brokerd_hook {
	BROKERD_HOOK_EFFORT_JUDGE = 0, /* rich.effort.judge */
	BROKERD_HOOK_MEMORY = 1,       /* rich.memory.command */
	BROKERD_HOOK_COMPACTION = 2,   /* rich.compaction.command */
	BROKERD_HOOKS = 3,
};

/* The sandbox of every run of one config. */
struct brokerd_toolbox {
	const struct rts_config *cfg; /* borrowed; outlives the toolbox */
	char *bwrap, *tini;	      /* absolute paths */
	char **suite_dirs;	      /* hidden from every run (NULL-terminated) */
	char **key_dirs;	      /* also hidden from tools (NULL-terminated) */
	char **key_files;	      /* each {"file"} key: its real directory hidden too, per run */
	char **probe_argv;	      /* {tini, "--version"} */
};

/* The hook's argv in cfg, or NULL when it is not configured. */
char *const *brokerd_hook_command(const struct rts_config *cfg, enum brokerd_hook h);

/* True when cfg runs any host command (a tool, a rich hook or a key command): only then is a
 * launcher started, and only then do the rules of brokerd_toolbox_new() apply. */
bool brokerd_toolbox_needed(const struct rts_config *cfg);

/* Build the toolbox of cfg for a brokerd started with runtime_dir (its --runtime-dir) and
 * credentials_dir ($CREDENTIALS_DIRECTORY, or NULL), running bwrap and tini (absolute
 * paths: RTS_BWRAP and RTS_TINI outside tests). writable: check that this process may
 * write each writePath (false in a brokerd that connects to a launcher unit: the
 * launcher, whose unit is where tools write, checks it). Checks what start-up refuses:
 *   - bwrap and tini are executable;
 *   - each directory to hide is neither / nor a top-level directory nor under /usr, /proc,
 *     /sys or /dev (a sandbox without it could not run programs): a key file needs a
 *     directory of its own;
 *   - no absolute path in a tool's command lies in a directory hidden from tools;
 *   - each writePath is an existing directory, named without symbolic links, that this
 *     process may write (which also catches a read-only mount, systemd's
 *     ProtectSystem=strict without ReadWritePaths=), and neither holds nor lies in a
 *     hidden directory; may write it only when writable is set.
 * Returns 0 with *out (free with brokerd_toolbox_free()), or -EINVAL (or -errno) with a
 * one-line message in err naming the config key and the fix. */
int brokerd_toolbox_new(const struct rts_config *cfg, const char *runtime_dir, const char *credentials_dir,
			const char *bwrap, const char *tini, bool writable, struct brokerd_toolbox **out, char *err,
			size_t errlen);

void brokerd_toolbox_free(struct brokerd_toolbox *tb);

/* The command a run executes inside its sandbox: tools[index].command, the key source's
 * argv, the rich hook's argv, or {tini, "--version"} for a probe. Borrowed from the config. NULL for a kind or
 * index the config does not have (a key source that is not a command included). */
char *const *brokerd_toolbox_command(const struct brokerd_toolbox *tb, enum brokerd_run_kind kind, uint32_t index);

/* The whole argv of bwrap for one run, with bwrap's --info-fd on info_fd; the hidden
 * directories that exist now (symbolic links resolved), the writePaths, then "--", tini,
 * "-g", "--" and the command. Returns 0 with *argv (free with rts_strv_free()), or -EINVAL
 * for a kind or index the config does not have. */
int brokerd_toolbox_argv(const struct brokerd_toolbox *tb, enum brokerd_run_kind kind, uint32_t index, int info_fd,
			 char ***argv);

#endif
