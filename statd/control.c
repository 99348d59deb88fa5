/* SPDX-License-Identifier: Apache-2.0 */
/* control.sock: newline-delimited JSON requests from the bot and the admin CLI.
 *
 * Framing: a line is at most RTS_CONTROL_RICH_LINE_MAX bytes before its newline (a rich
 * message carries images). A longer line is skipped up to its newline and answered with
 * line_too_long; the connection stays usable. The bytes of lines longer than
 * RTS_CONTROL_LINE_MAX count against one budget for all connections
 * (STATD_BIG_LINES_MAX): a line that would pass it is skipped the same way and answered
 * with busy.
 * Every line gets exactly one answer, in the order of the lines: each line takes an answer
 * slot when it is read, and slots are written strictly in order, so an answer that waits for
 * a channel queue (mode, fresh) holds back the answers of later lines on that connection.
 * Events of sandboxed turns are written as they happen, but never before the route answer
 * of their own message.
 *
 * Peers are not authenticated beyond the socket's file mode (0660: the service account and
 * the socket's group, which the bot's account may be in); the peer uid is logged at debug
 * level. Every field of every request is validated here and in request.c; queue.c only sees
 * clean values. A line that may have been a message and every message get an answer with a
 * route (request.h: routing fails closed). */
#include "config.h"

#include <sys/socket.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "statd/statd.h"

/* Answer slots held back behind a pending one are charged this much on top of their text,
 * so a flood of tiny requests still reaches the output bound. */
#define SLOT_OVERHEAD 64u
#define READ_CHUNK (64u * 1024u)
#define REQUEST_JSON_DEPTH 16

struct statd_slot {
	struct statd_slot *next;
	uint64_t seq;
	char *data; /* the answer line; NULL while pending */
	size_t len;
};

struct statd_conn {
	struct statd *d;
	struct statd_conn *prev, *next; /* d->conns while open */
	unsigned refs;			/* one for being open, one per queue item / turn */
	int fd;
	sd_event_source *io;
	uint64_t serial; /* for log lines */
	bool dead;	 /* dropped or closed: answers and events are discarded */
	bool read_eof;
	bool discarding;	  /* inside an over-long line */
	const char *discard_code; /* its answer: line_too_long or busy */

	char *in; /* the current line, at most RTS_CONTROL_RICH_LINE_MAX bytes; grows on demand */
	size_t in_len, in_cap;
	uint64_t line_started_ms; /* when the current incomplete line began; 0: none */

	char *out; /* bytes ready to write: out[out_pos..out_len) */
	size_t out_len, out_pos, out_cap;

	struct statd_slot *slots, *slots_tail;
	size_t slots_held; /* bytes charged for slots, see SLOT_OVERHEAD */
	uint64_t next_seq;
};

static void conn_drop(struct statd_conn *c, const char *why);

struct statd_conn *statd_conn_ref(struct statd_conn *c)
{
	c->refs++;
	return c;
}

/* What c->in holds that counts against d->big_lines: all of it once it is larger than an
 * ordinary line. */
static size_t big_charge(size_t cap)
{
	return cap > RTS_CONTROL_LINE_MAX ? cap : 0;
}

/* Give the line buffer back (after a line, when the connection goes). */
static void conn_in_release(struct statd_conn *c)
{
	c->d->big_lines -= big_charge(c->in_cap);
	free(c->in);
	c->in = NULL;
	c->in_cap = 0;
}

/* Room for want bytes of the current line; false when the budget for long lines has no
 * room left. */
static bool conn_in_reserve(struct statd_conn *c, size_t want)
{
	if (want <= c->in_cap)
		return true;
	size_t cap = c->in_cap ? c->in_cap : 4096;
	while (cap < want)
		cap *= 2;
	if (cap > RTS_CONTROL_RICH_LINE_MAX)
		cap = RTS_CONTROL_RICH_LINE_MAX;
	size_t more = big_charge(cap) - big_charge(c->in_cap);
	if (more > STATD_BIG_LINES_MAX - c->d->big_lines)
		return false;
	c->d->big_lines += more;
	c->in = rts_xrealloc(c->in, cap);
	c->in_cap = cap;
	return true;
}

