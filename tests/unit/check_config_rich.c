/* SPDX-License-Identifier: Apache-2.0 */
/* The config's "rich" key (common/conf_rich.c; DESIGN.md 8.5): defaults, every key
 * accepted, each range's both ends, and every refusal naming its key path. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/util.h"

#define BASE "\"model\":\"m\",\"modelUrl\":\"https://api.example/v1/chat/completions\""
#define TOOLS                                                                                                      \
	"\"tools\":[{\"name\":\"clock\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/date\"]},"     \
	"{\"name\":\"dice\",\"description\":\"d\",\"parameters\":{},\"command\":[\"/bin/true\"]}],"                \
	"\"mcp\":[{\"name\":\"docs\",\"url\":\"https://mcp.example/mcp\",\"tools\":[{\"name\":\"search\","         \
	"\"description\":\"d\",\"parameters\":{}}]},{\"name\":\"wiki\",\"url\":\"https://w.example/mcp\","         \
	"\"tools\":[{\"name\":\"get\",\"description\":\"d\",\"parameters\":{}}]}]"

static struct rts_config *load(const char *extra, char *err, size_t errlen)
{
	cleanup_free char *text = rts_xasprintf("{" BASE "%s%s}", extra[0] ? "," : "", extra);
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

static struct rts_config *load_ok(const char *extra)
{
	char err[1024] = "";
	struct rts_config *c = load(extra, err, sizeof(err));
	ck_assert_msg(c != NULL, "refused %s: %s", extra, err);
	return c;
}

/* Refused, and the message starts with "test.json: <keypath>: "; returns the message's text
 * after that prefix (static). */
static const char *refused(const char *extra, const char *keypath)
{
	static char err[1024];
	err[0] = '\0';
	struct rts_config *c = load(extra, err, sizeof(err));
	ck_assert_msg(c == NULL, "accepted: %s", extra);
	cleanup_free char *prefix = rts_xasprintf("test.json: %s: ", keypath);
	ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "for %s expected prefix '%s', got '%s'", extra, prefix,
		      err);
	return err + strlen(prefix);
}

#define RICH(members) "\"rich\":{\"profiles\":{\"p\":{\"model\":\"claude-sonnet-4-5\"}}" members "}"

START_TEST(test_absent)
{
	struct rts_config *c = load_ok("");
	ck_assert(!c->rich.enabled);
	ck_assert_ptr_null(rts_rich_profile_find(&c->rich, "p"));
	rts_config_free(c);
}
END_TEST

START_TEST(test_defaults)
{
	struct rts_config *c = load_ok(RICH(""));
	const struct rts_rich_conf *r = &c->rich;
	ck_assert(r->enabled);
	ck_assert_str_eq(r->image, "roundtable-sandbox-rich:local");
	ck_assert_uint_eq(r->n_profiles, 1);
	const struct rts_rich_profile *p = rts_rich_profile_find(r, "p");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->model, "claude-sonnet-4-5");
	ck_assert_ptr_null(p->prompt);
	ck_assert_uint_eq(p->n_mcp, 0);
	ck_assert_uint_eq(p->n_tools, 0);
	ck_assert_int_eq(r->oauth_token.kind, RTS_KEY_CREDENTIAL);
	ck_assert_str_eq(r->oauth_token.value, "anthropic-oauth-token");
	ck_assert_str_eq(r->upstream, "https://api.anthropic.com");
	ck_assert_int_eq(r->effort_default, RTS_EFFORT_MEDIUM);
	ck_assert_ptr_null(r->effort_judge);
	ck_assert_ptr_null(r->memory_command);
	ck_assert_int_eq(r->memory_visibility, RTS_MEMORY_PRIVATE);
	ck_assert_ptr_null(r->compaction_command);
	ck_assert_uint_eq(r->limits.memory_mb, 1536);
	ck_assert(r->limits.cpus == 1.0);
	ck_assert_uint_eq(r->limits.pids, 256);
	ck_assert_uint_eq(r->tmp_mb, 512);
	ck_assert_str_eq(r->log_driver, "journald");
	ck_assert_uint_eq(r->n_log_options, 0);
	ck_assert_uint_eq(r->start_timeout_ms, 90000);
	ck_assert_uint_eq(r->turn_timeout_ms, 600000);
	ck_assert_uint_eq(r->max_calls, 128);
	ck_assert_uint_eq(r->max_output_tokens, 128000);
	ck_assert_str_eq(r->time_zone, "UTC");
	ck_assert(!r->allow_http_mcp);
	ck_assert_ptr_null(rts_rich_profile_find(r, "q"));
	rts_config_free(c);
}
END_TEST

