/* SPDX-License-Identifier: Apache-2.0 */
/* How a caller stops a blocking step early (a fetch, a name resolution, a child process):
 * its own deadline, a descriptor that becomes readable, a descriptor whose hang-up means
 * stop, and a predicate, so brokerd can pass a turn's deadline, its closing flag and the
 * worker's connection. Every field is optional; RTS_CANCEL_NONE has none. */
#ifndef RTS_CANCEL_H
#define RTS_CANCEL_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rts_cancel {
	uint64_t deadline_ms;	    /* CLOCK_MONOTONIC ms (rts_now_ms()); 0: none */
	int wake_fd;		    /* readable (or in error) means stop; -1: none */
	int hangup_fd;		    /* a hang-up (POLLHUP/POLLERR) means stop; -1: none */
	bool (*cancelled)(void *arg); /* true means stop; asked at least once a second; NULL: none */
	void *arg;
};
#define RTS_CANCEL_NONE ((struct rts_cancel){.deadline_ms = 0, .wake_fd = -1, .hangup_fd = -1})

/* Most pollfd entries rts_cancel_pollfds() adds. */
#define RTS_CANCEL_POLLFDS 2u

/* True when c's predicate says stop (c may be NULL). */
bool rts_cancel_fired(const struct rts_cancel *c);

/* The earlier of deadline_ms and c's deadline (c may be NULL). */
uint64_t rts_cancel_deadline(uint64_t deadline_ms, const struct rts_cancel *c);

/* Append c's descriptors to p (room for RTS_CANCEL_POLLFDS more): the wake fd for POLLIN,
 * the hang-up fd with no events (poll reports POLLHUP/POLLERR anyway, and bytes the peer
 * sends can neither wake nor cancel us). Returns how many were added. */
size_t rts_cancel_pollfds(const struct rts_cancel *c, struct pollfd *p);

/* After poll(): true when one of the n entries rts_cancel_pollfds() added fired. */
bool rts_cancel_polled(const struct pollfd *p, size_t n);

/* How long one poll() may wait (ms) until deadline_ms: at most a second when c has a
 * predicate, so it is asked that often; 0 when the deadline passed. */
int rts_cancel_poll_timeout(uint64_t deadline_ms, const struct rts_cancel *c);

/* Wait until fd (may be -1) is readable, deadline_ms passes (-ETIMEDOUT) or c cancels
 * (-ECANCELED). Returns 0 when fd became readable, or -errno from poll(). */
int rts_cancel_wait(int fd, uint64_t deadline_ms, const struct rts_cancel *c);

#endif
