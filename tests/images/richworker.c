/* SPDX-License-Identifier: Apache-2.0 */
/* richworker: a test-only stand-in for the rich (Pi) worker. Never installed.
 *
 * It runs in a rich channel's long-lived container (static, FROM scratch:
 * tests/images/Dockerfile.richworker) and speaks the worker protocol of brokerd's rich listener
 * (DESIGN.md 8.5; helpers' rich-design.md section 4) over /run/broker/broker.sock: HTTP/1.1
 * over a Unix socket, answers parsed by libhttp-parser, JSON by json-c, server-sent events by
 * the small line parser below (the SSE framing only: "event:"/"data:" lines and blank-line
 * dispatch; the data is parsed as JSON by json-c).
 *
 *   1. POST /worker/ready with its capabilities (configurable, see "Start-up" below);
 *   2. long polls POST /worker/next; for each turn handed out:
 *   3. runs the turn's directives (below) in order; unless one of them called the model or
 *      "no-model" is given, one streamed POST /anthropic/v1/messages with the turn text
 *      (and the turn's images) as the user message, read to the end of its event stream;
 *   4. POST /worker/result {"turnId","text","files"} with a report as the text;
 *   5. runs the directives marked "after" (re-announce readiness, a second long poll...).
 * When the broker socket fails (a daemon restart re-creates it) it re-announces readiness,
 * as the real worker must, and goes on polling.
 *
 * Report. The reply text is one JSON object: {"worker":"richworker","turnId","input":{what
 * the turn input held: speaker, text length, model, maxOutputTokens, effort, prompt/memory
 * sizes, tools, requireCapabilities, limits, images, attachments and whether each file is
 * there},"steps":[one object per directive run: "do" (its name), "status" (HTTP status, 0
 * when there was no answer), "error" (a transport errno name), "early" (an answer came before
 * the body was sent), "closed" (the broker closed the connection first), "ms", and for model
 * calls "events" (SSE event names), "text" (the streamed text, cut to 2,000 characters),
 * "stop" (message_stop seen), "streamError" (an "event: error" type), "ttfbMs"],
 * "between":[what happened since the previous reply: results posted, readiness announced,
 * second polls ...]}. Every step and event is also written to stdout as one JSON line
 * ({"rw":...}), so the container's log carries it. Tests parse the reply with json.loads.
 *
 * Directives: "#rw NAME ARGS..." anywhere in the turn text; the arguments run to the end of
 * the line or the next word that starts with '#' (another directive, ours or the fake's).
 * The table DIRECTIVES below is the one list (name, arguments, when it runs, what it does);
 * "#rw help" reports it. A step runs where it stands, a
 * modifier ("mod") changes the reply packet, an "after" directive runs once the reply has
 * been posted. Unknown directives are reported as {"do":NAME,"error":"unknown directive"}.
 * The directives of tests/fakes/fake_anthropic.py ("#sleep", "#split", ...) travel with the
 * turn text to the upstream and steer the answer there.
 *
 * Start-up: /workspace/.richworker.json (RW_CONFIG overrides the path), optional, read at
 * start: {"ready": "full"|"none"|"empty"|"absent"|"bad"|"partial"|"history"|"never"
 * (default "full": both capabilities, privateHistory false; "history": both and
 * privateHistory true; "partial": privateTo only; "none": both false; "empty": an empty
 * JSON object; "absent": no body; "bad": a malformed declaration; "never": do not announce),
 * "readyDelayMs": N, "startup": ["#rw mcp docs tools/list", ...] (directives run after the
 * announcement, before the first poll: the start-up scope), "dummy": the credential placeholder
 * of the Anthropic routes (default RW_DUMMY_KEY), "workerDummy": the bearer placeholder of the
 * worker, tool and MCP routes (default RW_WORKER_DUMMY_KEY)}. RW_SOCKET overrides the socket
 * path. A refused announcement is repeated every second (the socket may not exist yet, and a
 * "bad" declaration stays refused). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RW_SOCKET_DEFAULT "/run/broker/broker.sock"
#define RW_CONFIG_DEFAULT "/workspace/.richworker.json"
/* The placeholders sent instead of a credential: on the Anthropic routes an
 * sk-ant-api03-shaped one (the SDK would send it as x-api-key and keep to the API-key
 * dialect), on the worker, tool and MCP routes the sealed worker's RTS_DUMMY_KEY. */
#define RW_DUMMY_KEY "sk-ant-api03-roundtable-sandbox-dummy-key"
#define RW_WORKER_DUMMY_KEY "roundtable-sandbox-dummy-key"
#define RW_ANSWER_KEEP (4u << 20)       /* answer bytes kept for the report and JSON parsing */
#define RW_TURN_MAX (160u << 20)        /* a /worker/next answer (images up to 64 MiB, base64) */
#define RW_TEXT_SHOWN 2000              /* streamed text shown per model call */
#define RW_POLL_MS 60000                /* a long poll's bound: the broker answers 204 at 25 s */
#define RW_CALL_MS 660000               /* any other call's bound: above the 600 s turn limit */
#define RW_EARLY_MS 2000                /* how long to wait for an answer before sending a body */
#define RW_WAIT_FILE_MS 120000
#define RW_ARGS_MAX 8
#define RW_DIRECTIVES_MAX 64
#define RW_PARALLEL_MAX 32

/* ---- the directive table ---------------------------------------------------------------- */

enum when { STEP, MOD, AFTER };
struct turn;
struct dcall {
	const char *name;
	int argc;
	char *argv[RW_ARGS_MAX];
	char *rest[RW_ARGS_MAX]; /* rest[k]: the arguments from the k-th on, as written */
};
typedef void directive_fn(struct turn *t, const struct dcall *d, json_object *step);

static directive_fn do_model, do_calls, do_parallel, do_variant, do_effort, do_budget, do_thinking_off,
	do_adaptive, do_model_name, do_max_tokens, do_header, do_drop_header, do_beta, do_auth, do_route,
	do_get, do_beta_query, do_count_tokens, do_big_request, do_no_stream, do_extra_field, do_stall_read,
	do_abort_stream, do_silent, do_slow_header, do_slow_body, do_connections, do_result_outside,
	do_next_during, do_ready_during, do_tool, do_private, do_mcp, do_mcp_batch, do_compact,
	do_compact_report, do_compact_big, do_crash, do_hang, do_log, do_sleep, do_wait_file, do_read_file,
	do_write_file, do_symlink, do_list_dir, do_help, do_no_model, do_mod, do_after;

