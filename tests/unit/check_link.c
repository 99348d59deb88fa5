/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon link (common/link.c) over real SEQPACKET sockets on a real sd-event loop:
 * HELLO and its deadline, the version-mismatch line on both sides, the program check,
 * per-state dispatch, strict decoding, fd passing, the send queue under EAGAIN, back-pressure
 * and its bound, deferred teardown, the peer predicate, lazy connect with retry and the
 * server's bounds. One side is a link, the other either a link or this test speaking raw
 * packets (so it can send what no link would). */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "common/link.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "tests/unit/seqpacket_rig.h"

#define HELLO_MS 300u
#define ID "0123456789abcdef"

static sd_event *ev;
static int sv[2];

/* What a link's owner saw. */
struct side {
	struct rts_link *l;
	int ups, downs, drains, err;
	bool was_up;
	int runs, cancels, dones;
	ino_t run_ino;
	bool answer_cancels;   /* answer each TURN_CANCEL with a TURN_DONE */
	bool fail_in_handler;  /* rts_link_fail from inside the TURN_CANCEL handler */
	int downs_seen_inside; /* downs counted while still inside that handler */
	int send_after_fail;   /* what a send returned right after that */
	char last_id[RTS_TURN_ID_LEN + 1];
};

static void on_up(struct rts_link *l, void *owner)
{
	((struct side *)owner)->ups++;
}

static void on_down(struct rts_link *l, void *owner, int err, bool was_up)
{
	struct side *s = owner;
	s->downs++;
	s->err = err;
	s->was_up = was_up;
	s->l = NULL;
}

static void on_drain(struct rts_link *l, void *owner)
{
	((struct side *)owner)->drains++;
}

static int on_turn_run(struct rts_link *l, void *owner, struct rts_msg_turn_run *m)
{
	struct side *s = owner;
	s->runs++;
	struct stat st;
	if (fstat(m->fd, &st) == 0)
		s->run_ino = st.st_ino;
	/* Taken only when the text says so; otherwise the link closes it. */
	if (strcmp(m->text, "take") == 0)
		close(steal_fd(&m->fd));
	return 0;
}

static int on_turn_cancel(struct rts_link *l, void *owner, struct rts_msg_turn_cancel *m)
{
	struct side *s = owner;
	s->cancels++;
	snprintf(s->last_id, sizeof(s->last_id), "%s", m->turn_id);
	if (strcmp(m->turn_id, "bad") == 0)
		return -EBADMSG;
	if (s->fail_in_handler) {
		rts_link_fail(l, -ECANCELED);
		s->downs_seen_inside = s->downs;
		s->send_after_fail = rts_link_send_turn_done(l, &(struct rts_msg_turn_done){.turn_id = m->turn_id});
		return 0;
	}
	if (s->answer_cancels) {
		/* A large answer, so that answers fill the socket quickly. */
		static char reply[16 * 1024];
		memset(reply, 'r', sizeof(reply) - 1);
		return rts_link_send_turn_done(l, &(struct rts_msg_turn_done){.turn_id = m->turn_id, .reply = reply});
	}
	return 0;
}

static int on_turn_done(struct rts_link *l, void *owner, struct rts_msg_turn_done *m)
{
	struct side *s = owner;
	s->dones++;
	snprintf(s->last_id, sizeof(s->last_id), "%s", m->turn_id);
	return 0;
}

static const struct rts_link_dispatch listener_table[] = {
	RTS_LINK_ON(TURN_RUN, on_turn_run),
	RTS_LINK_ON(TURN_CANCEL, on_turn_cancel),
	RTS_LINK_DISPATCH_END,
};
static const struct rts_link_dispatch connector_table[] = {
	RTS_LINK_ON(TURN_DONE, on_turn_done),
	RTS_LINK_DISPATCH_END,
};

static int refuse_everyone(int fd)
{
	return -EPERM;
}

