/* SPDX-License-Identifier: Apache-2.0 */
/* One connected SEQPACKET daemon link (statd's or brokerd's) on the sd-event loop: typed
 * messages in, a bounded outgoing queue, and a single deferred close notification so a
 * failure never frees an owner in the middle of its own handler. */
#ifndef RUNNERD_LINK_H
#define RUNNERD_LINK_H

#include <systemd/sd-event.h>

#include "common/msg.h"

/* Messages waiting for a slow peer; beyond that the peer is dropped rather than letting
 * it make runnerd buffer without bound. */
#define RUNNERD_LINK_QUEUE_MAX 256u

struct runnerd_link;

struct runnerd_link_ops {
	/* One received message. A negative return (-EPROTO, -EBADMSG) drops the peer. */
	int (*on_msg)(void *owner, struct rts_msg *m);
	/* The link failed or the peer went away (err: -ECONNRESET, -EPROTO, ...). Called
	 * once, from the event loop; the owner must call runnerd_link_free. */
	void (*on_close)(void *owner, int err);
};

/* Wrap the connected socket fd (taken over, made non-blocking). peer names the other side
 * in log lines ("statd", "brokerd"; kept by pointer). Returns 0 with *ret or -errno (fd is
 * closed then). */
int runnerd_link_new(sd_event *e, int fd, const char *peer, const struct runnerd_link_ops *ops, void *owner,
		     struct runnerd_link **ret);

/* Queue m for sending and release it (its buffer and any fd it carries move into the
 * link; m is left released either way). Returns 0, -ENOTCONN when the link already failed,
 * or -ENOBUFS / -EMSGSIZE / -errno when sending failed, which also fails the link. */
int runnerd_link_send(struct runnerd_link *l, struct rts_msg *m);

/* True once the link failed; on_close follows (or already ran). */
bool runnerd_link_dead(const struct runnerd_link *l);

/* Mark the link failed with err and schedule on_close. Idempotent. */
void runnerd_link_fail(struct runnerd_link *l, int err);

/* Close the socket and drop queued messages. Safe on NULL. */
void runnerd_link_free(struct runnerd_link *l);

#endif
