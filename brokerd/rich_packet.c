/* SPDX-License-Identifier: Apache-2.0 */
/* The pure parts of the rich worker protocol (rich_packet.h): what statd's turn input, the
 * worker's ready body and its reply packet may be, and what brokerd builds from them. */
#include "config.h"

#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "common/base64.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/strictjson.h"
#include "common/util.h"

/* ---- the turn input ---- */

/* Unicode code points of len bytes of valid UTF-8. */
size_t brokerd_rich_utf8_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

struct input_check {
	const struct brokerd_binding *b;
	uint64_t images_total, attachments_total;
};

static bool text_chars_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (brokerd_rich_utf8_chars(json_object_get_string(v), (size_t)json_object_get_string_len(v)) > RTS_RICH_TEXT_CHARS_MAX)
		return rts_jfail(ctx, "must be at most %u characters", RTS_RICH_TEXT_CHARS_MAX);
	return true;
}

static bool image_data_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	size_t n = rts_base64_decoded_len(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (n == SIZE_MAX)
		return rts_jfail(ctx, "must be base64");
	if (n > RTS_RICH_IMAGE_BYTES_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes", RTS_RICH_IMAGE_BYTES_MAX);
	return true;
}

/* A name the host wrote into the workspace: no '/', no leading dot, no control byte. */
static bool safe_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *s = json_object_get_string(v);
	if (s[0] == '.' || strchr(s, '/'))
		return rts_jfail(ctx, "must be a safe file name");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return rts_jfail(ctx, "must be a safe file name");
	return true;
}

static const char *const image_mimes[] = {"image/png", "image/jpeg", "image/webp", "image/gif", NULL};
static const struct rts_jspec image_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "mime", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = image_mimes},
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = image_data_check},
		{0},
	},
};

static const struct rts_jspec attachment_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_RICH_FILE_NAME_MAX,
		 .check = safe_name_check},
		{.key = "path", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 4096},
		{.key = "mime", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_RICH_MIME_MAX},
		{.key = "bytes", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 0,
		 .max = RTS_RICH_ATTACHMENT_BYTES_MAX},
		{0},
	},
};

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

static bool attachments_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	uint64_t total = 0;
	for (size_t i = 0, n = json_object_array_length(v); i < n; i++)
		total += (uint64_t)json_object_get_int64(rts_json_get(json_object_array_get_idx(v, i), "bytes"));
	if (total > RTS_RICH_ATTACHMENTS_TOTAL_MAX)
		return rts_jfail(ctx, "must hold at most %u bytes in all", RTS_RICH_ATTACHMENTS_TOTAL_MAX);
	return true;
}

static const struct rts_jspec speaker_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "id", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_SPEAKER_FIELD_MAX},
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_SPEAKER_FIELD_MAX},
		{.key = "principalId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_SPEAKER_FIELD_MAX},
		{0},
	},
};

static const struct rts_jspec input_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "v", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = 1, .max = 1},
		{.key = "turnId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = RTS_TURN_ID_LEN,
		 .max = RTS_TURN_ID_LEN},
		{.key = "speaker", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .object = &speaker_spec},
		{.key = "text", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_RICH_TEXT_BYTES_MAX,
		 .check = text_chars_check},
		{.key = "images", .types = RTS_JT_ARRAY, .max = RTS_RICH_IMAGES_MAX, .items = "images",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &image_spec}, .check = images_check},
		{.key = "attachments", .types = RTS_JT_ARRAY, .max = RTS_RICH_ATTACHMENTS_MAX, .items = "attachments",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &attachment_spec},
		 .check = attachments_check},
		{.key = "timeZone", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_TIME_ZONE_MAX},
		{.key = "now", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_WORKER_NOW_MAX},
		{.key = "startFresh", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
		{0},
	},
};
static const struct rts_jfield input_root = RTS_JSPEC_ROOT(&input_spec);

static bool string_is(json_object *o, const char *want)
{
	return o && json_object_is_type(o, json_type_string) && strcmp(json_object_get_string(o), want) == 0;
}

