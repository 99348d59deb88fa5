/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "brokerd/audit.h"
#include "brokerd/keys.h"
#include "brokerd/upstream.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

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

/* Upstream connections are kept between calls (DESIGN.md 8.4), in the connection cache of
 * the multi handle a call runs on: calls take a handle from a small pool (at most POOL_MAX
 * idle ones, last in first out, so consecutive calls get the handle, and the connections,
 * the last call left) and give it back. A handle is used by one thread at a time, so a
 * connection is only ever used by one call at a time. libcurl's cache is keyed by scheme,
 * host, port and TLS settings, so a connection only serves its own upstream origin. Bounds:
 * MULTI_MAXCONNECTS per handle (the least recently used idle one is closed beyond),
 * IDLE_MAX_S idle and LIFETIME_MAX_S in all, so at most POOL_MAX * MULTI_MAXCONNECTS
 * connections stay open.
 *
 * Why this is safe:
 *  - HTTP/1.1 only: one request at a time per connection, and no multiplexed stream of
 *    another call can share a connection whose call is aborted.
 *  - A connection goes back to the cache only after libcurl read a complete, correctly
 *    framed answer. Every other end (a transfer error, an answer over max_answer, the
 *    turn closing, a deadline) sets CURLOPT_FORBID_REUSE before the transfer is removed,
 *    which closes the connection (libcurl already closes a prematurely ended HTTP/1.1
 *    transfer's connection; this makes it explicit).
 *  - Nothing of a call survives in the handle but the connection: headers are built per
 *    request, no auth scheme is negotiated (no CURLOPT_HTTPAUTH, CURLOPT_UNRESTRICTED_AUTH
 *    0), no cookie engine, and each call gets a new easy handle.
 *  - libcurl 7.88 reuses a kept connection on which bytes are waiting (an upstream that
 *    sent more than its answer's Content-Length in a later TLS record) and reads them as
 *    the next call's answer; it also missed an upstream's close of an idle connection in
 *    our tests. So on_prereq() looks at a kept connection right before a request goes
 *    out on it: anything waiting (bytes, EOF, an error) and the call is made again on a
 *    new connection (nothing was sent yet), the old one closed.
 *  - A kept connection that dies after the request went out and before any answer byte:
 *    libcurl (7.88, Curl_retry_request) would send the request again on a new connection,
 *    which could run an MCP tool twice. The body is handed over by a read callback with
 *    no seek callback, so libcurl cannot rewind it and the call fails (upstream_error)
 *    instead; on_prereq() refuses such a second send too. A second send before any body
 *    byte was handed over is allowed: the upstream cannot have acted on a request whose
 *    body it never received.
 *  tests/integration/test_upstream_reuse.py shows each of these.
 * TLS sessions and resolved names are shared between the handles (CURLSH, with a lock
 * per kind of data), so a new connection to a known upstream resumes its TLS session.
 *
 * The CA store is cached per handle too (CURLOPT_CA_CACHE_TIMEOUT): building it from the
 * system bundle costs about 25 ms of CPU per call with OpenSSL 3 (measured on Debian 12:
 * 25.0 ms with a new multi handle per call, 1.3 ms with a reused one). */
#define POOL_MAX 8u
#define MULTI_MAXCONNECTS 4L
#define IDLE_MAX_S 30L	     /* below common upstream keep-alive timeouts (nginx 75 s) */
#define LIFETIME_MAX_S 300L  /* then a new connection: DNS and certificate changes are seen */
#define CA_CACHE_SECONDS 600L /* a changed CA bundle is picked up within ten minutes */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURLM *pool[POOL_MAX];
static size_t pool_len;

/* TLS sessions and DNS, shared by every handle. */
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
static pthread_once_t share_once = PTHREAD_ONCE_INIT;
static CURLSH *share;

static void share_lock(CURL *e, curl_lock_data data, curl_lock_access access, void *userp)
{
	(void)e, (void)access, (void)userp;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&share_locks[data]);
}

static void share_unlock(CURL *e, curl_lock_data data, void *userp)
{
	(void)e, (void)userp;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&share_locks[data]);
}

