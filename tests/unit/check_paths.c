/* SPDX-License-Identifier: Apache-2.0 */
/* The path and directory predicates the daemons and doctor share (common/paths.h,
 * common/privdir.h, rts_image_ref_ok()): one definition, so doctor predicts exactly what
 * a daemon refuses. Real files in a scratch directory; no privileges. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/acl.h"
#include "common/ids.h"
#include "common/limits.h"
#include "common/paths.h"
#include "common/privdir.h"
#include "common/util.h"

static char tmpdir[64];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_paths.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	cleanup_free char *cmd = rts_xasprintf("chmod -R u+rwx '%s'; rm -rf '%s'", tmpdir, tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *in_tmp(const char *name)
{
	return rts_xasprintf("%s/%s", tmpdir, name);
}

START_TEST(test_path_within_resolves_links)
{
	cleanup_free char *real = in_tmp("real"), *alias = in_tmp("alias");
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, alias), 0);
	cleanup_free char *sub = in_tmp("real/sub");
	ck_assert_int_eq(mkdir(sub, 0700), 0);

	/* The root behind a link, the path as written, and the other way round. */
	cleanup_free char *via_alias = in_tmp("alias/sub");
	ck_assert(rts_path_within(via_alias, real));
	ck_assert(rts_path_within(sub, alias));
	ck_assert(!rts_path_under(sub, alias)); /* the strings alone do not say so */
	/* A file that does not exist yet: its directory is resolved. */
	cleanup_free char *future = in_tmp("alias/sub/state.json");
	ck_assert(rts_path_within(future, real));
	ck_assert(rts_path_within(future, sub));
	/* A path that is itself a link into the directory. */
	cleanup_free char *link_in = in_tmp("inside");
	ck_assert_int_eq(symlink(sub, link_in), 0);
	ck_assert(rts_path_within(link_in, real));

	cleanup_free char *other = in_tmp("other");
	ck_assert_int_eq(mkdir(other, 0700), 0);
	ck_assert(!rts_path_within(other, real));
	ck_assert(!rts_path_within(real, other));
	cleanup_free char *realx = in_tmp("realx");
	ck_assert(!rts_path_within(realx, real));
	ck_assert(!rts_path_within("relative/path", "/"));
	ck_assert(rts_path_within("/nonexistent/a/b", "/nonexistent/a"));
	ck_assert(!rts_path_within("/nonexistent/ab", "/nonexistent/a"));
}
END_TEST

START_TEST(test_broker_sock_path_len)
{
	/* runRoot/<16 hex>/broker.sock */
	ck_assert_uint_eq(rts_broker_sock_path_len("/run/x"), strlen("/run/x/0123456789abcdef/broker.sock"));
	char root[RTS_BROKER_SOCK_PATH_MAX + 1];
	size_t fits = RTS_BROKER_SOCK_PATH_MAX - strlen("/0123456789abcdef/broker.sock");
	memset(root, 'r', fits);
	root[0] = '/';
	root[fits] = '\0';
	ck_assert_uint_eq(rts_broker_sock_path_len(root), RTS_BROKER_SOCK_PATH_MAX);
}
END_TEST

START_TEST(test_time_zone_file)
{
	char *path = NULL;
	ck_assert_int_eq(rts_time_zone_file("Mars/Olympus_Mons", &path), -ENOENT);
	ck_assert_str_eq(path, RTS_ZONEINFO_DIR "/Mars/Olympus_Mons");
	free(path);
	/* A directory is not a zone. */
	struct stat st;
	if (stat(RTS_ZONEINFO_DIR "/Europe", &st) == 0) {
		ck_assert_int_eq(rts_time_zone_file("Europe", &path), -ENOENT);
		free(path);
	}
	if (stat(RTS_ZONEINFO_DIR "/UTC", &st) == 0) {
		ck_assert_int_eq(rts_time_zone_file("UTC", &path), 0);
		free(path);
	}
}
END_TEST

START_TEST(test_private_dir_judge)
{
	cleanup_free char *d = in_tmp("d"), *f = in_tmp("f"), *l = in_tmp("l");
	ck_assert_int_eq(mkdir(d, 0700), 0);
	ck_assert_int_eq(symlink(d, l), 0);
	FILE *fp = fopen(f, "we");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	struct stat st;
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge(&st, geteuid()), 0);
	ck_assert_int_eq(rts_private_dir_judge(&st, geteuid() + 1), -EPERM);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), NULL), 0);
	ck_assert_int_eq(chmod(d, 0750), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	/* Owner and type are still right; the access rule refuses the group bits. */
	ck_assert_int_eq(rts_private_dir_judge(&st, geteuid()), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), NULL), -EACCES);
	ck_assert_int_eq(chmod(d, 0701), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), NULL), -EACCES);
	ck_assert_int_eq(chmod(d, 0750), 0);
	ck_assert_int_eq(lstat(l, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge(&st, geteuid()), -ENOTDIR);
	ck_assert_int_eq(lstat(f, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge(&st, geteuid()), -ENOTDIR);

	/* The daemons' own opener says the same. */
	char err[512];
	ck_assert_int_eq(rts_private_dir_open("runRoot", d, err, sizeof(err)), -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "chmod 0700"));
}
END_TEST

