/* SPDX-License-Identifier: Apache-2.0 */
/* The Anthropic routes' pure parts (brokerd/anthropic.h) and the SSE splitter
 * (brokerd/sse_stream.h): the request rebuild with each refusal naming its rule, the effort and
 * thinking caps, the answers rebuilt for the worker, whole events out of any split of the
 * bytes, and the stream filter, which must never release a piece of a credential that the
 * upstream spells out across events or chunk boundaries. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/anthropic.h"
#include "brokerd/keys.h"
#include "brokerd/sse_stream.h"
#include "common/json.h"
#include "common/util.h"

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	const char *why = NULL;
	ck_assert_msg(rts_json_parse(text, strlen(text), 64, &o, &why) == 0, "test JSON: %s: %s", why, text);
	return o;
}

static struct brokerd_anthropic_policy policy(enum rts_effort level)
{
	return (struct brokerd_anthropic_policy){
		.count_tokens = false, .model = "claude-profile", .max_output_tokens = 8000, .judged = level};
}

#define USER_TEXT "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]"

/* Build body under level; returns the rebuilt body (caller puts) or NULL with *rule. */
static json_object *build(const char *body, enum rts_effort level, struct brokerd_anthropic_rebuilt *out,
			  const char **rule)
{
	json_object *req = parse(body);
	struct brokerd_anthropic_policy p = policy(level);
	const char *why = NULL;
	*rule = NULL;
	int r = brokerd_anthropic_request_build(req, &p, out, &why, rule);
	json_object_put(req);
	if (r < 0) {
		ck_assert_ptr_nonnull(why);
		ck_assert_ptr_nonnull(*rule);
		return NULL;
	}
	return out->body;
}

static void assert_refused(const char *body, const char *rule)
{
	struct brokerd_anthropic_rebuilt out;
	const char *got = NULL;
	json_object *o = build(body, RTS_EFFORT_XHIGH, &out, &got);
	ck_assert_msg(o == NULL, "accepted: %s", body);
	ck_assert_msg(strcmp(got, rule) == 0, "refused by rule %s, not %s: %s", got, rule, body);
}

START_TEST(test_rebuild_fixes_model_and_limit)
{
	struct brokerd_anthropic_rebuilt out;
	const char *rule;
	json_object *o = build("{\"model\":\"claude-opus-worker-asks\",\"max_tokens\":64000," USER_TEXT
			       ",\"stream\":true,\"metadata\":{\"user_id\":\"guest\"},\"temperature\":0.5}",
			       RTS_EFFORT_MEDIUM, &out, &rule);
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(rts_json_get_string(o, "model"), "claude-profile");
	ck_assert_int_eq(json_object_get_int64(rts_json_get(o, "max_tokens")), 8000);
	ck_assert(out.stream);
	ck_assert_ptr_null(rts_json_get(o, "metadata"));
	ck_assert_ptr_nonnull(rts_json_get(o, "temperature"));
	json_object_put(o);
	/* Asking for less is kept; no max_tokens gets the cap. */
	o = build("{\"max_tokens\":100," USER_TEXT "}", RTS_EFFORT_MEDIUM, &out, &rule);
	ck_assert_int_eq(json_object_get_int64(rts_json_get(o, "max_tokens")), 100);
	ck_assert(!out.stream);
	ck_assert_ptr_null(rts_json_get(o, "stream"));
	json_object_put(o);
	o = build("{" USER_TEXT "}", RTS_EFFORT_MEDIUM, &out, &rule);
	ck_assert_int_eq(json_object_get_int64(rts_json_get(o, "max_tokens")), 8000);
	json_object_put(o);
}
END_TEST

/* What Pi sends (pi-notes.md section 4): cache_control on system, tools and blocks, tool
 * use and results, thinking blocks, base64 images, eager_input_streaming. */
START_TEST(test_pi_request_accepted)
{
	const char *body =
		"{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":32000,\"stream\":true,"
		"\"system\":[{\"type\":\"text\",\"text\":\"persona\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
		"\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"look\"},"
		"{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}}]},"
		"{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"c2ln\"},"
		"{\"type\":\"text\",\"text\":\"calling\"},{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"host_dice\","
		"\"input\":{\"sides\":6}}]},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01\",\"content\":"
		"[{\"type\":\"text\",\"text\":\"4\"}],\"is_error\":false,\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}}]}],"
		"\"tools\":[{\"name\":\"host_dice\",\"description\":\"roll\",\"eager_input_streaming\":true,"
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"sides\":{\"$ref\":\"#/$defs/n\"}},\"$defs\":{\"n\":"
		"{\"type\":\"integer\"}}},\"cache_control\":{\"type\":\"ephemeral\"}}],"
		"\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048,\"display\":\"summarized\"}}";
	struct brokerd_anthropic_rebuilt out;
	const char *rule;
	json_object *o = build(body, RTS_EFFORT_HIGH, &out, &rule);
	ck_assert_msg(o != NULL, "refused by %s", rule);
	ck_assert_int_eq(json_object_array_length(rts_json_get(o, "messages")), 3);
	ck_assert_int_eq(json_object_get_int64(rts_json_get(rts_json_get(o, "thinking"), "budget_tokens")), 2048);
	ck_assert(!out.budget_capped && !out.effort_capped);
	json_object_put(o);
}
END_TEST

