/* SPDX-License-Identifier: Apache-2.0 */
/* The hand-off list (brokerd/gate.c): connections the gate handed to libmicrohttpd, waiting
 * for their STARTED notification. Claimed by exact descriptor; a reused descriptor replaces
 * (and returns) the old entry; an entry nobody claimed goes stale after
 * BROKERD_HANDOFF_STALE_MS; pop drains. The clock is the caller's now_ms argument. */
#include "config.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>

#include "brokerd/brokerd.h"
#include "brokerd/gate.h"

/* The owner's state with the entry inside it, as struct brokerd_conn and struct rich_conn
 * hold theirs: what the list returns must lead back to the right owner. */
struct owner {
	int tag;
	struct brokerd_handoff handoff;
};

static struct owner *owner_of(struct brokerd_handoff *h)
{
	return h ? brokerd_entry(h, struct owner, handoff) : NULL;
}

START_TEST(test_empty)
{
	struct brokerd_handoff *list = NULL;
	ck_assert_uint_eq(brokerd_handoff_count(list), 0);
	ck_assert_ptr_null(brokerd_handoff_claim(&list, 3));
	ck_assert_ptr_null(brokerd_handoff_stale(&list, UINT64_MAX / 2));
	ck_assert_ptr_null(brokerd_handoff_pop(&list));
	ck_assert_ptr_null(list);
}
END_TEST

/* Each claim returns the entry put for that very descriptor (5 and 50 share digits, 7 sits
 * between), takes it off, and leaves the others. */
START_TEST(test_claim_exact_fd)
{
	struct owner a = {.tag = 1}, b = {.tag = 2}, c = {.tag = 3};
	struct brokerd_handoff *list = NULL;
	ck_assert_ptr_null(brokerd_handoff_put(&list, &a.handoff, 5, 100));
	ck_assert_ptr_null(brokerd_handoff_put(&list, &b.handoff, 50, 110));
	ck_assert_ptr_null(brokerd_handoff_put(&list, &c.handoff, 7, 120));
	ck_assert_uint_eq(brokerd_handoff_count(list), 3);

	struct owner *got = owner_of(brokerd_handoff_claim(&list, 50));
	ck_assert_ptr_eq(got, &b);
	ck_assert_int_eq(got->handoff.fd, 50);
	ck_assert_uint_eq(got->handoff.handed_ms, 110);
	ck_assert_ptr_null(got->handoff.next);
	ck_assert_uint_eq(brokerd_handoff_count(list), 2);
	/* Claimed once: not there any more. */
	ck_assert_ptr_null(brokerd_handoff_claim(&list, 50));

	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 5)), &a);
	ck_assert_uint_eq(brokerd_handoff_count(list), 1);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 7)), &c);
	ck_assert_uint_eq(brokerd_handoff_count(list), 0);
	ck_assert_ptr_null(list);
}
END_TEST

/* A descriptor that was never handed over: NULL, and the list is as it was. */
START_TEST(test_claim_absent_fd)
{
	struct owner a = {.tag = 1}, b = {.tag = 2};
	struct brokerd_handoff *list = NULL;
	brokerd_handoff_put(&list, &a.handoff, 4, 100);
	brokerd_handoff_put(&list, &b.handoff, 6, 100);
	ck_assert_ptr_null(brokerd_handoff_claim(&list, 5));
	ck_assert_ptr_null(brokerd_handoff_claim(&list, -1));
	ck_assert_ptr_null(brokerd_handoff_claim(&list, 0));
	ck_assert_uint_eq(brokerd_handoff_count(list), 2);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 4)), &a);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 6)), &b);
}
END_TEST

/* The same descriptor handed again (closed and reused before libmicrohttpd started the first
 * one): the new entry replaces the old, and the old comes back to the caller, off the list,
 * for it to dispose of. Exactly one entry per descriptor remains, the new one. */
START_TEST(test_put_same_fd_replaces)
{
	struct owner old = {.tag = 1}, other = {.tag = 2}, fresh = {.tag = 3};
	struct brokerd_handoff *list = NULL;
	ck_assert_ptr_null(brokerd_handoff_put(&list, &old.handoff, 9, 100));
	ck_assert_ptr_null(brokerd_handoff_put(&list, &other.handoff, 10, 150));

	struct owner *back = owner_of(brokerd_handoff_put(&list, &fresh.handoff, 9, 200));
	ck_assert_ptr_eq(back, &old);
	ck_assert_ptr_null(back->handoff.next);
	/* The returned entry is untouched otherwise: the caller still learns when it was handed. */
	ck_assert_int_eq(back->handoff.fd, 9);
	ck_assert_uint_eq(back->handoff.handed_ms, 100);
	ck_assert_uint_eq(brokerd_handoff_count(list), 2);

	struct owner *got = owner_of(brokerd_handoff_claim(&list, 9));
	ck_assert_ptr_eq(got, &fresh);
	ck_assert_uint_eq(got->handoff.handed_ms, 200);
	ck_assert_ptr_null(brokerd_handoff_claim(&list, 9));
	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 10)), &other);
	ck_assert_ptr_null(list);
}
END_TEST

