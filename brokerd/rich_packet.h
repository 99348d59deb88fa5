/* SPDX-License-Identifier: Apache-2.0 */
/* What the worker protocol of a rich channel carries, as pure functions (no I/O, no
 * locking): statd's turn input, the worker's /worker/ready body and its /worker/result
 * reply packet (rich-design.md sections 3 and 4). Every bound is one of common/limits.h's
 * RTS_RICH_*. */
#ifndef BROKERD_RICH_PACKET_H
#define BROKERD_RICH_PACKET_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/brokerd.h"

/* Unicode code points in len bytes of valid UTF-8 (the seed's "characters"). */
size_t brokerd_rich_utf8_chars(const char *s, size_t len);

/* The turn input (parsed strictly): {"v":1, "turnId", "speaker":{"id","name","principalId"},
 * "text" (at most 100,000 characters), "images"? (at most eight {"mime": PNG, JPEG, WebP or
 * GIF, "data": base64 of at most 20 MiB}, 64 MiB in all), "attachments"? (at most ten
 * {"name" (no '/', no leading dot, no control byte, 1..255 bytes), "path" (in
 * /workspace/attachments/<turnId>/), "mime", "bytes" (at most 25 MiB)}, 50 MiB in all),
 * "timeZone", "now", "startFresh"} and nothing else; the turn id and the speaker must be
 * b's. Returns 0, or -EINVAL with *why (static or thread-local; no input data). */
int brokerd_rich_input_check(json_object *in, const struct brokerd_binding *b, const char **why);

/* A /worker/ready body (seed, "Worker capability handshake"): empty (an older worker: no
 * capabilities), or exactly {"capabilities":{"privateTo":bool,"readerRecords":bool},
 * "privateHistory":bool}. Returns 0 with *caps (RTS_RICH_CAP_* bits) and *private_history,
 * or -EINVAL (malformed: refused, never read as "no capabilities"). */
int brokerd_rich_ready_parse(const char *body, size_t len, uint8_t *caps, bool *private_history, const char **why);

/* A reply packet (parsed strictly): {"turnId", "text" (at most 100,000 characters),
 * "files"? (at most ten {"name", "mime"?, "data": base64 of at most 10 MiB}, 50 MiB in
 * all)} and nothing else. Builds the reply statd gets, {"text", "files":[{"name", "mime",
 * "data"}]}, with names through brokerd_rich_file_name() and types through
 * brokerd_rich_file_mime(). Returns 0 with *out (caller frees) and *len; -ESTALE when
 * turnId is not turn_id; -EINVAL otherwise (*why set). */
int brokerd_rich_reply_build(json_object *packet, const char *turn_id, char **out, size_t *len, const char **why);

/* A reply file's name made safe: leading dots and spaces dropped, '/', '\\' and control or
 * format characters (rts_code_point_hidden(): C0, C1, bidi overrides, zero-width, BOM)
 * each replaced by one '_', cut to RTS_RICH_FILE_NAME_MAX bytes on a character boundary,
 * "file" when nothing is left. name must be valid UTF-8 without NUL. Caller frees. */
char *brokerd_rich_file_name(const char *name, size_t len);

/* mime when it is on the reply files' allow-list, else "application/octet-stream"
 * (static). */
const char *brokerd_rich_file_mime(const char *mime);

#endif
