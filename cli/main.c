/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox: the admin CLI (doc/DESIGN.md section 5 "Admin CLI").
 *
 *   roundtable-sandbox [--config PATH] [--runtime-dir DIR] COMMAND [ARGS...]
 *
 * Commands that talk to statd over DIR/control.sock (default DIR /run/roundtable-sandbox).
 * They read no config file, so they work for an account that cannot read it:
 *
 *   on CHANNEL | off CHANNEL | rich CHANNEL PROFILE
 *       Set the channel's mode; statd answers once the channel's queued work is done. A
 *       channel never seen before is fine. Prints "CHANNEL<TAB>MODE" ("<TAB>PROFILE" after
 *       it for rich).
 *   status [--json] [CHANNEL]
 *       With CHANNEL, prints the lines "channel<TAB>KEY", "mode<TAB>on|off|rich", for a rich
 *       channel "profile<TAB>NAME" and "logTag<TAB>sandbox/<16 hex>", then
 *       "running<TAB>yes|no", "queued<TAB>N", "fresh<TAB>yes|no", "spare<TAB>ready|none".
 *       Without, prints "channels<TAB>N", "on<TAB>N", "rich<TAB>N", "running<TAB>N",
 *       "queued<TAB>N", "spares<TAB>N" (ready warm spares) for the whole service ("rich"
 *       only when statd reports it).
 *   fresh CHANNEL
 *       The channel's next successful turn starts without history (memory is kept).
 *       Prints "CHANNEL<TAB>fresh".
 *   cancel CHANNEL
 *       Cancels the running turn and the queued turns. Prints "CHANNEL<TAB>cancelled<TAB>N".
 *   channels [--json]
 *       One line "CHANNEL<TAB>MODE" ("<TAB>PROFILE" for rich) per known channel, sorted by
 *       key.
 *   metrics
 *       Prints the service's metrics in the Prometheus text format (0.0.4), gathered by
 *       statd from the three daemons; roundtable_sandbox_daemon_up says which answered.
 *   say CHANNEL --author ID --name NAME [--principal P] [--tier T] (TEXT | --stdin)
 *       Sends TEXT (one argument, at most RTS_TEXT_MAX bytes of UTF-8) as an addressed guild
 *       message by a resolved human author (principal: the author id; tier: "member"; unless
 *       given), waits for the turn and prints the reply text and a newline on stdout.
 *       Exit 0 only for a "sandbox" route and its reply: every other answer (pass, drop, an
 *       error whatever its route, no route, an unknown one) and no answer at all are
 *       non-zero with one line on stderr, as a bot must treat them: not for a host agent.
 *       For a rich channel: --image FILE (up to 8 PNG, JPEG, WebP or GIF files, the type
 *       read from their first bytes), --attach URL (up to 10, fetched by the host with the
 *       controlled fetch), --files-dir DIR (the reply's files are written there, each
 *       created new: O_CREAT|O_EXCL|O_NOFOLLOW below DIR, never over an existing file or
 *       through a link; a name that is taken fails the command after the others).
 *
 * Commands that read the config (--config, default RTS_DEFAULT_CONFIG):
 *
 *   precheck --channel C --target T [--tier X] [--approve S/T]... [--fired-at ISO] FILE
 *       Runs the precheck script FILE (- for standard input) through statd as a scheduler
 *       would (DESIGN.md 8.3): firedAt now unless given, timeZone the config's, today the
 *       date of firedAt there, schedule null. Prints statd's precheck event as one line of
 *       JSON and exits 0 whatever it says; non-zero only when the run could not be
 *       attempted (a refused request, an "error" event such as busy, statd unreachable).
 *   image build [--precheck | --rich [--content DIR]] [--tag TAG] [--dir DIR]
 *       Runs "docker build -t TAG DIR": DIR defaults to the installed worker image directory
 *       (RTS_PKGLIBDIR/image), TAG to the config's "image" (the config is read only then).
 *       --precheck builds the precheck image instead: DIR (default RTS_PKGLIBDIR/precheck)
 *       holds make-context.sh, which assembles the context from the host's node, and TAG
 *       defaults to the config's precheck.image. --rich builds the rich (Pi) worker image:
 *       DIR (default RTS_PKGLIBDIR/pi) holds make-context.sh, which assembles the context
 *       from the host's node, npm ci of the pinned packages and the operator content of
 *       --content DIR; TAG defaults to the config's rich.image.
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
 *
 * This file parses the command line and dispatches; the verbs live in cli/verbs.c (the
 * statd-only ones), cli/say.c, cli/docker.c (image build, gc), cli/doctor*.c and
 * cli/fetch.c, on cli/request.c (statd requests), cli/output.c (terminal-safe output) and
 * common/spawn.h (the docker CLI).
 */
#include "config.h"

#include <stdarg.h>

#include "cli/cli.h"
#include "cli/doctor.h"
#include "cli/fetch.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

