/* SPDX-License-Identifier: Apache-2.0 */
/* The front door of a broker socket (a sealed turn's, or a rich channel's): brokerd accepts
 * every connection itself, holds it until its request head has arrived (at most
 * BROKERD_HEADER_DEADLINE_MS), checks the head's bytes with brokerd_head_scan() and only
 * then hands the connection on to libmicrohttpd (MHD_add_connection; the servers run with
 * MHD_USE_NO_LISTEN_SOCKET).
 *
 * The head is read with MSG_PEEK, so libmicrohttpd later reads exactly the bytes that
 * were checked. A head that fails the check is answered here with brokerd's own JSON
 * error (400 bad_request for its syntax, or whatever the owner's admit_head decides from
 * the target and Content-Length, e.g. 413 too_large), and the connection is closed without
 * reading on: nothing is forwarded and no later byte on it is parsed. This is also where
 * the per-listener connection limit and the header deadline are enforced.
 *
 * The owner (struct brokerd_turn, a rich channel) embeds a struct brokerd_gate and says
 * through its ops what a connection counts against, what a head may ask for and where a
 * connection goes. Everything here runs on the main thread (sd-event). */
#ifndef BROKERD_GATE_H
#define BROKERD_GATE_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"
#include "brokerd/head.h"

struct brokerd_gate;
struct brokerd_pending;

struct brokerd_gate_ops {
	/* Connections of this listener that are open beyond the gate's own: handed over or
	 * served. */
	unsigned (*open_beyond)(struct brokerd_gate *g);
	/* Count one request that sent bytes against the owner's budget; returns its number for
	 * the log (0: the owner counts elsewhere). */
	unsigned (*count)(struct brokerd_gate *g);
	/* A whole head that passed brokerd_head_scan(): BROKERD_OK to hand the connection
	 * over, else the refusal to answer, with *rule (a static audit rule name,
	 * brokerd/audit.h) and *why (static, for the debug log). */
	enum brokerd_result (*admit_head)(struct brokerd_gate *g, const struct brokerd_head *h, const char **rule,
					  const char **why);
	/* The decision on a call the gate ended itself (result BROKERD_RESULT_MAX_: closed
	 * unanswered; rule: static), ms after it was accepted; call_no from count. NULL: the
	 * gate writes a debug log line only. */
	void (*audit)(struct brokerd_gate *g, unsigned call_no, const char *rule, enum brokerd_result r, uint64_t ms);
	/* Take the connection: fd is the callee's from now on (libmicrohttpd closes it). */
	void (*handoff)(struct brokerd_gate *g, int fd, const struct sockaddr_un *addr, socklen_t addr_len,
			uint64_t accepted_ms, unsigned call_no);
};

struct brokerd_gate {
	/* Set by the owner before brokerd_gate_start(). */
	const struct brokerd_gate_ops *ops;
	void *owner;
	const char *log_turn;	  /* turn id for log lines, or NULL */
	const char *log_hash;	  /* channel hash for log lines */
	uint64_t deadline_ms;	  /* connections still waiting for a head are dropped then too */
	unsigned max_connections; /* beyond this, a new connection is closed at once, uncounted */

	/* The gate's own, main thread only. */
	sd_event *ev;
	int listen_fd; /* -1 once stopped */
	sd_event_source *listen_src;
	struct brokerd_pending *pending; /* accepted, head not checked yet */
	unsigned n_pending;
};

/* Start accepting on listen_fd (a listening socket, taken over: made non-blocking here and
 * closed by brokerd_gate_stop()). Returns 0 or -errno (listen_fd is closed then too). */
int brokerd_gate_start(struct brokerd_gate *g, sd_event *ev, int listen_fd);

/* Stop accepting, close the listener and every connection still waiting for its head.
 * Idempotent; also fine on a gate never started (listen_fd -1). */
void brokerd_gate_stop(struct brokerd_gate *g);

/* Close connections whose head did not arrive within BROKERD_HEADER_DEADLINE_MS or before
 * g->deadline_ms. */
void brokerd_gate_sweep(struct brokerd_gate *g, uint64_t now_ms);

/* 0 when fd is what runnerd promises to hand over: a listening AF_UNIX SOCK_STREAM socket;
 * else -ENOTSOCK. */
int brokerd_gate_check_listener(int fd);

/* ---- the hand-off list ----
 *
 * A connection the gate handed to libmicrohttpd (MHD_add_connection()) waits here, with the
 * state its owner prepared for it, until libmicrohttpd's STARTED notification claims it by
 * its fd. The entry sits inside that state (struct brokerd_conn, struct rich_conn); the
 * list is the owner's, under the owner's lock, which every function below expects held. */
struct brokerd_handoff {
	struct brokerd_handoff *next;
	int fd;
	uint64_t handed_ms; /* CLOCK_MONOTONIC */
};

/* A hand-off libmicrohttpd did not take up by then never will be. */
#define BROKERD_HANDOFF_STALE_MS 5000u

/* Put h on the list for fd, handed at now_ms. Returns the entry that was there for the same
 * fd number, taken off (stale: that descriptor was closed and reused; the caller disposes
 * of it), or NULL. */
struct brokerd_handoff *brokerd_handoff_put(struct brokerd_handoff **list, struct brokerd_handoff *h, int fd,
					    uint64_t now_ms);
/* The entry for fd, taken off, or NULL. */
struct brokerd_handoff *brokerd_handoff_claim(struct brokerd_handoff **list, int fd);
/* An entry handed at least BROKERD_HANDOFF_STALE_MS before now_ms, taken off, or NULL. */
struct brokerd_handoff *brokerd_handoff_stale(struct brokerd_handoff **list, uint64_t now_ms);
/* Any entry, taken off, or NULL: to empty the list after the server stopped. */
struct brokerd_handoff *brokerd_handoff_pop(struct brokerd_handoff **list);
unsigned brokerd_handoff_count(const struct brokerd_handoff *list);

/* The whole answer the gate writes for r (any result but BROKERD_OK): status line,
 * Content-Type: application/json, Content-Length, Connection: close, then {"error":CODE}.
 * Static string. */
const char *brokerd_gate_answer(enum brokerd_result r);

#endif
