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

#define TIMEOUT_MS 60000u	  /* turnTimeoutMs of the queue under test */
#define RICH_TIMEOUT_MS 300000u /* rich.turnTimeoutMs */
#define RICH_START_MS 90000u	  /* rich.startTimeoutMs */

/* A request as the queue sees it: only a name here. */
struct statd_origin {
	char name[48];
	bool is_turn;
	bool taken; /* the queue accepted it (it must release it) */
	bool answered, evented, released;
	enum statd_answer_kind answer_kind;
	enum statd_outcome outcome;
};

/* A TURN_RUN (or RICH_TURN) the fake link took. */
struct sent_run {
	const void *tag;
	char id[RTS_TURN_ID_LEN + 1];
	char name[48];
	bool start_fresh;
	bool in_send_queue; /* can still be withdrawn */
};

/* A rich reply, as opaque to the queue as the real one (statd/rich.h). */
struct statd_rich_reply {
	char text[48];
};

/* What the fake state file holds for a channel. */
struct fake_mode {
	char channel[16];
	enum statd_mode mode;
	char profile[16];
};

static struct {
	/* behaviour of the fakes */
	bool room;	      /* send_run takes TURN_RUN */
	bool hold_sends;      /* taken TURN_RUNs stay in the send queue until flush_sends() */
	int connect_result;   /* what connect returns */
	int workspace_result; /* < 0: workspace_open fails with it */
	int record_result;    /* what record_mode returns */
	int key_result;	      /* < 0: channel_key fails with it */
	int store_result;     /* < 0: attachment_write fails with it */
	int archive_result;   /* < 0: archive fails with it */
	uint64_t store_bytes; /* what attachment_write stores (0: 1000) */
	unsigned replies_freed;
	struct fake_mode modes[16];
	size_t n_modes;
	/* The turn id of the last ATTACH_FETCH and RICH_STOP seq. */
	char fetch_id[RTS_TURN_ID_LEN + 1];
	uint32_t stop_seq;

	/* what happened */
	struct sent_run *runs;
	size_t n_runs, cap_runs;
	struct statd_origin **origins;
	size_t n_origins, cap_origins;
	unsigned connects, stops;
	char input_text[48]; /* the text of the last rich input made */
	bool input_fresh;
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
		[STATD_REFUSAL_UNAVAILABLE] = "unavailable",
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
			rig_logf("answer %s mode %s %s%s%s", o->name, a->channel, statd_mode_name(a->mode),
				 a->profile ? " " : "", a->profile ? a->profile : "");
		break;
	case STATD_ANSWER_FRESH:
		if (a->error)
			rig_logf("answer %s fresh %s refused %s", o->name, a->channel, refusal_name(a->error));
		else
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
		[STATD_OUTCOME_ATTACHMENT_REFUSED] = "attachment_refused",
		[STATD_OUTCOME_ATTACHMENT_TOO_LARGE] = "attachment_too_large",
		[STATD_OUTCOME_ATTACHMENT_FAILED] = "attachment_failed",
	};
	return names[outcome];
}

