/* SPDX-License-Identifier: Apache-2.0 */
/* Typed marshalling and SEQPACKET framing: round trips over a real socketpair, and every
 * malformed packet refused. */
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

/* Send raw bytes as one packet, optionally with fds. */
static void send_raw(const void *buf, size_t len, const int *fds, size_t nfds)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	char control[CMSG_SPACE(8 * sizeof(int))];
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		memset(control, 0, sizeof(control));
		mh.msg_control = control;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), (ssize_t)len);
}

static size_t header(uint8_t *buf, uint32_t version, uint32_t type)
{
	memcpy(buf, &version, 4);
	memcpy(buf + 4, &type, 4);
	return 8;
}

START_TEST(test_round_trip)
{
	struct rts_msg m;
	rts_msg_init(&m, RTS_MSG_BROKER_BIND);
	rts_msg_put_str(&m, "0123456789abcdef");
	rts_msg_put_u8(&m, 7);
	rts_msg_put_u32(&m, 0xdeadbeef);
	rts_msg_put_i32(&m, -22);
	rts_msg_put_u64(&m, 1ULL << 40);
	rts_msg_put_str(&m, "");
	rts_msg_put_str(&m, NULL);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rts_msg_put_fd(&m, devnull);
	ck_assert_int_eq(rts_msg_send(sv[0], &m), 0);
	rts_msg_release(&m); /* closes devnull: the receiver has its own copy */

	struct rts_msg r;
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_uint_eq(r.type, RTS_MSG_BROKER_BIND);
	const char *s;
	uint8_t u8;
	uint32_t u32;
	int32_t i32;
	uint64_t u64;
	int fd = -1;
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 64), 0);
	ck_assert_str_eq(s, "0123456789abcdef");
	ck_assert_int_eq(rts_msg_get_u8(&r, &u8), 0);
	ck_assert_uint_eq(u8, 7);
	ck_assert_int_eq(rts_msg_get_u32(&r, &u32), 0);
	ck_assert_uint_eq(u32, 0xdeadbeef);
	ck_assert_int_eq(rts_msg_get_i32(&r, &i32), 0);
	ck_assert_int_eq(i32, -22);
	ck_assert_int_eq(rts_msg_get_u64(&r, &u64), 0);
	ck_assert(u64 == 1ULL << 40);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 0), 0);
	ck_assert_str_eq(s, "");
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 0), 0);
	ck_assert_str_eq(s, "");
	/* An fd not yet taken makes the end check fail. */
	ck_assert_int_eq(rts_msg_end(&r), -EBADMSG);
	ck_assert_int_eq(rts_msg_take_fd(&r, &fd), 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	close(fd);
	ck_assert_int_eq(rts_msg_end(&r), 0);
	/* Reading past the end fails instead of inventing data. */
	ck_assert_int_eq(rts_msg_get_u8(&r, &u8), -EBADMSG);
	rts_msg_release(&r);
}
END_TEST

START_TEST(test_leftover_bytes)
{
	struct rts_msg m;
	rts_msg_init(&m, RTS_MSG_TURN_CANCEL);
	rts_msg_put_str(&m, "0123456789abcdef");
	rts_msg_put_u8(&m, 1);
	ck_assert_int_eq(rts_msg_send(sv[0], &m), 0);
	rts_msg_release(&m);
	struct rts_msg r;
	const char *s;
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 16), 0);
	ck_assert_int_eq(rts_msg_end(&r), -EBADMSG);
	rts_msg_release(&r);
}
END_TEST

