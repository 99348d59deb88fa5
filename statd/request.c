/* SPDX-License-Identifier: Apache-2.0 */
/* Control requests: field validation and the route of a message (request.h). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/proto.h"
#include "common/tools.h"
#include "common/util.h"
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

/* Integers are bounded by the field's range; strings here. */
bool statd_id_check(struct rts_jctx *ctx, json_object *id, void *base)
{
	if (json_object_is_type(id, json_type_string) && json_object_get_string_len(id) > (int)STATD_ID_MAX)
		return rts_jfail(ctx, "must be " STATD_ID_WHAT);
	return true;
}

#define ID_FIELD(off) STATD_ID_FIELD(off)
#define OP_FIELD(store_, off)                                                                                          \
	{.key = "op", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = STATD_OP_MAX,                 \
	 .store = (store_), .at = (off)}
#define CHANNEL_FIELD(flags_, off)                                                                                     \
	{.key = "channel", .types = RTS_JT_STRING, .flags = (flags_), .min = 1, .max = RTS_CHANNEL_MAX,                \
	 .store = RTS_JS_STR, .at = (off)}
/* Speaker fields: their bound, and a tier or principal may be null or absent. */
#define SPEAKER_FIELD(k, flags_, lo, off)                                                                              \
	{.key = (k), .types = RTS_JT_STRING | ((flags_) & RTS_JF_REQUIRED ? 0 : RTS_JT_NULL), .flags = (flags_),       \
	 .min = (lo), .max = RTS_SPEAKER_FIELD_MAX, .store = RTS_JS_STR, .at = (off)}

#define MSG(m) offsetof(struct statd_message, m)

static bool tier_check(struct rts_jctx *ctx, json_object *tier, void *base)
{
	struct statd_message *m = base;
	if (m)
		m->has_tier = tier && json_object_get_string_len(tier) > 0; /* an empty tier is no tier */
	return true;
}

static const struct rts_jspec author_spec = {
	.fields = (const struct rts_jfield[]){
		SPEAKER_FIELD("id", RTS_JF_REQUIRED, 1, MSG(author_id)),
		/* Not empty: the worker's input contract wants a speaker name (worker/input.c). */
		SPEAKER_FIELD("name", RTS_JF_REQUIRED, 1, MSG(author_name)),
		SPEAKER_FIELD("principalId", 0, 0, MSG(principal_id)),
		{.key = "tier", .types = RTS_JT_STRING | RTS_JT_NULL, .max = RTS_SPEAKER_FIELD_MAX,
		 .check = tier_check},
		{.key = "bot", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL, .at = MSG(bot)},
		{.key = "integration", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL,
		 .at = MSG(integration)},
		{0},
	},
	.unknown = "has an unknown field",
};

/* The longest text of any mode; statd_message_check_mode() holds each mode to its own. */
static bool text_check(struct rts_jctx *ctx, json_object *text, void *base)
{
	if (json_object_get_string_len(text) > (int)RTS_RICH_TEXT_BYTES_MAX)
		return rts_jfail_code(ctx, STATD_E_TEXT_TOO_LONG, "is longer than %u bytes", RTS_RICH_TEXT_BYTES_MAX);
	return true;
}

size_t statd_utf8_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

int statd_message_check_mode(const struct statd_message *m, enum statd_mode mode, const char **code,
			     const char **detail)
{
	size_t len = strlen(m->text);
	if (mode == STATD_MODE_RICH ? statd_utf8_chars(m->text, len) > RTS_RICH_TEXT_CHARS_MAX : len > RTS_TEXT_MAX) {
		*code = STATD_E_TEXT_TOO_LONG;
		*detail = mode == STATD_MODE_RICH ? "text is longer than 100000 characters (a rich channel's bound)"
						  : "text is longer than 65536 bytes (a sandboxed channel's bound)";
		return -EINVAL;
	}
	return 0;
}
_Static_assert(RTS_RICH_TEXT_CHARS_MAX == 100000 && RTS_TEXT_MAX == 65536, "the details above name these bounds");

/* ---- images and attachments (seed, "Worker content and files") ---- */

