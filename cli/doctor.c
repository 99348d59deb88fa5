/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox doctor: one line per check, each either "ok" or the problem and its fix.
 *
 * What is checked and why (the rules come from the seed's setup notes and DESIGN.md):
 *   config        the file loads with the daemons' own loader (strict JSON, keys, ranges)
 *   config file   only root or the service account can write it (it names the commands
 *                 brokerd runs), and the service account can read it
 *   account       the service account exists, is not root, matches uid/gid (single-account
 *                 mode), and is not itself in the docker group (only runnerd gets that
 *                 group, from its unit)
 *   accounts      accounts mode: broker, runner, service and guest accounts apart, none but
 *                 the runner in the docker group, the ones the shipped units use;
 *                 single-account mode: a warning (a container escape reaches every daemon)
 *   roots         runRoot, workspaceRoot and the state directory: directories, not
 *                 symlinks, owned by the daemon's account (runRoot: the runner account in
 *                 accounts mode), nobody else let in (workspaceRoot: runnerd may search), and
 *                 no parent directory that someone else could use to swap them; a missing
 *                 one must be creatable by the account (the daemons mkdir -p at start)
 *   state file    loads with statd's own loader (statd/state.c), a regular file the
 *                 account can read; statd writes it 0600
 *   workspaces    accounts mode: each shared with the guest account as statd shares it
 *                 (statd/workspace.h), its contents the guest's
 *   layout        stateFile outside both roots; the roots do not contain each other
 *   path lengths  runRoot/<turn>/broker.sock within 100 characters; socket paths fit
 *   units         paths the shipped systemd units cannot reach (ProtectHome, PrivateTmp,
 *                 ReadWritePaths only for the default locations): the roots, and what
 *                 brokerd reads (caFile, key files and commands, tool commands)
 *   timeZone      the zone file exists
 *   apiKey, caFile, tools: the sources brokerd reads exist with safe modes (never read)
 *   docker        the daemon answers; its data root does not contain a root (Docker
 *                 refuses private propagation for bind sources there)
 *   image         the configured image exists locally (turns run with --pull never)
 *   runtime dir, control.sock, runnerd.sock, brokerd.sock
 *                 present, of the right type and mode, and answering
 *
 * doctor runs as root or as the service account; it never changes anything.
 *
 * Where a daemon decides the same thing, doctor asks the daemon's own code and only words
 * the verdict: the config loader (common/conf.h), statd's state loader, the containment
 * and private-directory rules (common/paths.h, common/privdir.h), runnerd's docker
 * commands and parsers (runnerd/docker_args.h), the CLI's own status request. This file
 * has the account and the config; the other checks live by kind in doctor_paths.c,
 * doctor_inputs.c, doctor_docker.c and doctor_sockets.c (cli/doctor_checks.h). */
#include "config.h"

#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdarg.h>

#include "cli/doctor.h"
#include "cli/doctor_checks.h"
#include "common/accounts.h"
#include "common/acl.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"

/* Text that came from outside (docker, the file system) is printed with control
 * characters replaced, so every check stays one line. */
static void put_clean(const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, stdout);
}

__attribute__((format(printf, 4, 5))) void doctor_report(struct doctor *d, enum doctor_verdict v, const char *check,
							        const char *fmt, ...)
{
	static const char *const tag[] = {[DOCTOR_OK] = "ok", [DOCTOR_WARN] = "warn", [DOCTOR_FAIL] = "FAIL"};
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	printf("%s: %s: ", tag[v], check);
	put_clean(msg);
	putchar('\n');
	d->n[v]++;
}

char *doctor_dir_of(const char *path)
{
	cleanup_free char *copy = rts_xstrdup(path);
	return rts_xstrdup(dirname(copy));
}

bool doctor_uid_trusted(const struct doctor *d, uid_t uid)
{
	return uid == 0 || (d->have_account && uid == d->svc_uid);
}

