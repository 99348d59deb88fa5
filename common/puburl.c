/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/eventfd.h>

#include "common/fetch.h"
#include "common/puburl.h"
#include "common/util.h"
#ifdef RTS_FETCH_TEST_SEAMS
#include "common/fetch_seams.h"
struct rts_fetch_test_seams rts_fetch_test_seams;
#endif

static inline void url_cleanupp(CURLU **u)
{
	if (*u)
		curl_url_cleanup(*u);
}
#define cleanup_curlu _cleanup_(url_cleanupp)

static inline void curl_freep(char **p)
{
	curl_free(*p);
}
#define cleanup_curl_free _cleanup_(curl_freep)

/* ---- parsing ---- */

static bool is_ldh(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* A DNS name as rts_url_parse() documents it. Also refuses a name whose last label is a
 * number (all digits, or 0x and hex digits): such a host is an IPv4 address in some
 * reader's eyes (the WHATWG URL standard's "ends in a number" rule), and libcurl did not
 * normalise it into one, so what it means is not clear enough to dial. */
static const char *check_name(const char *h)
{
	size_t len = strlen(h);
	if (len == 0)
		return "URL host is empty";
	if (len > 253)
		return "URL host name is too long";
	if (h[len - 1] == '.')
		return "URL host name ends in a dot";
	const char *label = h;
	for (const char *p = h;; p++) {
		if (*p == '.' || *p == '\0') {
			size_t n = (size_t)(p - label);
			if (n == 0)
				return "URL host name has an empty label";
			if (n > 63)
				return "URL host name has a label longer than 63 bytes";
			if (label[0] == '-' || label[n - 1] == '-')
				return "URL host name has a label that starts or ends with a hyphen";
			if (*p == '\0')
				break;
			label = p + 1;
		} else if (!is_ldh(*p)) {
			return "URL host is not a DNS name of letters, digits and hyphens";
		}
	}
	/* label: the last one */
	bool digits = true, hex = (label[0] == '0' && (label[1] == 'x' || label[1] == 'X'));
	for (const char *p = label; *p; p++)
		if (*p < '0' || *p > '9')
			digits = false;
	if (hex)
		for (const char *p = label + 2; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
				hex = false;
	if (digits || hex)
		return "URL host looks like a number but is not an IPv4 address";
	return NULL;
}

/* The checks on the raw text, before libcurl reads it: libcurl accepts and silently
 * repairs several forms ("http:/h", "http:///h", a percent-encoded host, an empty user),
 * and a URL that only parses after repair is not clean. */
static const char *check_raw(const char *s, size_t len, size_t *scheme_len)
{
	if (len == 0)
		return "URL is empty";
	if (len > RTS_URL_MAX)
		return "URL is too long";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x21 || c > 0x7e)
			return "URL contains a space, a control or a non-ASCII byte";
		if (c == '\\')
			return "URL contains a backslash";
	}
	if (len >= 7 && strncasecmp(s, "http://", 7) == 0)
		*scheme_len = 4;
	else if (len >= 8 && strncasecmp(s, "https://", 8) == 0)
		*scheme_len = 5;
	else {
		const char *colon = memchr(s, ':', len);
		size_t n = colon ? (size_t)(colon - s) : 0;
		if ((n == 4 && strncasecmp(s, "http", 4) == 0) || (n == 5 && strncasecmp(s, "https", 5) == 0))
			return "URL does not have the form scheme://host/path";
		return "URL scheme is not http or https";
	}
	const char *auth = s + *scheme_len + 3, *end = s + len;
	const char *p = auth;
	while (p < end && *p != '/' && *p != '?' && *p != '#')
		p++;
	if (p == auth)
		return "URL host is empty";
	if (memchr(auth, '@', (size_t)(p - auth)))
		return "URL carries user info";
	if (memchr(auth, '%', (size_t)(p - auth)))
		return "URL host is percent-encoded or has an IPv6 zone";
	return NULL;
}

void rts_url_release(struct rts_url *u)
{
	free(u->url);
	free(u->host);
	*u = (struct rts_url){0};
}

