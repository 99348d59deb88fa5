/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox: the admin CLI (doc/DESIGN.md section 5 "Admin CLI").
 *
 *   roundtable-sandbox [--config PATH] [--runtime-dir DIR] COMMAND [ARGS...]
 *
 * Commands that talk to statd over DIR/control.sock (default DIR /run/roundtable-sandbox).
 * They read no config file, so they work for an account that cannot read it:
 *
 *   on CHANNEL | off CHANNEL
 *       Set the channel's mode; statd answers once the channel's queued work is done. A
 *       channel never seen before is fine. Prints "CHANNEL<TAB>MODE".
 *   status [--json] [CHANNEL]
 *       With CHANNEL, prints the lines "channel<TAB>KEY", "mode<TAB>on|off",
 *       "running<TAB>yes|no", "queued<TAB>N", "fresh<TAB>yes|no". Without, prints
 *       "channels<TAB>N", "on<TAB>N", "running<TAB>N", "queued<TAB>N" for the whole service.
 *   fresh CHANNEL
 *       The channel's next successful turn starts without history (memory is kept).
 *       Prints "CHANNEL<TAB>fresh".
 *   cancel CHANNEL
 *       Cancels the running turn and the queued turns. Prints "CHANNEL<TAB>cancelled<TAB>N".
 *   channels [--json]
 *       One line "CHANNEL<TAB>MODE" per known channel, sorted by key.
 *   say CHANNEL --author ID --name NAME [--principal P] [--tier T] (TEXT | --stdin)
 *       Sends TEXT (one argument, at most RTS_TEXT_MAX bytes of UTF-8) as an addressed guild
 *       message by a resolved human author (principal: the author id; tier: "member"; unless
 *       given), waits for the turn and prints the reply text and a newline on stdout.
 *       Exit 0 only for a "sandbox" route and its reply: every other answer (pass, drop, an
 *       error whatever its route, no route, an unknown one) and no answer at all are
 *       non-zero with one line on stderr, as a bot must treat them: not for a host agent.
 *
 * Commands that read the config (--config, default RTS_DEFAULT_CONFIG):
 *
 *   image build [--tag TAG] [--dir DIR]
 *       Runs "docker build -t TAG DIR": DIR defaults to the installed worker image directory
 *       (RTS_PKGLIBDIR/image), TAG to the config's "image" (the config is read only then).
 *   gc [--force]
 *       Force-removes this installation's leftover containers: those carrying the
 *       installation label and named roundtable-sandbox-<installation id>-...; prints each
 *       removed name. Refuses while statd reports running turns, unless --force.
 *   doctor [--offline]
 *       Checks the installation (cli/doctor.h): one line per check, "ok: ...", "warn: ..." or
 *       "FAIL: ...; fix: ...", then a summary line; exit 1 when a check failed. Reads the
 *       config when it can and reports it when it cannot. --offline skips Docker and the
 *       daemons' sockets.
 *
 * Commands that read neither: fetch and check-url, the controlled fetch (cli/fetch.h;
 * their exit status 3 means a URL or address refused by a rule).
 *
 * Output. --json prints statd's answer object as one line of JSON. In the other status and
 * channel lines a channel key has backslash and control characters escaped ("\\", "\xNN"),
 * so every record stays one line whatever the bot chose as a key. say prints the reply as
 * received when stdout is not a terminal; on a terminal the same escaping applies (newline
 * and tab excepted), because the reply is model output that a guest can steer. Errors are
 * one line on stderr: "roundtable-sandbox: error: ...".
 *
 * Exit status:
 *   0  success
 *   1  failure: statd refused the request (an answer with an error, whatever its route; the
 *      line names the code and the route), the turn ended with an error event (the line
 *      names its code), statd's answer was not understood or had no route, the config could
 *      not be used, docker failed, gc left containers behind, or a doctor check failed
 *   2  usage error (also: TEXT or another argument too long or not UTF-8)
 *   3  say: statd routed the message "pass": the channel is not sandboxed
 *   4  say: statd routed the message "drop": sandboxed channel, message not eligible
 *   5  statd is unreachable: cannot connect to control.sock, it closed the connection
 *      before answering, or it did not answer in time
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "cli/control.h"
#include "cli/doctor.h"
#include "cli/fetch.h"
#include "cli/spawn.h"
#include "common/conf.h"
#include "common/daemon.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/sock.h"
#include "common/util.h"

#ifndef RTS_PKGLIBDIR
#define RTS_PKGLIBDIR "/usr/lib/roundtable-sandbox"
#endif
#ifndef RTS_DOCKER
#define RTS_DOCKER "/usr/bin/docker"
#endif

enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAILED = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_PASS = 3,
	CLI_EXIT_DROP = 4,
	CLI_EXIT_UNREACHABLE = 5,
};

