/* SPDX-License-Identifier: Apache-2.0 */
/* Rich mode in brokerd (DESIGN.md 8.5; seed "Explicit Pi/subscription mode" through "Pi
 * isolation and continuity"): a listener per rich channel that outlives its turns, the
 * worker protocol on it, and the turns runnerd admits.
 *
 *   runnerd --RICH_BIND(listening fd)--> brokerd: a channel is served (rich.c)
 *   worker  --POST /worker/ready-->             it announces itself and its capabilities
 *   runnerd --BROKER_RICH_TURN(input memfd)-->  identity bound, hooks run, turn queued
 *   worker  --POST /worker/next-->              long poll: gets the turn (rich_worker.c)
 *   worker  --/anthropic, /mcp, /tools, /worker/compact-->  calls of the turn
 *   worker  --POST /worker/result-->            the reply packet
 *   brokerd --BROKER_RICH_DONE(reply memfd)--> runnerd: identity revoked
 *
 * Threads: the main thread (sd-event) owns the channel list, the runnerd link, the gates,
 * the sweep and every link message; libmicrohttpd runs one thread per connection that
 * serves one request; an admission thread per turn runs its host hooks; a thread per
 * ATTACH_FETCH fetches. Members under a channel's lock are shared with those threads; a
 * thread that needs the main thread to act sets a flag under the lock and pokes the main
 * loop (brokerd_rich_poke()). A channel is freed only on the main thread, after its HTTP
 * server stopped (which joins its connection threads) and its turn's admission thread
 * ended. */
#ifndef BROKERD_RICH_H
#define BROKERD_RICH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "brokerd/brokerd.h"
#include "brokerd/closer.h"
#include "brokerd/gate.h"
#include "common/conf.h"
#include "common/link.h"
#include "common/util.h"

/* ---- limits of the rich listener (seed, "Pi isolation and continuity"; the shared ones
 * are in common/limits.h) ---- */
#define BROKERD_RICH_CHANNELS_MAX 64u	 /* bound rich channels at once */
#define BROKERD_RICH_CONNECTIONS 16u	 /* connections one listener serves at once */
#define BROKERD_RICH_SMALL_BODY_MAX (64u * 1024u) /* /worker/ready, /worker/next */
#define BROKERD_RICH_STARTUP_CALLS 32u	 /* the metadata-only start-up scope: calls ... */
#define BROKERD_RICH_COMPACTIONS 3u	 /* host compactions a turn may ask for */
#define BROKERD_RICH_REPORTS 16u	 /* compaction reports a turn may send */
#define BROKERD_RICH_HOOK_TIMEOUT_MS 30000u /* effort judge and memory command */
#define BROKERD_RICH_HOOK_OUTPUT_MAX (RTS_RICH_TEXT_BYTES_MAX + 1u)
#define BROKERD_RICH_COMPACTOR_OUTPUT_MAX (8u * 1024u * 1024u)
#define BROKERD_RICH_FETCHES 8u		 /* ATTACH_FETCH running at once */
#define BROKERD_RICH_SSE_EVENT_MAX (4u * 1024u * 1024u) /* one upstream event */
#define BROKERD_RICH_STREAM_HIGH (256u * 1024u) /* streamed bytes waiting for the worker */
/* Audit entries written per turn (and per stretch between turns) beyond maxCalls: the
 * worker protocol, compaction requests and reports, refused calls. Calls beyond are counted
 * and summed up in one entry (brokerd/audit.h), so a worker cannot flood the journal. */
#define BROKERD_RICH_AUDIT_EXTRA 64u

