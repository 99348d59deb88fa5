/* SPDX-License-Identifier: Apache-2.0 */
/* statd's state file (statd/state.h) and directory checks (statd/workspace.h). */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ids.h"
#include "common/paths.h"
#include "common/util.h"
#include "statd/state.h"
#include "statd/workspace.h"

static char tmpdir[256];
static char path[512]; /* tmpdir/channels.json */

static void setup(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/check_state.XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/channels.json", tmpdir);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_DP)
		return rmdir(p);
	return unlink(p);
}

static int chmod_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_D)
		chmod(p, 0700);
	return 0;
}

static void teardown(void)
{
	nftw(tmpdir, chmod_entry, 16, FTW_PHYS);
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- helpers ---- */

static void write_file(const char *p, const char *data, size_t len)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_write_all(fd, data, len), 0);
	close(fd);
}

/* The whole file, newly allocated; *len receives its size. */
static char *read_all(const char *p, size_t *len)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	char *buf = rts_xmalloc((size_t)st.st_size + 1);
	ssize_t n = read(fd, buf, (size_t)st.st_size + 1);
	ck_assert_int_eq(n, st.st_size);
	close(fd);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* Entries of tmpdir other than "." and "..". */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void assert_same_state(const struct statd_state *a, const struct statd_state *b)
{
	ck_assert_uint_eq(statd_state_count(a), statd_state_count(b));
	for (size_t i = 0; i < statd_state_count(a); i++) {
		ck_assert_str_eq(statd_state_key(a, i), statd_state_key(b, i));
		ck_assert_int_eq(statd_state_mode_at(a, i), statd_state_mode_at(b, i));
	}
}

static struct statd_state *sample_state(void)
{
	struct statd_state *s = statd_state_new();
	char long_key[513];
	memset(long_key, 'k', 512);
	long_key[512] = '\0';
	ck_assert_int_eq(statd_state_set(s, "guild:1/channel:2", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "quote\"back\\slash", STATD_MODE_OFF, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "k\xc3\xa4n\xc3\xa4l \xe3\x83\x81\xe3\x83\xa3 \xf0\x9f\x98\x80", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "tab\there\nnewline\x01", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "../../etc/passwd", STATD_MODE_OFF, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "</script>/", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, long_key, STATD_MODE_ON, NULL), 0);
	return s;
}

/* ---- the table ---- */