static void conn_free(struct statd_conn *c)
{
	conn_in_release(c);
	free(c->out);
	free(c);
}

static bool conn_idle(const struct statd_conn *c)
{
	return !c->slots && c->out_pos == c->out_len && c->refs == 1;
}

void statd_conn_unref(struct statd_conn *c)
{
	if (!c)
		return;
	if (--c->refs == 0) {
		conn_free(c);
		return;
	}
	/* A client that finished sending and got everything it waited for is closed. */
	if (!c->dead && c->read_eof && conn_idle(c))
		conn_drop(c, NULL);
}

static void conn_update_events(struct statd_conn *c)
{
	if (c->dead)
		return;
	uint32_t ev = (c->read_eof ? 0 : EPOLLIN) | (c->out_pos < c->out_len ? EPOLLOUT : 0);
	int r = sd_event_source_set_io_events(c->io, ev);
	if (r < 0)
		conn_drop(c, "cannot update its event mask");
}

static size_t conn_pending_bytes(const struct statd_conn *c)
{
	return (c->out_len - c->out_pos) + c->slots_held;
}

/* A client that does not read its output must not make us buffer without bound; turns it
 * started keep running, their events are discarded. */
static bool conn_check_bound(struct statd_conn *c)
{
	if (conn_pending_bytes(c) <= STATD_CONN_OUTPUT_MAX)
		return true;
	conn_drop(c, "too much unread output");
	return false;
}

static void out_append(struct statd_conn *c, const char *data, size_t len)
{
	if (c->out_pos > 0 && c->out_pos == c->out_len)
		c->out_pos = c->out_len = 0;
	if (c->out_cap - c->out_len < len) {
		if (c->out_pos > 0) {
			memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
			c->out_len -= c->out_pos;
			c->out_pos = 0;
		}
		if (c->out_cap - c->out_len < len) {
			size_t want = c->out_len + len;
			size_t cap = c->out_cap ? c->out_cap : 4096;
			while (cap < want)
				cap *= 2;
			c->out = rts_xrealloc(c->out, cap);
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
}

/* Move every answer at the front that is ready to the output buffer. */
static void slots_flush(struct statd_conn *c)
{
	while (c->slots && c->slots->data) {
		struct statd_slot *s = c->slots;
		c->slots = s->next;
		if (!c->slots)
			c->slots_tail = NULL;
		c->slots_held -= s->len + SLOT_OVERHEAD;
		out_append(c, s->data, s->len);
		free(s->data);
		free(s);
	}
}

static char *dump_line(json_object *o, size_t *len)
{
	char *s = rts_xasprintf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
									   JSON_C_TO_STRING_NOSLASHESCAPE));
	*len = strlen(s);
	return s;
}

static uint64_t slot_push(struct statd_conn *c)
{
	struct statd_slot *s = rts_xcalloc(1, sizeof(*s));
	s->seq = c->next_seq++;
	if (c->slots_tail)
		c->slots_tail->next = s;
	else
		c->slots = s;
	c->slots_tail = s;
	c->slots_held += SLOT_OVERHEAD;
	return s->seq;
}

void statd_conn_answer(struct statd_conn *c, uint64_t seq, json_object *answer)
{
	cleanup_json json_object *a = answer;
	if (c->dead)
		return;
	struct statd_slot *s = c->slots;
	while (s && !(s->seq == seq && !s->data))
		s = s->next;
	if (!s) {
		log_error("control client #%llu: no pending answer slot %llu (bug)", (unsigned long long)c->serial,
			  (unsigned long long)seq);
		return;
	}
	s->data = dump_line(a, &s->len);
	c->slots_held += s->len;
	slots_flush(c);
	if (conn_check_bound(c))
		conn_update_events(c);
}

