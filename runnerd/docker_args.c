/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/ids.h"
#include "common/json.h"
#include "common/proto.h"
#include "common/tools.h"
#include "common/util.h"
#include "runnerd/docker_args.h"

/* Paths end up inside --mount values, where ',' separates options and '=' keys: accept
 * only the conservative set the config accepts for its roots, normalised and absolute. */
static bool mount_path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > 4096)
		return false;
	for (const char *c = p; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '/' ||
		      *c == '.' || *c == '_' || *c == '-' || *c == '+' || *c == '@' || *c == '~'))
			return false;
	return !strstr(p, "//") && !strstr(p, "/./") && !strstr(p, "/../");
}

double runnerd_cpus_for_host(double cpus, unsigned host_cpus)
{
	return host_cpus > 0 && cpus > (double)host_cpus ? (double)host_cpus : cpus;
}

int runnerd_format_cpus(double cpus, char *out, size_t outlen)
{
	if (!isfinite(cpus) || cpus < RTS_CPUS_MIN || cpus > RTS_CPUS_MAX || outlen < 16)
		return -EINVAL;
	/* Integer arithmetic on thousandths: no locale decimal separator, no float noise. */
	long milli = lround(cpus * 1000.0);
	long whole = milli / 1000, frac = milli % 1000;
	if (frac == 0) {
		snprintf(out, outlen, "%ld", whole);
		return 0;
	}
	char digits[4];
	snprintf(digits, sizeof(digits), "%03ld", frac);
	for (int i = 2; i > 0 && digits[i] == '0'; i--)
		digits[i] = '\0';
	snprintf(out, outlen, "%ld.%s", whole, digits);
	return 0;
}

/* The confinement every container of ours gets, sealed turn or rich channel alike: no
 * network, a read-only root, no capabilities, no new privileges, the numeric uid and gid
 * (no passwd lookup happens in the image: there is none in FROM scratch), the memory limit
 * with no swap on top, the CPUs and the process limit. Appended at v[*n]. */
static void push_confinement(char **v, size_t *n, uid_t uid, gid_t gid, const struct rts_limits *limits,
			     const char *cpus)
{
	const char *fixed[] = {"--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt",
			       "no-new-privileges"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(fixed); i++)
		v[(*n)++] = rts_xstrdup(fixed[i]);
	v[(*n)++] = rts_xstrdup("--user");
	v[(*n)++] = rts_xasprintf("%lu:%lu", (unsigned long)uid, (unsigned long)gid);
	v[(*n)++] = rts_xstrdup("--memory");
	v[(*n)++] = rts_xasprintf("%um", limits->memory_mb);
	/* Equal to --memory: no swap on top (seed: "1.5 GiB RAM with no additional swap"). */
	v[(*n)++] = rts_xstrdup("--memory-swap");
	v[(*n)++] = rts_xasprintf("%um", limits->memory_mb);
	v[(*n)++] = rts_xstrdup("--cpus");
	v[(*n)++] = rts_xstrdup(cpus);
	v[(*n)++] = rts_xstrdup("--pids-limit");
	v[(*n)++] = rts_xasprintf("%u", limits->pids);
}