START_TEST(test_mode_names)
{
	enum statd_mode m;
	ck_assert_int_eq(statd_mode_parse("on", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_ON);
	ck_assert_int_eq(statd_mode_parse("off", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_OFF);
	ck_assert_int_eq(statd_mode_parse("maybe", &m), -EINVAL);
	ck_assert_int_eq(statd_mode_parse("ON", &m), -EINVAL);
	ck_assert_int_eq(statd_mode_parse("", &m), -EINVAL);
	ck_assert_str_eq(statd_mode_name(STATD_MODE_ON), "on");
	ck_assert_str_eq(statd_mode_name(STATD_MODE_OFF), "off");
}
END_TEST

START_TEST(test_table_sorted_and_bounded)
{
	struct statd_state *s = statd_state_new();
	enum statd_mode m;
	ck_assert_int_eq(statd_state_get(s, "x", &m), -ENOENT);
	ck_assert_int_eq(statd_state_set(s, "b", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "c", STATD_MODE_OFF, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "a", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_set(s, "b", STATD_MODE_OFF, NULL), 0); /* update, not a second entry */
	ck_assert_uint_eq(statd_state_count(s), 3);
	ck_assert_str_eq(statd_state_key(s, 0), "a");
	ck_assert_str_eq(statd_state_key(s, 1), "b");
	ck_assert_str_eq(statd_state_key(s, 2), "c");
	ck_assert_uint_eq(statd_state_count_on(s), 1);
	ck_assert_int_eq(statd_state_get(s, "b", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_OFF);

	/* Keys are 1 to 512 bytes. */
	char key[514];
	memset(key, 'z', 513);
	key[513] = '\0';
	ck_assert_int_eq(statd_state_set(s, key, STATD_MODE_ON, NULL), -EINVAL);
	ck_assert_int_eq(statd_state_set(s, "", STATD_MODE_ON, NULL), -EINVAL);

	ck_assert_int_eq(statd_state_remove(s, "b"), 0);
	ck_assert_int_eq(statd_state_remove(s, "b"), -ENOENT);
	ck_assert_uint_eq(statd_state_count(s), 2);
	statd_state_free(s);
}
END_TEST

START_TEST(test_table_channel_limit)
{
	struct statd_state *s = statd_state_new();
	char key[32];
	for (unsigned i = 0; i < STATD_STATE_MAX_CHANNELS; i++) {
		snprintf(key, sizeof(key), "c%08u", i);
		ck_assert_int_eq(statd_state_set(s, key, STATD_MODE_ON, NULL), 0);
	}
	ck_assert_int_eq(statd_state_set(s, "one-too-many", STATD_MODE_ON, NULL), -E2BIG);
	/* Changing a known channel is still fine. */
	ck_assert_int_eq(statd_state_set(s, "c00000007", STATD_MODE_OFF, NULL), 0);
	statd_state_free(s);
}
END_TEST

/* ---- load and save ---- */

START_TEST(test_round_trip)
{
	struct statd_state *s = sample_state();
	ck_assert_int_eq(statd_state_save(s, path), 0);
	struct statd_state *t = NULL;
	char err[512] = "";
	ck_assert_msg(statd_state_load(path, &t, err, sizeof(err)) == 0, "%s", err);
	assert_same_state(s, t);
	enum statd_mode m;
	ck_assert_int_eq(statd_state_get(t, "quote\"back\\slash", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_OFF);

	/* The file has exactly the documented shape and a private mode. */
	size_t len;
	cleanup_free char *text = read_all(path, &len);
	ck_assert_ptr_nonnull(strstr(text, "\"version\": 1"));
	ck_assert_ptr_nonnull(strstr(text, "\"mode\": \"on\""));
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);

	/* Saving the loaded table reproduces the file byte for byte. */
	ck_assert_int_eq(statd_state_save(t, path), 0);
	size_t len2;
	cleanup_free char *text2 = read_all(path, &len2);
	ck_assert_uint_eq(len, len2);
	ck_assert_mem_eq(text, text2, len);
	statd_state_free(s);
	statd_state_free(t);
}
END_TEST

START_TEST(test_round_trip_empty)
{
	struct statd_state *s = statd_state_new();
	ck_assert_int_eq(statd_state_save(s, path), 0);
	struct statd_state *t = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &t, err, sizeof(err)), 0);
	ck_assert_uint_eq(statd_state_count(t), 0);
	statd_state_free(s);
	statd_state_free(t);
}
END_TEST

START_TEST(test_save_leaves_no_temp_files)
{
	struct statd_state *s = sample_state();
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(statd_state_save(s, path), 0);
	ck_assert_int_eq(dir_entries(tmpdir), 1);
	statd_state_free(s);
}
END_TEST

START_TEST(test_save_replaces_by_rename)
{
	struct statd_state *s = statd_state_new();
	ck_assert_int_eq(statd_state_set(s, "a", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_save(s, path), 0);
	struct stat before, after;
	ck_assert_int_eq(stat(path, &before), 0);
	ck_assert_int_eq(statd_state_set(s, "a", STATD_MODE_OFF, NULL), 0);
	ck_assert_int_eq(statd_state_save(s, path), 0);
	ck_assert_int_eq(stat(path, &after), 0);
	/* A new inode: the old file was never rewritten in place. */
	ck_assert(before.st_ino != after.st_ino);
	struct statd_state *t = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &t, err, sizeof(err)), 0);
	enum statd_mode m;
	ck_assert_int_eq(statd_state_get(t, "a", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_OFF);
	statd_state_free(s);
	statd_state_free(t);
}
END_TEST

/* Save a small "old" file and keep its bytes for comparison. */
static char *old_file(size_t *len)
{
	struct statd_state *s = statd_state_new();
	ck_assert_int_eq(statd_state_set(s, "old-channel", STATD_MODE_ON, NULL), 0);
	ck_assert_int_eq(statd_state_save(s, path), 0);
	statd_state_free(s);
	return read_all(path, len);
}

static void assert_old_intact(const char *old, size_t old_len)
{
	size_t len;
	cleanup_free char *now = read_all(path, &len);
	ck_assert_uint_eq(len, old_len);
	ck_assert_mem_eq(now, old, len);
	ck_assert_int_eq(dir_entries(tmpdir), 1);
}

static struct statd_state *big_state(unsigned n)
{
	struct statd_state *s = statd_state_new();
	char key[128];
	for (unsigned i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "guild:123456789012345678/channel:%08u/padding-padding-padding-padding", i);
		ck_assert_int_eq(statd_state_set(s, key, STATD_MODE_ON, NULL), 0);
	}
	return s;
}

/* A write that fails half-way (like ENOSPC) works as root too: RLIMIT_FSIZE. */
START_TEST(test_failed_write_keeps_old_file)
{
	size_t old_len;
	cleanup_free char *old = old_file(&old_len);
	struct statd_state *s = big_state(2000);

	signal(SIGXFSZ, SIG_IGN);
	struct rlimit saved, small;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
	small = saved;
	small.rlim_cur = 4096;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
	int r = statd_state_save(s, path);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);

	ck_assert_int_eq(r, -EFBIG);
	assert_old_intact(old, old_len);
	statd_state_free(s);
}
END_TEST

