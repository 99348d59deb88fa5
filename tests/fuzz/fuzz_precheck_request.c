/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a control line as statd reads a precheck op (statd/precheck_request.h).
 *
 * Invariants: a valid request has every field within its bound, approvals each
 * rts_precheck_approval_valid(), a firedAt and today that parse and agree, and a schedule
 * that serialises within its bound; a refused one has a short detail from the tables. */
#include "config.h"

#include <stdint.h>

#include "common/precheck.h"
#include "common/strictjson.h"
#include "common/util.h"
#include "statd/precheck_request.h"
#include "tests/fuzz/fuzz_common.h"

#define REQUEST_JSON_DEPTH 16 /* statd/control.c */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rts_json_strict_init();
	return 0;
}

static void bounded(const char *s, size_t min, size_t max)
{
	FUZZ_ASSERT(s);
	FUZZ_ASSERT(strlen(s) >= min && strlen(s) <= max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_object *req = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict((const char *)data, size, REQUEST_JSON_DEPTH, &req, &why) < 0)
		return 0;
	struct statd_precheck_request r;
	const char *detail = NULL;
	if (statd_precheck_parse(req, &r, &detail) == 0) {
		FUZZ_ASSERT(!detail && r.id);
		bounded(r.channel, 1, RTS_CHANNEL_MAX);
		bounded(r.target, 1, RTS_PRECHECK_TARGET_MAX);
		if (r.tier)
			bounded(r.tier, 1, RTS_SPEAKER_FIELD_MAX);
		bounded(r.script, 1, RTS_PRECHECK_SCRIPT_MAX);
		int64_t fired, today;
		FUZZ_ASSERT(rts_precheck_fired_at_parse(r.fired_at, &fired) == 0 && fired == r.fired_at_s);
		FUZZ_ASSERT(rts_precheck_today_parse(r.today, &today) == 0);
		FUZZ_ASSERT(rts_precheck_today_plausible(today, fired));
		FUZZ_ASSERT(rts_precheck_time_zone_valid(r.time_zone));
		char *approved = statd_precheck_approved_text(&r);
		char **list = NULL;
		FUZZ_ASSERT(rts_precheck_approved_split(approved, &list) == (int)json_object_array_length(r.approved));
		rts_strv_free(list);
		free(approved);
		char *schedule = statd_precheck_schedule_text(&r);
		FUZZ_ASSERT(strlen(schedule) <= RTS_PRECHECK_SCHEDULE_MAX);
		free(schedule);
	} else {
		FUZZ_ASSERT(detail && strlen(detail) < STATD_DETAIL_MAX);
	}
	json_object_put(req);
	return 0;
}