static void op_event(void *owner, struct statd_origin *o, enum statd_outcome outcome, const char *reply,
		     const struct statd_rich_reply *rich)
{
	ck_assert_msg(o->is_turn, "an event for %s, which is not a turn", o->name);
	ck_assert_msg(o->answered && o->answer_kind == STATD_ANSWER_SANDBOX, "event for %s before its answer", o->name);
	ck_assert_msg(!o->evented, "a second event for %s", o->name);
	ck_assert_msg(!o->released, "an event for %s after its release", o->name);
	ck_assert((outcome == STATD_OUTCOME_REPLY) == (reply != NULL || rich != NULL));
	ck_assert(!(reply && rich));
	o->evented = true;
	o->outcome = outcome;
	if (reply)
		rig_logf("event %s reply %s", o->name, reply);
	else if (rich)
		rig_logf("event %s rich reply %s", o->name, rich->text);
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

static struct fake_mode *mode_slot(const char *channel)
{
	for (size_t i = 0; i < fk.n_modes; i++)
		if (strcmp(fk.modes[i].channel, channel) == 0)
			return &fk.modes[i];
	return NULL;
}

static int op_record_mode(void *owner, const char *channel, enum statd_mode mode, const char *profile)
{
	ck_assert((mode == STATD_MODE_RICH) == (profile != NULL));
	rig_logf("record %s %s%s%s", channel, statd_mode_name(mode), profile ? " " : "", profile ? profile : "");
	if (fk.record_result < 0)
		return fk.record_result;
	struct fake_mode *m = mode_slot(channel);
	if (!m) {
		ck_assert_uint_lt(fk.n_modes, RTS_ARRAY_SIZE(fk.modes));
		m = &fk.modes[fk.n_modes++];
		snprintf(m->channel, sizeof(m->channel), "%s", channel);
	}
	m->mode = mode;
	snprintf(m->profile, sizeof(m->profile), "%s", profile ? profile : "");
	return fk.record_result;
}

static enum statd_mode op_mode_of(void *owner, const char *channel, const char **profile)
{
	struct fake_mode *m = mode_slot(channel);
	if (profile)
		*profile = m && m->mode == STATD_MODE_RICH ? m->profile : NULL;
	return m ? m->mode : STATD_MODE_OFF;
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

/* ---- the rich ops ---- */

/* The tests' channels are short names: the log shows the name whose hash it got. */
static const char *channel_of_hash(const char *hash)
{
	static const char *const names[] = {"c1", "c2", "c3", "r1", "r2", "r3"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(names); i++) {
		char h[RTS_HASH_HEX_LEN + 1];
		rts_channel_hash(names[i], h);
		if (strcmp(h, hash) == 0)
			return names[i];
	}
	ck_abort_msg("a hash of no test channel");
	return NULL;
}

static int op_channel_key(void *owner, const char *channel, const char *channel_hash, const char **why)
{
	char h[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(channel, h);
	ck_assert_str_eq(h, channel_hash);
	rig_logf("key %s", channel);
	if (fk.key_result < 0)
		*why = "test says no";
	return fk.key_result;
}

static bool op_send_ensure(void *owner, const struct statd_rich_ensure *e)
{
	if (!fk.room)
		return false;
	ck_assert_int_ge(e->workspace_fd, 0);
	close(e->workspace_fd);
	char h[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash(e->channel, h);
	ck_assert_str_eq(h, e->channel_hash);
	rig_logf("ensure %s %s", e->channel, e->profile);
	return true;
}

static const char *reason_name(uint32_t reason)
{
	return reason == RTS_RICH_STOP_OFF ? "off" : reason == RTS_RICH_STOP_FRESH ? "fresh" : "changed";
}

static bool op_send_stop(void *owner, uint32_t seq, const char *channel_hash, uint32_t reason)
{
	if (!fk.room)
		return false;
	fk.stop_seq = seq;
	rig_logf("stop %s %s", channel_of_hash(channel_hash), reason_name(reason));
	return true;
}

static bool op_send_sync(void *owner, uint32_t channels)
{
	if (!fk.room)
		return false;
	rig_logf("sync %u", channels);
	return true;
}

static bool op_send_fetch(void *owner, const char *turn_id, uint32_t index, const char *url, uint64_t max_bytes)
{
	if (!fk.room)
		return false;
	ck_assert(rts_turn_id_valid(turn_id));
	memcpy(fk.fetch_id, turn_id, sizeof(fk.fetch_id));
	rig_logf("fetch %u %s max %llu", index, url, (unsigned long long)max_bytes);
	return true;
}

static bool op_send_rich_turn(void *owner, const struct statd_rich_turn_start *s)
{
	if (!fk.room)
		return false;
	ck_assert_int_ge(s->input_fd, 0);
	close(s->input_fd);
	ck_assert(op_send_ensure(owner, &s->ensure));
	ck_assert_str_eq(s->ensure.channel, s->channel);
	ck_assert_str_eq(s->ensure.profile, s->profile);
	if (fk.n_runs == fk.cap_runs) {
		fk.cap_runs = fk.cap_runs ? 2 * fk.cap_runs : 64;
		fk.runs = rts_xrealloc(fk.runs, fk.cap_runs * sizeof(*fk.runs));
	}
	struct sent_run *r = &fk.runs[fk.n_runs++];
	*r = (struct sent_run){.tag = s->tag, .in_send_queue = fk.hold_sends};
	ck_assert(rts_turn_id_valid(s->turn_id));
	memcpy(r->id, s->turn_id, sizeof(r->id));
	/* The input was made just before: its name is the turn's text (op_rich_input). */
	snprintf(r->name, sizeof(r->name), "%s", fk.input_text);
	r->start_fresh = fk.input_fresh;
	rig_logf("rich %s %s%s", fk.input_text, s->profile, fk.input_fresh ? " fresh" : "");
	return true;
}

static int op_attachment_write(void *owner, int workspace_fd, const char *turn_id, uint32_t index, int data_fd,
			       const char *mime, uint64_t max_bytes, struct statd_attachment *a, const char **why)
{
	ck_assert_int_ge(workspace_fd, 0);
	ck_assert_str_eq(turn_id, fk.fetch_id);
	rig_logf("store %u %s", index, mime);
	if (fk.store_result < 0) {
		*why = "test says no";
		return fk.store_result;
	}
	a->file_name = rts_xstrdup("f");
	a->path = rts_xasprintf("/workspace/attachments/%s/%u-f", turn_id, index);
	a->mime = rts_xstrdup(mime);
	a->bytes = fk.store_bytes ? fk.store_bytes : 1000;
	return 0;
}

static int op_rich_input(void *owner, const struct statd_rich_input *in)
{
	snprintf(fk.input_text, sizeof(fk.input_text), "%s", in->text);
	fk.input_fresh = in->start_fresh;
	for (size_t i = 0; i < in->n_attachments; i++)
		ck_assert_ptr_nonnull(in->attachments[i].path); /* every one stored before */
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int op_archive(void *owner, int workspace_fd, const char *channel_hash, const char **why)
{
	ck_assert_int_ge(workspace_fd, 0);
	rig_logf("archive %s", channel_of_hash(channel_hash));
	if (fk.archive_result < 0)
		*why = "test says no";
	return fk.archive_result;
}

static void op_rich_reply_free(void *owner, struct statd_rich_reply *r)
{
	if (r)
		fk.replies_freed++;
	free(r);
}

static const struct statd_queue_ops ops = {
	.now_ms = rig_op_now_ms,
	.timer_start = op_timer_start,
	.timer_stop = rig_op_timer_stop,
	.answer = op_answer,
	.event = op_event,
	.release = op_release,
	.record_mode = op_record_mode,
	.mode_of = op_mode_of,
	.workspace_open = op_workspace_open,
	.connect = op_connect,
	.send_run = op_send_run,
	.withdraw = op_withdraw,
	.send_cancel = op_send_cancel,
	.channel_key = op_channel_key,
	.send_ensure = op_send_ensure,
	.send_stop = op_send_stop,
	.send_sync = op_send_sync,
	.send_fetch = op_send_fetch,
	.send_rich_turn = op_send_rich_turn,
	.attachment_write = op_attachment_write,
	.rich_input = op_rich_input,
	.archive = op_archive,
	.rich_reply_free = op_rich_reply_free,
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
	q = statd_queue_new(&ops, NULL,
			    &(struct statd_queue_conf){.turn_timeout_ms = TIMEOUT_MS,
						       .rich_turn_timeout_ms = RICH_TIMEOUT_MS,
						       .rich_start_timeout_ms = RICH_START_MS});
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
	return settle(o, statd_queue_mode(q, channel, m, NULL, o));
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


/* ---- rich channels ---- */

static enum statd_refusal rich_mode(const char *channel, const char *name, const char *profile)
{
	struct statd_origin *o = origin(name, false);
	return settle(o, statd_queue_mode(q, channel, STATD_MODE_RICH, profile, o));
}

/* A rich message for channel named name (its text), with attachment URLs (NULL-ended)
 * and images_len bytes of rendered images. */
static enum statd_refusal rich_turn_with(const char *channel, const char *name, const char *const *urls,
					 size_t images_len)
{
	struct statd_origin *o = origin(name, true);
	size_t n = 0;
	while (urls && urls[n])
		n++;
	struct statd_attachment *att = n ? rts_xcalloc(n, sizeof(*att)) : NULL;
	for (size_t i = 0; i < n; i++)
		att[i].url = rts_xstrdup(urls[i]);
	char *images = images_len ? rts_xcalloc(images_len + 1, 1) : NULL;
	struct statd_turn_request req = {
		.channel = channel,
		.speaker_id = "42",
		.speaker_name = "Alice",
		.principal_id = "p42",
		.text = name,
		.rich = true,
		.images_json = images,
		.images_len = images_len,
		.attachment_list = att,
		.n_attachments = n,
	};
	enum statd_refusal r = statd_queue_turn(q, &req, o);
	if (r != STATD_REFUSAL_NONE) {
		/* Still ours when refused. */
		free(images);
		for (size_t i = 0; i < n; i++)
			free(att[i].url);
		free(att);
	}
	return settle(o, r);
}

static enum statd_refusal rich_turn(const char *channel, const char *name)
{
	return rich_turn_with(channel, name, NULL, 0);
}

static void rich_done(const char *name, enum rts_turn_status status, const char *text)
{
	struct sent_run *r = run_by_name(name);
	ck_assert_msg(r != NULL, "no RICH_TURN for %s", name);
	struct statd_rich_reply *rep = NULL;
	if (text) {
		rep = rts_xcalloc(1, sizeof(*rep));
		snprintf(rep->text, sizeof(rep->text), "%s", text);
	}
	statd_queue_rich_turn_done(q, r->id, status, rep);
}

/* The attachment being fetched arrives (result 0) or fails. */
static void attach(uint32_t index, int32_t result)
{
	statd_queue_attach_data(q, fk.fetch_id, index, result, "image/png", -1);
}

START_TEST(test_rich_mode_starts_the_container)
{
	size_t m = rig_mark();
	ck_assert_int_eq(rich_mode("r1", "m", "default"), STATD_REFUSAL_NONE);
	/* Recorded and answered first; the container is then started (its key first). */
	rig_expect_since(m, "record r1 rich default", "answer m mode r1 rich default", "key r1", "ensure r1 default",
			 NULL);
	m = rig_mark();
	/* The same profile again: nothing to stop or start. */
	rich_mode("r1", "m2", "default");
	rig_expect_since(m, "record r1 rich default", "answer m2 mode r1 rich default", NULL);
	m = rig_mark();
	/* Another profile: the stale container goes, the new one comes. */
	rich_mode("r1", "m3", "other");
	rig_expect_since(m, "record r1 rich other", "answer m3 mode r1 rich other", "stop r1 changed", "key r1",
			 "ensure r1 other", NULL);
	m = rig_mark();
	mode("r1", "m4", STATD_MODE_OFF);
	rig_expect_since(m, "record r1 off", "answer m4 mode r1 off", "stop r1 off", NULL);
	m = rig_mark();
	rich_mode("r1", "m5", "default");
	mode("r1", "m6", STATD_MODE_ON);
	rig_expect_since(m, "record r1 rich default", "answer m5 mode r1 rich default", "key r1", "ensure r1 default",
			 "record r1 on", "answer m6 mode r1 on", "stop r1 off", NULL);
}
END_TEST

START_TEST(test_rich_mode_without_a_link_leaves_it_to_the_sync)
{
	fk.room = false;
	size_t m = rig_mark();
	rich_mode("r1", "m", "default");
	rig_expect_since(m, "record r1 rich default", "answer m mode r1 rich default", "key r1", NULL);
	ck_assert_uint_eq(fk.connects, 1);
	/* A key of another channel: recorded and answered, but no container. */
	fk.room = true;
	fk.key_result = -EEXIST;
	m = rig_mark();
	rich_mode("r2", "m2", "default");
	rig_expect_since(m, "record r2 rich default", "answer m2 mode r2 rich default", "key r2", NULL);
}
END_TEST

START_TEST(test_rich_turn_end_to_end)
{
	rich_mode("r1", "m", "default");
	size_t m = rig_mark();
	ck_assert_int_eq(rich_turn("r1", "a"), STATD_REFUSAL_NONE);
	ck_assert_int_eq(rich_turn("r1", "b"), STATD_REFUSAL_NONE);
	/* The key is checked and the container ensured right before the turn goes. */
	rig_expect_since(m, "answer a sandbox", "key r1", "ensure r1 default", "rich a default", "answer b sandbox",
			 NULL);
	m = rig_mark();
	rich_done("a", RTS_TURN_OK, "hello");
	rig_expect_since(m, "event a rich reply hello", "key r1", "ensure r1 default", "rich b default", NULL);
	m = rig_mark();
	/* An OK without a usable reply (statd refused it) fails the turn. */
	rich_done("b", RTS_TURN_OK, NULL);
	rig_expect_since(m, "event b failed", NULL);
	ck_assert_uint_eq(fk.replies_freed, 1);
	ck_assert_uint_eq(fake_timers_pending(), 0);
}
END_TEST

START_TEST(test_rich_turn_status_and_late_answers)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a");
	size_t m = rig_mark();
	rich_done("a", RTS_TURN_TIMEOUT, NULL);
	rig_expect_since(m, "event a timeout", NULL);
	/* A late one, reply included, is dropped and freed. */
	m = rig_mark();
	rich_done("a", RTS_TURN_OK, "late");
	rig_expect_since(m, NULL);
	ck_assert_uint_eq(fk.replies_freed, 1);
	/* A sealed TURN_DONE never ends a rich turn. */
	rich_turn("r1", "b");
	m = rig_mark();
	done("b", RTS_TURN_OK, "wrong kind");
	rig_expect_since(m, NULL);
	rich_done("b", RTS_TURN_CANCELLED, NULL);
	rig_expect_since(m, "event b cancelled", NULL);
}
END_TEST

START_TEST(test_rich_attachments_one_at_a_time)
{
	rich_mode("r1", "m", "default");
	static const char *const urls[] = {"https://a.example/1", "https://a.example/2", NULL};
	size_t m = rig_mark();
	rich_turn_with("r1", "a", urls, 0);
	rig_expect_since(m, "answer a sandbox", "key r1", "fetch 0 https://a.example/1 max 26214400", NULL);
	m = rig_mark();
	/* A data answer for an index not asked for is ignored. */
	attach(1, 0);
	rig_expect_since(m, NULL);
	attach(0, 0);
	/* 1000 bytes stored: the second may still have its own bound. */
	rig_expect_since(m, "store 0 image/png", "fetch 1 https://a.example/2 max 26214400", NULL);
	m = rig_mark();
	attach(1, 0);
	rig_expect_since(m, "store 1 image/png", "ensure r1 default", "rich a default", NULL);
	m = rig_mark();
	rich_done("a", RTS_TURN_OK, "seen");
	rig_expect_since(m, "event a rich reply seen", NULL);
}
END_TEST

START_TEST(test_rich_attachment_failures)
{
	static const char *const urls[] = {"https://a.example/1", "https://a.example/2", NULL};
	static const struct {
		int32_t result;
		int store;
		const char *event;
	} cases[] = {
		{-EACCES, 0, "attachment_refused"},
		{-EFBIG, 0, "attachment_too_large"},
		{-ETIMEDOUT, 0, "attachment_failed"},
		{-EIO, 0, "attachment_failed"},
		{0, -EFBIG, "attachment_too_large"},
		{0, -ENOSPC, "attachment_failed"},
	};
	rich_mode("r1", "m", "default");
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		char name[16], want[64];
		snprintf(name, sizeof(name), "t%zu", i);
		rich_turn_with("r1", name, urls, 0);
		fk.store_result = cases[i].store;
		size_t m = rig_mark();
		attach(0, cases[i].result);
		snprintf(want, sizeof(want), "event %s %s", name, cases[i].event);
		/* That rule ended it: nothing more was fetched and no turn went to runnerd. */
		if (cases[i].result == 0)
			rig_expect_since(m, "store 0 image/png", want, NULL);
		else
			rig_expect_since(m, want, NULL);
		fk.store_result = 0;
	}
	ck_assert_ptr_null(run_by_name("t0"));
	ck_assert_uint_eq(fake_timers_pending(), 0);
}
END_TEST

START_TEST(test_rich_attachment_budget_shrinks)
{
	/* Ten attachments of 1000 bytes each: each fetch may bring what is left of 50 MiB,
	 * at most 25 MiB. */
	static const char *const urls[] = {"https://a.example/1", "https://a.example/2", NULL};
	rich_mode("r1", "m", "default");
	rich_turn_with("r1", "a", urls, 0);
	size_t m = rig_mark();
	attach(0, 0);
	rig_expect_since(m, "store 0 image/png", "fetch 1 https://a.example/2 max 26214400", NULL);
	ck_assert_uint_eq(RTS_RICH_ATTACHMENTS_TOTAL_MAX - 1000 > RTS_RICH_ATTACHMENT_BYTES_MAX, 1);
	attach(1, 0);
	rich_done("a", RTS_TURN_OK, "x");
}
END_TEST

START_TEST(test_rich_attachments_total)
{
	/* Two of 25 MiB fill the 50 MiB: the third is not even fetched. */
	static const char *const urls[] = {"https://a.example/1", "https://a.example/2", "https://a.example/3", NULL};
	rich_mode("r1", "m", "default");
	fk.store_bytes = RTS_RICH_ATTACHMENT_BYTES_MAX;
	rich_turn_with("r1", "a", urls, 0);
	size_t m = rig_mark();
	attach(0, 0);
	attach(1, 0);
	rig_expect_since(m, "store 0 image/png", "fetch 1 https://a.example/2 max 26214400", "store 1 image/png",
			 "event a attachment_too_large", NULL);
	/* With 20 MiB stored, the next may bring only what is left. */
	fk.store_bytes = 20u << 20;
	rich_turn_with("r1", "b", urls, 0);
	m = rig_mark();
	attach(0, 0);
	attach(1, 0);
	rig_expect_since(m, "store 0 image/png", "fetch 1 https://a.example/2 max 26214400", "store 1 image/png",
			 "fetch 2 https://a.example/3 max 10485760", NULL);
	attach(2, 0);
	rich_done("b", RTS_TURN_OK, "done");
}
END_TEST

START_TEST(test_rich_attachments_wait_for_the_link)
{
	static const char *const urls[] = {"https://a.example/1", NULL};
	rich_mode("r1", "m", "default");
	fk.room = false;
	size_t m = rig_mark();
	rich_turn_with("r1", "a", urls, 0);
	rig_expect_since(m, "answer a sandbox", "key r1", NULL);
	fk.room = true;
	statd_queue_link_ready(q);
	rig_expect_since(m, "answer a sandbox", "key r1", "fetch 0 https://a.example/1 max 26214400", NULL);
	m = rig_mark();
	/* The link fails while the data is due: unavailable, and a late answer is nothing. */
	statd_queue_link_down(q, true);
	rig_expect_since(m, "event a unavailable", NULL);
	attach(0, 0);
	rig_expect_since(m, "event a unavailable", NULL);
}
END_TEST

START_TEST(test_rich_cancel_while_fetching)
{
	static const char *const urls[] = {"https://a.example/1", NULL};
	rich_mode("r1", "m", "default");
	rich_turn_with("r1", "a", urls, 0);
	rich_turn("r1", "b");
	size_t m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "r1"), 2);
	/* Nothing of it is at runnerd but a fetch: it ends at once. */
	rig_expect_since(m, "event b cancelled", "event a cancelled", NULL);
	attach(0, 0);
	rig_expect_since(m, "event b cancelled", "event a cancelled", NULL);
}
END_TEST

START_TEST(test_rich_cancel_running_turn)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a");
	size_t m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "r1"), 1);
	/* runnerd has it: TURN_CANCEL, and its answer ends it. */
	rig_expect_since(m, "cancel a", NULL);
	rich_done("a", RTS_TURN_CANCELLED, NULL);
	rig_expect_since(m, "cancel a", "event a cancelled", NULL);
}
END_TEST

