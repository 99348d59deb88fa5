/* SPDX-License-Identifier: Apache-2.0 */
/* Control requests: field validation, and the route of a message (DESIGN.md section 5,
 * HACKING.md "Control protocol answers").
 *
 * Routing fails closed. A bot that gets an error where it expected a route may hand the
 * guest's message to a host agent, so every answer to a `message` carries a route, also
 * when it carries an error, and the route is "pass" only for a channel whose recorded mode
 * is off (a channel never switched is off). Whatever keeps statd from knowing the channel
 * (a missing or invalid key or id, a line it cannot parse) answers "drop".
 *
 * Pure functions on parsed JSON: no daemon state and no logging, so the Check suite
 * (tests/unit/check_statd_request.c) drives them directly. The members of each request are
 * tables of common/jspec.h; every detail text is generated from those tables (key paths
 * and bounds), never from client data. */
#ifndef STATD_REQUEST_H
#define STATD_REQUEST_H

#include <json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "statd/state.h"

/* Error codes in answers ({"id"?,"error":CODE}) and events ({"id","event":"error",...}). */
#define STATD_E_LINE_TOO_LONG "line_too_long"
#define STATD_E_INVALID_JSON "invalid_json"
#define STATD_E_INVALID_REQUEST "invalid_request"
#define STATD_E_UNKNOWN_OP "unknown_op"
#define STATD_E_TEXT_TOO_LONG "text_too_long"
#define STATD_E_QUEUE_FULL "queue_full"
#define STATD_E_BUSY "busy"
#define STATD_E_TOO_MANY_CHANNELS "too_many_channels"
#define STATD_E_STATE_WRITE "state_write_failed"
#define STATD_E_SHUTTING_DOWN "shutting_down"
#define STATD_E_UNKNOWN_PROFILE "unknown_profile"	 /* mode rich: not a profile of the config's rich key */
#define STATD_E_RICH_UNAVAILABLE "rich_unavailable" /* mode rich, or a rich channel's message: no rich config */
#define STATD_E_UNAVAILABLE "unavailable"	 /* a rich fresh start: runnerd could not stop the container */
#define STATD_EV_TURN_FAILED "turn_failed"
#define STATD_EV_TURN_TIMEOUT "turn_timeout"
#define STATD_EV_TURN_CANCELLED "turn_cancelled"
#define STATD_EV_CLEANUP_FAILED "cleanup_failed"
#define STATD_EV_UNAVAILABLE "unavailable"
/* A rich turn's attachment: a fetch rule refused its URL or an address; it was over the
 * size bounds; it could not be fetched or stored. */
#define STATD_EV_ATTACHMENT_REFUSED "attachment_refused"
#define STATD_EV_ATTACHMENT_TOO_LARGE "attachment_too_large"
#define STATD_EV_ATTACHMENT_FAILED "attachment_failed"

#define STATD_ID_MAX 256u		    /* bytes in a string id */
#define STATD_ID_INT_MAX 9007199254740991LL /* integer ids: |id| <= 2^53-1, echoed exactly */
#define STATD_OP_MAX 32u		    /* bytes in an op name */

/* Every request's id, as a row of a request's table stored at off: a string of at most
 * STATD_ID_MAX bytes without NUL, or an integer of magnitude at most STATD_ID_INT_MAX
 * (beyond 2^53 most clients lose precision). statd_id_check() is its rule for strings. */
#define STATD_ID_WHAT "a string of at most 256 bytes or an integer of magnitude below 2^53"
struct rts_jctx;
bool statd_id_check(struct rts_jctx *ctx, json_object *id, void *base);
#define STATD_ID_FIELD(off)                                                                                            \
	{.key = "id", .types = RTS_JT_STRING | RTS_JT_INT, .flags = RTS_JF_REQUIRED, .min = -STATD_ID_INT_MAX,         \
	 .max = STATD_ID_INT_MAX, .check = statd_id_check, .store = RTS_JS_JSON, .at = (off), .what = STATD_ID_WHAT}

/* The route of a message. DROP is zero so that a route left unset fails closed. */
enum statd_route {
	STATD_ROUTE_DROP = 0, /* never to a host agent; no turn */
	STATD_ROUTE_PASS,     /* the channel is off: the bot routes the message as usual */
	STATD_ROUTE_SANDBOX,  /* a turn is queued; its reply or error event follows */
};

/* "drop", "pass", "sandbox" (anything else: "drop"). */
const char *statd_route_name(enum statd_route r);

/* A refusal's detail: the key path and what it must be ("author.id must be a string of 1
 * to 256 bytes"), generated from the request tables, never from the request. */
#define STATD_DETAIL_MAX 160u

/* A "message" request as far as statd_message_parse() could read it. Strings, id and the
 * arrays are borrowed from the request's JSON.
 *
 * Bounds that hold whatever the channel's mode: speaker fields RTS_SPEAKER_FIELD_MAX bytes
 * (the seed's 256 characters, counted in bytes: never more characters); text at most
 * RTS_RICH_TEXT_BYTES_MAX bytes; images (seed, "Worker content and files") at most
 * RTS_RICH_IMAGES_MAX of {"mime": image/png, image/jpeg, image/webp or image/gif, "data":
 * standard padded base64 of at most RTS_RICH_IMAGE_BYTES_MAX bytes whose first bytes are
 * that format's signature}, RTS_RICH_IMAGES_TOTAL_MAX decoded in all; attachments a count,
 * or at most RTS_RICH_ATTACHMENTS_MAX of {"url": an http(s) URL of printable ASCII, at most
 * RTS_ATTACH_URL_MAX bytes, "name"?: 1 to RTS_RICH_FILE_NAME_MAX bytes}. The bounds that
 * depend on the mode are statd_message_check_mode()'s. */
