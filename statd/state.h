/* SPDX-License-Identifier: Apache-2.0 */
/* statd's state file: the saved mode of every channel ever switched on or off.
 *
 * Format (DESIGN.md sections 6 and 8.5): {"version":1,"channels":{KEY:{"mode":"on"|"off"}}},
 * and a rich channel's entry {"mode":"rich","profile":NAME} (a profile name of the config's
 * rich.profiles, [a-z][a-z0-9_]{0,47}: present exactly for rich).
 * The file is host-only routing state. It is replaced atomically (temp file in the same
 * directory, fsync, rename, directory fsync) and never reset: a file that cannot be read
 * or does not have exactly this shape is an error the operator has to look at.
 *
 * The in-memory table keeps channels sorted by key (bytewise), which is also the order of
 * the file and of the control protocol's "channels" answer. These functions do no logging
 * except where noted, so they can be unit tested without the daemon. */
#ifndef STATD_STATE_H
#define STATD_STATE_H

#include <stdbool.h>
#include <stddef.h>

/* Bounds: a file larger than this is refused at load, and a save that would produce one
 * fails with -EFBIG (so we never write a file we would refuse to read back). */
#define STATD_STATE_MAX_BYTES (4u * 1024u * 1024u)
#define STATD_STATE_MAX_CHANNELS 65536u
#define STATD_STATE_VERSION 1

enum statd_mode {
	STATD_MODE_OFF = 0,
	STATD_MODE_ON = 1,  /* sealed */
	STATD_MODE_RICH = 2, /* rich, with a profile (DESIGN.md 8.5) */
};

struct statd_state;

/* The names of the modes by value, as a NULL-terminated initialiser: a table's one_of
 * (common/jspec.h), which stores a mode as its index. */
#define STATD_MODE_NAMES {[STATD_MODE_OFF] = "off", [STATD_MODE_ON] = "on", [STATD_MODE_RICH] = "rich", NULL}
_Static_assert(sizeof(enum statd_mode) == sizeof(int), "a mode stores as an int index");

/* "on" / "off" / "rich". */
const char *statd_mode_name(enum statd_mode m);
/* Parse "on" / "off" / "rich" into *m. Returns 0 or -EINVAL. */
int statd_mode_parse(const char *s, enum statd_mode *m);

/* An empty table. Never fails (aborts on OOM). Free with statd_state_free(). */
struct statd_state *statd_state_new(void);
void statd_state_free(struct statd_state *s);

/* Number of channels, and the i-th key/mode in key order (i < count). The key is borrowed
 * and valid until the table changes. */
size_t statd_state_count(const struct statd_state *s);
const char *statd_state_key(const struct statd_state *s, size_t i);
enum statd_mode statd_state_mode_at(const struct statd_state *s, size_t i);
/* The i-th channel's profile (borrowed like the key): NULL unless its mode is rich. */
const char *statd_state_profile_at(const struct statd_state *s, size_t i);
/* Channels whose mode is on; channels whose mode is rich. */
size_t statd_state_count_on(const struct statd_state *s);
size_t statd_state_count_rich(const struct statd_state *s);

/* The recorded mode of channel, or -ENOENT when the channel was never switched (callers
 * treat that as off: DESIGN.md section 3, "pass" for channels not sandboxed). */
int statd_state_get(const struct statd_state *s, const char *channel, enum statd_mode *mode);
/* The profile of a rich channel (borrowed, valid until the table changes), else NULL. */
const char *statd_state_profile(const struct statd_state *s, const char *channel);

/* Record mode (and, for rich, profile: copied) for channel in memory only. Returns 0;
 * -EINVAL when channel is not 1 to RTS_CHANNEL_MAX bytes, or profile is not a profile name
 * for rich or not NULL otherwise; -E2BIG when the channel is new and the table already
 * holds STATD_STATE_MAX_CHANNELS channels. */
int statd_state_set(struct statd_state *s, const char *channel, enum statd_mode mode, const char *profile);

/* Forget channel (used to undo a set whose save failed). Returns 0 or -ENOENT. */
int statd_state_remove(struct statd_state *s, const char *channel);

/* Load the state file at path into a new table (*out, caller frees).
 * Returns 0; -ENOENT when the file does not exist (the caller may seed a new one; nothing
 * else is ever a reason to create it); -EINVAL when it is not valid JSON of exactly the
 * shape above (unknown keys, version other than 1, a mode other than "on"/"off"/"rich", a
 * rich entry without a profile or another entry with one, a channel
 * key longer than RTS_CHANNEL_MAX bytes, trailing data, an empty file); -EFBIG when larger
 * than STATD_STATE_MAX_BYTES or listing more than STATD_STATE_MAX_CHANNELS channels; other
 * -errno when it cannot be read. On every error err holds one line naming the file and the
 * problem; channel keys appear in it only as hash prefixes. */
int statd_state_load(const char *path, struct statd_state **out, char *err, size_t errlen);

/* Write the table to path atomically: a new temp file ".<name>.tmp-<random>" in the same
 * directory (O_CREAT|O_EXCL|O_NOFOLLOW, 0600), the full document written and fsync'd, then
 * renamed over path, then the directory fsync'd. Returns 0 or -errno (-EFBIG when the
 * document would exceed STATD_STATE_MAX_BYTES). On failure path still holds the previous
 * file, byte for byte, and no temp file is left behind. A failing directory fsync after the
 * rename is logged as a warning and not reported: the new file is already in place. */
int statd_state_save(const struct statd_state *s, const char *path);

/* Set channel's mode (and profile, as statd_state_set) and save; when the save fails, the
 * table is put back exactly as it was (the channel forgotten again if it was new) and the
 * error returned. Returns 0 or -errno from statd_state_set / statd_state_save. An
 * unchanged mode and profile are not rewritten. */
int statd_state_update(struct statd_state *s, const char *path, const char *channel, enum statd_mode mode,
		       const char *profile);

#endif