static const struct directive {
	const char *name;
	enum when when;
	int min_args, max_args;
	const char *args;
	const char *what;
	directive_fn *run;
} DIRECTIVES[] = {
	/* model calls: POST /anthropic/v1/messages, streamed, read to the end */
	{"model", STEP, 0, 0, "", "one normal model call (the default when no directive calls the model)", do_model},
	{"no-model", STEP, 0, 0, "", "make no model call this turn", do_no_model},
	{"calls", STEP, 1, 1, "N", "N model calls one after the other (maxCalls)", do_calls},
	{"parallel", STEP, 1, 1, "N", "N model calls at once, each on its own connection (in-flight slots)", do_parallel},
	{"native-tool", STEP, 0, 1, "[TYPE]", "offer a native server tool (default web_search_20250305)", do_variant},
	{"mcp-servers", STEP, 0, 0, "", "ask for the API's own MCP connector (mcp_servers)", do_variant},
	{"url-image", STEP, 0, 0, "", "an image block with a URL source", do_variant},
	{"file-image", STEP, 0, 0, "", "an image block with a file_id source", do_variant},
	{"document", STEP, 0, 0, "", "a document block (base64 PDF)", do_variant},
	{"image", STEP, 0, 0, "", "a base64 PNG image block (the allowed control for url-image)", do_variant},
	{"remote-ref", STEP, 0, 0, "", "a custom tool whose input_schema has a remote $ref", do_variant},
	{"local-ref", STEP, 0, 0, "", "a custom tool whose input_schema has a local $ref (control)", do_variant},
	{"tool-use", STEP, 0, 0, "", "a history with a custom tool_use/tool_result pair (control)", do_variant},
	{"effort", STEP, 1, 1, "LEVEL", "adaptive thinking with output_config.effort LEVEL", do_effort},
	{"budget", STEP, 1, 1, "N", "thinking enabled with budget_tokens N", do_budget},
	{"adaptive", STEP, 0, 0, "", "adaptive thinking without an effort", do_adaptive},
	{"no-thinking", STEP, 0, 0, "", "thinking disabled", do_thinking_off},
	{"model-name", STEP, 1, 1, "NAME", "ask for model NAME", do_model_name},
	{"max-tokens", STEP, 1, 1, "N", "ask for max_tokens N", do_max_tokens},
	{"header", STEP, 2, -1, "NAME VALUE", "one more request header on a model call", do_header},
	{"drop-header", STEP, 1, 1, "NAME", "leave out one of the SDK's headers", do_drop_header},
	{"beta", STEP, 1, 1, "VALUE", "anthropic-beta: VALUE", do_beta},
	{"auth", STEP, 1, 2, "dummy|bearer|none|real VALUE", "the credential header of a model call", do_auth},
	{"route", STEP, 1, 1, "PATH", "POST the normal body to PATH (an account route, say)", do_route},
	{"get", STEP, 1, 1, "PATH", "GET PATH", do_get},
	{"beta-query", STEP, 0, 0, "", "POST /anthropic/v1/messages?beta=true", do_beta_query},
	{"count-tokens", STEP, 0, 0, "", "POST /anthropic/v1/messages/count_tokens", do_count_tokens},
	{"big-request", STEP, 1, 1, "BYTES", "a model call whose body is BYTES long (padding text)", do_big_request},
	{"no-stream", STEP, 0, 0, "", "a model call with stream false", do_no_stream},
	{"extra-field", STEP, 2, -1, "NAME JSON", "one more top-level body field", do_extra_field},
	{"stall-read", STEP, 1, 1, "MS", "read one event, read nothing for MS, read the rest (backpressure)", do_stall_read},
	{"abort-stream", STEP, 0, 0, "", "close the connection after the first event", do_abort_stream},
	/* the listener's bounds */
	{"silent", STEP, 1, 1, "N", "send the head and N body bytes, then nothing; report when the broker gives up", do_silent},
	{"slow-header", STEP, 0, 0, "", "send half a request head, then nothing (header deadline)", do_slow_header},
	{"slow-body", STEP, 1, 1, "MS", "a model call whose body comes in two halves MS apart", do_slow_body},
	{"connections", STEP, 1, 1, "N", "hold N connections with half a head each, then make one model call", do_connections},
	/* the worker protocol */
	{"result-outside", STEP, 0, 1, "[other-id|none]", "a /worker/result for another turn id (or with none) during the turn", do_result_outside},
	{"next-during", STEP, 0, 0, "", "a /worker/next while the turn is admitted", do_next_during},
	{"ready-during", STEP, 1, 1, "CAPS", "a /worker/ready with CAPS during the turn", do_ready_during},
	{"no-result", MOD, 0, 0, "", "post no reply packet", do_mod},
	{"big-result", MOD, 1, 1, "CHARS", "the reply text padded to CHARS characters", do_mod},
	{"result-bytes", MOD, 1, 1, "BYTES", "announce a BYTES-long reply packet; send the body only if not answered first", do_mod},
	{"result-slow", MOD, 1, 1, "MS", "send the reply packet's body in two halves MS apart", do_mod},
	{"result-twice", MOD, 0, 0, "", "two reply packets at once for the turn", do_mod},
	{"files", MOD, 2, 4, "N SIZE [NAME [MIME]]", "N reply files of SIZE bytes (NAME for all of them: duplicates)", do_mod},
	{"file-name", MOD, 1, 2, "NAME [MIME]", "one reply file named NAME (%XX decoded: %00 is NUL)", do_mod},
	{"result-after", AFTER, 0, 0, "", "after the reply, post another one for the same (settled) turn", do_after},
	{"reconnect", AFTER, 1, 3, "CAPS [gate FILE]", "after the reply (and once /workspace/FILE exists), announce readiness with CAPS", do_after},
	{"ready-none", AFTER, 0, 0, "", "= reconnect none", do_after},
	{"ready-bad", AFTER, 0, 0, "", "= reconnect bad", do_after},
	{"ready-empty", AFTER, 0, 0, "", "= reconnect absent (an empty body: an older worker)", do_after},
	{"poll2", AFTER, 0, 0, "", "after the reply, two long polls at once", do_after},
	{"abandon-poll", AFTER, 0, 0, "", "after the reply, a long poll closed unanswered", do_after},
	{"exit-after", AFTER, 0, 1, "[CODE]", "exit once the reply is posted", do_after},
	/* host tools, MCP, compaction */
	{"tool", STEP, 1, -1, "NAME [JSON]", "POST /tools/NAME with JSON (default {})", do_tool},
	{"private", STEP, 1, -1, "NAME [JSON]", "a host tool call, then a model call (blocked after privateTo?)", do_private},
	{"mcp", STEP, 2, -1, "SERVER METHOD [TOOL [JSON]]", "one JSON-RPC request (or notification) to /mcp/SERVER", do_mcp},
	{"mcp-batch", STEP, 1, 1, "SERVER", "a JSON-RPC batch to /mcp/SERVER", do_mcp_batch},
	{"compact", STEP, 0, 1, "[N]", "N /worker/compact requests", do_compact},
	{"compact-report", STEP, 0, 1, "[N]", "N /worker/compact reports", do_compact_report},
	{"compact-big", STEP, 1, 1, "BYTES", "a compact request about BYTES long", do_compact_big},
	/* the process and the workspace */
	{"crash", STEP, 0, 1, "[CODE]", "exit at once (default 3)", do_crash},
	{"hang", STEP, 0, 0, "", "stop doing anything, ignoring SIGTERM", do_hang},
	{"log", STEP, 1, 1, "N", "write N numbered lines to stdout", do_log},
	{"sleep", STEP, 1, 1, "MS", "pause MS", do_sleep},
	{"wait-file", STEP, 1, 1, "NAME", "pause until /workspace/NAME exists (120 s at most)", do_wait_file},
	{"read-file", STEP, 1, 1, "PATH", "report PATH's first 4 KiB", do_read_file},
	{"write-file", STEP, 1, -1, "PATH [TEXT]", "write TEXT to PATH (created, truncated)", do_write_file},
	{"symlink", STEP, 2, 2, "TARGET LINK", "plant a symlink LINK -> TARGET", do_symlink},
	{"list-dir", STEP, 1, 1, "PATH", "report PATH's entries", do_list_dir},
	{"help", STEP, 0, 0, "", "report this table", do_help},
};
#define N_DIRECTIVES (sizeof(DIRECTIVES) / sizeof(DIRECTIVES[0]))

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *sock_path = RW_SOCKET_DEFAULT;
static const char *dummy_key = RW_DUMMY_KEY;
static const char *worker_dummy_key = RW_WORKER_DUMMY_KEY;
static const char *ready_caps = "full";
static json_object *between; /* events since the last reply (an array) */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t hanging;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		abort();
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	return s;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s);
	char *p = xmalloc(n + 1);
	memcpy(p, s, n + 1);
	return p;
}

/* A growing byte buffer, always NUL-terminated. */
struct buf {
	char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	buf_add(b, s, (size_t)n);
	free(s);
}

/* Write one JSON line to stdout: the container log is the worker's own record. */
static void log_json(const char *kind, json_object *o)
{
	json_object *line = json_object_new_object();
	json_object_object_add(line, "rw", json_object_new_string(kind));
	if (o)
		json_object_object_add(line, "data", json_object_get(o));
	pthread_mutex_lock(&log_lock);
	printf("%s\n", json_object_to_json_string_ext(line, JSON_C_TO_STRING_PLAIN));
	fflush(stdout);
	pthread_mutex_unlock(&log_lock);
	json_object_put(line);
}

static void note_between(const char *what, json_object *o)
{
	json_object_object_add(o, "what", json_object_new_string(what));
	log_json("between", o);
	json_object_array_add(between, o);
}

static const char *errno_name(int e)
{
	switch (e) {
	case 0: return "";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENOENT: return "ENOENT";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EPROTO: return "EPROTO";
	case EFBIG: return "EFBIG";
	case EACCES: return "EACCES";
	case EAGAIN: return "EAGAIN";
	default: return strerror(e);
	}
}

static long arg_long(const struct dcall *d, int i, long dflt)
{
	if (i >= d->argc)
		return dflt;
	char *end;
	long v = strtol(d->argv[i], &end, 10);
	return *end ? dflt : v;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding; returns a malloc'd NUL-terminated string. */
static char *base64(const unsigned char *in, size_t n)
{
	char *out = xmalloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*o++ = B64[v >> 18 & 63], *o++ = B64[v >> 12 & 63], *o++ = B64[v >> 6 & 63], *o++ = B64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		*o++ = B64[v >> 18 & 63], *o++ = B64[v >> 12 & 63];
		*o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* ---- HTTP over the broker socket -------------------------------------------------------- */

/* One call: what to send and how (in), what came back (out). */
struct call {
	/* in */
	const char *method, *target;
	const char *const *headers; /* "Name: value" lines, NULL-terminated; NULL: worker headers */
	const char *body;
	size_t len;
	bool sse;                   /* parse the answer's body as an event stream */
	size_t send_only;           /* send the head and this many body bytes, then nothing (0: all) */
	bool head_only_partial;     /* send half the head only */
	uint64_t split_pause_ms;    /* send the body in two halves this far apart */
	uint64_t early_ms;          /* after the head, wait this long for an early answer */
	uint64_t stall_read_ms;     /* after the first event, read nothing this long */
	bool abort_after_event;     /* close after the first event */
	uint64_t timeout_ms;
	size_t answer_max;          /* the answer body bound (default RW_ANSWER_KEEP) */
	/* out */
	unsigned status;
	int err;                    /* errno of a transport failure, 0 */
	bool early, closed, aborted;
	uint64_t t0, t_first, t_end; /* request start, first answer byte, end (ms) */
	struct buf body_kept;
	size_t body_bytes;
	char content_type[128];
	/* event stream */
	struct buf line, ev_name, ev_data, text;
	json_object *events;        /* array of event names (the first 256) */
	unsigned n_events;
	bool stop_seen;
	char stream_error[64], stop_reason[32];
	bool first_event_done, stall_pending;
	/* header capture */
	bool in_ct;
};

static void call_free(struct call *c)
{
	free(c->body_kept.p);
	free(c->line.p);
	free(c->ev_name.p);
	free(c->ev_data.p);
	free(c->text.p);
	if (c->events)
		json_object_put(c->events);
	memset(&c->body_kept, 0, sizeof(c->body_kept));
	c->events = NULL;
}

static void sse_dispatch(struct call *c)
{
	if (!c->ev_name.len && !c->ev_data.len)
		return;
	const char *name = c->ev_name.len ? c->ev_name.p : "message";
	if (!c->events)
		c->events = json_object_new_array();
	if (c->n_events < 256)
		json_object_array_add(c->events, json_object_new_string(name));
	c->n_events++;
	json_object *data = c->ev_data.len ? json_tokener_parse(c->ev_data.p) : NULL;
	if (!strcmp(name, "message_stop")) {
		c->stop_seen = true;
	} else if (!strcmp(name, "error")) {
		json_object *e, *t;
		const char *type = "unparsed";
		if (data && json_object_object_get_ex(data, "error", &e) && json_object_object_get_ex(e, "type", &t))
			type = json_object_get_string(t);
		snprintf(c->stream_error, sizeof(c->stream_error), "%s", type);
	} else if (!strcmp(name, "content_block_delta") && data) {
		json_object *delta, *v;
		if (json_object_object_get_ex(data, "delta", &delta)) {
			if (json_object_object_get_ex(delta, "text", &v) ||
			    json_object_object_get_ex(delta, "partial_json", &v)) {
				const char *s = json_object_get_string(v);
				buf_add(&c->text, s, strlen(s));
			}
		}
	} else if (!strcmp(name, "message_delta") && data) {
		json_object *delta, *v;
		if (json_object_object_get_ex(data, "delta", &delta) &&
		    json_object_object_get_ex(delta, "stop_reason", &v) && json_object_is_type(v, json_type_string))
			snprintf(c->stop_reason, sizeof(c->stop_reason), "%s", json_object_get_string(v));
	}
	if (data)
		json_object_put(data);
	c->ev_name.len = c->ev_data.len = 0;
	if (!c->first_event_done) {
		c->first_event_done = true;
		if (c->stall_read_ms || c->abort_after_event)
			c->stall_pending = true;
	}
}

/* The SSE framing (WHATWG "event stream interpretation"), enough for Anthropic's streams:
 * lines end in LF (a CR before it is dropped), "event:" names the event, "data:" lines are
 * joined with LF, a blank line dispatches, ":" lines are comments. */
static void sse_feed(struct call *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n') {
			if (c->line.len < (1u << 20))
				buf_add(&c->line, p + i, 1);
			continue;
		}
		if (c->line.len && c->line.p[c->line.len - 1] == '\r')
			c->line.p[--c->line.len] = '\0';
		if (c->line.len == 0) {
			sse_dispatch(c);
		} else if (c->line.p[0] != ':') {
			char *colon = strchr(c->line.p, ':');
			const char *field = c->line.p, *value = "";
			if (colon) {
				*colon = '\0';
				value = colon + 1;
				if (*value == ' ')
					value++;
			}
			if (!strcmp(field, "event")) {
				c->ev_name.len = 0;
				buf_add(&c->ev_name, value, strlen(value));
			} else if (!strcmp(field, "data")) {
				if (c->ev_data.len)
					buf_add(&c->ev_data, "\n", 1);
				buf_add(&c->ev_data, value, strlen(value));
			}
		}
		c->line.len = 0;
	}
}

