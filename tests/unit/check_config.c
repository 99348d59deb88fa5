/* SPDX-License-Identifier: Apache-2.0 */
/* The config loader: defaults, every key accepted, and every refusal naming its key path. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/accounts.h"
#include "common/conf.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/schema.h"
#include "common/tools.h"
#include "common/util.h"

static const char *MINIMAL = "{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\"}";

/* Parse text and validate it; returns the config or NULL with err filled. */
static struct rts_config *load_text(const char *text, char *err, size_t errlen)
{
	json_object *root = NULL;
	const char *why = NULL;
	if (rts_json_parse(text, strlen(text), 64, &root, &why) < 0) {
		snprintf(err, errlen, "parse: %s", why);
		return NULL;
	}
	struct rts_config *c = rts_config_from_json(root, "test.json", err, errlen);
	json_object_put(root);
	return c;
}

/* Replace the closing brace of MINIMAL with ",<extra>}". */
static char *with(const char *extra)
{
	return rts_xasprintf("{\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\",%s}", extra);
}

/* Asserts that the document is refused with a message that starts with "test.json: <keypath>: ". */
static void assert_refused(const char *extra, const char *keypath)
{
	char err[1024] = "";
	cleanup_free char *text = with(extra);
	struct rts_config *c = load_text(text, err, sizeof(err));
	ck_assert_msg(c == NULL, "accepted: %s", text);
	cleanup_free char *prefix = rts_xasprintf("test.json: %s: ", keypath);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "for %s expected prefix '%s', got '%s'", extra, prefix,
		      err);
}

START_TEST(test_defaults)
{
	char err[512];
	struct rts_config *c = load_text(MINIMAL, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->image, "roundtable-sandbox:local");
	ck_assert_uint_eq(c->max_output_tokens, 4096);
	ck_assert_uint_eq(c->turn_timeout_ms, 120000);
	ck_assert_uint_eq(c->warm_spares, 1); /* DESIGN.md 8.4: spares on by default */
	ck_assert_uint_eq(c->warm_spares_max, 16);
	ck_assert_uint_eq(c->warm_spare_idle_ms, 600000);
	ck_assert_uint_eq(c->limits.memory_mb, 512);
	ck_assert_uint_eq(c->limits.pids, 64);
	ck_assert(c->limits.cpus == 1.0);
	ck_assert_int_eq(c->api_key.kind, RTS_KEY_CREDENTIAL);
	ck_assert_str_eq(c->api_key.value, "model-api-key");
	ck_assert_str_eq(c->time_zone, "UTC");
	ck_assert_ptr_null(c->ca_file);
	ck_assert(!c->has_uid && !c->has_gid);
	ck_assert_uint_eq(c->n_tools, 0);
	ck_assert_ptr_null(c->initial_channels[0]);
	ck_assert_uint_eq(strlen(c->installation_id), 12);
	/* No "fetch" key: no host_fetch, and the seed's fetch defaults ready for when it is on. */
	ck_assert(!c->fetch.enabled);
	ck_assert_uint_eq(c->fetch.max_bytes, 5u * 1024u * 1024u);
	ck_assert_uint_eq(c->fetch.timeout_ms, 60000);
	ck_assert_uint_eq(c->fetch.max_redirects, 5);
	json_object *pub = rts_config_public_tools(c);
	ck_assert_uint_eq(json_object_array_length(pub), 0);
	json_object_put(pub);
	rts_config_free(c);
}
END_TEST

START_TEST(test_full)
{
	const char *text =
		"{\"image\":\"rts:test\",\"runRoot\":\"/tmp/r\",\"workspaceRoot\":\"/srv/ws\",\"stateFile\":\"/srv/state/c.json\","
		"\"uid\":999,\"gid\":998,\"provider\":\"openai\",\"model\":\"m\",\"modelUrl\":\"https://h/v1\","
		"\"apiKey\":{\"command\":[\"/usr/bin/key\",\"--scope\"]},\"maxOutputTokens\":100,"
		"\"limits\":{\"memoryMb\":256,\"cpus\":0.5,\"pids\":32},\"turnTimeoutMs\":5000,\"systemPrompt\":\"hi\","
		"\"timeZone\":\"Europe/Berlin\",\"caFile\":\"/etc/ca.pem\",\"initialChannels\":[\"g/1\",\"g/2\"],"
		"\"tools\":[{\"name\":\"clock\",\"description\":\"time\",\"parameters\":{\"type\":\"object\"},"
		"\"command\":[\"/usr/bin/date\"],\"timeoutMs\":1000}],"
		"\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp/x\",\"apiKey\":{\"env\":\"MCP_KEY\"},"
		"\"tools\":[{\"name\":\"search\",\"description\":\"d\",\"parameters\":{}}]}]}";
	char err[512];
	struct rts_config *c = load_text(text, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_str_eq(c->image, "rts:test");
	ck_assert_uint_eq(c->uid, 999);
	ck_assert_uint_eq(c->gid, 998);
	ck_assert_int_eq(c->api_key.kind, RTS_KEY_COMMAND);
	ck_assert_str_eq(c->api_key.argv[1], "--scope");
	ck_assert_uint_eq(c->limits.memory_mb, 256);
	ck_assert(c->limits.cpus == 0.5);
	ck_assert_str_eq(c->initial_channels[1], "g/2");
	ck_assert_uint_eq(c->n_tools, 1);
	ck_assert_uint_eq(c->tools[0].timeout_ms, 1000);
	ck_assert_uint_eq(c->n_mcp, 1);
	ck_assert_int_eq(c->mcp[0].api_key.kind, RTS_KEY_ENV);

	/* The public tool list hides commands and URLs and names tools as the worker sees them. */
	json_object *pub = rts_config_public_tools(c);
	cleanup_free char *s = rts_json_dump(pub);
	ck_assert_ptr_nonnull(strstr(s, "host_clock"));
	ck_assert_ptr_nonnull(strstr(s, "mcp_0_search"));
	ck_assert_ptr_nonnull(strstr(s, "/mcp/docs"));
	ck_assert_ptr_null(strstr(s, "/usr/bin/date"));
	ck_assert_ptr_null(strstr(s, "https://mcp/x"));
	ck_assert_ptr_null(strstr(s, "MCP_KEY"));
	json_object_put(pub);
	rts_config_free(c);
}
END_TEST

START_TEST(test_unknown_keys)
{
	assert_refused("\"imagee\":\"x\"", "imagee");
	assert_refused("\"limits\":{\"memory\":5}", "limits.memory");
	assert_refused("\"apiKey\":{\"vault\":\"x\"}", "apiKey.vault");
	assert_refused("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"],\"shell\":true}]",
		       "tools[0].shell");
	assert_refused("\"mcp\":[{\"name\":\"a\",\"url\":\"https://x\",\"tools\":[{\"name\":\"t\",\"description\":\"\","
		       "\"parameters\":{},\"x\":1}]}]",
		       "mcp[0].tools[0].x");
}
END_TEST

