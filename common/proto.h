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
 * PRECHECK_BIND on brokerd.sock.
 * 4: SPARE_DROP and SPARE_STATE (warm spares, issue 15) on runnerd.sock; rich mode (DESIGN.md 8.5): the
 * RICH_* and BROKER_RICH_* / BROKER_ATTACH_* messages of brokerd.sock, the RICH_* and
 * ATTACH_* messages of runnerd.sock; payloads too big for a packet travel as sealed memfds
 * (common/memfd.h). */
#define RTS_PROTO_VERSION 4u

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
/* statd -> runnerd: the channel was turned off or cancelled: discard its warm spare, if
 * any (DESIGN.md 8.4; runnerd/spare.h). No answer. */
#define RTS_PROTO_FIELDS_SPARE_DROP(F, X) F(X, STR, channel_hash, RTS_HASH_HEX_LEN)
/* runnerd -> statd: the channels whose warm spare is ready, for `status` and `channels`
 * (issue 15): their hashes, RTS_HASH_HEX_LEN lowercase hex digits each, one after the
 * other, at most "warmSparesMax" of them. The whole set, after HELLO and whenever it
 * changed; statd replaces what it had, and forgets it when the link goes. */
#define RTS_SPARES_READY_MAX (RTS_WARM_SPARES_CAP_MAX * RTS_HASH_HEX_LEN)
#define RTS_PROTO_FIELDS_SPARE_STATE(F, X) F(X, STR, ready, RTS_SPARES_READY_MAX)
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

/* ---- Rich mode on runnerd.sock (DESIGN.md 8.5). statd keeps the mode and the queue;
 * runnerd keeps one long-lived container per rich channel and relays turns and attachment
 * fetches to brokerd. Requests may be outstanding side by side; every answer names what
 * it answers. ---- */

/* statd -> runnerd, after every HELLO once the rich channels were ensured (a RICH_ENSURE
 * each, sent before this on the same link): the sync is complete. runnerd then removes
 * every rich container of this installation whose channel no RICH_ENSURE of this link
 * claimed (the channel is no longer rich, or its profile is gone). channels: how many
 * RICH_ENSUREs the sync sent (for the log line). */
#define RTS_PROTO_FIELDS_RICH_SYNC(F, X) F(X, U32, channels, 0)
/* runnerd -> statd: removed: the containers the sync removes. */
#define RTS_PROTO_FIELDS_RICH_SYNCED(F, X) F(X, U32, removed, 0)
/* statd -> runnerd: make sure the channel's container runs the current generation (the
 * profile, the rich config, the image ID): adopt a running one, replace a stale one or
 * start one, and wait for its worker to announce itself within rich.startTimeoutMs. fd:
 * O_PATH|O_DIRECTORY of the verified workspace, the same directory as workspace. seq:
 * statd's number for the request, echoed in its RICH_STATE. */
#define RTS_PROTO_FIELDS_RICH_ENSURE(F, X)      \
	F(X, U32, seq, 0)                         \
	F(X, STR, channel, RTS_CHANNEL_MAX)       \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, STR, profile, RTS_NAME_MAX)          \
	F(X, STR, workspace, RTS_PROTO_PATH_MAX)
/* statd -> runnerd: stop the channel's container: unbind it at brokerd, docker rm -f the
 * exact name, remove its broker directory. reason: RTS_RICH_STOP_*. A channel without a
 * container is answered STOPPED. */
#define RTS_PROTO_FIELDS_RICH_STOP(F, X)        \
	F(X, U32, seq, 0)                         \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, U32, reason, 0)
/* runnerd -> statd: the answer to RICH_ENSURE or RICH_STOP seq: state RTS_RICH_STATE_*,
 * error 0 or a negative errno saying why it FAILED. */
#define RTS_PROTO_FIELDS_RICH_STATE(F, X)       \
	F(X, U32, seq, 0)                         \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, U32, state, 0)                       \
	F(X, I32, error, 0)
/* statd -> runnerd: run a turn on the channel's container (statd sends a RICH_ENSURE
 * before every turn; the turn waits for it). runnerd arms rich.turnTimeoutMs and relays
 * the turn to brokerd; TURN_CANCEL cancels it and force-removes the container. fd: sealed
 * memfd with the turn input JSON (at most RTS_RICH_TURN_INPUT_MAX bytes), relayed unread. */
#define RTS_PROTO_FIELDS_RICH_TURN(F, X)             \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)            \
	F(X, STR, channel, RTS_CHANNEL_MAX)            \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN)      \
	F(X, STR, speaker_id, RTS_SPEAKER_FIELD_MAX)   \
	F(X, STR, speaker_name, RTS_SPEAKER_FIELD_MAX) \
	F(X, STR, principal_id, RTS_SPEAKER_FIELD_MAX) \
	F(X, STR, profile, RTS_NAME_MAX)
