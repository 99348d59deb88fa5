/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the daemon-link decoder (rts_msg_decode(), common/msg.h), which every
 * daemon runs on its peer's bytes before any handler sees them. The first input byte says
 * whether an fd came with the packet; the rest is the packet.
 *
 * Invariants. A packet is decoded as at most one type: the one its header names. A decoded
 * message's strings are within the packet, NUL-terminated, free of other NULs and within
 * their field's maximum; an fd is handed over exactly when the type carries one. Encoding
 * what was decoded gives the same bytes back (the wire form is canonical). HELLO and
 * HELLO_OK's version is readable whatever the header's version. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "common/msg.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > RTS_MSG_MAX)
		return 0;
	bool with_fd = data[0] & 1;
	struct rts_packet in = RTS_PACKET_INIT, out = RTS_PACKET_INIT;
	in.buf = malloc(size - 1 ? size - 1 : 1);
	memcpy(in.buf, data + 1, size - 1);
	in.len = in.cap = size - 1;

	uint32_t version = 0, type = 0, theirs;
	bool has_header = rts_msg_header(&in, &version, &type) == 0;
	if (rts_msg_peer_version(&in, &theirs) == 0)
		FUZZ_ASSERT(has_header && (type == RTS_MSG_HELLO || type == RTS_MSG_HELLO_OK));

	int decoded = 0;
	for (size_t k = 0; k < rts_msg_n_descs; k++) {
		const struct rts_msg_desc *d = &rts_msg_descs[k];
		in.fd = with_fd ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
		union rts_msg_payload u;
		memset(&u, 0, sizeof(u));
		if (rts_msg_decode(&in, d->type, &u) < 0) {
			rts_packet_clear(&in);
			continue;
		}
		decoded++;
		FUZZ_ASSERT(has_header && type == d->type && version == RTS_PROTO_VERSION);
		FUZZ_ASSERT(d->has_fd == with_fd && in.fd == -1);
		for (size_t i = 0; i < d->n_fields; i++) {
			const struct rts_field_desc *f = &d->fields[i];
			if (f->kind != RTS_FIELD_STR)
				continue;
			const char *s = *(const char **)((char *)&u + f->offset);
			FUZZ_ASSERT(s >= (const char *)in.buf && s < (const char *)in.buf + in.len);
			size_t n = strnlen(s, (size_t)((const char *)in.buf + in.len - s));
			FUZZ_ASSERT(s + n < (const char *)in.buf + in.len && n <= f->max);
		}
		/* Canonical: encoding it again gives the packet back (the fd moves along). */
		FUZZ_ASSERT(rts_msg_encode(d->type, &u, &out) == 0);
		FUZZ_ASSERT(out.len == in.len && memcmp(out.buf, in.buf, in.len) == 0);
		FUZZ_ASSERT((out.fd >= 0) == d->has_fd);
		rts_packet_clear(&out);
	}
	FUZZ_ASSERT(decoded <= 1);
	rts_packet_free(&in);
	rts_packet_free(&out);
	return 0;
}