/* Accounts mode (DESIGN.md 8.1): a root may give one account one permission by an ACL
 * entry (statd gives runnerd search on workspaceRoot); any other entry is looser and
 * refused, also one the mask hides today, and so is a default ACL. */
START_TEST(test_private_dir_acl)
{
	cleanup_free char *d = in_tmp("acl");
	ck_assert_int_eq(mkdir(d, 0700), 0);
	const uid_t runner = 4242, other = 4343;
	const struct rts_dir_grant search = {.uid = runner, .perms = RTS_PERM_X};
	struct stat st;
	char err[512];
	/* Nothing shared yet: fine with or without a grant. */
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), 0);

	/* The grant itself: the group bits show its mask. */
	ck_assert_int_eq(rts_acl_grant(-1, d, 07, runner, RTS_PERM_X), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0710);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), NULL), -EACCES);
	int fd = rts_private_dir_open_grant("workspaceRoot", d, &search, err, sizeof(err));
	ck_assert_msg(fd >= 0, "%s", err);
	close(fd);
	fd = rts_private_dir_open("workspaceRoot", d, err, sizeof(err));
	ck_assert_int_eq(fd, -EACCES);
	ck_assert_ptr_nonnull(strstr(err, "setfacl -b"));

	/* systemd's StateDirectoryMode=0700 chmod hides the entry behind the mask: still fine. */
	ck_assert_int_eq(chmod(d, 0700), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), 0);

	/* More than the grant allows, or for another account: refused, masked or not. */
	ck_assert_int_eq(rts_acl_grant(-1, d, 07, runner, RTS_PERM_X | RTS_PERM_R), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), -EACCES);
	ck_assert_int_eq(rts_acl_grant(-1, d, 07, other, RTS_PERM_X), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), -EACCES);
	ck_assert_int_eq(chmod(d, 0700), 0);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), -EACCES);

	/* A default ACL would hand its entries to everything made inside. */
	ck_assert_int_eq(rts_acl_grant(-1, d, 07, runner, RTS_PERM_X), 0);
	acl_t def = acl_from_text("u::rwx,u:4343:r-x,g::---,m::r-x,o::---");
	ck_assert_ptr_nonnull(def);
	ck_assert_int_eq(acl_set_file(d, ACL_TYPE_DEFAULT, def), 0);
	acl_free(def);
	ck_assert_int_eq(lstat(d, &st), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), -EACCES);
	ck_assert_int_eq(rts_acl_drop_default(d), 0);
	ck_assert_int_eq(rts_private_dir_judge_acl(-1, d, &st, geteuid(), &search), 0);
}
END_TEST

/* Who may read a file, ACL entries included (doctor's "the three daemon accounts read the
 * config", which the package's upgrade lets broker and runner read by ACL entries). */
START_TEST(test_acl_perms_for)
{
	cleanup_free char *f = in_tmp("conf");
	FILE *fp = fopen(f, "we");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(chmod(f, 0640), 0);
	struct stat st;
	ck_assert_int_eq(stat(f, &st), 0);
	const gid_t group = st.st_gid;
	/* Owner, the owning group, others: the mode. */
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, geteuid(), 4343), 06);
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4242, group), 04);
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4242, 4343), 0);
	/* A named user's entry, limited by the mask. */
	acl_t a = acl_from_text("u::rw-,u:4242:r--,g::r--,m::r--,o::---");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(acl_set_file(f, ACL_TYPE_ACCESS, a), 0);
	acl_free(a);
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4242, 4343), 04);
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4244, 4343), 0);
	a = acl_from_text("u::rw-,u:4242:rw-,g::r--,g:4343:rw-,m::---,o::r--");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(acl_set_file(f, ACL_TYPE_ACCESS, a), 0);
	acl_free(a);
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4242, 1), 0);	 /* masked away */
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4244, 4343), 0); /* named group, masked */
	ck_assert_int_eq(rts_acl_perms_for(-1, f, &st, 4244, 4345), 04); /* others */
}
END_TEST

/* Accepts named users 4242 and groups with nothing but read. */
static bool accept_4242(const struct rts_acl_named *e, void *arg)
{
	(void)arg;
	return e->group ? (e->perms & ~RTS_PERM_R) == 0 : e->id == 4242;
}

