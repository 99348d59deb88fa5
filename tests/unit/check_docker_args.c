/* SPDX-License-Identifier: Apache-2.0 */
/* runnerd's pure functions: the docker command lines (DESIGN.md section 4) and the worker's
 * stdin/stdout (HACKING.md "Worker input" / "Worker output"). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/conf.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/paths.h"
#include "common/proto.h"
#include "common/util.h"
#include "runnerd/docker_args.h"
#include "runnerd/worker_io.h"

#define TURN "0123456789abcdef"
#define INST "a1b2c3d4e5f6"
#define HASH "5e0c2bb7e19dd8b4c5a2ab7b5bc9bcd0e1c2c3d2b7a1e3f4a5b6c7d8e9f00112"
#define WS "/var/lib/roundtable-sandbox/workspaces/" HASH
#define RUNDIR "/run/roundtable-sandbox/turns/" TURN

static struct rts_config *cfg;

/* The real defaults: only the two required keys are given. */
static void load_default_config(void)
{
	char err[512];
	cleanup_json json_object *o = NULL;
	const char *why;
	const char *doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\"}";
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 8, &o, &why), 0);
	cfg = rts_config_from_json(o, "test.json", err, sizeof(err));
	ck_assert_msg(cfg != NULL, "%s", err);
}

static void free_config(void)
{
	rts_config_free(cfg);
	cfg = NULL;
}

static struct runnerd_run_spec default_spec(void)
{
	return (struct runnerd_run_spec){
		.docker = "/usr/bin/docker",
		.installation_id = INST,
		.turn_id = TURN,
		.channel_hash = HASH,
		.uid = 1000,
		.gid = 1000,
		.limits = cfg->limits,
		.workspace = WS,
		.run_dir = RUNDIR,
		.image = cfg->image,
	};
}

static size_t count(char **v, const char *s)
{
	size_t n = 0;
	for (; *v; v++)
		if (strcmp(*v, s) == 0)
			n++;
	return n;
}

/* The value after the only occurrence of option opt. */
static const char *opt_value(char **v, const char *opt)
{
	ck_assert_msg(count(v, opt) == 1, "%s must appear exactly once", opt);
	for (; *v; v++)
		if (strcmp(*v, opt) == 0)
			return v[1];
	return NULL;
}

START_TEST(test_run_argv_exact_default)
{
	struct runnerd_run_spec s = default_spec();
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	const char *expect[] = {
		"/usr/bin/docker",
		"run",
		"-i",
		"--attach",
		"stdin",
		"--attach",
		"stdout",
		"--rm",
		"--name",
		"roundtable-sandbox-" INST "-" TURN,
		"--label",
		"io.roundtable-sandbox.installation=" INST,
		"--label",
		"io.roundtable-sandbox.channel=" HASH,
		"--network",
		"none",
		"--read-only",
		"--cap-drop",
		"ALL",
		"--security-opt",
		"no-new-privileges",
		"--user",
		"1000:1000",
		"--memory",
		"512m",
		"--memory-swap",
		"512m",
		"--cpus",
		"1",
		"--pids-limit",
		"64",
		"--tmpfs",
		"/tmp:rw,nosuid,nodev,size=16m",
		"--log-driver",
		"none",
		"--pull",
		"never",
		"--mount",
		"type=bind,source=" WS ",target=/workspace",
		"--mount",
		"type=bind,source=" RUNDIR ",target=/run/broker,readonly",
		"roundtable-sandbox:local",
	};
	size_t n = rts_strv_len(v);
	ck_assert_uint_eq(n, RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(strcmp(v[i], expect[i]) == 0, "argv[%zu] is \"%s\", expected \"%s\"", i, v[i], expect[i]);
	ck_assert_ptr_null(v[n]);
}
END_TEST

START_TEST(test_run_argv_uses_build_docker)
{
	/* The daemon passes RTS_DOCKER (configure --with-docker); it must be argv[0] verbatim. */
	struct runnerd_run_spec s = default_spec();
	s.docker = RTS_DOCKER;
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v[0], RTS_DOCKER);
	ck_assert_str_eq(v[1], "run");
}
END_TEST

START_TEST(test_run_argv_limits_from_config)
{
	char err[512];
	cleanup_json json_object *o = NULL;
	const char *why;
	const char *doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/\","
			  "\"limits\":{\"memoryMb\":2048,\"cpus\":0.5,\"pids\":128}}";
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 8, &o, &why), 0);
	struct rts_config *c = rts_config_from_json(o, "t.json", err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	struct runnerd_run_spec s = default_spec();
	s.limits = c->limits;
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	rts_config_free(c);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(opt_value(v, "--memory"), "2048m");
	/* Swap equals memory: no swap on top (seed: "no additional swap"). */
	ck_assert_str_eq(opt_value(v, "--memory-swap"), "2048m");
	ck_assert_str_eq(opt_value(v, "--cpus"), "0.5");
	ck_assert_str_eq(opt_value(v, "--pids-limit"), "128");
}
END_TEST