/* runnerd -> statd: the rich turn ended. status: enum rts_turn_status; calls: brokerd's
 * count. fd: sealed memfd with the reply JSON {"text","files"} (at most
 * RTS_RICH_REPLY_MAX bytes) relayed unread, empty unless status is OK. */
#define RTS_PROTO_FIELDS_RICH_TURN_DONE(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)     \
	F(X, U32, status, 0)                    \
	F(X, U32, calls, 0)
/* statd -> runnerd, relayed to brokerd as BROKER_ATTACH_FETCH: fetch attachment index of a
 * turn statd is preparing with the controlled fetch, at most max_bytes. */
#define RTS_PROTO_FIELDS_ATTACH_FETCH(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)   \
	F(X, U32, index, 0)                   \
	F(X, STR, url, RTS_ATTACH_URL_MAX)    \
	F(X, U64, max_bytes, 0)
/* runnerd -> statd, relayed from BROKER_ATTACH_DATA (result -ENOTCONN when brokerd could
 * not be reached). fd: sealed memfd with the body, empty unless result is 0. */
#define RTS_PROTO_FIELDS_ATTACH_DATA(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)  \
	F(X, U32, index, 0)                  \
	F(X, I32, result, 0)                 \
	F(X, STR, mime, RTS_RICH_MIME_MAX)

/* RICH_STATE's state. */
#define RTS_RICH_STATE_READY 1u	  /* the worker announced itself */
#define RTS_RICH_STATE_STOPPED 2u /* no container runs for the channel */
#define RTS_RICH_STATE_FAILED 3u  /* it could not be started, or not be removed (error says why) */
/* RICH_STOP's reason (runnerd's log line says it). */
#define RTS_RICH_STOP_OFF 0u	 /* the channel's mode left rich */
#define RTS_RICH_STOP_FRESH 1u	 /* a fresh start archives the sessions after the removal */
#define RTS_RICH_STOP_CHANGED 2u /* the channel's profile changed */
#define RTS_RICH_STOP_REASONS 3u

/* ---- Rich mode on brokerd.sock (DESIGN.md 8.5). A rich channel has one long-lived
 * container; brokerd serves its worker on a listener runnerd binds once per container and
 * hands over with RICH_BIND, and runnerd relays each of statd's turns as BROKER_RICH_TURN.
 * Several requests may be outstanding on the link at once; answers name what they answer.
 * A carried fd is always there (a message "without payload" carries an empty memfd): the
 * fd column is fixed per type. Every memfd is sealed (F_SEAL_SHRINK, GROW, WRITE, SEAL) and
 * its receiver checks the seals and the size before reading (common/memfd.h). ---- */

/* runnerd -> brokerd: serve the worker of a rich channel. fd: the listening SOCK_STREAM
 * socket bound at runRoot/rich-<first 16 hex of the hash>/broker.sock. Replaces a listener
 * of the same channel (a re-created container, a restarted runnerd). profile: the
 * channel's rich profile (the config's rich.profiles key). */
#define RTS_PROTO_FIELDS_RICH_BIND(F, X)        \
	F(X, STR, channel, RTS_CHANNEL_MAX)       \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, STR, profile, RTS_NAME_MAX)
/* brokerd -> runnerd: result 0, or a negative errno (-EINVAL a bad field or an unknown
 * profile, -ENOTSOCK, -EBUSY too many channels, -ESHUTDOWN, -EIO). */
#define RTS_PROTO_FIELDS_RICH_BOUND(F, X)       \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, I32, result, 0)
/* runnerd -> brokerd: answer once the worker of the bound channel has announced itself
 * (POST /worker/ready since the bind), or at deadline_ms (CLOCK_MONOTONIC ms). */
#define RTS_PROTO_FIELDS_RICH_WAIT_READY(F, X)  \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, U64, deadline_ms, 0)
/* brokerd -> runnerd: result 0 (ready), -ETIME (not by the deadline), -ENOENT (no such
 * channel bound, or it was unbound or replaced meanwhile). capabilities: what the worker
 * declared, bits RTS_RICH_CAP_*; private_history: 1 when it reported retained private
 * history. */
#define RTS_PROTO_FIELDS_RICH_READY(F, X)       \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN) \
	F(X, I32, result, 0)                      \
	F(X, U8, capabilities, 0)                 \
	F(X, U8, private_history, 0)
/* runnerd -> brokerd: stop serving the channel (its container is going): the listener and
 * every connection are closed, a turn of the channel ends CANCELLED. Unknown channels are
 * answered too. */
#define RTS_PROTO_FIELDS_RICH_UNBIND(F, X) F(X, STR, channel_hash, RTS_HASH_HEX_LEN)
#define RTS_PROTO_FIELDS_RICH_UNBOUND(F, X) F(X, STR, channel_hash, RTS_HASH_HEX_LEN)
/* runnerd -> brokerd: admit a turn of a bound rich channel: identity is bound now and
 * revoked when BROKER_RICH_DONE is sent (seed: "The host binds identity immediately
 * before enqueueing a turn and revokes it when the turn settles"). fd: sealed memfd with
 * the turn input JSON statd built (at most RTS_RICH_TURN_INPUT_MAX bytes). deadline_ms:
 * CLOCK_MONOTONIC ms, the hard bound of every call of the turn. */
