/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>

#include "common/cancel.h"
#include "common/util.h"

bool rts_cancel_fired(const struct rts_cancel *c)
{
	return c && c->cancelled && c->cancelled(c->arg);
}

uint64_t rts_cancel_deadline(uint64_t deadline_ms, const struct rts_cancel *c)
{
	if (c && c->deadline_ms != 0 && c->deadline_ms < deadline_ms)
		return c->deadline_ms;
	return deadline_ms;
}

size_t rts_cancel_pollfds(const struct rts_cancel *c, struct pollfd *p)
{
	size_t n = 0;
	if (c && c->wake_fd >= 0)
		p[n++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
	if (c && c->hangup_fd >= 0)
		p[n++] = (struct pollfd){.fd = c->hangup_fd, .events = 0};
	return n;
}

bool rts_cancel_polled(const struct pollfd *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i].revents)
			return true;
	return false;
}

int rts_cancel_poll_timeout(uint64_t deadline_ms, const struct rts_cancel *c)
{
	uint64_t now = rts_now_ms();
	if (now >= deadline_ms)
		return 0;
	uint64_t wait = deadline_ms - now;
	/* The predicate is asked at least once a second even when no descriptor wakes us. */
	if (c && c->cancelled && wait > 1000)
		wait = 1000;
	return wait > INT_MAX ? INT_MAX : (int)wait;
}

int rts_cancel_wait(int fd, uint64_t deadline_ms, const struct rts_cancel *c)
{
	for (;;) {
		if (rts_cancel_fired(c))
			return -ECANCELED;
		if (rts_now_ms() >= deadline_ms)
			return -ETIMEDOUT;
		struct pollfd p[1 + RTS_CANCEL_POLLFDS];
		size_t n = 0;
		if (fd >= 0)
			p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
		size_t k = rts_cancel_pollfds(c, p + n);
		int r = poll(p, n + k, rts_cancel_poll_timeout(deadline_ms, c));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		if (fd >= 0 && (p[0].revents & (POLLIN | POLLERR | POLLHUP)))
			return 0;
		if (rts_cancel_polled(p + n, k))
			return -ECANCELED;
	}
}
