/* SPDX-License-Identifier: Apache-2.0 */
/* statd's rich-mode pieces without the daemon: a rich message's images and attachments
 * and the bounds of each mode (statd/request.h), the mode request's profile, base64
 * (common/base64.h), the turn input and the reply (statd/rich_input.c), and the files
 * statd writes in a workspace a guest can write too (statd/rich_fs.c): the .channel-key
 * record, attachments and a fresh start's archive, each with what a guest may have
 * planted. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/acl.h"
#include "common/base64.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/memfd.h"
#include "common/proto.h"
#include "common/util.h"
#include "statd/request.h"
#include "statd/rich.h"

/* ---- fixtures ---- */

static const unsigned char PNG[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
static const unsigned char JPEG[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};
static const unsigned char GIF[] = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0};
static const unsigned char WEBP[] = {'R', 'I', 'F', 'F', 26, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L'};

/* base64 of len bytes starting with head (the rest zero). Caller frees. */
static char *b64_of(const unsigned char *head, size_t head_len, size_t len)
{
	unsigned char *buf = rts_xcalloc(len ? len : 1, 1);
	memcpy(buf, head, head_len < len ? head_len : len);
	char *s = rts_base64_encode(buf, len, NULL);
	free(buf);
	return s;
}

#define BASE                                                                                                        \
	"{\"op\":\"message\",\"id\":\"m1\",\"channel\":\"guild-1/c\",\"guild\":true,\"addressed\":true,"            \
	"\"text\":\"hello\",\"author\":{\"id\":\"42\",\"name\":\"Alice\",\"principalId\":\"p42\","                  \
	"\"tier\":\"member\",\"bot\":false,\"integration\":false}}"

static json_object *message(void)
{
	json_object *o = json_tokener_parse(BASE);
	ck_assert_ptr_nonnull(o);
	return o;
}

static json_object *image(const char *mime, const char *data)
{
	json_object *i = json_object_new_object();
	json_object_object_add(i, "mime", json_object_new_string(mime));
	json_object_object_add(i, "data", json_object_new_string(data));
	return i;
}

static json_object *png_image(void)
{
	cleanup_free char *d = b64_of(PNG, sizeof(PNG), sizeof(PNG));
	return image("image/png", d);
}

static void parse_ok(json_object *req, struct statd_message *m)
{
	const char *c, *d;
	ck_assert_msg(statd_message_parse(req, m, &c, &d) == 0, "refused: %s", d);
}

/* Refused with code and a detail naming the rule; the channel and id still read (so the
 * route is drop where the channel is on). */
static void parse_refused(json_object *req, const char *code, const char *detail_has, const char *label)
{
	struct statd_message m;
	const char *c = NULL, *d = NULL;
	ck_assert_msg(statd_message_parse(req, &m, &c, &d) == -EINVAL, "%s: accepted", label);
	ck_assert_msg(c && strcmp(c, code) == 0, "%s: code %s", label, c ? c : "(none)");
	ck_assert_msg(d && strstr(d, detail_has), "%s: detail \"%s\" lacks \"%s\"", label, d ? d : "", detail_has);
	ck_assert_ptr_nonnull(m.channel);
	ck_assert_int_eq(statd_message_route(&m, false, STATD_MODE_RICH), STATD_ROUTE_DROP);
	ck_assert_int_eq(statd_message_route(&m, false, STATD_MODE_ON), STATD_ROUTE_DROP);
}

/* ---- images ---- */

START_TEST(test_images_of_each_format)
{
	static const struct {
		const char *mime;
		const unsigned char *head;
		size_t len;
	} ok[] = {{"image/png", PNG, sizeof(PNG)},
		  {"image/jpeg", JPEG, sizeof(JPEG)},
		  {"image/gif", GIF, sizeof(GIF)},
		  {"image/webp", WEBP, sizeof(WEBP)}};
	cleanup_json json_object *req = message();
	json_object *imgs = json_object_new_array();
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		cleanup_free char *d = b64_of(ok[i].head, ok[i].len, ok[i].len + i); /* padded 0, 1 or 2 */
		json_object_array_add(imgs, image(ok[i].mime, d));
	}
	json_object_object_add(req, "images", imgs);
	struct statd_message m;
	parse_ok(req, &m);
	ck_assert_ptr_eq(m.images, imgs);
	ck_assert_int_eq(statd_message_route(&m, true, STATD_MODE_RICH), STATD_ROUTE_SANDBOX);
	/* Null counts as absent. */
	json_object_object_add(req, "images", NULL);
	parse_ok(req, &m);
	ck_assert_ptr_null(m.images);
}
END_TEST