START_TEST(test_native_tools_refused)
{
	assert_refused("{" USER_TEXT ",\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\",\"max_uses\":5}]}",
		       "native_tool");
	assert_refused("{" USER_TEXT ",\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}", "native_tool");
	assert_refused("{" USER_TEXT ",\"tools\":[{\"type\":\"computer_20250124\",\"name\":\"computer\","
		       "\"display_width_px\":1024,\"display_height_px\":768}]}",
		       "native_tool");
	/* A server tool's blocks in the history. */
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
		       "[{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}]}]}",
		       "native_tool");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"web_search_tool_result\","
		       "\"tool_use_id\":\"srvtoolu_1\",\"content\":[]}]}]}",
		       "native_tool");
	assert_refused("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"mcp_tool_use\",\"id\":\"x\","
		       "\"name\":\"y\",\"server_name\":\"z\",\"input\":{}}]}]}",
		       "native_tool");
	/* The same tool as a custom tool passes. */
	struct brokerd_anthropic_rebuilt out;
	const char *rule;
	json_object *o = build("{" USER_TEXT ",\"tools\":[{\"type\":\"custom\",\"name\":\"web_search\",\"input_schema\":"
			       "{\"type\":\"object\"}}]}",
			       RTS_EFFORT_LOW, &out, &rule);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
}
END_TEST

START_TEST(test_remote_media_refused)
{
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"url\","
		       "\"url\":\"https://example.com/x.png\"}}]}]}",
		       "remote_media");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"file\","
		       "\"file_id\":\"file_011CNha8iCJcU1wXNR6q4V8w\"}}]}]}",
		       "remote_media");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{\"type\":"
		       "\"url\",\"url\":\"https://example.com/a.pdf\"}}]}]}",
		       "remote_media");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
		       "\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://e/x.png\"}}]}]}]}",
		       "remote_media");
	/* Base64, but not PNG/JPEG/WebP/GIF or not base64 at all: the shape rule. */
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"base64\","
		       "\"media_type\":\"image/svg+xml\",\"data\":\"PHN2Zz4=\"}}]}]}",
		       "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"base64\","
		       "\"media_type\":\"image/png\",\"data\":\"not base64!\"}}]}]}",
		       "shape");
}
END_TEST

/* An image's data: strict base64 (common/base64.h), not empty, each failure with its own
 * reason; a valid one passes, so the data alone is what refused the others. */
static void assert_image_data(const char *data, const char *reason)
{
	char body[256];
	snprintf(body, sizeof(body),
		 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
		 "\"base64\",\"media_type\":\"image/png\",\"data\":\"%s\"}}]}]}",
		 data);
	json_object *req = parse(body);
	struct brokerd_anthropic_policy p = policy(RTS_EFFORT_XHIGH);
	struct brokerd_anthropic_rebuilt out;
	const char *why = NULL, *rule = NULL;
	int r = brokerd_anthropic_request_build(req, &p, &out, &why, &rule);
	json_object_put(req);
	if (!reason) {
		ck_assert_msg(r == 0, "refused %s: %s", data, why);
		json_object_put(out.body);
		return;
	}
	ck_assert_msg(r < 0, "accepted: %s", data);
	ck_assert_str_eq(rule, "shape");
	ck_assert_msg(strstr(why, reason) != NULL, "%s: %s", data, why);
}

START_TEST(test_image_data_base64)
{
	assert_image_data("iVBORw0KGgo=", NULL);
	assert_image_data("AAAA", NULL);
	assert_image_data("AA==", NULL);
	assert_image_data("", "must be base64 (a multiple of four characters)");
	assert_image_data("AAAAA", "must be base64 (a multiple of four characters)");
	assert_image_data("AA-_", "must be base64 (standard alphabet)");
	assert_image_data("A=AA", "must be base64 (standard alphabet)");
	assert_image_data("====", "must be base64 (standard alphabet)");
	assert_image_data("A\\u00e9A", "must be base64 (standard alphabet)");
}
END_TEST

START_TEST(test_remote_ref_refused)
{
	assert_refused("{" USER_TEXT ",\"tools\":[{\"name\":\"t\",\"input_schema\":{\"type\":\"object\",\"properties\":"
		       "{\"a\":{\"$ref\":\"https://evil.example/schema.json\"}}}}]}",
		       "remote_ref");
	assert_refused("{" USER_TEXT ",\"tools\":[{\"name\":\"t\",\"input_schema\":{\"$schema\":"
		       "\"http://json-schema.org/draft-07/schema#\",\"type\":\"object\"}}]}",
		       "remote_ref");
}
END_TEST

START_TEST(test_other_refusals)
{
	/* Account features and ways out. */
	assert_refused("{" USER_TEXT ",\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://e/mcp\",\"name\":\"x\"}]}",
		       "shape");
	assert_refused("{" USER_TEXT ",\"container\":\"container_1\"}", "shape");
	assert_refused("{" USER_TEXT ",\"service_tier\":\"priority\"}", "shape");
	/* Roles and blocks. */
	assert_refused("{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
		       "\"base64\",\"media_type\":\"image/png\",\"data\":\"AAAA\"}}]}]}",
		       "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\","
		       "\"signature\":\"y\"}]}]}",
		       "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\",\"citations\":[]}]}]}",
		       "shape");
	assert_refused("{\"messages\":[]}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"output_config\":{\"format\":{}}}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"enabled\"}}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":\"enabled\","
		       "\"budget_tokens\":512}}",
		       "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"tool\"}}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":1.5}", "shape");
	assert_refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":null}", "shape");
}
END_TEST

