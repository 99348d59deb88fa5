/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: Docker, its data root and the image, asked with runnerd's own commands
 * (runnerd/docker_args.h) (cli/doctor.c lists the checks). */
#include "config.h"

#include <limits.h>

#include "cli/cli.h"
#include "cli/doctor_checks.h"
#include "common/paths.h"
#include "common/util.h"
#include "runnerd/docker_args.h"

/* Bounds for each docker command doctor runs. */
#define DOCTOR_DOCKER_TIMEOUT_MS 15000u
#define DOCTOR_DOCKER_OUT_MAX (64u * 1024u)
/* Bytes of docker's stderr kept: its first line ends up in doctor's line. */
#define DOCTOR_DOCKER_ERR_MAX 512u

/* Run the docker CLI with a deadline, stdout and stderr captured; on success (0 returned
 * and exit status 0) r->out has its trailing whitespace removed. Returns 0 when it
 * succeeded, else a phrase for why not in why. */
static int run_docker(char *const *argv, struct rts_spawn_result *r, char *why, size_t whylen)
{
	*r = (struct rts_spawn_result){0};
	if (!argv) {
		/* runnerd would not build it either: not a value it would use. */
		snprintf(why, whylen, "no command for this configuration");
		return -EINVAL;
	}
	struct rts_spawn s = cli_docker_spawn(argv);
	s.out = RTS_STDIO_PIPE;
	s.out_max = DOCTOR_DOCKER_OUT_MAX;
	/* docker's complaint ends up in our one line. */
	s.err = RTS_STDIO_PIPE;
	s.err_max = DOCTOR_DOCKER_ERR_MAX;
	struct rts_cancel c = RTS_CANCEL_NONE;
	c.deadline_ms = rts_now_ms() + DOCTOR_DOCKER_TIMEOUT_MS;
	int ret = rts_spawn_run(&s, &c, 0, r);
	if (ret == 0 && r->exited && r->status == 0) {
		while (r->out_len > 0 && strchr("\n\r ", r->out[r->out_len - 1]))
			r->out[--r->out_len] = '\0';
		return 0;
	}
	cli_docker_failure(ret, r, DOCTOR_DOCKER_TIMEOUT_MS, why, whylen);
	return ret < 0 ? ret : -EIO;
}

bool doctor_check_docker(struct doctor *d)
{
	char *const version[] = {RTS_DOCKER, "version", "--format", "{{.Server.Version}}", NULL};
	struct rts_spawn_result r;
	char why[640];
	int ret = run_docker(version, &r, why, sizeof(why));
	if (ret < 0 || r.out_len == 0) {
		/* The service account is not in the docker group (only runnerd's unit adds it),
		 * so doctor run as that account cannot look: say so instead of failing. */
		if (geteuid() != 0 && r.err && strcasestr(r.err, "permission denied")) {
			doctor_report(d, DOCTOR_WARN, "docker", "not checked: this account may not use the Docker "
			              "socket (only runnerd gets the docker group, from its unit); fix: run doctor as "
			              "root to check Docker, its data root and the image");
			rts_spawn_result_release(&r);
			return false;
		}
		if (ret == 0)
			snprintf(why, sizeof(why), "no version");
		doctor_report(d, DOCTOR_FAIL, "docker", "the Docker daemon does not answer (%s); fix: start it "
		              "(systemctl start docker), or run doctor as root if the socket refused this account",
		              why);
		rts_spawn_result_release(&r);
		return false;
	}
	doctor_report(d, DOCTOR_OK, "docker", "dockerd %s answers (%s)", r.out, RTS_DOCKER);
	rts_spawn_result_release(&r);
	return true;
}

/* runnerd's start-up check (seed: Docker refuses private propagation for bind sources in
 * its data root), with its own command and parser; doctor also looks at the state
 * directory and the other way round. */
