/* SPDX-License-Identifier: Apache-2.0 */
/* The broker's HTTP decisions without sockets: route matching on the raw target, the
 * header allow-list, the error bodies and statuses, the upstream Content-Type check. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "brokerd/http.h"
#include "brokerd/upstream.h"
#include "common/conf.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

static struct rts_config *cfg;

static void setup(void)
{
	static const char text[] =
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\","
		"\"tools\":[{\"name\":\"clock\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/date\"]}],"
		"\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp.example/\",\"tools\":[{\"name\":\"search\","
		"\"description\":\"d\",\"parameters\":{}}]}]}";
	json_object *root = NULL;
	const char *why = NULL;
	char err[512];
	ck_assert_int_eq(rts_json_parse(text, strlen(text), 64, &root, &why), 0);
	cfg = rts_config_from_json(root, "test.json", err, sizeof(err));
	json_object_put(root);
	ck_assert_msg(cfg != NULL, "%s", err);
}

static void teardown(void)
{
	rts_config_free(cfg);
}

START_TEST(test_routes_match)
{
	const char *name = "x";
	const struct brokerd_route *r = brokerd_route_match(cfg, "/model", &name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->kind, "model");
	ck_assert_ptr_null(name);
	ck_assert(r->handle == brokerd_model_handle);

	r = brokerd_route_match(cfg, "/tools/clock", &name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->kind, "tool");
	ck_assert_str_eq(name, "clock");
	ck_assert(r->handle == brokerd_tool_handle);

	r = brokerd_route_match(cfg, "/mcp/docs", &name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->kind, "mcp");
	ck_assert_str_eq(name, "docs");
	ck_assert(r->handle == brokerd_mcp_handle);
}
END_TEST

static const char *const not_routes[] = {
	"",
	"*",
	"/",
	"/model/",
	"/model?x=1",
	"/model#frag",
	"/model/../model",
	"//model",
	"/Model",
	"/%6dodel",
	"/model%2f",
	"http://broker/model",
	"/model ",
	"/tools/",
	"/tools",
	"/tools/clock/",
	"/tools/clock?x=1",
	"/tools/clock#x",
	"/tools/%63lock",
	"/tools/./clock",
	"/tools/clock/..",
	"/tools/../model",
	"/tools/nope",
	"/tools/docs",
	"/tools//clock",
	"/mcp/",
	"/mcp/docs/",
	"/mcp/docs/search",
	"/mcp/clock",
	"/mcp/docs?x",
	"/anthropic/v1/messages",
	"/tools/fetch", /* fetch is not enabled and no host tool has that name */
};

START_TEST(test_routes_refused)
{
	const char *name = "x";
	ck_assert_msg(brokerd_route_match(cfg, not_routes[_i], &name) == NULL, "matched: '%s'", not_routes[_i]);
	ck_assert_ptr_null(name);
	ck_assert_ptr_null(brokerd_route_match(cfg, NULL, &name));
}
END_TEST

static struct rts_config *config_of(const char *text)
{
	json_object *root = NULL;
	const char *why = NULL;
	char err[512];
	ck_assert_int_eq(rts_json_parse(text, strlen(text), 64, &root, &why), 0);
	struct rts_config *c = rts_config_from_json(root, "test.json", err, sizeof(err));
	json_object_put(root);
	ck_assert_msg(c != NULL, "%s", err);
	return c;
}

/* host_fetch's route exists exactly while fetch.enabled, as one exact target; with fetch
 * off, /tools/fetch is an ordinary host tool's route when one has that name. */
START_TEST(test_fetch_route)
{
	struct rts_config *on = config_of(
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\",\"fetch\":{\"enabled\":true},"
		"\"tools\":[{\"name\":\"clock\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/date\"]}]}");
	const char *name = "x";
	const struct brokerd_route *r = brokerd_route_match(on, "/tools/fetch", &name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->kind, "fetch");
	ck_assert(r->handle == brokerd_fetch_handle);
	ck_assert_ptr_null(name);
	r = brokerd_route_match(on, "/tools/clock", &name);
	ck_assert(r && r->handle == brokerd_tool_handle);
	static const char *const not_fetch[] = {"/tools/fetch/", "/tools/fetch?url=x", "/tools/fetch#x", "/tools/fetchx",
						"/tools/Fetch", "/tools/%66etch", "/fetch", "/tools//fetch"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(not_fetch); i++) {
		name = "x";
		ck_assert_msg(brokerd_route_match(on, not_fetch[i], &name) == NULL, "matched: '%s'", not_fetch[i]);
	}
	rts_config_free(on);

	struct rts_config *tool = config_of(
		"{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\",\"fetch\":{\"enabled\":false},"
		"\"tools\":[{\"name\":\"fetch\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/date\"]}]}");
	r = brokerd_route_match(tool, "/tools/fetch", &name);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->kind, "tool");
	ck_assert(r->handle == brokerd_tool_handle);
	ck_assert_str_eq(name, "fetch");
	rts_config_free(tool);
}
END_TEST

