/* SPDX-License-Identifier: Apache-2.0 */
/* Memory notes: the memory_set, memory_get and memory_remove tools (seed "Memory and
 * scope"). Two scopes: "speaker", always the current speaker's own namespace (no argument
 * can name another speaker), and "channel", shared by everyone in the channel's workspace.
 *
 * File .sandbox/memory.json: {"v":1,"speakers":{SPEAKER_ID:{KEY:VALUE}},"channel":{KEY:VALUE}}.
 * Caps (seed): 256 entries in all (every speaker namespace and the channel scope together),
 * 2,048 characters per value counted as Unicode code points (a value may hold up to 8 KiB of
 * UTF-8), 512 KiB for the serialised file; keys are 1..128 printable characters. A change
 * that would break a cap is refused with an error result the model reads, naming the cap,
 * and leaves the stored notes (in memory and on disk) exactly as they were. */
#ifndef WORKER_MEMORY_H
#define WORKER_MEMORY_H

#include <json.h>
#include <stdbool.h>

#include "worker/store.h"

struct worker_memory {
	json_object *root;
	bool reset;	  /* the stored file was unusable and has been moved aside */
	bool unavailable; /* cannot be saved (no usable .sandbox): the tools refuse */
};

/* Load memory.json from s. Never fails: a missing file is empty memory; an unusable one is
 * moved aside and m->reset set; if that is impossible m->unavailable is set. */
void worker_memory_load(struct worker_memory *m, struct worker_store *s);

void worker_memory_free(struct worker_memory *m);

/* True when name is one of the memory tools. */
bool worker_memory_is_tool(const char *name);

/* The three tools as Chat Completions function tools: a new array the caller owns. */
json_object *worker_memory_tool_specs(void);

/* Run memory tool `tool` with the parsed arguments object args (may be NULL when the model
 * sent none or malformed ones) for speaker_id; saves the notes to s when they change.
 * Returns the result text for the model (newly allocated): a JSON object, {"error":...}
 * when the call was refused. */
char *worker_memory_call(struct worker_memory *m, struct worker_store *s, const char *speaker_id, const char *tool,
			 json_object *args);

/* The notes of one scope (speaker_scope: speaker_id's, else the channel's) for the system
 * prompt, at most max JSON-encoded bytes (seed: 4 KiB per scope): a compact JSON object of
 * whole notes in stored order, each value cut to WORKER_PREVIEW_VALUE_MAX with the visible
 * mark, then a line counting the notes left out; "(none)" for an empty scope. The full
 * notes stay reachable with memory_get. Newly allocated. */
char *worker_memory_preview(const struct worker_memory *m, const char *speaker_id, bool speaker_scope, size_t max);

#endif
