/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: the roots, the state file and where they lie (cli/doctor.c lists the checks). */
#include "config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>

#include "cli/doctor_checks.h"
#include "common/acl.h"
#include "common/ids.h"
#include "common/paths.h"
#include "common/precheck.h"
#include "common/privdir.h"
#include "common/sock.h"
#include "common/util.h"
#include "statd/state.h"

/* What doctor_check_ancestors() learns on its walk. */
struct ancestors {
	struct doctor *d;
	const char *check, *path;
	char *warning; /* the first warning, printed only when no FAIL follows */
	char *deepest; /* the deepest existing ancestor, and its stat() */
	struct stat deepest_st;
};

/* One ancestor, from "/" down (rts_dir_ancestors()): 0 to go on, 1 to stop quietly, or
 * -EPERM after a FAIL line. */
static int judge_ancestor(const char *dir, const struct stat *st, void *arg)
{
	struct ancestors *a = arg;
	struct doctor *d = a->d;
	free(a->deepest);
	a->deepest = rts_xstrdup(dir);
	a->deepest_st = *st;
	if (!S_ISDIR(st->st_mode))
		return 1; /* the caller finds path unreachable (ENOTDIR) and says so */
	unsigned mode = (unsigned)(st->st_mode & 07777);
	bool sticky = st->st_mode & S_ISVTX;
	/* The daemons' own rule (common/privdir.h): they refuse such a root too. */
	if (rts_dir_swappable(st)) {
		doctor_report(d, DOCTOR_FAIL, a->check, "%s is writable by other users without the sticky bit "
		              "(mode %04o), so any local user could replace %s with a directory of their own; "
		              "fix: chmod o-w %s", dir, mode, a->path, dir);
		return -EPERM;
	}
	if (!(doctor_account_perm_at(d, dir, st) & 01)) {
		char owner[96], group[96], who[96] = "the service account";
		doctor_name_uid(st->st_uid, owner, sizeof(owner));
		doctor_name_gid(st->st_gid, group, sizeof(group));
		if (d->uid != d->svc_uid)
			doctor_name_uid(d->uid, who, sizeof(who));
		doctor_report(d, DOCTOR_FAIL, a->check, "%s cannot pass through %s (owner %s, group %s, mode %04o), so "
		              "the daemons cannot reach %s; fix: chmod o+x %s, or choose a path the account can reach",
		              who, dir, owner, group, mode, a->path, dir);
		return -EPERM;
	}
	if (a->warning)
		return 0;
	/* Those who may swap it besides root and the account: they must be trusted as much. */
	if (!doctor_uid_trusted(d, st->st_uid)) {
		char owner[96];
		doctor_name_uid(st->st_uid, owner, sizeof(owner));
		a->warning = rts_xasprintf("%s belongs to %s, who could replace %s with a directory of their own; fix: "
					   "chown root %s, or move %s out of it", dir, owner, a->path, dir, a->path);
	} else if ((st->st_mode & S_IWGRP) && !sticky && !doctor_gid_trusted(d, st->st_gid)) {
		char group[96];
		doctor_name_gid(st->st_gid, group, sizeof(group));
		a->warning = rts_xasprintf("%s is writable by the group %s (mode %04o), whose members could replace %s "
					   "with a directory of their own; fix: chmod g-w %s",
					   dir, group, mode, a->path, dir);
	}
	return 0;
}

enum doctor_verdict doctor_check_ancestors(struct doctor *d, const char *check, const char *path, char **nearest,
					   struct stat *nearest_st)
{
	struct ancestors a = {.d = d, .check = check, .path = path};
	int r = rts_dir_ancestors(path, judge_ancestor, &a);
	cleanup_free char *warning = a.warning;
	cleanup_free char *deepest = a.deepest;
	if (r < 0)
		return DOCTOR_FAIL;
	if (nearest) {
		*nearest = steal_pointer(&deepest);
		*nearest_st = a.deepest_st;
	}
	if (warning && !d->ancestors_fail_only) {
		doctor_report(d, DOCTOR_WARN, check, "%s", warning);
		return DOCTOR_WARN;
	}
	return DOCTOR_OK;
}

