/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <strings.h>

#include "brokerd/brokerd.h"
#include "brokerd/fetch.h"
#include "brokerd/keys.h"
#include "common/json.h"
#include "common/jspec.h"
#include "common/log.h"
#include "common/tools.h"
#include "common/util.h"

_Static_assert(BROKERD_FETCH_HEAD_MAX + 256u <= RTS_UPSTREAM_ANSWER_MAX,
	       "a fetch result's head must leave room for text within the tool result bound");

/* ---- what the model reads (pure functions) ---- */

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

void brokerd_fetch_media_type(const char *ct, char *out, size_t outlen)
{
	out[0] = '\0';
	if (!ct)
		return;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	size_t n = 0, slashes = 0, slash = 0;
	while (is_tchar(ct[n]) || ct[n] == '/') {
		if (ct[n] == '/') {
			slashes++;
			slash = n;
		}
		n++;
	}
	const char *rest = ct + n;
	while (*rest == ' ' || *rest == '\t')
		rest++;
	/* type "/" subtype, both non-empty, then the end or parameters. */
	if (slashes != 1 || slash == 0 || slash + 1 == n || n + 1 > outlen || (*rest && *rest != ';'))
		return;
	for (size_t i = 0; i < n; i++)
		out[i] = (ct[i] >= 'A' && ct[i] <= 'Z') ? (char)(ct[i] - 'A' + 'a') : ct[i];
	out[n] = '\0';
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Media types whose bytes are text a model can read. */
static bool textual(const char *mt)
{
	static const char *const app[] = {
		"json",	      "xml",	 "javascript", "ecmascript", "x-javascript", "yaml", "x-yaml", "toml",
		"csv",	      "x-ndjson", "ndjson",	"sql",	      "graphql",     "x-sh", "x-www-form-urlencoded",
	};
	if (mt[0] == '\0' || strncmp(mt, "text/", 5) == 0)
		return true;
	const char *sub = strchr(mt, '/') + 1;
	if (ends_with(sub, "+json") || ends_with(sub, "+xml") || ends_with(sub, "+yaml"))
		return true;
	if (strncmp(mt, "application/", 12) != 0)
		return false;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(app); i++)
		if (strcmp(sub, app[i]) == 0)
			return true;
	return false;
}

enum brokerd_fetch_content brokerd_fetch_classify(const char *mt, const char *body, size_t len)
{
	if (!textual(mt))
		return BROKERD_FETCH_BINARY;
	/* rts_utf8_valid() also refuses NUL: a "\u0000" in a tool result would make the
	 * worker's next /model body one brokerd refuses. */
	return rts_utf8_valid(body, len) ? BROKERD_FETCH_TEXT : BROKERD_FETCH_NOT_UTF8;
}

/* The length of the longest prefix of s (len bytes of valid UTF-8) that is at most max
 * bytes and ends at a character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	size_t n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

char *brokerd_fetch_result_text(const struct rts_fetch_result *res, size_t max, enum brokerd_fetch_content *content)
{
	char mt[128];
	brokerd_fetch_media_type(res->content_type, mt, sizeof(mt));
	*content = brokerd_fetch_classify(mt, res->body, res->len);
	/* The final URL is printable ASCII (rts_url_parse() accepts nothing else and libcurl
	 * percent-encodes what it adds); the bound is a second guard. */
	const char *url = res->final_url ? res->final_url : "";
	int url_len = (int)strnlen(url, 3u * RTS_URL_MAX);
	cleanup_free char *head =
		rts_xasprintf("HTTP status: %ld\nURL: %.*s\nContent-Type: %s\nLength: %zu bytes", res->status, url_len, url,
			      mt[0] ? mt : "(none given)", res->len);
	const char *why = NULL;
	if (*content == BROKERD_FETCH_BINARY)
		why = "Not shown: this is binary content, not text; " RTS_FETCH_TOOL_NAME " returns text only.";
	else if (*content == BROKERD_FETCH_NOT_UTF8)
		why = "Not shown: this content is not UTF-8 text (or it holds NUL bytes); " RTS_FETCH_TOOL_NAME
		      " returns UTF-8 text only.";
	if (why)
		return rts_xasprintf("%s\n\n%s", head, why);

	/* head, the note when the body is cut, "\n\n", the body. */
	char note[128];
	size_t room = max - strlen(head) - 2;
	size_t keep = utf8_cut(res->body, res->len, room);
	note[0] = '\0';
	if (keep < res->len) {
		snprintf(note, sizeof(note), " (cut: the first %zu bytes follow)", room);
		keep = utf8_cut(res->body, res->len, room - strlen(note));
		snprintf(note, sizeof(note), " (cut: the first %zu bytes follow)", keep);
	}
	return rts_xasprintf("%s%s\n\n%.*s", head, note, (int)keep, res->body);
}

