/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <strings.h>

#include "common/fetch.h"
#include "common/util.h"
#ifdef RTS_FETCH_TEST_SEAMS
#include "common/fetch_seams.h"
#endif

static inline void easy_cleanupp(CURL **e)
{
	if (*e)
		curl_easy_cleanup(*e);
}
#define cleanup_curl _cleanup_(easy_cleanupp)

static inline void multi_cleanupp(CURLM **m)
{
	if (*m)
		curl_multi_cleanup(*m);
}
#define cleanup_curlm _cleanup_(multi_cleanupp)

static inline void slist_freep(struct curl_slist **l)
{
	curl_slist_free_all(*l);
}
#define cleanup_slist _cleanup_(slist_freep)

static inline void url_releasep(struct rts_url *u)
{
	rts_url_release(u);
}
#define cleanup_url _cleanup_(url_releasep)

const char *rts_fetch_accept_encoding(void)
{
	const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
	bool z = v->features & CURL_VERSION_LIBZ, br = v->features & CURL_VERSION_BROTLI;
	if (z && br)
		return "gzip, deflate, br";
	if (z)
		return "gzip, deflate";
	if (br)
		return "br";
	return "identity";
}

/* ---- trusted extra headers ---- */

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Headers the fetch owns: framing, the connection, the pinned host and the fixed
 * Accept-Encoding (seed: "accept-encoding stays fixed"). */
static bool name_reserved(const char *name, size_t n)
{
	static const char *const reserved[] = {"accept-encoding", "host",    "content-length", "transfer-encoding",
					       "connection",	  "te",	     "upgrade",	       "expect",
					       "keep-alive",	  "trailer", "content-encoding"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(reserved); i++)
		if (strlen(reserved[i]) == n && strncasecmp(name, reserved[i], n) == 0)
			return true;
	return n >= 6 && strncasecmp(name, "proxy-", 6) == 0;
}

