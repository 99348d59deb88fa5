/* SPDX-License-Identifier: Apache-2.0 */
/* The test rig of the controlled fetch: a scripted resolver and dialer plugged into the
 * fetch's test seams (common/fetch_seams.h), and tests/fakes/fetch_fake.py on loopback.
 *
 * Names resolve to public addresses from the rig's table; every connection to a vetted
 * address is carried to a loopback listener of the fake, chosen by the address (see
 * RIG_ADDR_*) or else by the port (80: HTTP, 443: HTTPS, same family as the address).
 * The fake's certificate is for *.example.com, example.com and the two public literals
 * below, signed by a CA made for the run. */
#ifndef TESTS_FETCH_RIG_H
#define TESTS_FETCH_RIG_H

#include <stdbool.h>
#include <stddef.h>

#include "common/netaddr.h"

/* Public addresses the rig routes (example.com's own, so no test ever reaches them). */
#define RIG_ADDR_WEB "93.184.216.34"			  /* -> the fake's HTTP(S) listeners */
#define RIG_ADDR_WEB6 "2606:2800:220:1:248:1893:25c8:1946" /* -> the same on ::1 */
#define RIG_ADDR_BLACKHOLE "93.184.216.35"		  /* -> a TCP connect that never completes */
#define RIG_ADDR_TLSHANG "93.184.216.36"		  /* -> a TLS handshake that never completes */
#define RIG_ADDR_CLOSED "93.184.216.37"			  /* -> a closed port: connection refused */

struct rig_ports {
	int http4, https4, http6, https6, tlshang4, blackhole4, closed4;
};
extern struct rig_ports rig_ports;

/* Make the CA (tests/fakes/make-ca.sh) in a new temporary directory, start the fake with
 * /usr/bin/python3 and install the seams. srcdir is the source tree. Aborts on failure. */
void rig_start(const char *srcdir);
/* Stop the fake and remove the directory. */
void rig_stop(void);

/* Install the seams (resolver, dialer, ca_file) for ports and CA file; rig_start() does
 * this itself. */
void rig_install(const struct rig_ports *ports, const char *ca_file);

/* Scripted resolver. rig_resolve_add(name, "a,b,...") appends one answer for name: its
 * first lookup gets the first answer added, the second lookup the second, and so on; the
 * last answer repeats. "" is an empty answer set, "NXDOMAIN" a name that does not exist,
 * "SLOW" a resolver that answers "does not exist" after 10 s. Names never added do not
 * exist. The resolver runs on the fetch's lookup thread. */
void rig_resolve_add(const char *name, const char *addrs);
/* An IPv4 or IPv6 address in text form into *a; false when it is neither. */
bool rig_parse_addr(const char *text, struct rts_netaddr *a);
void rig_resolve_clear(void);
/* How often the fetch asked the resolver for name. */
unsigned rig_lookups(const char *name);

/* Every connection the fetch opened since the last rig_reset(): the vetted address (as
 * text) and port. */
size_t rig_dials(void);
const char *rig_dial_addr(size_t i);
unsigned rig_dial_port(size_t i);
/* When set, each dial is also appended to this file as "ADDR PORT\n" (the seam CLI). */
void rig_dial_log(const char *path);

/* Requests the fake received: the record file's text (caller frees) and its line count. */
char *rig_record(void);
size_t rig_record_count(void);

/* Clear dials and lookups, restore the default resolver table (www.example.com,
 * v6.example.com, two.example.com) and empty the record file. */
void rig_reset(void);

#endif