/* ---- the route ---- */

struct fetch_args {
	const char *url;
};
/* Exactly the parameters the tool declares (common/tools.c). The URL's own rules are the
 * fetch's: a long or odd one gets its "refused: ..." text, not a bare bad_request. */
static const struct rts_jspec args_spec = {
	.fields = (const struct rts_jfield[]){
		{.key = "url", .types = RTS_JT_STRING, .flags = RTS_JF_REQUIRED, .min = 1, .store = RTS_JS_STR,
		 .at = offsetof(struct fetch_args, url)},
		{0},
	},
};
static const struct rts_jfield args_root = RTS_JSPEC_ROOT(&args_spec);

static bool cancel_pred(void *arg)
{
	return brokerd_cancel_closing(arg);
}

/* {"result": text}, or BROKERD_UPSTREAM_ERROR when the answer reflects a credential of the
 * turn. raw (len bytes, may be NULL) is the whole body, checked too even where the text
 * shows only part of it or none. */
static enum brokerd_result answer_with(struct brokerd_call *call, const char *text, const char *raw, size_t len,
				       uint64_t took, char **answer)
{
	const struct brokerd_binding *b = call->binding;
	/* A JSON document is also checked string by string after decoding, as a host tool's
	 * output is, up to the same size: a larger body is cut in the answer, so no whole
	 * document of it reaches the model, and a tree of up to 32 MiB of JSON would cost
	 * many times that in memory. The text scan covers every body whole. */
	cleanup_json json_object *decoded = NULL;
	const char *ignored = NULL;
	if (raw && len <= RTS_UPSTREAM_ANSWER_MAX && rts_json_parse(raw, len, RTS_JSON_DEPTH_MAX, &decoded, &ignored) < 0)
		decoded = NULL;
	if (brokerd_keyring_reflected(call->keys, text, strlen(text), NULL) ||
	    (raw && brokerd_keyring_reflected(call->keys, raw, len, decoded))) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took,
			     RTS_FETCH_TOOL_NAME " answer refused: it reflects a credential");
		return BROKERD_UPSTREAM_ERROR;
	}
	cleanup_json json_object *o = json_object_new_object();
	json_object_object_add(o, "result", json_object_new_string(text));
	*answer = rts_json_dump(o);
	return BROKERD_OK;
}

enum brokerd_result brokerd_fetch_handle(struct brokerd_call *call, char **answer)
{
	const struct brokerd_binding *b = call->binding;
	const struct rts_fetch_conf *fc = &call->cfg->fetch;
	if (!fc->enabled)
		return BROKERD_NOT_FOUND; /* the route is only matched when enabled */

	const char *why = NULL;
	cleanup_json json_object *body = NULL;
	struct fetch_args args = {0};
	struct rts_jerr e;
	if (brokerd_body_parse(call->body, call->body_len, &body, &why) < 0) {
		log_debug("turn %s: /tools/fetch body refused: %s", b->turn_id, why);
		return BROKERD_BAD_REQUEST;
	}
	if (rts_jspec_validate(body, &args_root, &args, 0, &e) < 0) {
		log_debug("turn %s: /tools/fetch body refused: %s %s", b->turn_id, e.path, e.text);
		return BROKERD_BAD_REQUEST;
	}