/* The classic case, a read-only directory; root ignores directory permissions. */
START_TEST(test_readonly_dir_keeps_old_file)
{
	if (geteuid() == 0)
		return; /* covered for root by test_failed_write_keeps_old_file */
	size_t old_len;
	cleanup_free char *old = old_file(&old_len);
	struct statd_state *s = sample_state();
	ck_assert_int_eq(chmod(tmpdir, 0500), 0);
	int r = statd_state_save(s, path);
	ck_assert_int_eq(chmod(tmpdir, 0700), 0);
	ck_assert_int_eq(r, -EACCES);
	assert_old_intact(old, old_len);
	statd_state_free(s);
}
END_TEST

START_TEST(test_missing_dir)
{
	struct statd_state *s = sample_state();
	char p[600];
	snprintf(p, sizeof(p), "%s/no-such-dir/channels.json", tmpdir);
	ck_assert_int_eq(statd_state_save(s, p), -ENOENT);
	statd_state_free(s);
}
END_TEST

/* A table whose file would be larger than we accept back is not written at all. */
START_TEST(test_oversized_save_refused)
{
	size_t old_len;
	cleanup_free char *old = old_file(&old_len);
	struct statd_state *s = big_state(STATD_STATE_MAX_CHANNELS);
	ck_assert_int_eq(statd_state_save(s, path), -EFBIG);
	assert_old_intact(old, old_len);
	statd_state_free(s);
}
END_TEST

/* statd_state_update: memory and file stay as they were when the write fails. */
START_TEST(test_update_rolls_back)
{
	size_t old_len;
	cleanup_free char *old = old_file(&old_len);
	struct statd_state *s = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &s, err, sizeof(err)), 0);

	signal(SIGXFSZ, SIG_IGN);
	struct rlimit saved, none;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
	none = saved;
	none.rlim_cur = 0;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &none), 0);
	int r1 = statd_state_update(s, path, "new-channel", STATD_MODE_ON, NULL);
	int r2 = statd_state_update(s, path, "old-channel", STATD_MODE_OFF, NULL);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);

	ck_assert_int_eq(r1, -EFBIG);
	ck_assert_int_eq(r2, -EFBIG);
	enum statd_mode m;
	ck_assert_int_eq(statd_state_get(s, "new-channel", &m), -ENOENT);
	ck_assert_int_eq(statd_state_get(s, "old-channel", &m), 0);
	ck_assert_int_eq(m, STATD_MODE_ON);
	ck_assert_uint_eq(statd_state_count(s), 1);
	assert_old_intact(old, old_len);

	/* And when it works, both change. */
	ck_assert_int_eq(statd_state_update(s, path, "new-channel", STATD_MODE_OFF, NULL), 0);
	struct statd_state *t = NULL;
	ck_assert_int_eq(statd_state_load(path, &t, err, sizeof(err)), 0);
	assert_same_state(s, t);
	ck_assert_uint_eq(statd_state_count(t), 2);
	statd_state_free(s);
	statd_state_free(t);
}
END_TEST

