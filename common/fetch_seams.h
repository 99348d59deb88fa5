/* SPDX-License-Identifier: Apache-2.0 */
/* Test seams of the controlled fetch (seed: "resolve and transport overrides are trusted
 * test seams, never guest inputs").
 *
 * They exist only in objects compiled with -DRTS_FETCH_TEST_SEAMS, which the build does
 * for tests/unit/libfetch_seams.a alone (tests/Makemodule.am). The installed programs link
 * common/libfetch.a, which has no such symbol: nothing in a config file, the environment
 * or a request can reach them (cli/check-fetch.py checks the symbol is absent from the
 * installed CLI).
 *
 * With them a test makes a name resolve to a public address of its choosing and then
 * carries the bytes of that vetted connection to a loopback test server, so tests never
 * send a packet outside loopback while every rule still runs on public-looking input. */
#ifndef RTS_FETCH_SEAMS_H
#define RTS_FETCH_SEAMS_H

#ifndef RTS_FETCH_TEST_SEAMS
#error "common/fetch_seams.h is for test builds only"
#endif

#include <sys/socket.h>

#include "common/netaddr.h"

struct rts_fetch_test_seams {
	/* Replaces getaddrinfo() for names (never for literals): store up to max addresses in
	 * out and return how many (0: the name has no address), or -1 when the name does not
	 * exist. NULL: the real resolver. Called on the lookup's helper thread, in place of
	 * getaddrinfo(): a slow one is abandoned at the caller's deadline like a slow DNS
	 * server, and keeps running until it returns. */
	int (*resolve)(void *arg, const char *host, struct rts_netaddr *out, size_t max);
	/* Called for every socket the fetch is about to connect, after the pin check passed,
	 * with the vetted address and port. May rewrite *dial (same family, at most *len
	 * bytes; update *len) to send the connection elsewhere, a loopback test server. NULL:
	 * connect where the vetted address says. */
	void (*dial)(void *arg, const struct rts_netaddr *vetted, unsigned port, struct sockaddr *dial, socklen_t *len);
	/* CA bundle that replaces the system trust store (the test CA), or NULL. */
	const char *ca_file;
	void *arg;
};

/* Zero (no seam) unless a test sets it. Not thread-safe: set it before fetching. */
extern struct rts_fetch_test_seams rts_fetch_test_seams;

#endif
