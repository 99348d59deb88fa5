/* SPDX-License-Identifier: Apache-2.0 */
/* The payloads of a rich turn as statd builds and reads them (statd/rich.h). */
#include "config.h"

#include <time.h>

#include "common/base64.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/memfd.h"
#include "common/util.h"
#include "statd/request.h"
#include "statd/rich.h"

char *statd_rich_images_render(json_object *images, size_t *len)
{
	size_t n = images ? json_object_array_length(images) : 0;
	*len = 0;
	if (n == 0)
		return NULL;
	/* The data is strict base64 and the mime one of four fixed names: neither needs JSON
	 * escaping, so the text is copied as it is (no second copy through a json-c
	 * serialiser for up to 64 MiB of images). */
	size_t cap = 2;
	for (size_t i = 0; i < n; i++) {
		json_object *img = json_object_array_get_idx(images, i);
		cap += 64 + strlen(rts_json_get_string(img, "mime")) +
		       (size_t)json_object_get_string_len(rts_json_get(img, "data"));
	}
	char *out = rts_xmalloc(cap + 1);
	size_t at = 0;
	out[at++] = '[';
	for (size_t i = 0; i < n; i++) {
		json_object *img = json_object_array_get_idx(images, i);
		json_object *data = rts_json_get(img, "data");
		at += (size_t)snprintf(out + at, cap + 1 - at, "%s{\"mime\":\"%s\",\"data\":\"", i ? "," : "",
				       rts_json_get_string(img, "mime"));
		size_t dl = (size_t)json_object_get_string_len(data);
		memcpy(out + at, json_object_get_string(data), dl);
		at += dl;
		out[at++] = '"';
		out[at++] = '}';
	}
	out[at++] = ']';
	out[at] = '\0';
	*len = at;
	return out;
}

/* ---- the turn input ---- */

struct jw {
	struct rts_memfd_writer w;
	int err;
};

static void put(struct jw *j, const char *s, size_t n)
{
	if (j->err == 0)
		j->err = rts_memfd_writer_write(&j->w, s, n);
}

static void put_s(struct jw *j, const char *s)
{
	put(j, s, strlen(s));
}

/* A JSON string of s, escaped by json-c. */
static void put_str(struct jw *j, const char *s)
{
	if (!rts_utf8_valid(s, strlen(s))) {
		j->err = j->err ? j->err : -EINVAL;
		return;
	}
	cleanup_json json_object *o = json_object_new_string(s);
	size_t n = 0;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	put(j, text, n);
}

static void put_member(struct jw *j, const char *sep, const char *key, const char *value)
{
	put_s(j, sep);
	put_str(j, key);
	put_s(j, ":");
	put_str(j, value);
}

int statd_rich_input_build(const struct statd_rich_input *in, const char *time_zone, const char *now)
{
	struct jw j = {.w = RTS_MEMFD_WRITER_INIT};
	int r = rts_memfd_writer_open(&j.w, "rts-rich-input", RTS_RICH_TURN_INPUT_MAX);
	if (r < 0)
		return r;
	put_s(&j, "{\"v\":1");
	put_member(&j, ",", "turnId", in->turn_id);
	put_member(&j, ",\"speaker\":{", "id", in->speaker_id);
	put_member(&j, ",", "name", in->speaker_name);
	put_member(&j, ",", "principalId", in->principal_id);
	put_member(&j, "},", "text", in->text);
	if (in->images_json) {
		put_s(&j, ",\"images\":");
		put(&j, in->images_json, in->images_len);
	}
	if (in->n_attachments > 0) {
		put_s(&j, ",\"attachments\":[");
		for (size_t i = 0; i < in->n_attachments; i++) {
			const struct statd_attachment *a = &in->attachments[i];
			char bytes[32];
			snprintf(bytes, sizeof(bytes), ",\"bytes\":%llu}", (unsigned long long)a->bytes);
			put_member(&j, i ? ",{" : "{", "name", a->file_name);
			put_member(&j, ",", "path", a->path);
			put_member(&j, ",", "mime", a->mime);
			put_s(&j, bytes);
		}
		put_s(&j, "]");
	}
	put_member(&j, ",", "timeZone", time_zone);
	put_member(&j, ",", "now", now);
	put_s(&j, in->start_fresh ? ",\"startFresh\":true}" : ",\"startFresh\":false}");
	if (j.err < 0) {
		rts_memfd_writer_close(&j.w);
		return j.err;
	}
	return rts_memfd_writer_seal(&j.w);
}

/* ---- the reply ---- */

/* A name the bot may use as a file name: no '/', no leading '.', no control or format
 * character (rts_code_point_hidden(): a bidi override makes "\u202egnp.exe" show as
 * "exe.png"). Bytes that are not UTF-8 are refused with them; so is an escaped NUL. */
static const char NAME_HIDDEN[] = "must be a file name without control or format characters";