/* runnerd's end (listening) and statd's end (connecting) of runnerd.sock. */
static const struct rts_link_spec listener_spec = {
	.proto = RTS_PROTO_LINK_RUNNERD,
	.sock = "test-runnerd.sock",
	.self = RTS_PROGRAM_RUNNERD,
	.peer = RTS_PROGRAM_STATD,
	.peer_name = "statd",
	.peer_check = rts_peer_is_self,
	.peer_refusal = "connection from another user",
	.dispatch = listener_table,
	.on_up = on_up,
	.on_down = on_down,
	.on_drain = on_drain,
	.hello_ms = HELLO_MS,
};
static const struct rts_link_spec connector_spec = {
	.proto = RTS_PROTO_LINK_RUNNERD,
	.sock = "test-runnerd.sock",
	.self = RTS_PROGRAM_STATD,
	.peer = RTS_PROGRAM_RUNNERD,
	.peer_name = "runnerd",
	.peer_check = rts_listener_is_trusted,
	.peer_refusal = "listener that is neither this service account nor root",
	.dispatch = connector_table,
	.on_up = on_up,
	.on_down = on_down,
	.on_drain = on_drain,
	.hello_ms = HELLO_MS,
	.connect_ms = 300,
};

static void setup(void)
{
	rts_log_init("check_link");
	ck_assert_int_eq(sd_event_new(&ev), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void teardown(void)
{
	if (sv[0] >= 0)
		close(sv[0]);
	close(sv[1]);
	sd_event_unref(ev);
}

/* Run the loop until *flag (an int) is at least want, or ms pass. */
static bool run_until(const int *flag, int want, unsigned ms)
{
	uint64_t end = rts_now_ms() + ms;
	while (*flag < want && rts_now_ms() < end)
		ck_assert_int_ge(sd_event_run(ev, 10 * 1000), 0);
	return *flag >= want;
}

static void run_for(unsigned ms)
{
	uint64_t end = rts_now_ms() + ms;
	while (rts_now_ms() < end)
		ck_assert_int_ge(sd_event_run(ev, 10 * 1000), 0);
}

/* ---- the raw side (sv[1]) ---- */

static void raw_send(uint32_t type, const void *payload)
{
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode(type, payload, &p), 0);
	ck_assert_int_eq(rts_packet_send(sv[1], &p), 0);
	rts_packet_free(&p);
}

/* The next packet from the link side, running the loop meanwhile. 0, -ECONNRESET (the
 * link closed) or -ETIMEDOUT. */
static int raw_recv(struct rts_packet *p, unsigned ms)
{
	uint64_t end = rts_now_ms() + ms;
	for (;;) {
		int r = rts_packet_recv(sv[1], p);
		if (r != -EAGAIN)
			return r;
		if (rts_now_ms() >= end)
			return -ETIMEDOUT;
		ck_assert_int_ge(sd_event_run(ev, 10 * 1000), 0);
	}
}

static uint32_t raw_type(const struct rts_packet *p)
{
	uint32_t v, t;
	ck_assert_int_eq(rts_msg_header(p, &v, &t), 0);
	return t;
}

/* The raw side says HELLO to a listening link and checks its HELLO_OK. */
static void raw_hello(void)
{
	raw_send(RTS_MSG_HELLO, &(struct rts_msg_hello){.version = RTS_PROTO_VERSION, .program = RTS_PROGRAM_STATD});
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), 0);
	struct rts_msg_hello_ok ok;
	ck_assert_int_eq(rts_msg_decode_hello_ok(&p, &ok), 0);
	ck_assert_uint_eq(ok.version, RTS_PROTO_VERSION);
	ck_assert_str_eq(ok.program, RTS_PROGRAM_RUNNERD);
	rts_packet_free(&p);
}

/* The raw side answers a connecting link's HELLO. */
static void raw_answer_hello(void)
{
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), 0);
	struct rts_msg_hello h;
	ck_assert_int_eq(rts_msg_decode_hello(&p, &h), 0);
	ck_assert_str_eq(h.program, RTS_PROGRAM_STATD);
	rts_packet_free(&p);
	raw_send(RTS_MSG_HELLO_OK,
		 &(struct rts_msg_hello_ok){.version = RTS_PROTO_VERSION, .program = RTS_PROGRAM_RUNNERD});
}

