/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the host compactor's answer and the worker's /worker/compact bodies
 * (brokerd/compact.h). The first byte picks: 0 the compactor's output for a fixed request,
 * 1 a compaction report, 2 the envelope and the request. Seed corpus:
 * tests/fuzz/corpus/compact_answer.
 *
 * Invariants: an accepted answer is an object with the request's firstKeptEntryId, a
 * summary string, a non-negative tokensBefore and details.engine set to the configured
 * engine; a report's log text holds no control byte and starts with one of the four fixed
 * phrases; an accepted envelope holds exactly one of request and report. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/compact.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char REQUEST[] = "{\"reason\":\"threshold\",\"tokensBefore\":310000,\"firstKeptEntryId\":\"e42\","
			      "\"isSplitTurn\":false,\"messagesToSummarize\":[],\"turnPrefixMessages\":[],"
			      "\"keptMessages\":[],\"readFiles\":[],\"modifiedFiles\":[]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	const char *why = NULL;
	switch (data[0] % 3) {
	case 0: {
		json_object *req = NULL;
		FUZZ_ASSERT(rts_json_parse(REQUEST, strlen(REQUEST), 64, &req, &why) == 0);
		char *answer = NULL;
		int r = brokerd_compact_answer_build(body, len, req, "fuzz-engine", &answer, &why);
		if (r == 0) {
			json_object *a = NULL;
			FUZZ_ASSERT(rts_json_parse(answer, strlen(answer), 64, &a, &why) == 0);
			FUZZ_ASSERT(!strcmp(rts_json_get_string(a, "firstKeptEntryId"), "e42"));
			FUZZ_ASSERT(rts_json_get_string(a, "summary"));
			FUZZ_ASSERT(json_object_get_int64(rts_json_get(a, "tokensBefore")) >= 0);
			FUZZ_ASSERT(!strcmp(rts_json_get_string(rts_json_get(a, "details"), "engine"), "fuzz-engine"));
			json_object_put(a);
		} else {
			FUZZ_ASSERT(!answer && (r == -ENODATA || r == -EINVAL));
		}
		free(answer);
		json_object_put(req);
		return 0;
	}
	case 1: {
		json_object *rep = NULL;
		if (brokerd_body_parse(body, len, &rep, &why) < 0)
			return 0;
		char line[512];
		if (brokerd_compact_report_format(rep, line, sizeof(line), &why) == 0) {
			for (const char *p = line; *p; p++)
				FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
			FUZZ_ASSERT(!strncmp(line, "conversation compacted", 22) || !strncmp(line, "compaction", 10));
		}
		json_object_put(rep);
		return 0;
	}
	default: {
		json_object *doc = NULL;
		if (brokerd_body_parse(body, len, &doc, &why) < 0)
			return 0;
		const char *tid = NULL;
		json_object *req = NULL, *rep = NULL;
		if (brokerd_compact_envelope(doc, &tid, &req, &rep, &why) == 0) {
			FUZZ_ASSERT(tid && ((req != NULL) != (rep != NULL)));
			if (req)
				(void)brokerd_compact_request_check(req, &why);
		}
		json_object_put(doc);
		return 0;
	}
	}
}