bool doctor_gid_trusted(const struct doctor *d, gid_t gid)
{
	return gid == 0 || (d->have_account && gid == d->svc_gid);
}

void doctor_view_as(struct doctor *d, uid_t uid, gid_t gid)
{
	d->uid = uid;
	d->gid = gid;
}

void doctor_daemon_account(const struct doctor *d, const char *daemon, uid_t *uid, gid_t *gid)
{
	*uid = d->svc_uid;
	*gid = d->svc_gid;
	if (!d->accounts)
		return;
	if (strcmp(daemon, "runnerd") == 0)
		*uid = d->runner_uid, *gid = d->runner_gid;
	else if (strcmp(daemon, "brokerd") == 0)
		*uid = d->broker_uid, *gid = d->broker_gid;
}

/* The service account in accounts mode, where the config does not name it: the account
 * doctor runs as, unless root; else the one the shipped units use. */
static struct passwd *service_account(const struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	if (c && c->accounts.present)
		return geteuid() != 0 ? getpwuid(geteuid()) : getpwnam(RTS_SERVICE_USER);
	return c && c->has_uid ? getpwuid(c->uid) : getpwnam(RTS_SERVICE_USER);
}

static bool in_group(const struct passwd *pw, const struct group *gr)
{
	if (pw->pw_gid == gr->gr_gid)
		return true;
	for (char **m = gr->gr_mem; m && *m; m++)
		if (strcmp(*m, pw->pw_name) == 0)
			return true;
	return false;
}

void doctor_check_account(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	struct passwd *pw = service_account(d);
	if (!pw) {
		if (c && c->has_uid && !c->accounts.present)
			doctor_report(d, DOCTOR_FAIL, "account", "no account has the config's uid %lu; fix: create "
			              "the service account or correct \"uid\"", (unsigned long)c->uid);
		else
			doctor_report(d, DOCTOR_FAIL, "account", "there is no account named %s; fix: systemd-sysusers "
			              "(the package's sysusers.d file creates it) or useradd --system %s",
			              RTS_SERVICE_USER, RTS_SERVICE_USER);
		return;
	}
	d->have_account = true;
	d->uid = d->svc_uid = pw->pw_uid;
	d->gid = d->svc_gid = pw->pw_gid;
	if (c && c->accounts.present) {
		d->accounts = true;
		d->broker_uid = c->accounts.broker_uid;
		d->broker_gid = c->accounts.broker_gid;
		d->runner_uid = c->accounts.runner_uid;
		d->runner_gid = c->accounts.runner_gid;
		d->guest_uid = c->uid;
		d->guest_gid = c->gid;
	}
	if (pw->pw_uid == 0) {
		doctor_report(d, DOCTOR_FAIL, "account", "%s is root; fix: run the daemons as a dedicated "
		              "unprivileged account (root workers are refused)", pw->pw_name);
		return;
	}
	if (c && !c->accounts.present && c->has_gid && c->gid != pw->pw_gid) {
		doctor_report(d, DOCTOR_FAIL, "account", "the config's gid %lu is not %s's primary group %lu; fix: "
		              "correct \"gid\" or remove it", (unsigned long)c->gid, pw->pw_name,
		              (unsigned long)pw->pw_gid);
		return;
	}
	struct group *gr = getgrnam(RTS_DOCKER_GROUP);
	if (!gr) {
		doctor_report(d, DOCTOR_FAIL, "account", "there is no %s group; fix: install docker.io (its socket "
		              "belongs to that group)", RTS_DOCKER_GROUP);
		return;
	}
	if (d->accounts) {
		/* statd's account in accounts mode: none of the other three (statd refuses). */
		char err[1024];
		if (rts_check_identity(c, RTS_ROLE_STATD, pw->pw_uid, pw->pw_gid, err, sizeof(err)) < 0) {
			doctor_report(d, DOCTOR_FAIL, "account", "%s (uid %lu) cannot run statd: %s", pw->pw_name,
			              (unsigned long)pw->pw_uid, err);
			return;
		}
	}
	if (in_group(pw, gr)) {
		/* systemd (and runuser without -g) gives a process every group of its account:
		 * statd and brokerd would get Docker too. runnerd alone needs it, and gets it
		 * without the membership. runuser -G alone would make docker the primary group,
		 * and runnerd could no longer read the root:<account> 0640 config. */
		struct group *pg = getgrgid(pw->pw_gid);
		const char *primary = pg ? pg->gr_name : pw->pw_name;
		doctor_report(d, DOCTOR_WARN, "account", "%s is a member of the %s group, so statd and brokerd get it "
		              "too when started by systemd or by runuser without -g, and that group is equivalent to "
		              "root; fix: gpasswd -d %s %s (runnerd alone needs it: its unit adds it with "
		              "SupplementaryGroups=%s; started by hand, runuser -u %s -g %s -G %s -- "
		              "roundtable-sandbox-runnerd, and statd and brokerd with -g %s and no -G)", pw->pw_name,
		              RTS_DOCKER_GROUP, pw->pw_name, RTS_DOCKER_GROUP, RTS_DOCKER_GROUP, pw->pw_name, primary,
		              RTS_DOCKER_GROUP, primary);
		return;
	}
	doctor_report(d, DOCTOR_OK, "account", "%s (uid %lu, gid %lu); the %s group (root-equivalent) is runnerd's "
	              "alone", pw->pw_name, (unsigned long)pw->pw_uid, (unsigned long)pw->pw_gid, RTS_DOCKER_GROUP);
}

