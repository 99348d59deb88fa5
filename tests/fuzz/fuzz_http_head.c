/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the request-head gate (brokerd/head.c), then, for heads it lets
 * through, the route table and the header allow-list (brokerd/http.c) as libmicrohttpd
 * would feed them.
 *
 * Invariants: a COMPLETE head lies inside the input and the limit, its target inside the
 * head; no prefix of a COMPLETE head is INVALID (the gate may refuse early only what can
 * never become valid); the allow-list never admits a body over the limit or a request
 * without the exact dummy credential. */
#include "config.h"

#include <stdint.h>
#include <strings.h>

#include "brokerd/head.h"
#include "brokerd/http.h"
#include "tests/fuzz/fuzz_common.h"

static struct rts_config *cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	cfg = fuzz_config();
	return 0;
}

/* Split a head the gate accepted into fields, the way libmicrohttpd reports them. */
static void check_fields(const char *buf, size_t head_len)
{
	static struct brokerd_header h[BROKERD_HEADERS_MAX + 1];
	static char names[BROKERD_HEADERS_MAX + 1][BROKERD_HEAD_MAX], values[BROKERD_HEADERS_MAX + 1][BROKERD_HEAD_MAX];
	size_t n = 0;
	const char *p = memchr(buf, '\n', head_len);
	FUZZ_ASSERT(p);
	p++;
	const char *end = buf + head_len - 2;
	while (p < end && n <= BROKERD_HEADERS_MAX) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));
		FUZZ_ASSERT(eol && eol[1] == '\n');
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		FUZZ_ASSERT(colon && colon > p);
		const char *v = colon + 1, *v_end = eol;
		while (v < v_end && (*v == ' ' || *v == '\t'))
			v++;
		while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
			v_end--;
		memcpy(names[n], p, (size_t)(colon - p));
		names[n][colon - p] = '\0';
		memcpy(values[n], v, (size_t)(v_end - v));
		values[n][v_end - v] = '\0';
		h[n] = (struct brokerd_header){names[n], strlen(names[n]), values[n], strlen(values[n])};
		n++;
		p = eol + 2;
	}
	size_t len = 0;
	enum brokerd_result r = brokerd_headers_check(h, n, &len);
	if (r == BROKERD_OK) {
		FUZZ_ASSERT(len <= RTS_BROKER_BODY_MAX);
		bool auth = false;
		for (size_t i = 0; i < n; i++)
			if (strcasecmp(h[i].name, "Authorization") == 0)
				auth = strcmp(h[i].value, "Bearer " RTS_DUMMY_KEY) == 0;
		FUZZ_ASSERT(auth);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct brokerd_head h;
	enum brokerd_head_verdict v = brokerd_head_scan(buf, size, &h);
	if (v == BROKERD_HEAD_INVALID) {
		FUZZ_ASSERT(h.why);
		return 0;
	}
	if (v == BROKERD_HEAD_INCOMPLETE) {
		FUZZ_ASSERT(size < BROKERD_HEAD_MAX);
		return 0;
	}
	FUZZ_ASSERT(h.len >= 4 && h.len <= size && h.len <= BROKERD_HEAD_MAX);
	FUZZ_ASSERT(memcmp(buf + h.len - 4, "\r\n\r\n", 4) == 0);
	FUZZ_ASSERT(h.target > buf && h.target + h.target_len < buf + h.len && h.target_len > 0);
	struct brokerd_head ph;
	FUZZ_ASSERT(brokerd_head_scan(buf, h.len - 1, &ph) == BROKERD_HEAD_INCOMPLETE);
	FUZZ_ASSERT(brokerd_head_scan(buf, h.len / 2, &ph) == BROKERD_HEAD_INCOMPLETE);

	char target[BROKERD_HEAD_MAX + 1];
	memcpy(target, h.target, h.target_len);
	target[h.target_len] = '\0';
	const char *name = NULL;
	const struct brokerd_route *route = brokerd_route_match(cfg, target, &name);
	if (route && !strcmp(route->kind, "model"))
		FUZZ_ASSERT(!strcmp(target, "/model"));
	else if (route)
		FUZZ_ASSERT(name && strpbrk(name, "/?#%.") == NULL);
	check_fields(buf, h.len);
	return 0;
}