void statd_conn_event(struct statd_conn *c, uint64_t seq, json_object *ev)
{
	cleanup_json json_object *e = ev;
	if (c->dead)
		return;
	/* Still held back? Then the event goes right after its answer (and after earlier
	 * events of the same request). */
	struct statd_slot *after = NULL;
	for (struct statd_slot *s = c->slots; s && s->seq <= seq; s = s->next)
		if (s->seq == seq)
			after = s;
	size_t len;
	char *line = dump_line(e, &len);
	if (after) {
		struct statd_slot *s = rts_xcalloc(1, sizeof(*s));
		s->seq = seq;
		s->data = line;
		s->len = len;
		s->next = after->next;
		after->next = s;
		if (c->slots_tail == after)
			c->slots_tail = s;
		c->slots_held += len + SLOT_OVERHEAD;
	} else {
		out_append(c, line, len);
		free(line);
	}
	if (conn_check_bound(c))
		conn_update_events(c);
}

void statd_conn_forget(struct statd_conn *c, uint64_t seq)
{
	if (c->dead)
		return;
	for (struct statd_slot **q = &c->slots; *q; q = &(*q)->next) {
		struct statd_slot *s = *q;
		if (s->seq != seq || s->data)
			continue;
		*q = s->next;
		if (c->slots_tail == s) {
			/* The new tail is the slot before s, if any. */
			struct statd_slot *t = c->slots;
			while (t && t->next)
				t = t->next;
			c->slots_tail = t;
		}
		c->slots_held -= SLOT_OVERHEAD;
		free(s);
		break;
	}
	/* Answers held back behind it may go now. */
	slots_flush(c);
	conn_update_events(c);
}

/* Close the socket and stop answering. The struct lives on while queue items or turns hold
 * references; whatever they answer later is discarded. */
static void conn_drop(struct statd_conn *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	if (why)
		log_warning("control client #%llu dropped: %s", (unsigned long long)c->serial, why);
	else
		log_debug("control client #%llu closed", (unsigned long long)c->serial);
	c->io = sd_event_source_disable_unref(c->io);
	close(c->fd);
	c->fd = -1;
	conn_in_release(c);
	c->in_len = 0;
	while (c->slots) {
		struct statd_slot *s = c->slots;
		c->slots = s->next;
		free(s->data);
		free(s);
	}
	c->slots_tail = NULL;
	c->slots_held = 0;
	c->out_pos = c->out_len = 0;
	struct statd *d = c->d;
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	d->n_conns--;
	statd_conn_unref(c);
}

/* ---- answers ---- */

json_object *statd_error_answer(json_object *id, const char *code)
{
	json_object *a = json_object_new_object();
	if (id)
		json_object_object_add(a, "id", json_object_get(id));
	json_object_object_add(a, "error", json_object_new_string(code));
	return a;
}

/* An error answer with a human-readable detail (a static string: never client data). */
static json_object *error_detail(json_object *id, const char *code, const char *detail)
{
	json_object *a = statd_error_answer(id, code);
	if (detail)
		json_object_object_add(a, "detail", json_object_new_string(detail));
	return a;
}

/* ---- operations ---- */

/* A message: its answer always carries a route (request.h), decided before anything can
 * refuse it. Invalid requests queue and run nothing. */