/* Timings a test build (tests/testbuild) shortens; production has no switch for them. */
#ifdef BROKERD_TEST_RICH_SILENCE_MS
#define BROKERD_RICH_SILENCE_MS BROKERD_TEST_RICH_SILENCE_MS
#else
#define BROKERD_RICH_SILENCE_MS 120000u /* no body byte read and no answer byte written */
#endif
#ifdef BROKERD_TEST_RICH_STARTUP_MS
#define BROKERD_RICH_STARTUP_MS BROKERD_TEST_RICH_STARTUP_MS
#else
#define BROKERD_RICH_STARTUP_MS 90000u /* ... and seconds, before the first admitted turn */
#endif
#ifdef BROKERD_TEST_RICH_LONG_POLL_MS
#define BROKERD_RICH_LONG_POLL_MS BROKERD_TEST_RICH_LONG_POLL_MS
#else
#define BROKERD_RICH_LONG_POLL_MS 25000u /* /worker/next answers 204 then (below the silence) */
#endif
_Static_assert(BROKERD_RICH_LONG_POLL_MS < BROKERD_RICH_SILENCE_MS, "a long poll must end before the silence limit");

struct MHD_Daemon;
struct brokerd_keyring;
struct brokerd_rich;
struct rich_conn;

/* ---- a turn ---- */

enum rich_turn_state {
	RICH_TURN_ADMITTING, /* its hooks (effort judge, memory) run */
	RICH_TURN_QUEUED,    /* ready for the next /worker/next */
	RICH_TURN_HANDED,    /* the worker has it: its calls are allowed */
	RICH_TURN_SETTLING,  /* result, failure or cancel: waiting for its calls to end */
};

struct rich_turn {
	struct brokerd_binding b;
	struct brokerd_keyring *keys;
	uint64_t admitted_ms;
	int wake_fd;	     /* eventfd written when the turn settles */
	atomic_bool closing; /* set when it settles: calls and hooks stop */

	/* Set at admission (input by the admission thread, before the turn is queued),
	 * read-only afterwards. */
	int input_fd;	     /* statd's turn input: a sealed memfd, checked; -1 once read */
	json_object *input;  /* the validated turn input (statd's) */
	char cause_buf[192]; /* a cause with details (the input's problem) */
	char *handout;	     /* the /worker/next answer, built when the hooks are done */
	size_t handout_len;

	/* Under the channel's lock. */
	enum rich_turn_state state;
	enum rts_effort effort;	 /* the judged level */
	bool private_memory;	 /* a nonempty private prompt block */
	bool private_tool;	 /* a host tool returned privateTo */
	bool require_caps;	 /* both capabilities are required (seed handshake) */
	bool blocked;		 /* failed: every later call is refused */
	unsigned calls;		 /* credential-bearing calls, refused ones included */
	unsigned in_flight;	 /* of them, running now (slots) */
	unsigned compacts;	 /* /worker/compact requests admitted and not ended */
	unsigned users;		 /* calls, hook thread and reply packets holding the turn */
	bool packet_incoming;	 /* a /worker/result body is being read */
	unsigned compactions, reports;
	bool compactor_running;
	/* The outcome, once settling. */
	enum rts_turn_status status;
	const char *cause;	 /* why it failed, for the log: static, or cause_buf */
	int reply_fd;		 /* sealed memfd with the reply, -1 until there is one */
};

/* ---- a channel ---- */

struct rich_channel {
	struct brokerd_rich *rich;
	const struct rts_config *cfg;
	const struct rts_rich_profile *profile;
	char *channel;
	char hash[RTS_HASH_HEX_LEN + 1];
	uint64_t bound_ms;
	struct rts_link *owner; /* the runnerd link that bound it; NULL once gone (main thread) */
	struct brokerd_gate gate;
	struct MHD_Daemon *mhd;
	atomic_bool closing; /* its calls stop through their turn's wake-up (settled first) */
	struct brokerd_closer closer; /* torn down on a closer thread (rich.c) */