START_TEST(test_load_missing)
{
	struct statd_state *s = NULL;
	char err[512] = "";
	ck_assert_int_eq(statd_state_load(path, &s, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(dir_entries(tmpdir), 0); /* nothing created */
}
END_TEST

/* Every corrupt or wrongly shaped file is refused, named in the message, and left alone. */
static const struct {
	const char *name;
	const char *text;
	size_t len; /* 0: strlen */
} corrupt[] = {
	{"invalid JSON", "{\"version\":1,\"channels\":{", 0},
	{"not JSON at all", "channels: on", 0},
	{"empty file", "", 0},
	{"whitespace only", " \n", 0},
	{"trailing garbage", "{\"version\":1,\"channels\":{}} x", 0},
	{"second document", "{\"version\":1,\"channels\":{}}{}", 0},
	{"top level array", "[]", 0},
	{"wrong version", "{\"version\":2,\"channels\":{}}", 0},
	{"version as string", "{\"version\":\"1\",\"channels\":{}}", 0},
	{"version as float", "{\"version\":1.0,\"channels\":{}}", 0},
	{"missing version", "{\"channels\":{}}", 0},
	{"missing channels", "{\"version\":1}", 0},
	{"channels not an object", "{\"version\":1,\"channels\":[]}", 0},
	{"channels null", "{\"version\":1,\"channels\":null}", 0},
	{"unknown top-level key", "{\"version\":1,\"channels\":{},\"extra\":true}", 0},
	{"mode maybe", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"maybe\"}}}", 0},
	{"mode as bool", "{\"version\":1,\"channels\":{\"a\":{\"mode\":true}}}", 0},
	{"mode with NUL", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"on\\u0000\"}}}", 0},
	{"entry not an object", "{\"version\":1,\"channels\":{\"a\":\"on\"}}", 0},
	{"entry without mode", "{\"version\":1,\"channels\":{\"a\":{}}}", 0},
	{"entry with extra key", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"on\",\"x\":1}}}", 0},
	{"empty channel key", "{\"version\":1,\"channels\":{\"\":{\"mode\":\"on\"}}}", 0},
	{"invalid UTF-8", "{\"version\":1,\"channels\":{\"\xff\":{\"mode\":\"on\"}}}", 0},
	{"NUL byte", "{\"version\":1,\"channels\":{}}\0", 28},
	/* Rich channels (DESIGN.md 8.5): a profile exactly with mode rich. */
	{"rich without profile", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"rich\"}}}", 0},
	{"on with profile", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"on\",\"profile\":\"p\"}}}", 0},
	{"profile not a name", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"rich\",\"profile\":\"P/x\"}}}", 0},
	{"profile empty", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"rich\",\"profile\":\"\"}}}", 0},
	{"profile null", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"rich\",\"profile\":null}}}", 0},
	{"profile a number", "{\"version\":1,\"channels\":{\"a\":{\"mode\":\"rich\",\"profile\":1}}}", 0},
};

/* A rich channel's mode and profile go to the file and come back; a profile change is a
 * change, the same profile is not rewritten. */
START_TEST(test_rich_round_trip)
{
	struct statd_state *s = statd_state_new();
	ck_assert_int_eq(statd_state_set(s, "r", STATD_MODE_RICH, "default"), 0);
	ck_assert_int_eq(statd_state_set(s, "o", STATD_MODE_ON, NULL), 0);
	/* Bad combinations are refused in memory too. */
	ck_assert_int_eq(statd_state_set(s, "x", STATD_MODE_RICH, NULL), -EINVAL);
	ck_assert_int_eq(statd_state_set(s, "x", STATD_MODE_ON, "default"), -EINVAL);
	ck_assert_int_eq(statd_state_set(s, "x", STATD_MODE_RICH, "Bad"), -EINVAL);
	ck_assert_int_eq(statd_state_set(s, "x", (enum statd_mode)3, NULL), -EINVAL);
	ck_assert_int_eq(statd_state_save(s, path), 0);
	size_t len;
	cleanup_free char *text = read_all(path, &len);
	ck_assert_ptr_nonnull(strstr(text, "\"profile\": \"default\""));
	ck_assert_ptr_nonnull(strstr(text, "\"mode\": \"rich\""));
	struct statd_state *t = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &t, err, sizeof(err)), 0);
	enum statd_mode mode;
	ck_assert_int_eq(statd_state_get(t, "r", &mode), 0);
	ck_assert_int_eq(mode, STATD_MODE_RICH);
	ck_assert_str_eq(statd_state_profile(t, "r"), "default");
	ck_assert_ptr_null(statd_state_profile(t, "o"));
	ck_assert_uint_eq(statd_state_count_rich(t), 1);
	ck_assert_uint_eq(statd_state_count_on(t), 1);
	ck_assert_str_eq(statd_state_profile_at(t, 1), "default"); /* "o" < "r" */
	/* Another profile, then off: each written, the profile gone with rich. */
	ck_assert_int_eq(statd_state_update(t, path, "r", STATD_MODE_RICH, "other"), 0);
	ck_assert_str_eq(statd_state_profile(t, "r"), "other");
	struct stat before, after;
	ck_assert_int_eq(stat(path, &before), 0);
	ck_assert_int_eq(statd_state_update(t, path, "r", STATD_MODE_RICH, "other"), 0);
	ck_assert_int_eq(stat(path, &after), 0);
	ck_assert_uint_eq(before.st_ino, after.st_ino); /* not rewritten */
	ck_assert_int_eq(statd_state_update(t, path, "r", STATD_MODE_OFF, NULL), 0);
	ck_assert_ptr_null(statd_state_profile(t, "r"));
	ck_assert_str_eq(statd_mode_name(STATD_MODE_RICH), "rich");
	ck_assert_int_eq(statd_mode_parse("rich", &mode), 0);
	ck_assert_int_eq(mode, STATD_MODE_RICH);
	statd_state_free(s);
	statd_state_free(t);
}
END_TEST