struct parse_state {
	struct call *c;
	bool complete;
	bool too_large;
};

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct parse_state *s = p->data;
	s->c->in_ct = n == 12 && !strncasecmp(at, "content-type", 12);
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct parse_state *s = p->data;
	if (s->c->in_ct)
		snprintf(s->c->content_type, sizeof(s->c->content_type), "%.*s", (int)n, at);
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct parse_state *s = p->data;
	s->c->status = p->status_code;
	return p->status_code < 200 ? -1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct parse_state *s = p->data;
	struct call *c = s->c;
	size_t max = c->answer_max ? c->answer_max : RW_ANSWER_KEEP;
	c->body_bytes += n;
	if (c->body_kept.len < max)
		buf_add(&c->body_kept, at, n < max - c->body_kept.len ? n : max - c->body_kept.len);
	else if (!c->sse) {
		s->too_large = true;
		return 1;
	}
	if (c->sse)
		sse_feed(c, at, n);
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct parse_state *s = p->data;
	s->complete = true;
	http_parser_pause(p, 1);
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = events};
		int r = poll(&pfd, 1, (int)(deadline - now > 600000 ? 600000 : deadline - now));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return 0;
	}
}

static int broker_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n > 0) {
		int r = wait_fd(fd, POLLOUT, deadline);
		if (r < 0)
			return r;
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The request head: the worker's four headers (rich-design.md section 4), or c->headers. */
static char *call_head(const struct call *c, size_t body_len)
{
	struct buf h = {0};
	buf_addf(&h, "%s %s HTTP/1.1\r\n", c->method, c->target);
	if (c->headers) {
		for (const char *const *l = c->headers; *l; l++)
			buf_addf(&h, "%s\r\n", *l);
	} else {
		buf_addf(&h, "Host: broker\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n",
			 worker_dummy_key);
	}
	buf_addf(&h, "Content-Length: %zu\r\n\r\n", body_len);
	return h.p;
}

/* Read the answer on fd into c until it is complete, the broker closes, or the deadline. */
static void read_answer(struct call *c, int fd, uint64_t deadline)
{
	static const http_parser_settings settings = {
		.on_header_field = on_header_field,
		.on_header_value = on_header_value,
		.on_headers_complete = on_headers_complete,
		.on_body = on_body,
		.on_message_complete = on_message_complete,
	};
	http_parser parser;
	struct parse_state st = {.c = c};
	char buf[65536];

	http_parser_init(&parser, HTTP_RESPONSE);
	parser.data = &st;
	while (!st.complete) {
		int r = wait_fd(fd, POLLIN, deadline);
		if (r < 0) {
			c->err = -r;
			return;
		}
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			c->err = errno;
			c->closed = true;
			return;
		}
		if (n > 0 && !c->t_first)
			c->t_first = now_ms();
		size_t used = http_parser_execute(&parser, &settings, buf, (size_t)n);
		enum http_errno e = HTTP_PARSER_ERRNO(&parser);
		if (st.too_large) {
			c->err = EFBIG;
			return;
		}
		if ((e != HPE_OK && e != HPE_PAUSED) || (e == HPE_OK && used != (size_t)n)) {
			c->err = EPROTO;
			return;
		}
		if (n == 0) {
			c->closed = true;
			if (!st.complete)
				c->err = c->status ? EPROTO : ECONNRESET;
			return;
		}
		if (c->stall_pending) {
			c->stall_pending = false;
			if (c->abort_after_event) {
				c->aborted = true;
				return;
			}
			sleep_ms(c->stall_read_ms);
		}
	}
	if (c->sse)
		sse_feed(c, "\n", 1); /* a last event without its blank line still counts */
}

/* Make one call on a new connection, filling c's out fields. Never fails: a transport error
 * is c->err. */
static void call_run(struct call *c)
{
	c->t0 = now_ms();
	uint64_t deadline = c->t0 + (c->timeout_ms ? c->timeout_ms : RW_CALL_MS);
	int fd = broker_connect();
	if (fd < 0) {
		c->err = -fd;
		c->t_end = now_ms();
		return;
	}
	char *head = call_head(c, c->len);
	size_t hlen = strlen(head);
	int r = 0;
	if (c->head_only_partial) {
		r = send_all(fd, head, hlen / 2, deadline);
		c->body = NULL;
		c->len = 0;
	} else {
		r = send_all(fd, head, hlen, deadline);
	}
	free(head);
	if (r == 0 && c->early_ms) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, (int)c->early_ms) > 0)
			c->early = true;
	}
	if (r == 0 && !c->early && !c->head_only_partial) {
		size_t n = c->send_only ? (c->send_only < c->len ? c->send_only : c->len) : c->len;
		if (c->split_pause_ms && n > 1) {
			r = send_all(fd, c->body, n / 2, deadline);
			if (r == 0) {
				sleep_ms(c->split_pause_ms);
				r = send_all(fd, c->body + n / 2, n - n / 2, deadline);
			}
		} else {
			r = send_all(fd, c->body, n, deadline);
		}
	}
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		c->err = -r;
	/* Even after a failed send the broker may have answered (a refusal before the body). */
	read_answer(c, fd, deadline);
	if (r < 0 && !c->status && !c->err)
		c->err = -r;
	close(fd);
	c->t_end = now_ms();
}

/* The step record of a call. */
static void call_report(const struct call *c, json_object *step)
{
	json_object_object_add(step, "status", json_object_new_int((int)c->status));
	if (c->err)
		json_object_object_add(step, "error", json_object_new_string(errno_name(c->err)));
	if (c->early)
		json_object_object_add(step, "early", json_object_new_boolean(1));
	if (c->closed)
		json_object_object_add(step, "closed", json_object_new_boolean(1));
	if (c->aborted)
		json_object_object_add(step, "aborted", json_object_new_boolean(1));
	json_object_object_add(step, "ms", json_object_new_int64((int64_t)(c->t_end - c->t0)));
	if (c->content_type[0])
		json_object_object_add(step, "contentType", json_object_new_string(c->content_type));
	if (c->sse && c->status == 200) {
		json_object_object_add(step, "events", c->events ? json_object_get(c->events) : json_object_new_array());
		json_object_object_add(step, "nEvents", json_object_new_int((int)c->n_events));
		json_object_object_add(step, "text", json_object_new_string_len(c->text.p ? c->text.p : "",
			(int)(c->text.len < RW_TEXT_SHOWN ? c->text.len : RW_TEXT_SHOWN)));
		json_object_object_add(step, "textBytes", json_object_new_int64((int64_t)c->text.len));
		json_object_object_add(step, "stop", json_object_new_boolean(c->stop_seen));
		if (c->stop_reason[0])
			json_object_object_add(step, "stopReason", json_object_new_string(c->stop_reason));
		if (c->stream_error[0])
			json_object_object_add(step, "streamError", json_object_new_string(c->stream_error));
	} else if (c->body_kept.len) {
		/* An error or a JSON answer: parsed when it is JSON, else its first bytes. */
		json_object *o = json_tokener_parse(c->body_kept.p);
		if (o)
			json_object_object_add(step, "answer", o);
		else
			json_object_object_add(step, "answerText", json_object_new_string_len(c->body_kept.p,
				(int)(c->body_kept.len < 512 ? c->body_kept.len : 512)));
	}
	if (c->t_first)
		json_object_object_add(step, "ttfbMs", json_object_new_int64((int64_t)(c->t_first - c->t0)));
}

/* A POST with the worker's headers and a JSON body; the answer parsed (NULL if not JSON). */
static json_object *post_json(const char *target, json_object *body, uint64_t timeout_ms, json_object *step)
{
	struct call c = {.method = "POST", .target = target, .timeout_ms = timeout_ms};
	c.body = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : "";
	c.len = strlen(c.body);
	call_run(&c);
	if (step)
		call_report(&c, step);
	json_object *out = c.body_kept.len ? json_tokener_parse(c.body_kept.p) : NULL;
	if (!step && !out && c.err) {
		out = json_object_new_object();
		json_object_object_add(out, "transportError", json_object_new_string(errno_name(c.err)));
	}
	unsigned status = c.status;
	call_free(&c);
	if (!step && out && json_object_is_type(out, json_type_object))
		json_object_object_add(out, "httpStatus", json_object_new_int((int)status));
	return out;
}

/* ---- the turn --------------------------------------------------------------------------- */

struct model_opts {
	const char *target;          /* default /anthropic/v1/messages */
	const char *method;          /* default POST */
	json_object *body;           /* owned: the request body */
	const char *extra_header;    /* "Name: value" */
	const char *drop_header;     /* a header name */
	const char *beta;            /* anthropic-beta value */
	const char *auth;            /* dummy (x-api-key), bearer, none, real */
	const char *real_key;
	bool stream;
};

struct turn {
	json_object *input;          /* the /worker/next answer */
	const char *id, *text;
	json_object *report, *steps;
	bool model_called, no_model;
	/* reply packet modifiers */
	bool no_result, result_twice;
	long big_result, result_bytes, result_slow_ms;
	json_object *files;
	/* after the reply */
	struct dcall after[RW_DIRECTIVES_MAX];
	int n_after;
	int pending_poll_fd;         /* a long poll left open by poll2 */
};