	pthread_mutex_t lock;
	pthread_cond_t cond;	    /* turn queued, worker state, closing: wakes long polls */
	struct rich_conn *conns;    /* connections libmicrohttpd serves */
	struct brokerd_handoff *handoffs; /* handed over by the gate, not started yet */
	/* The worker (seed, "Worker capability handshake"). */
	bool announced;		    /* POST /worker/ready since the bind */
	uint8_t caps;		    /* RTS_RICH_CAP_* it declared */
	bool private_history;
	bool polling;		    /* an idle long poll is waiting */
	/* The metadata-only start-up scope before the first admitted turn. */
	bool scope_revoked;
	unsigned scope_calls;
	enum rts_effort last_effort; /* the previous judgment, for the next */
	struct rich_turn *turn;	     /* the admitted turn, or NULL */
	/* Flags for the main thread (brokerd_rich_poke()). */
	bool ready_news;	    /* answer RICH_WAIT_READY waiters */
	/* The audit trail (brokerd/audit.h): calls numbered since the current turn was
	 * admitted (or the bind); those beyond audit_max get no entry of their own. */
	unsigned audit_calls;
	unsigned audit_max;	    /* set at the bind */
	atomic_uint audit_unlogged; /* any thread */

	/* Main thread only. */
	struct rich_waiter *waiters; /* RICH_WAIT_READY not answered yet */
	struct rich_turn *gate_packet; /* the gate reserved a reply packet of this turn for the
					* connection it hands over next */
	struct rich_channel *next;
};

/* ---- a connection of a rich listener (rich_http.c) ---- */

enum rich_route_kind {
	RICH_ROUTE_READY,
	RICH_ROUTE_NEXT,
	RICH_ROUTE_RESULT,
	RICH_ROUTE_COMPACT,
	RICH_ROUTE_MESSAGES,
	RICH_ROUTE_COUNT_TOKENS,
	RICH_ROUTE_MCP,
	RICH_ROUTE_TOOL,
};

/* The routes and what their bodies may be (seed: 96 MiB input bodies for credential-bearing
 * calls, 72 MiB reply packets). */
struct rich_route {
	enum rich_route_kind kind;
	const char *name; /* the tool or server name from the target, or NULL */
	size_t index;	  /* its index in the config's tools[] or mcp[] */
	bool beta;	  /* ?beta=true */
};

/* Match a raw request target against ch's routes: /worker/ready, /worker/next,
 * /worker/result, /worker/compact, /anthropic/v1/messages and
 * /anthropic/v1/messages/count_tokens (each of those two also with exactly "?beta=true"),
 * /mcp/<a server of the profile>, /tools/<a host tool of the profile>. Byte for byte, no
 * decoding; anything else (the account routes /v1/files, /v1/models, ... included) is no
 * route. Returns true with *r filled (r->name points into target). */
bool brokerd_rich_route_match(const struct rts_config *cfg, const struct rts_rich_profile *profile,
			      const char *target, struct rich_route *r);

/* The largest body a route takes (before the state is looked at). */
size_t brokerd_rich_route_body_max(const struct rts_config *cfg, enum rich_route_kind kind);

/* What the request headers say, once brokerd_rich_headers_check() accepted them. */
#define BROKERD_RICH_BETAS_MAX 16u
struct rich_headers {
	size_t content_length;
	char version[16];	   /* anthropic-version, "" when absent */
	char betas[BROKERD_RICH_BETAS_MAX][64]; /* anthropic-beta values on the allow-list */
	size_t n_betas;
};