static struct rts_link *open_side(const struct rts_link_spec *spec, bool connecting, struct side *s)
{
	int fd = steal_fd(&sv[0]);
	ck_assert_int_eq(rts_link_open(ev, fd, spec, connecting, s, &s->l), 0);
	return s->l;
}

/* stderr into a file for the log lines, and back. */
static int saved_stderr = -1;
static FILE *captured;
static void capture_begin(void)
{
	fflush(stderr);
	captured = tmpfile();
	ck_assert_ptr_nonnull(captured);
	saved_stderr = dup(2);
	dup2(fileno(captured), 2);
}
static char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	static char buf[8192];
	rewind(captured);
	size_t n = fread(buf, 1, sizeof(buf) - 1, captured);
	buf[n] = '\0';
	fclose(captured);
	return buf;
}

/* ---- tests ---- */

START_TEST(test_hello_and_messages_both_ways)
{
	int pair[2] = {sv[0], sv[1]};
	struct side lis = {0}, con = {0};
	ck_assert_int_eq(rts_link_open(ev, pair[0], &listener_spec, false, &lis, &lis.l), 0);
	ck_assert_int_eq(rts_link_open(ev, pair[1], &connector_spec, true, &con, &con.l), 0);
	sv[0] = -1;
	sv[1] = socket(AF_UNIX, SOCK_SEQPACKET, 0); /* teardown closes it */
	/* Nothing is called back before the loop runs. */
	ck_assert_int_eq(lis.ups + con.ups, 0);
	ck_assert(!rts_link_up(con.l));
	ck_assert_int_eq(rts_link_send_turn_cancel(con.l, &(struct rts_msg_turn_cancel){.turn_id = ID}), -ENOTCONN);
	ck_assert(run_until(&lis.ups, 1, 2000) && run_until(&con.ups, 1, 2000));
	ck_assert(rts_link_up(con.l) && rts_link_has_room(con.l));

	/* An fd travels with its message and names the same file. */
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct stat st;
	ck_assert_int_eq(fstat(devnull, &st), 0);
	int before = rig_count_open_fds();
	ck_assert_int_eq(rts_link_send_turn_run(con.l, &(struct rts_msg_turn_run){.turn_id = ID, .text = "take", .fd = devnull}),
			 0);
	ck_assert(run_until(&lis.runs, 1, 2000));
	ck_assert_uint_eq(lis.run_ino, st.st_ino);
	/* A handler that leaves the fd: the link closes it. Both ways, nothing leaks. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(rts_link_send_turn_run(con.l, &(struct rts_msg_turn_run){.turn_id = ID, .text = "leave", .fd = devnull}),
			 0);
	ck_assert(run_until(&lis.runs, 2, 2000));
	ck_assert_int_eq(rig_count_open_fds(), before - 1);

	ck_assert_int_eq(rts_link_send_turn_done(lis.l, &(struct rts_msg_turn_done){.turn_id = ID, .reply = "hi"}), 0);
	ck_assert(run_until(&con.dones, 1, 2000));
	ck_assert_str_eq(con.last_id, ID);
	ck_assert_int_eq(lis.downs + con.downs, 0);
	rts_link_free(lis.l);
	ck_assert(run_until(&con.downs, 1, 2000));
	ck_assert_int_eq(con.err, -ECONNRESET);
	ck_assert(con.was_up);
}
END_TEST

START_TEST(test_hello_deadline_listening_side)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	uint64_t t0 = rts_now_ms();
	ck_assert(run_until(&s.downs, 1, 5000));
	ck_assert_uint_ge(rts_now_ms() - t0, HELLO_MS);
	ck_assert_int_eq(s.err, -ETIMEDOUT);
	ck_assert(!s.was_up);
	ck_assert_int_eq(s.ups, 0);
}
END_TEST

START_TEST(test_hello_deadline_connecting_side)
{
	struct side s = {0};
	open_side(&connector_spec, true, &s);
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), 0);
	ck_assert_uint_eq(raw_type(&p), RTS_MSG_HELLO);
	/* Never answered. */
	ck_assert(run_until(&s.downs, 1, 5000));
	ck_assert_int_eq(s.err, -ETIMEDOUT);
	ck_assert_int_eq(s.ups, 0);
	rts_packet_free(&p);
}
END_TEST

