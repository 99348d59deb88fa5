/* SPDX-License-Identifier: Apache-2.0 */
/* statd's channel queues (statd/queue.h), driven through their inputs with recording ops
 * and a fake clock: no sockets, no runnerd, no Docker, no root.
 *
 * Every test checks, besides what it is about, the rules every effect obeys (see the ops
 * below): an accepted turn's answer comes before its one event, every origin the queue
 * took is released exactly once and none it refused, and no fd is left open. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/ids.h"
#include "common/log.h"
#include "common/util.h"
#include "statd/queue.h"
#include "tests/unit/machine_rig.h"
#include "tests/unit/seqpacket_rig.h"

#define TIMEOUT_MS 60000u /* turnTimeoutMs of the queue under test */

/* A request as the queue sees it: only a name here. */
struct statd_origin {
	char name[48];
	bool is_turn;
	bool taken; /* the queue accepted it (it must release it) */
	bool answered, evented, released;
	enum statd_answer_kind answer_kind;
	enum statd_outcome outcome;
};

/* A TURN_RUN the fake link took. */
struct sent_run {
	const void *tag;
	char id[RTS_TURN_ID_LEN + 1];
	char name[48];
	bool start_fresh;
	bool in_send_queue; /* can still be withdrawn */
};

static struct {
	/* behaviour of the fakes */
	bool room;	      /* send_run takes TURN_RUN */
	bool hold_sends;      /* taken TURN_RUNs stay in the send queue until flush_sends() */
	int connect_result;   /* what connect returns */
	int workspace_result; /* < 0: workspace_open fails with it */
	int record_result;    /* what record_mode returns */

	/* what happened */
	struct sent_run *runs;
	size_t n_runs, cap_runs;
	struct statd_origin **origins;
	size_t n_origins, cap_origins;
	unsigned connects, stops;
	bool freeing; /* statd_queue_free runs: releases without events are fine */
} fk;

static struct statd_queue *q;
static int fds_at_start;

static struct sent_run *run_by_tag(const void *tag)
{
	for (size_t i = fk.n_runs; i-- > 0;)
		if (fk.runs[i].tag == tag)
			return &fk.runs[i];
	return NULL;
}

static struct sent_run *run_by_name(const char *name)
{
	for (size_t i = fk.n_runs; i-- > 0;)
		if (strcmp(fk.runs[i].name, name) == 0)
			return &fk.runs[i];
	return NULL;
}

/* ---- the ops ---- */

static int op_timer_start(void *owner, uint64_t after_ms, void (*fn)(void *arg), void *arg,
			  struct rts_timer **ret)
{
	ck_assert_uint_gt(after_ms, 0);
	return fake_timer_start(after_ms, fn, arg, ret);
}

static const char *refusal_name(enum statd_refusal r)
{
	static const char *const names[] = {
		[STATD_REFUSAL_NONE] = "none",
		[STATD_REFUSAL_SHUTTING_DOWN] = "shutting_down",
		[STATD_REFUSAL_BUSY] = "busy",
		[STATD_REFUSAL_TOO_MANY_CHANNELS] = "too_many_channels",
		[STATD_REFUSAL_QUEUE_FULL] = "queue_full",
		[STATD_REFUSAL_STATE_WRITE] = "state_write",
	};
	return names[r];
}

static void op_answer(void *owner, struct statd_origin *o, const struct statd_answer *a)
{
	ck_assert_msg(!o->answered, "%s answered twice", o->name);
	ck_assert_msg(!o->released, "%s answered after its release", o->name);
	o->answered = true;
	o->answer_kind = a->kind;
	switch (a->kind) {
	case STATD_ANSWER_SANDBOX:
		rig_logf("answer %s sandbox", o->name);
		break;
	case STATD_ANSWER_MODE:
		if (a->error)
			rig_logf("answer %s mode %s refused %s", o->name, a->channel, refusal_name(a->error));
		else
			rig_logf("answer %s mode %s %s", o->name, a->channel, statd_mode_name(a->mode));
		break;
	case STATD_ANSWER_FRESH:
		rig_logf("answer %s fresh %s", o->name, a->channel);
		break;
	}
}

static const char *outcome_name(enum statd_outcome outcome)
{
	static const char *const names[] = {
		[STATD_OUTCOME_REPLY] = "reply",
		[STATD_OUTCOME_FAILED] = "failed",
		[STATD_OUTCOME_TIMEOUT] = "timeout",
		[STATD_OUTCOME_CANCELLED] = "cancelled",
		[STATD_OUTCOME_CLEANUP_FAILED] = "cleanup_failed",
		[STATD_OUTCOME_UNAVAILABLE] = "unavailable",
	};
	return names[outcome];
}

