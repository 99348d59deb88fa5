/* SPDX-License-Identifier: Apache-2.0 */
/* The controlled fetch (common/fetch.h) end to end, over its test seams: names resolve to
 * public addresses from the rig's table (tests/unit/fetch_rig.h) and every vetted
 * connection is carried to tests/fakes/fetch_fake.py on loopback, with real TLS through a
 * test CA. No packet leaves loopback.
 *
 * Each refusal is checked three ways: the error and its reason (the rule that refused),
 * the rig's dial log (no connection was even opened towards a refused hop) and the fake's
 * record (nothing reached it). Where it helps, the same input minus the bad part passes. */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <curl/curl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "common/fetch.h"
#include "common/fetch_seams.h"
#include "common/util.h"
#include "tests/unit/fetch_rig.h"

/* One fetch with opts (NULL: the defaults). */
struct got {
	int r;
	const char *why;
	struct rts_fetch_result res;
	uint64_t ms;
};

static struct got fetch_with(const char *url, const struct rts_fetch_opts *opts)
{
	struct got g = {0};
	struct rts_fetch_opts d = RTS_FETCH_OPTS_DEFAULT;
	uint64_t t0 = rts_now_ms();
	g.r = rts_fetch(url, strlen(url), opts ? opts : &d, &g.res, &g.why);
	g.ms = rts_now_ms() - t0;
	return g;
}

static struct got fetch(const char *url)
{
	return fetch_with(url, NULL);
}

static void got_release(struct got *g)
{
	rts_fetch_result_release(&g->res);
}

/* A refusal or failure: r, the reason, an empty result. */
static void assert_failed(struct got *g, int r, const char *why, const char *url)
{
	ck_assert_msg(g->r == r, "%s: got %d (%s), want %d", url, g->r, g->why ? g->why : "", r);
	ck_assert_msg(g->why && strstr(g->why, why), "%s: reason \"%s\", want \"%s\"", url, g->why ? g->why : "", why);
	ck_assert_ptr_null(g->res.body);
	ck_assert_ptr_null(g->res.final_url);
	ck_assert_int_eq(g->res.status, 0);
}

static void assert_nothing_sent(void)
{
	ck_assert_uint_eq(rig_dials(), 0);
	ck_assert_uint_eq(rig_record_count(), 0);
}

static void setup(void)
{
	rig_reset();
}

/* ---- success paths ---- */

START_TEST(test_http)
{
	struct got g = fetch("http://www.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_int_eq(g.res.status, 200);
	ck_assert_str_eq(g.res.body, "hello from the fake\n");
	ck_assert_uint_eq(g.res.len, 20);
	ck_assert_str_eq(g.res.final_url, "http://www.example.com/text");
	ck_assert_str_eq(g.res.content_type, "text/plain");
	ck_assert_ptr_null(g.res.location);
	ck_assert_uint_eq(g.res.redirects, 0);
	/* resolved once, dialed at the vetted address */
	ck_assert_uint_eq(rig_lookups("www.example.com"), 1);
	ck_assert_uint_eq(rig_dials(), 1);
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_WEB);
	ck_assert_uint_eq(rig_dial_port(0), 80);
	cleanup_free char *rec = rig_record();
	ck_assert_ptr_nonnull(strstr(rec, "\"listener\": \"http4\", \"method\": \"GET\", \"path\": \"/text\""));
	ck_assert_ptr_nonnull(strstr(rec, "[\"Host\", \"www.example.com\"]"));
	/* Accept-Encoding is the fixed list */
	cleanup_free char *ae = rts_xasprintf("[\"Accept-Encoding\", \"%s\"]", rts_fetch_accept_encoding());
	ck_assert_ptr_nonnull(strstr(rec, ae));
	ck_assert_str_eq(rts_fetch_accept_encoding(), "gzip, deflate, br");
	got_release(&g);
}
END_TEST