/* A HELLO from an older statd (version 1 header and field): the listening side reads the
 * version anyway, says so in one line naming both versions, answers HELLO_OK with its own
 * version so the other side can say the same, and drops the link. */
START_TEST(test_version_mismatch_listening_side)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	uint8_t buf[64];
	uint32_t v = 1, type = RTS_MSG_HELLO, len = sizeof(RTS_PROGRAM_STATD) - 1;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, &type, 4);
	memcpy(buf + 8, &v, 4);
	memcpy(buf + 12, &len, 4);
	memcpy(buf + 16, RTS_PROGRAM_STATD, len + 1);
	capture_begin();
	rig_send_raw(sv[1], buf, 16 + len + 1, NULL, 0);
	struct rts_packet p = RTS_PACKET_INIT;
	int r = raw_recv(&p, 2000);
	ck_assert(run_until(&s.downs, 1, 2000));
	char *log = capture_end();
	ck_assert_int_eq(r, 0);
	uint32_t theirs;
	ck_assert_int_eq(rts_msg_peer_version(&p, &theirs), 0);
	ck_assert_uint_eq(theirs, RTS_PROTO_VERSION);
	ck_assert_int_eq(s.err, -EPROTONOSUPPORT);
	ck_assert_int_eq(s.ups, 0);
	ck_assert_int_eq(raw_recv(&p, 2000), -ECONNRESET);
	cleanup_free char *want = rts_xasprintf("%s speaks protocol version 1 and this %s version %u", RTS_PROGRAM_STATD,
						 RTS_PROGRAM_RUNNERD, RTS_PROTO_VERSION);
	ck_assert_msg(strstr(log, want) != NULL, "log: %s", log);
	ck_assert_ptr_nonnull(strstr(log, "install the same release"));
	rts_packet_free(&p);
}
END_TEST

START_TEST(test_version_mismatch_connecting_side)
{
	struct side s = {0};
	open_side(&connector_spec, true, &s);
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), 0);
	ck_assert_uint_eq(raw_type(&p), RTS_MSG_HELLO);
	/* A newer runnerd: another header version and another layout after the version. */
	uint8_t buf[16];
	uint32_t v = 7, type = RTS_MSG_HELLO_OK;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, &type, 4);
	memcpy(buf + 8, &v, 4);
	memcpy(buf + 12, "\x01\x02\x03\x04", 4);
	capture_begin();
	rig_send_raw(sv[1], buf, sizeof(buf), NULL, 0);
	ck_assert(run_until(&s.downs, 1, 2000));
	char *log = capture_end();
	ck_assert_int_eq(s.err, -EPROTONOSUPPORT);
	ck_assert_int_eq(s.ups, 0);
	cleanup_free char *want = rts_xasprintf("%s speaks protocol version 7 and this %s version %u", RTS_PROGRAM_RUNNERD,
						 RTS_PROGRAM_STATD, RTS_PROTO_VERSION);
	ck_assert_msg(strstr(log, want) != NULL, "log: %s", log);
	rts_packet_free(&p);
}
END_TEST

START_TEST(test_wrong_program_refused)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	raw_send(RTS_MSG_HELLO, &(struct rts_msg_hello){.version = RTS_PROTO_VERSION, .program = RTS_PROGRAM_RUNNERD});
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.err, -EPROTO);
	ck_assert_int_eq(s.ups, 0);
	/* No HELLO_OK: the link just closed. */
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), -ECONNRESET);
	rts_packet_free(&p);
}
END_TEST

