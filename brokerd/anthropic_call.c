/* SPDX-License-Identifier: Apache-2.0 */
/* One call on a rich channel's Anthropic routes: the request rebuilt (anthropic.h), the
 * OAuth token read for the bound channel and speaker, the upstream transfer, and the answer
 * rebuilt or streamed through to the worker.
 *
 * Streaming with backpressure: the answer's events reach the worker as they come. The
 * transfer runs in the connection's own thread, and only while libmicrohttpd asks for more
 * of the answer, which it does when the worker's socket takes more: a worker that stops
 * reading stops the pumping, and the upstream's TCP window closes behind it. Within one
 * pump, libcurl's write callback pauses the transfer (CURL_WRITEFUNC_PAUSE) once
 * BROKERD_RICH_STREAM_HIGH bytes wait for the worker, and the transfer resumes when they
 * have been taken. What the upstream sends passes brokerd/sse_stream.h (whole events) and the
 * stream filter (anthropic.h: the Messages API's events only, rebuilt, reflection
 * checked across events and held back by the filter's window).
 *
 * Bounds: the turn deadline for the whole call, the silence limit (no answer byte for the
 * worker: the upstream is silent or the head never comes), RTS_RICH_UPSTREAM_ANSWER_MAX
 * upstream bytes, BROKERD_RICH_SSE_EVENT_MAX per event. */
#include "config.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <strings.h>

#include "brokerd/anthropic.h"
#include "brokerd/audit.h"
#include "brokerd/keys.h"
#include "brokerd/rich.h"
#include "brokerd/sse_stream.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/log.h"
#include "common/strictjson.h"
#include "common/util.h"

#define ERROR_BODY_KEEP (64u * 1024u) /* of a non-2xx answer, for the log line */
#define ERROR_LOG_CHARS 2000u	      /* seed: the error body cut to 2,000 characters */
#define CONNECT_TIMEOUT_MS 30000u

struct rich_stream {
	struct rich_channel *ch;
	struct rich_turn *t;	/* held (a user, and one in-flight slot) until the stream is freed */
	struct rich_conn *c;	/* NULL once the connection is gone (under ch->lock) */
	bool count_tokens, want_stream;
	CURLM *m;
	CURL *e;
	struct curl_slist *headers;
	char *body;		/* the upstream request */
	struct brokerd_cancel cancel;
	uint64_t started_ms, first_event_ms;
	uint64_t sent_ms;	/* the transfer started (after the token was read) */

	long status;
	bool head_done, head_seen, sse;
	char content_type[128];
	char *buf;		/* a body that is not streamed (bounded) */
	size_t buf_len, buf_cap, buf_keep;
	size_t received;	/* upstream body bytes */
	bool overflow;
	struct brokerd_sse splitter;
	struct brokerd_stream_filter *filter; /* a streamed call's only (want_stream) */
	int filter_err;
	unsigned events;
	bool paused, done, finished, ended_with_error;
	CURLcode result;
	bool metered; /* its upstream latency is in the metrics */
	/* The call's audit entry, written when the stream ends (brokerd/audit.h). */
	char turn_id[RTS_TURN_ID_LEN + 1];
	unsigned call_no;
	uint64_t accepted_ms;
	bool count_route;
	const char *fail_rule;	 /* why the stream failed, or NULL */
	enum brokerd_result fail_result;
};

/* The upstream request in the metrics, once: how long until its whole answer (or its
 * failure), whether it ran on a kept connection. */
static void meter(struct rich_stream *s, bool answered)
{
	if (s->metered || !s->e || !s->sent_ms)
		return;
	s->metered = true;
	long connects = 0;
	curl_easy_getinfo(s->e, CURLINFO_NUM_CONNECTS, &connects);
	brokerd_metrics_upstream("anthropic", (rts_now_ms() - s->sent_ms) * 1000u, connects == 0, answered);
}

/* Whether the request left for the upstream (its head was sent). */
static bool sent(struct rich_stream *s)
{
	long n = 0;
	return s->e && curl_easy_getinfo(s->e, CURLINFO_REQUEST_SIZE, &n) == CURLE_OK && n > 0;
}

