/* SPDX-License-Identifier: Apache-2.0 */
/* statd's side of rich mode (DESIGN.md 8.5; helpers' rich-design.md sections 1 and 3):
 * the payloads it builds and reads, and the files it writes in a rich channel's
 * workspace.
 *
 *   rich_input.c  the turn input (a sealed memfd), the rendered images of a message, the
 *                 reply runnerd relays (pure: no daemon state, unit-tested)
 *   rich_fs.c     the .channel-key record, attachments, the fresh start's archive: every
 *                 file through a no-follow directory descriptor, never a path string under
 *                 the workspace (the workspace is guest-writable: a guest can plant a
 *                 symbolic link anywhere in it)
 *
 * Nothing here logs; callers log once with what *why says. */
#ifndef STATD_RICH_H
#define STATD_RICH_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "statd/queue.h"

/* ---- rich_input.c ---- */

/* A message's "images" (validated by statd_message_parse(): mime on the allow-list, data
 * strict base64) rendered as the JSON array the turn input carries:
 * [{"mime":"image/png","data":"..."},...]. Returns the heap text (caller frees) with *len,
 * or NULL when images is NULL or empty. */
char *statd_rich_images_render(json_object *images, size_t *len);

/* The turn input of rich-design.md section 3 as a sealed memfd (common/memfd.h) of at most
 * RTS_RICH_TURN_INPUT_MAX bytes:
 *   {"v":1,"turnId","speaker":{"id","name","principalId"},"text","images"?,
 *    "attachments"?:[{"name","path","mime","bytes"}],"timeZone","now","startFresh"}
 * Returns the fd, -EINVAL for a string that is not valid UTF-8, -EFBIG when it would not
 * fit, or -errno. */
int statd_rich_input_build(const struct statd_rich_input *in, const char *time_zone, const char *now);

/* A rich turn's reply, read from the memfd runnerd relayed from brokerd and checked
 * again (brokerd built it, but statd gives it to the bot): {"text" (at most
 * RTS_RICH_TEXT_CHARS_MAX characters), "files"?: at most RTS_RICH_REPLY_FILES_MAX of
 * {"name" (1 to RTS_RICH_FILE_NAME_MAX bytes, no '/', no leading '.', no control
 * character), "mime" (type/subtype, at most RTS_RICH_MIME_MAX bytes), "data" (strict base64
 * of at most RTS_RICH_REPLY_FILE_BYTES_MAX bytes)}, RTS_RICH_REPLY_FILES_TOTAL_MAX in all}
 * and nothing else. */
struct statd_rich_reply {
	json_object *text;  /* string */
	json_object *files; /* array (maybe empty) */
};

/* Read and check the reply in the sealed memfd fd (not closed here). Returns 0 with *out
 * (free with statd_rich_reply_free), or -errno with *why (static): the memfd's
 * (-EPERM unsealed, -EFBIG too large) or -EBADMSG for a reply of another shape (*why
 * names a file name with a control or format character, rts_code_point_hidden(), apart:
 * seed's reply file names are plain names). */
int statd_rich_reply_read(int fd, struct statd_rich_reply **out, const char **why);
void statd_rich_reply_free(struct statd_rich_reply *r);

/* mime is type/subtype of [A-Za-z0-9.+_-] and at most RTS_RICH_MIME_MAX bytes. */
bool statd_mime_ok(const char *mime);

/* The safe file name of attachment index (0-based) of a turn: its "name", else the last
 * segment of its URL's path, else "attachment"; every byte outside [A-Za-z0-9._-] becomes
 * '_', leading dots are dropped, at most 100 bytes. Caller frees. */
char *statd_attachment_name(const char *name, const char *url);

/* ---- rich_fs.c ---- */

/* The host-only record of the channel key beside its workspace:
 * workspace_root/<hash>.channel-key, a regular file (0600, ours) holding the key's bytes
 * (seed: "A host-only .channel-key record beside the workspace prevents ... collisions
 * across every lifecycle/session/attachment operation"). Returns 0 when it holds
 * channel; writes it (atomically) when it is missing; -EEXIST when it holds another key;
 * -errno otherwise. *why says which check failed. */
int statd_channel_key_check(const char *workspace_root, const char *hash, const char *channel, const char **why);

/* Store the bytes of the sealed memfd data_fd (at most max_bytes: -EFBIG beyond) as
 * attachment index of turn_id: attachments/<turn_id>/<index>-<a->file_name> in the
 * workspace ws_fd (an O_PATH directory fd), created with O_CREAT|O_EXCL|O_NOFOLLOW (0600)
 * below directories opened without following symbolic links; a symbolic link or other
 * non-directory a guest planted at "attachments" is replaced, not followed, and a
 * directory there that is not statd's is moved aside. guest is the guest account's uid in
 * accounts mode ((uid_t)-1 in single-account mode): the directories get mode 01770 and
 * the file 0660, each with an ACL entry for guest, so the container reads the attachment
 * (rich_fs.c says why the sticky bit). Sets a's file_name (from its name and url), path
 * (as the worker sees it, under /workspace), mime (mime when it is type/subtype, else
 * application/octet-stream) and bytes. Returns 0 or -errno with *why (-EOPNOTSUPP: the
 * file system has no ACLs). */
int statd_attachment_write(int ws_fd, uid_t guest, const char *turn_id, uint32_t index, int data_fd,
			   const char *mime, uint64_t max_bytes, struct statd_attachment *a, const char **why);

/* A fresh start of a rich channel, once its container is removed (seed: "startFresh
 * archives top-level plain .jsonl session files after the container is removed, replacing
 * any symlink the guest planted at sessions, sessions/archive or attachments instead of
 * following it"): make sure sessions/, sessions/archive/ and attachments/ are statd's
 * directories, shared with guest as statd_attachment_write() says (anything else there is
 * removed, a directory statd did not make moved aside, and the directory made), then move
 * every regular file sessions/NAME.jsonl to sessions/archive/ (never replacing a file
 * there: a name taken gets a random suffix). *moved counts them. Returns 0 or -errno with
 * *why. */
int statd_sessions_archive(int ws_fd, uid_t guest, unsigned *moved, const char **why);

/* The directories of statd_sessions_archive() alone (sessions/, sessions/archive/,
 * attachments/), made or restored before each rich turn: the container then writes its
 * sessions into statd's directory, shared with guest, instead of making one of its own
 * that statd could not archive from. Returns 0 or -errno with *why. */
int statd_rich_dirs_ensure(int ws_fd, uid_t guest, const char **why);

#endif
