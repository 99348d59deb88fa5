/* SPDX-License-Identifier: Apache-2.0 */
/* The protocol table (common/proto.h) and its generated encode/decode pairs (common/msg.h):
 * round trips of every message over a real SEQPACKET socketpair, and every malformed
 * packet refused. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "common/msg.h"
#include "common/proto.h"
#include "common/util.h"
#include "tests/unit/seqpacket_rig.h"

static int sv[2];

static void setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void teardown(void)
{
	close(sv[0]);
	close(sv[1]);
}

static size_t header(uint8_t *buf, uint32_t version, uint32_t type)
{
	memcpy(buf, &version, 4);
	memcpy(buf + 4, &type, 4);
	return 8;
}

/* A TURN_CANCEL whose turn_id field is len then the given bytes (raw, n of them). */
static size_t cancel_with(uint8_t *buf, uint32_t len, const void *bytes, size_t n)
{
	size_t o = header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL);
	memcpy(buf + o, &len, 4);
	memcpy(buf + o + 4, bytes, n);
	return o + 4 + n;
}

/* Fill every field of a message from its table row: strings of their maximum length (so the
 * bounds themselves round-trip), integers with a pattern. The string storage is in bufs. */
static void fill(const struct rts_msg_desc *d, void *payload, char **bufs)
{
	for (size_t i = 0; i < d->n_fields; i++) {
		const struct rts_field_desc *f = &d->fields[i];
		char *p = (char *)payload + f->offset;
		switch (f->kind) {
		case RTS_FIELD_U8:
			*(uint8_t *)p = 0xa5;
			break;
		case RTS_FIELD_U32:
			*(uint32_t *)p = 0xdeadbeefu;
			break;
		case RTS_FIELD_I32:
			*(int32_t *)p = -22;
			break;
		case RTS_FIELD_U64:
			*(uint64_t *)p = 1ULL << 40;
			break;
		case RTS_FIELD_STR:
			bufs[i] = rts_xmalloc(f->max + 1);
			for (uint32_t j = 0; j < f->max; j++)
				bufs[i][j] = (char)('a' + (i + j) % 26);
			bufs[i][f->max] = '\0';
			memcpy(p, &bufs[i], sizeof(char *));
			break;
		}
	}
	if (d->has_fd)
		*(int *)((char *)payload + d->fd_offset) = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

START_TEST(test_round_trip_every_message)
{
	struct rts_packet out = RTS_PACKET_INIT, in = RTS_PACKET_INIT;
	for (size_t k = 0; k < rts_msg_n_descs; k++) {
		const struct rts_msg_desc *d = &rts_msg_descs[k];
		union rts_msg_payload sent, got;
		memset(&sent, 0, sizeof(sent));
		memset(&got, 0xff, sizeof(got));
		char *bufs[16] = {0};
		ck_assert_uint_le(d->n_fields, RTS_ARRAY_SIZE(bufs));
		fill(d, &sent, bufs);
		struct stat st_sent;
		if (d->has_fd)
			ck_assert_int_eq(fstat(*(int *)((char *)&sent + d->fd_offset), &st_sent), 0);

		rts_packet_free(&out);
		ck_assert_int_eq(rts_msg_encode(d->type, &sent, &out), 0);
		/* Sized to the message, not to RTS_MSG_MAX. */
		ck_assert_uint_eq(out.cap, out.len);
		ck_assert_int_eq(out.fd >= 0, d->has_fd);
		ck_assert_int_eq(rts_packet_send(sv[0], &out), 0);
		ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
		ck_assert_uint_eq(in.len, out.len);
		uint32_t version, type;
		ck_assert_int_eq(rts_msg_header(&in, &version, &type), 0);
		ck_assert_uint_eq(version, RTS_PROTO_VERSION);
		ck_assert_uint_eq(type, d->type);
		ck_assert_int_eq(rts_msg_decode(&in, d->type, &got), 0);
		for (size_t i = 0; i < d->n_fields; i++) {
			const struct rts_field_desc *f = &d->fields[i];
			const char *a = (const char *)&sent + f->offset, *b = (const char *)&got + f->offset;
			if (f->kind == RTS_FIELD_STR)
				ck_assert_str_eq(*(const char *const *)a, *(const char *const *)b);
			else
				ck_assert_mem_eq(a, b, f->kind == RTS_FIELD_U8 ? 1 : f->kind == RTS_FIELD_U64 ? 8 : 4);
			free(bufs[i]);
		}
		if (d->has_fd) {
			/* The fd moved into the decoded struct and names the same file. */
			int fd = *(int *)((char *)&got + d->fd_offset);
			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(in.fd, -1);
			struct stat st;
			ck_assert_int_eq(fstat(fd, &st), 0);
			ck_assert(st.st_ino == st_sent.st_ino && st.st_dev == st_sent.st_dev);
			ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
			close(fd);
		}
	}
	rts_packet_free(&out);
	rts_packet_free(&in);
}
END_TEST

START_TEST(test_table_is_consistent)
{
	for (size_t k = 0; k < rts_msg_n_descs; k++) {
		const struct rts_msg_desc *d = &rts_msg_descs[k];
		ck_assert_ptr_eq(rts_msg_desc_of(d->type), d);
		ck_assert_str_eq(rts_msg_name(d->type), d->name);
		/* Requests even, answers odd; HELLO and HELLO_OK alone on both links. */
		ck_assert_int_eq(d->type & 1, d->dir == RTS_PROTO_TO_CONNECTOR);
		ck_assert_int_eq(d->link == RTS_PROTO_LINK_ANY, d->type == RTS_MSG_HELLO || d->type == RTS_MSG_HELLO_OK);
		for (size_t j = k + 1; j < rts_msg_n_descs; j++)
			ck_assert_uint_ne(d->type, rts_msg_descs[j].type);
	}
	ck_assert_ptr_null(rts_msg_desc_of(0));
	ck_assert_ptr_null(rts_msg_desc_of(4));
	ck_assert_str_eq(rts_msg_name(4), "unknown");
	/* The version field leads HELLO and HELLO_OK (proto.h: every version keeps it). */
	ck_assert_str_eq(rts_msg_desc_of(RTS_MSG_HELLO)->fields[0].name, "version");
	ck_assert_uint_eq(rts_msg_desc_of(RTS_MSG_HELLO)->fields[0].offset, 0);
	ck_assert_str_eq(rts_msg_desc_of(RTS_MSG_HELLO_OK)->fields[0].name, "version");
}
END_TEST

START_TEST(test_small_message_small_buffer)
{
	struct rts_packet out = RTS_PACKET_INIT, in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode_turn_cancel(&(struct rts_msg_turn_cancel){.turn_id = "0123456789abcdef"}, &out), 0);
	ck_assert_uint_eq(out.len, 8 + 4 + 16 + 1);
	ck_assert_int_eq(rts_packet_send(sv[0], &out), 0);
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	/* The receive buffer grows to the packet, not to RTS_MSG_MAX. */
	ck_assert_uint_eq(in.cap, out.len);
	struct rts_msg_turn_cancel m;
	ck_assert_int_eq(rts_msg_decode_turn_cancel(&in, &m), 0);
	ck_assert_str_eq(m.turn_id, "0123456789abcdef");
	/* A decode as another type refuses it. */
	struct rts_msg_broker_close other;
	ck_assert_int_eq(rts_msg_decode_broker_close(&in, &other), -EBADMSG);
	rts_packet_free(&out);
	rts_packet_free(&in);
}
END_TEST