static json_object *user_content(struct turn *t)
{
	json_object *content = json_object_new_array();
	json_object *b = json_object_new_object();
	json_object_object_add(b, "type", json_object_new_string("text"));
	json_object_object_add(b, "text", json_object_new_string(t->text));
	json_object_array_add(content, b);
	json_object *images;
	if (json_object_object_get_ex(t->input, "images", &images) && json_object_is_type(images, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(images); i++) {
			json_object *img = json_object_array_get_idx(images, i), *mime, *data;
			if (!json_object_object_get_ex(img, "mime", &mime) || !json_object_object_get_ex(img, "data", &data))
				continue;
			json_object *src = json_object_new_object();
			json_object_object_add(src, "type", json_object_new_string("base64"));
			json_object_object_add(src, "media_type", json_object_get(mime));
			json_object_object_add(src, "data", json_object_get(data));
			json_object *ib = json_object_new_object();
			json_object_object_add(ib, "type", json_object_new_string("image"));
			json_object_object_add(ib, "source", src);
			json_object_array_add(content, ib);
		}
	}
	return content;
}

/* The request Pi would send for this turn: model and output limit from the turn input,
 * the prompt as a cached system block, the user message, the offered custom tools, and
 * adaptive thinking at the judged effort. */
static json_object *model_body(struct turn *t)
{
	json_object *body = json_object_new_object(), *v;
	json_object_object_add(body, "model", json_object_object_get_ex(t->input, "model", &v) ? json_object_get(v)
								     : json_object_new_string("claude-fake"));
	json_object_object_add(body, "max_tokens", json_object_object_get_ex(t->input, "maxOutputTokens", &v)
							   ? json_object_get(v) : json_object_new_int(1024));
	json_object_object_add(body, "stream", json_object_new_boolean(1));
	json_object *sys = json_object_new_object(), *cc = json_object_new_object();
	json_object_object_add(sys, "type", json_object_new_string("text"));
	json_object_object_add(sys, "text", json_object_new_string(
		json_object_object_get_ex(t->input, "prompt", &v) && json_object_is_type(v, json_type_string)
			? json_object_get_string(v) : "You are a test worker."));
	json_object_object_add(cc, "type", json_object_new_string("ephemeral"));
	json_object_object_add(sys, "cache_control", cc);
	json_object *sysarr = json_object_new_array();
	json_object_array_add(sysarr, sys);
	json_object_object_add(body, "system", sysarr);
	json_object *msg = json_object_new_object(), *msgs = json_object_new_array();
	json_object_object_add(msg, "role", json_object_new_string("user"));
	json_object_object_add(msg, "content", user_content(t));
	json_object_array_add(msgs, msg);
	json_object_object_add(body, "messages", msgs);
	json_object *tools;
	if (json_object_object_get_ex(t->input, "tools", &tools) && json_object_is_type(tools, json_type_array)) {
		json_object *out = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(tools); i++) {
			json_object *tl = json_object_array_get_idx(tools, i), *name, *desc, *schema;
			if (!json_object_object_get_ex(tl, "name", &name))
				continue;
			if (!json_object_object_get_ex(tl, "input_schema", &schema) &&
			    !json_object_object_get_ex(tl, "parameters", &schema))
				continue;
			json_object *o = json_object_new_object();
			json_object_object_add(o, "name", json_object_get(name));
			if (json_object_object_get_ex(tl, "description", &desc))
				json_object_object_add(o, "description", json_object_get(desc));
			json_object_object_add(o, "input_schema", json_object_get(schema));
			json_object_array_add(out, o);
		}
		if (json_object_array_length(out))
			json_object_object_add(body, "tools", out);
		else
			json_object_put(out);
	}
	if (json_object_object_get_ex(t->input, "effort", &v) && json_object_is_type(v, json_type_string)) {
		json_object *th = json_object_new_object(), *oc = json_object_new_object();
		json_object_object_add(th, "type", json_object_new_string("adaptive"));
		json_object_object_add(body, "thinking", th);
		json_object_object_add(oc, "effort", json_object_get(v));
		json_object_object_add(body, "output_config", oc);
	}
	return body;
}

/* The Anthropic SDK's headers as measured from Pi (helpers' pi-notes.md section 4, the
 * API-key form), adjusted by the options. Returns a NULL-terminated array of malloc'd lines. */
static char **model_headers(const struct model_opts *o)
{
	static const char *const sdk[] = {
		"host: broker", "connection: keep-alive", "content-type: application/json",
		"accept: application/json", "accept-language: *", "sec-fetch-mode: cors",
		"accept-encoding: gzip, deflate", "anthropic-version: 2023-06-01",
		"anthropic-dangerous-direct-browser-access: true", "x-stainless-retry-count: 0",
		"x-stainless-timeout: 600", "x-stainless-lang: js", "x-stainless-package-version: 0.91.1",
		"x-stainless-os: Linux", "x-stainless-arch: x64", "x-stainless-runtime: node",
		"x-stainless-runtime-version: v20.20.2", "user-agent: Anthropic/JS 0.91.1",
	};
	char **h = xmalloc(sizeof(char *) * (sizeof(sdk) / sizeof(sdk[0]) + 4)); /* + auth, beta, extra, NULL */
	size_t n = 0;
	for (size_t i = 0; i < sizeof(sdk) / sizeof(sdk[0]); i++) {
		size_t nl = strcspn(sdk[i], ":");
		if (o->drop_header && strlen(o->drop_header) == nl && !strncasecmp(sdk[i], o->drop_header, nl))
			continue;
		h[n++] = xstrdup(sdk[i]);
	}
	const char *auth = o->auth ? o->auth : "dummy";
	if (!strcmp(auth, "dummy"))
		h[n++] = xasprintf("x-api-key: %s", dummy_key);
	else if (!strcmp(auth, "bearer"))
		h[n++] = xasprintf("authorization: Bearer %s", dummy_key);
	else if (!strcmp(auth, "real") && o->real_key)
		h[n++] = xasprintf("x-api-key: %s", o->real_key);
	if (o->beta)
		h[n++] = xasprintf("anthropic-beta: %s", o->beta);
	if (o->extra_header)
		h[n++] = xstrdup(o->extra_header);
	h[n] = NULL;
	return h;
}

static void free_lines(char **h)
{
	for (char **l = h; *l; l++)
		free(*l);
	free(h);
}

/* Prepare c for a model call with o (c borrows the serialised body from o->body). */
static void model_call_init(struct call *c, const struct model_opts *o, char ***headers)
{
	*headers = model_headers(o);
	memset(c, 0, sizeof(*c));
	c->method = o->method ? o->method : "POST";
	c->target = o->target ? o->target : "/anthropic/v1/messages";
	c->headers = (const char *const *)*headers;
	c->body = o->body ? json_object_to_json_string_ext(o->body, JSON_C_TO_STRING_PLAIN) : "";
	c->len = !strcmp(c->method, "GET") ? 0 : strlen(c->body);
	c->sse = o->stream;
}

static void model_opts_default(struct turn *t, struct model_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->body = model_body(t);
	o->stream = true;
}

/* Run a prepared model call and report it into step. */
static void model_run(struct turn *t, struct model_opts *o, struct call *c, json_object *step)
{
	char **headers;
	struct call tmpl = *c;
	model_call_init(c, o, &headers);
	c->send_only = tmpl.send_only;
	c->head_only_partial = tmpl.head_only_partial;
	c->split_pause_ms = tmpl.split_pause_ms;
	c->stall_read_ms = tmpl.stall_read_ms;
	c->abort_after_event = tmpl.abort_after_event;
	c->timeout_ms = tmpl.timeout_ms;
	call_run(c);
	call_report(c, step);
	free_lines(headers);
	t->model_called = true;
}

static void model_simple(struct turn *t, struct model_opts *o, json_object *step)
{
	struct call c = {0};
	model_run(t, o, &c, step);
	call_free(&c);
	json_object_put(o->body);
}

static void do_model(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	model_simple(t, &o, step);
}

static void do_no_model(struct turn *t, const struct dcall *d, json_object *step)
{
	t->no_model = true;
}

static void do_calls(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 1);
	json_object *statuses = json_object_new_array();
	for (long i = 0; i < n && i < 2000; i++) {
		json_object *s = json_object_new_object();
		do_model(t, d, s);
		json_object *st;
		json_object_object_get_ex(s, "status", &st);
		json_object_array_add(statuses, json_object_get(st));
		json_object_put(s);
	}
	json_object_object_add(step, "statuses", statuses);
}

struct par {
	struct call c;
	struct model_opts *o;
	pthread_t th;
};

static void *par_run(void *arg)
{
	struct par *p = arg;
	call_run(&p->c);
	return NULL;
}

static void do_parallel(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 2);
	n = n < 1 ? 1 : n > RW_PARALLEL_MAX ? RW_PARALLEL_MAX : n;
	struct model_opts o;
	model_opts_default(t, &o);
	char **headers[RW_PARALLEL_MAX];
	struct par *ps = xmalloc(sizeof(*ps) * (size_t)n);
	memset(ps, 0, sizeof(*ps) * (size_t)n);
	for (long i = 0; i < n; i++)
		model_call_init(&ps[i].c, &o, &headers[i]);
	for (long i = 0; i < n; i++)
		pthread_create(&ps[i].th, NULL, par_run, &ps[i]);
	json_object *calls = json_object_new_array();
	for (long i = 0; i < n; i++) {
		pthread_join(ps[i].th, NULL);
		json_object *s = json_object_new_object();
		call_report(&ps[i].c, s);
		json_object_object_add(s, "startMs", json_object_new_int64((int64_t)(ps[i].c.t0 - ps[0].c.t0)));
		json_object_array_add(calls, s);
		call_free(&ps[i].c);
		free_lines(headers[i]);
	}
	free(ps);
	json_object_put(o.body);
	json_object_object_add(step, "calls", calls);
	t->model_called = true;
}

static json_object *jparse(const char *s)
{
	json_object *o = json_tokener_parse(s);
	if (!o)
		abort(); /* our own literals */
	return o;
}

