/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <math.h>

#include "common/ids.h"
#include "common/proto.h"
#include "common/util.h"
#include "runnerd/docker_args.h"

static bool hex_of_len(const char *s, size_t len)
{
	size_t i;
	if (!s)
		return false;
	for (i = 0; s[i]; i++)
		if (i >= len || !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == len;
}

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

char **runnerd_docker_run_argv(const struct runnerd_run_spec *s)
{
	char cpus[16];
	if (!s || !s->docker || s->docker[0] != '/' || !hex_of_len(s->installation_id, RTS_INSTALLATION_ID_LEN) ||
	    !s->turn_id || !rts_turn_id_valid(s->turn_id) || !hex_of_len(s->channel_hash, RTS_HASH_HEX_LEN) ||
	    s->uid == 0 || s->gid == 0 || !mount_path_ok(s->workspace) || !mount_path_ok(s->run_dir) ||
	    !rts_image_ref_ok(s->image) || s->limits.memory_mb < RTS_MEMORY_MB_MIN ||
	    s->limits.memory_mb > RTS_MEMORY_MB_MAX || s->limits.pids < RTS_PIDS_MIN || s->limits.pids > RTS_PIDS_MAX ||
	    runnerd_format_cpus(s->limits.cpus, cpus, sizeof(cpus)) < 0 ||
	    (s->kind != RUNNERD_RUN_TURN && s->kind != RUNNERD_RUN_PRECHECK))
		return NULL;
	bool precheck = s->kind == RUNNERD_RUN_PRECHECK;

	/* Attach stdin and stdout only: the container's stderr is guest-written text and must
	 * never reach the host log; what remains on the CLI's stderr is the CLI's own. */
	const char *fixed_head[] = {"run", "-i", "--attach", "stdin", "--attach", "stdout", "--rm"};
	const char *fixed_sandbox[] = {"--network",	"none", "--read-only", "--cap-drop",
				       "ALL",		"--security-opt", "no-new-privileges"};
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
	for (size_t i = 0; i < RTS_ARRAY_SIZE(fixed_sandbox); i++)
		v[n++] = rts_xstrdup(fixed_sandbox[i]);
	/* Numeric so no passwd lookup happens in the image (there is none in FROM scratch). */
	v[n++] = rts_xstrdup("--user");
	v[n++] = rts_xasprintf("%lu:%lu", (unsigned long)s->uid, (unsigned long)s->gid);
	v[n++] = rts_xstrdup("--memory");
	v[n++] = rts_xasprintf("%um", s->limits.memory_mb);
	/* Equal to --memory: no swap on top of the memory limit. */
	v[n++] = rts_xstrdup("--memory-swap");
	v[n++] = rts_xasprintf("%um", s->limits.memory_mb);
	v[n++] = rts_xstrdup("--cpus");
	v[n++] = rts_xstrdup(cpus);
	v[n++] = rts_xstrdup("--pids-limit");
	v[n++] = rts_xasprintf("%u", s->limits.pids);
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
	if (!hex_of_len(installation_id, RTS_INSTALLATION_ID_LEN) || !name)
		return false;
	size_t plen = strlen(RTS_CONTAINER_PREFIX);
	if (strncmp(name, RTS_CONTAINER_PREFIX, plen) != 0)
		return false;
	name += plen;
	if (strncmp(name, installation_id, RTS_INSTALLATION_ID_LEN) != 0 || name[RTS_INSTALLATION_ID_LEN] != '-')
		return false;
	return rts_turn_id_valid(name + RTS_INSTALLATION_ID_LEN + 1);
}

char **runnerd_docker_rm_argv(const char *docker, const char *name)
{
	if (!docker || docker[0] != '/' || !name)
		return NULL;
	/* The installation id is the part between the prefix and the turn id. */
	size_t plen = strlen(RTS_CONTAINER_PREFIX);
	if (strlen(name) != plen + RTS_INSTALLATION_ID_LEN + 1 + RTS_TURN_ID_LEN)
		return NULL;
	char inst[RTS_INSTALLATION_ID_LEN + 1];
	memcpy(inst, name + plen, RTS_INSTALLATION_ID_LEN);
	inst[RTS_INSTALLATION_ID_LEN] = '\0';
	if (!runnerd_stale_name_ok(inst, name))
		return NULL;
	char **v = rts_xcalloc(5, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("rm");
	v[2] = rts_xstrdup("-f");
	v[3] = rts_xstrdup(name);
	return v;
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
	if (!docker || docker[0] != '/' || !hex_of_len(installation_id, RTS_INSTALLATION_ID_LEN))
		return NULL;
	char **v = rts_xcalloc(8, sizeof(char *));
	v[0] = rts_xstrdup(docker);
	v[1] = rts_xstrdup("ps");
	v[2] = rts_xstrdup("-a");
	v[3] = rts_xstrdup("--filter");
	v[4] = rts_xasprintf("label=%s=%s", RTS_LABEL_INSTALLATION, installation_id);
	v[5] = rts_xstrdup("--format");
	v[6] = rts_xstrdup("{{.Names}}\t{{.State}}\t{{.CreatedAt}}\t{{json (.Label \"" RTS_LABEL_CHANNEL "\")}}");
	return v;
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
	const char *end = line + strlen(line);
	const char *f[4]; /* field starts: name, state, created, label */
	const char *e[4]; /* field ends */
	const char *p = line;
	for (size_t i = 0; i < 4; i++) {
		f[i] = p;
		/* The label is last: its JSON text runs to the end of the line. */
		const char *tab = i < 3 ? memchr(p, '\t', (size_t)(end - p)) : NULL;
		e[i] = tab ? tab : end;
		p = tab ? tab + 1 : end;
	}
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
	size_t label_len = (size_t)(e[3] - f[3]);
	if (label_len == 2 && memcmp(f[3], "\"\"", 2) == 0) {
		snprintf(out->channel_hash, sizeof(out->channel_hash), "-");
	} else if (label_len == RTS_HASH_HEX_LEN + 2 && f[3][0] == '"' && f[3][label_len - 1] == '"') {
		char hash[RTS_HASH_HEX_LEN + 1];
		memcpy(hash, f[3] + 1, RTS_HASH_HEX_LEN);
		hash[RTS_HASH_HEX_LEN] = '\0';
		snprintf(out->channel_hash, sizeof(out->channel_hash), "%s",
			 hex_of_len(hash, RTS_HASH_HEX_LEN) ? hash : "?");
	} else {
		snprintf(out->channel_hash, sizeof(out->channel_hash), "?");
	}
	return 0;
}