START_TEST(test_wrong_types)
{
	assert_refused("\"image\":5", "image");
	assert_refused("\"uid\":\"1000\"", "uid");
	assert_refused("\"maxOutputTokens\":4096.5", "maxOutputTokens");
	assert_refused("\"limits\":[]", "limits");
	assert_refused("\"limits\":{\"cpus\":\"1\"}", "limits.cpus");
	assert_refused("\"tools\":{}", "tools");
	assert_refused("\"initialChannels\":[1]", "initialChannels[0]");
	assert_refused("\"apiKey\":\"sk-live\"", "apiKey");
	assert_refused("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":[],\"command\":[\"/b\"]}]",
		       "tools[0].parameters");
	assert_refused("\"systemPrompt\":null", "systemPrompt");
}
END_TEST

START_TEST(test_out_of_range)
{
	assert_refused("\"turnTimeoutMs\":0", "turnTimeoutMs");
	assert_refused("\"turnTimeoutMs\":999", "turnTimeoutMs"); /* 1 s is the least */
	assert_refused("\"turnTimeoutMs\":600001", "turnTimeoutMs");
	assert_refused("\"maxOutputTokens\":0", "maxOutputTokens");
	assert_refused("\"limits\":{\"memoryMb\":1}", "limits.memoryMb");
	assert_refused("\"limits\":{\"cpus\":0}", "limits.cpus");
	assert_refused("\"limits\":{\"pids\":99999999}", "limits.pids");
	/* A root service account is refused. */
	assert_refused("\"uid\":0", "uid");
	assert_refused("\"gid\":0", "gid");
	assert_refused("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"],"
		       "\"timeoutMs\":0}]",
		       "tools[0].timeoutMs");
}
END_TEST

/* tmpl with its one "%s" replaced by value (a template, not a printf format). */
static char *fill(const char *tmpl, const char *value)
{
	const char *at = strstr(tmpl, "%s");
	ck_assert_ptr_nonnull(at);
	return rts_xasprintf("%.*s%s%s", (int)(at - tmpl), tmpl, value, at + 2);
}

/* Asserts that the document loads. */
static void assert_loads(const char *extra)
{
	char err[1024] = "";
	cleanup_free char *text = with(extra);
	struct rts_config *c = load_text(text, err, sizeof(err));
	ck_assert_msg(c != NULL, "refused %.200s: %s", text, err);
	rts_config_free(c);
}

/* Every configurable range: both ends load, one step outside either end is refused
 * naming the key (common/limits.h holds the ranges; the worker and runnerd use the same). */
START_TEST(test_range_ends)
{
	static const struct {
		const char *key; /* the key path as the error names it */
		const char *fmt; /* the document's extra member, with %s for the value */
		const char *lo, *hi, *below, *above;
	} ranges[] = {
		{"maxOutputTokens", "\"maxOutputTokens\":%s", "1", "1048576", "0", "1048577"},
		{"turnTimeoutMs", "\"turnTimeoutMs\":%s", "1000", "600000", "999", "600001"},
		{"warmSpares", "\"warmSpares\":%s", "0", "1", "-1", "2"},
		{"warmSparesMax", "\"warmSparesMax\":%s", "1", "256", "0", "257"},
		{"warmSpareIdleMs", "\"warmSpareIdleMs\":%s", "1000", "86400000", "999", "86400001"},
		{"limits.memoryMb", "\"limits\":{\"memoryMb\":%s}", "64", "65536", "63", "65537"},
		{"limits.cpus", "\"limits\":{\"cpus\":%s}", "0.01", "64", "0.0099", "64.001"},
		{"limits.pids", "\"limits\":{\"pids\":%s}", "8", "32768", "7", "32769"},
		/* A precheck's runtime needs more CPU and processes to start (common/limits.h). */
		{"precheck.limits.cpus", "\"precheck\":{\"image\":\"i\",\"limits\":{\"cpus\":%s}}", "0.1", "64", "0.099",
		 "64.001"},
		{"precheck.limits.pids", "\"precheck\":{\"image\":\"i\",\"limits\":{\"pids\":%s}}", "16", "32768", "15",
		 "32769"},
		{"tools[0].timeoutMs",
		 "\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"],\"timeoutMs\":%s}]", "1",
		 "60000", "0", "60001"},
		/* Seed: 1 millisecond to 120 seconds, 0 to 10 redirects, 1 byte to 32 MiB. */
		{"fetch.timeoutMs", "\"fetch\":{\"enabled\":true,\"timeoutMs\":%s}", "1", "120000", "0", "120001"},
		{"fetch.maxRedirects", "\"fetch\":{\"enabled\":true,\"maxRedirects\":%s}", "0", "10", "-1", "11"},
		{"fetch.maxBytes", "\"fetch\":{\"enabled\":true,\"maxBytes\":%s}", "1", "33554432", "0", "33554433"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ranges); i++) {
		const char *ok[] = {ranges[i].lo, ranges[i].hi};
		const char *bad[] = {ranges[i].below, ranges[i].above};
		for (size_t j = 0; j < 2; j++) {
			cleanup_free char *good = fill(ranges[i].fmt, ok[j]);
			assert_loads(good);
			cleanup_free char *out = fill(ranges[i].fmt, bad[j]);
			assert_refused(out, ranges[i].key);
		}
	}
	/* The JavaScript runtime's CPU bottom lies inside the turn container's range, under
	 * the precheck's and the rich container's defaults (clang takes no floating-point
	 * _Static_assert). */
	ck_assert(RTS_CPUS_MIN <= RTS_PRECHECK_CPUS_MIN && RTS_PRECHECK_CPUS_MIN <= RTS_PRECHECK_CPUS_DEFAULT &&
		  RTS_PRECHECK_CPUS_MIN <= RTS_RICH_CPUS_DEFAULT && RTS_PRECHECK_CPUS_DEFAULT <= RTS_CPUS_MAX);
	/* The constants are what the man page and the loader say. */
	ck_assert_uint_eq(RTS_MAX_OUTPUT_TOKENS_MAX, 1048576);
	ck_assert_uint_eq(RTS_TOOL_TIMEOUT_MS_MAX, 60000);
	ck_assert_uint_eq(RTS_FETCH_TIMEOUT_MAX_MS, 120000);
	ck_assert_uint_eq(RTS_FETCH_BYTES_MAX, 33554432);
}
END_TEST