struct brokerd_header;
/* The rich routes' header allow-list (rich-design.md section 5). Accepted: Host (exactly
 * "broker"), Content-Type (application/json, optionally with a charset), Content-Length,
 * Connection, at most one credential, which must be a dummy (Authorization: Bearer
 * RTS_DUMMY_KEY or a BROKERD_RICH_DUMMY_*, or x-api-key BROKERD_RICH_DUMMY_API_KEY),
 * anthropic-version (YYYY-MM-DD), anthropic-beta (values off the allow-list are dropped),
 * and what the Anthropic SDK and undici add, which is ignored: x-stainless-*, user-agent,
 * accept, accept-language, accept-encoding (answers are never encoded), sec-fetch-mode,
 * anthropic-dangerous-direct-browser-access, x-app; on /mcp routes mcp-protocol-version and
 * mcp-session-id. Everything else is refused: cookies, proxy and forwarding headers, other
 * hop-by-hop fields (TE, Trailer, Upgrade, Keep-Alive, Expect, Transfer-Encoding), any other
 * credential, unknown names. Order: more than BROKERD_RICH_HEADERS_MAX fields, a field not
 * on the list, a repeated field or one with a NUL -> BAD_REQUEST; no credential, two, or
 * not a dummy -> UNAUTHORIZED; Host, Content-Type, Content-Length or anthropic-version
 * malformed -> BAD_REQUEST. */
#define BROKERD_RICH_HEADERS_MAX 48u
enum brokerd_result brokerd_rich_headers_check(const struct brokerd_header *h, size_t n, enum rich_route_kind kind,
					       struct rich_headers *out);

/* The worker's dummy credentials for the Anthropic SDK: an API-key-shaped one (the SDK
 * then leaves identity to the broker) and an OAuth-shaped one (the Claude Code dialect).
 * Public by design, like RTS_DUMMY_KEY. */
#define BROKERD_RICH_DUMMY_API_KEY "sk-ant-api03-roundtable-sandbox-dummy-key"
#define BROKERD_RICH_DUMMY_OAUTH "sk-ant-oat01-roundtable-sandbox-dummy-key"

struct rich_conn {
	struct rich_channel *ch;
	struct brokerd_handoff handoff; /* in ch->handoffs until libmicrohttpd starts it */
	struct rich_conn *prev, *next; /* in ch->conns */
	int fd;			       /* valid until libmicrohttpd's CLOSED notification */
	bool shut;		       /* shut down by the sweep or a settling turn */
	uint64_t accepted_ms;
	/* Written by the connection's thread, read by the sweep: through rich_conn_touch() and
	 * rich_conn_quiet() only. */
	uint64_t last_io_ms;	       /* a body byte read or an answer byte written */
	bool quiet_ok;		       /* brokerd itself is working (a host command, a long poll) */
	bool reader_watches;	       /* its upstream reader checks the silence limit itself and
					  answers the worker (504 or an error event) */
	int state;		       /* rich_http.c's */
	char *target;
	struct rich_route route;
	bool routed;
	struct rich_headers headers;
	char *body;
	size_t body_len, body_want;
	struct rich_turn *turn;	       /* the turn this request holds (a user of it), or NULL */
	bool holds_slot;	       /* one of the turn's in-flight slots */
	bool compact_slot;	       /* counted in the turn's compacts */
	size_t budget_held;	       /* bytes of the rich listeners' buffer budget it holds */
	bool scope_call;	       /* a start-up scope call */
	bool packet_reserved;	       /* the gate took the turn's one incoming reply packet */
	char turn_id[RTS_TURN_ID_LEN + 1]; /* of turn, for the log line after it is given back */
	void *stream;		       /* an answer being streamed (anthropic_call.c) */
	/* Its audit entry (brokerd/audit.h), written once: its number, and what the handler
	 * says decided (a static rule name; NULL: the route's default when allowed, else the
	 * result code) and whether the request reached an upstream or a host command. */
	unsigned call_no;
	const char *rule;
	bool forwarded;
	bool audited;		       /* written, or handed to the stream */
};

/* The silence limit's bookkeeping, shared by a connection's thread and the sweep. */
static inline void rich_conn_touch(struct rich_conn *c)
{
	__atomic_store_n(&c->last_io_ms, rts_now_ms(), __ATOMIC_RELAXED);
}
/* The connection's upstream reader checks the silence limit itself (anthropic_call.c):
 * the sweep then waits SILENCE_GRACE_MS longer, so the worker gets the reader's answer
 * rather than a bare close. */