static const char *check_header(const char *h)
{
	size_t len = strnlen(h, RTS_FETCH_EXTRA_HEADER_LEN_MAX + 1);
	if (len > RTS_FETCH_EXTRA_HEADER_LEN_MAX)
		return "extra request header is too long";
	const char *colon = strchr(h, ':');
	if (!colon || colon == h)
		return "extra request header is not \"Name: value\"";
	for (const char *p = h; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return "extra request header name is not an HTTP token";
	if (name_reserved(h, (size_t)(colon - h)))
		return "extra request header is one the fetch sets itself";
	const char *v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	/* libcurl reads "Name:" with nothing after it as "remove this header". */
	if (*v == '\0')
		return "extra request header has an empty value";
	for (const char *p = v; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\t') || (unsigned char)*p > 0x7e)
			return "extra request header value has a control or non-ASCII byte";
	return NULL;
}

static int build_headers(const char *const *in, struct curl_slist **out, const char **why)
{
	*out = NULL;
	if (!in)
		return 0;
	size_t n = 0;
	for (const char *const *p = in; *p; p++) {
		if (++n > RTS_FETCH_EXTRA_HEADERS_MAX) {
			*why = "too many extra request headers";
			goto bad;
		}
		*why = check_header(*p);
		if (*why)
			goto bad;
		struct curl_slist *l = curl_slist_append(*out, *p);
		if (!l)
			abort();
		*out = l;
	}
	return 0;
bad:
	curl_slist_free_all(*out);
	*out = NULL;
	return -EINVAL;
}

/* ---- one connection attempt to one vetted address ---- */

struct attempt {
	CURL *easy;
	const struct rts_url *url;
	struct rts_netaddr pin; /* the only address this attempt may connect to */
	size_t max_bytes;
	/* the response as it arrives */
	char *body;
	size_t len, cap;
	size_t header_bytes;
	int cur_status;	      /* of the response whose headers are arriving */
	unsigned n_encodings; /* Content-Encoding headers of that response */
	char encoding[16];
	/* why it stopped */
	bool pin_refused, wire_over, decoded_over, headers_over, encoding_refused;
	bool headers_done; /* the final response's headers are complete */
	/* the outcome, once the transfer is over */
	long status;
	char *content_type;
	char *location; /* a redirect's absolute target, as libcurl resolved it */
};

static void attempt_release(struct attempt *t)
{
	free(t->body);
	free(t->content_type);
	free(t->location);
	t->body = t->content_type = t->location = NULL;
}

static uint16_t sockaddr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
}

/* libcurl's socket(): the second half of the pin. CURLOPT_RESOLVE already hands libcurl
 * the vetted address; this refuses to open a socket towards anything else, should a
 * libcurl version ever resolve on its own after all. */
static curl_socket_t open_pinned(void *clientp, curlsocktype purpose, struct curl_sockaddr *sa)
{
	struct attempt *t = clientp;
	struct rts_netaddr a;
	if (purpose != CURLSOCKTYPE_IPCXN || !rts_netaddr_from_sockaddr(&a, &sa->addr, sa->addrlen) ||
	    !rts_netaddr_equal(&a, &t->pin) || sockaddr_port(&sa->addr) != t->url->port ||
	    rts_netaddr_special(&a) != NULL) {
		t->pin_refused = true;
		return CURL_SOCKET_BAD;
	}
#ifdef RTS_FETCH_TEST_SEAMS
	if (rts_fetch_test_seams.dial) {
		socklen_t len = sa->addrlen;
		rts_fetch_test_seams.dial(rts_fetch_test_seams.arg, &a, t->url->port, &sa->addr, &len);
		sa->addrlen = len;
	}
#endif
	return socket(sa->family, sa->socktype | SOCK_CLOEXEC, sa->protocol);
}

/* The single coding we offered that libcurl then decodes, bounded by on_body(). A list
 * ("gzip, br") or a coding we did not offer (zstd, compress) is refused: stacked codings
 * multiply the work a small body can cause. */
static bool encoding_ok(const char *v)
{
	const curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
	if (strcasecmp(v, "identity") == 0)
		return true;
	if (vi->features & CURL_VERSION_LIBZ &&
	    (strcasecmp(v, "gzip") == 0 || strcasecmp(v, "x-gzip") == 0 || strcasecmp(v, "deflate") == 0))
		return true;
	return (vi->features & CURL_VERSION_BROTLI) && strcasecmp(v, "br") == 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct attempt *t = userdata;
	size_t n = size * nmemb;
	t->header_bytes += n;
	if (t->header_bytes > RTS_FETCH_HEADERS_BYTES_MAX) {
		t->headers_over = true;
		return 0;
	}
	if (n >= 12 && memcmp(data, "HTTP/", 5) == 0) {
		/* A new response (an interim 1xx may come first): "HTTP/1.1 200 ..." */
		const char *sp = memchr(data, ' ', n);
		t->cur_status = 0;
		if (sp && (size_t)(sp - data) + 4 <= n)
			for (int i = 1; i <= 3 && sp[i] >= '0' && sp[i] <= '9'; i++)
				t->cur_status = t->cur_status * 10 + (sp[i] - '0');
		t->n_encodings = 0;
		t->encoding[0] = '\0';
		return n;
	}
	static const char ce[] = "content-encoding:";
	if (n > sizeof(ce) - 1 && strncasecmp(data, ce, sizeof(ce) - 1) == 0) {
		const char *v = data + sizeof(ce) - 1, *end = data + n;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
			end--;
		t->n_encodings++;
		size_t vl = (size_t)(end - v);
		if (vl >= sizeof(t->encoding)) {
			/* Too long to be one we offered: make sure it is refused. */
			vl = sizeof(t->encoding) - 1;
			t->n_encodings++;
		}
		memcpy(t->encoding, v, vl);
		t->encoding[vl] = '\0';
		return n;
	}
	if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n')) {
		/* End of one response's headers: judge the final response's coding now, before
		 * any of its body is decoded. */
		if (t->cur_status >= 200 && t->n_encodings > 0 && (t->n_encodings > 1 || !encoding_ok(t->encoding))) {
			t->encoding_refused = true;
			return 0;
		}
		if (t->cur_status >= 200)
			t->headers_done = true;
	}
	return n;
}

static bool wire_over(struct attempt *t)
{
	curl_off_t wire = 0;
	if (curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &wire) == CURLE_OK && wire >= 0 &&
	    (uint64_t)wire > t->max_bytes)
		t->wire_over = true;
	return t->wire_over;
}

