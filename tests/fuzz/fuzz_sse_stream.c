/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an upstream's streamed answer through the SSE splitter (brokerd/sse_stream.h)
 * and the stream filter (brokerd/anthropic.h), the way brokerd_rich_anthropic() passes it
 * to the worker. The first two bytes pick where the bytes are split into pieces; the turn's
 * credential is KEY. Seed corpus: tests/fuzz/corpus/sse_stream.
 *
 * Invariants: whatever the pieces, the same result and the same bytes for the worker (fed
 * whole and fed in pieces); what the worker gets is a run of "event: NAME\ndata: JSON\n\n"
 * events of the Messages API whose data is a JSON object of that type; the credential, in
 * any form reflect.h lists, is not in the concatenation of every upstream string it holds
 * (every value but the fixed "type" ones and known stop reasons and service tiers, and a
 * tool input's keys), in order, across events; after a refusal it ends with one error
 * event. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "brokerd/anthropic.h"
#include "brokerd/brokerd.h"
#include "brokerd/keys.h"
#include "brokerd/sse_stream.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char KEY[] = "sk-ant-oat01-fuzzKEY0123456789";
static struct rts_key_source src = {.kind = RTS_KEY_ENV, .value = "X"};

struct run {
	struct brokerd_stream_filter *f;
	char *out;
	size_t len;
	int result;
};

static int on_event(const char *name, const char *d, size_t n, void *arg)
{
	return brokerd_stream_filter_event(arg, name, d, n);
}

static void take(struct run *r)
{
	size_t n;
	const char *o = brokerd_stream_filter_out(r->f, &n);
	r->out = realloc(r->out, r->len + n + 1);
	memcpy(r->out + r->len, o, n);
	r->len += n;
	r->out[r->len] = '\0';
	brokerd_stream_filter_take(r->f, n);
}

static void run(struct brokerd_keyring *k, const char *buf, size_t len, size_t step, struct run *r)
{
	*r = (struct run){.f = brokerd_stream_filter_new(k, brokerd_stream_window(strlen(KEY)))};
	struct brokerd_sse s;
	brokerd_sse_init(&s, 4096);
	for (size_t at = 0; at < len && r->result == 0; at += step) {
		r->result = brokerd_sse_feed(&s, buf + at, at + step > len ? len - at : step, on_event, r->f);
		take(r);
	}
	if (r->result == 0)
		r->result = brokerd_stream_filter_end(r->f);
	if (r->result < 0)
		brokerd_stream_filter_fail(r->f);
	take(r);
	brokerd_sse_release(&s);
	brokerd_stream_filter_free(r->f);
}

static bool known(const char *s)
{
	static const char *const fixed[] = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn",
					    "refusal", "model_context_window_exceeded", "standard", "priority",
					    "batch", NULL};
	for (const char *const *f = fixed; *f; f++)
		if (!strcmp(s, *f))
			return true;
	return false;
}

/* The upstream strings of o appended to *all (growing *len). */
static void strings(json_object *o, const char *member, bool input, char **all, size_t *len)
{
	switch (json_object_get_type(o)) {
	case json_type_string: {
		const char *s = json_object_get_string(o);
		if (member && (!strcmp(member, "type") ||
			       ((!strcmp(member, "stop_reason") || !strcmp(member, "service_tier")) && known(s))))
			return;
		size_t n = (size_t)json_object_get_string_len(o);
		*all = realloc(*all, *len + n + 1);
		memcpy(*all + *len, s, n);
		*len += n;
		return;
	}
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			strings(json_object_array_get_idx(o, i), input ? NULL : member, input, all, len);
		return;
	case json_type_object: {
		json_object_object_foreach(o, k, v)
		{
			if (input) {
				*all = realloc(*all, *len + strlen(k) + 1);
				memcpy(*all + *len, k, strlen(k));
				*len += strlen(k);
			}
			strings(v, input ? NULL : k, input || !strcmp(k, "input"), all, len);
		}
		return;
	}
	default:
		return;
	}
}

static void check_output(struct brokerd_keyring *k, const char *out, bool failed)
{
	FUZZ_ASSERT(!strstr(out, KEY));
	char *all = NULL;
	size_t all_len = 0;
	const char *p = out, *last = NULL;
	while (*p) {
		FUZZ_ASSERT(!strncmp(p, "event: ", 7));
		const char *nl = strchr(p, '\n');
		FUZZ_ASSERT(nl && !strncmp(nl + 1, "data: ", 6));
		const char *end = strstr(nl + 7, "\n\n");
		FUZZ_ASSERT(end);
		json_object *o = NULL;
		const char *why = NULL;
		FUZZ_ASSERT(rts_json_parse(nl + 7, (size_t)(end - nl - 7), 64, &o, &why) == 0);
		FUZZ_ASSERT(json_object_is_type(o, json_type_object));
		const char *type = rts_json_get_string(o, "type");
		FUZZ_ASSERT(type && strlen(type) == (size_t)(nl - p - 7) && !strncmp(type, p + 7, strlen(type)));
		if (strcmp(type, "error") != 0)
			strings(o, NULL, false, &all, &all_len);
		json_object_put(o);
		last = p;
		p = end + 2;
	}
	if (failed)
		FUZZ_ASSERT(last && !strncmp(last, "event: error\n", 13));
	FUZZ_ASSERT(!brokerd_keyring_reflected(k, all ? all : "", all_len, NULL));
	free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = 1 + ((size_t)data[0] << 8 | data[1]) % 97;
	const char *buf = (const char *)data + 2;
	size_t len = size - 2;
	struct brokerd_keyring *k = brokerd_keyring_new();
	brokerd_keyring_add(k, &src, KEY, strlen(KEY));
	struct run whole, pieces;
	run(k, buf, len, len ? len : 1, &whole);
	run(k, buf, len, step, &pieces);
	FUZZ_ASSERT(whole.result == pieces.result);
	FUZZ_ASSERT(whole.len == pieces.len && (!whole.len || !memcmp(whole.out, pieces.out, whole.len)));
	check_output(k, whole.out ? whole.out : "", whole.result < 0);
	free(whole.out);
	free(pieces.out);
	brokerd_keyring_free(k);
	return 0;
}