static void wipe_headers(struct curl_slist *l)
{
	for (struct curl_slist *p = l; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

static void stream_cleanup(struct rich_stream *s)
{
	if (s->m && s->e)
		curl_multi_remove_handle(s->m, s->e);
	if (s->e)
		curl_easy_cleanup(s->e);
	brokerd_upstream_multi_give(s->m);
	wipe_headers(s->headers);
	free(s->body);
	free(s->buf);
	brokerd_sse_release(&s->splitter);
	brokerd_stream_filter_free(s->filter);
}

/* Give the turn back (its slot and its use). ch->lock held. */
static void stream_release_locked(struct rich_stream *s)
{
	if (!s->t)
		return;
	if (s->t->in_flight > 0)
		s->t->in_flight--;
	brokerd_rich_turn_unuse_locked(s->ch, s->t);
	s->t = NULL;
}

/* ---- libcurl callbacks ---- */

static int on_event(const char *name, const char *data, size_t len, void *arg)
{
	struct rich_stream *s = arg;
	if (!s->first_event_ms)
		s->first_event_ms = rts_now_ms();
	s->events++;
	return brokerd_stream_filter_event(s->filter, name, data, len);
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct rich_stream *s = arg;
	size_t len = size * n;
	if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
		long code = 0;
		curl_easy_getinfo(s->e, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200) { /* a 1xx is followed by the real head */
			s->status = code;
			s->head_done = true;
			char *ct = NULL;
			if (curl_easy_getinfo(s->e, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
				snprintf(s->content_type, sizeof(s->content_type), "%s", ct);
			s->sse = s->want_stream && code >= 200 && code < 300 &&
				 strncasecmp(s->content_type, "text/event-stream", 17) == 0;
			s->buf_keep = code >= 200 && code < 300 ? RTS_RICH_UPSTREAM_ANSWER_MAX : ERROR_BODY_KEEP;
		}
	}
	return len;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct rich_stream *s = arg;
	size_t n = size * nmemb;
	if (s->sse) {
		size_t waiting = 0;
		brokerd_stream_filter_out(s->filter, &waiting);
		if (waiting >= BROKERD_RICH_STREAM_HIGH) {
			s->paused = true;
			return CURL_WRITEFUNC_PAUSE;
		}
	}
	if (n > RTS_RICH_UPSTREAM_ANSWER_MAX - s->received) {
		s->overflow = true;
		return 0; /* ends the transfer with CURLE_WRITE_ERROR */
	}
	s->received += n;
	if (s->sse) {
		int r = brokerd_sse_feed(&s->splitter, data, n, on_event, s);
		if (r < 0) {
			s->filter_err = r;
			return 0;
		}
		return n;
	}
	size_t keep = s->buf_len < s->buf_keep ? s->buf_keep - s->buf_len : 0;
	if (keep > n)
		keep = n;
	if (keep) {
		if (s->buf_len + keep + 1 > s->buf_cap) {
			size_t cap = s->buf_cap ? s->buf_cap : 16384;
			while (cap < s->buf_len + keep + 1)
				cap *= 2;
			s->buf = rts_xrealloc(s->buf, cap);
			s->buf_cap = cap;
		}
		memcpy(s->buf + s->buf_len, data, keep);
		s->buf_len += keep;
		s->buf[s->buf_len] = '\0';
	}
	return n;
}

/* Bytes that wait for the worker, or a state to act on: then the pump does not wait. */
static bool something_to_do(struct rich_stream *s)
{
	size_t n = 0;
	if (s->filter)
		brokerd_stream_filter_out(s->filter, &n);
	return n > 0 || s->paused || s->done || s->head_done != s->head_seen;
}

/* One round of the transfer: perform, then, unless that gave something to act on, wait (at
 * most max_ms) for its sockets, the turn's wake-up or the worker hanging up. Returns 0,
 * -ECANCELED (the turn settled or the worker's connection is gone) or -ETIMEDOUT (the turn
 * deadline). */
static int pump_once(struct rich_stream *s, int max_ms)
{
	int running = 0;
	if (curl_multi_perform(s->m, &running) != CURLM_OK) {
		s->done = true;
		s->result = CURLE_RECV_ERROR;
		return 0;
	}
	if (!running) {
		int q;
		CURLMsg *msg = curl_multi_info_read(s->m, &q);
		s->done = true;
		s->result = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_RECV_ERROR;
		return 0;
	}
	if (something_to_do(s)) {
		s->head_seen = s->head_done;
		return 0;
	}
	if (brokerd_cancel_closing(&s->cancel))
		return -ECANCELED;
	uint64_t now = rts_now_ms();
	if (now >= s->cancel.deadline_ms)
		return -ETIMEDOUT;
	struct curl_waitfd wf[2];
	unsigned nwf = 0;
	wf[nwf++] = (struct curl_waitfd){.fd = s->cancel.wake_fd, .events = CURL_WAIT_POLLIN};
	if (s->cancel.has_client)
		wf[nwf++] = (struct curl_waitfd){.fd = s->cancel.client_fd, .events = 0};
	uint64_t wait = s->cancel.deadline_ms - now;
	if (wait > (uint64_t)max_ms)
		wait = (uint64_t)max_ms;
	if (curl_multi_poll(s->m, wf, nwf, (int)wait, NULL) != CURLM_OK) {
		s->done = true;
		s->result = CURLE_RECV_ERROR;
	}
	return 0;
}

/* The silence limit: nothing written to the worker for that long (its connection's last
 * byte either way, which the body's end or the last streamed piece set). */
static bool silent(struct rich_stream *s)
{
	return s->c && rts_now_ms() - __atomic_load_n(&s->c->last_io_ms, __ATOMIC_RELAXED) >= BROKERD_RICH_SILENCE_MS;
}

/* ---- log lines ---- */

/* Seed, "Host options and hooks": upstream failures with channel, status, latency and the
 * error body cut to 2,000 characters with credentials masked. */
static void log_upstream_failure(struct rich_stream *s, struct rich_turn *t, const char *what, const char *body,
				 size_t len)
{
	uint64_t took = rts_now_ms() - s->started_ms;
	cleanup_free char *masked = body && len ? brokerd_keyring_mask(t->keys, body, len, ERROR_LOG_CHARS) : NULL;
	rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "upstream_error", took,
		     "anthropic upstream failure: channel %.12s, status %ld, %" PRIu64 " ms: %s%s%s", t->b.channel_hash,
		     s->status, took, what, masked ? "; body: " : "", masked ? masked : "");
}

static const char *transport_why(struct rich_stream *s)
{
	if (s->overflow)
		return "answer larger than 50 MiB";
	if (s->result == CURLE_OPERATION_TIMEDOUT)
		return "timed out";
	log_debug("anthropic upstream transfer: %s", curl_easy_strerror(s->result));
	return "transport error";
}

/* ---- the streamed answer (libmicrohttpd's content reader) ---- */

/* The stream cannot go on: log why, drop what is held and end with an error event. */
static void stream_fail(struct rich_stream *s, const char *what, const char *rule, enum brokerd_result r)
{
	struct rich_turn *t = s->t;
	if (!s->fail_rule) {
		s->fail_rule = rule;
		s->fail_result = r;
	}
	if (t) {
		if (s->filter_err == BROKERD_STREAM_REFLECTED)
			rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "upstream_error",
				     rts_now_ms() - s->started_ms,
				     "anthropic answer refused: it reflects a credential of the turn (stream cut after "
				     "%u events; what held the key never reached the worker)",
				     s->events);
		else
			log_upstream_failure(s, t, what, NULL, 0);
	}
	brokerd_stream_filter_fail(s->filter);
	s->finished = true;
}

static const char *filter_rule(int err)
{
	switch (err) {
	case BROKERD_STREAM_REFLECTED:
		return "credential_reflected";
	case BROKERD_STREAM_UPSTREAM_ERROR:
		return "upstream_error_event";
	case -EFBIG:
		return "upstream_event_too_large";
	default:
		return "upstream_event";
	}
}

static const char *transport_rule(const struct rich_stream *s)
{
	return s->overflow ? "upstream_answer_too_large"
	       : s->result == CURLE_OPERATION_TIMEDOUT ? "upstream_timeout"
						       : "upstream_transport";
}

static const char *filter_why(int err)
{
	switch (err) {
	case BROKERD_STREAM_REFLECTED:
		return "the answer reflects a credential";
	case BROKERD_STREAM_UPSTREAM_ERROR:
		return "error event in the stream";
	case -EFBIG:
		return "an event larger than the limit";
	default:
		return "an event the Messages API does not send";
	}
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct rich_stream *s = cls;
	for (;;) {
		size_t n = 0;
		const char *out = brokerd_stream_filter_out(s->filter, &n);
		if (n > 0) {
			size_t k = n < max ? n : max;
			memcpy(buf, out, k);
			brokerd_stream_filter_take(s->filter, k);
			if (s->c)
				rich_conn_touch(s->c);
			return (ssize_t)k;
		}
		if (s->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (s->ended_with_error)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (s->paused) {
			/* Everything waiting was taken: go on. The write callback may run (and pause
			 * again) inside curl_easy_pause(). */
			s->paused = false;
			curl_easy_pause(s->e, CURLPAUSE_CONT);
			continue;
		}
		if (s->done) {
			if (s->filter_err) {
				stream_fail(s, filter_why(s->filter_err), filter_rule(s->filter_err),
					    BROKERD_UPSTREAM_ERROR);
			} else if (s->result != CURLE_OK) {
				stream_fail(s, transport_why(s), transport_rule(s),
					    s->result == CURLE_OPERATION_TIMEDOUT ? BROKERD_UPSTREAM_TIMEOUT
										  : BROKERD_UPSTREAM_ERROR);
			} else {
				int end = brokerd_stream_filter_end(s->filter);
				if (end < 0) {
					s->filter_err = end;
					stream_fail(s, filter_why(end), filter_rule(end), BROKERD_UPSTREAM_ERROR);
					continue;
				}
				if (!brokerd_stream_filter_stopped(s->filter) && s->t)
					rts_log_turn(LOG_WARNING, s->t->b.turn_id, s->t->b.channel_hash, "upstream_error",
						     rts_now_ms() - s->started_ms,
						     "anthropic stream ended without message_stop (%u events)", s->events);
				s->finished = true;
			}
			continue;
		}
		if (silent(s)) {
			stream_fail(s, "the stream was silent for the silence limit", "upstream_silence",
				    BROKERD_UPSTREAM_TIMEOUT);
			continue;
		}
		int r = pump_once(s, 1000);
		if (r == -ECANCELED) {
			/* The turn settled or the worker left: nothing to tell anyone. */
			s->ended_with_error = true;
		} else if (r == -ETIMEDOUT) {
			stream_fail(s, "the turn deadline passed", "turn_deadline", BROKERD_UPSTREAM_TIMEOUT);
		}
	}
}

void brokerd_rich_stream_detach_locked(void *stream)
{
	struct rich_stream *s = stream;
	s->c = NULL;
}

static void stream_free(void *cls)
{
	struct rich_stream *s = cls;
	struct rich_channel *ch = s->ch;
	meter(s, s->finished && !s->fail_rule);
	/* Allowed when the whole stream reached the worker; a failed one is refused by what
	 * failed it; one that ended unfinished (turn settled, worker gone) was closed. */
	enum brokerd_result r = s->fail_rule ? s->fail_result : s->finished ? BROKERD_OK : BROKERD_RESULT_MAX_;
	const char *rule = s->fail_rule	     ? s->fail_rule
			   : s->finished      ? NULL
			   : s->ended_with_error ? "turn_closing"
						 : "connection_cut";
	brokerd_rich_audit(ch, s->turn_id, s->call_no, true, s->count_route ? RICH_ROUTE_COUNT_TOKENS : RICH_ROUTE_MESSAGES,
			   rule, r, true, s->accepted_ms);
	if (s->t) {
		uint64_t took = rts_now_ms() - s->started_ms;
		rts_log_turn(LOG_DEBUG, s->t->b.turn_id, ch->hash, s->finished ? "ok" : "closed", took,
			     "rich call route anthropic streamed %u events (first after %" PRIu64 " ms)", s->events,
			     s->first_event_ms ? s->first_event_ms - s->started_ms : 0);
	}
	pthread_mutex_lock(&ch->lock);
	if (s->c)
		s->c->stream = NULL;
	stream_release_locked(s);
	pthread_mutex_unlock(&ch->lock);
	stream_cleanup(s);
	free(s);
}

/* ---- the call ---- */

static void refuse(struct rich_answer *a, enum brokerd_result r)
{
	brokerd_rich_answer_error(a, r);
}

/* The upstream request's headers, from scratch: the worker's anthropic-version and its
 * allow-listed betas, the credential, the OAuth beta for an OAuth token. */
static struct curl_slist *build_headers(const struct rich_headers *h, const char *token, bool want_stream)
{
	struct curl_slist *l = NULL;
	l = curl_slist_append(l, "Content-Type: application/json");
	l = curl_slist_append(l, want_stream ? "Accept: text/event-stream" : "Accept: application/json");
	char line[256];
	snprintf(line, sizeof(line), "anthropic-version: %s", h->version[0] ? h->version : "2023-06-01");
	l = curl_slist_append(l, line);
	bool oauth = false;
	char *auth = brokerd_anthropic_auth_header(token, &oauth);
	l = curl_slist_append(l, auth);
	explicit_bzero(auth, strlen(auth));
	free(auth);
	char betas[BROKERD_RICH_BETAS_MAX * 64 + 64] = "";
	size_t at = 0;
	bool has_oauth = false;
	for (size_t i = 0; i < h->n_betas; i++) {
		has_oauth = has_oauth || strcmp(h->betas[i], "oauth-2025-04-20") == 0;
		at += (size_t)snprintf(betas + at, sizeof(betas) - at, "%s%s", at ? "," : "", h->betas[i]);
	}
	if (oauth && !has_oauth)
		at += (size_t)snprintf(betas + at, sizeof(betas) - at, "%s%s", at ? "," : "", "oauth-2025-04-20");
	if (at) {
		char *b = rts_xasprintf("anthropic-beta: %s", betas);
		l = curl_slist_append(l, b);
		free(b);
	}
	/* No 100-continue round trip. */
	l = curl_slist_append(l, "Expect:");
	if (!l)
		abort();
	return l;
}

static int start_transfer(struct rich_stream *s, const char *url, const char *ca_file)
{
	s->e = curl_easy_init();
	s->m = brokerd_upstream_multi_take();
	if (!s->e || !s->m)
		return -ENOMEM;
	if (brokerd_upstream_setopt_common(s->e, url, ca_file, false, s->body, strlen(s->body)) < 0)
		return -EPROTO;
	uint64_t now = rts_now_ms();
	long left = s->cancel.deadline_ms > now ? (long)(s->cancel.deadline_ms - now) : 1;
	CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                                                  \
	do {                                                                                                           \
		if (c == CURLE_OK)                                                                                     \
			c = curl_easy_setopt(s->e, opt, val);                                                          \
	} while (0)
	SET(CURLOPT_HTTPHEADER, s->headers);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, s);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, s);
	/* The turn deadline is the hard bound of the call (seed). */
	SET(CURLOPT_TIMEOUT_MS, left);
	SET(CURLOPT_BUFFERSIZE, 64L * 1024L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, left < (long)CONNECT_TIMEOUT_MS ? left : (long)CONNECT_TIMEOUT_MS);
#undef SET
	if (c != CURLE_OK)
		return -EPROTO;
	if (curl_multi_add_handle(s->m, s->e) != CURLM_OK)
		return -EPROTO;
	s->sent_ms = rts_now_ms();
	return 0;
}

