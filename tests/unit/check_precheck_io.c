/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's side of a precheck run (DESIGN.md 8.3): the exact docker run of a precheck
 * (runnerd/docker_args.h), the harness's input and the strict reading of its one result
 * line (runnerd/precheck_io.h, HACKING.md "Precheck runtime"). Pure functions. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/limits.h"
#include "common/strictjson.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/precheck_io.h"

#define INST "0123456789ab"
#define ID "00112233445566ff"
#define HASH "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DIR "/run/rts/precheck-" ID

START_TEST(test_precheck_argv_exact)
{
	struct runnerd_run_spec s = {
		.kind = RUNNERD_RUN_PRECHECK,
		.docker = "/usr/bin/docker",
		.installation_id = INST,
		.turn_id = ID,
		.channel_hash = HASH,
		.uid = 1000,
		.gid = 1000,
		.limits = {.memory_mb = 256, .cpus = 1.0, .pids = 32},
		.workspace = DIR "/workspace",
		.run_dir = DIR "/broker",
		.image = "roundtable-sandbox:precheck",
	};
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	/* The turn's list, with the precheck's /tmp and its empty workspace read-only. */
	const char *expect[] = {
		"/usr/bin/docker", "run", "-i", "--attach", "stdin", "--attach", "stdout", "--rm", "--name",
		"roundtable-sandbox-" INST "-" ID, "--label", "io.roundtable-sandbox.installation=" INST, "--label",
		"io.roundtable-sandbox.channel=" HASH, "--network", "none", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--user", "1000:1000", "--memory", "256m", "--memory-swap", "256m",
		"--cpus", "1", "--pids-limit", "32", "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m", "--log-driver", "none",
		"--pull", "never", "--mount", "type=bind,source=" DIR "/workspace,target=/workspace,readonly", "--mount",
		"type=bind,source=" DIR "/broker,target=/run/broker,readonly", "roundtable-sandbox:precheck",
	};
	size_t n = rts_strv_len(v);
	ck_assert_uint_eq(n, RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(strcmp(v[i], expect[i]) == 0, "argv[%zu] is \"%s\", expected \"%s\"", i, v[i], expect[i]);

	s.kind = (enum runnerd_run_kind)7;
	ck_assert_ptr_null(runnerd_docker_run_argv(&s));
}
END_TEST

static const struct rts_precheck_server docs = {.name = "docs"};

static struct runnerd_precheck_input input(void)
{
	static const struct rts_precheck_pair pairs[] = {{&docs, "search"}, {&docs, "get.page"}};
	return (struct runnerd_precheck_input){
		.script = "export default () => ({ wake: false })\n",
		.fired_at = "2026-03-01T12:00:00Z",
		.time_zone = "Pacific/Kiritimati",
		.today = "2026-03-02",
		.schedule = "{\"cron\":\"0 9 * * *\"}",
		.pairs = pairs,
		.n_pairs = 2,
		.max_calls = 16,
	};
}

START_TEST(test_input_shape)
{
	struct runnerd_precheck_input in = input();
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), 0);
	ck_assert_uint_eq(len, strlen(out));
	ck_assert_str_eq(out, "{\"v\":1,\"script\":\"export default () => ({ wake: false })\\n\","
			      "\"firedAt\":\"2026-03-01T12:00:00Z\",\"timeZone\":\"Pacific/Kiritimati\","
			      "\"today\":\"2026-03-02\",\"schedule\":{\"cron\":\"0 9 * * *\"},"
			      "\"tools\":[{\"server\":\"docs\",\"tool\":\"search\"},{\"server\":\"docs\",\"tool\":\"get.page\"}],"
			      "\"maxCalls\":16}");
	free(out);
	/* The schedule is any JSON value, passed as that value. */
	const char *values[] = {"null", "\"daily\"", "[1,2]", "42", "true"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(values); i++) {
		in.schedule = values[i];
		in.n_pairs = 0;
		ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), 0);
		cleanup_free char *want = rts_xasprintf("\"schedule\":%s,\"tools\":[],", values[i]);
		ck_assert_msg(strstr(out, want), "%s", out);
		free(out);
	}
}
END_TEST