char **runnerd_docker_run_argv(const struct runnerd_run_spec *s)
{
	char cpus[16];
	if (!s || !s->docker || s->docker[0] != '/' || !rts_hex_valid(s->installation_id, RTS_INSTALLATION_ID_LEN) ||
	    !s->turn_id || !rts_turn_id_valid(s->turn_id) || !rts_hex_valid(s->channel_hash, RTS_HASH_HEX_LEN) ||
	    s->uid == 0 || s->gid == 0 || !mount_path_ok(s->workspace) || !mount_path_ok(s->run_dir) ||
	    !rts_image_ref_ok(s->image) || s->limits.memory_mb < RTS_MEMORY_MB_MIN ||
	    s->limits.memory_mb > RTS_MEMORY_MB_MAX || s->limits.pids < RTS_PIDS_MIN || s->limits.pids > RTS_PIDS_MAX ||
	    runnerd_format_cpus(s->limits.cpus, cpus, sizeof(cpus)) < 0 ||
	    (s->kind != RUNNERD_RUN_TURN && s->kind != RUNNERD_RUN_PRECHECK) ||
	    (s->kind == RUNNERD_RUN_PRECHECK &&
	     (s->limits.pids < RTS_PRECHECK_PIDS_MIN || s->limits.cpus < RTS_PRECHECK_CPUS_MIN)))
		return NULL;
	bool precheck = s->kind == RUNNERD_RUN_PRECHECK;

	/* Attach stdin and stdout only: the container's stderr is guest-written text and must
	 * never reach the host log; what remains on the CLI's stderr is the CLI's own. */
	const char *fixed_head[] = {"run", "-i", "--attach", "stdin", "--attach", "stdout", "--rm"};
	char *v[64];
	size_t n = 0;
	v[n++] = rts_xstrdup(s->docker);
	for (size_t i = 0; i < RTS_ARRAY_SIZE(fixed_head); i++)
		v[n++] = rts_xstrdup(fixed_head[i]);
	v[n++] = rts_xstrdup("--name");
	v[n++] = rts_container_name(s->installation_id, s->turn_id);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RTS_LABEL_INSTALLATION, s->installation_id);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RTS_LABEL_CHANNEL, s->channel_hash);
	if (s->spare && !precheck) {
		v[n++] = rts_xstrdup("--label");
		v[n++] = rts_xasprintf("%s=1", RTS_LABEL_SPARE);
	}
	push_confinement(v, &n, s->uid, s->gid, &s->limits, cpus);
	v[n++] = rts_xstrdup("--tmpfs");
	v[n++] = rts_xasprintf("/tmp:rw,nosuid,nodev,size=%um", precheck ? RTS_PRECHECK_TMPFS_MB : 16u);
	/* No daemon-side log files a guest could grow; stdout reaches us through the attach. */
	v[n++] = rts_xstrdup("--log-driver");
	v[n++] = rts_xstrdup("none");
	/* Only the image the operator built; never contact a registry. */
	v[n++] = rts_xstrdup("--pull");
	v[n++] = rts_xstrdup("never");
	v[n++] = rts_xstrdup("--mount");
	v[n++] = rts_xasprintf("type=bind,source=%s,target=/workspace%s", s->workspace, precheck ? ",readonly" : "");
	v[n++] = rts_xstrdup("--mount");
	v[n++] = rts_xasprintf("type=bind,source=%s,target=/run/broker,readonly", s->run_dir);
	v[n++] = rts_xstrdup(s->image);
	v[n] = NULL;

	char **out = rts_xcalloc(n + 1, sizeof(char *));
	memcpy(out, v, n * sizeof(char *));
	return out;
}

bool runnerd_stale_name_ok(const char *installation_id, const char *name)
{
	if (!rts_hex_valid(installation_id, RTS_INSTALLATION_ID_LEN) || !name)
		return false;
	size_t plen = strlen(RTS_CONTAINER_PREFIX);
	if (strncmp(name, RTS_CONTAINER_PREFIX, plen) != 0)
		return false;
	name += plen;
	if (strncmp(name, installation_id, RTS_INSTALLATION_ID_LEN) != 0 || name[RTS_INSTALLATION_ID_LEN] != '-')
		return false;
	return rts_turn_id_valid(name + RTS_INSTALLATION_ID_LEN + 1);
}

/* name is one of ours, sealed or rich, of whatever installation (which is the part after
 * the prefix). */
static bool our_name(const char *name)
{
	size_t plen = strlen(RTS_CONTAINER_PREFIX);
	if (!name || strncmp(name, RTS_CONTAINER_PREFIX, plen) != 0 || strlen(name) < plen + RTS_INSTALLATION_ID_LEN)
		return false;
	char inst[RTS_INSTALLATION_ID_LEN + 1];
	memcpy(inst, name + plen, RTS_INSTALLATION_ID_LEN);
	inst[RTS_INSTALLATION_ID_LEN] = '\0';
	return runnerd_stale_name_ok(inst, name) || runnerd_rich_name_ok(inst, name);
}