/* The media types a rich turn's image may have, and the signature its bytes start with. */
static const struct {
	const char *mime;
	size_t at, len; /* where the signature is, and how long */
	const char *sig;
} image_sigs[] = {
	{"image/png", 0, 8, "\x89PNG\r\n\x1a\n"},
	{"image/jpeg", 0, 3, "\xff\xd8\xff"},
	{"image/gif", 0, 6, "GIF87a"},
	{"image/gif", 0, 6, "GIF89a"},
	{"image/webp", 0, 4, "RIFF"}, /* and "WEBP" at 8: see image_data_check */
};
static const char *const image_mimes[] = {"image/png", "image/jpeg", "image/webp", "image/gif", NULL};

/* The data decodes to at most RTS_RICH_IMAGE_BYTES_MAX bytes. */
static bool image_data_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	size_t bytes = rts_base64_decoded_len(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (bytes == SIZE_MAX)
		return rts_jfail(ctx, "must be base64 (standard alphabet, padded)");
	if (bytes > RTS_RICH_IMAGE_BYTES_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes", RTS_RICH_IMAGE_BYTES_MAX);
	return true;
}

/* The bytes start with the signature of the item's mime type: a PNG is what it says. */
static bool image_check(struct rts_jctx *ctx, json_object *img, void *base)
{
	const char *mime = rts_json_get_string(img, "mime");
	json_object *data = rts_json_get(img, "data");
	unsigned char head[12];
	size_t got = rts_base64_decode_prefix(json_object_get_string(data), (size_t)json_object_get_string_len(data),
					      head, sizeof(head));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(image_sigs); i++) {
		if (strcmp(image_sigs[i].mime, mime) != 0 || got < image_sigs[i].at + image_sigs[i].len ||
		    memcmp(head + image_sigs[i].at, image_sigs[i].sig, image_sigs[i].len) != 0)
			continue;
		if (strcmp(mime, "image/webp") == 0 && (got < 12 || memcmp(head + 8, "WEBP", 4) != 0))
			continue;
		return true;
	}
	return rts_jfail_at(ctx, "data", "does not start with the signature of an %s image", mime);
}

static const struct rts_jspec image_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "mime", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = image_mimes,
		 .what = "\"image/png\", \"image/jpeg\", \"image/webp\" or \"image/gif\""},
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = image_data_check},
		{0},
	},
	.unknown = "has an unknown field",
	.check = image_check,
};

/* Every image's data was checked; now their sum. */
static bool images_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	uint64_t total = 0;
	for (size_t i = 0, n = json_object_array_length(v); i < n; i++) {
		json_object *d = rts_json_get(json_object_array_get_idx(v, i), "data");
		total += rts_base64_decoded_len(json_object_get_string(d), (size_t)json_object_get_string_len(d));
	}
	if (total > RTS_RICH_IMAGES_TOTAL_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes in all", RTS_RICH_IMAGES_TOTAL_MAX);
	return true;
}

/* An attachment URL: http:// or https:// and printable ASCII without spaces. Whether it
 * may be fetched is the controlled fetch's to say (brokerd, common/fetch.h), per hop. */
static bool url_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *u = json_object_get_string(v);
	if (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0)
		return rts_jfail(ctx, "must be an http:// or https:// URL");
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return rts_jfail(ctx, "must be printable ASCII without spaces");
	return true;
}

static const struct rts_jspec attachment_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "url", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_ATTACH_URL_MAX,
		 .check = url_check},
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_NULL_ABSENT, .min = 1,
		 .max = RTS_RICH_FILE_NAME_MAX},
		{0},
	},
	.unknown = "has an unknown field",
};

/* "attachments": a count (any mode), or a list of URLs to fetch (rich channels), whose
 * items the row checked already. */
static bool attachments_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	struct statd_message *m = base;
	if (!json_object_is_type(v, json_type_array))
		return true; /* the count: stored by the row */
	size_t n = json_object_array_length(v);
	if (n > RTS_RICH_ATTACHMENTS_MAX)
		return rts_jfail(ctx, "must list at most %u attachments", RTS_RICH_ATTACHMENTS_MAX);
	if (m) {
		m->attachment_list = v;
		m->attachments = (uint32_t)n;
	}
	return true;
}