START_TEST(test_rich_attachments_time_out)
{
	static const char *const urls[] = {"https://a.example/1", NULL};
	rich_mode("r1", "m", "default");
	rich_turn_with("r1", "a", urls, 0);
	size_t m = rig_mark();
	fake_advance(RICH_TIMEOUT_MS - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	rig_expect_since(m, "event a timeout", NULL);
}
END_TEST

START_TEST(test_rich_backstop_after_the_turn_went)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a");
	flush_sends();
	size_t m = rig_mark();
	fake_advance(RICH_TIMEOUT_MS + RICH_START_MS + STATD_BACKSTOP_EXTRA_MS - 1);
	rig_expect_since(m, NULL);
	fake_advance(1);
	rig_expect_since(m, "cancel a", "event a failed", NULL);
}
END_TEST

START_TEST(test_rich_channel_key_mismatch_refuses_the_turn)
{
	rich_mode("r1", "m", "default");
	fk.key_result = -EEXIST;
	static const char *const urls[] = {"https://a.example/1", NULL};
	size_t m = rig_mark();
	rich_turn_with("r1", "a", urls, 0);
	/* Nothing fetched, nothing sent. */
	rig_expect_since(m, "answer a sandbox", "key r1", "event a failed", NULL);
	ck_assert_uint_eq(fk.n_runs, 0);
}
END_TEST

