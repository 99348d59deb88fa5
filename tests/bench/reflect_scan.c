/* SPDX-License-Identifier: Apache-2.0 */
/* What the reflection filter (brokerd/reflect.h) costs per answer, against a baseline
 * run in the same invocation: one memmem() of a key-sized needle over the same bytes
 * (the least a filter that looks for a key at all must do).
 *
 *     make -C BUILDDIR tests/bench/reflect_scan && BUILDDIR/tests/bench/reflect_scan
 *
 * For each kind of text at 64 KiB, 256 KiB and 1 MiB (the answer bound), and for 1, 2
 * and 18 keys (18: the most a turn's keyring holds, two per source), prints the median
 * time of a scan, its ratio to the baseline at that size, and the ratio of the 1 MiB time
 * to the 64 KiB time (16 for a scan that is linear in the text). The texts are chosen to
 * be expensive: every byte an escape to decode, every byte a base64 or hex digit, a
 * near-miss of the key repeated, a JSON document of many short strings. Then the same
 * text as a running text (reflect.h) fed in 16-byte pieces, as a stream's short deltas
 * come, and its ratio to the whole scan: each piece also pays the views' tails, a constant
 * per piece, so the ratio stays flat across sizes when the running text is linear too.
 * Nothing is asserted: timings depend on the machine. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brokerd/brokerd.h"
#include "brokerd/reflect.h"
#include "common/json.h"
#include "common/util.h"

#define RUNS 9
#define MAX_KEYS 18

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

enum kind { K_PROSE, K_PERCENT, K_ESCAPES, K_BASE64, K_NEAR_MISS, K_JSON, K_COUNT };
static const char *const kind_name[K_COUNT] = {"prose",		"every byte %XX", "every byte \\uXXXX",
					       "base64 digits", "key near-misses", "JSON, 8-byte strings"};

static const char KEY[] = "sk-proj-Ab9/Zq+x=Lm_7Tt~Yy.0123456789abcdefQ-bench-0000";

/* n bytes of text of the given kind (for K_JSON, a JSON array text of about n bytes). */
static char *make_text(enum kind k, size_t n)
{
	char *t = rts_xmalloc(n + 1);
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		unsigned r = x >> 16;
		switch (k) {
		case K_PROSE:
			t[i] = "the quick brown fox jumps over a lazy dog. 0123456789\n"[r % 54];
			break;
		case K_PERCENT:
			t[i] = "%4a"[i % 3];
			break;
		case K_ESCAPES:
			t[i] = "\\u004a"[i % 6];
			break;
		case K_BASE64:
			t[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[r % 64];
			break;
		case K_NEAR_MISS:
			/* The key without its last byte, again and again. */
			t[i] = i % (sizeof(KEY) - 1) == sizeof(KEY) - 2 ? ' ' : KEY[i % (sizeof(KEY) - 1)];
			break;
		case K_JSON:
			/* ["abcdef","abcdef",...,"x"] */
			t[i] = i == 0 ? '[' : "\"abcdef\","[(i - 1) % 9];
			break;
		case K_COUNT:
			abort();
		}
	}
	if (k == K_JSON) {
		size_t end = 1 + 9 * ((n - 5) / 9); /* after the last whole element */
		memcpy(t + end, "\"x\"]", 4);
		n = end + 4;
	}
	t[n] = '\0';
	return t;
}

static uint64_t median(uint64_t *v)
{
	qsort(v, RUNS, sizeof(*v), cmp_u64);
	return v[RUNS / 2];
}

static uint64_t time_baseline(const char *t, size_t n)
{
	uint64_t v[RUNS];
	const void *volatile sink;
	for (int i = 0; i < RUNS; i++) {
		uint64_t t0 = now_ns();
		sink = memmem(t, n, KEY, sizeof(KEY) - 1);
		v[i] = now_ns() - t0;
	}
	(void)sink;
	return median(v);
}

static uint64_t time_scan(const struct brokerd_reflect *const *keys, size_t nk, enum kind k, const char *t, size_t n,
			  json_object *doc)
{
	uint64_t v[RUNS];
	volatile bool sink;
	for (int i = 0; i < RUNS; i++) {
		uint64_t t0 = now_ns();
		sink = brokerd_reflect_scan_text(keys, nk, t, n);
		if (k == K_JSON)
			sink = brokerd_reflect_scan_json(keys, nk, doc);
		v[i] = now_ns() - t0;
	}
	(void)sink;
	return median(v);
}

#define RUN_PIECE 16u

static uint64_t time_run(const struct brokerd_reflect *const *keys, size_t nk, const char *t, size_t n)
{
	uint64_t v[RUNS];
	volatile bool sink = false;
	for (int i = 0; i < RUNS; i++) {
		struct brokerd_reflect_run *run = brokerd_reflect_run_new();
		uint64_t t0 = now_ns();
		for (size_t at = 0; at < n; at += RUN_PIECE)
			sink = brokerd_reflect_run_feed(run, keys, nk, t + at, n - at < RUN_PIECE ? n - at : RUN_PIECE,
							 at + RUN_PIECE >= n);
		v[i] = now_ns() - t0;
		brokerd_reflect_run_free(run);
	}
	(void)sink;
	return median(v);
}

int main(void)
{
	static const size_t sizes[] = {64u * 1024u, 256u * 1024u, RTS_UPSTREAM_ANSWER_MAX};
	static const size_t key_counts[] = {1, 2, MAX_KEYS};
	const struct brokerd_reflect *keys[MAX_KEYS];
	for (size_t i = 0; i < MAX_KEYS; i++) {
		char *key = rts_xasprintf("%s-%02zu", KEY, i);
		keys[i] = brokerd_reflect_new(key, strlen(key));
		free(key);
	}
	printf("%-22s %5s %9s %10s %10s %8s %10s %7s\n", "text", "keys", "size", "scan ms", "x baseline", "1M/64K",
	       "run16 ms", "x scan");
	for (int k = 0; k < K_COUNT; k++)
		for (size_t kc = 0; kc < RTS_ARRAY_SIZE(key_counts); kc++) {
			uint64_t first = 0;
			for (size_t s = 0; s < RTS_ARRAY_SIZE(sizes); s++) {
				size_t n = sizes[s];
				char *t = make_text((enum kind)k, n);
				json_object *doc = NULL;
				const char *why = NULL;
				if (k == K_JSON && rts_json_parse(t, strlen(t), RTS_JSON_DEPTH_MAX, &doc, &why) < 0)
					abort();
				uint64_t base = time_baseline(t, n);
				uint64_t scan = time_scan(keys, key_counts[kc], (enum kind)k, t, n, doc);
				if (s == 0)
					first = scan;
				printf("%-22s %5zu %8zuK %10.3f %10.1f", kind_name[k], key_counts[kc], n / 1024,
				       (double)scan / 1e6, base ? (double)scan / (double)base : 0.0);
				char growth[16] = "";
				if (s == RTS_ARRAY_SIZE(sizes) - 1)
					snprintf(growth, sizeof(growth), "%.1f", first ? (double)scan / (double)first : 0.0);
				printf(" %8s", growth);
				uint64_t run = time_run(keys, key_counts[kc], t, n);
				printf(" %10.3f %7.1f\n", (double)run / 1e6, scan ? (double)run / (double)scan : 0.0);
				json_object_put(doc);
				free(t);
			}
		}
	for (size_t i = 0; i < MAX_KEYS; i++)
		brokerd_reflect_free((struct brokerd_reflect *)keys[i]);
	return 0;
}
