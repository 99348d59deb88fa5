/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon link (statd -> runnerd, runnerd -> brokerd) on an sd-event loop: the one
 * implementation both ends of both links use (HACKING.md "Daemon links").
 *
 *  - The connecting side connects lazily (rts_link_connect): attempts run from the loop,
 *    retrying while the listener is missing or busy for RTS_LINK_CONNECT_MS, then HELLO.
 *  - The listening side accepts (rts_link_server), checks each peer with the predicate the
 *    link's spec gives before reading a byte, and expects HELLO.
 *  - HELLO has a deadline (RTS_LINK_HELLO_MS) on both sides and carries the protocol
 *    version and the program. A version mismatch is logged by both sides in one line
 *    that names both versions (proto.h, "Version negotiation"); a program other than the
 *    one the link is for is refused.
 *  - Two dispatch tables per link: before HELLO only HELLO (or HELLO_OK) can be decoded,
 *    afterwards only the messages the spec's table lists. Any other type is a protocol
 *    violation that drops the peer before a byte of its payload is read; so is a payload
 *    that does not decode strictly, or a handler's negative return.
 *  - Sends go through a bounded queue drained on EPOLLOUT: a full socket buffer (EAGAIN)
 *    queues, it never drops the link. At RTS_LINK_QUEUE_HIGH messages the link is
 *    congested: rts_link_has_room() turns false for producers, and a listening side stops
 *    reading requests until the queue is half empty again (a peer that sends requests
 *    without reading answers blocks itself, not us). A send beyond RTS_LINK_QUEUE_MAX
 *    drops the link. The connecting side never stops reading, so two daemons cannot wait on
 *    each other.
 *  - Teardown is deferred: rts_link_fail() (or any failure the link notices) stops all I/O
 *    at once, and the spec's on_down runs later from its own event, so a handler never
 *    sees its owner freed under it. The link is freed right after on_down returns.
 *
 * Every function runs on the loop's thread. */
#ifndef RTS_LINK_H
#define RTS_LINK_H

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "common/msg.h"

#define RTS_LINK_HELLO_MS 5000u	       /* connect (or accept) to the end of HELLO */
#define RTS_LINK_CONNECT_MS 2000u      /* keep retrying connect() this long (peers start in any order) */
#define RTS_LINK_CONNECT_STEP_MS 100u  /* between attempts */
#define RTS_LINK_QUEUE_HIGH 32u	       /* queued messages that make the link congested */
#define RTS_LINK_QUEUE_MAX 256u	       /* a send beyond this drops the link */
#define RTS_LINK_BURST 32u	       /* packets handled per wake-up, so one peer cannot starve others */

struct rts_link;
struct rts_link_server;

/* One entry of a dispatch table: a message type and its handler, typed by the message.
 * Write entries with RTS_LINK_ON(TURN_DONE, fn) (fn: int fn(struct rts_link *l, void
 * *owner, struct rts_msg_turn_done *m)) and end the table with RTS_LINK_DISPATCH_END.
 * A handler returns 0, or a negative errno (-EBADMSG for a field it refuses, -EPROTO) to
 * drop the peer. Strings in m live while the handler runs; a carried fd is the handler's if
 * it takes it (steal_fd(&m->fd)), else it is closed afterwards. */
