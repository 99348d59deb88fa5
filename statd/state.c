/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

#include "common/ids.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/tools.h"
#include "common/util.h"
#include "statd/state.h"

struct statd_state_entry {
	char *key;
	enum statd_mode mode;
	char *profile; /* rich only */
};

struct statd_state {
	struct statd_state_entry *v; /* sorted by strcmp(key) */
	size_t n, cap;
};

static const char *const mode_names[] = STATD_MODE_NAMES;

const char *statd_mode_name(enum statd_mode m)
{
	return (unsigned)m <= STATD_MODE_RICH ? mode_names[m] : "off";
}

int statd_mode_parse(const char *s, enum statd_mode *m)
{
	for (int i = 0; mode_names[i]; i++)
		if (strcmp(s, mode_names[i]) == 0) {
			*m = (enum statd_mode)i;
			return 0;
		}
	return -EINVAL;
}

struct statd_state *statd_state_new(void)
{
	return rts_xcalloc(1, sizeof(struct statd_state));
}

void statd_state_free(struct statd_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].key);
		free(s->v[i].profile);
	}
	free(s->v);
	free(s);
}

size_t statd_state_count(const struct statd_state *s)
{
	return s->n;
}

const char *statd_state_key(const struct statd_state *s, size_t i)
{
	return i < s->n ? s->v[i].key : NULL;
}

enum statd_mode statd_state_mode_at(const struct statd_state *s, size_t i)
{
	return i < s->n ? s->v[i].mode : STATD_MODE_OFF;
}

const char *statd_state_profile_at(const struct statd_state *s, size_t i)
{
	return i < s->n ? s->v[i].profile : NULL;
}

static size_t count_mode(const struct statd_state *s, enum statd_mode mode)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++)
		n += s->v[i].mode == mode;
	return n;
}

size_t statd_state_count_on(const struct statd_state *s)
{
	return count_mode(s, STATD_MODE_ON);
}

size_t statd_state_count_rich(const struct statd_state *s)
{
	return count_mode(s, STATD_MODE_RICH);
}

/* Binary search: true with the index when found, else false with the insertion point. */
static bool find(const struct statd_state *s, const char *key, size_t *at)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->v[mid].key, key);
		if (c == 0) {
			*at = mid;
			return true;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return false;
}

int statd_state_get(const struct statd_state *s, const char *channel, enum statd_mode *mode)
{
	size_t i;
	if (!find(s, channel, &i))
		return -ENOENT;
	*mode = s->v[i].mode;
	return 0;
}

const char *statd_state_profile(const struct statd_state *s, const char *channel)
{
	size_t i;
	return find(s, channel, &i) ? s->v[i].profile : NULL;
}

int statd_state_set(struct statd_state *s, const char *channel, enum statd_mode mode, const char *profile)
{
	size_t len = strlen(channel);
	if (len == 0 || len > RTS_CHANNEL_MAX || (unsigned)mode > STATD_MODE_RICH)
		return -EINVAL;
	if (mode == STATD_MODE_RICH ? !profile || !rts_name_valid(profile, RTS_NAME_MAX) : profile != NULL)
		return -EINVAL;
	size_t i;
	if (find(s, channel, &i)) {
		s->v[i].mode = mode;
		free(s->v[i].profile);
		s->v[i].profile = profile ? rts_xstrdup(profile) : NULL;
		return 0;
	}
	if (s->n >= STATD_STATE_MAX_CHANNELS)
		return -E2BIG;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = rts_xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
	s->v[i] = (struct statd_state_entry){.key = rts_xstrdup(channel), .mode = mode,
					     .profile = profile ? rts_xstrdup(profile) : NULL};
	s->n++;
	return 0;
}

int statd_state_remove(struct statd_state *s, const char *channel)
{
	size_t i;
	if (!find(s, channel, &i))
		return -ENOENT;
	free(s->v[i].key);
	free(s->v[i].profile);
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
	s->n--;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct statd_state_entry *)a)->key, ((const struct statd_state_entry *)b)->key);
}

/* The document is tiny in depth: top object, channels, entry, mode. */
#define STATE_JSON_DEPTH 8

/* A channel key: 1 to RTS_CHANNEL_MAX bytes, named in messages only by its hash prefix
 * (channel keys are the bot's routing data, not something for an error line). */
static bool state_key_check(struct rts_jctx *ctx, const char *key, void *entry)
{
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(key, hash);
	rts_jctx_rename(ctx, "channel %.12s", hash);
	size_t len = strlen(key);
	if (len == 0 || len > RTS_CHANNEL_MAX)
		return rts_jfail(ctx, "channel key must be 1 to %u bytes", RTS_CHANNEL_MAX);
	if (entry)
		((struct statd_state_entry *)entry)->key = rts_xstrdup(key);
	return true;
}

static bool profile_check(struct rts_jctx *ctx, json_object *v, void *base)
{
	if (!rts_name_valid(json_object_get_string(v), RTS_NAME_MAX))
		return rts_jfail(ctx, "must be a profile name ([a-z][a-z0-9_]{0,47})");
	return true;
}

/* A profile exactly for a rich channel. */
static bool entry_check(struct rts_jctx *ctx, json_object *v, void *entry)
{
	bool rich = strcmp(json_object_get_string(rts_json_get(v, "mode")), "rich") == 0;
	if (rich != (rts_json_get(v, "profile") != NULL))
		return rts_jfail(ctx, rich ? "a rich channel needs a \"profile\"" : "only a rich channel has a \"profile\"");
	return true;
}

