/* SPDX-License-Identifier: Apache-2.0 */
/* The worker-facing HTTP listener of one turn (HACKING.md, "Broker HTTP contract").
 *
 * The decisions (which route, which headers, which error) are pure functions so they can
 * be tested without sockets; the libmicrohttpd callbacks at the end apply them. */
#ifndef BROKERD_HTTP_H
#define BROKERD_HTTP_H

#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brokerd/brokerd.h"
#include "brokerd/gate.h"
#include "common/conf.h"

/* One route: a target equal to prefix (exact), or prefix followed by a name that
 * name_known() accepts; either only while enabled() says the config has it (NULL:
 * always). New routes (DESIGN.md section 8: rich mode) are new rows in the table in
 * http.c. */
struct brokerd_route {
	const char *prefix;
	bool exact;
	const char *kind; /* "model", "fetch", "tool", "mcp": logs, audit entries and metrics labels */
	const char *allow_rule; /* the audit rule of an allowed call (brokerd/audit.h) */
	bool (*name_known)(const struct rts_config *cfg, const char *name);
	brokerd_handler_fn handle;
	bool (*enabled)(const struct rts_config *cfg);
};

/* Match the raw request target byte for byte (no percent-decoding, no dot-segment or
 * slash normalisation): exactly "/model", "/tools/fetch" when fetch.enabled (the built-in
 * host_fetch; the config then has no host tool named fetch), "/tools/<configured tool>",
 * "/mcp/<configured server>". A query, fragment, extra or empty segment, "..", percent-encoding, an
 * absolute-form target or "*" matches nothing (seed: queries, extra path segments and
 * unknown routes are refused). Returns the route and sets *name to the part after the
 * prefix (pointer into target; NULL for exact routes), or NULL. */
const struct brokerd_route *brokerd_route_match(const struct rts_config *cfg, const char *target, const char **name);

struct brokerd_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* Most request headers we look at; a request with more is refused. */
#define BROKERD_HEADERS_MAX 8u

/* The pieces both listeners' header checks (this one and the rich one, rich.h) use. */
/* h is whole: name and value present, neither holding a NUL. */
bool brokerd_header_whole(const struct brokerd_header *h);
/* h's value is exactly want (case matters). */
bool brokerd_header_is(const struct brokerd_header *h, const char *want);
/* A Content-Length value: 1*DIGIT. Returns 0 with *len, -EINVAL when it is empty or holds
 * anything but digits (every byte is looked at), else -EFBIG when it is above max. */
int brokerd_content_length(const struct brokerd_header *h, size_t max, size_t *len);

/* Where brokerd_header_collect() puts a request's fields (MHD_get_connection_values_n(),
 * MHD_HEADER_KIND): the first cap of them in h; n counts every field seen, so n > cap
 * says there were too many (the walk stops at the first one past cap). */
struct brokerd_header_list {
	struct brokerd_header *h;
	size_t cap, n;
};
enum MHD_Result brokerd_header_collect(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				       const char *value, size_t value_size);

/* Decide on a request's header fields (n of them, in arrival order). The allow-list is
 * exactly the four fields the worker sends (DESIGN.md "Pinned details"): Host,
 * Authorization, Content-Type, Content-Length. Everything else is refused rather than
 * ignored, so hop-by-hop, proxy, forwarding, cookie, Expect and Transfer-Encoding fields
 * never reach a decision (seed, "Threat model"). Names compare case-insensitively, values
 * exactly. Order of decisions:
 *   a field not on the list, a repeated field, a name or value with a NUL   -> BAD_REQUEST
 *   Authorization missing or not exactly "Bearer " RTS_DUMMY_KEY          -> UNAUTHORIZED
 *   Host not "broker", Content-Type not application/json, Content-Length
 *   missing or not all digits                                              -> BAD_REQUEST
 *   Content-Length above RTS_BROKER_BODY_MAX                                  -> TOO_LARGE
 * On BROKERD_OK *content_length holds the body size. The gate (gate.h) has already
 * refused bad syntax, framing fields and oversized bodies before this runs; this is the
 * semantic check, and a second line for the framing ones. */
enum brokerd_result brokerd_headers_check(const struct brokerd_header *h, size_t n, size_t *content_length);
/* The same, with *rule set to the audit rule of a refusal (header_not_allowed,
 * dummy_key, host_header, content_type, content_length, body_too_large), static. */
enum brokerd_result brokerd_headers_check_rule(const struct brokerd_header *h, size_t n, size_t *content_length,
					       const char **rule);

/* {"error":"<code>"} for r, newly allocated. */
char *brokerd_error_body(enum brokerd_result r);

/* libmicrohttpd callbacks; cls is the struct brokerd_turn. */
void brokerd_http_on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
				enum MHD_ConnectionNotificationCode code);
void *brokerd_http_on_uri(void *cls, const char *uri, struct MHD_Connection *mc);
enum MHD_Result brokerd_http_on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
					const char *version, const char *upload_data, size_t *upload_data_size,
					void **req_cls);
void brokerd_http_on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Per-connection state, shared with the deadline sweep in turn.c under the turn lock. */
enum brokerd_conn_state {
	BROKERD_CONN_NEW,    /* handed over by the gate, request line not parsed yet */
	BROKERD_CONN_HEADER, /* request line parsed, header not complete */
	BROKERD_CONN_BODY,   /* admitted, reading the body */
	BROKERD_CONN_DONE,   /* answered */
	BROKERD_CONN_DROP,   /* to be closed without an answer */
};

struct brokerd_conn {
	struct brokerd_turn *turn;
	struct brokerd_handoff handoff;	  /* in turn->handoffs until libmicrohttpd starts it */
	struct brokerd_conn *prev, *next; /* in turn->conns */
	int fd;		      /* libmicrohttpd's socket; valid until the CLOSED notification */
	bool shut;	      /* the sweep shut it down */
	uint64_t accepted_ms; /* CLOCK_MONOTONIC */
	uint64_t deadline_ms; /* the request deadline (the gate enforced the header deadline) */
	enum brokerd_conn_state state;
	unsigned call_no;     /* its place in the turn's call budget, counted by the gate */
	bool audited;	      /* its decision entry is written (brokerd/audit.h) */
	const char *why;      /* the rule a refusal before the body broke (static), for a precheck's log */
	bool holds_slot;      /* this connection's call is the turn's call in flight */
	char *target;	      /* raw request target */
	const struct brokerd_route *route;
	const char *name;
	char *body;
	size_t body_len, body_want;
};

#endif
