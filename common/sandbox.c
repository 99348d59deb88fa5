/* SPDX-License-Identifier: Apache-2.0 */
/* The daemons' own sandbox: no capabilities, no_new_privs, and a seccomp allow-list per
 * daemon installed once start-up is over.
 *
 * The filters are laid out like OpenSSH's sandbox-seccomp-filter.c: first the calls that
 * are refused with an errno because a library probes them and copes, then the allow-list
 * in groups with one line of reason each, and everything else kills the process
 * (SCMP_ACT_KILL_PROCESS, logged by the kernel as an audit record of type SECCOMP with the
 * call's number). The lists were built by tracing the daemons and their children (strace
 * -f -c) through the whole integration suite, then checked with RTS_SECCOMP_LOG=1, which
 * logs instead of killing. When a daemon dies of SIGSYS after a change, run it with that
 * variable, look for "type=1326" in dmesg or the audit log, and add the call to the group
 * it belongs to, with its reason.
 *
 * Children inherit the filter. runnerd's child is the docker CLI, a Go program: the
 * "Go runtime" group is there for it. brokerd has no children once its filter is in: the
 * operator's host tools and key commands are started by its launcher, forked before the
 * filter, each in a sandbox of its own (brokerd/toolbox.h), so brokerd may execute
 * nothing, open no file for writing, change nothing in the file system, and map no memory
 * that is writable and executable at once (what systemd's MemoryDenyWriteExecute= did for
 * it, which its unit can no longer set: the tools' JavaScript engines need such memory,
 * and a unit's filter reaches every process of the unit). */
#include "config.h"

#include <cap-ng.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>

#include "common/log.h"
#include "common/sandbox.h"
#include "common/util.h"