START_TEST(test_image_refusals)
{
	cleanup_free char *png = b64_of(PNG, sizeof(PNG), sizeof(PNG));
	cleanup_free char *jpeg = b64_of(JPEG, sizeof(JPEG), sizeof(JPEG));
	cleanup_free char *short_riff = b64_of(WEBP, 8, 8);
	unsigned char avi[sizeof(WEBP)];
	memcpy(avi, WEBP, sizeof(avi));
	memcpy(avi + 8, "AVI ", 4);
	cleanup_free char *riff_avi = b64_of(avi, sizeof(avi), sizeof(avi));
	static const char BAD64[] = "iVBORw0K!!!!";
	const struct {
		const char *label;
		json_object *value; /* the "images" member */
		const char *detail_has;
	} cases[] = {
		{"not a list", json_object_new_string("x"), "images must be"},
		{"an item not an object", json_tokener_parse("[1]"), "images[0] must be"},
		{"no mime", json_tokener_parse("[{\"data\":\"AAAA\"}]"), "images[0].mime is required"},
		{"no data", json_tokener_parse("[{\"mime\":\"image/png\"}]"), "images[0].data is required"},
		{"a BMP", json_tokener_parse("[{\"mime\":\"image/bmp\",\"data\":\"Qk0=\"}]"), "images[0].mime must be"},
		{"an unknown member", json_tokener_parse("[{\"mime\":\"image/png\",\"data\":\"AAAA\",\"url\":\"x\"}]"),
		 "images[0] has an unknown field"},
		{"not base64", json_object_new_array(), "images[0].data must be base64"},
		{"unpadded", json_tokener_parse("[{\"mime\":\"image/png\",\"data\":\"iVBORw\"}]"),
		 "images[0].data must be base64"},
		{"url-safe alphabet", json_tokener_parse("[{\"mime\":\"image/png\",\"data\":\"iVBO-w__\"}]"),
		 "images[0].data must be base64"},
		{"padding inside", json_tokener_parse("[{\"mime\":\"image/png\",\"data\":\"iV==Rw0K\"}]"),
		 "images[0].data must be base64"},
		{"a JPEG called PNG", json_object_new_array(), "images[0].data does not start with the signature"},
		{"a PNG called GIF", json_object_new_array(), "images[0].data does not start with the signature"},
		{"RIFF but not WebP", json_object_new_array(), "images[0].data does not start with the signature"},
		{"RIFF too short", json_object_new_array(), "images[0].data does not start with the signature"},
		{"empty data", json_tokener_parse("[{\"mime\":\"image/png\",\"data\":\"\"}]"),
		 "images[0].data does not start with the signature"},
	};
	json_object_array_add(cases[6].value, image("image/png", BAD64));
	json_object_array_add(cases[10].value, image("image/png", jpeg));
	json_object_array_add(cases[11].value, image("image/gif", png));
	json_object_array_add(cases[12].value, image("image/webp", riff_avi));
	json_object_array_add(cases[13].value, image("image/webp", short_riff));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		cleanup_json json_object *req = message();
		json_object_object_add(req, "images", cases[i].value);
		parse_refused(req, STATD_E_INVALID_REQUEST, cases[i].detail_has, cases[i].label);
	}
}
END_TEST

/* Eight images, 20 MiB each, 64 MiB decoded in all: each bound at its value and one past. */
START_TEST(test_image_bounds)
{
	cleanup_json json_object *req = message();
	json_object *imgs = json_object_new_array();
	for (unsigned i = 0; i < RTS_RICH_IMAGES_MAX; i++)
		json_object_array_add(imgs, png_image());
	json_object_object_add(req, "images", imgs);
	struct statd_message m;
	parse_ok(req, &m);
	json_object_array_add(imgs, png_image());
	parse_refused(req, STATD_E_INVALID_REQUEST, "images must list at most 8 images", "nine images");

	/* One image of exactly 20 MiB passes, one byte more does not. */
	cleanup_free char *at = b64_of(PNG, sizeof(PNG), RTS_RICH_IMAGE_BYTES_MAX);
	cleanup_free char *over = b64_of(PNG, sizeof(PNG), RTS_RICH_IMAGE_BYTES_MAX + 1);
	cleanup_json json_object *one = message();
	json_object *list = json_object_new_array();
	json_object_array_add(list, image("image/png", at));
	json_object_object_add(one, "images", list);
	parse_ok(one, &m);
	json_object_array_put_idx(list, 0, image("image/png", over));
	parse_refused(one, STATD_E_INVALID_REQUEST, "images[0].data must decode to at most 20971520 bytes",
		      "an image of 20 MiB + 1");

	/* 64 MiB in all: three of 20 MiB and one of 4 MiB pass; a byte more does not. */
	cleanup_free char *four = b64_of(PNG, sizeof(PNG), RTS_RICH_IMAGES_TOTAL_MAX - 3 * RTS_RICH_IMAGE_BYTES_MAX);
	cleanup_free char *four1 =
		b64_of(PNG, sizeof(PNG), RTS_RICH_IMAGES_TOTAL_MAX - 3 * RTS_RICH_IMAGE_BYTES_MAX + 1);
	cleanup_json json_object *all = message();
	list = json_object_new_array();
	for (int i = 0; i < 3; i++)
		json_object_array_add(list, image("image/png", at));
	json_object_array_add(list, image("image/png", four));
	json_object_object_add(all, "images", list);
	parse_ok(all, &m);
	json_object_array_put_idx(list, 3, image("image/png", four1));
	parse_refused(all, STATD_E_INVALID_REQUEST, "images must decode to at most 67108864 bytes in all",
		      "64 MiB + 1 in all");
}
END_TEST

/* ---- attachments ---- */

START_TEST(test_attachments_count_or_list)
{
	cleanup_json json_object *req = message();
	struct statd_message m;
	json_object_object_add(req, "attachments", json_object_new_int(3));
	parse_ok(req, &m);
	ck_assert_uint_eq(m.attachments, 3);
	ck_assert_ptr_null(m.attachment_list);
	json_object *list = json_tokener_parse("[{\"url\":\"https://cdn.example/a.pdf\"},"
					       "{\"url\":\"http://cdn.example/b?x=1\",\"name\":\"b.txt\"},"
					       "{\"url\":\"https://cdn.example/c\",\"name\":null}]");
	json_object_object_add(req, "attachments", list);
	parse_ok(req, &m);
	ck_assert_uint_eq(m.attachments, 3);
	ck_assert_ptr_eq(m.attachment_list, list);
}
END_TEST

