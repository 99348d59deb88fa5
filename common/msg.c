/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <limits.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/msg.h"
#include "common/util.h"

#define HDR_LEN 8u

/* ---- the table as data ---- */

#define KIND_U8 RTS_FIELD_U8
#define KIND_U32 RTS_FIELD_U32
#define KIND_I32 RTS_FIELD_I32
#define KIND_U64 RTS_FIELD_U64
#define KIND_STR RTS_FIELD_STR

#define FIELD_(STRUCT, KIND, f, max) {#f, KIND_##KIND, (max), offsetof(STRUCT, f)},
#define FIELDS_(NAME, name, number, link, dir, has_fd) \
	static const struct rts_field_desc fields_##name[] = {RTS_PROTO_FIELDS_##NAME(FIELD_, struct rts_msg_##name)};
RTS_PROTO_MESSAGES(FIELDS_)

#define FD_OFFSET_0(name) 0
#define FD_OFFSET_1(name) offsetof(struct rts_msg_##name, fd)
#define DESC_(NAME, name, number, link, dir, has_fd)                                                 \
	{(number),     #NAME,                   (link), (dir), (has_fd), FD_OFFSET_##has_fd(name), \
	 fields_##name, RTS_ARRAY_SIZE(fields_##name)},
const struct rts_msg_desc rts_msg_descs[] = {RTS_PROTO_MESSAGES(DESC_)};
const size_t rts_msg_n_descs = RTS_ARRAY_SIZE(rts_msg_descs);

/* ---- what the table must satisfy, checked by the compiler ---- */

/* Requests are even, answers odd (OpenSSH's monitor.h convention). */
#define PARITY_(NAME, name, number, link, dir, has_fd) \
	_Static_assert(((number) & 1) == ((dir) == RTS_PROTO_TO_CONNECTOR), #NAME ": requests even, answers odd");
RTS_PROTO_MESSAGES(PARITY_)

/* The largest instance of every message fits one packet. */
#define SIZE_U8(max) 1u
#define SIZE_U32(max) 4u
#define SIZE_I32(max) 4u
#define SIZE_U64(max) 8u
#define SIZE_STR(max) (4u + (max) + 1u)
#define FIELD_SIZE_(X, KIND, f, max) +SIZE_##KIND(max)
#define FITS_(NAME, name, number, link, dir, has_fd)                                 \
	_Static_assert(HDR_LEN RTS_PROTO_FIELDS_##NAME(FIELD_SIZE_, ~) <= RTS_MSG_MAX, \
		       #NAME ": its largest instance must fit RTS_MSG_MAX");
RTS_PROTO_MESSAGES(FITS_)

_Static_assert(RTS_PROTO_PATH_MAX == PATH_MAX, "the workspace field holds any path");

const struct rts_msg_desc *rts_msg_desc_of(uint32_t type)
{
	for (size_t i = 0; i < rts_msg_n_descs; i++)
		if (rts_msg_descs[i].type == type)
			return &rts_msg_descs[i];
	return NULL;
}

const char *rts_msg_name(uint32_t type)
{
	const struct rts_msg_desc *d = rts_msg_desc_of(type);
	return d ? d->name : "unknown";
}

/* ---- packets ---- */

void rts_packet_clear(struct rts_packet *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->len = 0;
}

void rts_packet_free(struct rts_packet *p)
{
	rts_packet_clear(p);
	free(p->buf);
	p->buf = NULL;
	p->cap = 0;
}

static void reserve(struct rts_packet *p, size_t n)
{
	if (n <= p->cap)
		return;
	p->buf = rts_xrealloc(p->buf, n);
	p->cap = n;
}

static size_t field_size(const struct rts_field_desc *f, const void *payload)
{
	switch (f->kind) {
	case RTS_FIELD_U8:
		return 1;
	case RTS_FIELD_U32:
	case RTS_FIELD_I32:
		return 4;
	case RTS_FIELD_U64:
		return 8;
	case RTS_FIELD_STR:
		break;
	}
	const char *s;
	memcpy(&s, (const char *)payload + f->offset, sizeof(s));
	return 4 + (s ? strlen(s) : 0) + 1;
}

int rts_msg_encode(uint32_t type, const void *payload, struct rts_packet *out)
{
	rts_packet_clear(out);
	const struct rts_msg_desc *d = rts_msg_desc_of(type);
	if (!d)
		return -EINVAL;
	int fd = -1;
	if (d->has_fd)
		memcpy(&fd, (const char *)payload + d->fd_offset, sizeof(fd));
	cleanup_close int owned = fd;

	size_t total = HDR_LEN;
	for (size_t i = 0; i < d->n_fields; i++) {
		const struct rts_field_desc *f = &d->fields[i];
		size_t n = field_size(f, payload);
		/* The peer would refuse it: do not send it. */
		if (f->kind == RTS_FIELD_STR && n - 5 > f->max)
			return -EMSGSIZE;
		total += n;
	}
	reserve(out, total);
	uint8_t *w = out->buf;
	uint32_t v = RTS_PROTO_VERSION;
	memcpy(w, &v, 4);
	memcpy(w + 4, &type, 4);
	w += HDR_LEN;
	for (size_t i = 0; i < d->n_fields; i++) {
		const struct rts_field_desc *f = &d->fields[i];
		const char *src = (const char *)payload + f->offset;
		if (f->kind == RTS_FIELD_STR) {
			const char *s;
			memcpy(&s, src, sizeof(s));
			uint32_t l = s ? (uint32_t)strlen(s) : 0;
			memcpy(w, &l, 4);
			memcpy(w + 4, s ? s : "", l);
			w[4 + l] = '\0';
			w += 4 + (size_t)l + 1;
		} else {
			size_t n = field_size(f, payload);
			memcpy(w, src, n);
			w += n;
		}
	}
	out->len = total;
	out->fd = steal_fd(&owned);
	return 0;
}

int rts_msg_header(const struct rts_packet *p, uint32_t *version, uint32_t *type)
{
	if (p->len < HDR_LEN)
		return -EBADMSG;
	memcpy(version, p->buf, 4);
	memcpy(type, p->buf + 4, 4);
	return 0;
}

int rts_msg_peer_version(const struct rts_packet *p, uint32_t *version)
{
	uint32_t v, type;
	if (rts_msg_header(p, &v, &type) < 0 || (type != RTS_MSG_HELLO && type != RTS_MSG_HELLO_OK) ||
	    p->len < HDR_LEN + 4)
		return -EBADMSG;
	memcpy(version, p->buf + HDR_LEN, 4);
	return 0;
}

int rts_msg_decode(struct rts_packet *in, uint32_t type, void *out)
{
	const struct rts_msg_desc *d = rts_msg_desc_of(type);
	uint32_t version, got;
	if (!d || rts_msg_header(in, &version, &got) < 0 || got != type || version != RTS_PROTO_VERSION)
		return -EBADMSG;
	size_t pos = HDR_LEN;
	for (size_t i = 0; i < d->n_fields; i++) {
		const struct rts_field_desc *f = &d->fields[i];
		char *dst = (char *)out + f->offset;
		size_t left = in->len - pos;
		if (f->kind != RTS_FIELD_STR) {
			size_t n = f->kind == RTS_FIELD_U8 ? 1 : f->kind == RTS_FIELD_U64 ? 8 : 4;
			if (n > left)
				return -EBADMSG;
			memcpy(dst, in->buf + pos, n);
			pos += n;
			continue;
		}
		uint32_t l;
		if (left < 4)
			return -EBADMSG;
		memcpy(&l, in->buf + pos, 4);
		pos += 4;
		left -= 4;
		/* Length, terminator and content are all checked against the packet, never
		 * trusted. */
		if (l > f->max || (size_t)l + 1 > left)
			return -EBADMSG;
		const char *s = (const char *)in->buf + pos;
		if (s[l] != '\0' || memchr(s, '\0', l) != NULL)
			return -EBADMSG;
		memcpy(dst, &s, sizeof(s));
		pos += (size_t)l + 1;
	}
	if (pos != in->len || d->has_fd != (in->fd >= 0))
		return -EBADMSG;
	if (d->has_fd) {
		int fd = steal_fd(&in->fd);
		memcpy((char *)out + d->fd_offset, &fd, sizeof(fd));
	}
	return 0;
}

int rts_packet_send(int sock, const struct rts_packet *p)
{
	struct iovec iov = {.iov_base = p->buf, .iov_len = p->len};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (p->fd >= 0) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = sizeof(control.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &p->fd, sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		return (size_t)n == p->len ? 0 : -EMSGSIZE;
	}
}

/* Close every fd in the control data: used when the packet is refused. */
static void close_all_fds(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

/* The size of the next packet, without taking it. 0 for end of file. */
static ssize_t next_size(int sock)
{
	char c;
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;
	/* MSG_TRUNC: the packet's real length (Linux 3.4 and later for SEQPACKET). Without
	 * msg_control the kernel leaves any fds queued with the packet. */
	do
		n = recvmsg(sock, &mh, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : n;
}

int rts_packet_recv(int sock, struct rts_packet *p)
{
	rts_packet_clear(p);
	ssize_t size = next_size(sock);
	if (size < 0)
		return (int)size;
	/* Grown to the packet; a packet over the maximum is still read (into the largest
	 * buffer) so that it is consumed and its fds are closed. */
	reserve(p, size == 0 ? 1 : (size_t)size > RTS_MSG_MAX ? RTS_MSG_MAX : (size_t)size);
	/* Room for a few fds, so a peer that sends too many is detected (and they are closed)
	 * rather than silently truncated. */
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} control;
	struct iovec iov = {.iov_base = p->buf, .iov_len = p->cap};
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (n == 0 && mh.msg_controllen == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		close_all_fds(&mh);
		return -EBADMSG;
	}
	int nfds = 0, bad = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) {
			bad = 1;
			continue;
		}
		nfds++;
	}
	if (bad || nfds > 1 || (size_t)n < HDR_LEN) {
		close_all_fds(&mh);
		return -EBADMSG;
	}
	if (nfds == 1)
		memcpy(&p->fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
	p->len = (size_t)n;
	return 0;
}

const char *rts_turn_status_word(enum rts_turn_status s)
{
	switch (s) {
	case RTS_TURN_OK:
		return "ok";
	case RTS_TURN_TIMEOUT:
		return "timeout";
	case RTS_TURN_CANCELLED:
		return "cancelled";
	case RTS_TURN_CLEANUP_FAILED:
		return "cleanup_failed";
	case RTS_TURN_ERROR:
	default:
		return "error";
	}
}