static void op_event(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply)
{
	ck_assert_msg(o->is_turn, "an event for %s, which is not a turn", o->name);
	ck_assert_msg(o->answered && o->answer_kind == STATD_ANSWER_SANDBOX, "event for %s before its answer", o->name);
	ck_assert_msg(!o->evented, "a second event for %s", o->name);
	ck_assert_msg(!o->released, "an event for %s after its release", o->name);
	ck_assert((outcome == STATD_OUTCOME_REPLY) == (reply != NULL));
	o->evented = true;
	o->outcome = outcome;
	if (reply)
		rig_logf("event %s reply %s", o->name, reply);
	else
		rig_logf("event %s %s", o->name, outcome_name(outcome));
}

static void op_release(void *owner, struct statd_origin *o)
{
	ck_assert_msg(o->taken, "%s released, but the queue refused it", o->name);
	ck_assert_msg(!o->released, "%s released twice", o->name);
	ck_assert_msg(o->answered || fk.freeing, "%s released unanswered", o->name);
	ck_assert_msg(!o->is_turn || o->evented || fk.freeing, "turn %s released without its event", o->name);
	o->released = true;
}

static int op_record_mode(void *owner, const char *channel, enum statd_mode mode)
{
	rig_logf("record %s %s", channel, statd_mode_name(mode));
	return fk.record_result;
}

static int op_workspace_open(void *owner, const char *channel_hash, char **path, const char **why)
{
	if (fk.workspace_result < 0) {
		*why = "test says no";
		return fk.workspace_result;
	}
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	*path = rts_xasprintf("/ws/%s", channel_hash);
	return fd;
}

static int op_connect(void *owner)
{
	fk.connects++;
	return fk.connect_result;
}

static bool op_send_run(void *owner, const struct statd_turn_start *s)
{
	if (!fk.room)
		return false;
	ck_assert_int_ge(s->workspace_fd, 0);
	close(s->workspace_fd); /* the link's now */
	if (fk.n_runs == fk.cap_runs) {
		fk.cap_runs = fk.cap_runs ? 2 * fk.cap_runs : 64;
		fk.runs = rts_xrealloc(fk.runs, fk.cap_runs * sizeof(*fk.runs));
	}
	struct sent_run *r = &fk.runs[fk.n_runs++];
	*r = (struct sent_run){.tag = s->tag, .start_fresh = s->start_fresh, .in_send_queue = fk.hold_sends};
	ck_assert(rts_turn_id_valid(s->turn_id));
	memcpy(r->id, s->turn_id, sizeof(r->id));
	snprintf(r->name, sizeof(r->name), "%s", s->text); /* the tests name each turn by its text */
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(s->channel, hash);
	ck_assert_str_eq(s->channel_hash, hash);
	rig_logf("run %s%s", s->text, s->start_fresh ? " fresh" : "");
	return true;
}

static bool op_withdraw(void *owner, const void *tag)
{
	struct sent_run *r = run_by_tag(tag);
	if (!r || !r->in_send_queue)
		return false;
	r->in_send_queue = false;
	rig_logf("withdraw %s", r->name);
	return true;
}

static void op_send_cancel(void *owner, const char *turn_id)
{
	for (size_t i = 0; i < fk.n_runs; i++)
		if (strcmp(fk.runs[i].id, turn_id) == 0) {
			rig_logf("cancel %s", fk.runs[i].name);
			return;
		}
	ck_abort_msg("TURN_CANCEL for a turn never sent");
}

static void op_stopped(void *owner)
{
	fk.stops++;
	rig_logf("stopped");
}

static const struct statd_queue_ops ops = {
	.now_ms = rig_op_now_ms,
	.timer_start = op_timer_start,
	.timer_stop = rig_op_timer_stop,
	.answer = op_answer,
	.event = op_event,
	.release = op_release,
	.record_mode = op_record_mode,
	.workspace_open = op_workspace_open,
	.connect = op_connect,
	.send_run = op_send_run,
	.withdraw = op_withdraw,
	.send_cancel = op_send_cancel,
	.stopped = op_stopped,
};

/* ---- the rig ---- */

static void setup(void)
{
	rts_log_set_max_priority(LOG_EMERG); /* the queue's log lines are not under test here */
	fds_at_start = rig_count_open_fds();
	memset(&fk, 0, sizeof(fk));
	fk.room = true;
	fake_timers_reset();
	q = statd_queue_new(&ops, NULL, TIMEOUT_MS);
}