/* systemd is the init system here (what sd_booted() tests). */
static bool systemd_booted(void)
{
	struct stat st;
	return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

/* A root that does not exist: daemon creates it at start (mkdir -p, mode 0700), which
 * works when the service account may write in the deepest existing ancestor, nearest.
 * unit_dir is the location the daemon's shipped unit creates itself (RuntimeDirectory=,
 * StateDirectory=). */
static void check_missing_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir, const char *nearest, const struct stat *nst)
{
	if (!d->have_account || !nearest) {
		doctor_report(d, DOCTOR_WARN, check, "%s does not exist yet; whether roundtable-sandbox-%s can create "
		              "it cannot be judged without the service account; fix: the account check above", path,
		              daemon);
		return;
	}
	if (!S_ISDIR(nst->st_mode)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s cannot be created: %s is not a directory; fix: move %s away "
		              "or choose another path", path, nearest, nearest);
		return;
	}
	if ((doctor_account_perm_at(d, nearest, nst) & 03) == 03) {
		doctor_report(d, DOCTOR_OK, check, "%s does not exist yet; roundtable-sandbox-%s creates it (mode "
		              "0700) at start", path, daemon);
		return;
	}
	char owner[96], group[96];
	doctor_name_uid(nst->st_uid, owner, sizeof(owner));
	doctor_name_gid(nst->st_gid, group, sizeof(group));
	unsigned mode = (unsigned)(nst->st_mode & 07777);
	unsigned long uid = (unsigned long)d->uid, gid = (unsigned long)d->gid;
	if (unit_dir && strcmp(path, unit_dir) == 0) {
		/* The unit creates it; a daemon started by hand cannot. */
		if (systemd_booted())
			doctor_report(d, DOCTOR_OK, check, "%s does not exist yet; roundtable-sandbox-%s.service "
			              "creates it at start (started by hand, the daemon could not: create it first "
			              "with install -d -o %lu -g %lu -m 0700 %s)", path, daemon, uid, gid, path);
		else
			doctor_report(d, DOCTOR_WARN, check, "%s does not exist yet, and without systemd (whose "
			              "roundtable-sandbox-%s.service would create it) the daemon cannot: the service "
			              "account may not write in %s (owner %s, group %s, mode %04o); fix: install -d "
			              "-o %lu -g %lu -m 0700 %s", path, daemon, nearest, owner, group, mode, uid, gid,
			              path);
		return;
	}
	doctor_report(d, DOCTOR_FAIL, check, "%s does not exist, and roundtable-sandbox-%s cannot create it at start: "
	              "the service account (uid %lu) may not write in %s (owner %s, group %s, mode %04o); fix: "
	              "install -d -o %lu -g %lu -m 0700 %s, or choose a path under a directory the account owns", path,
	              daemon, uid, nearest, owner, group, mode, uid, gid, path);
}

/* A root or the state directory: seed rules "dedicated, owned by the service account, no
 * group/other permissions", symlinks refused. daemon creates it when missing, unit_dir is
 * where its unit creates it (check_missing_dir). */
static void check_private_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir);

void doctor_check_private_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir)
{
	/* The daemon's own account owns it, passes through its parents and creates it. */
	uid_t uid;
	gid_t gid;
	doctor_daemon_account(d, daemon, &uid, &gid);
	doctor_view_as(d, uid, gid);
	unsigned failed = d->n[DOCTOR_FAIL];
	check_private_dir(d, check, path, daemon, unit_dir);
	/* Accounts mode: runnerd looks statd's roots up too, the state directory for its
	 * owner (statd's account, common/accounts.h) and each workspace by name. */
	if (d->accounts && strcmp(daemon, "statd") == 0 && d->n[DOCTOR_FAIL] == failed) {
		doctor_view_as(d, d->runner_uid, d->runner_gid);
		d->ancestors_fail_only = true;
		(void)doctor_check_ancestors(d, check, path, NULL, NULL);
		d->ancestors_fail_only = false;
	}
	doctor_view_as(d, d->svc_uid, d->svc_gid);
}

