/* SPDX-License-Identifier: Apache-2.0 */
/* Every message exchanged between the daemons, in one table.
 *
 * Links: statd -> runnerd on runnerd.sock, runnerd -> brokerd on brokerd.sock. Both are
 * connected AF_UNIX SOCK_SEQPACKET sockets: one message per packet, at most RTS_MSG_MAX
 * bytes, a file descriptor carried with SCM_RIGHTS inside the message it belongs to. The
 * connecting side speaks first with HELLO; the listening side checks its peer with
 * SO_PEERCRED before reading a byte and answers HELLO_OK (common/link.h runs all of it).
 *
 * RTS_PROTO_MESSAGES below is the only description of the messages. common/msg.h makes a
 * struct and a strict encoder/decoder pair of each row; common/link.h a typed handler slot
 * and a typed send; tests/unit/check-rtsproto.py compares the Python harness's copy
 * (tests/integration/rtsproto.py) with it. Nothing marshals a message by hand.
 *
 * Wire layout: u32 version (RTS_PROTO_VERSION of the sender), u32 type, then the fields in
 * table order. Integers are in host byte order (both ends are on one host). A string is a
 * u32 length, the bytes and a NUL; the receiver checks the length against the field's
 * maximum and the packet, the NUL, and that no other NUL is inside. A message of a type the
 * receiver does not expect from that peer in that state, a header of another version
 * (HELLO and HELLO_OK aside, see below), a short field, leftover bytes, a missing fd or an
 * fd the type does not carry is a protocol violation: the receiver logs it and drops the
 * peer.
 *
 * Version negotiation: HELLO and HELLO_OK begin with u32 version in every version of the
 * protocol, and a receiver reads that field whatever the header says. When the versions
 * differ, both sides log one line naming both versions and asking for matching releases;
 * the listening side still answers HELLO_OK (with its own version) so that the connecting
 * side can say so too, then both drop the link.
 *
 * Requests (connecting side to listening side) have even numbers, answers odd
 * (_Static_assert in common/msg.c). Bump RTS_PROTO_VERSION whenever a row, a field or a
 * field's maximum changes, and say so in tests/integration/rtsproto.py (make check
 * compares the two). */
#ifndef RTS_PROTO_H
#define RTS_PROTO_H

/* RTS_CHANNEL_MAX, RTS_TEXT_MAX, RTS_TURN_ID_LEN, ...: the field bounds below. */
#include "common/ids.h"
#include "common/limits.h"

/* 2: HELLO_OK names its program too; HELLO's and HELLO_OK's version field became the one
 * field every version keeps.
 * 3: METRICS, METRICS_TEXT, BROKER_METRICS, BROKER_METRICS_TEXT (issue 15); the precheck
 * runner (DESIGN.md 8.3): PRECHECK_RUN, PRECHECK_DONE, PRECHECK_CANCEL on runnerd.sock and
 * PRECHECK_BIND on brokerd.sock. */
#define RTS_PROTO_VERSION 3u

/* Largest packet on either link. The biggest payload is a TURN_RUN carrying a guest
 * message of up to RTS_TEXT_MAX bytes; this leaves ample room for the other fields and
 * stays below the default AF_UNIX send buffer (212992 bytes). Buffers are sized to the
 * packet, not to this. */
#define RTS_MSG_MAX (128u * 1024u)

/* The programs that say HELLO and HELLO_OK; each listening side accepts only the program
 * its link is for. */
#define RTS_PROGRAM_STATD "roundtable-sandbox-statd"
#define RTS_PROGRAM_RUNNERD "roundtable-sandbox-runnerd"
#define RTS_PROGRAM_BROKERD "roundtable-sandbox-brokerd"
#define RTS_PROGRAM_NAME_MAX 64u

/* The workspace path in TURN_RUN: an absolute path, at most PATH_MAX bytes. */
#define RTS_PROTO_PATH_MAX 4096u

/* Which link a message travels on, and which way. */
enum rts_proto_link {
	RTS_PROTO_LINK_ANY = 0,	    /* HELLO, HELLO_OK */
	RTS_PROTO_LINK_RUNNERD = 1, /* runnerd.sock: statd connects, runnerd listens */
	RTS_PROTO_LINK_BROKERD = 2, /* brokerd.sock: runnerd connects, brokerd listens */
};
enum rts_proto_dir {
	RTS_PROTO_TO_LISTENER = 0,  /* a request: even type */
	RTS_PROTO_TO_CONNECTOR = 1, /* an answer: odd type */
};

/* Field kinds: U8, U32, I32, U64 (the max column is 0), STR (max: bytes, NUL excluded). */

/* Fields of each message: F(X, KIND, name, max), in wire order; X is handed through to F
 * untouched (the code that expands a row passes what its F needs, e.g. the struct). */