static void share_init(void)
{
	for (size_t i = 0; i < RTS_ARRAY_SIZE(share_locks); i++)
		pthread_mutex_init(&share_locks[i], NULL);
	CURLSH *s = curl_share_init();
	if (!s)
		return;
	if (curl_share_setopt(s, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(s, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
	    curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
		curl_share_cleanup(s);
		return;
	}
	/* Not CURL_LOCK_DATA_CONNECT: libcurl does not support one connection cache used by
	 * several threads at once; each multi handle keeps its own instead. */
	share = s;
}

static CURLM *multi_take(void)
{
	CURLM *m = NULL;
	pthread_mutex_lock(&pool_lock);
	if (pool_len > 0)
		m = pool[--pool_len];
	pthread_mutex_unlock(&pool_lock);
	if (m)
		return m;
	m = curl_multi_init();
	if (m && curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, MULTI_MAXCONNECTS) != CURLM_OK) {
		curl_multi_cleanup(m);
		m = NULL;
	}
	return m;
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
		curl_multi_cleanup(m); /* closes the connections it kept */
}


/* The sockets libcurl opened (CURLOPT_OPENSOCKETFUNCTION / CLOSESOCKETFUNCTION), so that
 * on_prereq() can look at the one a call is about to reuse: libcurl 7.88 reuses a kept
 * connection on which unasked bytes are waiting, and would read them as the next call's
 * answer. At most one per connection any handle keeps or uses. */
struct tracked_sock {
	curl_socket_t fd;
	int local_port; /* 0 until looked up (it is known once connected) */
	char local_ip[INET6_ADDRSTRLEN];
};
static pthread_mutex_t socks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracked_sock *socks;
static size_t n_socks, cap_socks;

static curl_socket_t on_open_socket(void *userp, curlsocktype purpose, struct curl_sockaddr *addr)
{
	(void)userp;
	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKET_BAD;
	int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
	if (fd < 0)
		return CURL_SOCKET_BAD;
	pthread_mutex_lock(&socks_lock);
	if (n_socks == cap_socks) {
		cap_socks = cap_socks ? cap_socks * 2 : 32;
		socks = rts_xrealloc(socks, cap_socks * sizeof(*socks));
	}
	socks[n_socks++] = (struct tracked_sock){.fd = fd};
	pthread_mutex_unlock(&socks_lock);
	return fd;
}

static int on_close_socket(void *userp, curl_socket_t fd)
{
	(void)userp;
	pthread_mutex_lock(&socks_lock);
	for (size_t i = 0; i < n_socks; i++)
		if (socks[i].fd == fd) {
			socks[i] = socks[--n_socks];
			break;
		}
	pthread_mutex_unlock(&socks_lock);
	return close(fd);
}

/* The tracked socket whose local address is ip (as libcurl prints it) and port, or
 * CURL_SOCKET_BAD. */
static curl_socket_t sock_by_local(const char *ip, int port)
{
	curl_socket_t found = CURL_SOCKET_BAD;
	pthread_mutex_lock(&socks_lock);
	for (size_t i = 0; i < n_socks && found == CURL_SOCKET_BAD; i++) {
		struct tracked_sock *t = &socks[i];
		if (t->local_port == 0) {
			struct sockaddr_storage ss;
			socklen_t len = sizeof(ss);
			if (getsockname(t->fd, (struct sockaddr *)&ss, &len) == 0) {
				if (ss.ss_family == AF_INET) {
					t->local_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
					inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, t->local_ip,
						  sizeof(t->local_ip));
				} else if (ss.ss_family == AF_INET6) {
					t->local_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
					inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, t->local_ip,
						  sizeof(t->local_ip));
				}
			}
		}
		if (t->local_port == port && strcmp(t->local_ip, ip) == 0)
			found = t->fd;
	}
	pthread_mutex_unlock(&socks_lock);
	return found;
}

void brokerd_upstream_cleanup(void)
{
	pthread_mutex_lock(&pool_lock);
	while (pool_len > 0)
		curl_multi_cleanup(pool[--pool_len]);
	pthread_mutex_unlock(&pool_lock);
	if (share)
		curl_share_cleanup(share);
	share = NULL;
	free(socks);
	socks = NULL;
	n_socks = cap_socks = 0;
}

