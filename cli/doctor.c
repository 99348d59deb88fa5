/* SPDX-License-Identifier: Apache-2.0 */
/* roundtable-sandbox doctor: one line per check, each either "ok" or the problem and its fix.
 *
 * What is checked and why (the rules come from the seed's setup notes and DESIGN.md):
 *   config        the file loads with the daemons' own loader (strict JSON, keys, ranges)
 *   config file   only root or the service account can write it (it names the commands
 *                 brokerd runs), and the service account can read it
 *   account       the service account exists, is not root, matches uid/gid, and is not itself
 *                 in the docker group (only runnerd gets that group, from its unit)
 *   roots         runRoot, workspaceRoot and the state directory: directories, not
 *                 symlinks, owned by the service account, no group/other permissions, and
 *                 no parent directory that someone else could use to swap them; a missing
 *                 one must be creatable by the account (the daemons mkdir -p at start)
 *   state file    loads with statd's own loader (statd/state.c), a regular file the
 *                 account can read; statd writes it 0600
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
 * doctor runs as root or as the service account; it never changes anything. */
#include "config.h"

#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "cli/doctor.h"
#include "cli/spawn.h"
#include "common/conf.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/util.h"
#include "statd/state.h"

#ifndef RTS_DOCKER
#define RTS_DOCKER "/usr/bin/docker"
#endif
#ifndef RTS_PKGLIBDIR
#define RTS_PKGLIBDIR "/usr/lib/roundtable-sandbox"
#endif

#define DOCTOR_SERVICE_USER "roundtable-sandbox"
#define DOCTOR_DOCKER_GROUP "docker"
#define DOCTOR_ZONEINFO_DIR "/usr/share/zoneinfo"
/* Where brokerd's unit loads the "model-api-key" credential from (LoadCredential=). */
#define DOCTOR_KEY_FILE RTS_SYSCONFDIR "/roundtable-sandbox/model-api-key"
#define DOCTOR_DEFAULT_CREDENTIAL "model-api-key"
/* The locations the shipped units create and make writable (systemd/ *.service.in). */
#define DOCTOR_UNIT_RUN_ROOT RTS_DEFAULT_RUNTIME_DIR "/turns"
#define DOCTOR_UNIT_STATE_DIR "/var/lib/roundtable-sandbox"
#define DOCTOR_UNIT_WORKSPACE_ROOT DOCTOR_UNIT_STATE_DIR "/workspaces"
/* The per-turn suffix runnerd puts under runRoot (RTS_BROKER_SOCK_PATH_MAX in all). */
#define DOCTOR_BROKER_SUFFIX "/0123456789abcdef/broker.sock"
/* Bounds for the docker commands and the control socket exchange. */
#define DOCTOR_DOCKER_TIMEOUT_MS 15000u
#define DOCTOR_DOCKER_OUT_MAX (64u * 1024u)
#define DOCTOR_SOCKET_TIMEOUT_S 5
#define DOCTOR_ANSWER_MAX (64u * 1024u)

enum doctor_verdict {
	DOCTOR_OK,
	DOCTOR_WARN,
	DOCTOR_FAIL,
};

struct doctor {
	const struct rts_opts *opts;
	const struct rts_config *cfg; /* NULL when the config did not load */
	bool have_account;
	uid_t uid; /* the service account's, when have_account */
	gid_t gid;
	unsigned n[3];
};

/* Text that came from outside (docker, the file system) is printed with control
 * characters replaced, so every check stays one line. */
static void put_clean(const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, stdout);
}