START_TEST(test_leftover_bytes)
{
	uint8_t buf[64];
	size_t n = cancel_with(buf, 16, "0123456789abcdef\0x", 18);
	rig_send_raw(sv[0], buf, n, NULL, 0);
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	struct rts_msg_turn_cancel m;
	ck_assert_int_eq(rts_msg_decode_turn_cancel(&in, &m), -EBADMSG);
	/* The same packet without the extra byte decodes: it was the leftover that refused it. */
	rig_send_raw(sv[0], buf, n - 1, NULL, 0);
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	ck_assert_int_eq(rts_msg_decode_turn_cancel(&in, &m), 0);
	rts_packet_free(&in);
}
END_TEST

static int decode_cancel(const void *raw, size_t n)
{
	rig_send_raw(sv[0], raw, n, NULL, 0);
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	struct rts_msg_turn_cancel m;
	int r = rts_msg_decode_turn_cancel(&in, &m);
	rts_packet_free(&in);
	return r;
}

START_TEST(test_bad_strings)
{
	uint8_t buf[64];
	/* Length beyond the packet. */
	ck_assert_int_eq(decode_cancel(buf, cancel_with(buf, 1000, "abc", 4)), -EBADMSG);
	/* Missing terminator. */
	ck_assert_int_eq(decode_cancel(buf, cancel_with(buf, 3, "abcd", 4)), -EBADMSG);
	/* Embedded NUL. */
	ck_assert_int_eq(decode_cancel(buf, cancel_with(buf, 3, "a\0c\0", 4)), -EBADMSG);
	/* Longer than the field allows (turn_id: RTS_TURN_ID_LEN). */
	ck_assert_int_eq(decode_cancel(buf, cancel_with(buf, 17, "0123456789abcdef0", 18)), -EBADMSG);
	/* A short length field. */
	ck_assert_int_eq(decode_cancel(buf, header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL) + 2), -EBADMSG);
	/* The longest allowed is fine. */
	ck_assert_int_eq(decode_cancel(buf, cancel_with(buf, 16, "0123456789abcdef", 17)), 0);
}
END_TEST