static const struct rts_jspec entry_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "mode", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .one_of = mode_names,
		 .store = RTS_JS_INDEX, .at = offsetof(struct statd_state_entry, mode)},
		{.key = "profile", .types = RTS_JT_STRING, .min = 1, .max = RTS_NAME_MAX, .check = profile_check,
		 .store = RTS_JS_STRDUP, .at = offsetof(struct statd_state_entry, profile)},
		{0},
	},
	.check = entry_check,
};

static const struct rts_jspec state_spec = {
	.flags = RTS_JO_LIST_KEYS,
	.fields = (const struct rts_jfield[]){
		{.key = "version", .types = RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = STATD_STATE_VERSION,
		 .max = STATD_STATE_VERSION},
		{.key = "channels", .types = RTS_JT_OBJECT, .flags = RTS_JF_REQUIRED | RTS_JF_COUNT,
		 .max = STATD_STATE_MAX_CHANNELS, .items = "channels", .key_check = state_key_check,
		 .each = &(const struct rts_jfield){.types = RTS_JT_OBJECT, .object = &entry_spec,
						    .store = RTS_JS_OBJECT},
		 .store = RTS_JS_ARRAY, .at = offsetof(struct statd_state, v),
		 	.count_at = offsetof(struct statd_state, n),
		 .elem_size = sizeof(struct statd_state_entry)},
		{0},
	},
};
static const struct rts_jfield state_root = RTS_JSPEC_ROOT(&state_spec);

int statd_state_load(const char *path, struct statd_state **out, char *err, size_t errlen)
{
	*out = NULL;
	cleanup_json json_object *root = NULL;
	int r = rts_json_read_file_strict(path, STATD_STATE_MAX_BYTES, STATE_JSON_DEPTH, &root, err, errlen);
	if (r == -EINVAL) {
		/* Say so plainly: an empty file is what a full disk or a bad restore leaves. */
		struct stat st;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
			snprintf(err, errlen, "%s: empty file", path);
	}
	if (r < 0)
		return r;
	struct statd_state *s = statd_state_new();
	struct rts_jerr e;
	if (rts_jspec_validate(root, &state_root, s, RTS_JV_OPERATOR, &e) < 0) {
		snprintf(err, errlen, "%s: %s: %s", path, e.path[0] ? e.path : "(top level)", e.text);
		statd_state_free(s);
		return e.problem == RTS_JP_COUNT ? -EFBIG : -EINVAL;
	}
	s->cap = s->n;
	qsort(s->v, s->n, sizeof(*s->v), cmp_entry);
	*out = s;
	return 0;
}

static char *state_dump(const struct statd_state *s)
{
	cleanup_json json_object *root = json_object_new_object();
	json_object *channels = json_object_new_object();
	json_object_object_add(root, "version", json_object_new_int(STATD_STATE_VERSION));
	json_object_object_add(root, "channels", channels);
	for (size_t i = 0; i < s->n; i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "mode", json_object_new_string(statd_mode_name(s->v[i].mode)));
		if (s->v[i].profile)
			json_object_object_add(e, "profile", json_object_new_string(s->v[i].profile));
		/* Keys are unique by construction; the _ex variant skips json-c's duplicate scan. */
		json_object_object_add_ex(channels, s->v[i].key, e, JSON_C_OBJECT_ADD_KEY_IS_NEW);
	}
	const char *text =
		json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							   JSON_C_TO_STRING_NOSLASHESCAPE);
	return rts_xasprintf("%s\n", text);
}

int statd_state_save(const struct statd_state *s, const char *path)
{
	cleanup_free char *doc = state_dump(s);
	size_t len = strlen(doc);
	if (len > STATD_STATE_MAX_BYTES)
		return -EFBIG;

	cleanup_free char *dir_copy = rts_xstrdup(path);
	cleanup_free char *base_copy = rts_xstrdup(path);
	const char *dir = dirname(dir_copy);
	const char *base = basename(base_copy);
	if (!*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return -EINVAL;

	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;

	char rnd[17];
	int r = rts_random_hex(rnd, 8);
	if (r < 0)
		return r;
	/* Hidden and unique, so a crash can leave at most a stray dot-file that is never read. */
	cleanup_free char *tmp = rts_xasprintf(".%s.tmp-%s", base, rnd);

	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	r = rts_write_all(fd, doc, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	/* close() can report a deferred write error (NFS, quota): it counts. */
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, base) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		return r;
	}
	if (fsync(dfd) < 0)
		log_warning_errno(errno, "state directory %s: fsync after rename failed (the new state file is in "
					 "place but may not survive a power loss): %m",
				  dir);
	return 0;
}

int statd_state_update(struct statd_state *s, const char *path, const char *channel, enum statd_mode mode,
		       const char *profile)
{
	enum statd_mode old;
	bool existed = statd_state_get(s, channel, &old) == 0;
	cleanup_free char *old_profile = existed && statd_state_profile(s, channel)
						 ? rts_xstrdup(statd_state_profile(s, channel))
						 : NULL;
	if (existed && old == mode && (old_profile && profile ? strcmp(old_profile, profile) == 0 : old_profile == profile))
		return 0;
	int r = statd_state_set(s, channel, mode, profile);
	if (r < 0)
		return r;
	r = statd_state_save(s, path);
	if (r < 0) {
		if (existed)
			statd_state_set(s, channel, old, old_profile);
		else
			statd_state_remove(s, channel);
	}
	return r;
}