__attribute__((format(printf, 4, 5))) static void report(struct doctor *d, enum doctor_verdict v, const char *check,
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

static char *dir_of(const char *path)
{
	cleanup_free char *copy = rts_xstrdup(path);
	return rts_xstrdup(dirname(copy));
}

static bool prefix_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strcmp(dir, "/") == 0 || (strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/'));
}

/* path with symbolic links resolved; a path that does not exist yet (a state file before
 * the first start) is resolved through its directory. NULL when neither exists. */
static char *resolve(const char *path)
{
	char *r = realpath(path, NULL);
	if (r)
		return r;
	cleanup_free char *dir = dir_of(path);
	cleanup_free char *rd = realpath(dir, NULL);
	if (!rd)
		return NULL;
	const char *base = strrchr(path, '/');
	return rts_xasprintf("%s%s", strcmp(rd, "/") == 0 ? "" : rd, base ? base : "/");
}

/* True when path is dir or below it, compared as written and with symbolic links resolved. */
static bool path_within(const char *path, const char *dir)
{
	if (prefix_within(path, dir))
		return true;
	cleanup_free char *rp = resolve(path);
	cleanup_free char *rd = realpath(dir, NULL);
	return rp && rd && prefix_within(rp, rd);
}

/* ---- the service account ---- */

static bool uid_is_trusted(const struct doctor *d, uid_t uid)
{
	return uid == 0 || (d->have_account && uid == d->uid);
}

static bool gid_is_trusted(const struct doctor *d, gid_t gid)
{
	return gid == 0 || (d->have_account && gid == d->gid);
}

static void check_account(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	struct passwd *pw = c && c->has_uid ? getpwuid(c->uid) : getpwnam(DOCTOR_SERVICE_USER);
	if (!pw) {
		if (c && c->has_uid)
			report(d, DOCTOR_FAIL, "account", "no account has the config's uid %lu; fix: create the service "
			       "account or correct \"uid\"", (unsigned long)c->uid);
		else
			report(d, DOCTOR_FAIL, "account", "there is no account named %s; fix: systemd-sysusers (the "
			       "package's sysusers.d file creates it) or useradd --system %s", DOCTOR_SERVICE_USER,
			       DOCTOR_SERVICE_USER);
		return;
	}
	d->have_account = true;
	d->uid = pw->pw_uid;
	d->gid = pw->pw_gid;
	if (pw->pw_uid == 0) {
		report(d, DOCTOR_FAIL, "account", "%s is root; fix: run the daemons as a dedicated unprivileged account "
		       "(root workers are refused)", pw->pw_name);
		return;
	}
	if (c && c->has_gid && c->gid != pw->pw_gid) {
		report(d, DOCTOR_FAIL, "account", "the config's gid %lu is not %s's primary group %lu; fix: correct "
		       "\"gid\" or remove it", (unsigned long)c->gid, pw->pw_name, (unsigned long)pw->pw_gid);
		return;
	}
	struct group *gr = getgrnam(DOCTOR_DOCKER_GROUP);
	if (!gr) {
		report(d, DOCTOR_FAIL, "account", "there is no %s group; fix: install docker.io (its socket belongs to "
		       "that group)", DOCTOR_DOCKER_GROUP);
		return;
	}
	bool member = pw->pw_gid == gr->gr_gid;
	for (char **m = gr->gr_mem; !member && m && *m; m++)
		member = strcmp(*m, pw->pw_name) == 0;
	if (member) {
		/* systemd (and runuser without -g) gives a process every group of its account:
		 * statd and brokerd would get Docker too. runnerd alone needs it, and gets it
		 * without the membership. runuser -G alone would make docker the primary group,
		 * and runnerd could no longer read the root:<account> 0640 config. */
		struct group *pg = getgrgid(pw->pw_gid);
		const char *primary = pg ? pg->gr_name : pw->pw_name;
		report(d, DOCTOR_WARN, "account", "%s is a member of the %s group, so statd and brokerd get it too when "
		       "started by systemd or by runuser without -g, and that group is equivalent to root; fix: gpasswd "
		       "-d %s %s (runnerd alone needs it: its unit adds it with SupplementaryGroups=%s; started by hand, "
		       "runuser -u %s -g %s -G %s -- roundtable-sandbox-runnerd, and statd and brokerd with -g %s and "
		       "no -G)", pw->pw_name, DOCTOR_DOCKER_GROUP, pw->pw_name, DOCTOR_DOCKER_GROUP,
		       DOCTOR_DOCKER_GROUP, pw->pw_name, primary, DOCTOR_DOCKER_GROUP, primary);
		return;
	}
	report(d, DOCTOR_OK, "account", "%s (uid %lu, gid %lu); the %s group (root-equivalent) is runnerd's alone",
	       pw->pw_name, (unsigned long)pw->pw_uid, (unsigned long)pw->pw_gid, DOCTOR_DOCKER_GROUP);
}

/* ---- files and directories ---- */

static const char *cannot(int e)
{
	return e == EACCES ? "permission denied (run doctor as root or as the service account)" : strerror(e);
}

/* The permission bits (07: read, write, search) the service account gets on a file with
 * this owner and mode: its owner's, its group's when that is the account's primary group,
 * else its others'. Supplementary groups and ACLs are not looked at (runnerd started by
 * hand has only its primary group besides docker), so a 0750 root:<other group> directory
 * reads as closed. Without the account nothing can be judged: everything is allowed. */
static unsigned account_perm(const struct doctor *d, const struct stat *st)
{
	if (!d->have_account || d->uid == 0)
		return 07;
	if (st->st_uid == d->uid)
		return (st->st_mode >> 6) & 07;
	if (st->st_gid == d->gid)
		return (st->st_mode >> 3) & 07;
	return st->st_mode & 07;
}

static bool account_can_read(const struct doctor *d, const struct stat *st)
{
	return account_perm(d, st) & 04;
}

/* "uid 1000 (alice)" or "uid 1000" for an id without a name. */
static void name_uid(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "uid %lu (%s)", (unsigned long)uid, pw->pw_name);
	else
		snprintf(buf, len, "uid %lu", (unsigned long)uid);
}

static void name_gid(gid_t gid, char *buf, size_t len)
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
static const char *other_writer(const struct doctor *d, const struct stat *st, char *buf, size_t len)
{
	char id[96];
	if (st->st_mode & S_IWOTH)
		return "other users";
	if ((st->st_mode & S_IWGRP) && !gid_is_trusted(d, st->st_gid)) {
		name_gid(st->st_gid, id, sizeof(id));
		snprintf(buf, len, "the group %s", id);
		return buf;
	}
	if (!uid_is_trusted(d, st->st_uid)) {
		name_uid(st->st_uid, id, sizeof(id));
		snprintf(buf, len, "its owner %s", id);
		return buf;
	}
	return NULL;
}

/* The existing ancestors of path (not path itself), from "/" down. The service account
 * must be able to pass through each (search permission), and nobody else may rename
 * entries in one, or they could swap path for a directory of their own:
 *   writable by other users without the sticky bit: FAIL (the daemons refuse a root
 *   whose parent is like that, too);
 *   owned by a user other than root or the account, or writable by a group other than
 *   root's or the account's (without the sticky bit): warn, since those people must be
 *   trusted as much as root.
 * Prints at most one line: the first FAIL, else the first warning. When nearest is not
 * NULL, *nearest gets the deepest existing ancestor (caller frees; NULL when not even "/"
 * could be examined) and *nearest_st its stat(). Returns the verdict printed, DOCTOR_OK
 * when nothing was. */
