/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <strings.h>

#include "brokerd/keys.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

static inline void easy_cleanupp(CURL **e)
{
	if (*e)
		curl_easy_cleanup(*e);
}
#define cleanup_curl _cleanup_(easy_cleanupp)

/* curl_slist_free_all does not wipe; our list carries the real credential. */
static inline void slist_wipe_freep(struct curl_slist **l)
{
	for (struct curl_slist *p = *l; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(*l);
}
#define cleanup_slist _cleanup_(slist_wipe_freep)

/* Multi handles kept between calls, for libcurl's CA store cache: building the store from
 * the system bundle costs about 25 ms of CPU per call with OpenSSL 3 (measured on Debian
 * 12: 25.0 ms with a new multi handle per call, 1.3 ms with a reused one). Only the CA store
 * (and libcurl's DNS cache) outlives a call: every call still opens a fresh TCP connection
 * and TLS session (CURLOPT_FORBID_REUSE, a new easy handle each time). A handle is used by
 * one thread at a time; at most POOL_MAX idle ones are kept. */
#define POOL_MAX 8u
#define CA_CACHE_SECONDS 600L /* a changed CA bundle is picked up within ten minutes */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURLM *pool[POOL_MAX];
static size_t pool_len;

static CURLM *multi_take(void)
{
	CURLM *m = NULL;
	pthread_mutex_lock(&pool_lock);
	if (pool_len > 0)
		m = pool[--pool_len];
	pthread_mutex_unlock(&pool_lock);
	return m ? m : curl_multi_init();
}

static void multi_give(CURLM *m)
{
	pthread_mutex_lock(&pool_lock);
	if (pool_len < POOL_MAX) {
		pool[pool_len++] = m;
		m = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	if (m)
		curl_multi_cleanup(m);
}

void brokerd_upstream_cleanup(void)
{
	pthread_mutex_lock(&pool_lock);
	while (pool_len > 0)
		curl_multi_cleanup(pool[--pool_len]);
	pthread_mutex_unlock(&pool_lock);
}

struct sink {
	char *buf;
	size_t len, cap, max;
	bool overflow;
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;
	if (n > s->max - s->len) {
		s->overflow = true;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 16384;
		while (cap < s->len + n + 1)
			cap *= 2;
		if (cap > s->max + 1)
			cap = s->max + 1;
		s->buf = rts_xrealloc(s->buf, cap);
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	return n;
}

bool brokerd_content_type_is_json(const char *ct)
{
	static const char want[] = "application/json";
	if (!ct || strncasecmp(ct, want, sizeof(want) - 1) != 0)
		return false;
	const char *p = ct + sizeof(want) - 1;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '\0' || *p == ';';
}

void *brokerd_upstream_multi_take(void)
{
	return multi_take();
}

void brokerd_upstream_multi_give(void *multi)
{
	if (multi)
		multi_give(multi);
}

#define SET(opt, val)                                                                                                  \
	do {                                                                                                           \
		if (c == CURLE_OK)                                                                                     \
			c = curl_easy_setopt(e, opt, val);                                                             \
	} while (0)

int brokerd_upstream_setopt_common(void *easy, const char *url, const char *ca_file, bool allow_http,
				   const char *body, size_t body_len)
{
	CURL *e = easy;
	CURLcode c = CURLE_OK;
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PROTOCOLS_STR, allow_http ? "http,https" : "https");
	SET(CURLOPT_REDIR_PROTOCOLS_STR, "https");
	/* A redirect is an answer like any other non-2xx: refused by the caller. */
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	/* "" disables proxies, including the ones named by *_proxy environment variables. */
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	/* No connection outlives its call (see the pool above). */
	SET(CURLOPT_FORBID_REUSE, 1L);
	SET(CURLOPT_CA_CACHE_TIMEOUT, CA_CACHE_SECONDS);
	if (ca_file) {
		/* caFile is trusted instead of the system store, not in addition to it. */
		SET(CURLOPT_CAINFO, ca_file);
		SET(CURLOPT_CAPATH, (char *)NULL);
	}
	SET(CURLOPT_POST, 1L);
	SET(CURLOPT_POSTFIELDS, body);
	SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	return c == CURLE_OK ? 0 : -EPROTO;
}

static int setup(CURL *e, const struct brokerd_upstream_req *req, struct curl_slist *headers, struct sink *sink,
		 long timeout_ms)
{
	if (brokerd_upstream_setopt_common(e, req->url, req->ca_file, req->allow_http, req->body, req->body_len) < 0)
		return -EPROTO;
	CURLcode c = CURLE_OK;
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, sink);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_answer);
	SET(CURLOPT_TIMEOUT_MS, timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
#undef SET
	return c == CURLE_OK ? 0 : -EPROTO;
}

int brokerd_upstream_post(const struct brokerd_upstream_req *req, struct brokerd_upstream_answer *a)
{
	*a = (struct brokerd_upstream_answer){0};
	if (brokerd_cancel_closing(&req->cancel))
		return -ECANCELED;
	uint64_t now = rts_now_ms();
	if (now >= req->cancel.deadline_ms)
		return -ETIMEDOUT;
	uint64_t left = req->cancel.deadline_ms - now;
	uint64_t own = req->timeout_ms ? req->timeout_ms : BROKERD_UPSTREAM_TIMEOUT_MS;
	if (left > own)
		left = own;
	uint64_t deadline = now + left;

	/* Headers from scratch. "Expect:" stops libcurl from adding 100-continue; nothing
	 * else is sent but what libcurl needs for HTTP framing (Host, Content-Length). */
	cleanup_slist struct curl_slist *headers = NULL;
	cleanup_free char *auth = NULL;
	if (req->bearer) {
		auth = rts_xasprintf("Authorization: Bearer %s", req->bearer);
		headers = curl_slist_append(headers, auth);
		explicit_bzero(auth, strlen(auth));
	}
	headers = curl_slist_append(headers, "Content-Type: application/json");
	cleanup_free char *accept = rts_xasprintf("Accept: %s", req->accept ? req->accept : "application/json");
	headers = curl_slist_append(headers, accept);
	headers = curl_slist_append(headers, "Expect:");
	if (!headers)
		abort();

	cleanup_curl CURL *e = curl_easy_init();
	if (!e)
		return -ENOMEM;
	struct sink sink = {.max = req->max_answer};
	int r = setup(e, req, headers, &sink, (long)left);
	if (r < 0) {
		free(sink.buf);
		return r;
	}

	/* The multi interface lets the wait include the turn's wake fd: closing the turn
	 * aborts the transfer at once, not at the next progress tick. */
	CURLM *m = multi_take();
	if (!m) {
		free(sink.buf);
		return -ENOMEM;
	}
	curl_multi_add_handle(m, e);
	CURLcode result = CURLE_OK;
	r = 0;
	for (;;) {
		int running = 0;
		if (curl_multi_perform(m, &running) != CURLM_OK) {
			r = -EPROTO;
			break;
		}
		if (!running) {
			int q;
			CURLMsg *msg = curl_multi_info_read(m, &q);
			result = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_RECV_ERROR;
			break;
		}
		if (brokerd_cancel_closing(&req->cancel)) {
			r = -ECANCELED;
			break;
		}
		now = rts_now_ms();
		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		/* The turn's wake-up, and the caller's connection with no events asked for: poll
		 * still reports its hang-up, which the check above then sees. */
		struct curl_waitfd wf[2];
		unsigned nwf = 0;
		if (req->cancel.wake_fd >= 0)
			wf[nwf++] = (struct curl_waitfd){.fd = req->cancel.wake_fd, .events = CURL_WAIT_POLLIN};
		if (req->cancel.has_client)
			wf[nwf++] = (struct curl_waitfd){.fd = req->cancel.client_fd, .events = 0};
		uint64_t wait = deadline - now;
		if (wait > 1000)
			wait = 1000;
		if (curl_multi_poll(m, nwf ? wf : NULL, nwf, (int)wait, NULL) != CURLM_OK) {
			r = -EPROTO;
			break;
		}
	}
	if (r == 0 && result != CURLE_OK) {
		log_debug("upstream call failed: %s", curl_easy_strerror(result));
		if (result == CURLE_OPERATION_TIMEDOUT)
			r = -ETIMEDOUT;
		else if (sink.overflow || result == CURLE_FILESIZE_EXCEEDED)
			r = -EFBIG;
		else
			r = -EPROTO;
	}
	if (r == 0) {
		char *ct = NULL;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a->status);
		if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
			a->content_type = rts_xstrdup(ct);
		if (!sink.buf)
			sink.buf = rts_xmalloc(1);
		sink.buf[sink.len] = '\0';
		a->body = steal_pointer(&sink.buf);
		a->len = sink.len;
	}
	/* Removing an unfinished transfer closes its connection. */
	curl_multi_remove_handle(m, e);
	multi_give(m);
	free(sink.buf);
	return r;
}

