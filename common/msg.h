/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon-link messages as C: one struct and one strict encode/decode pair per row of
 * RTS_PROTO_MESSAGES (common/proto.h, which also gives the wire layout), and sending or
 * receiving one SEQPACKET packet with at most one fd.
 *
 * Only common/link.c calls the generic functions; daemons use the typed sends of
 * common/link.h and get decoded structs in their handlers. */
#ifndef RTS_MSG_H
#define RTS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"

/* ---- one struct per message ---- */

#define RTS_MSG_CTYPE_U8 uint8_t
#define RTS_MSG_CTYPE_U32 uint32_t
#define RTS_MSG_CTYPE_I32 int32_t
#define RTS_MSG_CTYPE_U64 uint64_t
/* Decoded: points into the received packet, valid while the handler runs. Encoded: any
 * NUL-terminated string no longer than the field's maximum (NULL is sent as ""). */
#define RTS_MSG_CTYPE_STR const char *
#define RTS_MSG_MEMBER_(X, KIND, name, max) RTS_MSG_CTYPE_##KIND name;
/* The carried fd. Encoding moves it into the packet; a decoded one belongs to the handler
 * if it takes it (steal_fd), else it is closed after the handler returns. */
#define RTS_MSG_FD_MEMBER_0
#define RTS_MSG_FD_MEMBER_1 int fd;
#define RTS_MSG_STRUCT_(NAME, name, number, link, dir, has_fd) \
	struct rts_msg_##name {                                \
		RTS_PROTO_FIELDS_##NAME(RTS_MSG_MEMBER_, ~)   \
		RTS_MSG_FD_MEMBER_##has_fd                     \
	};
RTS_PROTO_MESSAGES(RTS_MSG_STRUCT_)

#define RTS_MSG_UNION_MEMBER_(NAME, name, number, link, dir, has_fd) struct rts_msg_##name name;
union rts_msg_payload {
	RTS_PROTO_MESSAGES(RTS_MSG_UNION_MEMBER_)
};

/* ---- the table as data (for the generic code, the unit tests and proto-dump) ---- */

enum rts_field_kind {
	RTS_FIELD_U8,
	RTS_FIELD_U32,
	RTS_FIELD_I32,
	RTS_FIELD_U64,
	RTS_FIELD_STR,
};

struct rts_field_desc {
	const char *name;
	enum rts_field_kind kind;
	uint32_t max;  /* STR: bytes, NUL excluded; 0 for integers */
	size_t offset; /* in the message's struct */
};

struct rts_msg_desc {
	uint32_t type;
	const char *name; /* "TURN_RUN" */
	enum rts_proto_link link;
	enum rts_proto_dir dir;
	bool has_fd;
	size_t fd_offset; /* of the struct's int fd, when has_fd */
	const struct rts_field_desc *fields;
	size_t n_fields;
};

/* Every message, in table order. */
extern const struct rts_msg_desc rts_msg_descs[];
extern const size_t rts_msg_n_descs;

/* The row of type, or NULL for a type the table does not have. */
const struct rts_msg_desc *rts_msg_desc_of(uint32_t type);
/* "TURN_RUN", or "unknown" (static). */
const char *rts_msg_name(uint32_t type);

/* ---- packets ---- */

/* One packet as sent or received. buf grows to the largest packet seen (at most
 * RTS_MSG_MAX) and is reused; fd is owned (-1: none). */
struct rts_packet {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int fd;
};

#define RTS_PACKET_INIT {.buf = NULL, .len = 0, .cap = 0, .fd = -1}
/* Close a carried fd and forget the contents; the buffer stays for reuse. */
void rts_packet_clear(struct rts_packet *p);
/* rts_packet_clear and free the buffer. Safe on RTS_PACKET_INIT. */
void rts_packet_free(struct rts_packet *p);

/* Encode payload (the struct of type) into out, which is cleared first and sized to the
 * packet. Takes over the payload's fd, if the type carries one, whatever the result (out
 * owns it on success; it is closed on failure). Returns 0; -EINVAL for a type the table
 * does not have; -EMSGSIZE when a string is longer than its field's maximum. */
int rts_msg_encode(uint32_t type, const void *payload, struct rts_packet *out);

/* The header of a received packet. -EBADMSG when it is shorter than a header. */
int rts_msg_header(const struct rts_packet *p, uint32_t *version, uint32_t *type);

/* For HELLO and HELLO_OK only: the version field, read whatever the header's version is
 * (proto.h: it is the first field in every version). -EBADMSG when it is missing. */
int rts_msg_peer_version(const struct rts_packet *p, uint32_t *version);

/* Decode in as a message of type into out (that type's struct). Strings point into
 * in->buf; a carried fd moves from in into out. Returns 0 or -EBADMSG: another type or
 * header version, a short field, a string too long for its field, unterminated or with a
 * NUL inside, leftover bytes, no fd for a type that carries one, an fd for one that does
 * not. */
int rts_msg_decode(struct rts_packet *in, uint32_t type, void *out);

/* Send one packet with its fd (which p keeps). Returns 0, -EAGAIN on a full non-blocking
 * socket, -EMSGSIZE when the kernel took less than all, or -errno from sendmsg. */
int rts_packet_send(int sock, const struct rts_packet *p);

/* Receive one packet into p (cleared first). Returns 0; -EAGAIN when nothing is waiting on a
 * non-blocking socket; -ECONNRESET when the peer closed; -EBADMSG for a packet larger than
 * RTS_MSG_MAX or shorter than a header, truncated control data (MSG_CTRUNC), control data
 * other than SCM_RIGHTS or more than one fd; every fd that arrived with a refused packet is
 * closed. Received fds are close-on-exec. */
int rts_packet_recv(int sock, struct rts_packet *p);

/* ---- typed pairs ---- */

#define RTS_MSG_TYPED_(NAME, name, number, link, dir, has_fd)                                      \
	static inline int rts_msg_encode_##name(const struct rts_msg_##name *m, struct rts_packet *out) \
	{                                                                                          \
		return rts_msg_encode(RTS_MSG_##NAME, m, out);                                     \
	}                                                                                          \
	static inline int rts_msg_decode_##name(struct rts_packet *in, struct rts_msg_##name *m)   \
	{                                                                                          \
		return rts_msg_decode(in, RTS_MSG_##NAME, m);                                      \
	}
RTS_PROTO_MESSAGES(RTS_MSG_TYPED_)

/* The word log lines give a turn's status (rts_log_turn's outcome): "ok", "timeout",
 * "cancelled", "cleanup_failed" or "error" (static). */
const char *rts_turn_status_word(enum rts_turn_status s);

#endif