static enum doctor_verdict check_ancestors(struct doctor *d, const char *check, const char *path, char **nearest,
					   struct stat *nearest_st)
{
	cleanup_free char *warning = NULL;
	cleanup_free char *deepest = NULL;
	struct stat deepest_st = {0};
	size_t n = strlen(path);
	for (size_t i = 0; i < n; i++) {
		if (path[i] != '/')
			continue;
		/* "/a/b/c" gives "/", "/a" and "/a/b"; a symlink is judged by its target. */
		cleanup_free char *dir = i == 0 ? rts_xstrdup("/") : rts_xstrndup(path, i);
		struct stat st;
		if (stat(dir, &st) < 0)
			break; /* the rest does not exist (yet); the caller reports that */
		free(deepest);
		deepest = rts_xstrdup(dir);
		deepest_st = st;
		if (!S_ISDIR(st.st_mode))
			break; /* the caller finds path unreachable (ENOTDIR) and says so */
		unsigned mode = (unsigned)(st.st_mode & 07777);
		bool sticky = st.st_mode & S_ISVTX;
		if ((st.st_mode & S_IWOTH) && !sticky) {
			report(d, DOCTOR_FAIL, check, "%s is writable by other users without the sticky bit (mode %04o), so "
			       "any local user could replace %s with a directory of their own; fix: chmod o-w %s", dir, mode,
			       path, dir);
			return DOCTOR_FAIL;
		}
		if (!(account_perm(d, &st) & 01)) {
			char owner[96], group[96];
			name_uid(st.st_uid, owner, sizeof(owner));
			name_gid(st.st_gid, group, sizeof(group));
			report(d, DOCTOR_FAIL, check, "the service account cannot pass through %s (owner %s, group %s, mode "
			       "%04o), so the daemons cannot reach %s; fix: chmod o+x %s, or choose a path the account can "
			       "reach", dir, owner, group, mode, path, dir);
			return DOCTOR_FAIL;
		}
		if (warning)
			continue;
		if (!uid_is_trusted(d, st.st_uid)) {
			char owner[96];
			name_uid(st.st_uid, owner, sizeof(owner));
			warning = rts_xasprintf("%s belongs to %s, who could replace %s with a directory of their own; fix: "
						"chown root %s, or move %s out of it", dir, owner, path, dir, path);
		} else if ((st.st_mode & S_IWGRP) && !sticky && !gid_is_trusted(d, st.st_gid)) {
			char group[96];
			name_gid(st.st_gid, group, sizeof(group));
			warning = rts_xasprintf("%s is writable by the group %s (mode %04o), whose members could replace %s "
						"with a directory of their own; fix: chmod g-w %s", dir, group, mode, path, dir);
		}
	}
	if (nearest) {
		*nearest = steal_pointer(&deepest);
		*nearest_st = deepest_st;
	}
	if (warning) {
		report(d, DOCTOR_WARN, check, "%s", warning);
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
		report(d, DOCTOR_WARN, check, "%s does not exist yet; whether roundtable-sandbox-%s can create it cannot "
		       "be judged without the service account; fix: the account check above", path, daemon);
		return;
	}
	if (!S_ISDIR(nst->st_mode)) {
		report(d, DOCTOR_FAIL, check, "%s cannot be created: %s is not a directory; fix: move %s away or choose "
		       "another path", path, nearest, nearest);
		return;
	}
	if ((account_perm(d, nst) & 03) == 03) {
		report(d, DOCTOR_OK, check, "%s does not exist yet; roundtable-sandbox-%s creates it (mode 0700) at start",
		       path, daemon);
		return;
	}
	char owner[96], group[96];
	name_uid(nst->st_uid, owner, sizeof(owner));
	name_gid(nst->st_gid, group, sizeof(group));
	unsigned mode = (unsigned)(nst->st_mode & 07777);
	unsigned long uid = (unsigned long)d->uid, gid = (unsigned long)d->gid;
	if (unit_dir && strcmp(path, unit_dir) == 0) {
		/* The unit creates it; a daemon started by hand cannot. */
		if (systemd_booted())
			report(d, DOCTOR_OK, check, "%s does not exist yet; roundtable-sandbox-%s.service creates it at "
			       "start (started by hand, the daemon could not: create it first with install -d -o %lu -g %lu "
			       "-m 0700 %s)", path, daemon, uid, gid, path);
		else
			report(d, DOCTOR_WARN, check, "%s does not exist yet, and without systemd (whose "
			       "roundtable-sandbox-%s.service would create it) the daemon cannot: the service account may not "
			       "write in %s (owner %s, group %s, mode %04o); fix: install -d -o %lu -g %lu -m 0700 %s", path,
			       daemon, nearest, owner, group, mode, uid, gid, path);
		return;
	}
	report(d, DOCTOR_FAIL, check, "%s does not exist, and roundtable-sandbox-%s cannot create it at start: the "
	       "service account (uid %lu) may not write in %s (owner %s, group %s, mode %04o); fix: install -d -o %lu "
	       "-g %lu -m 0700 %s, or choose a path under a directory the account owns", path, daemon, uid, nearest,
	       owner, group, mode, uid, gid, path);
}

/* A root or the state directory: seed rules "dedicated, owned by the service account, no
 * group/other permissions", symlinks refused. daemon creates it when missing, unit_dir is
 * where its unit creates it (check_missing_dir). */
static void check_private_dir(struct doctor *d, const char *check, const char *path, const char *daemon,
			      const char *unit_dir)
{
	cleanup_free char *nearest = NULL;
	struct stat nst;
	enum doctor_verdict parents = check_ancestors(d, check, path, &nearest, &nst);
	if (parents == DOCTOR_FAIL)
		return;
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT || e == ENOTDIR)
			check_missing_dir(d, check, path, daemon, unit_dir, nearest, &nst);
		else
			report(d, DOCTOR_FAIL, check, "cannot inspect %s: %s", path, cannot(e));
		return;
	}
	if (S_ISLNK(st.st_mode)) {
		report(d, DOCTOR_FAIL, check, "%s is a symbolic link, which the daemons refuse; fix: point the config "
		       "at the real directory", path);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		report(d, DOCTOR_FAIL, check, "%s is not a directory; fix: move it away and let the daemons create it",
		       path);
		return;
	}
	if (!d->have_account) {
		report(d, DOCTOR_FAIL, check, "%s cannot be judged without the service account; fix: the account "
		       "check above", path);
		return;
	}
	if (st.st_uid != d->uid) {
		report(d, DOCTOR_FAIL, check, "%s is owned by uid %lu, not by the service account (uid %lu); fix: "
		       "chown %lu:%lu %s", path, (unsigned long)st.st_uid, (unsigned long)d->uid,
		       (unsigned long)d->uid, (unsigned long)d->gid, path);
		return;
	}
	if (st.st_mode & 077) {
		report(d, DOCTOR_FAIL, check, "%s has mode %04o; it must have no group/other permissions; fix: chmod "
		       "0700 %s", path, (unsigned)(st.st_mode & 07777), path);
		return;
	}
	if (parents == DOCTOR_OK)
		report(d, DOCTOR_OK, check, "%s: directory of uid %lu, mode %04o", path, (unsigned long)st.st_uid,
		       (unsigned)(st.st_mode & 07777));
}