	/* Before anything is fetched: the answer is checked against every credential of the
	 * turn, the model key included even when no model call came first. */
	enum brokerd_result primed = brokerd_keyring_prime_call(call);
	if (primed != BROKERD_OK)
		return primed;

	/* The call's deadline (the request deadline and the turn's) bounds the fetch as well
	 * as the configured timeout; BROKER_CLOSE (wake_fd, closing) and the worker hanging up
	 * abort it. */
	struct rts_fetch_opts opts = RTS_FETCH_OPTS_DEFAULT;
	opts.timeout_ms = fc->timeout_ms;
	opts.max_redirects = fc->max_redirects;
	opts.max_bytes = fc->max_bytes;
	opts.cancel = (struct rts_cancel){
		.deadline_ms = call->cancel.deadline_ms,
		.wake_fd = call->cancel.wake_fd,
		.hangup_fd = call->cancel.has_client ? call->cancel.client_fd : -1,
		.cancelled = cancel_pred,
		.arg = &call->cancel,
	};
	struct rts_fetch_result res;
	uint64_t started = rts_now_ms();
	int r = rts_fetch(args.url, strlen(args.url), &opts, &res, &why);
	uint64_t took = rts_now_ms() - started;

	if (r == 0) {
		enum brokerd_fetch_content content;
		cleanup_free char *text = brokerd_fetch_result_text(&res, RTS_UPSTREAM_ANSWER_MAX, &content);
		enum brokerd_result out = answer_with(call, text, res.body, res.len, took, answer);
		if (out == BROKERD_OK)
			rts_log_turn(LOG_INFO, b->turn_id, b->channel_hash, "ok", took,
				     RTS_FETCH_TOOL_NAME ": status %ld, %zu bytes after %u redirects, %s", res.status,
				     res.len, res.redirects,
				     content == BROKERD_FETCH_TEXT	 ? "text"
				     : content == BROKERD_FETCH_BINARY ? "binary, not shown"
									 : "not UTF-8, not shown");
		rts_fetch_result_release(&res);
		return out;
	}
	if (r == -ECANCELED)
		return BROKERD_UNAVAILABLE;
	if (r == -ETIMEDOUT && rts_now_ms() >= call->cancel.deadline_ms) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_timeout", took,
			     RTS_FETCH_TOOL_NAME " stopped at the call's deadline");
		return BROKERD_UPSTREAM_TIMEOUT;
	}
	if (r == -EINVAL || r == -ENOMEM) {
		/* Options out of range (the config checked them) or no transfer at all. */
		log_error_errno(r, "turn %s: " RTS_FETCH_TOOL_NAME ": %s", b->turn_id, why);
		return BROKERD_UPSTREAM_ERROR;
	}
	/* The library's reasons are static sentences that never hold an address, a header or
	 * upstream bytes (common/fetch.h), so the model may read them; the limits are the
	 * operator's. */
	cleanup_free char *text = NULL;
	if (r == -EACCES)
		text = rts_xasprintf("refused: %s", why);
	else if (r == -ETIMEDOUT)
		text = rts_xasprintf("fetch failed: %s (the limit is %" PRIu32 " ms)", why, fc->timeout_ms);
	else if (r == -EFBIG)
		text = rts_xasprintf("fetch failed: %s (%" PRIu32 " bytes)", why, fc->max_bytes);
	else if (r == -ELOOP)
		text = rts_xasprintf("fetch failed: %s (at most %" PRIu32 " are followed)", why, fc->max_redirects);
	else
		text = rts_xasprintf("fetch failed: %s", why);
	rts_log_turn(LOG_INFO, b->turn_id, b->channel_hash, r == -EACCES ? "refused" : "failed", took,
		     RTS_FETCH_TOOL_NAME ": %s", why);
	return answer_with(call, text, NULL, 0, took, answer);
}
