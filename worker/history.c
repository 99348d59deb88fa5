/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/json.h"
#include "common/proto.h"
#include "common/util.h"
#include "worker/history.h"
#include "worker/text.h"
#include "worker/worker.h"

#define HISTORY_FILE "history.json"

static bool str_member(json_object *o, const char *key)
{
	json_object *v = rts_json_get(o, key);
	return v && json_object_is_type(v, json_type_string);
}

static bool entry_valid(json_object *e)
{
	if (!json_object_is_type(e, json_type_object) || json_object_object_length(e) != 4)
		return false;
	json_object *sp = rts_json_get(e, "speaker");
	if (!sp || !json_object_is_type(sp, json_type_object) || json_object_object_length(sp) != 2 ||
	    !str_member(sp, "id") || !str_member(sp, "name"))
		return false;
	if (!str_member(e, "user") || !str_member(e, "assistant") || !str_member(e, "time"))
		return false;
	return rts_json_dump_len(e) <= WORKER_HISTORY_ENTRY_MAX;
}

static bool root_valid(json_object *root)
{
	if (!json_object_is_type(root, json_type_object) || json_object_object_length(root) != 2)
		return false;
	json_object *v = rts_json_get(root, "v");
	json_object *a = rts_json_get(root, "exchanges");
	if (!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
		return false;
	if (!a || !json_object_is_type(a, json_type_array) || json_object_array_length(a) > WORKER_HISTORY_MAX)
		return false;
	for (size_t i = 0; i < json_object_array_length(a); i++)
		if (!entry_valid(json_object_array_get_idx(a, i)))
			return false;
	return true;
}

void worker_history_load(struct worker_history *h, struct worker_store *s, bool start_fresh)
{
	*h = (struct worker_history){0};
	h->exchanges = json_object_new_array();
	if (s->dir_fd < 0) {
		h->unavailable = true;
		return;
	}
	/* A fresh start replaces the file on success; until then it stays as it is. */
	if (start_fresh)
		return;
	json_object *o = NULL;
	int r = worker_store_read(s, HISTORY_FILE, &o);
	if (r == 0 && !o)
		return;
	if (r == 0 && root_valid(o)) {
		json_object_put(h->exchanges);
		h->exchanges = json_object_get(rts_json_get(o, "exchanges"));
		json_object_put(o);
		return;
	}
	if (o)
		json_object_put(o);
	fprintf(stderr, "worker: history file unusable (%s), moving it aside\n",
		r < 0 ? strerror(-r) : "invalid content");
	h->reset = true;
	r = worker_store_move_aside(s, HISTORY_FILE);
	if (r < 0) {
		fprintf(stderr, "worker: cannot move the history file aside: %s\n", strerror(-r));
		h->unavailable = true;
	}
}

void worker_history_free(struct worker_history *h)
{
	if (h->exchanges)
		json_object_put(h->exchanges);
	h->exchanges = NULL;
}

static json_object *make_entry(const char *speaker_id, const char *speaker_name, const char *user,
			       const char *assistant, const char *time)
{
	json_object *e = json_object_new_object();
	json_object *sp = json_object_new_object();
	json_object_object_add(sp, "id", json_object_new_string(speaker_id));
	json_object_object_add(sp, "name", json_object_new_string(speaker_name));
	json_object_object_add(e, "speaker", sp);
	json_object_object_add(e, "user", json_object_new_string(user));
	json_object_object_add(e, "assistant", json_object_new_string(assistant));
	json_object_object_add(e, "time", json_object_new_string(time));
	return e;
}

json_object *worker_history_entry(const char *speaker_id, const char *speaker_name, const char *user,
				  const char *assistant, const char *time)
{
	size_t need_u = rts_json_string_len(user, strlen(user));
	size_t need_a = rts_json_string_len(assistant, strlen(assistant));
	cleanup_json json_object *bare = make_entry(speaker_id, speaker_name, "", "", time);
	size_t base = rts_json_dump_len(bare);
	/* The fixed fields are bounded by the input (speaker fields 256 bytes, time 64). */
	size_t avail = base < WORKER_HISTORY_ENTRY_MAX ? WORKER_HISTORY_ENTRY_MAX - base : 0;
	size_t max_u = need_u, max_a = need_a;
	if (need_u + need_a > avail) {
		/* Share the room: a short side keeps all of its text, the other gets the rest. */
		size_t half = avail / 2;
		if (need_u <= half)
			max_a = avail - need_u;
		else if (need_a <= half)
			max_u = avail - need_a;
		else {
			max_u = half;
			max_a = avail - half;
		}
	}
	cleanup_free char *u = worker_text_bound(user, max_u, NULL);
	cleanup_free char *a = worker_text_bound(assistant, max_a, NULL);
	return make_entry(speaker_id, speaker_name, u, a, time);
}

int worker_history_append(struct worker_history *h, struct worker_store *s, json_object *entry)
{
	json_object_array_add(h->exchanges, entry);
	size_t n = json_object_array_length(h->exchanges);
	if (n > WORKER_HISTORY_MAX)
		json_object_array_del_idx(h->exchanges, 0, n - WORKER_HISTORY_MAX);
	if (h->unavailable)
		return -EBADF;
	cleanup_json json_object *root = json_object_new_object();
	json_object_object_add(root, "v", json_object_new_int(1));
	json_object_object_add(root, "exchanges", json_object_get(h->exchanges));
	cleanup_free char *text = rts_json_dump(root);
	return worker_store_write(s, HISTORY_FILE, text, strlen(text));
}