/* statd may be restarting (a stale socket being replaced): wait this long for it. */
#define CLI_CONNECT_RETRY_MS 1000u
/* Bounds for the docker helpers of gc: listing and one removal. */
#define CLI_DOCKER_PS_TIMEOUT_MS 30000u
#define CLI_DOCKER_PS_MAX (1024u * 1024u)
#define CLI_DOCKER_RM_TIMEOUT_MS 10000u

static const char usage[] =
	"Usage: roundtable-sandbox [--config PATH] [--runtime-dir DIR] COMMAND [ARGS...]\n"
	"\n"
	"Commands (through statd's control socket in DIR):\n"
	"  on CHANNEL          route the channel's addressed guest messages into the sandbox\n"
	"  off CHANNEL         restore normal routing once queued work is done\n"
	"  status [--json] [CHANNEL]\n"
	"                      the channel's state, or the whole service's\n"
	"  fresh CHANNEL       start the channel's next turn without history\n"
	"  cancel CHANNEL      cancel the channel's running and queued turns\n"
	"  channels [--json]   list channels and their modes\n"
	"  say CHANNEL --author ID --name NAME [--principal P] [--tier T] (TEXT | --stdin)\n"
	"                      run one guest turn and print the reply\n"
	"Commands that read the config:\n"
	"  image build [--tag TAG] [--dir DIR]\n"
	"                      build the worker image with docker\n"
	"  gc [--force]        remove this installation's leftover containers\n"
	"  doctor [--offline]  check the installation and say how to fix problems\n"
	"Commands that read neither (the controlled fetch):\n"
	"  fetch [--max-bytes N] [--max-redirects N] [--timeout-ms N] [--no-follow] URL\n"
	"                      fetch a public http(s) URL and write its body to stdout\n"
	"  check-url URL       exit 0 when URL is http(s) and all its addresses are public\n"
	"\n"
	"Exit status: 0 ok, 1 failed, 2 usage, 3 say routed pass, 4 say routed drop,\n"
	"5 statd unreachable; fetch and check-url: 3 refused.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	fputs(usage, stderr);
	return CLI_EXIT_USAGE;
}

/* ---- output ---- */

/* Length of the valid UTF-8 sequence at s (at most left bytes), or 0 when it is not one. */
static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (n == 0 || n > left || !rts_utf8_valid((const char *)s, n))
		return 0;
	return n;
}

/* Code point of the valid n-byte (1..3) UTF-8 sequence at s; 4-byte ones are never special. */
static unsigned utf8_code_point(const unsigned char *s, size_t n)
{
	if (n == 1)
		return s[0];
	if (n == 2)
		return (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu);
	if (n == 3)
		return (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
	return 0x10000;
}

/* C1 control characters (U+0080..U+009F: U+009B is a CSI to some terminals) and the bidi
 * embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069), which reorder what
 * a terminal shows after them ("Trojan Source"). The marks U+200E/U+200F stay: they are
 * ordinary in right-to-left text and reorder nothing beyond their neighbours. */
static bool code_point_disguises(unsigned cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Write the len bytes at s with backslash, C0 control characters, DEL and bytes that are not
 * UTF-8 escaped ("\\", "\xNN"), and the code points code_point_disguises() names as
 * "\uXXXX", so untrusted text cannot move the cursor, rewrite the terminal, reorder what
 * follows it or split a record. keep_layout lets newline and tab through. */
static void put_escaped(FILE *f, const char *str, size_t len, bool keep_layout)
{
	const unsigned char *s = (const unsigned char *)str;
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		size_t n = utf8_seq_len(s + i, len - i);
		unsigned cp = n ? utf8_code_point(s + i, n) : 0;
		if (keep_layout && (c == '\n' || c == '\t')) {
			fputc(c, f);
			i++;
		} else if (c == '\\') {
			fputs("\\\\", f);
			i++;
		} else if (n > 1 && code_point_disguises(cp)) {
			fprintf(f, "\\u%04x", cp);
			i += n;
		} else if (n == 0 || c < 0x20 || c == 0x7f) {
			size_t k = n ? n : 1;
			for (size_t j = 0; j < k; j++)
				fprintf(f, "\\x%02x", s[i + j]);
			i += k;
		} else {
			fwrite(s + i, 1, n, f);
			i += n;
		}
	}
}

static void put_field(FILE *f, json_object *str)
{
	put_escaped(f, json_object_get_string(str), (size_t)json_object_get_string_len(str), false);
}

/* ---- arguments ---- */

/* A string argument that goes into a request: 1..max bytes (0..max when empty_ok) of UTF-8. */
static bool arg_ok(const char *s, size_t max, bool empty_ok)
{
	size_t n = strlen(s);
	return (n > 0 || empty_ok) && n <= max && rts_utf8_valid(s, n);
}

static int check_channel(const char *channel)
{
	if (!arg_ok(channel, RTS_CHANNEL_MAX, false))
		return usage_error("CHANNEL must be 1 to %u bytes of UTF-8", RTS_CHANNEL_MAX);
	return CLI_EXIT_OK;
}

/* Parse a subcommand's options. argv[0] is the subcommand name. Returns the index of the
 * first positional argument, or -1 after a usage error was reported. */
static int parse_sub_options(int argc, char **argv, const struct option *longopts,
			     int (*handle)(int opt, const char *arg, void *ctx), void *ctx)
{
	optind = 0; /* glibc: rescan from scratch; rts_parse_options used getopt before us */
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == '?' || handle(c, optarg, ctx) < 0) {
			fputs(usage, stderr);
			return -1;
		}
	}
	return optind;
}