static const char *effort_of(json_object *o)
{
	return rts_json_get_string(rts_json_get(o, "output_config"), "effort");
}

/* Seed: thinking and effort are kept but never above the host-judged level. */
START_TEST(test_effort_capped)
{
	struct brokerd_anthropic_rebuilt out;
	const char *rule;
	json_object *o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"adaptive\"},\"output_config\":{\"effort\":\"xhigh\"}}",
			       RTS_EFFORT_MEDIUM, &out, &rule);
	ck_assert_str_eq(effort_of(o), "medium");
	ck_assert(out.effort_capped);
	json_object_put(o);
	o = build("{" USER_TEXT ",\"output_config\":{\"effort\":\"max\"}}", RTS_EFFORT_HIGH, &out, &rule);
	ck_assert_str_eq(effort_of(o), "high");
	json_object_put(o);
	/* "max" ranks with xhigh. */
	o = build("{" USER_TEXT ",\"output_config\":{\"effort\":\"max\"}}", RTS_EFFORT_XHIGH, &out, &rule);
	ck_assert_str_eq(effort_of(o), "max");
	ck_assert(!out.effort_capped);
	json_object_put(o);
	/* Less than judged is kept. */
	o = build("{" USER_TEXT ",\"output_config\":{\"effort\":\"low\"}}", RTS_EFFORT_HIGH, &out, &rule);
	ck_assert_str_eq(effort_of(o), "low");
	json_object_put(o);
	/* Adaptive thinking without an effort: capped below the default for low and medium,
	 * left to the model's default (high) for high and xhigh. */
	o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"adaptive\"}}", RTS_EFFORT_LOW, &out, &rule);
	ck_assert_str_eq(effort_of(o), "low");
	ck_assert(out.effort_added);
	json_object_put(o);
	o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"adaptive\"}}", RTS_EFFORT_MEDIUM, &out, &rule);
	ck_assert_str_eq(effort_of(o), "medium");
	json_object_put(o);
	o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"adaptive\"}}", RTS_EFFORT_HIGH, &out, &rule);
	ck_assert_ptr_null(rts_json_get(o, "output_config"));
	json_object_put(o);
	/* Budget thinking: the level's budget at most, and below max_tokens. */
	o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":60000}}", RTS_EFFORT_LOW, &out,
		  &rule);
	ck_assert_int_eq(json_object_get_int64(rts_json_get(rts_json_get(o, "thinking"), "budget_tokens")), 2048);
	ck_assert(out.budget_capped);
	json_object_put(o);
	o = build("{" USER_TEXT ",\"max_tokens\":4000,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":16000}}",
		  RTS_EFFORT_XHIGH, &out, &rule);
	ck_assert_int_eq(json_object_get_int64(rts_json_get(rts_json_get(o, "thinking"), "budget_tokens")), 3999);
	json_object_put(o);
	/* Under a max_tokens that leaves less than the API's minimum budget: refused. */
	ck_assert_ptr_null(build("{" USER_TEXT ",\"max_tokens\":1024,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
				 "1024}}",
				 RTS_EFFORT_XHIGH, &out, &rule));
	/* Thinking off stays off. */
	o = build("{" USER_TEXT ",\"thinking\":{\"type\":\"disabled\"}}", RTS_EFFORT_LOW, &out, &rule);
	ck_assert_str_eq(rts_json_get_string(rts_json_get(o, "thinking"), "type"), "disabled");
	json_object_put(o);
	ck_assert_uint_eq(brokerd_anthropic_budget_cap(RTS_EFFORT_LOW), 2048);
}
END_TEST

START_TEST(test_count_tokens)
{
	json_object *req = parse("{\"model\":\"x\",\"max_tokens\":10,\"stream\":true," USER_TEXT
				 ",\"system\":\"s\",\"temperature\":0.1}");
	struct brokerd_anthropic_policy p = policy(RTS_EFFORT_LOW);
	p.count_tokens = true;
	struct brokerd_anthropic_rebuilt out;
	const char *why, *rule;
	ck_assert_int_eq(brokerd_anthropic_request_build(req, &p, &out, &why, &rule), 0);
	ck_assert_ptr_null(rts_json_get(out.body, "max_tokens"));
	ck_assert_ptr_null(rts_json_get(out.body, "stream"));
	ck_assert_ptr_null(rts_json_get(out.body, "temperature"));
	ck_assert_ptr_nonnull(rts_json_get(out.body, "system"));
	ck_assert(!out.stream);
	json_object_put(out.body);
	json_object_put(req);
}
END_TEST

