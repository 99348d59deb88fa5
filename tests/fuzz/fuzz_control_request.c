/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a control line as statd reads a message (statd/request.h).
 *
 * Invariants, whatever the line holds (DESIGN.md section 5, routing fails closed):
 *  - in a channel that is on, the route is never "pass"; an invalid message is "drop";
 *  - in a channel that is off, "pass" exactly when the id and channel could be read;
 *  - a "sandbox" route only for a message whose every field is within its bound, images
 *    and attachment URLs included, and the text of each mode within that mode's bound
 *    once statd_message_check_mode() passed it;
 *  - the answer always names a route, and its detail is a short fixed text. */
#include "config.h"

#include <stdint.h>

#include "common/base64.h"
#include "common/proto.h"
#include "statd/request.h"
#include "tests/fuzz/fuzz_common.h"

#define REQUEST_JSON_DEPTH 16 /* statd/control.c */

static void check_bounded(const char *s, size_t min, size_t max)
{
	FUZZ_ASSERT(s);
	size_t n = strlen(s);
	FUZZ_ASSERT(n >= min && n <= max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_object *req = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict((const char *)data, size, REQUEST_JSON_DEPTH, &req, &why) < 0)
		return 0;
	if (!json_object_is_type(req, json_type_object)) {
		json_object_put(req);
		return 0;
	}
	struct statd_message m;
	const char *code = NULL, *detail = NULL;
	bool valid = statd_message_parse(req, &m, &code, &detail) == 0;
	FUZZ_ASSERT(valid ? !code && !detail : code && detail);
	if (m.channel)
		check_bounded(m.channel, 1, RTS_CHANNEL_MAX);

	enum statd_route on = statd_message_route(&m, valid, STATD_MODE_ON);
	enum statd_route off = statd_message_route(&m, valid, STATD_MODE_OFF);
	FUZZ_ASSERT(on != STATD_ROUTE_PASS);
	FUZZ_ASSERT(valid || on == STATD_ROUTE_DROP);
	FUZZ_ASSERT(off == (m.id && m.channel ? STATD_ROUTE_PASS : STATD_ROUTE_DROP));
	if (on == STATD_ROUTE_SANDBOX) {
		FUZZ_ASSERT(statd_message_eligible(&m) && m.has_author);
		check_bounded(m.author_id, 1, RTS_SPEAKER_FIELD_MAX);
		check_bounded(m.author_name, 1, RTS_SPEAKER_FIELD_MAX);
		check_bounded(m.principal_id, 1, RTS_SPEAKER_FIELD_MAX);
		check_bounded(m.text, 0, RTS_RICH_TEXT_BYTES_MAX);
		const char *c2, *d2;
		if (statd_message_check_mode(&m, STATD_MODE_ON, &c2, &d2) == 0)
			check_bounded(m.text, 0, RTS_TEXT_MAX);
		if (statd_message_check_mode(&m, STATD_MODE_RICH, &c2, &d2) == 0)
			FUZZ_ASSERT(statd_utf8_chars(m.text, strlen(m.text)) <= RTS_RICH_TEXT_CHARS_MAX);
		size_t n_images = m.images ? json_object_array_length(m.images) : 0;
		FUZZ_ASSERT(n_images <= RTS_RICH_IMAGES_MAX);
		for (size_t i = 0; i < n_images; i++) {
			json_object *d = rts_json_get(json_object_array_get_idx(m.images, i), "data");
			FUZZ_ASSERT(rts_base64_decoded_len(json_object_get_string(d), (size_t)json_object_get_string_len(d)) <=
				    RTS_RICH_IMAGE_BYTES_MAX);
		}
		FUZZ_ASSERT(!m.attachment_list || json_object_array_length(m.attachment_list) <= RTS_RICH_ATTACHMENTS_MAX);
	}

	/* The detail comes from request.c's tables (key paths, bounds), never from the request. */
	if (detail)
		FUZZ_ASSERT(strlen(detail) < 100);
	json_object *a = statd_message_answer(m.id, on, code, detail);
	const char *route = rts_json_get_string(a, "route");
	FUZZ_ASSERT(route && (strcmp(route, "drop") == 0 || strcmp(route, "sandbox") == 0));
	json_object_put(a);
	json_object_put(req);
	return 0;
}