START_TEST(test_full)
{
	struct rts_config *c = load_ok(
		TOOLS ",\"rich\":{\"image\":\"rich:1\",\"profiles\":{\"tavern\":{\"model\":\"claude-opus-4-6\","
		"\"mcp\":[\"wiki\",\"docs\"],\"tools\":[\"dice\"],\"prompt\":\"You are a bard.\"},"
		"\"quiet\":{\"model\":\"claude-haiku-4-5\"}},"
		"\"oauthToken\":{\"command\":[\"/usr/bin/token\",\"--for\"]},\"upstream\":\"https://anthropic.internal:8443/x\","
		"\"effort\":{\"default\":\"high\",\"judge\":{\"command\":[\"/usr/bin/judge\"]}},"
		"\"memory\":{\"command\":[\"/usr/bin/memory\"],\"visibility\":\"shared\"},"
		"\"compaction\":{\"command\":[\"/usr/bin/compact\"],\"engine\":\"jev-1.2\",\"timeoutMs\":45000,"
		"\"maxRequestBytes\":1048576},"
		"\"limits\":{\"memoryMb\":2048,\"cpus\":2,\"pids\":512,\"tmpMb\":1024},"
		"\"log\":{\"driver\":\"json-file\",\"options\":{\"max-size\":\"10m\",\"max-file\":\"3\"}},"
		"\"startTimeoutMs\":1000,\"turnTimeoutMs\":90000,\"maxCalls\":1000,\"maxOutputTokens\":1025,"
		"\"timeZone\":\"Europe/Berlin\",\"allowHttpMcp\":true}");
	const struct rts_rich_conf *r = &c->rich;
	ck_assert_str_eq(r->image, "rich:1");
	ck_assert_uint_eq(r->n_profiles, 2);
	const struct rts_rich_profile *p = rts_rich_profile_find(r, "tavern");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p->model, "claude-opus-4-6");
	ck_assert_str_eq(p->prompt, "You are a bard.");
	ck_assert_uint_eq(p->n_mcp, 2);
	ck_assert_str_eq(p->mcp[0], "wiki");
	ck_assert_ptr_null(p->mcp[2]);
	/* Resolved against mcp[] and tools[]. */
	ck_assert_uint_eq(p->mcp_index[0], 1);
	ck_assert_uint_eq(p->mcp_index[1], 0);
	ck_assert_uint_eq(p->n_tools, 1);
	ck_assert_uint_eq(p->tool_index[0], 1);
	ck_assert_ptr_nonnull(rts_rich_profile_find(r, "quiet"));
	ck_assert_int_eq(r->oauth_token.kind, RTS_KEY_COMMAND);
	ck_assert_str_eq(r->oauth_token.argv[1], "--for");
	ck_assert_ptr_null(r->oauth_token.value);
	ck_assert_str_eq(r->upstream, "https://anthropic.internal:8443/x");
	ck_assert_int_eq(r->effort_default, RTS_EFFORT_HIGH);
	ck_assert_str_eq(r->effort_judge[0], "/usr/bin/judge");
	ck_assert_str_eq(r->memory_command[0], "/usr/bin/memory");
	ck_assert_int_eq(r->memory_visibility, RTS_MEMORY_SHARED);
	ck_assert_str_eq(r->compaction_command[0], "/usr/bin/compact");
	ck_assert_str_eq(r->compaction_engine, "jev-1.2");
	ck_assert_uint_eq(r->compaction_timeout_ms, 45000);
	ck_assert_uint_eq(r->compaction_max_request, 1048576);
	ck_assert_uint_eq(r->limits.memory_mb, 2048);
	ck_assert(r->limits.cpus == 2.0);
	ck_assert_uint_eq(r->limits.pids, 512);
	ck_assert_uint_eq(r->tmp_mb, 1024);
	ck_assert_str_eq(r->log_driver, "json-file");
	ck_assert_uint_eq(r->n_log_options, 2);
	ck_assert_str_eq(r->log_options[0].name, "max-size");
	ck_assert_str_eq(r->log_options[0].value, "10m");
	ck_assert_uint_eq(r->start_timeout_ms, 1000);
	ck_assert_uint_eq(r->turn_timeout_ms, 90000);
	ck_assert_uint_eq(r->max_calls, 1000);
	ck_assert_uint_eq(r->max_output_tokens, 1025);
	ck_assert_str_eq(r->time_zone, "Europe/Berlin");
	ck_assert(r->allow_http_mcp);
	ck_assert_str_eq(rts_effort_name(r->effort_default), "high");
	ck_assert_int_eq(rts_effort_parse("xhigh", 5), RTS_EFFORT_XHIGH);
	ck_assert_int_eq(rts_effort_parse("max", 3), -1);
	rts_config_free(c);
}
END_TEST

