/* SPDX-License-Identifier: Apache-2.0 */
/* A rich channel's pure rules: the header allow-list, the routes, the capability rule of
 * the handshake, the /worker/ready body, the reply packet and statd's turn input
 * (brokerd/rich_packet.h), and the compaction shapes (brokerd/compact.h). */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/compact.h"
#include "brokerd/http.h"
#include "brokerd/rich.h"
#include "brokerd/rich_packet.h"
#include "common/conf.h"
#include "common/json.h"
#include "common/util.h"

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "test JSON: %s", text);
	return o;
}

/* ---- headers ---- */

#define H(n, v) {.name = (n), .name_len = sizeof(n) - 1, .value = (v), .value_len = sizeof(v) - 1}

/* What the Anthropic SDK sends (pi-notes.md section 4), with the API-key dummy. */
static const struct brokerd_header sdk[] = {
	H("host", "broker"),
	H("connection", "keep-alive"),
	H("content-type", "application/json"),
	H("content-length", "123"),
	H("accept", "application/json"),
	H("accept-language", "*"),
	H("sec-fetch-mode", "cors"),
	H("accept-encoding", "gzip, deflate"),
	H("anthropic-version", "2023-06-01"),
	H("anthropic-dangerous-direct-browser-access", "true"),
	H("x-stainless-retry-count", "0"),
	H("x-stainless-timeout", "600"),
	H("x-stainless-lang", "js"),
	H("x-stainless-package-version", "0.91.1"),
	H("x-stainless-os", "Linux"),
	H("x-stainless-arch", "x64"),
	H("x-stainless-runtime", "node"),
	H("x-stainless-runtime-version", "v20.20.2"),
	H("x-api-key", BROKERD_RICH_DUMMY_API_KEY),
	H("user-agent", "Anthropic/JS 0.91.1"),
	H("anthropic-beta", "interleaved-thinking-2025-05-14,files-api-2025-04-14, fine-grained-tool-streaming-2025-05-14"),
};
#define N_SDK RTS_ARRAY_SIZE(sdk)

static enum brokerd_result check_with(const struct brokerd_header *extra, size_t n_extra, size_t drop,
				      enum rich_route_kind kind, struct rich_headers *out)
{
	struct brokerd_header h[64];
	size_t n = 0;
	for (size_t i = 0; i < N_SDK; i++)
		if (i != drop)
			h[n++] = sdk[i];
	for (size_t i = 0; i < n_extra; i++)
		h[n++] = extra[i];
	return brokerd_rich_headers_check(h, n, kind, out);
}

START_TEST(test_headers_sdk)
{
	struct rich_headers out;
	ck_assert_int_eq(check_with(NULL, 0, SIZE_MAX, RICH_ROUTE_MESSAGES, &out), BROKERD_OK);
	ck_assert_uint_eq(out.content_length, 123);
	ck_assert_str_eq(out.version, "2023-06-01");
	/* Betas off the allow-list are dropped, not forwarded. */
	ck_assert_uint_eq(out.n_betas, 2);
	ck_assert_str_eq(out.betas[0], "interleaved-thinking-2025-05-14");
	ck_assert_str_eq(out.betas[1], "fine-grained-tool-streaming-2025-05-14");
	/* The OAuth dialect: Bearer with the OAuth-shaped dummy instead of x-api-key. */
	struct brokerd_header oauth[] = {H("authorization", "Bearer " BROKERD_RICH_DUMMY_OAUTH), H("x-app", "cli")};
	size_t key_at = 18;
	ck_assert_int_eq(check_with(oauth, 2, key_at, RICH_ROUTE_MESSAGES, &out), BROKERD_OK);
	/* The worker's own routes with the sealed dummy. */
	struct brokerd_header worker[] = {H("Host", "broker"), H("Authorization", "Bearer " RTS_DUMMY_KEY),
					  H("Content-Type", "application/json; charset=utf-8"),
					  H("Content-Length", "0")};
	ck_assert_int_eq(brokerd_rich_headers_check(worker, 4, RICH_ROUTE_NEXT, &out), BROKERD_OK);
	ck_assert_uint_eq(out.content_length, 0);
}
END_TEST