static int set_flag(int opt, const char *arg, void *ctx)
{
	*(bool *)ctx = true;
	return 0;
}

/* ---- talking to statd ---- */

static int unreachable(int r, const char *what)
{
	log_error_errno(r, "%s: %m", what);
	return CLI_EXIT_UNREACHABLE;
}

/* How long the CLI waits for statd. Answers that need nothing but statd come at once;
 * mode changes, fresh-starts and replies wait for the channel's queued turns, each bounded
 * by turnTimeoutMs (at most 600 s), so only a generous bound guards against a statd that
 * accepted the connection but never answers (for example a socket systemd holds while the
 * service fails to start). */
#define CLI_QUICK_TIMEOUT_MS (30u * 1000u)
#define CLI_QUEUED_TIMEOUT_MS (60u * 60u * 1000u)

/* Turn a failed cli_control_wait() into an exit code and one line on stderr. */
static int wait_failed(int r, const char *why)
{
	switch (r) {
	case -ETIMEDOUT:
		log_error("statd did not answer in time (is roundtable-sandbox-statd running and healthy?)");
		return CLI_EXIT_UNREACHABLE;
	case -ECONNRESET:
		log_error("statd closed the connection before answering");
		return CLI_EXIT_UNREACHABLE;
	case -EMSGSIZE:
		log_error("statd sent a line longer than %u bytes", CLI_ANSWER_MAX);
		return CLI_EXIT_FAILED;
	case -EBADMSG:
		log_error("statd sent a line that is not a JSON object: %s", why ? why : "invalid");
		return CLI_EXIT_FAILED;
	default:
		return unreachable(r, "reading from the control socket");
	}
}

/* An answer carrying "error" is statd refusing the request. */
/* s when it looks like one of statd's codes or routes ([a-z_], 1 to 32 bytes), else
 * fallback: what statd sends ends up on one line of stderr, and must stay one short line. */
static const char *statd_word(const char *s, const char *fallback)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 32 || strspn(s, "abcdefghijklmnopqrstuvwxyz_") != n)
		return fallback;
	return s;
}

/* An answer with an "error" is a refusal, whatever else it carries: for say, even beside a
 * "pass" route the message was not taken as sent. The route, when there is one, is named
 * too (statd's codes and routes are short fixed words). */
static int answer_refused(json_object *answer)
{
	json_object *err = rts_json_get(answer, "error");
	if (!err)
		return CLI_EXIT_OK;
	const char *code = statd_word(json_object_is_type(err, json_type_string) ? json_object_get_string(err) : NULL,
				      "an unknown reason");
	const char *route = rts_json_get(answer, "route") ? statd_word(rts_json_get_string(answer, "route"), "unknown")
							   : NULL;
	if (route)
		log_error("statd refused the request: %s (route %s)", code, route);
	else
		log_error("statd refused the request: %s", code);
	return CLI_EXIT_FAILED;
}

/* Open a connection, send req and wait for its answer. On CLI_EXIT_OK *answer is the
 * answer (caller owns it), which is not an error answer; *conn (when conn is not NULL)
 * keeps the connection for events, and *id is the request's id. */