/* Decoded body bytes (libcurl decodes gzip, deflate and br piecewise, a buffer at a time,
 * and stops as soon as this refuses a piece: a bomb never expands past max_bytes plus one
 * buffer, and never into our memory). */
static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct attempt *t = userdata;
	size_t n = size * nmemb;
	if (wire_over(t))
		return 0;
	if (n > t->max_bytes - t->len) {
		t->decoded_over = true;
		return 0;
	}
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 16384;
		while (cap < t->len + n + 1)
			cap *= 2;
		if (cap > t->max_bytes + 1)
			cap = t->max_bytes + 1;
		t->body = rts_xrealloc(t->body, cap);
		t->cap = cap;
	}
	memcpy(t->body + t->len, data, n);
	t->len += n;
	return n;
}

/* Wire bytes: libcurl counts the body as received, before decoding. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct attempt *t = userdata;
	if (dlnow >= 0 && (uint64_t)dlnow > t->max_bytes) {
		t->wire_over = true;
		return 1;
	}
	return 0;
}

static int setup(struct attempt *t, struct curl_slist *headers, struct curl_slist *resolve, uint64_t left)
{
	CURL *e = t->easy;
	CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                                                  \
	do {                                                                                                           \
		if (c == CURLE_OK)                                                                                     \
			c = curl_easy_setopt(e, opt, val);                                                             \
	} while (0)
	SET(CURLOPT_URL, t->url->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* Redirects are ours to follow: each hop is vetted again (rts_fetch()). */
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	/* "" turns proxies off, those named by *_proxy environment variables included. */
	SET(CURLOPT_PROXY, "");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_HTTPGET, 1L);
	/* One protocol stack to reason about; an HTTP/2 peer speaks HTTP/1.1 too. */
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	SET(CURLOPT_FORBID_REUSE, 1L);
	SET(CURLOPT_FRESH_CONNECT, 1L);
#ifdef RTS_FETCH_TEST_SEAMS
	if (rts_fetch_test_seams.ca_file) {
		SET(CURLOPT_CAINFO, rts_fetch_test_seams.ca_file);
		SET(CURLOPT_CAPATH, (char *)NULL);
	}
#endif
	SET(CURLOPT_ACCEPT_ENCODING, rts_fetch_accept_encoding());
	SET(CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_RESOLVE, resolve);
	SET(CURLOPT_OPENSOCKETFUNCTION, open_pinned);
	SET(CURLOPT_OPENSOCKETDATA, t);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, t);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, t);
	SET(CURLOPT_NOPROGRESS, 0L);
	SET(CURLOPT_XFERINFOFUNCTION, on_progress);
	SET(CURLOPT_XFERINFODATA, t);
	/* A Content-Length above the limit is refused before any of the body is read. */
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)t->max_bytes);
	SET(CURLOPT_TIMEOUT_MS, (long)left);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(left < RTS_FETCH_CONNECT_MS ? left : RTS_FETCH_CONNECT_MS));
#undef SET
	return c == CURLE_OK ? 0 : -ENOMEM;
}

/* Drive the transfer until it ends, the deadline passes or cancel fires. The multi
 * interface lets the wait include the caller's descriptors, so cancelling aborts the
 * transfer at once. */
static int run(CURLM *m, CURL *e, uint64_t deadline, const struct rts_cancel *c, CURLcode *result)
{
	*result = CURLE_OK;
	if (curl_multi_add_handle(m, e) != CURLM_OK)
		return -ENOMEM;
	int r = 0;
	for (;;) {
		int running = 0;
		if (curl_multi_perform(m, &running) != CURLM_OK) {
			r = -EPROTO;
			break;
		}
		if (!running) {
			int q;
			CURLMsg *msg = curl_multi_info_read(m, &q);
			*result = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_RECV_ERROR;
			break;
		}
		if (rts_cancel_fired(c)) {
			r = -ECANCELED;
			break;
		}
		uint64_t now = rts_now_ms();
		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		struct curl_waitfd wf[2];
		unsigned n = 0;
		if (c->wake_fd >= 0)
			wf[n++] = (struct curl_waitfd){.fd = c->wake_fd, .events = CURL_WAIT_POLLIN};
		if (c->hangup_fd >= 0)
			wf[n++] = (struct curl_waitfd){.fd = c->hangup_fd, .events = 0};
		uint64_t wait = deadline - now;
		if (wait > 1000)
			wait = 1000;
		if (curl_multi_poll(m, n ? wf : NULL, n, (int)wait, NULL) != CURLM_OK) {
			r = -EPROTO;
			break;
		}
		bool woke = false;
		for (unsigned i = 0; i < n; i++)
			woke |= wf[i].revents != 0;
		if (woke) {
			r = -ECANCELED;
			break;
		}
	}
	/* Removing an unfinished transfer closes its connection. */
	curl_multi_remove_handle(m, e);
	return r;
}