static bool reply_name_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (s[0] == '.' || strchr(s, '/'))
		return rts_jfail(ctx, "must be a file name without '/' or a leading '.'");
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = rts_utf8_decode(s + i, len - i, &cp);
		if (n == 0 || rts_code_point_hidden(cp))
			return rts_jfail(ctx, "%s", NAME_HIDDEN);
		i += n;
	}
	return true;
}

static bool mime_token(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '+' || c == '-' || c == '_'))
			return false;
	}
	return true;
}

bool statd_mime_ok(const char *mime)
{
	const char *slash = strchr(mime, '/');
	return slash && mime_token(mime, (size_t)(slash - mime)) && mime_token(slash + 1, strlen(slash + 1)) &&
	       strlen(mime) <= RTS_RICH_MIME_MAX;
}

static bool reply_mime_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	return statd_mime_ok(json_object_get_string(v)) || rts_jfail(ctx, "must be a media type (type/subtype)");
}

static bool reply_data_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	size_t n = rts_base64_decoded_len(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (n == SIZE_MAX)
		return rts_jfail(ctx, "must be base64");
	if (n > RTS_RICH_REPLY_FILE_BYTES_MAX)
		return rts_jfail(ctx, "must decode to at most %u bytes", RTS_RICH_REPLY_FILE_BYTES_MAX);
	return true;
}

static bool reply_files_check(struct rts_jctx *ctx, json_object *v, void *base)
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

static bool reply_text_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (statd_utf8_chars(json_object_get_string(v), (size_t)json_object_get_string_len(v)) > RTS_RICH_TEXT_CHARS_MAX)
		return rts_jfail(ctx, "must be at most %u characters", RTS_RICH_TEXT_CHARS_MAX);
	return true;
}

static const struct rts_jspec reply_file_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "name", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .max = RTS_RICH_FILE_NAME_MAX,
		 .check = reply_name_check},
		{.key = "mime", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 3, .max = RTS_RICH_MIME_MAX,
		 .check = reply_mime_check},
		{.key = "data", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .check = reply_data_check},
		{0},
	},
};

static const struct rts_jspec reply_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "text", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .max = RTS_RICH_TEXT_BYTES_MAX,
		 .check = reply_text_check},
		{.key = "files", .types = RTS_JT_ARRAY, .max = RTS_RICH_REPLY_FILES_MAX, .items = "files",
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &reply_file_spec},
		 .check = reply_files_check},
		{0},
	},
};
static const struct rts_jfield reply_root = RTS_JSPEC_ROOT(&reply_spec);

/* object, array, object: the reply's nesting, with room to spare. */
#define REPLY_JSON_DEPTH 8

int statd_rich_reply_read(int fd, struct statd_rich_reply **out, const char **why)
{
	*out = NULL;
	const void *data = NULL;
	size_t len = 0;
	int r = rts_memfd_map(fd, RTS_RICH_REPLY_MAX, &data, &len);
	if (r < 0) {
		*why = r == -EFBIG ? "the reply is larger than its bound" : "the reply is not a sealed memfd";
		return r;
	}
	if (len == 0) {
		*why = "the reply is empty";
		return -EBADMSG;
	}
	cleanup_json json_object *root = NULL;
	r = rts_json_parse_strict(data, len, REPLY_JSON_DEPTH, &root, why);
	rts_memfd_unmap(data, len);
	if (r < 0)
		return -EBADMSG;
	struct rts_jerr e;
	if (rts_jspec_validate(root, &reply_root, NULL, 0, &e) < 0) {
		/* That rule by name in the log: a disguised name is a guest's trick, not a bug. */
		*why = strcmp(e.text, NAME_HIDDEN) == 0 ? "a reply file's name has a control or format character"
						      : "the reply is not of the expected shape";
		return -EBADMSG;
	}
	struct statd_rich_reply *rep = rts_xcalloc(1, sizeof(*rep));
	rep->text = json_object_get(rts_json_get(root, "text"));
	json_object *files = rts_json_get(root, "files");
	rep->files = files ? json_object_get(files) : json_object_new_array();
	*out = rep;
	return 0;
}

void statd_rich_reply_free(struct statd_rich_reply *r)
{
	if (!r)
		return;
	json_object_put(r->text);
	json_object_put(r->files);
	free(r);
}

char *statd_attachment_name(const char *name, const char *url)
{
	char buf[101];
	const char *src = name;
	size_t n = src ? strlen(src) : 0;
	if (!src || n == 0) {
		/* The URL's last path segment, without query or fragment. */
		const char *start = strstr(url, "://");
		start = start ? start + 3 : url;
		const char *end = start + strcspn(start, "?#");
		const char *slash = NULL;
		for (const char *p = start; p < end; p++)
			if (*p == '/')
				slash = p;
		src = slash ? slash + 1 : end;
		n = (size_t)(end - src);
	}
	size_t at = 0;
	for (size_t i = 0; i < n && at < sizeof(buf) - 1; i++) {
		char c = src[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
			  c == '_' || c == '-';
		if (at == 0 && c == '.')
			continue; /* no hidden files, no ".." */
		buf[at++] = ok ? c : '_';
	}
	buf[at] = '\0';
	return rts_xstrdup(at ? buf : "attachment");
}