START_TEST(test_headers_refused)
{
	struct rich_headers out;
	static const struct {
		struct brokerd_header h;
		enum brokerd_result want;
	} bad[] = {
		{H("cookie", "a=b"), BROKERD_BAD_REQUEST},
		{H("set-cookie", "a=b"), BROKERD_BAD_REQUEST},
		{H("proxy-authorization", "Basic eA=="), BROKERD_BAD_REQUEST},
		{H("proxy-connection", "keep-alive"), BROKERD_BAD_REQUEST},
		{H("forwarded", "for=1.2.3.4"), BROKERD_BAD_REQUEST},
		{H("x-forwarded-for", "1.2.3.4"), BROKERD_BAD_REQUEST},
		{H("x-forwarded-host", "evil"), BROKERD_BAD_REQUEST},
		{H("via", "1.1 proxy"), BROKERD_BAD_REQUEST},
		{H("te", "trailers"), BROKERD_BAD_REQUEST},
		{H("trailer", "x"), BROKERD_BAD_REQUEST},
		{H("upgrade", "h2c"), BROKERD_BAD_REQUEST},
		{H("keep-alive", "timeout=5"), BROKERD_BAD_REQUEST},
		{H("expect", "100-continue"), BROKERD_BAD_REQUEST},
		{H("transfer-encoding", "chunked"), BROKERD_BAD_REQUEST},
		{H("x-unknown", "1"), BROKERD_BAD_REQUEST},
		{H("mcp-session-id", "s"), BROKERD_BAD_REQUEST}, /* not on an /mcp route */
		{H("anthropic-version", "2023-06-01"), BROKERD_BAD_REQUEST}, /* repeated */
		/* A second credential, even a dummy one. */
		{H("authorization", "Bearer " RTS_DUMMY_KEY), BROKERD_UNAUTHORIZED},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(check_with(&bad[i].h, 1, SIZE_MAX, RICH_ROUTE_MESSAGES, &out) == bad[i].want, "%s",
			      bad[i].h.name);
	/* Any other credential than a dummy. */
	struct brokerd_header real[] = {H("x-api-key", "sk-ant-api03-real-looking-key")};
	ck_assert_int_eq(check_with(real, 1, 18, RICH_ROUTE_MESSAGES, &out), BROKERD_UNAUTHORIZED);
	struct brokerd_header bearer[] = {H("authorization", "Bearer sk-ant-oat01-real")};
	ck_assert_int_eq(check_with(bearer, 1, 18, RICH_ROUTE_MESSAGES, &out), BROKERD_UNAUTHORIZED);
	/* None at all. */
	ck_assert_int_eq(check_with(NULL, 0, 18, RICH_ROUTE_MESSAGES, &out), BROKERD_UNAUTHORIZED);
	/* Framing and host. */
	struct brokerd_header host[] = {H("host", "api.anthropic.com")};
	ck_assert_int_eq(check_with(host, 1, 0, RICH_ROUTE_MESSAGES, &out), BROKERD_BAD_REQUEST);
	struct brokerd_header ct[] = {H("content-type", "text/plain")};
	ck_assert_int_eq(check_with(ct, 1, 2, RICH_ROUTE_MESSAGES, &out), BROKERD_BAD_REQUEST);
	struct brokerd_header cl[] = {H("content-length", "12a")};
	ck_assert_int_eq(check_with(cl, 1, 3, RICH_ROUTE_MESSAGES, &out), BROKERD_BAD_REQUEST);
	struct brokerd_header ver[] = {H("anthropic-version", "latest")};
	ck_assert_int_eq(check_with(ver, 1, 8, RICH_ROUTE_MESSAGES, &out), BROKERD_BAD_REQUEST);
	/* MCP's own headers on an /mcp route. */
	struct brokerd_header mcp[] = {H("mcp-protocol-version", "2025-06-18"), H("mcp-session-id", "x")};
	ck_assert_int_eq(check_with(mcp, 2, SIZE_MAX, RICH_ROUTE_MCP, &out), BROKERD_OK);
}
END_TEST

/* ---- routes ---- */

START_TEST(test_routes)
{
	char *mcp_names[] = {"docs", NULL};
	char *tool_names[] = {"dice", NULL};
	struct rts_mcp_server servers[] = {{.name = "wiki"}, {.name = "docs"}};
	struct rts_tool tools[] = {{.name = "dice"}, {.name = "clock"}};
	struct rts_config cfg = {.mcp = servers, .n_mcp = 2, .tools = tools, .n_tools = 2};
	struct rts_rich_profile p = {.mcp = mcp_names, .n_mcp = 1, .tools = tool_names, .n_tools = 1};
	struct rich_route r;
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/worker/ready", &r) && r.kind == RICH_ROUTE_READY);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/worker/next", &r) && r.kind == RICH_ROUTE_NEXT);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/worker/result", &r) && r.kind == RICH_ROUTE_RESULT);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/worker/compact", &r) && r.kind == RICH_ROUTE_COMPACT);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/anthropic/v1/messages", &r) && r.kind == RICH_ROUTE_MESSAGES &&
		  !r.beta);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/anthropic/v1/messages?beta=true", &r) && r.beta);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/anthropic/v1/messages/count_tokens?beta=true", &r) &&
		  r.kind == RICH_ROUTE_COUNT_TOKENS && r.beta);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/mcp/docs", &r) && r.kind == RICH_ROUTE_MCP && r.index == 1);
	ck_assert(brokerd_rich_route_match(&cfg, &p, "/tools/dice", &r) && r.kind == RICH_ROUTE_TOOL && r.index == 0);
	static const char *const none[] = {
		"/mcp/wiki",				/* configured, not the profile's */
		"/tools/clock",				/* likewise */
		"/anthropic/v1/files",			/* account routes */
		"/anthropic/v1/models",
		"/anthropic/v1/messages/batches",
		"/anthropic/v1/messages?beta=false",
		"/anthropic/v1/messages?beta=true&x=1",
		"/worker/ready?beta=true",
		"/anthropic/v1/messages/",
		"/anthropic/v1//messages",
		"/anthropic/v1/%6dessages",
		"/v1/messages",
		"/model",
		"/mcp/docs/",
		"/tools/dice?x",
		"",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(none); i++)
		ck_assert_msg(!brokerd_rich_route_match(&cfg, &p, none[i], &r), "%s", none[i]);
	ck_assert_uint_eq(brokerd_rich_route_body_max(&cfg, RICH_ROUTE_RESULT), RTS_RICH_REPLY_PACKET_MAX);
	ck_assert_uint_eq(brokerd_rich_route_body_max(&cfg, RICH_ROUTE_MESSAGES), RTS_RICH_BODY_MAX);
	ck_assert_uint_eq(brokerd_rich_route_body_max(&cfg, RICH_ROUTE_NEXT), BROKERD_RICH_SMALL_BODY_MAX);
}
END_TEST