/* Before HELLO, a TURN_RUN cannot reach its handler (the table has only HELLO); its fd is
 * closed. */
START_TEST(test_unpermitted_before_hello)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	raw_send(RTS_MSG_TURN_RUN, &(struct rts_msg_turn_run){.turn_id = ID, .text = "take", .fd = devnull});
	int before = rig_count_open_fds();
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.err, -EPROTO);
	ck_assert_int_eq(s.runs, 0);
	/* The fd that arrived is closed again, and so is the link's socket. */
	ck_assert_int_eq(rig_count_open_fds(), before - 1);
}
END_TEST

START_TEST(test_unpermitted_after_hello)
{
	/* An answer sent to the listening side, a second HELLO, an unknown type. */
	static const uint32_t bad[] = {RTS_MSG_TURN_DONE, RTS_MSG_HELLO, RTS_MSG_BROKER_CLOSE, 99};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		if (i > 0)
			ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
		struct side s = {0};
		open_side(&listener_spec, false, &s);
		raw_hello();
		ck_assert(run_until(&s.ups, 1, 2000));
		uint8_t buf[64];
		uint32_t v = RTS_PROTO_VERSION, t = bad[i], len = 16;
		memcpy(buf, &v, 4);
		memcpy(buf + 4, &t, 4);
		memcpy(buf + 8, &len, 4);
		memcpy(buf + 12, ID, 17);
		rig_send_raw(sv[1], buf, 12 + 17, NULL, 0);
		ck_assert(run_until(&s.downs, 1, 2000));
		ck_assert_int_eq(s.err, -EPROTO);
		ck_assert_int_eq(s.runs + s.cancels, 0);
		close(sv[1]);
	}
	sv[1] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
}
END_TEST

START_TEST(test_malformed_and_refused_drop_the_peer)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	raw_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	/* A permitted type with a leftover byte. */
	uint8_t buf[64];
	uint32_t v = RTS_PROTO_VERSION, t = RTS_MSG_TURN_CANCEL, len = 16;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, &t, 4);
	memcpy(buf + 8, &len, 4);
	memcpy(buf + 12, ID "\0x", 18);
	rig_send_raw(sv[1], buf, 12 + 18, NULL, 0);
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.err, -EBADMSG);
	ck_assert_int_eq(s.cancels, 0);

	/* A handler that refuses a field. */
	close(sv[1]);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct side s2 = {0};
	open_side(&listener_spec, false, &s2);
	raw_hello();
	raw_send(RTS_MSG_TURN_CANCEL, &(struct rts_msg_turn_cancel){.turn_id = "bad"});
	ck_assert(run_until(&s2.downs, 1, 2000));
	ck_assert_int_eq(s2.cancels, 1);
	ck_assert_int_eq(s2.err, -EBADMSG);
}
END_TEST

START_TEST(test_ctrunc_drops_and_closes)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	raw_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode_turn_cancel(&(struct rts_msg_turn_cancel){.turn_id = ID}, &p), 0);
	rig_send_with_fds(sv[1], p.buf, p.len, 12);
	int before = rig_count_open_fds();
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.err, -EBADMSG);
	ck_assert_int_eq(s.cancels, 0);
	/* The link's own socket is gone too. */
	ck_assert_int_eq(rig_count_open_fds(), before - 1);
	rts_packet_free(&p);
}
END_TEST

/* The peer does not read for a while: sends meet EAGAIN, queue, and go out in order once
 * it reads. The link never drops for it. 24 answers of 60 KiB are far more than an AF_UNIX
 * socket buffers (about 208 KiB), so most of them waited in the link's queue. */
