/* SPDX-License-Identifier: Apache-2.0 */
/* The removal machine runnerd's turns, rich channels and spares share
 * (runnerd/removal.h), on its own: recording ops, fake docker CLI children and the fake
 * clock of machine_rig.h; no Docker, no root.
 *
 * Every test also checks that nothing is left behind: no timer, no child the machine still
 * waits for, and that the owner heard over() exactly once (or never, when abandoned). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/util.h"
#include "runnerd/removal.h"
#include "tests/unit/machine_rig.h"

#define INSTALLATION "0123456789ab"
#define TURN_ID "00000000000000a1"

/* A docker rm -f that never runs: the test ends it with finish(). */
struct runnerd_proc {
	struct runnerd_proc *next;
	runnerd_proc_done_t done;
	void *arg;
	size_t out_max;
	uint64_t timeout_ms;
	bool detached, exited;
};

static struct {
	int spawn_result; /* < 0: spawning fails with it */
	struct runnerd_proc *procs;
	unsigned overs, round_failures;
	bool free_in_over; /* over() frees the removal, as spare.c's does */
} fk;

static struct runnerd_removal *rm;
static char *name;

static int op_spawn(void *owner, char *const argv[], char *input, size_t input_len, size_t out_max,
		    uint64_t timeout_ms, runnerd_proc_done_t done, void *arg, struct runnerd_proc **ret)
{
	ck_assert_ptr_null(input);
	ck_assert_str_eq(argv[0], RTS_DOCKER);
	ck_assert_str_eq(argv[1], "rm");
	ck_assert_str_eq(argv[2], "-f");
	ck_assert_ptr_null(argv[4]);
	if (fk.spawn_result < 0)
		return fk.spawn_result;
	rig_logf("spawn rm %s", argv[3]);
	struct runnerd_proc *p = rts_xcalloc(1, sizeof(*p));
	*p = (struct runnerd_proc){.next = fk.procs, .done = done, .arg = arg, .out_max = out_max, .timeout_ms = timeout_ms};
	fk.procs = p;
	*ret = p;
	return 0;
}

static void op_detach(void *owner, struct runnerd_proc *p)
{
	ck_assert(!p->exited);
	p->detached = true;
	rig_logf("detach");
}

static const struct runnerd_turn_ops ops = {
	.now_ms = rig_op_now_ms,
	.timer_start = rig_op_timer_start,
	.timer_stop = rig_op_timer_stop,
	.spawn = op_spawn,
	.detach = op_detach,
};

static void hook_round_failed(void *arg, const char *container, const struct runnerd_proc_result *r)
{
	ck_assert_ptr_eq(arg, &fk);
	ck_assert_str_eq(container, name);
	fk.round_failures++;
	rig_logf("round failed");
}

static void hook_over(void *arg)
{
	ck_assert_ptr_eq(arg, &fk);
	ck_assert(!runnerd_removal_busy(rm));
	fk.overs++;
	rig_logf("over %s", runnerd_removal_failed(rm) ? "failed" : "gone");
	if (fk.free_in_over) {
		free(rm);
		rm = NULL;
	}
}

static const struct runnerd_removal_hooks hooks = {.round_failed = hook_round_failed, .over = hook_over};

static struct runnerd_removal *removal_new(void)
{
	struct runnerd_removal *r = rts_xcalloc(1, sizeof(*r));
	runnerd_removal_init(r, &ops, NULL, &hooks, &fk, "turn %s", TURN_ID);
	return r;
}

static void setup(void)
{
	rts_log_set_max_priority(LOG_EMERG);
	memset(&fk, 0, sizeof(fk));
	fake_timers_reset();
	name = rts_container_name(INSTALLATION, TURN_ID);
	rm = removal_new();
}

static void teardown(void)
{
	ck_assert_uint_eq(fake_timers_pending(), 0);
	for (struct runnerd_proc *p = fk.procs, *next; p; p = next) {
		next = p->next;
		ck_assert(p->exited || p->detached);
		free(p);
	}
	if (rm) {
		ck_assert(!runnerd_removal_busy(rm));
		ck_assert_ptr_null(rm->container);
		free(rm);
	}
	free(name);
	rig_log_reset();
}

/* The live docker rm -f (there is at most one). */
static struct runnerd_proc *child(void)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (!p->exited && !p->detached)
			return p;
	ck_abort_msg("no live docker rm");
	return NULL;
}

static bool has_child(void)
{
	for (struct runnerd_proc *p = fk.procs; p; p = p->next)
		if (!p->exited && !p->detached)
			return true;
	return false;
}

/* The round exits with status and stderr err (NUL-terminated, as proc.c gives it). */
static void finish(struct runnerd_proc_result r)
{
	struct runnerd_proc *p = child();
	r.out = "";
	r.err = r.err ? r.err : "";
	r.err_len = strlen(r.err);
	p->exited = true;
	p->done(p, &r, p->arg);
}

