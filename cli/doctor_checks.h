/* SPDX-License-Identifier: Apache-2.0 */
/* doctor's checks, one file per kind (cli/doctor.c lists them and why), and what they
 * share: the verdict lines, and who the service account is and what it may do. */
#ifndef CLI_DOCTOR_CHECKS_H
#define CLI_DOCTOR_CHECKS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/conf.h"
#include "common/daemon.h"

/* What the shipped systemd units and sysusers.d file use: the make variables they are
 * generated from (systemd/Makemodule.am), passed in by cli/Makemodule.am. */
#ifndef RTS_SERVICE_USER
#define RTS_SERVICE_USER "roundtable-sandbox"
#endif
/* The accounts of accounts mode the package creates and its units run the daemons as. */
#ifndef RTS_BROKER_USER
#define RTS_BROKER_USER "roundtable-sandbox-broker"
#endif
#ifndef RTS_RUNNER_USER
#define RTS_RUNNER_USER "roundtable-sandbox-runner"
#endif
#ifndef RTS_GUEST_USER
#define RTS_GUEST_USER "roundtable-sandbox-guest"
#endif
#ifndef RTS_DOCKER_GROUP
#define RTS_DOCKER_GROUP "docker"
#endif
#ifndef RTS_UNIT_RUNTIME_DIR
#define RTS_UNIT_RUNTIME_DIR "/run/roundtable-sandbox"
#endif
#ifndef RTS_UNIT_STATE_DIR
#define RTS_UNIT_STATE_DIR "/var/lib/roundtable-sandbox"
#endif
#ifndef RTS_UNIT_KEY_FILE
#define RTS_UNIT_KEY_FILE RTS_SYSCONFDIR "/roundtable-sandbox/model-api-key"
#endif
#ifndef RTS_UNIT_KEY_CREDENTIAL
#define RTS_UNIT_KEY_CREDENTIAL "model-api-key"
#endif

enum doctor_verdict {
	DOCTOR_OK,
	DOCTOR_WARN,
	DOCTOR_FAIL,
};

struct doctor {
	const struct rts_opts *opts;
	const struct rts_config *cfg; /* NULL when the config did not load */
	bool have_account;
	/* The account whose view a check takes (what it may read, write, pass through, own):
	 * the service account's, or for what another daemon keeps, that daemon's
	 * (doctor_view_as()). */
	uid_t uid;
	gid_t gid;
	uid_t svc_uid; /* the service account (statd's; every daemon's in single-account mode) */
	gid_t svc_gid;
	/* Accounts mode (the config has "accounts"; DESIGN.md 8.1). */
	bool accounts;
	uid_t broker_uid, runner_uid, guest_uid;
	gid_t broker_gid, runner_gid, guest_gid;
	bool ancestors_fail_only; /* doctor_check_ancestors(): no warning (said once already) */
	unsigned n[3];
};

/* Take the view of uid/gid for the following checks (doctor_view_as(d, d->svc_uid,
 * d->svc_gid) goes back). */
void doctor_view_as(struct doctor *d, uid_t uid, gid_t gid);

/* The account that owns and uses what daemon ("statd", "runnerd", "brokerd") keeps. */
void doctor_daemon_account(const struct doctor *d, const char *daemon, uid_t *uid, gid_t *gid);

/* ---- doctor.c ---- */

/* Print one verdict line "ok|warn|FAIL: CHECK: message" (control characters of text that
 * came from outside replaced, so it stays one line) and count it. */
__attribute__((format(printf, 4, 5))) void doctor_report(struct doctor *d, enum doctor_verdict v, const char *check,
							  const char *fmt, ...);

/* The directory part of path, newly allocated. */
char *doctor_dir_of(const char *path);

/* root, or the service account (its primary group). */
bool doctor_uid_trusted(const struct doctor *d, uid_t uid);
bool doctor_gid_trusted(const struct doctor *d, gid_t gid);

/* The ACL rule of what only some accounts may reach: FAIL (and false) when the access ACL
 * of path has a named entry granting anything (with write_only: write) to an account
 * other than root and the n uids of ok, or to a group doctor_gid_trusted() does not
 * trust; the message says what that account could then do (risk, "who could ...") and
 * names the setfacl -x that removes the entry. True when there is none. */