int rts_url_parse(const char *s, size_t len, struct rts_url *u, const char **why)
{
	*u = (struct rts_url){0};
	size_t scheme_len = 0;
	*why = check_raw(s, len, &scheme_len);
	if (*why)
		return -EACCES;
	cleanup_free char *text = rts_xstrndup(s, len);
	cleanup_curlu CURLU *h = curl_url();
	if (!h)
		abort();
	if (curl_url_set(h, CURLUPART_URL, text, 0) != CURLUE_OK) {
		*why = "URL does not parse";
		return -EACCES;
	}
	cleanup_curl_free char *scheme = NULL, *user = NULL, *password = NULL, *options = NULL, *zone = NULL;
	cleanup_curl_free char *host = NULL, *port = NULL, *url = NULL;
	if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		*why = "URL scheme is not http or https";
		return -EACCES;
	}
	/* check_raw() already refused every '@'; this is the parser's own view of it. */
	if (curl_url_get(h, CURLUPART_USER, &user, 0) != CURLUE_NO_USER ||
	    curl_url_get(h, CURLUPART_PASSWORD, &password, 0) != CURLUE_NO_PASSWORD ||
	    curl_url_get(h, CURLUPART_OPTIONS, &options, 0) != CURLUE_NO_OPTIONS) {
		*why = "URL carries user info";
		return -EACCES;
	}
	if (curl_url_get(h, CURLUPART_ZONEID, &zone, 0) != CURLUE_NO_ZONEID) {
		*why = "URL host is percent-encoded or has an IPv6 zone";
		return -EACCES;
	}
	if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		*why = "URL host is empty";
		return -EACCES;
	}
	size_t hl = strlen(host);
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		char inner[INET6_ADDRSTRLEN + 1];
		if (hl - 2 >= sizeof(inner)) {
			*why = "URL host is not a valid IPv6 address";
			return -EACCES;
		}
		memcpy(inner, host + 1, hl - 2);
		inner[hl - 2] = '\0';
		if (inet_pton(AF_INET6, inner, &u->addr.v6) != 1) {
			*why = "URL host is not a valid IPv6 address";
			rts_url_release(u);
			return -EACCES;
		}
		u->addr.family = AF_INET6;
		u->literal = true;
		u->host = rts_xstrdup(inner);
	} else if (inet_pton(AF_INET, host, &u->addr.v4) == 1) {
		/* libcurl has normalised every numeric IPv4 form into this dotted quad. */
		u->addr.family = AF_INET;
		u->literal = true;
		u->host = rts_xstrdup(host);
	} else {
		*why = check_name(host);
		if (*why) {
			rts_url_release(u);
			return -EACCES;
		}
		u->host = rts_xstrdup(host);
		for (char *p = u->host; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
	}
	u->https = scheme[4] == 's';
	if (curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		*why = "URL port is not valid";
		rts_url_release(u);
		return -EACCES;
	}
	char *endp = NULL;
	unsigned long pn = strtoul(port, &endp, 10);
	if (*port == '\0' || *endp != '\0' || pn == 0 || pn > 65535) {
		*why = "URL port is not valid";
		rts_url_release(u);
		return -EACCES;
	}
	u->port = (uint16_t)pn;
	/* The fragment is never sent; the URL we request and report is without it. */
	if (curl_url_set(h, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK || curl_url_get(h, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		*why = "URL does not parse";
		rts_url_release(u);
		return -EACCES;
	}
	u->url = rts_xstrdup(url);
	*why = NULL;
	return 0;
}

bool rts_url_same_origin(const struct rts_url *a, const struct rts_url *b)
{
	return a->https == b->https && a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* ---- resolution ---- */

/* Distinct addresses one lookup may return; more is refused rather than vetted in part. */
#define LOOKUP_ADDRS_MAX 64u

/* One lookup on a helper thread, so the caller can stop waiting at its deadline:
 * getaddrinfo() itself cannot be interrupted. The job is shared by the two threads and
 * freed by whichever lets go of it last; the thread writes only into the job. */
struct gai_job {
	atomic_int refs;
	int done_fd; /* eventfd, readable once the lookup finished */
	/* the outcome */
	int rc;		  /* 0 or an EAI_* code */
	bool other_family; /* an answer that is neither IPv4 nor IPv6 */
	bool too_many;	  /* more than LOOKUP_ADDRS_MAX distinct addresses */
	size_t n;
	struct rts_netaddr addrs[LOOKUP_ADDRS_MAX];
	char host[];
};

static void gai_job_unref(struct gai_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	close(j->done_fd);
	free(j);
}

static void job_add(struct gai_job *j, const struct rts_netaddr *a)
{
	for (size_t k = 0; k < j->n; k++)
		if (rts_netaddr_equal(&j->addrs[k], a))
			return;
	if (j->n == LOOKUP_ADDRS_MAX)
		j->too_many = true;
	else
		j->addrs[j->n++] = *a;
}

static void *gai_thread(void *arg)
{
	struct gai_job *j = arg;
#ifdef RTS_FETCH_TEST_SEAMS
	if (rts_fetch_test_seams.resolve) {
		struct rts_netaddr got[LOOKUP_ADDRS_MAX];
		int n = rts_fetch_test_seams.resolve(rts_fetch_test_seams.arg, j->host, got, LOOKUP_ADDRS_MAX);
		j->rc = n < 0 ? EAI_NONAME : 0;
		for (int k = 0; k < n; k++)
			job_add(j, &got[k]);
		goto done;
	}
#endif
	/* No AI_ADDRCONFIG: every address the name has is vetted, not only those of the
	 * families this host can reach today. */
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	j->rc = getaddrinfo(j->host, NULL, &hints, &res);
	for (struct addrinfo *ai = j->rc == 0 ? res : NULL; ai; ai = ai->ai_next) {
		struct rts_netaddr a;
		if (rts_netaddr_from_sockaddr(&a, ai->ai_addr, ai->ai_addrlen))
			job_add(j, &a);
		else
			j->other_family = true;
	}
	if (res)
		freeaddrinfo(res);
#ifdef RTS_FETCH_TEST_SEAMS
done:
#endif
	;
	uint64_t one = 1;
	ssize_t w = write(j->done_fd, &one, sizeof(one));
	(void)w; /* an eventfd write of 1 cannot fail short of overflow */
	gai_job_unref(j);
	return NULL;
}

/* Resolve host (a name, never a literal) and vet every address of the answer, kept or
 * not; out gets the first RTS_URL_ADDRS_MAX in the resolver's order. */
static int lookup(const char *host, uint64_t deadline, const struct rts_cancel *c, struct rts_addrlist *out,
		  const char **why)
{
	size_t hl = strlen(host);
	struct gai_job *j = rts_xcalloc(1, sizeof(*j) + hl + 1);
	memcpy(j->host, host, hl + 1);
	atomic_init(&j->refs, 2);
	j->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->done_fd < 0) {
		int e = -errno;
		free(j);
		*why = "name resolution failed";
		return e;
	}
	pthread_attr_t attr;
	pthread_t tid;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int pe = pthread_create(&tid, &attr, gai_thread, j);
	pthread_attr_destroy(&attr);
	if (pe != 0) {
		close(j->done_fd);
		free(j);
		*why = "name resolution failed";
		return -pe;
	}
	int r = rts_cancel_wait(j->done_fd, deadline, c);
	if (r < 0) {
		/* The thread finishes on its own and frees the job. */
		gai_job_unref(j);
		*why = r == -ETIMEDOUT ? "name resolution timed out" : "cancelled";
		return r;
	}
	int rc = j->rc;
	if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_ADDRFAMILY) {
		*why = "host name does not resolve";
		r = -ENXIO;
	} else if (rc != 0) {
		*why = "name resolution failed";
		r = -EAGAIN;
	} else if (j->other_family) {
		/* A family we cannot classify is not one we dial. */
		*why = rts_netaddr_special(&(struct rts_netaddr){.family = AF_UNSPEC})->why;
		r = -EACCES;
	} else if (j->too_many) {
		*why = "host name has too many addresses";
		r = -EACCES;
	} else {
		for (size_t k = 0; k < j->n && r == 0; k++) {
			const struct rts_netrange *bad = rts_netaddr_special(&j->addrs[k]);
			if (bad) {
				*why = bad->why;
				r = -EACCES;
			}
		}
		if (r == 0 && j->n == 0) {
			*why = "host name has no address";
			r = -ENXIO;
		}
		if (r == 0) {
			out->n = j->n < RTS_URL_ADDRS_MAX ? j->n : RTS_URL_ADDRS_MAX;
			memcpy(out->a, j->addrs, out->n * sizeof(out->a[0]));
		}
	}
	gai_job_unref(j);
	return r;
}

int rts_url_resolve(const struct rts_url *u, uint64_t deadline_ms, const struct rts_cancel *c,
		    struct rts_addrlist *out, const char **why)
{
	*out = (struct rts_addrlist){0};
	/* A literal's verdict needs no waiting: a refusal is a refusal whatever time is left,
	 * so a short deadline cannot turn it into a timeout (exit 3, not 1, in the CLI). */
	if (u->literal) {
		const struct rts_netrange *bad = rts_netaddr_special(&u->addr);
		if (bad) {
			*why = bad->why;
			return -EACCES;
		}
	}
	uint64_t deadline = rts_cancel_deadline(deadline_ms, c);
	if (rts_cancel_fired(c)) {
		*why = "cancelled";
		return -ECANCELED;
	}
	if (rts_now_ms() >= deadline) {
		*why = "timed out";
		return -ETIMEDOUT;
	}
	if (u->literal) {
		out->n = 1;
		out->a[0] = u->addr;
		return 0;
	}
	return lookup(u->host, deadline, c, out, why);
}

int rts_url_check_public(const char *s, size_t len, uint32_t timeout_ms, const struct rts_cancel *c,
			 const char **why)
{
	if (timeout_ms < RTS_FETCH_TIMEOUT_MIN_MS || timeout_ms > RTS_FETCH_TIMEOUT_MAX_MS) {
		*why = "timeout out of range";
		return -EINVAL;
	}
	uint64_t deadline = rts_now_ms() + timeout_ms;
	struct rts_url u;
	int r = rts_url_parse(s, len, &u, why);
	if (r < 0)
		return r;
	struct rts_addrlist addrs;
	r = rts_url_resolve(&u, deadline, c, &addrs, why);
	rts_url_release(&u);
	return r;
}