START_TEST(test_bad_header)
{
	uint8_t buf[64];
	/* Another version: refused for an ordinary message... */
	size_t n = cancel_with(buf, 16, "0123456789abcdef", 17);
	uint32_t other = RTS_PROTO_VERSION + 1;
	memcpy(buf, &other, 4);
	ck_assert_int_eq(decode_cancel(buf, n), -EBADMSG);
	/* ...while HELLO's version field stays readable whatever the header says. */
	n = header(buf, 1, RTS_MSG_HELLO);
	uint32_t v1 = 1;
	memcpy(buf + n, &v1, 4);
	rig_send_raw(sv[0], buf, n + 4, NULL, 0);
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	uint32_t theirs = 0;
	ck_assert_int_eq(rts_msg_peer_version(&in, &theirs), 0);
	ck_assert_uint_eq(theirs, 1);
	struct rts_msg_hello h;
	ck_assert_int_eq(rts_msg_decode_hello(&in, &h), -EBADMSG);
	/* Shorter than a header. */
	rig_send_raw(sv[0], buf, 5, NULL, 0);
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), -EBADMSG);
	rts_packet_free(&in);
}
END_TEST

START_TEST(test_oversized_packet)
{
	int sz = 4 * 1024 * 1024;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	size_t len = RTS_MSG_MAX + 100;
	uint8_t *buf = rts_xcalloc(1, len);
	header(buf, RTS_PROTO_VERSION, RTS_MSG_HELLO);
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (sendmsg(sv[0], &mh, 0) != (ssize_t)len) {
		free(buf);
		return; /* the kernel refused it already: nothing to test */
	}
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), -EBADMSG);
	ck_assert_uint_le(in.cap, RTS_MSG_MAX);
	rts_packet_free(&in);
	free(buf);
}
END_TEST

