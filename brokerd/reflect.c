/* SPDX-License-Identifier: Apache-2.0 */
/* The reflection filter (reflect.h says what it catches and what not).
 *
 * Why it stays linear in the size of what it reads (answers are bounded at 1 MiB):
 * decoding every substring of a text to see whether it is the key would be quadratic, and
 * listing every encoded form of the key is exponential for the encodings that allow mixes
 * (each byte plain or escaped, each hex digit in either case). So each encoding is undone
 * from the side where it has a single answer:
 *   - percent and JSON escapes are decoded in the text: an escape stands for exactly one
 *     byte whatever surrounds it, so one left-to-right pass turns every mix of plain and
 *     escaped bytes, in any case, into the key itself;
 *   - hex and base64 are encoded on the key's side, once per key, and the text is only
 *     folded (hex to lower case, base64url to the standard alphabet, whitespace removed),
 *     so the key's encoding appears verbatim in the folded text whatever case, alphabet or
 *     line breaks were used. Decoding them in the text instead would depend on where a run
 *     starts. A base64 encoding of the key depends on the byte of its 3-byte group the key
 *     starts at: the characters made of key bits alone are precomputed for each of the
 *     three starts, and the one or two at each end that mix in neighbouring bytes or
 *     padding are left out.
 * Each view costs one pass over the text and serves every key; each search is glibc's
 * memmem(), which is linear in the text. A text of n bytes checked against k keys costs
 * O(n) for at most four views plus O(n * k) for at most seven searches per key, and one
 * scratch buffer of n bytes. */
#include "config.h"

#include <openssl/evp.h>

#include "brokerd/brokerd.h"
#include "brokerd/reflect.h"
#include "common/util.h"

#define B64_ALIGNMENTS 3u

struct needle {
	char *s;
	size_t len; /* 0: not looked for */
};

struct brokerd_reflect {
	struct needle raw;
	struct needle hex;		   /* lower case */
	struct needle b64[B64_ALIGNMENTS]; /* standard alphabet, key bits only */
};

static void needle_wipe(struct needle *n)
{
	if (!n->s)
		return;
	explicit_bzero(n->s, n->len);
	free(n->s);
	*n = (struct needle){0};
}

static const char lower_hex[] = "0123456789abcdef";

static struct needle make_hex(const unsigned char *k, size_t len)
{
	char *out = rts_xmalloc(2 * len);
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = lower_hex[k[i] >> 4];
		out[2 * i + 1] = lower_hex[k[i] & 15];
	}
	return (struct needle){.s = out, .len = 2 * len};
}

/* The base64 characters that carry only key bits when the key starts at byte `align`
 * (0..2) of a 3-byte group. Of the group the key starts in, character 0 is whole key bits
 * at align 0, character 2 at align 1, character 3 at align 2 (before that, filler bits
 * mix in); of the key's last group with rem bytes (1..2), the first rem characters are
 * whole key bits and the next one mixes in what follows. */
static struct needle make_base64(const unsigned char *k, size_t len, unsigned align)
{
	static const size_t skip[B64_ALIGNMENTS] = {0, 2, 3};
	size_t in_len = align + len;
	unsigned char *in = rts_xcalloc(in_len, 1);
	memcpy(in + align, k, len);
	size_t enc_len = 4 * ((in_len + 2) / 3);
	char *enc = rts_xmalloc(enc_len + 1);
	EVP_EncodeBlock((unsigned char *)enc, in, (int)in_len);
	explicit_bzero(in, in_len);
	free(in);
	size_t end = 4 * (in_len / 3) + in_len % 3;
	size_t n = end - skip[align]; /* len >= BROKERD_REFLECT_MIN_ENCODED: positive */
	char *out = rts_xmalloc(n);
	memcpy(out, enc + skip[align], n);
	explicit_bzero(enc, enc_len + 1);
	free(enc);
	return (struct needle){.s = out, .len = n};
}

struct brokerd_reflect *brokerd_reflect_new(const char *key, size_t len)
{
	if (!key || len == 0 || len > BROKERD_KEY_MAX)
		return NULL;
	const unsigned char *k = (const unsigned char *)key;
	/* The views below rely on it: no key byte is whitespace, NUL or beyond ASCII. */
	for (size_t i = 0; i < len; i++)
		if (k[i] <= 0x20 || k[i] >= 0x7f)
			return NULL;
	struct brokerd_reflect *r = rts_xcalloc(1, sizeof(*r));
	r->raw.s = rts_xmalloc(len);
	memcpy(r->raw.s, key, len);
	r->raw.len = len;
	if (len >= BROKERD_REFLECT_MIN_ENCODED) {
		r->hex = make_hex(k, len);
		for (unsigned a = 0; a < B64_ALIGNMENTS; a++)
			r->b64[a] = make_base64(k, len, a);
	}
	return r;
}

