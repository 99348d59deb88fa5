/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTPS POST to an operator-configured upstream (the model endpoint, an MCP server).
 *
 * The request is built from scratch: only the headers below are sent, the URL is the
 * configured one, https only, no redirects (a 3xx comes back as a status), no proxy from
 * the environment, peer and host verification always on (caFile replaces the system store
 * when configured), no compression, no cookies, HTTP/1.1. Connections and TLS sessions are
 * kept between calls, per upstream origin and bounded (upstream.c says how, and why one
 * call's bytes cannot reach another's answer). The answer is bounded and never streamed to
 * the worker: callers parse and rebuild it. */
#ifndef BROKERD_UPSTREAM_H
#define BROKERD_UPSTREAM_H

#include <json.h>
#include <stddef.h>

#include "brokerd/brokerd.h"

struct brokerd_upstream_req {
	const char *url;     /* https:// only (the config checks it) */
	const char *ca_file; /* NULL: the system trust store */
	const char *bearer;  /* real credential for "Authorization: Bearer", or NULL for none */
	const char *accept;  /* the Accept header's value; NULL: application/json */
	const char *body;    /* JSON text */
	size_t body_len;
	size_t max_answer;   /* answer body bytes; more is -EFBIG */
	struct brokerd_cancel cancel; /* turn closing and the call's deadline */
	uint32_t timeout_ms; /* the upstream deadline; 0: BROKERD_UPSTREAM_TIMEOUT_MS */
	bool allow_http;     /* http:// too (rich.allowHttpMcp); else https only */
};

struct brokerd_upstream_answer {
	long status;	    /* HTTP status */
	char *content_type; /* the Content-Type header, or NULL; caller frees */
	char *body;	    /* NUL-terminated; caller frees */
	size_t len;
	bool reused;	    /* sent on a connection an earlier call had opened */
	bool sent;	    /* the request may have reached the upstream (set on failure too) */
};

/* Send the POST and wait for the whole answer, at most BROKERD_UPSTREAM_TIMEOUT_MS and never
 * past req->cancel.deadline_ms. Returns 0 with *a filled (whatever the status), -ETIMEDOUT,
 * -ECANCELED (the turn closed; the transfer is aborted at once), -EFBIG (answer larger than
 * max_answer), or -EPROTO for any other transport failure (DNS, TLS, connection, and a
 * kept connection that died after the request went out: it is never sent twice). The
 * bearer value is wiped from our copies before returning. Nothing about the URL or the
 * failure is logged here beyond libcurl's generic error name at debug level. */
int brokerd_upstream_post(const struct brokerd_upstream_req *req, struct brokerd_upstream_answer *a);

void brokerd_upstream_answer_release(struct brokerd_upstream_answer *a);

/* Free the libcurl handles kept between calls (upstream.c). At exit, after every call has
 * returned and before curl_global_cleanup(). */
void brokerd_upstream_cleanup(void);

/* For transfers of their own (brokerd/stream.c): a multi handle from the pool (the CA
 * store cache; NULL when libcurl has none to give) and back, and the options every
 * upstream transfer shares: url, https only (http too with allow_http), no redirects, no
 * proxy, peer and host verification with ca_file (NULL: the system store), TLS 1.2 or
 * later, no connection reuse, the request body as POST. Returns 0 or -EPROTO. */
void *brokerd_upstream_multi_take(void);
void brokerd_upstream_multi_give(void *multi);
int brokerd_upstream_setopt_common(void *easy, const char *url, const char *ca_file, bool allow_http,
				   const char *body, size_t body_len);

/* The common tail of every upstream call a route makes: post req, then require a 2xx
 * status, a JSON Content-Type, a JSON document (depth RTS_JSON_DEPTH_MAX) and no reflection
 * of any credential the turn has used (call->keys), in the raw body or in any decoded
 * string. what ("model", "mcp") names the upstream in the one log line a failure gets.
 * Returns BROKERD_OK with *out (caller owns it), BROKERD_UPSTREAM_TIMEOUT,
 * BROKERD_UNAVAILABLE (turn closing) or BROKERD_UPSTREAM_ERROR. */
enum brokerd_result brokerd_upstream_json(struct brokerd_call *call, const char *what,
					  const struct brokerd_upstream_req *req, json_object **out);

/* True when a Content-Type header value names the media type type (case-insensitive,
 * with optional parameters such as "; charset=utf-8"). */
bool brokerd_content_type_is(const char *ct, const char *type);

/* True when a Content-Type header value names application/json (case-insensitive, with
 * optional parameters such as "; charset=utf-8"). text/event-stream and anything else is
 * false: an MCP server that answers with SSE is refused (seed, "Optional MCP tools"). */
bool brokerd_content_type_is_json(const char *ct);

#endif
