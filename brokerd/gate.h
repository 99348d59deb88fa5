/* SPDX-License-Identifier: Apache-2.0 */
/* The front door of a turn's broker socket: brokerd accepts every connection itself,
 * holds it until its request head has arrived (at most BROKERD_HEADER_DEADLINE_MS), checks
 * the head's bytes with brokerd_head_scan() and only then hands the connection to
 * libmicrohttpd (MHD_add_connection; the server runs with MHD_USE_NO_LISTEN_SOCKET).
 *
 * The head is read with MSG_PEEK, so libmicrohttpd later reads exactly the bytes that
 * were checked. A head that fails the check is answered here with 400 and
 * {"error":"bad_request"} (413 and {"error":"too_large"} when its Content-Length exceeds
 * RTS_BROKER_BODY_MAX, so libmicrohttpd never meets a length it would refuse itself), and
 * the connection is closed without reading on: nothing is forwarded and no later byte on
 * it is parsed. This is also where the per-listener
 * connection limit and the header deadline are enforced, and where every request is
 * counted against the turn's call budget (refused ones included).
 *
 * Everything here runs on the main thread (sd-event), except the *_locked helpers, which
 * libmicrohttpd's threads call with the turn lock held. */
#ifndef BROKERD_GATE_H
#define BROKERD_GATE_H

#include <stdint.h>
#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"

struct brokerd_turn;
struct brokerd_conn;

/* Start accepting on t->listen_fd (non-blocking, owned by t). Returns 0 or -errno. */
int brokerd_gate_start(struct brokerd_turn *t, sd_event *ev);

/* Stop accepting, close the listener and every connection still waiting for its head.
 * Idempotent. */
void brokerd_gate_stop(struct brokerd_turn *t);

/* Close connections whose head did not arrive within BROKERD_HEADER_DEADLINE_MS or before
 * the turn deadline, and forget hand-offs libmicrohttpd never took up. */
void brokerd_gate_sweep(struct brokerd_turn *t, uint64_t now_ms);

/* For libmicrohttpd's "connection started" notification: the state the gate prepared for
 * the connection on fd, taken out of the hand-off list, or NULL. t->lock held. */
struct brokerd_conn *brokerd_gate_claim_locked(struct brokerd_turn *t, int fd);

/* Free hand-offs that were never claimed (after the server stopped). */
void brokerd_gate_free_handoffs(struct brokerd_turn *t);

/* The whole answer the gate writes for r (BROKERD_BAD_REQUEST or BROKERD_TOO_LARGE):
 * status line, Content-Type: application/json, Content-Length, Connection: close, then
 * {"error":CODE}. Static string. */
const char *brokerd_gate_answer(enum brokerd_result r);

#endif