START_TEST(test_cpus_format)
{
	static const struct {
		double in;
		const char *out;
	} cases[] = {
		{1, "1"}, {0.5, "0.5"}, {1.25, "1.25"}, {0.01, "0.01"}, {64, "64"}, {0.125, "0.125"},
		{2.0004, "2"}, {1.9999, "2"}, {3.1, "3.1"}, {10.05, "10.05"},
	};
	char buf[16];
	for (size_t i = 0; i < RTS_ARRAY_SIZE(cases); i++) {
		ck_assert_int_eq(runnerd_format_cpus(cases[i].in, buf, sizeof(buf)), 0);
		ck_assert_msg(strcmp(buf, cases[i].out) == 0, "%g formatted as %s, expected %s", cases[i].in, buf,
			      cases[i].out);
	}
	ck_assert_int_eq(runnerd_format_cpus(0.001, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(runnerd_format_cpus(64.5, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(runnerd_format_cpus(1.0 / 0.0, buf, sizeof(buf)), -EINVAL);
}
END_TEST

/* Docker refuses --cpus above the CPUs it has: a larger limit runs with all of them. */
START_TEST(test_cpus_for_host)
{
	ck_assert(runnerd_cpus_for_host(64.0, 2) == 2.0);
	ck_assert(runnerd_cpus_for_host(2.5, 2) == 2.0);
	ck_assert(runnerd_cpus_for_host(2.0, 2) == 2.0);
	ck_assert(runnerd_cpus_for_host(0.01, 2) == 0.01);
	ck_assert(runnerd_cpus_for_host(1.5, 64) == 1.5);
	ck_assert(runnerd_cpus_for_host(64.0, 0) == 64.0); /* unknown: unchanged */
	char buf[16];
	ck_assert_int_eq(runnerd_format_cpus(runnerd_cpus_for_host(RTS_CPUS_MAX, 3), buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "3");
}
END_TEST

START_TEST(test_run_argv_user_numeric)
{
	struct runnerd_run_spec s = default_spec();
	s.uid = 998;
	s.gid = 4242;
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(opt_value(v, "--user"), "998:4242");
	/* Root is refused, whatever asks for it. */
	s.uid = 0;
	ck_assert_ptr_null(runnerd_docker_run_argv(&s));
	s.uid = 998;
	s.gid = 0;
	ck_assert_ptr_null(runnerd_docker_run_argv(&s));
}
END_TEST

START_TEST(test_run_argv_exactly_two_binds)
{
	struct runnerd_run_spec s = default_spec();
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(count(v, "--mount"), 2);
	const char *ws = NULL, *rd = NULL;
	for (char **p = v; *p; p++) {
		if (strcmp(*p, "--mount") != 0)
			continue;
		if (strstr(p[1], "target=/workspace"))
			ws = p[1];
		else if (strstr(p[1], "target=/run/broker"))
			rd = p[1];
	}
	ck_assert_ptr_nonnull(ws);
	ck_assert_ptr_nonnull(rd);
	/* The workspace bind's source is the workspace path itself (DESIGN.md pinned detail). */
	ck_assert_str_eq(ws, "type=bind,source=" WS ",target=/workspace");
	ck_assert_str_eq(rd, "type=bind,source=" RUNDIR ",target=/run/broker,readonly");
	ck_assert_ptr_null(strstr(ws, "readonly"));
	ck_assert_ptr_null(strstr(ws, ",ro"));
	ck_assert_ptr_nonnull(strstr(rd, ",readonly"));
}
END_TEST

START_TEST(test_run_argv_nothing_forbidden)
{
	struct runnerd_run_spec s = default_spec();
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	static const char *forbidden[] = {"-e",	       "--env",	     "--env-file", "--privileged", "-v",
					  "--volume",  "--volumes-from", "-t",	   "--tty",	   "--device",
					  "--cap-add", "--pid",		 "--ipc",	   "--userns",	   "--net",
					  "-p",	       "--publish",	 "-P",	   "--add-host",	   "--group-add",
					  "--entrypoint"};
	for (char **p = v; *p; p++) {
		for (size_t i = 0; i < RTS_ARRAY_SIZE(forbidden); i++)
			ck_assert_msg(strcmp(*p, forbidden[i]) != 0, "forbidden argument %s", *p);
		/* No "--opt=value" forms that would slip past the checks above. */
		ck_assert_msg(strncmp(*p, "--env", 5) != 0 && strncmp(*p, "--network=", 10) != 0 &&
				      strncmp(*p, "--volume", 8) != 0,
			      "forbidden argument %s", *p);
	}
	ck_assert_str_eq(opt_value(v, "--network"), "none");
	ck_assert_str_eq(opt_value(v, "--security-opt"), "no-new-privileges");
	ck_assert_str_eq(opt_value(v, "--cap-drop"), "ALL");
	ck_assert_uint_eq(count(v, "--read-only"), 1);
	ck_assert_str_eq(opt_value(v, "--log-driver"), "none");
	ck_assert_str_eq(opt_value(v, "--pull"), "never");
	ck_assert_str_eq(opt_value(v, "--tmpfs"), "/tmp:rw,nosuid,nodev,size=16m");
}
END_TEST

START_TEST(test_run_argv_image_last_and_names)
{
	struct runnerd_run_spec s = default_spec();
	s.image = "registry.invalid/team/rts-worker:1.2@sha256:0123";
	cleanup_strv char **v = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(v);
	size_t n = rts_strv_len(v);
	ck_assert_str_eq(v[n - 1], s.image);
	ck_assert_uint_eq(count(v, s.image), 1);
	ck_assert_str_eq(opt_value(v, "--name"), "roundtable-sandbox-" INST "-" TURN);
	ck_assert_uint_eq(count(v, "--label"), 2);
	ck_assert_uint_eq(count(v, RTS_LABEL_INSTALLATION "=" INST), 1);
	ck_assert_uint_eq(count(v, RTS_LABEL_CHANNEL "=" HASH), 1);
	/* "run -i --attach stdin --attach stdout --rm" right after the CLI: no stderr attach. */
	ck_assert_str_eq(v[1], "run");
	ck_assert_str_eq(v[2], "-i");
	ck_assert_uint_eq(count(v, "--attach"), 2);
	ck_assert_str_eq(v[4], "stdin");
	ck_assert_str_eq(v[6], "stdout");
	ck_assert_uint_eq(count(v, "stderr"), 0);
	ck_assert_str_eq(v[7], "--rm");
}
END_TEST

START_TEST(test_run_argv_refuses_bad_specs)
{
	struct runnerd_run_spec s;
#define REFUSED(field, value)                                                                                          \
	do {                                                                                                           \
		s = default_spec();                                                                                    \
		s.field = value;                                                                                       \
		ck_assert_msg(runnerd_docker_run_argv(&s) == NULL, #field " = " #value " was accepted");             \
	} while (0)
	REFUSED(turn_id, "0123456789ABCDEF");
	REFUSED(turn_id, "0123456789abcde");
	REFUSED(turn_id, "0123456789abcdef0");
	REFUSED(turn_id, NULL);
	REFUSED(installation_id, "a1b2c3d4e5f");
	REFUSED(installation_id, "a1b2c3d4e5fg");
	REFUSED(channel_hash, "5e0c");
	REFUSED(workspace, "/srv/ws,target=/etc,x");
	REFUSED(workspace, "relative/ws");
	REFUSED(workspace, "/srv/../etc");
	REFUSED(workspace, "/srv/ws dir");
	REFUSED(run_dir, "/run/x,readonly=false");
	REFUSED(run_dir, NULL);
	REFUSED(image, "--privileged");
	REFUSED(image, "");
	REFUSED(image, "img name");
	REFUSED(docker, "docker");
	REFUSED(limits.memory_mb, 0);
	REFUSED(limits.pids, 0);
	/* A precheck run's runtime does not start below its own bottom (common/limits.h). */
	s = default_spec();
	s.limits.pids = RTS_PRECHECK_PIDS_MIN - 1;
	s.kind = RUNNERD_RUN_PRECHECK;
	ck_assert_ptr_null(runnerd_docker_run_argv(&s));
	s.limits.pids = RTS_PRECHECK_PIDS_MIN;
	cleanup_strv char **ok = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(ok);
	s.limits.cpus = RTS_PRECHECK_CPUS_MIN - 0.001;
	ck_assert_ptr_null(runnerd_docker_run_argv(&s));
	s.limits.cpus = RTS_PRECHECK_CPUS_MIN;
	cleanup_strv char **ok_cpus = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(ok_cpus);
	s.kind = RUNNERD_RUN_TURN;
	s.limits.cpus = RTS_CPUS_MIN; /* and with less CPU */
	s.limits.pids = RTS_PIDS_MIN; /* the turn's worker starts with fewer */
	cleanup_strv char **turn = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(turn);
	REFUSED(limits.cpus, 0);
	/* Seed: root workers are refused, whatever the config loader let through. */
	REFUSED(uid, 0);
	REFUSED(gid, 0);
#undef REFUSED
	ck_assert_ptr_null(runnerd_docker_run_argv(NULL));
}
END_TEST

/* How docker run ended, for the host log: a crash by signal is named as one. */
START_TEST(test_exit_text)
{
	char out[128];
	runnerd_docker_exit_text(true, 139, out, sizeof(out));
	ck_assert_str_eq(out, "the container's process was ended by signal 11 (SIGSEGV; status 139)");
	runnerd_docker_exit_text(true, 137, out, sizeof(out));
	ck_assert_str_eq(out, "the container's process was ended by signal 9 (SIGKILL; status 137)");
	runnerd_docker_exit_text(true, 125, out, sizeof(out));
	ck_assert_str_eq(out, "docker could not run the container (status 125)");
	runnerd_docker_exit_text(true, 126, out, sizeof(out));
	ck_assert_str_eq(out, "the image's command could not be started (status 126)");
	runnerd_docker_exit_text(true, 127, out, sizeof(out));
	ck_assert_str_eq(out, "the image's command was not found (status 127)");
	runnerd_docker_exit_text(true, 1, out, sizeof(out));
	ck_assert_str_eq(out, "the container exited with status 1");
	runnerd_docker_exit_text(true, 128, out, sizeof(out));
	ck_assert_str_eq(out, "the container exited with status 128");
	runnerd_docker_exit_text(false, 15, out, sizeof(out));
	ck_assert_str_eq(out, "the docker CLI died of signal 15 (SIGTERM)");
	/* Bounded: a short buffer is cut, still terminated. */
	runnerd_docker_exit_text(true, 139, out, 8);
	ck_assert_str_eq(out, "the con");
}
END_TEST

START_TEST(test_rm_argv)
{
	const char *name = "roundtable-sandbox-" INST "-" TURN;
	cleanup_strv char **v = runnerd_docker_rm_argv("/usr/bin/docker", name);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(rts_strv_len(v), 4);
	ck_assert_str_eq(v[0], "/usr/bin/docker");
	ck_assert_str_eq(v[1], "rm");
	ck_assert_str_eq(v[2], "-f");
	ck_assert_str_eq(v[3], name);
	/* Only the exact shape of our container names. */
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "roundtable-sandbox-" INST));
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "other-" INST "-" TURN));
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "roundtable-sandbox-" INST "-" TURN "0"));
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "-f"));
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "roundtable-sandbox-A1B2C3D4E5F6-" TURN));
	ck_assert_ptr_null(runnerd_docker_rm_argv("docker", name));
}
END_TEST

