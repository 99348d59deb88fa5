/* SPDX-License-Identifier: Apache-2.0 */
/* precheck: run one precheck script through the daemons, as a scheduler would (DESIGN.md
 * 8.3), and print its event. */
#include "config.h"

#include <fcntl.h>
#include <time.h>

#include "cli/cli.h"
#include "common/json.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/precheck.h"
#include "common/util.h"

/* statd answers a precheck within its timeoutMs and its backstop margin (30 s); this waits
 * a little longer so the CLI never gives up first. */
#define CLI_PRECHECK_MARGIN_MS 60000u

struct precheck_args {
	const char *channel, *target, *tier, *fired_at;
	const char *approve[RTS_PRECHECK_APPROVED_MAX + 1];
	size_t n_approve;
	bool too_many;
};

static int precheck_option(int opt, const char *arg, void *ctx)
{
	struct precheck_args *a = ctx;
	switch (opt) {
	case 'c':
		a->channel = arg;
		return 0;
	case 't':
		a->target = arg;
		return 0;
	case 'T':
		a->tier = arg;
		return 0;
	case 'f':
		a->fired_at = arg;
		return 0;
	case 'a':
		if (a->n_approve == RTS_PRECHECK_APPROVED_MAX) {
			log_error("at most %u --approve", RTS_PRECHECK_APPROVED_MAX);
			return -1;
		}
		if (!rts_precheck_approval_valid(arg)) {
			log_error("--approve takes SERVER/TOOL, or a tool's approval name ([A-Za-z0-9_.-])");
			return -1;
		}
		a->approve[a->n_approve++] = arg;
		return 0;
	}
	return -1;
}

/* The script: FILE, or standard input for "-". At most RTS_PRECHECK_SCRIPT_MAX bytes of
 * UTF-8 without NUL. Returns a heap string, or NULL after logging why. */
