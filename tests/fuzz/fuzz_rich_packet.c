/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: what a rich worker sends brokerd besides model calls, and statd's turn
 * input (brokerd/rich_packet.h), parsed as brokerd parses them. The first byte picks the
 * parser: 0 the reply packet, 1 the /worker/ready body, 2 the turn input. Seed corpus:
 * tests/fuzz/corpus/rich_packet.
 *
 * Invariants: an accepted reply packet gives a reply of exactly {"text", "files"} whose
 * files are at most ten, each with a safe name (1 to 255 bytes, no '/', no '\', no control
 * byte, no leading dot or space) and a type from the allow-list, and whose text is the
 * packet's; a refused one builds nothing. An accepted ready body gives capability bits
 * within RTS_RICH_CAP_*. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reply(const char *text, json_object *packet)
{
	json_object *r = NULL;
	const char *why = NULL;
	FUZZ_ASSERT(rts_json_parse(text, strlen(text), 64, &r, &why) == 0);
	FUZZ_ASSERT(json_object_object_length(r) == 2);
	FUZZ_ASSERT(!strcmp(rts_json_get_string(r, "text"), rts_json_get_string(packet, "text")));
	json_object *files = rts_json_get(r, "files");
	FUZZ_ASSERT(files && json_object_array_length(files) <= RTS_RICH_REPLY_FILES_MAX);
	for (size_t i = 0; i < json_object_array_length(files); i++) {
		json_object *f = json_object_array_get_idx(files, i);
		const char *name = rts_json_get_string(f, "name");
		size_t n = strlen(name);
		FUZZ_ASSERT(n >= 1 && n <= RTS_RICH_FILE_NAME_MAX && name[0] != '.' && name[0] != ' ');
		for (size_t j = 0; j < n; j++)
			FUZZ_ASSERT(name[j] != '/' && name[j] != '\\' && (unsigned char)name[j] >= 0x20 && name[j] != 0x7f);
		FUZZ_ASSERT(rts_utf8_valid(name, n));
		const char *mime = rts_json_get_string(f, "mime");
		FUZZ_ASSERT(mime && !strcmp(brokerd_rich_file_mime(mime), mime));
	}
	json_object_put(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	const char *why = NULL;
	switch (data[0] % 3) {
	case 0: {
		json_object *p = NULL;
		if (brokerd_body_parse(body, len, &p, &why) < 0)
			return 0;
		char *out = NULL;
		size_t n = 0;
		int r = brokerd_rich_reply_build(p, "0123456789abcdef", &out, &n, &why);
		if (r == 0) {
			FUZZ_ASSERT(out && strlen(out) == n);
			check_reply(out, p);
		} else {
			FUZZ_ASSERT(!out && why && (r == -EINVAL || r == -ESTALE));
		}
		free(out);
		json_object_put(p);
		return 0;
	}
	case 1: {
		uint8_t caps = 0xff;
		bool history;
		if (brokerd_rich_ready_parse(body, len, &caps, &history, &why) == 0)
			FUZZ_ASSERT((caps & ~(RTS_RICH_CAP_PRIVATE_TO | RTS_RICH_CAP_READER_RECORDS)) == 0);
		else
			FUZZ_ASSERT(caps == 0);
		return 0;
	}
	default: {
		json_object *in = NULL;
		if (brokerd_body_parse(body, len, &in, &why) < 0)
			return 0;
		struct brokerd_binding b = {.turn_id = "0123456789abcdef", .speaker_id = "1", .speaker_name = "A",
					    .principal_id = "p"};
		if (brokerd_rich_input_check(in, &b, &why) < 0)
			FUZZ_ASSERT(why);
		else
			FUZZ_ASSERT(!strcmp(rts_json_get_string(in, "turnId"), "0123456789abcdef"));
		json_object_put(in);
		return 0;
	}
	}
}