/* One attempt at a call: the request body, handed to libcurl by on_read(), and what
 * on_prereq() saw. */
struct attempt {
	CURL *e;
	const char *p;
	size_t len, off;
	unsigned sends; /* on_prereq() calls: requests libcurl was about to send */
	bool stale;	/* refused a kept connection with bytes or EOF waiting on it */
};

static size_t on_read(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct attempt *at = userdata;
	size_t n = size * nitems;
	if (n > at->len - at->off)
		n = at->len - at->off;
	memcpy(buf, at->p + at->off, n);
	at->off += n;
	return n;
}

/* Called right before each request is sent: the first, and libcurl's own second try on a
 * new connection after a kept one died. A second try is refused once body bytes were
 * handed over (the upstream may have acted on them). A kept connection is refused when
 * anything is waiting on it (unasked bytes, a TLS alert, EOF): nothing a call sends or
 * reads may meet what an earlier call left behind. Nothing was sent then, so the caller
 * tries again on a new connection. */
static int on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
		     int conn_local_port)
{
	(void)conn_primary_ip, (void)conn_primary_port;
	struct attempt *at = userdata;
	if (++at->sends > 1 && at->off > 0)
		return CURL_PREREQFUNC_ABORT;
	long connects = 0;
	if (curl_easy_getinfo(at->e, CURLINFO_NUM_CONNECTS, &connects) != CURLE_OK || connects > 0)
		return CURL_PREREQFUNC_OK; /* a new connection: nothing of another call on it */
	curl_socket_t fd = sock_by_local(conn_local_ip, conn_local_port);
	if (fd == CURL_SOCKET_BAD) {
		at->stale = true; /* cannot check it: do not use it */
		return CURL_PREREQFUNC_ABORT;
	}
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		at->stale = true;
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
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

bool brokerd_content_type_is(const char *ct, const char *type)
{
	size_t n = strlen(type);
	if (!ct || strncasecmp(ct, type, n) != 0)
		return false;
	const char *p = ct + n;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '\0' || *p == ';';
}

bool brokerd_content_type_is_json(const char *ct)
{
	return brokerd_content_type_is(ct, "application/json");
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

/* What every upstream transfer sets alike: the URL and its schemes, no redirect, no proxy,
 * verified TLS 1.2 or later with ca_file, the cached CA store. */
static CURLcode setopt_origin(CURL *e, const char *url, const char *ca_file, bool allow_http)
{
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
	SET(CURLOPT_CA_CACHE_TIMEOUT, CA_CACHE_SECONDS);
	if (ca_file) {
		/* caFile is trusted instead of the system store, not in addition to it. */
		SET(CURLOPT_CAINFO, ca_file);
		SET(CURLOPT_CAPATH, (char *)NULL);
	}
	return c;
}

int brokerd_upstream_setopt_common(void *easy, const char *url, const char *ca_file, bool allow_http,
				   const char *body, size_t body_len)
{
	CURL *e = easy;
	CURLcode c = setopt_origin(e, url, ca_file, allow_http);
	/* A streamed answer's connection is not kept: the checks that make a kept connection
	 * safe (on_prereq(), above) are this file's own calls'. */
	SET(CURLOPT_FORBID_REUSE, 1L);
	SET(CURLOPT_POST, 1L);
	SET(CURLOPT_POSTFIELDS, body);
	SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	return c == CURLE_OK ? 0 : -EPROTO;
}

static int setup(CURL *e, const struct brokerd_upstream_req *req, struct curl_slist *headers, struct sink *sink,
		 struct attempt *at, long timeout_ms)
{
	CURLcode c = setopt_origin(e, req->url, req->ca_file, req->allow_http);
	/* One request at a time per connection (see the top of this file). */
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_UNRESTRICTED_AUTH, 0L);
	SET(CURLOPT_MAXAGE_CONN, IDLE_MAX_S);
	SET(CURLOPT_MAXLIFETIME_CONN, LIFETIME_MAX_S);
	if (share)
		SET(CURLOPT_SHARE, share);
	SET(CURLOPT_POST, 1L);
	SET(CURLOPT_READFUNCTION, on_read);
	SET(CURLOPT_READDATA, at);
	SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	SET(CURLOPT_PREREQFUNCTION, on_prereq);
	SET(CURLOPT_PREREQDATA, at);
	SET(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
	SET(CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
	SET(CURLOPT_HTTPHEADER, headers);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, sink);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_answer);
	SET(CURLOPT_TIMEOUT_MS, timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	return c == CURLE_OK ? 0 : -EPROTO;
}
#undef SET

/* One transfer of req on m. Returns 0 with *a filled, or a negative errno as
 * brokerd_upstream_post(); at->stale when on_prereq() refused a kept connection before
 * anything was sent (the caller may try again with fresh set). */
static int transfer(CURLM *m, const struct brokerd_upstream_req *req, struct curl_slist *headers, uint64_t deadline,
		    bool fresh, struct attempt *at, struct brokerd_upstream_answer *a)
{
	*at = (struct attempt){.p = req->body, .len = req->body_len};
	cleanup_curl CURL *e = curl_easy_init();
	if (!e)
		return -ENOMEM;
	at->e = e;
	struct sink sink = {.max = req->max_answer};
	uint64_t now = rts_now_ms();
	if (now >= deadline)
		return -ETIMEDOUT;
	int r = setup(e, req, headers, &sink, at, (long)(deadline - now));
	if (r == 0 && fresh && curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK)
		r = -EPROTO;
	if (r < 0)
		return r;
	if (curl_multi_add_handle(m, e) != CURLM_OK)
		return -EPROTO;
	CURLcode result = CURLE_OK;
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
		long connects = 0;
		a->reused = curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects == 0;
	} else {
		/* Aborted, failed or cut short: this connection is never used again (libcurl also
		 * closes the connection of a transfer removed unfinished; this says so). */
		curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	}
	curl_multi_remove_handle(m, e);
	free(sink.buf);
	return r;
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

	pthread_once(&share_once, share_init);
	/* The multi interface lets the wait include the turn's wake fd: closing the turn
	 * aborts the transfer at once, not at the next progress tick. */
	CURLM *m = multi_take();
	if (!m)
		return -ENOMEM;
	struct attempt at;
	int r = transfer(m, req, headers, deadline, false, &at, a);
	/* A kept connection refused before anything was sent: once more on a new one. */
	if (r < 0 && at.stale && at.off == 0) {
		log_debug("upstream call: a kept connection had unread input; using a new one");
		r = transfer(m, req, headers, deadline, true, &at, a);
	}
	multi_give(m);
	/* A request libcurl was about to send may have reached the upstream (a refused kept
	 * connection aside: nothing went out on it). */
	a->sent = at.sends > (at.stale ? 1u : 0u) || at.off > 0;
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
	uint64_t started_us = now_us();
	int r = brokerd_upstream_post(req, &a);
	uint64_t took = rts_now_ms() - started;
	call->forwarded = a.sent;
	brokerd_metrics_upstream(what, now_us() - started_us, a.reused, r == 0);
	if (r == -ECANCELED) {
		call->rule = "turn_closing";
		return BROKERD_UNAVAILABLE;
	}
	if (r == -ETIMEDOUT) {
		call->rule = "upstream_timeout";
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
		call->rule = r == -EFBIG ? "upstream_answer_too_large" : "upstream_transport";
		rts_log_turn(LOG_WARNING, b->turn_id, b->channel_hash, "upstream_error", took, "%s upstream call failed: %s",
			     what, r == -EFBIG ? "answer too large" : "transport error");
		return BROKERD_UPSTREAM_ERROR;
	}
	const char *problem = NULL;
	cleanup_json json_object *doc = NULL;
	const char *why = NULL;
	if (a.status < 200 || a.status > 299)
		problem = "non-2xx status", call->rule = "upstream_status";
	else if (!brokerd_content_type_is_json(a.content_type))
		problem = "answer is not application/json", call->rule = "upstream_content_type";
	else if (rts_json_parse(a.body, a.len, RTS_JSON_DEPTH_MAX, &doc, &why) < 0)
		problem = "answer is not valid JSON", call->rule = "upstream_answer_json";
	else if (brokerd_keyring_reflected(call->keys, a.body, a.len, doc))
		problem = "answer reflects a credential", call->rule = "credential_reflected";
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
