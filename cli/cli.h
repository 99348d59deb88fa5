/* SPDX-License-Identifier: Apache-2.0 */
/* The admin CLI's own pieces, shared by its verbs (cli/main.c documents the command line,
 * the output and the exit statuses). */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <getopt.h>
#include <json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/control.h"
#include "common/conf.h"
#include "common/daemon.h"
#include "common/spawn.h"

#ifndef RTS_PKGLIBDIR
#define RTS_PKGLIBDIR "/usr/lib/roundtable-sandbox"
#endif
#ifndef RTS_DOCKER
#define RTS_DOCKER "/usr/bin/docker"
#endif

/* Exit statuses (roundtable-sandbox(1)). */
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
/* How long the CLI waits for statd. Answers that need nothing but statd come at once;
 * mode changes, fresh-starts and replies wait for the channel's queued turns, each bounded
 * by turnTimeoutMs (at most 600 s), so only a generous bound guards against a statd that
 * accepted the connection but never answers (for example a socket systemd holds while the
 * service fails to start). */
#define CLI_QUICK_TIMEOUT_MS (30u * 1000u)
#define CLI_QUEUED_TIMEOUT_MS (60u * 60u * 1000u)

/* ---- main.c: arguments ---- */

/* The usage text, printed after a usage error. */
extern const char cli_usage[];

/* Log the message and print the usage text; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A string argument that goes into a request: 1..max bytes (0..max when empty_ok) of UTF-8. */
bool cli_arg_ok(const char *s, size_t max, bool empty_ok);

/* CLI_EXIT_OK when channel is 1 to RTS_CHANNEL_MAX bytes of UTF-8, else a usage error. */
int cli_check_channel(const char *channel);

/* Parse a subcommand's options (argv[0] is the subcommand); handle() gets each option and
 * its argument and returns < 0 to refuse it. Returns the index of the first positional
 * argument, or -1 after a usage error was reported. */
int cli_parse_sub_options(int argc, char **argv, const struct option *longopts,
			  int (*handle)(int opt, const char *arg, void *ctx), void *ctx);

/* A handle() for a lone flag: sets the bool ctx points to. */
int cli_set_flag(int opt, const char *arg, void *ctx);

/* The config at o->config_path with the daemons' own loader; NULL after logging why. */
struct rts_config *cli_load_config(const struct rts_opts *o);

static inline void cli_config_freep(struct rts_config **c)
{
	rts_config_free(*c);
}
#define cleanup_config __attribute__((cleanup(cli_config_freep)))

/* ---- output.c: text from elsewhere on a terminal ---- */

/* rts_term_escape() (common/termtext.h) of a JSON string that names something. */
void cli_put_field(FILE *f, json_object *str);

/* One JSON document and a newline on stdout, through rts_term_json() (common/termtext.h):
 * the same JSON, inert in a terminal. */
void cli_print_json(json_object *answer);

/* ---- request.c: talking to statd ---- */

/* A new request object {"op": op} (caller owns it). */
json_object *cli_new_request(const char *op);

/* Open a connection and send req: CLI_EXIT_OK with *conn (caller frees) and the request's
 * *id, or the exit status after one line on stderr (statd unreachable, a request too
 * long). */
int cli_control_start(const struct rts_opts *o, json_object *req, struct cli_control **conn, int64_t *id);

/* Open a connection, send req and wait for its answer. On CLI_EXIT_OK *answer is the
 * answer (caller owns it), which is not an error answer; *conn (when conn is not NULL)
 * keeps the connection for events, and *id is the request's id. Otherwise the exit status,
 * after one line on stderr. */
int cli_control_request(const struct rts_opts *o, json_object *req, struct cli_control **conn, int64_t *id,
			json_object **answer);

/* Turn a failed cli_control_wait() into an exit status and one line on stderr. */
int cli_wait_failed(int r, const char *why);

/* s when it looks like one of statd's codes or routes ([a-z_], 1 to 32 bytes), else
 * fallback: what statd sends ends up on one line of stderr, and must stay one short line. */
const char *cli_statd_word(const char *s, const char *fallback);

/* One status request for the whole service on a connection of its own, no retry: gc and
 * doctor ask whether statd is there and what it runs. *connected says whether the
 * connection was made. Returns 0 with *answer (caller owns it; it may be an error
 * answer), or cli_control_open()'s, cli_control_send()'s or cli_control_wait()'s -errno,
 * *why as there. */
int cli_statd_status(const char *runtime_dir, unsigned timeout_ms, bool *connected, json_object **answer,
		     const char **why);

/* The member key of statd's answer with the expected type, or NULL after saying so (once:
 * *ok is cleared, and only the first missing member is reported). */
json_object *cli_need(json_object *answer, const char *key, json_type type, bool *ok);

/* True when the answer has "ok": true; else false after saying so. */
bool cli_answer_ok(json_object *answer);

/* ---- docker.c: running the docker CLI ---- */

/* How the CLI runs the docker CLI (common/spawn.h): argv as given (argv[0] is
 * RTS_DOCKER), the operator's own environment (DOCKER_HOST, DOCKER_CONFIG, HOME), stdin
 * from /dev/null, stdout and stderr inherited, in our session and process group (a
 * terminal's ^C stops both). Callers capture what they need. */
struct rts_spawn cli_docker_spawn(char *const argv[]);

/* One phrase for why a docker command did not succeed: rts_spawn_run()'s result r and the
 * result res (its exit status, and the first line of its stderr when captured). */
void cli_docker_failure(int r, const struct rts_spawn_result *res, unsigned timeout_ms, char *buf, size_t len);

/* ---- the verbs (argv[0] is the verb) ---- */

int cli_cmd_mode(const struct rts_opts *o, int argc, char **argv);	/* on, off */
int cli_cmd_status(const struct rts_opts *o, int argc, char **argv);
int cli_cmd_channel_op(const struct rts_opts *o, int argc, char **argv); /* fresh, cancel */
int cli_cmd_channels(const struct rts_opts *o, int argc, char **argv);
int cli_cmd_metrics(const struct rts_opts *o, int argc, char **argv);
int cli_cmd_say(const struct rts_opts *o, int argc, char **argv);
int cli_cmd_image(const struct rts_opts *o, int argc, char **argv);
int cli_cmd_precheck(const struct rts_opts *o, int argc, char **argv); /* cli/precheck.c */

/* context_image.c: image build --precheck and --rich. dir/make-context.sh (dir: the
 * installed $(pkglibdir)/<subdir> or the source tree's worker/<subdir>) assembles the
 * context in a fresh directory under /tmp, given --content content when content is not
 * NULL (the rich image's operator content); docker build -t tag; the directory removed.
 * what names the image in messages ("precheck", "rich worker"). The rich script runs npm
 * ci of the pinned packages as the caller (it needs the npm registry or npm's offline
 * cache). Returns a CLI_EXIT_* code, after one line on stderr when it failed. */
int cli_image_build_context(const char *what, const char *subdir, const char *tag, const char *dir,
			    const char *content);
int cli_cmd_gc(const struct rts_opts *o, int argc, char **argv);

#endif