void brokerd_upstream_answer_release(struct brokerd_upstream_answer *a)
{
	free(a->content_type);
	free(a->body);
	*a = (struct brokerd_upstream_answer){0};
}

enum brokerd_result brokerd_upstream_json(struct brokerd_call *call, const char *what,
					  const struct brokerd_upstream_req *req, json_object **out)
{
	const struct brokerd_binding *b = call->binding;
	*out = NULL;
	struct brokerd_upstream_answer a;
	uint64_t started = rts_now_ms();
	/* Which bound this call runs under, as brokerd_upstream_post picks it: its own
	 * upstream deadline unless the request's or the turn's comes first. */
	uint64_t own = req->timeout_ms ? req->timeout_ms : BROKERD_UPSTREAM_TIMEOUT_MS;
	bool upstream_bound = req->cancel.deadline_ms > started && req->cancel.deadline_ms - started > own;
	int r = brokerd_upstream_post(req, &a);
	uint64_t took = rts_now_ms() - started;
	if (r == -ECANCELED)
		return BROKERD_UNAVAILABLE;
	if (r == -ETIMEDOUT) {
		if (upstream_bound)
			rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_timeout", took,
				     "%s upstream timed out: upstream deadline of %u ms", what, (unsigned)own);
		else
			rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_timeout", took,
				     "%s upstream timed out: %s deadline", what,
				     req->cancel.deadline_ms >= b->deadline_ms ? "turn" : "request");
		return BROKERD_UPSTREAM_TIMEOUT;
	}
	if (r < 0) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took, "%s upstream call failed: %s",
			     what, r == -EFBIG ? "answer too large" : "transport error");
		return BROKERD_UPSTREAM_ERROR;
	}
	const char *problem = NULL;
	cleanup_json json_object *doc = NULL;
	const char *why = NULL;
	if (a.status < 200 || a.status > 299)
		problem = "non-2xx status";
	else if (!brokerd_content_type_is_json(a.content_type))
		problem = "answer is not application/json";
	else if (rts_json_parse(a.body, a.len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0)
		problem = "answer is not valid JSON";
	else if (brokerd_keyring_reflected(call->keys, a.body, a.len, doc))
		problem = "answer reflects a credential";
	if (problem) {
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took,
			     "%s upstream answer refused (HTTP %ld): %s", what, a.status, problem);
		brokerd_upstream_answer_release(&a);
		return BROKERD_UPSTREAM_ERROR;
	}
	brokerd_upstream_answer_release(&a);
	*out = steal_pointer(&doc);
	return BROKERD_OK;
}