/* Seed: tool, MCP server and MCP tool names match [a-z][a-z0-9_]{0,47}. */
START_TEST(test_name_bounds)
{
	static const char *const bad[] = {
		"Clock",     /* uppercase */
		"cLock",     /* uppercase later on */
		"1clock",    /* leading digit */
		"_clock",    /* leading underscore */
		"",	     /* empty */
		"cl\\u00f6ck", /* non-ASCII */
		"clock-2",   /* hyphen */
		"clock 2",   /* space */
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 49 characters */
	};
	static const char *const places[][2] = {
		{"\"tools\":[{\"name\":\"%s\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"]}]", "tools[0].name"},
		{"\"mcp\":[{\"name\":\"%s\",\"url\":\"https://x\",\"tools\":[{\"name\":\"t\",\"description\":\"\","
		 "\"parameters\":{}}]}]",
		 "mcp[0].name"},
		{"\"mcp\":[{\"name\":\"s\",\"url\":\"https://x\",\"tools\":[{\"name\":\"%s\",\"description\":\"\","
		 "\"parameters\":{}}]}]",
		 "mcp[0].tools[0].name"},
	};
	ck_assert_uint_eq(strlen(bad[RTS_ARRAY_SIZE(bad) - 1]), RTS_NAME_MAX + 1);
	for (size_t p = 0; p < RTS_ARRAY_SIZE(places); p++) {
		for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
			cleanup_free char *extra = fill(places[p][0], bad[i]);
			assert_refused(extra, places[p][1]);
		}
		/* The longest and the shortest valid names load. */
		cleanup_free char *longest = fill(places[p][0], "a2345678901234567890123456789012345678901234567_");
		assert_loads(longest);
		cleanup_free char *shortest = fill(places[p][0], "z");
		assert_loads(shortest);
	}
}
END_TEST

/* A string of n copies of the JSON text unit (one character once decoded). */
static char *repeat(const char *unit, size_t n)
{
	size_t u = strlen(unit);
	char *s = rts_xmalloc(u * n + 1);
	for (size_t i = 0; i < n; i++)
		memcpy(s + i * u, unit, u);
	s[u * n] = '\0';
	return s;
}

/* Descriptions and the system prompt are bounded as the worker measures them: bytes once
 * JSON-escaped. At the bound they load; one byte over, or fewer characters that escape to
 * more, are refused naming the key (the worker would otherwise cut them). */
START_TEST(test_encoded_sizes)
{
	static const struct {
		const char *fmt, *key;
		size_t max;
	} texts[] = {
		{"\"systemPrompt\":\"%s\"", "systemPrompt", RTS_SYSTEM_PROMPT_MAX},
		{"\"tools\":[{\"name\":\"a\",\"description\":\"%s\",\"parameters\":{},\"command\":[\"/b\"]}]",
		 "tools[0].description", RTS_DESCRIPTION_MAX},
		{"\"mcp\":[{\"name\":\"s\",\"url\":\"https://x\",\"tools\":[{\"name\":\"t\",\"description\":\"%s\","
		 "\"parameters\":{}}]}]",
		 "mcp[0].tools[0].description", RTS_DESCRIPTION_MAX},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(texts); i++) {
		cleanup_free char *plain = repeat("x", texts[i].max);
		cleanup_free char *a = fill(texts[i].fmt, plain);
		assert_loads(a);
		cleanup_free char *plain1 = repeat("x", texts[i].max + 1);
		cleanup_free char *b = fill(texts[i].fmt, plain1);
		assert_refused(b, texts[i].key);
		/* Line breaks take two bytes: half as many fill the bound. */
		cleanup_free char *lines = repeat("\\n", texts[i].max / 2);
		cleanup_free char *c = fill(texts[i].fmt, lines);
		assert_loads(c);
		cleanup_free char *lines1 = repeat("\\n", texts[i].max / 2 + 1);
		cleanup_free char *d = fill(texts[i].fmt, lines1);
		assert_refused(d, texts[i].key);
		/* Control characters take six (\u00XX). */
		cleanup_free char *ctl = repeat("\\u0001", texts[i].max / 6 + 1);
		cleanup_free char *e = fill(texts[i].fmt, ctl);
		assert_refused(e, texts[i].key);
	}
}
END_TEST

/* A tool entry with a description of desc_len plain bytes. */
static char *tool_json(const char *name, size_t desc_len, bool mcp)
{
	cleanup_free char *desc = repeat("d", desc_len);
	if (mcp)
		return rts_xasprintf("{\"name\":\"%s\",\"description\":\"%s\",\"parameters\":{}}", name, desc);
	return rts_xasprintf("{\"name\":\"%s\",\"description\":\"%s\",\"parameters\":{},\"command\":[\"/b\"]}", name, desc);
}

/* n tools t0..t<n-1> with descriptions of desc_len bytes, joined by commas. */
static char *tools_json(size_t n, size_t desc_len, bool mcp)
{
	char *out = rts_xstrdup("");
	for (size_t i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof(name), "t%zu", i);
		cleanup_free char *t = tool_json(name, desc_len, mcp);
		char *joined = rts_xasprintf("%s%s%s", out, i ? "," : "", t);
		free(out);
		out = joined;
	}
	return out;
}

/* The tools offered to the model must fit the worker's budget whole: the first tool that
 * would not is refused at start, naming it, instead of being left out at every turn. */
