/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox fetch and check-url: the controlled fetch (common/fetch.h) from the
 * command line (DESIGN.md section 8.2, roundtable-sandbox(1)). Neither reads the config
 * or talks to a daemon. */
#ifndef CLI_FETCH_H
#define CLI_FETCH_H

#include "common/daemon.h"

/* Exit statuses of both verbs. */
enum cli_fetch_exit {
	CLI_FETCH_OK = 0,
	CLI_FETCH_FAILED = 1,  /* DNS, connection, TLS, timeout, size, encoding, redirects */
	CLI_FETCH_USAGE = 2,   /* bad options or arguments */
	CLI_FETCH_REFUSED = 3, /* a URL or address refused by a rule, before connecting to it */
};

/* fetch [--max-bytes N] [--max-redirects N] [--timeout-ms N] [--no-follow] URL.
 * argv[0] is "fetch". Writes the body of the last response to stdout, whatever its HTTP
 * status, and returns 0. A refusal prints exactly one line
 * "roundtable-sandbox: refused: REASON" on stderr and returns 3; other failures print
 * one "roundtable-sandbox: error: ..." line and return 1; usage errors return 2. */
int cli_fetch(const struct rts_opts *o, int argc, char **argv);

/* check-url URL. argv[0] is "check-url". Resolves URL's host without connecting
 * anywhere; returns 0 (printing nothing) when it is a credential-free http(s) URL whose
 * every address is public, otherwise the statuses of cli_fetch(). */
int cli_check_url(const struct rts_opts *o, int argc, char **argv);

#endif
