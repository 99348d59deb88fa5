/* SPDX-License-Identifier: Apache-2.0 */
/* Threads of brokerd, and tearing a piece of it down off the main thread.
 *
 * A turn (main.c) or a rich channel (rich.c) is torn down on a closer thread of its own: its
 * teardown joins connection threads that may wait for a tool process's kill grace, which the
 * loop must not. The main thread puts the piece on the closing list and starts the closer;
 * the closer, done, puts it on the done list and wakes the main thread (through the owner's
 * eventfd); the main thread reaps it: off both lists, its thread joined, then finished by
 * the owner (answered for, freed). A piece is on the done list through a link of its own,
 * so the main thread can walk the closing list while closers finish. */
#ifndef BROKERD_CLOSER_H
#define BROKERD_CLOSER_H

#include <pthread.h>
#include <stdbool.h>

/* Start fn(arg) on a new thread with every signal blocked (the main thread takes them
 * through sd-event): joinable, its id in *th, or detached when th is NULL. Returns 0 or the
 * positive errno of pthread_create(). */
int brokerd_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

/* Inside each piece that is torn down this way. */
struct brokerd_closer {
	struct brokerd_closer *next;	  /* in the closing list (main thread) */
	struct brokerd_closer *done_next; /* in the done list (under the list's lock) */
	pthread_t thread;
	bool has_thread; /* thread is to be joined */
};

/* The pieces of one owner being torn down. */
struct brokerd_closers {
	struct brokerd_closer *closing; /* main thread */
	pthread_mutex_t lock;
	struct brokerd_closer *done; /* under lock */
};

void brokerd_closers_init(struct brokerd_closers *cs);
/* After the last reap; the lists must be empty. */
void brokerd_closers_destroy(struct brokerd_closers *cs);

/* Main thread: put c on the closing list and run fn(arg) on its closer thread. Returns 0,
 * or the positive errno of pthread_create(): then there is no thread, c stays on the list,
 * and the caller tears the piece down itself and calls brokerd_closers_done(). */
int brokerd_closers_start(struct brokerd_closers *cs, struct brokerd_closer *c, void *(*fn)(void *), void *arg);

/* The piece of c is torn down (its closer thread, or the main thread when there is none).
 * The caller then wakes the main thread. */
void brokerd_closers_done(struct brokerd_closers *cs, struct brokerd_closer *c);

/* Main thread: a torn-down piece, off both lists and its thread joined, for the caller to
 * finish; NULL when none is done. The most recently done comes first. */
struct brokerd_closer *brokerd_closers_reap(struct brokerd_closers *cs);

#endif