int rts_sandbox_init(void)
{
	/* Nothing we exec (docker, host tools, key commands) may gain privileges via setuid
	 * or file capabilities. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* Dropping the bounding set needs CAP_SETPCAP; a non-root service account has no
	 * capabilities to bound anyway. */
	if (capng_get_caps_process() < 0)
		return -EPERM;
	/* CAPNG_SELECT_BOTH would include the bounding set, which libcap-ng then fails (and
	 * complains) to drop without CAP_SETPCAP. With no capability at all (the service
	 * accounts) there is nothing to drop, and no capset(2) is made: statd's unit refuses
	 * @privileged calls. */
	capng_select_t what = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP) ? CAPNG_SELECT_ALL : CAPNG_SELECT_CAPS;
	if (what == CAPNG_SELECT_ALL || capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE) {
		capng_clear(what);
		if (capng_apply(what) < 0)
			return -EPERM;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

/* ---- the allow-lists, by group ---- */

/* malloc, the dynamic loader, thread stacks. */
static const char *const sys_memory[] = {"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", NULL};
/* Reading and writing descriptors we already hold (sockets, pipes, stderr). */
static const char *const sys_fd[] = {"read", "readv", "write", "writev", "pread64", "lseek", "close",
				     "fcntl", "dup", "dup3", NULL};
/* sd-event: epoll, signalfd for SIGTERM/SIGINT/SIGCHLD, timerfd, the watchdog. */
static const char *const sys_events[] = {"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
					 "epoll_pwait2",  "poll",      "ppoll",	     "signalfd4",
					 "timerfd_create", "timerfd_settime", "timerfd_gettime", "eventfd2",
					 NULL};
/* Signal dispositions and masks (libraries and spawned children set them); alternate
 * signal stacks (the sanitizer runtimes of a --enable-sanitizers build, Go). */
static const char *const sys_signals[] = {"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", NULL};
/* Clocks, when the vDSO falls back to the kernel, and sleeping. */
static const char *const sys_time[] = {"clock_gettime", "clock_getres", "gettimeofday", "time",
				       "nanosleep",	"clock_nanosleep", NULL};
/* Who we are (SO_PEERCRED checks compare with these; glibc asks at random places). */
static const char *const sys_ids[] = {"getpid",	  "gettid",    "getppid",   "getuid",	"geteuid",
				      "getgid",	  "getegid",   "getresuid", "getresgid", "getgroups",
				      "getpgrp", "getpgid",   "getsid",    NULL};
/* glibc's thread bookkeeping even in one thread, exiting, randomness for ids. */
static const char *const sys_process[] = {"futex", "set_robust_list", "rseq", "exit", "exit_group",
					  "getrandom", "sched_yield", "sched_getaffinity", NULL};
/* Daemon links, control.sock, sd_notify and the journal: local sockets we hold or dial
 * (socket() itself is allowed per address family below). */
static const char *const sys_sockets[] = {"connect",	 "accept4",	"sendmsg",     "recvmsg",
					  "sendto",	 "recvfrom",	"getsockopt",  "setsockopt",
					  "getsockname", "getpeername", "shutdown",    "socketpair",
					  NULL};
/* Looking at files and directories (opening is allowed per daemon below). */
static const char *const sys_fs_read[] = {"newfstatat", "fstat",      "stat",      "lstat",	"statx",
					  "fstatfs",	"statfs",     "readlink",  "readlinkat", "access",
					  "faccessat",	"faccessat2", "getdents64", "getcwd",	NULL};
/* uname, resource limits, memory sizing (glibc, libcurl, OpenSSL). */
static const char *const sys_misc[] = {"uname", "sysinfo", "prlimit64", "getrlimit", NULL};
/* sd_journal_send() passes a large message in a sealed memfd. */
static const char *const sys_journal[] = {"memfd_create", NULL};

/* statd: the state file (temp file, fsync, rename, dir fsync), workspace directories (and
 * restoring a workspace mode a guest changed), removing control.sock at exit; in accounts
 * mode reading and setting a workspace's ACL (libacl through /proc/self/fd: the xattr
 * calls by path) and dropping a default ACL. */
static const char *const sys_statd_files[] = {"mkdir",	  "mkdirat",   "unlink",   "unlinkat",	"rename",
					      "renameat", "renameat2", "fsync",	   "fdatasync", "chmod",
					      "fchmodat", "getxattr",  "setxattr", "removexattr", NULL};
/* runnerd: per-turn run dirs and their broker.sock (bind with umask, chmod, listen),
 * removed again when the turn ends; in accounts mode their ACL entries for the guest
 * account (fsetxattr on the dir, setxattr on the socket through /proc/self/fd). */
static const char *const sys_runnerd_files[] = {"mkdir", "mkdirat", "rmdir",	"unlink",   "unlinkat",
						"bind",	 "listen",  "umask",	"chmod",    "fchmod",
						"fchmodat", "fsetxattr", "setxattr", NULL};
/* Spawning and reaping children (posix_spawn, sd-event child sources with pidfds), killing
 * them (the docker CLI on cancel; tool process groups). clone is allowed separately. */
static const char *const sys_spawn[] = {"vfork",  "execve",	   "wait4",	       "waitid",
					"pidfd_open", "pidfd_send_signal", "kill",	       "tgkill",
					"tkill",  "setsid",	   "setpgid",	       "close_range",
					"dup2",	  "pipe",	   "pipe2",	       "chdir",
					"fchdir", NULL};
/* A freshly exec'ed program: the loader's and libc's start-up. */
static const char *const sys_exec_start[] = {"arch_prctl", "set_tid_address", NULL};
/* The Go runtime of the docker CLI (and of any Go host tool): signal stacks, thread
 * placement, its own resource-limit and timer handling. */
static const char *const sys_go_runtime[] = {"setrlimit", "mincore", "rt_sigtimedwait",
					     "rt_sigpending", "rt_sigsuspend", "timer_create",
					     "timer_settime", "timer_delete", "setitimer", "getitimer", NULL};
/* brokerd: upstream HTTPS (libcurl, its resolver thread, glibc's DNS client). */
static const char *const sys_network[] = {"sendmmsg", "recvmmsg", "select", "pselect6", NULL};
/* brokerd's memory: sys_memory without mmap and mprotect, which have rules of their own
 * (add_wx_rules()). */
static const char *const sys_brokerd_memory[] = {"brk", "munmap", "mremap", "madvise", NULL};
/* brokerd and its launcher (brokerd/launcher.h): the pipes of a host command's stdin,
 * stdout and stderr, signals to the sandbox's PID 1 through the pidfd the launcher
 * passes, reaping the launcher at exit, and abort()'s raise(). Nothing that starts a
 * program. */
static const char *const sys_brokerd_launch[] = {"pipe2", "pidfd_send_signal", "wait4", "waitid", "tgkill", "tkill",
						 NULL};

static const char *const *const statd_groups[] = {sys_memory,  sys_fd,	    sys_events, sys_signals,
						  sys_time,    sys_ids,	    sys_process, sys_sockets,
						  sys_fs_read, sys_misc,    sys_journal, sys_statd_files,
						  NULL};
static const char *const *const runnerd_groups[] = {
	sys_memory, sys_fd,	 sys_events,	     sys_signals,    sys_time,	     sys_ids,
	sys_process, sys_sockets, sys_fs_read,	     sys_misc,	     sys_journal,    sys_runnerd_files,
	sys_spawn,  sys_exec_start, sys_go_runtime, NULL};
static const char *const *const brokerd_groups[] = {
	sys_brokerd_memory, sys_fd,	 sys_events,  sys_signals, sys_time,	sys_ids,	    sys_process,
	sys_sockets,	    sys_fs_read, sys_misc,    sys_journal, sys_network, sys_brokerd_launch, NULL};

/* RTS_SANITIZER_BUILD (common/sandbox.h): what LeakSanitizer's check at exit needs. */
#ifdef RTS_SANITIZER_BUILD
static const char *const sys_sanitizer[] = {"ptrace", "getdents", "wait4", NULL};
#endif

/* brokerd and its children change nothing in the file system: these fail with EACCES (a
 * tool sees an ordinary permission error it can report) instead of killing. bind is here
 * because binding an AF_UNIX socket creates a file; brokerd's listeners are handed to it. */
static const char *const sys_brokerd_no_write[] = {
	"creat",      "mkdir",	     "mkdirat",	    "rmdir",	   "unlink",	  "unlinkat",	"rename",
	"renameat",   "renameat2",   "link",	    "linkat",	   "symlink",	  "symlinkat",	"mknod",
	"mknodat",    "chmod",	     "fchmod",	    "fchmodat",	   "chown",	  "fchown",	"fchownat",
	"lchown",     "truncate",    "ftruncate",   "fallocate",   "utime",	  "utimes",	"utimensat",
	"futimesat",  "setxattr",    "lsetxattr",   "fsetxattr",   "removexattr", "lremovexattr",
	"fremovexattr", "bind",	     NULL};

/* open flags that write, create or truncate. O_TMPFILE without its O_DIRECTORY part: the
 * bit that makes it a temporary file. */
#define OPEN_WRITE_BITS ((uint64_t)(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | (O_TMPFILE & ~O_DIRECTORY)))
/* clone() flags that make a new namespace: a user namespace would hand a compromised
 * daemon capabilities inside it. (CLONE_NEWTIME shares its bit with the exit signal in
 * clone() and only works with clone3 and unshare, which are not allowed.) */
#define CLONE_NS_BITS                                                                                            \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
		    CLONE_NEWNET))