#define RTS_PROTO_FIELDS_HELLO(F, X)                                                        \
	F(X, U32, version, 0) /* the sender's RTS_PROTO_VERSION: first in every version */ \
	F(X, STR, program, RTS_PROGRAM_NAME_MAX) /* RTS_PROGRAM_STATD or _RUNNERD */
#define RTS_PROTO_FIELDS_HELLO_OK(F, X) \
	F(X, U32, version, 0)           \
	F(X, STR, program, RTS_PROGRAM_NAME_MAX) /* RTS_PROGRAM_RUNNERD or _BROKERD */
/* statd -> runnerd: run a turn. fd: O_PATH|O_DIRECTORY of the verified workspace, the
 * same directory as workspace. */
#define RTS_PROTO_FIELDS_TURN_RUN(F, X)                                                                  \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)	 /* 16 lowercase hex digits, chosen by statd */      \
	F(X, STR, channel, RTS_CHANNEL_MAX)	 /* the channel key (opaque, 1..RTS_CHANNEL_MAX) */  \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) /* 64 hex digits, sha256 of the channel key */      \
	F(X, STR, speaker_id, RTS_SPEAKER_FIELD_MAX)                                                     \
	F(X, STR, speaker_name, RTS_SPEAKER_FIELD_MAX)                                                   \
	F(X, STR, principal_id, RTS_SPEAKER_FIELD_MAX) /* never sent into the container */              \
	F(X, STR, text, RTS_TEXT_MAX)		     /* the guest's message */                           \
	F(X, U32, attachments, 0)			     /* count only; attachments are not downloaded */    \
	F(X, U8, start_fresh, 0)			     /* 1 when a fresh start is pending */               \
	F(X, STR, workspace, RTS_PROTO_PATH_MAX)	     /* absolute path of the verified workspace */
/* runnerd -> statd: the turn ended. status: enum rts_turn_status; reply is "" unless
 * status is RTS_TURN_OK. */
#define RTS_PROTO_FIELDS_TURN_DONE(F, X)  \
	F(X, STR, turn_id, RTS_TURN_ID_LEN) \
	F(X, U32, status, 0)                \
	F(X, STR, reply, RTS_REPLY_MAX)
/* statd -> runnerd: end the turn like its deadline would; a TURN_DONE with
 * RTS_TURN_CANCELLED follows. Unknown ids are ignored. */
#define RTS_PROTO_FIELDS_TURN_CANCEL(F, X) F(X, STR, turn_id, RTS_TURN_ID_LEN)
/* runnerd -> brokerd: serve a turn. fd: the listening SOCK_STREAM socket bound at
 * runRoot/<turn>/broker.sock. deadline_ms: CLOCK_MONOTONIC milliseconds when the turn
 * ends. */
#define RTS_PROTO_FIELDS_BROKER_BIND(F, X)             \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)              \
	F(X, STR, channel, RTS_CHANNEL_MAX)              \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN)        \
	F(X, STR, speaker_id, RTS_SPEAKER_FIELD_MAX)     \
	F(X, STR, speaker_name, RTS_SPEAKER_FIELD_MAX)   \
	F(X, STR, principal_id, RTS_SPEAKER_FIELD_MAX)   \
	F(X, U64, deadline_ms, 0)
/* brokerd -> runnerd: result is 0, or a negative errno when brokerd refused the binding
 * (HACKING.md lists them). */
#define RTS_PROTO_FIELDS_BROKER_BOUND(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)   \
	F(X, I32, result, 0)
/* runnerd -> brokerd: abort in-flight upstream calls and tool processes, close the
 * listener and forget the turn. */
#define RTS_PROTO_FIELDS_BROKER_CLOSE(F, X) F(X, STR, turn_id, RTS_TURN_ID_LEN)
/* brokerd -> runnerd: calls is the broker calls the turn made, refused ones included. */
#define RTS_PROTO_FIELDS_BROKER_CLOSED(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)    \
	F(X, U32, calls, 0)

/* ---- metrics (issue 15, DESIGN.md 8.4): `roundtable-sandbox metrics` ----
 * statd asks runnerd, runnerd asks brokerd; each daemon renders its own Prometheus text
 * (common/metrics.h lists which families are whose) and statd joins them. A text is
 * printable ASCII and newlines only, at most RTS_METRICS_TEXT_MAX bytes, and checked for
 * that on receipt (anything else is a protocol violation). seq is the asker's number for
 * the request, echoed in the answer: an answer with another seq (a request that timed
 * out) is ignored. */