START_TEST(test_eagain_queues_and_keeps_the_link)
{
	struct side s = {0};
	open_side(&listener_spec, false, &s);
	raw_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	static char reply[60 * 1024];
	memset(reply, 'x', sizeof(reply) - 1);
	char id[RTS_TURN_ID_LEN + 1];
	enum { N = 24 };
	_Static_assert(N < RTS_LINK_QUEUE_HIGH, "stays below congestion");
	for (unsigned i = 0; i < N; i++) {
		snprintf(id, sizeof(id), "%016u", i);
		ck_assert_int_eq(rts_link_send_turn_done(s.l, &(struct rts_msg_turn_done){.turn_id = id, .reply = reply}), 0);
	}
	run_for(100);
	ck_assert(rts_link_up(s.l));
	ck_assert_int_eq(s.downs, 0);
	struct rts_packet p = RTS_PACKET_INIT;
	for (unsigned i = 0; i < N; i++) {
		ck_assert_int_eq(raw_recv(&p, 2000), 0);
		struct rts_msg_turn_done m;
		ck_assert_int_eq(rts_msg_decode_turn_done(&p, &m), 0);
		snprintf(id, sizeof(id), "%016u", i);
		ck_assert_str_eq(m.turn_id, id);
		ck_assert_uint_eq(strlen(m.reply), sizeof(reply) - 1);
	}
	ck_assert_int_eq(raw_recv(&p, 100), -ETIMEDOUT);
	ck_assert(rts_link_up(s.l));
	rts_packet_free(&p);
}
END_TEST

/* A peer that sends requests but never reads the answers: the listening side stops reading
 * at RTS_LINK_QUEUE_HIGH queued answers, so the peer's own sends block (EAGAIN) and we buffer
 * no more; nothing is dropped, and once the peer reads, every request is answered. */
START_TEST(test_backpressure_on_a_peer_that_does_not_read)
{
	struct side s = {0};
	s.answer_cancels = true;
	open_side(&listener_spec, false, &s);
	raw_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	ck_assert_int_eq(rts_fd_set_nonblock(sv[1], true), 0);
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode_turn_cancel(&(struct rts_msg_turn_cancel){.turn_id = ID}, &p), 0);
	int sent = 0, blocked_rounds = 0;
	for (int round = 0; round < 400 && blocked_rounds < 20; round++) {
		int r = rts_packet_send(sv[1], &p);
		if (r == 0)
			sent++;
		else {
			ck_assert_int_eq(r, -EAGAIN);
			blocked_rounds++;
		}
		ck_assert_int_ge(sd_event_run(ev, 5 * 1000), 0);
	}
	/* Blocked for good, although more than a queue's worth could have been sent. */
	ck_assert_int_ge(blocked_rounds, 20);
	/* Handled: the queue's high mark plus what the socket took (16 KiB answers, ~208 KiB). */
	ck_assert_int_lt(s.cancels, sent);
	ck_assert_int_le(s.cancels, RTS_LINK_QUEUE_HIGH + 16);
	ck_assert(!rts_link_has_room(s.l));
	ck_assert(rts_link_up(s.l));
	ck_assert_int_eq(s.downs, 0);
	/* Now read everything: every request was answered, in time. */
	int answers = 0;
	while (answers < sent && raw_recv(&p, 2000) == 0) {
		ck_assert_uint_eq(raw_type(&p), RTS_MSG_TURN_DONE);
		answers++;
	}
	ck_assert_int_eq(answers, sent);
	ck_assert_int_eq(s.cancels, sent);
	ck_assert(run_until(&s.drains, 1, 2000));
	ck_assert(rts_link_has_room(s.l));
	ck_assert_int_eq(s.downs, 0);
	rts_packet_free(&p);
}
END_TEST

/* A 60 KiB TURN_RUN: a few fill the socket buffer, the rest queue. */
static int send_big_run(struct rts_link *l, int fd, const void *tag)
{
	static char text[60 * 1024];
	memset(text, 't', sizeof(text) - 1);
	return rts_link_send_turn_run_tagged(l, &(struct rts_msg_turn_run){.turn_id = ID, .text = text, .fd = fd}, tag);
}