START_TEST(test_attachment_refusals)
{
	char url_at[RTS_ATTACH_URL_MAX + 1], url_over[RTS_ATTACH_URL_MAX + 2], name_over[RTS_RICH_FILE_NAME_MAX + 2];
	memcpy(url_at, "https://x/", 10);
	memset(url_at + 10, 'a', RTS_ATTACH_URL_MAX - 10);
	url_at[RTS_ATTACH_URL_MAX] = '\0';
	memcpy(url_over, url_at, RTS_ATTACH_URL_MAX);
	url_over[RTS_ATTACH_URL_MAX] = 'a';
	url_over[RTS_ATTACH_URL_MAX + 1] = '\0';
	memset(name_over, 'n', RTS_RICH_FILE_NAME_MAX + 1);
	name_over[RTS_RICH_FILE_NAME_MAX + 1] = '\0';

	/* At the bounds: ten items, the longest URL and name. */
	cleanup_json json_object *req = message();
	json_object *list = json_object_new_array();
	for (unsigned i = 0; i < RTS_RICH_ATTACHMENTS_MAX; i++) {
		json_object *a = json_object_new_object();
		json_object_object_add(a, "url", json_object_new_string(url_at));
		json_object_object_add(a, "name", json_object_new_string_len(name_over, RTS_RICH_FILE_NAME_MAX));
		json_object_array_add(list, a);
	}
	json_object_object_add(req, "attachments", list);
	struct statd_message m;
	parse_ok(req, &m);
	json_object_array_add(list, json_tokener_parse("{\"url\":\"https://x/y\"}"));
	parse_refused(req, STATD_E_INVALID_REQUEST, "attachments must list at most 10 attachments", "eleven");

	const struct {
		const char *label, *item;
		const char *detail_has;
	} cases[] = {
		{"no url", "{\"name\":\"a\"}", "attachments[0].url is required"},
		{"ftp", "{\"url\":\"ftp://x/y\"}", "attachments[0].url must be an http:// or https:// URL"},
		{"file", "{\"url\":\"file:///etc/passwd\"}", "attachments[0].url must be an http:// or https:// URL"},
		{"a space", "{\"url\":\"https://x/a b\"}", "attachments[0].url must be printable ASCII"},
		{"non-ASCII", "{\"url\":\"https://x/\\u00e9\"}", "attachments[0].url must be printable ASCII"},
		{"empty url", "{\"url\":\"\"}", "attachments[0].url"},
		{"empty name", "{\"url\":\"https://x/y\",\"name\":\"\"}", "attachments[0].name"},
		{"an unknown member", "{\"url\":\"https://x/y\",\"size\":1}", "attachments[0] has an unknown field"},
		{"not an object", "\"https://x/y\"", "attachments[0] must be"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		cleanup_json json_object *r = message();
		json_object *l = json_object_new_array();
		json_object_array_add(l, json_tokener_parse(cases[i].item));
		json_object_object_add(r, "attachments", l);
		parse_refused(r, STATD_E_INVALID_REQUEST, cases[i].detail_has, cases[i].label);
	}
	cleanup_json json_object *r = message();
	json_object *l = json_object_new_array();
	json_object *a = json_object_new_object();
	json_object_object_add(a, "url", json_object_new_string(url_over));
	json_object_array_add(l, a);
	json_object_object_add(r, "attachments", l);
	parse_refused(r, STATD_E_INVALID_REQUEST, "attachments[0].url", "a URL of 8 KiB + 1");
	json_object_object_add(a, "url", json_object_new_string("https://x/y"));
	json_object_object_add(a, "name", json_object_new_string(name_over));
	parse_refused(r, STATD_E_INVALID_REQUEST, "attachments[0].name", "a name of 256 bytes");
}
END_TEST

/* ---- the bounds of each mode ---- */

START_TEST(test_text_bounds_per_mode)
{
	cleanup_json json_object *req = message();
	struct statd_message m;
	const char *code, *detail;
	/* Sealed: 64 KiB of bytes. */
	cleanup_free char *sealed_at = rts_xcalloc(RTS_TEXT_MAX + 2, 1);
	memset(sealed_at, 'x', RTS_TEXT_MAX);
	json_object_object_add(req, "text", json_object_new_string(sealed_at));
	parse_ok(req, &m);
	ck_assert_int_eq(statd_message_check_mode(&m, STATD_MODE_ON, &code, &detail), 0);
	sealed_at[RTS_TEXT_MAX] = 'x';
	json_object_object_add(req, "text", json_object_new_string(sealed_at));
	parse_ok(req, &m);
	ck_assert_int_eq(statd_message_check_mode(&m, STATD_MODE_ON, &code, &detail), -EINVAL);
	ck_assert_str_eq(code, STATD_E_TEXT_TOO_LONG);
	ck_assert_ptr_nonnull(strstr(detail, "65536 bytes"));
	/* The same text fits a rich channel. */
	ck_assert_int_eq(statd_message_check_mode(&m, STATD_MODE_RICH, &code, &detail), 0);

	/* Rich: 100,000 characters, of four bytes each at most (400,000 bytes). */
	size_t n = RTS_RICH_TEXT_CHARS_MAX;
	cleanup_free char *rich = rts_xcalloc(4 * n + 8, 1);
	for (size_t i = 0; i < n; i++)
		memcpy(rich + 4 * i, "\xf0\x9f\x98\x80", 4);
	json_object_object_add(req, "text", json_object_new_string(rich));
	parse_ok(req, &m);
	ck_assert_int_eq(statd_message_check_mode(&m, STATD_MODE_RICH, &code, &detail), 0);
	memcpy(rich + 4 * n, "x", 2); /* 100,001 characters, 400,001 bytes: the parser's own bound */
	json_object_object_add(req, "text", json_object_new_string(rich));
	parse_refused(req, STATD_E_TEXT_TOO_LONG, "longer than 400000 bytes", "400,001 bytes");
	/* 100,001 one-byte characters: parsed, refused by the rich rule. */
	cleanup_free char *ascii = rts_xcalloc(n + 2, 1);
	memset(ascii, 'y', n + 1);
	json_object_object_add(req, "text", json_object_new_string(ascii));
	parse_ok(req, &m);
	ck_assert_int_eq(statd_message_check_mode(&m, STATD_MODE_RICH, &code, &detail), -EINVAL);
	ck_assert_str_eq(code, STATD_E_TEXT_TOO_LONG);
	ck_assert_ptr_nonnull(strstr(detail, "100000 characters"));
	ck_assert_uint_eq(statd_utf8_chars("a\xc3\xa4\xe3\x83\x81\xf0\x9f\x98\x80", 10), 4);
}
END_TEST

/* ---- the mode request ---- */

START_TEST(test_mode_request_profile)
{
	static const struct {
		const char *json, *detail_has; /* NULL: valid */
	} cases[] = {
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\",\"profile\":\"default\"}", NULL},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"on\"}", NULL},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\"}", "profile is required with mode"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"off\",\"profile\":\"default\"}", "profile is only"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\",\"profile\":\"Default\"}", "profile must be"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\",\"profile\":\"../x\"}", "profile must be"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\",\"profile\":7}", "profile must be"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"rich\",\"profile\":"
		 "\"a234567890123456789012345678901234567890123456789\"}",
		 "profile"},
		{"{\"op\":\"mode\",\"id\":1,\"channel\":\"c\",\"mode\":\"sealed\"}", "mode must be \"on\", \"off\" or \"rich\""},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		cleanup_json json_object *req = json_tokener_parse(cases[i].json);
		ck_assert_ptr_nonnull(req);
		struct statd_request r;
		const char *d = NULL;
		int rc = statd_request_parse(req, STATD_OP_MODE, &r, &d);
		if (!cases[i].detail_has) {
			ck_assert_msg(rc == 0, "%s: %s", cases[i].json, d);
			ck_assert(r.mode == STATD_MODE_RICH ? r.profile && strcmp(r.profile, "default") == 0 : !r.profile);
		} else {
			ck_assert_msg(rc == -EINVAL && strstr(d, cases[i].detail_has), "%s: %s", cases[i].json,
				      rc ? d : "accepted");
		}
	}
}
END_TEST