/* A warm spare (runnerd/spare.h): the same list with one more label right after the
 * channel's, nothing else; a precheck never carries it. */
START_TEST(test_run_argv_spare_label)
{
	struct runnerd_run_spec s = default_spec();
	cleanup_strv char **cold = runnerd_docker_run_argv(&s);
	s.spare = true;
	cleanup_strv char **warm = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(cold);
	ck_assert_ptr_nonnull(warm);
	size_t n = rts_strv_len(cold);
	ck_assert_uint_eq(rts_strv_len(warm), n + 2);
	size_t at = 0;
	while (strcmp(cold[at], "io.roundtable-sandbox.channel=" HASH) != 0)
		at++;
	for (size_t i = 0; i <= at; i++)
		ck_assert_str_eq(warm[i], cold[i]);
	ck_assert_str_eq(warm[at + 1], "--label");
	ck_assert_str_eq(warm[at + 2], "io.roundtable-sandbox.spare=1");
	for (size_t i = at + 1; i < n; i++)
		ck_assert_str_eq(warm[i + 2], cold[i]);
	s.kind = RUNNERD_RUN_PRECHECK;
	cleanup_strv char **pre = runnerd_docker_run_argv(&s);
	ck_assert_ptr_nonnull(pre);
	ck_assert_uint_eq(count(pre, "io.roundtable-sandbox.spare=1"), 0);
}
END_TEST

START_TEST(test_running_argv)
{
	const char *name = "roundtable-sandbox-" INST "-" TURN;
	cleanup_strv char **v = runnerd_docker_running_argv("/usr/bin/docker", name);
	ck_assert_ptr_nonnull(v);
	const char *expect[] = {"/usr/bin/docker", "container", "inspect", "--format", "{{.State.Running}}", name};
	ck_assert_uint_eq(rts_strv_len(v), RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect); i++)
		ck_assert_str_eq(v[i], expect[i]);
	/* Only our own names, as for a removal. */
	ck_assert_ptr_null(runnerd_docker_running_argv("/usr/bin/docker", "--help"));
	ck_assert_ptr_null(runnerd_docker_running_argv("/usr/bin/docker", "other-" INST "-" TURN));
	ck_assert_ptr_null(runnerd_docker_running_argv("docker", name));
}
END_TEST

START_TEST(test_running_image_and_events_argv)
{
	const char *name = "roundtable-sandbox-" INST "-" TURN;
	cleanup_strv char **v = runnerd_docker_running_image_argv("/usr/bin/docker", name);
	ck_assert_ptr_nonnull(v);
	const char *expect[] = {"/usr/bin/docker", "container", "inspect", "--format",
				"{{.State.Running}} {{.Image}}", name};
	ck_assert_uint_eq(rts_strv_len(v), RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect); i++)
		ck_assert_str_eq(v[i], expect[i]);
	ck_assert_ptr_null(runnerd_docker_running_image_argv("/usr/bin/docker", "--help"));
	ck_assert_ptr_null(runnerd_docker_running_image_argv("docker", name));

	cleanup_strv char **ev = runnerd_docker_image_events_argv("/usr/bin/docker", "roundtable-sandbox:local",
								   1764625200, 1764625232);
	const char *expect_ev[] = {"/usr/bin/docker", "events", "--filter", "type=image", "--filter",
				   "image=roundtable-sandbox:local", "--since", "1764625200", "--until", "1764625232",
				   "--format", "{{.Action}}"};
	ck_assert_uint_eq(rts_strv_len(ev), RTS_ARRAY_SIZE(expect_ev));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect_ev); i++)
		ck_assert_str_eq(ev[i], expect_ev[i]);
	ck_assert_ptr_null(runnerd_docker_image_events_argv("docker", "roundtable-sandbox:local", 1, 2));
	ck_assert_ptr_null(runnerd_docker_image_events_argv("/usr/bin/docker", "roundtable-sandbox:local", -1, 2));
	/* An end that is not after the start. */
	ck_assert_ptr_null(runnerd_docker_image_events_argv("/usr/bin/docker", "roundtable-sandbox:local", 5, 5));
	/* An image that would read as an option or widen the filter. */
	ck_assert_ptr_null(runnerd_docker_image_events_argv("/usr/bin/docker", "--help", 1, 2));
	ck_assert_ptr_null(runnerd_docker_image_events_argv("/usr/bin/docker", "a,type=container", 1, 2));
}
END_TEST

#define SHA "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

START_TEST(test_parse_image_ids)
{
	char id[RUNNERD_IMAGE_ID_MAX + 1];
	ck_assert_int_eq(runnerd_parse_image_id(SHA "\n", strlen(SHA) + 1, id), 0);
	ck_assert_str_eq(id, SHA);
	/* No newline, an empty line, two lines, a space, a control byte, DEL. */
	const char *bad[] = {SHA, "\n", SHA "\n" SHA "\n", "sha256:ab cd\n", "sha256:ab\tcd\n", "sha256:\x7f\n"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_int_eq(runnerd_parse_image_id(bad[i], strlen(bad[i]), id), -EINVAL);
	/* The longest ID kept, and one byte more. */
	char long_id[RUNNERD_IMAGE_ID_MAX + 3];
	memset(long_id, 'a', RUNNERD_IMAGE_ID_MAX);
	long_id[RUNNERD_IMAGE_ID_MAX] = '\n';
	ck_assert_int_eq(runnerd_parse_image_id(long_id, RUNNERD_IMAGE_ID_MAX + 1, id), 0);
	ck_assert_uint_eq(strlen(id), RUNNERD_IMAGE_ID_MAX);
	memset(long_id, 'a', RUNNERD_IMAGE_ID_MAX + 1);
	long_id[RUNNERD_IMAGE_ID_MAX + 1] = '\n';
	ck_assert_int_eq(runnerd_parse_image_id(long_id, RUNNERD_IMAGE_ID_MAX + 2, id), -EINVAL);

	ck_assert_int_eq(runnerd_parse_running_image("true " SHA "\n", strlen(SHA) + 6, id), 1);
	ck_assert_str_eq(id, SHA);
	ck_assert_int_eq(runnerd_parse_running_image("false " SHA "\n", strlen(SHA) + 7, id), 0);
	const char *bad_run[] = {"true\n", "true \n", "truex " SHA "\n", "yes " SHA "\n", "true  " SHA "\n",
				 ("true " SHA), ""};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad_run); i++)
		ck_assert_int_eq(runnerd_parse_running_image(bad_run[i], strlen(bad_run[i]), id), -EINVAL);
}
END_TEST