static json_object *op_message(struct statd_conn *c, uint64_t seq, json_object *req)
{
	struct statd_message m;
	const char *code, *detail;
	bool valid = statd_message_parse(req, &m, &code, &detail) == 0;
	enum statd_mode mode = STATD_MODE_OFF;
	if (m.channel)
		(void)statd_state_get(c->d->state, m.channel, &mode); /* never switched: off */
	enum statd_route route = statd_message_route(&m, valid, mode);
	if (!valid || route != STATD_ROUTE_SANDBOX) {
		statd_metrics_message(c->d, route);
		return statd_message_answer(m.id, route, valid ? NULL : code, valid ? NULL : detail);
	}
	/* From here the channel is sandboxed: every refusal drops. */
	json_object *a = NULL;
	if (statd_message_check_mode(&m, mode, &code, &detail) < 0)
		a = statd_message_answer(m.id, STATD_ROUTE_DROP, code, detail);
	else if (mode == STATD_MODE_RICH) {
		const struct rts_rich_conf *rich = &c->d->cfg->rich;
		const char *profile = statd_state_profile(c->d->state, m.channel);
		if (!rich->enabled)
			a = statd_message_answer(m.id, STATD_ROUTE_DROP, STATD_E_RICH_UNAVAILABLE, NULL);
		/* The config lost the profile since the channel was switched: fail closed. */
		else if (!profile || !rts_rich_profile_find(rich, profile))
			a = statd_message_answer(m.id, STATD_ROUTE_DROP, STATD_E_UNKNOWN_PROFILE, NULL);
	}
	/* NULL: queued (sandbox); an answer: refused (drop). */
	if (!a)
		a = statd_control_message(c->d, c, seq, &m, mode == STATD_MODE_RICH);
	statd_metrics_message(c->d, a ? STATD_ROUTE_DROP : STATD_ROUTE_SANDBOX);
	return a;
}

/* The answer to a line that may have been a message but cannot be read as one (not JSON,
 * too long, no op or an unknown one): routing fails closed, so it says "drop" too. */
static json_object *refuse_unread(json_object *id, const char *code, const char *detail)
{
	return statd_message_answer(id, STATD_ROUTE_DROP, code, detail);
}

/* One request line. Returns the answer, or NULL when a queue item answers later. Every
 * field of every operation is validated by request.c; the queue sees clean values. */
static json_object *request_handle(struct statd_conn *c, uint64_t seq, const char *line, size_t len)
{
	cleanup_json json_object *req = NULL;
	const char *why = NULL;
	if (rts_json_parse_strict(line, len, REQUEST_JSON_DEPTH, &req, &why) < 0)
		return refuse_unread(NULL, STATD_E_INVALID_JSON, why);
	if (!json_object_is_type(req, json_type_object))
		return refuse_unread(NULL, STATD_E_INVALID_JSON, "a request must be a JSON object");
	struct statd_head h;
	const char *detail = NULL;
	if (statd_head_parse(req, &h, &detail) < 0)
		return refuse_unread(h.id, STATD_E_INVALID_REQUEST, detail);
	if (strcmp(h.op, "message") == 0)
		return op_message(c, seq, req);
	/* The precheck runner's ops (statd/precheck.c): never a message, so never a route. */
	if (strcmp(h.op, "precheck") == 0)
		return statd_precheck_op(c->d, c, seq, req);
	if (strcmp(h.op, "precheck_describe") == 0)
		return statd_precheck_describe(c->d, req);
	enum statd_op op;
	if (statd_op_lookup(h.op, &op) < 0)
		return refuse_unread(h.id, STATD_E_UNKNOWN_OP, NULL);
	struct statd_request r;
	if (statd_request_parse(req, op, &r, &detail) < 0)
		return error_detail(r.id, STATD_E_INVALID_REQUEST, detail);
	switch (op) {
	case STATD_OP_MODE:
		return statd_control_mode(c->d, c, seq, r.id, r.channel, r.mode, r.profile);
	case STATD_OP_STATUS:
		return statd_control_status(c->d, r.id, r.channel);
	case STATD_OP_FRESH:
		return statd_control_fresh(c->d, c, seq, r.id, r.channel);
	case STATD_OP_CHANNELS:
		return statd_control_channels(c->d, r.id);
	case STATD_OP_CANCEL:
		return statd_control_cancel(c->d, r.id, r.channel);
	case STATD_OP_METRICS:
		return statd_control_metrics(c->d, c, seq, r.id);
	}
	abort();
}

static void conn_line(struct statd_conn *c, const char *line, size_t len)
{
	uint64_t seq = slot_push(c);
	json_object *answer = request_handle(c, seq, line, len);
	if (answer)
		statd_conn_answer(c, seq, answer);
	else if (!c->dead)
		conn_check_bound(c);
	/* A long line's buffer goes back to the budget at once. */
	if (c->in_cap > RTS_CONTROL_LINE_MAX)
		conn_in_release(c);
}