void brokerd_reflect_free(struct brokerd_reflect *r)
{
	if (!r)
		return;
	needle_wipe(&r->raw);
	needle_wipe(&r->hex);
	for (unsigned a = 0; a < B64_ALIGNMENTS; a++)
		needle_wipe(&r->b64[a]);
	free(r);
}

/* ---- views of a text: each at most as long as the text ---- */

static int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Every "%XX" (hex digits in either case) decoded to its byte, everything else as it is.
 * With more (the text goes on in a later piece), an escape the end of in cuts short is left
 * undecoded: *used says how many bytes of in were read. */
static size_t view_percent_more(const char *in, size_t len, char *out, bool more, size_t *used)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		int hi, lo;
		if (more && s[i] == '%' && i + 2 >= len && (i + 1 == len || hex_value(s[i + 1]) >= 0)) {
			*used = i;
			return o;
		}
		if (s[i] == '%' && i + 2 < len && (hi = hex_value(s[i + 1])) >= 0 && (lo = hex_value(s[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[o++] = (char)s[i];
		}
	}
	*used = len;
	return o;
}

static size_t view_percent(const char *in, size_t len, char *out)
{
	size_t used;
	return view_percent_more(in, len, out, false, &used);
}

/* True when the n bytes at s (after a backslash) may still become a complete escape. */
static bool escape_open(const unsigned char *s, size_t n)
{
	if (n == 0)
		return true;
	if (s[0] != 'u' || n >= 5)
		return false;
	for (size_t j = 1; j < n; j++)
		if (hex_value(s[j]) < 0)
			return false;
	return true;
}

/* JSON string escapes decoded; a backslash that starts none stays. A \u escape beyond
 * ASCII becomes one NUL: no key has such a byte (brokerd_reflect_new), so it only has to
 * stand between its neighbours. more and *used as for view_percent_more(). */
static size_t view_json_more(const char *in, size_t len, char *out, bool more, size_t *used_in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (more && s[i] == '\\' && len - i < 6 && escape_open(s + i + 1, len - i - 1)) {
			*used_in = i;
			return o;
		}
		if (s[i] != '\\' || i + 1 == len) {
			out[o++] = (char)s[i];
			continue;
		}
		char c = 0;
		size_t used = 1;
		switch (s[i + 1]) {
		case '"':
		case '\\':
		case '/':
			c = (char)s[i + 1];
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u': {
			unsigned cp = 0;
			bool ok = i + 5 < len;
			for (size_t j = 2; ok && j < 6; j++) {
				int v = hex_value(s[i + j]);
				ok = v >= 0;
				cp = cp << 4 | (unsigned)(v & 15);
			}
			if (!ok) {
				used = 0;
				break;
			}
			c = cp < 0x80 ? (char)cp : '\0';
			used = 5;
			break;
		}
		default:
			used = 0;
		}
		if (used == 0) {
			out[o++] = '\\';
			continue;
		}
		out[o++] = c;
		i += used;
	}
	*used_in = len;
	return o;
}

static size_t view_json_escapes(const char *in, size_t len, char *out)
{
	size_t used;
	return view_json_more(in, len, out, false, &used);
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Whitespace removed and hex digits in lower case. */
static size_t view_hex(const char *in, size_t len, char *out)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	for (size_t i = 0; i < len; i++)
		if (!is_space(s[i]))
			out[o++] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
	return o;
}

/* Whitespace removed and base64url's two characters mapped to standard base64's. */
static size_t view_base64(const char *in, size_t len, char *out)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (is_space(s[i]))
			continue;
		out[o++] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : (char)s[i];
	}
	return o;
}

/* ---- the scan ---- */

struct scan {
	const struct brokerd_reflect *const *keys;
	size_t n;
	bool encoded; /* some key has hex and base64 needles */
	char *buf;    /* scratch for the views; holds answer bytes, maybe a decoded key */
	size_t cap;
};