/* ---- base64 ---- */

START_TEST(test_base64)
{
	ck_assert_uint_eq(rts_base64_decoded_len("", 0), 0);
	ck_assert_uint_eq(rts_base64_decoded_len("QQ==", 4), 1);
	ck_assert_uint_eq(rts_base64_decoded_len("QUI=", 4), 2);
	ck_assert_uint_eq(rts_base64_decoded_len("QUJD", 4), 3);
	ck_assert_uint_eq(rts_base64_decoded_len("QUJ", 3), SIZE_MAX);
	ck_assert_uint_eq(rts_base64_decoded_len("Q===", 4), SIZE_MAX);
	ck_assert_uint_eq(rts_base64_decoded_len("=QUJ", 4), SIZE_MAX);
	ck_assert_uint_eq(rts_base64_decoded_len("QU J", 4), SIZE_MAX);
	ck_assert_uint_eq(rts_base64_decoded_len("QUJ\n", 4), SIZE_MAX);
	/* Round trips over the chunk sizes, every padding. */
	size_t sizes[] = {0, 1, 2, 3, 4, 5, 1000, (3u << 20) - 1, 3u << 20, (3u << 20) + 1, (4u << 20) + 2};
	for (size_t k = 0; k < RTS_ARRAY_SIZE(sizes); k++) {
		unsigned char *in = rts_xmalloc(sizes[k] + 1);
		for (size_t i = 0; i < sizes[k]; i++)
			in[i] = (unsigned char)(i * 131 + k);
		size_t len;
		cleanup_free char *s = rts_base64_encode(in, sizes[k], &len);
		ck_assert_uint_eq(len, (sizes[k] + 2) / 3 * 4);
		ck_assert_uint_eq(rts_base64_decoded_len(s, len), sizes[k]);
		unsigned char *out = rts_xmalloc(sizes[k] + 1);
		ck_assert_int_eq(rts_base64_decode(s, len, out, sizes[k]), (long)sizes[k]);
		ck_assert_int_eq(memcmp(in, out, sizes[k]), 0);
		if (sizes[k] > 0)
			ck_assert_int_eq(rts_base64_decode(s, len, out, sizes[k] - 1), -ENOBUFS);
		unsigned char head[12];
		size_t got = rts_base64_decode_prefix(s, len, head, sizeof(head));
		ck_assert_uint_eq(got, sizes[k] < 12 ? sizes[k] : 12);
		ck_assert_int_eq(memcmp(head, in, got), 0);
		free(in);
		free(out);
	}
	unsigned char b[4];
	ck_assert_int_eq(rts_base64_decode("QU!D", 4, b, sizeof(b)), -EINVAL);
}
END_TEST

/* ---- the turn input and the reply ---- */

/* The sealed memfd fd, parsed (caller puts). */
static json_object *memfd_json(int fd)
{
	char *data = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_read(fd, RTS_RICH_TURN_INPUT_MAX, &data, &len), 0);
	json_object *o = json_tokener_parse(data);
	ck_assert_msg(o != NULL, "not JSON: %.200s", data);
	free(data);
	return o;
}