static inline void rich_conn_reader_watches(struct rich_conn *c, bool on)
{
	__atomic_store_n(&c->reader_watches, on, __ATOMIC_RELAXED);
}
static inline void rich_conn_quiet(struct rich_conn *c, bool quiet)
{
	__atomic_store_n(&c->quiet_ok, quiet, __ATOMIC_RELAXED);
	if (!quiet)
		rich_conn_touch(c);
}

/* ---- what the pieces call ---- */

/* Wake the main thread: it looks at every channel's flags and settling turns. Any thread. */
void brokerd_rich_poke(struct brokerd_rich *rich);

/* Settle ch's turn t (ch->lock held): status and cause (static, for the log line), and
 * reply_fd (a sealed memfd, taken) for RTS_TURN_OK. Marks it closing, wakes its calls and
 * hooks and the long poll, shuts down a reply packet being read, and pokes the main thread,
 * which answers BROKER_RICH_DONE once the turn's users are gone. A turn settles once; later
 * calls close reply_fd and do nothing. */
void brokerd_rich_settle_locked(struct rich_channel *ch, struct rich_turn *t, enum rts_turn_status status,
				const char *cause, int reply_fd);

/* A user of t (a call, a reply packet, the hook thread) is done (ch->lock held). */
void brokerd_rich_turn_unuse_locked(struct rich_channel *ch, struct rich_turn *t);

/* The image to name in a capability error: the config's rich.image. */
const char *brokerd_rich_image(const struct rich_channel *ch);

/* rich_http.c: the channel's HTTP server and gate. */
int brokerd_rich_http_start(struct rich_channel *ch, sd_event *ev, int listen_fd);
void brokerd_rich_http_sweep(struct rich_channel *ch, uint64_t now_ms);
/* Forget connections handed to the HTTP server that it never started, giving back what they
 * hold (ch->lock held; after the server stopped). */
void brokerd_rich_http_drop_handoffs_locked(struct rich_channel *ch);
/* Shut down every connection of ch that is reading a reply packet of t (ch->lock held). */
void brokerd_rich_http_cut_packets_locked(struct rich_channel *ch, struct rich_turn *t);

/* rich_worker.c: the worker protocol routes. Each returns the status to answer and sets
 * *body (caller frees; NULL for no body) and *type (static content type or NULL). */
struct rich_answer {
	enum brokerd_result result; /* for the audit entry: BROKERD_OK unless refused */
	unsigned status;
	char *body;
	size_t len;
	const char *content_type;
};
void brokerd_rich_worker_ready(struct rich_conn *c, struct rich_answer *a);
void brokerd_rich_worker_next(struct rich_conn *c, struct rich_answer *a);
void brokerd_rich_worker_result(struct rich_conn *c, struct rich_answer *a);
void brokerd_rich_worker_compact(struct rich_conn *c, struct rich_answer *a);
void brokerd_rich_mcp(struct rich_conn *c, struct rich_answer *a);
void brokerd_rich_tool(struct rich_conn *c, struct rich_answer *a);

/* An error answer {"error":CODE} for r. */
void brokerd_rich_answer_error(struct rich_answer *a, enum brokerd_result r);

/* The audit entry of a call on ch's listener (brokerd/audit.h): turn_id NULL outside a
 * turn, route the call's rich route (routed false: none was matched), rule static (NULL:
 * the route's allow rule for BROKERD_OK, else the result code), result
 * BROKERD_RESULT_MAX_ for a call closed unanswered, accepted_ms when it was accepted. Any
 * thread, no lock held. */
void brokerd_rich_audit(struct rich_channel *ch, const char *turn_id, unsigned call_no, bool routed,
			enum rich_route_kind route, const char *rule, enum brokerd_result result, bool forwarded,
			uint64_t accepted_ms);
