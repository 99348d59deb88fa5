/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a control line as statd reads a message (statd/request.h).
 *
 * Invariants, whatever the line holds (DESIGN.md section 5, routing fails closed):
 *  - in a channel that is on, the route is never "pass"; an invalid message is "drop";
 *  - in a channel that is off, "pass" exactly when the id and channel could be read;
 *  - a "sandbox" route only for a message whose every field is within its bound;
 *  - the answer always names a route, and its detail is a short fixed text. */
#include "config.h"

#include <stdint.h>

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
		check_bounded(m.text, 0, RTS_TEXT_MAX);
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
