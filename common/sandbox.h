/* SPDX-License-Identifier: Apache-2.0 */
/* Process sandboxing for the daemons, in two steps like OpenSSH's ssh-sandbox.h:
 * rts_sandbox_init() right at start, rts_sandbox_apply() once start-up is done. */
#ifndef RTS_SANDBOX_H
#define RTS_SANDBOX_H

/* Which daemon a system-call allow-list is for (DESIGN.md section 2, the "may" column). */
enum rts_sandbox_profile {
	RTS_SANDBOX_STATD,   /* state file and workspaces; no children, no network */
	RTS_SANDBOX_RUNNERD, /* run dirs and broker sockets; runs the docker CLI; no network */
	RTS_SANDBOX_BROKERD, /* network; never opens a file for writing, executes nothing (its
			      * launcher, forked before the filter, starts host commands) */
};

/* Defined in a --enable-sanitizers build (tests only, never installed), where the filters
 * also allow what LeakSanitizer's check at exit needs (it ptraces the process's threads
 * from a helper). The unit tests look at it too. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_LEAK__)
#define RTS_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define RTS_SANITIZER_BUILD 1
#endif
#endif

/* Environment variable that, set to "1", turns the default action of the filter from
 * killing the process into logging the call (SCMP_ACT_LOG: the kernel's audit log, or
 * dmesg without auditd), for finding a missing system call. Never set it in production. */
#define RTS_SANDBOX_LOG_ENV "RTS_SECCOMP_LOG"

/* Set PR_SET_NO_NEW_PRIVS and drop every capability (effective, permitted, inheritable,
 * ambient; the bounding set too when we are allowed to). Returns 0 or -errno. */
int rts_sandbox_init(void);

/* Install the seccomp allow-list of profile for every thread of the process (TSYNC), once
 * start-up is over (sockets bound, config read, directories checked) and before serving.
 * A system call outside the list kills the whole process (SCMP_ACT_KILL_PROCESS; the
 * kernel logs it), except the few that are refused with an errno because libraries probe
 * them and cope (see sandbox.c). Children inherit the filter: the docker CLI that runnerd
 * runs. brokerd starts no program under it (its launcher was forked before). Requires
 * rts_sandbox_init() first (no_new_privs). Returns 0 or -errno; the caller treats a
 * failure as a start-up failure. */
int rts_sandbox_apply(enum rts_sandbox_profile profile);

#endif