/* The input must be the turn runnerd bound: its id, its speaker, and attachments where statd
 * writes them (workspace/attachments/<turn id>/). */
int brokerd_rich_input_check(json_object *in, const struct brokerd_binding *b, const char **why)
{
	if (brokerd_body_check(in, &input_root, why, NULL) < 0)
		return -EINVAL;
	json_object *sp = rts_json_get(in, "speaker");
	if (!string_is(rts_json_get(in, "turnId"), b->turn_id)) {
		*why = "turnId is not the bound turn's";
		return -EINVAL;
	}
	if (!string_is(rts_json_get(sp, "id"), b->speaker_id) || !string_is(rts_json_get(sp, "name"), b->speaker_name) ||
	    !string_is(rts_json_get(sp, "principalId"), b->principal_id)) {
		*why = "speaker is not the bound speaker";
		return -EINVAL;
	}
	json_object *att = rts_json_get(in, "attachments");
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "/workspace/attachments/%s/", b->turn_id);
	for (size_t i = 0, n = att ? json_object_array_length(att) : 0; i < n; i++) {
		const char *path = rts_json_get_string(json_object_array_get_idx(att, i), "path");
		if (strncmp(path, prefix, strlen(prefix)) != 0 || strstr(path, "/..") || strchr(path + strlen(prefix), '/')) {
			*why = "an attachment path is not in the turn's attachment directory";
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- pure parts (rich_packet.h) ---- */

static const struct rts_jspec caps_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "privateTo", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
		{.key = "readerRecords", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
		{0},
	},
};
static const struct rts_jspec ready_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "capabilities", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED, .object = &caps_spec},
		{.key = "privateHistory", .types = RTS_JT_BOOL, .flags = RTS_JF_REQUIRED},
		{0},
	},
};
static const struct rts_jfield ready_root = RTS_JSPEC_ROOT(&ready_spec);

int brokerd_rich_ready_parse(const char *body, size_t len, uint8_t *caps, bool *private_history, const char **why)
{
	*caps = 0;
	*private_history = false;
	*why = NULL;
	/* Seed: a missing or empty ready body means an older worker, not implicit support. */
	if (len == 0)
		return 0;
	cleanup_json json_object *doc = NULL;
	if (rts_json_parse_strict(body, len, RTS_JSON_DEPTH_MAX, &doc, why) < 0)
		return -EINVAL;
	static __thread struct rts_jerr e;
	if (rts_jspec_validate(doc, &ready_root, NULL, 0, &e) < 0) {
		*why = e.text;
		return -EINVAL;
	}
	json_object *c = rts_json_get(doc, "capabilities");
	if (json_object_get_boolean(rts_json_get(c, "privateTo")))
		*caps |= RTS_RICH_CAP_PRIVATE_TO;
	if (json_object_get_boolean(rts_json_get(c, "readerRecords")))
		*caps |= RTS_RICH_CAP_READER_RECORDS;
	*private_history = json_object_get_boolean(rts_json_get(doc, "privateHistory"));
	return 0;
}



static bool reply_text_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (brokerd_rich_utf8_chars(json_object_get_string(v), (size_t)json_object_get_string_len(v)) > RTS_RICH_TEXT_CHARS_MAX)
		return rts_jfail(ctx, "must be at most %u characters", RTS_RICH_TEXT_CHARS_MAX);
	return true;
}

static bool file_data_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	size_t n = rts_base64_decoded_len(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (n == SIZE_MAX)
		return rts_jfail(ctx, "must be base64");
	if (n > RTS_RICH_REPLY_FILE_BYTES_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes", RTS_RICH_REPLY_FILE_BYTES_MAX);
	return true;
}

static bool files_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	uint64_t total = 0;
	for (size_t i = 0, n = json_object_array_length(v); i < n; i++) {
		json_object *d = rts_json_get(json_object_array_get_idx(v, i), "data");
		total += rts_base64_decoded_len(json_object_get_string(d), (size_t)json_object_get_string_len(d));
	}
	if (total > RTS_RICH_REPLY_FILES_TOTAL_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes in all", RTS_RICH_REPLY_FILES_TOTAL_MAX);
	return true;
}

static const struct rts_jspec file_spec = {
	.fields = (const struct rts_jfield[]){
		/* Longer names are cut when sanitised; this only bounds the work. */
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = 4096},
		{.key = "mime", .types = RTS_JT_STRING, .max = 255},
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = file_data_check},
		{0},
	},
};