/* ---- the handshake ---- */

/* Seed, "Worker capability handshake": the whole decision table. */
START_TEST(test_caps_table)
{
	for (int m = 0; m < 2; m++)
		for (int h = 0; h < 2; h++)
			for (int t = 0; t < 2; t++)
				ck_assert_int_eq(brokerd_rich_caps_required(m, h, t), m || h || t);
	ck_assert(!brokerd_rich_caps_enough(0));
	ck_assert(!brokerd_rich_caps_enough(RTS_RICH_CAP_PRIVATE_TO));
	ck_assert(!brokerd_rich_caps_enough(RTS_RICH_CAP_READER_RECORDS));
	ck_assert(brokerd_rich_caps_enough(RTS_RICH_CAP_PRIVATE_TO | RTS_RICH_CAP_READER_RECORDS));
}
END_TEST

START_TEST(test_ready_body)
{
	uint8_t caps = 9;
	bool hist = true;
	const char *why;
	ck_assert_int_eq(brokerd_rich_ready_parse("", 0, &caps, &hist, &why), 0);
	ck_assert_uint_eq(caps, 0);
	ck_assert(!hist);
	const char *full = "{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true},\"privateHistory\":true}";
	ck_assert_int_eq(brokerd_rich_ready_parse(full, strlen(full), &caps, &hist, &why), 0);
	ck_assert_uint_eq(caps, 3);
	ck_assert(hist);
	const char *half = "{\"capabilities\":{\"privateTo\":false,\"readerRecords\":true},\"privateHistory\":false}";
	ck_assert_int_eq(brokerd_rich_ready_parse(half, strlen(half), &caps, &hist, &why), 0);
	ck_assert_uint_eq(caps, RTS_RICH_CAP_READER_RECORDS);
	/* Malformed declarations are refused, never read as "no capabilities". */
	static const char *const bad[] = {
		"{}",
		"{\"capabilities\":{},\"privateHistory\":false}",
		"{\"capabilities\":{\"privateTo\":\"yes\",\"readerRecords\":true},\"privateHistory\":false}",
		"{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true}}",
		"{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true,\"more\":true},\"privateHistory\":false}",
		"{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true},\"privateHistory\":false,\"x\":1}",
		"{\"capabilities\":{\"privateTo\":true,\"privateTo\":true,\"readerRecords\":true},\"privateHistory\":false}",
		"[]",
		"null",
		"{",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(brokerd_rich_ready_parse(bad[i], strlen(bad[i]), &caps, &hist, &why) == -EINVAL, "%s", bad[i]);
}
END_TEST

/* ---- the reply packet ---- */

START_TEST(test_reply)
{
	json_object *p = parse("{\"turnId\":\"0123456789abcdef\",\"text\":\"done\",\"files\":[{\"name\":\"../../etc/x.png\","
			       "\"mime\":\"image/png\",\"data\":\"iVBORw0KGgo=\"},{\"name\":\".hidden\",\"mime\":"
			       "\"application/x-sh\",\"data\":\"\"}]}");
	char *out = NULL;
	size_t len;
	const char *why = NULL;
	ck_assert_int_eq(brokerd_rich_reply_build(p, "0123456789abcdef", &out, &len, &why), 0);
	json_object *r = parse(out);
	ck_assert_str_eq(rts_json_get_string(r, "text"), "done");
	json_object *f0 = json_object_array_get_idx(rts_json_get(r, "files"), 0);
	ck_assert_str_eq(rts_json_get_string(f0, "name"), "_.._etc_x.png");
	ck_assert_str_eq(rts_json_get_string(f0, "mime"), "image/png");
	json_object *f1 = json_object_array_get_idx(rts_json_get(r, "files"), 1);
	ck_assert_str_eq(rts_json_get_string(f1, "name"), "hidden");
	ck_assert_str_eq(rts_json_get_string(f1, "mime"), "application/octet-stream");
	json_object_put(r);
	free(out);
	ck_assert_int_eq(brokerd_rich_reply_build(p, "fedcba9876543210", &out, &len, &why), -ESTALE);
	json_object_put(p);

	static const char *const bad[] = {
		"{\"turnId\":\"0123456789abcdef\"}",
		"{\"turnId\":\"0123456789abcdef\",\"text\":\"x\",\"extra\":1}",
		"{\"turnId\":\"0123456789abcdef\",\"text\":\"x\",\"files\":[{\"name\":\"a\",\"data\":\"!!!!\"}]}",
		"{\"turnId\":\"0123456789abcdef\",\"text\":\"x\",\"files\":[{\"name\":\"a\",\"data\":\"abc\"}]}",
		"{\"turnId\":\"0123456789abcdef\",\"text\":\"x\",\"files\":[{\"data\":\"\"}]}",
		"{\"turnId\":\"0123456789abcdef\",\"text\":5}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		json_object *b = parse(bad[i]);
		ck_assert_msg(brokerd_rich_reply_build(b, "0123456789abcdef", &out, &len, &why) == -EINVAL, "%s", bad[i]);
		json_object_put(b);
	}
	/* Eleven files. */
	char big[2048] = "{\"turnId\":\"0123456789abcdef\",\"text\":\"x\",\"files\":[";
	for (int i = 0; i < 11; i++)
		strcat(big, i ? ",{\"name\":\"f\",\"data\":\"\"}" : "{\"name\":\"f\",\"data\":\"\"}");
	strcat(big, "]}");
	json_object *b = parse(big);
	ck_assert_int_eq(brokerd_rich_reply_build(b, "0123456789abcdef", &out, &len, &why), -EINVAL);
	json_object_put(b);
	/* 100,000 characters, not bytes: 100,000 three-byte characters pass, one more not. */
	size_t n = RTS_RICH_TEXT_CHARS_MAX;
	char *text = rts_xmalloc(3 * (n + 1) + 128);
	int at = snprintf(text, 128, "{\"turnId\":\"0123456789abcdef\",\"text\":\"");
	for (size_t i = 0; i < n; i++) {
		memcpy(text + at, "\xe2\x82\xac", 3);
		at += 3;
	}
	strcpy(text + at, "\"}");
	b = parse(text);
	ck_assert_int_eq(brokerd_rich_reply_build(b, "0123456789abcdef", &out, &len, &why), 0);
	free(out);
	json_object_put(b);
	memcpy(text + at, "\xe2\x82\xac\"}", 6);
	b = parse(text);
	ck_assert_int_eq(brokerd_rich_reply_build(b, "0123456789abcdef", &out, &len, &why), -EINVAL);
	json_object_put(b);
	free(text);
}
END_TEST

START_TEST(test_file_names)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"report.pdf", "report.pdf"}, {"a/b\\c", "a_b_c"}, {"...", "file"}, {"", "file"},
		{". .x", "x"},		      {"tab\there", "tab_here"}, {"ünïcode.txt", "ünïcode.txt"},
		/* U+202E, U+0085, U+200B, U+FEFF, U+2066, U+2069 as UTF-8. */
		{"\xe2\x80\xaegnp.exe", "_gnp.exe"}, {"a\xc2\x85" "b", "a_b"}, {"zw\xe2\x80\x8bj\xef\xbb\xbf", "zw_j_"},
		{"i\xe2\x81\xa6x\xe2\x81\xa9", "i_x_"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		char *s = brokerd_rich_file_name(cases[i].in, strlen(cases[i].in));
		ck_assert_str_eq(s, cases[i].out);
		free(s);
	}
	/* Cut at 255 bytes, on a character boundary. */
	char name[600];
	for (int i = 0; i < 200; i++)
		memcpy(name + 3 * i, "\xe2\x82\xac", 3);
	char *s = brokerd_rich_file_name(name, 600);
	ck_assert_uint_eq(strlen(s), 255);
	free(s);
	s = brokerd_rich_file_name(name + 1, 599 - 1);
	ck_assert_uint_le(strlen(s), 255);
	free(s);
	ck_assert_str_eq(brokerd_rich_file_mime("image/webp"), "image/webp");
	ck_assert_str_eq(brokerd_rich_file_mime("text/html"), "application/octet-stream");
	ck_assert_str_eq(brokerd_rich_file_mime(NULL), "application/octet-stream");
}
END_TEST