START_TEST(test_acl_find_named)
{
	cleanup_free char *f = in_tmp("named");
	FILE *fp = fopen(f, "we");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(chmod(f, 0600), 0);
	struct rts_acl_named e = {0};
	/* No named entry: nothing found. */
	ck_assert_int_eq(rts_acl_find_named(-1, f, accept_4242, NULL, &e), 0);
	/* An accepted one, one that grants nothing (masked or not), a read-only group. */
	acl_t a = acl_from_text("u::rw-,u:4242:rw-,u:4243:---,g::---,g:4343:r--,m::rw-,o::---");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(acl_set_file(f, ACL_TYPE_ACCESS, a), 0);
	acl_free(a);
	ck_assert_int_eq(rts_acl_find_named(-1, f, accept_4242, NULL, &e), 0);
	/* Another account, even masked away today (a chmod g+w would bring it to life). */
	a = acl_from_text("u::rw-,u:4242:rw-,u:4244:-w-,g::---,m::---,o::---");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(acl_set_file(f, ACL_TYPE_ACCESS, a), 0);
	acl_free(a);
	ck_assert_int_eq(rts_acl_find_named(-1, f, accept_4242, NULL, &e), 1);
	ck_assert(!e.group);
	ck_assert_uint_eq(e.id, 4244);
	ck_assert_uint_eq(e.perms, RTS_PERM_W);
	/* A group that may write. */
	a = acl_from_text("u::rw-,g::---,g:4343:rw-,m::rw-,o::---");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(acl_set_file(f, ACL_TYPE_ACCESS, a), 0);
	acl_free(a);
	ck_assert_int_eq(rts_acl_find_named(-1, f, accept_4242, NULL, &e), 1);
	ck_assert(e.group);
	ck_assert_uint_eq(e.id, 4343);
	ck_assert_uint_eq(e.perms, RTS_PERM_R | RTS_PERM_W);
	cleanup_free char *missing = in_tmp("missing");
	ck_assert_int_eq(rts_acl_find_named(-1, missing, accept_4242, NULL, &e), -ENOENT);
}
END_TEST

struct seen {
	char dirs[8][256];
	size_t n;
	size_t stop_at; /* return -EPERM at this call (1-based), 0 never */
};

static int note_dir(const char *dir, const struct stat *st, void *arg)
{
	struct seen *s = arg;
	ck_assert(S_ISDIR(st->st_mode));
	ck_assert_uint_lt(s->n, 8);
	snprintf(s->dirs[s->n++], sizeof(s->dirs[0]), "%s", dir);
	return s->n == s->stop_at ? -EPERM : 0;
}

START_TEST(test_ancestors)
{
	cleanup_free char *deep = in_tmp("a/b/c");
	cleanup_free char *a = in_tmp("a");
	ck_assert_int_eq(mkdir(a, 0700), 0);
	/* From / down, stopping where the path does not exist yet. */
	struct seen s = {0};
	ck_assert_int_eq(rts_dir_ancestors(deep, note_dir, &s), 0);
	ck_assert_str_eq(s.dirs[0], "/");
	ck_assert_str_eq(s.dirs[1], "/tmp");
	ck_assert_str_eq(s.dirs[s.n - 1], a);
	ck_assert_str_eq(s.dirs[s.n - 2], tmpdir);
	/* A callback's verdict stops the walk and is returned. */
	s = (struct seen){.stop_at = 2};
	ck_assert_int_eq(rts_dir_ancestors(deep, note_dir, &s), -EPERM);
	ck_assert_uint_eq(s.n, 2);

	struct stat st = {.st_mode = S_IFDIR | 0777};
	ck_assert(rts_dir_swappable(&st));
	st.st_mode = S_IFDIR | 01777;
	ck_assert(!rts_dir_swappable(&st));
	st.st_mode = S_IFDIR | 0775;
	ck_assert(!rts_dir_swappable(&st));

	/* The daemons refuse a root under a directory anyone may rename entries in. */
	cleanup_free char *open_dir = in_tmp("open"), *root = in_tmp("open/root");
	ck_assert_int_eq(mkdir(open_dir, 0700), 0);
	ck_assert_int_eq(chmod(open_dir, 0777), 0);
	char err[512];
	ck_assert_int_eq(rts_private_dir_open("workspaceRoot", root, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "chmod o-w"));
}
END_TEST

START_TEST(test_image_ref)
{
	ck_assert(rts_image_ref_ok("roundtable-sandbox:local"));
	ck_assert(rts_image_ref_ok("registry.example:5000/a/b@sha256:0123"));
	ck_assert(!rts_image_ref_ok("-bad"));
	ck_assert(!rts_image_ref_ok("Upper"));
	ck_assert(!rts_image_ref_ok(""));
	ck_assert(!rts_image_ref_ok(NULL));
	ck_assert(!rts_image_ref_ok("a b"));
	char longest[RTS_IMAGE_MAX + 2];
	memset(longest, 'a', sizeof(longest) - 1);
	longest[RTS_IMAGE_MAX] = '\0';
	ck_assert(rts_image_ref_ok(longest));
	longest[RTS_IMAGE_MAX] = 'a';
	longest[RTS_IMAGE_MAX + 1] = '\0';
	ck_assert(!rts_image_ref_ok(longest));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("paths");
	TCase *tc = tcase_create("paths");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_path_within_resolves_links);
	tcase_add_test(tc, test_broker_sock_path_len);
	tcase_add_test(tc, test_time_zone_file);
	tcase_add_test(tc, test_private_dir_judge);
	tcase_add_test(tc, test_private_dir_acl);
	tcase_add_test(tc, test_acl_perms_for);
	tcase_add_test(tc, test_acl_find_named);
	tcase_add_test(tc, test_ancestors);
	tcase_add_test(tc, test_image_ref);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
