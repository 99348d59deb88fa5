/* SPDX-License-Identifier: Apache-2.0 */
/* Control requests: field validation and the route of a message (request.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/json.h"
#include "common/proto.h"
#include "statd/request.h"

const char *statd_route_name(enum statd_route r)
{
	switch (r) {
	case STATD_ROUTE_PASS:
		return "pass";
	case STATD_ROUTE_SANDBOX:
		return "sandbox";
	case STATD_ROUTE_DROP:
	default:
		return "drop";
	}
}

int statd_req_str(json_object *o, const char *key, size_t min, size_t max, bool allow_null, const char **out)
{
	json_object *v = NULL;
	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!v)
		return allow_null ? 0 : -1;
	if (!json_object_is_type(v, json_type_string))
		return -1;
	size_t n = (size_t)json_object_get_string_len(v);
	const char *s = json_object_get_string(v);
	/* "\u0000" survives json-c's parser; it would cut the string short later on. */
	if (n < min || n > max || strlen(s) != n)
		return -1;
	*out = s;
	return 1;
}

/* A required boolean member. */
static bool req_bool(json_object *o, const char *key, bool *out)
{
	json_object *v = rts_json_get(o, key);
	if (!v || !json_object_is_type(v, json_type_boolean))
		return false;
	*out = json_object_get_boolean(v);
	return true;
}

bool statd_req_channel(json_object *req, const char **channel)
{
	return statd_req_str(req, "channel", 1, RTS_CHANNEL_MAX, false, channel) == 1;
}

bool statd_req_only_fields(json_object *o, const char *const *fields)
{
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		bool known = false;
		for (const char *const *f = fields; *f && !known; f++)
			known = strcmp(key, *f) == 0;
		if (!known)
			return false;
	}
	return true;
}

bool statd_req_id_valid(json_object *id)
{
	if (json_object_is_type(id, json_type_string)) {
		size_t n = (size_t)json_object_get_string_len(id);
		return n <= STATD_ID_MAX && strlen(json_object_get_string(id)) == n;
	}
	if (json_object_is_type(id, json_type_int)) {
		int64_t v = json_object_get_int64(id);
		return v >= -STATD_ID_INT_MAX && v <= STATD_ID_INT_MAX;
	}
	return false;
}

static int refuse(const char **code, const char **detail, const char *c, const char *d)
{
	*code = c;
	*detail = d;
	return -EINVAL;
}

#define INVALID(d) refuse(code, detail, STATD_E_INVALID_REQUEST, d)

static int parse_author(json_object *author, struct statd_message *m, const char **code, const char **detail)
{
	static const char *const author_fields[] = {"id", "name", "principalId", "tier", "bot", "integration", NULL};
	if (!json_object_is_type(author, json_type_object))
		return INVALID("author must be an object or null");
	if (!statd_req_only_fields(author, author_fields))
		return INVALID("author has an unknown field");
	if (statd_req_str(author, "id", 1, RTS_SPEAKER_FIELD_MAX, false, &m->author_id) != 1)
		return INVALID("author.id must be a string of 1 to 256 bytes");
	/* Not empty: the worker's input contract wants a speaker name (worker/input.c). */
	if (statd_req_str(author, "name", 1, RTS_SPEAKER_FIELD_MAX, false, &m->author_name) != 1)
		return INVALID("author.name must be a string of 1 to 256 bytes");
	if (statd_req_str(author, "principalId", 0, RTS_SPEAKER_FIELD_MAX, true, &m->principal_id) < 0)
		return INVALID("author.principalId must be a string of at most 256 bytes or null");
	const char *tier = NULL;
	int r = statd_req_str(author, "tier", 0, RTS_SPEAKER_FIELD_MAX, true, &tier);
	if (r < 0)
		return INVALID("author.tier must be a string of at most 256 bytes or null");
	m->has_tier = r == 1 && tier[0]; /* an empty tier is no tier */
	if (!req_bool(author, "bot", &m->bot))
		return INVALID("author.bot must be a boolean");
	if (!req_bool(author, "integration", &m->integration))
		return INVALID("author.integration must be a boolean");
	m->has_author = true;
	return 0;
}

int statd_message_parse(json_object *req, struct statd_message *m, const char **code, const char **detail)
{
	static const char *const fields[] = {"op",	 "id",	 "channel",	"guild",
					     "author", "addressed", "text", "attachments", NULL};
	*m = (struct statd_message){0};
	*code = *detail = NULL;
	/* The id and the channel first, each on its own: they decide the route of whatever
	 * answer this request gets. */
	json_object *id = rts_json_get(req, "id");
	if (id && statd_req_id_valid(id))
		m->id = id;
	bool channel_ok = statd_req_channel(req, &m->channel);

	if (!id)
		return INVALID("id is required");
	if (!m->id)
		return INVALID("id must be a string of at most 256 bytes or an integer of magnitude below 2^53");
	if (!channel_ok)
		return INVALID("channel must be a string of 1 to 512 bytes");
	/* A typo must not silently change what a request means. */
	if (!statd_req_only_fields(req, fields))
		return INVALID("unknown field for this op");
	if (!req_bool(req, "guild", &m->guild))
		return INVALID("guild must be a boolean");
	if (!req_bool(req, "addressed", &m->addressed))
		return INVALID("addressed must be a boolean");

	json_object *author = NULL;
	if (!json_object_object_get_ex(req, "author", &author))
		return INVALID("author is required (an object or null)");
	if (author) {
		int r = parse_author(author, m, code, detail);
		if (r < 0)
			return r;
	}

	json_object *text = rts_json_get(req, "text");
	if (!text || !json_object_is_type(text, json_type_string))
		return INVALID("text must be a string");
	size_t tlen = (size_t)json_object_get_string_len(text);
	if (tlen > RTS_TEXT_MAX)
		return refuse(code, detail, STATD_E_TEXT_TOO_LONG, "text is longer than 65536 bytes");
	m->text = json_object_get_string(text);
	if (strlen(m->text) != tlen)
		return INVALID("text must not contain NUL characters");

	json_object *att = rts_json_get(req, "attachments"); /* optional; null is absent */
	if (att) {
		if (!json_object_is_type(att, json_type_int))
			return INVALID("attachments must be an integer");
		int64_t n = json_object_get_int64(att);
		if (n < 0 || n > UINT32_MAX)
			return INVALID("attachments must be from 0 to 4294967295");
		m->attachments = (uint32_t)n;
	}
	return 0;
}

bool statd_message_eligible(const struct statd_message *m)
{
	return m->guild && m->has_author && !m->bot && !m->integration && m->has_tier && m->addressed &&
	       m->principal_id && m->principal_id[0];
}

enum statd_route statd_message_route(const struct statd_message *m, bool valid, enum statd_mode mode)
{
	if (!m->id || !m->channel)
		return STATD_ROUTE_DROP;
	if (mode == STATD_MODE_OFF)
		return STATD_ROUTE_PASS;
	if (!valid || !statd_message_eligible(m))
		return STATD_ROUTE_DROP;
	return STATD_ROUTE_SANDBOX;
}

json_object *statd_message_answer(json_object *id, enum statd_route route, const char *code, const char *detail)
{
	json_object *a = json_object_new_object();
	if (id)
		json_object_object_add(a, "id", json_object_get(id));
	json_object_object_add(a, "route", json_object_new_string(statd_route_name(route)));
	if (code) {
		json_object_object_add(a, "error", json_object_new_string(code));
		if (detail)
			json_object_object_add(a, "detail", json_object_new_string(detail));
	}
	return a;
}
