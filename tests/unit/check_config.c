/* SPDX-License-Identifier: Apache-2.0 */
/* The config loader: defaults, every key accepted, and every refusal naming its key path. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/json.h"
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
	assert_refused("\"mcp\":[{\"name\":\"a\",\"url\":\"http://x\",\"tools\":[]}]", "mcp[0].url");
	assert_refused("\"mcp\":[{\"name\":\"a\",\"url\":\"https://x\",\"tools\":[]}]", "mcp[0].tools");
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

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("load");
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_unknown_keys);
	tcase_add_test(tc, test_wrong_types);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_list_lengths);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_required);
	tcase_add_test(tc, test_file_errors);
	tcase_add_test(tc, test_installation_id_follows_state_file);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
