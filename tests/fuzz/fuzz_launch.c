/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: what brokerd's launcher reads (brokerd/launcher.h). Its peer is
 * brokerd, which it trusts, and bwrap's --info-fd; the parsers must still never read past
 * what arrived, and accept only what the protocol allows. The first input byte chooses
 * the parser (bit 0: message or bwrap's info) and, for a message, how many descriptors
 * came with it (bits 1-3); the rest is the packet or the info text.
 *
 * Invariants. A decoded message has this version, a known type, exactly that type's
 * descriptor count, 0 in every field the type does not use, a RUN kind in range and a
 * FAILED value that is a negative errno. A parsed info gives a positive pid, and no prefix
 * of it parses to another pid. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "brokerd/launcher.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *body = data + 1;
	size_t len = size - 1;
	if ((data[0] & 1) == 0) {
		size_t nfds = (data[0] >> 1) & 7;
		struct brokerd_launch_msg m;
		if (brokerd_launch_decode(body, len, nfds, &m) != 0)
			return 0;
		FUZZ_ASSERT(len == sizeof(m) && m.version == BROKERD_LAUNCH_VERSION);
		switch (m.type) {
		case BROKERD_LAUNCH_RUN:
			FUZZ_ASSERT(nfds == 4 && m.value == 0 && m.kind >= BROKERD_RUN_TOOL && m.kind <= BROKERD_RUN_PROBE_HOOK);
			break;
		case BROKERD_LAUNCH_STARTED:
			FUZZ_ASSERT(nfds == 1 && m.kind == 0 && m.index == 0 && m.value == 0);
			break;
		case BROKERD_LAUNCH_FAILED:
			FUZZ_ASSERT(nfds == 0 && m.kind == 0 && m.index == 0 && m.value < 0 && m.value >= -4095);
			break;
		case BROKERD_LAUNCH_EXITED:
			FUZZ_ASSERT(nfds == 0 && m.kind == 0 && m.index == 0);
			break;
		default:
			FUZZ_ASSERT(!"a type the protocol does not have");
		}
		return 0;
	}
	/* Copied, so that a read past the end is the sanitizer's to see. */
	char *text = malloc(len ? len : 1);
	memcpy(text, body, len);
	pid_t pid = 0;
	int r = brokerd_launch_parse_info(text, len, &pid);
	FUZZ_ASSERT(r == 0 || r == -EAGAIN || r == -EBADMSG);
	if (r == 0) {
		FUZZ_ASSERT(pid > 0);
		for (size_t n = 0; n < len; n++) {
			pid_t other = 0;
			FUZZ_ASSERT(brokerd_launch_parse_info(text, n, &other) != 0 || other == pid);
		}
	}
	free(text);
	return 0;
}