/* The state file, judged the way statd judges it at start: statd_state_load() must accept
 * it (statd refuses to start otherwise and never replaces the file), and the account must
 * be able to read it. statd writes it 0600 itself; looser bits or another owner are only
 * warnings, since statd starts with them and its next change replaces the file. */
static void check_state_file(struct doctor *d, const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			report(d, DOCTOR_OK, "stateFile", "%s does not exist yet: statd creates it at its first start "
			       "(from initialChannels)", path);
		else
			report(d, DOCTOR_FAIL, "stateFile", "cannot inspect %s: %s", path, cannot(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		report(d, DOCTOR_FAIL, "stateFile", "%s is not a regular file (symbolic links are refused); fix: "
		       "restore the file from a backup", path);
		return;
	}
	unsigned mode = (unsigned)(st.st_mode & 07777);
	if (!account_can_read(d, &st)) {
		report(d, DOCTOR_FAIL, "stateFile", "the service account cannot read %s (owner uid %lu, group %lu, mode "
		       "%04o), so statd refuses to start; fix: chown %lu:%lu %s && chmod 0600 %s", path,
		       (unsigned long)st.st_uid, (unsigned long)st.st_gid, mode, (unsigned long)d->uid,
		       (unsigned long)d->gid, path, path);
		return;
	}
	char err[1024];
	struct statd_state *s = NULL;
	int r = statd_state_load(path, &s, err, sizeof(err));
	if (r < 0) {
		if (r == -EACCES && geteuid() != 0 && (!d->have_account || geteuid() != d->uid))
			report(d, DOCTOR_FAIL, "stateFile", "cannot read %s: %s", path, cannot(EACCES));
		else
			report(d, DOCTOR_FAIL, "stateFile", "%s; statd refuses to start with it and never replaces it; fix: "
			       "repair it (roundtable-sandbox-statd(8) shows the format) or restore it from a backup", err);
		return;
	}
	size_t channels = statd_state_count(s), on = statd_state_count_on(s);
	statd_state_free(s);
	if (d->have_account && st.st_uid != d->uid) {
		report(d, DOCTOR_WARN, "stateFile", "%s belongs to uid %lu, not to the service account; statd reads it, "
		       "and its next change replaces it with a file of its own; fix: chown %lu:%lu %s", path,
		       (unsigned long)st.st_uid, (unsigned long)d->uid, (unsigned long)d->gid, path);
		return;
	}
	if (st.st_mode & 077) {
		report(d, DOCTOR_WARN, "stateFile", "%s has mode %04o, but it lists every channel key and statd writes "
		       "it 0600 (for now, only the private state directory keeps others out); fix: chmod 0600 %s", path,
		       mode, path);
		return;
	}
	report(d, DOCTOR_OK, "stateFile", "%s: %zu channels, %zu on; %lld bytes, mode %04o", path, channels, on,
	       (long long)st.st_size, mode);
}

static void check_config_file(struct doctor *d, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno != ENOENT) /* a missing file was reported by the config check */
			report(d, DOCTOR_FAIL, "config file", "cannot inspect %s: %s", path, cannot(errno));
		return;
	}
	char who[128];
	const char *writer = other_writer(d, &st, who, sizeof(who));
	if (writer) {
		report(d, DOCTOR_FAIL, "config file", "%s can be changed by %s (mode %04o), and it names the commands "
		       "brokerd runs; fix: chown root:%lu %s && chmod 0640 %s", path, writer,
		       (unsigned)(st.st_mode & 07777), (unsigned long)(d->have_account ? d->gid : 0), path, path);
		return;
	}
	if (!account_can_read(d, &st)) {
		report(d, DOCTOR_FAIL, "config file", "the service account cannot read %s (owner %lu, group %lu, mode "
		       "%04o); fix: chown root:%lu %s && chmod 0640 %s", path, (unsigned long)st.st_uid,
		       (unsigned long)st.st_gid, (unsigned)(st.st_mode & 07777), (unsigned long)d->gid, path, path);
		return;
	}
	report(d, DOCTOR_OK, "config file", "%s: owner %lu, group %lu, mode %04o", path, (unsigned long)st.st_uid,
	       (unsigned long)st.st_gid, (unsigned)(st.st_mode & 07777));
}

/* A file holding a secret: regular, not empty, readable by the reader named in reader_note,
 * and by nobody else. The contents are never read. */
