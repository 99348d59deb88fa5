/* SPDX-License-Identifier: Apache-2.0 */
/* The control operations that go through the channel queues, and the queue's answers and
 * events as control-protocol JSON (HACKING.md "Control protocol answers").
 *
 * Depends on control.c (answer slots, events) and the queue's inputs (queue.h); the queue
 * reaches this file only through its answer, event and release ops. */
#include "config.h"

#include "common/json.h"
#include "common/util.h"
#include "statd/rich.h"
#include "statd/statd.h"

/* Where a queued request's answer and events go: an answer slot on a connection, which
 * may have been dropped meanwhile (then they are discarded). */
struct statd_origin {
	struct statd_conn *conn; /* reference */
	uint64_t seq;		 /* the request's answer slot on conn */
	json_object *id;	 /* the request's id (reference), echoed in answers and events */
};

static struct statd_origin *origin_new(struct statd_conn *c, uint64_t seq, json_object *id)
{
	struct statd_origin *o = rts_xcalloc(1, sizeof(*o));
	o->conn = statd_conn_ref(c);
	o->seq = seq;
	o->id = json_object_get(id);
	return o;
}

void statd_control_release(void *owner, struct statd_origin *o)
{
	if (!o)
		return;
	statd_conn_unref(o->conn);
	json_object_put(o->id);
	free(o);
}

/* The control protocol's word for a refusal. */
static const char *refusal_code(enum statd_refusal r)
{
	switch (r) {
	case STATD_REFUSAL_SHUTTING_DOWN:
		return STATD_E_SHUTTING_DOWN;
	case STATD_REFUSAL_BUSY:
		return STATD_E_BUSY;
	case STATD_REFUSAL_TOO_MANY_CHANNELS:
		return STATD_E_TOO_MANY_CHANNELS;
	case STATD_REFUSAL_QUEUE_FULL:
		return STATD_E_QUEUE_FULL;
	case STATD_REFUSAL_UNAVAILABLE:
		return STATD_E_UNAVAILABLE;
	case STATD_REFUSAL_STATE_WRITE:
	case STATD_REFUSAL_NONE: /* never asked for */
	default:
		return STATD_E_STATE_WRITE;
	}
}

/* The control protocol's error code of a turn's outcome (NULL: a reply). */
static const char *outcome_code(enum statd_outcome outcome)
{
	switch (outcome) {
	case STATD_OUTCOME_REPLY:
		return NULL;
	case STATD_OUTCOME_TIMEOUT:
		return STATD_EV_TURN_TIMEOUT;
	case STATD_OUTCOME_CANCELLED:
		return STATD_EV_TURN_CANCELLED;
	case STATD_OUTCOME_CLEANUP_FAILED:
		return STATD_EV_CLEANUP_FAILED;
	case STATD_OUTCOME_UNAVAILABLE:
		return STATD_EV_UNAVAILABLE;
	case STATD_OUTCOME_ATTACHMENT_REFUSED:
		return STATD_EV_ATTACHMENT_REFUSED;
	case STATD_OUTCOME_ATTACHMENT_TOO_LARGE:
		return STATD_EV_ATTACHMENT_TOO_LARGE;
	case STATD_OUTCOME_ATTACHMENT_FAILED:
		return STATD_EV_ATTACHMENT_FAILED;
	case STATD_OUTCOME_FAILED:
	default:
		return STATD_EV_TURN_FAILED;
	}
}

static json_object *ok_answer(json_object *id, const char *channel)
{
	json_object *a = json_object_new_object();
	json_object_object_add(a, "id", json_object_get(id));
	json_object_object_add(a, "ok", json_object_new_boolean(1));
	if (channel)
		json_object_object_add(a, "channel", json_object_new_string(channel));
	return a;
}

void statd_control_answer(void *owner, struct statd_origin *o, const struct statd_answer *a)
{
	json_object *j;
	switch (a->kind) {
	case STATD_ANSWER_SANDBOX:
		j = statd_message_answer(o->id, STATD_ROUTE_SANDBOX, NULL, NULL);
		break;
	case STATD_ANSWER_MODE:
		if (a->error) {
			j = statd_error_answer(o->id, refusal_code(a->error));
			break;
		}
		j = ok_answer(o->id, a->channel);
		json_object_object_add(j, "mode", json_object_new_string(statd_mode_name(a->mode)));
		if (a->profile)
			json_object_object_add(j, "profile", json_object_new_string(a->profile));
		break;
	case STATD_ANSWER_FRESH:
	default:
		if (a->error) {
			j = statd_error_answer(o->id, refusal_code(a->error));
			break;
		}
		j = ok_answer(o->id, a->channel);
		json_object_object_add(j, "fresh", json_object_new_boolean(1));
		break;
	}
	statd_conn_answer(o->conn, o->seq, j);
}