/* One daemon account or the guest in accounts mode: exists (the config resolved it), and is
 * in the docker group only when it is the runner's. Returns false after a FAIL line. */
static bool check_one_account(struct doctor *d, const char *key, uid_t uid, const char *unit_user,
			      const struct group *docker, bool may_docker)
{
	struct passwd *pw = getpwuid(uid);
	if (!pw) {
		doctor_report(d, DOCTOR_FAIL, "accounts", "%s: uid %lu has no account on this host; fix: "
		              "systemd-sysusers (the package creates %s)", key, (unsigned long)uid, unit_user);
		return false;
	}
	if (!may_docker && docker && in_group(pw, docker)) {
		doctor_report(d, DOCTOR_FAIL, "accounts", "%s: %s is in the %s group, which is equivalent to root and "
		              "runnerd's alone; fix: gpasswd -d %s %s", key, pw->pw_name, RTS_DOCKER_GROUP, pw->pw_name,
		              RTS_DOCKER_GROUP);
		return false;
	}
	return true;
}

void doctor_check_accounts(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	if (!c || !d->have_account)
		return;
	if (!d->accounts) {
		doctor_report(d, DOCTOR_WARN, "accounts", "single-account mode: every daemon and every turn container "
		              "share one account, so a container escape could read the credentials, use Docker and "
		              "switch a channel's mode (and the shipped units run brokerd as %s and runnerd as %s, "
		              "which single-account mode refuses); fix: add \"accounts\": {\"broker\": \"%s\", "
		              "\"runner\": \"%s\"}, \"uid\": \"%s\", \"gid\": \"%s\" to %s (roundtable-sandbox(7) "
		              "\"Accounts\")", RTS_BROKER_USER, RTS_RUNNER_USER, RTS_BROKER_USER, RTS_RUNNER_USER,
		              RTS_GUEST_USER, RTS_GUEST_USER, c->path);
		return;
	}
	const struct group *docker = getgrnam(RTS_DOCKER_GROUP);
	if (!check_one_account(d, "accounts.broker", d->broker_uid, RTS_BROKER_USER, docker, false) ||
	    !check_one_account(d, "accounts.runner", d->runner_uid, RTS_RUNNER_USER, docker, true) ||
	    !check_one_account(d, "uid (the guest account)", d->guest_uid, RTS_GUEST_USER, docker, false))
		return;
	/* The guest owns nothing of the host's and shares no group with a daemon. */
	if (d->guest_gid == d->svc_gid) {
		doctor_report(d, DOCTOR_FAIL, "accounts", "gid %lu (the guest's group) is the service account's group, "
		              "which may connect to control.sock; fix: set \"gid\" to the guest account's own group (%s)",
		              (unsigned long)d->guest_gid, RTS_GUEST_USER);
		return;
	}
	/* What the shipped units run the daemons as (User=): another account needs a drop-in. */
	if (strcmp(c->accounts.broker, RTS_BROKER_USER) != 0 || strcmp(c->accounts.runner, RTS_RUNNER_USER) != 0) {
		doctor_report(d, DOCTOR_WARN, "accounts", "the shipped units run brokerd as %s and runnerd as %s, not as "
		              "%s and %s; fix: name those in \"accounts\", or give the units a drop-in with User= and "
		              "Group=", RTS_BROKER_USER, RTS_RUNNER_USER, c->accounts.broker, c->accounts.runner);
		return;
	}
	char guest[96];
	doctor_name_uid(d->guest_uid, guest, sizeof(guest));
	doctor_report(d, DOCTOR_OK, "accounts", "statd uid %lu, brokerd %s (uid %lu), runnerd %s (uid %lu, the only "
	              "one with Docker), turn containers %s gid %lu: four accounts apart",
	              (unsigned long)d->svc_uid, c->accounts.broker, (unsigned long)d->broker_uid,
	              c->accounts.runner, (unsigned long)d->runner_uid, guest, (unsigned long)d->guest_gid);
}

