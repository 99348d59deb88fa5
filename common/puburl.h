/* SPDX-License-Identifier: Apache-2.0 */
/* The public-URL check of the controlled fetch (seed: "Controlled fetch and scoped
 * delegation", assertPublicUrl): a strict parse of a credential-free http(s) URL and one
 * name resolution whose every address must be public. rts_fetch() (common/fetch.h) runs
 * the same two steps for every hop and then pins the connection to what they vetted.
 *
 * Nothing here logs. Refusal and failure texts (*why) are static sentences: they never
 * contain the URL, a host name, a resolved address or anything an upstream sent. */
#ifndef RTS_PUBURL_H
#define RTS_PUBURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"
#include "common/netaddr.h"

/* Longest URL accepted, in bytes. */
#define RTS_URL_MAX 8192u
/* Addresses kept from one resolution (all of them are vetted; connections try these). */
#define RTS_URL_ADDRS_MAX 16u

/* A URL that passed rts_url_parse(). */
struct rts_url {
	char *url;   /* libcurl's normalised form without the fragment: what is requested */
	char *host;  /* lowercase name, or the address literal (IPv6 without brackets) */
	uint16_t port;		   /* explicit, or 80/443 */
	bool https;
	bool literal;		   /* host is an address literal: addr holds it */
	struct rts_netaddr addr;
};

/* Parse len bytes at s (no NUL needed; an embedded NUL is refused) as a URL the fetch may
 * request. Accepted: "http://" or "https://" (scheme case-insensitive), a host that is a
 * DNS name of letters, digits and hyphens (labels of 1 to 63, at most 253 in all, no
 * trailing dot; IDN names in their xn-- form), a dotted-quad IPv4 literal or a bracketed
 * IPv6 literal, an optional port 1..65535, and printable ASCII throughout (at most
 * RTS_URL_MAX bytes). The IPv4 forms libcurl and inet_aton() also read (2130706433,
 * 0177.0.0.1, 0x7f.1, 127.1) are normalised by libcurl's URL parser to the dotted quad
 * that would be dialed and classified as that; a host that still looks numeric after
 * that ("1.2.3.4.5", "256.1.1.1") is refused. Refused (seed: credential-free HTTP(S)
 * only): any other scheme, user info (even an empty "@"), a percent-encoded host or an
 * IPv6 zone, spaces, control and non-ASCII bytes, a backslash, an empty host, port 0.
 * The fragment is dropped.
 *
 * Returns 0 with *u filled (release with rts_url_release()), or -EACCES with *why naming
 * the rule. No address classification happens here (rts_url_resolve() does it). */
int rts_url_parse(const char *s, size_t len, struct rts_url *u, const char **why);

void rts_url_release(struct rts_url *u);

/* True when a and b have the same scheme, host and port. */
bool rts_url_same_origin(const struct rts_url *a, const struct rts_url *b);

struct rts_addrlist {
	size_t n;
	struct rts_netaddr a[RTS_URL_ADDRS_MAX];
};

/* Resolve u's host once (getaddrinfo in a helper thread, so deadline_ms and c bound the
 * wait; a literal is used as it is) and vet every address: one address in a range
 * rts_netaddr_special() names refuses the whole answer (seed: every hop resolves all
 * addresses). Fills out with the distinct addresses in the resolver's order, at most
 * RTS_URL_ADDRS_MAX of them (all are vetted first).
 *
 * Returns 0; -EACCES (a non-public address; *why names its range, never the address);
 * -ENXIO (the name does not exist or has no address); -EAGAIN (resolution failed
 * otherwise); -ETIMEDOUT (deadline_ms, CLOCK_MONOTONIC ms, or c's deadline passed);
 * -ECANCELED (c said so). *why is always set on failure. */
int rts_url_resolve(const struct rts_url *u, uint64_t deadline_ms, const struct rts_cancel *c,
		    struct rts_addrlist *out, const char **why);

/* rts_url_parse() then rts_url_resolve(), opening no connection: 0 when s is a
 * credential-free http(s) URL whose every address is public. timeout_ms bounds the
 * resolution (1..RTS_FETCH_TIMEOUT_MAX_MS, as for a fetch; c may shorten it). Returns
 * what those two return, or -EINVAL for a timeout out of range. */
int rts_url_check_public(const char *s, size_t len, uint32_t timeout_ms, const struct rts_cancel *c,
			 const char **why);

#endif