static void check_private_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir)
{
	cleanup_free char *nearest = NULL;
	struct stat nst;
	enum doctor_verdict parents = doctor_check_ancestors(d, check, path, &nearest, &nst);
	if (parents == DOCTOR_FAIL)
		return;
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT || e == ENOTDIR)
			check_missing_dir(d, check, path, daemon, unit_dir, nearest, &nst);
		else
			doctor_report(d, DOCTOR_FAIL, check, "cannot inspect %s: %s", path, doctor_cannot(e));
		return;
	}
	/* The daemons' own rules (rts_private_dir_open_grant()), for the owning account's uid;
	 * that the path is a directory, not a symbolic link, does not depend on the uid. In
	 * accounts mode statd lets runnerd search workspaceRoot. */
	const struct rts_dir_grant runner = {.uid = d->runner_uid, .perms = RTS_PERM_X};
	const struct rts_dir_grant *grant = d->accounts && strcmp(check, "workspaceRoot") == 0 ? &runner : NULL;
	int verdict = rts_private_dir_judge(&st, d->have_account ? d->uid : st.st_uid);
	if (verdict == 0 && d->have_account)
		verdict = rts_private_dir_judge_acl(-1, path, &st, d->uid, grant);
	if (verdict == -ENOTDIR && S_ISLNK(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is a symbolic link, which the daemons refuse; fix: point the "
		              "config at the real directory", path);
		return;
	}
	if (verdict == -ENOTDIR) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is not a directory; fix: move it away and let the daemons "
		              "create it", path);
		return;
	}
	if (!d->have_account) {
		doctor_report(d, DOCTOR_FAIL, check, "%s cannot be judged without the service account; fix: the "
		              "account check above", path);
		return;
	}
	if (verdict == -EPERM) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is owned by uid %lu, not by %s (uid %lu); fix: chown %lu:%lu %s",
		              path, (unsigned long)st.st_uid,
		              d->accounts ? (strcmp(daemon, "runnerd") == 0 ? "the runner account" : "the service account")
		                          : "the service account",
		              (unsigned long)d->uid, (unsigned long)d->uid, (unsigned long)d->gid, path);
		return;
	}
	if (verdict == -EACCES) {
		doctor_report(d, DOCTOR_FAIL, check, "%s has mode %04o; it must have no group/other permissions and no "
		              "ACL entry for another account%s; fix: chmod 0700 %s && setfacl -b %s", path,
		              (unsigned)(st.st_mode & 07777), grant ? " (statd adds runnerd's itself)" : "", path, path);
		return;
	}
	if (verdict < 0) {
		doctor_report(d, DOCTOR_FAIL, check, "cannot read the ACL of %s: %s", path, doctor_cannot(-verdict));
		return;
	}
	if (parents == DOCTOR_OK)
		doctor_report(d, DOCTOR_OK, check, "%s: directory of uid %lu, mode %04o", path,
		              (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
}

/* The state file, judged the way statd judges it at start: statd_state_load() must accept
 * it (statd refuses to start otherwise and never replaces the file), and the account must
 * be able to read it. statd writes it 0600 itself; looser bits or another owner are only
 * warnings, since statd starts with them and its next change replaces the file. */
void doctor_check_state_file(struct doctor *d, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			doctor_report(d, DOCTOR_OK, "stateFile", "%s does not exist yet: statd creates it at its "
			              "first start (from initialChannels)", path);
		else
			doctor_report(d, DOCTOR_FAIL, "stateFile", "cannot inspect %s: %s", path, doctor_cannot(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, "stateFile", "%s is not a regular file (symbolic links are refused); "
		              "fix: restore the file from a backup", path);
		return;
	}
	unsigned mode = (unsigned)(st.st_mode & 07777);
	if (!doctor_account_can_read(d, &st)) {
		doctor_report(d, DOCTOR_FAIL, "stateFile", "the service account cannot read %s (owner uid %lu, group "
		              "%lu, mode %04o), so statd refuses to start; fix: chown %lu:%lu %s && chmod 0600 %s",
		              path, (unsigned long)st.st_uid, (unsigned long)st.st_gid, mode, (unsigned long)d->uid,
		              (unsigned long)d->gid, path, path);
		return;
	}
	char err[1024];
	struct statd_state *s = NULL;
	int r = statd_state_load(path, &s, err, sizeof(err));
	if (r < 0) {
		if (r == -EACCES && geteuid() != 0 && (!d->have_account || geteuid() != d->uid))
			doctor_report(d, DOCTOR_FAIL, "stateFile", "cannot read %s: %s", path, doctor_cannot(EACCES));
		else
			doctor_report(d, DOCTOR_FAIL, "stateFile", "%s; statd refuses to start with it and never "
			              "replaces it; fix: repair it (roundtable-sandbox-statd(8) shows the format) or "
			              "restore it from a backup", err);
		return;
	}
	size_t channels = statd_state_count(s), on = statd_state_count_on(s);
	statd_state_free(s);
	if (d->have_account && st.st_uid != d->uid) {
		doctor_report(d, DOCTOR_WARN, "stateFile", "%s belongs to uid %lu, not to the service account; statd "
		              "reads it, and its next change replaces it with a file of its own; fix: chown %lu:%lu %s",
		              path, (unsigned long)st.st_uid, (unsigned long)d->uid, (unsigned long)d->gid, path);
		return;
	}
	if (st.st_mode & 077) {
		doctor_report(d, DOCTOR_WARN, "stateFile", "%s has mode %04o, but it lists every channel key and "
		              "statd writes it 0600 (for now, only the private state directory keeps others out); "
		              "fix: chmod 0600 %s", path, mode, path);
		return;
	}
	doctor_report(d, DOCTOR_OK, "stateFile", "%s: %zu channels, %zu on; %lld bytes, mode %04o", path, channels, on,
	              (long long)st.st_size, mode);
}

/* One workspace in accounts mode, as statd_workspace_open() shares it: statd's, sticky,
 * the guest alone let in by an ACL entry. Returns a problem for the message, or NULL;
 * *fatal when statd refuses the workspace (else it restores mode and ACL itself). */
static const char *workspace_problem(const struct doctor *d, const char *path, const struct stat *st, bool *fatal)
{
	*fatal = true;
	if (!S_ISDIR(st->st_mode))
		return "is not a directory";
	if (st->st_uid != d->svc_uid)
		return "is not owned by the service account";
	*fatal = false;
	struct rts_acl_view v;
	if ((st->st_mode & 07777 & ~(mode_t)S_ISGID) != (S_ISVTX | 0770) || rts_acl_view(-1, path, &v) < 0 ||
	    !rts_acl_is_grant(&v, 07, d->guest_uid, 07))
		return "is not shared with the guest account the way statd shares it";
	return NULL;
}

/* Something the guest does not own inside a workspace (left by single-account mode): the
 * worker cannot update it. Looks at the top level and .sandbox only. */
static bool workspace_contents_foreign(const struct doctor *d, int wfd)
{
	const char *names[] = {".sandbox", ".sandbox/memory.json", ".sandbox/history.json"};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(names); i++) {
		struct stat st;
		if (fstatat(wfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != d->guest_uid)
			return true;
	}
	return false;
}

void doctor_check_workspaces(struct doctor *d)
{
	if (!d->accounts)
		return;
	const char *root = d->cfg->workspace_root;
	cleanup_close int rfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		if (errno == EACCES)
			doctor_report(d, DOCTOR_WARN, "workspaces", "cannot look into %s: %s", root, doctor_cannot(EACCES));
		return; /* missing or refused: the workspaceRoot check said so */
	}
	int dfd = fcntl(rfd, F_DUPFD_CLOEXEC, 3);
	DIR *dir = dfd < 0 ? NULL : fdopendir(dfd);
	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		doctor_report(d, DOCTOR_FAIL, "workspaces", "cannot list %s: %s", root, doctor_cannot(errno));
		return;
	}
	size_t n = 0, bad = 0, foreign = 0;
	char first_bad[512] = "", first_foreign[512] = "";
	const char *why = NULL;
	bool fatal = false;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!rts_hex_valid(de->d_name, RTS_HASH_HEX_LEN))
			continue;
		n++;
		cleanup_free char *path = rts_xasprintf("%s/%s", root, de->d_name);
		struct stat st;
		if (fstatat(rfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool f;
		const char *problem = workspace_problem(d, path, &st, &f);
		if (problem) {
			if (bad++ == 0 || (f && !fatal)) {
				snprintf(first_bad, sizeof(first_bad), "%s", path);
				why = problem;
				fatal = f;
			}
			continue;
		}
		cleanup_close int wfd = openat(rfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (wfd >= 0 && workspace_contents_foreign(d, wfd) && foreign++ == 0)
			snprintf(first_foreign, sizeof(first_foreign), "%s", path);
	}
	closedir(dir);
	if (bad) {
		if (fatal)
			doctor_report(d, DOCTOR_FAIL, "workspaces", "%zu of %zu workspaces (for one, %s) %s, and statd "
			              "refuses to run that channel's turns; fix: move it away, or chown %lu %s", bad, n,
			              first_bad, why, (unsigned long)d->svc_uid, first_bad);
		else
			doctor_report(d, DOCTOR_WARN, "workspaces", "%zu of %zu workspaces (first %s) %s (made in "
			              "single-account mode, or changed by root); fix: none needed, statd restores the mode "
			              "and ACL at that channel's next turn", bad, n, first_bad, why);
		return;
	}
	if (foreign) {
		doctor_report(d, DOCTOR_FAIL, "workspaces", "%zu of %zu workspaces (first %s) hold files the guest account "
		              "does not own (left from single-account mode), which the worker cannot update; fix: find %s "
		              "-mindepth 1 \\( -type d -o -type l -o -type f -links 1 \\) -exec chown -h %lu:%lu {} +",
		              foreign, n, first_foreign, first_foreign, (unsigned long)d->guest_uid,
		              (unsigned long)d->guest_gid);
		return;
	}
	doctor_report(d, DOCTOR_OK, "workspaces", "%zu workspaces, each shared with the guest account (uid %lu) alone",
	              n, (unsigned long)d->guest_uid);
}

void doctor_check_layout(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	const char *problem = NULL;
	if (rts_path_within(c->state_file, c->workspace_root))
		problem = "stateFile lies inside workspaceRoot, where guest containers write";
	else if (rts_path_within(c->state_file, c->run_root))
		problem = "stateFile lies inside runRoot, whose turn directories are mounted into containers";
	else if (rts_path_within(c->run_root, c->workspace_root) || rts_path_within(c->workspace_root, c->run_root))
		problem = "runRoot and workspaceRoot overlap";
	if (problem) {
		doctor_report(d, DOCTOR_FAIL, "layout", "%s; fix: give stateFile, runRoot and workspaceRoot separate "
		              "directories (the defaults do)", problem);
		return;
	}
	doctor_report(d, DOCTOR_OK, "layout", "stateFile, runRoot and workspaceRoot are apart");
}

void doctor_check_path_lengths(struct doctor *d)
{
	/* What runnerd refuses at start, and what rts_listen_unix() and systemd cannot bind. */
	size_t broker = rts_broker_sock_path_len(d->cfg->run_root);
	size_t suffix = broker - strlen(d->cfg->run_root);
	cleanup_free char *control = rts_runtime_path(d->opts->runtime_dir, RTS_SOCK_CONTROL);
	size_t sock = strlen(control);
	if (broker > RTS_BROKER_SOCK_PATH_MAX) {
		doctor_report(d, DOCTOR_FAIL, "path lengths", "runRoot %s makes broker socket paths of %zu "
		              "characters, more than %u; fix: choose a runRoot of at most %zu characters",
		              d->cfg->run_root, broker, RTS_BROKER_SOCK_PATH_MAX,
		              RTS_BROKER_SOCK_PATH_MAX - suffix);
		return;
	}
	if (sock > RTS_SUN_PATH_MAX) {
		doctor_report(d, DOCTOR_FAIL, "path lengths", "runtime directory %s makes socket paths of %zu "
		              "characters, more than %u; fix: use a shorter --runtime-dir", d->opts->runtime_dir, sock,
		              RTS_SUN_PATH_MAX);
		return;
	}
	/* A precheck's socket sits deeper: <precheck runRoot>/precheck-<id>/broker/broker.sock. */
	if (d->cfg->has_precheck) {
		const char *root = d->cfg->precheck.run_root;
		size_t pre = rts_precheck_sock_path_len(root);
		if (pre > RTS_BROKER_SOCK_PATH_MAX) {
			doctor_report(d, DOCTOR_FAIL, "path lengths", "precheck.runRoot %s makes precheck broker socket "
				      "paths of %zu characters, more than %u; fix: choose a precheck.runRoot of at "
				      "most %zu characters",
				      root, pre, RTS_BROKER_SOCK_PATH_MAX,
				      RTS_BROKER_SOCK_PATH_MAX - (pre - strlen(root)));
			return;
		}
		broker = pre > broker ? pre : broker;
	}
	doctor_report(d, DOCTOR_OK, "path lengths", "broker socket paths %zu of %u characters, runtime sockets %zu of "
	              "%u", broker, RTS_BROKER_SOCK_PATH_MAX, sock, RTS_SUN_PATH_MAX);
}

/* What the shipped units hide (ProtectHome=, PrivateTmp=). */
static const char *const unit_hidden[] = {"/home", "/root", "/run/user", "/tmp", "/var/tmp"};

/* The directory of unit_hidden that holds path, or NULL. */
static const char *unit_hides(const char *path)
{
	for (size_t h = 0; h < RTS_ARRAY_SIZE(unit_hidden); h++)
		if (rts_path_within(path, unit_hidden[h]))
			return unit_hidden[h];
	return NULL;
}

/* One warning when brokerd's unit hides a file brokerd reads (key is its key path, as the
 * config loader names it). Returns 1 when it warned. */
static unsigned check_brokerd_reads(struct doctor *d, const char *key, const char *path)
{
	const char *dir = path && path[0] == '/' ? unit_hides(path) : NULL;
	if (!dir)
		return 0;
	doctor_report(d, DOCTOR_WARN, "units", "%s %s is under %s, which roundtable-sandbox-brokerd.service hides "
	              "(ProtectHome=/PrivateTmp=): brokerd would not find it there; fix: move it, e.g. under /etc",
	              key, path, dir);
	return 1;
}

static unsigned check_key_source_path(struct doctor *d, const char *key, const struct rts_key_source *k)
{
	char kp[96];
	if (k->kind == RTS_KEY_FILE) {
		snprintf(kp, sizeof(kp), "%s.file", key);
		return check_brokerd_reads(d, kp, k->value);
	}
	if (k->kind == RTS_KEY_COMMAND && k->argv) {
		snprintf(kp, sizeof(kp), "%s.command[0]", key);
		return check_brokerd_reads(d, kp, k->argv[0]);
	}
	return 0;
}

/* The shipped units make only the default locations writable and hide /home, /root and
 * /tmp; another location works only with a drop-in. brokerd's unit also hides those from
 * what it reads, which no drop-in should relax: the credentials' process stays sealed. */
void doctor_check_unit_paths(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	cleanup_free char *state_dir = doctor_dir_of(c->state_file);
	const struct {
		const char *key, *path, *unit_dir, *unit;
	} p[] = {
		{"runRoot", c->run_root, RTS_UNIT_RUNTIME_DIR "/turns", "runnerd"},
		{"workspaceRoot", c->workspace_root, RTS_UNIT_STATE_DIR, "statd"},
		{"stateFile", state_dir, RTS_UNIT_STATE_DIR, "statd"},
	};
	unsigned problems = 0;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(p); i++) {
		const char *dir = unit_hides(p[i].path);
		if (dir) {
			doctor_report(d, DOCTOR_WARN, "units", "%s %s is under %s, which "
			              "roundtable-sandbox-%s.service hides (ProtectHome=/PrivateTmp=); fix: move it, "
			              "or relax that in a drop-in", p[i].key, p[i].path, dir, p[i].unit);
			problems++;
		} else if (!rts_path_within(p[i].path, p[i].unit_dir)) {
			doctor_report(d, DOCTOR_WARN, "units", "%s %s is outside %s, the only place "
			              "roundtable-sandbox-%s.service may write; fix: add ReadWritePaths=%s in a "
			              "drop-in (systemctl edit)", p[i].key, p[i].path, p[i].unit_dir, p[i].unit,
			              p[i].path);
			problems++;
		}
	}
	problems += check_brokerd_reads(d, "caFile", c->ca_file);
	problems += check_key_source_path(d, "apiKey", &c->api_key);
	for (size_t i = 0; i < c->n_mcp; i++) {
		char kp[32];
		snprintf(kp, sizeof(kp), "mcp[%zu].apiKey", i);
		if (c->mcp[i].has_api_key)
			problems += check_key_source_path(d, kp, &c->mcp[i].api_key);
	}
	for (size_t i = 0; i < c->n_tools; i++) {
		char kp[32];
		snprintf(kp, sizeof(kp), "tools[%zu].command[0]", i);
		problems += check_brokerd_reads(d, kp, c->tools[i].command[0]);
	}
	if (!problems)
		doctor_report(d, DOCTOR_OK, "units", "the roots and what brokerd reads are where the shipped systemd "
		              "units expect them");
}