static char *read_script(const char *file)
{
	cleanup_close int fd = strcmp(file, "-") == 0 ? dup(STDIN_FILENO) : open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		log_error_errno(errno, "cannot open %s: %m", file);
		return NULL;
	}
	size_t want = RTS_PRECHECK_SCRIPT_MAX + 1, len = 0;
	char *buf = rts_xcalloc(want + 1, 1);
	while (len < want) {
		ssize_t n = read(fd, buf + len, want - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error_errno(errno, "cannot read %s: %m", file);
			free(buf);
			return NULL;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	const char *problem = len == 0				? "is empty"
			      : len > RTS_PRECHECK_SCRIPT_MAX	? "is longer than the 65536 bytes a script may have"
			      : memchr(buf, '\0', len)		? "contains a NUL byte"
			      : !rts_utf8_valid(buf, len)	? "is not UTF-8"
								: NULL;
	if (problem) {
		log_error("the script %s %s", file, problem);
		free(buf);
		return NULL;
	}
	return buf;
}

/* firedAt (now, in UTC, unless given) and today in the config's time zone. */
static int run_dates(const struct rts_config *cfg, const char *given, char fired_at[RTS_PRECHECK_FIRED_AT_MAX + 1],
		     char today[RTS_PRECHECK_TODAY_LEN + 1])
{
	int64_t t;
	if (given) {
		if (rts_precheck_fired_at_parse(given, &t) < 0)
			return cli_usage_error("--fired-at takes an ISO 8601 date and time with a zone, such as "
					       "2026-03-01T12:00:00Z");
		snprintf(fired_at, RTS_PRECHECK_FIRED_AT_MAX + 1, "%s", given);
	} else {
		time_t now = time(NULL);
		struct tm tm;
		if (!gmtime_r(&now, &tm) || strftime(fired_at, RTS_PRECHECK_FIRED_AT_MAX + 1, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
			return CLI_EXIT_FAILED;
		t = (int64_t)now;
	}
	/* The run's zone is the config's timeZone, as for the turns; its file must exist. */
	cleanup_free char *zone_file = NULL;
	if (rts_time_zone_file(cfg->time_zone, &zone_file) < 0) {
		log_error("timeZone %s has no zone file (%s); is tzdata installed?", cfg->time_zone, zone_file);
		return CLI_EXIT_FAILED;
	}
	if (setenv("TZ", cfg->time_zone, 1) < 0)
		return CLI_EXIT_FAILED;
	tzset();
	time_t tt = (time_t)t;
	struct tm local;
	if (!localtime_r(&tt, &local) || strftime(today, RTS_PRECHECK_TODAY_LEN + 1, "%Y-%m-%d", &local) == 0) {
		log_error("cannot compute today's date in %s", cfg->time_zone);
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}

/* precheck --channel C --target T [--tier X] [--approve S/T]... [--fired-at ISO] FILE */
int cli_cmd_precheck(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option options[] = {
		{"channel", required_argument, NULL, 'c'},
		{"target", required_argument, NULL, 't'},
		{"tier", required_argument, NULL, 'T'},
		{"approve", required_argument, NULL, 'a'},
		{"fired-at", required_argument, NULL, 'f'},
		{0},
	};
	struct precheck_args a = {0};
	int i = cli_parse_sub_options(argc, argv, options, precheck_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i != 1)
		return cli_usage_error("precheck takes one FILE (the script; - for standard input)");
	if (!a.channel || !a.target)
		return cli_usage_error("precheck needs --channel C and --target T");
	int ex = cli_check_channel(a.channel);
	if (ex != CLI_EXIT_OK)
		return ex;
	if (!cli_arg_ok(a.target, RTS_PRECHECK_TARGET_MAX, false))
		return cli_usage_error("--target must be 1 to %u bytes of UTF-8", RTS_PRECHECK_TARGET_MAX);
	if (a.tier && !cli_arg_ok(a.tier, RTS_SPEAKER_FIELD_MAX, false))
		return cli_usage_error("--tier must be 1 to %u bytes of UTF-8", RTS_SPEAKER_FIELD_MAX);
	cleanup_free char *script = read_script(argv[i]);
	if (!script)
		return CLI_EXIT_USAGE;
	cleanup_config struct rts_config *cfg = cli_load_config(o);
	if (!cfg) {
		log_error("precheck reads the config for the run's time zone");
		return CLI_EXIT_FAILED;
	}
	char fired_at[RTS_PRECHECK_FIRED_AT_MAX + 1], today[RTS_PRECHECK_TODAY_LEN + 1];
	ex = run_dates(cfg, a.fired_at, fired_at, today);
	if (ex != CLI_EXIT_OK)
		return ex;

	cleanup_json json_object *req = cli_new_request("precheck");
	json_object_object_add(req, "channel", json_object_new_string(a.channel));
	json_object_object_add(req, "target", json_object_new_string(a.target));
	json_object_object_add(req, "tier", a.tier ? json_object_new_string(a.tier) : NULL);
	json_object_object_add(req, "script", json_object_new_string(script));
	json_object *approved = json_object_new_array();
	for (size_t k = 0; k < a.n_approve; k++)
		json_object_array_add(approved, json_object_new_string(a.approve[k]));
	json_object_object_add(req, "approved", approved);
	json_object_object_add(req, "firedAt", json_object_new_string(fired_at));
	json_object_object_add(req, "timeZone", json_object_new_string(cfg->time_zone));
	json_object_object_add(req, "today", json_object_new_string(today));
	json_object_object_add(req, "schedule", NULL);

	cleanup_control struct cli_control *c = NULL;
	int64_t id;
	ex = cli_control_start(o, req, &c, &id);
	if (ex != CLI_EXIT_OK)
		return ex;
	uint64_t wait_ms = (cfg->has_precheck ? cfg->precheck.timeout_ms : 0) + CLI_PRECHECK_MARGIN_MS;
	cleanup_json json_object *line = NULL;
	const char *why = NULL;
	int r = cli_control_wait_any(c, id, rts_now_ms() + wait_ms, &line, &why);
	if (r < 0)
		return cli_wait_failed(r, why);
	const char *event = rts_json_get_string(line, "event");
	if (!event) {
		/* An answer instead of an event: statd refused the request itself. */
		log_error("statd refused the precheck: %s",
			  cli_statd_word(rts_json_get_string(line, "error"), "an unknown reason"));
		return CLI_EXIT_FAILED;
	}
	if (strcmp(event, "error") == 0) {
		log_error("the precheck could not run: %s",
			  cli_statd_word(rts_json_get_string(line, "error"), "an unknown reason"));
		return CLI_EXIT_FAILED;
	}
	json_object *wake = rts_json_get(line, "wake");
	if (strcmp(event, "precheck") != 0 || !wake || !json_object_is_type(wake, json_type_boolean)) {
		log_error("statd sent an event that is not a precheck's");
		return CLI_EXIT_FAILED;
	}
	/* Whatever wake says, the run was attempted and this is its outcome. */
	cli_print_json(line);
	return CLI_EXIT_OK;
}