static struct runnerd_proc_result exit_status(int status, const char *err)
{
	return (struct runnerd_proc_result){.exited = true, .status = status, .err = err};
}

#define IN_PROGRESS "Error response from daemon: removal of container x is already in progress\n"

static char *spawn_line(void)
{
	return rts_xasprintf("spawn rm %s", name);
}

START_TEST(test_no_round_is_over_at_once)
{
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 0);
	rig_expect_since(m, "over gone", NULL);
	ck_assert_uint_eq(fk.overs, 1);
}
END_TEST

START_TEST(test_two_rounds_a_delay_apart)
{
	cleanup_free char *spawn = spawn_line();
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 2);
	rig_expect_since(m, spawn, NULL);
	/* Each round with its five-second deadline (seed) and bounded output. */
	ck_assert_uint_eq(child()->timeout_ms, RUNNERD_RM_TIMEOUT_MS);
	ck_assert_uint_eq(child()->out_max, RUNNERD_RM_OUTPUT_MAX);
	ck_assert(runnerd_removal_busy(rm) && !runnerd_removal_waiting(rm));
	finish(exit_status(0, ""));
	ck_assert(runnerd_removal_busy(rm) && runnerd_removal_waiting(rm));
	ck_assert_uint_eq(fake_timer_in(), RUNNERD_RM_SECOND_DELAY_MS);
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS - 1);
	ck_assert(!has_child());
	fake_advance(1);
	rig_expect_since(m, spawn, spawn, NULL);
	ck_assert(!runnerd_removal_waiting(rm));
	finish(exit_status(0, ""));
	rig_expect_since(m, spawn, spawn, "over gone", NULL);
	ck_assert_uint_eq(fk.overs, 1);
}
END_TEST

START_TEST(test_name_is_copied)
{
	cleanup_free char *spawn = spawn_line();
	char *mine = rts_xstrdup(name);
	size_t m = rig_mark();
	runnerd_removal_start(rm, mine, 2);
	/* The owner's string may change or go (turn.c hands over a claimed spare's name). */
	memset(mine, 'x', strlen(mine));
	free(mine);
	finish(exit_status(0, ""));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(exit_status(0, ""));
	rig_expect_since(m, spawn, spawn, "over gone", NULL);
}
END_TEST

START_TEST(test_no_such_container_is_gone)
{
	/* Some CLI versions say so with status 1: gone all the same. */
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(1, "Error response from daemon: No such container: x\n"));
	ck_assert_uint_eq(fk.overs, 1);
	ck_assert(!runnerd_removal_failed(rm));
	ck_assert_uint_eq(fk.round_failures, 0);
}
END_TEST

START_TEST(test_failure_ends_without_another_round)
{
	cleanup_free char *spawn = spawn_line();
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 2);
	finish(exit_status(1, "Error response from daemon: permission denied\n"));
	/* The failing round is the owner's to explain; no second round holds it up. */
	rig_expect_since(m, spawn, "round failed", "over failed", NULL);
	ck_assert(!has_child());
}
END_TEST

START_TEST(test_timeout_is_a_failure)
{
	runnerd_removal_start(rm, name, 2);
	finish((struct runnerd_proc_result){.status = SIGKILL, .killed = true, .timed_out = true});
	ck_assert(runnerd_removal_failed(rm));
	ck_assert_uint_eq(fk.round_failures, 1);
	ck_assert_uint_eq(fk.overs, 1);
}
END_TEST

START_TEST(test_in_progress_settled_by_a_round_still_due)
{
	/* Two rounds: the first finds dockerd removing it already, the second (due anyway)
	 * confirms it is gone; nothing is added. */
	cleanup_free char *spawn = spawn_line();
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 2);
	finish(exit_status(1, IN_PROGRESS));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(exit_status(0, ""));
	rig_expect_since(m, spawn, spawn, "over gone", NULL);
}
END_TEST

START_TEST(test_in_progress_adds_one_round_once)
{
	/* One round: "in progress" on the last adds exactly one more; in progress again, the
	 * container may remain. */
	cleanup_free char *spawn = spawn_line();
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(1, IN_PROGRESS));
	ck_assert(runnerd_removal_waiting(rm));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(exit_status(1, IN_PROGRESS));
	rig_expect_since(m, spawn, spawn, "round failed", "over failed", NULL);
}
END_TEST

START_TEST(test_in_progress_then_gone_after_the_added_round)
{
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(1, IN_PROGRESS));
	fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
	finish(exit_status(1, "Error response from daemon: No such container: x\n"));
	ck_assert(!runnerd_removal_failed(rm));
	ck_assert_uint_eq(fk.round_failures, 0);
}
END_TEST

START_TEST(test_extra_round_is_granted_again_on_a_new_start)
{
	/* A rich channel's container is removed many times: each removal gets its own extra
	 * round. */
	for (int i = 0; i < 2; i++) {
		runnerd_removal_start(rm, name, 1);
		finish(exit_status(1, IN_PROGRESS));
		fake_advance(RUNNERD_RM_SECOND_DELAY_MS);
		finish(exit_status(0, ""));
		ck_assert(!runnerd_removal_failed(rm));
	}
	ck_assert_uint_eq(fk.overs, 2);
}
END_TEST