START_TEST(test_input_refusals)
{
	const char *schedules[] = {"", "1,2", "{\"a\":1,\"a\":2}", "{", "\"\\u0000\"", "[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(schedules); i++) {
		struct runnerd_precheck_input in = input();
		in.schedule = schedules[i];
		char *out = NULL;
		size_t len;
		ck_assert_msg(runnerd_precheck_input(&in, &out, &len) == -EINVAL, "schedule %s accepted", schedules[i]);
		ck_assert_ptr_null(out);
	}
	struct runnerd_precheck_input in = input();
	char *out = NULL;
	size_t len;
	in.script = "";
	ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), -EINVAL);
	in = input();
	in.today = "2026-02-30";
	ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), -EINVAL);
	in = input();
	in.max_calls = RTS_PRECHECK_MAX_CALLS_MAX + 1;
	ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), -EINVAL);
	in = input();
	in.script = "\xc3";
	ck_assert_int_eq(runnerd_precheck_input(&in, &out, &len), -EINVAL);
}
END_TEST

static enum runnerd_precheck_result parse(const char *line, int status, uint32_t *answer, char **text, char *field)
{
	return runnerd_precheck_output_parse(line, strlen(line), status, answer, text, field);
}

START_TEST(test_output_answers)
{
	const struct {
		const char *line;
		uint32_t answer;
		const char *text;
	} ok[] = {
		{"{\"v\":1,\"wake\":false}\n", RTS_PRECHECK_SLEEP, NULL},
		{"{\"wake\":false,\"v\":1,\"note\":\"n\\u00e9\"}\n", RTS_PRECHECK_NOTE, "n\xc3\xa9"},
		{"{\"v\":1,\"wake\":true,\"context\":\"\"}\n", RTS_PRECHECK_CONTEXT, ""},
		{"{\"v\":1,\"wake\":true,\"context\":\"line\\nline\"}\n", RTS_PRECHECK_CONTEXT, "line\nline"},
		{"{\"v\":1,\"wake\":true,\"error\":\"Error: x (script.mjs:1:2)\"}\n", RTS_PRECHECK_SCRIPT_ERROR,
		 "Error: x (script.mjs:1:2)"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(ok); i++) {
		uint32_t a = 99;
		char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
		ck_assert_int_eq(parse(ok[i].line, 0, &a, &text, field), RUNNERD_PRECHECK_ANSWER);
		ck_assert_uint_eq(a, ok[i].answer);
		if (ok[i].text)
			ck_assert_str_eq(text, ok[i].text);
		else
			ck_assert_ptr_null(text);
		free(text);
	}
}
END_TEST

START_TEST(test_output_malformed)
{
	const char *bad[] = {
		"",
		"\n",
		"{\"v\":1,\"wake\":false}",			     /* no newline */
		"{\"v\":1,\"wake\":false}\n\n",			     /* a second line */
		"{\"v\":1,\"wake\":false}\r\n",			     /* CR: another byte on the line */
		"{\"v\":1,\"wake\":false} \n",			     /* whitespace JSON allows, the line does not */
		"{\"v\":2,\"wake\":false}\n",
		"{\"v\":1.0,\"wake\":false}\n",
		"{\"wake\":false}\n",
		"{\"v\":1,\"wake\":\"false\"}\n",
		"{\"v\":1,\"wake\":false,\"wake\":true}\n",	     /* a duplicate key */
		"{\"v\":1,\"wake\":false,\"context\":\"x\"}\n",
		"{\"v\":1,\"wake\":false,\"error\":\"x\"}\n",
		"{\"v\":1,\"wake\":true}\n",
		"{\"v\":1,\"wake\":true,\"note\":\"x\",\"context\":\"x\"}\n",
		"{\"v\":1,\"wake\":true,\"context\":\"x\",\"error\":\"y\"}\n",
		"{\"v\":1,\"wake\":true,\"error\":\"\"}\n",
		"{\"v\":1,\"wake\":true,\"context\":\"a\\u0000b\"}\n", /* NUL */
		"{\"v\":1,\"wake\":true,\"context\":\"\\ud800\"}\n",   /* a lone surrogate */
		"{\"v\":1,\"wake\":true,\"context\":\"\xff\"}\n",      /* not UTF-8 */
		"{\"v\":1,\"wake\":true,\"context\":\"x\",\"x\":1}\n",
		"{\"v\":1,\"wake\":false,\"field\":\"x\"}\n",
		"[{\"v\":1,\"wake\":false}]\n",
		"{\"v\":1,\"error\":\"bad_input\",\"field\":\"today\"}\n", /* with exit status 0 */
		"{\"v\":1,\"error\":\"other\",\"field\":\"today\"}\n",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		uint32_t a;
		char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
		enum runnerd_precheck_result r = parse(bad[i], 0, &a, &text, field);
		ck_assert_msg(r == RUNNERD_PRECHECK_MALFORMED, "accepted #%zu %s", i, bad[i]);
		ck_assert_ptr_null(text);
	}
	/* A good line does not count when the container failed. */
	uint32_t a;
	char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
	ck_assert_int_eq(parse("{\"v\":1,\"wake\":false}\n", 1, &a, &text, field), RUNNERD_PRECHECK_MALFORMED);
	ck_assert_int_eq(parse("{\"v\":1,\"wake\":false}\n", -1, &a, &text, field), RUNNERD_PRECHECK_MALFORMED);
	ck_assert_int_eq(parse("{\"v\":1,\"wake\":false}\n", 137, &a, &text, field), RUNNERD_PRECHECK_MALFORMED);
}
END_TEST

START_TEST(test_output_bad_input)
{
	uint32_t a;
	char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
	ck_assert_int_eq(parse("{\"v\":1,\"error\":\"bad_input\",\"field\":\"timeZone\"}\n", 1, &a, &text, field),
			 RUNNERD_PRECHECK_BAD_INPUT);
	ck_assert_str_eq(field, "timeZone");
	/* A field name that is not plain letters is not logged. */
	ck_assert_int_eq(parse("{\"v\":1,\"error\":\"bad_input\",\"field\":\"a b\\n\"}\n", 1, &a, &text, field),
			 RUNNERD_PRECHECK_BAD_INPUT);
	ck_assert_str_eq(field, "");
	ck_assert_ptr_null(text);
}
END_TEST

/* Every bound at its value passes; one byte more does not. */
START_TEST(test_output_bounds)
{
	const struct {
		const char *head;
		size_t max;
	} b[] = {
		{"{\"v\":1,\"wake\":false,\"note\":\"", RTS_PRECHECK_NOTE_MAX},
		{"{\"v\":1,\"wake\":true,\"context\":\"", RTS_PRECHECK_CONTEXT_MAX},
		{"{\"v\":1,\"wake\":true,\"error\":\"", RTS_PRECHECK_ERROR_MAX},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(b); i++)
		for (size_t extra = 0; extra < 2; extra++) {
			cleanup_free char *fill = rts_xmalloc(b[i].max + 2);
			/* Two-byte characters: bounds are bytes of UTF-8. */
			for (size_t k = 0; k + 1 < b[i].max + 2 * extra; k += 2)
				memcpy(fill + k, "\xc3\xa9", 2);
			fill[b[i].max + extra] = '\0';
			if (extra)
				fill[b[i].max] = 'x';
			cleanup_free char *line = rts_xasprintf("%s%s\"}\n", b[i].head, fill);
			uint32_t a;
			char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
			enum runnerd_precheck_result r = parse(line, 0, &a, &text, field);
			ck_assert_int_eq(r, extra ? RUNNERD_PRECHECK_MALFORMED : RUNNERD_PRECHECK_ANSWER);
			if (!extra)
				ck_assert_uint_eq(strlen(text), b[i].max);
			free(text);
		}
	/* The whole output is bounded before it is parsed. */
	cleanup_free char *huge = rts_xmalloc(RTS_PRECHECK_OUTPUT_MAX + 2);
	memset(huge, ' ', RTS_PRECHECK_OUTPUT_MAX + 1);
	memcpy(huge, "{\"v\":1,\"wake\":false}", 20);
	huge[RTS_PRECHECK_OUTPUT_MAX] = '\n';
	uint32_t a;
	char *text = NULL, field[RUNNERD_PRECHECK_FIELD_MAX + 1];
	ck_assert_int_eq(runnerd_precheck_output_parse(huge, RTS_PRECHECK_OUTPUT_MAX + 1, 0, &a, &text, field),
			 RUNNERD_PRECHECK_MALFORMED);
}
END_TEST

int main(void)
{
	rts_json_strict_init();
	Suite *s = suite_create("precheck_io");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_precheck_argv_exact);
	tcase_add_test(tc, test_input_shape);
	tcase_add_test(tc, test_input_refusals);
	tcase_add_test(tc, test_output_answers);
	tcase_add_test(tc, test_output_malformed);
	tcase_add_test(tc, test_output_bad_input);
	tcase_add_test(tc, test_output_bounds);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
