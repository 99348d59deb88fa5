/* SPDX-License-Identifier: Apache-2.0 */
/* brokerd's launcher: the process that starts host tools and key commands in their
 * sandboxes (brokerd/toolbox.h), and the protocol brokerd speaks with it.
 *
 * Why a process of its own. brokerd holds the credentials and runs under a seccomp filter
 * that lets it open no file for writing, create no namespace and execute nothing; its
 * children would inherit all of that, and their memory would sit next to brokerd's in the
 * same process tree. The launcher keeps only the config (which holds no secret but the
 * names of {"env"} variables; their values are wiped from its copy of the environment),
 * makes itself non-dumpable and starts each run with bubblewrap, whose sandbox dies with
 * the launcher (--die-with-parent). It comes one of two ways:
 *
 *   - forked (brokerd started by hand, the default): brokerd forks it at start-up, before
 *     it reads any key, starts a thread or installs its filter; it dies with brokerd
 *     (PR_SET_PDEATHSIG);
 *   - a unit of its own (brokerd --launcher-socket PATH, the packaged units):
 *     roundtable-sandbox-launcher.socket (Accept=yes) starts one
 *     roundtable-sandbox-launcher@.service per connection, which runs
 *     roundtable-sandbox-launcher (brokerd/launcher-main.c) with the connection on
 *     descriptor 3. Only that unit may make namespaces and mounts and map writable
 *     executable memory; brokerd's unit forbids all of it to brokerd. The launcher runs as
 *     the broker account and serves exactly that account (SO_PEERCRED); brokerd connects
 *     only to a socket made by root (systemd) or its own account. The launcher unit
 *     cannot see brokerd's credentials (/run/credentials is inaccessible there), and
 *     pidfds cross the units in SCM_RIGHTS: tini runs as the broker account (in a user
 *     namespace of its own, mapped to it), so brokerd, the same account in an ancestor
 *     PID namespace, may signal it through the pidfd (pidfd_send_signal(2)'s kill(2)
 *     permission rule) and no message for signals is needed.
 *
 * The protocol (BROKERD_LAUNCH_VERSION; one fixed-size message per SOCK_SEQPACKET
 * packet, descriptors in SCM_RIGHTS). brokerd asks on the launcher socket, the launcher
 * answers on a socket of that run, so brokerd's threads never share an answer stream:
 *
 *   RUN      brokerd -> launcher   kind, index (brokerd/toolbox.h: which configured
 *                                  command, never an argv: brokerd cannot make the
 *                                  launcher run anything the config does not name) and
 *                                  four descriptors: the run socket, then the child's
 *                                  ends of its stdin, stdout and stderr pipes
 *   STARTED  launcher -> brokerd   one descriptor: a pidfd of the sandbox's PID 1 (tini),
 *                                  which brokerd polls for the end and signals (SIGTERM
 *                                  is passed on to the command's process group, SIGKILL
 *                                  ends the sandbox)
 *   FAILED   launcher -> brokerd   value: -errno, nothing was started (-ENOENT: the
 *                                  program is missing; -EINVAL: no such command; -EBUSY:
 *                                  too many runs)
 *   EXITED   launcher -> brokerd   value: bwrap's wait status (the command's exit code, or
 *                                  128 + the signal that ended it), after STARTED
 *
 * A sandbox that fails to come up still answers STARTED (then with a pidfd of bwrap
 * itself) and EXITED: bwrap's message is on the command's stderr, where brokerd logs a
 * tool's first line. brokerd closing a run socket means "give up": the launcher kills
 * that sandbox. brokerd closing the launcher socket, or exiting, ends the launcher and
 * every sandbox. The launcher drops a message it cannot decode and ends (brokerd is its
 * only peer, and one that sends garbage is broken: brokerd then stops too, see
 * brokerd_launcher_fd()). */
#ifndef BROKERD_LAUNCHER_H
#define BROKERD_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brokerd/toolbox.h"

/* Bump when a message or its meaning changes (a forked launcher is brokerd itself, and the
 * launcher unit's program comes in the same package, so both ends agree; the number is
 * checked anyway, as every link's is). */
#define BROKERD_LAUNCH_VERSION 1u

/* Requests are even, answers odd. */
enum brokerd_launch_type {
	BROKERD_LAUNCH_RUN = 2,
	BROKERD_LAUNCH_STARTED = 3,
	BROKERD_LAUNCH_FAILED = 5,
	BROKERD_LAUNCH_EXITED = 7,
};

/* Descriptors a message carries: RUN 4, STARTED 1, the others none. */
#define BROKERD_LAUNCH_FDS_MAX 4u

/* Runs the launcher keeps at once (brokerd's 64 turns make one call each at a time, plus
 * key commands); RUN beyond it is answered FAILED -EBUSY. */
#define BROKERD_LAUNCH_RUNS_MAX 128u

/* How long brokerd waits for STARTED (bwrap sets a sandbox up in milliseconds; only a
 * launcher that no longer answers takes this long), and for EXITED once the sandbox's
 * PID 1 is gone. */
#define BROKERD_LAUNCH_START_MS 10000u
#define BROKERD_LAUNCH_REAP_MS 5000u

/* Every message, on the wire as these 20 bytes in host byte order (both ends are one
 * program on one host). Fields a type does not use are 0. */