static void teardown(void)
{
	fk.freeing = true;
	statd_queue_free(q);
	q = NULL;
	ck_assert_uint_eq(fake_timers_pending(), 0);
	for (size_t i = 0; i < fk.n_origins; i++) {
		struct statd_origin *o = fk.origins[i];
		ck_assert_msg(o->released == o->taken, "%s: taken %d, released %d", o->name, o->taken, o->released);
		free(o);
	}
	ck_assert_int_eq(rig_count_open_fds(), fds_at_start);
	rig_log_reset();
	free(fk.runs);
	free(fk.origins);
}

/* A new origin, taken unless settle() says otherwise. */
static struct statd_origin *origin(const char *name, bool is_turn)
{
	struct statd_origin *o = rts_xcalloc(1, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->is_turn = is_turn;
	o->taken = true;
	if (fk.n_origins == fk.cap_origins) {
		fk.cap_origins = fk.cap_origins ? 2 * fk.cap_origins : 64;
		fk.origins = rts_xrealloc(fk.origins, fk.cap_origins * sizeof(*fk.origins));
	}
	fk.origins[fk.n_origins++] = o;
	return o;
}

/* After the input: a refused origin saw no effect at all. */
static enum statd_refusal settle(struct statd_origin *o, enum statd_refusal r)
{
	if (r != STATD_REFUSAL_NONE) {
		ck_assert_msg(!o->answered && !o->evented && !o->released, "refused %s saw effects", o->name);
		o->taken = false;
	}
	return r;
}

static struct statd_origin *origin_by_name(const char *name)
{
	for (size_t i = fk.n_origins; i-- > 0;)
		if (strcmp(fk.origins[i]->name, name) == 0)
			return fk.origins[i];
	return NULL;
}

/* A message for channel whose text (and request name) is name. */
static enum statd_refusal turn_text(const char *channel, const char *name, const char *text)
{
	struct statd_origin *o = origin(name, true);
	enum statd_refusal r = statd_queue_turn(q, &(struct statd_turn_request){
							   .channel = channel,
							   .speaker_id = "42",
							   .speaker_name = "Alice",
							   .principal_id = "p42",
							   .text = text,
						   },
					       o);
	return settle(o, r);
}

static enum statd_refusal turn(const char *channel, const char *name)
{
	return turn_text(channel, name, name);
}

static enum statd_refusal mode(const char *channel, const char *name, enum statd_mode m)
{
	struct statd_origin *o = origin(name, false);
	return settle(o, statd_queue_mode(q, channel, m, o));
}

static enum statd_refusal fresh(const char *channel, const char *name)
{
	struct statd_origin *o = origin(name, false);
	return settle(o, statd_queue_fresh(q, channel, o));
}

/* runnerd answers the turn named name. */
static void done(const char *name, enum rts_turn_status status, const char *reply)
{
	struct sent_run *r = run_by_name(name);
	ck_assert_msg(r != NULL, "no TURN_RUN for %s", name);
	statd_queue_turn_done(q, r->id, status, reply);
}

/* The queued TURN_RUNs leave the send queue: runnerd has them. */
static void flush_sends(void)
{
	for (size_t i = 0; i < fk.n_runs; i++)
		fk.runs[i].in_send_queue = false;
}

static struct statd_channel_status status_of(const char *channel)
{
	struct statd_channel_status st;
	statd_queue_channel_status(q, channel, &st);
	return st;
}

/* ---- ordering ---- */

START_TEST(test_one_at_a_time_in_order)
{
	size_t m = rig_mark();
	ck_assert_int_eq(turn("c1", "a"), STATD_REFUSAL_NONE);
	ck_assert_int_eq(turn("c1", "b"), STATD_REFUSAL_NONE);
	ck_assert_int_eq(turn("c1", "c"), STATD_REFUSAL_NONE);
	/* Every route answer at once; only the first turn goes to runnerd. */
	rig_expect_since(m, "answer a sandbox", "run a", "answer b sandbox", "answer c sandbox", NULL);
	struct statd_channel_status st = status_of("c1");
	ck_assert(st.running);
	ck_assert_uint_eq(st.queued, 2);
	unsigned running, queued;
	statd_queue_totals(q, &running, &queued);
	ck_assert_uint_eq(running, 1);
	ck_assert_uint_eq(queued, 2);

	m = rig_mark();
	done("a", RTS_TURN_OK, "reply to a");
	rig_expect_since(m, "event a reply reply to a", "run b", NULL);
	m = rig_mark();
	done("b", RTS_TURN_OK, "reply to b");
	rig_expect_since(m, "event b reply reply to b", "run c", NULL);
	m = rig_mark();
	done("c", RTS_TURN_OK, "reply to c");
	rig_expect_since(m, "event c reply reply to c", NULL);
	/* Idle: the channel is gone, and so is every timer. */
	st = status_of("c1");
	ck_assert(!st.running);
	ck_assert_uint_eq(st.queued, 0);
	ck_assert_uint_eq(fake_timers_pending(), 0);
}
END_TEST

START_TEST(test_channels_are_independent)
{
	size_t m = rig_mark();
	turn("c1", "a1");
	turn("c2", "b1");
	turn("c1", "a2");
	turn("c2", "b2");
	/* One running turn per channel, at the same time. */
	rig_expect_since(m, "answer a1 sandbox", "run a1", "answer b1 sandbox", "run b1", "answer a2 sandbox",
		     "answer b2 sandbox", NULL);
	m = rig_mark();
	done("b1", RTS_TURN_ERROR, "");
	/* c2 moves on; c1 is untouched. */
	rig_expect_since(m, "event b1 failed", "run b2", NULL);
	ck_assert_uint_eq(status_of("c1").queued, 1);
	m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "c2"), 1);
	rig_expect_since(m, "cancel b2", NULL);
	ck_assert(status_of("c1").running);
}
END_TEST