START_TEST(test_https_verifies_the_name)
{
	struct got g = fetch("https://www.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(g.res.body, "hello from the fake\n");
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_WEB);
	ck_assert_uint_eq(rig_dial_port(0), 443);
	got_release(&g);

	/* The certificate also names the vetted address (IP SAN), so only a check of the
	 * URL's own host name refuses this one. */
	rig_resolve_add("www.other.test", RIG_ADDR_WEB);
	g = fetch("https://www.other.test/text");
	assert_failed(&g, -EPROTO, "TLS certificate verification failed", "www.other.test");
	ck_assert_uint_eq(rig_dials(), 2);
	got_release(&g);

	/* An address literal is verified as an address. */
	g = fetch("https://93.184.216.34/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(rig_lookups("93.184.216.34"), 0);
	got_release(&g);
}
END_TEST

START_TEST(test_ipv6)
{
	static const char *const urls[] = {"http://v6.example.com/text", "https://v6.example.com/text",
					   "https://[2606:2800:220:1:248:1893:25c8:1946]/text"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(urls); i++) {
		struct got g = fetch(urls[i]);
		ck_assert_msg(g.r == 0, "%s: %s", urls[i], g.why);
		ck_assert_str_eq(g.res.body, "hello from the fake\n");
		ck_assert_str_eq(rig_dial_addr(i), RIG_ADDR_WEB6);
		got_release(&g);
	}
	cleanup_free char *rec = rig_record();
	ck_assert_ptr_nonnull(strstr(rec, "\"listener\": \"https6\""));
}
END_TEST

/* Numeric IPv4 forms are dialed as the address they were classified as. */
START_TEST(test_ipv4_forms_dialed_as_classified)
{
	static const char *const urls[] = {"http://1572395042/text", "http://0x5db8d822/text",
					   "http://0135.0270.0330.042/text", "http://93.12113954/text",
					   "http://0x5d.0xb8.0xd8.0x22/text"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(urls); i++) {
		struct got g = fetch(urls[i]);
		ck_assert_msg(g.r == 0, "%s: %s", urls[i], g.why);
		ck_assert_str_eq(g.res.final_url, "http://93.184.216.34/text");
		ck_assert_uint_eq(rig_dials(), i + 1);
		ck_assert_str_eq(rig_dial_addr(i), RIG_ADDR_WEB);
		got_release(&g);
	}
}
END_TEST

START_TEST(test_status_and_interim)
{
	struct got g = fetch("http://www.example.com/status/404");
	ck_assert_int_eq(g.r, 0);
	ck_assert_int_eq(g.res.status, 404);
	ck_assert_str_eq(g.res.body, "status 404\n");
	got_release(&g);
	g = fetch("http://www.example.com/interim");
	ck_assert_int_eq(g.r, 0);
	ck_assert_int_eq(g.res.status, 200);
	ck_assert_str_eq(g.res.body, "after interim\n");
	got_release(&g);
}
END_TEST

/* No proxy, the environment's included: the request goes to the vetted address in
 * origin form, never to a proxy in absolute form. */
START_TEST(test_no_env_proxy)
{
	cleanup_free char *proxy = rts_xasprintf("http://127.0.0.1:%d", rig_ports.http4);
	setenv("http_proxy", proxy, 1);
	setenv("HTTPS_PROXY", proxy, 1);
	setenv("ALL_PROXY", proxy, 1);
	unsetenv("NO_PROXY");
	unsetenv("no_proxy");
	struct got g = fetch("http://www.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_WEB);
	cleanup_free char *rec = rig_record();
	ck_assert_ptr_nonnull(strstr(rec, "\"path\": \"/text\""));
	ck_assert_ptr_null(strstr(rec, "\"path\": \"http://"));
	got_release(&g);
}
END_TEST

/* The connection is pinned: a name only the rig knows (.invalid never resolves in DNS,
 * RFC 6761) is fetched, so libcurl cannot have resolved it again. */
START_TEST(test_pinned_no_second_resolution)
{
	rig_resolve_add("pinned.invalid", RIG_ADDR_WEB);
	struct got g = fetch("https://pinned.invalid/text");
	/* TLS fails on the name (the certificate is for example.com), after the connection
	 * to the pinned address was made: the dial log shows it. */
	assert_failed(&g, -EPROTO, "TLS certificate verification failed", "pinned.invalid");
	ck_assert_uint_eq(rig_lookups("pinned.invalid"), 1);
	ck_assert_uint_eq(rig_dials(), 1);
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_WEB);
	got_release(&g);
	g = fetch("http://pinned.invalid/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(rig_lookups("pinned.invalid"), 2);
	got_release(&g);
}
END_TEST

/* ---- addresses ---- */

static const struct {
	const char *url;
	const char *range;
} refused_literals[] = {
	{"http://127.0.0.1/text", "loopback (RFC 1122)"},
	{"http://2130706433/text", "loopback (RFC 1122)"},
	{"http://0177.0.0.1/text", "loopback (RFC 1122)"},
	{"http://0x7f.1/text", "loopback (RFC 1122)"},
	{"http://127.1/text", "loopback (RFC 1122)"},
	{"http://0x7f.0.0.01/text", "loopback (RFC 1122)"},
	{"http://[::1]/text", "loopback (RFC 4291)"},
	{"http://169.254.169.254/latest/meta-data/", "link-local (RFC 3927)"},
	{"http://[fd00:ec2::254]/latest/meta-data/", "unique-local (RFC 4193)"},
	{"http://10.0.0.1/text", "private (RFC 1918)"},
	{"https://192.168.0.1/text", "private (RFC 1918)"},
	{"http://[::ffff:127.0.0.1]/text", "IPv4-mapped"},
	{"http://[::ffff:93.184.216.34]/text", "IPv4-mapped"},
	{"http://[64:ff9b::7f00:1]/text", "NAT64"},
	{"http://0/text", "unspecified"},
	{"http://198.18.0.1/text", "benchmarking"},
	{"http://100.64.0.1/text", "shared address space"},
};

START_TEST(test_refused_literal)
{
	struct got g = fetch(refused_literals[_i].url);
	assert_failed(&g, -EACCES, refused_literals[_i].range, refused_literals[_i].url);
	assert_nothing_sent();
}
END_TEST

static const struct {
	const char *addrs;
	const char *range;
} refused_answers[] = {
	{"127.0.0.1", "loopback"},
	{"169.254.169.254", "link-local"},
	{"fd00:ec2::254", "unique-local"},
	{"10.1.2.3", "private"},
	{"172.16.0.1", "private"},
	{"100.64.0.1", "shared address space"},
	{"::1", "loopback (RFC 4291)"},
	{"fe80::1", "link-local (RFC 4291)"},
	{"2001:db8::1", "documentation"},
	{"224.0.0.1", "multicast"},
	{"255.255.255.255", "broadcast"},
	/* mixed answer sets: one private address refuses the whole answer */
	{RIG_ADDR_WEB ",10.0.0.1", "private (RFC 1918)"},
	{"10.0.0.1," RIG_ADDR_WEB, "private (RFC 1918)"},
	{RIG_ADDR_WEB "," RIG_ADDR_WEB6 ",::1", "loopback (RFC 4291)"},
	{RIG_ADDR_WEB6 ",::ffff:10.0.0.1", "IPv4-mapped"},
};

START_TEST(test_refused_answer)
{
	rig_resolve_add("host.example.com", refused_answers[_i].addrs);
	struct got g = fetch("https://host.example.com/text");
	assert_failed(&g, -EACCES, refused_answers[_i].range, refused_answers[_i].addrs);
	/* the reason names the range, never an address */
	ck_assert_ptr_null(strstr(g.why, "93.184"));
	ck_assert_ptr_null(strstr(g.why, "10.0"));
	ck_assert_uint_eq(rig_lookups("host.example.com"), 1);
	assert_nothing_sent();
}
END_TEST

START_TEST(test_mixed_minus_private_passes)
{
	rig_resolve_add("host.example.com", RIG_ADDR_WEB "," RIG_ADDR_WEB6);
	struct got g = fetch("https://host.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
}
END_TEST

START_TEST(test_no_such_name)
{
	rig_resolve_add("gone.example.com", "NXDOMAIN");
	rig_resolve_add("empty.example.com", "");
	struct got g = fetch("http://gone.example.com/");
	assert_failed(&g, -ENXIO, "host name does not resolve", "gone");
	g = fetch("http://empty.example.com/");
	assert_failed(&g, -ENXIO, "host name has no address", "empty");
	assert_nothing_sent();
}
END_TEST

/* A resolver that does not answer is abandoned at the deadline or on cancellation. */
START_TEST(test_slow_resolver)
{
	rig_resolve_add("slow.example.com", "SLOW");
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.timeout_ms = 300;
	struct got g = fetch_with("http://slow.example.com/text", &o);
	assert_failed(&g, -ETIMEDOUT, "name resolution timed out", "slow");
	ck_assert_msg(g.ms >= 250 && g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	const char *why = NULL;
	uint64_t t0 = rts_now_ms();
	ck_assert_int_eq(rts_url_check_public("http://slow.example.com/", 24, 300, NULL, &why), -ETIMEDOUT);
	ck_assert_str_eq(why, "name resolution timed out");
	ck_assert_uint_lt(rts_now_ms() - t0, 5000);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	o = RTS_FETCH_OPTS_DEFAULT;
	o.cancel.wake_fd = p[0];
	g = fetch_with("http://slow.example.com/text", &o);
	assert_failed(&g, -ECANCELED, "cancelled", "slow, woken");
	ck_assert_uint_lt(g.ms, 5000);
	close(p[0]);
	close(p[1]);
	assert_nothing_sent();
}
END_TEST

/* ---- URLs (the parser's own suite is check_netaddr; these show nothing is sent) ---- */

static const struct {
	const char *url;
	const char *why;
} refused_urls[] = {
	{"ftp://www.example.com/text", "URL scheme is not http or https"},
	{"file:///etc/passwd", "URL scheme is not http or https"},
	{"http://user:pw@www.example.com/text", "URL carries user info"},
	{"http://@www.example.com/text", "URL carries user info"},
	{"http://www.ex%61mple.com/text", "URL host is percent-encoded"},
	{"http://www.example.com./text", "URL host name ends in a dot"},
	{"http://www.example.com\\@x/", "URL contains a backslash"},
};

START_TEST(test_refused_url)
{
	struct got g = fetch(refused_urls[_i].url);
	assert_failed(&g, -EACCES, refused_urls[_i].why, refused_urls[_i].url);
	ck_assert_uint_eq(rig_lookups("www.example.com"), 0);
	assert_nothing_sent();
}
END_TEST

START_TEST(test_nul_in_url)
{
	static const char url[] = "http://www.example.com\0.evil.example/text";
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	struct rts_fetch_result res;
	const char *why = NULL;
	ck_assert_int_eq(rts_fetch(url, sizeof(url) - 1, &o, &res, &why), -EACCES);
	ck_assert_str_eq(why, "URL contains a space, a control or a non-ASCII byte");
	assert_nothing_sent();
}
END_TEST

/* ---- redirects ---- */

START_TEST(test_redirect_followed)
{
	struct got g = fetch("http://www.example.com/redirect/302?to=https://v6.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_int_eq(g.res.status, 200);
	ck_assert_str_eq(g.res.body, "hello from the fake\n");
	ck_assert_str_eq(g.res.final_url, "https://v6.example.com/text");
	ck_assert_uint_eq(g.res.redirects, 1);
	ck_assert_uint_eq(rig_record_count(), 2);
	got_release(&g);
	/* relative Location, each redirect status */
	static const char *const codes[] = {"301", "302", "303", "307", "308"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(codes); i++) {
		cleanup_free char *u = rts_xasprintf("https://www.example.com/redirect/%s?to=/text", codes[i]);
		g = fetch(u);
		ck_assert_msg(g.r == 0, "%s: %s", codes[i], g.why);
		ck_assert_str_eq(g.res.final_url, "https://www.example.com/text");
		got_release(&g);
	}
}
END_TEST

static const struct {
	const char *to;
	const char *why;
} refused_redirects[] = {
	{"http://127.0.0.1/text", "loopback (RFC 1122)"},
	{"http://2130706433/text", "loopback (RFC 1122)"},
	{"http://[::1]/text", "loopback (RFC 4291)"},
	{"http://169.254.169.254/latest/meta-data/", "link-local"},
	{"http://internal.example.com/text", "private (RFC 1918)"},
	{"file:///etc/passwd", "URL scheme is not http or https"},
	{"ftp://www.example.com/", "URL scheme is not http or https"},
	{"http://user@www.example.com/text", "URL carries user info"},
	{"gopher://www.example.com/", "URL scheme is not http or https"},
};

START_TEST(test_redirect_refused)
{
	rig_resolve_add("internal.example.com", "10.9.8.7");
	cleanup_free char *u = rts_xasprintf("http://www.example.com/redirect/302?to=%s", refused_redirects[_i].to);
	struct got g = fetch(u);
	assert_failed(&g, -EACCES, refused_redirects[_i].why, refused_redirects[_i].to);
	/* the first hop only */
	ck_assert_uint_eq(rig_dials(), 1);
	ck_assert_uint_eq(rig_record_count(), 1);
}
END_TEST

/* DNS rebinding: the same name, public for the first hop, loopback for the second. */
START_TEST(test_rebinding)
{
	rig_resolve_add("rebind.example.com", RIG_ADDR_WEB);
	rig_resolve_add("rebind.example.com", "127.0.0.1");
	struct got g = fetch("http://rebind.example.com/redirect/302?to=/text");
	assert_failed(&g, -EACCES, "loopback (RFC 1122)", "rebind");
	ck_assert_uint_eq(rig_lookups("rebind.example.com"), 2);
	ck_assert_uint_eq(rig_dials(), 1);
	ck_assert_uint_eq(rig_record_count(), 1);
}
END_TEST

START_TEST(test_rebinding_control)
{
	/* Public both times: followed, and the name was resolved once per hop. */
	rig_resolve_add("rebind.example.com", RIG_ADDR_WEB);
	rig_resolve_add("rebind.example.com", RIG_ADDR_WEB6);
	struct got g = fetch("http://rebind.example.com/redirect/302?to=/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(rig_lookups("rebind.example.com"), 2);
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_WEB);
	ck_assert_str_eq(rig_dial_addr(1), RIG_ADDR_WEB6);
	got_release(&g);
}
END_TEST

START_TEST(test_redirect_limit)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.max_redirects = 3;
	struct got g = fetch_with("http://www.example.com/chain/3", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(g.res.body, "end of chain\n");
	ck_assert_uint_eq(g.res.redirects, 3);
	got_release(&g);
	rig_reset();
	g = fetch_with("http://www.example.com/chain/4", &o);
	assert_failed(&g, -ELOOP, "too many redirects", "chain/4");
	ck_assert_uint_eq(rig_record_count(), 4);
	/* the default is five, zero means none */
	rig_reset();
	g = fetch("http://www.example.com/chain/5");
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
	g = fetch("http://www.example.com/chain/6");
	assert_failed(&g, -ELOOP, "too many redirects", "chain/6");
	rig_reset();
	o.max_redirects = 0;
	g = fetch_with("http://www.example.com/chain/1", &o);
	assert_failed(&g, -ELOOP, "too many redirects", "chain/1");
	ck_assert_uint_eq(rig_record_count(), 1);
}
END_TEST

START_TEST(test_no_follow)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.follow_redirects = false;
	struct got g = fetch_with("http://www.example.com/redirect/307?to=/text", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_int_eq(g.res.status, 307);
	ck_assert_str_eq(g.res.body, "moved\n");
	ck_assert_str_eq(g.res.location, "http://www.example.com/text");
	ck_assert_str_eq(g.res.final_url, "http://www.example.com/redirect/307?to=/text");
	ck_assert_uint_eq(rig_record_count(), 1);
	got_release(&g);
	/* The Location is handed back, not vetted: the caller fetches it through rts_fetch(). */
	g = fetch_with("http://www.example.com/redirect/302?to=http://127.0.0.1/", &o);
	ck_assert_int_eq(g.r, 0);
	ck_assert_str_eq(g.res.location, "http://127.0.0.1/");
	got_release(&g);
	/* A 3xx without a Location is a response like any other, followed or not. */
	g = fetch("http://www.example.com/redirect-nolocation");
	ck_assert_int_eq(g.r, 0);
	ck_assert_int_eq(g.res.status, 302);
	ck_assert_ptr_null(g.res.location);
	got_release(&g);
}
END_TEST

/* ---- headers ---- */

START_TEST(test_extra_headers)
{
	static const char *const headers[] = {"X-Trusted: yes", "Authorization: Bearer host-secret", NULL};
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.headers = headers;
	/* same origin: sent on both hops */
	struct got g = fetch_with("https://www.example.com/redirect/302?to=/headers", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_ptr_nonnull(strstr(g.res.body, "[\"X-Trusted\", \"yes\"]"));
	ck_assert_ptr_nonnull(strstr(g.res.body, "[\"Authorization\", \"Bearer host-secret\"]"));
	got_release(&g);
	/* another origin (here another host; scheme and port count too): dropped */
	g = fetch_with("https://www.example.com/redirect/302?to=https://v6.example.com/headers", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_ptr_null(strstr(g.res.body, "X-Trusted"));
	ck_assert_ptr_null(strstr(g.res.body, "host-secret"));
	got_release(&g);
	/* and they stay dropped when the chain comes back */
	cleanup_free char *back = rts_xasprintf("https://www.example.com/redirect/302?to=%s",
						"https://v6.example.com/redirect/302%3Fto%3Dhttps://www.example.com/headers");
	g = fetch_with(back, &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.redirects, 2);
	ck_assert_ptr_null(strstr(g.res.body, "host-secret"));
	got_release(&g);
}
END_TEST

static const struct {
	const char *header;
	const char *why;
} refused_headers[] = {
	{"Accept-Encoding: identity", "one the fetch sets itself"},
	{"accept-encoding: gzip", "one the fetch sets itself"},
	{"Host: evil.example", "one the fetch sets itself"},
	{"Content-Length: 5", "one the fetch sets itself"},
	{"Transfer-Encoding: chunked", "one the fetch sets itself"},
	{"Proxy-Authorization: x", "one the fetch sets itself"},
	{"Connection: keep-alive", "one the fetch sets itself"},
	{"X-A: b\r\nX-B: c", "control or non-ASCII byte"},
	{"X-A: b\nHost: evil", "control or non-ASCII byte"},
	{"Bad Name: x", "not an HTTP token"},
	{"X-Empty:", "empty value"},
	{"X-Empty:   ", "empty value"},
	{"NoColon", "not \"Name: value\""},
	{": value", "not \"Name: value\""},
};

START_TEST(test_header_refused)
{
	const char *headers[] = {"X-Fine: yes", refused_headers[_i].header, NULL};
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.headers = headers;
	struct got g = fetch_with("http://www.example.com/headers", &o);
	assert_failed(&g, -EINVAL, refused_headers[_i].why, refused_headers[_i].header);
	assert_nothing_sent();
}
END_TEST

START_TEST(test_header_limits)
{
	const char *many[RTS_FETCH_EXTRA_HEADERS_MAX + 2];
	for (size_t i = 0; i < RTS_FETCH_EXTRA_HEADERS_MAX + 1; i++)
		many[i] = "X-Many: 1";
	many[RTS_FETCH_EXTRA_HEADERS_MAX + 1] = NULL;
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.headers = many;
	struct got g = fetch_with("http://www.example.com/headers", &o);
	assert_failed(&g, -EINVAL, "too many extra request headers", "33 headers");
	many[RTS_FETCH_EXTRA_HEADERS_MAX] = NULL;
	g = fetch_with("http://www.example.com/headers", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
	cleanup_free char *longh = rts_xmalloc(RTS_FETCH_EXTRA_HEADER_LEN_MAX + 2);
	memcpy(longh, "X-Long: ", 8);
	memset(longh + 8, 'v', RTS_FETCH_EXTRA_HEADER_LEN_MAX + 1 - 8);
	longh[RTS_FETCH_EXTRA_HEADER_LEN_MAX + 1] = '\0';
	const char *one[] = {longh, NULL};
	o.headers = one;
	g = fetch_with("http://www.example.com/headers", &o);
	assert_failed(&g, -EINVAL, "extra request header is too long", "long header");
}
END_TEST

/* ---- options ---- */

START_TEST(test_option_ranges)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	ck_assert_uint_eq(o.timeout_ms, 60000);
	ck_assert_uint_eq(o.max_redirects, 5);
	ck_assert_uint_eq(o.max_bytes, 5u * 1024 * 1024);
	ck_assert(o.follow_redirects);
	struct {
		uint32_t timeout, redirects;
		size_t bytes;
		const char *why;
	} bad[] = {
		{0, 5, 1024, "timeout out of range"},
		{120001, 5, 1024, "timeout out of range"},
		{1000, 11, 1024, "redirect limit out of range"},
		{1000, 5, 0, "size limit out of range"},
		{1000, 5, 32u * 1024 * 1024 + 1, "size limit out of range"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		o.timeout_ms = bad[i].timeout;
		o.max_redirects = bad[i].redirects;
		o.max_bytes = bad[i].bytes;
		struct got g = fetch_with("http://www.example.com/text", &o);
		assert_failed(&g, -EINVAL, bad[i].why, "options");
	}
	assert_nothing_sent();
	/* the edges of each range are accepted */
	o.timeout_ms = 120000;
	o.max_redirects = 10;
	o.max_bytes = 32u * 1024 * 1024;
	struct got g = fetch_with("http://www.example.com/text", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
	o.max_bytes = 1;
	g = fetch_with("http://www.example.com/bytes/1", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(g.res.body, "x");
	got_release(&g);
}
END_TEST

/* ---- sizes and encodings ---- */

START_TEST(test_body_limit)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.max_bytes = 100000;
	struct got g = fetch_with("http://www.example.com/bytes/100000", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.len, 100000);
	got_release(&g);
	g = fetch_with("http://www.example.com/chunked/100000", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.len, 100000);
	got_release(&g);
	/* one byte more, announced by Content-Length or not */
	g = fetch_with("http://www.example.com/bytes/100001", &o);
	assert_failed(&g, -EFBIG, "larger than the limit", "bytes/100001");
	g = fetch_with("http://www.example.com/chunked/100001", &o);
	assert_failed(&g, -EFBIG, "larger than the limit", "chunked/100001");
	/* the default: 5 MiB */
	g = fetch("https://www.example.com/bytes/5242880");
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
	g = fetch("https://www.example.com/chunked/5242881");
	assert_failed(&g, -EFBIG, "larger than the limit", "chunked/5242881");
}
END_TEST

START_TEST(test_decoded)
{
	static const char *const codings[] = {"gzip", "deflate", "br"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(codings); i++) {
		cleanup_free char *u = rts_xasprintf("http://www.example.com/%s/1048576", codings[i]);
		struct got g = fetch(u);
		ck_assert_msg(g.r == 0, "%s: %s", codings[i], g.why);
		ck_assert_uint_eq(g.res.len, 1048576);
		ck_assert_int_eq(g.res.body[0], 0);
		ck_assert_int_eq(g.res.body[1048575], 0);
		got_release(&g);
	}
}
END_TEST

/* Compression bombs: 64 MiB of zeros in a few kilobytes (gzip, deflate) or bytes (br)
 * stop at the decoded limit, and the process never held more than about that much. */
START_TEST(test_bomb)
{
	static const char *const codings[] = {"gzip", "deflate", "br"};
	cleanup_free char *u = rts_xasprintf("https://www.example.com/%s/67108864", codings[_i]);
	struct rusage before, after;
	getrusage(RUSAGE_SELF, &before);
	struct got g = fetch(u);
	getrusage(RUSAGE_SELF, &after);
	assert_failed(&g, -EFBIG, "larger than the limit", codings[_i]);
	/* Peak RSS grew by less than the 64 MiB the bomb holds (5 MiB of body plus buffers;
	 * the sanitizers' own overhead included). */
	ck_assert_msg(after.ru_maxrss - before.ru_maxrss < 48 * 1024, "peak RSS grew by %ld KiB",
		      after.ru_maxrss - before.ru_maxrss);
	/* a smaller limit stops it as well, and the same body under the limit decodes */
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.max_bytes = 1000;
	g = fetch_with(u, &o);
	assert_failed(&g, -EFBIG, "larger than the limit", codings[_i]);
	cleanup_free char *small = rts_xasprintf("https://www.example.com/%s/1000", codings[_i]);
	g = fetch_with(small, &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.len, 1000);
	got_release(&g);
}
END_TEST

/* The wire limit counts the compressed bytes: random data grows under gzip, so the
 * decoded body fits while the wire body does not. */
START_TEST(test_wire_limit)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.max_bytes = 100000;
	struct got g = fetch_with("http://www.example.com/gzip-random/99000", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.len, 99000);
	got_release(&g);
	g = fetch_with("http://www.example.com/gzip-random-chunked/99000", &o);
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(g.res.len, 99000);
	got_release(&g);
	/* refused by its Content-Length, before the body */
	g = fetch_with("http://www.example.com/gzip-random/99990", &o);
	assert_failed(&g, -EFBIG, "larger than the limit", "gzip-random");
	/* counted as it arrives */
	g = fetch_with("http://www.example.com/gzip-random-chunked/99990", &o);
	assert_failed(&g, -EFBIG, "larger than the limit", "gzip-random-chunked");
}
END_TEST

static const char *const refused_encodings[] = {"zstd", "compress", "gzip%2C%20br", "gzip%2Cgzip", "br%2C%20gzip",
						 "x-unknown"};

START_TEST(test_encoding_refused)
{
	cleanup_free char *u = rts_xasprintf("http://www.example.com/encoding/%s", refused_encodings[_i]);
	struct got g = fetch(u);
	assert_failed(&g, -EBADMSG, "content encoding that was not offered", refused_encodings[_i]);
	/* the reason never repeats what the server sent */
	ck_assert_ptr_null(strstr(g.why, "zstd"));
}
END_TEST

START_TEST(test_encoding_other)
{
	struct got g = fetch("http://www.example.com/encoding/identity");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(g.res.body, "x");
	got_release(&g);
	static const char *const codings[] = {"gzip", "deflate", "br"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(codings); i++) {
		cleanup_free char *u = rts_xasprintf("http://www.example.com/corrupt/%s", codings[i]);
		g = fetch(u);
		assert_failed(&g, -EBADMSG, "does not decode", codings[i]);
	}
}
END_TEST

/* ---- headers from the server ---- */

START_TEST(test_huge_headers)
{
	struct got g = fetch("http://www.example.com/manyheaders/10");
	ck_assert_msg(g.r == 0, "%s", g.why);
	got_release(&g);
	g = fetch("http://www.example.com/manyheaders/1000");
	assert_failed(&g, -EMSGSIZE, "response headers are too large", "manyheaders");
	ck_assert_ptr_null(strstr(g.why, "X-Many"));
	g = fetch("https://www.example.com/bigheader/1048576");
	assert_failed(&g, -EMSGSIZE, "response headers are too large", "bigheader");
	g = fetch("https://www.example.com/bigheader/70000");
	assert_failed(&g, -EMSGSIZE, "response headers are too large", "bigheader");
}
END_TEST

/* ---- time ---- */

START_TEST(test_slow_server)
{
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.timeout_ms = 500;
	struct got g = fetch_with("http://www.example.com/hang", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "hang");
	ck_assert_msg(g.ms >= 450 && g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	g = fetch_with("https://www.example.com/dribble", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "dribble");
	ck_assert_msg(g.ms >= 450 && g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	/* the smallest timeout there is */
	o.timeout_ms = 1;
	g = fetch_with("http://www.example.com/hang", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "1 ms");
}
END_TEST

/* A connection that never completes (TCP or TLS) gets RTS_FETCH_CONNECT_MS, then the next
 * vetted address is tried. */
START_TEST(test_connect_fallback)
{
	static const char *const first[] = {RIG_ADDR_BLACKHOLE, RIG_ADDR_TLSHANG};
	rig_resolve_add("fb.example.com", _i == 0 ? RIG_ADDR_BLACKHOLE "," RIG_ADDR_WEB : RIG_ADDR_TLSHANG "," RIG_ADDR_WEB);
	struct got g = fetch("https://fb.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_str_eq(g.res.body, "hello from the fake\n");
	ck_assert_uint_eq(rig_dials(), 2);
	ck_assert_str_eq(rig_dial_addr(0), first[_i]);
	ck_assert_str_eq(rig_dial_addr(1), RIG_ADDR_WEB);
	/* The first address had its own deadline, not the 60 s of the whole fetch. */
	ck_assert_msg(g.ms >= RTS_FETCH_CONNECT_MS - 100 && g.ms < RTS_FETCH_CONNECT_MS + 5000, "took %" PRIu64 " ms",
		      g.ms);
	ck_assert_uint_eq(rig_record_count(), 1);
	got_release(&g);
}
END_TEST

START_TEST(test_fallback_refused_and_within_list)
{
	rig_resolve_add("fb.example.com", RIG_ADDR_CLOSED "," RIG_ADDR_WEB);
	struct got g = fetch("http://fb.example.com/text");
	ck_assert_msg(g.r == 0, "%s", g.why);
	ck_assert_uint_eq(rig_dials(), 2);
	got_release(&g);
	/* Every address fails: each vetted one was tried once, nothing else. */
	rig_reset();
	rig_resolve_add("dead.example.com", RIG_ADDR_CLOSED "," RIG_ADDR_BLACKHOLE);
	g = fetch("http://dead.example.com/text");
	assert_failed(&g, -ECONNREFUSED, "cannot connect to the host", "dead");
	ck_assert_uint_eq(rig_dials(), 2);
	ck_assert_str_eq(rig_dial_addr(0), RIG_ADDR_CLOSED);
	ck_assert_str_eq(rig_dial_addr(1), RIG_ADDR_BLACKHOLE);
	ck_assert_uint_eq(rig_lookups("dead.example.com"), 1);
}
END_TEST

START_TEST(test_fallback_under_whole_deadline)
{
	rig_resolve_add("fb.example.com", RIG_ADDR_BLACKHOLE "," RIG_ADDR_WEB);
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.timeout_ms = 1000;
	struct got g = fetch_with("http://fb.example.com/text", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "deadline");
	ck_assert_msg(g.ms >= 950 && g.ms < 2900, "took %" PRIu64 " ms", g.ms);
	ck_assert_uint_eq(rig_dials(), 1);
}
END_TEST

/* Once connected, a failure is not retried elsewhere: the request may have been sent. */
START_TEST(test_no_fallback_once_connected)
{
	rig_resolve_add("fb.example.com", RIG_ADDR_WEB "," RIG_ADDR_WEB6);
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.timeout_ms = RTS_FETCH_CONNECT_MS + 1000;
	struct got g = fetch_with("http://fb.example.com/hang", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "hang");
	ck_assert_uint_eq(rig_dials(), 1);
	ck_assert_uint_eq(rig_record_count(), 1);
}
END_TEST

/* ---- cancellation ---- */

/* Wake the fetch once its request has reached the fake (or after 10 s): the transfer is
 * in flight when it is cancelled. */
static void *wake_when_requested(void *arg)
{
	int fd = *(int *)arg;
	uint64_t deadline = rts_now_ms() + 10000;
	while (rig_record_count() == 0 && rts_now_ms() < deadline)
		usleep(10 * 1000);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	return NULL;
}

struct hangup {
	int fd;
};

static void *hang_up_when_requested(void *arg)
{
	struct hangup *h = arg;
	uint64_t deadline = rts_now_ms() + 10000;
	while (rig_record_count() == 0 && rts_now_ms() < deadline)
		usleep(10 * 1000);
	close(h->fd);
	return NULL;
}

static bool flag_set(void *arg)
{
	return *(volatile bool *)arg;
}

START_TEST(test_cancel)
{
	/* the wake descriptor */
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pthread_t th;
	pthread_create(&th, NULL, wake_when_requested, &p[1]);
	struct rts_fetch_opts o = RTS_FETCH_OPTS_DEFAULT;
	o.cancel.wake_fd = p[0];
	struct got g = fetch_with("http://www.example.com/hang", &o);
	pthread_join(th, NULL);
	assert_failed(&g, -ECANCELED, "cancelled", "wake_fd");
	ck_assert_uint_eq(rig_record_count(), 1);
	ck_assert_msg(g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	/* the caller's connection hanging up (brokerd's worker connection) */
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	rig_reset();
	o = RTS_FETCH_OPTS_DEFAULT;
	o.cancel.hangup_fd = sp[0];
	struct hangup h = {.fd = sp[1]};
	pthread_create(&th, NULL, hang_up_when_requested, &h);
	g = fetch_with("http://www.example.com/hang", &o);
	pthread_join(th, NULL);
	assert_failed(&g, -ECANCELED, "cancelled", "hangup_fd");
	ck_assert_uint_eq(rig_record_count(), 1);
	ck_assert_msg(g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	close(sp[0]);
	/* the predicate (asked at least once a second) */
	bool flag = true;
	o = RTS_FETCH_OPTS_DEFAULT;
	o.cancel.cancelled = flag_set;
	o.cancel.arg = &flag;
	g = fetch_with("http://www.example.com/text", &o);
	assert_failed(&g, -ECANCELED, "cancelled", "predicate");
	ck_assert_uint_eq(rig_dials(), 1);
	/* the caller's deadline, earlier than the fetch's own timeout */
	o = RTS_FETCH_OPTS_DEFAULT;
	o.cancel.deadline_ms = rts_now_ms() + 300;
	g = fetch_with("http://www.example.com/hang", &o);
	assert_failed(&g, -ETIMEDOUT, "timed out", "deadline");
	ck_assert_msg(g.ms < 5000, "took %" PRIu64 " ms", g.ms);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* ---- the public-URL check never connects ---- */

START_TEST(test_check_public)
{
	const char *why = NULL;
	ck_assert_int_eq(rts_url_check_public("https://www.example.com/x", 25, 1000, NULL, &why), 0);
	ck_assert_uint_eq(rig_lookups("www.example.com"), 1);
	rig_resolve_add("mixed.example.com", RIG_ADDR_WEB ",192.168.1.1");
	ck_assert_int_eq(rts_url_check_public("http://mixed.example.com/", 25, 1000, NULL, &why), -EACCES);
	ck_assert_str_eq(why, "address not public: private (RFC 1918)");
	ck_assert_int_eq(rts_url_check_public("http://user@www.example.com/", 28, 1000, NULL, &why), -EACCES);
	ck_assert_str_eq(why, "URL carries user info");
	assert_nothing_sent();
}
END_TEST

/* ---- generic errors ---- */

START_TEST(test_errors_are_generic)
{
	/* Reasons come from fixed text: nothing of the URL, the addresses or the response. */
	rig_resolve_add("mixed.example.com", RIG_ADDR_WEB ",10.0.0.1");
	static const char *const urls[] = {"http://mixed.example.com/secret-path", "http://www.example.com/manyheaders/2000",
					   "http://www.example.com/encoding/zstd", "http://www.example.com/chain/9",
					   "http://www.example.com/corrupt/gzip", "https://www.example.com/bigheader/200000"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(urls); i++) {
		struct got g = fetch(urls[i]);
		ck_assert_int_lt(g.r, 0);
		ck_assert_ptr_null(strstr(g.why, "example"));
		ck_assert_ptr_null(strstr(g.why, "secret"));
		ck_assert_ptr_null(strstr(g.why, "93."));
		ck_assert_ptr_null(strstr(g.why, "10.0"));
		ck_assert_ptr_null(strstr(g.why, "X-"));
		ck_assert_ptr_null(strstr(g.why, "zstd"));
		ck_assert_ptr_null(strstr(g.why, "chain"));
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fetch");
	TCase *tc = tcase_create("fetch");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_http);
	tcase_add_test(tc, test_https_verifies_the_name);
	tcase_add_test(tc, test_ipv6);
	tcase_add_test(tc, test_ipv4_forms_dialed_as_classified);
	tcase_add_test(tc, test_status_and_interim);
	tcase_add_test(tc, test_no_env_proxy);
	tcase_add_test(tc, test_pinned_no_second_resolution);
	tcase_add_loop_test(tc, test_refused_literal, 0, RTS_ARRAY_SIZE(refused_literals));
	tcase_add_loop_test(tc, test_refused_answer, 0, RTS_ARRAY_SIZE(refused_answers));
	tcase_add_test(tc, test_mixed_minus_private_passes);
	tcase_add_test(tc, test_no_such_name);
	tcase_add_test(tc, test_slow_resolver);
	tcase_add_loop_test(tc, test_refused_url, 0, RTS_ARRAY_SIZE(refused_urls));
	tcase_add_test(tc, test_nul_in_url);
	tcase_add_test(tc, test_redirect_followed);
	tcase_add_loop_test(tc, test_redirect_refused, 0, RTS_ARRAY_SIZE(refused_redirects));
	tcase_add_test(tc, test_rebinding);
	tcase_add_test(tc, test_rebinding_control);
	tcase_add_test(tc, test_redirect_limit);
	tcase_add_test(tc, test_no_follow);
	tcase_add_test(tc, test_extra_headers);
	tcase_add_loop_test(tc, test_header_refused, 0, RTS_ARRAY_SIZE(refused_headers));
	tcase_add_test(tc, test_header_limits);
	tcase_add_test(tc, test_option_ranges);
	tcase_add_test(tc, test_body_limit);
	tcase_add_test(tc, test_decoded);
	tcase_add_loop_test(tc, test_bomb, 0, 3);
	tcase_add_test(tc, test_wire_limit);
	tcase_add_loop_test(tc, test_encoding_refused, 0, RTS_ARRAY_SIZE(refused_encodings));
	tcase_add_test(tc, test_encoding_other);
	tcase_add_test(tc, test_huge_headers);
	tcase_add_test(tc, test_slow_server);
	tcase_add_loop_test(tc, test_connect_fallback, 0, 2);
	tcase_add_test(tc, test_fallback_refused_and_within_list);
	tcase_add_test(tc, test_fallback_under_whole_deadline);
	tcase_add_test(tc, test_no_fallback_once_connected);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_check_public);
	tcase_add_test(tc, test_errors_are_generic);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rig_start(RTS_SRCDIR);
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	rig_stop();
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
