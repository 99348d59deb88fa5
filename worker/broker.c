/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP client for the broker socket.
 *
 * Why not libcurl: the worker is a static binary in a FROM scratch image, and Debian's
 * libcurl cannot be linked statically (several of its static dependencies are not
 * packaged); shipping its shared-library closure would put a dynamic loader, TLS and
 * name-resolution code into the container for nothing. The worker sends exactly one POST
 * per connection to our own broker over a Unix socket with four fixed headers, so it
 * writes that request itself. The answer, which must be treated as hostile bytes, is parsed
 * by libhttp-parser (Debian ships its static library), with our own bounds on header and
 * body size and a poll() deadline on every step. */
#include "config.h"

#include <fcntl.h>
#include <http_parser.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/json.h"
#include "common/proto.h"
#include "common/util.h"
#include "worker/broker.h"
#include "worker/worker.h"

struct answer {
	char *body;
	size_t len;
	bool complete;
	bool too_large;
};

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct answer *a = p->data;
	if (n > RTS_BROKER_ANSWER_MAX - a->len) {
		a->too_large = true;
		return 1;
	}
	/* Grow in steps; the bound above caps the buffer at RTS_BROKER_ANSWER_MAX + 1. */
	a->body = rts_xrealloc(a->body, a->len + n + 1);
	memcpy(a->body + a->len, at, n);
	a->len += n;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	/* An interim 1xx answer is never expected: we send no Expect header. (1 and 2 mean
	 * "no body" to the parser; any other non-zero value is an error.) */
	return p->status_code < 200 ? -1 : 0;
}

static int on_message_complete(http_parser *p)
{
	struct answer *a = p->data;
	a->complete = true;
	/* Stop here: one answer per connection, anything after it is ignored. */
	http_parser_pause(p, 1);
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = rts_now_ms();
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		uint64_t left = deadline_ms - now;
		struct pollfd pfd = {.fd = fd, .events = events};
		int r = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r > 0)
			return 0;
	}
}

static int connect_broker(const char *path, uint64_t deadline_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n + 1);

	cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return steal_fd(&fd);
		if (errno == EINTR)
			continue;
		/* A full listen backlog: the broker allows a few connections at a time. */
		if (errno != EAGAIN)
			return -errno;
		if (rts_now_ms() + 50 >= deadline_ms)
			return -ETIMEDOUT;
		poll(NULL, 0, 50);
	}
}

static int send_all(int fd, const char *p, size_t len, uint64_t deadline_ms)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			int r = wait_fd(fd, POLLOUT, deadline_ms);
			if (r < 0)
				return r;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_answer(int fd, uint64_t deadline_ms, struct answer *a, unsigned *status)
{
	static const http_parser_settings settings = {
		.on_headers_complete = on_headers_complete,
		.on_body = on_body,
		.on_message_complete = on_message_complete,
	};
	http_parser parser;
	char buf[16384];

	/* Counts status line and header bytes; HPE_HEADER_OVERFLOW past the bound. */
	http_parser_set_max_header_size(WORKER_HTTP_HEADERS_MAX);
	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = a;
	while (!a->complete) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			int r = wait_fd(fd, POLLIN, deadline_ms);
			if (r < 0)
				return r;
			continue;
		}
		/* n == 0 tells the parser about EOF, which ends a body without Content-Length. */
		size_t used = http_parser_execute(&parser, &settings, buf, (size_t)n);
		enum http_errno e = HTTP_PARSER_ERRNO(&parser);
		if (a->too_large)
			return -EFBIG;
		if (e == HPE_HEADER_OVERFLOW)
			return -EFBIG;
		if (e != HPE_OK && e != HPE_PAUSED)
			return -EPROTO;
		if (e == HPE_OK && used != (size_t)n)
			return -EPROTO;
		if (n == 0 && !a->complete)
			return -EPROTO; /* connection closed mid-answer */
	}
	*status = parser.status_code;
	return 0;
}

int worker_broker_post(const char *socket_path, const char *route, const char *body, size_t len,
		       uint64_t deadline_ms, unsigned *status, json_object **out)
{
	*status = 0;
	*out = NULL;
	cleanup_close int fd = connect_broker(socket_path, deadline_ms);
	if (fd < 0)
		return fd;

	/* Exactly the four headers the broker accepts (HACKING.md), nothing guest-chosen. */
	cleanup_free char *head = rts_xasprintf("POST %s HTTP/1.1\r\n"
						"Host: broker\r\n"
						"Authorization: Bearer " RTS_DUMMY_KEY "\r\n"
						"Content-Type: application/json\r\n"
						"Content-Length: %zu\r\n"
						"\r\n",
						route, len);
	int r = send_all(fd, head, strlen(head), deadline_ms);
	if (r < 0)
		return r;
	r = send_all(fd, body, len, deadline_ms);
	if (r < 0)
		return r;

	struct answer a = {0};
	r = read_answer(fd, deadline_ms, &a, status);
	cleanup_free char *answer_body = a.body;
	if (r < 0)
		return r;

	const char *why = NULL;
	json_object *o = NULL;
	if (rts_json_parse(answer_body ? answer_body : "", a.len, RTS_JSON_DEPTH_MAX, &o, &why) < 0) {
		if (*status >= 200 && *status < 300)
			return -EBADMSG;
		o = NULL;
	}
	*out = o;
	return 0;
}
