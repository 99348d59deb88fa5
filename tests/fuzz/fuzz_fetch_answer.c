/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: host_fetch's answer (brokerd/fetch.h), which reads what a web server
 * sent: its Content-Type value and its body.
 *
 * Input: byte 0 is the Content-Type's length n (0xff: no Content-Type at all), bytes 1..2
 * the final URL's length (up to what the head allows, so the body's cut is reached with
 * short inputs), byte 3 picks the bound within its allowed range, then n bytes of
 * Content-Type (a NUL ends it early, as a C string would) and the body (any bytes).
 *
 * Invariants: the media type is "" or a lowercase token "/" token of at most 127 bytes;
 * the result text is valid UTF-8, at most the bound, and is exactly the head, "\n\n" and
 * either the body's longest prefix that fits (with the cut noted in the head) or, for
 * content that is not UTF-8 text, a sentence with none of the body. */
#include "config.h"

#include <stdint.h>

#include "brokerd/fetch.h"
#include "common/util.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	size_t ct_len = data[0];
	size_t url_len = ((size_t)data[1] << 8 | data[2]) % (3u * RTS_URL_MAX + 1u);
	size_t max = BROKERD_FETCH_HEAD_MAX + 256u + (size_t)data[3] * 64u;
	data += 4;
	size -= 4;
	char *ct = NULL;
	if (ct_len != 0xff) {
		if (ct_len > size)
			ct_len = size;
		ct = rts_xstrndup((const char *)data, ct_len);
		data += ct_len;
		size -= ct_len;
	}
	char *body = rts_xmalloc(size + 1);
	memcpy(body, data, size);
	body[size] = '\0';
	char *url = rts_xmalloc(url_len + 1);
	memset(url, 'u', url_len);
	url[url_len] = '\0';

	char mt[128];
	brokerd_fetch_media_type(ct, mt, sizeof(mt));
	size_t mt_len = strlen(mt);
	if (mt_len) {
		const char *slash = strchr(mt, '/');
		FUZZ_ASSERT(slash && slash != mt && slash[1] && !strchr(slash + 1, '/'));
		for (size_t i = 0; i < mt_len; i++)
			FUZZ_ASSERT(mt[i] == '/' || token_char(mt[i]));
	}

	struct rts_fetch_result res = {
		.status = (long)size - 300, .body = body, .len = size, .final_url = url, .content_type = ct};
	enum brokerd_fetch_content content;
	char *text = brokerd_fetch_result_text(&res, max, &content);
	size_t n = strlen(text);
	FUZZ_ASSERT(n <= max);
	FUZZ_ASSERT(rts_utf8_valid(text, n));
	FUZZ_ASSERT(content == brokerd_fetch_classify(mt, body, size));
	const char *sep = strstr(text, "\n\n");
	FUZZ_ASSERT(sep);
	const char *after = sep + 2;
	if (content == BROKERD_FETCH_TEXT) {
		size_t shown = strlen(after);
		FUZZ_ASSERT(shown <= size && memcmp(after, body, shown) == 0);
		bool cut = strstr(text, " (cut: the first ") != NULL && strstr(text, " (cut: the first ") < sep;
		FUZZ_ASSERT(cut == (shown < size));
	} else {
		FUZZ_ASSERT(strncmp(after, "Not shown: ", 11) == 0);
		FUZZ_ASSERT(strchr(after, '\n') == NULL);
	}
	free(text);
	free(url);
	free(body);
	free(ct);
	return 0;
}