START_TEST(test_turn_input)
{
	cleanup_json json_object *imgs = json_object_new_array();
	json_object_array_add(imgs, png_image());
	json_object_array_add(imgs, png_image());
	size_t ilen = 0;
	cleanup_free char *rendered = statd_rich_images_render(imgs, &ilen);
	ck_assert_uint_eq(ilen, strlen(rendered));
	size_t none_len = 7;
	ck_assert_ptr_null(statd_rich_images_render(NULL, &none_len));
	ck_assert_uint_eq(none_len, 0);

	struct statd_attachment att[2] = {
		{.file_name = "a.pdf", .path = "/workspace/attachments/0123456789abcdef/0-a.pdf", .mime = "application/pdf",
		 .bytes = 12},
		{.file_name = "b", .path = "/workspace/attachments/0123456789abcdef/1-b", .mime = "text/plain", .bytes = 0},
	};
	struct statd_rich_input in = {
		.turn_id = "0123456789abcdef",
		.speaker_id = "42",
		.speaker_name = "Al\"ice\n",
		.principal_id = "p42",
		.text = "hi \xf0\x9f\x98\x80 </script> \\ /",
		.images_json = rendered,
		.images_len = ilen,
		.attachments = att,
		.n_attachments = 2,
		.start_fresh = true,
	};
	int fd = statd_rich_input_build(&in, "Europe/Berlin", "2026-12-01T10:00:00+01:00");
	ck_assert_int_ge(fd, 0);
	size_t size;
	ck_assert_int_eq(rts_memfd_check(fd, RTS_RICH_TURN_INPUT_MAX, &size), 0); /* sealed */
	cleanup_json json_object *o = memfd_json(fd);
	close(fd);
	ck_assert_int_eq(json_object_get_int(rts_json_get(o, "v")), 1);
	ck_assert_str_eq(rts_json_get_string(o, "turnId"), "0123456789abcdef");
	json_object *sp = rts_json_get(o, "speaker");
	ck_assert_str_eq(rts_json_get_string(sp, "name"), "Al\"ice\n");
	ck_assert_str_eq(rts_json_get_string(sp, "principalId"), "p42");
	ck_assert_str_eq(rts_json_get_string(o, "text"), in.text);
	ck_assert(json_object_equal(rts_json_get(o, "images"), imgs));
	json_object *a = rts_json_get(o, "attachments");
	ck_assert_uint_eq(json_object_array_length(a), 2);
	ck_assert_str_eq(rts_json_get_string(json_object_array_get_idx(a, 0), "path"), att[0].path);
	ck_assert_int_eq(json_object_get_int(rts_json_get(json_object_array_get_idx(a, 0), "bytes")), 12);
	ck_assert_str_eq(rts_json_get_string(o, "timeZone"), "Europe/Berlin");
	ck_assert(json_object_get_boolean(rts_json_get(o, "startFresh")));
	ck_assert_int_eq(json_object_object_length(o), 9);

	/* Without images or attachments those members are absent; invalid UTF-8 is refused. */
	in.images_json = NULL;
	in.n_attachments = 0;
	in.start_fresh = false;
	fd = statd_rich_input_build(&in, "UTC", "2026-12-01T09:00:00+00:00");
	cleanup_json json_object *p = memfd_json(fd);
	close(fd);
	ck_assert_ptr_null(rts_json_get(p, "images"));
	ck_assert_ptr_null(rts_json_get(p, "attachments"));
	in.text = "bad \xff";
	ck_assert_int_eq(statd_rich_input_build(&in, "UTC", "x"), -EINVAL);

	char now[40];
	ck_assert_int_eq(rts_format_local_time(0, now, sizeof(now)), 0);
	ck_assert_int_eq(strlen(now), 25);
	ck_assert_int_eq(now[22], ':');
}
END_TEST

static int sealed(const char *text)
{
	int fd = rts_memfd_from_buffer("test", text, strlen(text));
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_reply_read)
{
	struct statd_rich_reply *r = NULL;
	const char *why = NULL;
	int fd = sealed("{\"text\":\"done\",\"files\":[{\"name\":\"a.png\",\"mime\":\"image/png\",\"data\":\"iVBORw==\"}]}");
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), 0);
	close(fd);
	ck_assert_str_eq(json_object_get_string(r->text), "done");
	ck_assert_uint_eq(json_object_array_length(r->files), 1);
	statd_rich_reply_free(r);
	/* Letters beyond ASCII are names like any other: the same names as the refused ones
	 * below, minus their control or format character, pass. */
	fd = sealed("{\"text\":\"x\",\"files\":[{\"name\":\"caf\\u00e9 \\u65e5.txt\",\"mime\":\"text/plain\",\"data\":\"\"},"
		    "{\"name\":\"gnp.exe\",\"mime\":\"text/plain\",\"data\":\"\"},{\"name\":\"ab\",\"mime\":\"text/plain\",\"data\":\"\"}]}");
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), 0);
	close(fd);
	statd_rich_reply_free(r);
	fd = sealed("{\"text\":\"\"}");
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), 0);
	close(fd);
	ck_assert_uint_eq(json_object_array_length(r->files), 0);
	statd_rich_reply_free(r);

	static const char *const bad[] = {
		"{\"text\":1}",
		"{\"files\":[]}",
		"{\"text\":\"x\",\"extra\":1}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"../a\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\".hidden\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\\u0007b\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"\\u202egnp.exe\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\\u0085b\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"zw\\u200bj\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"\\ufeffbom\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"iso\\u2066x\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\\u2028b\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\\u007fb\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"tag\\udb40\\udc41\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		/* A NUL: the strict parser's own rule answers first. */
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\\u0000b\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\",\"mime\":\"text\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"a\",\"mime\":\"text/plain\",\"data\":\"@@@@\"}]}",
		"{\"text\":\"x\",\"files\":[{\"name\":\"\",\"mime\":\"text/plain\",\"data\":\"\"}]}",
		"{\"text\":\"x\",\"text\":\"y\"}",
		"[\"x\"]",
		"not json",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		fd = sealed(bad[i]);
		r = (struct statd_rich_reply *)1;
		ck_assert_msg(statd_rich_reply_read(fd, &r, &why) == -EBADMSG, "accepted %s", bad[i]);
		ck_assert_ptr_null(r);
		close(fd);
	}
	/* The names refused for a control or format character, by that rule. */
	for (size_t i = 5; i <= 13; i++) {
		fd = sealed(bad[i]);
		ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), -EBADMSG);
		ck_assert_msg(why && strstr(why, "control or format character"), "%s: %s", bad[i], why);
		close(fd);
	}
	/* Eleven files. */
	cleanup_free char *eleven = rts_xstrdup("{\"text\":\"x\",\"files\":[");
	for (int i = 0; i < 11; i++) {
		char *n = rts_xasprintf("%s%s{\"name\":\"f%d\",\"mime\":\"text/plain\",\"data\":\"\"}", eleven,
					i ? "," : "", i);
		free(eleven);
		eleven = n;
	}
	char *n = rts_xasprintf("%s]}", eleven);
	free(eleven);
	eleven = n;
	fd = sealed(eleven);
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), -EBADMSG);
	close(fd);
	/* An empty memfd (found by fuzz_rich_reply): refused, never parsed. */
	fd = sealed("");
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), -EBADMSG);
	ck_assert_ptr_null(r);
	close(fd);
	/* An unsealed memfd: refused before it is read. */
	fd = memfd_create("unsealed", MFD_CLOEXEC);
	ck_assert_int_eq(write(fd, "{\"text\":\"x\"}", 12), 12);
	ck_assert_int_eq(statd_rich_reply_read(fd, &r, &why), -EPERM);
	close(fd);
}
END_TEST