struct acl_only {
	const struct doctor *d;
	const uid_t *ok;
	size_t n;
	bool write_only;
};

static bool acl_entry_ok(const struct rts_acl_named *e, void *arg)
{
	const struct acl_only *a = arg;
	if (a->write_only && !(e->perms & RTS_PERM_W))
		return true;
	if (e->group)
		return doctor_gid_trusted(a->d, (gid_t)e->id);
	if ((uid_t)e->id == 0)
		return true;
	for (size_t i = 0; i < a->n; i++)
		if ((uid_t)e->id == a->ok[i])
			return true;
	return false;
}

bool doctor_acl_only(struct doctor *d, const char *check, const char *path, const uid_t *ok, size_t n, bool write_only,
		     const char *risk)
{
	struct acl_only a = {.d = d, .ok = ok, .n = n, .write_only = write_only};
	struct rts_acl_named e;
	int r = rts_acl_find_named(-1, path, acl_entry_ok, &a, &e);
	if (r == 0)
		return true;
	if (r < 0) {
		doctor_report(d, DOCTOR_FAIL, check, "cannot read the ACL of %s: %s", path, doctor_cannot(-r));
		return false;
	}
	char who[96];
	if (e.group)
		doctor_name_gid((gid_t)e.id, who, sizeof(who));
	else
		doctor_name_uid((uid_t)e.id, who, sizeof(who));
	doctor_report(d, DOCTOR_FAIL, check, "%s has an ACL entry granting %s%s \"%c%c%c\", who could %s; fix: "
	              "setfacl -x %c:%lu %s", path, e.group ? "the group " : "", who,
	              e.perms & RTS_PERM_R ? 'r' : '-', e.perms & RTS_PERM_W ? 'w' : '-',
	              e.perms & RTS_PERM_X ? 'x' : '-', risk, e.group ? 'g' : 'u', (unsigned long)e.id, path);
	return false;
}

const char *doctor_cannot(int e)
{
	return e == EACCES ? "permission denied (run doctor as root or as the service account)" : strerror(e);
}

/* The permission bits (07: read, write, search) the service account gets on a file with
 * this owner and mode: its owner's, its group's when that is the account's primary group,
 * else its others'. Supplementary groups and ACLs are not looked at (runnerd started by
 * hand has only its primary group besides docker), so a 0750 root:<other group> directory
 * reads as closed. Without the account nothing can be judged: everything is allowed. */
