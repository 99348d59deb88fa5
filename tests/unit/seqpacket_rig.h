/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by check_msg.c and check_link.c: raw SEQPACKET sends and fd counting. */
#ifndef TESTS_UNIT_SEQPACKET_RIG_H
#define TESTS_UNIT_SEQPACKET_RIG_H

#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Send len bytes at buf as one packet on sock, exactly as given, with nfds (at most 16)
 * fds in one SCM_RIGHTS message: for packets no encoder would make. */
static inline void rig_send_raw(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(16 * sizeof(int))];
	} control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ck_assert_uint_le(nfds, 16);
	if (nfds) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ck_assert_int_eq(sendmsg(sock, &mh, 0), (ssize_t)len);
}

/* Send buf on sock with n fresh /dev/null fds (closed again here): after the packet is
 * refused, the process holds exactly as many fds as before the call. */
static inline void rig_send_with_fds(int sock, const void *buf, size_t len, size_t n)
{
	int fds[16];
	ck_assert_uint_le(n, 16);
	for (size_t i = 0; i < n; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rig_send_raw(sock, buf, len, fds, n);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* How many fds this process has open (below 1024). */
static inline int rig_count_open_fds(void)
{
	int k = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			k++;
	return k;
}

#endif
