/* SPDX-License-Identifier: Apache-2.0 */
/* Conversation history: the last ten settled exchanges of the channel (seed "Memory and
 * scope"). Only the user's text and the final reply are kept, never tool transcripts.
 *
 * File .sandbox/history.json: {"v":1,"exchanges":[{"speaker":{"id","name"},"user","assistant",
 * "time"}...]}, oldest first, at most WORKER_HISTORY_MAX entries, each at most
 * WORKER_HISTORY_ENTRY_MAX bytes of JSON. */
#ifndef WORKER_HISTORY_H
#define WORKER_HISTORY_H

#include <json.h>
#include <stdbool.h>

#include "worker/store.h"

struct worker_history {
	json_object *exchanges; /* array, oldest first */
	bool reset;		/* the stored file was unusable and has been moved aside */
	bool unavailable;	/* cannot be saved in this turn */
};

/* Load history.json from s. Never fails: missing means empty; an unusable file is moved
 * aside and h->reset set (h->unavailable when even that fails). With start_fresh the
 * stored exchanges are not loaded at all (seed: startFresh resets history). */
void worker_history_load(struct worker_history *h, struct worker_store *s, bool start_fresh);

void worker_history_free(struct worker_history *h);

/* A new exchange object bounded to WORKER_HISTORY_ENTRY_MAX bytes of JSON: the user and
 * assistant texts are cut (visibly marked) as needed. Caller owns the result. */
json_object *worker_history_entry(const char *speaker_id, const char *speaker_name, const char *user,
				  const char *assistant, const char *time);

/* Append entry (reference taken over), keep the newest WORKER_HISTORY_MAX and write the
 * file. Returns 0 or -errno (nothing written). */
int worker_history_append(struct worker_history *h, struct worker_store *s, json_object *entry);

#endif