static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names)
{
	for (const char *const *n = names; *n; n++) {
		int nr = seccomp_syscall_resolve_name(*n);
		/* A name this architecture does not have (legacy calls on newer ports). */
		if (nr == __NR_SCMP_ERROR)
			continue;
		int r = seccomp_rule_add(ctx, action, nr, 0);
		if (r < 0) {
			log_error_errno(r, "seccomp: cannot add a rule for %s: %m", *n);
			return r;
		}
	}
	return 0;
}

/* Every SCMP_An() comparison names datum_b, 0 where the operator ignores it: clang's
 * -Wmissing-field-initializers (-Wextra) refuses the compound literal libseccomp's macro
 * builds otherwise, and 0 is what the omitted field was. */
#define RULE(ctx, action, name, ...)                                                                 \
	({                                                                                           \
		int _r = seccomp_rule_add((ctx), (action), SCMP_SYS(name), __VA_ARGS__);             \
		if (_r < 0)                                                                          \
			log_error_errno(_r, "seccomp: cannot add a rule for " #name ": %m");         \
		_r;                                                                                  \
	})

/* socket(): only the address families the daemon needs; others fail with EAFNOSUPPORT so
 * that a library probing for IPv6 or netlink moves on. */
static int add_socket_rules(scmp_filter_ctx ctx, enum rts_sandbox_profile p)
{
	int r;
	if (p != RTS_SANDBOX_BROKERD) {
		/* statd and runnerd reach no network: local sockets only. */
		if ((r = RULE(ctx, SCMP_ACT_ALLOW, socket, 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0))) < 0 ||
		    (r = RULE(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), socket, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0))) < 0)
			return r;
		return 0;
	}
	/* brokerd: local, IPv4, IPv6 (upstreams), and netlink routing queries, which glibc's
	 * getaddrinfo makes to learn the host's addresses. */
	for (int f = 0; f <= AF_NETLINK; f++) {
		if (f == AF_UNIX || f == AF_INET || f == AF_INET6)
			r = RULE(ctx, SCMP_ACT_ALLOW, socket, 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)f, 0));
		else if (f == AF_NETLINK)
			r = RULE(ctx, SCMP_ACT_ALLOW, socket, 2, SCMP_A0(SCMP_CMP_EQ, (uint64_t)f, 0),
				 SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE, 0));
		else
			r = RULE(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), socket, 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)f, 0));
		if (r < 0)
			return r;
	}
	if ((r = RULE(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), socket, 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
		      SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE, 0))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), socket, 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK, 0))) < 0)
		return r;
	return 0;
}

