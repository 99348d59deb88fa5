/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs that only talk to statd: on, off, status, fresh, cancel, channels, metrics. */
#include "config.h"

#include <inttypes.h>

#include "cli/cli.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/proto.h"
#include "common/tools.h"
#include "common/util.h"

/* VERB CHANNEL: the request {"op": op, "channel": CHANNEL} in *req (caller owns it), or
 * a usage error. */
static int channel_request(int argc, char **argv, const char *op, json_object **req)
{
	*req = NULL;
	if (argc != 2)
		return cli_usage_error("%s takes exactly one CHANNEL", argv[0]);
	int ex = cli_check_channel(argv[1]);
	if (ex != CLI_EXIT_OK)
		return ex;
	*req = cli_new_request(op);
	json_object_object_add(*req, "channel", json_object_new_string(argv[1]));
	return CLI_EXIT_OK;
}

/* on CHANNEL, off CHANNEL, rich CHANNEL PROFILE */
int cli_cmd_mode(const struct rts_opts *o, int argc, char **argv)
{
	cleanup_json json_object *req = NULL;
	bool rich = strcmp(argv[0], "rich") == 0;
	if (rich) {
		if (argc != 3)
			return cli_usage_error("rich takes CHANNEL and PROFILE");
		if (!rts_name_valid(argv[2], RTS_NAME_MAX))
			return cli_usage_error("PROFILE must be a profile name of the config's rich key "
					       "([a-z][a-z0-9_]{0,47})");
		argc = 2;
	}
	int ex = channel_request(argc, argv, "mode", &req);
	if (ex != CLI_EXIT_OK)
		return ex;
	json_object_object_add(req, "mode", json_object_new_string(argv[0]));
	if (rich)
		json_object_object_add(req, "profile", json_object_new_string(argv[2]));
	cleanup_json json_object *answer = NULL;
	ex = cli_control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = cli_answer_ok(answer);
	json_object *channel = cli_need(answer, "channel", json_type_string, &ok);
	json_object *mode = cli_need(answer, "mode", json_type_string, &ok);
	if (!ok)
		return CLI_EXIT_FAILED;
	json_object *profile = rts_json_get(answer, "profile");
	if (rich && (!profile || !json_object_is_type(profile, json_type_string))) {
		log_error("statd's answer lacks \"profile\"");
		return CLI_EXIT_FAILED;
	}
	cli_put_field(stdout, channel);
	putchar('\t');
	cli_put_field(stdout, mode);
	if (rich) {
		putchar('\t');
		cli_put_field(stdout, profile);
	}
	putchar('\n');
	return CLI_EXIT_OK;
}

/* The member key when it is a string, else NULL: optional members of newer answers. */
static json_object *opt_string(json_object *answer, const char *key)
{
	json_object *v = rts_json_get(answer, key);
	return v && json_object_is_type(v, json_type_string) ? v : NULL;
}

static const struct option json_options[] = {
	{"json", no_argument, NULL, 'j'},
	{0},
};

/* status [--json] [CHANNEL] */
int cli_cmd_status(const struct rts_opts *o, int argc, char **argv)
{
	bool json = false;
	int i = cli_parse_sub_options(argc, argv, json_options, cli_set_flag, &json);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (argc - i > 1)
		return cli_usage_error("status takes at most one CHANNEL");
	const char *channel_arg = i < argc ? argv[i] : NULL;
	if (channel_arg) {
		int ex = cli_check_channel(channel_arg);
		if (ex != CLI_EXIT_OK)
			return ex;
	}
	cleanup_json json_object *req = cli_new_request("status");
	if (channel_arg)
		json_object_object_add(req, "channel", json_object_new_string(channel_arg));
	cleanup_json json_object *answer = NULL;
	int ex = cli_control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = cli_answer_ok(answer);
	if (channel_arg) {
		json_object *channel = cli_need(answer, "channel", json_type_string, &ok);
		json_object *mode = cli_need(answer, "mode", json_type_string, &ok);
		json_object *running = cli_need(answer, "running", json_type_boolean, &ok);
		json_object *queued = cli_need(answer, "queued", json_type_int, &ok);
		json_object *fresh = cli_need(answer, "fresh", json_type_boolean, &ok);
		json_object *spare = cli_need(answer, "spare", json_type_string, &ok);
		if (!ok)
			return CLI_EXIT_FAILED;
		if (json) {
			cli_print_json(answer);
			return CLI_EXIT_OK;
		}
		fputs("channel\t", stdout);
		cli_put_field(stdout, channel);
		fputs("\nmode\t", stdout);
		cli_put_field(stdout, mode);
		/* A rich channel's profile and the tag of its container's log lines. */
		static const char *const rich_lines[] = {"profile", "logTag"};
		for (size_t k = 0; k < RTS_ARRAY_SIZE(rich_lines); k++) {
			json_object *v = opt_string(answer, rich_lines[k]);
			if (v) {
				printf("\n%s\t", rich_lines[k]);
				cli_put_field(stdout, v);
			}
		}
		printf("\nrunning\t%s\nqueued\t%" PRId64 "\nfresh\t%s\nspare\t", json_object_get_boolean(running) ? "yes" : "no",
		       json_object_get_int64(queued), json_object_get_boolean(fresh) ? "yes" : "no");
		cli_put_field(stdout, spare);
		putchar('\n');
		return CLI_EXIT_OK;
	}
	static const char *const counts[] = {"channels", "on", "running", "queued", "spares"};
	json_object *v[RTS_ARRAY_SIZE(counts)];
	for (size_t k = 0; k < RTS_ARRAY_SIZE(counts); k++)
		v[k] = cli_need(answer, counts[k], json_type_int, &ok);
	if (!ok)
		return CLI_EXIT_FAILED;
	if (json) {
		cli_print_json(answer);
		return CLI_EXIT_OK;
	}
	for (size_t k = 0; k < RTS_ARRAY_SIZE(counts); k++) {
		printf("%s\t%" PRId64 "\n", counts[k], json_object_get_int64(v[k]));
		json_object *rich = rts_json_get(answer, "rich");
		if (k == 1 && rich && json_object_is_type(rich, json_type_int))
			printf("rich\t%" PRId64 "\n", json_object_get_int64(rich));
	}
	return CLI_EXIT_OK;
}

