/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include "common/msg.h"
#include "common/proto.h"
#include "common/util.h"

#define HDR_LEN 8u

void rts_msg_init(struct rts_msg *m, uint32_t type)
{
	*m = (struct rts_msg){.type = type, .fd = -1};
	m->buf = rts_xmalloc(RTS_MSG_MAX);
	uint32_t v = RTS_PROTO_VERSION;
	memcpy(m->buf, &v, 4);
	memcpy(m->buf + 4, &type, 4);
	m->len = HDR_LEN;
}

void rts_msg_release(struct rts_msg *m)
{
	free(m->buf);
	m->buf = NULL;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	m->len = m->pos = 0;
}

static void put(struct rts_msg *m, const void *p, size_t n)
{
	if (m->overflow || n > RTS_MSG_MAX - m->len) {
		m->overflow = true;
		return;
	}
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

void rts_msg_put_u8(struct rts_msg *m, uint8_t v) { put(m, &v, 1); }
void rts_msg_put_u32(struct rts_msg *m, uint32_t v) { put(m, &v, 4); }
void rts_msg_put_i32(struct rts_msg *m, int32_t v) { put(m, &v, 4); }
void rts_msg_put_u64(struct rts_msg *m, uint64_t v) { put(m, &v, 8); }

void rts_msg_put_str(struct rts_msg *m, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > UINT32_MAX) {
		m->overflow = true;
		return;
	}
	uint32_t l = (uint32_t)n;
	put(m, &l, 4);
	put(m, s ? s : "", n);
	put(m, "", 1);
}

void rts_msg_put_fd(struct rts_msg *m, int fd) { m->fd = fd; }

static int get(struct rts_msg *m, void *p, size_t n)
{
	if (n > m->len - m->pos)
		return -EBADMSG;
	memcpy(p, m->buf + m->pos, n);
	m->pos += n;
	return 0;
}

int rts_msg_get_u8(struct rts_msg *m, uint8_t *v) { return get(m, v, 1); }
int rts_msg_get_u32(struct rts_msg *m, uint32_t *v) { return get(m, v, 4); }
int rts_msg_get_i32(struct rts_msg *m, int32_t *v) { return get(m, v, 4); }
int rts_msg_get_u64(struct rts_msg *m, uint64_t *v) { return get(m, v, 8); }

int rts_msg_get_str(struct rts_msg *m, const char **s, size_t max_len)
{
	uint32_t l;
	if (get(m, &l, 4) < 0)
		return -EBADMSG;
	/* Length, terminator and content are all checked against the packet, never trusted. */
	if (l > max_len || (size_t)l + 1 > m->len - m->pos)
		return -EBADMSG;
	const char *p = (const char *)m->buf + m->pos;
	if (p[l] != '\0' || memchr(p, '\0', l) != NULL)
		return -EBADMSG;
	*s = p;
	m->pos += (size_t)l + 1;
	return 0;
}

int rts_msg_take_fd(struct rts_msg *m, int *fd)
{
	if (m->fd < 0)
		return -EBADMSG;
	*fd = steal_fd(&m->fd);
	return 0;
}

int rts_msg_end(struct rts_msg *m)
{
	if (m->pos != m->len || m->fd >= 0)
		return -EBADMSG;
	return 0;
}

int rts_msg_send(int sock, const struct rts_msg *m)
{
	if (m->overflow)
		return -EMSGSIZE;
	struct iovec iov = {.iov_base = m->buf, .iov_len = m->len};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (m->fd >= 0) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = sizeof(control.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &m->fd, sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		return (size_t)n == m->len ? 0 : -EMSGSIZE;
	}
}

/* Close every fd in the control data: used when the packet is refused. */
static void close_all_fds(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

int rts_msg_recv(int sock, struct rts_msg *m)
{
	*m = (struct rts_msg){.fd = -1};
	m->buf = rts_xmalloc(RTS_MSG_MAX);
	/* Room for a few fds, so a peer that sends too many is detected (and they are closed)
	 * rather than silently truncated. */
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = m->buf, .iov_len = RTS_MSG_MAX};
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_all_fds(&mh);
		return -EBADMSG;
	}
	int nfds = 0, bad = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len != CMSG_LEN(sizeof(int))) {
			bad = 1;
			continue;
		}
		nfds++;
	}
	if (bad || nfds > 1) {
		close_all_fds(&mh);
		return -EBADMSG;
	}
	if (nfds == 1)
		memcpy(&m->fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
	m->len = (size_t)n;
	uint32_t version;
	if (get(m, &version, 4) < 0 || get(m, &m->type, 4) < 0 || version != RTS_PROTO_VERSION)
		return -EBADMSG;
	return 0;
}

int rts_dispatch(const struct rts_dispatch *table, void *ctx, struct rts_msg *m)
{
	for (const struct rts_dispatch *d = table; d->handler; d++)
		if (d->type == m->type)
			return d->handler(ctx, m);
	return -EPROTO;
}