struct brokerd_launch_msg {
	uint32_t version; /* BROKERD_LAUNCH_VERSION */
	uint32_t type;	  /* enum brokerd_launch_type */
	uint32_t kind;	  /* RUN: enum brokerd_run_kind */
	uint32_t index;	  /* RUN: which command of that kind */
	int32_t value;	  /* FAILED: -errno (-4095..-1); EXITED: a wait status */
};

/* Check a received message: len bytes of buf, nfds descriptors came with it. 0 with *m
 * filled in, or -EBADMSG for a wrong size, version, type, descriptor count, or a field
 * that must be 0 and is not, or a FAILED value that is not a negative errno. Pure (the
 * fuzz target's entry point). */
int brokerd_launch_decode(const void *buf, size_t len, size_t nfds, struct brokerd_launch_msg *m);

/* Send m with its descriptors (borrowed) on sock, without blocking. 0, -EAGAIN when the
 * peer's queue is full, or -errno. */
int brokerd_launch_send(int sock, const struct brokerd_launch_msg *m, const int *fds, size_t nfds);

/* Receive one message from sock without blocking: 0 with *m and fds[0..*nfds) (each
 * close-on-exec, the caller's), -EAGAIN when none is there, -ECONNRESET at the end of the
 * stream, -EBADMSG for a message brokerd_launch_decode() refuses or one whose control
 * data was cut or is not SCM_RIGHTS (whatever descriptors came are closed), or -errno. */
int brokerd_launch_recv(int sock, struct brokerd_launch_msg *m, int fds[BROKERD_LAUNCH_FDS_MAX], size_t *nfds);

/* The "child-pid" bwrap writes to its --info-fd, from the first len bytes of what it
 * wrote: 0 with *pid, -EAGAIN when the JSON object is not complete yet, -EBADMSG when it
 * is not an object with a positive integer "child-pid". Pure. */
int brokerd_launch_parse_info(const char *buf, size_t len, pid_t *pid);

/* ---- brokerd's side ---- */

struct brokerd_launcher;

/* Fork the launcher for tb (which it keeps using; tb must outlive the launcher in
 * brokerd, and is the launcher's own copy in the child). Call before any thread exists
 * and before the seccomp filter. Returns 0 with *out, or -errno. */
int brokerd_launcher_start(const struct brokerd_toolbox *tb, struct brokerd_launcher **out);

/* The launcher socket, for the event loop: it becomes readable only when the launcher
 * has gone (it never writes there), after which no command can run. */
int brokerd_launcher_fd(const struct brokerd_launcher *l);

/* The toolbox the launcher runs (the config's commands are found through it). */
const struct brokerd_toolbox *brokerd_launcher_toolbox(const struct brokerd_launcher *l);

/* Connect to the launcher unit's socket at path (roundtable-sandbox-launcher.socket) for
 * tb, whose commands must be the launcher's (both read the same config). The socket must
 * have been made by root or this account. Call before the seccomp filter. Returns 0 with
 * *out, or -errno (-EPERM: another account made the socket). */
int brokerd_launcher_connect(const struct brokerd_toolbox *tb, const char *path, struct brokerd_launcher **out);

/* The launcher's own side: serve RUN on the connected socket ctl (ours; moved to
 * descriptor 3, every descriptor above it closed) for tb until the peer hangs up, then kill
 * every sandbox and _exit(0). Wipes the environment and makes the process non-dumpable.
 * forked: SIGINT, SIGTERM and SIGHUP are ignored (brokerd ends it by closing the socket);
 * otherwise they end it. The caller has checked the peer. Never returns. */
__attribute__((noreturn)) void brokerd_launcher_serve(const struct brokerd_toolbox *tb, int ctl, bool forked);

/* Close the launcher socket, which ends the launcher and every sandbox it holds, and, when
 * it was forked, reap it (SIGKILL after BROKERD_LAUNCH_REAP_MS). Frees l; NULL is fine. */
void brokerd_launcher_stop(struct brokerd_launcher *l);

/* One run through the launcher, as the hooks of a struct rts_spawn (common/spawn.h):
 * .start = brokerd_launch_start, .reap = brokerd_launch_reap, .hook_arg = the struct.
 * Release it with brokerd_launch_release() after the spawn returned. */
struct brokerd_launch {
	struct brokerd_launcher *launcher;
	enum brokerd_run_kind kind;
	uint32_t index;
	int sock; /* the run socket once started; -1 before */
};

/* Send RUN and wait for the answer (at most BROKERD_LAUNCH_START_MS). 0 with *pidfd (the
 * caller's) on STARTED; the FAILED value; -ETIMEDOUT; -EPROTO for any other answer;
 * -ENOTCONN when the launcher is gone. */
int brokerd_launch_start(void *launch, const int fds[3], int *pidfd);

/* Wait for EXITED (at most BROKERD_LAUNCH_REAP_MS): 0 with *status, -ETIMEDOUT, -EPROTO,
 * or -ENOTCONN. */
int brokerd_launch_reap(void *launch, int *status);

/* Close the run socket (the launcher then kills the sandbox if it still runs). */
void brokerd_launch_release(struct brokerd_launch *launch);

#endif