/* Model calls whose body differs from the default in one way a broker must judge. */
static void do_variant(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object *msgs, *content, *tools;
	json_object_object_get_ex(o.body, "messages", &msgs);
	json_object_object_get_ex(json_object_array_get_idx(msgs, 0), "content", &content);
	const char *n = d->name;
	if (!strcmp(n, "native-tool")) {
		char *s;
		s = xasprintf("{\"type\":\"%s\",\"name\":\"web_search\",\"max_uses\":1}",
			 d->argc ? d->argv[0] : "web_search_20250305");
		json_object *nt = json_tokener_parse(s);
		free(s);
		if (!json_object_object_get_ex(o.body, "tools", &tools)) {
			tools = json_object_new_array();
			json_object_object_add(o.body, "tools", tools);
		}
		json_object_array_add(tools, nt ? nt : json_object_new_null());
	} else if (!strcmp(n, "mcp-servers")) {
		json_object_object_add(o.body, "mcp_servers", jparse(
			"[{\"type\":\"url\",\"url\":\"https://mcp.example.com/sse\",\"name\":\"outside\"}]"));
	} else if (!strcmp(n, "url-image")) {
		json_object_array_add(content, jparse("{\"type\":\"image\",\"source\":{\"type\":\"url\","
						      "\"url\":\"https://example.com/cat.png\"}}"));
	} else if (!strcmp(n, "file-image")) {
		json_object_array_add(content, jparse("{\"type\":\"image\",\"source\":{\"type\":\"file\","
						      "\"file_id\":\"file_011CNha8iCJcU1wXNR6q4V8w\"}}"));
	} else if (!strcmp(n, "document")) {
		json_object_array_add(content, jparse("{\"type\":\"document\",\"source\":{\"type\":\"base64\","
						      "\"media_type\":\"application/pdf\",\"data\":\"JVBERi0xLjQK\"}}"));
	} else if (!strcmp(n, "image")) {
		/* A 1x1 PNG. */
		json_object_array_add(content, jparse("{\"type\":\"image\",\"source\":{\"type\":\"base64\","
			"\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
			"YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\"}}"));
	} else if (!strcmp(n, "remote-ref") || !strcmp(n, "local-ref")) {
		bool remote = !strcmp(n, "remote-ref");
		json_object *tool = jparse(remote
			? "{\"name\":\"lookup\",\"description\":\"test\",\"input_schema\":{\"type\":\"object\","
			  "\"properties\":{\"q\":{\"$ref\":\"https://schemas.example.com/q.json\"}}}}"
			: "{\"name\":\"lookup\",\"description\":\"test\",\"input_schema\":{\"type\":\"object\","
			  "\"$defs\":{\"q\":{\"type\":\"string\"}},\"properties\":{\"q\":{\"$ref\":\"#/$defs/q\"}}}}");
		if (!json_object_object_get_ex(o.body, "tools", &tools)) {
			tools = json_object_new_array();
			json_object_object_add(o.body, "tools", tools);
		}
		json_object_array_add(tools, tool);
	} else if (!strcmp(n, "tool-use")) {
		json_object_array_add(msgs, jparse("{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
			"\"id\":\"toolu_rw_1\",\"name\":\"lookup\",\"input\":{\"q\":\"x\"}}]}"));
		json_object_array_add(msgs, jparse("{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
			"\"tool_use_id\":\"toolu_rw_1\",\"content\":\"found x\"},{\"type\":\"text\",\"text\":\"go on\"}]}"));
		if (!json_object_object_get_ex(o.body, "tools", &tools)) {
			tools = json_object_new_array();
			json_object_object_add(o.body, "tools", tools);
		}
		json_object_array_add(tools, jparse("{\"name\":\"lookup\",\"description\":\"test\","
						    "\"input_schema\":{\"type\":\"object\"}}"));
	}
	model_simple(t, &o, step);
}

static void set_thinking(json_object *body, const char *thinking_json, const char *effort)
{
	json_object_object_del(body, "thinking");
	json_object_object_del(body, "output_config");
	if (thinking_json)
		json_object_object_add(body, "thinking", jparse(thinking_json));
	if (effort) {
		json_object *oc = json_object_new_object();
		json_object_object_add(oc, "effort", json_object_new_string(effort));
		json_object_object_add(body, "output_config", oc);
	}
}

static void do_effort(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	set_thinking(o.body, "{\"type\":\"adaptive\"}", d->argv[0]);
	model_simple(t, &o, step);
}

static void do_budget(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	set_thinking(o.body, NULL, NULL);
	json_object *th = json_object_new_object();
	json_object_object_add(th, "type", json_object_new_string("enabled"));
	json_object_object_add(th, "budget_tokens", json_object_new_int64(arg_long(d, 0, 1024)));
	json_object_object_add(o.body, "thinking", th);
	model_simple(t, &o, step);
}

static void do_adaptive(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	set_thinking(o.body, "{\"type\":\"adaptive\"}", NULL);
	model_simple(t, &o, step);
}

static void do_thinking_off(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	set_thinking(o.body, "{\"type\":\"disabled\"}", NULL);
	model_simple(t, &o, step);
}

static void do_model_name(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object_object_add(o.body, "model", json_object_new_string(d->argv[0]));
	model_simple(t, &o, step);
}

static void do_max_tokens(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object_object_add(o.body, "max_tokens", json_object_new_int64(arg_long(d, 0, 1)));
	model_simple(t, &o, step);
}

static void do_header(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	char *h;
	h = xasprintf("%s: %s", d->argv[0], d->rest[1]);
	o.extra_header = h;
	model_simple(t, &o, step);
	free(h);
}

static void do_drop_header(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.drop_header = d->argv[0];
	model_simple(t, &o, step);
}

static void do_beta(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.beta = d->argv[0];
	model_simple(t, &o, step);
}

static void do_auth(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.auth = d->argv[0];
	o.real_key = d->argc > 1 ? d->argv[1] : "sk-ant-api03-not-the-dummy-0123456789";
	model_simple(t, &o, step);
}

static void do_route(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.target = d->argv[0];
	model_simple(t, &o, step);
}

static void do_get(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.target = d->argv[0];
	o.method = "GET";
	o.stream = false;
	model_simple(t, &o, step);
}

static void do_beta_query(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	o.target = "/anthropic/v1/messages?beta=true";
	model_simple(t, &o, step);
}

static void do_count_tokens(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object_object_del(o.body, "stream");
	json_object_object_del(o.body, "max_tokens");
	o.target = "/anthropic/v1/messages/count_tokens";
	o.stream = false;
	model_simple(t, &o, step);
}

static void do_big_request(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	long want = arg_long(d, 0, 1 << 20);
	size_t base = strlen(json_object_to_json_string_ext(o.body, JSON_C_TO_STRING_PLAIN));
	/* The padding block adds its text plus about 30 bytes of JSON around it. */
	size_t pad = want > (long)(base + 40) ? (size_t)want - base - 40 : 1;
	char *s = xmalloc(pad + 1);
	memset(s, 'x', pad);
	s[pad] = '\0';
	json_object *msgs, *content, *b = json_object_new_object();
	json_object_object_get_ex(o.body, "messages", &msgs);
	json_object_object_get_ex(json_object_array_get_idx(msgs, 0), "content", &content);
	json_object_object_add(b, "type", json_object_new_string("text"));
	json_object_object_add(b, "text", json_object_new_string_len(s, (int)pad));
	json_object_array_add(content, b);
	free(s);
	json_object_object_add(step, "bodyBytes", json_object_new_int64(
		(int64_t)strlen(json_object_to_json_string_ext(o.body, JSON_C_TO_STRING_PLAIN))));
	model_simple(t, &o, step);
}

static void do_no_stream(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object_object_add(o.body, "stream", json_object_new_boolean(0));
	o.stream = false;
	model_simple(t, &o, step);
}

static void do_extra_field(struct turn *t, const struct dcall *d, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	json_object *v = json_tokener_parse(d->rest[1]);
	json_object_object_add(o.body, d->argv[0], v ? v : json_object_new_string(d->rest[1]));
	model_simple(t, &o, step);
}

/* A normal model call made differently on the wire (tmpl's pacing fields). */
static void model_paced(struct turn *t, struct call tmpl, json_object *step)
{
	struct model_opts o;
	model_opts_default(t, &o);
	model_run(t, &o, &tmpl, step);
	call_free(&tmpl);
	json_object_put(o.body);
}

static void do_stall_read(struct turn *t, const struct dcall *d, json_object *step)
{
	model_paced(t, (struct call){.stall_read_ms = (uint64_t)arg_long(d, 0, 1000)}, step);
}

static void do_abort_stream(struct turn *t, const struct dcall *d, json_object *step)
{
	model_paced(t, (struct call){.abort_after_event = true}, step);
}

static void do_silent(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 0);
	model_paced(t, (struct call){.send_only = n > 0 ? (size_t)n : 1}, step);
}

static void do_slow_header(struct turn *t, const struct dcall *d, json_object *step)
{
	model_paced(t, (struct call){.head_only_partial = true}, step);
}

static void do_slow_body(struct turn *t, const struct dcall *d, json_object *step)
{
	model_paced(t, (struct call){.split_pause_ms = (uint64_t)arg_long(d, 0, 1000)}, step);
}

static void do_connections(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 16);
	if (n < 0 || n > 256)
		n = 256;
	int *fds = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
	static const char half[] = "POST /anthropic/v1/messages HTTP/1.1\r\nHost: broker\r\n";
	long held = 0;
	for (long i = 0; i < n; i++) {
		fds[i] = broker_connect();
		if (fds[i] >= 0) {
			send_all(fds[i], half, sizeof(half) - 1, now_ms() + 2000);
			held++;
		}
	}
	/* Which of them did the broker close at once (a refused connection)? */
	sleep_ms(200);
	long closed = 0;
	for (long i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		struct pollfd pfd = {.fd = fds[i], .events = POLLIN};
		char b;
		if (poll(&pfd, 1, 0) > 0 && recv(fds[i], &b, 1, MSG_DONTWAIT | MSG_PEEK) <= 0)
			closed++;
	}
	json_object_object_add(step, "connected", json_object_new_int64(held));
	json_object_object_add(step, "closedAtOnce", json_object_new_int64(closed));
	json_object *extra = json_object_new_object();
	model_paced(t, (struct call){.timeout_ms = 15000}, extra);
	json_object_object_add(step, "extraCall", extra);
	for (long i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
}

/* A reply packet: {"turnId", "text", "files"}, turnId first so a reader can stop early. */
static char *result_body(const char *turn_id, const char *text, json_object *files)
{
	json_object *o = json_object_new_object();
	if (turn_id)
		json_object_object_add(o, "turnId", json_object_new_string(turn_id));
	json_object_object_add(o, "text", json_object_new_string(text));
	json_object_object_add(o, "files", files ? json_object_get(files) : json_object_new_array());
	char *s = xstrdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static void random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[32];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t k = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; i < n; i++)
		out[i] = hex[(k > 0 ? b[i % sizeof(b)] : (unsigned char)(now_ms() + i)) >> (i % 2 ? 0 : 4) & 15];
	out[n] = '\0';
}