START_TEST(test_load_corrupt)
{
	const char *text = corrupt[_i].text;
	size_t len = corrupt[_i].len ? corrupt[_i].len : strlen(text);
	write_file(path, text, len);
	struct statd_state *s = NULL;
	char err[512] = "";
	int r = statd_state_load(path, &s, err, sizeof(err));
	ck_assert_msg(r == -EINVAL, "%s: expected -EINVAL, got %d (%s)", corrupt[_i].name, r, err);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err, path) != NULL, "%s: message does not name the file: %s", corrupt[_i].name, err);
	size_t now_len;
	cleanup_free char *now = read_all(path, &now_len);
	ck_assert_uint_eq(now_len, len);
	ck_assert_mem_eq(now, text, len);
	ck_assert_int_eq(dir_entries(tmpdir), 1);
}
END_TEST

START_TEST(test_load_long_key)
{
	/* 512 bytes is the limit; 513 is refused. */
	char key[514];
	memset(key, 'k', 513);
	key[513] = '\0';
	cleanup_free char *bad = rts_xasprintf("{\"version\":1,\"channels\":{\"%s\":{\"mode\":\"on\"}}}", key);
	write_file(path, bad, strlen(bad));
	struct statd_state *s = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &s, err, sizeof(err)), -EINVAL);
	/* The key itself never appears in the message, only its hash prefix. */
	ck_assert_ptr_null(strstr(err, "kkkk"));
	key[512] = '\0';
	cleanup_free char *good = rts_xasprintf("{\"version\":1,\"channels\":{\"%s\":{\"mode\":\"on\"}}}", key);
	write_file(path, good, strlen(good));
	ck_assert_int_eq(statd_state_load(path, &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(statd_state_count(s), 1);
	statd_state_free(s);
}
END_TEST

START_TEST(test_load_too_large)
{
	size_t n = STATD_STATE_MAX_BYTES + 1;
	char *big = rts_xmalloc(n);
	memset(big, ' ', n);
	memcpy(big, "{\"version\":1,\"channels\":{}}", 27);
	write_file(path, big, n);
	free(big);
	struct statd_state *s = NULL;
	char err[512];
	ck_assert_int_eq(statd_state_load(path, &s, err, sizeof(err)), -EFBIG);
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(test_load_not_regular)
{
	ck_assert_int_eq(mkdir(path, 0700), 0);
	struct statd_state *s = NULL;
	char err[512];
	ck_assert_int_lt(statd_state_load(path, &s, err, sizeof(err)), 0);
	ck_assert_ptr_null(s);
}
END_TEST

/* ---- directories and workspaces ---- */

START_TEST(test_dir_ensure)
{
	char err[512];
	char p[600];
	snprintf(p, sizeof(p), "%s/a/b/c", tmpdir);
	ck_assert_msg(statd_dir_ensure("workspaceRoot", p, err, sizeof(err)) == 0, "%s", err);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 077, 0);
	ck_assert_int_eq(statd_dir_ensure("workspaceRoot", p, err, sizeof(err)), 0); /* idempotent */

	ck_assert_int_eq(chmod(p, 0750), 0);
	ck_assert_int_eq(statd_dir_ensure("workspaceRoot", p, err, sizeof(err)), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, p));
	ck_assert_ptr_nonnull(strstr(err, "chmod 0700"));
	ck_assert_int_eq(chmod(p, 0700), 0);

	char link[600];
	snprintf(link, sizeof(link), "%s/link", tmpdir);
	ck_assert_int_eq(symlink(p, link), 0);
	ck_assert_int_lt(statd_dir_ensure("workspaceRoot", link, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "symbolic"));

	char file[600];
	snprintf(file, sizeof(file), "%s/file", tmpdir);
	write_file(file, "x", 1);
	ck_assert_int_lt(statd_dir_ensure("workspaceRoot", file, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_path_within)
{
	ck_assert(rts_path_within("/var/lib/x/state.json", "/var/lib/x"));
	ck_assert(rts_path_within("/var/lib/x", "/var/lib/x"));
	ck_assert(!rts_path_within("/var/lib/xy/state.json", "/var/lib/x"));
	ck_assert(!rts_path_within("/var/lib/state.json", "/var/lib/x"));
	ck_assert(rts_path_within("/anything", "/"));

	/* A symlink must not hide the overlap. */
	char real[600], alias[600], file[700];
	snprintf(real, sizeof(real), "%s/real", tmpdir);
	snprintf(alias, sizeof(alias), "%s/alias", tmpdir);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, alias), 0);
	snprintf(file, sizeof(file), "%s/state.json", alias);
	ck_assert(rts_path_within(file, real));
	snprintf(file, sizeof(file), "%s/state.json", tmpdir);
	ck_assert(!rts_path_within(file, real));
}
END_TEST