START_TEST(test_rich_turn_after_the_mode_left_rich)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a");
	/* Queued behind a: off, then a rich message routed while the channel was still rich. */
	mode("r1", "off", STATD_MODE_OFF);
	rich_turn("r1", "b");
	size_t m = rig_mark();
	rich_done("a", RTS_TURN_OK, "x");
	rig_expect_since(m, "event a rich reply x", "record r1 off", "answer off mode r1 off", "stop r1 off",
			 "event b failed", NULL);
	/* Another profile since: the turn runs with it. */
	rich_mode("r1", "m2", "default");
	rich_turn("r1", "c");
	rich_mode("r1", "m3", "other");
	rich_turn("r1", "d");
	m = rig_mark();
	rich_done("c", RTS_TURN_OK, "y");
	rig_expect_since(m, "event c rich reply y", "record r1 rich other", "answer m3 mode r1 rich other",
			 "stop r1 changed", "key r1", "ensure r1 other", "key r1", "ensure r1 other", "rich d other",
			 NULL);
}
END_TEST

START_TEST(test_rich_fresh_waits_for_the_removal)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a");
	fresh("r1", "f");
	rich_turn("r1", "b");
	size_t m = rig_mark();
	rich_done("a", RTS_TURN_OK, "x");
	/* The fresh start runs like a turn: the container is stopped first... */
	rig_expect_since(m, "event a rich reply x", "key r1", "stop r1 fresh", NULL);
	struct statd_channel_status st = status_of("r1");
	ck_assert(st.stopping);
	ck_assert(!st.running);
	m = rig_mark();
	/* ...an answer for another request changes nothing... */
	statd_queue_rich_state(q, fk.stop_seq + 7, "0000000000000000000000000000000000000000000000000000000000000000",
			       RTS_RICH_STATE_STOPPED, 0);
	rig_expect_since(m, NULL);
	/* ...and once it is gone the sessions move and the answer comes; then b, fresh. */
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash("r1", hash);
	statd_queue_rich_state(q, fk.stop_seq, hash, RTS_RICH_STATE_STOPPED, 0);
	rig_expect_since(m, "key r1", "archive r1", "answer f fresh r1", "key r1", "ensure r1 default",
			 "rich b default fresh", NULL);
	m = rig_mark();
	rich_done("b", RTS_TURN_OK, "y");
	rig_expect_since(m, "event b rich reply y", NULL);
	ck_assert(!status_of("r1").fresh);
}
END_TEST

