/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's internal state, shared by its files (not installed, not a library API).
 *
 * main.c       start-up, signals, start-up clean-up
 * statd.c      runnerd's end of the statd links: runnerd_dispatch_statd
 * broker.c     runnerd's end of the brokerd link, made lazily: runnerd_dispatch_brokerd
 * turn.c       one turn from TURN_RUN to TURN_DONE: a state machine with typed inputs and
 *              effects (turn.h), no sockets, no processes
 * rich.c       rich channels' long-lived containers and their turns: a state machine too
 *              (rich.h)
 * removal.c    a container's docker rm -f rounds, for turns, rich channels and spares
 *              (removal.h): a machine on turn.h's ops
 * turn_ops.c   the machines' effects in the daemon (the ops tables)
 * attach.c     attachment fetches relayed from statd to brokerd and back
 * rundir.c     runRoot checks and per-turn directories
 * proc.c       asynchronous docker CLI children
 * spare.c      warm spares: containers started before their turn (spare.h)
 * image_watch.c  docker events on images, so a spare of a changed image is replaced
 * (the links themselves are common/link.c)
 * docker_args.c, worker_io.c   pure functions (unit-tested)
 *
 * Dependencies point one way: statd.c and broker.c give turn.c its inputs; turn.c reaches
 * them, proc.c and rundir.c only through its ops (turn.h), which turn_ops.c wires. */
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
#include "common/metrics.h"
#include "common/msg.h"
#include "common/paths.h"
#include "common/proto.h"
#include "runnerd/image_watch.h"
#include "runnerd/proc.h"
#include "runnerd/spare.h"
#include "runnerd/rich.h"
#include "runnerd/turn.h"

/* The turns' limits and timing (RUNNERD_MAX_TURNS, RUNNERD_BIND_TIMEOUT_MS, the removals)
 * are in turn.h. */
/* statd connections at once; statd needs one, a restarting statd briefly two. */
#define RUNNERD_MAX_STATD 8u
/* docker ps at start-up. */
#define RUNNERD_PS_TIMEOUT_MS 5000u
#define RUNNERD_PS_OUTPUT_MAX (256u * 1024u)
/* docker info and docker image inspect at start-up: Docker must answer within this. */
#define RUNNERD_CHECK_TIMEOUT_MS 10000u
#define RUNNERD_CHECK_OUTPUT_MAX 4096u
/* The longest broker socket path is RTS_BROKER_SOCK_PATH_MAX (common/limits.h). */
#define RUNNERD_BROKER_SOCK RTS_BROKER_SOCK_NAME

struct runnerd;

/* One accepted statd connection. */
struct runnerd_statd {
	TAILQ_ENTRY(runnerd_statd) entry;
	struct runnerd *rd;
	struct rts_link *link;
	bool spares_due; /* the ready spares changed while the link was congested */
};

/* metrics.c: runnerd's metrics and the METRICS requests waiting for brokerd's text. */
#define RUNNERD_METRICS_WAIT_MS 2500u /* brokerd's text, connecting included; statd waits longer */
enum { RUNNERD_START_COLD, RUNNERD_START_WARM, RUNNERD_START_KINDS };
struct runnerd_metrics_waiter {
	struct runnerd_statd *peer;
	uint32_t seq;
};
struct runnerd_metrics {
	struct rts_histogram turn_seconds[RUNNERD_START_KINDS];
	struct runnerd_metrics_waiter waiting[16];
	unsigned n_waiting;
	bool asking;   /* waiting for brokerd's text (timer armed) */
	bool sent;     /* BROKER_METRICS with seq is out */
	uint32_t seq;
	struct rts_timer *timer;
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
	int precheck_root_fd; /* O_DIRECTORY of cfg->precheck.run_root (its own, even when it is
			       * run_root); -1 without "precheck" */
	uid_t uid;
	gid_t gid;
	json_object *public_tools; /* rts_config_public_tools(cfg), built once */
	char **child_env;	   /* the docker CLI's whole environment */

	struct rts_link_server *statd_server; /* runnerd.sock */
	TAILQ_HEAD(, runnerd_statd) statd;

	struct runnerd_turns turns; /* turn.h */
	bool turns_idle;	    /* shutting down and the last turn is gone */
	struct runnerd_spares spares; /* spare.h */
	struct runnerd_image_watch image_watch; /* image_watch.h: with warmSpares */
	struct runnerd_riches riches; /* rich.h */
	struct runnerd_fetch *fetches; /* attach.c: relayed fetches */
	unsigned n_fetches;

	struct runnerd_broker broker;
	struct runnerd_metrics metrics;
	bool shutting_down;
};

