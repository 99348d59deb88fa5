/* SPDX-License-Identifier: Apache-2.0 */
/* Typed marshalling for the daemon links (see proto.h), and sending/receiving one
 * SEQPACKET packet with an optional fd.
 *
 * Wire layout: u32 version, u32 type, then the payload fields in order. Integers are in
 * host byte order (both ends are on one host). A string is u32 length, the bytes, and a
 * terminating NUL that the reader checks; embedded NULs are refused. */
#ifndef RTS_MSG_H
#define RTS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rts_msg {
	uint32_t type;
	uint8_t *buf; /* RTS_MSG_MAX bytes, owned */
	size_t len;   /* bytes in buf */
	size_t pos;   /* read cursor */
	int fd;	      /* fd carried by the message or -1; owned until taken */
	bool overflow; /* a put did not fit: sending fails with -EMSGSIZE */
};

/* Start a message of the given type for sending. Never fails (aborts on OOM). */
void rts_msg_init(struct rts_msg *m, uint32_t type);
/* Free the buffer and close a carried fd that was not taken. Safe on a zeroed msg. */
void rts_msg_release(struct rts_msg *m);

void rts_msg_put_u8(struct rts_msg *m, uint8_t v);
void rts_msg_put_u32(struct rts_msg *m, uint32_t v);
void rts_msg_put_i32(struct rts_msg *m, int32_t v);
void rts_msg_put_u64(struct rts_msg *m, uint64_t v);
/* s must not contain NUL; NULL is sent as "". */
void rts_msg_put_str(struct rts_msg *m, const char *s);
/* Attach fd to the message, which takes ownership: rts_msg_release() closes it (after
 * rts_msg_send() the receiver has its own copy). At most one fd per message. */
void rts_msg_put_fd(struct rts_msg *m, int fd);

/* Getters return 0 or -EBADMSG when the field is missing or malformed. A string getter
 * stores a pointer into m->buf, valid until rts_msg_release(). max_len bounds the string
 * (bytes, excluding the NUL); longer strings are -EBADMSG. */
int rts_msg_get_u8(struct rts_msg *m, uint8_t *v);
int rts_msg_get_u32(struct rts_msg *m, uint32_t *v);
int rts_msg_get_i32(struct rts_msg *m, int32_t *v);
int rts_msg_get_u64(struct rts_msg *m, uint64_t *v);
int rts_msg_get_str(struct rts_msg *m, const char **s, size_t max_len);
/* Take the carried fd (caller owns it). -EBADMSG when the message carried none. */
int rts_msg_take_fd(struct rts_msg *m, int *fd);
/* -EBADMSG when bytes are left over or an fd arrived that no getter took. */
int rts_msg_end(struct rts_msg *m);

/* Send one packet. Returns 0, -EMSGSIZE after an overflowing put, or -errno from
 * sendmsg (-EAGAIN on a full non-blocking socket). The message still owns its fd. */
int rts_msg_send(int sock, const struct rts_msg *m);

/* Receive one packet into m (which must be released afterwards, whatever the result).
 * Returns 0; -ECONNRESET when the peer closed; -EAGAIN when nothing is waiting on a
 * non-blocking socket; -EBADMSG for a truncated packet, a truncated or foreign control
 * message, more than one fd, a short header or a version mismatch (any fds that arrived
 * are closed). */
int rts_msg_recv(int sock, struct rts_msg *m);

/* One entry of a dispatch table; the handler owns nothing in m beyond the call. */
struct rts_dispatch {
	uint32_t type;
	int (*handler)(void *ctx, struct rts_msg *m);
};

/* Call the handler for m->type from a table terminated by {0, NULL}. Returns the
 * handler's result, or -EPROTO for a type the table does not list (fail closed: the
 * caller drops the peer). */
int rts_dispatch(const struct rts_dispatch *table, void *ctx, struct rts_msg *m);

#endif