static const struct rts_jspec packet_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "turnId", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = 64},
		{.key = "text", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_RICH_TEXT_BYTES_MAX,
		 .check = reply_text_check},
		{.key = "files", .types = RTS_JT_ARRAY, .max = RTS_RICH_REPLY_FILES_MAX, .items = "files",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &file_spec}, .check = files_check},
		{0},
	},
};
static const struct rts_jfield packet_root = RTS_JSPEC_ROOT(&packet_spec);

char *brokerd_rich_file_name(const char *name, size_t len)
{
	/* Cut at RTS_RICH_FILE_NAME_MAX bytes on a character boundary. */
	size_t start = 0;
	while (start < len && (name[start] == '.' || name[start] == ' '))
		start++;
	size_t n = len - start;
	if (n > RTS_RICH_FILE_NAME_MAX) {
		n = RTS_RICH_FILE_NAME_MAX;
		while (n > 0 && ((unsigned char)name[start + n] & 0xc0) == 0x80)
			n--;
	}
	if (n == 0)
		return rts_xstrdup("file");
	char *out = rts_xstrndup(name + start, n);
	/* In place: a replaced character is never shorter than its '_'. */
	size_t w = 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp = 0;
		size_t k = rts_utf8_decode(out + i, n - i, &cp);
		if (k > 0 && (cp == '/' || cp == '\\' || rts_code_point_hidden(cp))) {
			out[w++] = '_';
			i += k;
			continue;
		}
		if (k == 0)
			k = 1;
		memmove(out + w, out + i, k);
		w += k;
		i += k;
	}
	out[w] = '\0';
	return out;
}

const char *brokerd_rich_file_mime(const char *mime)
{
	static const char *const allowed[] = {
		"image/png",	   "image/jpeg",      "image/webp",	  "image/gif",	   "text/plain", "text/markdown",
		"text/csv",	   "application/json", "application/pdf", "audio/mpeg",   "audio/ogg",  "audio/wav",
		"video/mp4",	   NULL};
	for (const char *const *a = allowed; mime && *a; a++)
		if (strcmp(*a, mime) == 0)
			return *a;
	return "application/octet-stream";
}

int brokerd_rich_reply_build(json_object *packet, const char *turn_id, char **out, size_t *len, const char **why)
{
	*out = NULL;
	*len = 0;
	if (brokerd_body_check(packet, &packet_root, why, NULL) < 0)
		return -EINVAL;
	const char *id = rts_json_get_string(packet, "turnId");
	if (strcmp(id, turn_id) != 0) {
		*why = "turnId is not the admitted turn's";
		return -ESTALE;
	}
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "text", json_object_get(rts_json_get(packet, "text")));
	json_object *files = json_object_new_array();
	json_object *in = rts_json_get(packet, "files");
	for (size_t i = 0, n = in ? json_object_array_length(in) : 0; i < n; i++) {
		json_object *f = json_object_array_get_idx(in, i);
		json_object *name = rts_json_get(f, "name");
		cleanup_free char *safe = brokerd_rich_file_name(json_object_get_string(name),
								 (size_t)json_object_get_string_len(name));
		json_object *r = json_object_new_object();
		json_object_object_add(r, "name", json_object_new_string(safe));
		json_object_object_add(r, "mime", json_object_new_string(brokerd_rich_file_mime(rts_json_get_string(f, "mime"))));
		json_object_object_add(r, "data", json_object_get(rts_json_get(f, "data")));
		json_object_array_add(files, r);
	}
	json_object_object_add(o, "files", files);
	*out = rts_json_dump(o);
	*len = strlen(*out);
	if (*len > RTS_RICH_REPLY_MAX) {
		free(*out);
		*out = NULL;
		*why = "the rebuilt reply is larger than the limit";
		return -EINVAL;
	}
	return 0;
}