START_TEST(test_rich_fresh_failures)
{
	char hash[RTS_HASH_HEX_LEN + 1];
	rts_channel_hash("r1", hash);
	rich_mode("r1", "m", "default");
	size_t m = rig_mark();
	/* runnerd could not remove the container: no archive, an error answer. */
	fresh("r1", "f1");
	statd_queue_rich_state(q, fk.stop_seq, hash, RTS_RICH_STATE_FAILED, -EIO);
	rig_expect_since(m, "key r1", "stop r1 fresh", "answer f1 fresh r1 refused unavailable", NULL);
	ck_assert(!status_of("r1").fresh);
	/* The archive fails: refused too. */
	m = rig_mark();
	fk.archive_result = -EIO;
	fresh("r1", "f2");
	statd_queue_rich_state(q, fk.stop_seq, hash, RTS_RICH_STATE_STOPPED, 0);
	rig_expect_since(m, "key r1", "stop r1 fresh", "key r1", "archive r1", "answer f2 fresh r1 refused unavailable",
			 NULL);
	fk.archive_result = 0;
	/* The key does not match: nothing is stopped or moved. */
	m = rig_mark();
	fk.key_result = -EEXIST;
	fresh("r1", "f3");
	rig_expect_since(m, "key r1", "answer f3 fresh r1 refused unavailable", NULL);
	fk.key_result = 0;
	/* The link goes while runnerd removes it: unavailable. */
	m = rig_mark();
	fresh("r1", "f4");
	statd_queue_link_down(q, true);
	rig_expect_since(m, "key r1", "stop r1 fresh", "answer f4 fresh r1 refused unavailable", NULL);
	/* runnerd never answers: the backstop answers. */
	m = rig_mark();
	fake_advance(STATD_RUNNERD_FAIL_FAST_MS);
	fresh("r1", "f5");
	fake_advance(STATD_BACKSTOP_EXTRA_MS);
	rig_expect_since(m, "key r1", "stop r1 fresh", "answer f5 fresh r1 refused unavailable", NULL);
	/* A cancel leaves a fresh start alone. */
	fresh("r1", "f6");
	m = rig_mark();
	ck_assert_uint_eq(statd_queue_cancel(q, "r1"), 0);
	rig_expect_since(m, NULL);
	statd_queue_rich_state(q, fk.stop_seq, hash, RTS_RICH_STATE_STOPPED, 0);
	rig_expect_since(m, "key r1", "archive r1", "answer f6 fresh r1", NULL);
}
END_TEST

