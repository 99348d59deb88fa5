/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <signal.h>

#include "brokerd/closer.h"

int brokerd_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (!th)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The new thread inherits the mask: blocked from its first instruction. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t detached;
	int r = pthread_create(th ? th : &detached, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return r;
}

void brokerd_closers_init(struct brokerd_closers *cs)
{
	*cs = (struct brokerd_closers){0};
	pthread_mutex_init(&cs->lock, NULL);
}

void brokerd_closers_destroy(struct brokerd_closers *cs)
{
	pthread_mutex_destroy(&cs->lock);
}

int brokerd_closers_start(struct brokerd_closers *cs, struct brokerd_closer *c, void *(*fn)(void *), void *arg)
{
	c->next = cs->closing;
	cs->closing = c;
	int r = brokerd_thread_start(&c->thread, fn, arg);
	c->has_thread = r == 0;
	return r;
}

void brokerd_closers_done(struct brokerd_closers *cs, struct brokerd_closer *c)
{
	pthread_mutex_lock(&cs->lock);
	c->done_next = cs->done;
	cs->done = c;
	pthread_mutex_unlock(&cs->lock);
}

struct brokerd_closer *brokerd_closers_reap(struct brokerd_closers *cs)
{
	pthread_mutex_lock(&cs->lock);
	struct brokerd_closer *c = cs->done;
	if (c)
		cs->done = c->done_next;
	pthread_mutex_unlock(&cs->lock);
	if (!c)
		return NULL;
	for (struct brokerd_closer **p = &cs->closing; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	if (c->has_thread)
		pthread_join(c->thread, NULL);
	return c;
}