#define RTS_LINK_SLOT_(NAME, name, number, link, dir, has_fd) \
	int (*NAME)(struct rts_link * l, void *owner, struct rts_msg_##name *m);
struct rts_link_dispatch {
	uint32_t type;
	union {
		RTS_PROTO_MESSAGES(RTS_LINK_SLOT_)
	} on;
};
#define RTS_LINK_ON(NAME, fn) {.type = RTS_MSG_##NAME, .on.NAME = (fn)}
#define RTS_LINK_DISPATCH_END {.type = 0}

/* What one end of one link is: static, shared by every link of that kind. */
struct rts_link_spec {
	enum rts_proto_link proto; /* the table may list only this link's messages to this side */
	const char *sock;	   /* "runnerd.sock", for log lines */
	const char *self;	   /* RTS_PROGRAM_*: what this side says in HELLO / HELLO_OK */
	const char *peer;	   /* RTS_PROGRAM_*: the only program accepted at the other end */
	const char *peer_name;	   /* "runnerd", for log lines */
	/* The accepted-peer predicate, run on the connected socket before anything is read or
	 * sent: 0 to go on, a negative errno to refuse (for example rts_peer_is_self). */
	int (*peer_check)(int fd);
	/* Completes the refusal line "refusing a <sock> <peer_refusal>: <errno text>". */
	const char *peer_refusal;
	/* What the peer may send once HELLO is done. Checked when a link is made: a message
	 * of another link or direction in it, or HELLO, aborts (a bug, not an input). */
	const struct rts_link_dispatch *dispatch;
	/* Optional: HELLO completed; sends are possible from here. */
	void (*on_up)(struct rts_link *l, void *owner);
	/* The link failed, was refused, or never came up (was_up false); err is why
	 * (-ECONNRESET: the peer closed). Called once, from its own event; l is freed when it
	 * returns. */
	void (*on_down)(struct rts_link *l, void *owner, int err, bool was_up);
	/* Optional: the queue drained to half of RTS_LINK_QUEUE_HIGH after congestion (from its
	 * own event). */
	void (*on_drain)(struct rts_link *l, void *owner);
	/* 0 for RTS_LINK_HELLO_MS and RTS_LINK_CONNECT_MS; the unit tests use less. */
	unsigned hello_ms;
	unsigned connect_ms;
};

/* Start connecting to path (the connecting side). Nothing happens before this returns:
 * the first attempt runs from the loop. on_up follows HELLO_OK, on_down any failure.
 * Returns 0 with *ret, or -errno (nothing was started then). */
int rts_link_connect(sd_event *e, const char *path, const struct rts_link_spec *spec, void *owner,
		     struct rts_link **ret);

/* Run a link on fd, a connected SEQPACKET socket (taken over, closed on failure), as the
 * connecting side or not: spec->peer_check first, then HELLO. Nothing is called back
 * before this returns. Returns 0 with *ret, or -errno (-EPERM and a log line when the
 * peer check refused it). */
int rts_link_open(sd_event *e, int fd, const struct rts_link_spec *spec, bool connecting_side, void *owner,
		  struct rts_link **ret);

/* Accept links on listen_fd (the listening side; the fd stays the caller's), at most
 * max_links open at once. For each accepted peer that passes spec->peer_check, peer_new is
 * called with the new link (still in HELLO) and returns the owner passed to the link's
 * callbacks, or NULL to refuse it (peer_new logs why; the link is freed). Accepting starts
 * disabled: see rts_link_server_enable. Returns 0 with *ret or -errno. */
int rts_link_server_new(sd_event *e, int listen_fd, const struct rts_link_spec *spec, unsigned max_links,
			void *(*peer_new)(void *owner, struct rts_link *l), void *owner, struct rts_link_server **ret);
/* Start or stop accepting (links already made stay). Returns 0 or -errno. */
int rts_link_server_enable(struct rts_link_server *s, bool on);
/* Stop accepting and free the server. Its links stay with their owners. Safe on NULL. */
void rts_link_server_free(struct rts_link_server *s);

/* Queue the message type (payload: its struct) for sending. tag, when not NULL, lets
 * rts_link_withdraw() take it back while it is still queued. Takes the payload's fd, if
 * the type carries one, whatever the result. Returns 0; -ENOTCONN when l is NULL, not up
 * or failed; -EMSGSIZE when a string is over its field's maximum (a bug: the link stays);
 * -ENOBUFS when the queue is full, which fails the link. */
int rts_link_send(struct rts_link *l, uint32_t type, const void *payload, const void *tag);

/* Take a queued, unsent message with this tag out of the queue (its fd is closed).
 * Returns true when there was one. */
bool rts_link_withdraw(struct rts_link *l, const void *tag);

/* HELLO is done and the link has not failed. */
bool rts_link_up(const struct rts_link *l);
/* Up and not congested: a producer that can wait should send only then (and wait for
 * on_drain otherwise). */
bool rts_link_has_room(const struct rts_link *l);

/* Fail the link with err (the caller has logged why): no more I/O; on_down follows from
 * its own event. Idempotent. */
void rts_link_fail(struct rts_link *l, int err);

/* Close and free l now, without on_down: for shutdown and for owners that go away first.
 * Never from one of l's own callbacks. Safe on NULL. */
void rts_link_free(struct rts_link *l);

/* Typed sends: rts_link_send_turn_done(l, &(struct rts_msg_turn_done){...}), and the same
 * with a tag (rts_link_send_turn_run_tagged). */
#define RTS_LINK_SEND_(NAME, name, number, link, dir, has_fd)                                               \
	static inline int rts_link_send_##name(struct rts_link *l, const struct rts_msg_##name *m)         \
	{                                                                                                   \
		return rts_link_send(l, RTS_MSG_##NAME, m, NULL);                                           \
	}                                                                                                   \
	static inline int rts_link_send_##name##_tagged(struct rts_link *l, const struct rts_msg_##name *m, \
							const void *tag)                                    \
	{                                                                                                   \
		return rts_link_send(l, RTS_MSG_##NAME, m, tag);                                            \
	}
RTS_PROTO_MESSAGES(RTS_LINK_SEND_)

#endif