void statd_control_event(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply,
			 const struct statd_rich_reply *rich)
{
	statd_metrics_outcome(owner, outcome);
	const char *code = outcome_code(outcome);
	json_object *e = json_object_new_object();
	json_object_object_add(e, "id", json_object_get(o->id));
	json_object_object_add(e, "event", json_object_new_string(code ? "error" : "reply"));
	if (code) {
		json_object_object_add(e, "error", json_object_new_string(code));
	} else if (rich) {
		/* DESIGN.md 8.5: a rich reply's files go with its text. */
		json_object_object_add(e, "text", json_object_get(rich->text));
		if (json_object_array_length(rich->files) > 0)
			json_object_object_add(e, "files", json_object_get(rich->files));
	} else {
		json_object_object_add(e, "text", json_object_new_string(reply ? reply : ""));
	}
	statd_conn_event(o->conn, o->seq, e);
}

/* The attachments a rich message names, as the queue takes them (url and name only). */
static struct statd_attachment *attachments_of(json_object *list, size_t *n)
{
	*n = list ? json_object_array_length(list) : 0;
	if (*n == 0)
		return NULL;
	struct statd_attachment *v = rts_xcalloc(*n, sizeof(*v));
	for (size_t i = 0; i < *n; i++) {
		json_object *a = json_object_array_get_idx(list, i);
		v[i].url = rts_xstrdup(rts_json_get_string(a, "url"));
		const char *name = rts_json_get_string(a, "name");
		v[i].name = name ? rts_xstrdup(name) : NULL;
	}
	return v;
}

static void attachments_free(struct statd_attachment *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].url);
		free(v[i].name);
	}
	free(v);
}

json_object *statd_control_message(struct statd *d, struct statd_conn *c, uint64_t seq, const struct statd_message *m,
				   bool rich)
{
	struct statd_origin *o = origin_new(c, seq, m->id);
	struct statd_turn_request req = {
		.channel = m->channel,
		.speaker_id = m->author_id,
		.speaker_name = m->author_name,
		.principal_id = m->principal_id,
		.text = m->text,
		.attachments = m->attachments,
		.rich = rich,
	};
	size_t n_images = m->images ? json_object_array_length(m->images) : 0;
	if (rich) {
		req.images_json = statd_rich_images_render(m->images, &req.images_len);
		req.attachment_list = attachments_of(m->attachment_list, &req.n_attachments);
	} else {
		/* A sandboxed channel is text-only: its worker is told how many attachments and
		 * images there were, and gets none of them (seed: attachments are not
		 * downloaded in the sealed mode). */
		uint64_t count = (uint64_t)m->attachments + n_images;
		req.attachments = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
	}
	enum statd_refusal r = statd_queue_turn(d->queue, &req, o);
	if (r == STATD_REFUSAL_NONE)
		return NULL;
	free(req.images_json);
	attachments_free(req.attachment_list, req.n_attachments);
	statd_control_release(d, o);
	/* The channel is on: the bot must not hand the message to a host agent because statd
	 * could not take it (request.h). */
	return statd_message_answer(m->id, STATD_ROUTE_DROP, refusal_code(r), NULL);
}

json_object *statd_control_mode(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
				const char *channel, enum statd_mode mode, const char *profile)
{
	/* Only a profile the operator configured (DESIGN.md 8.5); nothing is recorded
	 * otherwise. */
	if (mode == STATD_MODE_RICH && !d->cfg->rich.enabled)
		return statd_error_answer(id, STATD_E_RICH_UNAVAILABLE);
	if (mode == STATD_MODE_RICH && !rts_rich_profile_find(&d->cfg->rich, profile))
		return statd_error_answer(id, STATD_E_UNKNOWN_PROFILE);
	struct statd_origin *o = origin_new(c, seq, id);
	enum statd_refusal r = statd_queue_mode(d->queue, channel, mode, profile, o);
	if (r == STATD_REFUSAL_NONE)
		return NULL;
	statd_control_release(d, o);
	return statd_error_answer(id, refusal_code(r));
}