START_TEST(test_tool_budget)
{
	/* Every list at its longest, with short names and descriptions, fits. */
	cleanup_free char *host = tools_json(RTS_MAX_TOOLS, 0, false);
	cleanup_free char *mcp_tools = tools_json(RTS_MAX_MCP_TOOLS, 0, true);
	char *all = rts_xasprintf("\"tools\":[%s],\"mcp\":[", host);
	for (size_t i = 0; i < RTS_MAX_MCP_SERVERS; i++) {
		char *next = rts_xasprintf("%s%s{\"name\":\"s%zu\",\"url\":\"https://x\",\"tools\":[%s]}", all, i ? "," : "",
					   i, mcp_tools);
		free(all);
		all = next;
	}
	cleanup_free char *full = rts_xasprintf("%s]", all);
	free(all);
	assert_loads(full);
	/* host_fetch too: RTS_PUBLIC_TOOLS_MAX tools, which the worker's input admits. */
	cleanup_free char *full_fetch = rts_xasprintf("%s,\"fetch\":{\"enabled\":true}", full);
	assert_loads(full_fetch);

	/* Host tools with the longest descriptions: count how many fit, then one more. */
	size_t fit = 0;
	for (size_t n = 1; n <= RTS_MAX_TOOLS; n++) {
		cleanup_free char *list = tools_json(n, RTS_DESCRIPTION_MAX, false);
		cleanup_free char *extra = rts_xasprintf("\"tools\":[%s]", list);
		cleanup_free char *text = with(extra);
		char err[1024];
		struct rts_config *c = load_text(text, err, sizeof(err));
		if (!c) {
			cleanup_free char *want = rts_xasprintf("test.json: tools[%zu]: tool \"t%zu\" does not fit", n - 1, n - 1);
			ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
			break;
		}
		rts_config_free(c);
		fit = n;
	}
	/* 30 KiB for configured tools: about 14 descriptions of 2 KiB, not all 32. */
	ck_assert_uint_ge(fit, RTS_PUBLIC_TOOLS_BUDGET / (RTS_DESCRIPTION_MAX + 128));
	ck_assert_uint_le(fit, RTS_PUBLIC_TOOLS_BUDGET / RTS_DESCRIPTION_MAX);

	/* The same budget counts MCP tools after the host tools, and names the MCP tool. */
	cleanup_free char *some = tools_json(fit, RTS_DESCRIPTION_MAX, false);
	cleanup_free char *one = tool_json("late", RTS_DESCRIPTION_MAX, true);
	cleanup_free char *over = rts_xasprintf(
		"\"tools\":[%s],\"mcp\":[{\"name\":\"s\",\"url\":\"https://x\",\"tools\":[{\"name\":\"ok\","
		"\"description\":\"\",\"parameters\":{}},%s]}]",
		some, one);
	char err[1024];
	cleanup_free char *text = with(over);
	ck_assert_ptr_null(load_text(text, err, sizeof(err)));
	ck_assert_msg(strncmp(err, "test.json: mcp[0].tools[1]: tool \"late\" does not fit", 52) == 0, "%s", err);

	/* Large parameters count as well. */
	cleanup_free char *big = repeat("p", RTS_PARAMETERS_MAX - 64);
	cleanup_free char *params = rts_xasprintf(
		"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{\"description\":\"%s\"},\"command\":[\"/b\"]},"
		"{\"name\":\"b\",\"description\":\"\",\"parameters\":{\"description\":\"%s\"},\"command\":[\"/b\"]}]",
		big, big);
	assert_refused(params, "tools[1]");
}
END_TEST

/* A tool's parameters nest at most RTS_PARAMETERS_DEPTH_MAX containers: deeper ones would
 * make the worker's /model body deeper than brokerd parses. */
START_TEST(test_parameters_depth)
{
	for (unsigned depth = RTS_PARAMETERS_DEPTH_MAX; depth <= RTS_PARAMETERS_DEPTH_MAX + 1; depth++) {
		/* {"a":{"a":...{}}} with depth objects, parameters itself included. */
		cleanup_free char *open = repeat("{\"a\":", depth - 1);
		cleanup_free char *close = repeat("}", depth - 1);
		cleanup_free char *extra = rts_xasprintf(
			"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":%s{}%s,\"command\":[\"/b\"]}]", open,
			close);
		if (depth == RTS_PARAMETERS_DEPTH_MAX)
			assert_loads(extra);
		else
			assert_refused(extra, "tools[0].parameters");
	}
	/* Scalars do not count as a level. */
	cleanup_free char *open = repeat("[", RTS_PARAMETERS_DEPTH_MAX - 1);
	cleanup_free char *close = repeat("]", RTS_PARAMETERS_DEPTH_MAX - 1);
	cleanup_free char *arrays = rts_xasprintf(
		"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{\"enum\":%s1%s},\"command\":[\"/b\"]}]", open,
		close);
	assert_loads(arrays);
}
END_TEST

/* Parameters go into every /model body, where brokerd's schema reference rule applies
 * (common/schema.h): a schema that rule refuses is refused at start, naming the tool, not
 * at every model call. The same schema with the reference made local loads. */
START_TEST(test_parameters_schema_rule)
{
	static const char *const bad[] = {
		"{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"type\":\"object\"}",
		"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"https://evil.example/s.json\"}}}",
		"{\"anyOf\":{\"$ref\":\"#/x\"}}",
	};
	static const char *const good[] = {
		"{\"$schema\":\"#\",\"type\":\"object\"}",
		"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/s\"}},\"$defs\":{\"s\":{}}}",
		"{\"anyOf\":[{\"$ref\":\"#/$defs/x\"}],\"$defs\":{\"x\":{}}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cleanup_free char *tool = rts_xasprintf(
			"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":%s,\"command\":[\"/b\"]}]", bad[i]);
		assert_refused(tool, "tools[0].parameters");
		cleanup_free char *mcp = rts_xasprintf(
			"\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp/x\",\"tools\":[{\"name\":\"s\","
			"\"description\":\"\",\"parameters\":%s}]}]",
			bad[i]);
		assert_refused(mcp, "mcp[0].tools[0].parameters");
		cleanup_free char *ok = rts_xasprintf(
			"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":%s,\"command\":[\"/b\"]}]", good[i]);
		assert_loads(ok);
	}
}
END_TEST

/* The same at start for a local reference that leads into data, and for data that holds a
 * reference (common/schema.h): refused naming the tool and the rule; with the reference
 * pointing at a schema, or the data harmless, the tool loads. */
START_TEST(test_parameters_reference_targets)
{
	static const struct {
		const char *bad, *why, *good;
	} cases[] = {
		{"{\"properties\":{\"a\":{\"$ref\":\"#/x-hidden\"}},\"x-hidden\":{\"type\":\"string\"}}",
		 RTS_SCHEMA_WHY_TARGET,
		 "{\"properties\":{\"a\":{\"$ref\":\"#/$defs/h\"}},\"$defs\":{\"h\":{\"type\":\"string\"}}}"},
		{"{\"properties\":{\"a\":{\"$ref\":\"#n\"}}}", RTS_SCHEMA_WHY_TARGET,
		 "{\"properties\":{\"a\":{\"$ref\":\"#n\"},\"b\":{\"$anchor\":\"n\"}}}"},
		{"{\"properties\":{\"a\":{\"enum\":[{\"$ref\":\"https://evil.example/e\"}]}}}", RTS_SCHEMA_WHY_DATA,
		 "{\"properties\":{\"a\":{\"enum\":[{\"ref\":\"https://evil.example/e\"}]}}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		cleanup_free char *bad = rts_xasprintf(
			"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":%s,\"command\":[\"/b\"]}]",
			cases[i].bad);
		assert_refused(bad, "tools[0].parameters");
		char err[1024] = "";
		cleanup_free char *text = with(bad);
		ck_assert_ptr_null(load_text(text, err, sizeof(err)));
		ck_assert_msg(strstr(err, cases[i].why) != NULL, "%s: %s", cases[i].bad, err);
		cleanup_free char *good = rts_xasprintf(
			"\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":%s,\"command\":[\"/b\"]}]",
			cases[i].good);
		assert_loads(good);
	}
}
END_TEST