/* ---- the turn input ---- */

static struct brokerd_binding binding = {
	.turn_id = "0123456789abcdef", .speaker_id = "1001", .speaker_name = "Alice", .principal_id = "p-1001"};

#define INPUT_HEAD                                                                                                     \
	"{\"v\":1,\"turnId\":\"0123456789abcdef\",\"speaker\":{\"id\":\"1001\",\"name\":\"Alice\",\"principalId\":"     \
	"\"p-1001\"},\"text\":\"hi\",\"timeZone\":\"UTC\",\"now\":\"2026-01-01T00:00:00Z\",\"startFresh\":false"

static int input(const char *text)
{
	json_object *o = parse(text);
	const char *why = NULL;
	int r = brokerd_rich_input_check(o, &binding, &why);
	json_object_put(o);
	return r;
}

START_TEST(test_input)
{
	ck_assert_int_eq(input(INPUT_HEAD "}"), 0);
	ck_assert_int_eq(input(INPUT_HEAD ",\"images\":[{\"mime\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}],\"attachments\":"
				      "[{\"name\":\"a.pdf\",\"path\":\"/workspace/attachments/0123456789abcdef/1-a.pdf\","
				      "\"mime\":\"application/pdf\",\"bytes\":10}]}"),
			 0);
	static const char *const bad[] = {
		/* The bound speaker and turn, nothing else. */
		"{\"v\":1,\"turnId\":\"fedcba9876543210\",\"speaker\":{\"id\":\"1001\",\"name\":\"Alice\",\"principalId\":"
		"\"p-1001\"},\"text\":\"hi\",\"timeZone\":\"UTC\",\"now\":\"x\",\"startFresh\":false}",
		"{\"v\":1,\"turnId\":\"0123456789abcdef\",\"speaker\":{\"id\":\"1001\",\"name\":\"Alice\",\"principalId\":"
		"\"p-other\"},\"text\":\"hi\",\"timeZone\":\"UTC\",\"now\":\"x\",\"startFresh\":false}",
		INPUT_HEAD ",\"extra\":1}",
		INPUT_HEAD ",\"images\":[{\"mime\":\"image/svg+xml\",\"data\":\"AAAA\"}]}",
		INPUT_HEAD ",\"images\":[{\"mime\":\"image/png\",\"data\":\"A\"}]}",
		INPUT_HEAD ",\"attachments\":[{\"name\":\"a\",\"path\":\"/workspace/attachments/0123456789abcdef/../x\","
			   "\"mime\":\"a/b\",\"bytes\":1}]}",
		INPUT_HEAD ",\"attachments\":[{\"name\":\"a\",\"path\":\"/workspace/other/x\",\"mime\":\"a/b\",\"bytes\":1}]}",
		INPUT_HEAD ",\"attachments\":[{\"name\":\".a\",\"path\":\"/workspace/attachments/0123456789abcdef/1-a\","
			   "\"mime\":\"a/b\",\"bytes\":1}]}",
		INPUT_HEAD ",\"attachments\":[{\"name\":\"a\",\"path\":\"/workspace/attachments/0123456789abcdef/1-a\","
			   "\"mime\":\"a/b\",\"bytes\":26214401}]}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(input(bad[i]) == -EINVAL, "%s", bad[i]);
	/* Nine images. */
	char nine[1024] = INPUT_HEAD ",\"images\":[";
	for (int i = 0; i < 9; i++)
		strcat(nine, i ? ",{\"mime\":\"image/png\",\"data\":\"AAAA\"}" : "{\"mime\":\"image/png\",\"data\":\"AAAA\"}");
	strcat(nine, "]}");
	ck_assert_int_eq(input(nine), -EINVAL);
}
END_TEST

/* ---- compaction ---- */

#define REQUEST                                                                                                        \
	"{\"reason\":\"threshold\",\"tokensBefore\":310000,\"firstKeptEntryId\":\"e42\",\"isSplitTurn\":false,"         \
	"\"messagesToSummarize\":[{\"role\":\"user\"}],\"turnPrefixMessages\":[],\"keptMessages\":[],"                  \
	"\"readFiles\":[\"/workspace/a\"],\"modifiedFiles\":[]}"

/* The host compactor never gets a tool exchange tagged private, whoever it is private to
 * (the placeholder the worker leaves, or the raw result a worker forgot to hide), nor the
 * call it answers; everything else goes as it came. */
START_TEST(test_compaction_drops_private_exchanges)
{
	json_object *req = parse(
		"{\"reason\":\"threshold\",\"tokensBefore\":9,\"firstKeptEntryId\":\"e42\",\"isSplitTurn\":false,"
		"\"messagesToSummarize\":[{\"role\":\"user\",\"content\":\"hi\"},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"let me look\"},"
		"{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"memory\",\"arguments\":{\"q\":\"SECRET-ARGS\"}},"
		"{\"type\":\"toolCall\",\"id\":\"c2\",\"name\":\"echo\",\"arguments\":{}}]},"
		"{\"role\":\"toolResult\",\"toolCallId\":\"c1\",\"toolName\":\"memory\",\"content\":[{\"type\":\"text\","
		"\"text\":\"SECRET-RESULT\"}],\"details\":{\"privateTo\":\"principal-other\"}},"
		"{\"role\":\"toolResult\",\"toolCallId\":\"c2\",\"toolName\":\"echo\",\"content\":[{\"type\":\"text\","
		"\"text\":\"public\"}],\"details\":{}}],"
		"\"turnPrefixMessages\":[],\"keptMessages\":[{\"role\":\"toolResult\",\"toolCallId\":\"c3\",\"content\":"
		"[],\"details\":{\"privateTo\":\"principal-1001\"}}],\"readFiles\":[],\"modifiedFiles\":[]}");
	const char *why = NULL;
	ck_assert_int_eq(brokerd_compact_request_check(req, &why), 0);
	size_t dropped = 0;
	json_object *host = brokerd_compact_request_for_host(req, &dropped);
	char *s = rts_json_dump(host);
	ck_assert_uint_eq(dropped, 3);
	ck_assert_ptr_null(strstr(s, "SECRET"));
	ck_assert_ptr_null(strstr(s, "privateTo"));
	ck_assert_ptr_nonnull(strstr(s, "let me look"));
	ck_assert_ptr_nonnull(strstr(s, "\"id\":\"c2\""));
	ck_assert_ptr_nonnull(strstr(s, "public"));
	ck_assert_str_eq(rts_json_get_string(host, "firstKeptEntryId"), "e42");
	ck_assert_uint_eq(json_object_array_length(rts_json_get(host, "keptMessages")), 0);
	free(s);
	json_object_put(host);
	/* Nothing tagged: the same request. */
	json_object *plain = parse(REQUEST);
	host = brokerd_compact_request_for_host(plain, &dropped);
	ck_assert_uint_eq(dropped, 0);
	ck_assert(json_object_equal(host, plain));
	json_object_put(host);
	json_object_put(plain);
	json_object_put(req);
}
END_TEST

START_TEST(test_compaction_shapes)
{
	const char *why = NULL, *tid = NULL;
	json_object *req = NULL, *rep = NULL;
	json_object *env = parse("{\"turnId\":\"t1\",\"request\":" REQUEST "}");
	ck_assert_int_eq(brokerd_compact_envelope(env, &tid, &req, &rep, &why), 0);
	ck_assert_str_eq(tid, "t1");
	ck_assert_ptr_nonnull(req);
	ck_assert_ptr_null(rep);
	ck_assert_int_eq(brokerd_compact_request_check(req, &why), 0);

	char *answer = NULL;
	const char *out = "{\"summary\":\"they talked\",\"firstKeptEntryId\":\"e42\",\"tokensBefore\":310000,"
			  "\"estimatedTokensAfter\":1200,\"details\":{\"engine\":\"spoofed\",\"note\":\"n\"}}";
	ck_assert_int_eq(brokerd_compact_answer_build(out, strlen(out), req, "jev", &answer, &why), 0);
	json_object *a = parse(answer);
	ck_assert_str_eq(rts_json_get_string(rts_json_get(a, "details"), "engine"), "jev");
	ck_assert_str_eq(rts_json_get_string(rts_json_get(a, "details"), "note"), "n");
	ck_assert_int_eq(json_object_get_int64(rts_json_get(a, "estimatedTokensAfter")), 1200);
	json_object_put(a);
	free(answer);
	ck_assert_int_eq(brokerd_compact_answer_build(" \n", 2, req, "jev", &answer, &why), -ENODATA);
	static const char *const bad_answers[] = {
		"{\"summary\":\"s\",\"firstKeptEntryId\":\"e41\",\"tokensBefore\":1}",
		"{\"summary\":\"\",\"firstKeptEntryId\":\"e42\",\"tokensBefore\":1}",
		"{\"summary\":\"s\",\"firstKeptEntryId\":\"e42\"}",
		"{\"summary\":\"s\",\"firstKeptEntryId\":\"e42\",\"tokensBefore\":-1}",
		"{\"summary\":\"s\",\"firstKeptEntryId\":\"e42\",\"tokensBefore\":1,\"extra\":1}",
		"{\"summary\":\"s\",\"firstKeptEntryId\":\"e42\",\"tokensBefore\":1,\"details\":[]}",
		"not json",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad_answers); i++)
		ck_assert_msg(brokerd_compact_answer_build(bad_answers[i], strlen(bad_answers[i]), req, "jev", &answer,
							   &why) == -EINVAL,
			      "%s", bad_answers[i]);
	json_object_put(env);

	static const char *const bad_envelopes[] = {
		"{\"turnId\":\"t\"}",
		"{\"turnId\":\"t\",\"request\":{},\"report\":{}}",
		"{\"request\":{}}",
		"{\"turnId\":\"t\",\"request\":{},\"x\":1}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad_envelopes); i++) {
		json_object *e = parse(bad_envelopes[i]);
		ck_assert_int_eq(brokerd_compact_envelope(e, &tid, &req, &rep, &why), -EINVAL);
		json_object_put(e);
	}
	json_object *bad_req = parse("{\"reason\":\"bored\",\"tokensBefore\":1,\"firstKeptEntryId\":\"e\",\"isSplitTurn\":"
				     "false,\"messagesToSummarize\":[],\"turnPrefixMessages\":[],\"keptMessages\":[],"
				     "\"readFiles\":[],\"modifiedFiles\":[]}");
	ck_assert_int_eq(brokerd_compact_request_check(bad_req, &why), -EINVAL);
	json_object_put(bad_req);

	char line[512];
	json_object *report = parse("{\"event\":\"compacted\",\"trigger\":\"threshold\",\"engine\":\"pi\","
				    "\"tokensBefore\":310000,\"tokensAfter\":9000,\"contextAfter\":12000,"
				    "\"nextCompactionAt\":300000}");
	ck_assert_int_eq(brokerd_compact_report_format(report, line, sizeof(line), &why), 0);
	ck_assert_str_eq(line, "conversation compacted trigger=threshold engine=pi tokensBefore=310000 tokensAfter=9000 "
			       "contextAfter=12000 nextCompactionAt=300000");
	json_object_put(report);
	/* The event defaults to "compacted" (the scripted worker's reports have none). */
	report = parse("{\"engine\":\"pi\",\"tokensBefore\":520000,\"tokensAfter\":40000,\"reason\":\"threshold\"}");
	ck_assert_int_eq(brokerd_compact_report_format(report, line, sizeof(line), &why), 0);
	ck_assert_str_eq(line, "conversation compacted engine=pi tokensBefore=520000 tokensAfter=40000 reason=threshold");
	json_object_put(report);
	report = parse("{\"event\":\"fallback\",\"reason\":\"host compactor timed out\"}");
	ck_assert_int_eq(brokerd_compact_report_format(report, line, sizeof(line), &why), 0);
	ck_assert_str_eq(line, "compaction falls back to Pi's summary reason=host compactor timed out");
	json_object_put(report);
	/* Nothing but fixed words and counted fields reaches the log. */
	static const char *const bad_reports[] = {
		"{\"event\":\"compacted\",\"reason\":\"line\\nbreak\"}",
		"{\"event\":\"compacted\",\"engine\":\"a b\"}",
		"{\"event\":\"exploded\"}",
		"{\"event\":\"compacted\",\"summary\":\"text\"}",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad_reports); i++) {
		json_object *r = parse(bad_reports[i]);
		ck_assert_int_eq(brokerd_compact_report_format(r, line, sizeof(line), &why), -EINVAL);
		json_object_put(r);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_rich");
	TCase *tc = tcase_create("rich");
	tcase_add_test(tc, test_headers_sdk);
	tcase_add_test(tc, test_headers_refused);
	tcase_add_test(tc, test_routes);
	tcase_add_test(tc, test_caps_table);
	tcase_add_test(tc, test_ready_body);
	tcase_add_test(tc, test_reply);
	tcase_add_test(tc, test_file_names);
	tcase_add_test(tc, test_input);
	tcase_add_test(tc, test_compaction_shapes);
	tcase_add_test(tc, test_compaction_drops_private_exchanges);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