/* Pump until the head is in (or the whole answer, with whole), the turn ends, or silence.
 * Returns 0, or the refusal for the worker (and logs it). */
static enum brokerd_result pump_until(struct rich_stream *s, bool whole, const char **rule)
{
	for (;;) {
		if (s->done || (!whole && s->head_done))
			return BROKERD_OK;
		if (silent(s)) {
			log_upstream_failure(s, s->t, whole ? "the answer stopped for the silence limit"
							   : "no answer head within the silence limit",
					     NULL, 0);
			*rule = "upstream_silence";
			return BROKERD_UPSTREAM_TIMEOUT;
		}
		int r = pump_once(s, 1000);
		if (r == -ECANCELED) {
			*rule = "turn_closing";
			return BROKERD_UNAVAILABLE;
		}
		if (r == -ETIMEDOUT) {
			log_upstream_failure(s, s->t, "the turn deadline passed", NULL, 0);
			*rule = "turn_deadline";
			return BROKERD_UPSTREAM_TIMEOUT;
		}
	}
}

/* A whole, non-streamed answer: rebuilt for the worker, or an error. Returns the rule that
 * decided (static; NULL: the route's allow rule). */
static const char *finish_whole(struct rich_stream *s, struct rich_answer *a)
{
	struct rich_turn *t = s->t;
	if (s->result != CURLE_OK) {
		log_upstream_failure(s, t, transport_why(s), NULL, 0);
		refuse(a, s->result == CURLE_OPERATION_TIMEDOUT ? BROKERD_UPSTREAM_TIMEOUT : BROKERD_UPSTREAM_ERROR);
		return transport_rule(s);
	}
	if (s->status < 200 || s->status > 299) {
		log_upstream_failure(s, t, "error status", s->buf, s->buf_len);
		unsigned status;
		a->body = brokerd_anthropic_error_answer(s->status, s->buf, s->buf_len, &status);
		a->status = status;
		a->result = BROKERD_UPSTREAM_ERROR;
		a->len = strlen(a->body);
		a->content_type = "application/json";
		return "upstream_status";
	}
	if (s->want_stream) {
		log_upstream_failure(s, t, "the answer is not an event stream", NULL, 0);
		refuse(a, BROKERD_UPSTREAM_ERROR);
		return "upstream_content_type";
	}
	cleanup_json json_object *doc = NULL;
	const char *why = NULL;
	if (!brokerd_content_type_is_json(s->content_type) ||
	    rts_json_parse(s->buf ? s->buf : "", s->buf_len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0) {
		log_upstream_failure(s, t, "the answer is not JSON", NULL, 0);
		refuse(a, BROKERD_UPSTREAM_ERROR);
		return "upstream_answer_json";
	}
	bool reflected = brokerd_keyring_reflected(t->keys, s->buf, s->buf_len, doc);
	char *text = reflected ? NULL : brokerd_anthropic_answer_rebuild(doc, s->count_tokens, t->keys, &reflected);
	if (reflected) {
		rts_log_turn(LOG_WARNING, t->b.turn_id, t->b.channel_hash, "upstream_error", rts_now_ms() - s->started_ms,
			     "anthropic answer refused: it reflects a credential of the turn");
		refuse(a, BROKERD_UPSTREAM_ERROR);
		return "credential_reflected";
	}
	if (!text) {
		log_upstream_failure(s, t, "the answer is not a Messages API answer", NULL, 0);
		refuse(a, BROKERD_UPSTREAM_ERROR);
		return "upstream_answer_shape";
	}
	a->status = 200;
	a->body = text;
	a->len = strlen(text);
	a->content_type = "application/json";
	return NULL;
}

static bool queue_stream(struct rich_stream *s, struct MHD_Connection *mc)
{
	struct MHD_Response *resp =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read, s, stream_free);
	if (!resp)
		return false;
	if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8") != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES ||
	    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES) {
		/* Destroying it frees s through stream_free. */
		MHD_destroy_response(resp);
		return true;
	}
	MHD_queue_response(mc, 200, resp);
	MHD_destroy_response(resp);
	return true;
}