static bool is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

static char *info_dup(CURL *e, CURLINFO what)
{
	char *s = NULL;
	if (curl_easy_getinfo(e, what, &s) != CURLE_OK || !s)
		return NULL;
	return rts_xstrdup(s);
}

/* Attempt the request over one vetted address. Returns 0 with t's response, or a
 * negative errno with *why; *next is set when the connection was never established
 * (TCP or TLS), so nothing was sent and the next vetted address may be tried. */
static int attempt(CURLM *m, struct attempt *t, struct curl_slist *headers, uint64_t deadline,
		   const struct rts_cancel *c, bool *next, const char **why)
{
	*next = false;
	cleanup_slist struct curl_slist *resolve = NULL;
	if (!t->url->literal) {
		/* Pin: libcurl takes the name's address from this entry, never from DNS. */
		char addr[INET6_ADDRSTRLEN];
		inet_ntop(t->pin.family, t->pin.family == AF_INET ? (const void *)&t->pin.v4 : (const void *)&t->pin.v6,
			  addr, sizeof(addr));
		cleanup_free char *entry = rts_xasprintf(t->pin.family == AF_INET6 ? "%s:%u:[%s]" : "%s:%u:%s",
							  t->url->host, (unsigned)t->url->port, addr);
		resolve = curl_slist_append(NULL, entry);
		if (!resolve)
			abort();
	}
	uint64_t now = rts_now_ms();
	if (now >= deadline) {
		*why = "timed out";
		return -ETIMEDOUT;
	}
	cleanup_curl CURL *e = curl_easy_init();
	if (!e) {
		*why = "cannot set up the transfer";
		return -ENOMEM;
	}
	t->easy = e;
	int r = setup(t, headers, resolve, deadline - now);
	if (r < 0) {
		*why = "cannot set up the transfer";
		return r;
	}
	CURLcode res;
	r = run(m, e, deadline, c, &res);
	if (r == -ETIMEDOUT || (r == 0 && res == CURLE_OPERATION_TIMEDOUT && rts_now_ms() >= deadline)) {
		*why = "timed out";
		return -ETIMEDOUT;
	}
	if (r == -ECANCELED) {
		*why = "cancelled";
		return r;
	}
	if (r < 0) {
		*why = "transfer failed";
		return r;
	}
	/* Our own refusals first: they name the rule that stopped the transfer. */
	if (t->pin_refused) {
		*why = "connection to an address that was not vetted refused";
		return -EACCES;
	}
	if (t->headers_over || (res == CURLE_OUT_OF_MEMORY && !t->headers_done)) {
		/* libcurl refuses a single header line over its own bound (100 KiB) as
		 * out of memory before our callback sees it. */
		*why = "response headers are too large";
		return -EMSGSIZE;
	}
	if (t->encoding_refused) {
		*why = "response uses a content encoding that was not offered";
		return -EBADMSG;
	}
	if (t->wire_over || t->decoded_over || res == CURLE_FILESIZE_EXCEEDED) {
		*why = "response body is larger than the limit";
		return -EFBIG;
	}
	long connect_us = 0;
	curl_off_t tcp = 0, tls = 0;
	curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &tcp);
	curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &tls);
	connect_us = (long)(t->url->https ? tls : tcp);
	switch (res) {
	case CURLE_OK:
		break;
	case CURLE_COULDNT_CONNECT:
		*next = true;
		*why = "cannot connect to the host";
		return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		/* Before the whole deadline: the per-address connection deadline, unless the
		 * connection was up already (then the request may have been sent). */
		if (connect_us > 0) {
			*why = "timed out";
			return -ETIMEDOUT;
		}
		*next = true;
		*why = "cannot connect to the host";
		return -ECONNREFUSED;
	case CURLE_SSL_CONNECT_ERROR:
		*next = true;
		*why = "TLS handshake failed";
		return -EPROTO;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
		*next = true;
		*why = "TLS certificate verification failed";
		return -EPROTO;
	case CURLE_BAD_CONTENT_ENCODING:
		*why = "response body does not decode";
		return -EBADMSG;
	default:
		*why = "response is malformed or the connection broke";
		return -EPROTO;
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t->status);
	t->content_type = info_dup(e, CURLINFO_CONTENT_TYPE);
	if (is_redirect(t->status))
		t->location = info_dup(e, CURLINFO_REDIRECT_URL);
	return 0;
}