START_TEST(test_rm_outcome)
{
	ck_assert_int_eq(runnerd_docker_rm_outcome(false, true, 0, ""), RUNNERD_RM_GONE);
	ck_assert_int_eq(runnerd_docker_rm_outcome(false, true, 1, "Error: No such container: x"), RUNNERD_RM_GONE);
	ck_assert_int_eq(runnerd_docker_rm_outcome(false, true, 1,
						   "Error response from daemon: removal of container x is already in progress"),
			 RUNNERD_RM_IN_PROGRESS);
	ck_assert_int_eq(runnerd_docker_rm_outcome(false, true, 1, "Cannot connect to the Docker daemon"),
			 RUNNERD_RM_FAILED);
	/* Killed (its timeout) or ended by a signal: nothing is known. */
	ck_assert_int_eq(runnerd_docker_rm_outcome(true, true, 0, ""), RUNNERD_RM_FAILED);
	ck_assert_int_eq(runnerd_docker_rm_outcome(false, false, 9, "No such container"), RUNNERD_RM_FAILED);
}
END_TEST

START_TEST(test_ps_argv)
{
	cleanup_strv char **v = runnerd_docker_ps_argv("/usr/bin/docker", INST);
	ck_assert_ptr_nonnull(v);
	const char *expect[] = {"/usr/bin/docker", "ps", "-a", "--filter",
				"label=io.roundtable-sandbox.installation=" INST, "--format",
				"{{.Names}}\t{{.State}}\t{{.CreatedAt}}\t{{json (.Label \"io.roundtable-sandbox.channel\")}}"
				"\t{{json (.Label \"io.roundtable-sandbox.generation\")}}"};
	ck_assert_uint_eq(rts_strv_len(v), RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect); i++)
		ck_assert_str_eq(v[i], expect[i]);
	ck_assert_ptr_null(runnerd_docker_ps_argv("/usr/bin/docker", "a1b2"));
	ck_assert_ptr_null(runnerd_docker_ps_argv("/usr/bin/docker", "a1b2c3d4e5f6,label=x"));
}
END_TEST

START_TEST(test_info_and_image_argv)
{
	cleanup_strv char **info = runnerd_docker_info_argv("/usr/bin/docker");
	const char *expect_info[] = {"/usr/bin/docker", "info", "--format", "{{.DockerRootDir}}"};
	ck_assert_uint_eq(rts_strv_len(info), RTS_ARRAY_SIZE(expect_info));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect_info); i++)
		ck_assert_str_eq(info[i], expect_info[i]);
	ck_assert_ptr_null(runnerd_docker_info_argv("docker"));

	cleanup_strv char **img = runnerd_docker_image_inspect_argv("/usr/bin/docker", "roundtable-sandbox:local");
	const char *expect_img[] = {"/usr/bin/docker", "image", "inspect", "--format", "{{.Id}}",
				    "roundtable-sandbox:local"};
	ck_assert_uint_eq(rts_strv_len(img), RTS_ARRAY_SIZE(expect_img));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(expect_img); i++)
		ck_assert_str_eq(img[i], expect_img[i]);
	/* An image that would read as an option, or with a character docker never has. */
	ck_assert_ptr_null(runnerd_docker_image_inspect_argv("/usr/bin/docker", "--help"));
	ck_assert_ptr_null(runnerd_docker_image_inspect_argv("/usr/bin/docker", "a b"));
	ck_assert_ptr_null(runnerd_docker_image_inspect_argv("/usr/bin/docker", ""));
}
END_TEST

