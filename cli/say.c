/* SPDX-License-Identifier: Apache-2.0 */
/* say: one guest turn from the command line, answered like a bot must answer it. */
#include "config.h"

#include "cli/cli.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

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
	if (!cli_arg_ok(arg, RTS_SPEAKER_FIELD_MAX, false)) {
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
int cli_cmd_say(const struct rts_opts *o, int argc, char **argv)
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
	int i = cli_parse_sub_options(argc, argv, say_options, say_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i != (a.from_stdin ? 1 : 2))
		return cli_usage_error(a.from_stdin ? "say --stdin takes CHANNEL only (TEXT comes from standard input)"
						: "say takes CHANNEL and TEXT (one argument; put -- before a TEXT "
						  "starting with -), or CHANNEL and --stdin");
	if (!a.author || !a.name)
		return cli_usage_error("say needs --author ID and --name NAME");
	const char *channel = argv[i];
	int ex = cli_check_channel(channel);
	if (ex != CLI_EXIT_OK)
		return ex;
	/* On the command line, TEXT is visible to every local user (ps, /proc/PID/cmdline). */
	cleanup_free char *stdin_text = NULL;
	if (a.from_stdin && !(stdin_text = read_stdin_text()))
		return CLI_EXIT_USAGE;
	const char *text = a.from_stdin ? stdin_text : argv[i + 1];
	if (!cli_arg_ok(text, RTS_TEXT_MAX, true))
		return cli_usage_error(strlen(text) > RTS_TEXT_MAX ? "TEXT must be at most %u bytes"
							       : "TEXT must be valid UTF-8 (at most %u bytes)",
				   RTS_TEXT_MAX);

	cleanup_json json_object *req = cli_new_request("message");
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
	ex = cli_control_request(o, req, &c, &id, &answer);
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
		log_error("statd answered with an unknown route \"%s\"", cli_statd_word(route, "?"));
		return CLI_EXIT_FAILED;
	}

	cleanup_json json_object *event = NULL;
	const char *why = NULL;
	int r = cli_control_wait(c, id, true, rts_now_ms() + CLI_QUEUED_TIMEOUT_MS, &event, &why);
	if (r < 0)
		return cli_wait_failed(r, why);
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
			cli_put_escaped(stdout, s, len, true);
		else
			fwrite(s, 1, len, stdout);
		putchar('\n');
		return CLI_EXIT_OK;
	}
	if (kind && strcmp(kind, "error") == 0) {
		log_error("the turn failed: %s", cli_statd_word(rts_json_get_string(event, "error"), "unknown error"));
		return CLI_EXIT_FAILED;
	}
	log_error("statd sent an unknown event");
	return CLI_EXIT_FAILED;
}