static void conn_too_long(struct statd_conn *c)
{
	uint64_t seq = slot_push(c);
	char detail[64];
	if (c->discard_code && strcmp(c->discard_code, STATD_E_BUSY) == 0)
		snprintf(detail, sizeof(detail), "statd is reading other long requests; try again");
	else
		snprintf(detail, sizeof(detail), "a request line is at most %u bytes", RTS_CONTROL_RICH_LINE_MAX);
	statd_conn_answer(c, seq, refuse_unread(NULL, c->discard_code ? c->discard_code : STATD_E_LINE_TOO_LONG, detail));
}

/* Skip the rest of the current line, to be answered with code. */
static void conn_discard(struct statd_conn *c, const char *code)
{
	c->discarding = true;
	c->discard_code = code;
	c->in_len = 0;
	if (c->in_cap > RTS_CONTROL_LINE_MAX)
		conn_in_release(c);
}

/* Split input into lines. Stops early when the connection is dropped meanwhile. */
static void conn_feed(struct statd_conn *c, const char *p, size_t n)
{
	while (n > 0 && !c->dead) {
		const char *nl = memchr(p, '\n', n);
		size_t seg = nl ? (size_t)(nl - p) : n;
		if (!c->discarding) {
			if (seg > RTS_CONTROL_RICH_LINE_MAX - c->in_len) {
				conn_discard(c, STATD_E_LINE_TOO_LONG);
			} else if (!conn_in_reserve(c, c->in_len + seg)) {
				log_warning("control client #%llu: a long request line does not fit the %u MiB statd keeps "
					    "for them; answered busy",
					    (unsigned long long)c->serial, STATD_BIG_LINES_MAX >> 20);
				conn_discard(c, STATD_E_BUSY);
			} else {
				memcpy(c->in + c->in_len, p, seg);
				c->in_len += seg;
			}
		}
		if (!nl) {
			if (!c->line_started_ms && (c->in_len > 0 || c->discarding))
				c->line_started_ms = rts_now_ms();
			return;
		}
		c->line_started_ms = 0;
		if (c->discarding) {
			c->discarding = false;
			conn_too_long(c);
		} else {
			size_t len = c->in_len;
			c->in_len = 0;
			conn_line(c, c->in, len);
		}
		p = nl + 1;
		n -= seg + 1;
	}
}

/* The client closed its sending side: a last unterminated line still counts. */
static void conn_eof(struct statd_conn *c)
{
	c->read_eof = true;
	if (c->discarding) {
		c->discarding = false;
		conn_too_long(c);
	} else if (c->in_len > 0) {
		size_t len = c->in_len;
		c->in_len = 0;
		conn_line(c, c->in, len);
	}
}

static void conn_write(struct statd_conn *c)
{
	while (!c->dead && c->out_pos < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			conn_drop(c, errno == EPIPE || errno == ECONNRESET ? NULL : "write failed");
			return;
		}
		c->out_pos += (size_t)n;
	}
	if (c->out_pos == c->out_len)
		c->out_pos = c->out_len = 0;
}

static int conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct statd_conn *c = statd_conn_ref(userdata);
	if (revents & EPOLLERR)
		conn_drop(c, NULL);
	if (!c->dead && !c->read_eof && (revents & (EPOLLIN | EPOLLHUP))) {
		char buf[READ_CHUNK];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			conn_feed(c, buf, (size_t)n);
		else if (n == 0)
			conn_eof(c);
		else if (errno != EAGAIN && errno != EINTR)
			conn_drop(c, errno == ECONNRESET ? NULL : "read failed");
	}
	if (!c->dead)
		conn_write(c);
	/* Hang-up with nothing left to read: nobody is listening for answers any more. */
	if (!c->dead && (revents & EPOLLHUP) && c->read_eof)
		conn_drop(c, NULL);
	conn_update_events(c);
	/* Dropping our reference closes a client that is done (see statd_conn_unref). */
	statd_conn_unref(c);
	return 0;
}