START_TEST(test_data_root)
{
	char p[64];
	const char *ok = "/var/lib/docker\n";
	ck_assert_int_eq(runnerd_parse_data_root(ok, strlen(ok), p, sizeof(p)), 0);
	ck_assert_str_eq(p, "/var/lib/docker");
	const char *slash = "/srv/docker/\n";
	ck_assert_int_eq(runnerd_parse_data_root(slash, strlen(slash), p, sizeof(p)), 0);
	ck_assert_str_eq(p, "/srv/docker");
	const char *root = "/\n";
	ck_assert_int_eq(runnerd_parse_data_root(root, strlen(root), p, sizeof(p)), 0);
	ck_assert_str_eq(p, "/");
	const char *bad[] = {"", "\n", "var/lib/docker\n", "/var/lib/docker", "/a\n/b\n", "/a\tb\n"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_int_eq(runnerd_parse_data_root(bad[i], strlen(bad[i]), p, sizeof(p)), -EINVAL);
	char small[8];
	ck_assert_int_eq(runnerd_parse_data_root(ok, strlen(ok), small, sizeof(small)), -EINVAL);

	ck_assert(rts_path_under("/var/lib/docker", "/var/lib/docker"));
	ck_assert(rts_path_under("/var/lib/docker/volumes/x", "/var/lib/docker"));
	ck_assert(rts_path_under("/var/lib/docker/x", "/var/lib/docker/"));
	ck_assert(rts_path_under("/srv/x", "/"));
	ck_assert(!rts_path_under("/var/lib/docker2", "/var/lib/docker"));
	ck_assert(!rts_path_under("/var/lib", "/var/lib/docker"));
	ck_assert(!rts_path_under("/tmp/run", "/var/lib/docker"));
	ck_assert(!rts_path_under("relative", "/"));
}
END_TEST

START_TEST(test_stale_names)
{
	ck_assert(runnerd_stale_name_ok(INST, "roundtable-sandbox-" INST "-" TURN));
	/* Another installation's, or anything not exactly our shape, is never touched. */
	ck_assert(!runnerd_stale_name_ok(INST, "roundtable-sandbox-ffffffffffff-" TURN));
	ck_assert(!runnerd_stale_name_ok(INST, "roundtable-sandbox-" INST "-" TURN "x"));
	ck_assert(!runnerd_stale_name_ok(INST, "roundtable-sandbox-" INST "-0123456789ABCDEF"));
	ck_assert(!runnerd_stale_name_ok(INST, "roundtable-sandbox-" INST "-"));
	ck_assert(!runnerd_stale_name_ok(INST, "my-roundtable-sandbox-" INST "-" TURN));
	ck_assert(!runnerd_stale_name_ok(INST, "roundtable-sandbox-" INST "-" TURN "\r"));
	ck_assert(!runnerd_stale_name_ok(INST, ""));
	ck_assert(!runnerd_stale_name_ok("bad", "roundtable-sandbox-" INST "-" TURN));
}
END_TEST

#define OURS "roundtable-sandbox-" INST "-" TURN

START_TEST(test_stale_lines)
{
	struct runnerd_stale c;
	ck_assert_int_eq(
		runnerd_parse_stale_line(INST, OURS "\texited\t2026-11-30 14:30:00 +0100 CET\t\"" HASH "\"", &c), 0);
	ck_assert_str_eq(c.name, OURS);
	ck_assert_str_eq(c.channel_hash, HASH);
	ck_assert_str_eq(c.created, "2026-11-30 14:30:00 +0100 CET");
	ck_assert_str_eq(c.state, "exited");

	/* No channel label: docker prints "". */
	ck_assert_int_eq(runnerd_parse_stale_line(INST, OURS "\trunning\t2026-11-30 14:30:00 +0000 UTC\t\"\"", &c), 0);
	ck_assert_str_eq(c.channel_hash, "-");
	ck_assert_str_eq(c.state, "running");

	/* Odd fields are shown as "?", and the container is still ours to remove. */
	static const struct {
		const char *line, *state, *created, *hash;
	} odd[] = {
		{OURS, "?", "?", "?"},
		{OURS "\t\t\t", "?", "?", "?"},
		{OURS "\tRunning!\t2026-11-30 14:30:00 +0000 UTC\t\"" HASH "\"", "?", "2026-11-30 14:30:00 +0000 UTC", HASH},
		{OURS "\tcreated\t2026\x01\t\"" HASH "x\"", "created", "?", "?"},
		{OURS "\tcreated\t2026-11-30\t\"" HASH "\\n\"", "created", "2026-11-30", "?"},
		{OURS "\tcreated\tx\t\"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"", "created",
		 "x", "?"},
		{OURS "\tcreated\tx\t" HASH, "created", "x", "?"},
		/* the generation label after it (the listing rich containers share) is not read */
		{OURS "\tcreated\tx\t\"" HASH "\"\t\"0123456789abcdef\"", "created", "x", HASH},
		{OURS "\tcreated\tx\t\"" HASH "\"\t\"\"\textra", "created", "x", HASH},
		/* 17 letters, 48 characters */
		{OURS "\tabcdefghijklmnopq\t012345678901234567890123456789012345678901234567\t\"\"", "?", "?", "-"},
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(odd); i++) {
		memset(&c, 'z', sizeof(c));
		ck_assert_int_eq(runnerd_parse_stale_line(INST, odd[i].line, &c), 0);
		ck_assert_str_eq(c.name, OURS);
		ck_assert_str_eq(c.state, odd[i].state);
		ck_assert_str_eq(c.created, odd[i].created);
		ck_assert_str_eq(c.channel_hash, odd[i].hash);
	}

	/* Not ours: another installation, another shape, or a name with more after it. */
	const char *other[] = {
		"roundtable-sandbox-ffffffffffff-" TURN "\texited\tx\t\"" HASH "\"",
		"rts-decoy\texited\tx\t\"" HASH "\"",
		OURS "x\texited\tx\t\"" HASH "\"",
		" " OURS "\texited\tx\t\"" HASH "\"",
		"",
		"\t\t\t",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(other); i++)
		ck_assert_int_eq(runnerd_parse_stale_line(INST, other[i], &c), -EINVAL);
	ck_assert_int_eq(runnerd_parse_stale_line("bad", OURS, &c), -EINVAL);
}
END_TEST

/* Worker input. */

static json_object *parse_or_fail(const char *s, size_t n)
{
	json_object *o = NULL;
	const char *why = "";
	ck_assert_msg(rts_json_parse(s, n, 16, &o, &why) == 0, "worker input does not parse: %s", why);
	return o;
}

START_TEST(test_worker_input_shape)
{
	cleanup_json json_object *tools = json_object_new_array();
	json_object *tool = json_object_new_object();
	json_object_object_add(tool, "name", json_object_new_string("host_clock"));
	json_object_array_add(tools, tool);
	struct runnerd_worker_turn t = {
		.turn_id = TURN,
		.speaker_id = "1234",
		.speaker_name = "Al\"ice \xc3\xa9",
		.text = "hello\n\x01 world",
		.attachments = 3,
		.start_fresh = true,
		.time_left_ms = 90000,
	};
	cleanup_free char *s = NULL;
	size_t n = 0;
	ck_assert_int_eq(runnerd_worker_input(cfg, tools, &t, "2026-11-30T14:30:00+01:00", &s, &n), 0);
	ck_assert_uint_eq(n, strlen(s));
	cleanup_json json_object *o = parse_or_fail(s, n);
	const char *keys[] = {"v",	    "turn",	"speaker", "text",	 "attachments", "systemPrompt",
			      "timeZone", "now",	"tools",   "startFresh", "limits"};
	ck_assert_int_eq(json_object_object_length(o), (int)RTS_ARRAY_SIZE(keys));
	for (size_t i = 0; i < RTS_ARRAY_SIZE(keys); i++)
		ck_assert_msg(rts_json_get(o, keys[i]) != NULL, "missing %s", keys[i]);
	ck_assert_int_eq(json_object_get_int(rts_json_get(o, "v")), 1);
	ck_assert_str_eq(rts_json_get_string(o, "turn"), TURN);
	json_object *sp = rts_json_get(o, "speaker");
	ck_assert_int_eq(json_object_object_length(sp), 2);
	ck_assert_str_eq(rts_json_get_string(sp, "id"), "1234");
	ck_assert_str_eq(rts_json_get_string(sp, "name"), "Al\"ice \xc3\xa9");
	ck_assert_str_eq(rts_json_get_string(o, "text"), "hello\n\x01 world");
	ck_assert_int_eq(json_object_get_int(rts_json_get(o, "attachments")), 3);
	ck_assert_str_eq(rts_json_get_string(o, "systemPrompt"), cfg->system_prompt);
	ck_assert_str_eq(rts_json_get_string(o, "timeZone"), "UTC");
	ck_assert_str_eq(rts_json_get_string(o, "now"), "2026-11-30T14:30:00+01:00");
	ck_assert(json_object_get_boolean(rts_json_get(o, "startFresh")));
	json_object *tl = rts_json_get(o, "tools");
	ck_assert(json_object_is_type(tl, json_type_array));
	ck_assert_uint_eq(json_object_array_length(tl), 1);
	json_object *lim = rts_json_get(o, "limits");
	ck_assert_int_eq(json_object_object_length(lim), 4);
	ck_assert_int_eq(json_object_get_int(rts_json_get(lim, "modelCalls")), 12);
	ck_assert_int_eq(json_object_get_int(rts_json_get(lim, "toolCallsPerResponse")), 8);
	ck_assert_int_eq(json_object_get_int(rts_json_get(lim, "maxOutputTokens")), 4096);
	ck_assert_int_eq(json_object_get_int(rts_json_get(lim, "turnTimeoutMs")), 90000);
	/* The principal id never reaches the container. */
	ck_assert_ptr_null(strstr(s, "rincipal"));
}
END_TEST

START_TEST(test_worker_input_refusals)
{
	struct runnerd_worker_turn t = {.turn_id = TURN, .speaker_id = "1", .speaker_name = "n", .text = "\xc3("};
	char *s = NULL;
	size_t n = 0;
	ck_assert_int_eq(runnerd_worker_input(cfg, NULL, &t, "2026-11-30T14:30:00+00:00", &s, &n), -EINVAL);
	ck_assert_ptr_null(s);
	/* Control characters grow sixfold when escaped: the 512 KiB cap is on the output. */
	size_t big = 100 * 1024;
	cleanup_free char *text = rts_xmalloc(big + 1);
	memset(text, 0x01, big);
	text[big] = '\0';
	t.text = text;
	ck_assert_int_eq(runnerd_worker_input(cfg, NULL, &t, "2026-11-30T14:30:00+00:00", &s, &n), -E2BIG);
	ck_assert_ptr_null(s);
	/* Right at home below the cap. */
	memset(text, 'a', big);
	ck_assert_int_eq(runnerd_worker_input(cfg, NULL, &t, "2026-11-30T14:30:00+00:00", &s, &n), 0);
	ck_assert_uint_le(n, RTS_WORKER_INPUT_MAX);
	free(s);
}
END_TEST

static void check_now(const char *tz, time_t t, const char *expect)
{
	char path[256];
	struct stat st;
	snprintf(path, sizeof(path), "/usr/share/zoneinfo/%s", tz);
	if (strcmp(tz, "UTC") != 0 && stat(path, &st) < 0)
		return; /* tzdata without that zone: nothing to compare against */
	setenv("TZ", tz, 1);
	tzset();
	char out[40];
	ck_assert_int_eq(rts_format_local_time(t, out, sizeof(out)), 0);
	ck_assert_msg(strcmp(out, expect) == 0, "%s: got %s, expected %s", tz, out, expect);
}

START_TEST(test_format_now)
{
	check_now("UTC", 0, "1970-01-01T00:00:00+00:00");
	check_now("Europe/Berlin", 1795951800, "2026-11-29T12:30:00+01:00");
	check_now("Europe/Berlin", 1784000000, "2026-07-14T05:33:20+02:00");
	check_now("Asia/Kolkata", 1795951800, "2026-11-29T17:00:00+05:30");
	check_now("America/New_York", 1795951800, "2026-11-29T06:30:00-05:00");
	char small[8];
	ck_assert_int_eq(rts_format_local_time(0, small, sizeof(small)), -EINVAL);
	setenv("TZ", "UTC", 1);
	tzset();
}
END_TEST

/* Worker output. */

static enum runnerd_worker_result parse_out(const char *s, char **reply, char *code)
{
	return runnerd_worker_output_parse(s, strlen(s), reply, code);
}

START_TEST(test_output_reply)
{
	char *reply = NULL;
	char code[RTS_WORKER_ERROR_CODE_MAX + 1];
	ck_assert_int_eq(parse_out("{\"v\":1,\"reply\":\"hi \\u00e9\"}\n", &reply, code), RUNNERD_WORKER_REPLY);
	ck_assert_str_eq(reply, "hi \xc3\xa9");
	free(reply);
	ck_assert_int_eq(parse_out(" {\"reply\":\"\",\"v\":1} ", &reply, code), RUNNERD_WORKER_REPLY);
	ck_assert_str_eq(reply, "");
	free(reply);
}
END_TEST

START_TEST(test_output_error_code)
{
	char *reply = NULL;
	char code[RTS_WORKER_ERROR_CODE_MAX + 1];
	ck_assert_int_eq(parse_out("{\"v\":1,\"error\":\"model_unavailable\"}", &reply, code), RUNNERD_WORKER_GAVE_UP);
	ck_assert_ptr_null(reply);
	ck_assert_str_eq(code, "model_unavailable");
	/* A code that is not [a-z_]{1,32} is not repeated anywhere. */
	ck_assert_int_eq(parse_out("{\"v\":1,\"error\":\"Model Down\"}", &reply, code), RUNNERD_WORKER_GAVE_UP);
	ck_assert_str_eq(code, "");
	ck_assert_int_eq(parse_out("{\"v\":1,\"error\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", &reply, code),
			 RUNNERD_WORKER_GAVE_UP);
	ck_assert_str_eq(code, "");
	ck_assert_int_eq(parse_out("{\"v\":1,\"error\":\"\"}", &reply, code), RUNNERD_WORKER_GAVE_UP);
	ck_assert_str_eq(code, "");
}
END_TEST

START_TEST(test_output_malformed)
{
	static const char *bad[] = {
		"",
		"null",
		"[]",
		"\"reply\"",
		"{}",
		"{\"reply\":\"x\"}",
		"{\"v\":2,\"reply\":\"x\"}",
		"{\"v\":1.0,\"reply\":\"x\"}",
		"{\"v\":\"1\",\"reply\":\"x\"}",
		"{\"v\":true,\"reply\":\"x\"}",
		"{\"v\":1,\"reply\":\"x\",\"extra\":1}",
		"{\"v\":1,\"reply\":\"x\",\"error\":\"e\"}",
		"{\"v\":1,\"reply\":5}",
		"{\"v\":1,\"reply\":null}",
		"{\"v\":1,\"reply\":[\"x\"]}",
		"{\"v\":1,\"error\":7}",
		"{\"v\":1,\"other\":\"x\"}",
		"{\"v\":1,\"reply\":\"x\"} trailing",
		"{\"v\":1,\"reply\":\"x\"}{\"v\":1,\"reply\":\"y\"}",
		"{\"v\":1,\"reply\":\"a\\u0000b\"}",
		"{\"v\":1,\"reply\":\"\xff\"}",
		"{\"v\":1,\"reply\":'x'}",
		"{\"v\":1,\"reply\":\"x\",}",
		"{\"v\":1,\"reply\":\"x\"",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++) {
		char *reply = NULL;
		char code[RTS_WORKER_ERROR_CODE_MAX + 1];
		ck_assert_msg(parse_out(bad[i], &reply, code) == RUNNERD_WORKER_MALFORMED, "accepted: %s", bad[i]);
		ck_assert_ptr_null(reply);
	}
	/* An embedded NUL in the raw bytes. */
	char *reply = NULL;
	char code[RTS_WORKER_ERROR_CODE_MAX + 1];
	ck_assert_int_eq(runnerd_worker_output_parse("{\"v\":1,\"reply\":\"x\"}\0", 21, &reply, code),
			 RUNNERD_WORKER_MALFORMED);
}
END_TEST

START_TEST(test_output_reply_limit)
{
	/* Exactly RTS_REPLY_MAX bytes passes; one more is refused whole, never cut. */
	size_t pre = strlen("{\"v\":1,\"reply\":\""), post = strlen("\"}");
	size_t n = pre + RTS_REPLY_MAX + 1 + post;
	cleanup_free char *buf = rts_xmalloc(n + 1);
	memcpy(buf, "{\"v\":1,\"reply\":\"", pre);
	memset(buf + pre, 'x', RTS_REPLY_MAX);
	memcpy(buf + pre + RTS_REPLY_MAX, "\"}", post + 1);
	char *reply = NULL;
	char code[RTS_WORKER_ERROR_CODE_MAX + 1];
	ck_assert_int_eq(runnerd_worker_output_parse(buf, pre + RTS_REPLY_MAX + post, &reply, code),
			 RUNNERD_WORKER_REPLY);
	ck_assert_uint_eq(strlen(reply), RTS_REPLY_MAX);
	free(reply);
	reply = NULL;
	memset(buf + pre, 'x', RTS_REPLY_MAX + 1);
	memcpy(buf + pre + RTS_REPLY_MAX + 1, "\"}", post + 1);
	ck_assert_int_eq(runnerd_worker_output_parse(buf, n, &reply, code), RUNNERD_WORKER_TOO_LONG);
	ck_assert_ptr_null(reply);
	/* Over the stdout bound: not even parsed. */
	ck_assert_int_eq(runnerd_worker_output_parse(buf, RTS_WORKER_OUTPUT_MAX + 1, &reply, code),
			 RUNNERD_WORKER_MALFORMED);
}
END_TEST


/* ---- rich channels ---- */

#define RICH_NAME "roundtable-sandbox-" INST "-rich-5e0c2bb7e19dd8b4"
#define BROKER_DIR "/run/roundtable-sandbox/turns/rich-5e0c2bb7e19dd8b4"

static struct runnerd_rich_spec rich_spec(void)
{
	return (struct runnerd_rich_spec){
		.docker = "/usr/bin/docker",
		.installation_id = INST,
		.channel_hash = HASH,
		.profile = "default",
		.generation = "0123456789abcdef",
		.uid = 1000,
		.gid = 1000,
		.limits = {.memory_mb = 1536, .cpus = 1.0, .pids = 256},
		.tmp_mb = 512,
		.log_driver = "journald",
		.time_zone = "Europe/Berlin",
		.workspace = WS,
		.broker_dir = BROKER_DIR,
		.image = "roundtable-sandbox-rich:local",
	};
}

/* Exactly the argv of rich-design.md section 1 and the seed's container (DESIGN.md 8.5). */
START_TEST(test_rich_argv_exact)
{
	struct runnerd_rich_spec s = rich_spec();
	cleanup_strv char **v = runnerd_docker_rich_argv(&s);
	ck_assert_ptr_nonnull(v);
	const char *expect[] = {
		"/usr/bin/docker", "run", "-d", "--name", RICH_NAME,
		"--label", "io.roundtable-sandbox.installation=" INST,
		"--label", "io.roundtable-sandbox.channel=" HASH,
		"--label", "io.roundtable-sandbox.kind=rich",
		"--label", "io.roundtable-sandbox.profile=default",
		"--label", "io.roundtable-sandbox.generation=0123456789abcdef",
		"--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", "1000:1000", "--memory", "1536m", "--memory-swap", "1536m", "--cpus", "1",
		"--pids-limit", "256", "--tmpfs", "/tmp:rw,nosuid,nodev,size=512m",
		/* journald, tagged with the hash prefix (never the channel key) */
		"--log-driver", "journald", "--log-opt", "tag=sandbox/5e0c2bb7e19dd8b4",
		"--pull", "never", "--env", "TZ=Europe/Berlin",
		"--mount", "type=bind,source=" WS ",target=/workspace",
		"--mount", "type=bind,source=" BROKER_DIR ",target=/run/broker,readonly",
		"roundtable-sandbox-rich:local",
	};
	size_t n = rts_strv_len(v);
	ck_assert_uint_eq(n, RTS_ARRAY_SIZE(expect));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(strcmp(v[i], expect[i]) == 0, "argv[%zu] is \"%s\", expected \"%s\"", i, v[i], expect[i]);
	/* Never --rm (its logs are read before it is removed), never -i, never a port. */
	ck_assert_uint_eq(count(v, "--rm"), 0);
	ck_assert_uint_eq(count(v, "-p"), 0);
}
END_TEST

START_TEST(test_rich_argv_log_options)
{
	struct runnerd_rich_spec s = rich_spec();
	struct rts_rich_log_option opts[] = {{.name = "max-size", .value = "10m"}, {.name = "tag", .value = "mine"}};
	/* json-file takes no tag: none is added; the operator's options follow the driver. */
	s.log_driver = "json-file";
	s.log_options = opts;
	s.n_log_options = 1;
	cleanup_strv char **v = runnerd_docker_rich_argv(&s);
	ck_assert_str_eq(opt_value(v, "--log-driver"), "json-file");
	ck_assert_str_eq(opt_value(v, "--log-opt"), "max-size=10m");
	/* An operator's tag wins over ours. */
	s.log_driver = "journald";
	s.n_log_options = 2;
	cleanup_strv char **w = runnerd_docker_rich_argv(&s);
	ck_assert_uint_eq(count(w, "--log-opt"), 2);
	ck_assert_uint_eq(count(w, "tag=mine"), 1);
	ck_assert_uint_eq(count(w, "tag=sandbox/5e0c2bb7e19dd8b4"), 0);
	/* A value that would carry another argument or a control byte is refused. */
	struct rts_rich_log_option bad[] = {{.name = "x", .value = "a\nb"}};
	s.log_options = bad;
	s.n_log_options = 1;
	ck_assert_ptr_null(runnerd_docker_rich_argv(&s));
	struct rts_rich_log_option bad_name[] = {{.name = "x=y", .value = "a"}};
	s.log_options = bad_name;
	ck_assert_ptr_null(runnerd_docker_rich_argv(&s));
}
END_TEST

START_TEST(test_rich_argv_refuses_bad_specs)
{
	struct runnerd_rich_spec s;
#define REFUSE(field, value)                                      \
	do {                                                      \
		s = rich_spec();                                  \
		s.field = value;                                  \
		ck_assert_ptr_null(runnerd_docker_rich_argv(&s)); \
	} while (0)
	REFUSE(profile, "Bad");
	REFUSE(profile, "a,b");
	REFUSE(generation, "0123");
	REFUSE(generation, "0123456789ABCDEF");
	REFUSE(uid, 0);
	REFUSE(gid, 0);
	REFUSE(workspace, "/var/lib/ws,readonly=false");
	REFUSE(broker_dir, "relative");
	REFUSE(image, "-v/:/host");
	REFUSE(tmp_mb, 0);
	REFUSE(log_driver, "");
	REFUSE(log_driver, "-x");
	REFUSE(time_zone, "Europe/Berlin extra");
	REFUSE(channel_hash, "5e0c");
	REFUSE(installation_id, "a1b2");
	/* The Pi worker's bottoms (common/limits.h), not the sealed worker's nor the
	 * precheck's, whatever the config loader let through. */
	REFUSE(limits.cpus, RTS_RICH_CPUS_MIN - 0.001);
	REFUSE(limits.cpus, RTS_PRECHECK_CPUS_MIN);
	REFUSE(limits.cpus, RTS_CPUS_MIN);
	REFUSE(limits.pids, RTS_RICH_PIDS_MIN - 1);
	REFUSE(limits.pids, RTS_PIDS_MIN);
	REFUSE(limits.memory_mb, RTS_RICH_MEMORY_MB_MIN - 1);
	REFUSE(limits.memory_mb, RTS_MEMORY_MB_MIN);
	REFUSE(limits.memory_mb, RTS_MEMORY_MB_MAX + 1);
	REFUSE(limits.pids, RTS_PIDS_MAX + 1);
#undef REFUSE
	/* All three bottoms at once: the container runnerd starts with them. */
	s = rich_spec();
	s.limits = (struct rts_limits){.memory_mb = RTS_RICH_MEMORY_MB_MIN, .cpus = RTS_RICH_CPUS_MIN,
				       .pids = RTS_RICH_PIDS_MIN};
	cleanup_strv char **bottom = runnerd_docker_rich_argv(&s);
	ck_assert_ptr_nonnull(bottom);
	ck_assert_str_eq(opt_value(bottom, "--memory"), "192m");
	ck_assert_str_eq(opt_value(bottom, "--memory-swap"), "192m");
	ck_assert_str_eq(opt_value(bottom, "--cpus"), "0.25");
	ck_assert_str_eq(opt_value(bottom, "--pids-limit"), "16");
}
END_TEST

START_TEST(test_rich_names)
{
	cleanup_free char *n = runnerd_rich_name(INST, HASH);
	ck_assert_str_eq(n, RICH_NAME);
	ck_assert(runnerd_rich_name_ok(INST, RICH_NAME));
	ck_assert(!runnerd_rich_name_ok(INST, RICH_NAME "0"));
	ck_assert(!runnerd_rich_name_ok("ffffffffffff", RICH_NAME));
	ck_assert(!runnerd_rich_name_ok(INST, "roundtable-sandbox-" INST "-rich-5E0C2BB7E19DD8B4"));
	ck_assert(!runnerd_rich_name_ok(INST, "roundtable-sandbox-" INST "-" TURN));
	/* A sealed turn's sweep never takes a rich container, and rm takes both kinds. */
	ck_assert(!runnerd_stale_name_ok(INST, RICH_NAME));
	cleanup_strv char **rm = runnerd_docker_rm_argv("/usr/bin/docker", RICH_NAME);
	ck_assert_ptr_nonnull(rm);
	ck_assert_str_eq(rm[3], RICH_NAME);
	ck_assert_ptr_null(runnerd_docker_rm_argv("/usr/bin/docker", "roundtable-sandbox-" INST "-rich-x"));
	cleanup_strv char **logs = runnerd_docker_logs_argv("/usr/bin/docker", RICH_NAME, 200);
	ck_assert_str_eq(logs[1], "logs");
	ck_assert_str_eq(logs[2], "--tail");
	ck_assert_str_eq(logs[3], "200");
	ck_assert_str_eq(logs[4], RICH_NAME);
	ck_assert_ptr_null(runnerd_docker_logs_argv("/usr/bin/docker", "other", 200));
	cleanup_strv char **run = runnerd_docker_running_argv("/usr/bin/docker", RICH_NAME);
	ck_assert_str_eq(run[4], "{{.State.Running}}");
}
END_TEST

START_TEST(test_rich_ps_lines)
{
#define CREATED "2026-11-30 14:30:00 +0100 CET"
	struct runnerd_rich_found f;
	ck_assert_int_eq(
		runnerd_parse_rich_line(INST, RICH_NAME "\trunning\t" CREATED "\t\"" HASH "\"\t\"0123456789abcdef\"", &f), 0);
	ck_assert_str_eq(f.name, RICH_NAME);
	ck_assert_str_eq(f.channel_hash, HASH);
	ck_assert_str_eq(f.generation, "0123456789abcdef");
	ck_assert(f.running);
	ck_assert_int_eq(runnerd_parse_rich_line(INST, RICH_NAME "\texited\t" CREATED "\t\"" HASH "\"\t\"\"", &f), 0);
	ck_assert(!f.running);
	ck_assert_str_eq(f.generation, "");
	const char *bad[] = {
		/* the label's hash must have the name's prefix */
		RICH_NAME "\trunning\t" CREATED "\t\"0" HASH "\"\t\"0123456789abcdef\"",
		RICH_NAME "\trunning\t" CREATED "\t\"" "0000000000000000000000000000000000000000000000000000000000000000"
			  "\"\t\"0123456789abcdef\"",
		"roundtable-sandbox-ffffffffffff-rich-5e0c2bb7e19dd8b4\trunning\t" CREATED "\t\"" HASH "\"\t\"\"",
		RICH_NAME "\trunning\t" CREATED "\t\"" HASH "\"",
		RICH_NAME "\trunning\t" CREATED "\t\"" HASH "\"\t\"\"\textra",
		"roundtable-sandbox-" INST "-" TURN "\trunning\t" CREATED "\t\"" HASH "\"\t\"\"",
		/* the rich listing's old shape, without the creation time */
		RICH_NAME "\trunning\t\"" HASH "\"\t\"0123456789abcdef\"",
		"",
	};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(bad); i++)
		ck_assert_msg(runnerd_parse_rich_line(INST, bad[i], &f) == -EINVAL, "accepted %s", bad[i]);
}
#undef CREATED
END_TEST

