/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the controlled fetch's URL parser (rts_url_parse(), common/puburl.h)
 * and address classifier (rts_netaddr_special(), common/netaddr.h). Nothing is resolved
 * or dialed: only literal hosts reach rts_url_resolve(), which consults no resolver for
 * them.
 *
 * Invariants. A refusal leaves the URL empty and gives a short static reason. An accepted
 * URL is printable ASCII http(s) without user info, fragment, percent sign or zone in its
 * authority, with a host and a port 1..65535; parsing what the parser produced gives the
 * same URL, host and port again (the normalisation is stable, so a redirect to it means
 * the same thing); a literal host is refused by rts_url_resolve() exactly when the
 * classifier refuses its address. The classifier refuses every IPv6 address outside
 * 2000::/3, every IPv4-mapped one, and IPv4 0/8, 10/8, 127/8 and 224/3. */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdint.h>

#include "common/netaddr.h"
#include "common/puburl.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return 0;
}

static void check_classifier(const uint8_t *data, size_t size)
{
	if (size < 16)
		return;
	struct rts_netaddr a6 = {.family = AF_INET6};
	memcpy(a6.v6.s6_addr, data, 16);
	const struct rts_netrange *r6 = rts_netaddr_special(&a6);
	if ((data[0] & 0xe0) != 0x20)
		FUZZ_ASSERT(r6);
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (memcmp(data, mapped, 12) == 0)
		FUZZ_ASSERT(r6 && strstr(r6->why, "IPv4-mapped"));
	if (r6)
		FUZZ_ASSERT(strlen(r6->why) < 100);

	struct rts_netaddr a4 = {.family = AF_INET};
	memcpy(&a4.v4.s_addr, data, 4);
	const struct rts_netrange *r4 = rts_netaddr_special(&a4);
	if (data[0] == 0 || data[0] == 10 || data[0] == 127 || data[0] >= 224)
		FUZZ_ASSERT(r4);
	FUZZ_ASSERT(rts_netaddr_special(&a4) == r4); /* pure */
}

static bool printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

static void check_url(const uint8_t *data, size_t size)
{
	struct rts_url u;
	const char *why = NULL;
	int r = rts_url_parse((const char *)data, size, &u, &why);
	if (r < 0) {
		FUZZ_ASSERT(r == -EACCES);
		FUZZ_ASSERT(why && strlen(why) < 100);
		FUZZ_ASSERT(!u.url && !u.host);
		return;
	}
	FUZZ_ASSERT(r == 0 && u.url && u.host && u.host[0] && u.port != 0);
	FUZZ_ASSERT(strncmp(u.url, u.https ? "https://" : "http://", u.https ? 8 : 7) == 0);
	FUZZ_ASSERT(printable_ascii(u.url));
	FUZZ_ASSERT(!strchr(u.url, '#'));
	const char *auth = u.url + (u.https ? 8 : 7);
	size_t alen = strcspn(auth, "/?");
	FUZZ_ASSERT(alen > 0);
	FUZZ_ASSERT(!memchr(auth, '@', alen) && !memchr(auth, '%', alen));

	/* Stable: the parser's own output parses to the same thing. */
	struct rts_url again;
	const char *why2 = NULL;
	FUZZ_ASSERT(rts_url_parse(u.url, strlen(u.url), &again, &why2) == 0);
	FUZZ_ASSERT(strcmp(again.url, u.url) == 0);
	FUZZ_ASSERT(strcmp(again.host, u.host) == 0);
	FUZZ_ASSERT(again.port == u.port && again.https == u.https && again.literal == u.literal);
	rts_url_release(&again);

	if (u.literal) {
		struct rts_netaddr a = {0};
		if (inet_pton(AF_INET, u.host, &a.v4) == 1)
			a.family = AF_INET;
		else {
			FUZZ_ASSERT(inet_pton(AF_INET6, u.host, &a.v6) == 1);
			a.family = AF_INET6;
		}
		FUZZ_ASSERT(rts_netaddr_equal(&a, &u.addr));
		struct rts_addrlist out;
		const char *rwhy = NULL;
		int rr = rts_url_resolve(&u, UINT64_MAX, NULL, &out, &rwhy);
		const struct rts_netrange *bad = rts_netaddr_special(&a);
		FUZZ_ASSERT(bad ? rr == -EACCES && rwhy == bad->why : rr == 0 && out.n == 1);
	}
	rts_url_release(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_classifier(data, size);
	check_url(data, size);
	return 0;
}