/* fresh CHANNEL, cancel CHANNEL */
int cli_cmd_channel_op(const struct rts_opts *o, int argc, char **argv)
{
	cleanup_json json_object *req = NULL;
	int ex = channel_request(argc, argv, argv[0], &req);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool cancel = strcmp(argv[0], "cancel") == 0;
	cleanup_json json_object *answer = NULL;
	ex = cli_control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = cli_answer_ok(answer);
	json_object *channel = cli_need(answer, "channel", json_type_string, &ok);
	json_object *n = cancel ? cli_need(answer, "cancelled", json_type_int, &ok) : NULL;
	if (!cancel) {
		json_object *fresh = cli_need(answer, "fresh", json_type_boolean, &ok);
		if (fresh && !json_object_get_boolean(fresh)) {
			log_error("statd did not record the fresh start");
			ok = false;
		}
	}
	if (!ok)
		return CLI_EXIT_FAILED;
	cli_put_field(stdout, channel);
	if (cancel)
		printf("\tcancelled\t%" PRId64 "\n", json_object_get_int64(n));
	else
		fputs("\tfresh\n", stdout);
	return CLI_EXIT_OK;
}

/* channels [--json] */
int cli_cmd_channels(const struct rts_opts *o, int argc, char **argv)
{
	bool json = false;
	int i = cli_parse_sub_options(argc, argv, json_options, cli_set_flag, &json);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc)
		return cli_usage_error("channels takes no arguments");
	cleanup_json json_object *req = cli_new_request("channels");
	cleanup_json json_object *answer = NULL;
	int ex = cli_control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = cli_answer_ok(answer);
	json_object *list = cli_need(answer, "channels", json_type_array, &ok);
	size_t n = list ? json_object_array_length(list) : 0;
	for (size_t k = 0; ok && k < n; k++) {
		json_object *e = json_object_array_get_idx(list, k);
		cli_need(e, "channel", json_type_string, &ok);
		cli_need(e, "mode", json_type_string, &ok);
	}
	if (!ok)
		return CLI_EXIT_FAILED;
	if (json) {
		cli_print_json(answer);
		return CLI_EXIT_OK;
	}
	for (size_t k = 0; k < n; k++) {
		json_object *e = json_object_array_get_idx(list, k);
		cli_put_field(stdout, rts_json_get(e, "channel"));
		putchar('\t');
		cli_put_field(stdout, rts_json_get(e, "mode"));
		json_object *profile = opt_string(e, "profile");
		if (profile) {
			putchar('\t');
			cli_put_field(stdout, profile);
		}
		putchar('\n');
	}
	return CLI_EXIT_OK;
}

/* metrics: statd's {"op":"metrics"} answer's text (Prometheus text format 0.0.4, gathered
 * from the three daemons), as it is. */
int cli_cmd_metrics(const struct rts_opts *o, int argc, char **argv)
{
	if (argc != 1)
		return cli_usage_error("metrics takes no arguments");
	cleanup_json json_object *req = cli_new_request("metrics");
	cleanup_json json_object *answer = NULL;
	int ex = cli_control_request(o, req, NULL, NULL, &answer);
	if (ex != CLI_EXIT_OK)
		return ex;
	bool ok = true;
	json_object *text = cli_need(answer, "text", json_type_string, &ok);
	if (!ok)
		return CLI_EXIT_FAILED;
	const char *s = json_object_get_string(text);
	size_t len = (size_t)json_object_get_string_len(text);
	/* statd's own families and the two texts it passed on: never control bytes on a
	 * terminal, whatever answered. */
	if (!rts_metrics_text_valid(s, len, 4u * RTS_METRICS_TEXT_MAX)) {
		log_error("statd's metrics text is not Prometheus text lines");
		return CLI_EXIT_FAILED;
	}
	fwrite(s, 1, len, stdout);
	return CLI_EXIT_OK;
}