START_TEST(test_attachment_names)
{
	static const struct {
		const char *name, *url, *want;
	} cases[] = {
		{"report.pdf", "https://x/y", "report.pdf"},
		{NULL, "https://cdn.example/path/to/file.txt?sig=1#f", "file.txt"},
		{NULL, "https://cdn.example/", "attachment"},
		{NULL, "https://cdn.example", "attachment"},
		{"../../etc/passwd", "https://x/y", "_.._etc_passwd"},
		{"...", "https://x/y", "attachment"},
		{".bashrc", "https://x/y", "bashrc"},
		{"a b/c\\d\xc3\xa4", "https://x/y", "a_b_c_d__"},
		{"", "https://x/z.png", "z.png"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		cleanup_free char *got = statd_attachment_name(cases[i].name, cases[i].url);
		ck_assert_msg(strcmp(got, cases[i].want) == 0, "%s: %s", cases[i].name ? cases[i].name : cases[i].url, got);
	}
	char long_name[300];
	memset(long_name, 'l', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	cleanup_free char *got = statd_attachment_name(long_name, "https://x/y");
	ck_assert_uint_eq(strlen(got), 100);
}
END_TEST

/* ---- files in the workspace ---- */

static char root[64];
static char ws[128];
static char outside[128];
static int ws_fd = -1;

static void fs_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/check-statd-rich-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(ws, sizeof(ws), "%s/ws", root);
	snprintf(outside, sizeof(outside), "%s/outside", root);
	ck_assert_int_eq(mkdir(ws, 0700), 0);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	ws_fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(ws_fd, 0);
}

static int rm_cb(const char *path)
{
	char *cmd = rts_xasprintf("rm -rf '%s'", path);
	int r = system(cmd);
	free(cmd);
	return r;
}

static void fs_teardown(void)
{
	close(ws_fd);
	ws_fd = -1;
	ck_assert_int_eq(rm_cb(root), 0);
}

static bool is_dir_nofollow(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

START_TEST(test_channel_key_record)
{
	char hash[RTS_HASH_HEX_LEN + 1], path[256];
	rts_channel_hash("guild-1/c", hash);
	snprintf(path, sizeof(path), "%s/%s.channel-key", root, hash);
	const char *why = NULL;
	/* Missing: written (0600) and then checked. */
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/c", &why), 0);
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_size, strlen("guild-1/c"));
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/c", &why), 0);
	/* Another key under the same name: the collision guard. */
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/other", &why), -EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "another channel key"));
	/* A prefix of the key is another key too. */
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/", &why), -EEXIST);
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/cc", &why), -EEXIST);
	/* A symbolic link is never followed, nor replaced. */
	unlink(path);
	char target[160];
	snprintf(target, sizeof(target), "%s/key", outside);
	put_file(target, "guild-1/c");
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/c", &why), -ELOOP);
	ck_assert_ptr_nonnull(strstr(why, "symbolic link"));
	unlink(path);
	/* A directory, or a bad hash. */
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(statd_channel_key_check(root, hash, "guild-1/c", &why), -EPERM);
	ck_assert_int_eq(statd_channel_key_check(root, "../x", "guild-1/c", &why), -EINVAL);
	/* No temporary file stays behind. */
	ck_assert_uint_eq(entries(root), 3); /* ws, outside, the directory */
}
END_TEST

static int data_fd(const char *text)
{
	return sealed(text);
}

START_TEST(test_attachment_write)
{
	struct statd_attachment a = {.url = rts_xstrdup("https://cdn.example/x/report.pdf?a=1"), .name = NULL};
	const char *why = NULL;
	int fd = data_fd("%PDF-1.7 hello");
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "0123456789abcdef", 0, fd, "application/pdf", 100, &a, &why), 0);
	close(fd);
	ck_assert_str_eq(a.file_name, "report.pdf");
	ck_assert_str_eq(a.path, "/workspace/attachments/0123456789abcdef/0-report.pdf");
	ck_assert_str_eq(a.mime, "application/pdf");
	ck_assert_uint_eq(a.bytes, 14);
	char path[256];
	snprintf(path, sizeof(path), "%s/attachments/0123456789abcdef/0-report.pdf", ws);
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_size, 14);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);

	/* A malformed type becomes application/octet-stream; over max_bytes is -EFBIG; the
	 * same file again is refused (O_EXCL), never overwritten. */
	fd = data_fd("xy");
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "0123456789abcdef", 1, fd, "text/plain; x=\"", 100, &a, &why), 0);
	ck_assert_str_eq(a.mime, "application/octet-stream");
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "0123456789abcdef", 2, fd, "", 1, &a, &why), -EFBIG);
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "0123456789abcdef", 1, fd, "", 100, &a, &why), -EEXIST);
	close(fd);
	/* An unsealed memfd is refused before anything is written. */
	fd = memfd_create("unsealed", MFD_CLOEXEC);
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "0123456789abcdef", 3, fd, "", 100, &a, &why), -EPERM);
	close(fd);
	snprintf(path, sizeof(path), "%s/attachments/0123456789abcdef", ws);
	ck_assert_uint_eq(entries(path), 2);
	free(a.url);
	free(a.name);
	free(a.file_name);
	free(a.path);
	free(a.mime);
}
END_TEST

