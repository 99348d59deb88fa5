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
	bool spare;		     /* a warm spare (runnerd/spare.h): adds
				      * --label io.roundtable-sandbox.spare=1 after the channel label */
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

/* How a `docker run` ended, in words for the host log (out: outlen bytes, always
 * NUL-terminated): "the docker CLI died of signal N (SIGX)" when it was signalled
 * (exited false, status the signal), else by docker run's own exit status: 125 docker
 * could not run the container, 126 or 127 its command could not be started or found,
 * 128+N its process was ended by signal N (SIGSEGV: a runtime crash, often one short of
 * processes; SIGKILL: the memory limit or a kill), any other its exit status. Nothing the
 * container wrote goes in. */
void runnerd_docker_exit_text(bool exited, int status, char *out, size_t outlen);

/* `docker rm -f <name>` for the exact container name (rts_container_name, or
 * runnerd_rich_name). NULL when name is not a roundtable-sandbox container name of the
 * shape roundtable-sandbox-<12 hex>-<16 hex> or roundtable-sandbox-<12 hex>-rich-<16 hex>.
 * Free with rts_strv_free. */
char **runnerd_docker_rm_argv(const char *docker, const char *name);

/* `docker ps -a --filter label=io.roundtable-sandbox.installation=<id> --format FORMAT`:
 * the containers of this installation only, one line each, FORMAT being
 *   {{.Names}}<TAB>{{.State}}<TAB>{{.CreatedAt}}<TAB>{{json (.Label "io.roundtable-sandbox.channel")}}
 *   <TAB>{{json (.Label "io.roundtable-sandbox.generation")}}
 * (the labels JSON-quoted, so no label value can add a field or a line). One listing
 * serves start-up twice: stale turn containers (runnerd_parse_stale_line) and rich ones
 * (runnerd_parse_rich_line). NULL when installation_id is not 12 hex digits. Free with
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

/* What one `docker rm -f` that ran (killed: we killed it; exited and status: how it ended;
 * err: its stderr, NUL-terminated) says about the container. "No such container" means it
 * is gone (the CLI says so with status 0 or 1 depending on its version); "already in
 * progress" means dockerd is removing it (--rm after the CLI was killed), which only a
 * later removal can confirm. */
enum runnerd_rm_outcome {
	RUNNERD_RM_GONE,
	RUNNERD_RM_IN_PROGRESS,
	RUNNERD_RM_FAILED,
};
enum runnerd_rm_outcome runnerd_docker_rm_outcome(bool killed, bool exited, int status, const char *err);

/* `docker container inspect --format {{.State.Running}} <name>`: is a warm spare's or a
 * rich channel's container up (it prints "true")? NULL as runnerd_docker_rm_argv for a name that is not
 * one of ours. Free with rts_strv_free. */
char **runnerd_docker_running_argv(const char *docker, const char *name);

/* `docker container inspect --format "{{.State.Running}} {{.Image}}" <name>`: a warm
 * spare's readiness check, which also tells the image ID its container runs (it prints
 * "true sha256:<hex>"). NULL as runnerd_docker_rm_argv for a name that is not one of ours.
 * Free with rts_strv_free. */
char **runnerd_docker_running_image_argv(const char *docker, const char *name);

/* `docker events --filter type=image --filter image=<image> --since <since> --until <until>
 * --format {{.Action}}`: one line per event that names image (a tag of it: a build, a
 * retag, a load or pull under that name), from since (seconds since the epoch, so events
 * of the moment before it started are replayed) to until, when it exits with status 0. What the lines say is never
 * read: any of them means "inspect the image again". Docker matches the name as given
 * (and without its tag), so a reference spelt another way than Docker prints it, or an
 * event that names only the image ID (untag, delete), is not reported: the periodic
 * inspect of runnerd/image_watch.h covers those. NULL when docker is not absolute, image
 * is not a reference runnerd_docker_image_inspect_argv accepts, since is negative or until
 * is not after since. Free with rts_strv_free. */
char **runnerd_docker_image_events_argv(const char *docker, const char *image, long long since, long long until);

/* Longest image ID kept ("sha256:" and 64 hex digits, or another algorithm's digest). */
#define RUNNERD_IMAGE_ID_MAX 255u

/* Parse what runnerd_docker_image_inspect_argv printed: one image ID of printable,
 * space-free ASCII and a newline. Copies it into id (RUNNERD_IMAGE_ID_MAX + 1 bytes).
 * Returns 0, or -EINVAL for anything else (empty, several lines, too long, spaces or
 * control characters). */
int runnerd_parse_image_id(const char *out, size_t len, char id[RUNNERD_IMAGE_ID_MAX + 1]);

/* Parse what runnerd_docker_running_image_argv printed. Returns 1 when the container runs
 * (id filled in as runnerd_parse_image_id does), 0 when it does not run ("false ..."), or
 * -EINVAL for anything else. */
int runnerd_parse_running_image(const char *out, size_t len, char id[RUNNERD_IMAGE_ID_MAX + 1]);

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

/* ---- rich channels (DESIGN.md 8.5; helpers' rich-design.md sections 1-2) ---- */

#define RUNNERD_LABEL_KIND "io.roundtable-sandbox.kind"
#define RUNNERD_LABEL_PROFILE "io.roundtable-sandbox.profile"
#define RUNNERD_LABEL_GENERATION "io.roundtable-sandbox.generation"
/* The first hex digits of a channel hash that name its container, its broker directory and
 * its log tag, and the generation's length. */