/* Seed, "Compaction": default the smaller of 120 s and a third of turnTimeoutMs. */
START_TEST(test_compaction_timeout_default)
{
	struct rts_config *c = load_ok(RICH(",\"compaction\":{\"command\":[\"/bin/c\"]}"));
	ck_assert_uint_eq(c->rich.compaction_timeout_ms, 120000);
	ck_assert_str_eq(c->rich.compaction_engine, "host-compactor");
	ck_assert_uint_eq(c->rich.compaction_max_request, 32u * 1024 * 1024);
	rts_config_free(c);
	c = load_ok(RICH(",\"turnTimeoutMs\":90000,\"compaction\":{\"command\":[\"/bin/c\"]}"));
	ck_assert_uint_eq(c->rich.compaction_timeout_ms, 30000);
	rts_config_free(c);
	/* Exactly half is allowed, one more is not. */
	c = load_ok(RICH(",\"turnTimeoutMs\":90000,\"compaction\":{\"command\":[\"/bin/c\"],\"timeoutMs\":45000}"));
	ck_assert_uint_eq(c->rich.compaction_timeout_ms, 45000);
	rts_config_free(c);
	const char *text =
		refused(RICH(",\"turnTimeoutMs\":90000,\"compaction\":{\"command\":[\"/bin/c\"],\"timeoutMs\":45001}"),
			"rich.compaction.timeoutMs");
	ck_assert_msg(strstr(text, "half of rich.turnTimeoutMs"), "%s", text);
}
END_TEST