START_TEST(test_mode_change_waits_behind_queued_work)
{
	size_t m = rig_mark();
	/* On an idle channel a mode change is answered at once, and leaves nothing active. */
	ck_assert_int_eq(mode("c1", "m0", STATD_MODE_ON), STATD_REFUSAL_NONE);
	rig_expect_since(m, "record c1 on", "answer m0 mode c1 on", NULL);
	ck_assert(!status_of("c1").running);

	turn("c1", "a");
	turn("c1", "b");
	m = rig_mark();
	ck_assert_int_eq(mode("c1", "m1", STATD_MODE_OFF), STATD_REFUSAL_NONE);
	turn("c1", "c");
	/* Not recorded and not answered while turns are ahead of it. */
	rig_expect_since(m, "answer c sandbox", NULL);
	m = rig_mark();
	done("a", RTS_TURN_OK, "ra");
	rig_expect_since(m, "event a reply ra", "run b", NULL);
	m = rig_mark();
	done("b", RTS_TURN_OK, "rb");
	/* Its turn: recorded and answered, then the next item runs. */
	rig_expect_since(m, "event b reply rb", "record c1 off", "answer m1 mode c1 off", "run c", NULL);
}
END_TEST

START_TEST(test_mode_change_failures)
{
	size_t m = rig_mark();
	fk.record_result = -E2BIG;
	mode("c1", "full", STATD_MODE_ON);
	fk.record_result = -EFBIG;
	mode("c1", "big", STATD_MODE_ON);
	fk.record_result = -EIO;
	mode("c1", "io", STATD_MODE_ON);
	/* A full state file is the client's to fix (too_many_channels), anything else a
	 * write failure. */
	rig_expect_since(m, "record c1 on", "answer full mode c1 refused too_many_channels", "record c1 on",
		     "answer big mode c1 refused too_many_channels", "record c1 on",
		     "answer io mode c1 refused state_write", NULL);
}
END_TEST

START_TEST(test_fresh_waits_and_is_used_up_by_a_success)
{
	turn("c1", "a");
	size_t m = rig_mark();
	ck_assert_int_eq(fresh("c1", "f"), STATD_REFUSAL_NONE);
	turn("c1", "b");
	rig_expect_since(m, "answer b sandbox", NULL);
	ck_assert(!status_of("c1").fresh);
	m = rig_mark();
	done("a", RTS_TURN_OK, "ra");
	/* Answered when it reaches the head; the next turn starts fresh. */
	rig_expect_since(m, "event a reply ra", "answer f fresh c1", "run b fresh", NULL);
	ck_assert(status_of("c1").fresh);
	turn("c1", "c");
	m = rig_mark();
	done("b", RTS_TURN_TIMEOUT, "");
	/* A failed turn does not use it up. */
	rig_expect_since(m, "event b timeout", "run c fresh", NULL);
	turn("c1", "d");
	m = rig_mark();
	done("c", RTS_TURN_OK, "rc");
	rig_expect_since(m, "event c reply rc", "run d", NULL);
	ck_assert(!status_of("c1").fresh);
}
END_TEST

