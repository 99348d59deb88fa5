/* SPDX-License-Identifier: Apache-2.0 */
/* The controlled fetch's pure rules: which addresses are public (common/netaddr.h) and
 * which URLs parse (common/puburl.h). Every refusal names its rule; each range is tested
 * at its edges and just outside them. No network: literals only, nothing resolves. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>

#include "common/fetch.h"
#include "common/netaddr.h"
#include "common/puburl.h"
#include "common/util.h"

static struct rts_netaddr addr(const char *text)
{
	struct rts_netaddr a = {0};
	if (inet_pton(AF_INET, text, &a.v4) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, text, &a.v6) == 1)
		a.family = AF_INET6;
	else
		ck_abort_msg("test address does not parse: %s", text);
	return a;
}

/* ---- addresses ---- */

static const char *const public_addrs[] = {
	"93.184.216.34", "1.1.1.1", "8.8.8.8", "1.0.0.0", "9.255.255.255", "11.0.0.0", "100.63.255.255",
	"100.128.0.0", "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255",
	"172.32.0.0", "191.255.255.255", "192.0.1.0", "192.0.3.0", "192.88.98.255", "192.88.100.0",
	"192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0",
	"203.0.112.255", "203.0.114.0", "223.255.255.255",
	/* globally reachable special-purpose blocks (AS112, AMT) stay public */
	"192.31.196.1", "192.52.193.1", "192.175.48.1",
	/* IPv6 global unicast, and the edges of the refused blocks inside 2000::/3 */
	"2606:2800:220:1:248:1893:25c8:1946", "2606:4700::1111", "2001:4860:4860::8888", "2001:200::1",
	"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::", "2001:ffff::1", "2003::1", "2620:4f:8000::1",
	"3ffe:ffff::1", "3fff:1000::", "2000::1"};

START_TEST(test_public)
{
	struct rts_netaddr a = addr(public_addrs[_i]);
	const struct rts_netrange *r = rts_netaddr_special(&a);
	ck_assert_msg(r == NULL, "%s refused: %s", public_addrs[_i], r ? r->why : "");
}
END_TEST