START_TEST(test_workspace_open)
{
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash("guild:1/channel:2", hash);
	char *wpath = NULL;
	const char *why = NULL;
	int fd = statd_workspace_open(tmpdir, hash, &wpath, &why);
	ck_assert_msg(fd >= 0, "%d %s", fd, why ? why : "");
	cleanup_free char *expect = rts_xasprintf("%s/%s", tmpdir, hash);
	ck_assert_str_eq(wpath, expect);
	struct stat a, b;
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(lstat(wpath, &b), 0);
	ck_assert(S_ISDIR(a.st_mode));
	ck_assert_uint_eq(a.st_mode & 07777, 0700);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	/* O_PATH: good for fstat and *at, not for reading. */
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_PATH, O_PATH);
	close(fd);
	free(wpath);

	/* Existing and fine: opened again. */
	fd = statd_workspace_open(tmpdir, hash, &wpath, &why);
	ck_assert_int_ge(fd, 0);
	close(fd);
	free(wpath);

	/* A mode a guest set (containers run as the service account) is put back to 0700. */
	ck_assert_int_eq(chmod(expect, 04755), 0);
	fd = statd_workspace_open(tmpdir, hash, &wpath, &why);
	ck_assert_int_ge(fd, 0);
	close(fd);
	free(wpath);
	ck_assert_int_eq(stat(expect, &a), 0);
	ck_assert_uint_eq(a.st_mode & 07777, 0700);

	/* A symlink in its place (pointing at a good directory) is refused. */
	char other[RTS_HASH_HEX_LEN + 1], target[600];
	rts_channel_hash("other", other);
	snprintf(target, sizeof(target), "%s/%s", tmpdir, other);
	ck_assert_int_eq(mkdir(target, 0700), 0);
	ck_assert_int_eq(rmdir(expect), 0);
	ck_assert_int_eq(symlink(target, expect), 0);
	ck_assert_int_eq(statd_workspace_open(tmpdir, hash, &wpath, &why), -ENOTDIR);

	/* A regular file in its place. */
	ck_assert_int_eq(unlink(expect), 0);
	write_file(expect, "x", 1);
	ck_assert_int_eq(statd_workspace_open(tmpdir, hash, &wpath, &why), -ENOTDIR);

	/* Names that are not a channel hash never reach the file system. */
	ck_assert_int_eq(statd_workspace_open(tmpdir, "..", &wpath, &why), -EINVAL);
	ck_assert_int_eq(statd_workspace_open(tmpdir, "../../../../../../../../../../../../../../../../../../../../../x",
					      &wpath, &why),
			 -EINVAL);
	char upper[RTS_HASH_HEX_LEN + 1];
	memset(upper, 'A', RTS_HASH_HEX_LEN);
	upper[RTS_HASH_HEX_LEN] = '\0';
	ck_assert_int_eq(statd_workspace_open(tmpdir, upper, &wpath, &why), -EINVAL);
}
END_TEST

