/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs that run the docker CLI: image build and gc. */
#include "config.h"

#include <inttypes.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "runnerd/docker_args.h"

/* Bounds for gc's docker commands: the listing and one removal. */
#define CLI_DOCKER_PS_TIMEOUT_MS 30000u
#define CLI_DOCKER_PS_MAX (1024u * 1024u)
#define CLI_DOCKER_RM_TIMEOUT_MS 10000u

extern char **environ;

struct rts_spawn cli_docker_spawn(char *const argv[])
{
	return (struct rts_spawn){
		.argv = argv,
		.envp = environ,
		.in = RTS_STDIO_NULL,
		.out = RTS_STDIO_INHERIT,
		.err = RTS_STDIO_INHERIT,
	};
}

void cli_docker_failure(int r, const struct rts_spawn_result *res, unsigned timeout_ms, char *buf, size_t len)
{
	char line[RTS_SPAWN_ERR_MAX + 1] = "";
	if (res->err)
		rts_spawn_first_line(res->err, res->err_len, line, sizeof(line));
	if (r == -ETIMEDOUT)
		snprintf(buf, len, "no answer within %u s", timeout_ms / 1000);
	else if (r == -EFBIG)
		snprintf(buf, len, "too much output");
	else if (r < 0)
		snprintf(buf, len, "cannot run %s: %s", RTS_DOCKER, strerror(-r));
	else if (!res->exited)
		snprintf(buf, len, "ended by signal %d", res->status);
	else
		snprintf(buf, len, "exit status %d%s%s", res->status, line[0] ? ": " : "", line);
}

struct image_args {
	const char *tag, *dir, *content;
	bool precheck, rich;
};

static int image_option(int opt, const char *arg, void *ctx)
{
	struct image_args *a = ctx;
	if (opt == 't')
		a->tag = arg;
	else if (opt == 'p')
		a->precheck = true;
	else if (opt == 'r')
		a->rich = true;
	else if (opt == 'c')
		a->content = arg;
	else
		a->dir = arg;
	return 0;
}

/* image build [--precheck | --rich [--content DIR]] [--tag TAG] [--dir DIR] */
int cli_cmd_image(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option image_options[] = {
		{"tag", required_argument, NULL, 't'},
		{"dir", required_argument, NULL, 'd'},
		{"precheck", no_argument, NULL, 'p'},
		{"rich", no_argument, NULL, 'r'},
		{"content", required_argument, NULL, 'c'},
		{0},
	};
	if (argc < 2 || strcmp(argv[1], "build") != 0)
		return cli_usage_error("the only image command is \"image build\"");
	struct image_args a = {0};
	int i = cli_parse_sub_options(argc - 1, argv + 1, image_options, image_option, &a);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc - 1)
		return cli_usage_error("image build takes no arguments besides --precheck, --rich, --content, --tag "
				       "and --dir");
	if (a.precheck && a.rich)
		return cli_usage_error("--precheck and --rich build different images: pass one");
	if (a.content && !a.rich)
		return cli_usage_error("--content goes with --rich (the other images take no content)");
	if (!a.dir)
		a.dir = a.precheck ? RTS_PKGLIBDIR "/precheck" : a.rich ? RTS_PKGLIBDIR "/pi" : RTS_PKGLIBDIR "/image";
	if (a.dir[0] == '\0' || (a.content && a.content[0] == '\0'))
		return cli_usage_error("--dir and --content must not be empty");

	cleanup_config struct rts_config *cfg = NULL;
	if (!a.tag) {
		cfg = cli_load_config(o);
		if (!cfg) {
			log_error("the default tag comes from the config's %s; fix the config or pass --tag",
				  a.precheck ? "precheck.image" : a.rich ? "rich.image" : "\"image\"");
			return CLI_EXIT_FAILED;
		}
		if (a.precheck && !cfg->has_precheck) {
			log_error("the default tag comes from the config's \"precheck\" \"image\", and there is none; "
				  "pass --tag");
			return CLI_EXIT_FAILED;
		}
		if (a.rich && !cfg->rich.enabled) {
			log_error("the default tag comes from the config's \"rich\" \"image\", and there is none; "
				  "pass --tag");
			return CLI_EXIT_FAILED;
		}
		a.tag = a.precheck ? cfg->precheck.image : a.rich ? cfg->rich.image : cfg->image;
	}
	if (!rts_image_ref_ok(a.tag))
		return cli_usage_error("the tag must match [a-z0-9][A-Za-z0-9._/:@-]* (at most %u bytes)", RTS_IMAGE_MAX);
	/* The precheck image (DESIGN.md 8.3) and the rich image (8.5) are assembled from the
	 * host's node first, the rich one with npm ci of the pinned packages. */
	if (a.precheck)
		return cli_image_build_context("precheck", "precheck", a.tag, a.dir, NULL);
	if (a.rich)
		return cli_image_build_context("rich worker", "pi", a.tag, a.dir, a.content);

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
	const struct rts_spawn s = cli_docker_spawn(args);
	struct rts_spawn_result res;
	int r = rts_spawn_run(&s, NULL, 0, &res);
	if (r == 0 && res.exited && res.status == 0)
		return CLI_EXIT_OK;
	char why[256];
	cli_docker_failure(r, &res, 0, why, sizeof(why));
	log_error("%s build failed: %s", RTS_DOCKER, why);
	return CLI_EXIT_FAILED;
}