void rts_fetch_result_release(struct rts_fetch_result *res)
{
	free(res->body);
	free(res->final_url);
	free(res->content_type);
	free(res->location);
	*res = (struct rts_fetch_result){0};
}

int rts_fetch(const char *url, size_t url_len, const struct rts_fetch_opts *opts, struct rts_fetch_result *res,
	      const char **why)
{
	*res = (struct rts_fetch_result){0};
	if (opts->timeout_ms < RTS_FETCH_TIMEOUT_MIN_MS || opts->timeout_ms > RTS_FETCH_TIMEOUT_MAX_MS) {
		*why = "timeout out of range";
		return -EINVAL;
	}
	if (opts->max_redirects > RTS_FETCH_REDIRECTS_MAX) {
		*why = "redirect limit out of range";
		return -EINVAL;
	}
	if (opts->max_bytes < RTS_FETCH_BYTES_MIN || opts->max_bytes > RTS_FETCH_BYTES_MAX) {
		*why = "size limit out of range";
		return -EINVAL;
	}
	const struct rts_cancel *c = &opts->cancel;
	uint64_t deadline = rts_cancel_deadline(rts_now_ms() + opts->timeout_ms, c);
	cleanup_slist struct curl_slist *headers = NULL;
	int r = build_headers(opts->headers, &headers, why);
	if (r < 0)
		return r;

	cleanup_url struct rts_url first = {0};
	r = rts_url_parse(url, url_len, &first, why);
	if (r < 0)
		return r;
	cleanup_url struct rts_url cur = {0};
	cur = first;
	cur.url = rts_xstrdup(first.url);
	cur.host = rts_xstrdup(first.host);
	bool send_headers = true;
	unsigned redirects = 0;

	/* One multi handle for the whole chain: libcurl caches the parsed CA store in it. */
	cleanup_curlm CURLM *m = curl_multi_init();
	if (!m) {
		*why = "cannot set up the transfer";
		return -ENOMEM;
	}
	for (;;) {
		if (!rts_url_same_origin(&first, &cur))
			send_headers = false;
		struct rts_addrlist addrs;
		r = rts_url_resolve(&cur, deadline, c, &addrs, why);
		if (r < 0)
			return r;
		struct attempt t = {0};
		for (size_t i = 0; i < addrs.n; i++) {
			attempt_release(&t);
			t = (struct attempt){.url = &cur, .pin = addrs.a[i], .max_bytes = opts->max_bytes};
			bool next = false;
			r = attempt(m, &t, send_headers ? headers : NULL, deadline, c, &next, why);
			if (r == 0 || !next)
				break;
			/* The connection failed before anything was sent: try the next vetted address. */
		}
		if (r < 0) {
			attempt_release(&t);
			return r;
		}
		if (t.location && opts->follow_redirects) {
			if (redirects == opts->max_redirects) {
				attempt_release(&t);
				*why = "too many redirects";
				return -ELOOP;
			}
			struct rts_url next;
			r = rts_url_parse(t.location, strlen(t.location), &next, why);
			attempt_release(&t);
			if (r < 0)
				return r;
			rts_url_release(&cur);
			cur = next;
			redirects++;
			continue;
		}
		res->status = t.status;
		res->content_type = steal_pointer(&t.content_type);
		res->location = steal_pointer(&t.location);
		if (!t.body)
			t.body = rts_xmalloc(1);
		t.body[t.len] = '\0';
		res->body = steal_pointer(&t.body);
		res->len = t.len;
		res->final_url = rts_xstrdup(cur.url);
		res->redirects = redirects;
		*why = NULL;
		return 0;
	}
}