struct statd_message {
	json_object *id;     /* NULL when missing or invalid */
	const char *channel; /* NULL when missing or invalid */
	bool guild;
	bool addressed;
	bool has_author; /* false: "author": null (unresolved) */
	const char *author_id;
	const char *author_name;
	const char *principal_id; /* NULL when null or absent */
	bool has_tier;		  /* tier is a non-empty string */
	bool bot;
	bool integration;
	const char *text;
	uint32_t attachments;	     /* the count, or the length of attachment_list */
	json_object *images;	     /* the "images" array, or NULL */
	json_object *attachment_list; /* "attachments" when it is an array, else NULL */
	char detail[STATD_DETAIL_MAX]; /* statd_message_parse()'s *detail */
};

/* Read a request whose op is "message" into *m (zeroed first). m->id and m->channel are set
 * whenever they are valid, whatever else is wrong, so the caller can still route it.
 * Returns 0 when every field is valid; -EINVAL with *code (STATD_E_INVALID_REQUEST, or
 * STATD_E_TEXT_TOO_LONG for text over RTS_TEXT_MAX bytes) and *detail (pointing into m,
 * naming the first problem: id, channel, unknown member, then the other fields in order). */
int statd_message_parse(json_object *req, struct statd_message *m, const char **code, const char **detail);

/* The bounds of a valid message that depend on the channel's mode: a sealed channel's text
 * is at most RTS_TEXT_MAX bytes, a rich channel's at most RTS_RICH_TEXT_CHARS_MAX
 * characters (Unicode code points; seed: "Current text ... 100,000-character limit").
 * Returns 0, or -EINVAL with *code STATD_E_TEXT_TOO_LONG and *detail (static). */
int statd_message_check_mode(const struct statd_message *m, enum statd_mode mode, const char **code,
			     const char **detail);

/* Unicode code points in the len bytes of valid UTF-8 at s. */
size_t statd_utf8_chars(const char *s, size_t len);

/* The operations besides message (DESIGN.md section 5). */
enum statd_op {
	STATD_OP_MODE,
	STATD_OP_STATUS,
	STATD_OP_FRESH,
	STATD_OP_CHANNELS,
	STATD_OP_CANCEL,
	STATD_OP_METRICS, /* issue 15: {"op":"metrics","id"} answers {"id","text"} */
};

/* A request's id and op, read before anything else. */
struct statd_head {
	json_object *id; /* the id when valid (to echo), else NULL */
	const char *op;	 /* NULL when missing or invalid */
	char detail[STATD_DETAIL_MAX];
};

/* Read req's id and op. Returns 0 with h->op set, or -EINVAL with *detail (into h) when the
 * op is not a string of 1 to STATD_OP_MAX bytes; h->id is set whenever the id is valid. */
int statd_head_parse(json_object *req, struct statd_head *h, const char **detail);

/* The operation named op besides message; -ENOENT when there is none. */
int statd_op_lookup(const char *op, enum statd_op *out);

/* A request other than message, as statd_request_parse() read it (borrowed strings). */
struct statd_request {
	json_object *id;     /* set when valid */
	const char *op;
	const char *channel; /* NULL when absent (status without a channel) */
	enum statd_mode mode;
	const char *profile; /* mode rich: the profile (a name; the caller checks it is configured) */
	char detail[STATD_DETAIL_MAX];
};

/* Validate req as operation op: a valid id first, then no member the operation does not
 * define (a typo must not silently change what a request means), then its members. A mode
 * request has a "profile" exactly when its mode is "rich".
 * Returns 0, or -EINVAL with *detail (into r) naming the first problem. */
int statd_request_parse(json_object *req, enum statd_op op, struct statd_request *r, const char **detail);

/* Whether m is eligible for a turn (DESIGN.md section 3): a guild message, addressed, by
 * a resolved author who is neither a bot nor an integration and has a tier and a
 * principal id (seed, "Principal migration": a turn requires a host-bound speaker). */
bool statd_message_eligible(const struct statd_message *m);

/* The route of m. valid: statd_message_parse() returned 0. mode: the channel's recorded
 * mode (off when never switched); not consulted when m->channel is NULL.
 *   no valid id or channel  drop (the channel's mode is unknown, or the answer cannot be
 *                           matched to the request)
 *   mode off                pass (also when invalid: statd does not route the message)
 *   invalid                 drop
 *   not eligible            drop
 *   otherwise               sandbox (the queue may still refuse it: drop, with an error) */
enum statd_route statd_message_route(const struct statd_message *m, bool valid, enum statd_mode mode);

/* A new answer {"id"?, "route", "error"?, "detail"?} (id left out when NULL, error and
 * detail when NULL; detail only with an error). Every answer to a message, and to a line
 * that may have been one, is built here: it cannot lack a route. */
json_object *statd_message_answer(json_object *id, enum statd_route route, const char *code, const char *detail);

#endif