START_TEST(test_fresh_on_an_idle_channel_stays_pending)
{
	size_t m = rig_mark();
	fresh("c1", "f");
	rig_expect_since(m, "answer f fresh c1", NULL);
	ck_assert(status_of("c1").fresh);
	ck_assert(!status_of("c1").running);
	m = rig_mark();
	turn("c1", "a");
	rig_expect_since(m, "answer a sandbox", "run a fresh", NULL);
}
END_TEST

/* ---- cancel ---- */

START_TEST(test_cancel_running_and_queued)
{
	turn("c1", "a");
	turn("c1", "b");
	mode("c1", "m", STATD_MODE_OFF);
	turn("c1", "c");
	size_t m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 3);
	/* Queued turns end at once; the mode change stays queued; runnerd is asked to stop
	 * the running one. */
	rig_expect_since(m, "event b cancelled", "event c cancelled", "cancel a", NULL);
	ck_assert(status_of("c1").running);
	ck_assert_uint_eq(status_of("c1").queued, 0);
	m = rig_mark();
	/* A second cancel finds the running turn only, and asks runnerd once. */
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 1);
	rig_expect_since(m, NULL);
	done("a", RTS_TURN_CANCELLED, "");
	rig_expect_since(m, "event a cancelled", "record c1 off", "answer m mode c1 off", NULL);
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 0);
	ck_assert_uint_eq(statd_queue_cancel(q, "never-seen"), 0);
}
END_TEST

START_TEST(test_cancel_before_runnerd_has_it)
{
	/* Congested link: the turn waits; cancelling ends it here, nothing is sent. */
	fk.room = false;
	turn("c1", "a");
	turn("c1", "b");
	size_t m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 2);
	rig_expect_since(m, "event b cancelled", "event a cancelled", NULL);
	/* Still in the send queue: taken back, runnerd never hears of it. */
	fk.room = true;
	fk.hold_sends = true;
	turn("c1", "c");
	turn("c1", "d");
	m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 2);
	rig_expect_since(m, "event d cancelled", "withdraw c", "event c cancelled", NULL);
	ck_assert(!status_of("c1").running);
	/* Once it left the send queue, only runnerd can end it. */
	turn("c1", "e");
	flush_sends();
	m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "c1"), 1);
	rig_expect_since(m, "cancel e", NULL);
	ck_assert(status_of("c1").running);
}
END_TEST

/* ---- refusals ---- */

START_TEST(test_queue_full)
{
	char name[32];
	turn("c1", "running");
	for (unsigned i = 0; i < STATD_QUEUE_MAX; i++) {
		snprintf(name, sizeof(name), "q%u", i);
		ck_assert_int_eq(turn("c1", name), STATD_REFUSAL_NONE);
	}
	size_t m = rig_mark();
	ck_assert_int_eq(turn("c1", "one-too-many"), STATD_REFUSAL_QUEUE_FULL);
	ck_assert_int_eq(mode("c1", "mode-too-many", STATD_MODE_OFF), STATD_REFUSAL_QUEUE_FULL);
	ck_assert_int_eq(fresh("c1", "fresh-too-many"), STATD_REFUSAL_QUEUE_FULL);
	/* Refused: no answer, no event, nothing run (and not released: the caller keeps it). */
	rig_expect_since(m, NULL);
	/* The rule is per channel: another channel still takes work. */
	ck_assert_int_eq(turn("c2", "elsewhere"), STATD_REFUSAL_NONE);
	/* And the same channel again once one item left its queue. */
	done("running", RTS_TURN_OK, "r");
	ck_assert_int_eq(turn("c1", "fits-again"), STATD_REFUSAL_NONE);
}
END_TEST

START_TEST(test_busy_on_queued_turns)
{
	/* 64 channels, each with one running and 64 queued turns: 4096 queued in all. */
	char ch[32], name[48];
	for (unsigned c = 0; c < STATD_QUEUED_TURNS_MAX / STATD_QUEUE_MAX; c++)
		for (unsigned i = 0; i <= STATD_QUEUE_MAX; i++) {
			snprintf(ch, sizeof(ch), "c%u", c);
			snprintf(name, sizeof(name), "c%u-%u", c, i);
			ck_assert_int_eq(turn(ch, name), STATD_REFUSAL_NONE);
		}
	unsigned running, queued;
	statd_queue_totals(q, &running, &queued);
	ck_assert_uint_eq(queued, STATD_QUEUED_TURNS_MAX);
	size_t m = rig_mark();
	/* A channel of its own, nothing queued in it: the bound across channels refuses. */
	ck_assert_int_eq(turn("fresh-channel", "x"), STATD_REFUSAL_BUSY);
	rig_expect_since(m, NULL);
	/* Mode changes do not count against it. */
	ck_assert_int_eq(mode("fresh-channel", "m", STATD_MODE_ON), STATD_REFUSAL_NONE);
	done("c0-0", RTS_TURN_OK, "r");
	ck_assert_int_eq(turn("fresh-channel", "y"), STATD_REFUSAL_NONE);
}
END_TEST