/* ioctl(): the terminal and non-blocking queries libraries make on their descriptors. */
static int add_ioctl_rules(scmp_filter_ctx ctx)
{
	static const unsigned long ok[] = {TCGETS, TIOCGWINSZ, TIOCGPGRP, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		int r = RULE(ctx, SCMP_ACT_ALLOW, ioctl, 1, SCMP_A1(SCMP_CMP_EQ, (uint64_t)ok[i], 0));
		if (r < 0)
			return r;
	}
	return 0;
}

/* prctl(): thread names (libmicrohttpd, Go) and reading our own state; never changing
 * capabilities, dumpability or the seccomp filter. */
static int add_prctl_rules(scmp_filter_ctx ctx)
{
	static const int ok[] = {PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE, PR_GET_NO_NEW_PRIVS, PR_CAPBSET_READ,
				 PR_GET_SECCOMP, PR_SET_PDEATHSIG};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		int r = RULE(ctx, SCMP_ACT_ALLOW, prctl, 1, SCMP_A0(SCMP_CMP_EQ, (uint64_t)ok[i], 0));
		if (r < 0)
			return r;
	}
	return 0;
}

/* open()/openat() for brokerd: reading only. Anything that writes, creates or truncates
 * fails with EACCES. (arg is the flags argument: 1 for open, 2 for openat.) */
static int add_read_only_open(scmp_filter_ctx ctx, int nr, unsigned arg)
{
	static const uint64_t bits[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_TMPFILE & ~O_DIRECTORY};
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				 (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, OPEN_WRITE_BITS, 0});
	for (size_t i = 0; r == 0 && i < RTS_ARRAY_SIZE(bits); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), nr, 1,
				     (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, bits[i], bits[i]});
	if (r < 0)
		log_error_errno(r, "seccomp: cannot add the read-only open rules: %m");
	return r;
}

/* mmap() and mprotect() for brokerd: never writable and executable at once, and no
 * mapping made executable later (the rules of systemd's MemoryDenyWriteExecute=). The
 * loader maps libraries executable from the start. Refused with EPERM, as systemd does. */
static int add_wx_rules(scmp_filter_ctx ctx)
{
	const uint64_t wx = PROT_WRITE | PROT_EXEC;
	int r;
	if ((r = RULE(ctx, SCMP_ACT_ALLOW, mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, 0))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ALLOW, mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, PROT_WRITE))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ALLOW, mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, PROT_EXEC))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ERRNO(EPERM), mmap, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wx, wx))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ALLOW, mprotect, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ERRNO(EPERM), mprotect, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ERRNO(EPERM), pkey_mprotect, 0)) < 0)
		return r;
	return 0;
}