/* gc must not pull containers out from under running turns: ask statd when it answers.
 * Returns CLI_EXIT_OK when removal may go ahead. */
static int gc_check_idle(const struct rts_opts *o)
{
	cleanup_json json_object *answer = NULL;
	const char *why = NULL;
	bool connected;
	int r = cli_statd_status(o->runtime_dir, CLI_QUICK_TIMEOUT_MS, &connected, &answer, &why);
	if (!connected)
		return CLI_EXIT_OK; /* statd is not running: every container left is stale */
	if (r < 0) {
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
	/* Precheck containers are this installation's too (a statd without the runner does
	 * not report them, and runs none). */
	json_object *prechecks = rts_json_get(answer, "prechecks");
	if (prechecks && json_object_is_type(prechecks, json_type_int) && json_object_get_int64(prechecks) > 0) {
		log_error("statd reports %" PRId64 " running precheck(s); wait, stop the daemons, or pass --force",
			  json_object_get_int64(prechecks));
		return CLI_EXIT_FAILED;
	}
	return CLI_EXIT_OK;
}

/* Remove one container named by runnerd's own listing; prints its name once it is gone.
 * Returns false after saying why it is not. */
static bool gc_remove(const char *name)
{
	cleanup_strv char **rm = runnerd_docker_rm_argv(RTS_DOCKER, name);
	if (!rm)
		return false; /* cannot happen: the name passed runnerd_parse_stale_line() */
	struct rts_spawn s = cli_docker_spawn(rm);
	s.out = RTS_STDIO_NULL; /* docker prints the name; we do, once it is gone */
	struct rts_cancel c = RTS_CANCEL_NONE;
	c.deadline_ms = rts_now_ms() + CLI_DOCKER_RM_TIMEOUT_MS;
	struct rts_spawn_result res;
	int r = rts_spawn_run(&s, &c, 0, &res);
	if (r == 0 && res.exited && res.status == 0) {
		puts(name);
		return true;
	}
	char why[256];
	cli_docker_failure(r, &res, CLI_DOCKER_RM_TIMEOUT_MS, why, sizeof(why));
	log_error("%s rm -f %s failed: %s", RTS_DOCKER, name, why);
	return false;
}

/* gc [--force] */
int cli_cmd_gc(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option gc_options[] = {
		{"force", no_argument, NULL, 'f'},
		{0},
	};
	bool force = false;
	int i = cli_parse_sub_options(argc, argv, gc_options, cli_set_flag, &force);
	if (i < 0)
		return CLI_EXIT_USAGE;
	if (i != argc)
		return cli_usage_error("gc takes no arguments besides --force");
	cleanup_config struct rts_config *cfg = cli_load_config(o);
	if (!cfg)
		return CLI_EXIT_FAILED;
	if (!force) {
		int ex = gc_check_idle(o);
		if (ex != CLI_EXIT_OK)
			return ex;
	}

	/* The listing and the name rule are runnerd's own start-up clean-up (seed: remove only
	 * this installation's stale containers), so gc removes exactly what runnerd would. */
	cleanup_strv char **ps = runnerd_docker_ps_argv(RTS_DOCKER, cfg->installation_id);
	struct rts_spawn s = cli_docker_spawn(ps);
	s.out = RTS_STDIO_PIPE;
	s.out_max = CLI_DOCKER_PS_MAX;
	struct rts_cancel c = RTS_CANCEL_NONE;
	c.deadline_ms = rts_now_ms() + CLI_DOCKER_PS_TIMEOUT_MS;
	struct rts_spawn_result listing = {0};
	int r = ps ? rts_spawn_run(&s, &c, 0, &listing) : -EINVAL;
	if (r < 0 || !listing.exited || listing.status != 0) {
		char why[256];
		cli_docker_failure(r, &listing, CLI_DOCKER_PS_TIMEOUT_MS, why, sizeof(why));
		log_error("%s ps failed: %s", RTS_DOCKER, why);
		rts_spawn_result_release(&listing);
		return CLI_EXIT_FAILED;
	}

	int ex = CLI_EXIT_OK;
	unsigned removed = 0;
	char *save = NULL;
	for (char *line = strtok_r(listing.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct runnerd_stale stale;
		if (runnerd_parse_stale_line(cfg->installation_id, line, &stale) < 0) {
			/* Our label on a container runnerd did not name: leave it to the operator. */
			char name[128];
			rts_spawn_first_line(line, strcspn(line, "\t"), name, sizeof(name));
			log_warning("skipping %s: it has this installation's label but not the name of one of its turns",
				    name);
			continue;
		}
		if (gc_remove(stale.name))
			removed++;
		else
			ex = CLI_EXIT_FAILED;
	}
	rts_spawn_result_release(&listing);
	/* stdout stays the list of removed names; say on stderr that none were found. */
	if (removed == 0 && ex == CLI_EXIT_OK)
		log_info("no stale containers of installation %s", cfg->installation_id);
	return ex;
}