bool doctor_acl_only(struct doctor *d, const char *check, const char *path, const uid_t *ok, size_t n, bool write_only,
		     const char *risk);

/* strerror(e), or how to get past a permission error. */
const char *doctor_cannot(int e);

/* The permission bits (07: read, write, search) the service account gets on a file with
 * this owner and mode; doctor_account_can_read() is the read bit of that. */
unsigned doctor_account_perm(const struct doctor *d, const struct stat *st);
/* doctor_account_perm() for the file at path, its ACL entries included. */
unsigned doctor_account_perm_at(const struct doctor *d, const char *path, const struct stat *st);
bool doctor_account_can_read(const struct doctor *d, const struct stat *st);

/* "uid 1000 (alice)" / "gid 50 (staff)", or without the name when there is none. */
void doctor_name_uid(uid_t uid, char *buf, size_t len);
void doctor_name_gid(gid_t gid, char *buf, size_t len);

/* Who besides root and the service account may change a file with this owner and mode,
 * in words for a message, written to buf; NULL when nobody may. In accounts mode, for
 * what the daemons read (the config, brokerd's programs), root alone is trusted: the
 * service account changing them would change what brokerd runs. */
const char *doctor_other_writer(const struct doctor *d, const struct stat *st, char *buf, size_t len);
const char *doctor_writer_besides_root(const struct doctor *d, const struct stat *st, char *buf, size_t len);

void doctor_check_account(struct doctor *d);
/* Accounts mode: the four accounts apart, only the runner account with Docker, the config
 * naming the accounts the shipped units run as. Single-account mode: a warning. */
void doctor_check_accounts(struct doctor *d);
/* The config with the daemons' own loader; NULL (after a FAIL line) when it does not load. */
struct rts_config *doctor_check_config(struct doctor *d, const char *path);

/* ---- doctor_paths.c: the roots, the state file, where they lie ---- */

/* The existing ancestors of path (not path itself): the service account must pass through
 * each, and nobody else may swap path away. Prints at most one line (the first FAIL, else
 * the first warning) and returns its verdict, DOCTOR_OK when it printed none. When nearest
 * is not NULL, *nearest gets the deepest existing ancestor (caller frees; NULL when not even
 * "/" could be examined) and *nearest_st its stat(). */
enum doctor_verdict doctor_check_ancestors(struct doctor *d, const char *check, const char *path, char **nearest,
					   struct stat *nearest_st);

void doctor_check_private_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir);
void doctor_check_state_file(struct doctor *d, const char *path);
/* Accounts mode: every channel's workspace shared with the guest account as statd shares
 * it, and its contents the guest's. */
void doctor_check_workspaces(struct doctor *d);
void doctor_check_layout(struct doctor *d);
void doctor_check_path_lengths(struct doctor *d);
void doctor_check_unit_paths(struct doctor *d);

/* ---- doctor_inputs.c: what the daemons read and run ---- */

void doctor_check_config_file(struct doctor *d, const char *path);
void doctor_check_time_zone(struct doctor *d);
void doctor_check_brokerd_inputs(struct doctor *d);
/* Rich mode (config "rich"): the OAuth token's source, the judge, memory and compaction
 * commands, and the rich broker socket's path length. Nothing without the key. */
void doctor_check_rich_inputs(struct doctor *d);

/* ---- doctor_docker.c ---- */

/* True when the Docker daemon answers (the checks below need it). */
bool doctor_check_docker(struct doctor *d);
void doctor_check_docker_root(struct doctor *d);
/* The images that run with --pull never are in the local store: image, precheck.image
 * (with precheck) and rich.image (with rich). */
void doctor_check_image(struct doctor *d);
/* Rich mode: a journald log driver has a journal to write to (dockerd under systemd). */
void doctor_check_rich_log(struct doctor *d);

/* ---- doctor_sockets.c ---- */

void doctor_check_runtime_dir(struct doctor *d);
void doctor_check_control_socket(struct doctor *d);
void doctor_check_link_socket(struct doctor *d, const char *name, const char *daemon);

#endif