/* A list of n copies of item, comma-separated, inside "key":[...]. */
static char *list_of(const char *key, const char *item, size_t n)
{
	size_t len = strlen(key) + 8 + n * (strlen(item) + 1);
	char *s = rts_xcalloc(len, 1);
	size_t at = (size_t)snprintf(s, len, "\"%s\":[", key);
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(s + at, len - at, "%s%s", i ? "," : "", item);
	snprintf(s + at, len - at, "]");
	return s;
}

START_TEST(test_list_lengths)
{
	/* The lists are bounded before any item is looked at, so identical items do. */
	cleanup_free char *tools = list_of("tools", "{}", RTS_MAX_TOOLS + 1);
	assert_refused(tools, "tools");
	cleanup_free char *mcp = list_of("mcp", "{}", RTS_MAX_MCP_SERVERS + 1);
	assert_refused(mcp, "mcp");
	cleanup_free char *channels = list_of("initialChannels", "\"g/1\"", 4097);
	assert_refused(channels, "initialChannels");
	cleanup_free char *ok = list_of("initialChannels", "\"g/1\"", 4096);
	char err[512] = "";
	cleanup_free char *text = with(ok);
	struct rts_config *c = load_text(text, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	rts_config_free(c);
	assert_refused("\"mcp\":{}", "mcp");
	assert_refused("\"initialChannels\":\"g/1\"", "initialChannels");
}
END_TEST

START_TEST(test_bad_values)
{
	assert_refused("\"modelUrl\":\"http://plain/v1\"", "modelUrl");
	assert_refused("\"runRoot\":\"relative/dir\"", "runRoot");
	assert_refused("\"runRoot\":\"/a//b\"", "runRoot");
	assert_refused("\"workspaceRoot\":\"/a/../b\"", "workspaceRoot");
	assert_refused("\"stateFile\":\"/a,b/c\"", "stateFile");
	assert_refused("\"provider\":\"anthropic\"", "provider");
	assert_refused("\"timeZone\":\"../../etc/passwd\"", "timeZone");
	assert_refused("\"image\":\"Bad Image\"", "image");
	assert_refused("\"apiKey\":{\"credential\":\"..\"}", "apiKey.credential");
	assert_refused("\"apiKey\":{\"file\":\"key.txt\"}", "apiKey.file");
	assert_refused("\"apiKey\":{\"command\":[\"key-helper\"]}", "apiKey.command[0]");
	assert_refused("\"apiKey\":{\"env\":\"A\",\"file\":\"/k\"}", "apiKey");
	assert_refused("\"tools\":[{\"name\":\"Bad\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"]}]",
		       "tools[0].name");
	assert_refused("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{}}]", "tools[0].command");
	assert_refused("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"]},"
		       "{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/c\"]}]",
		       "tools[1]");
	/* http:// only with rich.allowHttpMcp (tests/unit/check_config_rich.c). */
	assert_refused("\"mcp\":[{\"name\":\"a\",\"url\":\"http://x\",\"tools\":[{\"name\":\"t\","
		       "\"description\":\"d\",\"parameters\":{}}]}]",
		       "mcp[0].url");
	assert_refused("\"mcp\":[{\"name\":\"a\",\"url\":\"https://x\",\"tools\":[]}]", "mcp[0].tools");
}
END_TEST

/* tools[].writePaths (DESIGN.md 8.1): absolute, normalised directories, not /, none twice,
 * at most RTS_TOOL_WRITE_PATHS_MAX; absent means none. What they name on disk is brokerd's
 * to check at start (check_broker_toolbox). */
static char *tool_with(const char *write_paths)
{
	return rts_xasprintf("\"tools\":[{\"name\":\"a\",\"description\":\"\",\"parameters\":{},\"command\":[\"/b\"]%s%s}]",
			     write_paths ? ",\"writePaths\":" : "", write_paths ? write_paths : "");
}