char **runnerd_docker_rm_argv(const char *docker, const char *name)
{
	if (!docker || docker[0] != '/' || !our_name(name))
		return NULL;
	char **v = rts_xcalloc(5, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("rm");
	v[2] = rts_xstrdup("-f");
	v[3] = rts_xstrdup(name);
	return v;
}

enum runnerd_rm_outcome runnerd_docker_rm_outcome(bool killed, bool exited, int status, const char *err)
{
	if (killed || !exited)
		return RUNNERD_RM_FAILED;
	if (status == 0 || strstr(err, "No such container"))
		return RUNNERD_RM_GONE;
	return strstr(err, "already in progress") ? RUNNERD_RM_IN_PROGRESS : RUNNERD_RM_FAILED;
}

char **runnerd_docker_running_argv(const char *docker, const char *name)
{
	/* The same name check as a removal: only containers of ours are asked about. */
	cleanup_strv char **rm = runnerd_docker_rm_argv(docker, name);
	if (!rm)
		return NULL;
	char **v = rts_xcalloc(7, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("container");
	v[2] = rts_xstrdup("inspect");
	v[3] = rts_xstrdup("--format");
	v[4] = rts_xstrdup("{{.State.Running}}");
	v[5] = rts_xstrdup(name);
	return v;
}

char **runnerd_docker_running_image_argv(const char *docker, const char *name)
{
	char **v = runnerd_docker_running_argv(docker, name);
	if (v) {
		free(v[4]);
		v[4] = rts_xstrdup("{{.State.Running}} {{.Image}}");
	}
	return v;
}

char **runnerd_docker_image_events_argv(const char *docker, const char *image, long long since, long long until)
{
	if (!docker || docker[0] != '/' || !rts_image_ref_ok(image) || since < 0 || until <= since)
		return NULL;
	char **v = rts_xcalloc(14, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("events");
	v[2] = rts_xstrdup("--filter");
	v[3] = rts_xstrdup("type=image");
	v[4] = rts_xstrdup("--filter");
	v[5] = rts_xasprintf("image=%s", image);
	v[6] = rts_xstrdup("--since");
	v[7] = rts_xasprintf("%lld", since);
	v[8] = rts_xstrdup("--until");
	v[9] = rts_xasprintf("%lld", until);
	v[10] = rts_xstrdup("--format");
	v[11] = rts_xstrdup("{{.Action}}");
	return v;
}

int runnerd_parse_image_id(const char *out, size_t len, char id[RUNNERD_IMAGE_ID_MAX + 1])
{
	if (len < 2 || out[len - 1] != '\n' || len - 1 > RUNNERD_IMAGE_ID_MAX)
		return -EINVAL;
	for (size_t i = 0; i + 1 < len; i++)
		if ((unsigned char)out[i] <= 0x20 || (unsigned char)out[i] >= 0x7f)
			return -EINVAL;
	memcpy(id, out, len - 1);
	id[len - 1] = '\0';
	return 0;
}

int runnerd_parse_running_image(const char *out, size_t len, char id[RUNNERD_IMAGE_ID_MAX + 1])
{
	static const char yes[] = "true ", no[] = "false ";
	if (len >= sizeof(no) - 1 && memcmp(out, no, sizeof(no) - 1) == 0)
		return 0;
	if (len < sizeof(yes) - 1 || memcmp(out, yes, sizeof(yes) - 1) != 0)
		return -EINVAL;
	int r = runnerd_parse_image_id(out + sizeof(yes) - 1, len - (sizeof(yes) - 1), id);
	return r < 0 ? r : 1;
}

char **runnerd_docker_info_argv(const char *docker)
{
	if (!docker || docker[0] != '/')
		return NULL;
	char **v = rts_xcalloc(5, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("info");
	v[2] = rts_xstrdup("--format");
	v[3] = rts_xstrdup("{{.DockerRootDir}}");
	return v;
}

char **runnerd_docker_image_inspect_argv(const char *docker, const char *image)
{
	if (!docker || docker[0] != '/' || !rts_image_ref_ok(image))
		return NULL;
	char **v = rts_xcalloc(7, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("image");
	v[2] = rts_xstrdup("inspect");
	v[3] = rts_xstrdup("--format");
	v[4] = rts_xstrdup("{{.Id}}");
	v[5] = rts_xstrdup(image);
	return v;
}

int runnerd_parse_data_root(const char *out, size_t len, char *path, size_t pathlen)
{
	if (len < 2 || out[len - 1] != '\n' || out[0] != '/' || len > pathlen)
		return -EINVAL;
	for (size_t i = 0; i < len - 1; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			return -EINVAL;
	memcpy(path, out, len - 1);
	path[len - 1] = '\0';
	/* Trailing slashes do not change the directory; keep "/" itself. */
	for (size_t n = len - 1; n > 1 && path[n - 1] == '/'; n--)
		path[n - 1] = '\0';
	return 0;
}

char **runnerd_docker_ps_argv(const char *docker, const char *installation_id)
{
	if (!docker || docker[0] != '/' || !rts_hex_valid(installation_id, RTS_INSTALLATION_ID_LEN))
		return NULL;
	char **v = rts_xcalloc(8, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("ps");
	v[2] = rts_xstrdup("-a");
	v[3] = rts_xstrdup("--filter");
	v[4] = rts_xasprintf("label=%s=%s", RTS_LABEL_INSTALLATION, installation_id);
	v[5] = rts_xstrdup("--format");
	v[6] = rts_xstrdup("{{.Names}}\t{{.State}}\t{{.CreatedAt}}\t{{json (.Label \"" RTS_LABEL_CHANNEL
			   "\")}}\t{{json (.Label \"" RUNNERD_LABEL_GENERATION "\")}}");
	return v;
}

/* Split a line of a `docker ps --format` listing at tabs into n fields [f[i], e[i]): the
 * last runs to the end of the line (tabs included), missing ones are empty at the end.
 * Returns how many the line has, up to n. A field docker prints as {{json ...}} cannot
 * hold a tab (JSON escapes it), so no label value can shift the fields. */
static size_t tab_fields(const char *line, size_t n, const char **f, const char **e)
{
	const char *p = line, *end = line + strlen(line);
	size_t found = 1;
	for (size_t i = 0; i < n; i++) {
		f[i] = p;
		const char *tab = i + 1 < n ? memchr(p, '\t', (size_t)(end - p)) : NULL;
		e[i] = tab ? tab : end;
		p = tab ? tab + 1 : end;
		found += tab != NULL;
	}
	return found;
}

/* A JSON-quoted label of exactly len lowercase hex digits: copied into out (len + 1). */
static bool quoted_hex(const char *p, const char *end, size_t len, char *out)
{
	if ((size_t)(end - p) != len + 2 || p[0] != '"' || end[-1] != '"')
		return false;
	memcpy(out, p + 1, len);
	out[len] = '\0';
	return rts_hex_valid(out, len);
}

/* Copy the field [p, end) into out (cap bytes with the NUL) when every byte passes ok and
 * it is 1..cap-1 bytes long; "?" otherwise. */
static void copy_field(const char *p, const char *end, bool (*ok)(char), char *out, size_t cap)
{
	size_t n = (size_t)(end - p);
	bool good = n > 0 && n < cap;
	for (const char *c = p; good && c < end; c++)
		good = ok(*c);
	if (good) {
		memcpy(out, p, n);
		out[n] = '\0';
	} else {
		snprintf(out, cap, "?");
	}
}

static bool state_char(char c)
{
	return c >= 'a' && c <= 'z';
}

/* Docker's CreatedAt: "2026-11-30 14:30:00 +0100 CET". */
static bool created_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ' ' || c == ':' ||
	       c == '+' || c == '-' || c == '.';
}

int runnerd_parse_stale_line(const char *installation_id, const char *line, struct runnerd_stale *out)
{
	if (!line)
		return -EINVAL;
	const char *f[5]; /* field starts: name, state, created, channel label, generation label */
	const char *e[5]; /* field ends */
	(void)tab_fields(line, 5, f, e); /* the name decides; a field missing reads as "?" */
	size_t name_len = (size_t)(e[0] - f[0]);
	if (name_len != RUNNERD_CONTAINER_NAME_LEN)
		return -EINVAL;
	char name[RUNNERD_CONTAINER_NAME_LEN + 1];
	memcpy(name, f[0], name_len);
	name[name_len] = '\0';
	if (!runnerd_stale_name_ok(installation_id, name))
		return -EINVAL;

	memcpy(out->name, name, sizeof(name));
	copy_field(f[1], e[1], state_char, out->state, sizeof(out->state));
	copy_field(f[2], e[2], created_char, out->created, sizeof(out->created));
	if (e[3] - f[3] == 2 && memcmp(f[3], "\"\"", 2) == 0)
		snprintf(out->channel_hash, sizeof(out->channel_hash), "-");
	else if (!quoted_hex(f[3], e[3], RTS_HASH_HEX_LEN, out->channel_hash))
		snprintf(out->channel_hash, sizeof(out->channel_hash), "?");
	return 0;
}

/* The name glibc gives signal n ("SEGV"), or "?" for a number it does not know. */
static const char *signal_name(int n)
{
	const char *name = n > 0 && n < NSIG ? sigabbrev_np(n) : NULL;
	return name ? name : "?";
}

void runnerd_docker_exit_text(bool exited, int status, char *out, size_t outlen)
{
	/* docker run's statuses (docker-run(1), "Exit Status"). */
	if (!exited)
		snprintf(out, outlen, "the docker CLI died of signal %d (SIG%s)", status, signal_name(status));
	else if (status == 125)
		snprintf(out, outlen, "docker could not run the container (status 125)");
	else if (status == 126)
		snprintf(out, outlen, "the image's command could not be started (status 126)");
	else if (status == 127)
		snprintf(out, outlen, "the image's command was not found (status 127)");
	else if (status > 128 && status < 128 + NSIG)
		snprintf(out, outlen, "the container's process was ended by signal %d (SIG%s; status %d)", status - 128,
			 signal_name(status - 128), status);
	else
		snprintf(out, outlen, "the container exited with status %d", status);
}

/* ---- rich channels ---- */

char *runnerd_rich_name(const char *installation_id, const char *channel_hash)
{
	if (!rts_hex_valid(installation_id, RTS_INSTALLATION_ID_LEN) || !rts_hex_valid(channel_hash, RTS_HASH_HEX_LEN))
		return NULL;
	return rts_xasprintf(RTS_CONTAINER_PREFIX "%s-rich-%.*s", installation_id, (int)RUNNERD_RICH_PREFIX_LEN,
			     channel_hash);
}

bool runnerd_rich_name_ok(const char *installation_id, const char *name)
{
	if (!rts_hex_valid(installation_id, RTS_INSTALLATION_ID_LEN) || !name || strlen(name) != RUNNERD_RICH_NAME_LEN)
		return false;
	size_t plen = strlen(RTS_CONTAINER_PREFIX);
	if (strncmp(name, RTS_CONTAINER_PREFIX, plen) != 0)
		return false;
	name += plen;
	if (strncmp(name, installation_id, RTS_INSTALLATION_ID_LEN) != 0)
		return false;
	name += RTS_INSTALLATION_ID_LEN;
	if (strncmp(name, "-rich-", 6) != 0)
		return false;
	return rts_hex_valid(name + 6, RUNNERD_RICH_PREFIX_LEN);
}

/* A log option goes into one argument NAME=VALUE: the config allows [a-z0-9._-] names and
 * printable ASCII values; checked again here. */
static bool log_option_ok(const struct rts_rich_log_option *o)
{
	if (!o->name || !o->value || !o->name[0] || strlen(o->name) > RTS_RICH_LOG_NAME_MAX ||
	    strlen(o->value) > RTS_RICH_LOG_VALUE_MAX)
		return false;
	for (const char *c = o->name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
			return false;
	for (const char *c = o->value; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			return false;
	return true;
}

/* Docker's log drivers that take a "tag" option. */
static bool driver_takes_tag(const char *driver)
{
	static const char *const tagged[] = {"journald", "syslog", "fluentd", "gelf", "splunk", "awslogs"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(tagged); i++)
		if (strcmp(driver, tagged[i]) == 0)
			return true;
	return false;
}

char **runnerd_docker_rich_argv(const struct runnerd_rich_spec *s)
{
	char cpus[16];
	if (!s || !s->docker || s->docker[0] != '/' || !rts_hex_valid(s->installation_id, RTS_INSTALLATION_ID_LEN) ||
	    !rts_hex_valid(s->channel_hash, RTS_HASH_HEX_LEN) || !s->profile || !rts_name_valid(s->profile, RTS_NAME_MAX) ||
	    !rts_hex_valid(s->generation, RUNNERD_GENERATION_LEN) || s->uid == 0 || s->gid == 0 ||
	    !mount_path_ok(s->workspace) || !mount_path_ok(s->broker_dir) || !rts_image_ref_ok(s->image) ||
	    s->limits.memory_mb < RTS_RICH_MEMORY_MB_MIN || s->limits.memory_mb > RTS_MEMORY_MB_MAX ||
	    s->limits.pids < RTS_RICH_PIDS_MIN || s->limits.pids > RTS_PIDS_MAX || s->limits.cpus < RTS_RICH_CPUS_MIN ||
	    s->tmp_mb < RTS_RICH_TMP_MB_MIN ||
	    s->tmp_mb > RTS_RICH_TMP_MB_MAX || runnerd_format_cpus(s->limits.cpus, cpus, sizeof(cpus)) < 0 ||
	    !s->log_driver || !s->log_driver[0] || s->log_driver[0] == '-' || !s->time_zone || !s->time_zone[0] ||
	    strlen(s->time_zone) > RTS_TIME_ZONE_MAX || s->n_log_options > RTS_RICH_LOG_OPTIONS_MAX)
		return NULL;
	for (const char *c = s->time_zone; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return NULL;
	bool operator_tag = false;
	for (size_t i = 0; i < s->n_log_options; i++) {
		if (!log_option_ok(&s->log_options[i]))
			return NULL;
		operator_tag |= strcmp(s->log_options[i].name, "tag") == 0;
	}

	size_t cap = 64 + 2 * s->n_log_options;
	char **v = rts_xcalloc(cap + 1, sizeof(char *));
	size_t n = 0;
	v[n++] = rts_xstrdup(s->docker);
	v[n++] = rts_xstrdup("run");
	v[n++] = rts_xstrdup("-d");
	v[n++] = rts_xstrdup("--name");
	v[n++] = runnerd_rich_name(s->installation_id, s->channel_hash);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RTS_LABEL_INSTALLATION, s->installation_id);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RTS_LABEL_CHANNEL, s->channel_hash);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xstrdup(RUNNERD_LABEL_KIND "=rich");
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RUNNERD_LABEL_PROFILE, s->profile);
	v[n++] = rts_xstrdup("--label");
	v[n++] = rts_xasprintf("%s=%s", RUNNERD_LABEL_GENERATION, s->generation);
	push_confinement(v, &n, s->uid, s->gid, &s->limits, cpus);
	v[n++] = rts_xstrdup("--tmpfs");
	v[n++] = rts_xasprintf("/tmp:rw,nosuid,nodev,size=%um", s->tmp_mb);
	/* The worker's logs outlive the container (seed: journald tagged sandbox/<channel>). */
	v[n++] = rts_xstrdup("--log-driver");
	v[n++] = rts_xstrdup(s->log_driver);
	if (driver_takes_tag(s->log_driver) && !operator_tag) {
		v[n++] = rts_xstrdup("--log-opt");
		v[n++] = rts_xasprintf("tag=sandbox/%.*s", (int)RUNNERD_RICH_PREFIX_LEN, s->channel_hash);
	}
	for (size_t i = 0; i < s->n_log_options; i++) {
		v[n++] = rts_xstrdup("--log-opt");
		v[n++] = rts_xasprintf("%s=%s", s->log_options[i].name, s->log_options[i].value);
	}
	v[n++] = rts_xstrdup("--pull");
	v[n++] = rts_xstrdup("never");
	/* The worker formats local time itself (Pi's system prompt); nothing else of the
	 * host's environment goes in. */
	v[n++] = rts_xstrdup("--env");
	v[n++] = rts_xasprintf("TZ=%s", s->time_zone);
	v[n++] = rts_xstrdup("--mount");
	v[n++] = rts_xasprintf("type=bind,source=%s,target=/workspace", s->workspace);
	v[n++] = rts_xstrdup("--mount");
	v[n++] = rts_xasprintf("type=bind,source=%s,target=/run/broker,readonly", s->broker_dir);
	v[n++] = rts_xstrdup(s->image);
	v[n] = NULL;
	return v;
}

static json_object *names_json(char **names, size_t n)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(names[i]));
	return a;
}

void runnerd_rich_generation(const struct rts_config *cfg, const struct rts_rich_profile *p, const char *image_id,
			     uid_t uid, gid_t gid, char out[RUNNERD_GENERATION_LEN + 1])
{
	const struct rts_rich_conf *r = &cfg->rich;
	cleanup_json json_object *o = json_object_new_object();
	json_object *prof = json_object_new_object();
	json_object_object_add(prof, "name", json_object_new_string(p->name));
	json_object_object_add(prof, "model", json_object_new_string(p->model));
	json_object_object_add(prof, "prompt", p->prompt ? json_object_new_string(p->prompt) : NULL);
	json_object_object_add(prof, "mcp", names_json(p->mcp, p->n_mcp));
	json_object_object_add(prof, "tools", names_json(p->tools, p->n_tools));
	json_object_object_add(o, "profile", prof);
	json_object *lim = json_object_new_object();
	json_object_object_add(lim, "memoryMb", json_object_new_int64(r->limits.memory_mb));
	json_object_object_add(lim, "cpus", json_object_new_double(r->limits.cpus));
	json_object_object_add(lim, "pids", json_object_new_int64(r->limits.pids));
	json_object_object_add(lim, "tmpMb", json_object_new_int64(r->tmp_mb));
	json_object_object_add(o, "limits", lim);
	json_object *log = json_object_new_object();
	json_object_object_add(log, "driver", json_object_new_string(r->log_driver));
	json_object *opts = json_object_new_array();
	for (size_t i = 0; i < r->n_log_options; i++) {
		json_object_array_add(opts, json_object_new_string(r->log_options[i].name));
		json_object_array_add(opts, json_object_new_string(r->log_options[i].value));
	}
	json_object_object_add(log, "options", opts);
	json_object_object_add(o, "log", log);
	json_object_object_add(o, "timeZone", json_object_new_string(r->time_zone));
	json_object_object_add(o, "maxOutputTokens", json_object_new_int64(r->max_output_tokens));
	char user[48];
	snprintf(user, sizeof(user), "%lu:%lu", (unsigned long)uid, (unsigned long)gid);
	json_object_object_add(o, "user", json_object_new_string(user));
	json_object_object_add(o, "imageId", json_object_new_string(image_id));
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	char hex[RTS_HASH_HEX_LEN + 1];
	rts_sha256_hex(text, strlen(text), hex);
	memcpy(out, hex, RUNNERD_GENERATION_LEN);
	out[RUNNERD_GENERATION_LEN] = '\0';
}

int runnerd_parse_rich_line(const char *installation_id, const char *line, struct runnerd_rich_found *out)
{
	if (!line)
		return -EINVAL;
	const char *f[5], *e[5];
	/* Exactly five fields: one more is not our format. */
	if (tab_fields(line, 5, f, e) != 5 || memchr(f[4], '\t', (size_t)(e[4] - f[4])))
		return -EINVAL;
	size_t name_len = (size_t)(e[0] - f[0]);
	if (name_len != RUNNERD_RICH_NAME_LEN)
		return -EINVAL;
	memcpy(out->name, f[0], name_len);
	out->name[name_len] = '\0';
	if (!runnerd_rich_name_ok(installation_id, out->name))
		return -EINVAL;
	/* The label names the channel; the name's prefix must be that hash's. */
	if (!quoted_hex(f[3], e[3], RTS_HASH_HEX_LEN, out->channel_hash) ||
	    memcmp(out->channel_hash, out->name + name_len - RUNNERD_RICH_PREFIX_LEN, RUNNERD_RICH_PREFIX_LEN) != 0)
		return -EINVAL;
	if (!quoted_hex(f[4], e[4], RUNNERD_GENERATION_LEN, out->generation))
		out->generation[0] = '\0';
	out->running = (size_t)(e[1] - f[1]) == 7 && memcmp(f[1], "running", 7) == 0;
	return 0;
}

char **runnerd_docker_logs_argv(const char *docker, const char *name, unsigned lines)
{
	if (!docker || docker[0] != '/' || !our_name(name) || lines == 0)
		return NULL;
	char **v = rts_xcalloc(6, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("logs");
	v[2] = rts_xstrdup("--tail");
	v[3] = rts_xasprintf("%u", lines);
	v[4] = rts_xstrdup(name);
	return v;
}
