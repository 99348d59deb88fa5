/* SPDX-License-Identifier: Apache-2.0 */
/* The docker command lines runnerd executes, built by pure functions so that the exact
 * container sandbox (DESIGN.md section 4) is unit-tested element by element
 * (tests/unit/check_docker_args.c). Nothing here touches the system. */
#ifndef RUNNERD_DOCKER_ARGS_H
#define RUNNERD_DOCKER_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"
#include "common/ids.h"
#include "common/proto.h"

/* What a container runs: a guest turn, or a precheck script (DESIGN.md 8.3). */
enum runnerd_run_kind {
	RUNNERD_RUN_TURN = 0,	  /* --tmpfs size=16m, the workspace read-write */
	RUNNERD_RUN_PRECHECK = 1, /* --tmpfs size=64m, an empty workspace read-only */
};

/* Everything one `docker run` depends on. All strings are borrowed. */
struct runnerd_run_spec {
	enum runnerd_run_kind kind;
	const char *docker;	     /* absolute path of the docker CLI (RTS_DOCKER) */
	const char *installation_id; /* 12 lowercase hex digits (rts_installation_id) */
	const char *turn_id;	     /* 16 lowercase hex digits */
	const char *channel_hash;    /* 64 lowercase hex digits */
	uid_t uid;		     /* the service account: the container runs as it */
	gid_t gid;
	struct rts_limits limits;    /* memory in MiB, cpus, pids (config "limits") */
	const char *workspace;	     /* <workspaceRoot>/<channel_hash>, bound rw at /workspace (a
				      * precheck: its empty <dir>/workspace, bound ro) */
	const char *run_dir;	     /* <runRoot>/<turn_id>, bound ro at /run/broker (a precheck:
				      * <dir>/broker) */
	const char *image;	     /* the operator-built image (config "image") */
};

/* The complete `docker run` argv for one turn, exactly DESIGN.md section 4:
 *   docker run -i --rm --name roundtable-sandbox-<installation>-<turn>
 *   --label io.roundtable-sandbox.installation=<installation>
 *   --label io.roundtable-sandbox.channel=<channel hash>
 *   --network none --read-only --cap-drop ALL --security-opt no-new-privileges
 *   --user UID:GID --memory <MiB>m --memory-swap <MiB>m --cpus <cpus> --pids-limit <pids>
 *   --tmpfs /tmp:rw,nosuid,nodev,size=16m --log-driver none --pull never
 *   --mount type=bind,source=<workspace>,target=/workspace
 *   --mount type=bind,source=<run dir>,target=/run/broker,readonly <image>
 * Memory and swap are equal (seed: "no additional swap"); no --env at all (the worker needs
 * none; seed: no host environment in the container). A precheck (RUNNERD_RUN_PRECHECK)
 * gets the same list with "--tmpfs /tmp:rw,nosuid,nodev,size=64m" and ",readonly" on the
 * workspace bind (seed: "the workspace is mounted read-only, so a script writes only to
 * the container's 64 MiB /tmp"); its limits are the config's precheck.limits. Returns a NULL-terminated heap argv
 * (free with rts_strv_free), or NULL when the spec is invalid: an id of the wrong shape, a
 * path that is not absolute or contains a character outside [A-Za-z0-9/._+@~-] (a comma
 * would inject --mount options), a uid or gid of 0 (seed: root workers are refused), an
 * image that is empty or starts with '-', or limits out of the config's ranges. */
char **runnerd_docker_run_argv(const struct runnerd_run_spec *spec);

/* `docker rm -f <name>` for the exact container name (rts_container_name). NULL when name
 * is not a roundtable-sandbox container name of the shape
 * roundtable-sandbox-<12 hex>-<16 hex>. Free with rts_strv_free. */
char **runnerd_docker_rm_argv(const char *docker, const char *name);