static const struct {
	const char *addr;
	const char *range; /* a part of the refusal that names the range */
} special_addrs[] = {
	{"0.0.0.0", "unspecified"},
	{"0.0.0.1", "\"this network\""},
	{"0.255.255.255", "\"this network\""},
	{"10.0.0.0", "private (RFC 1918)"},
	{"10.255.255.255", "private (RFC 1918)"},
	{"100.64.0.0", "shared address space (RFC 6598)"},
	{"100.127.255.255", "shared address space"},
	{"127.0.0.1", "loopback (RFC 1122)"},
	{"127.0.0.0", "loopback"},
	{"127.255.255.255", "loopback"},
	{"169.254.0.0", "link-local (RFC 3927)"},
	{"169.254.169.254", "link-local (RFC 3927)"}, /* cloud metadata */
	{"169.254.255.255", "link-local"},
	{"172.16.0.0", "private"},
	{"172.31.255.255", "private"},
	{"192.0.0.0", "IETF protocol assignments (RFC 6890)"},
	{"192.0.0.9", "IETF protocol assignments"}, /* PCP anycast: refused with its block */
	{"192.0.0.170", "IETF protocol assignments"},
	{"192.0.0.255", "IETF protocol assignments"},
	{"192.0.2.0", "TEST-NET-1 (RFC 5737)"},
	{"192.0.2.255", "TEST-NET-1"},
	{"192.88.99.1", "6to4 relay anycast"},
	{"192.168.0.0", "private"},
	{"192.168.255.255", "private"},
	{"198.18.0.0", "benchmarking (RFC 2544)"},
	{"198.19.255.255", "benchmarking"},
	{"198.51.100.7", "TEST-NET-2"},
	{"203.0.113.0", "TEST-NET-3"},
	{"203.0.113.255", "TEST-NET-3"},
	{"224.0.0.1", "multicast (RFC 5771)"},
	{"239.255.255.255", "multicast"},
	{"240.0.0.0", "reserved (RFC 1112)"},
	{"254.255.255.255", "reserved"},
	{"255.255.255.254", "reserved"},
	{"255.255.255.255", "limited broadcast"},
	{"::", "unspecified (RFC 4291)"},
	{"::1", "loopback (RFC 4291)"},
	{"::ffff:127.0.0.1", "IPv4-mapped"},
	{"::ffff:93.184.216.34", "IPv4-mapped"}, /* refused even when the IPv4 part is public */
	{"::ffff:0:7f00:1", "IPv4-translated"},
	{"::7f00:1", "IPv4-compatible"},
	{"::5db8:d822", "IPv4-compatible"},
	{"64:ff9b::7f00:1", "NAT64 well-known prefix (RFC 6052)"},
	{"64:ff9b::5db8:d822", "NAT64 well-known prefix"},
	{"64:ff9b:1::1", "NAT64 local-use prefix (RFC 8215)"},
	{"64:ff9b:1:ffff::1", "NAT64 local-use prefix"},
	{"100::1", "discard-only (RFC 6666)"},
	{"100:0:0:1::1", "dummy prefix"},
	{"2001::1", "Teredo (RFC 4380)"},
	{"2001:0:ffff:ffff::1", "Teredo"},
	{"2001:1::1", "IETF protocol assignments (RFC 2928)"},
	{"2001:2::1", "benchmarking (RFC 5180)"},
	{"2001:10::1", "ORCHID"},
	{"2001:1ff:ffff::1", "IETF protocol assignments"},
	{"2001:db8::1", "documentation (RFC 3849)"},
	{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation (RFC 3849)"},
	{"2002::1", "6to4 (RFC 3056)"},
	{"2002:7f00:1::1", "6to4"},
	{"3fff::1", "documentation (RFC 9637)"},
	{"3fff:fff:ffff::1", "documentation (RFC 9637)"},
	{"5f00::1", "segment routing"},
	{"fc00::1", "unique-local (RFC 4193)"},
	{"fd00:ec2::254", "unique-local"}, /* cloud metadata */
	{"fdff:ffff::1", "unique-local"},
	{"fe80::1", "link-local (RFC 4291)"},
	{"febf:ffff::1", "link-local"},
	{"fec0::1", "site-local"},
	{"feff::1", "site-local"},
	{"ff02::1", "multicast (RFC 4291)"},
	{"ff0e::1", "multicast"},
	{"1::1", "outside global unicast"},
	{"4000::1", "outside global unicast"},
	{"8000::1", "outside global unicast"},
	{"e000::1", "outside global unicast"},
};

START_TEST(test_special)
{
	struct rts_netaddr a = addr(special_addrs[_i].addr);
	const struct rts_netrange *r = rts_netaddr_special(&a);
	ck_assert_msg(r != NULL, "%s was taken as public", special_addrs[_i].addr);
	ck_assert_msg(strstr(r->why, special_addrs[_i].range), "%s: got \"%s\", want \"%s\"", special_addrs[_i].addr,
		      r->why, special_addrs[_i].range);
	/* The refusal names the range, never the address. */
	ck_assert_ptr_null(strstr(r->why, special_addrs[_i].addr));
}
END_TEST

START_TEST(test_other_family)
{
	struct rts_netaddr a = {.family = AF_UNIX};
	ck_assert_ptr_nonnull(rts_netaddr_special(&a));
	struct sockaddr_un_like {
		sa_family_t family;
		char path[108];
	} un = {.family = AF_UNIX};
	ck_assert(!rts_netaddr_from_sockaddr(&a, (struct sockaddr *)&un, sizeof(un)));
	struct sockaddr_in in = {.sin_family = AF_INET};
	ck_assert(!rts_netaddr_from_sockaddr(&a, (struct sockaddr *)&in, sizeof(in) - 1));
}
END_TEST

/* ---- URLs ---- */

static const struct {
	const char *in;
	const char *url;  /* what is requested */
	const char *host; /* as the fetch resolves or dials it */
	unsigned port;
	bool https, literal;
} good_urls[] = {
	{"http://www.example.com/", "http://www.example.com/", "www.example.com", 80, false, false},
	{"http://www.example.com", "http://www.example.com/", "www.example.com", 80, false, false},
	{"HTTPS://WWW.Example.COM:8443/a/../b?q=1#frag", "https://WWW.Example.COM:8443/b?q=1", "www.example.com", 8443,
	 true, false},
	{"https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/", "xn--bcher-kva.example", 443, true, false},
	{"http://a.b-c.d9/p?x=%20#", "http://a.b-c.d9/p?x=%20", "a.b-c.d9", 80, false, false},
	{"http://93.184.216.34:1/", "http://93.184.216.34:1/", "93.184.216.34", 1, false, true},
	{"https://93.184.216.34:65535/", "https://93.184.216.34:65535/", "93.184.216.34", 65535, true, true},
	{"http://[2606:2800:220:1:248:1893:25c8:1946]:8080/x", "http://[2606:2800:220:1:248:1893:25c8:1946]:8080/x",
	 "2606:2800:220:1:248:1893:25c8:1946", 8080, false, true},
	/* Every IPv4 form libcurl reads is normalised to the dotted quad it would dial. */
	{"http://1572395042/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://0x5db8d822/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://0135.0270.0330.042/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://93.12113954/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://93.184.55330/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://0x5d.0xb8.0xd8.0x22/", "http://93.184.216.34/", "93.184.216.34", 80, false, true},
	{"http://2130706433/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://017700000001/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0177.0.0.1/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0x7f.1/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0X7F.0.0.1/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0x7f000001/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://127.1/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://127.0.1/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0x7f.0.0.01/", "http://127.0.0.1/", "127.0.0.1", 80, false, true},
	{"http://0/", "http://0.0.0.0/", "0.0.0.0", 80, false, true},
	{"http://0xa9fea9fe/", "http://169.254.169.254/", "169.254.169.254", 80, false, true},
	{"http://[::ffff:127.0.0.1]/", "http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", 80, false, true},
};

START_TEST(test_url_good)
{
	struct rts_url u;
	const char *why = "unset";
	int r = rts_url_parse(good_urls[_i].in, strlen(good_urls[_i].in), &u, &why);
	ck_assert_msg(r == 0, "%s refused: %s", good_urls[_i].in, why);
	ck_assert_str_eq(u.url, good_urls[_i].url);
	ck_assert_str_eq(u.host, good_urls[_i].host);
	ck_assert_uint_eq(u.port, good_urls[_i].port);
	ck_assert(u.https == good_urls[_i].https);
	ck_assert(u.literal == good_urls[_i].literal);
	rts_url_release(&u);
}
END_TEST

/* The literal forms, classified as they are dialed: rts_url_resolve() on a literal
 * consults no resolver and refuses by the normalised address. */
static const struct {
	const char *url;
	const char *range;
} literal_refusals[] = {
	{"http://2130706433/", "loopback (RFC 1122)"},	{"http://0177.0.0.1/", "loopback (RFC 1122)"},
	{"http://0x7f.1/", "loopback (RFC 1122)"},	{"http://127.1/", "loopback (RFC 1122)"},
	{"http://0x7f.0.0.01/", "loopback (RFC 1122)"}, {"http://017700000001/", "loopback (RFC 1122)"},
	{"http://0/", "unspecified"},			{"http://0xa9fea9fe/", "link-local (RFC 3927)"},
	{"http://[::1]/", "loopback (RFC 4291)"},	{"http://[::ffff:127.0.0.1]/", "IPv4-mapped"},
	{"http://[::ffff:7f00:1]/", "IPv4-mapped"},	{"http://[fd00:ec2::254]/", "unique-local"},
	{"http://169.254.169.254/", "link-local"},	{"http://10.1.2.3/", "private (RFC 1918)"},
	{"http://[64:ff9b::a00:1]/", "NAT64"},		{"http://[2002:a00:1::]/", "6to4"},
	{"http://[2001::a00:1]/", "Teredo"},		{"https://192.168.1.1:8443/", "private"},
};

START_TEST(test_literal_classified_as_dialed)
{
	struct rts_url u;
	const char *why = NULL;
	const char *in = literal_refusals[_i].url;
	ck_assert_int_eq(rts_url_parse(in, strlen(in), &u, &why), 0);
	struct rts_addrlist out;
	ck_assert_int_eq(rts_url_resolve(&u, rts_now_ms() + 1000, NULL, &out, &why), -EACCES);
	ck_assert_msg(strstr(why, literal_refusals[_i].range), "%s: got \"%s\"", in, why);
	ck_assert_uint_eq(out.n, 0);
	rts_url_release(&u);
	/* rts_url_check_public() says the same, without a connection. */
	ck_assert_int_eq(rts_url_check_public(in, strlen(in), 1000, NULL, &why), -EACCES);
	ck_assert_msg(strstr(why, literal_refusals[_i].range), "%s: got \"%s\"", in, why);
}
END_TEST

START_TEST(test_literal_public)
{
	static const char *const urls[] = {"http://0x5db8d822/", "http://1572395042/", "https://93.184.216.34/",
					   "http://[2606:2800:220:1:248:1893:25c8:1946]/"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(urls); i++) {
		const char *why = "unset";
		int r = rts_url_check_public(urls[i], strlen(urls[i]), 1000, NULL, &why);
		ck_assert_msg(r == 0, "%s: %d %s", urls[i], r, why);
	}
}
END_TEST

#define USERINFO "URL carries user info"
#define PERCENT "URL host is percent-encoded or has an IPv6 zone"
#define SCHEME "URL scheme is not http or https"
#define FORM "URL does not have the form scheme://host/path"
#define BYTES "URL contains a space, a control or a non-ASCII byte"
#define NUMBER "URL host looks like a number but is not an IPv4 address"
#define LDH "URL host is not a DNS name of letters, digits and hyphens"
#define PORT "URL port is not valid"
#define NOPARSE "URL does not parse"

static const struct {
	const char *in;
	size_t len; /* 0: strlen(in) */
	const char *why;
} bad_urls[] = {
	/* only http and https */
	{"ftp://example.com/", 0, SCHEME},
	{"file:///etc/passwd", 0, SCHEME},
	{"gopher://example.com/", 0, SCHEME},
	{"ws://example.com/", 0, SCHEME},
	{"javascript:alert(1)", 0, SCHEME},
	{"data:text/plain,x", 0, SCHEME},
	{"//example.com/", 0, SCHEME},
	{"example.com", 0, SCHEME},
	{"httpx://example.com/", 0, SCHEME},
	{"http:/example.com/", 0, FORM},
	{"http:example.com", 0, FORM},
	{"https:\\\\example.com", 0, "URL contains a backslash"},
	{"http:///example.com/", 0, "URL host is empty"},
	{"http://", 0, "URL host is empty"},
	{"http://?x", 0, "URL host is empty"},
	{"", 0, "URL is empty"},
	/* credentials, also an empty "@" */
	{"http://user@example.com/", 0, USERINFO},
	{"http://user:pass@example.com/", 0, USERINFO},
	{"http://@example.com/", 0, USERINFO},
	{"http://:@example.com/", 0, USERINFO},
	{"https://:pass@example.com/", 0, USERINFO},
	{"http://example.com@93.184.216.34/", 0, USERINFO},
	{"http://a@127.0.0.1/", 0, USERINFO}, /* user info is what refuses it, before the address */
	{"http://user;auth=x@example.com/", 0, USERINFO},
	/* hosts that do not parse cleanly */
	{"http://ex%61mple.com/", 0, PERCENT},
	{"http://%31%32%37.0.0.1/", 0, PERCENT},
	{"http://example.com%00.evil/", 0, PERCENT},
	{"http://[fe80::1%25eth0]/", 0, PERCENT},
	{"http://exa\0mple.com/", 20, BYTES},
	{"http://example.com/\0", 20, BYTES},
	{"http://exa mple.com/", 0, BYTES},
	{"http://example.com/a b", 0, BYTES},
	{"http://example.com/\n", 0, BYTES},
	{"http://example.com\t/", 0, BYTES},
	{"http://example.com/\x7f", 0, BYTES},
	{"http://b\xc3\xbc" "cher.example/", 0, BYTES},
	{"http://example.com\\@evil.example/", 0, "URL contains a backslash"},
	{"http://1.2.3.4.5/", 0, NUMBER},
	{"http://256.1.1.1/", 0, NUMBER},
	{"http://4294967296/", 0, NUMBER},
	{"http://0x100000000/", 0, NUMBER},
	{"http://1.2.3.0x1ff/", 0, NUMBER},
	{"http://www.example.123/", 0, NUMBER},
	{"http://127.0.0.1./", 0, "URL host name ends in a dot"},
	{"http://example.com./", 0, "URL host name ends in a dot"},
	{"http://-example.com/", 0, "URL host name has a label that starts or ends with a hyphen"},
	{"http://example-.com/", 0, "URL host name has a label that starts or ends with a hyphen"},
	{"http://exa_mple.com/", 0, LDH},
	{"http://exa~mple.com/", 0, LDH},
	{"http://exa!mple.com/", 0, NOPARSE},
	{"http://a..b/", 0, "URL host name has an empty label"},
	{"http://.example.com/", 0, "URL host name has an empty label"},
	{"http://[::1/", 0, NOPARSE},
	{"http://[1.2.3.4]/", 0, NOPARSE},
	{"http://[::ffff:1.2.3.4.5]/", 0, NOPARSE},
	{"http://ex;ample.com/", 0, NOPARSE},
	{"http://exa<mple.com/", 0, NOPARSE},
	/* ports */
	{"http://example.com:0/", 0, PORT},
	{"http://example.com:65536/", 0, NOPARSE},
	{"http://example.com:-1/", 0, NOPARSE},
	{"http://example.com:80a/", 0, NOPARSE},
};

START_TEST(test_url_bad)
{
	struct rts_url u;
	const char *why = NULL;
	size_t len = bad_urls[_i].len ? bad_urls[_i].len : strlen(bad_urls[_i].in);
	int r = rts_url_parse(bad_urls[_i].in, len, &u, &why);
	ck_assert_msg(r == -EACCES, "%s: accepted", bad_urls[_i].in);
	ck_assert_msg(why && strcmp(why, bad_urls[_i].why) == 0, "%s: got \"%s\", want \"%s\"", bad_urls[_i].in,
		      why ? why : "(null)", bad_urls[_i].why);
	ck_assert_ptr_null(u.url);
	ck_assert_ptr_null(u.host);
}
END_TEST

/* The same URLs minus the bad part parse: the rule above is what refused them. */
START_TEST(test_url_bad_part_removed)
{
	static const char *const ok[] = {"http://example.com/", "http://93.184.216.34/", "http://example.com/ab",
					 "http://example.com:80/", "http://1.2.3.4/", "http://bcher.example/"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		struct rts_url u;
		const char *why = NULL;
		ck_assert_msg(rts_url_parse(ok[i], strlen(ok[i]), &u, &why) == 0, "%s: %s", ok[i], why);
		rts_url_release(&u);
	}
}
END_TEST

START_TEST(test_url_lengths)
{
	struct rts_url u;
	const char *why = NULL;
	/* the longest URL accepted, and one byte more */
	char *s = rts_xmalloc(RTS_URL_MAX + 2);
	memcpy(s, "http://example.com/", 19);
	memset(s + 19, 'a', RTS_URL_MAX + 1 - 19);
	s[RTS_URL_MAX + 1] = '\0';
	ck_assert_int_eq(rts_url_parse(s, RTS_URL_MAX, &u, &why), 0);
	rts_url_release(&u);
	ck_assert_int_eq(rts_url_parse(s, RTS_URL_MAX + 1, &u, &why), -EACCES);
	ck_assert_str_eq(why, "URL is too long");
	free(s);

	/* labels of 63 and 64, names of 253 and 254 */
	char host[300];
	memset(host, 'a', 63);
	strcpy(host + 63, ".example");
	cleanup_free char *u63 = rts_xasprintf("http://%s/", host);
	ck_assert_int_eq(rts_url_parse(u63, strlen(u63), &u, &why), 0);
	rts_url_release(&u);
	memset(host, 'a', 64);
	strcpy(host + 64, ".example");
	cleanup_free char *u64 = rts_xasprintf("http://%s/", host);
	ck_assert_int_eq(rts_url_parse(u64, strlen(u64), &u, &why), -EACCES);
	ck_assert_str_eq(why, "URL host name has a label longer than 63 bytes");
	/* 4 labels of 61, each with its dot (248), then a last label: 253 and 254 bytes */
	size_t n = 0;
	for (int i = 0; i < 4; i++) {
		memset(host + n, 'b', 61);
		n += 61;
		host[n++] = '.';
	}
	strcpy(host + n, "abcde");
	ck_assert_uint_eq(strlen(host), 253);
	cleanup_free char *u253 = rts_xasprintf("http://%s/", host);
	ck_assert_int_eq(rts_url_parse(u253, strlen(u253), &u, &why), 0);
	rts_url_release(&u);
	strcpy(host + n, "abcdef");
	cleanup_free char *u254 = rts_xasprintf("http://%s/", host);
	ck_assert_int_eq(rts_url_parse(u254, strlen(u254), &u, &why), -EACCES);
	ck_assert_str_eq(why, "URL host name is too long");
}
END_TEST

START_TEST(test_same_origin)
{
	struct rts_url a, b, c, d;
	const char *why;
	ck_assert_int_eq(rts_url_parse("http://Example.com/x", 20, &a, &why), 0);
	ck_assert_int_eq(rts_url_parse("http://example.com:80/y", 23, &b, &why), 0);
	ck_assert_int_eq(rts_url_parse("https://example.com/x", 21, &c, &why), 0);
	ck_assert_int_eq(rts_url_parse("http://example.com:81/", 22, &d, &why), 0);
	ck_assert(rts_url_same_origin(&a, &b));
	ck_assert(!rts_url_same_origin(&a, &c));
	ck_assert(!rts_url_same_origin(&a, &d));
	rts_url_release(&a);
	rts_url_release(&b);
	rts_url_release(&c);
	rts_url_release(&d);
}
END_TEST

START_TEST(test_check_public_range)
{
	const char *why = NULL;
	ck_assert_int_eq(rts_url_check_public("http://93.184.216.34/", 21, 0, NULL, &why), -EINVAL);
	ck_assert_int_eq(rts_url_check_public("http://93.184.216.34/", 21, RTS_FETCH_TIMEOUT_MAX_MS + 1, NULL, &why),
			 -EINVAL);
	ck_assert_int_eq(rts_url_check_public("http://93.184.216.34/", 21, RTS_FETCH_TIMEOUT_MAX_MS, NULL, &why), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("netaddr");
	TCase *tc = tcase_create("addresses");
	tcase_add_loop_test(tc, test_public, 0, RTS_ARRAY_SIZE(public_addrs));
	tcase_add_loop_test(tc, test_special, 0, RTS_ARRAY_SIZE(special_addrs));
	tcase_add_test(tc, test_other_family);
	suite_add_tcase(s, tc);
	tc = tcase_create("urls");
	tcase_add_loop_test(tc, test_url_good, 0, RTS_ARRAY_SIZE(good_urls));
	tcase_add_loop_test(tc, test_url_bad, 0, RTS_ARRAY_SIZE(bad_urls));
	tcase_add_loop_test(tc, test_literal_classified_as_dialed, 0, RTS_ARRAY_SIZE(literal_refusals));
	tcase_add_test(tc, test_literal_public);
	tcase_add_test(tc, test_url_bad_part_removed);
	tcase_add_test(tc, test_url_lengths);
	tcase_add_test(tc, test_same_origin);
	tcase_add_test(tc, test_check_public_range);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