START_TEST(test_workspace_root_missing)
{
	char hash[RTS_HASH_HEX_LEN + 1], root[600];
	rts_channel_hash("x", hash);
	snprintf(root, sizeof(root), "%s/missing", tmpdir);
	char *wpath = NULL;
	const char *why = NULL;
	ck_assert_int_eq(statd_workspace_open(root, hash, &wpath, &why), -ENOENT);
	ck_assert_int_eq(access(root, F_OK), -1); /* not created behind the operator's back */
}
END_TEST

static Suite *state_suite(void)
{
	Suite *s = suite_create("state");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_mode_names);
	tcase_add_test(tc, test_table_sorted_and_bounded);
	tcase_add_test(tc, test_table_channel_limit);
	suite_add_tcase(s, tc);

	tc = tcase_create("file");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_round_trip_empty);
	tcase_add_test(tc, test_save_leaves_no_temp_files);
	tcase_add_test(tc, test_save_replaces_by_rename);
	tcase_add_test(tc, test_failed_write_keeps_old_file);
	tcase_add_test(tc, test_readonly_dir_keeps_old_file);
	tcase_add_test(tc, test_missing_dir);
	tcase_add_test(tc, test_oversized_save_refused);
	tcase_add_test(tc, test_update_rolls_back);
	tcase_add_test(tc, test_rich_round_trip);
	tcase_add_test(tc, test_load_missing);
	tcase_add_loop_test(tc, test_load_corrupt, 0, (int)RTS_ARRAY_SIZE(corrupt));
	tcase_add_test(tc, test_load_long_key);
	tcase_add_test(tc, test_load_too_large);
	tcase_add_test(tc, test_load_not_regular);
	suite_add_tcase(s, tc);

	tc = tcase_create("workspace");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dir_ensure);
	tcase_add_test(tc, test_path_within);
	tcase_add_test(tc, test_workspace_open);
	tcase_add_test(tc, test_workspace_root_missing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(state_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