/* `docker ps -a --filter label=io.roundtable-sandbox.installation=<id> --format FORMAT`:
 * the containers of this installation only, one line each, FORMAT being
 *   {{.Names}}<TAB>{{.State}}<TAB>{{.CreatedAt}}<TAB>{{json (.Label "io.roundtable-sandbox.channel")}}
 * (the label last and JSON-quoted, so no label value can add a field or a line; see
 * runnerd_parse_stale_line). NULL when installation_id is not 12 hex digits. Free with
 * rts_strv_free. */
char **runnerd_docker_ps_argv(const char *docker, const char *installation_id);

/* roundtable-sandbox-<12 hex>-<16 hex> */
#define RUNNERD_CONTAINER_NAME_LEN \
	(sizeof(RTS_CONTAINER_PREFIX) - 1 + RTS_INSTALLATION_ID_LEN + 1 + RTS_TURN_ID_LEN)
#define RUNNERD_STALE_STATE_MAX 16u
#define RUNNERD_STALE_CREATED_MAX 47u

/* What start-up clean-up logs about a stale container before removing it (seed: the
 * operator inspects what a crash left behind). Fields docker printed in an unexpected
 * shape are "?", a container without a channel label has channel_hash "-". */
struct runnerd_stale {
	char name[RUNNERD_CONTAINER_NAME_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];	   /* the io.roundtable-sandbox.channel label */
	char state[RUNNERD_STALE_STATE_MAX + 1];	   /* docker's word: created, running, exited... */
	char created[RUNNERD_STALE_CREATED_MAX + 1];	   /* docker's CreatedAt text */
};

/* Parse one line (without its newline) of the runnerd_docker_ps_argv listing. Returns 0
 * and fills *out when the line's first field is a name runnerd_stale_name_ok accepts (the
 * only containers clean-up removes, whatever the other fields hold); -EINVAL for any other
 * line, which must be left alone. */
int runnerd_parse_stale_line(const char *installation_id, const char *line, struct runnerd_stale *out);

/* `docker info --format {{.DockerRootDir}}`: Docker's data root, for the start-up check
 * that no root lies inside it (seed: Docker rejects private propagation for bind sources
 * there). NULL when docker is not an absolute path. Free with rts_strv_free. */
char **runnerd_docker_info_argv(const char *docker);

/* `docker image inspect --format {{.Id}} <image>`: does the image exist locally (turns run
 * with --pull never). NULL when docker is not absolute or image is not of the shape
 * runnerd_docker_run_argv accepts. Free with rts_strv_free. */
char **runnerd_docker_image_inspect_argv(const char *docker, const char *image);

/* Parse what runnerd_docker_info_argv printed: one absolute path and a newline. Copies the
 * path into out (outlen bytes). Returns 0, or -EINVAL for anything else (empty, relative,
 * several lines, too long, control characters). */
int runnerd_parse_data_root(const char *out, size_t len, char *path, size_t pathlen);

/* True when name (one line of the listing above, without its newline) is exactly
 * roundtable-sandbox-<installation_id>-<16 hex digits>: the only names start-up clean-up
 * removes (seed: remove only stale containers prefixed roundtable-sandbox- that belong to
 * this installation). */
bool runnerd_stale_name_ok(const char *installation_id, const char *name);

/* The --cpus value for a configured limits.cpus on a host where Docker may use host_cpus
 * CPUs: cpus itself, or host_cpus when cpus asks for more. Docker refuses --cpus above the
 * CPUs it has ("Range of CPUs is from 0.01 to N"), and a limit above them limits nothing,
 * so lowering it keeps the operator's meaning and every turn running. host_cpus 0
 * (unknown) keeps cpus. */
double runnerd_cpus_for_host(double cpus, unsigned host_cpus);

/* Format cpus (RTS_CPUS_MIN..RTS_CPUS_MAX) without the locale: at most three decimals,
 * trailing zeros dropped ("1", "0.5", "1.25"). out must hold at least 16 bytes. Returns 0, or -EINVAL when
 * cpus is out of range. */
int runnerd_format_cpus(double cpus, char *out, size_t outlen);

#endif
