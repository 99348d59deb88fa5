/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's internal state, shared by its files (not installed, not a library API).
 *
 * main.c     start-up, signals, start-up clean-up
 * statd.c    runnerd's end of the statd links: runnerd_dispatch_statd
 * broker.c   runnerd's end of the brokerd link, made lazily: runnerd_dispatch_brokerd
 * turn.c     one turn from TURN_RUN to TURN_DONE
 * rundir.c   runRoot checks and per-turn directories
 * proc.c     asynchronous docker CLI children
 * (the links themselves are common/link.c)
 * docker_args.c, worker_io.c   pure functions (unit-tested) */
#ifndef RUNNERD_H
#define RUNNERD_H

#include <json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/link.h"
#include "common/msg.h"
#include "common/paths.h"
#include "common/proto.h"
#include "runnerd/proc.h"

/* Turns running at once (beyond: an immediate TURN_DONE with RTS_TURN_ERROR). */
#define RUNNERD_MAX_TURNS 64u
/* statd connections at once; statd needs one, a restarting statd briefly two. */
#define RUNNERD_MAX_STATD 8u
/* How long brokerd may take to answer BROKER_BIND (from the moment the turn asks for the
 * link, so connecting and HELLO count too). */
#define RUNNERD_BIND_TIMEOUT_MS 5000u
/* Each docker rm -f has this deadline (seed: "each removal command has a five-second
 * deadline"). */
#define RUNNERD_RM_TIMEOUT_MS 5000u
/* The second removal after a kill covers the create/attach race (seed: "A short second
 * removal covers the local create/attach race"). */
#define RUNNERD_RM_SECOND_DELAY_MS 1000u
/* stdout kept from docker rm -f (it prints the name; nothing in it is used). */
#define RUNNERD_RM_OUTPUT_MAX 4096u
/* docker ps at start-up. */
#define RUNNERD_PS_TIMEOUT_MS 5000u
#define RUNNERD_PS_OUTPUT_MAX (256u * 1024u)
/* docker info and docker image inspect at start-up: Docker must answer within this. */
#define RUNNERD_CHECK_TIMEOUT_MS 10000u
#define RUNNERD_CHECK_OUTPUT_MAX 4096u
/* First line of a failed docker CLI's stderr that is logged. */
#define RUNNERD_STDERR_LOG_MAX 200u
/* The longest broker socket path is RTS_BROKER_SOCK_PATH_MAX (common/limits.h). */
#define RUNNERD_BROKER_SOCK RTS_BROKER_SOCK_NAME

struct runnerd;
struct runnerd_turn;

/* One accepted statd connection. */
struct runnerd_statd {
	TAILQ_ENTRY(runnerd_statd) entry;
	struct runnerd *rd;
	struct rts_link *link;
};

struct runnerd_broker {
	struct rts_link *link; /* NULL: none yet, or the last one failed */
	uint64_t gen;	       /* bumped per connection: a turn bound on an older one is not re-closed */
};

struct runnerd {
	struct rts_daemon daemon; /* the loop, the config and runnerd.sock (common/daemon.h) */
	sd_event *event;	  /* daemon.event */
	struct rts_config *cfg;	  /* daemon.cfg */
	const char *runtime_dir;
	char *broker_path; /* <runtime-dir>/brokerd.sock */
	int run_root_fd;   /* O_DIRECTORY of cfg->run_root, checked at start-up */
	uid_t uid;
	gid_t gid;
	json_object *public_tools; /* rts_config_public_tools(cfg), built once */
	char **child_env;	   /* the docker CLI's whole environment */

	struct rts_link_server *statd_server; /* runnerd.sock */
	TAILQ_HEAD(, runnerd_statd) statd;

	TAILQ_HEAD(, runnerd_turn) turns;
	unsigned n_turns;

	struct runnerd_broker broker;
	bool shutting_down;
};

/* turn.c */

/* Handle TURN_RUN from peer: validate every field (-EBADMSG drops the peer for a
 * malformed or inconsistent message), then start the turn or answer TURN_DONE at once
 * (too many turns, shutdown). Returns 0 or -EBADMSG. */
