/* SPDX-License-Identifier: Apache-2.0 */
/* Which IP addresses the controlled fetch may dial (seed: "Controlled fetch and scoped
 * delegation": private, loopback, link-local, metadata, multicast, reserved and
 * transition/documentation ranges are refused). Pure functions, no I/O. */
#ifndef RTS_NETADDR_H
#define RTS_NETADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* One IPv4 or IPv6 address, without port. */
struct rts_netaddr {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	};
};

/* A range that is not globally reachable. why is a static sentence naming the range and
 * the RFC that sets it apart ("address not public: loopback (RFC 1122)"); it never
 * contains the address itself. */
struct rts_netrange {
	const char *why;
};

/* The special-purpose range a holds, or NULL when a is a globally reachable unicast
 * address the fetch may dial. Every family other than AF_INET and AF_INET6 is refused
 * (the "not an IP address" range). The tables and the RFC of every entry are in
 * netaddr.c; a range is refused as a whole, whatever address inside it is embedded
 * (an IPv4-mapped or NAT64 address is refused even when the IPv4 part is public). */
const struct rts_netrange *rts_netaddr_special(const struct rts_netaddr *a);

/* Fill a from a sockaddr of len bytes. Returns false for another family or a short length. */
bool rts_netaddr_from_sockaddr(struct rts_netaddr *a, const struct sockaddr *sa, size_t len);

/* True when a and b are the same address (same family, same bytes). */
bool rts_netaddr_equal(const struct rts_netaddr *a, const struct rts_netaddr *b);

#endif