unsigned doctor_account_perm(const struct doctor *d, const struct stat *st)
{
	if (!d->have_account || d->uid == 0)
		return 07;
	if (st->st_uid == d->uid)
		return (st->st_mode >> 6) & 07;
	if (st->st_gid == d->gid)
		return (st->st_mode >> 3) & 07;
	return st->st_mode & 07;
}

unsigned doctor_account_perm_at(const struct doctor *d, const char *path, const struct stat *st)
{
	if (!d->have_account || d->uid == 0)
		return 07;
	/* POSIX ACLs decide when there are any (the hand-started runtime directory lets
	 * runnerd's and brokerd's accounts in by ACL entries). */
	int r = rts_acl_perms_for(-1, path, st, d->uid, d->gid);
	return r >= 0 ? (unsigned)r : doctor_account_perm(d, st);
}

bool doctor_account_can_read(const struct doctor *d, const struct stat *st)
{
	return doctor_account_perm(d, st) & 04;
}

/* "uid 1000 (alice)" or "uid 1000" for an id without a name. */
void doctor_name_uid(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "uid %lu (%s)", (unsigned long)uid, pw->pw_name);
	else
		snprintf(buf, len, "uid %lu", (unsigned long)uid);
}

void doctor_name_gid(gid_t gid, char *buf, size_t len)
{
	struct group *gr = getgrgid(gid);
	if (gr)
		snprintf(buf, len, "gid %lu (%s)", (unsigned long)gid, gr->gr_name);
	else
		snprintf(buf, len, "gid %lu", (unsigned long)gid);
}

/* Who besides root and the service account may change a file with this owner and mode,
 * in words for a message ("other users", "the group gid 50 (staff)", "its owner uid 1000
 * (alice)"), written to buf; NULL when nobody may. */
const char *doctor_other_writer(const struct doctor *d, const struct stat *st, char *buf, size_t len)
{
	char id[96];
	if (st->st_mode & S_IWOTH)
		return "other users";
	if ((st->st_mode & S_IWGRP) && !doctor_gid_trusted(d, st->st_gid)) {
		doctor_name_gid(st->st_gid, id, sizeof(id));
		snprintf(buf, len, "the group %s", id);
		return buf;
	}
	if (!doctor_uid_trusted(d, st->st_uid)) {
		doctor_name_uid(st->st_uid, id, sizeof(id));
		snprintf(buf, len, "its owner %s", id);
		return buf;
	}
	return NULL;
}

const char *doctor_writer_besides_root(const struct doctor *d, const struct stat *st, char *buf, size_t len)
{
	const char *who = doctor_other_writer(d, st, buf, len);
	if (who || !d->accounts)
		return who;
	char id[96];
	if ((st->st_mode & S_IWGRP) && st->st_gid != 0) {
		doctor_name_gid(st->st_gid, id, sizeof(id));
		snprintf(buf, len, "the group %s", id);
		return buf;
	}
	if (st->st_uid != 0) {
		doctor_name_uid(st->st_uid, id, sizeof(id));
		snprintf(buf, len, "its owner %s", id);
		return buf;
	}
	return NULL;
}

/* The config, loaded with the daemons' own loader; the message is the loader's. The fix
 * depends on what kind of problem it is: a file that is not strict JSON (the message
 * shows where), or one that is but breaks a rule (the message names the key path). */