/* A header field from two string literals. */
#define H(n, v)                                                                                                        \
	((struct brokerd_header){.name = (n), .name_len = sizeof(n) - 1, .value = (v), .value_len = sizeof(v) - 1})
#define AUTH_OK H("Authorization", "Bearer " RTS_DUMMY_KEY)

static enum brokerd_result check(const struct brokerd_header *h, size_t n, size_t *len)
{
	return brokerd_headers_check(h, n, len);
}

START_TEST(test_headers_good)
{
	struct brokerd_header h[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json"),
				     H("Content-Length", "42")};
	size_t len = 0;
	ck_assert_int_eq(check(h, 4, &len), BROKERD_OK);
	ck_assert_uint_eq(len, 42);
	/* names are case-insensitive, order does not matter */
	struct brokerd_header h2[] = {H("content-length", "0"), H("HOST", "broker"),
				      H("authorization", "Bearer " RTS_DUMMY_KEY), H("content-type", "Application/JSON")};
	ck_assert_int_eq(check(h2, 4, &len), BROKERD_OK);
	ck_assert_uint_eq(len, 0);
	struct brokerd_header h3[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json"),
				      H("Content-Length", "262144")};
	ck_assert_int_eq(check(h3, 4, &len), BROKERD_OK);
	ck_assert_uint_eq(len, 256 * 1024);
}
END_TEST

START_TEST(test_headers_refused)
{
	size_t len = 7;
	/* each one is a valid set with one field swapped or added */
	struct {
		struct brokerd_header extra;
		enum brokerd_result want;
	} cases[] = {
		{H("X-Forwarded-For", "1.2.3.4"), BROKERD_BAD_REQUEST},
		{H("Forwarded", "for=x"), BROKERD_BAD_REQUEST},
		{H("Cookie", "a=b"), BROKERD_BAD_REQUEST},
		{H("Proxy-Authorization", "Basic x"), BROKERD_BAD_REQUEST},
		{H("Connection", "keep-alive"), BROKERD_BAD_REQUEST},
		{H("Transfer-Encoding", "chunked"), BROKERD_BAD_REQUEST},
		{H("Expect", "100-continue"), BROKERD_BAD_REQUEST},
		{H("User-Agent", "curl"), BROKERD_BAD_REQUEST},
		{H("Content-Length", "42"), BROKERD_BAD_REQUEST}, /* a second one */
		{H("Host", "broker"), BROKERD_BAD_REQUEST},
		{H("Authorization", "Bearer " RTS_DUMMY_KEY), BROKERD_BAD_REQUEST},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		struct brokerd_header h[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json"),
					     H("Content-Length", "42"), cases[i].extra};
		ck_assert_msg(check(h, 5, &len) == cases[i].want, "case %zu (%s) not refused", i, cases[i].extra.name);
	}
}
END_TEST

static enum brokerd_result one_swapped(struct brokerd_header swapped, int pos)
{
	struct brokerd_header h[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json"),
				     H("Content-Length", "42")};
	h[pos] = swapped;
	size_t len;
	return check(h, 4, &len);
}