#define RTS_METRICS_TEXT_MAX (32u * 1024u)
/* statd -> runnerd. */
#define RTS_PROTO_FIELDS_METRICS(F, X) F(X, U32, seq, 0)
/* runnerd -> statd: runnerd's text, and brokerd's when brokerd_up is 1 (else "").
 * brokerd_link: 1 when runnerd's link to brokerd is up. */
#define RTS_PROTO_FIELDS_METRICS_TEXT(F, X)      \
	F(X, U32, seq, 0)                          \
	F(X, U8, brokerd_link, 0)                  \
	F(X, U8, brokerd_up, 0)                    \
	F(X, STR, runnerd, RTS_METRICS_TEXT_MAX)  \
	F(X, STR, brokerd, RTS_METRICS_TEXT_MAX)
/* runnerd -> brokerd, and brokerd's answer. */
#define RTS_PROTO_FIELDS_BROKER_METRICS(F, X) F(X, U32, seq, 0)
#define RTS_PROTO_FIELDS_BROKER_METRICS_TEXT(F, X) \
	F(X, U32, seq, 0)                            \
	F(X, STR, text, RTS_METRICS_TEXT_MAX)
#define RTS_PROTO_MESSAGES_METRICS(M)                                                                \
	M(METRICS, metrics, 70, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0)                      \
	M(METRICS_TEXT, metrics_text, 71, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0)           \
	M(BROKER_METRICS, broker_metrics, 72, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0)        \
	M(BROKER_METRICS_TEXT, broker_metrics_text, 73, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0)

/* ---- The precheck runner (DESIGN.md 8.3; HACKING.md "Precheck runtime"). A precheck is
 * a one-shot sealed container like a turn, and runnerd runs it as a turn of another kind:
 * its id is a turn id (16 lowercase hex digits from statd) and names its container the
 * same way; brokerd answers PRECHECK_BIND with BROKER_BOUND and closes it with
 * BROKER_CLOSE / BROKER_CLOSED like a turn. ---- */

/* statd -> runnerd: run a precheck script. No fd: runnerd makes the run's empty workspace
 * itself. tier is "" when the run has none; approved holds the approvals joined by '\n'
 * (common/precheck.h); schedule is JSON text, handed to the script as given. */
#define RTS_PROTO_FIELDS_PRECHECK_RUN(F, X)                                    \
	F(X, STR, precheck_id, RTS_TURN_ID_LEN)                                \
	F(X, STR, channel, RTS_CHANNEL_MAX)                                    \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN)                              \
	F(X, STR, target, RTS_PRECHECK_TARGET_MAX)                             \
	F(X, STR, tier, RTS_SPEAKER_FIELD_MAX)                                 \
	F(X, STR, script, RTS_PRECHECK_SCRIPT_MAX)                             \
	F(X, STR, approved, RTS_PRECHECK_APPROVED_TEXT_MAX)                    \
	F(X, STR, fired_at, RTS_PRECHECK_FIRED_AT_MAX)                         \
	F(X, STR, time_zone, RTS_TIME_ZONE_MAX)                                \
	F(X, STR, today, RTS_PRECHECK_TODAY_LEN)                               \
	F(X, STR, schedule, RTS_PRECHECK_SCHEDULE_MAX)
/* runnerd -> statd: the precheck ended. status: enum rts_turn_status; answer (enum
 * rts_precheck_answer) and text only when status is RTS_TURN_OK, else 0 and "". text: the
 * note, the context or the script's error, as the harness wrote it. */
#define RTS_PROTO_FIELDS_PRECHECK_DONE(F, X)    \
	F(X, STR, precheck_id, RTS_TURN_ID_LEN) \
	F(X, U32, status, 0)                    \
	F(X, U32, answer, 0)                    \
	F(X, STR, text, RTS_PRECHECK_CONTEXT_MAX)
/* statd -> runnerd: end the precheck like its deadline would, with RTS_TURN_CANCELLED.
 * Unknown ids are ignored. */
#define RTS_PROTO_FIELDS_PRECHECK_CANCEL(F, X) F(X, STR, precheck_id, RTS_TURN_ID_LEN)
/* runnerd -> brokerd: serve a precheck. fd: the listening SOCK_STREAM socket bound at
 * <precheck runRoot>/precheck-<id>/broker/broker.sock. brokerd resolves the grant from its
 * own config (channel, target, tier): no URL or key source ever travels here. */
#define RTS_PROTO_FIELDS_PRECHECK_BIND(F, X)                 \
	F(X, STR, precheck_id, RTS_TURN_ID_LEN)              \
	F(X, STR, channel, RTS_CHANNEL_MAX)                  \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN)            \
	F(X, STR, target, RTS_PRECHECK_TARGET_MAX)           \
	F(X, STR, tier, RTS_SPEAKER_FIELD_MAX)               \
	F(X, STR, approved, RTS_PRECHECK_APPROVED_TEXT_MAX)  \
	F(X, U64, deadline_ms, 0)

