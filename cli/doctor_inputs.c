/* SPDX-License-Identifier: Apache-2.0 */
/* doctor: the files the daemons read and run: the config file itself, the time zone,
 * brokerd's key sources, CA file and programs (cli/doctor.c lists the checks). */
#include "config.h"

#include <sys/stat.h>

#include "cli/doctor_checks.h"
#include "common/acl.h"
#include "common/paths.h"
#include "common/util.h"

void doctor_check_config_file(struct doctor *d, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno != ENOENT) /* a missing file was reported by the config check */
			doctor_report(d, DOCTOR_FAIL, "config file", "cannot inspect %s: %s", path,
			              doctor_cannot(errno));
		return;
	}
	char who[128];
	const char *writer = doctor_writer_besides_root(d, &st, who, sizeof(who));
	if (writer && d->accounts) {
		doctor_report(d, DOCTOR_FAIL, "config file", "%s can be changed by %s (mode %04o), and it names the "
		              "commands brokerd runs and the accounts every daemon runs as; fix: chown root:root %s && "
		              "chmod 0644 %s", path, writer, (unsigned)(st.st_mode & 07777), path, path);
		return;
	}
	if (writer) {
		doctor_report(d, DOCTOR_FAIL, "config file", "%s can be changed by %s (mode %04o), and it names the "
		              "commands brokerd runs; fix: chown root:%lu %s && chmod 0640 %s", path, writer,
		              (unsigned)(st.st_mode & 07777), (unsigned long)(d->have_account ? d->gid : 0), path,
		              path);
		return;
	}
	/* Root alone may change it, in accounts mode (else the service account too); by an ACL
	 * entry neither. */
	const uid_t svc[] = {d->svc_uid};
	const char *risk = "change the commands brokerd runs";
	if (!doctor_acl_only(d, "config file", path, svc, d->accounts || !d->have_account ? 0 : 1, true, risk))
		return;
	/* Nor may anyone else replace it: its directory, likewise. */
	cleanup_free char *real = realpath(path, NULL);
	cleanup_free char *dir = doctor_dir_of(real ? real : path);
	struct stat dst;
	if (stat(dir, &dst) == 0) {
		struct stat masked = dst;
		/* A sticky directory lets nobody but a file's owner replace that file. */
		if (dst.st_mode & S_ISVTX)
			masked.st_mode &= ~(mode_t)(S_IWGRP | S_IWOTH);
		const char *dwriter = d->accounts ? doctor_writer_besides_root(d, &masked, who, sizeof(who))
						  : doctor_other_writer(d, &masked, who, sizeof(who));
		if (dwriter) {
			doctor_report(d, DOCTOR_FAIL, "config file", "%s, the config file's directory, can be changed by "
			              "%s (mode %04o), who could replace %s with a config of their own and so change "
			              "the commands brokerd runs; fix: chown root:root %s && chmod 0755 %s", dir, dwriter,
			              (unsigned)(dst.st_mode & 07777), path, dir, dir);
			return;
		}
		if (!(dst.st_mode & S_ISVTX) &&
		    !doctor_acl_only(d, "config file", dir, svc, d->accounts || !d->have_account ? 0 : 1, true,
				     "replace the config file in it and so change the commands brokerd runs"))
			return;
	}
	if (d->accounts) {
		/* All three daemon accounts read it (it holds no secret: keys come from key
		 * sources). */
		const struct {
			const char *daemon;
		} readers[] = {{"statd"}, {"runnerd"}, {"brokerd"}};
		for (size_t i = 0; i < RTS_ARRAY_SIZE(readers); i++) {
			uid_t uid;
			gid_t gid;
			doctor_daemon_account(d, readers[i].daemon, &uid, &gid);
			/* ACL-aware: the package's upgrade lets broker and runner read a 0640
			 * config by ACL entries (debian/roundtable-sandbox.postinst). */
			int perms = rts_acl_perms_for(-1, path, &st, uid, gid);
			if (perms < 0 || !(perms & RTS_PERM_R)) {
				doctor_report(d, DOCTOR_FAIL, "config file", "%s's account (uid %lu) cannot read %s (owner %lu, "
				              "group %lu, mode %04o); fix: setfacl -m u:%lu:r %s (or chmod 0644 %s: it holds "
				              "no secret)", readers[i].daemon, (unsigned long)uid, path,
				              (unsigned long)st.st_uid, (unsigned long)st.st_gid,
				              (unsigned)(st.st_mode & 07777), (unsigned long)uid, path, path);
				return;
			}
		}
	} else if (!doctor_account_can_read(d, &st)) {
		doctor_report(d, DOCTOR_FAIL, "config file", "the service account cannot read %s (owner %lu, group "
		              "%lu, mode %04o); fix: chown root:%lu %s && chmod 0640 %s", path,
		              (unsigned long)st.st_uid, (unsigned long)st.st_gid, (unsigned)(st.st_mode & 07777),
		              (unsigned long)d->gid, path, path);
		return;
	}
	doctor_report(d, DOCTOR_OK, "config file", "%s: owner %lu, group %lu, mode %04o", path,
	              (unsigned long)st.st_uid, (unsigned long)st.st_gid, (unsigned)(st.st_mode & 07777));
}