START_TEST(test_ranges)
{
	static const struct {
		const char *member, *path;
	} bad[] = {
		{",\"startTimeoutMs\":999", "rich.startTimeoutMs"},
		{",\"startTimeoutMs\":600001", "rich.startTimeoutMs"},
		{",\"turnTimeoutMs\":999", "rich.turnTimeoutMs"},
		{",\"turnTimeoutMs\":600001", "rich.turnTimeoutMs"},
		{",\"maxCalls\":0", "rich.maxCalls"},
		{",\"maxCalls\":1001", "rich.maxCalls"},
		{",\"maxOutputTokens\":1024", "rich.maxOutputTokens"},
		{",\"maxOutputTokens\":200001", "rich.maxOutputTokens"},
		{",\"limits\":{\"tmpMb\":0}", "rich.limits.tmpMb"},
		/* The Pi worker's bottoms (common/limits.h), not the sealed worker's nor the
		 * precheck's. */
		{",\"limits\":{\"memoryMb\":191}", "rich.limits.memoryMb"},
		{",\"limits\":{\"memoryMb\":64}", "rich.limits.memoryMb"},
		{",\"limits\":{\"cpus\":0.249}", "rich.limits.cpus"},
		{",\"limits\":{\"cpus\":0.1}", "rich.limits.cpus"},
		{",\"limits\":{\"cpus\":0.01}", "rich.limits.cpus"},
		{",\"limits\":{\"pids\":15}", "rich.limits.pids"},
		{",\"limits\":{\"pids\":8}", "rich.limits.pids"},
		{",\"limits\":{\"memoryMb\":65537}", "rich.limits.memoryMb"},
		{",\"limits\":{\"cpus\":64.001}", "rich.limits.cpus"},
		{",\"limits\":{\"pids\":32769}", "rich.limits.pids"},
		{",\"limits\":{\"swapMb\":1}", "rich.limits.swapMb"},
		{",\"compaction\":{\"command\":[\"/bin/c\"],\"maxRequestBytes\":1023}", "rich.compaction.maxRequestBytes"},
		{",\"compaction\":{\"command\":[\"/bin/c\"],\"maxRequestBytes\":100663297}",
		 "rich.compaction.maxRequestBytes"},
		{",\"compaction\":{\"command\":[\"/bin/c\"],\"timeoutMs\":0}", "rich.compaction.timeoutMs"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		cleanup_free char *extra = rts_xasprintf("\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\"}}%s}", bad[i].member);
		refused(extra, bad[i].path);
	}
	static const char *const good[] = {",\"startTimeoutMs\":1000", ",\"turnTimeoutMs\":600000", ",\"maxCalls\":1",
					   ",\"maxOutputTokens\":200000", ",\"limits\":{\"tmpMb\":65536}",
					   ",\"limits\":{\"memoryMb\":192,\"cpus\":0.25,\"pids\":16}",
					   ",\"limits\":{\"memoryMb\":65536,\"cpus\":64,\"pids\":32768}"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(good); i++) {
		cleanup_free char *extra = rts_xasprintf("\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\"}}%s}", good[i]);
		rts_config_free(load_ok(extra));
	}
}
END_TEST

START_TEST(test_refusals)
{
	refused("\"rich\":{}", "rich.profiles");
	refused("\"rich\":{\"profiles\":{}}", "rich.profiles");
	refused("\"rich\":{\"profiles\":{\"Bad\":{\"model\":\"m\"}}}", "rich.profiles.Bad");
	refused("\"rich\":{\"profiles\":{\"p\":{}}}", "rich.profiles.p.model");
	refused("\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"temperature\":1}}}", "rich.profiles.p.temperature");
	refused(RICH(",\"unknown\":1"), "rich.unknown");
	refused(RICH(",\"image\":\"UPPER\""), "rich.image");
	refused(RICH(",\"upstream\":\"http://api.anthropic.com\""), "rich.upstream");
	refused(RICH(",\"upstream\":\"https://api.anthropic.com/\""), "rich.upstream");
	refused(RICH(",\"upstream\":\"https://api.anthropic.com?x=1\""), "rich.upstream");
	refused(RICH(",\"oauthToken\":{}"), "rich.oauthToken");
	refused(RICH(",\"oauthToken\":{\"command\":[\"token\"]}"), "rich.oauthToken.command[0]");
	refused(RICH(",\"effort\":{\"default\":\"max\"}"), "rich.effort.default");
	refused(RICH(",\"effort\":{\"judge\":{}}"), "rich.effort.judge.command");
	refused(RICH(",\"effort\":{\"judge\":{\"command\":[\"judge\"]}}"), "rich.effort.judge.command[0]");
	refused(RICH(",\"memory\":{\"visibility\":\"shared\"}"), "rich.memory.command");
	refused(RICH(",\"memory\":{\"command\":[\"/m\"],\"visibility\":\"public\"}"), "rich.memory.visibility");
	refused(RICH(",\"compaction\":{\"engine\":\"x\"}"), "rich.compaction.command");
	refused(RICH(",\"compaction\":{\"command\":[\"/c\"],\"engine\":\"a b\"}"), "rich.compaction.engine");
	refused(RICH(",\"log\":{\"driver\":\"Journal!\"}"), "rich.log.driver");
	refused(RICH(",\"log\":{\"options\":{\"tag\":\"a\\nb\"}}"), "rich.log.options.tag");
	refused(RICH(",\"log\":{\"options\":{\"BAD KEY\":\"v\"}}"), "rich.log.options.BAD KEY");
	refused(RICH(",\"timeZone\":\"../etc\""), "rich.timeZone");
	refused(RICH(",\"allowHttpMcp\":\"yes\""), "rich.allowHttpMcp");
	refused("\"rich\":[]", "rich");
}
END_TEST

/* Profiles may only name configured servers and tools, each once. */
START_TEST(test_profile_names)
{
	const char *text = refused(TOOLS ",\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"mcp\":[\"docs\",\"nope\"]}}}",
				   "rich.profiles.p.mcp[1]");
	ck_assert_msg(strstr(text, "\"nope\"") && strstr(text, "mcp[]"), "%s", text);
	refused(TOOLS ",\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"tools\":[\"clock\",\"clock\"]}}}",
		"rich.profiles.p.tools[1]");
	refused(TOOLS ",\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"tools\":[\"fetch\"]}}}", "rich.profiles.p.tools[0]");
	refused("\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"tools\":[\"clock\"]}}}", "rich.profiles.p.tools[0]");
	refused(TOOLS ",\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"mcp\":[\"Docs\"]}}}", "rich.profiles.p.mcp[0]");
}
END_TEST

/* Seed: allowHttpMcp is the only way to a cleartext MCP endpoint. */
START_TEST(test_http_mcp)
{
	const char *http_mcp = "\"mcp\":[{\"name\":\"local\",\"url\":\"http://127.0.0.1:9/mcp\",\"tools\":[{\"name\":\"t\","
			       "\"description\":\"d\",\"parameters\":{}}]}]";
	cleanup_free char *plain = rts_xasprintf("%s", http_mcp);
	const char *text = refused(plain, "mcp[0].url");
	ck_assert_msg(strstr(text, "allowHttpMcp"), "%s", text);
	cleanup_free char *off = rts_xasprintf("%s,%s", http_mcp, RICH(""));
	refused(off, "mcp[0].url");
	cleanup_free char *on = rts_xasprintf("%s,%s", http_mcp,
					      "\"rich\":{\"profiles\":{\"p\":{\"model\":\"m\",\"mcp\":[\"local\"]}},"
					      "\"allowHttpMcp\":true}");
	struct rts_config *c = load_ok(on);
	ck_assert_str_eq(c->mcp[0].url, "http://127.0.0.1:9/mcp");
	rts_config_free(c);
	refused("\"mcp\":[{\"name\":\"x\",\"url\":\"ftp://h/\",\"tools\":[{\"name\":\"t\",\"description\":\"d\","
		"\"parameters\":{}}]}]",
		"mcp[0].url");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config_rich");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_absent);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_compaction_timeout_default);
	tcase_add_test(tc, test_ranges);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_profile_names);
	tcase_add_test(tc, test_http_mcp);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
