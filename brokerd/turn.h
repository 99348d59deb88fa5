/* SPDX-License-Identifier: Apache-2.0 */
/* A bound turn: its binding, its HTTP listener and the state every connection shares.
 *
 * Threads: the main thread (sd-event, runnerd link) creates, sweeps, closes and frees
 * turns, and runs the gate (gate.c) that accepts connections and checks request heads;
 * libmicrohttpd runs one thread per admitted connection that calls into http.c. Members
 * under "lock" are shared with those threads; the others are set before the listener
 * starts or touched by the main thread only. */
#ifndef BROKERD_TURN_H
#define BROKERD_TURN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"
#include "brokerd/closer.h"
#include "brokerd/gate.h"

struct MHD_Daemon;
struct brokerd_conn;
struct brokerd_pending;

struct brokerd_turn {
	struct brokerd_binding b;
	const struct rts_config *cfg;
	struct brokerd_precheck *precheck; /* a precheck run (brokerd/precheck.h): its grant and route; else NULL */
	struct brokerd_keyring *keys;
	struct MHD_Daemon *mhd;
	uint64_t bound_ms;  /* CLOCK_MONOTONIC ms when the binding was accepted, for the log */
	int wake_fd;	    /* eventfd written once when the turn starts closing */
	atomic_bool closing;

	pthread_mutex_t lock;
	unsigned calls;		      /* broker calls so far, refused ones included */
	bool busy;		      /* a call is in flight */
	struct brokerd_conn *conns;   /* connections libmicrohttpd serves, for the deadline sweep */
	struct brokerd_handoff *handoffs; /* admitted by the gate, not yet started by libmicrohttpd */

	/* main thread only */
	struct brokerd_gate gate; /* the broker socket's front door (gate.h) */
	void *owner;		  /* the runnerd link that bound the turn; NULL once it is gone */
	bool answer_close;	  /* send BROKER_CLOSED when the teardown is done */
	struct brokerd_closer closer; /* torn down by brokerd_turn_stop() on a closer thread */
	struct brokerd_turn *next;    /* in the serving list */
};

/* Validate a BROKER_BIND and create the turn serving HTTP on listen_fd, accepting from
 * ev's loop (the main thread's). The binding's strings are copied. listen_fd is always
 * taken (closed on failure, and by brokerd_turn_begin_close()). Checks: turn id of 16 lowercase hex
 * digits; channel 1..RTS_CHANNEL_MAX bytes of UTF-8 whose sha256 is channel_hash; speaker
 * id 1.., name and principal 0..RTS_SPEAKER_FIELD_MAX bytes of UTF-8; a deadline in the
 * future and no further than the configured turn timeout; listen_fd a listening AF_UNIX
 * SOCK_STREAM socket. Returns 0 with *out, -EINVAL for a bad field, -ENOTSOCK for a bad
 * socket, -ETIME for a deadline already past, or -errno when the server cannot start. */
int brokerd_turn_new(const struct rts_config *cfg, const struct brokerd_binding *b, int listen_fd, sd_event *ev,
		     struct brokerd_turn **out);

/* brokerd_turn_new() for a precheck run (PRECHECK_BIND): b has no speaker (its speaker
 * fields are "", and must be), its deadline is no further than precheck.timeoutMs, and
 * the turn serves only the precheck's route with its budget. Takes precheck (freed with
 * the turn, and on failure). Same results. */
int brokerd_turn_new_precheck(const struct rts_config *cfg, const struct brokerd_binding *b,
			      struct brokerd_precheck *precheck, int listen_fd, sd_event *ev, struct brokerd_turn **out);

/* Mark the turn closing, stop accepting (the listener and connections still waiting for
 * their head are closed) and wake every blocking step of its calls (upstream transfers are
 * aborted, tool processes get SIGTERM then SIGKILL). Requests already handed to the HTTP
 * server get 503. Main thread; non-blocking; idempotent. */
void brokerd_turn_begin_close(struct brokerd_turn *t);

/* Stop the HTTP server: closes the listener and every connection and waits until every
 * connection thread has returned. Call after brokerd_turn_begin_close(), from a thread
 * that is not one of the server's. Blocks for at most about BROKERD_KILL_GRACE_MS. */
void brokerd_turn_stop(struct brokerd_turn *t);

/* Free a stopped turn. Main thread. */
void brokerd_turn_free(struct brokerd_turn *t);

/* Enforce the per-connection deadlines (BROKERD_HEADER_DEADLINE_MS from accept until the
 * request head is complete, RTS_BROKER_REQUEST_DEADLINE_MS from accept for the whole request)
 * and the turn deadline: an expired connection is closed or shut down. Main thread, every
 * few hundred ms. */
void brokerd_turn_sweep(struct brokerd_turn *t, uint64_t now_ms);

/* Calls made so far (for BROKER_CLOSED). */
unsigned brokerd_turn_calls(struct brokerd_turn *t);

/* For libmicrohttpd's "connection started" notification: the state the gate prepared for
 * the connection on fd, taken out of the hand-off list, or NULL. t->lock held. */
struct brokerd_conn *brokerd_turn_claim_locked(struct brokerd_turn *t, int fd);

#endif