START_TEST(test_busy_on_queued_bytes)
{
	turn("c1", "running");
	/* Exactly the bound in one queued text is accepted (the caller bounds real texts
	 * far lower; the queue only adds them up). */
	char *big = rts_xmalloc(STATD_QUEUED_BYTES_MAX + 1);
	memset(big, 'x', STATD_QUEUED_BYTES_MAX);
	big[STATD_QUEUED_BYTES_MAX] = '\0';
	ck_assert_int_eq(turn_text("c2", "big-running", "small"), STATD_REFUSAL_NONE);
	ck_assert_int_eq(turn_text("c2", "big", big), STATD_REFUSAL_NONE);
	free(big);
	size_t m = rig_mark();
	ck_assert_int_eq(turn("c3", "one-byte-more"), STATD_REFUSAL_BUSY);
	rig_expect_since(m, NULL);
	ck_assert_uint_eq(statd_queue_cancel(q, "c2"), 2);
	ck_assert_int_eq(turn("c3", "fits-again"), STATD_REFUSAL_NONE);
}
END_TEST

START_TEST(test_too_many_channels)
{
	char ch[32];
	/* A pending fresh start keeps a channel active without a turn. */
	for (unsigned i = 0; i < STATD_ACTIVE_CHANNELS_MAX; i++) {
		snprintf(ch, sizeof(ch), "c%u", i);
		ck_assert_int_eq(fresh(ch, ch), STATD_REFUSAL_NONE);
	}
	size_t m = rig_mark();
	ck_assert_int_eq(turn("one-more", "t"), STATD_REFUSAL_TOO_MANY_CHANNELS);
	ck_assert_int_eq(mode("one-more", "m", STATD_MODE_ON), STATD_REFUSAL_TOO_MANY_CHANNELS);
	ck_assert_int_eq(fresh("one-more", "f"), STATD_REFUSAL_TOO_MANY_CHANNELS);
	rig_expect_since(m, NULL);
	/* Active channels still take work. */
	ck_assert_int_eq(turn("c7", "t7"), STATD_REFUSAL_NONE);
	rig_expect_since(m, "answer t7 sandbox", "run t7 fresh", NULL);
}
END_TEST

START_TEST(test_shutting_down)
{
	statd_queue_stop(q);
	rig_expect_since(0, "stopped", NULL);
	size_t m = rig_mark();
	ck_assert_int_eq(turn("c1", "t"), STATD_REFUSAL_SHUTTING_DOWN);
	ck_assert_int_eq(mode("c1", "m", STATD_MODE_ON), STATD_REFUSAL_SHUTTING_DOWN);
	ck_assert_int_eq(fresh("c1", "f"), STATD_REFUSAL_SHUTTING_DOWN);
	rig_expect_since(m, NULL);
	statd_queue_stop(q); /* idempotent */
	ck_assert_uint_eq(fk.stops, 1);
}
END_TEST

/* ---- runnerd ---- */

START_TEST(test_link_loss_ends_running_turns_and_queues_move_on)
{
	turn("c1", "a");
	turn("c1", "b");
	turn("c2", "c");
	unsigned connects = fk.connects;
	size_t m = rig_mark();
	statd_queue_link_down(q, true);
	/* Every running turn: unavailable. The next queued turn starts and connects again
	 * (the link had been up: no fail-fast). */
	rig_expect_since(m, "event c unavailable", "event a unavailable", "run b", NULL);
	ck_assert_uint_eq(fk.connects, connects + 1);
	/* A TURN_DONE for a turn already ended is ignored. */
	m = rig_mark();
	done("a", RTS_TURN_OK, "too late");
	rig_expect_since(m, NULL);
	done("b", RTS_TURN_OK, "rb");
	rig_expect_since(m, "event b reply rb", NULL);
}
END_TEST