static int control_request(const struct rts_opts *o, json_object *req, struct cli_control **conn, int64_t *id,
			   json_object **answer)
{
	*answer = NULL;
	cleanup_control struct cli_control *c = NULL;
	int r = cli_control_open(o->runtime_dir, CLI_CONNECT_RETRY_MS, &c);
	if (r < 0) {
		cleanup_free char *path = rts_runtime_path(o->runtime_dir, RTS_SOCK_CONTROL);
		log_error_errno(r, "cannot connect to %s: %m (is roundtable-sandbox-statd running?)", path);
		return CLI_EXIT_UNREACHABLE;
	}
	int64_t req_id;
	r = cli_control_send(c, req, &req_id);
	if (r == -E2BIG)
		return usage_error("the request would be longer than the %u bytes statd accepts", RTS_CONTROL_LINE_MAX);
	if (r < 0)
		return unreachable(r, "sending to the control socket");
	const char *why = NULL;
	json_object *a = NULL;
	const char *op = rts_json_get_string(req, "op");
	bool queued = op && (strcmp(op, "mode") == 0 || strcmp(op, "fresh") == 0);
	r = cli_control_wait(c, req_id, false, rts_now_ms() + (queued ? CLI_QUEUED_TIMEOUT_MS : CLI_QUICK_TIMEOUT_MS),
			     &a, &why);
	if (r < 0)
		return wait_failed(r, why);
	int ex = answer_refused(a);
	if (ex != CLI_EXIT_OK) {
		json_object_put(a);
		return ex;
	}
	*answer = a;
	if (id)
		*id = req_id;
	if (conn)
		*conn = steal_pointer(&c);
	return CLI_EXIT_OK;
}

/* Fetch a member of statd's answer with the expected type; a missing or mistyped member
 * is a contract violation we report instead of printing half an answer. */
static json_object *need(json_object *answer, const char *key, json_type type, bool *ok)
{
	json_object *v = rts_json_get(answer, key);
	if (!v || !json_object_is_type(v, type)) {
		if (*ok)
			log_error("statd's answer lacks \"%s\" of type %s", key, json_type_to_name(type));
		*ok = false;
		return NULL;
	}
	return v;
}

static bool answer_ok(json_object *answer)
{
	json_object *v = rts_json_get(answer, "ok");
	if (v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v))
		return true;
	log_error("statd's answer lacks \"ok\": true");
	return false;
}

static json_object *new_request(const char *op)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string(op));
	return req;
}

/* One JSON document and a newline. json-c writes C1 controls and bidi overrides raw; they
 * can only occur inside strings, so they are written as \uXXXX escapes there: still the same
 * JSON, but inert in a terminal. */
static void print_json(json_object *answer)
{
	cleanup_free char *s = rts_json_dump(answer);
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len(p + i, len - i);
		if (n > 1 && code_point_disguises(utf8_code_point(p + i, n)))
			printf("\\u%04x", utf8_code_point(p + i, n));
		else
			fwrite(p + i, 1, n ? n : 1, stdout);
		i += n ? n : 1;
	}
	putchar('\n');
}

/* ---- commands ---- */

/* on CHANNEL, off CHANNEL */
static int cmd_mode(const struct rts_opts *o, int argc, char **argv)
{
	if (argc != 2)
		return usage_error("%s takes exactly one CHANNEL", argv[0]);
	int ex = check_channel(argv[1]);
	if (ex != CLI_EXIT_OK)
		return ex;
	cleanup_json json_object *req = new_request("mode");
	json_object_object_add(req, "channel", json_object_new_string(argv[1]));
	json_object_object_add(req, "mode", json_object_new_string(argv[0]));
	cleanup_json json_object *answer = NULL;
	ex = control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = answer_ok(answer);
	json_object *channel = need(answer, "channel", json_type_string, &ok);
	json_object *mode = need(answer, "mode", json_type_string, &ok);
	if (!ok)
		return CLI_EXIT_FAILED;
	put_field(stdout, channel);
	putchar('\t');
	put_field(stdout, mode);
	putchar('\n');
	return CLI_EXIT_OK;
}

static const struct option json_options[] = {
	{"json", no_argument, NULL, 'j'},
	{0},
};

/* status [--json] [CHANNEL] */
static int cmd_status(const struct rts_opts *o, int argc, char **argv)
{
	bool json = false;
	int i = parse_sub_options(argc, argv, json_options, set_flag, &json);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i > 1)
		return usage_error("status takes at most one CHANNEL");
	const char *channel_arg = i < argc ? argv[i] : NULL;
	if (channel_arg) {
		int ex = check_channel(channel_arg);
		if (ex != CLI_EXIT_OK)
			return ex;
	}
	cleanup_json json_object *req = new_request("status");
	if (channel_arg)
		json_object_object_add(req, "channel", json_object_new_string(channel_arg));
	cleanup_json json_object *answer = NULL;
	int ex = control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = answer_ok(answer);
	if (channel_arg) {
		json_object *channel = need(answer, "channel", json_type_string, &ok);
		json_object *mode = need(answer, "mode", json_type_string, &ok);
		json_object *running = need(answer, "running", json_type_boolean, &ok);
		json_object *queued = need(answer, "queued", json_type_int, &ok);
		json_object *fresh = need(answer, "fresh", json_type_boolean, &ok);
		if (!ok)
			return CLI_EXIT_FAILED;
		if (json) {
			print_json(answer);
			return CLI_EXIT_OK;
		}
		fputs("channel\t", stdout);
		put_field(stdout, channel);
		fputs("\nmode\t", stdout);
		put_field(stdout, mode);
		printf("\nrunning\t%s\nqueued\t%" PRId64 "\nfresh\t%s\n", json_object_get_boolean(running) ? "yes" : "no",
		       json_object_get_int64(queued), json_object_get_boolean(fresh) ? "yes" : "no");
		return CLI_EXIT_OK;
	}
	static const char *const counts[] = {"channels", "on", "running", "queued"};
	json_object *v[RTS_ARRAY_SIZE(counts)];
	for (size_t k = 0; k < RTS_ARRAY_SIZE(counts); k++)
		v[k] = need(answer, counts[k], json_type_int, &ok);
	if (!ok)
		return CLI_EXIT_FAILED;
	if (json) {
		print_json(answer);
		return CLI_EXIT_OK;
	}
	for (size_t k = 0; k < RTS_ARRAY_SIZE(counts); k++)
		printf("%s\t%" PRId64 "\n", counts[k], json_object_get_int64(v[k]));
	return CLI_EXIT_OK;
}