START_TEST(test_write_paths)
{
	char err[512];
	cleanup_free char *none = tool_with(NULL);
	cleanup_free char *t1 = with(none);
	struct rts_config *c = load_text(t1, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->tools[0].n_write_paths, 0);
	ck_assert_ptr_null(c->tools[0].write_paths[0]);
	rts_config_free(c);
	cleanup_free char *two = tool_with("[\"/srv/tickets\",\"/var/lib/tool-db\"]");
	cleanup_free char *t2 = with(two);
	c = load_text(t2, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->tools[0].n_write_paths, 2);
	ck_assert_str_eq(c->tools[0].write_paths[1], "/var/lib/tool-db");
	ck_assert_ptr_null(c->tools[0].write_paths[2]);
	rts_config_free(c);

	const struct {
		const char *value, *at;
	} bad[] = {
		{"\"/srv\"", "tools[0].writePaths"},
		{"[\"srv/tickets\"]", "tools[0].writePaths[0]"},
		{"[\"/srv/../etc\"]", "tools[0].writePaths[0]"},
		{"[\"/srv/./x\"]", "tools[0].writePaths[0]"},
		{"[\"/srv//x\"]", "tools[0].writePaths[0]"},
		{"[\"/srv/x/\"]", "tools[0].writePaths[0]"},
		{"[\"/\"]", "tools[0].writePaths[0]"},
		{"[\"\"]", "tools[0].writePaths[0]"},
		{"[\"/srv/a b\"]", "tools[0].writePaths[0]"},
		{"[1]", "tools[0].writePaths[0]"},
		{"[\"/srv/a\",\"/srv/b\",\"/srv/a\"]", "tools[0].writePaths[2]"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cleanup_free char *t = tool_with(bad[i].value);
		assert_refused(t, bad[i].at);
	}
	/* The count: RTS_TOOL_WRITE_PATHS_MAX pass, one more does not. */
	char list[4096] = "[";
	for (unsigned i = 0; i < RTS_TOOL_WRITE_PATHS_MAX; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s\"/srv/d%u\"", i ? "," : "", i);
	cleanup_free char *full = rts_xasprintf("%s]", list);
	cleanup_free char *ok = tool_with(full);
	cleanup_free char *tok = with(ok);
	c = load_text(tok, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->tools[0].n_write_paths, RTS_TOOL_WRITE_PATHS_MAX);
	rts_config_free(c);
	snprintf(list + strlen(list), sizeof(list) - strlen(list), ",\"/srv/one-more\"]");
	cleanup_free char *over = tool_with(list);
	assert_refused(over, "tools[0].writePaths");
}
END_TEST

START_TEST(test_required)
{
	char err[512];
	ck_assert_ptr_null(load_text("{\"model\":\"m\"}", err, sizeof(err)));
	ck_assert_str_eq(err, "test.json: modelUrl: is required (the https:// Chat Completions URL)");
	ck_assert_ptr_null(load_text("[]", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "(top level)"));
}
END_TEST

START_TEST(test_file_errors)
{
	char err[512];
	ck_assert_ptr_null(rts_config_load("/nonexistent/sandbox.json", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/sandbox.json"));

	char path[] = "/tmp/check_config_XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_write_all(fd, "{\"model\":\"m\",}", 14), 0);
	close(fd);
	ck_assert_ptr_null(rts_config_load(path, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "invalid JSON"));

	/* Duplicate keys are refused (json-c alone keeps the last one), with a position. */
	static const char dup[] = "{\n  \"model\": \"m\",\n  \"model\": \"n\",\n  \"modelUrl\": \"https://x/v1\"\n}\n";
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_write_all(fd, dup, sizeof(dup) - 1), 0);
	close(fd);
	ck_assert_ptr_null(rts_config_load(path, err, sizeof(err)));
	cleanup_free char *want = rts_xasprintf("%s:3:", path);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
	ck_assert_ptr_nonnull(strstr(err, "duplicate object key"));

	/* A syntax error names its line and column. */
	static const char comma[] = "{\n  \"model\": \"m\",\n}\n";
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(rts_write_all(fd, comma, sizeof(comma) - 1), 0);
	close(fd);
	ck_assert_ptr_null(rts_config_load(path, err, sizeof(err)));
	cleanup_free char *want2 = rts_xasprintf("%s:3:1: ", path);
	ck_assert_msg(strncmp(err, want2, strlen(want2)) == 0, "%s", err);
	unlink(path);
}
END_TEST

START_TEST(test_installation_id_follows_state_file)
{
	char err[512];
	cleanup_free char *a = with("\"stateFile\":\"/srv/a/state.json\"");
	cleanup_free char *b = with("\"stateFile\":\"/srv/b/state.json\"");
	struct rts_config *ca = load_text(a, err, sizeof(err));
	struct rts_config *cb = load_text(b, err, sizeof(err));
	ck_assert_ptr_nonnull(ca);
	ck_assert_ptr_nonnull(cb);
	char expect[13];
	rts_installation_id("/srv/a/state.json", expect);
	ck_assert_str_eq(ca->installation_id, expect);
	ck_assert_str_ne(ca->installation_id, cb->installation_id);
	rts_config_free(ca);
	rts_config_free(cb);
}
END_TEST

/* accounts (DESIGN.md 8.1): names resolved at load, with the base system's accounts
 * (base-passwd: daemon 1:1, bin 2:2, nobody 65534 with group nogroup 65534). */
#define ACCOUNTS "\"accounts\":{\"broker\":\"daemon\",\"runner\":\"bin\"}"
#define GUEST "\"uid\":\"nobody\",\"gid\":\"nogroup\""

START_TEST(test_accounts)
{
	char err[1024];
	cleanup_free char *ok = with(ACCOUNTS "," GUEST);
	struct rts_config *c = load_text(ok, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert(c->accounts.present);
	ck_assert_str_eq(c->accounts.broker, "daemon");
	ck_assert_uint_eq(c->accounts.broker_uid, 1);
	ck_assert_uint_eq(c->accounts.broker_gid, 1);
	ck_assert_uint_eq(c->accounts.runner_uid, 2);
	ck_assert_uint_eq(c->accounts.runner_gid, 2);
	ck_assert(c->has_uid && c->has_gid);
	ck_assert_uint_eq(c->uid, 65534);
	ck_assert_uint_eq(c->gid, 65534);
	ck_assert_str_eq(c->uid_name, "nobody");
	rts_config_free(c);
	/* Numbers work for the guest as before. */
	cleanup_free char *numeric = with(ACCOUNTS ",\"uid\":65534,\"gid\":65534");
	c = load_text(numeric, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_ptr_null(c->uid_name);
	rts_config_free(c);
	/* Absent: single-account mode. */
	c = load_text(MINIMAL, err, sizeof(err));
	ck_assert(c && !c->accounts.present);
	rts_config_free(c);

	/* Each refusal names its key. */
	assert_refused("\"accounts\":{\"broker\":\"no-such-user-rts\",\"runner\":\"bin\"}," GUEST, "accounts.broker");
	assert_refused("\"accounts\":{\"broker\":\"daemon\",\"runner\":\"root\"}," GUEST, "accounts.runner");
	assert_refused("\"accounts\":{\"broker\":\"daemon\",\"runner\":\"daemon\"}," GUEST, "accounts.runner");
	assert_refused("\"accounts\":{\"broker\":\"daemon\"}," GUEST, "accounts.runner");
	assert_refused("\"accounts\":{\"broker\":\"daemon\",\"runner\":\"bin\",\"statd\":\"sys\"}," GUEST,
		       "accounts.statd");
	assert_refused("\"accounts\":{\"broker\":\"1\",\"runner\":\"bin\"}," GUEST, "accounts.broker");
	assert_refused("\"accounts\":{\"broker\":\"daemon\",\"runner\":\"-bin\"}," GUEST, "accounts.runner");
	assert_refused("\"accounts\":[\"daemon\",\"bin\"]," GUEST, "accounts");
	/* The guest: required, and no daemon's account or group. */
	assert_refused(ACCOUNTS, "uid");
	assert_refused(ACCOUNTS ",\"uid\":\"nobody\"", "gid");
	assert_refused(ACCOUNTS ",\"uid\":\"daemon\",\"gid\":\"nogroup\"", "uid");
	assert_refused(ACCOUNTS ",\"uid\":2,\"gid\":\"nogroup\"", "uid");
	assert_refused(ACCOUNTS ",\"uid\":\"nobody\",\"gid\":\"bin\"", "gid");
	assert_refused(ACCOUNTS ",\"uid\":\"root\",\"gid\":\"nogroup\"", "uid");
	assert_refused(ACCOUNTS ",\"uid\":\"nobody\",\"gid\":\"root\"", "gid");
	assert_refused(ACCOUNTS ",\"uid\":\"no-such-user-rts\",\"gid\":\"nogroup\"", "uid");
	assert_refused(ACCOUNTS ",\"uid\":\"nobody\",\"gid\":\"no-such-group-rts\"", "gid");
	/* The refusal says which account. */
	cleanup_free char *same = with(ACCOUNTS ",\"uid\":\"bin\",\"gid\":\"nogroup\"");
	ck_assert_ptr_null(load_text(same, err, sizeof(err)));
	ck_assert_msg(strstr(err, "accounts.runner's uid 2"), "%s", err);
}
END_TEST

/* Who may run each daemon (rts_check_identity), for every role and mode. */
START_TEST(test_identity)
{
	char err[1024];
	struct rts_config *single = load_text(MINIMAL, err, sizeof(err));
	ck_assert_ptr_nonnull(single);
	ck_assert_int_eq(rts_check_identity(single, RTS_ROLE_STATD, 0, 0, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "refusing to run as root"));
	ck_assert_int_eq(rts_check_identity(single, RTS_ROLE_BROKERD, 1000, 1000, err, sizeof(err)), 0);
	rts_config_free(single);
	cleanup_free char *pinned = with("\"uid\":1000,\"gid\":1000");
	single = load_text(pinned, err, sizeof(err));
	ck_assert_ptr_nonnull(single);
	ck_assert_int_eq(rts_check_identity(single, RTS_ROLE_RUNNERD, 1000, 1000, err, sizeof(err)), 0);
	ck_assert_int_eq(rts_check_identity(single, RTS_ROLE_RUNNERD, 1001, 1000, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(single, RTS_ROLE_RUNNERD, 1000, 1001, err, sizeof(err)), -EPERM);
	rts_config_free(single);

	cleanup_free char *text = with(ACCOUNTS "," GUEST);
	struct rts_config *c = load_text(text, err, sizeof(err));
	ck_assert_ptr_nonnull(c);
	/* brokerd: accounts.broker with its own group, nothing else. */
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_BROKERD, 1, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_BROKERD, 2, 2, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "accounts.broker is \"daemon\" (uid 1)"));
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_BROKERD, 1, 1000, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "primary group"));
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_BROKERD, 0, 0, err, sizeof(err)), -EPERM);
	/* runnerd: accounts.runner. */
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_RUNNERD, 2, 2, err, sizeof(err)), 0);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_RUNNERD, 1, 1, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_RUNNERD, 1000, 1000, err, sizeof(err)), -EPERM);
	/* statd: any account but the broker's, the runner's and the guest's, and none of
	 * their groups. */
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 1000, 1000, err, sizeof(err)), 0);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 1, 1000, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 2, 1000, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 65534, 1000, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "guest account"));
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 1000, 65534, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 1000, 2, err, sizeof(err)), -EPERM);
	ck_assert_int_eq(rts_check_identity(c, RTS_ROLE_STATD, 0, 0, err, sizeof(err)), -EPERM);
	rts_config_free(c);
	ck_assert_int_eq(rts_role_of("roundtable-sandbox-brokerd"), RTS_ROLE_BROKERD);
	ck_assert_int_eq(rts_role_of("roundtable-sandbox"), RTS_ROLE_OTHER);
}
END_TEST