/* The same for c, once (c->audited): c's turn id, route, call number, rule, forwarded. */
void brokerd_rich_audit_conn(struct rich_conn *c, enum brokerd_result result, const char *rule);
/* One entry summing up ch's calls that got none of their own since the last summary, for
 * turn_id (NULL: "-"). Any thread. */
void brokerd_rich_audit_summary(struct rich_channel *ch, const char *turn_id);

/* A call of c's turn, as the shared route handlers (tool.c, mcp.c) take it: the binding,
 * keyring and deadline of the turn, the oauthToken as the model key the reflection filter
 * must know, the profile's MCP servers, the turn deadline as the upstream deadline, and
 * allowHttpMcp. */
struct brokerd_call brokerd_rich_call(struct rich_conn *c);

/* rich_turn.c: turn admission. */
/* A turn of ch bound to b, with statd's input in input_fd (a checked sealed memfd, taken). */
struct rich_turn *brokerd_rich_turn_new(struct rich_channel *ch, const struct brokerd_binding *b, int input_fd);
void brokerd_rich_turn_free(struct rich_turn *t);
/* Start the admission hooks of ch->turn on a thread of their own (main thread). Returns 0 or
 * -errno (the turn is then settled as failed by the caller). */
int brokerd_rich_turn_admit(struct rich_channel *ch);

/* The capability rule (seed, "Worker capability handshake"): both capabilities are
 * required when the turn carries a nonempty private prompt block, the worker reported
 * retained private history, or a host tool returned privateTo in it. */
bool brokerd_rich_caps_required(bool private_memory, bool private_history, bool private_tool);
/* The worker declared both. */
bool brokerd_rich_caps_enough(uint8_t caps);

/* rich_fetch.c */
int brokerd_rich_fetch_start(struct brokerd_rich *rich, struct rts_link *link, const struct rts_msg_broker_attach_fetch *m);

/* anthropic_call.c: POST /anthropic/v1/messages[/count_tokens]. Either answers at once
 * (*a) or queues a streamed answer on mc itself (returns true). */
struct MHD_Connection;
bool brokerd_rich_anthropic(struct rich_conn *c, struct MHD_Connection *mc, struct rich_answer *a);
/* The connection of a streamed answer is gone (ch->lock held): the stream no longer
 * touches it. */
void brokerd_rich_stream_detach_locked(void *stream);

/* ---- what main.c calls (main thread) ---- */

/* The rich side of brokerd. on_idle runs (from the loop) whenever stopping is over:
 * brokerd_rich_stop() was called and no channel or fetch is left. */
struct brokerd_rich *brokerd_rich_new(const struct rts_config *cfg, sd_event *ev, void (*on_idle)(void *arg),
				      void *arg);
void brokerd_rich_free(struct brokerd_rich *rich);

/* runnerd's rich messages; each returns what a link handler returns (0, or -EBADMSG to drop
 * the peer). */
int brokerd_rich_on_bind(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_bind *m);
int brokerd_rich_on_wait_ready(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_wait_ready *m);
int brokerd_rich_on_unbind(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_rich_unbind *m);
int brokerd_rich_on_turn(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_broker_rich_turn *m);
int brokerd_rich_on_cancel(struct brokerd_rich *rich, struct rts_link *l, struct rts_msg_broker_rich_cancel *m);
int brokerd_rich_on_attach_fetch(struct brokerd_rich *rich, struct rts_link *l,
				 struct rts_msg_broker_attach_fetch *m);

/* The runnerd link l is gone: the channels it bound close (HACKING.md, "brokerd loses
 * runnerd"), and nothing is answered on it any more. */
void brokerd_rich_link_down(struct brokerd_rich *rich, struct rts_link *l);

/* brokerd stops: close every channel, cancel every fetch. */
void brokerd_rich_stop(struct brokerd_rich *rich);
bool brokerd_rich_idle(const struct brokerd_rich *rich);

#endif
