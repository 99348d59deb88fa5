/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a worker's POST /model body through the strict parser and the request
 * validator (common/strictjson.h, brokerd/model.h), and the same bytes as an upstream
 * answer through the answer rebuild.
 *
 * Invariants: what the validator builds names the configured model, stream false and at
 * most the configured max_tokens; it is strict JSON itself; and fed back (without the two
 * members only the broker sets) it validates again to exactly the same body. */
#include "config.h"

#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/model.h"
#include "common/strictjson.h"
#include "tests/fuzz/fuzz_common.h"

#define MAX_TOKENS 4096u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rts_json_strict_init();
	return 0;
}

static void check_built(json_object *up)
{
	FUZZ_ASSERT(!strcmp(rts_json_get_string(up, "model"), "cfg-model"));
	json_object *stream = rts_json_get(up, "stream");
	FUZZ_ASSERT(stream && json_object_is_type(stream, json_type_boolean) && !json_object_get_boolean(stream));
	int64_t mt = json_object_get_int64(rts_json_get(up, "max_tokens"));
	FUZZ_ASSERT(mt >= 1 && mt <= MAX_TOKENS);

	char *text = rts_json_dump(up);
	json_object *again = NULL;
	const char *why = NULL;
	FUZZ_ASSERT(brokerd_body_parse(text, strlen(text), &again, &why) == 0);
	json_object_object_del(again, "model");
	json_object_object_del(again, "stream");
	json_object *rebuilt = NULL;
	FUZZ_ASSERT(brokerd_model_request_build(again, "cfg-model", MAX_TOKENS, &rebuilt, &why) == 0);
	char *text2 = rts_json_dump(rebuilt);
	FUZZ_ASSERT(!strcmp(text, text2));
	free(text2);
	json_object_put(rebuilt);
	json_object_put(again);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const char *why = NULL;
	json_object *req = NULL;
	if (brokerd_body_parse(buf, size, &req, &why) == 0) {
		json_object *up = NULL;
		if (brokerd_model_request_build(req, "cfg-model", MAX_TOKENS, &up, &why) == 0) {
			check_built(up);
			json_object_put(up);
		} else {
			FUZZ_ASSERT(why && !up);
		}
		json_object_put(req);
	}
	json_object *ans = NULL;
	if (rts_json_parse(buf, size, 64, &ans, &why) == 0) {
		json_object *out = NULL;
		if (brokerd_model_answer_rebuild(ans, &out, &why) == 0) {
			json_object *choices = rts_json_get(out, "choices");
			FUZZ_ASSERT(json_object_array_length(choices) == 1);
			json_object_put(out);
		}
		json_object_put(ans);
	}
	return 0;
}