START_TEST(test_header_values)
{
	ck_assert_int_eq(one_swapped(H("Authorization", "Bearer sk-real-key"), 1), BROKERD_UNAUTHORIZED);
	ck_assert_int_eq(one_swapped(H("Authorization", "bearer " RTS_DUMMY_KEY), 1), BROKERD_UNAUTHORIZED);
	ck_assert_int_eq(one_swapped(H("Authorization", "Bearer " RTS_DUMMY_KEY " "), 1), BROKERD_UNAUTHORIZED);
	ck_assert_int_eq(one_swapped(H("Authorization", "Basic eDp5"), 1), BROKERD_UNAUTHORIZED);
	ck_assert_int_eq(one_swapped(H("X-Other", "1"), 1), BROKERD_BAD_REQUEST); /* allow-list first */
	ck_assert_int_eq(one_swapped(H("X-Api-Key", RTS_DUMMY_KEY), 1), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Host", "localhost"), 0), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Host", "broker:80"), 0), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Type", "text/plain"), 2), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Type", "application/json; charset=utf-8"), 2), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", ""), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "-1"), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "+1"), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "1 2"), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "0x10"), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "262145"), 3), BROKERD_TOO_LARGE);
	ck_assert_int_eq(one_swapped(H("Content-Length", "99999999999999999999999999"), 3), BROKERD_TOO_LARGE);
	/* a NUL inside a value (length disagrees with the C string) */
	struct brokerd_header nul = {.name = "Host", .name_len = 4, .value = "broker", .value_len = 7};
	ck_assert_int_eq(one_swapped(nul, 0), BROKERD_BAD_REQUEST);
}
END_TEST

/* The Content-Length reader both listeners use: every byte a digit, whatever the value, and
 * then the bound; no overflow at any bound. */
START_TEST(test_content_length_values)
{
	size_t len = 7;
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "262144"), 262144, &len), 0);
	ck_assert_uint_eq(len, 262144);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "0"), 0, &len), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "000042"), 100, &len), 0);
	ck_assert_uint_eq(len, 42);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "262145"), 262144, &len), -EFBIG);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "9"), 8, &len), -EFBIG);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "18446744073709551615"), SIZE_MAX, &len), 0);
	ck_assert_uint_eq(len, SIZE_MAX);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "18446744073709551616"), SIZE_MAX, &len), -EFBIG);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", "99999999999999999999999x"), 10, &len), -EINVAL);
	ck_assert_int_eq(brokerd_content_length(&H("Content-Length", ""), 10, &len), -EINVAL);
	/* Through the sealed listener's check: a bad byte after a too large value is still
	 * the syntax rule. */
	ck_assert_int_eq(one_swapped(H("Content-Length", "99999999999999999999999x"), 3), BROKERD_BAD_REQUEST);
	ck_assert_int_eq(one_swapped(H("Content-Length", "262144"), 3), BROKERD_OK);
}
END_TEST

START_TEST(test_headers_missing_or_too_many)
{
	size_t len;
	struct brokerd_header no_auth[] = {H("Host", "broker"), H("Content-Type", "application/json"),
					   H("Content-Length", "1")};
	ck_assert_int_eq(check(no_auth, 3, &len), BROKERD_UNAUTHORIZED);
	struct brokerd_header no_host[] = {AUTH_OK, H("Content-Type", "application/json"), H("Content-Length", "1")};
	ck_assert_int_eq(check(no_host, 3, &len), BROKERD_BAD_REQUEST);
	struct brokerd_header no_len[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json")};
	ck_assert_int_eq(check(no_len, 3, &len), BROKERD_BAD_REQUEST);
	struct brokerd_header no_type[] = {H("Host", "broker"), AUTH_OK, H("Content-Length", "1")};
	ck_assert_int_eq(check(no_type, 3, &len), BROKERD_BAD_REQUEST);
	struct brokerd_header good[] = {H("Host", "broker"), AUTH_OK, H("Content-Type", "application/json"),
					H("Content-Length", "1")};
	ck_assert_int_eq(check(good, BROKERD_HEADERS_MAX + 1, &len), BROKERD_BAD_REQUEST);
}
END_TEST

START_TEST(test_results)
{
	cleanup_free char *b = brokerd_error_body(BROKERD_BUDGET_EXHAUSTED);
	ck_assert_str_eq(b, "{\"error\":\"budget_exhausted\"}");
	ck_assert_uint_eq(brokerd_result_status(BROKERD_BUDGET_EXHAUSTED), 429);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_BUSY), 429);
	ck_assert_str_eq(brokerd_result_code(BROKERD_BUSY), "busy");
	ck_assert_uint_eq(brokerd_result_status(BROKERD_NOT_FOUND), 404);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_METHOD_NOT_ALLOWED), 405);
	ck_assert_str_eq(brokerd_result_code(BROKERD_METHOD_NOT_ALLOWED), "method_not_allowed");
	ck_assert_uint_eq(brokerd_result_status(BROKERD_TOO_LARGE), 413);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_UNAUTHORIZED), 401);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_FORBIDDEN), 403);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_UPSTREAM_ERROR), 502);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_UNAVAILABLE), 503);
	ck_assert_str_eq(brokerd_result_code(BROKERD_UPSTREAM_TIMEOUT), "upstream_timeout");
	ck_assert_uint_eq(brokerd_result_status(BROKERD_UPSTREAM_TIMEOUT), 504);
	ck_assert_uint_eq(brokerd_result_status(BROKERD_RESULT_MAX_), 500);
}
END_TEST