/* In the order statd reports problems: the id and channel decide the route of whatever
 * answer the request gets, so they come first. */
static const struct rts_jfield id_field = ID_FIELD(MSG(id));
static const struct rts_jfield channel_field = CHANNEL_FIELD(RTS_JF_REQUIRED, MSG(channel));
static const struct rts_jspec message_spec = {
	.fields = (const struct rts_jfield[]){
		/* The caller dispatched on it (statd_head_parse()). */
		{.key = "op", .types = RTS_JT_STRING, .max = STATD_OP_MAX},
		ID_FIELD(MSG(id)),
		CHANNEL_FIELD(RTS_JF_REQUIRED, MSG(channel)),
		{.key = "guild", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL,
		 .at = MSG(guild)},
		{.key = "addressed", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED, .store = RTS_JS_BOOL,
		 .at = MSG(addressed)},
		{.key = "author", .types = RTS_JT_OBJECT | RTS_JT_NULL, .flags = RTS_JF_REQUIRED | RTS_JF_PRESENT,
		 .object = &author_spec, .store = RTS_JS_OBJECT, .present_at = MSG(has_author),
		 .missing = "is required (an object or null)"},
		{.key = "text", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = text_check,
		 .store = RTS_JS_STR,
		 .at = MSG(text), .missing = "must be a string"},
		/* Optional; null counts as absent. A count, or a list for a rich channel. */
		{.key = "attachments", .types = RTS_JT_INT | RTS_JT_ARRAY, .flags = RTS_JF_NULL_ABSENT, .min = 0,
		 .max = UINT32_MAX, .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &attachment_spec},
		 .check = attachments_check, .store = RTS_JS_UINT32, .at = MSG(attachments),
		 .what = "a count (an integer from 0 to 4294967295) or a list of {\"url\", \"name\"?}"},
		{.key = "images", .types = RTS_JT_ARRAY, .flags = RTS_JF_NULL_ABSENT, .max = RTS_RICH_IMAGES_MAX,
		 .items = "images",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &image_spec},
		 .check = images_check, .store = RTS_JS_JSON, .at = MSG(images)},
		{0},
	},
	/* A typo must not silently change what a request means. */
	.unknown = "unknown field for this op",
};
static const struct rts_jfield message_root = RTS_JSPEC_ROOT(&message_spec);

/* *code and *detail for the refusal e; detail is written to buf. */
static int refuse(const struct rts_jerr *e, char *buf, const char **code, const char **detail)
{
	rts_jerr_join(e, " ", buf, STATD_DETAIL_MAX);
	if (code)
		*code = e->code ? e->code : STATD_E_INVALID_REQUEST;
	*detail = buf;
	return -EINVAL;
}

int statd_message_parse(json_object *req, struct statd_message *m, const char **code, const char **detail)
{
	*m = (struct statd_message){0};
	*code = *detail = NULL;
	/* The id and the channel first, each on its own: they decide the route of whatever
	 * answer this request gets. */
	struct rts_jerr id_err, channel_err, e;
	bool id_ok = rts_jspec_member(req, &id_field, m, 0, &id_err) == 0;
	bool channel_ok = rts_jspec_member(req, &channel_field, m, 0, &channel_err) == 0;
	if (!id_ok)
		m->id = NULL;
	if (!channel_ok)
		m->channel = NULL;
	if (!id_ok)
		return refuse(&id_err, m->detail, code, detail);
	if (!channel_ok)
		return refuse(&channel_err, m->detail, code, detail);
	if (rts_jspec_validate(req, &message_root, m, 0, &e) < 0)
		return refuse(&e, m->detail, code, detail);
	return 0;
}

/* ---- the other operations ---- */

#define HEAD(m) offsetof(struct statd_head, m)
#define REQ(m) offsetof(struct statd_request, m)

static const struct rts_jfield head_id_field = ID_FIELD(HEAD(id));
static const struct rts_jfield head_op_field = OP_FIELD(RTS_JS_STR, HEAD(op));

