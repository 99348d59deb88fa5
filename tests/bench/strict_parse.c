/* SPDX-License-Identifier: Apache-2.0 */
/* What the strict parse (common/strictjson.h: json-c's tree plus jansson's check) costs per
 * document, against json-c alone in the same invocation, and what the validation tables
 * (common/jspec.h) add on top:
 *
 *     make -C BUILDDIR tests/bench/strict_parse && BUILDDIR/tests/bench/strict_parse
 *
 * Documents: a POST /model body of 256 KiB (RTS_BROKER_BODY_MAX: a conversation of
 * messages with tool calls and escaped text, and a tool list with schemas) and a control
 * line of 64 KiB (a message whose text is most of it). Prints the median of RUNS runs of
 * each step in microseconds and the ratios to json-c alone: the strict parse, jansson's
 * check by itself, and the tables (for the body brokerd_model_request_build(), which also
 * builds the upstream copy; for the line statd_message_parse()). Nothing is asserted:
 * timings depend on the machine. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brokerd/model.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/strictjson.h"
#include "common/util.h"
#include "statd/request.h"

#define RUNS		   51
#define REQUEST_JSON_DEPTH 16 /* statd/control.c */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v)
{
	qsort(v, RUNS, sizeof(*v), cmp_u64);
	return (double)v[RUNS / 2] / 1e3;
}

/* Text of n bytes: prose with a quote, a line break and a non-ASCII letter now and then,
 * as JSON string content (escaped). */
static void add(char **out, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	while (*len + n + 1 >= *cap) {
		*cap *= 2;
		*out = rts_xrealloc(*out, *cap);
	}
	memcpy(*out + *len, s, n + 1);
	*len += n;
}

/* About n bytes of prose with a quote, a line break and a non-ASCII letter now and then,
 * as JSON string content (escaped). */
static void add_text(char **out, size_t *len, size_t *cap, size_t n)
{
	static const char unit[] = "the quick brown fox \\\"jumps\\\" over a lazy dog,\\n caf\\u00e9 0123456789. ";
	for (size_t done = 0; done + sizeof(unit) - 1 <= n; done += sizeof(unit) - 1)
		add(out, len, cap, unit);
}

/* A /model body of about target bytes. */
static char *model_body(size_t target)
{
	size_t cap = 4096, len = 0;
	char *b = rts_xmalloc(cap);
	b[0] = '\0';
	add(&b, &len, &cap,
	    "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"host_search\",\"description\":\"search\","
	    "\"parameters\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"},\"n\":{\"type\":"
	    "\"integer\","
	    "\"minimum\":1}},\"required\":[\"q\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"memory_set\","
	    "\"parameters\":{\"type\":\"object\",\"properties\":{\"key\":{\"type\":\"string\"},\"value\":{\"type\":"
	    "\"string\"}}}}}],\"max_tokens\":4096,\"tool_choice\":\"auto\",\"messages\":[{\"role\":\"system\","
	    "\"content\":\"");
	add_text(&b, &len, &cap, 4000);
	add(&b, &len, &cap, "\"}");
	for (unsigned i = 0; len + 3000 < target; i++) {
		char call[512];
		snprintf(call, sizeof(call),
			 ",{\"role\":\"user\",\"content\":\"Message from \\\"Alice\\\": look up item %u\"},"
			 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_%u\",\"type\":"
			 "\"function\","
			 "\"function\":{\"name\":\"host_search\",\"arguments\":\"{\\\"q\\\":\\\"item "
			 "%u\\\",\\\"n\\\":3}\"}}]},"
			 "{\"role\":\"tool\",\"tool_call_id\":\"call_%u\",\"content\":\"",
			 i, i, i, i);
		add(&b, &len, &cap, call);
		add_text(&b, &len, &cap, 1500);
		add(&b, &len, &cap, "\"},{\"role\":\"assistant\",\"content\":\"");
		add_text(&b, &len, &cap, 400);
		add(&b, &len, &cap, "\"}");
	}
	add(&b, &len, &cap, ",{\"role\":\"user\",\"content\":\"thanks\"}]}");
	return b;
}

/* A control line (a message) of about target bytes. */
static char *control_line(size_t target)
{
	size_t cap = 4096, len = 0;
	char *b = rts_xmalloc(cap);
	b[0] = '\0';
	add(&b, &len, &cap,
	    "{\"op\":\"message\",\"id\":\"m-1\",\"channel\":\"guild-1/"
	    "channel-2\",\"guild\":true,\"author\":{\"id\":\"1001\","
	    "\"name\":\"Alice\",\"principalId\":\"p-42\",\"tier\":\"member\",\"bot\":false,\"integration\":false},"
	    "\"addressed\":true,\"attachments\":0,\"text\":\"");
	/* The text bound is on decoded bytes: stay below RTS_TEXT_MAX once unescaped. */
	add_text(&b, &len, &cap, target - len - 64);
	add(&b, &len, &cap, "\"}");
	return b;
}

typedef int validate_fn(json_object *doc);

static int validate_model(json_object *doc)
{
	json_object *out = NULL;
	const char *why = NULL;
	int r = brokerd_model_request_build(doc, "bench-model", 4096, &out, &why);
	if (r < 0)
		fprintf(stderr, "model body refused: %s\n", why);
	json_object_put(out);
	return r;
}

static int validate_control(json_object *doc)
{
	struct statd_message m;
	const char *code, *detail;
	int r = statd_message_parse(doc, &m, &code, &detail);
	if (r < 0)
		fprintf(stderr, "control line refused: %s\n", detail);
	return r;
}

static void bench(const char *name, const char *doc, int depth, validate_fn *validate)
{
	size_t len = strlen(doc);
	uint64_t plain[RUNS], strict[RUNS], check[RUNS], tables[RUNS];
	for (int i = 0; i < RUNS; i++) {
		json_object *o = NULL;
		const char *why = NULL;
		uint64_t t0 = now_ns();
		if (rts_json_parse(doc, len, depth, &o, &why) < 0)
			abort();
		uint64_t t1 = now_ns();
		json_object_put(o);
		uint64_t t2 = now_ns();
		if (rts_json_parse_strict(doc, len, depth, &o, &why) < 0) {
			fprintf(stderr, "%s: %s\n", name, why);
			abort();
		}
		uint64_t t3 = now_ns();
		if (rts_json_strict_check(doc, len, &why) < 0)
			abort();
		uint64_t t4 = now_ns();
		if (validate(o) < 0)
			abort();
		uint64_t t5 = now_ns();
		json_object_put(o);
		plain[i] = t1 - t0;
		strict[i] = t3 - t2;
		check[i] = t4 - t3;
		tables[i] = t5 - t4;
	}
	double p = median_us(plain), s = median_us(strict), c = median_us(check), t = median_us(tables);
	printf("%-22s %8zu %12.1f %12.1f %12.1f %12.1f %9.2f %9.2f\n", name, len, p, s, c, t, s / p, t / p);
}

int main(void)
{
	rts_json_strict_init();
	cleanup_free char *body = model_body(RTS_BROKER_BODY_MAX - 1024);
	cleanup_free char *line = control_line(64u * 1024u);
	printf("median of %d runs, microseconds; strict = json-c parse + jansson check\n", RUNS);
	printf("%-22s %8s %12s %12s %12s %12s %9s %9s\n", "document", "bytes", "json-c", "strict", "jansson only",
	       "tables", "strict/jc", "tables/jc");
	bench("POST /model body", body, RTS_JSON_DEPTH_MAX, validate_model);
	bench("control line", line, REQUEST_JSON_DEPTH, validate_control);
	return 0;
}
