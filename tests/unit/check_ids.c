/* SPDX-License-Identifier: Apache-2.0 */
/* Names statd (and every daemon) derive: sha256 hex, channel hashes used as workspace
 * directory names, the installation id, turn ids and container names (common/ids.h). */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/ids.h"
#include "common/proto.h"
#include "common/util.h"

static bool is_lower_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

START_TEST(test_sha256_vectors)
{
	/* FIPS 180-2 test vectors. */
	char out[RTS_HASH_HEX_LEN + 1];
	rts_sha256_hex("", 0, out);
	ck_assert_str_eq(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	rts_sha256_hex("abc", 3, out);
	ck_assert_str_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *long_msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	rts_sha256_hex(long_msg, strlen(long_msg), out);
	ck_assert_str_eq(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* Length is honoured, not strlen: bytes after an embedded NUL count. */
	rts_sha256_hex("abc\0def", 3, out);
	ck_assert_str_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
END_TEST

START_TEST(test_channel_hash)
{
	char a[RTS_HASH_HEX_LEN + 1], b[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash("", a);
	ck_assert_str_eq(a, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	rts_channel_hash("abc", a);
	ck_assert_str_eq(a, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

	/* Different keys, different names; keys that differ only slightly too. */
	rts_channel_hash("guild:1/channel:2", a);
	rts_channel_hash("guild:1/channel:3", b);
	ck_assert_str_ne(a, b);
	rts_channel_hash("thread:42", a);
	rts_channel_hash("thread:42 ", b);
	ck_assert_str_ne(a, b);

	/* Keys are never paths: "/" and ".." give a plain 64-hex name. */
	rts_channel_hash("../../etc/passwd", a);
	ck_assert(is_lower_hex(a, RTS_HASH_HEX_LEN));
	ck_assert_str_eq(a, "3754d6cb3a38e1185e5b382d5f3ef3f118af75bf4bf0254d1fdb8437f51423e0");
	rts_channel_hash("a/b", a);
	ck_assert_str_eq(a, "c14cddc033f64b9dea80ea675cf280a015e672516090a5626781153dc68fea11");
	rts_channel_hash("..", a);
	ck_assert(is_lower_hex(a, RTS_HASH_HEX_LEN));
	ck_assert_ptr_null(strchr(a, '/'));
	ck_assert_ptr_null(strchr(a, '.'));

	/* A 512-byte key with non-ASCII bytes hashes like any other. */
	char key[513];
	memset(key, 'x', 512);
	key[512] = '\0';
	memcpy(key, "\xc3\xa9", 2);
	rts_channel_hash(key, a);
	ck_assert(is_lower_hex(a, RTS_HASH_HEX_LEN));
	rts_sha256_hex(key, 512, b);
	ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(test_installation_id)
{
	char id[RTS_INSTALLATION_ID_LEN + 1], other[RTS_INSTALLATION_ID_LEN + 1];
	rts_installation_id("/var/lib/roundtable-sandbox/state/channels.json", id);
	/* First 12 hex digits of sha256 of the path string (DESIGN.md section 4). */
	ck_assert_str_eq(id, "196fc76ea7a2");
	ck_assert_uint_eq(strlen(id), RTS_INSTALLATION_ID_LEN);
	rts_installation_id("/var/lib/roundtable-sandbox/state/channels.json", other);
	ck_assert_str_eq(id, other);
	rts_installation_id("/srv/other/channels.json", other);
	ck_assert_str_ne(id, other);
	ck_assert(is_lower_hex(other, RTS_INSTALLATION_ID_LEN));
}
END_TEST

START_TEST(test_turn_id_valid)
{
	ck_assert(rts_turn_id_valid("0123456789abcdef"));
	ck_assert(rts_turn_id_valid("ffffffffffffffff"));
	ck_assert(!rts_turn_id_valid(""));
	ck_assert(!rts_turn_id_valid("0123456789abcde"));   /* 15 */
	ck_assert(!rts_turn_id_valid("0123456789abcdef0")); /* 17 */
	ck_assert(!rts_turn_id_valid("0123456789ABCDEF"));  /* upper case */
	ck_assert(!rts_turn_id_valid("0123456789abcdeg"));
	ck_assert(!rts_turn_id_valid("0123456789abcde "));
	ck_assert(!rts_turn_id_valid("../../../../etc/"));
	ck_assert(!rts_turn_id_valid("0123456789abcd\n"));
}
END_TEST

START_TEST(test_turn_id_new)
{
	char a[RTS_TURN_ID_LEN + 1], b[RTS_TURN_ID_LEN + 1];
	ck_assert_int_eq(rts_turn_id_new(a), 0);
	ck_assert_int_eq(rts_turn_id_new(b), 0);
	ck_assert(rts_turn_id_valid(a));
	ck_assert(rts_turn_id_valid(b));
	/* 64 random bits: a collision here means the generator is broken. */
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_container_name)
{
	cleanup_free char *n = rts_container_name("196fc76ea7a2", "0123456789abcdef");
	ck_assert_str_eq(n, "roundtable-sandbox-196fc76ea7a2-0123456789abcdef");
	ck_assert(strncmp(n, RTS_CONTAINER_PREFIX, strlen(RTS_CONTAINER_PREFIX)) == 0);
}
END_TEST

static Suite *ids_suite(void)
{
	Suite *s = suite_create("ids");
	TCase *tc = tcase_create("hashes");
	tcase_add_test(tc, test_sha256_vectors);
	tcase_add_test(tc, test_channel_hash);
	tcase_add_test(tc, test_installation_id);
	suite_add_tcase(s, tc);
	tc = tcase_create("turns");
	tcase_add_test(tc, test_turn_id_valid);
	tcase_add_test(tc, test_turn_id_new);
	tcase_add_test(tc, test_container_name);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ids_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