START_TEST(test_rich_generation)
{
	char err[512];
	cleanup_json json_object *o = NULL;
	const char *why;
	const char *doc = "{\"model\":\"m\",\"modelUrl\":\"https://model.invalid/v1/chat/completions\","
			  "\"rich\":{\"profiles\":{\"a\":{\"model\":\"x\"},\"b\":{\"model\":\"x\",\"prompt\":\"p\"}}}}";
	ck_assert_int_eq(rts_json_parse(doc, strlen(doc), 8, &o, &why), 0);
	struct rts_config *c = rts_config_from_json(o, "t.json", err, sizeof(err));
	ck_assert_msg(c != NULL, "%s", err);
	const struct rts_rich_profile *a = rts_rich_profile_find(&c->rich, "a"), *b = rts_rich_profile_find(&c->rich, "b");
	char g1[17], g2[17], g3[17], g4[17], g5[17];
	runnerd_rich_generation(c, a, "sha256:aa", 1000, 1000, g1);
	runnerd_rich_generation(c, a, "sha256:aa", 1000, 1000, g2);
	ck_assert_str_eq(g1, g2); /* deterministic */
	ck_assert_uint_eq(strlen(g1), 16);
	runnerd_rich_generation(c, b, "sha256:aa", 1000, 1000, g3); /* the profile */
	runnerd_rich_generation(c, a, "sha256:bb", 1000, 1000, g4); /* the image */
	c->rich.limits.pids = 100;					  /* the config */
	runnerd_rich_generation(c, a, "sha256:aa", 1000, 1000, g5);
	ck_assert_str_ne(g1, g3);
	ck_assert_str_ne(g1, g4);
	ck_assert_str_ne(g1, g5);
	rts_config_free(c);
}
END_TEST