START_TEST(test_rich_sync_after_hello)
{
	static const char *const channels[] = {"r1", "r2", "r3"};
	static const char *const profiles[] = {"default", "other", "default"};
	rich_mode("r2", "m", "other");
	fresh("r2", "f"); /* r2 is being stopped: left out */
	size_t m = rig_mark();
	statd_queue_rich_sync(q, channels, profiles, 3);
	rig_expect_since(m, "key r1", "ensure r1 default", "key r3", "ensure r3 default", "sync 2", NULL);
	/* A key that does not match is left out too (runnerd removes its container). */
	fk.key_result = -EEXIST;
	m = rig_mark();
	statd_queue_rich_sync(q, channels, profiles, 1);
	rig_expect_since(m, "key r1", "sync 0", NULL);
	fk.key_result = 0;
	/* A congested link: the rest follows when it drains. */
	fk.room = false;
	m = rig_mark();
	statd_queue_rich_sync(q, channels + 2, profiles + 2, 1);
	rig_expect_since(m, "key r3", NULL);
	fk.room = true;
	statd_queue_link_ready(q);
	rig_expect_since(m, "key r3", "key r3", "ensure r3 default", "sync 1", NULL);
	/* A link lost before the end: no RICH_SYNC at all. */
	fk.room = false;
	m = rig_mark();
	statd_queue_rich_sync(q, channels, profiles, 1);
	statd_queue_link_down(q, true);
	fk.room = true;
	statd_queue_link_ready(q);
	/* (r2's fresh start ends with the link too.) */
	rig_expect_since(m, "key r1", "answer f fresh r2 refused unavailable", NULL);
}
END_TEST