static int build(scmp_filter_ctx ctx, enum rts_sandbox_profile p)
{
	int r;
	/* -- Refused with an errno: probed by libraries that fall back. -- */

	/* glibc tries clone3 first and falls back to clone on ENOSYS; clone3 passes its flags
	 * in memory, where a filter cannot check them, clone in a register where it can. */
	if ((r = RULE(ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0)) < 0)
		return r;
	/* openat2 likewise hides its flags in a struct; callers fall back to openat. */
	if ((r = RULE(ctx, SCMP_ACT_ERRNO(ENOSYS), openat2, 0)) < 0)
		return r;
	if ((r = add_socket_rules(ctx, p)) < 0)
		return r;
	if (p == RTS_SANDBOX_BROKERD) {
		if ((r = add_names(ctx, SCMP_ACT_ERRNO(EACCES), sys_brokerd_no_write)) < 0 ||
		    (r = add_read_only_open(ctx, SCMP_SYS(openat), 2)) < 0 ||
		    (r = add_read_only_open(ctx, SCMP_SYS(open), 1)) < 0 || (r = add_wx_rules(ctx)) < 0)
			return r;
	}

	/* -- Allowed. -- */
	const char *const *const *groups = p == RTS_SANDBOX_STATD     ? statd_groups
					   : p == RTS_SANDBOX_RUNNERD ? runnerd_groups
								      : brokerd_groups;
	for (const char *const *const *g = groups; *g; g++)
		if ((r = add_names(ctx, SCMP_ACT_ALLOW, *g)) < 0)
			return r;
	if ((r = add_ioctl_rules(ctx)) < 0 || (r = add_prctl_rules(ctx)) < 0)
		return r;
	if (p != RTS_SANDBOX_BROKERD) {
		/* statd writes the state file and creates workspaces; runnerd opens files only
		 * to read them, but its docker CLI is not ours to constrain further. */
		if ((r = RULE(ctx, SCMP_ACT_ALLOW, openat, 0)) < 0 || (r = RULE(ctx, SCMP_ACT_ALLOW, open, 0)) < 0)
			return r;
	}
#ifdef RTS_SANITIZER_BUILD
	if ((r = add_names(ctx, SCMP_ACT_ALLOW, sys_sanitizer)) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ALLOW, prctl, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_PTRACER, 0))) < 0 ||
	    (r = RULE(ctx, SCMP_ACT_ALLOW, prctl, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_DUMPABLE, 0))) < 0 ||
	    (p == RTS_SANDBOX_STATD &&
	     (r = RULE(ctx, SCMP_ACT_ALLOW, clone, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_BITS, 0))) < 0))
		return r;
#endif
	if (p != RTS_SANDBOX_STATD) {
		/* Threads (and runnerd's children), but no new namespaces (fork() is clone() on
		 * x86-64). */
		if ((r = RULE(ctx, SCMP_ACT_ALLOW, clone, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_BITS, 0))) < 0)
			return r;
	}
	if (p == RTS_SANDBOX_RUNNERD) {
		if (seccomp_syscall_resolve_name("fork") != __NR_SCMP_ERROR &&
		    (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name("fork"), 0)) < 0)
			return r;
	}
	/* -- Everything else: the default action. -- */
	return 0;
}

static const char *profile_name(enum rts_sandbox_profile p)
{
	return p == RTS_SANDBOX_STATD ? "statd" : p == RTS_SANDBOX_RUNNERD ? "runnerd" : "brokerd";
}

int rts_sandbox_apply(enum rts_sandbox_profile profile)
{
	if (profile != RTS_SANDBOX_STATD && profile != RTS_SANDBOX_RUNNERD && profile != RTS_SANDBOX_BROKERD)
		return -EINVAL;
	const char *dbg = getenv(RTS_SANDBOX_LOG_ENV);
	bool log_only = dbg && strcmp(dbg, "1") == 0;
	uint32_t def = log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS;

	scmp_filter_ctx ctx = seccomp_init(def);
	if (!ctx)
		return -ENOMEM;
	int r;
	/* A call through another ABI (i386 int 0x80, x32) would bypass every rule by number. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    /* brokerd's threads start later, but make sure no thread is left unfiltered. */
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
		log_error_errno(r, "seccomp: cannot set the filter attributes: %m");
		seccomp_release(ctx);
		return r;
	}
	r = build(ctx, profile);
	if (r == 0) {
		r = seccomp_load(ctx);
		if (r < 0)
			log_error_errno(r, "seccomp: cannot load the %s filter: %m", profile_name(profile));
	}
	seccomp_release(ctx);
	if (r < 0)
		return r;
	if (log_only)
		log_warning("%s=1: system calls outside the %s allow-list are logged, not refused; never run like "
			    "this in production",
			    RTS_SANDBOX_LOG_ENV, profile_name(profile));
	return 0;
}