/* POST a reply packet, waiting for an early answer before the body. */
static void post_result_packet(const char *turn_id, const char *text, json_object *files, json_object *step)
{
	char *body = result_body(turn_id, text, files);
	struct call c = {.method = "POST", .target = "/worker/result", .body = body, .len = strlen(body),
			 .early_ms = RW_EARLY_MS};
	call_run(&c);
	call_report(&c, step);
	call_free(&c);
	free(body);
}

static void do_result_outside(struct turn *t, const struct dcall *d, json_object *step)
{
	char other[17];
	random_hex(other, 16);
	bool none = d->argc && !strcmp(d->argv[0], "none");
	json_object_object_add(step, "turnIdSent", none ? json_object_new_null() : json_object_new_string(other));
	post_result_packet(none ? NULL : other, "a reply for another turn", NULL, step);
}

static void do_next_during(struct turn *t, const struct dcall *d, json_object *step)
{
	struct call c = {.method = "POST", .target = "/worker/next", .body = "", .timeout_ms = 5000};
	call_run(&c);
	call_report(&c, step);
	call_free(&c);
}

/* The body /worker/ready sends for CAPS (see "Start-up"); NULL for no body. */
static const char *ready_body(const char *caps)
{
	if (!strcmp(caps, "full"))
		return "{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true},\"privateHistory\":false}";
	if (!strcmp(caps, "history"))
		return "{\"capabilities\":{\"privateTo\":true,\"readerRecords\":true},\"privateHistory\":true}";
	if (!strcmp(caps, "partial"))
		return "{\"capabilities\":{\"privateTo\":true,\"readerRecords\":false},\"privateHistory\":false}";
	if (!strcmp(caps, "none"))
		return "{\"capabilities\":{\"privateTo\":false,\"readerRecords\":false},\"privateHistory\":false}";
	if (!strcmp(caps, "empty"))
		return "{}";
	if (!strcmp(caps, "bad"))
		return "{\"capabilities\":{\"privateTo\":\"yes\",\"readerRecords\":1},\"privateHistory\":\"no\"}";
	return NULL; /* absent */
}

static unsigned announce(const char *caps, json_object *step)
{
	const char *b = ready_body(caps);
	struct call c = {.method = "POST", .target = "/worker/ready", .body = b ? b : "", .len = b ? strlen(b) : 0,
			 .timeout_ms = 30000};
	call_run(&c);
	json_object_object_add(step, "caps", json_object_new_string(caps));
	call_report(&c, step);
	unsigned st = c.status;
	call_free(&c);
	return st;
}

static void do_ready_during(struct turn *t, const struct dcall *d, json_object *step)
{
	announce(d->argv[0], step);
}

static void do_tool(struct turn *t, const struct dcall *d, json_object *step)
{
	char *target;
	target = xasprintf("/tools/%s", d->argv[0]);
	const char *args = d->argc > 1 ? d->rest[1] : "{}";
	struct call c = {.method = "POST", .target = target, .body = args, .len = strlen(args)};
	call_run(&c);
	call_report(&c, step);
	json_object *a, *p;
	if (json_object_object_get_ex(step, "answer", &a) && json_object_object_get_ex(a, "privateTo", &p))
		json_object_object_add(step, "privateTo", json_object_get(p));
	call_free(&c);
	free(target);
}

static void do_private(struct turn *t, const struct dcall *d, json_object *step)
{
	do_tool(t, d, step);
	json_object *m = json_object_new_object();
	do_model(t, d, m);
	json_object_object_add(step, "modelAfter", m);
}

static int rpc_id;

static void do_mcp(struct turn *t, const struct dcall *d, json_object *step)
{
	char *target;
	target = xasprintf("/mcp/%s", d->argv[0]);
	const char *method = d->argv[1];
	json_object *rq = json_object_new_object();
	json_object_object_add(rq, "jsonrpc", json_object_new_string("2.0"));
	if (strncmp(method, "notifications/", 14))
		json_object_object_add(rq, "id", json_object_new_int(++rpc_id));
	json_object_object_add(rq, "method", json_object_new_string(method));
	if (!strcmp(method, "initialize")) {
		json_object_object_add(rq, "params", jparse("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
							    "\"clientInfo\":{\"name\":\"richworker\",\"version\":\"1\"}}"));
	} else if (!strcmp(method, "tools/call")) {
		json_object *params = json_object_new_object();
		json_object_object_add(params, "name", json_object_new_string(d->argc > 2 ? d->argv[2] : "echo"));
		json_object *args = d->argc > 3 ? json_tokener_parse(d->rest[3]) : NULL;
		json_object_object_add(params, "arguments", args ? args : json_object_new_object());
		json_object_object_add(rq, "params", params);
	}
	struct call c = {.method = "POST", .target = target};
	c.body = json_object_to_json_string_ext(rq, JSON_C_TO_STRING_PLAIN);
	c.len = strlen(c.body);
	call_run(&c);
	call_report(&c, step);
	call_free(&c);
	json_object_put(rq);
	free(target);
}

static void do_mcp_batch(struct turn *t, const struct dcall *d, json_object *step)
{
	char *target;
	target = xasprintf("/mcp/%s", d->argv[0]);
	static const char batch[] = "[{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"ping\"},"
				    "{\"jsonrpc\":\"2.0\",\"id\":902,\"method\":\"ping\"}]";
	struct call c = {.method = "POST", .target = target, .body = batch, .len = sizeof(batch) - 1};
	call_run(&c);
	call_report(&c, step);
	call_free(&c);
	free(target);
}

/* A PiCompactRequest (helpers' pi-notes.md section 5) of about pad extra bytes. */
static json_object *compact_request(size_t pad)
{
	json_object *rq = jparse("{\"reason\":\"threshold\",\"tokensBefore\":310000,\"firstKeptEntryId\":\"e42\","
				 "\"isSplitTurn\":false,\"messagesToSummarize\":[{\"role\":\"user\",\"content\":"
				 "[{\"type\":\"text\",\"text\":\"earlier talk\"}]}],\"turnPrefixMessages\":[],"
				 "\"keptMessages\":[],\"readFiles\":[],\"modifiedFiles\":[]}");
	if (pad) {
		char *s = xmalloc(pad + 1);
		memset(s, 'y', pad);
		s[pad] = '\0';
		json_object_object_add(rq, "previousSummary", json_object_new_string_len(s, (int)pad));
		free(s);
	}
	return rq;
}

static void compact_posts(struct turn *t, long n, const char *member, size_t pad, json_object *step)
{
	json_object *calls = json_object_new_array();
	for (long i = 0; i < n && i < 64; i++) {
		json_object *body = json_object_new_object(), *s = json_object_new_object();
		json_object_object_add(body, "turnId", json_object_new_string(t->id));
		if (!strcmp(member, "report"))
			json_object_object_add(body, "report", jparse("{\"engine\":\"pi\",\"tokensBefore\":520000,"
								       "\"tokensAfter\":40000,\"reason\":\"threshold\"}"));
		else
			json_object_object_add(body, "request", compact_request(pad));
		json_object_put(post_json("/worker/compact", body, 0, s));
		json_object_array_add(calls, s);
		json_object_put(body);
	}
	json_object_object_add(step, "calls", calls);
}

static void do_compact(struct turn *t, const struct dcall *d, json_object *step)
{
	compact_posts(t, arg_long(d, 0, 1), "request", 0, step);
}

static void do_compact_report(struct turn *t, const struct dcall *d, json_object *step)
{
	compact_posts(t, arg_long(d, 0, 1), "report", 0, step);
}

static void do_compact_big(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 1 << 20);
	compact_posts(t, 1, "request", n > 0 ? (size_t)n : 0, step);
}

static void do_crash(struct turn *t, const struct dcall *d, json_object *step)
{
	log_json("crash", step);
	_exit((int)arg_long(d, 0, 3));
}

static void do_hang(struct turn *t, const struct dcall *d, json_object *step)
{
	log_json("hang", step);
	hanging = 1;
	for (;;)
		pause();
}

static void do_log(struct turn *t, const struct dcall *d, json_object *step)
{
	long n = arg_long(d, 0, 1);
	pthread_mutex_lock(&log_lock);
	for (long i = 1; i <= n && i <= 100000; i++)
		printf("{\"rw\":\"log\",\"line\":%ld,\"of\":%ld}\n", i, n);
	fflush(stdout);
	pthread_mutex_unlock(&log_lock);
}

static void do_sleep(struct turn *t, const struct dcall *d, json_object *step)
{
	sleep_ms((uint64_t)arg_long(d, 0, 0));
}

static bool wait_file(const char *name, json_object *step)
{
	char *path;
	path = xasprintf("/workspace/%s", name);
	uint64_t deadline = now_ms() + RW_WAIT_FILE_MS;
	struct stat st;
	bool found;
	while (!(found = lstat(path, &st) == 0) && now_ms() < deadline)
		sleep_ms(20);
	json_object_object_add(step, "found", json_object_new_boolean(found));
	free(path);
	return found;
}

static void do_wait_file(struct turn *t, const struct dcall *d, json_object *step)
{
	wait_file(d->argv[0], step);
}