static Suite *docker_args_suite(void)
{
	Suite *s = suite_create("runnerd");
	TCase *tc = tcase_create("docker_args");
	tcase_add_checked_fixture(tc, load_default_config, free_config);
	tcase_add_test(tc, test_run_argv_exact_default);
	tcase_add_test(tc, test_run_argv_uses_build_docker);
	tcase_add_test(tc, test_run_argv_limits_from_config);
	tcase_add_test(tc, test_cpus_format);
	tcase_add_test(tc, test_cpus_for_host);
	tcase_add_test(tc, test_run_argv_user_numeric);
	tcase_add_test(tc, test_run_argv_exactly_two_binds);
	tcase_add_test(tc, test_run_argv_nothing_forbidden);
	tcase_add_test(tc, test_run_argv_image_last_and_names);
	tcase_add_test(tc, test_run_argv_refuses_bad_specs);
	tcase_add_test(tc, test_rm_argv);
	tcase_add_test(tc, test_run_argv_spare_label);
	tcase_add_test(tc, test_running_argv);
	tcase_add_test(tc, test_running_image_and_events_argv);
	tcase_add_test(tc, test_parse_image_ids);
	tcase_add_test(tc, test_rm_outcome);
	tcase_add_test(tc, test_exit_text);
	tcase_add_test(tc, test_ps_argv);
	tcase_add_test(tc, test_stale_names);
	tcase_add_test(tc, test_stale_lines);
	tcase_add_test(tc, test_info_and_image_argv);
	tcase_add_test(tc, test_data_root);
	tcase_add_test(tc, test_rich_argv_exact);
	tcase_add_test(tc, test_rich_argv_log_options);
	tcase_add_test(tc, test_rich_argv_refuses_bad_specs);
	tcase_add_test(tc, test_rich_names);
	tcase_add_test(tc, test_rich_ps_lines);
	tcase_add_test(tc, test_rich_generation);
	suite_add_tcase(s, tc);

	tc = tcase_create("worker_io");
	tcase_add_checked_fixture(tc, load_default_config, free_config);
	tcase_add_test(tc, test_worker_input_shape);
	tcase_add_test(tc, test_worker_input_refusals);
	tcase_add_test(tc, test_format_now);
	tcase_add_test(tc, test_output_reply);
	tcase_add_test(tc, test_output_error_code);
	tcase_add_test(tc, test_output_malformed);
	tcase_add_test(tc, test_output_reply_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(docker_args_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
