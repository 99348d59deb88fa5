/* SPDX-License-Identifier: Apache-2.0 */
/* The address tables behind rts_netaddr_special(). Sources: the IANA IPv4 and IPv6
 * Special-Purpose Address Registries (RFC 6890 and its updates) plus the multicast,
 * reserved and broadcast blocks, which those registries leave to their own RFCs.
 *
 * A range is refused when the registry says it is not globally reachable, and also in
 * these cases, where the registry says it is but dialing it could still reach something
 * private or is never what a web fetch needs:
 *   - NAT64 64:ff9b::/96 embeds any IPv4 address, private ones included;
 *   - 192.0.0.0/24 and 2001::/23 are refused whole, including the few global anycast
 *     services inside them (PCP, TURN, AMT, ORCHIDv2, DNS-SD SRP, drone remote ID),
 *     none of which serves web pages.
 * Left public because the registry marks them globally reachable and they embed nothing:
 * 192.31.196.0/24 and 192.175.48.0/24 (AS112, RFC 7535, RFC 7534), 192.52.193.0/24 (AMT,
 * RFC 7450) and 2620:4f:8000::/48 (AS112, RFC 7534).
 *
 * IPv6 outside 2000::/3 is refused as a whole: IANA allocates global unicast only from
 * 2000::/3 (RFC 4291 section 2.4), so everything else is reserved or special. The named
 * entries before that catch-all only make the refusal say which range it was.
 *
 * Order matters: the first matching entry names the range, so a narrower range comes
 * before the wider one that contains it. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "common/netaddr.h"
#include "common/util.h"

#define WHY(text) "address not public: " text

struct range4 {
	uint32_t net; /* host byte order */
	unsigned len;
	struct rts_netrange r;
};

#define V4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static const struct range4 ranges4[] = {
	{V4(0, 0, 0, 0), 32, {WHY("unspecified (RFC 1122)")}},
	{V4(0, 0, 0, 0), 8, {WHY("\"this network\" (RFC 791, RFC 1122)")}},
	{V4(10, 0, 0, 0), 8, {WHY("private (RFC 1918)")}},
	{V4(100, 64, 0, 0), 10, {WHY("shared address space (RFC 6598)")}},
	{V4(127, 0, 0, 0), 8, {WHY("loopback (RFC 1122)")}},
	/* Includes the cloud metadata address 169.254.169.254. */
	{V4(169, 254, 0, 0), 16, {WHY("link-local (RFC 3927)")}},
	{V4(172, 16, 0, 0), 12, {WHY("private (RFC 1918)")}},
	/* DS-Lite 192.0.0.0/29 (RFC 7335), the dummy address 192.0.0.8 (RFC 7600), NAT64
	 * discovery 192.0.0.170/31 (RFC 8880) and the rest of the block. */
	{V4(192, 0, 0, 0), 24, {WHY("IETF protocol assignments (RFC 6890)")}},
	{V4(192, 0, 2, 0), 24, {WHY("documentation, TEST-NET-1 (RFC 5737)")}},
	{V4(192, 88, 99, 0), 24, {WHY("6to4 relay anycast, deprecated (RFC 7526)")}},
	{V4(192, 168, 0, 0), 16, {WHY("private (RFC 1918)")}},
	{V4(198, 18, 0, 0), 15, {WHY("benchmarking (RFC 2544)")}},
	{V4(198, 51, 100, 0), 24, {WHY("documentation, TEST-NET-2 (RFC 5737)")}},
	{V4(203, 0, 113, 0), 24, {WHY("documentation, TEST-NET-3 (RFC 5737)")}},
	{V4(224, 0, 0, 0), 4, {WHY("multicast (RFC 5771)")}},
	{V4(255, 255, 255, 255), 32, {WHY("limited broadcast (RFC 919, RFC 8190)")}},
	{V4(240, 0, 0, 0), 4, {WHY("reserved (RFC 1112)")}},
};

struct range6 {
	uint8_t net[16];
	unsigned len;
	struct rts_netrange r;
};

