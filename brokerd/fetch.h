/* SPDX-License-Identifier: Apache-2.0 */
/* POST /tools/fetch: the opt-in host_fetch guest tool (DESIGN.md section 8.2; seed:
 * "Controlled fetch and scoped delegation"). The body is {"url": string}; brokerd fetches
 * the URL with rts_fetch() (common/fetch.h: public addresses only, every hop vetted and
 * pinned) within the config's "fetch" limits and the call's deadline and cancellation,
 * and answers {"result": TEXT} like a host tool, TEXT being one of:
 *
 *   a response:  a short head (status, final URL, media type, length), a blank line and
 *                the body when it is UTF-8 text; binary content and text that is not
 *                UTF-8 get a sentence saying why it is not shown instead of the body
 *   "refused: REASON"       a rule of the fetch refused the URL or an address of a hop
 *                           (the library's static reason: never an address or a header)
 *   "fetch failed: REASON"  any other failure (timed out, too large, cannot connect, ...)
 *
 * An answer that reflects a credential of the turn is refused (upstream_error), as a host
 * tool's output is. The turn closing or the worker hanging up aborts the fetch at once
 * (unavailable); the call's own deadline passing is upstream_timeout. */
#ifndef BROKERD_FETCH_H
#define BROKERD_FETCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/fetch.h"

/* The bytes of a result's head are bounded by the final URL (at most RTS_URL_MAX, which
 * libcurl's normalisation can grow by percent-encoding, at most three bytes per byte) and
 * a few short lines. */
#define BROKERD_FETCH_HEAD_MAX (3u * RTS_URL_MAX + 512u)

/* How a response's body is shown. */
enum brokerd_fetch_content {
	BROKERD_FETCH_TEXT,	/* a textual media type (or none) and UTF-8 without NUL */
	BROKERD_FETCH_BINARY,	/* a media type that is not text */
	BROKERD_FETCH_NOT_UTF8, /* a textual media type (or none), bytes that are not UTF-8 */
};

/* The media type of a Content-Type value, lowercased and without parameters, in out (at
 * most outlen bytes with the NUL), or "" when ct is NULL or the value is not a
 * "type/subtype" of HTTP token characters. Never more than that reaches the model. */
void brokerd_fetch_media_type(const char *ct, char *out, size_t outlen);

/* Decide how body (len bytes) with the media type mt (from brokerd_fetch_media_type())
 * is shown. Textual: text/\*, JSON, XML, JavaScript, YAML, TOML, CSV, NDJSON, SQL and
 * form data types, any type with a +json, +xml or +yaml suffix, and no type at all. */
enum brokerd_fetch_content brokerd_fetch_classify(const char *mt, const char *body, size_t len);

/* The result text for a fetched response, at most max bytes of valid UTF-8 (max at least
 * BROKERD_FETCH_HEAD_MAX + 256): the head, then the body when it is text, cut at a
 * character boundary to what fits (the head says so), or the sentence saying why it is
 * not shown. Newly allocated; *content says which case it was. */
char *brokerd_fetch_result_text(const struct rts_fetch_result *res, size_t max, enum brokerd_fetch_content *content);

#endif