static void check_secret_file(struct doctor *d, const char *check, const char *path, bool read_by_root)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT && read_by_root)
			report(d, DOCTOR_FAIL, check, "%s does not exist, and brokerd's unit loads the model key from it; "
			       "fix: (umask 077; cat >%s), paste the key, then Ctrl-D", path, path);
		else if (e == ENOENT)
			report(d, DOCTOR_FAIL, check, "%s does not exist; fix: write the key there, readable only by the "
			       "service account", path);
		else
			report(d, DOCTOR_FAIL, check, "cannot inspect %s: %s", path, cannot(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		report(d, DOCTOR_FAIL, check, "%s is not a regular file", path);
		return;
	}
	/* Mode and owner in one line, so one round of fixes is enough. */
	bool wrong_owner = !read_by_root && d->have_account && st.st_uid != d->uid;
	if (st.st_mode & 077) {
		const char *who = (st.st_mode & 070) && (st.st_mode & 07) ? "its group and other users"
				  : (st.st_mode & 070)			 ? "its group"
									 : "other users";
		if (wrong_owner)
			report(d, DOCTOR_FAIL, check, "%s has mode %04o and owner uid %lu: %s may read the key, which "
			       "must be brokerd's (uid %lu) alone; fix: chown %lu %s && chmod 0600 %s", path, (unsigned)(st.st_mode & 07777),
			       (unsigned long)st.st_uid, who, (unsigned long)d->uid, (unsigned long)d->uid, path, path);
		else
			report(d, DOCTOR_FAIL, check, "%s has mode %04o: %s may read the key; fix: chmod 0600 %s", path,
			       (unsigned)(st.st_mode & 07777), who, path);
		return;
	}
	if (st.st_size == 0) {
		report(d, DOCTOR_FAIL, check, "%s is empty, so every model call fails closed; fix: write the key", path);
		return;
	}
	if (read_by_root) {
		if (st.st_uid != 0) {
			report(d, DOCTOR_WARN, check, "%s is owned by uid %lu; only root needs it (systemd copies it for "
			       "brokerd); fix: chown root:root %s", path, (unsigned long)st.st_uid, path);
			return;
		}
	} else if (wrong_owner) {
		report(d, DOCTOR_FAIL, check, "%s is owned by uid %lu, so brokerd (uid %lu) cannot read it; fix: chown "
		       "%lu %s", path, (unsigned long)st.st_uid, (unsigned long)d->uid, (unsigned long)d->uid, path);
		return;
	}
	report(d, DOCTOR_OK, check, "%s: %lld bytes, owner %lu, mode %04o (contents not read)", path,
	       (long long)st.st_size, (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
}

/* A program brokerd runs (tool or key command): executable, and writable only by root or
 * the service account. */
static void check_program(struct doctor *d, const char *check, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		report(d, DOCTOR_FAIL, check, "%s: %s; fix: install it or correct the config", path, cannot(errno));
		return;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		report(d, DOCTOR_FAIL, check, "%s is not an executable file; fix: chmod 0755 %s", path, path);
		return;
	}
	char who[128];
	const char *writer = other_writer(d, &st, who, sizeof(who));
	if (writer) {
		report(d, DOCTOR_FAIL, check, "%s can be changed by %s (mode %04o), and brokerd runs it with its "
		       "credentials at hand; fix: chown root:root %s && chmod 0755 %s", path, writer,
		       (unsigned)(st.st_mode & 07777), path, path);
		return;
	}
	enum doctor_verdict parents = check_ancestors(d, check, path, NULL, NULL);
	if (parents == DOCTOR_OK)
		report(d, DOCTOR_OK, check, "%s is executable and writable only by root or the service account", path);
}

static void check_key_source(struct doctor *d, const char *check, const struct rts_key_source *k)
{
	switch (k->kind) {
	case RTS_KEY_CREDENTIAL: {
		const char *credentials = getenv("CREDENTIALS_DIRECTORY");
		if (credentials && *credentials) {
			cleanup_free char *p = rts_xasprintf("%s/%s", credentials, k->value);
			check_secret_file(d, check, p, false);
		} else if (strcmp(k->value, DOCTOR_DEFAULT_CREDENTIAL) == 0) {
			check_secret_file(d, check, DOCTOR_KEY_FILE, true);
		} else {
			report(d, DOCTOR_WARN, check, "credential \"%s\": brokerd's unit passes only \"%s\"; fix: add "
			       "LoadCredential=%s:PATH in a drop-in for roundtable-sandbox-brokerd.service", k->value,
			       DOCTOR_DEFAULT_CREDENTIAL, k->value);
		}
		return;
	}
	case RTS_KEY_FILE:
		check_secret_file(d, check, k->value, false);
		return;
	case RTS_KEY_ENV:
		report(d, DOCTOR_OK, check, "read from brokerd's environment variable %s (not visible here; set it "
		       "with Environment= or EnvironmentFile= in a drop-in)", k->value);
		return;
	case RTS_KEY_COMMAND:
		check_program(d, check, k->argv[0]);
		return;
	}
}

/* ---- the config's values ---- */

static void check_layout(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	const char *problem = NULL;
	if (path_within(c->state_file, c->workspace_root))
		problem = "stateFile lies inside workspaceRoot, where guest containers write";
	else if (path_within(c->state_file, c->run_root))
		problem = "stateFile lies inside runRoot, whose turn directories are mounted into containers";
	else if (path_within(c->run_root, c->workspace_root) || path_within(c->workspace_root, c->run_root))
		problem = "runRoot and workspaceRoot overlap";
	if (problem) {
		report(d, DOCTOR_FAIL, "layout", "%s; fix: give stateFile, runRoot and workspaceRoot separate "
		       "directories (the defaults do)", problem);
		return;
	}
	report(d, DOCTOR_OK, "layout", "stateFile, runRoot and workspaceRoot are apart");
}

static void check_path_lengths(struct doctor *d)
{
	size_t broker = strlen(d->cfg->run_root) + strlen(DOCTOR_BROKER_SUFFIX);
	size_t sock = strlen(d->opts->runtime_dir) + 1 + strlen(RTS_SOCK_CONTROL);
	if (broker > RTS_BROKER_SOCK_PATH_MAX) {
		report(d, DOCTOR_FAIL, "path lengths", "runRoot %s makes broker socket paths of %zu characters, more than "
		       "%u; fix: choose a runRoot of at most %zu characters", d->cfg->run_root, broker,
		       RTS_BROKER_SOCK_PATH_MAX, RTS_BROKER_SOCK_PATH_MAX - strlen(DOCTOR_BROKER_SUFFIX));
		return;
	}
	if (sock > RTS_SUN_PATH_MAX) {
		report(d, DOCTOR_FAIL, "path lengths", "runtime directory %s makes socket paths of %zu characters, more "
		       "than %u; fix: use a shorter --runtime-dir", d->opts->runtime_dir, sock, RTS_SUN_PATH_MAX);
		return;
	}
	report(d, DOCTOR_OK, "path lengths", "broker socket paths %zu of %u characters, runtime sockets %zu of %u",
	       broker, RTS_BROKER_SOCK_PATH_MAX, sock, RTS_SUN_PATH_MAX);
}

static const char *const unit_hidden[] = {"/home", "/root", "/run/user", "/tmp", "/var/tmp"};

/* The directory of unit_hidden that holds path, or NULL. */
static const char *unit_hides(const char *path)
{
	for (size_t h = 0; h < RTS_ARRAY_SIZE(unit_hidden); h++)
		if (path_within(path, unit_hidden[h]))
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
	report(d, DOCTOR_WARN, "units", "%s %s is under %s, which roundtable-sandbox-brokerd.service hides "
	       "(ProtectHome=/PrivateTmp=): brokerd would not find it there; fix: move it, e.g. under /etc", key, path,
	       dir);
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
static void check_unit_paths(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	cleanup_free char *state_dir = dir_of(c->state_file);
	const struct {
		const char *key, *path, *unit_dir, *unit;
	} p[] = {
		{"runRoot", c->run_root, DOCTOR_UNIT_RUN_ROOT, "runnerd"},
		{"workspaceRoot", c->workspace_root, DOCTOR_UNIT_STATE_DIR, "statd"},
		{"stateFile", state_dir, DOCTOR_UNIT_STATE_DIR, "statd"},
	};
	unsigned problems = 0;
	for (size_t i = 0; i < RTS_ARRAY_SIZE(p); i++) {
		const char *dir = unit_hides(p[i].path);
		if (dir) {
			report(d, DOCTOR_WARN, "units", "%s %s is under %s, which roundtable-sandbox-%s.service hides "
			       "(ProtectHome=/PrivateTmp=); fix: move it, or relax that in a drop-in", p[i].key, p[i].path,
			       dir, p[i].unit);
			problems++;
		} else if (!path_within(p[i].path, p[i].unit_dir)) {
			report(d, DOCTOR_WARN, "units", "%s %s is outside %s, the only place roundtable-sandbox-%s.service "
			       "may write; fix: add ReadWritePaths=%s in a drop-in (systemctl edit)", p[i].key, p[i].path,
			       p[i].unit_dir, p[i].unit, p[i].path);
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
		report(d, DOCTOR_OK, "units",
		       "the roots and what brokerd reads are where the shipped systemd units expect them");
}

static void check_time_zone(struct doctor *d)
{
	cleanup_free char *path = rts_xasprintf(DOCTOR_ZONEINFO_DIR "/%s", d->cfg->time_zone);
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		report(d, DOCTOR_FAIL, "timeZone", "%s is not a known time zone (%s is missing), and runnerd refuses to "
		       "start; fix: install tzdata or choose an IANA name such as \"UTC\"", d->cfg->time_zone, path);
		return;
	}
	report(d, DOCTOR_OK, "timeZone", "%s", d->cfg->time_zone);
}

static void check_brokerd_inputs(struct doctor *d)
{
	const struct rts_config *c = d->cfg;
	check_key_source(d, "apiKey", &c->api_key);
	for (size_t i = 0; i < c->n_mcp; i++) {
		if (!c->mcp[i].has_api_key)
			continue;
		char check[64];
		snprintf(check, sizeof(check), "mcp[%zu].apiKey", i);
		check_key_source(d, check, &c->mcp[i].api_key);
	}
	if (c->ca_file) {
		struct stat st;
		if (stat(c->ca_file, &st) < 0 || !S_ISREG(st.st_mode))
			report(d, DOCTOR_FAIL, "caFile", "%s is not a readable file; fix: correct \"caFile\" or remove it to "
			       "use the system trust store", c->ca_file);
		else if (!account_can_read(d, &st))
			report(d, DOCTOR_FAIL, "caFile", "the service account cannot read %s; fix: chmod 0644 %s", c->ca_file,
			       c->ca_file);
		else
			report(d, DOCTOR_OK, "caFile", "%s", c->ca_file);
	}
	for (size_t i = 0; i < c->n_tools; i++) {
		char check[80];
		snprintf(check, sizeof(check), "tools[%zu] %s", i, c->tools[i].name);
		check_program(d, check, c->tools[i].command[0]);
	}
}

/* ---- Docker ---- */

/* Run the docker CLI with a deadline; *out gets stdout with trailing whitespace removed,
 * *err the first line of its stderr (both caller-freed). Returns cli_spawn's result. */
static int run_docker(char *const argv[], char **out, char **err)
{
	*out = NULL;
	*err = NULL;
	/* Catch docker's stderr so its complaint ends up in our one line. */
	cleanup_close int mfd = memfd_create("doctor-docker-stderr", MFD_CLOEXEC);
	cleanup_close int saved = mfd >= 0 ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3) : -1;
	fflush(stderr);
	if (saved >= 0 && dup2(mfd, STDERR_FILENO) < 0) {
		close(saved);
		saved = -1;
	}
	int r = cli_spawn(argv, out, DOCTOR_DOCKER_OUT_MAX, DOCTOR_DOCKER_TIMEOUT_MS);
	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		char buf[512];
		ssize_t n = pread(mfd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			*err = rts_xstrdup(buf);
		}
	}
	if (*out) {
		size_t n = strlen(*out);
		while (n > 0 && ((*out)[n - 1] == '\n' || (*out)[n - 1] == ' ' || (*out)[n - 1] == '\r'))
			(*out)[--n] = '\0';
	}
	return r;
}

static const char *docker_failure(int r, const char *err, char *buf, size_t len)
{
	if (r == 127)
		snprintf(buf, len, "cannot run %s", RTS_DOCKER);
	else if (r == -ETIMEDOUT)
		snprintf(buf, len, "no answer within %u s", DOCTOR_DOCKER_TIMEOUT_MS / 1000);
	else if (r < 0)
		snprintf(buf, len, "%s", strerror(-r));
	else
		snprintf(buf, len, "exit status %d%s%s", r, err && *err ? ": " : "", err ? err : "");
	return buf;
}

static bool check_docker(struct doctor *d)
{
	char *const version[] = {RTS_DOCKER, "version", "--format", "{{.Server.Version}}", NULL};
	cleanup_free char *out = NULL, *err = NULL;
	char why[640];
	int r = run_docker(version, &out, &err);
	if (r != 0 || !out || !*out) {
		/* The service account is not in the docker group (only runnerd's unit adds it),
		 * so doctor run as that account cannot look: say so instead of failing. */
		if (geteuid() != 0 && err && strcasestr(err, "permission denied")) {
			report(d, DOCTOR_WARN, "docker", "not checked: this account may not use the Docker socket (only "
			       "runnerd gets the docker group, from its unit); fix: run doctor as root to check Docker, its "
			       "data root and the image");
			return false;
		}
		report(d, DOCTOR_FAIL, "docker", "the Docker daemon does not answer (%s); fix: start it (systemctl start "
		       "docker), or run doctor as root if the socket refused this account",
		       docker_failure(r, err, why, sizeof(why)));
		return false;
	}
	report(d, DOCTOR_OK, "docker", "dockerd %s answers (%s)", out, RTS_DOCKER);
	return true;
}

static void check_docker_root(struct doctor *d)
{
	char *const info[] = {RTS_DOCKER, "info", "--format", "{{.DockerRootDir}}", NULL};
	cleanup_free char *out = NULL, *err = NULL;
	char why[640];
	int r = run_docker(info, &out, &err);
	if (r != 0 || !out || out[0] != '/') {
		report(d, DOCTOR_FAIL, "docker data root", "cannot read it (%s)", docker_failure(r, err, why, sizeof(why)));
		return;
	}
	const struct rts_config *c = d->cfg;
	cleanup_free char *state_dir = dir_of(c->state_file);
	const char *const key[] = {"runRoot", "workspaceRoot", "stateFile"};
	const char *const path[] = {c->run_root, c->workspace_root, state_dir};
	for (size_t i = 0; i < RTS_ARRAY_SIZE(key); i++) {
		if (path_within(path[i], out) || path_within(out, path[i])) {
			report(d, DOCTOR_FAIL, "docker data root", "%s %s overlaps Docker's data root %s, where Docker "
			       "refuses private bind propagation; fix: move it outside", key[i], path[i], out);
			return;
		}
	}
	report(d, DOCTOR_OK, "docker data root", "%s holds none of the roots", out);
}

static void check_image(struct doctor *d)
{
	const char *image = d->cfg->image;
	char *const inspect[] = {RTS_DOCKER, "image", "inspect", "--format", "{{.Id}}", (char *)image, NULL};
	cleanup_free char *out = NULL, *err = NULL;
	int r = run_docker(inspect, &out, &err);
	if (r != 0 || !out || !*out) {
		report(d, DOCTOR_FAIL, "image", "%s is not in the local image store (turns run with --pull never); fix: "
		       "roundtable-sandbox image build (from %s/image)", image, RTS_PKGLIBDIR);
		return;
	}
	report(d, DOCTOR_OK, "image", "%s is %.19s", image, out);
}

/* ---- the runtime directory and the sockets ---- */

static void check_runtime_dir(struct doctor *d)
{
	const char *dir = d->opts->runtime_dir;
	struct stat st;
	if (lstat(dir, &st) < 0) {
		report(d, DOCTOR_FAIL, "runtime dir", "%s: %s; fix: start the socket units (systemctl start "
		       "roundtable-sandbox-statd.socket roundtable-sandbox-runnerd.socket "
		       "roundtable-sandbox-brokerd.socket)", dir, cannot(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		report(d, DOCTOR_FAIL, "runtime dir", "%s is not a directory", dir);
		return;
	}
	char who[128];
	const char *writer = other_writer(d, &st, who, sizeof(who));
	if (writer) {
		report(d, DOCTOR_FAIL, "runtime dir", "%s can be changed by %s (mode %04o), who could put their own "
		       "sockets there; fix: chown root:root %s && chmod 0755 %s", dir, writer,
		       (unsigned)(st.st_mode & 07777), dir, dir);
		return;
	}
	report(d, DOCTOR_OK, "runtime dir", "%s: owner %lu, mode %04o", dir, (unsigned long)st.st_uid,
	       (unsigned)(st.st_mode & 07777));
}

/* The socket file at path: a socket, owned by the service account (or root for a socket
 * unit without SocketUser=), and no wider than max_mode. Returns false after reporting. */
static bool check_socket_file(struct doctor *d, const char *check, const char *daemon, const char *path,
			      mode_t max_mode)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		report(d, DOCTOR_FAIL, check, "%s: %s; fix: start the daemon or its socket unit (systemctl start "
		       "roundtable-sandbox-%s.socket)", path, cannot(errno), daemon);
		return false;
	}
	if (!S_ISSOCK(st.st_mode)) {
		report(d, DOCTOR_FAIL, check, "%s is not a socket; fix: remove it and restart the daemon", path);
		return false;
	}
	if (!uid_is_trusted(d, st.st_uid)) {
		report(d, DOCTOR_FAIL, check, "%s belongs to uid %lu; fix: stop whatever created it and restart the "
		       "daemon", path, (unsigned long)st.st_uid);
		return false;
	}
	if ((st.st_mode & 0777) & ~max_mode) {
		report(d, DOCTOR_FAIL, check, "%s has mode %04o, wider than %04o: other local users could connect; fix: "
		       "chmod %04o %s (or SocketMode= in the socket unit)", path, (unsigned)(st.st_mode & 0777),
		       (unsigned)max_mode, (unsigned)max_mode, path);
		return false;
	}
	return true;
}

/* statd must answer a status request: the same round trip the bot and the CLI make. */
static void check_control_socket(struct doctor *d)
{
	cleanup_free char *path = rts_runtime_path(d->opts->runtime_dir, RTS_SOCK_CONTROL);
	if (!check_socket_file(d, RTS_SOCK_CONTROL, "statd", path, 0660))
		return;
	int fd = rts_connect_unix(path, SOCK_STREAM, 0);
	if (fd < 0) {
		report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "cannot connect to %s: %s; fix: %s", path, strerror(-fd),
		       fd == -ECONNREFUSED ? "nothing listens: start statd (a stale socket file is replaced at start)"
					   : "run doctor as root or as a member of the service account's group");
		return;
	}
	cleanup_close int cfd = fd;
	struct timeval tv = {.tv_sec = DOCTOR_SOCKET_TIMEOUT_S};
	(void)setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	static const char req[] = "{\"op\":\"status\",\"id\":\"doctor\"}\n";
	int r = rts_write_all(cfd, req, sizeof(req) - 1);
	char buf[DOCTOR_ANSWER_MAX];
	size_t len = 0;
	while (r == 0 && len < sizeof(buf) && !memchr(buf, '\n', len)) {
		ssize_t n = read(cfd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			r = n < 0 ? -errno : -ECONNRESET;
		else
			len += (size_t)n;
	}
	char *nl = r == 0 ? memchr(buf, '\n', len) : NULL;
	cleanup_json json_object *answer = NULL;
	const char *why = NULL;
	if (!nl || rts_json_parse(buf, (size_t)(nl - buf), 8, &answer, &why) < 0) {
		report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "statd did not answer a status request within %d s (%s); fix: "
		       "look at its log (journalctl -u roundtable-sandbox-statd)", DOCTOR_SOCKET_TIMEOUT_S,
		       r == -EAGAIN ? "timed out" : r < 0 ? strerror(-r) : why ? why : "no complete line");
		return;
	}
	json_object *ok = rts_json_get(answer, "ok");
	json_object *ch = rts_json_get(answer, "channels"), *on = rts_json_get(answer, "on");
	json_object *running = rts_json_get(answer, "running"), *queued = rts_json_get(answer, "queued");
	if (!ok || !json_object_get_boolean(ok) || !ch || !on || !running || !queued) {
		report(d, DOCTOR_FAIL, RTS_SOCK_CONTROL, "statd's status answer is not understood; fix: make sure the "
		       "CLI and the daemons come from the same version");
		return;
	}
	report(d, DOCTOR_OK, RTS_SOCK_CONTROL, "statd answers: %lld channels, %lld on, %lld running, %lld queued",
	       (long long)json_object_get_int64(ch), (long long)json_object_get_int64(on),
	       (long long)json_object_get_int64(running), (long long)json_object_get_int64(queued));
}