START_TEST(test_round_that_cannot_start_is_a_failure)
{
	fk.spawn_result = -EAGAIN;
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 2);
	/* No result to explain: the machine logs it; the owner hears over() only. */
	rig_expect_since(m, "over failed", NULL);
	ck_assert_uint_eq(fk.round_failures, 0);
}
END_TEST

START_TEST(test_round_that_cannot_be_scheduled_is_a_failure)
{
	/* The first round removed it, but the one for the create/attach race cannot run. */
	cleanup_free char *spawn = spawn_line();
	size_t m = rig_mark();
	runnerd_removal_start(rm, name, 2);
	fake_timer_failures = 1;
	finish(exit_status(0, ""));
	rig_expect_since(m, spawn, "over failed", NULL);
}
END_TEST

START_TEST(test_a_new_start_clears_the_last_failure)
{
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(1, "Error response from daemon: permission denied\n"));
	ck_assert(runnerd_removal_failed(rm));
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(0, ""));
	ck_assert(!runnerd_removal_failed(rm));
}
END_TEST

START_TEST(test_abandon_while_a_round_runs)
{
	runnerd_removal_start(rm, name, 2);
	size_t m = rig_mark();
	runnerd_removal_abandon(rm);
	/* The CLI is left to reap itself; nobody hears of it. */
	rig_expect_since(m, "detach", NULL);
	ck_assert(!runnerd_removal_busy(rm));
	ck_assert_uint_eq(fk.overs, 0);
}
END_TEST

START_TEST(test_abandon_between_rounds)
{
	runnerd_removal_start(rm, name, 2);
	finish(exit_status(0, ""));
	ck_assert(runnerd_removal_waiting(rm));
	size_t m = rig_mark();
	runnerd_removal_abandon(rm);
	fake_advance(10 * RUNNERD_RM_SECOND_DELAY_MS);
	rig_expect_since(m, NULL);
	ck_assert_uint_eq(fk.overs, 0);
}
END_TEST

START_TEST(test_abandon_when_idle)
{
	/* A zeroed one (an owner that never removed anything) and one set up but idle. */
	struct runnerd_removal zero = {0};
	runnerd_removal_abandon(&zero);
	size_t m = rig_mark();
	runnerd_removal_abandon(rm);
	rig_expect_since(m, NULL);
}
END_TEST

START_TEST(test_over_may_free_it)
{
	/* Under ASan: nothing of the removal is touched after over(), whichever path ends
	 * it. */
	fk.free_in_over = true;
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(0, ""));
	ck_assert_ptr_null(rm);

	rm = removal_new();
	runnerd_removal_start(rm, name, 1);
	finish(exit_status(1, "Error response from daemon: permission denied\n"));
	ck_assert_ptr_null(rm);

	rm = removal_new();
	fk.spawn_result = -ENOMEM;
	runnerd_removal_start(rm, name, 2);
	ck_assert_ptr_null(rm);
	ck_assert_uint_eq(fk.overs, 3);
}
END_TEST

START_TEST(test_what_is_cut_to_its_size)
{
	char longer[2 * RUNNERD_REMOVAL_WHAT_MAX];
	memset(longer, 'w', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	runnerd_removal_init(rm, &ops, NULL, &hooks, &fk, "%s", longer);
	ck_assert_uint_eq(strlen(rm->what), RUNNERD_REMOVAL_WHAT_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("runnerd_removal");
	TCase *tc = tcase_create("removal");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_no_round_is_over_at_once);
	tcase_add_test(tc, test_two_rounds_a_delay_apart);
	tcase_add_test(tc, test_name_is_copied);
	tcase_add_test(tc, test_no_such_container_is_gone);
	tcase_add_test(tc, test_failure_ends_without_another_round);
	tcase_add_test(tc, test_timeout_is_a_failure);
	tcase_add_test(tc, test_in_progress_settled_by_a_round_still_due);
	tcase_add_test(tc, test_in_progress_adds_one_round_once);
	tcase_add_test(tc, test_in_progress_then_gone_after_the_added_round);
	tcase_add_test(tc, test_extra_round_is_granted_again_on_a_new_start);
	tcase_add_test(tc, test_round_that_cannot_start_is_a_failure);
	tcase_add_test(tc, test_round_that_cannot_be_scheduled_is_a_failure);
	tcase_add_test(tc, test_a_new_start_clears_the_last_failure);
	tcase_add_test(tc, test_abandon_while_a_round_runs);
	tcase_add_test(tc, test_abandon_between_rounds);
	tcase_add_test(tc, test_abandon_when_idle);
	tcase_add_test(tc, test_over_may_free_it);
	tcase_add_test(tc, test_what_is_cut_to_its_size);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