START_TEST(test_queue_bound_drops)
{
	struct side s = {0};
	open_side(&connector_spec, true, &s);
	raw_answer_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	int r = 0;
	unsigned i;
	for (i = 0; i < RTS_LINK_QUEUE_MAX + 64 && r == 0; i++)
		r = send_big_run(s.l, -1, NULL);
	ck_assert_int_eq(r, -ENOBUFS);
	ck_assert_uint_gt(i, RTS_LINK_QUEUE_MAX);
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.err, -ENOBUFS);
	ck_assert(s.was_up);
}
END_TEST

/* rts_link_fail inside a handler: nothing more is sent, and on_down comes later, from its
 * own event, never under the handler. */
START_TEST(test_teardown_is_deferred)
{
	struct side s = {0};
	s.fail_in_handler = true;
	open_side(&listener_spec, false, &s);
	raw_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	raw_send(RTS_MSG_TURN_CANCEL, &(struct rts_msg_turn_cancel){.turn_id = ID});
	raw_send(RTS_MSG_TURN_CANCEL, &(struct rts_msg_turn_cancel){.turn_id = "second"});
	ck_assert(run_until(&s.downs, 1, 2000));
	ck_assert_int_eq(s.downs_seen_inside, 0);
	ck_assert_int_eq(s.send_after_fail, -ENOTCONN);
	ck_assert_int_eq(s.err, -ECANCELED);
	/* The second request was never handled. */
	ck_assert_int_eq(s.cancels, 1);
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 2000), -ECONNRESET);
	rts_packet_free(&p);
}
END_TEST

START_TEST(test_withdraw_takes_back_a_queued_message)
{
	struct side s = {0};
	open_side(&connector_spec, true, &s);
	raw_answer_hello();
	ck_assert(run_until(&s.ups, 1, 2000));
	/* Fill the socket so the next send queues (8 x 60 KiB: more than it buffers). */
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(send_big_run(s.l, -1, NULL), 0);
	int tag;
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int before = rig_count_open_fds();
	ck_assert_int_eq(send_big_run(s.l, devnull, &tag), 0);
	ck_assert(rts_link_withdraw(s.l, &tag));
	ck_assert_int_eq(rig_count_open_fds(), before - 1);
	ck_assert(!rts_link_withdraw(s.l, &tag));
	/* Eight arrive, none with an fd: the withdrawn one never left. */
	struct rts_packet p = RTS_PACKET_INIT;
	int n = 0;
	while (raw_recv(&p, 200) == 0) {
		ck_assert_uint_eq(raw_type(&p), RTS_MSG_TURN_RUN);
		ck_assert_int_eq(p.fd, -1);
		n++;
	}
	ck_assert_int_eq(n, 8);
	rts_packet_free(&p);
}
END_TEST

START_TEST(test_peer_predicate_refuses_before_a_byte)
{
	struct rts_link_spec spec = listener_spec;
	spec.peer_check = refuse_everyone;
	struct side s = {0};
	capture_begin();
	ck_assert_int_eq(rts_link_open(ev, steal_fd(&sv[0]), &spec, false, &s, &s.l), -EPERM);
	char *log = capture_end();
	ck_assert_ptr_nonnull(strstr(log, "refusing a test-runnerd.sock connection from another user"));
	struct rts_packet p = RTS_PACKET_INIT;
	ck_assert_int_eq(raw_recv(&p, 500), -ECONNRESET);
	ck_assert_int_eq(s.ups + s.downs, 0);
	rts_packet_free(&p);
}
END_TEST

/* A dispatch table listing what its side never receives is a bug: start-up stops. */
START_TEST(test_table_of_the_wrong_side_aborts)
{
	static const struct rts_link_dispatch wrong[] = {
		RTS_LINK_ON(TURN_DONE, on_turn_done),
		RTS_LINK_DISPATCH_END,
	};
	struct rts_link_spec spec = listener_spec;
	spec.dispatch = wrong;
	struct side s = {0};
	(void)rts_link_open(ev, steal_fd(&sv[0]), &spec, false, &s, &s.l);
}
END_TEST