static void do_read_file(struct turn *t, const struct dcall *d, json_object *step)
{
	char buf[4096];
	int fd = open(d->argv[0], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		json_object_object_add(step, "error", json_object_new_string(errno_name(errno)));
		return;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	json_object_object_add(step, "content", json_object_new_string_len(buf, n > 0 ? (int)n : 0));
}

static void do_write_file(struct turn *t, const struct dcall *d, json_object *step)
{
	int fd = open(d->argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		json_object_object_add(step, "error", json_object_new_string(errno_name(errno)));
		return;
	}
	const char *text = d->argc > 1 ? d->rest[1] : "";
	ssize_t n = write(fd, text, strlen(text));
	if (n < 0)
		json_object_object_add(step, "error", json_object_new_string(errno_name(errno)));
	close(fd);
}

static void do_symlink(struct turn *t, const struct dcall *d, json_object *step)
{
	if (symlink(d->argv[0], d->argv[1]) < 0)
		json_object_object_add(step, "error", json_object_new_string(errno_name(errno)));
}

static void do_list_dir(struct turn *t, const struct dcall *d, json_object *step)
{
	DIR *dir = opendir(d->argv[0]);
	if (!dir) {
		json_object_object_add(step, "error", json_object_new_string(errno_name(errno)));
		return;
	}
	json_object *names = json_object_new_array();
	struct dirent *e;
	while ((e = readdir(dir)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			json_object_array_add(names, json_object_new_string(e->d_name));
	closedir(dir);
	json_object_object_add(step, "entries", names);
}

static void do_help(struct turn *t, const struct dcall *d, json_object *step)
{
	static const char *const when[] = {"step", "mod", "after"};
	json_object *list = json_object_new_array();
	for (size_t i = 0; i < N_DIRECTIVES; i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "name", json_object_new_string(DIRECTIVES[i].name));
		json_object_object_add(e, "args", json_object_new_string(DIRECTIVES[i].args));
		json_object_object_add(e, "when", json_object_new_string(when[DIRECTIVES[i].when]));
		json_object_object_add(e, "what", json_object_new_string(DIRECTIVES[i].what));
		json_object_array_add(list, e);
	}
	json_object_object_add(step, "directives", list);
}

/* Percent-decode s into a malloc'd buffer; *n gets its length (it may hold NULs). */
static char *pct_decode(const char *s, size_t *n)
{
	char *out = xmalloc(strlen(s) + 1);
	size_t k = 0;
	for (const char *p = s; *p; p++) {
		unsigned v;
		if (p[0] == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1) {
			out[k++] = (char)v;
			p += 2;
		} else {
			out[k++] = *p;
		}
	}
	out[k] = '\0';
	*n = k;
	return out;
}

static void add_file(struct turn *t, const char *name, size_t name_len, const char *mime, size_t size, unsigned seed)
{
	unsigned char *data = xmalloc(size);
	for (size_t i = 0; i < size; i++)
		data[i] = (unsigned char)('a' + (i + seed) % 26);
	char *b64 = base64(data, size);
	free(data);
	json_object *f = json_object_new_object();
	json_object_object_add(f, "name", json_object_new_string_len(name, (int)name_len));
	json_object_object_add(f, "mime", json_object_new_string(mime));
	json_object_object_add(f, "data", json_object_new_string(b64));
	free(b64);
	if (!t->files)
		t->files = json_object_new_array();
	json_object_array_add(t->files, f);
}

static void do_mod(struct turn *t, const struct dcall *d, json_object *step)
{
	const char *n = d->name;
	if (!strcmp(n, "no-result")) {
		t->no_result = true;
	} else if (!strcmp(n, "big-result")) {
		t->big_result = arg_long(d, 0, 0);
	} else if (!strcmp(n, "result-bytes")) {
		t->result_bytes = arg_long(d, 0, 0);
	} else if (!strcmp(n, "result-slow")) {
		t->result_slow_ms = arg_long(d, 0, 0);
	} else if (!strcmp(n, "result-twice")) {
		t->result_twice = true;
	} else if (!strcmp(n, "files")) {
		long count = arg_long(d, 0, 1), size = arg_long(d, 1, 16);
		for (long i = 0; i < count && i < 1000; i++) {
			char name[64];
			if (d->argc > 2)
				snprintf(name, sizeof(name), "%s", d->argv[2]);
			else
				snprintf(name, sizeof(name), "file-%ld.txt", i + 1);
			add_file(t, name, strlen(name), d->argc > 3 ? d->argv[3] : "text/plain",
				 size > 0 ? (size_t)size : 0, (unsigned)i);
		}
	} else if (!strcmp(n, "file-name")) {
		size_t len;
		char *name = pct_decode(d->argv[0], &len);
		add_file(t, name, len, d->argc > 1 ? d->argv[1] : "text/plain", 16, 0);
		free(name);
	}
	json_object_object_add(step, "applied", json_object_new_boolean(1));
}

static void do_after(struct turn *t, const struct dcall *d, json_object *step)
{
	if (t->n_after < RW_DIRECTIVES_MAX)
		t->after[t->n_after++] = *d;
	json_object_object_add(step, "queued", json_object_new_boolean(1));
}

/* ---- directive parsing ------------------------------------------------------------------ */

static const struct directive *find_directive(const char *name)
{
	for (size_t i = 0; i < N_DIRECTIVES; i++)
		if (!strcmp(DIRECTIVES[i].name, name))
			return &DIRECTIVES[i];
	return NULL;
}

static char *trimmed_dup(const char *p, size_t n)
{
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	char *s = xmalloc(n + 1);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* Split text into directive calls (in out, at most max): "#rw NAME ARGS..." up to the end of
 * the line or the next blank-preceded '#'. argv[k] is the k-th blank-separated argument, rest[k] the
 * text from it to the end of the directive as written (for JSON arguments). */
static int parse_directives(const char *text, struct dcall *out, int max)
{
	int n = 0;
	const char *p = text;
	while (n < max && (p = strstr(p, "#rw "))) {
		const char *start = p + 4, *end = start;
		/* A blank-preceded '#' starts another directive (ours or fake_anthropic's). */
		while (*end && *end != '\n' && !(*end == '#' && (end[-1] == ' ' || end[-1] == '\t')))
			end++;
		struct dcall *d = &out[n];
		memset(d, 0, sizeof(*d));
		const char *q = start;
		bool named = false;
		while (q < end) {
			while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
				q++;
			if (q >= end)
				break;
			const char *tok = q;
			while (q < end && *q != ' ' && *q != '\t' && *q != '\r')
				q++;
			if (!named) {
				d->name = trimmed_dup(tok, (size_t)(q - tok));
				named = true;
			} else if (d->argc < RW_ARGS_MAX) {
				d->argv[d->argc] = trimmed_dup(tok, (size_t)(q - tok));
				d->rest[d->argc] = trimmed_dup(tok, (size_t)(end - tok));
				d->argc++;
			}
		}
		if (named)
			n++;
		p = end;
	}
	return n;
}

static void free_dcall(struct dcall *d)
{
	for (int k = 0; k < d->argc; k++) {
		free(d->argv[k]);
		free(d->rest[k]);
	}
	free((char *)d->name);
}

static void run_directive(struct turn *t, const struct dcall *d, json_object *steps)
{
	json_object *step = json_object_new_object();
	json_object_object_add(step, "do", json_object_new_string(d->name));
	const struct directive *def = find_directive(d->name);
	if (!def) {
		json_object_object_add(step, "error", json_object_new_string("unknown directive"));
	} else if (d->argc < def->min_args || (def->max_args >= 0 && d->argc > def->max_args)) {
		json_object_object_add(step, "error", json_object_new_string("bad arguments"));
		json_object_object_add(step, "usage", json_object_new_string(def->args));
	} else {
		uint64_t t0 = now_ms();
		def->run(t, d, step);
		if (!json_object_object_get_ex(step, "ms", NULL))
			json_object_object_add(step, "ms", json_object_new_int64((int64_t)(now_ms() - t0)));
	}
	log_json("step", step);
	json_object_array_add(steps, step);
}

/* ---- reply and after-actions ------------------------------------------------------------ */

struct twin {
	const char *body;
	size_t len;
	struct call c;
	pthread_t th;
	uint64_t pause_ms;
};

static void *twin_run(void *arg)
{
	struct twin *w = arg;
	w->c = (struct call){.method = "POST", .target = "/worker/result", .body = w->body, .len = w->len,
			     .split_pause_ms = w->pause_ms};
	call_run(&w->c);
	return NULL;
}

static void post_reply(struct turn *t)
{
	const char *report = json_object_to_json_string_ext(t->report, JSON_C_TO_STRING_PLAIN);
	struct buf text = {0};
	buf_add(&text, report, strlen(report));
	if (t->big_result > (long)text.len) {
		buf_add(&text, " ", 1);
		while (text.len < (size_t)t->big_result) {
			static const char pad[] = "pppppppppppppppppppppppppppppppp";
			size_t k = (size_t)t->big_result - text.len;
			buf_add(&text, pad, k < sizeof(pad) - 1 ? k : sizeof(pad) - 1);
		}
	}
	json_object *ev = json_object_new_object();
	json_object_object_add(ev, "turnId", json_object_new_string(t->id));
	json_object_object_add(ev, "textChars", json_object_new_int64((int64_t)text.len));
	if (t->result_bytes > 0) {
		/* Announce result_bytes, and send the body only when the broker did not answer first. */
		char *body = xmalloc((size_t)t->result_bytes + 1);
		int k = snprintf(body, (size_t)t->result_bytes + 1, "{\"turnId\":\"%s\",\"text\":\"", t->id);
		size_t len = (size_t)t->result_bytes;
		if (k > 0 && (size_t)k + 3 < len) {
			memset(body + k, 'q', len - (size_t)k - 2);
			memcpy(body + len - 2, "\"}", 2);
		}
		body[len] = '\0';
		struct call c = {.method = "POST", .target = "/worker/result", .body = body, .len = len,
				 .early_ms = RW_EARLY_MS};
		call_run(&c);
		call_report(&c, ev);
		call_free(&c);
		free(body);
	} else if (t->result_twice) {
		char *body = result_body(t->id, text.p, t->files);
		struct twin w[2] = {{.body = body, .len = strlen(body), .pause_ms = 1000},
				    {.body = body, .len = strlen(body)}};
		pthread_create(&w[0].th, NULL, twin_run, &w[0]);
		sleep_ms(200); /* the first is in its body's pause: pacing of the test, not a wait */
		pthread_create(&w[1].th, NULL, twin_run, &w[1]);
		json_object *both = json_object_new_array();
		for (int i = 0; i < 2; i++) {
			pthread_join(w[i].th, NULL);
			json_object *s = json_object_new_object();
			call_report(&w[i].c, s);
			json_object_array_add(both, s);
			call_free(&w[i].c);
		}
		json_object_object_add(ev, "packets", both);
		free(body);
	} else {
		char *body = result_body(t->id, text.p, t->files);
		struct call c = {.method = "POST", .target = "/worker/result", .body = body, .len = strlen(body),
				 .split_pause_ms = (uint64_t)(t->result_slow_ms > 0 ? t->result_slow_ms : 0)};
		call_run(&c);
		call_report(&c, ev);
		call_free(&c);
		free(body);
	}
	free(text.p);
	note_between("result", ev);
}

/* A long poll sent on a new connection; returns the fd (the answer not read yet) or -errno. */
static int poll_send(void)
{
	int fd = broker_connect();
	if (fd < 0)
		return fd;
	struct call c = {.method = "POST", .target = "/worker/next"};
	char *head = call_head(&c, 0);
	int r = send_all(fd, head, strlen(head), now_ms() + 10000);
	free(head);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static int pending_poll = -1;

static void run_after(struct turn *t, const struct dcall *d)
{
	json_object *ev = json_object_new_object();
	const char *n = d->name;
	if (!strcmp(n, "result-after")) {
		post_result_packet(t->id, "a second reply for a settled turn", NULL, ev);
	} else if (!strcmp(n, "reconnect") || !strcmp(n, "ready-none") || !strcmp(n, "ready-bad") ||
		   !strcmp(n, "ready-empty")) {
		const char *caps = !strcmp(n, "ready-none") ? "none" : !strcmp(n, "ready-bad") ? "bad"
				 : !strcmp(n, "ready-empty") ? "absent" : d->argv[0];
		if (d->argc >= 3 && !strcmp(d->argv[1], "gate"))
			wait_file(d->argv[2], ev);
		unsigned st = announce(caps, ev);
		if (st < 200 || st > 299) {
			/* Refused: announce the configured capabilities again so the channel goes on. */
			json_object *again = json_object_new_object();
			announce(ready_caps, again);
			json_object_object_add(ev, "reannounced", again);
		}
	} else if (!strcmp(n, "poll2")) {
		pending_poll = poll_send();
		sleep_ms(200); /* pacing: the first poll is the idle one when the second arrives */
		struct call c = {.method = "POST", .target = "/worker/next", .body = "", .timeout_ms = 10000};
		call_run(&c);
		json_object *second = json_object_new_object();
		call_report(&c, second);
		call_free(&c);
		json_object_object_add(ev, "second", second);
		json_object_object_add(ev, "firstPending", json_object_new_boolean(pending_poll >= 0));
	} else if (!strcmp(n, "abandon-poll")) {
		int fd = poll_send();
		sleep_ms(200);
		if (fd >= 0)
			close(fd);
		json_object_object_add(ev, "sent", json_object_new_boolean(fd >= 0));
	} else if (!strcmp(n, "exit-after")) {
		note_between(n, ev);
		_exit((int)arg_long(d, 0, 0));
	}
	note_between(n, ev);
}

/* ---- the input report ------------------------------------------------------------------- */

static void copy_field(json_object *from, json_object *to, const char *key)
{
	json_object *v;
	if (json_object_object_get_ex(from, key, &v))
		json_object_object_add(to, key, json_object_get(v));
}

static json_object *input_report(json_object *in)
{
	json_object *r = json_object_new_object(), *v;
	json_object *keys = json_object_new_array();
	json_object_object_foreach(in, key, val) {
		(void)val;
		json_object_array_add(keys, json_object_new_string(key));
	}
	json_object_object_add(r, "keys", keys);
	static const char *const copied[] = {"speaker", "model", "maxOutputTokens", "effort", "requireCapabilities",
					     "limits", "timeZone", "now", "startFresh", "v"};
	for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++)
		copy_field(in, r, copied[i]);
	if (json_object_object_get_ex(in, "text", &v))
		json_object_object_add(r, "textChars", json_object_new_int(json_object_get_string_len(v)));
	if (json_object_object_get_ex(in, "prompt", &v))
		json_object_object_add(r, "promptChars", json_object_new_int(json_object_get_string_len(v)));
	if (json_object_object_get_ex(in, "memory", &v)) {
		json_object *m = json_object_new_object(), *x;
		if (json_object_object_get_ex(v, "text", &x))
			json_object_object_add(m, "chars", json_object_new_int(json_object_get_string_len(x)));
		copy_field(v, m, "visibility");
		json_object_object_add(r, "memory", m);
	}
	if (json_object_object_get_ex(in, "tools", &v) && json_object_is_type(v, json_type_array)) {
		json_object *names = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *n;
			if (json_object_object_get_ex(json_object_array_get_idx(v, i), "name", &n))
				json_object_array_add(names, json_object_get(n));
		}
		json_object_object_add(r, "tools", names);
	}
	if (json_object_object_get_ex(in, "images", &v) && json_object_is_type(v, json_type_array)) {
		json_object *list = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *img = json_object_array_get_idx(v, i), *e = json_object_new_object(), *d;
			copy_field(img, e, "mime");
			if (json_object_object_get_ex(img, "data", &d))
				json_object_object_add(e, "base64Chars", json_object_new_int(json_object_get_string_len(d)));
			json_object_array_add(list, e);
		}
		json_object_object_add(r, "images", list);
	}
	if (json_object_object_get_ex(in, "attachments", &v) && json_object_is_type(v, json_type_array)) {
		json_object *list = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *a = json_object_array_get_idx(v, i), *e = json_object_new_object(), *p;
			copy_field(a, e, "name");
			copy_field(a, e, "path");
			copy_field(a, e, "mime");
			copy_field(a, e, "bytes");
			struct stat st;
			if (json_object_object_get_ex(a, "path", &p) && lstat(json_object_get_string(p), &st) == 0) {
				json_object_object_add(e, "present", json_object_new_boolean(S_ISREG(st.st_mode)));
				json_object_object_add(e, "size", json_object_new_int64((int64_t)st.st_size));
			} else {
				json_object_object_add(e, "present", json_object_new_boolean(0));
			}
			json_object_array_add(list, e);
		}
		json_object_object_add(r, "attachments", list);
	}
	return r;
}

