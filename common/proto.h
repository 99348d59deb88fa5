/* SPDX-License-Identifier: Apache-2.0 */
/* Every message exchanged between the daemons, in one place.
 *
 * Links: statd -> runnerd on runnerd.sock, runnerd -> brokerd on brokerd.sock. Both are
 * connected AF_UNIX SOCK_SEQPACKET sockets: one message per packet, at most RTS_MSG_MAX
 * bytes, file descriptors carried with SCM_RIGHTS inside the message they belong to.
 * The connecting side speaks first with RTS_MSG_HELLO; the listening side checks the peer's
 * uid with SO_PEERCRED (it must be the service account) and answers RTS_MSG_HELLO_OK.
 *
 * Requests have even numbers, answers odd. A message of a type the receiver does not
 * expect from that peer, with leftover bytes, a short field, an unterminated string or an
 * unexpected fd is a protocol violation: the receiver logs it and drops the peer.
 *
 * Bump RTS_PROTO_VERSION whenever a message or its payload below changes. */
#ifndef RTS_PROTO_H
#define RTS_PROTO_H

/* RTS_CHANNEL_MAX, RTS_TEXT_MAX, RTS_TURN_ID_LEN, ...: the field bounds below. */
#include "common/limits.h"

#define RTS_PROTO_VERSION 1u

/* Largest packet on either link. The biggest payload is a TURN_RUN carrying a guest
 * message of up to RTS_TEXT_MAX bytes; this leaves ample room for the other fields and
 * stays below the default AF_UNIX send buffer (212992 bytes). */
#define RTS_MSG_MAX (128u * 1024u)

enum rts_msg_type {
	/* Both links. */
	RTS_MSG_HELLO = 2,    /* u32 version, str program  */
	RTS_MSG_HELLO_OK = 3, /* u32 version               */

	/* statd -> runnerd */
	RTS_MSG_TURN_RUN = 10,
	/*   str turn_id        16 lowercase hex digits, chosen by statd
	 *   str channel        the channel key (opaque, 1..RTS_CHANNEL_MAX bytes)
	 *   str channel_hash   64 hex digits, sha256 of the channel key
	 *   str speaker_id
	 *   str speaker_name
	 *   str principal_id   never sent into the container; brokerd binds it
	 *   str text           the guest's message, at most RTS_TEXT_MAX bytes
	 *   u32 attachments    count only; attachments are not downloaded
	 *   u8  start_fresh    1 when a fresh start is pending for the channel
	 *   str workspace      absolute path of the verified workspace dir
	 *   fd                 O_PATH|O_DIRECTORY fd of that same dir */
	RTS_MSG_TURN_DONE = 11,
	/*   str turn_id
	 *   u32 status         enum rts_turn_status
	 *   str reply          the reply text when status is RTS_TURN_OK, else "" */
	RTS_MSG_TURN_CANCEL = 12,
	/*   str turn_id        ends the turn like its deadline would; a TURN_DONE with
	 *                      RTS_TURN_CANCELLED follows. Unknown ids are ignored. */

	/* runnerd -> brokerd */
	RTS_MSG_BROKER_BIND = 20,
	/*   str turn_id
	 *   str channel
	 *   str channel_hash
	 *   str speaker_id
	 *   str speaker_name
	 *   str principal_id
	 *   u64 deadline_ms    CLOCK_MONOTONIC milliseconds when the turn ends
	 *   fd                 the listening SOCK_STREAM socket bound at runRoot/<turn>/broker.sock */
	RTS_MSG_BROKER_BOUND = 21,
	/*   str turn_id
	 *   i32 result         0, or a negative errno when brokerd refused the binding */
	RTS_MSG_BROKER_CLOSE = 22,
	/*   str turn_id        brokerd aborts in-flight upstream calls and tool processes,
	 *                      closes the listener and forgets the turn */
	RTS_MSG_BROKER_CLOSED = 23,
	/*   str turn_id
	 *   u32 calls          broker calls the turn made, refused ones included */
};

enum rts_turn_status {
	RTS_TURN_OK = 0,
	RTS_TURN_ERROR = 1,	     /* the worker or the broker failed; generic to the guest */
	RTS_TURN_TIMEOUT = 2,	     /* turnTimeoutMs passed */
	RTS_TURN_CANCELLED = 3,	     /* cancel operation or shutdown */
	RTS_TURN_CLEANUP_FAILED = 4, /* the container could not be removed: operator must look */
	RTS_TURN_STATUS_MAX_ = 5,
};

/* The only credential a worker ever holds; brokerd accepts exactly this bearer token and
 * replaces it with the real key. It is public by design. */
#define RTS_DUMMY_KEY "roundtable-sandbox-dummy-key"

#endif
