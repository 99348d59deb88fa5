/* SPDX-License-Identifier: Apache-2.0 */
/* Requests to statd over its control socket, and how their answers and failures turn
 * into the CLI's exit statuses (cli/main.c). */
#include "config.h"

#include "cli/cli.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

static int unreachable(int r, const char *what)
{
	log_error_errno(r, "%s: %m", what);
	return CLI_EXIT_UNREACHABLE;
}

int cli_wait_failed(int r, const char *why)
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

const char *cli_statd_word(const char *s, const char *fallback)
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
	const char *code = cli_statd_word(
		json_object_is_type(err, json_type_string) ? json_object_get_string(err) : NULL, "an unknown reason");
	const char *route =
		rts_json_get(answer, "route") ? cli_statd_word(rts_json_get_string(answer, "route"), "unknown") : NULL;
	if (route)
		log_error("statd refused the request: %s (route %s)", code, route);
	else
		log_error("statd refused the request: %s", code);
	return CLI_EXIT_FAILED;
}

int cli_control_start(const struct rts_opts *o, json_object *req, struct cli_control **conn, int64_t *id)
{
	*conn = NULL;
	cleanup_control struct cli_control *c = NULL;
	int r = cli_control_open(o->runtime_dir, CLI_CONNECT_RETRY_MS, &c);
	if (r < 0) {
		cleanup_free char *path = rts_runtime_path(o->runtime_dir, RTS_SOCK_CONTROL);
		log_error_errno(r, "cannot connect to %s: %m (is roundtable-sandbox-statd running?)", path);
		return CLI_EXIT_UNREACHABLE;
	}
	r = cli_control_send(c, req, id);
	if (r == -E2BIG)
		return cli_usage_error("the request would be longer than the %u bytes statd accepts",
				       RTS_CONTROL_RICH_LINE_MAX);
	if (r < 0)
		return unreachable(r, "sending to the control socket");
	*conn = steal_pointer(&c);
	return CLI_EXIT_OK;
}

int cli_control_request(const struct rts_opts *o, json_object *req, struct cli_control **conn, int64_t *id,
			json_object **answer)
{
	*answer = NULL;
	cleanup_control struct cli_control *c = NULL;
	int64_t req_id;
	int r = cli_control_start(o, req, &c, &req_id);
	if (r != CLI_EXIT_OK)
		return r;
	const char *why = NULL;
	json_object *a = NULL;
	const char *op = rts_json_get_string(req, "op");
	bool queued = op && (strcmp(op, "mode") == 0 || strcmp(op, "fresh") == 0);
	r = cli_control_wait(c, req_id, false, rts_now_ms() + (queued ? CLI_QUEUED_TIMEOUT_MS : CLI_QUICK_TIMEOUT_MS),
			     &a, &why);
	if (r < 0)
		return cli_wait_failed(r, why);
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

/* A missing or mistyped member is a contract violation we report instead of printing half
 * an answer. */
json_object *cli_need(json_object *answer, const char *key, json_type type, bool *ok)
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

bool cli_answer_ok(json_object *answer)
{
	json_object *v = rts_json_get(answer, "ok");
	if (v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v))
		return true;
	log_error("statd's answer lacks \"ok\": true");
	return false;
}

json_object *cli_new_request(const char *op)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string(op));
	return req;
}

int cli_statd_status(const char *runtime_dir, unsigned timeout_ms, bool *connected, json_object **answer,
		     const char **why)
{
	*answer = NULL;
	*why = NULL;
	cleanup_control struct cli_control *c = NULL;
	int r = cli_control_open(runtime_dir, 0, &c);
	*connected = r == 0;
	if (r < 0)
		return r;
	cleanup_json json_object *req = cli_new_request("status");
	int64_t id;
	r = cli_control_send(c, req, &id);
	if (r < 0)
		return r;
	return cli_control_wait(c, id, false, rts_now_ms() + timeout_ms, answer, why);
}