/* ---- main loop -------------------------------------------------------------------------- */

static void handle_turn(json_object *input)
{
	struct turn t = {.input = input};
	json_object *v;
	t.id = json_object_object_get_ex(input, "turnId", &v) ? json_object_get_string(v) : "";
	t.text = json_object_object_get_ex(input, "text", &v) ? json_object_get_string(v) : "";
	t.report = json_object_new_object();
	t.steps = json_object_new_array();
	json_object_object_add(t.report, "worker", json_object_new_string("richworker"));
	json_object_object_add(t.report, "turnId", json_object_new_string(t.id));
	json_object_object_add(t.report, "input", input_report(input));

	struct dcall ds[RW_DIRECTIVES_MAX];
	int n = parse_directives(t.text, ds, RW_DIRECTIVES_MAX);
	for (int i = 0; i < n; i++)
		run_directive(&t, &ds[i], t.steps);
	if (!t.model_called && !t.no_model) {
		struct dcall dflt = {.name = "model"};
		run_directive(&t, &dflt, t.steps);
	}
	json_object_object_add(t.report, "steps", t.steps);
	json_object_object_add(t.report, "between", between);
	between = json_object_new_array();
	if (!t.no_result)
		post_reply(&t);
	else
		note_between("no-result", json_object_new_object());
	for (int i = 0; i < t.n_after; i++)
		run_after(&t, &t.after[i]);
	for (int i = 0; i < n; i++)
		free_dcall(&ds[i]);
	if (t.files)
		json_object_put(t.files);
	json_object_put(t.report);
}

/* Announce readiness until the broker takes it (the socket may not exist yet, or be
 * re-created by a daemon restart). */
static void announce_until_ready(const char *why)
{
	uint64_t backoff = 50;
	for (;;) {
		json_object *ev = json_object_new_object();
		json_object_object_add(ev, "why", json_object_new_string(why));
		unsigned st = announce(ready_caps, ev);
		if (st >= 200 && st < 300) {
			note_between("ready", ev);
			return;
		}
		log_json("ready-failed", ev);
		json_object_put(ev);
		sleep_ms(backoff);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
}

static void run_startup(json_object *startup)
{
	if (!startup || !json_object_is_type(startup, json_type_array))
		return;
	struct turn t = {.input = json_object_new_object(), .id = "", .text = ""};
	t.steps = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(startup); i++) {
		struct dcall ds[RW_DIRECTIVES_MAX];
		int n = parse_directives(json_object_get_string(json_object_array_get_idx(startup, i)), ds,
					 RW_DIRECTIVES_MAX);
		for (int k = 0; k < n; k++) {
			run_directive(&t, &ds[k], t.steps);
			free_dcall(&ds[k]);
		}
	}
	json_object *ev = json_object_new_object();
	json_object_object_add(ev, "steps", t.steps);
	note_between("startup", ev);
	json_object_put(t.input);
}

static void on_term(int sig)
{
	if (!hanging)
		_exit(0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_term};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	between = json_object_new_array();
	if (getenv("RW_SOCKET"))
		sock_path = getenv("RW_SOCKET");
	const char *conf_path = getenv("RW_CONFIG") ? getenv("RW_CONFIG") : RW_CONFIG_DEFAULT;
	json_object *conf = json_object_from_file(conf_path), *v;
	long delay = 0;
	if (conf) {
		if (json_object_object_get_ex(conf, "ready", &v))
			ready_caps = xstrdup(json_object_get_string(v));
		if (json_object_object_get_ex(conf, "readyDelayMs", &v))
			delay = (long)json_object_get_int64(v);
		if (json_object_object_get_ex(conf, "dummy", &v))
			dummy_key = xstrdup(json_object_get_string(v));
		if (json_object_object_get_ex(conf, "workerDummy", &v))
			worker_dummy_key = xstrdup(json_object_get_string(v));
	}
	json_object *start = json_object_new_object();
	json_object_object_add(start, "socket", json_object_new_string(sock_path));
	json_object_object_add(start, "ready", json_object_new_string(ready_caps));
	json_object_object_add(start, "config", json_object_new_boolean(conf != NULL));
	log_json("start", start);
	json_object_put(start);
	if (!strcmp(ready_caps, "never")) {
		for (;;)
			pause();
	}
	if (delay > 0)
		sleep_ms((uint64_t)delay);
	announce_until_ready("start");
	if (conf && json_object_object_get_ex(conf, "startup", &v))
		run_startup(v);

	uint64_t backoff = 50;
	for (;;) {
		int fd = pending_poll >= 0 ? pending_poll : poll_send();
		pending_poll = -1;
		struct call c = {.method = "POST", .target = "/worker/next", .answer_max = RW_TURN_MAX};
		c.t0 = now_ms();
		if (fd >= 0) {
			read_answer(&c, fd, c.t0 + RW_POLL_MS);
			close(fd);
		} else {
			c.err = -fd;
		}
		if (c.status == 200 && c.body_kept.len) {
			json_object *input = json_tokener_parse(c.body_kept.p);
			call_free(&c);
			if (input && json_object_is_type(input, json_type_object)) {
				handle_turn(input);
			} else {
				json_object *ev = json_object_new_object();
				json_object_object_add(ev, "error", json_object_new_string("turn input is not JSON"));
				note_between("next", ev);
			}
			if (input)
				json_object_put(input);
			backoff = 50;
			continue;
		}
		if (c.status == 204) {
			call_free(&c);
			backoff = 50;
			continue;
		}
		/* No turn and no 204: the broker went away or refused the poll. Announce again. */
		json_object *ev = json_object_new_object();
		call_report(&c, ev);
		call_free(&c);
		note_between("next-failed", ev);
		sleep_ms(backoff);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
		announce_until_ready("next failed");
	}
}