/* Lazy connect: the listener appears after the first attempts; the server accepts, checks
 * the peer, hands the link to its owner and bounds how many it keeps. */
struct server_owner {
	struct side peers[4];
	int n;
};

static void *peer_new(void *owner, struct rts_link *l)
{
	struct server_owner *o = owner;
	struct side *s = &o->peers[o->n++];
	s->l = l;
	return s;
}

START_TEST(test_connect_retry_and_server)
{
	char dir[] = "/tmp/check_link.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	cleanup_free char *path = rts_xasprintf("%s/runnerd.sock", dir);
	struct side c1 = {0}, c2 = {0};
	ck_assert_int_eq(rts_link_connect(ev, path, &connector_spec, &c1, &c1.l), 0);
	run_for(120); /* a few attempts meet ENOENT */
	ck_assert_int_eq(c1.downs, 0);
	int lfd = rts_listen_unix(path, SOCK_SEQPACKET, 0600);
	ck_assert_int_ge(lfd, 0);
	struct server_owner o = {0};
	struct rts_link_server *srv;
	ck_assert_int_eq(rts_link_server_new(ev, lfd, &listener_spec, 1, peer_new, &o, &srv), 0);
	ck_assert_int_eq(rts_link_server_enable(srv, true), 0);
	ck_assert(run_until(&c1.ups, 1, 2000));
	ck_assert_int_eq(o.n, 1);
	ck_assert(run_until(&o.peers[0].ups, 1, 2000));

	/* One link at most: a second is refused and never comes up. */
	ck_assert_int_eq(rts_link_connect(ev, path, &connector_spec, &c2, &c2.l), 0);
	ck_assert(run_until(&c2.downs, 1, 3000));
	ck_assert(!c2.was_up);
	ck_assert_int_eq(o.n, 1);

	/* The first one works. */
	ck_assert_int_eq(rts_link_send_turn_cancel(c1.l, &(struct rts_msg_turn_cancel){.turn_id = ID}), 0);
	ck_assert(run_until(&o.peers[0].cancels, 1, 2000));

	/* Nobody listens any more: a new connect gives up after its connect_ms. */
	rts_link_free(c1.l);
	rts_link_server_free(srv);
	close(lfd);
	unlink(path);
	struct side c3 = {0};
	ck_assert_int_eq(rts_link_connect(ev, path, &connector_spec, &c3, &c3.l), 0);
	ck_assert(run_until(&c3.downs, 1, 3000));
	ck_assert_int_eq(c3.err, -ENOENT);
	ck_assert(!c3.was_up);
	rts_link_free(o.peers[0].l);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("link");
	TCase *tc = tcase_create("link");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_hello_and_messages_both_ways);
	tcase_add_test(tc, test_hello_deadline_listening_side);
	tcase_add_test(tc, test_hello_deadline_connecting_side);
	tcase_add_test(tc, test_version_mismatch_listening_side);
	tcase_add_test(tc, test_version_mismatch_connecting_side);
	tcase_add_test(tc, test_wrong_program_refused);
	tcase_add_test(tc, test_unpermitted_before_hello);
	tcase_add_test(tc, test_unpermitted_after_hello);
	tcase_add_test(tc, test_malformed_and_refused_drop_the_peer);
	tcase_add_test(tc, test_ctrunc_drops_and_closes);
	tcase_add_test(tc, test_eagain_queues_and_keeps_the_link);
	tcase_add_test(tc, test_backpressure_on_a_peer_that_does_not_read);
	tcase_add_test(tc, test_queue_bound_drops);
	tcase_add_test(tc, test_teardown_is_deferred);
	tcase_add_test(tc, test_withdraw_takes_back_a_queued_message);
	tcase_add_test(tc, test_peer_predicate_refuses_before_a_byte);
	tcase_add_exit_test(tc, test_table_of_the_wrong_side_aborts, 1);
	tcase_add_test(tc, test_connect_retry_and_server);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