#define RUNNERD_RICH_PREFIX_LEN 16u
#define RUNNERD_GENERATION_LEN 16u
/* roundtable-sandbox-<12 hex>-rich-<16 hex> */
#define RUNNERD_RICH_NAME_LEN \
	(sizeof(RTS_CONTAINER_PREFIX) - 1 + RTS_INSTALLATION_ID_LEN + sizeof("-rich-") - 1 + RUNNERD_RICH_PREFIX_LEN)

/* The name of a rich channel's container: roundtable-sandbox-<installation>-rich-<first 16
 * hex of the channel hash> (heap), or NULL for ids of the wrong shape. */
char *runnerd_rich_name(const char *installation_id, const char *channel_hash);
/* True when name is exactly such a name of this installation. */
bool runnerd_rich_name_ok(const char *installation_id, const char *name);

/* Everything the docker run of a rich channel's container depends on. Borrowed. */
struct runnerd_rich_spec {
	const char *docker;
	const char *installation_id;
	const char *channel_hash;
	const char *profile;	/* a profile name */
	const char *generation; /* RUNNERD_GENERATION_LEN hex digits (runnerd_rich_generation) */
	uid_t uid;
	gid_t gid;
	struct rts_limits limits; /* rich.limits, at least RTS_RICH_*_MIN (the Pi worker's bottoms) */
	uint32_t tmp_mb;	  /* rich.limits.tmpMb */
	const char *log_driver;	  /* rich.log.driver */
	const struct rts_rich_log_option *log_options;
	size_t n_log_options;
	const char *time_zone;	/* rich.timeZone: the container's TZ */
	const char *workspace;	/* <workspaceRoot>/<channel_hash>, bound rw at /workspace */
	const char *broker_dir; /* <runRoot>/rich-<prefix>, bound ro at /run/broker */
	const char *image;	/* rich.image */
};

/* The docker run of a rich channel's long-lived container (seed, "Pi isolation and
 * continuity"):
 *   docker run -d --name roundtable-sandbox-<installation>-rich-<prefix>
 *   --label io.roundtable-sandbox.installation=<installation>
 *   --label io.roundtable-sandbox.channel=<channel hash>
 *   --label io.roundtable-sandbox.kind=rich --label io.roundtable-sandbox.profile=<profile>
 *   --label io.roundtable-sandbox.generation=<generation>
 *   --network none --read-only --cap-drop ALL --security-opt no-new-privileges
 *   --user UID:GID --memory <MiB>m --memory-swap <MiB>m --cpus <cpus> --pids-limit <pids>
 *   --tmpfs /tmp:rw,nosuid,nodev,size=<tmpMb>m
 *   --log-driver <driver> [--log-opt tag=sandbox/<prefix>] [--log-opt NAME=VALUE]...
 *   --pull never --env TZ=<timeZone>
 *   --mount type=bind,source=<workspace>,target=/workspace
 *   --mount type=bind,source=<broker dir>,target=/run/broker,readonly <image>
 * Detached and without --rm: the container outlives runnerd, and its logs stay readable
 * until runnerd removes it. The tag is the channel hash's prefix, never the channel key
 * (a bot's, possibly a guest's, choice), and is added only for drivers that take one
 * (journald, syslog, fluentd, gelf, splunk, awslogs) when the operator's options do not
 * name a tag. Returns a heap argv (rts_strv_free) or NULL for an invalid spec (the checks
 * of runnerd_docker_run_argv, limits below the Pi worker's bottoms RTS_RICH_MEMORY_MB_MIN,
 * RTS_RICH_CPUS_MIN and RTS_RICH_PIDS_MIN, a profile or generation of the wrong shape, log
 * options that are not NAME=printable ASCII, a tmp size of 0). */
char **runnerd_docker_rich_argv(const struct runnerd_rich_spec *spec);

/* The generation of a rich container (rich-design.md section 1): the first
 * RUNNERD_GENERATION_LEN hex digits of the sha256 of a JSON text of what it was made from:
 * the profile as configured (name, model, prompt, MCP servers, host tools), the rich
 * limits, /tmp size, log driver and options, time zone and output limit, the user and the
 * image ID. Any change in these makes a container stale. out: 17 bytes. */
void runnerd_rich_generation(const struct rts_config *cfg, const struct rts_rich_profile *profile,
			     const char *image_id, uid_t uid, gid_t gid, char out[RUNNERD_GENERATION_LEN + 1]);

/* A rich container found at start-up. */
struct runnerd_rich_found {
	char name[RUNNERD_RICH_NAME_LEN + 1];
	char channel_hash[RTS_HASH_HEX_LEN + 1];
	char generation[RUNNERD_GENERATION_LEN + 1]; /* "" when its label is missing or malformed */
	bool running;
	/* Not from the listing: runRoot has no rich-<prefix>/ for it (runRoot was made anew,
	 * as systemd does when it removes a RuntimeDirectory=), so the container's
	 * /run/broker is a directory nothing can reach again: it cannot be adopted. */
	bool dir_gone;
};

/* Parse one line of the runnerd_docker_ps_argv listing. 0 for a rich container of ours: a
 * rich name of this installation whose channel label is a hash with that prefix (only rich
 * containers have such names); -EINVAL for any other line (left alone). */
int runnerd_parse_rich_line(const char *installation_id, const char *line, struct runnerd_rich_found *out);

/* `docker logs --tail <lines> <name>` for an exact container name of ours (sealed or
 * rich). NULL otherwise. */
char **runnerd_docker_logs_argv(const char *docker, const char *name, unsigned lines);

#endif
