/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a rich turn's reply as statd reads it from the sealed memfd runnerd
 * relays (statd/rich.h, statd_rich_reply_read): brokerd builds it from the worker's reply
 * packet, and statd checks it again before a bot gets it.
 *
 * Invariants for a reply statd accepts: the text is at most RTS_RICH_TEXT_CHARS_MAX
 * characters; at most RTS_RICH_REPLY_FILES_MAX files, each named without '/', a leading
 * dot or a control character, with a media type and base64 data of at most
 * RTS_RICH_REPLY_FILE_BYTES_MAX bytes, RTS_RICH_REPLY_FILES_TOTAL_MAX in all. A refusal
 * says why in a short fixed text. */
#include "config.h"

#include <stdint.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/memfd.h"
#include "statd/request.h"
#include "statd/rich.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = rts_memfd_from_buffer("fuzz", data, size);
	FUZZ_ASSERT(fd >= 0);
	struct statd_rich_reply *r = NULL;
	const char *why = NULL;
	int rc = statd_rich_reply_read(fd, &r, &why);
	close(fd);
	if (rc < 0) {
		FUZZ_ASSERT(!r && why && strlen(why) < 200);
		return 0;
	}
	const char *text = json_object_get_string(r->text);
	FUZZ_ASSERT(json_object_is_type(r->text, json_type_string));
	FUZZ_ASSERT(statd_utf8_chars(text, (size_t)json_object_get_string_len(r->text)) <= RTS_RICH_TEXT_CHARS_MAX);
	size_t n = json_object_array_length(r->files);
	FUZZ_ASSERT(n <= RTS_RICH_REPLY_FILES_MAX);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		json_object *f = json_object_array_get_idx(r->files, i);
		const char *name = rts_json_get_string(f, "name");
		FUZZ_ASSERT(name && name[0] && name[0] != '.' && !strchr(name, '/'));
		for (const char *p = name; *p; p++)
			FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
		FUZZ_ASSERT(statd_mime_ok(rts_json_get_string(f, "mime")));
		json_object *d = rts_json_get(f, "data");
		size_t bytes = rts_base64_decoded_len(json_object_get_string(d), (size_t)json_object_get_string_len(d));
		FUZZ_ASSERT(bytes <= RTS_RICH_REPLY_FILE_BYTES_MAX);
		total += bytes;
	}
	FUZZ_ASSERT(total <= RTS_RICH_REPLY_FILES_TOTAL_MAX);
	statd_rich_reply_free(r);
	return 0;
}