int statd_head_parse(json_object *req, struct statd_head *h, const char **detail)
{
	*h = (struct statd_head){0};
	struct rts_jerr e;
	if (rts_jspec_member(req, &head_id_field, h, 0, NULL) < 0)
		h->id = NULL;
	if (rts_jspec_member(req, &head_op_field, h, 0, &e) < 0) {
		h->op = NULL;
		return refuse(&e, h->detail, NULL, detail);
	}
	return 0;
}

static const struct rts_jfield request_id_field = ID_FIELD(REQ(id));

/* The members each operation defines, in the order problems are reported. */
#define REQUEST_SPEC(...)                                                                                              \
	{                                                                                                              \
		.fields = (const struct rts_jfield[]){OP_FIELD(RTS_JS_STR, REQ(op)), ID_FIELD(REQ(id)),                \
						      __VA_ARGS__{0}},                                                 \
		.unknown = "unknown field for this op",                                                                \
	}
static const char *const mode_names[] = STATD_MODE_NAMES;
#define MODE_FIELD                                                                                                     \
	{.key = "mode", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = mode_names,                        \
	 .store = RTS_JS_INDEX, .at = REQ(mode), .what = "\"on\", \"off\" or \"rich\""}

static bool profile_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!rts_name_valid(json_object_get_string(v), RTS_NAME_MAX))
		return rts_jfail(ctx, "must be a profile name ([a-z][a-z0-9_]{0,47})");
	return true;
}

#define PROFILE_FIELD                                                                                                  \
	{.key = "profile", .types = RTS_JT_STRING, .min = 1, .max = RTS_NAME_MAX, .check = profile_name_check,       \
	 .store = RTS_JS_STR, .at = REQ(profile)}

/* A profile exactly with mode rich (DESIGN.md 8.5). */
static bool mode_request_check(struct rts_jctx *ctx, json_object *req, void *base)
{
	bool rich = strcmp(json_object_get_string(rts_json_get(req, "mode")), "rich") == 0;
	if (rich && !rts_json_get(req, "profile"))
		return rts_jfail_at(ctx, "profile", "is required with mode \"rich\"");
	if (!rich && rts_json_get(req, "profile"))
		return rts_jfail_at(ctx, "profile", "is only for mode \"rich\"");
	return true;
}
static const struct {
	const char *name;
	struct rts_jspec spec;
} ops[] = {
	[STATD_OP_MODE] = {"mode",
			   {
				   .fields = (const struct rts_jfield[]){OP_FIELD(RTS_JS_STR, REQ(op)), ID_FIELD(REQ(id)),
									 CHANNEL_FIELD(RTS_JF_REQUIRED, REQ(channel)),
									 MODE_FIELD, PROFILE_FIELD, {0}},
				   .unknown = "unknown field for this op",
				   .check = mode_request_check,
			   }},
	[STATD_OP_STATUS] = {"status", REQUEST_SPEC(CHANNEL_FIELD(0, REQ(channel)), )},
	[STATD_OP_FRESH] = {"fresh", REQUEST_SPEC(CHANNEL_FIELD(RTS_JF_REQUIRED, REQ(channel)), )},
	[STATD_OP_CHANNELS] = {"channels", REQUEST_SPEC()},
	[STATD_OP_CANCEL] = {"cancel", REQUEST_SPEC(CHANNEL_FIELD(RTS_JF_REQUIRED, REQ(channel)), )},
	[STATD_OP_METRICS] = {"metrics", REQUEST_SPEC()},
};

int statd_op_lookup(const char *op, enum statd_op *out)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].name, op) == 0) {
			*out = (enum statd_op)i;
			return 0;
		}
	return -ENOENT;
}

int statd_request_parse(json_object *req, enum statd_op op, struct statd_request *r, const char **detail)
{
	*r = (struct statd_request){0};
	struct rts_jerr e;
	/* Without a valid id the answer cannot be matched, whatever else is wrong. */
	if (rts_jspec_member(req, &request_id_field, r, 0, &e) < 0) {
		r->id = NULL;
		return refuse(&e, r->detail, NULL, detail);
	}
	const struct rts_jfield root = RTS_JSPEC_ROOT(&ops[op].spec);
	if (rts_jspec_validate(req, &root, r, 0, &e) < 0)
		return refuse(&e, r->detail, NULL, detail);
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