static void check_secret_file_as(struct doctor *d, const char *check, const char *path, bool read_by_root);

/* A file holding a secret: regular, not empty, readable by brokerd's account (or, with
 * read_by_root, by root, for systemd's LoadCredential=), and by nobody else. In accounts
 * mode brokerd's account is the broker account (DESIGN.md 8.1: key files readable by the
 * broker account only). The contents are never read. */
static void check_secret_file(struct doctor *d, const char *check, const char *path, bool read_by_root)
{
	uid_t uid;
	gid_t gid;
	doctor_daemon_account(d, "brokerd", &uid, &gid);
	doctor_view_as(d, uid, gid);
	check_secret_file_as(d, check, path, read_by_root);
	doctor_view_as(d, d->svc_uid, d->svc_gid);
}

static void check_secret_file_as(struct doctor *d, const char *check, const char *path, bool read_by_root)
{
	struct stat st;
	/* brokerd reads a key file only by its own name (brokerd/keys.h); systemd, which
	 * reads the unit's credential as root, follows links. */
	if (!read_by_root && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is a symbolic link, which brokerd refuses to read (host tools "
		              "could read the file it points to); fix: mv \"$(readlink -f %s)\" %s", path, path, path);
		return;
	}
	if (stat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT && read_by_root)
			doctor_report(d, DOCTOR_FAIL, check, "%s does not exist, and brokerd's unit loads the model "
			              "key from it; fix: (umask 077; cat >%s), paste the key, then Ctrl-D", path,
			              path);
		else if (e == ENOENT)
			doctor_report(d, DOCTOR_FAIL, check, "%s does not exist; fix: write the key there, readable "
			              "only by brokerd's account (uid %lu)", path, (unsigned long)d->uid);
		else
			doctor_report(d, DOCTOR_FAIL, check, "cannot inspect %s: %s", path, doctor_cannot(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is not a regular file", path);
		return;
	}
	/* Mode and owner in one line, so one round of fixes is enough. */
	bool wrong_owner = !read_by_root && d->have_account && st.st_uid != d->uid;
	if (st.st_mode & 077) {
		const char *who = (st.st_mode & 070) && (st.st_mode & 07) ? "its group and other users"
				  : (st.st_mode & 070)			 ? "its group"
									 : "other users";
		if (wrong_owner)
			doctor_report(d, DOCTOR_FAIL, check, "%s has mode %04o and owner uid %lu: %s may read the "
			              "key, which must be brokerd's (uid %lu) alone; fix: chown %lu %s && chmod 0600 "
			              "%s", path, (unsigned)(st.st_mode & 07777), (unsigned long)st.st_uid, who,
			              (unsigned long)d->uid, (unsigned long)d->uid, path, path);
		else
			doctor_report(d, DOCTOR_FAIL, check, "%s has mode %04o: %s may read the key; fix: chmod 0600 "
			              "%s", path, (unsigned)(st.st_mode & 07777), who, path);
		return;
	}
	if (st.st_size == 0) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is empty, so every model call fails closed; fix: write the "
		              "key", path);
		return;
	}
	if (read_by_root) {
		if (st.st_uid != 0) {
			doctor_report(d, DOCTOR_WARN, check, "%s is owned by uid %lu; only root needs it (systemd "
			              "copies it for brokerd); fix: chown root:root %s", path,
			              (unsigned long)st.st_uid, path);
			return;
		}
	} else if (wrong_owner) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is owned by uid %lu, so brokerd (uid %lu) cannot read it; "
		              "fix: chown %lu %s", path, (unsigned long)st.st_uid, (unsigned long)d->uid,
		              (unsigned long)d->uid, path);
		return;
	}
	doctor_report(d, DOCTOR_OK, check, "%s: %lld bytes, owner %lu, mode %04o (contents not read)", path,
	              (long long)st.st_size, (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
}

/* A program brokerd runs (tool or key command): executable, and writable only by root or
 * the service account. */
static void check_program(struct doctor *d, const char *check, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		doctor_report(d, DOCTOR_FAIL, check, "%s: %s; fix: install it or correct the config", path,
		              doctor_cannot(errno));
		return;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		doctor_report(d, DOCTOR_FAIL, check, "%s is not an executable file; fix: chmod 0755 %s", path, path);
		return;
	}
	char who[128];
	const char *writer = doctor_writer_besides_root(d, &st, who, sizeof(who));
	if (writer) {
		doctor_report(d, DOCTOR_FAIL, check, "%s can be changed by %s (mode %04o), and brokerd runs it with "
		              "its credentials at hand; fix: chown root:root %s && chmod 0755 %s", path, writer,
		              (unsigned)(st.st_mode & 07777), path, path);
		return;
	}
	enum doctor_verdict parents = doctor_check_ancestors(d, check, path, NULL, NULL);
	if (parents == DOCTOR_OK)
		doctor_report(d, DOCTOR_OK, check, "%s is executable and writable only by root%s", path,
		              d->accounts ? "" : " or the service account");
}