static const struct range6 ranges6[] = {
	{{0}, 128, {WHY("unspecified (RFC 4291)")}},
	{{[15] = 1}, 128, {WHY("loopback (RFC 4291)")}},
	{{[10] = 0xff, [11] = 0xff}, 96, {WHY("IPv4-mapped (RFC 4291)")}},
	{{[8] = 0xff, [9] = 0xff}, 96, {WHY("IPv4-translated (RFC 2765)")}},
	{{0}, 96, {WHY("IPv4-compatible, deprecated (RFC 4291)")}},
	{{0x00, 0x64, 0xff, 0x9b}, 96, {WHY("NAT64 well-known prefix (RFC 6052)")}},
	{{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, {WHY("NAT64 local-use prefix (RFC 8215)")}},
	{{0x01, 0x00}, 64, {WHY("discard-only (RFC 6666)")}},
	{{0x01, 0x00, [7] = 0x01}, 64, {WHY("dummy prefix (RFC 9780)")}},
	{{0x20, 0x01, 0x00, 0x00}, 32, {WHY("Teredo (RFC 4380)")}},
	{{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, {WHY("benchmarking (RFC 5180)")}},
	{{0x20, 0x01, 0x00, 0x10}, 28, {WHY("ORCHID, deprecated (RFC 4843)")}},
	{{0x20, 0x01, 0x00, 0x00}, 23, {WHY("IETF protocol assignments (RFC 2928)")}},
	{{0x20, 0x01, 0x0d, 0xb8}, 32, {WHY("documentation (RFC 3849)")}},
	{{0x20, 0x02}, 16, {WHY("6to4 (RFC 3056)")}},
	{{0x3f, 0xff}, 20, {WHY("documentation (RFC 9637)")}},
	{{0x5f, 0x00}, 16, {WHY("segment routing SIDs (RFC 9602)")}},
	/* Includes the cloud metadata address fd00:ec2::254. */
	{{0xfc, 0x00}, 7, {WHY("unique-local (RFC 4193)")}},
	{{0xfe, 0x80}, 10, {WHY("link-local (RFC 4291)")}},
	{{0xfe, 0xc0}, 10, {WHY("site-local, deprecated (RFC 3879)")}},
	{{0xff, 0x00}, 8, {WHY("multicast (RFC 4291)")}},
};

static const struct rts_netrange not_global_unicast = {WHY("outside global unicast 2000::/3 (RFC 4291)")};
static const struct rts_netrange not_ip = {WHY("not an IPv4 or IPv6 address")};

static bool prefix6_match(const uint8_t *a, const uint8_t *net, unsigned len)
{
	unsigned full = len / 8, rest = len % 8;
	if (memcmp(a, net, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xffu << (8 - rest));
	return (a[full] & mask) == (net[full] & mask);
}

const struct rts_netrange *rts_netaddr_special(const struct rts_netaddr *a)
{
	if (a->family == AF_INET) {
		uint32_t v = ntohl(a->v4.s_addr);
		for (size_t i = 0; i < RTS_ARRAY_SIZE(ranges4); i++) {
			uint32_t mask = ranges4[i].len == 0 ? 0 : UINT32_MAX << (32 - ranges4[i].len);
			if ((v & mask) == ranges4[i].net)
				return &ranges4[i].r;
		}
		return NULL;
	}
	if (a->family == AF_INET6) {
		const uint8_t *b = a->v6.s6_addr;
		for (size_t i = 0; i < RTS_ARRAY_SIZE(ranges6); i++)
			if (prefix6_match(b, ranges6[i].net, ranges6[i].len))
				return &ranges6[i].r;
		if ((b[0] & 0xe0) != 0x20)
			return &not_global_unicast;
		return NULL;
	}
	return &not_ip;
}

bool rts_netaddr_from_sockaddr(struct rts_netaddr *a, const struct sockaddr *sa, size_t len)
{
	*a = (struct rts_netaddr){0};
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		a->family = AF_INET;
		a->v4 = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		a->family = AF_INET6;
		a->v6 = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		return true;
	}
	return false;
}

bool rts_netaddr_equal(const struct rts_netaddr *a, const struct rts_netaddr *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_INET)
		return a->v4.s_addr == b->v4.s_addr;
	if (a->family == AF_INET6)
		return memcmp(&a->v6, &b->v6, sizeof(a->v6)) == 0;
	return false;
}