START_TEST(test_rich_busy_on_payload_bytes)
{
	rich_mode("r1", "m", "default");
	rich_turn("r1", "a"); /* running */
	ck_assert_int_eq(rich_turn_with("r1", "big", NULL, STATD_QUEUED_RICH_BYTES_MAX / 2), STATD_REFUSAL_NONE);
	ck_assert_int_eq(rich_turn_with("r1", "big2", NULL, STATD_QUEUED_RICH_BYTES_MAX / 2), STATD_REFUSAL_NONE);
	/* One byte more is busy, and refused payload stays the caller's (freed by the rig). */
	ck_assert_int_eq(rich_turn_with("r2", "one", NULL, 1), STATD_REFUSAL_BUSY);
	/* A running turn's payload still counts until it ends. */
	ck_assert_uint_eq(statd_queue_cancel(q, "r1"), 3);
	rich_done("a", RTS_TURN_CANCELLED, NULL);
	ck_assert_int_eq(rich_turn_with("r2", "one", NULL, 1), STATD_REFUSAL_NONE);
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
	tcase_add_test(tc, test_rich_mode_starts_the_container);
	tcase_add_test(tc, test_rich_mode_without_a_link_leaves_it_to_the_sync);
	tcase_add_test(tc, test_rich_turn_end_to_end);
	tcase_add_test(tc, test_rich_turn_status_and_late_answers);
	tcase_add_test(tc, test_rich_attachments_one_at_a_time);
	tcase_add_test(tc, test_rich_attachment_failures);
	tcase_add_test(tc, test_rich_attachment_budget_shrinks);
	tcase_add_test(tc, test_rich_attachments_total);
	tcase_add_test(tc, test_rich_attachments_wait_for_the_link);
	tcase_add_test(tc, test_rich_cancel_while_fetching);
	tcase_add_test(tc, test_rich_cancel_running_turn);
	tcase_add_test(tc, test_rich_attachments_time_out);
	tcase_add_test(tc, test_rich_backstop_after_the_turn_went);
	tcase_add_test(tc, test_rich_channel_key_mismatch_refuses_the_turn);
	tcase_add_test(tc, test_rich_turn_after_the_mode_left_rich);
	tcase_add_test(tc, test_rich_fresh_waits_for_the_removal);
	tcase_add_test(tc, test_rich_fresh_failures);
	tcase_add_test(tc, test_rich_sync_after_hello);
	tcase_add_test(tc, test_rich_busy_on_payload_bytes);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