/* A guest planted attachments -> outside: the link goes, a directory comes, and nothing
 * is written outside. The same for a file planted there, and a planted file name. */
START_TEST(test_attachment_write_planted)
{
	char link[160], path[256];
	snprintf(link, sizeof(link), "%s/attachments", ws);
	ck_assert_int_eq(symlink(outside, link), 0);
	struct statd_attachment a = {.url = rts_xstrdup("https://x/y"), .name = rts_xstrdup("f")};
	const char *why = NULL;
	int fd = data_fd("data");
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "00000000000000aa", 0, fd, "text/plain", 100, &a, &why), 0);
	ck_assert(is_dir_nofollow(link));
	ck_assert_uint_eq(entries(outside), 0);

	/* A planted file of that name. */
	snprintf(path, sizeof(path), "%s/attachments", ws);
	ck_assert_int_eq(rm_cb(path), 0);
	put_file(path, "junk");
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "00000000000000bb", 0, fd, "text/plain", 100, &a, &why), 0);
	ck_assert(is_dir_nofollow(path));

	/* A link planted where the turn's directory will be (a guessed turn id): replaced by
	 * statd's directory, never followed. */
	snprintf(path, sizeof(path), "%s/attachments/00000000000000cc", ws);
	ck_assert_int_eq(symlink(outside, path), 0);
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "00000000000000cc", 0, fd, "text/plain", 100, &a, &why), 0);
	ck_assert(is_dir_nofollow(path));
	ck_assert_uint_eq(entries(outside), 0);
	/* A link planted where the file will be: O_EXCL|O_NOFOLLOW refuses it. */
	snprintf(path, sizeof(path), "%s/attachments/00000000000000dd", ws);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	char victim[160], target[256];
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	snprintf(target, sizeof(target), "%s/0-f", path);
	ck_assert_int_eq(symlink(victim, target), 0);
	ck_assert_int_eq(statd_attachment_write(ws_fd, (uid_t)-1, "00000000000000dd", 0, fd, "text/plain", 100, &a, &why), -EEXIST);
	struct stat st;
	ck_assert_int_eq(lstat(victim, &st), -1);
	ck_assert_uint_eq(entries(outside), 0);
	close(fd);
	free(a.url);
	free(a.name);
	free(a.file_name);
	free(a.path);
	free(a.mime);
}
END_TEST

START_TEST(test_archive)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/sessions", ws);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sessions/archive", ws);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	const char *files[] = {"2026-01-01_a.jsonl", "2026-01-02_b.jsonl", "notes.txt", ".hidden.jsonl"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/sessions/%s", ws, files[i]);
		put_file(p, "{}\n");
	}
	/* One of that name is archived already: the new one gets another name. */
	snprintf(p, sizeof(p), "%s/sessions/archive/2026-01-01_a.jsonl", ws);
	put_file(p, "old\n");
	/* A link and a directory named *.jsonl stay. */
	char victim[160];
	snprintf(victim, sizeof(victim), "%s/victim.jsonl", outside);
	put_file(victim, "secret\n");
	snprintf(p, sizeof(p), "%s/sessions/link.jsonl", ws);
	ck_assert_int_eq(symlink(victim, p), 0);
	snprintf(p, sizeof(p), "%s/sessions/dir.jsonl", ws);
	ck_assert_int_eq(mkdir(p, 0700), 0);

	unsigned moved = 0;
	const char *why = NULL;
	ck_assert_int_eq(statd_sessions_archive(ws_fd, (uid_t)-1, &moved, &why), 0);
	ck_assert_uint_eq(moved, 2);
	snprintf(p, sizeof(p), "%s/sessions", ws);
	ck_assert_uint_eq(entries(p), 5); /* archive, notes.txt, .hidden.jsonl, link.jsonl, dir.jsonl */
	snprintf(p, sizeof(p), "%s/sessions/archive", ws);
	ck_assert_uint_eq(entries(p), 3);
	snprintf(p, sizeof(p), "%s/sessions/archive/2026-01-02_b.jsonl", ws);
	struct stat st;
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert_uint_eq(entries(outside), 1);
	snprintf(p, sizeof(p), "%s/attachments", ws);
	ck_assert(is_dir_nofollow(p));
}
END_TEST

/* Each of the three places a guest may plant a link: it is replaced, not followed, and
 * nothing outside the workspace changes. */
/* Accounts mode: what statd makes in a workspace is statd's, shared with the guest
 * account as the workspace is (directories 01770 with "owner rwx, guest rwx", sticky so the
 * guest cannot move statd's entries; files 0660 with "owner rw, guest rw"); one statd made
 * private before is shared again; a directory the guest made where statd's belongs is
 * moved aside, never written into. */
static void assert_guest_share(const char *path, uid_t guest, bool dir)
{
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_uint_eq(st.st_mode & 07777, dir ? 01770u : 0660u);
	struct rts_acl_view v;
	ck_assert_int_eq(rts_acl_view(-1, path, &v), 0);
	unsigned perms = dir ? 07u : 06u;
	ck_assert_msg(rts_acl_is_grant(&v, perms, guest, perms), "%s", path);
}

