/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an upstream's text/event-stream answer to a precheck's MCP call, read
 * as exactly one event (brokerd/sse.h).
 *
 * Invariants: an accepted body yields data no longer than the body, NUL-terminated at its
 * length and without NUL inside; a refused one yields nothing and a static reason. */
#include "config.h"

#include <stdint.h>

#include "brokerd/sse.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out = NULL;
	size_t len = 0;
	const char *why = NULL;
	if (brokerd_sse_one_event((const char *)data, size, &out, &len, &why) == 0) {
		FUZZ_ASSERT(out && !why);
		FUZZ_ASSERT(len <= size);
		FUZZ_ASSERT(out[len] == '\0' && strlen(out) == len);
		free(out);
	} else {
		FUZZ_ASSERT(!out && why && strlen(why) < 64);
	}
	return 0;
}