#define RTS_PROTO_FIELDS_BROKER_RICH_TURN(F, X)        \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)              \
	F(X, STR, channel, RTS_CHANNEL_MAX)              \
	F(X, STR, channel_hash, RTS_HASH_HEX_LEN)        \
	F(X, STR, speaker_id, RTS_SPEAKER_FIELD_MAX)     \
	F(X, STR, speaker_name, RTS_SPEAKER_FIELD_MAX)   \
	F(X, STR, principal_id, RTS_SPEAKER_FIELD_MAX)   \
	F(X, STR, profile, RTS_NAME_MAX)                 \
	F(X, U64, deadline_ms, 0)
/* brokerd -> runnerd: the turn settled. status: enum rts_turn_status (TIMEOUT when brokerd
 * saw the deadline pass first). calls: credential-bearing calls, refused ones included.
 * fd: sealed memfd with the reply JSON {"text","files"} (at most RTS_RICH_REPLY_MAX bytes),
 * empty unless status is OK. */
#define RTS_PROTO_FIELDS_BROKER_RICH_DONE(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)       \
	F(X, U32, status, 0)                      \
	F(X, U32, calls, 0)
/* runnerd -> brokerd: end the turn now (deadline, cancel, shutdown); the pending
 * BROKER_RICH_DONE answers it with CANCELLED. Unknown ids are ignored. */
#define RTS_PROTO_FIELDS_BROKER_RICH_CANCEL(F, X) F(X, STR, turn_id, RTS_TURN_ID_LEN)
/* runnerd -> brokerd (relayed from statd): fetch attachment index of a turn with the
 * controlled fetch (common/fetch.h), at most max_bytes. */
#define RTS_PROTO_FIELDS_BROKER_ATTACH_FETCH(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)          \
	F(X, U32, index, 0)                          \
	F(X, STR, url, RTS_ATTACH_URL_MAX)           \
	F(X, U64, max_bytes, 0)
/* brokerd -> runnerd: result 0, -EACCES (a fetch rule refused the URL or an address),
 * -EFBIG, -ETIMEDOUT or -EIO (anything else). mime: the answer's media type ("" when it
 * had none or it was malformed). fd: sealed memfd with the body (empty unless result is
 * 0). */
#define RTS_PROTO_FIELDS_BROKER_ATTACH_DATA(F, X) \
	F(X, STR, turn_id, RTS_TURN_ID_LEN)         \
	F(X, U32, index, 0)                         \
	F(X, I32, result, 0)                        \
	F(X, STR, mime, RTS_RICH_MIME_MAX)

/* RICH_READY's capabilities (seed, "Worker capability handshake"). */
#define RTS_RICH_CAP_PRIVATE_TO 1u
#define RTS_RICH_CAP_READER_RECORDS 2u
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
	M(SPARE_DROP, spare_drop, 14, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0)    \
	M(SPARE_STATE, spare_state, 15, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(RICH_SYNC, rich_sync, 24, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0)      \
	M(RICH_SYNCED, rich_synced, 25, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(RICH_ENSURE, rich_ensure, 26, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 1)  \
	M(RICH_STATE, rich_state, 27, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 0)   \
	M(RICH_STOP, rich_stop, 28, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0)      \
	M(RICH_TURN, rich_turn, 30, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 1)      \
	M(RICH_TURN_DONE, rich_turn_done, 31, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 1) \
	M(ATTACH_FETCH, attach_fetch, 32, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_LISTENER, 0) \
	M(ATTACH_DATA, attach_data, 33, RTS_PROTO_LINK_RUNNERD, RTS_PROTO_TO_CONNECTOR, 1) \
	M(BROKER_BIND, broker_bind, 20, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 1)  \
	M(BROKER_BOUND, broker_bound, 21, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(BROKER_CLOSE, broker_close, 22, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(BROKER_CLOSED, broker_closed, 23, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(RICH_BIND, rich_bind, 40, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 1)     \
	M(RICH_BOUND, rich_bound, 41, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0)  \
	M(RICH_WAIT_READY, rich_wait_ready, 42, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(RICH_READY, rich_ready, 43, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0)  \
	M(RICH_UNBIND, rich_unbind, 44, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(RICH_UNBOUND, rich_unbound, 45, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 0) \
	M(BROKER_RICH_TURN, broker_rich_turn, 46, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 1) \
	M(BROKER_RICH_DONE, broker_rich_done, 47, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 1) \
	M(BROKER_RICH_CANCEL, broker_rich_cancel, 48, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(BROKER_ATTACH_FETCH, broker_attach_fetch, 50, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_LISTENER, 0) \
	M(BROKER_ATTACH_DATA, broker_attach_data, 51, RTS_PROTO_LINK_BROKERD, RTS_PROTO_TO_CONNECTOR, 1) \
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