static struct scan scan_start(const struct brokerd_reflect *const *keys, size_t n)
{
	struct scan s = {.keys = keys, .n = keys ? n : 0};
	for (size_t i = 0; i < s.n; i++)
		if (keys[i] && keys[i]->hex.len)
			s.encoded = true;
	return s;
}

static void scan_end(struct scan *s)
{
	if (s->buf)
		explicit_bzero(s->buf, s->cap);
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

static bool found(const char *hay, size_t hay_len, const struct needle *nd)
{
	return nd->len > 0 && nd->len <= hay_len && memmem(hay, hay_len, nd->s, nd->len) != NULL;
}

static bool any_raw(const struct scan *s, const char *text, size_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->keys[i] && found(text, len, &s->keys[i]->raw))
			return true;
	return false;
}

static bool scan_one(struct scan *s, const char *text, size_t len)
{
	if (s->n == 0 || len == 0)
		return false;
	if (any_raw(s, text, len))
		return true;
	if (len > s->cap) {
		scan_end(s);
		s->buf = rts_xmalloc(len);
		s->cap = len;
	}
	char *v = s->buf;
	if (memchr(text, '%', len) && any_raw(s, v, view_percent(text, len, v)))
		return true;
	if (memchr(text, '\\', len) && any_raw(s, v, view_json_escapes(text, len, v)))
		return true;
	if (!s->encoded)
		return false;
	size_t m = view_hex(text, len, v);
	for (size_t i = 0; i < s->n; i++)
		if (s->keys[i] && found(v, m, &s->keys[i]->hex))
			return true;
	m = view_base64(text, len, v);
	for (size_t i = 0; i < s->n; i++)
		for (unsigned a = 0; s->keys[i] && a < B64_ALIGNMENTS; a++)
			if (found(v, m, &s->keys[i]->b64[a]))
				return true;
	return false;
}

static bool scan_json(struct scan *s, json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_string:
		return scan_one(s, json_object_get_string(o), (size_t)json_object_get_string_len(o));
	case json_type_array: {
		size_t n = json_object_array_length(o);
		for (size_t i = 0; i < n; i++)
			if (scan_json(s, json_object_array_get_idx(o, i)))
				return true;
		return false;
	}
	case json_type_object: {
		json_object_object_foreach(o, name, val)
		{
			if (scan_one(s, name, strlen(name)) || scan_json(s, val))
				return true;
		}
		return false;
	}
	default:
		/* Numbers, booleans and null cannot carry a key. */
		return false;
	}
}

bool brokerd_reflect_scan_text(const struct brokerd_reflect *const *keys, size_t n, const char *text, size_t len)
{
	if (!text)
		return false;
	struct scan s = scan_start(keys, n);
	bool hit = scan_one(&s, text, len);
	scan_end(&s);
	return hit;
}

bool brokerd_reflect_scan_json(const struct brokerd_reflect *const *keys, size_t n, json_object *o)
{
	if (!o)
		return false;
	struct scan s = scan_start(keys, n);
	bool hit = scan_json(&s, o);
	scan_end(&s);
	return hit;
}

bool brokerd_reflect_text(const struct brokerd_reflect *r, const char *text, size_t len)
{
	return brokerd_reflect_scan_text(&r, 1, text, len);
}

bool brokerd_reflect_json(const struct brokerd_reflect *r, json_object *o)
{
	return brokerd_reflect_scan_json(&r, 1, o);
}

/* ---- a running text ---- */

/* Each view keeps the last (its longest needle - 1) bytes it produced, so a key whose form
 * ends in a later piece is found whole; the two escape views also keep the raw bytes of
 * an escape a piece cut short (at most a backslash, 'u' and three hex digits). */
enum { RUN_RAW, RUN_PERCENT, RUN_JSON, RUN_HEX, RUN_BASE64, RUN_VIEWS };

#define RUN_OPEN_MAX 5u

struct brokerd_reflect_run {
	char *tail[RUN_VIEWS];
	size_t tail_len[RUN_VIEWS], tail_cap[RUN_VIEWS];
	char open[RUN_VIEWS][RUN_OPEN_MAX]; /* RUN_PERCENT and RUN_JSON only */
	size_t open_len[RUN_VIEWS];
	char *in, *out; /* scratch: a view's input (open bytes + piece) and tail + output */
	size_t in_cap, out_cap;
};

struct brokerd_reflect_run *brokerd_reflect_run_new(void)
{
	return rts_xcalloc(1, sizeof(struct brokerd_reflect_run));
}