START_TEST(test_content_type)
{
	ck_assert(brokerd_content_type_is_json("application/json"));
	ck_assert(brokerd_content_type_is_json("Application/JSON; charset=utf-8"));
	ck_assert(brokerd_content_type_is_json("application/json ;charset=utf-8"));
	ck_assert(!brokerd_content_type_is_json(NULL));
	ck_assert(!brokerd_content_type_is_json("text/event-stream"));
	ck_assert(!brokerd_content_type_is_json("application/jsonl"));
	ck_assert(!brokerd_content_type_is_json("application/json-seq"));
	ck_assert(!brokerd_content_type_is_json("text/html"));
}
END_TEST

static void __attribute__((format(printf, 1, 2))) mhd_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	brokerd_http_on_mhd_log(NULL, fmt, ap);
	va_end(ap);
}

/* What the daemon's log got on stderr while fn ran (at most size - 1 bytes). */
static void logged(void (*fn)(void), char *out, size_t size)
{
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	int saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fileno(f), STDERR_FILENO), STDERR_FILENO);
	unsetenv("JOURNAL_STREAM");
	rts_log_init("check_broker_http");
	rts_log_set_max_priority(LOG_DEBUG);
	fn();
	fflush(stderr);
	ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	rewind(f);
	size_t n = fread(out, 1, size - 1, f);
	out[n] = '\0';
	fclose(f);
}

static void log_socket_option(void)
{
	mhd_log("Setting %s option to %s state failed: %s\n", "TCP_NODELAY", "ON", "Operation not supported");
}

static void log_forged_line(void)
{
	mhd_log("Bad header %s\n%s\n", "x\x1b[2J", "warning: forged");
}

static void log_long_argument(void)
{
	char big[1024];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mhd_log("Bad header %s\n", big);
}

/* libmicrohttpd's messages are logged filled in, as one line of printable ASCII, bounded. */
START_TEST(test_mhd_log_is_formatted_and_bounded)
{
	char out[4096];
	logged(log_socket_option, out, sizeof(out));
	ck_assert_msg(strstr(out, "libmicrohttpd: Setting TCP_NODELAY option to ON state failed: Operation not supported") !=
			      NULL,
		      "%s", out);
	ck_assert_ptr_null(strstr(out, "%s"));

	/* An argument cannot add a line or send a terminal escape. */
	logged(log_forged_line, out, sizeof(out));
	ck_assert_msg(strstr(out, "libmicrohttpd: Bad header x?[2J") != NULL, "%s", out);
	ck_assert_ptr_null(strstr(out, "forged"));
	ck_assert_ptr_null(strchr(out, '\x1b'));

	/* A long one is cut at 240 bytes of message. */
	logged(log_long_argument, out, sizeof(out));
	const char *m = strstr(out, "libmicrohttpd: Bad header b");
	ck_assert_msg(m != NULL, "%s", out);
	m += strlen("libmicrohttpd: ");
	ck_assert_uint_eq(strcspn(m, "\n"), 240 + strlen("..."));
	ck_assert(strncmp(m + 240, "...\n", 4) == 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_http");
	TCase *tc = tcase_create("routes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_routes_match);
	tcase_add_loop_test(tc, test_routes_refused, 0, (int)RTS_ARRAY_SIZE(not_routes));
	tcase_add_test(tc, test_fetch_route);
	suite_add_tcase(s, tc);
	tc = tcase_create("headers");
	tcase_add_test(tc, test_headers_good);
	tcase_add_test(tc, test_headers_refused);
	tcase_add_test(tc, test_header_values);
	tcase_add_test(tc, test_content_length_values);
	tcase_add_test(tc, test_headers_missing_or_too_many);
	tcase_add_test(tc, test_results);
	tcase_add_test(tc, test_content_type);
	suite_add_tcase(s, tc);
	tc = tcase_create("log");
	tcase_add_test(tc, test_mhd_log_is_formatted_and_bounded);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