START_TEST(test_guest_share)
{
	const uid_t guest = 4242;
	char path[256];
	struct statd_attachment a = {.url = rts_xstrdup("https://x/doc.txt")};
	const char *why = NULL;
	int fd = data_fd("data");
	ck_assert_int_eq(statd_attachment_write(ws_fd, guest, "00000000000000aa", 0, fd, "text/plain", 100, &a, &why), 0);
	snprintf(path, sizeof(path), "%s/attachments", ws);
	assert_guest_share(path, guest, true);
	snprintf(path, sizeof(path), "%s/attachments/00000000000000aa", ws);
	assert_guest_share(path, guest, true);
	snprintf(path, sizeof(path), "%s/attachments/00000000000000aa/0-doc.txt", ws);
	assert_guest_share(path, guest, false);

	/* sessions/ that statd made private (single-account mode, or before it shared them). */
	snprintf(path, sizeof(path), "%s/sessions", ws);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(statd_rich_dirs_ensure(ws_fd, guest, &why), 0);
	assert_guest_share(path, guest, true);
	snprintf(path, sizeof(path), "%s/sessions/archive", ws);
	assert_guest_share(path, guest, true);
	unsigned moved = 0;
	snprintf(path, sizeof(path), "%s/sessions/s.jsonl", ws);
	put_file(path, "{}");
	ck_assert_int_eq(statd_sessions_archive(ws_fd, guest, &moved, &why), 0);
	ck_assert_uint_eq(moved, 1);

	if (geteuid() == 0) {
		/* A turn directory the guest made first (a guessed turn id), holding a link
		 * where the file will be: moved aside whole, the attachment written into
		 * statd's own. */
		snprintf(path, sizeof(path), "%s/attachments/00000000000000bb", ws);
		ck_assert_int_eq(mkdir(path, 0777), 0);
		ck_assert_int_eq(chown(path, guest, guest), 0);
		char link[300];
		snprintf(link, sizeof(link), "%s/0-doc.txt", path);
		ck_assert_int_eq(symlink(outside, link), 0);
		ck_assert_int_eq(statd_attachment_write(ws_fd, guest, "00000000000000bb", 0, fd, "text/plain", 100, &a, &why), 0);
		assert_guest_share(path, guest, true);
		snprintf(path, sizeof(path), "%s/attachments/00000000000000bb/0-doc.txt", ws);
		assert_guest_share(path, guest, false);
		snprintf(path, sizeof(path), "%s/attachments", ws);
		ck_assert_uint_eq(entries(path), 3); /* aa, bb and bb.guest-XXXXXXXX */
		ck_assert_uint_eq(entries(outside), 0);
		/* sessions/ the guest made: moved aside, statd's made. */
		snprintf(path, sizeof(path), "%s/sessions", ws);
		ck_assert_int_eq(rm_cb(path), 0);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		ck_assert_int_eq(chown(path, guest, guest), 0);
		ck_assert_int_eq(statd_rich_dirs_ensure(ws_fd, guest, &why), 0);
		assert_guest_share(path, guest, true);
	}
	close(fd);
	free(a.url);
	free(a.name);
	free(a.file_name);
	free(a.path);
	free(a.mime);
}
END_TEST

START_TEST(test_archive_planted_links)
{
	static const char *const places[] = {"sessions", "sessions/archive", "attachments"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(places); i++) {
		char p[256], q[256];
		snprintf(p, sizeof(p), "%s/sessions", ws);
		rm_cb(p);
		snprintf(p, sizeof(p), "%s/attachments", ws);
		rm_cb(p);
		/* Outside holds session files that must stay where they are. */
		snprintf(q, sizeof(q), "%s/x.jsonl", outside);
		unlink(q);
		put_file(q, "outside\n");
		if (i == 1) {
			snprintf(p, sizeof(p), "%s/sessions", ws);
			ck_assert_int_eq(mkdir(p, 0700), 0);
			snprintf(p, sizeof(p), "%s/sessions/s.jsonl", ws);
			put_file(p, "{}\n");
		}
		snprintf(p, sizeof(p), "%s/%s", ws, places[i]);
		ck_assert_int_eq(symlink(outside, p), 0);
		unsigned moved = 99;
		const char *why = NULL;
		ck_assert_msg(statd_sessions_archive(ws_fd, (uid_t)-1, &moved, &why) == 0, "%s: %s", places[i], why);
		ck_assert_msg(is_dir_nofollow(p), "%s is not a directory now", places[i]);
		ck_assert_uint_eq(moved, i == 1 ? 1 : 0);
		ck_assert_uint_eq(entries(outside), 1);
		ck_assert_int_eq(access(q, F_OK), 0);
	}
	/* A file planted at sessions is replaced too. */
	char p[256];
	snprintf(p, sizeof(p), "%s/sessions", ws);
	rm_cb(p);
	put_file(p, "junk");
	unsigned moved;
	const char *why;
	ck_assert_int_eq(statd_sessions_archive(ws_fd, (uid_t)-1, &moved, &why), 0);
	ck_assert(is_dir_nofollow(p));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("statd_rich");
	TCase *tc = tcase_create("requests");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_images_of_each_format);
	tcase_add_test(tc, test_image_refusals);
	tcase_add_test(tc, test_image_bounds);
	tcase_add_test(tc, test_attachments_count_or_list);
	tcase_add_test(tc, test_attachment_refusals);
	tcase_add_test(tc, test_text_bounds_per_mode);
	tcase_add_test(tc, test_mode_request_profile);
	tcase_add_test(tc, test_base64);
	suite_add_tcase(s, tc);
	tc = tcase_create("payloads");
	tcase_add_test(tc, test_turn_input);
	tcase_add_test(tc, test_reply_read);
	tcase_add_test(tc, test_attachment_names);
	suite_add_tcase(s, tc);
	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, fs_setup, fs_teardown);
	tcase_add_test(tc, test_channel_key_record);
	tcase_add_test(tc, test_attachment_write);
	tcase_add_test(tc, test_attachment_write_planted);
	tcase_add_test(tc, test_archive);
	tcase_add_test(tc, test_archive_planted_links);
	tcase_add_test(tc, test_guest_share);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