const char cli_usage[] =
	"Usage: roundtable-sandbox [--config PATH] [--runtime-dir DIR] COMMAND [ARGS...]\n"
	"\n"
	"Commands (through statd's control socket in DIR):\n"
	"  on CHANNEL          route the channel's addressed guest messages into the sandbox\n"
	"  off CHANNEL         restore normal routing once queued work is done\n"
	"  rich CHANNEL PROFILE\n"
	"                      route them to the channel's long-lived rich container\n"
	"  status [--json] [CHANNEL]\n"
	"                      the channel's state, or the whole service's\n"
	"  fresh CHANNEL       start the channel's next turn without history\n"
	"  cancel CHANNEL      cancel the channel's running and queued turns\n"
	"  channels [--json]   list channels and their modes\n"
	"  say CHANNEL --author ID --name NAME [--principal P] [--tier T]\n"
	"      [--image FILE]... [--attach URL]... [--files-dir DIR] (TEXT | --stdin)\n"
	"                      run one guest turn and print the reply\n"
	"Commands that read the config:\n"
	"  precheck --channel C --target T [--tier X] [--approve S/T]... [--fired-at ISO] FILE\n"
	"                      run a precheck script and print its event\n"
	"  image build [--precheck | --rich [--content DIR]] [--tag TAG] [--dir DIR]\n"
	"                      build the worker image (or the precheck or rich one) with docker\n"
	"  gc [--force]        remove this installation's leftover containers\n"
	"  doctor [--offline]  check the installation and say how to fix problems\n"
	"Commands that read neither (the controlled fetch):\n"
	"  fetch [--max-bytes N] [--max-redirects N] [--timeout-ms N] [--no-follow] URL\n"
	"                      fetch a public http(s) URL and write its body to stdout\n"
	"  check-url URL       exit 0 when URL is http(s) and all its addresses are public\n"
	"\n"
	"Exit status: 0 ok, 1 failed, 2 usage, 3 say routed pass, 4 say routed drop,\n"
	"5 statd unreachable; fetch and check-url: 3 refused.\n";

int cli_usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	fputs(cli_usage, stderr);
	return CLI_EXIT_USAGE;
}

/* ---- arguments ---- */

bool cli_arg_ok(const char *s, size_t max, bool empty_ok)
{
	size_t n = strlen(s);
	return (n > 0 || empty_ok) && n <= max && rts_utf8_valid(s, n);
}

int cli_check_channel(const char *channel)
{
	if (!cli_arg_ok(channel, RTS_CHANNEL_MAX, false))
		return cli_usage_error("CHANNEL must be 1 to %u bytes of UTF-8", RTS_CHANNEL_MAX);
	return CLI_EXIT_OK;
}

int cli_parse_sub_options(int argc, char **argv, const struct option *longopts,
			  int (*handle)(int opt, const char *arg, void *ctx), void *ctx)
{
	optind = 0; /* glibc: rescan from scratch; rts_parse_options used getopt before us */
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == '?' || handle(c, optarg, ctx) < 0) {
			fputs(cli_usage, stderr);
			return -1;
		}
	}
	return optind;
}

int cli_set_flag(int opt, const char *arg, void *ctx)
{
	*(bool *)ctx = true;
	return 0;
}

struct rts_config *cli_load_config(const struct rts_opts *o)
{
	char err[1024];
	struct rts_config *cfg = rts_config_load(o->config_path, err, sizeof(err));
	if (!cfg)
		log_error("%s", err);
	return cfg;
}

/* The command table; a name not listed here is a usage error. */
static const struct cli_command {
	const char *name;
	int (*run)(const struct rts_opts *o, int argc, char **argv);
} cli_commands[] = {
	{"on", cli_cmd_mode},
	{"off", cli_cmd_mode},
	{"rich", cli_cmd_mode},
	{"status", cli_cmd_status},
	{"fresh", cli_cmd_channel_op},
	{"cancel", cli_cmd_channel_op},
	{"channels", cli_cmd_channels},
	{"metrics", cli_cmd_metrics},
	{"say", cli_cmd_say},		/* cli/say.c */
	{"precheck", cli_cmd_precheck},	/* cli/precheck.c */
	{"image", cli_cmd_image},	/* cli/docker.c */
	{"gc", cli_cmd_gc},		/* cli/docker.c */
	{"doctor", cli_doctor},		/* cli/doctor*.c */
	{"fetch", cli_fetch},		/* cli/fetch.c */
	{"check-url", cli_check_url},	/* cli/fetch.c */
};

int main(int argc, char **argv)
{
	rts_log_init("roundtable-sandbox");
	struct rts_opts o;
	int i = rts_parse_options(argc, argv, cli_usage, &o);
	if (o.launcher_socket)
		return cli_usage_error("--launcher-socket is brokerd's option");
	if (i >= argc)
		return cli_usage_error("no command given");
	int ex = -1;
	for (size_t k = 0; k < RTS_ARRAY_SIZE(cli_commands); k++) {
		if (strcmp(argv[i], cli_commands[k].name) == 0) {
			ex = cli_commands[k].run(&o, argc - i, argv + i);
			break;
		}
	}
	if (ex < 0)
		return cli_usage_error("unknown command \"%s\"", argv[i]);
	/* Output that did not reach its reader is a failure the caller must see. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write to standard output");
		return CLI_EXIT_FAILED;
	}
	return ex;
}