START_TEST(test_headers_and_answers)
{
	ck_assert(brokerd_anthropic_beta_allowed("interleaved-thinking-2025-05-14", 31));
	ck_assert(!brokerd_anthropic_beta_allowed("files-api-2025-04-14", 20));
	ck_assert(!brokerd_anthropic_beta_allowed("mcp-client-2025-04-04", 21));
	ck_assert(brokerd_anthropic_version_ok("2023-06-01", 10));
	ck_assert(!brokerd_anthropic_version_ok("2023-6-01", 9));
	ck_assert(!brokerd_anthropic_version_ok("2023x06-01", 10));
	bool oauth;
	char *h = brokerd_anthropic_auth_header("sk-ant-oat01-abc", &oauth);
	ck_assert(oauth);
	ck_assert_str_eq(h, "Authorization: Bearer sk-ant-oat01-abc");
	free(h);
	h = brokerd_anthropic_auth_header("sk-ant-api03-abc", &oauth);
	ck_assert(!oauth);
	ck_assert_str_eq(h, "x-api-key: sk-ant-api03-abc");
	free(h);

	unsigned status;
	const char *overflow = "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
			       "\"prompt is too long: 210000 tokens > 200000 maximum\"}}";
	char *a = brokerd_anthropic_error_answer(400, overflow, strlen(overflow), &status);
	ck_assert_uint_eq(status, 400);
	ck_assert_ptr_nonnull(strstr(a, "prompt is too long"));
	ck_assert_ptr_null(strstr(a, "210000"));
	free(a);
	const char *secret = "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"secret detail\"}}";
	a = brokerd_anthropic_error_answer(400, secret, strlen(secret), &status);
	ck_assert_ptr_null(strstr(a, "secret"));
	free(a);
	static const struct {
		long in;
		unsigned out;
		const char *type;
	} map[] = {{401, 502, "api_error"}, {403, 502, "api_error"}, {404, 502, "api_error"}, {307, 502, "api_error"},
		   {413, 413, "request_too_large"}, {429, 429, "rate_limit_error"}, {500, 500, "api_error"},
		   {529, 529, "overloaded_error"}};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(map); i++) {
		a = brokerd_anthropic_error_answer(map[i].in, NULL, 0, &status);
		ck_assert_uint_eq(status, map[i].out);
		json_object *o = parse(a);
		ck_assert_str_eq(rts_json_get_string(rts_json_get(o, "error"), "type"), map[i].type);
		json_object_put(o);
		free(a);
	}
	json_object *count = parse("{\"input_tokens\":42,\"context_management\":{\"x\":1}}");
	bool reflected;
	a = brokerd_anthropic_answer_rebuild(count, true, NULL, &reflected);
	ck_assert_str_eq(a, "{\"input_tokens\":42}");
	free(a);
	ck_assert_ptr_null(brokerd_anthropic_answer_rebuild(count, false, NULL, &reflected));
	ck_assert(!reflected);
	json_object_put(count);
}
END_TEST

/* ---- the splitter ---- */

struct got {
	char names[32][BROKERD_SSE_NAME_MAX + 1];
	char *data[32];
	size_t n;
};

static int collect(const char *name, const char *data, size_t len, void *arg)
{
	struct got *g = arg;
	ck_assert_uint_lt(g->n, 32);
	snprintf(g->names[g->n], sizeof(g->names[0]), "%s", name);
	g->data[g->n] = rts_xstrndup(data, len);
	ck_assert_uint_eq(strlen(g->data[g->n]), len);
	g->n++;
	return 0;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->data[i]);
	g->n = 0;
}

static const char STREAM[] = ": comment\r\n"
			     "event: message_start\r\ndata: {\"a\":1}\r\n\r\n"
			     "event: ping\ndata: {}\n\n"
			     "id: 7\nretry: 10\ndata: line one\ndata:line two\n\n"
			     "event: lonely\n\n"
			     "event: cr\rdata: x\r\r"
			     "event: tail\ndata: never dispatched";

static void check_stream_events(struct got *g)
{
	ck_assert_uint_eq(g->n, 4);
	ck_assert_str_eq(g->names[0], "message_start");
	ck_assert_str_eq(g->data[0], "{\"a\":1}");
	ck_assert_str_eq(g->names[1], "ping");
	ck_assert_str_eq(g->names[2], "message");
	ck_assert_str_eq(g->data[2], "line one\nline two");
	ck_assert_str_eq(g->names[3], "cr");
	ck_assert_str_eq(g->data[3], "x");
}

/* Whatever the pieces, the same events. */
START_TEST(test_sse_any_split)
{
	size_t len = strlen(STREAM);
	for (size_t step = 1; step <= len; step++) {
		struct brokerd_sse s;
		brokerd_sse_init(&s, 1024);
		struct got g = {.n = 0};
		for (size_t at = 0; at < len; at += step)
			ck_assert_int_eq(brokerd_sse_feed(&s, STREAM + at, at + step > len ? len - at : step, collect, &g), 0);
		check_stream_events(&g);
		ck_assert(!brokerd_sse_idle(&s));
		got_free(&g);
		brokerd_sse_release(&s);
	}
	/* Every split point of two pieces. */
	for (size_t cut = 0; cut <= len; cut++) {
		struct brokerd_sse s;
		brokerd_sse_init(&s, 1024);
		struct got g = {.n = 0};
		ck_assert_int_eq(brokerd_sse_feed(&s, STREAM, cut, collect, &g), 0);
		ck_assert_int_eq(brokerd_sse_feed(&s, STREAM + cut, len - cut, collect, &g), 0);
		check_stream_events(&g);
		got_free(&g);
		brokerd_sse_release(&s);
	}
}
END_TEST