bool brokerd_rich_anthropic(struct rich_conn *c, struct MHD_Connection *mc, struct rich_answer *a)
{
	struct rich_channel *ch = c->ch;
	struct rich_turn *t = c->turn;
	const struct rts_config *cfg = ch->cfg;
	bool count_tokens = c->route.kind == RICH_ROUTE_COUNT_TOKENS;

	const char *why = NULL, *rule = NULL;
	cleanup_json json_object *req = NULL;
	if (brokerd_body_parse(c->body, c->body_len, &req, &why) < 0) {
		rts_log_turn(LOG_DEBUG, t->b.turn_id, ch->hash, "refused", 0, "anthropic request refused (shape): %s", why);
		c->rule = "body_json";
		refuse(a, BROKERD_BAD_REQUEST);
		return false;
	}
	pthread_mutex_lock(&ch->lock);
	enum rts_effort level = t->effort;
	pthread_mutex_unlock(&ch->lock);
	struct brokerd_anthropic_policy policy = {
		.count_tokens = count_tokens,
		.model = ch->profile->model,
		.max_output_tokens = cfg->rich.max_output_tokens,
		.judged = level,
	};
	struct brokerd_anthropic_rebuilt rb;
	if (brokerd_anthropic_request_build(req, &policy, &rb, &why, &rule) < 0) {
		rts_log_turn(LOG_DEBUG, t->b.turn_id, ch->hash, "refused", 0, "anthropic request refused (%s): %s", rule,
			     why);
		c->rule = !rule || strcmp(rule, "shape") == 0 ? "anthropic_request" : rule;
		refuse(a, BROKERD_BAD_REQUEST);
		return false;
	}
	if (rb.effort_capped || rb.budget_capped || rb.effort_added)
		rts_log_turn(LOG_DEBUG, t->b.turn_id, ch->hash, "capped", 0,
			     "anthropic request kept at the judged effort %s (%s%s%s)", rts_effort_name(level),
			     rb.effort_capped ? "effort capped;" : "", rb.budget_capped ? " thinking budget capped;" : "",
			     rb.effort_added ? " effort added to adaptive thinking" : "");

	struct rich_stream *s = rts_xcalloc(1, sizeof(*s));
	s->ch = ch;
	s->c = c;
	s->count_tokens = count_tokens;
	s->want_stream = rb.stream;
	s->started_ms = rts_now_ms();
	s->cancel = (struct brokerd_cancel){.wake_fd = t->wake_fd,
					    .closing = &t->closing,
					    .deadline_ms = t->b.deadline_ms,
					    .has_client = c->fd >= 0,
					    .client_fd = c->fd};
	s->body = rts_json_dump(rb.body);
	json_object_put(rb.body);
	brokerd_sse_init(&s->splitter, BROKERD_RICH_SSE_EVENT_MAX);

	/* Seed: the OAuth token is read per call for the bound channel and speaker; none means
	 * the call fails, never a fallback to another credential. */
	char *token = NULL;
	size_t token_len = 0;
	int r = brokerd_key_read(&cfg->rich.oauth_token, &t->b, &s->cancel, &token, &token_len);
	if (r < 0) {
		if (r == -ENOKEY)
			rts_log_turn(LOG_WARNING, t->b.turn_id, ch->hash, "no_key", 0,
				     "no OAuth token from rich.oauthToken for this channel and speaker; call refused");
		c->rule = r == -ECANCELED ? "turn_closing" : "no_credential";
		stream_cleanup(s);
		free(s);
		refuse(a, BROKERD_UNAVAILABLE);
		return false;
	}
	brokerd_keyring_add(t->keys, &cfg->rich.oauth_token, token, token_len);
	/* Only a streamed answer goes through the filter; finish_whole() checks a whole one. */
	if (rb.stream)
		s->filter = brokerd_stream_filter_new(t->keys, brokerd_stream_window(brokerd_keyring_longest(t->keys)));
	s->headers = build_headers(&c->headers, token, rb.stream);
	brokerd_key_free(token, token_len);
	cleanup_free char *url = rts_xasprintf("%s/v1/messages%s%s", cfg->rich.upstream,
					       count_tokens ? "/count_tokens" : "", c->route.beta ? "?beta=true" : "");
	s->t = t; /* for the log lines; the use moves to the stream below */
	if (start_transfer(s, url, cfg->ca_file) < 0) {
		log_warning("turn %s: cannot set up the anthropic upstream transfer", t->b.turn_id);
		c->rule = "server_error";
		s->t = NULL;
		stream_cleanup(s);
		free(s);
		refuse(a, BROKERD_UPSTREAM_ERROR);
		return false;
	}

	rich_conn_reader_watches(c, true);
	const char *rule_why = NULL;
	enum brokerd_result res = pump_until(s, false, &rule_why);
	c->forwarded = sent(s);
	if (res == BROKERD_OK && s->sse) {
		/* The stream writes the call's audit entry when it ends. */
		snprintf(s->turn_id, sizeof(s->turn_id), "%s", c->turn_id);
		s->call_no = c->call_no;
		s->accepted_ms = c->accepted_ms;
		s->count_route = count_tokens;
		c->audited = true;
		/* The stream now holds the turn's slot and use; the connection forgets them. */
		pthread_mutex_lock(&ch->lock);
		c->turn = NULL;
		c->holds_slot = false;
		c->stream = s; /* the sweep's grace now comes from the stream */
		pthread_mutex_unlock(&ch->lock);
		rich_conn_reader_watches(c, false);
		if (!queue_stream(s, mc)) {
			c->audited = false; /* the call's entry is run()'s again */
			c->rule = "server_error";
			pthread_mutex_lock(&ch->lock);
			c->stream = NULL;
			stream_release_locked(s);
			pthread_mutex_unlock(&ch->lock);
			stream_cleanup(s);
			free(s);
			refuse(a, BROKERD_UNAVAILABLE);
			/* The connection's slot went with the stream; nothing left to release. */
			return false;
		}
		return true;
	}
	if (res == BROKERD_OK)
		res = pump_until(s, true, &rule_why);
	rich_conn_reader_watches(c, false);
	c->forwarded = sent(s);
	if (res == BROKERD_OK) {
		c->rule = finish_whole(s, a);
	} else {
		c->rule = rule_why;
		refuse(a, res);
	}
	meter(s, a->result == BROKERD_OK);
	s->t = NULL;
	stream_cleanup(s);
	free(s);
	return false;
}
