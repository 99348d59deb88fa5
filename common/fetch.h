/* SPDX-License-Identifier: Apache-2.0 */
/* The controlled fetch (seed: "Controlled fetch and scoped delegation", safeFetch): the
 * one way this project fetches a URL that came from a guest, a model or a command line.
 *
 * Every hop: rts_url_parse() (credential-free http(s) only), one resolution whose every
 * address must be public (rts_url_resolve()), then a GET over a connection pinned to one
 * of those vetted addresses (libcurl's CURLOPT_RESOLVE, and CURLOPT_OPENSOCKETFUNCTION
 * refusing any other address), with TLS verifying the URL's own host name. No proxy (the
 * environment's *_proxy variables included), no second resolution, no cookies, no
 * connection reuse. A connection that fails before it is established (TCP or TLS) may
 * fall back to the next vetted address, each one given at most RTS_FETCH_CONNECT_MS,
 * all under the whole-request deadline. Redirects are followed by this code, never by
 * libcurl, and every one is vetted again, so a name that resolved to a public address for
 * the first hop and to a private one for the next is refused then.
 *
 * Needs curl_global_init() once per process before the first call (brokerd and the CLI
 * do it at start). Thread-safe otherwise: calls share nothing. Nothing here logs. */
#ifndef RTS_FETCH_H
#define RTS_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/puburl.h"

/* The ranges and defaults of timeout_ms, max_redirects and max_bytes (RTS_FETCH_TIMEOUT_*,
 * RTS_FETCH_REDIRECTS_*, RTS_FETCH_BYTES_*) are in common/limits.h: the config's "fetch"
 * key is held to the same ones. */
/* TCP plus TLS set-up per address (seed: a three-second connection deadline per address). */
#define RTS_FETCH_CONNECT_MS 3000u
/* All header lines of one response, interim (1xx) ones included. */
#define RTS_FETCH_HEADERS_BYTES_MAX (64u * 1024u)
/* Trusted extra request headers: how many, and the longest "Name: value" line. */
#define RTS_FETCH_EXTRA_HEADERS_MAX 32u
#define RTS_FETCH_EXTRA_HEADER_LEN_MAX 8192u

struct rts_fetch_opts {
	uint32_t timeout_ms;	/* the whole fetch, every hop, DNS and connects included */
	uint32_t max_redirects; /* redirects followed; one more is an error (-ELOOP) */
	size_t max_bytes;	/* body bytes on the wire and after decoding, each */
	bool follow_redirects;	/* false: a 3xx is the result (with its Location in .location) */
	/* Trusted host request headers, "Name: value" each, NULL-terminated, or NULL. Never
	 * guest input (seed). Refused (-EINVAL): Accept-Encoding (fixed: what libcurl can
	 * decode of gzip, deflate and br), Host, Content-Length, Transfer-Encoding,
	 * Connection, TE, Upgrade, Expect, Proxy-*, a name that is not an HTTP token, a value
	 * with control bytes or empty. They are sent to the first URL's origin (scheme, host,
	 * port) only, and dropped for the rest of the chain once a redirect leaves it, so a
	 * host's Authorization header is not handed to whatever a page redirects to. */
	const char *const *headers;
	struct rts_cancel cancel; /* e.g. a turn's deadline and closing flag */
};

/* The defaults above, follow_redirects on, no headers, RTS_CANCEL_NONE. */
#define RTS_FETCH_OPTS_DEFAULT                                                                                        \
	((struct rts_fetch_opts){.timeout_ms = RTS_FETCH_TIMEOUT_DEFAULT_MS,                                          \
				 .max_redirects = RTS_FETCH_REDIRECTS_DEFAULT,                                        \
				 .max_bytes = RTS_FETCH_BYTES_DEFAULT,                                                \
				 .follow_redirects = true,                                                            \
				 .headers = NULL,                                                                     \
				 .cancel = RTS_CANCEL_NONE})

struct rts_fetch_result {
	long status;	    /* HTTP status of the last hop */
	char *body;	    /* decoded body, len bytes plus a NUL the length does not count */
	size_t len;
	char *final_url;    /* the URL the body came from (normalised, no fragment) */
	char *content_type; /* the last hop's Content-Type, or NULL; not validated */
	char *location;	    /* follow_redirects off and a 3xx with a Location: the target,
			     * absolute but NOT vetted (fetch it with rts_fetch() again); or NULL */
	unsigned redirects; /* redirects followed */
};

/* Fetch the URL of url_len bytes at url with GET. All memory in *res is the caller's
 * (rts_fetch_result_release()); on failure *res is empty.
 *
 * Returns 0 for any HTTP response, whatever its status. On failure *why is a static
 * sentence (never the URL, an address, a header or upstream bytes) and the result is:
 *   -EINVAL     an option out of range or a refused extra header (a caller bug)
 *   -EACCES     refused by a rule: the URL (rts_url_parse()) or an address of any hop
 *               (rts_url_resolve()); nothing was sent to that hop
 *   -ENXIO      a host name does not exist or has no address
 *   -EAGAIN     name resolution failed otherwise
 *   -ECONNREFUSED  no vetted address of a hop could be connected to
 *   -EPROTO     TLS failed (handshake or certificate), or the response was broken
 *   -ETIMEDOUT  the whole-request deadline (opts or cancel) passed
 *   -ECANCELED  cancel said stop
 *   -EFBIG      the body is larger than max_bytes on the wire or after decoding
 *   -EMSGSIZE   the response headers are larger than RTS_FETCH_HEADERS_BYTES_MAX
 *   -EBADMSG    a content encoding we did not offer, or one that does not decode
 *   -ELOOP      more than max_redirects redirects
 *   -ENOMEM     libcurl could not set up the transfer */
int rts_fetch(const char *url, size_t url_len, const struct rts_fetch_opts *opts, struct rts_fetch_result *res,
	      const char **why);

void rts_fetch_result_release(struct rts_fetch_result *res);

/* The Accept-Encoding value every fetch sends: the codings this libcurl decodes among
 * gzip, deflate and br. Static. */
const char *rts_fetch_accept_encoding(void);

#endif