START_TEST(test_sse_bounds)
{
	struct brokerd_sse s;
	struct got g = {.n = 0};
	brokerd_sse_init(&s, 8);
	ck_assert_int_eq(brokerd_sse_feed(&s, "data: 12345678\n\n", 16, collect, &g), 0);
	ck_assert_int_eq(brokerd_sse_feed(&s, "data: 123456789\n\n", 17, collect, &g), -EFBIG);
	/* Refused once, refused for good. */
	ck_assert_int_eq(brokerd_sse_feed(&s, "data: 1\n\n", 9, collect, &g), -EBADMSG);
	brokerd_sse_release(&s);
	got_free(&g);
	brokerd_sse_init(&s, 8);
	ck_assert_int_eq(brokerd_sse_feed(&s, "data: 1234\ndata: 5678\n\n", 23, collect, &g), -EFBIG);
	brokerd_sse_release(&s);
	brokerd_sse_init(&s, 1024);
	ck_assert_int_eq(brokerd_sse_feed(&s, "data: a\0b\n\n", 11, collect, &g), -EBADMSG);
	brokerd_sse_release(&s);
	brokerd_sse_init(&s, 1024);
	char name[128];
	memset(name, 'e', sizeof(name));
	ck_assert_int_eq(brokerd_sse_feed(&s, "event: ", 7, collect, &g), 0);
	ck_assert_int_eq(brokerd_sse_feed(&s, name, sizeof(name), collect, &g), 0);
	ck_assert_int_eq(brokerd_sse_feed(&s, "\n", 1, collect, &g), -EFBIG);
	brokerd_sse_release(&s);
	got_free(&g);
}
END_TEST

/* ---- the stream filter ---- */

static const char KEY[] = "sk-ant-oat01-Zq9xLm7Tt0123456789abcdefABCDEF-token";
static struct rts_key_source key_src = {.kind = RTS_KEY_ENV, .value = "X"};

static struct brokerd_keyring *ring(void)
{
	struct brokerd_keyring *k = brokerd_keyring_new();
	brokerd_keyring_add(k, &key_src, KEY, strlen(KEY));
	return k;
}

static int feed(struct brokerd_stream_filter *f, const char *name, const char *json)
{
	return brokerd_stream_filter_event(f, name, json, strlen(json));
}

static char *delta(const char *text)
{
	json_object *d = json_object_new_object();
	json_object_object_add(d, "type", json_object_new_string("text_delta"));
	json_object_object_add(d, "text", json_object_new_string(text));
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("content_block_delta"));
	json_object_object_add(o, "index", json_object_new_int(0));
	json_object_object_add(o, "delta", d);
	char *s = rts_json_dump(o);
	json_object_put(o);
	return s;
}

/* Everything released so far, taken. */
static char *drain(struct brokerd_stream_filter *f)
{
	size_t n;
	const char *out = brokerd_stream_filter_out(f, &n);
	char *copy = rts_xstrndup(out, n);
	brokerd_stream_filter_take(f, n);
	return copy;
}

static const char START_EV[] = "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":"
			       "\"assistant\",\"content\":[]}}";
static const char BLOCK_EV[] = "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
			       "\"text\":\"\"}}";