/* Re-enable accepting after running out of file descriptors. */
static int accept_resume(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd *d = userdata;
	if (d->listen_src && !d->stopping)
		sd_event_source_set_enabled(d->listen_src, SD_EVENT_ON);
	sd_event_source_disable_unref(s);
	return 0;
}

int statd_control_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct statd *d = userdata;
	for (int i = 0; i < 16; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN)
				return 0;
			/* Out of fds or memory: the socket stays readable, so pause instead of
			 * spinning on it. */
			log_warning_errno(errno, "control socket: accept failed, pausing for 1 s: %m");
			sd_event_source_set_enabled(s, SD_EVENT_OFF);
			if (sd_event_add_time_relative(d->ev, NULL, CLOCK_MONOTONIC, 1000000, 0, accept_resume, d) < 0)
				sd_event_source_set_enabled(s, SD_EVENT_ON);
			return 0;
		}
		if (d->n_conns >= STATD_CONNS_MAX) {
			close(cfd);
			d->conns_refused++;
			uint64_t now = rts_now_ms();
			if (d->conns_refused_logged_ms == 0 || now - d->conns_refused_logged_ms >= STATD_REFUSAL_LOG_MS) {
				log_warning("control socket: %u clients connected, the most allowed; refused %llu "
					    "more since the last such warning (at most one every %u s)",
					    STATD_CONNS_MAX, (unsigned long long)d->conns_refused,
					    STATD_REFUSAL_LOG_MS / 1000);
				d->conns_refused = 0;
				d->conns_refused_logged_ms = now;
			}
			continue;
		}
		struct statd_conn *c = rts_xcalloc(1, sizeof(*c));
		c->d = d;
		c->fd = cfd;
		c->refs = 1;
		c->serial = ++d->conn_serial;
		int r = sd_event_add_io(d->ev, &c->io, cfd, EPOLLIN, conn_io, c);
		if (r < 0) {
			log_error_errno(r, "control socket: cannot watch a new client: %m");
			close(cfd);
			free(c);
			continue;
		}
		c->next = d->conns;
		if (d->conns)
			d->conns->prev = c;
		d->conns = c;
		d->n_conns++;
		struct ucred uc;
		socklen_t ul = sizeof(uc);
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
			log_debug("control client #%llu connected (uid %lu, pid %ld)", (unsigned long long)c->serial,
				  (unsigned long)uc.uid, (long)uc.pid);
	}
	return 0;
}

static int sweep(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct statd *d = userdata;
	uint64_t now = rts_now_ms();
	for (struct statd_conn *c = d->conns, *next; c; c = next) {
		next = c->next;
		if (c->line_started_ms && now - c->line_started_ms > STATD_LINE_DEADLINE_MS) {
			/* conn_drop() unlinks only c, so next stays valid. */
			statd_conn_ref(c);
			conn_drop(c, "a request line stayed incomplete for 30 s");
			statd_conn_unref(c);
		}
	}
	/* Timer sources are one-shot: re-arm and re-enable. */
	int r = sd_event_source_set_time(s, usec + STATD_SWEEP_MS * 1000ULL);
	if (r >= 0)
		r = sd_event_source_set_enabled(s, SD_EVENT_ON);
	return r;
}

int statd_control_start_sweep(struct statd *d)
{
	uint64_t now;
	int r = sd_event_now(d->ev, CLOCK_MONOTONIC, &now);
	if (r < 0)
		return r;
	r = sd_event_add_time(d->ev, NULL, CLOCK_MONOTONIC, now + STATD_SWEEP_MS * 1000ULL, 100000, sweep, d);
	return r < 0 ? r : 0;
}

void statd_control_close_all(struct statd *d)
{
	while (d->conns) {
		struct statd_conn *c = statd_conn_ref(d->conns);
		slots_flush(c);
		conn_write(c);
		conn_drop(c, NULL);
		statd_conn_unref(c);
	}
}