START_TEST(test_bad_strings)
{
	uint8_t buf[64];
	size_t n;
	struct rts_msg r;
	const char *s;

	/* Length beyond the packet. */
	n = header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL);
	uint32_t len = 1000;
	memcpy(buf + n, &len, 4);
	memcpy(buf + n + 4, "abc", 4);
	send_raw(buf, n + 8, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 4096), -EBADMSG);
	rts_msg_release(&r);

	/* Missing terminator. */
	n = header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL);
	len = 3;
	memcpy(buf + n, &len, 4);
	memcpy(buf + n + 4, "abcd", 4);
	send_raw(buf, n + 8, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 4096), -EBADMSG);
	rts_msg_release(&r);

	/* Embedded NUL. */
	n = header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL);
	len = 3;
	memcpy(buf + n, &len, 4);
	memcpy(buf + n + 4, "a\0c\0", 4);
	send_raw(buf, n + 8, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 4096), -EBADMSG);
	rts_msg_release(&r);

	/* Longer than the field allows. */
	n = header(buf, RTS_PROTO_VERSION, RTS_MSG_TURN_CANCEL);
	len = 3;
	memcpy(buf + n, &len, 4);
	memcpy(buf + n + 4, "abc\0", 4);
	send_raw(buf, n + 8, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), 0);
	ck_assert_int_eq(rts_msg_get_str(&r, &s, 2), -EBADMSG);
	rts_msg_release(&r);
}
END_TEST

START_TEST(test_bad_header)
{
	uint8_t buf[16];
	struct rts_msg r;
	size_t n = header(buf, RTS_PROTO_VERSION + 1, RTS_MSG_HELLO);
	send_raw(buf, n, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), -EBADMSG);
	rts_msg_release(&r);
	send_raw(buf, 5, NULL, 0);
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), -EBADMSG);
	rts_msg_release(&r);
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
	struct rts_msg r;
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), -EBADMSG);
	rts_msg_release(&r);
	free(buf);
}
END_TEST

static int count_open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

START_TEST(test_too_many_fds_closed)
{
	uint8_t buf[16];
	size_t n = header(buf, RTS_PROTO_VERSION, RTS_MSG_HELLO);
	int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int fds[2] = {a, b};
	send_raw(buf, n, fds, 2);
	close(a);
	close(b);
	int before = count_open_fds();
	struct rts_msg r;
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), -EBADMSG);
	rts_msg_release(&r);
	/* Both received fds were closed again: nothing leaks from a refused packet. */
	ck_assert_int_eq(count_open_fds(), before);
}
END_TEST

START_TEST(test_overflowing_put)
{
	struct rts_msg m;
	rts_msg_init(&m, RTS_MSG_TURN_RUN);
	char *big = rts_xmalloc(RTS_MSG_MAX + 1);
	memset(big, 'x', RTS_MSG_MAX);
	big[RTS_MSG_MAX] = '\0';
	rts_msg_put_str(&m, big);
	ck_assert_int_eq(rts_msg_send(sv[0], &m), -EMSGSIZE);
	rts_msg_release(&m);
	free(big);
}
END_TEST

static int handled;
static int on_hello(void *ctx, struct rts_msg *m)
{
	(void)ctx;
	(void)m;
	handled++;
	return 0;
}

START_TEST(test_dispatch_fails_closed)
{
	static const struct rts_dispatch table[] = {{RTS_MSG_HELLO, on_hello}, {0, NULL}};
	struct rts_msg m = {.type = RTS_MSG_HELLO};
	handled = 0;
	ck_assert_int_eq(rts_dispatch(table, NULL, &m), 0);
	ck_assert_int_eq(handled, 1);
	m.type = RTS_MSG_TURN_RUN;
	ck_assert_int_eq(rts_dispatch(table, NULL, &m), -EPROTO);
	m.type = 0;
	ck_assert_int_eq(rts_dispatch(table, NULL, &m), -EPROTO);
	ck_assert_int_eq(handled, 1);
}
END_TEST

START_TEST(test_peer_closed)
{
	close(sv[0]);
	sv[0] = socket(AF_UNIX, SOCK_SEQPACKET, 0); /* keep teardown happy */
	struct rts_msg r;
	ck_assert_int_eq(rts_msg_recv(sv[1], &r), -ECONNRESET);
	rts_msg_release(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("msg");
	TCase *tc = tcase_create("seqpacket");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_leftover_bytes);
	tcase_add_test(tc, test_bad_strings);
	tcase_add_test(tc, test_bad_header);
	tcase_add_test(tc, test_oversized_packet);
	tcase_add_test(tc, test_too_many_fds_closed);
	tcase_add_test(tc, test_overflowing_put);
	tcase_add_test(tc, test_dispatch_fails_closed);
	tcase_add_test(tc, test_peer_closed);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