/* The public tool list's names, in order, joined by spaces. */
static char *public_names(const struct rts_config *c)
{
	json_object *pub = rts_config_public_tools(c);
	char *out = rts_xstrdup("");
	for (size_t i = 0; i < json_object_array_length(pub); i++) {
		json_object *t = json_object_array_get_idx(pub, i);
		char *next = rts_xasprintf("%s%s%s", out, i ? " " : "", rts_json_get_string(t, "name"));
		free(out);
		out = next;
	}
	json_object_put(pub);
	return out;
}

#define HOST_TOOL(name) "{\"name\":\"" name "\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/b\"]}"
#define MCP_DOCS "\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp/x\",\"tools\":[{\"name\":\"search\"," \
		 "\"description\":\"d\",\"parameters\":{}}]}]"

/* "fetch": {"enabled": true, ...} offers host_fetch (route /tools/fetch) after the host
 * tools and before the MCP tools, with the limits stored; enabled false offers nothing. */
START_TEST(test_fetch_key)
{
	char err[1024];
	cleanup_free char *on = with("\"fetch\":{\"enabled\":true,\"maxBytes\":1000,\"timeoutMs\":1500,"
				     "\"maxRedirects\":0},\"tools\":[" HOST_TOOL("clock") "]," MCP_DOCS);
	struct rts_config *c = load_text(on, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert(c->fetch.enabled);
	ck_assert_uint_eq(c->fetch.max_bytes, 1000);
	ck_assert_uint_eq(c->fetch.timeout_ms, 1500);
	ck_assert_uint_eq(c->fetch.max_redirects, 0);
	cleanup_free char *names = public_names(c);
	ck_assert_str_eq(names, "host_clock host_fetch mcp_0_search");
	json_object *pub = rts_config_public_tools(c);
	json_object *fetch = json_object_array_get_idx(pub, 1);
	ck_assert_str_eq(rts_json_get_string(fetch, "route"), "/tools/fetch");
	ck_assert_str_eq(rts_json_get_string(fetch, "description"), RTS_FETCH_TOOL_DESCRIPTION);
	cleanup_free char *params = rts_json_dump(rts_json_get(fetch, "parameters"));
	ck_assert_str_eq(params, "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\",\"description\":"
				 "\"the absolute http:// or https:// URL to fetch\"}},\"required\":[\"url\"],"
				 "\"additionalProperties\":false}");
	ck_assert_ptr_null(rts_json_get(fetch, "mcpTool"));
	json_object_put(pub);
	rts_config_free(c);

	/* Defaults for the limits not given. */
	cleanup_free char *bare = with("\"fetch\":{\"enabled\":true}");
	c = load_text(bare, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_uint_eq(c->fetch.max_bytes, RTS_FETCH_BYTES_DEFAULT);
	ck_assert_uint_eq(c->fetch.timeout_ms, RTS_FETCH_TIMEOUT_DEFAULT_MS);
	ck_assert_uint_eq(c->fetch.max_redirects, RTS_FETCH_REDIRECTS_DEFAULT);
	rts_config_free(c);

	cleanup_free char *off = with("\"fetch\":{\"enabled\":false,\"maxBytes\":1000},\"tools\":[" HOST_TOOL(
		"clock") "]," MCP_DOCS);
	c = load_text(off, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert(!c->fetch.enabled);
	cleanup_free char *names_off = public_names(c);
	ck_assert_str_eq(names_off, "host_clock mcp_0_search");
	rts_config_free(c);
}
END_TEST

/* The key's own refusals, each naming its path. */
START_TEST(test_fetch_refused)
{
	char err[1024];
	cleanup_free char *missing = with("\"fetch\":{\"maxBytes\":1000}");
	ck_assert_ptr_null(load_text(missing, err, sizeof(err)));
	ck_assert_str_eq(err, "test.json: fetch.enabled: is required (true offers the guest tool host_fetch)");
	assert_refused("\"fetch\":true", "fetch");
	assert_refused("\"fetch\":{\"enabled\":\"yes\"}", "fetch.enabled");
	assert_refused("\"fetch\":{\"enabled\":true,\"maxBytes\":\"5MiB\"}", "fetch.maxBytes");
	assert_refused("\"fetch\":{\"enabled\":true,\"timeoutMs\":1.5}", "fetch.timeoutMs");
	/* Request headers and proxies are not the operator's to add here. */
	assert_refused("\"fetch\":{\"enabled\":true,\"headers\":[]}", "fetch.headers");
	assert_refused("\"fetch\":{\"enabled\":true,\"proxy\":\"http://p\"}", "fetch.proxy");
}
END_TEST

/* A host tool named "fetch" would be host_fetch on /tools/fetch too: refused while the
 * built-in tool is on, naming the tool's key; with fetch off it is an ordinary host tool. */
START_TEST(test_fetch_name_taken)
{
	char err[1024];
	cleanup_free char *clash =
		with("\"tools\":[" HOST_TOOL("clock") "," HOST_TOOL("fetch") "],\"fetch\":{\"enabled\":true}");
	ck_assert_ptr_null(load_text(clash, err, sizeof(err)));
	ck_assert_str_eq(err, "test.json: tools[1].name: \"fetch\" is taken by the built-in tool host_fetch while "
			      "fetch.enabled is true; rename this tool or turn fetch off");

	cleanup_free char *off =
		with("\"tools\":[" HOST_TOOL("clock") "," HOST_TOOL("fetch") "],\"fetch\":{\"enabled\":false}");
	struct rts_config *c = load_text(off, err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	cleanup_free char *names = public_names(c);
	ck_assert_str_eq(names, "host_clock host_fetch");
	json_object *pub = rts_config_public_tools(c);
	ck_assert_str_eq(rts_json_get_string(json_object_array_get_idx(pub, 1), "description"), "d");
	json_object_put(pub);
	rts_config_free(c);

	/* Other names close to it are not taken. */
	assert_loads("\"tools\":[" HOST_TOOL("fetch2") "," HOST_TOOL("fetchx") "],\"fetch\":{\"enabled\":true}");
}
END_TEST

/* host_fetch counts against the tools' budget like a configured tool, after the host
 * tools: a list that fills the budget exactly without it is refused with it, naming
 * "fetch". */
START_TEST(test_fetch_budget)
{
	char err[1024];
	/* As many host tools with the longest description as fit, then one whose description
	 * is as long as still fits (found by trying). */
	size_t fit = 0;
	for (size_t n = 1; n <= RTS_MAX_TOOLS; n++) {
		cleanup_free char *list = tools_json(n, RTS_DESCRIPTION_MAX, false);
		cleanup_free char *extra = rts_xasprintf("\"tools\":[%s]", list);
		cleanup_free char *text = with(extra);
		struct rts_config *c = load_text(text, err, sizeof(err));
		if (!c)
			break;
		rts_config_free(c);
		fit = n;
	}
	ck_assert_uint_lt(fit, RTS_MAX_TOOLS);
	cleanup_free char *list = tools_json(fit, RTS_DESCRIPTION_MAX, false);
	size_t lo = 0, hi = RTS_DESCRIPTION_MAX; /* lo fits, hi does not */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		cleanup_free char *last = tool_json("last", mid, false);
		cleanup_free char *extra = rts_xasprintf("\"tools\":[%s,%s]", list, last);
		cleanup_free char *text = with(extra);
		struct rts_config *c = load_text(text, err, sizeof(err));
		if (c)
			lo = mid;
		else
			hi = mid;
		rts_config_free(c);
	}
	cleanup_free char *last = tool_json("last", lo, false);
	cleanup_free char *full = rts_xasprintf("\"tools\":[%s,%s]", list, last);
	assert_loads(full);
	cleanup_free char *with_fetch = rts_xasprintf("%s,\"fetch\":{\"enabled\":true}", full);
	cleanup_free char *text = with(with_fetch);
	ck_assert_ptr_null(load_text(text, err, sizeof(err)));
	static const char want[] = "test.json: fetch: tool \"host_fetch\" does not fit: ";
	ck_assert_msg(strncmp(err, want, sizeof(want) - 1) == 0, "%s", err);
	/* With one long tool fewer, host_fetch fits. */
	cleanup_free char *shorter = tools_json(fit - 1, RTS_DESCRIPTION_MAX, false);
	cleanup_free char *fewer = rts_xasprintf("\"tools\":[%s,%s],\"fetch\":{\"enabled\":true}", shorter, last);
	assert_loads(fewer);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("load");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_unknown_keys);
	tcase_add_test(tc, test_wrong_types);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_range_ends);
	tcase_add_test(tc, test_name_bounds);
	tcase_add_test(tc, test_encoded_sizes);
	tcase_add_test(tc, test_tool_budget);
	tcase_add_test(tc, test_parameters_depth);
	tcase_add_test(tc, test_parameters_schema_rule);
	tcase_add_test(tc, test_parameters_reference_targets);
	tcase_add_test(tc, test_list_lengths);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_write_paths);
	tcase_add_test(tc, test_required);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_installation_id_follows_state_file);
	tcase_add_test(tc, test_accounts);
	tcase_add_test(tc, test_identity);
	tcase_add_test(tc, test_fetch_key);
	tcase_add_test(tc, test_fetch_refused);
	tcase_add_test(tc, test_fetch_name_taken);
	tcase_add_test(tc, test_fetch_budget);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