/* fresh CHANNEL, cancel CHANNEL */
static int cmd_channel_op(const struct rts_opts *o, int argc, char **argv)
{
	if (argc != 2)
		return usage_error("%s takes exactly one CHANNEL", argv[0]);
	int ex = check_channel(argv[1]);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool cancel = strcmp(argv[0], "cancel") == 0;
	cleanup_json json_object *req = new_request(argv[0]);
	json_object_object_add(req, "channel", json_object_new_string(argv[1]));
	cleanup_json json_object *answer = NULL;
	ex = control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = answer_ok(answer);
	json_object *channel = need(answer, "channel", json_type_string, &ok);
	json_object *n = cancel ? need(answer, "cancelled", json_type_int, &ok) : NULL;
	if (!cancel) {
		json_object *fresh = need(answer, "fresh", json_type_boolean, &ok);
		if (fresh && !json_object_get_boolean(fresh)) {
			log_error("statd did not record the fresh start");
			ok = false;
		}
	}
	if (!ok)
		return CLI_EXIT_FAILED;
	put_field(stdout, channel);
	if (cancel)
		printf("\tcancelled\t%" PRId64 "\n", json_object_get_int64(n));
	else
		fputs("\tfresh\n", stdout);
	return CLI_EXIT_OK;
}

/* channels [--json] */
static int cmd_channels(const struct rts_opts *o, int argc, char **argv)
{
	bool json = false;
	int i = parse_sub_options(argc, argv, json_options, set_flag, &json);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc)
		return usage_error("channels takes no arguments");
	cleanup_json json_object *req = new_request("channels");
	cleanup_json json_object *answer = NULL;
	int ex = control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = answer_ok(answer);
	json_object *list = need(answer, "channels", json_type_array, &ok);
	size_t n = list ? json_object_array_length(list) : 0;
	for (size_t k = 0; ok && k < n; k++) {
		json_object *e = json_object_array_get_idx(list, k);
		need(e, "channel", json_type_string, &ok);
		need(e, "mode", json_type_string, &ok);
	}
	if (!ok)
		return CLI_EXIT_FAILED;
	if (json) {
		print_json(answer);
		return CLI_EXIT_OK;
	}
	for (size_t k = 0; k < n; k++) {
		json_object *e = json_object_array_get_idx(list, k);
		put_field(stdout, rts_json_get(e, "channel"));
		putchar('\t');
		put_field(stdout, rts_json_get(e, "mode"));
		putchar('\n');
	}
	return CLI_EXIT_OK;
}

struct say_args {
	const char *author, *name, *principal, *tier;
	bool from_stdin;
};

static int say_option(int opt, const char *arg, void *ctx)
{
	struct say_args *a = ctx;
	if (opt == 's') {
		a->from_stdin = true;
		return 0;
	}
	const char **slot = opt == 'a' ? &a->author : opt == 'n' ? &a->name : opt == 'p' ? &a->principal : &a->tier;
	static const char *const names[] = {['a'] = "--author", ['n'] = "--name", ['p'] = "--principal", ['t'] = "--tier"};
	if (!arg_ok(arg, RTS_SPEAKER_FIELD_MAX, false)) {
		log_error("%s must be 1 to %u bytes of UTF-8", names[opt], RTS_SPEAKER_FIELD_MAX);
		return -1;
	}
	*slot = arg;
	return 0;
}

/* Read all of standard input as a say TEXT: at most RTS_TEXT_MAX bytes, one trailing
 * newline dropped (as `echo` and here-documents add one). Returns a NUL-terminated string the
 * caller frees, or NULL after logging why (too long, a NUL byte, a read error). */
