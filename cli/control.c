/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <poll.h>

#include <sys/socket.h>

#include "cli/control.h"
#include "common/json.h"
#include "common/sock.h"
#include "common/util.h"

/* Nesting of the deepest answer (channels: object, array, object) plus generous slack. */
#define CLI_ANSWER_DEPTH 16

struct cli_control {
	int fd;
	int64_t next_id;
	char *buf;  /* CLI_ANSWER_MAX + 1 bytes: one full line and its newline */
	size_t len; /* bytes received and not yet consumed */
};

int cli_control_open(const char *runtime_dir, unsigned retry_ms, struct cli_control **out)
{
	cleanup_free char *path = rts_runtime_path(runtime_dir, RTS_SOCK_CONTROL);
	int fd = rts_connect_unix(path, SOCK_STREAM, retry_ms);
	if (fd < 0)
		return fd;
	struct cli_control *c = rts_xcalloc(1, sizeof(*c));
	c->fd = fd;
	c->next_id = 1;
	c->buf = rts_xmalloc(CLI_ANSWER_MAX + 1);
	*out = c;
	return 0;
}

void cli_control_free(struct cli_control *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

int cli_control_send(struct cli_control *c, json_object *req, int64_t *id)
{
	*id = c->next_id++;
	json_object_object_add(req, "id", json_object_new_int64(*id));
	cleanup_free char *line = rts_json_dump(req);
	size_t len = strlen(line);
	if (len > RTS_CONTROL_RICH_LINE_MAX)
		return -E2BIG;
	line = rts_xrealloc(line, len + 2);
	line[len++] = '\n';
	line[len] = '\0';
	for (size_t off = 0; off < len;) {
		/* MSG_NOSIGNAL: a closed control socket is an error to report, not a SIGPIPE. */
		ssize_t n = send(c->fd, line + off, len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)n;
	}
	return 0;
}

/* Take the next complete line out of the buffer, reading more as needed. On success
 * *line points into c->buf, NUL-terminated in place of the newline; *consumed is the
 * number of bytes to drop once the caller is done with it. */
static int control_next_line(struct cli_control *c, uint64_t deadline_ms, char **line, size_t *consumed)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			*nl = '\0';
			*line = c->buf;
			*consumed = (size_t)(nl - c->buf) + 1;
			return 0;
		}
		if (c->len >= CLI_ANSWER_MAX + 1)
			return -EMSGSIZE;
		if (deadline_ms) {
			uint64_t now = rts_now_ms();
			if (now >= deadline_ms)
				return -ETIMEDOUT;
			struct pollfd p = {.fd = c->fd, .events = POLLIN};
			uint64_t left = deadline_ms - now;
			int pr = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
			if (pr < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			if (pr == 0)
				return -ETIMEDOUT;
		}
		ssize_t n = read(c->fd, c->buf + c->len, CLI_ANSWER_MAX + 1 - c->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ECONNRESET; /* a partial last line is as good as none */
		c->len += (size_t)n;
	}
}

static void control_consume(struct cli_control *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

static bool answer_has_id(json_object *o, int64_t id)
{
	json_object *v = rts_json_get(o, "id");
	return v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == id;
}

/* What cli_control_wait() and cli_control_wait_any() wait for. */
enum wait_for {
	WAIT_ANSWER,
	WAIT_EVENT,
	WAIT_EITHER,
};

static int wait_line(struct cli_control *c, int64_t id, enum wait_for want, uint64_t deadline_ms, json_object **out,
		     const char **why);

int cli_control_wait(struct cli_control *c, int64_t id, bool want_event, uint64_t deadline_ms, json_object **out,
		     const char **why)
{
	return wait_line(c, id, want_event ? WAIT_EVENT : WAIT_ANSWER, deadline_ms, out, why);
}

int cli_control_wait_any(struct cli_control *c, int64_t id, uint64_t deadline_ms, json_object **out, const char **why)
{
	return wait_line(c, id, WAIT_EITHER, deadline_ms, out, why);
}

static int wait_line(struct cli_control *c, int64_t id, enum wait_for want, uint64_t deadline_ms, json_object **out,
		     const char **why)
{
	*out = NULL;
	*why = NULL;
	for (;;) {
		char *line = NULL;
		size_t consumed = 0;
		int r = control_next_line(c, deadline_ms, &line, &consumed);
		if (r < 0)
			return r;
		json_object *o = NULL;
		r = rts_json_parse(line, consumed - 1, CLI_ANSWER_DEPTH, &o, why);
		control_consume(c, consumed);
		if (r < 0)
			return -EBADMSG;
		if (!json_object_is_type(o, json_type_object)) {
			json_object_put(o);
			*why = "an answer line is not a JSON object";
			return -EBADMSG;
		}
		bool is_event = rts_json_get(o, "event") != NULL;
		/* statd answers a request it could not parse without an id; with one request in
		 * flight that answer is ours. */
		bool anonymous_error = !rts_json_get(o, "id") && rts_json_get(o, "error");
		bool kind_ok = want == WAIT_EITHER || is_event == (want == WAIT_EVENT);
		if ((answer_has_id(o, id) || (anonymous_error && want != WAIT_EVENT)) && kind_ok) {
			*out = o;
			return 0;
		}
		/* One request per connection in this CLI, so another id can only be noise from a
		 * newer statd; ignore it rather than guess what it means. */
		json_object_put(o);
	}
}