void doctor_check_docker_root(struct doctor *d)
{
	cleanup_strv char **info = runnerd_docker_info_argv(RTS_DOCKER);
	struct rts_spawn_result r;
	char why[640], root[PATH_MAX];
	int ret = run_docker(info, &r, why, sizeof(why));
	if (ret == 0) {
		/* Parsed as runnerd parses it: one absolute path and its newline. */
		char *line = rts_xasprintf("%s\n", r.out);
		ret = runnerd_parse_data_root(line, strlen(line), root, sizeof(root));
		free(line);
		if (ret < 0)
			snprintf(why, sizeof(why), "not one absolute path");
	}
	rts_spawn_result_release(&r);
	if (ret < 0) {
		doctor_report(d, DOCTOR_FAIL, "docker data root", "cannot read it (%s)", why);
		return;
	}
	const struct rts_config *c = d->cfg;
	cleanup_free char *state_dir = doctor_dir_of(c->state_file);
	const char *const key[] = {"runRoot", "workspaceRoot", "stateFile"};
	const char *const path[] = {c->run_root, c->workspace_root, state_dir};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(key); i++) {
		if (rts_path_within(path[i], root) || rts_path_within(root, path[i])) {
			doctor_report(d, DOCTOR_FAIL, "docker data root", "%s %s overlaps Docker's data root %s, "
			              "where Docker refuses private bind propagation; fix: move it outside", key[i],
			              path[i], root);
			return;
		}
	}
	doctor_report(d, DOCTOR_OK, "docker data root", "%s holds none of the roots", root);
}

/* An image runs with --pull never, so it must be in the local store: the turns' (runnerd
 * refuses to start without it) or the precheck runner's (prechecks fail without it). */
static void check_image(struct doctor *d, const char *what, const char *image, const char *fix)
{
	cleanup_strv char **inspect = runnerd_docker_image_inspect_argv(RTS_DOCKER, image);
	struct rts_spawn_result r;
	char why[640];
	int ret = run_docker(inspect, &r, why, sizeof(why));
	if (ret < 0 || r.out_len == 0) {
		doctor_report(d, DOCTOR_FAIL, what, "%s is not in the local image store (containers run with --pull "
		              "never); fix: %s", image, fix);
		rts_spawn_result_release(&r);
		return;
	}
	doctor_report(d, DOCTOR_OK, what, "%s is %.19s", image, r.out);
	rts_spawn_result_release(&r);
}

/* runnerd's start-up check: turns run with --pull never. */
void doctor_check_image(struct doctor *d)
{
	cleanup_free char *fix = rts_xasprintf("roundtable-sandbox image build (from %s/image)", RTS_PKGLIBDIR);
	check_image(d, "image", d->cfg->image, fix);
	if (d->cfg->has_precheck) {
		cleanup_free char *pfix = rts_xasprintf("roundtable-sandbox image build --precheck (from %s/precheck, "
							"with the host's nodejs)", RTS_PKGLIBDIR);
		check_image(d, "precheck image", d->cfg->precheck.image, pfix);
	}
	/* runnerd starts a rich channel's container from rich.image, with --pull never too. */
	if (d->cfg->rich.enabled)
		check_image(d, "rich image", d->cfg->rich.image, "build the rich worker image under that tag");
}

/* The journald log driver writes to the journal of the dockerd it runs in: without systemd
 * and its journal there, Docker refuses to create the container at all (seed: "the Docker
 * daemon must then run under systemd with journald, or containers fail to start"). */
void doctor_check_rich_log(struct doctor *d)
{
	const struct rts_rich_conf *r = &d->cfg->rich;
	if (!r->enabled)
		return;
	if (strcmp(r->log_driver, "journald") != 0) {
		doctor_report(d, DOCTOR_OK, "rich log", "rich containers log to the %s driver (docker logs reads it "
		              "where the driver allows)", r->log_driver);
		return;
	}
	char init[32] = "";
	FILE *f = fopen("/proc/1/comm", "re");
	if (f) {
		if (!fgets(init, sizeof(init), f))
			init[0] = '\0';
		fclose(f);
		init[strcspn(init, "\n")] = '\0';
	}
	struct stat st;
	bool journal = stat("/run/systemd/journal/socket", &st) == 0 && S_ISSOCK(st.st_mode);
	if (strcmp(init, "systemd") != 0 || !journal)
		doctor_report(d, DOCTOR_FAIL, "rich log", "rich.log.driver is journald, but %s: dockerd must run under "
		              "systemd with journald, or every rich container fails to start; fix: run dockerd as "
		              "docker.service under systemd, or set rich.log.driver to another driver (json-file, local)",
		              journal ? "PID 1 is not systemd" : "there is no journal (/run/systemd/journal/socket)");
	else
		doctor_report(d, DOCTOR_OK, "rich log", "journald: rich containers log tagged sandbox/<first 16 hex of "
		              "the channel hash> (dockerd must run under systemd, as docker.service does)");
}