static char *read_stdin_text(void)
{
	/* Up to two bytes past the limit: the newline that may be dropped, and one that shows
	 * the input is too long even then. */
	size_t want = RTS_TEXT_MAX + 2, len = 0;
	char *buf = rts_xcalloc(want + 1, 1);
	while (len < want) {
		ssize_t n = read(STDIN_FILENO, buf + len, want - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error_errno(errno, "cannot read TEXT from standard input: %m");
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > RTS_TEXT_MAX) {
		log_error("TEXT on standard input is longer than %u bytes", RTS_TEXT_MAX);
		free(buf);
		return NULL;
	}
	if (memchr(buf, '\0', len)) {
		log_error("TEXT on standard input contains a NUL byte");
		free(buf);
		return NULL;
	}
	return buf;
}

/* say CHANNEL --author ID --name NAME [--principal P] [--tier T] (TEXT | --stdin) */
static int cmd_say(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option say_options[] = {
		{"author", required_argument, NULL, 'a'},
		{"name", required_argument, NULL, 'n'},
		{"principal", required_argument, NULL, 'p'},
		{"tier", required_argument, NULL, 't'},
		{"stdin", no_argument, NULL, 's'},
		{0},
	};
	struct say_args a = {.tier = "member"};
	int i = parse_sub_options(argc, argv, say_options, say_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i != (a.from_stdin ? 1 : 2))
		return usage_error(a.from_stdin ? "say --stdin takes CHANNEL only (TEXT comes from standard input)"
						: "say takes CHANNEL and TEXT (one argument; put -- before a TEXT "
						  "starting with -), or CHANNEL and --stdin");
	if (!a.author || !a.name)
		return usage_error("say needs --author ID and --name NAME");
	const char *channel = argv[i];
	int ex = check_channel(channel);
	if (ex != CLI_EXIT_OK)
		return ex;
	/* On the command line, TEXT is visible to every local user (ps, /proc/PID/cmdline). */
	cleanup_free char *stdin_text = NULL;
	if (a.from_stdin && !(stdin_text = read_stdin_text()))
		return CLI_EXIT_USAGE;
	const char *text = a.from_stdin ? stdin_text : argv[i + 1];
	if (!arg_ok(text, RTS_TEXT_MAX, true))
		return usage_error(strlen(text) > RTS_TEXT_MAX ? "TEXT must be at most %u bytes"
							       : "TEXT must be valid UTF-8 (at most %u bytes)",
				   RTS_TEXT_MAX);

	cleanup_json json_object *req = new_request("message");
	json_object_object_add(req, "channel", json_object_new_string(channel));
	json_object_object_add(req, "guild", json_object_new_boolean(true));
	json_object *author = json_object_new_object();
	json_object_object_add(author, "id", json_object_new_string(a.author));
	json_object_object_add(author, "name", json_object_new_string(a.name));
	json_object_object_add(author, "principalId", json_object_new_string(a.principal ? a.principal : a.author));
	json_object_object_add(author, "tier", json_object_new_string(a.tier));
	json_object_object_add(author, "bot", json_object_new_boolean(false));
	json_object_object_add(author, "integration", json_object_new_boolean(false));
	json_object_object_add(req, "author", author);
	json_object_object_add(req, "addressed", json_object_new_boolean(true));
	json_object_object_add(req, "text", json_object_new_string(text));
	json_object_object_add(req, "attachments", json_object_new_int(0));

	cleanup_control struct cli_control *c = NULL;
	cleanup_json json_object *answer = NULL;
	int64_t id;
	ex = control_request(o, req, &c, &id, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	const char *route = rts_json_get_string(answer, "route");
	if (!route) {
		log_error("statd's answer has no route: the message was not routed");
		return CLI_EXIT_FAILED;
	}
	if (strcmp(route, "pass") == 0) {
		log_error("not sandboxed: the channel is not in sandbox mode (route pass); fix: roundtable-sandbox on "
			  "CHANNEL");
		return CLI_EXIT_PASS;
	}
	if (strcmp(route, "drop") == 0) {
		log_error("dropped: the channel is sandboxed but the message is not eligible (route drop)");
		return CLI_EXIT_DROP;
	}
	if (strcmp(route, "sandbox") != 0) {
		log_error("statd answered with an unknown route \"%s\"", statd_word(route, "?"));
		return CLI_EXIT_FAILED;
	}

	cleanup_json json_object *event = NULL;
	const char *why = NULL;
	int r = cli_control_wait(c, id, true, rts_now_ms() + CLI_QUEUED_TIMEOUT_MS, &event, &why);
	if (r < 0)
		return wait_failed(r, why);
	const char *kind = rts_json_get_string(event, "event");
	if (kind && strcmp(kind, "reply") == 0) {
		json_object *t = rts_json_get(event, "text");
		if (!t || !json_object_is_type(t, json_type_string)) {
			log_error("statd's reply event lacks \"text\"");
			return CLI_EXIT_FAILED;
		}
		const char *s = json_object_get_string(t);
		size_t len = (size_t)json_object_get_string_len(t);
		if (isatty(STDOUT_FILENO))
			put_escaped(stdout, s, len, true);
		else
			fwrite(s, 1, len, stdout);
		putchar('\n');
		return CLI_EXIT_OK;
	}
	if (kind && strcmp(kind, "error") == 0) {
		log_error("the turn failed: %s", statd_word(rts_json_get_string(event, "error"), "unknown error"));
		return CLI_EXIT_FAILED;
	}
	log_error("statd sent an unknown event");
	return CLI_EXIT_FAILED;
}

/* Same rule as the config's "image" key: [a-z0-9][A-Za-z0-9._/:@-]*, so a tag can never
 * look like an option to docker. */
static bool image_ref_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > RTS_IMAGE_MAX || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-' || *p == '/' || *p == ':' || *p == '@'))
			return false;
	return true;
}

static struct rts_config *load_config(const struct rts_opts *o)
{
	char err[1024];
	struct rts_config *cfg = rts_config_load(o->config_path, err, sizeof(err));
	if (!cfg)
		log_error("%s", err);
	return cfg;
}

static void config_freep(struct rts_config **c)
{
	rts_config_free(*c);
}
#define cleanup_config _cleanup_(config_freep)

struct image_args {
	const char *tag, *dir;
};

static int image_option(int opt, const char *arg, void *ctx)
{
	struct image_args *a = ctx;
	if (opt == 't')
		a->tag = arg;
	else
		a->dir = arg;
	return 0;
}

/* image build [--tag TAG] [--dir DIR] */
static int cmd_image(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option image_options[] = {
		{"tag", required_argument, NULL, 't'},
		{"dir", required_argument, NULL, 'd'},
		{0},
	};
	if (argc < 2 || strcmp(argv[1], "build") != 0)
		return usage_error("the only image command is \"image build\"");
	struct image_args a = {.dir = RTS_PKGLIBDIR "/image"};
	int i = parse_sub_options(argc - 1, argv + 1, image_options, image_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc - 1)
		return usage_error("image build takes no arguments besides --tag and --dir");
	if (a.dir[0] == '\0')
		return usage_error("--dir must not be empty");

	cleanup_config struct rts_config *cfg = NULL;
	if (!a.tag) {
		cfg = load_config(o);
		if (!cfg) {
			log_error("the default tag comes from the config's \"image\"; fix the config or pass --tag");
			return CLI_EXIT_FAILED;
		}
		a.tag = cfg->image;
	}
	if (!image_ref_ok(a.tag))
		return usage_error("the tag must match [a-z0-9][A-Za-z0-9._/:@-]* (at most %u bytes)", RTS_IMAGE_MAX);

	/* Check here so a missing build reads as such, not as a docker error about context. */
	cleanup_free char *dockerfile = rts_xasprintf("%s/Dockerfile", a.dir);
	struct stat st;
	if (stat(dockerfile, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_error("%s has no Dockerfile: build the project first, or pass --dir with the worker image "
			  "directory (the build tree's is worker/image)",
			  a.dir);
		return CLI_EXIT_FAILED;
	}
	/* A relative DIR starting with '-' must not read as an option. */
	cleanup_free char *dir = a.dir[0] == '/' ? rts_xstrdup(a.dir) : rts_xasprintf("./%s", a.dir);
	char *const args[] = {RTS_DOCKER, "build", "-t", (char *)a.tag, dir, NULL};
	int r = cli_spawn(args, NULL, 0, 0);
	if (r == 0)
		return CLI_EXIT_OK;
	if (r == 127)
		log_error("cannot run %s", RTS_DOCKER);
	else if (r < 0)
		log_error_errno(r, "running %s build: %m", RTS_DOCKER);
	else
		log_error("%s build failed with exit status %d", RTS_DOCKER, r);
	return CLI_EXIT_FAILED;
}

/* gc must not pull containers out from under running turns: ask statd when it answers.
 * Returns CLI_EXIT_OK when removal may go ahead. */
static int gc_check_idle(const struct rts_opts *o)
{
	cleanup_control struct cli_control *c = NULL;
	if (cli_control_open(o->runtime_dir, 0, &c) < 0)
		return CLI_EXIT_OK; /* statd is not running: every container left is stale */
	cleanup_json json_object *req = new_request("status");
	int64_t id;
	cleanup_json json_object *answer = NULL;
	const char *why = NULL;
	if (cli_control_send(c, req, &id) < 0 ||
	    cli_control_wait(c, id, false, rts_now_ms() + CLI_QUICK_TIMEOUT_MS, &answer, &why) < 0) {
		log_error("statd answers on the control socket but its status could not be read; pass --force "
			  "to remove containers anyway");
		return CLI_EXIT_FAILED;
	}
	json_object *running = rts_json_get(answer, "running");
	if (!running || !json_object_is_type(running, json_type_int)) {
		log_error("statd's status does not say whether turns are running; pass --force to remove "
			  "containers anyway");
		return CLI_EXIT_FAILED;
	}
	if (json_object_get_int64(running) > 0) {
		log_error("statd reports %" PRId64 " running turn(s); wait, stop the daemons, or pass --force",
			  json_object_get_int64(running));
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}

/* A name docker listed for our label that also has this installation's prefix and only
 * characters docker allows in names. */
static bool gc_name_ok(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix), n = strlen(name);
	if (n <= pl || strncmp(name, prefix, pl) != 0)
		return false;
	for (const char *p = name + pl; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return false;
	return true;
}

/* gc [--force] */
static int cmd_gc(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option gc_options[] = {
		{"force", no_argument, NULL, 'f'},
		{0},
	};
	bool force = false;
	int i = parse_sub_options(argc, argv, gc_options, set_flag, &force);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc)
		return usage_error("gc takes no arguments besides --force");
	cleanup_config struct rts_config *cfg = load_config(o);
	if (!cfg)
		return CLI_EXIT_FAILED;
	if (!force) {
		int ex = gc_check_idle(o);
		if (ex != CLI_EXIT_OK)
			return ex;
	}

	cleanup_free char *filter = rts_xasprintf("label=%s=%s", RTS_LABEL_INSTALLATION, cfg->installation_id);
	char *const ps[] = {RTS_DOCKER, "ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL};
	cleanup_free char *names = NULL;
	int r = cli_spawn(ps, &names, CLI_DOCKER_PS_MAX, CLI_DOCKER_PS_TIMEOUT_MS);
	if (r != 0) {
		if (r > 0)
			log_error("%s ps failed with exit status %d", RTS_DOCKER, r);
		else
			log_error_errno(r, "%s ps: %m", RTS_DOCKER);
		return CLI_EXIT_FAILED;
	}

	cleanup_free char *prefix = rts_xasprintf("%s%s-", RTS_CONTAINER_PREFIX, cfg->installation_id);
	int ex = CLI_EXIT_OK;
	unsigned removed = 0;
	char *save = NULL;
	for (char *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
		if (!gc_name_ok(name, prefix)) {
			/* Our label on a container we did not name: leave it to the operator. */
			log_warning("skipping %s: it has this installation's label but not its name prefix", name);
			continue;
		}
		char *const rm[] = {RTS_DOCKER, "rm", "-f", name, NULL};
		cleanup_free char *ignored = NULL;
		r = cli_spawn(rm, &ignored, 4096, CLI_DOCKER_RM_TIMEOUT_MS);
		if (r == 0) {
			puts(name);
			removed++;
			continue;
		}
		if (r > 0)
			log_error("%s rm -f %s failed with exit status %d", RTS_DOCKER, name, r);
		else
			log_error_errno(r, "%s rm -f %s: %m", RTS_DOCKER, name);
		ex = CLI_EXIT_FAILED;
	}
	/* stdout stays the list of removed names; say on stderr that none were found. */
	if (removed == 0 && ex == CLI_EXIT_OK)
		log_info("no stale containers of installation %s", cfg->installation_id);
	return ex;
}

/* The command table; a name not listed here is a usage error. */
static const struct cli_command {
	const char *name;
	int (*run)(const struct rts_opts *o, int argc, char **argv);
} cli_commands[] = {
	{"on", cmd_mode},	      {"off", cmd_mode},	 {"status", cmd_status},
	{"fresh", cmd_channel_op},    {"cancel", cmd_channel_op}, {"channels", cmd_channels},
	{"say", cmd_say},	      {"image", cmd_image},	 {"gc", cmd_gc},
	{"doctor", cli_doctor},	      {"fetch", cli_fetch},	 {"check-url", cli_check_url},
};

int main(int argc, char **argv)
{
	rts_log_init("roundtable-sandbox");
	struct rts_opts o;
	int i = rts_parse_options(argc, argv, usage, &o);
	if (i >= argc)
		return usage_error("no command given");
	int ex = -1;
	for (size_t k = 0; k < RTS_ARRAY_SIZE(cli_commands); k++) {
		if (strcmp(argv[i], cli_commands[k].name) == 0) {
			ex = cli_commands[k].run(&o, argc - i, argv + i);
			break;
		}
	}
	if (ex < 0)
		return usage_error("unknown command \"%s\"", argv[i]);
	/* Output that did not reach its reader is a failure the caller must see. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output");
		return CLI_EXIT_FAILED;
	}
	return ex;
}