START_TEST(test_filter_passes_a_stream)
{
	struct brokerd_keyring *k = ring();
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	ck_assert_int_eq(feed(f, "message_start", START_EV), 0);
	ck_assert_int_eq(feed(f, "content_block_start", BLOCK_EV), 0);
	ck_assert_int_eq(feed(f, "ping", "{\"type\":\"ping\"}"), 0);
	cleanup_free char *d = delta("Hello there");
	ck_assert_int_eq(feed(f, "content_block_delta", d), 0);
	/* The events before the model's text are out at once; the text is held back: less of
	 * the model's text than the window has followed it. */
	ck_assert_uint_eq(brokerd_stream_filter_pending(f) > 0, 1);
	cleanup_free char *early = drain(f);
	ck_assert_ptr_nonnull(strstr(early, "event: message_start\ndata: {\"type\":\"message_start\""));
	ck_assert_ptr_nonnull(strstr(early, "event: ping\n"));
	ck_assert_ptr_null(strstr(early, "content_block_delta"));
	ck_assert_uint_gt(brokerd_stream_filter_pending(f), 0);
	ck_assert_int_eq(feed(f, "content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"), 0);
	ck_assert_int_eq(feed(f, "message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}"),
			 0);
	ck_assert_int_eq(feed(f, "message_stop", "{\"type\":\"message_stop\"}"), 0);
	ck_assert(brokerd_stream_filter_stopped(f));
	cleanup_free char *all = drain(f);

	ck_assert_ptr_nonnull(strstr(all, "\"text\":\"Hello there\""));
	ck_assert_ptr_nonnull(strstr(all, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
	ck_assert_uint_eq(brokerd_stream_filter_pending(f), 0);
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

/* With enough text after an event, it is released before the message ends. */
START_TEST(test_filter_releases_after_a_window)
{
	struct brokerd_keyring *k = ring();
	size_t window = brokerd_stream_window(strlen(KEY));
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, window);
	ck_assert_int_eq(feed(f, "message_start", START_EV), 0);
	char *text = rts_xmalloc(window + 1);
	memset(text, 'a', window);
	text[window] = '\0';
	cleanup_free char *d = delta(text);
	free(text);
	ck_assert_int_eq(feed(f, "content_block_delta", d), 0);
	cleanup_free char *out = drain(f);
	ck_assert_ptr_nonnull(strstr(out, "message_start"));
	ck_assert_ptr_null(strstr(out, "content_block_delta"));
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

static bool holds_prefix(const char *out, size_t min_len)
{
	/* Any piece of the key of at least min_len characters. */
	for (size_t start = 0; start + min_len <= strlen(KEY); start++) {
		char piece[sizeof(KEY)];
		memcpy(piece, KEY + start, min_len);
		piece[min_len] = '\0';
		if (strstr(out, piece))
			return true;
	}
	return false;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The key spelled out across delta events, in pieces of every size, after more text than
 * the window (so the filter does release what came before): caught when the last piece
 * comes, and not one event holding a piece of it was released. */
START_TEST(test_filter_key_across_deltas)
{
	size_t piece = (size_t)_i;
	struct brokerd_keyring *k = ring();
	size_t window = brokerd_stream_window(strlen(KEY));
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, window);
	ck_assert_int_eq(feed(f, "message_start", START_EV), 0);
	ck_assert_int_eq(feed(f, "content_block_start", BLOCK_EV), 0);
	char *text = rts_xmalloc(window + 11);
	memset(text, '.', window + 10);
	text[window + 10] = '\0';
	cleanup_free char *lead = delta(text);
	free(text);
	/* Two: the first is released once the second follows it. */
	ck_assert_int_eq(feed(f, "content_block_delta", lead), 0);
	ck_assert_int_eq(feed(f, "content_block_delta", lead), 0);
	int r = 0;
	char *released = drain(f);
	for (size_t at = 0; at < strlen(KEY) && r == 0; at += piece) {
		char part[sizeof(KEY)];
		size_t n = strlen(KEY) - at < piece ? strlen(KEY) - at : piece;
		memcpy(part, KEY + at, n);
		part[n] = '\0';
		cleanup_free char *d = delta(part);
		r = feed(f, "content_block_delta", d);
		cleanup_free char *out = drain(f);
		char *joined = rts_xasprintf("%s%s", released, out);
		free(released);
		released = joined;
	}
	ck_assert_int_eq(r, BROKERD_STREAM_REFLECTED);
	/* What came before went out; no event with a piece of the key did. */
	ck_assert_ptr_nonnull(strstr(released, "message_start"));
	ck_assert_uint_eq(count(released, "event: content_block_delta"), 1);
	ck_assert(!holds_prefix(released, 6));
	brokerd_stream_filter_fail(f);
	cleanup_free char *tail = drain(f);
	ck_assert_ptr_nonnull(strstr(tail, "event: error\ndata: {\"type\":\"error\""));
	ck_assert_uint_eq(count(tail, "event: content_block_delta"), 0);
	free(released);
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

/* Encoded forms across events, and the key whole in one event (raw and decoded). */
START_TEST(test_filter_forms)
{
	struct brokerd_keyring *k = ring();
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	/* \u escapes of the key inside the model's text, split in two events. */
	char esc[6 * sizeof(KEY) + 1] = "";
	for (size_t i = 0; i < strlen(KEY); i++)
		snprintf(esc + 6 * i, 7, "\\u%04x", (unsigned char)KEY[i]);
	size_t half = strlen(esc) / 2;
	char first[sizeof(esc)];
	memcpy(first, esc, half);
	first[half] = '\0';
	cleanup_free char *d1 = delta(first);
	cleanup_free char *d2 = delta(esc + half);
	ck_assert_int_eq(feed(f, "content_block_delta", d1), 0);
	ck_assert_int_eq(feed(f, "content_block_delta", d2), BROKERD_STREAM_REFLECTED);
	brokerd_stream_filter_free(f);

	f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	cleanup_free char *whole = rts_xasprintf("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\"}}", KEY);
	ck_assert_int_eq(feed(f, "message_delta", whole), BROKERD_STREAM_REFLECTED);
	brokerd_stream_filter_free(f);

	/* A decoy passes. */
	f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	cleanup_free char *decoy = delta("sk-ant-oat01-Zq9xLm7Tt0123456789abcdefABCDEF-tokeN");
	ck_assert_int_eq(feed(f, "content_block_delta", decoy), 0);
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

/* Empty delta text (the first input_json_delta of a tool call is one) is fine. */
START_TEST(test_filter_empty_deltas)
{
	struct brokerd_keyring *k = ring();
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	cleanup_free char *d = delta("");
	ck_assert_int_eq(feed(f, "content_block_delta", d), 0);
	ck_assert_int_eq(feed(f, "content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
						       "\"input_json_delta\",\"partial_json\":\"\"}}"),
			 0);
	brokerd_stream_filter_end(f);
	cleanup_free char *out = drain(f);
	ck_assert_uint_eq(count(out, "event: content_block_delta"), 2);
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

START_TEST(test_filter_refuses_foreign_events)
{
	static const struct {
		const char *name, *data;
		int want;
	} cases[] = {
		{"message", "{\"type\":\"message\"}", BROKERD_STREAM_BAD_EVENT},
		{"ping", "{\"type\":\"pong\"}", BROKERD_STREAM_BAD_EVENT},
		{"ping", "not json", BROKERD_STREAM_BAD_EVENT},
		{"ping", "[1]", BROKERD_STREAM_BAD_EVENT},
		{"content_block_start", "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
					"\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}}",
		 BROKERD_STREAM_BAD_EVENT},
		{"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
					"\"citations_delta\",\"citation\":{}}}",
		 BROKERD_STREAM_BAD_EVENT},
		{"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
					"\"text\":5}}",
		 BROKERD_STREAM_BAD_EVENT},
		{"error", "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}",
		 BROKERD_STREAM_UPSTREAM_ERROR},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		struct brokerd_stream_filter *f = brokerd_stream_filter_new(NULL, 0);
		ck_assert_int_eq(feed(f, cases[i].name, cases[i].data), cases[i].want);
		if (cases[i].want == BROKERD_STREAM_UPSTREAM_ERROR) {
			ck_assert_str_eq(brokerd_stream_filter_error_type(f), "overloaded_error");
			brokerd_stream_filter_fail(f);
			cleanup_free char *out = drain(f);
			ck_assert_ptr_nonnull(strstr(out, "\"type\":\"overloaded_error\""));
			ck_assert_ptr_null(strstr(out, "busy"));
		}
		brokerd_stream_filter_free(f);
	}
}
END_TEST

/* ---- a key split across the strings of different events or members ---- */

/* The reviewer's splits of KEY (first 20 bytes | the rest), one script each: events in
 * order; the last one completes the key. @A stands for the first half, @B the second. */
static const struct {
	const char *what;
	const char *events[6][2];
} splits[] = {
	{"a text block's start text, then a delta",
	 {{"message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":"
			    "\"assistant\",\"model\":\"claude-x\",\"content\":[]}}"},
	  {"content_block_start",
	   "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"@A\"}}"},
	  {"content_block_delta",
	   "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"@B\"}}"}}},
	{"the message id, then a block's start text",
	 {{"message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_@A\",\"type\":\"message\","
			    "\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,"
			    "\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}"},
	  {"content_block_start",
	   "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"@B\"}}"}}},
	{"a tool call's id, then its name",
	 {{"content_block_start", "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
				  "\"tool_use\",\"id\":\"@A\",\"name\":\"@B\",\"input\":{}}}"}}},
	{"a text delta, then the next block's tool name",
	 {{"content_block_start",
	   "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"},
	  {"content_block_delta",
	   "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"@A\"}}"},
	  {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"},
	  {"content_block_start", "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
				  "\"tool_use\",\"id\":\"toolu_1\",\"name\":\"@B\",\"input\":{}}}"}}},
	{"a text delta, then a thinking delta of the next block",
	 {{"content_block_delta",
	   "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"@A\"}}"},
	  {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"},
	  {"content_block_start", "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
				  "\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}"},
	  {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":"
				  "\"thinking_delta\",\"thinking\":\"@B\"}}"}}},
	{"a tool's input key, then its partial JSON",
	 {{"content_block_start", "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
				  "\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{\"@A\":1}}}"},
	  {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
				  "\"input_json_delta\",\"partial_json\":\"@B\"}}"}}},
};

#define SPLIT_AT 20

/* tmpl with every @A replaced by a and every @B by b. Caller frees. */
static char *fill(const char *tmpl, const char *a, const char *b)
{
	char *out = rts_xmalloc(strlen(tmpl) * (strlen(a) + strlen(b) + 1) + 1), *o = out;
	for (const char *p = tmpl; *p; p++) {
		if (p[0] == '@' && (p[1] == 'A' || p[1] == 'B')) {
			o = stpcpy(o, p[1] == 'A' ? a : b);
			p++;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

/* Each split: caught at the event that completes the key, with the reflection error, and
 * nothing released holds the second half; the same script with the second half changed
 * by one character passes whole. */
START_TEST(test_filter_split_across_members)
{
	for (int decoy = 0; decoy < 2; decoy++) {
		char a[SPLIT_AT + 1], b[sizeof(KEY)];
		memcpy(a, KEY, SPLIT_AT);
		a[SPLIT_AT] = '\0';
		strcpy(b, KEY + SPLIT_AT);
		if (decoy)
			b[3] ^= 1;
		struct brokerd_keyring *k = ring();
		struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
		size_t n = 0;
		while (n < 6 && splits[_i].events[n][0])
			n++;
		int r = 0;
		cleanup_free char *released = rts_xstrdup("");
		for (size_t e = 0; e < n && r == 0; e++) {
			cleanup_free char *data = fill(splits[_i].events[e][1], a, b);
			r = feed(f, splits[_i].events[e][0], data);
			if (r == 0)
				ck_assert_msg(e + 1 < n || decoy, "%s: missed", splits[_i].what);
			else
				ck_assert_msg(e + 1 == n, "%s: refused early", splits[_i].what);
			cleanup_free char *out = drain(f);
			char *joined = rts_xasprintf("%s%s", released, out);
			free(released);
			released = joined;
		}
		if (decoy) {
			ck_assert_int_eq(r, 0);
			ck_assert_int_eq(feed(f, "message_stop", "{\"type\":\"message_stop\"}"), 0);
			cleanup_free char *out = drain(f);
			ck_assert_msg(strstr(out, b), "%s: the decoy did not pass", splits[_i].what);
		} else {
			ck_assert_int_eq(r, BROKERD_STREAM_REFLECTED);
			brokerd_stream_filter_fail(f);
			cleanup_free char *out = drain(f);
			ck_assert_ptr_null(strstr(released, b));
			ck_assert_ptr_null(strstr(out, b));
			ck_assert_ptr_null(strstr(out, a));
		}
		brokerd_stream_filter_free(f);
		brokerd_keyring_free(k);
	}
}
END_TEST

/* Members the Messages API does not stream to this broker's requests are dropped: a text
 * block's citations (with half the key in them: the other half then passes alone), a
 * server tool's usage, a container. */
START_TEST(test_filter_rebuilds_from_known_members)
{
	struct brokerd_keyring *k = ring();
	struct brokerd_stream_filter *f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)));
	cleanup_free char *start = rts_xasprintf(
		"{\"type\":\"content_block_start\",\"index\":0,\"extra\":1,\"content_block\":{\"type\":\"text\","
		"\"text\":\"\",\"citations\":[{\"cited_text\":\"%.*s\"}]}}",
		SPLIT_AT, KEY);
	ck_assert_int_eq(feed(f, "message_start",
			      "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":"
			      "\"assistant\",\"content\":[],\"container\":{\"id\":\"c\"},\"usage\":{\"input_tokens\":3,"
			      "\"output_tokens\":1,\"server_tool_use\":{\"web_search_requests\":1},\"service_tier\":"
			      "\"standard\",\"inference_geo\":\"x\"}}}"),
			 0);
	ck_assert_int_eq(feed(f, "content_block_start", start), 0);
	cleanup_free char *d = delta(KEY + SPLIT_AT);
	ck_assert_int_eq(feed(f, "content_block_delta", d), 0);
	ck_assert_int_eq(feed(f, "message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
						 "\"stop_sequence\":null,\"container\":null},\"usage\":{"
						 "\"output_tokens\":5},\"context_management\":{}}"),
			 0);
	ck_assert_int_eq(feed(f, "message_stop", "{\"type\":\"message_stop\"}"), 0);
	cleanup_free char *out = drain(f);
	ck_assert_ptr_nonnull(strstr(out, "{\"type\":\"message_start\",\"message\":{\"type\":\"message\",\"role\":"
					  "\"assistant\",\"id\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,"
					  "\"output_tokens\":1,\"service_tier\":\"standard\"}}}"));
	ck_assert_ptr_nonnull(strstr(out, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
					  "\"text\",\"text\":\"\"}}"));
	ck_assert_ptr_nonnull(strstr(out, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
					  "\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}"));
	ck_assert_ptr_null(strstr(out, "citations"));
	ck_assert_ptr_null(strstr(out, "cited_text"));
	brokerd_stream_filter_free(f);
	brokerd_keyring_free(k);
}
END_TEST

/* A whole answer: the concatenation of its strings is checked, so the key split over two
 * text blocks is refused; the same with one character changed passes, rebuilt. */
START_TEST(test_answer_split_over_blocks)
{
	struct brokerd_keyring *k = ring();
	for (int decoy = 0; decoy < 2; decoy++) {
		char b[sizeof(KEY)];
		strcpy(b, KEY + 25);
		if (decoy)
			b[2] ^= 1;
		cleanup_free char *doc = rts_xasprintf(
			"{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":["
			"{\"type\":\"text\",\"text\":\"%.25s\",\"citations\":null},{\"type\":\"text\",\"text\":\"%s\"}],"
			"\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,"
			"\"output_tokens\":1},\"container\":null}",
			KEY, b);
		json_object *ans = parse(doc);
		bool reflected = true;
		cleanup_free char *out = brokerd_anthropic_answer_rebuild(ans, false, k, &reflected);
		if (decoy) {
			ck_assert(!reflected);
			ck_assert_ptr_nonnull(out);
			ck_assert_ptr_null(strstr(out, "citations"));
			ck_assert_ptr_null(strstr(out, "container"));
			ck_assert_ptr_nonnull(strstr(out, b));
		} else {
			ck_assert(reflected);
			ck_assert_ptr_null(out);
		}
		json_object_put(ans);
	}
	/* Not a message at all, or a block of a kind the broker never asks for. */
	bool reflected;
	json_object *bad = parse("{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
				 "\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}]}");
	ck_assert_ptr_null(brokerd_anthropic_answer_rebuild(bad, false, k, &reflected));
	ck_assert(!reflected);
	json_object_put(bad);
	brokerd_keyring_free(k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("broker_anthropic");
	TCase *tc = tcase_create("request");
	tcase_add_test(tc, test_rebuild_fixes_model_and_limit);
	tcase_add_test(tc, test_pi_request_accepted);
	tcase_add_test(tc, test_native_tools_refused);
	tcase_add_test(tc, test_remote_media_refused);
	tcase_add_test(tc, test_image_data_base64);
	tcase_add_test(tc, test_remote_ref_refused);
	tcase_add_test(tc, test_other_refusals);
	tcase_add_test(tc, test_effort_capped);
	tcase_add_test(tc, test_count_tokens);
	tcase_add_test(tc, test_headers_and_answers);
	suite_add_tcase(s, tc);
	tc = tcase_create("stream");
	tcase_add_test(tc, test_sse_any_split);
	tcase_add_test(tc, test_sse_bounds);
	tcase_add_test(tc, test_filter_passes_a_stream);
	tcase_add_test(tc, test_filter_releases_after_a_window);
	tcase_add_loop_test(tc, test_filter_key_across_deltas, 1, 12);
	tcase_add_test(tc, test_filter_forms);
	tcase_add_test(tc, test_filter_empty_deltas);
	tcase_add_test(tc, test_filter_refuses_foreign_events);
	tcase_add_loop_test(tc, test_filter_split_across_members, 0, (int)RTS_ARRAY_SIZE(splits));
	tcase_add_test(tc, test_filter_rebuilds_from_known_members);
	tcase_add_test(tc, test_answer_split_over_blocks);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