static void check_key_source(struct doctor *d, const char *check, const struct rts_key_source *k)
{
	switch (k->kind) {
	case RTS_KEY_CREDENTIAL: {
		const char *credentials = getenv("CREDENTIALS_DIRECTORY");
		if (credentials && *credentials) {
			cleanup_free char *p = rts_xasprintf("%s/%s", credentials, k->value);
			check_secret_file(d, check, p, false);
		} else if (strcmp(k->value, RTS_UNIT_KEY_CREDENTIAL) == 0) {
			check_secret_file(d, check, RTS_UNIT_KEY_FILE, true);
		} else {
			doctor_report(d, DOCTOR_WARN, check, "credential \"%s\": brokerd's unit passes only \"%s\"; "
			              "fix: add LoadCredential=%s:PATH in a drop-in for "
			              "roundtable-sandbox-brokerd.service", k->value, RTS_UNIT_KEY_CREDENTIAL,
			              k->value);
		}
		return;
	}
	case RTS_KEY_FILE:
		check_secret_file(d, check, k->value, false);
		return;
	case RTS_KEY_ENV:
		doctor_report(d, DOCTOR_OK, check, "read from brokerd's environment variable %s (not visible here; "
		              "set it with Environment= or EnvironmentFile= in a drop-in)", k->value);
		return;
	case RTS_KEY_COMMAND:
		check_program(d, check, k->argv[0]);
		return;
	}
}

void doctor_check_time_zone(struct doctor *d)
{
	/* runnerd's start-up check. */
	cleanup_free char *path = NULL;
	if (rts_time_zone_file(d->cfg->time_zone, &path) < 0) {
		doctor_report(d, DOCTOR_FAIL, "timeZone", "%s is not a known time zone (%s is missing), and runnerd "
		              "refuses to start; fix: install tzdata or choose an IANA name such as \"UTC\"",
		              d->cfg->time_zone, path);
		return;
	}
	doctor_report(d, DOCTOR_OK, "timeZone", "%s", d->cfg->time_zone);
}

void doctor_check_rich_inputs(struct doctor *d)
{
	const struct rts_rich_conf *r = &d->cfg->rich;
	if (!r->enabled)
		return;
	check_key_source(d, "rich.oauthToken", &r->oauth_token);
	/* brokerd runs these per turn with the guest's text or the session at hand. */
	if (r->effort_judge)
		check_program(d, "rich.effort.judge", r->effort_judge[0]);
	if (r->memory_command)
		check_program(d, "rich.memory", r->memory_command[0]);
	if (r->compaction_command)
		check_program(d, "rich.compaction", r->compaction_command[0]);
	size_t len = rts_rich_broker_sock_path_len(d->cfg->run_root);
	if (len > RTS_BROKER_SOCK_PATH_MAX)
		doctor_report(d, DOCTOR_FAIL, "rich path lengths", "runRoot %s makes rich broker socket paths "
		              "(runRoot/" RTS_RICH_DIR_PREFIX "<16 hex>/broker.sock) of %zu characters, more than %u; "
		              "fix: choose a runRoot of at most %zu characters", d->cfg->run_root, len,
		              RTS_BROKER_SOCK_PATH_MAX, RTS_BROKER_SOCK_PATH_MAX - (len - strlen(d->cfg->run_root)));
	else
		doctor_report(d, DOCTOR_OK, "rich path lengths", "rich broker socket paths %zu of %u characters", len,
		              RTS_BROKER_SOCK_PATH_MAX);
}

void doctor_check_brokerd_inputs(struct doctor *d)
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
		uid_t uid;
		gid_t gid;
		doctor_daemon_account(d, "brokerd", &uid, &gid);
		doctor_view_as(d, uid, gid);
		if (stat(c->ca_file, &st) < 0 || !S_ISREG(st.st_mode))
			doctor_report(d, DOCTOR_FAIL, "caFile", "%s is not a readable file; fix: correct \"caFile\" "
			              "or remove it to use the system trust store", c->ca_file);
		else if (!doctor_account_can_read(d, &st))
			doctor_report(d, DOCTOR_FAIL, "caFile", "brokerd's account cannot read %s; fix: chmod 0644 %s",
			              c->ca_file, c->ca_file);
		else
			doctor_report(d, DOCTOR_OK, "caFile", "%s", c->ca_file);
		doctor_view_as(d, d->svc_uid, d->svc_gid);
	}
	for (size_t i = 0; i < c->n_tools; i++) {
		char check[80];
		snprintf(check, sizeof(check), "tools[%zu] %s", i, c->tools[i].name);
		check_program(d, check, c->tools[i].command[0]);
	}
}