/* Stale at exactly BROKERD_HANDOFF_STALE_MS after it was handed, not a millisecond before;
 * only the old entries go, one per call, and a younger one stays claimable. */
START_TEST(test_stale_after_limit)
{
	struct owner a = {.tag = 1}, b = {.tag = 2}, c = {.tag = 3};
	struct brokerd_handoff *list = NULL;
	const uint64_t t0 = 1000000;
	brokerd_handoff_put(&list, &a.handoff, 11, t0);
	brokerd_handoff_put(&list, &b.handoff, 12, t0 + 1000);
	brokerd_handoff_put(&list, &c.handoff, 13, t0 + 10);

	ck_assert_ptr_null(brokerd_handoff_stale(&list, t0));
	ck_assert_ptr_null(brokerd_handoff_stale(&list, t0 + BROKERD_HANDOFF_STALE_MS - 1));
	ck_assert_uint_eq(brokerd_handoff_count(list), 3);

	/* At t0 + limit only a is old enough. */
	struct owner *got = owner_of(brokerd_handoff_stale(&list, t0 + BROKERD_HANDOFF_STALE_MS));
	ck_assert_ptr_eq(got, &a);
	ck_assert_ptr_null(got->handoff.next);
	ck_assert_ptr_null(brokerd_handoff_stale(&list, t0 + BROKERD_HANDOFF_STALE_MS));
	ck_assert_uint_eq(brokerd_handoff_count(list), 2);

	/* Later, c too (handed 10 ms after a), but b (handed a second later) stays. */
	ck_assert_ptr_eq(owner_of(brokerd_handoff_stale(&list, t0 + 10 + BROKERD_HANDOFF_STALE_MS)), &c);
	ck_assert_ptr_null(brokerd_handoff_stale(&list, t0 + 999 + BROKERD_HANDOFF_STALE_MS));
	ck_assert_uint_eq(brokerd_handoff_count(list), 1);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_claim(&list, 12)), &b);
}
END_TEST

/* A clock read before an entry was handed (now_ms < handed_ms) makes it young, not a
 * wrapped-around age of nearly 2^64 ms. */
START_TEST(test_handed_after_now_is_young)
{
	struct owner a = {.tag = 1};
	struct brokerd_handoff *list = NULL;
	brokerd_handoff_put(&list, &a.handoff, 3, 20000);
	ck_assert_ptr_null(brokerd_handoff_stale(&list, 19999));
	ck_assert_ptr_null(brokerd_handoff_stale(&list, 0));
	ck_assert_uint_eq(brokerd_handoff_count(list), 1);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_stale(&list, 20000 + BROKERD_HANDOFF_STALE_MS)), &a);
}
END_TEST

/* A replaced entry's age does not carry over: the new one for the same descriptor is
 * measured from its own hand-off. */
START_TEST(test_replacement_is_young)
{
	struct owner old = {.tag = 1}, fresh = {.tag = 2};
	struct brokerd_handoff *list = NULL;
	const uint64_t t0 = 5000;
	brokerd_handoff_put(&list, &old.handoff, 8, t0);
	ck_assert_ptr_eq(owner_of(brokerd_handoff_put(&list, &fresh.handoff, 8, t0 + 4000)), &old);
	ck_assert_ptr_null(brokerd_handoff_stale(&list, t0 + BROKERD_HANDOFF_STALE_MS));
	ck_assert_ptr_eq(owner_of(brokerd_handoff_stale(&list, t0 + 4000 + BROKERD_HANDOFF_STALE_MS)), &fresh);
	ck_assert_ptr_null(list);
}
END_TEST

/* Pop drains every entry exactly once, whatever its descriptor or age, then NULL. */
START_TEST(test_pop_drains)
{
	enum { N = 6 };
	struct owner o[N];
	bool seen[N] = {false};
	struct brokerd_handoff *list = NULL;
	for (int i = 0; i < N; i++) {
		o[i].tag = i;
		ck_assert_ptr_null(brokerd_handoff_put(&list, &o[i].handoff, 20 + i, (uint64_t)i * 3000));
	}
	ck_assert_uint_eq(brokerd_handoff_count(list), N);
	for (unsigned left = N; left > 0; left--) {
		struct owner *got = owner_of(brokerd_handoff_pop(&list));
		ck_assert_ptr_nonnull(got);
		ck_assert_ptr_null(got->handoff.next);
		ck_assert(got >= o && got < o + N);
		ck_assert(!seen[got->tag]);
		seen[got->tag] = true;
		ck_assert_uint_eq(brokerd_handoff_count(list), left - 1);
	}
	ck_assert_ptr_null(brokerd_handoff_pop(&list));
	ck_assert_ptr_null(list);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_handoff");
	TCase *tc = tcase_create("list");
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_claim_exact_fd);
	tcase_add_test(tc, test_claim_absent_fd);
	tcase_add_test(tc, test_put_same_fd_replaces);
	tcase_add_test(tc, test_stale_after_limit);
	tcase_add_test(tc, test_handed_after_now_is_young);
	tcase_add_test(tc, test_replacement_is_young);
	tcase_add_test(tc, test_pop_drains);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