/* The worst case of a message on the wire: the header, then each field at its maximum (a
 * string is its u32 length, its bytes and a NUL). */
#define RTS_PROTO_WIRE_U8(max) 1u
#define RTS_PROTO_WIRE_U32(max) 4u
#define RTS_PROTO_WIRE_I32(max) 4u
#define RTS_PROTO_WIRE_U64(max) 8u
#define RTS_PROTO_WIRE_STR(max) (4u + (max) + 1u)
#define RTS_PROTO_WIRE_FIELD_(X, KIND, name, max) +RTS_PROTO_WIRE_##KIND(max)
_Static_assert(8u RTS_PROTO_FIELDS_PRECHECK_RUN(RTS_PROTO_WIRE_FIELD_, ~) <= RTS_MSG_MAX,
	       "every PRECHECK_RUN statd can send must fit one packet");
_Static_assert(8u RTS_PROTO_FIELDS_PRECHECK_BIND(RTS_PROTO_WIRE_FIELD_, ~) <= RTS_MSG_MAX,
	       "every PRECHECK_BIND runnerd can send must fit one packet");

/* PRECHECK_DONE's answer: A(NAME, value). */
#define RTS_PROTO_PRECHECK_ANSWERS(A)                                    \
	A(SLEEP, 0)	   /* {wake:false} */                             \
	A(NOTE, 1)	   /* {wake:false, note: text} */                 \
	A(CONTEXT, 2)	   /* {wake:true, context: text} */               \
	A(SCRIPT_ERROR, 3) /* {wake:true, error: text}: the harness's own words */

#define RTS_PROTO_ANSWER_ROW_(NAME, value) RTS_PRECHECK_##NAME = (value),
enum rts_precheck_answer {
	RTS_PROTO_PRECHECK_ANSWERS(RTS_PROTO_ANSWER_ROW_)
	RTS_PRECHECK_ANSWER_MAX_ = 4,
};
#undef RTS_PROTO_ANSWER_ROW_

/* M(NAME, name, type number, link, direction, carries an fd (0 or 1)). */
#define RTS_PROTO_MESSAGES(M)                                                            \
	M(HELLO, hello, 2, RTS_PROTO_LINK_ANY, RTS_PROTO_TO_LISTENER, 0)                   \
	M(HELLO_OK, hello_ok, 3, RTS_PROTO_LINK_ANY, RTS_PROTO_TO_CONNECTOR, 0)            \
	M(TURN_RUN, turn_run, 10, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 1)        \
	M(TURN_DONE, turn_done, 11, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0)     \
	M(TURN_CANCEL, turn_cancel, 12, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0)  \
	M(BROKER_BIND, broker_bind, 20, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 1)  \
	M(BROKER_BOUND, broker_bound, 21, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(BROKER_CLOSE, broker_close, 22, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(BROKER_CLOSED, broker_closed, 23, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0) \
	/* the precheck runner */                                                          \
	M(PRECHECK_RUN, precheck_run, 60, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0) \
	M(PRECHECK_DONE, precheck_done, 61, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(PRECHECK_CANCEL, precheck_cancel, 62, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0) \
	M(PRECHECK_BIND, precheck_bind, 64, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 1) \
	RTS_PROTO_MESSAGES_METRICS(M)

#define RTS_PROTO_ENUM_ROW_(NAME, name, number, link, dir, fd) RTS_MSG_##NAME = (number),
enum rts_msg_type {
	RTS_PROTO_MESSAGES(RTS_PROTO_ENUM_ROW_)
};
#undef RTS_PROTO_ENUM_ROW_

/* TURN_DONE's status: S(NAME, value). */
#define RTS_PROTO_TURN_STATUSES(S)                                                              \
	S(OK, 0)								       \
	S(ERROR, 1)	     /* the worker or the broker failed; generic to the guest */           \
	S(TIMEOUT, 2)	     /* turnTimeoutMs passed */                                            \
	S(CANCELLED, 3)	     /* cancel operation or shutdown */                                    \
	S(CLEANUP_FAILED, 4) /* the container could not be removed: operator must look */

#define RTS_PROTO_STATUS_ROW_(NAME, value) RTS_TURN_##NAME = (value),
enum rts_turn_status {
	RTS_PROTO_TURN_STATUSES(RTS_PROTO_STATUS_ROW_)
	RTS_TURN_STATUS_MAX_ = 5,
};
#undef RTS_PROTO_STATUS_ROW_

/* The only credential a worker ever holds; brokerd accepts exactly this bearer token and
 * replaces it with the real key. It is public by design. */
#define RTS_DUMMY_KEY "roundtable-sandbox-dummy-key"

#endif
