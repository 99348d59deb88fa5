/* SPDX-License-Identifier: Apache-2.0 */
/* common/memfd.h: sealed memfds as the daemons pass them, the receiver's checks refusing
 * every fd that is not one (unsealed, partly sealed, a plain file, a pipe, too big), the
 * seals holding against the sender, an fd carried over a real SEQPACKET socket, and the
 * writer working under every daemon's seccomp filter. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/memfd.h"
#include "common/sandbox.h"
#include "common/util.h"

static const char payload[] = "{\"v\":1,\"text\":\"hello\"}";

START_TEST(test_round_trip)
{
	int fd = rts_memfd_from_buffer("t", payload, strlen(payload));
	ck_assert_int_ge(fd, 0);
	size_t size = 0;
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), 0);
	ck_assert_uint_eq(size, strlen(payload));

	const void *data = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_map(fd, 1024, &data, &len), 0);
	ck_assert_uint_eq(len, strlen(payload));
	ck_assert(memcmp(data, payload, len) == 0);
	rts_memfd_unmap(data, len);

	char *buf = NULL;
	ck_assert_int_eq(rts_memfd_read(fd, 1024, &buf, &len), 0);
	ck_assert_str_eq(buf, payload);
	free(buf);
	/* Exactly at the bound is fine, one byte below it is not. */
	ck_assert_int_eq(rts_memfd_check(fd, strlen(payload), &size), 0);
	ck_assert_int_eq(rts_memfd_check(fd, strlen(payload) - 1, &size), -EFBIG);
	ck_assert_int_eq(rts_memfd_read(fd, strlen(payload) - 1, &buf, &len), -EFBIG);
	ck_assert_ptr_null(buf);
	close(fd);
}
END_TEST

START_TEST(test_empty)
{
	int fd = rts_memfd_from_buffer("empty", NULL, 0);
	ck_assert_int_ge(fd, 0);
	const void *data = (const void *)1;
	size_t len = 7;
	ck_assert_int_eq(rts_memfd_map(fd, 0, &data, &len), 0);
	ck_assert_ptr_null(data);
	ck_assert_uint_eq(len, 0);
	char *buf = NULL;
	ck_assert_int_eq(rts_memfd_read(fd, 0, &buf, &len), 0);
	ck_assert_str_eq(buf, "");
	free(buf);
	close(fd);
}
END_TEST

/* The sender cannot change a sealed memfd: not by writing, growing, shrinking, mapping it
 * writable, or removing a seal. */
START_TEST(test_seals_hold)
{
	int fd = rts_memfd_from_buffer("t", payload, strlen(payload));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_lt(pwrite(fd, "X", 1, 0), 0);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_lt(write(fd, "X", 1), 0);
	ck_assert_int_lt(ftruncate(fd, 1), 0);
	ck_assert_int_lt(ftruncate(fd, 4096), 0);
	ck_assert(mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
	ck_assert_int_lt(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	char *buf = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_read(fd, 1024, &buf, &len), 0);
	ck_assert_str_eq(buf, payload);
	free(buf);
	close(fd);
}
END_TEST

START_TEST(test_refused_unsealed)
{
	int fd = memfd_create("plain", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "abc", 3), 3);
	size_t size = 1;
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	ck_assert_uint_eq(size, 0);
	/* Every seal but one is still not enough, whichever one is missing. */
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	const void *data = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_map(fd, 1024, &data, &len), -EPERM);
	close(fd);

	fd = memfd_create("nowrite", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	close(fd);

	/* A memfd without MFD_ALLOW_SEALING carries F_SEAL_SEAL only. */
	fd = memfd_create("nosealing", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	close(fd);
}
END_TEST

START_TEST(test_refused_not_memfd)
{
	size_t size;
	char path[] = "/tmp/rts-check-memfd-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(write(fd, "abc", 3), 3);
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	close(fd);

	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(rts_memfd_check(p[0], 1024, &size), -EPERM);
	close(p[0]);
	close(p[1]);

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_memfd_check(fd, 1024, &size), -EPERM);
	close(fd);
	ck_assert_int_eq(rts_memfd_check(-1, 1024, &size), -EBADF);
}
END_TEST

START_TEST(test_writer_bound)
{
	struct rts_memfd_writer w;
	ck_assert_int_eq(rts_memfd_writer_open(&w, "w", 8), 0);
	ck_assert_int_eq(rts_memfd_writer_write(&w, "abcd", 4), 0);
	ck_assert_int_eq(rts_memfd_writer_write(&w, "efgh", 4), 0);
	ck_assert_int_eq(rts_memfd_writer_write(&w, "i", 1), -EFBIG);
	ck_assert_uint_eq(w.len, 8);
	int fd = rts_memfd_writer_seal(&w);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(w.fd, -1);
	char *buf = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_read(fd, 8, &buf, &len), 0);
	ck_assert_str_eq(buf, "abcdefgh");
	free(buf);
	close(fd);
	ck_assert_int_eq(rts_memfd_writer_write(&w, "x", 1), -EBADF);
	ck_assert_int_eq(rts_memfd_writer_seal(&w), -EBADF);
	rts_memfd_writer_close(&w);
}
END_TEST

/* What a daemon receives: the fd over a real SOCK_SEQPACKET socket with SCM_RIGHTS. */
START_TEST(test_over_socket)
{
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	int fd = rts_memfd_from_buffer("sent", payload, strlen(payload));
	ck_assert_int_ge(fd, 0);
	char c = 'm';
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	ck_assert_int_eq(sendmsg(sp[0], &mh, 0), 1);
	close(fd);

	struct msghdr rh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	ck_assert_int_eq(recvmsg(sp[1], &rh, MSG_CMSG_CLOEXEC), 1);
	int got = -1;
	memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&rh)), sizeof(int));
	char *buf = NULL;
	size_t len = 0;
	ck_assert_int_eq(rts_memfd_read(got, 1024, &buf, &len), 0);
	ck_assert_str_eq(buf, payload);
	free(buf);
	close(got);
	close(sp[0]);
	close(sp[1]);
}
END_TEST

/* Each daemon makes these under its seccomp filter (brokerd's refuses ftruncate and any
 * open for writing): write, seal, map and read back in a forked child. */
static void writer_under(enum rts_sandbox_profile p)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (rts_sandbox_init() < 0 || rts_sandbox_apply(p) < 0)
			_exit(100);
		static char big[256 * 1024];
		memset(big, 'z', sizeof(big));
		struct rts_memfd_writer w;
		if (rts_memfd_writer_open(&w, "confined", sizeof(big)) < 0)
			_exit(1);
		if (rts_memfd_writer_write(&w, big, sizeof(big)) < 0)
			_exit(2);
		int fd = rts_memfd_writer_seal(&w);
		if (fd < 0)
			_exit(3);
		const void *data = NULL;
		size_t len = 0;
		if (rts_memfd_map(fd, sizeof(big), &data, &len) < 0 || len != sizeof(big) || memcmp(data, big, len))
			_exit(4);
		rts_memfd_unmap(data, len);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "profile %d: status %d", (int)p, st);
}

START_TEST(test_under_filters)
{
	writer_under(RTS_SANDBOX_STATD);
	writer_under(RTS_SANDBOX_RUNNERD);
	writer_under(RTS_SANDBOX_BROKERD);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("memfd");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_seals_hold);
	tcase_add_test(tc, test_refused_unsealed);
	tcase_add_test(tc, test_refused_not_memfd);
	tcase_add_test(tc, test_writer_bound);
	tcase_add_test(tc, test_over_socket);
	tcase_add_test(tc, test_under_filters);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