START_TEST(test_fail_fast_after_a_link_that_never_came_up)
{
	fk.room = false; /* connecting: the turns wait */
	turn("c1", "a");
	turn("c1", "b");
	turn("c1", "c");
	ck_assert_uint_eq(fk.connects, 1);
	size_t m = rig_mark();
	statd_queue_link_down(q, false);
	/* a is unavailable; b and c, started within the window, fail at once without trying
	 * to connect. */
	rig_expect_since(m, "event a unavailable", "event b unavailable", "event c unavailable", NULL);
	ck_assert_uint_eq(fk.connects, 1);
	fake_advance(STATD_RUNNERD_FAIL_FAST_MS - 1);
	m = rig_mark();
	turn("c1", "d");
	rig_expect_since(m, "answer d sandbox", "event d unavailable", NULL);
	ck_assert_uint_eq(fk.connects, 1);
	/* The window is over: the next turn connects again, and waits for the link. */
	fake_advance(1);
	m = rig_mark();
	turn("c1", "e");
	rig_expect_since(m, "answer e sandbox", NULL);
	ck_assert_uint_eq(fk.connects, 2);
	fk.room = true;
	statd_queue_link_ready(q);
	rig_expect_since(m, "answer e sandbox", "run e", NULL);
}
END_TEST

START_TEST(test_connect_that_cannot_start)
{
	fk.connect_result = -EMFILE;
	size_t m = rig_mark();
	turn("c1", "a");
	turn("c2", "b");
	rig_expect_since(m, "answer a sandbox", "event a unavailable", "answer b sandbox", "event b unavailable", NULL);
}
END_TEST

START_TEST(test_congested_link_holds_turns_until_ready)
{
	fk.room = false;
	size_t m = rig_mark();
	turn("c1", "a");
	turn("c2", "b");
	rig_expect_since(m, "answer a sandbox", "answer b sandbox", NULL);
	ck_assert(status_of("c1").running);
	m = rig_mark();
	statd_queue_link_ready(q); /* still no room */
	rig_expect_since(m, NULL);
	fk.room = true;
	statd_queue_link_ready(q);
	ck_assert_uint_eq(rig_n_log - m, 2);
	ck_assert(run_by_name("a") && run_by_name("b"));
	/* Once sent, a turn is not sent again. */
	statd_queue_link_ready(q);
	ck_assert_uint_eq(rig_n_log - m, 2);
	/* A TURN_DONE for a turn statd does not know is ignored. */
	m = rig_mark();
	statd_queue_turn_done(q, "0123456789abcdef", RTS_TURN_OK, "stray");
	rig_expect_since(m, NULL);
}
END_TEST