int runnerd_turn_run(struct runnerd *rd, struct runnerd_statd *peer, struct rts_msg_turn_run *m);
/* Cancel the turn id if peer started it (statd's TURN_CANCEL; unknown ids are ignored). */
void runnerd_turn_cancel_id(struct runnerd *rd, struct runnerd_statd *peer, const char *turn_id);
/* Cancel with the given final status (TIMEOUT, CANCELLED, ERROR). Idempotent. */
void runnerd_turn_cancel(struct runnerd_turn *t, enum rts_turn_status status);
/* The statd connection is gone: cancel its turns without answering. */
void runnerd_turns_forget_peer(struct runnerd *rd, struct runnerd_statd *peer);
/* brokerd answered BROKER_BOUND for turn_id (unknown or not-waiting turns are ignored). */
void runnerd_turn_bound(struct runnerd *rd, const char *turn_id, int32_t result);
/* The brokerd link came up: send BROKER_BIND for every turn waiting for it. */
void runnerd_turns_link_up(struct runnerd *rd);
/* The brokerd link could not be set up, or connection gen was lost: the turns waiting for
 * it or bound through it fail (RTS_TURN_ERROR), clean-up as usual. */
void runnerd_turns_link_lost(struct runnerd *rd, uint64_t gen, bool connect_failed);
/* Shutdown: cancel every turn (RTS_TURN_CANCELLED). */
void runnerd_turns_cancel_all(struct runnerd *rd);
/* Called whenever a turn is freed: exits the loop when shutting down and none remain. */
void runnerd_maybe_exit(struct runnerd *rd);

/* proc.c: the first line of a docker CLI's stderr, printable ASCII only, bounded, for a
 * log line (rts_spawn_first_line()). A turn's docker run may carry text from the
 * container, so this is treated as untrusted: cut short and defanged. */
void runnerd_first_line(const char *err, size_t len, char out[RUNNERD_STDERR_LOG_MAX + 1]);

/* statd.c */
extern const struct rts_link_spec runnerd_statd_spec;
/* rts_link_server's peer_new for runnerd.sock: a new statd peer (NULL when shutting down). */
void *runnerd_statd_new(void *rd, struct rts_link *l);
/* Exit: close every statd link without callbacks. */
void runnerd_statd_free_all(struct runnerd *rd);

/* broker.c */

/* Make sure a link to brokerd exists or is being set up; runnerd_turns_link_up follows
 * when it is up, runnerd_turns_link_lost when it cannot be. Send on rd->broker.link
 * (rts_link_send_* refuse a link that is not up, or none, with -ENOTCONN). */
void runnerd_broker_want(struct runnerd *rd);
/* Exit: close the link without callbacks. */
void runnerd_broker_close(struct runnerd *rd);

/* rundir.c */

/* Create runRoot if missing (0700) and check it: a directory (not a symlink) owned by
 * our uid with no group/other bits. Also checks the broker socket path length. Returns an
 * O_DIRECTORY fd, or -errno with a message in err naming the path and what is wrong. */
int runnerd_run_root_open(const char *run_root, char *err, size_t errlen);
/* Remove run dirs a previous runnerd left: entries named like a turn id that are
 * directories owned by us; their broker.sock is unlinked first. Logs what it removes. */
void runnerd_run_root_clean(int run_root_fd);
/* runRoot/<turn>/ (0700) and a listening SOCK_STREAM socket broker.sock (0600) in it; in
 * accounts mode the guest account (cfg->uid) also gets search on the directory and
 * read/write on the socket, by ACL entries (0710 and 0660 as ls shows them). Returns the
 * listening fd or -errno (the directory is removed again on failure). */
int runnerd_run_dir_create(struct runnerd *rd, const char *turn_id);
/* Unlink broker.sock and remove runRoot/<turn>/. Returns 0 or -errno. */
int runnerd_run_dir_remove(struct runnerd *rd, const char *turn_id);

#endif