/* Look for a listening socket bound to path in /proc/net/unix (sockets of our network
 * namespace; systemd's activated sockets are there). Returns its type (SOCK_*), 0 when
 * none is listening there, or -errno. Nothing connects, so no daemon logs a refused peer
 * and no socket unit starts its service. */
static int listening_type(const char *path)
{
	cleanup_fclose FILE *f = fopen("/proc/net/unix", "re");
	if (!f)
		return -errno;
	char line[PATH_MAX + 128];
	int type = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long flags;
		unsigned t, st;
		int pos = -1;
		if (sscanf(line, "%*s %*x %*x %lx %x %x %*u %n", &flags, &t, &st, &pos) != 3 || pos < 0)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = '\0';
		/* __SO_ACCEPTCON: the socket listens. */
		if ((flags & 0x10000) && strcmp(p, path) == 0) {
			if ((int)t == SOCK_SEQPACKET || type == 0)
				type = (int)t;
		}
	}
	return type;
}

static void check_link_socket(struct doctor *d, const char *name, const char *daemon)
{
	cleanup_free char *path = rts_runtime_path(d->opts->runtime_dir, name);
	if (!check_socket_file(d, name, daemon, path, 0600))
		return;
	int t = listening_type(path);
	if (t == SOCK_SEQPACKET) {
		report(d, DOCTOR_OK, name, "%s listens (SOCK_SEQPACKET)", path);
		return;
	}
	if (t > 0) {
		report(d, DOCTOR_FAIL, name, "%s listens with socket type %d, not SOCK_SEQPACKET; fix: use "
		       "ListenSequentialPacket= in roundtable-sandbox-%s.socket", path, t, daemon);
		return;
	}
	/* Not in our network namespace's table: a daemon that bound it itself inside another
	 * one. A connection tells; the daemon refuses it unless we are the service account. */
	int fd = rts_connect_unix(path, SOCK_SEQPACKET, 0);
	if (fd >= 0) {
		close(fd);
		report(d, DOCTOR_OK, name, "%s accepts connections (SOCK_SEQPACKET)", path);
	} else if (fd == -EPROTOTYPE) {
		report(d, DOCTOR_FAIL, name, "%s is not a SOCK_SEQPACKET socket; fix: use ListenSequentialPacket= in "
		       "roundtable-sandbox-%s.socket", path, daemon);
	} else {
		report(d, DOCTOR_FAIL, name, "nothing listens on %s (%s): roundtable-sandbox-%s is not running and the "
		       "file is stale; fix: start it (systemctl start roundtable-sandbox-%s.socket)", path,
		       strerror(-fd), daemon, daemon);
	}
}