/* turn_ops.c: rd->turns and rd->riches, wired to this daemon (after rd->cfg,
 * public_tools, uid, gid). */
void runnerd_turns_attach(struct runnerd *rd);

/* attach.c: ATTACH_FETCH from peer, relayed to brokerd as BROKER_ATTACH_FETCH (at most
 * RUNNERD_FETCHES_MAX at once; beyond, or without brokerd, answered at once with
 * -EBUSY or -ENOTCONN); the answer relayed back as ATTACH_DATA with its memfd unread.
 * Returns 0 or -EBADMSG. */
#define RUNNERD_FETCHES_MAX 64u
int runnerd_attach_fetch(struct runnerd *rd, struct runnerd_statd *peer, const struct rts_msg_attach_fetch *m);
void runnerd_attach_data(struct runnerd *rd, uint64_t gen, struct rts_msg_broker_attach_data *m);
void runnerd_attach_broker_up(struct runnerd *rd);
void runnerd_attach_broker_lost(struct runnerd *rd, uint64_t gen, bool connect_failed);
void runnerd_attach_forget_peer(struct runnerd *rd, struct runnerd_statd *peer);
void runnerd_attach_free(struct runnerd *rd);

/* statd.c */
extern const struct rts_link_spec runnerd_statd_spec;
/* rts_link_server's peer_new for runnerd.sock: a new statd peer (NULL when shutting down). */
void *runnerd_statd_new(void *rd, struct rts_link *l);
/* Exit: close every statd link without callbacks. */
void runnerd_statd_free_all(struct runnerd *rd);

/* broker.c */

/* Make sure a link to brokerd exists or is being set up; runnerd_turns_broker_up follows
 * when it is up, runnerd_turns_broker_lost when it cannot be. Send on rd->broker.link
 * (rts_link_send_* refuse a link that is not up, or none, with -ENOTCONN). */
void runnerd_broker_want(struct runnerd *rd);
/* Exit: close the link without callbacks. */
void runnerd_broker_close(struct runnerd *rd);

/* metrics.c */
void runnerd_metrics_init(struct runnerd *rd);
void runnerd_metrics_free(struct runnerd *rd);
/* The turn machine's finished op. */
void runnerd_metrics_turn_finished(struct runnerd *rd, enum rts_turn_status status, uint64_t duration_ms, bool warm);
/* METRICS from peer: answered with METRICS_TEXT once brokerd's text is in or
 * RUNNERD_METRICS_WAIT_MS passed. Returns 0 or a send's -errno. */
int runnerd_metrics_request(struct runnerd *rd, struct runnerd_statd *peer, uint32_t seq);
/* BROKER_METRICS_TEXT: -EBADMSG for a text that is not printable ASCII lines. */
int runnerd_metrics_brokerd_text(struct runnerd *rd, uint32_t seq, const char *text);
/* The brokerd link came up or went down; statd's peer link went down. */
void runnerd_metrics_broker_up(struct runnerd *rd);
void runnerd_metrics_broker_down(struct runnerd *rd);
void runnerd_metrics_forget_peer(struct runnerd *rd, struct runnerd_statd *peer);

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
/* A rich channel's runRoot/rich-<prefix>/ (0700, made when missing; a directory of ours)
 * and a new listening broker.sock in it (0600), one left there unlinked first. Returns the
 * listening fd or -errno. */
int runnerd_rich_dir_open(struct runnerd *rd, const char *prefix);
/* Unlink its broker.sock and remove it. 0 or -errno (-ENOENT is 0). */
int runnerd_rich_dir_remove(struct runnerd *rd, const char *prefix);
/* At start, once the rich containers are known: remove rich-<prefix> directories no
 * container of ours belongs to. */
void runnerd_rich_dirs_clean(struct runnerd *rd);
/* A precheck's run dir (DESIGN.md 8.3): <precheck runRoot>/precheck-<id>/ (0700) holding
 * broker/ (0700) with a listening SOCK_STREAM broker.sock (0600) and an empty workspace/
 * (0700) that the container mounts read-only. Returns the listening fd or -errno (what was
 * made is removed again). */
int runnerd_precheck_dir_create(struct runnerd *rd, const char *id);
/* Remove all of it: broker.sock, broker/, workspace/ and the directory. Returns 0 or the
 * first -errno. */
int runnerd_precheck_dir_remove(struct runnerd *rd, const char *id);
/* Check (and create) the precheck runRoot like runRoot, with the precheck socket's path
 * length. Returns an O_DIRECTORY fd or -errno with err filled. */
int runnerd_precheck_root_open(const char *root, char *err, size_t errlen);
/* Remove the precheck run dirs a previous runnerd left in the precheck runRoot. */
void runnerd_precheck_root_clean(int root_fd);

#endif