static void wipe_free(char *p, size_t n)
{
	if (p)
		explicit_bzero(p, n);
	free(p);
}

void brokerd_reflect_run_free(struct brokerd_reflect_run *run)
{
	if (!run)
		return;
	for (unsigned v = 0; v < RUN_VIEWS; v++)
		wipe_free(run->tail[v], run->tail_cap[v]);
	explicit_bzero(run->open, sizeof(run->open));
	wipe_free(run->in, run->in_cap);
	wipe_free(run->out, run->out_cap);
	free(run);
}

static void ensure(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	wipe_free(*buf, *cap);
	*buf = rts_xmalloc(need);
	*cap = need;
}

/* The longest needle of view v over the keys (0: nothing to look for). */
static size_t run_longest(const struct brokerd_reflect *const *keys, size_t n, unsigned v)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const struct brokerd_reflect *r = keys[i];
		if (!r)
			continue;
		size_t l = v == RUN_HEX ? r->hex.len : v == RUN_BASE64 ? r->b64[0].len : r->raw.len;
		for (unsigned a = 1; v == RUN_BASE64 && a < B64_ALIGNMENTS; a++)
			if (r->b64[a].len > l)
				l = r->b64[a].len;
		if (l > m)
			m = l;
	}
	return m;
}

static bool run_found(const struct brokerd_reflect *const *keys, size_t n, unsigned v, const char *hay, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		const struct brokerd_reflect *r = keys[i];
		if (!r)
			continue;
		if (v == RUN_HEX) {
			if (found(hay, len, &r->hex))
				return true;
		} else if (v == RUN_BASE64) {
			for (unsigned a = 0; a < B64_ALIGNMENTS; a++)
				if (found(hay, len, &r->b64[a]))
					return true;
		} else if (found(hay, len, &r->raw)) {
			return true;
		}
	}
	return false;
}

/* One view over the new piece: its output appended to the view's tail, searched, and the
 * tail cut back to what a later match may still need. */
static bool run_view(struct brokerd_reflect_run *run, const struct brokerd_reflect *const *keys, size_t n,
		     unsigned v, const char *text, size_t len, bool more)
{
	size_t longest = run_longest(keys, n, v);
	if (longest == 0)
		return false;
	const char *in = text;
	size_t in_len = len;
	if (v == RUN_PERCENT || v == RUN_JSON) {
		in_len = run->open_len[v] + len;
		ensure(&run->in, &run->in_cap, in_len ? in_len : 1);
		memcpy(run->in, run->open[v], run->open_len[v]);
		if (len)
			memcpy(run->in + run->open_len[v], text, len);
		in = run->in;
	}
	size_t t = run->tail_len[v];
	ensure(&run->out, &run->out_cap, t + in_len + 1);
	if (t)
		memcpy(run->out, run->tail[v], t);
	char *o = run->out + t;
	size_t m, used = in_len;
	switch (v) {
	case RUN_PERCENT:
		m = view_percent_more(in, in_len, o, more, &used);
		break;
	case RUN_JSON:
		m = view_json_more(in, in_len, o, more, &used);
		break;
	case RUN_HEX:
		m = view_hex(in, in_len, o);
		break;
	case RUN_BASE64:
		m = view_base64(in, in_len, o);
		break;
	default:
		memcpy(o, in, in_len);
		m = in_len;
	}
	if (v == RUN_PERCENT || v == RUN_JSON) {
		/* used < in_len only for an open escape: at most RUN_OPEN_MAX bytes. */
		run->open_len[v] = in_len - used;
		memcpy(run->open[v], in + used, in_len - used);
	}
	bool hit = run_found(keys, n, v, run->out, t + m);
	size_t keep = longest - 1;
	if (keep > t + m)
		keep = t + m;
	ensure(&run->tail[v], &run->tail_cap[v], keep ? keep : 1);
	memmove(run->tail[v], run->out + t + m - keep, keep);
	run->tail_len[v] = keep;
	return hit;
}

bool brokerd_reflect_run_feed(struct brokerd_reflect_run *run, const struct brokerd_reflect *const *keys, size_t n,
			      const char *text, size_t len, bool final)
{
	if (!run || !keys || n == 0)
		return false;
	bool hit = false;
	for (unsigned v = 0; v < RUN_VIEWS && !hit; v++)
		hit = run_view(run, keys, n, v, text ? text : "", text ? len : 0, !final);
	return hit;
}
