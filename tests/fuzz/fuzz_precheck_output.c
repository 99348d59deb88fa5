/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the precheck harness's stdout as runnerd reads it
 * (runnerd/precheck_io.h). The script shares the harness's process and can write fd 1
 * itself, so these bytes are the script's to choose.
 *
 * Invariants: an answer is one of the four kinds with a text within its kind's bound, UTF-8
 * without NUL (none for a plain {wake:false}); bad_input only with exit status 1 and a
 * field of letters; nothing is returned for anything else. */
#include "config.h"

#include <stdint.h>

#include "common/strictjson.h"
#include "common/util.h"
#include "runnerd/precheck_io.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rts_json_strict_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The first byte picks the exit status, the rest is stdout. */
	if (size < 1)
		return 0;
	int status = data[0] % 3 == 2 ? -1 : data[0] % 3;
	const char *buf = (const char *)data + 1;
	size--;
	uint32_t answer = 99;
	char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1] = "x";
	switch (runnerd_precheck_output_parse(buf, size, status, &answer, &text, field)) {
	case RUNNERD_PRECHECK_ANSWER: {
		FUZZ_ASSERT(status == 0);
		FUZZ_ASSERT(buf[size - 1] == '\n' && !memchr(buf, '\n', size - 1));
		size_t max = answer == RTS_PRECHECK_NOTE	 ? RTS_PRECHECK_NOTE_MAX
			     : answer == RTS_PRECHECK_CONTEXT	 ? RTS_PRECHECK_CONTEXT_MAX
			     : answer == RTS_PRECHECK_SCRIPT_ERROR ? RTS_PRECHECK_ERROR_MAX
								   : 0;
		FUZZ_ASSERT(answer < RTS_PRECHECK_ANSWER_MAX_);
		if (answer == RTS_PRECHECK_SLEEP) {
			FUZZ_ASSERT(!text);
		} else {
			FUZZ_ASSERT(text && strlen(text) <= max && rts_utf8_valid(text, strlen(text)));
			FUZZ_ASSERT(answer != RTS_PRECHECK_SCRIPT_ERROR || text[0]);
		}
		free(text);
		break;
	}
	case RUNNERD_PRECHECK_BAD_INPUT:
		FUZZ_ASSERT(status == 1 && !text);
		for (const char *p = field; *p; p++)
			FUZZ_ASSERT((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'));
		break;
	case RUNNERD_PRECHECK_MALFORMED:
		FUZZ_ASSERT(!text);
		break;
	}
	return 0;
}