/* ---- the command ---- */

/* The config, loaded with the daemons' own loader; the message is the loader's. The fix
 * depends on what kind of problem it is: a file that is not strict JSON (the message
 * shows where), or one that is but breaks a rule (the message names the key path). */
static struct rts_config *check_config(struct doctor *d, const char *path)
{
	char err[1024];
	struct rts_config *cfg = rts_config_load(path, err, sizeof(err));
	if (cfg) {
		report(d, DOCTOR_OK, "config", "%s is valid (installation %s, image %s)", path, cfg->installation_id,
		       cfg->image);
		return cfg;
	}
	/* Read it again as plain strict JSON, only to tell the two kinds apart. */
	char again[1024];
	cleanup_json json_object *root = NULL;
	int r = rts_json_read_file_strict(path, RTS_CONFIG_MAX_BYTES, RTS_JSON_DEPTH_MAX, &root, again, sizeof(again));
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
	report(d, DOCTOR_FAIL, "config", "%s; fix: %s", err, fix);
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
	struct rts_config *cfg = check_config(&d, o->config_path);
	d.cfg = cfg;
	check_account(&d);
	check_config_file(&d, o->config_path);
	if (cfg) {
		cleanup_free char *state_dir = dir_of(cfg->state_file);
		check_private_dir(&d, "runRoot", cfg->run_root, "runnerd", DOCTOR_UNIT_RUN_ROOT);
		check_private_dir(&d, "workspaceRoot", cfg->workspace_root, "statd", DOCTOR_UNIT_WORKSPACE_ROOT);
		check_private_dir(&d, "state dir", state_dir, "statd", DOCTOR_UNIT_STATE_DIR "/state");
		check_state_file(&d, cfg->state_file);
		check_layout(&d);
		check_path_lengths(&d);
		check_unit_paths(&d);
		check_time_zone(&d);
		check_brokerd_inputs(&d);
	}
	if (!offline) {
		if (check_docker(&d) && cfg) {
			check_docker_root(&d);
			check_image(&d);
		}
		check_runtime_dir(&d);
		check_control_socket(&d);
		check_link_socket(&d, RTS_SOCK_RUNNERD, "runnerd");
		check_link_socket(&d, RTS_SOCK_BROKERD, "brokerd");
	}
	rts_config_free(cfg);
	printf("summary: %u ok, %u warnings, %u failed\n", d.n[DOCTOR_OK], d.n[DOCTOR_WARN], d.n[DOCTOR_FAIL]);
	return d.n[DOCTOR_FAIL] ? 1 : 0;
}