START_TEST(test_turn_done_status_mapping)
{
	static const struct {
		enum rts_turn_status status;
		const char *reply;
		const char *event;
	} cases[] = {
		{RTS_TURN_OK, "hello", "reply hello"},
		{RTS_TURN_OK, "", "reply "},
		{RTS_TURN_OK, "bad \xff utf-8", "failed"},
		{RTS_TURN_ERROR, "", "failed"},
		{RTS_TURN_TIMEOUT, "", "timeout"},
		{RTS_TURN_CANCELLED, "", "cancelled"},
		{RTS_TURN_CLEANUP_FAILED, "", "cleanup_failed"},
		{(enum rts_turn_status)99, "", "failed"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		char name[16], want[64];
		snprintf(name, sizeof(name), "t%zu", i);
		turn("c1", name);
		size_t m = rig_mark();
		done(name, cases[i].status, cases[i].reply);
		snprintf(want, sizeof(want), "event %s %s", name, cases[i].event);
		rig_expect_since(m, want, NULL);
	}
}
END_TEST

START_TEST(test_backstop_when_runnerd_never_answers)
{
	turn("c1", "a");
	turn("c1", "b");
	ck_assert_uint_eq(fake_timer_in(), TIMEOUT_MS + STATD_BACKSTOP_EXTRA_MS);
	size_t m = rig_mark();
	fake_advance(TIMEOUT_MS + STATD_BACKSTOP_EXTRA_MS - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	/* runnerd is asked once more to clean up; the turn fails; the queue moves on. */
	rig_expect_since(m, "cancel a", "event a failed", "run b", NULL);
	m = rig_mark();
	done("a", RTS_TURN_OK, "too late");
	rig_expect_since(m, NULL);
}
END_TEST

START_TEST(test_workspace_failure_fails_only_that_turn)
{
	fk.workspace_result = -ENOTDIR;
	size_t m = rig_mark();
	turn("c1", "a");
	turn("c1", "b");
	rig_expect_since(m, "answer a sandbox", "event a failed", "answer b sandbox", "event b failed", NULL);
	ck_assert_uint_eq(fk.connects, 0);
	fk.workspace_result = 0;
	turn("c1", "c");
	ck_assert(run_by_name("c") != NULL);
}
END_TEST

START_TEST(test_timer_failure_fails_the_turn)
{
	fake_timer_failures = 1;
	size_t m = rig_mark();
	turn("c1", "a");
	turn("c1", "b");
	rig_expect_since(m, "answer a sandbox", "event a failed", "answer b sandbox", "run b", NULL);
}
END_TEST

/* ---- shutdown ---- */

START_TEST(test_stop_cancels_and_waits_for_runnerd)
{
	turn("c1", "a");
	turn("c1", "b");
	fk.hold_sends = true;
	turn("c2", "c");
	fk.room = false;
	turn("c3", "d");
	size_t m = rig_mark();
	statd_queue_stop(q);
	/* Queued: cancelled. Still in the send queue or waiting: ended here. At runnerd:
	 * TURN_CANCEL, and statd waits for its answer. */
	ck_assert_uint_eq(fk.stops, 0);
	ck_assert(origin_by_name("b")->outcome == STATD_OUTCOME_CANCELLED);
	ck_assert(origin_by_name("c")->outcome == STATD_OUTCOME_CANCELLED);
	ck_assert(origin_by_name("d")->outcome == STATD_OUTCOME_CANCELLED);
	ck_assert(!origin_by_name("a")->evented);
	bool cancel_a = false;
	for (size_t i = m; i < rig_n_log; i++)
		cancel_a |= strcmp(rig_log[i], "cancel a") == 0;
	ck_assert(cancel_a);
	m = rig_mark();
	done("a", RTS_TURN_CANCELLED, "");
	rig_expect_since(m, "event a cancelled", "stopped", NULL);
}
END_TEST

START_TEST(test_stop_gives_up_after_its_deadline)
{
	turn("c1", "a");
	statd_queue_stop(q);
	size_t m = rig_mark();
	fake_advance(STATD_SHUTDOWN_MS - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	rig_expect_since(m, "event a cancelled", "stopped", NULL);
	done("a", RTS_TURN_CANCELLED, "");
	ck_assert_uint_eq(fk.stops, 1);
}
END_TEST

START_TEST(test_free_releases_everything_without_events)
{
	turn("c1", "a");
	turn("c1", "b");
	mode("c1", "m", STATD_MODE_ON);
	fresh("c2", "f");
	/* teardown frees the queue: every origin it took is released, every timer stopped,
	 * every fd closed. */
	ck_assert_uint_eq(fake_timers_pending(), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("statd_queue");
	TCase *tc = tcase_create("queue");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_one_at_a_time_in_order);
	tcase_add_test(tc, test_channels_are_independent);
	tcase_add_test(tc, test_mode_change_waits_behind_queued_work);
	tcase_add_test(tc, test_mode_change_failures);
	tcase_add_test(tc, test_fresh_waits_and_is_used_up_by_a_success);
	tcase_add_test(tc, test_fresh_on_an_idle_channel_stays_pending);
	tcase_add_test(tc, test_cancel_running_and_queued);
	tcase_add_test(tc, test_cancel_before_runnerd_has_it);
	tcase_add_test(tc, test_queue_full);
	tcase_add_test(tc, test_busy_on_queued_turns);
	tcase_add_test(tc, test_busy_on_queued_bytes);
	tcase_add_test(tc, test_too_many_channels);
	tcase_add_test(tc, test_shutting_down);
	tcase_add_test(tc, test_link_loss_ends_running_turns_and_queues_move_on);
	tcase_add_test(tc, test_fail_fast_after_a_link_that_never_came_up);
	tcase_add_test(tc, test_connect_that_cannot_start);
	tcase_add_test(tc, test_congested_link_holds_turns_until_ready);
	tcase_add_test(tc, test_turn_done_status_mapping);
	tcase_add_test(tc, test_backstop_when_runnerd_never_answers);
	tcase_add_test(tc, test_workspace_failure_fails_only_that_turn);
	tcase_add_test(tc, test_timer_failure_fails_the_turn);
	tcase_add_test(tc, test_stop_cancels_and_waits_for_runnerd);
	tcase_add_test(tc, test_stop_gives_up_after_its_deadline);
	tcase_add_test(tc, test_free_releases_everything_without_events);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