json_object *statd_control_fresh(struct statd *d, struct statd_conn *c, uint64_t seq, json_object *id,
				 const char *channel)
{
	struct statd_origin *o = origin_new(c, seq, id);
	enum statd_refusal r = statd_queue_fresh(d->queue, channel, o);
	if (r == STATD_REFUSAL_NONE)
		return NULL;
	statd_control_release(d, o);
	return statd_error_answer(id, refusal_code(r));
}

json_object *statd_control_cancel(struct statd *d, json_object *id, const char *channel)
{
	unsigned n = statd_queue_cancel(d->queue, channel);
	json_object *a = ok_answer(id, channel);
	json_object_object_add(a, "cancelled", json_object_new_int64(n));
	return a;
}

/* "ready" when runnerd said channel's warm spare waits for its next turn, else "none". */
static const char *spare_word(const struct statd *d, const char *channel)
{
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(channel, hash);
	for (const char *p = d->spares_ready; *p; p += RTS_HASH_HEX_LEN)
		if (memcmp(p, hash, RTS_HASH_HEX_LEN) == 0)
			return "ready";
	return "none";
}

json_object *statd_control_status(struct statd *d, json_object *id, const char *channel)
{
	json_object *a = ok_answer(id, channel);
	if (channel) {
		enum statd_mode mode = STATD_MODE_OFF;
		(void)statd_state_get(d->state, channel, &mode); /* never switched: off */
		struct statd_channel_status st;
		statd_queue_channel_status(d->queue, channel, &st);
		json_object_object_add(a, "mode", json_object_new_string(statd_mode_name(mode)));
		const char *profile = statd_state_profile(d->state, channel);
		if (mode == STATD_MODE_RICH && profile) {
			json_object_object_add(a, "profile", json_object_new_string(profile));
			/* The journald tag of the channel's container (rich-design.md section 1):
			 * the hash prefix, never the key a guest's bot chose. */
			char hash[RTS_HASH_HEX_LEN + 1], tag[64];
			rts_channel_hash(channel, hash);
			snprintf(tag, sizeof(tag), "sandbox/%.16s", hash);
			json_object_object_add(a, "logTag", json_object_new_string(tag));
		}
		json_object_object_add(a, "running", json_object_new_boolean(st.running));
		json_object_object_add(a, "queued", json_object_new_int64(st.queued));
		json_object_object_add(a, "fresh", json_object_new_boolean(st.fresh));
		json_object_object_add(a, "spare", json_object_new_string(spare_word(d, channel)));
	} else {
		unsigned running, queued;
		statd_queue_totals(d->queue, &running, &queued);
		json_object_object_add(a, "channels", json_object_new_int64((int64_t)statd_state_count(d->state)));
		json_object_object_add(a, "on", json_object_new_int64((int64_t)statd_state_count_on(d->state)));
		json_object_object_add(a, "rich", json_object_new_int64((int64_t)statd_state_count_rich(d->state)));
		json_object_object_add(a, "running", json_object_new_int64(running));
		json_object_object_add(a, "queued", json_object_new_int64(queued));
		/* Their containers are live too: gc must not take them. */
		json_object_object_add(a, "prechecks", json_object_new_int64(statd_prechecks_running(d)));
		/* Warm spares ready, all channels together (they are containers too). */
		json_object_object_add(a, "spares",
				       json_object_new_int64((int64_t)(strlen(d->spares_ready) / RTS_HASH_HEX_LEN)));
	}
	return a;
}

json_object *statd_control_channels(struct statd *d, json_object *id)
{
	json_object *a = ok_answer(id, NULL);
	json_object *list = json_object_new_array_ext((int)statd_state_count(d->state));
	for (size_t i = 0; i < statd_state_count(d->state); i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "channel", json_object_new_string(statd_state_key(d->state, i)));
		enum statd_mode mode = statd_state_mode_at(d->state, i);
		json_object_object_add(e, "mode", json_object_new_string(statd_mode_name(mode)));
		if (statd_state_profile_at(d->state, i))
			json_object_object_add(e, "profile", json_object_new_string(statd_state_profile_at(d->state, i)));
		json_object_object_add(e, "spare", json_object_new_string(spare_word(d, statd_state_key(d->state, i))));
		json_object_array_add(list, e);
	}
	json_object_object_add(a, "channels", list);
	return a;
}