struct rts_config *doctor_check_config(struct doctor *d, const char *path)
{
	char err[1024];
	struct rts_config *cfg = rts_config_load(path, err, sizeof(err));
	if (cfg) {
		doctor_report(d, DOCTOR_OK, "config", "%s is valid (installation %s, image %s)", path,
		              cfg->installation_id, cfg->image);
		return cfg;
	}
	/* Read it again as the loader reads it, only to tell the two kinds apart. */
	char again[1024];
	cleanup_json json_object *root = NULL;
	int r = rts_config_read_json(path, &root, again, sizeof(again));
	const char *fix;
	switch (r) {
	case 0:
		fix = "correct the key it names (roundtable-sandbox.json(5))";
		break;
	case -ENOENT:
		fix = "copy sandbox.json.example next to it and set \"model\" and \"modelUrl\"";
		break;
	case -EACCES:
		fix = "run doctor as root or as the service account";
		break;
	case -EFBIG:
		fix = "the file may hold at most 1 MiB";
		break;
	case -EINVAL:
		fix = "correct the JSON syntax at the position shown (strict JSON: no comments, no trailing commas, no "
		      "duplicate keys; roundtable-sandbox.json(5))";
		break;
	default:
		fix = "point --config at a readable regular file";
		break;
	}
	doctor_report(d, DOCTOR_FAIL, "config", "%s; fix: %s", err, fix);
	return NULL;
}

int cli_doctor(const struct rts_opts *o, int argc, char **argv)
{
	static const struct option options[] = {
		{"offline", no_argument, NULL, 'o'},
		{0},
	};
	bool offline = false;
	optind = 0; /* glibc: rescan from scratch, the global options used getopt before us */
	int c;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (c != 'o') {
			log_error("usage: roundtable-sandbox [--config PATH] [--runtime-dir DIR] doctor [--offline]");
			return 2;
		}
		offline = true;
	}
	if (optind != argc) {
		log_error("doctor takes no arguments besides --offline");
		return 2;
	}

	struct doctor d = {.opts = o};
	struct rts_config *cfg = doctor_check_config(&d, o->config_path);
	d.cfg = cfg;
	doctor_check_account(&d);
	doctor_check_accounts(&d);
	doctor_check_config_file(&d, o->config_path);
	if (cfg) {
		cleanup_free char *state_dir = doctor_dir_of(cfg->state_file);
		/* Where the shipped units create them (RuntimeDirectory=, StateDirectory=). */
		doctor_check_private_dir(&d, "runRoot", cfg->run_root, "runnerd", RTS_UNIT_RUNTIME_DIR "/turns");
		/* runnerd's too; checked apart only when it is another directory. */
		if (cfg->has_precheck && strcmp(cfg->precheck.run_root, cfg->run_root) != 0)
			doctor_check_private_dir(&d, "precheck.runRoot", cfg->precheck.run_root, "runnerd", NULL);
		doctor_check_private_dir(&d, "workspaceRoot", cfg->workspace_root, "statd",
					 RTS_UNIT_STATE_DIR "/workspaces");
		doctor_check_private_dir(&d, "state dir", state_dir, "statd", RTS_UNIT_STATE_DIR "/state");
		doctor_check_state_file(&d, cfg->state_file);
		doctor_check_workspaces(&d);
		doctor_check_layout(&d);
		doctor_check_path_lengths(&d);
		doctor_check_unit_paths(&d);
		doctor_check_time_zone(&d);
		doctor_check_brokerd_inputs(&d);
		doctor_check_rich_inputs(&d);
	}
	if (!offline) {
		if (doctor_check_docker(&d) && cfg) {
			doctor_check_docker_root(&d);
			doctor_check_image(&d);
			doctor_check_rich_log(&d);
		}
		doctor_check_runtime_dir(&d);
		doctor_check_control_socket(&d);
		doctor_check_link_socket(&d, RTS_SOCK_RUNNERD, "runnerd");
		doctor_check_link_socket(&d, RTS_SOCK_BROKERD, "brokerd");
	}
	rts_config_free(cfg);
	printf("summary: %u ok, %u warnings, %u failed\n", d.n[DOCTOR_OK], d.n[DOCTOR_WARN], d.n[DOCTOR_FAIL]);
	return d.n[DOCTOR_FAIL] ? 1 : 0;
}