START_TEST(test_fd_rules)
{
	uint8_t buf[64];
	size_t n = cancel_with(buf, 16, "0123456789abcdef", 17);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int before = rig_count_open_fds();
	/* An fd with a message that carries none. */
	rig_send_raw(sv[0], buf, n, &devnull, 1);
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	struct rts_msg_turn_cancel m;
	ck_assert_int_eq(rts_msg_decode_turn_cancel(&in, &m), -EBADMSG);
	rts_packet_clear(&in);
	ck_assert_int_eq(rig_count_open_fds(), before);

	/* No fd with one that must carry one. */
	struct rts_packet out = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode_broker_bind(
				 &(struct rts_msg_broker_bind){.turn_id = "0123456789abcdef", .fd = -1}, &out),
			 0);
	ck_assert_int_eq(rts_packet_send(sv[0], &out), 0);
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), 0);
	struct rts_msg_broker_bind b;
	ck_assert_int_eq(rts_msg_decode_broker_bind(&in, &b), -EBADMSG);
	close(devnull);
	rts_packet_free(&in);
	rts_packet_free(&out);
}
END_TEST

/* Two fds (one message carries at most one), and more than the receiver makes room for
 * (the kernel truncates the control data: MSG_CTRUNC). Either way the packet is refused
 * and every fd that arrived is closed again. */
START_TEST(test_too_many_fds_closed)
{
	static const size_t counts[] = {2, 12};
	uint8_t buf[16];
	size_t n = header(buf, RTS_PROTO_VERSION, RTS_MSG_HELLO);
	for (size_t i = 0; i < RTS_ARRAY_SIZE(counts); i++) {
		rig_send_with_fds(sv[0], buf, n, counts[i]);
		int before = rig_count_open_fds();
		struct rts_packet in = RTS_PACKET_INIT;
		ck_assert_int_eq(rts_packet_recv(sv[1], &in), -EBADMSG);
		ck_assert_int_eq(rig_count_open_fds(), before);
		rts_packet_free(&in);
	}
}
END_TEST

START_TEST(test_encode_refuses_over_max)
{
	char *big = rts_xmalloc(RTS_TEXT_MAX + 2);
	memset(big, 'x', RTS_TEXT_MAX + 1);
	big[RTS_TEXT_MAX + 1] = '\0';
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int before = rig_count_open_fds();
	struct rts_packet out = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_msg_encode_turn_run(&(struct rts_msg_turn_run){.text = big, .fd = fd}, &out), -EMSGSIZE);
	/* The fd was taken (and closed) although nothing was encoded. */
	ck_assert_int_eq(rig_count_open_fds(), before - 1);
	ck_assert_uint_eq(out.len, 0);
	/* One byte less fits. */
	big[RTS_TEXT_MAX] = '\0';
	ck_assert_int_eq(rts_msg_encode_turn_run(&(struct rts_msg_turn_run){.text = big, .fd = -1}, &out), 0);
	ck_assert_int_eq(rts_msg_encode(999, &(struct rts_msg_turn_cancel){0}, &out), -EINVAL);
	rts_packet_free(&out);
	free(big);
}
END_TEST

START_TEST(test_peer_closed)
{
	close(sv[0]);
	sv[0] = socket(AF_UNIX, SOCK_SEQPACKET, 0); /* keep teardown happy */
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), -ECONNRESET);
	rts_packet_free(&in);
}
END_TEST

START_TEST(test_nothing_waiting)
{
	struct rts_packet in = RTS_PACKET_INIT;
	ck_assert_int_eq(rts_packet_recv(sv[1], &in), -EAGAIN);
	rts_packet_free(&in);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("msg");
	TCase *tc = tcase_create("seqpacket");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip_every_message);
	tcase_add_test(tc, test_table_is_consistent);
	tcase_add_test(tc, test_small_message_small_buffer);
	tcase_add_test(tc, test_leftover_bytes);
	tcase_add_test(tc, test_bad_strings);
	tcase_add_test(tc, test_bad_header);
	tcase_add_test(tc, test_oversized_packet);
	tcase_add_test(tc, test_fd_rules);
	tcase_add_test(tc, test_too_many_fds_closed);
	tcase_add_test(tc, test_encode_refuses_over_max);
	tcase_add_test(tc, test_peer_closed);
	tcase_add_test(tc, test_nothing_waiting);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
